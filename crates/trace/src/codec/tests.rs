use std::collections::HashMap;

use super::clock::{interpolate, Clock};
use super::encode::ID_TABLE_BITS;
use super::*;
use crate::event::{Event, Marker, Op, Record};

fn events(n: u64, threads: u32) -> Vec<Event> {
    (0..n)
        .map(|i| {
            let block = 0x10_0000 + 64 * (i / 2 % 50);
            let (op, size) = if i % 2 == 0 {
                (Op::Malloc, 24 + i % 7)
            } else {
                (Op::Free, 0)
            };
            Event {
                seq: i,
                t_ns: 0,
                tid: 1000 + (i as u32 * 7) % threads,
                stack: 0,
                op,
                addr: block,
                size,
                old_addr: 0,
            }
        })
        .collect()
}

fn decoded_events(payload: &[u8]) -> Vec<Event> {
    decode_payload(payload)
        .unwrap()
        .into_iter()
        .map(|r| match r {
            Record::Event(e) => Event { t_ns: 0, ..e },
            Record::Marker(m) => panic!("unexpected marker {m:?}"),
        })
        .collect()
}

/// The reference: `interpolate` with the anchor found by a scan.
fn time_by_scan(anchors: &[(u64, u64)], seq: u64) -> u64 {
    let i = anchors.iter().rposition(|a| a.0 <= seq).unwrap_or(0);
    interpolate(anchors, i, seq)
}

#[test]
fn stepped_clock_matches_interpolation() {
    let cases: Vec<Vec<(u64, u64)>> = vec![
        vec![],
        vec![(5, 1000)],
        vec![(0, 0), (7, 1000)],
        vec![(3, 10), (3, 20), (10, 15), (17, 1_000_003), (40, 2_000_000)],
        vec![(0, 5), (1 << 40, u64::MAX - 7)],
        vec![(2, u64::MAX / 3), (9, u64::MAX / 3 + 1), (100, u64::MAX)],
    ];
    for anchors in &cases {
        let mut clock = Clock::new(anchors);
        // Steps of 1 mostly, some jumps, starting before the first anchor.
        let mut seq = 0u64;
        for k in 0..200u64 {
            assert_eq!(
                clock.at(seq),
                time_by_scan(anchors, seq),
                "anchors {anchors:?}, seq {seq}"
            );
            seq += if k % 17 == 0 { 5 } else { 1 };
        }
        let far = (1u64 << 40) - 3;
        assert_eq!(clock.at(far), time_by_scan(anchors, far));
        assert_eq!(clock.at(far + 1), time_by_scan(anchors, far + 1));
    }
}

#[test]
fn a_reused_decoder_gives_what_a_fresh_one_gives() {
    // Chunks of different shapes (threads, reallocs, a marker) through one decoder and one
    // record buffer, with a corrupt payload in between: no state leaks from chunk to chunk.
    let mut enc = ChunkEncoder::new(1);
    let mut payloads = Vec::new();
    for (k, threads) in [(0u64, 1u32), (1, 3), (2, 40)] {
        let n = 2000 + 500 * k;
        enc.push_anchor(k * 10_000, k * 1_000_000);
        for (i, e) in events(n, threads).iter().enumerate() {
            let mut e = Event {
                seq: k * 10_000 + i as u64,
                ..*e
            };
            if i % 9 == 4 && e.op == Op::Malloc {
                e.op = Op::Realloc;
                e.old_addr = e.addr;
                e.addr += 16 * k;
            }
            if i == 7 {
                enc.push_marker(&Marker {
                    seq: e.seq,
                    t_ns: 5,
                    tid: e.tid,
                    label: format!("phase {k}"),
                })
                .unwrap();
            }
            enc.push_event(&e).unwrap();
        }
        enc.push_anchor(k * 10_000 + n, k * 1_000_000 + 777 * n);
        payloads.push(enc.finish().unwrap().unwrap().payload);
    }
    let mut corrupt = payloads[1].clone();
    corrupt.truncate(corrupt.len() / 2);
    let mut decoder = ChunkDecoder::new();
    let mut out = Vec::new();
    for p in [
        &payloads[0],
        &corrupt,
        &payloads[1],
        &payloads[2],
        &payloads[0],
    ] {
        let fresh = decode_payload(p);
        let reused = decoder.decode(p, &mut out).map(|()| out.clone());
        assert_eq!(reused, fresh);
    }
    assert!(decoder.decode(&corrupt, &mut out).is_err());
    assert_eq!(out.len(), 0, "a payload cut short fails before any record");
}

