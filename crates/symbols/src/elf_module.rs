//! One ELF module loaded for symbolisation: its load segments, its DWARF (from the file itself or a
//! separate debug file) and its symbol tables, all owned so the module can be cached.

use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

use crate::demangle::demangle;

type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// A PT_LOAD segment: which file bytes appear at which virtual address.
struct Segment {
    file_offset: u64,
    file_size: u64,
    address: u64,
}

/// A function symbol of `.symtab` or `.dynsym`, for addresses DWARF does not cover.
struct Symbol {
    address: u64,
    size: u64,
    name: String,
}

/// A frame before it is tied to its module: demangled name, file, line, inlined.
pub(crate) struct RawFrame {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub inlined: bool,
}

pub(crate) struct ElfModule {
    segments: Vec<Segment>,
    pub build_id: Option<Vec<u8>>,
    dwarf: Option<addr2line::Context<Reader>>,
    /// Sorted by address.
    symbols: Vec<Symbol>,
}

impl ElfModule {
    /// Read `path`, and its separate debug file under one of `debug_roots` if the file has no DWARF.
    pub fn open(path: &Path, debug_roots: &[PathBuf]) -> Result<ElfModule, String> {
        let data = map(path)?;
        let object = object::File::parse(&*data).map_err(|e| format!("not an ELF file ({e})"))?;
        let build_id = object.build_id().ok().flatten().map(<[u8]>::to_vec);
        let segments = object
            .segments()
            .filter_map(|s| {
                let (file_offset, file_size) = s.file_range();
                (file_size > 0).then(|| Segment {
                    file_offset,
                    file_size,
                    address: s.address(),
                })
            })
            .collect();
        let mut symbols = Vec::new();
        collect_symbols(&object, &mut symbols);

        let mut dwarf = None;
        if has_dwarf(&object) {
            dwarf = load_dwarf(&object, path, debug_roots);
        } else if let Some(debug_path) =
            find_debug_file(&object, path, build_id.as_deref(), debug_roots)
        {
            if let Ok(debug_data) = map(&debug_path) {
                if let Ok(debug) = object::File::parse(&*debug_data) {
                    collect_symbols(&debug, &mut symbols);
                    dwarf = load_dwarf(&debug, &debug_path, debug_roots);
                }
            }
        }
        symbols.sort_by_key(|s| (s.address, std::cmp::Reverse(s.size)));
        symbols.dedup_by_key(|s| s.address);
        Ok(ElfModule {
            segments,
            build_id,
            dwarf,
            symbols,
        })
    }

    /// The virtual address at which the byte at `file_offset` of the file is loaded.
    pub fn address_of_file_offset(&self, file_offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| file_offset >= s.file_offset && file_offset - s.file_offset < s.file_size)
            .map(|s| file_offset - s.file_offset + s.address)
    }

    /// The frames at virtual address `probe`, innermost first; empty when nothing names it.
    pub fn frames(&self, probe: u64) -> Vec<RawFrame> {
        let mut out = Vec::new();
        if let Some(ctx) = &self.dwarf {
            if let Ok(mut iter) = ctx.find_frames(probe).skip_all_loads() {
                while let Ok(Some(frame)) = iter.next() {
                    let function = frame
                        .function
                        .as_ref()
                        .and_then(|f| f.raw_name().ok())
                        .map(|name| demangle(name.as_ref()));
                    let (file, line) = match &frame.location {
                        Some(loc) => (loc.file.map(str::to_string), loc.line),
                        None => (None, None),
                    };
                    out.push(RawFrame {
                        function,
                        file,
                        line,
                        inlined: true,
                    });
                }
            }
        }
        if let Some(outer) = out.last_mut() {
            outer.inlined = false;
            if outer.function.is_none() {
                outer.function = self.symbol_at(probe).map(demangle);
            }
        } else if let Some(name) = self.symbol_at(probe) {
            out.push(RawFrame {
                function: Some(demangle(name)),
                file: None,
                line: None,
                inlined: false,
            });
        }
        out
    }

    fn symbol_at(&self, probe: u64) -> Option<&str> {
        let i = self
            .symbols
            .partition_point(|s| s.address <= probe)
            .checked_sub(1)?;
        let s = &self.symbols[i];
        (s.size == 0 || probe - s.address < s.size).then_some(s.name.as_str())
    }
}

