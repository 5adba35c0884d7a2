//! The workspace's shape, checked like its behaviour: within each crate, and
//! within each folder of a crate, modules import each other without loops (a
//! loop means none of them can be read, changed or tested alone), and no source file grows past
//! 800 lines without saying why at its top.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LONG_FILE_LINES: usize = 800;
/// What a file past the limit says in its first lines.
const LONG_FILE_REASON: &str = "longer than 800 lines because";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_owned()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file of `src` (`["locks", "acquire"]` for
/// `locks/acquire.rs`, `["locks"]` for `locks/mod.rs`, `[]` for the crate
/// root and binaries' roots, `None` for files no module path names).
fn module_path(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_str().map(str::to_owned))
        .collect::<Option<_>>()?;
    let last = parts.pop()?;
    if parts.first().is_some_and(|p| p == "bin") {
        return Some(Vec::new());
    }
    let stem = last.strip_suffix(".rs")?;
    if parts.is_empty() && matches!(stem, "lib" | "main") {
        return Some(Vec::new());
    }
    if stem != "mod" {
        parts.push(stem.to_owned());
    }
    Some(parts)
}

/// The code of a file without its `#[cfg(test)]` part and comments: tests
/// may reach anywhere, and a doc link is not a dependency.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a use tree or path expression starting at `s` names, grouped
/// imports expanded: `a::{b, c::{D, E}}` names `a::b`, `a::c::D`, `a::c::E`;
/// and how many bytes of `s` it takes.
fn use_tree(s: &str) -> (Vec<Vec<String>>, usize) {
    fn ident(s: &str) -> (&str, &str) {
        let s = s.trim_start();
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        (&s[..end], &s[end..])
    }
    fn tree<'a>(mut s: &'a str, prefix: &[String], out: &mut Vec<Vec<String>>) -> &'a str {
        let mut path = prefix.to_vec();
        loop {
            let t = s.trim_start();
            if let Some(group) = t.strip_prefix('{') {
                s = group;
                loop {
                    s = tree(s, &path, out);
                    let t = s.trim_start();
                    if let Some(rest) = t.strip_prefix(',') {
                        s = rest;
                        if let Some(rest) = s.trim_start().strip_prefix('}') {
                            return rest;
                        }
                    } else {
                        return t.strip_prefix('}').unwrap_or(t);
                    }
                }
            }
            let (name, rest) = ident(t);
            if name.is_empty() {
                if path.len() > prefix.len() {
                    out.push(path);
                }
                return t;
            }
            path.push(name.to_owned());
            match rest.strip_prefix("::") {
                Some(more) => s = more,
                None => {
                    out.push(path);
                    return rest;
                }
            }
        }
    }
    let mut out = Vec::new();
    let rest = tree(s, &[], &mut out);
    (out, s.len() - rest.len())
}

/// The absolute module paths `code`, the code of the module at `at`, names
/// through `crate::`, `super::` and `self::` paths, grouped imports
/// (`use crate::{a, b::C}`) included.
fn references(code: &str, at: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // Where the last path read ends: a `super::` inside a group is part of it.
    let mut read_to = 0;
    for (i, _) in code.match_indices("::") {
        if i < read_to {
            continue;
        }
        let start = code[..i]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |j| j + 1);
        if !matches!(&code[start..i], "crate" | "super" | "self") {
            continue;
        }
        let (paths, len) = use_tree(&code[start..]);
        read_to = start + len;
        for path in paths {
            let mut abs: Vec<String> = Vec::new();
            let mut segments = path.into_iter().peekable();
            match segments.peek().map(String::as_str) {
                Some("crate") => {
                    segments.next();
                }
                Some("self") => {
                    segments.next();
                    abs = at.to_vec();
                }
                _ => {
                    abs = at.to_vec();
                    while segments.peek().is_some_and(|s| s == "super") {
                        segments.next();
                        abs.pop();
                    }
                }
            }
            abs.extend(segments);
            out.push(abs);
        }
    }
    out
}

/// Edges between the child modules of the module `folder` (`[]` for the
/// crate root) of the crate whose sources are in `src`: which of them each
/// one's code names. A reference into a child's own submodules is an edge
/// to that child.
fn module_graph(src: &Path, folder: &[String]) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let Some(at) = module_path(src, &f) else {
            continue;
        };
        let Some(child) = at.strip_prefix(folder).and_then(|rest| rest.first()) else {
            continue;
        };
        let text = std::fs::read_to_string(&f).expect("readable source");
        let edges = graph.entry(child.clone()).or_default();
        for r in references(&code(&text), &at) {
            if let Some(target) = r.strip_prefix(folder).and_then(|rest| rest.first()) {
                let lower = target.chars().next().is_some_and(char::is_lowercase);
                if lower && target != child {
                    edges.insert(target.clone());
                }
            }
        }
    }
    graph
}

