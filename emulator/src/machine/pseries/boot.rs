//! Runs the machine: guest RAM and HPT, one thread per vCPU on the exec loop of `accel`, the
//! I/O thread with the decrementer timers, and the devices under the BQL of the strategy `S`.

use super::config::{AccelMode, MachineConfig, PinMode, TlbFlushMode};
use super::effects::{MachineEffects, NotStopped};
use super::hcall::{self, HcallOutcome, HptHcalls, HptReturn};
use super::loader::BootPlan;
use super::{MachineExit, PseriesDevices};
use crate::accel::Accel;
use crate::accel::exec::{BlockExit, VcpuRunner, vcpu_thread};
use crate::accel::timers::Timers;
use crate::cpu::interrupt::{Interrupt, Pending};
use crate::cpu::{Exception, msr};
use crate::interp::{Cpu, HostTimeBase, TimeBase, events};
use crate::mmu::hpt::Hpt;
use crate::mmu::SystemSpace;
use crate::report::{RunReport, VcpuReport};
use crate::softmmu::GuestRam;
use crate::sync::{Site, StatGuard, StatMutex, Strategy};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Bits of `VcpuShared::interrupt_request` on this machine.
pub mod irq {
    /// The decrementer expired (edge: pending until taken).
    pub const DEC: u32 = 1;
    /// The XICS presentation controller asserts the external input (level).
    pub const EXT: u32 = 2;
    /// H_PROD: wake a ceded vCPU.
    pub const PROD: u32 = 4;
}

/// Instructions per interpreted block at most (bounds the latency of a kick).
const MAX_BLOCK: usize = 64;

/// Where the hvterm's output goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Console {
    /// To stdout, as written (the command line).
    Stdout,
    /// Kept in memory and returned with the outcome (tests).
    Capture,
}

/// What the BQL protects.
pub struct Devices {
    pub dev: PseriesDevices,
    pub exit: Option<MachineExit>,
    console: Console,
    captured: Vec<u8>,
    /// Console output of the current line, to pick up the guest's result line.
    line: Vec<u8>,
    pub result_line: Option<String>,
}

/// Machine-wide state every vCPU thread reaches without the BQL.
pub struct Shared {
    pub ram: Arc<GuestRam>,
    pub hpt: Arc<Hpt>,
    pub timebase: Arc<HostTimeBase>,
    pub timers: Timers,
    /// The TLB lock of each vCPU: taken by the owner to flush, and by whoever else writes it.
    pub tlb_locks: Vec<StatMutex<()>>,
    pub flush_mode: TlbFlushMode,
    pub flush_coalesce: bool,
    /// `PPC64EMU_LOG=int`: log every synchronous interrupt with its instruction (debugging).
    pub log_interrupts: bool,
    exit_tx: std::sync::mpsc::Sender<()>,
}

/// Why a stint of guest code stopped, for the BQL section that follows.
pub enum Exit {
    Hypercall,
    Exception(Exception),
}

/// Counters of one vCPU for the run report.
#[derive(Clone, Debug, Default)]
pub struct VcpuCounters {
    pub blocks: u64,
    pub exits_exception: u64,
    pub exits_hypercall: u64,
    pub interrupts: std::collections::BTreeMap<u64, u64>,
    pub flush_jobs_run: u64,
    pub flush_jobs_elided: u64,
    pub self_flushes: u64,
    pub halted: Duration,
}

/// The vCPU-private side: the interpreter's CPU and its counters.
pub struct PseriesVcpu {
    pub cpu: Cpu,
    pub index: usize,
    shared: Arc<Shared>,
    pub counters: VcpuCounters,
    halted_since: Option<Instant>,
    /// Translated execution (`--accel jit`); `None` interprets.
    pub jit: Option<crate::jit::Jit>,
}

type MachineAccel<S> = Accel<S, PseriesVcpu, Devices>;

