//! `alloclens merge`: every PATH identified and checked first (nothing is written when one is not
//! a result or is of a newer version), duplicates skipped, then each source written whole: its
//! tables' files, then its `sources` row; a failure removes that source's files and stops. A more
//! complete copy of a source already merged partially (a trace merged while it was recorded, a cut
//! copy) replaces it; a less complete one is skipped.
use std::path::{Path, PathBuf};

use crate::calls::write_calls;
use crate::layout::Dataset;
use crate::results_tables::tables;
use crate::sources::SourceKind;
use crate::sources::{
    identify, known_sources, more_complete, same_as, sources_table, superseded, Known, Source,
};
use crate::DatasetError;

#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    /// `--host`: the host name of every PATH, instead of the one each records.
    pub host: Option<String>,
}

/// Why a PATH was not merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The same file, or a whole copy of the same run, is in the dataset.
    AlreadyIn,
    /// The dataset holds a partial copy of the same run that is at least as complete.
    LessComplete,
}

/// What happened to one PATH, told as it happens.
#[derive(Debug, Clone)]
pub enum Notice {
    Skipped {
        path: PathBuf,
        source_id: String,
        merged_at: String,
        reason: SkipReason,
    },
    Merged {
        path: PathBuf,
        rows: u64,
    },
    /// A more complete copy of a partially merged source took its place.
    Replaced {
        path: PathBuf,
        rows: u64,
        replaced_id: String,
        replaced_rows: u64,
        replaced_losses: String,
    },
    /// A damaged trace, merged up to its last whole chunk.
    Damaged {
        path: PathBuf,
        calls: u64,
        losses: String,
    },
    /// Damaged lines of a results directory's CSV files, left out (one line per file).
    LinesLeftOut {
        path: PathBuf,
        losses: Vec<String>,
    },
    /// Files of a source superseded by a more complete copy, or temporary files, that an earlier
    /// merge stopped before removing (Ctrl-C, SIGTERM, a crash), removed now.
    Cleaned {
        files: usize,
    },
}

#[derive(Debug, Clone, Default)]
pub struct MergeSummary {
    pub merged: usize,
    pub skipped: usize,
    pub replaced: usize,
    pub damaged: usize,
    pub rows: u64,
}

pub fn merge(
    paths: &[PathBuf],
    out: &Path,
    options: &MergeOptions,
    notify: &mut dyn FnMut(Notice),
) -> Result<MergeSummary, DatasetError> {
    // Checked before the dataset is touched: a wrong PATH leaves everything as it was.
    let sources = paths
        .iter()
        .map(|p| identify(p, options.host.as_deref()))
        .collect::<Result<Vec<Source>, _>>()?;
    let dataset = Dataset::open_or_create(out)?;
    let mut known = known_sources(&dataset)?;
    clean_up(&dataset, &mut known, notify)?;
    let mut summary = MergeSummary::default();
    for source in &sources {
        let earlier = same_as(source, &known).cloned();
        if let Some(k) = &earlier {
            // Only a partial copy can be bettered; the same file never.
            if k.checksum == source.checksum || k.losses.is_none() {
                notify(skipped(source, k, SkipReason::AlreadyIn));
                summary.skipped += 1;
                continue;
            }
        }
        let merged_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let mut written = Vec::new();
        let outcome = match write_source(&dataset, source, &merged_at, &mut written) {
            Ok(o) => o,
            Err(e) => {
                remove_all(&written);
                return Err(DatasetError::Source {
                    path: source.path.clone(),
                    merged_before: summary.merged,
                    error: Box::new(e),
                });
            }
        };
        if let Some(k) = &earlier {
            if !more_complete(outcome.rows, outcome.losses.as_deref(), k) {
                remove_all(&written);
                notify(skipped(source, k, SkipReason::LessComplete));
                summary.skipped += 1;
                continue;
            }
        }
        summary.merged += 1;
        summary.rows += outcome.rows;
        if let Some((calls, losses)) = &outcome.damage {
            summary.damaged += 1;
            notify(Notice::Damaged {
                path: source.path.clone(),
                calls: *calls,
                losses: losses.clone(),
            });
        }
        if !outcome.lines_left_out.is_empty() {
            summary.damaged += 1;
            notify(Notice::LinesLeftOut {
                path: source.path.clone(),
                losses: outcome.lines_left_out.clone(),
            });
        }
        if let Some(k) = earlier {
            remove_source(&dataset, &k.id)?;
            known.retain(|o| o.id != k.id);
            summary.replaced += 1;
            notify(Notice::Replaced {
                path: source.path.clone(),
                rows: outcome.rows,
                replaced_id: k.id,
                replaced_rows: k.rows,
                replaced_losses: k.losses.unwrap_or_default(),
            });
        } else {
            notify(Notice::Merged {
                path: source.path.clone(),
                rows: outcome.rows,
            });
        }
        known.push(Known::of(
            source,
            &merged_at,
            outcome.rows,
            outcome.losses.as_deref(),
        ));
    }
    Ok(summary)
}

