//! `StatMutex`: a mutex that records statistics per call site, and the per-thread record of
//! held locks that backs the lock-order assertions (BQL before any CPU lock).

use super::prim::{Condvar, Mutex, MutexGuard};
use super::stats::{self, Site};
use super::vclock::{self, LockTime, Rule};
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::time::Instant;

/// Lock classes whose ordering is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Bql,
    /// The CPU lock of vCPU n.
    Cpu(usize),
    /// Leaf locks (TLB, work queue, timer list, exclusive list): no ordering constraint
    /// beyond not blocking while holding them.
    Leaf,
}

#[cfg(all(debug_assertions, not(feature = "loom")))]
mod order {
    use super::Class;
    use std::cell::{Cell, RefCell};

    thread_local! {
        static BQL: Cell<bool> = const { Cell::new(false) };
        static CPUS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    }

    pub fn acquiring(c: Class) {
        match c {
            Class::Bql => {
                assert!(!BQL.get(), "BQL taken twice by one thread");
                CPUS.with(|v| {
                    assert!(
                        v.borrow().is_empty(),
                        "BQL taken while holding CPU lock(s) {:?}",
                        v.borrow()
                    )
                });
            }
            Class::Cpu(n) => {
                CPUS.with(|v| assert!(!v.borrow().contains(&n), "CPU lock {n} taken twice"))
            }
            Class::Leaf => {}
        }
    }

    pub fn acquired(c: Class) {
        match c {
            Class::Bql => BQL.set(true),
            Class::Cpu(n) => CPUS.with(|v| v.borrow_mut().push(n)),
            Class::Leaf => {}
        }
    }

    pub fn released(c: Class) {
        match c {
            Class::Bql => BQL.set(false),
            Class::Cpu(n) => CPUS.with(|v| v.borrow_mut().retain(|&x| x != n)),
            Class::Leaf => {}
        }
    }

    pub fn bql_held() -> bool {
        BQL.get()
    }

    pub fn cpu_locks_held() -> usize {
        CPUS.with(|v| v.borrow().len())
    }
}

#[cfg(not(all(debug_assertions, not(feature = "loom"))))]
mod order {
    use super::Class;
    #[inline(always)]
    pub fn acquiring(_: Class) {}
    #[inline(always)]
    pub fn acquired(_: Class) {}
    #[inline(always)]
    pub fn released(_: Class) {}
}

/// Debug-build check that the calling thread holds the BQL.
#[inline(always)]
pub fn assert_bql_held() {
    #[cfg(all(debug_assertions, not(feature = "loom")))]
    assert!(order::bql_held(), "BQL not held");
}

/// Debug-build check that the calling thread holds no CPU lock and not the BQL (exclusive
/// work must run with neither, or a vCPU leaving guest code would deadlock on it).
#[inline(always)]
pub fn assert_no_locks_held() {
    #[cfg(all(debug_assertions, not(feature = "loom")))]
    assert!(
        !order::bql_held() && order::cpu_locks_held() == 0,
        "lock held where none may be"
    );
}

pub struct StatMutex<T> {
    m: Mutex<T>,
    class: Class,
    /// The last hold in virtual time (`--clock virtual`; untouched on host time).
    vt: LockTime,
}

pub struct StatGuard<'a, T> {
    /// Dropped by hand, so that on virtual time the unlock can be left out of the clock.
    g: ManuallyDrop<MutexGuard<'a, T>>,
    site: Site,
    class: Class,
    since: Option<Instant>,
    vt: &'a LockTime,
    rule: Rule,
    /// Where the hold began in virtual time (virtual time only).
    v_since: vclock::HoldStart,
}

impl<T> StatMutex<T> {
    pub fn new(t: T, class: Class) -> Self {
        Self {
            m: Mutex::new(t),
            class,
            vt: LockTime::default(),
        }
    }

    /// How virtual time charges this lock (vclock.rs): the BQL, which every strategy's
    /// scaling turns on, is a queue in virtual time; the short per-vCPU locks are measured
    /// but charge no wait.
    fn rule(&self) -> Rule {
        if self.class == Class::Bql {
            Rule::Fifo
        } else {
            Rule::Untimed
        }
    }

