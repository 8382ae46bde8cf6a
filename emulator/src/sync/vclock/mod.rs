//! Virtual host time (`--clock virtual`): every vCPU runs on a clock of its own, as if its
//! thread had a host core to itself, whatever the host's core count.
//!
//! The rules (docs/locking.md, "Virtual host time"):
//! - **Clock.** A vCPU's clock advances by its thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`),
//!   charged at *sync points*: lock operations, returns from guest code, timebase reads. Time
//!   blocked, parked or descheduled is not CPU time and never counts; the CPU time spent
//!   inside a contended acquire (the mutex's spinning) is discarded. Reading that clock is a
//!   system call (0.6–1.2 µs on a virtualised host; a hypercall-heavy guest syncs a hundred
//!   thousand times a second) that a host-time run does not make, so short intervals are
//!   timed by the time-stamp counter instead ([`Tsc`], 20 ns): an interval under
//!   [`TSC_TRUST_NS`] cannot hide a descheduling longer than itself, and every longer one
//!   reads the CPU clock, which settles what the counter charged since the last read (the
//!   CPU time is cumulative: the total stays exact; only where it falls between short
//!   intervals can be off, by less than the bound). Each CPU-clock read's own cost is
//!   measured once per process ([`read_cost_ns`]) and left out of the interval that holds it.
//! - **Host cores.** With fewer host cores than vCPUs, at most one vCPU thread per core
//!   runs guest code at once; a core goes to the runnable vCPU of that core with the lowest
//!   clock when its holder parks or blocks (cores.rs). The host's scheduler switched threads
//!   at every contended lock instead, and the cache refills after each switch fell inside
//!   the holds. A vCPU woken from a wait runs on without a core until its next entry into
//!   guest code ([`claim_core`]): what woke it is a lock it now holds.
//! - **Line cost.** A many-core host adds a cost that one core does not: a lock's cache line
//!   (and the data it guards) moving to the acquirer's core. `line_cost_ns` (0 by default,
//!   until a many-core host measures it) is charged to an acquirer whose lock was last held
//!   by another thread, inside its hold.
//! - **Locks.** The BQL is a FIFO queue in virtual time, resolved late ([`Rule::Fifo`]):
//!   each hold is recorded at its release as (arrival clock, CPU time held); once every
//!   busy vCPU's clock (plus its waits in flight) has passed an arrival (nobody can still
//!   arrive before it), the
//!   queue is served in arrival order — start = max(arrival, the previous hold's end) —
//!   and the difference is added to the holder's clock at its next sync point. This is
//!   the "weave" of a bound-weave simulator: the real acquisition order on a small host
//!   is not the virtual one, and ordering acquisitions for real (a vCPU waits until every
//!   vCPU with a smaller clock has passed) costs a context switch per acquisition whose
//!   cache refill then inflates the very hold it orders; placing each hold in the first
//!   free gap of a timeline instead fragments it (a hold that fits no gap is pushed far).
//!   The other locks (CPU locks, TLB locks, work queues, the timer list, the exclusive-
//!   section lock) are held for well under a microsecond, mostly by their own vCPU: their
//!   holds are measured but no wait is charged ([`Rule::Untimed`]). Charging a wait when
//!   the acquirer's clock fell inside the last hold (an "interval" rule) was tried: clocks
//!   that differ by up to a quantum plus unserved queue waits made it fire on holds that
//!   never overlapped, and the waits fed back through the BQL's holds without bound.
//! - **Hand-offs.** A kick, interrupt or queued work stamps the target with the sender's clock;
//!   a vCPU that was idle (halted, stopped) wakes at that stamp ([`blocking`]). A running target
//!   is not moved. A TLB flush job that reaches a clean TLB before the target's clock reaches
//!   the sender's waits until it does (`Accel::drain_work`), as the target would have run on
//!   its own core meanwhile. The sender's stores into the target's lines (queue, flags,
//!   stamp) are left out of its clock, as an acquisition is ([`leave_out_since`]): the line
//!   cost's.
//! - **Quantum.** No vCPU runs more than `quantum` ahead of the slowest runnable one; a vCPU
//!   that gets ahead parks at its next return from guest code ([`pace`]) until it is within
//!   half a quantum again. A vCPU waiting for a contended lock counts as runnable at its
//!   clock (`LOCK`); one blocked in a condition variable does not (`OUT`).
//! - **Idle.** Idle vCPUs leave the minimum (one that was sent a wake-up counts from its
//!   stamp until its thread runs); the I/O thread fires their timers when the busy minimum
//!   reaches the deadline, or at once when every vCPU is idle (time jumps). It sleeps
//!   between events the vCPUs report (a clock crossing the earliest deadline, going idle).
//! - **Guest time.** The timebase is the reader's clock, made monotonic across vCPUs by a
//!   global maximum of the values returned ([`VirtualTime::tb_ns`]); the reader's own clock
//!   is not advanced by it (that would drag every vCPU to the fastest one).
//!
//! Threads of the machine that are not vCPUs (the I/O thread, the main thread) have no clock:
//! their lock operations neither wait nor stamp.

mod cores;
mod cpu_clock;
mod fifo;
mod histogram;

use cores::HostCores;
#[cfg(test)]
use cpu_clock::tick;
use cpu_clock::{NO_CLOCK, TSC_TRUST_NS, Timer, Tsc, cpu_ns_of, own_cpu_clock, thread_cpu_ns};
#[cfg(test)]
pub use cpu_clock::{burn, manual_cpu_clock};
pub use cpu_clock::{counter_timed, read_cost_ns};
pub use fifo::{HoldStart, LockTime, Rule, hold_begins, hold_start, released};

use super::stats::{self, Site};
use parking_lot::{Condvar, Mutex};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const RUN: u8 = 0;
/// Blocked in a contended lock: counts as runnable, at its clock. The lock's holder cannot
/// park (a vCPU parks only at a return from guest code, holding no lock), so the others
/// waiting for this clock wait for the holder's release, not for ever. Out of the minimum,
/// a vCPU spinning in guest code on a guest lock whose holder waited here ran on for as
/// long as the host took to hand the lock over: on the bundled guest at N = 28 in baseline
/// the guest's lock spins were 3-5 × as many on two host cores as on one.
const LOCK: u8 = 1;
/// Parked by the quantum: still runnable.
const PACE: u8 = 2;
/// Blocked in a condition variable: out of the minimum the runnable vCPUs wait for (it may
/// wait for one of them, parked), but it comes back at its clock, so the machine's time
/// (timers) waits for it.
const OUT: u8 = 3;
/// Halted or stopped: out of every minimum until something wakes it.
const IDLE: u8 = 4;

/// How far beyond the quantum a vCPU may be at a return from guest code before the run
/// is failed as broken. Not zero: a stint is up to 65,536 instructions, and a vCPU that was
/// blocked in a condition variable (out of the minimum) while its waker was descheduled
/// rejoins behind the others by however long that took on a loaded host; a runaway clock
/// (a bug) goes past any bound.
const DIVERGENCE_SLACK_NS: u64 = 1_000_000_000;

/// Longest real sleep of a parked vCPU before it checks again (a safety net: wake-ups are
/// targeted, see [`VirtualTime::poke`]).
const PARK_RECHECK: Duration = Duration::from_millis(2);
/// The same where the vCPU threads share the host's cores: a parked vCPU that wakes to
/// look again preempts the vCPU running on its core (perhaps inside a hold, which the
/// counter then times with the sleeper's run inside), and when it is due the cores are
/// busy with the vCPUs behind it anyway. At N = 28 on two cores the 2 ms safety net woke
/// parked vCPUs ten times per park.
const PARK_RECHECK_SHARED: Duration = Duration::from_millis(20);
/// Shortest timed sleep of a parked vCPU (below it the sleep costs more than it saves).
const MIN_PARK: Duration = Duration::from_micros(20);

