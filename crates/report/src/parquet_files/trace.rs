//! `alloclens export TRACE --parquet DIR`: the raw events of a trace as DIR/events.parquet, one row per
//! allocator call, streamed chunk by chunk (a trace never has to fit in memory; the live pointers do).
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use analyze::metrics::{SIZE_HISTOGRAMS, TIMELINE_COLUMNS};
use trace::{Losses, Record, TraceReader};

use super::{Column, ColumnType, ParquetError, TableWriter};

/// Rows per row group.
const BATCH: usize = 256 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Trace(#[from] trace::TraceError),
    #[error(transparent)]
    Parquet(#[from] ParquetError),
    #[error("cannot create the directory '{path}': {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What was exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    pub path: PathBuf,
    pub rows: u64,
    /// Marker records are not calls: counted, not exported.
    pub markers_skipped: u64,
    /// What could not be read of the trace (damage, streams stopped at a corrupt chunk, a missing
    /// trailer): said as `analyze` says it.
    pub losses: Losses,
}

#[derive(Default)]
struct Batch {
    pid: Vec<Option<i64>>,
    exec_index: Vec<Option<i64>>,
    tid: Vec<Option<i64>>,
    seq: Vec<Option<i64>>,
    t_ns: Vec<Option<i64>>,
    op: Vec<Option<String>>,
    size: Vec<Option<i64>>,
    addr: Vec<Option<i64>>,
    old_addr: Vec<Option<i64>>,
    lifetime_calls: Vec<Option<i64>>,
    lifetime_ns: Vec<Option<i64>>,
    stack: Vec<Option<i64>>,
}

impl Batch {
    fn len(&self) -> usize {
        self.seq.len()
    }

    fn take(&mut self) -> Vec<Column> {
        let b = std::mem::take(self);
        vec![
            Column::Int64(b.pid),
            Column::Int64(b.exec_index),
            Column::Int64(b.tid),
            Column::Int64(b.seq),
            Column::Int64(b.t_ns),
            Column::Text(b.op),
            Column::Int64(b.size),
            Column::Int64(b.addr),
            Column::Int64(b.old_addr),
            Column::Int64(b.lifetime_calls),
            Column::Int64(b.lifetime_ns),
            Column::Int64(b.stack),
        ]
    }
}

/// Addresses are unsigned 64-bit; Parquet has signed INT64: the bits are kept (read as UINT64 or
/// reinterpret; user-space addresses are below 2^63 on Linux anyway).
fn bits(v: u64) -> i64 {
    v as i64
}

/// Writes DIR/events.parquet from the trace at `path`. A damaged trace exports what is readable, as
/// `analyze` analyses it: every stream up to the damage of the file, or up to its first corrupt chunk;
/// `Exported::losses` says what was lost. The file gets its name only once complete.
pub fn export_events(path: &Path, dir: &Path) -> Result<Exported, ExportError> {
    export_events_with(path, dir, &trace::NoProgress)
}

/// [`export_events`], telling `progress` the records of the trace and each one exported.
pub fn export_events_with(
    path: &Path,
    dir: &Path,
    progress: &dyn trace::Progress,
) -> Result<Exported, ExportError> {
    let mut reader = TraceReader::open(path)?;
    let mut losses = Losses::of(&reader);
    std::fs::create_dir_all(dir).map_err(|source| ExportError::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    let out = dir.join("events.parquet");
    let i64c = |n: &str, null: bool| (n.to_string(), ColumnType::Int64, null);
    let mut writer = TableWriter::create(
        &out,
        vec![
            i64c("pid", false),
            i64c("exec_index", false),
            i64c("tid", false),
            i64c("seq", false),
            i64c("t_ns", false),
            ("op".to_string(), ColumnType::Text, false),
            i64c("size", false),
            i64c("addr", false),
            i64c("old_addr", false),
            i64c("lifetime_calls", true),
            i64c("lifetime_ns", true),
            i64c("stack", true),
        ],
    )?;
    // Stack ids mean something only in a trace recorded with stacks: null otherwise.
    let has_stacks = reader.has_stacks();
    let mut batch = Batch::default();
    let mut markers = 0;
    let streams: Vec<trace::ProcessInfo> =
        reader.streams().iter().map(|s| s.info.clone()).collect();
    progress.start(reader.streams().iter().map(|s| s.records).sum());
    // Told in steps, not per record: a trace has hundreds of millions.
    let mut unreported = 0u64;
    for (s, info) in streams.iter().enumerate() {
        // Pointer -> (seq, t_ns) of the call that returned it, for the lifetime of the call ending it.
        let mut live: HashMap<u64, (u64, u64)> = HashMap::new();
        for (read, record) in reader.records(s)?.enumerate() {
            let record = match record {
                Ok(r) => r,
                // The records before the corrupt chunk are exported; the stream stops there.
                Err(e) => {
                    losses.stream_stopped(info, &e, read as u64);
                    break;
                }
            };
            unreported += 1;
            if unreported == 1 << 16 {
                progress.advance(unreported);
                unreported = 0;
            }
            let e = match record {
                Record::Event(e) => e,
                Record::Marker(_) => {
                    markers += 1;
                    continue;
                }
            };
            let released = if e.op.is_free() {
                Some(e.addr)
            } else if e.op.is_realloc() {
                Some(e.old_addr)
            } else {
                None
            };
            let ended = released.filter(|a| *a != 0).and_then(|a| live.remove(&a));
            let returns = !e.op.is_free() && e.addr != 0;
            if returns {
                live.insert(e.addr, (e.seq, e.t_ns));
            }
            batch.pid.push(Some(i64::from(info.pid)));
            batch.exec_index.push(Some(i64::from(info.exec_index)));
            batch.tid.push(Some(i64::from(e.tid)));
            batch.seq.push(Some(bits(e.seq)));
            batch.t_ns.push(Some(bits(e.t_ns)));
            batch.op.push(Some(e.op.name().to_string()));
            batch.size.push(Some(bits(e.size)));
            batch.addr.push(Some(bits(e.addr)));
            batch.old_addr.push(Some(bits(e.old_addr)));
            batch
                .lifetime_calls
                .push(ended.map(|(seq, _)| bits(e.seq.saturating_sub(seq))));
            batch
                .lifetime_ns
                .push(ended.map(|(_, t)| bits(e.t_ns.saturating_sub(t))));
            batch.stack.push(has_stacks.then_some(i64::from(e.stack)));
            if batch.len() >= BATCH {
                writer.write_batch(&batch.take())?;
            }
        }
    }
    progress.advance(unreported);
    writer.write_batch(&batch.take())?;
    let rows = writer.finish()?;
    Ok(Exported {
        path: out,
        rows,
        markers_skipped: markers,
        losses,
    })
}

/// Writes the analysed timelines and size histograms of a trace as DIR/timeline.parquet and
/// DIR/sizes.parquet (columns in docs/reports.md); returns the files and their row counts.
pub fn write_analysis_parquet(
    analysis: &analyze::Analysis,
    dir: &Path,
) -> Result<Vec<(PathBuf, u64)>, ExportError> {
    std::fs::create_dir_all(dir).map_err(|source| ExportError::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    let int = |n: &str| (n.to_string(), ColumnType::Int64, false);
    let text = |n: &str| (n.to_string(), ColumnType::Text, false);
    let timeline_path = dir.join("timeline.parquet");
    let mut timeline = TableWriter::create(
        &timeline_path,
        [int("pid"), int("exec_index"), text("step_by")]
            .into_iter()
            .chain(TIMELINE_COLUMNS.iter().map(|c| int(c.key)))
            .collect(),
    )?;
    let sizes_path = dir.join("sizes.parquet");
    let mut sizes = TableWriter::create(
        &sizes_path,
        vec![
            int("pid"),
            int("exec_index"),
            text("buckets"),
            int("low"),
            int("high"),
            int("count"),
        ],
    )?;
    for p in &analysis.processes {
        for (by, points) in [
            ("calls", &p.timeline_by_calls),
            ("time", &p.timeline_by_time),
        ] {
            let n = points.len();
            let mut columns = vec![
                Column::Int64(vec![Some(i64::from(p.pid)); n]),
                Column::Int64(vec![Some(i64::from(p.exec_index)); n]),
                Column::Text(vec![Some(by.to_string()); n]),
            ];
            columns.extend(
                TIMELINE_COLUMNS.iter().map(|c| {
                    Column::Int64(points.iter().map(|t| Some(bits((c.value)(t)))).collect())
                }),
            );
            timeline.write_batch(&columns)?;
        }
        for h in SIZE_HISTOGRAMS {
            let (name, buckets) = (h.key, (h.buckets)(&p.stats.sizes));
            let n = buckets.len();
            let col = |f: fn(&analyze::analysis::Bucket) -> u64| {
                Column::Int64(buckets.iter().map(|b| Some(bits(f(b)))).collect())
            };
            sizes.write_batch(&[
                Column::Int64(vec![Some(i64::from(p.pid)); n]),
                Column::Int64(vec![Some(i64::from(p.exec_index)); n]),
                Column::Text(vec![Some(name.to_string()); n]),
                col(|b| b.low),
                col(|b| b.high),
                col(|b| b.count),
            ])?;
        }
    }
    Ok(vec![
        (timeline_path, timeline.finish()?),
        (sizes_path, sizes.finish()?),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use trace::{Event, Op, ProcessInfo, TraceHeader, TraceWriter, Trailer};

    /// The `stack` column of events.parquet for a trace written with or without stacks.
    fn stack_column(stacks: bool) -> Vec<Option<i64>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.alt");
        let header = TraceHeader {
            stacks,
            ..Default::default()
        };
        let mut w = TraceWriter::new(std::fs::File::create(&path).unwrap(), &header).unwrap();
        if stacks {
            w.write_stacks(1, [&[0x1000u64][..], &[0x2000, 0x3000][..]])
                .unwrap();
        }
        let info = ProcessInfo {
            pid: 1,
            ppid: 0,
            exec_index: 0,
            cmdline: vec![],
            start_unix_ns: 0,
            truncated: false,
        };
        let id = w.begin_process(&info).unwrap();
        let ev = |seq, op, addr, stack| {
            Record::Event(Event {
                seq,
                t_ns: seq,
                tid: 1,
                stack,
                op,
                addr,
                size: 8,
                old_addr: 0,
            })
        };
        let records = [
            ev(0, Op::Malloc, 0x10, 2),
            ev(1, Op::Malloc, 0x20, 0),
            ev(2, Op::Free, 0x10, 0),
        ];
        w.write_records(id, &records, 16).unwrap();
        w.end_process(id, trace::EndReason::Exit, 3).unwrap();
        w.finish(&Trailer::default()).unwrap();
        let out = export_events(&path, dir.path()).unwrap();
        let reader = SerializedFileReader::new(std::fs::File::open(out.path).unwrap()).unwrap();
        reader
            .get_row_iter(None)
            .unwrap()
            .map(|row| {
                let row = row.unwrap();
                let (_, value) = row
                    .get_column_iter()
                    .find(|(name, _)| name.as_str() == "stack")
                    .unwrap();
                match value {
                    parquet::record::Field::Long(v) => Some(*v),
                    parquet::record::Field::Null => None,
                    other => panic!("stack is {other:?}"),
                }
            })
            .collect()
    }

    #[test]
    fn events_carry_their_stack_id_when_the_trace_has_stacks() {
        assert_eq!(stack_column(true), [Some(2), Some(0), Some(0)]);
        assert_eq!(stack_column(false), [None, None, None]);
    }
}
