//! Harness input that used to be taken wrongly: each case is refused with a clear message (or,
//! for degenerate data, handled) instead of producing a wrong file, plot or verdict.

mod common;

use std::time::{Duration, Instant};

use common::*;

fn fake_sweep(s: &Scratch, name: &str) {
    let o = s.sweep_baseline(
        BaselineSweep {
            cpus: "1,2",
            reps: "2",
            ..BaselineSweep::once(name)
        },
        &[],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

fn refused(o: &std::process::Output, want: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", text(o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(want), "expected {want:?} in {err}");
}

#[test]
fn a_binary_of_another_strategy_is_refused_for_a_variant() {
    let s = Scratch::new();
    let other = s.p("bin/ppc64emu-per-cpu-lock");
    let o = s.sweep_baseline(
        BaselineSweep {
            bin: other.to_str(),
            ..BaselineSweep::once("mix")
        },
        &[],
        &[],
    );
    refused(
        &o,
        "reports strategy \"per-cpu-lock\" but was given as \"baseline\"",
    );
    assert!(!s.p("results/mix.json").exists());
}

#[test]
fn compare_refuses_a_significance_level_outside_0_1() {
    let s = Scratch::new();
    let f = synthetic("a", &[("baseline", 1, vec![1.0, 1.01, 0.99])]);
    write(&f, &s.p("a.json"));
    for alpha in ["5", "1", "0", "-0.1"] {
        let arg = format!("--alpha={alpha}");
        refused(
            &s.run(&["compare", "a.json", "a.json", &arg], &[]),
            "--alpha must be between 0 and 1",
        );
    }
    assert!(
        s.run(&["compare", "a.json", "a.json", "--alpha", "0.05"], &[])
            .status
            .success()
    );
}

#[test]
fn merge_refuses_runs_already_present() {
    let s = Scratch::new();
    fake_sweep(&s, "once");
    refused(
        &s.run(
            &[
                "merge",
                "results/once.json",
                "results/once.json",
                "-o",
                "results/twice.json",
            ],
            &[],
        ),
        "already present",
    );
    assert!(!s.p("results/twice.json").exists());
    // A repeated sweep of the same configuration is still merged (its repetitions renumbered).
    fake_sweep(&s, "again");
    let o = s.run(
        &[
            "merge",
            "results/once.json",
            "results/again.json",
            "-o",
            "results/both.json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(load(&s.p("results/both.json")).config.reps, 4);
}

/// Runs a lockscale command, failing the test (instead of hanging) if it does not finish.
fn finishes(s: &Scratch, args: &[&str]) -> std::process::Output {
    let mut child = s
        .cmd()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("lockscale {args:?} did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn degenerate_times_still_plot() {
    let s = Scratch::new();
    let f = synthetic(
        "tiny",
        &[
            ("baseline", 1, vec![1.0, 1.0]),
            ("baseline", 2, vec![1e-308, 1e-308]),
            ("per-cpu-lock", 1, vec![1e-308]),
            ("per-cpu-lock", 2, vec![1.0]),
        ],
    );
    write(&f, &s.p("tiny.json"));
    for args in [
        vec!["plot", "tiny.json", "-o", "tiny.png"],
        vec!["plot", "tiny.json", "-o", "tiny.svg"],
        vec!["plot", "tiny.json", "--ascii"],
        vec!["compare", "tiny.json", "tiny.json", "-o", "cmp.png"],
    ] {
        let o = finishes(&s, &args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
    }
    assert!(s.p("tiny.png").is_file() && s.p("cmp.png").is_file());
}

#[test]
fn names_with_path_separators_are_refused() {
    let s = Scratch::new();
    for name in ["../../x", "a/b", ".hidden", ""] {
        let o = s.sweep_baseline(BaselineSweep::once(name), &[], &[]);
        refused(&o, "not a plain file name");
    }
    // The name is checked before the emulators are looked at (or built).
    let o = s.sweep_baseline(
        BaselineSweep {
            bin: Some("/nonexistent/ppc64emu"),
            ..BaselineSweep::once("a/b")
        },
        &[],
        &[],
    );
    refused(&o, "not a plain file name");
    assert!(!s.path().parent().unwrap().join("x.json").exists());
    // A crafted file's name is refused too, before it names any path.
    fake_sweep(&s, "good");
    let mut f = load(&s.p("results/good.json"));
    f.name = "../../escape".into();
    write(&f, &s.p("results/crafted.json"));
    refused(
        &s.run(&["plot", "results/crafted.json"], &[]),
        "not a plain file name",
    );
    refused(
        &s.run(
            &[
                "merge",
                "results/good.json",
                "-o",
                "results/m.json",
                "--name",
                "../m",
            ],
            &[],
        ),
        "not a plain file name",
    );
}

#[test]
fn resume_refuses_duplicated_runs_and_empty_plans() {
    let s = Scratch::new();
    fake_sweep(&s, "base");
    let f = load(&s.p("results/base.json"));
    let mut dup = f.clone();
    dup.runs.push(f.runs[0].clone());
    write(&dup, &s.p("results/dup.json"));
    refused(
        &s.run(&["sweep", "--resume", "results/dup.json", "--no-plot"], &[]),
        "recorded twice",
    );
    let mut empty = f.clone();
    empty.config.reps = 0;
    write(&empty, &s.p("results/empty.json"));
    refused(
        &s.run(
            &["sweep", "--resume", "results/empty.json", "--no-plot"],
            &[],
        ),
        "plan has no runs",
    );
}

#[test]
fn report_calls_a_file_without_runs_incomplete() {
    let s = Scratch::new();
    let mut f = synthetic("none", &[("baseline", 1, vec![1.0])]);
    f.runs.clear();
    f.complete = true;
    write(&f, &s.p("none.json"));
    let o = s.run(&["report", "none.json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("incomplete") && !out.contains("; complete"),
        "{out}"
    );
    // A file holding every planned run is complete.
    write(
        &synthetic("all", &[("baseline", 1, vec![1.0])]),
        &s.p("all.json"),
    );
    assert!(
        String::from_utf8_lossy(&s.run(&["report", "all.json"], &[]).stdout).contains("; complete")
    );
}
