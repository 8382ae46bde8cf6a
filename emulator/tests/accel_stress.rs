//! Oversubscribed stress of the vCPU protocols: 8 vCPU threads (on however few host cores)
//! hammer each other with cross-vCPU TLB flushes, interrupts, cedes and exclusive work through
//! the real exec loop, under each strategy. A watchdog fails the test with every vCPU's state
//! if the machine stops making progress; at the end every queued flush must have been run by
//! its target exactly once.

use ppc64emu::accel::Accel;
use ppc64emu::accel::exec::{BlockExit, VcpuRunner, vcpu_thread};
use ppc64emu::sync::{Baseline, CputlbNoBql, PerCpuLock, Site, StatGuard, Strategy};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const VCPUS: usize = 8;
const ACTIONS_PER_VCPU: u64 = 20_000;
/// Interrupt bits: an IPI from another vCPU, and the periodic tick of the I/O thread (the
/// decrementer's role: it wakes vCPUs that all ceded at once).
const IPI: u32 = 1;
const TICK: u32 = 2;

#[derive(Default)]
struct Devices {
    flushes_sent: [u64; VCPUS],
    irqs_sent: [u64; VCPUS],
    finished: usize,
}

enum Action {
    FlushAll,
    Irq(usize),
    Cede,
    Exclusive,
    Finished,
}

struct Fake {
    i: usize,
    rng: u64,
    left: u64,
    finished: bool,
    flushes_run: u64,
    irqs_taken: u64,
    exclusive_runs: u64,
    progress: Arc<AtomicU64>,
}

impl Fake {
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }
}

impl<S: Strategy> VcpuRunner<S> for Fake {
    type Devices = Devices;
    type Exception = Action;

    fn has_work(&self, accel: &Accel<S, Self, Devices>, i: usize) -> bool {
        accel.vcpus[i].interrupt_request.load(Ordering::SeqCst) != 0
    }

    fn run(&mut self, _: &Accel<S, Self, Devices>, _: usize) -> BlockExit<Action> {
        if self.finished {
            return BlockExit::Exception(Action::Cede);
        }
        if self.left == 0 {
            self.finished = true;
            return BlockExit::Exception(Action::Finished);
        }
        self.left -= 1;
        self.progress.fetch_add(1, Ordering::Relaxed);
        let r = self.next();
        BlockExit::Exception(match r % 100 {
            0..=39 => Action::FlushAll,
            40..=79 => Action::Irq((r >> 8) as usize % VCPUS),
            80..=97 => Action::Cede,
            _ => Action::Exclusive,
        })
    }

    fn exception_site(_: &Action) -> Site {
        Site::BqlHcall
    }

    fn handle_exception<'a>(
        &mut self,
        e: Action,
        accel: &'a Accel<S, Self, Devices>,
        i: usize,
        bql: &mut StatGuard<'a, Devices>,
    ) {
        match e {
            Action::FlushAll => {
                for j in (0..VCPUS).filter(|&j| j != i) {
                    bql.flushes_sent[j] += 1;
                    accel.queue_tlb_flush(j, |c: &mut Fake| c.flushes_run += 1);
                }
            }
            Action::Irq(j) => {
                bql.irqs_sent[j] += 1;
                accel.set_irq(j, IPI, bql);
            }
            Action::Cede => accel.set_halted(i, true),
            Action::Exclusive => {
                accel.async_safe_run_on_cpu(i, |c: &mut Fake| c.exclusive_runs += 1)
            }
            Action::Finished => {
                bql.finished += 1;
                if bql.finished == VCPUS {
                    accel.request_shutdown(bql);
                }
            }
        }
    }

    fn handle_interrupt<'a>(
        &mut self,
        accel: &'a Accel<S, Self, Devices>,
        i: usize,
        bql: &mut StatGuard<'a, Devices>,
    ) {
        let pending = accel.vcpus[i].interrupt_request.load(Ordering::SeqCst);
        accel.reset_irq(i, pending, bql);
        if pending & IPI != 0 {
            self.irqs_taken += 1;
        }
    }
}

