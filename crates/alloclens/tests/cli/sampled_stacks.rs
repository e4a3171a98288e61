//! Sampled call stacks (`record --stacks`, issue 27), on the capture side: the sampling rate in the
//! trace header read back, large allocations (far above the mean) always sampled and small ones
//! in proportion, each thread and a fork child drawing their own sample points, and
//! `--stacks=all` (or `--stack-sample 0`) taking every stack as before; the stack ids stored as
//! samples (format version 5) read back as recorded, also from a cut trace, and a trace of the
//! older form gives the same figures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use testkit::{alloclens, json_stdout, record};
use trace::{EndReason, Op, Record, StackSampling, TraceReader, TraceWriter};

// The program (testkit's sampled.c): sizes tell its allocations apart: the big ones (2 MiB), the
// small ones (256 B), then the same loop of 1000-byte allocations in two threads at once, then
// after a fork the same loop of 1002-byte ones in parent and child.

/// Per process (pid), thread (tid) and allocation size: whether each malloc of that size, in
/// order, carried a stack.
type Sampled = BTreeMap<(u32, u32, u64), Vec<bool>>;

fn sampled(trace: &Path) -> (TraceReader<std::io::BufReader<std::fs::File>>, Sampled) {
    let mut reader = TraceReader::open(trace).unwrap();
    let mut out = Sampled::new();
    for stream in 0..reader.streams().len() {
        let pid = reader.streams()[stream].info.pid;
        for record in reader.records(stream).unwrap() {
            if let Record::Event(e) = record.unwrap() {
                if e.op == Op::Malloc {
                    out.entry((pid, e.tid, e.size))
                        .or_default()
                        .push(e.stack != 0);
                }
            }
        }
    }
    (reader, out)
}

fn count(v: &[bool]) -> usize {
    v.iter().filter(|s| **s).count()
}

/// The indices of the sampled allocations.
fn indices(v: &[bool]) -> BTreeSet<usize> {
    v.iter()
        .enumerate()
        .filter(|(_, s)| **s)
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn sampled_stacks_follow_the_rate_and_each_thread_and_fork_child_draws_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let exe = testkit::program("sampled");
    let trace = dir.path().join("sampled.alt");
    // R = 16 KiB: a 2 MiB block is sampled with probability 1 - e^-128, a 256-byte one with
    // 1.55 %, a 1000-byte one with 5.9 %.
    record(&trace, &["--stacks", "--stack-sample", "16K"], &[&exe]);
    let (reader, sampled) = sampled(&trace);
    assert_eq!(
        reader.stack_sampling(),
        StackSampling::Bytes { mean_bytes: 16384 }
    );
    assert_eq!(reader.header().stack_sample_bytes, 16384);
    assert_eq!(reader.version(), trace::FORMAT_VERSION);
    let parent = reader.streams()[0].info.pid;
    let main = |size: u64| {
        let mut of_size = sampled.iter().filter(|((_, _, s), _)| *s == size);
        let (_, v) = of_size.next().expect("allocations of the size");
        assert!(of_size.next().is_none(), "{size} bytes: one thread only");
        v
    };
    let big = main(2 << 20);
    assert_eq!((big.len(), count(big)), (300, 300), "every large block");

    // 100,000 draws of p = 1 - exp(-256/16384): mean 1550, sd 39; 6 sd either side.
    let small = main(256);
    assert_eq!(small.len(), 100_000);
    let p = StackSampling::Bytes { mean_bytes: 16384 }.probability(256);
    let (mean, sd) = (1e5 * p, (1e5 * p * (1.0 - p)).sqrt());
    let n = count(small) as f64;
    assert!(
        (n - mean).abs() < 6.0 * sd,
        "{n} of 100,000 small blocks sampled, expected {mean:.0} ± {sd:.0}"
    );

    // Two threads running the same loop at once, and parent and child after fork, must not
    // sample the same allocations: with one generator (or a copied one) their sample points
    // would coincide. Independent draws share about p^2 of the indices (about 70 of 20,000).
    let of_size = |size: u64| -> Vec<(u32, &Vec<bool>)> {
        sampled
            .iter()
            .filter(|((_, _, s), _)| *s == size)
            .map(|((pid, _, _), v)| (*pid, v))
            .collect()
    };
    let (threads, forked) = (of_size(1000), of_size(1002));
    assert_eq!(threads.len(), 2, "two threads");
    assert_eq!(forked.len(), 2, "parent and child");
    assert!(threads.iter().all(|(pid, _)| *pid == parent));
    assert_ne!(forked[0].0, forked[1].0, "parent and child");
    let pairs = [
        ("the two threads", threads[0].1, threads[1].1),
        ("parent and fork child", forked[0].1, forked[1].1),
    ];
    for (what, a, b) in pairs {
        assert_eq!((a.len(), b.len()), (20_000, 20_000), "{what}");
        let (ia, ib) = (indices(a), indices(b));
        let common = ia.intersection(&ib).count();
        let fewer = ia.len().min(ib.len());
        assert!(
            fewer > 800 && common * 4 < fewer,
            "{what}: {} and {} sampled, {common} of them the same allocations",
            ia.len(),
            ib.len()
        );
    }
}

