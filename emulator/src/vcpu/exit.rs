//! When guest code returns to the run loop: the one stop condition of every tier.
//!
//! Guest code runs in stints: the engine's run loop (`engine::Engine::run`) enters a tier,
//! the tier runs one block or a chain of them, and comes back with the instructions it
//! retired. Between two blocks, a stint goes on only while [`keeps_running`] holds:
//!
//! - no events are pending (`Cpu::events`: an instruction left work for the machine, such as
//!   an interrupt that became deliverable, `interp::events`);
//! - instructions are left in the budget the run loop gave (the stint's share of `max`);
//! - the vCPU was not kicked (the machine's kick flag, or the run loop's `stop` callback,
//!   which says the same for the interpreter).
//!
//! The run loop calls [`keeps_running`]; so do the helpers of translated code
//! (`jit::helpers::run_optimized`). Generated code inlines the same three tests, on the
//! fields [`EVENTS`] names and on the budget and kick of its context (`jit::ctx`): the
//! Cranelift chain exit (`jit/cranelift/exits.rs`) and the baseline tier's entry check and
//! jump-cache probe (`jit/baseline`). Change the condition here and there together.

use super::Cpu;

/// Byte offset of `Cpu::events` in the vCPU: what generated code tests for pending events.
pub const EVENTS: usize = core::mem::offset_of!(Cpu, events);

/// Whether a stint of guest code may go on to the next block: no `events` pending, budget
/// left (`budget_left` > 0 instructions) and not `kicked` (evaluated last: it may be a
/// callback).
#[inline(always)]
pub fn keeps_running(events: u32, budget_left: i64, kicked: impl FnOnce() -> bool) -> bool {
    events == 0 && budget_left > 0 && !kicked()
}

/// The budget left of `max` instructions after `done`, as generated code counts it.
#[inline(always)]
pub fn budget_left(max: u64, done: u64) -> i64 {
    max.saturating_sub(done).min(i64::MAX as u64) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_condition_stops() {
        assert!(keeps_running(0, 1, || false));
        assert!(!keeps_running(1, 1, || false));
        assert!(!keeps_running(0, 0, || false));
        assert!(!keeps_running(0, -3, || false));
        assert!(!keeps_running(0, 1, || true));
        assert_eq!(budget_left(10, 4), 6);
        assert_eq!(budget_left(10, 14), 0);
        assert_eq!(budget_left(u64::MAX, 0), i64::MAX);
    }
}
