//! The tables of a results directory (run, run --ksm, replay, tune) and of a watch directory, from
//! their JSON and CSV files; columns and types in docs/dataset.md.
use std::path::Path;

use serde_json::Value;

use crate::parquet_file::Kind::{self, Double as F, Int64 as I, Text as T};
use crate::sources::{Source, SourceKind};
use crate::table::{Cell, Table};
use crate::DatasetError;

/// A column taken from a JSON object: name, type, JSON pointer.
type JsonColumn = (&'static str, Kind, &'static str);

const RUNS: &[JsonColumn] = &[
    ("run", I, "/index"),
    ("repeat", I, "/repeat"),
    ("variant", T, "/variant"),
    ("allocator", T, "/allocator"),
    ("baseline", T, "/=baseline"),
    ("params", T, "/params"),
    ("command_line", T, "/=command"),
    ("outcome", T, "/=outcome"),
    ("start_unix_ns", I, "/start_unix_ns"),
    ("wall_s", F, "/wall"),
    ("user_s", F, "/user"),
    ("sys_s", F, "/sys"),
    ("samples", I, "/memory/samples"),
    ("peak_pss", I, "/memory/pss/peak"),
    ("last_pss", I, "/memory/pss/last"),
    ("peak_rss", I, "/memory/rss/peak"),
    ("last_rss", I, "/memory/rss/last"),
    ("peak_uss", I, "/memory/uss/peak"),
    ("peak_vss", I, "/memory/vss/peak"),
    ("peak_swap", I, "/memory/swap/peak"),
    ("peak_anon", I, "/memory/anon/peak"),
    ("mean_pss", F, "/memory/pss/mean"),
    ("mean_rss", F, "/memory/rss/mean"),
    ("mean_uss", F, "/memory/uss/mean"),
    ("max_processes", I, "/memory/max_processes"),
    ("kernel_peak_rss", I, "/memory/kernel_peak_rss"),
    ("markers", I, "/markers"),
    ("throughput", F, "/throughput"),
    ("throughput_source", T, "/throughput_source"),
    ("allocator_check", T, "/allocator_check"),
    ("sampler_cpu_s", F, "/sampler_cpu"),
    ("ksm_merging_enabled", I, "/ksm/merging_enabled"),
    ("ksm_merging_peak", I, "/ksm/merging/peak"),
    ("ksm_sharing_peak", I, "/ksm/sharing/peak"),
    ("ksm_merging_mean", F, "/ksm/merging/mean"),
    ("ksm_settle_s", F, "/ksm/settle_s"),
    ("ksmd_cpu_s", F, "/ksm/ksmd_cpu_s"),
    ("ksmd_cpu_pct", F, "/ksm/ksmd_cpu_pct"),
];

const SUMMARY: &[JsonColumn] = &[
    ("params", T, "/=params"),
    ("baseline", T, "/=baseline"),
    ("variant", T, "/variant"),
    ("ranked_by", T, "/=ranked_by"),
    ("allocator_check", T, "/allocator_check"),
    ("runs", I, "/runs"),
    ("failed", I, "/failed"),
    ("wall_median", F, "/wall_median"),
    ("wall_mean", F, "/wall_mean"),
    ("wall_stddev", F, "/wall_stddev"),
    ("throughput_median", F, "/throughput_median"),
    ("peak_pss_median", F, "/peak_pss_median"),
    ("mean_pss_median", F, "/mean_pss_median"),
    ("peak_rss_median", F, "/peak_rss_median"),
    ("mean_rss_median", F, "/mean_rss_median"),
    ("wall_ratio", F, "/wall_ratio"),
    ("throughput_ratio", F, "/throughput_ratio"),
    ("peak_pss_ratio", F, "/peak_pss_ratio"),
    ("mean_pss_ratio", F, "/mean_pss_ratio"),
    ("peak_rss_ratio", F, "/peak_rss_ratio"),
];

