//! Runs the machine: guest RAM and HPT, one thread per vCPU on the exec loop of `accel`, the
//! I/O thread with the decrementer timers, and the devices under the BQL of the strategy `S`.

use super::config::{AccelMode, ClockMode, MachineConfig, PinMode};
use super::console::{ConsoleLines, ConsoleSink, MKBENCH_RESULT, ResultLine};
use super::devices::Devices;
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
use crate::sync::vclock::VirtualTime;
use crate::sync::{Site, StatMutex, Strategy};
use std::sync::Arc;
use std::sync::atomic::Ordering;
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

/// Boots `plan` on a machine with strategy `S` and runs it to the end (tests run all three).
pub fn run_with<S: Strategy>(
    config: &MachineConfig,
    plan: &BootPlan,
    console: Console,
) -> anyhow::Result<RunOutcome> {
    crate::sync::stats::set_profiling(config.sync_profile);
    let _ = crate::sync::stats::take_local();
    let n = plan.ncpus;
    let ram =
        Arc::new(GuestRam::new(plan.ram_bytes).map_err(|e| anyhow::anyhow!("guest RAM: {e}"))?);
    plan.apply(&*ram)
        .map_err(|e| anyhow::anyhow!("boot image does not fit in RAM: {e:?}"))?;
    let hpt = Arc::new(Hpt::new(plan.hpt_shift).map_err(|e| anyhow::anyhow!("{e}"))?);
    let vtime = match config.clock {
        ClockMode::Virtual { quantum_ns } => Some(VirtualTime::with_line_cost(
            n,
            quantum_ns,
            config.line_cost_ns,
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
    let (end, woken) = RunEnd::new();
    let shared = Arc::new(Shared {
        ram: ram.clone(),
        hpt: hpt.clone(),
        timebase: timebase.clone(),
        timers: Timers::new(n, timer_clock),
        tlb_locks: (0..n)
            .map(|_| StatMutex::new((), crate::sync::Class::Leaf))
            .collect(),
        flush_mode: config.tlb_flush_mode,
        flush_coalesce: config.tlb_flush_coalesce,
        log_interrupts: log.interrupts,
        end,
    });
    let mut dev = PseriesDevices::new(n);
    dev.hpt = Some(Arc::new(hcall::MachineHpt {
        hpt: hpt.clone(),
        ram: ram.clone(),
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
    if let Some(vt) = &vtime {
        accel = accel.with_virtual_time(vt.clone());
        // Clocks that break their own bound end the run rather than give a number.
        let weak = Arc::downgrade(&shared);
        vt.set_on_failure(move |why| {
            if let Some(shared) = weak.upgrade() {
                shared.end.finish(MachineExit::ClockDiverged(why));
            }
        });
    }
    let accel: Arc<MachineAccel<S>> = Arc::new(accel);
    for v in &accel.vcpus[1..] {
        v.stopped.store(true, Ordering::SeqCst);
    }
    let host_cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let pin = config.pin == PinMode::Compact && n <= host_cores;
    let t0 = Instant::now();
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
    // One code cache for the machine: a block is translated once for every vCPU.
    let code_cache = (engine_config.tier == TierKind::Jit).then(crate::jit::JitShared::new);

    let vcpu_threads: Vec<_> = (0..n)
        .map(|i| {
            let (accel, shared) = (accel.clone(), shared.clone());
            let (engine_config, code_cache) = (engine_config.clone(), code_cache.clone());
            let boot = plan.boot;
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
        let accel = accel.clone();
        super::console::spawn_input_reader(std::io::stdin(), move |bytes| {
            super::devices::console_input(&accel, &mut accel.bql(Site::BqlIoThread), bytes)
        })?;
    }

    // Wait for the guest to stop the machine, or for the timeout.
    let timed_out = match config.timeout {
        Some(t) => woken.recv_timeout(t).is_err(),
        None => woken.recv().is_err(),
    };
    if timed_out {
        shared.end.finish(MachineExit::Timeout);
        // A virtual run that times out may have stalled on its clocks: show them.
        if let Some(vt) = &vtime {
            eprintln!("ppc64emu: timed out; virtual clocks:\n{}", vt.describe());
        }
    }
    accel.request_shutdown(&accel.bql(Site::BqlMain));
    let vcpus: Vec<(PseriesVcpu, crate::sync::LockStats)> = vcpu_threads
        .into_iter()
        .map(|t| t.join().expect("vCPU thread panicked"))
        .collect();
    shared.timers.stop();
    io_thread.join().expect("I/O thread panicked");
    let host_wall = t0.elapsed();

    let mut b = accel.bql(Site::BqlMain);
    let exit = shared.end.exit();
    let console = b.console.take_captured();
    let result_line = b.console.result_line();
    let hcalls = b.dev.hcall_stats.all();
    drop(b);
    accel.stats.absorb_thread();
    let locks = accel.stats.snapshot();
    let tb_elapsed = match &vtime {
        Some(vt) => ns_to_tb(vt.max_clock()),
        None => timebase.now(),
    };
    let report = RunReport::new::<S>(
        config,
        n,
        host_wall,
        tb_elapsed,
        HostTimeBase::HZ,
        &exit,
        result_line,
        hcalls,
        &locks,
        vcpus
            .iter()
            .map(|(v, l)| vcpu_report(v, &accel.vcpus[v.index], vtime.as_deref(), l))
            .collect(),
        pin,
    );
    Ok(RunOutcome {
        exit,
        report,
        console,
    })
}