/// A varied stream: seq gaps, thread runs of all lengths, sizes and back-references past
/// every split boundary, reallocs of each address mode, sized and double frees, and blocks
/// reused out of LIFO order (deeper predictions).
fn varied_events(n: usize, seed: u64) -> Vec<Event> {
    let mut x = seed | 1;
    let mut rand = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut live: Vec<(u64, u64)> = Vec::new();
    let mut freed: Vec<u64> = Vec::new();
    let mut next_addr = 0x7f00_0000_0000u64;
    let mut seq = 100u64;
    let mut tid = 1u32;
    let mut out = Vec::new();
    while out.len() < n {
        let r = rand();
        seq += if r % 97 == 0 { 1 + r % 5000 } else { 1 };
        if r % 7 == 0 {
            tid = 1 + (r >> 20) as u32 % 40;
        }
        let size = match (r >> 8) % 10 {
            0 => 0,
            1 => 3840 + (r >> 16) % 100,
            2 => 1 << (20 + (r >> 16) % 40),
            3 => u64::MAX - (r >> 16) % 3,
            _ => 1 + (r >> 16) % 600,
        };
        let pick = |r: u64, len: usize| (r >> 32) as usize % len.max(1);
        let e = |op, addr, size, old_addr| Event {
            seq,
            t_ns: 0,
            tid,
            stack: 0,
            op,
            addr,
            size,
            old_addr,
        };
        let new_addr = |r: u64, freed: &mut Vec<u64>, next: &mut u64| {
            if !freed.is_empty() && !r.is_multiple_of(3) {
                // Mostly the last freed, sometimes a few down.
                let k =
                    (freed.len() - 1).saturating_sub(((r >> 40) % 4) as usize * (r % 2) as usize);
                freed.remove(k)
            } else {
                *next += 16 * (1 + (r >> 44) % 64);
                *next
            }
        };
        match r % 13 {
            0..=4 => {
                let a = if size > 1 << 40 {
                    0
                } else {
                    new_addr(r, &mut freed, &mut next_addr)
                };
                out.push(e(Op::Malloc, a, size, 0));
                if a != 0 {
                    live.push((a, size));
                }
            }
            5..=8 if !live.is_empty() => {
                let (a, s) = live.swap_remove(pick(r, live.len()));
                let op = if r % 11 == 0 { Op::FreeSized } else { Op::Free };
                out.push(e(op, a, if op == Op::FreeSized { s } else { 0 }, 0));
                freed.push(a);
            }
            9 => out.push(e(Op::Free, 0, 0, 0)),
            10 if !freed.is_empty() => {
                // A double free: an explicit address, not a back-reference.
                out.push(e(Op::Free, freed[pick(r, freed.len())], 0, 0));
            }
            11 if !live.is_empty() => {
                let i = pick(r, live.len());
                let (old, _) = live[i];
                let a = match (r >> 20) % 3 {
                    0 => old,
                    1 => new_addr(r, &mut freed, &mut next_addr),
                    _ => 0,
                };
                out.push(e(Op::Realloc, a, size, old));
                if a != 0 {
                    live[i] = (a, size);
                }
            }
            _ => {
                let a = new_addr(r, &mut freed, &mut next_addr);
                out.push(e(Op::Calloc, a, size % 4096, 0));
                live.push((a, size % 4096));
            }
        }
        if freed.len() > 64 {
            freed.remove(0);
        }
    }
    out
}

#[test]
fn varied_streams_round_trip_exactly() {
    for seed in [1u64, 2, 3, 0xdead_beef] {
        let input = varied_events(20_000, seed);
        let mut enc = ChunkEncoder::new(1);
        let mut decoded = Vec::new();
        for (i, part) in input.chunks(7_000).enumerate() {
            for (j, e) in part.iter().enumerate() {
                if j == 11 {
                    enc.push_marker(&Marker {
                        seq: e.seq,
                        t_ns: 42,
                        tid: e.tid,
                        label: format!("part {i}"),
                    })
                    .unwrap();
                }
                enc.push_event(e).unwrap();
            }
            let payload = enc.finish().unwrap().unwrap().payload;
            let records = decode_payload(&payload).unwrap();
            let markers = records
                .iter()
                .filter(|r| matches!(r, Record::Marker(_)))
                .count();
            assert_eq!(markers, 1);
            decoded.extend(records.into_iter().filter_map(|r| match r {
                Record::Event(e) => Some(Event { t_ns: 0, ..e }),
                Record::Marker(_) => None,
            }));
        }
        assert_eq!(decoded.len(), input.len());
        for (d, i) in decoded.iter().zip(&input) {
            assert_eq!(d, i, "seed {seed}");
        }
    }
}

