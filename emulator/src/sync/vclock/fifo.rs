//! Locks as resources in virtual time: a lock's state (the FIFO queue of holds not yet served
//! for the BQL, the last holder for the line cost), where a hold starts and how its release
//! charges it (module doc of [`super`]).

use super::stats::Site;
use super::{Slot, VirtualTime, active, sync, with_current, with_vt};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// How a lock charges virtual wait to its acquirer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A FIFO queue in virtual time, resolved once no busy vCPU can arrive before an arrival.
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
    /// Recorded holds not yet served, per vCPU, in arrival order. A vCPU's arrivals keep
    /// their order as its waits are resolved (a wait moves every later arrival of its vCPU
    /// by the same amount), so serving merges the queues' heads: no re-sorting, and a
    /// resolved wait costs nothing until its vCPU's head is looked at.
    pending: Vec<VecDeque<Arrival>>,
    /// Where the last served hold ended.
    pub(super) free: u64,
}

impl FifoQueue {
    fn record(&mut self, a: Arrival) {
        if self.pending.len() <= a.vcpu {
            self.pending.resize_with(a.vcpu + 1, VecDeque::new);
        }
        self.pending[a.vcpu].push_back(a);
    }

    /// Holds recorded and not yet served.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.pending.iter().map(VecDeque::len).sum()
    }
}

/// One hold of a Fifo lock.
#[derive(Clone, Copy)]
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
/// N = 1), for no change in the measured holds; [`hold_begins`] then moves it to the
/// acquisition by the counter. A Fifo lock's wait comes when
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

/// Moves a hold's start from the last sync point to now, once the acquisition has been
/// left out: what the vCPU did between leaving guest code and taking the lock (the exit
/// path, the pace check, the lock's own bookkeeping) ran outside the lock and is not part
/// of its hold. Its clock still advances by that CPU time. Unchanged where the counter
/// cannot time the interval (the CPU clock settles it at the next sync).
pub fn hold_begins(since: HoldStart) -> HoldStart {
    let pending = with_current(|cur| cur.timer.pending()).flatten();
    match pending {
        Some(p) => HoldStart {
            clock: since.clock + p,
            ..since
        },
        None => since,
    }
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
            let hold = with_vt(|vt, i| {
                let applied = vt.slots[i].applied.load(Ordering::SeqCst);
                let hold = c
                    .saturating_sub(since.clock)
                    .saturating_sub(applied.saturating_sub(since.applied));
                let mut q = t.fifo.lock();
                q.record(Arrival {
                    at: since.clock,
                    vcpu: i,
                    hold,
                    applied: since.applied,
                    site: site as u8,
                });
                t.holder_since.store(u64::MAX, Ordering::SeqCst);
                vt.serve(&mut q, t);
                hold
            })
            .expect("synced");
            super::skip_bookkeeping();
            hold
        }
    }
}

impl VirtualTime {
    /// The earliest clock at which a vCPU not idle, or idle and sent a wake-up, can still
    /// arrive at a Fifo lock, as the queue's arrivals stand (moved by their vCPU's served
    /// waits): its clock plus the waits served and not yet added to it, which its next
    /// return from guest code adds before any hypercall or interrupt can take the lock. Its
    /// bare clock held the queue back by those waits: on the closed-form guest at N = 28,
    /// where the BQL is busy all the time and every vCPU has waits in flight, up to 9,700
    /// holds (7 ms of them) were still unserved when the guest read its end time, and its
    /// elapsed time came out up to a quarter below the holds it had made. Called with the
    /// queue's lock held, so `resolved` does not move; the clock is read before `applied`,
    /// whose increase is stored first: a torn read can only come out low.
    fn min_next_arrival(&self) -> Option<u64> {
        self.slots
            .iter()
            .filter_map(|s| {
                let base = match s.state.load(Ordering::SeqCst) {
                    super::IDLE => s.woken_at()?,
                    _ => s.clock.load(Ordering::SeqCst),
                };
                let unapplied = s
                    .resolved
                    .load(Ordering::SeqCst)
                    .saturating_sub(s.applied.load(Ordering::SeqCst));
                Some(base + unapplied)
            })
            .min()
    }

