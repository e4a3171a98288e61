//! The count file `<pid>.count`: the counters of a program that runs on one thread, read while it
//! runs. The agent has no thread of its own then (its snapshots are taken on the program's thread,
//! at a heap call once the interval has passed: shim/agent/count_file.c), so a program that stops
//! calling the allocator stops renewing its snapshot; this page, shared with the program, says
//! what the program's counters are now.
//!
//! Layout (little-endian): bytes 0-7 `ALCOUNT1`, 8-15 the image's id (the snapshot's
//! `inline_image`), then two slots at 128 and 256 (the shared one and the thread's), each nine u64
//! counters: allocs, frees, reallocs, blocks_in, blocks_out, bytes_in, bytes_out, requested, moved.
//! The byte counts carry 8 bytes (glibc's size field) per block counted, taken off here as the
//! agent does at a snapshot.
use std::path::Path;

use crate::{Counters, Snapshot};

const MAGIC: &[u8; 8] = b"ALCOUNT1";
const SLOTS: [usize; 2] = [128, 256];
const SLOT_COUNTERS: usize = 9;
const SIZE_FIELD: u64 = 8;

/// The counters in process `pid`'s count file, if it is the one of image `image`.
fn read_counters(dir: &Path, pid: u32, image: u64) -> Option<Counters> {
    let bytes = std::fs::read(dir.join(format!("{pid}.count"))).ok()?;
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
    };
    if bytes.get(..8)? != MAGIC || u64_at(8)? != image {
        return None;
    }
    let mut sum = [0u64; SLOT_COUNTERS];
    for slot in SLOTS {
        for (i, total) in sum.iter_mut().enumerate() {
            *total = total.wrapping_add(u64_at(slot + 8 * i)?);
        }
    }
    let [allocs, frees, reallocs, blocks_in, blocks_out, bytes_in, bytes_out, requested, moved] =
        sum;
    let sized_in = allocs + blocks_in + moved;
    let sized_out = frees + blocks_out + moved;
    let bytes_in = bytes_in.saturating_sub(sized_in * SIZE_FIELD);
    let bytes_out = bytes_out.saturating_sub(sized_out * SIZE_FIELD);
    Some(Counters {
        live_bytes: bytes_in.saturating_sub(bytes_out),
        live_blocks: (allocs + blocks_in).saturating_sub(frees + blocks_out),
        requested_bytes: requested,
        allocs,
        frees,
        reallocs,
    })
}

/// The counters of the program now, for a snapshot taken on its one thread (`inline_image`),
/// from its count file in `dir`. None: not such a snapshot, or no count file of its image (an
/// exec replaced it, or it could not be made).
pub fn inline_counters(snapshot: &Snapshot, dir: &Path) -> Option<Counters> {
    read_counters(dir, snapshot.pid, snapshot.inline_image?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(image: u64, slots: [[u64; SLOT_COUNTERS]; 2]) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[..8].copy_from_slice(MAGIC);
        b[8..16].copy_from_slice(&image.to_le_bytes());
        for (slot, values) in SLOTS.iter().zip(slots) {
            for (i, v) in values.iter().enumerate() {
                b[slot + 8 * i..slot + 8 * i + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        b
    }

    #[test]
    fn sums_both_slots_and_takes_the_size_fields_off() {
        let dir = tempfile::tempdir().unwrap();
        // 3 mallocs of 24 usable bytes (32 with the size field), 1 freed; one in the shared slot.
        let thread = [2, 1, 0, 0, 0, 64, 32, 60, 0];
        let shared = [1, 0, 0, 0, 0, 32, 0, 20, 0];
        std::fs::write(dir.path().join("7.count"), page(99, [shared, thread])).unwrap();
        let c = read_counters(dir.path(), 7, 99).unwrap();
        assert_eq!(
            (c.allocs, c.frees, c.live_blocks, c.live_bytes),
            (3, 1, 2, 48)
        );
        assert_eq!(c.requested_bytes, 80);
        // Another image's file (an exec since) is not this snapshot's.
        assert!(read_counters(dir.path(), 7, 98).is_none());
        assert!(read_counters(dir.path(), 8, 99).is_none());
    }
}
