//! User-mode runner: a static ppc64le Linux ELF on one vCPU with emulated syscalls — the ISA
//! test bench and the single-thread speed benchmark.
//!
//! `ppc64emu user [--strace] [--stats] ELF [ARGS…]`. Exit status: the guest's, or 128 + the
//! signal that killed it (SIGSEGV on a bad access, SIGILL on an unimplemented instruction …).

pub mod loader;
pub mod mem;
pub mod syscall;

use crate::cpu::{Exception, ProgramKind, msr};
use crate::engine::{Cpu, Engine, EngineConfig, TierKind};
use mem::{ProcessMemory, UserSpace};
use parking_lot::Mutex;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use syscall::{Process, signal_name};

/// Switches of the runner.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Print each system call to stderr.
    pub strace: bool,
    /// Print guest instructions executed and MIPS to stderr on exit.
    pub stats: bool,
    /// Interpret instead of translating (`--accel interp`).
    pub interp: bool,
    /// Log translated blocks with their disassembly (`--trace`).
    pub trace: bool,
    /// `--jit-threshold`; `None` keeps the JIT's default.
    pub jit_threshold: Option<u32>,
    /// `--jit-cache-limit`; `None` keeps the JIT's default.
    pub jit_cache_limit: Option<u64>,
    /// `--jit-tiers`; `None`: the machine's default (`jit::DEFAULT_TIERS`).
    pub jit_tiers: Option<crate::jit::Tiers>,
    /// `--jit-promote`; `None` keeps the JIT's default.
    pub jit_promote: Option<u32>,
    /// `--jit-memory`.
    pub memory: JitMemory,
}

/// How translated loads and stores reach the guest's pages (`--jit-memory`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JitMemory {
    /// The host guards the guest's pages as the guest protects them (see `mem`'s host
    /// protections) and translated code uses them directly; the range is reserved low, so
    /// that its base is a displacement of each access.
    #[default]
    Guarded,
    /// As `Guarded`, the range wherever the host puts it: its base loaded for each access
    /// (what a host without the low range gets; for comparison).
    GuardedHigh,
    /// The software TLB even where the host could guard the pages (for comparison).
    Tlb,
}

/// How a guest run ended.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Exit status as a shell sees it: the guest's code, or 128 + fatal signal.
    pub status: i32,
    pub instructions: u64,
    pub elapsed: Duration,
}

/// A loaded program ready to run.
pub struct Runner {
    pub engine: Engine,
    pub process: Process,
}

impl Runner {
    /// Loads the ELF file `image` (found at `exe`) with `argv` and `envp`, to run on an
    /// engine built with `config`, translated code reaching memory as `memory` says.
    pub fn new(
        image: &[u8],
        exe: &Path,
        argv: &[Vec<u8>],
        envp: &[Vec<u8>],
        config: &EngineConfig,
        memory: JitMemory,
    ) -> Result<Self, String> {
        Self::load(image, None, exe, argv, envp, config, memory)
    }

    /// As [`Runner::new`], with `file`, the open file `image` was mapped from: the loader maps
    /// the segments' whole pages from it instead of copying them.
    fn load(
        image: &[u8],
        file: Option<&std::fs::File>,
        exe: &Path,
        argv: &[Vec<u8>],
        envp: &[Vec<u8>],
        config: &EngineConfig,
        memory: JitMemory,
    ) -> Result<Self, String> {
        let mem = Arc::new(Mutex::new(match memory {
            JitMemory::GuardedHigh => ProcessMemory::new_high(),
            _ => ProcessMemory::new(),
        }));
        let mut random = [0u8; 16];
        syscall::fill_random(&mut random);
        let execfn = argv
            .first()
            .cloned()
            .unwrap_or_else(|| exe.as_os_str().as_bytes().to_vec());
        let loaded = loader::load(&mut mem.lock(), image, file, argv, envp, &execfn, random)?;
        let mut cpu = Cpu::new(Box::new(UserSpace(mem.clone())));
        cpu.st.msr = msr::SF
            | msr::EE
            | msr::PR
            | msr::FP
            | msr::ME
            | msr::VEC
            | msr::VSX
            | msr::IR
            | msr::DR
            | msr::RI
            | msr::LE;
        cpu.st.pc = loaded.entry;
        cpu.st.gpr[1] = loaded.sp;
        // ELFv2: a global entry point derives its TOC pointer from r12.
        cpu.st.gpr[12] = loaded.entry;
        let abs = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
        let process = Process::new(mem, loaded.brk, abs.into_os_string().into_vec());
        let engine = Engine::new(cpu, config, None);
        if let Some(cache) = engine.code_cache() {
            // Code changed by system calls or unmapping bypasses the JIT's store watch.
            let guard = (memory != JitMemory::Tlb).then(|| {
                let mem = process.mem.clone();
                Box::new(move |page| mem.lock().guard_code(page)) as crate::jit::CodeGuard
            });
            cache.set_user_process(process.mem.lock().flat_base(), guard);
            let cache = cache.clone();
            process.mem.lock().code_hook =
                Some(Box::new(move |addr, len| cache.code_written(addr, len)));
        }
        Ok(Self { engine, process })
    }

