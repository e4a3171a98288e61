//! Allocator variant specs (`jemalloc:dirty_decay_ms=0`, `mine=/opt/lib.so`) and the
//! environment that makes a child process run under them.
//!
//! Grammar of one spec (see docs/allocators.md):
//! `NAME[@LABEL][=PATH][:SETTING=VALUE[,SETTING=VALUE...]]`, where a setting may be
//! `env.VAR=VALUE`, a raw variable that takes the rest of the spec, commas included.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::catalog::{self, AllocatorDef, Mechanism, GLIBC};
use crate::discover::{find_library, is_file};
use crate::elf::check_elf;
use crate::error::AllocatorError;
use crate::mimalloc_probe;
use crate::settings::{self, check_value, Kind, SettingDef};

const RAW_ENV_PREFIX: &str = "env.";
pub const MALLOC_CONF: &str = "MALLOC_CONF";
pub const GLIBC_TUNABLES: &str = "GLIBC_TUNABLES";
pub const LD_PRELOAD: &str = "LD_PRELOAD";

/// One allocator configuration to run a program under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Variant {
    /// How results name this variant: the spec text, or the `@label` given.
    pub label: String,
    /// The known allocator's name, or the name given to a custom library.
    pub allocator: String,
    /// The library to preload; None for glibc.
    pub library: Option<PathBuf>,
    /// The settings as written, values normalised (sizes in bytes, booleans true/false).
    pub settings: Vec<(String, String)>,
    /// The variables the settings translate to, before merging with the inherited environment.
    pub env: Vec<(String, String)>,
}

/// Parses one spec. Known allocators must be installed; library paths must be ELF files.
pub fn parse_variant(spec: &str) -> Result<Variant, AllocatorError> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(AllocatorError::EmptySpec);
    }
    let syntax = |reason: &str| AllocatorError::Syntax {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    let (head, settings_text) = match spec.split_once(':') {
        Some((head, rest)) => (head, Some(rest)),
        None => (spec, None),
    };
    let (name_part, path) = match head.split_once('=') {
        Some((name, path)) => (name, Some(path.trim())),
        None => (head, None),
    };
    let (name, label) = match name_part.split_once('@') {
        Some((_, label)) if label.trim().is_empty() => {
            return Err(syntax("empty label after `@`"));
        }
        Some((name, label)) => (name.trim(), label.trim().to_string()),
        None => (name_part.trim(), spec.to_string()),
    };
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(syntax("the allocator name is empty or contains blanks"));
    }
    let def = catalog::find(name);
    let library = match (def, path) {
        (_, Some("")) => return Err(syntax("empty library path after `=`")),
        (Some(def), Some(_)) if def.name == GLIBC => {
            return Err(syntax(
                "glibc is the system allocator and takes no library path",
            ))
        }
        (_, Some(path)) => Some(check_library(name, Path::new(path))?),
        (Some(def), None) => installed_library(def)?,
        (None, None) => {
            return Err(AllocatorError::UnknownAllocator {
                name: name.to_string(),
                known: catalog::known_names(),
            })
        }
    };
    let mut variant = Variant {
        label,
        allocator: def.map_or(name, |d| d.name).to_string(),
        library,
        settings: Vec::new(),
        env: Vec::new(),
    };
    if let Some(text) = settings_text {
        apply_settings(&mut variant, def, text).map_err(|e| match e {
            SettingsError::Syntax(reason) => syntax(&reason),
            SettingsError::Allocator(e) => e,
        })?;
    }
    Ok(variant)
}

/// Splits a comma-separated list of specs, keeping the commas that separate a spec's settings:
/// `glibc,jemalloc:dirty_decay_ms=0,background_thread=true,mimalloc` gives three specs.
/// A piece starts a new spec when it begins with a known allocator name, is `NAME=/path`,
/// or follows a spec without settings.
pub fn split_variant_list(list: &str) -> Vec<String> {
    let mut specs: Vec<String> = Vec::new();
    for piece in list.split(',') {
        let continues = specs
            .last()
            .is_some_and(|current| current.contains(':') && !starts_new_spec(current, piece));
        match specs.last_mut() {
            Some(current) if continues => {
                current.push(',');
                current.push_str(piece);
            }
            _ => specs.push(piece.to_string()),
        }
    }
    specs.retain(|s| !s.trim().is_empty());
    specs
}

