//! Tree discovery on real process trees.

mod common;

use common::{exists, stat_field, wait_until, Tree};
use procmem::{SamplerOptions, TreeSampler};

fn sampled_pids(sampler: &mut TreeSampler) -> Vec<u32> {
    let sample = sampler.sample().unwrap();
    assert_eq!(sample.unreadable, 0);
    sample.processes.iter().map(|p| p.pid).collect()
}

/// Root, three children, one grandchild: every one of them is found, and nothing else.
#[test]
fn finds_children_and_grandchildren() {
    let mut tree = Tree::spawn(
        "say(f'pid {os.getpid()}')\n\
         for i in range(3):\n\
         \x20   if os.fork() == 0:\n\
         \x20       if i == 0 and os.fork() == 0:\n\
         \x20           say(f'pid {os.getpid()}'); time.sleep(60); os._exit(0)\n\
         \x20       say(f'pid {os.getpid()}'); time.sleep(60); os._exit(0)\n\
         time.sleep(60)\n",
    );
    let expected = tree.pids(5);
    assert!(expected.contains(&tree.root));
    let mut sampler = TreeSampler::new(tree.root, SamplerOptions::default()).unwrap();
    let sample = sampler.sample().unwrap();
    let found: Vec<u32> = sample.processes.iter().map(|p| p.pid).collect();
    assert_eq!(found, expected);
    assert_eq!(sample.unreadable, 0);
    assert_eq!(sample.total.processes, 5);
    assert_eq!(
        sample.total.pss,
        sample.processes.iter().map(|p| p.pss).sum::<u64>()
    );
    for p in &sample.processes {
        assert!(p.comm.starts_with("python"), "{p:?}");
        assert!(p.rss > 0 && p.pss > 0 && p.vss >= p.rss, "{p:?}");
        let parent = stat_field(p.pid, 4).unwrap().parse::<u32>().unwrap();
        assert_eq!(p.ppid, parent);
    }
    // The grandchild's parent is a child, not the root.
    let grandchild = sample
        .processes
        .iter()
        .find(|p| p.ppid != tree.root && p.pid != tree.root)
        .expect("grandchild");
    assert!(expected.contains(&grandchild.ppid));
}

/// A sampler made before the command starts (alloclens run lists /proc then, so that its first
/// sample is quick) finds the same tree once told the root: every process listed before is outside
/// it, and the new ones are classified as they appear.
#[test]
fn a_sampler_made_before_the_start_finds_the_tree() {
    let mut sampler = TreeSampler::before_start(SamplerOptions::default()).unwrap();
    assert!(sampler.sample().unwrap().processes.is_empty());
    let mut tree = Tree::spawn(
        "say(f'pid {os.getpid()}')\n\
         for i in range(2):\n\
         \x20   if os.fork() == 0:\n\
         \x20       say(f'pid {os.getpid()}'); time.sleep(60); os._exit(0)\n\
         time.sleep(60)\n",
    );
    let expected = tree.pids(3);
    sampler.start(tree.root);
    assert_eq!(sampled_pids(&mut sampler), expected);
    let mut fresh = TreeSampler::new(tree.root, SamplerOptions::default()).unwrap();
    assert_eq!(sampled_pids(&mut fresh), expected);
}

/// Workers that come and go: a killed child disappears, a new one appears, in the same sampler.
#[test]
fn follows_workers_that_exit_and_start() {
    let mut tree = Tree::spawn(
        "signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped at once\n\
         def worker():\n\
         \x20   if os.fork() == 0:\n\
         \x20       say(f'pid {os.getpid()}'); time.sleep(60); os._exit(0)\n\
         say(f'pid {os.getpid()}')\n\
         worker(); worker()\n\
         for line in sys.stdin:\n\
         \x20   worker()\n",
    );
    let mut pids = tree.pids(3);
    let mut sampler = TreeSampler::new(tree.root, SamplerOptions::default()).unwrap();
    assert_eq!(sampled_pids(&mut sampler), pids);

    let victim = *pids.iter().find(|&&p| p != tree.root).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_until("the killed worker to be reaped", || !exists(victim));
    pids.retain(|&p| p != victim);
    assert_eq!(sampled_pids(&mut sampler), pids);

    tree.send("fork");
    pids.push(tree.next_pid());
    pids.sort_unstable();
    assert_eq!(sampled_pids(&mut sampler), pids);
}

