//! The host's cores as a resource of virtual time: with more vCPUs than host cores, at most
//! one vCPU thread per core runs at a time, and a core goes to the runnable vCPU with the
//! lowest clock when its holder parks (the quantum) or blocks.
//!
//! Why: left to the host's scheduler, N vCPU threads on fewer cores switch at every
//! contended lock — a waiter's spin yields its core, a woken waiter preempts whoever runs
//! there — and each switch refills caches inside the next hold, which the clocks count. On
//! two host cores the closed-form guest at N = 4 made 9,000 switches in 0.13 s (300 on one
//! core) and its BQL holds ran 15 % longer than on one core. With a core each, the threads
//! that run meet at a lock only while both are running: the holder releases within its hold
//! and the waiter takes the lock in its spin, on a warm cache, as on a many-core host.
//! Switches then come about every 1.5 quanta of a vCPU's time (it parks when it is a quantum
//! ahead and resumes half a quantum behind: `park_while_ahead`).
//!
//! Each vCPU has a *home* core and its thread is pinned to that core's host CPU; a core
//! given back goes to a vCPU of its own first, so that a vCPU's state (its TLB, its
//! translations' lookup tables, the guest data it works on) stays in one core's caches
//! rather than following the host scheduler between cores. Measured, it changed neither the
//! closed-form guest's BQL holds on two cores nor the default guest's elapsed time (nor did
//! forbidding moves altogether): it is kept for the locality, not for a figure. A core with no
//! vCPU of its own waiting takes one from another core (which then moves home), so no core
//! stays idle while a vCPU waits.
//!
//! Every wait of a vCPU thread goes through `blocking` (a lock, a condition variable) or the
//! quantum's park, and both give the core back first: a vCPU waiting for a core holds no
//! core, so whoever it waits for gets one.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering};

pub(super) struct HostCores {
    state: Mutex<CoreState>,
    /// One per vCPU: where it waits to be handed a core.
    cvs: Box<[Condvar]>,
    /// The host CPU each core's threads are pinned to (`None`: not pinned; the process
    /// may run on fewer CPUs than it was given cores, which then share CPUs).
    cpus: Option<Vec<usize>>,
}

struct CoreState {
    /// Per core: whether a vCPU holds it.
    busy: Vec<bool>,
    /// Per vCPU: its home core, the core its thread is pinned to now (`usize::MAX`: not
    /// yet), and its thread id (0: not known yet).
    home: Vec<usize>,
    pinned: Vec<usize>,
    tid: Vec<libc::pid_t>,
    /// vCPUs waiting for a core, and those handed one they have not taken yet.
    waiting: Vec<bool>,
    granted: Vec<bool>,
}

impl HostCores {
    /// `None` when every vCPU can have a core of its own: nothing to share. vCPU `i`'s home
    /// is core `i mod cores`.
    pub(super) fn new(vcpus: usize, cores: usize) -> Option<Self> {
        let cores = cores.max(1);
        (cores < vcpus).then(|| Self {
            state: Mutex::new(CoreState {
                busy: vec![false; cores],
                home: (0..vcpus).map(|i| i % cores).collect(),
                pinned: vec![usize::MAX; vcpus],
                tid: vec![0; vcpus],
                waiting: vec![false; vcpus],
                granted: vec![false; vcpus],
            }),
            cvs: (0..vcpus).map(|_| Condvar::new()).collect(),
            cpus: thread_cpus(),
        })
    }

    /// vCPU `i` takes a core — its home core, another free one, or the first handed to it
    /// (waiting, unless the machine stops) — and its thread moves to that core's CPU.
    pub(super) fn take(&self, i: usize, stopping: &AtomicBool) {
        let mut st = self.state.lock();
        let home = st.home[i];
        let free = if st.busy[home] {
            st.busy.iter().position(|b| !b)
        } else {
            Some(home)
        };
        if let Some(c) = free {
            st.busy[c] = true;
            st.home[i] = c;
        } else {
            // SAFETY: gettid has no preconditions.
            st.tid[i] = unsafe { libc::gettid() };
            st.waiting[i] = true;
            while !st.granted[i] {
                if stopping.load(Ordering::SeqCst) {
                    st.waiting[i] = false;
                    // Runs without a core from now on: the machine is shutting down.
                    return;
                }
                self.cvs[i].wait(&mut st);
            }
            st.granted[i] = false;
        }
        let core = st.home[i];
        if st.pinned[i] != core {
            st.pinned[i] = core;
            drop(st);
            self.pin(0, core);
        }
    }

    /// vCPU `i` gives its core back: to the waiting vCPU of that core with the lowest
    /// `clock` (ties: the lower index), else to the waiting vCPU with the lowest clock
    /// (which moves home), else it is free.
    pub(super) fn give(&self, i: usize, clock: impl Fn(usize) -> u64) {
        let mut st = self.state.lock();
        let core = st.home[i];
        let lowest = |st: &CoreState, own: bool| {
            (0..st.waiting.len())
                .filter(|&j| st.waiting[j] && (!own || st.home[j] == core))
                .min_by_key(|&j| (clock(j), j))
        };
        match lowest(&st, true).or_else(|| lowest(&st, false)) {
            Some(j) => {
                st.waiting[j] = false;
                st.granted[j] = true;
                st.home[j] = core;
                if st.pinned[j] != core {
                    // Moved before it wakes: woken on its old core's CPU, it would preempt
                    // whoever runs there (perhaps inside a hold) only to move on.
                    st.pinned[j] = core;
                    self.pin(st.tid[j], core);
                }
                self.cvs[j].notify_one();
            }
            None => st.busy[core] = false,
        }
    }

