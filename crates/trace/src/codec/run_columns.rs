//! The columns a run of events writes (`ChunkEncoder::push_run`), reserved once for the run.
//!
//! Every event writes its op byte, most a size or a back-reference. Through `Vec::push` each
//! such write loaded and stored the column's length and checked its capacity (about 26
//! instructions per event with the nibble pairing, bench/HISTORY.md "rec-drain"); here the run
//! reserves one entry per event in each of the three columns first, then writes are a store and
//! an increment of a counter held in a register, and each column's length is set once.
use super::columns::{put_big, split_planes, ColumnSink, Columns};

/// One column's space for a run: `reserved` entries from `start`, those before `next` written.
struct Reserved<'a, T> {
    vec: &'a mut Vec<T>,
    /// The column's first free entry when the run began.
    start: *mut T,
    next: *mut T,
    reserved: usize,
}

impl<'a, T: Copy> Reserved<'a, T> {
    #[inline(always)]
    fn new(vec: &'a mut Vec<T>, reserved: usize) -> Self {
        vec.reserve(reserved);
        // SAFETY: `len` is within the allocation (capacity >= len + reserved).
        let start = unsafe { vec.as_mut_ptr().add(vec.len()) };
        Reserved {
            vec,
            start,
            next: start,
            reserved,
        }
    }

    /// Entries written.
    #[inline(always)]
    fn written(&self) -> usize {
        // SAFETY: `next` is `start` moved forward by `write`, in the same allocation.
        unsafe { self.next.offset_from(self.start) as usize }
    }

    /// # Safety
    /// Fewer than `reserved` entries were written so far.
    #[inline(always)]
    unsafe fn write(&mut self, v: T) {
        debug_assert!(
            self.written() < self.reserved,
            "a run wrote past its reservation"
        );
        // SAFETY: `written < reserved` (the caller's promise): within the reserved capacity.
        unsafe {
            self.next.write(v);
            self.next = self.next.add(1);
        }
    }
}

impl<T> Drop for Reserved<'_, T> {
    /// The column keeps what the run wrote (also when a panic ends the run).
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: `next` is `start` moved forward by `write`, in the same allocation.
        let written = unsafe { self.next.offset_from(self.start) as usize };
        // SAFETY: the `written` entries after the old length were initialised by `write`, and
        // `written <= reserved`, within the capacity `new` reserved.
        unsafe { self.vec.set_len(self.vec.len() + written) };
    }
}

/// A run's columns: the op, size and back-reference entries of `events` events reserved, the
/// other columns (rarely written, any number of varints per event) as they are.
pub(super) struct RunColumns<'a> {
    ops: Reserved<'a, u8>,
    sizes: Reserved<'a, u16>,
    sizes_big: &'a mut Vec<u8>,
    refs: Reserved<'a, u16>,
    refs_big: &'a mut Vec<u8>,
    addrs: &'a mut Vec<u8>,
    depths: &'a mut Vec<u8>,
    sample_gaps: &'a mut Vec<u8>,
    stacks: &'a mut Vec<u8>,
}

impl<'a> RunColumns<'a> {
    /// Space for `events` events; the columns take their length when this is dropped.
    #[inline(always)]
    pub(super) fn new(cols: &'a mut Columns, events: usize) -> Self {
        RunColumns {
            ops: Reserved::new(&mut cols.ops, events),
            sizes: Reserved::new(&mut cols.sizes.planes, events),
            sizes_big: &mut cols.sizes.big,
            refs: Reserved::new(&mut cols.refs.planes, events),
            refs_big: &mut cols.refs.big,
            addrs: &mut cols.addrs,
            depths: &mut cols.depths,
            sample_gaps: &mut cols.sample_gaps,
            stacks: &mut cols.stacks,
        }
    }
}

// SAFETY (of the unchecked writes): `ColumnSink`'s contract, at most one op, size and
// reference per event, and `new` reserved one of each per event of the run.
impl ColumnSink for RunColumns<'_> {
    #[inline(always)]
    unsafe fn op(&mut self, byte: u8) {
        // SAFETY: the trait's contract (see above).
        unsafe { self.ops.write(byte) };
    }

    #[inline(always)]
    unsafe fn size(&mut self, v: u64) {
        // SAFETY: the trait's contract (see above).
        unsafe { self.sizes.write(split_planes(v)) };
        put_big(self.sizes_big, v);
    }

    #[inline(always)]
    unsafe fn reference(&mut self, v: u64) {
        // SAFETY: the trait's contract (see above).
        unsafe { self.refs.write(split_planes(v)) };
        put_big(self.refs_big, v);
    }

    #[inline(always)]
    fn addrs(&mut self) -> &mut Vec<u8> {
        self.addrs
    }

    #[inline(always)]
    fn depths(&mut self) -> &mut Vec<u8> {
        self.depths
    }

    #[inline(always)]
    fn stack_columns(&mut self) -> (&mut Vec<u8>, &mut Vec<u8>) {
        (self.sample_gaps, self.stacks)
    }
}
