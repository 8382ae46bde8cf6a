//! Runs the machine: vCPU threads, I/O thread, locking strategy (the lead's part).

use super::MachineExit;
use super::config::MachineConfig;
use super::loader::BootPlan;

/// Boots `plan` on the machine `config` describes and runs it until it stops.
pub fn run(config: MachineConfig, plan: BootPlan) -> anyhow::Result<MachineExit> {
    let _ = (config, plan);
    anyhow::bail!("the pseries machine is not yet runnable")
}
