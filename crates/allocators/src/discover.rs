//! Finding which known allocators are installed: library path, version, package.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::catalog::{AllocatorDef, LibraryCandidate, CATALOG};
use crate::elf::check_elf;

/// What `alloclens allocators` reports about one known allocator.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AllocatorInfo {
    pub name: String,
    pub description: String,
    pub installed: bool,
    /// The library to preload; None for glibc and for allocators not installed.
    pub library: Option<PathBuf>,
    /// The package version (dpkg) or, without dpkg, the C library's own version for glibc.
    pub version: Option<String>,
    /// The package that provides the found library, or the one to install when missing.
    pub package: Option<String>,
    /// The variables that carry settings (MALLOC_CONF, GLIBC_TUNABLES, MIMALLOC_<OPTION>, ...).
    pub settings_via: String,
}

/// Every known allocator, installed or not, in catalog order.
pub fn discover() -> Vec<AllocatorInfo> {
    CATALOG.iter().map(describe).collect()
}

fn describe(def: &AllocatorDef) -> AllocatorInfo {
    let mut info = AllocatorInfo {
        name: def.name.to_string(),
        description: def.description.to_string(),
        installed: false,
        library: None,
        version: None,
        package: def.install_package().map(str::to_string),
        settings_via: def.settings_via.to_string(),
    };
    if let Some(package) = def.system_package {
        info.installed = true;
        info.package = Some(package.to_string());
        info.version = package_version(package).or_else(libc_version);
        return info;
    }
    if let Some((library, candidate)) = find_library(def) {
        info.installed = true;
        // A self-built copy under /usr/local is not what the Debian package holds.
        if !library.starts_with("/usr/local") {
            info.version = package_version(candidate.package);
        }
        info.package = Some(candidate.package.to_string());
        info.library = Some(library);
    }
    info
}

/// The first installed library of the allocator, in order of preference, with its candidate entry.
pub fn find_library(def: &AllocatorDef) -> Option<(PathBuf, LibraryCandidate)> {
    def.libraries
        .iter()
        .find_map(|c| locate(c.file).map(|path| (path, *c)))
}

/// A library file by name: the standard directories first, then the `ldconfig -p` cache.
pub fn locate(file: &str) -> Option<PathBuf> {
    library_dirs()
        .into_iter()
        .map(|dir| dir.join(file))
        .find(|path| check_elf(path).is_ok())
        .or_else(|| ldconfig_lookup(file))
}

/// The standard library directories, the Debian multiarch one first.
pub fn library_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(triplet) = multiarch_triplet() {
        dirs.push(PathBuf::from(format!("/usr/lib/{triplet}")));
        dirs.push(PathBuf::from(format!("/lib/{triplet}")));
    }
    for dir in ["/usr/lib64", "/usr/lib", "/usr/local/lib"] {
        dirs.push(PathBuf::from(dir));
    }
    dirs
}

/// Debian's multiarch directory name for the architecture this binary was built for.
fn multiarch_triplet() -> Option<&'static str> {
    Some(match std::env::consts::ARCH {
        "x86_64" => "x86_64-linux-gnu",
        "x86" => "i386-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "arm" => "arm-linux-gnueabihf",
        "riscv64" => "riscv64-linux-gnu",
        "powerpc64" if cfg!(target_endian = "little") => "powerpc64le-linux-gnu",
        "s390x" => "s390x-linux-gnu",
        "loongarch64" => "loongarch64-linux-gnu",
        _ => return None,
    })
}

/// Looks the library up in the dynamic loader's cache, for libraries in non-standard directories.
fn ldconfig_lookup(file: &str) -> Option<PathBuf> {
    let output = ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"]
        .iter()
        .find_map(|cmd| Command::new(cmd).arg("-p").output().ok())?;
    parse_ldconfig(&String::from_utf8_lossy(&output.stdout), file)
        .into_iter()
        .find(|path| check_elf(path).is_ok())
}

/// Paths listed for `file` in `ldconfig -p` output ("\tlibx.so.2 (libc6,x86-64) => /lib/libx.so.2").
fn parse_ldconfig(text: &str, file: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.trim().split_once(' ')?;
            let (_, path) = rest.split_once("=> ")?;
            (name == file).then(|| PathBuf::from(path.trim()))
        })
        .collect()
}

/// The installed version of a Debian package, None without dpkg or when it is not installed.
pub fn package_version(package: &str) -> Option<String> {
    let output = Command::new("dpkg-query")
        .args(["-W", "-f=${db:Status-Abbrev}\t${Version}", package])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let (status, version) = text.split_once('\t')?;
    // "ii " = desired install, installed; "rc" (removed, config kept) still has a version.
    (status.starts_with("ii") && !version.is_empty()).then(|| version.to_string())
}

/// The C library's own version string, for systems without dpkg.
fn libc_version() -> Option<String> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: gnu_get_libc_version returns a pointer to a static NUL-terminated string.
        let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
        Some(version.to_string_lossy().into_owned())
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// Whether `path` is an existing file (symlinks followed).
pub fn is_file(path: &Path) -> bool {
    path.metadata().map(|m| m.is_file()).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldconfig_lines_are_parsed_by_exact_name() {
        let text = "3 libs found in cache `/etc/ld.so.cache'\n\
            \tlibjemalloc.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libjemalloc.so.2\n\
            \tlibjemalloc.so.2x (libc6,x86-64) => /lib/other\n\
            \tlibmimalloc.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libmimalloc.so.2\n";
        assert_eq!(
            parse_ldconfig(text, "libjemalloc.so.2"),
            vec![PathBuf::from("/lib/x86_64-linux-gnu/libjemalloc.so.2")]
        );
        assert!(parse_ldconfig(text, "libtcmalloc.so.4").is_empty());
    }

    #[test]
    fn the_multiarch_directory_comes_first() {
        let dirs = library_dirs();
        if let Some(triplet) = multiarch_triplet() {
            assert_eq!(dirs[0], PathBuf::from(format!("/usr/lib/{triplet}")));
        }
        assert!(dirs.contains(&PathBuf::from("/usr/local/lib")));
    }
}
