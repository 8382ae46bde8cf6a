//! Fetching a lock's files and unpacking them, without apt or dpkg.
//!
//! [`fetch_locked`] takes every locked `.deb` by its pool path from the first mirror that
//! serves it with the locked size and SHA-256. Files already in the cache
//! (`target/guest-cache/debs/`) are checked and reused. New ones are downloaded into a staging
//! directory outside the cache and moved in only when every file of the lock arrived intact:
//! a missing file, a wrong hash or a cut-off download leaves the cache as it was.
//!
//! [`unpack_deb`] unpacks one `.deb` (an `ar` archive: `debian-binary`, `control.tar.*`,
//! `data.tar.{xz,zst,gz}`) into a tree, checking its control file against the lock, with the
//! merged-/usr layout (`bin/x` lands in `usr/bin/x`; the image links `/bin` to `usr/bin`).

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::lock::{Lock, LockedPackage, RemoveOnDrop, parse_stanzas};

/// The HTTP client: plain HTTP and HTTPS, no proxy magic beyond the environment's.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(20)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .user_agent(concat!("lockscale/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

/// A mirror's URL of a pool path.
pub fn url_of(mirror: &str, filename: &str) -> String {
    format!("{}/{}", mirror.trim_end_matches('/'), filename)
}

/// Why one URL did not give the file.
enum Miss {
    /// The server answered that it has no such file (404, 410, …).
    NotServed(String),
    /// It sent something else than the locked bytes, or the transfer broke.
    Bad(String),
}

/// Downloads `url` into `dest`, checking size and SHA-256 against the lock while streaming.
fn download(agent: &ureq::Agent, url: &str, p: &LockedPackage, dest: &Path) -> Result<(), Miss> {
    let resp = match agent.get(url).call() {
        Ok(r) => r,
        Err(ureq::Error::StatusCode(code)) => {
            return Err(Miss::NotServed(format!("HTTP {code}")));
        }
        Err(e) => return Err(Miss::NotServed(format!("no answer: {e}"))),
    };
    let mut body = resp
        .into_body()
        .into_with_config()
        .limit(p.size.saturating_add(1))
        .reader();
    let mut write = || -> io::Result<(u64, String)> {
        let mut f = fs::File::create(dest)?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0u64;
        loop {
            let k = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("after {n} of {} bytes: {e}", p.size),
                    ));
                }
            };
            h.update(&buf[..k]);
            f.write_all(&buf[..k])?;
            n += k as u64;
            if n > p.size {
                break;
            }
        }
        f.sync_all()?;
        Ok((n, hex(&h.finalize())))
    };
    match write() {
        Err(e) => {
            let _ = fs::remove_file(dest);
            Err(Miss::Bad(format!("download cut off or failed ({e})")))
        }
        Ok((n, _)) if n < p.size => {
            let _ = fs::remove_file(dest);
            Err(Miss::Bad(format!(
                "truncated: {n} of the locked {} bytes",
                p.size
            )))
        }
        Ok((n, _)) if n > p.size => {
            let _ = fs::remove_file(dest);
            Err(Miss::Bad(format!(
                "longer than the locked {} bytes",
                p.size
            )))
        }
        Ok((_, sha)) if sha != p.sha256 => {
            let _ = fs::remove_file(dest);
            Err(Miss::Bad(format!(
                "SHA-256 mismatch: got {sha}, the lock says {}",
                p.sha256
            )))
        }
        Ok(_) => Ok(()),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The locked files a mirror does not serve (`guest lock` checks a fresh lock with it): one
/// `name version: URL (status)` line each. Asks with HEAD, fetches nothing.
pub fn missing_files(lock: &Lock, mirror: &str) -> Result<Vec<String>> {
    let agent = agent();
    let mut missing = Vec::new();
    for p in &lock.packages {
        let url = url_of(mirror, &p.filename);
        match agent.head(&url).call() {
            Ok(_) => {}
            // A server that does not answer HEAD says nothing about the file.
            Err(ureq::Error::StatusCode(405 | 501)) => {}
            Err(ureq::Error::StatusCode(code)) => {
                missing.push(format!("{}: {url} (HTTP {code})", p.label()))
            }
            Err(e) => bail!("asking {url}: {e}"),
        }
    }
    Ok(missing)
}

/// Refuses a freshly resolved lock of `suite` whose files `mirror` does not all serve: a lock
/// must build today (on 2026-12-04 the ppc64el index of `stable` named files its pool did not
/// have).
pub fn require_served(lock: &Lock, suite: &str, mirror: &str) -> Result<()> {
    let missing = missing_files(lock, mirror)?;
    if !missing.is_empty() {
        bail!(
            "the {suite} index on {mirror} names {} file(s) the mirror does not serve, so a lock \
             of it would not build:\n  {}\nlock another suite (--suite) or try again later",
            missing.len(),
            missing.join("\n  ")
        );
    }
    Ok(())
}

/// Where the fetched `.deb` files are kept.
pub fn debs_dir(cache: &Path) -> PathBuf {
    cache.join("debs")
}

/// Whether a cached file is the locked one (size, then SHA-256).
fn cached_ok(path: &Path, p: &LockedPackage) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == p.size)
        && crate::util::sha256_file(path).is_ok_and(|s| s == p.sha256)
}

