//! Just enough ELF header reading to tell a preloadable library from anything else.

use std::io::Read;
use std::path::Path;

const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];
const EI_CLASS: usize = 4;
const ELFCLASS32: u8 = 1;
const ELFCLASS64: u8 = 2;

/// Why a file is not an ELF object this process could preload into its children.
pub fn check_elf(path: &Path) -> Result<(), String> {
    let mut header = [0u8; 5];
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    file.read_exact(&mut header)
        .map_err(|_| "file shorter than an ELF header".to_string())?;
    if header[..4] != ELF_MAGIC {
        return Err("no ELF magic at the start".to_string());
    }
    // A 32-bit library would be skipped by the loader of a 64-bit program (and vice versa)
    // with a mere warning, so the variant would silently run on glibc.
    let expected = if cfg!(target_pointer_width = "64") {
        ELFCLASS64
    } else {
        ELFCLASS32
    };
    if header[EI_CLASS] != expected {
        return Err(format!(
            "ELF class {} does not match this {}-bit system",
            header[EI_CLASS],
            usize::BITS
        ));
    }
    Ok(())
}
