//! The initramfs: which files of the unpacked tree go in, and the newc cpio archive written
//! with fixed owners, times and order, so that the same inputs give the same bytes.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::Project;
use crate::prepared::Entry;

/// Parts of the unpacked tree that no compile reads: leaving them out keeps the initramfs
/// (which lives in guest RAM twice while it unpacks) at about 140 MB.
fn excluded(rel: &str) -> bool {
    const TREES: &[&str] = &[
        "boot",
        "var",
        "dev",
        "etc/initramfs-tools",
        "usr/share",
        "usr/src",
        "usr/lib/modules",
        "usr/lib/systemd",
        "usr/lib/udev",
        "usr/lib/dracut",
        "usr/lib/klibc",
        "usr/lib/powerpc64le-linux-gnu/gconv",
    ];
    // Data a tool of the kernel build reads at run time (bison's skeletons), inside those trees.
    const KEPT: &[&str] = &["usr/share/bison"];
    let under =
        |rel: &str, t: &str| rel == t || rel.strip_prefix(t).is_some_and(|r| r.starts_with('/'));
    if KEPT.iter().any(|k| under(rel, k) || under(k, rel)) {
        return false;
    }
    if TREES.iter().any(|t| under(rel, t)) {
        return true;
    }
    let name = rel.rsplit('/').next().unwrap_or(rel);
    // Sanitizer runtimes and link-time optimisation: not used by `gcc -O2`.
    ["libasan", "liblsan", "libtsan", "libubsan", "libhwasan"]
        .iter()
        .any(|p| name.starts_with(p))
        || name == "lto1"
        || name.contains("lto-dump")
}

/// One entry of the archive.
pub(super) enum Node {
    Dir,
    File {
        src: PathBuf,
        mode: u32,
    },
    Bytes {
        data: Vec<u8>,
        mode: u32,
        mtime: u32,
    },
    Symlink(String),
    CharDev {
        major: u32,
        minor: u32,
        mode: u32,
    },
}

