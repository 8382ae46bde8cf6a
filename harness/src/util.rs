//! Small helpers shared by the commands: atomic file writes, timestamps, hashes, paths.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// Writes `bytes` to `path` so that readers only ever see the old or the new content: write a
/// temporary file in the same directory, flush it to disk, rename it over the target. A sweep
/// killed at any moment leaves a complete, valid results file behind.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path
        .file_name()
        .context("results path has no file name")?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    {
        let mut f =
            fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    Ok(())
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Civil date (y, m, d) from days since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn split_time(secs: u64) -> (i64, u32, u32, u64, u64, u64) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    (y, m, d, rem / 3600, (rem % 3600) / 60, rem % 60)
}

/// UTC timestamp in RFC 3339, e.g. `2026-11-30T16:19:00Z`.
pub fn rfc3339(secs: u64) -> String {
    let (y, m, d, hh, mm, ss) = split_time(secs);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

pub fn now_rfc3339() -> String {
    rfc3339(unix_now())
}

/// Compact UTC stamp for file names, e.g. `20261130-161900`.
pub fn file_stamp(secs: u64) -> String {
    let (y, m, d, hh, mm, ss) = split_time(secs);
    format!("{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}")
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of a file, streamed (emulator binaries are tens of megabytes).
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The repository root: the nearest ancestor of `start` holding `emulator/Cargo.toml`
/// (the workspace this harness ships in), else `start` itself.
pub fn find_repo_root(start: &Path) -> PathBuf {
    let mut cur = Some(start);
    while let Some(dir) = cur {
        if dir.join("emulator").join("Cargo.toml").is_file() && dir.join("Cargo.toml").is_file() {
            return dir.to_path_buf();
        }
        cur = dir.parent();
    }
    start.to_path_buf()
}

/// Parses a relative threshold: `5%`, `5` (percent) or `0.05`.
pub fn parse_fraction(s: &str) -> Result<f64> {
    let t = s.trim();
    let (num, pct) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let v: f64 = num
        .parse()
        .with_context(|| format!("not a number or percentage: {s:?}"))?;
    let frac = if pct || v >= 1.0 { v / 100.0 } else { v };
    if !(0.0..1.0).contains(&frac) || !frac.is_finite() {
        bail!("threshold {s:?} must be between 0% and 100%");
    }
    Ok(frac)
}

/// Parses a comma-separated list of vCPU counts, e.g. `1,2,4,8` (ranges `1-4` allowed).
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let a: u32 = a
                .trim()
                .parse()
                .with_context(|| format!("bad vCPU count in {part:?}"))?;
            let b: u32 = b
                .trim()
                .parse()
                .with_context(|| format!("bad vCPU count in {part:?}"))?;
            if a == 0 || b < a {
                bail!("bad vCPU range {part:?}");
            }
            out.extend(a..=b);
        } else {
            let n: u32 = part
                .parse()
                .with_context(|| format!("bad vCPU count {part:?}"))?;
            if n == 0 {
                bail!("vCPU counts start at 1");
            }
            out.push(n);
        }
    }
    if out.is_empty() {
        bail!("empty vCPU list {s:?}");
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// A path as stored in results files: relative to the repository root when it lies inside it
/// (so files stay meaningful in another clone), absolute otherwise.
pub fn stored_path(repo: &Path, p: &Path) -> String {
    match p.strip_prefix(repo) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => p.display().to_string(),
    }
}

/// The inverse of [`stored_path`].
pub fn resolve_stored(repo: &Path, s: &str) -> PathBuf {
    let p = Path::new(s);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        repo.join(p)
    }
}

/// Checks a sweep name: it becomes a file name under results/, plots/ and target/lockscale/runs/,
/// so it may hold only letters, digits, `.`, `_` and `-`, and may not start with `.`.
pub fn check_name(name: &str) -> Result<()> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.starts_with('.') || !name.chars().all(ok_char) {
        anyhow::bail!(
            "sweep name {name:?} is not a plain file name (letters, digits, '.', '_', '-'; no path separators, not starting with '.')"
        );
    }
    Ok(())
}

/// Shortens a git revision for file names and labels.
pub fn short_rev(rev: &str) -> String {
    rev.chars().take(12).collect()
}

/// Looks a program name up in `PATH` (paths with a slash are taken as they are).
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Paths on the command line are relative to the current directory (not the repository).
pub fn user_path(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(file_stamp(1_700_000_000), "20231114-221320");
    }

    #[test]
    fn fractions() {
        assert_eq!(parse_fraction("5%").unwrap(), 0.05);
        assert_eq!(parse_fraction("5").unwrap(), 0.05);
        assert_eq!(parse_fraction("0.05").unwrap(), 0.05);
        assert!(parse_fraction("abc").is_err());
        assert!(parse_fraction("150%").is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("4,1,2,2").unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_cpu_list("1-3,8").unwrap(), vec![1, 2, 3, 8]);
        assert!(parse_cpu_list("0").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("").is_err());
    }

    #[test]
    fn atomic_write_replaces() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
    }
}
