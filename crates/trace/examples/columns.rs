//! Where a trace's bytes go: per events column, its raw size and its size compressed alone, in
//! bytes per event, over every stream of the file.
//! Usage: cargo run --release -p trace --example columns TRACE
use trace::codec::{payload_columns, COLUMN_NAMES};
use trace::{RawChunk, TraceReader};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: columns TRACE")?;
    let mut reader = TraceReader::open(&path)?;
    let mut raw = vec![0usize; COLUMN_NAMES.len()];
    let mut packed = vec![0usize; COLUMN_NAMES.len()];
    let (mut records, mut stored) = (0u64, 0usize);
    for stream in 0..reader.streams().len() {
        let chunks: Vec<RawChunk> = reader.chunks(stream)?.collect::<Result<_, _>>()?;
        for chunk in chunks {
            records += u64::from(chunk.chunk.records);
            stored += chunk.payload().len();
            for (i, (_, bytes)) in payload_columns(chunk.payload())?.iter().enumerate() {
                raw[i] += bytes.len();
                packed[i] += zstd::bulk::compress(bytes, 1)?.len();
            }
        }
    }
    let per = |b: usize| b as f64 / records.max(1) as f64;
    println!(
        "{records} records, events payloads {:.3} B/record",
        per(stored)
    );
    for (i, name) in COLUMN_NAMES.iter().enumerate() {
        println!(
            "{name:>10}: raw {:.3}, alone zstd -1 {:.3} B/record",
            per(raw[i]),
            per(packed[i])
        );
    }
    Ok(())
}
