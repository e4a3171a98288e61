//! `alloclens workload NAME`: the built-in workloads of the `workloads` crate. Their option structs
//! derive the arguments (the crate's `clap` feature), so `--help` shows the values the library
//! really uses. events and forkworkers share an event shape whose defaults differ per workload:
//! their arguments are defined here.
use std::process::ExitCode;

use anyhow::Context;
use workloads::cache::CacheOptions;
use workloads::churn::ChurnOptions;
use workloads::events::{EventShape, EventsOptions};
use workloads::forkworkers::ForkworkersOptions;
use workloads::leak::LeakOptions;
use workloads::realloc::ReallocOptions;
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
    Twowave(TwowaveOptions),
    /// Event loop with heavy-tailed object sizes and realloc-grown buffers, marker `event N` (CMS)
    Events(EventsArgs),
    /// Objects allocated in producer threads and freed in consumer threads (ATLAS multi-threaded)
    Xthread(XthreadOptions),
    /// Parent loads shared data, forks workers that process events (GaudiMP / CMS multi-process)
    Forkworkers(ForkworkersArgs),
    /// Tight malloc/free of mixed small sizes (mimalloc-bench style)
    Churn(ChurnOptions),
    /// Strings grown by appending with realloc (git-cinnabar)
    Realloc(ReallocOptions),
    /// A tree of processes each holding memory for a while (for tests and the sampler benchmark)
    Tree(TreeOptions),
    /// A slow leak: 200- and 3000-byte objects never freed among transient ones (prints its live bytes)
    Leak(LeakOptions),
    /// A long-running cache: values of drifting sizes inserted and evicted by many threads, live set flat (Venice)
    Cache(CacheOptions),
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
    /// Data each worker builds after the fork, identical in every worker (KSM can merge it,
    /// copy-on-write cannot), MiB
    #[arg(long, default_value_t = ForkworkersOptions::default().postfork_mb)]
    postfork_mb: u64,
    /// Data each worker rewrites constantly, one word per page (KSM's pages_volatile), MiB
    #[arg(long, default_value_t = ForkworkersOptions::default().volatile_mb)]
    volatile_mb: u64,
    /// How long each worker stays alive after its events, holding its data (time for ksmd), ms
    #[arg(long, default_value_t = ForkworkersOptions::default().linger_ms)]
    linger_ms: u64,
}

impl EventsArgs {
    fn options(&self) -> EventsOptions {
        let base = EventsOptions::default();
        EventsOptions {
            events: self.events,
            shape: self.shape.shape(base.shape),
            seed: self.seed,
        }
    }
}

impl ForkworkersArgs {
    fn options(&self) -> ForkworkersOptions {
        let base = ForkworkersOptions::default();
        ForkworkersOptions {
            shared_mb: self.shared_mb,
            workers: self.workers,
            events: self.events,
            shape: self.shape.shape(base.shape),
            report_rss: self.report_rss,
            seed: self.seed,
            postfork_mb: self.postfork_mb,
            volatile_mb: self.volatile_mb,
            linger_ms: self.linger_ms,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut stdout = super::stdout();
    let out: &mut dyn std::io::Write = &mut stdout;
    let (name, result) = match &args.workload {
        Workload::Twowave(o) => ("twowave", workloads::twowave::run(o, out)),
        Workload::Events(a) => ("events", workloads::events::run(&a.options(), out)),
        Workload::Xthread(o) => ("xthread", workloads::xthread::run(o, out)),
        Workload::Forkworkers(a) => (
            "forkworkers",
            workloads::forkworkers::run(&a.options(), out),
        ),
        Workload::Churn(o) => ("churn", workloads::churn::run(o, out)),
        Workload::Realloc(o) => ("realloc", workloads::realloc::run(o, out)),
        Workload::Tree(o) => ("tree", workloads::tree::run(o, out)),
        Workload::Leak(o) => ("leak", workloads::leak::run(o, out)),
        Workload::Cache(o) => ("cache", workloads::cache::run(o, out)),
    };
    result.with_context(|| format!("workload {name}"))?;
    std::io::Write::flush(&mut stdout)?;
    Ok(ExitCode::SUCCESS)
}
