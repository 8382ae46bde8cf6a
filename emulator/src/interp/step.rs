//! Stepping the vCPU through the interpreter: one instruction ([`Cpu::step`]) through the
//! dispatch table, or one block ([`Cpu::run_block`], the interpreter tier's stint and what
//! the translating tier runs while a block is cold).

use super::{DISPATCH, Exec};
use crate::cpu::Exception;
use crate::isa::{Insn, Op, decode};
use crate::vcpu::{Cpu, MAX_BLOCK_INSNS, ends_after};

impl Cpu {
    /// Executes one instruction at `st.pc`. On an exception the state is as before the
    /// instruction (for `sc`, `pc` already points past it).
    #[inline]
    pub fn step(&mut self) -> Exec {
        self.step_op().map(|_| ())
    }

    /// [`Cpu::step`], returning the op executed.
    #[inline]
    pub fn step_op(&mut self) -> Result<Op, Exception> {
        self.step_word().map(|(op, _)| op)
    }

    /// [`Cpu::step`], returning the op executed and its word.
    #[inline]
    fn step_word(&mut self) -> Result<(Op, u32), Exception> {
        let pc = self.st.pc;
        let word = self.mmu.fetch(&self.st, pc)?;
        self.nia = self.mask_ea(pc.wrapping_add(4));
        let op = decode(word);
        match DISPATCH[op as usize](self, Insn(word)) {
            Ok(()) => {}
            Err(e @ Exception::SystemCall { .. }) => {
                self.st.pc = self.nia;
                self.counters.instructions += 1;
                return Err(e);
            }
            Err(e) => return Err(e),
        }
        self.st.pc = self.nia;
        self.counters.instructions += 1;
        Ok((op, word))
    }

    /// Executes the instruction `word` as if fetched from `st.pc` (`nia` must be set).
    #[inline]
    pub fn execute(&mut self, word: u32) -> Exec {
        DISPATCH[decode(word) as usize](self, Insn(word))
    }

    /// Interprets the block at the PC (the rule of [`ends_after`]); it also ends early when
    /// an instruction leaves events (`cpu.events`) or moves the PC elsewhere than the next
    /// word. Returns the instructions retired; on an exception they are in
    /// `counters.instructions` too.
    pub fn run_block(&mut self) -> Result<u64, Exception> {
        let start = self.counters.instructions;
        for len in 1..=MAX_BLOCK_INSNS {
            let next = self.st.pc.wrapping_add(4);
            let (op, word) = self.step_word()?;
            if self.events != 0 || self.st.pc != next || ends_after(op, word, len, next) {
                break;
            }
        }
        Ok(self.counters.instructions - start)
    }
}
