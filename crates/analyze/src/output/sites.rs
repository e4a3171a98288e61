//! The call-site outputs (`analyze --sites`): text tables of the top functions and stacks per process,
//! their CSV files, and the JSON (the serde form of `CallSites`). Columns in docs/metrics.md,
//! "Call sites".
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use super::csv::OutputError;
use super::text::{bytes, count, duration, pct};
use std::collections::HashMap;

use crate::call_sites::{
    CallSites, Estimation, FunctionSite, SiteFigures, SiteFrame, SortKey, StackSite,
};
use crate::residency::SitesReading;

/// The CSV files `write_sites_csv` creates.
pub const SITE_FILES: [&str; 2] = ["sites_by_function.csv", "sites_by_stack.csv"];

/// Frames of a stack shown in the text output (the innermost ones; the JSON and CSV have them all).
const STACK_FRAMES_SHOWN: usize = 12;

/// Which process images `write_sites_text` shows, and how much of each.
pub struct SitesTextOptions<'a> {
    /// Indices into `CallSites::processes`, in the order shown (see `ranked_images`).
    pub images: &'a [usize],
    /// Functions and stacks shown per image.
    pub functions: usize,
    pub sort: SortKey,
    pub sort_label: &'a str,
}

/// The images of `sites` ranked as plain `analyze` ranks them: by `key` (peak live bytes, then
/// calls, of each image's analysis), largest first, trace order among equals; `top` of them, or
/// all in trace order when `top` is None.
pub fn ranked_images(
    sites: &CallSites,
    top: Option<usize>,
    key: impl Fn(u32, u32) -> (u64, u64),
) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sites.processes.len()).collect();
    if let Some(n) = top {
        order.sort_by_key(|&i| {
            let p = &sites.processes[i];
            std::cmp::Reverse(key(p.pid, p.exec_index))
        });
        order.truncate(n);
    }
    order
}

/// The top functions and stacks of the chosen process images, in the order they are sorted (the
/// warnings are the caller's to show).
pub fn write_sites_text<W: Write>(
    sites: &CallSites,
    options: &SitesTextOptions,
    mut out: W,
) -> io::Result<()> {
    let (top, sort, sort_label) = (options.functions, options.sort, options.sort_label);
    if let Some(r) = sites.stack_sample_bytes {
        writeln!(out, "{}", estimates_note(r))?;
    }
    let sampled = sites.stack_sample_bytes.is_some();
    for p in options.images.iter().map(|&i| &sites.processes[i]) {
        writeln!(out)?;
        writeln!(
            out,
            "== process {} (exec {}): {}",
            p.pid,
            p.exec_index,
            super::command_line(&p.cmdline)
        )?;
        if let Some(r) = &p.residency {
            writeln!(out, "{}", residency_note(r))?;
        }
        let resident = p.residency.is_some();
        let callers: Vec<&FunctionSite> =
            p.functions.iter().filter(|f| f.figures.calls > 0).collect();
        if p.without_stack.calls > 0 {
            // The estimates account for the unsampled calls only when there are some.
            let why = match (sampled, callers.is_empty()) {
                (false, _) => "",
                (true, false) => " (not sampled): the estimates below account for them",
                (true, true) => " (not sampled): no allocation of this image was sampled, so no site is estimated",
            };
            writeln!(
                out,
                "{} allocating calls have no stack{why}",
                count(p.without_stack.calls)
            )?;
        }
        writeln!(
            out,
            "top {} of {} allocating functions by {sort_label} (calls they made themselves):",
            top.min(callers.len()),
            callers.len()
        )?;
        if sampled {
            write!(out, "{:>7} ", "±")?;
        }
        write!(
            out,
            "{:>9} {:>10} {:>10} ",
            "calls", "requested", "peak live"
        )?;
        if resident {
            write!(out, "{:>10} {:>10} ", "resident", "free left")?;
        }
        writeln!(
            out,
            "{:>10} {:>7} {:>6} {:>9} {:>9} {:>9}  function (location, module)",
            "leaked", "blocks", "life0", "med life", "med time", "incl."
        )?;
        for f in callers.iter().take(top) {
            if sampled {
                write!(out, "{:>7} ", relative_error(&f.figures, sort))?;
            }
            figures_row(&mut out, &f.figures, resident)?;
            let module = f.module.rsplit('/').next().unwrap_or(&f.module);
            let location = f
                .location
                .as_deref()
                .map(|l| format!("{l}, "))
                .unwrap_or_default();
            writeln!(
                out,
                " {:>9}  {} ({location}{module})",
                count(f.calls_inclusive),
                f.function
            )?;
        }
        writeln!(
            out,
            "top {} of {} stacks by {sort_label}:",
            top.min(p.stacks.len()),
            p.stacks.len()
        )?;
        for (i, s) in p.stacks.iter().take(top).enumerate() {
            write_stack(&mut out, i + 1, s)?;
        }
    }
    let hidden = sites.processes.len() - options.images.len();
    if hidden > 0 {
        writeln!(
            out,
            "\n({hidden} more process image(s) with call sites not shown: --top N shows more, --all every one)"
        )?;
    }
    Ok(())
}

