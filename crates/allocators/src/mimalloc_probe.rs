//! Asks an installed mimalloc which option names it reads.
//!
//! mimalloc renamed its options between versions (reset_delay -> decommit_delay in 2.0,
//! -> purge_delay in 2.1) and silently ignores a MIMALLOC_* variable it does not know, so a
//! setting written under the wrong name would change nothing. With MIMALLOC_VERBOSE=1 the
//! library prints "mimalloc: option 'NAME': VALUE" for each option it has, at start.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The option names of the mimalloc at `library`, None when they could not be read.
/// Cached per library: parsing many specs runs the probe once.
pub fn option_names(library: &Path) -> Option<Vec<String>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Option<Vec<String>>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .entry(library.to_path_buf())
        .or_insert_with(|| run_probe(library))
        .clone()
}

fn run_probe(library: &Path) -> Option<Vec<String>> {
    // Any small dynamically linked program will do; `true` is on every system.
    let output = ["/bin/true", "/usr/bin/true"]
        .iter()
        .filter(|p| Path::new(p).exists())
        .find_map(|program| {
            Command::new(program)
                .env("LD_PRELOAD", library)
                .env("MIMALLOC_VERBOSE", "1")
                .env_remove("MIMALLOC_SHOW_STATS")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .output()
                .ok()
        })?;
    let names = parse_options(&String::from_utf8_lossy(&output.stderr));
    (!names.is_empty()).then_some(names)
}

/// Option names from lines like "mimalloc: option 'decommit_delay': 25".
fn parse_options(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("mimalloc: option '")?;
            let (name, _) = rest.split_once('\'')?;
            // Placeholders kept for ABI stability; setting them does nothing.
            (!name.starts_with("deprecated_")).then(|| name.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_lines_are_parsed() {
        let text = "mimalloc: option 'show_errors': 0\nmimalloc: option 'decommit_delay': 25\n\
                    mimalloc: option 'deprecated_segment_cache': 0\n\
                    mimalloc: process init: 0x7f\n";
        assert_eq!(parse_options(text), vec!["show_errors", "decommit_delay"]);
    }
}
