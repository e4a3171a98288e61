//! A trace as the `calls` table (the columns of `export --parquet` but the two lifetimes, plus
//! `trace_id`), streamed: the calling thread reads the trace's chunks and checks their checksums,
//! and writer threads, one per core, each decode whole chunks and encode their calls as row
//! groups of a file of their own. Memory holds, per writer, one decoded chunk and one row group's
//! columns, whatever the trace's size.
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use trace::codec::ChunkDecoder;
use trace::{Losses, Marker, ProcessInfo, RawChunk, Record, TraceError, TraceReader};

use crate::call_columns::{Batch, BatchEncoder};
use crate::parquet_file::{ColumnSpec, Encode, Kind, ParquetFile};
use crate::table::{Cell, Table};
use crate::DatasetError;

/// Calls per row group (DuckDB's own size is 122,880): about 14 MiB of column buffers per writer.
/// A recorder's chunk (2^19 records) makes four.
pub const BATCH: usize = 128 * 1024;
/// What a trace gave.
pub struct CallsOutcome {
    /// The files written: `out` first.
    pub files: Vec<PathBuf>,
    pub calls: u64,
    /// The loss of a damaged trace, in `analyze`'s words; None when complete.
    pub losses: Option<String>,
    /// The `traces` table's row.
    pub traces: Table,
    /// The `trace_markers` table: each marker of each process image, in stream order.
    pub markers_table: Table,
}

pub(crate) fn schema() -> Vec<ColumnSpec> {
    let col = |name: &str, kind, nullable, encode| ColumnSpec {
        name: name.to_string(),
        kind,
        nullable,
        encode,
        statistics: false,
    };
    use Encode::{Delta, Dictionary};
    use Kind::{Int64, Text};
    vec![
        // Constant along a stream: deltas of 0 take no bits, and no value is hashed.
        col("pid", Int64, false, Delta),
        col("exec_index", Int64, false, Delta),
        col("tid", Int64, false, Dictionary),
        col("seq", Int64, false, Delta),
        col("t_ns", Int64, false, Delta),
        col("op", Text, false, Dictionary),
        col("size", Int64, true, Dictionary),
        col("addr", Int64, false, Delta),
        col("old_addr", Int64, false, Delta),
        col("trace_id", Text, false, Dictionary),
    ]
}

/// Writer threads: one per core, each decoding chunks and encoding their calls into its own file
/// (units k, k + W, ...). Decoding and encoding are all but the checksums of the CPU time (under
/// `perf` on a 100 M-call merge), so they are what spreads over the cores.
fn writer_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 8))
}

/// File `k` of a trace's calls: `out` itself, then `STEM-k.parquet` beside it.
fn part_path(out: &Path, k: usize) -> PathBuf {
    if k == 0 {
        return out.to_path_buf();
    }
    let stem = out
        .file_stem()
        .map_or_else(|| "calls".into(), |s| s.to_string_lossy().into_owned());
    out.with_file_name(format!("{stem}-{k}.parquet"))
}

/// Consecutive chunks of the trace, at least a row group's records unless the trace ends: what the
/// reading thread hands one writer. A process's few calls share a unit with the next one's.
struct Unit {
    index: usize,
    /// Each chunk with its stream's index in `TraceReader::streams` and its position there.
    chunks: Vec<(usize, usize, RawChunk)>,
}

/// A chunk whose checksum is right but which does not decode: its stream stops there, as it does
/// for `analyze`. A writer finds it when other writers may have written the stream's later chunks.
struct Undecodable {
    stream: usize,
    position: usize,
    error: TraceError,
}

/// Why one pass over the trace did not finish.
enum Stop {
    /// Chunks that did not decode: the pass is made again, each stream stopping at its own.
    Undecodable(Vec<Undecodable>),
    Failed(DatasetError),
}

/// What one writer made.
struct Written {
    file: Option<ParquetFile>,
    calls: u64,
    /// Each marker with its unit and stream, in the order read.
    markers: Vec<(usize, usize, Marker)>,
}

/// What a pass made: the files still under their temporary names.
struct Pass {
    files: Vec<ParquetFile>,
    calls: u64,
    markers: Vec<(usize, usize, Marker)>,
    losses: Losses,
}

