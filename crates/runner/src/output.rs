//! The command's output, line by line as it arrives, with the tree's RSS and VSS read at each marker
//! line on the reading thread itself, before anything else is done with the line.
//!
//! The run's main thread also takes interval samples and, per marker, a full sample whose
//! smaps_rollup walk costs ~35-40 µs per resident MB (30 ms for 800 MB): a program with a few ms
//! per event would be events ahead by the time such a sample read its RSS. statm costs microseconds.
use std::borrow::Cow;
use std::io::{ErrorKind, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use procmem::{ResidentSample, ResidentSampler, SamplerOptions};
use regex::Regex;

use crate::observer::OutputStream;

/// What a reading thread needs to recognise marker lines and read the tree at each.
#[derive(Clone)]
pub(crate) struct MarkerWatch {
    pub regex: Regex,
    pub root: u32,
    /// Count orphans reparented to this process as the tree's ([`SamplerOptions`]).
    pub include_reparented_to_self: bool,
    /// A child of ours that is not part of the tree (the watchdog, [`SamplerOptions`]).
    pub exclude_child: Option<u32>,
    /// Marker lines read so far, on every stream of the run: one later than a line's `seq`
    /// means a later marker line has arrived (the command has moved past that event).
    pub seen: Arc<AtomicU64>,
}

impl MarkerWatch {
    /// Whether a marker line later than `seq` has arrived.
    pub fn later_than(&self, seq: u64) -> bool {
        self.seen.load(Ordering::SeqCst) > seq + 1
    }
}

/// The tree's RSS and VSS for one marker line.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reading {
    /// Read after the line arrived and before any later marker line did.
    Taken(ResidentSample),
    /// A later marker line had arrived before the reading was done: this event's figures could
    /// no longer be read (and a later event's are not given in their place).
    Late,
    /// No process of the tree had memory any more (it had exited), or /proc could not be read.
    Missing,
}

/// A marker line: its order among the run's marker lines, label, arrival and reading.
#[derive(Debug, Clone)]
pub(crate) struct MarkerArrival {
    pub seq: u64,
    pub label: String,
    /// When the read(2) that completed the line returned.
    pub arrived: Instant,
    pub reading: Reading,
}

/// One line of output, newline included when it had one.
pub(crate) struct Line {
    pub stream: OutputStream,
    pub bytes: Vec<u8>,
    pub marker: Option<MarkerArrival>,
}

/// The line as text, without its line ending (what the regexes see).
pub(crate) fn line_text(bytes: &[u8]) -> Cow<'_, str> {
    match String::from_utf8_lossy(bytes) {
        Cow::Borrowed(s) => Cow::Borrowed(s.trim_end_matches(['\n', '\r'])),
        Cow::Owned(s) => Cow::Owned(s.trim_end_matches(['\n', '\r']).to_string()),
    }
}

/// Reads `pipe` on a thread of its own until EOF or an error, handing each line to `deliver`
/// (which returns false to stop), then calls `at_eof`.
pub(crate) fn spawn_reader(
    mut pipe: impl Read + Send + 'static,
    stream: OutputStream,
    watch: Option<MarkerWatch>,
    mut deliver: impl FnMut(Line) -> bool + Send + 'static,
    at_eof: impl FnOnce() + Send + 'static,
) {
    thread::spawn(move || {
        let mut lines = LineReader::new(stream, watch);
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // EIO from a pty master once the last holder of the slave is gone.
                Err(_) => break,
            };
            if !lines.arrived(&chunk[..n]).into_iter().all(&mut deliver) {
                return;
            }
        }
        if lines.finish().into_iter().all(&mut deliver) {
            at_eof();
        }
    });
}

/// Splits the byte stream into lines, noting when each one became complete.
struct LineReader {
    stream: OutputStream,
    watch: Option<MarkerWatch>,
    /// Opened with the reader, not at the first marker: opening lists /proc and reads the stat of
    /// every process on the machine (ms), which would make the first marker's reading late.
    sampler: Option<ResidentSampler>,
    /// The start of a line whose newline has not arrived yet.
    partial: Vec<u8>,
}

impl LineReader {
    fn new(stream: OutputStream, watch: Option<MarkerWatch>) -> Self {
        let sampler = watch.as_ref().and_then(|w| {
            let options = SamplerOptions {
                include_reparented_to_self: w.include_reparented_to_self,
                exclude_child: w.exclude_child,
                ..SamplerOptions::default()
            };
            ResidentSampler::new(w.root, options).ok()
        });
        LineReader {
            stream,
            watch,
            sampler,
            partial: Vec::new(),
        }
    }

    /// The lines that `bytes`, just read, complete.
    fn arrived(&mut self, bytes: &[u8]) -> Vec<Line> {
        let arrived = Instant::now();
        let Some(end) = bytes.iter().rposition(|&b| b == b'\n') else {
            self.partial.extend_from_slice(bytes);
            return Vec::new();
        };
        let mut complete = std::mem::take(&mut self.partial);
        complete.extend_from_slice(&bytes[..=end]);
        self.partial.extend_from_slice(&bytes[end + 1..]);
        let pieces = complete
            .split_inclusive(|&b| b == b'\n')
            .map(<[u8]>::to_vec);
        self.lines(pieces.collect(), arrived)
    }

