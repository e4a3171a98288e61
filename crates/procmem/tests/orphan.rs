//! Orphans of the tree, reparented to the sampling process once it is a child subreaper.
//! Alone in its own test binary: becoming a subreaper is permanent for the process, and
//! `include_reparented_to_self` accepts every child of ours, so no other test may run beside it.

mod common;

use common::{stat_field, wait_until, Tree};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;
use procmem::{become_child_subreaper, SamplerOptions, TreeSampler};

fn pids(sampler: &mut TreeSampler) -> Vec<u32> {
    sampler
        .sample()
        .unwrap()
        .processes
        .iter()
        .map(|p| p.pid)
        .collect()
}

#[test]
fn orphaned_grandchild_is_still_sampled() {
    become_child_subreaper().unwrap();
    let me = std::process::id();
    // root R forks C, C forks grandchild G; C exits when told to, orphaning G.
    let mut tree = Tree::spawn(
        "say(f'pid {os.getpid()}')\n\
         if os.fork() == 0:\n\
         \x20   if os.fork() == 0:\n\
         \x20       say(f'pid {os.getpid()}'); time.sleep(60); os._exit(0)\n\
         \x20   say(f'pid {os.getpid()}')\n\
         \x20   sys.stdin.readline(); os._exit(0)\n\
         time.sleep(60)\n",
    );
    let root = tree.next_pid();
    // C and G announce themselves in either order (C used to sleep 0.1 s first, which a loaded
    // machine could outlast before G ran): G is the one whose parent is the other.
    let (a, b) = (tree.next_pid(), tree.next_pid());
    let (child, grandchild) = if stat_field(b, 4) == Some(a.to_string()) {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(stat_field(grandchild, 4), Some(child.to_string()));
    assert_eq!(stat_field(child, 4), Some(root.to_string()));
    let all = {
        let mut v = vec![root, child, grandchild];
        v.sort_unstable();
        v
    };
    let mut early = TreeSampler::new(root, SamplerOptions::default()).unwrap();
    assert_eq!(pids(&mut early), all);

    tree.send("exit");
    wait_until("the grandchild to be reparented to us", || {
        stat_field(grandchild, 4) == Some(me.to_string())
    });
    let mut expected = vec![root, grandchild];
    expected.sort_unstable();

    // Known before it was orphaned: stays in the tree (C is now a zombie, hence skipped).
    assert_eq!(pids(&mut early), expected);
    // Discovered after: only through its new parent, us.
    let include = SamplerOptions {
        include_reparented_to_self: true,
        ..Default::default()
    };
    let mut fresh = TreeSampler::new(root, include).unwrap();
    assert_eq!(pids(&mut fresh), expected);
    let mut strict = TreeSampler::new(root, SamplerOptions::default()).unwrap();
    assert_eq!(pids(&mut strict), vec![root]);

    drop(tree); // kills the process group, grandchild included
    let _ = waitpid(Pid::from_raw(grandchild as i32), None);
}
