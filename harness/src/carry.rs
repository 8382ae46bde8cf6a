//! Carrying a built guest to a host without a mirror: `guest export` writes one tar file with
//! the image, its kernel, its manifest and the lock it was built from; `guest import` checks
//! every byte of it against its own header, the manifest and this checkout's lock and inputs,
//! and only then installs it into the image cache (`target/guest-cache/<workload>/u<U>-s<S>/`).
//! A corrupt, truncated or foreign file is refused and the cache is left as it was.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::guest::{self, ImageRecords, RecordCheck};
use crate::lock::{self, Lock, RemoveOnDrop};
use crate::model::GuestManifest;
use crate::util::{sha256_file, stored_path};
use crate::workload::Workload;

/// The `format` of an export's header.
pub const FORMAT: &str = "lockscale.guest-export/1";
/// The header: the first member of the tar file.
pub const HEADER: &str = "lockscale-guest-export.json";
const MANIFEST: &str = "manifest.json";
const LOCK: &str = "packages.lock";
const INITRD: &str = "initrd.cpio";

/// What an export holds: every other member's size and SHA-256.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportHeader {
    pub format: String,
    pub workload: String,
    pub units: u32,
    pub size: u32,
    /// The kernel's file name (`vmlinux-…`).
    pub kernel: String,
    /// Member name → (bytes, SHA-256).
    pub files: BTreeMap<String, FileSum>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSum {
    pub bytes: u64,
    pub sha256: String,
}

fn plain_header(name: &str, len: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_path(name).expect("short member name");
    h.set_size(len);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    h
}

/// Writes the export of an image (already built and checked) to `out`.
pub fn export(repo: &Path, img: &guest::GuestImage, out: &Path) -> Result<()> {
    let m = &img.manifest;
    let workload = Workload::from_name(&m.workload).context("unknown workload")?;
    let lock_file = lock::lock_path(repo, workload);
    let lock_text =
        fs::read(&lock_file).with_context(|| format!("reading {}", lock_file.display()))?;
    if crate::util::sha256_hex(&lock_text) != m.lock_sha256 {
        bail!(
            "the image was built from another lock than {}: rebuild it first (`lockscale guest build {}`)",
            lock_file.display(),
            m.workload
        );
    }
    let manifest_text = {
        let mut t = serde_json::to_string_pretty(m)?;
        t.push('\n');
        t.into_bytes()
    };
    let kernel_name = img
        .kernel
        .file_name()
        .context("kernel path")?
        .to_string_lossy()
        .into_owned();
    let mut files = BTreeMap::new();
    files.insert(
        MANIFEST.to_string(),
        FileSum {
            bytes: manifest_text.len() as u64,
            sha256: crate::util::sha256_hex(&manifest_text),
        },
    );
    files.insert(
        LOCK.to_string(),
        FileSum {
            bytes: lock_text.len() as u64,
            sha256: m.lock_sha256.clone(),
        },
    );
    for (name, path, sha) in [
        (INITRD.to_string(), &img.initrd, &m.initrd_sha256),
        (kernel_name.clone(), &img.kernel, &m.kernel_sha256),
    ] {
        files.insert(
            name,
            FileSum {
                bytes: fs::metadata(path)?.len(),
                sha256: sha.clone(),
            },
        );
    }
    let header = ExportHeader {
        format: FORMAT.into(),
        workload: m.workload.clone(),
        units: m.units,
        size: m.size,
        kernel: kernel_name.clone(),
        files,
    };
    let header_text = serde_json::to_vec_pretty(&header)?;
    let tmp = out.with_file_name(format!(
        ".{}.tmp-{}",
        out.file_name()
            .context("output file name")?
            .to_string_lossy(),
        std::process::id()
    ));
    let write = || -> Result<()> {
        let f = fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut b = tar::Builder::new(io::BufWriter::new(f));
        b.append(
            &plain_header(HEADER, header_text.len() as u64),
            &header_text[..],
        )?;
        b.append(
            &plain_header(MANIFEST, manifest_text.len() as u64),
            &manifest_text[..],
        )?;
        b.append(&plain_header(LOCK, lock_text.len() as u64), &lock_text[..])?;
        for (name, path) in [(INITRD, &img.initrd), (kernel_name.as_str(), &img.kernel)] {
            let f = fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
            let len = f.metadata()?.len();
            b.append(&plain_header(name, len), f)?;
        }
        let w = b.into_inner()?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        Ok(())
    };
    if let Err(e) = write() {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, out).with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}

