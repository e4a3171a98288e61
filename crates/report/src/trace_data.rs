//! An analysed trace: what the trace page, the trace comparison and `diff` report.
use std::path::{Path, PathBuf};

use analyze::FileAnalysis;

/// An analysed trace, ready to report.
pub struct TraceData {
    pub path: PathBuf,
    pub analysis: FileAnalysis,
}

impl TraceData {
    /// Analyses the trace at `path` (every process, no filter), as `alloclens analyze` does, with its
    /// call sites when it was recorded with stacks.
    pub fn load(path: &Path) -> Result<TraceData, analyze::AnalyzeError> {
        Self::load_with(path, &trace::NoProgress)
    }

    /// [`TraceData::load`], telling `progress` how far the analysis has come.
    pub fn load_with(
        path: &Path,
        progress: &dyn trace::Progress,
    ) -> Result<TraceData, analyze::AnalyzeError> {
        // Call sites too (they are resolved only when the trace has stacks).
        let options = analyze::Options {
            call_sites: Some(Default::default()),
            ..Default::default()
        };
        let analysis = analyze::analyze_file_with(path, &options, progress)?;
        Ok(TraceData {
            path: path.to_path_buf(),
            analysis,
        })
    }
}
