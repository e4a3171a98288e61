//! The human-readable summary: one section per process, compact tables for threads and phases.
use std::io::{self, Write};

use crate::analysis::{Analysis, Peak, ProcessReport, ScopeReport};
use crate::metrics::{scope_metric, Unit, Value};

/// How many entries of the longer lists the summary shows (the JSON and CSV have them all).
const TOP: usize = 8;

/// How much of the trace the summary shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextOptions {
    /// Processes given a section of their own, by peak live bytes then calls; None: every one.
    pub top: Option<usize>,
}

/// The summary of every process, in trace order (what `alloclens analyze --all` prints, without
/// the whole-trace summary).
pub fn write_text<W: Write>(analysis: &Analysis, out: W) -> io::Result<()> {
    write_text_with(analysis, TextOptions { top: None }, out)
}

/// The summary: the whole trace first when it has several processes, then the `top` processes.
pub fn write_text_with<W: Write>(
    analysis: &Analysis,
    options: TextOptions,
    mut out: W,
) -> io::Result<()> {
    if !analysis.recorder_finished {
        writeln!(
            out,
            "UNFINISHED recording: the trace has no trailer (the recorder was killed or crashed, or \
             the file was cut); the figures cover what it wrote"
        )?;
    }
    let f = &analysis.filters;
    if f.phase.is_some() || f.process.is_some() {
        let mut parts = Vec::new();
        if let Some(p) = f.process {
            parts.push(format!("process {p}"));
        }
        if let Some(p) = &f.phase {
            parts.push(format!(
                "phase '{p}' (process and thread figures count only that phase)"
            ));
        }
        writeln!(out, "filter: {}", parts.join(", "))?;
    }
    if analysis.processes.is_empty() {
        writeln!(out, "no process in the trace")?;
    }
    if !analysis.untraced.is_empty() {
        writeln!(
            out,
            "not traced ({} program(s) ran without the shim; none of their calls are counted):",
            analysis.untraced.len()
        )?;
        for u in &analysis.untraced {
            writeln!(out, "  {}", crate::describe_untraced(u))?;
        }
    }
    if analysis.processes.len() > 1 {
        write_whole_trace(&analysis.processes, &mut out)?;
    }
    let shown = ranked(&analysis.processes, options.top);
    for p in &shown {
        write_process(p, &mut out)?;
    }
    let hidden = analysis.processes.len() - shown.len();
    if hidden > 0 {
        writeln!(
            out,
            "\n({hidden} more process image(s) not shown: --top N shows more, --all every one)"
        )?;
    }
    let truncated = analysis.processes.iter().filter(|p| p.truncated).count();
    if truncated > 0 {
        // Pool workers stopped with SIGTERM are the common case: the mark alone read as lost data.
        writeln!(
            out,
            "\n[TRUNCATED]: {truncated} process image(s) ended without the shim's goodbye (killed by a \
             signal, crashed, exit_group), still ran when the recording ended, or were cut by damage \
             to the file (see the warnings): their figures stop at their last recorded call, and \
             their never-freed blocks include those still live then"
        )?;
    }
    Ok(())
}

/// The processes to detail: all of them in trace order, or the `top` by peak live bytes (then
/// calls), biggest first.
fn ranked(processes: &[ProcessReport], top: Option<usize>) -> Vec<&ProcessReport> {
    let mut all: Vec<&ProcessReport> = processes.iter().collect();
    if let Some(n) = top {
        all.sort_by_key(|p| {
            std::cmp::Reverse((p.stats.peak_live_bytes.value, p.stats.calls_total))
        });
        all.truncate(n);
    }
    all
}

