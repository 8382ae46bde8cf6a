//! The machine's parts of the run report: how the run was set up, how it ended, and each
//! vCPU's counters.

use super::MachineExit;
use super::config::{ClockMode, MachineConfig};
use super::vcpu::PseriesVcpu;
use crate::report::{ClockReport, RunSetup, VcpuReport};
use std::sync::atomic::Ordering;

/// The report's names for how the run was set up.
pub(super) fn run_setup(cfg: &MachineConfig) -> RunSetup {
    RunSetup {
        tlb_flush_mode: cfg.tlb_flush_mode.as_str(),
        tlb_flush_coalesce: cfg.tlb_flush_coalesce,
        accel: cfg.accel.as_str(),
        ram_bytes: cfg.ram_bytes,
        sync_profile: cfg.sync_profile,
        clock: ClockReport {
            kind: cfg.clock.as_str(),
            quantum_ns: match cfg.clock {
                ClockMode::Virtual { quantum_ns } => Some(quantum_ns),
                ClockMode::Host => None,
            },
        },
    }
}

/// The report's name of how the run ended.
pub(super) fn exit_name(e: &MachineExit) -> String {
    match e {
        MachineExit::PowerOff => "power-off".into(),
        MachineExit::Reboot => "reboot".into(),
        MachineExit::OsTerm(m) => format!("os-term: {m}"),
        MachineExit::Checkstop(m) => format!("checkstop: {m}"),
        MachineExit::Timeout => "timeout".into(),
        MachineExit::ClockDiverged(m) => format!("clock-diverged: {m}"),
    }
}

pub(super) fn vcpu_report(
    v: &PseriesVcpu,
    shared: &crate::accel::VcpuShared<PseriesVcpu>,
    vtime: Option<&crate::sync::vclock::VirtualTime>,
    locks: &crate::sync::LockStats,
) -> VcpuReport {
    let cpu = &v.engine.cpu;
    let t = &cpu.mmu.tlb.counters;
    VcpuReport {
        index: v.index,
        instructions: cpu.counters.instructions,
        blocks: v.counters.blocks,
        exits_exception: v.counters.exits_exception,
        exits_hypercall: v.counters.exits_hypercall,
        interrupts: v
            .counters
            .interrupts
            .iter()
            .map(|(k, n)| (format!("{k:#x}"), *n))
            .collect(),
        flush_jobs_queued: shared.counters.flush_jobs_queued.load(Ordering::Relaxed),
        flush_jobs_run: v.counters.flush_jobs_run,
        flush_jobs_elided: v.counters.flush_jobs_elided,
        flush_jobs_coalesced: shared.counters.flush_jobs_coalesced.load(Ordering::Relaxed),
        self_flushes: v.counters.self_flushes,
        tlb_fills: t.fills,
        tlb_full_flushes: t.full_flushes,
        kicks: shared.counters.kicks.load(Ordering::Relaxed),
        halted_s: v.counters.halted.as_secs_f64(),
        final_pc: format!("{:#x}", v.engine.cpu.st.pc),
        final_msr: format!("{:#x}", v.engine.cpu.st.msr),
        final_lr: format!("{:#x}", v.engine.cpu.st.lr),
        jit: v.engine.jit_report(),
        virtual_ns: vtime.map(|vt| vt.clock(v.index)),
        cpu_ns: vtime.map(|vt| vt.cpu_ns(v.index)),
        parks: vtime.map(|vt| vt.parks(v.index)),
        idle_ns: vtime.map(|vt| vt.idle_ns(v.index)),
        virtual_wait_ns: locks
            .to_map()
            .into_iter()
            .filter(|(_, s)| s.virtual_wait_ns > 0)
            .map(|(k, s)| (k, s.virtual_wait_ns))
            .collect(),
    }
}
