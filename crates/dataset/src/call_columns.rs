//! One row group of the calls table: its columns as the trace's records fill them, and their
//! encoding into column chunks (`encoding`, `column_chunk`) with the encodings docs/dataset.md
//! names: delta for the columns that grow or stay constant, dictionaries for `tid`, `op`, `size`
//! and `trace_id`.
use hashbrown::HashMap;
use parquet::basic::Encoding;
use parquet::schema::types::ColumnDescPtr;
use trace::{Event, Op};

use crate::column_chunk::{ChunkWriter, DictionaryPage, EncodedColumn};
use crate::encoding::{
    def_levels_v1, delta_binary_packed, dictionary_indices, plain_bytes, plain_i64,
};

/// The calls table's columns, in its schema's order (`calls::schema`).
#[derive(Default)]
pub struct Batch {
    pid: Vec<i64>,
    exec_index: Vec<i64>,
    tid: Vec<i64>,
    seq: Vec<i64>,
    t_ns: Vec<i64>,
    /// `Op` tags: the dictionary is made of the names of those present.
    op: Vec<u8>,
    /// The sizes of the calls that have one: a plain free has none (null), so the column stores
    /// only the requests' sizes (a third less than with a 0 on every free).
    size: Vec<i64>,
    /// Per row: 1 when it has a size, 0 for null (the definition levels).
    has_size: Vec<u32>,
    addr: Vec<i64>,
    old_addr: Vec<i64>,
}

impl Batch {
    pub fn with_capacity(n: usize) -> Batch {
        Batch {
            pid: Vec::with_capacity(n),
            exec_index: Vec::with_capacity(n),
            tid: Vec::with_capacity(n),
            seq: Vec::with_capacity(n),
            t_ns: Vec::with_capacity(n),
            op: Vec::with_capacity(n),
            size: Vec::with_capacity(n),
            has_size: Vec::with_capacity(n),
            addr: Vec::with_capacity(n),
            old_addr: Vec::with_capacity(n),
        }
    }

    pub fn len(&self) -> usize {
        self.seq.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seq.is_empty()
    }

    pub fn clear(&mut self) {
        for column in [
            &mut self.pid,
            &mut self.exec_index,
            &mut self.tid,
            &mut self.seq,
            &mut self.t_ns,
            &mut self.size,
            &mut self.addr,
            &mut self.old_addr,
        ] {
            column.clear();
        }
        self.op.clear();
        self.has_size.clear();
    }

    /// One call of the process image `pid`, `exec_index`.
    #[inline]
    pub fn push(&mut self, pid: u32, exec_index: u32, e: &Event) {
        self.pid.push(i64::from(pid));
        self.exec_index.push(i64::from(exec_index));
        self.tid.push(i64::from(e.tid));
        self.seq.push(e.seq as i64);
        self.t_ns.push(e.t_ns as i64);
        self.op.push(e.op as u8);
        if e.op == Op::Free {
            self.has_size.push(0);
        } else {
            self.has_size.push(1);
            self.size.push(e.size as i64);
        }
        self.addr.push(e.addr as i64);
        self.old_addr.push(e.old_addr as i64);
    }
}

/// Encodes batches into column chunks, keeping its buffers and zstd context from one to the next:
/// one per writing thread.
pub struct BatchEncoder {
    chunks: ChunkWriter,
    data: Vec<u8>,
    dictionary: Vec<u8>,
    indices: Vec<u32>,
    sizes: Interner,
    tids: Interner,
    /// The `trace_id` column's indices: all 0 (its dictionary is the one id).
    zeros: Vec<u32>,
}

impl BatchEncoder {
    pub fn new() -> Result<BatchEncoder, String> {
        Ok(BatchEncoder {
            chunks: ChunkWriter::new()?,
            data: Vec::new(),
            dictionary: Vec::new(),
            indices: Vec::new(),
            sizes: Interner::default(),
            tids: Interner::default(),
            zeros: Vec::new(),
        })
    }

