//! The analysis of one stream (a process image): its chunks read, decoded and fed to the pass in
//! order, either pipelined over helper threads or all on the calling thread.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Mutex;

use trace::codec::ChunkDecoder;
use trace::{RawChunk, Record, TraceError};

use crate::block_observer::BlockObserver;
use crate::process::ProcessAnalyzer;

/// Raw (compressed) chunks read ahead of the decoders.
const CHUNKS_AHEAD: usize = 2;

/// Decoder threads at most. Decoded records take 56 bytes each (28 MiB per chunk of 2^19), and
/// each decoder needs a buffer of its own: the buffers, one per decoder plus the pass's, are
/// most of the analysis's memory after the live set. One decoder keeps up with the pass on most
/// traces (see `decoders_beside`); a second covers the rest.
const MAX_DECODERS: usize = 2;

/// The decoder threads of a pipelined stream when the analysis may use `threads` threads: one
/// per thread but the pass's. With a decoder per core, the pass shared its core with a decoder
/// on a 2-core machine: one decoder there analysed python3's trace (26.5 M records) in
/// 0.76-1.09 s against 0.85-2.03 s, in 456 MiB against 514 (cc1's: 128 MiB against 208), with
/// less CPU time; cc1's and gcc's no slower (medians 0.39 and 0.35 s against 0.41 and 0.39; six
/// interleaved runs per trace).
pub(crate) fn decoders_beside(threads: usize) -> usize {
    threads.saturating_sub(1).clamp(1, MAX_DECODERS)
}

/// One decoded chunk through the pass (and its observer: the call sites' pass, when asked for).
/// The buffer comes back empty when that costs nothing (see `empty_if_no_marker`).
fn feed<O: BlockObserver>(analyzer: &mut ProcessAnalyzer<O>, records: &mut Vec<Record>) {
    let markers = analyzer.markers();
    analyzer.feed_chunk(records);
    if analyzer.markers() == markers {
        empty_if_no_marker(records);
    }
}

/// Empties a buffer whose records the pass found no marker in, without walking it. Dropping
/// records reads every one of them (a marker owns its label, an event owns nothing): 28 MiB
/// per chunk of 2^19, 6 % of the CPU of the serial analysis of a churn trace, for chunks that
/// mostly hold no marker. A buffer with markers is left to `clear`.
fn empty_if_no_marker(records: &mut Vec<Record>) {
    debug_assert!(records.iter().all(|r| matches!(r, Record::Event(_))));
    // SAFETY: 0 <= capacity, and no element needs dropping: each is an `Event`, which is
    // `Copy` (were one a marker, it would leak, not be used after free).
    unsafe { records.set_len(0) }
}

/// Records decoded at a time on the serial path: 4096 records of 56 bytes (224 KiB) are read
/// by the pass from the caches the decoder wrote them to, where a whole chunk's (28 MiB for
/// 2^19 records) went to memory and back.
const SLICE: usize = 1 << 12;

/// Read, decode and analyse `chunks` one after another on this thread, a slice of each at a
/// time, into one small record buffer: what a thread analysing a stream beside others does, and
/// the serial path (`--threads 1`). Stops where the pipelined pass stops, with the same records
/// analysed (those of a damaged chunk before its damage included).
pub(crate) fn inline<O: BlockObserver>(
    chunks: impl Iterator<Item = Result<RawChunk, TraceError>>,
    analyzer: &mut ProcessAnalyzer<O>,
    progress: &dyn trace::Progress,
) -> Option<(Stop, u64)> {
    let mut decoder = ChunkDecoder::new();
    let mut records: Vec<Record> = Vec::new();
    if records.try_reserve_exact(SLICE).is_err() {
        return Some((Stop::OutOfMemory, 0));
    }
    let mut done = 0u64;
    for chunk in chunks {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => return Some((Stop::Damaged(e), done)),
        };
        let mut fed = 0u64;
        let decoded = chunk.decode_in_slices(&mut decoder, &mut records, SLICE, |slice| {
            fed += slice.len() as u64;
            feed(analyzer, slice);
            slice.clear();
        });
        fed += records.len() as u64;
        feed(analyzer, &mut records);
        records.clear();
        done += fed;
        progress.advance(fed);
        if analyzer.lost_blocks() > 0 {
            return Some((Stop::OutOfMemory, done));
        }
        if let Err(e) = decoded {
            return Some((Stop::Damaged(e), done));
        }
    }
    None
}

/// A chunk decoded by a helper: its records (up to the damage, if any) and what stopped it.
struct Decoded {
    records: Vec<Record>,
    stopped: Option<Stop>,
}

/// Why the analysis of a stream stopped before its end.
pub(crate) enum Stop {
    /// The trace is damaged there: what precedes is analysed.
    Damaged(TraceError),
    /// A buffer sized by the trace (decoded records, the live set) could not be had.
    OutOfMemory,
}

