//! Re-encodes a trace's events with this build's encoder and prints bytes per record: for trying
//! encoding changes on real traces (the file is read with this build's decoder, so it must be a
//! file written by the same format version).
//! A trace recorded without addresses is re-encoded without them, one with stacks with them. Also prints the time spent in
//! the encoder (compression included), the figure to compare when changing the encoder.
//! Usage: cargo run --release -p trace --example reencode TRACE [LEVEL]
use std::time::{Duration, Instant};

use trace::{ChunkEncoder, Record, TraceReader};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: reencode TRACE [LEVEL]")?;
    let level: i32 = args.next().and_then(|l| l.parse().ok()).unwrap_or(1);
    let mut reader = TraceReader::open(&path)?;
    let without_addresses = reader.header().no_addresses;
    let (mut records, mut bytes) = (0u64, 0usize);
    let mut encoding = Duration::ZERO;
    for stream in 0..reader.streams().len() {
        let mut enc = ChunkEncoder::new(level);
        if without_addresses {
            enc = enc.without_addresses();
        }
        // ALLOCLENS_REENCODE_NO_STACKS=1 drops the stack ids: the stack column's share of the bytes.
        if reader.has_stacks() && std::env::var_os("ALLOCLENS_REENCODE_NO_STACKS").is_none() {
            enc = if reader.header().sampled_stack_chunks() {
                enc.with_sampled_stacks()
            } else {
                enc.with_stacks(reader.header().free_stacks)
            };
        }
        enc.push_anchor(0, 0);
        // Decoded a chunk's worth at a time, so that the encoder is timed alone.
        let mut chunk: Vec<Record> = Vec::new();
        let mut all = reader.records(stream)?.peekable();
        while all.peek().is_some() {
            chunk.clear();
            for record in all.by_ref().take(trace::format::DEFAULT_CHUNK_RECORDS) {
                chunk.push(record?);
            }
            let t = Instant::now();
            for record in &chunk {
                match record {
                    Record::Event(e) => enc.push_event(e)?,
                    Record::Marker(m) => enc.push_marker(m)?,
                }
            }
            bytes += enc.finish()?.map_or(0, |c| c.payload.len());
            encoding += t.elapsed();
            records += chunk.len() as u64;
        }
    }
    println!(
        "{records} records, {:.3} B/record, encoded in {:.3} s ({:.1} ns/record){}",
        bytes as f64 / records.max(1) as f64,
        encoding.as_secs_f64(),
        encoding.as_secs_f64() * 1e9 / records.max(1) as f64,
        if without_addresses {
            ", without addresses"
        } else {
            ""
        }
    );
    Ok(())
}