/// Totals over every process image, then one line per image (biggest first, at most [`TOP`]).
fn write_whole_trace<W: Write>(processes: &[ProcessReport], out: &mut W) -> io::Result<()> {
    let sum = |f: fn(&ScopeReport) -> u64| -> u64 { processes.iter().map(|p| f(&p.stats)).sum() };
    writeln!(
        out,
        "whole trace: {} process image(s) in {} process(es)",
        processes.len(),
        crate::process_count(processes)
    )?;
    writeln!(
        out,
        "  calls: {}; allocations: {}; requested: {}",
        count(sum(|s| s.calls_total)),
        count(sum(|s| s.allocations)),
        bytes(sum(|s| s.requested_bytes))
    )?;
    writeln!(
        out,
        "  peak live, summed over the images: {} (the tree's peak at one moment is at most this)",
        bytes(sum(|s| s.peak_live_bytes.value))
    )?;
    writeln!(
        out,
        "  never freed: {} allocations, {}",
        count(sum(|s| s.leaks.count)),
        bytes(sum(|s| s.leaks.bytes))
    )?;
    writeln!(out, "  by peak live bytes:")?;
    let rows = ranked(processes, Some(TOP));
    let widths = (
        rows.iter()
            .map(|p| p.pid.to_string().len())
            .max()
            .unwrap_or(3)
            .max(3),
        rows.iter()
            .map(|p| bytes(p.stats.peak_live_bytes.value).len())
            .max()
            .unwrap_or(9)
            .max(9),
        rows.iter()
            .map(|p| count(p.stats.calls_total).len())
            .max()
            .unwrap_or(5)
            .max(5),
    );
    writeln!(
        out,
        "    {:>w0$}  {:>w1$}  {:>w2$}  command",
        "pid",
        "peak live",
        "calls",
        w0 = widths.0,
        w1 = widths.1,
        w2 = widths.2
    )?;
    for p in &rows {
        writeln!(
            out,
            "    {:>w0$}  {:>w1$}  {:>w2$}  {}",
            p.pid,
            bytes(p.stats.peak_live_bytes.value),
            count(p.stats.calls_total),
            super::command_line(&p.cmdline),
            w0 = widths.0,
            w1 = widths.1,
            w2 = widths.2
        )?;
    }
    if processes.len() > rows.len() {
        writeln!(out, "    ... {} more", processes.len() - rows.len())?;
    }
    Ok(())
}

fn write_process<W: Write>(p: &ProcessReport, out: &mut W) -> io::Result<()> {
    let cmd = super::command_line(&p.cmdline);
    writeln!(out)?;
    writeln!(
        out,
        "== process {} (parent {}, exec {}){}: {cmd}",
        p.pid,
        p.ppid,
        p.exec_index,
        if p.truncated { " [TRUNCATED]" } else { "" }
    )?;
    if p.duration_ns == 0 && p.life_calls > 1 {
        // Event times are interpolated between the recorder's anchors (docs/trace-format.md): a
        // life that fits between two anchors has no measured length, and "over 0 ns" would be a
        // figure nobody measured.
        writeln!(
            out,
            "life: {} allocator calls, all between two time anchors (shorter than the recorder's time resolution, about 1 ms)",
            count(p.life_calls)
        )?;
    } else {
        writeln!(
            out,
            "life: {} allocator calls over {}",
            count(p.life_calls),
            duration(p.duration_ns)
        )?;
    }
    write_scope(&p.stats, p.life_calls, "", out)?;
    if let Some(m) = &p.memory {
        write_memory(m, out)?;
    }
    if p.threads.len() > 1 {
        writeln!(out, "threads (by allocating thread):")?;
        table_header(out, "tid")?;
        for t in &p.threads {
            table_row(out, &t.tid.to_string(), &t.stats)?;
        }
    }
    if p.phases.len() > 1 || p.phases.first().is_some_and(|ph| ph.name != "start") {
        writeln!(out, "phases (between markers):")?;
        table_header(out, "phase")?;
        for ph in &p.phases {
            table_row(out, &ph.name, &ph.stats)?;
        }
    }
    Ok(())
}

/// The original run's memory as the recorder read it (`ProcessReport::memory`).
fn write_memory<W: Write>(m: &trace::MemorySummary, out: &mut W) -> io::Result<()> {
    let figures = |f: &trace::MemoryFigures| {
        format!(
            "peak {}, mean {}",
            bytes(f.peak),
            bytes(f.mean.round() as u64)
        )
    };
    writeln!(
        out,
        "memory as recorded ({} readings; mean over calls): RSS {}; anonymous {}",
        count(m.rss.samples as u64),
        figures(&m.rss),
        figures(&m.anon)
    )?;
    if let (Some(heap), Some(rest)) = (&m.heap, &m.non_heap) {
        writeln!(
            out,
            "  heap (private anonymous, {} readings of smaps): {}; rest of RSS (files, stacks, ...): {}",
            count(heap.samples as u64),
            figures(heap),
            figures(rest)
        )?;
    }
    Ok(())
}