const KSM: &[JsonColumn] = &[
    ("variant", T, "/variant"),
    ("params", T, "/params"),
    ("runs_off", I, "/runs_off"),
    ("runs_on", I, "/runs_on"),
    ("peak_pss_off", F, "/peak_pss_off"),
    ("peak_pss_on", F, "/peak_pss_on"),
    ("mean_pss_off", F, "/mean_pss_off"),
    ("mean_pss_on", F, "/mean_pss_on"),
    ("last_pss_off", F, "/last_pss_off"),
    ("last_pss_on", F, "/last_pss_on"),
    ("saved_mean", F, "/saved_mean"),
    ("saved_mean_pct", F, "/saved_mean_pct"),
    ("saved_peak", F, "/saved_peak"),
    ("saved_peak_pct", F, "/saved_peak_pct"),
    ("kernel_sharing", F, "/kernel_sharing"),
    ("kernel_merging", F, "/kernel_merging"),
    ("settle_s", F, "/settle_s"),
    ("ksmd_cpu_pct", F, "/ksmd_cpu_pct"),
];

const MACHINES: &[JsonColumn] = &[
    ("hostname", T, "/host/hostname"),
    ("kernel", T, "/host/kernel"),
    ("cpu_model", T, "/host/cpu_model"),
    ("cpus", I, "/host/cpus"),
    ("memory_bytes", I, "/host/memory_bytes"),
    ("allocators", T, "/=allocators"),
    ("created", T, "/created"),
];

const WATCHES: &[JsonColumn] = &[
    ("command_line", T, "/=command"),
    ("variant", T, "/variant"),
    ("allocator", T, "/allocator"),
    ("interval_s", F, "/interval_s"),
    ("started_unix_ms", I, "/started_unix_ms"),
    ("ending", T, "/ending"),
    ("verdict", T, "/verdict/class"),
    ("samples_kept", I, "/samples_kept"),
    ("peak_rss", I, "/peak_rss"),
];

/// A CSV file's known columns and their types; the others are kept as text unless `drop_prefix`.
struct CsvTable {
    kind: &'static str,
    file: &'static str,
    columns: &'static [(&'static str, Kind)],
    /// Columns left out (samples.csv's `param_*`: they are in `runs`).
    drop_prefix: Option<&'static str>,
}

const SAMPLES: CsvTable = CsvTable {
    kind: "samples",
    file: "samples.csv",
    columns: &[
        ("run", I),
        ("variant", T),
        ("repeat", I),
        ("t_s", F),
        ("sample_kind", T),
        ("label", T),
        ("scope", T),
        ("pid", I),
        ("ppid", I),
        ("comm", T),
        ("rss", I),
        ("pss", I),
        ("uss", I),
        ("vss", I),
        ("swap", I),
        ("anon", I),
        ("pss_age", I),
        ("ksm_merging", I),
        ("ksm_profit", I),
        ("ksm_rmap_items", I),
        ("ksm_shared", I),
        ("ksm_sharing", I),
        ("ksm_unshared", I),
        ("ksm_volatile", I),
        ("ksm_full_scans", I),
        ("ksm_general_profit", I),
        ("ksm_zero", I),
        ("ksmd_cpu_s", F),
    ],
    drop_prefix: Some("param_"),
};

const MARKERS: CsvTable = CsvTable {
    kind: "markers",
    file: "markers.csv",
    columns: &[
        ("run", I),
        ("variant", T),
        ("repeat", I),
        ("t_s", F),
        ("label", T),
        ("pss", I),
        ("rss", I),
        ("vss", I),
        ("status", T),
        ("delay_s", F),
        ("pss_status", T),
        ("pss_delay_s", F),
        ("line", T),
    ],
    drop_prefix: Some("param_"),
};

/// The replay's files: columns as the replay crate, which writes them, declares them.
const REPLAY_COLUMNS: [(&str, Kind); replay::files::REPLAY_COLUMNS.len()] =
    kinds(replay::files::REPLAY_COLUMNS);
const ORIGINAL_COLUMNS: [(&str, Kind); replay::files::ORIGINAL_COLUMNS.len()] =
    kinds(replay::files::ORIGINAL_COLUMNS);