fn map(path: &Path) -> Result<memmap2::Mmap, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    // SAFETY: the mapping is read-only and private; a file truncated under us could fault, which is
    // the same risk every debugger and addr2line take with the files they read.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| e.to_string())
}

fn has_dwarf(object: &object::File) -> bool {
    object
        .section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
}

fn collect_symbols(object: &object::File, out: &mut Vec<Symbol>) {
    for sym in object.symbols().chain(object.dynamic_symbols()) {
        if sym.kind() != SymbolKind::Text || sym.is_undefined() || sym.address() == 0 {
            continue;
        }
        if let Ok(name) = sym.name() {
            // Demangled when an address resolves to it: a large program exports tens of thousands.
            out.push(Symbol {
                address: sym.address(),
                size: sym.size(),
                name: name.to_string(),
            });
        }
    }
}

fn load_dwarf(
    object: &object::File,
    path: &Path,
    debug_roots: &[PathBuf],
) -> Option<addr2line::Context<Reader>> {
    let endian = if object.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let mut dwarf = gimli::Dwarf::load(|id| section(object, id.name(), endian)).ok()?;
    // dwz puts what several debug files share into a supplementary file (Debian's /usr/lib/debug/.dwz).
    if let Ok(Some((name, alt_build_id))) = object.gnu_debugaltlink() {
        let name = std::str::from_utf8(name).ok()?;
        let named = path.parent().map(|dir| dir.join(name));
        let candidates = named
            .into_iter()
            .chain(debug_roots.iter().map(|r| build_id_path(r, alt_build_id)));
        for candidate in candidates {
            let Ok(data) = map(&candidate) else { continue };
            let Ok(sup) = object::File::parse(&*data) else {
                continue;
            };
            if dwarf
                .load_sup(|id| section(&sup, id.name(), endian))
                .is_ok()
            {
                break;
            }
        }
    }
    addr2line::Context::from_dwarf(dwarf).ok()
}

fn section(
    object: &object::File,
    name: &str,
    endian: gimli::RunTimeEndian,
) -> Result<Reader, gimli::Error> {
    let data: Cow<[u8]> = match object.section_by_name(name) {
        Some(s) => s.uncompressed_data().unwrap_or(Cow::Borrowed(&[])),
        None => Cow::Borrowed(&[]),
    };
    Ok(gimli::EndianArcSlice::new(Arc::from(&*data), endian))
}

/// `ROOT/.build-id/xx/yyyy.debug`, where Debian's -dbgsym packages and gdb put separate debug files.
fn build_id_path(root: &Path, build_id: &[u8]) -> PathBuf {
    let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
    let (head, tail) = hex.split_at(2.min(hex.len()));
    root.join(".build-id")
        .join(head)
        .join(format!("{tail}.debug"))
}

/// A separate debug file for `object`: by build-id under each debug root, then by `.gnu_debuglink` next
/// to the file, in its `.debug/` folder and under each root (gdb's order). A candidate with another
/// build-id is skipped.
fn find_debug_file(
    object: &object::File,
    path: &Path,
    build_id: Option<&[u8]>,
    debug_roots: &[PathBuf],
) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(id) = build_id {
        candidates.extend(debug_roots.iter().map(|r| build_id_path(r, id)));
    }
    if let (Ok(Some((name, _crc))), Some(dir)) = (object.gnu_debuglink(), path.parent()) {
        if let Ok(name) = std::str::from_utf8(name) {
            candidates.push(dir.join(name));
            candidates.push(dir.join(".debug").join(name));
            let relative = dir.strip_prefix("/").unwrap_or(dir);
            candidates.extend(debug_roots.iter().map(|r| r.join(relative).join(name)));
        }
    }
    candidates.into_iter().find(|candidate| {
        if candidate == path || !candidate.is_file() {
            return false;
        }
        let Some(id) = build_id else { return true };
        let Ok(data) = map(candidate) else {
            return false;
        };
        let Ok(debug) = object::File::parse(&*data) else {
            return false;
        };
        debug.build_id().ok().flatten() == Some(id)
    })
}