/// Writes the calls of the trace at `trace_path` to `out`, and to `STEM-k.parquet` files beside it
/// when the trace has more row groups than the machine has cores (each under a temporary name
/// until every one is complete). The lifetimes of events.parquet are left out: they are a join of a
/// release to its allocation (docs/dataset.md), and stored they would double the bytes per call.
/// A damaged trace gives what is readable, as `analyze` reads it: each stream up to its first
/// corrupt chunk, the file up to its damage; `CallsOutcome::losses` says what was lost.
pub fn write_calls(
    trace_path: &Path,
    trace_id: &str,
    hostname: &str,
    out: &Path,
) -> Result<CallsOutcome, DatasetError> {
    let trace_err = |e: TraceError| DatasetError::Trace(e.to_string());
    let mut reader = TraceReader::open(trace_path).map_err(trace_err)?;
    let header = reader.header().clone();
    let streams: Vec<ProcessInfo> = reader.streams().iter().map(|s| s.info.clone()).collect();
    // A chunk that passes its checksum and fails to decode is a writer's bug or a forged file:
    // rare enough that the pass is made again rather than every writer waiting on the one before.
    let mut undecodable: Vec<Undecodable> = Vec::new();
    let pass = loop {
        match write_pass(&mut reader, &streams, &undecodable, trace_id, out) {
            Ok(pass) => break pass,
            Err(Stop::Undecodable(found)) => undecodable.extend(found),
            Err(Stop::Failed(e)) => return Err(e),
        }
    };
    let Pass {
        files,
        calls,
        markers,
        losses,
    } = pass;
    // Every file complete: each takes its name; if one cannot, none keeps it.
    let mut done: Vec<std::path::PathBuf> = Vec::new();
    for file in files {
        let path = file.path().to_path_buf();
        if let Err(m) = file.finish() {
            for p in &done {
                let _ = safe_output::remove_written(p);
            }
            return Err(write_err(&path, m));
        }
        done.push(path);
    }
    let markers_table = markers_table(trace_id, &streams, markers);
    let complete = losses.is_complete();
    let losses_text = (!complete).then(|| {
        losses
            .warnings("merged")
            .into_iter()
            .filter(|w| !w.contains("recorder note"))
            .collect::<Vec<_>>()
            .join("; ")
    });
    let mut traces = Table::with_id(
        "traces",
        "trace_id",
        &[
            ("command_line", Kind::Text),
            ("allocator", Kind::Text),
            ("hostname", Kind::Text),
            ("start_unix_ns", Kind::Int64),
            ("calls", Kind::Int64),
            ("markers", Kind::Int64),
            ("complete", Kind::Int64),
        ],
    );
    traces.push(
        trace_id,
        vec![
            Cell::Text(header.command.join(" ")),
            Cell::Text(header.allocator.clone()),
            Cell::Text(hostname.to_string()),
            Cell::Int(header.start_unix_ns as i64),
            Cell::Int(calls as i64),
            Cell::Int(markers_table.rows.len() as i64),
            Cell::Int(i64::from(complete)),
        ],
    );
    Ok(CallsOutcome {
        files: done,
        calls,
        losses: losses_text,
        traces,
        markers_table,
    })
}

fn write_err(path: &Path, message: String) -> DatasetError {
    DatasetError::Write {
        path: path.to_path_buf(),
        message,
    }
}

