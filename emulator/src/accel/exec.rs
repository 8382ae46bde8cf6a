//! The vCPU thread: the outer loop (sleep while idle, run queued work) around the exec loop
//! (halt → exception → interrupt → exit request → run), with the locks of each strategy.

use super::{Accel, Outer};
use crate::sync::prim::Ordering;
use crate::sync::vclock;
use crate::sync::{Site, StatGuard, Strategy};

/// Why a stint of guest code ended.
pub enum BlockExit<E> {
    /// Ran to a block boundary; continue.
    Continue,
    /// An exception to deliver (or a hypercall to perform) under the BQL.
    Exception(E),
}

/// The vCPU-private side, supplied by the machine. Called only on the vCPU's own thread.
pub trait VcpuRunner<S: Strategy>: Sized + Send + 'static {
    /// State protected by the BQL (the machine's devices).
    type Devices: Send;
    type Exception;

    /// Whether a halted vCPU can resume: an interrupt it can take, a prod.
    fn has_work(&self, accel: &Accel<S, Self, Self::Devices>, i: usize) -> bool;

    /// Runs guest code without locks until a block boundary or an exception. Must return
    /// at the latest when `exit_request` of this vCPU is set (checked at block entry).
    fn run(
        &mut self,
        accel: &Accel<S, Self, Self::Devices>,
        i: usize,
    ) -> BlockExit<Self::Exception>;

    /// BQL site of an exception (hypercalls are counted apart from other exceptions).
    fn exception_site(e: &Self::Exception) -> Site;

    /// Delivers an exception or performs a hypercall, under the BQL.
    fn handle_exception<'a>(
        &mut self,
        e: Self::Exception,
        accel: &'a Accel<S, Self, Self::Devices>,
        i: usize,
        bql: &mut StatGuard<'a, Self::Devices>,
    );

    /// Handles pending interrupt requests (those the CPU can take now), under the BQL.
    fn handle_interrupt<'a>(
        &mut self,
        accel: &'a Accel<S, Self, Self::Devices>,
        i: usize,
        bql: &mut StatGuard<'a, Self::Devices>,
    );
}

/// The exec loop: one stint in guest code, between `exec_start` and `exec_end`.
fn cpu_exec<S: Strategy, R: VcpuRunner<S>>(accel: &Accel<S, R, R::Devices>, i: usize, r: &mut R) {
    let v = &accel.vcpus[i];
    loop {
        if v.halted.load(Ordering::SeqCst) {
            let work = if S::BQL_OUTSIDE_GUEST {
                r.has_work(accel, i)
            } else {
                // The machine's interrupt state is protected by the BQL.
                let _b = accel.bql(Site::BqlHasWork);
                r.has_work(accel, i)
            };
            if !work {
                return;
            }
            accel.set_halted(i, false);
        }
        if v.interrupt_request.load(Ordering::SeqCst) != 0 {
            let mut b = accel.bql(Site::BqlInterrupt);
            r.handle_interrupt(accel, i, &mut b);
        }
        if v.exit_request.load(Ordering::SeqCst) {
            v.exit_request.store(false, Ordering::SeqCst);
            return;
        }
        vclock::claim_core();
        let exit = r.run(accel, i);
        // Virtual time: charge the stint, and park while a quantum ahead of the slowest.
        vclock::pace();
        if let BlockExit::Exception(e) = exit {
            let mut b = accel.bql(R::exception_site(&e));
            r.handle_exception(e, accel, i, &mut b);
        }
        if accel.deferred_due(i) {
            // A flush job waited for this vCPU's clock, which has reached it.
            return;
        }
    }
}

/// Body of vCPU thread `i` until the machine shuts down; returns the lock statistics of
/// this thread (also merged into the machine's).
pub fn vcpu_thread<S: Strategy, R: VcpuRunner<S>>(
    accel: &Accel<S, R, R::Devices>,
    i: usize,
    r: &mut R,
) -> crate::sync::LockStats {
    let v = &accel.vcpus[i];
    if let Some(vt) = &accel.vtime {
        vclock::attach(vt, i, 0);
    }
    let mut outer = accel.enter_outer(i);
    loop {
        accel.wait_io_event(i, &mut outer, || r.has_work(accel, i));
        accel.drain_work(i, &mut outer, r);
        if accel.shutdown.load(Ordering::SeqCst) {
            break;
        }
        if v.stopped.load(Ordering::SeqCst) || v.work_pending.load(Ordering::SeqCst) {
            continue;
        }
        drop(std::mem::replace(&mut outer, Outer::None));
        accel.exclusive.exec_start(&v.exec);
        cpu_exec(accel, i, r);
        accel.exclusive.exec_end(&v.exec);
        outer = accel.enter_outer(i);
    }
    drop(outer);
    vclock::detach();
    accel.stats.absorb_thread()
}
