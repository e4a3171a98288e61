//! Writer -> reader round trips, and what the reader says about damaged and foreign files.
use std::io::Cursor;

use trace::{
    ChunkEncoder, DamageKind, EndReason, Event, Marker, MemorySample, Op, ProcessInfo, Record,
    TraceError, TraceHeader, TraceReader, TraceWriter, Trailer, FORMAT_VERSION,
    VERSION_WITHOUT_SAMPLED_STACKS,
};

/// Deterministic pseudo-random numbers (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn info(pid: u32) -> ProcessInfo {
    ProcessInfo {
        pid,
        ppid: 1,
        exec_index: 0,
        cmdline: vec!["prog".into(), format!("arg {pid}")],
        start_unix_ns: 1_700_000_000_000_000_000,
        truncated: false,
    }
}

/// A plausible random stream: several threads, every op kind, reallocs, frees of live blocks,
/// frees of unknown pointers, failed allocations, markers, gaps in seq, uneven times.
fn random_records(seed: u64, n: usize) -> Vec<Record> {
    let mut rng = Rng(seed);
    let mut live: Vec<(u64, u64)> = Vec::new();
    let mut out = Vec::new();
    let mut seq = 0u64;
    let mut t = 1000u64;
    let mut next_addr = 0x5555_0000_0000u64;
    for i in 0..n {
        let tid = 100 + rng.below(3) as u32;
        t += rng.below(500);
        if rng.below(50) == 0 {
            out.push(Record::Marker(Box::new(Marker {
                seq,
                t_ns: t,
                tid,
                label: format!("phase {i}"),
            })));
            continue;
        }
        if rng.below(40) == 0 {
            seq += 1 + rng.below(3); // a hole (lost record)
        }
        let roll = rng.below(100);
        let e = if roll < 45 || live.is_empty() {
            let op = [
                Op::Malloc,
                Op::Calloc,
                Op::PosixMemalign,
                Op::AlignedAlloc,
                Op::Memalign,
                Op::Valloc,
                Op::Pvalloc,
            ][rng.below(7) as usize];
            let size = rng.below(2000);
            let addr = if rng.below(100) == 0 {
                0
            } else if rng.below(3) == 0 {
                next_addr += 16 * (1 + rng.below(64));
                next_addr
            } else {
                0x5555_0000_0000 + 16 * rng.below(4096)
            };
            if addr != 0 {
                live.push((addr, size));
            }
            Event {
                seq,
                t_ns: t,
                tid,
                stack: 0,
                op,
                addr,
                size,
                old_addr: 0,
            }
        } else if roll < 85 {
            let (addr, size) = if rng.below(20) == 0 {
                (0x7777_0000 + rng.below(1000), 0)
            } else {
                live.swap_remove(rng.below(live.len() as u64) as usize)
            };
            let op = [Op::Free, Op::FreeSized, Op::FreeAlignedSized][rng.below(3) as usize];
            let size = if op == Op::Free { 0 } else { size };
            Event {
                seq,
                t_ns: t,
                tid,
                stack: 0,
                op,
                addr: if rng.below(30) == 0 { 0 } else { addr },
                size,
                old_addr: 0,
            }
        } else {
            let i = rng.below(live.len() as u64) as usize;
            let (old, _) = live[i];
            let size = rng.below(5000);
            let addr = if rng.below(2) == 0 {
                old
            } else {
                0x5555_0000_0000 + 16 * rng.below(4096)
            };
            live[i] = (addr, size);
            let op = if rng.below(2) == 0 {
                Op::Realloc
            } else {
                Op::Reallocarray
            };
            Event {
                seq,
                t_ns: t,
                tid,
                stack: 0,
                op,
                addr,
                size,
                old_addr: if rng.below(20) == 0 { 0 } else { old },
            }
        };
        out.push(Record::Event(e));
        seq += 1;
    }
    out
}

fn header() -> TraceHeader {
    TraceHeader {
        command: vec!["prog".into()],
        host: "test".into(),
        allocator: "glibc".into(),
        start_unix_ns: 1,
        writer: "test".into(),
        ..Default::default()
    }
}

