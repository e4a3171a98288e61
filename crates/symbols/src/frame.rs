//! One resolved frame.

use std::path::Path;
use std::sync::Arc;

/// One frame of a resolved return address. An address inside inlined code gives several frames,
/// innermost first: each inlined function (`inlined` true, its `file:line` is where it was executing),
/// then the function it was inlined into (whose `file:line` is the call site of the inlined code).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Demangled function name; `None` when neither DWARF nor a symbol table names it.
    pub function: Option<String>,
    /// Source file (as DWARF gives it, usually absolute) and line, where DWARF has them.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// This function was inlined into the next frame.
    pub inlined: bool,
    /// Path of the module (executable or shared library) the address is in.
    pub module: Arc<str>,
    /// The return address in the module's own address space (the ELF virtual address, which
    /// `addr2line -e MODULE` and `objdump -d` take); the file offset when the file could not be read.
    pub module_address: u64,
}

impl Frame {
    /// The function name, or `module+0xADDR` (module's file name) when it has none.
    pub fn label(&self) -> String {
        match &self.function {
            Some(name) => name.clone(),
            None => format!("{}+{:#x}", self.module_name(), self.module_address),
        }
    }

    /// The module's file name (`libc.so.6`), or its path when it has none.
    pub fn module_name(&self) -> &str {
        Path::new(&*self.module)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(&self.module)
    }

    /// `file:line` (file name only) where DWARF has it.
    pub fn location(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        let name = Path::new(file)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(file);
        Some(match self.line {
            Some(line) => format!("{name}:{line}"),
            None => name.to_string(),
        })
    }
}
