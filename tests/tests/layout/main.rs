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

/// Whether `code` names the running node's type (`Node`, or a path into
/// `raft::node`), as a word: `NodeError` and `NodeId` are other names.
fn names_node(code: &str) -> bool {
    let word = |i: usize, len: usize| {
        let before = code[..i].chars().next_back();
        let after = code[i + len..].chars().next();
        let edge = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        edge(before) && edge(after)
    };
    code.contains("raft::node")
        || code
            .match_indices("Node")
            .any(|(i, _)| word(i, "Node".len()))
}

/// The lock service reaches its node through the `Replica` seam only, so
/// every operation, the pipeline and the wait loops run against a fake in
/// unit tests; transports get the lock service, never the node. The node
/// itself is named only where it is made and run (`raft/`, `server/`); the
/// cluster's administration (membership, status, the admin port and its
/// inspector page) holds a `raft::admin::Admin`, which cannot propose.
#[test]
fn only_raft_and_server_name_the_node() {
    let src = workspace().join("node/src");
    let allowed = |rel: &Path| rel.starts_with("raft") || rel.starts_with("server");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap_or(&f).to_owned();
        let text = std::fs::read_to_string(&f).expect("readable source");
        if names_node(&code(&text)) && !allowed(&rel) {
            found.push(rel.display().to_string());
        }
    }
    assert!(
        found.is_empty(),
        "these files name the node; take a crate::replica::Replica (the lock service), the lock service itself, or crate::raft::admin::Admin (the cluster's administration):\n{}",
        found.join("\n")
    );
    assert!(names_node("fn f(node: &Node) {}"));
    assert!(names_node("use crate::raft::node::NodeError;"));
    assert!(!names_node("fn f() -> Result<NodeId, NodeError> {}"));
    assert!(!names_node(&code(
        "// a Node\n#[cfg(test)]\nfn f(n: Node) {}"
    )));
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
            || rel == Path::new("replica.rs")
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

/// The section of `docs/clients.md` that maps every client-facing rpc to
/// each client's calls for it, and its columns.
const CLIENTS_TABLE: &str = "## What each client calls";
const CLIENTS_COLUMNS: [&str; 7] = [
    "operation",
    "Rust",
    "Python",
    "TypeScript",
    "Go",
    "Java",
    "HTTP",
];
/// Services only nodes speak to each other: no client has calls for them.
const PEER_SERVICES: [&str; 1] = ["Raft"];

/// The rpcs of `proto`'s services other than the peers', as `Service.Rpc`.
fn client_rpcs(proto: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut service: Option<String> = None;
    // Braces are counted, not just a `}` looked for: an rpc with a body
    // (`{ option ...; }`) would otherwise end its service early.
    let mut depth = 0usize;
    for line in proto.lines() {
        let line = line.split("//").next().unwrap_or_default().trim();
        if depth == 0 {
            service = line
                .strip_prefix("service ")
                .and_then(|rest| rest.split(['{', ' ']).next())
                .map(str::to_owned);
        }
        if let (Some(s), Some(rest)) = (&service, line.strip_prefix("rpc ")) {
            let rpc = rest.split('(').next().unwrap_or_default().trim();
            if !PEER_SERVICES.contains(&s.as_str()) {
                out.insert(format!("{s}.{rpc}"));
            }
        }
        depth += line.matches('{').count();
        depth = depth.saturating_sub(line.matches('}').count());
    }
    out
}

/// The rows of the table in `md`'s section `heading`, each as its trimmed
/// cells, the header first; `None` without the section.
fn table_rows(md: &str, heading: &str) -> Option<Vec<Vec<String>>> {
    let start = md.lines().position(|l| l.trim_end() == heading)?;
    let section = md.lines().skip(start + 1);
    let cells = |l: &str| -> Vec<String> {
        let l = l.trim();
        let l = l.strip_prefix('|').unwrap_or(l);
        let l = l.strip_suffix('|').unwrap_or(l);
        l.split('|').map(|c| c.trim().to_owned()).collect()
    };
    let rule = |row: &Vec<String>| row.concat().chars().all(|c| c == '-' || c == ':');
    let rows = section.take_while(|l| !l.starts_with("## "));
    let table = rows.filter(|l| l.trim_start().starts_with('|')).map(cells);
    Some(table.filter(|row| !rule(row)).collect())
}

/// The names a cell gives (`` `a`, `b` ``), none for `—`, or what is wrong
/// with it.
fn cell_names(cell: &str) -> Result<Vec<String>, String> {
    if cell == "—" {
        return Ok(Vec::new());
    }
    let name = |part: &str| {
        part.strip_prefix('`')
            .and_then(|p| p.strip_suffix('`'))
            .filter(|n| !n.is_empty() && !n.contains('`'))
            .map(str::to_owned)
            .ok_or_else(|| format!("{part:?} is neither `—` nor a name in backticks"))
    };
    cell.split(", ").map(name).collect()
}