/// `--stacks=all` and `--stack-sample 0` take every allocation's stack, and write no sampling
/// rate (a trace that reads as before sampling); without `--stacks`, no stacks and version 3.
#[test]
fn every_stack_with_stacks_all_and_no_sampling_field() {
    let dir = tempfile::tempdir().unwrap();
    let exe = testkit::program("sampled");
    for options in [&["--stacks=all"][..], &["--stacks", "--stack-sample", "0"]] {
        let trace = dir.path().join("all.alt");
        let _ = std::fs::remove_file(&trace);
        record(&trace, options, &[&exe]);
        let (reader, sampled) = sampled(&trace);
        assert_eq!(reader.stack_sampling(), StackSampling::All, "{options:?}");
        assert_eq!(reader.header().stack_sample_bytes, 0);
        let raw = std::fs::read(&trace).unwrap();
        assert!(
            !String::from_utf8_lossy(&raw[..4096.min(raw.len())]).contains("stack_sample_bytes"),
            "{options:?}: the header names no sampling rate"
        );
        for ((pid, tid, size), v) in &sampled {
            assert_eq!(count(v), v.len(), "{options:?}: {pid}/{tid}, size {size}");
        }
        assert_eq!(
            sampled.values().map(Vec::len).sum::<usize>(),
            300 + 100_000 + 80_000
        );
    }
    let trace = dir.path().join("none.alt");
    record(&trace, &[], &[&exe]);
    let reader = TraceReader::open(&trace).unwrap();
    assert_eq!(reader.stack_sampling(), StackSampling::None);
    assert_eq!(reader.version(), trace::VERSION_WITHOUT_STACKS);
}

