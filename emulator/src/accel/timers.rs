//! The I/O thread's timer list: one deadline per vCPU (its decrementer), re-armed by the vCPU
//! when the guest writes DEC, expired by the I/O thread which then raises the interrupt under
//! the BQL — the path QEMU takes, so decrementer traffic loads the same locks.
//!
//! The list has its own leaf lock (QEMU's timer-list lock), not the BQL.
//!
//! Deadlines are ns on the machine's clock: since the start on host time; on virtual time,
//! virtual ns, and "now" is the slowest runnable vCPU's clock — or, when every vCPU is idle,
//! the earliest deadline (time jumps to it).

use crate::sync::prim::Condvar;
use crate::sync::vclock::VirtualTime;
use crate::sync::{Class, Site, StatMutex};
use std::time::{Duration, Instant};

/// What the deadlines are measured against.
pub enum TimerClock {
    /// ns since this instant.
    Host(Instant),
    /// The vCPUs' virtual clocks.
    Virtual(std::sync::Arc<VirtualTime>),
}

/// On virtual time the I/O thread sleeps until the vCPUs report an event that may let a
/// timer expire (`VirtualTime::wait_timer_event`); it looks again after this long anyway, a
/// safety net that costs nothing measurable.
const VIRTUAL_RECHECK: Duration = Duration::from_millis(10);

struct State {
    deadlines: Vec<Option<u64>>,
    stopped: bool,
}

pub struct Timers {
    state: StatMutex<State>,
    changed: Condvar,
    clock: TimerClock,
}

impl Timers {
    pub fn new(n: usize, clock: TimerClock) -> Self {
        Self {
            state: StatMutex::new(
                State {
                    deadlines: vec![None; n],
                    stopped: false,
                },
                Class::Leaf,
            ),
            changed: Condvar::new(),
            clock,
        }
    }

    /// Arms (or re-arms) timer `i` to expire at `at` (ns on the machine's clock).
    pub fn arm(&self, i: usize, at: u64) {
        if let TimerClock::Virtual(vt) = &self.clock {
            vt.set_deadline(i, Some(at));
        }
        let mut s = self.state.lock(Site::TimerList);
        let earlier = s.deadlines.iter().flatten().all(|d| at < *d);
        s.deadlines[i] = Some(at);
        if earlier {
            self.changed.notify_all();
        }
    }

    pub fn cancel(&self, i: usize) {
        if let TimerClock::Virtual(vt) = &self.clock {
            vt.set_deadline(i, None);
        }
        self.state.lock(Site::TimerList).deadlines[i] = None;
    }

    /// Makes `wait_expired` return `None` from now on.
    pub fn stop(&self) {
        self.state.lock(Site::TimerList).stopped = true;
        self.changed.notify_all();
        if let TimerClock::Virtual(vt) = &self.clock {
            vt.timer_event();
        }
    }

    /// The machine's time for the timers; `next` is the earliest armed deadline.
    fn now(&self, next: Option<u64>) -> u64 {
        match &self.clock {
            TimerClock::Host(start) => start.elapsed().as_nanos() as u64,
            // Every vCPU idle: the earliest deadline is now.
            TimerClock::Virtual(vt) => vt.min_busy().unwrap_or(next.unwrap_or(0)),
        }
    }

    /// Sleeps until at least one timer expires and returns the expired ones with their
    /// deadlines (disarmed), or `None` once stopped. `max_sleep` bounds each sleep so the
    /// caller can poll other work.
    pub fn wait_expired(&self, max_sleep: Duration) -> Option<Vec<(usize, u64)>> {
        if let TimerClock::Virtual(vt) = &self.clock {
            return self.wait_expired_virtual(vt, max_sleep);
        }
        let mut s = self.state.lock(Site::TimerList);
        loop {
            if s.stopped {
                return None;
            }
            let expired = self.take_expired(&mut s);
            if !expired.is_empty() {
                return Some(expired);
            }
            let next = s.deadlines.iter().flatten().min().copied();
            let sleep = match next {
                None => max_sleep,
                Some(d) => Duration::from_nanos(d.saturating_sub(self.now(next))).min(max_sleep),
            };
            if s.wait_for(&self.changed, Site::CondIdle, sleep)
                && next.is_none_or(|d| d > self.now(Some(d)))
            {
                return Some(Vec::new());
            }
        }
    }