/// `events` with the addresses a recorder without addresses writes (its `BlockIds`): a new block
/// becomes `synthetic_address(seq)`, a released one the id of its allocation, or keeps its real
/// address when it was not allocated in the trace.
fn with_block_ids(events: &[Event]) -> Vec<Event> {
    let mut live = HashMap::new();
    let release = |live: &mut HashMap<u64, u64>, addr: &mut u64| {
        if let Some(seq) = live.remove(addr) {
            *addr = synthetic_address(seq);
        }
    };
    events
        .iter()
        .map(|e| {
            let mut e = *e;
            if e.op.is_free() {
                release(&mut live, &mut e.addr);
                return e;
            }
            if e.op.is_realloc() {
                release(&mut live, &mut e.old_addr);
            }
            if e.addr != 0 {
                live.insert(e.addr, e.seq);
                e.addr = synthetic_address(e.seq);
            }
            e
        })
        .collect()
}

/// Encodes `events` in chunks of `per_chunk` (with or without addresses) and decodes them.
fn through_chunks(events: &[Event], per_chunk: usize, synthetic: bool) -> (Vec<Event>, usize) {
    let mut enc = ChunkEncoder::new(1);
    if synthetic {
        enc = enc.without_addresses();
    }
    let (mut decoded, mut bytes) = (Vec::new(), 0);
    for part in events.chunks(per_chunk) {
        for e in part {
            enc.push_event(e).unwrap();
        }
        let payload = enc.finish().unwrap().unwrap().payload;
        bytes += payload.len();
        decoded.extend(decoded_events(&payload));
    }
    (decoded, bytes)
}

#[test]
fn streams_without_addresses_decode_to_block_ids() {
    for seed in [1u64, 5, 0xfeed] {
        let input = varied_events(20_000, seed);
        let expected = with_block_ids(&input);
        let (decoded, _) = through_chunks(&expected, 7_000, true);
        assert_eq!(decoded, expected, "seed {seed}");
        // Every free of a block allocated in the stream names the seq of its allocation,
        // across chunk boundaries too (a model of the pairing, by real address).
        let mut born = HashMap::new();
        let mut checked = 0;
        for (d, e) in decoded.iter().zip(&input) {
            let released = if e.op.is_free() {
                Some((e.addr, d.addr))
            } else if e.op.is_realloc() {
                Some((e.old_addr, d.old_addr))
            } else {
                None
            };
            if let Some((real, id)) = released.filter(|r| r.0 != 0) {
                match born.remove(&real) {
                    Some(seq) => {
                        assert_eq!(id, synthetic_address(seq));
                        checked += 1;
                    }
                    None => assert_eq!(id, real, "an unknown block keeps its address"),
                }
            }
            if e.addr != 0 && !e.op.is_free() {
                born.insert(e.addr, e.seq);
                assert_eq!(d.addr, synthetic_address(e.seq));
            }
        }
        assert!(checked > 5_000, "{checked} releases checked");
    }
}

#[test]
fn blocks_freed_in_allocation_order_cost_about_a_bit_across_chunks() {
    // 20,000 blocks allocated, then freed oldest first: every free is in a later chunk than
    // its allocation. With addresses each costs an address delta; without, a seq delta of
    // nearly constant value.
    let mut events = Vec::new();
    for i in 0..20_000u64 {
        let addr = 0x5500_0000_0000 + (i * 7919 % 20_000) * 48;
        events.push(Event {
            seq: i,
            t_ns: 0,
            tid: 1,
            stack: 0,
            op: Op::Malloc,
            addr,
            size: 40,
            old_addr: 0,
        });
    }
    for i in 0..20_000u64 {
        let a = events[i as usize].addr;
        events.push(Event {
            seq: 20_000 + i,
            op: Op::Free,
            addr: a,
            size: 0,
            ..events[0]
        });
    }
    let (plain, with_addresses) = through_chunks(&events, 4_000, false);
    assert_eq!(plain, events);
    let ids = with_block_ids(&events);
    let (decoded, without) = through_chunks(&ids, 4_000, true);
    assert_eq!(decoded, ids);
    let per_free = without as f64 / 20_000.0;
    assert!(
        per_free < 0.3 && without * 4 < with_addresses,
        "{without} bytes without addresses, {with_addresses} with"
    );
}