fn write_trace(streams: &[(ProcessInfo, Vec<Record>, Option<EndReason>)], chunk: usize) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), &header()).unwrap();
    for (info, records, end) in streams {
        let id = w.begin_process(info).unwrap();
        w.write_records(id, records, chunk).unwrap();
        if let Some(end) = end {
            w.end_process(id, *end, records.len() as u64).unwrap();
        }
    }
    w.finish(&Trailer {
        exit: "exit 0".into(),
        events: 0,
        end_unix_ns: 2,
        attach: None,
    })
    .unwrap()
}

fn read_all(bytes: &[u8]) -> (TraceReader<Cursor<&[u8]>>, Vec<Vec<Record>>) {
    let mut r = TraceReader::from_reader(Cursor::new(bytes), "mem.alt").unwrap();
    let mut all = Vec::new();
    for s in 0..r.streams().len() {
        all.push(
            r.records(s)
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap(),
        );
    }
    (r, all)
}

#[test]
fn random_streams_round_trip_exactly() {
    for (seed, chunk) in [(1u64, 1000usize), (2, 7), (3, 1 << 18), (4, 1)] {
        let a = random_records(seed, 20_000);
        let b = random_records(seed + 100, 3_000);
        let bytes = write_trace(
            &[
                (info(10), a.clone(), Some(EndReason::Exit)),
                (info(11), b.clone(), None),
            ],
            chunk,
        );
        let (r, got) = read_all(&bytes);
        assert_eq!(got[0], a, "seed {seed} chunk {chunk}");
        assert_eq!(got[1], b, "seed {seed} chunk {chunk}");
        assert_eq!(r.streams()[0].info.cmdline, info(10).cmdline);
        assert!(!r.streams()[0].info.truncated);
        assert!(
            r.streams()[1].info.truncated,
            "no end chunk means truncated"
        );
        assert_eq!(r.streams()[0].records, a.len() as u64);
        assert!(r.damage().is_none());
        assert!(r.trailer().is_some());
    }
}

#[test]
fn chunks_decode_independently_in_any_order() {
    let a = random_records(9, 10_000);
    let bytes = write_trace(&[(info(1), a.clone(), Some(EndReason::Exit))], 999);
    let mut r = TraceReader::from_reader(Cursor::new(&bytes[..]), "mem").unwrap();
    let raw: Vec<_> = r.chunks(0).unwrap().collect::<Result<_, _>>().unwrap();
    assert!(raw.len() > 5);
    let mut decoded: Vec<Vec<Record>> = raw.iter().rev().map(|c| c.decode().unwrap()).collect();
    decoded.reverse();
    assert_eq!(decoded.concat(), a);
}

#[test]
fn interpolates_times_between_anchors() {
    let mut enc = ChunkEncoder::new(1);
    enc.push_anchor(0, 1_000);
    for seq in 0..10 {
        let e = Event {
            seq,
            t_ns: 0,
            tid: 7,
            stack: 0,
            op: Op::Malloc,
            addr: 0x1000 + seq * 16,
            size: 8,
            old_addr: 0,
        };
        enc.push_event(&e).unwrap();
    }
    enc.push_anchor(10, 2_000);
    let chunk = enc.finish().unwrap().unwrap();
    let mut w = TraceWriter::new(Vec::new(), &header()).unwrap();
    let id = w.begin_process(&info(1)).unwrap();
    w.write_events(id, &chunk).unwrap();
    let bytes = w.finish(&Trailer::default()).unwrap();
    let (_, got) = read_all(&bytes);
    let times: Vec<u64> = got[0]
        .iter()
        .map(|r| match r {
            Record::Event(e) => e.t_ns,
            _ => 0,
        })
        .collect();
    assert_eq!(times, (0..10).map(|i| 1_000 + i * 100).collect::<Vec<_>>());
}

#[test]
fn out_of_order_events_are_refused() {
    let mut enc = ChunkEncoder::new(1);
    let e = |seq| Event {
        seq,
        t_ns: 0,
        tid: 1,
        stack: 0,
        op: Op::Malloc,
        addr: 16,
        size: 1,
        old_addr: 0,
    };
    enc.push_event(&e(5)).unwrap();
    assert!(enc.push_event(&e(5)).is_err());
    assert!(enc.push_event(&e(3)).is_err());
}

