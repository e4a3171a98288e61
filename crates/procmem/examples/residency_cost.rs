//! CPU time of one heap residency reading of a running process, each way, beside one smaps read:
//! `cargo run --release -p procmem --example residency_cost -- PID [ROUNDS]`.
use procmem::{own_cpu_time, smaps_reading, PagemapMethod, ResidencyReader};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(pid) = args.next().and_then(|a| a.parse::<u32>().ok()) else {
        eprintln!("usage: residency_cost PID [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let per_read = |what: &str, read: &mut dyn FnMut() -> u64| {
        let start = own_cpu_time();
        let mut figure = 0;
        for _ in 0..rounds {
            figure = read();
        }
        let each = (own_cpu_time() - start) / rounds;
        println!(
            "{what:>24}: {:>8.3} ms CPU per reading ({figure} bytes)",
            each.as_secs_f64() * 1e3
        );
    };
    per_read("smaps (heap Rss)", &mut || {
        smaps_reading(pid).unwrap().split.heap
    });
    for method in [PagemapMethod::Scan, PagemapMethod::Read] {
        let mut reader = ResidencyReader::with_method(method);
        per_read(&format!("pagemap {method:?}"), &mut || {
            reader.read(pid).unwrap().resident_bytes()
        });
    }
}
