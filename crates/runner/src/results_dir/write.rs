//! Writing a results directory: samples and markers are written as they arrive, so an interrupted or
//! crashed session keeps everything gathered so far; results.json last, at the end of the session.
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use procmem::{MemoryTotals, ProcessMemory, TreeSample};

use crate::plan::{Param, RunSpec};
use crate::results::{MarkerCounts, MarkerRecord, RunResults, SampleKind};
use crate::Execution;

#[derive(Debug, thiserror::Error)]
pub enum ResultsDirError {
    #[error("output directory '{0}' already exists (choose another with -o, or pass --force to write into it)")]
    Exists(PathBuf),
    #[error("cannot write results in '{path}': {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("output directory '{dir}' holds '{entry}', which alloclens did not write: --force only replaces an earlier alloclens session (choose another directory with -o)")]
    NotOurs { dir: PathBuf, entry: String },
    #[error("output '{0}' is a file, not a directory (choose another with -o)")]
    NotADirectory(PathBuf),
    #[error("{0}")]
    Locked(#[from] safe_output::LockError),
}

pub struct ResultsDir {
    dir: PathBuf,
    param_names: Vec<String>,
    samples: RunCsv,
    markers: RunCsv,
    output: OutputLogs,
    /// Runs finished so far (they run in index order).
    runs_done: usize,
    results_json: Option<String>,
    /// Files of the caller's own that could not be written (`note_problem`).
    other_files: Vec<String>,
    /// Whether samples.csv has the KSM columns (`run --ksm`).
    ksm: bool,
    /// One session per directory, held until the session ends.
    _lock: safe_output::DirLock,
}

/// samples.csv's KSM columns (`run --ksm`), after `pss_age`: the tree's, then the system's (empty in
/// process rows). Sizes in bytes.
const KSM_COLUMNS: [&str; 11] = [
    "ksm_merging",
    "ksm_profit",
    "ksm_rmap_items",
    "ksm_shared",
    "ksm_sharing",
    "ksm_unshared",
    "ksm_volatile",
    "ksm_full_scans",
    "ksm_general_profit",
    "ksm_zero",
    "ksmd_cpu_s",
];

const SAMPLE_COLUMNS: [&str; 15] = [
    "run", "variant", "repeat", "t_s", "kind", "label", "scope", "pid", "ppid", "comm", "rss",
    "pss", "uss", "vss", "swap",
];

const MARKER_COLUMNS: [&str; 13] = [
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
];

/// The files and folders a results directory may hold: what `run` writes and `report` adds. `--force`
/// removes these and refuses a directory holding anything else.
/// (`replay` adds replay.json, replay.csv and original.csv; `tune` candidates.csv.)
const OWN_FILES: [&str; 8] = [
    "results.json",
    "samples.csv",
    "markers.csv",
    "report.html",
    "replay.json",
    "replay.csv",
    "original.csv",
    "candidates.csv",
];
const OUTPUT_DIR: &str = "output";

/// Whether `name`, directly in a results directory, is one of its own files or folders (what
/// `--force` removes): a file written there under that name would replace or be replaced by it.
pub fn is_own_entry(name: &str) -> bool {
    OWN_FILES.contains(&name) || name == OUTPUT_DIR
}

impl ResultsDir {
    /// Creates the directory and the CSV files with headers. An existing directory is refused unless
    /// `force`; with `force`, the files of an earlier session are removed first, so the directory holds
    /// this session's files only, and a directory holding anything alloclens did not write is refused.
    /// Whether [`ResultsDir::create`] would refuse `dir`, checked without changing anything, so a
    /// session that changes the machine first (`--ksm`) refuses before it does: an existing
    /// directory without `force`, a file, a directory holding files alloclens did not write, a
    /// place the user cannot write.
    pub fn check(dir: &Path, force: bool) -> Result<(), ResultsDirError> {
        match fs::metadata(dir) {
            Ok(m) if !m.is_dir() => Err(ResultsDirError::NotADirectory(dir.to_path_buf())),
            Ok(_) if !force => Err(ResultsDirError::Exists(dir.to_path_buf())),
            Ok(_) => earlier_session(dir).map(drop),
            Err(_) => {
                // The nearest existing ancestor is where the directory would be created.
                let absolute = std::path::absolute(dir).map_err(io_err(dir))?;
                let parent = absolute.ancestors().skip(1).find(|a| a.exists());
                let Some(parent) = parent else { return Ok(()) };
                if !parent.is_dir() {
                    return Err(ResultsDirError::NotADirectory(parent.to_path_buf()));
                }
                let c = std::ffi::CString::new(parent.as_os_str().as_encoded_bytes())
                    .map_err(|e| io_err(parent)(io::Error::other(e)))?;
                // SAFETY: access reads a NUL-terminated path we own.
                if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
                    return Err(io_err(parent)(io::Error::last_os_error()));
                }
                Ok(())
            }
        }
    }

