//! The harness's top modules form layers: a module only points down, never back up through a
//! circle of imports. A circle means no module of it can be read, tested or moved without
//! the others; this test names every circle with the references that close it.
//!
//! [`module_graph`] and [`cycles`] take any crate's `src` folder, so the same check fits the
//! emulator (`emulator/src`) as well.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Top module → the top modules its code names through `crate::` (in `use` items and in
/// paths), each with the first place it does so (`file:line`).
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// Reads a crate's `src` folder: each `name.rs` beside `lib.rs` (with its folder `name/`,
/// if any) and each `name/mod.rs` is one top module. The code's `crate::` references count;
/// comments and the trailing `#[cfg(test)]` module do not (tests may reach anywhere).
fn module_graph(src: &Path) -> Graph {
    let mut graph = Graph::new();
    for entry in fs::read_dir(src).expect("reading the src folder") {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let files = if path.is_dir() {
            if !path.join("mod.rs").exists() {
                continue;
            }
            rust_files(&path)
        } else if path.extension().is_some_and(|e| e == "rs") {
            if name == "lib" || name == "main" {
                continue;
            }
            let mut v = vec![path.clone()];
            let folder = src.join(&name);
            if folder.is_dir() {
                v.extend(rust_files(&folder));
            }
            v
        } else {
            continue;
        };
        let deps = graph.entry(name.clone()).or_default();
        for file in files {
            let text = fs::read_to_string(&file).unwrap();
            for (line, target) in crate_references(&text) {
                if target != name {
                    deps.entry(target)
                        .or_insert_with(|| format!("{}:{line}", file.display()));
                }
            }
        }
    }
    // Names that are no top module (`crate::Error` re-exported at the root, macros) are no edges.
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|d, _| modules.contains(d));
    }
    graph
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The first path segment after each `crate::` in the code of `text`, with its line (1-based):
/// `crate::a::f`, `use crate::{a, b::c}` and `crate::{a::{x, y}}` name `a` (and `b`); a group
/// may span lines.
fn crate_references(text: &str) -> Vec<(usize, String)> {
    let code = code_of(text);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("crate::") {
        let at = from + found;
        from = at + "crate::".len();
        // `$crate::` and `foo_crate::` are other paths.
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c == '$' || c == '_' || c.is_alphanumeric()) {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = &code[from..];
        let names = match rest.strip_prefix('{') {
            Some(group) => top_level_names(group),
            None => vec![identifier(rest)],
        };
        out.extend(
            names
                .into_iter()
                .filter(|n| !n.is_empty())
                .map(|n| (line, n)),
        );
    }
    out
}

/// `text` without its comments, up to its `#[cfg(test)]` module; lines keep their numbers.
fn code_of(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod ").unwrap_or(text.len());
    let lines = text[..end].lines().map(|l| match l.find("//") {
        Some(at) => &l[..at],
        None => l,
    });
    lines.collect::<Vec<_>>().join("\n")
}

fn identifier(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The first segments of a brace group's members, to its closing brace (`a, b::{c, d}, e}`
/// gives `a`, `b`, `e`).
fn top_level_names(group: &str) -> Vec<String> {
    let mut members = vec![String::new()];
    let mut depth = 0;
    for c in group.chars() {
        match c {
            '}' if depth == 0 => break,
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => members.push(String::new()),
            _ if depth == 0 => members.last_mut().unwrap().push(c),
            _ => {}
        }
    }
    members
        .iter()
        .map(|m| identifier(m))
        .filter(|n| !n.is_empty())
        .collect()
}

/// Every circle of the graph (its strongly connected components of more than one module),
/// each as its modules in order, sorted.
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    // Tarjan's algorithm, recursive: module graphs are small.
    struct State<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        for w in s.graph[v].keys() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.stack.contains(&w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let at = s.stack.iter().position(|&x| x == v).unwrap();
            let mut comp: Vec<String> = s.stack.drain(at..).map(str::to_string).collect();
            if comp.len() > 1 {
                comp.sort();
                s.found.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found.sort();
    s.found
}

/// A report of the circles, naming each reference inside one.
fn describe(graph: &Graph, found: &[Vec<String>]) -> String {
    let mut out = String::new();
    for comp in found {
        out.push_str(&format!("circle: {}\n", comp.join(", ")));
        for m in comp {
            for (d, at) in &graph[m] {
                if comp.contains(d) {
                    out.push_str(&format!("  {m} -> {d} ({at})\n"));
                }
            }
        }
    }
    out
}

fn check(src: &Path) {
    let graph = module_graph(src);
    assert!(graph.len() > 3, "no modules found in {}", src.display());
    let found = cycles(&graph);
    assert!(found.is_empty(), "{}", describe(&graph, &found));
}

#[test]
fn harness_modules_only_point_down() {
    check(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
}

/// The check finds a circle through a `use` group, an inline path and a folder module, and
/// passes a layered crate.
#[test]
fn a_circle_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    fs::write(
        src.join("lib.rs"),
        "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n",
    )
    .unwrap();
    fs::write(
        src.join("a.rs"),
        "use crate::{\n    b::{X, Y},\n    d,\n};\n",
    )
    .unwrap();
    fs::create_dir(src.join("b")).unwrap();
    fs::write(src.join("b/mod.rs"), "mod inner;\n").unwrap();
    fs::write(
        src.join("b/inner.rs"),
        "// crate::d in a comment is no reference\nfn f() {\n    crate::c::g()\n}\n",
    )
    .unwrap();
    fs::write(
        src.join("c.rs"),
        "pub fn g() {}\n#[cfg(test)]\nmod tests { use crate::b; }\n",
    )
    .unwrap();
    fs::write(src.join("d.rs"), "").unwrap();
    let graph = module_graph(src);
    assert_eq!(
        graph["a"].keys().collect::<Vec<_>>(),
        ["b", "d"],
        "{graph:?}"
    );
    assert!(cycles(&graph).is_empty(), "{graph:?}");

    fs::write(src.join("c.rs"), "pub fn g() { let _ = crate::a::F; }\n").unwrap();
    let graph = module_graph(src);
    assert_eq!(cycles(&graph), [["a", "b", "c"]]);
    let text = describe(&graph, &cycles(&graph));
    assert!(text.contains("c -> a ("), "{text}");
}

#[test]
fn group_names() {
    assert_eq!(top_level_names("a, b::{c, d}, e};"), ["a", "b", "e"]);
    assert_eq!(top_level_names("self as x, y}"), ["self", "y"]);
    assert_eq!(top_level_names("\n    a,\n    b::c,\n};"), ["a", "b"]);
}
