//! Runs the machine: guest RAM and HPT, one thread per vCPU on the exec loop of `accel`, the
//! I/O thread with the decrementer timers, and the devices under the BQL of the strategy `S`.

use super::config::{AccelMode, ClockMode, MachineConfig, PinMode};
use super::console::{ConsoleLines, ConsoleSink, MKBENCH_RESULT, ResultLine};
use super::devices::Devices;
use super::effects::CodeWatch;
use super::hcall;
use super::loader::BootPlan;
use super::report::{RunReport, vcpu_report};
use super::shared::Shared;
use super::shared::{LogFlags, RunEnd};
use super::vcpu::{MachineAccel, PseriesVcpu, VcpuCounters, irq};
use super::{MachineExit, PseriesDevices};
use crate::accel::Accel;
use crate::accel::exec::vcpu_thread;
use crate::accel::timers::{TimerClock, Timers};
use crate::engine::{
    Cpu, Engine, EngineConfig, HostTimeBase, TierKind, TimeBase, VirtualTimeBase, ns_to_tb,
};
use crate::mmu::SystemSpace;
use crate::mmu::hpt::Hpt;
use crate::softmmu::GuestRam;
use crate::sync::LockStats;
use crate::sync::vclock::VirtualTime;
use crate::sync::{Site, StatMutex, Strategy};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use super::console::Console;

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
    let report_error = |path: &std::path::Path, e: std::io::Error| {
        anyhow::anyhow!("cannot write the run report to '{}': {e}", path.display())
    };
    // Checked before the run: a report that cannot be written would be lost after it.
    if let Some(path) = &config.report {
        let existed = path.exists();
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| report_error(path, e))?;
        if !existed {
            let _ = std::fs::remove_file(path);
        }
    }
    let out = run_with::<crate::sync::Selected>(&config, &plan, Console::Stdout)?;
    if let Some(path) = &config.report {
        let json = serde_json::to_string_pretty(&out.report)?;
        std::fs::write(path, json).map_err(|e| report_error(path, e))?;
    }
    if config.sync_profile {
        eprintln!("{}", out.report.lock_table);
    }
    Ok(out.exit)
}

/// Boots `plan` on a machine with strategy `S` and runs it to the end (tests run all three):
/// build the machine, spawn its threads, wait for its end, report.
pub fn run_with<S: Strategy>(
    config: &MachineConfig,
    plan: &BootPlan,
    console: Console,
) -> anyhow::Result<RunOutcome> {
    let machine = Machine::<S>::build(config, plan, console)?;
    let running = machine.spawn(plan, console)?;
    let stopped = running.wait(config.timeout);
    Ok(stopped.report(config))
}

/// A machine built and not yet started: memory, clocks, devices and the vCPUs' settings.
struct Machine<S: Strategy> {
    ncpus: usize,
    shared: Arc<Shared>,
    accel: Arc<MachineAccel<S>>,
    vtime: Option<Arc<VirtualTime>>,
    engine_config: EngineConfig,
    /// One code cache for the machine: a block is translated once for every vCPU.
    code_cache: Option<Arc<crate::jit::JitShared>>,
    /// Each vCPU thread on its own host core.
    pin: bool,
    /// Hears when something ends the run.
    woken: Receiver<()>,
}

/// A machine whose threads run.
struct Running<S: Strategy> {
    machine: Machine<S>,
    vcpu_threads: Vec<JoinHandle<(PseriesVcpu, LockStats)>>,
    io_thread: JoinHandle<()>,
    t0: Instant,
}

/// A machine whose threads have all ended.
struct Stopped<S: Strategy> {
    machine: Machine<S>,
    vcpus: Vec<(PseriesVcpu, LockStats)>,
    host_wall: Duration,
}