/// Makes every locked file present and intact in `cache/debs/`, fetching what is missing from
/// `mirrors` (tried in order, per file). `staging` is a directory outside the cache (created
/// and removed here). Returns the files in lock order. On any failure nothing is written into
/// the cache and the error names every package that could not be had, with the URLs tried.
pub fn fetch_locked(
    lock: &Lock,
    workload: &str,
    mirrors: &[String],
    cache: &Path,
    staging: &Path,
) -> Result<Vec<PathBuf>> {
    let debs = debs_dir(cache);
    let todo: Vec<&LockedPackage> = lock
        .packages
        .iter()
        .filter(|p| !cached_ok(&debs.join(p.file_name()), p))
        .collect();
    let files: Vec<PathBuf> = lock
        .packages
        .iter()
        .map(|p| debs.join(p.file_name()))
        .collect();
    if todo.is_empty() {
        return Ok(files);
    }
    if mirrors.is_empty() {
        bail!(
            "no mirror to fetch {} package files from (--mirror URL)",
            todo.len()
        );
    }
    if staging.exists() {
        fs::remove_dir_all(staging).with_context(|| format!("removing {}", staging.display()))?;
    }
    fs::create_dir_all(staging).with_context(|| format!("creating {}", staging.display()))?;
    let _cleanup = RemoveOnDrop(staging.to_path_buf());
    let total: u64 = todo.iter().map(|p| p.size).sum();
    eprintln!(
        "lockscale: fetching {} locked package files ({:.1} MB) from {}…",
        todo.len(),
        total as f64 / 1e6,
        mirrors.join(", ")
    );
    let agent = agent();
    let mut missing = Vec::new();
    let mut bad = Vec::new();
    for p in &todo {
        let dest = staging.join(p.file_name());
        let mut tried = Vec::new();
        let mut any_bad = false;
        let mut got = false;
        for m in mirrors {
            let url = url_of(m, &p.filename);
            match download(&agent, &url, p, &dest) {
                Ok(()) => {
                    got = true;
                    break;
                }
                Err(Miss::NotServed(why)) => tried.push(format!("{url} ({why})")),
                Err(Miss::Bad(why)) => {
                    any_bad = true;
                    tried.push(format!("{url} ({why})"));
                }
            }
        }
        if !got {
            let line = format!(
                "{} ({}):\n    {}",
                p.label(),
                p.filename,
                tried.join("\n    ")
            );
            if any_bad {
                bad.push(line)
            } else {
                missing.push(line)
            }
        }
    }
    if !missing.is_empty() || !bad.is_empty() {
        let mut msg = String::new();
        if !bad.is_empty() {
            msg.push_str(&format!(
                "{} locked file(s) arrived damaged (nothing was kept):\n  {}\n",
                bad.len(),
                bad.join("\n  ")
            ));
        }
        if !missing.is_empty() {
            msg.push_str(&format!(
                "{} locked file(s) are missing from every mirror:\n  {}\n\
                 another mirror (--mirror URL, or --snapshot for snapshot.debian.org) may still \
                 have them; else re-resolve with `lockscale guest lock {workload}` (a deliberate \
                 change of the guest) and commit the new lock\n",
                missing.len(),
                missing.join("\n  ")
            ));
        }
        msg.push_str("the guest cache was not changed");
        bail!(msg);
    }
    fs::create_dir_all(&debs).with_context(|| format!("creating {}", debs.display()))?;
    for p in &todo {
        let from = staging.join(p.file_name());
        let to = debs.join(p.file_name());
        if fs::rename(&from, &to).is_err() {
            fs::copy(&from, &to).with_context(|| format!("writing {}", to.display()))?;
        }
    }
    Ok(files)
}