impl PseriesVcpu {
    /// A cross-vCPU flush job: drop the whole TLB under its lock (nearly free when it is
    /// clean since the last flush: the dirty mask elides it).
    fn flush_job(&mut self) {
        let _l = self.shared.tlb_locks[self.index].lock(Site::TlbLockFlush);
        if self.cpu.mmu.tlb.flush_all() {
            self.counters.flush_jobs_run += 1;
        } else {
            self.counters.flush_jobs_elided += 1;
        }
    }

    fn flush_self(&mut self) {
        let _l = self.shared.tlb_locks[self.index].lock(Site::TlbLockFlush);
        self.cpu.mmu.tlb.flush_all();
        self.counters.self_flushes += 1;
    }

    /// The guest wrote DEC: re-arm this vCPU's timer for the moment it turns negative.
    fn rearm_decrementer(&mut self) {
        let dec = self.cpu.st.dec_value as u32 as i32;
        let ticks = if dec < 0 { 0 } else { dec as u64 + 1 };
        let at = Instant::now() + Duration::from_nanos(ticks.saturating_mul(1000) / (HostTimeBase::HZ / 1_000_000));
        self.shared.timers.arm(self.index, at);
    }

    fn note_interrupt(&mut self, vector: u64) {
        *self.counters.interrupts.entry(vector).or_default() += 1;
    }
}

/// The HPT hypercalls of the device models, served by the shared hash page table.
struct HptService {
    hpt: Arc<Hpt>,
    ram: Arc<GuestRam>,
}

fn to_return(r: crate::mmu::hpt::HcallResult) -> HptReturn {
    HptReturn { ret: r.ret, out: r.out, nout: r.n_out, flush: r.flush_all_tlbs }
}

impl HptHcalls for HptService {
    fn enter(&self, flags: u64, ptex: u64, pteh: u64, ptel: u64) -> HptReturn {
        to_return(self.hpt.h_enter(&self.ram, flags, ptex, pteh, ptel))
    }
    fn remove(&self, flags: u64, ptex: u64, avpn: u64) -> HptReturn {
        to_return(self.hpt.h_remove(flags, ptex, avpn))
    }
    fn read(&self, flags: u64, ptex: u64) -> HptReturn {
        to_return(self.hpt.h_read(flags, ptex))
    }
    fn protect(&self, flags: u64, ptex: u64, avpn: u64) -> HptReturn {
        to_return(self.hpt.h_protect(flags, ptex, avpn))
    }
    fn bulk_remove(&self, args: &[u64; 8]) -> HptReturn {
        to_return(self.hpt.h_bulk_remove(*args))
    }
}

/// Effects of a device model, collected while it runs and applied right after, still under
/// the BQL (the models hold `&mut` to the devices meanwhile).
#[derive(Debug)]
enum Deferred {
    Irq(usize, bool),
    Prod(usize),
    Start(usize, u64, u64),
    StopSelf(usize),
    Exit(MachineExit),
    FlushAll,
    InterruptLe(bool),
}

struct Fx<'a, S: Strategy> {
    accel: &'a MachineAccel<S>,
    out: Vec<Deferred>,
    /// Start requests made in this call (a second start of the same vCPU must fail).
    starting: Vec<usize>,
    console: Vec<u8>,
}

impl<S: Strategy> MachineEffects for Fx<'_, S> {
    fn set_external_irq(&mut self, cpu: usize, asserted: bool) {
        self.out.push(Deferred::Irq(cpu, asserted));
    }
    fn prod(&mut self, cpu: usize) {
        self.out.push(Deferred::Prod(cpu));
    }
    fn start_cpu(&mut self, cpu: usize, entry: u64, r3: u64) -> Result<(), NotStopped> {
        if !self.is_stopped(cpu) {
            return Err(NotStopped);
        }
        self.starting.push(cpu);
        self.out.push(Deferred::Start(cpu, entry, r3));
        Ok(())
    }
    fn stop_self(&mut self, cpu: usize) {
        self.out.push(Deferred::StopSelf(cpu));
    }
    fn is_stopped(&self, cpu: usize) -> bool {
        self.accel.vcpus.get(cpu).is_some_and(|v| v.stopped.load(Ordering::SeqCst)) && !self.starting.contains(&cpu)
    }
    fn power_off(&mut self) {
        self.out.push(Deferred::Exit(MachineExit::PowerOff));
    }
    fn reboot(&mut self) {
        self.out.push(Deferred::Exit(MachineExit::Reboot));
    }
    fn os_term(&mut self, message: String) {
        self.out.push(Deferred::Exit(MachineExit::OsTerm(message)));
    }
    fn flush_all_tlbs(&mut self) {
        self.out.push(Deferred::FlushAll);
    }
    fn set_interrupt_little_endian(&mut self, le: bool) {
        self.out.push(Deferred::InterruptLe(le));
    }
    fn console_write(&mut self, bytes: &[u8]) {
        self.console.extend_from_slice(bytes);
    }
    fn wall_time(&self) -> Duration {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default()
    }
}

