//! Model checks of the vCPU protocols with loom, over the real code of `Accel` (the primitive
//! facade switches to loom's types). Run with
//! `cargo test --workspace --lib --features ppc64emu/loom loom -- --test-threads=1`, as
//! scripts/test does (`--workspace` keeps the tests' feature set, so their dependency build is
//! reused).

#![cfg(feature = "loom")]

use super::Accel;
use crate::sync::prim::{Arc, AtomicU32, Ordering, thread};
use crate::sync::{Baseline, CputlbNoBql, PerCpuLock, Site, Strategy};

/// The vCPU-private context work items see.
#[derive(Default)]
struct Ctx {
    ran: u32,
}

type A<S> = Accel<S, Ctx, ()>;

fn model(f: impl Fn() + Send + Sync + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// A halted vCPU sleeps until an interrupt is raised; the raise must never be lost.
fn kick_vs_halt<S: Strategy>() {
    model(|| {
        let a: Arc<A<S>> = Arc::new(Accel::new(1, ()));
        a.vcpus[0].halted.store(true, Ordering::SeqCst);
        let a2 = a.clone();
        let raiser = thread::spawn(move || {
            let b = a2.bql(Site::BqlIoThread);
            a2.set_irq(0, 1, &b);
        });
        let mut outer = a.enter_outer(0);
        a.wait_io_event(0, &mut outer, || {
            a.vcpus[0].interrupt_request.load(Ordering::SeqCst) != 0
        });
        drop(outer);
        raiser.join().unwrap();
        assert_eq!(a.vcpus[0].interrupt_request.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn loom_kick_vs_halt_baseline() {
    kick_vs_halt::<Baseline>();
}
#[test]
fn loom_kick_vs_halt_per_cpu_lock() {
    kick_vs_halt::<PerCpuLock>();
}

/// Work queued on a sleeping vCPU wakes it and runs exactly once, with each strategy's locks.
fn queue_vs_sleep<S: Strategy>(tlb_flush: bool) {
    model(move || {
        let a: Arc<A<S>> = Arc::new(Accel::new(1, ()));
        a.vcpus[0].halted.store(true, Ordering::SeqCst);
        let a2 = a.clone();
        let producer = thread::spawn(move || {
            // Baseline queues from BQL context (hypercalls, I/O thread).
            let _b = S::BQL_OUTSIDE_GUEST.then(|| a2.bql(Site::BqlHcall));
            if tlb_flush {
                a2.queue_tlb_flush(0, |c: &mut Ctx| c.ran += 1);
            } else {
                a2.async_run_on_cpu(0, |c: &mut Ctx| c.ran += 1);
            }
        });
        let mut ctx = Ctx::default();
        let mut outer = a.enter_outer(0);
        a.wait_io_event(0, &mut outer, || false);
        a.drain_work(0, &mut outer, &mut ctx);
        drop(outer);
        producer.join().unwrap();
        assert_eq!(ctx.ran, 1);
    });
}

#[test]
fn loom_queue_vs_sleep_baseline() {
    queue_vs_sleep::<Baseline>(false);
}
#[test]
fn loom_queue_vs_sleep_per_cpu_lock() {
    queue_vs_sleep::<PerCpuLock>(false);
}
#[test]
fn loom_tlb_flush_vs_sleep_cputlb_no_bql() {
    queue_vs_sleep::<CputlbNoBql>(true);
}

/// `run_on_cpu` returns only after the target ran the function.
fn run_on_cpu_completes<S: Strategy>() {
    model(|| {
        let a: Arc<A<S>> = Arc::new(Accel::new(2, ()));
        a.vcpus[1].halted.store(true, Ordering::SeqCst);
        let a2 = a.clone();
        let target = thread::spawn(move || {
            let mut ctx = Ctx::default();
            let mut outer = a2.enter_outer(1);
            a2.wait_io_event(1, &mut outer, || false);
            a2.drain_work(1, &mut outer, &mut ctx);
            ctx.ran
        });
        let seen = Arc::new(AtomicU32::new(0));
        let s2 = seen.clone();
        let mut bql = Some(a.bql(Site::BqlHcall));
        a.run_on_cpu(
            1,
            move |c: &mut Ctx| {
                c.ran += 1;
                s2.store(1, Ordering::SeqCst);
            },
            &mut bql,
            Site::BqlHcall,
        );
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        drop(bql);
        assert_eq!(target.join().unwrap(), 1);
    });
}

#[test]
fn loom_run_on_cpu_baseline() {
    run_on_cpu_completes::<Baseline>();
}
#[test]
fn loom_run_on_cpu_per_cpu_lock() {
    run_on_cpu_completes::<PerCpuLock>();
}

/// While an exclusive section runs, no vCPU is inside guest code.
#[test]
fn loom_exclusive_vs_exec() {
    model(|| {
        let a: Arc<A<PerCpuLock>> = Arc::new(Accel::new(2, ()));
        let in_guest = Arc::new(AtomicU32::new(0));
        let vcpu = {
            let (a, in_guest) = (a.clone(), in_guest.clone());
            thread::spawn(move || {
                for _ in 0..2 {
                    a.exclusive.exec_start(&a.vcpus[1].exec);
                    in_guest.fetch_add(1, Ordering::SeqCst);
                    in_guest.fetch_sub(1, Ordering::SeqCst);
                    a.exclusive.exec_end(&a.vcpus[1].exec);
                }
            })
        };
        a.start_exclusive();
        assert_eq!(in_guest.load(Ordering::SeqCst), 0);
        a.end_exclusive();
        vcpu.join().unwrap();
    });
}

/// The model must be able to fail: raising an interrupt on a per-CPU-lock vCPU without taking
/// its CPU lock (bit set and broadcast outside the lock the sleeper checks under) loses the
/// wake-up in some schedule, and loom finds the one where the vCPU sleeps forever.
///
/// loom reports it by panicking, and its runtime cannot unwind cleanly from there (it aborts),
/// so the model runs in a child process whose failure and message we check.
#[test]
fn loom_catches_an_interrupt_raised_without_the_cpu_lock() {
    const INNER: &str = "LOCKSCALE_LOOM_NEGATIVE_INNER";
    if std::env::var_os(INNER).is_some() {
        model(|| {
            let a: Arc<A<PerCpuLock>> = Arc::new(Accel::new(1, ()));
            a.vcpus[0].halted.store(true, Ordering::SeqCst);
            let a2 = a.clone();
            let raiser = thread::spawn(move || {
                a2.vcpus[0].interrupt_request.fetch_or(1, Ordering::SeqCst);
                a2.kick_without_cpu_lock(0);
            });
            let mut outer = a.enter_outer(0);
            a.wait_io_event(0, &mut outer, || {
                a.vcpus[0].interrupt_request.load(Ordering::SeqCst) != 0
            });
            drop(outer);
            raiser.join().unwrap();
        });
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "accel::loom_tests::loom_catches_an_interrupt_raised_without_the_cpu_lock",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(INNER, "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the broken protocol passed the model check"
    );
    assert!(
        stderr.contains("deadlock"),
        "expected loom to report a deadlock, got:\n{stderr}"
    );
}
