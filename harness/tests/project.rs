//! `lockscale project` against the fake emulator's simulated lock (`FAKE_EMU_SERIAL`): the
//! model must recover the serial fraction the simulation was given, predict the simulated
//! times at larger N, and refuse what it cannot fit. Lock-site attribution in compare/gate.

mod common;

use common::*;
use lockscale::project::{ProjectOptions, project};

/// The simulated lock's share of the work at N = 1.
const SERIAL: f64 = 0.1;
/// How close the recovered serial fraction must be (absolute): the simulation's 4000
/// exponential holds make the measured share noisy by about 0.002.
const FRACTION_TOLERANCE: f64 = 0.02;
/// How close predicted times must be to simulated ones (relative).
const TIME_TOLERANCE: f64 = 0.08;

fn sweep(
    s: &Scratch,
    name: &str,
    cpus: &str,
    reps: &str,
    emu_args: Option<&str>,
    env: &[(&str, &str)],
) {
    let mut args: Vec<String> = [
        "sweep",
        "--no-plot",
        "--variants",
        "baseline,cputlb-no-bql",
        "--cpus",
        cpus,
        "--reps",
        reps,
        "--name",
        name,
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    args.extend(s.bins(&["baseline", "cputlb-no-bql"]));
    if let Some(e) = emu_args {
        args.extend(["--emu-args".to_string(), e.to_string()]);
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = s.run(&refs, env);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// Pretends the sweep ran on a host with enough cores (the fake has no cores limit), so that
/// every point counts as measured within the host's cores.
fn as_if_on_many_cores(s: &Scratch, name: &str) -> lockscale::model::ResultsFile {
    let path = s.p(&format!("results/{name}.json"));
    let mut f = load(&path);
    f.host.logical_cores = 64;
    for r in &mut f.runs {
        r.oversubscribed = false;
    }
    write(&f, &path);
    f
}

fn measured(f: &lockscale::model::ResultsFile, v: &str, n: u32) -> f64 {
    let t: Vec<f64> = f
        .ok_runs()
        .filter(|r| r.variant == v && r.cpus == n)
        .map(|r| r.guest_elapsed_s.unwrap())
        .collect();
    lockscale::stats::median(&t)
}

#[test]
fn hold_times_at_n1_give_the_serial_fraction_and_predict_larger_n() {
    let s = Scratch::new();
    sweep(
        &s,
        "held",
        "1,2,4,8",
        "3",
        Some("--sync-profile"),
        &[("FAKE_EMU_SERIAL", "0.1")],
    );
    let f = as_if_on_many_cores(&s, "held");
    // Fitted on N = 1 alone: the hold times are the whole serial demand.
    let set = project(
        &f,
        &ProjectOptions {
            to: 16,
            cores: Some(64),
            fit_max: Some(1),
        },
    )
    .unwrap();
    assert_eq!(set.projections.len(), 2);
    for p in &set.projections {
        assert!(p.fitted_on.is_empty(), "{}: {:?}", p.variant, p.fitted_on);
        assert!(
            (p.serial_fraction.value - SERIAL).abs() < FRACTION_TOLERANCE,
            "{}: {:?}",
            p.variant,
            p.serial_fraction
        );
        for n in [2, 4, 8] {
            let q = p.points.iter().find(|q| q.cpus == n).unwrap();
            let m = measured(&f, &p.variant, n);
            assert_eq!(q.measured, Some(m));
            assert!(
                (q.time.value / m - 1.0).abs() < TIME_TOLERANCE,
                "{} N={n}: projected {} measured {m}",
                p.variant,
                q.time.value
            );
        }
        // The band holds the value; speedups grow towards 1 / serial fraction.
        let last = p.points.last().unwrap();
        assert_eq!(last.cpus, 16);
        assert!(last.time.lo <= last.time.value && last.time.value <= last.time.hi);
        assert!(
            last.speedup.value > 4.0 && last.speedup.value < 1.0 / SERIAL,
            "{:?}",
            last.speedup
        );
    }
}

#[test]
fn without_hold_times_the_serial_fraction_is_fitted_to_the_measured_points() {
    let s = Scratch::new();
    sweep(
        &s,
        "fit",
        "1,2,4,8",
        "3",
        None,
        &[("FAKE_EMU_SERIAL", "0.1,cputlb-no-bql=0.25")],
    );
    let f = as_if_on_many_cores(&s, "fit");
    let set = project(
        &f,
        &ProjectOptions {
            to: 28,
            cores: Some(64),
            fit_max: Some(8),
        },
    )
    .unwrap();
    for (v, want) in [("baseline", 0.1), ("cputlb-no-bql", 0.25)] {
        let p = set.projections.iter().find(|p| p.variant == v).unwrap();
        assert_eq!(p.fitted_on, [2, 4, 8]);
        assert!(p.demands.lock == 0.0, "no --sync-profile: no hold times");
        assert!(
            (p.serial_fraction.value - want).abs() < FRACTION_TOLERANCE,
            "{v}: {:?} (want {want})",
            p.serial_fraction
        );
        assert!(
            p.notes.iter().any(|n| n.contains("no BQL hold times")),
            "{:?}",
            p.notes
        );
    }
    // The CLI prints the tables and draws measured and projected curves.
    let o = s.run(
        &[
            "project",
            "results/fit.json",
            "--cores",
            "64",
            "--fit-max",
            "8",
            "-o",
            "plots/fit-projected.png",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("# lockscale project: fit") && out.contains("| baseline | 28 | – |"),
        "{out}"
    );
    assert!(out.contains("(fitted)"), "{out}");
    assert!(s.p("plots/fit-projected.png").is_file());
    let o = s.run(
        &[
            "report",
            "results/fit.json",
            "--project",
            "--cores",
            "64",
            "--fit-max",
            "8",
        ],
        &[],
    );
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("## Projection"),
        "{}",
        text(&o)
    );
    let o = s.run(
        &[
            "plot",
            "results/fit.json",
            "--project",
            "--cores",
            "64",
            "--ascii",
        ],
        &[],
    );
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).contains("baseline projected"),
        "{}",
        text(&o)
    );
}

#[test]
fn inputs_the_model_cannot_fit_are_refused() {
    let s = Scratch::new();
    // Only N = 1 and no hold times: nothing says how much of the work is serial.
    sweep(&s, "one", "1", "2", None, &[("FAKE_EMU_SERIAL", "0.1")]);
    let o = s.run(&["project", "results/one.json"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("too few points") && err.contains("--sync-profile"),
        "{err}"
    );
    // No lock statistics at all.
    sweep(
        &s,
        "nolocks",
        "1,2",
        "2",
        Some("--sync-profile"),
        &[("FAKE_EMU_SERIAL", "0.1"), ("FAKE_EMU_REPORT", "none")],
    );
    let o = s.run(&["project", "results/nolocks.json"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no lock statistics"),
        "{}",
        text(&o)
    );
    // No N = 1.
    let f = synthetic("no-n1", &[("baseline", 2, vec![1.0, 1.1])]);
    write(&f, &s.p("results/no-n1.json"));
    let o = s.run(&["project", "results/no-n1.json"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no successful run at N = 1"),
        "{}",
        text(&o)
    );
    // Nonsense options.
    let o = s.run(&["project", "results/one.json", "--to", "0"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn gate_names_the_bql_sites_when_a_strategys_bql_hold_grows() {
    let s = Scratch::new();
    let mk = |name: &str, serial: &str| {
        let mut args: Vec<String> = [
            "sweep",
            "--no-plot",
            "--variants",
            "baseline,per-cpu-lock",
            "--cpus",
            "1,2",
            "--reps",
            "5",
            "--name",
            name,
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        args.extend(s.bins(&["baseline", "per-cpu-lock"]));
        args.extend(["--emu-args".to_string(), "--sync-profile".to_string()]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = s.run(&refs, &[("FAKE_EMU_SERIAL", serial)]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    };
    mk("base", "0.1");
    // The candidate holds the BQL five times as long in baseline.
    mk("cand", "0.1,baseline=0.5");
    let summary = s.p("summary.md");
    let o = s.run(
        &[
            "gate",
            "--base",
            "results/base.json",
            "--candidate",
            "results/cand.json",
            "--summary",
            summary.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.contains("### Lock sites behind the changed points"),
        "{md}"
    );
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| baseline | 2 | `"))
        .collect();
    assert!(!rows.is_empty(), "{md}");
    assert!(
        rows[0].contains("`bql."),
        "the largest change is a BQL site: {md}"
    );
    assert!(
        rows.iter().filter(|r| r.contains("`bql.")).count() >= 2,
        "both simulated BQL sites: {md}"
    );
    assert!(
        !md.lines().any(|l| l.starts_with("| per-cpu-lock | 2 | `")),
        "per-cpu-lock did not change: {md}"
    );
    // compare names them too.
    let o = s.run(&["compare", "results/base.json", "results/cand.json"], &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("| baseline | 2 | `bql."),
        "{}",
        text(&o)
    );
}