    pub fn create(
        dir: &Path,
        force: bool,
        params: &[Param],
        save_output: bool,
        ksm: bool,
    ) -> Result<ResultsDir, ResultsDirError> {
        let existed = dir.exists();
        if existed && !force {
            return Err(ResultsDirError::Exists(dir.to_path_buf()));
        }
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        // Locked before anything in it changes: a second session into it stops here.
        let lock = safe_output::DirLock::acquire(dir)?;
        if existed {
            remove_earlier_session(dir)?;
        }
        let param_names: Vec<String> = params.iter().map(|p| p.name.clone()).collect();
        let mut header: Vec<String> = SAMPLE_COLUMNS.iter().map(|s| s.to_string()).collect();
        header.extend(["anon".to_string(), "pss_age".to_string()]);
        if ksm {
            header.extend(KSM_COLUMNS.iter().map(|s| s.to_string()));
        }
        header.extend(param_names.iter().map(|n| format!("param_{n}")));
        let samples = RunCsv::create(dir, "samples.csv", &header)?;
        let mut header: Vec<String> = MARKER_COLUMNS.iter().map(|s| s.to_string()).collect();
        header.extend(param_names.iter().map(|n| format!("param_{n}")));
        let markers = RunCsv::create(dir, "markers.csv", &header)?;
        if save_output {
            let out = dir.join(OUTPUT_DIR);
            fs::create_dir_all(&out).map_err(io_err(&out))?;
        }
        Ok(ResultsDir {
            dir: dir.to_path_buf(),
            param_names,
            samples,
            markers,
            output: OutputLogs {
                dir: dir.join(OUTPUT_DIR),
                save: save_output,
                current: None,
                logs: Vec::new(),
                lost: None,
            },
            runs_done: 0,
            results_json: None,
            other_files: Vec::new(),
            ksm,
            _lock: lock,
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Ends a session that kept nothing worth reading: its files go, and the directory with them
    /// when nothing else is left in it.
    pub fn discard(self) {
        let dir = self.dir.clone();
        let _ = remove_earlier_session(&dir);
        drop(self);
        let _ = fs::remove_dir(&dir);
    }

    fn param_values(&self, spec: &RunSpec) -> Vec<String> {
        self.param_names
            .iter()
            .map(|n| spec.assignment.get(n).cloned().unwrap_or_default())
            .collect()
    }

    /// Appends one row per process and one `total` row for the tree. A write that fails (a full disk)
    /// is remembered, not returned: the session goes on and [`ResultsDir::problems`] says what is
    /// missing.
    pub fn write_sample(
        &mut self,
        spec: &RunSpec,
        variant: &str,
        t_s: f64,
        kind: &SampleKind,
        label: Option<&str>,
        sample: &TreeSample,
    ) {
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
                // six decimals: whole microseconds, the precision of `sample_instant`
                format!("{t_s:.6}"),
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
            if self.ksm {
                let own = sample
                    .ksm
                    .as_ref()
                    .and_then(|k| k.processes.iter().find(|(pid, _)| *pid == p.pid));
                let page = sample.ksm.as_ref().map_or(0, |k| k.page_size);
                row.push(
                    own.map(|(_, k)| (k.merging_pages * page).to_string())
                        .unwrap_or_default(),
                );
                row.push(
                    own.and_then(|(_, k)| k.process_profit)
                        .map(|v| v.to_string())
                        .unwrap_or_default(),
                );
                row.push(
                    own.and_then(|(_, k)| k.rmap_items)
                        .map(|v| v.to_string())
                        .unwrap_or_default(),
                );
                row.extend(std::iter::repeat_n(String::new(), KSM_COLUMNS.len() - 3));
            }
            row.extend(params.iter().cloned());
            self.samples.write(spec.index, &row);
        }
        let mut row = base("total", String::new(), String::new(), "");
        row.extend(total_figures(&sample.total));
        // The total's PSS is as old as its oldest part.
        let oldest = sample.processes.iter().map(|p| p.pss_age).max();
        row.push(oldest.unwrap_or(0).to_string());
        if self.ksm {
            row.extend(ksm_total_figures(sample.ksm.as_ref()));
        }
        row.extend(params);
        self.samples.write(spec.index, &row);
    }

    /// Appends the marker's row (a failed write is remembered as in `write_sample`).
    pub fn write_marker(&mut self, spec: &RunSpec, variant: &str, marker: &MarkerRecord) {
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
        self.markers.write(spec.index, &row);
    }

    /// Saves output of the command to output/run-N.log (only with save_output), byte for byte.
    pub fn write_output(&mut self, spec: &RunSpec, bytes: &[u8]) {
        self.output.write(spec.index, bytes);
    }

    /// Ends run `run`: flushes every file, so an interruption loses nothing, and marks where the run's
    /// rows end (a file that fails later is cut back to whole runs).
    pub fn finish_run(&mut self, run: usize) {
        self.samples.finish_run(run);
        self.markers.finish_run(run);
        self.output.finish_run(run);
        self.runs_done = run + 1;
    }

    /// Writes results.json. It is the file that matters most: when the disk is full, output logs,
    /// then samples.csv, then markers.csv give up their last runs until it fits. Never fails: what
    /// could not be written is listed by [`ResultsDir::problems`].
    pub fn write_results(&mut self, results: &mut RunResults) {
        let path = self.dir.join("results.json");
        loop {
            results.incomplete_files = self.problems();
            let mut text = match serde_json::to_vec_pretty(results) {
                Ok(t) => t,
                Err(e) => {
                    self.results_json = Some(format!("results.json: not written: {e}"));
                    return;
                }
            };
            text.push(b'\n');
            let err = match write_file(&path, &text) {
                Ok(()) => return,
                Err(e) => e,
            };
            let _ = fs::remove_file(&path);
            let freed = is_disk_full(&err)
                && (self.output.give_up_last_run()
                    || self.samples.give_up_last_run()
                    || self.markers.give_up_last_run());
            if !freed {
                self.results_json = Some(format!("results.json: not written: {err}"));
                return;
            }
        }
    }

    /// One line per file that misses something (disk full, write error), saying which runs are
    /// missing and why; empty when everything was written.
    /// Whether the last [`ResultsDir::write_results`] wrote results.json whole (a command says
    /// "results in DIR" only then).
    pub fn results_written(&self) -> bool {
        self.results_json.is_none() && self.dir.join("results.json").is_file()
    }

    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self.results_json.iter().cloned().collect();
        out.extend(self.markers.problem(self.runs_done));
        out.extend(self.samples.problem(self.runs_done));
        out.extend(self.output.problem(self.runs_done));
        out.extend(self.other_files.iter().cloned());
        out
    }

    /// Records that a file the caller writes into the directory (replay.json, ...) is missing or
    /// incomplete: it is listed with the others in results.json's `incomplete_files` at the next
    /// [`ResultsDir::write_results`] and by [`ResultsDir::problems`].
    pub fn note_problem(&mut self, problem: String) {
        self.other_files.push(problem);
    }
}

/// Why the rows of runs `from` and later are missing from a file.
struct Lost {
    from: usize,
    reason: String,
}

const MADE_ROOM: &str = "removed to make room for results.json on the full disk";

/// The reason of a loss once runs were also given up for results.json.
fn made_room(earlier: Option<Lost>) -> String {
    match earlier {
        Some(l) if l.reason.ends_with(MADE_ROOM) => l.reason,
        Some(l) => format!("{}; then {MADE_ROOM}", l.reason),
        None => MADE_ROOM.to_string(),
    }
}

/// "runs 2-3", "run 2"
fn run_range(from: usize, done: usize) -> String {
    if done <= from + 1 {
        format!("run {from}")
    } else {
        format!("runs {from}-{}", done - 1)
    }
}

/// A CSV file written as runs go, kept to whole runs: when a write fails (disk full) the file is cut
/// back to the end of the last complete run and nothing more goes into it, so it stays a valid CSV
/// whose missing rows are exactly those of the later runs.
struct RunCsv {
    name: &'static str,
    path: PathBuf,
    writer: Option<csv::Writer<BufWriter<File>>>,
    /// The file's length after the header, then after each complete run.
    ends: Vec<u64>,
    lost: Option<Lost>,
}

impl RunCsv {
    fn create(
        dir: &Path,
        name: &'static str,
        header: &[String],
    ) -> Result<RunCsv, ResultsDirError> {
        let path = dir.join(name);
        let file = File::create(&path).map_err(io_err(&path))?;
        let mut writer = csv::Writer::from_writer(BufWriter::new(file));
        writer
            .write_record(header)
            .and_then(|()| writer.flush().map_err(csv::Error::from))
            .map_err(|e| ResultsDirError::Io {
                path: path.clone(),
                source: io::Error::other(e),
            })?;
        let len = fs::metadata(&path).map_err(io_err(&path))?.len();
        Ok(RunCsv {
            name,
            path,
            writer: Some(writer),
            ends: vec![len],
            lost: None,
        })
    }

