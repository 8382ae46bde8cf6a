//! The system emulator's configuration and its command-line parser.
//!
//! Scripts written for `qemu-system-ppc64` run unchanged for the pseries subset (docs/machine.md),
//! so QEMU's options keep QEMU's spelling and value syntax; our own options are `--long`
//! (`--name=value` works too). Anything else is refused with a message naming it.

use super::MAX_CPUS;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// How a global TLB flush reaches the other vCPUs (docs/locking.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbFlushMode {
    /// Self now, others queued, nobody waits (QEMU 7.1-9.0, the posted chart).
    Async,
    /// The source's own flush runs as exclusive work (QEMU 4.0-7.0).
    Synced,
    /// Synced, and the block ends at the flushing instruction (QEMU 9.1+).
    SyncedExit,
}

impl TlbFlushMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TlbFlushMode::Async => "async",
            TlbFlushMode::Synced => "synced",
            TlbFlushMode::SyncedExit => "synced-exit",
        }
    }
}

/// How guest code is executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccelMode {
    Jit,
    Interp,
}

impl AccelMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AccelMode::Jit => "jit",
            AccelMode::Interp => "interp",
        }
    }
}

/// Which clock the guest's time and the lock statistics run on (`--clock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockMode {
    /// The host's: guest time is wall time.
    Host,
    /// Virtual host time (sync/vclock/): every vCPU as if on a core of its own; no vCPU
    /// more than `quantum_ns` ahead of the slowest runnable one.
    Virtual { quantum_ns: u64 },
}

/// The default quantum of virtual time (docs/locking.md gives the measured trade-off): 2 ms.
/// Where the vCPU threads share host cores, a vCPU's turn on a core lasts about 1.5 quanta,
/// and each turn starts on caches the others refilled: at 500 µs the closed-form guest's BQL
/// holds at N = 28 on one core took 1.34 × their N = 1 CPU time, at 2 ms 1.03 ×.
pub const DEFAULT_QUANTUM_NS: u64 = 2_000_000;

impl ClockMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ClockMode::Host => "host",
            ClockMode::Virtual { .. } => "virtual",
        }
    }
}

/// Parses a duration: a number with ns, us, ms or s (`500us`, `2ms`, `0.5ms`).
pub fn parse_duration_ns(v: &str) -> Result<u64, String> {
    let v = v.trim();
    let split = v
        .find(|c: char| c.is_ascii_alphabetic())
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
        _ => return Err(format!("unknown unit '{unit}' (ns, us, ms or s)")),
    };
    let ns = x * scale;
    if !ns.is_finite() || ns < 0.0 {
        return Err(format!("'{v}' is not a duration"));
    }
    Ok(ns.round() as u64)
}

/// Pinning of vCPU threads to host cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinMode {
    /// vCPU i on host core i (as the posted runs were pinned).
    Compact,
    None,
}

impl MachineConfig {
    /// Host cores for the vCPU threads: `--host-cores`, else those this process may run on.
    pub fn host_cores(&self) -> usize {
        self.host_cores
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |c| c.get()))
    }
}

impl PinMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PinMode::Compact => "compact",
            PinMode::None => "none",
        }
    }
}

/// Everything the command line decides about a run.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineConfig {
    pub smp: usize,
    pub ram_bytes: u64,
    pub kernel: Option<PathBuf>,
    pub initrd: Option<PathBuf>,
    pub append: String,
    /// Raw image loaded at 0; the boot CPU then starts at 0x100 (as QEMU's `-bios`).
    pub bios: Option<PathBuf>,
    pub report: Option<PathBuf>,
    pub tlb_flush_mode: TlbFlushMode,
    pub tlb_flush_coalesce: bool,
    pub accel: AccelMode,
    /// Interpreted executions of a block before the JIT translates it (0: at once; `None`:
    /// the default of the first tier).
    pub jit_threshold: Option<u32>,
    /// The JIT's translating tiers (`--jit-tiers`).
    pub jit_tiers: crate::jit::Tiers,
    /// Baseline executions of a block before it moves to Cranelift (`--jit-promote`).
    pub jit_promote: u32,
    /// Code bytes of a vCPU's JIT module after which the whole code cache is flushed.
    pub jit_cache_limit: u64,
    pub sync_profile: bool,
    /// `--clock`/`--quantum`.
    pub clock: ClockMode,
    /// `--line-cost`: virtual time charged to a lock acquirer whose lock was last held by
    /// another thread (sync/vclock/); 0 until a many-core host measures it.
    pub line_cost_ns: u64,
    /// `--host-cores`: host cores the vCPU threads of a virtual run share (sync/vclock/
    /// cores.rs); `None`: those the process may run on.
    pub host_cores: Option<usize>,
    pub timeout: Option<Duration>,
    /// Write the device tree the machine would boot with, then exit.
    pub dump_dtb: Option<PathBuf>,
    pub pin: PinMode,
    /// system-reboot exits (status 0) instead of resetting the machine.
    pub no_reboot: bool,
    /// Accepted for QEMU compatibility; the hvterm is always on stdin/stdout.
    pub nographic: bool,
    pub serial_stdio: bool,
    pub nodefaults: bool,
    pub display_none: bool,
    /// `-rtc base=`: what RTAS get-time-of-day starts from.
    pub rtc: RtcBase,
    /// Options that were accepted but have no effect, for the user to see.
    pub warnings: Vec<String>,
}

