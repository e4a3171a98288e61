//! Driving ksmd for a run and giving every value back.
//!
//! [`KsmControl::acquire`] takes an exclusive lock (flock) on a state file and one on ksmd itself
//! (its sysfs `run` file: one session per machine, whatever state file each uses), writes into the
//! state file the previous value of every sysfs knob it is about to change (fsynced *before* anything changes),
//! then sets the knobs and `run=1`. [`KsmControl::restore`] (or its drop) writes the saved values
//! back and empties the file. When alloclens was killed (SIGKILL, a second Ctrl-C), the file still
//! holds the values: the next [`KsmControl::acquire`] or [`recover_leftover`] restores them first.
//! The state file lives under /run (a tmpfs): a reboot resets both sysfs and the file.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where the kernel exposes KSM.
pub const KSM_SYSFS: &str = "/sys/kernel/mm/ksm";
/// Default state file; `ALLOCLENS_KSM_STATE` overrides it.
pub const DEFAULT_STATE_FILE: &str = "/run/alloclens/ksm-state";

/// The knobs alloclens may set (those of Linux 6.18; older kernels have a subset). `run` is set
/// last by `acquire`; counters are read-only and not listed.
pub const TUNABLES: &[&str] = &[
    "pages_to_scan",
    "sleep_millisecs",
    "max_page_sharing",
    "merge_across_nodes",
    "use_zero_pages",
    "smart_scan",
    "stable_node_chains_prune_millisecs",
    "advisor_mode",
    "advisor_max_cpu",
    "advisor_min_pages_to_scan",
    "advisor_max_pages_to_scan",
    "advisor_target_scan_time",
];

