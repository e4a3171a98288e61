//! `subsample_stacks IN OUT BYTES [SEED]`: rewrites a trace recorded with `record --stacks=all` as if
//! its stacks had been sampled at a mean of BYTES: each thread runs the recorder's Poisson process
//! (an exponentially distributed countdown of bytes, mean BYTES; an allocation that reaches it keeps
//! its stack and draws a new countdown), the other allocations lose their stack (id 0), and the
//! header says `stack_sample_bytes`. `bench/stacks-accuracy.sh` uses it to measure the estimator's
//! error alone, on the same run (no second recording, no ASLR, no scheduling differences).
use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::process::ExitCode;

use trace::{Record, TraceHeader, TraceReader, TraceWriter, Trailer};

/// splitmix64, seeded: the same seed gives the same sample.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An exponentially distributed number of bytes of mean `mean`.
    fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).ln()
    }
}

const BATCH: usize = 1 << 16;

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output, bytes, rest @ ..] = args.as_slice() else {
        return Err("usage: subsample_stacks IN OUT BYTES [SEED]".into());
    };
    let mean: u64 = bytes
        .parse()
        .ok()
        .filter(|&b| b > 0)
        .ok_or("BYTES: a positive number of bytes")?;
    let seed: u64 = rest
        .first()
        .map_or(Ok(1), |s| s.parse())
        .map_err(|_| "SEED: a number")?;
    let mut reader = TraceReader::open(input).map_err(|e| e.to_string())?;
    if reader.stack_sampling() != trace::StackSampling::All {
        return Err(format!("{input}: not a trace of `record --stacks=all`"));
    }
    let header = TraceHeader {
        stack_sample_bytes: mean,
        ..reader.header().clone()
    };
    let io = |e: std::io::Error| format!("{output}: {e}");
    let out = BufWriter::new(File::create(output).map_err(io)?);
    let mut w = TraceWriter::new(out, &header).map_err(io)?;
    let stacks = reader.stacks().clone();
    if !stacks.is_empty() {
        w.write_stacks(1, (1..stacks.next_id()).map(|id| stacks.get(id).unwrap()))
            .map_err(io)?;
    }
    w.write_modules(reader.modules()).map_err(io)?;
    let mut rng = Rng(seed);
    let (mut kept, mut allocations) = (0u64, 0u64);
    for s in 0..reader.streams().len() {
        let info = reader.streams()[s].info.clone();
        let end = reader.streams()[s].end;
        let id = w.begin_process(&info).map_err(io)?;
        // Bytes left before the next sample, per thread.
        let mut countdown: HashMap<u32, f64> = HashMap::new();
        let (mut batch, mut records) = (Vec::with_capacity(BATCH), 0u64);
        for r in reader.records(s).map_err(|e| e.to_string())? {
            let mut r = r.map_err(|e| e.to_string())?;
            if let Record::Event(e) = &mut r {
                if !e.op.is_free() {
                    allocations += 1;
                    let left = countdown
                        .entry(e.tid)
                        .or_insert_with(|| rng.exponential(mean as f64));
                    *left -= e.size as f64;
                    if *left <= 0.0 {
                        *left = rng.exponential(mean as f64);
                        kept += u64::from(e.stack != 0);
                    } else {
                        e.stack = 0;
                    }
                }
            }
            batch.push(r);
            if batch.len() == BATCH {
                w.write_records(id, &batch, BATCH).map_err(io)?;
                records += batch.len() as u64;
                batch.clear();
            }
        }
        w.write_records(id, &batch, BATCH).map_err(io)?;
        records += batch.len() as u64;
        if let Some(reason) = end {
            w.end_process(id, reason, records).map_err(io)?;
        }
    }
    let trailer = reader.trailer().cloned().unwrap_or(Trailer::default());
    w.finish(&trailer).map_err(io)?;
    eprintln!("subsample_stacks: {kept} of {allocations} allocations keep their stack");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("subsample_stacks: error: {e}");
            ExitCode::FAILURE
        }
    }
}