/// Without addresses the producer table is direct-mapped by seq: a free of any block
/// produced less than `2^ID_TABLE_BITS` seqs earlier in the chunk is a back-reference (a
/// hashed table lost a share of them to collisions), so the address column stays empty.
#[test]
fn frees_within_the_id_window_are_back_references() {
    let window = 1u64 << ID_TABLE_BITS;
    // Each block is freed `live` allocations (and as many frees) later: under `window` seqs.
    let live = window / 2 - 64;
    let mut events = Vec::new();
    let mut seq = 0;
    let mut born = std::collections::VecDeque::new();
    // As the recorder hands them to the encoder: blocks named by their ids.
    for _ in 0..3 * live {
        events.push(Event {
            seq,
            t_ns: 0,
            tid: 1,
            stack: 0,
            op: Op::Malloc,
            addr: synthetic_address(seq),
            size: 24,
            old_addr: 0,
        });
        born.push_back(seq);
        seq += 1;
        if born.len() as u64 > live {
            let b = born.pop_front().unwrap();
            events.push(Event {
                seq,
                op: Op::Free,
                addr: synthetic_address(b),
                size: 0,
                ..events[0]
            });
            seq += 1;
        }
    }
    let mut enc = ChunkEncoder::new(1).without_addresses();
    for e in &events {
        enc.push_event(e).unwrap();
    }
    let payload = enc.finish().unwrap().unwrap().payload;
    let columns = payload_columns(&payload).unwrap();
    let addrs = &columns.iter().find(|(n, _)| *n == "addrs").unwrap().1;
    assert!(addrs.is_empty(), "{} address bytes", addrs.len());
    assert_eq!(decoded_events(&payload), events);
}

#[test]
fn damaged_columns_give_errors_not_panics() {
    for synthetic in [false, true] {
        damaged_columns_give_errors(synthetic);
    }
}

fn damaged_columns_give_errors(synthetic: bool) {
    // The decoder meets hostile bytes after zstd too (a frame that decompresses fine): flip
    // bytes of a real chunk's raw columns, recompress, decode. Any result but a panic.
    let mut enc = ChunkEncoder::new(1);
    let mut events = varied_events(3000, 7);
    if synthetic {
        enc = enc.without_addresses();
        // Blocks from before the chunk: synthetic references.
        events = with_block_ids(&events)[1000..].to_vec();
    }
    for e in events {
        enc.push_event(&e).unwrap();
    }
    let raw = enc.finish_raw(Vec::new()).unwrap();
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut decoder = ChunkDecoder::new();
    let mut out = Vec::new();
    let mut failures = 0;
    for round in 0..400 {
        let mut bytes = raw.raw.clone();
        for _ in 0..1 + round % 4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x >> 16) as usize % bytes.len();
            bytes[i] ^= (x as u8) | 1;
        }
        let damaged = UncompressedChunk {
            raw: bytes,
            ..raw.clone()
        };
        let payload = damaged
            .compress(&mut zstd::bulk::Compressor::new(1).unwrap())
            .unwrap()
            .payload;
        let whole = decoder.decode(&payload, &mut out);
        failures += usize::from(whole.is_err());
        same_in_slices(&mut decoder, &payload, &out, whole.is_err());
    }
    assert!(
        failures > 100,
        "only {failures} of 400 damaged chunks were refused"
    );
}

/// Decoding `payload` in slices of 7 hands over `whole` (what `decode` gave), then leaves the
/// rest, up to the same damage.
fn same_in_slices(decoder: &mut ChunkDecoder, payload: &[u8], whole: &[Record], failed: bool) {
    let mut sliced = Vec::new();
    let mut left = Vec::new();
    let result = decoder.decode_in_slices(payload, &mut left, 7, |slice| {
        assert_eq!(slice.len(), 7);
        sliced.append(slice);
    });
    sliced.append(&mut left);
    assert_eq!(sliced, whole);
    assert_eq!(result.is_err(), failed);
}

