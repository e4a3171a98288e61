//! Reading a dataset's tables back (duplicate detection, `alloclens report DATASET`, tests): every
//! row of a table's files, with the partition values as columns, as hive readers see them.
use std::fs::File;
use std::path::Path;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

use crate::layout::Dataset;
use crate::table::Cell;
use crate::{DatasetError, SCHEMA_VERSION};

/// Rows of one table: column names (the partition columns last) and cells.
#[derive(Debug, Default)]
pub struct Rows {
    pub names: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

impl Rows {
    pub fn column(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The cell of `name` in row `row` (null when the column is absent).
    pub fn get(&self, row: usize, name: &str) -> &Cell {
        self.column(name)
            .and_then(|i| self.rows[row].get(i))
            .unwrap_or(&Cell::Null)
    }

    pub fn text(&self, row: usize, name: &str) -> Option<&str> {
        match self.get(row, name) {
            Cell::Text(s) => Some(s),
            _ => None,
        }
    }

    pub fn number(&self, row: usize, name: &str) -> Option<f64> {
        match self.get(row, name) {
            Cell::Int(v) => Some(*v as f64),
            Cell::Float(f) => Some(*f),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// Every row of table `kind` (a few thousand per source: not for `calls`, which DuckDB or Spark
/// read). Files of an earlier merge may lack a column: its cells are null.
pub fn read_table(dataset: &Dataset, kind: &str) -> Result<Rows, DatasetError> {
    let mut out = Rows::default();
    for (path, partitions) in dataset.files(kind) {
        let file_rows = read_file(&path)?;
        let mut map: Vec<usize> = Vec::new();
        for name in file_rows
            .names
            .iter()
            .chain(partitions.iter().map(|(k, _)| k))
        {
            let i = out.column(name).unwrap_or_else(|| {
                out.names.push(name.clone());
                out.names.len() - 1
            });
            map.push(i);
        }
        for row in file_rows.rows {
            let mut cells = vec![Cell::Null; out.names.len()];
            let values = row
                .into_iter()
                .chain(partitions.iter().map(|(_, v)| Cell::Text(v.clone())));
            for (cell, &i) in values.zip(&map) {
                cells[i] = cell;
            }
            out.rows.push(cells);
        }
    }
    let width = out.names.len();
    for row in &mut out.rows {
        row.resize(width, Cell::Null);
    }
    Ok(out)
}

/// The rows of one Parquet file, refusing one of a newer dataset schema version.
pub fn read_file(path: &Path) -> Result<Rows, DatasetError> {
    let err = |message: String| DatasetError::Io {
        path: path.to_path_buf(),
        message,
    };
    let file = File::open(path).map_err(|e| err(e.to_string()))?;
    let reader = SerializedFileReader::new(file).map_err(|e| err(e.to_string()))?;
    let meta = reader.metadata().file_metadata();
    let version = meta
        .key_value_metadata()
        .and_then(|kv| {
            kv.iter()
                .find(|k| k.key == "alloclens.dataset.schema_version")
        })
        .and_then(|k| k.value.as_deref())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    if version > u64::from(SCHEMA_VERSION) {
        return Err(DatasetError::NewerDataset {
            path: path.to_path_buf(),
            found: version,
        });
    }
    let names = meta
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let mut rows = Vec::new();
    for row in reader.get_row_iter(None).map_err(|e| err(e.to_string()))? {
        let row = row.map_err(|e| err(e.to_string()))?;
        rows.push(
            row.get_column_iter()
                .map(|(_, f)| match f {
                    Field::Long(v) => Cell::Int(*v),
                    Field::Int(v) => Cell::Int(i64::from(*v)),
                    Field::Double(v) => Cell::Float(*v),
                    Field::Float(v) => Cell::Float(f64::from(*v)),
                    Field::Str(s) => Cell::Text(s.clone()),
                    Field::Bool(b) => Cell::Int(i64::from(*b)),
                    _ => Cell::Null,
                })
                .collect(),
        );
    }
    Ok(Rows { names, rows })
}
