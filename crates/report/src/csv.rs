//! The summary as CSV: one row per parameter point and variant, raw numbers (seconds, bytes, units
//! per second), empty cells where a figure is absent (the columns are `tables::run_summary`'s).
use std::io::{self, Write};

use runner::{Group, KsmSaving};

use crate::summary_files::SummaryContext;
use crate::tables::run_summary::{self, CSV};
use crate::tables::Output;

/// A KSM column: its name and how to read it.
type KsmColumn = (&'static str, fn(&KsmSaving) -> Option<f64>);

/// With `--ksm`, the PSS saved at the row's point, in the `ksm=on` rows (`ksm_savings` of
/// results.json; the `off` rows leave them empty).
const KSM_COLUMNS: [KsmColumn; 8] = [
    ("ksm_saved_mean", |k| k.saved_mean),
    ("ksm_saved_mean_pct", |k| k.saved_mean_pct),
    ("ksm_saved_peak", |k| k.saved_peak),
    ("ksm_saved_peak_pct", |k| k.saved_peak_pct),
    ("ksm_pages_sharing_peak", |k| k.kernel_sharing),
    ("ksm_merged_peak", |k| k.kernel_merging),
    ("ksm_settle_s", |k| k.settle_s),
    ("ksmd_cpu_pct", |k| k.ksmd_cpu_pct),
];

pub(crate) fn write_summary(
    groups: &[Group],
    context: &SummaryContext<'_>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut w = ::csv::Writer::from_writer(out);
    let mut header: Vec<String> = context.param_names.to_vec();
    header.extend(CSV.iter().map(|name| name.to_string()));
    let ksm = !context.ksm_savings.is_empty();
    if ksm {
        header.extend(KSM_COLUMNS.iter().map(|(name, _)| name.to_string()));
    }
    w.write_record(&header)?;
    let number = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
    for group in groups {
        let table = run_summary::table(group, CSV, Output::Csv, context.throughput_unit, true);
        for (v, cells) in group.variants.iter().zip(table.rows) {
            let mut row: Vec<String> = context
                .param_names
                .iter()
                .map(|n| group.params.get(n).cloned().unwrap_or_default())
                .collect();
            row.extend(cells);
            if ksm {
                let saving = (group.params.get(runner::KSM_PARAM).map(String::as_str)
                    == Some("on"))
                .then(|| {
                    context.ksm_savings.iter().find(|k| {
                        k.variant == v.variant
                            && k.params.iter().all(|(n, x)| group.params.get(n) == Some(x))
                    })
                })
                .flatten();
                row.extend(KSM_COLUMNS.iter().map(|(_, f)| number(saving.and_then(f))));
            }
            w.write_record(&row)?;
        }
    }
    w.flush()
}
