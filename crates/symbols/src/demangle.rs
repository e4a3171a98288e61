//! Readable function names from linkage names.

/// The readable form of a linkage name: Rust (legacy and v0, without the hash), then C++ (Itanium ABI),
/// else the name unchanged (C).
pub fn demangle(name: &str) -> String {
    if let Ok(rust) = rustc_demangle::try_demangle(name) {
        // `{:#}` leaves out the legacy hash suffix (`::h0123...`), which only tells builds apart.
        return format!("{rust:#}");
    }
    if name.starts_with("_Z") {
        if let Ok(symbol) = cpp_demangle::Symbol::new(name) {
            if let Ok(readable) = symbol.demangle(&cpp_demangle::DemangleOptions::default()) {
                return readable;
            }
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn cpp_rust_and_c_names() {
        assert_eq!(demangle("_ZN2ns6Widget5buildEi"), "ns::Widget::build(int)");
        assert_eq!(
            demangle("_ZN3std2rt10lang_start17h0123456789abcdefE"),
            "std::rt::lang_start"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
        assert_eq!(demangle("malloc"), "malloc");
        // Not a valid mangled name: kept as it is rather than dropped.
        assert_eq!(demangle("_Zbroken"), "_Zbroken");
    }
}
