//! The POWER8 pseries (sPAPR) machine: device tree, loader, hypercalls, RTAS, XICS, console.
//!
//! The device models here are single-threaded state machines owned by the machine under the
//! BQL ([`PseriesDevices`]); what they need from the rest of the machine goes through
//! [`effects::MachineEffects`]. `config`/`cli` parse the command line, `loader` and `fdt`
//! prepare guest memory, and `boot::run` runs the machine.
//!
//! How the machine uses these pieces:
//! - `cli::main` parses and validates the command line, builds the [`loader::BootPlan`]
//!   (clear errors for bad files, exit statuses of `cli`) and calls `boot::run(config, plan)`.
//! - `boot::run` writes the plan into RAM ([`loader::BootPlan::apply`]), starts vCPU 0 with
//!   `plan.boot` (the others stopped, PIR = [`server_of`]), owns a [`PseriesDevices`] under the
//!   BQL (its `hpt` serving the HPT hcalls from `mmu::Hpt`) and implements [`effects::MachineEffects`].
//! - On `sc 1` from a vCPU: [`hcall::hcall`] under the BQL, then act on its
//!   [`hcall::HcallOutcome`] (cede: halt until an interrupt is pending or
//!   [`PseriesDevices::take_prod`] is true; stopped: wait for start-cpu; shutdown: leave).
//! - The I/O thread feeds stdin to `hvterm` ([`console::spawn_input_reader`]); console output
//!   goes to [`console::write_stdout`].
//! - The run report takes `hcall_stats` and `rtas_stats`.

pub mod boot;
pub mod cli;
pub mod config;
pub mod console;
mod devices;
pub mod effects;
pub mod fdt;
pub mod hcall;
pub mod loader;
pub mod report;
pub mod rtas;
mod shared;
mod vcpu;
pub mod xics;

use effects::MachineEffects;
use hcall::{HcallStats, HptHcalls};
use std::sync::Arc;

/// Largest `-smp` accepted (one XICS server per vCPU).
pub const MAX_CPUS: usize = 256;

/// Registered H_REGISTER_VPA areas of one vCPU (guest real addresses; 0 = none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VpaState {
    pub vpa: u64,
    pub dtl: u64,
    pub slb_shadow: u64,
}

/// All device state of the machine, mutated under the BQL.
pub struct PseriesDevices {
    pub ncpus: usize,
    pub xics: xics::Xics,
    pub hvterm: console::HvTerm,
    pub vpa: Vec<VpaState>,
    /// H_PROD received and not yet consumed by an H_CEDE, per vCPU.
    pub prod: Vec<bool>,
    /// Waiting in H_JOIN (until a prod), per vCPU.
    pub joined: Vec<bool>,
    /// `LPCR[ILE]` of the partition as last set by H_SET_MODE (start-cpu copies it).
    pub interrupt_le: bool,
    /// The hash page table, for the HPT hcalls (H_FUNCTION without one).
    pub hpt: Option<Arc<dyn HptHcalls>>,
    pub hcall_stats: HcallStats,
    pub rtas_stats: rtas::RtasStats,
    /// The time of day RTAS reports (`-rtc base=`, set-time-of-day).
    pub rtc: rtas::Rtc,
}

impl PseriesDevices {
    pub fn new(ncpus: usize) -> Self {
        Self {
            ncpus,
            xics: xics::Xics::new(ncpus),
            hvterm: console::HvTerm::new(),
            vpa: vec![VpaState::default(); ncpus],
            prod: vec![false; ncpus],
            joined: vec![false; ncpus],
            interrupt_le: false,
            hpt: None,
            hcall_stats: HcallStats::new(ncpus),
            rtas_stats: rtas::RtasStats::default(),
            rtc: rtas::Rtc::default(),
        }
    }

    /// Machine reset (system-reboot): devices back to their boot state; console input,
    /// statistics, the clock and the HPT object are kept (the machine clears the HPT itself).
    pub fn reset(&mut self, fx: &mut dyn MachineEffects) {
        self.xics.reset(fx);
        self.vpa.iter_mut().for_each(|v| *v = VpaState::default());
        self.prod.iter_mut().for_each(|p| *p = false);
        self.joined.iter_mut().for_each(|j| *j = false);
        self.interrupt_le = false;
    }

    /// Console input from the host: queued for H_GET_TERM_CHAR. When the queue was empty the
    /// vty's interrupt fires (an edge, as on QEMU): the guest drains the queue on it, so
    /// input that arrives while it is not empty needs none.
    pub fn console_input(&mut self, bytes: &[u8], fx: &mut dyn MachineEffects) {
        let was_empty = self.hvterm.pending_input() == 0;
        self.hvterm.push_input(bytes);
        if was_empty && !bytes.is_empty() {
            self.xics.set_irq(console::VTY_IRQ, true, fx);
        }
    }

    /// Consumes a pending H_PROD of `cpu` (a ceded vCPU wakes on it).
    pub fn take_prod(&mut self, cpu: usize) -> bool {
        std::mem::take(&mut self.prod[cpu])
    }

    pub fn prod_pending(&self, cpu: usize) -> bool {
        self.prod[cpu]
    }

    /// The vCPU whose interrupt server number is `server`. Servers are numbered like QEMU's
    /// with one thread per core: server = vCPU index.
    pub fn cpu_of_server(&self, server: u64) -> Option<usize> {
        (server < self.ncpus as u64).then_some(server as usize)
    }
}

/// Interrupt server number (`reg`, PIR, `ibm,ppc-interrupt-server#s`) of vCPU `cpu`.
pub fn server_of(cpu: usize) -> u32 {
    cpu as u32
}

/// How a run of the machine ended (mapped to the exit status by `cli`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MachineExit {
    /// RTAS power-off.
    PowerOff,
    /// RTAS system-reboot under `-no-reboot` (without it the machine resets and goes on).
    Reboot,
    /// RTAS ibm,os-term with the guest's message.
    OsTerm(String),
    /// A machine check with `MSR[ME]` = 0, with a description.
    Checkstop(String),
    /// `--timeout` expired.
    Timeout,
    /// Virtual time broke its own rules (a bug): no number is reported.
    ClockDiverged(String),
}
