//! The root set of a stopped process, as LeakSanitizer takes it (`lsan_common.cpp`): the
//! writable data of every module (`.data`, `.bss`), each thread's stack from its stack pointer
//! up, its static TLS, and its registers; and, as memcheck scans them, the anonymous private
//! mappings that hold no heap block (a runtime's arenas, the dynamic loader's early memory), which
//! LSan leaves out.
use std::io;

use crate::threads::Thread;

/// What holds a reachable block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Root {
    /// Writable data of a module: its path, the global's symbol when the module's symbol table
    /// names one, and the ELF virtual address the pointer is at (`offset`).
    Global {
        module: String,
        symbol: Option<String>,
        offset: u64,
    },
    /// A thread's stack, between its stack pointer and the stack's top.
    Stack { tid: u32 },
    /// A thread's static TLS.
    Tls { tid: u32 },
    /// A thread's general registers.
    Registers { tid: u32 },
    /// Anonymous private memory holding no heap block: a runtime's own arenas (pymalloc), the
    /// dynamic loader's early allocations, a program's `mmap`.
    Anonymous { start: u64 },
}

impl std::fmt::Display for Root {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Root::Global {
                module,
                symbol: Some(s),
                ..
            } => write!(f, "global {s} in {module}"),
            Root::Global { module, offset, .. } => write!(f, "global at {offset:#x} in {module}"),
            Root::Stack { tid } => write!(f, "stack of thread {tid}"),
            Root::Tls { tid } => write!(f, "TLS of thread {tid}"),
            Root::Registers { tid } => write!(f, "registers of thread {tid}"),
            Root::Anonymous { start } => write!(f, "anonymous memory at {start:#x}"),
        }
    }
}

/// A range of root memory; `root` indexes `Roots::names`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootRegion {
    pub start: u64,
    pub end: u64,
    pub root: usize,
    /// For a module's data: the file offset `start` stands for (past the file's end for
    /// `.bss`), so that a root word's global can be named (`Roots::file_offset`).
    pub file_offset: Option<u64>,
}

impl RootRegion {
    fn with_start(self, start: u64) -> RootRegion {
        RootRegion { start, ..self }
    }
}

/// glibc's chunk of a block it mapped on its own: `(start, end)` of the mapping.
fn mapped_chunk(addr: u64, size: u64, mem: &mut dyn crate::Memory) -> Option<(u64, u64)> {
    const PAGE: u64 = 4096;
    const IS_MMAPPED: u64 = 2;
    let start = addr.checked_sub(16)?;
    let mut word = [0u8; 8];
    if mem.read(addr - 8, &mut word) != 8 {
        return None;
    }
    let field = u64::from_ne_bytes(word);
    let chunk = field & !7;
    let ours = field & IS_MMAPPED != 0
        && start.is_multiple_of(PAGE)
        && chunk.is_multiple_of(PAGE)
        && chunk >= size + 16;
    ours.then_some((start, start + chunk))
}

/// The roots of a process: memory ranges and register values, each with its name. A module's
/// data is one region per mapping, named for the module; `name_globals` later names the
/// global each reachable block hangs from.
#[derive(Debug, Default)]
pub struct Roots {
    pub names: Vec<Root>,
    pub regions: Vec<RootRegion>,
    pub values: Vec<(u64, usize)>,
    /// The readable mappings of files (start, end, executable), sorted: where memcheck's
    /// multiple-inheritance heuristic looks for vtables and the code they point to.
    pub file_mappings: Vec<(u64, u64, bool)>,
}

