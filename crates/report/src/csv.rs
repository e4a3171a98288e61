//! The summary as CSV: one row per parameter point and variant, raw numbers (seconds, bytes, units
//! per second), empty cells where a figure is absent.
use std::io::{self, Write};

use runner::{Group, KsmSaving, VariantSummary};

use crate::summary_files::SummaryContext;

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

/// A numeric column: its name and how to read it.
type Column = (&'static str, fn(&VariantSummary) -> Option<f64>);

/// The columns after the parameters' (one per `--param`, named after it).
const COLUMNS: [Column; 27] = [
    ("runs", |v| Some(v.runs as f64)),
    ("failed", |v| Some(v.failed as f64)),
    ("wall_mean", |v| v.wall_mean),
    ("wall_stddev", |v| v.wall_stddev),
    ("wall_median", |v| v.wall_median),
    ("wall_min", |v| v.wall_min),
    ("wall_max", |v| v.wall_max),
    ("user_mean", |v| v.user_mean),
    ("sys_mean", |v| v.sys_mean),
    ("wall_outliers", |v| Some(v.wall_outliers as f64)),
    ("throughput_median", |v| v.throughput_median),
    ("throughput_mean", |v| v.throughput_mean),
    ("throughput_stddev", |v| v.throughput_stddev),
    ("throughput_min", |v| v.throughput_min),
    ("throughput_max", |v| v.throughput_max),
    ("peak_pss_median", |v| v.peak_pss_median),
    ("mean_pss_median", |v| v.mean_pss_median),
    ("peak_rss_median", |v| v.peak_rss_median),
    ("mean_rss_median", |v| v.mean_rss_median),
    ("wall_ratio", |v| v.wall_ratio),
    ("wall_ratio_stddev", |v| v.wall_ratio_stddev),
    ("throughput_ratio", |v| v.throughput_ratio),
    ("throughput_ratio_stddev", |v| v.throughput_ratio_stddev),
    ("peak_pss_ratio", |v| v.peak_pss_ratio),
    ("peak_pss_ratio_stddev", |v| v.peak_pss_ratio_stddev),
    ("peak_rss_ratio", |v| v.peak_rss_ratio),
    ("peak_rss_ratio_stddev", |v| v.peak_rss_ratio_stddev),
];

pub(crate) fn write_summary(
    groups: &[Group],
    context: &SummaryContext<'_>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut w = ::csv::Writer::from_writer(out);
    let mut header: Vec<String> = context.param_names.to_vec();
    header.extend(["variant", "baseline"].map(String::from));
    header.extend(COLUMNS.iter().map(|(name, _)| name.to_string()));
    header.push("mean_pss_ratio".into());
    header.push("throughput_unit".into());
    let ksm = !context.ksm_savings.is_empty();
    if ksm {
        header.extend(KSM_COLUMNS.iter().map(|(name, _)| name.to_string()));
    }
    w.write_record(&header)?;
    for group in groups {
        for v in &group.variants {
            let mut row: Vec<String> = context
                .param_names
                .iter()
                .map(|n| group.params.get(n).cloned().unwrap_or_default())
                .collect();
            row.push(v.variant.clone());
            row.push(group.baseline.clone().unwrap_or_default());
            let number = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
            row.extend(COLUMNS.iter().map(|(_, f)| number(f(v))));
            row.push(number(v.mean_pss_ratio));
            row.push(context.throughput_unit.unwrap_or_default().to_string());
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