/// Where the partition's time-of-day clock starts (`-rtc base=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtcBase {
    /// Host time in UTC (the default).
    Utc,
    /// Host time in the host's local time zone (what a guest that keeps local time expects).
    LocalTime,
    /// This date, given as seconds since the epoch (UTC), at the start of the run.
    At(u64),
}

impl RtcBase {
    /// The clock of a run that starts at host time `host_now` (since the epoch, UTC).
    pub fn clock(self, host_now: Duration) -> crate::machine::pseries::rtas::Rtc {
        use crate::machine::pseries::rtas::Rtc;
        match self {
            RtcBase::Utc => Rtc::default(),
            RtcBase::LocalTime => Rtc {
                offset_ns: local_utc_offset(host_now.as_secs() as i64) as i128 * 1_000_000_000,
            },
            RtcBase::At(secs) => Rtc::starting_at(host_now, Duration::from_secs(secs)),
        }
    }
}

/// Seconds the host's local time is ahead of UTC at `unix` (0 if unknown).
fn local_utc_offset(unix: i64) -> i64 {
    let t = unix as libc::time_t;
    // SAFETY: localtime_r writes only the tm we pass; a zeroed tm is valid.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            0
        } else {
            tm.tm_gmtoff as i64
        }
    }
}

/// QEMU's default RAM size for pseries.
pub const DEFAULT_RAM: u64 = 512 << 20;
/// RAM must be a whole number of these (QEMU's pseries memory block size).
pub const RAM_GRANULE: u64 = 256 << 20;
/// Most RAM accepted.
pub const MAX_RAM: u64 = 1 << 40;

impl Default for MachineConfig {
    fn default() -> Self {
        Self {
            smp: 1,
            ram_bytes: DEFAULT_RAM,
            kernel: None,
            initrd: None,
            append: String::new(),
            bios: None,
            report: None,
            tlb_flush_mode: TlbFlushMode::Async,
            tlb_flush_coalesce: false,
            accel: AccelMode::Jit,
            jit_threshold: None,
            jit_tiers: crate::jit::DEFAULT_TIERS,
            jit_promote: crate::jit::DEFAULT_PROMOTE_THRESHOLD,
            jit_cache_limit: crate::jit::CODE_CACHE_LIMIT,
            sync_profile: false,
            clock: ClockMode::Host,
            line_cost_ns: 0,
            host_cores: None,
            timeout: None,
            dump_dtb: None,
            pin: PinMode::None,
            no_reboot: false,
            nographic: false,
            serial_stdio: false,
            nodefaults: false,
            display_none: false,
            rtc: RtcBase::Utc,
            warnings: Vec::new(),
        }
    }
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Run(Box<MachineConfig>),
    Help,
    Version,
}

