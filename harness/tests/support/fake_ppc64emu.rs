//! A stand-in for ppc64emu (and for a qemu-style peer) used by lockscale's test suite.
//!
//! It accepts the emulator's command line, sleeps briefly, writes a run report and prints the
//! guest's result line, without emulating anything. The reported guest time is synthetic
//! (computed, not measured), so tests never depend on timing. Its behaviour is steered by
//! environment variables:
//!
//! - `FAKE_EMU_SLEEP_MS`: real time each run takes (default 5).
//! - `FAKE_EMU_T1`: guest seconds at N = 1 (default 2.0); at N it is T1 · (0.1 + 0.9 / N).
//! - `FAKE_EMU_SLOW`: `variant=factor,…` multiplies the guest time of a variant.
//! - `FAKE_EMU_NOISE`: relative noise amplitude of the guest time (default 0.01).
//! - `FAKE_EMU_FAIL`: `variant/N/kind,…` (`*` matches anything); kind is `checksum` (wrong
//!   checksum), `noresult` (exits 0 without a result line), `hang` (sleeps past the timeout),
//!   `exit` (result line, then exit code 1), `error` (MKBENCH-ERROR line).
//! - `FAKE_EMU_SERIAL`: `fraction[,variant=fraction…]` switches to a simulated lock: the run is
//!   `FAKE_EMU_CYCLES` (default 4000) cycles of guest work, each an exponentially distributed
//!   compute phase and then a hold of one FIFO lock (the BQL), so that the lock's share of the
//!   work at N = 1 is the fraction. N threads share the cycles; the guest time is when the last
//!   one finishes (a discrete-event simulation, no cores limit). The report's `bql.exec_loop`
//!   (70%) and `bql.hcall` (30%) carry the simulated holds (with `--sync-profile`, else 0 as
//!   in ppc64emu) and waits.
//!   `cpus` (a result line with the wrong vCPU count) is for the Linux form only.
//! - `FAKE_EMU_REPORT`: `full` (default), `none`, `garbage` or `partial`.
//! - With `-initrd` it answers as a Linux guest (workloads/linux/init.sh): `LINUX-MAKE-RESULT`
//!   with `workload=` `units=` `size=` from `FAKE_EMU_LINUX` (`workload/units/size`, default
//!   `linux-make/2/2`), or `LINUX-MAKE-ERROR` for the `error` kind.
//! - `FAKE_EMU_LOG`: file to which every run appends `variant N`.
//! - `FAKE_EMU_PIDS`: file to which every run appends its process id.
//! - `FAKE_EMU_ARGV`: file to which every run appends its whole command line.
//! - `--clock host|virtual` and `--quantum DURATION` are checked as ppc64emu checks them (exit 2
//!   with a message on bad input; default quantum 500 µs) and echoed into the report's
//!   `"clock"`; a virtual run's report adds per vCPU `virtual_ns` and `cpu_ns` and per lock site
//!   `virtual_wait_ns` (in the default report: `bql.hcall` waits longest in virtual time for
//!   baseline, `bql.exec_loop` for the others, unlike the host-time waits).
//!   `FAKE_EMU_CLOCK_REPORT=host|virtual|none` makes the report claim another clock (or none).
//!
//! The variant is the part of the program name after `ppc64emu-` (tests link the binary under
//! per-variant names), else `FAKE_EMU_STRATEGY`, else `fake`.

use std::io::Write;
use std::time::Duration;

/// Replaced by the test suite when this source is built as a real `ppc64emu` crate.
const BUILD_STRATEGY: &str = "";
/// Replaced by the test suite to make one revision of that crate slower than another.
const BUILD_SLOWDOWN: f64 = 1.0;

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn variant(argv0: &str) -> String {
    if !BUILD_STRATEGY.is_empty() {
        return BUILD_STRATEGY.to_string();
    }
    let name = std::path::Path::new(argv0)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(v) = name.strip_prefix("ppc64emu-") {
        return v.to_string();
    }
    if name.starts_with("qemu") {
        return name;
    }
    std::env::var("FAKE_EMU_STRATEGY").unwrap_or_else(|_| "fake".into())
}

fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// xorshift64*: the simulation's random numbers (seeded per run).
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545f4914f6cdd1d) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.unit().ln()
    }
}

/// What the simulated lock did in one run.
struct Simulated {
    elapsed: f64,
    hold: f64,
    wait: f64,
    contended: u64,
}

/// N threads take `cycles` cycles of work from a shared counter; each cycle computes, then
/// holds the FIFO lock. The demands per run are `(1 - serial) * t1` and `serial * t1`.
fn simulate(n: u32, cycles: u64, t1: f64, serial: f64, seed: u64) -> Simulated {
    let mut rng = Rng(seed | 1);
    let (z, d) = (
        (1.0 - serial) * t1 / cycles as f64,
        serial * t1 / cycles as f64,
    );
    // Pending arrivals at the lock: (time, thread); the earliest is served next (FIFO).
    let mut arrivals: Vec<f64> = Vec::new();
    let mut assigned = 0u64;
    for _ in 0..n.min(cycles as u32) {
        arrivals.push(rng.exp(z));
        assigned += 1;
    }
    let (mut free_at, mut end, mut hold, mut wait, mut contended) =
        (0.0f64, 0.0f64, 0.0, 0.0, 0u64);
    while !arrivals.is_empty() {
        let (i, &at) = arrivals
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .unwrap_or((0, &0.0));
        let start = at.max(free_at);
        if start > at {
            contended += 1;
            wait += start - at;
        }
        let h = rng.exp(d);
        hold += h;
        free_at = start + h;
        end = end.max(free_at);
        if assigned < cycles {
            arrivals[i] = free_at + rng.exp(z);
            assigned += 1;
        } else {
            arrivals.swap_remove(i);
        }
    }
    Simulated {
        elapsed: end,
        hold,
        wait,
        contended,
    }
}

/// The serial fraction `FAKE_EMU_SERIAL` gives variant `v`, if any.
fn serial_for(v: &str) -> Option<f64> {
    let spec = std::env::var("FAKE_EMU_SERIAL").ok()?;
    let mut default = None;
    for item in spec.split(',') {
        match item.split_once('=') {
            Some((k, f)) if k == v => return f.parse().ok(),
            Some(_) => {}
            None => default = item.parse().ok(),
        }
    }
    default
}

/// The Linux guest's console: its result line, or its error line for the `error` kind.
fn linux_result(smp: u32, jobs: u64, elapsed: f64, fail: Option<&str>) {
    let spec = std::env::var("FAKE_EMU_LINUX").unwrap_or_else(|_| "linux-make/2/2".into());
    let mut it = spec.split('/');
    let (workload, units, size) = (
        it.next().unwrap_or("linux-make"),
        it.next().unwrap_or("2"),
        it.next().unwrap_or("2"),
    );
    match fail {
        Some("noresult") => return,
        Some("error") => {
            println!("LINUX-MAKE-ERROR make -j{jobs} failed with status 2");
            std::process::exit(1);
        }
        _ => {}
    }
    let cpus = if fail == Some("cpus") { smp + 1 } else { smp };
    let mut checksum = format!("{:016x}", fnv(&spec)).repeat(4);
    if fail == Some("checksum") {
        checksum.replace_range(0..3, "bad");
    }
    println!(
        "LINUX-MAKE-RESULT cpus={cpus} jobs={jobs} workload={workload} units={units} size={size} \
         elapsed_ns={} checksum={checksum} compiles=7",
        (elapsed * 1e9) as u64
    );
    if fail == Some("exit") {
        std::process::exit(1);
    }
}

/// Bad command-line input, as ppc64emu answers it: a message and exit code 2.
fn usage(msg: &str) -> ! {
    eprintln!("ppc64emu: {msg}");
    std::process::exit(2);
}

