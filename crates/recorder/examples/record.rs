//! Minimal front end for the library, for development and benchmarks when the full CLI is not
//! at hand: `cargo run -p recorder --example record -- OUT.alt CMD ARGS...` (OUT.alt is
//! replaced if it exists, as with `alloclens record --force`).
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(out) = args.next() else {
        eprintln!("usage: record OUT.alt CMD [ARGS...]");
        return ExitCode::from(2);
    };
    let mut options = recorder::RecordOptions::new(args.collect(), out.into());
    // Benchmarks record into the same file again and again.
    options.existing = recorder::Existing::Replace;
    // For measuring the level's cost (bench/record-overhead.sh): ZSTD_LEVEL=1 ...
    if let Some(level) = std::env::var("ZSTD_LEVEL")
        .ok()
        .and_then(|l| l.parse().ok())
    {
        options.zstd_level = level;
    }
    // For measuring the chunk size's effect: CHUNK_RECORDS=65536 ...
    if let Some(n) = std::env::var("CHUNK_RECORDS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        options.chunk_records = n;
    }
    // Recording with addresses (`alloclens record --addresses`): ADDRESSES=1 ...
    options.addresses = std::env::var_os("ADDRESSES").is_some();
    match recorder::record(&options) {
        Ok(s) => {
            eprintln!(
                "record: {} events, {} images, {} bytes ({:.3} B/event), {}",
                s.events,
                s.processes.len(),
                s.bytes,
                s.bytes as f64 / s.events.max(1) as f64,
                recorder::describe_status(&s.status)
            );
            for p in &s.processes {
                eprintln!(
                    "  pid {} ppid {} exec {} {} events {} {:?}",
                    p.pid, p.ppid, p.exec_index, p.command, p.events, p.end
                );
            }
            for w in &s.warnings {
                eprintln!("record: warning: {w}");
            }
            ExitCode::from(s.status.code().unwrap_or(1) as u8)
        }
        Err(e) => {
            eprintln!("record: {e}");
            ExitCode::from(2)
        }
    }
}
