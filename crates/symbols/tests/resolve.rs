//! Resolves return addresses captured by real C and C++ programs (testkit's, built with gcc/g++ -g -O2)
//! through their own /proc/self/maps, and checks every frame against binutils' `addr2line -f -i -C`,
//! the independent source.

use std::path::Path;
use std::process::Command;

use symbols::{Frame, Mapping, Symbolizer, Warning};

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The return addresses the program captured and the file mappings it printed.
fn run_program(program: &Path) -> (Vec<u64>, Vec<Mapping>) {
    let stdout = run_ok(&mut Command::new(program));
    let mut addresses = Vec::new();
    let mut mappings = Vec::new();
    for line in stdout.lines() {
        if let Some(ra) = line.strip_prefix("ra 0x") {
            addresses.push(u64::from_str_radix(ra, 16).unwrap());
        } else if let Some(map) = line.strip_prefix("map ") {
            let fields: Vec<&str> = map.split_whitespace().collect();
            if fields.len() < 6 || !fields[5].starts_with('/') {
                continue;
            }
            let (start, end) = fields[0].split_once('-').unwrap();
            mappings.push(Mapping {
                path: fields[5].to_string(),
                build_id: None,
                start: u64::from_str_radix(start, 16).unwrap(),
                end: u64::from_str_radix(end, 16).unwrap(),
                file_offset: u64::from_str_radix(fields[2], 16).unwrap(),
                bias: None,
            });
        }
    }
    assert!(!addresses.is_empty(), "no address captured:\n{stdout}");
    (addresses, mappings)
}

fn build_id(file: &Path) -> Vec<u8> {
    let notes = run_ok(Command::new("readelf").arg("-n").arg(file));
    let hex = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("a build-id note");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// binutils' frames at `address` of `file`: (function, file name:line), innermost first.
fn binutils_frames(file: &Path, address: u64) -> Vec<(String, String)> {
    let out = run_ok(
        Command::new("addr2line")
            .args(["-f", "-i", "-C", "-e"])
            .arg(file)
            .arg(format!("{address:#x}")),
    );
    let lines: Vec<&str> = out.lines().collect();
    lines
        .chunks(2)
        .map(|pair| {
            let location = pair[1].split(" (discriminator").next().unwrap();
            let name = Path::new(location)
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            (pair[0].to_string(), name)
        })
        .collect()
}

fn ours(frames: &[Frame]) -> Vec<(String, String)> {
    frames
        .iter()
        .map(|f| (f.label(), f.location().unwrap_or_else(|| "??:0".into())))
        .collect()
}

fn resolve_all(symbolizer: &mut Symbolizer, program: &Path) -> Vec<std::sync::Arc<[Frame]>> {
    let (addresses, mappings) = run_program(program);
    let space = symbols::AddressSpace::new(mappings);
    addresses
        .iter()
        .map(|&a| symbolizer.resolve(space.find(a), a))
        .collect()
}

fn names(frames: &[Frame]) -> Vec<String> {
    frames.iter().map(Frame::label).collect()
}

#[test]
fn c_functions_and_inlined_frames_match_binutils() {
    let program = testkit::program("captured_sites");
    let mut symbolizer = Symbolizer::new(vec![]);
    let resolved = resolve_all(&mut symbolizer, program);

    assert_eq!(names(&resolved[0]), ["alpha"]);
    assert_eq!(names(&resolved[1]), ["inlined_step", "outer_with_inline"]);
    assert!(resolved[1][0].inlined && !resolved[1][1].inlined);
    for frames in &resolved {
        assert_eq!(&*frames[0].module, program.to_str().unwrap());
        assert!(
            frames.iter().all(|f| f
                .location()
                .is_some_and(|l| l.starts_with("captured_sites.c:"))),
            "{frames:?}"
        );
        assert_eq!(
            ours(frames),
            binutils_frames(program, frames[0].module_address - 1)
        );
    }
    assert_eq!(symbolizer.warnings(), &[]);
}

#[test]
fn cpp_namespace_method_and_template_match_binutils() {
    let program = testkit::program("widget");
    let mut symbolizer = Symbolizer::new(vec![]);
    let resolved = resolve_all(&mut symbolizer, program);

    assert_eq!(names(&resolved[0]), ["ns::Widget::build(int)"]);
    assert_eq!(names(&resolved[1]), ["void ns::fill<long>(long)"]);
    for frames in &resolved {
        assert_eq!(
            ours(frames),
            binutils_frames(program, frames[0].module_address - 1)
        );
    }
}

#[test]
fn stripped_binary_gives_module_plus_address_that_binutils_resolves_in_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let program = testkit::program("captured_sites");
    let stripped = dir.path().join("sites-stripped");
    run_ok(Command::new("strip").arg("-o").arg(&stripped).arg(program));
    let mut symbolizer = Symbolizer::new(vec![]);
    let resolved = resolve_all(&mut symbolizer, &stripped);

    let alpha = &resolved[0];
    assert_eq!(alpha.len(), 1);
    assert_eq!(alpha[0].function, None);
    assert_eq!(
        alpha[0].label(),
        format!("sites-stripped+{:#x}", alpha[0].module_address)
    );
    // The address is the file's own: the unstripped build names it.
    assert_eq!(
        binutils_frames(program, alpha[0].module_address - 1)[0].0,
        "alpha"
    );
}

