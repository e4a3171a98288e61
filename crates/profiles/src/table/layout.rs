//! The byte layout of shim/agent/profile_table.h, as offsets (little-endian, C's natural
//! alignment), and the validation of a header against the file's length.

pub const MAGIC: &[u8; 8] = b"ALPROF01";
pub const VERSION: u32 = 1;

/// `state` of the header: the program runs (or was killed), or its image ended by exit or exec.
pub const STATE_RUNNING: u32 = 1;
pub const STATE_EXITED: u32 = 2;

/// Field offsets of `struct ag_prof_header` (all of them, read or not: the layout written out).
#[allow(dead_code)]
pub mod header {
    pub const VERSION: usize = 8;
    pub const HEADER_BYTES: usize = 12;
    pub const FILE_BYTES: usize = 16;
    pub const SAMPLE_BYTES: usize = 24;
    pub const PID: usize = 32;
    pub const PPID: usize = 36;
    pub const START_UNIX_NS: usize = 40;
    pub const MAX_DEPTH: usize = 48;
    pub const STATE: usize = 52;
    pub const BUCKETS_OFF: usize = 56;
    pub const BUCKET_COUNT: usize = 64;
    pub const BUCKET_KEYS: usize = 68;
    pub const ENTRIES_OFF: usize = 72;
    pub const ENTRY_COUNT: usize = 80;
    pub const ENTRY_BYTES: usize = 84;
    pub const INDEX_OFF: usize = 88;
    pub const INDEX_SLOTS: usize = 96;
    pub const STACKS_OFF: usize = 104;
    pub const STACKS_BYTES: usize = 112;
    pub const MODULES_OFF: usize = 120;
    pub const MODULES_BYTES: usize = 128;
    pub const STACKS_USED: usize = 136;
    pub const MODULES_USED: usize = 144;
    pub const SAMPLES: usize = 152;
    pub const LIVE_ENTRIES: usize = 160;
    pub const DROPPED_LIVE: usize = 168;
    pub const DROPPED_STACKS: usize = 176;
    pub const UPDATED_UNIX_NS: usize = 184;
    pub const ALLOCS: usize = 192;
    pub const FREES: usize = 200;
    pub const LIVE_BLOCKS: usize = 208;
    pub const LIVE_BYTES: usize = 216;
    pub const REQUESTED: usize = 224;
    pub const RSS: usize = 232;
    pub const EXE: usize = 240;
    pub const EXE_BYTES: usize = 1024;
    /// `sizeof(struct ag_prof_header)`.
    pub const SIZE: usize = EXE + EXE_BYTES;
}

/// `struct ag_prof_live`.
pub mod live {
    pub const SEQ: usize = 0;
    pub const STACK: usize = 4;
    pub const ADDR: usize = 8;
    pub const SIZE_FIELD: usize = 16;
    pub const UNIX_NS: usize = 24;
    pub const SIZE: usize = 32;
}

/// `struct ag_prof_stack`; the frames follow it.
#[allow(dead_code)]
pub mod stack {
    pub const DEPTH_COMMIT: usize = 0;
    pub const HASH: usize = 8;
    pub const SAMPLES: usize = 16;
    pub const ALLOC_OBJECTS: usize = 24;
    pub const ALLOC_SPACE: usize = 32;
    pub const ALLOC_OBJECTS_VAR: usize = 40;
    pub const ALLOC_SPACE_VAR: usize = 48;
    pub const SIZE: usize = 56;
}

/// `struct ag_prof_module`; the build-id and the path follow it, each padded to 8.
pub mod module {
    pub const BYTES: usize = 0;
    pub const BUILD_ID_LEN: usize = 4;
    pub const START: usize = 8;
    pub const END: usize = 16;
    pub const FILE_OFFSET: usize = 24;
    pub const BIAS: usize = 32;
    pub const SIZE: usize = 40;
}

/// Where the areas are, from the header, each checked to lie inside the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub file_bytes: usize,
    pub entries_off: usize,
    pub entry_count: usize,
    pub index_off: usize,
    pub index_slots: usize,
    pub stacks_off: usize,
    pub stacks_bytes: usize,
    pub modules_off: usize,
    pub modules_bytes: usize,
    pub max_depth: usize,
}

/// The header's fields that place the areas, as read.
pub struct RawLayout {
    pub header_bytes: u64,
    pub file_bytes: u64,
    pub buckets: (u64, u64, u64), // offset, count, keys per bucket
    pub entries: (u64, u64, u64), // offset, count, bytes each
    pub index: (u64, u64),        // offset, slots
    pub stacks: (u64, u64),       // offset, bytes
    pub modules: (u64, u64),      // offset, bytes
    pub max_depth: u64,
}

impl RawLayout {
    /// The layout, or what is wrong with it for a file of `len` bytes.
    pub fn check(&self, len: u64) -> Result<Layout, String> {
        if self.file_bytes != len {
            return Err(if len < self.file_bytes {
                format!(
                    "truncated: {len} bytes of the {} its header gives",
                    self.file_bytes
                )
            } else {
                format!("{len} bytes where its header gives {}", self.file_bytes)
            });
        }
        if self.header_bytes < header::SIZE as u64 || self.header_bytes > len {
            return Err(format!("a header of {} bytes", self.header_bytes));
        }
        let (_, bucket_count, bucket_keys) = self.buckets;
        let (entries_off, entry_count, entry_bytes) = self.entries;
        if entry_bytes != live::SIZE as u64 {
            return Err(format!("entries of {entry_bytes} bytes (32 expected)"));
        }
        if bucket_count.checked_mul(bucket_keys) != Some(entry_count) {
            return Err(format!(
                "{entry_count} entries for {bucket_count} buckets of {bucket_keys} keys"
            ));
        }
        let area = |name: &str, off: u64, count: u64, each: u64| -> Result<usize, String> {
            let end = count
                .checked_mul(each)
                .and_then(|bytes| bytes.checked_add(off));
            match end {
                Some(end) if off.is_multiple_of(8) && off >= self.header_bytes && end <= len => {
                    Ok(off as usize)
                }
                _ => Err(format!(
                    "its {name} area ({count} x {each} bytes at offset {off}) is outside the file"
                )),
            }
        };
        area("bucket", self.buckets.0, entry_count, 8)?;
        let entries_off = area("entry", entries_off, entry_count, entry_bytes)?;
        let index_off = area("index", self.index.0, self.index.1, 8)?;
        let stacks_off = area("stack", self.stacks.0, self.stacks.1, 1)?;
        let modules_off = area("module", self.modules.0, self.modules.1, 1)?;
        Ok(Layout {
            file_bytes: len as usize,
            entries_off,
            entry_count: entry_count as usize,
            index_off,
            index_slots: self.index.1 as usize,
            stacks_off,
            stacks_bytes: self.stacks.1 as usize,
            modules_off,
            modules_bytes: self.modules.1 as usize,
            max_depth: self.max_depth as usize,
        })
    }
}