/// A command line we cannot accept; the message names the offending option.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn err<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// Options that take no value.
const FLAGS: &[&str] = &[
    "nodefaults",
    "no-reboot",
    "nographic",
    "tlb-flush-coalesce",
    "sync-profile",
    "help",
    "h",
    "version",
];
/// Options that take a value.
const VALUED: &[&str] = &[
    "smp",
    "m",
    "M",
    "machine",
    "cpu",
    "accel",
    "display",
    "serial",
    "bios",
    "kernel",
    "initrd",
    "append",
    "report",
    "tlb-flush-mode",
    "clock",
    "quantum",
    "line-cost",
    "host-cores",
    "timeout",
    "dump-dtb",
    "pin",
    "jit-threshold",
    "jit-cache-limit",
    "jit-tiers",
    "jit-promote",
    "rtc",
];

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, UsageError> {
    let mut cfg = MachineConfig::default();
    // `--quantum` may come before `--clock virtual`.
    let mut quantum: Option<u64> = None;
    let mut line_cost = false;
    let mut i = 0;
    while i < args.len() {
        let raw = args[i].as_str();
        i += 1;
        let body = match raw.strip_prefix("--").or_else(|| raw.strip_prefix('-')) {
            Some(b) if !b.is_empty() && !b.starts_with('-') => b,
            _ => {
                return err(format!(
                    "unexpected argument '{raw}': options start with '-' (see --help)"
                ));
            }
        };
        // `--name=value` for our long options; QEMU's single-dash options never use '='.
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) if raw.starts_with("--") => (n, Some(v.to_string())),
            _ => (body, None),
        };
        if FLAGS.contains(&name) {
            if inline.is_some() {
                return err(format!("option '{raw}' takes no value"));
            }
            match name {
                "help" | "h" => return Ok(Command::Help),
                "version" => return Ok(Command::Version),
                "nodefaults" => cfg.nodefaults = true,
                "no-reboot" => cfg.no_reboot = true,
                "nographic" => cfg.nographic = true,
                "tlb-flush-coalesce" => cfg.tlb_flush_coalesce = true,
                "sync-profile" => cfg.sync_profile = true,
                _ => unreachable!(),
            }
            continue;
        }
        if !VALUED.contains(&name) {
            return err(format!("unknown option '{raw}' (see --help)"));
        }
        let value = match inline {
            Some(v) => v,
            None => match args.get(i) {
                Some(v) => {
                    i += 1;
                    v.clone()
                }
                None => return err(format!("option '{raw}' needs a value")),
            },
        };
        let v = value.as_str();
        match name {
            "smp" => cfg.smp = parse_smp(v, &mut cfg.warnings)?,
            "rtc" => cfg.rtc = parse_rtc(v, &mut cfg.warnings)?,
            "m" => cfg.ram_bytes = parse_memory(v, &mut cfg.warnings)?,
            "M" | "machine" => parse_machine(v, &mut cfg)?,
            "cpu" => {
                if !matches!(v.to_ascii_lowercase().as_str(), "power8" | "power8_v2.0") {
                    return err(format!(
                        "-cpu {v}: only POWER8 (PVR 0x004d0200) is emulated"
                    ));
                }
            }
            "accel" => parse_accel(v, &mut cfg)?,
            "display" => {
                if v != "none" {
                    return err(format!(
                        "-display {v}: there is no display; only '-display none' is accepted"
                    ));
                }
                cfg.display_none = true;
            }
            "serial" => match v {
                "stdio" => cfg.serial_stdio = true,
                "mon:stdio" => {
                    cfg.serial_stdio = true;
                    cfg.warnings.push(
                        "-serial mon:stdio: there is no monitor; the console is on stdio".into(),
                    );
                }
                _ => {
                    return err(format!(
                        "-serial {v}: the console (hvterm) can only be on stdio"
                    ));
                }
            },
            "bios" => cfg.bios = Some(path(raw, v)?),
            "kernel" => cfg.kernel = Some(path(raw, v)?),
            "initrd" => cfg.initrd = Some(path(raw, v)?),
            "append" => cfg.append = value,
            "report" => cfg.report = Some(path(raw, v)?),
            "jit-threshold" => {
                cfg.jit_threshold = Some(v.parse().map_err(|_| {
                    UsageError(format!(
                        "--jit-threshold {v}: expected a count (0 = translate at once)"
                    ))
                })?)
            }
            "jit-tiers" => {
                cfg.jit_tiers = crate::jit::Tiers::parse(v)
                    .map_err(|e| UsageError(format!("--jit-tiers {v}: {e}")))?
            }
            "jit-promote" => {
                cfg.jit_promote = v
                    .parse()
                    .map_err(|_| UsageError(format!("--jit-promote {v}: expected a count")))?
            }
            "jit-cache-limit" => {
                cfg.jit_cache_limit = crate::jit::parse_cache_limit(v)
                    .map_err(|e| UsageError(format!("--jit-cache-limit {v}: {e}")))?
            }
            "dump-dtb" => cfg.dump_dtb = Some(path(raw, v)?),
            "tlb-flush-mode" => {
                cfg.tlb_flush_mode = match v {
                    "async" => TlbFlushMode::Async,
                    "synced" => TlbFlushMode::Synced,
                    "synced-exit" => TlbFlushMode::SyncedExit,
                    _ => {
                        return err(format!(
                            "--tlb-flush-mode {v}: expected async, synced or synced-exit"
                        ));
                    }
                }
            }
            "clock" => {
                cfg.clock = match (v, cfg.clock) {
                    ("host", _) => ClockMode::Host,
                    ("virtual", ClockMode::Virtual { quantum_ns }) => {
                        ClockMode::Virtual { quantum_ns }
                    }
                    ("virtual", ClockMode::Host) => ClockMode::Virtual {
                        quantum_ns: quantum.unwrap_or(DEFAULT_QUANTUM_NS),
                    },
                    _ => return err(format!("--clock {v}: expected host or virtual")),
                }
            }
            "quantum" => {
                let ns =
                    parse_duration_ns(v).map_err(|e| UsageError(format!("--quantum {v}: {e}")))?;
                if ns == 0 || ns > 1_000_000_000 {
                    return err(format!("--quantum {v}: must be above 0 and at most 1 s"));
                }
                quantum = Some(ns);
                if let ClockMode::Virtual { quantum_ns } = &mut cfg.clock {
                    *quantum_ns = ns;
                }
            }
            "line-cost" => {
                let ns = parse_duration_ns(v)
                    .map_err(|e| UsageError(format!("--line-cost {v}: {e}")))?;
                if ns > 100_000 {
                    return err(format!("--line-cost {v}: must be at most 100 us"));
                }
                cfg.line_cost_ns = ns;
                line_cost = true;
            }
            "host-cores" => {
                let n: usize = v.parse().map_err(|_| {
                    UsageError(format!("--host-cores {v}: expected a number of cores"))
                })?;
                if !(1..=4096).contains(&n) {
                    return err(format!("--host-cores {v}: must be 1 to 4096"));
                }
                cfg.host_cores = Some(n);
            }
            "timeout" => {
                let secs: f64 = v.parse().map_err(|_| {
                    UsageError(format!("--timeout {v}: expected a number of seconds"))
                })?;
                if !(secs > 0.0 && secs < 1e9) {
                    return err(format!(
                        "--timeout {v}: must be a positive number of seconds"
                    ));
                }
                cfg.timeout = Some(Duration::from_secs_f64(secs));
            }
            "pin" => {
                cfg.pin = match v {
                    "compact" => PinMode::Compact,
                    "none" => PinMode::None,
                    _ => return err(format!("--pin {v}: expected compact or none")),
                }
            }
            _ => unreachable!(),
        }
    }
    if quantum.is_some() && cfg.clock == ClockMode::Host {
        return err("--quantum needs --clock virtual");
    }
    if line_cost && cfg.clock == ClockMode::Host {
        return err("--line-cost needs --clock virtual");
    }
    if cfg.host_cores.is_some() && cfg.clock == ClockMode::Host {
        return err("--host-cores needs --clock virtual");
    }
    Ok(Command::Run(Box::new(cfg)))
}

