//! The Go client's own test suite (`clients/go`, `go test ./...` on real
//! clusters of this workspace's `raftlockd`), run as part of
//! `cargo test --workspace`, after `go vet` and `gofmt -l`.
//!
//! It needs `go` (1.19 or later, Debian's `golang-go`); the module uses
//! only the standard library, so no module proxy is contacted. On a
//! machine without Go this test says so and passes, unless
//! `RAFTLOCK_REQUIRE_GO_CLIENT=1` (as CI sets it), which makes a missing
//! toolchain a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Whether `go version` runs.
fn go_runs() -> bool {
    Command::new("go")
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Whether `dir` can be written to (creating it if needed).
fn writable(dir: &Path) -> bool {
    if std::fs::create_dir_all(dir).is_err() {
        return false;
    }
    let probe = dir.join(".raftlock-write-probe");
    let ok = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

/// `go ARGS` in the module, with a build cache and module path under
/// `target/` when the home directory cannot hold them, and no network for
/// modules (there is nothing to fetch).
fn go(module: &Path, target: &Path, raftlockd: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new("go");
    cmd.args(args)
        .current_dir(module)
        .env("RAFTLOCKD", raftlockd)
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local");
    let home_ok = std::env::var_os("HOME")
        .map(PathBuf::from)
        .is_some_and(|h| writable(&h.join(".cache")));
    if !home_ok {
        cmd.env("GOCACHE", target.join("go/cache"))
            .env("GOPATH", target.join("go/path"));
    }
    cmd.output().expect("runs go")
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_go_client_passes_vet_gofmt_and_its_tests_against_real_clusters() {
    let _serial = raftlock_tests::exclusive();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned();
    let module = root.join("clients/go");
    if !go_runs() {
        assert!(
            std::env::var_os("RAFTLOCK_REQUIRE_GO_CLIENT").is_none(),
            "RAFTLOCK_REQUIRE_GO_CLIENT is set but go cannot be run"
        );
        eprintln!("SKIPPED: the Go client's tests need go: apt-get install golang-go");
        return;
    }
    let target = root.join("target");
    let raftlockd = raftlock_tests::binary("raftlockd");

    let vet = go(&module, &target, &raftlockd, &["vet", "./..."]);
    assert!(vet.status.success(), "go vet ./... failed:\n{}", text(&vet));

    let fmt = Command::new("gofmt")
        .args(["-l", "."])
        .current_dir(&module)
        .output()
        .expect("runs gofmt");
    assert!(fmt.status.success(), "gofmt -l failed:\n{}", text(&fmt));
    let unformatted = String::from_utf8_lossy(&fmt.stdout).trim().to_owned();
    assert!(
        unformatted.is_empty(),
        "files not formatted by gofmt:\n{unformatted}"
    );

    // -count=1: a cached pass would test nothing against this raftlockd.
    let test = go(
        &module,
        &target,
        &raftlockd,
        &["test", "-count=1", "-v", "./..."],
    );
    let out = text(&test);
    println!("{out}");
    assert!(
        test.status.success(),
        "the Go client's tests failed:\n{out}"
    );
    // A run that found nothing to test tested nothing.
    let passed = out.lines().filter(|l| l.starts_with("--- PASS")).count();
    let failed = out.lines().filter(|l| l.starts_with("--- FAIL")).count();
    assert!(
        passed > 0 && failed == 0,
        "go test ran no tests, or not all passed (pass {passed}, fail {failed}):\n{out}"
    );
}
