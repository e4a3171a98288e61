//! Adaptive PSS refresh on real process trees: smaps_rollup is re-read when RSS moves, when the tree
//! gains or loses a process, on demand, and always with `PssRefresh::EverySample`.

mod common;

use common::{exists, wait_until, Tree};
use procmem::{PssRefresh, SamplerOptions, TreeSample, TreeSampler};

/// Never reached in these tests: only the other triggers can refresh.
const NEVER_TOO_OLD: PssRefresh = PssRefresh::Adaptive { max_age: 1_000_000 };

fn sampler(root: u32, pss_refresh: PssRefresh) -> TreeSampler {
    let options = SamplerOptions {
        pss_refresh,
        ..Default::default()
    };
    TreeSampler::new(root, options).unwrap()
}

fn process(sample: &TreeSample, pid: u32) -> &procmem::ProcessMemory {
    sample
        .processes
        .iter()
        .find(|p| p.pid == pid)
        .unwrap_or_else(|| panic!("pid {pid} not in {sample:?}"))
}

/// Samples until `n` processes are there and every one carries its PSS forward (the interpreters
/// have settled: no RSS move); returns that sample.
fn settled(sampler: &mut TreeSampler, n: usize) -> TreeSample {
    for _ in 0..200 {
        let s = sampler.sample().unwrap();
        if s.processes.len() == n && s.processes.iter().all(|p| p.pss_age > 0) {
            assert_eq!(s.stale_processes as usize, n);
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the test tree never settled");
}

fn sampled_pids(sample: &TreeSample) -> Vec<u32> {
    sample.processes.iter().map(|p| p.pid).collect()
}

/// Root and one child; on "grow" the root allocates and touches 8 MB, on "fork" it starts another
/// child; children are reaped at once.
fn spawn_tree() -> (Tree, Vec<u32>) {
    let mut tree = Tree::spawn(
        "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n\
         def child():\n\
         \x20   if os.fork() == 0:\n\
         \x20       say(f'pid {os.getpid()}'); time.sleep(60); os._exit(0)\n\
         say(f'pid {os.getpid()}')\n\
         child()\n\
         kept = []\n\
         for line in sys.stdin:\n\
         \x20   if line.startswith('grow'):\n\
         \x20       d = bytearray(8 << 20)\n\
         \x20       for i in range(0, len(d), 4096): d[i] = 1\n\
         \x20       kept.append(d); say('pid 0')\n\
         \x20   else:\n\
         \x20       child()\n",
    );
    let pids = tree.pids(2);
    (tree, pids)
}

#[test]
fn growth_gets_a_fresh_pss_at_the_next_sample() {
    const GROWTH: u64 = 8 << 20;
    let (mut tree, pids) = spawn_tree();
    let mut sampler = sampler(tree.root, NEVER_TOO_OLD);
    let before = settled(&mut sampler, 2);
    tree.send("grow");
    assert_eq!(tree.next_pid(), 0); // the root has touched its 8 MB
    let after = sampler.sample().unwrap();
    assert_eq!(sampled_pids(&after), pids);
    let (root_before, root_after) = (process(&before, tree.root), process(&after, tree.root));
    assert_eq!(root_after.pss_age, 0, "{root_after:?}");
    // Anonymous PSS only: parallel tests' interpreters map the same files and move the rest.
    let pss_anon = |p: &procmem::ProcessMemory| p.pss_anon.expect("Pss_Anon (Linux >= 5.8)");
    assert!(
        pss_anon(root_after) >= pss_anon(root_before) + GROWTH * 9 / 10,
        "{root_before:?} {root_after:?}"
    );
    // The idle child's figures are still carried forward.
    let child = pids.iter().find(|&&p| p != tree.root).unwrap();
    assert!(process(&after, *child).pss_age > 0);
    assert_eq!(after.stale_processes, 1);
}

#[test]
fn fork_and_exit_make_every_process_fresh() {
    let (mut tree, mut pids) = spawn_tree();
    let mut sampler = sampler(tree.root, NEVER_TOO_OLD);
    settled(&mut sampler, 2);
    tree.send("fork");
    let newcomer = tree.next_pid();
    pids.push(newcomer);
    pids.sort_unstable();
    let forked = sampler.sample().unwrap();
    assert_eq!(sampled_pids(&forked), pids);
    assert_eq!(forked.stale_processes, 0);
    assert!(
        forked.processes.iter().all(|p| p.pss_age == 0),
        "{forked:?}"
    );

    settled(&mut sampler, 3);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(newcomer as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_until("the killed child to be reaped", || !exists(newcomer));
    let exited = sampler.sample().unwrap();
    assert_eq!(exited.processes.len(), 2);
    assert_eq!(exited.stale_processes, 0);
    assert!(
        exited.processes.iter().all(|p| p.pss_age == 0),
        "{exited:?}"
    );
}

#[test]
fn every_sample_policy_is_always_fresh() {
    let (tree, _) = spawn_tree();
    let mut sampler = sampler(tree.root, PssRefresh::EverySample);
    for _ in 0..5 {
        let s = sampler.sample().unwrap();
        assert_eq!(s.processes.len(), 2);
        assert_eq!(s.stale_processes, 0);
        assert!(s.processes.iter().all(|p| p.pss_age == 0 && p.pss > 0));
    }
}

#[test]
fn sample_full_is_fresh_and_resets_ages() {
    let (tree, _) = spawn_tree();
    let mut sampler = sampler(tree.root, NEVER_TOO_OLD);
    let stale = settled(&mut sampler, 2);
    let full = sampler.sample_full().unwrap();
    assert_eq!(full.stale_processes, 0);
    assert!(full.processes.iter().all(|p| p.pss_age == 0 && p.pss > 0));
    let next = sampler.sample().unwrap();
    for p in &next.processes {
        // Carried from the full read, unless the process moved in between.
        assert!(p.pss_age <= 1, "{p:?}");
    }
    assert!(stale.processes.iter().all(|p| p.pss_age > 0));
}

/// The default options are adaptive, with the documented bound.
#[test]
fn default_policy_is_adaptive_max_age_10() {
    assert_eq!(
        SamplerOptions::default().pss_refresh,
        PssRefresh::Adaptive { max_age: 10 }
    );
}
