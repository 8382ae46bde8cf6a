//! Exclusive sections: run something while every other vCPU is outside guest code.
//!
//! The requester counts the vCPUs that are running guest code, kicks them and waits until each
//! has left (`exec_end` decrements the count). Idle vCPUs are not waited for, but block in
//! `exec_start` until the section ends. The vCPU side costs two atomics and a fence per stint in
//! guest code when no section is pending.

use crate::sync::prim::{AtomicBool, AtomicUsize, Condvar, Ordering, fence};
use crate::sync::{Class, Site, StatGuard, StatMutex};

/// Per-vCPU part of the protocol.
#[derive(Default)]
pub struct ExecState {
    /// Inside guest code (between `exec_start` and `exec_end`).
    pub running: AtomicBool,
    /// The pending section counted this vCPU and waits for its `exec_end`; protected by the
    /// exclusive lock.
    has_waiter: AtomicBool,
}

pub struct Exclusive {
    lock: StatMutex<()>,
    /// 0: no section; 1: a section is running or about to; 1 + n: waiting for n vCPUs.
    pending: AtomicUsize,
    exclusive_cond: Condvar,
    resume_cond: Condvar,
}

impl Default for Exclusive {
    fn default() -> Self {
        Self::new()
    }
}

impl Exclusive {
    pub fn new() -> Self {
        Self {
            lock: StatMutex::new((), Class::Leaf),
            pending: AtomicUsize::new(0),
            exclusive_cond: Condvar::new(),
            resume_cond: Condvar::new(),
        }
    }

    fn wait_idle(&self, g: &mut StatGuard<'_, ()>, site: Site) {
        while self.pending.load(Ordering::SeqCst) != 0 {
            g.wait(&self.resume_cond, site);
        }
    }

    /// Waits until every vCPU in `cpus` is outside guest code. `kick(i)` must make vCPU `i`
    /// leave guest code soon. Must be called with no BQL and no CPU lock held.
    pub fn start<'a>(&self, cpus: impl IntoIterator<Item = &'a ExecState>, kick: impl Fn(usize)) {
        crate::sync::lock::assert_no_locks_held();
        let mut g = self.lock.lock(Site::ExclusiveLock);
        self.wait_idle(&mut g, Site::ExclusiveStart);
        self.pending.store(1, Ordering::SeqCst);
        // Pairs with the fence in `exec_start`: either the vCPU sees `pending` or we see it running.
        fence(Ordering::SeqCst);
        for (i, c) in cpus.into_iter().enumerate() {
            if c.running.load(Ordering::SeqCst) {
                c.has_waiter.store(true, Ordering::Relaxed);
                self.pending.fetch_add(1, Ordering::SeqCst);
                kick(i);
            }
        }
        while self.pending.load(Ordering::SeqCst) > 1 {
            g.wait(&self.exclusive_cond, Site::ExclusiveStart);
        }
    }

    pub fn end(&self) {
        let _g = self.lock.lock(Site::ExclusiveLock);
        self.pending.store(0, Ordering::SeqCst);
        self.resume_cond.notify_all();
    }

    /// A vCPU enters guest code; blocks while another thread's section runs.
    #[inline]
    pub fn exec_start(&self, me: &ExecState) {
        me.running.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.pending.load(Ordering::SeqCst) != 0 {
            self.exec_start_slow(me);
        }
    }

    #[cold]
    fn exec_start_slow(&self, me: &ExecState) {
        let mut g = self.lock.lock(Site::ExclusiveLock);
        if !me.has_waiter.load(Ordering::Relaxed) {
            // Not counted by the pending section: wait for it to finish before running.
            me.running.store(false, Ordering::SeqCst);
            self.wait_idle(&mut g, Site::ExclusiveBlocked);
            me.running.store(true, Ordering::SeqCst);
        }
        // Counted: it waits for our exec_end, which comes soon (we were kicked).
    }

    /// A vCPU leaves guest code.
    #[inline]
    pub fn exec_end(&self, me: &ExecState) {
        me.running.store(false, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.pending.load(Ordering::SeqCst) != 0 {
            let _g = self.lock.lock(Site::ExclusiveLock);
            if me.has_waiter.swap(false, Ordering::Relaxed)
                && self.pending.fetch_sub(1, Ordering::SeqCst) == 2
            {
                self.exclusive_cond.notify_all();
            }
        }
    }
}
