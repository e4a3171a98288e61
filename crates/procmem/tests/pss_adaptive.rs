//! A stable tree under the adaptive policy: smaps_rollup is re-read only every `max_age` samples,
//! and the PSS carried forward in between stays as close to the independent /proc/PID/smaps sum as
//! a fresh one. Alone in its binary: parallel tests' python trees would move our file PSS.

mod common;

use std::collections::HashMap;

use common::{smaps_pss, Tree};
use procmem::{PssRefresh, SamplerOptions, TreeSample, TreeSampler};

const MAX_AGE: u32 = 4;

fn smaps_all(pids: &[u32]) -> HashMap<u32, (u64, u64)> {
    pids.iter().map(|&p| (p, smaps_pss(p))).collect()
}

/// A parent holding 16 MB shared copy-on-write with two children that hold 8 MB each.
fn spawn_tree() -> (Tree, Vec<u32>) {
    let mut tree = Tree::spawn(
        "data = bytearray(16 << 20)\n\
         for i in range(0, len(data), 4096): data[i] = 1\n\
         say(f'pid {os.getpid()}')\n\
         for _ in range(2):\n\
         \x20   if os.fork() == 0:\n\
         \x20       own = bytearray(8 << 20)\n\
         \x20       for i in range(0, len(own), 4096): own[i] = 1\n\
         \x20       say(f'pid {os.getpid()}'); time.sleep(60); os._exit(0)\n\
         time.sleep(60)\n",
    );
    let pids = tree.pids(3);
    (tree, pids)
}

/// Rollup PSS >= smaps sum, by less than 1 kB per mapping (smaps truncates each mapping to kB).
fn within_smaps_tolerance(sample: &TreeSample, smaps: &HashMap<u32, (u64, u64)>) {
    for p in &sample.processes {
        let (sum, mappings) = smaps[&p.pid];
        assert!(
            sum <= p.pss && p.pss < sum + mappings * 1024 + 1,
            "pid {} (pss_age {}): rollup {} vs smaps {} over {} mappings",
            p.pid,
            p.pss_age,
            p.pss,
            sum,
            mappings
        );
    }
}

#[test]
fn stable_tree_rereads_every_max_age_samples_and_stays_exact() {
    let (tree, pids) = spawn_tree();
    let options = SamplerOptions {
        pss_refresh: PssRefresh::Adaptive { max_age: MAX_AGE },
        ..Default::default()
    };
    let mut sampler = TreeSampler::new(tree.root, options).unwrap();
    // Wait until no process's RSS moves over a whole cycle (the interpreters settle after start).
    let mut quiet = 0;
    for _ in 0..200 {
        let s = sampler.sample().unwrap();
        quiet = if s.processes.len() == 3 && s.processes.iter().all(|p| p.pss_age > 0) {
            quiet + 1
        } else {
            0
        };
        if quiet == MAX_AGE - 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(quiet, MAX_AGE - 1, "the test tree never settled");

    // In phase from here: every process fresh at once, then carried for MAX_AGE - 1 samples.
    // smaps around the fresh read, if it did not move meanwhile.
    let smaps_before = smaps_all(&pids);
    let mut fresh = sampler.sample_full().unwrap();
    let mut smaps_at_fresh = Some(smaps_all(&pids)).filter(|s| *s == smaps_before);
    for cycle in 0..20 {
        for k in 1..=MAX_AGE {
            let expected_age = k % MAX_AGE;
            let smaps_before = smaps_all(&pids);
            let s = sampler.sample().unwrap();
            for (p, f) in s.processes.iter().zip(&fresh.processes) {
                assert_eq!(p.pss_age, expected_age, "cycle {cycle}, sample {k}: {p:?}");
                if expected_age > 0 {
                    assert_eq!(
                        (p.pss, p.uss, p.swap),
                        (f.pss, f.uss, f.swap),
                        "carried: {p:?}"
                    );
                    assert_eq!((p.shared_clean, p.pss_anon), (f.shared_clean, f.pss_anon));
                }
            }
            assert_eq!(s.stale_processes, if expected_age > 0 { 3 } else { 0 });
            if expected_age == 0 {
                fresh = s;
                smaps_at_fresh = Some(smaps_all(&pids)).filter(|s| *s == smaps_before);
            } else if expected_age == MAX_AGE - 1 {
                // The stalest carried figures against smaps now, if nothing moved PSS since the
                // read (other programs on the machine mapping the same files do).
                let smaps_now = smaps_all(&pids);
                if smaps_at_fresh.as_ref() == Some(&smaps_now) {
                    within_smaps_tolerance(&s, &smaps_now);
                    return;
                }
            }
        }
    }
    panic!("the PSS of the test tree kept moving");
}
