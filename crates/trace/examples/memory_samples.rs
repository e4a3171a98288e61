//! Prints a trace's memory samples (docs/trace-format.md, "Memory samples") as tab-separated
//! columns, one line per sample: `cargo run -p trace --example memory_samples -- TRACE`.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: memory_samples TRACE")?;
    let reader = trace::TraceReader::open(&path)?;
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    println!("pid\texec\tseq\tseq_end\tt_ns\trss\tanon\tpss\theap\tfile\tstack");
    for (i, stream) in reader.streams().iter().enumerate() {
        for s in reader.memory_samples(i) {
            println!(
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                stream.info.pid,
                stream.info.exec_index,
                s.seq,
                s.seq_end,
                s.t_ns,
                s.rss,
                s.anon,
                opt(s.pss),
                opt(s.heap),
                opt(s.file),
                opt(s.stack)
            );
        }
    }
    Ok(())
}
