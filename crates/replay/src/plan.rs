//! Decoding a trace into what the driver performs: per process image, the calls of each recorded
//! thread (or all of them in recorded order with `--serial`) in a shared mapping, blocks known by
//! dense ids, the points where the driver measures, and what could not be replayed.
use std::collections::BTreeMap;

use hashbrown::HashMap;
use serde::{Deserialize, Serialize};
use trace::{Event, Op, ProcessInfo, Record, TraceReader, SYNTHETIC_BIT};

use crate::calls::{Action, Call, MAX_SIZE, NO_BLOCK};
use crate::measure::{Span, START_PHASE};
use crate::shared::{Header, Image, Layout, SamplePoint, SharedMap, ThreadDesc, MAGIC};
use crate::{ReplayError, ReplayOptions};

/// The alignment given to posix_memalign, aligned_alloc and memalign (and C++'s aligned new, which
/// the trace records as aligned_alloc): the trace does not record the alignment asked for. 64 is a
/// cache line, the usual reason to ask; valloc and pvalloc are page-aligned by definition.
pub const DEFAULT_ALIGN_LOG2: u8 = 6;

/// Calls of the trace that the replay leaves out, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// Frees (and reallocs) of a block the trace never allocated: tracing started late, or damage.
    pub unknown_frees: u64,
    /// Frees of a block already freed.
    pub double_frees: u64,
    /// Calls that failed in the traced program (returned NULL): nothing to replay.
    pub failed_in_trace: u64,
    /// Reallocs of an unknown block, replayed as a malloc of the new size (they are performed).
    pub unknown_reallocs_as_malloc: u64,
}

impl Skipped {
    /// Calls of the trace not performed.
    pub fn total(&self) -> u64 {
        self.unknown_frees + self.double_frees + self.failed_in_trace
    }
}

/// A named point of the trace: calls with seq >= `seq` come after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarkerAt {
    pub label: String,
    pub seq: u64,
    /// When the original reached it (seconds since the image started).
    #[serde(default)]
    pub t_s: f64,
}

/// The most `--touch` writes of one block: the first this many bytes. A block far larger was often
/// reserved, not filled (a program touches what it uses), and touching all of it could take the
/// machine's memory; the replay warns about such blocks (docs/replay.md, "Memory touched").
pub const TOUCH_BLOCK_LIMIT: u64 = 64 << 20;

/// Blocks above [`TOUCH_BLOCK_LIMIT`]: how many, and the largest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LargeBlocks {
    pub count: u64,
    pub largest: u64,
}

/// One process image, decoded and laid out for the driver.
pub struct ImagePlan {
    pub info: ProcessInfo,
    pub map: SharedMap,
    pub threads: usize,
    /// Calls the driver performs.
    pub calls: u64,
    /// Calls performed per entry point as `analyze` names them ("malloc", "free", ...).
    pub calls_by_op: BTreeMap<String, u64>,
    pub skipped: Skipped,
    /// Frees and reallocs of a block allocated by another thread.
    pub cross_thread: u64,
    /// Blocks still live after the last call (the trace has no free for them).
    pub never_freed: u64,
    pub never_freed_bytes: u64,
    /// Peak of the live requested bytes in recorded order, and the position where it was reached.
    pub ideal_peak: u64,
    #[allow(dead_code)]
    pub ideal_peak_seq: u64,
    pub live_end: u64,
    /// Recorded position after the last call (the x of the final sample).
    pub end_seq: u64,
    /// First recorded position.
    pub start_seq: u64,
    pub markers: Vec<MarkerAt>,
    /// With `--phase`: the recorded range measured.
    pub window: Option<Span>,
    /// The original's clock at the sample points: (seq, ns since the image started when the state
    /// measured there began, i.e. the time of the call before seq), sorted by seq.
    pub clock: Vec<(u64, u64)>,
    /// When the image ended on the original's clock, as far as the trace knows: its last call,
    /// marker or memory reading (ns since the image started).
    pub end_t_ns: u64,
    pub large_blocks: LargeBlocks,
    /// The traced program's own memory readings on the same call axis (MEMORY chunks), if recorded.
    pub original: Vec<trace::MemorySample>,
}

struct Live {
    id: u32,
    size: u64,
    thread: u32,
}

