//! Locks as resources in virtual time: a lock's state (the FIFO queue of holds not yet served
//! for the BQL, the last holder for the line cost), where a hold starts and how its release
//! charges it (module doc of [`super`]).

use super::stats::Site;
use super::{Slot, VirtualTime, active, sync, with_current};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// How a lock charges virtual wait to its acquirer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A FIFO queue in virtual time, resolved once every busy vCPU has passed an arrival.
    Fifo,
    /// Holds are measured, no wait is charged (see the module doc).
    Untimed,
}

/// The virtual-time state of a lock: the queue of holds not yet served (Fifo), in
/// virtual ns.
pub struct LockTime {
    /// Fifo: the arrival clock of the current holder (`u64::MAX`, or 0 before first use,
    /// when free): arrivals up to it may still be recorded.
    holder_since: AtomicU64,
    pub(super) fifo: Mutex<FifoQueue>,
    /// Who held it last (`LAST_NONE`: nobody yet, `LAST_OTHER`: a thread without a clock),
    /// for the line cost.
    last_holder: AtomicUsize,
}

impl Default for LockTime {
    fn default() -> Self {
        Self {
            holder_since: AtomicU64::new(0),
            fifo: Mutex::default(),
            last_holder: AtomicUsize::new(LAST_NONE),
        }
    }
}

const LAST_NONE: usize = usize::MAX;
const LAST_OTHER: usize = usize::MAX - 1;

#[derive(Default)]
pub(super) struct FifoQueue {
    /// Recorded holds, by arrival.
    pub(super) arrivals: std::collections::BinaryHeap<std::cmp::Reverse<Arrival>>,
    /// Where the last served hold ended.
    pub(super) free: u64,
}

/// One hold of a Fifo lock.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Arrival {
    at: u64,
    vcpu: usize,
    hold: u64,
    /// The holder's applied waits when it arrived (its clock already held those).
    applied: u64,
    site: u8,
}

/// A hold as the guard keeps it (virtual time only).
#[derive(Clone, Copy, Default)]
pub struct HoldStart {
    clock: u64,
    applied: u64,
}

/// Adds a wait at `site` to the slot's pending waits.
fn defer_wait(s: &Slot, site: Site, ns: u64) {
    s.resolved.fetch_add(ns, Ordering::SeqCst);
    s.pending[site as usize].fetch_add(ns, Ordering::SeqCst);
    s.has_pending.store(true, Ordering::SeqCst);
}

/// Where a hold of `t` starts (after acquiring it, or after a condition-variable wait
/// gave it back): what the guard keeps for [`released`]. The start is the clock of the last
/// sync point, not a fresh read: every BQL acquisition follows one closely (the return from
/// guest code that raised the hypercall or interrupt, a lock release), and a fresh read
/// costs a system call, about 0.5 µs per hypercall (+15 % on the closed-form guest at
/// N = 1), for no change in the measured holds. A Fifo lock's wait comes when
/// its queue is served and reaches the clock at the next return from guest code
/// ([`pace`]): a wait added inside another lock's hold would lengthen that hold, and that
/// lock's next acquirer would inherit it.
pub fn hold_start(t: &LockTime, rule: Rule) -> HoldStart {
    let start = with_current(|cur| {
        let s = &cur.vt.slots[cur.i];
        let start = HoldStart {
            clock: s.clock.load(Ordering::SeqCst),
            applied: s.applied.load(Ordering::SeqCst),
        };
        let line = cur.vt.line_cost_ns;
        if line != 0 {
            let prev = t.last_holder.swap(cur.i, Ordering::Relaxed);
            if prev != cur.i && prev != LAST_NONE {
                // After the start: the hold includes it, as the refills of the lock word
                // and the data it guards fall inside the critical section.
                s.clock.fetch_add(line, Ordering::SeqCst);
                s.line_ns.fetch_add(line, Ordering::Relaxed);
            }
        }
        start
    })
    .unwrap_or_else(|| {
        t.last_holder.store(LAST_OTHER, Ordering::Relaxed);
        HoldStart::default()
    });
    if rule == Rule::Fifo && active() {
        t.holder_since.store(start.clock, Ordering::SeqCst);
    }
    start
}

/// Before releasing a lock held since `since` (at `site`): ends the hold at the releaser's
/// clock and returns its length in virtual ns (0 off virtual time). A Fifo lock records
/// the hold (CPU time only: waits applied meanwhile are not part of it) and serves the
/// queue as far as it can.
pub fn released(t: &LockTime, rule: Rule, since: HoldStart, site: Site) -> u64 {
    let Some(c) = sync() else { return 0 };
    match rule {
        Rule::Untimed => c.saturating_sub(since.clock),
        Rule::Fifo => {
            let (vt, i) = with_current(|cur| (cur.vt.clone(), cur.i)).expect("synced");
            let applied = vt.slots[i].applied.load(Ordering::SeqCst);
            let hold = c
                .saturating_sub(since.clock)
                .saturating_sub(applied.saturating_sub(since.applied));
            let mut q = t.fifo.lock();
            q.arrivals.push(std::cmp::Reverse(Arrival {
                at: since.clock,
                vcpu: i,
                hold,
                applied: since.applied,
                site: site as u8,
            }));
            t.holder_since.store(u64::MAX, Ordering::SeqCst);
            vt.serve(&mut q, t);
            hold
        }
    }
}

impl VirtualTime {
    /// Serves the arrivals no vCPU can still arrive before: those at or below every busy
    /// vCPU's clock and the current holder's arrival. Each waits for the previous hold's
    /// end; the wait goes to its vCPU's pending waits.
    fn serve(&self, q: &mut FifoQueue, t: &LockTime) {
        let floor = self
            .min_busy()
            .unwrap_or(u64::MAX)
            .min(t.holder_since.load(Ordering::SeqCst));
        while let Some(&std::cmp::Reverse(a)) = q.arrivals.peek() {
            if a.at > floor {
                break;
            }
            q.arrivals.pop();
            let s = &self.slots[a.vcpu];
            // Waits served for this vCPU after it arrived push the arrival back: serve it
            // at its real place in the order.
            let resolved = s.resolved.load(Ordering::SeqCst);
            let at = a.at + resolved.saturating_sub(a.applied);
            if at != a.at {
                q.arrivals.push(std::cmp::Reverse(Arrival {
                    at,
                    applied: resolved,
                    ..a
                }));
                continue;
            }
            let start = at.max(q.free);
            q.free = start + a.hold;
            let wait = start - at;
            if wait != 0 {
                defer_wait(s, Site::ALL[a.site as usize], wait);
            }
        }
    }
}