impl PseriesVcpu {
    /// Applies what a device model asked for, under the BQL held by `b`.
    fn apply<'a, S: Strategy>(&mut self, accel: &'a MachineAccel<S>, b: &mut StatGuard<'a, Devices>, fx: Fx<'_, S>) {
        if !fx.console.is_empty() {
            match b.console {
                Console::Stdout => crate::machine::pseries::console::write_stdout(&fx.console),
                Console::Capture => b.captured.extend_from_slice(&fx.console),
            }
            for &c in &fx.console {
                if c == b'\n' {
                    let line = String::from_utf8_lossy(&b.line).trim_end().to_string();
                    if line.starts_with("MKBENCH-RESULT") {
                        b.result_line = Some(line);
                    }
                    b.line.clear();
                } else if b.line.len() < 4096 {
                    b.line.push(c);
                }
            }
        }
        for d in fx.out {
            match d {
                Deferred::Irq(cpu, true) => accel.set_irq(cpu, irq::EXT, b),
                Deferred::Irq(cpu, false) => accel.reset_irq(cpu, irq::EXT, b),
                Deferred::Prod(cpu) => accel.set_irq(cpu, irq::PROD, b),
                Deferred::Start(cpu, entry, r3) => {
                    let le = b.dev.interrupt_le;
                    accel.async_run_on_cpu(cpu, move |v: &mut PseriesVcpu| {
                        let st = &mut v.cpu.st;
                        st.pc = entry;
                        st.gpr[3] = r3;
                        st.msr = msr::SF | msr::ME;
                        crate::cpu::interrupt::set_interrupt_little_endian(st, le);
                    });
                    accel.set_stopped(cpu, false, b);
                }
                Deferred::StopSelf(cpu) => accel.set_stopped(cpu, true, b),
                Deferred::Exit(e) => {
                    if b.exit.is_none() {
                        b.exit = Some(e);
                    }
                    accel.request_shutdown(b);
                    let _ = self.shared.exit_tx.send(());
                }
                Deferred::FlushAll => self.flush_all_cpus(accel),
                Deferred::InterruptLe(le) => {
                    crate::cpu::interrupt::set_interrupt_little_endian(&mut self.cpu.st, le);
                    for j in (0..accel.vcpus.len()).filter(|&j| j != self.index) {
                        accel.async_run_on_cpu(j, move |v: &mut PseriesVcpu| crate::cpu::interrupt::set_interrupt_little_endian(&mut v.cpu.st, le));
                    }
                }
            }
        }
    }

    /// `tlb_flush_all_cpus` of the configured mode (LOCKING.md): the others get queued jobs;
    /// the source flushes itself now (async) or as exclusive work (synced, synced-exit).
    fn flush_all_cpus<S: Strategy>(&mut self, accel: &MachineAccel<S>) {
        for j in (0..accel.vcpus.len()).filter(|&j| j != self.index) {
            let v = &accel.vcpus[j];
            if self.shared.flush_coalesce && v.flush_queued.swap(true, Ordering::SeqCst) {
                v.counters.flush_jobs_coalesced.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            accel.queue_tlb_flush(j, PseriesVcpu::flush_job);
        }
        match self.shared.flush_mode {
            TlbFlushMode::Async => self.flush_self(),
            TlbFlushMode::Synced | TlbFlushMode::SyncedExit => {
                accel.async_safe_run_on_cpu(self.index, PseriesVcpu::flush_self);
                if self.shared.flush_mode == TlbFlushMode::SyncedExit {
                    accel.vcpus[self.index].exit_request.store(true, Ordering::SeqCst);
                }
            }
        }
    }
}

