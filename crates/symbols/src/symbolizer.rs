//! The cache of loaded modules and resolved addresses, and the warnings about modules.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hashbrown::HashMap;

use crate::elf_module::ElfModule;
use crate::frame::Frame;

/// One mapping of a module in the traced process, as recorded: the file's bytes from `file_offset` on
/// were mapped at `start..end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub path: String,
    pub build_id: Option<Vec<u8>>,
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    /// The load bias when it was recorded (the dynamic linker's `l_addr`): address `a` is the file's
    /// virtual address `a - bias`. Without it, the address goes through the file offset and the
    /// file's load segments (right for one mapping as /proc/PID/maps lists it).
    pub bias: Option<u64>,
}

/// The mappings of one process image, to find the one an address falls in.
#[derive(Debug, Clone, Default)]
pub struct AddressSpace {
    /// Sorted by start, without overlaps.
    mappings: Vec<Mapping>,
}

impl AddressSpace {
    /// `mappings` in the order they were seen: where two overlap, the later one was mapped over the
    /// earlier (a library unloaded and another loaded in its place) and is kept.
    pub fn new(mappings: Vec<Mapping>) -> AddressSpace {
        let mut kept: Vec<Mapping> = Vec::with_capacity(mappings.len());
        for m in mappings {
            kept.retain(|k| k.end <= m.start || m.end <= k.start);
            kept.push(m);
        }
        kept.sort_by_key(|m| m.start);
        AddressSpace { mappings: kept }
    }

    /// The mapping that contains `address`.
    pub fn find(&self, address: u64) -> Option<&Mapping> {
        let i = self.mappings.partition_point(|m| m.start <= address);
        i.checked_sub(1)
            .map(|i| &self.mappings[i])
            .filter(|m| address < m.end)
    }
}

