//! `lockscale guest build|lock|export|import`: the Linux workloads' images and package locks.

use std::path::Path;

use anyhow::{Result, bail};

use super::sweep_guest::configure_on_ours;
use super::sweep_plan::check_guest_size;
use super::user_path;
use crate::cli::{
    GuestBuildArgs, GuestCommand, GuestExportArgs, GuestImportArgs, GuestLockArgs, ImageSizeArgs,
};
use crate::guest::{self, GuestImage};
use crate::lock::{self, Lock};
use crate::model::GuestManifest;
use crate::sizes::{self, Mode};
use crate::workload::Workload;

pub fn guest(repo: &Path, c: &GuestCommand) -> Result<i32> {
    match c {
        GuestCommand::Build(a) => build(repo, a),
        GuestCommand::Lock(a) => relock(repo, a),
        GuestCommand::Export(a) => export(repo, a),
        GuestCommand::Import(a) => import(repo, a),
    }
}

/// The units and size of `guest build`/`export`'s image.
fn image_size(workload: Workload, a: &ImageSizeArgs) -> Result<(u32, u32)> {
    if !workload.is_linux() {
        bail!("{workload} is bundled (workloads/mkbench/mkbench.elf): there is no image to build");
    }
    let mode = if a.quick {
        Mode::Quick
    } else if a.full {
        Mode::Full
    } else {
        Mode::Default
    };
    let p = sizes::preset(workload, mode, crate::host::logical_cores());
    let (units, size) = (
        a.units.unwrap_or(p.guest.units),
        a.size.unwrap_or(p.guest.size),
    );
    check_guest_size(
        workload,
        a.units.is_some() || a.size.is_some(),
        sizes::GuestSize {
            units,
            size,
            seed: p.guest.seed,
        },
    )?;
    Ok((units, size))
}

/// `guest build`: builds (or checks the cached) image, prints where it is and what it holds,
/// and checks it against (or, with `--record`, writes) the recorded SHA-256.
fn build(repo: &Path, a: &GuestBuildArgs) -> Result<i32> {
    let (units, size) = image_size(a.workload, &a.image)?;
    let started = std::time::Instant::now();
    let sources = guest::Sources {
        mirrors: a.mirror.clone(),
        snapshot: a.snapshot.clone(),
    };
    let img = guest::ensure_image(
        repo,
        a.workload,
        units,
        size,
        a.force,
        &sources,
        &mut configure_on_ours(repo, false),
    )?;
    print_image(&img, a.workload, started.elapsed().as_secs_f64());
    check_or_record(repo, a, &img.manifest)?;
    println!(
        "image {} sha256 {}",
        img.initrd.display(),
        img.manifest.initrd_sha256
    );
    Ok(0)
}

/// The image's files on stdout, a summary of what it holds on stderr.
fn print_image(img: &GuestImage, workload: Workload, seconds: f64) {
    let m = &img.manifest;
    println!("kernel\t{}\t{}", img.kernel.display(), m.kernel_sha256);
    println!("initrd\t{}\t{}", img.initrd.display(), m.initrd_sha256);
    println!(
        "manifest\t{}",
        img.initrd.with_file_name("manifest.json").display()
    );
    let what = match workload {
        Workload::KernelMake if m.units == 0 => "the whole vmlinux".to_string(),
        Workload::KernelMake => format!("{} kernel directories", m.units),
        _ => format!("{} files × {} functions", m.units, m.size),
    };
    eprintln!(
        "lockscale: {} image, {what}, {} packages from Debian {} (lock {}), {} MB, {seconds:.1} s",
        m.workload,
        m.packages.len(),
        m.suite,
        &m.lock_sha256[..m.lock_sha256.len().min(12)],
        m.initrd_bytes / 1_000_000,
    );
}

