//! `record --stacks`: the stacks of known call sites (progs/sites.c), checked frame by frame
//! against the symbol table of the binary (`nm`), across threads, fork, exec and dlopen.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::common::programs;
use trace::{Event, Op, Record, TraceReader};

/// Function name -> [start, end) in the file.
type Symbols = HashMap<String, (u64, u64)>;

/// The symbols of `file` (`nm -S`), read once per file.
fn symbols(file: &Path) -> Symbols {
    static CACHE: std::sync::Mutex<Vec<(std::path::PathBuf, Symbols)>> =
        std::sync::Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap();
    if let Some((_, s)) = cache.iter().find(|(p, _)| p == file) {
        return s.clone();
    }
    let s = read_symbols(file);
    cache.push((file.to_path_buf(), s.clone()));
    s
}

fn read_symbols(file: &Path) -> Symbols {
    let out = Command::new("nm")
        .args(["-S", "--defined-only"])
        .arg(file)
        .output()
        .expect("run nm");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4).then(|| {
                let a = u64::from_str_radix(f[0], 16).unwrap();
                let n = u64::from_str_radix(f[1], 16).unwrap();
                (f[3].to_string(), (a, a + n))
            })
        })
        .collect()
}

/// The build-id `readelf -n` shows for `file`.
fn build_id(file: &Path) -> Option<String> {
    let out = Command::new("readelf").arg("-n").arg(file).output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
}

struct Recorded {
    reader: TraceReader<std::io::BufReader<std::fs::File>>,
    /// Per stream: its info and events.
    streams: Vec<(trace::ProcessInfo, Vec<Event>)>,
}

/// Tests record at the same time: each recording gets a file of its own.
static NEXT: AtomicU32 = AtomicU32::new(0);

