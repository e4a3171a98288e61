//! Real checks: the installed allocator libraries, preloaded into real children, with their
//! settings read back from the allocators' own reports.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use allocators::{
    discover, parse_variant, parse_variant_list, settings, verify, AllocatorError, LoadStatus,
    Variant,
};

const LD_SO: &str = "/lib64/ld-linux-x86-64.so.2";

/// Runs `program args` with the variant's environment on top of a clean allocator environment.
fn run_under(variant: &Variant, program: &str, args: &[&str]) -> Output {
    run_with(variant.environment(None), program, args)
}

fn run_with(env: Vec<(OsString, OsString)>, program: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args);
    for name in ["LD_PRELOAD", "MALLOC_CONF", "GLIBC_TUNABLES"] {
        cmd.env_remove(name);
    }
    cmd.envs(env);
    cmd.output().expect("child runs")
}

fn mapped_files(maps: &str) -> Vec<PathBuf> {
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn installed() -> Vec<allocators::AllocatorInfo> {
    discover().into_iter().filter(|a| a.installed).collect()
}

#[test]
fn discovery_agrees_with_the_loader_cache_and_dpkg() {
    let cache = String::from_utf8(
        Command::new("/sbin/ldconfig")
            .arg("-p")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let infos = discover();
    let names: Vec<&str> = infos.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        ["glibc", "jemalloc", "mimalloc", "tcmalloc", "tbbmalloc"]
    );
    for info in &infos {
        if info.name == "glibc" {
            assert!(info.installed && info.library.is_none());
        } else if let Some(library) = &info.library {
            let file = library.file_name().unwrap().to_str().unwrap();
            assert!(
                cache.contains(&format!("{file} ")),
                "{file} not in ldconfig -p"
            );
            assert!(info.installed);
        } else {
            assert!(!info.installed, "{info:?}");
        }
        if info.installed {
            let package = info
                .package
                .as_deref()
                .expect("package of an installed allocator");
            let dpkg = Command::new("dpkg-query")
                .args(["-W", "-f=${Version}", package])
                .output()
                .unwrap();
            assert_eq!(
                info.version.as_deref(),
                Some(String::from_utf8_lossy(&dpkg.stdout).as_ref()),
                "{info:?}"
            );
        }
    }
    // The libraries this machine is set up with (README set-up) must all be found.
    for file in [
        "libjemalloc.so.2",
        "libmimalloc.so.2",
        "libtcmalloc_minimal.so.4",
        "libtbbmalloc_proxy.so.2",
    ] {
        if cache.contains(&format!("{file} ")) {
            assert!(
                infos
                    .iter()
                    .any(|a| a.library.as_deref().is_some_and(|l| l.ends_with(file))),
                "{file} is installed but not discovered"
            );
        }
    }
    let json = serde_json::to_value(&infos).unwrap();
    assert_eq!(json[1]["name"], "jemalloc");
}

#[test]
fn each_installed_allocator_is_mapped_in_a_preloaded_child_and_verified() {
    let all = installed();
    assert!(
        all.len() >= 2,
        "no allocator besides glibc installed: {all:?}"
    );
    for info in all {
        let variant = parse_variant(&info.name).unwrap();
        let output = run_under(&variant, "/bin/cat", &["/proc/self/maps"]);
        assert!(
            output.status.success(),
            "{}: {}",
            info.name,
            stderr(&output)
        );
        let mapped = mapped_files(&String::from_utf8_lossy(&output.stdout));
        let verdict = verify(&variant, &mapped);
        match &variant.library {
            None => assert_eq!(verdict.status, LoadStatus::NotApplicable),
            Some(library) => assert_eq!(
                verdict.status,
                LoadStatus::Loaded {
                    path: std::fs::canonicalize(library).unwrap()
                },
                "{}",
                info.name
            ),
        }
        // tbbmalloc's proxy maps libtbbmalloc too: that is not "another" allocator.
        assert!(
            verdict.other_allocators.is_empty(),
            "{}: {:?}",
            info.name,
            verdict.other_allocators
        );
        assert!(verdict.warning(&variant).is_none());
    }
}

#[test]
fn a_child_without_the_preload_is_reported_not_loaded_and_foreign_allocators_are_named() {
    let jemalloc = parse_variant("jemalloc").unwrap();
    let mimalloc = parse_variant("mimalloc").unwrap();
    // The child runs under jemalloc while we check for mimalloc.
    let output = run_under(&jemalloc, "/bin/cat", &["/proc/self/maps"]);
    let mapped = mapped_files(&String::from_utf8_lossy(&output.stdout));
    let verdict = verify(&mimalloc, &mapped);
    assert_eq!(verdict.status, LoadStatus::NotLoaded);
    assert_eq!(verdict.other_allocators, ["jemalloc"]);
    let warning = verdict.warning(&mimalloc).unwrap();
    assert!(warning.contains("NOT mapped"), "{warning}");
    // The glibc baseline is not glibc when the program carries another allocator.
    let glibc = parse_variant("glibc").unwrap();
    assert_eq!(verify(&glibc, &mapped).other_allocators, ["jemalloc"]);
}

#[test]
fn glibc_tunables_are_in_force_in_the_child() {
    let variant = parse_variant("glibc:arena_max=2,trim_threshold=128k").unwrap();
    assert_eq!(
        variant.settings,
        [
            ("arena_max".into(), "2".into()),
            ("trim_threshold".into(), "131072".into())
        ]
    );
    // A tunable the user already set survives; the variant's own value wins over the user's.
    let env = variant.environment_from(|name| {
        (name == "GLIBC_TUNABLES")
            .then(|| "glibc.malloc.tcache_count=3:glibc.malloc.arena_max=7".into())
    });
    let output = run_with(env, LD_SO, &["--list-tunables"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains(&format!("glibc.malloc.arena_max: {:#x} ", 2)),
        "{text}"
    );
    assert!(
        text.contains(&format!("glibc.malloc.trim_threshold: {:#x} ", 128 * 1024)),
        "{text}"
    );
    assert!(
        text.contains(&format!("glibc.malloc.tcache_count: {:#x} ", 3)),
        "{text}"
    );
}

#[test]
fn every_glibc_setting_is_a_tunable_of_the_installed_glibc() {
    let text = String::from_utf8(
        Command::new(LD_SO)
            .arg("--list-tunables")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    for setting in settings::GLIBC {
        assert!(
            text.contains(&format!("{}:", setting.target)),
            "{} missing from {LD_SO} --list-tunables",
            setting.target
        );
    }
}

#[test]
fn jemalloc_settings_are_in_force_in_the_child() {
    let variant =
        parse_variant("jemalloc:dirty_decay_ms=0,background_thread=yes,stats_print=true").unwrap();
    let env = variant.environment_from(|name| {
        (name == "MALLOC_CONF").then(|| "narenas:3,dirty_decay_ms:500".into())
    });
    let output = run_with(env, "/bin/true", &[]);
    let stats = stderr(&output);
    assert!(stats.contains("opt.dirty_decay_ms: 0 "), "{stats}");
    assert!(stats.contains("opt.background_thread: true "), "{stats}");
    assert!(stats.contains("opt.narenas: 3\n"), "{stats}");
    assert!(!stats.contains("Invalid conf"), "{stats}");
}

#[test]
fn every_jemalloc_setting_is_an_option_of_the_installed_jemalloc() {
    let variant = parse_variant("jemalloc:stats_print=true").unwrap();
    let stats = stderr(&run_under(&variant, "/bin/true", &[]));
    for setting in settings::JEMALLOC {
        if stats.contains(&format!("opt.{}:", setting.target)) {
            continue;
        }
        // Not every option is printed (max_background_threads): jemalloc must at least accept it.
        let value = match setting.kind {
            settings::Kind::Integer { min, .. } => min.max(0).to_string(),
            settings::Kind::Enum(words) => words[0].to_string(),
            _ => panic!("opt.{} neither printed nor checked", setting.target),
        };
        let variant = parse_variant(&format!("jemalloc:{}={value}", setting.name)).unwrap();
        let text = stderr(&run_under(&variant, "/bin/true", &[]));
        assert!(!text.contains("Invalid conf"), "{}: {text}", setting.name);
    }
    // The check above can tell a bad option from a good one.
    let library = parse_variant("jemalloc").unwrap().library.unwrap();
    let env = vec![
        ("LD_PRELOAD".into(), library.into()),
        ("MALLOC_CONF".into(), "no_such_opt:1".into()),
    ];
    assert!(stderr(&run_with(env, "/bin/true", &[])).contains("Invalid conf"));
}

/// The table's bounds are the installed jemalloc's: its largest `narenas` runs as given, one more
/// is clamped (jemalloc says so on stderr) and the table refuses it (issue 35).
#[test]
fn the_narenas_bound_is_the_installed_jemallocs_limit() {
    let largest = match settings::JEMALLOC
        .iter()
        .find(|s| s.name == "narenas")
        .unwrap()
        .kind
    {
        settings::Kind::Integer { max, .. } => max,
        other => panic!("narenas is {other:?}"),
    };
    let variant = parse_variant(&format!("jemalloc:narenas={largest}")).unwrap();
    let text = stderr(&run_under(&variant, "/bin/true", &[]));
    assert!(!text.contains("<jemalloc>"), "{text}");
    let library = parse_variant("jemalloc").unwrap().library.unwrap();
    let env = vec![
        ("LD_PRELOAD".into(), library.into()),
        (
            "MALLOC_CONF".into(),
            format!("narenas:{}", largest + 1).into(),
        ),
    ];
    assert!(stderr(&run_with(env, "/bin/true", &[])).contains("Reducing narenas"));
    let err = parse_variant("jemalloc:narenas=99999999999")
        .unwrap_err()
        .to_string();
    assert!(err.contains("narenas") && err.contains("4094"), "{err}");
}

#[test]
fn mimalloc_purge_delay_reaches_the_installed_version_under_its_own_name() {
    let variant = parse_variant("mimalloc:purge_delay=0,verbose=1").unwrap();
    let library = variant.library.clone().unwrap();
    let known = allocators::mimalloc_options(&library).expect("mimalloc prints its options");
    let name = ["purge_delay", "decommit_delay", "reset_delay"]
        .into_iter()
        .find(|n| known.iter().any(|k| k == n))
        .expect("the installed mimalloc has a purge delay");
    assert!(
        variant
            .env
            .contains(&(format!("MIMALLOC_{}", name.to_uppercase()), "0".into())),
        "{:?}",
        variant.env
    );
    let text = stderr(&run_under(&variant, "/bin/true", &[]));
    assert!(text.contains(&format!("option '{name}': 0\n")), "{text}");
    assert!(!text.contains("invalid value"), "{text}");
}

#[test]
fn tcmalloc_and_tbbmalloc_variables_are_read_by_the_installed_libraries() {
    let checks: [(&str, &[settings::SettingDef], &str); 2] = [
        ("tcmalloc", settings::TCMALLOC, ""),
        ("tbbmalloc", settings::TBBMALLOC, "libtbbmalloc.so.2"),
    ];
    for (name, table, engine) in checks {
        let variant = parse_variant(name).unwrap();
        let library = variant.library.unwrap();
        // The proxy only forwards; the variables are read by the allocator library beside it.
        let file: PathBuf = if engine.is_empty() {
            library
        } else {
            library.with_file_name(engine)
        };
        let bytes = std::fs::read(&file).unwrap();
        for setting in table {
            let needle = format!("{}\0", setting.target);
            assert!(
                bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "{} not in {}",
                setting.target,
                file.display()
            );
        }
    }
    let variant = parse_variant(
        "tcmalloc:release_rate=10,max_total_thread_cache_bytes=16M,aggressive_decommit=true",
    )
    .unwrap();
    assert_eq!(
        variant.env,
        [
            ("TCMALLOC_RELEASE_RATE".to_string(), "10".to_string()),
            (
                "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES".into(),
                (16u64 << 20).to_string()
            ),
            ("TCMALLOC_AGGRESSIVE_DECOMMIT".into(), "1".into()),
        ]
    );
    let output = run_under(&variant, "/bin/true", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn ld_preload_keeps_what_was_preloaded_already() {
    let variant = parse_variant("jemalloc").unwrap();
    let library = variant.library.clone().unwrap();
    let env = variant.environment(Some(std::ffi::OsStr::new("/opt/a.so")));
    let mut expected = library.into_os_string();
    expected.push(" /opt/a.so");
    assert_eq!(env, [(OsString::from("LD_PRELOAD"), expected)]);
}

#[test]
fn custom_libraries_and_raw_variables() {
    let jemalloc = parse_variant("jemalloc").unwrap().library.unwrap();
    let spec = format!(
        "mine@fast={}:env.MALLOC_CONF=narenas:1,tcache:false",
        jemalloc.display()
    );
    let variant = parse_variant(&spec).unwrap();
    assert_eq!(variant.label, "fast");
    assert_eq!(variant.allocator, "mine");
    assert_eq!(
        variant.env,
        [(
            "MALLOC_CONF".to_string(),
            "narenas:1,tcache:false".to_string()
        )]
    );
    let stats = stderr(&run_under(
        &parse_variant(&format!("{spec},stats_print:true")).unwrap(),
        "/bin/true",
        &[],
    ));
    assert!(
        stats.contains("opt.narenas: 1\n") && stats.contains("opt.tcache: false\n"),
        "{stats}"
    );

    // A known allocator from another path keeps its settings.
    let variant =
        parse_variant(&format!("jemalloc={}:dirty_decay_ms=0", jemalloc.display())).unwrap();
    assert_eq!(variant.allocator, "jemalloc");
    assert_eq!(
        variant.env,
        [("MALLOC_CONF".to_string(), "dirty_decay_ms:0".to_string())]
    );

    let list = parse_variant_list(&format!(
        "glibc,jemalloc:dirty_decay_ms=0,narenas=2,x={}",
        jemalloc.display()
    ))
    .unwrap();
    let labels: Vec<&str> = list.iter().map(|v| v.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "glibc",
            "jemalloc:dirty_decay_ms=0,narenas=2",
            &format!("x={}", jemalloc.display())
        ]
    );
}

#[test]
fn bad_specs_give_errors_that_say_what_to_do() {
    let err = parse_variant("hoard").unwrap_err();
    assert!(matches!(err, AllocatorError::UnknownAllocator { .. }));
    assert!(err.to_string().contains("jemalloc, mimalloc"), "{err}");

    let err = parse_variant("jemalloc:dirty_decay=0").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, AllocatorError::UnknownSetting { .. }));
    assert!(
        text.contains("jemalloc")
            && text.contains("`dirty_decay`")
            && text.contains("dirty_decay_ms, muzzy_decay_ms"),
        "{text}"
    );

    let err = parse_variant("glibc:arena_max=zero").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, AllocatorError::BadValue { .. }));
    assert!(
        text.contains("glibc")
            && text.contains("arena_max")
            && text.contains("an integer >= 1")
            && text.contains("trim_threshold"),
        "{text}"
    );

    let err = parse_variant("mimalloc:no_such_option=1").unwrap_err();
    assert!(
        err.to_string().contains("decommit_delay") || err.to_string().contains("purge_delay"),
        "{err}"
    );

    let err = parse_variant("x=/nonexistent/lib.so").unwrap_err();
    assert!(
        matches!(err, AllocatorError::LibraryMissing { ref path, .. } if path == Path::new("/nonexistent/lib.so"))
    );

    let dir = tempfile::tempdir().unwrap();
    let text_file = dir.path().join("notalib.so");
    std::fs::write(&text_file, "#!/bin/sh\n").unwrap();
    let err = parse_variant(&format!("x={}", text_file.display())).unwrap_err();
    assert!(matches!(err, AllocatorError::NotElf { .. }), "{err}");

    let jemalloc = parse_variant("jemalloc").unwrap().library.unwrap();
    let err = parse_variant(&format!("x={}:narenas=1", jemalloc.display())).unwrap_err();
    assert!(
        matches!(err, AllocatorError::CustomSettings { .. }),
        "{err}"
    );

    for spec in [
        "",
        "  ",
        "jemalloc:narenas",
        "jemalloc:narenas=1,narenas=2",
        "glibc=/usr/lib/x.so",
        "jemalloc@:narenas=1",
    ] {
        assert!(parse_variant(spec).is_err(), "`{spec}` accepted");
    }
}