struct Decoder {
    serial: bool,
    every: u64,
    threads: Vec<Vec<Call>>,
    points: Vec<Vec<SampleAt>>,
    tids: HashMap<u32, u32>,
    live_blocks: HashMap<u64, Live>,
    /// Real addresses freed and not handed out again: a second free is a double free.
    freed_real: hashbrown::HashSet<u64>,
    /// Seqs that were allocations (synthetic addresses name them): a free of one no longer live
    /// is a double free.
    alloc_seqs: Vec<u64>,
    blocks: u32,
    live: u64,
    peak: u64,
    peak_seq: u64,
    performed: u64,
    calls_by_op: BTreeMap<String, u64>,
    skipped: Skipped,
    cross_thread: u64,
    last: Option<(u32, u64)>,
    last_seq: Option<u64>,
    /// The time of the last call decoded, and the latest time seen (calls and markers).
    last_t_ns: u64,
    max_t_ns: u64,
    large_blocks: LargeBlocks,
}

#[derive(Clone, Copy)]
struct SampleAt {
    local: u64,
    seq: u64,
    live: u64,
    /// When the state measured there began in the original (the time of the call before it).
    t_ns: u64,
}

impl Decoder {
    fn thread_of(&mut self, tid: u32) -> u32 {
        if self.serial {
            return 0;
        }
        let n = self.tids.len() as u32;
        let t = *self.tids.entry(tid).or_insert(n);
        if t as usize == self.threads.len() {
            self.threads.push(Vec::new());
            self.points.push(Vec::new());
        }
        t
    }

    fn mark_alloc_seq(&mut self, seq: u64) {
        let (w, b) = ((seq / 64) as usize, seq % 64);
        if w >= self.alloc_seqs.len() {
            self.alloc_seqs.resize(w + 1, 0);
        }
        self.alloc_seqs[w] |= 1 << b;
    }

    fn was_alloc_seq(&self, seq: u64) -> bool {
        self.alloc_seqs
            .get((seq / 64) as usize)
            .is_some_and(|w| w & (1 << (seq % 64)) != 0)
    }

    fn new_block(&mut self, addr: u64, seq: u64, size: u64, thread: u32) -> Option<u32> {
        if self.blocks == NO_BLOCK {
            return None;
        }
        let id = self.blocks;
        self.blocks += 1;
        if addr & SYNTHETIC_BIT != 0 {
            self.mark_alloc_seq(seq);
        } else {
            self.freed_real.remove(&addr);
        }
        if size > TOUCH_BLOCK_LIMIT {
            self.large_blocks.count += 1;
            self.large_blocks.largest = self.large_blocks.largest.max(size);
        }
        self.live_blocks.insert(addr, Live { id, size, thread });
        self.live += size;
        if self.live > self.peak {
            self.peak = self.live;
            self.peak_seq = seq + 1;
        }
        Some(id)
    }

    /// The live block at `addr`, removed; or why there is none (counted).
    fn take_block(&mut self, addr: u64) -> Option<Live> {
        if let Some(b) = self.live_blocks.remove(&addr) {
            self.live -= b.size;
            if addr & SYNTHETIC_BIT == 0 {
                self.freed_real.insert(addr);
            }
            return Some(b);
        }
        let double = if addr & SYNTHETIC_BIT != 0 {
            self.was_alloc_seq(addr & !SYNTHETIC_BIT)
        } else {
            self.freed_real.contains(&addr)
        };
        if double {
            self.skipped.double_frees += 1;
        } else {
            self.skipped.unknown_frees += 1;
        }
        None
    }

    fn push(&mut self, thread: u32, e: &Event, call: Call) {
        let t = thread as usize;
        self.threads[t].push(call);
        self.performed += 1;
        *self.calls_by_op.entry(e.op.name().to_string()).or_default() += 1;
        let local = self.threads[t].len() as u64 - 1;
        self.last = Some((thread, local));
        self.last_seq = Some(e.seq);
        self.last_t_ns = e.t_ns;
        if self.performed.is_multiple_of(self.every) {
            self.points[t].push(SampleAt {
                local,
                seq: e.seq + 1,
                live: self.live,
                t_ns: e.t_ns,
            });
        }
    }

    /// A sample just before a marker at `seq` (after the last call before it).
    fn point_before(&mut self, seq: u64) {
        if let Some((t, local)) = self.last {
            let pts = &mut self.points[t as usize];
            match pts.last_mut() {
                Some(p) if p.local == local => p.seq = seq,
                _ => pts.push(SampleAt {
                    local,
                    seq,
                    live: self.live,
                    t_ns: self.last_t_ns,
                }),
            }
        }
    }

