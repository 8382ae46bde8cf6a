//! Finding the code for the PC and moving blocks up the tiers: the jump cache, then the
//! shared block map, then (once a block has run `threshold` times in the interpreter) a
//! translation by the first tier in use; promotion when a block's code asks for it.

use super::cache::{Block, BlockKey, KEY_MSR_BITS};
use super::jump_cache::{JcEntry, jc_flags, split_flags};
use super::tier::TierId;
use super::{Jit, Tiers};
use crate::cpu::Exception;
use crate::softmmu::{Access, PAGE_MASK, mmu_idx};
use crate::vcpu::{Cpu, DecodedBlock};

impl Tiers {
    /// The tier that translates a block first.
    fn first(self) -> TierId {
        if self.baseline {
            TierId::Baseline
        } else {
            TierId::Cranelift
        }
    }

    /// The tier a block of `tier` is promoted to, if any.
    fn next(self, tier: TierId) -> Option<TierId> {
        (tier == TierId::Baseline && self.cranelift).then_some(TierId::Cranelift)
    }
}

impl Jit {
    /// Clears the jump cache when blocks were dropped. (TLB flushes leave it: an entry is
    /// used only while its PC maps to the host page it was made for.)
    #[inline]
    pub(super) fn sync_jump_cache(&mut self) {
        let g = self.ctx.shared.generation();
        if g != self.ctx.seen_generation {
            self.jc.clear();
            self.ctx.seen_generation = g;
        }
    }

    /// The block map's key for the code at `pc`: page-relative when the baseline tier is
    /// the only one (its blocks are; an optimized block keeps its PC) and the machine is not
    /// a user-mode process (whose one address space has no second mapping to share with).
    fn key(&self, pc: u64, host: u64, flags: u64) -> BlockKey {
        let relative = self.tiers == super::Tiers::BASELINE && !self.ctx.shared.is_user_process();
        BlockKey::new(pc, host, flags, relative)
    }

    fn jc_set(&mut self, pc: u64, flags: u64, b: Block, host: u64) {
        self.jc.insert(JcEntry {
            pc,
            flags: jc_flags(flags, b.tier),
            f: b.entry,
            addend: host.wrapping_sub(pc),
        });
    }

    /// The block for the current PC: jump cache, shared map, or a new translation; `None`
    /// while the block is not hot yet.
    pub(super) fn lookup(&mut self, cpu: &mut Cpu) -> Result<Option<Block>, Exception> {
        let pc = cpu.st.pc;
        let flags = cpu.st.msr & KEY_MSR_BITS;
        let e = *self.jc.probe(pc);
        let idx = mmu_idx(cpu.st.msr, Access::Exec);
        // An entry is good while the PC still maps to the same host page (whatever TLB
        // flushes happened since it was made).
        let maps_same = |cpu: &Cpu| {
            cpu.mmu
                .tlb
                .lookup(idx, pc, 4, Access::Exec)
                .is_some_and(|h| (h as u64).wrapping_sub(pc) == e.addend)
        };
        let (tier, e_flags) = split_flags(e.flags);
        let cached = Block { tier, entry: e.f };
        let same_key = e.pc == pc && e_flags == flags;
        if same_key && maps_same(cpu) {
            self.counters.jump_cache_hits += 1;
            return Ok(Some(cached));
        }
        // Fetch through the TLB: raises the instruction storage interrupt, fills the entry.
        cpu.mmu.fetch(&cpu.st, pc)?;
        // After a TLB flush the entry usually still holds: the refilled page is the same.
        if same_key && maps_same(cpu) {
            self.counters.jump_cache_refills += 1;
            return Ok(Some(cached));
        }
        let host = cpu
            .mmu
            .tlb
            .lookup(idx, pc, 4, Access::Exec)
            .map_or(0, |p| p as u64);
        let key = self.key(pc, host, flags);
        let b = match (host != 0).then(|| self.ctx.shared.lookup(&key)).flatten() {
            Some(b) => {
                self.counters.map_hits += 1;
                b
            }
            None => {
                if host != 0 && self.threshold > 0 {
                    let n = self.cold.entry(key).or_insert(0);
                    *n += 1;
                    if *n < self.threshold {
                        return Ok(None);
                    }
                    self.cold.remove(&key);
                }
                match self.translate(cpu, key)? {
                    Some(b) => b,
                    None => return Ok(None),
                }
            }
        };
        if host != 0 {
            self.jc_set(pc, flags, b, host);
        }
        Ok(Some(b))
    }