/// malloc/free with glibc-like address reuse (per-class LIFO free lists): the encoding must come
/// close to the information the workload really holds (its random choices), which no encoding
/// can beat: addresses, times and seqs must cost next to nothing.
#[test]
fn allocation_loop_compresses_close_to_its_entropy() {
    let mut info_bits = 0f64;
    let mut rng = Rng(5);
    let mut records = Vec::new();
    let mut live: Vec<(u64, u64)> = Vec::new();
    let mut free_lists: std::collections::HashMap<u64, Vec<u64>> = Default::default();
    let mut top = 0x5555_0000_0000u64;
    for seq in 0..400_000u64 {
        let t_ns = seq * 30;
        let coin = live.len() >= 64 && live.len() < 1024;
        if coin {
            info_bits += 1.0;
        }
        if live.len() < 64 || (live.len() < 1024 && rng.below(2) == 0) {
            let size = 16 + rng.below(240);
            info_bits += 240f64.log2();
            let class = (size + 8).div_ceil(16);
            let addr = free_lists
                .entry(class)
                .or_default()
                .pop()
                .unwrap_or_else(|| {
                    top += class * 16;
                    top
                });
            live.push((addr, size));
            records.push(Record::Event(Event {
                seq,
                t_ns,
                tid: 1,
                stack: 0,
                op: Op::Malloc,
                addr,
                size,
                old_addr: 0,
            }));
        } else {
            info_bits += (live.len() as f64).log2();
            let (addr, size) = live.swap_remove(rng.below(live.len() as u64) as usize);
            free_lists
                .entry((size + 8).div_ceil(16))
                .or_default()
                .push(addr);
            records.push(Record::Event(Event {
                seq,
                t_ns,
                tid: 1,
                stack: 0,
                op: Op::Free,
                addr,
                size: 0,
                old_addr: 0,
            }));
        }
    }
    // As the recorder does: sparse anchors, not one per event.
    let mut enc = ChunkEncoder::new(3);
    let mut bytes = 0usize;
    for (i, r) in records.iter().enumerate() {
        if let Record::Event(e) = r {
            if i % 10_000 == 0 {
                enc.push_anchor(e.seq, e.t_ns);
            }
            enc.push_event(e).unwrap();
        }
        if enc.len() == 1 << 18 {
            enc.push_anchor(i as u64 + 1, 0);
            bytes += enc.finish().unwrap().unwrap().payload.len();
        }
    }
    bytes += enc.finish().unwrap().unwrap().payload.len();
    let per_event = bytes as f64 / records.len() as f64;
    let floor = info_bits / 8.0 / records.len() as f64;
    eprintln!("{per_event:.3} bytes/event, information content {floor:.3} bytes/event");
    assert!(
        per_event <= 1.3 * floor,
        "{per_event:.3} bytes/event vs {floor:.3} of information"
    );
}

#[test]
fn truncated_file_reads_up_to_the_damage() {
    let a = random_records(11, 30_000);
    let bytes = write_trace(&[(info(1), a.clone(), Some(EndReason::Exit))], 1000);
    let full = TraceReader::from_reader(Cursor::new(&bytes[..]), "x").unwrap();
    let chunk_offsets: Vec<u64> = full.streams()[0].chunks.iter().map(|c| c.offset).collect();
    // Cut in the middle of the 13th events chunk.
    let cut = (chunk_offsets[12] + 30) as usize;
    let (r, got) = read_all(&bytes[..cut]);
    let damage = r.damage().expect("damage reported").clone();
    assert_eq!(damage.kind, DamageKind::Truncated);
    assert_eq!(damage.records_recovered, got[0].len() as u64);
    assert_eq!(got[0][..], a[..got[0].len()]);
    assert_eq!(got[0].len(), 12 * 1000);
    assert!(r.streams()[0].info.truncated);
    assert!(r.trailer().is_none());
    let msg = damage.to_string();
    assert!(msg.starts_with("truncated after chunk 13 "), "{msg}"); // process chunk + 12 events chunks
    assert!(msg.contains("12.0 k records recovered"), "{msg}");
}

