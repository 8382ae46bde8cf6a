//! The clocks virtual time is charged from: the thread's CPU-time clock (a system call) and
//! the time-stamp counter that times the short intervals between its reads (module doc of
//! [`super`]), with the cost of a read, measured once per process; and the [`Timer`] that
//! charges a vCPU thread's intervals from them.

use super::Slot;
#[cfg(test)]
use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[cfg(test)]
thread_local! {
    /// Tests: a CPU clock advanced by hand ([`burn`]) instead of the thread's.
    #[cfg(test)]
    static MANUAL_CPU: Cell<Option<u64>> = const { Cell::new(None) };
    /// Tests: a time-stamp counter (1 ns a tick) advanced by hand ([`tick`]).
    #[cfg(test)]
    static MANUAL_TICKS: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Intervals shorter than this by the time-stamp counter are charged as measured, without
/// reading the CPU clock: a descheduling inside one would be shorter still (the CPU-clock
/// read that follows puts the total right). Stints of guest code run longer and read it;
/// hypercalls, lock holds and timebase reads in between mostly do not.
pub(super) const TSC_TRUST_NS: u64 = 20_000;

/// The time-stamp counter, where it ticks at a constant rate whatever the core's frequency
/// and sleep states (x86-64 with `constant_tsc` and `nonstop_tsc`), and its rate measured
/// against the monotonic clock once per process.
#[derive(Clone, Copy)]
pub(super) struct Tsc {
    pub(super) ns_per_tick: f64,
}

impl Tsc {
    pub(super) fn get() -> Option<Tsc> {
        static TSC: OnceLock<Option<Tsc>> = OnceLock::new();
        *TSC.get_or_init(Tsc::calibrate)
    }

    #[cfg(target_arch = "x86_64")]
    fn calibrate() -> Option<Tsc> {
        let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        let flags = info.lines().find(|l| l.starts_with("flags"))?;
        let has = |f: &str| flags.split_whitespace().any(|x| x == f);
        if !(has("constant_tsc") && has("nonstop_tsc")) {
            return None;
        }
        let t0 = std::time::Instant::now();
        let c0 = raw_ticks();
        while t0.elapsed() < Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        let (c1, t1) = (raw_ticks(), t0.elapsed());
        let ticks = c1.checked_sub(c0).filter(|&t| t > 0)?;
        Some(Tsc {
            ns_per_tick: t1.as_nanos() as f64 / ticks as f64,
        })
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn calibrate() -> Option<Tsc> {
        None
    }

    pub(super) fn ticks(self) -> u64 {
        #[cfg(test)]
        if let Some(t) = MANUAL_TICKS.get() {
            return t;
        }
        raw_ticks()
    }

    pub(super) fn ns(self, ticks: u64) -> u64 {
        (ticks as f64 * self.ns_per_tick) as u64
    }
}

#[cfg(target_arch = "x86_64")]
fn raw_ticks() -> u64 {
    // SAFETY: RDTSC reads a counter and has no memory effects; every x86-64 processor has it.
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn raw_ticks() -> u64 {
    0
}

/// How the calling thread's CPU time is read and charged.
pub(super) struct Timer {
    /// What one read of the thread's CPU clock costs it ([`read_cost_ns`]; 0 for a clock
    /// driven by hand).
    pub(super) read_cost: u64,
    /// The counter that times short intervals (`None`: every sync reads the CPU clock), and
    /// its value at the last sync point.
    pub(super) tsc: Option<Tsc>,
    pub(super) last_tick: u64,
    /// Counter time inside the current interval to leave out of it ([`super::leave_out_since`]).
    pub(super) excluded: u64,
}

impl Timer {
    /// The CPU time to charge since the last sync point; moves the slot's `last_cpu` past
    /// it. A short interval by the counter is charged as measured; any other reads the CPU
    /// clock and charges what it shows beyond what was charged (none if the counter charged
    /// more: that surplus is taken from the next charges, as `last_cpu` stays ahead).
    pub(super) fn charge(&mut self, s: &Slot) -> u64 {
        if let Some(tsc) = self.tsc {
            let now = tsc.ticks();
            let dt = tsc.ns(now.wrapping_sub(self.last_tick));
            if dt < TSC_TRUST_NS {
                self.last_tick = now;
                // Only this thread writes its slot's last_cpu; stored before the clock.
                let last = s.last_cpu.load(Ordering::Relaxed);
                s.last_cpu.store(last + dt, Ordering::SeqCst);
                return dt.saturating_sub(self.take_excluded(s));
            }
        }
        let now = thread_cpu_ns();
        if let Some(tsc) = self.tsc {
            // After the read: the rest of the system call is not the next interval's.
            self.last_tick = tsc.ticks();
        }
        let last = s.last_cpu.load(Ordering::Relaxed);
        s.last_cpu.store(now.max(last), Ordering::SeqCst);
        now.saturating_sub(last)
            .saturating_sub(self.read_cost)
            .saturating_sub(self.take_excluded(s))
    }

    /// What the next charge would add, by the counter, if it came now (`None`: the interval
    /// is too long for the counter, or there is none).
    pub(super) fn pending(&self) -> Option<u64> {
        let tsc = self.tsc?;
        let dt = tsc.ns(tsc.ticks().wrapping_sub(self.last_tick));
        (dt < TSC_TRUST_NS).then(|| dt.saturating_sub(self.excluded))
    }

    /// The time left out of the interval being charged, counted as skipped.
    fn take_excluded(&mut self, s: &Slot) -> u64 {
        let x = std::mem::take(&mut self.excluded);
        if x != 0 {
            s.skipped_ns.fetch_add(x, Ordering::Relaxed);
        }
        x
    }

    /// Leaves the time since the last sync point out (see [`super::skip_bookkeeping`]).
    pub(super) fn skip(&mut self, s: &Slot) {
        let Some(tsc) = self.tsc else { return };
        let now = tsc.ticks();
        let dt = tsc.ns(now.wrapping_sub(self.last_tick));
        if dt >= TSC_TRUST_NS {
            self.discard(s);
            return;
        }
        self.last_tick = now;
        // Counted as charged for the CPU clock's next settling, not added to the clock.
        let last = s.last_cpu.load(Ordering::Relaxed);
        s.last_cpu.store(last + dt, Ordering::SeqCst);
        s.skipped_ns.fetch_add(dt, Ordering::Relaxed);
    }

    /// Drops the CPU time since the last sync point (see [`super::discard`]).
    pub(super) fn discard(&mut self, s: &Slot) {
        s.last_cpu.store(thread_cpu_ns(), Ordering::SeqCst);
        if let Some(tsc) = self.tsc {
            self.last_tick = tsc.ticks();
        }
    }
}

pub(super) fn thread_cpu_ns() -> u64 {
    #[cfg(test)]
    if let Some(t) = MANUAL_CPU.get() {
        return t;
    }
    cpu_ns_of(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// What one read of the calling thread's CPU clock adds to that clock: the median gap
/// between back-to-back reads, measured once per process. Every interval between two sync
/// points holds one read's cost (the rest of the earlier read, the start of the later),
/// so each charge subtracts it: the clock then counts what a host-time run also spends.
pub fn read_cost_ns() -> u64 {
    static COST: OnceLock<u64> = OnceLock::new();
    *COST.get_or_init(|| {
        const READS: usize = 2_001;
        let mut gaps = Vec::with_capacity(READS);
        let mut prev = cpu_ns_of(libc::CLOCK_THREAD_CPUTIME_ID);
        for _ in 0..READS {
            let t = cpu_ns_of(libc::CLOCK_THREAD_CPUTIME_ID);
            gaps.push(t.saturating_sub(prev));
            prev = t;
        }
        gaps.sort_unstable();
        gaps[READS / 2]
    })
}

/// Whether short intervals are timed by the time-stamp counter on this host.
pub fn counter_timed() -> bool {
    Tsc::get().is_some()
}

/// CPU time of the clock `id` (this thread's, or another's from `pthread_getcpuclockid`).
pub(super) fn cpu_ns_of(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; an id that is no longer valid (a thread
    // that ended) makes the call fail and leave `ts` at 0, which reads as "no progress".
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// No CPU-time clock. Thread CPU-clock ids are negative (the kernel encodes the thread in
/// them, low bits 110), so the sentinel is one value no id takes, not "below zero".
pub(super) const NO_CLOCK: libc::clockid_t = -1;

/// The calling thread's CPU-time clock id, for other threads to read; [`NO_CLOCK`] in tests that
/// drive the clock by hand.
pub(super) fn own_cpu_clock() -> libc::clockid_t {
    #[cfg(test)]
    if MANUAL_CPU.get().is_some() {
        return NO_CLOCK;
    }
    let mut id: libc::clockid_t = NO_CLOCK;
    // SAFETY: `id` is a valid out-pointer and `pthread_self()` names the calling thread.
    if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) } != 0 {
        return NO_CLOCK;
    }
    id
}

/// Tests: replaces the calling thread's CPU clock by one advanced with [`burn`].
#[cfg(test)]
pub fn manual_cpu_clock() {
    MANUAL_CPU.set(Some(0));
}

/// Tests: the calling thread "computes" for `ns` of CPU time.
#[cfg(test)]
pub fn burn(ns: u64) {
    MANUAL_CPU.set(Some(MANUAL_CPU.get().unwrap_or(0) + ns));
}

/// Tests: the calling thread's counter starts at 0 and moves only by [`tick`].
#[cfg(test)]
pub(super) fn manual_ticks() {
    MANUAL_TICKS.set(Some(0));
}

/// Tests: `ns` of wall time pass on the calling thread's counter.
#[cfg(test)]
pub(super) fn tick(ns: u64) {
    MANUAL_TICKS.set(Some(MANUAL_TICKS.get().unwrap_or(0) + ns));
}
