//! Offline symbolisation of recorded return addresses.
//!
//! A traced program records raw return addresses and the modules it had mapped (path, build-id, load
//! address, file offset); nothing is symbolised inside it. This crate turns such an address, later and
//! on the same machine, into frames: the function's demangled name (C++ and Rust), the functions inlined
//! at that point (innermost first), `file:line` where DWARF has it, and `module+0xADDR` where neither
//! DWARF nor a symbol table names the function. Each module is loaded once ([`Symbolizer`] caches it and
//! every address it resolved); separate debug files are found by build-id and debuglink under the debug
//! roots (`/usr/lib/debug` by default), as gdb and binutils look for them. A module whose file on disk no
//! longer has the recorded build-id is not symbolised (its names would be another build's) and gives a
//! [`Warning`].
//!
//! The crate does not depend on the trace format: callers describe a mapping with [`Mapping`].
mod demangle;
mod elf_module;
mod frame;
mod globals;
mod symbolizer;

pub use demangle::demangle;
pub use frame::Frame;
pub use globals::global_at;
pub use symbolizer::{AddressSpace, Mapping, ResolvedId, Symbolizer, Warning};
