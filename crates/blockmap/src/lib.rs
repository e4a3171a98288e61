//! The maps keyed by heap block address that run once per allocator call, in the recorder
//! (block ids of traces without addresses) and in the analysis (the live set): not part of the
//! trace format, shared by both.
//!
//! - [`live_table::LiveTable`]: an open-addressing table from address to a value, whose slot
//!   can be prefetched ahead of the lookup;
//! - [`sharded::ShardedTable`]: the same split in shards that grow one at a time (the
//!   analysis's live set, whose peak a whole table's doubling set);
//! - [`hash`]: a one-multiply hash for keys chosen by the traced program, not an adversary;
//! - [`huge_pages`]: large buffers the kernel is asked to back with huge pages, allocations that
//!   fail softly, and the process's address-space limit that decides how large they may grow.
//!
//! ```
//! let mut live = blockmap::LiveTable::with_capacity(16);
//! live.insert(0x7f00_0010, 42u64);
//! assert_eq!(live.remove(0x7f00_0010), Some(42));
//! ```
pub mod hash;
pub mod huge_pages;
pub mod live_table;
pub mod sharded;

pub use live_table::LiveTable;
pub use sharded::ShardedTable;
