//! The package lock of a Linux guest: every Debian package its image is unpacked from, pinned
//! by name, version, architecture, pool path (`Filename`) and SHA-256, with the suite
//! codename it was resolved from. `guest build` fetches exactly these files ([`crate::fetch`])
//! and never resolves anything; `guest lock` resolves again, deliberately ([`resolve`]).
//!
//! Locks are committed: workloads/linux/packages.lock (linux-make), workloads/kernel/packages.lock
//! (kernel-make). The file is JSON with one package per line, so that a re-lock reads as a
//! diff. The lock's hash (SHA-256 of the file's bytes) goes into every image manifest and so
//! into every results file.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::util::{rfc3339, sha256_hex, unix_now};
use crate::workload::Workload;

/// The `format` of a lock file.
pub const FORMAT: &str = "lockscale.guest-lock/1";
/// The guests' Debian architecture.
pub const ARCH: &str = "ppc64el";
/// The archive component every package comes from.
pub const COMPONENT: &str = "main";
/// The suite `guest lock` resolves from unless told (see workloads/linux/README.md for why).
pub const DEFAULT_SUITE: &str = "bookworm";
/// Suite names that move: a lock names what it was resolved from by codename.
const ALIASES: &[&str] = &[
    "stable",
    "oldstable",
    "oldoldstable",
    "testing",
    "unstable",
    "experimental",
    "stable-updates",
    "stable-proposed-updates",
    "proposed-updates",
    "stable-backports",
];

/// One locked package: the `.deb` to fetch, by its index entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedPackage {
    pub name: String,
    pub version: String,
    /// `ppc64el` or `all`.
    pub architecture: String,
    /// The archive's pool path (`Filename`), relative to a mirror's base URL.
    pub filename: String,
    pub size: u64,
    pub sha256: String,
    /// The suite it came from, when not the lock's `suite` (kernel-make's linux-source).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<String>,
}

impl LockedPackage {
    /// `name version` for messages.
    pub fn label(&self) -> String {
        format!("{} {}", self.name, self.version)
    }

    /// The pool file's own name (`name_version_arch.deb`).
    pub fn file_name(&self) -> &str {
        self.filename.rsplit('/').next().unwrap_or(&self.filename)
    }
}

/// A workload's lock file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// [`FORMAT`].
    pub format: String,
    /// `linux-make` or `kernel-make`.
    pub workload: String,
    /// The Debian suite's codename (never an alias such as `stable`).
    pub suite: String,
    /// Further codenames the resolution also saw (kernel-make's linux-source suite when it is
    /// not `suite`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_suites: Vec<String>,
    pub architecture: String,
    pub component: String,
    /// When it was resolved (UTC, RFC 3339).
    pub resolved: String,
    /// The mirror it was resolved from (for the record; builds take any mirror).
    pub resolved_from: String,
    /// The `Date` of the suite's Release file it was resolved from.
    pub release_date: String,
    /// A snapshot.debian.org timestamp at which every locked file was in the archive
    /// (`guest build --snapshot` uses it when the mirrors have moved on).
    pub snapshot: String,
    /// What the workload asks for; the rest are their dependencies.
    pub requested: Vec<String>,
    /// Every package unpacked into the image, sorted by name.
    pub packages: Vec<LockedPackage>,
}

/// What the guest needs: the kernel, a shell and its tools, and a C toolchain.
pub const PACKAGES: &[&str] = &[
    "linux-image-powerpc64le",
    "busybox-static",
    "make",
    "gcc",
    "binutils",
    "libc6-dev",
];
/// What the kernel-make guest needs besides [`PACKAGES`]: the kernel build's own tools (flex
/// and bison for Kconfig and dtc, bc for the time constants) and GNU's shell utilities, whose
/// options the kernel's scripts assume (busybox's are a subset), and the kernel source, from
/// [`KERNEL_SOURCE_SUITE`].
pub const KERNEL_PACKAGES: &[&str] = &[
    "flex",
    "bison",
    "bc",
    "bash",
    "coreutils",
    "gawk",
    "sed",
    "grep",
    "findutils",
    "diffutils",
    "perl-base",
    "linux-source-6.1",
];
/// The Debian suite of `linux-source-6.1` (the 6.1 long-term kernel of Debian 12), added to
/// the lock's suite when kernel-make is locked from another one (lock.rs).
pub const KERNEL_SOURCE_SUITE: &str = "bookworm";
/// Where a workload's lock lives.
pub fn lock_path(repo: &Path, workload: Workload) -> PathBuf {
    repo.join(match workload {
        Workload::KernelMake => "workloads/kernel/packages.lock",
        _ => "workloads/linux/packages.lock",
    })
}