/// One function's figures; `resident`: with the resident and free-left columns.
fn figures_row<W: Write>(out: &mut W, f: &SiteFigures, resident: bool) -> io::Result<()> {
    write!(
        out,
        "{:>9} {:>10} {:>10} ",
        count(f.calls),
        bytes(f.requested_bytes),
        bytes(f.peak_live_bytes),
    )?;
    if resident {
        write!(
            out,
            "{:>10} {:>10} ",
            bytes(f.resident_bytes.unwrap_or(0)),
            bytes(f.free_left_bytes.unwrap_or(0))
        )?;
    }
    write!(
        out,
        "{:>10} {:>7} {:>6} {:>9} {:>9}",
        bytes(f.leaked_bytes),
        count(f.leaked_blocks),
        if f.lifetimes == 0 {
            "-".to_string()
        } else {
            pct(f.share_lifetime_zero)
        },
        f.lifetime_calls.median.map_or("-".to_string(), count),
        f.lifetime_ns.median.map_or("-".to_string(), duration),
    )
}

/// The line under a process's heading when it has a residency reading: which reading the
/// resident and free-left columns are taken at, and what they are.
pub fn residency_note(r: &SitesReading) -> String {
    format!(
        "heap residency at the reading of the peak heap RSS (at {:.3} s): {} resident, {} on pages \
         of live blocks, {} on pages only free memory holds; \"resident\" is a site's share of its \
         live blocks' pages, \"free left\" the free-only pages whose last freed block it allocated",
        r.t_ns as f64 / 1e9,
        bytes(r.parts.resident),
        bytes(r.parts.live_blocks),
        bytes(r.parts.free_only),
    )
}

/// The first line of a sampled trace's call sites: what the figures are.
pub fn estimates_note(stack_sample_bytes: u64) -> String {
    format!(
        "stacks were sampled (one per {} allocated on average): the figures per site are estimates \
         (± one standard error), \"exact\" where every allocation of the site was certain to be sampled",
        bytes(stack_sample_bytes)
    )
}

/// The standard error of the sort figure as a share of it, or "exact".
fn relative_error(f: &SiteFigures, sort: SortKey) -> String {
    match &f.estimate {
        None => String::new(),
        Some(e) if e.exact => "exact".to_string(),
        Some(e) => {
            let value = sort.value(f);
            if value == 0 {
                "-".to_string()
            } else {
                pct(e.se_of(sort) / value as f64)
            }
        }
    }
}

/// ` (± se)` after an estimated figure, in its unit; nothing for exact figures.
fn plus_minus(f: &SiteFigures, se: impl Fn(&Estimation) -> f64, unit: fn(u64) -> String) -> String {
    match &f.estimate {
        Some(e) if !e.exact && se(e) >= 0.5 => format!(" (± {})", unit(se(e).round() as u64)),
        _ => String::new(),
    }
}