impl PseriesVcpu {
    /// Translated blocks until an exception, an event of the interpreter's kind, or a kick or
    /// deliverable interrupt (checked at every block entry).
    fn run_jit<S: Strategy>(&mut self, accel: &MachineAccel<S>, i: usize) -> BlockExit<Exit> {
        let v = &accel.vcpus[i];
        let stop = |cpu: &Cpu| {
            v.exit_request.load(Ordering::Relaxed) || (v.interrupt_request.load(Ordering::Relaxed) != 0 && cpu.st.msr & msr::EE != 0)
        };
        let jit = self.jit.as_mut().expect("jit");
        let r = jit.run(&mut self.cpu, 1 << 16, &stop);
        if jit.wants_flush() && jit.claim_flush() {
            // A module passed the code cache limit (or a flush was requested): flush every
            // vCPU's code while none is in translated code (see `Jit::flush_all`). Queued on
            // this vCPU, which leaves guest code at once (queueing kicks it; in baseline that
            // takes the BQL).
            let _b = S::BQL_OUTSIDE_GUEST.then(|| accel.bql(Site::BqlJitFlush));
            accel.async_safe_run_on_cpu(i, |v: &mut PseriesVcpu| v.jit.as_mut().expect("jit").flush_all());
        }
        match r {
            Ok(()) => {}
            Err(Exception::SystemCall { lev: 1 }) if self.cpu.st.msr & msr::PR == 0 => return BlockExit::Exception(Exit::Hypercall),
            Err(Exception::SystemCall { lev: 1 }) => self.cpu.st.gpr[3] = hcall::H_PRIVILEGE as u64,
            Err(e) => return BlockExit::Exception(Exit::Exception(e)),
        }
        if std::mem::take(&mut self.cpu.events) & events::DEC_WRITTEN != 0 {
            self.rearm_decrementer();
        }
        BlockExit::Continue
    }
}

impl<S: Strategy> VcpuRunner<S> for PseriesVcpu {
    type Devices = Devices;
    type Exception = Exit;

    fn has_work(&self, accel: &MachineAccel<S>, i: usize) -> bool {
        let r = accel.vcpus[i].interrupt_request.load(Ordering::SeqCst);
        r & irq::PROD != 0 || (self.cpu.st.msr & msr::EE != 0 && r & (irq::DEC | irq::EXT) != 0)
    }

    fn run(&mut self, accel: &MachineAccel<S>, i: usize) -> BlockExit<Exit> {
        if let Some(t) = self.halted_since.take() {
            self.counters.halted += t.elapsed();
        }
        self.counters.blocks += 1;
        if self.jit.is_some() {
            return self.run_jit(accel, i);
        }
        for _ in 0..MAX_BLOCK {
            let pc = self.cpu.st.pc;
            match self.cpu.step() {
                Ok(()) => {}
                Err(Exception::SystemCall { lev: 1 }) if self.cpu.st.msr & msr::PR == 0 => return BlockExit::Exception(Exit::Hypercall),
                Err(Exception::SystemCall { lev: 1 }) => self.cpu.st.gpr[3] = hcall::H_PRIVILEGE as u64,
                Err(e) => return BlockExit::Exception(Exit::Exception(e)),
            }
            if self.cpu.events != 0 {
                let ev = std::mem::take(&mut self.cpu.events);
                if ev & events::DEC_WRITTEN != 0 {
                    self.rearm_decrementer();
                }
                if ev & events::MSR_CHANGED != 0 {
                    break;
                }
            }
            if self.cpu.st.pc != pc.wrapping_add(4) {
                break;
            }
        }
        BlockExit::Continue
    }

    fn exception_site(e: &Exit) -> Site {
        match e {
            Exit::Hypercall => Site::BqlHcall,
            Exit::Exception(_) => Site::BqlException,
        }
    }

