//! `record --stacks` on the recorder's side: the stack arenas the shims share
//! (shim/record/include/alloclens_shim.h, "stack arena"), trace-wide stack ids, and the stacks and
//! modules still to be written.
//!
//! A ring record names its stack by the offset of the arena entry. The first time a record names
//! an entry, the entry gets the next trace-wide id, written back into the entry (so a fork child
//! sharing the arena, and every later record, finds it with one load) and its frames are queued
//! for the next STACKS chunk. Entries no record names (a thread that lost a race to intern the same
//! stack) never reach the trace. Modules are read in arena order, each round.
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::protocol::{
    ARENA_BYTES, ARENA_HEADER_BYTES, ARENA_MODULE, ARENA_STACK, MAX_STACK_DEPTH,
};
use crate::sys::{self, Mapping};

/// One image's (or a fork family's) stack arena, mapped.
pub struct Arena {
    map: Mapping,
    /// pid -> exec index of the images that use the arena (an image and its fork children).
    images: Mutex<HashMap<u32, u32>>,
    /// Where the next module scan starts (bytes).
    scan: Mutex<usize>,
}

/// The arenas by (device, inode) of their memfd.
type ArenasByFile = HashMap<(u64, u64), Arc<Arena>>;

/// What the recorder learned from the arenas and has not written yet, and the id counter.
#[derive(Default)]
pub struct Pending {
    /// The id of the first stack in `frames`/`ends`.
    pub first_id: u32,
    pub stacks: Vec<Vec<u64>>,
    pub modules: Vec<trace::Module>,
    /// Ids given so far (the next is `given + 1`).
    given: u32,
    /// Records that named something that is not a stack entry (a shim bug or damage).
    pub bad_refs: u64,
}

/// The arenas of a recording and the trace-wide ids; shared by the images' chunk builders (all on
/// the drain thread).
#[derive(Clone, Default)]
pub struct Stacks {
    arenas: Arc<Mutex<ArenasByFile>>,
    pending: Arc<Mutex<Pending>>,
}

impl Stacks {
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps the arena a shim handed over (once per memfd: a fork child hands its parent's).
    pub fn arena(&self, fd: &OwnedFd, pid: u32, exec_index: u32) -> std::io::Result<Arc<Arena>> {
        let key = sys::device_and_inode(fd.as_raw_fd())
            .ok_or_else(|| std::io::Error::other("stack arena descriptor is not open"))?;
        let mut arenas = self.arenas.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = arenas.get(&key) {
            a.images
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(pid, exec_index);
            return Ok(a.clone());
        }
        if Mapping::fd_size(fd)? < ARENA_BYTES as u64 {
            return Err(std::io::Error::other("stack arena too small"));
        }
        let arena = Arc::new(Arena {
            map: Mapping::map(fd, ARENA_BYTES)?,
            images: Mutex::new(HashMap::from([(pid, exec_index)])),
            scan: Mutex::new(ARENA_HEADER_BYTES),
        });
        arenas.insert(key, arena.clone());
        Ok(arena)
    }

    /// The trace-wide id of the stack entry at word `offset` of `arena` (giving it one the first
    /// time); 0 when `offset` is not a whole stack entry.
    pub fn id(&self, arena: &Arena, offset: u64) -> u32 {
        let at = offset as usize * 8;
        let map = &arena.map;
        if at < ARENA_HEADER_BYTES || at + 16 > map.len() {
            return self.bad();
        }
        let id = map.atomic_u32(at + 8);
        let known = id.load(Ordering::Relaxed);
        if known != 0 {
            return known;
        }
        // The shim stored the entry's head with release before publishing the record that
        // names it; our acquire load of the ring head ordered it before this load.
        let head = map.atomic_u64(at).load(Ordering::Acquire);
        let (words, kind) = (head & 0xffff_ffff, head >> 32);
        let depth = map.atomic_u32(at + 12).load(Ordering::Relaxed) as usize;
        if kind != ARENA_STACK || depth > MAX_STACK_DEPTH || words as usize != 2 + depth {
            return self.bad();
        }
        let Some(bytes) = map.copy(at + 16, depth * 8) else {
            return self.bad();
        };
        let frames: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default()))
            .collect();
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.given += 1;
        let new = p.given;
        if p.stacks.is_empty() {
            p.first_id = new;
        }
        p.stacks.push(frames);
        id.store(new, Ordering::Relaxed);
        new
    }

    fn bad(&self) -> u32 {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .bad_refs += 1;
        0
    }

    /// Reads the modules the arenas gained since the last call into the pending list.
    pub fn scan_modules(&self) {
        let arenas: Vec<Arc<Arena>> = self
            .arenas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for arena in arenas {
            let found = arena.scan_modules();
            if !found.is_empty() {
                self.pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .modules
                    .extend(found);
            }
        }
    }

    /// The stacks and modules not written yet (the caller writes them).
    pub fn take(&self) -> (u32, Vec<Vec<u64>>, Vec<trace::Module>) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let first = p.first_id;
        (
            first,
            std::mem::take(&mut p.stacks),
            std::mem::take(&mut p.modules),
        )
    }

    /// Records that named no stack entry, so far.
    pub fn bad_refs(&self) -> u64 {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .bad_refs
    }
}

impl Arena {
    /// Walks the complete entries after the last scan; returns the modules among them. Stops at
    /// an entry not complete yet (the next scan goes on from there).
    fn scan_modules(&self) -> Vec<trace::Module> {
        let mut at = self.scan.lock().unwrap_or_else(|e| e.into_inner());
        let map = &self.map;
        let mut out = Vec::new();
        while *at + 8 <= map.len() {
            let head = map.atomic_u64(*at).load(Ordering::Acquire);
            let (words, kind) = ((head & 0xffff_ffff) as usize, head >> 32);
            if words == 0 || *at + words * 8 > map.len() {
                break;
            }
            if kind == ARENA_MODULE {
                if let Some(m) = self.module_at(*at, words * 8) {
                    out.push(m);
                }
            }
            *at += words * 8;
        }
        out
    }

    fn module_at(&self, at: usize, len: usize) -> Option<trace::Module> {
        let b = self.map.copy(at, len)?;
        let u32_ = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap_or_default());
        let u64_ = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or_default());
        if len < 64 {
            return None;
        }
        let (pid, id_len, path_len) = (u32_(8), u32_(12) as usize, u32_(16) as usize);
        let id_end = 64 + id_len.div_ceil(8) * 8;
        let path = b.get(id_end..id_end + path_len)?;
        let exec_index = self
            .images
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&pid)
            .copied()
            .unwrap_or(0);
        Some(trace::Module {
            pid,
            exec_index,
            path: String::from_utf8_lossy(path).into_owned(),
            start: u64_(24),
            end: u64_(32),
            file_offset: u64_(40),
            bias: u64_(48),
            build_id: (id_len > 0).then(|| b[64..64 + id_len].to_vec()),
            unix_ns: u64_(56),
        })
    }
}
