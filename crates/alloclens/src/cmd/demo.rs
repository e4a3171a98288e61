//! `alloclens demo`: the built-in workloads under every installed allocator, one results directory each.
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::cmd::args;
use crate::cmd::run::{execute, ProgramOutput, RunOptions};

#[derive(clap::Args)]
pub struct Args {
    /// Where to write the results (one subdirectory per workload) [default: alloclens-demo-YYYYmmdd-HHMMSS]
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Write into the directory even if it exists
    #[arg(long)]
    pub force: bool,
    /// Allocator variants to compare [default: glibc and every installed known allocator]
    #[arg(short, long, value_name = "LIST")]
    pub allocators: Option<String>,
    /// Runs per variant and parameter point
    #[arg(short, long, default_value_t = 2, value_name = "N")]
    pub repeat: u32,
    /// Only these workloads (comma-separated: twowave,events,xthread,forkworkers,churn)
    #[arg(long, value_name = "LIST")]
    pub only: Option<String>,
}

/// One demo scenario: a workload, its sweep, and what to read from its output.
struct Scenario {
    /// The workload, as `alloclens workload NAME` names it.
    name: &'static str,
    what: &'static str,
    /// The workload's arguments after its name.
    args: &'static [&'static str],
    params: &'static [&'static str],
    marker: Option<&'static str>,
}

const THROUGHPUT: &str = r"throughput: ([0-9.]+)";
/// The `events` lines the demo marks: one in ten (see `SCENARIOS`).
const EVENTS_MARKER: &str = r"^event (\d*0)\b";

const SCENARIOS: [Scenario; 5] = [
    Scenario {
        name: "twowave",
        what: "two waves of small objects, the first freed: does the allocator give the memory back? (Venice)",
        args: &[],
        params: &[],
        marker: Some(r"phase: (\S+)"),
    },
    Scenario {
        name: "events",
        what: "event loop with heavy-tailed sizes, memory every 10th event (CMS)",
        args: &["--events", "150"],
        params: &[],
        // Every 10th event: events come every 2 ms or so, and a marker's PSS (a full reading of
        // the tree) takes longer; one every 20 ms gets its own.
        marker: Some(EVENTS_MARKER),
    },
    Scenario {
        name: "xthread",
        what: "objects freed by another thread, thread sweep (ATLAS)",
        args: &["--threads", "{threads}", "--objects", "3000000"],
        params: &["threads=1,2"],
        marker: None,
    },
    Scenario {
        name: "forkworkers",
        what: "fork-based workers sharing the parent's data, worker sweep, total PSS of the tree (GaudiMP, CMS)",
        args: &["--workers", "{workers}", "--events", "600"],
        params: &["workers=1,2,4"],
        marker: None,
    },
    Scenario {
        name: "churn",
        what: "tight malloc/free of mixed small sizes",
        args: &["--ops", "12000000"],
        params: &[],
        marker: None,
    },
];

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let root = a
        .output
        .unwrap_or_else(|| args::dated_dir("alloclens-demo"));
    if root.exists() && !a.force {
        anyhow::bail!(
            "output directory '{}' already exists (choose another with -o, or pass --force)",
            root.display()
        );
    }
    let exe = std::env::current_exe().context("cannot find the alloclens executable")?;
    let variants = args::variants(a.allocators.as_deref())?;
    let only: Option<Vec<&str>> = a
        .only
        .as_deref()
        .map(|o| o.split(',').map(str::trim).collect());
    if let Some(only) = &only {
        if let Some(bad) = only
            .iter()
            .find(|n| !SCENARIOS.iter().any(|s| s.name == **n))
        {
            let known: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
            anyhow::bail!(
                "--only: unknown workload '{bad}' (known: {})",
                known.join(", ")
            );
        }
    }
    let labels: Vec<&str> = variants.iter().map(|v| v.label.as_str()).collect();
    // writeln! rather than println!, which panics when the reader went away (`| head`): main
    // ends quietly on that error.
    let mut out = super::stdout();
    writeln!(
        out,
        "alloclens demo: {} allocator variant(s): {}\n",
        labels.len(),
        labels.join(", ")
    )?;
    let mut code = ExitCode::SUCCESS;
    for scenario in SCENARIOS
        .iter()
        .filter(|s| only.as_ref().is_none_or(|o| o.contains(&s.name)))
    {
        writeln!(out, "== {}: {}", scenario.name, scenario.what)?;
        let mut command = vec![
            exe.display().to_string(),
            "workload".to_string(),
            scenario.name.to_string(),
        ];
        command.extend(scenario.args.iter().map(|s| s.to_string()));
        let options = RunOptions {
            plan: runner::RunPlan {
                command,
                variants: variants.clone(),
                params: scenario
                    .params
                    .iter()
                    .map(|p| args::param(p))
                    .collect::<anyhow::Result<_>>()?,
                env: Vec::new(),
                repeats: a.repeat,
                warmup: 0,
                prepare: None,
                cleanup: None,
                interval: Duration::from_millis(50),
                marker: scenario
                    .marker
                    .map(|m| args::regex(m, "marker"))
                    .transpose()?,
                throughput: Some(args::regex(THROUGHPUT, "throughput")?),
                timeout: Some(Duration::from_secs(120)),
                exact_pss: false,
                stdout_pty: false,
                pass_stdin: false,
                ksm_merge: None,
                ksm: false,
            },
            baseline: args::baseline(None, &variants)?,
            output: root.join(scenario.name),
            ksm: None,
            ksm_wait: Duration::ZERO,
            throughput_unit: None,
            exports: Vec::new(),
            force: a.force,
            program_output: ProgramOutput::Save,
        };
        let outcome = execute(&options, true)?;
        write!(out, "{}", outcome.table)?;
        match crate::cmd::report::write_run_report(&outcome.dir) {
            Ok(page) => writeln!(out, "  report: {}", page.display())?,
            Err(err) => writeln!(out, "  warning: no HTML report: {err:#}")?,
        }
        for w in &outcome.warnings {
            writeln!(out, "  warning: {w}")?;
        }
        for p in &outcome.write_problems {
            writeln!(out, "  error: {p}")?;
        }
        if outcome.execution.interrupted {
            return Ok(outcome.exit_code());
        }
        if outcome.exit_code() != ExitCode::SUCCESS {
            code = outcome.exit_code();
        }
    }
    writeln!(
        out,
        "Results (report.html, results.json, samples.csv, markers.csv per workload) in {}",
        root.display()
    )?;
    out.flush()?;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo asks for a marker's figures only as often as it can have them: the events
    /// workload prints `event N` every 2 ms or so, and a PSS reading takes longer.
    #[test]
    fn the_events_scenario_marks_one_event_in_ten() {
        let re = regex::Regex::new(EVENTS_MARKER).unwrap();
        let marked: Vec<u32> = (1..=150)
            .filter(|n| re.is_match(&format!("event {n}")))
            .collect();
        assert_eq!(marked, (1..=15).map(|k| 10 * k).collect::<Vec<_>>());
        let labels: Vec<&str> = ["event 10", "event 150"]
            .iter()
            .map(|l| re.captures(l).unwrap().get(1).unwrap().as_str())
            .collect();
        assert_eq!(labels, ["10", "150"]);
        let events = SCENARIOS.iter().find(|s| s.name == "events").unwrap();
        assert_eq!(events.marker, Some(EVENTS_MARKER));
    }
}
