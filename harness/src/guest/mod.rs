//! Linux guest images, built from nothing in one command (`lockscale guest build linux-make`,
//! also run by `sweep` when the image is missing):
//!
//! 1. The workload's committed lock (lock.rs: workloads/linux/packages.lock, or
//!    workloads/kernel/packages.lock for kernel-make) names every Debian ppc64el package by
//!    version, pool path and SHA-256. Exactly those files are fetched from the mirrors
//!    (fetch.rs; cached in `target/guest-cache/debs/`) and unpacked by the harness itself into
//!    `target/guest-cache/debian-ppc64el/rootfs`: nothing of them runs, nothing is resolved at
//!    build time, no apt or dpkg is needed.
//! 2. An initramfs (newc cpio, written with the `cpio` crate) of that tree without what a
//!    compile never reads (docs, modules, sanitizer runtimes, LTO), plus workloads/linux/init.sh
//!    as /init and the workload's project under /proj, in
//!    `target/guest-cache/<workload>/u<U>-s<S>/initrd.cpio`, with the kernel beside it.
//! 3. A manifest next to it (packages and versions, the lock's SHA-256, kernel and image
//!    SHA-256) that every results file of a sweep records; the image's SHA-256 is checked
//!    against the one recorded beside the lock (`images.json`, [`ImageRecords`]).
//!
//! kernel-make's tree is configured once, in a guest, before its image is written
//! ([`ensure_prepared`], prepared.rs): the image holds the configured tree and every run starts
//! at the timed make, so its bytes follow from the lock and the configure run's archive.
//!
//! Nothing downloaded is committed. Every archive entry has uid 0, mtime 0 (the configured
//! files: the ranks of their mtimes) and a fixed order, so the same lock, project and
//! configuration give the same image bytes.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::kernel_tree::{self, KernelTree};
use crate::lock::Lock;
use crate::model::{GuestManifest, PackageVersion, PreparedInfo};
use crate::prepared::{self, Entry};
use crate::sizes;
use crate::util::{now_rfc3339, sha256_file, stored_path, write_atomic};
use crate::workload::Workload;

mod archive;
mod records;

use archive::{Node, collect_entries, write_cpio};
pub use records::{
    IMAGES_FORMAT, ImageRecord, ImageRecords, RecordCheck, check_record, images_path,
};

/// The guest's /init, shared by the Linux workloads.
pub const INIT_SCRIPT: &str = "workloads/linux/init.sh";

/// The /init the images hold: [`INIT_SCRIPT`] without its comment lines and blank lines (the
/// `#!` line stays), so that editing a comment does not change an image's bytes and void the
/// SHA-256s committed beside the locks. The script has no here-documents or multi-line
/// strings for a `#` line to be part of.
pub fn guest_init(repo: &Path) -> Result<Vec<u8>> {
    let path = repo.join(INIT_SCRIPT);
    let text = fs::read_to_string(&path)
        .with_context(|| format!("reading the guest's /init, {}", path.display()))?;
    Ok(strip_comments(&text).into_bytes())
}

