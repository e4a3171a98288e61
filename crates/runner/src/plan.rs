//! What to run: the command, the allocator variants, the parameter sweep, and how to observe it.
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use allocators::Variant;
use regex::Regex;
use serde::{Deserialize, Serialize};

/// One swept parameter: `--param threads=1,2,4` substitutes `{threads}` in the command and environment.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Param {
    pub name: String,
    pub values: Vec<String>,
}

/// Everything `execute` needs; built by the CLI from its arguments, never from clap types.
#[derive(Debug, Clone)]
pub struct RunPlan {
    /// Program and arguments, possibly containing `{NAME}` placeholders.
    pub command: Vec<String>,
    pub variants: Vec<Variant>,
    pub params: Vec<Param>,
    /// Extra environment for the child (values may contain placeholders too).
    pub env: Vec<(String, String)>,
    pub repeats: u32,
    /// Unmeasured runs of each variant at each point before its first measured one (hyperfine's
    /// --warmup): they fill the page cache and the dynamic loader's caches.
    pub warmup: u32,
    /// Shell command run before every run, warmups included (hyperfine's --prepare); `{NAME}`
    /// placeholders are substituted. A failure skips the run.
    pub prepare: Option<String>,
    /// Shell command run after the last run of each variant at each point (hyperfine's --cleanup).
    pub cleanup: Option<String>,
    pub interval: Duration,
    /// A sample is taken at each output line that matches; the first capture group labels it.
    pub marker: Option<Regex>,
    /// The first capture group of the last matching line is the run's throughput.
    pub throughput: Option<Regex>,
    pub timeout: Option<Duration>,
    /// Re-read PSS/USS (smaps_rollup) at every sample instead of when something changed
    /// (procmem's adaptive refresh, docs/memory-metrics.md).
    pub exact_pss: bool,
    /// Give the command a pseudo-terminal as stdout (see `child::spawn`).
    pub stdout_pty: bool,
    /// Give the command our stdin instead of /dev/null (only sensible with a single run: each run
    /// would otherwise read what the previous ones left).
    pub pass_stdin: bool,
    /// Make the command's whole tree KSM-mergeable, this way, in the runs whose [`KSM_PARAM`] is
    /// `on` (every run when the plan has no such parameter). None: never.
    pub ksm_merge: Option<KsmMechanism>,
    /// Read KSM figures at every sample (samples.csv, results.json `runs[].ksm`): set for every
    /// run of a `--ksm` session, including its runs with merging off.
    pub ksm: bool,
}

/// How a run's tree is made KSM-mergeable (docs/ksm.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KsmMechanism {
    /// `prctl(PR_SET_MEMORY_MERGE, 1)` in the child before exec: every anonymous mapping, present
    /// and future; inherited by fork, kept across exec (Linux >= 6.6; 6.4 and 6.5 clear it at exec).
    Prctl,
    /// This preload library (shim/ksm) marks the anonymous private writable mappings
    /// `MADV_MERGEABLE` from a thread that rescans /proc/self/maps (any kernel with KSM).
    Madvise { library: PathBuf },
}

impl KsmMechanism {
    /// The name results.json, the table and the report give it.
    pub fn name(&self) -> &'static str {
        match self {
            KsmMechanism::Prctl => "prctl(PR_SET_MEMORY_MERGE)",
            KsmMechanism::Madvise { .. } => "madvise(MADV_MERGEABLE)",
        }
    }
}

/// The parameter `run --ksm` adds (last, so each point runs `off` then `on` in turn): `on` runs
/// have their tree made mergeable, `off` runs do not (ksmd runs in both).
pub const KSM_PARAM: &str = "ksm";

/// One point of the parameter sweep: name -> value, in the order the parameters were given.
pub type Assignment = BTreeMap<String, String>;

/// One run to do: which variant, which parameter values, which repeat.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub index: usize,
    pub variant: usize,
    pub assignment: Assignment,
    pub repeat: u32,
}

impl RunPlan {
    /// Whether the run `spec` is made mergeable.
    pub fn merges(&self, spec: &RunSpec) -> bool {
        self.ksm_merge.is_some() && spec.assignment.get(KSM_PARAM).is_none_or(|v| v == "on")
    }