/// `500us`, `2ms`, `1000000ns`, `1s` (ppc64emu's `--quantum`).
fn parse_duration_ns(v: &str) -> Result<u64, String> {
    let split = v
        .find(|c: char| c.is_alphabetic())
        .ok_or_else(|| format!("'{v}' has no unit (ns, us, ms or s)"))?;
    let (num, unit) = v.split_at(split);
    let x: f64 = num
        .parse()
        .map_err(|_| format!("'{num}' is not a number"))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(format!("unknown unit '{unit}'")),
    };
    let ns = x * scale;
    if !ns.is_finite() || ns < 0.0 {
        return Err(format!("'{v}' is not a duration"));
    }
    Ok(ns.round() as u64)
}

fn failure_for(v: &str, n: u32) -> Option<String> {
    let spec = std::env::var("FAKE_EMU_FAIL").ok()?;
    for rule in spec.split(',') {
        let parts: Vec<&str> = rule.split('/').collect();
        if parts.len() != 3 {
            continue;
        }
        let vm = parts[0] == "*" || parts[0] == v;
        let nm = parts[1] == "*" || parts[1].parse::<u32>().ok() == Some(n);
        if vm && nm {
            return Some(parts[2].to_string());
        }
    }
    None
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let v = variant(&args[0]);
    if args.iter().any(|a| a == "--version") {
        println!("ppc64emu 0.0.0-fake (strategy: {v})");
        return;
    }
    let mut smp = 1u32;
    let mut append = String::new();
    let mut report = None;
    let mut timeout = None;
    let mut kernel = None;
    let mut initrd = None;
    let mut clock = "host".to_string();
    let mut quantum: Option<u64> = None;
    let mut i = 1;
    while i < args.len() {
        let next = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "-smp" => smp = next.split(',').next().unwrap_or("1").parse().unwrap_or(1),
            "-append" => append = next,
            "--report" => report = Some(next),
            "--timeout" => timeout = next.parse::<f64>().ok(),
            "-kernel" => kernel = Some(next),
            "-initrd" => initrd = Some(next),
            "--clock" => clock = next,
            "--quantum" => match parse_duration_ns(&next) {
                Ok(ns) if ns > 0 && ns <= 1_000_000_000 => quantum = Some(ns),
                Ok(_) => usage(&format!(
                    "--quantum {next}: must be above 0 and at most 1 s"
                )),
                Err(e) => usage(&format!("--quantum {next}: {e}")),
            },
            "-M" | "-cpu" | "-accel" | "-m" | "-bios" | "--pin" => {}
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    if clock != "host" && clock != "virtual" {
        usage(&format!("--clock {clock}: expected host or virtual"));
    }
    if quantum.is_some() && clock == "host" {
        usage("--quantum needs --clock virtual");
    }
    let virtual_clock = clock == "virtual";
    let quantum_ns = quantum.unwrap_or(500_000);
    if let Ok(path) = std::env::var("FAKE_EMU_ARGV")
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(f, "{}", args.join(" "));
    }
    if let Some(k) = &kernel
        && !std::path::Path::new(k).exists()
    {
        eprintln!("fake-ppc64emu: cannot open kernel {k}");
        std::process::exit(1);
    }
    let kv: std::collections::HashMap<&str, &str> = append
        .split_whitespace()
        .filter_map(|t| t.split_once('='))
        .collect();
    let get = |k: &str, d: u64| kv.get(k).and_then(|v| v.parse().ok()).unwrap_or(d);
    let (jobs, units, size, seed) = (
        get("jobs", smp as u64),
        get("units", 8),
        get("size", 10),
        get("seed", 1),
    );

    if let Ok(log) = std::env::var("FAKE_EMU_LOG")
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
    {
        let _ = writeln!(f, "{v} {smp}");
    }
    if let Ok(path) = std::env::var("FAKE_EMU_PIDS")
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(f, "{}", std::process::id());
    }
    let fail = failure_for(&v, smp);
    println!("mkbench: {smp} cpus, jobs={jobs} units={units} size={size} seed={seed}");
    std::thread::sleep(Duration::from_millis(
        env_f64("FAKE_EMU_SLEEP_MS", 5.0) as u64
    ));

    if fail.as_deref() == Some("hang") {
        match timeout {
            Some(t) => {
                std::thread::sleep(Duration::from_secs_f64(t));
                eprintln!("ppc64emu: guest did not power off within {t} s");
                std::process::exit(124);
            }
            None => loop {
                std::thread::sleep(Duration::from_secs(1));
            },
        }
    }

    // Synthetic guest time: Amdahl-like curve, per-variant factor, a little noise.
    let t1 = env_f64("FAKE_EMU_T1", 2.0);
    let slow: f64 = std::env::var("FAKE_EMU_SLOW")
        .ok()
        .and_then(|s| {
            s.split(',').find_map(|kv| {
                kv.split_once('=')
                    .filter(|(k, _)| *k == v)
                    .and_then(|(_, f)| f.parse().ok())
            })
        })
        .unwrap_or(1.0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let r = (fnv(&format!("{}{nanos}", std::process::id())) % 10_000) as f64 / 10_000.0 * 2.0 - 1.0;
    let noise = env_f64("FAKE_EMU_NOISE", 0.01);
    let serial = serial_for(&v);
    let cycles = env_f64("FAKE_EMU_CYCLES", 4000.0).max(1.0) as u64;
    let sim = serial.map(|f| {
        simulate(
            smp,
            cycles,
            t1 * slow * BUILD_SLOWDOWN,
            f,
            fnv(&format!("{}{nanos}", std::process::id())),
        )
    });
    let elapsed = match &sim {
        Some(s) => s.elapsed,
        None => t1 * (0.1 + 0.9 / smp as f64) * slow * BUILD_SLOWDOWN * (1.0 + noise * r),
    };
    let tb_hz: u64 = 512_000_000;
    let elapsed_tb = (elapsed * tb_hz as f64) as u64;

    let mut checksum = fnv(&format!("{units}/{size}/{seed}"));
    if fail.as_deref() == Some("checksum") {
        checksum ^= 0xbad;
    }

    if let Some(path) = report {
        let mode = std::env::var("FAKE_EMU_REPORT").unwrap_or_else(|_| "full".into());
        let n = smp as u64;
        let profiled = args.iter().any(|a| a == "--sync-profile");
        // The clock as the report states it (`FAKE_EMU_CLOCK_REPORT` makes it lie or omit it).
        let claimed = std::env::var("FAKE_EMU_CLOCK_REPORT").unwrap_or_else(|_| clock.clone());
        let clock_json = match claimed.as_str() {
            "none" => String::new(),
            "virtual" => {
                format!("\"clock\": {{\"kind\": \"virtual\", \"quantum_ns\": {quantum_ns}}}, ")
            }
            k => format!("\"clock\": {{\"kind\": \"{k}\"}}, "),
        };
        // Virtual waits per lock site (ns), in virtual runs only.
        let vwait = |ns: u64| {
            if virtual_clock {
                format!(", \"virtual_wait_ns\": {ns}")
            } else {
                String::new()
            }
        };
        let text = match mode.as_str() {
            "none" => None,
            _ if sim.is_some() => {
                let s = sim.as_ref().expect("simulated");
                let site = |share: f64| {
                    format!(
                        "{{\"acquisitions\": {}, \"contended\": {}, \"wait_ns\": {}, \"max_wait_ns\": 0, \"hold_ns\": {}{}}}",
                        (cycles as f64 * share) as u64,
                        (s.contended as f64 * share) as u64,
                        (s.wait * share * 1e9) as u64,
                        if profiled {
                            (s.hold * share * 1e9) as u64
                        } else {
                            0
                        },
                        vwait((s.wait * share * 1e9) as u64)
                    )
                };
                Some(format!(
                    "{{\"strategy\": \"{v}\", \"smp\": {smp}, \"sync_profile\": {profiled}, {clock_json}\"guest_elapsed_s\": {elapsed}, \"locks\": {{\
                     \"bql.exec_loop\": {}, \"bql.hcall\": {}, \"cpu_lock\": {{\"acquisitions\": 5000, \"contended\": 2, \"wait_ns\": 1000, \"hold_ns\": 0}}}}}}",
                    site(0.7),
                    site(0.3)
                ))
            }
            "garbage" => Some("{ not json".to_string()),
            "partial" => Some(format!("{{\"strategy\": \"{v}\", \"smp\": {smp}}}")),
            _ => {
                let bql_wait = if v == "baseline" {
                    4_000_000 * n
                } else {
                    1_000_000 * n
                };
                // Per vCPU: its virtual clock at the end (the guest time) and 90% of it in
                // thread CPU time, in virtual runs.
                let vtimes = |i: u32| {
                    if virtual_clock {
                        let vt = (elapsed * 1e9) as u64 - i as u64;
                        format!(", \"virtual_ns\": {vt}, \"cpu_ns\": {}", vt / 10 * 9)
                    } else {
                        String::new()
                    }
                };
                let vcpus: Vec<String> = (0..smp)
                    .map(|i| {
                        format!(
                            "{{\"index\": {i}, \"insns\": {}{}}}",
                            1_000_000 + i,
                            vtimes(i)
                        )
                    })
                    .collect();
                // In virtual time baseline waits longest at bql.hcall, the others at
                // bql.exec_loop: the other way round from their host-time waits.
                let (vw_exec, vw_hcall) = if v == "baseline" {
                    (3_000_000 * n, 5_000_000 * n)
                } else {
                    (3_000_000 * n, 500_000 * n)
                };
                Some(format!(
                    "{{\"strategy\": \"{v}\", \"tlb_flush_mode\": \"async\", \"accel\": \"jit\", \"smp\": {smp}, \"sync_profile\": {profiled}, {clock_json}\
                     \"host_wall_s\": {elapsed}, \"guest_elapsed_s\": {elapsed}, \"vcpus\": [{}], \"locks\": {{\
                     \"bql.exec_loop\": {{\"acquisitions\": {a}, \"contended\": {c}, \"wait_ns\": {bql_wait}, \"max_wait_ns\": 50000, \"hold_ns\": 9000000{}}}, \
                     \"bql.hcall\": {{\"acquisitions\": {a2}, \"contended\": {c2}, \"wait_ns\": 2000000, \"max_wait_ns\": 20000, \"hold_ns\": 3000000{}}}, \
                     \"bql.tlb_flush_item\": {{\"acquisitions\": 100, \"contended\": 5, \"wait_ns\": 100000, \"max_wait_ns\": 9000, \"hold_ns\": 200000{}}}, \
                     \"cpu_lock\": {{\"acquisitions\": 5000, \"contended\": 2, \"wait_ns\": 1000{}}}}}}}",
                    vcpus.join(", "),
                    vwait(vw_exec),
                    vwait(vw_hcall),
                    vwait(100_000 * n),
                    vwait(0),
                    a = 1000 * n,
                    c = 100 * n,
                    a2 = 3000 * n,
                    c2 = 50 * n,
                ))
            }
        };
        if let Some(t) = text {
            let _ = std::fs::write(&path, t);
        }
    }

    if initrd.is_some() {
        linux_result(smp, jobs, elapsed, fail.as_deref());
        return;
    }
    match fail.as_deref() {
        Some("noresult") => {
            println!("mkbench: powering off");
            return;
        }
        Some("error") => {
            println!("MKBENCH-ERROR unit 3: object checksum mismatch");
            std::process::exit(1);
        }
        _ => {}
    }
    println!("MKBENCH-STATS procs={} pages={}", units + 1, units * 16);
    println!(
        "MKBENCH-RESULT cpus={smp} jobs={jobs} units={units} size={size} checksum=0x{checksum:016x} elapsed_tb={elapsed_tb} \
         tb_hz={tb_hz} faults={} hcalls={} flush_hcalls={} ipis={} ticks={}",
        units * 40,
        units * 90,
        units * 10,
        smp * 7,
        (elapsed * 250.0) as u64 * smp as u64
    );
    if fail.as_deref() == Some("exit") {
        std::process::exit(1);
    }
}
