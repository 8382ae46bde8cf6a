//! The commands: argument checking, wiring of the modules, and what is printed where
//! (results on stdout and in files, progress and diagnostics on stderr).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::analysis::analyze;
use crate::builder::{self, BuildRequest, VARIANTS};
use crate::charts::{self, Labelled};
use crate::cli::*;
use crate::model::*;
use crate::plan::{parse_share, points};
use crate::plot::LineKind;
use crate::runner::{self, EmulatorCmd, GuestSpec, RunRequest, find_in_path};
use crate::sizes::{self, Mode};
use crate::sweep::{self, Sweep};
use crate::util::{file_stamp, now_rfc3339, parse_cpu_list, sha256_file, unix_now};
use crate::workload::{Workload, check_file};
use crate::{compare, guest, host, merge, reference, report};

/// Exit code of a sweep that finished with failed runs.
pub const EXIT_FAILED_RUNS: i32 = 3;

const DEFAULT_KERNEL: &str = "workloads/mkbench/mkbench.elf";
const DEFAULT_BIOS: &str = "workloads/mkbench/boot-rom.bin";

/// Reads and checks a results file.
pub fn load_results(path: &Path) -> Result<ResultsFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    match v.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA_ID) => {}
        Some(other) => bail!(
            "{} has schema {other:?}; this lockscale reads {SCHEMA_ID}",
            path.display()
        ),
        None => bail!(
            "{} is not a lockscale results file (no \"schema\" field)",
            path.display()
        ),
    }
    let f: ResultsFile = serde_json::from_value(v)
        .with_context(|| format!("{} does not follow {SCHEMA_ID}", path.display()))?;
    crate::util::check_name(&f.name).with_context(|| format!("{}", path.display()))?;
    Ok(f)
}

fn abs(repo: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        repo.join(p)
    }
}

/// Paths on the command line are relative to the current directory; defaults to the repo.
fn user_path(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

// ---------------------------------------------------------------- build

pub fn build(repo: &Path, a: &BuildArgs) -> Result<i32> {
    let built = builder::build(&BuildRequest {
        repo,
        variants: &a.variants,
        rev: a.rev.as_deref(),
    })?;
    for b in built {
        println!(
            "{}\t{}\t{}\t{}",
            b.variant,
            b.binary.display(),
            b.info.version.as_deref().unwrap_or("(no --version output)"),
            b.info.binary_sha256.as_deref().unwrap_or("")
        );
    }
    Ok(0)
}

// ---------------------------------------------------------------- sweep

fn parse_pairs(items: &[String], what: &str) -> Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => bail!("{what} takes NAME=VALUE, got {s:?}"),
        })
        .collect()
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

/// What a sweep asks of its guest.
struct GuestRequest<'a> {
    workload: Workload,
    size: sizes::GuestSize,
    memory: &'a str,
    /// `--kernel`, `--bios` and `--expect-checksum` as given.
    kernel: Option<PathBuf>,
    bios: Option<PathBuf>,
    with_peers: bool,
    expect_checksum: Option<&'a str>,
    /// `--no-build`: kernel-make's configuration runs on the baseline `lockscale build` left.
    no_build: bool,
}

/// The guest of a sweep, ready to run: what every emulator boots and what the results file
/// records about it.
struct PreparedGuest {
    spec: GuestSpec,
    info: WorkloadInfo,
}

/// Boots kernel-make's configure image (guest.rs, prepared.rs) on ours: the baseline build,
/// built here first unless `no_build` (then the one `lockscale build` left).
fn configure_on_ours(
    repo: &Path,
    no_build: bool,
) -> impl FnMut(&guest::BootRequest) -> Result<guest::BootOutput> + '_ {
    move |req| {
        let variant = "baseline".to_string();
        let built = if no_build {
            builder::load_built(&builder::bin_dir(repo, None), &variant)?
        } else {
            builder::build(&BuildRequest {
                repo,
                variants: std::slice::from_ref(&variant),
                rev: None,
            })?
            .remove(0)
        };
        let emu = EmulatorCmd {
            label: variant.clone(),
            kind: BuildKind::Ours,
            program: built.binary.clone(),
        };
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
            host_cores: host::logical_cores(),
            timeout_s: sizes::PREPARE_TIMEOUT_S,
            report_path: req.log.with_extension("report.json"),
            log_path: req.log.clone(),
            expected_checksum: None,
            extra_args: vec![],
        };
        eprintln!(
            "lockscale: configuring the kernel tree once, in a guest on ppc64emu ({variant}, -smp {}): \
             10–20 minutes; console in {}",
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
        let log = std::fs::read_to_string(&req.log)
            .with_context(|| format!("reading {}", req.log.display()))?;
        // The log holds the command line (`# …`), stdout as printed and stderr marked.
        let console = log
            .lines()
            .filter(|l| !l.starts_with("# ") && !l.starts_with("stderr: "))
            .map(String::from)
            .collect();
        Ok(guest::BootOutput {
            console,
            checksum: run.checksum.unwrap_or_default(),
            guest_s: run.guest_elapsed_s.unwrap_or(0.0),
            emulator: format!(
                "ppc64emu {variant} (sha256 {})",
                built.info.binary_sha256.unwrap_or_default()
            ),
        })
    }
}

