//! The vCPU of the machine: its engine and counters, the flush jobs other vCPUs queue on it,
//! and the runner the exec loop of `accel` drives (guest code, then exceptions, hypercalls
//! and interrupts under the BQL).

use super::MachineExit;
use super::devices::{Deferred, Devices, Fx};
use super::hcall::{self, HcallOutcome};
use super::shared::Shared;
use crate::accel::Accel;
use crate::accel::exec::{BlockExit, VcpuRunner};
use crate::cpu::interrupt::{Interrupt, Pending};
use crate::cpu::msr;
use crate::engine::{Cpu, Engine, SystemExit, tb_to_ns};
use crate::interp::events;
use crate::mmu::hpt::Invalidated;
use crate::sync::{Site, StatGuard, Strategy};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Bits of `VcpuShared::interrupt_request` on this machine.
pub mod irq {
    /// The decrementer timer expired: wakes the vCPU (the interrupt itself is the level of DEC).
    pub const DEC: u32 = 1;
    /// The XICS presentation controller asserts the external input (level).
    pub const EXT: u32 = 2;
    /// H_PROD: wake a ceded vCPU.
    pub const PROD: u32 = 4;
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

/// The vCPU-private side: the engine running the vCPU, and its counters.
pub struct PseriesVcpu {
    pub engine: Engine,
    pub index: usize,
    pub(super) shared: Arc<Shared>,
    pub counters: VcpuCounters,
    /// Since when the vCPU is halted in a hypercall, and its VPA (0: none) whose dispatch
    /// counter goes even again when it runs.
    pub(super) halted_since: Option<(Instant, u64)>,
}

pub(super) type MachineAccel<S> = Accel<S, PseriesVcpu, Devices>;

impl PseriesVcpu {
    /// A cross-vCPU flush job: drop the whole TLB under its lock (nearly free when it is
    /// clean since the last flush: the dirty mask elides it).
    pub(super) fn flush_job(&mut self) {
        let _l = self.shared.tlb_locks[self.index].lock(Site::TlbLockFlush);
        if self.engine.cpu.mmu.tlb.flush_all() {
            self.counters.flush_jobs_run += 1;
        } else {
            self.counters.flush_jobs_elided += 1;
        }
    }

    pub(super) fn flush_self(&mut self) {
        let _l = self.shared.tlb_locks[self.index].lock(Site::TlbLockFlush);
        self.engine.cpu.mmu.tlb.flush_all();
        self.counters.self_flushes += 1;
    }

    /// The source's own part of a global flush: only its entries for the pages `own`
    /// names (an HPT hypercall it made removed or changed their HPTEs; every other entry was
    /// made from other HPTEs or in real mode and stays right). A full flush threw away about
    /// 400 entries the vCPU then refilled, one run-loop trip each for its code (linux-make,
    /// N = 1: 40 k such flushes, 8 M refill trips).
    pub(super) fn flush_self_pages(&mut self, own: Invalidated) {
        let ram = &self.shared.ram;
        let mut host = [(0, 0); crate::mmu::hpt::bulk::MAX_PAIRS];
        let ranges = own.ranges().and_then(|r| {
            for (h, &(pa, len)) in host.iter_mut().zip(r) {
                let lo = ram.host_ptr(pa).filter(|_| ram.contains(pa, len))? as u64;
                *h = (lo, lo + len);
            }
            Some(&host[..r.len()])
        });
        let Some(ranges) = ranges else {
            return self.flush_self();
        };
        let _l = self.shared.tlb_locks[self.index].lock(Site::TlbLockFlush);
        self.engine.cpu.mmu.tlb.flush_translated_host_ranges(ranges);
        self.counters.self_flushes += 1;
    }

    /// The guest wrote DEC: re-arm this vCPU's timer for the moment it turns negative
    /// (timebase ticks after the write, on the machine's clock).
    pub(super) fn rearm_decrementer(&mut self) {
        let st = &self.engine.cpu.st;
        let dec = st.dec_value as u32 as i32;
        let ticks = if dec < 0 { 0 } else { dec as u64 + 1 };
        self.shared
            .timers
            .arm(self.index, tb_to_ns(st.dec_tb.wrapping_add(ticks)));
    }

    /// The decrementer interrupt is a level (POWER8): pending while DEC is negative, so it is
    /// taken at the first instruction boundary with EE = 1, on this vCPU's own thread, e.g.
    /// right after a negative value is written (no timer involved). A pending external
    /// interrupt goes first (it has the higher priority), through `handle_interrupt`.
    fn take_decrementer<S: Strategy>(&mut self, accel: &MachineAccel<S>, i: usize) {
        let cpu = &mut self.engine.cpu;
        if cpu.st.msr & msr::EE != 0
            && cpu.decrementer_pending()
            && accel.vcpus[i].interrupt_request.load(Ordering::SeqCst) & irq::EXT == 0
            && let Some(vector) = cpu.take_async(Pending {
                decrementer: true,
                ..Pending::default()
            })
        {
            self.note_interrupt(vector);
        }
    }

    pub(super) fn note_interrupt(&mut self, vector: u64) {
        *self.counters.interrupts.entry(vector).or_default() += 1;
    }
}

impl<S: Strategy> VcpuRunner<S> for PseriesVcpu {
    type Devices = Devices;
    type Exception = SystemExit;

    fn has_work(&self, accel: &MachineAccel<S>, i: usize) -> bool {
        let r = accel.vcpus[i].interrupt_request.load(Ordering::SeqCst);
        r & irq::PROD != 0
            || (self.engine.cpu.st.msr & msr::EE != 0
                && (r & (irq::DEC | irq::EXT) != 0 || self.engine.cpu.decrementer_pending()))
    }