/// The packages a workload asks for.
pub fn requested(workload: Workload) -> Vec<String> {
    let mut v: Vec<String> = PACKAGES.iter().map(|s| s.to_string()).collect();
    if workload == Workload::KernelMake {
        v.extend(KERNEL_PACKAGES.iter().map(|s| s.to_string()));
    }
    v
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Checks a suite name for `guest lock`/a lock file: a codename, not a moving alias.
pub fn check_codename(suite: &str) -> Result<()> {
    if ALIASES.contains(&suite) {
        bail!(
            "`{suite}` is a moving alias, not a codename: a lock names the release it was resolved \
             from (e.g. bookworm or trixie)"
        );
    }
    if suite.is_empty()
        || !suite
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        bail!("`{suite}` is not a Debian codename");
    }
    Ok(())
}

impl Lock {
    /// Parses and checks a lock's text for `workload`. `what` names it in messages.
    pub fn parse(text: &str, workload: Workload, what: &str) -> Result<Lock> {
        let lock: Lock = serde_json::from_str(text).with_context(|| {
            format!(
                "{what} is not a guest lock (or was edited into one that no longer parses); \
                 write it again with `lockscale guest lock {workload}`"
            )
        })?;
        lock.check(workload)
            .with_context(|| format!("{what}: the lock is not usable; write it again with `lockscale guest lock {workload}`"))?;
        Ok(lock)
    }

    /// Reads a workload's committed lock and its SHA-256 (of the file's bytes).
    pub fn load(repo: &Path, workload: Workload) -> Result<(Lock, String)> {
        let path = lock_path(repo, workload);
        let text = fs::read_to_string(&path).with_context(|| {
            format!(
                "reading the guest lock {} (write it with `lockscale guest lock {workload}`)",
                path.display()
            )
        })?;
        let lock = Lock::parse(&text, workload, &path.display().to_string())?;
        Ok((lock, sha256_hex(text.as_bytes())))
    }

    /// Everything a build relies on, checked before anything is fetched: a hand edit that
    /// cannot be built is named here.
    pub fn check(&self, workload: Workload) -> Result<()> {
        if self.format != FORMAT {
            bail!(
                "format is {:?}, this lockscale reads {FORMAT:?}",
                self.format
            );
        }
        if self.workload != workload.name() {
            bail!("it is the lock of {}, not of {workload}", self.workload);
        }
        check_codename(&self.suite)?;
        for s in &self.extra_suites {
            check_codename(s)?;
        }
        if self.architecture != ARCH {
            bail!("architecture {} (the guests are {ARCH})", self.architecture);
        }
        let want = requested(workload);
        if self.requested != want {
            bail!(
                "it was resolved for the packages {:?}, the workload asks for {:?}",
                self.requested,
                want
            );
        }
        if self.packages.is_empty() {
            bail!("it lists no packages");
        }
        let mut seen = BTreeMap::new();
        for (i, p) in self.packages.iter().enumerate() {
            let at = format!("package {} ({})", i + 1, p.name);
            if p.name.is_empty()
                || !p
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
            {
                bail!("{at}: {:?} is not a Debian package name", p.name);
            }
            if seen.insert(p.name.as_str(), i).is_some() {
                bail!("{at}: listed twice");
            }
            if i > 0 && self.packages[i - 1].name > p.name {
                bail!("{at}: the packages are not sorted by name");
            }
            if p.architecture != ARCH && p.architecture != "all" {
                bail!("{at}: architecture {}", p.architecture);
            }
            if !is_hex64(&p.sha256) {
                bail!(
                    "{at}: sha256 {:?} is not 64 lower-case hex digits",
                    p.sha256
                );
            }
            if p.version.is_empty() || p.version.contains(['/', ' ', '_']) {
                bail!("{at}: version {:?}", p.version);
            }
            if !p.filename.starts_with("pool/")
                || p.filename
                    .split('/')
                    .any(|c| c.is_empty() || c == "." || c == "..")
                || !p
                    .filename
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/+-._~".contains(c))
            {
                bail!("{at}: {:?} is not a pool path", p.filename);
            }
            // Debian's pool names a file `name_version_arch.deb`, the version without its epoch.
            let bare = p
                .version
                .split_once(':')
                .map_or(p.version.as_str(), |(_, v)| v);
            let want = format!("{}_{}_{}.deb", p.name, bare, p.architecture);
            if p.file_name() != want {
                bail!(
                    "{at}: version {} and architecture {} do not match its file {} (expected {want})",
                    p.version,
                    p.architecture,
                    p.file_name()
                );
            }
            if let Some(s) = &p.suite
                && s != &self.suite
                && !self.extra_suites.contains(s)
            {
                bail!("{at}: suite {s} is not among the lock's suites");
            }
        }
        for r in &self.requested {
            if !seen.contains_key(r.as_str()) {
                bail!("the requested package {r} is not in it");
            }
        }
        Ok(())
    }