    /// The batch's column chunks, for `columns` (the file's descriptors, in schema order), with
    /// `trace_id` on every row.
    pub fn encode(
        &mut self,
        batch: &Batch,
        columns: &[ColumnDescPtr],
        trace_id: &[u8],
    ) -> Result<Vec<EncodedColumn>, String> {
        if columns.len() != 10 {
            return Err(format!(
                "{} columns for the calls table's 10",
                columns.len()
            ));
        }
        let n = batch.len();
        let mut out = Vec::with_capacity(columns.len());
        for (values, descr) in [(&batch.pid, &columns[0]), (&batch.exec_index, &columns[1])] {
            out.push(self.delta(values, descr)?);
        }
        out.push(self.interned(&batch.tid, None, Which::Tids, &columns[2])?);
        out.push(self.delta(&batch.seq, &columns[3])?);
        out.push(self.delta(&batch.t_ns, &columns[4])?);
        out.push(self.ops(&batch.op, &columns[5])?);
        out.push(self.interned(
            &batch.size,
            Some(&batch.has_size),
            Which::Sizes,
            &columns[6],
        )?);
        out.push(self.delta(&batch.addr, &columns[7])?);
        out.push(self.delta(&batch.old_addr, &columns[8])?);
        // `trace_id`: one dictionary entry, and every index 0.
        self.zeros.resize(n, 0);
        self.data.clear();
        dictionary_indices(&self.zeros[..n], 1, &mut self.data);
        self.dictionary.clear();
        plain_bytes([trace_id], &mut self.dictionary);
        out.push(self.chunks.column(
            &columns[9],
            n,
            Some(DictionaryPage {
                plain: &self.dictionary,
                entries: 1,
            }),
            &self.data,
            Encoding::RLE_DICTIONARY,
        )?);
        Ok(out)
    }

    fn delta(&mut self, values: &[i64], descr: &ColumnDescPtr) -> Result<EncodedColumn, String> {
        self.data.clear();
        delta_binary_packed(values, &mut self.data);
        self.chunks.column(
            descr,
            values.len(),
            None,
            &self.data,
            Encoding::DELTA_BINARY_PACKED,
        )
    }

    /// A dictionary-encoded INT64 column; `present` are the definition levels of a nullable one
    /// (`values` then holds only the non-null values).
    fn interned(
        &mut self,
        values: &[i64],
        present: Option<&[u32]>,
        which: Which,
        descr: &ColumnDescPtr,
    ) -> Result<EncodedColumn, String> {
        let interner = match which {
            Which::Tids => &mut self.tids,
            Which::Sizes => &mut self.sizes,
        };
        interner.indices(values, &mut self.indices);
        self.data.clear();
        if let Some(levels) = present {
            def_levels_v1(levels, &mut self.data);
        }
        dictionary_indices(&self.indices, interner.values.len(), &mut self.data);
        self.dictionary.clear();
        plain_i64(&interner.values, &mut self.dictionary);
        let rows = present.map_or(values.len(), <[u32]>::len);
        self.chunks.column(
            descr,
            rows,
            Some(DictionaryPage {
                plain: &self.dictionary,
                entries: interner.values.len(),
            }),
            &self.data,
            Encoding::RLE_DICTIONARY,
        )
    }

    /// The `op` column: a dictionary of the names present, in order of first appearance.
    fn ops(&mut self, tags: &[u8], descr: &ColumnDescPtr) -> Result<EncodedColumn, String> {
        let mut index = [u32::MAX; 256];
        let mut names: Vec<&[u8]> = Vec::new();
        self.indices.clear();
        self.indices.reserve(tags.len());
        for &tag in tags {
            let slot = &mut index[usize::from(tag)];
            if *slot == u32::MAX {
                *slot = names.len() as u32;
                let name = Op::from_tag(tag).map_or("unknown", Op::name);
                names.push(name.as_bytes());
            }
            self.indices.push(*slot);
        }
        self.data.clear();
        dictionary_indices(&self.indices, names.len(), &mut self.data);
        self.dictionary.clear();
        plain_bytes(names.iter().copied(), &mut self.dictionary);
        self.chunks.column(
            descr,
            tags.len(),
            Some(DictionaryPage {
                plain: &self.dictionary,
                entries: names.len(),
            }),
            &self.data,
            Encoding::RLE_DICTIONARY,
        )
    }
}

#[derive(Clone, Copy)]
enum Which {
    Tids,
    Sizes,
}

