//! Which thread analyses which stream. Streams (process images) are independent, so several are
//! analysed at once, one per thread: the largest pipelined over decoder threads on the calling
//! thread (inline when the call sites' pass runs too, see `analyze_streams`), the others inline
//! on helper threads, each reading through a file handle of its own.
//! Each stream's outcome is the same whichever thread analysed it, and they come back in the
//! order asked, so the results are those of the serial path (`threads` = 1) byte for byte.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use trace::{ChunkFile, ChunkRef, ProcessInfo, RawChunk, TraceError};

use crate::analysis::ProcessReport;
use crate::block_observer::BlockObserver;
use crate::process::{Config, ProcessAnalyzer};
use crate::sampling::Sampling;
use crate::sites::{ProcessSites, SitePass};
use crate::stream_pass::{self, Stop};

/// Streams analysed at once at most by default: each holds a record buffer (24 MiB for a
/// recorder's chunk) and its live set, so memory follows this figure, not the cores.
pub const MAX_DEFAULT_THREADS: usize = 4;

/// The threads used when none are asked for: one per core, at most `MAX_DEFAULT_THREADS`.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, MAX_DEFAULT_THREADS))
}

/// What every stream's analysis is given.
pub(crate) struct StreamJob<'a> {
    pub config: &'a Config,
    /// Run the call sites' pass too (asked for, and the trace has stacks).
    pub sites: bool,
    pub sampling: Option<Sampling>,
    pub progress: &'a dyn trace::Progress,
}

/// One stream to analyse: its image and its chunks.
pub(crate) struct StreamInput {
    pub stream: usize,
    pub info: ProcessInfo,
    pub chunks: Vec<ChunkRef>,
    /// Its heap residency readings (traces recorded with addresses), for the sites' figures.
    pub readings: Vec<trace::Residency>,
}

/// How one stream's analysis ended.
pub(crate) enum StreamOutcome {
    /// Analysed to its end, or to the damage that stopped it (`damage`, with the records
    /// analysed before it; the image is then marked truncated).
    Done {
        report: Box<ProcessReport>,
        sites: Option<Box<ProcessSites>>,
        damage: Option<(TraceError, u64)>,
    },
    /// A buffer could not be had after `records` records with `live` blocks live: a partial
    /// analysis would be wrong, not short.
    OutOfMemory { records: u64, live: usize },
}

/// Analyse `inputs` with up to `threads` threads; the outcomes come back in the order of `inputs`.
/// `open` gives each helper thread a file handle of its own.
pub(crate) fn analyze_streams(
    inputs: &[StreamInput],
    job: &StreamJob,
    threads: usize,
    open: impl Fn() -> Result<ChunkFile, TraceError>,
) -> Result<Vec<StreamOutcome>, TraceError> {
    let mut file = open()?;
    if threads <= 1 {
        // The serial path: every stream in order, everything on this thread.
        let outcomes = inputs
            .iter()
            .map(|input| job.run(input, Feed::Inline(&mut file)))
            .collect();
        return Ok(outcomes);
    }
    let decoders = stream_pass::decoders_beside(threads);
    let pipelined =
        |file: &mut ChunkFile, input: &StreamInput| job.run(input, Feed::Pipelined(file, decoders));
    if inputs.len() <= 1 {
        // One stream at a time, each over every thread.
        return Ok(inputs.iter().map(|i| pipelined(&mut file, i)).collect());
    }
    // The largest streams first, so that the last to finish are short ones; the largest of all
    // pipelined here, the others inline on `threads - 1` helpers and then here.
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&k| {
        std::cmp::Reverse(
            inputs[k]
                .chunks
                .iter()
                .map(|c| c.records as u64)
                .sum::<u64>(),
        )
    });
    let helper_files = (1..threads.min(inputs.len()))
        .map(|_| open())
        .collect::<Result<Vec<_>, _>>()?;
    let next = AtomicUsize::new(1);
    let outcomes: Mutex<Vec<Option<StreamOutcome>>> =
        Mutex::new(inputs.iter().map(|_| None).collect());
    let store = |k: usize, outcome: StreamOutcome| {
        outcomes.lock().unwrap_or_else(|e| e.into_inner())[k] = Some(outcome);
    };
    let take_inline = |file: &mut ChunkFile| {
        while let Some(&k) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            let input = &inputs[k];
            let outcome = job.run(input, Feed::Inline(file));
            store(k, outcome);
        }
    };
    std::thread::scope(|scope| {
        for mut file in helper_files {
            let take_inline = &take_inline;
            scope.spawn(move || take_inline(&mut file));
        }
        // With the call sites' pass, the pass is the bound and the pipelined stream's record
        // buffers (a chunk each, 56 MB) the largest memory beside the live set: python3's
        // `--stacks=all` trace took 243-255 MiB with them, 203 MiB inline, in about the same time
        // (its sampled trace 0.5 s slower of 2.6; bench/HISTORY.md).
        let largest = &inputs[order[0]];
        let outcome = if job.sites {
            job.run(largest, Feed::Inline(&mut file))
        } else {
            pipelined(&mut file, largest)
        };
        store(order[0], outcome);
        take_inline(&mut file);
    });
    let outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(outcomes
        .into_iter()
        .map(|o| o.expect("every stream is taken by one thread"))
        .collect())
}