/// Compares the image with the record beside the lock; `--record` writes it when it differs.
fn check_or_record(repo: &Path, a: &GuestBuildArgs, m: &GuestManifest) -> Result<()> {
    let check = if a.record {
        guest::ImageRecords::load(repo, a.workload)?.check(m)
    } else {
        guest::check_record(repo, m)?
    };
    match check {
        guest::RecordCheck::Matches => eprintln!(
            "lockscale: the image is the one recorded in {}",
            guest::images_path(repo, a.workload).display()
        ),
        guest::RecordCheck::NotRecorded(why) if !a.record => eprintln!(
            "lockscale: note: {why} ({}); `lockscale guest build {} --record` writes it",
            guest::images_path(repo, a.workload).display(),
            a.workload
        ),
        _ => {
            let path = guest::ImageRecords::record(repo, m)?;
            eprintln!(
                "lockscale: recorded the image's SHA-256 in {}",
                path.display()
            );
        }
    }
    Ok(())
}

/// `guest lock`: re-resolves the workload's packages and rewrites its lock when they changed,
/// printing what did.
fn relock(repo: &Path, a: &GuestLockArgs) -> Result<i32> {
    if !a.workload.is_linux() {
        bail!("{} is bundled: it has no package lock", a.workload);
    }
    let mirror = a
        .mirror
        .clone()
        .or_else(guest::host_debian_mirror)
        .unwrap_or_else(|| guest::FALLBACK_MIRROR.into());
    let new = lock::resolve(a.workload, &a.suite, &mirror)?;
    crate::fetch::require_served(&new, &a.suite, &mirror)?;
    let path = lock::lock_path(repo, a.workload);
    let old = read_old_lock(&path, a.workload);
    match &old {
        Some(o) if o.same_packages(&new) => {
            println!(
                "{}: unchanged ({} packages from {}); the file is kept as it was",
                path.display(),
                new.packages.len(),
                new.suite
            );
            return Ok(0);
        }
        Some(o) => print_lock_changes(o, &new),
        None => {
            for p in &new.packages {
                println!("{}: added ({})", p.name, p.version);
            }
        }
    }
    crate::util::write_atomic(&path, new.to_text().as_bytes())?;
    eprintln!(
        "lockscale: wrote {} ({} packages from Debian {}, SHA-256 {}); commit it, then \
         build and record the images (`lockscale guest build {} --record`)",
        path.display(),
        new.packages.len(),
        new.suite,
        crate::util::sha256_hex(new.to_text().as_bytes()),
        a.workload
    );
    Ok(0)
}

/// The committed lock, when there is one that reads (one that does not is replaced).
fn read_old_lock(path: &Path, workload: Workload) -> Option<Lock> {
    let text = std::fs::read_to_string(path).ok()?;
    match Lock::parse(&text, workload, "the old lock") {
        Ok(l) => Some(l),
        Err(e) => {
            eprintln!("lockscale: the old lock does not read ({e:#}); replacing it");
            None
        }
    }
}

fn print_lock_changes(old: &Lock, new: &Lock) {
    let changes = lock::diff(old, new);
    if old.suite != new.suite {
        println!("suite: {} → {}", old.suite, new.suite);
    }
    for c in &changes {
        println!("{c}");
    }
    if changes.is_empty() && old.suite == new.suite {
        println!("(same packages; the requested list or the suites changed)");
    }
}

/// `guest export`: the image and what built it, in one archive for another host.
fn export(repo: &Path, a: &GuestExportArgs) -> Result<i32> {
    let (units, size) = image_size(a.workload, &a.image)?;
    let sources = guest::Sources {
        mirrors: a.mirror.clone(),
        snapshot: None,
    };
    let img = guest::ensure_image(
        repo,
        a.workload,
        units,
        size,
        false,
        &sources,
        &mut configure_on_ours(repo, false),
    )?;
    guest::check_record(repo, &img.manifest)?;
    let out = user_path(&a.output);
    crate::carry::export(repo, &img, &out)?;
    println!(
        "export {} image sha256 {} lock sha256 {}",
        out.display(),
        img.manifest.initrd_sha256,
        img.manifest.lock_sha256
    );
    Ok(0)
}

/// `guest import`: installs an exported image into the cache.
fn import(repo: &Path, a: &GuestImportArgs) -> Result<i32> {
    let img = crate::carry::import(repo, &user_path(&a.file))?;
    let m = &img.manifest;
    eprintln!(
        "lockscale: installed the {} image ({} × {}) built from lock {}",
        m.workload, m.units, m.size, m.lock_sha256
    );
    println!("image {} sha256 {}", img.initrd.display(), m.initrd_sha256);
    Ok(0)
}
