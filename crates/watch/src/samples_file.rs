//! DIR/samples.csv read back for `report`, saying what is wrong with it: every readable row is
//! kept (the charts show them), and an empty, cut or garbled file is named with its first bad
//! lines, so a page never shows empty charts beside "31 samples kept" without a word.

use std::path::Path;

use crate::history::WatchSample;

/// How many bad lines are named one by one; the others are counted.
const NAMED: usize = 3;

/// The readable samples of a samples.csv and, when it is not whole, what is wrong (sentences).
#[derive(Debug, Default)]
pub struct SamplesRead {
    pub samples: Vec<WatchSample>,
    pub damage: Vec<String>,
}

/// What watch.json says the file should hold.
#[derive(Debug, Clone, Copy)]
pub struct Expected {
    /// Samples kept at the end of the watch; None for a watch that did not finish (killed).
    pub kept: Option<u64>,
}

/// The header line a watch writes: the fields of [`WatchSample`], in order.
pub fn header() -> Vec<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.serialize(WatchSample::default());
    let text = w.into_inner().unwrap_or_default();
    let first = text.split(|&b| b == b'\n').next().unwrap_or_default();
    String::from_utf8_lossy(first)
        .split(',')
        .map(str::to_string)
        .collect()
}

/// Columns added to samples.csv after its first version, last in the header and defaulted when
/// missing: a file written by an earlier alloclens stops before them and is not damaged.
const LATER_COLUMNS: usize = 1;

