//! The single streaming pass over one process image's records.
//!
//! State is the live set (a hash map from address to the allocation living there) plus fixed-size
//! running totals per scope; nothing grows with the number of events. Definitions: docs/metrics.md.

use trace::{Event, Marker, Op, ProcessInfo, Record};

use crate::analysis::{PhaseReport, ProcessReport, ThreadReport};
use crate::block_observer::{BlockObserver, NoObserver};
use crate::hash::FastMap;
use crate::histogram::SizeCounts;
use crate::live_blocks::{Live, LiveBlocks};
use crate::scope::{Peaks, ReportSettings, ScopeStats};
use crate::timeline::{Sample, Timelines};

/// What the pass is asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Restrict the process and thread figures to phases with this name (all phases are still listed).
    pub phase: Option<String>,
    /// Upper bound on the points of each timeline.
    pub timeline_points: usize,
    pub report: ReportSettings,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            phase: None,
            timeline_points: 2000,
            report: ReportSettings::default(),
        }
    }
}

const CELL_CACHE: usize = 64;

/// The empty cell cache: slot `i` holds tid `i ^ 1`, which maps to slot `i ^ 1`, never to `i`.
const EMPTY_CELL_CACHE: [(u32, u32); CELL_CACHE] = {
    let mut cache = [(0, 0); CELL_CACHE];
    let mut i = 0;
    while i < CELL_CACHE {
        cache[i] = ((i ^ 1) as u32, 0);
        i += 1;
    }
    cache
};

/// How an event moved the process-wide live figures (bytes, allocations) from the previous
/// event's. Running maxima and minima that already saw the previous figures need only the side
/// that can change: a free skips the peak checks, an allocation the minima.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moved {
    /// Both unchanged (free(NULL), unmatched free, failed allocation).
    Not,
    /// Neither went down.
    Up,
    /// Neither went up.
    Down,
    /// Either way (realloc, replaced entries, wrapped sums): observe both sides.
    Any,
}

struct Phase {
    name: String,
    start_call: u64,
    start_ns: u64,
    selected: bool,
    /// Process-wide maxima while this phase was current (kept in `ProcessAnalyzer::phase_peaks`
    /// while it is).
    peaks: Peaks,
}

/// Live figures of the allocations a thread started (whoever frees them).
#[derive(Default)]
struct ThreadLive {
    tid: u32,
    bytes: u64,
    allocations: u64,
    peaks: Peaks,
}

struct Cell {
    thread: u32,
    phase: u32,
    stats: ScopeStats,
}

/// What every event reads and updates besides its cell: the live set and the live figures of the
/// process and of each thread. Kept apart from the cells so that an event borrows its cell once
/// (one bounds check) while these are updated.
struct LiveState<O: BlockObserver> {
    live: LiveBlocks<O::Tag>,
    /// Told which block each event begins and ends (the call sites' pass, or nothing).
    observer: O,
    /// The thread of each cell (`Cell::thread`), apart from the cells' figures: read on every
    /// end and realloc.
    cell_threads: Vec<u32>,
    /// Process-wide figures, independent of the phase filter.
    live_bytes: u64,
    live_allocations: u64,
    cumulated_upper: u64,
    cumulated_lower: u64,
    threads: Vec<ThreadLive>,
    /// Whether the current phase passes the filter (thread peaks are observed only then).
    selected: bool,
}

/// Feed it a process's records in `seq` order, then call `finish`.
///
/// Each event updates exactly one (thread, phase) cell; process, thread and phase figures are merged
/// from the cells at the end, and with a phase filter only the cells of selected phases are merged.
/// `O` follows the blocks the pass matches (`with_observer`).
pub struct ProcessAnalyzer<O: BlockObserver = NoObserver> {
    info: ProcessInfo,
    config: Config,
    state: LiveState<O>,
    /// Peaks of the current phase; the process peaks are merged from the selected phases' peaks.
    phase_peaks: Peaks,
    thread_index: FastMap<u32, u32>,
    phases: Vec<Phase>,
    cell_index: FastMap<(u32, u32), u32>,
    cells: Vec<Cell>,
    /// Direct-mapped cache tid -> cell in the current phase (threads interleave call by call),
    /// emptied by markers. Entries are (tid, cell); an empty entry holds a tid that does not map
    /// to its slot (`EMPTY_CELL_CACHE`), so a hit is one compare.
    cell_cache: [(u32, u32); CELL_CACHE],
    /// Where the current timeline steps end, (calls, ns): an event at or past either starts a
    /// step. (u64::MAX, u64::MAX) while the current phase is not selected (no timeline then), so
    /// the per-event test is two compares.
    step_end: (u64, u64),
    /// The phase peaks or the timeline extremes were just reset (marker, timeline step): the next
    /// event observes both sides whatever it moved (`Moved` relies on the previous figures
    /// having been observed).
    fresh: bool,
    calls: u64,
    last_seq: u64,
    last_ns: u64,
    timelines: Timelines,
}

