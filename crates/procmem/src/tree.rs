//! Discovery of the processes of a tree by scanning /proc (no /proc/PID/task/TID/children needed).
//!
//! Each refresh lists /proc with getdents on one directory handle kept open and rewound, and reads
//! /proc/PID/stat only for pids it has not seen before: the classification (in the tree or not) is
//! cached per pid, and a pid that leaves the listing is evicted, so a recycled pid is classified anew.
//! The directory entry's inode number is kept as well: procfs gives a new inode to a new process,
//! so a pid recycled *between two listings* shows a new inode, and its stat is then read again and
//! its start time compared.

use std::fmt::Write as _;
use std::path::Path;

use hashbrown::HashMap;
use nix::dir::Dir;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use crate::error::{Error, Result};
use crate::procfile::{parse_stat, parse_u64, read_into};

/// What the index remembers about one pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KnownPid {
    pub ino: u64,
    pub ppid: u32,
    pub starttime: u64,
    /// None until classified.
    pub in_tree: Option<bool>,
    /// Number of the last listing that showed this pid.
    pub listed_in: u64,
}

/// Which processes count as the tree.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TreeRule {
    pub root: u32,
    pub self_pid: u32,
    pub include_reparented_to_self: bool,
    /// A child of ours that is never part of the tree (the runner's watchdog).
    pub excluded: Option<u32>,
}

/// A process of the tree: pid and start time identify it for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Member {
    pub pid: u32,
    pub starttime: u64,
}

pub(crate) struct TreeIndex {
    proc_dir: Dir,
    known: HashMap<u32, KnownPid>,
    listing: u64,
    rule: TreeRule,
    stat_buf: Vec<u8>,
    path: String,
    chain: Vec<u32>,
}

impl TreeIndex {
    pub fn new(rule: TreeRule) -> Result<Self> {
        let proc_dir = Dir::open(
            "/proc",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|source| Error::ListProc { source })?;
        Ok(TreeIndex {
            proc_dir,
            known: HashMap::new(),
            listing: 0,
            rule,
            stat_buf: Vec::new(),
            path: String::new(),
            chain: Vec::new(),
        })
    }

    /// Lists /proc and notes every process in it as outside the tree, for a tree whose root is
    /// not started yet (none of them can descend from it). The first [`TreeIndex::refresh`] after
    /// the start then reads the stat of the new processes only, not of every process of the
    /// machine: that took 6-55 ms on a loaded machine, during which the command ran unsampled.
    /// A listed pid that the tree reuses later shows a new inode and is classified then.
    pub fn mark_existing_outside(&mut self) -> Result<()> {
        self.listing += 1;
        for entry in self.proc_dir.iter() {
            let entry = entry.map_err(|source| Error::ListProc { source })?;
            let Some(pid) =
                parse_u64(entry.file_name().to_bytes()).and_then(|p| u32::try_from(p).ok())
            else {
                continue;
            };
            self.path.clear();
            let _ = write!(self.path, "/proc/{pid}/stat");
            let Ok(_) = read_into(Path::new(&self.path), &mut self.stat_buf) else {
                continue;
            };
            let Some(stat) = parse_stat(&self.stat_buf) else {
                continue;
            };
            self.known.insert(
                pid,
                KnownPid {
                    ino: entry.ino(),
                    ppid: stat.ppid,
                    starttime: stat.starttime,
                    in_tree: Some(false),
                    listed_in: self.listing,
                },
            );
        }
        Ok(())
    }

    /// The root of the tree, once it is started (after [`TreeIndex::mark_existing_outside`]).
    pub fn set_root(&mut self, root: u32) {
        self.rule.root = root;
    }

    /// Lists /proc and writes the processes of the tree, sorted by pid, into `members`.
    pub fn refresh(&mut self, members: &mut Vec<Member>) -> Result<()> {
        self.listing += 1;
        let listing = self.listing;
        for entry in self.proc_dir.iter() {
            let entry = entry.map_err(|source| Error::ListProc { source })?;
            // Only numeric top-level entries are processes; threads live under /proc/PID/task.
            let Some(pid) =
                parse_u64(entry.file_name().to_bytes()).and_then(|p| u32::try_from(p).ok())
            else {
                continue;
            };
            let ino = entry.ino();
            match self.known.get_mut(&pid) {
                Some(known) if known.ino == ino => known.listed_in = listing,
                _ => {
                    self.path.clear();
                    let _ = write!(self.path, "/proc/{pid}/stat");
                    // A process that exits right after the listing is simply not there: skip it.
                    let Ok(_) = read_into(Path::new(&self.path), &mut self.stat_buf) else {
                        continue;
                    };
                    let Some(stat) = parse_stat(&self.stat_buf) else {
                        continue;
                    };
                    let fresh = KnownPid {
                        ino,
                        ppid: stat.ppid,
                        starttime: stat.starttime,
                        in_tree: None,
                        listed_in: listing,
                    };
                    let slot = self.known.entry(pid).or_insert(fresh);
                    if slot.starttime == stat.starttime {
                        // Same process, its dentry was merely recreated.
                        slot.ino = ino;
                        slot.listed_in = listing;
                    } else {
                        *slot = fresh;
                    }
                }
            }
        }
        self.known.retain(|_, k| k.listed_in == listing);
        classify(&mut self.known, self.rule, &mut self.chain);
        // A pid whose parent had already vanished could not be placed; forget it so its stat is
        // read again next time (by then it has been reparented, possibly to us).
        self.known.retain(|_, k| k.in_tree.is_some());

        members.clear();
        members.extend(
            self.known
                .iter()
                .filter(|(_, k)| k.in_tree == Some(true))
                .map(|(&pid, k)| Member {
                    pid,
                    starttime: k.starttime,
                }),
        );
        members.sort_unstable_by_key(|m| m.pid);
        Ok(())
    }
}