#[repr(align(64))]
struct Slot {
    /// Virtual ns as of the last sync point; `last_cpu` is the thread's CPU time accounted
    /// for by then (read from its CPU clock, plus what the time-stamp counter charged since),
    /// so a running vCPU's live clock is `clock + (its CPU time now - last_cpu)`
    /// ([`Slot::live`]).
    /// A sync stores `last_cpu` before `clock`; a reader loads `clock` first: a torn read
    /// can only under-estimate.
    clock: AtomicU64,
    last_cpu: AtomicU64,
    /// The thread's CPU-time clock id ([`NO_CLOCK`]: unknown, e.g. a test's hand-driven
    /// clock).
    cpu_clock: AtomicI32,
    /// An idle vCPU's armed timer (`u64::MAX`: none): it is runnable again from then, so
    /// the quantum holds the others to it.
    deadline: AtomicU64,
    state: AtomicU8,
    /// Largest send stamp of hand-offs to this vCPU since it last woke.
    wake_at: AtomicU64,
    cpu_ns: AtomicU64,
    /// Times parked by the quantum (host-side waits; they do not advance the clock).
    parks: AtomicU64,
    /// Virtual time spent idle: the jumps to the stamps that woke it.
    idle_ns: AtomicU64,
    /// Line costs charged to it.
    line_ns: AtomicU64,
    /// CPU time of the clock's own bookkeeping, left out of it ([`skip_bookkeeping`]).
    skipped_ns: AtomicU64,
    /// Fifo waits: served (resolved) and added to the clock (applied), and those served
    /// but not yet added, by lock site.
    resolved: AtomicU64,
    applied: AtomicU64,
    has_pending: std::sync::atomic::AtomicBool,
    pending: [AtomicU64; Site::COUNT],
    /// The BQL's virtual queue as it served this vCPU: the end of its last hold, the time
    /// from there to its next arrival, and the holds (`fifo`, `histogram`).
    bql_last_end: AtomicU64,
    bql_think: histogram::CostHistogram,
    bql_hold: histogram::CostHistogram,
    cv: Condvar,
}

impl Slot {
    /// The clock the quantum holds the others to: a runnable vCPU's, an idle one's timer
    /// deadline; `None` for a blocked vCPU or an idle one without a timer.
    fn pace_clock(&self) -> Option<u64> {
        match self.state.load(Ordering::SeqCst) {
            st if st < OUT => Some(self.clock.load(Ordering::SeqCst)),
            IDLE => self
                .woken_at()
                .or(Some(self.deadline.load(Ordering::SeqCst)).filter(|&d| d != u64::MAX)),
            _ => None,
        }
    }

    /// An idle vCPU that has been sent a wake-up its thread has not taken yet: where it
    /// stands once it runs. Until then it is runnable, not idle: without this, the moment
    /// between a wake-up and its thread running looks like "everybody idle", and the
    /// machine's time would jump to the farthest timer (docs/locking.md).
    fn woken_at(&self) -> Option<u64> {
        let w = self.wake_at.load(Ordering::SeqCst);
        (w != 0).then(|| w.max(self.clock.load(Ordering::SeqCst)))
    }

    /// The clock now: for a running vCPU, the published clock plus the CPU time its thread
    /// used since (read through its CPU-time clock id).
    fn live(&self) -> u64 {
        let c = self.clock.load(Ordering::SeqCst);
        let id = self.cpu_clock.load(Ordering::SeqCst);
        if id == NO_CLOCK || self.state.load(Ordering::SeqCst) != RUN {
            return c;
        }
        let last = self.last_cpu.load(Ordering::SeqCst);
        c + cpu_ns_of(id).saturating_sub(last)
    }
}

/// The clocks of one machine's vCPUs.
pub struct VirtualTime {
    quantum_ns: u64,
    /// Charged to an acquirer whose lock's line comes from another thread (module doc).
    line_cost_ns: u64,
    slots: Box<[Slot]>,
    /// The largest timebase value (as ns) returned to any reader.
    tb_max_ns: AtomicU64,
    /// vCPUs parked by [`pace`], and the lowest clock any of them waits for: a publisher
    /// wakes one only when its clock crosses it, or when it leaves the runnable set.
    parked: AtomicUsize,
    wake_threshold: AtomicU64,
    park_lock: Mutex<()>,
    failure: OnceLock<String>,
    on_failure: OnceLock<Box<dyn Fn(String) + Send + Sync>>,
    /// The machine is shutting down: nobody parks any more.
    stopping: std::sync::atomic::AtomicBool,
    /// The earliest armed timer deadline (`u64::MAX`: none): a vCPU whose clock crosses it
    /// wakes the I/O thread ([`VirtualTime::wait_timer_event`]), which otherwise sleeps.
    timer_threshold: AtomicU64,
    /// Counts the events that may let a timer expire (a crossing, a vCPU going idle, a
    /// deadline armed); the I/O thread sleeps only while it is unchanged.
    timer_events: Mutex<u64>,
    timer_cv: Condvar,
    /// A lower bound of the slowest runnable clock ([`VirtualTime::min_runnable`]): a vCPU
    /// within a quantum of it cannot be a quantum ahead, so [`pace`] reads this one word
    /// instead of every vCPU's slot — whose lines, written at every sync by their owners,
    /// would cross the host's cores at every return from guest code. Raised by a rescan,
    /// lowered by a vCPU that becomes runnable; both under `hint_lock`, so that a rescan
    /// cannot raise it past a vCPU that joined meanwhile.
    min_hint: AtomicU64,
    hint_lock: Mutex<()>,
    /// The host's cores, shared by the vCPU threads (`None`: one each; cores.rs).
    cores: Option<HostCores>,
}

impl VirtualTime {
    pub fn new(n: usize, quantum_ns: u64) -> Arc<Self> {
        Arc::new(Self::build(n, quantum_ns, 0, None))
    }

    /// The machine's clocks: `n` vCPUs, the quantum, the line cost (module doc), on a host
    /// with `host_cores` cores for the vCPU threads; with fewer than `n`, they share them
    /// (cores.rs).
    pub fn for_host(n: usize, quantum_ns: u64, line_cost_ns: u64, host_cores: usize) -> Arc<Self> {
        Arc::new(Self::build(
            n,
            quantum_ns,
            line_cost_ns,
            HostCores::new(n, host_cores),
        ))
    }

    fn build(n: usize, quantum_ns: u64, line_cost_ns: u64, cores: Option<HostCores>) -> Self {
        Self {
            quantum_ns,
            line_cost_ns,
            slots: (0..n)
                .map(|_| Slot {
                    clock: AtomicU64::new(0),
                    last_cpu: AtomicU64::new(0),
                    cpu_clock: AtomicI32::new(NO_CLOCK),
                    deadline: AtomicU64::new(u64::MAX),
                    state: AtomicU8::new(IDLE),
                    wake_at: AtomicU64::new(0),
                    cpu_ns: AtomicU64::new(0),
                    parks: AtomicU64::new(0),
                    idle_ns: AtomicU64::new(0),
                    line_ns: AtomicU64::new(0),
                    skipped_ns: AtomicU64::new(0),
                    resolved: AtomicU64::new(0),
                    applied: AtomicU64::new(0),
                    has_pending: std::sync::atomic::AtomicBool::new(false),
                    pending: std::array::from_fn(|_| AtomicU64::new(0)),
                    bql_last_end: AtomicU64::new(u64::MAX),
                    bql_think: Default::default(),
                    bql_hold: Default::default(),
                    cv: Condvar::new(),
                })
                .collect(),
            tb_max_ns: AtomicU64::new(0),
            parked: AtomicUsize::new(0),
            wake_threshold: AtomicU64::new(u64::MAX),
            park_lock: Mutex::new(()),
            failure: OnceLock::new(),
            on_failure: OnceLock::new(),
            stopping: std::sync::atomic::AtomicBool::new(false),
            timer_threshold: AtomicU64::new(u64::MAX),
            timer_events: Mutex::new(0),
            timer_cv: Condvar::new(),
            min_hint: AtomicU64::new(0),
            hint_lock: Mutex::new(()),
            cores,
        }
    }

    /// vCPU `i` takes a host core (waits for one when they are shared and all are held).
    fn take_core(&self, i: usize) {
        if let Some(c) = &self.cores {
            c.take(i, &self.stopping);
        }
    }

    /// vCPU `i` gives its host core back, about to wait (unless it runs without one:
    /// [`claim_core`]).
    fn give_core(&self, i: usize) {
        if let Some(c) = &self.cores
            && !CORE_OWED.replace(false)
        {
            c.give(i, |j| self.slots[j].clock.load(Ordering::SeqCst));
        }
    }

    /// Whether the vCPU threads share the host's cores (fewer than vCPUs).
    pub fn shares_cores(&self) -> bool {
        self.cores.is_some()
    }

    pub fn quantum_ns(&self) -> u64 {
        self.quantum_ns
    }

    pub fn line_cost_ns(&self) -> u64 {
        self.line_cost_ns
    }

