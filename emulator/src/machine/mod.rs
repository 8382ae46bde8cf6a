//! Emulated machines.

pub mod pseries;

/// Name of the locking strategy this binary was built with (`--version`, run reports).
/// With several strategy features enabled the most concurrent one wins.
pub const STRATEGY_NAME: &str = if cfg!(feature = "cputlb-no-bql") {
    "cputlb-no-bql"
} else if cfg!(feature = "per-cpu-lock") {
    "per-cpu-lock"
} else {
    "baseline"
};
