//! Multi-threaded execution: one host thread per vCPU, kicks, work queues, exclusive sections,
//! and where each strategy takes which lock (docs/locking.md, "Who takes which lock where").
//!
//! This module knows nothing of the ISA: the machine supplies the vCPU-private side through
//! [`exec::VcpuRunner`], and work items are closures over the vCPU's private context `C`.
//! Everything shared is reached through [`Accel`].

pub mod exclusive;
pub mod exec;
#[cfg(test)]
mod loom_tests;
pub mod timers;

use crate::sync::prim::{Arc, AtomicBool, AtomicU32, AtomicU64, Condvar, Ordering};
use crate::sync::vclock::{self, VirtualTime};
use crate::sync::{Class, Site, StatGuard, StatMutex, StatsSink, Strategy};
use exclusive::{Exclusive, ExecState};
use std::collections::VecDeque;
use std::marker::PhantomData;

/// How a queued work item runs on its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkKind {
    /// Needs the BQL (`async_run_on_cpu`, `run_on_cpu`).
    Plain,
    /// Runs without the BQL where the strategy has `async_run_on_cpu_no_bql`; elsewhere it is
    /// a plain item.
    NoBql,
    /// A cross-vCPU TLB flush: `NoBql` semantics, counted at its own statistics site.
    TlbFlush,
    /// Runs in an exclusive section with neither the BQL nor a CPU lock held.
    Exclusive,
}

type WorkFn<C> = Box<dyn FnOnce(&mut C) + Send>;

pub struct WorkItem<C> {
    f: WorkFn<C>,
    kind: WorkKind,
    /// Completion flag of a synchronous `run_on_cpu`.
    done: Option<Arc<AtomicBool>>,
    /// The sender's virtual clock when it queued the item (0 off virtual time).
    sent_at: u64,
}

/// State protected by a vCPU's CPU lock (in baseline the same mutex is only the queue lock).
pub struct CpuLocked<C> {
    pub work: VecDeque<WorkItem<C>>,
    /// Virtual time: TLB flush jobs that reached their target before its clock reached the
    /// sender's, sorted by `sent_at`; each runs when the clock gets there ([`Accel::drain_work`]).
    deferred: Vec<WorkItem<C>>,
}

/// The part of a vCPU that other threads touch.
pub struct VcpuShared<C> {
    pub index: usize,
    pub lock: StatMutex<CpuLocked<C>>,
    /// Idle sleep (halt_cond): waited on with the BQL in baseline, the CPU lock otherwise.
    halt_cond: Condvar,
    /// Completion of synchronous work (per-CPU strategies).
    cond: Condvar,
    /// Leave guest code at the next block entry (the kick).
    pub exit_request: AtomicBool,
    /// Pending-interrupt bits (machine-defined); written under the BQL (and the CPU lock in
    /// the per-CPU strategies), read lock-free by the vCPU.
    pub interrupt_request: AtomicU32,
    /// Lock-free "queue non-empty" hint, kept under the queue's lock.
    pub work_pending: AtomicBool,
    /// Halted in H_CEDE (or never started / stopped: see `stopped`).
    pub halted: AtomicBool,
    /// Stopped: not started yet by RTAS start-cpu, or after stop-self.
    pub stopped: AtomicBool,
    /// A remote full TLB flush is queued and not yet run (`--tlb-flush-coalesce`).
    pub flush_queued: AtomicBool,
    /// The earliest `sent_at` of the deferred flush jobs (`u64::MAX`: none): written under
    /// the queue's lock, read by the vCPU itself at each return from guest code.
    next_due: AtomicU64,
    pub exec: ExecState,
    pub counters: SharedCounters,
}

/// Counters kept with atomics because other threads update them.
#[derive(Default)]
pub struct SharedCounters {
    pub flush_jobs_queued: AtomicU64,
    pub flush_jobs_coalesced: AtomicU64,
    /// Flush jobs that waited for the target's clock (virtual time; [`Accel::drain_work`]).
    pub flush_jobs_deferred: AtomicU64,
    pub kicks: AtomicU64,
}

