//! `report A --compare B`: two results directories as one, so every chart overlays both. Variants are
//! renamed "A: glibc" and "B: glibc" and B's runs are renumbered after A's; the report code needs no
//! special case.
use runner::Group;

use crate::run_data::RunData;

/// Merges `b` into a copy of `a`; `a_name` and `b_name` prefix the variant labels.
pub fn merge_runs(a: &RunData, a_name: &str, b: &RunData, b_name: &str) -> RunData {
    let mut out = a.clone();
    let offset = a
        .results
        .runs
        .iter()
        .map(|r| r.index + 1)
        .max()
        .unwrap_or(0);
    let label = |name: &str, v: &str| format!("{name}: {v}");
    let rename = |data: &mut RunData, name: &str, offset: usize| {
        for v in &mut data.results.variants {
            v.label = label(name, &v.label);
        }
        for r in &mut data.results.runs {
            r.variant = label(name, &r.variant);
            r.index += offset;
        }
        for g in &mut data.results.summary {
            g.baseline = g.baseline.as_ref().map(|v| label(name, v));
            for v in &mut g.variants {
                v.variant = label(name, &v.variant);
            }
        }
        for k in &mut data.results.ksm_savings {
            k.variant = label(name, &k.variant);
        }
        for s in &mut data.samples {
            s.run += offset;
        }
        for m in &mut data.markers {
            m.run += offset;
        }
        data.results.warnings = data
            .results
            .warnings
            .iter()
            .map(|w| label(name, w))
            .collect();
    };
    rename(&mut out, a_name, 0);
    let mut other = b.clone();
    rename(&mut other, b_name, offset);
    let r = &mut out.results;
    r.variants.extend(other.results.variants);
    r.runs.extend(other.results.runs);
    r.warnings.extend(other.results.warnings);
    r.interrupted |= other.results.interrupted;
    r.ksm_savings.extend(other.results.ksm_savings);
    // How ksmd was driven: A's, or B's when only B used --ksm; each side's, named, where they
    // differ (a setting named "A: pages_to_scan" is no longer the knob the ksmd-CPU chart follows:
    // that chart is left out rather than drawn against one side's values).
    r.ksm = match (r.ksm.take(), other.results.ksm) {
        (Some(mut x), Some(y)) => {
            if x.mechanism != y.mechanism {
                x.mechanism = format!("{a_name}: {}, {b_name}: {}", x.mechanism, y.mechanism);
            }
            if x.settings != y.settings {
                let named = |name: &str, settings: Vec<(String, String)>| {
                    settings
                        .into_iter()
                        .map(move |(k, v)| (format!("{name}: {k}"), v))
                        .collect::<Vec<_>>()
                };
                let mut settings = named(a_name, x.settings);
                settings.extend(named(b_name, y.settings));
                x.settings = settings;
            }
            Some(x)
        }
        (x, y) => x.or(y),
    };
    // Summary groups of the same parameter point side by side (ratios stay relative to each side's
    // own baseline).
    let mut groups: Vec<Group> = std::mem::take(&mut r.summary);
    for g in other.results.summary {
        match groups.iter_mut().find(|x| x.params == g.params) {
            Some(x) => x.variants.extend(g.variants),
            None => groups.push(g),
        }
    }
    r.summary = groups;
    for p in other.results.params {
        if !r.params.iter().any(|x| x.name == p.name) {
            r.params.push(p);
        }
    }
    out.samples.extend(other.samples);
    out.markers.extend(other.markers);
    out.compared.push(format!(
        "{a_name} = {}: {}",
        a.dir.display(),
        a.results.command.join(" ")
    ));
    out.compared.push(format!(
        "{b_name} = {}: {}",
        b.dir.display(),
        b.results.command.join(" ")
    ));
    out
}