#[test]
fn corrupt_payload_is_reported_with_chunk_and_offset() {
    let a = random_records(12, 5_000);
    let mut bytes = write_trace(&[(info(1), a, Some(EndReason::Exit))], 1000);
    let r = TraceReader::from_reader(Cursor::new(&bytes[..]), "x").unwrap();
    let c = r.streams()[0].chunks[2];
    bytes[c.offset as usize + 40] ^= 0x55;
    let mut r = TraceReader::from_reader(Cursor::new(&bytes[..]), "x.alt").unwrap();
    let results: Vec<_> = r.records(0).unwrap().collect();
    let ok = results.iter().take_while(|r| r.is_ok()).count();
    assert_eq!(ok, 2000);
    let err = results[ok].as_ref().unwrap_err().to_string();
    assert!(
        err.contains("chunk 3") && err.contains("checksum mismatch") && err.contains("x.alt"),
        "{err}"
    );
    assert_eq!(results.len(), ok + 1, "iteration stops at the damage");
}

#[test]
fn garbage_between_chunks_stops_the_scan() {
    let a = random_records(13, 3_000);
    let bytes = write_trace(&[(info(1), a, Some(EndReason::Exit))], 1000);
    let r = TraceReader::from_reader(Cursor::new(&bytes[..]), "x").unwrap();
    let c = r.streams()[0].chunks[1];
    let mut bad = bytes.clone();
    bad[c.offset as usize] = b'X';
    let r = TraceReader::from_reader(Cursor::new(&bad[..]), "x").unwrap();
    let d = r.damage().unwrap();
    assert!(matches!(d.kind, DamageKind::Corrupt(_)));
    assert_eq!(d.records_recovered, 1000);
    assert_eq!(r.streams()[0].chunks.len(), 1);
}

#[test]
fn foreign_and_newer_files_are_refused_with_a_clear_message() {
    let err = TraceReader::from_reader(Cursor::new(&b"#!/bin/sh\necho hello\n"[..]), "script.sh")
        .err()
        .unwrap();
    assert!(matches!(err, TraceError::NotATrace { .. }));
    assert!(err.to_string().contains("not an alloclens trace"));
    let err = TraceReader::from_reader(Cursor::new(&b""[..]), "empty")
        .err()
        .unwrap();
    assert!(matches!(err, TraceError::Empty { .. }));
    assert_eq!(
        err.to_string(),
        "'empty' is empty (0 bytes), not a trace of `alloclens record`"
    );

    let mut bytes = write_trace(&[], 10);
    bytes[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let err = TraceReader::from_reader(Cursor::new(&bytes[..]), "new.alt")
        .err()
        .unwrap();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("version {}", FORMAT_VERSION + 1))
            && msg.contains(&format!("version {FORMAT_VERSION}")),
        "{msg}"
    );
    // Version 1 (before the split columns) is refused by name, not misread.
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    let err = TraceReader::from_reader(Cursor::new(&bytes[..]), "old.alt")
        .err()
        .unwrap();
    assert!(matches!(err, TraceError::OlderVersion { found: 1, .. }));
    assert!(err.to_string().contains("record it again"), "{err}");
}

/// `random_records` with a stack id on every allocation and realloc (and on frees when `frees`),
/// drawn from `stacks` ids (0 = none now and then, as when a stack could not be taken).
fn with_stack_ids(records: &[Record], stacks: u32, frees: bool, seed: u64) -> Vec<Record> {
    let mut rng = Rng(seed);
    records
        .iter()
        .map(|r| match r {
            Record::Event(e) if frees || !e.op.is_free() => {
                let stack = if rng.below(50) == 0 {
                    0
                } else {
                    1 + rng.below(u64::from(stacks)) as u32
                };
                Record::Event(Event { stack, ..*e })
            }
            other => other.clone(),
        })
        .collect()
}