/// A chunk decoded in slices of every size hands over the records `decode` gives, in order,
/// in slices of exactly that size, the last ones (at most a slice) left in the buffer.
#[test]
fn slices_hand_over_the_records_of_a_whole_decode() {
    let mut enc = ChunkEncoder::new(1);
    for e in varied_events(3000, 11) {
        enc.push_event(&e).unwrap();
    }
    let payload = enc.finish().unwrap().unwrap().payload;
    let whole = decode_payload(&payload).unwrap();
    let mut decoder = ChunkDecoder::new();
    for slice in [0, 1, 2, 999, 1000, 2999, 3000, 3001, usize::MAX] {
        let mut sliced = Vec::new();
        let mut left = Vec::new();
        decoder
            .decode_in_slices(&payload, &mut left, slice, |s| {
                assert_eq!(s.len(), slice.max(1));
                sliced.append(s);
            })
            .unwrap();
        assert!(!left.is_empty() && left.len() <= slice.max(1), "{slice}");
        sliced.append(&mut left);
        assert_eq!(sliced, whole, "slices of {slice}");
    }
}

#[test]
fn deeper_predictions_are_used_and_decoded() {
    // Blocks come back three at a time in the order they were freed (FIFO, not LIFO): the
    // top guess misses, the deeper one hits.
    let mut input = Vec::new();
    let mut seq = 0;
    let mut push = |op, addr, size| {
        input.push(Event {
            seq,
            t_ns: 0,
            tid: 1,
            stack: 0,
            op,
            addr,
            size,
            old_addr: 0,
        });
        seq += 1;
    };
    for round in 0..100u64 {
        let blocks: Vec<u64> = (0..3).map(|k| 0x1000 + 0x100 * k).collect();
        if round == 0 {
            blocks.iter().for_each(|&a| push(Op::Malloc, a, 40));
        }
        blocks.iter().for_each(|&a| push(Op::Free, a, 0));
        blocks.iter().for_each(|&a| push(Op::Malloc, a, 40));
    }
    let mut enc = ChunkEncoder::new(1);
    for e in &input {
        enc.push_event(e).unwrap();
    }
    assert!(!enc.cols.depths.is_empty(), "no deeper prediction was used");
    assert!(
        enc.cols.addrs.len() <= 3 * 2,
        "addresses spelled out after the first round"
    );
    let chunk = enc.finish().unwrap().unwrap();
    assert_eq!(decoded_events(&chunk.payload), input);
}

#[test]
fn many_threads_outgrow_the_scanned_thread_table() {
    // 40 threads: past the linear scan, the map takes over; indices must stay consistent.
    let input = events(4000, 40);
    let mut enc = ChunkEncoder::new(1);
    for e in &input {
        enc.push_event(e).unwrap();
    }
    let chunk = enc.finish().unwrap().unwrap();
    assert_eq!(decoded_events(&chunk.payload), input);
}

#[test]
fn compressing_elsewhere_gives_the_same_records_and_reuses_the_buffer() {
    let input = events(3000, 3);
    let mut enc = ChunkEncoder::new(3);
    let mut compressor = zstd::bulk::Compressor::new(3).unwrap();
    let mut buf = Vec::new();
    let mut decoded = Vec::new();
    for part in input.chunks(1000) {
        for e in part {
            enc.push_event(e).unwrap();
        }
        let raw = enc.finish_raw(buf).unwrap();
        assert_eq!(raw.records, 1000);
        assert_eq!((raw.first_seq, raw.last_seq), (part[0].seq, part[999].seq));
        decoded.extend(decoded_events(
            &raw.compress(&mut compressor).unwrap().payload,
        ));
        buf = raw.raw;
    }
    assert!(enc.finish_raw(Vec::new()).is_none());
    assert_eq!(decoded, input);
}

/// `events` with sampled stack ids as a recorder writes them: about one allocation or realloc in
/// 20 carries one (every one of 100 KB or more); the stack mostly follows the size and thread,
/// sometimes is new to the trace (the next id), sometimes an older one.
fn with_sampled_stacks(events: &[Event], seed: u64) -> Vec<Event> {
    let mut x = seed | 1;
    let mut next_id = 1u32;
    events
        .iter()
        .map(|e| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut e = *e;
            if !e.op.is_free() && (x.is_multiple_of(20) || e.size >= 100_000) {
                e.stack = match (x >> 8) % 10 {
                    0 => {
                        next_id += 1 + (x >> 16) as u32 % 3;
                        next_id
                    }
                    1 => 1 + (x >> 16) as u32 % next_id,
                    _ => 1 + ((e.size % 64) as u32 * 7 + e.tid) % next_id,
                };
            }
            e
        })
        .collect()
}

