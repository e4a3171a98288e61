//! `alloclens snapshot PID|DIR|FILE`: glue between the command line and `profiles::snapshot`:
//! the in-use profile of a program whose agent keeps a heap profile table, printed by call site
//! and written as pprof.
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use profiles::snapshot::{self, Snapshot, SnapshotOptions, Target};
use report::format::bytes;

#[derive(clap::Args)]
pub struct Args {
    /// A running process (PID), a watch directory or a directory of tables (the newest of each
    /// process), or a table file (PID-N.prof)
    pub target: String,
    /// Write the pprof profile to FILE (default: alloclens.COMM.PID.snapshot.pb.gz in the current
    /// directory, never over an existing file)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// How many call stacks to print, by in-use bytes
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Print the snapshot as JSON (docs/profile.md): each process's exact counters and each
    /// stack's estimates with their standard errors
    #[arg(long)]
    pub json: bool,
    /// Look for separate debug files under DIR (DIR/.build-id/xx/yyyy.debug, or by debuglink)
    /// instead of /usr/lib/debug; repeatable
    #[arg(long = "debug-dir", value_name = "DIR")]
    pub debug_dirs: Vec<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::check_debug_dirs(&args.debug_dirs)?;
    let target = target(&args.target)?;
    let mut taken = snapshot::take_all(&target)?;
    super::warn(&taken.warnings);
    let mut options = SnapshotOptions::default();
    if !args.debug_dirs.is_empty() {
        options.debug_roots = args.debug_dirs.clone();
    }
    let made = snapshot::to_pprof(&mut taken.snapshots, &options);
    super::warn(&made.warnings);
    let file = match &args.output {
        Some(f) => f.clone(),
        None => default_name(&taken.snapshots)?,
    };
    safe_output::write_whole(&file, |out| {
        profiles::pprof::write_gzipped(&made.profile, out)
    })
    .map_err(|e| anyhow::anyhow!("cannot write '{}': {e}", file.display()))?;

    let mut out = std::io::BufWriter::new(super::stdout());
    if args.json {
        let json = serde_json::json!({
            "pprof": file,
            "totals": snapshot::totals(&taken.snapshots),
            "snapshots": taken.snapshots,
        });
        serde_json::to_writer_pretty(&mut out, &json)?;
        writeln!(out)?;
    } else {
        print_text(&mut out, &taken.snapshots, args.top)?;
    }
    out.flush()?;
    eprintln!(
        "alloclens: pprof profile of {} call stacks in {} (go tool pprof -top {})",
        made.profile.sample.len(),
        file.display(),
        file.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// A number that names no file is a process id.
fn target(arg: &str) -> anyhow::Result<Target> {
    let path = Path::new(arg);
    if path.exists() {
        return Ok(Target::Path(path.to_path_buf()));
    }
    match arg.parse::<u32>() {
        Ok(pid) if pid > 0 => Ok(Target::Pid(pid)),
        _ => bail!(
            "'{arg}' is neither a process id nor a file or directory: give a PID, a watch \
             directory, or a profile table (PID-N.prof)"
        ),
    }
}

/// `alloclens.COMM.PID.snapshot.pb.gz` of the process that holds the most, numbered when that
/// name is taken: never over a file alloclens did not write.
fn default_name(snapshots: &[Snapshot]) -> anyhow::Result<PathBuf> {
    let main = snapshots
        .iter()
        .max_by(|a, b| {
            let held = |s: &Snapshot| s.totals().inuse_space.value;
            held(a).total_cmp(&held(b))
        })
        .context("no snapshot")?;
    let comm = Path::new(&main.exe)
        .file_name()
        .map_or("program".into(), |n| n.to_string_lossy().into_owned());
    let stem = format!("alloclens.{comm}.{}.snapshot", main.pid);
    (0..1000)
        .map(|n| match n {
            0 => PathBuf::from(format!("{stem}.pb.gz")),
            n => PathBuf::from(format!("{stem}.{n}.pb.gz")),
        })
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .context("1000 snapshots of this process in the current directory already: give -o FILE")
}

fn print_text(out: &mut dyn Write, snapshots: &[Snapshot], top: usize) -> std::io::Result<()> {
    for s in snapshots {
        let state = match s.state {
            snapshot::ProcessState::Running => "running",
            snapshot::ProcessState::Exited => "exited",
            snapshot::ProcessState::Killed => "gone without exiting (killed): its last state",
        };
        writeln!(
            out,
            "process {} ({}), {state}; table {}, sampled once per {} bytes",
            s.pid,
            s.exe,
            s.path.display(),
            s.sample_bytes
        )?;
    }
    let several = snapshots.len() > 1;
    let mut rows: Vec<(u32, &snapshot::StackEstimate)> = snapshots
        .iter()
        .flat_map(|s| s.stacks.iter().map(move |st| (s.pid, st)))
        .collect();
    rows.sort_by(|a, b| b.1.inuse_space.value.total_cmp(&a.1.inuse_space.value));
    writeln!(out)?;
    writeln!(
        out,
        "{:>12} {:>11} {:>10} {:>12}  {}site",
        "in use",
        "± stderr",
        "objects",
        "allocated",
        if several { "pid      " } else { "" }
    )?;
    for (pid, st) in rows.iter().take(top) {
        writeln!(
            out,
            "{:>12} {:>11} {:>10.0} {:>12}  {}{}",
            bytes(st.inuse_space.value),
            format!("± {}", bytes(st.inuse_space.stderr)),
            st.inuse_objects.value,
            bytes(st.alloc_space.value),
            if several {
                format!("{pid:<9}")
            } else {
                String::new()
            },
            st.site.as_deref().unwrap_or("?")
        )?;
    }
    if rows.len() > top {
        writeln!(
            out,
            "({} more stacks; --top N shows more)",
            rows.len() - top
        )?;
    }
    let t = snapshot::totals(snapshots);
    let sum = |f: fn(&Snapshot) -> u64| snapshots.iter().map(f).sum::<u64>();
    writeln!(out)?;
    writeln!(
        out,
        "in use:    {} ± {} in {:.0} ± {:.0} blocks (estimated); the agent's exact count: {} in {} blocks (usable sizes)",
        bytes(t.inuse_space.value),
        bytes(t.inuse_space.stderr),
        t.inuse_objects.value,
        t.inuse_objects.stderr,
        bytes(sum(|s| s.counters.live_bytes) as f64),
        sum(|s| s.counters.live_blocks)
    )?;
    writeln!(
        out,
        "allocated: {} ± {} in {:.0} calls since the start (estimated); exact: {} in {} calls",
        bytes(t.alloc_space.value),
        bytes(t.alloc_space.stderr),
        t.alloc_objects.value,
        bytes(sum(|s| s.counters.requested) as f64),
        sum(|s| s.counters.allocs)
    )?;
    writeln!(
        out,
        "samples:   {} sampled allocations, {} live; dropped: {} live blocks not tabled, {} stacks not stored; {} entries being written skipped",
        sum(|s| s.samples),
        sum(|s| s.live_entries),
        sum(|s| s.dropped_live),
        sum(|s| s.dropped_stacks),
        sum(|s| s.torn_entries)
    )
}