/// The gRPC method `routes` (each route's path and method, quoted) maps
/// `path` to: the string literal after the path's own.
fn route_method<'a>(routes: &'a str, path: &str) -> Option<&'a str> {
    let quoted = format!("\"{path}\"");
    let after = &routes[routes.find(&quoted)? + quoted.len()..];
    let method = &after[after.find('"')? + 1..];
    Some(&method[..method.find('"')?])
}

/// Everything wrong with the clients table in `table_md` against the rpcs
/// of `proto`, the calls `defined(column, name)` finds in each client's
/// sources and the paths of `routes`: every rpc has one row, every row is
/// an rpc, and every name and path it gives exists and is that rpc's.
fn clients_table_problems(
    proto: &str,
    table_md: &str,
    defined: &dyn Fn(&str, &str) -> bool,
    routes: &str,
) -> Vec<String> {
    let Some(rows) = table_rows(table_md, CLIENTS_TABLE) else {
        return vec![format!("no `{CLIENTS_TABLE}` section")];
    };
    if rows.first().map(Vec::as_slice) != Some(&CLIENTS_COLUMNS.map(String::from)[..]) {
        return vec![format!("the table's header is not {CLIENTS_COLUMNS:?}")];
    }
    let rpcs = client_rpcs(proto);
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, row) in rows.iter().enumerate().skip(1) {
        let op = match cell_names(&row[0]).as_deref() {
            Ok([op]) if row.len() == CLIENTS_COLUMNS.len() => op.clone(),
            _ => {
                problems.push(format!("row {i}: not 7 cells, or no `Service.Rpc` first"));
                continue;
            }
        };
        if !seen.insert(op.clone()) {
            problems.push(format!("row `{op}` appears twice"));
        }
        if !rpcs.contains(&op) {
            problems.push(format!("row `{op}` names no client rpc of raftlock.proto"));
        }
        for (&column, cell) in CLIENTS_COLUMNS.iter().zip(row).skip(1) {
            let names = cell_names(cell).unwrap_or_else(|e| {
                problems.push(format!("row `{op}`, {column}: {e}"));
                Vec::new()
            });
            for name in names {
                let want = format!("raftlock.v1.{}", op.replacen('.', "/", 1));
                let problem = match (column, route_method(routes, &name)) {
                    ("HTTP", None) => format!("`{name}` is not a path of ROUTES"),
                    ("HTTP", Some(m)) if m != want => format!("`{name}` is `{m}`, not `{want}`"),
                    ("HTTP", _) => continue,
                    _ if defined(column, &name) => continue,
                    _ => format!("`{name}` has no public definition in the {column} client"),
                };
                problems.push(format!("row `{op}`, {column}: {problem}"));
            }
        }
    }
    for rpc in rpcs.difference(&seen) {
        problems.push(format!("`{rpc}` of raftlock.proto has no row"));
    }
    problems
}

/// Every file under `dir` whose name ends with `suffix`, build outputs and
/// installed packages left out.
fn files_ending(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let (p, name) = (e.path(), e.file_name().to_string_lossy().into_owned());
        if p.is_dir() && !matches!(name.as_str(), "target" | "node_modules" | "dist") {
            files_ending(&p, suffix, out);
        } else if name.ends_with(suffix) {
            out.push(p);
        }
    }
}

/// The source texts each client's public calls are defined in, by column.
fn client_sources() -> BTreeMap<&'static str, Vec<String>> {
    let root = workspace();
    let go = root.join("clients/go");
    // The generated gRPC stubs define every rpc in CamelCase, declaration
    // files describe Node's APIs, and Go's subpackages and commands are
    // other APIs than the package's: none is what the client offers.
    let keep = |column: &str, f: &PathBuf| {
        let n = f.file_name().unwrap_or_default().to_string_lossy();
        match column {
            "Python" => !n.ends_with("_pb2.py") && !n.ends_with("_pb2_grpc.py"),
            "TypeScript" => !n.ends_with(".d.ts"),
            "Go" => f.parent() == Some(go.as_path()) && !n.ends_with("_test.go"),
            _ => true,
        }
    };
    let clients = [
        ("Rust", "client/src", ".rs"),
        ("Python", "clients/python/src/raftlock", ".py"),
        ("TypeScript", "clients/typescript/src", ".ts"),
        ("Go", "clients/go", ".go"),
        ("Java", "clients/java/src/main/java", ".java"),
    ];
    let mut sources = BTreeMap::new();
    for (column, dir, suffix) in clients {
        let mut files = Vec::new();
        files_ending(&root.join(dir), suffix, &mut files);
        files.retain(|f| keep(column, f));
        let texts = files
            .iter()
            .map(|f| std::fs::read_to_string(f).expect("readable"));
        // A Rust test module's helpers and a doc comment's example are
        // not the client's API.
        let texts = texts.map(|t| if column == "Rust" { code(&t) } else { t });
        sources.insert(column, texts.collect());
    }
    sources
}

