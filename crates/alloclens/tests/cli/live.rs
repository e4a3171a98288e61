//! `alloclens live` driven in a real terminal: tmux runs it in a pane of a given size, keys are
//! sent, the screen is captured and polled (with a deadline, never a sleep) until it shows what
//! is awaited. The figures on the screen are checked against the results directory the same run
//! writes (watch.json), and the verdict against `alloclens watch` of the same program.
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;
use testkit::{alloclens, require};

/// A tmux server of its own (its socket named after the test), one window of `width` x
/// `height` running `command` in `sh`, the pane kept after the command ends so its last screen
/// can be read. The server is killed on drop.
struct Tmux {
    socket: String,
}

const DEADLINE: Duration = Duration::from_secs(30);

impl Tmux {
    fn start(width: u16, height: u16, command: &str) -> Tmux {
        static N: AtomicU32 = AtomicU32::new(0);
        let socket = format!(
            "alloclens-live-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let tmux = Tmux { socket };
        // The shell stays after alloclens ends, so its summary and status are on the screen.
        let line = format!("{command}; echo \"live exit status $?\"; exec sleep 60");
        tmux.run(&[
            "new-session",
            "-d",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            "sh",
            "-c",
            &line,
        ]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p"])
    }

    fn keys(&self, keys: &str) {
        self.run(&["send-keys", keys]);
    }

    /// The screen once `done` holds for it; the last screen in the failure otherwise.
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        let found = testkit::poll_until(DEADLINE, || {
            last = self.screen();
            done(&last)
        });
        assert!(found, "the screen never showed {what}:\n{last}");
        last
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

fn shell_quote(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| format!("'{}'", p.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `alloclens live ARGS -o DIR -- PROGRAM` as a shell line.
fn live_line(dir: &Path, args: &[&str], program: &[&str]) -> String {
    let exe = testkit::alloclens_exe();
    let mut parts = vec![exe.as_str(), "live"];
    parts.extend_from_slice(args);
    let dir = dir.display().to_string();
    parts.extend_from_slice(&["-o", &dir, "--"]);
    parts.extend_from_slice(program);
    shell_quote(&parts)
}

/// `alloclens live --interval 100ms --pid PID -o DIR` as a shell line.
fn live_pid_line(dir: &Path, pid: u32) -> String {
    let exe = testkit::alloclens_exe();
    let (pid, dir) = (pid.to_string(), dir.display().to_string());
    shell_quote(&[
        &exe,
        "live",
        "--interval",
        "100ms",
        "--pid",
        &pid,
        "-o",
        &dir,
    ])
}

/// `matrix leak`, leaking until killed, for a viewer to attach to.
fn leaking_matrix() -> std::process::Child {
    Command::new(testkit::program("matrix"))
        .args(["leak", "60000", "100"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// A figure of the "now" panel ("RSS  61.9 MiB"), in bytes, with the screen's rounding (half
/// a step of its unit); Some(None) for "-" (not measured).
fn figure(screen: &str, name: &str) -> Option<Option<(f64, f64)>> {
    // The panel is in the first lines; the verdict's sentence below names figures too.
    let line = screen.lines().skip(1).take(9).find_map(|l| {
        let at = l.find(&format!(" {name} "))?;
        Some(l[at + name.len() + 1..].trim_start().to_string())
    })?;
    let mut words = line.split_whitespace();
    let value = words.next()?;
    if value == "-" {
        return Some(None);
    }
    let value: f64 = value.parse().ok()?;
    let unit = match words.next()? {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1048576.0,
        "GiB" => 1073741824.0,
        _ => return None,
    };
    Some(Some((
        value * unit,
        if unit == 1.0 { 0.5 } else { 0.05 * unit },
    )))
}

fn watch_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("watch.json")).unwrap()).unwrap()
}

const PANELS: [&str; 7] = [
    "alloclens live",
    "memory over time",
    "now, t",
    "call sites",
    "verdict",
    "s:sort",
    "threads merged: no per-thread data",
];

/// Every panel of the view is on the screen. A capture may catch the terminal while a frame is
/// being written (in row order, the changed cells only): the waits ask for every panel, and for
/// the end the key line's `q:leave` (its last row changes last), so a screen checked is whole.
fn shows_every_panel(screen: &str) -> bool {
    PANELS.iter().all(|p| screen.contains(p))
}

fn assert_every_panel(screen: &str) {
    for panel in PANELS {
        assert!(
            screen.contains(panel),
            "no '{panel}' on the screen:\n{screen}"
        );
    }
}

/// The figures of the last sample on the screen equal watch.json's `last`, within the screen's
/// rounding.
fn assert_figures_match(screen: &str, json: &Value) {
    for (name, key) in [
        ("RSS", "rss"),
        ("PSS", "pss"),
        ("heap RSS", "heap"),
        ("live", "live_bytes"),
        ("free", "free_resident"),
    ] {
        let shown = figure(screen, name).unwrap_or_else(|| panic!("no {name}:\n{screen}"));
        let written = json["last"][key].as_f64();
        match (shown, written) {
            (Some((shown, step)), Some(written)) => assert!(
                (shown - written).abs() <= step,
                "{name}: screen {shown} B, watch.json {written} B\n{screen}"
            ),
            (None, None) => {}
            _ => panic!("{name}: screen {shown:?}, watch.json {written:?}\n{screen}"),
        }
    }
}

/// `alloclens watch` of the same program (another run, beside the view's: the test waits for
/// the longer of the two, not for both one after the other).
struct Watched {
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl Watched {
    fn start(dir: &Path, program: &[&str]) -> Watched {
        let child = Command::new(testkit::alloclens_exe())
            .args(["watch", "--interval", "100ms", "-o"])
            .arg(dir)
            .arg("--")
            .args(program)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Watched {
            child,
            dir: dir.to_path_buf(),
        }
    }

    /// Its verdict's class.
    fn class(mut self) -> String {
        self.child.wait().unwrap();
        watch_json(&self.dir)["verdict"]["class"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

fn program(name: &str) -> String {
    testkit::program(name).display().to_string()
}

/// A leak at 80x24: every panel, the live figures, the site, the verdict of watch.json; quitting
/// after the end leaves the summary, and the directory is one `report` draws.
#[test]
fn live_on_a_leak_shows_what_watch_writes() {
    require!(program "tmux");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("leak");
    let matrix = program("matrix");
    // Long enough for a reading of the table while it runs (one a second) on a loaded machine.
    let leak = [matrix.as_str(), "leak", "3500", "50"];
    let tmux = Tmux::start(80, 24, &live_line(&dir, &["--interval", "100ms"], &leak));
    let watched = Watched::start(&tmp.path().join("watched"), &leak);
    // While it runs: the site of matrix's mallocs, its growth, the verdict so far.
    let running = tmux.wait_for("the call site and the verdict so far", |s| {
        s.contains("main ") && s.contains("verdict so far: leak") && shows_every_panel(s)
    });
    assert_every_panel(&running);
    assert!(running.contains("q:quit+end program"), "{running}");
    let over = tmux.wait_for("the end", |s| {
        s.contains("verdict (watch.json)") && s.contains("q:leave") && shows_every_panel(s)
    });
    assert_every_panel(&over);
    let json = watch_json(&dir);
    assert_eq!(json["verdict"]["class"], "leak");
    assert!(over.contains("verdict (watch.json): leak"), "{over}");
    assert!(over.contains("program exited with status 0"), "{over}");
    assert_figures_match(&over, &json);
    // The same program under `watch` gets the same verdict.
    assert_eq!(watched.class(), "leak");
    tmux.keys("q");
    let summary = tmux.wait_for("the summary", |s| s.contains("live exit status"));
    assert!(summary.contains("live exit status 0"), "{summary}");
    assert!(dir.join("program.out").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("program.out")).unwrap(),
        "done\n"
    );
    alloclens().arg("report").arg(&dir).ok();
}

/// Fragmentation at 80x24 with the output pane: every panel, the allocator's free bytes as
/// watch.json has them, and the verdict of `watch` for the same program.
#[test]
fn live_on_fragmentation_shows_what_watch_writes() {
    require!(program "tmux");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("frag");
    let matrix = program("matrix");
    let frag = [matrix.as_str(), "frag", "3000", "100"];
    let args = ["--interval", "100ms", "--output-pane"];
    let tmux = Tmux::start(80, 24, &live_line(&dir, &args, &frag));
    let watched = Watched::start(&tmp.path().join("watched"), &frag);
    let over = tmux.wait_for("the end", |s| {
        s.contains("verdict (watch.json)") && s.contains("q:leave") && shows_every_panel(s)
    });
    assert_every_panel(&over);
    let json = watch_json(&dir);
    let class = json["verdict"]["class"].as_str().unwrap().to_string();
    assert_eq!(class, "fragmentation", "{over}");
    assert!(
        over.contains("verdict (watch.json): fragmentation"),
        "{over}"
    );
    assert_figures_match(&over, &json);
    // The pane shows the program's output (matrix says "done" at its end).
    assert!(over.lines().any(|l| l.trim() == "done"), "{over}");
    assert_eq!(watched.class(), class);
    tmux.keys("q");
    tmux.wait_for("the summary", |s| s.contains("live exit status 0"));
}

/// The rows of the call sites' table, in order (the names of profile_sites's functions).
fn site_order(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.starts_with("site_"))
        .map(str::to_string)
        .collect()
}

/// `s` sorts the call sites by growth, then by name.
#[test]
fn the_sort_key_reorders_the_sites() {
    require!(program "tmux");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sites");
    let sites = program("profile_sites");
    // Its stdin is /dev/null: it builds its four sites and exits; the view stays. At a sample
    // every 16 KiB, 32 MiB of sites apart by 5 to 20 % of it are 10 standard errors apart or
    // more: their order by in-use bytes is the true one.
    let args = ["--interval", "100ms", "--profile", "16KiB"];
    let line = live_line(&dir, &args, &[&sites, "1", "32"]);
    let tmux = Tmux::start(80, 24, &line);
    let by_inuse = tmux.wait_for("the four sites", |s| site_order(s).len() == 4);
    assert_eq!(
        site_order(&by_inuse),
        ["site_half", "site_thirty", "site_fifteen", "site_five"],
        "{by_inuse}"
    );
    tmux.keys("s");
    tmux.wait_for("the sort by growth", |s| s.contains("growth▼"));
    tmux.keys("s");
    let by_name = tmux.wait_for("the sort by site", |s| {
        s.contains("site▼") && site_order(s).len() == 4
    });
    assert_eq!(
        site_order(&by_name),
        ["site_fifteen", "site_five", "site_half", "site_thirty"],
        "{by_name}"
    );
}

/// Quitting while a program live started runs ends it (SIGTERM), and the watch's results say so.
#[test]
fn quitting_ends_a_program_live_started() {
    require!(program "tmux");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("quit");
    let matrix = program("matrix");
    let line = live_line(
        &dir,
        &["--interval", "100ms"],
        &[&matrix, "leak", "60000", "100"],
    );
    let tmux = Tmux::start(80, 24, &line);
    tmux.wait_for("a sample", |s| s.contains("running") && s.contains("pid "));
    tmux.keys("q");
    let summary = tmux.wait_for("the summary", |s| s.contains("live exit status"));
    // matrix does not catch SIGTERM: killed by it, 128 + 15 as `watch` gives it.
    assert!(summary.contains("live exit status 143"), "{summary}");
    let json = watch_json(&dir);
    let root = json["root_pid"].as_u64().unwrap() as u32;
    assert!(!procmem::is_alive(root), "{summary}");
    assert_eq!(json["still_running"], false, "{summary}");
    // The engine sees the exit before or after the interrupt: either is the truth.
    assert!(
        json["ending"] == "exited" || json["ending"] == "interrupted",
        "{summary}"
    );
    assert_eq!(json["exit"]["signal"], 15, "{summary}");
}

/// The rows of DIR/samples.csv (the collector appends each sample as it takes it).
fn rows(dir: &Path) -> usize {
    watch::read_samples(&dir.join("samples.csv")).map_or(0, |s| s.len())
}

/// The number of samples the chart's title says it holds ("memory over time, 57 samples").
fn samples_shown(screen: &str) -> Option<usize> {
    let at = screen.find("memory over time, ")? + "memory over time, ".len();
    screen[at..].split_whitespace().next()?.parse().ok()
}

/// The pid of the session's background collector, while it runs.
fn collector_pid(dir: &Path) -> Option<u32> {
    let pid = std::fs::read_to_string(dir.join("collector.pid")).ok()?;
    let pid: u32 = pid.trim().parse().ok()?;
    procmem::is_alive(pid).then_some(pid)
}

/// `live --pid`, quit with "keep": the collector goes on with no viewer (samples.csv grows), a
/// second viewer shows the whole history (every sample since the first attach, none missing
/// between the viewers), and its stop key ends the collector, which writes watch's results.
#[test]
fn a_collector_kept_on_quit_collects_with_no_viewer_until_stopped() {
    require!(program "tmux");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("session");
    let mut program = leaking_matrix();
    let pid = program.id();
    let line = live_pid_line(&dir, pid);
    let first = Tmux::start(80, 24, &line);
    first.wait_for("the attached view", |s| {
        s.contains("q:quit (keep or stop?)") && s.contains("verdict so far: leak")
    });
    first.keys("q");
    first.wait_for("the question", |s| {
        s.contains("keep collecting with no viewer?")
    });
    first.keys("k");
    let left = first.wait_for("the viewer's end", |s| s.contains("live exit status"));
    assert!(left.contains("live exit status 0"), "{left}");
    let collector = collector_pid(&dir).expect("the collector runs on");
    // With no viewer, the samples go on.
    let at_quit = rows(&dir);
    testkit::wait_until("samples with no viewer", DEADLINE, || {
        rows(&dir) >= at_quit + 5
    });
    assert!(procmem::is_alive(pid));

    let at_second = rows(&dir);
    let second = Tmux::start(80, 24, &line);
    let resumed = second.wait_for("the whole history", |s| {
        samples_shown(s).is_some_and(|n| n >= at_second) && shows_every_panel(s)
    });
    assert_every_panel(&resumed);
    // One collector all along: no earlier viewer's history, no gap.
    assert!(!resumed.contains("earlier viewers to"), "{resumed}");
    assert!(
        resumed.contains(&format!("collector {collector}")),
        "{resumed}"
    );
    second.keys("q");
    second.wait_for("the question", |s| {
        s.contains("keep collecting with no viewer?")
    });
    second.keys("s");
    let summary = second.wait_for("the summary", |s| s.contains("live exit status"));
    assert!(summary.contains("results in"), "{summary}");
    // The collector wrote watch's results and is gone; the process runs on.
    assert_eq!(collector_pid(&dir), None);
    // The view leaves once the results are in (the pid file removed after them); the process
    // exits right after.
    testkit::wait_until("the collector's exit", DEADLINE, || {
        !procmem::is_alive(collector)
    });
    let json = watch_json(&dir);
    assert_eq!(json["ending"], "interrupted", "{json}");
    assert_eq!(json["still_running"], true, "{json}");
    assert_eq!(json["samples_kept"].as_u64().unwrap() as usize, rows(&dir));
    let samples = watch::read_samples(&dir.join("samples.csv")).unwrap();
    assert!(samples.windows(2).all(|w| w[0].t_s < w[1].t_s));
    alloclens().arg("report").arg(&dir).ok();
    assert!(procmem::is_alive(pid));
    let _ = program.kill();
    let _ = program.wait();
}

/// The watched process exits while no viewer looks: the collector ends by itself, its results
/// written (the process's exit), and `--stop` then says nothing runs, in one line.
#[test]
fn the_process_exiting_ends_the_collector() {
    require!(program "tmux");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("exits");
    let mut program = leaking_matrix();
    let pid = program.id();
    let line = format!("{} --on-quit keep", live_pid_line(&dir, pid));
    let viewer = Tmux::start(80, 24, &line);
    viewer.wait_for("the attached view", |s| {
        s.contains("q:quit, collecting goes on") && s.contains("verdict so far")
    });
    viewer.keys("q");
    viewer.wait_for("the viewer's end", |s| s.contains("live exit status 0"));
    let collector = collector_pid(&dir).expect("the collector runs on");
    program.kill().unwrap();
    program.wait().unwrap();
    testkit::wait_until("the collector's end", DEADLINE, || {
        !procmem::is_alive(collector)
    });
    assert!(!dir.join("collector.pid").exists());
    let json = watch_json(&dir);
    assert_eq!(json["ending"], "exited", "{json}");
    assert_eq!(json["still_running"], false, "{json}");
    let stderr = alloclens()
        .args(["live", "--stop", "--pid", &pid.to_string(), "-o"])
        .arg(&dir)
        .fails_with(1);
    assert!(
        stderr.starts_with("alloclens: error: no background collector runs in")
            && stderr.trim().lines().count() == 1,
        "{stderr}"
    );
}

/// Without a terminal, one line says what to do, and nothing is started or written.
#[test]
fn live_without_a_terminal_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("none");
    let stderr = alloclens()
        .args(["live", "-o"])
        .arg(&dir)
        .args(["--", "true"])
        .fails_with(1);
    assert_eq!(
        stderr.trim(),
        "alloclens: error: alloclens live draws on a terminal and its standard output is not one: run it in a terminal, or use `alloclens watch` for a log"
    );
    assert!(!dir.exists());
}

/// The terminal of an attached viewer goes away (its ssh session dropped: tmux's server killed,
/// SIGHUP): the viewer ends, the collector collects on (samples.csv grows, no results yet), and
/// `live --pid PID --stop` ends it with watch's results and summary.
#[test]
fn a_dropped_terminal_leaves_the_collector_running() {
    require!(program "tmux");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dropped");
    let mut program = leaking_matrix();
    let pid = program.id();
    let line = live_pid_line(&dir, pid);
    let first = Tmux::start(80, 24, &line);
    first.wait_for("a few samples", |s| s.contains("verdict so far: leak"));
    let collector = collector_pid(&dir).expect("a collector");
    drop(first);
    let at_drop = rows(&dir);
    testkit::wait_until("samples after the hang-up", DEADLINE, || {
        rows(&dir) >= at_drop + 5
    });
    assert_eq!(collector_pid(&dir), Some(collector));
    assert!(watch_json(&dir)["ending"].is_null());
    let out = alloclens()
        .args(["live", "--stop", "--pid", &pid.to_string(), "-o"])
        .arg(&dir)
        .ok();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("results in"), "{stderr}");
    assert!(!procmem::is_alive(collector));
    let json = watch_json(&dir);
    assert_eq!(json["ending"], "interrupted", "{json}");
    assert!(
        json["samples_kept"].as_u64().unwrap() as usize > at_drop,
        "{json}"
    );
    assert!(procmem::is_alive(pid));
    let _ = program.kill();
    let _ = program.wait();
}
