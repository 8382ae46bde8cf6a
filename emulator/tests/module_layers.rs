//! The emulator's top modules (`pub mod` lines of `src/lib.rs`) form layers that only point
//! down (docs/architecture.md): no module reaches, directly or through others, back to
//! itself. A module uses another when its code (comments left out) names `crate::other`,
//! in a `use` line, a `use crate::{…}` group or a path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The `pub mod`/`mod` names of `lib.rs`.
fn top_modules(src: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))?;
            Some(rest.trim_end_matches(';').trim().to_string())
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Code without `//` comments (doc comments included: an intra-doc link is not a use).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |k| &l[..k]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top modules `code` names: `crate::m` paths and the members of `crate::{…}` groups.
fn uses(code: &str, tops: &[String]) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(k) = rest.find("crate::") {
        let after = &rest[k + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // `crate::{a, b::c, …}`: the first segment of each member, at depth 0.
            let mut depth = 0;
            let mut member = String::new();
            let mut members = Vec::new();
            for ch in group.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => members.push(std::mem::take(&mut member)),
                    _ => member.push(ch),
                }
            }
            members.push(member);
            for m in members {
                let first: String = m
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.insert(first);
            }
        } else {
            let first: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.insert(first);
        }
        rest = after;
    }
    found.retain(|m| tops.contains(m));
    found
}

/// Who uses whom among the top modules of the crate at `src`.
fn graph(src: &Path) -> Graph {
    let tops = top_modules(src);
    let mut g = Graph::new();
    for t in &tops {
        let mut files = Vec::new();
        let file = src.join(format!("{t}.rs"));
        if file.is_file() {
            files.push(file);
        }
        if src.join(t).is_dir() {
            rust_files(&src.join(t), &mut files);
        }
        let mut used = BTreeSet::new();
        for f in files {
            used.extend(uses(&code_of(&std::fs::read_to_string(f).unwrap()), &tops));
        }
        used.remove(t);
        g.insert(t.clone(), used);
    }
    g
}

/// A cycle of `g` as the path of its modules (first = last), if there is one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        n: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(k) = path.iter().position(|p| p == n) {
            let mut c = path[k..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(g, m, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(g, n, &mut Vec::new(), &mut done))
}

#[test]
fn top_modules_have_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    assert!(g.len() > 10, "top modules not found: {g:?}");
    // The layers docs/architecture.md draws, as a spot check that uses are seen.
    assert!(g["engine"].contains("jit") && g["jit"].contains("vcpu"));
    assert!(g["machine"].contains("accel") && g["accel"].contains("sync"));
    if let Some(c) = find_cycle(&g) {
        panic!("module cycle: {}\nuses: {g:#?}", c.join(" -> "));
    }
}

#[test]
fn a_cycle_is_found() {
    let tops: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    let mut g = Graph::new();
    g.insert("a".into(), uses("use crate::{b::X, std};", &tops));
    g.insert(
        "b".into(),
        uses(&code_of("let x = crate::c::y(); // crate::a"), &tops),
    );
    g.insert("c".into(), BTreeSet::new());
    assert_eq!(find_cycle(&g), None);
    g.insert(
        "c".into(),
        uses(&code_of("use crate::a;\n// crate::b"), &tops),
    );
    assert_eq!(
        find_cycle(&g).map(|c| c.join(" ")),
        Some("a b c a".to_string())
    );
}