fn skipped(source: &Source, k: &Known, reason: SkipReason) -> Notice {
    Notice::Skipped {
        path: source.path.clone(),
        source_id: k.id.clone(),
        merged_at: k.merged_at.clone(),
        reason,
    }
}

/// What an earlier merge stopped before finishing left behind: its temporary files, and a source
/// it had replaced by a more complete copy but not yet removed.
fn clean_up(
    dataset: &Dataset,
    known: &mut Vec<Known>,
    notify: &mut dyn FnMut(Notice),
) -> Result<(), DatasetError> {
    let mut files = 0;
    for k in superseded(known) {
        files += remove_source(dataset, &k.id)?;
        known.retain(|o| o.id != k.id);
    }
    for partial in dataset.stale_partials() {
        std::fs::remove_file(&partial).map_err(|e| DatasetError::Write {
            path: partial.clone(),
            message: e.to_string(),
        })?;
        files += 1;
    }
    if files > 0 {
        notify(Notice::Cleaned { files });
    }
    Ok(())
}

/// Removes every file of source `id` (its `sources` row first); returns how many.
fn remove_source(dataset: &Dataset, id: &str) -> Result<usize, DatasetError> {
    let files = dataset.source_files(id);
    for f in &files {
        std::fs::remove_file(f).map_err(|e| DatasetError::Write {
            path: f.clone(),
            message: e.to_string(),
        })?;
    }
    Ok(files.len())
}

/// Removes what a failed pass wrote: only regular files it wrote (never a device written into).
fn remove_all(files: &[PathBuf]) {
    for f in files {
        let _ = safe_output::remove_written(f);
    }
}

/// What writing one source made.
struct Written {
    rows: u64,
    /// The `losses` of its `sources` row.
    losses: Option<String>,
    /// A damaged trace's calls and loss.
    damage: Option<(u64, String)>,
    /// A results directory's damaged CSV lines, one line per file.
    lines_left_out: Vec<String>,
}

/// Writes one source's files, pushing each renamed one to `written` (removed by the caller on an
/// error); the `sources` row last.
fn write_source(
    dataset: &Dataset,
    source: &Source,
    merged_at: &str,
    written: &mut Vec<PathBuf>,
) -> Result<Written, DatasetError> {
    let command = source.command_partition();
    let file_name = format!("{}.parquet", source.id);
    let place = |kind: &str| -> Result<PathBuf, DatasetError> {
        let dir = if kind == "machines" || kind == "sources" {
            dataset.partition(kind, &source.host, None)
        } else {
            dataset.partition(kind, &source.host, Some(&command))
        };
        std::fs::create_dir_all(&dir).map_err(|e| DatasetError::Write {
            path: dir.clone(),
            message: e.to_string(),
        })?;
        Ok(dir.join(&file_name))
    };
    let mut rows = 0;
    let mut damage = None;
    let mut losses = None;
    let mut lines_left_out = Vec::new();
    let mut other_tables = Vec::new();
    if source.kind == SourceKind::Trace {
        let path = place("calls")?;
        let outcome = write_calls(&source.path, &source.id, &source.hostname, &path)?;
        written.extend(outcome.files.iter().cloned());
        rows += outcome.calls;
        if let Some(l) = &outcome.losses {
            damage = Some((outcome.calls, l.clone()));
            losses = Some(l.clone());
        }
        other_tables.push(outcome.traces);
        if !outcome.markers_table.rows.is_empty() {
            other_tables.push(outcome.markers_table);
        }
    } else {
        let made = tables(source)?;
        other_tables = made.tables;
        if !made.losses.is_empty() {
            losses = Some(made.losses.join("; "));
        }
        lines_left_out = made.losses;
    }
    for table in &other_tables {
        let path = place(table.kind)?;
        rows += table.write(&path).map_err(|message| DatasetError::Write {
            path: path.clone(),
            message,
        })?;
        written.push(path);
    }
    let sources = sources_table(source, merged_at, rows, losses.as_deref());
    let path = place("sources")?;
    sources
        .write(&path)
        .map_err(|message| DatasetError::Write {
            path: path.clone(),
            message,
        })?;
    written.push(path);
    Ok(Written {
        rows,
        losses,
        damage,
        lines_left_out,
    })
}
