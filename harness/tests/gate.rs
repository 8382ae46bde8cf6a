//! The gate on synthetic result sets with known answers, through the library and the CLI.

mod common;

use common::*;
use lockscale::compare::{Verdict, compare, gate, verdict};

const BASE: [f64; 5] = [1.00, 1.01, 0.99, 1.02, 0.98];
/// Noise of ±0.4%: well below a 3% effect.
const QUIET: [f64; 5] = [1.000, 1.002, 0.998, 1.004, 0.996];

fn scaled(x: &[f64], f: f64) -> Vec<f64> {
    x.iter().map(|v| v * f).collect()
}

fn set(name: &str, n1: Vec<f64>, n2: Vec<f64>) -> lockscale::model::ResultsFile {
    synthetic(name, &[("baseline", 1, n1), ("baseline", 2, n2)])
}

/// Writes both sets and runs `lockscale gate --base --candidate`.
fn run_gate(
    base: &lockscale::model::ResultsFile,
    cand: &lockscale::model::ResultsFile,
    extra: &[&str],
) -> (i32, String) {
    let s = Scratch::new();
    write(base, &s.p("base.json"));
    write(cand, &s.p("cand.json"));
    let summary = s.p("summary.md");
    let mut args = vec![
        "gate",
        "--base",
        "base.json",
        "--candidate",
        "cand.json",
        "--summary",
        summary.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = s.run(&args, &[]);
    let out = text(&o);
    let md = std::fs::read_to_string(&summary).unwrap_or_default();
    assert!(
        out.contains(md.trim()),
        "summary file repeats stdout\n{out}\n{md}"
    );
    (o.status.code().unwrap(), out)
}

#[test]
fn identical_sets_pass() {
    let b = set("base", BASE.to_vec(), scaled(&BASE, 0.55));
    let (code, out) = run_gate(&b, &b.clone(), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("## lockscale gate: PASS"), "{out}");
    assert!(out.contains("no change"), "{out}");
}

#[test]
fn twenty_percent_slower_with_low_noise_fails() {
    let b = set("base", BASE.to_vec(), scaled(&BASE, 0.55));
    let c = set("cand", BASE.to_vec(), scaled(&BASE, 0.55 * 1.2));
    let (code, out) = run_gate(&b, &c, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL: 1 regression"), "{out}");
    assert!(out.contains("**REGRESSION**"), "{out}");
    assert!(out.contains("+20.0%"), "{out}");
    // The unchanged point stays green.
    assert!(out.contains("no change"), "{out}");
}

#[test]
fn twenty_percent_slower_within_noise_is_inconclusive() {
    let noisy_base = vec![0.6, 1.4, 0.8, 1.2, 1.0];
    let noisy_cand = vec![1.2, 0.5, 1.6, 0.9, 1.5];
    let b = set("base", noisy_base, scaled(&BASE, 0.55));
    let c = set("cand", noisy_cand, scaled(&BASE, 0.55));
    let (code, out) = run_gate(&b, &c, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("inconclusive"), "{out}");
    assert!(out.contains("+20.0%"), "{out}");
}

#[test]
fn three_percent_slower_is_below_threshold() {
    let b = set("base", QUIET.to_vec(), scaled(&QUIET, 0.55));
    let c = set("cand", scaled(&QUIET, 1.03), scaled(&QUIET, 0.55 * 1.03));
    let (code, out) = run_gate(&b, &c, &["--threshold", "5%"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("slower, below threshold"), "{out}");
    // With a 2% threshold the same data is a regression.
    let (code, out) = run_gate(&b, &c, &["--threshold", "2%"]);
    assert_eq!(code, 1, "{out}");
}

#[test]
fn too_few_repetitions_are_refused() {
    let b = set("base", BASE[..4].to_vec(), scaled(&BASE[..4], 0.55));
    let c = set(
        "cand",
        scaled(&BASE[..4], 1.5),
        scaled(&BASE[..4], 0.55 * 1.5),
    );
    let (code, out) = run_gate(&b, &c, &[]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("REFUSED"), "{out}");
    assert!(out.contains("at least 5 successful runs per side"), "{out}");
    assert!(out.contains("1/C(2n, n)"), "{out}");
    // At α = 0.05, four per side are enough (1/70 < 0.05).
    let (code, out) = run_gate(&b, &c, &["--alpha", "0.05"]);
    assert_eq!(code, 1, "{out}");
}

#[test]
fn different_guests_are_refused() {
    let b = set("base", BASE.to_vec(), BASE.to_vec());
    let mut c = b.clone();
    c.workload.expected_checksum = Some("0xdef".into());
    let (code, out) = run_gate(&b, &c, &[]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("different checksums"), "{out}");
}

#[test]
fn verdicts_from_the_library() {
    let b = set("base", BASE.to_vec(), scaled(&BASE, 0.5));
    let c = set("cand", scaled(&BASE, 0.8), scaled(&BASE, 0.5));
    let cmp = compare(&b, &c).unwrap();
    let p1 = cmp.points.iter().find(|p| p.cpus == 1).unwrap();
    assert!((p1.ratio.value - 0.8).abs() < 1e-9);
    assert!((p1.p_faster - 1.0 / 252.0).abs() < 1e-12);
    assert_eq!(verdict(p1, 0.05, 0.01), Verdict::Faster);
    let outcome = gate(&b, &c, 0.05, 0.01).unwrap();
    assert_eq!(outcome.exit_code, 0);
    assert!(outcome.markdown.contains("faster"));
}

#[test]
fn compare_prints_ratios_and_plots() {
    let s = Scratch::new();
    write(
        &set("old", BASE.to_vec(), scaled(&BASE, 0.55)),
        &s.p("old.json"),
    );
    write(
        &set("new", BASE.to_vec(), scaled(&BASE, 0.45)),
        &s.p("new.json"),
    );
    let o = s.run(&["compare", "old.json", "new.json", "-o", "cmp.svg"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("# lockscale compare: old → new"), "{out}");
    assert!(out.contains("-18.2%"), "{out}");
    assert!(out.contains("| faster |"), "{out}");
    let svg = std::fs::read_to_string(s.p("cmp.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("old: baseline") && svg.contains("new: baseline"));
}