/// Why ksmd could not be driven (or given back).
#[derive(Debug, thiserror::Error)]
pub enum KsmError {
    #[error("this kernel has no KSM ({0} does not exist): use a kernel built with CONFIG_KSM=y")]
    NoKsm(PathBuf),
    #[error(
        "cannot open the KSM state file {path}: {source} ({})",
        state_file_hint(source)
    )]
    StateFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the KSM state file {path} is not a regular file ({what}): set ALLOCLENS_KSM_STATE to a regular file's path, or unset it")]
    NotRegular { path: PathBuf, what: &'static str },
    #[error("the KSM state file {path} is damaged ({what}): it should hold the ksmd settings a killed alloclens left to give back; compare its lines with /sys/kernel/mm/ksm/, set what must be set, then empty the file")]
    Corrupt { path: PathBuf, what: String },
    #[error("cannot take ksmd: opening {path} for writing failed: {source} (KSM's sysfs must be writable: run as root, outside a read-only container); nothing was changed")]
    Sysfs {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("another alloclens{holder} is driving ksmd (lock on {path}); wait for it to end (run --ksm-wait waits for it)")]
    Busy { path: PathBuf, holder: String },
    #[error("another alloclens{holder} still drove ksmd after {waited_s} s of waiting (lock on {path}): try again later, or wait longer (--ksm-wait=DURATION)")]
    StillBusy {
        path: PathBuf,
        holder: String,
        waited_s: u64,
    },
    #[error("unknown KSM setting `{name}` (this kernel has: {known})")]
    UnknownKnob { name: String, known: String },
    #[error("a killed alloclens left KSM settings to give back in {0}, and this user cannot: run any alloclens command as root")]
    LeftForRoot(PathBuf),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot set {path} to {value}: {source} ({hint}); nothing was changed")]
    Write {
        path: PathBuf,
        value: String,
        hint: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("could not give back KSM setting {path} (still {current}, was {saved}): {source}; the values to restore stay in {state}")]
    Restore {
        path: PathBuf,
        current: String,
        saved: String,
        state: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// What to do about a state file that cannot be opened or read.
fn state_file_hint(e: &io::Error) -> &'static str {
    if e.kind() == io::ErrorKind::PermissionDenied {
        "run alloclens as root, or set ALLOCLENS_KSM_STATE to a writable file"
    } else {
        "set ALLOCLENS_KSM_STATE to a writable regular file, or unset it"
    }
}

/// A state file holds a pid and about a dozen `knob=value` lines: anything longer is not one, and
/// a bound keeps an endless file (a device, a FIFO put in its place) from being read forever.
const MAX_STATE_BYTES: u64 = 16 * 1024;

/// The state file to use: `ALLOCLENS_KSM_STATE` or [`DEFAULT_STATE_FILE`].
pub fn default_state_path() -> PathBuf {
    std::env::var_os("ALLOCLENS_KSM_STATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_FILE))
}

/// ksmd driven for a run: the lock is held and the saved values are in the state file until
/// [`KsmControl::restore`] or drop.
#[derive(Debug)]
pub struct KsmControl {
    sysfs: PathBuf,
    state_path: PathBuf,
    state: File,
    /// The lock on ksmd (sysfs `run`), held as long as `state`'s.
    _ksmd: File,
    /// (knob, previous value) in the order they were changed.
    saved: Vec<(String, String)>,
    /// Settings a killed alloclens had left, restored before this one started.
    recovered: Vec<(String, String)>,
    restored: bool,
}

impl KsmControl {
    /// Locks the state file (refusing when another alloclens holds it), restores what a killed
    /// alloclens left in it, saves the current value of each knob of `settings` and of `run`, then
    /// applies `settings` in order and `run=1`. On any error nothing stays changed.
    pub fn acquire(
        sysfs: &Path,
        state_path: &Path,
        settings: &[(String, String)],
    ) -> Result<KsmControl, KsmError> {
        if !sysfs.join("run").exists() {
            return Err(KsmError::NoKsm(sysfs.to_path_buf()));
        }
        for (name, _) in settings {
            if name == "run" || !TUNABLES.contains(&name.as_str()) || !sysfs.join(name).exists() {
                let known: Vec<&str> = TUNABLES
                    .iter()
                    .copied()
                    .filter(|k| sysfs.join(k).exists())
                    .collect();
                return Err(KsmError::UnknownKnob {
                    name: name.clone(),
                    known: known.join(", "),
                });
            }
        }
        let mut state = open_locked(state_path, true)?.expect("a refusing open returns a file");
        // Before anything of the state file is restored: a session with another state file may
        // drive ksmd now, and its values must not be overwritten.
        let ksmd = lock_ksmd(sysfs, true)?.expect("a refusing lock returns a file");
        let recovered = restore_from_file(sysfs, state_path, &mut state)?;
        let mut names: Vec<&str> = settings.iter().map(|(n, _)| n.as_str()).collect();
        names.push("run");
        names.dedup();
        let mut saved = Vec::new();
        for name in names {
            if !saved.iter().any(|(n, _): &(String, String)| n == name) {
                saved.push((name.to_string(), read_knob(sysfs, name)?));
            }
        }
        write_state(state_path, &mut state, &saved)?;
        let mut control = KsmControl {
            sysfs: sysfs.to_path_buf(),
            state_path: state_path.to_path_buf(),
            state,
            _ksmd: ksmd,
            saved,
            recovered,
            restored: false,
        };
        let run = [("run".to_string(), "1".to_string())];
        for (name, value) in settings.iter().chain(run.iter()) {
            if let Err(e) = write_knob(&control.sysfs, name, value) {
                let _ = control.restore_now();
                return Err(e);
            }
        }
        Ok(control)
    }

    /// [`KsmControl::acquire`], waiting up to `limit` while another alloclens drives ksmd (a
    /// polled retry: its lock is released when it ends, however it ends). `waiting` is called at
    /// each refusal with its error; it returns false to stop waiting (a Ctrl-C), which returns that
    /// refusal.
    pub fn acquire_waiting(
        sysfs: &Path,
        state_path: &Path,
        settings: &[(String, String)],
        limit: std::time::Duration,
        mut waiting: impl FnMut(&KsmError) -> bool,
    ) -> Result<KsmControl, KsmError> {
        const POLL: std::time::Duration = std::time::Duration::from_millis(250);
        let start = std::time::Instant::now();
        loop {
            match KsmControl::acquire(sysfs, state_path, settings) {
                Err(busy @ KsmError::Busy { .. }) => {
                    if start.elapsed() >= limit {
                        let KsmError::Busy { path, holder } = busy else {
                            unreachable!("matched above")
                        };
                        return Err(KsmError::StillBusy {
                            path,
                            holder,
                            waited_s: limit.as_secs(),
                        });
                    }
                    if !waiting(&busy) {
                        return Err(busy);
                    }
                    std::thread::sleep(POLL.min(limit.saturating_sub(start.elapsed())));
                }
                other => return other,
            }
        }
    }

    /// A session of `run --ksm`: [`KsmControl::acquire_waiting`] with `initial`, then every value
    /// of `every_value` tried (so a value the kernel rejects is refused before any run; the error
    /// gives everything back), then `initial` set again for the first run.
    pub fn start_session(
        sysfs: &Path,
        state_path: &Path,
        initial: &[(String, String)],
        every_value: &[(String, String)],
        wait: std::time::Duration,
        waiting: impl FnMut(&KsmError) -> bool,
    ) -> Result<KsmControl, KsmError> {
        let control = KsmControl::acquire_waiting(sysfs, state_path, initial, wait, waiting)?;
        for (k, v) in every_value.iter().chain(initial) {
            control.set(k, v)?;
        }
        Ok(control)
    }

    /// Sets a knob saved at [`KsmControl::acquire`] (one of its `settings`) to another value: a
    /// setting that changes from run to run. Any other knob is refused (it would not be given back).
    pub fn set(&self, name: &str, value: &str) -> Result<(), KsmError> {
        if name == "run" || !self.saved.iter().any(|(n, _)| n == name) {
            return Err(KsmError::UnknownKnob {
                name: name.to_string(),
                known: self
                    .saved
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .filter(|n| *n != "run")
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if read_knob(&self.sysfs, name).is_ok_and(|v| v == value) {
            return Ok(());
        }
        write_knob(&self.sysfs, name, value)
    }

    /// The settings a killed alloclens had left and that were given back first.
    pub fn recovered(&self) -> &[(String, String)] {
        &self.recovered
    }

    /// The values saved before the run, to be given back.
    pub fn saved(&self) -> &[(String, String)] {
        &self.saved
    }

    /// Gives every saved value back and empties the state file (kept when a value could not be
    /// restored, so the next start tries again). `Ok(true)` when a setting could only be given back
    /// after unmerging every merged page of the machine (`run=2`, see [`restore_values`]).
    pub fn restore(mut self) -> Result<bool, KsmError> {
        self.restore_now()
    }

    fn restore_now(&mut self) -> Result<bool, KsmError> {
        if self.restored {
            return Ok(false);
        }
        let unmerged = restore_values(&self.sysfs, &self.state_path, &self.saved)?;
        self.restored = true;
        clear_state(&self.state_path, &mut self.state)?;
        Ok(unmerged)
    }
}

impl Drop for KsmControl {
    fn drop(&mut self) {
        // An error here leaves the values in the state file: the next start restores them.
        let _ = self.restore_now();
    }
}

/// At start: when a killed alloclens left values in the state file (and no live alloclens holds
/// it), gives them back and returns them. `Ok(empty)` when there was nothing to do.
pub fn recover_leftover(
    sysfs: &Path,
    state_path: &Path,
) -> Result<Vec<(String, String)>, KsmError> {
    match std::fs::metadata(state_path) {
        Ok(m) if m.len() > 0 => {}
        _ => return Ok(Vec::new()),
    }
    match open_locked(state_path, false) {
        Ok(Some(mut state)) => {
            // Held while restoring. Ok(None): another session (with another state file) drives
            // ksmd, and these values wait for its end. An error (not root, no KSM): restoring
            // says what fails.
            let ksmd = lock_ksmd(sysfs, false);
            if matches!(ksmd, Ok(None)) {
                return Ok(Vec::new());
            }
            restore_from_file(sysfs, state_path, &mut state)
        }
        Ok(None) => Ok(Vec::new()),
        // Not ours to write (another user's session, or we are not root): say so only when no
        // live alloclens holds the file, i.e. the values really are left over.
        Err(KsmError::StateFile { source, .. })
            if source.kind() == io::ErrorKind::PermissionDenied =>
        {
            let Ok(file) = File::open(state_path) else {
                return Ok(Vec::new());
            };
            // SAFETY: flock on a descriptor we own; the lock goes with `file`.
            let free = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0;
            if free {
                Err(KsmError::LeftForRoot(state_path.to_path_buf()))
            } else {
                Ok(Vec::new())
            }
        }
        Err(e) => Err(e),
    }
}

/// Opens (creating) and flocks the state file without waiting. When another process holds it:
/// [`KsmError::Busy`] if `refuse`, else `Ok(None)`.
fn open_locked(path: &Path, refuse: bool) -> Result<Option<File>, KsmError> {
    let err = |source| KsmError::StateFile {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    if let Ok(meta) = std::fs::metadata(path) {
        check_regular(path, &meta)?;
    }
    // O_NONBLOCK: a FIFO put in its place between the check and the open must not hang us.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(err)?;
    check_regular(path, &file.metadata().map_err(err)?)?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(err(e));
        }
        if !refuse {
            return Ok(None);
        }
        let holder = read_bounded(path, &mut &file)
            .ok()
            .and_then(|text| state_pid(&text))
            .map(|pid| format!(" (pid {pid})"))
            .unwrap_or_default();
        return Err(KsmError::Busy {
            path: path.to_path_buf(),
            holder,
        });
    }
    Ok(Some(file))
}

fn check_regular(path: &Path, meta: &std::fs::Metadata) -> Result<(), KsmError> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    };
    Err(KsmError::NotRegular {
        path: path.to_path_buf(),
        what,
    })
}

/// The lock on ksmd itself: an exclusive flock on sysfs `run`, opened for writing (what driving
/// ksmd needs anyway, so a user who cannot drive it cannot hold it either). Whatever state file each
/// alloclens uses, only one drives ksmd. When another holds it: [`KsmError::Busy`] naming its pid
/// (from /proc/locks) if `refuse`, else `Ok(None)`.
fn lock_ksmd(sysfs: &Path, refuse: bool) -> Result<Option<File>, KsmError> {
    let path = sysfs.join("run");
    let file = OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|source| KsmError::Sysfs {
            path: path.clone(),
            source,
        })?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(file));
    }
    if !refuse {
        return Ok(None);
    }
    let holder = lock_holder(&file)
        .map(|pid| format!(" (pid {pid})"))
        .unwrap_or_default();
    Err(KsmError::Busy { path, holder })
}

