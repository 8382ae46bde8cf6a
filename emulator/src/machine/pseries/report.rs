//! The run report (`--report FILE`, JSON): everything measured in one run, so the harness
//! never scrapes logs — except the guest's result line, which it reads itself (and which is
//! copied here too).
//!
//! Fields (schema `ppc64emu.report/1`):
//! - `strategy`, `bql_primitive`, `tlb_flush_mode`, `tlb_flush_coalesce`, `accel`, `smp`,
//!   `ram_bytes`, `pin` (`compact` when vCPU i was pinned to host core i, else `none`),
//!   `sync_profile`: how the run was made.
//! - `exit`: how it ended (`power-off`, `reboot`, `os-term`, `checkstop`, `timeout`).
//! - `host_wall_s`: host time from the first vCPU start to the last vCPU stop.
//! - `guest_elapsed_s` and `guest_elapsed_source`: the guest's own measurement from its
//!   `MKBENCH-RESULT … elapsed_tb=… tb_hz=…` line (`result-line`), else the timebase at
//!   power-off (`timebase`).
//! - `result_line`: the guest's result line, if it printed one.
//! - `hcalls`: hypercalls by name over all vCPUs.
//! - `vcpus[]`: per vCPU: instructions, blocks, exits by reason (`exits_exception`,
//!   `exits_hypercall`), interrupts taken by vector, cross-vCPU flush jobs (queued on it,
//!   run, elided because its TLB was clean, coalesced), own flushes, TLB fills (misses),
//!   full TLB flushes, kicks received, seconds halted, and the final pc/msr/lr; on virtual
//!   time also the vCPU's clock (`virtual_ns`), the CPU time charged (`cpu_ns`), `parks`,
//!   `idle_ns`, `line_ns`, `skipped_ns` and `virtual_wait_ns` per site.
//! - `clock`: the clock guest time was measured on (`kind`, and for virtual time the quantum,
//!   line cost, host cores, the cost of a CPU-clock read, whether the counter timed short
//!   intervals, and the BQL's virtual queue as it served the vCPUs: histograms of their think
//!   times (`bql_think_ns`) and holds (`bql_hold_ns`), each quarter-octave bucket's smallest
//!   value in ns → count).
//! - `vcpus[].jit` (`--accel jit` only), per tier of the engine: the interpreter tier's
//!   `cold_blocks` and `cold_instructions` (blocks run before they were hot) and
//!   `fallbacks` (instructions translated code left to the interpreter, by mnemonic, most
//!   frequent first, top 40); the translating tier's `blocks_translated`, `translate_ms`
//!   (total), `translate_mean_us` and `translate_p99_us` (per block; the 99th percentile is
//!   the upper bound of its power-of-two bucket), `translated_instructions`, `code_bytes`,
//!   `cache_flushes`; and how blocks were found: `jump_cache_hits`, `block_map_hits`, plus
//!   `slow_memory_accesses` and `blocks_invalidated` (machine-wide).
//! - `locks`: per lock site (names of docs/locking.md: `bql.exec_loop`, `bql.hcall`, …)
//!   `acquisitions`, `contended`, `wait_ns`, `max_wait_ns`, `hold_ns` (hold times only with
//!   `--sync-profile`); sites never taken are left out.
//! - `lock_table`: the same as a top-N text table (what `--sync-profile` prints).

use super::MachineExit;
use super::config::{ClockMode, MachineConfig};
use super::vcpu::PseriesVcpu;
use crate::sync::{LockStats, SiteStats, Strategy};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub const SCHEMA: &str = "ppc64emu.report/1";

#[derive(Clone, Debug, Serialize)]
pub struct VcpuReport {
    /// JIT counters (`--accel jit` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jit: Option<crate::jit::JitReport>,
    pub index: usize,
    pub instructions: u64,
    pub blocks: u64,
    pub exits_exception: u64,
    pub exits_hypercall: u64,
    pub interrupts: BTreeMap<String, u64>,
    pub flush_jobs_queued: u64,
    pub flush_jobs_run: u64,
    pub flush_jobs_elided: u64,
    pub flush_jobs_coalesced: u64,
    /// Flush jobs that waited for this vCPU's clock to reach their sender's (virtual time).
    pub flush_jobs_deferred: u64,
    pub self_flushes: u64,
    pub tlb_fills: u64,
    pub tlb_full_flushes: u64,
    pub kicks: u64,
    pub halted_s: f64,
    /// Where the vCPU stopped (helps when a guest hangs or crashes).
    pub final_pc: String,
    pub final_msr: String,
    pub final_lr: String,
    /// Virtual time (`--clock virtual` only): the vCPU's clock at the end, the thread CPU
    /// time charged to it, how often it parked (quantum and BQL turn), and its virtual wait
    /// per lock site.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parks: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_ns: Option<u64>,
    /// Line costs charged (`--line-cost`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line_ns: Option<u64>,
    /// CPU time of the virtual clock's own bookkeeping, left out of the clock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_ns: Option<u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub virtual_wait_ns: BTreeMap<&'static str, u64>,
}

