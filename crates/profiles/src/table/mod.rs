//! The reader of the heap profile table the watch agent's sampler keeps (layout:
//! shim/agent/profile_table.h; docs/profile.md, "The profile table"). The file is mapped read-only
//! and read while the agent writes it, without a lock: live entries under their sequence number,
//! stack records once committed, module records once their size is written. Every offset read is
//! checked against the file, so a damaged or foreign file is an error, never a crash.
mod layout;
#[cfg(test)]
pub(crate) mod test_writer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use memmap2::Mmap;

use layout::{header, live, module, stack, Layout, RawLayout};
pub use layout::{MAGIC, STATE_EXITED, STATE_RUNNING, VERSION};

use crate::ProfileError;

/// A profile table file, mapped.
pub struct Table {
    path: PathBuf,
    map: Mmap,
    layout: Layout,
}

/// The header's figures at the moment it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub sample_bytes: u64,
    pub pid: u32,
    pub ppid: u32,
    pub start_unix_ns: u64,
    pub max_depth: u32,
    pub state: u32,
    pub samples: u64,
    pub live_entries: u64,
    pub dropped_live: u64,
    pub dropped_stacks: u64,
    pub updated_unix_ns: u64,
    pub allocs: u64,
    pub frees: u64,
    pub live_blocks: u64,
    pub live_bytes: u64,
    pub requested: u64,
    pub rss: u64,
    pub exe: String,
}

/// A live sampled block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveEntry {
    /// Its stack record: offset in the stack area / 8.
    pub stack: u32,
    pub addr: u64,
    /// Requested bytes.
    pub size: u64,
    pub unix_ns: u64,
}

/// The live entries read, and how many were being written (skipped).
#[derive(Debug, Clone, Default)]
pub struct LiveEntries {
    pub entries: Vec<LiveEntry>,
    pub torn: u64,
}

/// A committed stack record: its frames (return addresses, innermost first) and the
/// Horvitz-Thompson sums of what it allocated since the start.
#[derive(Debug, Clone, PartialEq)]
pub struct StackRecord {
    /// Offset in the stack area / 8 (what live entries name).
    pub id: u32,
    pub frames: Vec<u64>,
    pub samples: u64,
    pub alloc_objects: f64,
    pub alloc_space: f64,
    pub alloc_objects_var: f64,
    pub alloc_space_var: f64,
}

/// A loaded object of the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleRecord {
    /// Lowest address of its executable segments, and highest (exclusive).
    pub start: u64,
    pub end: u64,
    /// The file offset of `start`.
    pub file_offset: u64,
    /// The load bias (dlpi_addr).
    pub bias: u64,
    pub build_id: Vec<u8>,
    pub path: String,
}