/// Resolves the guest image: mkbench's ELF (and the peers' boot ROM), or a Linux workload's
/// kernel and initramfs, built when missing (guest.rs).
fn prepare_guest(repo: &Path, g: GuestRequest) -> Result<PreparedGuest> {
    let expected_checksum = g
        .expect_checksum
        .map(|c| normalise_checksum(g.workload, c))
        .transpose()?;
    let size = g.size;
    if g.workload.is_linux() {
        let img = guest::ensure_image(
            repo,
            g.workload,
            size.units,
            size.size,
            false,
            &guest::Sources::default(),
            &mut configure_on_ours(repo, g.no_build),
        )?;
        if let guest::RecordCheck::NotRecorded(why) = guest::check_record(repo, &img.manifest)? {
            eprintln!(
                "lockscale: note: {why} (the image's SHA-256 is not checked against a record)"
            );
        }
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
            image: crate::util::stored_path(repo, &img.initrd),
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
        return Ok(PreparedGuest { spec, info });
    }
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
        image: crate::util::stored_path(repo, &kernel),
        image_sha256: sha256_file(&kernel)?,
        bios: if g.with_peers {
            bios.as_ref().map(|b| crate::util::stored_path(repo, b))
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

struct Resolved {
    mode: Mode,
    variants: Vec<String>,
    peers: Vec<(String, String)>,
    cpus: Vec<u32>,
    reps: u32,
    guest: sizes::GuestSize,
    timeout_s: f64,
    budget_s: Option<f64>,
    memory: &'static str,
    share: Option<Share>,
    clock: Clock,
}

fn resolve_args(a: &SweepArgs, host_cores: u32) -> Result<Resolved> {
    let p = &a.plan_args;
    let base_mode = if a.quick {
        Mode::Quick
    } else if a.full {
        Mode::Full
    } else {
        Mode::Default
    };
    let preset = sizes::preset(a.workload, base_mode, host_cores);
    let custom = p.cpus.is_some()
        || p.units.is_some()
        || p.size.is_some()
        || p.seed.is_some()
        || p.reps.is_some();
    let mut variants = p
        .variants
        .clone()
        .unwrap_or_else(|| VARIANTS.iter().map(|s| s.to_string()).collect());
    // `--variants none`: peers only (e.g. to calibrate the guest on QEMU).
    if variants == ["none"] {
        variants.clear();
    }
    builder::check_variants(&variants)?;
    let peers = parse_pairs(&a.peers, "--peer")?;
    let clock = crate::clock::from_args(p.clock, p.quantum)?;
    crate::clock::check_emu_args(a.emu_args.as_deref().unwrap_or(""))?;
    if clock.kind == ClockKind::Virtual && variants.is_empty() {
        bail!(
            "--clock virtual with --variants none: peers run on host time only, so nothing would run on virtual time"
        );
    }
    if variants.is_empty() && peers.is_empty() {
        bail!("nothing to run: --variants none needs at least one --peer");
    }
    for (i, (name, _)) in peers.iter().enumerate() {
        if VARIANTS.contains(&name.as_str()) || peers[..i].iter().any(|p| &p.0 == name) {
            bail!("--peer {name}: the name is already taken");
        }
    }
    let cpus = match &p.cpus {
        Some(s) => parse_cpu_list(s)?,
        None => preset.cpus,
    };
    let reps = p.reps.unwrap_or(preset.reps);
    if reps == 0 {
        bail!("--reps must be at least 1");
    }
    let guest = sizes::GuestSize {
        units: p.units.unwrap_or(preset.guest.units),
        size: p.size.unwrap_or(preset.guest.size),
        seed: p.seed.unwrap_or(preset.guest.seed),
    };
    check_guest_size(a.workload, p.units.is_some() || p.size.is_some(), guest)?;
    let timeout_s = p.timeout.unwrap_or(preset.timeout_s);
    if !(timeout_s > 0.0 && timeout_s.is_finite()) {
        bail!("--timeout must be a positive number of seconds");
    }
    let budget_s = match a.budget {
        Some(b) if b <= 0.0 => None,
        Some(b) => Some(b),
        None => preset.budget_s,
    };
    Ok(Resolved {
        mode: if custom { Mode::Custom } else { base_mode },
        variants,
        peers,
        cpus,
        reps,
        guest,
        timeout_s,
        budget_s,
        memory: preset.memory,
        share: a.only.as_deref().map(parse_share).transpose()?,
        clock,
    })
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Default => "default",
        Mode::Quick => "quick",
        Mode::Full => "full",
        Mode::Custom => "custom",
    }
}

fn print_plan(r: &Resolved) {
    let mut all = r.variants.clone();
    all.extend(r.peers.iter().map(|p| p.0.clone()));
    let pts = points(&all, &r.cpus);
    println!(
        "# lockscale sweep plan: {} variants × {} vCPU counts × {} repetitions = {} runs in {} points",
        all.len(),
        r.cpus.len(),
        r.reps,
        all.len() * r.cpus.len() * r.reps as usize,
        pts.len()
    );
    println!(
        "# run share I of K on host I: lockscale sweep <same options> --only I/K; then lockscale merge"
    );
    println!("# clock: {}", crate::clock::describe(&r.clock));
    println!(
        "# point\tvariant\tvcpus\treps{}",
        if r.share.is_some() { "\tin-share" } else { "" }
    );
    for (p, v, n) in pts {
        match r.share {
            None => println!("{p}\t{v}\t{n}\t{}", r.reps),
            Some(s) => println!(
                "{p}\t{v}\t{n}\t{}\t{}",
                r.reps,
                if crate::plan::in_share(p, Some(s)) {
                    "yes"
                } else {
                    "no"
                }
            ),
        }
    }
}

pub fn sweep(repo: &Path, a: &SweepArgs) -> Result<i32> {
    // `--slurm`: submitted as a Slurm array and a merge job (slurm.rs).
    if a.slurm.slurm {
        return crate::slurm::sweep(repo, a);
    }
    if let Some(path) = &a.resume {
        return resume(repo, &user_path(path), a);
    }
    let host = host::collect();
    let r = resolve_args(a, host.logical_cores)?;
    if a.plan {
        print_plan(&r);
        return Ok(0);
    }
    // Cheap checks first: a missing guest should not cost a build (a Linux image is built here).
    let prepared = prepare_guest(
        repo,
        GuestRequest {
            workload: a.workload,
            size: r.guest,
            memory: r.memory,
            kernel: a.plan_args.kernel.as_deref().map(user_path),
            bios: a.bios.as_deref().map(user_path),
            with_peers: !r.peers.is_empty(),
            expect_checksum: a.expect_checksum.as_deref(),
            no_build: a.no_build,
        },
    )?;
    let mut emulators = Vec::new();
    let mut builds = BTreeMap::new();
    let mut peer_cmds = Vec::new();
    for (name, cmd) in &r.peers {
        let Some(path) = find_in_path(cmd) else {
            bail!(
                "--peer {name}={cmd}: {cmd} not found (give an executable name on PATH or a path)"
            );
        };
        let path = user_path(&path);
        builds.insert(
            name.clone(),
            builder::describe_binary(repo, name, &path, BuildKind::Peer)?,
        );
        peer_cmds.push(EmulatorCmd {
            label: name.clone(),
            kind: BuildKind::Peer,
            program: path,
        });
    }
    let bins: BTreeMap<String, String> = parse_pairs(&a.bins, "--bin")?.into_iter().collect();
    // A --bin for a variant left out by --variants is ignored; a misspelt variant is not.
    builder::check_variants(&bins.keys().cloned().collect::<Vec<_>>())?;
    let bins: BTreeMap<String, String> = bins
        .into_iter()
        .filter(|(v, _)| r.variants.contains(v))
        .collect();
    let to_build: Vec<String> = r
        .variants
        .iter()
        .filter(|v| !bins.contains_key(*v))
        .cloned()
        .collect();
    let mut built: BTreeMap<String, (PathBuf, BuildInfo)> = BTreeMap::new();
    if !to_build.is_empty() {
        let list = if a.no_build {
            let dir = builder::bin_dir(repo, None);
            to_build
                .iter()
                .map(|v| builder::load_built(&dir, v))
                .collect::<Result<Vec<_>>>()?
        } else {
            builder::build(&BuildRequest {
                repo,
                variants: &to_build,
                rev: None,
            })?
        };
        for b in list {
            built.insert(b.variant.clone(), (b.binary, b.info));
        }
    }
    for (v, p) in &bins {
        let path = user_path(Path::new(p));
        built.insert(
            v.clone(),
            (
                path.clone(),
                builder::describe_binary(repo, v, &path, BuildKind::Ours)?,
            ),
        );
    }
    for v in &r.variants {
        let (path, info) = built.remove(v).expect("every variant built or given");
        builds.insert(v.clone(), info);
        emulators.push(EmulatorCmd {
            label: v.clone(),
            kind: BuildKind::Ours,
            program: path,
        });
    }
    emulators.extend(peer_cmds);

    let stamp = file_stamp(unix_now());
    let mut name = a.name.clone().unwrap_or_else(|| match r.clock.kind {
        ClockKind::Host => format!("{}-{stamp}", mode_name(r.mode)),
        ClockKind::Virtual => format!("{}-virtual-{stamp}", mode_name(r.mode)),
    });
    crate::util::check_name(&name).context("--name")?;
    if let Some(s) = r.share
        && a.name.is_none()
    {
        name = format!("{name}-part-{}-of-{}", s.index, s.count);
    }
    let out = a
        .output
        .as_deref()
        .map(user_path)
        .unwrap_or_else(|| repo.join("results").join(format!("{name}.json")));
    if out.exists() {
        bail!(
            "{} already exists: continue it with --resume {0}, or choose another --name/-o",
            out.display()
        );
    }
    let PreparedGuest {
        spec: guest,
        info: workload,
    } = prepared;
    let mut all_variants = r.variants.clone();
    all_variants.extend(r.peers.iter().map(|p| p.0.clone()));
    let config = SweepConfig {
        mode: r.mode,
        variants: all_variants,
        cpus: r.cpus.clone(),
        reps: r.reps,
        pin: a.plan_args.pin,
        timeout_s: r.timeout_s,
        memory: r.memory.into(),
        order: "interleaved".into(),
        share: r.share,
        emulator_args: a
            .emu_args
            .as_deref()
            .map(|s| s.split_whitespace().map(String::from).collect())
            .unwrap_or_default(),
        clock: r.clock,
    };
    let mut file = new_results_file(repo, &name, host, config, builds, workload);
    let s = Sweep {
        path: out,
        work_dir: repo.join("target/lockscale/runs").join(&name),
        emulators,
        guest,
        budget_s: r.budget_s,
        retry_failed: false,
        repo: repo.to_path_buf(),
    };
    run_and_finish(repo, &s, &mut file, a.no_plot)
}

/// A results file with no runs yet, for a sweep of `guest` under `config`.
fn new_results_file(
    repo: &Path,
    name: &str,
    host: HostInfo,
    config: SweepConfig,
    builds: BTreeMap<String, BuildInfo>,
    workload: WorkloadInfo,
) -> ResultsFile {
    let now = now_rfc3339();
    ResultsFile {
        schema: SCHEMA_ID.into(),
        name: name.into(),
        created: now.clone(),
        updated: now,
        complete: false,
        harness: HarnessInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            git_rev: crate::git::head(repo),
        },
        host,
        config,
        builds,
        workload,
        runs: Vec::new(),
        merged_from: Vec::new(),
        hosts: Vec::new(),
    }
}

