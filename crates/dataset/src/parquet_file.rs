//! One Parquet file: typed columns with an encoding each, written under a hidden temporary name and
//! renamed when complete. The dataset's files have zstd pages and its schema version in the footer;
//! `export --parquet` (crates/report) writes its files with it too. (The `parquet` crate's column
//! writers, without arrow: a handful of flat columns do not need it, and it is heavy to build.)
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{
    Compression, ConvertedType, Encoding, LogicalType, Repetition, Type as PhysicalType, ZstdLevel,
};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{ColumnDescPtr, ColumnPath, Type};

use crate::column_chunk::EncodedColumn;

use crate::SCHEMA_VERSION;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int64,
    Double,
    /// UTF-8 text.
    Text,
}

/// How a column's values are encoded before zstd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encode {
    /// Few distinct values (thread ids, op names): a dictionary and small indices.
    Dictionary,
    /// Values that grow steadily (seq, time, block ids): differences, bit-packed.
    Delta,
    Plain,
}

#[derive(Debug, Clone)]
pub struct ColumnSpec {
    pub name: String,
    pub kind: Kind,
    pub nullable: bool,
    pub encode: Encode,
    /// Min/max in the footer, for readers to skip row groups. The parquet crate computes them
    /// value by value through a slow generic comparison (38 % of the calls table's writing time
    /// under `perf`), so the per-call table, whose queries scan every call, has none.
    pub statistics: bool,
}

impl ColumnSpec {
    /// A nullable column, dictionary-encoded (the small tables: their values repeat a lot).
    pub fn new(name: &str, kind: Kind) -> ColumnSpec {
        ColumnSpec {
            name: name.to_string(),
            kind,
            nullable: true,
            encode: Encode::Dictionary,
            statistics: true,
        }
    }
}

/// One row group's values of one column: the non-null values, and with a nullable column one
/// definition level per row (1 = a value, 0 = null).
pub enum Values {
    Int64(Vec<i64>),
    Double(Vec<f64>),
    Text(Vec<ByteArray>),
}

impl Values {
    fn len(&self) -> usize {
        match self {
            Values::Int64(v) => v.len(),
            Values::Double(v) => v.len(),
            Values::Text(v) => v.len(),
        }
    }
}

pub struct ColumnData {
    pub values: Values,
    pub defs: Option<Vec<i16>>,
}

/// Writes one file: rows go to `.NAME.PID.partial` beside it, renamed by `finish`; a writer dropped
/// unfinished removes its partial file, so the name only ever holds a complete file.
pub struct ParquetFile {
    path: PathBuf,
    partial: PathBuf,
    specs: Vec<ColumnSpec>,
    writer: Option<SerializedFileWriter<File>>,
    rows: u64,
}