#[test]
fn sampled_stacks_round_trip_as_version_5_and_smaller() {
    // One allocation in 40 sampled, among 300 stacks.
    let mut rng = Rng(17);
    let records: Vec<Record> = with_stack_ids(&random_records(7, 20_000), 300, false, 9)
        .into_iter()
        .map(|r| match r {
            Record::Event(e) if rng.below(40) != 0 => Record::Event(Event { stack: 0, ..e }),
            other => other,
        })
        .collect();
    let write = |header: &TraceHeader| {
        let mut w = TraceWriter::new(Vec::new(), header).unwrap();
        let id = w.begin_process(&info(10)).unwrap();
        w.write_records(id, &records, 4_000).unwrap();
        w.end_process(id, EndReason::Exit, records.len() as u64)
            .unwrap();
        w.finish(&Trailer {
            exit: "exit 0".into(),
            events: 0,
            end_unix_ns: 2,
            attach: None,
        })
        .unwrap()
    };
    let sampled = write(&TraceHeader {
        stack_sample_bytes: 4096,
        ..stacks_header(false)
    });
    let every = write(&stacks_header(false));
    let (r, got) = read_all(&sampled);
    assert_eq!(got[0], records);
    assert_eq!(r.version(), FORMAT_VERSION);
    assert!(r.damage().is_none());
    let (r, got) = read_all(&every);
    assert_eq!(got[0], records);
    assert_eq!(r.version(), VERSION_WITHOUT_SAMPLED_STACKS);
    assert!(
        sampled.len() < every.len(),
        "sampled form {} bytes, an id per allocation {}",
        sampled.len(),
        every.len()
    );
}

fn stacks_header(frees: bool) -> TraceHeader {
    TraceHeader {
        stacks: true,
        free_stacks: frees,
        stack_depth: Some(64),
        ..header()
    }
}

#[test]
fn stacks_and_modules_round_trip() {
    for frees in [false, true] {
        let records = with_stack_ids(&random_records(7, 20_000), 300, frees, 9);
        let mut rng = Rng(3);
        let stacks: Vec<Vec<u64>> = (0..300)
            .map(|_| {
                (0..1 + rng.below(40))
                    .map(|_| 0x5555_5555_0000 + rng.below(1 << 20))
                    .collect()
            })
            .collect();
        let modules = vec![
            trace::Module {
                pid: 10,
                path: "/usr/bin/prog".into(),
                start: 0x5555_5555_0000,
                end: 0x5555_5565_0000,
                file_offset: 0,
                bias: 0x5555_5555_0000,
                build_id: Some(vec![1, 2, 3, 0xff]),
                unix_ns: 77,
                exec_index: 0,
            },
            trace::Module {
                pid: 11,
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
                start: 0x7f00_0002_8000,
                end: 0x7f00_0020_0000,
                file_offset: 0x28000,
                bias: 0x7f00_0000_0000,
                build_id: None,
                unix_ns: 78,
                exec_index: 1,
            },
        ];
        let mut w = TraceWriter::new(Vec::new(), &stacks_header(frees)).unwrap();
        // Stacks may come before or after the events that name them, in several chunks.
        w.write_stacks(1, stacks[..100].iter().map(|s| s.as_slice()))
            .unwrap();
        w.write_modules(&modules[..1]).unwrap();
        let id = w.begin_process(&info(10)).unwrap();
        w.write_records(id, &records, 4_000).unwrap();
        w.end_process(id, EndReason::Exit, records.len() as u64)
            .unwrap();
        w.write_stacks(101, stacks[100..].iter().map(|s| s.as_slice()))
            .unwrap();
        w.write_modules(&modules[1..]).unwrap();
        let bytes = w
            .finish(&Trailer {
                exit: "exit 0".into(),
                events: 0,
                end_unix_ns: 2,
                attach: None,
            })
            .unwrap();
        let (r, got) = read_all(&bytes);
        assert_eq!(got[0], records, "frees {frees}");
        assert_eq!(r.version(), VERSION_WITHOUT_SAMPLED_STACKS);
        assert!(r.has_stacks());
        assert!(r.damage().is_none());
        assert_eq!(r.stacks().len(), 300);
        for (i, s) in stacks.iter().enumerate() {
            assert_eq!(r.stacks().get(i as u32 + 1), Some(s.as_slice()));
        }
        assert_eq!(r.stacks().get(0), None);
        assert_eq!(r.modules(), modules.as_slice());
        assert_eq!(r.modules_of(11).count(), 1);
        let without_free_stacks = got[0]
            .iter()
            .filter(|r| matches!(r, Record::Event(e) if e.op.is_free() && e.stack != 0))
            .count();
        assert_eq!(without_free_stacks > 0, frees);
    }
}

