//! `alloclens workload NAME`: the built-in workloads of the `workloads` crate. Defaults come from the
//! library's option structs, so `--help` shows the values the library really uses.
use std::process::ExitCode;

use anyhow::Context;
use workloads::churn::ChurnOptions;
use workloads::events::{EventShape, EventsOptions};
use workloads::forkworkers::ForkworkersOptions;
use workloads::realloc::{Growth, ReallocOptions};
use workloads::tree::TreeOptions;
use workloads::twowave::TwowaveOptions;
use workloads::xthread::XthreadOptions;

#[derive(clap::Args)]
#[command(
    after_help = "Every workload ends with `throughput: <rate> <unit>/s`. See docs/workloads.md."
)]
pub struct Args {
    #[command(subcommand)]
    workload: Workload,
}

#[derive(clap::Subcommand)]
enum Workload {
    /// Allocate wave A, then wave B of small objects, free A, keep B (LinkedIn Venice: freed memory glibc keeps)
    Twowave(TwowaveArgs),
    /// Event loop with heavy-tailed object sizes and realloc-grown buffers, marker `event N` (CMS)
    Events(EventsArgs),
    /// Objects allocated in producer threads and freed in consumer threads (ATLAS multi-threaded)
    Xthread(XthreadArgs),
    /// Parent loads shared data, forks workers that process events (GaudiMP / CMS multi-process)
    Forkworkers(ForkworkersArgs),
    /// Tight malloc/free of mixed small sizes (mimalloc-bench style)
    Churn(ChurnArgs),
    /// Strings grown by appending with realloc (git-cinnabar)
    Realloc(ReallocArgs),
    /// A tree of processes each holding memory for a while (for tests and the sampler benchmark)
    Tree(TreeArgs),
}

#[derive(clap::Args)]
struct TwowaveArgs {
    /// MiB requested per wave
    #[arg(long, default_value_t = TwowaveOptions::default().wave_mb)]
    wave_mb: u64,
    /// Smallest object, bytes
    #[arg(long, default_value_t = TwowaveOptions::default().min_size)]
    min_size: u64,
    /// Largest object, bytes
    #[arg(long, default_value_t = TwowaveOptions::default().max_size)]
    max_size: u64,
    /// Hold wave B this long after freeing A, with light allocator activity, ms (at most 86400000)
    #[arg(long, default_value_t = TwowaveOptions::default().hold_ms)]
    hold_ms: u64,
    /// malloc/free pairs per ms during the hold
    #[arg(long, default_value_t = TwowaveOptions::default().activity_per_ms)]
    activity_per_ms: u32,
    /// Print `vmrss: PHASE KB kB` after each phase line
    #[arg(long)]
    report_rss: bool,
    /// Seed of the allocation sequence (same seed, same calls and sizes)
    #[arg(long, default_value_t = TwowaveOptions::default().seed)]
    seed: u64,
}

#[derive(clap::Args)]
struct ShapeArgs {
    /// Median objects per ordinary event, big events have 4x-50x more [default: 2000 for events,
    /// 600 for forkworkers]
    #[arg(long)]
    objects: Option<u64>,
    /// Median object size, bytes (log-normal)
    #[arg(long, default_value_t = EventShape::default().size_median)]
    size_median: u64,
    /// Largest object, bytes
    #[arg(long, default_value_t = EventShape::default().max_object)]
    max_object: u64,
    /// realloc-grown buffers per event
    #[arg(long, default_value_t = EventShape::default().buffers)]
    buffers: u32,
    /// Largest buffer, bytes
    #[arg(long, default_value_t = EventShape::default().max_buffer)]
    max_buffer: u64,
    /// Objects per thousand that outlive their event
    #[arg(long, default_value_t = EventShape::default().keep_permille)]
    keep_permille: u32,
    /// Events per thousand that are big
    #[arg(long, default_value_t = EventShape::default().big_permille)]
    big_permille: u32,
}

