//! `alloclens merge`: every PATH identified and checked first (nothing is written when one is not
//! a result or is of a newer version), duplicates skipped, then each source written whole: its
//! tables' files, then its `sources` row; a failure removes that source's files and stops.
use std::path::{Path, PathBuf};

use crate::calls::write_calls;
use crate::layout::Dataset;
use crate::results_tables::tables;
use crate::sources::SourceKind;
use crate::sources::{duplicate_of, identify, known_sources, sources_table, Known, Source};
use crate::DatasetError;

#[derive(Debug, Clone, Default)]
pub struct MergeOptions {
    /// `--host`: the host name of every PATH, instead of the one each records.
    pub host: Option<String>,
}

/// What happened to one PATH, told as it happens.
#[derive(Debug, Clone)]
pub enum Notice {
    Skipped {
        path: PathBuf,
        source_id: String,
        merged_at: String,
    },
    Merged {
        path: PathBuf,
        rows: u64,
    },
    /// A damaged trace, merged up to its last whole chunk.
    Damaged {
        path: PathBuf,
        calls: u64,
        losses: String,
    },
}

#[derive(Debug, Clone, Default)]
pub struct MergeSummary {
    pub merged: usize,
    pub skipped: usize,
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
    let mut summary = MergeSummary::default();
    for source in &sources {
        if let Some(k) = duplicate_of(source, &known) {
            notify(Notice::Skipped {
                path: source.path.clone(),
                source_id: k.id.clone(),
                merged_at: k.merged_at.clone(),
            });
            summary.skipped += 1;
            continue;
        }
        let merged_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let mut written = Vec::new();
        match write_source(&dataset, source, &merged_at, &mut written) {
            Ok((rows, damage)) => {
                summary.merged += 1;
                summary.rows += rows;
                if let Some((calls, losses)) = damage {
                    summary.damaged += 1;
                    notify(Notice::Damaged {
                        path: source.path.clone(),
                        calls,
                        losses,
                    });
                }
                notify(Notice::Merged {
                    path: source.path.clone(),
                    rows,
                });
                known.push(Known::of(source, &merged_at));
            }
            Err(e) => {
                for f in &written {
                    let _ = safe_output::remove_written(f);
                }
                return Err(DatasetError::Source {
                    path: source.path.clone(),
                    merged_before: summary.merged,
                    error: Box::new(e),
                });
            }
        }
    }
    Ok(summary)
}

/// Writes one source's files, pushing each renamed one to `written` (removed by the caller on an
/// error); the `sources` row last. Returns the rows, and the calls and loss of a damaged trace.
fn write_source(
    dataset: &Dataset,
    source: &Source,
    merged_at: &str,
    written: &mut Vec<PathBuf>,
) -> Result<(u64, Option<(u64, String)>), DatasetError> {
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
        other_tables = tables(source)?;
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
    Ok((rows, damage))
}