/// Copies `r` into `dest`, returning its length and SHA-256.
fn copy_hashed(mut r: impl Read, dest: &Path) -> Result<(u64, String)> {
    let mut f = fs::File::create(dest).with_context(|| format!("creating {}", dest.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        f.write_all(&buf[..k])?;
        n += k as u64;
    }
    f.sync_all()?;
    Ok((n, h.finalize().iter().map(|b| format!("{b:02x}")).collect()))
}

/// Checks an export and installs it into the cache. Returns the installed image.
pub fn import(repo: &Path, file: &Path) -> Result<guest::GuestImage> {
    let refuse = |why: String| {
        anyhow::anyhow!(
            "{} refused: {why}; the guest cache was not changed",
            file.display()
        )
    };
    let f = fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
    let staging = guest::staging_dir(repo, "import");
    if staging.exists() {
        fs::remove_dir_all(&staging)?;
    }
    fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
    let _cleanup = RemoveOnDrop(staging.clone());
    let mut tar = tar::Archive::new(io::BufReader::new(f));
    let mut header: Option<ExportHeader> = None;
    let mut got: BTreeMap<String, FileSum> = BTreeMap::new();
    let entries = tar
        .entries()
        .map_err(|e| refuse(format!("not a tar file ({e})")))?;
    for (i, e) in entries.enumerate() {
        let mut e = e.map_err(|e| refuse(format!("not a readable tar file ({e})")))?;
        let name = e
            .path()
            .map_err(|e| refuse(format!("a member name is unreadable ({e})")))?
            .to_string_lossy()
            .into_owned();
        if e.header().entry_type() != tar::EntryType::Regular {
            bail!(refuse(format!("member {name} is not a plain file")));
        }
        if i == 0 {
            if name != HEADER {
                bail!(refuse(format!(
                    "not a lockscale guest export (its first member is {name:?}, not {HEADER})"
                )));
            }
            let mut text = Vec::new();
            e.read_to_end(&mut text)
                .map_err(|e| refuse(format!("its header is cut off ({e})")))?;
            let h: ExportHeader = serde_json::from_slice(&text).map_err(|e| {
                refuse(format!("its header is not a lockscale export header ({e})"))
            })?;
            if h.format != FORMAT {
                bail!(refuse(format!(
                    "format {:?}, this lockscale reads {FORMAT:?}",
                    h.format
                )));
            }
            header = Some(h);
            continue;
        }
        let h = header.as_ref().expect("header first");
        if !h.files.contains_key(&name) || name.contains('/') {
            bail!(refuse(format!(
                "member {name:?} is not one its header lists"
            )));
        }
        if got.contains_key(&name) {
            bail!(refuse(format!("member {name} appears twice")));
        }
        let (bytes, sha256) = copy_hashed(&mut e, &staging.join(&name))
            .map_err(|e| refuse(format!("member {name} is cut off or unreadable ({e:#})")))?;
        got.insert(name, FileSum { bytes, sha256 });
    }
    let Some(h) = header else {
        bail!(refuse("it is empty".into()));
    };
    for (name, want) in &h.files {
        match got.get(name) {
            None => bail!(refuse(format!(
                "member {name} is missing (a truncated file?)"
            ))),
            Some(g) if g != want => bail!(refuse(format!(
                "member {name} is damaged: {} bytes with SHA-256 {}, its header says {} bytes with {}",
                g.bytes, g.sha256, want.bytes, want.sha256
            ))),
            _ => {}
        }
    }
    let workload = Workload::from_name(&h.workload)
        .filter(|w| w.is_linux())
        .ok_or_else(|| refuse(format!("workload {:?} is not a Linux guest", h.workload)))?;
    let kernel_name = h.kernel.clone();
    if !kernel_name.starts_with("vmlinux-") || !h.files.contains_key(&kernel_name) {
        bail!(refuse(format!(
            "its kernel {kernel_name:?} is not among its members"
        )));
    }
    for needed in [MANIFEST, LOCK, INITRD] {
        if !h.files.contains_key(needed) {
            bail!(refuse(format!("it has no {needed}")));
        }
    }
    let mut m: GuestManifest = serde_json::from_slice(&fs::read(staging.join(MANIFEST))?)
        .map_err(|e| refuse(format!("its manifest does not parse ({e})")))?;
    if (m.workload.as_str(), m.units, m.size) != (h.workload.as_str(), h.units, h.size) {
        bail!(refuse(
            "its manifest and header name different images".into()
        ));
    }
    if m.initrd_sha256 != h.files[INITRD].sha256
        || m.kernel_sha256 != h.files[&kernel_name].sha256
        || m.lock_sha256 != h.files[LOCK].sha256
    {
        bail!(refuse("its manifest does not describe its files".into()));
    }
    let lock_text = fs::read_to_string(staging.join(LOCK))?;
    Lock::parse(&lock_text, workload, "its lock").map_err(|e| refuse(format!("{e:#}")))?;
    let (_, our_lock) = Lock::load(repo, workload)?;
    if our_lock != m.lock_sha256 {
        bail!(refuse(format!(
            "it was built from another lock (SHA-256 {}) than this checkout's {} ({our_lock}): \
             a different guest",
            m.lock_sha256,
            lock::lock_path(repo, workload).display()
        )));
    }
    let inputs = guest::inputs_sha256(repo, workload, m.units, m.size)?;
    if m.inputs_sha256 != inputs {
        bail!(refuse(
            "it was built from another /init or project generator than this checkout's".into()
        ));
    }
    if let RecordCheck::Differs(want) = ImageRecords::load(repo, workload)?.check(&m) {
        bail!(refuse(format!(
            "its image (SHA-256 {}) is not the one {} records for this lock ({want})",
            m.initrd_sha256,
            guest::images_path(repo, workload).display()
        )));
    }
    // Install: the staged files become the image directory (the old one is replaced whole).
    let dir = guest::image_dir(repo, workload, m.units, m.size);
    m.kernel = stored_path(repo, &dir.join(&kernel_name));
    m.initrd = stored_path(repo, &dir.join(INITRD));
    let new = staging.join("image");
    fs::create_dir_all(&new)?;
    for name in [INITRD, kernel_name.as_str()] {
        fs::rename(staging.join(name), new.join(name))?;
    }
    guest::write_manifest(&new, &m)?;
    fs::create_dir_all(dir.parent().expect("image dir has a parent"))?;
    let old: PathBuf = staging.join("old");
    if dir.exists() {
        fs::rename(&dir, &old).with_context(|| format!("moving {} aside", dir.display()))?;
    }
    fs::rename(&new, &dir).with_context(|| format!("installing {}", dir.display()))?;
    let img = guest::cached_image(repo, workload, m.units, m.size)?
        .context("the installed image does not check out")?;
    debug_assert_eq!(sha256_file(&img.initrd)?, m.initrd_sha256);
    Ok(img)
}