#[test]
fn sampled_stacks_decode_to_the_ids_stored_per_allocation() {
    for (seed, synthetic) in [(1u64, false), (2, true), (0xfeed, false)] {
        let mut input = with_sampled_stacks(&varied_events(20_000, seed), seed);
        if synthetic {
            input = with_block_ids(&input);
        }
        let sampled = input.iter().filter(|e| e.stack != 0).count();
        assert!((800..4000).contains(&sampled), "{sampled} sampled");
        let mut bytes = [0usize; 2];
        for (i, sampled_form) in [false, true].into_iter().enumerate() {
            let mut enc = ChunkEncoder::new(1);
            if synthetic {
                enc = enc.without_addresses();
            }
            enc = if sampled_form {
                enc.with_sampled_stacks()
            } else {
                enc.with_stacks(false)
            };
            let mut decoded = Vec::new();
            for part in input.chunks(7_000) {
                for e in part {
                    enc.push_event(e).unwrap();
                }
                let payload = enc.finish().unwrap().unwrap().payload;
                bytes[i] += payload.len();
                let names: Vec<_> = payload_columns(&payload)
                    .unwrap()
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect();
                let expected: &[&str] = if sampled_form {
                    &SAMPLED_STACK_COLUMNS
                } else {
                    &[STACKS_COLUMN]
                };
                assert_eq!(&names[COLUMN_NAMES.len()..], expected);
                decoded.extend(decoded_events(&payload));
            }
            assert_eq!(decoded.len(), input.len());
            for (d, e) in decoded.iter().zip(&input) {
                assert_eq!(d, e, "seed {seed}, sampled form {sampled_form}");
            }
        }
        assert!(
            bytes[1] < bytes[0],
            "sampled form {} bytes, per allocation {}",
            bytes[1],
            bytes[0]
        );
    }
}

#[test]
fn sampled_stack_ids_use_each_code() {
    // Same size and thread: predicted (code 0); a new largest id: code 1 and the distance; an
    // older id: the id itself. Samples at the chunk's first and last allocation.
    let alloc = |seq: u64, tid: u32, size: u64, stack: u32| Event {
        seq,
        t_ns: 0,
        tid,
        stack,
        op: Op::Malloc,
        addr: 0x1000 * (seq + 1),
        size,
        old_addr: 0,
    };
    let input = [
        alloc(0, 1, 32, 5),
        alloc(1, 1, 48, 0),
        alloc(2, 1, 32, 5),
        alloc(3, 2, 32, 9),
        alloc(4, 2, 32, 0),
        alloc(5, 1, 32, 3),
        alloc(6, 2, 64, 12),
    ];
    let mut enc = ChunkEncoder::new(1).with_sampled_stacks();
    for e in &input {
        enc.push_event(e).unwrap();
    }
    assert_eq!(enc.cols.sample_gaps, [0, 1, 0, 1, 0]);
    assert_eq!(enc.cols.stacks, [1, 4, 0, 1, 3, 4, 1, 2]);
    let payload = enc.finish().unwrap().unwrap().payload;
    assert_eq!(decoded_events(&payload), input);
}

#[test]
fn damaged_sampled_stack_columns_give_errors_not_panics() {
    let input = with_sampled_stacks(&varied_events(3000, 11), 11);
    let mut enc = ChunkEncoder::new(1).with_sampled_stacks();
    for e in &input {
        enc.push_event(e).unwrap();
    }
    let raw = enc.finish_raw(Vec::new()).unwrap().raw;
    // The two stack columns are the last: damage only them, where the other columns cannot
    // notice it. A sample placed past the last allocation, an id cut short, a prediction
    // without an earlier stack: errors; other damage decodes to other ids.
    let tail = 2 * input.iter().filter(|e| e.stack != 0).count();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let (mut decoder, mut out, mut failures) = (ChunkDecoder::new(), Vec::new(), 0);
    for round in 0..300 {
        let mut bytes = raw.clone();
        if round % 3 == 0 {
            bytes.truncate(bytes.len() - 1 - round % 5);
        } else {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = bytes.len() - 1 - (x >> 16) as usize % tail;
            bytes[i] ^= (x as u8) | 1;
        }
        let payload = UncompressedChunk {
            raw: bytes,
            records: 0,
            first_seq: 0,
            last_seq: 0,
        }
        .compress(&mut zstd::bulk::Compressor::new(1).unwrap())
        .unwrap()
        .payload;
        let whole = decoder.decode(&payload, &mut out);
        failures += usize::from(whole.is_err());
        same_in_slices(&mut decoder, &payload, &out, whole.is_err());
    }
    assert!(
        failures > 100,
        "only {failures} of 300 damaged chunks were refused"
    );
}

