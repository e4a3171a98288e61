//! `watch --profile`: when to take a heap profile snapshot of the watched processes (the triggers
//! chosen at the start), and the ring of the last N snapshots on disk, DIR/snapshots. The agent's
//! sampler keeps each process's table (shim/agent/profile_table.h); a snapshot reads the tables
//! of the processes running at that moment (`profiles::snapshot`) into one pprof file.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The snapshots' directory in a watch's output directory.
pub const SNAPSHOTS_DIR: &str = "snapshots";
/// Snapshots kept when `--snapshots-kept` is not given.
pub const DEFAULT_KEEP: usize = 24;
/// A new RSS high-water mark is a trigger when it is this much above the last one that was (and
/// at least [`PEAK_MIN_STEP`] above): a program whose RSS creeps up gets a snapshot per step, not
/// one per sample.
pub const PEAK_STEP: f64 = 0.05;
pub const PEAK_MIN_STEP: u64 = 1 << 20;

/// What `watch --profile` was asked for.
#[derive(Debug, Clone)]
pub struct ProfileSettings {
    /// The sampler's mean bytes between samples (the agent's ALLOCLENS_PROFILE_BYTES).
    pub sample_bytes: u64,
    pub triggers: Triggers,
    /// Snapshots kept in DIR/snapshots; the oldest goes when a new one is written.
    pub keep: usize,
}

/// The moments a snapshot is taken, besides the one at the end of the watch.
#[derive(Debug, Clone, Default)]
pub struct Triggers {
    /// Every this long.
    pub every: Option<Duration>,
    /// At each new high-water mark of the tree's RSS ([`PEAK_STEP`] above the last).
    pub at_peak: bool,
    /// When the tree's RSS rises past this many bytes (again after it fell below).
    pub above: Option<u64>,
    /// Set by a signal handler (`--snapshot-on-signal`): a snapshot at the next sample.
    pub signal: Option<Arc<AtomicBool>>,
}

/// Why a snapshot was taken; its name in the file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Every,
    Peak,
    Above,
    Signal,
    End,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Every => "every",
            Reason::Peak => "peak",
            Reason::Above => "above",
            Reason::Signal => "signal",
            Reason::End => "end",
        }
    }
}

/// The triggers' state over the watch.
#[derive(Debug)]
pub struct TriggerState {
    triggers: Triggers,
    last_every_s: f64,
    /// The RSS of the last peak snapshot (or the first sample's: the baseline).
    peak: Option<u64>,
    /// The RSS was below the `above` line at the last sample.
    below_line: bool,
}

impl TriggerState {
    pub fn new(triggers: Triggers) -> TriggerState {
        TriggerState {
            triggers,
            last_every_s: 0.0,
            peak: None,
            below_line: true,
        }
    }

    /// The reason for a snapshot at a sample taken `t_s` seconds into the watch with the tree's
    /// RSS `rss`, if any (one snapshot serves every trigger due at once).
    pub fn due(&mut self, t_s: f64, rss: u64) -> Option<Reason> {
        let mut reason = None;
        if let Some(flag) = &self.triggers.signal {
            if flag.swap(false, Ordering::Relaxed) {
                reason = Some(Reason::Signal);
            }
        }
        if let Some(line) = self.triggers.above {
            let below = rss < line;
            if self.below_line && !below {
                reason = reason.or(Some(Reason::Above));
            }
            self.below_line = below;
        }
        if self.triggers.at_peak {
            match self.peak {
                None => self.peak = Some(rss),
                Some(peak) => {
                    let step = ((peak as f64 * PEAK_STEP) as u64).max(PEAK_MIN_STEP);
                    if rss >= peak.saturating_add(step) {
                        self.peak = Some(rss);
                        reason = reason.or(Some(Reason::Peak));
                    }
                }
            }
        }
        if let Some(every) = self.triggers.every {
            if t_s - self.last_every_s >= every.as_secs_f64() {
                self.last_every_s = t_s;
                reason = reason.or(Some(Reason::Every));
            }
        }
        reason
    }
}