/// Every module of the crate in `src` that has child modules, the crate
/// root (`[]`) first.
fn folders(src: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut out: BTreeSet<Vec<String>> = [Vec::new()].into();
    for f in files {
        if let Some(mut at) = module_path(src, &f) {
            while at.pop().is_some() {
                out.insert(at.clone());
            }
        }
    }
    out.into_iter().collect()
}

/// One loop of the graph, if it has any (as the modules along it).
fn find_loop(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut cycle = path[at..].to_vec();
            cycle.push(m.to_owned());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_owned());
        for next in graph.get(m).into_iter().flatten() {
            if graph.contains_key(next) {
                if let Some(c) = visit(next, graph, path, done) {
                    return Some(c);
                }
            }
        }
        path.pop();
        done.insert(m.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

const CRATES: [&str; 8] = [
    "proto",
    "raft-store",
    "node",
    "client",
    "client/cli",
    "jepsen",
    "tests",
    "deploy/local",
];

/// The import loops among the children of every folder of every crate.
fn loops_in(src: &Path) -> Vec<String> {
    let mut loops = Vec::new();
    for folder in folders(src) {
        if let Some(cycle) = find_loop(&module_graph(src, &folder)) {
            let name = if folder.is_empty() {
                "the crate root".to_owned()
            } else {
                folder.join("::")
            };
            loops.push(format!("{name}: {}", cycle.join(" -> ")));
        }
    }
    loops
}

#[test]
fn no_crate_has_modules_that_import_each_other_in_a_loop() {
    let mut loops = Vec::new();
    for krate in CRATES {
        for l in loops_in(&workspace().join(krate).join("src")) {
            loops.push(format!("{krate}, in {l}"));
        }
    }
    assert!(
        loops.is_empty(),
        "module import loops:\n{}",
        loops.join("\n")
    );
}

#[test]
fn the_loop_finder_finds_loops_and_grouped_imports() {
    let at = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let refs = references(
        "use crate::{a::X, b, c::{D, e::F}};\nlet x = crate::d::f();",
        &[],
    );
    assert_eq!(
        refs,
        [
            at(&["a", "X"]),
            at(&["b"]),
            at(&["c", "D"]),
            at(&["c", "e", "F"]),
            at(&["d", "f"])
        ]
    );
    // Relative paths resolve from the module that writes them.
    assert_eq!(
        references(
            "use super::{waits, super::grpc::X};",
            &at(&["locks", "acquire"])
        ),
        [at(&["locks", "waits"]), at(&["grpc", "X"])]
    );
    assert_eq!(
        references("self::inner::f()", &at(&["locks"])),
        [at(&["locks", "inner", "f"])]
    );
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.insert("a".into(), ["b".to_owned()].into());
    g.insert("b".into(), ["c".to_owned()].into());
    g.insert("c".into(), BTreeSet::new());
    assert_eq!(find_loop(&g), None);
    g.insert("c".into(), ["a".to_owned()].into());
    assert_eq!(
        find_loop(&g),
        Some(["a", "b", "c", "a"].map(String::from).to_vec())
    );
    // A test module's imports and a comment's path are not dependencies.
    assert!(references(&code("// crate::x\n#[cfg(test)]\nuse crate::y;"), &[]).is_empty());
}

/// A loop between two files of one folder, through `super::` one way and
/// `crate::` the other, is found, and named by its folder; the same files
/// without the loop pass.
#[test]
fn a_loop_inside_a_folder_is_found() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("src");
    let write = |rel: &str, text: &str| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    write("lib.rs", "pub mod locks;\npub mod server;\n");
    write("server.rs", "use crate::locks::acquire::Acquire;\n");
    write("locks/mod.rs", "pub mod acquire;\npub mod waits;\n");
    write(
        "locks/acquire.rs",
        "use super::waits::Waits;\npub struct Acquire;\n",
    );
    write("locks/waits.rs", "pub struct Waits;\n");
    assert_eq!(loops_in(&src), Vec::<String>::new());
    write(
        "locks/waits.rs",
        "use crate::locks::{acquire::Acquire};\npub struct Waits;\n",
    );
    assert_eq!(
        loops_in(&src),
        ["locks: acquire -> waits -> acquire".to_owned()]
    );
    // One level down: a file of a nested folder reaches its parent's sibling.
    write("locks/waits.rs", "pub struct Waits;\n");
    write("locks/acquire.rs", "pub mod step;\npub struct Acquire;\n");
    write("locks/acquire/step.rs", "use super::super::waits::Waits;\n");
    write(
        "locks/waits.rs",
        "use super::acquire::Acquire;\npub struct Waits;\n",
    );
    assert_eq!(
        loops_in(&src),
        ["locks: acquire -> waits -> acquire".to_owned()]
    );
}

