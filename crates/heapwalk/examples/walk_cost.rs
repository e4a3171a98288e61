//! The CPU time of one heap walk and split of a running glibc process:
//! `cargo run --release -p heapwalk --example walk_cost -- PID`.
fn main() {
    let Some(pid) = std::env::args().nth(1).and_then(|a| a.parse::<u32>().ok()) else {
        eprintln!("usage: walk_cost PID");
        std::process::exit(2);
    };
    let mut reader = procmem::ResidencyReader::new();
    for _ in 0..3 {
        let started = procmem::thread_cpu_time();
        let split = heapwalk::read_process(pid, &mut reader);
        let cpu = procmem::thread_cpu_time().saturating_sub(started);
        println!("{:.1} ms of CPU: {split:?}", cpu.as_secs_f64() * 1e3);
    }
}
