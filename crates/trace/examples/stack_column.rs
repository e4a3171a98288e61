//! Trace bytes of the `stacks` column under candidate encodings (issue 27): each events chunk of a
//! trace recorded with `--stacks` is taken apart, its `stacks` column replaced by a candidate's
//! columns, and the whole raw chunk compressed at zstd level 1 and 12 (the recorder's base and
//! strong levels, chunks as the recorder cut them). Prints bytes per record per candidate, the
//! STACKS chunks re-coded at level 9 in one piece, and the floors: the entropy of the sample
//! positions given the sizes (what any coding of where the samples are must pay on average) and
//! the same trace with no stacks column at all.
//! Usage: cargo run -p trace --example stack_column TRACE...
use std::collections::HashMap;

use trace::codec::payload_columns;
use trace::{Event, Record, TraceReader};

/// A candidate: records of a chunk -> the columns that replace `stacks`.
type Candidate = (&'static str, fn(&[Event]) -> Vec<Vec<u8>>);

fn put(col: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        col.push(v as u8 | 0x80);
        v >>= 7;
    }
    col.push(v as u8);
}

fn carries_stack(e: &Event) -> bool {
    !e.op.is_free()
}

/// Today's: a varint id per allocation, 0 when not sampled.
fn current(ev: &[Event]) -> Vec<Vec<u8>> {
    let mut c = Vec::new();
    ev.iter()
        .filter(|e| carries_stack(e))
        .for_each(|e| put(&mut c, u64::from(e.stack)));
    vec![c]
}

/// Gaps (allocations since the previous sample, in record order) of the sampled allocations.
fn gaps(ev: &[Event]) -> Vec<u8> {
    let mut c = Vec::new();
    let mut n = 0u64;
    for e in ev.iter().filter(|e| carries_stack(e)) {
        if e.stack != 0 {
            put(&mut c, n);
            n = 0;
        } else {
            n += 1;
        }
    }
    c
}

/// One bit per allocation, packed.
fn bitmap(ev: &[Event]) -> Vec<u8> {
    let mut c = Vec::new();
    for (i, e) in ev.iter().filter(|e| carries_stack(e)).enumerate() {
        if i % 8 == 0 {
            c.push(0);
        }
        if e.stack != 0 {
            *c.last_mut().unwrap() |= 1 << (i % 8);
        }
    }
    c
}

fn raw_ids(ev: &[Event]) -> Vec<u8> {
    let mut c = Vec::new();
    for e in ev.iter().filter(|e| e.stack != 0 && carries_stack(e)) {
        put(&mut c, u64::from(e.stack));
    }
    c
}

fn pairs(ev: &[Event]) -> Vec<Vec<u8>> {
    let mut c = Vec::new();
    let mut n = 0u64;
    for e in ev.iter().filter(|e| carries_stack(e)) {
        if e.stack != 0 {
            put(&mut c, n);
            put(&mut c, u64::from(e.stack));
            n = 0;
        } else {
            n += 1;
        }
    }
    vec![c]
}

fn split_raw(ev: &[Event]) -> Vec<Vec<u8>> {
    vec![gaps(ev), raw_ids(ev)]
}

/// Ids coded against a per-thread prediction: 0 = the stack last sampled on this thread for the
/// same `key` (size or size class), 1 = a stack new to the chunk (the next id after the largest
/// seen), else `fallback`.
fn predicted_ids(ev: &[Event], key: fn(u64) -> u64, mtf: bool) -> Vec<u8> {
    let mut c = Vec::new();
    for code in predicted_codes(ev, key, mtf) {
        code.into_iter().for_each(|v| put(&mut c, v));
    }
    c
}

/// The codes of `predicted_ids`, one list per sampled allocation.
fn predicted_codes(ev: &[Event], key: fn(u64) -> u64, mtf: bool) -> Vec<Vec<u64>> {
    let mut out = Vec::new();
    let mut last: HashMap<(u32, u64), u32> = HashMap::new();
    let mut recent: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut max = 0u32;
    for e in ev.iter().filter(|e| e.stack != 0 && carries_stack(e)) {
        let k = (e.tid, key(e.size));
        let list = recent.entry(e.tid).or_default();
        out.push(if last.get(&k) == Some(&e.stack) {
            vec![0]
        } else if e.stack > max {
            vec![1, u64::from(e.stack - max - 1)]
        } else if mtf {
            match list.iter().position(|&s| s == e.stack) {
                Some(r) => vec![2 + r as u64],
                None => vec![2 + list.len() as u64, u64::from(e.stack)],
            }
        } else {
            vec![2 + u64::from(e.stack)]
        });
        if mtf {
            if let Some(r) = list.iter().position(|&s| s == e.stack) {
                list.remove(r);
            }
            list.insert(0, e.stack);
        }
        max = max.max(e.stack);
        last.insert(k, e.stack);
    }
    out
}

