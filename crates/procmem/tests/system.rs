//! Mapped files of a process with a preloaded allocator, KSM counters, own CPU time.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::wait_until;
use procmem::{mapped_files, own_cpu_time, read_ksm, read_process_ksm, thread_cpu_time};

const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

struct Killed(std::process::Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn libc_mapped(files: &[PathBuf]) -> bool {
    files.iter().any(|f| {
        f.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("libc.so"))
    })
}

#[test]
fn preloaded_allocator_is_mapped() {
    assert!(
        Path::new(JEMALLOC).exists(),
        "{JEMALLOC} is needed by this test (apt-get install libjemalloc2)"
    );
    let jemalloc = std::fs::canonicalize(JEMALLOC).unwrap();
    let with = Killed(
        Command::new("sleep")
            .arg("30")
            .env("LD_PRELOAD", JEMALLOC)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let without = Killed(
        Command::new("sleep")
            .arg("30")
            .env_remove("LD_PRELOAD")
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Right after fork the child still maps *our* files; wait until exec has loaded libc.
    let mut files = Vec::new();
    wait_until("sleep to map libc", || {
        files = mapped_files(with.0.id()).unwrap();
        libc_mapped(&files) && files.iter().any(|f| f.ends_with("sleep"))
    });
    wait_until("sleep to map its allocator", || {
        files = mapped_files(with.0.id()).unwrap();
        files.contains(&jemalloc)
    });
    let mut plain = Vec::new();
    wait_until("the second sleep to map libc", || {
        plain = mapped_files(without.0.id()).unwrap();
        libc_mapped(&plain) && plain.iter().any(|f| f.ends_with("sleep"))
    });
    assert!(!plain.contains(&jemalloc), "{plain:?}");
    let mut dedup = files.clone();
    dedup.dedup();
    assert_eq!(dedup, files, "paths are distinct and sorted");
}

#[test]
fn ksm_counters_match_sysfs() {
    let Some(ksm) = read_ksm().unwrap() else {
        assert!(!Path::new("/sys/kernel/mm/ksm").exists());
        return;
    };
    let raw = |name: &str| -> u64 {
        std::fs::read_to_string(format!("/sys/kernel/mm/ksm/{name}"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    // Settings do not move while we read them (counters may, if ksmd runs).
    assert_eq!(ksm.pages_to_scan, raw("pages_to_scan"));
    assert_eq!(ksm.sleep_millisecs, raw("sleep_millisecs"));
    assert_eq!(ksm.run, raw("run"));
    assert!(ksm.page_size.is_power_of_two() && ksm.page_size >= 4096);

    let me = std::process::id();
    match read_process_ksm(me).unwrap() {
        Some(mine) => {
            let raw: u64 = std::fs::read_to_string(format!("/proc/{me}/ksm_merging_pages"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            assert_eq!(mine.merging_pages, raw);
            if Path::new(&format!("/proc/{me}/ksm_stat")).exists() {
                assert!(
                    mine.rmap_items.is_some() && mine.mergeable.is_some(),
                    "{mine:?}"
                );
            }
        }
        None => assert!(!Path::new(&format!("/proc/{me}/ksm_merging_pages")).exists()),
    }
    assert_eq!(read_process_ksm(u32::MAX - 1).unwrap(), None);
}

#[test]
fn cpu_time_grows_with_work() {
    let (self_before, thread_before) = (own_cpu_time(), thread_cpu_time());
    let mut x = 0u64;
    // Spin until the clock moves (tick granularity); the bound only guards against a hang.
    let start = std::time::Instant::now();
    while thread_cpu_time() == thread_before && start.elapsed().as_secs() < 10 {
        for i in 0..100_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }
    let thread_after = thread_cpu_time();
    assert!(thread_after > thread_before);
    assert!(own_cpu_time() > self_before);
    assert!(thread_after <= own_cpu_time());
}
