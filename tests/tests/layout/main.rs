//! The workspace's shape, checked like its behaviour: within each crate,
//! top-level modules import each other without loops (a loop means none of
//! them can be read, changed or tested alone), and no source file grows past
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

/// The top-level module a file of `src` belongs to (`None` for the crate
/// root and binaries' roots).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main" | "bin")).then(|| name.to_owned())
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

/// The top-level modules `code` names through `crate::` paths, grouped
/// imports (`use crate::{a, b::C}`) included.
fn crate_references(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Only the first segment of each item: `{a::X, b}` names a, b.
            let mut depth = 0;
            let mut item_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        item_start = true;
                        continue;
                    }
                    _ => {}
                }
                if item_start && !c.is_whitespace() {
                    out.insert(ident(&group[j..]));
                    item_start = false;
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty() && m.chars().next().is_some_and(char::is_lowercase));
    out
}

/// Edges between the top-level modules of the crate whose sources are in
/// `src`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let Some(module) = top_module(src, &f) else {
            continue;
        };
        let text = std::fs::read_to_string(&f).expect("readable source");
        let refs = crate_references(&code(&text));
        let edges = graph.entry(module.clone()).or_default();
        edges.extend(refs.into_iter().filter(|r| *r != module));
    }
    graph
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

const CRATES: [&str; 7] = [
    "proto",
    "raft-store",
    "node",
    "client",
    "jepsen",
    "tests",
    "deploy/local",
];

#[test]
fn no_crate_has_modules_that_import_each_other_in_a_loop() {
    let mut loops = Vec::new();
    for krate in CRATES {
        let graph = module_graph(&workspace().join(krate).join("src"));
        if let Some(cycle) = find_loop(&graph) {
            loops.push(format!("{krate}: {}", cycle.join(" -> ")));
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
    let refs = crate_references("use crate::{a::X, b, c::{D, E}};\nlet x = crate::d::f();");
    assert_eq!(refs, ["a", "b", "c", "d"].map(String::from).into());
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
    assert!(crate_references(&code("// crate::x\n#[cfg(test)]\nuse crate::y;")).is_empty());
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
