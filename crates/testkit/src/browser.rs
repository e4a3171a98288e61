//! Pages checked in a real browser: headless Chromium (Debian's `chromium`) dumps the DOM after
//! the page's scripts ran and takes a screenshot, kept under `target/test-artifacts/` for a look.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// Debian's `chromium` (or `chromium-browser`). None when it is not installed, after the skip
/// policy's note (or failure, where CI runs).
pub fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if found.is_none() {
        crate::require(crate::Need::Program("chromium"), "the browser checks");
    }
    found
}

/// Headless Chromium with a window of `window` (width, height) pixels and a profile of its own.
pub fn headless(browser: &str, profile: &Path, window: (u32, u32)) -> Command {
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--virtual-time-budget=5000",
    ])
    .arg(format!("--window-size={},{}", window.0, window.1))
    .arg(format!("--user-data-dir={}", profile.display()))
    .stdin(Stdio::null());
    cmd
}

/// `target/test-artifacts/`: screenshots kept for a look after the tests.
pub fn artifacts_dir() -> PathBuf {
    let dir = crate::target_dir().join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Opens `url` in a `window`-sized headless Chromium: returns the DOM after its scripts ran, and
/// keeps a screenshot `target/test-artifacts/SCREENSHOT.png`. None when Chromium is missing (see
/// [`chromium`]).
pub fn open_in_browser(url: &str, window: (u32, u32), screenshot: &str) -> Option<String> {
    let browser = chromium()?;
    let profile = tempfile::tempdir().unwrap();
    let out = headless(browser, profile.path(), window)
        .arg("--dump-dom")
        .arg(url)
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed: {:?}", out.status);
    let shot = artifacts_dir().join(format!("{screenshot}.png"));
    let profile = tempfile::tempdir().unwrap();
    let status = headless(browser, profile.path(), window)
        .arg(format!("--screenshot={}", shot.display()))
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success() && shot.metadata().unwrap().len() > 0);
    Some(String::from_utf8(out.stdout).unwrap())
}

/// The text of the element `<pre id="ID">` of a dumped DOM, unescaped (None when absent).
pub fn pre_text(dom: &str, id: &str) -> Option<String> {
    let start = dom.find(&format!("id=\"{id}\""))?;
    let text = &dom[start..];
    let text = &text[text.find('>')? + 1..text.find("</pre>")?];
    Some(unescape_html(text))
}

/// Text of a DOM dump as written: `&lt;`, `&gt;`, `&quot;` and `&amp;` unescaped.
pub fn unescape_html(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// The status the report's pages write after drawing (`crates/report/src/render/html/page.js`).
pub fn render_status(dom: &str) -> Value {
    let text = pre_text(dom, "render-status").expect("status element in the DOM");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("no render status ({e}): {text:?}"))
}