    /// The machine stops: every waiting vCPU leaves (see `take`).
    pub(super) fn stop(&self) {
        let _st = self.state.lock();
        for cv in self.cvs.iter() {
            cv.notify_all();
        }
    }

    /// Pins thread `tid` (0: the calling thread) to `core`'s CPU. A failure leaves it where
    /// the host puts it: the clocks stay right, only the caches move.
    fn pin(&self, tid: libc::pid_t, core: usize) {
        let Some(cpus) = &self.cpus else { return };
        let cpu = cpus[core % cpus.len()];
        // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes within it (cpu is one
        // the process was allowed, so below CPU_SETSIZE); tid is a thread of this process
        // (it waits in `take` and cannot exit meanwhile) or 0, the calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }

    /// Cores free now (tests).
    #[cfg(test)]
    pub(super) fn free(&self) -> usize {
        self.state.lock().busy.iter().filter(|b| !**b).count()
    }
}

/// The CPUs the calling thread may run on (its affinity mask), in order; `None` if
/// unknown. Called where the machine is built, it is the process's: vCPU threads are pinned
/// only later.
fn thread_cpus() -> Option<Vec<usize>> {
    // SAFETY: sched_getaffinity fills the set it is given, of the size it is told; pid 0 is
    // the calling thread.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        set
    };
    // SAFETY: CPU_ISSET reads the set within its size (i < CPU_SETSIZE).
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect();
    (!cpus.is_empty()).then_some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn as_many_cores_as_vcpus_is_nothing_to_share() {
        assert!(HostCores::new(2, 2).is_none());
        assert!(HostCores::new(2, 16).is_none());
        assert!(HostCores::new(3, 2).is_some());
    }

    #[test]
    fn a_given_core_goes_to_the_waiting_vcpu_with_the_lowest_clock() {
        let cores = Arc::new(HostCores::new(4, 1).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        cores.take(0, &stop);
        assert_eq!(cores.free(), 0);
        // vCPUs 1, 2, 3 wait, with clocks 30, 10, 20.
        let clocks = [0u64, 30, 10, 20];
        let order = Arc::new(Mutex::new(Vec::new()));
        let waiters: Vec<_> = (1..4)
            .map(|i| {
                let (cores, stop, order) = (cores.clone(), stop.clone(), order.clone());
                std::thread::spawn(move || {
                    cores.take(i, &stop);
                    order.lock().push(i);
                    cores.give(i, |j| clocks[j]);
                })
            })
            .collect();
        // Hand the core over only once all three wait.
        until_waiting(&cores, 3);
        cores.give(0, |j| clocks[j]);
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(*order.lock(), vec![2, 3, 1]);
        assert_eq!(cores.free(), 1);
    }

    /// Waits until `n` vCPUs wait for a core.
    fn until_waiting(cores: &HostCores, n: usize) {
        while cores.state.lock().waiting.iter().filter(|w| **w).count() < n {
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_given_core_goes_to_a_vcpu_of_its_own_first_then_to_any() {
        // Two cores: vCPUs 0, 2, 4 live on core 0, vCPUs 1, 3 on core 1.
        let cores = Arc::new(HostCores::new(5, 2).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let clocks = [0u64, 0, 50, 10, 60];
        let holders: Vec<_> = [0usize, 1]
            .into_iter()
            .map(|i| {
                let (cores, stop) = (cores.clone(), stop.clone());
                std::thread::spawn(move || cores.take(i, &stop))
            })
            .collect();
        for h in holders {
            h.join().unwrap();
        }
        assert_eq!(cores.free(), 0);
        let order = Arc::new(Mutex::new(Vec::new()));
        // vCPU 3 (core 1) has the lowest clock; 2 and 4 wait for core 0.
        let waiters: Vec<_> = [2usize, 3, 4]
            .into_iter()
            .map(|i| {
                let (cores, stop, order) = (cores.clone(), stop.clone(), order.clone());
                std::thread::spawn(move || {
                    cores.take(i, &stop);
                    order.lock().push((i, cores.state.lock().home[i]));
                })
            })
            .collect();
        until_waiting(&cores, 3);
        // Core 0 goes to its own lowest (2), not to 3.
        cores.give(0, |j| clocks[j]);
        while order.lock().is_empty() {
            std::thread::yield_now();
        }
        assert_eq!(*order.lock(), vec![(2, 0)]);
        // Core 0 again: 4 is its own; then core 0 once more: nobody of its own is left,
        // so 3 moves there from core 1.
        cores.give(2, |j| clocks[j]);
        while order.lock().len() < 2 {
            std::thread::yield_now();
        }
        cores.give(4, |j| clocks[j]);
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(*order.lock(), vec![(2, 0), (4, 0), (3, 0)]);
        // Core 1 is still held (by vCPU 1); nobody waits for it.
        cores.give(1, |j| clocks[j]);
        assert_eq!(cores.free(), 1);
    }

    #[test]
    fn a_vcpu_runs_pinned_to_its_cores_cpu() {
        let Some(cpus) = thread_cpus() else { return };
        let cores = HostCores::new(3, 2).unwrap();
        // vCPU 1's home is core 1.
        cores.take(1, &AtomicBool::new(false));
        assert_eq!(thread_cpus(), Some(vec![cpus[1 % cpus.len()]]));
    }

    #[test]
    fn a_stopping_machine_lets_every_waiter_go() {
        let cores = Arc::new(HostCores::new(2, 1).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        cores.take(0, &stop);
        let (c2, s2) = (cores.clone(), stop.clone());
        let waiter = std::thread::spawn(move || c2.take(1, &s2));
        while !cores.state.lock().waiting[1] {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::SeqCst);
        cores.stop();
        waiter.join().unwrap();
        assert!(!cores.state.lock().waiting[1]);
    }
}