fn write_scope<W: Write>(s: &ScopeReport, life: u64, indent: &str, out: &mut W) -> io::Result<()> {
    let calls: Vec<String> = s
        .calls
        .iter()
        .map(|(k, v)| format!("{k} {}", count(*v)))
        .collect();
    // A process that made no call has no breakdown to show ("calls: 0", not "calls: 0 ()").
    let by_function = if calls.is_empty() {
        String::new()
    } else {
        format!(" ({})", calls.join(", "))
    };
    writeln!(out, "{indent}calls: {}{by_function}", count(s.calls_total))?;
    writeln!(
        out,
        "{indent}requested: {} in {} requests ({} allocations); failed {}; free(NULL) {}; unmatched frees {}{}, reallocs {}",
        bytes(s.requested_bytes),
        count(s.requests),
        count(s.allocations),
        count(s.failed_allocations),
        count(s.null_frees),
        count(s.unmatched_frees),
        if s.unmatched_freed_bytes > 0 {
            format!(" ({})", bytes(s.unmatched_freed_bytes))
        } else {
            String::new()
        },
        count(s.unmatched_reallocs)
    )?;
    writeln!(
        out,
        "{indent}peak live: {} {}; {} allocations {}",
        bytes(s.peak_live_bytes.value),
        when(&s.peak_live_bytes),
        count(s.peak_live_allocations.value),
        when(&s.peak_live_allocations)
    )?;
    writeln!(
        out,
        "{indent}cumulated: upper bound {}, lower bound {}",
        bytes(s.requested_bytes),
        bytes(s.cumulated_lower_bytes)
    )?;
    let z = &s.sizes;
    let top16: Vec<String> = {
        let mut b = z.buckets_16.clone();
        b.sort_by(|x, y| y.count.cmp(&x.count).then(x.low.cmp(&y.low)));
        b.iter()
            .take(TOP)
            .map(|b| format!("{}-{} B: {}", b.low, b.high, count(b.count)))
            .collect()
    };
    writeln!(
        out,
        "{indent}sizes: {} below 512 B; most requested 16-byte buckets: {}",
        pct(z.share_below_512),
        or_none(&top16)
    )?;
    let over: Vec<String> = z
        .over_represented
        .iter()
        .take(TOP)
        .map(|o| {
            format!(
                "{} B x{} ({}x neighbours)",
                o.top_size,
                count(o.count),
                ratio(o.count, o.neighbour_median)
            )
        })
        .collect();
    writeln!(out, "{indent}over-represented sizes: {}", or_none(&over))?;
    let l = &s.lifetimes;
    if l.count > 0 {
        let pcts: Vec<String> = l
            .percentiles
            .iter()
            .filter(|p| p.q < 1.0)
            .map(|p| format!("p{} {}", trim(p.q * 100.0), count(p.calls)))
            .collect();
        let median = l.percentiles.iter().find(|p| p.q == 0.5);
        writeln!(
            out,
            "{indent}lifetimes (calls between allocation and free, {} ended): {}; max {}",
            count(l.count),
            pcts.join(", "),
            count(l.max_calls)
        )?;
        if let Some(m) = median {
            writeln!(
                out,
                "{indent}  lifetime 0: {}; median {} of the process life ({} calls), {}",
                pct(l.share_zero),
                sci(m.share_of_life),
                count(life),
                duration(m.ns)
            )?;
        }
    } else {
        writeln!(out, "{indent}lifetimes: no allocation was freed")?;
    }
    let leaks: Vec<String> = s
        .leaks
        .top_sizes
        .iter()
        .take(TOP)
        .map(|l| format!("{} B x{}", l.size, count(l.count)))
        .collect();
    writeln!(
        out,
        "{indent}never freed: {} allocations, {}{}",
        count(s.leaks.count),
        bytes(s.leaks.bytes),
        if leaks.is_empty() {
            String::new()
        } else {
            format!("; sizes: {}", leaks.join(", "))
        }
    )?;
    Ok(())
}

/// The columns of the thread and phase tables: header, metric (`metrics::SCOPE_METRICS`), width.
struct TableColumn {
    header: &'static str,
    metric: &'static str,
    width: usize,
    /// Shown as "-" when this metric is 0 (a share of nothing).
    blank_without: Option<&'static str>,
}

const fn col(header: &'static str, metric: &'static str, width: usize) -> TableColumn {
    TableColumn {
        header,
        metric,
        width,
        blank_without: None,
    }
}

