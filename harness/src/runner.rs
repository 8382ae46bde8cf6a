//! Running one emulator invocation: spawn it, keep its console, enforce the timeout, and turn
//! what it printed (the guest's result line) and wrote (the run report) into a [`Run`].
//!
//! A run never aborts the sweep: every way it can go wrong becomes a failed run with a reason.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::model::{BuildKind, Run, RunStatus};
use crate::resultline;
use crate::workload::Workload;

/// How one emulator of a sweep is started.
#[derive(Clone, Debug)]
pub struct EmulatorCmd {
    /// The variant label (`baseline`, `qemu`, `base:baseline`, …).
    pub label: String,
    pub kind: BuildKind,
    pub program: PathBuf,
}

/// The guest and run parameters shared by every emulator of a sweep.
#[derive(Clone, Debug)]
pub struct GuestSpec {
    pub workload: Workload,
    pub kernel: PathBuf,
    /// The initramfs of a Linux guest (`-initrd`).
    pub initrd: Option<PathBuf>,
    /// Boot ROM for qemu-style peers.
    pub bios: Option<PathBuf>,
    pub memory: String,
    pub units: u32,
    pub size: u32,
    pub seed: u32,
}

impl GuestSpec {
    /// Bootargs for N vCPUs: mkbench's `jobs=N units=U size=S seed=X`; a Linux guest's size
    /// is in its image, so it gets the console and `jobs=N` only.
    pub fn bootargs(&self, cpus: u32) -> String {
        self.bootargs_template().replace("{N}", &cpus.to_string())
    }

    /// The bootargs template stored in the results file.
    pub fn bootargs_template(&self) -> String {
        if self.workload.is_linux() {
            "console=hvc0 quiet jobs={N}".into()
        } else {
            format!(
                "jobs={{N}} units={} size={} seed={}",
                self.units, self.size, self.seed
            )
        }
    }
}

/// One point of the plan to run.
#[derive(Clone, Debug)]
pub struct RunRequest {
    pub cpus: u32,
    pub rep: u32,
    pub seq: u32,
    /// `compact` or `none`.
    pub pin: String,
    pub oversubscribed: bool,
    /// Logical cores of the host (compact pinning of peers never names more).
    pub host_cores: u32,
    pub timeout_s: f64,
    /// Where to ask for the run report (ours only).
    pub report_path: PathBuf,
    /// Where to keep the console output.
    pub log_path: PathBuf,
    /// The checksum every run must print, when one is known.
    pub expected_checksum: Option<String>,
    /// Extra arguments for our emulator.
    pub extra_args: Vec<String>,
}

/// The command line for one run.
///
/// Ours: `<bin> -smp N -m 1G -nographic -kernel K -append "…" --report R --pin P --timeout T`.
///
/// Peers get the qemu-style command line, whatever their name:
/// `<cmd> -M pseries -cpu power8 -accel tcg,thread=multi -smp N -m 1G -nographic -no-reboot
/// -bios ROM -kernel K -append "…"`; a Linux guest boots through QEMU's built-in firmware
/// (`-M pseries,x-vof=on -vga none`, no -bios) with `-initrd I`, on ours too. With compact pinning the harness runs the peer under
/// `taskset -c 0-(N-1)` (when `taskset` exists, and never past the host's cores), since peers
/// have no pinning option of their own.
pub fn command_line(emu: &EmulatorCmd, guest: &GuestSpec, req: &RunRequest) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let smp = req.cpus.to_string();
    let kernel = guest.kernel.display().to_string();
    let append = guest.bootargs(req.cpus);
    match emu.kind {
        BuildKind::Ours => {
            v.push(emu.program.display().to_string());
            for a in [
                "-smp",
                &smp,
                "-m",
                &guest.memory,
                "-nographic",
                "-kernel",
                &kernel,
            ] {
                v.push(a.to_string());
            }
            if let Some(i) = &guest.initrd {
                v.push("-initrd".into());
                v.push(i.display().to_string());
            }
            v.push("-append".into());
            v.push(append);
            v.push("--report".into());
            v.push(req.report_path.display().to_string());
            v.push("--pin".into());
            v.push(req.pin.clone());
            v.push("--timeout".into());
            v.push(format!("{}", req.timeout_s.ceil() as u64));
            v.extend(req.extra_args.iter().cloned());
        }
        BuildKind::Peer => {
            if req.pin == "compact" && taskset_available() {
                v.push("taskset".into());
                v.push("-c".into());
                let n = req.cpus.min(req.host_cores).max(1);
                v.push(if n == 1 {
                    "0".into()
                } else {
                    format!("0-{}", n - 1)
                });
            }
            v.push(emu.program.display().to_string());
            let bios = guest
                .bios
                .as_ref()
                .filter(|_| guest.initrd.is_none())
                .map(|b| b.display().to_string());
            let initrd = guest.initrd.as_ref().map(|i| i.display().to_string());
            let machine = if initrd.is_some() {
                "pseries,x-vof=on"
            } else {
                "pseries"
            };
            let mut args = vec![
                "-M",
                machine,
                "-cpu",
                "power8",
                "-accel",
                "tcg,thread=multi",
                "-smp",
                &smp,
            ];
            // Without `-vga none` QEMU looks for a VGA ROM that a minimal install lacks.
            args.extend([
                "-m",
                &guest.memory,
                "-nographic",
                "-no-reboot",
                "-vga",
                "none",
            ]);
            if let Some(b) = &bios {
                args.extend(["-bios", b]);
            }
            args.extend(["-kernel", &kernel]);
            if let Some(i) = &initrd {
                args.extend(["-initrd", i]);
            }
            args.extend(["-append", &append]);
            v.extend(args.into_iter().map(String::from));
        }
    }
    v
}