    fn event(&mut self, e: &Event) {
        self.max_t_ns = self.max_t_ns.max(e.t_ns);
        let thread = self.thread_of(e.tid);
        let size = e.size.min(MAX_SIZE);
        let alloc = |action: Action, align: u8, d: &mut Decoder| {
            if e.addr == 0 {
                d.skipped.failed_in_trace += 1;
                return;
            }
            match d.new_block(e.addr, e.seq, size, thread) {
                Some(id) => d.push(thread, e, Call::new(action, size, align, id, 0)),
                None => d.skipped.failed_in_trace += 1,
            }
        };
        match e.op {
            Op::Malloc => alloc(Action::Malloc, 0, self),
            Op::Calloc => alloc(Action::Calloc, 0, self),
            Op::PosixMemalign => alloc(Action::PosixMemalign, DEFAULT_ALIGN_LOG2, self),
            Op::AlignedAlloc => alloc(Action::AlignedAlloc, DEFAULT_ALIGN_LOG2, self),
            Op::Memalign => alloc(Action::Memalign, DEFAULT_ALIGN_LOG2, self),
            Op::Valloc => alloc(Action::Valloc, 0, self),
            Op::Pvalloc => alloc(Action::Pvalloc, 0, self),
            Op::Free | Op::FreeSized | Op::FreeAlignedSized => {
                if e.addr == 0 {
                    self.push(thread, e, Call::new(Action::FreeNull, 0, 0, NO_BLOCK, 0));
                } else if let Some(b) = self.take_block(e.addr) {
                    self.cross_thread += u64::from(b.thread != thread);
                    self.push(thread, e, Call::new(Action::Free, b.size, 0, b.id, 0));
                }
            }
            Op::Realloc | Op::Reallocarray => self.realloc(thread, e, size),
        }
    }

    fn realloc(&mut self, thread: u32, e: &Event, size: u64) {
        let old = if e.old_addr == 0 {
            None
        } else {
            match self.take_block(e.old_addr) {
                Some(b) => Some(b),
                None if e.addr != 0 => {
                    // Its block is unknown (counted by take_block) but it made one: keep the heap's
                    // shape with a malloc of the new size.
                    self.skipped.unknown_frees -= 1;
                    self.skipped.unknown_reallocs_as_malloc += 1;
                    if let Some(id) = self.new_block(e.addr, e.seq, size, thread) {
                        self.push(thread, e, Call::new(Action::Malloc, size, 0, id, 0));
                    }
                    return;
                }
                None => return,
            }
        };
        if let Some(b) = &old {
            self.cross_thread += u64::from(b.thread != thread);
        }
        if e.addr == 0 {
            match old {
                // realloc(p, 0) that freed p: performed as the free it was.
                Some(b) if size == 0 => {
                    self.push(thread, e, Call::new(Action::Free, b.size, 0, b.id, 0))
                }
                // Failed: the old block stays as it was.
                Some(b) => {
                    self.skipped.failed_in_trace += 1;
                    self.live += b.size;
                    self.live_blocks.insert(e.old_addr, b);
                }
                None => self.skipped.failed_in_trace += 1,
            }
            return;
        }
        let old_id = old.as_ref().map_or(NO_BLOCK, |b| b.id);
        match self.new_block(e.addr, e.seq, size, thread) {
            Some(id) => self.push(thread, e, Call::new(Action::Realloc, size, 0, id, old_id)),
            None => self.skipped.failed_in_trace += 1,
        }
    }
}