fn record(args: &[&str], frees: bool) -> Recorded {
    let p = programs();
    let out = p.dir.path().join(format!(
        "stacks-{}.alt",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut command: Vec<OsString> = vec![p.sites.clone().into()];
    command.extend(args.iter().map(OsString::from));
    let mut o = recorder::RecordOptions::new(command, out.clone());
    o.stacks = Some(recorder::StackOptions {
        frees,
        ..recorder::StackOptions::all(64)
    });
    let summary = recorder::record(&o).unwrap();
    assert!(summary.warnings.is_empty(), "{:?}", summary.warnings);
    let mut reader = TraceReader::open(&out).unwrap();
    assert!(reader.damage().is_none());
    assert!(reader.has_stacks());
    let mut streams = Vec::new();
    for s in 0..reader.streams().len() {
        let info = reader.streams()[s].info.clone();
        let events = reader
            .records(s)
            .unwrap()
            .filter_map(|r| match r.unwrap() {
                Record::Event(e) => Some(e),
                Record::Marker(_) => None,
            })
            .collect();
        streams.push((info, events));
    }
    Recorded { reader, streams }
}

impl Recorded {
    /// Allocations of `size` bytes in stream `s`.
    fn allocs(&self, s: usize, size: u64) -> Vec<&Event> {
        self.streams[s]
            .1
            .iter()
            .filter(|e| !e.op.is_free() && e.size == size)
            .collect()
    }

    /// The one stack of the allocations of `size` in stream `s` (asserting they share it),
    /// with their count.
    fn site(&self, s: usize, size: u64) -> (u32, usize, &[u64]) {
        let a = self.allocs(s, size);
        let ids: BTreeSet<u32> = a.iter().map(|e| e.stack).collect();
        assert_eq!(ids.len(), 1, "size {size}: stacks {ids:?}");
        let id = *ids.first().unwrap();
        assert_ne!(id, 0, "size {size} has no stack");
        (id, a.len(), self.reader.stacks().get(id).unwrap())
    }

    /// The function of `file` that return address `ret` (in stream `s`'s image) is in.
    fn function(&self, s: usize, file: &Path, ret: u64) -> Option<String> {
        let info = &self.streams[s].0;
        let name = std::fs::canonicalize(file).unwrap();
        let m = self
            .reader
            .modules_of_image(info)
            .find(|m| Path::new(&m.path) == name || Path::new(&m.path) == file)
            .unwrap_or_else(|| panic!("no module {} for {info:?}", file.display()));
        let at = (ret - 1).checked_sub(m.bias)?;
        symbols(file)
            .into_iter()
            .find(|(_, (lo, hi))| (*lo..*hi).contains(&at))
            .map(|(n, _)| n)
    }

    fn functions(&self, s: usize, file: &Path, frames: &[u64], n: usize) -> Vec<String> {
        frames[..n]
            .iter()
            .map(|&r| self.function(s, file, r).unwrap_or_else(|| "?".into()))
            .collect()
    }
}

#[test]
fn known_sites_have_their_exact_stacks_across_threads_and_fork() {
    let bin = &programs().sites;
    let r = record(&[], false);
    assert_eq!(r.streams.len(), 2, "the parent and its fork child");
    let (parent, child) = (0, 1);
    assert_eq!(r.streams[child].0.ppid, r.streams[parent].0.pid);

    let (a, n, frames) = r.site(parent, 48);
    assert_eq!(n, 1000);
    assert_eq!(
        r.functions(parent, bin, frames, 3),
        ["alloc_block", "site_a", "main"]
    );
    // Inlined: the helper's call to malloc is in site_b itself.
    let (b, n, frames) = r.site(parent, 4096);
    assert_eq!(n, 10);
    assert_eq!(r.functions(parent, bin, frames, 2), ["site_b", "main"]);
    let (c, n, frames) = r.site(parent, 777);
    assert_eq!(n, 5);
    assert_eq!(r.functions(parent, bin, frames, 2), ["site_c", "main"]);
    // Another thread: its own stack, interned in the same table.
    let (t, n, frames) = r.site(parent, 200);
    assert_eq!(n, 100);
    assert_eq!(
        r.functions(parent, bin, frames, 2),
        ["alloc_block", "site_t"]
    );
    let main_tid = r.allocs(parent, 48)[0].tid;
    assert!(r.allocs(parent, 200).iter().all(|e| e.tid != main_tid));
    // Fork: the child's site_d is the parent's stack, same id (same addresses, shared arena).
    let (d, n, frames) = r.site(parent, 99);
    assert_eq!(n, 3);
    assert_eq!(
        r.functions(parent, bin, frames, 4),
        ["alloc_block", "site_d", "d_around_fork", "main"]
    );
    let (d_child, n, _) = r.site(child, 99);
    assert_eq!((d_child, n), (d, 3));
    let (f, n, frames) = r.site(child, 300);
    assert_eq!(n, 20);
    assert_eq!(
        r.functions(child, bin, frames, 3),
        ["alloc_block", "site_f", "main"]
    );
    // A fork child's stacks are symbolised with its own modules, recorded under its pid.
    assert!(r.reader.modules_of(r.streams[child].0.pid).count() >= 3);
    assert!(r.allocs(parent, 300).is_empty());

    // Distinct sites, distinct ids; ids are 1..=len, each stack stored once.
    let ids = BTreeSet::from([a, b, c, t, d, f]);
    assert_eq!(ids.len(), 6);
    let table = r.reader.stacks();
    let distinct: BTreeSet<&[u64]> = table.iter().map(|(_, s)| s).collect();
    assert_eq!(distinct.len(), table.len(), "a stack stored twice");
    // Frees carry no stack without --free-stacks.
    assert!(r
        .streams
        .iter()
        .flat_map(|s| &s.1)
        .all(|e| !e.op.is_free() || e.stack == 0));

    // Modules: the executable with its build-id, in both processes, and libc.
    let want = build_id(bin);
    for s in [parent, child] {
        let info = &r.streams[s].0;
        let exe = r
            .reader
            .modules_of_image(info)
            .find(|m| m.path.ends_with("/sites"))
            .expect("the executable's module");
        assert_eq!(exe.build_id_hex(), want);
        assert!(r
            .reader
            .modules_of_image(info)
            .any(|m| m.path.contains("libc.so")));
    }
}

#[test]
fn frees_stacks_when_asked() {
    let bin = &programs().sites;
    let r = record(&[], true);
    // site_a frees its blocks itself: every free of a 48-byte block has site_a's stack.
    let frees: Vec<&Event> = r.streams[0]
        .1
        .iter()
        .filter(|e| e.op == Op::Free && e.stack != 0)
        .collect();
    assert!(
        frees.len() >= 1000 + 10 + 3 + 100,
        "{} frees with stacks",
        frees.len()
    );
    let mut by_fn: HashMap<String, usize> = HashMap::new();
    for e in frees {
        let f = r.reader.stacks().get(e.stack).unwrap();
        *by_fn
            .entry(r.functions(0, bin, f, 1)[0].clone())
            .or_default() += 1;
    }
    assert_eq!(by_fn.get("site_a"), Some(&1000), "{by_fn:?}");
    assert_eq!(by_fn.get("site_b"), Some(&10), "{by_fn:?}");
    assert_eq!(by_fn.get("site_t"), Some(&100), "{by_fn:?}");
}

#[test]
fn exec_gives_a_new_image_with_its_own_modules_and_stacks() {
    let bin = &programs().sites;
    let r = record(&["exec"], false);
    let s = r
        .streams
        .iter()
        .position(|(i, _)| i.exec_index == 1)
        .expect("the exec'd image");
    let (_, n, frames) = r.site(s, 555);
    assert_eq!(n, 7);
    assert_eq!(r.functions(s, bin, frames, 2), ["site_e", "main"]);
}

#[test]
fn dlopen_library_is_recorded_with_its_stacks_even_after_dlclose() {
    let p = programs();
    let plugin = p.plugin.to_str().unwrap().to_string();
    let r = record(&["dlopen", &plugin], false);
    let (_, n, frames) = r.site(0, 1901);
    assert_eq!(n, 50);
    assert_eq!(
        r.function(0, &p.plugin, frames[0]).as_deref(),
        Some("plugin_churn")
    );
    assert_eq!(r.function(0, &p.sites, frames[1]).as_deref(), Some("main"));
}

/// `analyze::sites` on the recording of progs/sites.c: exact calls, bytes, leaks and lifetimes
/// per site; the sites' peak contributions add up to the process peak that the main analysis
/// computes on its own, and their leaks to its leak figure.
#[test]
fn site_statistics_are_exact() {
    let r = record(&[], false);
    let mut reader = TraceReader::open(r.reader.path()).unwrap();
    let sites = analyze::sites::trace_sites(&mut reader).unwrap();
    let of = |s: usize, size: u64| {
        let (id, _, _) = r.site(s, size);
        sites[s]
            .sites
            .iter()
            .find(|x| x.stack == id)
            .cloned()
            .unwrap()
    };
    let a = of(0, 48);
    assert_eq!((a.calls, a.requested_bytes), (1000, 48_000));
    assert_eq!((a.ended, a.lifetime_zero, a.leaked_blocks), (1000, 1000, 0));
    assert_eq!(a.lifetime_calls.max(), 0);
    assert_eq!((a.sizes.total(), a.sizes.max()), (1000, 48));
    // site_b: ten blocks, each freed after the nine calls that follow its allocation.
    let b = of(0, 4096);
    assert_eq!(
        (b.calls, b.requested_bytes, b.ended, b.lifetime_zero),
        (10, 40_960, 10, 0)
    );
    assert_eq!((b.lifetime_calls.max(), b.lifetime_calls.mean()), (9, 9.0));
    let c = of(0, 777);
    assert_eq!(
        (c.calls, c.leaked_blocks, c.leaked_bytes, c.ended),
        (5, 5, 3885, 0)
    );
    let t = of(0, 200);
    assert_eq!((t.calls, t.ended, t.lifetime_zero), (100, 100, 100));
    let d_parent = of(0, 99);
    let d_child = of(1, 99);
    assert_eq!((d_parent.calls, d_child.calls), (3, 3));
    assert_eq!(
        (d_parent.stack, d_parent.pid),
        (d_child.stack, r.streams[0].0.pid)
    );
    assert_eq!(d_child.pid, r.streams[1].0.pid);
    assert_eq!(of(1, 300).calls, 20);
    // The peak is site_b's ten blocks (the parent's largest live set), plus whatever else was
    // live then; every site's share adds up to the process peak of the main analysis.
    assert_eq!(b.peak_live_bytes, 40_960);
    assert_eq!(c.peak_live_bytes, 0, "site_c allocates after the peak");
    for (s, p) in sites.iter().enumerate() {
        let events = r.streams[s].1.iter().map(|e| Record::Event(*e));
        let main = analyze::analyze_process(p.info.clone(), events, &Default::default());
        assert_eq!(p.peak_live_bytes, main.stats.peak_live_bytes.value);
        let sum: u64 = p.sites.iter().map(|x| x.peak_live_bytes).sum();
        assert_eq!(sum, p.peak_live_bytes, "stream {s}");
        let leaked: u64 = p.sites.iter().map(|x| x.leaked_bytes).sum();
        assert_eq!(leaked, main.stats.leaks.bytes, "stream {s}");
        let calls: u64 = p.sites.iter().map(|x| x.calls).sum();
        let allocating = r.streams[s].1.iter().filter(|e| !e.op.is_free()).count() as u64;
        assert_eq!(calls, allocating);
    }
}
