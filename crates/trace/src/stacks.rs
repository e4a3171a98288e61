//! Call stacks and the modules they point into (`record --stacks`): the STACKS and MODULES
//! chunks (docs/trace-format.md, "Call stacks").
//!
//! Each distinct stack is stored once per trace and events refer to it by id
//! ([`Event::stack`](crate::Event::stack)); ids start at 1 (0 = no stack) and are dense: the
//! STACKS chunks of a file hold ids 1, 2, 3, ... in order. A stack is the return addresses of
//! the call, innermost first, absolute in the process that made the call; symbolising them needs
//! the [`Module`]s mapped in that process (its pid, or for a fork child the parent's).
use serde::{Deserialize, Serialize};

use crate::varint::{self, Cursor};

/// An object file mapped in a traced process (executable, shared library, dlopen'd library),
/// recorded when the shim first saw it mapped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Module {
    /// The process it is mapped in.
    pub pid: u32,
    /// Which image of that process (`ProcessInfo::exec_index`): an exec maps everything anew.
    #[serde(default)]
    pub exec_index: u32,
    /// Its path as the dynamic linker loaded it (the executable: `/proc/PID/exe`'s target).
    pub path: String,
    /// First byte of its code as mapped in the process: the page start of its first executable
    /// segment (return addresses fall in the code; another object may be mapped in a hole
    /// between one object's segments, so the range covers only the code).
    pub start: u64,
    /// One past the last byte of its last executable segment.
    pub end: u64,
    /// Offset in the file that `start` maps (page-aligned): an address `a` in the range is at
    /// file offset `a - start + file_offset`.
    pub file_offset: u64,
    /// The load bias: an address `a` in the module is ELF virtual address `a - bias` (what
    /// symbol tables and DWARF use).
    pub bias: u64,
    /// Its GNU build-id (the `NT_GNU_BUILD_ID` note as loaded), when it has one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "build_id_hex"
    )]
    pub build_id: Option<Vec<u8>>,
    /// When it was seen mapped: wall clock, ns since the Unix epoch.
    pub unix_ns: u64,
}

impl Module {
    /// True when `addr` lies in the module's loaded range.
    pub fn contains(&self, addr: u64) -> bool {
        (self.start..self.end).contains(&addr)
    }

    /// The build-id in lower-case hex (as `file` and `readelf -n` show it), when there is one.
    pub fn build_id_hex(&self) -> Option<String> {
        self.build_id
            .as_ref()
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect())
    }
}

mod build_id_hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(b) => s.serialize_str(&b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        let Some(s) = s else { return Ok(None) };
        if s.len() % 2 != 0 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(serde::de::Error::custom("build_id is not hex"));
        }
        Ok(Some(
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0))
                .collect(),
        ))
    }
}

/// Every stack of a trace, by id: `get(id)` is its return addresses, innermost first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackTable {
    /// `frames[ends[i - 1]..ends[i]]` is stack `i + 1` (`ends[-1]` = 0).
    ends: Vec<usize>,
    frames: Vec<u64>,
}

impl StackTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// The return addresses of stack `id`, innermost first; `None` for 0 and unknown ids.
    pub fn get(&self, id: u32) -> Option<&[u64]> {
        let i = (id as usize).checked_sub(1)?;
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some(&self.frames[start..end])
    }

    /// Stacks in the table (the highest id).
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The id the next pushed stack gets.
    pub fn next_id(&self) -> u32 {
        self.ends.len() as u32 + 1
    }

    /// Appends a stack; returns its id.
    pub fn push(&mut self, frames: &[u64]) -> u32 {
        self.frames.extend_from_slice(frames);
        self.ends.push(self.frames.len());
        self.ends.len() as u32
    }

    /// (id, frames) of every stack, by id.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u64])> {
        (1..=self.ends.len() as u32).filter_map(move |id| self.get(id).map(|f| (id, f)))
    }
}

/// Builds STACKS payloads. Stacks of one program share their outer frames (main, the event loop,
/// the pass manager...): each stack is coded as the inner frames it does not share with an
/// earlier stack, plus a reference to that stack and how many of its outer frames follow
/// (docs/trace-format.md, "Call stacks"). The encoder remembers every stack it coded (it is the
/// stack table's size, like the reader's), so references reach across chunks.
#[derive(Default)]
pub struct StackEncoder {
    table: StackTable,
    /// Hash of the outermost `k` frames of a stack (k mixed in) -> the latest stack with them.
    by_suffix: std::collections::HashMap<u64, u32>,
}