fn stress<S: Strategy>() {
    let accel: Arc<Accel<S, Fake, Devices>> = Arc::new(Accel::new(VCPUS, Devices::default()));
    let progress = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..VCPUS)
        .map(|i| {
            let (accel, progress) = (accel.clone(), progress.clone());
            std::thread::Builder::new()
                .name(format!("vcpu{i}"))
                .spawn(move || {
                    let mut f = Fake {
                        i,
                        rng: 0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1),
                        left: ACTIONS_PER_VCPU,
                        finished: false,
                        flushes_run: 0,
                        irqs_taken: 0,
                        exclusive_runs: 0,
                        progress,
                    };
                    vcpu_thread(&*accel, i, &mut f);
                    f
                })
                .unwrap()
        })
        .collect();

    let ticker = {
        let accel = accel.clone();
        std::thread::Builder::new()
            .name("io".into())
            .spawn(move || {
                while !accel.shutdown.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                    let b = accel.bql(Site::BqlIoThread);
                    for j in 0..VCPUS {
                        accel.set_irq(j, TICK, &b);
                    }
                }
                accel.stats.absorb_thread();
            })
            .unwrap()
    };

    // Watchdog: fail with every vCPU's state when nothing moves for a long while.
    let mut last = (progress.load(Ordering::Relaxed), Instant::now());
    while !threads.iter().all(|t| t.is_finished()) {
        std::thread::sleep(Duration::from_millis(20));
        let p = progress.load(Ordering::Relaxed);
        if p != last.0 {
            last = (p, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(60) {
            let state: Vec<String> = accel
                .vcpus
                .iter()
                .map(|v| {
                    format!(
                        "vcpu{}: halted={} stopped={} irq={:#x} exit_request={} work_pending={} running={}",
                        v.index,
                        v.halted.load(Ordering::SeqCst),
                        v.stopped.load(Ordering::SeqCst),
                        v.interrupt_request.load(Ordering::SeqCst),
                        v.exit_request.load(Ordering::SeqCst),
                        v.work_pending.load(Ordering::SeqCst),
                        v.exec.running.load(Ordering::SeqCst),
                    )
                })
                .collect();
            panic!(
                "{}: no progress for 60 s (deadlock?)\n{}",
                S::NAME,
                state.join("\n")
            );
        }
    }
    let fakes: Vec<Fake> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    ticker.join().unwrap();
    let d = accel.bql(Site::BqlMain);
    for f in &fakes {
        let left_in_queue = accel.vcpus[f.i].lock.lock(Site::BqlMain).work.len() as u64;
        assert_eq!(
            f.flushes_run + left_in_queue,
            d.flushes_sent[f.i],
            "{}: vcpu{} lost a flush",
            S::NAME,
            f.i
        );
        assert!(
            f.irqs_taken <= d.irqs_sent[f.i],
            "{}: vcpu{} took more interrupts than were raised",
            S::NAME,
            f.i
        );
        assert!(
            f.exclusive_runs > 0,
            "{}: vcpu{} never ran its exclusive work",
            S::NAME,
            f.i
        );
    }
    drop(d);
    let stats = {
        accel.stats.absorb_thread();
        accel.stats.snapshot()
    };
    let flush_jobs: u64 = fakes.iter().map(|f| f.flushes_run).sum();
    let bql_flush = stats.get(Site::BqlTlbFlushItem).acquisitions;
    if S::TLB_FLUSH_WITHOUT_BQL {
        assert_eq!(bql_flush, 0, "{}: flush jobs took the BQL", S::NAME);
    } else {
        assert_eq!(
            bql_flush,
            flush_jobs,
            "{}: every flush job runs under the BQL",
            S::NAME
        );
    }
    if !S::BQL_OUTSIDE_GUEST {
        assert_eq!(stats.get(Site::BqlExecLoop).acquisitions, 0);
        assert_eq!(stats.get(Site::BqlIdleWait).acquisitions, 0);
    } else {
        assert!(stats.get(Site::BqlExecLoop).acquisitions > 0);
    }
}

#[test]
fn stress_baseline() {
    stress::<Baseline>();
}

#[test]
fn stress_per_cpu_lock() {
    stress::<PerCpuLock>();
}

#[test]
fn stress_cputlb_no_bql() {
    stress::<CputlbNoBql>();
}
