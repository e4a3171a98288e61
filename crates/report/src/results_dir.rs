//! The results directory of `alloclens run`: results.json, samples.csv, markers.csv and, on request,
//! the command's output per run. Samples and markers are written as they arrive, so an interrupted or
//! crashed session keeps everything gathered so far.
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use procmem::{MemoryTotals, ProcessMemory, TreeSample};
use runner::{Execution, Group, MarkerRecord, Param, RunSpec, SampleKind};
use serde::Serialize;

use crate::host::HostInfo;

/// Bumped when a field of results.json changes meaning or disappears (additions keep the version).
pub const RESULTS_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ResultsDirError {
    #[error("output directory '{0}' already exists (choose another with -o, or pass --force to write into it)")]
    Exists(PathBuf),
    #[error("cannot write results in '{path}': {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// How a variant was configured, as results.json records it.
#[derive(Debug, Clone, Serialize)]
pub struct VariantInfo {
    pub label: String,
    pub allocator: String,
    pub library: Option<PathBuf>,
    pub version: Option<String>,
    pub settings: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
}

/// Everything results.json holds (schema in docs/results-format.md).
#[derive(Debug, Serialize)]
pub struct RunResults<'a> {
    pub schema_version: u32,
    pub tool: &'static str,
    pub tool_version: &'static str,
    pub created: String,
    pub host: HostInfo,
    pub command: &'a [String],
    pub params: &'a [Param],
    pub repeats: u32,
    pub interval_s: f64,
    pub marker: Option<String>,
    pub throughput: Option<String>,
    pub baseline: Option<String>,
    pub variants: Vec<VariantInfo>,
    pub interrupted: bool,
    pub warnings: Vec<String>,
    pub runs: &'a [runner::RunRecord],
    pub summary: &'a [Group],
}

pub struct ResultsDir {
    dir: PathBuf,
    param_names: Vec<String>,
    samples: csv::Writer<BufWriter<File>>,
    markers: csv::Writer<BufWriter<File>>,
    save_output: bool,
    output_file: Option<(usize, BufWriter<File>)>,
}

const SAMPLE_COLUMNS: [&str; 15] = [
    "run", "variant", "repeat", "t_s", "kind", "label", "scope", "pid", "ppid", "comm", "rss",
    "pss", "uss", "vss", "swap",
];