/// The pid holding a flock on `file`'s inode, from /proc/locks ("1: FLOCK ADVISORY WRITE PID
/// MAJ:MIN:INODE 0 EOF", device numbers in hex).
fn lock_holder(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let dev = meta.dev();
    let id = format!(
        "{:02x}:{:02x}:{}",
        libc::major(dev),
        libc::minor(dev),
        meta.ino()
    );
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // Waiters are listed as "1: -> FLOCK ...": not the holder.
        (fields.get(1) == Some(&"FLOCK") && fields.get(5) == Some(&id.as_str()))
            .then(|| fields.get(4)?.parse().ok())
            .flatten()
    })
}

/// The state file's text, at most [`MAX_STATE_BYTES`] of it.
fn read_bounded(path: &Path, state: &mut impl Read) -> Result<String, KsmError> {
    let mut bytes = Vec::new();
    state
        .take(MAX_STATE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| KsmError::StateFile {
            path: path.to_path_buf(),
            source,
        })?;
    let corrupt = |what: String| KsmError::Corrupt {
        path: path.to_path_buf(),
        what,
    };
    if bytes.len() as u64 > MAX_STATE_BYTES {
        return Err(corrupt(format!(
            "longer than {} KiB",
            MAX_STATE_BYTES / 1024
        )));
    }
    String::from_utf8(bytes).map_err(|_| corrupt("not text".into()))
}

