//! The clients' reason tables are generated from `reasons.proto` (through
//! `raftlock_tests::contract`): a reason is declared in one place.

#[test]
fn the_clients_generated_files_are_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let rewrite = std::env::var_os("REWRITE_CONTRACT").is_some();
    let mut stale = Vec::new();
    for f in raftlock_tests::contract::files() {
        let path = root.join(f.path);
        if rewrite {
            std::fs::write(&path, &f.text).unwrap();
        }
        if std::fs::read_to_string(&path).unwrap_or_default() != f.text {
            stale.push(f.path);
        }
    }
    assert!(
        stale.is_empty(),
        "generated client files are not current: {stale:?}; regenerate them with \
         REWRITE_CONTRACT=1 cargo test -p raftlock-tests --test api contract"
    );
}
