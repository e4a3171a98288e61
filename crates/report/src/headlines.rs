//! The headline figures of each kind of result, in one place: what `alloclens diff` and the comparison
//! pages put side by side (scope, metric, unit, value). A run's come from its summary, a trace's from
//! analyze's metric table (`analyze::metrics::SCOPE_METRICS`) through the selection `TRACE_HEADLINES`.
use analyze::metrics::{scope_metric, Value};
use analyze::ProcessReport;
use serde::Serialize;

use crate::document::chart::Unit;
use crate::run_data::RunData;
use crate::sections::trace_figures::chart_unit;
use crate::trace_data::TraceData;

/// One headline figure of one result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Headline {
    /// What it is about: "workers=2 jemalloc", "process #0 (prog)", "all processes".
    pub scope: String,
    pub metric: String,
    pub unit: Unit,
    pub value: Option<f64>,
}

/// A result that has headline figures (a run, a trace).
pub trait Headlines {
    fn headlines(&self) -> Vec<Headline>;
}

impl Headlines for RunData {
    fn headlines(&self) -> Vec<Headline> {
        let order: Vec<String> = self.results.params.iter().map(|p| p.name.clone()).collect();
        let mut out = Vec::new();
        for g in &self.results.summary {
            let point: Vec<String> = order
                .iter()
                .filter_map(|n| g.params.get(n).map(|v| format!("{n}={v}")))
                .collect();
            for v in &g.variants {
                let scope = if point.is_empty() {
                    v.variant.clone()
                } else {
                    format!("{} {}", point.join(" "), v.variant)
                };
                let mut push = |metric: &str, unit, value| {
                    out.push(Headline {
                        scope: scope.clone(),
                        metric: metric.to_string(),
                        unit,
                        value,
                    })
                };
                push("wall (median)", Unit::Seconds, v.wall_median);
                if v.throughput_median.is_some() {
                    push("throughput (median)", Unit::Rate, v.throughput_median);
                }
                push("peak PSS (median)", Unit::Bytes, v.peak_pss_median);
                push("mean PSS (median)", Unit::Bytes, v.mean_pss_median);
                push("peak RSS (median)", Unit::Bytes, v.peak_rss_median);
                push("mean RSS (median)", Unit::Bytes, v.mean_rss_median);
                push("failed runs", Unit::Count, Some(f64::from(v.failed)));
            }
        }
        out
    }
}

/// A headline figure of a trace: its label in `diff` and on the comparison page.
struct TraceHeadline {
    label: &'static str,
    metric: &'static str,
    /// Summed over the processes into "all processes" (a median is not).
    summed: bool,
}

const fn headline(label: &'static str, metric: &'static str) -> TraceHeadline {
    TraceHeadline {
        label,
        metric,
        summed: true,
    }
}

const TRACE_HEADLINES: &[TraceHeadline] = &[
    headline("calls", "calls"),
    headline("allocations", "allocations"),
    headline("requested bytes (upper)", "requested_bytes"),
    headline("cumulated lower bytes", "cumulated_lower_bytes"),
    headline("peak live bytes", "peak_live_bytes"),
    headline("peak live allocations", "peak_live_allocations"),
    headline("leaked bytes", "leaked_bytes"),
    TraceHeadline {
        summed: false,
        ..headline("median lifetime (calls)", "lifetime_median_calls")
    },
];

/// The headline figures of a trace as (scope, metric label, unit, value): the numbers of processes and
/// of process images and the sums of the summed metrics for "all processes", then every defined metric
/// of each process image, with `scope(i, process)` naming the i-th image.
fn trace_headlines(
    processes: &[ProcessReport],
    scope: impl Fn(usize, &ProcessReport) -> String,
) -> Vec<(String, &'static str, Unit, f64)> {
    let all = "all processes".to_string();
    // Processes and their images, as analyze's "N process image(s) in M process(es)" counts them.
    let mut out = vec![
        (
            all.clone(),
            "processes",
            Unit::Count,
            analyze::process_count(processes) as f64,
        ),
        (
            all.clone(),
            "process images",
            Unit::Count,
            processes.len() as f64,
        ),
    ];
    for h in TRACE_HEADLINES.iter().filter(|h| h.summed) {
        let m = scope_metric(h.metric);
        let sum: u64 = processes
            .iter()
            .map(|p| match (m.value)(&p.stats) {
                Value::Int(n) => n,
                _ => 0,
            })
            .sum();
        out.push((all.clone(), h.label, chart_unit(m.unit), sum as f64));
    }
    for (i, p) in processes.iter().enumerate() {
        let name = scope(i, p);
        for h in TRACE_HEADLINES {
            let m = scope_metric(h.metric);
            if let Some(v) = (m.value)(&p.stats).as_f64() {
                out.push((name.clone(), h.label, chart_unit(m.unit), v));
            }
        }
    }
    out
}

impl Headlines for TraceData {
    fn headlines(&self) -> Vec<Headline> {
        self.headlines_scoped(|i, p| {
            format!("process #{i} {}", crate::sections::trace::executable(p))
        })
    }
}

impl TraceData {
    /// The headline figures, with `scope(i, process)` naming the i-th process (in pid order): `diff`
    /// names it with its executable, a comparison page by its position only (matched processes may
    /// run differently named executables).
    pub fn headlines_scoped(
        &self,
        scope: impl Fn(usize, &ProcessReport) -> String,
    ) -> Vec<Headline> {
        trace_headlines(&self.file.analysis.processes, scope)
            .into_iter()
            .map(|(scope, metric, unit, value)| Headline {
                scope,
                metric: metric.to_string(),
                unit,
                value: Some(value),
            })
            .collect()
    }
}
