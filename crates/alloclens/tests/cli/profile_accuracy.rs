//! The heap profile's estimates against the truth (issue 37: within their stated error in at
//! least 95 % of 40 seeds). `profile_sites` (crates/testkit/programs/profile_sites.c: four
//! functions holding 50/30/15/5 % of 256 MiB of live blocks of 16 B-2 MiB drawn from a seed,
//! and as much churn freed again; about 30 MiB resident) runs under the real agent with its
//! sampler at the default interval, 40 seeds, two at a time. Each run's snapshot is taken as
//! `alloclens snapshot PID` takes it (profiles::snapshot) while the program waits, and compared
//! with the truth the program prints.
//!
//! What is counted: for each seed and site, whether the site's estimate is within 2 of its
//! stated standard errors of the truth. A site's estimate is the sum over the stacks whose
//! innermost frame lies in the function (by `nm`'s symbols of the program; the snapshot's own
//! naming of call sites is checked against them on one run), its standard error the square
//! root of their summed variances; counted for in-use bytes (the live sampled blocks) and for
//! bytes allocated since the start (the stacks' sums, churn included).
//!
//! A correct estimator is within 2 standard errors 95.4 % of the time, so "at least 38 of 40
//! for each site" would fail a correct sampler once in 3.6 runs per site (the four sites pass
//! together one run in five, simulated). The test asks instead what a correct sampler meets and
//! a bias or an understated error does not: over a kind's 160 figures, at least 140 within 2
//! standard errors (a correct sampler misses 7-9 on average and 21 or more less than once in
//! 5,000 runs; a standard error understated by a factor sqrt(2) misses about 26); for each site,
//! at least 36 of 40 within 3. The 5 % site has about 20 live samples at 256 MiB: with far fewer
//! (at 16 MiB often none), the stated error is itself too rough for such counts.
use std::io::BufRead;
use std::ops::Range;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use profiles::snapshot::{take_pid, Estimate, Snapshot, SnapshotOptions, StackEstimate};
use serde_json::Value;

/// The agent's default mean interval between samples (512 KiB, jemalloc's and Go's).
const SAMPLE_BYTES: u64 = agent::DEFAULT_PROFILE_BYTES;
const SEEDS: u64 = 40;
const TOTAL_MIB: &str = "256";
const SITES: [&str; 4] = ["site_half", "site_thirty", "site_fifteen", "site_five"];

/// One site's figure in one run: the truth, the estimate and its standard error.
#[derive(Debug, Clone, Copy)]
struct Figure {
    truth: f64,
    value: f64,
    stderr: f64,
}

impl Figure {
    fn within(&self, errors: f64) -> bool {
        (self.value - self.truth).abs() <= errors * self.stderr
    }
}

/// A site's figures in one run.
#[derive(Debug, Clone, Copy)]
struct SiteFigures {
    inuse_space: Figure,
    alloc_space: Figure,
}

/// One kind of figure of a site.
type Pick = fn(&SiteFigures) -> Figure;

/// The sites' code in the program file (`nm -S`: start and size), SITES' order.
fn site_code(exe: &Path) -> Vec<Range<u64>> {
    let out = Command::new("nm")
        .args(["-S", "--defined-only"])
        .arg(exe)
        .output()
        .expect("run nm");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    SITES
        .iter()
        .map(|site| {
            text.lines()
                .find_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (f.len() == 4 && f[3] == *site).then(|| {
                        let start = u64::from_str_radix(f[0], 16).unwrap();
                        start..start + u64::from_str_radix(f[1], 16).unwrap()
                    })
                })
                .unwrap_or_else(|| panic!("no {site} in nm's output: {text}"))
        })
        .collect()
}

/// The site (index in SITES) whose code holds the stack's innermost frame: a return address,
/// one byte back is inside the call.
fn site_of(snapshot: &Snapshot, code: &[Range<u64>], stack: &StackEstimate) -> Option<usize> {
    let address = stack.frames.first()?.checked_sub(1)?;
    let module = snapshot
        .modules
        .iter()
        .find(|m| (m.start..m.end).contains(&address))?;
    if !module.path.ends_with("/profile_sites") {
        return None;
    }
    let in_file = address - module.bias;
    code.iter().position(|c| c.contains(&in_file))
}

/// The figures of each site: the sums over its stacks, their variances added.
fn figures(snapshot: &Snapshot, code: &[Range<u64>], truth: &Value) -> Vec<SiteFigures> {
    let figure = |site: usize, field: &str, of: fn(&StackEstimate) -> Estimate| {
        let (mut value, mut variance) = (0.0, 0.0);
        for stack in &snapshot.stacks {
            if site_of(snapshot, code, stack) == Some(site) {
                value += of(stack).value;
                variance += of(stack).variance();
            }
        }
        let truth = truth["sites"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["function"] == SITES[site])
            .unwrap_or_else(|| panic!("no {} in {truth}", SITES[site]))[field]
            .as_f64()
            .unwrap();
        Figure {
            truth,
            value,
            stderr: variance.sqrt(),
        }
    };
    (0..SITES.len())
        .map(|site| SiteFigures {
            inuse_space: figure(site, "live_bytes", |s| s.inuse_space),
            alloc_space: figure(site, "alloc_bytes", |s| s.alloc_space),
        })
        .collect()
}