/// How many events ahead `feed_chunk` prefetches (about the events that fit in a memory latency).
const PREFETCH_AHEAD: usize = 8;

/// A timeline has at most one point per `CALLS_PER_POINT` calls of its image, or
/// `MIN_TIMELINE_POINTS` (and `Config::timeline_points`): a short image's timelines (ten points
/// per call in all before, 500 bytes of JSON per call) stay proportionate to its calls.
const CALLS_PER_POINT: u64 = 16;
const MIN_TIMELINE_POINTS: u64 = 16;

/// The most points a timeline of an image of `calls` calls has (see `CALLS_PER_POINT`).
pub fn timeline_points_for(calls: u64, limit: usize) -> usize {
    let points = calls.div_ceil(CALLS_PER_POINT).max(MIN_TIMELINE_POINTS);
    usize::try_from(points).unwrap_or(usize::MAX).min(limit)
}

/// Live blocks the map is sized for up front (typical live sets; it grows beyond).
const LIVE_CAPACITY: usize = 1 << 12;

impl ProcessAnalyzer {
    pub fn new(info: ProcessInfo, config: &Config) -> Self {
        Self::with_observer(info, config, NoObserver)
    }
}

impl<O: BlockObserver> ProcessAnalyzer<O> {
    /// The pass, telling `observer` which block each event begins and ends.
    pub fn with_observer(info: ProcessInfo, config: &Config, observer: O) -> Self {
        let config = config.clone();
        let selected = matches(&config.phase, "start");
        let start = Phase {
            name: "start".to_string(),
            start_call: 0,
            start_ns: 0,
            selected,
            peaks: Peaks::default(),
        };
        let timelines = Timelines::new(config.timeline_points);
        let mut a = ProcessAnalyzer {
            info,
            state: LiveState {
                live: LiveBlocks::with_capacity(LIVE_CAPACITY),
                observer,
                cell_threads: Vec::new(),
                live_bytes: 0,
                live_allocations: 0,
                cumulated_upper: 0,
                cumulated_lower: 0,
                threads: Vec::new(),
                selected,
            },
            phase_peaks: Peaks::default(),
            thread_index: FastMap::default(),
            phases: vec![start],
            cell_index: FastMap::default(),
            cells: Vec::new(),
            cell_cache: EMPTY_CELL_CACHE,
            step_end: (0, 0),
            fresh: true,
            calls: 0,
            last_seq: 0,
            last_ns: 0,
            timelines,
            config,
        };
        a.update_step_end();
        a
    }

    pub fn feed_all<I: IntoIterator<Item = Record>>(&mut self, records: I) {
        for r in records {
            self.feed(&r);
        }
    }

    /// Markers fed so far (each opens a phase).
    pub fn markers(&self) -> usize {
        self.phases.len() - 1
    }

    /// Blocks live now.
    pub fn live_blocks(&self) -> usize {
        self.state.live.len()
    }

    /// Blocks the live set refused for want of memory: not 0 means the figures are wrong from
    /// there on (see `LiveTable::lost`).
    pub fn lost_blocks(&self) -> u64 {
        self.state.live.lost()
    }

    /// Feed a decoded chunk (records in seq order). The live-set slot of each event is
    /// prefetched a few events ahead, so that its cache miss overlaps the work in between.
    pub fn feed_chunk(&mut self, records: &[Record]) {
        let split = records.len().saturating_sub(PREFETCH_AHEAD);
        let (head, tail) = records.split_at(split);
        // Pairs (record, record PREFETCH_AHEAD later): no index arithmetic, no bounds checks.
        for (r, ahead) in head
            .iter()
            .zip(&records[PREFETCH_AHEAD.min(records.len())..])
        {
            if let Record::Event(ahead) = ahead {
                self.prefetch(ahead);
            }
            self.feed(r);
        }
        for r in tail {
            self.feed(r);
        }
    }

