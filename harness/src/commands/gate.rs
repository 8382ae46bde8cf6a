//! `lockscale gate`: the regression gate, on two results files or on two revisions (built,
//! swept A/B interleaved, then compared).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};

use super::sweep::new_results_file;
use super::sweep_guest::{GuestRequest, PreparedGuest, prepare_guest};
use super::{load_checked, user_path};
use crate::builder::{self, BuildRequest, VARIANTS};
use crate::cli::{GateArgs, options_given};
use crate::compare::{self, GateOutcome};
use crate::model::{BuildInfo, BuildKind, ResultsFile, SweepConfig};
use crate::runner::EmulatorCmd;
use crate::sizes::{self, Mode};
use crate::sweep::{self, Sweep};
use crate::util::{file_stamp, parse_cpu_list, short_rev, unix_now};

/// The label prefixes of the two sides in the A/B sweep's one results file.
const BASE: &str = "base:";
const CAND: &str = "candidate:";

pub fn gate(repo: &Path, a: &GateArgs) -> Result<i32> {
    let threshold = crate::util::parse_fraction(&a.threshold)?;
    let summary = a.summary.as_deref().map(user_path);
    match (&a.base, &a.candidate, &a.base_rev, &a.candidate_rev) {
        (Some(b), Some(c), None, None) => gate_files(a, b, c, threshold, summary.as_deref()),
        (None, None, Some(br), Some(cr)) => {
            gate_revs(repo, a, br, cr, threshold, summary.as_deref())
        }
        _ => {
            bail!("give either --base FILE --candidate FILE, or --base-rev REV --candidate-rev REV")
        }
    }
}

/// Prints the verdict (and appends it to `summary`), says why on a refusal, and returns its
/// exit code.
fn emit_gate(outcome: &GateOutcome, summary: Option<&Path>) -> Result<i32> {
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

fn refused(why: String) -> GateOutcome {
    GateOutcome {
        exit_code: 2,
        markdown: format!("## lockscale gate: REFUSED\n\n{why}\n"),
    }
}

/// The file form: `--base FILE --candidate FILE`, which takes no plan options.
fn gate_files(
    a: &GateArgs,
    base: &Path,
    cand: &Path,
    threshold: f64,
    summary: Option<&Path>,
) -> Result<i32> {
    let mut given = a.plan_args.given();
    given.extend(options_given([(a.out_dir.is_some(), "--out-dir")]));
    if !given.is_empty() {
        bail!(
            "{} only apply to the revision form (--base-rev/--candidate-rev)",
            given.join(", ")
        );
    }
    let base = load_checked(base, a.workload)?;
    let cand = load_checked(cand, a.workload)?;
    let outcome = match crate::clock::check_mix(&base, &cand, a.allow_mixed_clocks) {
        Err(e) => refused(format!("{e:#}")),
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
    emit_gate(&outcome, summary)
}

/// One side of the A/B file: its variants' runs and builds, without the side's prefix.
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

/// The revision form: builds both revisions, sweeps them interleaved in one file (so drift of
/// the host hits both sides alike), splits it into the two sides and gates them.
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
    let clock = crate::clock::from_args(p.clock, p.quantum, p.line_cost)?;
    let cpus = match &p.cpus {
        Some(s) => parse_cpu_list(s)?,
        None => sizes::QUICK_CPUS.to_vec(),
    };
    let reps = p.reps.unwrap_or(sizes::GATE_REPS);
    let need = crate::stats::min_reps_for_alpha(a.alpha) as u32;
    if reps < need {
        let why = format!(
            "--reps {reps} is too few: at α = {} the permutation test needs at least {need} \
             repetitions per side to ever reach p < α.",
            a.alpha
        );
        return emit_gate(&refused(why), summary);
    }
    let workload = a.workload.unwrap_or_default();
    let quick = sizes::preset(workload, Mode::Quick, crate::host::logical_cores());
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
    let sides = build_sides(repo, &variants, &base_commit, &cand_commit)?;
    let name = format!(
        "gate-{}-{}-{}",
        short_rev(&base_commit),
        short_rev(&cand_commit),
        file_stamp(unix_now())
    );
    let out_dir = a
        .out_dir
        .as_deref()
        .map(user_path)
        .unwrap_or_else(|| repo.join("target/lockscale/gate"));
    let config = SweepConfig {
        mode: Mode::Custom,
        variants: sides.labels,
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
    let host = crate::host::collect();
    let mut file = new_results_file(repo, &name, host, config, sides.builds, workload_info);
    let s = Sweep {
        path: out_dir.join(format!("{name}.json")),
        work_dir: repo.join("target/lockscale/runs").join(&name),
        emulators: sides.emulators,
        guest,
        budget_s: None,
        retry_failed: false,
        repo: repo.to_path_buf(),
    };
    eprintln!(
        "lockscale: A/B sweep {} (base {base_rev}) vs {} (candidate {cand_rev})",
        short_rev(&base_commit),
        short_rev(&cand_commit)
    );
    sweep::execute(&s, &mut file)?;
    let (base, cand) = save_sides(&file, &name, &out_dir)?;
    emit_gate(&compare::gate(&base, &cand, threshold, a.alpha)?, summary)
}

/// Both revisions' builds, labelled `base:VARIANT` and `candidate:VARIANT` in that order.
struct Sides {
    emulators: Vec<EmulatorCmd>,
    builds: BTreeMap<String, BuildInfo>,
    labels: Vec<String>,
}

fn build_sides(repo: &Path, variants: &[String], base: &str, cand: &str) -> Result<Sides> {
    let build = |rev| {
        builder::build(&BuildRequest {
            repo,
            variants,
            rev: Some(rev),
        })
    };
    let (base_built, cand_built) = (build(base)?, build(cand)?);
    let mut sides = Sides {
        emulators: Vec::new(),
        builds: BTreeMap::new(),
        labels: Vec::new(),
    };
    for (b, c) in base_built.into_iter().zip(cand_built) {
        for (prefix, x) in [(BASE, b), (CAND, c)] {
            let label = format!("{prefix}{}", x.variant);
            sides.builds.insert(label.clone(), x.info);
            sides.emulators.push(EmulatorCmd {
                label: label.clone(),
                kind: BuildKind::Ours,
                program: x.binary,
            });
            sides.labels.push(label);
        }
    }
    Ok(sides)
}

/// Splits the A/B file into `NAME-base.json` and `NAME-candidate.json` in `out_dir`.
fn save_sides(
    file: &ResultsFile,
    name: &str,
    out_dir: &Path,
) -> Result<(ResultsFile, ResultsFile)> {
    let base = split_side(file, BASE, format!("{name}-base"));
    let cand = split_side(file, CAND, format!("{name}-candidate"));
    for f in [&base, &cand] {
        let mut f = f.clone();
        let path = out_dir.join(format!("{}.json", f.name));
        sweep::save(&path, &mut f)?;
        eprintln!("lockscale: wrote {}", path.display());
    }
    Ok((base, cand))
}