    /// The lock as committed: JSON, one package per line, the same bytes for the same lock.
    pub fn to_text(&self) -> String {
        let q = |s: &str| serde_json::to_string(s).expect("string");
        let list = |v: &[String]| serde_json::to_string(v).expect("strings");
        let mut s = String::from("{\n");
        s.push_str(&format!("  \"format\": {},\n", q(&self.format)));
        s.push_str(&format!("  \"workload\": {},\n", q(&self.workload)));
        s.push_str(&format!("  \"suite\": {},\n", q(&self.suite)));
        if !self.extra_suites.is_empty() {
            s.push_str(&format!(
                "  \"extra_suites\": {},\n",
                list(&self.extra_suites)
            ));
        }
        for (k, v) in [
            ("architecture", &self.architecture),
            ("component", &self.component),
            ("resolved", &self.resolved),
            ("resolved_from", &self.resolved_from),
            ("release_date", &self.release_date),
            ("snapshot", &self.snapshot),
        ] {
            s.push_str(&format!("  \"{k}\": {},\n", q(v)));
        }
        s.push_str(&format!("  \"requested\": {},\n", list(&self.requested)));
        s.push_str("  \"packages\": [\n");
        for (i, p) in self.packages.iter().enumerate() {
            let sep = if i + 1 < self.packages.len() { "," } else { "" };
            s.push_str(&format!(
                "    {}{sep}\n",
                serde_json::to_string(p).expect("package")
            ));
        }
        s.push_str("  ]\n}\n");
        s
    }

    /// A digest of what the image is unpacked from (names, versions, files and hashes; not
    /// when or where it was resolved): the key of the unpacked-tree cache.
    pub fn packages_digest(&self) -> String {
        let mut s = String::new();
        for p in &self.packages {
            s.push_str(&format!(
                "{} {} {} {} {}\n",
                p.name, p.version, p.architecture, p.filename, p.sha256
            ));
        }
        sha256_hex(s.as_bytes())
    }

    /// Same packages, same files: a re-lock that changes nothing keeps the committed file.
    pub fn same_packages(&self, other: &Lock) -> bool {
        self.packages == other.packages
            && self.suite == other.suite
            && self.extra_suites == other.extra_suites
            && self.requested == other.requested
    }
}

/// What changed from `old` to `new`, one line a package: `name: old → new`, `name: added
/// (version)`, `name: removed (version)`.
pub fn diff(old: &Lock, new: &Lock) -> Vec<String> {
    let o: BTreeMap<&str, &LockedPackage> =
        old.packages.iter().map(|p| (p.name.as_str(), p)).collect();
    let n: BTreeMap<&str, &LockedPackage> =
        new.packages.iter().map(|p| (p.name.as_str(), p)).collect();
    let mut names: Vec<&str> = o.keys().chain(n.keys()).copied().collect();
    names.sort_unstable();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        match (o.get(name), n.get(name)) {
            (Some(a), Some(b)) if a.version != b.version => {
                out.push(format!("{name}: {} → {}", a.version, b.version));
            }
            (Some(a), Some(b)) if a != b => {
                out.push(format!(
                    "{name}: {} (same version, another file or hash: {} → {})",
                    a.version, a.sha256, b.sha256
                ));
            }
            (None, Some(b)) => out.push(format!("{name}: added ({})", b.version)),
            (Some(a), None) => out.push(format!("{name}: removed ({})", a.version)),
            _ => {}
        }
    }
    out
}