fn resume(repo: &Path, path: &Path, a: &SweepArgs) -> Result<i32> {
    let p = &a.plan_args;
    let given: Vec<&str> = [
        (p.variants.is_some(), "--variants"),
        (p.cpus.is_some(), "--cpus"),
        (p.reps.is_some(), "--reps"),
        (a.quick, "--quick"),
        (a.full, "--full"),
        (p.units.is_some(), "--units"),
        (p.size.is_some(), "--size"),
        (p.seed.is_some(), "--seed"),
        (!a.peers.is_empty(), "--peer"),
        (!a.bins.is_empty(), "--bin"),
        (p.kernel.is_some(), "--kernel"),
        (a.only.is_some(), "--only"),
        (p.timeout.is_some(), "--timeout"),
        (a.name.is_some(), "--name"),
        (a.output.is_some(), "--output"),
        (a.plan, "--plan"),
        (a.emu_args.is_some(), "--emu-args"),
        (p.clock.is_some(), "--clock"),
        (p.quantum.is_some(), "--quantum"),
    ]
    .into_iter()
    .filter_map(|(set, n)| set.then_some(n))
    .collect();
    if !given.is_empty() {
        bail!(
            "--resume takes the configuration from the results file; drop {}",
            given.join(", ")
        );
    }
    let mut file = load_results(path)?;
    sweep::check_resumable(&file).with_context(|| format!("cannot resume {}", path.display()))?;
    let mut emulators = Vec::new();
    for v in &file.config.variants {
        let Some(b) = file.builds.get(v) else {
            bail!("{}: no build recorded for {v}", path.display())
        };
        let bin = crate::util::resolve_stored(repo, &b.binary);
        if !bin.is_file() {
            bail!(
                "{}: the binary of {v} ({}) is gone; start a new sweep",
                path.display(),
                bin.display()
            );
        }
        if let Some(sha) = &b.binary_sha256
            && &sha256_file(&bin)? != sha
        {
            bail!(
                "the binary of {v} ({}) changed since the sweep started; start a new sweep",
                bin.display()
            );
        }
        emulators.push(EmulatorCmd {
            label: v.clone(),
            kind: b.kind,
            program: bin,
        });
    }
    let w = &file.workload;
    let Some(workload) = Workload::from_name(&w.name) else {
        bail!("{}: unknown workload {:?}", path.display(), w.name);
    };
    let image = crate::util::resolve_stored(repo, &w.image);
    if sha256_file(&image).ok().as_deref() != Some(w.image_sha256.as_str()) {
        bail!(
            "the guest image {} is missing or changed since the sweep started",
            image.display()
        );
    }
    let (kernel, initrd) = match &w.manifest {
        Some(m) => {
            let k = crate::util::resolve_stored(repo, &m.kernel);
            if sha256_file(&k).ok().as_deref() != Some(m.kernel_sha256.as_str()) {
                bail!(
                    "the guest kernel {} is missing or changed since the sweep started",
                    k.display()
                );
            }
            (k, Some(image))
        }
        None if workload.is_linux() => bail!(
            "{}: a {workload} sweep without its image manifest",
            path.display()
        ),
        None => (image, None),
    };
    let guest = GuestSpec {
        workload,
        kernel,
        initrd,
        bios: w
            .bios
            .as_ref()
            .map(|b| crate::util::resolve_stored(repo, b)),
        memory: file.config.memory.clone(),
        units: w.units,
        size: w.size,
        seed: w.seed,
    };
    let s = Sweep {
        path: path.to_path_buf(),
        work_dir: repo.join("target/lockscale/runs").join(&file.name),
        emulators,
        guest,
        budget_s: None,
        retry_failed: a.retry_failed,
        repo: repo.to_path_buf(),
    };
    if sweep::pending(&file).is_empty() && !a.retry_failed {
        eprintln!("lockscale: {} is already complete", path.display());
    }
    run_and_finish(repo, &s, &mut file, a.no_plot)
}