const fn kinds<const N: usize>(
    columns: [(&'static str, replay::files::Column); N],
) -> [(&'static str, Kind); N] {
    let mut out = [("", T); N];
    let mut i = 0;
    while i < N {
        out[i] = (
            columns[i].0,
            match columns[i].1 {
                replay::files::Column::Int => I,
                replay::files::Column::Float => F,
                replay::files::Column::Text => T,
            },
        );
        i += 1;
    }
    out
}

const REPLAY: CsvTable = CsvTable {
    kind: "replay",
    file: replay::files::REPLAY_CSV,
    columns: &REPLAY_COLUMNS,
    drop_prefix: None,
};

const REPLAY_ORIGINAL: CsvTable = CsvTable {
    kind: "replay_original",
    file: replay::files::ORIGINAL_CSV,
    columns: &ORIGINAL_COLUMNS,
    drop_prefix: None,
};

const TUNE_CANDIDATES: CsvTable = CsvTable {
    kind: "tune_candidates",
    file: "candidates.csv",
    columns: &[
        ("id", I),
        ("label", T),
        ("allocator", T),
        ("settings", T),
        ("origin", T),
        ("status", T),
        ("runs", I),
        ("failed_runs", I),
        ("mean_pss", F),
        ("mean_pss_sd", F),
        ("peak_pss", F),
        ("peak_pss_sd", F),
        ("wall_s", F),
        ("wall_sd", F),
        ("throughput", F),
        ("throughput_sd", F),
        ("mean_pss_ratio", F),
        ("mean_pss_ratio_sd", F),
        ("wall_ratio", F),
        ("wall_ratio_sd", F),
        ("pareto", I),
        ("recommended", I),
        ("dropped_at_s", F),
        ("why", T),
    ],
    drop_prefix: None,
};

const WATCH_SAMPLES: CsvTable = CsvTable {
    kind: "watch_samples",
    file: "samples.csv",
    columns: &[
        ("t_s", F),
        ("unix_ms", I),
        ("processes", I),
        ("rss", I),
        ("pss", I),
        ("heap", I),
        ("file", I),
        ("stack", I),
        ("other", I),
        ("agent_processes", I),
        ("live_bytes", I),
        ("live_blocks", I),
        ("rss_unmeasured", I),
        ("handed_out", I),
        ("free_resident", I),
        ("returned", I),
        ("metadata", I),
        ("heap_total", I),
        ("free_chunks", I),
    ],
    drop_prefix: None,
};

/// The tables of a results or watch directory (empty ones left out), in writing order, and one
/// line per CSV file whose damaged lines were left out (the source's `losses`).
pub struct SourceTables {
    pub tables: Vec<Table>,
    pub losses: Vec<String>,
}

pub fn tables(source: &Source) -> Result<SourceTables, DatasetError> {
    let json = &source.json;
    let mut out = Vec::new();
    let mut losses = Vec::new();
    if source.kind == SourceKind::Watch {
        out.push(json_table(
            "watches",
            WATCHES,
            std::slice::from_ref(json),
            source,
        ));
        out.push(csv_table(
            &WATCH_SAMPLES,
            &source.path,
            &source.id,
            &mut losses,
        )?);
    } else {
        let runs = array(json.get("runs"));
        out.push(json_table("runs", RUNS, &runs, source));
        out.push(json_table("summary", SUMMARY, &summary_rows(json), source));
        out.push(json_table(
            "ksm",
            KSM,
            &array(json.get("ksm_savings")),
            source,
        ));
        for csv in [
            &SAMPLES,
            &MARKERS,
            &REPLAY,
            &REPLAY_ORIGINAL,
            &TUNE_CANDIDATES,
        ] {
            out.push(csv_table(csv, &source.path, &source.id, &mut losses)?);
        }
        out.push(json_table(
            "machines",
            MACHINES,
            std::slice::from_ref(json),
            source,
        ));
    }
    out.retain(|t| !t.rows.is_empty());
    Ok(SourceTables {
        tables: out,
        losses,
    })
}

fn array(v: Option<&Value>) -> Vec<Value> {
    v.and_then(Value::as_array).cloned().unwrap_or_default()
}

/// summary[] is per point, each with its variants: one object per (point, variant), with the
/// point's params, baseline and ranking.
fn summary_rows(json: &Value) -> Vec<Value> {
    let mut rows = Vec::new();
    for point in array(json.get("summary")) {
        for mut v in array(point.get("variants")) {
            if let Some(o) = v.as_object_mut() {
                for key in ["params", "baseline", "ranked_by"] {
                    let value = point.get(key).cloned().unwrap_or(Value::Null);
                    o.insert(format!("={key}"), value);
                }
            }
            rows.push(v);
        }
    }
    rows
}

fn json_table(
    kind: &'static str,
    columns: &[JsonColumn],
    objects: &[Value],
    source: &Source,
) -> Table {
    let specs: Vec<(&str, Kind)> = columns.iter().map(|(n, k, _)| (*n, *k)).collect();
    let mut table = Table::new(kind, &specs);
    for object in objects {
        let cells = columns
            .iter()
            .map(|(_, kind, pointer)| match *pointer {
                "/=command" => Cell::Text(joined(object.get("command"))),
                "/=outcome" => Cell::Text(outcome(object.get("ending"))),
                "/=baseline" => Cell::from_json(
                    object
                        .get("=baseline")
                        .or_else(|| source.json.get("baseline")),
                    *kind,
                ),
                "/=ranked_by" => Cell::Text(
                    object
                        .get("=ranked_by")
                        .and_then(Value::as_str)
                        .unwrap_or("wall")
                        .to_string(),
                ),
                "/=allocators" => Cell::Text(allocators(object.get("variants"))),
                "/params" | "/=params" => {
                    let p = object.pointer(pointer);
                    Cell::Text(
                        p.filter(|p| p.is_object())
                            .map_or_else(|| "{}".to_string(), Value::to_string),
                    )
                }
                p => Cell::from_json(object.pointer(p), *kind),
            })
            .collect();
        table.push(&source.id, cells);
    }
    table
}

fn joined(v: Option<&Value>) -> String {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().map_or_else(|| s.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// `runs[].ending` in one word or two, as the summary's `failures` says it.
fn outcome(ending: Option<&Value>) -> String {
    let Some(e) = ending else {
        return "ok".into();
    };
    let truthy = |k: &str| e.get(k).and_then(Value::as_bool).unwrap_or(false);
    if e.get("spawn_error").is_some_and(|v| !v.is_null()) {
        return "not started".into();
    }
    if truthy("timed_out") {
        return "timeout".into();
    }
    if truthy("interrupted") {
        return "interrupted".into();
    }
    if let Some(s) = e.pointer("/status/signal").and_then(Value::as_i64) {
        return format!("signal {s}");
    }
    match e.pointer("/status/code").and_then(Value::as_i64) {
        Some(0) | None => "ok".into(),
        Some(c) => format!("exit {c}"),
    }
}

/// The variants' allocators and versions: `glibc 2.36; jemalloc 5.3.0`, each once.
fn allocators(variants: Option<&Value>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for v in array(variants) {
        let name = v.get("allocator").and_then(Value::as_str).unwrap_or("");
        let version = v.get("version").and_then(Value::as_str).unwrap_or("");
        let entry = format!("{name} {version}").trim().to_string();
        if !entry.is_empty() && !seen.contains(&entry) {
            seen.push(entry);
        }
    }
    seen.join("; ")
}

/// The dataset's name of a CSV column: the hive partition keys (`kind`, `host`, `command`) would
/// hide a file column of the same name in DuckDB and Spark, so those are renamed.
fn column_name(csv: &str) -> String {
    match csv {
        "kind" => "sample_kind".to_string(),
        "host" => "host_name".to_string(),
        "command" => "command_line".to_string(),
        other => other.to_string(),
    }
}

/// How many damaged lines of a file are named in its loss line; the others are counted.
const NAMED: usize = 3;

/// A CSV file of the directory as a table (none when the file is absent). A damaged line (another
/// number of fields than the header, a typed column holding what is not its type, a negative size
/// or count, a last line cut without its end of line) is left out and named in `losses`: merged,
/// it would be a row of nulls or of wrong figures that every query counts.
fn csv_table(
    spec: &CsvTable,
    dir: &Path,
    source_id: &str,
    losses: &mut Vec<String>,
) -> Result<Table, DatasetError> {
    let path = dir.join(spec.file);
    let empty = Table::new(spec.kind, &[]);
    if !path.is_file() {
        return Ok(empty);
    }
    let bytes = std::fs::read(&path).map_err(|e| DatasetError::Io {
        path: path.clone(),
        message: e.to_string(),
    })?;
    let err = |e: csv::Error| DatasetError::Io {
        path: path.clone(),
        message: e.to_string(),
    };
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(bytes.as_slice());
    let header: Vec<String> = reader
        .headers()
        .map_err(err)?
        .iter()
        .map(str::to_string)
        .collect();
    // The declared columns first, in their order; then the ones this alloclens does not know.
    let mut columns: Vec<(String, Kind, Option<usize>)> = spec
        .columns
        .iter()
        .map(|(n, k)| {
            (
                n.to_string(),
                *k,
                header.iter().position(|h| column_name(h) == *n),
            )
        })
        .collect();
    for (i, h) in header.iter().enumerate() {
        let known = spec.columns.iter().any(|(n, _)| *n == column_name(h));
        let dropped = spec.drop_prefix.is_some_and(|p| h.starts_with(p));
        if !known && !dropped {
            columns.push((column_name(h), T, Some(i)));
        }
    }
    let specs: Vec<(&str, Kind)> = columns.iter().map(|(n, k, _)| (n.as_str(), *k)).collect();
    let mut table = Table::new(spec.kind, &specs);
    let ends_with_newline = bytes.ends_with(b"\n");
    let mut damaged: Vec<String> = Vec::new();
    let mut records = reader.records().peekable();
    while let Some(record) = records.next() {
        let is_last = records.peek().is_none();
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line());
                damaged.push(format!("line {line}: not CSV ({e})"));
                continue;
            }
        };
        let line = record.position().map_or(0, |p| p.line());
        let cells: Vec<Cell> = columns
            .iter()
            .map(|(_, kind, i)| Cell::from_csv(i.and_then(|i| record.get(i)), *kind))
            .collect();
        let problem = if is_last && !ends_with_newline {
            Some("cut (no end of line: the writer was stopped in it)".to_string())
        } else if record.len() != header.len() {
            Some(format!("{} fields, not {}", record.len(), header.len()))
        } else {
            columns
                .iter()
                .zip(&cells)
                .find_map(|((name, kind, i), cell)| {
                    let field = i.and_then(|i| record.get(i)).unwrap_or("");
                    bad_value(name, *kind, field, cell)
                })
        };
        match problem {
            Some(p) => damaged.push(format!("line {line}: {p}")),
            None => table.push(source_id, cells),
        }
    }
    if !damaged.is_empty() {
        let more = damaged.len().saturating_sub(NAMED);
        losses.push(format!(
            "{} left out {} damaged line{} of {} ({}{})",
            spec.file,
            damaged.len(),
            if damaged.len() == 1 { "" } else { "s" },
            table.rows.len() + damaged.len(),
            damaged[..damaged.len().min(NAMED)].join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        ));
    }
    Ok(table)
}

/// Why a field is not what its column holds: a typed column's text that is not a number, or a
/// negative size, count or time (only the KSM profits may be negative).
fn bad_value(name: &str, kind: Kind, field: &str, cell: &Cell) -> Option<String> {
    if field.is_empty() || kind == T {
        return None;
    }
    let negative = match cell {
        Cell::Null => return Some(format!("`{name}` holds '{field}', not a number")),
        Cell::Int(v) => *v < 0,
        Cell::Float(v) => {
            if !v.is_finite() {
                return Some(format!("`{name}` holds '{field}', not a finite number"));
            }
            *v < 0.0
        }
        Cell::Text(_) => false,
    };
    (negative && !name.contains("profit")).then(|| format!("`{name}` holds {field}, below 0"))
}