    fn write(&mut self, run: usize, row: &[String]) {
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        if let Err(e) = writer.write_record(row) {
            self.fail(run, e.to_string());
        }
    }

    fn finish_run(&mut self, run: usize) {
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        let len = writer
            .flush()
            .and_then(|()| writer.get_ref().get_ref().metadata())
            .map(|m| m.len());
        match len {
            Ok(len) => self.ends.push(len),
            Err(e) => self.fail(run, e.to_string()),
        }
    }

    fn fail(&mut self, run: usize, reason: String) {
        if let Some(writer) = self.writer.take() {
            // Dropping flushes what it can; the cut below removes the partial run.
            drop(writer);
        }
        self.cut();
        self.lost = Some(Lost { from: run, reason });
    }

    /// Truncates the file to its last complete run.
    fn cut(&mut self) {
        let end = *self.ends.last().expect("header length");
        let _ = fs::OpenOptions::new()
            .write(true)
            .open(&self.path)
            .and_then(|f| f.set_len(end));
    }

    /// Removes the last complete run's rows to make room; false when none is left.
    fn give_up_last_run(&mut self) -> bool {
        if self.ends.len() < 2 {
            return false;
        }
        self.writer = None;
        self.ends.pop();
        self.cut();
        self.lost = Some(Lost {
            from: self.ends.len() - 1,
            reason: made_room(self.lost.take()),
        });
        true
    }