/// A column chunk's dictionary of INT64 values: each distinct value once, in order of first
/// appearance, and the index of each row's value.
#[derive(Default)]
struct Interner {
    index: HashMap<i64, u32>,
    values: Vec<i64>,
}

impl Interner {
    fn indices(&mut self, values: &[i64], out: &mut Vec<u32>) {
        self.index.clear();
        self.values.clear();
        out.clear();
        out.reserve(values.len());
        // Runs of one value (a thread's calls) skip the map.
        let mut last: Option<(i64, u32)> = None;
        for &v in values {
            let i = match last {
                Some((lv, li)) if lv == v => li,
                _ => {
                    let next = self.values.len() as u32;
                    let i = *self.index.entry(v).or_insert(next);
                    if i == next {
                        self.values.push(v);
                    }
                    last = Some((v, i));
                    i
                }
            };
            out.push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parquet_file::ParquetFile;
    use crate::table::Cell;

    /// Calls that reach the encodings' edges: wrapping deltas (0 to 2^63 and back, i64 extremes),
    /// runs of 8 and more beside short ones, a block and a miniblock cut short, nulls, two threads,
    /// every op, more distinct sizes than fit in one byte of index.
    fn calls(n: u64) -> Vec<Event> {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        (0..n)
            .map(|seq| {
                let r = next();
                let op = Op::ALL[(r % 12) as usize];
                let addr = match seq % 7 {
                    0 => 0,
                    1 => u64::MAX,
                    2 => 1 << 63,
                    3 => i64::MAX as u64,
                    _ => next(),
                };
                Event {
                    seq: seq * 3 + (r >> 60),
                    t_ns: seq * 1000 + (r >> 50),
                    tid: if (seq / 9) % 2 == 0 { 7 } else { 123_456 },
                    stack: 0,
                    op,
                    addr,
                    size: if seq % 20 < 10 { 16 } else { r % 700 },
                    old_addr: if op.is_realloc() { next() } else { 0 },
                }
            })
            .collect()
    }

    #[test]
    fn batches_read_back_through_the_parquet_crate_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("calls.parquet");
        let mut file = ParquetFile::create(&path, "calls", crate::calls::schema()).unwrap();
        let columns = file.columns().unwrap();
        let mut encoder = BatchEncoder::new().unwrap();
        let mut expected = Vec::new();
        // Sizes around the block (256), miniblock (64) and group (8) lengths, and 0 and 1 rows.
        for (k, n) in [1u64, 0, 2, 9, 63, 65, 257, 1000, 5000]
            .into_iter()
            .enumerate()
        {
            let mut batch = Batch::with_capacity(n as usize);
            for e in calls(n) {
                batch.push(k as u32 * 1000, k as u32, &e);
                expected.push((k, e));
            }
            if batch.is_empty() {
                continue;
            }
            let chunks = encoder.encode(&batch, &columns, b"0123abcd").unwrap();
            file.append_group(chunks, batch.len() as u64).unwrap();
        }
        file.finish().unwrap();
        let rows = crate::read::read_file(&path).unwrap();
        assert_eq!(rows.len(), expected.len());
        for (i, (k, e)) in expected.iter().enumerate() {
            let int = |name: &str| match rows.get(i, name) {
                Cell::Int(v) => Some(*v),
                Cell::Null => None,
                other => panic!("{name}: {other:?}"),
            };
            assert_eq!(int("pid"), Some(*k as i64 * 1000), "row {i}");
            assert_eq!(int("exec_index"), Some(*k as i64));
            assert_eq!(int("tid"), Some(i64::from(e.tid)));
            assert_eq!(int("seq"), Some(e.seq as i64));
            assert_eq!(int("t_ns"), Some(e.t_ns as i64));
            assert_eq!(rows.text(i, "op"), Some(e.op.name()), "row {i}");
            let size = (e.op != Op::Free).then_some(e.size as i64);
            assert_eq!(int("size"), size, "row {i}");
            assert_eq!(int("addr"), Some(e.addr as i64), "row {i}");
            assert_eq!(int("old_addr"), Some(e.old_addr as i64), "row {i}");
            assert_eq!(rows.text(i, "trace_id"), Some("0123abcd"));
        }
    }
}