fn suffix_hashes(frames: &[u64]) -> impl Iterator<Item = (usize, u64)> + '_ {
    frames
        .iter()
        .rev()
        .scan(0x9E37_79B9_7F4A_7C15u64, |h, &f| {
            *h = (*h ^ f).wrapping_mul(0xff51_afd7_ed55_8ccd);
            *h ^= *h >> 29;
            Some(*h)
        })
        .enumerate()
        .map(|(i, h)| (i + 1, h))
}

impl StackEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The payload of a STACKS chunk holding stacks `first_id`, `first_id + 1`, ...: u32 raw
    /// length, then a zstd frame (layout in docs/trace-format.md). `first_id` must continue the
    /// stacks coded before (1 for the first).
    pub fn payload<'a>(
        &mut self,
        first_id: u32,
        stacks: impl IntoIterator<Item = &'a [u64]>,
    ) -> std::io::Result<Vec<u8>> {
        if first_id != self.table.next_id() {
            return Err(std::io::Error::other(format!(
                "stacks must continue the table: id {first_id} after {}",
                self.table.len()
            )));
        }
        let mut body = Vec::new();
        let mut count = 0u64;
        for s in stacks {
            // The longest run of outer frames an earlier stack has too.
            let mut best: Option<(u32, usize)> = None;
            for (k, h) in suffix_hashes(s) {
                let Some(&id) = self.by_suffix.get(&h) else {
                    break;
                };
                let r = self.table.get(id).unwrap_or_default();
                if r.len() >= k && r[r.len() - k..] == s[s.len() - k..] {
                    best = Some((id, k));
                } else {
                    break;
                }
            }
            let (reference, shared) = best.unwrap_or((0, 0));
            varint::put(&mut body, u64::from(reference));
            varint::put(&mut body, shared as u64);
            varint::put(&mut body, (s.len() - shared) as u64);
            for &a in &s[..s.len() - shared] {
                body.extend_from_slice(&a.to_le_bytes());
            }
            let id = self.table.push(s);
            for (_, h) in suffix_hashes(s) {
                self.by_suffix.insert(h, id);
            }
            count += 1;
        }
        let mut raw = Vec::with_capacity(body.len() + 20);
        varint::put(&mut raw, u64::from(first_id));
        varint::put(&mut raw, count);
        raw.extend_from_slice(&body);
        let raw_len = u32::try_from(raw.len())
            .map_err(|_| std::io::Error::other("stacks chunk too large"))?;
        // Level 9: stacks are few (a cc1 compile: 7,490, 275 KB raw, 20 ms in all at level 9),
        // and it took their chunks from 57 to 50 KB against level 3; higher levels gain < 2 %
        // at 3 to 10 times the time.
        let compressed = zstd::bulk::compress(&raw, STACKS_LEVEL)?;
        let mut payload = Vec::with_capacity(4 + compressed.len());
        payload.extend_from_slice(&raw_len.to_le_bytes());
        payload.extend_from_slice(&compressed);
        Ok(payload)
    }
}

/// The payload of a STACKS chunk holding stacks `first_id`, `first_id + 1`, ... coded on their
/// own (references only within the chunk): for one-off chunks. A writer of many chunks keeps a
/// [`StackEncoder`].
pub fn stacks_payload<'a>(
    first_id: u32,
    stacks: impl IntoIterator<Item = &'a [u64]>,
) -> std::io::Result<Vec<u8>> {
    let mut e = StackEncoder::new();
    // A fresh encoder expects id 1: give it placeholders for the ids before (never referenced).
    e.table.ends.resize(first_id.saturating_sub(1) as usize, 0);
    e.payload(first_id, stacks)
}

/// zstd level of STACKS chunks (see `StackEncoder::payload`).
const STACKS_LEVEL: i32 = 9;

/// Largest stack depth a reader accepts (the shim records at most 256 frames).
pub const MAX_STACK_DEPTH: u64 = 1024;

