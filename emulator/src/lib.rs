//! ppc64emu: a multi-threaded POWER8 pseries system emulator.
//!
//! Pipeline (one module per stage, see ARCHITECTURE.md): `isa` (table, decoder) →
//! `cpu` (architected state) → `interp` (reference semantics) → `softmmu` (TLB, RAM).

pub mod isa;
pub mod cpu;
pub mod softmmu;
pub mod mmu;
pub mod papr;
pub mod interp;
pub mod jit;
pub mod machine;
pub mod user;
pub mod sync;
pub mod accel;
pub mod report;