/// How a member of a `.deb` is compressed, by its name.
fn decoder<'a, R: Read + 'a>(name: &str, r: R) -> Result<Box<dyn Read + 'a>> {
    Ok(if name.ends_with(".xz") {
        Box::new(liblzma::read::XzDecoder::new_multi_decoder(r))
    } else if name.ends_with(".zst") {
        Box::new(zstd::stream::read::Decoder::new(r)?)
    } else if name.ends_with(".gz") {
        Box::new(flate2::read::GzDecoder::new(r))
    } else if name.ends_with(".tar") {
        Box::new(r)
    } else {
        bail!("member {name} has a compression this unpacker does not read");
    })
}

/// Paths no guest reads, left out while unpacking (as mmdebstrap's dpkg path-excludes did).
fn skipped(rel: &str) -> bool {
    [
        "usr/share/doc",
        "usr/share/man",
        "usr/share/locale",
        "usr/share/info",
    ]
    .iter()
    .any(|t| rel == *t || rel.strip_prefix(t).is_some_and(|r| r.starts_with('/')))
}

/// A member path of data.tar, made relative and merged-/usr: `./bin/sh` → `usr/bin/sh`.
/// `None` for the root itself; an error for anything leaving the tree.
fn member_path(raw: &Path) -> Result<Option<String>> {
    let mut parts = Vec::new();
    for c in raw.components() {
        match c {
            Component::CurDir | Component::RootDir => {}
            Component::Normal(s) => parts.push(
                s.to_str()
                    .with_context(|| format!("{} is not UTF-8", raw.display()))?
                    .to_string(),
            ),
            _ => bail!("member {} leaves the tree", raw.display()),
        }
    }
    if parts.is_empty() {
        return Ok(None);
    }
    if matches!(
        parts[0].as_str(),
        "bin" | "sbin" | "lib" | "lib32" | "lib64" | "libx32" | "libo32"
    ) {
        parts.insert(0, "usr".into());
    }
    Ok(Some(parts.join("/")))
}

/// Tracks which directories of the tree are known to be real directories, so that nothing
/// is ever written through a symbolic link (a package's link could point out of the tree).
struct Tree<'a> {
    root: &'a Path,
    dirs: HashSet<String>,
}

impl Tree<'_> {
    /// Creates the parent directories of `rel`, refusing a parent that is a symlink.
    fn parents(&mut self, rel: &str) -> Result<()> {
        let mut at = 0;
        while let Some(i) = rel[at..].find('/') {
            at += i;
            let d = &rel[..at];
            if !self.dirs.contains(d) {
                let p = self.root.join(d);
                match fs::symlink_metadata(&p) {
                    Ok(m) if m.is_dir() => {}
                    Ok(m) if m.file_type().is_symlink() => {
                        bail!("{rel} would be written through the symbolic link {d}")
                    }
                    Ok(_) => bail!("{rel}: {d} is a file, not a directory"),
                    Err(_) => {
                        fs::create_dir(&p).with_context(|| format!("creating {}", p.display()))?
                    }
                }
                self.dirs.insert(d.to_string());
            }
            at += 1;
        }
        Ok(())
    }

    /// Clears the way for a new entry at `rel` (a file or link a package replaces).
    fn clear(&self, rel: &str) -> Result<PathBuf> {
        let p = self.root.join(rel);
        if let Ok(m) = fs::symlink_metadata(&p) {
            if m.is_dir() {
                bail!("{rel} is a directory, a package wants a file there");
            }
            fs::remove_file(&p).with_context(|| format!("replacing {}", p.display()))?;
        }
        Ok(p)
    }
}

/// A package's control file, field by field.
pub type Control = std::collections::BTreeMap<String, String>;

