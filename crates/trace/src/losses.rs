//! What reading a trace could not read, gathered while reading and said one way by every command
//! that reads traces (`analyze`, `report`, `diff`, `export`): the recorder's notes, the damage where
//! the scan of the file stopped, the streams whose reading stopped at a corrupt chunk, and a missing
//! trailer (the recorder did not finish).
use std::path::{Path, PathBuf};

use crate::error::{human_count, Damage, TraceError};
use crate::event::ProcessInfo;
use crate::reader::TraceReader;

/// What was lost reading one trace file. Start it with [`Losses::of`] once the file is open, add
/// each stream that stopped early with [`Losses::stream_stopped`], then say it with
/// [`Losses::warnings`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Losses {
    path: PathBuf,
    notes: Vec<String>,
    damage: Option<Damage>,
    trailer: bool,
    streams: Vec<StreamLoss>,
}

/// A stream whose reading stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamLoss {
    pub pid: u32,
    pub exec_index: u32,
    /// Why it stopped (names the file, the chunk and the byte offset).
    pub error: String,
    /// Records read before the stop (all of them used).
    pub records_read: u64,
}

impl Losses {
    /// What the scan of the file found: notes, damage, whether the trailer is there.
    pub fn of<R: std::io::Read + std::io::Seek>(reader: &TraceReader<R>) -> Losses {
        Losses {
            path: reader.path().to_path_buf(),
            notes: reader.notes().to_vec(),
            damage: reader.damage().cloned(),
            trailer: reader.trailer().is_some(),
            streams: Vec::new(),
        }
    }

    /// Reading the stream of `info` stopped at `error` after `records_read` records.
    pub fn stream_stopped(&mut self, info: &ProcessInfo, error: &TraceError, records_read: u64) {
        self.streams.push(StreamLoss {
            pid: info.pid,
            exec_index: info.exec_index,
            error: error.to_string(),
            records_read,
        });
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file ends with the trailer a finished recording writes. False when the recorder
    /// was killed or crashed, or when the file was cut.
    pub fn recorder_finished(&self) -> bool {
        self.trailer
    }

    /// Nothing lost and the recording finished (notes aside).
    pub fn is_complete(&self) -> bool {
        self.damage.is_none() && self.streams.is_empty() && self.trailer
    }

    pub fn damage(&self) -> Option<&Damage> {
        self.damage.as_ref()
    }

    pub fn streams(&self) -> &[StreamLoss] {
        &self.streams
    }

    /// One sentence per loss, each naming the file; `done` says what was made of the readable part
    /// ("analysed", "exported"). A damaged file also lacks its trailer: that one is said only when
    /// nothing else explains it.
    pub fn warnings(&self, done: &str) -> Vec<String> {
        let path = self.path.display();
        let mut out: Vec<String> = self
            .notes
            .iter()
            .map(|n| format!("'{path}': recorder note: {n}"))
            .collect();
        if let Some(d) = &self.damage {
            out.push(format!("'{path}' is {d}; {done} what precedes the damage"));
        } else if !self.trailer {
            out.push(format!(
                "'{path}' has no trailer: the recorder did not finish (it was killed or crashed, \
                 or the file was cut at a chunk boundary); {done} what it wrote"
            ));
        }
        for s in &self.streams {
            out.push(format!(
                "process {} (exec {}): {}; {done} its first {} records",
                s.pid,
                s.exec_index,
                s.error,
                human_count(s.records_read)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::event::{Event, Op, Record};
    use crate::format::{EndReason, TraceHeader, Trailer};
    use crate::writer::TraceWriter;

    /// A trace of one process (100 mallocs in chunks of 10), with a note; finished when `trailer`.
    fn trace(trailer: bool) -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
        let info = ProcessInfo {
            pid: 7,
            ppid: 1,
            exec_index: 0,
            cmdline: vec!["t".into()],
            start_unix_ns: 0,
            truncated: false,
        };
        let id = w.begin_process(&info).unwrap();
        let records: Vec<Record> = (0..100)
            .map(|seq| {
                Record::Event(Event {
                    seq,
                    t_ns: seq,
                    tid: 7,
                    stack: 0,
                    op: Op::Malloc,
                    addr: 0x1000 + 16 * seq,
                    size: 16,
                    old_addr: 0,
                })
            })
            .collect();
        w.write_records(id, &records, 10).unwrap();
        w.end_process(id, EndReason::Exit, 100).unwrap();
        w.note("tracing stopped").unwrap();
        let before_trailer = w.bytes_written() as usize;
        let mut out = w.finish(&Trailer::default()).unwrap();
        if !trailer {
            out.truncate(before_trailer);
        }
        out
    }

    fn losses(bytes: Vec<u8>) -> Losses {
        Losses::of(&TraceReader::from_reader(Cursor::new(bytes), "t.alt").unwrap())
    }

    #[test]
    fn a_finished_trace_says_only_its_notes() {
        let l = losses(trace(true));
        assert!(l.is_complete() && l.recorder_finished());
        assert_eq!(
            l.warnings("analysed"),
            ["'t.alt': recorder note: tracing stopped"]
        );
    }

    #[test]
    fn a_missing_trailer_is_said_unless_damage_explains_it() {
        let l = losses(trace(false));
        assert!(!l.recorder_finished() && !l.is_complete());
        let w = l.warnings("exported");
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[1].starts_with("'t.alt' has no trailer: the recorder did not finish"));
        assert!(w[1].ends_with("exported what it wrote"), "{w:?}");

        let mut cut = trace(true);
        cut.truncate(cut.len() - 30);
        let l = losses(cut);
        let w = l.warnings("analysed");
        assert!(l.damage().is_some() && !l.recorder_finished());
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[1].contains("is truncated after chunk"), "{w:?}");
    }
}
