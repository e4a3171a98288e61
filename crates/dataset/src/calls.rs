//! A trace as the `calls` table (the columns of `export --parquet` but the two lifetimes, plus
//! `trace_id`), streamed:
//! one thread reads and decodes chunks into a batch of columns, another encodes and compresses the
//! previous batch as a row group, so memory holds three batches at most, whatever the trace's size.
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use trace::{Losses, Record, TraceReader};

use crate::call_columns::{Batch, BatchEncoder};
use crate::parquet_file::{ColumnSpec, Encode, Kind, ParquetFile};
use crate::table::{Cell, Table};
use crate::DatasetError;

/// Calls per row group (DuckDB's own size is 122,880): about 14 MiB of column buffers, of which
/// each writer holds two and the reader one.
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

/// Writer threads: one per core, each encoding its own file of the trace's calls (row groups k,
/// k + W, ...). Encoding takes three quarters of the CPU time (the parquet crate's dictionary and
/// delta encoders, under `perf` on a 20 M-call merge), so it is what spreads over the cores; the
/// reader is one more thread.
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
    let trace_err = |e: trace::TraceError| DatasetError::Trace(e.to_string());
    let mut reader = TraceReader::open(trace_path).map_err(trace_err)?;
    let mut losses = Losses::of(&reader);
    let header = reader.header().clone();
    let write_err = |path: &Path, message: String| DatasetError::Write {
        path: path.to_path_buf(),
        message,
    };
    // The first file exists even for a trace without calls.
    let first = ParquetFile::create(out, "calls", schema()).map_err(|m| write_err(out, m))?;
    let streams: Vec<trace::ProcessInfo> =
        reader.streams().iter().map(|s| s.info.clone()).collect();
    let mut markers_table = Table::with_id(
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
    let mut calls = 0u64;
    let mut read_error = None;
    let parts = writer_count();
    let mut first = Some(first);
    let written = std::thread::scope(|scope| {
        // Each writer: its row groups in order into its file (made at its first batch), the first
        // error kept.
        let (senders, writers): (Vec<_>, Vec<_>) = (0..parts)
            .map(|k| {
                let (tx, rx) = mpsc::sync_channel::<Batch>(1);
                let mut file = if k == 0 { first.take() } else { None };
                let writer = scope.spawn(move || -> Result<Option<ParquetFile>, DatasetError> {
                    let path = part_path(out, k);
                    let mut encoder = BatchEncoder::new().map_err(|m| write_err(&path, m))?;
                    for batch in rx {
                        let f = match &mut file {
                            Some(f) => f,
                            None => file.insert(
                                ParquetFile::create(&path, "calls", schema())
                                    .map_err(|m| write_err(&path, m))?,
                            ),
                        };
                        let columns = f.columns().map_err(|m| write_err(&path, m))?;
                        let chunks = encoder
                            .encode(&batch, &columns, trace_id.as_bytes())
                            .map_err(|m| write_err(&path, m))?;
                        f.append_group(chunks, batch.len() as u64)
                            .map_err(|m| write_err(&path, m))?;
                    }
                    Ok(file)
                });
                (tx, writer)
            })
            .unzip();
        let mut batches = 0usize;
        let mut batch = Batch::with_capacity(BATCH);
        'streams: for (s, info) in streams.iter().enumerate() {
            let records = match reader.records(s) {
                Ok(r) => r,
                Err(e) => {
                    read_error = Some(trace_err(e));
                    break;
                }
            };
            let mut stream_markers = 0i64;
            for (read, record) in records.enumerate() {
                let e = match record {
                    Ok(Record::Event(e)) => e,
                    Ok(Record::Marker(m)) => {
                        markers_table.push(
                            trace_id,
                            vec![
                                Cell::Int(i64::from(info.pid)),
                                Cell::Int(i64::from(info.exec_index)),
                                Cell::Int(stream_markers),
                                Cell::Int(m.seq as i64),
                                Cell::Int(m.t_ns as i64),
                                Cell::Int(i64::from(m.tid)),
                                Cell::Text(m.label.clone()),
                            ],
                        );
                        stream_markers += 1;
                        continue;
                    }
                    Err(e) => {
                        losses.stream_stopped(info, &e, read as u64);
                        break;
                    }
                };
                batch.push(info.pid, info.exec_index, &e);
                calls += 1;
                if batch.len() >= BATCH {
                    let full = std::mem::replace(&mut batch, Batch::with_capacity(BATCH));
                    // A writer stopped: its error is the one to report.
                    if senders[batches % parts].send(full).is_err() {
                        break 'streams;
                    }
                    batches += 1;
                }
            }
        }
        if !batch.is_empty() {
            let _ = senders[batches % parts].send(batch);
        }
        drop(senders);
        let mut files = Vec::new();
        let mut first_error = None;
        for (k, writer) in writers.into_iter().enumerate() {
            match writer.join() {
                Ok(Ok(file)) => files.extend(file),
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert(write_err(
                        &part_path(out, k),
                        "the writing thread panicked".into(),
                    ));
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(files),
        }
    });
    if let Some(e) = read_error {
        return Err(e);
    }
    // Every file complete: each takes its name; if one cannot, none keeps it.
    let mut done = Vec::new();
    for file in written? {
        let path = file.path().to_path_buf();
        if let Err(m) = file.finish() {
            for p in &done {
                let _ = std::fs::remove_file(p);
            }
            return Err(write_err(&path, m));
        }
        done.push(path);
    }
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