    /// Called once with the first failure (clocks diverged beyond the quantum): the machine
    /// ends the run with it rather than report a number.
    pub fn set_on_failure(&self, f: impl Fn(String) + Send + Sync + 'static) {
        let _ = self.on_failure.set(Box::new(f));
    }

    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    fn fail(&self, msg: String) {
        if self.failure.set(msg.clone()).is_ok()
            && let Some(f) = self.on_failure.get()
        {
            f(msg);
        }
    }

    /// vCPU `i`'s clock (ns of virtual time).
    pub fn clock(&self, i: usize) -> u64 {
        self.slots[i].clock.load(Ordering::SeqCst)
    }

    /// vCPU `i`'s thread CPU time charged to its clock.
    pub fn cpu_ns(&self, i: usize) -> u64 {
        self.slots[i].cpu_ns.load(Ordering::Relaxed)
    }

    /// The smallest (clock, index) of the runnable vCPUs, if any is runnable; an idle vCPU
    /// with an armed timer counts as runnable from its deadline.
    pub fn min_runnable(&self) -> Option<(u64, usize)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.pace_clock().map(|c| (c, i)))
            .min()
    }

    /// A vCPU becomes runnable (or counts as runnable) at the clock `f` sets up and returns:
    /// the hint may not stay above it.
    fn join(&self, f: impl FnOnce() -> u64) {
        let _g = self.hint_lock.lock();
        let c = f();
        self.min_hint.fetch_min(c, Ordering::SeqCst);
    }

    /// The slowest runnable clock, read from every slot; the hint is raised to it.
    fn rescan(&self) -> Option<(u64, usize)> {
        let _g = self.hint_lock.lock();
        let m = self.min_runnable();
        self.min_hint
            .store(m.map_or(u64::MAX, |(c, _)| c), Ordering::SeqCst);
        m
    }

    /// Arms (`Some`) or clears vCPU `i`'s timer deadline (the I/O thread's timer list).
    pub fn set_deadline(&self, i: usize, at: Option<u64>) {
        let mut events = self.timer_events.lock();
        // An idle vCPU's armed timer counts as runnable from its deadline.
        self.join(|| {
            self.slots[i]
                .deadline
                .store(at.unwrap_or(u64::MAX), Ordering::SeqCst);
            at.unwrap_or(u64::MAX)
        });
        let earliest = self
            .slots
            .iter()
            .map(|s| s.deadline.load(Ordering::SeqCst))
            .min()
            .unwrap_or(u64::MAX);
        self.timer_threshold.store(earliest, Ordering::SeqCst);
        if at.is_some() {
            *events += 1;
            self.timer_cv.notify_all();
        }
    }

    /// The count of timer events so far: read it before looking at the timers, and pass it
    /// to [`VirtualTime::wait_timer_event`].
    pub fn timer_events(&self) -> u64 {
        *self.timer_events.lock()
    }

    /// Sleeps (the I/O thread) until a timer event after `seen`, or for at most `max`.
    /// On virtual time nothing expires by itself: a timer comes due only when a vCPU's clock
    /// crosses the earliest deadline or the last busy vCPU goes idle, and those wake it.
    /// Polling instead (it did, every 100 µs) put ten thousand context switches a second on
    /// the vCPUs' cores, whose cache refills their clocks then counted.
    pub fn wait_timer_event(&self, seen: u64, max: Duration) {
        let mut events = self.timer_events.lock();
        if *events == seen {
            self.timer_cv.wait_for(&mut events, max);
        }
    }

    /// Something may have let a timer expire: wakes the I/O thread.
    pub fn timer_event(&self) {
        *self.timer_events.lock() += 1;
        self.timer_cv.notify_all();
    }

    /// The machine's time for its timers: the smallest clock of the vCPUs that are not idle
    /// (blocked ones included: they resume at their clock); `None` when all are idle.
    pub fn min_busy(&self) -> Option<u64> {
        self.slots
            .iter()
            .filter_map(|s| match s.state.load(Ordering::SeqCst) {
                IDLE => s.woken_at(),
                _ => Some(s.clock.load(Ordering::SeqCst)),
            })
            .min()
    }

    /// Every vCPU's clock state, one line each: what a divergence or a stall report shows.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (i, s) in self.slots.iter().enumerate() {
            let state = match s.state.load(Ordering::SeqCst) {
                RUN => "run",
                LOCK => "lock wait",
                PACE => "parked",
                OUT => "blocked",
                _ => "idle",
            };
            let opt = |v: u64, none: u64| {
                if v == none {
                    "-".to_string()
                } else {
                    v.to_string()
                }
            };
            out += &format!(
                "  vCPU {i}: {state} clock {} ns, wake stamp {}, timer {}, waits served {} applied {}\n",
                s.clock.load(Ordering::SeqCst),
                opt(s.wake_at.load(Ordering::SeqCst), 0),
                opt(s.deadline.load(Ordering::SeqCst), u64::MAX),
                s.resolved.load(Ordering::SeqCst),
                s.applied.load(Ordering::SeqCst),
            );
        }
        out
    }

    /// The latest clock of any vCPU (what the machine's time has reached).
    pub fn max_clock(&self) -> u64 {
        self.slots
            .iter()
            .map(|s| s.clock.load(Ordering::SeqCst))
            .max()
            .unwrap_or(0)
            .max(self.tb_max_ns.load(Ordering::SeqCst))
    }

    /// A timebase read, as ns: the calling vCPU's clock, never below a value already
    /// returned to any vCPU. A thread without a clock reads the machine's latest time.
    pub fn tb_ns(self: &Arc<Self>) -> u64 {
        let own = match now() {
            Some(c) => c,
            None => self.max_clock(),
        };
        self.tb_max_ns.fetch_max(own, Ordering::SeqCst).max(own)
    }

    /// Stamps a hand-off to vCPU `i` sent at `at` (a kick, an interrupt, work, a timer).
    pub fn stamp_wake(&self, i: usize, at: u64) {
        // An idle vCPU sent a wake-up counts as runnable from the stamp.
        self.join(|| {
            self.slots[i].wake_at.fetch_max(at, Ordering::SeqCst);
            at
        });
    }

    /// The runnable vCPUs other than `i` whose clock is below `bound(j)`, judged by the
    /// published clock first and, only where that is below, by the live one (a running
    /// vCPU publishes only at sync points). `Err` carries how far the slowest is behind.
    fn behind(&self, i: usize, bound: impl Fn(usize) -> u64) -> Result<(), u64> {
        let mut worst = 0;
        for (j, s) in self.slots.iter().enumerate() {
            if j == i {
                continue;
            }
            let Some(c) = s.pace_clock() else { continue };
            let b = bound(j);
            if c >= b {
                continue;
            }
            // An idle vCPU's deadline is where it stands; a running one publishes late.
            let live = if s.state.load(Ordering::SeqCst) == RUN {
                s.live()
            } else {
                c
            };
            if live < b {
                worst = worst.max(b - live);
            }
        }
        if worst == 0 { Ok(()) } else { Err(worst) }
    }

    /// vCPU `i` is at most a quantum ahead of every runnable vCPU.
    fn pace_ok(&self, i: usize) -> Result<(), u64> {
        let floor = self.clock(i).saturating_sub(self.quantum_ns);
        self.behind(i, |_| floor)
    }

    /// How far ahead of the slowest runnable vCPU a parked vCPU may be when it resumes: half
    /// a quantum, so that every resumption runs for at least half a quantum before it parks
    /// again. Resuming as soon as it was back within the quantum gave slices of one stint
    /// each, a context switch per stint on a small host, whose cache refills the clocks
    /// then counted (holds at N = 28 grew by a half).
    fn resume_floor(&self, i: usize) -> u64 {
        self.clock(i).saturating_sub(self.quantum_ns / 2)
    }

    /// Wakes the parked vCPU waiting for the lowest clock (its condition holds first).
    /// Called when a clock crosses [`VirtualTime::wake_threshold`] or a vCPU leaves the
    /// runnable set; costs one load when nobody is parked.
    fn poke(&self) {
        if self.parked.load(Ordering::SeqCst) == 0 {
            return;
        }
        let _g = self.park_lock.lock();
        if let Some(s) = self
            .slots
            .iter()
            .filter(|s| s.state.load(Ordering::SeqCst) == PACE)
            .min_by_key(|s| s.clock.load(Ordering::SeqCst))
        {
            s.cv.notify_one();
        }
    }

    /// The lowest clock a parked vCPU waits for the others to reach; the caller holds
    /// `park_lock`.
    fn update_threshold(&self) {
        let t = self
            .slots
            .iter()
            .filter(|s| s.state.load(Ordering::SeqCst) == PACE)
            .map(|s| {
                s.clock
                    .load(Ordering::SeqCst)
                    .saturating_sub(self.quantum_ns / 2)
            })
            .min()
            .unwrap_or(u64::MAX);
        self.wake_threshold.store(t, Ordering::SeqCst);
    }

    /// Parks vCPU `i` while it is more than a quantum ahead. A publisher whose clock
    /// crosses the threshold wakes it ([`VirtualTime::poke`]); a running vCPU that gets
    /// there between its sync points does not, so the sleep is bounded by how far behind
    /// the slowest one is. Leaving, it wakes the next parked vCPU to look again.
    fn park_while_ahead(&self, i: usize) {
        if self.pace_ok(i).is_ok() {
            return;
        }
        self.give_core(i);
        let s = &self.slots[i];
        let mut g = self.park_lock.lock();
        self.parked.fetch_add(1, Ordering::SeqCst);
        s.state.store(PACE, Ordering::SeqCst);
        s.parks.fetch_add(1, Ordering::Relaxed);
        self.update_threshold();
        let floor = self.resume_floor(i);
        while let Err(deficit) = self.behind(i, |_| floor) {
            if self.stopping.load(Ordering::SeqCst) {
                break;
            }
            let sleep = if self.cores.is_some() {
                PARK_RECHECK_SHARED
            } else {
                Duration::from_nanos(deficit).clamp(MIN_PARK, PARK_RECHECK)
            };
            s.cv.wait_for(&mut g, sleep);
        }
        s.state.store(RUN, Ordering::SeqCst);
        self.parked.fetch_sub(1, Ordering::SeqCst);
        self.update_threshold();
        if let Some(next) = self
            .slots
            .iter()
            .filter(|s| s.state.load(Ordering::SeqCst) == PACE)
            .min_by_key(|s| s.clock.load(Ordering::SeqCst))
        {
            next.cv.notify_one();
        }
        drop(g);
        self.take_core(i);
    }

    /// The machine stops (power-off, timeout, a failure): parked vCPUs leave at once, so
    /// that every vCPU thread can see the shutdown.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(c) = &self.cores {
            c.stop();
        }
        let _g = self.park_lock.lock();
        for s in self.slots.iter() {
            s.cv.notify_all();
        }
    }

    /// How many times vCPU `i` parked (quantum).
    pub fn parks(&self, i: usize) -> u64 {
        self.slots[i].parks.load(Ordering::Relaxed)
    }

    /// Virtual time vCPU `i` spent idle (halted or stopped, until what woke it was sent).
    pub fn idle_ns(&self, i: usize) -> u64 {
        self.slots[i].idle_ns.load(Ordering::Relaxed)
    }

    /// Line costs charged to vCPU `i`.
    pub fn line_ns(&self, i: usize) -> u64 {
        self.slots[i].line_ns.load(Ordering::Relaxed)
    }

    /// CPU time of vCPU `i`'s clock bookkeeping left out of its clock.
    pub fn skipped_ns(&self, i: usize) -> u64 {
        self.slots[i].skipped_ns.load(Ordering::Relaxed)
    }

    /// The vCPUs' think times and holds as the BQL's virtual queue served them, all vCPUs
    /// together (bucket lower bound in ns → count; `histogram`).
    pub fn bql_costs(&self) -> (BTreeMap<u64, u64>, BTreeMap<u64, u64>) {
        let (mut think, mut hold) = (BTreeMap::new(), BTreeMap::new());
        for s in self.slots.iter() {
            for (into, h) in [(&mut think, &s.bql_think), (&mut hold, &s.bql_hold)] {
                for (k, n) in h.snapshot() {
                    *into.entry(k).or_insert(0) += n;
                }
            }
        }
        (think, hold)
    }
}