/// Parses a comma-separated list of specs (see [`split_variant_list`]).
pub fn parse_variant_list(list: &str) -> Result<Vec<Variant>, AllocatorError> {
    let specs = split_variant_list(list);
    if specs.is_empty() {
        return Err(AllocatorError::EmptySpec);
    }
    specs.iter().map(|s| parse_variant(s)).collect()
}

fn starts_new_spec(current: &str, piece: &str) -> bool {
    let piece = piece.trim();
    let head_end = piece.find([':', '@', '=']).unwrap_or(piece.len());
    if catalog::find(&piece[..head_end]).is_some() {
        return true;
    }
    let Some((key, value)) = piece.split_once('=') else {
        return false;
    };
    let current_allocator = current.split([':', '@', '=']).next().unwrap_or("");
    let is_setting = key.starts_with(RAW_ENV_PREFIX)
        || catalog::find(current_allocator)
            .is_some_and(|d| settings::lookup(settings::table(d.name), key).is_some());
    !is_setting && (value.starts_with('/') || value.starts_with("./") || value.starts_with("../"))
}

fn installed_library(def: &AllocatorDef) -> Result<Option<PathBuf>, AllocatorError> {
    if def.libraries.is_empty() {
        return Ok(None);
    }
    match find_library(def) {
        Some((path, _)) => Ok(Some(path)),
        None => Err(AllocatorError::NotInstalled {
            allocator: def.name.to_string(),
            library: def.libraries[0].file.to_string(),
            package: def.install_package().unwrap_or_default().to_string(),
        }),
    }
}

/// An absolute path to an existing ELF library that LD_PRELOAD can carry.
fn check_library(name: &str, path: &Path) -> Result<PathBuf, AllocatorError> {
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        // The child may run in another directory; LD_PRELOAD resolves relative paths there.
        std::env::current_dir()
            .map(|dir| dir.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    if !is_file(&path) {
        return Err(AllocatorError::LibraryMissing {
            name: name.to_string(),
            path,
        });
    }
    if let Err(reason) = check_elf(&path) {
        return Err(AllocatorError::NotElf {
            name: name.to_string(),
            path,
            reason,
        });
    }
    if path.to_string_lossy().contains([' ', ':']) {
        return Err(AllocatorError::UnpreloadablePath { path });
    }
    Ok(path)
}

enum SettingsError {
    Syntax(String),
    Allocator(AllocatorError),
}

impl From<AllocatorError> for SettingsError {
    fn from(e: AllocatorError) -> Self {
        SettingsError::Allocator(e)
    }
}

fn apply_settings(
    variant: &mut Variant,
    def: Option<&AllocatorDef>,
    text: &str,
) -> Result<(), SettingsError> {
    let mut rest = text;
    let mut conf_parts: Vec<String> = Vec::new();
    let mut raw_env: Option<(String, String)> = None;
    while !rest.is_empty() {
        if let Some(raw) = rest.strip_prefix(RAW_ENV_PREFIX) {
            // A raw variable's value may itself hold commas (MALLOC_CONF), so it ends the spec.
            let (name, value) = raw
                .split_once('=')
                .ok_or_else(|| SettingsError::Syntax(format!("`env.{raw}` needs `=VALUE`")))?;
            if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == ',') {
                return Err(SettingsError::Syntax(format!(
                    "bad variable name `{name}` in `env.{raw}`"
                )));
            }
            raw_env = Some((name.to_string(), value.to_string()));
            break;
        }
        let (piece, tail) = rest.split_once(',').unwrap_or((rest, ""));
        rest = tail;
        let (key, value) = piece
            .split_once('=')
            .map(|(k, v)| (k.trim(), v.trim()))
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| SettingsError::Syntax(format!("`{piece}` is not SETTING=VALUE")))?;
        if variant.settings.iter().any(|(k, _)| k == key) {
            return Err(SettingsError::Syntax(format!(
                "setting `{key}` given twice"
            )));
        }
        let Some(def) = def else {
            return Err(AllocatorError::CustomSettings {
                allocator: variant.allocator.clone(),
                setting: key.to_string(),
            }
            .into());
        };
        let translated = translate(def, variant.library.as_deref(), key, value)?;
        variant
            .settings
            .push((key.to_string(), translated.normalised));
        match def.mechanism {
            Mechanism::MallocConf | Mechanism::GlibcTunables => conf_parts.push(translated.entry),
            Mechanism::MimallocEnv | Mechanism::EnvPerSetting => {
                let (name, value) = translated.entry.split_once('=').unwrap_or_default();
                variant.env.push((name.to_string(), value.to_string()));
            }
        }
    }
    if !conf_parts.is_empty() {
        let (name, separator) = match def.map(|d| d.mechanism) {
            Some(Mechanism::MallocConf) => (MALLOC_CONF, ","),
            _ => (GLIBC_TUNABLES, ":"),
        };
        variant
            .env
            .push((name.to_string(), conf_parts.join(separator)));
    }
    variant.env.extend(raw_env);
    Ok(())
}

