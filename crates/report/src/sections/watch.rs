//! The page of an `alloclens watch` directory: the verdict, RSS against live bytes against the
//! allocator's bytes over time, the smaps split over time, and how the agent was attached, what gdb
//! (older files) or the trim probe saw.
use trace::human_bytes;
use watch::{WatchDir, WatchResults, WatchSample};

use crate::document::chart::{Axis, Chart, Emphasis, Line, Unit};
use crate::document::{Block, Document, Reportable, Section};
use crate::tables::{self, Output};

fn line(
    label: &str,
    color: &str,
    samples: &[WatchSample],
    f: fn(&WatchSample) -> Option<u64>,
) -> Line {
    Line {
        label: label.into(),
        points: samples
            .iter()
            .filter_map(|s| f(s).map(|v| (s.t_s, v as f64)))
            .collect(),
        color: color.into(),
        emphasis: Emphasis::Normal,
    }
}

impl Reportable for WatchDir {
    fn document(&self) -> Document {
        let r = &self.results;
        let what = if r.command.is_empty() {
            format!("pid {}", r.pid.unwrap_or_default())
        } else {
            watch::verdict::shell_line(&r.command)
        };
        let mut sections = vec![verdict(self, &what), memory(self)];
        sections.extend(readings(r));
        Document {
            title: format!("alloclens watch: {what}"),
            sections,
        }
    }
}

/// The verdict, its evidence and remedy, the warnings, and what was watched how.
fn verdict(dir: &WatchDir, what: &str) -> Section {
    let r = &dir.results;
    let mut verdict = Section::new("verdict", "Verdict");
    if let Some(v) = &r.verdict {
        // The evidence has its "Verdict: CLASS. ..." sentence; one with too few samples has not.
        if !v.evidence.iter().any(|e| e.starts_with("Verdict: ")) {
            verdict.push(Block::Paragraph("Verdict: undetermined.".into()));
        }
        for e in &v.evidence {
            verdict.push(Block::Paragraph(e.clone()));
        }
        for line in &v.remedy {
            verdict.push(Block::Paragraph(line.clone()));
        }
        for c in &v.commands {
            verdict.push(Block::Code(c.clone()));
        }
    }
    // Without a readable sample, samples_damage says why (killed before the first sample,
    // a command that could not start under an earlier alloclens, a damaged file).
    if r.ending.is_none() && !dir.samples.is_empty() {
        verdict.push(Block::Warning(
                "This watch did not finish (alloclens was killed): the verdict is made from samples.csv as it was left.".into(),
            ));
    }
    for w in r
        .warnings
        .iter()
        .chain(&r.incomplete_files)
        .chain(&dir.samples_damage)
    {
        verdict.push(Block::Warning(w.clone()));
    }
    let mut facts = vec![
        ("watched".to_string(), what.to_string()),
        (
            "allocator".to_string(),
            r.allocator.clone().unwrap_or_else(|| "unknown".into()),
        ),
        (
            "interval".to_string(),
            if r.ticks_skipped > 0 {
                format!("{} s ({} ticks skipped)", r.interval_s, r.ticks_skipped)
            } else {
                format!("{} s", r.interval_s)
            },
        ),
        (
            "samples".to_string(),
            if dir.samples.len() as u64 == r.samples_kept {
                format!("{} taken, {} kept", r.samples_taken, r.samples_kept)
            } else {
                format!(
                    "{} taken, {} kept, {} readable in samples.csv",
                    r.samples_taken,
                    r.samples_kept,
                    dir.samples.len()
                )
            },
        ),
        ("peak RSS".to_string(), human_bytes(r.peak_rss)),
    ];
    if let Some(variant) = &r.variant {
        facts.insert(1, ("variant (-a)".into(), variant.clone()));
    }
    verdict.push(Block::Facts(facts));
    verdict
}

/// RSS against live bytes against the allocator's bytes, and the smaps split, over time.
fn memory(dir: &WatchDir) -> Section {
    let r = &dir.results;
    let time = || Axis::new("time since start", Unit::Seconds);
    let mut memory = Section::new("watch-memory", "Memory over time");
    memory.push(Block::Paragraph(
            "RSS of the whole tree, the bytes the program holds (live bytes, the agent's count), the bytes the allocator has handed out and the free bytes it keeps resident (its own statistics). RSS growing while live bytes stay flat is the allocator's, not the program's.".into(),
        ));
    let mut lines = vec![
        line("RSS", "#1f77b4", &dir.samples, |s| Some(s.rss)),
        line("PSS", "#aec7e8", &dir.samples, |s| Some(s.pss)),
        line("live bytes", "#2ca02c", &dir.samples, |s| s.live_bytes),
        line("handed out", "#98df8a", &dir.samples, |s| s.handed_out),
        line("allocator free (resident)", "#d62728", &dir.samples, |s| {
            s.free_resident
        }),
    ];
    // --pid: glibc's figures at each gdb reading.
    let gdb = |f: fn(&agent::AllocatorStats) -> Option<u64>| -> Vec<(f64, f64)> {
        r.gdb
            .iter()
            .filter_map(|g| Some((g.t_s, f(g.stats.as_ref()?)? as f64)))
            .collect()
    };
    for (label, color, points) in [
        ("glibc in use (gdb)", "#2ca02c", gdb(|s| s.handed_out)),
        ("glibc free (gdb)", "#d62728", gdb(|s| s.free_resident)),
    ] {
        lines.push(Line {
            label: label.into(),
            points,
            color: color.into(),
            emphasis: Emphasis::Bold,
        });
    }
    // A line the watch did not measure (no agent, no gdb) is left out, not drawn empty.
    lines.retain(|l| !l.points.is_empty());
    memory.push_chart(Chart::from_lines(
        "watch-memory",
        "RSS, live bytes and the allocator's bytes",
        time(),
        Axis::new("bytes", Unit::Bytes),
        lines,
    ));
    memory.push_chart(Chart::from_lines(
        "watch-split",
        "RSS split from smaps",
        time(),
        Axis::new("bytes", Unit::Bytes),
        vec![
            line("heap", "#d62728", &dir.samples, |s| Some(s.heap)),
            line("file-backed", "#9467bd", &dir.samples, |s| Some(s.file)),
            line("stack", "#8c564b", &dir.samples, |s| Some(s.stack)),
            line("other", "#7f7f7f", &dir.samples, |s| Some(s.other)),
        ],
    ));
    memory
}

/// How the agent was attached, what gdb or the trim probe saw (`tables::watch`), when there is
/// something.
fn readings(r: &WatchResults) -> Option<Section> {
    if r.attach.is_none() && r.gdb.is_empty() && r.trim.is_empty() {
        return None;
    }
    let mut probes = Section::new("watch-probes", "Allocator readings");
    if r.attach.is_some() {
        probes.push(Block::Table(tables::watch::attach(r)));
    }
    if !r.gdb.is_empty() {
        probes.push(Block::Table(tables::watch::gdb(r, Output::Html)));
    }
    if !r.trim.is_empty() {
        probes.push(Block::Table(tables::watch::trim(r)));
    }
    Some(probes)
}