fn path(opt: &str, v: &str) -> Result<PathBuf, UsageError> {
    if v.is_empty() {
        return err(format!("option '{opt}' needs a file name"));
    }
    Ok(PathBuf::from(v))
}

/// Checks what a run (not a `--dump-dtb`) needs on top of well-formed options.
pub fn validate_for_run(cfg: &MachineConfig) -> Result<(), UsageError> {
    if cfg.kernel.is_none() && cfg.bios.is_none() {
        return err("no guest: give -kernel FILE (and/or -bios FILE)");
    }
    validate_common(cfg)
}

/// Checks that hold for every command.
pub fn validate_common(cfg: &MachineConfig) -> Result<(), UsageError> {
    if cfg.kernel.is_none() {
        if cfg.initrd.is_some() {
            return err("-initrd needs -kernel");
        }
        if !cfg.append.is_empty() {
            return err("-append needs -kernel");
        }
    }
    Ok(())
}

/// `-smp [cpus=]N[,maxcpus=M][,sockets=S][,dies=D][,clusters=C][,cores=K][,threads=1]`.
fn parse_smp(v: &str, warnings: &mut Vec<String>) -> Result<usize, UsageError> {
    let bad = |what: &str| UsageError(format!("-smp {v}: {what}"));
    let num = |s: &str| {
        s.parse::<u64>()
            .map_err(|_| bad(&format!("'{s}' is not a number")))
    };
    let (mut cpus, mut maxcpus, mut topo, mut has_topo) = (None, None, 1u64, false);
    for (k, item) in v.split(',').enumerate() {
        match item.split_once('=') {
            None if k == 0 => cpus = Some(num(item)?),
            Some(("cpus", n)) => cpus = Some(num(n)?),
            Some(("maxcpus", n)) => maxcpus = Some(num(n)?),
            Some(("threads", n)) => {
                if num(n)? != 1 {
                    return Err(bad("only one thread per core is emulated (threads=1)"));
                }
            }
            Some(("sockets" | "dies" | "clusters" | "cores", n)) => {
                topo = topo.saturating_mul(num(n)?);
                has_topo = true;
            }
            _ => return Err(bad(&format!("unknown part '{item}'"))),
        }
    }
    let n = cpus.unwrap_or(topo);
    if n == 0 || n > MAX_CPUS as u64 {
        return Err(bad(&format!("the number of CPUs must be 1 to {MAX_CPUS}")));
    }
    // As on QEMU: the topology holds every possible CPU (maxcpus, else cpus).
    if has_topo && topo != maxcpus.unwrap_or(n) {
        return Err(bad(&format!(
            "sockets*dies*clusters*cores*threads = {topo} does not match {} CPUs",
            maxcpus.unwrap_or(n)
        )));
    }
    if let Some(m) = maxcpus {
        if m < n {
            return Err(bad("maxcpus is smaller than the number of CPUs"));
        }
        if m > n {
            warnings.push(format!(
                "-smp {v}: CPU hotplug is not emulated, maxcpus ignored"
            ));
        }
    }
    Ok(n as usize)
}

/// `-rtc [base=utc|localtime|DATE][,clock=host|rt|vm][,driftfix=none|slew]`; DATE is
/// `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS` (UTC), as QEMU takes it.
fn parse_rtc(v: &str, warnings: &mut Vec<String>) -> Result<RtcBase, UsageError> {
    let mut base = RtcBase::Utc;
    for item in v.split(',') {
        match item.split_once('=') {
            Some(("base", "utc")) => base = RtcBase::Utc,
            Some(("base", "localtime")) => base = RtcBase::LocalTime,
            Some(("base", date)) => {
                base = RtcBase::At(parse_date(date).ok_or_else(|| {
                    UsageError(format!("-rtc {v}: base '{date}' is not utc, localtime, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS"))
                })?)
            }
            // The guest clock runs with the host's whatever the source: the machine never
            // pauses, so host, rt and vm read alike.
            Some(("clock", "host" | "rt" | "vm")) => {}
            Some(("driftfix", "none")) => {}
            Some(("driftfix", "slew")) => warnings.push(format!("-rtc {v}: driftfix=slew ignored (it applies to an x86 RTC)")),
            _ => return err(format!("-rtc {v}: unsupported part '{item}'")),
        }
    }
    Ok(base)
}

