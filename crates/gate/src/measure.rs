//! The figures of the inputs: a run's results directory (RSS and PSS per variant) and a trace
//! (allocations, live and not-freed bytes, the growth per iteration, and per call site when it
//! was recorded with stacks).
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use analyze::call_sites::{CallSiteOptions, StackSite};
use runner::results_dir::ResultsDirContents;

use crate::error::GateError;
use crate::limits::{Growth, Retained, Suppression};
use crate::metric::Metric;

/// One measured figure: of a trace (`subject` empty) or of one variant of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub metric: Metric,
    pub subject: String,
    pub value: f64,
}

impl Figure {
    /// Its key in the baseline and in messages: `peak_rss[glibc]`, `allocations`.
    pub fn key(&self) -> String {
        key(self.metric, &self.subject)
    }
}

pub fn key(metric: Metric, subject: &str) -> String {
    if subject.is_empty() {
        metric.name().to_string()
    } else {
        format!("{}[{subject}]", metric.name())
    }
}

/// A whole stack of a trace recorded with stacks, with its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    /// Function names, innermost first (the allocator's frames dropped).
    pub functions: Vec<String>,
    pub allocations: f64,
    pub requested_bytes: f64,
    pub peak_live_bytes: f64,
    pub not_freed_bytes: f64,
    pub not_freed_blocks: f64,
    /// `record --leaks`: its blocks' bytes of each kind.
    pub definitely_lost_bytes: f64,
    pub indirectly_lost_bytes: f64,
    pub possibly_lost_bytes: f64,
    /// Matched by a `[[suppress]]`: left out of the program's not-freed and lost figures.
    pub suppressed: bool,
}

impl Site {
    /// Whether a frame's function contains `pattern` (a `[[site]]` or `[[suppress]]` name).
    pub fn passes_through(&self, pattern: &str) -> bool {
        self.functions.iter().any(|f| f.contains(pattern))
    }

    pub fn figure(&self, metric: Metric) -> f64 {
        match metric {
            Metric::Allocations => self.allocations,
            Metric::RequestedBytes => self.requested_bytes,
            Metric::NotFreedBytes => self.not_freed_bytes,
            Metric::NotFreedBlocks => self.not_freed_blocks,
            Metric::DefinitelyLostBytes => self.definitely_lost_bytes,
            Metric::IndirectlyLostBytes => self.indirectly_lost_bytes,
            Metric::PossiblyLostBytes => self.possibly_lost_bytes,
            Metric::LostBytes => self.definitely_lost_bytes + self.indirectly_lost_bytes,
            _ => self.peak_live_bytes,
        }
    }