/// Restores the values in a locked state file and empties it.
fn restore_from_file(
    sysfs: &Path,
    state_path: &Path,
    state: &mut File,
) -> Result<Vec<(String, String)>, KsmError> {
    state.rewind().map_err(|source| KsmError::StateFile {
        path: state_path.to_path_buf(),
        source,
    })?;
    let text = read_bounded(state_path, state)?;
    let values = parse_state(&text).map_err(|what| KsmError::Corrupt {
        path: state_path.to_path_buf(),
        what,
    })?;
    if values.is_empty() {
        return Ok(values);
    }
    restore_values(sysfs, state_path, &values)?;
    clear_state(state_path, state)?;
    Ok(values)
}

/// The knob values of a state file: "pid=N" then one "knob=value" per line, as [`write_state`]
/// writes them. Anything else is damage, said with the first line that is wrong: the values are
/// about to be written to sysfs.
fn parse_state(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut values = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let wrong = || {
            let shown: String = line.chars().take(40).collect();
            format!(
                "line {} is `{}`, not KNOB=VALUE",
                n + 1,
                shown.escape_debug()
            )
        };
        let Some((k, v)) = line.split_once('=') else {
            return Err(wrong());
        };
        let plain = !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_graphic());
        if k == "pid" && v.parse::<u32>().is_ok() {
            continue;
        } else if (k == "run" || TUNABLES.contains(&k)) && plain {
            values.push((k.to_string(), v.to_string()));
        } else {
            return Err(wrong());
        }
    }
    Ok(values)
}