    /// Translates the block at `key` with `tier`; `None` when the tier's code region is
    /// full (a flush is requested; the block runs in the interpreter meanwhile).
    fn translate_with(
        &mut self,
        tier: TierId,
        block: &DecodedBlock,
        key: BlockKey,
        t0: std::time::Instant,
    ) -> Result<Option<Block>, Exception> {
        let promote = self
            .tiers
            .next(tier)
            .is_some()
            .then_some(self.promote_threshold);
        let t = self.translators[tier as usize]
            .as_deref_mut()
            .expect("tier in use that this host lacks");
        let Some(t) = t.translate(block, key, promote)? else {
            self.ctx.shared.request_flush();
            return Ok(None);
        };
        self.counters
            .translated(tier, t0.elapsed().as_nanos() as u64, &t);
        Ok(Some(Block {
            tier,
            entry: t.entry,
        }))
    }

    /// Translates the block at the PC (its key `key`) with the first tier and puts it in the code cache;
    /// `None` when that tier's code region is full.
    fn translate(&mut self, cpu: &mut Cpu, key: BlockKey) -> Result<Option<Block>, Exception> {
        if self.self_flush && self.over_limit() {
            self.flush_own();
        }
        let t0 = std::time::Instant::now();
        let pc = cpu.st.pc;
        let block = DecodedBlock::fetch(cpu, pc)?;
        let Some(b) = self.translate_with(self.tiers.first(), &block, key, t0)? else {
            return Ok(None);
        };
        if key.host != 0 {
            let pa = cpu
                .mmu
                .space
                .translate(&cpu.st, pc, Access::Exec)
                .map(|m| m.pa | (pc & !PAGE_MASK));
            if let Ok(pa) = pa {
                self.ctx.shared.mark_code_host(key.host);
                // Stores to newly translated code must take the watched slow path. Other
                // vCPUs keep their write entries until their next fill; guests make
                // cross-modified code visible with `icbi`, which invalidates through the
                // slow path.
                if self.ctx.shared.mark_code_page(pa) {
                    cpu.mmu
                        .tlb
                        .drop_writes_to_host_page(key.host - (pc & !PAGE_MASK));
                }
                self.ctx
                    .shared
                    .insert(key, pa, 4 * block.words.len() as u32, b);
                if let Some(guard) = self.ctx.shared.code_guard.get() {
                    guard(pa & PAGE_MASK);
                }
            }
        }
        if self.trace {
            eprintln!("{}", block.describe(key.flags));
        }
        Ok(Some(b))
    }

    /// A code cache (this vCPU's module or a tier's machine-wide code) passed the limit.
    pub(super) fn over_limit(&self) -> bool {
        self.counters.code_bytes > self.cache_limit
            || self.ctx.shared.baseline_code_bytes() > self.cache_limit
    }

    /// The promote hook: the block at the PC asked to be promoted (`ctx.link = PROMOTE`).
    /// Translates it with the next tier and puts that in the map in its place (the old
    /// block's incoming links are reset, so the blocks that jumped to it return to the run
    /// loop and find the new one).
    pub(super) fn promote(&mut self, cpu: &mut Cpu) -> Result<(), Exception> {
        let pc = cpu.st.pc;
        let flags = cpu.st.msr & KEY_MSR_BITS;
        cpu.mmu.fetch(&cpu.st, pc)?;
        let idx = mmu_idx(cpu.st.msr, Access::Exec);
        let Some(host) = cpu
            .mmu
            .tlb
            .lookup(idx, pc, 4, Access::Exec)
            .map(|p| p as u64)
        else {
            return Ok(());
        };
        let key = self.key(pc, host, flags);
        let Some(old) = self.ctx.shared.lookup(&key) else {
            return Ok(());
        };
        let Some(next) = self.tiers.next(old.tier) else {
            // Another vCPU promoted it already.
            self.jc_set(pc, flags, old, host);
            return Ok(());
        };
        let block = DecodedBlock::fetch(cpu, pc)?;
        let t0 = std::time::Instant::now();
        let Some(new) = self.translate_with(next, &block, key, t0)? else {
            return Ok(());
        };
        // Dropped meanwhile (its code was written): the new translation may be stale.
        if !self.ctx.shared.replace(key, old, new) {
            return Ok(());
        }
        self.counters.baseline.promotions += 1;
        self.jc_set(pc, flags, new, host);
        Ok(())
    }

    /// Runs the block at the PC in the interpreter (the vCPU's rule for where it ends, the
    /// same as for a translation); returns the instructions retired.
    pub(super) fn interpret_block(&mut self, cpu: &mut Cpu) -> Result<u64, Exception> {
        let start = cpu.counters.instructions;
        self.counters.cold_blocks += 1;
        let r = cpu.run_block();
        self.counters.cold_instructions += cpu.counters.instructions - start;
        r
    }
}