/// Without `stacks` in the header, the file is version 3 and the same bytes whatever stack ids
/// the events carry: nothing of the stacks feature reaches a trace recorded without it.
#[test]
fn trace_without_stacks_is_version_3_and_unchanged() {
    let plain = random_records(11, 10_000);
    let tagged = with_stack_ids(&plain, 50, true, 1);
    let write = |records: &[Record]| {
        let mut w = TraceWriter::new(Vec::new(), &header()).unwrap();
        let id = w.begin_process(&info(1)).unwrap();
        w.write_records(id, records, 3_000).unwrap();
        w.finish(&Trailer::default()).unwrap()
    };
    let a = write(&plain);
    assert_eq!(a, write(&tagged));
    assert_eq!(u32::from_le_bytes(a[8..12].try_into().unwrap()), 3);
    let (r, got) = read_all(&a);
    assert_eq!(r.version(), 3);
    assert!(!r.has_stacks());
    assert!(r.stacks().is_empty());
    assert_eq!(got[0], plain);
    // The same events with stacks cost their stack column, nothing else changes.
    let mut w = TraceWriter::new(Vec::new(), &stacks_header(false)).unwrap();
    let id = w.begin_process(&info(1)).unwrap();
    w.write_records(id, &tagged, 3_000).unwrap();
    let b = w.finish(&Trailer::default()).unwrap();
    assert!(b.len() > a.len());
}

/// A STACKS chunk that skips ids is damage: the reader stops there, as at any corrupt chunk.
#[test]
fn stacks_chunk_out_of_order_is_damage() {
    let mut w = TraceWriter::new(Vec::new(), &stacks_header(false)).unwrap();
    w.write_stacks(1, [[1u64, 2].as_slice()]).unwrap();
    let skipping = trace::stacks_payload(5, [[3u64].as_slice()]).unwrap();
    w.write_stacks_payload(&skipping).unwrap();
    let bytes = w.finish(&Trailer::default()).unwrap();
    let r = TraceReader::from_reader(Cursor::new(&bytes[..]), "mem.alt").unwrap();
    assert_eq!(r.stacks().len(), 1);
    let d = r.damage().expect("damage");
    assert!(format!("{:?}", d.kind).contains("expected 2"), "{d:?}");
}

fn memory_sample(i: u64) -> MemorySample {
    MemorySample {
        seq: i * 500,
        seq_end: i * 500 + 2,
        t_ns: i * 100_000_000,
        rss: (20 + i) << 20,
        anon: (6 + i) << 20,
        pss: Some((19 + i) << 20),
        heap: i.is_multiple_of(2).then_some((4 + i) << 20),
        file: i.is_multiple_of(2).then_some(12 << 20),
        stack: i.is_multiple_of(2).then_some(136 << 10),
    }
}

/// Two streams with memory samples in three MEMORY chunks interleaved with their events, as the
/// recorder writes them.
fn trace_with_memory() -> (Vec<u8>, Vec<MemorySample>, Vec<MemorySample>) {
    let (a, b) = (random_records(21, 3_000), random_records(22, 2_000));
    let samples_a: Vec<_> = (0..7).map(memory_sample).collect();
    let samples_b: Vec<_> = (3..5).map(memory_sample).collect();
    let mut w = TraceWriter::new(Vec::new(), &header()).unwrap();
    let sa = w.begin_process(&info(1)).unwrap();
    let sb = w.begin_process(&info(2)).unwrap();
    w.write_records(sa, &a[..1500], 1000).unwrap();
    w.write_memory(sa, &samples_a[..3]).unwrap();
    w.write_memory(sb, &samples_b).unwrap();
    w.write_records(sb, &b, 1000).unwrap();
    w.end_process(sb, EndReason::Exit, b.len() as u64).unwrap();
    w.write_records(sa, &a[1500..], 1000).unwrap();
    w.write_memory(sa, &samples_a[3..]).unwrap();
    w.end_process(sa, EndReason::Exit, a.len() as u64).unwrap();
    let bytes = w
        .finish(&Trailer {
            exit: "exit 0".into(),
            events: 0,
            end_unix_ns: 2,
            attach: None,
        })
        .unwrap();
    (bytes, samples_a, samples_b)
}

