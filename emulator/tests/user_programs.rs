//! Real programs under `ppc64emu user`: stdout and exit status must equal what
//! qemu-ppc64le-static printed for the same case (recorded in tests/programs/expected by
//! tests/programs/build.sh), so neither QEMU nor the cross compiler is needed here.
//!
//! Cases whose programs still need unimplemented instructions go in `PENDING`; run
//! `cargo test -p ppc64emu --test user_programs -- --ignored --nocapture` to see where each
//! of them stops.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Cases (names from tests/programs/cases) known not to match QEMU yet, e.g. because they
/// need instructions that are not implemented; every other case must match.
const PENDING: &[&str] = &[];

/// A guest that runs longer than this is reported as hung (not a performance assertion).
const HANG_LIMIT: Duration = Duration::from_secs(300);

struct Case {
    name: String,
    binary: String,
    stdin: Option<String>,
    args: Vec<String>,
}

fn programs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs")
}

/// Debian's busybox-static, fetched by tests/programs/fetch-busybox.sh.
fn busybox() -> PathBuf {
    match std::env::var_os("PPC64EMU_BUSYBOX") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/guest-cache/busybox"),
    }
}

/// Splits a manifest line into words: blanks separate, '…' is literal, "…" allows \" \\ \$.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Some(w) = cur.take() {
                    out.push(w);
                }
            }
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                    w.push(d);
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(String::new);
                while let Some(d) = chars.next() {
                    match d {
                        '"' => break,
                        '\\' if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                            w.push(chars.next().unwrap())
                        }
                        _ => w.push(d),
                    }
                }
            }
            _ => cur.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(cur);
    out
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(programs_dir().join("cases")).expect("tests/programs/cases");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| {
            let w = words(l);
            assert!(w.len() >= 3, "bad case line: {l}");
            Case {
                name: w[0].clone(),
                binary: w[1].clone(),
                stdin: (w[2] != "-").then(|| w[2].clone()),
                args: w[3..].to_vec(),
            }
        })
        .collect()
}

struct Run {
    stdout: Vec<u8>,
    stderr: String,
    status: i32,
}

/// Runs `ppc64emu user EXE ARGS…` as build.sh runs QEMU: environment `SYS_TEST=1` only,
/// in the programs folder, stdin from a file or empty.
fn run(exe: &Path, args: &[String], stdin: Option<&Path>) -> Result<Run, String> {
    run_with(&[], exe, args, stdin)
}

