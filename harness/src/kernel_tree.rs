//! The source tree of the `kernel-make` guest: Debian's linux-source, configured in the guest
//! with `tinyconfig` plus workloads/kernel/pseries-tiny.config, pruned on the host to the files
//! that configuration's build reads, so that it fits the initramfs (guest RAM) next to the
//! toolchain. A block device would hold the whole 1.5 GB tree, but every emulator (ours and
//! the peers) would then need the same disk model and the guest a file system driver, for
//! files the build never opens.
//!
//! Host steps, cached under `target/guest-cache/kernel-make/` and redone only when the source
//! tarball or the configuration fragment changes:
//! 1. unpack the guest root file system's `usr/src/linux-source-*.tar.xz` into `src/`;
//! 2. a cross build of the same configuration (`powerpc64le-linux-gnu-gcc`, `O=listing`):
//!    its `.cmd` dependency records name every source and header each compile read;
//! 3. the kept files ([`keep`]): those, plus every file that is not C or assembly source
//!    (Makefiles, Kconfig, scripts, tables), except in Documentation/, tools/, samples/,
//!    LICENSES/ and the other architectures (where only Kconfig files stay: Kconfig sources
//!    some of them);
//! 4. a check build of the pruned tree (hard links, `O=check`), so that a file missing from
//!    the list fails here rather than minutes into a guest run.
//!
//! The host compiler only lists files: the guest compiles with Debian's gcc of the image, the
//! same for every run and every emulator.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::util::{sha256_file, sha256_hex, write_atomic};

/// The configuration fragment appended to `tinyconfig` (host listing and guest alike).
pub const FRAGMENT: &str = "workloads/kernel/pseries-tiny.config";
/// The cross compiler of the listing build.
pub const CROSS_COMPILE: &str = "powerpc64le-linux-gnu-";
/// Reproducible-build settings of the guest's make (scripts/mkcompile_h reads them), so that
/// the outputs are the same bytes on every run.
pub const BUILD_TIMESTAMP: &str = "Thu Jan  1 00:00:00 UTC 1970";
pub const BUILD_USER: &str = "lockscale";
pub const BUILD_HOST: &str = "lockscale";

/// Top-level directories no build of vmlinux needs beyond the files its records name.
const DROPPED_TREES: &[&str] = &["Documentation", "tools", "samples", "LICENSES"];

/// What the cache holds about the pruned tree.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KernelTree {
    /// e.g. `linux-source-6.1`.
    pub name: String,
    /// SHA-256 of the tarball and of the fragment the listing was made from.
    pub tarball_sha256: String,
    pub fragment_sha256: String,
    /// Files kept, relative to the tree's top, sorted.
    pub files: Vec<String>,
    pub files_bytes: u64,
    /// Objects of the listing build (`*.o` with a `.cmd` record, host tools included), relative.
    pub objects: Vec<String>,
    /// Compiles of the whole vmlinux build (objects plus the `.s` of asm-offsets and bounds).
    pub compiles: u64,
    /// Top directory of the unpacked source (absolute).
    #[serde(skip)]
    pub src: PathBuf,
}

/// Objects the vmlinux link builds itself (scripts/link-vmlinux.sh compiles the version
/// stamp with the final UTS_VERSION), which a `make init/` never makes.
const LINK_STEP_OBJECTS: &[&str] = &["init/version-timestamp.o"];

/// The rule [`KernelTree::objects_under`] picks outputs by, in words: part of an image's
/// inputs (`guest::inputs_sha256`), so that changing it rebuilds cached images.
pub const OUTPUT_RULE: &str =
    "objects under the directories, not scripts/, not init/version-timestamp.o";