/// Seconds since the epoch of `YYYY-MM-DD[THH:MM:SS]` (UTC).
fn parse_date(s: &str) -> Option<u64> {
    let (date, time) = s.split_once('T').unwrap_or((s, "00:00:00"));
    let d: Vec<u32> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let t: Vec<u32> = time
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let ([year, month, day], [hour, minute, second]) =
        (d[..].try_into().ok()?, t[..].try_into().ok()?);
    let c = crate::machine::pseries::rtas::CivilTime {
        year,
        month,
        day,
        hour,
        minute,
        second,
        nanos: 0,
    };
    c.to_unix().map(|d| d.as_secs())
}

/// `-m [size=]SIZE[,slots=N][,maxmem=SIZE]`; SIZE in MiB unless suffixed (K, M, G, T; a
/// decimal fraction like `1.5G` is fine).
fn parse_memory(v: &str, warnings: &mut Vec<String>) -> Result<u64, UsageError> {
    let mut size = None;
    for (k, item) in v.split(',').enumerate() {
        match item.split_once('=') {
            None if k == 0 => {
                size = Some(parse_size(item).map_err(|e| UsageError(format!("-m {v}: {e}")))?)
            }
            Some(("size", s)) => {
                size = Some(parse_size(s).map_err(|e| UsageError(format!("-m {v}: {e}")))?)
            }
            Some(("slots" | "maxmem", _)) => warnings.push(format!(
                "-m {v}: memory hotplug is not emulated, '{item}' ignored"
            )),
            _ => return err(format!("-m {v}: unknown part '{item}'")),
        }
    }
    let Some(bytes) = size else {
        return err(format!("-m {v}: no size given"));
    };
    if bytes < RAM_GRANULE || !bytes.is_multiple_of(RAM_GRANULE) {
        return err(format!(
            "-m {v}: RAM must be a non-zero multiple of 256 MiB (as on QEMU's pseries)"
        ));
    }
    if bytes > MAX_RAM {
        return err(format!("-m {v}: at most 1 TiB of RAM"));
    }
    Ok(bytes)
}

/// A size with an optional binary suffix; no suffix means MiB.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let digits_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(digits_end);
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "m" | "mb" | "mib" => 20,
        "b" => 0,
        "k" | "kb" | "kib" => 10,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("unknown size suffix '{suffix}'")),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() || frac.contains('.') || (num.contains('.') && frac.is_empty()) {
        return Err(format!("'{s}' is not a size"));
    }
    let unit = 1u128 << shift;
    let int: u128 = int.parse().map_err(|_| format!("'{s}' is not a size"))?;
    let mut bytes = int
        .checked_mul(unit)
        .ok_or_else(|| format!("'{s}' is too large"))?;
    if !frac.is_empty() {
        if frac.len() > 9 {
            return Err(format!("'{s}': too many decimals"));
        }
        let f: u128 = frac.parse().map_err(|_| format!("'{s}' is not a size"))?;
        let scale = 10u128.pow(frac.len() as u32);
        if !(f * unit).is_multiple_of(scale) {
            return Err(format!("'{s}' is not a whole number of bytes"));
        }
        bytes += f * unit / scale;
    }
    u64::try_from(bytes).map_err(|_| format!("'{s}' is too large"))
}

/// `-M/-machine pseries[-X.Y][,prop=value…]`.
fn parse_machine(v: &str, cfg: &mut MachineConfig) -> Result<(), UsageError> {
    for (k, item) in v.split(',').enumerate() {
        let (key, val) = match item.split_once('=') {
            None if k == 0 => ("type", item),
            Some(kv) => kv,
            None => return err(format!("-machine {v}: '{item}' is not prop=value")),
        };
        match key {
            "type" => {
                if item.is_empty() || !(val == "pseries" || val.starts_with("pseries-")) {
                    return err(format!(
                        "-machine {v}: only the pseries machine is emulated"
                    ));
                }
            }
            "dumpdtb" => cfg.dump_dtb = Some(path("-machine dumpdtb", val)?),
            "accel" if val == "tcg" => {}
            "ic-mode" if val == "xics" => {}
            "x-vof" if val == "off" => {}
            "usb" | "graphics" if val == "off" => {}
            _ if key.starts_with("cap-") => {
                cfg.warnings.push(format!(
                    "-machine {item}: ignored; capabilities are fixed (POWER8, hash MMU, XICS)"
                ));
            }
            _ => return err(format!("-machine {v}: unsupported property '{item}'")),
        }
    }
    Ok(())
}

/// `-accel tcg[,thread=multi][,tb-size=N]` (QEMU) or `--accel jit|interp` (ours).
fn parse_accel(v: &str, cfg: &mut MachineConfig) -> Result<(), UsageError> {
    match v {
        "jit" => cfg.accel = AccelMode::Jit,
        "interp" => cfg.accel = AccelMode::Interp,
        _ => {
            let mut items = v.split(',');
            if items.next() != Some("tcg") {
                return err(format!(
                    "-accel {v}: expected 'tcg[,thread=multi]' (QEMU) or 'jit'/'interp' (--accel)"
                ));
            }
            for item in items {
                match item.split_once('=') {
                    Some(("thread", "multi")) => {}
                    Some(("thread", _)) => {
                        return err(format!(
                            "-accel {v}: every vCPU runs on its own thread; only thread=multi"
                        ));
                    }
                    Some(("tb-size", _)) => {
                        cfg.warnings.push(format!("-accel {v}: tb-size ignored"))
                    }
                    _ => return err(format!("-accel {v}: unsupported property '{item}'")),
                }
            }
        }
    }
    Ok(())
}

