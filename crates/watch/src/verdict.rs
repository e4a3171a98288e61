//! The verdict: why RSS moves, with figures. Trends are Theil-Sen slopes over the window
//! ([`crate::slope`]); the classes and their thresholds are defined in docs/memory-metrics.md ("The verdict").
//! This module decides the class; `explain.rs` puts it and its figures into sentences.

use crate::explain;
pub use crate::explain::{human_duration, shell_line, signed_bytes};
use crate::slope::{median, theil_sen};
use serde::{Deserialize, Serialize};

/// What the window shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Live bytes grow: the program keeps what it allocates.
    Leak,
    /// RSS grows while live bytes do not, and the allocator's free memory grows with it.
    Fragmentation,
    /// The allocator keeps memory the program freed (the live set shrank and RSS did not follow, or
    /// a trim gave back a large share).
    Retention,
    /// RSS grows outside malloc's heap (files, stacks, shared memory): not the allocator.
    OutsideHeap,
    /// Nothing grows and nothing large is kept.
    Stable,
    /// Too few samples, or RSS grows in the heap while the program's live bytes were not measured
    /// (a leak and fragmentation then look alike): the evidence says which, and how to measure.
    Undetermined,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::Leak => "leak",
            Class::Fragmentation => "fragmentation",
            Class::Retention => "retention",
            Class::OutsideHeap => "outside-heap",
            Class::Stable => "stable",
            Class::Undetermined => "undetermined",
        }
    }
}

/// What the allocator said last about the free memory it holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeldFree {
    pub allocator: String,
    /// Free bytes still resident (allocator's `free_resident`).
    pub free: u64,
    /// Bytes handed out to the program (in use).
    pub handed_out: Option<u64>,
    pub free_chunks: Option<u64>,
    pub arenas: usize,
}

/// What a trim probe (malloc_trim(0) or the allocator's purge) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TrimResult {
    /// The allocator's call, for the sentence ("malloc_trim(0)").
    #[serde(skip)]
    pub call: &'static str,
    pub rss_before: u64,
    pub rss_after: u64,
}

impl TrimResult {
    pub fn returned(&self) -> u64 {
        self.rss_before.saturating_sub(self.rss_after)
    }
}

/// Everything the verdict is computed from. Each series is (seconds since the start, bytes).
#[derive(Debug, Clone, Default)]
pub struct VerdictInput {
    pub rss: Vec<(f64, f64)>,
    /// The heap part of the smaps split ([heap] + private anonymous mappings).
    pub heap: Vec<(f64, f64)>,
    /// The program's live bytes (the agent), or the allocator's in-use bytes (an attached agent).
    pub live: Vec<(f64, f64)>,
    /// The number of live blocks (the agent), when known: with `live`, the average size of what
    /// grows.
    pub live_blocks: Vec<(f64, f64)>,
    /// How `live` was measured, for the sentences ("live bytes", "in-use bytes").
    pub live_name: String,
    /// Free bytes the allocator holds, resident.
    pub free: Vec<(f64, f64)>,
    pub held: Option<HeldFree>,
    pub trim: Option<TrimResult>,
    /// The watched command (for the remedy's command line); empty for `--pid` (then `CMD`).
    pub command: Vec<String>,
    /// The allocator serving malloc (glibc, jemalloc, ...), if known.
    pub allocator: Option<String>,
    /// Installed allocators, so the remedy names only those.
    pub installed: Vec<String>,
    /// RSS of the processes whose live bytes are not in `live` (no agent snapshot).
    pub rss_unmeasured: Vec<(f64, f64)>,
    /// Why live bytes are missing and how to measure them, when known.
    pub live_missing: Option<LiveMissing>,
    /// Which share of the heap's resident pages hold no live block, when the watch read it.
    pub residency: Option<crate::residency::ResidencyQuote>,
    /// The CPU seconds the watched tree had taken by each sample (`procmem::cpu_seconds`):
    /// the clock a start-up fill is told on, when known ([`warmup_end`]).
    pub cpu: Vec<(f64, f64)>,
}

/// Why the program's live bytes were not measured, and how they can be.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveMissing {
    /// "process 12 (static-leak) is statically linked: ...", joined into the sentence.
    pub why: Vec<String>,
    /// What to do, in words, and the commands that measure them.
    pub remedy: Vec<String>,
    pub commands: Vec<String>,
}