/// Pushes `events` as runs (`push_run`: each stretch of one thread's consecutive seqs, cut at
/// most `longest` long) and as single events (`push_event`), in chunks of `per_chunk`: the raw
/// chunks must be the same bytes.
fn runs_and_single_events_agree(enc: fn() -> ChunkEncoder, events: &[Event], longest: usize) {
    struct Slice<'a>(&'a [Event]);
    impl RunEvents for Slice<'_> {
        fn event(&mut self, seq: u64) -> RunEvent {
            let (first, rest) = self.0.split_first().expect("asked once per event");
            assert_eq!(first.seq, seq);
            self.0 = rest;
            RunEvent::of(first)
        }
    }
    let (mut by_run, mut single) = (enc(), enc());
    for (chunk, part) in events.chunks(3_000).enumerate() {
        let mut rest = part;
        while let Some(first) = rest.first() {
            let n = rest
                .iter()
                .zip(first.seq..)
                .take_while(|(e, seq)| e.seq == *seq && e.tid == first.tid)
                .count()
                .min(longest);
            let (run, after) = rest.split_at(n);
            by_run
                .push_run(first.seq, first.tid, n as u32, &mut Slice(run))
                .unwrap();
            run.iter().for_each(|e| single.push_event(e).unwrap());
            rest = after;
        }
        let a = by_run.finish_raw(Vec::new()).unwrap();
        let b = single.finish_raw(Vec::new()).unwrap();
        assert_eq!(a.raw, b.raw, "chunk {chunk}");
        assert_eq!(
            (a.records, a.first_seq, a.last_seq),
            (b.records, b.first_seq, b.last_seq)
        );
    }
    // A run behind the order is refused whole, like its first event.
    let last = events.last().unwrap();
    let behind = by_run.push_run(
        last.seq,
        last.tid,
        1,
        &mut Slice(std::slice::from_ref(last)),
    );
    assert!(behind.is_ok(), "a new chunk starts anywhere");
    let again = by_run.push_run(
        last.seq,
        last.tid,
        1,
        &mut Slice(std::slice::from_ref(last)),
    );
    assert!(again.is_err());
}

#[test]
fn runs_encode_as_their_events_one_by_one() {
    for seed in [1u64, 7, 0xc0ffee] {
        let input = varied_events(12_000, seed);
        let stacks = with_sampled_stacks(&input, seed);
        let ids = with_block_ids(&input);
        let ids_stacks = with_block_ids(&stacks);
        for longest in [1, 5, usize::MAX] {
            runs_and_single_events_agree(|| ChunkEncoder::new(1), &input, longest);
            runs_and_single_events_agree(
                || ChunkEncoder::new(1).without_addresses(),
                &ids,
                longest,
            );
            runs_and_single_events_agree(
                || ChunkEncoder::new(1).with_stacks(true),
                &stacks,
                longest,
            );
            runs_and_single_events_agree(
                || ChunkEncoder::new(1).with_sampled_stacks(),
                &stacks,
                longest,
            );
            runs_and_single_events_agree(
                || {
                    ChunkEncoder::new(1)
                        .without_addresses()
                        .with_sampled_stacks()
                },
                &ids_stacks,
                longest,
            );
        }
    }
}

/// A CRC of the raw chunks an encoder made for `events` (pushed one by one, a marker and an
/// anchor per chunk of 2,500), for `chunks_are_the_bytes_they_were`.
fn chunks_digest(mut enc: ChunkEncoder, events: &[Event]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    for (i, part) in events.chunks(2_500).enumerate() {
        let first = &part[0];
        enc.push_anchor(first.seq, 1_000 * i as u64);
        for (j, e) in part.iter().enumerate() {
            if j == 7 {
                let label = format!("part {i}");
                let marker = Marker {
                    seq: e.seq,
                    t_ns: 42,
                    tid: e.tid,
                    label,
                };
                enc.push_marker(&marker).unwrap();
            }
            enc.push_event(e).unwrap();
        }
        crc.update(&enc.finish_raw(Vec::new()).unwrap().raw);
    }
    crc.finalize()
}

