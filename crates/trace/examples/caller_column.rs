//! What an "immediate caller" column would cost (issue 27, item 3): from a trace recorded with
//! `--stacks=all`, takes each allocation's frame 0 (the return address into the function that
//! called the allocator, what `__builtin_return_address(0)` gives the shim's hook), numbers the
//! distinct callers by first appearance, and compresses them the way an events column is
//! (LEB128 varints, one zstd level-1 frame per chunk of records). Prints the bytes per event
//! beside the trace's own size per event.
//!
//! Usage: cargo run --release -p trace --example caller_column -- TRACE [TRACE_WITHOUT_STACKS]
use std::collections::HashMap;

use trace::format::DEFAULT_CHUNK_RECORDS;
use trace::{Record, TraceReader};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: caller_column TRACE_WITH_STACKS_ALL [TRACE_WITHOUT_STACKS]");
        std::process::exit(2);
    };
    let mut reader = TraceReader::open(path).expect("open");
    let stacks = reader.stacks().clone();
    let (mut events, mut allocations, mut compressed, mut raw_bytes) = (0u64, 0u64, 0usize, 0usize);
    let mut ids: HashMap<u64, u64> = HashMap::new();
    for stream in 0..reader.streams().len() {
        let mut column = Vec::new();
        let mut in_chunk = 0usize;
        let mut flush = |column: &mut Vec<u8>| {
            raw_bytes += column.len();
            compressed += zstd::bulk::compress(column, 1).expect("zstd").len();
            column.clear();
        };
        for record in reader.records(stream).expect("records") {
            let Record::Event(e) = record.expect("decode") else {
                continue;
            };
            events += 1;
            in_chunk += 1;
            if let Some(&caller) = stacks.get(e.stack).and_then(|f| f.first()) {
                allocations += 1;
                let next = ids.len() as u64;
                varint(&mut column, *ids.entry(caller).or_insert(next));
            }
            if in_chunk == DEFAULT_CHUNK_RECORDS {
                flush(&mut column);
                in_chunk = 0;
            }
        }
        flush(&mut column);
    }
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    println!(
        "{events} events, {allocations} with a caller, {} distinct callers",
        ids.len()
    );
    println!(
        "caller column: {raw_bytes} B raw, {compressed} B zstd-1 = {:.4} B/event \
         (the traced file: {:.4} B/event)",
        compressed as f64 / events.max(1) as f64,
        size as f64 / events.max(1) as f64
    );
    if let Some(plain) = args.get(1) {
        let plain_size = std::fs::metadata(plain).map(|m| m.len()).unwrap_or(0);
        println!(
            "without stacks: {:.4} B/event; the caller column would add {:.1} %",
            plain_size as f64 / events.max(1) as f64,
            100.0 * compressed as f64 / plain_size.max(1) as f64
        );
    }
}