fn strip_comments(script: &str) -> String {
    let mut out = String::with_capacity(script.len());
    for (i, line) in script.lines().enumerate() {
        let code = line.trim_start();
        if (i > 0 && code.starts_with('#')) || code.is_empty() {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A configure image to boot (given to the caller's [`Boot`]).
#[derive(Clone, Debug)]
pub struct BootRequest {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub units: u32,
    /// Where to keep the console.
    pub log: PathBuf,
}

/// What a configure run gave: its console (stdout lines), the result line's checksum and guest
/// time, and the emulator, in words.
#[derive(Clone, Debug)]
pub struct BootOutput {
    pub console: Vec<String>,
    pub checksum: String,
    pub guest_s: f64,
    pub emulator: String,
}

/// Boots a configure image to its power-off. The caller provides it (commands/sweep_guest.rs runs ours),
/// so that building images needs no emulator of its own.
pub type Boot<'a> = dyn FnMut(&BootRequest) -> Result<BootOutput> + 'a;

/// A built image: what to boot and what it is.
#[derive(Clone, Debug)]
pub struct GuestImage {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub manifest: GuestManifest,
}

fn cache_root(repo: &Path) -> PathBuf {
    repo.join("target/guest-cache")
}

/// The unpacked packages of a workload: linux-make's set, or kernel-make's larger one.
fn package_dir(repo: &Path, workload: Workload) -> PathBuf {
    cache_root(repo).join(match workload {
        Workload::KernelMake => "debian-ppc64el-kernel",
        _ => "debian-ppc64el",
    })
}

fn rootfs_dir(repo: &Path, workload: Workload) -> PathBuf {
    package_dir(repo, workload).join("rootfs")
}

/// Holds the [`Lock::packages_digest`] the unpacked tree was made from.
fn rootfs_stamp(repo: &Path, workload: Workload) -> PathBuf {
    package_dir(repo, workload).join("packages.digest")
}

/// Where the image of a workload and size lives.
pub fn image_dir(repo: &Path, workload: Workload, units: u32, size: u32) -> PathBuf {
    cache_root(repo)
        .join(workload.name())
        .join(format!("u{units}-s{size}"))
}

/// Where fetches and imports are staged: beside the cache, never in it, so that a failure
/// leaves the cache as it was.
pub fn staging_dir(repo: &Path, what: &str) -> PathBuf {
    repo.join("target")
        .join(format!(".lockscale-{what}-{}", std::process::id()))
}

/// The Debian archive the host's apt already uses (first URI that is not a security archive),
/// so that the packages come from where this machine's packages come from.
pub fn host_debian_mirror() -> Option<String> {
    let mut uris = Vec::new();
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut files: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files
            .into_iter()
            .filter(|f| f.extension().is_some_and(|e| e == "sources"))
        {
            for line in fs::read_to_string(&f).unwrap_or_default().lines() {
                if let Some(rest) = line.trim().strip_prefix("URIs:") {
                    uris.extend(rest.split_whitespace().map(String::from));
                }
            }
        }
    }
    for line in fs::read_to_string("/etc/apt/sources.list")
        .unwrap_or_default()
        .lines()
    {
        let mut it = line.split_whitespace();
        if it.next() == Some("deb") {
            // `deb [options] URI suite …`
            if let Some(uri) = it.find(|w| !w.starts_with('[') && !w.ends_with(']')) {
                uris.push(uri.to_string());
            }
        }
    }
    uris.into_iter()
        .find(|u| !u.contains("-security") && u.contains("debian"))
}

/// Debian's own redirector, when the host has no Debian source of its own.
pub const FALLBACK_MIRROR: &str = "http://deb.debian.org/debian";
/// snapshot.debian.org's base for a timestamp (`--snapshot`).
pub const SNAPSHOT_BASE: &str = "https://snapshot.debian.org/archive/debian";

/// Where `guest build` fetches locked files from.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// `--mirror` URLs in order; none: the host's apt source (or Debian's redirector).
    pub mirrors: Vec<String>,
    /// `--snapshot[=TIMESTAMP]`: snapshot.debian.org at TIMESTAMP, or at the lock's own
    /// (`Some("")`), tried after the mirrors.
    pub snapshot: Option<String>,
}

impl Sources {
    /// The base URLs to try, in order.
    pub fn urls(&self, lock: &Lock) -> Vec<String> {
        let mut v = self.mirrors.clone();
        if v.is_empty() {
            v.push(host_debian_mirror().unwrap_or_else(|| FALLBACK_MIRROR.into()));
        }
        if let Some(t) = &self.snapshot {
            let t = if t.is_empty() { &lock.snapshot } else { t };
            v.push(format!("{SNAPSHOT_BASE}/{t}"));
        }
        v
    }
}

/// The locked packages, fetched (fetch.rs) and unpacked into the cache, unless the tree there
/// was unpacked from the same packages. Returns the root directory.
fn ensure_rootfs(
    repo: &Path,
    workload: Workload,
    lock: &Lock,
    sources: &Sources,
) -> Result<PathBuf> {
    let root = rootfs_dir(repo, workload);
    let stamp = rootfs_stamp(repo, workload);
    let digest = lock.packages_digest();
    if find_kernel(&root).is_ok() && fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == digest) {
        return Ok(root);
    }
    let cache = cache_root(repo);
    let staging = staging_dir(repo, "fetch");
    let debs =
        crate::fetch::fetch_locked(lock, workload.name(), &sources.urls(lock), &cache, &staging)?;
    let tmp = root.with_extension("tmp");
    if tmp.exists() {
        fs::remove_dir_all(&tmp).with_context(|| format!("removing {}", tmp.display()))?;
    }
    fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    eprintln!(
        "lockscale: unpacking {} locked Debian {} {} packages…",
        lock.packages.len(),
        lock.suite,
        lock.architecture
    );
    let mut controls = Vec::new();
    for (p, deb) in lock.packages.iter().zip(&debs) {
        match crate::fetch::unpack_deb(deb, p, &tmp) {
            Ok(c) => controls.push(c),
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                return Err(e);
            }
        }
    }
    let unmet = crate::fetch::unmet_dependencies(&controls);
    if !unmet.is_empty() {
        let _ = fs::remove_dir_all(&tmp);
        bail!(
            "the lock {} cannot be installed: {} dependenc{} no locked package meets:\n  {}\n\
             (edited by hand?) re-resolve it with `lockscale guest lock {workload}`",
            crate::lock::lock_path(repo, workload).display(),
            unmet.len(),
            if unmet.len() == 1 { "y" } else { "ies" },
            unmet.join("\n  ")
        );
    }
    find_kernel(&tmp).with_context(|| {
        format!(
            "the locked packages hold no kernel; the lock {} is not a guest's",
            crate::lock::lock_path(repo, workload).display()
        )
    })?;
    let _ = fs::remove_file(&stamp);
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("removing {}", root.display()))?;
    }
    fs::rename(&tmp, &root)?;
    write_atomic(&stamp, format!("{digest}\n").as_bytes())?;
    Ok(root)
}

