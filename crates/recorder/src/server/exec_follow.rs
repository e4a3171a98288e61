//! Following the execs and spawns of other processes than the announcing image's (posix_spawn,
//! vfork + exec, and the command the recorder started): each is traced (its hello arrives), or
//! not traced, reported with the reason as soon as /proc (or, once it is gone, the file) tells.
//! The server hands over what the shim announces and asks [`ExecFollower::decide`] each round;
//! the images' own execs (announced, then the image hangs up) stay with the server.
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::image::{liveness, start_ticks, Liveness};
use crate::untraced::{self, Announced, Expected, Verdict};

/// How long a vanished process waits for its hello (or a vanished image for its exec'd
/// successor's) before it is declared not traced (or lost).
pub(super) const VERDICT_GRACE: Duration = Duration::from_millis(500);

/// Said of a program that left nothing to explain why it did not connect.
pub(super) const NO_HELLO: &str =
    "it ended without connecting to the recorder, before alloclens could look at it";

/// An exec or spawn of another process than the announcing image's, until its pid connects, the
/// exec fails, or the recorder decided it is not traced.
struct Foreign {
    ann: Announced,
    /// The announcer's executable: until the pid runs another one, it has not exec'd yet.
    announcer_exe: Option<PathBuf>,
    exec_seen: bool,
    /// Looked traceable: waiting for its hello (start ticks, for liveness).
    waiting: Option<u64>,
    gone_since: Option<Instant>,
}

/// A process found not traced: its announcement, why, and the program /proc showed.
pub(super) struct NotTraced {
    pub pid: u32,
    pub reason: String,
    pub exe: Option<String>,
}

#[derive(Default)]
pub(super) struct ExecFollower {
    /// What a traced program gets in its environment; without, execs are not followed.
    expected: Option<Expected>,
    foreign: Vec<Foreign>,
}

impl ExecFollower {
    pub fn expect(&mut self, expected: Expected) {
        self.expected = Some(expected);
    }

    /// What a traced program gets, when execs are followed.
    pub fn expected(&self) -> Option<&Expected> {
        self.expected.as_ref()
    }

    /// A process the recorder itself started (the command): its exec already happened.
    pub fn spawned(&mut self, ann: Announced) {
        self.foreign.push(Foreign {
            ann,
            announcer_exe: None,
            exec_seen: true,
            waiting: None,
            gone_since: None,
        });
    }

    /// An exec or spawn that image `announcer` announced for another pid (or for its own pid
    /// after the exec, `exec_seen`), replacing an earlier announcement of that pid.
    pub fn announced(&mut self, ann: Announced, announcer: u32, exec_seen: bool) {
        self.forget(ann.pid);
        self.foreign.push(Foreign {
            ann,
            announcer_exe: std::fs::read_link(format!("/proc/{announcer}/exe")).ok(),
            exec_seen,
            waiting: None,
            gone_since: None,
        });
    }

    /// Process `pid` connected, or its exec failed: nothing left to decide.
    pub fn forget(&mut self, pid: u32) {
        self.foreign.retain(|f| f.ann.pid != pid);
    }

    /// Takes the announcement of `pid` off the list; None when its hello came meanwhile.
    pub fn take(&mut self, pid: u32) -> Option<Announced> {
        let k = self.foreign.iter().position(|f| f.ann.pid == pid)?;
        Some(self.foreign.remove(k).ann)
    }

    /// Looks at each announced process once more: the ones found not traced, to report unless
    /// their hello is already waiting to be read (the server catches up before it reports them).
    pub fn decide(&mut self) -> Vec<NotTraced> {
        let Some(expected) = &self.expected else {
            return Vec::new();
        };
        let mut decided = Vec::new();
        for f in &mut self.foreign {
            let pid = f.ann.pid;
            if !f.exec_seen {
                f.exec_seen = match std::fs::read_link(format!("/proc/{pid}/exe")) {
                    Ok(exe) => Some(exe) != f.announcer_exe,
                    // Gone, or a moment inside its exec.
                    Err(_) => start_ticks(pid).is_none() || liveness(pid, 0) == Liveness::Gone,
                };
            }
            let mut done = None;
            if f.exec_seen && f.waiting.is_none() {
                match untraced::inspect_process(pid, expected) {
                    Verdict::NotTraced(reason) => done = Some((reason, super::exe_of(pid))),
                    Verdict::Traceable => f.waiting = Some(start_ticks(pid).unwrap_or(0)),
                    Verdict::NotYet => {}
                    Verdict::Gone => match untraced::inspect_announced(&f.ann, expected) {
                        Some(reason) => done = Some((reason, None)),
                        None => {
                            f.waiting = Some(0);
                            f.gone_since = Some(Instant::now());
                        }
                    },
                }
            } else if let Some(ticks) = f.waiting {
                if f.gone_since.is_none() && liveness(pid, ticks) == Liveness::Gone {
                    f.gone_since = Some(Instant::now());
                }
                if f.gone_since.is_some_and(|t| t.elapsed() >= VERDICT_GRACE) {
                    done = Some((NO_HELLO.into(), None));
                }
            }
            if let Some((reason, exe)) = done {
                decided.push(NotTraced { pid, reason, exe });
            }
        }
        decided
    }

    /// The recording ended: every process seen exec'ing that has not connected, with why.
    pub fn abandon(&mut self) -> Vec<(Announced, &'static str)> {
        std::mem::take(&mut self.foreign)
            .into_iter()
            .filter(|f| f.exec_seen)
            .map(|f| {
                let reason = if f.gone_since.is_some() {
                    NO_HELLO
                } else {
                    "it had not connected to the recorder when the recording ended"
                };
                (f.ann, reason)
            })
            .collect()
    }
}