impl Roots {
    /// Removes the heaps from the anonymous regions: a region holding a block of the allocator's
    /// heaps is dropped (its free chunks keep stale pointers); a block glibc mapped on its own
    /// (`IS_MMAPPED` in its chunk's size field, the chunk a whole number of pages from a page
    /// start) is cut out, as the kernel may have merged its mapping with its neighbours' (a
    /// pymalloc arena). `blocks`: (address, size), sorted by address.
    pub fn without_heaps(&mut self, blocks: &[(u64, u64)], mem: &mut dyn crate::Memory) {
        let mut kept = Vec::with_capacity(self.regions.len());
        for r in std::mem::take(&mut self.regions) {
            if !matches!(self.names[r.root], Root::Anonymous { .. }) {
                kept.push(r);
                continue;
            }
            let first = blocks.partition_point(|&(a, _)| a < r.start);
            let inside = blocks[first..].iter().take_while(|&&(a, _)| a < r.end);
            let mut cuts = Vec::new();
            let mut heap = false;
            for &(addr, size) in inside {
                match mapped_chunk(addr, size, mem) {
                    Some(range) => cuts.push(range),
                    None => {
                        heap = true;
                        break;
                    }
                }
            }
            if heap {
                continue;
            }
            let mut at = r.start;
            for (start, end) in cuts {
                if start > at {
                    kept.push(RootRegion {
                        end: start,
                        ..r.with_start(at)
                    });
                }
                at = at.max(end);
            }
            if at < r.end {
                kept.push(r.with_start(at));
            }
        }
        self.regions = kept;
    }

    /// The module file offset of root word `at` of root `root` (a global), for its symbol.
    pub fn file_offset(&self, root: usize, at: u64) -> Option<u64> {
        self.regions
            .iter()
            .find(|r| r.root == root && r.start <= at && at < r.end)
            .and_then(|r| Some(r.file_offset? + (at - r.start)))
    }
}

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone)]
struct Mapping {
    start: u64,
    end: u64,
    readable: bool,
    writable: bool,
    executable: bool,
    private: bool,
    file_offset: u64,
    /// The file, `[stack]`, `[heap]`, ... or empty for anonymous memory.
    path: String,
}

fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
            let (_dev, _inode) = (f.next()?, f.next()?);
            let path = f.collect::<Vec<_>>().join(" ");
            let (s, e) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                readable: perms.as_bytes().first() == Some(&b'r'),
                writable: perms.as_bytes().get(1) == Some(&b'w'),
                executable: perms.as_bytes().get(2) == Some(&b'x'),
                private: perms.as_bytes().get(3) == Some(&b'p'),
                file_offset: u64::from_str_radix(offset, 16).ok()?,
                path,
            })
        })
        .collect()
}

/// Most static TLS of a thread read below its thread pointer (x86-64 keeps the TLS blocks
/// below the thread control block, which the pointer addresses).
const STATIC_TLS_BELOW: u64 = 64 << 10;
/// The thread control block above the thread pointer (glibc's `struct pthread`, about 2.3 KiB).
const TCB_ABOVE: u64 = 4 << 10;
/// The red zone below the stack pointer that leaf functions may use without moving it.
const RED_ZONE: u64 = 128;

/// The roots of process `pid`, stopped, whose threads are `threads`.
pub fn find_roots(pid: u32, threads: &[Thread]) -> io::Result<Roots> {
    let maps = parse_maps(&std::fs::read_to_string(format!("/proc/{pid}/maps"))?);
    Ok(roots_of(&maps, threads))
}