    /// Guest code until an exception, an event, or a kick or deliverable interrupt (the
    /// engine checks at every block).
    fn run(&mut self, accel: &MachineAccel<S>, i: usize) -> BlockExit<SystemExit> {
        if let Some((t, vpa)) = self.halted_since.take() {
            self.counters.halted += t.elapsed();
            hcall::vpa_dispatched(&self.shared.phys, vpa);
        }
        self.take_decrementer(accel, i);
        self.counters.blocks += 1;
        let v = &accel.vcpus[i];
        let stop = |cpu: &Cpu| {
            v.exit_request.load(Ordering::Relaxed)
                || (v.interrupt_request.load(Ordering::Relaxed) != 0 && cpu.st.msr & msr::EE != 0)
        };
        let r = self.engine.run_system(1 << 16, &stop);
        let traced = std::mem::take(&mut self.engine.cpu.counters.trace_interrupts);
        if traced != 0 {
            let vector = Interrupt::Trace { siar: 0 }.vector();
            *self.counters.interrupts.entry(vector).or_default() += traced;
        }
        if self.engine.claim_code_flush() {
            // The code cache passed its limit (or a flush was requested): flush every vCPU's
            // code while none is in translated code (see `Jit::flush_all`). Queued on this
            // vCPU, which leaves guest code at once (queueing kicks it; in baseline that
            // takes the BQL).
            let _b = S::BQL_OUTSIDE_GUEST.then(|| accel.bql(Site::BqlJitFlush));
            accel.async_safe_run_on_cpu(i, |v: &mut PseriesVcpu| v.engine.flush_code_cache());
        }
        if std::mem::take(&mut self.engine.cpu.events) & events::DEC_WRITTEN != 0 {
            self.rearm_decrementer();
        }
        match r {
            Ok(()) => BlockExit::Continue,
            Err(e) => BlockExit::Exception(e),
        }
    }

    fn exception_site(e: &SystemExit) -> Site {
        match e {
            SystemExit::Hypercall => Site::BqlHcall,
            SystemExit::Exception(_) => Site::BqlException,
        }
    }

    fn handle_exception<'a>(
        &mut self,
        e: SystemExit,
        accel: &'a MachineAccel<S>,
        i: usize,
        b: &mut StatGuard<'a, Devices>,
    ) {
        match e {
            SystemExit::Exception(e) => {
                self.counters.exits_exception += 1;
                if self.shared.log_interrupts {
                    let pc = self.engine.cpu.st.pc;
                    let word = self.engine.cpu.mmu.fetch(&self.engine.cpu.st, pc).ok();
                    let text = word.map_or_else(
                        || "(unreadable)".to_string(),
                        |w| crate::isa::disassemble(w, pc),
                    );
                    eprintln!(
                        "ppc64emu: vcpu{i}: {e:?} at {pc:#x}: {text} (lr={:#x} msr={:#x})",
                        self.engine.cpu.st.lr, self.engine.cpu.st.msr
                    );
                }
                match self.engine.cpu.deliver_interrupt(Interrupt::from(e)) {
                    crate::cpu::interrupt::Delivery::Taken { vector } => {
                        self.note_interrupt(vector)
                    }
                    crate::cpu::interrupt::Delivery::Checkstop => {
                        let why = format!(
                            "machine check with MSR[ME] = 0 on vCPU {i} at {:#x}",
                            self.engine.cpu.st.pc
                        );
                        let fx = Fx {
                            accel,
                            out: vec![Deferred::Exit(MachineExit::Checkstop(why))],
                            starting: vec![],
                            console: vec![],
                        };
                        self.apply(accel, b, fx);
                    }
                }
            }
            SystemExit::Hypercall => {
                self.counters.exits_hypercall += 1;
                let mut fx = Fx {
                    accel,
                    out: Vec::new(),
                    starting: Vec::new(),
                    console: Vec::new(),
                };
                // Borrowed, not cloned: the Arc's count is one cache line that every
                // vCPU's hypercalls would otherwise write, inside the BQL's hold.
                let shared = &self.shared;
                let st = &mut self.engine.cpu.st;
                let outcome = hcall::hcall(&mut b.dev, i, st, &shared.phys, &mut fx);
                self.apply(accel, b, fx);
                match outcome {
                    HcallOutcome::Continue | HcallOutcome::Stopped | HcallOutcome::Shutdown => {}
                    HcallOutcome::Cede => {
                        if !b.dev.take_prod(i) {
                            accel.set_halted(i, true);
                            self.halted_since = Some((Instant::now(), b.dev.vpa[i].vpa));
                        }
                    }
                }
            }
        }
    }

    fn handle_interrupt<'a>(
        &mut self,
        accel: &'a MachineAccel<S>,
        i: usize,
        b: &mut StatGuard<'a, Devices>,
    ) {
        let r = accel.vcpus[i].interrupt_request.load(Ordering::SeqCst);
        if r & irq::PROD != 0 {
            accel.reset_irq(i, irq::PROD, b);
            b.dev.take_prod(i);
        }
        // DEC's own sign is the level; the DEC bit only wakes the vCPU.
        let dec = self.engine.cpu.decrementer_pending();
        let pending = Pending {
            system_reset: false,
            external: r & irq::EXT != 0,
            decrementer: dec,
        };
        if let Some(vector) = self.engine.cpu.take_async(pending) {
            self.note_interrupt(vector);
        }
        if r & irq::DEC != 0 && (!dec || self.engine.cpu.st.msr & msr::EE == 0) {
            accel.reset_irq(i, irq::DEC, b);
        }
    }
}
