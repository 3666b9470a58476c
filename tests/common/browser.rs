//! A real browser for the HTML report and the Mermaid charts: Debian's headless Chromium
//! (`.ci/run` installs it), driven by `tests/browser/report.mjs` and `mermaid.mjs` through
//! playwright-core, with Mermaid's own bundle loaded from disk. The npm packages are installed
//! once per machine (`npm ci`) into a cache folder named by the lockfile's hash.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::Digest;

/// The `node_modules` folder the scripts load playwright-core and Mermaid from, installed from
/// `tests/browser/package-lock.json` on first use in this process.
fn modules() -> PathBuf {
    static READY: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);
    let mut ready = READY.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(modules) = ready.as_ref() {
        return modules.clone();
    }
    let browser = super::repo("tests/browser");
    let lock = std::fs::read(browser.join("package-lock.json")).expect("tests/browser/package-lock.json");
    let hash = hex::encode(&sha2::Sha256::digest(&lock)[..8]);
    let folder = super::cache_dir("BF_BROWSER_CACHE", "bf-browser").join(hash);
    let modules = folder.join("node_modules");
    if !modules.join("playwright-core").is_dir() || !modules.join("mermaid").is_dir() {
        std::fs::create_dir_all(&folder).unwrap();
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(browser.join(file), folder.join(file)).unwrap();
        }
        let installed = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
            .arg(&folder)
            .status()
            .expect("npm (Node 20) on the PATH");
        assert!(installed.success(), "npm ci of tests/browser into {}", folder.display());
    }
    *ready = Some(modules.clone());
    modules
}

/// What `script` (in `tests/browser/`) prints as its one JSON document, run on `args`.
fn run(script: &str, args: &[&Path]) -> serde_json::Value {
    let chromium = std::env::var_os("BF_CHROMIUM").unwrap_or_else(|| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "no Chromium at {}: `apt-get install chromium` (.ci/run installs it)",
        chromium.to_string_lossy()
    );
    let output = Command::new("node")
        .arg(super::repo("tests/browser").join(script))
        .args(args)
        .env("BF_BROWSER_MODULES", modules())
        .env("BF_CHROMIUM", &chromium)
        .output()
        .expect("node (Node 20) on the PATH");
    assert!(
        output.status.success(),
        "{script} {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("{script} printed no JSON ({e}):\n{}", String::from_utf8_lossy(&output.stdout))
    })
}

/// The HTML report at `html` as Chromium shows it: console errors, requests, the charts' hit
/// areas, window band and lines in page coordinates, the text; a screenshot saved at `png`.
pub fn open_report(html: &Path, png: &Path) -> serde_json::Value {
    run("report.mjs", &[html, png])
}

/// Every Mermaid block of the markdown file at `markdown`, parsed and rendered by Mermaid itself.
pub fn mermaid_blocks(markdown: &Path) -> Vec<serde_json::Value> {
    let answer = run("mermaid.mjs", &[markdown]);
    answer["blocks"].as_array().expect("mermaid.mjs lists blocks").clone()
}

/// Where a test keeps what a person may want to look at after it ran (a screenshot):
/// `BF_TEST_ARTIFACTS`, else `test-artifacts/` in the build's target folder.
pub fn artifact(name: &str) -> PathBuf {
    let folder = std::env::var_os("BF_TEST_ARTIFACTS").map(PathBuf::from).unwrap_or_else(|| {
        let target =
            std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| super::repo("target"));
        target.join("test-artifacts")
    });
    std::fs::create_dir_all(&folder).unwrap();
    folder.join(name)
}