impl<S: Strategy> Machine<S> {
    /// Guest RAM with the boot image, the HPT, the clocks, the devices and the accelerator
    /// with every vCPU but the boot one stopped.
    fn build(config: &MachineConfig, plan: &BootPlan, console: Console) -> anyhow::Result<Self> {
        crate::sync::stats::set_profiling(config.sync_profile);
        let _ = crate::sync::stats::take_local();
        let n = plan.ncpus;
        let ram =
            Arc::new(GuestRam::new(plan.ram_bytes).map_err(|e| anyhow::anyhow!("guest RAM: {e}"))?);
        plan.apply(&*ram)
            .map_err(|e| anyhow::anyhow!("boot image does not fit in RAM: {e:?}"))?;
        let hpt = Arc::new(Hpt::new(plan.hpt_shift).map_err(|e| anyhow::anyhow!("{e}"))?);
        let vtime = match config.clock {
            ClockMode::Virtual { quantum_ns } => Some(VirtualTime::for_host(
                n,
                quantum_ns,
                config.line_cost_ns,
                config.host_cores(),
            )),
            ClockMode::Host => None,
        };
        let (timebase, timer_clock): (Arc<dyn TimeBase>, TimerClock) = match &vtime {
            Some(vt) => (
                Arc::new(VirtualTimeBase(vt.clone())),
                TimerClock::Virtual(vt.clone()),
            ),
            None => {
                let tb = HostTimeBase::new();
                let start = tb.start();
                (Arc::new(tb), TimerClock::Host(start))
            }
        };
        let log = LogFlags::from_env();
        let host_cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let engine_config = EngineConfig {
            tier: if config.accel == AccelMode::Jit {
                TierKind::Jit
            } else {
                TierKind::Interp
            },
            jit_threshold: config
                .jit_threshold
                .unwrap_or(config.jit_tiers.default_threshold()),
            jit_tiers: config.jit_tiers,
            jit_promote: config.jit_promote,
            jit_cache_limit: config.jit_cache_limit,
            trace: log.jit,
            // Flushing the code cache of several vCPUs needs an exclusive section.
            sole_vcpu: n == 1,
        };
        let code_cache = (engine_config.tier == TierKind::Jit).then(crate::jit::JitShared::new);
        let (end, woken) = RunEnd::new();
        let shared = Arc::new(Shared {
            phys: CodeWatch {
                mem: ram.clone(),
                jit: code_cache.clone(),
            },
            ram,
            hpt,
            timebase,
            timers: Timers::new(n, timer_clock),
            tlb_locks: (0..n)
                .map(|_| StatMutex::new((), crate::sync::Class::Leaf))
                .collect(),
            flush_mode: config.tlb_flush_mode,
            flush_coalesce: config.tlb_flush_coalesce,
            log_interrupts: log.interrupts,
            end,
        });
        let accel = Arc::new(Self::accel(config, &shared, vtime.as_ref(), console));
        for v in &accel.vcpus[1..] {
            v.stopped.store(true, Ordering::SeqCst);
        }
        let machine = Self {
            ncpus: n,
            shared,
            accel,
            vtime,
            engine_config,
            code_cache,
            pin: config.pin == PinMode::Compact && n <= host_cores,
            woken,
        };
        Ok(machine)
    }

    /// The accelerator with the devices and the console, on virtual time when there is one.
    fn accel(
        config: &MachineConfig,
        shared: &Arc<Shared>,
        vtime: Option<&Arc<VirtualTime>>,
        console: Console,
    ) -> MachineAccel<S> {
        let n = shared.tlb_locks.len();
        let mut dev = PseriesDevices::new(n);
        dev.hpt = Some(Arc::new(hcall::MachineHpt {
            hpt: shared.hpt.clone(),
            ram: shared.ram.clone(),
        }));
        dev.rtc = config.rtc.clock(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default(),
        );
        let mut accel = Accel::new(
            n,
            Devices {
                dev,
                console: ConsoleSink::new(
                    console,
                    ConsoleLines::new(vec![Box::new(ResultLine::new(MKBENCH_RESULT))]),
                ),
            },
        );
        if let Some(vt) = vtime {
            accel = accel
                .with_virtual_time(vt.clone())
                .with_deferred_tlb_flushes(|v: &PseriesVcpu| v.engine.cpu.mmu.tlb.is_clean());
            // Clocks that break their own bound end the run rather than give a number.
            let weak = Arc::downgrade(shared);
            vt.set_on_failure(move |why| {
                if let Some(shared) = weak.upgrade() {
                    shared.end.finish(MachineExit::ClockDiverged(why));
                }
            });
        }
        accel
    }

    /// Starts a thread per vCPU (the boot vCPU at the plan's entry), the I/O thread with the
    /// timers and, on a terminal, the console reader.
    fn spawn(self, plan: &BootPlan, console: Console) -> anyhow::Result<Running<S>> {
        let t0 = Instant::now();
        let vcpu_threads = (0..self.ncpus).map(|i| self.spawn_vcpu(i, plan)).collect();
        let io_thread = {
            let (accel, shared) = (self.accel.clone(), self.shared.clone());
            std::thread::Builder::new()
                .name("io".into())
                .spawn(move || {
                    while let Some(expired) = shared.timers.wait_expired(Duration::from_millis(50))
                    {
                        if expired.is_empty() {
                            continue;
                        }
                        let b = accel.bql(Site::BqlIoThread);
                        for (i, deadline) in expired {
                            // On virtual time the vCPU wakes at its deadline.
                            accel.set_irq_at(i, irq::DEC, Some(deadline), &b);
                        }
                    }
                    accel.stats.absorb_thread();
                })
                .expect("spawn I/O thread")
        };
        if console == Console::Stdout {
            // Console input: the reader blocks in read(2), so it is left running at the end.
            let accel = self.accel.clone();
            super::console::spawn_input_reader(std::io::stdin(), move |bytes| {
                super::devices::console_input(&accel, &mut accel.bql(Site::BqlIoThread), bytes)
            })?;
        }
        Ok(Running {
            machine: self,
            vcpu_threads,
            io_thread,
            t0,
        })
    }