/// Unpacks one `.deb` into `root`, after checking that its control file names the locked
/// package, version and architecture. Returns the control file.
pub fn unpack_deb(deb: &Path, p: &LockedPackage, root: &Path) -> Result<Control> {
    let f = fs::File::open(deb).with_context(|| format!("opening {}", deb.display()))?;
    let mut ar = ar::Archive::new(io::BufReader::new(f));
    let mut saw_version = false;
    let mut control = None;
    let mut written = None;
    while let Some(entry) = ar.next_entry() {
        let entry =
            entry.with_context(|| format!("{} is not a .deb (ar archive)", deb.display()))?;
        let name = String::from_utf8_lossy(entry.header().identifier()).into_owned();
        if name == "debian-binary" {
            let mut s = String::new();
            { entry }.read_to_string(&mut s)?;
            if !s.starts_with("2.") {
                bail!("{}: .deb format {:?}", deb.display(), s.trim());
            }
            saw_version = true;
        } else if name.starts_with("control.tar") {
            control = Some(
                check_control(decoder(&name, entry)?, p)
                    .with_context(|| format!("{} ({})", deb.display(), p.label()))?,
            );
        } else if name.starts_with("data.tar") {
            if !(saw_version && control.is_some()) {
                bail!("{}: data before debian-binary and control", deb.display());
            }
            written = Some(
                unpack_data(decoder(&name, entry)?, root)
                    .with_context(|| format!("unpacking {} ({})", deb.display(), p.label()))?,
            );
        }
    }
    written.with_context(|| format!("{} has no data.tar member", deb.display()))?;
    Ok(control.expect("checked before data"))
}

/// The control file must describe the locked package.
fn check_control(r: Box<dyn Read + '_>, p: &LockedPackage) -> Result<Control> {
    let mut tar = tar::Archive::new(r);
    for e in tar.entries()? {
        let mut e = e?;
        let path = e.path()?.into_owned();
        if path.file_name().is_some_and(|n| n == "control") {
            let mut s = String::new();
            e.read_to_string(&mut s)?;
            let st = parse_stanzas(&s).into_iter().next().unwrap_or_default();
            let get = |k: &str| st.get(k).map(String::as_str).unwrap_or("");
            if (get("Package"), get("Version"), get("Architecture"))
                != (p.name.as_str(), p.version.as_str(), p.architecture.as_str())
            {
                bail!(
                    "its control file says {} {} ({}), the lock says {} {} ({})",
                    get("Package"),
                    get("Version"),
                    get("Architecture"),
                    p.name,
                    p.version,
                    p.architecture
                );
            }
            return Ok(st);
        }
    }
    bail!("no control file in control.tar")
}

fn unpack_data(r: Box<dyn Read + '_>, root: &Path) -> Result<u64> {
    use std::os::unix::fs::PermissionsExt;
    let mut tree = Tree {
        root,
        dirs: HashSet::new(),
    };
    let mut tar = tar::Archive::new(r);
    let mut n = 0;
    for e in tar.entries()? {
        let mut e = e?;
        let Some(rel) = member_path(&e.path()?)? else {
            continue;
        };
        if skipped(&rel) {
            continue;
        }
        let kind = e.header().entry_type();
        let mode = e.header().mode()? & 0o7777;
        tree.parents(&rel)?;
        match kind {
            tar::EntryType::Directory => {
                let p = root.join(&rel);
                match fs::symlink_metadata(&p) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => bail!("{rel}: a package wants a directory where a file is"),
                    Err(_) => {
                        fs::create_dir(&p).with_context(|| format!("creating {}", p.display()))?
                    }
                }
                tree.dirs.insert(rel);
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let p = tree.clear(&rel)?;
                let mut f =
                    fs::File::create(&p).with_context(|| format!("creating {}", p.display()))?;
                io::copy(&mut e, &mut f)?;
                f.set_permissions(fs::Permissions::from_mode(mode))?;
            }
            tar::EntryType::Symlink => {
                let target = e
                    .link_name()?
                    .context("a symbolic link without a target")?
                    .into_owned();
                let p = tree.clear(&rel)?;
                std::os::unix::fs::symlink(&target, &p)
                    .with_context(|| format!("linking {}", p.display()))?;
            }
            tar::EntryType::Link => {
                let target = e
                    .link_name()?
                    .context("a hard link without a target")?
                    .into_owned();
                let target = member_path(&target)?.context("a hard link to the root")?;
                if skipped(&target) {
                    continue; // its file was left out, so is the link
                }
                let p = tree.clear(&rel)?;
                let src = root.join(&target);
                match fs::symlink_metadata(&src) {
                    Ok(m) if m.is_file() => {
                        fs::copy(&src, &p).with_context(|| format!("copying {target} to {rel}"))?;
                    }
                    _ => bail!(
                        "{rel}: hard link to {target}, which is not a file unpacked before it"
                    ),
                }
            }
            // Devices and fifos are never made by unpacking without running anything.
            _ => continue,
        }
        n += 1;
    }
    Ok(n)
}

