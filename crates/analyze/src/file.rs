//! Analysis of a trace file: streams are read one after another; within a stream, a reader thread
//! reads chunks, decoder threads decode them in parallel, and the analysis pass consumes them in
//! order. Memory stays bounded by the chunks in flight plus the live set.
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Mutex;

use trace::codec::ChunkDecoder;
use trace::{Losses, RawChunk, Record, TraceError, TraceReader};

use crate::analysis::Analysis;
use crate::call_sites;
use crate::error::AnalyzeError;
use crate::process::ProcessAnalyzer;
use crate::sites::SiteAnalyzer;
use crate::{assemble, Options};

/// Decoded chunks waiting for the analysis pass (bounds memory to a few chunks: 24 MiB each at
/// the recorder's default chunk size). 2 instead of 4 when chunks doubled to 2^19 records: peak
/// memory of the cc1 trace's analysis 264 -> 184 MiB, no slower in interleaved runs.
const CHUNKS_AHEAD: usize = 2;

/// The result of analysing a file, with what the reader had to say about it.
#[derive(Debug, Clone)]
pub struct FileAnalysis {
    pub analysis: Analysis,
    /// The recorded command and allocator, from the trace header.
    pub command: Vec<String>,
    pub allocator: String,
    /// Recorded without addresses (the addresses in the trace are block ids).
    pub no_addresses: bool,
    /// Recorded with stacks (`record --stacks`).
    pub has_stacks: bool,
    /// The call sites, when asked for (`Options::call_sites`) and the trace has stacks.
    pub call_sites: Option<crate::call_sites::CallSites>,
}

/// Analyse every (selected) process stream of the trace at `path`.
///
/// A damaged or truncated file is analysed up to the damage; what was lost is said in
/// `analysis.warnings` (by `trace::Losses`, as every command reading traces says it), and a missing
/// trailer in `analysis.recorder_finished`. Fails when the file cannot be opened as a trace, or when a filter
/// matches nothing.
pub fn analyze_file(path: &Path, options: &Options) -> Result<FileAnalysis, AnalyzeError> {
    analyze_file_with(path, options, &trace::NoProgress)
}

