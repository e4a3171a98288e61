//! Symbol addresses in a mapped module, from its ELF dynamic symbol table (the exported functions
//! alloclens calls or watches: dlopen, malloc, free, the library's entry).

use object::{Object, ObjectSegment, ObjectSymbol};

/// The load bias of a module: where its first loadable segment's page is mapped, less that
/// segment's virtual address (0 for nearly every shared library).
fn first_load_vaddr(file: &object::File) -> u64 {
    file.segments()
        .map(|s| s.address())
        .min()
        .map_or(0, |a| a & !0xfff)
}

/// The run-time address of the exported function `name` of a module mapped at `base` (the start
/// of its file offset 0), or None when it does not export it.
pub fn function_address(image: &[u8], base: u64, name: &str) -> Option<u64> {
    // The ELF reader casts headers in place, which needs them aligned: a library carried in the
    // binary (include_bytes!) is aligned to 1 byte only.
    let aligned: Vec<u64>;
    let image = if (image.as_ptr() as usize).is_multiple_of(8) {
        image
    } else {
        let mut words = vec![0u64; image.len().div_ceil(8)];
        // SAFETY: the words' bytes are a plain byte buffer at least as long as `image`.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, words.len() * 8)
        };
        bytes[..image.len()].copy_from_slice(image);
        aligned = words;
        // SAFETY: as above, read-only now.
        unsafe { std::slice::from_raw_parts(aligned.as_ptr() as *const u8, image.len()) }
    };
    let file = object::File::parse(image).ok()?;
    let bias = base.wrapping_sub(first_load_vaddr(&file));
    file.dynamic_symbols()
        .filter(|s| s.is_definition() && s.kind() == object::SymbolKind::Text)
        .find(|s| s.name() == Ok(name))
        .map(|s| bias.wrapping_add(s.address()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Our own libc's malloc, found from its file and its mapping, is the address the dynamic
    /// loader gave us.
    #[test]
    fn the_address_of_malloc_in_our_own_libc_is_the_one_we_call() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let modules = crate::process::parse_maps(&maps);
        let libc = modules
            .iter()
            .find(|m| m.file_name().starts_with("libc.so"))
            .expect("libc mapped");
        let image = std::fs::read(&libc.path).unwrap();
        let found = function_address(&image, libc.base, "malloc").unwrap();
        // SAFETY: dlsym with a NUL-terminated name.
        let real = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr()) } as u64;
        // Our process may have another malloc first in line (a preloaded allocator): compare with
        // libc's own then.
        let libc_malloc = {
            // SAFETY: dlopen of a library already loaded, NOLOAD.
            let h = unsafe {
                libc::dlopen(
                    std::ffi::CString::new(libc.path.clone()).unwrap().as_ptr(),
                    libc::RTLD_NOW | libc::RTLD_NOLOAD,
                )
            };
            assert!(!h.is_null());
            unsafe { libc::dlsym(h, c"malloc".as_ptr()) as u64 }
        };
        assert_eq!(found, libc_malloc);
        assert_ne!(real, 0);
        assert!(function_address(&image, libc.base, "no_such_function_here").is_none());
    }
}