impl KernelTree {
    /// Target objects under the given directories (host tools excluded), sorted: what
    /// `make <dir>/ …` builds, so not the objects only the vmlinux link makes.
    pub fn objects_under(&self, dirs: &[&str]) -> Vec<String> {
        self.objects
            .iter()
            .filter(|o| {
                dirs.iter()
                    .any(|d| o.starts_with(&format!("{}/", d.trim_end_matches('/'))))
            })
            .filter(|o| !o.starts_with("scripts/") && !LINK_STEP_OBJECTS.contains(&o.as_str()))
            .cloned()
            .collect()
    }
}

fn kernel_cache(repo: &Path) -> PathBuf {
    repo.join("target/guest-cache/kernel-make")
}

fn need(name: &str, package: &str) -> Result<()> {
    if crate::util::find_in_path(name).is_none() {
        bail!(
            "{name} not found: the kernel-make image's host listing build needs it; install it with \
             `apt-get install {package}` (Debian/Ubuntu)"
        );
    }
    Ok(())
}

/// The tarball Debian's linux-source package put in the root file system.
fn find_tarball(rootfs: &Path) -> Result<PathBuf> {
    let dir = rootfs.join("usr/src");
    let mut found: Vec<PathBuf> = fs::read_dir(&dir)
        .with_context(|| format!("no {} (is linux-source unpacked?)", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with("linux-source-") && n.ends_with(".tar.xz")
            })
        })
        .collect();
    found.sort();
    found
        .pop()
        .with_context(|| format!("no linux-source-*.tar.xz in {}", dir.display()))
}

fn run(cmd: &mut Command, what: &str, log: &Path) -> Result<()> {
    let out = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let status = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()
        .with_context(|| format!("starting {what}"))?;
    if !status.success() {
        let text = fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "{what} failed ({status}); the end of {}:\n{}",
            log.display(),
            tail.join("\n")
        );
    }
    Ok(())
}

/// `make ARCH=powerpc CROSS_COMPILE=… O=<out>` in `src`, configured as the guest configures.
fn cross_build(src: &Path, out: &Path, fragment: &Path, logs: &Path, what: &str) -> Result<()> {
    if out.exists() {
        fs::remove_dir_all(out).with_context(|| format!("removing {}", out.display()))?;
    }
    fs::create_dir_all(out)?;
    let jobs = crate::host::logical_cores().max(1).to_string();
    let make = |args: &[&str]| {
        let mut c = Command::new("make");
        c.current_dir(src)
            .arg("ARCH=powerpc")
            .arg(format!("CROSS_COMPILE={CROSS_COMPILE}"))
            .arg(format!("O={}", out.display()))
            .arg(format!("-j{jobs}"))
            .args(args)
            .env("KBUILD_BUILD_TIMESTAMP", BUILD_TIMESTAMP)
            .env("KBUILD_BUILD_USER", BUILD_USER)
            .env("KBUILD_BUILD_HOST", BUILD_HOST);
        c
    };
    run(
        &mut make(&["tinyconfig"]),
        &format!("{what}: make tinyconfig"),
        &logs.join(format!("{what}-config.log")),
    )?;
    let mut config = fs::read(out.join(".config"))?;
    config.extend(fs::read(fragment)?);
    fs::write(out.join(".config"), config)?;
    run(
        &mut make(&["olddefconfig"]),
        &format!("{what}: make olddefconfig"),
        &logs.join(format!("{what}-olddefconfig.log")),
    )?;
    eprintln!(
        "lockscale: {what}: cross build of vmlinux in {} (a few minutes)…",
        out.display()
    );
    run(
        &mut make(&["vmlinux"]),
        &format!("{what}: make vmlinux"),
        &logs.join(format!("{what}-vmlinux.log")),
    )
}