    fn handle_exception<'a>(&mut self, e: Exit, accel: &'a MachineAccel<S>, i: usize, b: &mut StatGuard<'a, Devices>) {
        match e {
            Exit::Exception(e) => {
                self.counters.exits_exception += 1;
                if self.shared.log_interrupts {
                    let pc = self.cpu.st.pc;
                    let word = self.cpu.mmu.fetch(&self.cpu.st, pc).ok();
                    let text = word.map_or_else(|| "(unreadable)".to_string(), |w| crate::isa::disassemble(w, pc));
                    eprintln!("ppc64emu: vcpu{i}: {e:?} at {pc:#x}: {text} (lr={:#x} msr={:#x})", self.cpu.st.lr, self.cpu.st.msr);
                }
                match self.cpu.deliver_interrupt(Interrupt::from(e)) {
                    crate::cpu::interrupt::Delivery::Taken { vector } => self.note_interrupt(vector),
                    crate::cpu::interrupt::Delivery::Checkstop => {
                        let why = format!("machine check with MSR[ME] = 0 on vCPU {i} at {:#x}", self.cpu.st.pc);
                        let fx = Fx { accel, out: vec![Deferred::Exit(MachineExit::Checkstop(why))], starting: vec![], console: vec![] };
                        self.apply(accel, b, fx);
                    }
                }
            }
            Exit::Hypercall => {
                self.counters.exits_hypercall += 1;
                let mut fx = Fx { accel, out: Vec::new(), starting: Vec::new(), console: Vec::new() };
                let ram = self.shared.ram.clone();
                let outcome = match self.jit.as_ref().map(|j| j.shared().clone()) {
                    Some(js) => {
                        let mem = super::effects::CodeWatch { mem: &*ram, jit: &js };
                        hcall::hcall(&mut b.dev, i, &mut self.cpu.st, &mem, &mut fx)
                    }
                    None => hcall::hcall(&mut b.dev, i, &mut self.cpu.st, &*ram, &mut fx),
                };
                self.apply(accel, b, fx);
                match outcome {
                    HcallOutcome::Continue | HcallOutcome::Stopped | HcallOutcome::Shutdown => {}
                    HcallOutcome::Cede => {
                        if !b.dev.take_prod(i) {
                            accel.set_halted(i, true);
                            self.halted_since = Some(Instant::now());
                        }
                    }
                }
            }
        }
    }

    fn handle_interrupt<'a>(&mut self, accel: &'a MachineAccel<S>, i: usize, b: &mut StatGuard<'a, Devices>) {
        let r = accel.vcpus[i].interrupt_request.load(Ordering::SeqCst);
        if r & irq::PROD != 0 {
            accel.reset_irq(i, irq::PROD, b);
            b.dev.take_prod(i);
        }
        let pending = Pending { system_reset: false, external: r & irq::EXT != 0, decrementer: r & irq::DEC != 0 };
        if let Some(vector) = self.cpu.take_async(pending) {
            self.note_interrupt(vector);
            if vector == 0x900 {
                accel.reset_irq(i, irq::DEC, b);
            }
        }
    }
}

