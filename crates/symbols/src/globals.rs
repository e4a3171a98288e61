//! Names of global variables, for the roots of a leak check: which global of a module holds
//! the pointer found at a file offset of its writable data.
use std::path::Path;

use object::read::elf::ProgramHeader;
use object::{Object, ObjectSymbol, SymbolKind};

/// The data symbol (demangled) of module `path` that covers `file_offset`, a position in its
/// writable segment as mapped (past the segment's file bytes for `.bss`), with the offset into
/// it when not at its start: `cache`, `table+0x18`. `None` when the file cannot be read or no
/// symbol covers the address (a stripped module).
pub fn global_at(path: &Path, file_offset: u64) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: a read-only private mapping; a file changed under us gives wrong names, not UB
    // that matters here (the same stance as the symbolizer's modules).
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(&*map).ok()?;
    let endian = elf.endian();
    let vaddr = elf.elf_program_headers().iter().find_map(|ph| {
        let (off, vaddr) = (ph.p_offset(endian), ph.p_vaddr(endian));
        let within = ph.p_type(endian) == object::elf::PT_LOAD
            && off <= file_offset
            && file_offset < off + ph.p_memsz(endian);
        within.then_some(vaddr + (file_offset - off))
    })?;
    let symbol = elf
        .symbols()
        .chain(elf.dynamic_symbols())
        .filter(|s| {
            matches!(
                s.kind(),
                SymbolKind::Data | SymbolKind::Tls | SymbolKind::Unknown
            )
        })
        .find(|s| s.address() <= vaddr && vaddr < s.address() + s.size().max(1))?;
    let name = crate::demangle(symbol.name().ok()?);
    Some(match vaddr - symbol.address() {
        0 => name,
        d => format!("{name}+{d:#x}"),
    })
}