impl ShapeArgs {
    /// The shape, starting from `base` (the workload's own defaults).
    fn shape(&self, base: EventShape) -> EventShape {
        EventShape {
            objects: self.objects.unwrap_or(base.objects),
            size_median: self.size_median,
            max_object: self.max_object,
            buffers: self.buffers,
            buffer_median: base.buffer_median,
            max_buffer: self.max_buffer,
            keep_permille: self.keep_permille,
            big_permille: self.big_permille,
        }
    }
}

#[derive(clap::Args)]
struct EventsArgs {
    /// Events to process
    #[arg(long, default_value_t = EventsOptions::default().events)]
    events: u64,
    #[command(flatten)]
    shape: ShapeArgs,
    /// Seed of the allocation sequence (same seed, same calls and sizes)
    #[arg(long, default_value_t = EventsOptions::default().seed)]
    seed: u64,
}

#[derive(clap::Args)]
struct XthreadArgs {
    /// Producer threads (each with its own consumer thread)
    #[arg(long, default_value_t = XthreadOptions::default().threads)]
    threads: u32,
    /// Objects per producer
    #[arg(long, default_value_t = XthreadOptions::default().objects)]
    objects: u64,
    #[arg(long, default_value_t = XthreadOptions::default().min_size)]
    min_size: u64,
    #[arg(long, default_value_t = XthreadOptions::default().max_size)]
    max_size: u64,
    /// Objects per message to the consumer
    #[arg(long, default_value_t = XthreadOptions::default().batch)]
    batch: u32,
    /// Messages in flight before a producer blocks
    #[arg(long, default_value_t = XthreadOptions::default().queue)]
    queue: u32,
    /// Seed of the allocation sequence (same seed, same calls and sizes)
    #[arg(long, default_value_t = XthreadOptions::default().seed)]
    seed: u64,
}

#[derive(clap::Args)]
struct ForkworkersArgs {
    /// Data the parent loads (and the workers share copy-on-write), MiB
    #[arg(long, default_value_t = ForkworkersOptions::default().shared_mb)]
    shared_mb: u64,
    /// Worker processes to fork
    #[arg(long, default_value_t = ForkworkersOptions::default().workers)]
    workers: u32,
    /// Events per worker
    #[arg(long, default_value_t = ForkworkersOptions::default().events)]
    events: u64,
    #[command(flatten)]
    shape: ShapeArgs,
    /// Each worker prints `worker W rss_kb=R pss_kb=P` when it starts
    #[arg(long)]
    report_rss: bool,
    /// Seed of the allocation sequence (same seed, same calls and sizes)
    #[arg(long, default_value_t = ForkworkersOptions::default().seed)]
    seed: u64,
}

