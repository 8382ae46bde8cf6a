//! End-to-end sweeps against the fake emulator: results file, failures, peers, interruption
//! and resume, shares and merge. No test asserts anything about timing.

mod common;

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use lockscale::model::RunStatus;

fn sweep_args<'a>(s: &'a Scratch, extra: &[&'a str]) -> Vec<String> {
    let mut v: Vec<String> = ["sweep", "--no-plot"]
        .iter()
        .map(|x| x.to_string())
        .collect();
    v.extend(s.bins(&VARIANTS));
    v.extend(extra.iter().map(|x| x.to_string()));
    v
}

fn run_sweep(s: &Scratch, extra: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let args = sweep_args(s, extra);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    s.run(&refs, env)
}

#[test]
fn sweep_writes_a_valid_complete_file_and_plots() {
    let s = Scratch::new();
    let mut args: Vec<String> = vec!["sweep".into()];
    args.extend(s.bins(&VARIANTS));
    args.extend(["--cpus", "1,2,4", "--reps", "2", "--name", "ok"].map(String::from));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = s.run(&refs, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let path = s.p("results/ok.json");
    validate(&path);
    let f = load(&path);
    assert!(f.complete);
    assert_eq!(f.runs.len(), 3 * 3 * 2);
    assert!(f.runs.iter().all(|r| r.status == RunStatus::Ok));
    assert_eq!(f.config.order, "interleaved");
    // Interleaved: the first round holds every variant before any repetition 2.
    assert!(f.runs[..9].iter().all(|r| r.rep == 1));
    let checks: BTreeSet<_> = f.runs.iter().map(|r| r.checksum.clone().unwrap()).collect();
    assert_eq!(checks.len(), 1);
    assert_eq!(f.workload.expected_checksum, checks.into_iter().next());
    // The run report is stored whole; pinning follows the host. With no --clock ours run on
    // virtual host time, where no point is oversubscribed.
    let r4 = f.runs.iter().find(|r| r.cpus == 4).unwrap();
    assert_eq!(
        r4.report.as_ref().unwrap()["locks"]["bql.exec_loop"]["acquisitions"],
        4000
    );
    assert_eq!(f.config.clock.kind, lockscale::model::ClockKind::Virtual);
    assert!(
        f.runs
            .iter()
            .all(|r| r.clock.kind == lockscale::model::ClockKind::Virtual)
    );
    assert!(!r4.oversubscribed);
    let r1 = f.runs.iter().find(|r| r.cpus == 1).unwrap();
    assert_eq!(r1.pin, "compact");
    assert!(
        r1.result
            .as_ref()
            .unwrap()
            .counters
            .contains_key("flush_hcalls")
    );
    // The default guest size reached the guest (the fake reports units + 1 processes).
    let procs = (lockscale::sizes::DEFAULT_GUEST.units + 1).to_string();
    assert_eq!(r1.stats.get("procs"), Some(&procs));
    assert!(
        f.builds["baseline"]
            .version
            .as_deref()
            .unwrap()
            .contains("strategy: baseline")
    );
    // Plots and the ASCII chart at the end.
    assert!(s.p("plots/ok.png").is_file() && s.p("plots/ok.svg").is_file());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("Speedup vs a single thread") && out.contains("baseline **B**"),
        "{out}"
    );
    // The report reads it back.
    let o = s.run(&["report", "results/ok.json"], &[]);
    let rep = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", text(&o));
    assert!(rep.contains("| baseline | 2 | 2 |"), "{rep}");
    assert!(rep.contains("`bql.exec_loop`"), "{rep}");
    // Without --sync-profile the emulator times no holds: the report says so instead of 0.
    assert!(
        rep.contains("| – |") && rep.contains("timed only with"),
        "{rep}"
    );
}

