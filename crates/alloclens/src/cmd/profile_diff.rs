//! `alloclens diff A.pb.gz B.pb.gz`: glue between the command line and `profiles::diff`: the
//! growth of in-use bytes and objects by call site between two snapshots.
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use profiles::diff::{Change, ProfileDiff};
use report::format::bytes;

pub fn run(args: &super::diff::Args) -> anyhow::Result<ExitCode> {
    let a = read(&args.a)?;
    let b = read(&args.b)?;
    let d = profiles::diff::diff(&a, &b)?;
    for (path, known) in [&args.a, &args.b].iter().zip(d.has_stderr) {
        if !known {
            eprintln!(
                "alloclens: warning: '{}' carries no standard errors (not a snapshot of `alloclens snapshot`): the growth's error is unknown",
                path.display()
            );
        }
    }
    if let Some(file) = &args.output {
        safe_output::write_whole(file, |out| profiles::pprof::write_gzipped(&d.profile, out))
            .map_err(|e| anyhow::anyhow!("cannot write '{}': {e}", file.display()))?;
        eprintln!("alloclens: B - A as a pprof profile in {}", file.display());
    }
    let mut out = std::io::BufWriter::new(super::stdout());
    if args.json {
        serde_json::to_writer_pretty(
            &mut out,
            &serde_json::json!({ "a": args.a, "b": args.b, "rows": d.rows }),
        )?;
        writeln!(out)?;
    } else {
        print_text(&mut out, &d, args.top)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn read(path: &Path) -> anyhow::Result<profiles::pprof::proto::Profile> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read '{}'", path.display()))?;
    profiles::pprof::read(&bytes).map_err(|e| {
        anyhow::anyhow!(
            "'{}' is not a pprof profile ({e}): give two files of `alloclens snapshot`",
            path.display()
        )
    })
}

fn print_text(out: &mut dyn Write, d: &ProfileDiff, top: usize) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>12} {:>11} {:>10} {:>12} {:>12}  site",
        "growth", "± stderr", "objects", "A", "B"
    )?;
    let err = |c: &Change, f: &dyn Fn(f64) -> String| match c.stderr {
        Some(se) => format!("± {}", f(se)),
        None => "± ?".into(),
    };
    for r in d.rows.iter().take(top) {
        let s = &r.inuse_space;
        writeln!(
            out,
            "{:>12} {:>11} {:>+10.0} {:>12} {:>12}  {}{}",
            signed(s.growth),
            err(s, &bytes),
            r.inuse_objects.growth,
            bytes(s.a),
            bytes(s.b),
            r.site,
            if s.significant() { "  *" } else { "" }
        )?;
    }
    if d.rows.len() > top {
        writeln!(
            out,
            "({} more stacks; --top N shows more)",
            d.rows.len() - top
        )?;
    }
    let total = |f: fn(&Change) -> f64| d.rows.iter().map(|r| f(&r.inuse_space)).sum::<f64>();
    let se = d
        .rows
        .iter()
        .map(|r| r.inuse_space.stderr.map(|s| s * s))
        .sum::<Option<f64>>();
    writeln!(
        out,
        "\nin use: {} -> {}, {} {}; * marks growth beyond 2 standard errors",
        bytes(total(|c| c.a)),
        bytes(total(|c| c.b)),
        signed(total(|c| c.growth)),
        se.map_or("(error unknown)".into(), |v| format!(
            "± {}",
            bytes(v.sqrt())
        ))
    )
}

fn signed(v: f64) -> String {
    if v > 0.0 {
        format!("+{}", bytes(v))
    } else {
        bytes(v)
    }
}
