//! A small streaming Parquet table writer over the `parquet` crate's column writers (no arrow: it is
//! heavy to build and a handful of flat columns do not need it). Rows arrive in batches; each batch is
//! one row group, so a table far larger than memory is written batch by batch. The tables of a run
//! (`run`) and of a trace (`trace`) are written with it.
pub(crate) mod run;
pub(crate) mod trace;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{Compression, ConvertedType, LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

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

/// Writes one Parquet file. Rows go to a hidden partial file beside it (`.NAME.PID.partial`), renamed
/// to the file's name by `finish`: a failure or an interruption never leaves a file without its
/// footer under that name, and a writer dropped unfinished removes its partial file.
pub struct TableWriter {
    path: PathBuf,
    partial: PathBuf,
    schema: Schema,
    /// None once finished.
    writer: Option<SerializedFileWriter<File>>,
    rows: u64,
}

impl TableWriter {
    pub fn create(path: &Path, schema: Schema) -> Result<TableWriter, ParquetError> {
        let err = |message: String| ParquetError::Write {
            path: path.to_path_buf(),
            message,
        };
        let fields = schema
            .iter()
            .map(|(name, kind, nullable)| {
                let physical = match kind {
                    ColumnType::Int64 => PhysicalType::INT64,
                    ColumnType::Double => PhysicalType::DOUBLE,
                    ColumnType::Text => PhysicalType::BYTE_ARRAY,
                };
                let mut b =
                    Type::primitive_type_builder(name, physical).with_repetition(if *nullable {
                        Repetition::OPTIONAL
                    } else {
                        Repetition::REQUIRED
                    });
                if *kind == ColumnType::Text {
                    b = b
                        .with_logical_type(Some(LogicalType::String))
                        .with_converted_type(ConvertedType::UTF8);
                }
                b.build().map(Arc::new).map_err(|e| err(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let root = Type::group_type_builder("schema")
            .with_fields(fields)
            .build()
            .map_err(|e| err(e.to_string()))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("alloclens {}", env!("CARGO_PKG_VERSION")))
            .build();
        let partial = partial_path(path);
        let file = File::create(&partial).map_err(|e| err(e.to_string()))?;
        let writer =
            SerializedFileWriter::new(file, Arc::new(root), Arc::new(props)).map_err(|e| {
                let _ = std::fs::remove_file(&partial);
                err(e.to_string())
            })?;
        Ok(TableWriter {
            path: path.to_path_buf(),
            partial,
            schema,
            writer: Some(writer),
            rows: 0,
        })
    }

    /// Writes one row group: one `Column` per schema entry, in order, all of the same length.
    pub fn write_batch(&mut self, columns: &[Column]) -> Result<(), ParquetError> {
        let path = self.path.clone();
        let err = |message: String| ParquetError::Write {
            path: path.clone(),
            message,
        };
        if columns.len() != self.schema.len() {
            return Err(err(format!(
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
            return Err(err("columns of a batch differ in length".into()));
        }
        let mut group = self
            .writer
            .as_mut()
            .ok_or_else(|| err("the table is finished".into()))?
            .next_row_group()
            .map_err(|e| err(e.to_string()))?;
        for (column, (name, _, nullable)) in columns.iter().zip(&self.schema) {
            let mut col = group
                .next_column()
                .map_err(|e| err(e.to_string()))?
                .ok_or_else(|| err(format!("no column writer for {name}")))?;
            let levels = |present: Vec<bool>| -> Result<Option<Vec<i16>>, ParquetError> {
                if *nullable {
                    Ok(Some(present.iter().map(|&p| i16::from(p)).collect()))
                } else if present.iter().all(|&p| p) {
                    Ok(None)
                } else {
                    Err(err(format!("null in the required column {name}")))
                }
            };
            let written = match column {
                Column::Int64(v) => {
                    let defs = levels(v.iter().map(Option::is_some).collect())?;
                    let values: Vec<i64> = v.iter().flatten().copied().collect();
                    col.typed::<Int64Type>()
                        .write_batch(&values, defs.as_deref(), None)
                }
                Column::Double(v) => {
                    let defs = levels(v.iter().map(Option::is_some).collect())?;
                    let values: Vec<f64> = v.iter().flatten().copied().collect();
                    col.typed::<DoubleType>()
                        .write_batch(&values, defs.as_deref(), None)
                }
                Column::Text(v) => {
                    let defs = levels(v.iter().map(Option::is_some).collect())?;
                    let values: Vec<ByteArray> = v
                        .iter()
                        .flatten()
                        .map(|s| ByteArray::from(s.as_str()))
                        .collect();
                    col.typed::<ByteArrayType>()
                        .write_batch(&values, defs.as_deref(), None)
                }
            };
            written.map_err(|e| err(format!("column {name}: {e}")))?;
            col.close().map_err(|e| err(e.to_string()))?;
        }
        group.close().map_err(|e| err(e.to_string()))?;
        self.rows += rows as u64;
        Ok(())
    }

    /// Finishes the file (writes the footer) and gives it its name; returns the number of rows.
    pub fn finish(mut self) -> Result<u64, ParquetError> {
        let err = |message: String| ParquetError::Write {
            path: self.path.clone(),
            message,
        };
        if let Some(writer) = self.writer.take() {
            writer.close().map_err(|e| err(e.to_string()))?;
        }
        std::fs::rename(&self.partial, &self.path).map_err(|e| err(e.to_string()))?;
        self.partial = PathBuf::new();
        Ok(self.rows)
    }
}

impl Drop for TableWriter {
    fn drop(&mut self) {
        if !self.partial.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

/// `DIR/.NAME.PID.partial` for `DIR/NAME`: in the same directory, so the rename cannot cross file
/// systems; with the pid, so two alloclens writing the same table do not share it.
fn partial_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "table".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.partial", std::process::id()))
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
