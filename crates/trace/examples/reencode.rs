//! Re-encodes a trace's events with this build's encoder and prints bytes per record: for trying
//! encoding changes on real traces (the file is read with this build's decoder, so it must be a
//! file written by the same format version).
//! Usage: cargo run --release -p trace --example reencode TRACE [LEVEL]
use trace::{ChunkEncoder, Record, TraceReader};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: reencode TRACE [LEVEL]")?;
    let level: i32 = args.next().and_then(|l| l.parse().ok()).unwrap_or(1);
    let mut reader = TraceReader::open(&path)?;
    let (mut records, mut bytes) = (0u64, 0usize);
    for stream in 0..reader.streams().len() {
        let mut enc = ChunkEncoder::new(level);
        enc.push_anchor(0, 0);
        for record in reader.records(stream)? {
            match record? {
                Record::Event(e) => enc.push_event(&e)?,
                Record::Marker(m) => enc.push_marker(&m)?,
            }
            records += 1;
            if enc.len() >= trace::format::DEFAULT_CHUNK_RECORDS {
                bytes += enc.finish()?.map_or(0, |c| c.payload.len());
            }
        }
        bytes += enc.finish()?.map_or(0, |c| c.payload.len());
    }
    println!(
        "{records} records, {:.3} B/record",
        bytes as f64 / records.max(1) as f64
    );
    Ok(())
}
