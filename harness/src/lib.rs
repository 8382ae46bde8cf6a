//! lockscale: a scalability benchmarking harness for the locking strategies of ppc64emu.
//!
//! It talks to emulators only through their command line, their `--report` JSON and the
//! guest's result line, so any emulator that speaks that interface (ours, a peer such as
//! qemu-system-ppc64, or the test suite's fake) can be swept, plotted, compared and gated.

pub mod analysis;
pub mod ascii;
pub mod builder;
pub mod carry;
pub mod charts;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod compare;
pub mod fetch;
pub mod git;
pub mod guest;
pub mod host;
pub mod kernel_tree;
pub mod lock;
pub mod merge;
pub mod model;
pub mod plan;
pub mod plot;
pub mod prepared;
pub mod project;
pub mod reference;
pub mod report;
pub mod resultline;
pub mod runner;
pub mod sizes;
pub mod slurm;
pub mod stats;
pub mod sweep;
pub mod util;
pub mod workload;