    /// Prefetch what the event `ahead` will touch: its live-set slot, and its size counter
    /// when its cell is cached (a marker in between makes it a useless but harmless hint).
    #[inline(always)]
    fn prefetch(&self, ahead: &Event) {
        let key = if ahead.old_addr != 0 {
            ahead.old_addr
        } else {
            ahead.addr
        };
        self.state.live.prefetch(key);
        // Checked first: most sizes are small, and their counters stay in the caches.
        if SizeCounts::worth_prefetching(ahead.size) {
            let (t, c) = self.cell_cache[ahead.tid as usize % CELL_CACHE];
            if t == ahead.tid {
                if let Some(cell) = self.cells.get(c as usize) {
                    cell.stats.sizes.prefetch(ahead.size);
                }
            }
        }
    }

    #[inline]
    pub fn feed(&mut self, record: &Record) {
        match record {
            Record::Event(e) => self.event(e),
            Record::Marker(m) => self.marker(m),
        }
    }

    pub fn marker(&mut self, m: &Marker) {
        self.close_phase();
        let selected = matches(&self.config.phase, &m.label);
        self.phases.push(Phase {
            name: m.label.clone(),
            start_call: m.seq,
            start_ns: m.t_ns,
            selected,
            peaks: Peaks::default(),
        });
        self.state.selected = selected;
        self.update_step_end();
        self.cell_cache = EMPTY_CELL_CACHE;
    }

    /// Store the running figures of the current phase (before a marker, and at the end).
    fn close_phase(&mut self) {
        if self.state.selected && self.calls > 0 {
            let last = self.sample();
            self.timelines.fold(&last);
        }
        self.phases
            .last_mut()
            .expect("there is always a phase")
            .peaks = self.phase_peaks;
        self.phase_peaks = Peaks::default();
        self.fresh = true;
    }

    /// The figures after the last call.
    fn sample(&self) -> Sample {
        Sample {
            calls: self.last_seq + 1,
            t_ns: self.last_ns,
            live_bytes: self.state.live_bytes,
            live_allocations: self.state.live_allocations,
            cumulated_upper_bytes: self.state.cumulated_upper,
            cumulated_lower_bytes: self.state.cumulated_lower,
        }
    }

    /// Mirror the ends of the open timeline steps (or none while the phase is not selected).
    fn update_step_end(&mut self) {
        self.step_end = if self.state.selected {
            (
                self.timelines.by_calls.open_end(),
                self.timelines.by_time.open_end(),
            )
        } else {
            (u64::MAX, u64::MAX)
        };
    }

    /// The call at (`calls`, `t_ns`) starts a timeline step: finish the current one first.
    #[cold]
    fn timeline_step(&mut self, calls: u64, t_ns: u64) {
        if self.calls > 0 {
            let last = self.sample();
            self.timelines.fold(&last);
        }
        self.timelines.enter(calls, t_ns);
        self.update_step_end();
        self.fresh = true;
    }

    /// The cell of the calling thread in the current phase.
    #[inline]
    fn cell(&mut self, tid: u32) -> u32 {
        let (t, c) = self.cell_cache[tid as usize % CELL_CACHE];
        if t == tid {
            return c;
        }
        self.cell_slow(tid)
    }

    #[cold]
    fn cell_slow(&mut self, tid: u32) -> u32 {
        let threads = &mut self.state.threads;
        let next_thread = threads.len() as u32;
        let thread = *self.thread_index.entry(tid).or_insert(next_thread);
        if thread == next_thread {
            threads.push(ThreadLive {
                tid,
                ..Default::default()
            });
        }
        let phase = (self.phases.len() - 1) as u32;
        let next_cell = self.cells.len() as u32;
        let cell = *self.cell_index.entry((thread, phase)).or_insert(next_cell);
        if cell == next_cell {
            self.cells.push(Cell {
                thread,
                phase,
                stats: ScopeStats::default(),
            });
            self.state.cell_threads.push(thread);
        }
        self.cell_cache[tid as usize % CELL_CACHE] = (tid, cell);
        cell
    }