/// Something about a module that makes its frames less than fully named; each is given once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// The file could not be read; its frames are shown as module+offset.
    Unreadable { path: String, reason: String },
    /// The file on disk is not the one that was mapped (another build-id): its frames are shown as
    /// module+offset rather than with another build's names.
    Changed {
        path: String,
        recorded: String,
        on_disk: Option<String>,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Unreadable { path, reason } => {
                write!(f, "cannot read '{path}' for its symbols ({reason}): its frames are shown as module+offset")
            }
            Warning::Changed { path, recorded, on_disk } => write!(
                f,
                "'{path}' changed since it was recorded (build-id {recorded}, now {}): its frames are shown as \
                 module+offset; symbolise on the machine and build that were traced",
                on_disk.as_deref().unwrap_or("none")
            ),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Resolves return addresses into frames, loading each module once and remembering every address.
pub struct Symbolizer {
    debug_roots: Vec<PathBuf>,
    /// (path, recorded build-id) -> index into `modules`.
    module_index: HashMap<(String, Option<Vec<u8>>), usize>,
    modules: Vec<(Arc<str>, Option<ElfModule>)>,
    /// (module index, module address of the return address) -> its frames' place in `frames`.
    resolved: HashMap<(usize, u64), ResolvedId>,
    frames: Vec<Arc<[Frame]>>,
    warnings: Vec<Warning>,
}

/// The frames of one resolved return address, as a dense index: every return address at the same
/// module address of the same module (path and build-id) gets the same id, wherever the module was
/// loaded, and different ones get different ids. Callers keep per-address state in a vector by
/// `index()` instead of hashing the frames' names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResolvedId(u32);

impl ResolvedId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The module index of addresses outside every recorded module (their frames depend on the address
/// only).
const NO_MODULE: usize = usize::MAX;

impl Default for Symbolizer {
    fn default() -> Self {
        Symbolizer::new(vec![PathBuf::from("/usr/lib/debug")])
    }
}

impl Symbolizer {
    /// A symbolizer looking for separate debug files under `debug_roots` (`/usr/lib/debug` by default).
    pub fn new(debug_roots: Vec<PathBuf>) -> Symbolizer {
        Symbolizer {
            debug_roots,
            module_index: HashMap::new(),
            modules: Vec::new(),
            resolved: HashMap::new(),
            frames: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// The frames of return address `address` (absolute, in the traced process), innermost first, never
    /// empty. `mapping` is the mapping that contains it (`None`: outside every recorded module). The
    /// lookup is done at `address - 1`, inside the call instruction, so the line is the call's even when
    /// the call is a function's last instruction.
    pub fn resolve(&mut self, mapping: Option<&Mapping>, address: u64) -> Arc<[Frame]> {
        let id = self.resolve_id(mapping, address);
        self.frames[id.index()].clone()
    }

    /// `resolve`'s frames of `address`, as the id of their place in this symbolizer (`frames`).
    pub fn resolve_id(&mut self, mapping: Option<&Mapping>, address: u64) -> ResolvedId {
        let Some(mapping) = mapping.filter(|m| (m.start..m.end).contains(&address)) else {
            return self.remember((NO_MODULE, address), || {
                vec![Frame {
                    function: None,
                    file: None,
                    line: None,
                    inlined: false,
                    module: Arc::from("[unknown]"),
                    module_address: address,
                }]
            });
        };
        let module = self.module(mapping);
        let file_offset = address - mapping.start + mapping.file_offset;
        let (path, elf) = &self.modules[module];
        // The return address in the file's own address space; the file offset if the file is unusable.
        let in_module = match (mapping.bias, elf) {
            (Some(bias), _) => Some(address.wrapping_sub(bias)),
            (None, Some(elf)) => elf.address_of_file_offset(file_offset),
            (None, None) => None,
        };
        let module_address = in_module.unwrap_or(file_offset);
        let key = (module, module_address);
        if let Some(&id) = self.resolved.get(&key) {
            return id;
        }
        let raw = match (elf, in_module) {
            (Some(elf), Some(a)) => elf.frames(a.saturating_sub(1)),
            _ => Vec::new(),
        };
        let frames: Arc<[Frame]> = if raw.is_empty() {
            Arc::from(vec![Frame {
                function: None,
                file: None,
                line: None,
                inlined: false,
                module: path.clone(),
                module_address,
            }])
        } else {
            raw.into_iter()
                .map(|r| Frame {
                    function: r.function,
                    file: r.file,
                    line: r.line,
                    inlined: r.inlined,
                    module: path.clone(),
                    module_address,
                })
                .collect()
        };
        self.insert(key, frames)
    }

    /// The frames `resolve_id` gave `id`.
    pub fn frames(&self, id: ResolvedId) -> &Arc<[Frame]> {
        &self.frames[id.index()]
    }

    fn remember(&mut self, key: (usize, u64), frames: impl FnOnce() -> Vec<Frame>) -> ResolvedId {
        match self.resolved.get(&key) {
            Some(&id) => id,
            None => self.insert(key, Arc::from(frames())),
        }
    }

    fn insert(&mut self, key: (usize, u64), frames: Arc<[Frame]>) -> ResolvedId {
        let id = ResolvedId(
            u32::try_from(self.frames.len()).expect("fewer than 2^32 distinct return addresses"),
        );
        self.frames.push(frames);
        self.resolved.insert(key, id);
        id
    }

    /// What made some frames less than fully named, one entry per module, in the order met.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    fn module(&mut self, mapping: &Mapping) -> usize {
        let key = (mapping.path.clone(), mapping.build_id.clone());
        if let Some(&i) = self.module_index.get(&key) {
            return i;
        }
        let elf = match ElfModule::open(Path::new(&mapping.path), &self.debug_roots) {
            // `[vdso]` and other mappings without a file: nothing to read, nothing to warn about.
            Err(_) if !mapping.path.starts_with('/') => None,
            Err(reason) => {
                self.warnings.push(Warning::Unreadable {
                    path: mapping.path.clone(),
                    reason,
                });
                None
            }
            Ok(elf) => match &mapping.build_id {
                Some(recorded) if elf.build_id.as_ref() != Some(recorded) => {
                    self.warnings.push(Warning::Changed {
                        path: mapping.path.clone(),
                        recorded: hex(recorded),
                        on_disk: elf.build_id.as_deref().map(hex),
                    });
                    None
                }
                _ => Some(elf),
            },
        };
        self.modules.push((Arc::from(mapping.path.as_str()), elf));
        self.module_index.insert(key, self.modules.len() - 1);
        self.modules.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(path: &str, start: u64, end: u64) -> Mapping {
        Mapping {
            path: path.into(),
            build_id: None,
            start,
            end,
            file_offset: 0,
            bias: None,
        }
    }

    #[test]
    fn a_later_mapping_replaces_the_one_it_overlaps() {
        let space = AddressSpace::new(vec![
            m("a", 0x1000, 0x3000),
            m("b", 0x5000, 0x6000),
            m("c", 0x2000, 0x4000),
        ]);
        assert_eq!(space.find(0x1500), None, "a was unmapped when c came");
        assert_eq!(space.find(0x2500).unwrap().path, "c");
        assert_eq!(space.find(0x5fff).unwrap().path, "b");
        assert_eq!(space.find(0x6000), None);
        assert_eq!(space.find(0x10), None);
    }

    /// The ids are the interner's promise: one per (module, module address) wherever the module was
    /// loaded, distinct otherwise, and `frames(id)` the frames `resolve` gives.
    #[test]
    fn a_return_address_gets_one_id_per_module_address() {
        let at = |path: &str, start: u64| Mapping {
            bias: Some(start),
            ..m(path, start, start + 0x1000)
        };
        let (first, second, other) = (at("a", 0x1000), at("a", 0x7000), at("b", 0x3000));
        let mut s = Symbolizer::new(Vec::new());
        let id = s.resolve_id(Some(&first), 0x1500);
        assert_eq!(s.resolve_id(Some(&first), 0x1500), id);
        assert_eq!(
            s.resolve_id(Some(&second), 0x7500),
            id,
            "a loaded elsewhere"
        );
        assert_eq!(s.frames(id)[0].module_address, 0x500);
        let distinct = [
            id,
            s.resolve_id(Some(&first), 0x1501),
            s.resolve_id(Some(&other), 0x3500),
            s.resolve_id(None, 0x1500),
            s.resolve_id(None, 0x7500),
        ];
        let mut sorted: Vec<usize> = distinct.iter().map(|i| i.index()).collect();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), distinct.len(), "{distinct:?}");
        assert_eq!(s.resolve_id(None, 0x7500), distinct[4]);
        assert_eq!(s.resolve(Some(&second), 0x7500), s.frames(id).clone());
        assert_eq!(s.frames(distinct[3])[0].module.as_ref(), "[unknown]");
        assert_eq!(s.frames(distinct[2])[0].module.as_ref(), "b");
    }
}