/// The files named by one `.cmd` record (`source_… :=` and the `deps_… :=` list), as written.
pub fn cmd_record_files(text: &str) -> Vec<String> {
    let mut files = Vec::new();
    let mut in_deps = false;
    for line in text.lines() {
        let body = if let Some((lhs, rhs)) = line.split_once(":=") {
            let lhs = lhs.trim();
            in_deps = lhs.starts_with("deps_");
            if lhs.starts_with("source_") {
                files.extend(rhs.split_whitespace().map(String::from));
                in_deps = false;
                continue;
            }
            if !in_deps {
                continue;
            }
            rhs
        } else if in_deps {
            line
        } else {
            continue;
        };
        let continued = body.trim_end().ends_with('\\');
        // `$(wildcard include/config/…)` entries name configuration symbols, not files.
        let mut words = body.split_whitespace().peekable();
        while let Some(w) = words.next() {
            if w.starts_with("$(wildcard") {
                for rest in words.by_ref() {
                    if rest.ends_with(')') {
                        break;
                    }
                }
                continue;
            }
            if w != "\\" {
                files.push(w.to_string());
            }
        }
        if !continued {
            in_deps = false;
        }
    }
    files
}

/// Whether a file of the unpacked tree is kept even when no record names it: everything but C
/// and assembly source and headers, outside the trees no vmlinux build reads.
pub fn keep(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    // Kconfig sources files from every top-level directory (Documentation/Kconfig, samples/…).
    if name.starts_with("Kconfig") {
        return true;
    }
    // Syscall tables: scripts/checksyscalls.sh reads x86's on every architecture.
    if name.ends_with(".tbl") && rel.starts_with("arch/") {
        return true;
    }
    let mut parts = rel.split('/');
    let top = parts.next().unwrap_or("");
    if DROPPED_TREES.contains(&top) {
        return false;
    }
    if top == "arch" && parts.next().is_some_and(|a| a != "powerpc") && rel.matches('/').count() > 1
    {
        return false;
    }
    if rel.starts_with("arch/powerpc/boot/dts/") {
        return false;
    }
    !(name.ends_with(".c")
        || name.ends_with(".h")
        || name.ends_with(".S")
        || name.ends_with(".rs")
        || name.ends_with(".rst")
        || name.ends_with(".dts")
        || name.ends_with(".dtsi"))
}

/// A relative path without `.` and `x/..` components: records write includes as the compiler
/// opened them (`scripts/mod/../../include/linux/license.h`).
pub fn normalise(rel: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." if out.last().is_some_and(|l| *l != "..") => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out.join("/")
}

/// Reads every `.cmd` record of a build directory: the source files they name (relative to
/// `src`) and the objects built.
fn read_records(src: &Path, out: &Path) -> Result<(BTreeSet<String>, Vec<String>, u64)> {
    // Kbuild writes the source tree's real path.
    let src_prefix = format!("{}/", fs::canonicalize(src)?.display());
    let mut named = BTreeSet::new();
    let mut objects = Vec::new();
    let mut compiles = 0u64;
    for e in walkdir::WalkDir::new(out).sort_by_file_name() {
        let e = e?;
        let name = e.file_name().to_string_lossy();
        if !e.file_type().is_file() || !name.starts_with('.') || !name.ends_with(".cmd") {
            continue;
        }
        let target = &name[1..name.len() - 4];
        let dir = e
            .path()
            .parent()
            .and_then(|p| p.strip_prefix(out).ok())
            .unwrap_or(Path::new(""));
        let rel_target = dir.join(target).to_string_lossy().into_owned();
        if target.ends_with(".o") {
            objects.push(rel_target);
            compiles += 1;
        } else if target.ends_with(".s") {
            compiles += 1;
        }
        let text = fs::read_to_string(e.path())?;
        for f in cmd_record_files(&text) {
            if let Some(rel) = f.strip_prefix(&src_prefix) {
                named.insert(normalise(rel));
            }
        }
    }
    objects.sort();
    Ok((named, objects, compiles))
}