#[derive(clap::Args)]
struct ChurnArgs {
    /// free+malloc ops per thread
    #[arg(long, default_value_t = ChurnOptions::default().ops)]
    ops: u64,
    #[arg(long, default_value_t = ChurnOptions::default().threads)]
    threads: u32,
    /// Live objects per thread
    #[arg(long, default_value_t = ChurnOptions::default().slots)]
    slots: u32,
    #[arg(long, default_value_t = ChurnOptions::default().min_size)]
    min_size: u64,
    #[arg(long, default_value_t = ChurnOptions::default().max_size)]
    max_size: u64,
    /// Seed of the allocation sequence (same seed, same calls and sizes)
    #[arg(long, default_value_t = ChurnOptions::default().seed)]
    seed: u64,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum GrowthArg {
    /// realloc to the exact length on every append
    Exact,
    /// realloc to twice the capacity when full
    Doubling,
}

#[derive(clap::Args)]
struct ReallocArgs {
    /// Total appends
    #[arg(long, default_value_t = ReallocOptions::default().appends)]
    appends: u64,
    /// Strings built at the same time
    #[arg(long, default_value_t = ReallocOptions::default().strings)]
    strings: u32,
    /// Median appended chunk, bytes
    #[arg(long, default_value_t = ReallocOptions::default().append_median)]
    append_median: u64,
    /// A string is finished at this size, KiB
    #[arg(long, default_value_t = ReallocOptions::default().max_kb)]
    max_kb: u64,
    #[arg(long, value_enum, default_value = "exact")]
    growth: GrowthArg,
    /// Finished strings per thousand kept to the end
    #[arg(long, default_value_t = ReallocOptions::default().keep_permille)]
    keep_permille: u32,
    /// Seed of the allocation sequence (same seed, same calls and sizes)
    #[arg(long, default_value_t = ReallocOptions::default().seed)]
    seed: u64,
}

#[derive(clap::Args)]
struct TreeArgs {
    /// Processes in the tree, this one included
    #[arg(long, default_value_t = TreeOptions::default().procs)]
    procs: u32,
    /// Resident memory each process holds, MiB
    #[arg(long, default_value_t = TreeOptions::default().mb)]
    mb: u64,
    /// How long each process holds it, seconds
    #[arg(long, default_value_t = TreeOptions::default().seconds)]
    seconds: f64,
    /// Seed of the allocation sequence (same seed, same calls and sizes)
    #[arg(long, default_value_t = TreeOptions::default().seed)]
    seed: u64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout();
    let out: &mut dyn std::io::Write = &mut stdout;
    let (name, result) = match args.workload {
        Workload::Twowave(a) => (
            "twowave",
            workloads::twowave::run(
                &TwowaveOptions {
                    wave_mb: a.wave_mb,
                    min_size: a.min_size,
                    max_size: a.max_size,
                    hold_ms: a.hold_ms,
                    activity_per_ms: a.activity_per_ms,
                    report_rss: a.report_rss,
                    seed: a.seed,
                },
                out,
            ),
        ),
        Workload::Events(a) => (
            "events",
            workloads::events::run(
                &EventsOptions {
                    events: a.events,
                    shape: a.shape.shape(EventsOptions::default().shape),
                    seed: a.seed,
                },
                out,
            ),
        ),
        Workload::Xthread(a) => (
            "xthread",
            workloads::xthread::run(
                &XthreadOptions {
                    threads: a.threads,
                    objects: a.objects,
                    min_size: a.min_size,
                    max_size: a.max_size,
                    batch: a.batch,
                    queue: a.queue,
                    seed: a.seed,
                },
                out,
            ),
        ),
        Workload::Forkworkers(a) => (
            "forkworkers",
            workloads::forkworkers::run(
                &ForkworkersOptions {
                    shared_mb: a.shared_mb,
                    workers: a.workers,
                    events: a.events,
                    shape: a.shape.shape(ForkworkersOptions::default().shape),
                    report_rss: a.report_rss,
                    seed: a.seed,
                },
                out,
            ),
        ),
        Workload::Churn(a) => (
            "churn",
            workloads::churn::run(
                &ChurnOptions {
                    ops: a.ops,
                    threads: a.threads,
                    slots: a.slots,
                    min_size: a.min_size,
                    max_size: a.max_size,
                    seed: a.seed,
                },
                out,
            ),
        ),
        Workload::Realloc(a) => (
            "realloc",
            workloads::realloc::run(
                &ReallocOptions {
                    appends: a.appends,
                    strings: a.strings,
                    append_median: a.append_median,
                    max_kb: a.max_kb,
                    growth: match a.growth {
                        GrowthArg::Exact => Growth::Exact,
                        GrowthArg::Doubling => Growth::Doubling,
                    },
                    keep_permille: a.keep_permille,
                    seed: a.seed,
                },
                out,
            ),
        ),
        Workload::Tree(a) => (
            "tree",
            workloads::tree::run(
                &TreeOptions {
                    procs: a.procs,
                    mb: a.mb,
                    seconds: a.seconds,
                    seed: a.seed,
                },
                out,
            ),
        ),
    };
    result.with_context(|| format!("workload {name}"))?;
    Ok(ExitCode::SUCCESS)
}