    /// The last line, when the output does not end with a newline.
    fn finish(&mut self) -> Vec<Line> {
        if self.partial.is_empty() {
            return Vec::new();
        }
        let last = std::mem::take(&mut self.partial);
        self.lines(vec![last], Instant::now())
    }

    /// Numbers the marker lines among `pieces`, all arrived at `arrived`, and reads the tree once
    /// for the last of them: the earlier ones were followed by another marker before they could
    /// be read.
    fn lines(&mut self, pieces: Vec<Vec<u8>>, arrived: Instant) -> Vec<Line> {
        let Some(watch) = self.watch.clone() else {
            return pieces.into_iter().map(|b| self.line(b, None)).collect();
        };
        let labels: Vec<Option<(String, u64)>> = pieces
            .iter()
            .map(|bytes| {
                let text = line_text(bytes);
                let caps = watch.regex.captures(&text)?;
                let label = caps
                    .get(1)
                    .unwrap_or_else(|| caps.get(0).expect("whole match"));
                Some((
                    label.as_str().to_string(),
                    watch.seen.fetch_add(1, Ordering::SeqCst),
                ))
            })
            .collect();
        let last_seq = labels.iter().flatten().map(|(_, seq)| *seq).max();
        let reading = last_seq.map(|seq| match self.read_tree() {
            _ if watch.later_than(seq) => Reading::Late,
            Some(sample) if sample.processes > 0 => Reading::Taken(sample),
            _ => Reading::Missing,
        });
        pieces
            .into_iter()
            .zip(labels)
            .map(|(bytes, label)| {
                let marker = label.map(|(label, seq)| MarkerArrival {
                    seq,
                    label,
                    arrived,
                    reading: match reading {
                        Some(reading) if Some(seq) == last_seq => reading,
                        _ => Reading::Late,
                    },
                });
                self.line(bytes, marker)
            })
            .collect()
    }

    fn read_tree(&mut self) -> Option<ResidentSample> {
        self.sampler.as_mut()?.sample().ok()
    }

    fn line(&self, bytes: Vec<u8>, marker: Option<MarkerArrival>) -> Line {
        Line {
            stream: self.stream,
            bytes,
            marker,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch() -> MarkerWatch {
        MarkerWatch {
            regex: Regex::new(r"^event (\d+)").unwrap(),
            root: std::process::id(),
            include_reparented_to_self: false,
            exclude_child: None,
            seen: Arc::new(AtomicU64::new(0)),
        }
    }

    fn markers(lines: &[Line]) -> Vec<(String, u64, &'static str)> {
        lines
            .iter()
            .filter_map(|l| l.marker.as_ref())
            .map(|m| {
                let kind = match m.reading {
                    Reading::Taken(_) => "taken",
                    Reading::Late => "late",
                    Reading::Missing => "missing",
                };
                (m.label.clone(), m.seq, kind)
            })
            .collect()
    }

    #[test]
    fn lines_are_split_across_reads_and_the_last_one_kept_without_newline() {
        let mut reader = LineReader::new(OutputStream::Stdout, None);
        assert!(reader.arrived(b"hel").is_empty());
        let lines = reader.arrived(b"lo\r\nworld\nand");
        let texts: Vec<&[u8]> = lines.iter().map(|l| l.bytes.as_slice()).collect();
        assert_eq!(texts, [&b"hello\r\n"[..], b"world\n"]);
        assert_eq!(line_text(&lines[0].bytes), "hello");
        let last = reader.finish();
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].bytes, b"and");
        assert!(reader.finish().is_empty());
    }

    #[test]
    fn only_the_last_marker_of_a_read_gets_figures() {
        let w = watch();
        let mut reader = LineReader::new(OutputStream::Stdout, Some(w.clone()));
        let lines = reader.arrived(b"event 1\nnoise\nevent 2\nevent 3\nnoise\n");
        assert_eq!(lines.len(), 5);
        assert_eq!(
            markers(&lines),
            [
                ("1".to_string(), 0, "late"),
                ("2".to_string(), 1, "late"),
                ("3".to_string(), 2, "taken"),
            ]
        );
        // Our own process is the tree here: its figures are real.
        let Some(MarkerArrival {
            reading: Reading::Taken(sample),
            ..
        }) = &lines[3].marker
        else {
            panic!("no reading");
        };
        assert!(sample.rss > 0 && sample.vss >= sample.rss);
        // A marker that arrived before on another stream changes nothing; one after makes it late.
        w.seen.fetch_add(1, Ordering::SeqCst); // seq 3, elsewhere
        let lines = reader.arrived(b"event 5\n");
        assert_eq!(markers(&lines), [("5".to_string(), 4, "taken")]);
        assert!(!w.later_than(4));
        w.seen.fetch_add(1, Ordering::SeqCst);
        assert!(w.later_than(4));
    }

    #[test]
    fn a_tree_without_processes_is_missing() {
        let w = MarkerWatch {
            root: u32::MAX - 1, // pid_max is at most 2^22: no such process
            ..watch()
        };
        let mut reader = LineReader::new(OutputStream::Stderr, Some(w));
        let lines = reader.arrived(b"event 9\n");
        assert_eq!(markers(&lines), [("9".to_string(), 0, "missing")]);
    }
}