/// The default rate is written into the header; bad rates and --free-stacks with sampling are
/// refused in one line before anything runs.
#[test]
fn the_default_rate_is_recorded_and_bad_rates_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("default.alt");
    record(&trace, &["--stacks"], &["true"]);
    let reader = TraceReader::open(&trace).unwrap();
    assert_eq!(
        reader.stack_sampling(),
        StackSampling::Bytes {
            mean_bytes: recorder::DEFAULT_STACK_SAMPLE_BYTES
        }
    );
    for (options, says) in [
        (
            &["--stacks", "--stack-sample", "lots"][..],
            "--stack-sample",
        ),
        (&["--stacks", "--stack-sample=-1"], "--stack-sample"),
        (&["--stacks", "--free-stacks"], "--stacks=all"),
    ] {
        let out = alloclens()
            .args(["record", "-q"])
            .args(options)
            .arg("-o")
            .arg(dir.path().join("refused.alt"))
            .args(["--", "true"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{options:?}: {stderr}");
        assert!(
            stderr.starts_with("alloclens: error: "),
            "{options:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{options:?}: {stderr}");
        assert!(stderr.contains(says), "{options:?}: {stderr}");
        assert!(!dir.path().join("refused.alt").exists(), "{options:?}");
    }
}

/// Every record of every stream.
fn all_records(trace: &Path) -> Vec<Vec<Record>> {
    let mut reader = TraceReader::open(trace).unwrap();
    (0..reader.streams().len())
        .map(|s| reader.records(s).unwrap().map(Result::unwrap).collect())
        .collect()
}

/// A sampled trace cut inside its last events chunk reads up to the chunk before, as any trace
/// does: the records read are the first ones recorded, stack ids included.
#[test]
fn a_cut_sampled_trace_reads_its_whole_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("sampled.alt");
    record(
        &trace,
        &["--stacks", "--stack-sample", "16K"],
        &[&testkit::program("sampled")],
    );
    assert_eq!(
        TraceReader::open(&trace).unwrap().version(),
        trace::FORMAT_VERSION
    );
    let whole = all_records(&trace);
    let bytes = std::fs::read(&trace).unwrap();
    // The last events chunk: kind 2 in its frame (docs/trace-format.md, "Chunks").
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let (mut at, mut last_events) = (20 + u32_at(12), None);
    while at + 24 <= bytes.len() {
        if bytes[at + 4] == 2 {
            last_events = Some((at, u32_at(at + 12)));
        }
        at += 24 + u32_at(at + 12);
    }
    let (at, len) = last_events.unwrap();
    let cut = dir.path().join("cut.alt");
    std::fs::write(&cut, &bytes[..at + 24 + len / 2]).unwrap();
    let reader = TraceReader::open(&cut).unwrap();
    assert!(reader.damage().is_some());
    let part = all_records(&cut);
    let (n_part, n_whole): (usize, usize) = (
        part.iter().map(Vec::len).sum(),
        whole.iter().map(Vec::len).sum(),
    );
    assert!(n_part < n_whole, "{n_part} of {n_whole} records");
    for (p, w) in part.iter().zip(&whole) {
        assert_eq!(p.as_slice(), &w[..p.len()]);
    }
    let sampled = |r: &[Vec<Record>]| {
        r.iter()
            .flatten()
            .filter(|r| matches!(r, Record::Event(e) if e.stack != 0))
            .count()
    };
    assert!(sampled(&part) > 0);
}

/// A sampled trace recorded before version 5 (crates/trace/tests/fixtures: an id per
/// allocation) and the same events written again as version 5 give the same `analyze --sites`.
#[test]
fn sites_of_a_sampled_trace_are_the_same_in_either_form() {
    let old =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace/tests/fixtures/sampled-stacks-v4.alt");
    let reader = TraceReader::open(&old).unwrap();
    assert_eq!(reader.version(), trace::VERSION_WITHOUT_SAMPLED_STACKS);
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("v5.alt");
    let mut w = TraceWriter::new(
        std::fs::File::create(&new).unwrap(),
        &reader.header().clone(),
    )
    .unwrap();
    let stacks: Vec<&[u64]> = reader.stacks().iter().map(|(_, f)| f).collect();
    w.write_stacks(1, stacks.iter().copied()).unwrap();
    w.write_modules(reader.modules()).unwrap();
    for (s, records) in all_records(&old).iter().enumerate() {
        let id = w.begin_process(&reader.streams()[s].info).unwrap();
        w.write_records(id, records, 4000).unwrap();
        w.end_process(id, EndReason::Exit, records.len() as u64)
            .unwrap();
    }
    w.finish(reader.trailer().unwrap()).unwrap();
    assert_eq!(
        TraceReader::open(&new).unwrap().version(),
        trace::FORMAT_VERSION
    );
    let sites = |t: &Path| {
        json_stdout([
            Path::new("analyze"),
            Path::new("--sites"),
            Path::new("--json"),
            t,
        ])
    };
    let (before, after) = (sites(&old), sites(&new));
    assert!(before["processes"][0]["functions"]
        .as_array()
        .is_some_and(|f| !f.is_empty()));
    assert_eq!(before["processes"], after["processes"]);
}