/// The accelerator state shared by every thread of a machine: the BQL with the devices it
/// protects (`D`), every vCPU's shared half, the exclusive-section state.
pub struct Accel<S: Strategy, C, D> {
    pub bql: StatMutex<D>,
    pub vcpus: Vec<VcpuShared<C>>,
    /// Completion of synchronous work in baseline (one global condvar, waited on with the BQL).
    work_cond: Condvar,
    pub exclusive: Exclusive,
    /// Set when the machine stops; every vCPU leaves its loop.
    pub shutdown: AtomicBool,
    pub stats: StatsSink,
    /// The vCPUs' clocks under `--clock virtual` (sync/vclock/); `None` on host time.
    pub vtime: Option<std::sync::Arc<VirtualTime>>,
    /// Whether a vCPU's TLB holds no translation (machine-supplied): a flush job that
    /// reaches such a vCPU early in virtual time can wait for its clock.
    tlb_clean: Option<fn(&C) -> bool>,
    _strategy: PhantomData<S>,
}

/// The lock a vCPU thread holds while outside guest code: the BQL (baseline) or its own CPU
/// lock. `None` only transiently, while a protocol step has dropped it.
pub enum Outer<'a, C, D> {
    Bql(StatGuard<'a, D>),
    Cpu(StatGuard<'a, CpuLocked<C>>),
    None,
}

impl<S: Strategy, C: Send + 'static, D: Send> Accel<S, C, D> {
    pub fn new(n: usize, devices: D) -> Self {
        Self {
            bql: StatMutex::new(devices, Class::Bql),
            vcpus: (0..n)
                .map(|index| VcpuShared {
                    index,
                    lock: StatMutex::new(
                        CpuLocked {
                            work: VecDeque::new(),
                            deferred: Vec::new(),
                        },
                        Class::Cpu(index),
                    ),
                    halt_cond: Condvar::new(),
                    cond: Condvar::new(),
                    exit_request: AtomicBool::new(false),
                    interrupt_request: AtomicU32::new(0),
                    work_pending: AtomicBool::new(false),
                    halted: AtomicBool::new(false),
                    stopped: AtomicBool::new(false),
                    flush_queued: AtomicBool::new(false),
                    next_due: AtomicU64::new(u64::MAX),
                    exec: ExecState::default(),
                    counters: SharedCounters::default(),
                })
                .collect(),
            work_cond: Condvar::new(),
            exclusive: Exclusive::new(),
            shutdown: AtomicBool::new(false),
            stats: StatsSink::default(),
            vtime: None,
            tlb_clean: None,
            _strategy: PhantomData,
        }
    }

    /// Runs the vCPUs on virtual host time.
    pub fn with_virtual_time(mut self, vt: std::sync::Arc<VirtualTime>) -> Self {
        self.vtime = Some(vt);
        self
    }

    /// On virtual time, lets a TLB flush job wait for its target's clock where `clean` says
    /// the target's TLB holds nothing to flush ([`Accel::drain_work`]).
    pub fn with_deferred_tlb_flushes(mut self, clean: fn(&C) -> bool) -> Self {
        self.tlb_clean = Some(clean);
        self
    }

    #[inline]
    pub fn bql(&self, site: Site) -> StatGuard<'_, D> {
        self.bql.lock(site)
    }

    /// Makes vCPU `i` leave guest code at its next block entry and wakes it if it sleeps.
    /// Baseline: the caller holds the BQL (the sleeper checks its predicate under it).
    pub fn kick(&self, i: usize) {
        if S::BQL_OUTSIDE_GUEST {
            crate::sync::lock::assert_bql_held();
        }
        let v = &self.vcpus[i];
        if S::BQL_OUTSIDE_GUEST {
            self.signal(v);
        } else {
            // Broadcast under the target's lock so a sleeper between its check and its wait
            // cannot miss it.
            let _g = v.lock.lock(Site::CpuLockRemote);
            self.signal(v);
        }
    }

    /// The kick itself: counts it, sets the exit flag and wakes a sleeper. The caller holds
    /// the lock the target sleeps with (the BQL in baseline, the target's CPU lock otherwise),
    /// which every kick site takes in its own way; the count is the same for every strategy.
    /// On virtual time the target is stamped with the sender's clock: if it sleeps, it wakes
    /// then. The stores into the target's lines are left out of the sender's clock (see
    /// [`Accel::queue`]); waking a sleeper, a system call, is charged.
    fn signal(&self, v: &VcpuShared<C>) {
        let lines = vclock::mark();
        vclock::stamp_target(self.vtime.as_ref(), v.index);
        v.counters.kicks.fetch_add(1, Ordering::Relaxed);
        v.exit_request.store(true, Ordering::SeqCst);
        vclock::leave_out_since(lines);
        v.halt_cond.notify_all();
    }

    /// A deliberately broken kick for the model checker's negative test.
    #[cfg(all(test, feature = "loom"))]
    fn kick_without_cpu_lock(&self, i: usize) {
        self.vcpus[i].exit_request.store(true, Ordering::SeqCst);
        self.vcpus[i].halt_cond.notify_all();
    }

    /// ORs interrupt bits into vCPU `i` and kicks it (`ppc_set_irq`): the caller holds the BQL.
    pub fn set_irq(&self, i: usize, bits: u32, bql: &StatGuard<'_, D>) {
        self.set_irq_at(i, bits, None, bql);
    }

    /// As [`Accel::set_irq`], and on virtual time the target wakes no earlier than `at` (a
    /// timer's deadline; the I/O thread has no clock of its own). The stamp is set under
    /// the lock the target sleeps with, as a kick's is: a vCPU about to sleep drops stamps
    /// sent before it checked for work.
    pub fn set_irq_at(&self, i: usize, bits: u32, at: Option<u64>, _bql: &StatGuard<'_, D>) {
        let v = &self.vcpus[i];
        let stamp = || {
            if let (Some(vt), Some(at)) = (&self.vtime, at) {
                vt.stamp_wake(i, at);
            }
        };
        if S::BQL_OUTSIDE_GUEST {
            stamp();
            v.interrupt_request.fetch_or(bits, Ordering::SeqCst);
            self.kick(i);
        } else {
            let _g = v.lock.lock(Site::CpuLockSetIrq);
            stamp();
            v.interrupt_request.fetch_or(bits, Ordering::SeqCst);
            self.signal(v);
        }
    }

    /// Clears interrupt bits of vCPU `i`: the caller holds the BQL.
    pub fn reset_irq(&self, i: usize, bits: u32, _bql: &StatGuard<'_, D>) {
        let v = &self.vcpus[i];
        if S::BQL_OUTSIDE_GUEST {
            v.interrupt_request.fetch_and(!bits, Ordering::SeqCst);
        } else {
            let _g = v.lock.lock(Site::CpuLockSetIrq);
            v.interrupt_request.fetch_and(!bits, Ordering::SeqCst);
        }
    }

    /// Queues `item` on vCPU `i` and kicks it. On virtual time, the push and the flag are
    /// left out of the sender's clock, as the lock's acquisition and release are: they
    /// write lines the target reads and writes (its queue, its flags), whose cost is where
    /// those lines happen to be — local to every thread on one host core, mostly in the
    /// other core's cache on two — and so the line cost's to charge (`--line-cost`, at the
    /// acquisition of a lock the target held last), not the host's placement. A flush of
    /// every TLB sends one job to each other vCPU inside the hypercall's BQL hold: on the
    /// bundled guest at N = 28 two host cores made each send 30 % dearer than one core,
    /// and the hold with it.
    fn queue(&self, i: usize, mut item: WorkItem<C>) {
        item.sent_at = vclock::stamp().unwrap_or(0);
        let v = &self.vcpus[i];
        let site = if S::BQL_OUTSIDE_GUEST {
            Site::WorkQueue
        } else {
            Site::CpuLockRemote
        };
        let mut q = v.lock.lock(site);
        let lines = vclock::mark();
        q.work.push_back(item);
        v.work_pending.store(true, Ordering::SeqCst);
        vclock::leave_out_since(lines);
        if S::BQL_OUTSIDE_GUEST {
            // Baseline: the sleeper waits with the BQL, which the caller holds.
            drop(q);
            self.kick(i);
        } else {
            // Under the target's lock, so a sleeper between its check and its wait cannot
            // miss it.
            self.signal(v);
        }
    }

    /// Fire-and-forget work that needs the BQL. Baseline: the caller holds the BQL.
    pub fn async_run_on_cpu(&self, i: usize, f: impl FnOnce(&mut C) + Send + 'static) {
        self.queue(
            i,
            WorkItem {
                f: Box::new(f),
                kind: WorkKind::Plain,
                done: None,
                sent_at: 0,
            },
        );
    }

    /// Fire-and-forget work that runs without the BQL in `cputlb-no-bql` (as plain work
    /// elsewhere, where this API does not exist).
    pub fn async_run_on_cpu_no_bql(&self, i: usize, f: impl FnOnce(&mut C) + Send + 'static) {
        self.queue(
            i,
            WorkItem {
                f: Box::new(f),
                kind: WorkKind::NoBql,
                done: None,
                sent_at: 0,
            },
        );
    }

    /// A cross-vCPU TLB flush job (see `WorkKind::TlbFlush`).
    pub fn queue_tlb_flush(&self, i: usize, f: impl FnOnce(&mut C) + Send + 'static) {
        self.vcpus[i]
            .counters
            .flush_jobs_queued
            .fetch_add(1, Ordering::Relaxed);
        self.queue(
            i,
            WorkItem {
                f: Box::new(f),
                kind: WorkKind::TlbFlush,
                done: None,
                sent_at: 0,
            },
        );
    }

    /// Work run while every other vCPU is outside guest code.
    pub fn async_safe_run_on_cpu(&self, i: usize, f: impl FnOnce(&mut C) + Send + 'static) {
        self.queue(
            i,
            WorkItem {
                f: Box::new(f),
                kind: WorkKind::Exclusive,
                done: None,
                sent_at: 0,
            },
        );
    }

    /// Runs `f` on vCPU `i` and waits for it. `bql` is the caller's BQL guard: baseline waits
    /// with it (on one global condvar); the per-CPU strategies release it first and wait on the
    /// target's condvar with the target's CPU lock, then take it again at `site`.
    /// The caller must not be vCPU `i` itself (run the function directly instead).
    pub fn run_on_cpu<'a>(
        &'a self,
        i: usize,
        f: impl FnOnce(&mut C) + Send + 'static,
        bql: &mut Option<StatGuard<'a, D>>,
        site: Site,
    ) {
        let done = Arc::new(AtomicBool::new(false));
        let item = WorkItem {
            f: Box::new(f),
            kind: WorkKind::Plain,
            done: Some(done.clone()),
            sent_at: 0,
        };
        if S::BQL_OUTSIDE_GUEST {
            let g = bql.as_mut().expect("run_on_cpu in baseline needs the BQL");
            self.queue(i, item);
            while !done.load(Ordering::SeqCst) {
                g.wait(&self.work_cond, Site::CondRunOnCpu);
            }
        } else {
            *bql = None;
            let v = &self.vcpus[i];
            {
                let mut q = v.lock.lock(Site::CpuLockRemote);
                q.work.push_back(item);
                v.work_pending.store(true, Ordering::SeqCst);
                self.signal(v);
                while !done.load(Ordering::SeqCst) {
                    q.wait(&v.cond, Site::CondRunOnCpu);
                }
            }
            *bql = Some(self.bql(site));
        }
    }

    /// Start of the vCPU thread's stay outside guest code: take the BQL or the own CPU lock.
    pub fn enter_outer(&self, i: usize) -> Outer<'_, C, D> {
        if S::BQL_OUTSIDE_GUEST {
            Outer::Bql(self.bql(Site::BqlExecLoop))
        } else {
            Outer::Cpu(self.vcpus[i].lock.lock(Site::CpuLockExecLoop))
        }
    }

    /// Sleeps while vCPU `i` is idle: no queued work, no shutdown, and stopped or halted without
    /// work. `has_work` is the machine's check (an interrupt it can take, a prod); it reads
    /// state protected by the BQL, so the per-CPU strategies take the BQL around it.
    pub fn wait_io_event<'a>(
        &'a self,
        i: usize,
        outer: &mut Outer<'a, C, D>,
        mut has_work: impl FnMut() -> bool,
    ) {
        let v = &self.vcpus[i];
        loop {
            if self.shutdown.load(Ordering::SeqCst) || v.work_pending.load(Ordering::SeqCst) {
                return;
            }
            let stopped = v.stopped.load(Ordering::SeqCst);
            if !stopped && !v.halted.load(Ordering::SeqCst) {
                return;
            }
            if !stopped {
                let work = if S::BQL_OUTSIDE_GUEST {
                    has_work()
                } else {
                    // Lock order: drop the CPU lock, take the BQL, retake the CPU lock.
                    *outer = Outer::None;
                    let _b = self.bql(Site::BqlHasWork);
                    *outer = Outer::Cpu(v.lock.lock(Site::CpuLockExecLoop));
                    let w = has_work();
                    drop(_b);
                    // The predicate may have changed while we held no lock: check again.
                    if !w
                        && (v.work_pending.load(Ordering::SeqCst)
                            || self.shutdown.load(Ordering::SeqCst))
                    {
                        return;
                    }
                    w
                };
                if work {
                    return;
                }
            }
            vclock::idle();
            match outer {
                Outer::Bql(g) => g.wait(&v.halt_cond, Site::BqlIdleWait),
                Outer::Cpu(g) => g.wait(&v.halt_cond, Site::CondIdle),
                Outer::None => unreachable!("wait_io_event without the outer lock"),
            }
        }
    }

    /// Runs vCPU `i`'s queued work with `ctx`, with each strategy's locks (docs/locking.md table).
    ///
    /// Virtual time: a TLB flush job sent at a virtual time the vCPU's clock has not reached
    /// yet, to a vCPU whose TLB holds nothing, waits until the clock gets there (the vCPU
    /// leaves guest code for it at the first return from guest code past that time:
    /// [`Accel::deferred_due`]). On a host with a core per vCPU the target runs meanwhile,
    /// fills its TLB and then flushes it; where vCPUs share cores, one that waited for a
    /// core would otherwise take every job sent meanwhile at once, the first flushing and
    /// the rest finding nothing to flush — on one core five times fewer flushes did work
    /// at N = 28 than on two (results/virtual/host-independence-20261205.md). Only a clean TLB
    /// waits: it holds no translation the sender's change could have left stale, and what it
    /// fills meanwhile is read from the table as changed.
    pub fn drain_work<'a>(&'a self, i: usize, outer: &mut Outer<'a, C, D>, ctx: &mut C) {
        let v = &self.vcpus[i];
        loop {
            let item = {
                let mut q = match outer {
                    Outer::Cpu(g) => Pop::Held(g),
                    _ => Pop::Taken(v.lock.lock(Site::WorkQueue)),
                };
                let q = q.get();
                let now = vclock::stamp();
                let it = loop {
                    if now.is_some_and(|c| q.deferred.first().is_some_and(|d| d.sent_at <= c)) {
                        break Some(q.deferred.remove(0));
                    }
                    let Some(it) = q.work.pop_front() else {
                        break None;
                    };
                    if it.kind == WorkKind::TlbFlush {
                        v.flush_queued.store(false, Ordering::SeqCst);
                        let early = now.is_some_and(|c| it.sent_at > c);
                        if early && self.tlb_clean.is_some_and(|clean| clean(ctx)) {
                            let at = q.deferred.partition_point(|d| d.sent_at <= it.sent_at);
                            q.deferred.insert(at, it);
                            v.counters
                                .flush_jobs_deferred
                                .fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    }
                    break Some(it);
                };
                if q.work.is_empty() {
                    v.work_pending.store(false, Ordering::SeqCst);
                }
                let due = q.deferred.first().map_or(u64::MAX, |d| d.sent_at);
                v.next_due.store(due, Ordering::Relaxed);
                it
            };
            let Some(item) = item else { return };
            if S::BQL_OUTSIDE_GUEST {
                if item.kind == WorkKind::Exclusive {
                    *outer = Outer::None;
                    self.run_exclusive(item.f, ctx);
                    *outer = Outer::Bql(self.bql(Site::BqlExecLoop));
                } else {
                    // Runs under the BQL this loop already holds; counted at its site so
                    // strategies compare item by item.
                    let site = if item.kind == WorkKind::TlbFlush {
                        Site::BqlTlbFlushItem
                    } else {
                        Site::BqlWorkItem
                    };
                    crate::sync::stats::record_acquire(site, false, 0);
                    (item.f)(ctx);
                }
                if let Some(done) = item.done {
                    done.store(true, Ordering::SeqCst);
                    self.work_cond.notify_all();
                }
            } else {
                *outer = Outer::None;
                match item.kind {
                    WorkKind::Exclusive => self.run_exclusive(item.f, ctx),
                    WorkKind::NoBql | WorkKind::TlbFlush if S::TLB_FLUSH_WITHOUT_BQL => {
                        (item.f)(ctx)
                    }
                    kind => {
                        let site = if kind == WorkKind::TlbFlush {
                            Site::BqlTlbFlushItem
                        } else {
                            Site::BqlWorkItem
                        };
                        let _b = self.bql(site);
                        (item.f)(ctx);
                    }
                }
                *outer = Outer::Cpu(v.lock.lock(Site::CpuLockExecLoop));
                if let Some(done) = item.done {
                    done.store(true, Ordering::SeqCst);
                    v.cond.notify_all();
                }
            }
        }
    }

    /// Whether vCPU `i`'s clock has reached a deferred flush job (called by the vCPU itself
    /// at a return from guest code, after the clock's sync).
    pub fn deferred_due(&self, i: usize) -> bool {
        let due = self.vcpus[i].next_due.load(Ordering::Relaxed);
        due != u64::MAX && vclock::stamp().is_some_and(|c| c >= due)
    }

    fn run_exclusive(&self, f: WorkFn<C>, ctx: &mut C) {
        self.start_exclusive();
        f(ctx);
        self.exclusive.end();
    }

    /// Waits until every other vCPU is outside guest code (no BQL or CPU lock may be held).
    pub fn start_exclusive(&self) {
        self.exclusive
            .start(self.vcpus.iter().map(|v| &v.exec), |i| {
                // Running vCPUs are in guest code, not asleep, so no lock is needed to wake
                // them; the kick is counted like every other.
                self.signal(&self.vcpus[i]);
            });
    }

    pub fn end_exclusive(&self) {
        self.exclusive.end();
    }

    /// Stops every vCPU loop (power-off, os-term, timeout); the caller holds the BQL.
    pub fn request_shutdown(&self, _bql: &StatGuard<'_, D>) {
        self.shutdown.store(true, Ordering::SeqCst);
        if let Some(vt) = &self.vtime {
            vt.stop();
        }
        for i in 0..self.vcpus.len() {
            self.kick(i);
        }
    }

    /// Stops or starts vCPU `i` (RTAS stop-self / start-cpu); the caller holds the BQL.
    pub fn set_stopped(&self, i: usize, stopped: bool, _bql: &StatGuard<'_, D>) {
        let v = &self.vcpus[i];
        if S::BQL_OUTSIDE_GUEST {
            v.stopped.store(stopped, Ordering::SeqCst);
            self.kick(i);
        } else {
            let _g = v.lock.lock(Site::CpuLockRemote);
            v.stopped.store(stopped, Ordering::SeqCst);
            self.signal(v);
        }
    }

    /// Marks vCPU `i` halted (H_CEDE) or running, from its own thread. Baseline protects
    /// `halted` with the BQL (held by the caller when halting); the per-CPU strategies with
    /// the CPU lock (taken here, after any BQL the caller holds).
    pub fn set_halted(&self, i: usize, halted: bool) {
        let v = &self.vcpus[i];
        if S::BQL_OUTSIDE_GUEST {
            v.halted.store(halted, Ordering::SeqCst);
        } else {
            let _g = v.lock.lock(Site::CpuLockRemote);
            v.halted.store(halted, Ordering::SeqCst);
        }
    }
}