/// The chunks of every encoder option are the bytes the encoder made before its column writers
/// were rewritten for speed (digests taken at main 6c43fd8): the format did not change, and
/// neither did any choice an encoder makes.
#[test]
fn chunks_are_the_bytes_they_were() {
    let mut digests = Vec::new();
    for seed in [1u64, 7, 0xc0ffee] {
        let input = varied_events(10_000, seed);
        let stacks = with_sampled_stacks(&input, seed);
        let ids = with_block_ids(&input);
        let ids_stacks = with_block_ids(&stacks);
        digests.push([
            chunks_digest(ChunkEncoder::new(1), &input),
            chunks_digest(ChunkEncoder::new(1).without_addresses(), &ids),
            chunks_digest(ChunkEncoder::new(1).with_stacks(true), &stacks),
            chunks_digest(ChunkEncoder::new(1).with_stacks(false), &stacks),
            chunks_digest(ChunkEncoder::new(1).with_sampled_stacks(), &stacks),
            chunks_digest(
                ChunkEncoder::new(1)
                    .without_addresses()
                    .with_sampled_stacks(),
                &ids_stacks,
            ),
        ]);
    }
    let before = [
        [
            0x8b1c9191, 0xc4a2940e, 0xcb38bb0b, 0x21c818d9, 0xc1c1aba6, 0x39f5ce03,
        ],
        [
            0xd47a4802, 0x4404c39f, 0x958c49ab, 0xc0c1a1b9, 0xb0b08da1, 0xd71fdb97,
        ],
        [
            0x5a48cfed, 0x4d331213, 0xb005d458, 0x53382bdd, 0x7a8f2052, 0x15aac778,
        ],
    ];
    assert_eq!(digests, before);
}

/// A random stream for `run_writer_and_event_writer_agree`: each step an allocation (of a
/// size around a planes boundary, or huge), a free (of a live block, an unknown one, or
/// NULL), a sized free or a realloc, on one of three threads, some after a seq gap.
fn random_stream() -> impl proptest::strategy::Strategy<Value = Vec<Event>> {
    use proptest::prelude::*;
    let size = prop_oneof![0u64..300, 0xE00u64..0x1100, any::<u64>(), Just(0u64),];
    let step = (
        0u8..6,
        size,
        0u32..3,
        any::<u64>(),
        prop::bool::weighted(0.05),
    );
    prop::collection::vec(step, 1..600).prop_map(|steps| {
        let mut live: Vec<u64> = Vec::new();
        let (mut seq, mut next_addr) = (1u64, 0x5000_0000u64);
        let mut out = Vec::new();
        for (kind, size, tid, r, gap) in steps {
            seq += if gap { 2 + r % 100 } else { 1 };
            let mut e = Event {
                seq,
                t_ns: 0,
                tid: 100 + tid,
                stack: 0,
                op: Op::Malloc,
                addr: 0,
                size,
                old_addr: 0,
            };
            let pick = (r >> 8) as usize % live.len().max(1);
            match kind {
                0 | 1 => {
                    next_addr += 16 * (1 + r % 8);
                    e.addr = if size > 1 << 40 { 0 } else { next_addr };
                }
                2 if !live.is_empty() => {
                    (e.op, e.addr, e.size) = (Op::Free, live.swap_remove(pick), 0);
                }
                3 => (e.op, e.addr, e.size) = (Op::Free, r & 0xfff0, 0),
                4 if !live.is_empty() => (e.op, e.addr) = (Op::FreeSized, live.swap_remove(pick)),
                5 if !live.is_empty() => {
                    next_addr += 32;
                    e.op = Op::Realloc;
                    e.old_addr = live.swap_remove(pick);
                    e.addr = if r % 3 == 0 { e.old_addr } else { next_addr };
                }
                _ => (e.op, e.addr, e.size) = (Op::Free, 0, 0),
            }
            if e.addr != 0 && !e.op.is_free() {
                live.push(e.addr);
            }
            out.push(e);
        }
        out
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// The run writer (`push_run`: columns reserved per run, written without checks) and the
    /// event writer (`push_event`: `Vec::push` per value) make the same bytes, which decode to
    /// the events, with addresses and without.
    #[test]
    fn run_writer_and_event_writer_agree(events in random_stream(), longest in 1usize..40) {
        let ids = with_block_ids(&events);
        runs_and_single_events_agree(|| ChunkEncoder::new(1), &events, longest);
        runs_and_single_events_agree(|| ChunkEncoder::new(1).without_addresses(), &ids, longest);
        let (decoded, _) = through_chunks(&events, 250, false);
        proptest::prop_assert_eq!(decoded, events);
        let (decoded, _) = through_chunks(&ids, 250, true);
        proptest::prop_assert_eq!(decoded, ids);
    }
}