#[test]
fn failed_runs_are_recorded_and_the_sweep_goes_on() {
    let s = Scratch::new();
    let o = run_sweep(
        &s,
        &[
            "--variants",
            "baseline,per-cpu-lock",
            "--cpus",
            "1,2",
            "--reps",
            "1",
            "--timeout",
            "1",
            "--name",
            "bad",
        ],
        &[
            ("FAKE_EMU_FAIL", "baseline/2/checksum,per-cpu-lock/2/hang"),
            ("FAKE_EMU_REPORT", "garbage"),
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("run failed: baseline N=2"), "{stderr}");
    let path = s.p("results/bad.json");
    validate(&path);
    let f = load(&path);
    assert_eq!(f.runs.len(), 4);
    let get = |v: &str, n: u32| {
        f.runs
            .iter()
            .find(|r| r.variant == v && r.cpus == n)
            .unwrap()
    };
    let wrong = get("baseline", 2);
    assert_eq!(wrong.status, RunStatus::Failed);
    assert!(
        wrong
            .reason
            .as_deref()
            .unwrap()
            .contains("checksum mismatch"),
        "{wrong:?}"
    );
    let hung = get("per-cpu-lock", 2);
    assert_eq!(hung.status, RunStatus::Failed);
    assert!(
        hung.reason.as_deref().unwrap().starts_with("timeout"),
        "{hung:?}"
    );
    let ok = get("per-cpu-lock", 1);
    assert_eq!(ok.status, RunStatus::Ok);
    assert!(ok.report.is_none() && ok.report_error.as_deref().unwrap().contains("not JSON"));

    // report and plot leave the failed points out and say so.
    let o = s.run(&["report", "results/bad.json"], &[]);
    let rep = String::from_utf8_lossy(&o.stdout);
    assert!(rep.contains("## Failed runs (left out"), "{rep}");
    assert!(rep.contains("| baseline | 2 | 0 (+1 failed) |"), "{rep}");
    let o = s.run(&["plot", "results/bad.json", "--ascii"], &[]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("2 failed run(s) left out"), "{out}");
    assert!(
        out.contains("left out failed run baseline N=2 rep 1: checksum mismatch"),
        "{out}"
    );
}

#[test]
fn missing_result_line_guest_error_and_bad_exit() {
    let s = Scratch::new();
    let o = run_sweep(
        &s,
        &["--cpus", "1,2", "--reps", "1", "--name", "kinds"],
        &[
            (
                "FAKE_EMU_FAIL",
                "baseline/2/noresult,per-cpu-lock/2/error,cputlb-no-bql/2/exit",
            ),
            ("FAKE_EMU_REPORT", "none"),
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let f = load(&s.p("results/kinds.json"));
    let reason = |v: &str| {
        f.runs
            .iter()
            .find(|r| r.variant == v && r.cpus == 2)
            .unwrap()
            .reason
            .clone()
            .unwrap()
    };
    assert!(
        reason("baseline").starts_with("no result line"),
        "{}",
        reason("baseline")
    );
    assert!(
        reason("per-cpu-lock").contains("guest self-check failed: unit 3"),
        "{}",
        reason("per-cpu-lock")
    );
    assert!(
        reason("cputlb-no-bql").contains("exited with code 1 after the result line"),
        "{}",
        reason("cputlb-no-bql")
    );
    let ok = f.runs.iter().find(|r| r.cpus == 1).unwrap();
    assert!(
        ok.report_error
            .as_deref()
            .unwrap()
            .contains("no run report")
    );
}

#[test]
fn peers_get_the_qemu_command_line_and_no_report() {
    let s = Scratch::new();
    let log = s.p("invocations.log");
    let o = run_sweep(
        &s,
        &[
            "--variants",
            "baseline",
            "--peer",
            &format!("qemu={}", s.p("bin/qemu-fake").display()),
            "--cpus",
            "1,2",
            "--reps",
            "1",
            "--name",
            "peer",
            "--emu-args",
            "--sync-profile --tlb-flush-mode synced",
        ],
        &[("FAKE_EMU_LOG", log.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let f = load(&s.p("results/peer.json"));
    validate(&s.p("results/peer.json"));
    assert_eq!(f.config.variants, ["baseline", "qemu"]);
    assert_eq!(f.builds["qemu"].kind, lockscale::model::BuildKind::Peer);
    assert!(
        f.workload
            .bios
            .as_deref()
            .unwrap()
            .ends_with("boot-rom.bin")
    );
    let q: Vec<_> = f.runs.iter().filter(|r| r.variant == "qemu").collect();
    assert_eq!(q.len(), 2);
    assert!(
        q.iter()
            .all(|r| r.status == RunStatus::Ok && r.report.is_none() && r.report_error.is_none())
    );
    // The console log records the command line.
    let first_log = std::fs::read_to_string(s.p(q[0].log.as_ref().unwrap())).unwrap();
    assert!(
        first_log.contains("-M pseries -cpu power8 -accel tcg,thread=multi"),
        "{first_log}"
    );
    assert!(
        first_log.contains("-no-reboot -vga none -bios"),
        "{first_log}"
    );
    assert!(
        !first_log.contains("--report") && !first_log.contains("--sync-profile"),
        "{first_log}"
    );
    // Extra emulator arguments reach ours only, after the standard ones.
    let ours = f.runs.iter().find(|r| r.variant == "baseline").unwrap();
    let ours_log = std::fs::read_to_string(s.p(ours.log.as_ref().unwrap())).unwrap();
    assert!(
        ours_log.contains("--sync-profile --tlb-flush-mode synced\n")
            || ours_log
                .trim_end()
                .ends_with("--sync-profile --tlb-flush-mode synced"),
        "{ours_log}"
    );
    assert_eq!(
        f.config.emulator_args,
        ["--sync-profile", "--tlb-flush-mode", "synced"]
    );
    // Profiled runs: the report gives their hold times (the fake's 9 ms for bql.exec_loop).
    let o = s.run(&["report", "results/peer.json"], &[]);
    let rep = String::from_utf8_lossy(&o.stdout);
    assert!(
        rep.contains("| 9.00 |") && !rep.contains("timed only with"),
        "{rep}"
    );
}

#[test]
fn interrupted_sweep_resumes_without_rerunning() {
    let s = Scratch::new();
    let log = s.p("invocations.log");
    let args = sweep_args(&s, &["--cpus", "1,2", "--reps", "2", "--name", "cut"]);
    let mut child = s
        .cmd()
        .args(&args)
        .env("FAKE_EMU_SLEEP_MS", "150")
        .env("FAKE_EMU_LOG", &log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let path = s.p("results/cut.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["runs"].as_array().map(|a| a.len()))
            .unwrap_or(0);
        if n >= 3 {
            break;
        }
        assert!(Instant::now() < deadline, "the sweep never recorded 3 runs");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    // What was left behind is a valid, incomplete results file.
    validate(&path);
    let before = load(&path);
    assert!(!before.complete);
    let done: Vec<(String, u32, u32, String)> = before
        .runs
        .iter()
        .map(|r| (r.variant.clone(), r.cpus, r.rep, r.started.clone()))
        .collect();
    assert!(done.len() >= 3 && done.len() < 12);

    let calls_before = std::fs::read_to_string(&log).unwrap().lines().count();
    let o = s.run(
        &["sweep", "--resume", "results/cut.json", "--no-plot"],
        &[("FAKE_EMU_LOG", log.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    validate(&path);
    let after = load(&path);
    assert!(after.complete);
    assert_eq!(after.runs.len(), 12);
    let keys: BTreeSet<_> = after
        .runs
        .iter()
        .map(|r| (r.variant.clone(), r.cpus, r.rep))
        .collect();
    assert_eq!(keys.len(), 12, "no run twice");
    for (v, n, rep, started) in &done {
        let r = after
            .runs
            .iter()
            .find(|r| &r.variant == v && r.cpus == *n && r.rep == *rep)
            .unwrap();
        assert_eq!(&r.started, started, "finished runs are kept as they were");
    }
    let calls_after = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(
        calls_after - calls_before,
        12 - done.len(),
        "resume ran only the missing runs"
    );

    // Resuming a complete file runs nothing.
    let o = s.run(
        &["sweep", "--resume", "results/cut.json", "--no-plot"],
        &[("FAKE_EMU_LOG", log.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("already complete"));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap().lines().count(),
        calls_after
    );
    // --resume refuses configuration options.
    let o = s.run(
        &["sweep", "--resume", "results/cut.json", "--reps", "9"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("drop --reps"));
}

/// Whether a process exists and has not exited (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        // The state follows the command name in parentheses: "pid (comm) S …".
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|c| c != 'Z' && c != 'X'),
    }
}

#[cfg(target_os = "linux")]
#[test]
fn the_run_in_flight_dies_with_the_harness() {
    // A peer has no timeout of its own: one left behind by a killed harness would run on.
    let s = Scratch::new();
    let pids = s.p("pids.txt");
    let peer_arg = format!("hangs={}", s.p("bin/qemu-fake").display());
    let args = sweep_args(
        &s,
        &[
            "--variants",
            "none",
            "--peer",
            &peer_arg,
            "--cpus",
            "1",
            "--reps",
            "1",
            "--timeout",
            "600",
            "--name",
            "orphan",
        ],
    );
    let mut child = s
        .cmd()
        .args(&args)
        .env("FAKE_EMU_FAIL", "*/*/hang")
        .env("FAKE_EMU_PIDS", &pids)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid: u32 = loop {
        if let Some(p) = std::fs::read_to_string(&pids)
            .ok()
            .and_then(|t| t.lines().next().and_then(|l| l.trim().parse().ok()))
        {
            break p;
        }
        assert!(Instant::now() < deadline, "the emulator never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(alive(pid));
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "the emulator (pid {pid}) outlived the harness"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn retry_failed_reruns_only_failures() {
    let s = Scratch::new();
    let o = run_sweep(
        &s,
        &[
            "--variants",
            "baseline",
            "--cpus",
            "1,2",
            "--reps",
            "2",
            "--name",
            "retry",
        ],
        &[("FAKE_EMU_FAIL", "baseline/2/noresult")],
    );
    assert_eq!(o.status.code(), Some(3));
    let o = s.run(
        &[
            "sweep",
            "--resume",
            "results/retry.json",
            "--retry-failed",
            "--no-plot",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let f = load(&s.p("results/retry.json"));
    assert_eq!(f.runs.len(), 4);
    assert!(f.runs.iter().all(|r| r.status == RunStatus::Ok));
}

#[test]
fn plan_shares_and_merge() {
    let s = Scratch::new();
    let o = run_sweep(&s, &["--cpus", "1,2", "--reps", "2", "--plan"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let plan = String::from_utf8_lossy(&o.stdout);
    assert!(
        plan.contains("3 variants × 2 vCPU counts × 2 repetitions = 12 runs in 6 points"),
        "{plan}"
    );
    assert_eq!(
        plan.lines().filter(|l| !l.starts_with('#')).count(),
        6,
        "{plan}"
    );

    for i in 1..=2 {
        let share = format!("{i}/2");
        let o = run_sweep(
            &s,
            &[
                "--cpus",
                "1,2",
                "--reps",
                "2",
                "--only",
                &share,
                "--name",
                &format!("part{i}"),
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let f = load(&s.p(&format!("results/part{i}.json")));
        assert_eq!(f.runs.len(), 6);
        assert!(f.complete);
    }
    let o = s.run(
        &[
            "merge",
            "results/part1.json",
            "results/part2.json",
            "-o",
            "results/merged.json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    validate(&s.p("results/merged.json"));
    let m = load(&s.p("results/merged.json"));
    assert_eq!(m.runs.len(), 12);
    assert!(m.complete);
    assert_eq!(m.merged_from, ["part1", "part2"]);

    // A file from another host type is refused unless allowed.
    let mut other = load(&s.p("results/part2.json"));
    other.host.cpu_model = "Another CPU".into();
    write(&other, &s.p("results/other.json"));
    let o = s.run(
        &[
            "merge",
            "results/part1.json",
            "results/other.json",
            "-o",
            "results/m2.json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--allow-mixed-hosts"));
    let o = s.run(
        &[
            "merge",
            "results/part1.json",
            "results/other.json",
            "-o",
            "results/m2.json",
            "--allow-mixed-hosts",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn bad_input_gives_clear_errors_and_exit_2() {
    let s = Scratch::new();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["sweep", "--variants", "nonsense", "--no-build"],
            "unknown variant",
        ),
        (
            vec!["sweep", "--cpus", "0", "--no-build"],
            "vCPU counts start at 1",
        ),
        (vec!["sweep", "--only", "3/2", "--plan"], "1 ≤ I ≤ K"),
        (
            vec!["sweep", "--kernel", "missing.elf", "--no-build"],
            "guest image",
        ),
        (
            vec!["sweep", "--peer", "qemu=/nonexistent/qemu", "--no-build"],
            "not found",
        ),
        (vec!["sweep", "--no-build"], "run `lockscale build` first"),
        (vec!["report", "nope.json"], "reading"),
        (vec!["plot"], "nothing to plot"),
        (
            vec![
                "gate",
                "--threshold",
                "x",
                "--base",
                "a",
                "--candidate",
                "b",
            ],
            "not a number",
        ),
    ];
    for (args, want) in cases {
        let o = s.run(&args, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: expected {want:?} in {err}");
    }
    std::fs::write(s.p("x.json"), "{\"hello\": 1}").unwrap();
    let o = s.run(&["report", "x.json"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a lockscale results file"));
}

#[test]
fn every_command_has_help() {
    let s = Scratch::new();
    for cmd in [
        "build", "sweep", "plot", "report", "compare", "gate", "project", "merge", "schema",
    ] {
        let o = s.run(&[cmd, "--help"], &[]);
        assert!(o.status.success(), "{cmd}");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.len() > 200 && out.contains("Usage: lockscale"),
            "{cmd}: {out}"
        );
    }
}

#[test]
fn a_hanging_peer_is_killed_at_the_timeout() {
    let s = Scratch::new();
    let o = s.sweep_baseline(
        BaselineSweep::once("hang"),
        &["--peer", "qemu=bin/qemu-fake", "--timeout", "1"],
        &[("FAKE_EMU_FAIL", "qemu-fake/*/hang")],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let f = load(&s.p("results/hang.json"));
    let q = f.runs.iter().find(|r| r.variant == "qemu").unwrap();
    assert!(q.timed_out, "{q:?}");
    assert!(
        q.reason
            .as_deref()
            .unwrap()
            .starts_with("timeout: killed after"),
        "{q:?}"
    );
    assert_eq!(q.signal, Some(9));
    assert!(
        f.runs
            .iter()
            .any(|r| r.variant == "baseline" && r.status == RunStatus::Ok)
    );
}

#[test]
fn an_emulator_that_cannot_start_is_a_failed_run() {
    let s = Scratch::new();
    std::fs::write(s.p("bin/not-executable"), b"data").unwrap();
    let bin = s.p("bin/not-executable");
    let o = s.sweep_baseline(
        BaselineSweep {
            bin: bin.to_str(),
            ..BaselineSweep::once("ns")
        },
        &[],
        &[],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let f = load(&s.p("results/ns.json"));
    assert!(
        f.runs[0]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("could not start"),
        "{:?}",
        f.runs[0]
    );
}