/// The chunks of `input` read from `file`, in order.
fn read<'a>(
    file: &'a mut ChunkFile,
    input: &'a StreamInput,
) -> impl Iterator<Item = Result<RawChunk, TraceError>> + Send + 'a {
    input
        .chunks
        .iter()
        .map(move |c| file.read_chunk(input.stream, c))
}

/// How a stream's chunks are fed to its pass: read, decoded and analysed on this thread, or
/// pipelined over this many decoder threads.
enum Feed<'f> {
    Inline(&'f mut ChunkFile),
    Pipelined(&'f mut ChunkFile, usize),
}

impl StreamJob<'_> {
    /// Analyse one image, its chunks fed as `feed` says.
    fn run(&self, input: &StreamInput, feed: Feed) -> StreamOutcome {
        let info = &input.info;
        if !self.sites {
            let analyzer = ProcessAnalyzer::new(info.clone(), self.config);
            return self.run_pass(input, feed, analyzer, |_| None);
        }
        // Per-stack figures in the same pass, when call sites are asked for and recorded,
        // fed by the pass's own matching of frees to blocks. With every stack, each site's
        // resident pages too (sampled stacks leave most blocks without a site: no estimate of
        // them is made).
        let sites = SitePass::with_sampling(info.clone(), self.sampling);
        let sites = match self.sampling {
            None => sites.with_residency(&input.readings),
            Some(_) => sites,
        };
        let analyzer = ProcessAnalyzer::with_observer(info.clone(), self.config, sites);
        self.run_pass(input, feed, analyzer, |s| Some(Box::new(s.finish())))
    }

    /// Feed `analyzer` the chunks of `input`, then finish it, its observer by `sites`.
    fn run_pass<O: BlockObserver>(
        &self,
        input: &StreamInput,
        feed: Feed,
        mut analyzer: ProcessAnalyzer<O>,
        sites: impl FnOnce(O) -> Option<Box<ProcessSites>>,
    ) -> StreamOutcome {
        let stop = match feed {
            Feed::Inline(file) => {
                stream_pass::inline(read(file, input), &mut analyzer, self.progress)
            }
            Feed::Pipelined(file, decoders) => {
                stream_pass::pipelined(read(file, input), decoders, &mut analyzer, self.progress)
            }
        };
        let damage = match stop {
            None => None,
            Some((Stop::Damaged(e), done)) => {
                // The observer is told too: its blocks live at the cut are not leaks.
                analyzer.mark_truncated();
                Some((e, done))
            }
            Some((Stop::OutOfMemory, records)) => {
                let live = analyzer.live_blocks();
                return StreamOutcome::OutOfMemory { records, live };
            }
        };
        let (report, observer) = analyzer.finish_with_observer();
        StreamOutcome::Done {
            sites: sites(observer),
            report: Box::new(report),
            damage,
        }
    }
}