#[test]
fn memory_samples_round_trip_per_stream() {
    let (bytes, samples_a, samples_b) = trace_with_memory();
    let (r, got) = read_all(&bytes);
    assert!(r.damage().is_none());
    assert!(r.has_memory_samples());
    assert_eq!(r.memory_samples(0), &samples_a[..]);
    assert_eq!(r.memory_samples(1), &samples_b[..]);
    assert!(r.memory_samples(2).is_empty(), "no such stream: no samples");
    assert_eq!((got[0].len(), got[1].len()), (3_000, 2_000));
    // A trace without MEMORY chunks has none.
    let plain = write_trace(
        &[(info(1), random_records(23, 100), Some(EndReason::Exit))],
        50,
    );
    let (r, _) = read_all(&plain);
    assert!(!r.has_memory_samples() && r.memory_samples(0).is_empty());
}

#[test]
fn a_cut_trace_keeps_the_memory_samples_before_the_cut() {
    let (bytes, samples_a, _) = trace_with_memory();
    // Cut inside the last MEMORY chunk of stream 0: its first three samples remain.
    let full = TraceReader::from_reader(Cursor::new(&bytes[..]), "x").unwrap();
    let last_events = full.streams()[0].chunks.last().unwrap();
    let after_events = last_events.offset as usize + 24 + 10;
    let memory_at = bytes[after_events..]
        .windows(5)
        .position(|w| w[..4] == *b"ALCK" && w[4] == 9)
        .map(|p| p + after_events)
        .expect("the second MEMORY chunk of stream 0");
    let r = TraceReader::from_reader(Cursor::new(&bytes[..memory_at + 30]), "cut.alt").unwrap();
    assert_eq!(r.damage().unwrap().kind, DamageKind::Truncated);
    assert_eq!(r.memory_samples(0), &samples_a[..3]);
}

fn residency_reading(seq: u64) -> trace::Residency {
    let base = 0x7f00_0000_0000 + (seq << 20);
    trace::Residency {
        seq,
        t_ns: seq * 1000,
        page_size: 4096,
        mappings: vec![trace::ResidentMapping {
            start: base,
            end: base + (64 << 12),
            runs: vec![
                (base, base + (3 << 12)),
                (base + (10 << 12), base + (64 << 12)),
            ],
        }],
    }
}

/// RESIDENCY chunks are read per stream, in the order written; a reader that predates them skips
/// them like any unknown kind (`unknown_chunk_kinds_are_skipped`: the events and samples read the
/// same without them).
#[test]
fn residency_readings_round_trip_per_stream() {
    let a = random_records(25, 2_000);
    let readings: Vec<_> = (1..4).map(|i| residency_reading(i * 500)).collect();
    let mut w = TraceWriter::new(Vec::new(), &header()).unwrap();
    let sa = w.begin_process(&info(1)).unwrap();
    let sb = w.begin_process(&info(2)).unwrap();
    w.write_records(sa, &a, 1000).unwrap();
    w.write_memory(sa, &[memory_sample(1)]).unwrap();
    w.write_residency(sa, &readings[..2]).unwrap();
    w.write_residency(sa, &readings[2..]).unwrap();
    w.end_process(sa, EndReason::Exit, a.len() as u64).unwrap();
    w.end_process(sb, EndReason::Exit, 0).unwrap();
    let bytes = w
        .finish(&Trailer {
            exit: "exit 0".into(),
            events: 0,
            end_unix_ns: 2,
            attach: None,
        })
        .unwrap();
    let (r, got) = read_all(&bytes);
    assert!(r.damage().is_none(), "{:?}", r.damage());
    assert_eq!(r.residency(0), &readings[..]);
    assert!(r.residency(1).is_empty() && r.residency(2).is_empty());
    assert_eq!(got[0], a);
    assert_eq!(r.memory_samples(0), &[memory_sample(1)]);
}