/// Decides `in_tree` for every unclassified pid, following ppid links up to a classified ancestor.
/// A pid belongs to the tree if it is the root, if its parent belongs, or (when allowed) if its parent
/// is the sampler itself. A pid whose parent is not listed (it vanished) stays unclassified; pid 0
/// (the parent of init and kthreadd) means "not in the tree".
pub(crate) fn classify(known: &mut HashMap<u32, KnownPid>, rule: TreeRule, chain: &mut Vec<u32>) {
    let pending: Vec<u32> = known
        .iter()
        .filter(|(_, k)| k.in_tree.is_none())
        .map(|(&pid, _)| pid)
        .collect();
    for start in pending {
        chain.clear();
        let mut pid = start;
        let verdict = loop {
            let Some(k) = known.get(&pid) else {
                break None; // parent vanished between fork and now
            };
            if let Some(v) = k.in_tree {
                break Some(v);
            }
            if rule.excluded == Some(pid) {
                break Some(false);
            }
            chain.push(pid);
            if pid == rule.root {
                break Some(true);
            }
            if k.ppid == rule.self_pid && rule.include_reparented_to_self {
                break Some(true);
            }
            if k.ppid == 0 || k.ppid == pid || chain.len() > known.len() {
                break Some(false);
            }
            pid = k.ppid;
        };
        if let Some(v) = verdict {
            for p in chain.iter() {
                if let Some(k) = known.get_mut(p) {
                    k.in_tree = Some(v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(entries: &[(u32, u32)]) -> HashMap<u32, KnownPid> {
        entries
            .iter()
            .map(|&(pid, ppid)| {
                (
                    pid,
                    KnownPid {
                        ino: u64::from(pid),
                        ppid,
                        starttime: 1,
                        in_tree: None,
                        listed_in: 1,
                    },
                )
            })
            .collect()
    }

    fn members(map: &HashMap<u32, KnownPid>) -> Vec<u32> {
        let mut v: Vec<u32> = map
            .iter()
            .filter(|(_, k)| k.in_tree == Some(true))
            .map(|(&p, _)| p)
            .collect();
        v.sort_unstable();
        v
    }

    // 1 is init, 50 the sampler, 100 the root; a child's pid may be lower than its parent's (pid wrap).
    const TABLE: &[(u32, u32)] = &[
        (1, 0),
        (2, 0),
        (50, 1),
        (100, 50),
        (7, 100),
        (300, 7),
        (301, 300),
        (400, 50),
        (500, 1),
        (600, 999),
    ];

    #[test]
    fn descendants_in_any_pid_order() {
        let rule = TreeRule {
            root: 100,
            self_pid: 50,
            include_reparented_to_self: false,
            excluded: None,
        };
        let mut map = known(TABLE);
        classify(&mut map, rule, &mut Vec::new());
        assert_eq!(members(&map), vec![7, 100, 300, 301]);
        assert_eq!(map[&500].in_tree, Some(false));
        // 600's parent is not listed: left for the next refresh.
        assert_eq!(map[&600].in_tree, None);
    }

    #[test]
    fn reparented_to_self_only_when_asked() {
        let rule = TreeRule {
            root: 100,
            self_pid: 50,
            include_reparented_to_self: true,
            excluded: None,
        };
        let mut map = known(TABLE);
        classify(&mut map, rule, &mut Vec::new());
        assert_eq!(members(&map), vec![7, 100, 300, 301, 400]);
        // A child of ours that is not the command's (alloclens's watchdog) stays out.
        let rule = TreeRule {
            excluded: Some(400),
            ..rule
        };
        let mut map = known(TABLE);
        classify(&mut map, rule, &mut Vec::new());
        assert_eq!(members(&map), vec![7, 100, 300, 301]);
    }

    #[test]
    fn cached_verdicts_are_kept() {
        let rule = TreeRule {
            root: 100,
            self_pid: 50,
            include_reparented_to_self: false,
            excluded: None,
        };
        let mut map = known(TABLE);
        classify(&mut map, rule, &mut Vec::new());
        // 300 died, 301 was reparented to init: still a descendant of the root for us.
        map.remove(&300);
        map.get_mut(&301).unwrap().ppid = 1;
        map.insert(
            302,
            KnownPid {
                ino: 302,
                ppid: 301,
                starttime: 1,
                in_tree: None,
                listed_in: 2,
            },
        );
        classify(&mut map, rule, &mut Vec::new());
        assert_eq!(members(&map), vec![7, 100, 301, 302]);
    }
}
