//! The execution engine: how guest code runs on one vCPU.
//!
//! [`Engine`] owns the vCPU ([`Cpu`]) and the tier that runs it, the reference interpreter
//! or the translating tier ([`crate::jit::Jit`]), and the run loop ([`run`]): it enters the
//! tier for a stint at the PC, adds up what the stint retired and goes on while the vCPU's
//! stop condition ([`crate::vcpu::exit::keeps_running`]) holds. Machines (pseries, the
//! user-mode runner) see only this type: they build it with [`EngineConfig`], call
//! [`Engine::run`] (or [`Engine::run_system`], which applies the hypercall rule), and read
//! its report.
//!
//! Layers point down only: the engine uses the tiers (`interp`, `jit`), which use the
//! vCPU (`vcpu`); none of them uses the engine.

pub use crate::vcpu::{
    Cpu, DecodedBlock, ExecCounters, HostTimeBase, MAX_BLOCK_INSNS, SystemExit, TimeBase,
    VirtualTimeBase, ends_after, hypercall_rule, ns_to_tb, tb_to_ns,
};

use crate::cpu::{Exception, msr};
use crate::jit::{Jit, JitReport, JitShared};
use crate::vcpu::exit::{budget_left, keeps_running};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// A tier as the run loop sees it: entered at the PC for a stint, it returns the
/// instructions retired, or the exception that ended the stint (the instructions retired
/// before it are in `cpu.counters.instructions`).
pub trait Runner {
    /// A run of the loop starts: the tier drops what held only within the last run.
    fn begin(&mut self) {}

    /// One stint at the PC with `budget` instructions (> 0) to retire at most, give or take
    /// a block.
    fn enter(&mut self, cpu: &mut Cpu, budget: i64) -> Result<u64, Exception>;
}

/// The interpreter tier: a stint is one block ([`Cpu::run_block`]).
pub struct Interpreter;

impl Runner for Interpreter {
    #[inline]
    fn enter(&mut self, cpu: &mut Cpu, _budget: i64) -> Result<u64, Exception> {
        cpu.run_block()
    }
}

impl Runner for Jit {
    fn begin(&mut self) {
        Jit::begin(self)
    }

    #[inline]
    fn enter(&mut self, cpu: &mut Cpu, budget: i64) -> Result<u64, Exception> {
        Jit::enter(self, cpu, budget)
    }
}

/// The run loop: runs `tier`'s stints until an exception, until `cpu.events` is set (the
/// caller takes them), until `stop()` says so (checked after every stint) or until about
/// `max` instructions retired.
#[inline]
pub fn run<R: Runner + ?Sized>(
    tier: &mut R,
    cpu: &mut Cpu,
    max: u64,
    stop: &dyn Fn(&Cpu) -> bool,
) -> Result<(), Exception> {
    tier.begin();
    let mut done = 0u64;
    loop {
        done += tier.enter(cpu, budget_left(max, done))?;
        if !keeps_running(cpu.events, budget_left(max, done), || stop(cpu)) {
            return Ok(());
        }
    }
}

/// Which tier runs guest code (`--accel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierKind {
    /// Every instruction in the interpreter.
    Interp,
    /// Blocks interpreted while cold, translated once hot (`jit` module).
    Jit,
}

/// How an engine is built.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub tier: TierKind,
    /// Interpreted executions of a block before it is translated (`--jit-threshold`).
    pub jit_threshold: u32,
    /// The translating tiers (`--jit-tiers`) and the baseline executions of a block before
    /// it moves to Cranelift (`--jit-promote`).
    pub jit_tiers: crate::jit::Tiers,
    pub jit_promote: u32,
    /// Translated code bytes after which the code cache is flushed (`--jit-cache-limit`).
    pub jit_cache_limit: u64,
    /// Log each translated block with its disassembly (`PPC64EMU_LOG=jit`).
    pub trace: bool,
    /// The code cache is this vCPU's alone: it may flush it by itself. Otherwise the machine
    /// flushes every vCPU's code in an exclusive section ([`Engine::claim_code_flush`]).
    pub sole_vcpu: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            tier: TierKind::Jit,
            jit_threshold: crate::jit::DEFAULT_THRESHOLD,
            jit_tiers: crate::jit::Tiers::CRANELIFT,
            jit_promote: crate::jit::DEFAULT_PROMOTE_THRESHOLD,
            jit_cache_limit: crate::jit::CODE_CACHE_LIMIT,
            trace: false,
            sole_vcpu: true,
        }
    }
}

enum Tier {
    Interp,
    Jit(Box<Jit>),
}

/// One vCPU and the tier that runs it.
pub struct Engine {
    pub cpu: Cpu,
    tier: Tier,
}

impl Engine {
    /// An engine for `cpu`. A translating tier joins the machine's code cache `cache` (one
    /// per machine; a new one when `None`) and wraps the vCPU's address space so that stores
    /// to translated code are seen.
    pub fn new(mut cpu: Cpu, config: &EngineConfig, cache: Option<Arc<JitShared>>) -> Self {
        let tier = match config.tier {
            TierKind::Interp => Tier::Interp,
            TierKind::Jit => {
                let mut j = Jit::attach(&mut cpu, cache.unwrap_or_else(JitShared::new));
                j.set_tiers(config.jit_tiers, Some(config.jit_threshold));
                j.promote_threshold = config.jit_promote;
                j.cache_limit = config.jit_cache_limit;
                j.trace = config.trace;
                j.self_flush = config.sole_vcpu;
                Tier::Jit(Box::new(j))
            }
        };
        Self { cpu, tier }
    }