impl ParquetFile {
    /// A file of the dataset's table `kind`: zstd pages of up to 1 MiB, min/max per column chunk,
    /// the schema version and the kind in the footer.
    pub fn create(path: &Path, kind: &str, specs: Vec<ColumnSpec>) -> Result<ParquetFile, String> {
        let zstd = ZstdLevel::try_new(3).map_err(|e| e.to_string())?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(zstd))
            .set_statistics_enabled(EnabledStatistics::Chunk)
            // Pages end at 1 MiB, not at the default 20,000 rows: each page starts a new zstd
            // context (7 % of the calls table's time went to clearing its tables), and a bigger page
            // compresses better.
            .set_data_page_row_count_limit(usize::MAX)
            .set_key_value_metadata(Some(vec![
                KeyValue {
                    key: "alloclens.dataset.schema_version".into(),
                    value: Some(SCHEMA_VERSION.to_string()),
                },
                KeyValue {
                    key: "alloclens.dataset.kind".into(),
                    value: Some(kind.to_string()),
                },
            ]));
        Self::with_properties(path, specs, props)
    }

    /// A file of `export --parquet`: the parquet crate's defaults but snappy pages (pages of
    /// 20,000 rows, min/max per page), nothing of the dataset in the footer. Exporting a 20 M-call
    /// trace, the dataset's 1 MiB pages took 205 MiB where these took 177-179 (both with a row
    /// group's columns built at once; one at a time, 159), for no smaller a file.
    pub fn create_export(path: &Path, specs: Vec<ColumnSpec>) -> Result<ParquetFile, String> {
        let props = WriterProperties::builder().set_compression(Compression::SNAPPY);
        Self::with_properties(path, specs, props)
    }

    /// The file with `props` and each column's encoding and statistics as `specs` say.
    fn with_properties(
        path: &Path,
        specs: Vec<ColumnSpec>,
        props: WriterPropertiesBuilder,
    ) -> Result<ParquetFile, String> {
        let fields = specs
            .iter()
            .map(|c| {
                let physical = match c.kind {
                    Kind::Int64 => PhysicalType::INT64,
                    Kind::Double => PhysicalType::DOUBLE,
                    Kind::Text => PhysicalType::BYTE_ARRAY,
                };
                let mut b = Type::primitive_type_builder(&c.name, physical).with_repetition(
                    if c.nullable {
                        Repetition::OPTIONAL
                    } else {
                        Repetition::REQUIRED
                    },
                );
                if c.kind == Kind::Text {
                    b = b
                        .with_logical_type(Some(LogicalType::String))
                        .with_converted_type(ConvertedType::UTF8);
                }
                b.build().map(Arc::new).map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        let root = Type::group_type_builder("schema")
            .with_fields(fields)
            .build()
            .map_err(|e| e.to_string())?;
        let mut props = props.set_created_by(format!("alloclens {}", env!("CARGO_PKG_VERSION")));
        for c in &specs {
            let col = ColumnPath::from(c.name.as_str());
            if !c.statistics {
                props = props.set_column_statistics_enabled(col.clone(), EnabledStatistics::None);
            }
            props = match c.encode {
                Encode::Dictionary => props.set_column_dictionary_enabled(col, true),
                Encode::Delta => props
                    .set_column_dictionary_enabled(col.clone(), false)
                    .set_column_encoding(col, Encoding::DELTA_BINARY_PACKED),
                Encode::Plain => props
                    .set_column_dictionary_enabled(col.clone(), false)
                    .set_column_encoding(col, Encoding::PLAIN),
            };
        }
        // A device or a pipe (links followed) is written into; only a regular file is replaced.
        let (path, partial, file) =
            match safe_output::destination(path).map_err(|e| e.to_string())? {
                safe_output::Destination::Replace(target) => {
                    let partial = partial_path(&target);
                    let file = File::create(&partial).map_err(|e| e.to_string())?;
                    (target, partial, file)
                }
                safe_output::Destination::Stream(device) => {
                    let file = std::fs::OpenOptions::new()
                        .write(true)
                        .open(&device)
                        .map_err(|e| e.to_string())?;
                    (device, PathBuf::new(), file)
                }
            };
        let writer = SerializedFileWriter::new(file, Arc::new(root), Arc::new(props.build()))
            .map_err(|e| {
                if !partial.as_os_str().is_empty() {
                    let _ = std::fs::remove_file(&partial);
                }
                e.to_string()
            })?;
        Ok(ParquetFile {
            path,
            partial,
            specs,
            writer: Some(writer),
            rows: 0,
        })
    }

    /// A row group must give every column of the schema, in its order.
    fn check_column_count(&self, given: usize) -> Result<(), String> {
        if given == self.specs.len() {
            Ok(())
        } else {
            Err(format!(
                "{given} columns for a schema of {}",
                self.specs.len()
            ))
        }
    }

    /// Writes one row group: one entry per column, in the schema's order, each made only when its
    /// turn comes (a column's values need not all be in memory at once); an entry that is an error
    /// stops the group with it.
    pub fn write_group<I>(&mut self, columns: I) -> Result<(), String>
    where
        I: IntoIterator<Item = Result<ColumnData, String>>,
        I::IntoIter: ExactSizeIterator,
    {
        let columns = columns.into_iter();
        self.check_column_count(columns.len())?;
        let writer = self.writer.as_mut().ok_or("the file is finished")?;
        let mut group = writer.next_row_group().map_err(|e| e.to_string())?;
        let mut rows = 0;
        for (data, spec) in columns.zip(&self.specs) {
            let data = data?;
            let mut col = group
                .next_column()
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("no column writer for {}", spec.name))?;
            let defs = data.defs.as_deref();
            let written = match &data.values {
                Values::Int64(v) => col.typed::<Int64Type>().write_batch(v, defs, None),
                Values::Double(v) => col.typed::<DoubleType>().write_batch(v, defs, None),
                Values::Text(v) => col.typed::<ByteArrayType>().write_batch(v, defs, None),
            };
            written.map_err(|e| format!("column {}: {e}", spec.name))?;
            col.close().map_err(|e| e.to_string())?;
            rows = defs.map_or_else(|| data.values.len(), <[i16]>::len);
        }
        group.close().map_err(|e| e.to_string())?;
        self.rows += rows as u64;
        Ok(())
    }

    /// The descriptors of the columns, in the schema's order: what `column_chunk` encodes for.
    pub fn columns(&self) -> Result<Vec<ColumnDescPtr>, String> {
        let writer = self.writer.as_ref().ok_or("the file is finished")?;
        Ok(writer.schema_descr().columns().to_vec())
    }

    /// Writes one row group of column chunks encoded by `column_chunk`, one per column in the
    /// schema's order, all of `rows` rows.
    pub fn append_group(&mut self, columns: Vec<EncodedColumn>, rows: u64) -> Result<(), String> {
        self.check_column_count(columns.len())?;
        let writer = self.writer.as_mut().ok_or("the file is finished")?;
        let mut group = writer.next_row_group().map_err(|e| e.to_string())?;
        for column in columns {
            group
                .append_column(&column.bytes, column.close)
                .map_err(|e| e.to_string())?;
        }
        group.close().map_err(|e| e.to_string())?;
        self.rows += rows;
        Ok(())
    }

    /// The name the file takes when finished.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the footer and gives the file its name; returns its rows.
    pub fn finish(mut self) -> Result<u64, String> {
        if let Some(writer) = self.writer.take() {
            writer.close().map_err(|e| e.to_string())?;
        }
        if !self.partial.as_os_str().is_empty() {
            std::fs::rename(&self.partial, &self.path).map_err(|e| e.to_string())?;
            self.partial = PathBuf::new();
        }
        Ok(self.rows)
    }
}

impl Drop for ParquetFile {
    fn drop(&mut self) {
        if !self.partial.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

/// `DIR/.NAME.PID.partial` for `DIR/NAME`: hidden from readers, in the same directory so the rename
/// cannot cross file systems.
fn partial_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "table".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.partial", std::process::id()))
}