/// One pass over the trace: this thread reads the chunks (each stream up to its first chunk that
/// cannot be read or is in `undecodable`, as `analyze` stops) into units, which writers decode
/// and encode.
fn write_pass<R: std::io::Read + std::io::Seek>(
    reader: &mut TraceReader<R>,
    streams: &[ProcessInfo],
    undecodable: &[Undecodable],
    trace_id: &str,
    out: &Path,
) -> Result<Pass, Stop> {
    let mut losses = Losses::of(reader);
    // The first file exists even for a trace without calls.
    let first =
        ParquetFile::create(out, "calls", schema()).map_err(|m| Stop::Failed(write_err(out, m)))?;
    let parts = writer_count();
    let mut first = Some(first);
    let results = std::thread::scope(|scope| {
        let (senders, writers): (Vec<_>, Vec<_>) = (0..parts)
            .map(|k| {
                let (tx, rx) = mpsc::sync_channel::<Unit>(1);
                let file = if k == 0 { first.take() } else { None };
                let path = part_path(out, k);
                let writer = scope.spawn(move || write_units(rx, file, path, streams, trace_id));
                (tx, writer)
            })
            .unzip();
        let mut unit = Unit {
            index: 0,
            chunks: Vec::new(),
        };
        let mut unit_records = 0usize;
        'streams: for (s, info) in streams.iter().enumerate() {
            // The first chunk of this stream known not to decode, and why.
            let stop = undecodable
                .iter()
                .filter(|u| u.stream == s)
                .min_by_key(|u| u.position);
            let chunks = reader.streams()[s].chunks.clone();
            let mut records_read = 0u64;
            for (position, chunk) in chunks.iter().enumerate() {
                if let Some(u) = stop.filter(|u| u.position == position) {
                    losses.stream_stopped(info, &u.error, records_read);
                    break;
                }
                let raw = match reader.read_chunk(s, chunk) {
                    Ok(raw) => raw,
                    Err(e) => {
                        losses.stream_stopped(info, &e, records_read);
                        break;
                    }
                };
                records_read += u64::from(chunk.records);
                unit_records += chunk.records as usize;
                unit.chunks.push((s, position, raw));
                if unit_records >= BATCH {
                    let next = Unit {
                        index: unit.index + 1,
                        chunks: Vec::new(),
                    };
                    let full = std::mem::replace(&mut unit, next);
                    unit_records = 0;
                    // A writer stopped: its error is the one to report.
                    if senders[full.index % parts].send(full).is_err() {
                        break 'streams;
                    }
                }
            }
        }
        if !unit.chunks.is_empty() {
            let _ = senders[unit.index % parts].send(unit);
        }
        drop(senders);
        writers
            .into_iter()
            .enumerate()
            .map(|(k, w)| {
                w.join().unwrap_or_else(|_| {
                    Err(Stop::Failed(write_err(
                        &part_path(out, k),
                        "the writing thread panicked".into(),
                    )))
                })
            })
            .collect::<Vec<_>>()
    });
    let mut pass = Pass {
        files: Vec::new(),
        calls: 0,
        markers: Vec::new(),
        losses,
    };
    let mut found = Vec::new();
    let mut failed = None;
    for result in results {
        match result {
            Ok(written) => {
                pass.files.extend(written.file);
                pass.calls += written.calls;
                pass.markers.extend(written.markers);
            }
            Err(Stop::Undecodable(u)) => found.extend(u),
            Err(Stop::Failed(e)) => {
                failed.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failed {
        return Err(Stop::Failed(e));
    }
    if !found.is_empty() {
        return Err(Stop::Undecodable(found));
    }
    Ok(pass)
}

/// One writer: decodes each unit's chunks and writes their calls in row groups of `BATCH` (the
/// last of a unit shorter) to its file, made at its first unit unless given.
fn write_units(
    units: mpsc::Receiver<Unit>,
    mut file: Option<ParquetFile>,
    path: PathBuf,
    streams: &[ProcessInfo],
    trace_id: &str,
) -> Result<Written, Stop> {
    let failed = |m: String| Stop::Failed(write_err(&path, m));
    let mut encoder = BatchEncoder::new().map_err(failed)?;
    let mut decoder = ChunkDecoder::new();
    let mut records = Vec::new();
    let mut batch = Batch::with_capacity(BATCH);
    let mut written = Written {
        file: None,
        calls: 0,
        markers: Vec::new(),
    };
    for unit in units {
        for (s, position, raw) in &unit.chunks {
            if let Err(error) = raw.decode_into(&mut decoder, &mut records) {
                return Err(Stop::Undecodable(vec![Undecodable {
                    stream: *s,
                    position: *position,
                    error,
                }]));
            }
            let info = &streams[*s];
            for record in records.drain(..) {
                match record {
                    Record::Event(e) => batch.push(info.pid, info.exec_index, &e),
                    Record::Marker(m) => written.markers.push((unit.index, *s, *m)),
                }
                if batch.len() >= BATCH {
                    append(&mut file, &path, &mut encoder, &mut batch, trace_id)?;
                    written.calls += BATCH as u64;
                }
            }
        }
        written.calls += batch.len() as u64;
        append(&mut file, &path, &mut encoder, &mut batch, trace_id)?;
    }
    written.file = file;
    Ok(written)
}

/// Encodes `batch` (unless empty) as the next row group of the file at `path`, creating it first
/// when needed, and empties it.
fn append(
    file: &mut Option<ParquetFile>,
    path: &Path,
    encoder: &mut BatchEncoder,
    batch: &mut Batch,
    trace_id: &str,
) -> Result<(), Stop> {
    if batch.is_empty() {
        return Ok(());
    }
    let failed = |m: String| Stop::Failed(write_err(path, m));
    let f = match file {
        Some(f) => f,
        None => file.insert(ParquetFile::create(path, "calls", schema()).map_err(failed)?),
    };
    let columns = f.columns().map_err(failed)?;
    let chunks = encoder
        .encode(batch, &columns, trace_id.as_bytes())
        .map_err(failed)?;
    f.append_group(chunks, batch.len() as u64).map_err(failed)?;
    batch.clear();
    Ok(())
}

/// The `trace_markers` table: the markers in the trace's order (units in order, each unit's in
/// its order), numbered within each stream.
fn markers_table(
    trace_id: &str,
    streams: &[ProcessInfo],
    mut markers: Vec<(usize, usize, Marker)>,
) -> Table {
    // Stable: one unit's markers are all from one writer, in the order it read them.
    markers.sort_by_key(|&(unit, _, _)| unit);
    let mut table = Table::with_id(
        "trace_markers",
        "trace_id",
        &[
            ("pid", Kind::Int64),
            ("exec_index", Kind::Int64),
            ("marker_index", Kind::Int64),
            ("seq", Kind::Int64),
            ("t_ns", Kind::Int64),
            ("tid", Kind::Int64),
            ("label", Kind::Text),
        ],
    );
    let mut per_stream = vec![0i64; streams.len()];
    for (_, s, m) in markers {
        let info = &streams[s];
        table.push(
            trace_id,
            vec![
                Cell::Int(i64::from(info.pid)),
                Cell::Int(i64::from(info.exec_index)),
                Cell::Int(per_stream[s]),
                Cell::Int(m.seq as i64),
                Cell::Int(m.t_ns as i64),
                Cell::Int(i64::from(m.tid)),
                Cell::Text(m.label),
            ],
        );
        per_stream[s] += 1;
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::format::CHUNK_FRAME_LEN;
    use trace::{Event, Op};

    /// A stream of `n` records: mallocs and their frees on three threads, a marker every 997.
    fn stream(pid: u32, n: usize) -> (ProcessInfo, Vec<Record>) {
        let info = ProcessInfo {
            pid,
            ppid: 1,
            exec_index: pid % 2,
            cmdline: vec!["prog".into()],
            start_unix_ns: 1,
            truncated: false,
        };
        let mut records = Vec::with_capacity(n);
        let mut seq = 0u64;
        for i in 0..n {
            let tid = pid * 10 + (i as u32 / 100) % 3;
            if i % 997 == 500 {
                records.push(Record::Marker(Box::new(Marker {
                    seq,
                    t_ns: seq * 7,
                    tid,
                    label: format!("phase {i}"),
                })));
                continue;
            }
            let block = 0x7000_0000u64 + (seq / 2) * 64;
            let (op, size) = if seq.is_multiple_of(2) {
                (Op::Malloc, 16 + (seq % 40) * 8)
            } else {
                (Op::Free, 0)
            };
            records.push(Record::Event(Event {
                seq,
                t_ns: seq * 7,
                tid,
                stack: 0,
                op,
                addr: block,
                size,
                old_addr: 0,
            }));
            seq += 1;
        }
        (info, records)
    }

    /// Rewrites the payload of chunk `position` of stream `s` with `damage`, then, when
    /// `fix_checksum`, its frame's checksum (the chunk then passes it and fails to decode).
    fn damage_chunk(
        bytes: &mut [u8],
        s: usize,
        position: usize,
        fix_checksum: bool,
        damage: impl Fn(&mut [u8]),
    ) {
        let reader = TraceReader::from_reader(std::io::Cursor::new(&*bytes), "t.alt").unwrap();
        let at = reader.streams()[s].chunks[position].offset as usize;
        let frame: [u8; CHUNK_FRAME_LEN] = bytes[at..at + CHUNK_FRAME_LEN].try_into().unwrap();
        let len = u32::from_le_bytes(frame[12..16].try_into().unwrap()) as usize;
        let payload = at + CHUNK_FRAME_LEN..at + CHUNK_FRAME_LEN + len;
        damage(&mut bytes[payload.clone()]);
        if fix_checksum {
            let mut h = crc32fast::Hasher::new();
            h.update(&frame[4..20]);
            h.update(&bytes[payload]);
            bytes[at + 20..at + 24].copy_from_slice(&h.finalize().to_le_bytes());
        }
    }

    /// A call as compared: pid, seq, address. A marker: pid, seq, label.
    type Call = (i64, i64, i64);
    type MarkerRow = (i64, i64, String);

    /// What `analyze`'s way of reading gives: each stream's records up to its first error, and the
    /// losses said the way `write_calls` says them.
    fn read_serially(path: &Path) -> (Vec<Call>, Vec<MarkerRow>, String) {
        let mut reader = TraceReader::open(path).unwrap();
        let mut losses = Losses::of(&reader);
        let (mut calls, mut markers) = (Vec::new(), Vec::new());
        for s in 0..reader.streams().len() {
            let info = reader.streams()[s].info.clone();
            for (read, record) in reader.records(s).unwrap().enumerate() {
                match record {
                    Ok(Record::Event(e)) => {
                        calls.push((i64::from(info.pid), e.seq as i64, e.addr as i64))
                    }
                    Ok(Record::Marker(m)) => {
                        markers.push((i64::from(info.pid), m.seq as i64, m.label))
                    }
                    Err(e) => {
                        losses.stream_stopped(&info, &e, read as u64);
                        break;
                    }
                }
            }
        }
        let said = losses
            .warnings("merged")
            .into_iter()
            .filter(|w| !w.contains("recorder note"))
            .collect::<Vec<_>>()
            .join("; ");
        (calls, markers, said)
    }

    /// A trace of three processes in chunks of 40,000 records (several units, so several writers
    /// when the machine has cores), one chunk with a wrong checksum and, in another stream, one
    /// that passes its checksum but does not decode: the table holds what `analyze` reads, row
    /// for row, and the losses say the same.
    #[test]
    fn streams_stop_where_analyze_stops_however_the_chunks_are_shared_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.alt");
        let mut file = testkit::TraceFile::new().chunk_records(40_000);
        let mut events = 0;
        for (pid, n) in [(11, 600_000), (12, 100), (13, 300_000)] {
            let (info, records) = stream(pid, n);
            events += records
                .iter()
                .filter(|r| matches!(r, Record::Event(_)))
                .count();
            file = file.process(info, records);
        }
        file.write(&path);
        let mut bytes = std::fs::read(&path).unwrap();
        let clean = bytes.clone();
        // Stream 0, chunk 5: a flipped byte. Stream 2, chunk 3: a declared size one larger,
        // checksum made right.
        damage_chunk(&mut bytes, 0, 5, false, |p| p[p.len() / 2] ^= 0x40);
        damage_chunk(&mut bytes, 2, 3, true, |p| p[0] = p[0].wrapping_add(1));
        for (name, trace) in [("clean", &clean), ("damaged", &bytes)] {
            std::fs::write(&path, trace).unwrap();
            let (mut calls, markers, said) = read_serially(&path);
            let out = dir.path().join(format!("{name}.parquet"));
            let outcome = write_calls(&path, "t1", "host", &out).unwrap();
            let mut merged = Vec::new();
            for file in &outcome.files {
                let rows = crate::read::read_file(file).unwrap();
                for i in 0..rows.len() {
                    let int = |c: &str| match rows.get(i, c) {
                        Cell::Int(v) => *v,
                        other => panic!("{c}: {other:?}"),
                    };
                    merged.push((int("pid"), int("seq"), int("addr")));
                }
            }
            merged.sort_unstable();
            calls.sort_unstable();
            assert_eq!(outcome.calls as usize, calls.len(), "{name}");
            assert_eq!(merged.len(), calls.len(), "{name}");
            assert!(merged == calls, "{name}: the rows differ from analyze's");
            let table: Vec<_> = outcome
                .markers_table
                .rows
                .iter()
                .map(|r| match (&r[1], &r[4], &r[7]) {
                    (Cell::Int(pid), Cell::Int(seq), Cell::Text(label)) => {
                        (*pid, *seq, label.clone())
                    }
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(table, markers, "{name}");
            match name {
                "clean" => {
                    assert_eq!(outcome.losses, None);
                    assert_eq!(calls.len(), events);
                }
                _ => {
                    assert_eq!(outcome.losses.as_deref(), Some(said.as_str()));
                    assert!(said.contains("checksum mismatch"), "{said}");
                    assert!(said.contains("decompressed size differs"), "{said}");
                    // Stream 0 keeps its first 5 chunks, stream 2 its first 3.
                    let kept = |pid: i64| calls.iter().filter(|c| c.0 == pid).count();
                    assert!(kept(11) > 0 && kept(11) < 200_000, "{}", kept(11));
                    assert!(kept(13) > 0 && kept(13) < 120_000, "{}", kept(13));
                }
            }
        }
    }
}