/// The trend of one series over the window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Trend {
    /// Theil-Sen slope, bytes per hour.
    pub per_hour: f64,
    /// The slope times the window: the change the trend stands for, in bytes.
    pub change: f64,
    pub first: f64,
    pub last: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub class: Class,
    /// Seconds between the first and the last sample used.
    pub window_s: f64,
    /// Seconds of warm-up left out at the start ([`warmup_end`]).
    #[serde(default)]
    pub warmup_s: f64,
    /// A change counts as growth from this many bytes: max(1 MiB, 5 % of the median RSS).
    pub threshold: f64,
    pub rss: Option<Trend>,
    pub heap: Option<Trend>,
    pub live: Option<Trend>,
    pub free: Option<Trend>,
    /// The sentences, headline first: figures, then the class and why.
    pub evidence: Vec<String>,
    /// What to try, in words, and the commands that test it.
    pub remedy: Vec<String>,
    pub commands: Vec<String>,
}

pub(crate) const MIB: f64 = 1024.0 * 1024.0;

/// The trend of `series`; its change is the slope times the series' own span (a series measured
/// over part of the window is not extrapolated to the rest).
fn trend(series: &[(f64, f64)]) -> Option<Trend> {
    let slope = theil_sen(series)?;
    let span = series.last()?.0 - series.first()?.0;
    Some(Trend {
        per_hour: slope * 3600.0,
        change: slope * span,
        first: series.first()?.1,
        last: series.last()?.1,
    })
}

/// How much faster than the series moves after it a fill that ends past the first quarter must
/// have been to be a warm-up: a steady leak rises at one rate all along (ratio 1).
const PLATEAU_SLOWDOWN: f64 = 4.0;

/// The end of the warm-up: a program that fills its memory at the start (a cache, a server
/// loading its data) and then holds it must not pass for one that grows. The fill is looked for in
/// RSS and in the live bytes ([`fill_end`]), and the warm-up ends at the later of the two fills
/// found: RSS alone misses a fill when the allocator's RSS creeps on after it (glibc under sizes
/// that drift), the live bytes alone when the program touches what it allocated later (RSS rises
/// after live bytes). With the program's CPU time (`cpu`, seconds taken by each sample's time) the
/// fill is told on that clock: a program starved of CPU fills as slowly in wall time as a leak
/// grows, but in the ticks it took a fill is as short as ever. Returns the time the window starts
/// (the first sample's without a warm-up).
pub fn warmup_end(rss: &[(f64, f64)], live: &[(f64, f64)], cpu: &[(f64, f64)]) -> f64 {
    let Some(first) = rss.first() else {
        return 0.0;
    };
    let end = |series: &[(f64, f64)]| -> Option<f64> {
        let i = match on_cpu_clock(series, cpu) {
            Some(ticks) => fill_end(&ticks)?,
            None => fill_end(series)?,
        };
        Some(series[i].0)
    };
    [end(rss), end(live)]
        .into_iter()
        .flatten()
        .fold(first.0, f64::max)
}

/// `series` with each time replaced by the CPU seconds taken by then (interpolated between the
/// readings of `cpu`), when `cpu` covers it and the program took some CPU over it.
fn on_cpu_clock(series: &[(f64, f64)], cpu: &[(f64, f64)]) -> Option<Vec<(f64, f64)>> {
    let (first, last) = (cpu.first()?, cpu.last()?);
    if cpu.len() < 2 || last.1 - first.1 <= 0.0 {
        return None;
    }
    let at = |t: f64| -> f64 {
        let i = cpu.partition_point(|p| p.0 < t);
        match (i.checked_sub(1).map(|j| cpu[j]), cpu.get(i)) {
            (Some(a), Some(b)) if b.0 > a.0 => a.1 + (b.1 - a.1) * (t - a.0) / (b.0 - a.0),
            (_, Some(b)) => b.1,
            (Some(a), None) => a.1,
            (None, None) => 0.0,
        }
    };
    Some(series.iter().map(|&(t, v)| (at(t), v)).collect())
}

/// When `series` ends a fill: the index of the first sample that reaches 80 % of the way from the
/// series' lowest value to its second half's median, when that is within the first quarter of the
/// series' span, or within its first half and the series then plateaus: it moves on at most a
/// quarter of the fill's rate (its Theil-Sen slope from there on, against the fill's mean rise). A
/// fill slowed down by a starved CPU ends past the first quarter; a steady leak never slows down.
/// The span is the series' own, so that live bytes measured over part of the watch cannot pass a
/// leak for a fill. None: no fill (a series that grows all along, or too short).
fn fill_end(series: &[(f64, f64)]) -> Option<usize> {
    if series.len() < 8 {
        return None;
    }
    let start = series.first()?.0;
    let watch = series.last()?.0 - start;
    let mut second: Vec<f64> = series[series.len() / 2..].iter().map(|p| p.1).collect();
    let level = median(&mut second)?;
    let low = series.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    if level - low < MIB {
        return None;
    }
    let target = low + 0.8 * (level - low);
    let reached = series.iter().position(|p| p.1 >= target)?;
    let end = series[reached].0;
    let filling = end - start;
    if filling <= 0.25 * watch {
        return Some(reached);
    }
    let fill_rate = (target - low) / filling;
    let after = theil_sen(&series[reached..])?;
    (filling <= 0.5 * watch && after * PLATEAU_SLOWDOWN <= fill_rate).then_some(reached)
}

