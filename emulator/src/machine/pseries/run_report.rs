//! The vCPU part of the run report.

use super::vcpu::PseriesVcpu;
use crate::report::VcpuReport;
use std::sync::atomic::Ordering;

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
