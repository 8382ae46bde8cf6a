//! The guest of a sweep (and of `gate`'s A/B sweep): mkbench's ELF and boot ROM, or a Linux
//! workload's kernel and initramfs, built when missing, with what the results file records.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::builder::{self, BuildRequest, Built};
use crate::guest::{self, GuestImage};
use crate::model::{BuildKind, RunStatus, WorkloadInfo};
use crate::runner::{self, EmulatorCmd, GuestSpec, RunRequest};
use crate::sizes;
use crate::util::{now_rfc3339, sha256_file, stored_path};
use crate::workload::Workload;

const DEFAULT_KERNEL: &str = "workloads/mkbench/mkbench.elf";
const DEFAULT_BIOS: &str = "workloads/mkbench/boot-rom.bin";

/// What a sweep asks of its guest.
pub(super) struct GuestRequest<'a> {
    pub workload: Workload,
    pub size: sizes::GuestSize,
    pub memory: &'a str,
    /// `--kernel`, `--bios` and `--expect-checksum` as given.
    pub kernel: Option<PathBuf>,
    pub bios: Option<PathBuf>,
    pub with_peers: bool,
    pub expect_checksum: Option<&'a str>,
    /// `--no-build`: kernel-make's configuration runs on the baseline `lockscale build` left.
    pub no_build: bool,
}

/// The guest of a sweep, ready to run: what every emulator boots and what the results file
/// records about it.
pub(super) struct PreparedGuest {
    pub spec: GuestSpec,
    pub info: WorkloadInfo,
}

/// `--expect-checksum` in the form the workload's result line has: mkbench's `0x…`, a Linux
/// guest's bare SHA-256.
fn normalise_checksum(workload: Workload, s: &str) -> Result<String> {
    let hex = s.trim().trim_start_matches("0x").trim_start_matches("0X");
    if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!("--expect-checksum {s:?} is not a hexadecimal number");
    }
    if workload.is_linux() {
        if hex.len() != 64 {
            bail!(
                "--expect-checksum {s:?}: the {workload} checksum is a SHA-256 (64 hexadecimal digits)"
            );
        }
        return Ok(hex.to_ascii_lowercase());
    }
    Ok(format!("0x{}", hex.to_ascii_lowercase()))
}

/// Boots kernel-make's configure image (guest/, prepared.rs) on ours: the baseline build,
/// built here first unless `no_build` (then the one `lockscale build` left).
pub(super) fn configure_on_ours(
    repo: &Path,
    no_build: bool,
) -> impl FnMut(&guest::BootRequest) -> Result<guest::BootOutput> + '_ {
    move |req| {
        let built = baseline(repo, no_build)?;
        let emu = EmulatorCmd {
            label: built.variant.clone(),
            kind: BuildKind::Ours,
            program: built.binary.clone(),
        };
        let (spec, run_req) = configure_run(req);
        eprintln!(
            "lockscale: configuring the kernel tree once, in a guest on ppc64emu ({}, -smp {}): \
             10–20 minutes; console in {}",
            built.variant,
            run_req.cpus,
            req.log.display()
        );
        let run = runner::run_once(&emu, &spec, &run_req, now_rfc3339());
        if run.status != RunStatus::Ok {
            bail!(
                "configuring the kernel tree in a guest failed: {}; console in {}",
                run.reason.unwrap_or_default(),
                req.log.display()
            );
        }
        Ok(guest::BootOutput {
            console: console_of(&req.log)?,
            checksum: run.checksum.unwrap_or_default(),
            guest_s: run.guest_elapsed_s.unwrap_or(0.0),
            emulator: format!(
                "ppc64emu {} (sha256 {})",
                built.variant,
                built.info.binary_sha256.unwrap_or_default()
            ),
        })
    }
}

/// The baseline build: built now, or with `no_build` the one `lockscale build` left.
fn baseline(repo: &Path, no_build: bool) -> Result<Built> {
    let variant = "baseline".to_string();
    if no_build {
        return builder::load_built(&builder::bin_dir(repo, None), &variant);
    }
    Ok(builder::build(&BuildRequest {
        repo,
        variants: std::slice::from_ref(&variant),
        rev: None,
    })?
    .remove(0))
}

/// The one run of the configure image: kernel-make's guest on `PREPARE_CPUS` vCPUs.
fn configure_run(req: &guest::BootRequest) -> (GuestSpec, RunRequest) {
    let spec = GuestSpec {
        workload: Workload::KernelMake,
        kernel: req.kernel.clone(),
        initrd: Some(req.initrd.clone()),
        bios: None,
        memory: sizes::LINUX_GUEST_MEMORY.into(),
        units: req.units,
        size: 0,
        seed: 0,
    };
    let run_req = RunRequest {
        cpus: sizes::PREPARE_CPUS,
        rep: 1,
        seq: 0,
        pin: "none".into(),
        oversubscribed: false,
        host_cores: crate::host::logical_cores(),
        timeout_s: sizes::PREPARE_TIMEOUT_S,
        report_path: req.log.with_extension("report.json"),
        log_path: req.log.clone(),
        expected_checksum: None,
        extra_args: vec![],
    };
    (spec, run_req)
}

