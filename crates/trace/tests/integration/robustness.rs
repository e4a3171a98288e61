//! Damaged input never panics the reader: every truncation point and many random byte flips of a real
//! multi-stream trace give an error or records, on stable Rust in the ordinary test run (the libFuzzer
//! target in fuzz/ explores further on nightly).
use std::io::Cursor;

use trace::{
    EndReason, Event, Marker, MemorySample, Op, ProcessInfo, Record, TraceHeader, TraceReader,
    TraceWriter, Trailer,
};

fn sample_trace() -> Vec<u8> {
    let header = TraceHeader {
        command: vec!["prog".into(), "<arg>".into()],
        host: "test".into(),
        allocator: "glibc".into(),
        start_unix_ns: 1,
        writer: "robustness test".into(),
        ..Default::default()
    };
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    for pid in [10u32, 11] {
        let info = ProcessInfo {
            pid,
            ppid: 1,
            exec_index: 0,
            cmdline: vec!["prog".into()],
            start_unix_ns: 5,
            truncated: false,
        };
        let id = w.begin_process(&info).unwrap();
        let mut records = Vec::new();
        for i in 0..600u64 {
            if i % 100 == 0 {
                records.push(Record::Marker(Box::new(Marker {
                    seq: i,
                    t_ns: i * 10,
                    tid: pid,
                    label: format!("phase {i}"),
                })));
            }
            let addr = 0x1000 + 16 * (i % 37);
            let (op, a, size) = if i % 2 == 0 {
                (Op::Malloc, addr, 16 + i % 300)
            } else {
                (Op::Free, addr - 16, 0)
            };
            records.push(Record::Event(Event {
                seq: i,
                t_ns: i * 10,
                tid: pid,
                stack: 0,
                op,
                addr: a,
                size,
                old_addr: 0,
            }));
        }
        w.write_records(id, &records[..300], 128).unwrap();
        // Memory samples between events chunks, as the recorder writes them.
        let samples: Vec<MemorySample> = (0..4u64)
            .map(|i| MemorySample {
                seq: i * 150,
                seq_end: i * 150 + 1,
                t_ns: i * 1500,
                rss: 8 << 20,
                anon: 3 << 20,
                pss: Some(7 << 20),
                heap: Some((1 + i) << 20),
                file: None,
                stack: Some(1 << 17),
            })
            .collect();
        w.write_memory(id, &samples).unwrap();
        w.write_records(id, &records[300..], 128).unwrap();
        w.end_process(id, EndReason::Exit, records.len() as u64)
            .unwrap();
    }
    w.finish(&Trailer {
        exit: "exit 0".into(),
        events: 1200,
        end_unix_ns: 9,
        attach: None,
    })
    .unwrap()
}

/// Reads everything the reader will give; returns the records decoded. Errors are fine, panics are not.
fn read_everything(bytes: &[u8]) -> usize {
    let Ok(mut reader) = TraceReader::from_reader(Cursor::new(bytes), "damaged.alt") else {
        return 0;
    };
    let _ = reader.damage().map(|d| d.to_string());
    for s in 0..reader.streams().len() {
        assert!(reader.memory_samples(s).len() <= 4);
    }
    let mut decoded = 0;
    for s in 0..reader.streams().len() {
        if let Ok(records) = reader.records(s) {
            for r in records {
                match r {
                    Ok(_) => decoded += 1,
                    Err(e) => {
                        let _ = e.to_string();
                        break;
                    }
                }
            }
        }
    }
    decoded
}

#[test]
fn the_intact_trace_reads_completely() {
    assert_eq!(read_everything(&sample_trace()), 2 * (600 + 6));
}

#[test]
fn every_truncation_point_is_survived() {
    let bytes = sample_trace();
    let full = read_everything(&bytes);
    let mut previous = 0;
    for len in 0..bytes.len() {
        let got = read_everything(&bytes[..len]);
        assert!(got <= full);
        // A longer prefix never recovers fewer records than a shorter one, at chunk granularity.
        assert!(
            got + 128 + 8 >= previous,
            "prefix {len}: {got} records after {previous}"
        );
        previous = previous.max(got);
    }
}

#[test]
fn random_byte_flips_are_survived() {
    let bytes = sample_trace();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let mut damaged = bytes.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() % damaged.len() as u64) as usize;
            damaged[at] ^= 1 << (next() % 8);
        }
        read_everything(&damaged);
    }
}
