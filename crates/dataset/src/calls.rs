//! A trace as the `calls` table (the columns of `export --parquet` but the two lifetimes, plus
//! `trace_id`), streamed:
//! one thread reads and decodes chunks into a batch of columns, another encodes and compresses the
//! previous batch as a row group, so memory holds three batches at most, whatever the trace's size.
use std::path::Path;
use std::sync::mpsc;

use parquet::data_type::ByteArray;
use trace::{Losses, Record, TraceReader};

use crate::parquet_file::{ColumnData, ColumnSpec, Encode, Kind, ParquetFile, Values};
use crate::table::{Cell, Table};
use crate::DatasetError;

/// Calls per row group: about 20 MiB of column buffers each.
pub const BATCH: usize = 256 * 1024;

/// What a trace gave.
pub struct CallsOutcome {
    pub calls: u64,
    pub markers_skipped: u64,
    /// The loss of a damaged trace, in `analyze`'s words; None when complete.
    pub losses: Option<String>,
    /// The `traces` table's row.
    pub traces: Table,
}

#[derive(Default)]
struct Batch {
    pid: Vec<i64>,
    exec_index: Vec<i64>,
    tid: Vec<i64>,
    seq: Vec<i64>,
    t_ns: Vec<i64>,
    op: Vec<ByteArray>,
    size: Vec<i64>,
    addr: Vec<i64>,
    old_addr: Vec<i64>,
}

impl Batch {
    fn with_capacity(n: usize) -> Batch {
        Batch {
            pid: Vec::with_capacity(n),
            exec_index: Vec::with_capacity(n),
            tid: Vec::with_capacity(n),
            seq: Vec::with_capacity(n),
            t_ns: Vec::with_capacity(n),
            op: Vec::with_capacity(n),
            size: Vec::with_capacity(n),
            addr: Vec::with_capacity(n),
            old_addr: Vec::with_capacity(n),
        }
    }

    fn len(&self) -> usize {
        self.seq.len()
    }

    fn columns(self, trace_id: &ByteArray) -> Vec<ColumnData> {
        let n = self.len();
        let plain = |v: Vec<i64>| ColumnData {
            values: Values::Int64(v),
            defs: None,
        };
        vec![
            plain(self.pid),
            plain(self.exec_index),
            plain(self.tid),
            plain(self.seq),
            plain(self.t_ns),
            ColumnData {
                values: Values::Text(self.op),
                defs: None,
            },
            plain(self.size),
            plain(self.addr),
            plain(self.old_addr),
            ColumnData {
                values: Values::Text(vec![trace_id.clone(); n]),
                defs: None,
            },
        ]
    }
}

fn schema() -> Vec<ColumnSpec> {
    let col = |name: &str, kind, nullable, encode| ColumnSpec {
        name: name.to_string(),
        kind,
        nullable,
        encode,
    };
    use Encode::{Delta, Dictionary};
    use Kind::{Int64, Text};
    vec![
        col("pid", Int64, false, Dictionary),
        col("exec_index", Int64, false, Dictionary),
        col("tid", Int64, false, Dictionary),
        col("seq", Int64, false, Delta),
        col("t_ns", Int64, false, Delta),
        col("op", Text, false, Dictionary),
        col("size", Int64, false, Dictionary),
        col("addr", Int64, false, Delta),
        col("old_addr", Int64, false, Delta),
        col("trace_id", Text, false, Dictionary),
    ]
}

/// Writes the calls of the trace at `trace_path` to `out` (a temporary name until complete). The
/// lifetimes of events.parquet are left out: they are a join of a release to its allocation
/// (docs/dataset.md), and stored they would double the bytes per call.
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
    let write_err = |message: String| DatasetError::Write {
        path: out.to_path_buf(),
        message,
    };
    let mut file = ParquetFile::create(out, "calls", schema()).map_err(write_err)?;
    let id = ByteArray::from(trace_id);
    let streams: Vec<trace::ProcessInfo> =
        reader.streams().iter().map(|s| s.info.clone()).collect();
    let (tx, rx) = mpsc::sync_channel::<Batch>(1);
    let mut markers = 0u64;
    let mut calls = 0u64;
    let mut read_error = None;
    // The writer thread: row groups in order, the first error kept.
    let written = std::thread::scope(|scope| {
        let writer = scope.spawn(|| -> Result<(), String> {
            for batch in rx {
                file.write_group(batch.columns(&id))?;
            }
            Ok(())
        });
        // The op names' bytes, made once: a row only clones a shared buffer.
        let mut ops: Vec<(trace::Op, ByteArray)> = Vec::new();
        let mut batch = Batch::with_capacity(BATCH);
        'streams: for (s, info) in streams.iter().enumerate() {
            let records = match reader.records(s) {
                Ok(r) => r,
                Err(e) => {
                    read_error = Some(trace_err(e));
                    break;
                }
            };
            for (read, record) in records.enumerate() {
                let e = match record {
                    Ok(Record::Event(e)) => e,
                    Ok(Record::Marker(_)) => {
                        markers += 1;
                        continue;
                    }
                    Err(e) => {
                        losses.stream_stopped(info, &e, read as u64);
                        break;
                    }
                };
                let op = match ops.iter().find(|(o, _)| *o == e.op) {
                    Some((_, b)) => b.clone(),
                    None => {
                        let b = ByteArray::from(e.op.name());
                        ops.push((e.op, b.clone()));
                        b
                    }
                };
                batch.pid.push(i64::from(info.pid));
                batch.exec_index.push(i64::from(info.exec_index));
                batch.tid.push(i64::from(e.tid));
                batch.seq.push(e.seq as i64);
                batch.t_ns.push(e.t_ns as i64);
                batch.op.push(op);
                batch.size.push(e.size as i64);
                batch.addr.push(e.addr as i64);
                batch.old_addr.push(e.old_addr as i64);
                calls += 1;
                if batch.len() >= BATCH {
                    let full = std::mem::replace(&mut batch, Batch::with_capacity(BATCH));
                    // The writer stopped: its error is the one to report.
                    if tx.send(full).is_err() {
                        break 'streams;
                    }
                }
            }
        }
        if batch.len() > 0 {
            let _ = tx.send(batch);
        }
        drop(tx);
        writer
            .join()
            .unwrap_or_else(|_| Err("the writing thread panicked".into()))
    });
    if let Some(e) = read_error {
        return Err(e);
    }
    written.map_err(write_err)?;
    file.finish().map_err(write_err)?;
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
            ("markers_skipped", Kind::Int64),
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
            Cell::Int(markers as i64),
            Cell::Int(i64::from(complete)),
        ],
    );
    Ok(CallsOutcome {
        calls,
        markers_skipped: markers,
        losses: losses_text,
        traces,
    })
}