    #[inline(always)]
    pub fn event(&mut self, e: &Event) {
        let c = self.cell(e.tid);
        let calls = e.seq + 1;
        // `|`, not `||`: one branch (rarely taken) instead of two.
        if (calls >= self.step_end.0) | (e.t_ns >= self.step_end.1) {
            self.timeline_step(calls, e.t_ns);
        }
        self.calls += 1;
        self.last_seq = e.seq;
        self.last_ns = e.t_ns;
        let state = &mut self.state;
        if e.seq >= state.observer.live_blocks_wanted_at() {
            state.observer.live_blocks(&mut state.live.iter(), false);
        }
        state.observer.event(e);
        // The one bounds check of the event's cell: its figures are updated through `cell`.
        let cell = &mut self.cells[c as usize];
        cell.stats.calls[e.op as usize] += 1;
        let moved = match e.op {
            Op::Free | Op::FreeSized | Op::FreeAlignedSized => {
                if e.addr == 0 {
                    cell.stats.null_frees += 1;
                    Moved::Not
                } else if let Some((l, tag)) = state.live.remove(e.addr) {
                    state.observer.end(tag, &l, e);
                    state.end(&l, e, &mut self.cells)
                } else {
                    cell.stats.unmatched_frees += 1;
                    cell.stats.unmatched_freed_bytes =
                        cell.stats.unmatched_freed_bytes.wrapping_add(e.size);
                    Moved::Not
                }
            }
            Op::Realloc | Op::Reallocarray if e.old_addr != 0 => {
                state.realloc(e, c, &mut self.cells)
            }
            // Every allocating entry point, and realloc(NULL, n).
            _ if e.addr == 0 => {
                cell.stats.failed(e.size);
                Moved::Not
            }
            _ => state.start(e, c, cell),
        };
        let moved = if self.fresh {
            self.fresh = false;
            Moved::Any
        } else {
            moved
        };
        let (b, a) = (state.live_bytes, state.live_allocations);
        // Equivalent to observing both sides every time: the previous figures were observed
        // (`fresh` covers resets), so a side that did not move cannot change a running extreme.
        match moved {
            Moved::Not => {}
            Moved::Up => {
                self.phase_peaks.observe(b, a, e.seq, e.t_ns);
                if state.selected {
                    self.timelines.observe_rise(b, a);
                }
            }
            Moved::Down => {
                if state.selected {
                    self.timelines.observe_fall(b, a);
                }
            }
            Moved::Any => {
                self.phase_peaks.observe(b, a, e.seq, e.t_ns);
                if state.selected {
                    self.timelines.observe(b, a);
                }
            }
        }
    }

    /// The stream was cut short (damaged chunk): the report says truncated.
    pub fn mark_truncated(&mut self) {
        self.info.truncated = true;
        self.state.observer.mark_truncated();
    }

    /// Current process-wide live figures: (bytes, allocations).
    pub fn live(&self) -> (u64, u64) {
        (self.state.live_bytes, self.state.live_allocations)
    }

    /// Close the stream: what is still live is leaked; build the report.
    pub fn finish(self) -> ProcessReport {
        self.finish_with_observer().0
    }