    /// Runs the program to its end.
    pub fn run(&mut self) -> Outcome {
        let start = Instant::now();
        let status = loop {
            let r = self.engine.run(u64::MAX, &|_| false);
            // No events matter to user mode.
            self.engine.cpu.events = 0;
            match r {
                Err(Exception::SystemCall { lev: 0 }) => {
                    if let Some(code) = self.process.syscall(&mut self.engine.cpu) {
                        break code;
                    }
                }
                Err(e) => break self.fatal(e),
                Ok(()) => {}
            }
        };
        Outcome {
            status,
            instructions: self.engine.cpu.counters.instructions,
            elapsed: start.elapsed(),
        }
    }

    /// Reports an exception the guest cannot survive (no signal handlers are delivered) and
    /// returns the exit status.
    fn fatal(&mut self, e: Exception) -> i32 {
        let cpu = &mut self.engine.cpu;
        let pc = cpu.st.pc;
        let (sig, what) = match e {
            Exception::Dsi { ea, dsisr } => {
                let kind = if dsisr & 0x0200_0000 != 0 {
                    "write to"
                } else {
                    "read from"
                };
                let why = if dsisr & 0x4000_0000 != 0 {
                    "unmapped"
                } else {
                    "protected"
                };
                (11, format!("{kind} {why} address {ea:#x}"))
            }
            Exception::Isi { ea, .. } => (
                11,
                format!("instruction fetch from non-executable address {ea:#x}"),
            ),
            Exception::DataSegment { ea } | Exception::InstructionSegment { ea } => {
                (11, format!("address {ea:#x}"))
            }
            Exception::Alignment { ea, .. } => (7, format!("unaligned access at {ea:#x}")),
            Exception::MachineCheck { ea, .. } => {
                (7, format!("access to {ea:#x} reached no memory"))
            }
            Exception::Program(ProgramKind::Trap) => (5, "trap instruction".to_string()),
            Exception::Program(ProgramKind::FpEnabled) => {
                (8, "enabled floating-point exception".to_string())
            }
            Exception::Program(ProgramKind::Illegal | ProgramKind::Privileged)
            | Exception::SystemCall { .. }
            | Exception::FpUnavailable
            | Exception::VecUnavailable
            | Exception::VsxUnavailable
            | Exception::FacilityUnavailable { .. } => {
                let insn = match cpu.mmu.fetch(&cpu.st, pc) {
                    Ok(w) => format!("{w:#010x} ({})", crate::isa::disassemble(w, pc)),
                    Err(_) => "?".to_string(),
                };
                let what = match e {
                    Exception::Program(ProgramKind::Illegal) => {
                        "illegal or unimplemented instruction"
                    }
                    Exception::Program(ProgramKind::Privileged) => "privileged instruction",
                    _ => "unsupported instruction",
                };
                (4, format!("{what} {insn}"))
            }
        };
        eprintln!(
            "ppc64emu: uncaught target signal {sig} ({}) - {what} at pc {pc:#x}",
            signal_name(sig)
        );
        128 + sig as i32
    }
}

/// A program's file as the loader reads it: mapped, so that the host reads only the pages
/// the loader copies (reading a 2.5 MB program whole was 6 % of a short run's CPU time),
/// or read whole where the file cannot be mapped (a pipe, an empty file).
enum Image {
    Mapped(memmap2::Mmap, std::fs::File),
    Read(Vec<u8>),
}