    fn problem(&self, runs_done: usize) -> Option<String> {
        let lost = self.lost.as_ref()?;
        let kept = match lost.from {
            0 => "no complete run".to_string(),
            n => format!("{} complete", run_range(0, n)),
        };
        Some(format!(
            "{}: the rows of {} are missing ({}); it holds {kept}",
            self.name,
            run_range(lost.from, runs_done.max(lost.from + 1)),
            lost.reason
        ))
    }
}

/// output/run-N.log, one file per run, each whole or absent.
struct OutputLogs {
    dir: PathBuf,
    save: bool,
    current: Option<(usize, BufWriter<File>)>,
    /// The logs of complete runs, in run order.
    logs: Vec<usize>,
    lost: Option<Lost>,
}

impl OutputLogs {
    fn path(&self, run: usize) -> PathBuf {
        self.dir.join(format!("run-{run}.log"))
    }

    fn write(&mut self, run: usize, bytes: &[u8]) {
        if !self.save || self.lost.is_some() {
            return;
        }
        if self.current.as_ref().map(|(i, _)| *i) != Some(run) {
            match File::create(self.path(run)) {
                Ok(file) => self.current = Some((run, BufWriter::new(file))),
                Err(e) => return self.fail(run, e.to_string()),
            }
        }
        let (_, file) = self.current.as_mut().expect("opened above");
        if let Err(e) = file.write_all(bytes) {
            self.fail(run, e.to_string());
        }
    }