/// ` (± se)` after an estimated share, when it shows at the share's precision (0.1 %).
fn share_plus_minus(f: &SiteFigures) -> String {
    match &f.estimate {
        Some(e) if !e.exact && e.share_lifetime_zero_se >= 0.0005 => {
            format!(" (± {})", pct(e.share_lifetime_zero_se))
        }
        _ => String::new(),
    }
}

fn write_stack<W: Write>(out: &mut W, rank: usize, s: &StackSite) -> io::Result<()> {
    let f = &s.figures;
    let kind = match &f.estimate {
        None => String::new(),
        Some(e) if e.exact => format!(" exact ({} sampled calls)", count(e.sampled_calls)),
        Some(e) => format!(" estimated from {} sampled calls:", count(e.sampled_calls)),
    };
    writeln!(
        out,
        "#{rank}:{kind} {}{} calls, {}{} requested (median size {}), peak live {}{}, leaked {}{} in {}{} blocks, \
         lifetime 0: {}, median lifetime {} calls / {}",
        count(f.calls),
        plus_minus(f, |e| e.calls_se, count),
        bytes(f.requested_bytes),
        plus_minus(f, |e| e.requested_bytes_se, bytes),
        f.sizes.median.map_or("-".to_string(), bytes),
        bytes(f.peak_live_bytes),
        plus_minus(f, |e| e.peak_live_bytes_se, bytes),
        bytes(f.leaked_bytes),
        plus_minus(f, |e| e.leaked_bytes_se, bytes),
        count(f.leaked_blocks),
        plus_minus(f, |e| e.leaked_blocks_se, count),
        if f.lifetimes == 0 {
            "-".to_string()
        } else {
            format!("{}{}", pct(f.share_lifetime_zero), share_plus_minus(f))
        },
        f.lifetime_calls.median.map_or("-".to_string(), count),
        f.lifetime_ns.median.map_or("-".to_string(), duration),
    )?;
    if let (Some(resident), Some(free_left)) = (f.resident_bytes, f.free_left_bytes) {
        writeln!(
            out,
            "    resident {}, free left {}",
            bytes(resident),
            bytes(free_left)
        )?;
    }
    for frame in s.frames.iter().take(STACK_FRAMES_SHOWN) {
        let module = frame.module.rsplit('/').next().unwrap_or(&frame.module);
        let at = frame
            .location()
            .map(|l| format!(" at {l}"))
            .unwrap_or_default();
        let inlined = if frame.inlined { " [inlined]" } else { "" };
        writeln!(out, "    {}{at} in {module}{inlined}", frame.label)?;
    }
    if s.frames.len() > STACK_FRAMES_SHOWN {
        writeln!(
            out,
            "    ... {} outer frames",
            s.frames.len() - STACK_FRAMES_SHOWN
        )?;
    }
    Ok(())
}