/// The vCPU whose thread this is.
struct Current {
    vt: Arc<VirtualTime>,
    i: usize,
    timer: Timer,
}

thread_local! {
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// The next [`blocking`] wait is an idle one ([`idle`]).
    static IDLE_NEXT: Cell<bool> = const { Cell::new(false) };
    /// The vCPU gave its host core back in a [`blocking`] wait and runs without one until
    /// it next enters guest code ([`claim_core`]).
    static CORE_OWED: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is a vCPU on virtual time.
#[inline(always)]
pub fn active() -> bool {
    ACTIVE.get()
}

/// Makes the calling thread vCPU `i` of `vt`, runnable from clock `start` on.
pub fn attach(vt: &Arc<VirtualTime>, i: usize, start: u64) {
    let s = &vt.slots[i];
    let id = own_cpu_clock();
    // A clock driven by hand (tests) has neither a read cost nor a counter.
    let (read_cost, tsc) = if id == NO_CLOCK {
        (0, None)
    } else {
        (read_cost_ns(), Tsc::get())
    };
    s.last_cpu.store(thread_cpu_ns(), Ordering::SeqCst);
    s.cpu_clock.store(id, Ordering::SeqCst);
    IDLE_NEXT.set(false);
    vt.join(|| {
        let c = s.clock.fetch_max(start, Ordering::SeqCst).max(start);
        s.state.store(RUN, Ordering::SeqCst);
        c
    });
    vt.take_core(i);
    CURRENT.with(|c| {
        *c.borrow_mut() = Some(Current {
            vt: vt.clone(),
            i,
            timer: Timer {
                read_cost,
                last_tick: tsc.map_or(0, |t| t.ticks()),
                tsc,
                excluded: 0,
            },
        })
    });
    ACTIVE.set(true);
}

/// The calling vCPU thread ends: its clock leaves the minimum.
pub fn detach() {
    if !active() {
        return;
    }
    sync();
    let cur = CURRENT.with(|c| c.borrow_mut().take());
    ACTIVE.set(false);
    if let Some(cur) = cur {
        cur.vt.slots[cur.i]
            .cpu_clock
            .store(NO_CLOCK, Ordering::SeqCst);
        cur.vt.slots[cur.i].state.store(IDLE, Ordering::SeqCst);
        cur.vt.give_core(cur.i);
        cur.vt.poke();
        cur.vt.timer_event();
    }
}

fn with_current<R>(f: impl FnOnce(&mut Current) -> R) -> Option<R> {
    if !active() {
        return None;
    }
    CURRENT.with(|c| c.borrow_mut().as_mut().map(f))
}

/// The calling vCPU's clocks and index, borrowed, for code that also calls the functions
/// here (they borrow `CURRENT` in turn). No reference count is taken: every vCPU syncs at
/// every return from guest code and lock operation, and cloning the `Arc` there wrote its
/// one shared count each time — a line that crossed the host's cores inside the intervals
/// being timed (hypercall holds at N = 4 ran 15 % longer on two host cores than on one).
fn with_vt<R>(f: impl FnOnce(&VirtualTime, usize) -> R) -> Option<R> {
    let (p, i) = with_current(|cur| (Arc::as_ptr(&cur.vt), cur.i))?;
    // SAFETY: `CURRENT` owns an `Arc` of it until `detach`, which only this thread calls and
    // which `f` (this module's code) never does.
    Some(f(unsafe { &*p }, i))
}

/// Charges the CPU time since the last sync point to the calling vCPU's clock and publishes
/// it; returns the clock (`None` off virtual time).
pub fn sync() -> Option<u64> {
    sync_with(false)
}

/// [`sync`]; `with_waits` also adds the Fifo waits served since (only where the vCPU holds
/// no lock: a wait added inside a hold would lengthen the hold).
fn sync_with(with_waits: bool) -> Option<u64> {
    with_current(|cur| {
        let (vt, s) = (&*cur.vt, &cur.vt.slots[cur.i]);
        let d = cur.timer.charge(s);
        s.cpu_ns.fetch_add(d, Ordering::Relaxed);
        let d = d + if with_waits { take_pending(s) } else { 0 };
        let old = s.clock.fetch_add(d, Ordering::SeqCst);
        let c = old + d;
        let t = vt.wake_threshold.load(Ordering::SeqCst);
        if old < t && c >= t {
            vt.poke();
        }
        let t = vt.timer_threshold.load(Ordering::SeqCst);
        if old < t && c >= t {
            vt.timer_event();
        }
        // Publishing wrote a line the other vCPUs read and read lines they write: the
        // clock's bookkeeping, left out.
        cur.timer.skip(s);
        c
    })
}

/// The Fifo waits served for this vCPU since the last sync, recorded at their sites (the
/// calling thread is the slot's vCPU); returns their sum.
fn take_pending(s: &Slot) -> u64 {
    if !s.has_pending.swap(false, Ordering::SeqCst) {
        return 0;
    }
    let mut sum = 0;
    for (site, p) in Site::ALL.iter().zip(&s.pending) {
        let w = p.swap(0, Ordering::SeqCst);
        if w != 0 {
            stats::record_virtual_wait(*site, w);
            sum += w;
        }
    }
    s.applied.fetch_add(sum, Ordering::SeqCst);
    sum
}

/// The calling vCPU's clock, synced.
pub fn now() -> Option<u64> {
    sync()
}

/// The calling vCPU's clock as of its last sync point (a stamp for hand-offs; no syscall).
#[inline]
pub fn stamp() -> Option<u64> {
    with_current(|cur| cur.vt.slots[cur.i].clock.load(Ordering::SeqCst))
}

/// Drops the CPU time since the last sync point (spent spinning in an acquire or parking).
fn discard() {
    with_current(|cur| cur.timer.discard(&cur.vt.slots[cur.i]));
}

/// A point on the counter (`None`: off virtual time, or no counter), for
/// [`leave_out_since`].
#[inline]
pub fn mark() -> Option<u64> {
    with_current(|cur| cur.timer.tsc.map(|t| t.ticks())).flatten()
}

/// Leaves the time since `mark` out of the interval being timed (the rest of it is
/// charged as usual): an uncontended lock acquisition, whose lock word on a host with more
/// than one core is often in another core's cache, or a send's stores into another vCPU's
/// queue and flags (`Accel::queue`, `Accel::signal`), likewise. What that transfer costs is
/// the line cost's to charge (module doc), a parameter, not whatever the host's cores happen
/// to be doing; on one core the acquisition is a few ns. A long span (the thread was
/// descheduled meanwhile) is left to the CPU clock.
pub fn leave_out_since(mark: Option<u64>) {
    let Some(m) = mark else { return };
    with_current(|cur| {
        if let Some(tsc) = cur.timer.tsc {
            let dt = tsc.ns(tsc.ticks().wrapping_sub(m));
            if dt < TSC_TRUST_NS {
                cur.timer.excluded += dt;
            }
        }
    });
}

/// Leaves the time since the last sync point out of the clock, read by the counter: the
/// clock's own bookkeeping after a sync (publishing it, serving a lock's queue) and a lock's
/// release, which a vCPU thread on a real host does not do or which are the line cost's
/// (shared lines moving between host cores, which would otherwise make a virtual run on two
/// cores slower than on one). An interval too long for the counter (the thread was
/// descheduled) is dropped through the CPU clock, as [`discard`] does.
pub fn skip_bookkeeping() {
    with_current(|cur| cur.timer.skip(&cur.vt.slots[cur.i]));
}

/// Runs `f`, which blocks the thread (a contended lock, a condition variable), with the
/// calling vCPU out of the runnable set; its CPU time is discarded. Its host core, where
/// they are shared, is given back first and taken again by [`claim_core`].
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    block_as(OUT, f)
}