/// Unpacks, lists and checks the tree (cached). `rootfs` is the guest root file system holding
/// the linux-source tarball.
pub fn ensure_tree(repo: &Path, rootfs: &Path) -> Result<KernelTree> {
    let cache = kernel_cache(repo);
    let tarball = find_tarball(rootfs)?;
    let fragment = repo.join(FRAGMENT);
    let fragment_sha256 = sha256_hex(
        &fs::read(&fragment).with_context(|| format!("reading {}", fragment.display()))?,
    );
    let tarball_sha256 = sha256_file(&tarball)?;
    let name = tarball
        .file_name()
        .expect("file name")
        .to_string_lossy()
        .trim_end_matches(".tar.xz")
        .to_string();
    let src = cache.join("src").join(&name);
    let stamp = cache.join("tree.json");
    if let Ok(text) = fs::read(&stamp)
        && let Ok(mut t) = serde_json::from_slice::<KernelTree>(&text)
        && t.tarball_sha256 == tarball_sha256
        && t.fragment_sha256 == fragment_sha256
        && src.join("Makefile").is_file()
    {
        t.src = src;
        return Ok(t);
    }
    for (tool, package) in [
        ("make", "make"),
        ("tar", "tar"),
        ("xz", "xz-utils"),
        ("flex", "flex"),
        ("bison", "bison"),
        ("bc", "bc"),
        ("powerpc64le-linux-gnu-gcc", "gcc-powerpc64le-linux-gnu"),
    ] {
        need(tool, package)?;
    }
    fs::create_dir_all(&cache)?;
    let logs = cache.join("logs");
    fs::create_dir_all(&logs)?;
    if !src.join("Makefile").is_file() {
        let unpack = cache.join("src.tmp");
        if unpack.exists() {
            fs::remove_dir_all(&unpack)?;
        }
        fs::create_dir_all(&unpack)?;
        eprintln!("lockscale: unpacking {}…", tarball.display());
        run(
            Command::new("tar")
                .arg("-C")
                .arg(&unpack)
                .arg("-xf")
                .arg(&tarball),
            "unpacking the kernel source",
            &logs.join("unpack.log"),
        )?;
        if cache.join("src").exists() {
            fs::remove_dir_all(cache.join("src"))?;
        }
        fs::rename(&unpack, cache.join("src"))?;
        if !src.join("Makefile").is_file() {
            bail!("{} did not unpack to {}", tarball.display(), src.display());
        }
    }
    // A complete listing build of the same inputs is reused (a failed check keeps it).
    let listing = cache.join("listing");
    let listing_stamp = listing.join(".lockscale-inputs");
    let inputs = format!("{tarball_sha256} {fragment_sha256}\n");
    if !listing.join("vmlinux").is_file()
        || fs::read_to_string(&listing_stamp).ok().as_deref() != Some(inputs.as_str())
    {
        cross_build(&src, &listing, &fragment, &logs, "listing")?;
        fs::write(&listing_stamp, &inputs)?;
    }
    let (named, objects, compiles) = read_records(&src, &listing)?;
    let mut files = BTreeSet::new();
    for e in walkdir::WalkDir::new(&src).sort_by_file_name().min_depth(1) {
        let e = e?;
        if e.file_type().is_dir() {
            continue;
        }
        let rel = e
            .path()
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .into_owned();
        if named.contains(&rel) || keep(&rel) {
            files.insert(rel);
        }
    }
    let missing: Vec<&String> = named
        .iter()
        .filter(|f| !src.join(f).exists())
        .take(5)
        .collect();
    if !missing.is_empty() {
        bail!("the listing build names files the tree lacks: {missing:?}");
    }
    // The check: the pruned tree, as hard links, must build by itself.
    let pruned = cache.join("pruned");
    if pruned.exists() {
        fs::remove_dir_all(&pruned)?;
    }
    let mut bytes = 0u64;
    for f in &files {
        let to = pruned.join(f);
        fs::create_dir_all(to.parent().expect("parent"))?;
        let from = src.join(f);
        let meta = fs::symlink_metadata(&from)?;
        if meta.file_type().is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
        } else {
            fs::hard_link(&from, &to)
                .or_else(|_| fs::copy(&from, &to).map(|_| ()))
                .with_context(|| format!("linking {}", to.display()))?;
            bytes += meta.len();
        }
    }
    let check = cache.join("check");
    cross_build(&pruned, &check, &fragment, &logs, "check").context(
        "the pruned kernel tree does not build on its own: a file the build reads is not in the \
         list (see kernel_tree.rs)",
    )?;
    let tree = KernelTree {
        name,
        tarball_sha256,
        fragment_sha256,
        files: files.into_iter().collect(),
        files_bytes: bytes,
        objects,
        compiles,
        src: src.clone(),
    };
    let mut text = serde_json::to_string_pretty(&tree)?;
    text.push('\n');
    write_atomic(&stamp, text.as_bytes())?;
    for d in [&listing, &check, &pruned] {
        fs::remove_dir_all(d).ok();
    }
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_outputs_are_what_a_directory_make_builds() {
        let tree = KernelTree {
            name: "linux-source-6.1".into(),
            tarball_sha256: String::new(),
            fragment_sha256: String::new(),
            files: vec![],
            files_bytes: 0,
            objects: [
                "init/main.o",
                "init/version-timestamp.o",
                "initramfs/x.o",
                "mm/slab.o",
                "kernel/fork.o",
                "scripts/mod/empty.o",
            ]
            .map(String::from)
            .to_vec(),
            compiles: 6,
            src: PathBuf::new(),
        };
        assert_eq!(
            tree.objects_under(&["init", "mm/"]),
            ["init/main.o", "mm/slab.o"]
        );
    }

    #[test]
    fn cmd_records_name_sources_and_headers_not_config_symbols() {
        let text = "savedcmd_kernel/fork.o := gcc -Wp,-MMD,kernel/.fork.o.d -c -o kernel/fork.o /s/kernel/fork.c\n\
                    \n\
                    source_kernel/fork.o := /s/kernel/fork.c\n\
                    \n\
                    deps_kernel/fork.o := \\\n\
                    \x20   $(wildcard include/config/SMP) \\\n\
                    \x20   $(wildcard include/config/A include/config/B) \\\n\
                    \x20 /s/include/linux/compiler-version.h \\\n\
                    \x20 include/generated/autoconf.h \\\n\
                    \x20 /usr/lib/gcc/x/stddef.h \\\n\
                    \n\
                    kernel/fork.o: $(deps_kernel/fork.o)\n\
                    \n\
                    $(deps_kernel/fork.o):\n";
        assert_eq!(
            cmd_record_files(text),
            [
                "/s/kernel/fork.c",
                "/s/include/linux/compiler-version.h",
                "include/generated/autoconf.h",
                "/usr/lib/gcc/x/stddef.h"
            ]
        );
    }

    #[test]
    fn paths_are_normalised() {
        assert_eq!(
            normalise("scripts/mod/../../include/linux/license.h"),
            "include/linux/license.h"
        );
        assert_eq!(normalise("./a//b/./c"), "a/b/c");
        assert_eq!(normalise("../a"), "../a");
    }

    #[test]
    fn keeps_build_files_and_drops_unnamed_sources() {
        assert!(keep("Makefile"));
        assert!(keep("kernel/Kconfig.preempt"));
        assert!(keep("scripts/link-vmlinux.sh"));
        assert!(keep("arch/powerpc/kernel/syscalls/syscall.tbl"));
        assert!(keep("arch/Kconfig"));
        assert!(keep("arch/x86/Kconfig"));
        assert!(!keep("arch/x86/Makefile"));
        assert!(keep("arch/x86/entry/syscalls/syscall_32.tbl"));
        assert!(!keep("kernel/fork.c"));
        assert!(!keep("include/linux/sched.h"));
        assert!(!keep("Documentation/Makefile"));
        assert!(keep("Documentation/Kconfig"));
        assert!(keep("usr/Kconfig"));
        assert!(!keep("tools/objtool/Makefile"));
        assert!(!keep("arch/powerpc/boot/dts/a.dts"));
    }
}