/// Why the verdict could not be made (`undetermined`), for the sentence.
pub(crate) enum Unknown {
    /// No live bytes in the window (or too few to make a trend).
    NotMeasured,
    /// Live bytes measured over part of the window only (the agent's snapshots stopped).
    Partly { from: f64, to: f64 },
    /// RSS grows in processes whose live bytes are not measured.
    InUnmeasured { change: f64 },
}

/// Samples a verdict needs: fewer cannot tell a start-up fill from growth ([`fill_end`] looks for
/// one from this many), and a program that allocates, frees part and exits within a few samples
/// would pass for a leak (`workload twowave` in 0.45 s at `--interval 100ms`: 5 samples, "leak").
pub(crate) const MIN_SAMPLES: usize = 8;

pub fn classify(input: &VerdictInput) -> Verdict {
    let sampled = input.rss.len();
    let start = warmup_end(&input.rss, &input.live, &input.cpu);
    let warmup_s = input.rss.first().map_or(0.0, |p| start - p.0);
    // Points before the warm-up's end are left out; without a warm-up every point stays (a gdb
    // reading taken at the first sample's time is in the window).
    let after = |s: &[(f64, f64)]| -> Vec<(f64, f64)> {
        s.iter()
            .copied()
            .filter(|p| warmup_s <= 0.0 || p.0 >= start)
            .collect()
    };
    let input = &VerdictInput {
        rss: after(&input.rss),
        heap: after(&input.heap),
        live: after(&input.live),
        live_blocks: after(&input.live_blocks),
        free: after(&input.free),
        rss_unmeasured: after(&input.rss_unmeasured),
        ..input.clone()
    };
    let window = match (input.rss.first(), input.rss.last()) {
        (Some(a), Some(b)) => b.0 - a.0,
        _ => 0.0,
    };
    let mut rss_levels: Vec<f64> = input.rss.iter().map(|p| p.1).collect();
    let threshold = median(&mut rss_levels).map_or(MIB, |m| (0.05 * m).max(MIB));
    let rss = trend(&input.rss);
    let heap = trend(&input.heap);
    let live = trend(&input.live);
    let free = trend(&input.free);
    let mut v = Verdict {
        class: Class::Undetermined,
        window_s: window,
        warmup_s,
        threshold,
        rss,
        heap,
        live,
        free,
        evidence: Vec::new(),
        remedy: Vec::new(),
        commands: Vec::new(),
    };
    let Some(rss) = rss.filter(|_| input.rss.len() >= 3 && sampled >= MIN_SAMPLES) else {
        v.evidence
            .push(explain::too_few_samples(sampled, input.rss.len()));
        return v;
    };
    let grows = |c: f64| c >= threshold;
    let rss_grows = grows(rss.change);
    let live_grows = live.is_some_and(|l| grows(l.change));
    // Live bytes stand for the window when they span most of it (the first sample comes before
    // the agent's first snapshot; the last may come while the program exits).
    let live_span = match (input.live.first(), input.live.last()) {
        (Some(a), Some(b)) if input.live.len() >= 2 => Some((a.0, b.0)),
        _ => None,
    };
    let unmeasured =
        trend(&input.rss_unmeasured).filter(|u| u.change >= threshold.max(0.5 * rss.change));
    let unknown = match live_span {
        None => Some(Unknown::NotMeasured),
        Some((a, b)) if b - a < 0.75 * window => Some(Unknown::Partly { from: a, to: b }),
        _ => unmeasured.map(|u| Unknown::InUnmeasured { change: u.change }),
    };
    let unexplained = rss.change - live.map_or(0.0, |l| l.change.max(0.0));
    // The heap part (brk and private anonymous mappings) grows with RSS.
    let heap_grows = heap.is_some_and(|h| h.change >= 0.5 * rss.change);
    let free_grows = free.is_some_and(|f| f.change >= 0.5 * unexplained);

    let mut kept = None;
    v.class = if live_grows {
        Class::Leak
    } else if rss_grows {
        if heap.is_some() && !heap_grows {
            // Files, stacks, shared memory: what live bytes say does not matter.
            Class::OutsideHeap
        } else if unknown.is_some() {
            Class::Undetermined
        } else if free_grows {
            Class::Fragmentation
        } else if free.is_some() {
            // The allocator reports its free memory, and it does not grow: the heap part
            // grows in private anonymous mappings malloc does not hold.
            Class::OutsideHeap
        } else if heap.is_some_and(|h| h.change - live.map_or(0.0, |l| l.change) >= threshold) {
            Class::Fragmentation
        } else {
            Class::Undetermined
        }
    } else if trim_returned_much(input, threshold) {
        Class::Retention
    } else if let Some(d) = kept_drop(input, live, threshold) {
        kept = Some(d);
        Class::Retention
    } else {
        Class::Stable
    };
    let findings = Findings {
        rss,
        heap_grows,
        unknown,
        kept,
    };
    explain::explain(input, &mut v, &findings);
    v
}