fn run_and_finish(repo: &Path, s: &Sweep, file: &mut ResultsFile, no_plot: bool) -> Result<i32> {
    eprintln!("lockscale: sweep {} → {}", file.name, s.path.display());
    let o = sweep::execute(s, file)?;
    let failed_total = file.failed_runs().count();
    eprintln!(
        "lockscale: ran {} runs now ({} failed){}; {} in the file, {} failed in all",
        o.ran,
        o.failed,
        if o.skipped > 0 {
            format!(", {} were already recorded", o.skipped)
        } else {
            String::new()
        },
        file.runs.len(),
        failed_total
    );
    if !no_plot {
        let a = analyze(file, None)?;
        let series = charts::series(
            &[Labelled {
                prefix: String::new(),
                analysis: &a,
                kind: LineKind::Solid,
            }],
            None,
        );
        let notes = plot_notes(&[&a]);
        for ext in ["png", "svg"] {
            let p = repo.join("plots").join(format!("{}.{ext}", file.name));
            match charts::write_plot(
                &p,
                &series,
                &format!("lockscale: {}", file.name),
                None,
                Some(file.host.logical_cores),
                notes.clone(),
            ) {
                Ok(()) => eprintln!("lockscale: wrote {}", p.display()),
                Err(e) => eprintln!("lockscale: could not write {}: {e:#}", p.display()),
            }
        }
        print!("{}", charts::ascii_chart(&series, 80));
        for n in &a.notes {
            println!("note: {n}");
        }
    }
    Ok(if failed_total > 0 {
        EXIT_FAILED_RUNS
    } else {
        0
    })
}