/// The kernel of the unpacked tree: `boot/vmlinux-<version>`.
fn find_kernel(root: &Path) -> Result<PathBuf> {
    let boot = root.join("boot");
    let mut found: Vec<PathBuf> = fs::read_dir(&boot)
        .with_context(|| format!("no {}", boot.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinux-"))
        })
        .collect();
    found.sort();
    found
        .pop()
        .with_context(|| format!("no vmlinux-* in {}", boot.display()))
}

/// The image's package list, from its lock.
pub fn packages_of_lock(lock: &Lock) -> Vec<PackageVersion> {
    lock.packages
        .iter()
        .map(|p| PackageVersion {
            name: p.name.clone(),
            version: p.version.clone(),
        })
        .collect()
}

/// A deterministic generated C project: `units` files of `size` functions each, a main.c
/// calling every function and printing a checksum, and a Makefile with one compile per file
/// and a link. Returns (path under the project, contents) and the build outputs.
pub fn generate_project(units: u32, size: u32) -> (Vec<(String, String)>, Vec<String>) {
    let mut files = Vec::new();
    let mut objs = Vec::new();
    for u in 0..units {
        let mut s = format!(
            "/* unit {u} of the linux-make project (generated by lockscale) */\n#include <stdint.h>\n#include <string.h>\n\n\
             struct u{u}_state {{ uint64_t acc[8]; uint32_t hist[32]; }};\n\n\
             static uint64_t u{u}_rot(uint64_t v, unsigned r) {{ return (v << r) | (v >> (64 - r)); }}\n"
        );
        for f in 0..size {
            // Constants differ per function so that nothing folds across functions.
            let h = mix(u64::from(u) << 32 | u64::from(f));
            let (k1, k2, rounds, mul) = (
                h & 0xffff_ffff,
                (h >> 32) & 0xff,
                8 + (h >> 40) % 24,
                (h >> 8) | 1,
            );
            s.push_str(&format!(
                "\nuint64_t u{u}_f{f}(uint64_t seed)\n{{\n\
                 \x20   struct u{u}_state st;\n\
                 \x20   memset(&st, 0, sizeof st);\n\
                 \x20   uint64_t v = seed ^ {k1}u;\n\
                 \x20   for (unsigned n = 0; n < {rounds}; n++) {{\n\
                 \x20       v = v * {mul}ull + (n ^ {k2}u);\n\
                 \x20       st.acc[n & 7] += u{u}_rot(v, n % 61 + 1);\n\
                 \x20       st.hist[(v >> 59) ^ (n & 31)]++;\n\
                 \x20       switch ((v >> 17) & 3) {{\n\
                 \x20       case 0: v ^= st.acc[(n + 1) & 7] >> 3; break;\n\
                 \x20       case 1: v += (uint64_t)st.hist[n & 31] * {k2}u; break;\n\
                 \x20       case 2: v = u{u}_rot(v, (n & 15) + 1) - st.acc[n & 7]; break;\n\
                 \x20       default: v = ~v + (v % ({k2}u + 3)); break;\n\
                 \x20       }}\n\
                 \x20       if (st.acc[(n + 3) & 7] & 1)\n\
                 \x20           v ^= st.acc[(n + 5) & 7];\n\
                 \x20       else\n\
                 \x20           v += st.hist[(n * 7) & 31];\n\
                 \x20   }}\n\
                 \x20   uint64_t out = v;\n\
                 \x20   for (unsigned k = 0; k < 8; k++)\n\
                 \x20       out = out * 31 + st.acc[k];\n\
                 \x20   for (unsigned k = 0; k < 32; k++)\n\
                 \x20       out ^= (uint64_t)st.hist[k] << (k % 48);\n\
                 \x20   return out;\n}}\n"
            ));
        }
        files.push((format!("u{u}.c"), s));
        objs.push(format!("u{u}.o"));
    }
    let mut main = String::from(
        "/* linux-make project: calls every function (generated by lockscale) */\n#include <stdint.h>\n#include <stdio.h>\n\n",
    );
    for u in 0..units {
        for f in 0..size {
            main.push_str(&format!("uint64_t u{u}_f{f}(uint64_t);\n"));
        }
    }
    main.push_str("\nint main(void)\n{\n    uint64_t s = 1;\n");
    for u in 0..units {
        for f in 0..size {
            main.push_str(&format!("    s = u{u}_f{f}(s) ^ (s >> 7);\n"));
        }
    }
    main.push_str("    printf(\"linux-make program checksum %016llx\\n\", (unsigned long long)s);\n    return 0;\n}\n");
    files.push(("main.c".into(), main));
    objs.push("main.o".into());
    let makefile = format!(
        "# linux-make project (generated by lockscale): one compile per unit, one link\n\
         CC = gcc\nCFLAGS = -O2\nOBJS = {}\n\nprog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\n%.o: %.c\n\t$(CC) $(CFLAGS) -c $< -o $@\n",
        objs.join(" ")
    );
    files.push(("Makefile".into(), makefile));
    let mut outputs = objs;
    outputs.push("prog".into());
    (files, outputs)
}

