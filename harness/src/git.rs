//! The few git operations the harness needs, through the `git` command line.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running git (is it installed?)")?;
    if !out.status.success() {
        bail!(
            "git {} failed in {}: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The commit checked out in `dir`, when it is a git checkout.
pub fn head(dir: &Path) -> Option<String> {
    git(dir, &["rev-parse", "HEAD"]).ok()
}

/// Whether any of `paths` (relative to `dir`) has uncommitted changes, when it is a checkout.
pub fn dirty(dir: &Path, paths: &[&str]) -> Option<bool> {
    let mut args = vec!["status", "--porcelain", "--untracked-files=normal", "--"];
    args.extend_from_slice(paths);
    git(dir, &args).ok().map(|s| !s.is_empty())
}

/// Resolves a revision (branch, tag, sha, `HEAD~1`) to a full commit id.
pub fn resolve(repo: &Path, rev: &str) -> Result<String> {
    git(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )
    .with_context(|| format!("{rev:?} is not a commit in {}", repo.display()))
}

/// A detached worktree of `commit` under `parent`, reused when it already holds that commit.
pub fn worktree(repo: &Path, commit: &str, parent: &Path) -> Result<PathBuf> {
    let path = parent.join(crate::util::short_rev(commit));
    if path.exists() {
        if head(&path).as_deref() == Some(commit) && dirty(&path, &["."]) == Some(false) {
            return Ok(path);
        }
        let _ = git(
            repo,
            &["worktree", "remove", "--force", &path.display().to_string()],
        );
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("removing stale worktree {}", path.display()))?;
        }
        let _ = git(repo, &["worktree", "prune"]);
    }
    std::fs::create_dir_all(parent)?;
    git(
        repo,
        &[
            "worktree",
            "add",
            "--detach",
            "--force",
            &path.display().to_string(),
            commit,
        ],
    )?;
    Ok(path)
}