/// [`analyze_file`], telling `progress` the records of the selected streams and each chunk
/// analysed.
pub fn analyze_file_with(
    path: &Path,
    options: &Options,
    progress: &dyn trace::Progress,
) -> Result<FileAnalysis, AnalyzeError> {
    let mut reader = TraceReader::open(path)?;
    let mut losses = Losses::of(&reader);
    let selected: Vec<usize> = (0..reader.streams().len())
        .filter(|i| options.wants(&reader.streams()[*i].info))
        .collect();
    if let (Some(pid), true) = (options.process, selected.is_empty()) {
        let mut pids: Vec<u32> = reader.streams().iter().map(|s| s.info.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        let available = pids
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(AnalyzeError::NoSuchProcess {
            path: path.to_path_buf(),
            pid,
            available,
        });
    }
    progress.start(selected.iter().map(|i| reader.streams()[*i].records).sum());
    let mut processes = Vec::with_capacity(selected.len());
    let mut site_images = Vec::new();
    for i in selected {
        let info = reader.streams()[i].info.clone();
        let mut analyzer = ProcessAnalyzer::new(info.clone(), &options.config);
        // Per-stack figures in the same pass, when call sites are asked for and recorded.
        let mut sites = (options.call_sites.is_some() && reader.has_stacks())
            .then(|| SiteAnalyzer::new(info.clone()));
        match feed_stream(&mut reader, i, &mut analyzer, sites.as_mut(), progress) {
            None => {}
            Some((Stop::Damaged(e), done)) => {
                losses.stream_stopped(&info, &e, done);
                analyzer.mark_truncated();
            }
            // Unlike damage, a partial analysis would be wrong, not short: blocks are missing.
            Some((Stop::OutOfMemory, done)) => {
                return Err(AnalyzeError::out_of_memory(
                    info.pid,
                    done,
                    analyzer.live_blocks(),
                ));
            }
        }
        if let Some(sites) = sites {
            site_images.push((info.clone(), sites.finish().sites));
        }
        let mut report = analyzer.finish();
        report.memory = original_memory(
            reader.memory_samples(i),
            &report,
            options.config.phase.as_deref(),
        );
        processes.push(report);
    }
    let call_sites = match &options.call_sites {
        Some(o) if reader.has_stacks() => Some(call_sites::resolve(
            &site_images,
            reader.stacks(),
            reader.modules(),
            o,
        )),
        _ => None,
    };
    let header = reader.header().clone();
    let mut analysis = assemble(processes, options);
    analysis.warnings = losses.warnings("analysed");
    analysis.recorder_finished = losses.recorder_finished();
    analysis.untraced = reader
        .untraced()
        .iter()
        .filter(|u| options.process.is_none_or(|pid| pid == u.pid))
        .cloned()
        .collect();
    check_phase(&analysis, options)?;
    Ok(FileAnalysis {
        analysis,
        command: header.command,
        allocator: header.allocator,
        no_addresses: header.no_addresses,
        has_stacks: reader.has_stacks(),
        call_sites,
    })
}

/// Why the analysis of a stream stopped before its end.
enum Stop {
    /// The trace is damaged there: what precedes is analysed.
    Damaged(TraceError),
    /// A buffer sized by the trace (decoded records, the live set) could not be had.
    OutOfMemory,
}

/// Read chunks on one helper thread, decode them on `decoders` others, analyse here, in order.
/// Returns what stopped the stream, if anything, with the number of records analysed before it.
fn feed_stream<R: std::io::Read + std::io::Seek + Send>(
    reader: &mut TraceReader<R>,
    stream: usize,
    analyzer: &mut ProcessAnalyzer,
    mut sites: Option<&mut SiteAnalyzer>,
    progress: &dyn trace::Progress,
) -> Option<(Stop, u64)> {
    // One core is the pass's. With a decoder per core, the pass shared its core with a decoder
    // on a 2-core machine: one decoder there analysed python3's trace (26.5 M records) in
    // 0.76-1.09 s against 0.85-2.03 s, in 456 MiB against 514 (cc1's: 128 MiB against 208),
    // with less CPU time; cc1's and gcc's no slower (medians 0.39 and 0.35 s against 0.41 and
    // 0.39; six interleaved runs per trace).
    let decoders = std::thread::available_parallelism()
        .map_or(1, |n| n.get().saturating_sub(1))
        .clamp(1, 8);
    let mut done = 0u64;
    let mut failure = None;
    let (raw_tx, raw_rx) = sync_channel::<(u64, Result<RawChunk, TraceError>)>(CHUNKS_AHEAD);
    let raw_rx = Mutex::new(raw_rx);
    let (dec_tx, dec_rx) = sync_channel::<(u64, Result<Vec<Record>, Stop>)>(CHUNKS_AHEAD);
    // Record buffers the pass is done with go back to the decoders: a chunk's records are
    // written into memory already mapped and warm instead of a fresh multi-MiB allocation.
    // At most one buffer per chunk in flight exists. Last in, first out: the most recently
    // used buffer is the likeliest to be still in a cache.
    let spares: Mutex<Vec<Vec<Record>>> = Mutex::new(Vec::new());
    // Set when the pass stops early: the reader stops reading, decoders stop decoding, and the
    // channels are drained so that no helper stays blocked on a full channel.
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let stop = &stop;
        scope.spawn(move || {
            let chunks = match reader.chunks(stream) {
                Ok(c) => c,
                Err(e) => {
                    let _ = raw_tx.send((0, Err(e)));
                    return;
                }
            };
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
            let (raw_rx, dec_tx, spares) = (&raw_rx, dec_tx.clone(), &spares);
            scope.spawn(move || {
                let mut decoder = ChunkDecoder::new();
                loop {
                    let next = raw_rx.lock().map(|rx| rx.recv());
                    let Ok(Ok((i, chunk))) = next else { return };
                    let n = chunk.as_ref().map_or(0, |c| c.chunk.records) as usize;
                    let spare = spares.lock().ok().and_then(|mut s| s.pop());
                    // A spare is emptied here, not by the pass: dropping the records walks the
                    // whole buffer (a marker owns its label), and the pass is the one stage that
                    // cannot run in parallel. Here the walk also brings in lines about to be
                    // written. Room for the chunk is asked for here too, where a refusal can be
                    // reported (the recorder's chunks fill every spare alike).
                    let records = match spare {
                        Some(mut r) => {
                            r.clear();
                            r.try_reserve_exact(n).is_ok().then_some(r)
                        }
                        None => blockmap::huge_pages::try_vec_with_capacity(n),
                    };
                    let decoded = match records {
                        None => Err(Stop::OutOfMemory),
                        Some(_) if stop.load(Ordering::Relaxed) => Ok(Vec::new()),
                        Some(mut records) => chunk
                            .and_then(|c| c.decode_into(&mut decoder, &mut records))
                            .map(|()| records)
                            .map_err(Stop::Damaged),
                    };
                    if dec_tx.send((i, decoded)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(dec_tx);
        // Chunks finish decoding out of order: hold the early ones (at most the chunks in flight).
        let mut pending: BTreeMap<u64, Result<Vec<Record>, Stop>> = BTreeMap::new();
        let mut next = 0u64;
        'receive: for (i, batch) in dec_rx.iter() {
            pending.insert(i, batch);
            while let Some(batch) = pending.remove(&next) {
                next += 1;
                match batch {
                    Ok(records) => {
                        analyzer.feed_chunk(&records);
                        if let Some(sites) = sites.as_deref_mut() {
                            for r in &records {
                                if let Record::Event(e) = r {
                                    sites.push(e);
                                }
                            }
                        }
                        done += records.len() as u64;
                        progress.advance(records.len() as u64);
                        if let Ok(mut s) = spares.lock() {
                            s.push(records);
                        }
                        if analyzer.lost_blocks() > 0 {
                            failure = Some((Stop::OutOfMemory, done));
                            break 'receive;
                        }
                    }
                    Err(e) => {
                        failure = Some((e, done));
                        break 'receive;
                    }
                }
            }
        }
        // Let the helpers run out: the reader sees `stop`, decoders empty the raw channel, and
        // the decoded channel closes when the last decoder returns.
        stop.store(true, Ordering::Relaxed);
        for _ in dec_rx.iter() {}
    });
    failure
}

/// With a phase filter, at least one selected process must have a phase of that name.
pub fn check_phase(analysis: &Analysis, options: &Options) -> Result<(), AnalyzeError> {
    let Some(name) = &options.config.phase else {
        return Ok(());
    };
    let mut names: Vec<&str> = analysis
        .processes
        .iter()
        .flat_map(|p| p.phases.iter().map(|ph| ph.name.as_str()))
        .collect();
    if names.iter().any(|n| n == name) {
        return Ok(());
    }
    names.sort_unstable();
    names.dedup();
    Err(AnalyzeError::NoSuchPhase {
        name: name.clone(),
        available: names.join(", "),
    })
}

/// The figures of an image's memory samples (`ProcessReport::memory`): with a phase filter, of
/// the readings taken during the selected phases (each phase's extent ends its last reading).
fn original_memory(
    samples: &[trace::MemorySample],
    report: &crate::analysis::ProcessReport,
    phase: Option<&str>,
) -> Option<trace::MemorySummary> {
    let end = report
        .phases
        .last()
        .map_or(report.life_calls, |p| p.end_call.max(report.life_calls));
    let Some(phase) = phase else {
        return trace::MemorySummary::of(samples, end);
    };
    let ranges: Vec<(u64, u64)> = report
        .phases
        .iter()
        .filter(|p| p.name == phase)
        .map(|p| (p.start_call, p.end_call))
        .collect();
    let inside: Vec<trace::MemorySample> = samples
        .iter()
        .filter(|s| ranges.iter().any(|&(a, b)| a <= s.seq && s.seq < b))
        .copied()
        .collect();
    let last_end = ranges.iter().map(|r| r.1).max().unwrap_or(end);
    trace::MemorySummary::of(&inside, last_end)
}
