//! Every file the repository cites in its own text exists in the repository, so that a
//! contributor who clones it can read what the code and the READMEs point at.
//!
//! Cited text is: markdown files whole; the comments of Rust, C/assembly, shell, Python and
//! data files (`//`, `/* */`, `#` lines). A citation is a path ending in `.md`
//! (`docs/locking.md`, `../README.md`) or the target of a relative markdown link
//! (`[text](plots/<name>.png)`). It resolves when the path exists inside the repository
//! relative to the citing file's folder, its crate's root or the repository root. In the
//! repository's own docs (README.md, docs/) a backticked path that starts with a top-level
//! folder (`emulator/src/sync/mod.rs`) must exist as well.
//!
//! Paths with placeholders (`<name>`, `*`, `{N}`, `$out`), suffixes of generated names
//! (`-report.md`) and build outputs (under `target/`) are not citations.

use std::path::{Component, Path, PathBuf};

/// A cited path that does not resolve: where it is cited, and what.
#[derive(Debug)]
struct Broken {
    file: PathBuf,
    line: usize,
    cited: String,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the harness crate lies in the repository root")
        .canonicalize()
        .expect("repository root")
}

/// How a file's cited text is found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Markdown,
    /// `//` comments (and `/* … */`, ` * ` continuation lines for C).
    Slash,
    /// `#` comments.
    Hash,
}

fn kind_of(path: &Path) -> Option<Kind> {
    let name = path.file_name()?.to_str()?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "md" => Some(Kind::Markdown),
        "rs" | "c" | "h" | "S" => Some(Kind::Slash),
        "sh" | "py" | "toml" | "yml" | "yaml" | "insn" | "config" => Some(Kind::Hash),
        "" if name != "Cargo.lock" => {
            // Extensionless scripts (scripts/test, .ci/run): by their shebang.
            let head = std::fs::read(path).ok()?;
            head.starts_with(b"#!").then_some(Kind::Hash)
        }
        _ => None,
    }
}

/// The repository's files worth reading: everything but build output, git's own files and
/// nested repositories (worktrees, scratch checkouts).
fn repo_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let walker = walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            if e.depth() == 0 || !e.file_type().is_dir() {
                return true;
            }
            let name = e.file_name().to_string_lossy();
            let skipped = name == "target"
                || name.starts_with("target-")
                || name == "node_modules"
                || (name.starts_with('.') && name != ".ci");
            !skipped && !e.path().join(".git").exists()
        });
    for e in walker.filter_map(Result::ok) {
        if e.file_type().is_file() {
            out.push(e.into_path());
        }
    }
    out
}

/// The cited text of each line (comments only for source files), with its line number.
fn cited_text(kind: Kind, text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let comment = match kind {
            Kind::Markdown => Some(line.to_string()),
            Kind::Hash => t
                .strip_prefix('#')
                .filter(|rest| !rest.starts_with('!'))
                .map(str::to_string),
            Kind::Slash => {
                if in_block {
                    if let Some(end) = t.find("*/") {
                        in_block = false;
                        Some(t[..end].to_string())
                    } else {
                        Some(t.to_string())
                    }
                } else if let Some(rest) = t.strip_prefix("/*") {
                    in_block = !rest.contains("*/");
                    Some(rest.split("*/").next().unwrap_or("").to_string())
                } else {
                    line_comment(line).map(str::to_string)
                }
            }
        };
        if let Some(c) = comment {
            out.push((i + 1, c));
        }
    }
    out
}

/// The `//` comment of a line of code, if any: the first `//` outside a string literal
/// that is not part of a URL (`https://`).
fn line_comment(line: &str) -> Option<&str> {
    let b = line.as_bytes();
    let mut in_str = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'/' if !in_str && b.get(i + 1) == Some(&b'/') && (i == 0 || b[i - 1] != b':') => {
                return Some(&line[i + 2..]);
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// Placeholders and pieces of generated names: not a file anyone can look for.
fn is_placeholder(before: Option<char>, token: &str) -> bool {
    matches!(before, Some('$' | '*' | '<' | '>' | '{' | '}' | ':' | '%'))
        || token.starts_with('-')
        || token.starts_with("//")
        || token.starts_with('.') && !token.starts_with("./") && !token.starts_with("../")
        || is_build_output(token)
}

/// Files under `target/` are written by builds and runs, never committed.
fn is_build_output(path: &str) -> bool {
    path.trim_start_matches("./").starts_with("target/")
}

/// Paths ending in `.md`.
fn md_paths(text: &str) -> Vec<String> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut k = 0;
    while k < chars.len() {
        if !is_path_char(chars[k].1) {
            k += 1;
            continue;
        }
        let start = k;
        while k < chars.len() && is_path_char(chars[k].1) {
            k += 1;
        }
        let from = chars[start].0;
        let to = chars.get(k).map_or(text.len(), |c| c.0);
        // A run may end in punctuation ("see README.md."): drop trailing dots.
        let token = text[from..to].trim_end_matches('.');
        let before = start.checked_sub(1).map(|p| chars[p].1);
        if token.ends_with(".md")
            && token.len() > 3
            && !token.ends_with("/.md")
            && !is_placeholder(before, token)
        {
            out.push(token.to_string());
        }
    }
    out
}

/// Targets of relative markdown links: `[text](target)`, `![alt](target "title")`.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(p) = rest.find("](") {
        let after = &rest[p + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or("");
        let target = target.trim_start_matches('<').trim_end_matches('>');
        let target = target.split('#').next().unwrap_or("");
        let external = target.contains("://") || target.starts_with("mailto:");
        let placeholder = target.contains(['<', '*', '{', '$']);
        if !target.is_empty() && !external && !placeholder && !is_build_output(target) {
            out.push(target.to_string());
        }
        rest = &after[end..];
    }
    out
}