/// The text of `--help`.
pub const HELP: &str = "\
Usage: ppc64emu [OPTIONS]
       ppc64emu user PROGRAM [ARGS...]

Multi-threaded POWER8 pseries (sPAPR) system emulator. The command line is the pseries
subset of qemu-system-ppc64's, plus options of our own (--long).

Guest:
  -kernel FILE          ELF image; every PT_LOAD goes to (p_paddr & 0x0fffffff) + 0x400000,
                        execution starts at the lowest loaded address (r3 = device tree)
  -initrd FILE          initial RAM disk, placed above the kernel
  -append STRING        kernel command line (/chosen/bootargs)
  -bios FILE            raw image loaded at 0; the boot CPU starts at 0x100 (as on QEMU)

Machine:
  -smp N[,cpus=N][,maxcpus=N][,sockets=S][,dies=D][,clusters=C][,cores=K][,threads=1]
                        number of vCPUs (1-256, default 1); one thread per core
  -rtc [base=utc|localtime|YYYY-MM-DD[THH:MM:SS]][,clock=host|rt|vm][,driftfix=none]
                        where RTAS get-time-of-day starts (default utc)
  -m SIZE               RAM, e.g. 2G, 512M or 1024 (MiB); a multiple of 256 MiB (default 512M)
  -M, -machine pseries[,dumpdtb=FILE][,cap-*=...]   cap-* properties are ignored
  -cpu POWER8           the only CPU model
  -accel tcg[,thread=multi]
  -nodefaults, -display none, -serial stdio, -nographic   accepted; the console
                        (hvterm) is always on stdin/stdout
  -no-reboot            exit (status 0) when the guest reboots

Ours:
  --report FILE         write the run report (JSON) there
  --tlb-flush-mode async|synced|synced-exit   how global TLB flushes reach other vCPUs
                        (default async)
  --tlb-flush-coalesce  do not queue a flush on a vCPU that already has one pending
  --accel jit|interp    execution engine (default jit)
  --jit-tiers baseline,cranelift   the JIT's translating tiers, one or both (default
                        baseline: promotion to Cranelift costs more than it saves for now;
                        the baseline tier exists on x86-64 hosts only, else cranelift)
  --jit-threshold N     run a block N times in the interpreter before translating it
                        (default 2 with the baseline tier, else 500; 0 translates every
                        block on first execution)
  --jit-promote N       move a block from the baseline tier to Cranelift after N runs
                        there (default 100000)
  --jit-cache-limit BYTES   flush the whole code cache when a vCPU's translated code
                        passes BYTES (suffixes K, M, G: KiB, MiB, GiB; default 1G)
  --sync-profile        time lock waits and holds (counts are always kept)
  --clock host|virtual  guest time from the host's clock (default), or virtual host time:
                        each vCPU's clock runs on its thread's CPU time, locks and hand-offs
                        carry clocks, as if every vCPU had a host core of its own
  --quantum DURATION    virtual time: how far (ns, us, ms, s) a vCPU may run ahead of the
                        slowest runnable one (default 2ms; at most 1s)
  --line-cost DURATION  virtual time: charged to a vCPU taking a lock another thread held
                        last (its cache line moving between cores on a many-core host;
                        default 0, at most 100us)
  --host-cores N        virtual time: host cores the vCPU threads share (default: those
                        this process may run on); with fewer cores than vCPUs, at most N
                        vCPU threads run at once, the core going to the slowest clock
  --timeout SECS        stop the guest after SECS seconds
  --dump-dtb FILE       write the device tree the machine would boot with, and exit
  --pin compact|none    pin vCPU i to host core i (compact) or not (default none)
  --version             print the version and the locking strategy of this build
  -h, --help            print this help

Exit status:
  0    the guest powered off (or rebooted under -no-reboot), or --dump-dtb/--help/--version
  1    host-side error (unreadable or malformed kernel/initrd/bios, I/O error, emulator fault)
  2    bad command line
  3    the guest called ibm,os-term (e.g. a kernel panic)
  4    checkstop (machine check with MSR[ME] = 0)
  124  --timeout expired
