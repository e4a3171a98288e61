//! `alloclens watch`: a program's memory over minutes to weeks, and why its RSS grows.
//!
//! [`engine::watch`] starts the command (with the allocator variant and the `agent` preloaded) or
//! follows a running process, samples its whole tree every interval (RSS and PSS through
//! `procmem`, the RSS split from smaps, the agent's live bytes and allocator statistics; for `--pid`
//! the agent is loaded into the running process by `agent::attach`, no debugger) into a [`history::History`] bounded in memory and on disk, and
//! [`verdict::classify`] tells leak, fragmentation, retention, outside-heap or stable (or says it
//! cannot: undetermined) from robust trends
//! ([`slope::theil_sen`]), and `explain` puts the verdict into sentences and a remedy.
//! [`results`] owns DIR/watch.json, written and read; [`directory`] the directory's `--force`
//! policy and lock; [`samples_file`] reads samples.csv back and says
//! what is wrong with it. Nothing here prints.
//! Formats and definitions: docs/watch.md.

mod agents;
pub mod directory;
pub mod engine;
mod explain;
pub mod history;
mod probes;
pub mod profiling;
pub mod residency;
pub mod results;
pub mod samples_file;
pub mod slope;
pub mod verdict;

pub use directory::{DirectoryError, WatchDirectory};
pub use engine::{
    check_pid, watch, AttachReading, GdbReading, ProcessFigures, ProgramExit, Resume, Target,
    TrimProbe, WatchEnding, WatchError, WatchEvent, WatchOptions, WatchOutcome,
};
pub use history::{read_samples, WatchSample, DEFAULT_CAPACITY};
pub use residency::ResidencyQuote;
pub use results::{
    assemble, write_results, WatchDir, WatchResults, AGENT_DIR, COLLECTOR_LOG, COLLECTOR_PID,
    PROGRAM_OUTPUT, SAMPLES_CSV, WATCH_JSON,
};
pub use verdict::{Class, Verdict};