/// The archive's entries: the unpacked tree minus [`excluded`], the usual merged-/usr links,
/// /init, /dev/console and the project.
pub(super) fn collect_entries(
    repo: &Path,
    root: &Path,
    project: &Project,
) -> Result<BTreeMap<String, Node>> {
    let mut nodes = BTreeMap::new();
    let mut walk = walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .min_depth(1)
        .into_iter();
    while let Some(e) = walk.next() {
        let e = e.with_context(|| format!("reading {}", root.display()))?;
        let rel = e
            .path()
            .strip_prefix(root)
            .expect("under root")
            .to_string_lossy()
            .into_owned();
        if excluded(&rel) {
            if e.file_type().is_dir() {
                walk.skip_current_dir();
            }
            continue;
        }
        let ft = e.file_type();
        let node = if ft.is_dir() {
            Node::Dir
        } else if ft.is_symlink() {
            Node::Symlink(fs::read_link(e.path())?.to_string_lossy().into_owned())
        } else if ft.is_file() {
            use std::os::unix::fs::PermissionsExt;
            Node::File {
                src: e.path().to_path_buf(),
                mode: e.metadata()?.permissions().mode() & 0o7777,
            }
        } else {
            continue; // no device nodes or fifos come from packages unpacked without running them
        };
        nodes.insert(rel, node);
    }
    for d in ["bin", "sbin", "lib", "lib64"] {
        nodes
            .entry(d.into())
            .or_insert_with(|| Node::Symlink(format!("usr/{d}")));
    }
    // /bin/sh: bash when the image has it (kernel-make). Debian's static busybox runs its own
    // applets before PATH, so under its shell the kernel's `xargs ar` gets busybox's ar.
    let sh = if nodes.contains_key("usr/bin/bash") {
        "bash"
    } else {
        "busybox"
    };
    nodes
        .entry("usr/bin/sh".into())
        .or_insert_with(|| Node::Symlink(sh.into()));
    nodes
        .entry("usr/bin/cc".into())
        .or_insert_with(|| Node::Symlink("gcc".into()));
    // The link Debian's alternatives would make: the kernel's scripts want GNU awk.
    if nodes.contains_key("usr/bin/gawk") {
        nodes
            .entry("usr/bin/awk".into())
            .or_insert_with(|| Node::Symlink("gawk".into()));
    }
    for d in ["dev", "proc", "sys", "tmp", "proj"] {
        nodes.insert(d.into(), Node::Dir);
    }
    nodes.insert(
        "dev/console".into(),
        Node::CharDev {
            major: 5,
            minor: 1,
            mode: 0o600,
        },
    );
    let init = super::guest_init(repo)?;
    nodes.insert(
        "init".into(),
        Node::Bytes {
            data: init,
            mode: 0o755,
            mtime: 0,
        },
    );
    for (path, text) in &project.texts {
        nodes.insert(
            format!("proj/{path}"),
            Node::Bytes {
                data: text.clone().into_bytes(),
                mode: 0o644,
                mtime: 0,
            },
        );
    }
    if let Some(tree) = &project.tree {
        for rel in &tree.files {
            let src = tree.src.join(rel);
            let meta =
                fs::symlink_metadata(&src).with_context(|| format!("reading {}", src.display()))?;
            let node = if meta.file_type().is_symlink() {
                Node::Symlink(fs::read_link(&src)?.to_string_lossy().into_owned())
            } else {
                use std::os::unix::fs::PermissionsExt;
                Node::File {
                    src,
                    mode: meta.permissions().mode() & 0o7777,
                }
            };
            insert_with_parents(&mut nodes, format!("proj/{rel}"), node);
        }
    }
    for (path, e) in &project.prepared {
        let node = match e {
            Entry::Dir => Node::Dir,
            Entry::Symlink(t) => Node::Symlink(t.clone()),
            Entry::File { data, mode, mtime } => Node::Bytes {
                data: data.clone(),
                mode: *mode,
                mtime: *mtime,
            },
        };
        insert_with_parents(&mut nodes, path.clone(), node);
    }
    Ok(nodes)
}

/// Adds an entry and every directory above it, as the walk of the root file system gives.
fn insert_with_parents(nodes: &mut BTreeMap<String, Node>, path: String, node: Node) {
    let mut at = 0;
    while let Some(i) = path[at..].find('/') {
        at += i;
        nodes.entry(path[..at].to_string()).or_insert(Node::Dir);
        at += 1;
    }
    nodes.insert(path, node);
}