/// [`blocking`] as `state` (OUT, or LOCK for a contended lock); IDLE where [`idle`] said so.
fn block_as<R>(state: u8, f: impl FnOnce() -> R) -> R {
    let cur = with_current(|cur| (cur.vt.clone(), cur.i));
    let Some((vt, i)) = cur else {
        return f();
    };
    sync();
    let state = if IDLE_NEXT.replace(false) {
        IDLE
    } else {
        state
    };
    if state == IDLE {
        // Wake-ups sent before now were received running (the sender held the lock this
        // vCPU sleeps with, so it checked their effect before deciding to sleep): a stale
        // stamp would make it count as woken.
        vt.slots[i].wake_at.store(0, Ordering::SeqCst);
    }
    vt.slots[i].state.store(state, Ordering::SeqCst);
    if state != LOCK {
        // It left the runnable set: a vCPU parked behind its clock may go on.
        vt.poke();
    }
    if state == IDLE {
        // The machine's time may jump now (every vCPU idle).
        vt.timer_event();
    }
    vt.give_core(i);
    let r = f();
    vt.join(|| {
        let s = &vt.slots[i];
        if state == IDLE {
            // Jump to the stamp before counting as runnable: in between, a vCPU idle since
            // long ago would count at its old clock, and a vCPU seconds ahead would take
            // that for a divergence (Linux at N = 28 met it while bringing up its last
            // CPUs). Until then the stamp keeps it counted at the same clock (`woken_at`).
            jump_to_stamp(s);
        }
        s.state.store(RUN, Ordering::SeqCst);
        if state == IDLE {
            s.wake_at.store(0, Ordering::SeqCst);
        }
        s.clock.load(Ordering::SeqCst)
    });
    if vt.cores.is_some() {
        // What woke it holds a lock (the one it waited for, or the condition variable's):
        // it runs on until guest code without a core, as waiting for one while holding the
        // lock would stall every vCPU that wants it behind the quantum of whoever runs.
        CORE_OWED.set(true);
    }
    discard();
    r
}

/// Takes back the host core the calling vCPU gave up in a [`blocking`] wait, before it
/// runs guest code (holding no lock): waiting for it is not CPU time.
#[inline]
pub fn claim_core() {
    if CORE_OWED.get() {
        with_vt(|vt, i| {
            sync();
            CORE_OWED.set(false);
            vt.take_core(i);
            discard();
        });
    }
}

/// How long a contended acquire spins, by the counter, before it blocks ([`contended`]).
/// The BQL's holds are a microsecond or less, and where the vCPU threads share the host's
/// cores (cores.rs) a holder mostly runs on another one: it releases within the spin, and
/// the waiter keeps its core and its warm cache.
const SPIN_NS: u64 = 5_000;

/// A contended acquire on virtual time: `try_once` until it succeeds, spinning for up to
/// [`SPIN_NS`], then `block` as [`blocking`] does. The spinning is left out of the clock (a
/// lock's wait is the queue's to charge, not the host's).
pub fn contended<G>(mut try_once: impl FnMut() -> Option<G>, block: impl FnOnce() -> G) -> G {
    let Some(tsc) = with_current(|cur| cur.timer.tsc).flatten() else {
        return block_as(LOCK, block);
    };
    sync();
    let start = tsc.ticks();
    loop {
        std::hint::spin_loop();
        if let Some(g) = try_once() {
            skip_bookkeeping();
            return g;
        }
        if tsc.ns(tsc.ticks().wrapping_sub(start)) >= SPIN_NS {
            break;
        }
    }
    skip_bookkeeping();
    block_as(LOCK, block)
}

/// Moves an idle slot's clock to its wake stamp (it was idle until then); returns the jump.
fn jump_to_stamp(s: &Slot) -> u64 {
    let at = s.wake_at.load(Ordering::SeqCst);
    let prev = s.clock.fetch_max(at, Ordering::SeqCst);
    let jump = at.saturating_sub(prev);
    s.idle_ns.fetch_add(jump, Ordering::Relaxed);
    jump
}

/// The calling vCPU's next blocking wait is idle (halted or stopped): until it wakes, the
/// machine's time does not wait for it, and it wakes at the stamp of what woke it
/// ([`blocking`]).
pub fn idle() {
    if active() {
        IDLE_NEXT.set(true);
    }
}

/// Stamps a hand-off to vCPU `i` with the calling vCPU's clock.
#[inline]
pub fn stamp_target(vt: Option<&Arc<VirtualTime>>, i: usize) {
    if let (Some(vt), Some(at)) = (vt, stamp()) {
        vt.stamp_wake(i, at);
    }
}

/// At a return from guest code (no lock held): syncs, adds the lock waits served since,
/// then parks while the calling vCPU is more than a quantum ahead of the slowest runnable
/// one. Fails the run when it is ahead by more than the quantum plus
/// [`DIVERGENCE_SLACK_NS`] (the pacing is broken).
pub fn pace() {
    with_vt(pace_vcpu);
}