struct Translated {
    /// The value as recorded in `Variant::settings`.
    normalised: String,
    /// `key:value` for MALLOC_CONF, `tunable=value` for GLIBC_TUNABLES, `VAR=value` otherwise.
    entry: String,
}

fn translate(
    def: &AllocatorDef,
    library: Option<&Path>,
    key: &str,
    raw: &str,
) -> Result<Translated, AllocatorError> {
    let table = settings::table(def.name);
    let installed_mimalloc = match (def.mechanism, library) {
        (Mechanism::MimallocEnv, Some(lib)) => mimalloc_probe::option_names(lib),
        _ => None,
    };
    let known = match &installed_mimalloc {
        Some(names) => names.join(", "),
        None => settings::names(table),
    };
    // mimalloc: an option the installed library has but our table lacks is still an integer.
    let fallback = SettingDef {
        name: "",
        kind: Kind::Integer {
            min: i64::MIN,
            max: i64::MAX,
        },
        target: "",
        aliases: &[],
        meaning: "",
    };
    let setting = match settings::lookup(table, key) {
        Some(s) => s,
        None if installed_mimalloc
            .as_ref()
            .is_some_and(|names| names.iter().any(|n| n == key)) =>
        {
            &fallback
        }
        None => {
            return Err(AllocatorError::UnknownSetting {
                allocator: def.name.to_string(),
                setting: key.to_string(),
                known,
            })
        }
    };
    let value = check_value(&setting.kind, raw).ok_or_else(|| AllocatorError::BadValue {
        allocator: def.name.to_string(),
        setting: key.to_string(),
        value: raw.to_string(),
        expected: setting.kind.expected(),
        known: known.clone(),
    })?;
    let normalised = value.render(true);
    let entry = match def.mechanism {
        Mechanism::MallocConf => format!("{}:{}", setting.target, value.render(true)),
        Mechanism::GlibcTunables => format!("{}={}", setting.target, value.render(false)),
        Mechanism::EnvPerSetting => format!("{}={}", setting.target, value.render(false)),
        Mechanism::MimallocEnv => {
            let option = mimalloc_option_name(key, setting, installed_mimalloc.as_deref())
                .ok_or_else(|| AllocatorError::UnknownSetting {
                    allocator: format!(
                        "the installed mimalloc ({})",
                        library.map_or_else(String::new, |l| l.display().to_string())
                    ),
                    setting: key.to_string(),
                    known: known.clone(),
                })?;
            format!(
                "MIMALLOC_{}={}",
                option.to_ascii_uppercase(),
                value.render(false)
            )
        }
    };
    Ok(Translated { normalised, entry })
}

/// The name under which the installed mimalloc reads this option: the name written if it
/// knows it, else the table's name or one of its aliases. Without a probe, the name written.
fn mimalloc_option_name(
    key: &str,
    setting: &SettingDef,
    installed: Option<&[String]>,
) -> Option<String> {
    let Some(installed) = installed else {
        return Some(key.to_string());
    };
    std::iter::once(key)
        .chain(std::iter::once(setting.name))
        .chain(setting.aliases.iter().copied())
        .find(|candidate| !candidate.is_empty() && installed.iter().any(|n| n == candidate))
        .map(str::to_string)
}

impl Variant {
    /// Every variable to set on the child: LD_PRELOAD (the allocator first, then what was
    /// preloaded already), then the settings' variables. MALLOC_CONF and GLIBC_TUNABLES are
    /// merged with the values this process has, the variant's entries winning.
    pub fn environment(&self, inherited_ld_preload: Option<&OsStr>) -> Vec<(OsString, OsString)> {
        self.environment_from(|name| {
            if name == LD_PRELOAD {
                inherited_ld_preload.map(OsStr::to_os_string)
            } else {
                std::env::var_os(name)
            }
        })
    }