/// Top-level folders of the repository: a backticked path starting with one names a file of
/// the repository.
const TOP_LEVEL: &[&str] = &[
    "emulator/",
    "harness/",
    "workloads/",
    "scripts/",
    "results/",
    "plots/",
    "docs/",
    ".ci/",
];

/// Backticked repository paths (`emulator/src/sync/mod.rs`), without placeholders.
fn backticked_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut parts = text.split('`');
    parts.next();
    while let Some(inside) = parts.next() {
        let candidate = inside.split_whitespace().next().unwrap_or("");
        let candidate = candidate
            .trim_end_matches([',', ';', ':', ')'])
            .split("::")
            .next()
            .unwrap_or("");
        let is_path = inside.trim() == candidate
            && TOP_LEVEL.iter().any(|t| candidate.starts_with(t))
            && candidate.chars().all(is_path_char);
        if is_path {
            out.push(candidate.to_string());
        }
        parts.next();
    }
    out
}

/// `base/rel` with `.` and `..` folded, or `None` when it leaves `root`.
fn resolve_in(root: &Path, base: &Path, rel: &str) -> Option<PathBuf> {
    let joined = if let Some(abs) = rel.strip_prefix('/') {
        root.join(abs)
    } else {
        base.join(rel)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.starts_with(root).then_some(out)
}

/// The folders a file's relative citations may start from.
fn bases(root: &Path, file: &Path) -> Vec<PathBuf> {
    let dir = file.parent().unwrap_or(root).to_path_buf();
    let mut v = vec![dir.clone()];
    let mut d = Some(dir.as_path());
    while let Some(p) = d {
        if p.join("Cargo.toml").exists() {
            v.push(p.to_path_buf());
            break;
        }
        if p == root {
            break;
        }
        d = p.parent();
    }
    v.push(root.to_path_buf());
    v
}

fn exists(root: &Path, bases: &[PathBuf], cited: &str) -> bool {
    bases
        .iter()
        .filter_map(|b| resolve_in(root, b, cited))
        .any(|p| p.exists())
}

/// Every unresolved citation under `root`, and how many citations were checked.
fn broken_citations(root: &Path) -> (Vec<Broken>, usize) {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in repo_files(root) {
        let Some(kind) = kind_of(&file) else { continue };
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let rel = file.strip_prefix(root).unwrap_or(&file).to_path_buf();
        let own_doc =
            kind == Kind::Markdown && (rel == Path::new("README.md") || rel.starts_with("docs"));
        let bases = bases(root, &file);
        for (line, t) in cited_text(kind, &text) {
            let mut cited = md_paths(&t);
            if kind == Kind::Markdown || t.contains("](") {
                cited.extend(link_targets(&t));
            }
            if own_doc {
                cited.extend(backticked_paths(&t));
            }
            cited.sort();
            cited.dedup();
            for c in cited {
                checked += 1;
                if !exists(root, &bases, &c) {
                    broken.push(Broken {
                        file: rel.clone(),
                        line,
                        cited: c,
                    });
                }
            }
        }
    }
    (broken, checked)
}

#[test]
fn every_cited_file_exists_in_the_repository() {
    let root = repo_root();
    let (broken, checked) = broken_citations(&root);
    // The scan must see the repository's citations (a scan that finds none passes vacuously).
    assert!(checked >= 100, "only {checked} citations found");
    let list: Vec<String> = broken
        .iter()
        .map(|b| format!("{}:{}: {}", b.file.display(), b.line, b.cited))
        .collect();
    assert!(
        broken.is_empty(),
        "{} cited path(s) do not exist in the repository:\n{}",
        broken.len(),
        list.join("\n")
    );
}

#[test]
fn a_missing_citation_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let w = |p: &str, s: &str| {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, s).unwrap();
    };
    w("Cargo.toml", "[workspace]\n");
    w("crate/Cargo.toml", "[package]\n");
    w("docs/locking.md", "# locking\n");
    w(
        "README.md",
        "See [locking](docs/locking.md), `docs/locking.md` and [gone](docs/gone.md).\n\
         `emulator/src/nowhere.rs`; ![plot](plots/<name>.png); results/*.md; `$out/$n-report.md`;\n\
         target/bench.md\n",
    );
    // Names of documents nobody has, put together here so that this file names none itself.
    let design = format!("{}.md", "ABSENT-DESIGN");
    let notes = format!("{}.md", "ABSENT-NOTES");
    w(
        "crate/src/lib.rs",
        &format!(
            "//! Spec: {design}; docs/locking.md; ../docs/locking.md\n\
             let s = \"summary.md\"; // see https://example.org/README.md\n"
        ),
    );
    w(
        "scripts/run",
        &format!("#!/bin/sh\n# see {notes} and ../outside.md\necho x.md\n"),
    );
    let (broken, checked) = broken_citations(&root);
    assert_eq!(checked, 8);
    let mut found: Vec<(String, String)> = broken
        .into_iter()
        .map(|b| (b.file.display().to_string(), b.cited))
        .collect();
    found.sort();
    let want = [
        ("README.md", "docs/gone.md"),
        ("README.md", "emulator/src/nowhere.rs"),
        ("crate/src/lib.rs", design.as_str()),
        ("scripts/run", "../outside.md"),
        ("scripts/run", notes.as_str()),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(f, c)| (f.to_string(), c.to_string()))
        .collect();
    assert_eq!(found, want);
}