impl ResultsDir {
    /// Creates the directory (refusing an existing one unless `force`) and the CSV files with headers.
    pub fn create(
        dir: &Path,
        force: bool,
        params: &[Param],
        save_output: bool,
    ) -> Result<ResultsDir, ResultsDirError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ResultsDirError::Io { path, source }
        };
        if dir.exists() && !force {
            return Err(ResultsDirError::Exists(dir.to_path_buf()));
        }
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let param_names: Vec<String> = params.iter().map(|p| p.name.clone()).collect();
        let open = |name: &str| -> Result<csv::Writer<BufWriter<File>>, ResultsDirError> {
            let path = dir.join(name);
            let file = File::create(&path).map_err(io_err(&path))?;
            Ok(csv::Writer::from_writer(BufWriter::new(file)))
        };
        let mut samples = open("samples.csv")?;
        let mut header: Vec<String> = SAMPLE_COLUMNS.iter().map(|s| s.to_string()).collect();
        header.extend(["anon".to_string(), "pss_age".to_string()]);
        header.extend(param_names.iter().map(|n| format!("param_{n}")));
        samples
            .write_record(&header)
            .map_err(|e| csv_err(dir, "samples.csv", e))?;
        let mut markers = open("markers.csv")?;
        let mut header: Vec<String> = [
            "run",
            "variant",
            "repeat",
            "t_s",
            "label",
            "pss",
            "rss",
            "vss",
            "status",
            "delay_s",
            "pss_status",
            "pss_delay_s",
            "line",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        header.extend(param_names.iter().map(|n| format!("param_{n}")));
        markers
            .write_record(&header)
            .map_err(|e| csv_err(dir, "markers.csv", e))?;
        if save_output {
            fs::create_dir_all(dir.join("output")).map_err(io_err(&dir.join("output")))?;
        }
        Ok(ResultsDir {
            dir: dir.to_path_buf(),
            param_names,
            samples,
            markers,
            save_output,
            output_file: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn param_values(&self, spec: &RunSpec) -> Vec<String> {
        self.param_names
            .iter()
            .map(|n| spec.assignment.get(n).cloned().unwrap_or_default())
            .collect()
    }

    /// Appends one row per process and one `total` row for the tree.
    pub fn write_sample(
        &mut self,
        spec: &RunSpec,
        variant: &str,
        t_s: f64,
        kind: &SampleKind,
        label: Option<&str>,
        sample: &TreeSample,
    ) -> Result<(), ResultsDirError> {
        let kind = match kind {
            SampleKind::Interval => "interval",
            SampleKind::Marker => "marker",
        };
        let params = self.param_values(spec);
        let base = |scope: &str, pid: String, ppid: String, comm: &str| -> Vec<String> {
            vec![
                spec.index.to_string(),
                variant.to_string(),
                spec.repeat.to_string(),
                format!("{t_s:.4}"),
                kind.to_string(),
                label.unwrap_or("").to_string(),
                scope.to_string(),
                pid,
                ppid,
                comm.to_string(),
            ]
        };
        for p in &sample.processes {
            let mut row = base("process", p.pid.to_string(), p.ppid.to_string(), &p.comm);
            row.extend(process_figures(p));
            row.push(p.pss_age.to_string());
            row.extend(params.iter().cloned());
            self.samples
                .write_record(&row)
                .map_err(|e| csv_err(&self.dir, "samples.csv", e))?;
        }
        let mut row = base("total", String::new(), String::new(), "");
        row.extend(total_figures(&sample.total));
        // The total's PSS is as old as its oldest part.
        let oldest = sample.processes.iter().map(|p| p.pss_age).max();
        row.push(oldest.unwrap_or(0).to_string());
        row.extend(params);
        self.samples
            .write_record(&row)
            .map_err(|e| csv_err(&self.dir, "samples.csv", e))
    }

    pub fn write_marker(
        &mut self,
        spec: &RunSpec,
        variant: &str,
        marker: &MarkerRecord,
    ) -> Result<(), ResultsDirError> {
        let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
        let seconds = |v: Option<f64>| v.map(|v| format!("{v:.6}")).unwrap_or_default();
        let mut row = vec![
            spec.index.to_string(),
            variant.to_string(),
            spec.repeat.to_string(),
            format!("{:.4}", marker.t),
            marker.label.clone(),
            opt(marker.pss),
            opt(marker.rss),
            opt(marker.vss),
            marker.status.as_str().to_string(),
            seconds(marker.delay),
            marker.pss_status.as_str().to_string(),
            seconds(marker.pss_delay),
            marker.line.clone(),
        ];
        row.extend(self.param_values(spec));
        self.markers
            .write_record(&row)
            .map_err(|e| csv_err(&self.dir, "markers.csv", e))
    }

    /// Saves a line of the command's output to output/run-N.log (only with save_output).
    pub fn write_output(&mut self, spec: &RunSpec, line: &[u8]) -> Result<(), ResultsDirError> {
        if !self.save_output {
            return Ok(());
        }
        if self.output_file.as_ref().map(|(i, _)| *i) != Some(spec.index) {
            let path = self
                .dir
                .join("output")
                .join(format!("run-{}.log", spec.index));
            let file =
                File::create(&path).map_err(|source| ResultsDirError::Io { path, source })?;
            self.output_file = Some((spec.index, BufWriter::new(file)));
        }
        let (_, file) = self.output_file.as_mut().expect("opened above");
        file.write_all(line).map_err(|source| ResultsDirError::Io {
            path: self.dir.join("output"),
            source,
        })
    }

    /// Flushes the CSV files (called after each run so an interruption loses nothing).
    pub fn flush(&mut self) -> Result<(), ResultsDirError> {
        let err = |path: PathBuf| move |source| ResultsDirError::Io { path, source };
        self.samples
            .flush()
            .map_err(err(self.dir.join("samples.csv")))?;
        self.markers
            .flush()
            .map_err(err(self.dir.join("markers.csv")))?;
        if let Some((_, f)) = self.output_file.as_mut() {
            f.flush().map_err(err(self.dir.join("output")))?;
        }
        Ok(())
    }

    pub fn write_results(&mut self, results: &RunResults<'_>) -> Result<PathBuf, ResultsDirError> {
        self.flush()?;
        let path = self.dir.join("results.json");
        let write = || -> io::Result<()> {
            let mut f = BufWriter::new(File::create(&path)?);
            serde_json::to_writer_pretty(&mut f, results)?;
            f.write_all(b"\n")?;
            f.flush()
        };
        write().map_err(|source| ResultsDirError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }
}

/// Runs that failed, as warnings for results.json and the terminal.
pub fn failure_warnings(execution: &Execution) -> Vec<String> {
    execution
        .runs
        .iter()
        .filter(|r| !r.ending.ok())
        .map(|r| {
            let detail = r
                .ending
                .spawn_error
                .clone()
                .unwrap_or_else(|| r.ending.describe());
            format!(
                "run {} ({}, repeat {}): {}",
                r.index, r.variant, r.repeat, detail
            )
        })
        .collect()
}

/// Runs whose markers did not all get their own figures, as warnings: the rows are in markers.csv,
/// flagged, but a reader of the summary should know they are there.
pub fn marker_warnings(execution: &Execution) -> Vec<String> {
    execution
        .runs
        .iter()
        .filter(|r| r.marker_figures.without() + r.marker_pss.without() > 0)
        .map(|r| {
            let (f, p) = (&r.marker_figures, &r.marker_pss);
            format!(
                "run {} ({}, repeat {}): of {} markers, {} have no RSS/VSS of their own ({} late: \
                 a later marker line had arrived first; {} missing: the command had exited) and {} \
                 no PSS of their own ({} late, {} missing); markers.csv says which (status, pss_status)",
                r.index,
                r.variant,
                r.repeat,
                r.markers,
                f.without(),
                f.late,
                f.missing,
                p.without(),
                p.late,
                p.missing
            )
        })
        .collect()
}

fn process_figures(p: &ProcessMemory) -> Vec<String> {
    [p.rss, p.pss, p.uss, p.vss, p.swap, p.anonymous]
        .iter()
        .map(u64::to_string)
        .collect()
}

fn total_figures(t: &MemoryTotals) -> Vec<String> {
    [t.rss, t.pss, t.uss, t.vss, t.swap, t.anonymous]
        .iter()
        .map(u64::to_string)
        .collect()
}

fn csv_err(dir: &Path, file: &str, e: csv::Error) -> ResultsDirError {
    ResultsDirError::Io {
        path: dir.join(file),
        source: io::Error::other(e),
    }
}
