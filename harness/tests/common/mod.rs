//! Shared helpers of the integration tests: a scratch "repository" with the fake emulator
//! linked in under per-variant names, a guest image stand-in, and a runner for the CLI.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lockscale::model::*;
use lockscale::sizes::Mode;

pub const LOCKSCALE: &str = env!("CARGO_BIN_EXE_lockscale");
pub const FAKE: &str = env!("CARGO_BIN_EXE_fake-ppc64emu");
pub const VARIANTS: [&str; 3] = ["baseline", "per-cpu-lock", "cputlb-no-bql"];

/// The workspace root (the real one, for results/ and the schema).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A scratch repository: bin/ppc64emu-<variant> and bin/qemu-fake link to the fake emulator.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("bin")).unwrap();
        for v in VARIANTS {
            std::os::unix::fs::symlink(FAKE, root.join(format!("bin/ppc64emu-{v}"))).unwrap();
        }
        std::os::unix::fs::symlink(FAKE, root.join("bin/qemu-fake")).unwrap();
        std::fs::create_dir_all(root.join("workloads/mkbench")).unwrap();
        std::fs::write(
            root.join("workloads/mkbench/mkbench.elf"),
            b"\x7fELF stand-in guest",
        )
        .unwrap();
        std::fs::write(root.join("workloads/mkbench/boot-rom.bin"), b"rom").unwrap();
        std::fs::create_dir_all(root.join("results/reference")).unwrap();
        std::fs::copy(
            workspace().join("results/reference/posted-curve.json"),
            root.join("results/reference/posted-curve.json"),
        )
        .unwrap();
        Scratch { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn p(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `--bin` arguments for the given variants.
    pub fn bins(&self, variants: &[&str]) -> Vec<String> {
        variants
            .iter()
            .flat_map(|v| {
                [
                    "--bin".to_string(),
                    format!("{v}={}", self.p(&format!("bin/ppc64emu-{v}")).display()),
                ]
            })
            .collect()
    }

    /// A lockscale command in the scratch repo, with a clean fake-emulator environment.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(LOCKSCALE);
        c.current_dir(self.path()).arg("-C").arg(self.path());
        for (k, _) in std::env::vars() {
            if k.starts_with("FAKE_EMU_") {
                c.env_remove(k);
            }
        }
        c
    }

    pub fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = self.cmd();
        c.args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }
}

/// How [`Scratch::sweep_baseline`] sweeps the baseline variant alone.
pub struct BaselineSweep<'a> {
    /// `--cpus`.
    pub cpus: &'a str,
    /// `--reps`.
    pub reps: &'a str,
    /// `--name`: the sweep writes results/NAME.json.
    pub name: &'a str,
    /// The binary given for the variant (`None`: the scratch one).
    pub bin: Option<&'a str>,
}

impl<'a> BaselineSweep<'a> {
    /// One run at N = 1 into results/`name`.json with the scratch binary.
    pub fn once(name: &'a str) -> Self {
        BaselineSweep {
            cpus: "1",
            reps: "1",
            name,
            bin: None,
        }
    }
}

impl Scratch {
    /// `lockscale sweep --no-plot` of the baseline variant as `sweep` says, then `extra`.
    pub fn sweep_baseline(
        &self,
        sweep: BaselineSweep,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Output {
        let bin = match sweep.bin {
            Some(b) => format!("baseline={b}"),
            None => format!("baseline={}", self.p("bin/ppc64emu-baseline").display()),
        };
        let mut args = vec![
            "sweep",
            "--no-plot",
            "--variants",
            "baseline",
            "--bin",
            &bin,
            "--cpus",
            sweep.cpus,
            "--reps",
            sweep.reps,
            "--name",
            sweep.name,
        ];
        args.extend_from_slice(extra);
        self.run(&args, env)
    }
}

pub fn text(o: &Output) -> String {
    format!(
        "--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn load(path: &Path) -> ResultsFile {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Validates a JSON document against results/schema.json.
pub fn validate(path: &Path) {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("results/schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{} does not validate:\n{}",
        path.display(),
        errors.join("\n")
    );
}

/// A synthetic results file: `times[variant][N]` are the guest seconds of the repetitions.
pub fn synthetic(name: &str, times: &[(&str, u32, Vec<f64>)]) -> ResultsFile {
    let mut variants: Vec<String> = Vec::new();
    let mut cpus: Vec<u32> = Vec::new();
    let mut runs = Vec::new();
    let mut seq = 0;
    for (v, n, ts) in times {
        if !variants.iter().any(|x| x == v) {
            variants.push(v.to_string());
        }
        if !cpus.contains(n) {
            cpus.push(*n);
        }
        for (i, t) in ts.iter().enumerate() {
            seq += 1;
            runs.push(Run {
                variant: v.to_string(),
                cpus: *n,
                rep: i as u32 + 1,
                seq,
                started: "2026-01-01T00:00:00Z".into(),
                status: RunStatus::Ok,
                reason: None,
                guest_elapsed_s: Some(*t),
                host_wall_s: t * 1.1,
                exit_code: Some(0),
                signal: None,
                timed_out: false,
                checksum: Some("0xabc".into()),
                result: None,
                stats: BTreeMap::new(),
                guest_error: None,
                pin: "compact".into(),
                oversubscribed: false,
                clock: Clock::default(),
                report: None,
                report_error: None,
                log: None,
            });
        }
    }
    let reps = times.iter().map(|t| t.2.len() as u32).max().unwrap_or(1);
    ResultsFile {
        schema: SCHEMA_ID.into(),
        name: name.into(),
        created: "2026-01-01T00:00:00Z".into(),
        updated: "2026-01-01T00:00:00Z".into(),
        complete: true,
        harness: HarnessInfo {
            version: "test".into(),
            git_rev: None,
        },
        host: HostInfo {
            cpu_model: "Test CPU".into(),
            arch: "x86_64".into(),
            logical_cores: 2,
            physical_cores: Some(2),
            memory_bytes: 1 << 34,
            os: "test".into(),
            kernel: "test".into(),
            hostname_hash: "0123456789abcdef".into(),
            load_before: None,
            load_after: None,
        },
        config: SweepConfig {
            mode: Mode::Custom,
            variants,
            cpus,
            reps,
            pin: PinPolicy::Auto,
            timeout_s: 60.0,
            memory: "1G".into(),
            order: "interleaved".into(),
            share: None,
            emulator_args: vec![],
            clock: Clock::default(),
        },
        builds: BTreeMap::new(),
        workload: WorkloadInfo {
            name: "mkbench".into(),
            image: "mkbench.elf".into(),
            image_sha256: "00".into(),
            bios: None,
            bios_sha256: None,
            bootargs: "jobs={N} units=8 size=10 seed=1".into(),
            units: 8,
            size: 10,
            seed: 1,
            expected_checksum: Some("0xabc".into()),
            manifest: None,
        },
        runs,
        merged_from: vec![],
        hosts: vec![],
    }
}

pub fn write(file: &ResultsFile, path: &Path) {
    std::fs::write(path, serde_json::to_string_pretty(file).unwrap()).unwrap();
}
