//! What a pass that follows the process pass's blocks is told: the call sites' pass
//! (`crate::sites`) counts per stack what the live set's matching decides (which block a free or
//! a realloc ends), its per-block state kept in the live set's value (`LiveBlocks`' tag). One
//! table then matches every free: a second map of the live blocks by address, the sites' own,
//! made `analyze --sites` some ten times slower than `analyze` and most of its memory
//! (bench/HISTORY.md).
//!
//! The calls come in the order of the events' effects: for a realloc that moves a block, the
//! old block's `end`, then the new block's `tag`, a block it replaced (`replaced`), and `begin`.
use trace::Event;

use crate::live_blocks::Live;

pub trait BlockObserver {
    /// What it keeps of each live block, beside the block's figures.
    type Tag: Copy + Default;

    /// Every event, before its block is matched.
    fn event(&mut self, e: &Event);

    /// The tag of the block `e` makes: a new chain (`moved` false: the block starts where its
    /// `Live` starts) or the block a realloc moved to (`moved`: its `Live` keeps its chain's
    /// start, the block starts at `e`).
    fn tag(&mut self, e: &Event, moved: bool) -> Self::Tag;

    /// The block `e` made is live (after the block it replaced, if any, was `replaced`).
    fn begin(&mut self, e: &Event);

    /// `e` ended the block (a free, a realloc that moved it or freed it); `live` as it was.
    fn end(&mut self, tag: Self::Tag, live: &Live, e: &Event);

    /// The block ended unobserved: its address was handed out again.
    fn replaced(&mut self, tag: Self::Tag, live: &Live);

    /// A block still live at the end of the stream (or where it was cut).
    fn live_at_end(&mut self, tag: Self::Tag, live: &Live);

    /// The stream was cut short by damage.
    fn mark_truncated(&mut self);

    /// The seq before whose event (or the first after it) the observer wants the live blocks
    /// once (`live_blocks`); `u64::MAX`: none wanted. Asked before every event.
    #[inline(always)]
    fn live_blocks_wanted_at(&self) -> u64 {
        u64::MAX
    }

    /// The live blocks (key, figures, tag), in no particular order: before the event
    /// `live_blocks_wanted_at` asked for, or (`at_end`) after the stream's last event when it
    /// came before that seq.
    fn live_blocks(
        &mut self,
        _blocks: &mut dyn Iterator<Item = (u64, Live, Self::Tag)>,
        _at_end: bool,
    ) {
    }
}

/// No pass beside the process pass: no tag, no work.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl BlockObserver for NoObserver {
    type Tag = ();

    #[inline(always)]
    fn event(&mut self, _: &Event) {}

    #[inline(always)]
    fn tag(&mut self, _: &Event, _: bool) {}

    #[inline(always)]
    fn begin(&mut self, _: &Event) {}

    #[inline(always)]
    fn end(&mut self, _: (), _: &Live, _: &Event) {}

    #[inline(always)]
    fn replaced(&mut self, _: (), _: &Live) {}

    #[inline(always)]
    fn live_at_end(&mut self, _: (), _: &Live) {}

    #[inline(always)]
    fn mark_truncated(&mut self) {}
}
