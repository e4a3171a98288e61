//! The call sites of a trace recorded with stacks (docs/reports.md, "Call sites"): per process (the
//! most active ones), flame graphs of allocations, requested bytes, bytes live at the peak and leaked
//! bytes, and a sortable table of the top allocating functions whose names search the flame graphs.
use analyze::call_sites::{CallSites, FunctionSite, ProcessSites, SiteFigures};

use crate::document::chart::Unit;
use crate::document::flame::{FlameGraph, SiteColumn, SiteRow, SiteTable};
use crate::document::{Block, Section};

/// Functions listed in a process's table (the JSON and CSV of `analyze --sites` have them all).
const MAX_TABLE_ROWS: usize = 200;
/// Processes with their own call-site section (by allocating calls).
const MAX_PROCESSES: usize = 4;

/// A figure of a site, as drawn or listed.
type Figure = fn(&SiteFigures) -> u64;
/// Heading, unit, fixed decimals (one format per column) or None, figure.
type FunctionColumn = (&'static str, Unit, Option<usize>, fn(&FunctionSite) -> f64);

/// The flame graphs a process gets: id suffix, title, unit, the figure drawn.
const FLAMES: [(&str, &str, Unit, Figure); 4] = [
    ("calls", "Allocating calls", Unit::Count, |f| f.calls),
    ("bytes", "Requested bytes", Unit::Bytes, |f| {
        f.requested_bytes
    }),
    ("peak", "Bytes live at the peak", Unit::Bytes, |f| {
        f.peak_live_bytes
    }),
    ("leaks", "Leaked bytes", Unit::Bytes, |f| f.leaked_bytes),
];

/// With residency readings (`record --addresses`), two more: the resident heap pages each site's
/// live blocks hold, and the pages only free memory holds, by the site whose frees left them.
const RESIDENCY_FLAMES: [(&str, &str, Unit, Figure); 2] = [
    ("resident", "Resident heap bytes", Unit::Bytes, |f| {
        f.resident_bytes.unwrap_or(0)
    }),
    ("free-left", "Free pages left resident", Unit::Bytes, |f| {
        f.free_left_bytes.unwrap_or(0)
    }),
];

/// One section per process with stacks, the busiest first.
pub(crate) fn sections(sites: &CallSites) -> Vec<Section> {
    let mut ranked: Vec<&ProcessSites> = sites
        .processes
        .iter()
        .filter(|p| !p.stacks.is_empty())
        .collect();
    ranked
        .sort_by_key(|p| std::cmp::Reverse(p.stacks.iter().map(|s| s.figures.calls).sum::<u64>()));
    ranked.truncate(MAX_PROCESSES);
    let mut out: Vec<Section> = ranked
        .into_iter()
        .map(|p| process_section(p, sites.stack_sample_bytes))
        .collect();
    if let (Some(first), false) = (out.first_mut(), sites.warnings.is_empty()) {
        for w in &sites.warnings {
            first.blocks.insert(0, Block::Warning(w.clone()));
        }
    }
    out
}

/// `stack_sample_bytes`: the stacks were sampled, the figures are estimates.
fn process_section(p: &ProcessSites, stack_sample_bytes: Option<u64>) -> Section {
    let key = format!("{}-{}", p.pid, p.exec_index);
    let exe = p
        .cmdline
        .first()
        .map(|c| c.rsplit('/').next().unwrap_or(c))
        .unwrap_or("?");
    let mut s = Section::new(
        format!("sites-{key}"),
        format!("Call sites of process {} ({exe})", p.pid),
    );
    s.push(Block::Paragraph(
        "Flame graphs: each box is a function on the stacks of allocating calls, as wide as the figure of \
         the calls made under it; the caller is above its callees. Click a box to zoom, type a regular \
         expression to highlight matching functions and see their share. In the table, click a heading \
         to sort, a function to find it in the flame graphs."
            .into(),
    ));
    if let Some(r) = stack_sample_bytes {
        s.push(Block::Paragraph(format!(
            "Estimated figures: the stacks were sampled (one per {} allocated on average), and each \
             sampled allocation of s bytes stands for 1/(1 - exp(-s/{r})) allocations (docs/metrics.md, \
             \"Sampled stacks\"). The table gives each function's standard error of calls; a function \
             all of whose allocations were certain to be sampled, or that made every sampled allocation, \
             is exact.",
            crate::format::format_value(Unit::Bytes, r as f64)
        )));
    } else if p.without_stack.calls > 0 {
        s.push(Block::Paragraph(format!(
            "{} allocating calls have no stack and are not drawn.",
            p.without_stack.calls
        )));
    }
    let mut ids = Vec::new();
    let residency = p.residency.map(|r| {
        s.push(Block::Paragraph(format!(
            "Resident heap bytes and free pages left resident are taken at the reading of the peak \
             heap RSS ({} resident at {}): a site's share of the resident pages its live blocks lie \
             on, and the resident pages only free memory holds whose last freed block it allocated \
             (docs/memory-metrics.md, \"Heap residency\").",
            crate::format::format_value(Unit::Bytes, r.parts.resident as f64),
            crate::format::format_value(Unit::Seconds, r.t_ns as f64 / 1e9),
        )));
        RESIDENCY_FLAMES
    });
    for (suffix, title, unit, figure) in FLAMES.into_iter().chain(residency.into_iter().flatten()) {
        let id = format!("flame-{key}-{suffix}");
        let stacks = p
            .stacks
            .iter()
            .map(|st| (st.root_first(), figure(&st.figures)));
        let title = match stack_sample_bytes {
            Some(_) => format!("{title} (estimated)"),
            None => title.to_string(),
        };
        let flame = FlameGraph::new(id.clone(), title, unit, stacks);
        if flame.has_data() {
            ids.push(id);
        }
        s.push_flame(flame);
    }
    let mut columns: Vec<FunctionColumn> = vec![
        ("calls", Unit::Count, None, |f| f.figures.calls as f64),
        ("requested", Unit::Bytes, None, |f| {
            f.figures.requested_bytes as f64
        }),
        ("peak live", Unit::Bytes, None, |f| {
            f.figures.peak_live_bytes as f64
        }),
        ("leaked", Unit::Bytes, None, |f| {
            f.figures.leaked_bytes as f64
        }),
        ("leaked blocks", Unit::Count, None, |f| {
            f.figures.leaked_blocks as f64
        }),
        ("lifetime 0 (%)", Unit::Plain, Some(1), |f| {
            (f.figures.share_lifetime_zero * 1000.0).round() / 10.0
        }),
        ("median lifetime (calls)", Unit::Count, None, |f| {
            f.figures.lifetime_calls.median.unwrap_or(0) as f64
        }),
        // In µs: the page's seconds round to whole ms, and lifetimes are often microseconds.
        ("median lifetime (µs)", Unit::Plain, Some(1), |f| {
            (f.figures.lifetime_ns.median.unwrap_or(0) as f64 / 100.0).round() / 10.0
        }),
        ("median size", Unit::Bytes, None, |f| {
            f.figures.sizes.median.unwrap_or(0) as f64
        }),
        ("calls incl. callees", Unit::Count, None, |f| {
            f.calls_inclusive as f64
        }),
    ];
    if p.residency.is_some() {
        let resident: [FunctionColumn; 2] = [
            ("resident", Unit::Bytes, None, |f| {
                f.figures.resident_bytes.unwrap_or(0) as f64
            }),
            ("free left", Unit::Bytes, None, |f| {
                f.figures.free_left_bytes.unwrap_or(0) as f64
            }),
        ];
        columns.splice(3..3, resident);
    }
    if stack_sample_bytes.is_some() {
        // 0 for an exact function.
        columns.insert(
            1,
            ("calls ± (std. error)", Unit::Count, None, |f| {
                f.figures.estimate.map_or(0.0, |e| e.calls_se.round())
            }),
        );
    }
    let rows = p
        .functions
        .iter()
        .filter(|f| f.figures.calls > 0)
        .take(MAX_TABLE_ROWS)
        .map(|f| SiteRow {
            name: f.function.clone(),
            detail: Some(
                [
                    f.location.clone(),
                    Some(f.module.rsplit('/').next().unwrap_or(&f.module).to_string()),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", "),
            ),
            values: columns.iter().map(|(_, _, _, v)| v(f)).collect(),
        })
        .collect();
    s.push(Block::Sites(SiteTable {
        id: format!("sites-table-{key}"),
        caption: Some(match stack_sample_bytes {
            Some(_) => "Allocating functions, estimated from sampled stacks (the calls each made \
                        itself; the last column adds its callees')"
                .into(),
            None => "Allocating functions (the calls each made itself; the last column adds its callees')"
                .into(),
        }),
        site_label: "function".into(),
        columns: columns
            .iter()
            .map(|(l, u, d, _)| SiteColumn {
                label: (*l).into(),
                unit: *u,
                decimals: *d,
            })
            .collect(),
        rows,
        flames: ids,
    }));
    s
}

#[cfg(test)]
mod tests {
    use analyze::call_sites::{FunctionSite, SiteFrame, StackSite};

    use super::*;

    fn frame(label: &str) -> SiteFrame {
        SiteFrame {
            label: label.into(),
            function: Some(label.into()),
            file: None,
            line: None,
            inlined: false,
            module: "/bin/prog".into(),
            module_address: 0,
        }
    }

    fn stack(innermost_first: &[&str], calls: u64, leaked: u64) -> StackSite {
        StackSite {
            frames: innermost_first.iter().map(|l| frame(l).into()).collect(),
            figures: SiteFigures {
                calls,
                requested_bytes: calls * 8,
                leaked_bytes: leaked,
                ..Default::default()
            },
            stack_ids: vec![1],
        }
    }

    #[test]
    fn a_process_gets_its_flame_graphs_and_table() {
        let p = ProcessSites {
            pid: 7,
            exec_index: 0,
            cmdline: vec!["/bin/prog".into()],
            functions: vec![FunctionSite {
                function: "helper".into(),
                module: "/bin/prog".into(),
                location: Some("prog.c:3".into()),
                figures: SiteFigures {
                    calls: 1010,
                    ..Default::default()
                },
                calls_inclusive: 1010,
                bytes_inclusive: 8080,
            }],
            stacks: vec![
                stack(&["helper", "A", "main"], 1000, 0),
                stack(&["C", "main"], 5, 40),
            ],
            without_stack: SiteFigures::default(),
            residency: None,
        };
        let sites = CallSites {
            processes: vec![p],
            warnings: vec!["'/x' changed".into()],
            stack_sample_bytes: None,
        };
        let sections = sections(&sites);
        assert_eq!(sections.len(), 1);
        let s = &sections[0];
        assert!(matches!(&s.blocks[0], Block::Warning(w) if w.contains("changed")));
        let flames: Vec<&FlameGraph> = s
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::Flame(f) => Some(f),
                _ => None,
            })
            .collect();
        // Calls, bytes and leaks; nothing was live at the peak: no empty graph.
        let ids: Vec<&str> = flames.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(
            ids,
            ["flame-7-0-calls", "flame-7-0-bytes", "flame-7-0-leaks"]
        );
        assert_eq!(flames[0].total(), 1005);
        assert_eq!(flames[2].total(), 40);
        let table = s
            .blocks
            .iter()
            .find_map(|b| match b {
                Block::Sites(t) => Some(t),
                _ => None,
            })
            .unwrap();
        assert_eq!(table.flames, ids);
        assert_eq!(table.rows[0].name, "helper");
        assert_eq!(table.rows[0].values[0], 1010.0);
        assert_eq!(table.rows[0].detail.as_deref(), Some("prog.c:3, prog"));
    }
}