/// The JSON of `analyze --sites --json`: per process, each distinct frame once (`frames`) and stacks
/// as indices into it, innermost first (a stack repeats the outer frames of many others: written out,
/// cc1's 7,000 stacks took 50 MB).
pub fn write_sites_json<W: Write>(sites: &CallSites, mut out: W) -> io::Result<()> {
    #[derive(Serialize)]
    struct Stack<'a> {
        frames: Vec<u32>,
        figures: &'a SiteFigures,
        stack_ids: &'a [u32],
    }
    #[derive(Serialize)]
    struct Process<'a> {
        pid: u32,
        exec_index: u32,
        cmdline: &'a [String],
        frames: Vec<&'a SiteFrame>,
        functions: &'a [FunctionSite],
        stacks: Vec<Stack<'a>>,
        without_stack: &'a SiteFigures,
        /// The reading the resident figures are taken at, when the image has readings.
        #[serde(skip_serializing_if = "Option::is_none")]
        residency: Option<&'a SitesReading>,
    }
    #[derive(Serialize)]
    struct Document<'a> {
        /// Present when the stacks were sampled: the figures are estimates.
        #[serde(skip_serializing_if = "Option::is_none")]
        stack_sample_bytes: Option<u64>,
        processes: Vec<Process<'a>>,
        warnings: &'a [String],
    }
    let processes = sites
        .processes
        .iter()
        .map(|p| {
            let mut index: HashMap<&SiteFrame, u32> = HashMap::new();
            let mut frames = Vec::new();
            let stacks = p
                .stacks
                .iter()
                .map(|s| Stack {
                    frames: s
                        .frames
                        .iter()
                        .map(|f| {
                            *index.entry(&**f).or_insert_with(|| {
                                frames.push(&**f);
                                frames.len() as u32 - 1
                            })
                        })
                        .collect(),
                    figures: &s.figures,
                    stack_ids: &s.stack_ids,
                })
                .collect();
            Process {
                pid: p.pid,
                exec_index: p.exec_index,
                cmdline: &p.cmdline,
                frames,
                functions: &p.functions,
                stacks,
                without_stack: &p.without_stack,
                residency: p.residency.as_ref(),
            }
        })
        .collect();
    serde_json::to_writer(
        &mut out,
        &Document {
            stack_sample_bytes: sites.stack_sample_bytes,
            processes,
            warnings: &sites.warnings,
        },
    )?;
    out.write_all(b"\n")
}

/// One row of sites_by_function.csv / sites_by_stack.csv.
#[derive(Serialize)]
struct Row<'a> {
    pid: u32,
    exec: u32,
    rank: usize,
    /// The function, or the stack's frames innermost first joined by " <- ".
    site: String,
    location: &'a str,
    module: &'a str,
    calls: u64,
    requested_bytes: u64,
    peak_live_bytes: u64,
    leaked_bytes: u64,
    leaked_blocks: u64,
    lifetimes: u64,
    lifetime_zero: u64,
    share_lifetime_zero: f64,
    lifetime_calls_median: Option<u64>,
    lifetime_calls_p90: Option<u64>,
    lifetime_ns_median: Option<u64>,
    lifetime_ns_p90: Option<u64>,
    size_median: Option<u64>,
    size_p90: Option<u64>,
    size_max: Option<u64>,
    calls_inclusive: Option<u64>,
    bytes_inclusive: Option<u64>,
    stacks: u64,
    /// Sampled traces only (the columns are absent otherwise): `Estimation`.
    #[serde(skip_serializing_if = "Option::is_none")]
    exact: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sampled_calls: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    calls_se: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    requested_bytes_se: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peak_live_bytes_se: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    leaked_bytes_se: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    leaked_blocks_se: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    share_lifetime_zero_se: Option<f64>,
    /// Traces with residency readings only (absent otherwise; empty for an image without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    resident_bytes: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    free_left_bytes: Option<Option<u64>>,
}

/// `resident`: the trace has residency readings (the columns are the file's, not the image's).
#[allow(clippy::too_many_arguments)]
fn row<'a>(
    pid: u32,
    exec: u32,
    rank: usize,
    site: String,
    location: &'a str,
    module: &'a str,
    f: &SiteFigures,
    resident: bool,
) -> Row<'a> {
    Row {
        pid,
        exec,
        rank,
        site,
        location,
        module,
        calls: f.calls,
        requested_bytes: f.requested_bytes,
        peak_live_bytes: f.peak_live_bytes,
        leaked_bytes: f.leaked_bytes,
        leaked_blocks: f.leaked_blocks,
        lifetimes: f.lifetimes,
        lifetime_zero: f.lifetime_zero,
        share_lifetime_zero: f.share_lifetime_zero,
        lifetime_calls_median: f.lifetime_calls.median,
        lifetime_calls_p90: f.lifetime_calls.p90,
        lifetime_ns_median: f.lifetime_ns.median,
        lifetime_ns_p90: f.lifetime_ns.p90,
        size_median: f.sizes.median,
        size_p90: f.sizes.p90,
        size_max: f.sizes.max,
        calls_inclusive: None,
        bytes_inclusive: None,
        stacks: f.stacks,
        exact: f.estimate.map(|e| e.exact),
        sampled_calls: f.estimate.map(|e| e.sampled_calls),
        calls_se: f.estimate.map(|e| e.calls_se),
        requested_bytes_se: f.estimate.map(|e| e.requested_bytes_se),
        peak_live_bytes_se: f.estimate.map(|e| e.peak_live_bytes_se),
        leaked_bytes_se: f.estimate.map(|e| e.leaked_bytes_se),
        leaked_blocks_se: f.estimate.map(|e| e.leaked_blocks_se),
        share_lifetime_zero_se: f.estimate.map(|e| e.share_lifetime_zero_se),
        resident_bytes: resident.then_some(f.resident_bytes),
        free_left_bytes: resident.then_some(f.free_left_bytes),
    }
}

