//! samples.csv and markers.csv of a results directory as Parquet (same columns, typed; see
//! docs/reports.md), for pandas, polars, DuckDB or Spark.
use std::path::{Path, PathBuf};

use runner::results_dir::SampleRow;
use runner::RunRecord;

use super::{Column, ColumnType, ParquetError, Schema, TableWriter};
use crate::run_data::RunData;

/// Rows per row group.
const BATCH: usize = 64 * 1024;

/// Writes DIR/samples.parquet and DIR/markers.parquet (DIR created if needed); returns the files and
/// their row counts.
pub fn write_run_parquet(data: &RunData, dir: &Path) -> Result<Vec<(PathBuf, u64)>, ParquetError> {
    std::fs::create_dir_all(dir).map_err(|e| ParquetError::Write {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(vec![samples(data, dir)?, markers(data, dir)?])
}

fn param_names(data: &RunData) -> Vec<String> {
    data.results.params.iter().map(|p| p.name.clone()).collect()
}

/// The run columns, then `extra`, then one `param_NAME` column per parameter.
fn table_schema(extra: &[(&str, ColumnType, bool)], params: &[String]) -> Schema {
    let mut schema = run_schema();
    schema.extend(extra.iter().map(|(n, t, null)| (n.to_string(), *t, *null)));
    schema.extend(
        params
            .iter()
            .map(|n| (format!("param_{n}"), ColumnType::Text, true)),
    );
    schema
}

/// The columns every row of a run carries: run, variant, repeat, time.
fn run_schema() -> Schema {
    vec![
        ("run".into(), ColumnType::Int64, false),
        ("variant".into(), ColumnType::Text, false),
        ("repeat".into(), ColumnType::Int64, false),
        ("t_s".into(), ColumnType::Double, false),
    ]
}

struct RunColumns {
    run: Vec<Option<i64>>,
    variant: Vec<Option<String>>,
    repeat: Vec<Option<i64>>,
    t_s: Vec<Option<f64>>,
    params: Vec<Vec<Option<String>>>,
}

impl RunColumns {
    fn new(params: usize) -> RunColumns {
        RunColumns {
            run: Vec::new(),
            variant: Vec::new(),
            repeat: Vec::new(),
            t_s: Vec::new(),
            params: vec![Vec::new(); params],
        }
    }

    fn push(&mut self, index: usize, run: Option<&RunRecord>, t_s: f64, names: &[String]) {
        self.run.push(Some(index as i64));
        self.variant
            .push(Some(run.map(|r| r.variant.clone()).unwrap_or_default()));
        self.repeat.push(Some(run.map_or(0, |r| r.repeat as i64)));
        self.t_s.push(Some(t_s));
        for (col, name) in self.params.iter_mut().zip(names) {
            col.push(run.and_then(|r| r.params.get(name).cloned()));
        }
    }

    fn take_front(&mut self) -> Vec<Column> {
        vec![
            Column::Int64(std::mem::take(&mut self.run)),
            Column::Text(std::mem::take(&mut self.variant)),
            Column::Int64(std::mem::take(&mut self.repeat)),
            Column::Double(std::mem::take(&mut self.t_s)),
        ]
    }

    fn take_params(&mut self) -> Vec<Column> {
        self.params
            .iter_mut()
            .map(|c| Column::Text(std::mem::take(c)))
            .collect()
    }
}

fn samples(data: &RunData, dir: &Path) -> Result<(PathBuf, u64), ParquetError> {
    let path = dir.join("samples.parquet");
    let names = param_names(data);
    let schema = table_schema(
        &[
            ("kind", ColumnType::Text, false),
            ("label", ColumnType::Text, true),
            ("scope", ColumnType::Text, false),
            ("pid", ColumnType::Int64, true),
            ("ppid", ColumnType::Int64, true),
            ("comm", ColumnType::Text, true),
            ("rss", ColumnType::Int64, false),
            ("pss", ColumnType::Int64, false),
            ("uss", ColumnType::Int64, false),
            ("vss", ColumnType::Int64, false),
            ("swap", ColumnType::Int64, false),
            ("anon", ColumnType::Int64, false),
        ],
        &names,
    );
    let mut writer = TableWriter::create(&path, schema)?;
    for chunk in data.samples.chunks(BATCH) {
        let mut base = RunColumns::new(names.len());
        for s in chunk {
            base.push(s.run, data.run(s.run), s.t_s, &names);
        }
        let text =
            |f: &dyn Fn(&SampleRow) -> Option<String>| Column::Text(chunk.iter().map(f).collect());
        let int =
            |f: &dyn Fn(&SampleRow) -> Option<i64>| Column::Int64(chunk.iter().map(f).collect());
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let mut columns = base.take_front();
        columns.extend([
            text(&|s| Some(s.kind.clone())),
            text(&|s| non_empty(&s.label)),
            text(&|s| Some(if s.pid.is_some() { "process" } else { "total" }.to_string())),
            int(&|s| s.pid.map(i64::from)),
            int(&|s| s.ppid.map(i64::from)),
            text(&|s| non_empty(&s.comm)),
            int(&|s| Some(s.rss as i64)),
            int(&|s| Some(s.pss as i64)),
            int(&|s| Some(s.uss as i64)),
            int(&|s| Some(s.vss as i64)),
            int(&|s| Some(s.swap as i64)),
            int(&|s| Some(s.anon as i64)),
        ]);
        columns.extend(base.take_params());
        writer.write_batch(&columns)?;
    }
    Ok((path, writer.finish()?))
}

fn markers(data: &RunData, dir: &Path) -> Result<(PathBuf, u64), ParquetError> {
    let path = dir.join("markers.parquet");
    let names = param_names(data);
    let schema = table_schema(
        &[
            ("label", ColumnType::Text, false),
            ("pss", ColumnType::Int64, true),
            ("rss", ColumnType::Int64, true),
            ("vss", ColumnType::Int64, true),
            ("line", ColumnType::Text, false),
        ],
        &names,
    );
    let mut writer = TableWriter::create(&path, schema)?;
    for chunk in data.markers.chunks(BATCH) {
        let mut base = RunColumns::new(names.len());
        for m in chunk {
            base.push(m.run, data.run(m.run), m.t_s, &names);
        }
        let mut columns = base.take_front();
        let opt = |v: Option<u64>| v.map(|v| v as i64);
        columns.extend([
            Column::Text(chunk.iter().map(|m| Some(m.label.clone())).collect()),
            Column::Int64(chunk.iter().map(|m| opt(m.pss)).collect()),
            Column::Int64(chunk.iter().map(|m| opt(m.rss)).collect()),
            Column::Int64(chunk.iter().map(|m| opt(m.vss)).collect()),
            Column::Text(chunk.iter().map(|m| Some(m.line.clone())).collect()),
        ]);
        columns.extend(base.take_params());
        writer.write_batch(&columns)?;
    }
    Ok((path, writer.finish()?))
}