/// Ids coded as: 0 = the stack last sampled on this thread for the same size; else
/// 1 + zigzag(id - previous sampled id) (`delta`), or 1 + id with its two planes (`planes`: low
/// byte in one column, the rest as a varint in another).
fn size_then(ev: &[Event], delta: bool) -> Vec<Vec<u8>> {
    let (mut c, mut hi) = (Vec::new(), Vec::new());
    let mut last: HashMap<(u32, u64), u32> = HashMap::new();
    let mut prev = 0i64;
    for e in ev.iter().filter(|e| e.stack != 0 && carries_stack(e)) {
        let k = (e.tid, e.size);
        if last.get(&k) == Some(&e.stack) {
            if delta {
                put(&mut c, 0);
            } else {
                c.push(0);
                put(&mut hi, 0);
            }
        } else if delta {
            let d = i64::from(e.stack) - prev;
            put(&mut c, 1 + ((d << 1) ^ (d >> 63)) as u64);
        } else {
            let v = 1 + u64::from(e.stack);
            c.push(v as u8);
            put(&mut hi, v >> 8);
        }
        prev = i64::from(e.stack);
        last.insert(k, e.stack);
    }
    if delta {
        vec![c]
    } else {
        vec![c, hi]
    }
}

/// Ids coded by their rank among the stacks sampled before with the same size on this thread
/// (most recent first); a miss: rank = the list's length, then the id.
fn size_mtf(ev: &[Event]) -> Vec<Vec<u8>> {
    let mut c = Vec::new();
    let mut lists: HashMap<(u32, u64), Vec<u32>> = HashMap::new();
    for e in ev.iter().filter(|e| e.stack != 0 && carries_stack(e)) {
        let list = lists.entry((e.tid, e.size)).or_default();
        match list.iter().position(|&s| s == e.stack) {
            Some(r) => {
                put(&mut c, r as u64);
                list.remove(r);
            }
            None => {
                put(&mut c, list.len() as u64);
                put(&mut c, u64::from(e.stack));
            }
        }
        list.insert(0, e.stack);
    }
    vec![c]
}

fn gaps_size_delta(ev: &[Event]) -> Vec<Vec<u8>> {
    let mut v = vec![gaps(ev)];
    v.extend(size_then(ev, true));
    v
}
fn gaps_size_planes(ev: &[Event]) -> Vec<Vec<u8>> {
    let mut v = vec![gaps(ev)];
    v.extend(size_then(ev, false));
    v
}
fn gaps_size_mtf(ev: &[Event]) -> Vec<Vec<u8>> {
    let mut v = vec![gaps(ev)];
    v.extend(size_mtf(ev));
    v
}
fn gaps_only(ev: &[Event]) -> Vec<Vec<u8>> {
    vec![gaps(ev)]
}

/// How the sampled allocations' ids fall under the version-5 coding: predicted by thread and
/// size, new (larger than any before in the chunk), otherwise; and of the others, how many the
/// second-last stack of the thread and size, or the stack that followed the previous sample's
/// stack last time, would have predicted.
fn id_statistics(ev: &[Event], counts: &mut [u64; 5]) {
    let mut last: HashMap<(u32, u64), (u32, u32)> = HashMap::new();
    let mut follows: HashMap<u32, u32> = HashMap::new();
    let (mut largest, mut previous) = (0u32, 0u32);
    for e in ev.iter().filter(|e| e.stack != 0 && carries_stack(e)) {
        let (a, b) = last.get(&(e.tid, e.size)).copied().unwrap_or_default();
        if a == e.stack {
            counts[0] += 1;
        } else if e.stack > largest {
            counts[1] += 1;
        } else {
            counts[2] += 1;
            counts[3] += u64::from(b == e.stack);
            counts[4] += u64::from(follows.get(&previous) == Some(&e.stack));
        }
        if a != e.stack {
            last.insert((e.tid, e.size), (e.stack, a));
        }
        follows.insert(previous, e.stack);
        previous = e.stack;
        largest = largest.max(e.stack);
    }
}

fn exact(s: u64) -> u64 {
    s
}

fn class(s: u64) -> u64 {
    if s <= 1032 {
        (s + 23) / 16
    } else {
        66 + u64::from(64 - s.leading_zeros())
    }
}

fn none(_: u64) -> u64 {
    0
}

fn gaps_pred_size(ev: &[Event]) -> Vec<Vec<u8>> {
    vec![gaps(ev), predicted_ids(ev, exact, false)]
}
fn gaps_pred_class(ev: &[Event]) -> Vec<Vec<u8>> {
    vec![gaps(ev), predicted_ids(ev, class, false)]
}
fn gaps_mtf(ev: &[Event]) -> Vec<Vec<u8>> {
    vec![gaps(ev), predicted_ids(ev, none, true)]
}
fn gaps_pred_size_mtf(ev: &[Event]) -> Vec<Vec<u8>> {
    vec![gaps(ev), predicted_ids(ev, exact, true)]
}
fn bitmap_pred_size_mtf(ev: &[Event]) -> Vec<Vec<u8>> {
    vec![bitmap(ev), predicted_ids(ev, exact, true)]
}
fn pairs_pred_size_mtf(ev: &[Event]) -> Vec<Vec<u8>> {
    let mut codes = predicted_codes(ev, exact, true).into_iter();
    let mut c = Vec::new();
    let mut n = 0u64;
    for e in ev.iter().filter(|e| carries_stack(e)) {
        if e.stack != 0 {
            put(&mut c, n);
            n = 0;
            codes
                .next()
                .unwrap_or_default()
                .into_iter()
                .for_each(|v| put(&mut c, v));
        } else {
            n += 1;
        }
    }
    vec![c]
}
/// The sample points derived from the sizes (a stored seed): only the ids are stored.
fn seeded_pred_size_mtf(ev: &[Event]) -> Vec<Vec<u8>> {
    vec![predicted_ids(ev, exact, true)]
}
fn no_column(_: &[Event]) -> Vec<Vec<u8>> {
    vec![]
}