/// Pins the calling thread to host CPU `core` (best effort: a failure leaves it unpinned).
fn pin_to(core: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET stays within it for core < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if core < libc::CPU_SETSIZE as usize {
            libc::CPU_SET(core, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

/// The result of a run: how it ended, the report and (with `Console::Capture`) the console.
pub struct RunOutcome {
    pub exit: MachineExit,
    pub report: RunReport,
    pub console: Vec<u8>,
}

/// Boots `plan` with the binary's strategy and runs it until it stops.
pub fn run(config: MachineConfig, plan: BootPlan) -> anyhow::Result<MachineExit> {
    let out = run_with::<crate::sync::Selected>(&config, &plan, Console::Stdout)?;
    if let Some(path) = &config.report {
        let json = serde_json::to_string_pretty(&out.report)?;
        std::fs::write(path, json).map_err(|e| anyhow::anyhow!("cannot write the run report to '{}': {e}", path.display()))?;
    }
    if config.sync_profile {
        eprintln!("{}", out.report.lock_table);
    }
    Ok(out.exit)
}

/// Boots `plan` on a machine with strategy `S` and runs it to the end (tests run all three).
pub fn run_with<S: Strategy>(config: &MachineConfig, plan: &BootPlan, console: Console) -> anyhow::Result<RunOutcome> {
    crate::sync::stats::set_profiling(config.sync_profile);
    let _ = crate::sync::stats::take_local();
    let n = plan.ncpus;
    let ram = Arc::new(GuestRam::new(plan.ram_bytes).map_err(|e| anyhow::anyhow!("guest RAM: {e}"))?);
    plan.apply(&*ram).map_err(|e| anyhow::anyhow!("boot image does not fit in RAM: {e:?}"))?;
    let hpt = Arc::new(Hpt::new(plan.hpt_shift).map_err(|e| anyhow::anyhow!("{e}"))?);
    let timebase = Arc::new(HostTimeBase::new());
    let (exit_tx, exit_rx) = std::sync::mpsc::channel();
    let shared = Arc::new(Shared {
        ram: ram.clone(),
        hpt: hpt.clone(),
        timebase: timebase.clone(),
        timers: Timers::new(n),
        tlb_locks: (0..n).map(|_| StatMutex::new((), crate::sync::Class::Leaf)).collect(),
        flush_mode: config.tlb_flush_mode,
        flush_coalesce: config.tlb_flush_coalesce,
        log_interrupts: std::env::var("PPC64EMU_LOG").is_ok_and(|v| v.split(',').any(|w| w == "int")),
        exit_tx,
    });
    let mut dev = PseriesDevices::new(n);
    dev.hpt = Some(Arc::new(HptService { hpt: hpt.clone(), ram: ram.clone() }));
    let accel: Arc<MachineAccel<S>> = Arc::new(Accel::new(n, Devices { dev, exit: None, console, captured: Vec::new(), line: Vec::new(), result_line: None }));
    for v in &accel.vcpus[1..] {
        v.stopped.store(true, Ordering::SeqCst);
    }
    let host_cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let pin = config.pin == PinMode::Compact && n <= host_cores;
    let t0 = Instant::now();
    let jit_shared = (config.accel == AccelMode::Jit).then(crate::jit::JitShared::new);
    let (jit_threshold, jit_tiers, jit_promote) = (config.jit_threshold, config.jit_tiers, config.jit_promote);
    let jit_cache_limit = config.jit_cache_limit;
    let jit_trace = std::env::var("PPC64EMU_LOG").is_ok_and(|v| v.split(',').any(|w| w == "jit"));

    let vcpu_threads: Vec<_> = (0..n)
        .map(|i| {
            let (accel, shared) = (accel.clone(), shared.clone());
            let jit_shared = jit_shared.clone();
            let boot = plan.boot;
            std::thread::Builder::new()
                .name(format!("vcpu{i}"))
                .spawn(move || {
                    if pin {
                        pin_to(i);
                    }
                    let mut cpu = Cpu::new(Box::new(SystemSpace::new(shared.ram.clone(), shared.hpt.clone())));
                    cpu.timebase = shared.timebase.clone();
                    cpu.st.pir = i as u64;
                    if i == 0 {
                        cpu.st.pc = boot.pc;
                        cpu.st.msr = boot.msr;
                        cpu.st.gpr[3] = boot.r3;
                        cpu.st.gpr[4] = boot.r4;
                        cpu.st.gpr[5] = boot.r5;
                    }
                    let jit = jit_shared.map(|js| {
                        let mut j = crate::jit::Jit::attach(&mut cpu, js);
                        // Flushing the code cache of several vCPUs needs an exclusive section.
                        j.self_flush = n == 1;
                        j.cache_limit = jit_cache_limit;
                        j.trace = jit_trace;
                        j.set_tiers(jit_tiers, jit_threshold);
                        j.promote_threshold = jit_promote;
                        // SAFETY: `accel` outlives this thread's JIT (both live until the thread ends).
                        // (Under loom the flag is a model type; the loom tests run no JIT.)
                        #[cfg(not(loom))]
                        unsafe {
                            j.watch(&accel.vcpus[i].exit_request)
                        };
                        j
                    });
                    let mut v = PseriesVcpu { cpu, index: i, shared, counters: VcpuCounters::default(), halted_since: None, jit };
                    vcpu_thread(&*accel, i, &mut v);
                    v
                })
                .expect("spawn vCPU thread")
        })
        .collect();

    let io_thread = {
        let (accel, shared) = (accel.clone(), shared.clone());
        std::thread::Builder::new()
            .name("io".into())
            .spawn(move || {
                while let Some(expired) = shared.timers.wait_expired(Duration::from_millis(50)) {
                    if expired.is_empty() {
                        continue;
                    }
                    let b = accel.bql(Site::BqlIoThread);
                    for i in expired {
                        accel.set_irq(i, irq::DEC, &b);
                    }
                }
                accel.stats.absorb_thread();
            })
            .expect("spawn I/O thread")
    };

    if console == Console::Stdout {
        // Console input: the reader blocks in read(2), so it is left running at the end.
        let accel = accel.clone();
        super::console::spawn_input_reader(std::io::stdin(), move |bytes| accel.bql(Site::BqlIoThread).dev.hvterm.push_input(bytes))?;
    }

    // Wait for the guest to stop the machine, or for the timeout.
    let timed_out = match config.timeout {
        Some(t) => exit_rx.recv_timeout(t).is_err(),
        None => exit_rx.recv().is_err(),
    };
    {
        let mut b = accel.bql(Site::BqlMain);
        if timed_out && b.exit.is_none() {
            b.exit = Some(MachineExit::Timeout);
        }
        accel.request_shutdown(&b);
    }
    let vcpus: Vec<PseriesVcpu> = vcpu_threads.into_iter().map(|t| t.join().expect("vCPU thread panicked")).collect();
    shared.timers.stop();
    io_thread.join().expect("I/O thread panicked");
    let host_wall = t0.elapsed();

    let mut b = accel.bql(Site::BqlMain);
    let exit = b.exit.clone().unwrap_or(MachineExit::Timeout);
    let console = std::mem::take(&mut b.captured);
    let result_line = b.result_line.clone();
    let hcalls = b.dev.hcall_stats.all();
    drop(b);
    accel.stats.absorb_thread();
    let locks = accel.stats.snapshot();
    let tb_elapsed = timebase.now();
    let report = RunReport::new::<S>(config, n, host_wall, tb_elapsed, HostTimeBase::HZ, &exit, result_line, hcalls, &locks, vcpus.iter().map(|v| vcpu_report(v, &accel.vcpus[v.index])).collect(), pin);
    Ok(RunOutcome { exit, report, console })
}

fn vcpu_report(v: &PseriesVcpu, shared: &crate::accel::VcpuShared<PseriesVcpu>) -> VcpuReport {
    let t = &v.cpu.mmu.tlb.counters;
    VcpuReport {
        index: v.index,
        instructions: v.cpu.counters.instructions,
        blocks: v.counters.blocks,
        exits_exception: v.counters.exits_exception,
        exits_hypercall: v.counters.exits_hypercall,
        interrupts: v.counters.interrupts.iter().map(|(k, n)| (format!("{k:#x}"), *n)).collect(),
        flush_jobs_queued: shared.counters.flush_jobs_queued.load(Ordering::Relaxed),
        flush_jobs_run: v.counters.flush_jobs_run,
        flush_jobs_elided: v.counters.flush_jobs_elided,
        flush_jobs_coalesced: shared.counters.flush_jobs_coalesced.load(Ordering::Relaxed),
        self_flushes: v.counters.self_flushes,
        tlb_fills: t.fills,
        tlb_full_flushes: t.full_flushes,
        kicks: shared.counters.kicks.load(Ordering::Relaxed),
        halted_s: v.counters.halted.as_secs_f64(),
        final_pc: format!("{:#x}", v.cpu.st.pc),
        final_msr: format!("{:#x}", v.cpu.st.msr),
        final_lr: format!("{:#x}", v.cpu.st.lr),
        jit: v.jit.as_ref().map(|j| j.report()),
    }
}
