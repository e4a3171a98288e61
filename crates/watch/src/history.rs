//! The watch's samples, in memory and in DIR/samples.csv, bounded however long the watch runs.
//!
//! Each sample is appended to the file and flushed as it is taken, so a crash or a kill loses
//! nothing. When the history reaches its capacity, every other sample of its older half is dropped
//! (of each pair, the one with the higher RSS stays, so peaks survive) and the file is rewritten to
//! match: written beside it and renamed over it, so a kill during the rewrite leaves the old file
//! whole. Memory and disk stay within `capacity` rows; the older a stretch, the sparser its
//! samples (docs/watch.md, "Downsampling").

use std::fs::{File, OpenOptions};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One sample of the watched tree. Sizes in bytes; `None` (an empty CSV cell) when not measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WatchSample {
    /// Seconds since the watch started.
    pub t_s: f64,
    /// Wall-clock time of the sample, ms since the Unix epoch.
    pub unix_ms: u64,
    /// Processes of the tree read in this sample.
    pub processes: u32,
    pub rss: u64,
    pub pss: u64,
    /// The RSS split from smaps (docs/memory-metrics.md, "RSS split").
    pub heap: u64,
    pub file: u64,
    pub stack: u64,
    pub other: u64,
    /// Processes with an agent snapshot in this sample.
    pub agent_processes: u32,
    /// Bytes of live blocks the program holds (the agent's counters, summed over the tree).
    pub live_bytes: Option<u64>,
    pub live_blocks: Option<u64>,
    /// The allocator's statistics, summed over the processes that report them.
    pub handed_out: Option<u64>,
    pub free_resident: Option<u64>,
    pub returned: Option<u64>,
    pub metadata: Option<u64>,
    pub heap_total: Option<u64>,
    pub free_chunks: Option<u64>,
    /// RSS of the processes whose live bytes are not in this row (no agent snapshot of their
    /// image, or one no longer renewed): growth there is not explained by `live_bytes`.
    #[serde(default)]
    pub rss_unmeasured: Option<u64>,
    /// CPU seconds the tree had taken by this sample (utime + stime), for the start-up fill's
    /// clock (verdict::warmup_end); kept in memory only, not in samples.csv.
    #[serde(skip)]
    pub cpu_s: Option<f64>,
}

/// Default capacity: at 1 s, the last 5.5 hours at full resolution before the first thinning.
pub const DEFAULT_CAPACITY: usize = 20_000;

pub struct History {
    rows: Vec<WatchSample>,
    capacity: usize,
    file: Option<FileSink>,
    problems: Vec<String>,
}

struct FileSink {
    path: PathBuf,
    writer: csv::Writer<BufWriter<File>>,
}

impl History {
    /// A history written to `path` (created anew), or kept in memory only with None.
    pub fn new(path: Option<&Path>, capacity: usize) -> std::io::Result<History> {
        let file = match path {
            Some(p) => Some(FileSink::create(p)?),
            None => None,
        };
        Ok(History {
            rows: Vec::new(),
            capacity: capacity.max(4),
            file,
            problems: Vec::new(),
        })
    }

    pub fn rows(&self) -> &[WatchSample] {
        &self.rows
    }

    /// What could not be written (a full disk): the samples are still in memory.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    pub fn push(&mut self, sample: WatchSample) {
        if let Some(sink) = &mut self.file {
            if let Err(e) = sink.append(&sample) {
                self.problems.push(format!(
                    "{}: sample at {:.1} s not written: {e}",
                    sink.path.display(),
                    sample.t_s
                ));
            }
        }
        self.rows.push(sample);
        if self.rows.len() >= self.capacity {
            self.thin();
        }
    }

    fn thin(&mut self) {
        let half = (self.rows.len() / 2) & !1;
        let mut kept: Vec<WatchSample> = self.rows[..half]
            .chunks(2)
            .map(|pair| {
                if pair.len() == 2 && pair[1].rss > pair[0].rss {
                    pair[1].clone()
                } else {
                    pair[0].clone()
                }
            })
            .collect();
        kept.extend_from_slice(&self.rows[half..]);
        self.rows = kept;
        if let Some(sink) = &mut self.file {
            if let Err(e) = sink.rewrite(&self.rows) {
                self.problems.push(format!(
                    "{}: not thinned ({e}); it keeps every sample",
                    sink.path.display()
                ));
            }
        }
    }
}

