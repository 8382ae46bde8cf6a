//! ppc64emu: a multi-threaded POWER8 pseries system emulator.
//!
//! Pipeline (one module per stage, see ARCHITECTURE.md): `isa` (table, decoder) →
//! `cpu` (architected state) → `interp` (reference semantics) → `softmmu` (TLB, RAM).

pub mod accel;
pub mod cpu;
pub mod engine;
pub mod interp;
pub mod isa;
pub mod jit;
pub mod machine;
pub mod mmu;
pub mod report;
pub mod softmmu;
pub mod sync;
pub mod user;
