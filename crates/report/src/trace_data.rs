//! An analysed trace: what the trace page, the trace comparison and `diff` report.
use std::path::{Path, PathBuf};

use analyze::FileAnalysis;

/// An analysed trace, ready to report.
pub struct TraceData {
    pub path: PathBuf,
    /// The trace file's analysis, with what its header says (command, allocator, stacks).
    pub file: FileAnalysis,
    /// The recorder's readings of each image's memory (MEMORY chunks), for the images that have
    /// them.
    pub memory: Vec<ImageMemory>,
    /// Which call sites hold the heap's resident pages (`analyze --residency`), when the trace has
    /// heap residency readings (recorded with `--addresses`).
    pub residency: Option<analyze::residency::ResidencyAnalysis>,
}

/// One process image's memory samples, and which image.
pub struct ImageMemory {
    pub pid: u32,
    pub exec_index: u32,
    pub start_unix_ns: u64,
    pub samples: Vec<trace::MemorySample>,
}

impl TraceData {
    /// The memory samples of the image `p` reports on (empty when the trace has none).
    pub fn memory_of(&self, p: &analyze::ProcessReport) -> &[trace::MemorySample] {
        self.memory
            .iter()
            .find(|m| {
                (m.pid, m.exec_index, m.start_unix_ns) == (p.pid, p.exec_index, p.start_unix_ns)
            })
            .map_or(&[], |m| m.samples.as_slice())
    }

    /// The residency readings of the image `p` reports on.
    pub fn residency_of(
        &self,
        p: &analyze::ProcessReport,
    ) -> Option<&analyze::residency::ProcessResidency> {
        self.residency
            .as_ref()?
            .processes
            .iter()
            .find(|r| (r.pid, r.exec_index) == (p.pid, p.exec_index) && !r.readings.is_empty())
    }
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
        // Opening scans the chunk frames only (the analysis above read the file already).
        let reader = trace::TraceReader::open(path)?;
        let memory = reader
            .streams()
            .iter()
            .enumerate()
            .filter(|(i, _)| !reader.memory_samples(*i).is_empty())
            .map(|(i, s)| ImageMemory {
                pid: s.info.pid,
                exec_index: s.info.exec_index,
                start_unix_ns: s.info.start_unix_ns,
                samples: reader.memory_samples(i).to_vec(),
            })
            .collect();
        let has_residency = (0..reader.streams().len()).any(|i| !reader.residency(i).is_empty());
        let residency = if has_residency {
            Some(analyze::residency::analyze_residency(path, None)?)
        } else {
            None
        };
        Ok(TraceData {
            path: path.to_path_buf(),
            file: analysis,
            memory,
            residency,
        })
    }
}