/// Appends the stacks of a STACKS payload to `table`; they must continue it (first id =
/// `table.next_id()`). On error `table` is unchanged.
pub(crate) fn read_stacks_payload(payload: &[u8], table: &mut StackTable) -> Result<(), String> {
    if payload.len() < 4 {
        return Err("stacks chunk too short".into());
    }
    let raw_len = u32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]]);
    if raw_len > crate::format::MAX_RAW_CHUNK {
        return Err("stacks chunk: implausible raw size".into());
    }
    let raw = zstd::bulk::decompress(&payload[4..], raw_len as usize)
        .map_err(|e| format!("stacks chunk: zstd: {e}"))?;
    let mut c = Cursor::new(&raw);
    let short = || "stacks chunk cut short".to_string();
    let first = c.varint().ok_or_else(short)?;
    if first != u64::from(table.next_id()) {
        return Err(format!(
            "stacks chunk starts at id {first}, expected {}",
            table.next_id()
        ));
    }
    let count = c.varint().ok_or_else(short)?;
    if count > raw.len() as u64 {
        return Err("stacks chunk: implausible count".into());
    }
    let (ends, frames) = (table.ends.len(), table.frames.len());
    let result = (|| {
        let mut outer = Vec::new();
        for _ in 0..count {
            let reference = c.varint().ok_or_else(short)?;
            let shared = c.varint().ok_or_else(short)?;
            let own = c.varint().ok_or_else(short)?;
            if own.saturating_add(shared) > MAX_STACK_DEPTH {
                return Err(format!("stacks chunk: implausible depth {}", own + shared));
            }
            outer.clear();
            if shared > 0 {
                let r = u32::try_from(reference)
                    .ok()
                    .filter(|&r| r > 0 && (r as usize) <= table.ends.len())
                    .and_then(|r| table.get(r))
                    .ok_or_else(|| {
                        format!("stacks chunk: reference to unknown stack {reference}")
                    })?;
                let shared = shared as usize;
                if shared > r.len() {
                    return Err("stacks chunk: reference shorter than its shared frames".into());
                }
                outer.extend_from_slice(&r[r.len() - shared..]);
            }
            for _ in 0..own {
                let b = c.take(8).ok_or_else(short)?;
                table
                    .frames
                    .push(u64::from_le_bytes(b.try_into().unwrap_or_default()));
            }
            table.frames.extend_from_slice(&outer);
            table.ends.push(table.frames.len());
        }
        Ok(())
    })();
    if result.is_err() {
        table.ends.truncate(ends);
        table.frames.truncate(frames);
    }
    result
}

/// The payload of a MODULES chunk up to version 4: a JSON array of [`Module`].
pub fn modules_payload(modules: &[Module]) -> std::io::Result<Vec<u8>> {
    serde_json::to_vec(modules).map_err(std::io::Error::other)
}

/// The payload of a MODULES chunk from version 5: u32 raw length, then a zstd frame of the JSON
/// of `modules_payload`. Paths and build-ids repeat across a program's modules: a sqlite3
/// trace's 3.2 KB of modules compress to 0.9 KB, 7 % of its whole trace without stacks.
pub fn compressed_modules_payload(modules: &[Module]) -> std::io::Result<Vec<u8>> {
    let json = modules_payload(modules)?;
    let raw_len =
        u32::try_from(json.len()).map_err(|_| std::io::Error::other("modules chunk too large"))?;
    let mut payload = raw_len.to_le_bytes().to_vec();
    payload.extend_from_slice(&zstd::bulk::compress(&json, STACKS_LEVEL)?);
    Ok(payload)
}

