//! The small tables (everything but `calls`): rows of cells built from results.json, watch.json and
//! the CSV files, each column of a declared type, written as one Parquet file per source.
use std::path::Path;

use parquet::data_type::ByteArray;
use serde_json::Value;

use crate::parquet_file::{ColumnData, ColumnSpec, Kind, ParquetFile, Values};

/// Rows per row group of a small table.
const GROUP: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
}

impl Cell {
    /// A JSON value as a cell of `kind`: numbers and booleans (1/0) as numbers, objects and arrays as
    /// their JSON text; a value that does not fit is null.
    pub fn from_json(v: Option<&Value>, kind: Kind) -> Cell {
        let Some(v) = v else { return Cell::Null };
        match (kind, v) {
            (_, Value::Null) => Cell::Null,
            (Kind::Int64, Value::Number(n)) => n
                .as_i64()
                .or_else(|| n.as_u64().map(|u| u as i64))
                .or_else(|| n.as_f64().map(|f| f.round() as i64))
                .map_or(Cell::Null, Cell::Int),
            (Kind::Int64, Value::Bool(b)) => Cell::Int(i64::from(*b)),
            (Kind::Double, Value::Number(n)) => n.as_f64().map_or(Cell::Null, Cell::Float),
            (Kind::Text, Value::String(s)) => Cell::Text(s.clone()),
            (Kind::Text, other) => Cell::Text(other.to_string()),
            _ => Cell::Null,
        }
    }

    /// A CSV field as a cell of `kind`: empty is null; a number column's field that is not a number
    /// is null (booleans `true`/`false` are 1/0).
    pub fn from_csv(field: Option<&str>, kind: Kind) -> Cell {
        let Some(f) = field.filter(|f| !f.is_empty()) else {
            return Cell::Null;
        };
        match kind {
            Kind::Text => Cell::Text(f.to_string()),
            Kind::Int64 => match f {
                "true" => Cell::Int(1),
                "false" => Cell::Int(0),
                _ => f
                    .parse::<i64>()
                    .ok()
                    .or_else(|| f.parse::<f64>().ok().map(|x| x.round() as i64))
                    .map_or(Cell::Null, Cell::Int),
            },
            Kind::Double => f.parse().map_or(Cell::Null, Cell::Float),
        }
    }
}

/// A table of one source, in memory (results tables are small: a run of samples.csv is thousands
/// of rows, not millions).
pub struct Table {
    pub kind: &'static str,
    pub columns: Vec<ColumnSpec>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    /// A table whose first column is `source_id`, then `columns`.
    pub fn new(kind: &'static str, columns: &[(&str, Kind)]) -> Table {
        Table::with_id(kind, "source_id", columns)
    }

    /// A table whose first column, the source's id, is named `id` (`trace_id` in `traces`).
    pub fn with_id(kind: &'static str, id: &str, columns: &[(&str, Kind)]) -> Table {
        let mut specs = vec![ColumnSpec::new(id, Kind::Text)];
        specs.extend(columns.iter().map(|(n, k)| ColumnSpec::new(n, *k)));
        Table {
            kind,
            columns: specs,
            rows: Vec::new(),
        }
    }

    /// Adds a row: the source id, then the cells of the other columns.
    pub fn push(&mut self, source_id: &str, cells: Vec<Cell>) {
        let mut row = Vec::with_capacity(cells.len() + 1);
        row.push(Cell::Text(source_id.to_string()));
        row.extend(cells);
        self.rows.push(row);
    }

    /// Writes the table to `path` (temporary name, renamed when complete); returns its rows.
    pub fn write(&self, path: &Path) -> Result<u64, String> {
        let mut file = ParquetFile::create(path, self.kind, self.columns.clone())?;
        for group in self.rows.chunks(GROUP) {
            let columns = self
                .columns
                .iter()
                .enumerate()
                .map(|(i, spec)| Ok(column(group, i, spec.kind)));
            file.write_group(columns)?;
        }
        file.finish()
    }
}

fn column(rows: &[Vec<Cell>], i: usize, kind: Kind) -> ColumnData {
    let mut defs = Vec::with_capacity(rows.len());
    let mut ints = Vec::new();
    let mut floats = Vec::new();
    let mut texts = Vec::new();
    for row in rows {
        match (kind, row.get(i).unwrap_or(&Cell::Null)) {
            (Kind::Int64, Cell::Int(v)) => ints.push(*v),
            (Kind::Int64, Cell::Float(f)) => ints.push(f.round() as i64),
            (Kind::Double, Cell::Float(f)) => floats.push(*f),
            (Kind::Double, Cell::Int(v)) => floats.push(*v as f64),
            (Kind::Text, Cell::Text(s)) => texts.push(ByteArray::from(s.as_str())),
            // A cell of another type than its column's (never built so): null.
            _ => {
                defs.push(0);
                continue;
            }
        }
        defs.push(1);
    }
    let values = match kind {
        Kind::Int64 => Values::Int64(ints),
        Kind::Double => Values::Double(floats),
        Kind::Text => Values::Text(texts),
    };
    ColumnData {
        values,
        defs: Some(defs),
    }
}