    /// Every combination of parameter values (the cartesian product), in the order given.
    pub fn assignments(&self) -> Vec<Assignment> {
        let mut out = vec![Assignment::new()];
        for param in &self.params {
            out = out
                .into_iter()
                .flat_map(|base| {
                    param.values.iter().map(move |v| {
                        let mut a = base.clone();
                        a.insert(param.name.clone(), v.clone());
                        a
                    })
                })
                .collect();
        }
        out
    }

    /// The runs in execution order. Repeats are the outer loop and variants the inner one, so a slow drift
    /// of the machine (thermal, other tenants) spreads over every variant instead of favouring one.
    pub fn schedule(&self) -> Vec<RunSpec> {
        let mut runs = Vec::new();
        for repeat in 0..self.repeats {
            for assignment in self.assignments() {
                for variant in 0..self.variants.len() {
                    runs.push(RunSpec {
                        index: runs.len(),
                        variant,
                        assignment: assignment.clone(),
                        repeat,
                    });
                }
            }
        }
        runs
    }

    /// Placeholders that appear in the command or environment but name no parameter.
    pub fn unknown_placeholders(&self) -> Vec<String> {
        let re = Regex::new(r"\{([A-Za-z_][A-Za-z0-9_]*)\}").expect("static regex");
        let texts = self.command.iter().chain(self.env.iter().map(|(_, v)| v));
        let mut unknown: Vec<String> = texts
            .flat_map(|t| {
                re.captures_iter(t)
                    .map(|c| c[1].to_string())
                    .collect::<Vec<_>>()
            })
            .filter(|name| !self.params.iter().any(|p| &p.name == name))
            .collect();
        unknown.sort();
        unknown.dedup();
        unknown
    }
}

/// Replaces every `{NAME}` of the assignment in `text`.
pub fn substitute(text: &str, assignment: &Assignment) -> String {
    let mut out = text.to_string();
    for (name, value) in assignment {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

/// The child's command line and extra environment for one run.
pub fn materialize(plan: &RunPlan, spec: &RunSpec) -> (Vec<String>, Vec<(OsString, OsString)>) {
    let command = plan
        .command
        .iter()
        .map(|a| substitute(a, &spec.assignment))
        .collect();
    let env = plan
        .env
        .iter()
        .map(|(k, v)| {
            (
                OsString::from(k),
                OsString::from(substitute(v, &spec.assignment)),
            )
        })
        .collect();
    (command, env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(params: Vec<Param>) -> RunPlan {
        RunPlan {
            command: vec!["prog".into(), "--threads={threads}".into(), "{mode}".into()],
            variants: vec![],
            params,
            env: vec![("X".into(), "{threads}".into())],
            repeats: 2,
            warmup: 0,
            prepare: None,
            cleanup: None,
            interval: Duration::from_millis(100),
            marker: None,
            throughput: None,
            timeout: None,
            exact_pss: false,
            stdout_pty: false,
            pass_stdin: false,
            ksm_merge: None,
            ksm: false,
        }
    }

    #[test]
    fn assignments_are_the_cartesian_product_in_order() {
        let p = plan(vec![
            Param {
                name: "threads".into(),
                values: vec!["1".into(), "2".into()],
            },
            Param {
                name: "mode".into(),
                values: vec!["a".into(), "b".into(), "c".into()],
            },
        ]);
        let a = p.assignments();
        assert_eq!(a.len(), 6);
        assert_eq!(a[0]["threads"], "1");
        assert_eq!(a[0]["mode"], "a");
        assert_eq!(a[5]["threads"], "2");
        assert_eq!(a[5]["mode"], "c");
        assert!(p.unknown_placeholders().is_empty());
    }

    #[test]
    fn unknown_placeholders_are_reported() {
        let p = plan(vec![Param {
            name: "threads".into(),
            values: vec!["1".into()],
        }]);
        assert_eq!(p.unknown_placeholders(), vec!["mode".to_string()]);
    }

    #[test]
    fn substitution_replaces_every_occurrence() {
        let mut a = Assignment::new();
        a.insert("n".into(), "4".into());
        assert_eq!(substitute("{n}x{n} {m}", &a), "4x4 {m}");
    }
}
