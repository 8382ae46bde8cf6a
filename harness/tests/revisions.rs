//! `lockscale build` and `gate --base-rev/--candidate-rev` on a scratch git repository whose
//! "emulator" crate is the fake emulator, so the real cargo/git/worktree path is exercised
//! without the real emulator. The candidate revision reports a 30% slower guest.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

const FAKE_SRC: &str = include_str!("support/fake_ppc64emu.rs");

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn emulator_source(slowdown: &str) -> String {
    FAKE_SRC
        .replace(
            "const BUILD_STRATEGY: &str = \"\";",
            "const BUILD_STRATEGY: &str = if cfg!(feature = \"baseline\") { \"baseline\" } \
             else if cfg!(feature = \"per-cpu-lock\") { \"per-cpu-lock\" } else { \"cputlb-no-bql\" };",
        )
        .replace("const BUILD_SLOWDOWN: f64 = 1.0;", &format!("const BUILD_SLOWDOWN: f64 = {slowdown};"))
}

fn scratch_repo(s: &Scratch) {
    let root = s.path();
    std::fs::write(
        root.join("Cargo.toml"),
        "[workspace]\nresolver = \"3\"\nmembers = [\"emulator\"]\n\n[profile.release]\nopt-level = 0\ndebug = false\nincremental = true\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("emulator/src")).unwrap();
    std::fs::write(
        root.join("emulator/Cargo.toml"),
        "[package]\nname = \"ppc64emu\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[features]\ndefault = [\"baseline\"]\n\
         baseline = []\nper-cpu-lock = []\ncputlb-no-bql = []\n",
    )
    .unwrap();
    std::fs::write(root.join("emulator/src/main.rs"), emulator_source("1.0")).unwrap();
    std::fs::write(root.join(".gitignore"), "/target\n/bin\n").unwrap();
    let o = Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
        .args(["generate-lockfile", "--offline"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    git(root, &["init", "-q", "-b", "main"]);
    git(
        root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "add",
            "-A",
        ],
    );
    git(
        root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "-q",
            "-m",
            "base",
        ],
    );
    std::fs::write(root.join("emulator/src/main.rs"), emulator_source("1.3")).unwrap();
    git(
        root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "-q",
            "-am",
            "slower",
        ],
    );
}

#[test]
fn build_then_gate_two_revisions() {
    let s = Scratch::new();
    scratch_repo(&s);
    let env_clean = |c: &mut Command| {
        c.env_remove("CARGO_TARGET_DIR");
    };

    // build: the working tree, two variants, with metadata.
    let mut c = s.cmd();
    env_clean(&mut c);
    let o = c
        .args(["build", "--variants", "baseline,cputlb-no-bql"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let meta: lockscale::model::BuildInfo = serde_json::from_str(
        &std::fs::read_to_string(s.p("target/lockscale/bin/ppc64emu-cputlb-no-bql.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta.features, ["cputlb-no-bql"]);
    assert_eq!(meta.git_dirty, Some(false));
    assert_eq!(meta.git_rev.as_deref().map(str::len), Some(40));
    assert!(meta.rustc.as_deref().unwrap().starts_with("rustc "));
    assert_eq!(
        meta.version.as_deref(),
        Some("ppc64emu 0.0.0-fake (strategy: cputlb-no-bql)")
    );
    assert_eq!(meta.binary_sha256.as_deref().map(str::len), Some(64));

    // sweep --no-build uses those binaries.
    let o = s.run(
        &[
            "sweep",
            "--no-build",
            "--no-plot",
            "--variants",
            "baseline,cputlb-no-bql",
            "--cpus",
            "1",
            "--reps",
            "1",
            "--name",
            "nb",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let f = load(&s.p("results/nb.json"));
    assert_eq!(f.builds["baseline"].git_rev, meta.git_rev);

    // gate by revision: candidate (HEAD) is 30% slower than base (HEAD~1).
    let summary = s.p("summary.md");
    let mut c = s.cmd();
    env_clean(&mut c);
    let o = c
        .args([
            "gate",
            "--base-rev",
            "HEAD~1",
            "--candidate-rev",
            "HEAD",
            "--variants",
            "baseline",
            "--cpus",
            "1,2",
            "--summary",
        ])
        .arg(&summary)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("FAIL: 2 regression(s)"), "{out}");
    assert!(
        std::fs::read_to_string(&summary)
            .unwrap()
            .contains("**REGRESSION**")
    );
    let gate_dir = s.p("target/lockscale/gate");
    let mut sides = 0;
    for e in std::fs::read_dir(&gate_dir).unwrap() {
        let p = e.unwrap().path();
        validate(&p);
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with("-base.json") || name.ends_with("-candidate.json") {
            sides += 1;
            let f = load(&p);
            assert_eq!(f.config.variants, ["baseline"]);
            assert_eq!(f.runs.len(), 2 * 5);
        } else {
            // The combined A/B file interleaves base and candidate runs.
            let f = load(&p);
            let first: Vec<_> = f.runs.iter().take(2).map(|r| r.variant.clone()).collect();
            assert!(
                first.contains(&"base:baseline".to_string())
                    && first.contains(&"candidate:baseline".to_string()),
                "{first:?}"
            );
        }
    }
    assert_eq!(sides, 2);

    // The same revision on both sides passes (the worktree and its build are reused).
    let mut c = s.cmd();
    env_clean(&mut c);
    let o = c
        .args([
            "gate",
            "--base-rev",
            "HEAD~1",
            "--candidate-rev",
            "HEAD~1",
            "--variants",
            "baseline",
            "--cpus",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("## lockscale gate: PASS"));

    // On virtual host time a 2-core runner gates at N = 16 and 28: both sides run with
    // --clock virtual --quantum, record it, and no point is oversubscribed.
    let out_dir = s.p("gate-virtual");
    let mut c = s.cmd();
    env_clean(&mut c);
    let o = c
        .args([
            "gate",
            "--base-rev",
            "HEAD~1",
            "--candidate-rev",
            "HEAD",
            "--variants",
            "baseline",
            "--cpus",
            "16,28",
            "--clock",
            "virtual",
            "--quantum",
            "1ms",
            "--out-dir",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("FAIL: 2 regression(s)"),
        "{}",
        text(&o)
    );
    let virtual_1ms = lockscale::model::Clock {
        kind: lockscale::model::ClockKind::Virtual,
        quantum_ns: Some(1_000_000),
        line_cost_ns: None,
    };
    let mut sides = 0;
    for e in std::fs::read_dir(&out_dir).unwrap() {
        let p = e.unwrap().path();
        validate(&p);
        let f = load(&p);
        assert_eq!(f.config.clock, virtual_1ms, "{}", p.display());
        assert_eq!(f.config.cpus, [16, 28]);
        assert!(
            f.runs
                .iter()
                .all(|r| r.clock == virtual_1ms && !r.oversubscribed),
            "{}",
            p.display()
        );
        sides += 1;
    }
    assert_eq!(sides, 3, "base, candidate and the combined file");

    // Too few repetitions are refused before anything is built.
    let o = s.run(
        &[
            "gate",
            "--base-rev",
            "HEAD~1",
            "--candidate-rev",
            "HEAD",
            "--reps",
            "3",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("--reps 3 is too few"));
    // An unknown revision is a clear error.
    let o = s.run(
        &["gate", "--base-rev", "nope", "--candidate-rev", "HEAD"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("\"nope\" is not a commit"),
        "{}",
        text(&o)
    );
}
