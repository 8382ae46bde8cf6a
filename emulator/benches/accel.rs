//! Cost of the cross-vCPU protocols per strategy, through the real exec loop:
//! - `flush_round_trip`: queue a TLB-flush job on a halted vCPU and wait until it has run;
//! - `kick_wake`: raise an interrupt on a halted vCPU and wait until it has handled it.
//!
//! The target vCPU runs `accel::exec::vcpu_thread` with a runner that halts at once.

use criterion::{Criterion, criterion_group, criterion_main};
use ppc64emu::accel::Accel;
use ppc64emu::accel::exec::{BlockExit, VcpuRunner, vcpu_thread};
use ppc64emu::sync::{Baseline, CputlbNoBql, PerCpuLock, Site, StatGuard, Strategy};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Halts whenever it runs; counts the interrupts and jobs it handles.
struct Echo {
    done: Arc<AtomicU64>,
}

impl<S: Strategy> VcpuRunner<S> for Echo {
    type Devices = ();
    type Exception = ();

    fn has_work(&self, a: &Accel<S, Self, ()>, i: usize) -> bool {
        a.vcpus[i].interrupt_request.load(Ordering::SeqCst) != 0
    }
    fn run(&mut self, _: &Accel<S, Self, ()>, _: usize) -> BlockExit<()> {
        BlockExit::Exception(())
    }
    fn exception_site(_: &()) -> Site {
        Site::BqlHcall
    }
    fn handle_exception<'a>(
        &mut self,
        _: (),
        a: &'a Accel<S, Self, ()>,
        i: usize,
        _: &mut StatGuard<'a, ()>,
    ) {
        a.set_halted(i, true);
    }
    fn handle_interrupt<'a>(
        &mut self,
        a: &'a Accel<S, Self, ()>,
        i: usize,
        b: &mut StatGuard<'a, ()>,
    ) {
        a.reset_irq(i, 1, b);
        self.done.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs `iters` round trips of `poke` against a halted vCPU 1 and returns the total time.
fn round_trips<S: Strategy>(iters: u64, poke: fn(&Accel<S, Echo, ()>)) -> Duration {
    let accel: Arc<Accel<S, Echo, ()>> = Arc::new(Accel::new(2, ()));
    let done = Arc::new(AtomicU64::new(0));
    let target = {
        let (accel, done) = (accel.clone(), done.clone());
        std::thread::spawn(move || vcpu_thread(&*accel, 1, &mut Echo { done }))
    };
    let start = Instant::now();
    for k in 1..=iters {
        poke(&accel);
        while done.load(Ordering::SeqCst) < k {
            std::thread::yield_now();
        }
    }
    let t = start.elapsed();
    accel.request_shutdown(&accel.bql(Site::BqlMain));
    target.join().unwrap();
    t
}

fn flush<S: Strategy>(a: &Accel<S, Echo, ()>) {
    let _b = a.bql(Site::BqlHcall);
    a.queue_tlb_flush(1, |e: &mut Echo| {
        e.done.fetch_add(1, Ordering::SeqCst);
    });
}

fn kick<S: Strategy>(a: &Accel<S, Echo, ()>) {
    let b = a.bql(Site::BqlIoThread);
    a.set_irq(1, 1, &b);
}

fn strategy<S: Strategy>(c: &mut Criterion) {
    let mut g = c.benchmark_group(S::NAME);
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    g.bench_function("flush_round_trip", |b| {
        b.iter_custom(|n| round_trips::<S>(n, flush::<S>))
    });
    g.bench_function("kick_wake", |b| {
        b.iter_custom(|n| round_trips::<S>(n, kick::<S>))
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    strategy::<Baseline>(c);
    strategy::<PerCpuLock>(c);
    strategy::<CputlbNoBql>(c);
}

criterion_group!(group, benches);
criterion_main!(group);