/// The pid of the session that wrote a state file, when it says one.
fn state_pid(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.strip_prefix("pid="))
        .and_then(|p| p.parse().ok())
}

fn write_state(path: &Path, state: &mut File, saved: &[(String, String)]) -> Result<(), KsmError> {
    let mut text = format!("pid={}\n", std::process::id());
    for (k, v) in saved {
        text.push_str(&format!("{k}={v}\n"));
    }
    (|| {
        state.set_len(0)?;
        state.rewind()?;
        state.write_all(text.as_bytes())?;
        state.sync_all()
    })()
    .map_err(|source| KsmError::StateFile {
        path: path.to_path_buf(),
        source,
    })
}

fn clear_state(path: &Path, state: &mut File) -> Result<(), KsmError> {
    state
        .set_len(0)
        .and_then(|_| state.sync_all())
        .map_err(|source| KsmError::StateFile {
            path: path.to_path_buf(),
            source,
        })
}

/// Writes back each value that differs, `run` last. `merge_across_nodes` and `max_page_sharing`
/// refuse a change (EBUSY) while pages are merged (by any process of the machine, not only the
/// measured tree): then everything is unmerged (`run=2`) first. Returns whether it was.
fn restore_values(
    sysfs: &Path,
    state_path: &Path,
    saved: &[(String, String)],
) -> Result<bool, KsmError> {
    let mut first_error = None;
    let mut unmerged = false;
    let knobs = saved.iter().filter(|(k, _)| k != "run").rev();
    let run = saved.iter().filter(|(k, _)| k == "run");
    for (name, value) in knobs.chain(run) {
        let current = read_knob(sysfs, name).unwrap_or_default();
        if current == *value && !(name == "run" && unmerged) {
            continue;
        }
        let mut result = write_raw(sysfs, name, value);
        if matches!(&result, Err(e) if e.raw_os_error() == Some(libc::EBUSY)) {
            unmerged = write_raw(sysfs, "run", "2").is_ok();
            result = write_raw(sysfs, name, value);
        }
        if let Err(source) = result {
            first_error.get_or_insert(KsmError::Restore {
                path: sysfs.join(name),
                current,
                saved: value.clone(),
                state: state_path.to_path_buf(),
                source,
            });
        }
    }
    first_error.map_or(Ok(unmerged), Err)
}

/// A knob's value; `advisor_mode` reads as "[none] scan-time" and gives the bracketed choice.
pub fn read_knob(sysfs: &Path, name: &str) -> Result<String, KsmError> {
    let path = sysfs.join(name);
    let text = std::fs::read_to_string(&path).map_err(|source| KsmError::Read {
        path: path.clone(),
        source,
    })?;
    let text = text.trim();
    Ok(match (text.find('['), text.find(']')) {
        (Some(a), Some(b)) if a < b => text[a + 1..b].to_string(),
        _ => text.to_string(),
    })
}

fn write_knob(sysfs: &Path, name: &str, value: &str) -> Result<(), KsmError> {
    write_raw(sysfs, name, value).map_err(|source| KsmError::Write {
        path: sysfs.join(name),
        value: value.to_string(),
        hint: match source.raw_os_error() {
            Some(libc::EINVAL) | Some(libc::ERANGE) => {
                "the kernel rejects this value: see its admin-guide/mm/ksm for the valid ones"
            }
            Some(libc::EBUSY) => {
                "the kernel refuses this change while pages are merged, also pages of exited processes until ksmd scans again: `echo 2 > /sys/kernel/mm/ksm/run` unmerges them all"
            }
            _ => "KSM's sysfs must be writable: run as root, outside a read-only container",
        },
        source,
    })
}