";

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn run(s: &str) -> MachineConfig {
        match parse(&args(s)) {
            Ok(Command::Run(c)) => *c,
            other => panic!("{s}: {other:?}"),
        }
    }

    fn fails(s: &str, needle: &str) {
        match parse(&args(s)) {
            Err(UsageError(m)) => assert!(
                m.contains(needle),
                "{s}: message '{m}' does not name '{needle}'"
            ),
            other => panic!("{s}: accepted: {other:?}"),
        }
    }

    #[test]
    fn harness_command_line() {
        let c = run(
            "-smp 4 -m 1G -nographic -kernel k.elf -append jobs=4 --report r.json --pin compact --timeout 60",
        );
        assert_eq!(c.smp, 4);
        assert_eq!(c.ram_bytes, 1 << 30);
        assert!(c.nographic);
        assert_eq!(c.kernel.as_deref(), Some(std::path::Path::new("k.elf")));
        assert_eq!(c.append, "jobs=4");
        assert_eq!(c.report.as_deref(), Some(std::path::Path::new("r.json")));
        assert_eq!(c.pin, PinMode::Compact);
        assert_eq!(c.timeout, Some(Duration::from_secs(60)));
        assert_eq!(c.accel, AccelMode::Jit);
        assert_eq!(c.tlb_flush_mode, TlbFlushMode::Async);
        assert!(validate_for_run(&c).is_ok());
    }

    #[test]
    fn qemu_peer_command_line() {
        let c = run(
            "-M pseries,cap-htm=off,cap-ccf-assist=off -cpu power8 -accel tcg,thread=multi -smp 2 -m 2048 \
                     -nographic -no-reboot -nodefaults -display none -serial stdio -bios rom.bin -kernel k -append x",
        );
        assert_eq!((c.smp, c.ram_bytes), (2, 2 << 30));
        assert!(c.no_reboot && c.nodefaults && c.display_none && c.serial_stdio);
        assert_eq!(c.bios.as_deref(), Some(std::path::Path::new("rom.bin")));
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("cap-htm"));
        assert_eq!(
            run("-machine pseries-7.2,dumpdtb=t.dtb")
                .dump_dtb
                .as_deref(),
            Some(std::path::Path::new("t.dtb"))
        );
        assert_eq!(run("-cpu POWER8").smp, 1);
    }

    #[test]
    fn our_long_options() {
        let c = run(
            "--tlb-flush-mode synced-exit --tlb-flush-coalesce --accel interp --sync-profile --timeout=2.5 --dump-dtb=x.dtb --pin none",
        );
        assert_eq!(c.tlb_flush_mode, TlbFlushMode::SyncedExit);
        assert!(c.tlb_flush_coalesce && c.sync_profile);
        assert_eq!(c.accel, AccelMode::Interp);
        assert_eq!(c.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(c.dump_dtb.as_deref(), Some(std::path::Path::new("x.dtb")));
        assert_eq!(
            run("--tlb-flush-mode synced").tlb_flush_mode,
            TlbFlushMode::Synced
        );
        assert_eq!(run("--jit-threshold 7").jit_threshold, Some(7));
        assert_eq!(run("--jit-threshold=0").jit_threshold, Some(0));
        assert_eq!(run("").jit_threshold, None);
        assert_eq!(
            run("--jit-tiers cranelift").jit_tiers,
            crate::jit::Tiers::CRANELIFT
        );
        assert_eq!(
            run("--jit-tiers=baseline").jit_tiers,
            crate::jit::Tiers::BASELINE
        );
        assert_eq!(
            run("--jit-tiers baseline,cranelift").jit_tiers,
            crate::jit::Tiers::BOTH
        );
        assert_eq!(run("--jit-tiers both").jit_tiers, crate::jit::Tiers::BOTH);
        assert_eq!(run("").jit_tiers, crate::jit::DEFAULT_TIERS);
        assert_eq!(run("--jit-promote 9").jit_promote, 9);
        assert_eq!(run("").jit_cache_limit, crate::jit::CODE_CACHE_LIMIT);
        assert_eq!(run("--jit-cache-limit 4096").jit_cache_limit, 4096);
        assert_eq!(run("--jit-cache-limit=64K").jit_cache_limit, 64 << 10);
        assert_eq!(run("--jit-cache-limit 2M").jit_cache_limit, 2 << 20);
        assert_eq!(parse(&args("--version")), Ok(Command::Version));
        assert_eq!(parse(&args("-kernel k --help")), Ok(Command::Help));
        assert_eq!(parse(&args("-h")), Ok(Command::Help));
    }

    #[test]
    fn defaults() {
        let c = run("");
        assert_eq!(
            (c.smp, c.ram_bytes, c.pin, c.accel),
            (1, DEFAULT_RAM, PinMode::None, AccelMode::Jit)
        );
        assert!(validate_for_run(&c).unwrap_err().0.contains("-kernel"));
    }

    #[test]
    fn smp_forms() {
        assert_eq!(run("-smp 8").smp, 8);
        assert_eq!(run("-smp cpus=3,threads=1").smp, 3);
        assert_eq!(run("-smp sockets=2,cores=4").smp, 8);
        let c = run("-smp 2,maxcpus=4");
        assert_eq!(c.smp, 2);
        assert!(c.warnings[0].contains("maxcpus"));
        fails("-smp 0", "-smp 0");
        fails("-smp 257", "1 to 256");
        fails("-smp two", "'two'");
        fails("-smp 4,threads=2", "threads");
        fails("-smp 4,maxcpus=2", "maxcpus");
        fails("-smp 4,bogus=1", "bogus");
    }

    #[test]
    fn memory_sizes() {
        assert_eq!(run("-m 2G").ram_bytes, 2 << 30);
        assert_eq!(run("-m 512M").ram_bytes, 512 << 20);
        assert_eq!(run("-m 1024").ram_bytes, 1 << 30);
        assert_eq!(run("-m 1.5g").ram_bytes, 3 << 29);
        assert_eq!(run("-m size=768M,slots=2,maxmem=4G").ram_bytes, 768 << 20);
        fails("-m 100M", "256 MiB");
        fails("-m 0", "256 MiB");
        fails("-m 2X", "suffix");
        fails("-m lots", "-m lots");
        fails("-m 2T", "1 TiB");
        fails("-m 99999999999999999999G", "too large");
        assert_eq!(parse_size("1.25K"), Ok(1280));
        assert!(parse_size("1.").is_err());
        assert!(parse_size(".5G").is_err());
        assert!(parse_size("1.0000001K").is_err());
    }

    #[test]
    fn refusals_name_the_option() {
        fails("-enable-kvm", "-enable-kvm");
        fails("--frobnicate 3", "--frobnicate");
        fails("kernel.elf", "kernel.elf");
        fails("-kernel", "-kernel");
        fails("-M q35", "pseries");
        fails("-M pseries,x-vof=on", "x-vof=on");
        fails("-M pseries,foo", "foo");
        fails("-cpu power9", "power9");
        fails("-accel kvm", "kvm");
        fails("--jit-threshold lots", "expected a count");
        fails("--jit-tiers fast", "unknown tier");
        fails("--jit-promote -3", "expected a count");
        fails("--jit-threshold -1", "expected a count");
        fails("--jit-cache-limit lots", "expected a number of bytes");
        fails("--jit-cache-limit 0", "at least 1 byte");
        fails("--jit-cache-limit -5", "expected a number of bytes");
        fails("--jit-cache-limit 99999999999G", "too large");
        fails("-accel tcg,thread=single", "thread=multi");
        fails("-accel tcg,foo=1", "foo=1");
        fails("-display gtk", "gtk");
        fails("-serial pty", "pty");
        fails("--tlb-flush-mode eager", "eager");
        fails("--timeout 0", "--timeout 0");
        fails("--timeout soon", "soon");
        fails("--pin spread", "spread");
        fails("--sync-profile=yes", "--sync-profile=yes");
        let empty = parse(&["-kernel".to_string(), String::new()]);
        assert!(matches!(empty, Err(UsageError(m)) if m.contains("-kernel")));
        fails("-", "'-'");
        fails("---x", "---x");
    }

    #[test]
    fn guest_options_need_a_kernel() {
        let c = run("-initrd i.cpio");
        assert!(validate_common(&c).unwrap_err().0.contains("-initrd"));
        let c = run("-append hello");
        assert!(validate_common(&c).unwrap_err().0.contains("-append"));
        assert!(validate_for_run(&run("-bios rom.bin")).is_ok());
    }

    #[test]
    fn rtc_base_forms() {
        assert_eq!(run("-rtc base=utc").rtc, RtcBase::Utc);
        assert_eq!(
            run("-rtc base=localtime,clock=host").rtc,
            RtcBase::LocalTime
        );
        assert_eq!(
            run("-rtc base=2006-06-17T16:01:21,clock=vm,driftfix=none").rtc,
            RtcBase::At(1_150_560_081)
        );
        assert_eq!(run("-rtc base=2006-06-17").rtc, RtcBase::At(1_150_502_400));
        assert!(
            run("-rtc driftfix=slew")
                .warnings
                .iter()
                .any(|w| w.contains("slew"))
        );
        fails("-rtc base=2006-13-01", "-rtc base=2006-13-01");
        fails("-rtc base=yesterday", "yesterday");
        fails("-rtc clock=guest", "clock=guest");
        let host = Duration::from_secs(2_000_000_000);
        let clock = RtcBase::At(1_150_560_081).clock(host);
        assert_eq!(
            clock.now(host + Duration::from_secs(5)),
            Duration::from_secs(1_150_560_086)
        );
        assert_eq!(RtcBase::Utc.clock(host).now(host), host);
    }

    #[test]
    fn virtual_clock_options() {
        let c = run("--quantum 2ms --clock virtual --line-cost 150ns");
        assert_eq!(
            (c.clock, c.line_cost_ns),
            (
                ClockMode::Virtual {
                    quantum_ns: 2_000_000
                },
                150
            )
        );
        assert_eq!(run("--clock virtual").line_cost_ns, 0);
        fails("--clock wall", "--clock wall");
        fails("--clock virtual --quantum 0", "--quantum 0");
        fails("--clock virtual --quantum 2s", "at most 1 s");
        fails("--quantum 1ms", "--quantum needs --clock virtual");
        fails("--line-cost 100ns", "--line-cost needs --clock virtual");
        fails("--clock virtual --line-cost 1ms", "at most 100 us");
        fails("--clock virtual --line-cost soon", "--line-cost soon");
        assert_eq!(run("--clock virtual --host-cores 3").host_cores, Some(3));
        assert_eq!(run("--clock virtual").host_cores, None);
        fails("--clock virtual --host-cores 0", "must be 1 to 4096");
        fails("--clock virtual --host-cores two", "--host-cores two");
        fails("--host-cores 2", "--host-cores needs --clock virtual");
    }

    #[test]
    fn smp_topology_must_hold_every_cpu() {
        assert_eq!(run("-smp 8,sockets=2,cores=4,threads=1").smp, 8);
        assert_eq!(run("-smp 2,maxcpus=4,sockets=1,cores=4").smp, 2);
        fails("-smp 8,sockets=2,cores=2", "does not match 8");
        fails("-smp 4,cores=4,threads=4", "threads");
    }
}