impl Table {
    /// Maps the table at `path` read-only and checks its header against the file.
    pub fn open(path: &Path) -> Result<Table, ProfileError> {
        let bad = |problem: String| ProfileError::Table {
            path: path.to_path_buf(),
            problem,
        };
        let file = File::open(path).map_err(|e| bad(format!("cannot open it: {e}")))?;
        let len = file
            .metadata()
            .map_err(|e| bad(format!("cannot read its size: {e}")))?
            .len();
        if len < header::SIZE as u64 {
            return Err(bad(format!("{len} bytes, too short for a profile table")));
        }
        // SAFETY: the mapping is only read through raw pointers and atomics (the agent writes the
        // file while it is mapped; it never changes its length), at offsets checked against it.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| bad(format!("cannot map it: {e}")))?;
        let mut table = Table {
            path: path.to_path_buf(),
            map,
            layout: Layout {
                file_bytes: header::SIZE,
                entries_off: 0,
                entry_count: 0,
                index_off: 0,
                index_slots: 0,
                stacks_off: 0,
                stacks_bytes: 0,
                modules_off: 0,
                modules_bytes: 0,
                max_depth: 0,
            },
        };
        if table.bytes(0, 8) != MAGIC {
            return Err(bad(
                "not a profile table of the alloclens agent (no ALPROF01 magic)".into(),
            ));
        }
        let version = table.u32(header::VERSION);
        if version != VERSION {
            return Err(bad(format!(
                "profile table version {version}; this alloclens reads version {VERSION}"
            )));
        }
        let raw = RawLayout {
            header_bytes: table.u32(header::HEADER_BYTES).into(),
            file_bytes: table.u64(header::FILE_BYTES),
            buckets: (
                table.u64(header::BUCKETS_OFF),
                table.u32(header::BUCKET_COUNT).into(),
                table.u32(header::BUCKET_KEYS).into(),
            ),
            entries: (
                table.u64(header::ENTRIES_OFF),
                table.u32(header::ENTRY_COUNT).into(),
                table.u32(header::ENTRY_BYTES).into(),
            ),
            index: (table.u64(header::INDEX_OFF), table.u64(header::INDEX_SLOTS)),
            stacks: (
                table.u64(header::STACKS_OFF),
                table.u64(header::STACKS_BYTES),
            ),
            modules: (
                table.u64(header::MODULES_OFF),
                table.u64(header::MODULES_BYTES),
            ),
            max_depth: table.u32(header::MAX_DEPTH).into(),
        };
        table.layout = raw.check(len.min(table.map.len() as u64)).map_err(bad)?;
        Ok(table)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header's figures now (the counters change while the program runs).
    pub fn header(&self) -> Header {
        let exe = self.bytes(header::EXE, header::EXE_BYTES);
        let exe_len = exe.iter().position(|&b| b == 0).unwrap_or(exe.len());
        Header {
            sample_bytes: self.u64(header::SAMPLE_BYTES),
            pid: self.u32(header::PID),
            ppid: self.u32(header::PPID),
            start_unix_ns: self.u64(header::START_UNIX_NS),
            max_depth: self.u32(header::MAX_DEPTH),
            state: self.u32(header::STATE),
            samples: self.u64(header::SAMPLES),
            live_entries: self.u64(header::LIVE_ENTRIES),
            dropped_live: self.u64(header::DROPPED_LIVE),
            dropped_stacks: self.u64(header::DROPPED_STACKS),
            updated_unix_ns: self.u64(header::UPDATED_UNIX_NS),
            allocs: self.u64(header::ALLOCS),
            frees: self.u64(header::FREES),
            live_blocks: self.u64(header::LIVE_BLOCKS),
            live_bytes: self.u64(header::LIVE_BYTES),
            requested: self.u64(header::REQUESTED),
            rss: self.u64(header::RSS),
            exe: String::from_utf8_lossy(&exe[..exe_len]).into_owned(),
        }
    }

    /// The live sampled blocks: each entry read under its sequence number, an entry being
    /// written (odd, or changed while read) tried again a few times, then skipped.
    pub fn live_entries(&self) -> LiveEntries {
        const TRIES: usize = 4;
        let mut read = LiveEntries::default();
        for i in 0..self.layout.entry_count {
            let at = self.layout.entries_off + i * live::SIZE;
            let mut outcome = None;
            for _ in 0..TRIES {
                outcome = self.live_entry(at);
                if outcome.is_some() {
                    break;
                }
            }
            match outcome {
                Some(Some(entry)) => read.entries.push(entry),
                Some(None) => {}
                None => read.torn += 1,
            }
        }
        read
    }

    /// One entry: None when torn, Some(None) when free.
    fn live_entry(&self, at: usize) -> Option<Option<LiveEntry>> {
        let seq = self.atomic_u32(at + live::SEQ).load(Ordering::Acquire);
        if seq % 2 == 1 {
            return None;
        }
        let entry = LiveEntry {
            stack: self.u32(at + live::STACK),
            addr: self.u64(at + live::ADDR),
            size: self.u64(at + live::SIZE_FIELD),
            unix_ns: self.u64(at + live::UNIX_NS),
        };
        fence(Ordering::Acquire);
        if self.atomic_u32(at + live::SEQ).load(Ordering::Relaxed) != seq {
            return None;
        }
        Some((entry.addr != 0).then_some(entry))
    }

    /// Every committed stack record: those of the index, and the empty stack at offset 0.
    pub fn stacks(&self) -> Result<Vec<StackRecord>, ProfileError> {
        let mut stacks = Vec::new();
        stacks.extend(self.stack(0)?);
        for slot in 0..self.layout.index_slots {
            let value = self
                .atomic_u64(self.layout.index_off + slot * 8)
                .load(Ordering::Acquire);
            let id = value as u32;
            if value != 0 && id != 0 {
                stacks.extend(self.stack(id)?);
            }
        }
        Ok(stacks)
    }

    /// The stack record `id` (offset / 8), None while it is written.
    pub fn stack(&self, id: u32) -> Result<Option<StackRecord>, ProfileError> {
        let offset = id as usize * 8;
        let fits = |bytes: usize| {
            offset
                .checked_add(bytes)
                .is_some_and(|end| end <= self.layout.stacks_bytes)
        };
        if !fits(stack::SIZE) {
            return Err(self.bad(format!("stack record {id} lies outside the stack area")));
        }
        let at = self.layout.stacks_off + offset;
        let commit = self
            .atomic_u32(at + stack::DEPTH_COMMIT)
            .load(Ordering::Acquire);
        if commit == 0 {
            return Ok(None);
        }
        let depth = commit as usize - 1;
        if depth > self.layout.max_depth || !fits(stack::SIZE + depth * 8) {
            return Err(self.bad(format!(
                "stack record {id} has {depth} frames (at most {} fit)",
                self.layout.max_depth
            )));
        }
        let f64_at =
            |field: usize| f64::from_bits(self.atomic_u64(at + field).load(Ordering::Relaxed));
        Ok(Some(StackRecord {
            id,
            frames: (0..depth)
                .map(|i| self.u64(at + stack::SIZE + i * 8))
                .collect(),
            samples: self.atomic_u64(at + stack::SAMPLES).load(Ordering::Relaxed),
            alloc_objects: f64_at(stack::ALLOC_OBJECTS),
            alloc_space: f64_at(stack::ALLOC_SPACE),
            alloc_objects_var: f64_at(stack::ALLOC_OBJECTS_VAR),
            alloc_space_var: f64_at(stack::ALLOC_SPACE_VAR),
        }))
    }

    /// The module records written so far.
    pub fn modules(&self) -> Result<Vec<ModuleRecord>, ProfileError> {
        let mut modules = Vec::new();
        let mut pos = 0usize;
        while pos + module::SIZE <= self.layout.modules_bytes {
            let at = self.layout.modules_off + pos;
            let bytes = self.atomic_u32(at + module::BYTES).load(Ordering::Acquire) as usize;
            if bytes == 0 {
                break;
            }
            let build_id_len = self.u32(at + module::BUILD_ID_LEN) as usize;
            let path_at = module::SIZE + build_id_len.next_multiple_of(8);
            if !bytes.is_multiple_of(8)
                || pos + bytes > self.layout.modules_bytes
                || path_at > bytes
            {
                return Err(self.bad(format!(
                    "module record at offset {pos} of its area is damaged ({bytes} bytes, a build-id of {build_id_len})"
                )));
            }
            let path = self.bytes(at + path_at, bytes - path_at);
            let path_len = path.iter().position(|&b| b == 0).unwrap_or(path.len());
            modules.push(ModuleRecord {
                start: self.u64(at + module::START),
                end: self.u64(at + module::END),
                file_offset: self.u64(at + module::FILE_OFFSET),
                bias: self.u64(at + module::BIAS),
                build_id: self.bytes(at + module::SIZE, build_id_len),
                path: String::from_utf8_lossy(&path[..path_len]).into_owned(),
            });
            pos += bytes;
        }
        Ok(modules)
    }

    fn bad(&self, problem: String) -> ProfileError {
        ProfileError::Table {
            path: self.path.clone(),
            problem,
        }
    }

    /// The address of `len` bytes at `at`; a bug (not bad input) if outside the file: every
    /// caller's offset comes from the checked layout.
    fn at(&self, at: usize, len: usize) -> *const u8 {
        assert!(
            at.checked_add(len).is_some_and(|end| end <= self.map.len()),
            "read of {len} bytes at {at} outside a table of {}",
            self.map.len()
        );
        // SAFETY: in bounds, checked above.
        unsafe { self.map.as_ptr().add(at) }
    }

    fn bytes(&self, at: usize, len: usize) -> Vec<u8> {
        let p = self.at(at, len);
        // SAFETY: in bounds; volatile because the agent may write them meanwhile.
        (0..len)
            .map(|i| unsafe { std::ptr::read_volatile(p.add(i)) })
            .collect()
    }

    fn u32(&self, at: usize) -> u32 {
        let p = self.at(at, 4);
        // SAFETY: in bounds; unaligned read allowed; volatile: the agent may write it.
        u32::from_le_bytes(unsafe { std::ptr::read_volatile(p.cast::<[u8; 4]>()) })
    }

    fn u64(&self, at: usize) -> u64 {
        let p = self.at(at, 8);
        // SAFETY: as `u32`.
        u64::from_le_bytes(unsafe { std::ptr::read_volatile(p.cast::<[u8; 8]>()) })
    }

    fn atomic_u32(&self, at: usize) -> &AtomicU32 {
        let p = self.at(at, 4);
        assert!((p as usize).is_multiple_of(4), "unaligned atomic at {at}");
        // SAFETY: in bounds and aligned (the mapping is page-aligned, the layout's offsets are
        // multiples of 8); the agent updates it atomically from other processes.
        unsafe { &*p.cast::<AtomicU32>() }
    }

    fn atomic_u64(&self, at: usize) -> &AtomicU64 {
        let p = self.at(at, 8);
        assert!((p as usize).is_multiple_of(8), "unaligned atomic at {at}");
        // SAFETY: as `atomic_u32`.
        unsafe { &*p.cast::<AtomicU64>() }
    }
}

#[cfg(test)]
mod tests;
