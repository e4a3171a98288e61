//! `alloclens replay`: one recorded allocation sequence performed under any allocator variant, with
//! what that allocator's memory did measured against what the program really held.
//!
//! [`Replay::open`] decodes a trace once into per-thread call lists held in shared memfd mappings
//! (outside malloc); [`Replay::run`] starts one replay process per call with the variant's
//! allocator preloaded (`alloclens replay-driver`, [`driver_main`]), which performs the calls (one
//! thread per recorded thread, a cross-thread free waiting for its allocation) and measures its
//! anonymous RSS at ~1000 points on the recorded call axis. [`replay_variant`] does both for one
//! variant: what a search over allocator settings calls as its evaluator.
//!
//! ```no_run
//! let variant = allocators::parse_variant("jemalloc:dirty_decay_ms=0")?;
//! let r = replay::replay_variant("run.alt".as_ref(), &variant, &replay::ReplayOptions::default())?;
//! println!("{} calls/s, peak RSS {} B, ideal {} B", r.calls_per_s, r.figures.peak_rss, r.figures.ideal_peak);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
mod calls;
mod driver;
pub mod files;
mod measure;
mod plan;
mod process;
pub mod results_dir;
mod shared;
mod warnings;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use measure::{Figures, PhaseFigures, Sample, Span, START_PHASE};
pub use plan::{LargeBlocks, MarkerAt, Skipped, DEFAULT_ALIGN_LOG2, TOUCH_BLOCK_LIMIT};
pub use process::{Ending, ImageReplay};
pub use warnings::replay_warnings;

/// How new blocks are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Touch {
    /// Every byte (the block is filled).
    All,
    /// One byte per page: the block's pages become resident, as when a program writes it.
    #[default]
    Pages,
    /// Nothing: only what the allocator itself writes is resident.
    None,
}

impl Touch {
    fn code(self) -> u64 {
        match self {
            Touch::All => shared::TOUCH_ALL,
            Touch::Pages => shared::TOUCH_PAGES,
            Touch::None => shared::TOUCH_NONE,
        }
    }
}

