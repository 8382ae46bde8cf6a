//! Lock statistics, like QEMU's sync profiler: per lock class and call site, acquisitions,
//! contended acquisitions, total/max wait and total hold time.
//!
//! Counting is always on and cheap: each thread counts into its own table, merged into its
//! machine's `StatsSink` when the thread ends. Waits are timed only when the lock was
//! contended (the thread is about to sleep anyway); hold times only with `--sync-profile`.

use std::cell::RefCell;
use std::sync::Mutex as StdMutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

macro_rules! sites {
    ($($(#[$doc:meta])* $v:ident = $name:literal,)*) => {
        /// A lock class and call-site class; the names are the keys of the run report.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Site { $($(#[$doc])* $v,)* }

        impl Site {
            pub const ALL: &'static [Site] = &[$(Site::$v,)*];
            pub const COUNT: usize = Self::ALL.len();
            pub fn name(self) -> &'static str {
                match self { $(Site::$v => $name,)* }
            }
        }
    };
}

sites! {
    /// vCPU thread outside guest code (baseline only).
    BqlExecLoop = "bql.exec_loop",
    /// Idle sleep of a halted vCPU (baseline only: the condvar wait with the BQL).
    BqlIdleWait = "bql.idle_wait",
    /// `has_work` of a halted vCPU needing the machine's interrupt state.
    BqlHasWork = "bql.has_work",
    /// Handling a pending interrupt in the exec loop.
    BqlInterrupt = "bql.interrupt",
    /// Delivering a synchronous exception (page fault, program, system call).
    BqlException = "bql.exception",
    /// A hypercall (`sc 1`).
    BqlHcall = "bql.hcall",
    /// A queued work item other than a TLB flush.
    BqlWorkItem = "bql.work_item",
    /// A cross-vCPU TLB flush job.
    BqlTlbFlushItem = "bql.tlb_flush_item",
    /// Queueing a JIT code cache flush (baseline: work is queued under the BQL).
    BqlJitFlush = "bql.jit_flush",
    /// Raising an interrupt on a vCPU from outside the BQL.
    BqlSetIrq = "bql.set_irq",
    /// The I/O thread (timers, console input).
    BqlIoThread = "bql.io_thread",
    /// Machine set-up and tear-down on the main thread.
    BqlMain = "bql.main",
    /// A vCPU's own lock outside guest code (per-cpu strategies).
    CpuLockExecLoop = "cpu_lock.exec_loop",
    /// Another thread queueing work on / kicking / reading a vCPU under its lock.
    CpuLockRemote = "cpu_lock.remote",
    /// Writing a vCPU's interrupt_request under its lock.
    CpuLockSetIrq = "cpu_lock.set_irq",
    /// The work-queue lock of baseline.
    WorkQueue = "work_queue",
    /// A vCPU's TLB lock taken to flush it.
    TlbLockFlush = "tlb_lock.flush",
    /// Waiting for every running vCPU to leave guest code (start_exclusive).
    ExclusiveStart = "exclusive.start",
    /// A vCPU blocked at exec_start by another's exclusive section.
    ExclusiveBlocked = "exclusive.blocked",
    /// The list lock of the exclusive-section protocol.
    ExclusiveLock = "exclusive.lock",
    /// Idle sleep on a condition variable (time asleep).
    CondIdle = "cond.idle",
    /// Waiting for a synchronous `run_on_cpu` to complete.
    CondRunOnCpu = "cond.run_on_cpu",
    /// The I/O thread's timer list.
    TimerList = "timer_list",
}

/// Counters of one site.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SiteStats {
    pub acquisitions: u64,
    pub contended: u64,
    pub wait_ns: u64,
    pub max_wait_ns: u64,
    pub hold_ns: u64,
    /// Virtual time the acquirers' clocks moved to get the lock (`--clock virtual`).
    pub virtual_wait_ns: u64,
    /// Virtual time the lock was held from this site.
    pub virtual_hold_ns: u64,
}

impl SiteStats {
    fn add(&mut self, o: &SiteStats) {
        self.acquisitions += o.acquisitions;
        self.contended += o.contended;
        self.wait_ns += o.wait_ns;
        self.max_wait_ns = self.max_wait_ns.max(o.max_wait_ns);
        self.hold_ns += o.hold_ns;
        self.virtual_wait_ns += o.virtual_wait_ns;
        self.virtual_hold_ns += o.virtual_hold_ns;
    }
}

/// Statistics of every site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockStats(pub [SiteStats; Site::COUNT]);

impl Default for LockStats {
    fn default() -> Self {
        Self([SiteStats::default(); Site::COUNT])
    }
}

impl LockStats {
    pub fn get(&self, s: Site) -> &SiteStats {
        &self.0[s as usize]
    }