/// Compares two Debian versions as dpkg does (epoch, then upstream, then revision; `~` sorts
/// before everything, letters before other characters, digit runs numerically).
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    fn split(v: &str) -> (u64, &str, &str) {
        let (epoch, rest) = match v.split_once(':') {
            Some((e, r)) if e.bytes().all(|c| c.is_ascii_digit()) => (e.parse().unwrap_or(0), r),
            _ => (0, v),
        };
        match rest.rsplit_once('-') {
            Some((u, r)) => (epoch, u, r),
            None => (epoch, rest, ""),
        }
    }
    fn order(c: Option<u8>) -> i32 {
        match c {
            None => 0,
            Some(b'~') => -1,
            Some(c) if c.is_ascii_digit() => 0,
            Some(c) if c.is_ascii_alphabetic() => i32::from(c),
            Some(c) => i32::from(c) + 256,
        }
    }
    fn part(a: &str, b: &str) -> std::cmp::Ordering {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            while (i < a.len() && !a[i].is_ascii_digit()) || (j < b.len() && !b[j].is_ascii_digit())
            {
                let (x, y) = (order(a.get(i).copied()), order(b.get(j).copied()));
                if x != y {
                    return x.cmp(&y);
                }
                i += 1;
                j += 1;
            }
            let (si, sj) = (i, j);
            while i < a.len() && a[i].is_ascii_digit() {
                i += 1;
            }
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let num = |s: &[u8]| {
                let t: &[u8] = {
                    let k = s.iter().position(|&c| c != b'0').unwrap_or(s.len());
                    &s[k..]
                };
                t.to_vec()
            };
            let (x, y) = (num(&a[si..i]), num(&b[sj..j]));
            let c = x.len().cmp(&y.len()).then_with(|| x.cmp(&y));
            if c != std::cmp::Ordering::Equal {
                return c;
            }
        }
        std::cmp::Ordering::Equal
    }
    let (ea, ua, ra) = split(a);
    let (eb, ub, rb) = split(b);
    ea.cmp(&eb)
        .then_with(|| part(ua, ub))
        .then_with(|| part(ra, rb))
}

/// Whether `have` satisfies the relation `op want` (`<<`, `<=`, `=`, `>=`, `>>`).
fn relation_holds(have: &str, op: &str, want: &str) -> bool {
    use std::cmp::Ordering::*;
    let c = compare_versions(have, want);
    match op {
        "<<" => c == Less,
        "<=" | "<" => c != Greater,
        "=" => c == Equal,
        ">=" | ">" => c != Less,
        ">>" => c == Greater,
        _ => false,
    }
}

/// One alternative of a dependency: `name[:arch] [(op version)]`.
fn parse_alternative(s: &str) -> (String, Option<(String, String)>) {
    let s = s.trim();
    let (name, rel) = match s.split_once('(') {
        Some((n, r)) => (n.trim(), Some(r.trim_end_matches(')').trim())),
        None => (s, None),
    };
    let name = name.split(':').next().unwrap_or(name).to_string();
    let rel = rel.map(|r| {
        let op: String = r.chars().take_while(|c| "<>=".contains(*c)).collect();
        (op.clone(), r[op.len()..].trim().to_string())
    });
    (name, rel)
}