    /// The innermost frame, as a site is named in messages.
    pub fn name(&self) -> &str {
        self.functions.first().map_or("(no stack)", String::as_str)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measurements {
    pub figures: Vec<Figure>,
    /// The stacks of the traces recorded with stacks; None when no trace had stacks.
    pub sites: Option<Vec<Site>>,
    /// What was measured from where, and what could not be: one line each.
    pub notes: Vec<String>,
}

impl Measurements {
    pub fn of(&self, metric: Metric) -> impl Iterator<Item = &Figure> {
        self.figures.iter().filter(move |f| f.metric == metric)
    }
}

/// Measures every input: a directory with results.json is a run, a file is a trace.
pub fn measure(
    inputs: &[PathBuf],
    growth: &Growth,
    retained: &Retained,
    suppressions: &[Suppression],
) -> Result<Measurements, GateError> {
    let mut out = Measurements::default();
    for input in inputs {
        if input.is_dir() {
            if !ResultsDirContents::is_results_dir(input) {
                return Err(GateError::Input {
                    path: input.clone(),
                    what: "is a directory without results.json: give a directory `alloclens run -o` wrote, or a trace".into(),
                });
            }
            measure_run(input, retained, &mut out)?;
        } else if input.is_file() {
            measure_trace(input, growth, &mut out)?;
        } else {
            return Err(GateError::Input {
                path: input.clone(),
                what: "does not exist: give a results directory of `alloclens run` or a trace of `alloclens record`".into(),
            });
        }
    }
    if !suppressions.is_empty() {
        suppress(&mut out, suppressions)?;
    }
    Ok(out)
}

fn measure_run(dir: &Path, retained: &Retained, out: &mut Measurements) -> Result<(), GateError> {
    let contents = ResultsDirContents::load(dir).map_err(|e| GateError::Input {
        path: dir.to_path_buf(),
        what: e.to_string(),
    })?;
    let runs = &contents.results.runs;
    // A subject per variant and parameter point: `glibc`, `glibc,threads=4`.
    let subject_of = |r: &runner::RunRecord| {
        let mut subject = r.variant.clone();
        for (name, value) in &r.params {
            subject.push_str(&format!(",{name}={value}"));
        }
        subject
    };
    let mut subjects: Vec<String> = runs.iter().map(subject_of).collect();
    subjects.sort_unstable();
    subjects.dedup();
    for variant in subjects {
        let of_variant: Vec<_> = runs.iter().filter(|r| subject_of(r) == variant).collect();
        let sampled = || of_variant.iter().filter(|r| r.memory.samples > 0);
        // The RSS read at the run's last marker of the label, if it has one with a reading.
        let at_marker = |label: &str| {
            of_variant
                .iter()
                .filter_map(|r| {
                    let mut rows = contents
                        .markers
                        .iter()
                        .filter(|m| m.run == r.index && m.label == label);
                    rows.next_back()?.rss.map(|v| v as f64)
                })
                .collect::<Vec<f64>>()
        };
        let figures: [(Metric, Vec<f64>); 5] = [
            (
                Metric::PeakRss,
                of_variant
                    .iter()
                    .filter_map(|r| r.memory.peak_rss())
                    .map(|v| v as f64)
                    .collect(),
            ),
            (
                Metric::PeakPss,
                sampled().map(|r| r.memory.pss.peak as f64).collect(),
            ),
            (
                Metric::MeanRss,
                sampled().map(|r| r.memory.rss.mean).collect(),
            ),
            (
                Metric::MeanPss,
                sampled().map(|r| r.memory.pss.mean).collect(),
            ),
            (
                Metric::RetainedRss,
                retained
                    .marker
                    .as_deref()
                    .map(at_marker)
                    .unwrap_or_default(),
            ),
        ];
        for (metric, values) in figures {
            if let Some(value) = median(values) {
                out.figures.push(Figure {
                    metric,
                    subject: variant.to_string(),
                    value,
                });
            }
        }
        out.notes.push(format!(
            "{}: {} run(s) of {variant} (medians over the repeats)",
            dir.display(),
            of_variant.len()
        ));
    }
    Ok(())
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

fn measure_trace(path: &Path, growth: &Growth, out: &mut Measurements) -> Result<(), GateError> {
    let options = analyze::Options {
        call_sites: Some(CallSiteOptions::default()),
        ..analyze::Options::default()
    };
    let file = analyze::analyze_file(path, &options).map_err(|e| GateError::Input {
        path: path.to_path_buf(),
        what: format!("cannot be read as a trace: {e}"),
    })?;
    let processes = &file.analysis.processes;
    let sum =
        |f: &dyn Fn(&analyze::ProcessReport) -> u64| processes.iter().map(f).sum::<u64>() as f64;
    let mut add = |metric, value| {
        add_to(
            out,
            Figure {
                metric,
                subject: String::new(),
                value,
            },
        );
    };
    add(Metric::Allocations, sum(&|p| p.stats.allocations));
    add(Metric::RequestedBytes, sum(&|p| p.stats.requested_bytes));
    add(
        Metric::PeakLiveBytes,
        sum(&|p| p.stats.peak_live_bytes.value),
    );
    add(Metric::NotFreedBytes, sum(&|p| p.stats.leaks.bytes));
    add(Metric::NotFreedBlocks, sum(&|p| p.stats.leaks.count));
    // Without iterations the figure is absent; a limit on it says what would measure it.
    if let Some(slope) = growth_per_iteration(processes, growth) {
        add(Metric::LiveGrowthPerIteration, slope);
    }
    // The sites of this trace, and which of them each recorded stack id folded into.
    let mut trace_sites = Vec::new();
    let mut site_of_stack: HashMap<(u32, u32), usize> = HashMap::new();
    if let Some(call_sites) = &file.call_sites {
        for process in &call_sites.processes {
            for stack in &process.stacks {
                for &id in &stack.stack_ids {
                    site_of_stack.insert((process.pid, id), trace_sites.len());
                }
                trace_sites.push(site_of(stack));
            }
        }
    }
    leak_check(path, &file.leaks, &site_of_stack, &mut trace_sites, out);
    if file.call_sites.is_some() {
        out.sites.get_or_insert_with(Vec::new).extend(trace_sites);
    }
    out.notes.push(format!(
        "{}: {} process image(s){}",
        path.display(),
        processes.len(),
        if file.call_sites.is_some() {
            ", with stacks"
        } else {
            ", without stacks (no per-site figures)"
        }
    ));
    Ok(())
}

/// The figures of `record --leaks`: the kinds' bytes of the images it checked, each stack's to
/// its site. Not measured when no image was checked (no `--leaks`, or the check was degraded).
fn leak_check(
    path: &Path,
    reports: &[analyze::leaks::LeakReport],
    site_of_stack: &HashMap<(u32, u32), usize>,
    sites: &mut [Site],
    out: &mut Measurements,
) {
    for report in reports.iter().filter(|r| !r.leaks.scanned) {
        out.notes.push(format!(
            "{}: the leak check of pid {} was degraded ({}): no lost bytes measured",
            path.display(),
            report.leaks.pid,
            report.leaks.degraded.as_deref().unwrap_or("not scanned")
        ));
    }
    let checked: Vec<&trace::Leaks> = reports
        .iter()
        .map(|r| &r.leaks)
        .filter(|l| l.scanned)
        .collect();
    if checked.is_empty() {
        return;
    }
    let mut totals = [0.0; 3];
    for leaks in &checked {
        for leak in &leaks.sites {
            let Some(k) = Metric::LEAK_KINDS
                .iter()
                .position(|(kind, _)| *kind == leak.kind)
            else {
                continue; // still reachable
            };
            let bytes = leak.bytes as f64;
            totals[k] += bytes;
            if let Some(&i) = site_of_stack.get(&(leaks.pid, leak.stack)) {
                let site = &mut sites[i];
                match Metric::LEAK_KINDS[k].1 {
                    Metric::DefinitelyLostBytes => site.definitely_lost_bytes += bytes,
                    Metric::IndirectlyLostBytes => site.indirectly_lost_bytes += bytes,
                    _ => site.possibly_lost_bytes += bytes,
                }
            }
        }
    }
    for (k, (_, metric)) in Metric::LEAK_KINDS.iter().enumerate() {
        add_to(
            out,
            Figure {
                metric: *metric,
                subject: String::new(),
                value: totals[k],
            },
        );
    }
    add_to(
        out,
        Figure {
            metric: Metric::LostBytes,
            subject: String::new(),
            value: totals[0] + totals[1],
        },
    );
}

/// Figures of the same key from two traces add up (two traces of one test are one program).
fn add_to(out: &mut Measurements, figure: Figure) {
    match out.figures.iter_mut().find(|f| f.key() == figure.key()) {
        Some(existing) if figure.metric == Metric::LiveGrowthPerIteration => {
            existing.value = existing.value.max(figure.value)
        }
        Some(existing) => existing.value += figure.value,
        None => out.figures.push(figure),
    }
}

fn site_of(stack: &StackSite) -> Site {
    let f = &stack.figures;
    Site {
        functions: stack
            .frames
            .iter()
            .map(|frame| {
                frame
                    .function
                    .clone()
                    .unwrap_or_else(|| frame.label.clone())
            })
            .collect(),
        allocations: f.calls as f64,
        requested_bytes: f.requested_bytes as f64,
        peak_live_bytes: f.peak_live_bytes as f64,
        not_freed_bytes: f.leaked_bytes as f64,
        not_freed_blocks: f.leaked_blocks as f64,
        definitely_lost_bytes: 0.0,
        indirectly_lost_bytes: 0.0,
        possibly_lost_bytes: 0.0,
        suppressed: false,
    }
}

/// The least-squares slope of the iterations' peak live bytes after the warm-up, the largest
/// over the process images: a leak grows every iteration's peak, a cache filled once does not.
fn growth_per_iteration(processes: &[analyze::ProcessReport], growth: &Growth) -> Option<f64> {
    let mut slopes = Vec::new();
    for process in processes {
        let label = match &growth.marker {
            Some(label) => label.clone(),
            None => match most_frequent_label(process) {
                Some(label) => label,
                None => continue,
            },
        };
        let peaks: Vec<f64> = process
            .phases
            .iter()
            .filter(|p| p.name == label)
            .skip(growth.warmup)
            .map(|p| p.stats.peak_live_bytes.value as f64)
            .collect();
        if peaks.len() >= 3 {
            slopes.push(slope(&peaks));
        }
    }
    slopes.into_iter().reduce(f64::max)
}

fn most_frequent_label(process: &analyze::ProcessReport) -> Option<String> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for phase in &process.phases {
        match counts.iter_mut().find(|(name, _)| *name == phase.name) {
            Some((_, n)) => *n += 1,
            None => counts.push((&phase.name, 1)),
        }
    }
    counts
        .into_iter()
        .filter(|(n, c)| *n != "start" && *c > 1)
        .max_by_key(|(_, c)| *c)
        .map(|(n, _)| n.to_string())
}

fn slope(ys: &[f64]) -> f64 {
    let n = ys.len() as f64;
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = ys.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = i as f64 - mean_x;
        sxy += dx * (y - mean_y);
        sxx += dx * dx;
    }
    sxy / sxx
}

/// Sites matched by a suppression leave the program's not-freed and lost figures.
fn suppress(out: &mut Measurements, suppressions: &[Suppression]) -> Result<(), GateError> {
    let Some(sites) = &mut out.sites else {
        return Err(GateError::NeedsStacks("[[suppress]]"));
    };
    for site in sites.iter_mut() {
        site.suppressed = suppressions
            .iter()
            .any(|s| site.passes_through(&s.function));
    }
    let suppressed = |metric: Metric| -> f64 {
        sites
            .iter()
            .filter(|s| s.suppressed)
            .map(|s| s.figure(metric))
            .sum()
    };
    let (bytes, blocks) = (
        suppressed(Metric::NotFreedBytes),
        suppressed(Metric::NotFreedBlocks),
    );
    for figure in &mut out.figures {
        if figure.metric.suppressible() {
            figure.value = (figure.value - suppressed(figure.metric)).max(0.0);
        }
    }
    out.notes.push(format!(
        "suppressions: {} not freed in {} block(s) left out",
        trace::human_bytes(bytes.round() as u64),
        blocks.round() as u64
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_is_the_least_squares_growth() {
        assert_eq!(slope(&[10.0, 20.0, 30.0, 40.0]), 10.0);
        assert_eq!(slope(&[5.0, 5.0, 5.0]), 0.0);
        assert!((slope(&[0.0, 12.0, 18.0, 30.0]) - 9.6).abs() < 1e-9);
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }
}
