//! `lockscale sweep`: a new sweep (plan, guest, emulators, results file, runs, plot) or the
//! continuation of one (`--resume`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::plot::plot_notes;
use super::sweep_guest::{GuestRequest, PreparedGuest, prepare_guest};
use super::sweep_plan::{Resolved, mode_name, print_plan, resolve_args};
use super::{EXIT_FAILED_RUNS, load_results, parse_pairs, user_path};
use crate::analysis::analyze;
use crate::builder;
use crate::charts::{self, Labelled};
use crate::cli::{SweepArgs, options_given};
use crate::model::*;
use crate::plot::LineKind;
use crate::runner::{EmulatorCmd, GuestSpec};
use crate::sweep::{self, Sweep};
use crate::util::{file_stamp, find_in_path, now_rfc3339, sha256_file, unix_now};
use crate::workload::Workload;

pub fn sweep(repo: &Path, a: &SweepArgs) -> Result<i32> {
    // `--slurm`: submitted as a Slurm array and a merge job (slurm/mod.rs).
    if a.slurm.slurm {
        return crate::slurm::sweep(repo, a);
    }
    if let Some(path) = &a.resume {
        return resume(repo, &user_path(path), a);
    }
    let host = crate::host::collect();
    let r = resolve_args(a, host.logical_cores)?;
    if a.plan {
        print_plan(&r);
        return Ok(0);
    }
    // Cheap checks first: a bad name, a file in the way or a missing guest should not cost a
    // build (a Linux image is built here).
    let name = sweep_name(a, &r)?;
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
    } = prepare_guest(
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
    let (peers, mut builds) = peers(repo, &r)?;
    let mut emulators = ours(repo, a, &r, &mut builds)?;
    emulators.extend(peers);
    let config = sweep_config(a, &r);
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

/// The peers (`--peer NAME=COMMAND`), found on `PATH`, and what the results file records of
/// their binaries.
fn peers(repo: &Path, r: &Resolved) -> Result<(Vec<EmulatorCmd>, BTreeMap<String, BuildInfo>)> {
    let mut builds = BTreeMap::new();
    let mut cmds = Vec::new();
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
        cmds.push(EmulatorCmd {
            label: name.clone(),
            kind: BuildKind::Peer,
            program: path,
        });
    }
    Ok((cmds, builds))
}

/// Our variants: given with `--bin VARIANT=PATH`, built now, or (`--no-build`) the ones
/// `lockscale build` left; each recorded in `builds`.
fn ours(
    repo: &Path,
    a: &SweepArgs,
    r: &Resolved,
    builds: &mut BTreeMap<String, BuildInfo>,
) -> Result<Vec<EmulatorCmd>> {
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
        let list = builder::build_or_load(repo, &to_build, a.no_build)?;
        for b in list {
            built.insert(b.variant.clone(), (b.binary, b.info));
        }
    }
    for (v, p) in &bins {
        let path = user_path(Path::new(p));
        let info = builder::describe_binary(repo, v, &path, BuildKind::Ours)?;
        built.insert(v.clone(), (path, info));
    }
    let mut emulators = Vec::new();
    for v in &r.variants {
        let (path, info) = built.remove(v).expect("every variant built or given");
        builds.insert(v.clone(), info);
        emulators.push(EmulatorCmd {
            label: v.clone(),
            kind: BuildKind::Ours,
            program: path,
        });
    }
    Ok(emulators)
}

/// `--name`, or the mode, the clock and the time; a share's default name says which it is.
fn sweep_name(a: &SweepArgs, r: &Resolved) -> Result<String> {
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
    Ok(name)
}

/// What the results file records of the plan.
fn sweep_config(a: &SweepArgs, r: &Resolved) -> SweepConfig {
    let mut all_variants = r.variants.clone();
    all_variants.extend(r.peers.iter().map(|p| p.0.clone()));
    SweepConfig {
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
    }
}

/// A results file with no runs yet, for a sweep of `guest` under `config`.
pub(super) fn new_results_file(
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

/// `--resume FILE`: runs what the file's plan still lacks, with the binaries and guest it
/// recorded (each checked to be unchanged).
fn resume(repo: &Path, path: &Path, a: &SweepArgs) -> Result<i32> {
    refuse_plan_options(a)?;
    let mut file = load_results(path)?;
    sweep::check_resumable(&file).with_context(|| format!("cannot resume {}", path.display()))?;
    let emulators = recorded_emulators(repo, path, &file)?;
    let guest = recorded_guest(repo, path, &file)?;
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

/// `--resume` takes the plan from the file: options that would change it are refused.
fn refuse_plan_options(a: &SweepArgs) -> Result<()> {
    let mut given = a.plan_options_given();
    given.extend(options_given([
        (a.only.is_some(), "--only"),
        (a.plan, "--plan"),
    ]));
    if !given.is_empty() {
        bail!(
            "--resume takes the configuration from the results file; drop {}",
            given.join(", ")
        );
    }
    Ok(())
}

/// The binaries the file recorded, each still there and (where recorded) the same bytes.
fn recorded_emulators(repo: &Path, path: &Path, file: &ResultsFile) -> Result<Vec<EmulatorCmd>> {
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
    Ok(emulators)
}

/// The guest the file recorded, its image (and a Linux guest's kernel) unchanged.
fn recorded_guest(repo: &Path, path: &Path, file: &ResultsFile) -> Result<GuestSpec> {
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
    Ok(GuestSpec {
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
    })
}

/// Runs the sweep, says what it ran, plots it unless `no_plot`, and exits with
/// [`EXIT_FAILED_RUNS`] when the file holds failed runs.
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
        plot_sweep(repo, file)?;
    }
    Ok(if failed_total > 0 {
        EXIT_FAILED_RUNS
    } else {
        0
    })
}

/// The sweep's plot: PNG and SVG under plots/ (a failure to write one is reported, not fatal)
/// and the text chart on stdout.
fn plot_sweep(repo: &Path, file: &ResultsFile) -> Result<()> {
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
    Ok(())
}