fn taskset_available() -> bool {
    static FOUND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FOUND.get_or_init(|| crate::util::find_in_path("taskset").is_some())
}

/// Keeps the last lines of a stream for error messages while copying everything to the log.
struct Tail {
    lines: Vec<String>,
}

fn pump(
    stream: impl Read + Send + 'static,
    sink: Arc<Mutex<Option<fs::File>>>,
    tag: &'static str,
) -> thread::JoinHandle<Tail> {
    thread::spawn(move || {
        let mut lines = Vec::new();
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf)
                        .trim_end_matches(['\n', '\r'])
                        .to_string();
                    if let Ok(mut g) = sink.lock()
                        && let Some(f) = g.as_mut()
                    {
                        let _ = writeln!(f, "{tag}{line}");
                    }
                    lines.push(line);
                }
            }
        }
        Tail { lines }
    })
}

fn last_nonempty(lines: &[String]) -> Option<&str> {
    lines.iter().rev().map(|s| s.trim()).find(|s| !s.is_empty())
}

fn exit_parts(status: Option<ExitStatus>) -> (Option<i32>, Option<i32>) {
    match status {
        None => (None, None),
        Some(s) => {
            use std::os::unix::process::ExitStatusExt;
            (s.code(), s.signal())
        }
    }
}