/// A trim gave back a large share of RSS.
fn trim_returned_much(input: &VerdictInput, threshold: f64) -> bool {
    input.trim.is_some_and(|t| {
        let rss_level = input.rss.last().map_or(0.0, |p| p.1);
        t.returned() as f64 >= threshold.max(0.10 * rss_level)
    })
}

/// The live set's fall from its peak to the end of the window, that RSS did not follow.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeptDrop {
    pub peak: f64,
    pub end: f64,
}

/// Memory kept after the live set shrank: the live set's peak and the RSS then, against the end.
fn kept_drop(input: &VerdictInput, live: Option<Trend>, threshold: f64) -> Option<KeptDrop> {
    live?;
    let peak = input
        .live
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let live_end = input.live.last().map_or(0.0, |p| p.1);
    let drop = peak.1 - live_end;
    if drop < threshold.max(0.2 * peak.1) {
        return None;
    }
    let rss_at_peak = input
        .rss
        .iter()
        .min_by(|a, b| (a.0 - peak.0).abs().total_cmp(&(b.0 - peak.0).abs()))
        .map_or(0.0, |p| p.1);
    let rss_end = input.rss.last().map_or(0.0, |p| p.1);
    (rss_at_peak - rss_end < 0.5 * drop).then_some(KeptDrop {
        peak: peak.1,
        end: live_end,
    })
}

/// What the decision found beyond the class, that the sentences tell ([`explain`]).
pub(crate) struct Findings {
    pub rss: Trend,
    /// The heap part (brk and private anonymous mappings) grows with RSS.
    pub heap_grows: bool,
    /// Why live bytes cannot tell leak from fragmentation, if they cannot.
    pub unknown: Option<Unknown>,
    /// Retention told by the live set's fall from its peak (the headline gives the fall).
    pub kept: Option<KeptDrop>,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const M: f64 = MIB;
    /// `n` points one minute apart of `f(i)` MiB.
    pub(crate) fn series(n: usize, f: impl Fn(usize) -> f64) -> Vec<(f64, f64)> {
        (0..n).map(|i| (60.0 * i as f64, f(i) * M)).collect()
    }

    pub(crate) fn input(
        rss: Vec<(f64, f64)>,
        live: Vec<(f64, f64)>,
        free: Vec<(f64, f64)>,
    ) -> VerdictInput {
        VerdictInput {
            heap: rss.iter().map(|p| (p.0, p.1 * 0.9)).collect(),
            rss,
            live,
            free,
            live_name: "live bytes".into(),
            command: vec!["./server".into(), "--port".into(), "80 80".into()],
            allocator: Some("glibc".into()),
            installed: vec!["glibc".into(), "jemalloc".into()],
            ..Default::default()
        }
    }

    #[test]
    fn live_growing_with_rss_is_a_leak() {
        // 121 points over 2 h: RSS 100 -> 340 MiB, live 50 -> 290 MiB (2 MiB per minute each).
        let i = input(
            series(121, |i| 100.0 + 2.0 * i as f64),
            series(121, |i| 50.0 + 2.0 * i as f64),
            series(121, |_| 10.0),
        );
        let v = classify(&i);
        assert_eq!(v.class, Class::Leak);
        assert_eq!(v.window_s, 7200.0);
        // 2 MiB/min = 120 MiB/h, 240 MiB over the window, for both.
        let live = v.live.unwrap();
        assert!((live.per_hour - 120.0 * M).abs() < 1.0, "{live:?}");
        assert!((v.rss.unwrap().change - 240.0 * M).abs() < 1.0);
        assert_eq!(
            v.evidence[0],
            "RSS +240.0 MiB in 2 h while live bytes +240.0 MiB: a leak."
        );
        assert!(
            v.commands[0].starts_with("alloclens record"),
            "{:?}",
            v.commands
        );
        // no block counts: no average size
        assert!(!v.evidence[1].contains("on average"), "{:?}", v.evidence);
        // 240 MiB in 245,760 more blocks: 1 KiB each on average.
        let mut with_blocks = i.clone();
        with_blocks.live_blocks = (0..121)
            .map(|k| (60.0 * k as f64, 2048.0 * k as f64))
            .collect();
        let v = classify(&with_blocks);
        assert!(
            v.evidence[1].contains("in 245.8 k more live blocks of 1.0 KiB on average"),
            "{:?}",
            v.evidence
        );
        assert!(v.commands[0].ends_with("./server --port '80 80'"));
    }