/// `run` with options of `ppc64emu user` before the program.
fn run_with(
    opts: &[&str],
    exe: &Path,
    args: &[String],
    stdin: Option<&Path>,
) -> Result<Run, String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ppc64emu"));
    cmd.arg("user")
        .args(opts)
        .arg(exe)
        .args(args)
        .env_clear()
        .env("SYS_TEST", "1")
        .current_dir(programs_dir());
    cmd.stdin(match stdin {
        Some(p) => {
            Stdio::from(std::fs::File::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        }
        None => Stdio::null(),
    });
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ppc64emu");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        out.read_to_end(&mut v).ok();
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        err.read_to_end(&mut v).ok();
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > HANG_LIMIT {
            child.kill().ok();
            child.wait().ok();
            return Err(format!(
                "{} {:?} did not finish within {:?}",
                exe.display(),
                args,
                HANG_LIMIT
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ok(Run {
        stdout: t_out.join().unwrap(),
        stderr: String::from_utf8_lossy(&t_err.join().unwrap()).into_owned(),
        status: status.code().unwrap_or(-1),
    })
}

/// Runs one case (translated, the default); `Err` describes how it differs from QEMU's
/// recording.
fn check(case: &Case) -> Result<(), String> {
    // Every block translated on first sight: the strongest check of the translations.
    check_with(&["--jit-threshold", "0"], case)
}

fn check_with(opts: &[&str], case: &Case) -> Result<(), String> {
    let dir = programs_dir();
    let exe = if case.binary == "busybox" {
        busybox()
    } else {
        dir.join("bin").join(&case.binary)
    };
    let r = run_with(
        opts,
        &exe,
        &case.args,
        case.stdin.as_ref().map(|s| dir.join(s)).as_deref(),
    )
    .map_err(|e| format!("{}: {e}", case.name))?;
    let want_out =
        std::fs::read(dir.join(format!("expected/{}.out", case.name))).expect("expected output");
    let want_status: i32 =
        std::fs::read_to_string(dir.join(format!("expected/{}.status", case.name)))
            .expect("expected status")
            .trim()
            .parse()
            .unwrap();
    if r.stdout == want_out && r.status == want_status {
        return Ok(());
    }
    let mut msg = format!("{}: status {} (QEMU {})", case.name, r.status, want_status);
    if r.stdout != want_out {
        let (got, want) = (
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(&want_out),
        );
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
        msg += &format!(
            "; stdout differs from line {}: got {:?}, QEMU {:?} ({} vs {} bytes)",
            line + 1,
            clip(got.lines().nth(line)),
            clip(want.lines().nth(line)),
            r.stdout.len(),
            want_out.len()
        );
    }
    let tail: Vec<&str> = r.stderr.lines().rev().take(3).collect();
    msg += &format!("; stderr: {:?}", tail.into_iter().rev().collect::<Vec<_>>());
    Err(msg)
}

/// A line for a failure message: at most 100 characters.
fn clip(line: Option<&str>) -> String {
    line.map_or("<end>".into(), |l| l.chars().take(100).collect())
}

fn check_all(filter: impl Fn(&Case) -> bool) {
    let failures: Vec<String> = cases()
        .iter()
        .filter(|c| !PENDING.contains(&c.name.as_str()) && filter(c))
        .filter_map(|c| check(c).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} case(s) differ from QEMU:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn pending_list_names_real_cases() {
    let all = cases();
    for p in PENDING {
        assert!(
            all.iter().any(|c| c.name == *p),
            "PENDING names unknown case {p}"
        );
    }
}

#[test]
fn manifest_words() {
    assert_eq!(
        words(r#"a "b c" 'd "e"' "x\"y" ''"#),
        ["a", "b c", "d \"e\"", "x\"y", ""]
    );
}

#[test]
fn test_programs_match_qemu() {
    check_all(|c| c.binary != "busybox");
}

/// The runner's self-test cases (memory map, TLB flushes, code rewritten by system calls)
/// under the interpreter as well.
#[test]
fn self_tests_match_qemu_interpreted() {
    let failures: Vec<String> = cases()
        .iter()
        .filter(|c| c.binary == "sys" && !PENDING.contains(&c.name.as_str()))
        .filter_map(|c| check_with(&["--accel", "interp"], c).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The self-test cases on each translating tier alone, every block translated at once (the
/// default runs both tiers, baseline first), and the baseline tier with the TLB instead of
/// host-guarded memory (faults, `munmap`, `mprotect` and self-modifying code take either),
/// and with the guarded pages placed high (the base loaded per access, not a displacement).
#[test]
fn self_tests_match_qemu_on_each_tier() {
    for opts in [
        &["--jit-tiers", "baseline"][..],
        &["--jit-tiers", "cranelift"],
        &["--jit-tiers", "baseline", "--jit-memory", "tlb"],
        &["--jit-tiers", "baseline", "--jit-memory", "guarded-high"],
    ] {
        let opts = [opts, &["--jit-threshold", "0"]].concat();
        let failures: Vec<String> = cases()
            .iter()
            .filter(|c| c.binary == "sys" && !PENDING.contains(&c.name.as_str()))
            .filter_map(|c| {
                check_with(&opts, c)
                    .map_err(|e| format!("{}: {e}", opts.join(" ")))
                    .err()
            })
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

#[test]
fn busybox_applets_match_qemu() {
    if !busybox().exists() {
        eprintln!(
            "skipped: {} is absent (run emulator/tests/programs/fetch-busybox.sh)",
            busybox().display()
        );
        return;
    }
    check_all(|c| c.binary == "busybox");
}

/// Where each case in `PENDING` stands (informational; never fails).
#[test]
#[ignore]
fn status_of_pending_cases() {
    for c in cases()
        .iter()
        .filter(|c| PENDING.contains(&c.name.as_str()))
    {
        if c.binary == "busybox" && !busybox().exists() {
            continue;
        }
        match check(c) {
            Ok(()) => eprintln!("{}: now matches QEMU — remove it from PENDING", c.name),
            Err(e) => eprintln!("{e}"),
        }
    }
}

fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!("ppc64emu-test-{}-{name}", std::process::id()));
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn malformed_programs_fail_cleanly() {
    let real = std::fs::read(programs_dir().join("bin/sys")).unwrap();
    let mut x86 = real.clone();
    x86[18] = 62; // e_machine = EM_X86_64
    let mut big_endian = real.clone();
    big_endian[5] = 2; // EI_DATA = ELFDATA2MSB
    let mut bad_phoff = real.clone();
    bad_phoff[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
    let cases: [(&str, Vec<u8>, &str); 6] = [
        ("empty", Vec::new(), "not a 64-bit ELF"),
        ("text", b"#!/bin/sh\necho hi\n".to_vec(), "not a 64-bit ELF"),
        (
            "truncated",
            real[..4096].to_vec(),
            "segment data outside the file",
        ),
        ("x86", x86, "not a ppc64 program"),
        ("big-endian", big_endian, "big-endian"),
        ("bad-phoff", bad_phoff, "bad program headers"),
    ];
    for (name, bytes, want) in cases {
        let p = scratch(name, &bytes);
        let r = run(&p, &[], None).unwrap();
        std::fs::remove_file(&p).ok();
        assert_eq!(r.status, 126, "{name}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{name}: {}", r.stderr);
    }
    let r = run(Path::new("/nonexistent/program"), &[], None).unwrap();
    assert_eq!(r.status, 127, "{}", r.stderr);
}

/// The runner's self-test cases with a code cache limit so small that the cache is flushed
/// over and over (one vCPU: the JIT flushes itself before translating into a full module).
/// Only these: a program whose hot code does not fit retranslates it after every flush, and
/// the larger programs would take minutes.
#[test]
fn self_tests_match_qemu_with_a_tiny_code_cache() {
    let failures: Vec<String> = cases()
        .iter()
        .filter(|c| c.binary == "sys" && !PENDING.contains(&c.name.as_str()))
        .filter_map(|c| check_with(&["--jit-threshold", "0", "--jit-cache-limit", "4K"], c).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let out = Command::new(env!("CARGO_BIN_EXE_ppc64emu"))
        .args([
            "user",
            "--stats",
            "--jit-threshold",
            "0",
            "--jit-cache-limit",
            "4K",
        ])
        .arg(programs_dir().join("bin/sys"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(42));
    let err = String::from_utf8_lossy(&out.stderr);
    let flushes: u64 = err
        .split(" code cache flushes")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no flush count in: {err}"));
    assert!(flushes > 0, "{err}");
}

#[test]
fn usage_errors() {
    let out = Command::new(env!("CARGO_BIN_EXE_ppc64emu"))
        .arg("user")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(env!("CARGO_BIN_EXE_ppc64emu"))
        .args(["user", "--bogus", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    for (opt, bad) in [
        ("--jit-tiers", "fast"),
        ("--jit-tiers", ""),
        ("--jit-promote", "-1"),
        ("--jit-memory", "direct"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ppc64emu"))
            .args(["user", opt, bad, "x"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{opt} {bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(opt), "{err}");
    }
    for bad in ["0", "lots", "-1", "2T"] {
        let out = Command::new(env!("CARGO_BIN_EXE_ppc64emu"))
            .args(["user", "--jit-cache-limit", bad, "x"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--jit-cache-limit {bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("--jit-cache-limit {bad}:")), "{err}");
    }
}

#[test]
fn stats_report_instructions() {
    let out = Command::new(env!("CARGO_BIN_EXE_ppc64emu"))
        .args(["user", "--stats"])
        .arg(programs_dir().join("bin/sys"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(42));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("guest instructions") && err.contains("MIPS"),
        "{err}"
    );
}

#[test]
fn writing_to_a_closed_pipe_kills_quietly() {
    if !busybox().exists() {
        eprintln!(
            "skipped: {} is absent (run emulator/tests/programs/fetch-busybox.sh)",
            busybox().display()
        );
        return;
    }
    // `yes | head -1`: yes dies of SIGPIPE (status 128 + 13) without a message, as natively.
    let mut child = Command::new(env!("CARGO_BIN_EXE_ppc64emu"))
        .arg("user")
        .arg(busybox())
        .arg("yes")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 2];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    assert_eq!(&first, b"y\n");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(141));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