fn roots_of(maps: &[Mapping], threads: &[Thread]) -> Roots {
    let mut roots = Roots {
        file_mappings: maps
            .iter()
            .filter(|m| m.readable && m.path.starts_with('/'))
            .map(|m| (m.start, m.end, m.executable))
            .collect(),
        ..Roots::default()
    };
    let containing = |addr: u64| maps.iter().find(|m| m.start <= addr && addr < m.end);
    for t in threads {
        let regs = roots.names.len();
        roots.names.push(Root::Registers { tid: t.tid });
        roots.values.extend(t.registers.iter().map(|&r| (r, regs)));
        if let Some(stack) = containing(t.stack_pointer) {
            roots.names.push(Root::Stack { tid: t.tid });
            roots.regions.push(RootRegion {
                start: t.stack_pointer.saturating_sub(RED_ZONE).max(stack.start),
                end: stack.end,
                root: roots.names.len() - 1,
                file_offset: None,
            });
        }
        if let Some(tls) = t
            .thread_pointer
            .and_then(|tp| containing(tp).map(|m| (tp, m)))
        {
            let (tp, m) = tls;
            // Never below the stack pointer when the TLS shares the thread's stack mapping:
            // what lies below is dead stack.
            let floor = if m.start <= t.stack_pointer && t.stack_pointer < m.end {
                t.stack_pointer
            } else {
                m.start
            };
            roots.names.push(Root::Tls { tid: t.tid });
            roots.regions.push(RootRegion {
                start: tp.saturating_sub(STATIC_TLS_BELOW).max(floor),
                end: (tp + TCB_ABOVE).min(m.end),
                root: roots.names.len() - 1,
                file_offset: None,
            });
        }
    }
    for (i, m) in maps.iter().enumerate() {
        if !m.writable {
            continue;
        }
        let holds_a_stack = threads
            .iter()
            .any(|t| m.start <= t.stack_pointer && t.stack_pointer < m.end);
        let after_a_module = i > 0 && {
            let prev = &maps[i - 1];
            prev.end == m.start && prev.writable && prev.path.starts_with('/')
        };
        if m.private && m.path.is_empty() && !holds_a_stack && !after_a_module {
            roots.names.push(Root::Anonymous { start: m.start });
            roots.regions.push(RootRegion {
                start: m.start,
                end: m.end,
                root: roots.names.len() - 1,
                file_offset: None,
            });
            continue;
        }
        // A module's writable segment, or the anonymous `.bss` right after it.
        let module = if m.path.starts_with('/') {
            Some(m)
        } else if m.path.is_empty() && i > 0 {
            let prev = &maps[i - 1];
            (prev.end == m.start && prev.writable && prev.path.starts_with('/')).then_some(prev)
        } else {
            None
        };
        let Some(module) = module else { continue };
        if module.path.starts_with("/dev/") || module.path.starts_with("/memfd:") {
            continue; // shared memory (the recorder's rings among them), not a module
        }
        roots.names.push(Root::Global {
            module: module.path.clone(),
            symbol: None,
            offset: 0,
        });
        roots.regions.push(RootRegion {
            start: m.start,
            end: m.end,
            root: roots.names.len() - 1,
            file_offset: Some(module.file_offset + (m.start - module.start)),
        });
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0000000-55d0c0001000 r--p 00000000 08:01 100 /usr/bin/prog
55d0c0003000-55d0c0004000 rw-p 00002000 08:01 100 /usr/bin/prog
55d0c0004000-55d0c0005000 rw-p 00000000 00:00 0
55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000001000 rw-s 00000000 00:01 7 /memfd:alloclens-ring (deleted)
7f0000100000-7f0000200000 rw-p 00000000 00:00 0
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]
";

    #[test]
    fn roots_are_modules_data_and_bss_stacks_from_sp_tls_and_registers() {
        let maps = parse_maps(MAPS);
        let main = Thread {
            tid: 7,
            registers: vec![1, 2],
            stack_pointer: 0x7ffc00010000,
            thread_pointer: Some(0x7f0000180000),
        };
        let roots = roots_of(&maps, &[main]);
        let regions: Vec<(u64, u64, &Root)> = roots
            .regions
            .iter()
            .map(|r| (r.start, r.end, &roots.names[r.root]))
            .collect();
        let prog = Root::Global {
            module: "/usr/bin/prog".into(),
            symbol: None,
            offset: 0,
        };
        assert_eq!(
            regions,
            vec![
                (
                    0x7ffc00010000 - 128,
                    0x7ffc00021000,
                    &Root::Stack { tid: 7 }
                ),
                (
                    0x7f0000180000 - (64 << 10),
                    0x7f0000181000,
                    &Root::Tls { tid: 7 }
                ),
                (0x55d0c0003000, 0x55d0c0004000, &prog),
                (0x55d0c0004000, 0x55d0c0005000, &prog),
                (
                    0x7f0000100000,
                    0x7f0000200000,
                    &Root::Anonymous {
                        start: 0x7f0000100000
                    }
                ),
            ]
        );
        assert_eq!(roots.values, vec![(1, 0), (2, 0)]);
        // An anonymous mapping that holds a heap block is a heap, not a root.
        let mut without = roots_of(&maps, &[]);
        let before = without.regions.len();
        let mut nothing = crate::memory::BufferMemory {
            base: 0,
            bytes: Vec::new(),
        };
        without.without_heaps(&[(0x7f0000100040, 16)], &mut nothing);
        assert_eq!(without.regions.len(), before - 1);
        // The .bss continues the data segment's file offsets.
        let bss = roots.regions[3];
        assert_eq!(roots.file_offset(bss.root, 0x55d0c0004010), Some(0x3010));
    }
}