const CANDIDATES: [Candidate; 15] = [
    ("gaps | ids pred. size, delta", gaps_size_delta),
    ("gaps | ids pred. size, planes", gaps_size_planes),
    ("gaps | ids MTF per size", gaps_size_mtf),
    ("gaps only (no ids)", gaps_only),
    ("no stacks column (floor)", no_column),
    ("current: varint id per alloc", current),
    ("(gap, id) pairs", pairs),
    ("gaps | ids", split_raw),
    ("gaps | ids pred. same size", gaps_pred_size),
    ("gaps | ids pred. size class", gaps_pred_class),
    ("gaps | ids MTF per thread", gaps_mtf),
    ("gaps | ids pred. size, MTF", gaps_pred_size_mtf),
    ("(gap, id pred. size MTF) pairs", pairs_pred_size_mtf),
    ("bitmap | ids pred. size, MTF", bitmap_pred_size_mtf),
    ("seeded: ids pred. size, MTF", seeded_pred_size_mtf),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for path in std::env::args().skip(1) {
        let mut reader = TraceReader::open(&path)?;
        let mean = match reader.stack_sampling() {
            trace::StackSampling::Bytes { mean_bytes } => mean_bytes as f64,
            _ => 0.0,
        };
        let mut records = 0u64;
        let mut sizes = [[0usize; 2]; CANDIDATES.len()];
        let (mut allocs, mut sampled, mut entropy_bits) = (0u64, 0u64, 0f64);
        let mut id_counts = [0u64; 5];
        for stream in 0..reader.streams().len() {
            let chunks: Vec<_> = reader.chunks(stream)?.collect::<Result<_, _>>()?;
            for chunk in chunks {
                let ev: Vec<Event> = chunk
                    .decode()?
                    .into_iter()
                    .filter_map(|r| match r {
                        Record::Event(e) => Some(e),
                        Record::Marker(_) => None,
                    })
                    .collect();
                records += u64::from(chunk.chunk.records);
                id_statistics(&ev, &mut id_counts);
                for e in ev.iter().filter(|e| carries_stack(e)) {
                    allocs += 1;
                    sampled += u64::from(e.stack != 0);
                    if mean > 0.0 {
                        let p = 1.0 - (-(e.size as f64) / mean).exp();
                        if p > 0.0 && p < 1.0 {
                            entropy_bits -= p * p.log2() + (1.0 - p) * (1.0 - p).log2();
                        }
                    }
                }
                let raw = zstd::bulk::decompress(&chunk.payload()[4..], 1 << 30)?;
                let columns = payload_columns(chunk.payload())?;
                let stacks = columns.last().map_or(0, |(_, c)| c.len());
                let mut len_bytes = Vec::new();
                put(&mut len_bytes, stacks as u64);
                let base = &raw[..raw.len() - stacks - len_bytes.len()];
                for (i, (_, candidate)) in CANDIDATES.iter().enumerate() {
                    let mut whole = base.to_vec();
                    for col in candidate(&ev) {
                        put(&mut whole, col.len() as u64);
                        whole.extend_from_slice(&col);
                    }
                    for (j, level) in [1, 12].into_iter().enumerate() {
                        sizes[i][j] += 4 + zstd::bulk::compress(&whole, level)?.len();
                    }
                }
            }
        }
        let stacks: Vec<&[u64]> = reader.stacks().iter().map(|(_, f)| f).collect();
        let table = trace::StackEncoder::new().payload(1, stacks.iter().copied())?;
        let per = |b: f64| b / records.max(1) as f64;
        println!(
            "{path}: {records} records, {allocs} allocations, {sampled} sampled, {} stacks; \
             sample positions' entropy {:.4} B/record; stack table in one STACKS chunk {:.4} B/record",
            stacks.len(),
            per(entropy_bits / 8.0),
            per(table.len() as f64)
        );
        println!(
            "  ids: {} predicted by thread and size, {} new, {} other (of which the second-last \
             of the thread and size {}, the previous sample's last follower {})",
            id_counts[0], id_counts[1], id_counts[2], id_counts[3], id_counts[4]
        );
        for (i, (name, _)) in CANDIDATES.iter().enumerate() {
            println!(
                "  {name:<32} level 1 {:.4}  level 12 {:.4} B/record",
                per(sizes[i][0] as f64),
                per(sizes[i][1] as f64)
            );
        }
    }
    Ok(())
}