/// A zombie holds no memory: it is listed in /proc but not sampled.
#[test]
fn zombies_are_skipped() {
    let mut tree = Tree::spawn(
        "say(f'pid {os.getpid()}')\n\
         pid = os.fork()\n\
         if pid == 0:\n\
         \x20   os._exit(0)\n\
         say(f'pid {pid}')\n\
         time.sleep(60)\n",
    );
    let root = tree.next_pid();
    let zombie = tree.next_pid();
    wait_until("the child to be a zombie", || {
        stat_field(zombie, 3).as_deref() == Some("Z")
    });
    let mut sampler = TreeSampler::new(tree.root, SamplerOptions::default()).unwrap();
    assert_eq!(sampled_pids(&mut sampler), vec![root]);
}

/// `is_alive`, the one answer of every "is it alive" check: a process whose main thread called
/// pthread_exit shows state Z while its other thread runs, and is alive (every check used to call
/// it gone); once that thread ends too it is a zombie, not alive, and after the reap it is gone.
#[test]
fn a_program_whose_leader_exited_is_alive_until_its_last_thread_ends() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let source = dir.join("leader_exits.c");
    std::fs::write(
        &source,
        "#include <pthread.h>\n#include <unistd.h>\n\
         static void *work(void *a) { (void)a; read(0, &a, 1); return 0; }\n\
         int main(void) { pthread_t t; pthread_create(&t, 0, work, 0); pthread_exit(0); }\n",
    )
    .unwrap();
    let exe = dir.join("leader_exits");
    let cc = std::process::Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(&source)
        .status()
        .unwrap();
    assert!(cc.success());
    let mut child = std::process::Command::new(&exe)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_until("the main thread to exit", || {
        stat_field(pid, 3).as_deref() == Some("Z")
    });
    assert_eq!(stat_field(pid, 20).as_deref(), Some("2"));
    assert!(procmem::is_alive(pid), "the worker thread runs");
    // The worker reads stdin: closing it ends the worker, hence the process.
    drop(child.stdin.take());
    wait_until("the worker to end", || {
        stat_field(pid, 20).as_deref() == Some("1")
    });
    assert_eq!(stat_field(pid, 3).as_deref(), Some("Z"));
    assert!(!procmem::is_alive(pid), "a zombie");
    child.wait().unwrap();
    assert!(!procmem::is_alive(pid), "reaped");
    assert!(procmem::is_alive(std::process::id()));
}

/// A root that does not exist gives empty samples, not errors.
#[test]
fn missing_root_gives_empty_samples() {
    let mut sampler = TreeSampler::new(u32::MAX - 1, SamplerOptions::default()).unwrap();
    let sample = sampler.sample().unwrap();
    assert!(sample.processes.is_empty());
    assert_eq!(sample.total.processes, 0);
    assert_eq!(sample.total.pss, 0);
}

/// Samples serialise to JSON with sizes as plain byte counts.
#[test]
fn sample_serialises() {
    let mut sampler = TreeSampler::new(std::process::id(), SamplerOptions::default()).unwrap();
    let sample = sampler.sample().unwrap();
    let json = serde_json::to_value(&sample).unwrap();
    let me = json["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == std::process::id())
        .expect("our own process in the sample");
    assert!(me["rss"].as_u64().unwrap() > 0);
    assert_eq!(json["total"]["pss"], sample.total.pss);
    assert!(json.get("at").is_none());
}