/// The guest's console from a run's log, which holds the command line (`# …`), stdout as
/// printed and stderr marked.
fn console_of(log: &Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(log).with_context(|| format!("reading {}", log.display()))?;
    Ok(text
        .lines()
        .filter(|l| !l.starts_with("# ") && !l.starts_with("stderr: "))
        .map(String::from)
        .collect())
}

/// Resolves the guest image: mkbench's ELF (and the peers' boot ROM), or a Linux workload's
/// kernel and initramfs, built when missing (guest/).
pub(super) fn prepare_guest(repo: &Path, g: GuestRequest) -> Result<PreparedGuest> {
    let expected_checksum = g
        .expect_checksum
        .map(|c| normalise_checksum(g.workload, c))
        .transpose()?;
    if g.workload.is_linux() {
        let img = guest::ensure_image(
            repo,
            g.workload,
            g.size.units,
            g.size.size,
            false,
            &guest::Sources::default(),
            &mut configure_on_ours(repo, g.no_build),
        )?;
        if let guest::RecordCheck::NotRecorded(why) = guest::check_record(repo, &img.manifest)? {
            eprintln!(
                "lockscale: note: {why} (the image's SHA-256 is not checked against a record)"
            );
        }
        return linux_guest(repo, g, img, expected_checksum);
    }
    mkbench_guest(repo, g, expected_checksum)
}

/// A Linux workload's guest: its image's kernel (or `--kernel`) and initramfs.
fn linux_guest(
    repo: &Path,
    g: GuestRequest,
    img: GuestImage,
    expected_checksum: Option<String>,
) -> Result<PreparedGuest> {
    let size = g.size;
    let kernel = g.kernel.unwrap_or_else(|| img.kernel.clone());
    if !kernel.is_file() {
        bail!("kernel {} not found (pass --kernel PATH)", kernel.display());
    }
    let spec = GuestSpec {
        workload: g.workload,
        kernel,
        initrd: Some(img.initrd.clone()),
        bios: None,
        memory: g.memory.into(),
        units: size.units,
        size: size.size,
        seed: size.seed,
    };
    let info = WorkloadInfo {
        name: g.workload.name().into(),
        image: stored_path(repo, &img.initrd),
        image_sha256: img.manifest.initrd_sha256.clone(),
        bios: None,
        bios_sha256: None,
        bootargs: spec.bootargs_template(),
        units: size.units,
        size: size.size,
        seed: size.seed,
        expected_checksum,
        manifest: Some(img.manifest),
    };
    Ok(PreparedGuest { spec, info })
}

/// mkbench's guest: the bundled ELF (or `--kernel`), and the boot ROM when peers run.
fn mkbench_guest(
    repo: &Path,
    g: GuestRequest,
    expected_checksum: Option<String>,
) -> Result<PreparedGuest> {
    let size = g.size;
    let kernel = g.kernel.unwrap_or_else(|| repo.join(DEFAULT_KERNEL));
    if !kernel.is_file() {
        bail!(
            "guest image {} not found (pass --kernel PATH)",
            kernel.display()
        );
    }
    let bios = g
        .bios
        .or_else(|| g.with_peers.then(|| repo.join(DEFAULT_BIOS)));
    if g.with_peers
        && let Some(b) = &bios
        && !b.is_file()
    {
        bail!(
            "boot ROM {} for the peers not found (pass --bios PATH)",
            b.display()
        );
    }
    let spec = GuestSpec {
        workload: g.workload,
        kernel: kernel.clone(),
        initrd: None,
        bios: bios.clone(),
        memory: g.memory.into(),
        units: size.units,
        size: size.size,
        seed: size.seed,
    };
    let info = WorkloadInfo {
        name: g.workload.name().into(),
        image: stored_path(repo, &kernel),
        image_sha256: sha256_file(&kernel)?,
        bios: if g.with_peers {
            bios.as_ref().map(|b| stored_path(repo, b))
        } else {
            None
        },
        bios_sha256: match (&bios, g.with_peers) {
            (Some(b), true) => Some(sha256_file(b)?),
            _ => None,
        },
        bootargs: spec.bootargs_template(),
        units: size.units,
        size: size.size,
        seed: size.seed,
        expected_checksum,
        manifest: None,
    };
    Ok(PreparedGuest { spec, info })
}
