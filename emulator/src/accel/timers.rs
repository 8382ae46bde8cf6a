//! The I/O thread's timer list: one deadline per vCPU (its decrementer), re-armed by the vCPU
//! when the guest writes DEC, expired by the I/O thread which then raises the interrupt under
//! the BQL — the path QEMU takes, so decrementer traffic loads the same locks.
//!
//! The list has its own leaf lock (QEMU's timer-list lock), not the BQL.

use crate::sync::prim::Condvar;
use crate::sync::{Class, Site, StatMutex};
use std::time::{Duration, Instant};

struct State {
    deadlines: Vec<Option<Instant>>,
    stopped: bool,
}

pub struct Timers {
    state: StatMutex<State>,
    changed: Condvar,
}

impl Timers {
    pub fn new(n: usize) -> Self {
        Self {
            state: StatMutex::new(
                State {
                    deadlines: vec![None; n],
                    stopped: false,
                },
                Class::Leaf,
            ),
            changed: Condvar::new(),
        }
    }

    /// Arms (or re-arms) timer `i` to expire at `at`.
    pub fn arm(&self, i: usize, at: Instant) {
        let mut s = self.state.lock(Site::TimerList);
        let earlier = s.deadlines.iter().flatten().all(|d| at < *d);
        s.deadlines[i] = Some(at);
        if earlier {
            self.changed.notify_all();
        }
    }

    pub fn cancel(&self, i: usize) {
        self.state.lock(Site::TimerList).deadlines[i] = None;
    }

    /// Makes `wait_expired` return `None` from now on.
    pub fn stop(&self) {
        self.state.lock(Site::TimerList).stopped = true;
        self.changed.notify_all();
    }

    /// Sleeps until at least one timer expires and returns the expired ones (disarmed), or
    /// `None` once stopped. `max_sleep` bounds each sleep so the caller can poll other work.
    pub fn wait_expired(&self, max_sleep: Duration) -> Option<Vec<usize>> {
        let mut s = self.state.lock(Site::TimerList);
        loop {
            if s.stopped {
                return None;
            }
            let now = Instant::now();
            let expired: Vec<usize> = s
                .deadlines
                .iter()
                .enumerate()
                .filter(|(_, d)| d.is_some_and(|d| d <= now))
                .map(|(i, _)| i)
                .collect();
            if !expired.is_empty() {
                for &i in &expired {
                    s.deadlines[i] = None;
                }
                return Some(expired);
            }
            let next = s.deadlines.iter().flatten().min().copied();
            let sleep = next.map_or(max_sleep, |d| {
                d.saturating_duration_since(now).min(max_sleep)
            });
            if s.wait_for(&self.changed, Site::CondIdle, sleep)
                && next.is_none_or(|d| d > Instant::now())
            {
                return Some(Vec::new());
            }
        }
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn expired_timers_are_returned_once_in_deadline_order_of_arming() {
        let t = Timers::new(3);
        let now = Instant::now();
        t.arm(2, now);
        t.arm(0, now + Duration::from_millis(5));
        let first = t.wait_expired(Duration::from_secs(5)).unwrap();
        assert_eq!(first, vec![2]);
        let mut second = t.wait_expired(Duration::from_secs(5)).unwrap();
        while second.is_empty() {
            second = t.wait_expired(Duration::from_secs(5)).unwrap();
        }
        assert_eq!(second, vec![0]);
        t.cancel(1);
        t.stop();
        assert_eq!(t.wait_expired(Duration::from_secs(5)), None);
    }

    #[test]
    fn arming_an_earlier_deadline_wakes_the_sleeper() {
        let t = std::sync::Arc::new(Timers::new(2));
        t.arm(0, Instant::now() + Duration::from_secs(3600));
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
        t.arm(1, Instant::now());
        assert_eq!(h.join().unwrap(), vec![1]);
    }
}
