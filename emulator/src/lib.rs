//! ppc64emu: a multi-threaded POWER8 pseries system emulator.
//!
//! Layers (see docs/architecture.md): `isa` (the instruction table, decoder) → `cpu` (architected
//! state, interrupts) → `interp` (reference semantics, one function per instruction) and
//! `jit` (translating tiers) → `engine` (the vCPU and how its code runs) → `softmmu` / `mmu`
//! (TLB, RAM, hash MMU); `accel` (vCPU threads, kicks, exclusive work) and `sync` (locking
//! strategies) drive engines for `machine::pseries`, whose runs end in its `report`; `papr`
//! holds the hypervisor interface's numbers that several layers use; `user` runs one Linux
//! program.

pub mod accel;
pub mod cpu;
pub mod engine;
pub mod interp;
pub mod isa;
pub mod jit;
pub mod machine;
pub mod mmu;
pub mod papr;
pub mod softmmu;
pub mod sync;
pub mod user;
pub mod vcpu;
