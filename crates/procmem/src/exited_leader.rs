//! A process whose main thread has exited (`pthread_exit` from `main`) while its other threads run
//! on: the thread-group leader is a zombie, and /proc/PID shows the zombie leader, not the process.
//!
//! Checked on Linux 6.18: the leader's `status` has no Vm*/Rss* lines, `statm` is all zeros, `maps`
//! and `smaps` are empty, `smaps_rollup` fails with ESRCH and `exe` with ENOENT, for root and for
//! the process's own user alike; `environ` fails with ESRCH for root and EACCES for the owner (a
//! task without an address space is owned by root in /proc). The address space is shared by every
//! thread, and /proc/PID/task/TID/{status, statm, smaps_rollup, smaps, maps, environ, exe} of any
//! live thread TID answer for the whole process as /proc/PID/... do when the leader runs (the
//! Vm*/Rss* counters are the address space's, not the thread's), for its owner too; another user
//! still gets EACCES there, as for any process of another user. So the memory of such a process is
//! read through a live thread; only the leader's `Name` and the pid identify the process.

use std::path::PathBuf;

use crate::procfile::{for_each_field, parse_stat, parse_u64, read_stat};

/// Whether a /proc/PID/status text is that of a leader that has exited while other threads run
/// on (`State: Z` with `Threads:` above 1).
pub(crate) fn leader_has_exited(status: &[u8]) -> bool {
    let (mut zombie, mut threads) = (false, 0);
    for_each_field(status, |key, value| match key {
        b"State" => zombie = value.first() == Some(&b'Z'),
        b"Threads" => threads = parse_u64(value).unwrap_or(0),
        _ => {}
    });
    zombie && threads > 1
}

/// The `Name` of a /proc/PID/status text.
pub(crate) fn status_name(status: &[u8]) -> Option<String> {
    let mut name = None;
    for_each_field(status, |key, value| {
        if key == b"Name" && name.is_none() {
            name = Some(String::from_utf8_lossy(value).into_owned());
        }
    });
    name
}

/// A live thread of process `pid` to read its memory through (or to attach a debugger to), when
/// its main thread has exited while other threads run on; `None` for any other process (a running
/// leader, a plain zombie, gone).
pub fn reading_thread(pid: u32) -> Option<u32> {
    let stat = read_stat(pid).ok()?;
    if stat.state != b'Z' || !stat.is_alive() {
        return None;
    }
    live_thread(pid)
}

/// Any thread of process `pid` other than its leader that has not exited.
pub(crate) fn live_thread(pid: u32) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    tasks
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&tid| tid != pid)
        .find(|&tid| {
            std::fs::read(format!("/proc/{pid}/task/{tid}/stat"))
                .ok()
                .and_then(|text| parse_stat(&text))
                .is_some_and(|stat| !matches!(stat.state, b'Z' | b'X' | b'x'))
        })
}

/// The directory whose files describe process `pid`'s memory and image (`status`, `statm`,
/// `smaps`, `smaps_rollup`, `maps`, `environ`, `exe`, ...): /proc/PID, or /proc/PID/task/TID of a
/// live thread when the main thread has exited while others run on (see the module's comment).
pub fn process_dir(pid: u32) -> PathBuf {
    match reading_thread(pid) {
        Some(tid) => PathBuf::from(format!("/proc/{pid}/task/{tid}")),
        None => PathBuf::from(format!("/proc/{pid}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exited_leader_is_told_from_its_status() {
        let status = |state: &str, threads: u32| {
            format!("Name:\tp\nState:\t{state}\nTgid:\t9\nPPid:\t1\nThreads:\t{threads}\n")
        };
        assert!(leader_has_exited(status("Z (zombie)", 2).as_bytes()));
        assert!(!leader_has_exited(status("Z (zombie)", 1).as_bytes()));
        assert!(!leader_has_exited(status("S (sleeping)", 2).as_bytes()));
        assert_eq!(
            status_name(status("Z (zombie)", 2).as_bytes()).as_deref(),
            Some("p")
        );
    }

    #[test]
    fn a_running_process_is_read_at_its_own_directory() {
        let me = std::process::id();
        assert_eq!(process_dir(me), PathBuf::from(format!("/proc/{me}")));
        assert_eq!(reading_thread(me), None);
    }
}