fn plot_notes(analyses: &[&crate::analysis::Analysis]) -> Vec<String> {
    let failed: usize = analyses.iter().map(|a| a.failures.len()).sum();
    let mut v = Vec::new();
    if failed > 0 {
        v.push(format!(
            "{failed} failed run(s) left out (see `lockscale report`)"
        ));
    }
    v
}

// ---------------------------------------------------------------- plot, report, compare

pub fn plot(repo: &Path, a: &PlotArgs) -> Result<i32> {
    if a.files.is_empty() && a.reference.is_none() {
        bail!("nothing to plot: give results files and/or --reference posted");
    }
    let files: Vec<ResultsFile> = a
        .files
        .iter()
        .map(|p| load_checked(p, a.workload))
        .collect::<Result<_>>()?;
    let analyses: Vec<_> = files
        .iter()
        .map(|f| analyze(f, a.relative_to.as_deref()))
        .collect::<Result<_>>()?;
    let labelled: Vec<Labelled> = files
        .iter()
        .zip(&analyses)
        .map(|(f, an)| Labelled {
            prefix: if files.len() > 1 {
                format!("{}: ", f.name)
            } else {
                String::new()
            },
            analysis: an,
            kind: LineKind::Solid,
        })
        .collect();
    let refc = a
        .reference
        .as_deref()
        .map(|r| reference::load(&abs(repo, &reference::resolve(repo, r))))
        .transpose()?;
    let mut series = charts::series(&labelled, refc.as_ref());
    if a.project {
        for (f, l) in files.iter().zip(&labelled) {
            series.extend(charts::projected_series(
                &l.prefix,
                &crate::project::project(f, &a.model.options())?,
            ));
        }
    }
    for an in &analyses {
        for f in &an.failures {
            eprintln!("lockscale: left out failed run {f}");
        }
    }
    let refs: Vec<&crate::analysis::Analysis> = analyses.iter().collect();
    let mut notes = plot_notes(&refs);
    notes.extend(files.iter().filter_map(merge::mixed_hosts_note));
    if let Some(r) = &refc {
        notes.push(format!("posted: {}", r.source));
    }
    if a.ascii {
        print!("{}", charts::ascii_chart(&series, a.width));
        for n in &notes {
            println!("note: {n}");
        }
        return Ok(0);
    }
    let stem = files
        .first()
        .map(|f| f.name.clone())
        .unwrap_or_else(|| "posted-reference".into());
    let out = a
        .output
        .as_deref()
        .map(user_path)
        .unwrap_or_else(|| repo.join("plots").join(format!("{stem}.png")));
    let host_cores = files
        .first()
        .map(|f| f.host.logical_cores)
        .filter(|c| files.iter().all(|f| f.host.logical_cores == *c));
    let title = a.title.clone().unwrap_or_else(|| {
        if files.is_empty() {
            "Posted speedup curve (per-CPU locks series)".into()
        } else {
            format!(
                "lockscale: {}",
                files
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(" vs ")
            )
        }
    });
    charts::write_plot(
        &out,
        &series,
        &title,
        a.relative_to.as_deref(),
        host_cores,
        notes,
    )?;
    eprintln!("lockscale: wrote {}", out.display());
    Ok(0)
}

/// Loads a results file named on the command line, refusing another workload than `--workload`.
fn load_checked(p: &Path, workload: Option<Workload>) -> Result<ResultsFile> {
    let path = user_path(p);
    let f = load_results(&path)?;
    check_file(workload, &f, &path)?;
    Ok(f)
}

pub fn report(a: &ReportArgs) -> Result<i32> {
    let f = load_checked(&a.file, a.workload)?;
    print!("{}", report::render(&f, a.relative_to.as_deref(), a.top)?);
    if a.project {
        print!(
            "\n## Projection\n\n{}",
            crate::project::render(&crate::project::project(&f, &a.model.options())?)
        );
    }
    Ok(0)
}

