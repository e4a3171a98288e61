//! Whether the kernel will let alloclens ptrace a process, as far as /proc tells, before anything
//! is touched: the rules of the kernel's `__ptrace_may_access` for an attach (real ids), of its
//! capability module and of yama's `ptrace_scope`. What /proc cannot tell (yama's scope 1 with a
//! `PR_SET_PTRACER` exception, a seccomp filter or another security module) shows as the
//! `PTRACE_SEIZE` refused, which gives the same line.

/// CAP_SYS_PTRACE's bit in the capability masks of /proc/PID/status.
const CAP_SYS_PTRACE: u64 = 1 << 19;

/// The ids and capabilities of a process, from its /proc/PID/status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Credentials {
    /// Real, effective, saved.
    pub uids: [u32; 3],
    pub gids: [u32; 3],
    /// Permitted and effective capabilities.
    pub permitted: u64,
    pub effective: u64,
}

impl Credentials {
    /// From a /proc/PID/status text; None when a field is missing.
    pub fn parse(status: &str) -> Option<Credentials> {
        let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key));
        let ids = |key: &str| -> Option<[u32; 3]> {
            let v: Vec<u32> = field(key)?
                .split_whitespace()
                .map(|x| x.parse().ok())
                .collect::<Option<_>>()?;
            Some([*v.first()?, *v.get(1)?, *v.get(2)?])
        };
        let mask = |key: &str| u64::from_str_radix(field(key)?.trim(), 16).ok();
        Some(Credentials {
            uids: ids("Uid:")?,
            gids: ids("Gid:")?,
            permitted: mask("CapPrm:")?,
            effective: mask("CapEff:")?,
        })
    }
}

/// Why `ours` may not attach to `theirs` under yama's scope `yama` (None: no yama), or None when
/// nothing /proc shows forbids it.
pub(crate) fn refusal(
    ours: &Credentials,
    theirs: &Credentials,
    yama: Option<u32>,
) -> Option<String> {
    let has_cap = ours.effective & CAP_SYS_PTRACE != 0;
    match yama {
        Some(3) => return Some(
            "kernel.yama.ptrace_scope is 3: no process may attach to another until the next boot"
                .into(),
        ),
        Some(2) if !has_cap => {
            return Some(
                "kernel.yama.ptrace_scope is 2: only a process with CAP_SYS_PTRACE may attach"
                    .into(),
            )
        }
        _ => {}
    }
    if has_cap {
        return None;
    }
    let (uid, gid) = (ours.uids[0], ours.gids[0]);
    if theirs.uids.iter().any(|&u| u != uid) {
        return Some(format!(
            "it runs as uid {}, alloclens as uid {uid} without CAP_SYS_PTRACE",
            theirs.uids[1]
        ));
    }
    if theirs.gids.iter().any(|&g| g != gid) {
        return Some(format!(
            "it runs as gid {}, alloclens as gid {gid} without CAP_SYS_PTRACE",
            theirs.gids[1]
        ));
    }
    if theirs.permitted & !ours.permitted != 0 {
        return Some(format!(
            "it holds capabilities alloclens lacks ({:#x}), and alloclens has no CAP_SYS_PTRACE",
            theirs.permitted & !ours.permitted
        ));
    }
    None
}

/// Yama's `ptrace_scope`, None when the kernel has no yama.
pub(crate) fn yama_scope() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(uid: u32, gid: u32, permitted: u64, effective: u64) -> Credentials {
        Credentials {
            uids: [uid; 3],
            gids: [gid; 3],
            permitted,
            effective,
        }
    }

    #[test]
    fn status_gives_ids_and_capabilities() {
        let status = "Name:\tsleep\nUid:\t1000\t1001\t1002\t1003\nGid:\t20\t21\t22\t23\n\
                      CapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t0000000000080000\n";
        let c = Credentials::parse(status).unwrap();
        assert_eq!(c.uids, [1000, 1001, 1002]);
        assert_eq!(c.gids, [20, 21, 22]);
        assert_eq!(c.permitted, 0x1ff_ffff_ffff);
        assert_eq!(c.effective, CAP_SYS_PTRACE);
        assert_eq!(Credentials::parse("Uid:\t1\t1\t1\t1\n"), None);
    }

    #[test]
    fn the_kernels_rules_as_proc_shows_them() {
        let root = creds(0, 0, 0x1ff_ffff_ffff, 0x1ff_ffff_ffff);
        let user = creds(1000, 1000, 0, 0);
        // Root with CAP_SYS_PTRACE attaches to anyone, unless yama's scope is 3.
        assert_eq!(refusal(&root, &user, None), None);
        assert_eq!(refusal(&root, &user, Some(2)), None);
        assert!(refusal(&root, &user, Some(3))
            .unwrap()
            .contains("ptrace_scope is 3"));
        // A user attaches to its own processes (scope 1's descendant rule is the seize's to say).
        assert_eq!(refusal(&user, &user, Some(1)), None);
        assert!(refusal(&user, &user, Some(2))
            .unwrap()
            .contains("ptrace_scope is 2"));
        // Not to another user's, nor to a process whose ids changed (a set-uid program).
        let why = refusal(&user, &root, None).unwrap();
        assert_eq!(
            why,
            "it runs as uid 0, alloclens as uid 1000 without CAP_SYS_PTRACE"
        );
        let setuid = Credentials {
            uids: [1000, 0, 0],
            ..user
        };
        assert!(refusal(&user, &setuid, None).is_some());
        let setgid = Credentials {
            gids: [1000, 1000, 5],
            ..user
        };
        assert!(refusal(&user, &setgid, None).unwrap().contains("gid"));
        // Root without CAP_SYS_PTRACE: not to a process holding capabilities it lacks.
        let bare_root = creds(0, 0, 0, 0);
        assert!(refusal(&bare_root, &root, None)
            .unwrap()
            .contains("capabilities alloclens lacks"));
        assert_eq!(refusal(&bare_root, &creds(0, 0, 0, 0), None), None);
    }
}
