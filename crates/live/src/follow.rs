//! The viewer of a collector's session reads it from its directory: the rows samples.csv gains
//! (each appended and flushed as it is taken; replaced whole when the history is thinned), and,
//! once the collector is gone, the results it wrote in watch.json.
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use watch::{WatchResults, WatchSample};

/// The rows of a samples.csv not read yet.
pub struct SamplesTail {
    path: PathBuf,
    /// Bytes read so far (whole lines), of the file with this inode.
    offset: u64,
    inode: u64,
    header: csv::StringRecord,
    last_t: Option<f64>,
}

impl SamplesTail {
    pub fn new(path: PathBuf) -> SamplesTail {
        SamplesTail {
            path,
            offset: 0,
            inode: 0,
            header: csv::StringRecord::from(watch::samples_file::header()),
            last_t: None,
        }
    }

    /// The samples written since the last call, in order (none when the file is not there yet).
    pub fn read_new(&mut self) -> Vec<WatchSample> {
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let Ok(meta) = file.metadata() else {
            return Vec::new();
        };
        // Thinned (written beside it and renamed over it) or cut: read from the start, keeping
        // only the samples after the last one seen.
        if meta.ino() != self.inode || meta.len() < self.offset {
            self.inode = meta.ino();
            self.offset = 0;
        }
        let mut bytes = Vec::new();
        if file.seek(SeekFrom::Start(self.offset)).is_err() || file.read_to_end(&mut bytes).is_err()
        {
            return Vec::new();
        }
        // A row being written is left for the next call.
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
            return Vec::new();
        };
        self.offset += end as u64 + 1;
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(&bytes[..=end]);
        let mut samples = Vec::new();
        for record in reader.records().filter_map(Result::ok) {
            if record == self.header {
                continue;
            }
            let Ok(sample) = record.deserialize::<WatchSample>(Some(&self.header)) else {
                continue;
            };
            if self.last_t.is_none_or(|t| sample.t_s > t) {
                self.last_t = Some(sample.t_s);
                samples.push(sample);
            }
        }
        samples
    }
}

/// watch.json of `dir` once its watch ended (its `ending` set); None while it runs or when it
/// cannot be read.
pub fn final_results(dir: &Path) -> Option<WatchResults> {
    let text = std::fs::read(dir.join(watch::WATCH_JSON)).ok()?;
    let results: WatchResults = serde_json::from_slice(&text).ok()?;
    results.ending.is_some().then_some(results)
}

/// watch.json of `dir` as the collector wrote it at its start: what the verdict so far is made
/// with.
pub fn base_results(dir: &Path) -> std::io::Result<WatchResults> {
    let text = std::fs::read(dir.join(watch::WATCH_JSON))?;
    serde_json::from_slice(&text).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_tail_reads_whole_new_rows_once_and_again_after_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("samples.csv");
        let row = |t: f64| {
            let mut w = csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(Vec::new());
            w.serialize(WatchSample {
                t_s: t,
                rss: 4096,
                ..Default::default()
            })
            .unwrap();
            w.into_inner().unwrap()
        };
        let header = watch::samples_file::header().join(",") + "\n";
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(header.as_bytes()).unwrap();
        file.write_all(&row(0.1)).unwrap();
        let mut tail = SamplesTail::new(path.clone());
        let first = tail.read_new();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].rss, 4096);
        // A row half written is read once whole.
        let second = row(0.2);
        file.write_all(&second[..5]).unwrap();
        assert!(tail.read_new().is_empty());
        file.write_all(&second[5..]).unwrap();
        assert_eq!(tail.read_new().len(), 1);
        assert!(tail.read_new().is_empty());
        // Thinned: a new file renamed over it; only the rows after the last seen are new.
        let new = dir.path().join("samples.csv.tmp");
        let mut rewritten = header.into_bytes();
        for t in [0.1, 0.2, 0.3] {
            rewritten.extend(row(t));
        }
        std::fs::write(&new, rewritten).unwrap();
        std::fs::rename(&new, &path).unwrap();
        let after = tail.read_new();
        assert_eq!(after.len(), 1);
        assert_eq!(after[0].t_s, 0.3);
    }
}