pub fn project(a: &ProjectArgs) -> Result<i32> {
    let f = load_results(&user_path(&a.file))?;
    let set = crate::project::project(&f, &a.model.options())?;
    print!(
        "# lockscale project: {}\n\n{}",
        f.name,
        crate::project::render(&set)
    );
    if let Some(o) = &a.output {
        let an = analyze(&f, None)?;
        let mut series = charts::series(
            &[Labelled {
                prefix: String::new(),
                analysis: &an,
                kind: LineKind::Solid,
            }],
            None,
        );
        series.extend(charts::projected_series("", &set));
        let out = user_path(o);
        let mut notes = plot_notes(&[&an]);
        notes.push(format!("dashed, hollow squares: projected for a host of {} cores (fitted on N ≤ {}); harness/README.md, \"Projection\"", set.cores, set.fit_max));
        charts::write_plot(
            &out,
            &series,
            &format!("lockscale: {} (measured and projected)", f.name),
            None,
            Some(f.host.logical_cores),
            notes,
        )?;
        eprintln!("lockscale: wrote {}", out.display());
    }
    Ok(0)
}

pub fn compare(a: &CompareArgs) -> Result<i32> {
    compare::check_alpha(a.alpha)?;
    let old = load_checked(&a.old, a.workload)?;
    let new = load_checked(&a.new, a.workload)?;
    let clock_note = crate::clock::check_mix(&old, &new, a.allow_mixed_clocks)?;
    let mut c = compare::compare(&old, &new)?;
    c.notes.extend(clock_note);
    print!("{}", compare::render_compare(&old, &new, &c, a.alpha));
    if let Some(o) = &a.output {
        let (ao, an) = (analyze(&old, None)?, analyze(&new, None)?);
        let series = charts::series(
            &[
                Labelled {
                    prefix: format!("{}: ", old.name),
                    analysis: &ao,
                    kind: LineKind::Dashed,
                },
                Labelled {
                    prefix: format!("{}: ", new.name),
                    analysis: &an,
                    kind: LineKind::Solid,
                },
            ],
            None,
        );
        let out = user_path(o);
        charts::write_plot(
            &out,
            &series,
            &format!("{} vs {}", old.name, new.name),
            None,
            Some(new.host.logical_cores),
            plot_notes(&[&ao, &an]),
        )?;
        eprintln!("lockscale: wrote {}", out.display());
    }
    Ok(0)
}

// ---------------------------------------------------------------- gate

fn emit_gate(outcome: &compare::GateOutcome, summary: Option<&Path>) -> Result<i32> {
    print!("{}", outcome.markdown);
    if let Some(p) = summary {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .with_context(|| format!("opening {}", p.display()))?;
        f.write_all(outcome.markdown.as_bytes())?;
    }
    if outcome.exit_code == 2 {
        eprintln!(
            "lockscale: gate refused: {}",
            outcome
                .markdown
                .lines()
                .skip(2)
                .collect::<Vec<_>>()
                .join(" ")
                .trim()
        );
    }
    Ok(outcome.exit_code)
}

pub fn gate(repo: &Path, a: &GateArgs) -> Result<i32> {
    let threshold = crate::util::parse_fraction(&a.threshold)?;
    let summary = a.summary.as_deref().map(user_path);
    match (&a.base, &a.candidate, &a.base_rev, &a.candidate_rev) {
        (Some(b), Some(c), None, None) => {
            let p = &a.plan_args;
            let given: Vec<&str> = [
                (p.variants.is_some(), "--variants"),
                (p.cpus.is_some(), "--cpus"),
                (p.reps.is_some(), "--reps"),
                (p.units.is_some(), "--units"),
                (p.size.is_some(), "--size"),
                (p.seed.is_some(), "--seed"),
                (p.timeout.is_some(), "--timeout"),
                (p.kernel.is_some(), "--kernel"),
                (a.out_dir.is_some(), "--out-dir"),
                (p.clock.is_some(), "--clock"),
                (p.quantum.is_some(), "--quantum"),
            ]
            .into_iter()
            .filter_map(|(set, n)| set.then_some(n))
            .collect();
            if !given.is_empty() {
                bail!(
                    "{} only apply to the revision form (--base-rev/--candidate-rev)",
                    given.join(", ")
                );
            }
            let base = load_checked(b, a.workload)?;
            let cand = load_checked(c, a.workload)?;
            let outcome = match crate::clock::check_mix(&base, &cand, a.allow_mixed_clocks) {
                Err(e) => compare::GateOutcome {
                    exit_code: 2,
                    markdown: format!("## lockscale gate: REFUSED\n\n{e:#}\n"),
                },
                Ok(note) => {
                    let mut o = compare::gate(&base, &cand, threshold, a.alpha)?;
                    if let Some(n) = note
                        && o.exit_code != 2
                    {
                        o.markdown.push_str(&format!("\nNote: {n}\n"));
                    }
                    o
                }
            };
            emit_gate(&outcome, summary.as_deref())
        }
        (None, None, Some(br), Some(cr)) => {
            gate_revs(repo, a, br, cr, threshold, summary.as_deref())
        }
        _ => {
            bail!("give either --base FILE --candidate FILE, or --base-rev REV --candidate-rev REV")
        }
    }
}

const BASE: &str = "base:";
const CAND: &str = "candidate:";

