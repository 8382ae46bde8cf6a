//! What the BQL protects (the device models and the console they write to) and how the
//! effects a device model asks for are applied after it ran.

use super::config::TlbFlushMode;
use super::console::ConsoleSink;
use super::effects::{MachineEffects, NotStopped};
use super::vcpu::{MachineAccel, PseriesVcpu, irq};
use super::{MachineExit, PseriesDevices};
use crate::cpu::interrupt::Pending;
use crate::cpu::msr;
use crate::mmu::hpt::Invalidated;
use crate::sync::{StatGuard, Strategy};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// What the BQL protects.
pub struct Devices {
    pub dev: PseriesDevices,
    pub(super) console: ConsoleSink,
}

/// Effects of a device model, collected while it runs and applied right after, still under
/// the BQL (the models hold `&mut` to the devices meanwhile).
#[derive(Debug)]
pub(super) enum Deferred {
    Irq(usize, bool),
    Prod(usize),
    Start(usize, u64, u64),
    StopSelf(usize),
    SystemReset(usize),
    Exit(MachineExit),
    FlushAll(Invalidated),
    InterruptLe(bool),
}

pub(super) struct Fx<'a, S: Strategy> {
    pub(super) accel: &'a MachineAccel<S>,
    pub(super) out: Vec<Deferred>,
    /// Start requests made in this call (a second start of the same vCPU must fail).
    pub(super) starting: Vec<usize>,
    pub(super) console: Vec<u8>,
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
    fn system_reset(&mut self, cpu: usize) {
        self.out.push(Deferred::SystemReset(cpu));
    }
    fn stop_self(&mut self, cpu: usize) {
        self.out.push(Deferred::StopSelf(cpu));
    }
    fn is_stopped(&self, cpu: usize) -> bool {
        self.accel
            .vcpus
            .get(cpu)
            .is_some_and(|v| v.stopped.load(Ordering::SeqCst))
            && !self.starting.contains(&cpu)
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
    fn flush_all_tlbs(&mut self, own: Invalidated) {
        self.out.push(Deferred::FlushAll(own));
    }
    fn set_interrupt_little_endian(&mut self, le: bool) {
        self.out.push(Deferred::InterruptLe(le));
    }
    fn console_write(&mut self, bytes: &[u8]) {
        self.console.extend_from_slice(bytes);
    }
    fn wall_time(&self) -> Duration {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    }
}

/// Console input from the host's I/O thread, under the BQL `b`
/// ([`PseriesDevices::console_input`]); the vty's interrupt reaches the vCPU it is routed to.
pub(super) fn console_input<'a, S: Strategy>(
    accel: &'a MachineAccel<S>,
    b: &mut StatGuard<'a, Devices>,
    bytes: &[u8],
) {
    let mut fx = Fx {
        accel,
        out: Vec::new(),
        starting: Vec::new(),
        console: Vec::new(),
    };
    b.dev.console_input(bytes, &mut fx);
    for d in fx.out {
        match d {
            Deferred::Irq(cpu, true) => accel.set_irq(cpu, irq::EXT, b),
            Deferred::Irq(cpu, false) => accel.reset_irq(cpu, irq::EXT, b),
            other => unreachable!("console input asked for {other:?}"),
        }
    }
}

impl PseriesVcpu {
    /// Applies what a device model asked for, under the BQL held by `b`.
    pub(super) fn apply<'a, S: Strategy>(
        &mut self,
        accel: &'a MachineAccel<S>,
        b: &mut StatGuard<'a, Devices>,
        fx: Fx<'_, S>,
    ) {
        if !fx.console.is_empty() {
            b.console.write(&fx.console);
        }
        for d in fx.out {
            match d {
                Deferred::Irq(cpu, true) => accel.set_irq(cpu, irq::EXT, b),
                Deferred::Irq(cpu, false) => accel.reset_irq(cpu, irq::EXT, b),
                Deferred::Prod(cpu) => accel.set_irq(cpu, irq::PROD, b),
                Deferred::Start(cpu, entry, r3) => {
                    let le = b.dev.interrupt_le;
                    accel.async_run_on_cpu(cpu, move |v: &mut PseriesVcpu| {
                        let st = &mut v.engine.cpu.st;
                        st.pc = entry;
                        st.gpr[3] = r3;
                        st.msr = msr::SF | msr::ME;
                        crate::cpu::interrupt::set_interrupt_little_endian(st, le);
                    });
                    accel.set_stopped(cpu, false, b);
                }
                Deferred::StopSelf(cpu) => accel.set_stopped(cpu, true, b),
                Deferred::SystemReset(cpu) => {
                    accel.async_run_on_cpu(cpu, |v: &mut PseriesVcpu| {
                        let sreset = Pending {
                            system_reset: true,
                            ..Pending::default()
                        };
                        if let Some(vector) = v.engine.cpu.take_async(sreset) {
                            v.note_interrupt(vector);
                        }
                    });
                    // Wakes it if it is ceded.
                    accel.set_irq(cpu, irq::PROD, b);
                }
                Deferred::Exit(e) => {
                    accel.request_shutdown(b);
                    self.shared.end.finish(e);
                }
                Deferred::FlushAll(own) => self.flush_all_cpus(accel, own),
                Deferred::InterruptLe(le) => {
                    crate::cpu::interrupt::set_interrupt_little_endian(&mut self.engine.cpu.st, le);
                    for j in (0..accel.vcpus.len()).filter(|&j| j != self.index) {
                        accel.async_run_on_cpu(j, move |v: &mut PseriesVcpu| {
                            crate::cpu::interrupt::set_interrupt_little_endian(
                                &mut v.engine.cpu.st,
                                le,
                            )
                        });
                    }
                }
            }
        }
    }

    /// `tlb_flush_all_cpus` of the configured mode (docs/locking.md): the others get queued jobs;
    /// the source flushes itself now (async: only the entries for the pages of `own`) or as
    /// exclusive work (synced, synced-exit).
    fn flush_all_cpus<S: Strategy>(&mut self, accel: &MachineAccel<S>, own: Invalidated) {
        for j in (0..accel.vcpus.len()).filter(|&j| j != self.index) {
            let v = &accel.vcpus[j];
            if self.shared.flush_coalesce && v.flush_queued.swap(true, Ordering::SeqCst) {
                v.counters
                    .flush_jobs_coalesced
                    .fetch_add(1, Ordering::Relaxed);
                continue;
            }
            accel.queue_tlb_flush(j, PseriesVcpu::flush_job);
        }
        match self.shared.flush_mode {
            TlbFlushMode::Async => self.flush_self_pages(own),
            TlbFlushMode::Synced | TlbFlushMode::SyncedExit => {
                accel.async_safe_run_on_cpu(self.index, PseriesVcpu::flush_self);
                if self.shared.flush_mode == TlbFlushMode::SyncedExit {
                    accel.vcpus[self.index]
                        .exit_request
                        .store(true, Ordering::SeqCst);
                }
            }
        }
    }
}
