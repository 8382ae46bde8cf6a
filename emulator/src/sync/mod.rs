//! Locking strategies and the primitives they are built from.
//!
//! A strategy is a type parameter (`Machine<S: Strategy>`): the protocol code in `accel` asks
//! it where the BQL is taken, and the compiler removes the other branches. The cargo features
//! only choose which one the `ppc64emu` binary runs ([`Selected`]); tests and benches
//! instantiate all three in one build.

pub mod lock;
pub mod prim;
pub mod stats;
pub mod vclock;

pub use lock::{Class, StatGuard, StatMutex};
pub use stats::{LockStats, Site, SiteStats, StatsSink};

/// Where a locking strategy takes the BQL (docs/locking.md is the specification).
pub trait Strategy: Send + Sync + 'static {
    /// Name used on the command line, in `--version` and in run reports.
    const NAME: &'static str;
    /// vCPU threads hold the BQL whenever they are outside guest code, sleep with it and run
    /// queued work under it. Otherwise each holds its own CPU lock there, and queued work
    /// takes the BQL per item.
    const BQL_OUTSIDE_GUEST: bool;
    /// Cross-vCPU TLB flush jobs run without the BQL (only the target's TLB lock).
    const TLB_FLUSH_WITHOUT_BQL: bool;
}

/// QEMU's MTTCG before the per-CPU locks series: the BQL around everything outside guest code.
pub struct Baseline;
/// Per-CPU locks replace the BQL in the vCPU loop; queued work takes the BQL per item.
pub struct PerCpuLock;
/// As `PerCpuLock`, and TLB flush jobs run without the BQL.
pub struct CputlbNoBql;

impl Strategy for Baseline {
    const NAME: &'static str = "baseline";
    const BQL_OUTSIDE_GUEST: bool = true;
    const TLB_FLUSH_WITHOUT_BQL: bool = false;
}

impl Strategy for PerCpuLock {
    const NAME: &'static str = "per-cpu-lock";
    const BQL_OUTSIDE_GUEST: bool = false;
    const TLB_FLUSH_WITHOUT_BQL: bool = false;
}

impl Strategy for CputlbNoBql {
    const NAME: &'static str = "cputlb-no-bql";
    const BQL_OUTSIDE_GUEST: bool = false;
    const TLB_FLUSH_WITHOUT_BQL: bool = true;
}

/// The strategy this build of the binary runs: the most specific enabled feature wins.
#[cfg(feature = "cputlb-no-bql")]
pub type Selected = CputlbNoBql;
#[cfg(all(feature = "per-cpu-lock", not(feature = "cputlb-no-bql")))]
pub type Selected = PerCpuLock;
#[cfg(not(any(feature = "per-cpu-lock", feature = "cputlb-no-bql")))]
pub type Selected = Baseline;

/// The BQL's implementation, named in every run report so runs with different primitives are
/// never compared unknowingly.
pub const BQL_PRIMITIVE: &str = "parking_lot::Mutex (spin then park, eventually fair)";
