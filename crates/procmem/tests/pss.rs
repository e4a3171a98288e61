//! PSS totals against independent sums of /proc/PID/smaps (what smem adds up) and smem itself.

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::{smaps_pss, Tree};
use procmem::{SamplerOptions, TreeSample, TreeSampler};

const SHARED: u64 = 16 << 20;
const PRIVATE: u64 = 8 << 20;

/// A parent holding SHARED bytes, touched, then two children that keep sharing them (copy on write,
/// never written) and each touch PRIVATE bytes of their own.
fn spawn_tree() -> (Tree, Vec<u32>) {
    let mut tree = Tree::spawn(&format!(
        "data = bytearray({SHARED})\n\
         for i in range(0, len(data), 4096): data[i] = 1\n\
         say(f'pid {{os.getpid()}}')\n\
         for _ in range(2):\n\
         \x20   if os.fork() == 0:\n\
         \x20       own = bytearray({PRIVATE})\n\
         \x20       for i in range(0, len(own), 4096): own[i] = 1\n\
         \x20       say(f'pid {{os.getpid()}}'); time.sleep(60); os._exit(0)\n\
         time.sleep(60)\n"
    ));
    let pids = tree.pids(3);
    (tree, pids)
}

/// A full sample (every PSS read now) taken while smaps stays the same before and after it (the
/// tree is idle, but the interpreter may still settle right after start).
fn stable_sample(
    sampler: &mut TreeSampler,
    pids: &[u32],
) -> (TreeSample, HashMap<u32, (u64, u64)>) {
    for _ in 0..20 {
        let before: HashMap<u32, (u64, u64)> = pids.iter().map(|&p| (p, smaps_pss(p))).collect();
        let sample = sampler.sample_full().unwrap();
        let after: HashMap<u32, (u64, u64)> = pids.iter().map(|&p| (p, smaps_pss(p))).collect();
        if before == after {
            return (sample, after);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the memory of the test tree never settled");
}

#[test]
fn pss_total_matches_smaps_sum_and_smem() {
    let (tree, pids) = spawn_tree();
    let mut sampler = TreeSampler::new(tree.root, SamplerOptions::default()).unwrap();
    let (sample, smaps) = stable_sample(&mut sampler, &pids);
    assert_eq!(
        sample.processes.iter().map(|p| p.pid).collect::<Vec<_>>(),
        pids
    );

    // smaps_rollup keeps PSS in fixed point until the end; smaps truncates each mapping to whole
    // kB. So rollup >= smaps sum, by less than 1 kB per mapping.
    let (mut smaps_total, mut mappings_total) = (0, 0);
    for p in &sample.processes {
        let (sum, mappings) = smaps[&p.pid];
        assert!(
            sum <= p.pss && p.pss < sum + mappings * 1024 + 1,
            "pid {}: rollup {} vs smaps {} over {} mappings",
            p.pid,
            p.pss,
            sum,
            mappings
        );
        smaps_total += sum;
        mappings_total += mappings;
    }
    assert!(sample.total.pss >= smaps_total);
    assert!(sample.total.pss <= smaps_total + mappings_total * 1024);

    // The SHARED bytes are resident in three processes but counted once in PSS.
    assert!(
        sample.total.rss - sample.total.pss >= 2 * SHARED * 9 / 10,
        "{:?}",
        sample.total
    );
    let root = sample
        .processes
        .iter()
        .find(|p| p.pid == tree.root)
        .unwrap();
    assert!(root.anonymous >= SHARED && root.shared_dirty >= SHARED * 9 / 10);
    for child in sample.processes.iter().filter(|p| p.pid != tree.root) {
        assert!(child.uss >= PRIVATE, "{child:?}");
        assert!(child.anonymous >= SHARED + PRIVATE, "{child:?}");
    }

    check_against_smem(&mut sampler, &pids);
}

/// In the same test as the smaps comparison on purpose: a parallel test's python tree would share
/// the interpreter's file pages with ours and move our PSS when it exits.
fn check_against_smem(sampler: &mut TreeSampler, pids: &[u32]) {
    let smem = ["/usr/bin/smem", "/usr/local/bin/smem"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("smem is needed by this test (apt-get install smem)");
    // PSS of shared file pages moves whenever any process on the machine maps or unmaps them, so
    // retry until our figures are the same before and after smem ran.
    for _ in 0..10 {
        let (before, _) = stable_sample(sampler, pids);
        let out = Command::new(smem)
            .args(["-H", "-c", "pid pss"])
            .output()
            .unwrap();
        assert!(out.status.success(), "smem failed: {out:?}");
        let (after, smaps) = stable_sample(sampler, pids);
        if before.total.pss != after.total.pss {
            continue;
        }
        // smem prints "pid pss" in kB, one line per process it can read.
        let smem_kb: HashMap<u32, u64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
            })
            .collect();
        let smem_total: u64 = pids.iter().map(|p| smem_kb[p] * 1024).sum();
        // smem is a python3 program: while it runs, it maps the same interpreter files as our
        // tree, which lowers our tree's PSS of those file pages (never of anonymous memory). So smem
        // may read less than our idle tree by up to its file-backed PSS, never more (beyond rounding).
        let mappings: u64 = smaps.values().map(|&(_, m)| m).sum();
        let pss_file = after.total.pss_file.expect("Pss_File (Linux >= 5.8)");
        assert!(
            smem_total <= after.total.pss + mappings * 1024
                && after.total.pss <= smem_total + pss_file + mappings * 1024,
            "procmem {} (of which file {}) vs smem {}",
            after.total.pss,
            pss_file,
            smem_total
        );
        return;
    }
    panic!("the PSS of the test tree kept moving while smem ran");
}
