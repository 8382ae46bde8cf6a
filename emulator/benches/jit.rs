//! JIT against the interpreter on the same guest program (`tests/programs/bin/sys bench`),
//! side by side in one run: guest instructions per second of each (criterion throughput).
//! Translation cost is included, as a short program pays it.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::path::Path;

fn bench(crit: &mut Criterion) {
    let exe = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/bin/sys");
    let image = std::fs::read(&exe).expect("tests/programs/bin/sys");
    let argv = [b"sys".to_vec(), b"bench".to_vec()];
    let load = |jit: bool| {
        use ppc64emu::engine::{EngineConfig, TierKind};
        let config = EngineConfig {
            tier: if jit { TierKind::Jit } else { TierKind::Interp },
            ..EngineConfig::default()
        };
        ppc64emu::user::Runner::new(
            &image,
            &exe,
            &argv,
            &[],
            &config,
            ppc64emu::user::JitMemory::Guarded,
        )
        .expect("load sys")
    };
    let per_run = load(false).run().instructions;
    let mut g = crit.benchmark_group("user_sys_bench");
    g.throughput(Throughput::Elements(per_run));
    g.bench_function("interp", |b| b.iter(|| load(false).run()));
    g.bench_function("jit", |b| b.iter(|| load(true).run()));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