    #[test]
    fn flat_rss_is_stable_and_a_start_up_fill_is_not_growth() {
        // fills 0 -> 200 MiB in 3 minutes, then flat for 57: the trend is flat.
        let i = input(
            series(60, |i| (i.min(3) * 66) as f64 + 10.0),
            series(60, |i| (i.min(3) * 60) as f64),
            series(60, |_| 2.0),
        );
        let v = classify(&i);
        assert_eq!(v.class, Class::Stable, "{:?}", v.evidence);
        assert!(v.commands.is_empty());
    }

    #[test]
    fn live_set_shrinking_while_rss_stays_is_retention() {
        // live 300 MiB for 30 min then 60 MiB; RSS stays at 320 MiB.
        let i = input(
            series(60, |_| 320.0),
            series(60, |i| if i < 30 { 300.0 } else { 60.0 }),
            series(60, |i| if i < 30 { 10.0 } else { 250.0 }),
        );
        let v = classify(&i);
        assert_eq!(v.class, Class::Retention, "{:?}", v.evidence);
        assert!(v.commands[0].contains("glibc:trim_threshold=128k"));
        // Issue 35: the headline said "live bytes +0 B" (the step's Theil-Sen trend) after the
        // live set fell by 240 MiB.
        assert_eq!(
            v.evidence[0],
            "RSS +0 B in 59.0 min while live bytes fell 240.0 MiB from their peak (300.0 MiB -> 60.0 MiB): not a leak."
        );
    }

    /// Issue 38: the verdict quotes the share of the heap's resident pages that hold no live
    /// block where it is known (glibc's heap walked, jemalloc's dirty pages), says when it was not
    /// read or is not known, and leaves it out of a leak.
    #[test]
    fn the_verdict_quotes_the_heaps_free_pages_where_known() {
        use crate::residency::ResidencyQuote;
        let retention = || {
            input(
                series(60, |_| 320.0),
                series(60, |i| if i < 30 { 300.0 } else { 60.0 }),
                series(60, |i| if i < 30 { 10.0 } else { 250.0 }),
            )
        };
        let quoted = |q: ResidencyQuote| {
            let mut i = retention();
            i.residency = Some(q);
            let v = classify(&i);
            assert_eq!(v.class, Class::Retention, "{:?}", v.evidence);
            v.evidence.last().unwrap().clone()
        };
        let walked = ResidencyQuote {
            allocator: "glibc".into(),
            split: Some(heapwalk::PageSplit {
                arena_resident: 100 << 20,
                free_only: 61 << 20,
                reclaimable: 50 << 20,
                ..Default::default()
            }),
            pid: Some(42),
            t_s: Some(3.0),
            readings: 2,
            not_read: 1,
            ..Default::default()
        };
        assert_eq!(
            quoted(walked.clone()),
            "Retention: 61 % of the heap's resident pages hold no live block (61.0 MiB of \
             100.0 MiB in glibc's arenas, process 42 at 3 s; tcache and fastbin chunks count as \
             live); MADV_DONTNEED of them would return 50.0 MiB; the sites whose frees left them \
             are in a trace with block addresses: alloclens record --addresses -o heap.alt -- \
             ./server --port '80 80', then alloclens analyze --residency heap.alt."
        );
        let jemalloc = ResidencyQuote {
            allocator: "jemalloc".into(),
            free_pages: Some(30 << 20),
            heap_resident: Some(100 << 20),
            ..Default::default()
        };
        assert!(quoted(jemalloc).starts_with(
            "Retention: at least 30 % of the heap's resident pages hold no live block \
                 (30.0 MiB of free whole pages jemalloc reports, of 100.0 MiB resident"
        ),);
        let not_read = ResidencyQuote {
            allocator: "glibc".into(),
            not_read: 2,
            problem: Some("the heap changed under the walk: main arena: bad chunk size".into()),
            ..Default::default()
        };
        assert_eq!(
            quoted(not_read),
            "Retention: the heap's resident pages were not read at this sample (the heap changed \
             under the walk: main arena: bad chunk size): which hold no live block is not known."
        );
        let mimalloc = ResidencyQuote {
            allocator: "mimalloc".into(),
            ..Default::default()
        };
        assert_eq!(
            quoted(mimalloc),
            "Retention: which of the heap's resident pages hold no live block is not known for \
             mimalloc."
        );
        // A leak is told by its live bytes: no quote.
        let mut leak = input(
            series(121, |i| 100.0 + 2.0 * i as f64),
            series(121, |i| 50.0 + 2.0 * i as f64),
            series(121, |_| 10.0),
        );
        leak.residency = Some(walked);
        let v = classify(&leak);
        assert_eq!(v.class, Class::Leak);
        assert!(
            !v.evidence.iter().any(|e| e.contains("resident pages")),
            "{:?}",
            v.evidence
        );
    }