/// Read `chunks` on one helper thread, decode them on `decoders` others, analyse here, in order.
/// Returns what stopped the stream, if anything, with the number of records analysed before it.
pub(crate) fn pipelined<O: BlockObserver>(
    chunks: impl Iterator<Item = Result<RawChunk, TraceError>> + Send,
    decoders: usize,
    analyzer: &mut ProcessAnalyzer<O>,
    progress: &dyn trace::Progress,
) -> Option<(Stop, u64)> {
    let decoders = decoders.clamp(1, MAX_DECODERS);
    let mut done = 0u64;
    let mut failure = None;
    let (raw_tx, raw_rx) = sync_channel::<(u64, Result<RawChunk, TraceError>)>(CHUNKS_AHEAD);
    let raw_rx = Mutex::new(raw_rx);
    // The record buffers: a fixed pool of one per decoder plus the pass's, so that the decoded
    // chunks in flight are bounded whatever the cores and the speeds (before, the decoded
    // channel, the chunks decoding and the ones decoded out of order held 4-5 buffers on 2 cores,
    // up to 19 on 9). A decoder takes a buffer before it takes a chunk: chunks are taken in order
    // by decoders that hold a buffer, so the chunk the pass waits for always has one. The pass
    // gives each buffer back once it is done with it: a chunk's records are written into memory
    // already mapped and warm instead of a fresh multi-MiB allocation.
    let buffers = decoders + 1;
    let (pool_tx, pool_rx) = sync_channel::<Vec<Record>>(buffers);
    for _ in 0..buffers {
        let _ = pool_tx.send(Vec::new());
    }
    let pool_rx = Mutex::new(pool_rx);
    // Each chunk's records (those before the damage, for a damaged one) and what stopped it.
    let (dec_tx, dec_rx) = sync_channel::<(u64, Decoded)>(buffers);
    // Set when the pass stops early: the reader stops reading, decoders stop decoding, and the
    // channels are drained so that no helper stays blocked on a full channel.
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let stop = &stop;
        scope.spawn(move || {
            for (i, chunk) in chunks.enumerate() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let failed = chunk.is_err();
                if raw_tx.send((i as u64, chunk)).is_err() || failed {
                    return;
                }
            }
        });
        for _ in 0..decoders {
            let (raw_rx, dec_tx, pool_rx, pool_tx) =
                (&raw_rx, dec_tx.clone(), &pool_rx, pool_tx.clone());
            scope.spawn(move || {
                let mut decoder = ChunkDecoder::new();
                loop {
                    // Every buffer comes back (the pass gives back what it drains too), and
                    // this thread holds a sender: the pool never closes under a waiting decoder.
                    let Ok(Ok(mut records)) = pool_rx.lock().map(|rx| rx.recv()) else {
                        return;
                    };
                    let next = raw_rx.lock().map(|rx| rx.recv());
                    let Ok(Ok((i, chunk))) = next else {
                        let _ = pool_tx.send(records);
                        return;
                    };
                    let n = chunk.as_ref().map_or(0, |c| c.chunk.records) as usize;
                    // A buffer with markers is emptied here, not by the pass: dropping the records
                    // walks the whole buffer (a marker owns its label), and the pass is the one
                    // stage that cannot run in parallel (the others come back empty, see
                    // `empty_if_no_marker`). Room for the chunk is asked for here too, where a
                    // refusal can be reported (the recorder's chunks fill every buffer alike).
                    records.clear();
                    let room = if records.capacity() == 0 {
                        blockmap::huge_pages::try_vec_with_capacity(n).map(|r| records = r)
                    } else {
                        records.try_reserve_exact(n).ok()
                    };
                    let stopped = match room {
                        None => Some(Stop::OutOfMemory),
                        Some(()) if stop.load(Ordering::Relaxed) => None,
                        Some(()) => chunk
                            .and_then(|c| c.decode_into(&mut decoder, &mut records))
                            .map_err(Stop::Damaged)
                            .err(),
                    };
                    let decoded = Decoded { records, stopped };
                    if dec_tx.send((i, decoded)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(dec_tx);
        // Chunks finish decoding out of order: hold the early ones (at most the chunks in flight).
        let mut pending: BTreeMap<u64, Decoded> = BTreeMap::new();
        let mut next = 0u64;
        'receive: for (i, batch) in dec_rx.iter() {
            pending.insert(i, batch);
            while let Some(Decoded {
                mut records,
                stopped,
            }) = pending.remove(&next)
            {
                next += 1;
                // As on the serial path: the records before a damage are analysed, and a
                // want of memory is said before the damage.
                let n = records.len() as u64;
                feed(analyzer, &mut records);
                done += n;
                progress.advance(n);
                let _ = pool_tx.send(records);
                if analyzer.lost_blocks() > 0 {
                    failure = Some((Stop::OutOfMemory, done));
                    break 'receive;
                }
                if let Some(e) = stopped {
                    failure = Some((e, done));
                    break 'receive;
                }
            }
        }
        // Let the helpers run out: the reader sees `stop`, decoders empty the raw channel, and
        // the decoded channel closes when the last decoder returns. Every buffer goes back to
        // the pool, so that no decoder waits for one for ever.
        stop.store(true, Ordering::Relaxed);
        let give_back = |batch: Decoded| {
            let _ = pool_tx.send(batch.records);
        };
        pending.into_values().for_each(give_back);
        for (_, batch) in dec_rx.iter() {
            give_back(batch);
        }
    });
    failure
}