/// The last N snapshots in DIR/snapshots: `SEQ-UTCTIME-REASON.pb.gz`, SEQ counting from 1.
#[derive(Debug)]
pub struct SnapshotRing {
    dir: PathBuf,
    keep: usize,
    written: Vec<PathBuf>,
    seq: u64,
}

impl SnapshotRing {
    /// The ring in `dir` (made by the watch's directory set-up: files there are the watch's own).
    pub fn new(dir: PathBuf, keep: usize) -> SnapshotRing {
        SnapshotRing {
            dir,
            keep: keep.max(1),
            written: Vec::new(),
            seq: 0,
        }
    }

    /// The path of the next snapshot, for `reason` at `unix_ms`.
    pub fn next_path(&mut self, reason: Reason, unix_ms: u64) -> PathBuf {
        self.seq += 1;
        let stamp = utc_stamp(unix_ms);
        self.dir
            .join(format!("{:06}-{stamp}-{}.pb.gz", self.seq, reason.name()))
    }

    /// Records that `path` was written, and removes the oldest snapshots this ring wrote beyond
    /// the N kept (never another file).
    pub fn written(&mut self, path: PathBuf) -> Vec<PathBuf> {
        self.written.push(path);
        let mut removed = Vec::new();
        while self.written.len() > self.keep {
            let old = self.written.remove(0);
            if std::fs::remove_file(&old).is_ok() {
                removed.push(old);
            }
        }
        removed
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The snapshots on disk, oldest first.
    pub fn kept(&self) -> &[PathBuf] {
        &self.written
    }
}

/// `20261129T071500Z` for a time in ms since the Unix epoch (UTC, civil calendar).
fn utc_stamp(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A watch's snapshots: its triggers, its ring, and the symboliser kept from one snapshot to the
/// next (each file's symbols and DWARF are read once).
pub struct Profiling {
    triggers: TriggerState,
    ring: SnapshotRing,
    symbolizer: symbols::Symbolizer,
}

impl Profiling {
    pub fn new(settings: &ProfileSettings, ring_dir: PathBuf) -> Profiling {
        Profiling {
            triggers: TriggerState::new(settings.triggers.clone()),
            ring: SnapshotRing::new(ring_dir, settings.keep),
            symbolizer: symbols::Symbolizer::new(
                profiles::snapshot::SnapshotOptions::default().debug_roots,
            ),
        }
    }

    /// See [`TriggerState::due`].
    pub fn due(&mut self, t_s: f64, rss: u64) -> Option<Reason> {
        self.triggers.due(t_s, rss)
    }

    /// Writes the next snapshot of the ring from the tables of `pids` in `agent_dir` (their
    /// latest images), read now, into one pprof file labelled by pid. Ok(false) when none of
    /// them has a table.
    pub fn snapshot(
        &mut self,
        reason: Reason,
        unix_ms: u64,
        agent_dir: &Path,
        pids: &[u32],
    ) -> Result<bool, String> {
        let tables = tables_of(agent_dir, pids);
        let mut snapshots = Vec::new();
        let mut problems = Vec::new();
        for table in &tables {
            match profiles::snapshot::take(table) {
                Ok(s) => snapshots.push(s),
                Err(e) => problems.push(e.to_string()),
            }
        }
        if snapshots.is_empty() {
            return if problems.is_empty() {
                Ok(false)
            } else {
                Err(problems.join("; "))
            };
        }
        let profile = profiles::snapshot::to_pprof_with(&mut snapshots, &mut self.symbolizer);
        let out = self.ring.next_path(reason, unix_ms);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&out)
            .map_err(|e| format!("cannot create {}: {e}", out.display()))?;
        if let Err(e) = profiles::pprof::write_gzipped(&profile.profile, &mut file)
            .and_then(|()| file.sync_data())
        {
            let _ = std::fs::remove_file(&out);
            return Err(format!("cannot write {}: {e}", out.display()));
        }
        self.ring.written(out);
        Ok(true)
    }

    /// The snapshots on disk, oldest first.
    pub fn kept(&self) -> &[PathBuf] {
        self.ring.kept()
    }
}

/// The table of each process among `pids` in the agent directory: for a pid, the file of its
/// latest image (`PID-N.prof` with the highest N).
pub fn tables_of(agent_dir: &Path, pids: &[u32]) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(agent_dir) else {
        return Vec::new();
    };
    let mut latest: Vec<(u32, u64, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, image)) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".prof"))
            .and_then(|n| n.split_once('-'))
            .and_then(|(p, i)| Some((p.parse::<u32>().ok()?, i.parse::<u64>().ok()?)))
        else {
            continue;
        };
        if !pids.contains(&pid) {
            continue;
        }
        match latest.iter_mut().find(|(p, _, _)| *p == pid) {
            Some(l) if l.1 >= image => {}
            Some(l) => *l = (pid, image, entry.path()),
            None => latest.push((pid, image, entry.path())),
        }
    }
    latest.sort_by_key(|(pid, _, _)| *pid);
    latest.into_iter().map(|(_, _, path)| path).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(t: Triggers) -> TriggerState {
        TriggerState::new(t)
    }

    #[test]
    fn every_fires_once_per_period() {
        let mut s = state(Triggers {
            every: Some(Duration::from_secs(10)),
            ..Default::default()
        });
        let fired: Vec<f64> = [0.0, 5.0, 10.0, 12.0, 19.9, 20.5, 31.0]
            .into_iter()
            .filter(|t| s.due(*t, 0).is_some())
            .collect();
        assert_eq!(fired, vec![10.0, 20.5, 31.0]);
    }

    #[test]
    fn a_peak_is_a_step_above_the_last_one_taken() {
        let mut s = state(Triggers {
            at_peak: true,
            ..Default::default()
        });
        let mb = 1 << 20;
        // baseline 100 MB; 104 is not 5 % above; 106 is; 110 is not 5 % above 106; 112 is.
        let rss = [100, 104, 106, 90, 110, 112];
        let fired: Vec<u64> = rss
            .into_iter()
            .filter(|r| s.due(0.0, r * mb) == Some(Reason::Peak))
            .collect();
        assert_eq!(fired, vec![106, 112]);
    }

    #[test]
    fn crossing_the_line_fires_on_the_way_up_only() {
        let mut s = state(Triggers {
            above: Some(1000),
            ..Default::default()
        });
        let fired: Vec<u64> = [500, 1200, 1300, 900, 1000, 1100]
            .into_iter()
            .filter(|r| s.due(0.0, *r).is_some())
            .collect();
        assert_eq!(fired, vec![1200, 1000]);
    }

    #[test]
    fn a_signal_asks_for_one_snapshot() {
        let flag = Arc::new(AtomicBool::new(false));
        let mut s = state(Triggers {
            signal: Some(Arc::clone(&flag)),
            ..Default::default()
        });
        assert_eq!(s.due(0.0, 0), None);
        flag.store(true, Ordering::Relaxed);
        assert_eq!(s.due(1.0, 0), Some(Reason::Signal));
        assert_eq!(s.due(2.0, 0), None);
    }

    #[test]
    fn the_ring_keeps_the_last_n_of_its_own_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("users-file.pb.gz"), b"mine").unwrap();
        let mut ring = SnapshotRing::new(dir.path().to_path_buf(), 2);
        for i in 0..4u64 {
            let p = ring.next_path(Reason::Every, 1_795_936_398_000 + i * 1000);
            std::fs::write(&p, b"x").unwrap();
            ring.written(p);
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec![
                "000003-20261129T071320Z-every.pb.gz",
                "000004-20261129T071321Z-every.pb.gz",
                "users-file.pb.gz"
            ]
        );
    }

    #[test]
    fn the_latest_image_of_each_pid_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "10-0.prof",
            "10-2.prof",
            "10-1.prof",
            "11-0.prof",
            "12-0.prof",
            "x.prof",
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let tables = tables_of(dir.path(), &[10, 11]);
        let names: Vec<_> = tables
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(names, vec!["10-2.prof", "11-0.prof"]);
    }
}