/// Writes every site (not only the top ones) of every process into `dir`.
pub fn write_sites_csv(sites: &CallSites, dir: &Path) -> Result<(), OutputError> {
    std::fs::create_dir_all(dir).map_err(|source| OutputError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let path = dir.join(SITE_FILES[0]);
    let fail = |path: &Path| {
        let path = path.to_path_buf();
        move |source| OutputError::Csv { path, source }
    };
    let resident = sites.processes.iter().any(|p| p.residency.is_some());
    let mut w = csv::Writer::from_path(&path).map_err(fail(&path))?;
    for p in &sites.processes {
        for (i, f) in p.functions.iter().enumerate() {
            let mut r = row(
                p.pid,
                p.exec_index,
                i + 1,
                f.function.clone(),
                f.location.as_deref().unwrap_or(""),
                &f.module,
                &f.figures,
                resident,
            );
            r.calls_inclusive = Some(f.calls_inclusive);
            r.bytes_inclusive = Some(f.bytes_inclusive);
            w.serialize(r).map_err(fail(&path))?;
        }
    }
    w.flush().map_err(|e| OutputError::Csv {
        path: path.clone(),
        source: e.into(),
    })?;
    let path = dir.join(SITE_FILES[1]);
    let mut w = csv::Writer::from_path(&path).map_err(fail(&path))?;
    for p in &sites.processes {
        for (i, s) in p.stacks.iter().enumerate() {
            let site = s
                .frames
                .iter()
                .map(|f| f.label.as_str())
                .collect::<Vec<_>>()
                .join(" <- ");
            let location = s
                .frames
                .first()
                .and_then(|f| f.location())
                .unwrap_or_default();
            let module = s.frames.first().map_or("", |f| f.module.as_str());
            w.serialize(row(
                p.pid,
                p.exec_index,
                i + 1,
                site,
                &location,
                module,
                &s.figures,
                resident,
            ))
            .map_err(fail(&path))?;
        }
    }
    w.flush().map_err(|e| OutputError::Csv {
        path: path.clone(),
        source: e.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call_sites::ProcessSites;

    /// Issue 35: an image of a sampled trace none of whose allocations was sampled said "the
    /// estimates below account for them" above an empty table.
    #[test]
    fn unsampled_calls_are_said_to_be_estimated_only_when_some_site_is() {
        let image = ProcessSites {
            pid: 7,
            without_stack: SiteFigures {
                calls: 12,
                ..SiteFigures::default()
            },
            ..ProcessSites::default()
        };
        let sites = CallSites {
            processes: vec![image],
            stack_sample_bytes: Some(16384),
            ..CallSites::default()
        };
        let options = SitesTextOptions {
            images: &[0],
            functions: 10,
            sort: SortKey::Calls,
            sort_label: "calls",
        };
        let mut text = Vec::new();
        write_sites_text(&sites, &options, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(!text.contains("the estimates below"), "{text}");
        assert!(
            text.contains("12 allocating calls have no stack (not sampled): no allocation of this image was sampled"),
            "{text}"
        );
    }
}