/// The clock a run's guest time is measured on.
#[derive(Clone, Debug, Serialize)]
pub struct ClockReport {
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantum_ns: Option<u64>,
    /// Virtual only: `--line-cost`, and the cost of one read of a thread's CPU clock that
    /// every charge subtracts (sync/vclock/).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line_cost_ns: Option<u64>,
    /// Virtual only: the host cores the vCPU threads shared (`--host-cores`; sync/vclock/
    /// cores.rs: with fewer than vCPUs, at most that many ran at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_cores: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_read_ns: Option<u64>,
    /// Virtual only: whether short intervals were timed by the time-stamp counter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter_timed: Option<bool>,
    /// Virtual only: the BQL's virtual queue as it served the vCPUs, all of them together, as
    /// histograms (each quarter-octave bucket's smallest ns → count): the time from the end
    /// of a vCPU's hold to its next arrival (its think time) and the holds. Machine-wide:
    /// per vCPU they made a sweep's results file half as large again.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub bql_think_ns: BTreeMap<u64, u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub bql_hold_ns: BTreeMap<u64, u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub schema: &'static str,
    pub emulator_version: &'static str,
    pub strategy: &'static str,
    pub bql_primitive: &'static str,
    pub tlb_flush_mode: &'static str,
    pub tlb_flush_coalesce: bool,
    pub accel: &'static str,
    pub smp: usize,
    pub ram_bytes: u64,
    pub pin: &'static str,
    pub sync_profile: bool,
    pub clock: ClockReport,
    pub exit: String,
    pub host_wall_s: f64,
    pub guest_elapsed_s: f64,
    pub guest_elapsed_source: &'static str,
    pub result_line: Option<String>,
    pub hcalls: BTreeMap<String, u64>,
    pub vcpus: Vec<VcpuReport>,
    pub locks: BTreeMap<&'static str, SiteStats>,
    pub lock_table: String,
}

/// `elapsed_tb / tb_hz` of a `MKBENCH-RESULT` line.
pub fn guest_elapsed_from_line(line: &str) -> Option<f64> {
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('=')?.parse::<f64>().ok())
    };
    let (tb, hz) = (field("elapsed_tb")?, field("tb_hz")?);
    (hz > 0.0).then(|| tb / hz)
}

pub fn exit_name(e: &MachineExit) -> String {
    match e {
        MachineExit::PowerOff => "power-off".into(),
        MachineExit::Reboot => "reboot".into(),
        MachineExit::OsTerm(m) => format!("os-term: {m}"),
        MachineExit::Checkstop(m) => format!("checkstop: {m}"),
        MachineExit::Timeout => "timeout".into(),
        MachineExit::ClockDiverged(m) => format!("clock-diverged: {m}"),
    }
}