/// Whether `texts`, a client's sources, publicly define `name`: `pub` in
/// Rust, without a leading underscore in Python, not `private` or `#` in
/// TypeScript, exported in Go, `public` in Java.
fn defines(column: &str, name: &str, texts: &[String]) -> bool {
    let n = regex::escape(name);
    let (pattern, public) = match column {
        "Rust" => (format!(r"pub (async )?fn {n}\b"), true),
        "Python" => (format!(r"\bdef {n}\("), !name.starts_with('_')),
        "TypeScript" => (
            format!(r"^\s*(public |static |async |export |function |get )*{n}\s*(<.*>)?\("),
            true,
        ),
        "Go" => (
            format!(r"^func (\([^)]*\) )?{n}\("),
            name.starts_with(char::is_uppercase),
        ),
        "Java" => (
            format!(
                r"^\s*public\s+((static|final|synchronized|default|abstract)\s+)*(<[^>]+>\s+)?[\w.<>\[\], ?]+\s+{n}\("
            ),
            true,
        ),
        _ => return false,
    };
    let re = regex::Regex::new(&pattern).expect("a valid pattern");
    // A TypeScript call statement at a line's start looks like a method's
    // definition, but ends with `;`.
    let call = |l: &str| column == "TypeScript" && l.trim_end().ends_with(';');
    let definition = |l: &str| re.is_match(l) && !call(l);
    public && texts.iter().flat_map(|t| t.lines()).any(definition)
}

#[test]
fn clients_table_names_every_operation_and_only_calls_that_exist() {
    let read = |rel: &str| std::fs::read_to_string(workspace().join(rel)).expect(rel);
    let sources = client_sources();
    for (column, texts) in &sources {
        assert!(!texts.is_empty(), "no {column} sources: update this test");
    }
    let problems = clients_table_problems(
        &read("proto/proto/raftlock/v1/raftlock.proto"),
        &read("docs/clients.md"),
        &|column: &str, name: &str| defines(column, name, &sources[column]),
        &raftlock_proto::http::ROUTES
            .iter()
            .map(|r| format!("{:?} {:?}\n", r.path, r.grpc))
            .collect::<String>(),
    );
    assert!(
        problems.is_empty(),
        "docs/clients.md, {CLIENTS_TABLE}:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_java_definition_is_a_public_method_of_that_name() {
    let src = [concat!(
        "public final class Lock {\n",
        "    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {\n",
        "    public static <T> RunOnce.Result<T> runOnce(String name) {\n",
        "    public CompletableFuture<LockGuard> acquireAsync(Duration wait) {\n",
        "    boolean hidden() {\n",
        "    private void release(Grant g) {\n",
        "        lock.unlock();\n",
        "}\n",
    )
    .to_owned()];
    for name in ["tryLock", "runOnce", "acquireAsync"] {
        assert!(defines("Java", name, &src), "{name}");
    }
    for name in ["hidden", "release", "unlock", "Lock"] {
        assert!(!defines("Java", name, &src), "{name}");
    }
}

#[test]
fn clients_table_parser_finds_a_missing_row() {
    let proto = "service Lock {\n  // rpc Commented(A) returns (B);\n  rpc Acquire(A) returns (B);\n  rpc Release(A) returns (B) {\n    option deprecated = true;\n  }\n}\nmessage A {\n  string name = 1;\n}\nservice Raft {\n  rpc Vote(P) returns (P);\n}\n";
    let routes = r#"call("/v1/lock/acquire", "raftlock.v1.Lock/Acquire", "AcquireRequest")"#;
    let defined = |col: &str, name: &str| {
        matches!(
            (col, name),
            ("Rust", "lock") | ("Go", "Lock") | ("Java", "tryLock")
        )
    };
    // The row after the section is not the table's.
    let doc = |rows: &str| {
        format!("# Clients\n\n{CLIENTS_TABLE}\n\nIntro.\n\n| operation | Rust | Python | TypeScript | Go | Java | HTTP |\n|---|---|---|---|---|---|---|\n{rows}\n## Next\n\n| `Lock.Release` | — | — | — | — | — | — |\n")
    };
    let acquire = "| `Lock.Acquire` | `lock` | — | — | `Lock` | `tryLock` | `/v1/lock/acquire` |\n";
    let both = format!("{acquire}| `Lock.Release` | — | — | — | — | — | — |\n");
    let problems = |rows: &str| clients_table_problems(proto, &doc(rows), &defined, routes);
    assert_eq!(problems(&both), Vec::<String>::new());
    let missing = "`Lock.Release` of raftlock.proto has no row";
    assert_eq!(problems(acquire), [missing]);
    // Every kind of mistake, all reported at once.
    let wrong = "| `Lock.Acquire` | `lok` | lock | — | `Lock` | — | `/v1/lock/release` |\n| `Raft.Vote` | — | — | — | — | — | — |\n";
    let found = problems(wrong);
    let expected = [
        "row `Lock.Acquire`, Rust: `lok` has no public definition",
        "row `Lock.Acquire`, Python: \"lock\" is neither",
        "row `Lock.Acquire`, HTTP: `/v1/lock/release` is not a path of ROUTES",
        "row `Raft.Vote` names no client rpc",
        missing,
    ];
    assert_eq!(found.len(), expected.len(), "{found:#?}");
    for (p, e) in found.iter().zip(expected) {
        assert!(p.starts_with(e), "{p:?} does not start with {e:?}");
    }
}