    pub fn merge(&mut self, o: &LockStats) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            a.add(b);
        }
    }

    /// Sites with any acquisition, by name, for the run report.
    pub fn to_map(&self) -> std::collections::BTreeMap<&'static str, SiteStats> {
        Site::ALL
            .iter()
            .filter(|s| self.get(**s).acquisitions > 0)
            .map(|s| (s.name(), *self.get(*s)))
            .collect()
    }

    /// A top-N table like QEMU's `info sync-profile`, sorted by total wait then hold.
    pub fn table(&self, n: usize) -> String {
        let mut rows: Vec<(&Site, &SiteStats)> = Site::ALL
            .iter()
            .map(|s| (s, self.get(*s)))
            .filter(|(_, t)| t.acquisitions > 0)
            .collect();
        rows.sort_by_key(|(_, t)| std::cmp::Reverse((t.wait_ns, t.hold_ns, t.acquisitions)));
        let mut out = format!(
            "{:<22} {:>12} {:>10} {:>12} {:>12} {:>12} {:>12}\n",
            "site", "acquisitions", "contended", "wait ms", "max wait us", "hold ms", "avg hold ns"
        );
        for (s, t) in rows.into_iter().take(n) {
            out += &format!(
                "{:<22} {:>12} {:>10} {:>12.3} {:>12.1} {:>12.3} {:>12}\n",
                s.name(),
                t.acquisitions,
                t.contended,
                t.wait_ns as f64 / 1e6,
                t.max_wait_ns as f64 / 1e3,
                t.hold_ns as f64 / 1e6,
                t.hold_ns.checked_div(t.acquisitions).unwrap_or(0),
            );
        }
        out
    }
}

static PROFILE: AtomicBool = AtomicBool::new(false);

thread_local! {
    static LOCAL: RefCell<LockStats> = RefCell::new(LockStats::default());
}

/// Turns hold-time measurement on (`--sync-profile`).
pub fn set_profiling(on: bool) {
    PROFILE.store(on, Ordering::Relaxed);
}

#[inline]
pub fn profiling() -> bool {
    PROFILE.load(Ordering::Relaxed)
}

/// Records one acquisition at `site`; `wait_ns` is the time spent waiting when contended.
#[inline]
pub fn record_acquire(site: Site, contended: bool, wait_ns: u64) {
    LOCAL.with(|l| {
        let t = &mut l.borrow_mut().0[site as usize];
        t.acquisitions += 1;
        if contended {
            t.contended += 1;
            t.wait_ns += wait_ns;
            t.max_wait_ns = t.max_wait_ns.max(wait_ns);
        }
    });
}

/// Records `ns` of virtual wait at `site` (a no-op for 0).
#[inline]
pub fn record_virtual_wait(site: Site, ns: u64) {
    if ns != 0 {
        LOCAL.with(|l| l.borrow_mut().0[site as usize].virtual_wait_ns += ns);
    }
}

/// Records `ns` of virtual hold at `site` (a no-op for 0).
#[inline]
pub fn record_virtual_hold(site: Site, ns: u64) {
    if ns != 0 {
        LOCAL.with(|l| l.borrow_mut().0[site as usize].virtual_hold_ns += ns);
    }
}

#[inline]
pub fn record_hold(site: Site, hold_ns: u64) {
    LOCAL.with(|l| l.borrow_mut().0[site as usize].hold_ns += hold_ns);
}

/// This thread's counters since the last call, reset. Each machine thread hands its table
/// to the machine when it ends, so machines running side by side (tests) stay apart.
pub fn take_local() -> LockStats {
    LOCAL.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

/// A machine's merged table.
#[derive(Default)]
pub struct StatsSink(StdMutex<LockStats>);

impl StatsSink {
    /// Merges the calling thread's counters into this sink; returns them.
    pub fn absorb_thread(&self) -> LockStats {
        let local = take_local();
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .merge(&local);
        local
    }

    pub fn snapshot(&self) -> LockStats {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Nanoseconds since `t`.
#[inline]
pub fn since(t: Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_merge_across_threads() {
        let sink = std::sync::Arc::new(StatsSink::default());
        let s2 = sink.clone();
        std::thread::spawn(move || {
            record_acquire(Site::BqlHcall, false, 0);
            record_acquire(Site::BqlHcall, true, 500);
            s2.absorb_thread();
        })
        .join()
        .unwrap();
        std::thread::spawn({
            let s3 = sink.clone();
            move || {
                record_acquire(Site::BqlHcall, true, 200);
                record_hold(Site::BqlHcall, 1000);
                s3.absorb_thread();
            }
        })
        .join()
        .unwrap();
        let s = sink.snapshot();
        assert_eq!(
            *s.get(Site::BqlHcall),
            SiteStats {
                acquisitions: 3,
                contended: 2,
                wait_ns: 700,
                max_wait_ns: 500,
                hold_ns: 1000,
                virtual_wait_ns: 0,
                virtual_hold_ns: 0,
            }
        );
        assert!(s.table(5).contains("bql.hcall"));
        assert_eq!(
            s.to_map().keys().copied().collect::<Vec<_>>(),
            vec!["bql.hcall"]
        );
    }
}
