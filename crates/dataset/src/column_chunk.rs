//! A column chunk from pages encoded by `encoding`: each page compressed with zstd and written
//! through the parquet crate's page writer (its page headers, its metadata), ready for
//! `SerializedRowGroupWriter::append_column`, the crate's way of writing column chunks encoded
//! elsewhere. The file, its footer and its schema stay the crate's.
use bytes::Bytes;
use parquet::basic::{Compression, Encoding, PageType, ZstdLevel};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::page_encoding_stats::PageEncodingStats;
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;

/// zstd's level for the calls table, as for the other tables (`parquet_file`).
pub const ZSTD_LEVEL: i32 = 3;

/// One column chunk, encoded and compressed: its bytes and what the row group needs to know.
pub struct EncodedColumn {
    pub bytes: Bytes,
    pub close: ColumnCloseResult,
}

/// A dictionary page's content: its values in PLAIN and how many.
pub struct DictionaryPage<'a> {
    pub plain: &'a [u8],
    pub entries: usize,
}

/// Compresses and frames pages; one per writing thread (the zstd context is kept).
pub struct ChunkWriter {
    zstd: zstd::bulk::Compressor<'static>,
}

impl ChunkWriter {
    pub fn new() -> Result<ChunkWriter, String> {
        Ok(ChunkWriter {
            zstd: zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(|e| format!("zstd: {e}"))?,
        })
    }

    /// A column chunk of `rows` rows: an optional dictionary page, then one v1 data page holding
    /// `data` (definition levels, if any, then values in `encoding`).
    pub fn column(
        &mut self,
        descr: &ColumnDescPtr,
        rows: usize,
        dictionary: Option<DictionaryPage<'_>>,
        data: &[u8],
        encoding: Encoding,
    ) -> Result<EncodedColumn, String> {
        let err = |e: parquet::errors::ParquetError| e.to_string();
        let mut sink = TrackedWrite::new(Vec::with_capacity(data.len() / 2 + 1024));
        let mut stats = Vec::new();
        let mut encodings = vec![Encoding::RLE];
        let (mut compressed, mut uncompressed) = (0i64, 0i64);
        let mut dictionary_offset = None;
        let data_offset = {
            let mut pages = SerializedPageWriter::new(&mut sink);
            if let Some(dict) = dictionary {
                let page = Page::DictionaryPage {
                    buf: self.compress(dict.plain)?,
                    num_values: dict.entries as u32,
                    encoding: Encoding::PLAIN,
                    is_sorted: false,
                };
                let spec = pages
                    .write_page(CompressedPage::new(page, dict.plain.len()))
                    .map_err(err)?;
                dictionary_offset = Some(spec.offset as i64);
                compressed += spec.compressed_size as i64;
                uncompressed += spec.uncompressed_size as i64;
                encodings.push(Encoding::PLAIN);
                stats.push(PageEncodingStats {
                    page_type: PageType::DICTIONARY_PAGE,
                    encoding: Encoding::PLAIN,
                    count: 1,
                });
            }
            let page = Page::DataPage {
                buf: self.compress(data)?,
                num_values: rows as u32,
                encoding,
                def_level_encoding: Encoding::RLE,
                rep_level_encoding: Encoding::RLE,
                statistics: None,
            };
            let spec = pages
                .write_page(CompressedPage::new(page, data.len()))
                .map_err(err)?;
            pages.close().map_err(err)?;
            compressed += spec.compressed_size as i64;
            uncompressed += spec.uncompressed_size as i64;
            if !encodings.contains(&encoding) {
                encodings.push(encoding);
            }
            stats.push(PageEncodingStats {
                page_type: PageType::DATA_PAGE,
                encoding,
                count: 1,
            });
            spec.offset as i64
        };
        let metadata = ColumnChunkMetaData::builder(descr.clone())
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(ZSTD_LEVEL).map_err(err)?,
            ))
            .set_encodings(encodings)
            .set_page_encoding_stats(stats)
            .set_total_compressed_size(compressed)
            .set_total_uncompressed_size(uncompressed)
            .set_num_values(rows as i64)
            .set_data_page_offset(data_offset)
            .set_dictionary_page_offset(dictionary_offset)
            .build()
            .map_err(err)?;
        let bytes = sink.into_inner().map_err(err)?;
        Ok(EncodedColumn {
            close: ColumnCloseResult {
                bytes_written: bytes.len() as u64,
                rows_written: rows as u64,
                metadata,
                bloom_filter: None,
                column_index: None,
                offset_index: None,
            },
            bytes: Bytes::from(bytes),
        })
    }

    fn compress(&mut self, raw: &[u8]) -> Result<Bytes, String> {
        self.zstd
            .compress(raw)
            .map(Bytes::from)
            .map_err(|e| format!("zstd: {e}"))
    }
}
