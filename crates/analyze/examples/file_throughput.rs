//! End-to-end throughput of `analyze_file`: reading, decoding (on a helper thread) and analysing a
//! trace file of a synthetic stream, with the peak resident memory.
//!
//! `cargo run --release -p analyze --example file_throughput -- [EVENTS] [LIVE_SLOTS] [YOUNG_SHARE]`
//! (defaults: 20 M events, 65 536, 0.95). The file is written to a temporary directory first.
//! `... --example file_throughput -- --file PATH` analyses an existing trace instead (e.g. one
//! written by `alloclens record`; `KEEP_TRACE=PATH` keeps the synthetic one there).
//! `REPORT_JSON=PATH` writes the analysis as JSON (to compare reports byte for byte across changes).
use std::time::Instant;

use analyze::{analyze_file, Options};
use trace::{EndReason, ProcessInfo, Record, TraceHeader, TraceWriter, Trailer};

#[path = "synthetic/mod.rs"]
mod synthetic;
use synthetic::Synthetic;

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--file") {
        let path = args.nth(1).expect("--file PATH");
        measure(std::path::Path::new(&path));
        return;
    }
    let events: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000_000);
    let slots: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(65_536);
    let young: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0.95);
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = match std::env::var_os("KEEP_TRACE") {
        Some(p) => std::path::PathBuf::from(p),
        None => dir.path().join("synthetic.alt"),
    };
    let info = ProcessInfo {
        pid: 1,
        ppid: 0,
        exec_index: 0,
        cmdline: vec!["synthetic".into()],
        start_unix_ns: 0,
        truncated: false,
    };
    {
        let file = std::fs::File::create(&path).expect("create trace");
        let mut w = TraceWriter::new(std::io::BufWriter::new(file), &TraceHeader::default())
            .expect("header");
        let id = w.begin_process(&info).expect("process");
        let mut source = Synthetic::new(events, slots, young);
        let mut n = 0u64;
        loop {
            let chunk: Vec<Record> = source.by_ref().take(1 << 16).collect();
            if chunk.is_empty() {
                break;
            }
            n += chunk.len() as u64;
            w.write_records(id, &chunk, 1 << 16).expect("write");
        }
        w.end_process(id, EndReason::Exit, n).expect("end");
        w.finish(&Trailer::default()).expect("finish");
    }
    measure(&path);
}

fn measure(path: &std::path::Path) {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let t = Instant::now();
    let result = analyze_file(path, &Options::default()).expect("analysis");
    let secs = t.elapsed().as_secs_f64();
    if let Some(out) = std::env::var_os("REPORT_JSON") {
        let file = std::fs::File::create(out).expect("create REPORT_JSON");
        analyze::output::json::write_json(&result.analysis, std::io::BufWriter::new(file))
            .expect("write REPORT_JSON");
    }
    let calls: u64 = result.analysis.processes.iter().map(|p| p.life_calls).sum();
    println!(
        "analyze_file: {calls} events ({:.2} B/event on disk) in {secs:.2} s = {:.1} M events/s; peak RSS {} MiB",
        size as f64 / calls as f64,
        calls as f64 / secs / 1e6,
        peak_rss_kib() / 1024
    );
}

/// VmHWM of this process, KiB (0 when unreadable).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