impl RunReport {
    #[allow(clippy::too_many_arguments)]
    pub fn new<S: Strategy>(
        cfg: &MachineConfig,
        smp: usize,
        host_wall: Duration,
        tb_ticks: u64,
        tb_hz: u64,
        exit: &MachineExit,
        result_line: Option<String>,
        hcalls: Vec<(&'static str, u64)>,
        locks: &LockStats,
        vcpus: Vec<VcpuReport>,
        pinned: bool,
    ) -> Self {
        let from_line = result_line.as_deref().and_then(guest_elapsed_from_line);
        Self {
            schema: SCHEMA,
            emulator_version: env!("CARGO_PKG_VERSION"),
            strategy: S::NAME,
            bql_primitive: crate::sync::BQL_PRIMITIVE,
            tlb_flush_mode: cfg.tlb_flush_mode.as_str(),
            tlb_flush_coalesce: cfg.tlb_flush_coalesce,
            accel: cfg.accel.as_str(),
            smp,
            ram_bytes: cfg.ram_bytes,
            pin: if pinned { "compact" } else { "none" },
            sync_profile: cfg.sync_profile,
            clock: ClockReport {
                kind: cfg.clock.as_str(),
                quantum_ns: match cfg.clock {
                    ClockMode::Virtual { quantum_ns } => Some(quantum_ns),
                    ClockMode::Host => None,
                },
                line_cost_ns: (cfg.clock != ClockMode::Host).then_some(cfg.line_cost_ns),
                host_cores: (cfg.clock != ClockMode::Host).then(|| cfg.host_cores()),
                clock_read_ns: (cfg.clock != ClockMode::Host)
                    .then(crate::sync::vclock::read_cost_ns),
                counter_timed: (cfg.clock != ClockMode::Host)
                    .then(crate::sync::vclock::counter_timed),
                bql_think_ns: BTreeMap::new(),
                bql_hold_ns: BTreeMap::new(),
            },
            exit: exit_name(exit),
            host_wall_s: host_wall.as_secs_f64(),
            guest_elapsed_s: from_line.unwrap_or(tb_ticks as f64 / tb_hz as f64),
            guest_elapsed_source: if from_line.is_some() {
                "result-line"
            } else {
                "timebase"
            },
            result_line,
            hcalls: hcalls
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| (k.to_string(), n))
                .collect(),
            vcpus,
            locks: locks.to_map(),
            lock_table: locks.table(15),
        }
    }
}

/// The vCPU part of the run report.
pub(super) fn vcpu_report(
    v: &PseriesVcpu,
    shared: &crate::accel::VcpuShared<PseriesVcpu>,
    vtime: Option<&crate::sync::vclock::VirtualTime>,
    locks: &crate::sync::LockStats,
) -> VcpuReport {
    let cpu = &v.engine.cpu;
    let t = &cpu.mmu.tlb.counters;
    VcpuReport {
        index: v.index,
        instructions: cpu.counters.instructions,
        blocks: v.counters.blocks,
        exits_exception: v.counters.exits_exception,
        exits_hypercall: v.counters.exits_hypercall,
        interrupts: v
            .counters
            .interrupts
            .iter()
            .map(|(k, n)| (format!("{k:#x}"), *n))
            .collect(),
        flush_jobs_queued: shared.counters.flush_jobs_queued.load(Ordering::Relaxed),
        flush_jobs_run: v.counters.flush_jobs_run,
        flush_jobs_elided: v.counters.flush_jobs_elided,
        flush_jobs_coalesced: shared.counters.flush_jobs_coalesced.load(Ordering::Relaxed),
        flush_jobs_deferred: shared.counters.flush_jobs_deferred.load(Ordering::Relaxed),
        self_flushes: v.counters.self_flushes,
        tlb_fills: t.fills,
        tlb_full_flushes: t.full_flushes,
        kicks: shared.counters.kicks.load(Ordering::Relaxed),
        halted_s: v.counters.halted.as_secs_f64(),
        final_pc: format!("{:#x}", v.engine.cpu.st.pc),
        final_msr: format!("{:#x}", v.engine.cpu.st.msr),
        final_lr: format!("{:#x}", v.engine.cpu.st.lr),
        jit: v.engine.jit_report(),
        virtual_ns: vtime.map(|vt| vt.clock(v.index)),
        cpu_ns: vtime.map(|vt| vt.cpu_ns(v.index)),
        parks: vtime.map(|vt| vt.parks(v.index)),
        idle_ns: vtime.map(|vt| vt.idle_ns(v.index)),
        line_ns: vtime.map(|vt| vt.line_ns(v.index)),
        skipped_ns: vtime.map(|vt| vt.skipped_ns(v.index)),
        virtual_wait_ns: locks
            .to_map()
            .into_iter()
            .filter(|(_, s)| s.virtual_wait_ns > 0)
            .map(|(k, s)| (k, s.virtual_wait_ns))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_from_result_line() {
        let l = "MKBENCH-RESULT cpus=2 jobs=2 units=6 size=350 checksum=0x1 elapsed_tb=1024000000 tb_hz=512000000 faults=1";
        assert_eq!(guest_elapsed_from_line(l), Some(2.0));
        assert_eq!(
            guest_elapsed_from_line("MKBENCH-RESULT cpus=2 tb_hz=0 elapsed_tb=5"),
            None
        );
        assert_eq!(guest_elapsed_from_line("hello"), None);
    }
}
