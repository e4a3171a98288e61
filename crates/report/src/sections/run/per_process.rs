//! The processes of one run: PSS of each over time, the largest first.
use std::collections::BTreeMap;

use runner::results_dir::SampleRow;

use super::*;
use crate::document::chart::{palette, Axis, Chart, Emphasis, Line, Unit};
use crate::document::{Block, Section, Table};
use crate::format;
use crate::run_data::RunData;

/// Lines of at most this many processes in the per-process chart (the largest by peak PSS).
const MAX_PROCESS_LINES: usize = 24;

pub(super) fn per_process(data: &RunData) -> Option<Section> {
    // The run with the most processes at once (the first such), as the example of a multi-process run.
    let run = data
        .results
        .runs
        .iter()
        .filter(|r| r.memory.max_processes > 1)
        .max_by(|a, b| {
            a.memory
                .max_processes
                .cmp(&b.memory.max_processes)
                .then(b.index.cmp(&a.index))
        })?;
    let rows: Vec<&SampleRow> = data
        .samples
        .iter()
        .filter(|s| s.run == run.index && s.pid.is_some())
        .collect();
    struct Proc {
        ppid: Option<u32>,
        comm: String,
        peak: u64,
        first: f64,
        last: f64,
        points: Vec<(f64, f64)>,
    }
    let mut procs: BTreeMap<u32, Proc> = BTreeMap::new();
    for r in rows {
        let p = procs.entry(r.pid.unwrap_or(0)).or_insert(Proc {
            ppid: r.ppid,
            comm: r.comm.clone(),
            peak: 0,
            first: r.t_s,
            last: r.t_s,
            points: Vec::new(),
        });
        p.peak = p.peak.max(r.pss);
        p.first = p.first.min(r.t_s);
        p.last = p.last.max(r.t_s);
        p.points.push((r.t_s, r.pss as f64));
    }
    let mut ranked: Vec<(u32, Proc)> = procs.into_iter().collect();
    ranked.sort_by(|a, b| b.1.peak.cmp(&a.1.peak).then(a.0.cmp(&b.0)));
    let mut s = Section::new(
        "processes",
        format!(
            "Processes of run {} ({}, repeat {}{})",
            run.index,
            run.variant,
            run.repeat + 1,
            params_suffix(run, data)
        ),
    );
    s.push(Block::Paragraph(format!(
        "The run with the most processes at once ({}; {} seen in all). PSS shares the pages common to \
         several processes between them, so the lines add up to the tree's total.",
        run.memory.max_processes, run.memory.distinct_processes
    )));
    if ranked.len() > MAX_PROCESS_LINES {
        s.push(Block::Paragraph(format!(
            "The chart shows the {MAX_PROCESS_LINES} largest processes by peak PSS of {}.",
            ranked.len()
        )));
    }
    let lines = ranked
        .iter()
        .take(MAX_PROCESS_LINES)
        .enumerate()
        .map(|(i, (pid, p))| Line {
            label: format!("{pid} {}", p.comm),
            points: p.points.clone(),
            color: palette(i),
            emphasis: Emphasis::Normal,
        })
        .collect();
    s.push_chart(Chart::from_lines(
        "pss-per-process",
        format!("PSS per process, run {}", run.index),
        Axis::new("time since start", Unit::Seconds),
        Axis::new("PSS", Unit::Bytes),
        lines,
    ));
    s.push(Block::Table(Table {
        caption: Some("Processes by peak PSS".into()),
        headers: [
            "pid",
            "ppid",
            "command",
            "peak PSS",
            "first seen",
            "last seen",
        ]
        .map(String::from)
        .to_vec(),
        rows: ranked
            .iter()
            .map(|(pid, p)| {
                vec![
                    pid.to_string(),
                    p.ppid.map(|v| v.to_string()).unwrap_or_default(),
                    p.comm.clone(),
                    format::bytes(p.peak as f64),
                    format!("{:.3} s", p.first),
                    format!("{:.3} s", p.last),
                ]
            })
            .collect(),
    }));
    Some(s)
}