#[test]
fn separate_debug_file_found_by_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let program = testkit::program("captured_sites");
    let id = build_id(program);
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let debug_dir = dir.path().join("debug/.build-id").join(&hex[..2]);
    std::fs::create_dir_all(&debug_dir).unwrap();
    let debug_file = debug_dir.join(format!("{}.debug", &hex[2..]));
    run_ok(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(program)
            .arg(&debug_file),
    );
    let stripped = dir.path().join("sites-stripped");
    run_ok(
        Command::new("strip")
            .arg("--strip-all")
            .arg("-o")
            .arg(&stripped)
            .arg(program),
    );

    // Without the debug root, nothing names the frames; with it, the same frames as the original.
    let (addresses, mut mappings) = run_program(&stripped);
    for m in mappings
        .iter_mut()
        .filter(|m| m.path == stripped.to_str().unwrap())
    {
        m.build_id = Some(id.clone());
    }
    let space = symbols::AddressSpace::new(mappings);
    let mut bare = Symbolizer::new(vec![]);
    assert_eq!(
        bare.resolve(space.find(addresses[0]), addresses[0])[0].function,
        None
    );
    let mut symbolizer = Symbolizer::new(vec![dir.path().join("debug")]);
    let frames: Vec<_> = addresses
        .iter()
        .map(|&a| symbolizer.resolve(space.find(a), a))
        .collect();
    assert_eq!(names(&frames[0]), ["alpha"]);
    assert_eq!(names(&frames[1]), ["inlined_step", "outer_with_inline"]);
    for f in &frames {
        assert_eq!(ours(f), binutils_frames(program, f[0].module_address - 1));
    }
    assert_eq!(symbolizer.warnings(), &[]);
}

#[test]
fn changed_file_is_not_symbolised_and_warns_once() {
    let program = testkit::program("captured_sites");
    let (addresses, mut mappings) = run_program(program);
    let real = build_id(program);
    for m in mappings
        .iter_mut()
        .filter(|m| m.path == program.to_str().unwrap())
    {
        m.build_id = Some(vec![0xde, 0xad, 0xbe, 0xef]);
    }
    let space = symbols::AddressSpace::new(mappings);
    let mut symbolizer = Symbolizer::new(vec![]);
    for &a in &addresses {
        let frames = symbolizer.resolve(space.find(a), a);
        assert_eq!(
            frames[0].function, None,
            "a changed file must not lend its names"
        );
        assert!(frames[0].label().starts_with("captured_sites+0x"));
    }
    let on_disk: String = real.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        symbolizer.warnings(),
        &[Warning::Changed {
            path: program.to_str().unwrap().into(),
            recorded: "deadbeef".into(),
            on_disk: Some(on_disk)
        }]
    );
    assert!(symbolizer.warnings()[0]
        .to_string()
        .contains("changed since it was recorded"));
}

#[test]
fn missing_file_and_unknown_address_fall_back_to_offsets() {
    let missing = Mapping {
        path: "/nonexistent/libgone.so".into(),
        build_id: None,
        start: 0x7000_0000,
        end: 0x7001_0000,
        file_offset: 0x2000,
        bias: None,
    };
    let mut symbolizer = Symbolizer::new(vec![]);
    let frames = symbolizer.resolve(Some(&missing), 0x7000_0123);
    assert_eq!(frames[0].label(), "libgone.so+0x2123");
    assert_eq!(
        symbolizer.resolve(None, 0x1234)[0].label(),
        "[unknown]+0x1234"
    );
    assert!(
        matches!(&symbolizer.warnings()[0], Warning::Unreadable { path, .. } if path == "/nonexistent/libgone.so")
    );
    let vdso = Mapping {
        path: "[vdso]".into(),
        start: 0x9000,
        end: 0xa000,
        file_offset: 0,
        ..missing.clone()
    };
    assert_eq!(
        symbolizer.resolve(Some(&vdso), 0x9010)[0].label(),
        "[vdso]+0x10"
    );
    assert_eq!(
        symbolizer.warnings().len(),
        1,
        "no file, no warning: {:?}",
        symbolizer.warnings()
    );
}

/// As `record --stacks` records a module: one range from its lowest to its highest segment, with the
/// load bias (a PIE's is where its offset-0 mapping starts).
#[test]
fn whole_module_mapping_with_load_bias_resolves_the_same() {
    let program = testkit::program("captured_sites");
    let (addresses, mappings) = run_program(program);
    let own: Vec<&Mapping> = mappings
        .iter()
        .filter(|m| m.path == program.to_str().unwrap())
        .collect();
    let start = own.iter().map(|m| m.start).min().unwrap();
    let whole = Mapping {
        path: own[0].path.clone(),
        build_id: Some(build_id(program)),
        start,
        end: own.iter().map(|m| m.end).max().unwrap(),
        file_offset: 0,
        bias: Some(start),
    };
    let mut by_bias = Symbolizer::new(vec![]);
    let mut by_maps = Symbolizer::new(vec![]);
    let space = symbols::AddressSpace::new(mappings.clone());
    for &a in &addresses {
        assert_eq!(
            by_bias.resolve(Some(&whole), a),
            by_maps.resolve(space.find(a), a)
        );
    }
    assert_eq!(
        names(&by_bias.resolve(Some(&whole), addresses[1])),
        ["inlined_step", "outer_with_inline"]
    );
}
