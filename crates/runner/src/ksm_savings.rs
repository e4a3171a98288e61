//! With `run --ksm` every point runs with KSM off and on (the `ksm` parameter, interleaved like
//! repeats): the saving is the difference of the measured PSS, per variant and per point.
use serde::{Deserialize, Serialize};

use crate::plan::{Assignment, KSM_PARAM};
use crate::results::RunRecord;
use crate::stats::median;

/// What KSM saved for one variant at one parameter point (the point without `ksm`). PSS figures
/// are medians over the successful runs with samples; sizes in bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KsmSaving {
    pub variant: String,
    pub params: Assignment,
    pub runs_off: u32,
    pub runs_on: u32,
    pub peak_pss_off: Option<f64>,
    pub peak_pss_on: Option<f64>,
    pub mean_pss_off: Option<f64>,
    pub mean_pss_on: Option<f64>,
    /// PSS at the last sample of the run.
    pub last_pss_off: Option<f64>,
    pub last_pss_on: Option<f64>,
    /// `mean_pss_off - mean_pss_on`, and that in % of `mean_pss_off`.
    pub saved_mean: Option<f64>,
    pub saved_mean_pct: Option<f64>,
    /// The same for the peak.
    pub saved_peak: Option<f64>,
    pub saved_peak_pct: Option<f64>,
    /// The kernel's figure in the runs with KSM on: peak of the system's `pages_sharing` (bytes).
    pub kernel_sharing: Option<f64>,
    /// ... and of the tree's merged bytes (every merged copy, the one that stays included).
    pub kernel_merging: Option<f64>,
    /// Seconds until merging settled (`runs[].ksm.settle_s`), and ksmd's CPU % of one core.
    pub settle_s: Option<f64>,
    pub ksmd_cpu_pct: Option<f64>,
}

/// One [`KsmSaving`] per variant and point, in the order the runs were done; empty when no run has
/// the `ksm` parameter.
pub fn ksm_savings(runs: &[RunRecord]) -> Vec<KsmSaving> {
    let mut keys: Vec<(String, Assignment)> = Vec::new();
    for r in runs.iter().filter(|r| r.params.contains_key(KSM_PARAM)) {
        let key = (r.variant.clone(), without_ksm(&r.params));
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.into_iter()
        .map(|(variant, params)| {
            let of = |state: &str| -> Vec<&RunRecord> {
                runs.iter()
                    .filter(|r| {
                        r.variant == variant
                            && without_ksm(&r.params) == params
                            && r.params.get(KSM_PARAM).map(String::as_str) == Some(state)
                            && r.ending.ok()
                            && r.memory.samples > 0
                            // A KSM-on run whose tree was not made mergeable (the madvise library
                            // not loaded) measured no saving.
                            && (state == "off" || r.ksm.as_ref().is_none_or(|k| k.merging_enabled))
                    })
                    .collect()
            };
            let (off, on) = (of("off"), of("on"));
            let med = |rs: &[&RunRecord], f: fn(&RunRecord) -> Option<f64>| {
                median(&rs.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
            };
            let peak = |r: &RunRecord| Some(r.memory.pss.peak as f64);
            let mean = |r: &RunRecord| Some(r.memory.pss.mean);
            let last = |r: &RunRecord| Some(r.memory.pss.last as f64);
            let saved = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a - b);
            let pct = |s: Option<f64>, base: Option<f64>| {
                s.zip(base.filter(|b| *b > 0.0)).map(|(s, b)| 100.0 * s / b)
            };
            let (peak_off, peak_on) = (med(&off, peak), med(&on, peak));
            let (mean_off, mean_on) = (med(&off, mean), med(&on, mean));
            let saved_mean = saved(mean_off, mean_on);
            let saved_peak = saved(peak_off, peak_on);
            KsmSaving {
                variant,
                params,
                runs_off: off.len() as u32,
                runs_on: on.len() as u32,
                peak_pss_off: peak_off,
                peak_pss_on: peak_on,
                mean_pss_off: mean_off,
                mean_pss_on: mean_on,
                last_pss_off: med(&off, last),
                last_pss_on: med(&on, last),
                saved_mean,
                saved_mean_pct: pct(saved_mean, mean_off),
                saved_peak,
                saved_peak_pct: pct(saved_peak, peak_off),
                kernel_sharing: med(&on, |r| r.ksm.as_ref().map(|k| k.sharing.peak as f64)),
                kernel_merging: med(&on, |r| r.ksm.as_ref().map(|k| k.merging.peak as f64)),
                settle_s: med(&on, |r| r.ksm.as_ref().and_then(|k| k.settle_s)),
                ksmd_cpu_pct: med(&on, |r| r.ksm.as_ref().and_then(|k| k.ksmd_cpu_pct)),
            }
        })
        .collect()
}

fn without_ksm(params: &Assignment) -> Assignment {
    let mut p = params.clone();
    p.remove(KSM_PARAM);
    p
}
