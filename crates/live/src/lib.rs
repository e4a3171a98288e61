//! `alloclens live`: a full-screen terminal view of a program under the watch engine, refreshed
//! every second: the tree's RSS and PSS, the heap's RSS, the live bytes and the allocator's free
//! bytes over time; the top call sites of the heap profile table by in-use bytes, with their
//! growth over the last minute and their standard errors; the verdict so far.
//!
//! Three threads, so that nothing waits for the screen and the program never waits for anyone:
//! the source of the samples (the watch engine, `watch::watch`, the one collector, its samples
//! sent here by its event callback; or, with `--pid`, the follower of a background collector's
//! directory, `follow`, the engine running in that `collector`), the reader of the profile tables
//! (`sites`, symbolising off the drawing thread), and this one, which draws (`view`) and reads
//! keys. Everything runs in alloclens: the program has its agent and nothing more. Nothing here
//! prints; the caller assembles and writes the results (the same directory as `watch`) from the
//! outcome handed to `finish`, or the collector does. Keys and the collector: docs/live.md.

mod app;
pub mod collector;
mod follow;
mod format;
mod run;
mod sites;
mod view;

pub use app::{Ending, OnQuit, SortKey};
pub use collector::Collector;
pub use follow::{base_results, final_results};
pub use run::{check_terminal, run, Left, LiveError, LiveOptions, OutputShown, Source};