impl FileSink {
    fn create(path: &Path) -> std::io::Result<FileSink> {
        let file = File::create(path)?;
        Ok(FileSink {
            path: path.to_path_buf(),
            writer: csv::WriterBuilder::new().from_writer(BufWriter::new(file)),
        })
    }

    fn append(&mut self, sample: &WatchSample) -> std::io::Result<()> {
        self.writer.serialize(sample).map_err(csv_io)?;
        self.writer.flush()
    }

    /// The rows written beside the file, then renamed over it; appending goes on in the new one.
    /// A write that fails (a full disk) leaves the file as it was and no temporary file.
    fn rewrite(&mut self, rows: &[WatchSample]) -> std::io::Result<()> {
        let tmp = self.path.with_extension("csv.tmp");
        let written = (|| {
            let mut w = csv::WriterBuilder::new().from_writer(BufWriter::new(File::create(&tmp)?));
            for r in rows {
                w.serialize(r).map_err(csv_io)?;
            }
            w.flush()?;
            drop(w);
            std::fs::rename(&tmp, &self.path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
        let file = OpenOptions::new().append(true).open(&self.path)?;
        // The header is in the file already.
        self.writer = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(BufWriter::new(file));
        Ok(())
    }
}

fn csv_io(e: csv::Error) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Reads a samples.csv back (for `report`): every whole row; a last row cut by a kill is skipped.
pub fn read_samples(path: &Path) -> std::io::Result<Vec<WatchSample>> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(path)
        .map_err(csv_io)?;
    Ok(reader
        .deserialize::<WatchSample>()
        .filter_map(Result::ok)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn sample(i: usize) -> WatchSample {
        WatchSample {
            t_s: i as f64,
            rss: if i == 3 { 1_000_000 } else { i as u64 },
            live_bytes: i.is_multiple_of(2).then_some(i as u64 * 10),
            ..Default::default()
        }
    }

    #[test]
    fn file_holds_every_sample_as_taken_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("samples.csv");
        let mut h = History::new(Some(&path), 100).unwrap();
        for i in 0..5 {
            h.push(sample(i));
            // flushed at once: readable while the history is still open
            assert_eq!(read_samples(&path).unwrap().len(), i + 1);
        }
        let back = read_samples(&path).unwrap();
        assert_eq!(back, h.rows());
        assert_eq!(back[1].live_bytes, None);
        assert_eq!(back[2].live_bytes, Some(20));
    }

    #[test]
    fn thinning_bounds_memory_and_file_and_keeps_peaks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("samples.csv");
        let mut h = History::new(Some(&path), 10).unwrap();
        for i in 0..10 {
            h.push(sample(i));
        }
        // at 10 rows: the older half (0..4, rounded to pairs: 0..4) thinned to 2 rows, 6 newer kept
        let t: Vec<f64> = h.rows().iter().map(|r| r.t_s).collect();
        assert_eq!(t, [1.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        // pair (2, 3): 3 has the peak RSS and stays
        assert_eq!(h.rows()[1].rss, 1_000_000);
        assert_eq!(read_samples(&path).unwrap(), h.rows());
        for i in 10..1000 {
            h.push(sample(i));
            assert!(h.rows().len() < 10);
        }
        assert_eq!(read_samples(&path).unwrap(), h.rows());
        assert_eq!(h.rows().last().unwrap().t_s, 999.0);
        assert!(h.problems().is_empty());
    }

    #[test]
    fn a_cut_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("samples.csv");
        let mut h = History::new(Some(&path), 100).unwrap();
        for i in 0..3 {
            h.push(sample(i));
        }
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"3.0,17,1,").unwrap();
        assert_eq!(read_samples(&path).unwrap().len(), 3);
    }
}
