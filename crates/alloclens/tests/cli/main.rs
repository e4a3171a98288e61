//! The integration tests of `alloclens`: one test binary (its modules link once).
//! Run one file's tests: `cargo test -p alloclens --test cli -- MODULE::`.
mod agent;
mod analyze;
mod call_sites;
mod cli_doc;
mod damaged;
mod exit_status;
mod install;
mod ksm;
mod merge;
mod options;
mod progress;
mod record;
mod replay;
mod report;
mod run;
mod run_figures;
mod run_reliability;
mod run_statistics;
mod sampled_sites;
mod sampled_stacks;
mod sql;
mod tune;
mod units;
mod watch;
mod watch_files;
mod workloads;
