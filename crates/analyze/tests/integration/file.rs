//! Analysis of trace files written by the trace crate's writer: same figures as in memory, damaged
//! files analysed up to the damage, filters that match nothing named in the error.

use std::path::Path;

use analyze::{analyze, analyze_file, AnalyzeError, Config, Options};
use testkit::{process_info, Calls, TraceFile};
use trace::{EndReason, ProcessInfo, TraceHeader, TraceWriter, Trailer};

fn two_processes() -> Vec<(ProcessInfo, Calls)> {
    let mut a = Calls::new();
    for i in 0..5000u64 {
        a.on_thread(1 + (i % 3) as u32)
            .malloc(0x1000 + 16 * (i % 64), 24 + i % 40);
        if i == 2500 {
            a.mark("second half");
        }
        a.free(0x1000 + 16 * (i % 64));
    }
    a.malloc(0x99, 4096);
    let mut b = Calls::new();
    b.malloc(0x10, 42);
    b.realloc(0x10, 0x20, 84);
    b.free(0x20);
    let mut child = process_info(43, "test");
    child.ppid = 42;
    vec![(process_info(42, "test"), a), (child, b)]
}

fn write_trace(path: &Path, procs: &[(ProcessInfo, Calls)], chunk_records: usize) {
    let header = TraceHeader {
        command: vec!["test".into()],
        allocator: "glibc".into(),
        ..Default::default()
    };
    let trailer = Trailer {
        exit: "exit 0".into(),
        ..Default::default()
    };
    let mut file = TraceFile::new()
        .header(header)
        .trailer(trailer)
        .chunk_records(chunk_records);
    for (info, calls) in procs {
        file = file.process(info.clone(), calls.records.clone());
    }
    file.write(path);
}

#[test]
fn a_file_gives_the_same_figures_as_the_records_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.alt");
    let procs = two_processes();
    write_trace(&path, &procs, 1000);
    let options = Options::default();
    let from_file = analyze_file(&path, &options).unwrap();
    let in_memory = analyze(
        procs.iter().map(|(i, s)| (i.clone(), s.records.clone())),
        &options,
    );
    assert_eq!(from_file.analysis, in_memory);
    assert!(
        from_file.analysis.warnings.is_empty(),
        "{:?}",
        from_file.analysis.warnings
    );
    assert_eq!(from_file.allocator, "glibc");
    let child = &from_file.analysis.processes[1];
    assert_eq!((child.pid, child.ppid), (43, 42));
    assert_eq!(child.stats.lifetimes.median_calls, Some(1));
}

#[test]
fn filters_select_a_process_and_a_phase() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.alt");
    write_trace(&path, &two_processes(), 1000);
    let only = Options {
        process: Some(43),
        ..Default::default()
    };
    let r = analyze_file(&path, &only).unwrap().analysis;
    assert_eq!(r.processes.len(), 1);
    assert_eq!(r.processes[0].pid, 43);

    let phase = Options {
        config: Config {
            phase: Some("second half".into()),
            ..Config::default()
        },
        process: Some(42),
        ..Default::default()
    };
    let r = analyze_file(&path, &phase).unwrap().analysis;
    let p = &r.processes[0];
    let second = p.phases.iter().find(|ph| ph.name == "second half").unwrap();
    assert_eq!(p.stats.calls_total, second.stats.calls_total);
    assert!(p.stats.calls_total < p.life_calls);

    match analyze_file(
        &path,
        &Options {
            process: Some(7),
            ..Default::default()
        },
    ) {
        Err(AnalyzeError::NoSuchProcess {
            pid: 7, available, ..
        }) => assert_eq!(available, "42, 43"),
        other => panic!("expected NoSuchProcess, got {other:?}"),
    }
    let missing = Options {
        config: Config {
            phase: Some("nope".into()),
            ..Config::default()
        },
        ..Default::default()
    };
    let err = analyze_file(&path, &missing).unwrap_err().to_string();
    assert!(err.contains("nope") && err.contains("second half"), "{err}");
}

#[test]
fn a_truncated_file_is_analysed_up_to_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.alt");
    write_trace(&path, &two_processes(), 500);
    let bytes = std::fs::read(&path).unwrap();
    let cut = dir.path().join("cut.alt");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let r = analyze_file(&cut, &Options::default()).unwrap().analysis;
    assert!(!r.warnings.is_empty());
    assert!(
        r.warnings.iter().any(|w| w.contains("recovered")),
        "{:?}",
        r.warnings
    );
    let p = &r.processes[0];
    assert!(p.truncated);
    assert!(
        p.life_calls > 0 && p.life_calls < 10_001,
        "{}",
        p.life_calls
    );
}