fn write_raw(sysfs: &Path, name: &str, value: &str) -> io::Result<()> {
    // One write(2) of the whole value: sysfs parses each write on its own.
    let mut f = OpenOptions::new().write(true).open(sysfs.join(name))?;
    f.write_all(value.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn state_file_round_trip() {
        let text = "pid=12\nrun=0\npages_to_scan=100\n";
        assert_eq!(state_pid(text), Some(12));
        assert_eq!(
            parse_state(text).unwrap(),
            vec![
                ("run".to_string(), "0".to_string()),
                ("pages_to_scan".to_string(), "100".to_string())
            ]
        );
        assert_eq!(parse_state("").unwrap(), vec![]);
    }

    #[test]
    fn damaged_state_files_name_the_wrong_line() {
        for (text, wrong) in [
            ("pid=1\nbogus=1\n", "line 2 is `bogus=1`"),
            ("pid=1\nnoise\n", "line 2 is `noise`"),
            ("run=0 1\n", "line 1 is `run=0 1`"),
            ("pid=x\n", "line 1"),
        ] {
            let err = parse_state(text).unwrap_err();
            assert!(err.starts_with(wrong), "{text:?}: {err}");
        }
    }

    #[test]
    fn an_endless_or_binary_state_file_is_damage_not_a_hang() {
        let path = Path::new("/dev/zero");
        let err = read_bounded(path, &mut File::open(path).unwrap()).unwrap_err();
        assert!(err.to_string().contains("longer than 16 KiB"), "{err}");
        let err = read_bounded(path, &mut &b"run=\xff\n"[..]).unwrap_err();
        assert!(err.to_string().contains("(not text)"), "{err}");
    }

    #[test]
    fn no_ksm_is_refused_before_anything() {
        let dir = std::env::temp_dir().join(format!("no-ksm-{}", std::process::id()));
        let state = dir.join("state");
        let err = KsmControl::acquire(&dir, &state, &[]).unwrap_err();
        assert!(matches!(err, KsmError::NoKsm(_)), "{err}");
        assert!(!state.exists(), "nothing is created when KSM is missing");
    }

    /// A KSM sysfs of plain files (the locks and the writes work the same on them).
    fn fake_sysfs() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("run"), "0\n").unwrap();
        dir
    }

    #[test]
    fn a_waiting_session_takes_ksmd_when_the_holder_ends() {
        let sysfs = fake_sysfs();
        let first = KsmControl::acquire(sysfs.path(), &sysfs.path().join("a"), &[]).unwrap();
        let (refused, holder_gone) = (
            std::sync::mpsc::channel::<()>(),
            std::sync::mpsc::channel::<()>(),
        );
        let path = sysfs.path().to_path_buf();
        let second = std::thread::spawn(move || {
            let mut told = false;
            let control = KsmControl::acquire_waiting(
                &path,
                &path.join("b"),
                &[],
                std::time::Duration::from_secs(600),
                |e| {
                    assert!(matches!(e, KsmError::Busy { .. }), "{e}");
                    if !told {
                        refused.0.send(()).unwrap();
                        told = true;
                    }
                    true
                },
            );
            holder_gone.1.recv().unwrap();
            control.map(|c| c.restore())
        });
        refused.1.recv().unwrap();
        first.restore().unwrap();
        holder_gone.0.send(()).unwrap();
        assert!(second.join().unwrap().is_ok());
    }

    #[test]
    fn a_wait_ends_at_its_limit_or_when_told_to_stop() {
        let sysfs = fake_sysfs();
        let _first = KsmControl::acquire(sysfs.path(), &sysfs.path().join("a"), &[]).unwrap();
        let b = sysfs.path().join("b");
        let err = KsmControl::acquire_waiting(sysfs.path(), &b, &[], Duration::ZERO, |_| true)
            .unwrap_err();
        assert!(matches!(err, KsmError::StillBusy { .. }), "{err}");
        let err = KsmControl::acquire_waiting(sysfs.path(), &b, &[], Duration::MAX, |_| false)
            .unwrap_err();
        assert!(matches!(err, KsmError::Busy { .. }), "{err}");
    }
}