/// Runs one invocation to completion (or timeout) and classifies it.
pub fn run_once(emu: &EmulatorCmd, guest: &GuestSpec, req: &RunRequest, started: String) -> Run {
    let argv = command_line(emu, guest, req);
    let mut run = Run {
        variant: emu.label.clone(),
        cpus: req.cpus,
        rep: req.rep,
        seq: req.seq,
        started,
        status: RunStatus::Failed,
        reason: None,
        guest_elapsed_s: None,
        host_wall_s: 0.0,
        exit_code: None,
        signal: None,
        timed_out: false,
        checksum: None,
        result: None,
        stats: Default::default(),
        guest_error: None,
        pin: req.pin.clone(),
        oversubscribed: req.oversubscribed,
        clock: Default::default(),
        report: None,
        report_error: None,
        log: Some(req.log_path.display().to_string()),
    };
    if let Some(dir) = req.log_path.parent() {
        let _ = fs::create_dir_all(dir);
    }
    if emu.kind == BuildKind::Ours {
        if let Some(dir) = req.report_path.parent() {
            let _ = fs::create_dir_all(dir);
        }
        let _ = fs::remove_file(&req.report_path);
    }
    let log = fs::File::create(&req.log_path).ok();
    let sink = Arc::new(Mutex::new(log));
    if let Ok(mut g) = sink.lock()
        && let Some(f) = g.as_mut()
    {
        let _ = writeln!(f, "# {}", shell_words(&argv));
    }

    let t0 = Instant::now();
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    die_with_parent(&mut command);
    let spawned = command.spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            run.reason = Some(format!("could not start {}: {e}", argv[0]));
            return run;
        }
    };
    let out_t = pump(child.stdout.take().expect("piped stdout"), sink.clone(), "");
    let err_t = pump(
        child.stderr.take().expect("piped stderr"),
        sink.clone(),
        "stderr: ",
    );

    let deadline = Duration::from_secs_f64(req.timeout_s + crate::sizes::kill_grace(req.timeout_s));
    let mut status = None;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => {
                status = Some(s);
                break;
            }
            Ok(None) => {}
            Err(_) => break,
        }
        if t0.elapsed() >= deadline {
            let _ = child.kill();
            status = child.wait().ok();
            run.timed_out = true;
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    run.host_wall_s = t0.elapsed().as_secs_f64();
    let stdout = out_t.join().map(|t| t.lines).unwrap_or_default();
    let stderr = err_t.join().map(|t| t.lines).unwrap_or_default();
    let (code, signal) = exit_parts(status);
    run.exit_code = code;
    run.signal = signal;

    if emu.kind == BuildKind::Ours {
        read_report(&req.report_path, &mut run);
    }

    let scanned = resultline::scan(stdout.iter().map(String::as_str));
    run.stats = scanned.stats;
    run.guest_error = scanned.error.clone();
    let parsed = match scanned.result {
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => {
            run.reason = Some(format!("malformed result line: {e}"));
            None
        }
        None => None,
    };
    if let Some(r) = &parsed {
        run.checksum = Some(r.checksum.clone());
        run.guest_elapsed_s = Some(r.elapsed_s());
    }
    run.result = parsed.clone();

    let hint = last_nonempty(&stderr)
        .or_else(|| last_nonempty(&stdout))
        .map(|s| format!(": {s}"))
        .unwrap_or_default();
    let reason = if run.timed_out {
        Some(format!(
            "timeout: killed after {:.0} s (limit {:.0} s)",
            run.host_wall_s, req.timeout_s
        ))
    } else if let Some(e) = &scanned.error {
        Some(format!("guest self-check failed: {e}"))
    } else if run.reason.is_some() {
        run.reason.clone()
    } else if let Some(r) = &parsed {
        if code != Some(0) {
            Some(format!(
                "emulator exited with {} after the result line{hint}",
                describe_exit(code, signal)
            ))
        } else if r.cpus != req.cpus {
            Some(format!(
                "result line says cpus={} but the run had -smp {}",
                r.cpus, req.cpus
            ))
        } else if r.jobs != req.cpus {
            Some(format!(
                "result line says jobs={} but the guest was asked for jobs={}",
                r.jobs, req.cpus
            ))
        } else if guest.workload.is_linux()
            && r.counters.get("workload").map(String::as_str) != Some(guest.workload.name())
        {
            Some(format!(
                "result line says workload={} but the image is {}",
                r.counters
                    .get("workload")
                    .map(String::as_str)
                    .unwrap_or("(none)"),
                guest.workload
            ))
        } else if r.units != guest.units || r.size != guest.size {
            Some(format!(
                "result line says units={} size={} but the guest was asked for units={} size={}",
                r.units, r.size, guest.units, guest.size
            ))
        } else if let Some(exp) = &req.expected_checksum
            && !exp.eq_ignore_ascii_case(&r.checksum)
        {
            Some(format!(
                "checksum mismatch: got {}, every run must print {exp}",
                r.checksum
            ))
        } else if r.elapsed_tb == 0 {
            Some("result line has elapsed_tb=0".into())
        } else {
            None
        }
    } else if code != Some(0) && run.host_wall_s >= req.timeout_s {
        Some(format!(
            "timeout: no result line, emulator stopped with {} at its {:.0} s limit{hint}",
            describe_exit(code, signal),
            req.timeout_s
        ))
    } else {
        Some(format!(
            "no result line; emulator exited with {}{hint}",
            describe_exit(code, signal)
        ))
    };
    match reason {
        None => run.status = RunStatus::Ok,
        Some(r) => {
            run.status = RunStatus::Failed;
            run.reason = Some(r);
        }
    }
    run
}

/// Makes the emulator die with the harness. A harness stopped by `kill`, a CI cancellation or a
/// batch system's time limit would otherwise leave the run in flight behind: a peer has no
/// timeout of its own, and an orphan competes for the cores with the runs of a `--resume`.
/// On Linux the kernel sends the child SIGKILL when the thread that spawned it ends (sweeps
/// spawn from the main thread, so that is when the harness exits); the run in flight is lost
/// either way, and `--resume` runs it again.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and calls only prctl(2),
    // getppid(2) and kill(2), which are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // The harness may have died between fork and prctl.
            if libc::getppid() != parent {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

fn describe_exit(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown status".into(),
    }
}

/// Reads the run report; a missing or unreadable report is noted, never fatal.
fn read_report(path: &Path, run: &mut Run) {
    match fs::read(path) {
        Err(e) => run.report_error = Some(format!("no run report at {}: {e}", path.display())),
        Ok(bytes) => match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) => run.report = Some(v),
            Err(e) => {
                run.report_error = Some(format!("run report {} is not JSON: {e}", path.display()))
            }
        },
    }
}