const TABLE_COLUMNS: &[TableColumn] = &[
    col("calls", "calls", 10),
    col("requested", "requested_bytes", 11),
    col("peak live", "peak_live_bytes", 11),
    col("peak allocs", "peak_live_allocations", 11),
    col("<512 B", "share_below_512", 8),
    col("median lt", "lifetime_median_calls", 10),
    TableColumn {
        blank_without: Some("lifetimes"),
        ..col("lt 0", "lifetime_share_zero", 8)
    },
    col("never freed", "leaked_bytes", 11),
];

fn table_header<W: Write>(out: &mut W, first: &str) -> io::Result<()> {
    let mut line = format!("  {first:<20}");
    for c in TABLE_COLUMNS {
        line.push_str(&format!(" {:>w$}", c.header, w = c.width));
    }
    writeln!(out, "{line}")
}

fn table_row<W: Write>(out: &mut W, name: &str, s: &ScopeReport) -> io::Result<()> {
    let name: String = if name.chars().count() > 20 {
        name.chars().take(19).chain(['…']).collect()
    } else {
        name.to_string()
    };
    let mut line = format!("  {name:<20}");
    for c in TABLE_COLUMNS {
        let blank = c
            .blank_without
            .is_some_and(|k| (scope_metric(k).value)(s) == Value::Int(0));
        let m = scope_metric(c.metric);
        let cell = if blank {
            "-".to_string()
        } else {
            value(m.unit, (m.value)(s))
        };
        line.push_str(&format!(" {cell:>w$}", w = c.width));
    }
    writeln!(out, "{line}")
}

/// A figure in the summary's units: "1,234", "1.5 KiB", "98.4%", "1.5 ms", "-" when undefined.
fn value(unit: Unit, v: Value) -> String {
    match (unit, v) {
        (_, Value::Missing) => "-".to_string(),
        (_, Value::Share(share)) => pct(share),
        (Unit::Bytes, Value::Int(n)) => bytes(n),
        (Unit::Nanoseconds, Value::Int(n)) => duration(n),
        (Unit::Count | Unit::Calls | Unit::Share, Value::Int(n)) => count(n),
    }
}

fn when(p: &Peak) -> String {
    format!("(after call {}, at {})", count(p.call), duration(p.t_ns))
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

/// 1234567 -> "1,234,567".
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Binary units: "512 B", "1.5 KiB", "3.2 GiB" (the formatter every text output shares).
pub use trace::human_bytes as bytes;

pub fn duration(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

pub fn pct(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// Shares of the process life span many orders of magnitude (the study's median is 2e-7 %).
fn sci(share: f64) -> String {
    if share == 0.0 {
        "0%".to_string()
    } else if share >= 0.001 {
        pct(share)
    } else {
        format!("{:.1e}%", share * 100.0)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

fn ratio(count: u64, median: u64) -> String {
    format!("{:.0}", count as f64 / median.max(1) as f64)
}

/// What an attached recording (`record --pid`) covers: from the attach to the detach, with the
/// heap the process already held (its allocator's count), the heap at the detach that follows
/// from it (the attached image's blocks still live, less what its frees of older blocks released)
/// and how to read the frees of older blocks.
pub fn attached_line(
    pid: u32,
    figures: Option<&trace::AttachFigures>,
    analysis: &crate::Analysis,
) -> String {
    let image = analysis
        .processes
        .iter()
        .find(|p| p.pid == pid && p.exec_index == 0);
    let heap = match figures.and_then(|f| f.heap_in_use.map(|b| (b, &f.heap_source))) {
        Some((b, source)) => {
            let at_detach = image.map_or(String::new(), |p| {
                let s = &p.stats;
                let estimate = (b + s.leaks.bytes).saturating_sub(s.unmatched_freed_bytes);
                format!(", at the detach about {}", bytes(estimate))
            });
            format!(
                "; heap in use at the attach: {} ({source}){at_detach}",
                bytes(b)
            )
        }
        None => String::new(),
    };
    format!(
        "attached to running pid {pid}: calls from the attach to the detach{heap}; blocks allocated \
         before it are not in the trace, their frees are the unmatched frees"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(count(0), "0");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(123), "123");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(duration(1_500_000), "1.5 ms");
        assert_eq!(pct(0.984), "98.4%");
        assert_eq!(trim(99.9), "99.9");
        assert_eq!(trim(50.0), "50");
    }
}
