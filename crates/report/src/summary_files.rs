//! The summary table of a run for other tools (hyperfine's `--export-markdown/json/csv`), one
//! file per format. Each writes every parameter point and variant of `runner::summarize`, best
//! first, with the figures the terminal table shows, and with `--ksm` the PSS saved by KSM.
use std::io::{self, Write};

use runner::{Group, KsmSaving};

/// A format of [`export_summary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryFormat {
    /// A GitHub-flavoured Markdown table per point, formatted figures with units.
    Markdown,
    /// The `summary` array of results.json, as is.
    Json,
    /// One row per point and variant, raw numbers (seconds, bytes, units per second).
    Csv,
}

/// What the exports need besides the groups.
pub struct SummaryContext<'a> {
    /// The swept parameters' names, in the order given.
    pub param_names: &'a [String],
    /// `--throughput-unit`, e.g. "ops/s".
    pub throughput_unit: Option<&'a str>,
    /// With `run --ksm`: the PSS saved per variant and point (results.json's `ksm_savings`), the
    /// terminal's KSM table; empty otherwise.
    pub ksm_savings: &'a [KsmSaving],
}

/// Writes `groups` in `format` to `out`.
pub fn export_summary(
    format: SummaryFormat,
    groups: &[Group],
    context: &SummaryContext<'_>,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        SummaryFormat::Markdown => crate::markdown::write_summary(groups, context, out),
        SummaryFormat::Json => crate::json::write_summary(groups, context.ksm_savings, out),
        SummaryFormat::Csv => crate::csv::write_summary(groups, context, out),
    }
}

/// "threads=4 mode=a" for a point, in the order of the parameters.
pub(crate) fn point_name(group: &Group, param_names: &[String]) -> String {
    param_names
        .iter()
        .filter_map(|n| group.params.get(n).map(|v| format!("{n}={v}")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// "w=4" for a KSM saving's point (the `ksm` parameter is not in it), "all" without parameters.
pub(crate) fn ksm_point_name(saving: &KsmSaving, param_names: &[String]) -> String {
    let point: Vec<String> = param_names
        .iter()
        .filter_map(|n| saving.params.get(n).map(|v| format!("{n}={v}")))
        .collect();
    if point.is_empty() {
        "all".to_string()
    } else {
        point.join(" ")
    }
}