/// Quotes a command line for logs and `--plan` output.
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// First line of `<program> --version`, with a short time limit; `None` when it fails.
pub fn version_of(program: &Path) -> Option<String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut out = child.stdout.take()?;
    let reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if t0.elapsed() < Duration::from_secs(10) => {
                thread::sleep(Duration::from_millis(10))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
        }
    }
    let s = reader.join().ok()?;
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(String::from)
}

/// The strategy a `ppc64emu --version` line names: `ppc64emu 0.1.0 (strategy: baseline)`.
pub fn strategy_of_version(line: &str) -> Option<&str> {
    let i = line.find("strategy:")?;
    let rest = line[i + "strategy:".len()..].trim_start();
    let end = rest
        .find(|c: char| c == ')' || c.is_whitespace())
        .unwrap_or(rest.len());
    Some(&rest[..end]).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> RunRequest {
        RunRequest {
            cpus: 4,
            rep: 1,
            seq: 1,
            pin: "none".into(),
            oversubscribed: false,
            host_cores: 2,
            timeout_s: 60.0,
            report_path: "/tmp/r.json".into(),
            log_path: "/tmp/r.log".into(),
            expected_checksum: None,
            extra_args: vec![],
        }
    }

    fn guest() -> GuestSpec {
        GuestSpec {
            workload: Workload::Mkbench,
            initrd: None,
            kernel: "k.elf".into(),
            bios: Some("rom.bin".into()),
            memory: "1G".into(),
            units: 8,
            size: 10,
            seed: 3,
        }
    }

    #[test]
    fn ours_command_line() {
        let emu = EmulatorCmd {
            label: "baseline".into(),
            kind: BuildKind::Ours,
            program: "/b/ppc64emu".into(),
        };
        let v = command_line(&emu, &guest(), &req());
        assert_eq!(
            shell_words(&v),
            "/b/ppc64emu -smp 4 -m 1G -nographic -kernel k.elf -append 'jobs=4 units=8 size=10 seed=3' \
             --report /tmp/r.json --pin none --timeout 60"
        );
    }

    #[test]
    fn peer_command_line() {
        let emu = EmulatorCmd {
            label: "qemu".into(),
            kind: BuildKind::Peer,
            program: "qemu-system-ppc64".into(),
        };
        let v = command_line(&emu, &guest(), &req());
        assert_eq!(
            shell_words(&v),
            "qemu-system-ppc64 -M pseries -cpu power8 -accel tcg,thread=multi -smp 4 -m 1G -nographic \
             -no-reboot -vga none -bios rom.bin -kernel k.elf -append 'jobs=4 units=8 size=10 seed=3'"
        );
    }

    #[test]
    fn linux_guest_command_lines() {
        let mut g = guest();
        g.workload = Workload::LinuxMake;
        g.kernel = "vmlinux".into();
        g.initrd = Some("initrd.cpio".into());
        g.memory = "2G".into();
        let ours = EmulatorCmd {
            label: "baseline".into(),
            kind: BuildKind::Ours,
            program: "/b/ppc64emu".into(),
        };
        assert_eq!(
            shell_words(&command_line(&ours, &g, &req())),
            "/b/ppc64emu -smp 4 -m 2G -nographic -kernel vmlinux -initrd initrd.cpio -append 'console=hvc0 quiet jobs=4' \
             --report /tmp/r.json --pin none --timeout 60"
        );
        let peer = EmulatorCmd {
            label: "qemu".into(),
            kind: BuildKind::Peer,
            program: "qemu-system-ppc64".into(),
        };
        assert_eq!(
            shell_words(&command_line(&peer, &g, &req())),
            "qemu-system-ppc64 -M pseries,x-vof=on -cpu power8 -accel tcg,thread=multi -smp 4 -m 2G -nographic \
             -no-reboot -vga none -kernel vmlinux -initrd initrd.cpio -append 'console=hvc0 quiet jobs=4'"
        );
        assert_eq!(g.bootargs_template(), "console=hvc0 quiet jobs={N}");
    }

    #[test]
    fn version_strategy() {
        assert_eq!(
            strategy_of_version("ppc64emu 0.1.0 (strategy: per-cpu-lock)"),
            Some("per-cpu-lock")
        );
        assert_eq!(strategy_of_version("QEMU emulator version 7.2.15"), None);
    }
}