/// Writes the archive (BTreeMap order puts every directory before what it holds).
pub(super) fn write_cpio(out: &Path, nodes: &BTreeMap<String, Node>) -> Result<u64> {
    use cpio::newc::{Builder, ModeFileType, trailer};
    let mut w = BufWriter::new(
        fs::File::create(out).with_context(|| format!("creating {}", out.display()))?,
    );
    for (ino, (name, node)) in (1u32..).zip(nodes) {
        let mtime = match node {
            Node::Bytes { mtime, .. } => *mtime,
            _ => 0,
        };
        let b = Builder::new(name).ino(ino).uid(0).gid(0).mtime(mtime);
        let too_big = || format!("{name} is over 4 GiB, more than a newc archive holds");
        w = match node {
            Node::Dir => b
                .mode(u32::from(ModeFileType::Directory) | 0o755)
                .nlink(2)
                .write(w, 0)
                .finish()?,
            Node::Symlink(target) => {
                let mut e = b
                    .mode(u32::from(ModeFileType::Symlink) | 0o777)
                    .nlink(1)
                    .write(w, target.len() as u32);
                e.write_all(target.as_bytes())?;
                e.finish()?
            }
            Node::CharDev { major, minor, mode } => b
                .mode(u32::from(ModeFileType::Char) | mode)
                .nlink(1)
                .rdev_major(*major)
                .rdev_minor(*minor)
                .write(w, 0)
                .finish()?,
            Node::Bytes { data, mode, .. } => {
                let len = u32::try_from(data.len()).ok().with_context(too_big)?;
                let mut e = b
                    .mode(u32::from(ModeFileType::Regular) | mode)
                    .nlink(1)
                    .write(w, len);
                e.write_all(data)?;
                e.finish()?
            }
            Node::File { src, mode } => {
                let mut f =
                    fs::File::open(src).with_context(|| format!("reading {}", src.display()))?;
                let len = u32::try_from(f.metadata()?.len())
                    .ok()
                    .with_context(too_big)?;
                let mut e = b
                    .mode(u32::from(ModeFileType::Regular) | mode)
                    .nlink(1)
                    .write(w, len);
                let copied = std::io::copy(&mut f, &mut e)?;
                if copied != u64::from(len) {
                    bail!("{} changed while being archived", src.display());
                }
                e.finish()?
            }
        };
    }
    let mut w = trailer(w)?;
    w.flush()?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(nodes.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusions_match_whole_components() {
        assert!(excluded("usr/share/zoneinfo"));
        assert!(excluded("usr/share/zoneinfo/UTC"));
        assert!(!excluded("usr/share"));
        assert!(!excluded("usr/share/bison/skeletons/yacc.c"));
        assert!(excluded("usr/share/bisonx"));
        assert!(!excluded("usr/shared-thing"));
        assert!(excluded("usr/lib/gcc/powerpc64le-linux-gnu/14/libasan.so"));
        assert!(excluded("usr/libexec/gcc/powerpc64le-linux-gnu/14/lto1"));
        assert!(!excluded("usr/libexec/gcc/powerpc64le-linux-gnu/14/cc1"));
        assert!(!excluded("usr/bin/gcc"));
    }

    #[test]
    fn archive_round_trips_through_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        fs::write(&f, b"hello").unwrap();
        let mut nodes = BTreeMap::new();
        nodes.insert("bin".to_string(), Node::Symlink("usr/bin".into()));
        nodes.insert("dev".to_string(), Node::Dir);
        nodes.insert(
            "dev/console".to_string(),
            Node::CharDev {
                major: 5,
                minor: 1,
                mode: 0o600,
            },
        );
        nodes.insert(
            "init".to_string(),
            Node::Bytes {
                data: b"#!/bin/sh\n".to_vec(),
                mode: 0o755,
                mtime: 7,
            },
        );
        nodes.insert(
            "usr/a.txt".to_string(),
            Node::File {
                src: f,
                mode: 0o644,
            },
        );
        let out = dir.path().join("x.cpio");
        assert_eq!(write_cpio(&out, &nodes).unwrap(), 5);
        let mut r = std::io::BufReader::new(fs::File::open(&out).unwrap());
        let mut seen = Vec::new();
        loop {
            let e = cpio::newc::Reader::new(r).unwrap();
            if e.entry().is_trailer() {
                break;
            }
            let (name, mode, rdev) = (
                e.entry().name().to_string(),
                e.entry().mode(),
                e.entry().rdev_major(),
            );
            // Only a configured kernel file (Node::Bytes with its mtime rank) is not at 0.
            let want_mtime = if name == "init" { 7 } else { 0 };
            assert_eq!(e.entry().mtime(), want_mtime, "{name}");
            let mut data = Vec::new();
            let mut e = e;
            std::io::Read::read_to_end(&mut e, &mut data).unwrap();
            seen.push((name, mode, rdev, data));
            r = e.finish().unwrap();
        }
        assert_eq!(seen.len(), 5);
        assert_eq!(seen[0], ("bin".into(), 0o120777, 0, b"usr/bin".to_vec()));
        assert_eq!(seen[2], ("dev/console".into(), 0o020600, 5, vec![]));
        assert_eq!(seen[3].3, b"#!/bin/sh\n");
        assert_eq!(
            seen[4],
            ("usr/a.txt".into(), 0o100644, 0, b"hello".to_vec())
        );
    }
}
