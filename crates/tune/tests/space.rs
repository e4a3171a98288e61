//! The space built from the settings tables holds only settings the installed allocators have and
//! take: each is checked by the allocators crate's tables, then seen applied by the real library.
use std::collections::BTreeMap;
use std::process::Command;

use allocators::settings::{check_value, lookup, table};
use tune::{build_space, SpaceSelection};

fn installed() -> Vec<String> {
    allocators::discover()
        .into_iter()
        .filter(|a| a.installed)
        .map(|a| a.name)
        .collect()
}

/// Runs `sh -c true` under the variant's environment (plus `extra`), returning status and stderr.
fn run_under(
    variant: &allocators::Variant,
    extra: &[(&str, &str)],
    program: &[&str],
) -> (bool, String) {
    let mut cmd = Command::new(program[0]);
    cmd.args(&program[1..]);
    for (k, v) in variant.environment(None) {
        cmd.env(k, v);
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn env_of<'a>(variant: &'a allocators::Variant, name: &str) -> Option<&'a str> {
    variant
        .env
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn every_setting_of_the_space_exists_and_the_installed_library_takes_it() {
    let selection = SpaceSelection {
        allocators: installed(),
        given: Vec::new(),
    };
    let (candidates, notes) = build_space(&selection).unwrap();
    eprintln!("{} candidates; notes: {notes:?}", candidates.len());
    assert_eq!(candidates[0].variant.label, "glibc");
    let with_settings: Vec<_> = candidates
        .iter()
        .filter(|c| !c.variant.settings.is_empty())
        .collect();
    // glibc is always installed: its spread alone has several values.
    assert!(with_settings.len() >= 8, "{}", with_settings.len());
    for name in installed() {
        if name != "glibc" && !tune::SPREAD.iter().any(|s| s.allocator == name) {
            continue;
        }
        assert!(
            with_settings.iter().any(|c| c.variant.allocator == name),
            "no spread for the installed {name}"
        );
    }
    let ld_so = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    for c in &with_settings {
        let v = &c.variant;
        // The allocators crate's tables: the setting exists and its value is of its kind.
        for (setting, value) in &v.settings {
            let def = lookup(table(&v.allocator), setting)
                .unwrap_or_else(|| panic!("{}: {setting} is not in the table", v.label));
            assert!(
                check_value(&def.kind, value).is_some(),
                "{}: {setting}={value}",
                v.label
            );
        }
        // The real library takes it.
        match v.allocator.as_str() {
            "glibc" => {
                let Some(ld_so) = ld_so else { continue };
                let (ok, _) = run_under(v, &[], &[ld_so, "--list-tunables"]);
                assert!(ok);
                let out = Command::new(ld_so)
                    .arg("--list-tunables")
                    .envs(v.environment(None))
                    .output()
                    .unwrap();
                let listed: BTreeMap<String, u64> = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter_map(|l| {
                        let (name, rest) = l.split_once(": ")?;
                        let value = rest.split_whitespace().next()?;
                        let n = match value.strip_prefix("0x") {
                            Some(hex) => u64::from_str_radix(hex, 16).ok()?,
                            None => value.parse().ok()?,
                        };
                        Some((name.to_string(), n))
                    })
                    .collect();
                for entry in env_of(v, "GLIBC_TUNABLES").unwrap().split(':') {
                    let (name, value) = entry.split_once('=').unwrap();
                    assert_eq!(
                        listed.get(name),
                        Some(&value.parse::<u64>().unwrap()),
                        "{}: glibc did not take {entry}",
                        v.label
                    );
                }
            }
            "jemalloc" => {
                // abort_conf makes jemalloc abort on any entry it does not take.
                let conf = format!("{},abort_conf:true", env_of(v, "MALLOC_CONF").unwrap());
                let (ok, stderr) = run_under(v, &[("MALLOC_CONF", &conf)], &["sh", "-c", "true"]);
                assert!(ok && stderr.is_empty(), "{}: {stderr}", v.label);
            }
            "mimalloc" => {
                // mimalloc prints every option's value with MIMALLOC_VERBOSE.
                let (ok, stderr) =
                    run_under(v, &[("MIMALLOC_VERBOSE", "1")], &["sh", "-c", "true"]);
                assert!(ok, "{}: {stderr}", v.label);
                for (name, value) in &v.env {
                    let option = name.strip_prefix("MIMALLOC_").unwrap().to_ascii_lowercase();
                    let line = format!("option '{option}': {value}");
                    assert!(
                        stderr.contains(&line),
                        "{}: no `{line}` in {stderr}",
                        v.label
                    );
                }
            }
            _ => {
                let (ok, stderr) = run_under(v, &[], &["sh", "-c", "true"]);
                assert!(ok && stderr.is_empty(), "{}: {stderr}", v.label);
            }
        }
    }
}

#[test]
fn a_space_file_is_checked_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("space.txt");
    std::fs::write(
        &file,
        "# two variants\nglibc:arena_max=2\n\nglibc:bogus=1\n",
    )
    .unwrap();
    let err = tune::parse_space_file(&file).unwrap_err().to_string();
    assert!(err.contains("line 4") && err.contains("bogus"), "{err}");
    std::fs::write(&file, "glibc:arena_max=2  # fewer arenas\n").unwrap();
    let variants = tune::parse_space_file(&file).unwrap();
    assert_eq!(variants.len(), 1);
    let (space, _) = build_space(&SpaceSelection {
        allocators: Vec::new(),
        given: variants,
    })
    .unwrap();
    let labels: Vec<&str> = space.iter().map(|c| c.variant.label.as_str()).collect();
    assert_eq!(labels, ["glibc", "glibc:arena_max=2"]);
}