/// SplitMix64's finaliser: spreads the project's per-function constants.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What goes under /proj: generated files (`params` and `outputs` among them, which /init
/// reads) and, for kernel-make, the pruned kernel tree and what its configuration wrote.
struct Project {
    texts: Vec<(String, String)>,
    tree: Option<KernelTree>,
    /// By path under the image root (`proj/…`).
    prepared: BTreeMap<String, Entry>,
}

/// The kernel's configuration, run once in a configure image (prepared.rs): `tinyconfig`, the
/// fragment, `olddefconfig`.
const KERNEL_CONFIGURE: &str =
    "make -j$jobs tinyconfig && cat {frag} >>.config && make -j$jobs olddefconfig";

/// What the configure image's /proj/params adds to the kernel-make image's.
fn configure_params() -> String {
    format!(
        "PREPARE='{}'\nEXPORT_PREPARED=1\n",
        KERNEL_CONFIGURE.replace("{frag}", KERNEL_FRAGMENT_IN_GUEST)
    )
}

/// The kernel-make build: the make's environment and arguments, and how its log names a
/// compile (the tree comes configured, [`ensure_prepared`]). `units` is the number of
/// directories of the `--quick` subset ([`sizes::KERNEL_QUICK_DIRS`]), 0 for the whole vmlinux.
fn kernel_params(units: u32) -> Result<(String, Vec<&'static str>)> {
    let dirs: Vec<&str> = match units {
        0 => vec![],
        n if n as usize == sizes::KERNEL_QUICK_DIRS.len() => sizes::KERNEL_QUICK_DIRS.to_vec(),
        n => bail!(
            "kernel-make builds the whole vmlinux (units 0) or the --quick subset ({} directories), not {n}",
            sizes::KERNEL_QUICK_DIRS.len()
        ),
    };
    let targets = if dirs.is_empty() {
        "vmlinux".to_string()
    } else {
        dirs.iter()
            .map(|d| format!("{d}/"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let params = format!(
        "WORKLOAD={workload}\nUNITS={units}\nSIZE=0\n\
         export KBUILD_BUILD_TIMESTAMP='{ts}' KBUILD_BUILD_USER={user} KBUILD_BUILD_HOST={host}\n\
         MAKEFLAGS_EXTRA='KCFLAGS=-ffile-prefix-map=/proj/= KAFLAGS=-ffile-prefix-map=/proj/= {targets}'\n\
         COMPILE_LINES='^  (CC|AS|HOSTCC|HOSTCXX) '\n",
        workload = Workload::KernelMake.name(),
        ts = kernel_tree::BUILD_TIMESTAMP,
        user = kernel_tree::BUILD_USER,
        host = kernel_tree::BUILD_HOST,
    );
    Ok((params, dirs))
}

/// Where the configuration fragment lies in the guest's kernel tree.
const KERNEL_FRAGMENT_IN_GUEST: &str = "lockscale-pseries-tiny.config";

/// The /proj of a workload. kernel-make needs its tree (built and listed by kernel_tree.rs)
/// only for the files and outputs; `tree` is `None` when only the inputs are wanted.
fn project(
    repo: &Path,
    workload: Workload,
    units: u32,
    size: u32,
    tree: Option<KernelTree>,
) -> Result<Project> {
    let mut texts = Vec::new();
    let outputs = match workload {
        Workload::LinuxMake => {
            let (files, outputs) = generate_project(units, size);
            texts = files;
            texts.push((
                "params".into(),
                format!(
                    "WORKLOAD={}\nUNITS={units}\nSIZE={size}\nMAKEFLAGS_EXTRA=\n",
                    workload.name()
                ),
            ));
            outputs
        }
        Workload::KernelMake => {
            if size != 0 {
                bail!("kernel-make has no --size (its sources are the kernel's)");
            }
            let (params, dirs) = kernel_params(units)?;
            texts.push(("params".into(), params));
            let frag = repo.join(kernel_tree::FRAGMENT);
            texts.push((
                KERNEL_FRAGMENT_IN_GUEST.into(),
                fs::read_to_string(&frag).with_context(|| format!("reading {}", frag.display()))?,
            ));
            match &tree {
                None => vec![],
                Some(_) if dirs.is_empty() => vec!["vmlinux".to_string()],
                Some(t) => {
                    let objs = t.objects_under(&dirs);
                    if objs.is_empty() {
                        bail!(
                            "the --quick directories {dirs:?} hold no objects of this configuration"
                        );
                    }
                    objs
                }
            }
        }
        Workload::Mkbench => bail!("mkbench is not a Linux guest: it needs no image"),
    };
    if tree.is_some() || workload == Workload::LinuxMake {
        texts.push(("outputs".into(), outputs.join("\n") + "\n"));
    }
    Ok(Project {
        texts,
        tree,
        prepared: BTreeMap::new(),
    })
}

/// Reads an image's manifest and checks the image against it.
fn load_checked(repo: &Path, dir: &Path) -> Result<Option<GuestImage>> {
    let mpath = dir.join("manifest.json");
    let ipath = dir.join("initrd.cpio");
    if !mpath.is_file() {
        return Ok(None);
    }
    let m: GuestManifest = serde_json::from_slice(&fs::read(&mpath)?)
        .with_context(|| format!("{} is not a guest manifest", mpath.display()))?;
    let kernel = crate::util::resolve_stored(repo, &m.kernel);
    for (what, path, want) in [
        ("image", &ipath, &m.initrd_sha256),
        ("kernel", &kernel, &m.kernel_sha256),
    ] {
        if !path.is_file() {
            bail!(
                "the guest {what} {} is missing; rebuild with `lockscale guest build {} --force`",
                path.display(),
                m.workload
            );
        }
        if &sha256_file(path)? != want {
            bail!(
                "the guest {what} {} does not match its manifest's SHA-256 (corrupt or changed); rebuild with \
                 `lockscale guest build {} --force`",
                path.display(),
                m.workload
            );
        }
    }
    Ok(Some(GuestImage {
        kernel,
        initrd: ipath,
        manifest: m,
    }))
}

/// What the image's own files are made from: /init and the project's generated files (for
/// kernel-make its build settings, configuration fragment and the rule that picks its
/// outputs; the tree follows from the packages).
pub fn inputs_sha256(repo: &Path, workload: Workload, units: u32, size: u32) -> Result<String> {
    let mut all = guest_init(repo)?;
    if workload == Workload::KernelMake {
        all.extend(kernel_tree::OUTPUT_RULE.as_bytes());
        all.extend(configure_params().into_bytes());
    }
    for (path, text) in project(repo, workload, units, size, None)?.texts {
        all.extend(path.into_bytes());
        all.extend(text.into_bytes());
    }
    Ok(crate::util::sha256_hex(&all))
}

/// The configured kernel tree's files: the committed configuration
/// (`workloads/kernel/prepared.cpio.gz` and `prepared.json`, [`prepared_paths`]) when its key
/// matches, else a configure image (the kernel-make image of `project`, with
/// [`configure_params`]) booted by `boot`, its console turned into files (prepared.rs) and
/// written there, to be committed.
///
/// Why committed rather than cached: two configure runs write the same files with the same
/// contents, but the parallel make finishes them in another order, and their mtime ranks —
/// which make reads, so they are part of the image — differ. The archive is the configure
/// step's lock: with it, the image's bytes follow from what the repository holds, and a fresh
/// machine skips the 10–20 minutes of configuring. `--force` rebuilds the image, not this.
fn ensure_prepared(
    repo: &Path,
    lock: &Lock,
    root: &Path,
    kernel: &Path,
    project: &mut Project,
    units: u32,
    boot: &mut Boot,
) -> Result<PreparedInfo> {
    let dir = cache_root(repo)
        .join(Workload::KernelMake.name())
        .join("prepared");
    let tree = project.tree.as_ref().expect("kernel-make has its tree");
    let mut key = Vec::new();
    for part in [
        tree.tarball_sha256.as_str(),
        tree.fragment_sha256.as_str(),
        &tree.files.join("\n"),
        &configure_params(),
        &lock.packages_digest(),
    ] {
        key.extend(crate::util::sha256_hex(part.as_bytes()).into_bytes());
    }
    let key = crate::util::sha256_hex(&key);
    if let Some((info, files)) = committed_configuration(repo, &key)? {
        project.prepared = files;
        return Ok(info);
    }
    fs::create_dir_all(&dir)?;
    let mut nodes = collect_entries(repo, root, project)?;
    let Some(Node::Bytes { data: params, .. }) = nodes.get_mut("proj/params") else {
        bail!("the kernel-make image has no /proj/params");
    };
    params.extend(configure_params().into_bytes());
    let initrd = dir.join("configure.cpio");
    write_cpio(&initrd, &nodes)?;
    let log = dir.join("configure.log");
    let out = boot(&BootRequest {
        kernel: kernel.to_path_buf(),
        initrd: initrd.clone(),
        units,
        log: log.clone(),
    });
    let _ = fs::remove_file(&initrd); // about 200 MB, and rebuilt from the cache when needed
    let out = out?;
    let archive = prepared::archive_from_console(out.console.iter().map(String::as_str))
        .with_context(|| format!("the configure run's console, {}", log.display()))?;
    let sha = crate::util::sha256_hex(&archive);
    if !sha.eq_ignore_ascii_case(&out.checksum) {
        bail!(
            "the configure run's archive has SHA-256 {sha} but its result line says {}: its console \
             lines were garbled ({}); run `lockscale guest build kernel-make --force` again",
            out.checksum,
            log.display()
        );
    }
    project.prepared = prepared::unpack(&archive)
        .with_context(|| format!("the configure run's archive ({})", log.display()))?;
    let info = PreparedInfo {
        key,
        archive_sha256: sha,
        entries: project.prepared.len() as u64,
        emulator: out.emulator,
        guest_s: out.guest_s,
        when: now_rfc3339(),
    };
    let (archive_path, info_path) = prepared_paths(repo);
    write_atomic(&archive_path, &archive)?;
    let mut text = serde_json::to_string_pretty(&info)?;
    text.push('\n');
    write_atomic(&info_path, text.as_bytes())?;
    eprintln!(
        "lockscale: the kernel tree is configured ({} entries, {:.0} s of guest time) and written \
         to {} and {}: commit them with the lock, so that other machines build the same image",
        info.entries,
        info.guest_s,
        archive_path.display(),
        info_path.display()
    );
    Ok(info)
}

/// The committed configuration and its files when its key is `key`; `None` when there is
/// none or it is for another key (another tree, fragment or lock: configure again). A
/// committed archive whose SHA-256 is not the recorded one is an error: it was damaged, and
/// configuring again would silently replace the repository's configuration.
pub fn committed_configuration(
    repo: &Path,
    key: &str,
) -> Result<Option<(PreparedInfo, BTreeMap<String, Entry>)>> {
    let (archive_path, info_path) = prepared_paths(repo);
    let Ok(text) = fs::read(&info_path) else {
        return Ok(None);
    };
    let info = serde_json::from_slice::<PreparedInfo>(&text)
        .with_context(|| format!("{} is not a configuration record", info_path.display()))?;
    if info.key != key {
        eprintln!(
            "lockscale: {} is for another kernel tree, fragment or package lock: configuring \
             the tree again (10–20 min)",
            info_path.display()
        );
        return Ok(None);
    }
    let sha = sha256_file(&archive_path)
        .with_context(|| format!("reading {}", archive_path.display()))?;
    if sha != info.archive_sha256 {
        bail!(
            "{} has SHA-256 {sha}, but {} records {}: restore it from the repository \
             (git checkout -- {}), or delete both files to configure the tree again",
            archive_path.display(),
            info_path.display(),
            info.archive_sha256,
            archive_path.display()
        );
    }
    let files = prepared::unpack(&fs::read(&archive_path)?)
        .with_context(|| format!("reading {}", archive_path.display()))?;
    Ok(Some((info, files)))
}

/// Where the kernel-make tree's committed configuration lives: beside the workload's lock.
pub fn prepared_paths(repo: &Path) -> (PathBuf, PathBuf) {
    let lock = crate::lock::lock_path(repo, Workload::KernelMake);
    (
        lock.with_file_name("prepared.cpio.gz"),
        lock.with_file_name("prepared.json"),
    )
}

/// The image of a workload and size: the cached one when its manifest checks out and it was
/// built from the committed lock, else built from the lock's packages, fetched from
/// `sources` (`force` rebuilds, kernel-make's configuration included; the unpacked packages
/// are reused either way). `boot` runs kernel-make's configure image when its configuration is
/// not cached. A cached image that is not the one recorded beside the lock is rebuilt; the
/// callers check the result against the record ([`check_record`]).
pub fn ensure_image(
    repo: &Path,
    workload: Workload,
    units: u32,
    size: u32,
    force: bool,
    sources: &Sources,
    boot: &mut Boot,
) -> Result<GuestImage> {
    if workload == Workload::Mkbench {
        bail!("{workload} is not a Linux guest: it needs no image");
    }
    let (lock, lock_sha) = Lock::load(repo, workload)?;
    let records = ImageRecords::load(repo, workload)?;
    let dir = image_dir(repo, workload, units, size);
    let inputs = inputs_sha256(repo, workload, units, size)?;
    if !force && let Some(img) = load_checked(repo, &dir)? {
        let check = records.check(&img.manifest);
        if img.manifest.inputs_sha256 != inputs {
            eprintln!(
                "lockscale: {} was built from another /init or project generator; rebuilding",
                img.initrd.display()
            );
        } else if img.manifest.lock_sha256 != lock_sha {
            eprintln!(
                "lockscale: {} was built from another package lock than {}; rebuilding",
                img.initrd.display(),
                crate::lock::lock_path(repo, workload).display()
            );
        } else if let RecordCheck::Differs(want) = &check {
            eprintln!(
                "lockscale: {} is not the image recorded in {} (SHA-256 {want}); rebuilding",
                img.initrd.display(),
                images_path(repo, workload).display()
            );
        } else {
            return Ok(img);
        }
    }
    let root = ensure_rootfs(repo, workload, &lock, sources)?;
    let built_kernel = find_kernel(&root)?;
    let tree = match workload {
        Workload::KernelMake => Some(kernel_tree::ensure_tree(repo, &root)?),
        _ => None,
    };
    let mut project = project(repo, workload, units, size, tree)?;
    let prepared = match workload {
        Workload::KernelMake => Some(ensure_prepared(
            repo,
            &lock,
            &root,
            &built_kernel,
            &mut project,
            units,
            boot,
        )?),
        _ => None,
    };
    let nodes = collect_entries(repo, &root, &project)?;
    fs::create_dir_all(&dir)?;
    // Without a manifest, a half-written directory is never taken for an image.
    let _ = fs::remove_file(dir.join("manifest.json"));
    let ipath = dir.join("initrd.cpio");
    let tmp = dir.join(".initrd.cpio.tmp");
    eprintln!(
        "lockscale: writing {} ({} entries)…",
        ipath.display(),
        nodes.len()
    );
    let entries = write_cpio(&tmp, &nodes)?;
    fs::rename(&tmp, &ipath)?;
    // The kernel goes beside the image, so that the image directory is the whole guest
    // (`guest export` carries it).
    let kernel = dir.join(built_kernel.file_name().expect("vmlinux-*"));
    for e in fs::read_dir(&dir)?.filter_map(|e| e.ok()) {
        if e.file_name().to_string_lossy().starts_with("vmlinux-") {
            fs::remove_file(e.path())?;
        }
    }
    if fs::hard_link(&built_kernel, &kernel).is_err() {
        fs::copy(&built_kernel, &kernel)
            .with_context(|| format!("copying the kernel to {}", kernel.display()))?;
    }
    let manifest = GuestManifest {
        workload: workload.name().into(),
        suite: format!("{}/{}", lock.suite, lock.architecture),
        lock: stored_path(repo, &crate::lock::lock_path(repo, workload)),
        lock_sha256: lock_sha,
        packages: packages_of_lock(&lock),
        kernel: stored_path(repo, &kernel),
        kernel_sha256: sha256_file(&kernel)?,
        initrd: stored_path(repo, &ipath),
        initrd_sha256: sha256_file(&ipath)?,
        initrd_bytes: fs::metadata(&ipath)?.len(),
        entries,
        units,
        size,
        built: now_rfc3339(),
        inputs_sha256: inputs,
        prepared,
    };
    write_manifest(&dir, &manifest)?;
    Ok(GuestImage {
        kernel,
        initrd: ipath,
        manifest,
    })
}

/// Writes an image's manifest.json.
pub fn write_manifest(dir: &Path, m: &GuestManifest) -> Result<()> {
    let mut text = serde_json::to_string_pretty(m)?;
    text.push('\n');
    write_atomic(&dir.join("manifest.json"), text.as_bytes())
}

/// Reads and checks the cached image of a workload and size, if there is one.
pub fn cached_image(
    repo: &Path,
    workload: Workload,
    units: u32,
    size: u32,
) -> Result<Option<GuestImage>> {
    load_checked(repo, &image_dir(repo, workload, units, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_images_init_has_no_comment_or_blank_lines_but_keeps_its_interpreter_line() {
        let script = "#!/bin/sh\n# why\n\nset -e\n    # indented why\n    grep -v '^#' x\n";
        assert_eq!(
            strip_comments(script),
            "#!/bin/sh\nset -e\n    grep -v '^#' x\n"
        );
        let init = guest_init(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()).unwrap();
        let init = String::from_utf8(init).unwrap();
        assert!(init.starts_with("#!"), "{init}");
        assert!(init.contains("LINUX-MAKE-RESULT"));
    }

    #[test]
    fn the_committed_configuration_is_used_for_its_key_only_and_refused_when_damaged() {
        let repo = tempfile::tempdir().unwrap();
        let repo = repo.path();
        assert!(committed_configuration(repo, "k1").unwrap().is_none());
        let (archive_path, info_path) = prepared_paths(repo);
        fs::create_dir_all(archive_path.parent().unwrap()).unwrap();
        let archive = prepared::test_archive(&[
            ("proj/.config", 0o100644, b"CONFIG_SMP=y\n"),
            (
                prepared::TIMES,
                0o100644,
                b"1796000005.7000000000 proj/.config\n",
            ),
        ]);
        fs::write(&archive_path, &archive).unwrap();
        let info = PreparedInfo {
            key: "k1".into(),
            archive_sha256: crate::util::sha256_hex(&archive),
            entries: 1,
            emulator: "ppc64emu".into(),
            guest_s: 1.0,
            when: "2026-12-04T00:00:00Z".into(),
        };
        fs::write(&info_path, serde_json::to_vec(&info).unwrap()).unwrap();
        let (got, files) = committed_configuration(repo, "k1").unwrap().unwrap();
        assert_eq!(got, info);
        assert_eq!(files.keys().collect::<Vec<_>>(), ["proj/.config"]);
        // Another tree, fragment or lock: configure again.
        assert!(committed_configuration(repo, "k2").unwrap().is_none());
        // A damaged archive is not silently replaced.
        fs::write(&archive_path, &archive[..archive.len() - 1]).unwrap();
        let e = committed_configuration(repo, "k1").unwrap_err().to_string();
        assert!(e.contains("restore it from the repository"), "{e}");
    }

    #[test]
    fn project_is_deterministic_and_sized() {
        let (a, outs) = generate_project(3, 2);
        assert_eq!(a, generate_project(3, 2).0);
        let names: Vec<&str> = a.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["u0.c", "u1.c", "u2.c", "main.c", "Makefile"]);
        assert_eq!(outs, ["u0.o", "u1.o", "u2.o", "main.o", "prog"]);
        assert_eq!(a[1].1.matches("uint64_t u1_f").count(), 2);
        assert_eq!(a[3].1.matches("s = u").count(), 6);
        assert!(a[4].1.contains("\t$(CC) $(CFLAGS) -c $< -o $@"));
        // Different sizes give different sources.
        assert_ne!(generate_project(3, 3).0[0], a[0]);
    }
}
