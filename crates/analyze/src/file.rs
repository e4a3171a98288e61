//! Analysis of a trace file: its streams (process images) analysed on several threads
//! (`streams`), then put together in stream order with what the reader says about the file.
//! Memory stays bounded by the chunks in flight plus the live sets.
use std::path::Path;

use trace::{Losses, TraceReader};

use crate::analysis::Analysis;
use crate::call_sites;
use crate::error::AnalyzeError;
use crate::sampling::Sampling;
use crate::streams::{self, analyze_streams, StreamInput, StreamJob, StreamOutcome};
use crate::{assemble, Options};

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
    let reader = TraceReader::open(path)?;
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
    let sampling = Sampling::of(reader.stack_sampling());
    let inputs: Vec<StreamInput> = selected
        .iter()
        .map(|&stream| StreamInput {
            stream,
            info: reader.streams()[stream].info.clone(),
            chunks: reader.streams()[stream].chunks.clone(),
            readings: reader.residency(stream).to_vec(),
        })
        .collect();
    let job = StreamJob {
        config: &options.config,
        sites: options.call_sites.is_some() && reader.has_stacks(),
        sampling,
        progress,
    };
    let threads = options.threads.unwrap_or_else(streams::default_threads);
    let outcomes = analyze_streams(&inputs, &job, threads, || reader.chunk_file())?;
    // In stream order whichever thread analysed which, as the serial path: the warnings, the
    // error of the first image out of memory, the call sites' images.
    let mut processes = Vec::with_capacity(selected.len());
    let mut site_images = Vec::new();
    for (input, outcome) in inputs.iter().zip(outcomes) {
        let info = &input.info;
        let (mut report, sites) = match outcome {
            StreamOutcome::OutOfMemory { records, live } => {
                return Err(AnalyzeError::out_of_memory(info.pid, records, live));
            }
            StreamOutcome::Done {
                report,
                sites,
                damage,
            } => {
                if let Some((e, done)) = damage {
                    losses.stream_stopped(info, &e, done);
                }
                (report, sites)
            }
        };
        if let Some(sites) = sites {
            site_images.push(*sites);
        }
        report.memory = original_memory(
            reader.memory_samples(input.stream),
            &report,
            options.config.phase.as_deref(),
        );
        processes.push(*report);
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