    /// `finish`, and the observer, told of the blocks still live.
    pub fn finish_with_observer(mut self) -> (ProcessReport, O) {
        self.close_phase();
        self.timelines
            .shrink_to(timeline_points_for(self.calls, self.config.timeline_points));
        if self.state.observer.live_blocks_wanted_at() != u64::MAX {
            let state = &mut self.state;
            state.observer.live_blocks(&mut state.live.iter(), true);
        }
        for (l, tag) in self.state.live.values() {
            self.cells[l.cell as usize].stats.leak(l.size);
            self.state.observer.live_at_end(tag, &l);
        }
        self.state.live = LiveBlocks::with_capacity(0);
        let life = self.calls;
        let settings = &self.config.report;

        let mut process = ScopeStats::default();
        let mut threads: Vec<ScopeStats> = vec![ScopeStats::default(); self.state.threads.len()];
        let mut phases: Vec<ScopeStats> = vec![ScopeStats::default(); self.phases.len()];
        for cell in &self.cells {
            phases[cell.phase as usize].merge(&cell.stats);
            if self.phases[cell.phase as usize].selected {
                process.merge(&cell.stats);
                threads[cell.thread as usize].merge(&cell.stats);
            }
        }
        // Merged in phase order, ties keep the earlier: the first time the maximum was reached.
        for ph in self.phases.iter().filter(|ph| ph.selected) {
            process.peaks.merge(&ph.peaks);
        }

        let end_call = if self.calls == 0 {
            0
        } else {
            self.last_seq + 1
        };
        let mut phase_reports = Vec::with_capacity(self.phases.len());
        for (i, (ph, mut stats)) in self.phases.iter().zip(phases).enumerate() {
            let (next_call, next_ns) = self
                .phases
                .get(i + 1)
                .map_or((end_call, self.last_ns), |n| (n.start_call, n.start_ns));
            if i == 0 && self.phases.len() > 1 && stats.calls.iter().all(|c| *c == 0) {
                continue; // the first marker came before any call
            }
            stats.peaks = ph.peaks;
            phase_reports.push(PhaseReport {
                index: i as u32,
                name: ph.name.clone(),
                start_call: ph.start_call,
                end_call: next_call.max(ph.start_call),
                start_ns: ph.start_ns,
                end_ns: next_ns.max(ph.start_ns),
                stats: stats.report(life, settings),
            });
        }
        let mut thread_reports: Vec<ThreadReport> = self
            .state
            .threads
            .iter()
            .zip(threads)
            .filter(|(_, s)| {
                s.calls.iter().any(|c| *c > 0) || s.lifetime_calls.total() > 0 || s.leak_count > 0
            })
            .map(|(th, mut s)| {
                s.peaks = th.peaks;
                ThreadReport {
                    tid: th.tid,
                    stats: s.report(life, settings),
                }
            })
            .collect();
        thread_reports.sort_by_key(|t| t.tid);
        let report = ProcessReport {
            pid: self.info.pid,
            ppid: self.info.ppid,
            exec_index: self.info.exec_index,
            cmdline: self.info.cmdline.clone(),
            start_unix_ns: self.info.start_unix_ns,
            truncated: self.info.truncated,
            life_calls: life,
            duration_ns: self.last_ns,
            stats: process.report(life, settings),
            timeline_calls_step: self.timelines.by_calls.step(),
            timeline_by_calls: self.timelines.by_calls.points(),
            timeline_time_step_ns: self.timelines.by_time.step(),
            timeline_by_time: self.timelines.by_time.points(),
            threads: thread_reports,
            phases: phase_reports,
            memory: None,
        };
        (report, self.state.observer)
    }
}

impl<O: BlockObserver> LiveState<O> {
    /// A new allocation (or a realloc of an unknown pointer, which starts a chain we can follow)
    /// in cell `c`, which is `cell`.
    #[inline(always)]
    fn start(&mut self, e: &Event, c: u32, cell: &mut Cell) -> Moved {
        let size = e.size;
        let thread = cell.thread;
        let mut moved = Moved::Up;
        let l = Live {
            start_seq: e.seq,
            start_ns: e.t_ns,
            size,
            cell: c,
        };
        let tag = self.observer.tag(e, false);
        if let Some((old, old_tag)) = self.live.insert(e.addr, l, tag) {
            // The allocator handed out an address we think is live: its free was not traced
            // (e.g. made through an entry point we do not see). Count it as unmatched and drop it.
            self.observer.replaced(old_tag, &old);
            self.drop_live(&old);
            cell.stats.unmatched_frees += 1;
            moved = Moved::Any;
        }
        self.observer.begin(e);
        let (bytes, wrapped) = self.live_bytes.overflowing_add(size);
        if wrapped {
            moved = Moved::Any;
        }
        self.live_bytes = bytes;
        self.live_allocations += 1;
        self.cumulated_upper = self.cumulated_upper.wrapping_add(size);
        self.cumulated_lower = self.cumulated_lower.wrapping_add(size);
        let s = &mut cell.stats;
        s.allocations += 1;
        s.request(size);
        s.cumulated_lower_bytes = s.cumulated_lower_bytes.wrapping_add(size);
        let th = &mut self.threads[thread as usize];
        th.bytes = th.bytes.wrapping_add(size);
        th.allocations += 1;
        if self.selected {
            th.peaks.observe(th.bytes, th.allocations, e.seq, e.t_ns);
        }
        moved
    }