/// What to replay and how.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// One thread performs every call in the recorded global order.
    pub serial: bool,
    /// Only the images of this process (default: every image, one after the other).
    pub process: Option<u32>,
    /// Replay up to the end of the first phase with this marker label, and measure that phase.
    pub phase: Option<String>,
    pub touch: Touch,
    /// A replay process still running after this is killed and reported as timed out.
    pub timeout: Option<Duration>,
    /// Read the allocator's own statistics at the end (preloads the watch agent, which counts every
    /// call the allocator receives: a few ns per call).
    pub allocator_stats: bool,
    /// The program that runs `replay-driver` (default: this executable, which must be alloclens).
    pub driver: Option<PathBuf>,
    /// Measurement points per process image (besides one at each marker, the start and the end).
    pub samples: usize,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            serial: false,
            process: None,
            phase: None,
            touch: Touch::Pages,
            timeout: None,
            allocator_stats: true,
            driver: None,
            samples: 1000,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Trace(#[from] trace::TraceError),
    #[error("the trace has no process {pid} (its processes: {})", list(pids))]
    NoSuchProcess { pid: u32, pids: Vec<u32> },
    #[error("the trace has no phase '{label}' (phases are the labels of its markers: record with --marker)")]
    NoSuchPhase { label: String },
    #[error("cannot map memory for the replay: {0}")]
    Memory(#[source] std::io::Error),
    #[error("cannot find the replay driver: {0}")]
    Driver(#[source] std::io::Error),
}

fn list(pids: &[u32]) -> String {
    let v: Vec<String> = pids.iter().map(u32::to_string).collect();
    v.join(", ")
}

/// Everything measured replaying one variant once (every selected process image).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VariantReplay {
    pub variant: String,
    pub allocator: String,
    pub repeat: u32,
    /// "ok", "signal 11 (SIGSEGV)", "timeout", "exit 1", "not started: ...": the first image that
    /// did not end well.
    pub ending: String,
    pub ok: bool,
    /// Calls performed, replay seconds (sum over images), calls per second.
    pub calls: u64,
    pub seconds: f64,
    pub calls_per_s: f64,
    /// CPU seconds of the replay processes.
    pub user_s: f64,
    pub sys_s: f64,
    /// The image with the highest RSS peak (the only one for a single-process trace); its
    /// `ideal_peak` is the highest of every image's.
    pub figures: Figures,
    pub images: Vec<ImageReplay>,
}

/// A trace decoded for replay: decode once, replay under many variants.
pub struct Replay {
    path: PathBuf,
    images: Vec<plan::ImagePlan>,
    options: ReplayOptions,
    /// What could not be read of the trace (damage, a missing trailer), one sentence each.
    pub warnings: Vec<String>,
}

impl Replay {
    pub fn open(trace_path: &Path, options: &ReplayOptions) -> Result<Replay, ReplayError> {
        let mut reader = trace::TraceReader::open(trace_path)?;
        let mut warnings = Vec::new();
        let images = plan::plan_images(&mut reader, options, &mut warnings)?;
        let large = images
            .iter()
            .map(|i| i.large_blocks)
            .fold(LargeBlocks::default(), |a, b| LargeBlocks {
                count: a.count + b.count,
                largest: a.largest.max(b.largest),
            });
        if large.count > 0 && options.touch != Touch::None {
            warnings.push(format!(
                "{} block{} larger than {} MiB (the largest {:.1} MiB): --touch writes only the first {} MiB of a block, the program may have touched less of it (--touch none) or more",
                large.count,
                if large.count == 1 { " is" } else { "s are" },
                TOUCH_BLOCK_LIMIT >> 20,
                large.largest as f64 / (1u64 << 20) as f64,
                TOUCH_BLOCK_LIMIT >> 20,
            ));
        }
        Ok(Replay {
            path: trace_path.to_path_buf(),
            images,
            options: options.clone(),
            warnings,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Calls one replay performs (every image).
    pub fn calls(&self) -> u64 {
        self.images.iter().map(|i| i.calls).sum()
    }

    /// Process images to replay.
    pub fn images(&self) -> usize {
        self.images.len()
    }

    /// Calls left out, summed over the images.
    pub fn skipped(&self) -> Skipped {
        let mut s = Skipped::default();
        for i in &self.images {
            s.unknown_frees += i.skipped.unknown_frees;
            s.double_frees += i.skipped.double_frees;
            s.failed_in_trace += i.skipped.failed_in_trace;
            s.unknown_reallocs_as_malloc += i.skipped.unknown_reallocs_as_malloc;
        }
        s
    }

    /// Replays every image under `variant`; `progress(done, total)` is called while it runs.
    pub fn run(
        &self,
        variant: &allocators::Variant,
        repeat: u32,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<VariantReplay, ReplayError> {
        let driver = match &self.options.driver {
            Some(d) => d.clone(),
            None => std::env::current_exe().map_err(ReplayError::Driver)?,
        };
        let total = self.calls();
        let mut before = 0u64;
        let mut images = Vec::new();
        for plan in &self.images {
            let mut p = |done: u64| progress(before + done, total);
            let image = process::replay_image(plan, variant, &self.options, &driver, &mut p);
            before += plan.calls;
            let ok = image.ending.ok();
            images.push(image);
            if !ok {
                break;
            }
        }
        Ok(summarise(variant, repeat, images))
    }
}

fn summarise(
    variant: &allocators::Variant,
    repeat: u32,
    images: Vec<ImageReplay>,
) -> VariantReplay {
    let bad = images.iter().find(|i| !i.ending.ok());
    let calls: u64 = images.iter().map(|i| i.calls_performed).sum();
    let seconds: f64 = images.iter().map(|i| i.seconds).sum();
    let mut figures = images
        .iter()
        .max_by_key(|i| i.figures.peak_rss)
        .map(|i| i.figures.clone())
        .unwrap_or_default();
    // The same for every variant: the most any image held.
    figures.ideal_peak = images
        .iter()
        .map(|i| i.figures.ideal_peak)
        .max()
        .unwrap_or(0);
    VariantReplay {
        variant: variant.label.clone(),
        allocator: variant.allocator.clone(),
        repeat,
        ending: bad.map_or("ok".into(), |i| i.ending.describe()),
        ok: bad.is_none(),
        calls,
        seconds,
        calls_per_s: if seconds > 0.0 {
            calls as f64 / seconds
        } else {
            0.0
        },
        user_s: images.iter().map(|i| i.user_s).sum(),
        sys_s: images.iter().map(|i| i.sys_s).sum(),
        figures,
        images,
    }
}

/// Decodes `trace_path` and replays it once under `variant`.
pub fn replay_variant(
    trace_path: &Path,
    variant: &allocators::Variant,
    options: &ReplayOptions,
) -> Result<VariantReplay, ReplayError> {
    Replay::open(trace_path, options)?.run(variant, 0, &mut |_, _| {})
}

/// The replay process's main: `args` are what follows `replay-driver` (`--plan-fd N`). Returns the
/// exit status.
pub fn driver_main(args: &[String]) -> i32 {
    let fd = match args {
        [flag, n] if flag == "--plan-fd" => n.parse().ok(),
        _ => None,
    };
    let Some(fd) = fd else {
        eprintln!(
            "alloclens: error: replay-driver is started by `alloclens replay`, with --plan-fd N"
        );
        return 2;
    };
    match driver::run(fd) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("alloclens: error: replay driver: {e}");
            1
        }
    }
}
