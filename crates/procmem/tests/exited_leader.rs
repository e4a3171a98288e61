//! A process whose main thread has called pthread_exit while another thread runs on: the leader is
//! a zombie and /proc/PID shows no memory, yet the process holds its memory and is sampled in full
//! (through a live thread).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use procmem::{SamplerOptions, TreeSampler};

const MIB: u64 = 1 << 20;
/// What the program holds, touched.
const HELD: u64 = 16 * MIB;

struct LeaderExit {
    child: Child,
    stdout: BufReader<ChildStdout>,
    stdin: Option<ChildStdin>,
}

impl LeaderExit {
    /// Starts testkit's leader_exit holding 16 MiB; with `wait`, its main thread exits only on
    /// [`LeaderExit::let_main_exit`].
    fn start(wait: bool) -> LeaderExit {
        let mut command = Command::new(testkit::program("leader_exit"));
        command.args(["16", "60"]);
        if wait {
            command.arg("wait");
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let stdin = child.stdin.take();
        let mut p = LeaderExit {
            child,
            stdout,
            stdin,
        };
        p.expect("allocated");
        if !wait {
            p.expect("ready");
        }
        p
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn expect(&mut self, what: &str) {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), what);
    }

    fn let_main_exit(&mut self) {
        writeln!(self.stdin.take().unwrap(), "go").unwrap();
        self.expect("ready");
    }

    /// "ready" comes once main's pthread_exit released its thread; the kernel marks it a zombie
    /// a moment later.
    fn wait_for_zombie_leader(&self) {
        let pid = self.pid();
        testkit::wait_until(
            "the main thread to be a zombie",
            Duration::from_secs(10),
            || procmem::read_stat(pid).unwrap().state == b'Z',
        );
    }
}

impl Drop for LeaderExit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The one process of the tree, read in full: its name, parent and the 16 MiB it holds.
fn assert_sampled(sampler: &mut TreeSampler, full: bool, pid: u32) {
    let sample = if full {
        sampler.sample_full()
    } else {
        sampler.sample()
    }
    .unwrap();
    assert_eq!(sample.unreadable, 0, "{sample:?}");
    let [p] = &sample.processes[..] else {
        panic!("expected process {pid} alone: {sample:?}");
    };
    assert_eq!(p.pid, pid);
    assert_eq!(p.comm, "leader_exit");
    assert_eq!(p.ppid, std::process::id());
    assert!(p.rss >= HELD && p.anonymous >= HELD, "{p:?}");
    assert!(p.uss >= HELD && p.uss <= p.pss && p.pss <= p.rss, "{p:?}");
    assert!(p.vss >= p.rss && p.vm_hwm >= HELD, "{p:?}");
    assert_eq!(sample.total.processes, 1);
}

#[test]
fn a_process_whose_main_thread_exited_is_sampled_in_full() {
    let program = LeaderExit::start(false);
    let pid = program.pid();
    program.wait_for_zombie_leader();
    assert!(procmem::is_alive(pid));

    let mut sampler = TreeSampler::new(pid, SamplerOptions::default()).unwrap();
    assert_sampled(&mut sampler, false, pid);
    // Again with the files kept open, carried and forced.
    assert_sampled(&mut sampler, false, pid);
    assert_sampled(&mut sampler, true, pid);

    let mut resident = procmem::ResidentSampler::new(pid, SamplerOptions::default()).unwrap();
    for _ in 0..2 {
        let r = resident.sample().unwrap();
        assert_eq!((r.processes, r.unreadable), (1, 0), "{r:?}");
        assert!(r.rss >= HELD && r.vss >= r.rss, "{r:?}");
    }

    let dir = procmem::process_dir(pid);
    assert!(dir.starts_with(format!("/proc/{pid}/task/")), "{dir:?}");
    let split = procmem::smaps_split(pid).unwrap();
    assert!(split.rss() >= HELD, "{split:?}");
    let files = procmem::mapped_files(pid).unwrap();
    let exe = std::fs::canonicalize(testkit::program("leader_exit")).unwrap();
    assert!(files.contains(&exe), "{exe:?} not in {files:?}");
}

/// The main thread exits while the sampler keeps its files open: the next sample goes on through
/// the live thread, and so does the resident reading.
#[test]
fn main_thread_exiting_during_sampling_is_followed() {
    let mut program = LeaderExit::start(true);
    let pid = program.pid();
    let mut sampler = TreeSampler::new(pid, SamplerOptions::default()).unwrap();
    let mut resident = procmem::ResidentSampler::new(pid, SamplerOptions::default()).unwrap();
    assert_sampled(&mut sampler, false, pid);
    assert!(resident.sample().unwrap().rss >= HELD);
    assert_eq!(
        procmem::process_dir(pid),
        std::path::PathBuf::from(format!("/proc/{pid}"))
    );

    program.let_main_exit();
    program.wait_for_zombie_leader();
    assert_sampled(&mut sampler, false, pid);
    assert_sampled(&mut sampler, true, pid);
    let r = resident.sample().unwrap();
    assert_eq!((r.processes, r.unreadable), (1, 0), "{r:?}");
    assert!(r.rss >= HELD, "{r:?}");
}