    #[test]
    fn a_large_trim_means_retention_a_small_one_stable() {
        let mut i = input(
            series(30, |_| 500.0),
            series(30, |_| 200.0),
            series(30, |_| 290.0),
        );
        i.trim = Some(TrimResult {
            call: "malloc_trim(0)",
            rss_before: 500 << 20,
            rss_after: 230 << 20,
        });
        assert_eq!(classify(&i).class, Class::Retention);
        i.trim = Some(TrimResult {
            call: "malloc_trim(0)",
            rss_before: 500 << 20,
            rss_after: 499 << 20,
        });
        assert_eq!(classify(&i).class, Class::Stable);
    }

    #[test]
    fn growth_outside_the_heap_is_not_the_allocator() {
        let mut i = input(
            series(60, |i| 100.0 + 2.0 * i as f64),
            series(60, |_| 50.0),
            Vec::new(),
        );
        i.heap = series(60, |_| 60.0);
        assert_eq!(classify(&i).class, Class::OutsideHeap);
    }

    #[test]
    fn a_fill_then_a_noisy_plateau_is_left_out_as_warm_up() {
        // 28 samples, 0.25 s apart: 13 -> 60 MiB in 1 s, then 56..72 MiB up and down (what
        // jemalloc:dirty_decay_ms=0 did under the cache workload).
        let plateau = [
            60.0, 63.0, 58.0, 56.0, 59.0, 60.0, 61.0, 60.0, 67.0, 61.0, 56.0, 56.0, 59.0, 61.0,
            62.0, 62.0, 70.0, 72.0, 59.0, 58.0, 61.0, 63.0, 58.0, 58.0,
        ];
        let rss: Vec<(f64, f64)> = [13.0, 18.0, 30.0, 45.0]
            .iter()
            .chain(&plateau)
            .enumerate()
            .map(|(i, v)| (0.25 * i as f64, v * M))
            .collect();
        // low 13, second-half median 60.5: 80 % of the way is 50.6 MiB, first reached at 1 s.
        assert_eq!(warmup_end(&rss, &[], &[]), 1.0);
        let live: Vec<(f64, f64)> = rss.iter().map(|p| (p.0, 35.0 * M)).collect();
        let i = input(rss, live, Vec::new());
        let v = classify(&i);
        assert_eq!(v.class, Class::Stable, "{:?}", v.evidence);
        assert_eq!(v.warmup_s, 1.0);
        assert!(v.evidence[0].starts_with("RSS +"), "{:?}", v.evidence);
        assert!(
            v.evidence[0].contains("in 5.8 s (after 1 s of warm-up)"),
            "{:?}",
            v.evidence
        );
    }

    /// RSS and live bytes (MiB, every 0.2 s) of `alloclens watch --interval 200ms --duration 10s
    /// -- alloclens workload cache --capacity-mb 64 --inserts-per-ms 2` on a loaded 2-core machine:
    /// the cache fills for 3.8 s, past the first quarter, then holds 64 MiB while RSS creeps.
    const SLOW_FILL_RSS: [f64; 50] = [
        13.0, 13.0, 13.0, 14.0, 15.0, 17.0, 20.0, 24.0, 30.0, 41.0, 56.0, 57.0, 57.0, 58.0, 59.0,
        61.0, 63.0, 67.0, 73.0, 79.0, 85.0, 86.0, 86.0, 86.0, 86.0, 86.0, 86.0, 86.0, 86.0, 86.0,
        91.0, 91.0, 91.0, 91.0, 91.0, 91.0, 91.0, 91.0, 91.0, 91.0, 93.0, 93.0, 93.0, 93.0, 93.0,
        93.0, 93.0, 93.0, 93.0, 93.0,
    ];
    const SLOW_FILL_LIVE: [f64; 20] = [
        0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 31.0, 44.0, 44.0, 45.0, 46.0, 47.0,
        49.0, 52.0, 56.0, 62.0,
    ];

    fn every_fifth_second(values: impl Iterator<Item = f64>) -> Vec<(f64, f64)> {
        values
            .enumerate()
            .map(|(i, v)| (0.2 * i as f64, v * M))
            .collect()
    }