    /// Like [`Variant::environment`], reading inherited values through `inherited`.
    pub fn environment_from(
        &self,
        inherited: impl Fn(&str) -> Option<OsString>,
    ) -> Vec<(OsString, OsString)> {
        let mut out: Vec<(String, OsString)> = Vec::new();
        if let Some(library) = &self.library {
            let mut preload = library.as_os_str().to_os_string();
            if let Some(existing) = inherited(LD_PRELOAD).filter(|v| !v.is_empty()) {
                preload.push(" ");
                preload.push(existing);
            }
            out.push((LD_PRELOAD.to_string(), preload));
        }
        for (name, value) in &self.env {
            let current = out
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .or_else(|| inherited(name));
            let current = current.as_deref().map(OsStr::to_string_lossy);
            let merged = match name.as_str() {
                MALLOC_CONF => merge_entries(current.as_deref(), value, ',', ':'),
                GLIBC_TUNABLES => merge_entries(current.as_deref(), value, ':', '='),
                _ => value.clone(),
            };
            out.retain(|(n, _)| n != name);
            out.push((name.clone(), merged.into()));
        }
        out.into_iter().map(|(n, v)| (n.into(), v)).collect()
    }
}

/// `existing` entries whose key `ours` does not set, followed by `ours`.
fn merge_entries(existing: Option<&str>, ours: &str, separator: char, key_end: char) -> String {
    let key = |entry: &str| entry.split(key_end).next().unwrap_or("").to_string();
    let our_keys: Vec<String> = ours.split(separator).map(key).collect();
    existing
        .into_iter()
        .flat_map(|e| e.split(separator))
        .filter(|entry| !entry.is_empty() && !our_keys.contains(&key(entry)))
        .chain(std::iter::once(ours))
        .collect::<Vec<_>>()
        .join(&separator.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_keep_setting_commas() {
        assert_eq!(
            split_variant_list("glibc,jemalloc:dirty_decay_ms=0,background_thread=true,mimalloc"),
            vec![
                "glibc",
                "jemalloc:dirty_decay_ms=0,background_thread=true",
                "mimalloc"
            ]
        );
        assert_eq!(
            split_variant_list("glibc:arena_max=2,trim_threshold=131072,mine=/opt/x.so,tcmalloc"),
            vec![
                "glibc:arena_max=2,trim_threshold=131072",
                "mine=/opt/x.so",
                "tcmalloc"
            ]
        );
        assert_eq!(
            split_variant_list("jemalloc:env.MALLOC_CONF=narenas:1,tcache:false,glibc"),
            vec!["jemalloc:env.MALLOC_CONF=narenas:1,tcache:false", "glibc"]
        );
        assert_eq!(
            split_variant_list("tcmalloc:memfs_malloc_path=/dev/hugepages,release_rate=1"),
            vec!["tcmalloc:memfs_malloc_path=/dev/hugepages,release_rate=1"]
        );
        assert_eq!(split_variant_list("glibc,bogus"), vec!["glibc", "bogus"]);
    }

    #[test]
    fn a_missing_library_names_the_package_to_install() {
        let def = AllocatorDef {
            name: "ghostalloc",
            description: "",
            libraries: &[crate::catalog::LibraryCandidate {
                file: "libghostalloc-does-not-exist.so.9",
                package: "libghostalloc9",
            }],
            file_prefix: Some("libghostalloc"),
            mechanism: Mechanism::EnvPerSetting,
            settings_via: "GHOST_<SETTING>",
            system_package: None,
        };
        let err = installed_library(&def).unwrap_err();
        assert!(matches!(err, AllocatorError::NotInstalled { .. }));
        assert!(
            err.to_string().contains("apt-get install libghostalloc9"),
            "{err}"
        );
    }

    #[test]
    fn merging_keeps_foreign_entries_and_lets_ours_win() {
        assert_eq!(
            merge_entries(
                Some("narenas:4,dirty_decay_ms:5"),
                "dirty_decay_ms:0",
                ',',
                ':'
            ),
            "narenas:4,dirty_decay_ms:0"
        );
        assert_eq!(
            merge_entries(
                Some("glibc.malloc.arena_max=8:glibc.elision.enable=1"),
                "glibc.malloc.arena_max=2",
                ':',
                '='
            ),
            "glibc.elision.enable=1:glibc.malloc.arena_max=2"
        );
        assert_eq!(merge_entries(None, "a:1", ',', ':'), "a:1");
    }
}
