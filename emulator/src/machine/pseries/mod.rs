//! The POWER8 pseries (sPAPR) machine: device tree, loader, hypercalls, RTAS, XICS, console.

pub mod cli;