fn split_side(combined: &ResultsFile, prefix: &str, name: String) -> ResultsFile {
    let mut f = combined.clone();
    f.name = name;
    let strip = |v: &str| v.strip_prefix(prefix).map(String::from);
    f.config.variants = combined
        .config
        .variants
        .iter()
        .filter_map(|v| strip(v))
        .collect();
    f.builds = combined
        .builds
        .iter()
        .filter_map(|(k, b)| strip(k).map(|k| (k, b.clone())))
        .collect();
    f.runs = combined
        .runs
        .iter()
        .filter_map(|r| {
            strip(&r.variant).map(|v| {
                let mut r = r.clone();
                r.variant = v;
                r
            })
        })
        .collect();
    f
}

fn gate_revs(
    repo: &Path,
    a: &GateArgs,
    base_rev: &str,
    cand_rev: &str,
    threshold: f64,
    summary: Option<&Path>,
) -> Result<i32> {
    let p = &a.plan_args;
    let variants = p
        .variants
        .clone()
        .unwrap_or_else(|| VARIANTS.iter().map(|s| s.to_string()).collect());
    builder::check_variants(&variants)?;
    let clock = crate::clock::from_args(p.clock, p.quantum)?;
    let cpus = match &p.cpus {
        Some(s) => parse_cpu_list(s)?,
        None => sizes::QUICK_CPUS.to_vec(),
    };
    let reps = p.reps.unwrap_or(sizes::GATE_REPS);
    let need = crate::stats::min_reps_for_alpha(a.alpha) as u32;
    if reps < need {
        return emit_gate(
            &compare::GateOutcome {
                exit_code: 2,
                markdown: format!(
                    "## lockscale gate: REFUSED\n\n--reps {reps} is too few: at α = {} the permutation test needs at least {need} \
                     repetitions per side to ever reach p < α.\n",
                    a.alpha
                ),
            },
            summary,
        );
    }
    let workload = a.workload.unwrap_or_default();
    let quick = sizes::preset(workload, Mode::Quick, host::logical_cores());
    let size = sizes::GuestSize {
        units: p.units.unwrap_or(quick.guest.units),
        size: p.size.unwrap_or(quick.guest.size),
        seed: p.seed.unwrap_or(quick.guest.seed),
    };
    let PreparedGuest {
        spec: guest,
        info: workload_info,
    } = prepare_guest(
        repo,
        GuestRequest {
            workload,
            size,
            memory: quick.memory,
            kernel: p.kernel.as_deref().map(user_path),
            bios: None,
            with_peers: false,
            expect_checksum: None,
            no_build: false,
        },
    )?;
    let base_commit = crate::git::resolve(repo, base_rev)?;
    let cand_commit = crate::git::resolve(repo, cand_rev)?;
    let mut emulators = Vec::new();
    let mut builds = BTreeMap::new();
    let mut labels = Vec::new();
    let base_built = builder::build(&BuildRequest {
        repo,
        variants: &variants,
        rev: Some(&base_commit),
    })?;
    let cand_built = builder::build(&BuildRequest {
        repo,
        variants: &variants,
        rev: Some(&cand_commit),
    })?;
    for (b, c) in base_built.into_iter().zip(cand_built) {
        for (prefix, x) in [(BASE, b), (CAND, c)] {
            let label = format!("{prefix}{}", x.variant);
            builds.insert(label.clone(), x.info);
            emulators.push(EmulatorCmd {
                label: label.clone(),
                kind: BuildKind::Ours,
                program: x.binary,
            });
            labels.push(label);
        }
    }
    let host = host::collect();
    let name = format!(
        "gate-{}-{}-{}",
        crate::util::short_rev(&base_commit),
        crate::util::short_rev(&cand_commit),
        file_stamp(unix_now())
    );
    let out_dir = a
        .out_dir
        .as_deref()
        .map(user_path)
        .unwrap_or_else(|| repo.join("target/lockscale/gate"));
    let config = SweepConfig {
        mode: Mode::Custom,
        variants: labels,
        cpus,
        reps,
        pin: p.pin,
        timeout_s: p.timeout.unwrap_or(quick.timeout_s),
        memory: quick.memory.into(),
        order: "interleaved".into(),
        share: None,
        emulator_args: Vec::new(),
        clock,
    };
    let mut file = new_results_file(repo, &name, host, config, builds, workload_info);
    let s = Sweep {
        path: out_dir.join(format!("{name}.json")),
        work_dir: repo.join("target/lockscale/runs").join(&name),
        emulators,
        guest,
        budget_s: None,
        retry_failed: false,
        repo: repo.to_path_buf(),
    };
    eprintln!(
        "lockscale: A/B sweep {} (base {base_rev}) vs {} (candidate {cand_rev})",
        crate::util::short_rev(&base_commit),
        crate::util::short_rev(&cand_commit)
    );
    sweep::execute(&s, &mut file)?;
    let base = split_side(&file, BASE, format!("{name}-base"));
    let cand = split_side(&file, CAND, format!("{name}-candidate"));
    for f in [&base, &cand] {
        let mut f = f.clone();
        let path = out_dir.join(format!("{}.json", f.name));
        sweep::save(&path, &mut f)?;
        eprintln!("lockscale: wrote {}", path.display());
    }
    emit_gate(&compare::gate(&base, &cand, threshold, a.alpha)?, summary)
}

// ---------------------------------------------------------------- guest images

