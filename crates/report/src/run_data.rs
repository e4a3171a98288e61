//! A results directory of `alloclens run`, as reports use it. The format and its reader belong to
//! `runner::results_dir`; this adds what `report --compare` needs.
use std::path::{Path, PathBuf};

use runner::results_dir::{MarkerRow, ResultsDirContents, ResultsReadError, SampleRow};
use runner::{RunRecord, RunResults};

/// A results directory, loaded.
#[derive(Debug, Clone)]
pub struct RunData {
    pub dir: PathBuf,
    pub results: RunResults,
    pub samples: Vec<SampleRow>,
    pub markers: Vec<MarkerRow>,
    /// With `--compare`: one line per merged results directory (name = path: command).
    pub compared: Vec<String>,
}

impl RunData {
    pub fn load(dir: &Path) -> Result<RunData, ResultsReadError> {
        let ResultsDirContents {
            dir,
            results,
            samples,
            markers,
        } = ResultsDirContents::load(dir)?;
        Ok(RunData {
            dir,
            results,
            samples,
            markers,
            compared: Vec::new(),
        })
    }

    /// Whether `dir` looks like a results directory (has results.json).
    pub fn is_results_dir(dir: &Path) -> bool {
        ResultsDirContents::is_results_dir(dir)
    }

    pub fn run(&self, index: usize) -> Option<&RunRecord> {
        self.results.runs.iter().find(|r| r.index == index)
    }
}