fn pace_vcpu(vt: &VirtualTime, i: usize) {
    let applied = vt.slots[i].applied.load(Ordering::SeqCst);
    let Some(c) = sync_with(true) else { return };
    if c.saturating_sub(vt.min_hint.load(Ordering::SeqCst)) <= vt.quantum_ns {
        // Within a quantum of a lower bound of the slowest: not ahead (the common case). The
        // bound's line is written by whichever vCPU rescans, on any core: left out.
        skip_bookkeeping();
        return;
    }
    // Lock waits added now may put it ahead legitimately (it waited in a queue).
    let jump = vt.slots[i].applied.load(Ordering::SeqCst) - applied;
    if let Some((m, _)) = vt.rescan() {
        let ahead = c.saturating_sub(m);
        if ahead
            > vt.quantum_ns
                .saturating_add(DIVERGENCE_SLACK_NS)
                .saturating_add(jump)
        {
            vt.fail(format!(
                "virtual clocks diverged: vCPU {i} is {ahead} ns ahead of the slowest runnable \
                 vCPU (quantum {} ns)\n{}",
                vt.quantum_ns,
                vt.describe()
            ));
        }
    }
    vt.park_while_ahead(i);
    discard();
}

/// Tests: the calling vCPU's short intervals are timed by a counter advanced with [`tick`].
#[cfg(test)]
fn manual_counter() {
    cpu_clock::manual_ticks();
    with_current(|cur| {
        cur.timer.tsc = Some(Tsc { ns_per_tick: 1.0 });
        cur.timer.last_tick = 0;
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    fn on_vcpu<R: Send + 'static>(
        vt: &Arc<VirtualTime>,
        i: usize,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> std::thread::JoinHandle<R> {
        let vt = vt.clone();
        std::thread::spawn(move || {
            manual_cpu_clock();
            attach(&vt, i, 0);
            let r = f();
            detach();
            r
        })
    }

    #[test]
    fn the_clock_counts_cpu_time_not_blocked_time() {
        let vt = VirtualTime::new(1, 1_000_000);
        let h = on_vcpu(&vt, 0, || {
            burn(700);
            assert_eq!(sync(), Some(700));
            // CPU time burnt while blocked (a spinning acquire) is not charged.
            blocking(|| burn(5_000));
            burn(300);
            sync().unwrap()
        });
        assert_eq!(h.join().unwrap(), 1_000);
        assert_eq!(vt.cpu_ns(0), 1_000);
    }

    #[test]
    fn each_charge_leaves_out_one_clock_read() {
        let vt = VirtualTime::new(1, 1_000_000);
        let h = on_vcpu(&vt, 0, || {
            with_current(|cur| cur.timer.read_cost = 30);
            burn(100);
            let first = sync().unwrap();
            // Less than a read since the last: nothing to charge, never a step back.
            burn(10);
            (first, sync().unwrap())
        });
        assert_eq!(h.join().unwrap(), (70, 70));
        assert_eq!(vt.cpu_ns(0), 70);
    }

    #[test]
    fn short_intervals_are_timed_by_the_counter_and_settled_by_the_cpu_clock() {
        let vt = VirtualTime::new(1, 1_000_000_000);
        let h = on_vcpu(&vt, 0, || {
            manual_counter();
            // A short interval: charged by the counter (5 µs), not the CPU clock (4 µs).
            burn(4_000);
            tick(5_000);
            let a = sync().unwrap();
            // A long one reads the CPU clock: 30 µs more of CPU time, 1 µs of it charged
            // already by the counter — the total is the CPU clock's (34 µs).
            burn(30_000);
            tick(50_000);
            let b = sync().unwrap();
            // Descheduled 15 µs inside a short interval: the counter over-charges it ...
            burn(2_000);
            tick(17_000);
            let c = sync().unwrap();
            // ... and the next CPU-clock read takes the surplus back from what it charges.
            burn(25_000);
            tick(25_000);
            (a, b, c, sync().unwrap())
        });
        assert_eq!(h.join().unwrap(), (5_000, 34_000, 51_000, 61_000));
        assert_eq!(vt.cpu_ns(0), 61_000);
    }

    #[test]
    fn the_clocks_own_bookkeeping_is_left_out_also_when_the_cpu_clock_settles() {
        let vt = VirtualTime::new(1, 1_000_000_000);
        let h = on_vcpu(&vt, 0, || {
            manual_counter();
            burn(1_000);
            tick(1_000);
            let a = sync().unwrap();
            // 3 µs serving a lock's queue after the sync: left out.
            burn(3_000);
            tick(3_000);
            skip_bookkeeping();
            burn(5_000);
            tick(5_000);
            let b = sync().unwrap();
            burn(3_000);
            tick(3_000);
            skip_bookkeeping();
            // A long interval settled by the CPU clock does not charge the skipped 3 µs.
            burn(30_000);
            tick(30_000);
            (a, b, sync().unwrap())
        });
        assert_eq!(h.join().unwrap(), (1_000, 6_000, 36_000));
        assert_eq!(vt.skipped_ns(0), 6_000);
    }

    #[test]
    fn a_real_thread_is_read_through_its_cpu_clock_id() {
        // Thread CPU-clock ids are negative: a check for "below zero" once took every real
        // thread for one without a clock, which switched off the counter, the read cost and
        // the live clock alike.
        let vt = VirtualTime::new(1, 1_000_000_000);
        let vt2 = vt.clone();
        std::thread::spawn(move || {
            attach(&vt2, 0, 0);
            let published = vt2.clock(0);
            let start = thread_cpu_ns();
            while thread_cpu_ns() < start + 2_000_000 {
                std::hint::black_box(0u64);
            }
            // Not synced since attach: only the live clock sees the CPU time.
            assert!(vt2.slots[0].live() >= published + 2_000_000);
            assert!(with_current(|c| c.timer.read_cost).unwrap() > 0);
            detach();
        })
        .join()
        .unwrap();
    }

    /// A hold starts where the lock was taken, not at the last sync point: the CPU time in
    /// between (the exit path from guest code, the pace check) advances the clock but ran
    /// outside the lock. Counted from the sync point, the closed-form guest's hypercall holds
    /// were twice their length.
    #[test]
    fn a_hold_starts_at_the_acquisition_not_at_the_last_sync_point() {
        let vt = VirtualTime::new(1, 1_000_000_000);
        let t = Arc::new(LockTime::default());
        let h = on_vcpu(&vt, 0, move || {
            manual_counter();
            burn(1_000);
            tick(1_000);
            sync();
            // 350 ns on the way to the lock, then a 50 ns acquisition (left out).
            burn(350);
            tick(350);
            let m = mark();
            burn(50);
            tick(50);
            let since = hold_start(&t, Rule::Untimed);
            leave_out_since(m);
            let since = hold_begins(since);
            burn(200);
            tick(200);
            let hold = released(&t, Rule::Untimed, since, Site::ALL[0]);
            (hold, sync().unwrap())
        });
        assert_eq!(h.join().unwrap(), (200, 1_550));
    }

    #[test]
    fn a_lock_taken_from_another_vcpu_costs_the_line_inside_the_hold() {
        let vt = VirtualTime::for_host(2, 1_000_000_000, 100, 2);
        let t = Arc::new(LockTime::default());
        let hold = |i: usize| {
            let t = t.clone();
            on_vcpu(&vt, i, move || {
                let since = hold_start(&t, Rule::Untimed);
                burn(10);
                released(&t, Rule::Untimed, since, Site::ALL[0])
            })
            .join()
            .unwrap()
        };
        // The first holder and a holder taking it back from itself find the line at home.
        assert_eq!(hold(0), 10);
        assert_eq!(hold(0), 10);
        assert_eq!(hold(1), 110);
        assert_eq!(hold(0), 110);
        assert_eq!((vt.line_ns(0), vt.line_ns(1)), (100, 100));
        assert_eq!((vt.clock(0), vt.clock(1)), (130, 110));
    }

    #[test]
    fn the_timebase_is_monotonic_across_vcpus() {
        let vt = VirtualTime::new(2, 1_000_000_000);
        let ahead = on_vcpu(&vt, 0, || {
            burn(5_000);
            tb_ns_of_current()
        })
        .join()
        .unwrap();
        assert_eq!(ahead, 5_000);
        // vCPU 1 is at 1,000 ns, behind: it must not see time go back, and its own clock
        // is not dragged forward by the read.
        let vt2 = vt.clone();
        let (read, own) = on_vcpu(&vt, 1, move || {
            burn(1_000);
            let r = vt2.tb_ns();
            (r, stamp().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(read, 5_000);
        assert_eq!(own, 1_000);
    }

    fn tb_ns_of_current() -> u64 {
        with_current(|cur| cur.vt.clone()).unwrap().tb_ns()
    }

    #[test]
    fn an_idle_vcpu_jumps_to_the_stamp_that_wakes_it() {
        let vt = VirtualTime::new(2, 1_000_000);
        let vt2 = vt.clone();
        let h = on_vcpu(&vt, 1, move || {
            burn(100);
            // Halted; woken by a hand-off sent at 40 µs (an IPI, a timer).
            idle();
            blocking(|| vt2.stamp_wake(1, 40_000));
            let first = (vt2.idle_ns(1), stamp().unwrap());
            // A stamp in its past does not move it back.
            idle();
            blocking(|| vt2.stamp_wake(1, 10));
            (first, (vt2.idle_ns(1), stamp().unwrap()))
        });
        assert_eq!(h.join().unwrap(), ((39_900, 40_000), (39_900, 40_000)));
    }

    #[test]
    fn a_woken_idle_vcpu_counts_from_its_stamp_until_its_thread_runs() {
        let vt = VirtualTime::new(2, 1_000_000);
        // Both idle, no timer: nothing holds the machine's time.
        assert_eq!(vt.min_busy(), None);
        assert_eq!(vt.min_runnable(), None);
        // A wake-up sent at 40 µs to vCPU 1, whose thread has not run yet: it is runnable
        // from there, not idle (time must not jump past it to a far timer).
        vt.set_deadline(0, Some(4_000_000_000));
        vt.stamp_wake(1, 40_000);
        assert_eq!(vt.min_busy(), Some(40_000));
        assert_eq!(vt.min_runnable(), Some((40_000, 1)));
    }

    #[test]
    fn a_vcpu_going_idle_drops_stamps_it_received_while_running() {
        let vt = VirtualTime::new(2, 1_000_000);
        let vt2 = vt.clone();
        let h = on_vcpu(&vt, 0, move || {
            burn(1_000);
            // A kick sent while it ran: it saw it before deciding to sleep.
            vt2.stamp_wake(0, 500);
            idle();
            blocking(|| vt2.min_busy())
        });
        assert_eq!(h.join().unwrap(), None);
    }

    #[test]
    fn the_timer_thread_is_woken_by_a_clock_crossing_the_earliest_deadline_or_by_going_idle() {
        let vt = VirtualTime::new(2, 1_000_000);
        vt.set_deadline(1, Some(9_000));
        let vt2 = vt.clone();
        let h = on_vcpu(&vt, 0, move || {
            let before = vt2.timer_events();
            burn(5_000);
            sync();
            let below = vt2.timer_events() - before;
            burn(5_000);
            sync();
            let crossed = vt2.timer_events() - before;
            idle();
            blocking(|| ());
            let idled = vt2.timer_events() - before;
            (below, crossed, idled)
        });
        assert_eq!(h.join().unwrap(), (0, 1, 2));
    }

    #[test]
    fn the_fifo_serves_holds_in_virtual_arrival_order_whatever_the_real_order() {
        let vt = VirtualTime::new(2, 1_000_000_000);
        let lock = Arc::new(LockTime::default());
        // vCPU 0 is busy, still at 0 µs, so nothing can be served before it catches up.
        attach_other(&vt, 0);
        // vCPU 1 holds first in real time, arriving at 11 µs for 1 µs ...
        let l = lock.clone();
        on_vcpu(&vt, 1, move || {
            burn(11_000);
            sync();
            let since = hold_start(&l, Rule::Fifo);
            burn(1_000);
            released(&l, Rule::Fifo, since, Site::BqlHcall)
        })
        .join()
        .unwrap();
        // ... then vCPU 0, arriving earlier in virtual time (10 µs) for 2 µs.
        let l = lock.clone();
        on_vcpu(&vt, 0, move || {
            burn(10_000);
            sync();
            let since = hold_start(&l, Rule::Fifo);
            burn(2_000);
            released(&l, Rule::Fifo, since, Site::BqlHcall)
        })
        .join()
        .unwrap();
        // vCPU 0 passed both arrivals: they are served, vCPU 0 first; vCPU 1 waits until 12 µs.
        let pending =
            |i: usize| vt.slots[i].pending[Site::BqlHcall as usize].load(Ordering::SeqCst);
        assert_eq!((pending(0), pending(1)), (0, 1_000));
        assert_eq!(lock.fifo.lock().free, 13_000);
    }

    #[test]
    fn a_served_wait_reaches_the_clock_at_the_next_return_from_guest_code() {
        let vt = VirtualTime::new(1, 1_000_000_000);
        let v = vt.clone();
        let clock = on_vcpu(&vt, 0, move || {
            burn(1_000);
            sync();
            v.slots[0].pending[Site::BqlHcall as usize].store(5_000, Ordering::SeqCst);
            v.slots[0].has_pending.store(true, Ordering::SeqCst);
            // Not inside a hold (a lock release syncs without it) ...
            assert_eq!(sync(), Some(1_000));
            // ... but where the vCPU returns from guest code.
            pace();
            stamp().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(clock, 6_000);
        assert_eq!(vt.slots[0].applied.load(Ordering::SeqCst), 5_000);
    }

    #[test]
    fn an_arrival_is_not_served_while_a_busy_vcpu_could_still_arrive_before_it() {
        let vt = VirtualTime::new(2, 1_000_000_000);
        let lock = Arc::new(LockTime::default());
        // vCPU 0 stays busy at clock 0 (attached elsewhere, never advancing).
        attach_other(&vt, 0);
        let l = lock.clone();
        on_vcpu(&vt, 1, move || {
            burn(7_000);
            sync();
            let since = hold_start(&l, Rule::Fifo);
            burn(1_000);
            released(&l, Rule::Fifo, since, Site::BqlHcall);
        })
        .join()
        .unwrap();
        assert_eq!(lock.fifo.lock().len(), 1, "served too early");
    }

    #[test]
    fn a_vcpu_ahead_by_more_than_the_quantum_parks_until_the_slowest_catches_up() {
        let vt = VirtualTime::new(2, 10_000);
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let start = Arc::new(Barrier::new(2));
        let (o, b) = (order.clone(), start.clone());
        let vt_fast = vt.clone();
        let fast = std::thread::spawn(move || {
            manual_cpu_clock();
            attach(&vt_fast, 0, 0);
            b.wait();
            burn(50_000);
            pace();
            // Parked at 50 µs, 40 µs ahead of vCPU 1 (quantum 10 µs); allowed on only once
            // vCPU 1 is half a quantum behind it, at 45 µs.
            o.lock().unwrap().push(("fast resumed", vt_fast.clock(1)));
            detach();
        });
        let (o, b) = (order.clone(), start.clone());
        let vt_slow = vt.clone();
        let slow = std::thread::spawn(move || {
            manual_cpu_clock();
            attach(&vt_slow, 1, 0);
            b.wait();
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(5));
                burn(5_000);
                o.lock().unwrap().push(("slow at", sync().unwrap()));
            }
            detach();
        });
        fast.join().unwrap();
        slow.join().unwrap();
        let order = order.lock().unwrap();
        let resumed = order
            .iter()
            .position(|(w, _)| *w == "fast resumed")
            .unwrap();
        assert!(
            order[resumed].1 >= 45_000,
            "the fast vCPU resumed when the slow one was at {} ns: {order:?}",
            order[resumed].1
        );
        assert!(vt.failure().is_none());
    }

    #[test]
    fn a_vcpu_back_from_a_blocked_wait_holds_the_others_to_its_clock_at_once() {
        let vt = VirtualTime::new(2, 10_000);
        let (unblock, blocked) = std::sync::mpsc::channel::<()>();
        let (back_tx, back) = std::sync::mpsc::channel::<()>();
        let v = vt.clone();
        // vCPU 0: at 5 µs, blocked (out of the runnable set) until told, then runs slowly.
        let slow = std::thread::spawn(move || {
            manual_cpu_clock();
            attach(&v, 0, 0);
            burn(5_000);
            blocking(|| blocked.recv().unwrap());
            back_tx.send(()).unwrap();
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(5));
                burn(2_000);
                sync();
            }
            detach();
        });
        let v = vt.clone();
        let fast = on_vcpu(&vt, 1, move || {
            // Alone among the runnable ones: 12 µs is not ahead of anybody.
            burn(12_000);
            pace();
            unblock.send(()).unwrap();
            back.recv().unwrap();
            // 16 µs against vCPU 0 back at 5 µs: 11 µs ahead, more than the quantum: it
            // parks until vCPU 0 is within half a quantum (11 µs).
            burn(4_000);
            pace();
            v.clock(0)
        });
        let resumed_at = fast.join().unwrap();
        slow.join().unwrap();
        assert!(
            resumed_at >= 11_000,
            "resumed with vCPU 0 at {resumed_at} ns"
        );
    }

    #[test]
    fn a_vcpu_waiting_for_a_contended_lock_holds_the_others_to_its_clock() {
        use crate::sync::{Class, StatMutex};
        let vt = VirtualTime::new(2, 10_000);
        let lock = Arc::new(StatMutex::new((), Class::Bql));
        // A thread without a clock holds the lock until told: vCPU 0 waits for it at 5 µs.
        let (release_tx, release) = std::sync::mpsc::channel::<()>();
        let (held_tx, held) = std::sync::mpsc::channel::<()>();
        let l = lock.clone();
        let holder = std::thread::spawn(move || {
            let _g = l.lock(Site::BqlMain);
            held_tx.send(()).unwrap();
            release.recv().unwrap();
        });
        held.recv().unwrap();
        let (l, v) = (lock.clone(), vt.clone());
        let waiter = on_vcpu(&vt, 0, move || {
            burn(5_000);
            sync();
            let g = l.lock(Site::BqlHcall);
            drop(g);
            // Runs on slowly once it has the lock.
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(2));
                burn(3_000);
                pace();
            }
            v.clock(0)
        });
        // Wait until vCPU 0 is inside the acquisition (a slot starts idle, then runs).
        while !matches!(vt.slots[0].state.load(Ordering::SeqCst), LOCK | OUT) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let v = vt.clone();
        let ahead = on_vcpu(&vt, 1, move || {
            // 30 µs against vCPU 0 waiting at 5 µs: 25 µs ahead, more than the quantum; it
            // parks until vCPU 0 has the lock and is within half a quantum (25 µs).
            burn(30_000);
            pace();
            v.clock(0)
        });
        std::thread::sleep(Duration::from_millis(30));
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        let resumed_at = ahead.join().unwrap();
        waiter.join().unwrap();
        assert!(
            resumed_at >= 25_000,
            "vCPU 1 went on with vCPU 0 at {resumed_at} ns"
        );
        assert!(vt.failure().is_none());
    }

    /// The closed form of item 4a with exact costs: `n` vCPUs share `rounds` rounds, each
    /// `c` ns of compute and then `s` ns under the BQL (a real `StatMutex`, real threads,
    /// CPU time advanced by hand). Returns the virtual elapsed time: the latest clock, with
    /// the queue waits served for it.
    fn closed_form_run(n: usize, rounds: usize, c: u64, s: u64) -> u64 {
        use crate::sync::{Class, StatMutex};
        let vt = VirtualTime::new(n, 20_000);
        let bql = Arc::new(StatMutex::new((), Class::Bql));
        // Every vCPU is runnable from 0 before any starts (as the machine's start-cpu hands
        // each its sender's clock): an arrival is never recorded behind the queue.
        let start = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (vt, bql, start) = (vt.clone(), bql.clone(), start.clone());
                std::thread::spawn(move || {
                    manual_cpu_clock();
                    attach(&vt, i, 0);
                    start.wait();
                    for _ in 0..rounds / n {
                        burn(c);
                        pace();
                        let _g = bql.lock(Site::BqlHcall);
                        burn(s);
                    }
                    pace();
                    detach();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        (0..n)
            .map(|i| {
                let slot = &vt.slots[i];
                let unapplied =
                    slot.resolved.load(Ordering::SeqCst) - slot.applied.load(Ordering::SeqCst);
                vt.clock(i) + unapplied
            })
            .max()
            .unwrap()
    }

    #[test]
    fn the_bql_queue_follows_the_closed_form_min_n_c_plus_s_over_s() {
        // (C + S) / S = 4: the speedup grows with N up to 4 and stays there.
        let (c, s, rounds) = (3_000, 1_000, 240);
        let one = closed_form_run(1, rounds, c, s);
        assert_eq!(one, rounds as u64 * (c + s));
        for n in [2, 3, 4, 6, 8] {
            let speedup = one as f64 / closed_form_run(n, rounds, c, s) as f64;
            let form = (n as f64).min((c + s) as f64 / s as f64);
            assert!(
                (speedup / form - 1.0).abs() < 0.10,
                "N = {n}: speedup {speedup:.2}, closed form {form:.2}"
            );
        }
    }

    #[test]
    fn diverging_beyond_the_quantum_fails_the_run() {
        let vt = VirtualTime::new(2, 1_000);
        let failed = Arc::new(std::sync::Mutex::new(None));
        let f = failed.clone();
        vt.set_on_failure(move |m| *f.lock().unwrap() = Some(m));
        // vCPU 1 is runnable at clock 0 (attached on this thread, never advancing); vCPU 0
        // comes back from a stint far beyond quantum + the longest stint.
        attach_other(&vt, 1);
        let v = vt.clone();
        let h = std::thread::spawn(move || {
            manual_cpu_clock();
            attach(&v, 0, 0);
            burn(DIVERGENCE_SLACK_NS + 10_000);
            // pace would park forever waiting for vCPU 1: run it with vCPU 1 leaving.
            let v2 = v.clone();
            let leaver = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                v2.slots[1].state.store(OUT, Ordering::SeqCst);
                v2.poke();
            });
            pace();
            leaver.join().unwrap();
            detach();
        });
        h.join().unwrap();
        let msg = failed.lock().unwrap().clone().expect("the run failed");
        assert!(msg.contains("diverged"), "{msg}");
        assert_eq!(vt.failure(), Some(msg.as_str()));
    }

    #[test]
    fn with_fewer_host_cores_than_vcpus_at_most_that_many_run_at_once() {
        // Three vCPUs on one host core, each computing in stints with a real sleep inside
        // (a window for another to run too): never two at once, and all of them finish.
        let vt = VirtualTime::for_host(3, 10_000, 0, 1);
        assert!(vt.shares_cores());
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let (running, most) = (running.clone(), most.clone());
                on_vcpu(&vt, i, move || {
                    for _ in 0..40 {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        burn(3_000);
                        std::thread::sleep(Duration::from_micros(50));
                        running.fetch_sub(1, Ordering::SeqCst);
                        pace();
                    }
                    sync().unwrap()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), 40 * 3_000);
        }
        assert_eq!(most.load(Ordering::SeqCst), 1);
        assert!(!VirtualTime::for_host(3, 10_000, 0, 3).shares_cores());
    }

    #[test]
    fn a_vcpu_woken_from_a_wait_runs_on_without_a_core_until_it_claims_one() {
        // One host core, two vCPUs. vCPU 0 blocks and its core goes to vCPU 1, which keeps
        // it. Woken, vCPU 0 leaves the wait at once (it may hold the lock it waited for)
        // and waits for the core only in claim_core, until vCPU 1 gives it back.
        let vt = VirtualTime::for_host(2, 1_000_000_000, 0, 1);
        let (wake, woken) = std::sync::mpsc::channel::<()>();
        let (left, left_rx) = std::sync::mpsc::channel::<()>();
        let (running, running_rx) = std::sync::mpsc::channel::<()>();
        let (finish, finish_rx) = std::sync::mpsc::channel::<()>();
        let (attached, attached_rx) = std::sync::mpsc::channel::<()>();
        let v0 = on_vcpu(&vt, 0, move || {
            attached.send(()).unwrap();
            blocking(|| woken.recv().unwrap());
            left.send(()).unwrap();
            claim_core();
        });
        // vCPU 0 holds the core until it blocks; vCPU 1 gets it then. vCPU 1 starts once
        // vCPU 0 has the core: started together, vCPU 1 attached first one time in two
        // beside the other tests, took the core and kept it.
        attached_rx.recv().unwrap();
        let v1 = on_vcpu(&vt, 1, move || {
            running.send(()).unwrap();
            finish_rx.recv().unwrap();
        });
        running_rx.recv().unwrap();
        wake.send(()).unwrap();
        left_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the woken vCPU waited for a core inside the wait");
        assert_eq!(vt.cores.as_ref().unwrap().free(), 0);
        finish.send(()).unwrap();
        v1.join().unwrap();
        v0.join().unwrap();
        assert_eq!(vt.cores.as_ref().unwrap().free(), 1);
    }

    fn attach_other(vt: &Arc<VirtualTime>, i: usize) {
        vt.slots[i].state.store(RUN, Ordering::SeqCst);
    }
}