    pub fn tier(&self) -> TierKind {
        match self.tier {
            Tier::Interp => TierKind::Interp,
            Tier::Jit(_) => TierKind::Jit,
        }
    }

    /// The machine's code cache, when a translating tier runs this vCPU (the machine tells
    /// it about guest memory it writes itself).
    pub fn code_cache(&self) -> Option<&Arc<JitShared>> {
        match &self.tier {
            Tier::Interp => None,
            Tier::Jit(j) => Some(j.shared()),
        }
    }

    /// Makes translated code return to [`Engine::run`]'s caller soon after `kick` is set (the
    /// interpreter checks `stop` at every block, which suffices). The machine must set it
    /// whenever `stop` would say so.
    ///
    /// # Safety
    /// `kick` must outlive every later `run` of this engine.
    pub unsafe fn watch_kick(&mut self, kick: *const AtomicBool) {
        if let Tier::Jit(j) = &mut self.tier {
            // SAFETY: the caller's promise.
            unsafe { j.watch(kick) };
        }
    }

    /// Runs guest code until an exception, until `cpu.events` is set (the caller takes
    /// them), until `stop()` says so (checked at every block) or until about `max`
    /// instructions retired.
    pub fn run(&mut self, max: u64, stop: &dyn Fn(&Cpu) -> bool) -> Result<(), Exception> {
        // Trace interrupts (MSR[SE], MSR[BE]) are taken by the interpreter, one instruction
        // at a time.
        if self.cpu.st.msr & (msr::SE | msr::BE) != 0 {
            return self.cpu.step_traced().map(|_| ());
        }
        match &mut self.tier {
            Tier::Jit(j) => run(j.as_mut(), &mut self.cpu, max, stop),
            Tier::Interp => run(&mut Interpreter, &mut self.cpu, max, stop),
        }
    }

    /// [`Engine::run`] for a system emulator: applies [`hypercall_rule`] (a refused
    /// hypercall returns `Ok` like any other block end).
    pub fn run_system(&mut self, max: u64, stop: &dyn Fn(&Cpu) -> bool) -> Result<(), SystemExit> {
        match self.run(max, stop) {
            Ok(()) => Ok(()),
            Err(e) => hypercall_rule(&mut self.cpu, e).map_or(Ok(()), Err),
        }
    }

    /// True for exactly one vCPU of the machine when the code cache should be flushed by all
    /// of them (this vCPU's code passed the limit, or a flush was requested): that caller
    /// runs [`Engine::flush_code_cache`] in an exclusive section.
    pub fn claim_code_flush(&self) -> bool {
        match &self.tier {
            Tier::Jit(j) => j.wants_flush() && j.claim_flush(),
            Tier::Interp => false,
        }
    }

    /// Machine-wide code cache flush ([`Jit::flush_all`]); the caller holds an exclusive
    /// section.
    pub fn flush_code_cache(&mut self) {
        if let Tier::Jit(j) = &mut self.tier {
            j.flush_all();
        }
    }

    /// Counters of the translating tier (`None` when interpreting).
    pub fn jit_report(&self) -> Option<JitReport> {
        match &self.tier {
            Tier::Jit(j) => Some(j.report()),
            Tier::Interp => None,
        }
    }

    /// The translating tier itself (tools and tests).
    pub fn jit(&self) -> Option<&Jit> {
        match &self.tier {
            Tier::Jit(j) => Some(j),
            Tier::Interp => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Retires `per` instructions a stint; leaves events at stint `events_at`.
    struct Fake {
        per: u64,
        events_at: u32,
        stints: u32,
        budgets: Vec<i64>,
    }

    impl Runner for Fake {
        fn enter(&mut self, cpu: &mut Cpu, budget: i64) -> Result<u64, Exception> {
            self.stints += 1;
            self.budgets.push(budget);
            if self.stints == self.events_at {
                cpu.events = 1;
            }
            Ok(self.per)
        }
    }

    fn fake(per: u64, events_at: u32) -> Fake {
        Fake {
            per,
            events_at,
            stints: 0,
            budgets: Vec::new(),
        }
    }

    #[test]
    fn the_run_loop_stops_on_budget_events_and_stop() {
        let mut cpu = Cpu::new(Box::new(crate::softmmu::FlatRam::new(4096)));
        let mut f = fake(4, 0);
        run(&mut f, &mut cpu, 10, &|_| false).unwrap();
        assert_eq!(f.budgets, [10, 6, 2], "until the budget is spent");
        let mut f = fake(4, 2);
        run(&mut f, &mut cpu, 100, &|_| false).unwrap();
        assert_eq!(f.stints, 2, "until events are left");
        cpu.events = 0;
        let mut f = fake(1, 0);
        run(&mut f, &mut cpu, 100, &|c| c.counters.instructions == 0).unwrap();
        assert_eq!(f.stints, 1, "until stop() says so");
    }
}