/// Frames a chunk as the writer does (docs/trace-format.md, "Chunks").
fn frame(kind: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(b"ALCK");
    f.extend_from_slice(&[kind, 0, 0, 0]);
    f.extend_from_slice(&stream.to_le_bytes());
    f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&f[4..20]);
    h.update(payload);
    f.extend_from_slice(&h.finalize().to_le_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn unknown_chunk_kinds_are_skipped() {
    // What a reader that predates MEMORY does with one, and what this one does with a later kind.
    let a = random_records(24, 2_000);
    let bytes = write_trace(&[(info(1), a.clone(), Some(EndReason::Exit))], 500);
    let r = TraceReader::from_reader(Cursor::new(&bytes[..]), "x").unwrap();
    let second = r.streams()[0].chunks[1].offset as usize;
    let mut with_unknown = bytes[..second].to_vec();
    with_unknown.extend(frame(200, 0, b"a chunk of a later alloclens"));
    with_unknown.extend(frame(201, u32::MAX, &[]));
    with_unknown.extend_from_slice(&bytes[second..]);
    let (r, got) = read_all(&with_unknown);
    assert!(r.damage().is_none(), "{:?}", r.damage());
    assert!(r.trailer().is_some());
    assert_eq!(got[0], a);
    assert!(!r.has_memory_samples());
}

/// tests/fixtures/sampled-stacks-v4.alt: sampled stacks recorded before version 5, an id per
/// allocation (0 when not sampled). It still reads, and written again (as version 5, the ids
/// stored as samples) it reads back to the same events and stacks.
#[test]
fn a_sampled_trace_of_version_4_reads_and_writes_again_as_version_5() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/sampled-stacks-v4.alt"
    );
    let mut old = TraceReader::open(path).unwrap();
    assert_eq!(old.version(), VERSION_WITHOUT_SAMPLED_STACKS);
    assert_eq!(old.header().stack_sample_bytes, 2048);
    assert!(old.damage().is_none());
    let streams: Vec<(ProcessInfo, Vec<Record>)> = (0..old.streams().len())
        .map(|s| {
            let info = old.streams()[s].info.clone();
            (info, old.records(s).unwrap().map(Result::unwrap).collect())
        })
        .collect();
    let allocations = || {
        streams.iter().flat_map(|(_, r)| r).filter_map(|r| match r {
            Record::Event(e) if !e.op.is_free() => Some(e),
            _ => None,
        })
    };
    let sampled = allocations().filter(|e| e.stack != 0).count();
    // 67 MiB requested in 6,001 calls at R = 2 KiB: most of the large ones, few small ones.
    assert!(
        (2000..5000).contains(&sampled),
        "{sampled} of {} sampled",
        allocations().count()
    );
    assert!(allocations().all(|e| e.stack == 0 || old.stacks().get(e.stack).is_some()));

    let mut w = TraceWriter::new(Vec::new(), old.header()).unwrap();
    let stacks: Vec<&[u64]> = old.stacks().iter().map(|(_, f)| f).collect();
    w.write_stacks(1, stacks.iter().copied()).unwrap();
    w.write_modules(old.modules()).unwrap();
    for (info, records) in &streams {
        let id = w.begin_process(info).unwrap();
        w.write_records(id, records, 4_000).unwrap();
        w.end_process(id, EndReason::Exit, records.len() as u64)
            .unwrap();
    }
    let bytes = w.finish(old.trailer().unwrap()).unwrap();
    let (new, got) = read_all(&bytes);
    assert_eq!(new.version(), FORMAT_VERSION);
    assert_eq!(new.stacks(), old.stacks());
    assert_eq!(new.modules(), old.modules());
    // The modules compressed (the events are not comparable: `write_records` gives every event
    // a time anchor of its own).
    let old_modules = modules_bytes(&std::fs::read(path).unwrap());
    assert!(
        modules_bytes(&bytes) * 2 < old_modules,
        "{old_modules} bytes before"
    );
    assert_eq!(got.len(), streams.len());
    for ((_, expected), got) in streams.iter().zip(&got) {
        assert_eq!(got, expected);
    }
}

/// Bytes of a trace's MODULES chunks (kind 8; docs/trace-format.md, "Chunks").
fn modules_bytes(bytes: &[u8]) -> usize {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let (mut at, mut total) = (20 + u32_at(12), 0);
    while at + 24 <= bytes.len() {
        let len = u32_at(at + 12);
        if bytes[at + 4] == 8 {
            total += len;
        }
        at += 24 + len;
    }
    total
}
