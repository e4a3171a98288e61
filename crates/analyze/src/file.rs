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
use crate::sampling::Sampling;
use crate::sites::SiteAnalyzer;
use crate::{assemble, Options};

/// Raw (compressed) chunks read ahead of the decoders.
const CHUNKS_AHEAD: usize = 2;

/// Decoder threads at most. Decoded records take 48 bytes each (24 MiB per chunk of 2^19), and
/// each decoder needs a buffer of its own: the buffers, one per decoder plus the pass's, are
/// most of the analysis's memory after the live set. One decoder keeps up with the pass on most
/// traces (see `feed_stream`); a second covers the rest.
const MAX_DECODERS: usize = 2;

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
    /// `record --pid`: the process attached to, and what it held at the attach (when the
    /// recording finished).
    pub attached: Option<(u32, Option<trace::AttachFigures>)>,
    /// The call sites, when asked for (`Options::call_sites`) and the trace has stacks.
    pub call_sites: Option<crate::call_sites::CallSites>,
    /// `record --leaks`: the leak check of each image that had one, its sites named.
    pub leaks: Vec<crate::leaks::LeakReport>,
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
    let sampling = Sampling::of(reader.stack_sampling());
    for i in selected {
        let info = reader.streams()[i].info.clone();
        let mut analyzer = ProcessAnalyzer::new(info.clone(), &options.config);
        // Per-stack figures in the same pass, when call sites are asked for and recorded.
        // With every stack, each site's resident pages too (sampled stacks leave most blocks
        // without a site: no estimate of them is made).
        let readings = reader.residency(i);
        let mut sites = (options.call_sites.is_some() && reader.has_stacks()).then(|| {
            let sites = SiteAnalyzer::with_sampling(info.clone(), sampling);
            match sampling {
                None => sites.with_residency(readings),
                Some(_) => sites,
            }
        });
        match feed_stream(&mut reader, i, &mut analyzer, sites.as_mut(), progress) {
            None => {}
            Some((Stop::Damaged(e), done)) => {
                losses.stream_stopped(&info, &e, done);
                analyzer.mark_truncated();
                if let Some(sites) = sites.as_mut() {
                    sites.mark_truncated();
                }
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
            site_images.push(sites.finish());
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
            sampling.map(Sampling::mean_bytes),
        )),
        _ => None,
    };
    let leaks = {
        let images: Vec<trace::ProcessInfo> =
            reader.streams().iter().map(|s| s.info.clone()).collect();
        let roots = options.call_sites.clone().unwrap_or_default().debug_roots;
        let mut symbolizer = symbols::Symbolizer::new(roots);
        reader
            .leaks()
            .iter()
            .filter(|l| options.process.is_none_or(|pid| pid == l.pid))
            .map(|l| {
                let (stacks, modules) = (reader.stacks(), reader.modules());
                crate::leaks::name_sites(l, &images, stacks, modules, &mut symbolizer)
            })
            .collect()
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
        attached: header
            .attached_pid
            .map(|pid| (pid, reader.trailer().and_then(|t| t.attach.clone()))),
        call_sites,
        leaks,
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
        .clamp(1, MAX_DECODERS);
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
    let (dec_tx, dec_rx) = sync_channel::<(u64, Result<Vec<Record>, Stop>)>(buffers);
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
                    // Emptied here, not by the pass: dropping the records walks the whole
                    // buffer (a marker owns its label), and the pass is the one stage that
                    // cannot run in parallel. Here the walk also brings in lines about to be
                    // written. Room for the chunk is asked for here too, where a refusal can be
                    // reported (the recorder's chunks fill every buffer alike).
                    records.clear();
                    let room = if records.capacity() == 0 {
                        blockmap::huge_pages::try_vec_with_capacity(n).map(|r| records = r)
                    } else {
                        records.try_reserve_exact(n).ok()
                    };
                    let decoded = match room {
                        None => Err(Stop::OutOfMemory),
                        Some(()) if stop.load(Ordering::Relaxed) => Ok(records),
                        Some(()) => chunk
                            .and_then(|c| c.decode_into(&mut decoder, &mut records))
                            .map_err(Stop::Damaged)
                            .map(|()| records),
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
                        let _ = pool_tx.send(records);
                        if analyzer.lost_blocks() > 0 {
                            failure = Some((Stop::OutOfMemory, done));
                            break 'receive;
                        }
                    }
                    Err(e) => {
                        // The failed chunk's buffer is gone: a new one takes its place.
                        let _ = pool_tx.send(Vec::new());
                        failure = Some((e, done));
                        break 'receive;
                    }
                }
            }
        }
        // Let the helpers run out: the reader sees `stop`, decoders empty the raw channel, and
        // the decoded channel closes when the last decoder returns. Every buffer goes back to
        // the pool, so that no decoder waits for one for ever.
        stop.store(true, Ordering::Relaxed);
        // (A failed chunk's buffer is gone: a new one takes its place.)
        let give_back = |batch: Result<Vec<Record>, Stop>| {
            let _ = pool_tx.send(batch.unwrap_or_default());
        };
        pending.into_values().for_each(give_back);
        for (_, batch) in dec_rx.iter() {
            give_back(batch);
        }
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