    /// Disarms and returns the timers due at the machine's time now, with their deadlines.
    fn take_expired(&self, s: &mut State) -> Vec<(usize, u64)> {
        let now = self.now(s.deadlines.iter().flatten().min().copied());
        let expired: Vec<(usize, u64)> = s
            .deadlines
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.filter(|&d| d <= now).map(|d| (i, d)))
            .collect();
        for &(i, _) in &expired {
            s.deadlines[i] = None;
            if let TimerClock::Virtual(vt) = &self.clock {
                vt.set_deadline(i, None);
            }
        }
        expired
    }

    /// [`Timers::wait_expired`] on virtual time: the list is looked at after every event the
    /// vCPUs report, and the sleep between holds no lock.
    fn wait_expired_virtual(
        &self,
        vt: &VirtualTime,
        max_sleep: Duration,
    ) -> Option<Vec<(usize, u64)>> {
        let seen = vt.timer_events();
        {
            let mut s = self.state.lock(Site::TimerList);
            if s.stopped {
                return None;
            }
            let expired = self.take_expired(&mut s);
            if !expired.is_empty() {
                return Some(expired);
            }
        }
        vt.wait_timer_event(seen, VIRTUAL_RECHECK.min(max_sleep));
        Some(Vec::new())
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    fn host_timers(n: usize) -> (Timers, Instant) {
        let start = Instant::now();
        (Timers::new(n, TimerClock::Host(start)), start)
    }

    fn ns_since(start: Instant) -> u64 {
        start.elapsed().as_nanos() as u64
    }

    #[test]
    fn expired_timers_are_returned_once_in_deadline_order_of_arming() {
        let (t, start) = host_timers(3);
        let now = ns_since(start);
        t.arm(2, now);
        t.arm(0, now + 5_000_000);
        let first = t.wait_expired(Duration::from_secs(5)).unwrap();
        assert_eq!(first, vec![(2, now)]);
        let mut second = t.wait_expired(Duration::from_secs(5)).unwrap();
        while second.is_empty() {
            second = t.wait_expired(Duration::from_secs(5)).unwrap();
        }
        assert_eq!(second, vec![(0, now + 5_000_000)]);
        t.cancel(1);
        t.stop();
        assert_eq!(t.wait_expired(Duration::from_secs(5)), None);
    }

    #[test]
    fn arming_an_earlier_deadline_wakes_the_sleeper() {
        let (t, start) = host_timers(2);
        let t = std::sync::Arc::new(t);
        t.arm(0, ns_since(start) + 3_600_000_000_000);
        let t2 = t.clone();
        let h = std::thread::spawn(move || {
            loop {
                let e = t2.wait_expired(Duration::from_secs(3600)).unwrap();
                if !e.is_empty() {
                    return e;
                }
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        let at = ns_since(start);
        t.arm(1, at);
        assert_eq!(h.join().unwrap(), vec![(1, at)]);
    }

    #[test]
    fn on_virtual_time_timers_fire_at_the_slowest_runnable_clock_or_jump_when_all_idle() {
        use crate::sync::vclock;
        let vt = VirtualTime::new(2, 1_000_000);
        let t = Timers::new(2, TimerClock::Virtual(vt.clone()));
        t.arm(0, 5_000);
        t.arm(1, 9_000);
        // Nobody runs: time jumps to the earliest deadline, and only that timer fires.
        assert_eq!(
            t.wait_expired(Duration::from_secs(1)).unwrap(),
            vec![(0, 5_000)]
        );
        // vCPU 0 runs at clock 0: vCPU 1's timer (9 µs) must wait for it to get there.
        let (go, gone) = std::sync::mpsc::channel::<()>();
        let (at, reached) = std::sync::mpsc::channel::<()>();
        let v = vt.clone();
        let h = std::thread::spawn(move || {
            vclock::manual_cpu_clock();
            vclock::attach(&v, 0, 0);
            at.send(()).unwrap();
            gone.recv().unwrap();
            vclock::burn(10_000);
            vclock::sync();
            at.send(()).unwrap();
            gone.recv().unwrap();
            vclock::detach();
        });
        reached.recv().unwrap();
        assert_eq!(t.wait_expired(Duration::from_millis(30)).unwrap(), vec![]);
        go.send(()).unwrap();
        reached.recv().unwrap();
        assert_eq!(
            t.wait_expired(Duration::from_secs(1)).unwrap(),
            vec![(1, 9_000)]
        );
        go.send(()).unwrap();
        h.join().unwrap();
    }
}