/// Checks that every `Depends` and `Pre-Depends` of the unpacked packages is met by a
/// locked package (by name and version, or by a `Provides`): a lock edited by hand into one
/// that cannot be installed is named here. Returns one line per unmet dependency.
pub fn unmet_dependencies(controls: &[Control]) -> Vec<String> {
    let mut have: std::collections::BTreeMap<String, Vec<Option<String>>> = Default::default();
    for c in controls {
        let name = c.get("Package").cloned().unwrap_or_default();
        have.entry(name)
            .or_default()
            .push(c.get("Version").cloned());
        for p in c
            .get("Provides")
            .map(String::as_str)
            .unwrap_or("")
            .split(',')
        {
            if p.trim().is_empty() {
                continue;
            }
            let (n, rel) = parse_alternative(p);
            have.entry(n).or_default().push(rel.map(|(_, v)| v));
        }
    }
    let mut unmet = Vec::new();
    for c in controls {
        for field in ["Pre-Depends", "Depends"] {
            let Some(deps) = c.get(field) else { continue };
            for group in deps.split(',').filter(|g| !g.trim().is_empty()) {
                let ok = group.split('|').any(|alt| {
                    let (n, rel) = parse_alternative(alt);
                    have.get(&n).is_some_and(|versions| {
                        versions.iter().any(|v| match (&rel, v) {
                            (None, _) => true,
                            (Some((op, want)), Some(v)) => relation_holds(v, op, want),
                            (Some(_), None) => false,
                        })
                    })
                });
                if !ok {
                    unmet.push(format!(
                        "{} {} {field} `{}`",
                        c.get("Package").map(String::as_str).unwrap_or("?"),
                        c.get("Version").map(String::as_str).unwrap_or("?"),
                        group.trim().replace('\n', " ")
                    ));
                }
            }
        }
    }
    unmet
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_paths_are_merged_usr_and_stay_inside() {
        let m = |s: &str| member_path(Path::new(s)).unwrap();
        assert_eq!(m("./"), None);
        assert_eq!(m("./bin/sh").as_deref(), Some("usr/bin/sh"));
        assert_eq!(
            m("./lib64/ld64.so.2").as_deref(),
            Some("usr/lib64/ld64.so.2")
        );
        assert_eq!(m("./usr/bin/make").as_deref(), Some("usr/bin/make"));
        assert_eq!(m("./binutils/x").as_deref(), Some("binutils/x"));
        assert!(member_path(Path::new("./usr/../../etc/passwd")).is_err());
        assert!(skipped("usr/share/doc/make/copyright"));
        assert!(!skipped("usr/share/docs"));
        assert!(!skipped("usr/share/bison/yacc.c"));
    }

    #[test]
    fn versions_compare_as_dpkg_does() {
        use std::cmp::Ordering::*;
        for (a, b, want) in [
            ("1.0", "1.0", Equal),
            ("1.0", "1.1", Less),
            ("1:1.0", "2.0", Greater),
            ("1.0~rc1", "1.0", Less),
            ("1.0-1", "1.0-1+deb12u1", Less),
            ("2.36-9+deb12u14", "2.36-9+deb12u4", Greater),
            ("1.10", "1.9", Greater),
            ("1.0a", "1.0+", Less),
            ("12.2.0-14", "12.2.0-14+deb12u1", Less),
            ("1.01", "1.1", Equal),
        ] {
            assert_eq!(compare_versions(a, b), want, "{a} vs {b}");
        }
        assert!(relation_holds("2.36-9", ">=", "2.36"));
        assert!(!relation_holds("2.36-9", ">>", "2.36-9"));
    }

    #[test]
    fn unmet_dependencies_are_named() {
        let c = |s: &str| parse_stanzas(s).remove(0);
        let set = vec![
            c(
                "Package: gcc\nVersion: 4:12.2.0-3\nDepends: cpp (= 4:12.2.0-3), gcc-12 (>= 12.2.0-1~), awk | mawk\n",
            ),
            c("Package: cpp\nVersion: 4:12.2.0-3\n"),
            c("Package: gcc-12\nVersion: 12.2.0-14\nPre-Depends: libc6:any (>= 2.36)\n"),
            c("Package: mawk\nVersion: 1.3.4\nProvides: awk\n"),
            c("Package: libc6\nVersion: 2.36-9+deb12u14\n"),
        ];
        assert!(unmet_dependencies(&set).is_empty());
        let mut broken = set.clone();
        broken.remove(4);
        broken[1].insert("Version".into(), "4:12.2.0-4".into());
        assert_eq!(
            unmet_dependencies(&broken),
            [
                "gcc 4:12.2.0-3 Depends `cpp (= 4:12.2.0-3)`",
                "gcc-12 12.2.0-14 Pre-Depends `libc6:any (>= 2.36)`"
            ]
        );
    }
}
