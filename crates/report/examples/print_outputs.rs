//! Prints the outputs `run`, `replay` and `watch` only make while they run (terminal tables, the
//! `--export-*` summaries), from a results or watch directory already on disk, so that
//! `scripts/compare-outputs.sh` can compare two builds byte for byte on fixed inputs.
//!
//! Usage: print_outputs DIR OUT — writes OUT/terminal.txt and, for a results directory,
//! OUT/summary.{md,json,csv}.
use std::path::PathBuf;

use report::{RunData, SummaryContext, SummaryFormat};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, out] = args.as_slice() else {
        return Err("usage: print_outputs DIR OUT".into());
    };
    let (dir, out) = (PathBuf::from(dir), PathBuf::from(out));
    std::fs::create_dir_all(&out)?;
    if watch::WatchDir::is_watch_dir(&dir) {
        let w = watch::WatchDir::load(&dir)?;
        std::fs::write(
            out.join("terminal.txt"),
            report::render_watch_summary(&w.results),
        )?;
        return Ok(());
    }
    let data = RunData::load(&dir)?;
    let r = &data.results;
    let names: Vec<String> = r.params.iter().map(|p| p.name.clone()).collect();
    let labels: Vec<String> = r.variants.iter().map(|v| v.label.clone()).collect();
    let mut table = report::render_run_table(&r.summary, &names, r.throughput_unit.as_deref());
    if let Some(markers) = report::render_marker_table(&r.runs, &labels) {
        table.push_str(&markers);
    }
    table.push_str(&report::render_ksm_table(
        &r.ksm_savings,
        &names,
        r.ksm.as_ref().map(|k| k.mechanism.as_str()),
    ));
    std::fs::write(out.join("terminal.txt"), table)?;
    let context = SummaryContext {
        param_names: &names,
        throughput_unit: r.throughput_unit.as_deref(),
        ksm_savings: &r.ksm_savings,
    };
    for (format, name) in [
        (SummaryFormat::Markdown, "summary.md"),
        (SummaryFormat::Json, "summary.json"),
        (SummaryFormat::Csv, "summary.csv"),
    ] {
        let mut bytes = Vec::new();
        report::export_summary(format, &r.summary, &context, &mut bytes)?;
        std::fs::write(out.join(name), bytes)?;
    }
    Ok(())
}