#[test]
fn every_mimalloc_setting_maps_to_an_option_of_the_installed_version_or_is_refused() {
    let library = parse_variant("mimalloc").unwrap().library.unwrap();
    let known = allocators::mimalloc_options(&library).unwrap();
    for setting in settings::MIMALLOC {
        let value = match setting.kind {
            settings::Kind::Integer { min, .. } => min.max(0).to_string(),
            settings::Kind::Bool => "false".to_string(),
            settings::Kind::Size => "0".to_string(),
            other => panic!("unexpected kind {other:?}"),
        };
        let names: Vec<&str> = std::iter::once(setting.name)
            .chain(setting.aliases.iter().copied())
            .collect();
        let installed_name = names.iter().find(|n| known.iter().any(|k| k == *n));
        match (
            parse_variant(&format!("mimalloc:{}={value}", setting.name)),
            installed_name,
        ) {
            (Ok(variant), Some(name)) => {
                assert_eq!(
                    variant.env[0].0,
                    format!("MIMALLOC_{}", name.to_uppercase())
                )
            }
            (Err(AllocatorError::UnknownSetting { known: listed, .. }), None) => {
                assert!(listed.contains("eager_commit"), "{listed}")
            }
            (result, name) => panic!(
                "{}: {result:?} while the installed name is {name:?}",
                setting.name
            ),
        }
    }
}

#[test]
fn the_documentation_lists_every_setting() {
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/allocators.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    for table in [
        settings::GLIBC,
        settings::JEMALLOC,
        settings::MIMALLOC,
        settings::TCMALLOC,
        settings::TBBMALLOC,
    ] {
        for setting in table {
            assert!(
                doc.contains(&format!("| `{}` |", setting.name)),
                "{} not in {}",
                setting.name,
                doc_path.display()
            );
        }
    }
}