#[test]
fn a_foreign_file_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "hello, not a trace\n").unwrap();
    let err = analyze_file(&path, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("notes.txt") && err.contains("not an alloclens trace"),
        "{err}"
    );
}

#[test]
fn a_corrupt_chunk_stops_its_stream_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.alt");
    write_trace(&path, &two_processes(), 500);
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 8] {
        *b ^= 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    let r = analyze_file(&path, &Options::default()).unwrap().analysis;
    assert!(!r.warnings.is_empty(), "damage must be reported");
    let p = &r.processes[0];
    assert!(p.truncated);
    assert!(p.life_calls < 10_001, "{}", p.life_calls);
}

/// A chunk whose checksum is right that decodes partway (its header claims 120 records, its
/// columns hold 100): the records before the damage are analysed, the same on the serial path
/// (which decodes a chunk in slices, feeding each as it comes) and the pipelined one (which
/// decodes it whole on a helper thread).
#[test]
fn a_chunk_that_fails_partway_is_analysed_up_to_its_damage_on_every_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.alt");
    let (info, seq) = two_processes().remove(0);
    let (before, rest) = seq.records.split_at(1000);
    let (middle, after) = rest.split_at(100);
    let mut encoder = trace::codec::ChunkEncoder::new(1);
    for r in middle {
        let trace::Record::Event(e) = r else {
            panic!("no marker among these records")
        };
        encoder.push_event(e).unwrap();
    }
    let mut chunk = encoder.finish_raw(Vec::new()).unwrap();
    // The header: first seq, flags, then the record count (varints).
    let count_at = varint_ends(&chunk.raw, 2);
    assert_eq!(chunk.raw[count_at], 100);
    chunk.raw[count_at] = 120;
    let damaged = chunk
        .compress(&mut zstd::bulk::Compressor::new(1).unwrap())
        .unwrap();
    {
        let file = std::fs::File::create(&path).unwrap();
        let mut w =
            TraceWriter::new(std::io::BufWriter::new(file), &TraceHeader::default()).unwrap();
        let id = w.begin_process(&info).unwrap();
        w.write_records(id, before, 100).unwrap();
        w.write_events(id, &damaged).unwrap();
        w.write_records(id, after, 100).unwrap();
        w.end_process(id, EndReason::Exit, seq.records.len() as u64)
            .unwrap();
        w.finish(&Trailer::default()).unwrap();
    }
    for threads in [1, 2] {
        let options = Options {
            threads: Some(threads),
            ..Options::default()
        };
        let r = analyze_file(&path, &options).unwrap().analysis;
        let p = &r.processes[0];
        assert_eq!(p.life_calls, 1100, "threads {threads}: up to the damage");
        assert!(p.truncated);
        assert!(
            r.warnings.iter().any(|w| w.contains("ends early")),
            "{:?}",
            r.warnings
        );
    }
}

/// Where the varint after the first `n` of `bytes` starts.
fn varint_ends(bytes: &[u8], n: usize) -> usize {
    let mut at = 0;
    for _ in 0..n {
        while bytes[at] & 0x80 != 0 {
            at += 1;
        }
        at += 1;
    }
    at
}

/// A chunk whose checksum is right but whose content does not decode, followed by many good
/// chunks: the stream stops at it (no hang while helpers still hold chunks), the rest is analysed.
#[test]
fn an_undecodable_chunk_stops_its_stream_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.alt");
    let (info, seq) = two_processes().remove(0);
    let (before, after) = seq.records.split_at(1000);
    {
        let file = std::fs::File::create(&path).unwrap();
        let mut w =
            TraceWriter::new(std::io::BufWriter::new(file), &TraceHeader::default()).unwrap();
        let id = w.begin_process(&info).unwrap();
        w.write_records(id, before, 100).unwrap();
        let garbage = trace::EncodedChunk {
            payload: vec![0xff; 64],
            records: 10,
            first_seq: 0,
            last_seq: 9,
        };
        w.write_events(id, &garbage).unwrap();
        w.write_records(id, after, 100).unwrap();
        w.end_process(id, EndReason::Exit, seq.records.len() as u64)
            .unwrap();
        w.finish(&Trailer::default()).unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let p = path.clone();
    std::thread::spawn(move || {
        let _ = tx.send(analyze_file(&p, &Options::default()));
    });
    let result = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("analyze_file hung");
    let r = result.unwrap().analysis;
    assert_eq!(
        r.processes[0].life_calls, 1000,
        "the records before the bad chunk"
    );
    assert!(r.processes[0].truncated);
    assert!(
        r.warnings.iter().any(|w| w.contains("corrupt")),
        "{:?}",
        r.warnings
    );
}