    /// Locks, counting the acquisition at `site` (and its wait when contended). On virtual
    /// time the acquirer's clock also follows the lock's (its virtual wait counted at `site`).
    #[inline]
    pub fn lock(&self, site: Site) -> StatGuard<'_, T> {
        order::acquiring(self.class);
        let virtual_time = vclock::active();
        let mark = if virtual_time { vclock::mark() } else { None };
        let (g, mark) = match self.m.try_lock() {
            Some(g) => {
                stats::record_acquire(site, false, 0);
                (g, mark)
            }
            None => {
                let t = Instant::now();
                let g = if virtual_time {
                    vclock::contended(
                        || (!self.m.is_locked()).then(|| self.m.try_lock()).flatten(),
                        || self.m.lock(),
                    )
                } else {
                    self.m.lock()
                };
                stats::record_acquire(site, true, stats::since(t));
                (g, if virtual_time { vclock::mark() } else { None })
            }
        };
        let v_since = if virtual_time {
            let since = vclock::hold_start(&self.vt, self.rule());
            // The acquisition and the hold's bookkeeping are left out of the hold: both
            // touch lines other vCPUs write (the lock word, the lock's queue state, the
            // slot others serve waits into), which move between cores when the vCPU
            // threads run on more than one; what that costs is the line cost's.
            vclock::leave_out_since(mark);
            vclock::hold_begins(since)
        } else {
            vclock::HoldStart::default()
        };
        order::acquired(self.class);
        StatGuard {
            g: ManuallyDrop::new(g),
            site,
            class: self.class,
            since: stats::profiling().then(Instant::now),
            vt: &self.vt,
            rule: self.rule(),
            v_since,
        }
    }
}

impl<T> StatGuard<'_, T> {
    /// Sleeps on `cv` (releasing the lock meanwhile), counting the sleep at `sleep_site`.
    /// The hold time excludes the sleep; the reacquisition is counted at the guard's site.
    /// On virtual time the sleeper is out of the runnable set meanwhile; what wakes it moves
    /// its clock (`vclock::blocking`), not the lock.
    pub fn wait(&mut self, cv: &Condvar, sleep_site: Site) {
        self.end_hold();
        order::released(self.class);
        self.end_virtual_hold();
        let t = Instant::now();
        vclock::blocking(|| cv.wait(&mut self.g));
        self.v_since = vclock::hold_start(self.vt, self.rule);
        stats::record_acquire(sleep_site, false, 0);
        stats::record_hold(sleep_site, stats::since(t));
        order::acquired(self.class);
        self.since = stats::profiling().then(Instant::now);
    }

    /// As `wait`, for at most `d`; returns true on timeout.
    pub fn wait_for(&mut self, cv: &Condvar, sleep_site: Site, d: std::time::Duration) -> bool {
        self.end_hold();
        order::released(self.class);
        self.end_virtual_hold();
        let t = Instant::now();
        let timed_out = vclock::blocking(|| cv.wait_for(&mut self.g, d));
        self.v_since = vclock::hold_start(self.vt, self.rule);
        stats::record_acquire(sleep_site, false, 0);
        stats::record_hold(sleep_site, stats::since(t));
        order::acquired(self.class);
        self.since = stats::profiling().then(Instant::now);
        timed_out
    }

    /// Ends the hold on virtual time: its hold and (Fifo) arrival at the guard's site.
    fn end_virtual_hold(&self) {
        let hold = vclock::released(self.vt, self.rule, self.v_since, self.site);
        stats::record_virtual_hold(self.site, hold);
    }

    fn end_hold(&mut self) {
        if let Some(t) = self.since.take() {
            stats::record_hold(self.site, stats::since(t));
        }
    }
}

impl<T> Drop for StatGuard<'_, T> {
    fn drop(&mut self) {
        self.end_hold();
        order::released(self.class);
        self.end_virtual_hold();
        // SAFETY: `g` is not used after this; the guard is being dropped.
        unsafe { ManuallyDrop::drop(&mut self.g) };
        if vclock::active() {
            // Waking a parked waiter, or taking the lock word's line back from a spinning
            // one: the line cost's, as the acquisition (`vclock::leave_out_since`).
            vclock::skip_bookkeeping();
        }
    }
}

impl<T> Deref for StatGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.g
    }
}

impl<T> DerefMut for StatGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.g
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "BQL taken while holding CPU lock")]
    fn bql_after_cpu_lock_is_caught() {
        let bql = StatMutex::new((), Class::Bql);
        let cpu = StatMutex::new((), Class::Cpu(0));
        let _c = cpu.lock(Site::CpuLockExecLoop);
        let _b = bql.lock(Site::BqlHcall);
    }

    #[test]
    fn contention_is_counted() {
        // The waiter must reach its lock call while we hold the lock; retry the (rare) case
        // where the scheduler did not run it in time.
        let m = std::sync::Arc::new(StatMutex::new(0u32, Class::Leaf));
        for attempt in 1..=20 {
            let g = m.lock(Site::WorkQueue);
            let m2 = m.clone();
            let h = std::thread::spawn(move || {
                *m2.lock(Site::WorkQueue) += 1;
                stats::take_local()
            });
            std::thread::sleep(std::time::Duration::from_millis(10 * attempt));
            drop(g);
            let other = h.join().unwrap();
            let t = other.get(Site::WorkQueue);
            assert_eq!(t.acquisitions, 1);
            if t.contended == 1 {
                assert!(t.wait_ns > 0 && t.max_wait_ns == t.wait_ns);
                assert_eq!(*m.lock(Site::WorkQueue), attempt as u32);
                return;
            }
        }
        panic!("the waiting thread never contended");
    }
}