/// Reads `path`, a watch's samples.csv.
pub fn read_samples_checked(path: &Path, expected: Expected) -> SamplesRead {
    let name = path.display();
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            return SamplesRead {
                samples: Vec::new(),
                damage: vec![format!("{name} cannot be read ({e}): no samples to draw")],
            }
        }
    };
    if bytes.is_empty() {
        let damage = match expected.kept {
            Some(0) => Vec::new(),
            Some(n) => vec![format!(
                "{name} is empty, but watch.json says {n} samples were kept: the file was emptied or replaced after the watch; the charts are empty"
            )],
            None => vec![format!(
                "{name} is empty: no sample was taken (alloclens was killed before the first one, or the command could not start); there is nothing to judge"
            )],
        };
        return SamplesRead {
            samples: Vec::new(),
            damage,
        };
    }
    let mut header = header();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes.as_slice());
    let mut header_record = csv::StringRecord::from(header.clone());
    // An earlier alloclens's header: the current one without the later columns.
    let earliest = header.len() - LATER_COLUMNS;
    let mut samples = Vec::new();
    let mut bad: Vec<String> = Vec::new();
    let mut bad_lines = 0usize;
    let mut first = true;
    // The last row stops short (no newline, too few columns): what a kill mid-write leaves.
    let mut last_row_cut = false;
    let mut note = |line: u64, what: String, bad: &mut Vec<String>| {
        bad_lines += 1;
        if bad.len() < NAMED {
            bad.push(format!("line {line}: {what}"));
        }
    };
    let ends_with_newline = bytes.ends_with(b"\n");
    let mut records = reader.records().peekable();
    while let Some(record) = records.next() {
        let is_last = records.peek().is_none();
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line());
                note(line, format!("not CSV ({e})"), &mut bad);
                continue;
            }
        };
        let line = record.position().map_or(0, |p| p.line());
        if first {
            first = false;
            if record == header_record {
                continue;
            }
            if (earliest..header.len()).contains(&record.len())
                && record
                    .iter()
                    .eq(header[..record.len()].iter().map(String::as_str))
            {
                header.truncate(record.len());
                header_record = record;
                continue;
            }
            note(
                line,
                format!(
                    "not the header a watch writes (`{}`...)",
                    header[..4].join(",")
                ),
                &mut bad,
            );
            // Rows may still be readable by position.
            if record.get(0).is_some_and(|f| f.parse::<f64>().is_err()) {
                continue;
            }
        }
        if record.len() != header.len() {
            let cut = is_last && !ends_with_newline && record.len() < header.len();
            last_row_cut |= cut;
            note(
                line,
                if cut {
                    format!("cut after {} of {} columns", record.len(), header.len())
                } else {
                    format!("{} columns, not {}", record.len(), header.len())
                },
                &mut bad,
            );
            continue;
        }
        match record.deserialize::<WatchSample>(Some(&header_record)) {
            Ok(s) => samples.push(s),
            Err(e) => {
                let field = match e.kind() {
                    csv::ErrorKind::Deserialize { err, .. } => err.field(),
                    _ => None,
                };
                let what = match field {
                    Some(i) => format!(
                        "column `{}` holds '{}', not a number",
                        header.get(i as usize).map_or("?", String::as_str),
                        record.get(i as usize).unwrap_or("")
                    ),
                    None => e.to_string(),
                };
                note(line, what, &mut bad);
            }
        }
    }
    let mut damage = Vec::new();
    // A watch killed while writing a row leaves that last row cut: expected, said gently.
    let killed_mid_row = expected.kept.is_none() && bad_lines == 1 && last_row_cut;
    if killed_mid_row {
        damage.push(format!(
            "{name}: the last row ({}) is skipped: the watch was killed while writing it",
            bad[0]
        ));
    } else if bad_lines > 0 {
        let more = bad_lines.saturating_sub(NAMED);
        damage.push(format!(
            "{name} is damaged: {}{}; the charts show the {} readable samples",
            bad.join("; "),
            if more > 0 {
                format!(" (and {more} more bad lines)")
            } else {
                String::new()
            },
            samples.len()
        ));
    }
    if let Some(kept) = expected.kept {
        if (samples.len() as u64) < kept && bad_lines == 0 {
            damage.push(format!(
                "{name} holds {} samples, but watch.json says {kept} were kept: the file was cut or replaced after the watch",
                samples.len()
            ));
        }
    }
    SamplesRead { samples, damage }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, kept: Option<u64>) -> SamplesRead {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("samples.csv");
        std::fs::write(&path, text).unwrap();
        read_samples_checked(&path, Expected { kept })
    }

    fn whole(n: usize) -> String {
        let mut text = header().join(",") + "\n";
        for i in 0..n {
            text += &format!("{i}.0,{},1,100,90,50,20,10,20,1,64,2,,,,,,,\n", 1000 + i);
        }
        text
    }

    #[test]
    fn whole_file_has_no_damage() {
        let r = read(&whole(3), Some(3));
        assert_eq!(r.samples.len(), 3);
        assert!(r.damage.is_empty(), "{:?}", r.damage);
        assert_eq!(r.samples[2].live_bytes, Some(64));
        assert_eq!(r.samples[2].handed_out, None);
    }

    /// A samples.csv of an alloclens from before `rss_unmeasured`: read whole, not damaged.
    #[test]
    fn earlier_files_without_the_later_columns_are_not_damage() {
        let columns = header();
        let mut text = columns[..columns.len() - LATER_COLUMNS].join(",") + "\n";
        for i in 0..3 {
            text += &format!("{i}.0,{},1,100,90,50,20,10,20,1,64,2,,,,,,\n", 1000 + i);
        }
        let r = read(&text, Some(3));
        assert!(r.damage.is_empty(), "{:?}", r.damage);
        assert_eq!(r.samples.len(), 3);
        assert_eq!(r.samples[2].rss_unmeasured, None);
    }

    #[test]
    fn garbage_line_is_named_and_the_rest_kept() {
        let mut text = whole(3);
        text = text.replacen("1.0,1001,1,100", "1.0,1001,1,1x0", 1);
        let r = read(&text, Some(3));
        assert_eq!(r.samples.len(), 2);
        assert_eq!(r.damage.len(), 1, "{:?}", r.damage);
        assert!(
            r.damage[0].contains("line 3: column `rss` holds '1x0', not a number"),
            "{}",
            r.damage[0]
        );
        assert!(r.damage[0].contains("the 2 readable samples"));
    }

    #[test]
    fn empty_file_of_a_finished_watch_is_damage() {
        let r = read("", Some(31));
        assert!(r.damage[0].contains("is empty, but watch.json says 31 samples were kept"));
        assert!(read("", Some(0)).damage.is_empty());
    }

    #[test]
    fn cut_last_row_of_a_killed_watch_is_expected() {
        let text = whole(3) + "3.0,1003,1,";
        let r = read(&text, None);
        assert_eq!(r.samples.len(), 3);
        assert!(
            r.damage[0].contains("killed while writing it"),
            "{:?}",
            r.damage
        );
        // the same cut in a finished watch is damage
        let r = read(&text, Some(4));
        assert!(r.damage[0].contains("is damaged: line 5: cut after 4 of 19 columns"));
    }

    #[test]
    fn file_cut_short_after_the_watch_is_said() {
        let r = read(&whole(2), Some(31));
        assert!(r.damage[0].contains("holds 2 samples, but watch.json says 31 were kept"));
    }

    #[test]
    fn binary_garbage_is_damage_not_a_panic() {
        let r = read("\u{0}\u{1}\u{2}garbage\n\u{ff}\u{fe}", Some(5));
        assert!(r.samples.is_empty());
        assert!(r.damage[0].contains("is damaged: line 1"), "{:?}", r.damage);
    }
}
