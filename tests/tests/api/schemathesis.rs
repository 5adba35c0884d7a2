//! The HTTP/JSON API against its own OpenAPI document (`docs/openapi.json`):
//! schemathesis, with every check, sends generated requests, valid and
//! invalid, to every operation of a live `raftlockd dev` cluster's leader,
//! the NDJSON streams included (`tests/schemathesis/run.sh --short`). It
//! fails on a valid request refused, an invalid one accepted, a server
//! error or an answer the document does not describe.
//!
//! schemathesis comes from PyPI. The README promises `cargo test` on a
//! machine with only the Rust toolchain, so where no virtual environment
//! with schemathesis is named in `SCHEMATHESIS_VENV` (or found at
//! `target/schemathesis-venv`) this test says so and passes; CI installs one
//! and sets `RAFTLOCK_REQUIRE_SCHEMATHESIS=1`, so there it cannot skip.
//! The full run (100 cases per operation) is `tests/schemathesis/run.sh`.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn every_http_operation_keeps_to_the_openapi_document_under_schemathesis() {
    let _serial = raftlock_tests::exclusive();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned();
    let venv = std::env::var_os("SCHEMATHESIS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/schemathesis-venv"));
    if !venv.join("bin/schemathesis").is_file() {
        assert!(
            std::env::var_os("RAFTLOCK_REQUIRE_SCHEMATHESIS").is_none(),
            "RAFTLOCK_REQUIRE_SCHEMATHESIS is set but {} has no schemathesis",
            venv.display()
        );
        eprintln!(
            "SKIPPED: no schemathesis in {}: run tests/schemathesis/run.sh once (it installs it there from PyPI), or name a venv in SCHEMATHESIS_VENV",
            venv.display()
        );
        return;
    }
    let out = Command::new("bash")
        .arg(root.join("tests/schemathesis/run.sh"))
        .arg("--short")
        .current_dir(&root)
        .env("RAFTLOCKD", raftlock_tests::binary("raftlockd"))
        .env("SCHEMATHESIS_VENV", &venv)
        .output()
        .expect("runs tests/schemathesis/run.sh");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "schemathesis found failures:\n{text}");
    // A run that generated nothing checked nothing.
    assert!(
        text.contains(" passed") && !text.contains("No operations"),
        "schemathesis ran no cases:\n{text}"
    );
}
