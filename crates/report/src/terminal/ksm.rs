//! The terminal table of `run --ksm`, shaped like the GaudiMP study's: one row per variant, one
//! column per parameter point, cells `saved (%)` from the time-weighted mean PSS with KSM off and on;
//! then the details of each cell.
use runner::KsmSaving;

use crate::format;

/// Renders the savings; `param_names` orders the parameters in the column headings; `mechanism`
/// (how the tree was made mergeable) is named under the table. Empty when there is nothing to show.
pub fn render_ksm_table(
    savings: &[KsmSaving],
    param_names: &[String],
    mechanism: Option<&str>,
) -> String {
    if savings.is_empty() {
        return String::new();
    }
    let point = |s: &KsmSaving| -> String {
        let parts: Vec<String> = param_names
            .iter()
            .filter_map(|n| s.params.get(n).map(|v| format!("{n}={v}")))
            .collect();
        if parts.is_empty() {
            "all".to_string()
        } else {
            parts.join(" ")
        }
    };
    let mut variants: Vec<&str> = Vec::new();
    let mut points: Vec<String> = Vec::new();
    for s in savings {
        if !variants.contains(&s.variant.as_str()) {
            variants.push(&s.variant);
        }
        let p = point(s);
        if !points.contains(&p) {
            points.push(p);
        }
    }
    let dash = || "—".to_string();
    let cell = |s: Option<&KsmSaving>| -> String {
        match s.and_then(|s| s.saved_mean.zip(s.saved_mean_pct)) {
            Some((saved, pct)) => format!("{} ({pct:.0} %)", signed_bytes(saved)),
            None => dash(),
        }
    };
    let mut rows: Vec<Vec<String>> = vec![std::iter::once("variant".to_string())
        .chain(points.iter().cloned())
        .collect()];
    for v in &variants {
        let mut row = vec![v.to_string()];
        for p in &points {
            row.push(cell(
                savings.iter().find(|s| s.variant == *v && point(s) == *p),
            ));
        }
        rows.push(row);
    }
    let mut out = String::from("KSM: PSS saved (time-weighted mean, KSM off minus on; % of off)\n");
    out.push_str(&aligned(&rows));
    let mut details = vec![[
        "variant",
        "point",
        "mean PSS off → on",
        "peak PSS off → on",
        "pages_sharing",
        "merged",
        "settled",
        "ksmd CPU",
    ]
    .map(String::from)
    .to_vec()];
    for s in savings {
        let pair = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => format!("{} → {}", format::bytes(a), format::bytes(b)),
            _ => dash(),
        };
        details.push(vec![
            s.variant.clone(),
            point(s),
            pair(s.mean_pss_off, s.mean_pss_on),
            pair(s.peak_pss_off, s.peak_pss_on),
            s.kernel_sharing.map_or_else(dash, format::bytes),
            s.kernel_merging.map_or_else(dash, format::bytes),
            s.settle_s.map_or_else(dash, format::seconds),
            s.ksmd_cpu_pct.map_or_else(dash, |c| format!("{c:.1} %")),
        ]);
    }
    out.push('\n');
    out.push_str(&aligned(&details));
    if let Some(m) = mechanism.filter(|m| !m.is_empty()) {
        out.push_str(&format!("  (tree made mergeable by {m})\n"));
    }
    out.push('\n');
    out
}

fn signed_bytes(b: f64) -> String {
    if b < 0.0 {
        format!("-{}", format::bytes(-b))
    } else {
        format::bytes(b)
    }
}

/// The rows (the first is the header) through the terminal's table renderer.
fn aligned(rows: &[Vec<String>]) -> String {
    let table = crate::tables::Table {
        caption: None,
        headers: rows[0].clone(),
        rows: rows[1..].to_vec(),
    };
    super::table(&table, &[])
}