impl Image {
    fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::open(path)?;
        // SAFETY: the mapping is private and read only; the loader copies from it before the
        // guest runs and it is dropped right after (`run_file`). A file truncated meanwhile
        // by another process would fault the host, as for any program mapping its input.
        match unsafe { memmap2::Mmap::map(&file) } {
            Ok(m) if !m.is_empty() => Ok(Image::Mapped(m, file)),
            _ => std::fs::read(path).map(Image::Read),
        }
    }

    /// The open file, when the image is mapped from one.
    fn file(&self) -> Option<&std::fs::File> {
        match self {
            Image::Mapped(_, f) => Some(f),
            Image::Read(_) => None,
        }
    }
}

impl std::ops::Deref for Image {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Image::Mapped(m, _) => m,
            Image::Read(v) => v,
        }
    }
}

/// Runs `exe` with `args` (argv[1..]) and the host environment.
pub fn run_file(exe: &Path, args: &[OsString], opts: &Options) -> Result<Outcome, (i32, String)> {
    let image = Image::open(exe).map_err(|e| {
        (
            if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            },
            e.to_string(),
        )
    })?;
    let mut argv = vec![exe.as_os_str().as_bytes().to_vec()];
    argv.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    let envp: Vec<Vec<u8>> = std::env::vars_os()
        .map(|(k, v)| {
            let mut e = k.into_vec();
            e.push(b'=');
            e.extend(v.into_vec());
            e
        })
        .collect();
    let defaults = EngineConfig::default();
    let tiers = opts
        .jit_tiers
        .unwrap_or(crate::jit::DEFAULT_TIERS)
        .available();
    let config = EngineConfig {
        tier: if opts.interp {
            TierKind::Interp
        } else {
            TierKind::Jit
        },
        jit_tiers: tiers,
        jit_threshold: opts.jit_threshold.unwrap_or(tiers.default_user_threshold()),
        jit_promote: opts.jit_promote.unwrap_or(defaults.jit_promote),
        jit_cache_limit: opts.jit_cache_limit.unwrap_or(defaults.jit_cache_limit),
        trace: opts.trace,
        sole_vcpu: true,
    };
    let mut runner = Runner::load(
        &image,
        image.file(),
        exe,
        &argv,
        &envp,
        &config,
        opts.memory,
    )
    .map_err(|e| (126, e))?;
    // The loader copied or mapped what it needs (a private mapping outlives its file's).
    drop(image);
    runner.process.strace = opts.strace;
    let out = runner.run();
    if opts.stats {
        let secs = out.elapsed.as_secs_f64();
        eprintln!(
            "ppc64emu: {} guest instructions in {:.3} s ({:.1} MIPS), {} TLB fills, {} KiB guest memory touched",
            out.instructions,
            secs,
            out.instructions as f64 / secs.max(1e-9) / 1e6,
            runner.engine.cpu.mmu.tlb.counters.fills,
            runner.process.mem.lock().resident_pages() * 4,
        );
        if let Some(r) = runner.engine.jit_report() {
            // The first figures are Cranelift's (scripts/bench-speed reads them).
            eprintln!(
                "ppc64emu: jit: {} blocks translated ({} KiB, {:.1} ms), {} code cache flushes, {} slow memory accesses, fallbacks: {:?}",
                r.blocks_translated,
                r.code_bytes / 1024,
                r.translate_ms,
                r.cache_flushes,
                r.slow_memory_accesses,
                &r.fallbacks[..r.fallbacks.len().min(12)]
            );
            if let Some(b) = &r.baseline {
                eprintln!(
                    "ppc64emu: jit: baseline tier: {} blocks translated ({} KiB, {:.1} ms, {:.1} µs mean), {} promoted, {} instructions",
                    b.counters.blocks_translated,
                    b.code_bytes / 1024,
                    b.translate_ms,
                    b.translate_us_mean,
                    b.counters.promotions,
                    b.counters.instructions
                );
            }
        }
    }
    Ok(out)
}

const USAGE: &str = "usage: ppc64emu user [--strace] [--stats] [--accel jit|interp] [--jit-tiers T] [--jit-threshold N] [--jit-promote N] [--jit-cache-limit BYTES] [--jit-memory guarded|guarded-high|tlb] [--trace] ELF [ARGS...]
  --jit-tiers T       baseline, cranelift or both, comma-separated (default baseline
                      where the host has it, x86-64; else cranelift)
  --jit-threshold N   run a block N times in the interpreter before translating it
                      (default 8 with the baseline tier, else 500; 0 translates at once)
  --jit-promote N     move a block from the baseline tier to Cranelift after N runs
                      (default 100000)
  --jit-cache-limit BYTES   flush the code cache when the translated code passes BYTES
                      (suffixes K, M, G: KiB, MiB, GiB; default 1G)
  --jit-memory M      guarded (default): the host protects the guest's pages as the guest
                      does and translated loads and stores use them directly, the pages
                      reserved low in the host's address space; guarded-high: the same,
                      the pages wherever the host puts them; tlb: they look up the
                      software TLB (as a full system does)";

