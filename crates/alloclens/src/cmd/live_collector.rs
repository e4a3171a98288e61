//! `alloclens live --collector --pid PID`: the background collector of a `live --pid` session,
//! started (detached) by the first viewer. It runs the watch as `watch --pid --profile` does,
//! writes its pid in DIR/collector.pid once its session is open, then its output goes to
//! DIR/collector.log (which closes the pipe its viewer waits on: it is ready). It ends when the
//! process exits, after `--duration`, or on SIGTERM (`live --pid PID --stop`, or a viewer's stop
//! key), its results written as `watch` writes them, then its pid file removed.
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use crate::cmd::live::earlier_session;
use crate::cmd::watch::{Session, Settings};

pub(crate) fn run(settings: &Settings, pid: u32) -> anyhow::Result<ExitCode> {
    // A stopped session of the same process goes on (with a gap: nobody collected meanwhile).
    let resume = earlier_session(&settings.dir, pid, settings.force)?;
    let mut session = Session::open_resuming(settings, resume)?;
    let dir = session.dir.clone();
    let _pid_file = PidFile::write(&dir)?;
    log_to(&dir.join(watch::COLLECTOR_LOG))?;
    // No terminal (a session of its own), and a hang-up sent to it is not a reason to stop.
    // SAFETY: setting SIGHUP's disposition to ignore, before any thread of the watch starts.
    unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
    let interrupted =
        runner::install_interrupt_flag().context("cannot install the SIGTERM handler")?;
    let outcome = watch::watch(&session.options, &interrupted, &mut |event| {
        if let watch::WatchEvent::Note(text) = event {
            eprintln!("alloclens: {text}");
        }
    })?;
    let (results, written) = session.close(outcome);
    // The summary, in the log; the pid file goes after watch.json is whole (its removal tells
    // the viewers the results are there).
    crate::cmd::watch::print(&results, written, &dir)
}

/// DIR/collector.pid while the collector runs.
struct PidFile(PathBuf);

impl PidFile {
    /// Written in the session's directory, which this process has locked: a pid file there is
    /// one an earlier collector of this session left (killed outright), replaced.
    fn write(dir: &Path) -> anyhow::Result<PidFile> {
        let path = dir.join(watch::COLLECTOR_PID);
        std::fs::write(&path, format!("{}\n", std::process::id()))
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(PidFile(path))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Standard output and error to `log` (appended: each collector of the session adds its own).
fn log_to(log: &Path) -> anyhow::Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    for fd in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: dup2(2) of an open file over the standard descriptors; nothing else uses them
        // concurrently (no thread is started yet).
        if unsafe { libc::dup2(file.as_raw_fd(), fd) } < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("cannot write to {}", log.display()));
        }
    }
    Ok(())
}