    /// Remove a live allocation from the live figures without a lifetime; returns its thread.
    #[inline(always)]
    fn drop_live(&mut self, l: &Live) -> &mut ThreadLive {
        self.live_bytes = self.live_bytes.wrapping_sub(l.size);
        self.live_allocations -= 1;
        let th = &mut self.threads[self.cell_threads[l.cell as usize] as usize];
        th.bytes = th.bytes.wrapping_sub(l.size);
        th.allocations -= 1;
        th
    }

    /// The end of an allocation: free, or realloc to size 0 that returned NULL.
    #[inline(always)]
    fn end(&mut self, l: &Live, e: &Event, cells: &mut [Cell]) -> Moved {
        // The live bytes wrap only if their sum did (sizes near 2^64 in a damaged trace).
        let moved = if l.size <= self.live_bytes {
            Moved::Down
        } else {
            Moved::Any
        };
        let selected = self.selected;
        let th = self.drop_live(l);
        if selected {
            th.peaks.observe(th.bytes, th.allocations, e.seq, e.t_ns);
        }
        let calls = e.seq.saturating_sub(l.start_seq).saturating_sub(1);
        let ns = e.t_ns.saturating_sub(l.start_ns);
        cells[l.cell as usize].stats.lifetime(calls, ns);
        moved
    }

    /// A realloc of a non-NULL pointer by a thread whose cell is `c`.
    fn realloc(&mut self, e: &Event, c: u32, cells: &mut [Cell]) -> Moved {
        if e.addr == 0 {
            if e.size == 0 {
                // realloc(p, 0) returning NULL freed p.
                if let Some((l, tag)) = self.live.remove(e.old_addr) {
                    self.observer.end(tag, &l, e);
                    return self.end(&l, e, cells);
                }
                cells[c as usize].stats.unmatched_frees += 1;
            } else {
                // Failed: the old block stays live and unchanged.
                cells[c as usize].stats.failed(e.size);
            }
            return Moved::Not;
        }
        let Some((mut l, tag)) = self.live.remove(e.old_addr) else {
            // Resizing a block allocated before tracing began: follow it from here.
            let cell = &mut cells[c as usize];
            cell.stats.unmatched_reallocs += 1;
            return self.start(e, c, cell);
        };
        // For the observer, the old block ends and a new one begins; the chain goes on here.
        self.observer.end(tag, &l, e);
        let tag = self.observer.tag(e, true);
        let (old, new) = (l.size, e.size);
        l.size = new;
        if let Some((other, other_tag)) = self.live.insert(e.addr, l, tag) {
            self.observer.replaced(other_tag, &other);
            self.drop_live(&other);
            cells[c as usize].stats.unmatched_frees += 1;
        }
        self.observer.begin(e);
        self.live_bytes = self.live_bytes.wrapping_sub(old).wrapping_add(new);
        self.cumulated_upper = self.cumulated_upper.wrapping_add(new);
        self.cumulated_lower = self.cumulated_lower.wrapping_sub(old).wrapping_add(new);
        // The upper bound counts the request where it is made; the lower bound belongs to the chain.
        cells[c as usize].stats.request(new);
        let origin = &mut cells[l.cell as usize].stats;
        origin.cumulated_lower_bytes = origin
            .cumulated_lower_bytes
            .wrapping_sub(old)
            .wrapping_add(new);
        let th = &mut self.threads[self.cell_threads[l.cell as usize] as usize];
        th.bytes = th.bytes.wrapping_sub(old).wrapping_add(new);
        if self.selected {
            th.peaks.observe(th.bytes, th.allocations, e.seq, e.t_ns);
        }
        Moved::Any
    }
}

fn matches(filter: &Option<String>, name: &str) -> bool {
    filter.as_deref().is_none_or(|f| f == name)
}

/// Analyse one process's records in one pass.
pub fn analyze_process<I: IntoIterator<Item = Record>>(
    info: ProcessInfo,
    records: I,
    config: &Config,
) -> ProcessReport {
    let mut a = ProcessAnalyzer::new(info, config);
    a.feed_all(records);
    a.finish()
}
