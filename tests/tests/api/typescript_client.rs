//! The TypeScript client's own test suite (`clients/typescript/tests`,
//! `node --test` on real clusters of this workspace's `raftlockd`), run as
//! part of `cargo test --workspace`.
//!
//! It needs `tsc` (Debian's `node-typescript`) and `node` (18 or later);
//! the package itself takes nothing from npm. On a machine with only the
//! Rust toolchain this test says what is missing and passes, unless
//! `RAFTLOCK_REQUIRE_TYPESCRIPT_CLIENT=1` (as CI sets it), which makes a
//! missing tool a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether `tool --version` runs.
fn runs(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// The number after `# <key> ` in node's TAP summary.
fn tap_count(text: &str, key: &str) -> Option<u64> {
    let prefix = format!("# {key} ");
    text.lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(&prefix)?.trim().parse().ok())
}

/// The compiled test files, sorted, so a file removed from the sources but
/// left in `dist/` cannot run (the build starts from an empty `dist/`).
fn test_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(".test.js"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn the_typescript_client_passes_its_tests_against_real_clusters() {
    let _serial = raftlock_tests::exclusive();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned();
    let package = root.join("clients/typescript");
    let (tsc, node) = (runs("tsc"), runs("node"));
    if !(tsc && node) {
        let missing = match (tsc, node) {
            (false, false) => "tsc and node",
            (false, true) => "tsc",
            _ => "node",
        };
        assert!(
            std::env::var_os("RAFTLOCK_REQUIRE_TYPESCRIPT_CLIENT").is_none(),
            "RAFTLOCK_REQUIRE_TYPESCRIPT_CLIENT is set but {missing} cannot be run"
        );
        eprintln!(
            "SKIPPED: the TypeScript client's tests need {missing}: apt-get install node-typescript nodejs"
        );
        return;
    }

    let dist = package.join("dist");
    if dist.exists() {
        std::fs::remove_dir_all(&dist).expect("removes the old build");
    }
    let build = Command::new("tsc")
        .arg("-p")
        .arg(&package)
        .output()
        .expect("runs tsc");
    assert!(
        build.status.success(),
        "tsc -p clients/typescript failed:\n{}{}",
        String::from_utf8_lossy(&build.stdout),
        String::from_utf8_lossy(&build.stderr)
    );

    let files = test_files(&dist.join("tests"));
    assert!(
        !files.is_empty(),
        "tsc built no test files under {}",
        dist.join("tests").display()
    );
    let out = Command::new("node")
        .args(["--test", "--test-concurrency=1", "--test-reporter=tap"])
        .args(&files)
        .current_dir(&package)
        .env("RAFTLOCKD", raftlock_tests::binary("raftlockd"))
        .output()
        .expect("runs node --test");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(
        out.status.success(),
        "the TypeScript client's tests failed:\n{text}"
    );
    // A run that found nothing to test tested nothing.
    let (tests, pass, fail) = (
        tap_count(&text, "tests"),
        tap_count(&text, "pass"),
        tap_count(&text, "fail"),
    );
    assert!(
        matches!(tests, Some(n) if n > 0) && pass == tests && fail == Some(0),
        "node --test ran no tests, or not all passed (tests {tests:?}, pass {pass:?}, fail {fail:?}):\n{text}"
    );
}