/// Reads a MODULES payload, compressed (`compressed_modules_payload`) or not.
pub(crate) fn read_modules_payload(
    payload: &[u8],
    compressed: bool,
) -> Result<Vec<Module>, String> {
    let json;
    let payload = if compressed {
        let (len, body) = payload
            .split_first_chunk::<4>()
            .ok_or("modules chunk too short")?;
        let raw_len = u32::from_le_bytes(*len);
        if raw_len > crate::format::MAX_RAW_CHUNK {
            return Err("modules chunk: implausible raw size".into());
        }
        json = zstd::bulk::decompress(body, raw_len as usize)
            .map_err(|e| format!("modules chunk: zstd: {e}"))?;
        &json[..]
    } else {
        payload
    };
    serde_json::from_slice(payload).map_err(|e| format!("invalid modules chunk: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_round_trip_and_continue() {
        let a: Vec<u64> = vec![0x5555_0000_1234, 0x5555_0000_2000, 0x7fff_0000_0001];
        let b: Vec<u64> = vec![];
        let c: Vec<u64> = (0..200).map(|i| 0x4000_0000 + i * 16).collect();
        let mut t = StackTable::new();
        let p1 = stacks_payload(1, [a.as_slice(), b.as_slice()]).unwrap();
        read_stacks_payload(&p1, &mut t).unwrap();
        let p2 = stacks_payload(3, [c.as_slice()]).unwrap();
        read_stacks_payload(&p2, &mut t).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.get(1), Some(a.as_slice()));
        assert_eq!(t.get(2), Some(b.as_slice()));
        assert_eq!(t.get(3), Some(c.as_slice()));
        assert_eq!(t.get(0), None);
        assert_eq!(t.get(4), None);
        // A chunk that does not continue the table is refused and changes nothing.
        assert!(read_stacks_payload(&p2, &mut t).is_err());
        assert_eq!(t.len(), 3);
    }

    /// Stacks that share outer frames are coded as references across chunks, decode to the
    /// same frames, and cost far less than on their own.
    #[test]
    fn shared_outer_frames_are_references() {
        let outer: Vec<u64> = (0..40).map(|i| 0x5555_0000_0000 + i * 0x1234).collect();
        let stacks: Vec<Vec<u64>> = (0..200u64)
            .map(|i| {
                let mut s = vec![0x7f00_0000_0000 + i * 8, 0x7f00_0001_0000 + (i % 7) * 8];
                s.extend_from_slice(&outer[(i % 5) as usize..]);
                s
            })
            .collect();
        let mut e = StackEncoder::new();
        let p1 = e
            .payload(1, stacks[..100].iter().map(|s| s.as_slice()))
            .unwrap();
        let p2 = e
            .payload(101, stacks[100..].iter().map(|s| s.as_slice()))
            .unwrap();
        let mut t = StackTable::new();
        read_stacks_payload(&p1, &mut t).unwrap();
        read_stacks_payload(&p2, &mut t).unwrap();
        for (i, s) in stacks.iter().enumerate() {
            assert_eq!(t.get(i as u32 + 1), Some(s.as_slice()));
        }
        let alone = stacks_payload(101, stacks[100..].iter().map(|s| s.as_slice())).unwrap();
        assert!(p2.len() < alone.len(), "{} vs {}", p2.len(), alone.len());
        // A reference to a stack the reader does not have is damage, and changes nothing.
        assert!(read_stacks_payload(&p2, &mut StackTable::new()).is_err());
    }

    #[test]
    fn modules_round_trip_with_build_id() {
        let m = vec![
            Module {
                pid: 42,
                path: "/usr/lib/libc.so.6".into(),
                start: 0x7f00_0000_0000,
                end: 0x7f00_0020_0000,
                file_offset: 0,
                bias: 0x7f00_0000_0000,
                build_id: Some(vec![0xde, 0xad, 0x01]),
                unix_ns: 5,
                exec_index: 2,
            },
            Module {
                pid: 42,
                path: "/bin/x".into(),
                build_id: None,
                ..Module::default()
            },
        ];
        let back = read_modules_payload(&modules_payload(&m).unwrap(), false).unwrap();
        assert_eq!(back, m);
        let back = read_modules_payload(&compressed_modules_payload(&m).unwrap(), true).unwrap();
        assert_eq!(back, m);
        assert_eq!(m[0].build_id_hex().as_deref(), Some("dead01"));
    }
}

/// Which allocations of a trace carry a call stack (`TraceReader::stack_sampling`, from the
/// header's `stacks` and `stack_sample_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackSampling {
    /// Recorded without `--stacks`: no stacks.
    None,
    /// Every allocation and realloc has a stack (`--stacks=all`, and traces from before
    /// sampling); one without (stack id 0) is one whose stack could not be taken.
    All,
    /// Sampled by bytes (`record --stacks`): per thread, a Poisson process of mean `mean_bytes`
    /// requested bytes between sample points; an allocation is sampled when a point falls within
    /// its bytes. A sampled allocation carries a stack id; when its stack could not be taken, the
    /// id of an empty stack (no frames). Stack id 0: not sampled.
    Bytes {
        /// `stack_sample_bytes`: the mean bytes between two sample points.
        mean_bytes: u64,
    },
}

impl StackSampling {
    /// From a header's `stacks` and `stack_sample_bytes`.
    pub fn of(header: &crate::TraceHeader) -> Self {
        match (header.stacks, header.stack_sample_bytes) {
            (false, _) => StackSampling::None,
            (true, 0) => StackSampling::All,
            (true, mean_bytes) => StackSampling::Bytes { mean_bytes },
        }
    }

    /// The probability that an allocation (or realloc) of `size` requested bytes carries a
    /// stack: `1 - exp(-size / mean_bytes)` when sampled, 1 with every stack, 0 without stacks.
    /// (A realloc is sampled by its new size; a zero-byte request is never sampled.)
    pub fn probability(&self, size: u64) -> f64 {
        match *self {
            StackSampling::None => 0.0,
            StackSampling::All => 1.0,
            StackSampling::Bytes { mean_bytes } => -(-(size as f64) / mean_bytes as f64).exp_m1(),
        }
    }
}