/// The count at `raw[k]`, if there is one.
fn count_arg(raw: &[OsString], k: usize) -> Option<u32> {
    raw.get(k)?.to_str()?.parse().ok()
}

/// Entry of `ppc64emu user ELF [ARGS…]`; returns the process exit status.
pub fn main(args: &[String]) -> i32 {
    // Guest arguments are taken verbatim from the OS (they need not be UTF-8).
    let raw: Vec<OsString> = std::env::args_os()
        .skip(std::env::args_os().count() - args.len())
        .collect();
    let mut opts = Options::default();
    let mut k = 0;
    while k < raw.len() {
        match raw[k].to_str() {
            Some("--strace") => opts.strace = true,
            Some("--stats") => opts.stats = true,
            Some("--trace") => opts.trace = true,
            Some("--jit-threshold") => {
                k += 1;
                match count_arg(&raw, k) {
                    Some(n) => opts.jit_threshold = Some(n),
                    None => {
                        eprintln!(
                            "ppc64emu user: --jit-threshold takes a count (0 = translate at once)\n{USAGE}"
                        );
                        return 2;
                    }
                }
            }
            Some("--jit-promote") => {
                k += 1;
                match count_arg(&raw, k) {
                    Some(n) => opts.jit_promote = Some(n),
                    None => {
                        eprintln!("ppc64emu user: --jit-promote takes a count\n{USAGE}");
                        return 2;
                    }
                }
            }
            Some("--jit-memory") => {
                k += 1;
                match raw.get(k).and_then(|a| a.to_str()) {
                    Some("guarded") => opts.memory = JitMemory::Guarded,
                    Some("guarded-high") => opts.memory = JitMemory::GuardedHigh,
                    Some("tlb") => opts.memory = JitMemory::Tlb,
                    v => {
                        let v = v.unwrap_or("");
                        eprintln!(
                            "ppc64emu user: --jit-memory {v}: expected guarded, guarded-high or tlb\n{USAGE}"
                        );
                        return 2;
                    }
                }
            }
            Some("--jit-tiers") => {
                k += 1;
                let v = raw.get(k).and_then(|a| a.to_str()).unwrap_or("");
                match crate::jit::Tiers::parse(v) {
                    Ok(t) => opts.jit_tiers = Some(t),
                    Err(e) => {
                        eprintln!("ppc64emu user: --jit-tiers {v}: {e}\n{USAGE}");
                        return 2;
                    }
                }
            }
            Some("--jit-cache-limit") => {
                k += 1;
                let v = raw.get(k).and_then(|a| a.to_str()).unwrap_or("");
                match crate::jit::parse_cache_limit(v) {
                    Ok(n) => opts.jit_cache_limit = Some(n),
                    Err(e) => {
                        eprintln!("ppc64emu user: --jit-cache-limit {v}: {e}\n{USAGE}");
                        return 2;
                    }
                }
            }
            Some("--accel") => {
                k += 1;
                match raw.get(k).and_then(|a| a.to_str()) {
                    Some("jit") => opts.interp = false,
                    Some("interp") => opts.interp = true,
                    _ => {
                        eprintln!("ppc64emu user: --accel takes jit or interp\n{USAGE}");
                        return 2;
                    }
                }
            }
            Some("--help" | "-h") => {
                println!("{USAGE}");
                return 0;
            }
            Some("--") => {
                k += 1;
                break;
            }
            Some(s) if s.starts_with("--") => {
                eprintln!("ppc64emu user: unknown option {s}\n{USAGE}");
                return 2;
            }
            _ => break,
        }
        k += 1;
    }
    let Some(exe) = raw.get(k) else {
        eprintln!("{USAGE}");
        return 2;
    };
    match run_file(Path::new(exe), &raw[k + 1..], &opts) {
        Ok(out) => out.status,
        Err((code, msg)) => {
            eprintln!("ppc64emu user: {}: {msg}", exe.to_string_lossy());
            code
        }
    }
}