#[test]
fn long_source_files_say_why_they_are_long() {
    let mut files = Vec::new();
    for krate in CRATES {
        rust_files(&workspace().join(krate), &mut files);
    }
    let mut unexplained = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("readable source");
        let lines = text.lines().count();
        let head = text
            .lines()
            .take(15)
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        if lines > LONG_FILE_LINES && !head.contains(LONG_FILE_REASON) {
            unexplained.push(format!(
                "{} ({lines} lines)",
                f.strip_prefix(workspace()).unwrap_or(&f).display()
            ));
        }
    }
    assert!(
        unexplained.is_empty(),
        "files over {LONG_FILE_LINES} lines without \"{LONG_FILE_REASON} ...\" in their first lines:\n{}",
        unexplained.join("\n")
    );
}

/// The server's files stay short enough to read in one sitting; a test
/// file (`tests.rs`, `*_tests.rs`, `tests/`) may run longer.
const NODE_FILE_LINES: usize = 500;

#[test]
fn no_server_source_file_is_over_500_lines() {
    let mut files = Vec::new();
    rust_files(&workspace().join("node/src"), &mut files);
    let mut long = Vec::new();
    for f in files {
        let rel = f.strip_prefix(workspace()).unwrap_or(&f).to_owned();
        let is_test = rel.components().any(|c| c.as_os_str() == "tests")
            || rel
                .file_stem()
                .and_then(|s| s.to_str())
                .is_some_and(|s| s == "tests" || s.ends_with("_tests"));
        let lines = std::fs::read_to_string(&f)
            .expect("readable source")
            .lines()
            .count();
        if !is_test && lines > NODE_FILE_LINES {
            long.push(format!("{} ({lines} lines)", rel.display()));
        }
    }
    assert!(
        long.is_empty(),
        "node/src files over {NODE_FILE_LINES} lines (split them by what they do):\n{}",
        long.join("\n")
    );
}

/// The fields of `struct name` in `text` that code outside its folder
/// could reach (`pub` or `pub(crate)`; `pub(super)` stays in the folder).
fn reachable_fields(text: &str, name: &str) -> Vec<String> {
    let Some(start) = text.find(&format!("pub struct {name} {{")) else {
        return Vec::new();
    };
    text[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with('}'))
        .map(str::trim_start)
        .filter(|l| l.starts_with("pub ") || l.starts_with("pub(crate)"))
        .map(|l| l.split(':').next().unwrap_or(l).to_owned())
        .collect()
}

/// The lock service, the transports and the operations see a node through
/// its methods (propose, read, who leads), never through its fields.
#[test]
fn the_node_handle_exposes_no_fields() {
    let text = std::fs::read_to_string(workspace().join("node/src/raft/node.rs"))
        .expect("node/src/raft/node.rs");
    assert!(
        text.contains("pub struct Node {"),
        "Node moved: update this test"
    );
    assert_eq!(reachable_fields(&text, "Node"), Vec::<String>::new());
    // The check itself sees a field that is public.
    assert_eq!(
        reachable_fields(
            "pub struct Node {\n    pub(super) id: u64,\n    pub raft: Raft,\n}\n",
            "Node"
        ),
        ["pub raft"]
    );
}

/// Where a file of `node/src` proposes a log entry (`.propose(` or
/// `.propose_reply(` in its code, tests left out).
fn proposes(text: &str) -> bool {
    let code = code(text);
    code.contains(".propose(") || code.contains(".propose_reply(")
}

/// Every client's command reaches the log through the lock service's one
/// pipeline (`Locks::run`), which checks, authorizes and traces it once: no
/// transport handler and no operation proposes for itself. Besides the
/// pipeline, only Raft's own folder (which defines proposing) and the
/// leader's lease driver (expiries and hold caps, the leader's own
/// commands, not a client's) propose.
#[test]
fn only_the_pipeline_proposes_a_clients_command() {
    let src = workspace().join("node/src");
    let allowed = |rel: &Path| {
        rel.starts_with("raft")
            || rel.starts_with("locks/lease")
            || rel == Path::new("locks/pipeline.rs")
    };
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("locks/pipeline.rs")),
        "the pipeline moved: update this test"
    );
    let mut found = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap_or(&f).to_owned();
        let text = std::fs::read_to_string(&f).expect("readable source");
        if proposes(&text) && !allowed(&rel) {
            found.push(rel.display().to_string());
        }
    }
    assert!(
        found.is_empty(),
        "these files propose log entries themselves; make the command an operation (node/src/locks/ops/) and run it through Locks::run:\n{}",
        found.join("\n")
    );
    // The check itself sees a handler that proposes, and not a comment
    // or a test that does.
    assert!(proposes(
        "async fn release(&self) {\n    self.node.propose_reply(cmd).await?;\n}\n"
    ));
    assert!(!proposes(
        "// callers never .propose( directly\n#[cfg(test)]\nmod t { fn f() { n.propose(c); } }\n"
    ));
}
