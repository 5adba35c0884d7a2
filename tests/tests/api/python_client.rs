//! The Python client's own test suite (`clients/python/tests`, pytest on
//! real clusters of this workspace's `raftlockd`), run as part of
//! `cargo test --workspace`.
//!
//! The README promises `cargo test` on a machine with only the Rust
//! toolchain, where the package and pytest may be missing: then this test
//! says so and passes. CI installs the package into a virtual environment,
//! names its interpreter in `RAFTLOCK_PYTHON` and sets
//! `RAFTLOCK_REQUIRE_PYTHON_CLIENT=1`, so there it cannot be skipped.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_python_client_passes_its_tests_against_real_clusters() {
    let _serial = raftlock_tests::exclusive();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned();
    let python = std::env::var("RAFTLOCK_PYTHON").unwrap_or_else(|_| "python3".into());
    let ready = Command::new(&python)
        .args(["-c", "import raftlock, pytest, pytest_asyncio"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ready {
        assert!(
            std::env::var_os("RAFTLOCK_REQUIRE_PYTHON_CLIENT").is_none(),
            "RAFTLOCK_REQUIRE_PYTHON_CLIENT is set but {python} cannot import raftlock, pytest and pytest_asyncio"
        );
        eprintln!(
            "SKIPPED: install the Python client first: python3 -m venv .venv && .venv/bin/pip install './clients/python[test]' and set RAFTLOCK_PYTHON=.venv/bin/python"
        );
        return;
    }
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(root.join("clients/python"))
        .env("RAFTLOCKD", raftlock_tests::binary("raftlockd"))
        .output()
        .expect("runs pytest");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(
        out.status.success(),
        "the Python client's tests failed:\n{text}"
    );
    // pytest says "N passed"; a run that collected nothing tested nothing.
    assert!(
        text.contains(" passed") && !text.contains("no tests ran"),
        "pytest ran no tests:\n{text}"
    );
}
