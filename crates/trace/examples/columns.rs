//! Where a trace's bytes go: per events column, its raw size and its size compressed alone, in
//! bytes per event, over every stream of the file; with call stacks also the `stacks` column (with
//! sampled stacks `sample_gaps` and `stack_ids`) and the STACKS and MODULES chunks.
//! Usage: cargo run --release -p trace --example columns TRACE
use trace::codec::{payload_columns, COLUMN_NAMES, SAMPLED_STACK_COLUMNS, STACKS_COLUMN};
use trace::{RawChunk, TraceReader};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: columns TRACE")?;
    let mut reader = TraceReader::open(&path)?;
    let names: Vec<&str> = COLUMN_NAMES
        .iter()
        .copied()
        .chain([STACKS_COLUMN])
        .chain(SAMPLED_STACK_COLUMNS)
        .collect();
    let mut raw = vec![0usize; names.len()];
    let mut packed = vec![0usize; names.len()];
    let (mut records, mut stored, mut count) = (0u64, 0usize, 0usize);
    // The chunk headers (threads, time anchors): whole payloads minus their columns.
    let (mut whole_raw, mut headers_packed) = (0usize, 0usize);
    for stream in 0..reader.streams().len() {
        let chunks: Vec<RawChunk> = reader.chunks(stream)?.collect::<Result<_, _>>()?;
        count += chunks.len();
        for chunk in chunks {
            records += u64::from(chunk.chunk.records);
            stored += chunk.payload().len();
            let whole = zstd::bulk::decompress(&chunk.payload()[4..], 1 << 30)?;
            whole_raw += whole.len();
            let columns = payload_columns(chunk.payload())?;
            let header = whole.len() - columns.iter().map(|(_, c)| c.len()).sum::<usize>();
            headers_packed += zstd::bulk::compress(&whole[..header], 1)?.len();
            for (name, bytes) in &columns {
                let i = names.iter().position(|n| n == name).unwrap_or_default();
                raw[i] += bytes.len();
                packed[i] += zstd::bulk::compress(bytes, 1)?.len();
            }
        }
    }
    let per = |b: usize| b as f64 / records.max(1) as f64;
    println!(
        "{records} records in {count} events chunks, payloads {:.3} B/record",
        per(stored)
    );
    println!(
        "{:>10}: raw {:.3}, alone zstd -1 {:.3} B/record",
        "headers",
        per(whole_raw - raw.iter().sum::<usize>()),
        per(headers_packed)
    );
    for (i, name) in names.iter().enumerate() {
        println!(
            "{name:>10}: raw {:.3}, alone zstd -1 {:.3} B/record",
            per(raw[i]),
            per(packed[i])
        );
    }
    let file = std::fs::metadata(&path)?.len() as usize;
    println!(
        "whole file {:.3} B/record; events payloads {:.3}, the rest (STACKS, MODULES, headers) {:.3}",
        per(file),
        per(stored),
        per(file - stored)
    );
    Ok(())
}