/// The queue is reached through the held CPU lock (per-CPU strategies) or by taking the queue
/// lock briefly (baseline, where the loop holds the BQL instead).
enum Pop<'g, 'a, C> {
    Held(&'g mut StatGuard<'a, CpuLocked<C>>),
    Taken(StatGuard<'a, CpuLocked<C>>),
}

impl<C> Pop<'_, '_, C> {
    fn get(&mut self) -> &mut CpuLocked<C> {
        match self {
            Pop::Held(g) => g,
            Pop::Taken(g) => g,
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::sync::{Baseline, CputlbNoBql, PerCpuLock};

    /// Every way of kicking vCPU 0 once (kick, set_irq, each kind of queued work, stop and
    /// start, a synchronous run_on_cpu served by vCPU 0's thread); returns the kicks counted.
    fn kicks_of_each_site<S: Strategy>() -> u64 {
        let accel = Arc::new(Accel::<S, (), ()>::new(2, ()));
        {
            let bql = accel.bql(Site::BqlHcall);
            accel.kick(0);
            accel.set_irq(0, 1, &bql);
            accel.async_run_on_cpu(0, |_| {});
            accel.async_run_on_cpu_no_bql(0, |_| {});
            accel.queue_tlb_flush(0, |_| {});
            accel.set_stopped(0, true, &bql);
            accel.set_stopped(0, false, &bql);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let server = {
            let (accel, stop) = (accel.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let mut outer = accel.enter_outer(0);
                    accel.drain_work(0, &mut outer, &mut ());
                    drop(outer);
                    std::thread::yield_now();
                }
            })
        };
        let mut bql = Some(accel.bql(Site::BqlHcall));
        accel.run_on_cpu(0, |_| {}, &mut bql, Site::BqlHcall);
        drop(bql);
        stop.store(true, Ordering::SeqCst);
        server.join().unwrap();
        accel.vcpus[0].counters.kicks.load(Ordering::Relaxed)
    }

    /// vCPU 0's private side for the deferral test: whether its TLB is clean, and the
    /// clock at which each flush job ran on it.
    #[derive(Default)]
    struct FlushTarget {
        clean: bool,
        flushed_at: Vec<u64>,
    }

    /// vCPU 1 queues a flush job at 50 µs on its clock to vCPU 0, whose clock is at 1 µs;
    /// vCPU 0 then drains its queue with a clean or a dirty TLB, runs on to 61 µs and drains
    /// again. Returns the clocks at which the job ran and whether it was due before the
    /// second drain.
    fn flush_job_sent_ahead_of_its_target<S: Strategy>(clean: bool) -> (Vec<u64>, bool) {
        let vt = VirtualTime::new(2, 1_000_000_000);
        let accel = Arc::new(
            Accel::<S, FlushTarget, ()>::new(2, ())
                .with_virtual_time(vt.clone())
                .with_deferred_tlb_flushes(|t: &FlushTarget| t.clean),
        );
        let sender = {
            let (accel, vt) = (accel.clone(), vt.clone());
            std::thread::spawn(move || {
                vclock::manual_cpu_clock();
                vclock::attach(&vt, 1, 0);
                vclock::burn(50_000);
                vclock::sync();
                let _bql = S::BQL_OUTSIDE_GUEST.then(|| accel.bql(Site::BqlHcall));
                accel.queue_tlb_flush(0, |t: &mut FlushTarget| {
                    t.flushed_at.push(vclock::stamp().unwrap())
                });
                drop(_bql);
                vclock::detach();
            })
        };
        sender.join().unwrap();
        let target = std::thread::spawn(move || {
            vclock::manual_cpu_clock();
            vclock::attach(&vt, 0, 0);
            vclock::burn(1_000);
            vclock::sync();
            let mut t = FlushTarget {
                clean,
                ..FlushTarget::default()
            };
            let mut outer = accel.enter_outer(0);
            accel.drain_work(0, &mut outer, &mut t);
            drop(outer);
            // Guest code up to 61 µs (the TLB fills meanwhile).
            vclock::burn(60_000);
            vclock::sync();
            t.clean = false;
            let due = accel.deferred_due(0);
            let mut outer = accel.enter_outer(0);
            accel.drain_work(0, &mut outer, &mut t);
            drop(outer);
            vclock::detach();
            (t.flushed_at, due)
        });
        target.join().unwrap()
    }

    /// A flush job that reaches a clean TLB before the target's clock reaches the sender's
    /// runs when the clock gets there (as on a host with a core per vCPU, where the target
    /// would have run meanwhile); a dirty TLB is flushed at once (it may hold translations
    /// the sender's change made stale).
    #[test]
    fn a_flush_job_sent_ahead_of_a_clean_target_waits_for_its_clock() {
        fn check<S: Strategy>() {
            let (ran, due) = flush_job_sent_ahead_of_its_target::<S>(true);
            assert!(due, "{}: the job was not due at 61 µs", S::NAME);
            assert_eq!(ran.len(), 1, "{}: ran at {ran:?}", S::NAME);
            assert!(
                ran[0] >= 50_000,
                "{}: ran at {ran:?}, before 50 µs",
                S::NAME
            );
            let (ran, due) = flush_job_sent_ahead_of_its_target::<S>(false);
            assert!(!due, "{}", S::NAME);
            assert_eq!(ran.len(), 1, "{}: ran at {ran:?}", S::NAME);
            assert!(
                ran[0] < 50_000,
                "{}: a dirty TLB waited: ran at {ran:?}",
                S::NAME
            );
        }
        check::<Baseline>();
        check::<PerCpuLock>();
        check::<CputlbNoBql>();
    }

    #[test]
    fn every_strategy_counts_the_same_kicks() {
        assert_eq!(kicks_of_each_site::<Baseline>(), 8);
        assert_eq!(kicks_of_each_site::<PerCpuLock>(), 8);
        assert_eq!(kicks_of_each_site::<CputlbNoBql>(), 8);
    }
}