    /// A fill that a starved CPU stretched past the first quarter, then a plateau: the fill is
    /// still the warm-up, and the live bytes it brought are not a leak (before: the whole window
    /// was kept and its Theil-Sen slope called the fill "a leak").
    #[test]
    fn a_fill_slowed_past_the_first_quarter_is_still_warm_up() {
        let rss = every_fifth_second(SLOW_FILL_RSS.into_iter());
        // low 13, second-half median 91: 80 % of the way is 75.4 MiB, first reached at 3.8 s of
        // 9.8 (39 %); RSS moves on at ~1 MiB/s after it, the fill rose at 16 MiB/s.
        assert!(
            (warmup_end(&rss, &[], &[]) - 3.8).abs() < 1e-9,
            "{}",
            warmup_end(&rss, &[], &[])
        );
        let live = every_fifth_second(SLOW_FILL_LIVE.into_iter().chain([64.0; 30]));
        let v = classify(&input(rss, live, Vec::new()));
        assert_ne!(v.class, Class::Leak, "{:?}", v.evidence);
        assert!((v.warmup_s - 3.8).abs() < 1e-9, "{}", v.warmup_s);
        assert!(
            v.evidence[0].contains("after 3.8 s of warm-up"),
            "{:?}",
            v.evidence
        );
    }

    /// RSS and live bytes (MiB, every 0.2 s) of the cache workload with `--capacity-mb 64
    /// --inserts-per-ms 8` under a 10 s watch, the workload stopped 70 ms of every 100 for its first
    /// 5 s (CPU starvation): live bytes fill for 4 s and hold 64 MiB; RSS creeps on to twice that.
    const STARVED_RSS: [f64; 50] = [
        13.0, 13.0, 13.0, 14.0, 14.0, 16.0, 18.0, 21.0, 25.0, 31.0, 40.0, 43.0, 43.0, 44.0, 45.0,
        46.0, 48.0, 51.0, 55.0, 61.0, 69.0, 72.0, 73.0, 74.0, 75.0, 78.0, 79.0, 83.0, 88.0, 95.0,
        105.0, 105.0, 105.0, 105.0, 105.0, 107.0, 107.0, 107.0, 109.0, 117.0, 126.0, 127.0, 127.0,
        127.0, 127.0, 127.0, 127.0, 127.0, 127.0, 126.0,
    ];
    const STARVED_LIVE: [f64; 28] = [
        0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 3.0, 5.0, 8.0, 14.0, 22.0, 30.0, 30.0, 31.0, 31.0, 32.0,
        34.0, 36.0, 40.0, 47.0, 55.0, 55.0, 58.0, 59.0, 60.0, 61.0, 63.0, 64.0,
    ];

    /// Under starvation the fill shows in the live bytes, while RSS, which glibc lets creep on,
    /// never plateaus: the live bytes' fill ends the warm-up, and RSS growing after it with live
    /// bytes flat is not a leak (before: "RSS +135.6 MiB in 10 s while live bytes +67.7 MiB: a
    /// leak").
    #[test]
    fn a_starved_fill_seen_in_the_live_bytes_is_warm_up() {
        let rss = every_fifth_second(STARVED_RSS.into_iter());
        let live = every_fifth_second(STARVED_LIVE.into_iter().chain([64.0; 22]));
        assert_eq!(warmup_end(&rss, &[], &[]), 0.0);
        // live: low 0, second-half median 64: 80 % is 51.2 MiB, first reached at 4 s of 9.8.
        assert!((warmup_end(&rss, &live, &[]) - 4.0).abs() < 1e-9);
        let v = classify(&input(rss, live, Vec::new()));
        assert_ne!(v.class, Class::Leak, "{:?}", v.evidence);
        assert!(
            v.evidence[0].contains("(after 4 s of warm-up)"),
            "{:?}",
            v.evidence
        );
    }

    /// Issue 35: starved harder (5 % of a CPU for the first 5.5 s of a 10 s watch), the cache
    /// reaches 80 % of its 64 MiB after 5.75 s of wall time, past half the watch: on the wall clock
    /// no fill is found and the fill's rise reads "a leak". It took 0.5 s of CPU to fill, of the
    /// 4.8 s it took in all: on the ticks it took, the fill is the first 9 % and is left out.
    #[test]
    fn a_fill_starved_past_half_the_watch_is_warm_up_on_the_cpu_clock() {
        let t = |i: usize| 0.25 * i as f64;
        let cpu = |i: usize| 0.05 * t(i).min(5.5) + (t(i) - 5.5).max(0.0);
        let live = |i: usize| 64.0 * (cpu(i) / 0.5).min(1.0);
        let input_of = |cpu: Vec<(f64, f64)>| VerdictInput {
            rss: (0..=40).map(|i| (t(i), (11.0 + live(i)) * M)).collect(),
            live: (0..=40).map(|i| (t(i), live(i) * M)).collect(),
            live_name: "live bytes".into(),
            cpu,
            ..Default::default()
        };
        let wall = classify(&input_of(Vec::new()));
        assert_eq!(wall.class, Class::Leak, "{:?}", wall.evidence);
        let v = classify(&input_of((0..=40).map(|i| (t(i), cpu(i))).collect()));
        assert_eq!(v.class, Class::Stable, "{:?}", v.evidence);
        assert_eq!(v.warmup_s, 5.75, "{:?}", v.evidence);
    }

