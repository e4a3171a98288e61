//! The Parquet tables of `export --parquet`: rows arrive in batches of optional values, each batch
//! one row group, so a table far larger than memory is written batch by batch. The file itself
//! (schema, temporary name, footer, rename) is `dataset::parquet_file::ParquetFile`, the one
//! Parquet writer of alloclens. The tables of a run (`run`) and of a trace (`trace`) are written
//! with it.
pub(crate) mod run;
pub(crate) mod trace;

use std::fs::File;
use std::path::{Path, PathBuf};

use dataset::parquet_file::{ColumnData, ColumnSpec, Kind, ParquetFile, Values};
use parquet::data_type::ByteArray;
use parquet::file::reader::{FileReader, SerializedFileReader};

#[derive(Debug, thiserror::Error)]
pub enum ParquetError {
    #[error("cannot write Parquet file '{path}': {message}")]
    Write { path: PathBuf, message: String },
    #[error("cannot read Parquet file '{path}': {message}")]
    Read { path: PathBuf, message: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Int64,
    Double,
    /// UTF-8 text.
    Text,
}

/// Column definitions: name, type, nullable.
pub type Schema = Vec<(String, ColumnType, bool)>;

/// One batch of one column; None is a null (only in nullable columns).
#[derive(Debug, Clone)]
pub enum Column {
    Int64(Vec<Option<i64>>),
    Double(Vec<Option<f64>>),
    Text(Vec<Option<String>>),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::Int64(v) => v.len(),
            Column::Double(v) => v.len(),
            Column::Text(v) => v.len(),
        }
    }
}

/// Writes one Parquet file: a failure or an interruption never leaves a file without its footer
/// under its name, and a writer dropped unfinished removes its partial file (`ParquetFile`).
pub struct TableWriter {
    file: ParquetFile,
    schema: Schema,
}

impl TableWriter {
    pub fn create(path: &Path, schema: Schema) -> Result<TableWriter, ParquetError> {
        let specs = schema
            .iter()
            .map(|(name, kind, nullable)| ColumnSpec {
                nullable: *nullable,
                ..ColumnSpec::new(
                    name,
                    match kind {
                        ColumnType::Int64 => Kind::Int64,
                        ColumnType::Double => Kind::Double,
                        ColumnType::Text => Kind::Text,
                    },
                )
            })
            .collect();
        let file =
            ParquetFile::create_export(path, specs).map_err(|message| ParquetError::Write {
                path: path.to_path_buf(),
                message,
            })?;
        Ok(TableWriter { file, schema })
    }

    fn error(&self, message: String) -> ParquetError {
        ParquetError::Write {
            path: self.file.path().to_path_buf(),
            message,
        }
    }

    /// Writes one row group: one `Column` per schema entry, in order, all of the same length.
    pub fn write_batch(&mut self, columns: &[Column]) -> Result<(), ParquetError> {
        if columns.len() != self.schema.len() {
            return Err(self.error(format!(
                "batch has {} columns, the schema {}",
                columns.len(),
                self.schema.len()
            )));
        }
        let rows = columns.first().map_or(0, Column::len);
        if rows == 0 {
            return Ok(());
        }
        if columns.iter().any(|c| c.len() != rows) {
            return Err(self.error("columns of a batch differ in length".into()));
        }
        // Column by column: one column's values and levels in memory at a time.
        let data = columns
            .iter()
            .zip(&self.schema)
            .map(|(column, (name, _, nullable))| {
                let (values, present) = match column {
                    Column::Int64(v) => (
                        Values::Int64(v.iter().flatten().copied().collect()),
                        v.iter().map(Option::is_some).collect::<Vec<_>>(),
                    ),
                    Column::Double(v) => (
                        Values::Double(v.iter().flatten().copied().collect()),
                        v.iter().map(Option::is_some).collect(),
                    ),
                    Column::Text(v) => (
                        Values::Text(
                            v.iter()
                                .flatten()
                                .map(|s| ByteArray::from(s.as_str()))
                                .collect(),
                        ),
                        v.iter().map(Option::is_some).collect(),
                    ),
                };
                let defs = if *nullable {
                    Some(present.iter().map(|&p| i16::from(p)).collect())
                } else if present.iter().all(|&p| p) {
                    None
                } else {
                    return Err(format!("null in the required column {name}"));
                };
                Ok(ColumnData { values, defs })
            });
        let path = self.file.path().to_path_buf();
        self.file
            .write_group(data)
            .map_err(|message| ParquetError::Write { path, message })
    }

    /// Finishes the file (writes the footer) and gives it its name; returns the number of rows.
    pub fn finish(self) -> Result<u64, ParquetError> {
        let path = self.file.path().to_path_buf();
        self.file
            .finish()
            .map_err(|message| ParquetError::Write { path, message })
    }
}

/// Rows and column names of a Parquet file, read from its footer (used by tests and `diff`).
pub fn describe(path: &Path) -> Result<(i64, Vec<String>), ParquetError> {
    let err = |message: String| ParquetError::Read {
        path: path.to_path_buf(),
        message,
    };
    let file = File::open(path).map_err(|e| err(e.to_string()))?;
    let reader = SerializedFileReader::new(file).map_err(|e| err(e.to_string()))?;
    let meta = reader.metadata().file_metadata();
    let names = meta
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    Ok((meta.num_rows(), names))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_become_row_groups_and_nulls_survive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let schema = vec![
            ("n".to_string(), ColumnType::Int64, false),
            ("x".to_string(), ColumnType::Double, true),
            ("s".to_string(), ColumnType::Text, true),
        ];
        let mut w = TableWriter::create(&path, schema).unwrap();
        for batch in 0..3 {
            w.write_batch(&[
                Column::Int64((0..10).map(|i| Some(batch * 10 + i)).collect()),
                Column::Double((0..10).map(|i| (i % 2 == 0).then_some(i as f64)).collect()),
                Column::Text((0..10).map(|i| Some(format!("<{i}>"))).collect()),
            ])
            .unwrap();
        }
        assert_eq!(w.finish().unwrap(), 30);
        let (rows, names) = describe(&path).unwrap();
        assert_eq!(rows, 30);
        assert_eq!(names, ["n", "x", "s"]);
    }

    #[test]
    fn only_a_finished_table_has_its_name_and_an_unfinished_one_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let files = || std::fs::read_dir(dir.path()).unwrap().count();
        let schema = || vec![("n".to_string(), ColumnType::Int64, false)];
        let mut w = TableWriter::create(&path, schema()).unwrap();
        w.write_batch(&[Column::Int64(vec![Some(1)])]).unwrap();
        assert!(!path.exists(), "named before its footer is written");
        drop(w);
        assert_eq!(files(), 0, "an unfinished table is removed");
        let mut w = TableWriter::create(&path, schema()).unwrap();
        w.write_batch(&[Column::Int64(vec![Some(1)])]).unwrap();
        assert_eq!(w.finish().unwrap(), 1);
        assert_eq!(describe(&path).unwrap().0, 1);
        assert_eq!(files(), 1);
    }

    #[test]
    fn a_null_in_a_required_column_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let mut w =
            TableWriter::create(&path, vec![("n".into(), ColumnType::Int64, false)]).unwrap();
        let e = w
            .write_batch(&[Column::Int64(vec![Some(1), None])])
            .unwrap_err();
        assert!(e.to_string().contains("t.parquet"), "{e}");
    }
}