/// `--units`/`--size`: at least 1 for the generated guests; kernel-make's sources are the
/// kernel's, its presets say what it builds.
fn check_guest_size(workload: Workload, overridden: bool, g: sizes::GuestSize) -> Result<()> {
    if workload == Workload::KernelMake {
        if overridden {
            bail!(
                "kernel-make takes no --units or --size: --quick builds a fixed subset, the default and --full the whole vmlinux"
            );
        }
        return Ok(());
    }
    if g.units == 0 || g.size == 0 {
        bail!("--units and --size must be at least 1");
    }
    Ok(())
}

/// The units and size of `guest build`/`export`'s image.
fn image_size(workload: Workload, a: &crate::cli::ImageSizeArgs) -> Result<(u32, u32)> {
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
    let p = sizes::preset(workload, mode, host::logical_cores());
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

pub fn guest(repo: &Path, c: &GuestCommand) -> Result<i32> {
    match c {
        GuestCommand::Build(a) => {
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
            let m = &img.manifest;
            println!("kernel\t{}\t{}", img.kernel.display(), m.kernel_sha256);
            println!("initrd\t{}\t{}", img.initrd.display(), m.initrd_sha256);
            println!(
                "manifest\t{}",
                img.initrd.with_file_name("manifest.json").display()
            );
            let what = match a.workload {
                Workload::KernelMake if m.units == 0 => "the whole vmlinux".to_string(),
                Workload::KernelMake => format!("{} kernel directories", m.units),
                _ => format!("{} files × {} functions", m.units, m.size),
            };
            eprintln!(
                "lockscale: {} image, {what}, {} packages from Debian {} (lock {}), {} MB, {:.1} s",
                m.workload,
                m.packages.len(),
                m.suite,
                &m.lock_sha256[..m.lock_sha256.len().min(12)],
                m.initrd_bytes / 1_000_000,
                started.elapsed().as_secs_f64()
            );
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
            println!("image {} sha256 {}", img.initrd.display(), m.initrd_sha256);
            Ok(0)
        }
        GuestCommand::Lock(a) => {
            if !a.workload.is_linux() {
                bail!("{} is bundled: it has no package lock", a.workload);
            }
            let mirror = a
                .mirror
                .clone()
                .or_else(guest::host_debian_mirror)
                .unwrap_or_else(|| guest::FALLBACK_MIRROR.into());
            let new = crate::lock::resolve(a.workload, &a.suite, &mirror)?;
            let path = crate::lock::lock_path(repo, a.workload);
            let old = match std::fs::read_to_string(&path) {
                Ok(text) => match crate::lock::Lock::parse(&text, a.workload, "the old lock") {
                    Ok(l) => Some(l),
                    Err(e) => {
                        eprintln!("lockscale: the old lock does not read ({e:#}); replacing it");
                        None
                    }
                },
                Err(_) => None,
            };
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
                Some(o) => {
                    let changes = crate::lock::diff(o, &new);
                    if o.suite != new.suite {
                        println!("suite: {} → {}", o.suite, new.suite);
                    }
                    for c in &changes {
                        println!("{c}");
                    }
                    if changes.is_empty() && o.suite == new.suite {
                        println!("(same packages; the requested list or the suites changed)");
                    }
                }
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
        GuestCommand::Export(a) => {
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
        GuestCommand::Import(a) => {
            let img = crate::carry::import(repo, &user_path(&a.file))?;
            let m = &img.manifest;
            eprintln!(
                "lockscale: installed the {} image ({} × {}) built from lock {}",
                m.workload, m.units, m.size, m.lock_sha256
            );
            println!("image {} sha256 {}", img.initrd.display(), m.initrd_sha256);
            Ok(0)
        }
    }
}

// ---------------------------------------------------------------- merge, schema

pub fn merge(a: &MergeArgs) -> Result<i32> {
    let files: Vec<ResultsFile> = a
        .files
        .iter()
        .map(|p| load_checked(p, a.workload))
        .collect::<Result<_>>()?;
    let out = user_path(&a.output);
    let name = a.name.clone().unwrap_or_else(|| {
        out.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "merged".into())
    });
    crate::util::check_name(&name)
        .context("the merged sweep's name (--name, or the output file's stem)")?;
    let mut merged = merge::merge(
        &files,
        &merge::MergeOptions {
            name,
            allow_mixed_hosts: a.allow_mixed_hosts,
            allow_mixed_builds: a.allow_mixed_builds,
            allow_mixed_clocks: a.allow_mixed_clocks,
        },
    )?;
    sweep::save(&out, &mut merged)?;
    eprintln!(
        "lockscale: merged {} files, {} runs{} → {}",
        files.len(),
        merged.runs.len(),
        if merged.complete {
            ""
        } else {
            " (plan not complete)"
        },
        out.display()
    );
    Ok(0)
}

pub fn schema(repo: &Path, a: &SchemaArgs) -> Result<i32> {
    let text = schema_json();
    match a.output.as_deref() {
        Some(p) if p == Path::new("-") => print!("{text}"),
        other => {
            let p = other
                .map(user_path)
                .unwrap_or_else(|| repo.join("results/schema.json"));
            crate::util::write_atomic(&p, text.as_bytes())?;
            eprintln!("lockscale: wrote {}", p.display());
        }
    }
    Ok(0)
}