    /// A true slow leak stays a leak: after the same slow fill, live bytes that go on growing at
    /// 0.8 MiB/s are a leak whether the fill is left out or not; and a leak that grows at one rate
    /// from the start (by twice the growth threshold over the watch) keeps its whole window.
    #[test]
    fn a_slow_leak_stays_a_leak_after_a_fill_or_without_one() {
        let after_fill = |i: usize, fill_top: f64, rate: f64| {
            if i < 20 {
                fill_top * i as f64 / 19.0
            } else {
                fill_top + rate * (i - 19) as f64
            }
        };
        let rss = every_fifth_second((0..50).map(|i| 13.0 + after_fill(i, 66.0, 0.16)));
        let live = every_fifth_second((0..50).map(|i| after_fill(i, 62.0, 0.16)));
        let v = classify(&input(rss, live, Vec::new()));
        assert_eq!(v.class, Class::Leak, "{:?}", v.evidence);

        // 100 -> 110 MiB in 10 s: the threshold is 5 % of ~105 MiB.
        let rss = every_fifth_second((0..50).map(|i| 100.0 + 0.2 * i as f64));
        assert_eq!(warmup_end(&rss, &[], &[]), 0.0);
        let live = every_fifth_second((0..50).map(|i| 50.0 + 0.2 * i as f64));
        let v = classify(&input(rss, live, Vec::new()));
        assert_eq!(v.class, Class::Leak, "{:?}", v.evidence);
        assert_eq!(v.warmup_s, 0.0);
    }

    #[test]
    fn steady_growth_keeps_its_whole_window() {
        // linear from 100 to 340: 80 % of the way to the second half's median is past a quarter.
        let rss = series(121, |i| 100.0 + 2.0 * i as f64);
        assert_eq!(warmup_end(&rss, &[], &[]), 0.0);
    }

    /// `watch --interval 100ms -- alloclens workload twowave --wave-mb 8 --hold-ms 200` as it was
    /// sampled: two waves allocated, the first freed, the program gone after five samples. Its live
    /// bytes' trend over four points is positive; before, that was called a leak.
    #[test]
    fn a_short_program_that_frees_half_is_not_called_a_leak() {
        let t = [0.0, 0.1, 0.2, 0.3, 0.4];
        let rss: Vec<(f64, f64)> = t
            .iter()
            .zip([1.7, 23.3, 22.9, 22.9, 22.9])
            .map(|(&t, m)| (t, m * M))
            .collect();
        let live: Vec<(f64, f64)> = t[1..]
            .iter()
            .zip([0.0, 17.8, 9.1, 9.1])
            .map(|(&t, m)| (t, m * M))
            .collect();
        let v = classify(&input(rss, live, Vec::new()));
        assert_eq!(v.class, Class::Undetermined, "{:?}", v.evidence);
        assert!(
            v.evidence[0].starts_with("5 sample(s): too few"),
            "{:?}",
            v.evidence
        );
        assert_eq!(human_duration(0.4), "0.4 s");
        assert_eq!(human_duration(6.02), "6 s");
    }

    #[test]
    fn live_bytes_that_stop_early_do_not_stand_for_the_window() {
        // the agent's snapshots stopped at minute 10 of 59 (a full disk): flat until then.
        let i = input(
            series(60, |i| 100.0 + 2.0 * i as f64),
            series(11, |_| 50.0),
            series(11, |_| 1.0),
        );
        let v = classify(&i);
        assert_eq!(v.class, Class::Undetermined, "{:?}", v.evidence);
        assert!(
            v.evidence[1].contains(
                "live bytes were measured only from 0.0 s to 600.0 s of the 59.0 min window"
            ),
            "{:?}",
            v.evidence
        );
        // ... but live bytes that grew while measured are a leak.
        let i = input(
            series(60, |i| 100.0 + 2.0 * i as f64),
            series(11, |i| 50.0 + 2.0 * i as f64),
            Vec::new(),
        );
        assert_eq!(classify(&i).class, Class::Leak);
    }

    #[test]
    fn a_reading_at_the_first_samples_time_stays_in_the_window() {
        // `--pid`: gdb's in-use bytes at 0 s and at the end; the first sample a moment after 0.
        let rss: Vec<(f64, f64)> = (0..20)
            .map(|i| (0.001 + 0.1 * i as f64, (12.0 + 5.0 * i as f64) * M))
            .collect();
        let mut i = input(rss, vec![(0.0, 12.0 * M), (1.95, 114.0 * M)], Vec::new());
        i.live_name = "in-use bytes (malloc_info)".into();
        let v = classify(&i);
        assert_eq!(v.class, Class::Leak, "{:?}", v.evidence);
    }
}