/// A timestamp for snapshot.debian.org (`20261204T093000Z`).
fn snapshot_stamp(secs: u64) -> String {
    rfc3339(secs).replace(['-', ':'], "")
}

/// Parses deb822 stanzas (an index or a control file): field → value (continuation lines
/// joined with newlines), in order.
pub fn parse_stanzas(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut out = Vec::new();
    let mut cur: BTreeMap<String, String> = BTreeMap::new();
    let mut last: Option<String> = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            last = None;
        } else if line.starts_with([' ', '\t']) {
            if let Some(k) = &last
                && let Some(v) = cur.get_mut(k)
            {
                v.push('\n');
                v.push_str(line.trim());
            }
        } else if let Some((k, v)) = line.split_once(':') {
            cur.insert(k.trim().to_string(), v.trim().to_string());
            last = Some(k.trim().to_string());
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Re-resolves a workload's packages from `suite` (plus, for kernel-make, the linux-source
/// suite) on `mirror` with the host's apt, in a private apt directory (the host's apt is not
/// touched; the archive's signatures are checked with the host's Debian keyring). apt only
/// resolves: the lock takes each package's
/// `Filename`, `Size` and `SHA256` from the signed index apt fetched.
pub fn resolve(workload: Workload, suite: &str, mirror: &str) -> Result<Lock> {
    check_codename(suite)?;
    let apt_get = crate::util::find_in_path("apt-get").context(
        "apt-get not found: `lockscale guest lock` resolves with apt (Debian/Ubuntu); building \
         from the committed lock needs no apt",
    )?;
    let mut suites = vec![suite.to_string()];
    if workload == Workload::KernelMake && suite != KERNEL_SOURCE_SUITE {
        suites.push(KERNEL_SOURCE_SUITE.to_string());
    }
    let dir = std::env::temp_dir().join(format!("lockscale-lock-{}", std::process::id()));
    let _cleanup = RemoveOnDrop(dir.clone());
    for d in [
        "etc/apt/apt.conf.d",
        "etc/apt/preferences.d",
        "etc/apt/sources.list.d",
        "var/lib/dpkg",
        "var/lib/apt/lists/partial",
        "var/cache/apt/archives/partial",
    ] {
        fs::create_dir_all(dir.join(d))?;
    }
    fs::write(dir.join("var/lib/dpkg/status"), "")?;
    let keyring = Path::new("/usr/share/keyrings/debian-archive-keyring.gpg");
    let signed = if keyring.is_file() {
        format!("[signed-by={}] ", keyring.display())
    } else {
        String::new()
    };
    let mirror = mirror.trim_end_matches('/');
    let sources: String = suites
        .iter()
        .map(|s| format!("deb {signed}{mirror} {s} {COMPONENT}\n"))
        .collect();
    fs::write(dir.join("etc/apt/sources.list"), sources)?;
    let conf = format!(
        "Dir \"{d}/\";\nDir::State::status \"{d}/var/lib/dpkg/status\";\n\
         APT::Architecture \"{ARCH}\";\nAPT::Architectures \"{ARCH}\";\n\
         APT::Install-Recommends \"false\";\nAPT::Install-Suggests \"false\";\n\
         Acquire::Languages \"none\";\nAPT::Sandbox::User \"root\";\n\
         Dir::Etc::Trusted \"/etc/apt/trusted.gpg\";\nDir::Etc::TrustedParts \"/etc/apt/trusted.gpg.d/\";\n",
        d = dir.display()
    );
    let conf_path = dir.join("apt.conf");
    fs::write(&conf_path, conf)?;
    let apt = |args: &[&str]| -> Result<String> {
        let out = Command::new(&apt_get)
            .env("APT_CONFIG", &conf_path)
            .env("LC_ALL", "C")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("starting apt-get")?;
        if !out.status.success() {
            bail!(
                "apt-get {} failed ({}):\n{}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    eprintln!(
        "lockscale: resolving {} from {mirror} ({}, {ARCH}) with apt…",
        workload,
        suites.join(" + ")
    );
    apt(&["update", "-q"])?;
    // The Release files apt kept: the codename must be what was asked (an alias would resolve,
    // but to a release that moves), and their Date goes into the lock.
    let lists = dir.join("var/lib/apt/lists");
    let mut names: Vec<PathBuf> = fs::read_dir(&lists)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    names.sort();
    let mut release_date = String::new();
    for s in &suites {
        let rel = names
            .iter()
            .find(|p| {
                let n = p.file_name().unwrap_or_default().to_string_lossy();
                n.ends_with(&format!("_dists_{s}_InRelease"))
                    || n.ends_with(&format!("_dists_{s}_Release"))
            })
            .with_context(|| format!("apt fetched no Release file of {s}"))?;
        let text = fs::read_to_string(rel)?;
        let codename = text
            .lines()
            .find_map(|l| l.strip_prefix("Codename:"))
            .map(str::trim)
            .unwrap_or_default();
        if codename != s {
            bail!(
                "the suite {s} on {mirror} has codename {codename:?}: lock by codename (--suite {codename})"
            );
        }
        if s == suite {
            release_date = text
                .lines()
                .find_map(|l| l.strip_prefix("Date:"))
                .map(|d| d.trim().to_string())
                .unwrap_or_default();
        }
    }
    let want = requested(workload);
    let mut args = vec!["install", "--print-uris", "-qq", "-y"];
    args.extend(want.iter().map(String::as_str));
    let uris = apt(&args)?;
    // `'URI' name_version_arch.deb size hash`: the file name gives name, version (`:` as %3a)
    // and architecture.
    let mut chosen = Vec::new();
    for line in uris.lines().filter(|l| l.starts_with('\'')) {
        let file = line
            .split_whitespace()
            .nth(1)
            .with_context(|| format!("apt printed {line:?}"))?;
        let stem = file
            .strip_suffix(".deb")
            .with_context(|| format!("apt printed {line:?}"))?;
        let mut parts = stem.splitn(3, '_');
        let (Some(name), Some(version), Some(arch)) = (parts.next(), parts.next(), parts.next())
        else {
            bail!("apt printed {line:?}");
        };
        chosen.push((
            name.to_string(),
            version.replace("%3a", ":").replace("%3A", ":"),
            arch.to_string(),
        ));
    }
    if chosen.is_empty() {
        bail!("apt resolved nothing for {}", want.join(" "));
    }
    // The signed indices apt fetched, by (name, version, arch) → (suite, stanza).
    let mut index: BTreeMap<IndexKey, (String, Stanza)> = BTreeMap::new();
    for p in &names {
        let n = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if !n.ends_with(&format!("_{COMPONENT}_binary-{ARCH}_Packages")) {
            continue;
        }
        let s = suites
            .iter()
            .find(|s| n.contains(&format!("_dists_{s}_")))
            .cloned()
            .unwrap_or_default();
        for st in parse_stanzas(&fs::read_to_string(p)?) {
            let key = (
                st.get("Package").cloned().unwrap_or_default(),
                st.get("Version").cloned().unwrap_or_default(),
                st.get("Architecture").cloned().unwrap_or_default(),
            );
            index.entry(key).or_insert((s.clone(), st));
        }
    }
    let mut packages = Vec::new();
    for (name, version, arch) in chosen {
        let (s, st) = index
            .get(&(name.clone(), version.clone(), arch.clone()))
            .with_context(|| {
                format!("{name} {version} ({arch}) is not in the indices apt fetched")
            })?;
        let field = |f: &str| {
            st.get(f)
                .cloned()
                .with_context(|| format!("{name} {version}: the index has no {f}"))
        };
        packages.push(LockedPackage {
            name: name.clone(),
            version: version.clone(),
            architecture: arch.clone(),
            filename: field("Filename")?,
            size: field("Size")?
                .parse()
                .with_context(|| format!("{name} {version}: Size"))?,
            sha256: field("SHA256")?.to_ascii_lowercase(),
            suite: (s != suite).then(|| s.clone()),
        });
    }
    packages.sort_by(|a, b| a.name.cmp(&b.name));
    let now = unix_now();
    let lock = Lock {
        format: FORMAT.into(),
        workload: workload.name().into(),
        suite: suite.into(),
        extra_suites: suites[1..].to_vec(),
        architecture: ARCH.into(),
        component: COMPONENT.into(),
        resolved: rfc3339(now),
        resolved_from: mirror.into(),
        release_date,
        snapshot: snapshot_stamp(now),
        requested: want,
        packages,
    };
    lock.check(workload)
        .context("the resolved lock does not check out")?;
    Ok(lock)
}

/// A package in an index: name, version, architecture.
type IndexKey = (String, String, String);
/// One deb822 stanza.
type Stanza = BTreeMap<String, String>;

/// Removes a directory tree when dropped (temporary work directories).
pub struct RemoveOnDrop(pub PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(name: &str, version: &str) -> LockedPackage {
        let bare = version.split_once(':').map_or(version, |(_, v)| v);
        LockedPackage {
            name: name.into(),
            version: version.into(),
            architecture: "ppc64el".into(),
            filename: format!("pool/main/x/{name}/{name}_{bare}_ppc64el.deb"),
            size: 10,
            sha256: "a".repeat(64),
            suite: None,
        }
    }

    fn lock(packages: Vec<LockedPackage>) -> Lock {
        Lock {
            format: FORMAT.into(),
            workload: "linux-make".into(),
            suite: "bookworm".into(),
            extra_suites: vec![],
            architecture: ARCH.into(),
            component: COMPONENT.into(),
            resolved: "2026-12-04T00:00:00Z".into(),
            resolved_from: "http://deb.debian.org/debian".into(),
            release_date: "Sat, 11 Jul 2026 10:16:37 UTC".into(),
            snapshot: "20261204T000000Z".into(),
            requested: requested(Workload::LinuxMake),
            packages,
        }
    }

    fn full() -> Vec<LockedPackage> {
        let mut v: Vec<LockedPackage> = requested(Workload::LinuxMake)
            .iter()
            .map(|n| pkg(n, "1.0-1"))
            .collect();
        v.push(pkg("libattr1", "1:2.5.1-4"));
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    #[test]
    fn text_round_trips_and_checks() {
        let l = lock(full());
        let text = l.to_text();
        let back = Lock::parse(&text, Workload::LinuxMake, "t").unwrap();
        assert_eq!(back, l);
        assert_eq!(back.to_text(), text);
        // One package per line.
        assert_eq!(
            text.lines().filter(|l| l.contains("\"sha256\"")).count(),
            l.packages.len()
        );
        assert!(Lock::parse(&text, Workload::KernelMake, "t").is_err());
    }

    #[test]
    fn hand_edits_are_named() {
        let mut l = lock(full());
        l.suite = "stable".into();
        let e = format!(
            "{:#}",
            Lock::parse(&l.to_text(), Workload::LinuxMake, "x").unwrap_err()
        );
        assert!(e.contains("moving alias"), "{e}");

        let mut l = lock(full());
        l.packages[0].version = "9.9-9".into();
        let e = format!("{:#}", l.check(Workload::LinuxMake).unwrap_err());
        assert!(e.contains("do not match its file"), "{e}");

        let mut l = lock(full());
        l.packages.retain(|p| p.name != "make");
        let e = format!("{:#}", l.check(Workload::LinuxMake).unwrap_err());
        assert!(e.contains("requested package make"), "{e}");

        let mut l = lock(full());
        l.packages[1].sha256 = "xyz".into();
        assert!(l.check(Workload::LinuxMake).is_err());

        let mut l = lock(full());
        l.packages[2].filename = "pool/../../etc/passwd".into();
        assert!(l.check(Workload::LinuxMake).is_err());

        let e = format!(
            "{:#}",
            Lock::parse("{\"format\": 1", Workload::LinuxMake, "y").unwrap_err()
        );
        assert!(e.contains("guest lock linux-make"), "{e}");
    }

    #[test]
    fn diff_names_changes() {
        let a = lock(full());
        let mut b = a.clone();
        let i = b.packages.iter().position(|p| p.name == "make").unwrap();
        b.packages[i] = pkg("make", "4.4-1");
        b.packages.retain(|p| p.name != "libattr1");
        b.packages.push(pkg("zlib1g", "1:1.2.13"));
        assert_eq!(
            diff(&a, &b),
            [
                "libattr1: removed (1:2.5.1-4)",
                "make: 1.0-1 → 4.4-1",
                "zlib1g: added (1:1.2.13)"
            ]
        );
        assert!(diff(&a, &a).is_empty());
        assert!(a.same_packages(&a));
        assert!(!a.same_packages(&b));
    }

    #[test]
    fn stanzas_and_snapshot_stamp() {
        let s = parse_stanzas("Package: a\nVersion: 1\nDescription: x\n more\n\nPackage: b\n");
        assert_eq!(s.len(), 2);
        assert_eq!(s[0]["Description"], "x\nmore");
        assert_eq!(s[1]["Package"], "b");
        assert_eq!(snapshot_stamp(0), "19700101T000000Z");
    }
}
