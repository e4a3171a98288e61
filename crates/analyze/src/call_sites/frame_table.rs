//! The distinct frames of every folded stack, each held once: a stack is a list of frame ids, and
//! the output's stacks share the frames (`Arc<SiteFrame>`) instead of each owning copies of the
//! names (on a `--stacks=all` trace of 79 images that was 420 MB of strings).
use std::sync::Arc;

use hashbrown::HashMap;

use super::fold::is_allocator_frame;
use super::SiteFrame;

/// A frame's place in a `FrameTable`: equal ids are equal frames and equal frames have equal ids
/// (so stacks of ids group as stacks of frames do).
pub(crate) type FrameId = u32;

/// A function's place in a `FrameTable`: its (label, module), as the sites by function key them.
pub(crate) type FunctionId = u32;

/// One distinct frame and what the fold asks of it, computed once.
struct Entry {
    frame: Arc<SiteFrame>,
    function: FunctionId,
    allocator: bool,
}

#[derive(Default)]
pub(crate) struct FrameTable {
    entries: Vec<Entry>,
    /// Content -> id: two return addresses can resolve to the same frame (an unreadable module
    /// recorded under two build-ids), and must then be one frame as before.
    index: HashMap<Arc<SiteFrame>, FrameId>,
    /// (label, module) -> function id.
    functions: HashMap<(String, String), FunctionId>,
    /// Function id -> the first frame of it, whose label and module name it.
    function_frames: Vec<FrameId>,
    /// `symbols::ResolvedId` index -> the ids of that return address's frames, innermost first.
    by_address: Vec<Option<Box<[FrameId]>>>,
}

impl FrameTable {
    /// The frame ids of stack `addresses` (innermost first) into `out`, innermost first, the
    /// allocator's own frames at the top dropped (one frame is always kept).
    pub fn resolve_stack(
        &mut self,
        addresses: &[u64],
        space: &symbols::AddressSpace,
        symbolizer: &mut symbols::Symbolizer,
        out: &mut Vec<FrameId>,
    ) {
        out.clear();
        for &a in addresses {
            let resolved = symbolizer.resolve_id(space.find(a), a);
            let i = resolved.index();
            if self.by_address.len() <= i {
                self.by_address.resize(i + 1, None);
            }
            if self.by_address[i].is_none() {
                let frames = symbolizer.frames(resolved);
                let ids = frames.iter().map(|f| self.intern(site_frame(f))).collect();
                self.by_address[i] = Some(ids);
            }
            out.extend_from_slice(self.by_address[i].as_deref().unwrap_or_default());
        }
        let allocator = out
            .iter()
            .take_while(|&&id| self.entries[id as usize].allocator)
            .count();
        out.drain(..allocator.min(out.len().saturating_sub(1)));
    }

    /// The id of `frame`, added when new.
    pub fn intern(&mut self, frame: SiteFrame) -> FrameId {
        if let Some(&id) = self.index.get(&frame) {
            return id;
        }
        let id = FrameId::try_from(self.entries.len()).expect("fewer than 2^32 distinct frames");
        let next_function = self.function_frames.len() as FunctionId;
        let function = *self
            .functions
            .entry((frame.label.clone(), frame.module.clone()))
            .or_insert(next_function);
        if function == next_function {
            self.function_frames.push(id);
        }
        let frame = Arc::new(frame);
        self.entries.push(Entry {
            allocator: is_allocator_frame(&frame),
            frame: frame.clone(),
            function,
        });
        self.index.insert(frame, id);
        id
    }

    pub fn frame(&self, id: FrameId) -> &Arc<SiteFrame> {
        &self.entries[id as usize].frame
    }

    pub fn function(&self, id: FrameId) -> FunctionId {
        self.entries[id as usize].function
    }

    /// A frame of `function` (the first met): its label and module are the function's.
    pub fn function_frame(&self, function: FunctionId) -> &SiteFrame {
        self.frame(self.function_frames[function as usize])
    }
}

/// The serialisable form of a resolved frame.
pub(crate) fn site_frame(f: &symbols::Frame) -> SiteFrame {
    SiteFrame {
        label: f.label(),
        function: f.function.clone(),
        file: f.file.clone(),
        line: f.line,
        inlined: f.inlined,
        module: f.module.to_string(),
        module_address: f.module_address,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: Option<&str>, module: &str, module_address: u64) -> SiteFrame {
        SiteFrame {
            label: function.map_or_else(|| format!("{module}+{module_address:#x}"), Into::into),
            function: function.map(Into::into),
            file: None,
            line: None,
            inlined: false,
            module: module.into(),
            module_address,
        }
    }

    /// Equal frames get one id (and one shared frame), different frames different ids, and the
    /// function id follows (label, module) only.
    #[test]
    fn equal_frames_are_one_entry() {
        let mut t = FrameTable::default();
        let a = t.intern(frame(Some("f"), "/lib/a.so", 0x10));
        let b = t.intern(frame(Some("f"), "/lib/a.so", 0x20));
        let c = t.intern(frame(Some("f"), "/lib/b.so", 0x10));
        let d = t.intern(frame(None, "/lib/a.so", 0x10));
        assert_eq!(t.intern(frame(Some("f"), "/lib/a.so", 0x10)), a);
        assert_eq!(t.intern(frame(None, "/lib/a.so", 0x10)), d);
        let mut ids = vec![a, b, c, d];
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 4);
        assert_eq!(**t.frame(b), frame(Some("f"), "/lib/a.so", 0x20));
        assert_eq!(t.function(a), t.function(b), "f in a.so at two addresses");
        assert_ne!(t.function(a), t.function(c), "f in another module");
        assert_ne!(t.function(a), t.function(d));
        let malloc = t.intern(frame(Some("malloc"), "/lib/c.so", 1));
        assert!(t.entries[malloc as usize].allocator);
        assert!(!t.entries[a as usize].allocator);
    }
}