    /// Serves the arrivals no vCPU can still arrive before: those at or below every busy
    /// vCPU's next possible arrival ([`VirtualTime::min_next_arrival`]) and the current
    /// holder's arrival. Each waits for the previous hold's end; the wait goes to its vCPU's
    /// pending waits.
    fn serve(&self, q: &mut FifoQueue, t: &LockTime) {
        let floor = self
            .min_next_arrival()
            .unwrap_or(u64::MAX)
            .min(t.holder_since.load(Ordering::SeqCst));
        loop {
            // The earliest head, where it stands now: its arrival moved by the waits
            // resolved for its vCPU since it was recorded (ties: the lower vCPU first).
            let mut next: Option<(u64, usize)> = None;
            for (v, pending) in q.pending.iter().enumerate() {
                if let Some(a) = pending.front() {
                    let resolved = self.slots[v].resolved.load(Ordering::SeqCst);
                    let at = a.at + resolved.saturating_sub(a.applied);
                    if next.is_none_or(|(best, _)| at < best) {
                        next = Some((at, v));
                    }
                }
            }
            let Some((at, v)) = next else { break };
            if at > floor {
                break;
            }
            let a = q.pending[v].pop_front().expect("a head was found");
            let start = at.max(q.free);
            q.free = start + a.hold;
            let wait = start - at;
            let s = &self.slots[v];
            let last_end = s.bql_last_end.swap(q.free, Ordering::Relaxed);
            if let Some(think) = at.checked_sub(last_end) {
                s.bql_think.record(think);
            }
            s.bql_hold.record(a.hold);
            if wait != 0 {
                defer_wait(&self.slots[v], Site::ALL[a.site as usize], wait);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::RUN;
    use super::*;

    /// Records `(arrival, vCPU, hold)`s on a free lock in that order and serves the queue:
    /// each vCPU's served wait, where the last served hold ends, holds left queued.
    fn serve(vt: &VirtualTime, holds: &[(u64, usize, u64)]) -> (Vec<u64>, u64, usize) {
        let t = LockTime::default();
        t.holder_since.store(u64::MAX, Ordering::SeqCst);
        let mut q = t.fifo.lock();
        for &(at, vcpu, hold) in holds {
            q.record(Arrival {
                at,
                vcpu,
                hold,
                applied: 0,
                site: Site::BqlHcall as u8,
            });
        }
        vt.serve(&mut q, &t);
        let waits = (vt.slots.iter())
            .map(|s| s.pending[Site::BqlHcall as usize].load(Ordering::SeqCst))
            .collect();
        (waits, q.free, q.len())
    }

    #[test]
    fn a_served_wait_moves_the_later_queued_arrivals_of_its_vcpu() {
        // Both vCPUs idle: nothing can arrive any more, all is served. vCPU 1 recorded two
        // holds before vCPU 0's first, which comes earlier in virtual time: vCPU 1 waits 8
        // at 2, so its second arrival is at 15 + 8 = 23, not 15.
        let vt = VirtualTime::new(2, 1_000_000_000);
        let served = serve(&vt, &[(2, 1, 10), (15, 1, 5), (0, 0, 10), (21, 0, 1)]);
        // 0..10 vCPU 0; 10..20 vCPU 1 (waits 8); 21..22 vCPU 0; 23..28 vCPU 1.
        assert_eq!(served, (vec![0, 8], 28, 0));
    }

    #[test]
    fn the_queue_records_each_vcpus_think_times_and_holds_as_served() {
        // vCPU 0 holds 0..10 and arrives again at 25 (think 15), waits, holds 30..37; vCPU 1
        // arrives at 4, waits, holds 10..30: its first arrival has no think time.
        let vt = VirtualTime::new(2, 1_000_000_000);
        serve(&vt, &[(0, 0, 10), (4, 1, 20), (25, 0, 7)]);
        let (think, hold) = vt.bql_costs();
        // Buckets of a quarter octave: 15 in [14, 16), 7 alone, 10 in [10, 12), 20 in [20, 24).
        // One think time: vCPU 0's second arrival.
        assert_eq!(think.into_iter().collect::<Vec<_>>(), vec![(14, 1)]);
        assert_eq!(
            hold.into_iter().collect::<Vec<_>>(),
            vec![(7, 1), (10, 1), (20, 1)]
        );
    }

    #[test]
    fn equal_arrivals_are_served_lower_vcpu_first_and_later_ones_wait_for_a_busy_vcpu() {
        // vCPU 2 is running at 30: an arrival after 30 may still be preceded by one of its own.
        let vt = VirtualTime::new(3, 1_000_000_000);
        vt.slots[2].clock.store(30, Ordering::SeqCst);
        vt.slots[2].state.store(RUN, Ordering::SeqCst);
        let served = serve(&vt, &[(5, 1, 4), (5, 0, 4), (31, 0, 1)]);
        assert_eq!(served, (vec![0, 4, 0], 13, 1));
    }

    #[test]
    fn a_busy_vcpu_holds_the_queue_back_only_to_its_clock_plus_its_waits_in_flight() {
        // vCPU 1 runs at 30 with 20 of waits served and not yet added to its clock: it
        // cannot arrive before 50, so vCPU 0's arrival at 45 is served; one at 55 waits.
        let vt = VirtualTime::new(2, 1_000_000_000);
        let s = &vt.slots[1];
        s.clock.store(30, Ordering::SeqCst);
        s.resolved.store(20, Ordering::SeqCst);
        s.state.store(RUN, Ordering::SeqCst);
        assert_eq!(serve(&vt, &[(45, 0, 3), (55, 0, 1)]), (vec![0, 0], 48, 1));
        // Once they are added (clock 50), the same holds: nothing further.
        s.applied.store(20, Ordering::SeqCst);
        s.clock.store(50, Ordering::SeqCst);
        assert_eq!(serve(&vt, &[(45, 0, 3), (55, 0, 1)]), (vec![0, 0], 48, 1));
    }
}