/// profile_sites with `seed` under the agent and its sampler: its snapshot, taken while it
/// waits, and the truth it printed.
fn run(seed: u64) -> (Snapshot, Value) {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(testkit::program("profile_sites"));
    command
        .args([&seed.to_string(), TOTAL_MIB])
        .env("LD_PRELOAD", agent::library_path().unwrap())
        .env(agent::ENV_DIR, dir.path())
        .env(agent::ENV_PROFILE_BYTES, SAMPLE_BYTES.to_string())
        .stdin(Stdio::piped())
        .stderr(Stdio::piped());
    let (mut child, _) = testkit::spawn_ready(&mut command, "ready\n");
    let taken = take_pid(child.id());
    drop(child.stdin.take());
    let mut truth = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut truth)
        .unwrap();
    assert!(child.wait().unwrap().success(), "seed {seed}");
    let snapshot = taken.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert_eq!(snapshot.sample_bytes, SAMPLE_BYTES);
    // The table never ran out of room: every sampled block is in the estimates.
    assert_eq!(
        (
            snapshot.dropped_live,
            snapshot.dropped_stacks,
            snapshot.torn_entries
        ),
        (0, 0, 0),
        "seed {seed}"
    );
    let truth = serde_json::from_str(&truth).unwrap_or_else(|e| panic!("{e}: {truth}"));
    (snapshot, truth)
}

/// "site: n/40, ..." of the seeds whose figure (`pick`) is within `errors` standard errors.
fn counts(runs: &[(u64, Vec<SiteFigures>)], pick: Pick, errors: f64) -> Vec<usize> {
    (0..SITES.len())
        .map(|site| {
            runs.iter()
                .filter(|(_, figures)| pick(&figures[site]).within(errors))
                .count()
        })
        .collect()
}

fn per_site(counts: &[usize]) -> String {
    let each: Vec<String> = SITES
        .iter()
        .zip(counts)
        .map(|(s, n)| format!("{s} {n}/{SEEDS}"))
        .collect();
    each.join(", ")
}

#[test]
fn estimates_are_within_their_stated_errors_over_40_seeds() {
    let code = site_code(testkit::program("profile_sites"));
    // Two runs at a time (the machine's two cores), seeds taken in turn.
    let next = AtomicU64::new(1);
    let runs = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed > SEEDS {
                    break;
                }
                let (mut snapshot, truth) = run(seed);
                if seed == 1 {
                    // The snapshot's own call sites (as `alloclens snapshot` and pprof show
                    // them) are the functions nm places the frames in.
                    snapshot.to_pprof(&SnapshotOptions::default());
                    for stack in &snapshot.stacks {
                        if let Some(site) = site_of(&snapshot, &code, stack) {
                            let named = stack.site.as_deref().unwrap_or_default();
                            assert!(
                                named.starts_with(&format!("{} (", SITES[site])),
                                "{named} for a frame in {}",
                                SITES[site]
                            );
                        }
                    }
                }
                let figures = figures(&snapshot, &code, &truth);
                runs.lock().unwrap().push((seed, figures));
            });
        }
    });
    let mut runs = runs.into_inner().unwrap();
    runs.sort_by_key(|(seed, _)| *seed);
    assert_eq!(runs.len() as u64, SEEDS);

    let kinds: [(&str, Pick); 2] = [
        ("in-use bytes", |f| f.inuse_space),
        ("allocated bytes", |f| f.alloc_space),
    ];
    for (kind, pick) in kinds {
        let (within2, within3) = (counts(&runs, pick, 2.0), counts(&runs, pick, 3.0));
        let table: Vec<String> = runs
            .iter()
            .map(|(seed, figures)| {
                let row: Vec<String> = figures
                    .iter()
                    .map(|f| {
                        let f = pick(f);
                        format!("{:.0} ± {:.0} (truth {:.0})", f.value, f.stderr, f.truth)
                    })
                    .collect();
                format!("  seed {seed}: {}", row.join(", "))
            })
            .collect();
        let summary = format!(
            "{kind}, seeds within 2 stated standard errors of the truth: {}; within 3: {}",
            per_site(&within2),
            per_site(&within3)
        );
        eprintln!("{summary}");
        let report = format!("{summary}\n{}", table.join("\n"));
        let pooled: usize = within2.iter().sum();
        assert!(
            pooled >= 140,
            "{pooled} of 160 within 2 standard errors; {report}"
        );
        assert!(within3.iter().all(|&n| n >= 36), "{report}");
    }
}
