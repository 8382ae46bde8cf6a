//! The baseline tier: guest blocks translated in one pass, for code that runs a few times
//! (a translation costs a few microseconds, TCG's class, instead of Cranelift's few hundred);
//! blocks that stay hot are promoted to Cranelift. Its code is shared by the machine's vCPUs
//! ([`crate::jit::tier::MachineCode`]), and its blocks link to each other by patched jumps
//! ([`crate::jit::tier::Tier::link`]).
//!
//! The translator emits x86-64 (`x86_64`); on other hosts the tier is absent and the
//! runner uses Cranelift alone. Whatever depends on the host architecture stays inside this
//! module: the rest of the JIT sees only [`AVAILABLE`], [`machine_code`], [`tier`] and
//! [`native_ops`].

use super::JitShared;
use super::tier::{MachineCode, Tier};
use crate::isa::Op;
use std::sync::Arc;

#[cfg(target_arch = "x86_64")]
mod x86_64;

/// This host has the baseline tier.
pub const AVAILABLE: bool = cfg!(target_arch = "x86_64");

/// The machine's baseline code region, for a new code cache; `None` when this host has no
/// baseline tier or refuses the mappings (the machine goes on without it).
pub fn machine_code() -> Option<Arc<dyn MachineCode>> {
    #[cfg(target_arch = "x86_64")]
    return x86_64::Shared::new().map(|s| Arc::new(s) as Arc<dyn MachineCode>);
    #[cfg(not(target_arch = "x86_64"))]
    return None;
}

/// A vCPU's side of the tier, over the machine's code region in `shared`.
pub fn tier(shared: &JitShared) -> Option<Box<dyn Tier>> {
    #[cfg(target_arch = "x86_64")]
    return x86_64::BaselineTier::new(shared).map(|t| Box::new(t) as Box<dyn Tier>);
    #[cfg(not(target_arch = "x86_64"))]
    return {
        let _ = shared;
        None
    };
}

/// The ops the baseline tier translates natively, at least in some instances (for reports
/// and tests); none on a host without it.
pub fn native_ops() -> impl Iterator<Item = Op> {
    #[cfg(target_arch = "x86_64")]
    return x86_64::native_ops();
    #[cfg(not(target_arch = "x86_64"))]
    return std::iter::empty();
}