    /// The thread of vCPU `i`: its engine on the machine's memory, then the exec loop.
    fn spawn_vcpu(&self, i: usize, plan: &BootPlan) -> JoinHandle<(PseriesVcpu, LockStats)> {
        let (accel, shared) = (self.accel.clone(), self.shared.clone());
        let (engine_config, code_cache) = (self.engine_config.clone(), self.code_cache.clone());
        let (boot, pin) = (plan.boot, self.pin);
        std::thread::Builder::new()
            .name(format!("vcpu{i}"))
            .spawn(move || {
                if pin {
                    pin_to(i);
                }
                let mut cpu = Cpu::new(Box::new(SystemSpace::new(
                    shared.ram.clone(),
                    shared.hpt.clone(),
                )));
                cpu.timebase = shared.timebase.clone();
                cpu.st.pir = i as u64;
                if i == 0 {
                    cpu.st.pc = boot.pc;
                    cpu.st.msr = boot.msr;
                    cpu.st.gpr[3] = boot.r3;
                    cpu.st.gpr[4] = boot.r4;
                    cpu.st.gpr[5] = boot.r5;
                }
                #[cfg_attr(feature = "loom", allow(unused_mut))]
                let mut engine = Engine::new(cpu, &engine_config, code_cache);
                // SAFETY: `accel` outlives this thread's engine (both live until the thread
                // ends). (Under loom the flag is a model type; the loom tests run no JIT.)
                #[cfg(not(feature = "loom"))]
                unsafe {
                    engine.watch_kick(&accel.vcpus[i].exit_request)
                };
                let mut v = PseriesVcpu {
                    engine,
                    index: i,
                    shared,
                    counters: VcpuCounters::default(),
                    halted_since: None,
                };
                let locks = vcpu_thread(&*accel, i, &mut v);
                (v, locks)
            })
            .expect("spawn vCPU thread")
    }
}

impl<S: Strategy> Running<S> {
    /// Waits for the guest to stop the machine, or for `timeout`; then stops every thread.
    fn wait(self, timeout: Option<Duration>) -> Stopped<S> {
        let machine = self.machine;
        let timed_out = match timeout {
            Some(t) => machine.woken.recv_timeout(t).is_err(),
            None => machine.woken.recv().is_err(),
        };
        if timed_out {
            machine.shared.end.finish(MachineExit::Timeout);
            // A virtual run that times out may have stalled on its clocks: show them.
            if let Some(vt) = &machine.vtime {
                eprintln!("ppc64emu: timed out; virtual clocks:\n{}", vt.describe());
            }
        }
        machine
            .accel
            .request_shutdown(&machine.accel.bql(Site::BqlMain));
        let vcpus = self
            .vcpu_threads
            .into_iter()
            .map(|t| t.join().expect("vCPU thread panicked"))
            .collect();
        machine.shared.timers.stop();
        self.io_thread.join().expect("I/O thread panicked");
        Stopped {
            machine,
            vcpus,
            host_wall: self.t0.elapsed(),
        }
    }
}

impl<S: Strategy> Stopped<S> {
    /// How the run ended, its report and the captured console.
    fn report(self, config: &MachineConfig) -> RunOutcome {
        let Stopped {
            machine: m,
            vcpus,
            host_wall,
        } = self;
        let mut b = m.accel.bql(Site::BqlMain);
        let exit = m.shared.end.exit();
        let console = b.console.take_captured();
        let result_line = b.console.result_line();
        let hcalls = b.dev.hcall_stats.all();
        drop(b);
        m.accel.stats.absorb_thread();
        let locks = m.accel.stats.snapshot();
        let tb_elapsed = match &m.vtime {
            Some(vt) => ns_to_tb(vt.max_clock()),
            None => m.shared.timebase.now(),
        };
        let mut report = RunReport::new::<S>(
            config,
            m.ncpus,
            host_wall,
            tb_elapsed,
            HostTimeBase::HZ,
            &exit,
            result_line,
            hcalls,
            &locks,
            vcpus
                .iter()
                .map(|(v, l)| vcpu_report(v, &m.accel.vcpus[v.index], m.vtime.as_deref(), l))
                .collect(),
            m.pin,
        );
        if let Some(vt) = &m.vtime {
            (report.clock.bql_think_ns, report.clock.bql_hold_ns) = vt.bql_costs();
        }
        RunOutcome {
            exit,
            report,
            console,
        }
    }
}