/// Decodes the process images the options select.
pub fn plan_images(
    reader: &mut TraceReader<std::io::BufReader<std::fs::File>>,
    opts: &ReplayOptions,
    warnings: &mut Vec<String>,
) -> Result<Vec<ImagePlan>, ReplayError> {
    let streams: Vec<usize> = (0..reader.streams().len())
        .filter(|&s| {
            opts.process
                .is_none_or(|p| reader.streams()[s].info.pid == p)
        })
        .filter(|&s| reader.streams()[s].records > 0)
        .collect();
    if let (Some(pid), true) = (opts.process, streams.is_empty()) {
        let mut pids: Vec<u32> = reader.streams().iter().map(|s| s.info.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        return Err(ReplayError::NoSuchProcess { pid, pids });
    }
    let mut losses = trace::Losses::of(reader);
    let mut images = Vec::new();
    for s in streams {
        let stream = reader.streams()[s].clone();
        let every = (stream.records / opts.samples.max(1) as u64).max(1);
        let mut d = Decoder {
            serial: opts.serial,
            every,
            threads: Vec::new(),
            points: Vec::new(),
            tids: HashMap::new(),
            live_blocks: HashMap::new(),
            freed_real: hashbrown::HashSet::new(),
            alloc_seqs: Vec::new(),
            blocks: 0,
            live: 0,
            peak: 0,
            peak_seq: 0,
            performed: 0,
            calls_by_op: BTreeMap::new(),
            skipped: Skipped::default(),
            cross_thread: 0,
            last: None,
            last_seq: None,
            last_t_ns: 0,
            max_t_ns: 0,
            large_blocks: LargeBlocks::default(),
        };
        if opts.serial {
            d.threads.push(Vec::new());
            d.points.push(Vec::new());
        }
        let mut markers: Vec<MarkerAt> = Vec::new();
        let mut first_seq = None;
        // `--phase start`: the calls before the first marker, as `analyze` names them.
        let mut window: Option<Span> =
            (opts.phase.as_deref() == Some(START_PHASE)).then_some(Span {
                from_seq: 0,
                to_seq: u64::MAX,
                from_s: 0.0,
                to_s: f64::INFINITY,
            });
        let mut read = 0u64;
        let mut stopped = None;
        for record in reader.records(s)? {
            let record = match record {
                Ok(r) => r,
                Err(e) => {
                    stopped = Some(e);
                    break;
                }
            };
            read += 1;
            match record {
                Record::Event(e) => {
                    first_seq.get_or_insert(e.seq);
                    d.event(&e);
                }
                Record::Marker(m) => {
                    let t_s = m.t_ns as f64 / 1e9;
                    d.max_t_ns = d.max_t_ns.max(m.t_ns);
                    if let Some(w) = &mut window {
                        // The end of the chosen phase: nothing after it is replayed.
                        w.to_seq = m.seq;
                        w.to_s = t_s;
                        break;
                    }
                    d.point_before(m.seq);
                    if opts.phase.as_deref() == Some(m.label.as_str()) {
                        window = Some(Span {
                            from_seq: m.seq,
                            to_seq: u64::MAX,
                            from_s: t_s,
                            to_s: f64::INFINITY,
                        });
                    }
                    markers.push(MarkerAt {
                        label: m.label.clone(),
                        seq: m.seq,
                        t_s,
                    });
                }
            }
        }
        if let Some(e) = stopped {
            losses.stream_stopped(&stream.info, &e, read);
        }
        let end_seq = d.last_seq.map_or(0, |s| s + 1);
        let original = reader.memory_samples(s).to_vec();
        let end_t_ns = original.iter().map(|m| m.t_ns).fold(d.max_t_ns, u64::max);
        if let Some(w) = &mut window {
            if w.to_seq == u64::MAX {
                w.to_seq = end_seq;
                w.to_s = end_t_ns as f64 / 1e9;
            }
        }
        if opts.phase.is_some() && window.is_none() {
            continue;
        }
        let mut image = lay_out(d, stream.info, markers, first_seq, end_seq, window, opts)?;
        image.original = original;
        image.end_t_ns = end_t_ns;
        images.push(image);
    }
    warnings.extend(losses.warnings("replayed"));
    if let (Some(label), true) = (&opts.phase, images.is_empty()) {
        return Err(ReplayError::NoSuchPhase {
            label: label.clone(),
        });
    }
    Ok(images)
}

fn lay_out(
    d: Decoder,
    info: ProcessInfo,
    markers: Vec<MarkerAt>,
    first_seq: Option<u64>,
    end_seq: u64,
    window: Option<Span>,
    opts: &ReplayOptions,
) -> Result<ImagePlan, ReplayError> {
    let threads = d.threads.len();
    let calls: usize = d.threads.iter().map(Vec::len).sum();
    let samples: usize = d.points.iter().map(Vec::len).sum();
    let layout = Layout::new(threads, calls, samples);
    let map =
        SharedMap::create("alloclens-replay-calls", layout.len).map_err(ReplayError::Memory)?;
    let image = Image::init(
        &map,
        Header {
            magic: MAGIC,
            threads: threads as u64,
            calls: calls as u64,
            blocks: u64::from(d.blocks),
            samples: samples as u64,
            touch: opts.touch.code(),
            touch_limit: TOUCH_BLOCK_LIMIT,
            start_ns: 0,
            end_ns: 0,
            rss_start: 0,
            rss_end: 0,
            finished: 0,
            _reserved: [0; 4],
        },
    );
    let (mut c, mut p) = (0usize, 0usize);
    let descs = image.threads();
    let all_calls = image.calls();
    let all_points = image.samples();
    for (t, (tc, tp)) in d.threads.iter().zip(&d.points).enumerate() {
        all_calls[c..c + tc.len()].copy_from_slice(tc);
        for (i, s) in tp.iter().enumerate() {
            all_points[p + i] = SamplePoint {
                local: s.local,
                seq: s.seq,
                live: s.live,
                ..SamplePoint::default()
            };
        }
        descs[t] = ThreadDesc {
            calls_off: c as u64,
            calls_len: tc.len() as u64,
            samples_off: p as u64,
            samples_len: tp.len() as u64,
            done: 0.into(),
            failed: 0,
            waits: 0,
            _reserved: 0,
        };
        c += tc.len();
        p += tp.len();
    }
    let never_freed_bytes = d.live_blocks.values().map(|b| b.size).sum();
    let mut clock: Vec<(u64, u64)> = d.points.iter().flatten().map(|p| (p.seq, p.t_ns)).collect();
    // After the last call: the state it left began with it.
    clock.push((end_seq, d.last_t_ns));
    clock.sort_unstable();
    Ok(ImagePlan {
        info,
        map,
        threads,
        calls: calls as u64,
        calls_by_op: d.calls_by_op,
        skipped: d.skipped,
        cross_thread: d.cross_thread,
        never_freed: d.live_blocks.len() as u64,
        never_freed_bytes,
        ideal_peak: d.peak,
        ideal_peak_seq: d.peak_seq,
        live_end: d.live,
        end_seq,
        start_seq: first_seq.unwrap_or(0),
        markers,
        window,
        clock,
        end_t_ns: d.max_t_ns,
        large_blocks: d.large_blocks,
        original: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::{event as ev, process_info, TraceFile};
    use trace::synthetic_address;

    fn plan(records: &[Record], opts: &ReplayOptions) -> ImagePlan {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.alt");
        let mut info = process_info(1, "t");
        info.ppid = 0;
        TraceFile::new().process(info, records).write(&path);
        let mut reader = TraceReader::open(&path).unwrap();
        let mut warnings = Vec::new();
        plan_images(&mut reader, opts, &mut warnings)
            .unwrap()
            .pop()
            .unwrap()
    }

    /// Blocks named by the seq of their allocation (a trace without addresses): a second free of
    /// one is a double free, a free of a seq that allocated nothing is unknown; a free on another
    /// thread is cross-thread and lands in that thread's list.
    #[test]
    fn blocks_known_by_seq_are_decoded_per_thread() {
        let a = synthetic_address(0);
        let b = synthetic_address(1);
        let records = [
            ev(0, 10, Op::Malloc, a, 100, 0),
            ev(1, 10, Op::Malloc, b, 50, 0),
            ev(2, 20, Op::Free, a, 0, 0),
            ev(3, 20, Op::Free, a, 0, 0),
            ev(4, 20, Op::Free, synthetic_address(2), 0, 0),
            ev(5, 10, Op::Realloc, synthetic_address(5), 80, b),
        ];
        let p = plan(&records, &ReplayOptions::default());
        assert_eq!(p.threads, 2);
        assert_eq!(p.calls, 4);
        assert_eq!(p.skipped.double_frees, 1);
        assert_eq!(p.skipped.unknown_frees, 1);
        assert_eq!(p.cross_thread, 1);
        assert_eq!((p.ideal_peak, p.live_end, p.never_freed), (150, 80, 1));
        let image = Image::of(&p.map).unwrap();
        let t = image.threads();
        assert_eq!((t[0].calls_len, t[1].calls_len), (3, 1));
        let calls = image.calls();
        // Thread 20's free names block 0, made by thread 10; the realloc moves block 1 to block 2.
        assert_eq!((calls[3].action(), calls[3].block), (Action::Free as u8, 0));
        assert_eq!((calls[2].block, calls[2].old), (2, 1));

        let serial = plan(
            &records,
            &ReplayOptions {
                serial: true,
                ..ReplayOptions::default()
            },
        );
        assert_eq!(
            (serial.threads, serial.calls, serial.cross_thread),
            (1, 4, 0)
        );
    }
}