    fn finish_run(&mut self, run: usize) {
        if let Some((i, mut file)) = self.current.take() {
            match file.flush() {
                Ok(()) => self.logs.push(i),
                Err(e) => self.fail(run, e.to_string()),
            }
        }
    }

    /// Stops saving: the log of `run` is removed (it would be cut short), later runs get none.
    fn fail(&mut self, run: usize, reason: String) {
        self.current = None;
        let _ = fs::remove_file(self.path(run));
        self.lost = Some(Lost { from: run, reason });
    }

    fn give_up_last_run(&mut self) -> bool {
        let Some(run) = self.logs.pop() else {
            return false;
        };
        let _ = fs::remove_file(self.path(run));
        self.lost = Some(Lost {
            from: run,
            reason: made_room(self.lost.take()),
        });
        true
    }

    fn problem(&self, runs_done: usize) -> Option<String> {
        let lost = self.lost.as_ref()?;
        Some(format!(
            "output/: the logs of {} are missing ({})",
            run_range(lost.from, runs_done.max(lost.from + 1)),
            lost.reason
        ))
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ResultsDirError {
    let path = path.to_path_buf();
    move |source| ResultsDirError::Io { path, source }
}

fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    File::create(path)?.write_all(bytes)
}

fn is_disk_full(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// With --force: removes the files an earlier session wrote, refusing a directory that holds anything
/// else (the user's own files are never deleted).
fn remove_earlier_session(dir: &Path) -> Result<(), ResultsDirError> {
    for (path, is_dir) in earlier_session(dir)? {
        let removed = if is_dir {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        removed.map_err(io_err(&path))?;
    }
    Ok(())
}

/// The entries of an earlier session in `dir` (path, is a directory); refused when `dir` holds
/// anything else.
fn earlier_session(dir: &Path) -> Result<Vec<(PathBuf, bool)>, ResultsDirError> {
    let entries = fs::read_dir(dir).map_err(io_err(dir))?;
    let mut ours = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name();
        let path = entry.path();
        // Not following links: a link, a device or a pipe under one of our names is not ours.
        let kind = entry.file_type().map_err(io_err(&path))?;
        let is_dir = kind.is_dir();
        let own = match name.to_str() {
            Some(OUTPUT_DIR) if is_dir => output_dir_is_ours(&path)?,
            Some(n) if kind.is_file() => OWN_FILES.contains(&n),
            _ => false,
        };
        // The session lock (ours, or one a killed session left): never removed by another.
        if name == safe_output::LOCK_FILE && kind.is_file() {
            continue;
        }
        if !own {
            return Err(ResultsDirError::NotOurs {
                dir: dir.to_path_buf(),
                entry: name.to_string_lossy().into_owned(),
            });
        }
        ours.push((path, is_dir));
    }
    Ok(ours)
}

/// True when output/ holds only run-N.log files.
fn output_dir_is_ours(path: &Path) -> Result<bool, ResultsDirError> {
    for entry in fs::read_dir(path).map_err(io_err(path))? {
        let entry = entry.map_err(io_err(path))?;
        let name = entry.file_name();
        let log = name
            .to_str()
            .and_then(|n| n.strip_prefix("run-"))
            .and_then(|n| n.strip_suffix(".log"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !log || !entry.file_type().map_err(io_err(path))?.is_file() {
            return Ok(false);
        }
    }
    Ok(true)
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
                r.index,
                r.variant,
                r.repeat + 1,
                detail
            )
        })
        .collect()
}

/// Markers that did not all get their own figures: one warning for the whole execution (the
/// rows are in markers.csv, flagged, but a reader of the summary should know they are there).
/// One line, not one per run: markers that come faster than a reading (a PSS reading of the
/// tree takes milliseconds) are late in every run alike, and ten copies of the same sentence
/// said nothing more.
pub fn marker_warnings(execution: &Execution) -> Vec<String> {
    let (mut markers, mut runs, mut affected) = (0, 0, 0);
    let (mut f, mut p) = (MarkerCounts::default(), MarkerCounts::default());
    for r in execution.runs.iter().filter(|r| r.markers > 0) {
        runs += 1;
        markers += r.markers;
        f.late += r.marker_figures.late;
        f.missing += r.marker_figures.missing;
        p.late += r.marker_pss.late;
        p.missing += r.marker_pss.missing;
        if r.marker_figures.without() + r.marker_pss.without() > 0 {
            affected += 1;
        }
    }
    if affected == 0 {
        return Vec::new();
    }
    let runs = if runs == 1 {
        "1 run".to_string()
    } else {
        format!("{runs} runs ({affected} concerned)")
    };
    let mut parts = Vec::new();
    if p.without() > 0 {
        parts.push(format!(
            "{} have no PSS of their own ({} late: the next marker line came before the reading \
             ended; {} missing: the command had exited)",
            p.without(),
            p.late,
            p.missing
        ));
    }
    if f.without() > 0 {
        let verb = if parts.is_empty() { "have " } else { "" };
        parts.push(format!(
            "{} {verb}no RSS/VSS of their own ({} late, {} missing)",
            f.without(),
            f.late,
            f.missing
        ));
    }
    vec![format!(
        "of {markers} markers in {runs}, {}; markers.csv says which (status, pss_status)",
        parts.join(" and ")
    )]
}

fn process_figures(p: &ProcessMemory) -> Vec<String> {
    [p.rss, p.pss, p.uss, p.vss, p.swap, p.anonymous]
        .iter()
        .map(u64::to_string)
        .collect()
}

fn ksm_total_figures(k: Option<&procmem::TreeKsm>) -> Vec<String> {
    let Some(k) = k else {
        return vec![String::new(); KSM_COLUMNS.len()];
    };
    let opt = |v: Option<String>| v.unwrap_or_default();
    let s = k.system.as_ref();
    let bytes =
        |f: fn(&procmem::KsmCounters) -> u64| opt(s.map(|s| (f(s) * s.page_size).to_string()));
    vec![
        k.merging.to_string(),
        k.profit.to_string(),
        k.rmap_items.to_string(),
        bytes(|s| s.pages_shared),
        bytes(|s| s.pages_sharing),
        bytes(|s| s.pages_unshared),
        bytes(|s| s.pages_volatile),
        opt(s.map(|s| s.full_scans.to_string())),
        opt(s.and_then(|s| s.general_profit).map(|v| v.to_string())),
        opt(s.and_then(|s| s.ksm_zero_pages.map(|z| (z * s.page_size).to_string()))),
        opt(k.ksmd_cpu_s.map(|c| format!("{c:.3}"))),
    ]
}

fn total_figures(t: &MemoryTotals) -> Vec<String> {
    [t.rss, t.pss, t.uss, t.vss, t.swap, t.anonymous]
        .iter()
        .map(u64::to_string)
        .collect()
}
