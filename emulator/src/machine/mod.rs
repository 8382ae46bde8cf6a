//! Emulated machines.

pub mod pseries;
