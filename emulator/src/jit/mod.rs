//! The translating tier: guest blocks translated to host code, entered by the engine's run
//! loop one stint at a time ([`Jit::enter`]). Two tiers translate, peers behind
//! [`tier::Tier`]: the baseline tier ([`baseline`], x86-64 hosts) translates a block in one
//! pass for code that runs a few times; Cranelift ([`cranelift`]) optimizes the blocks that
//! stay hot.
//!
//! A block is what the vCPU's rule says ([`crate::vcpu::ends_after`]). It becomes host code
//! entered with the vCPU's state and its [`JitCtx`], which retires instructions off
//! `JitCtx::budget`. Instructions without a native translation (see [`native_ops`]) call
//! the interpreter's function through a helper, so everything the interpreter supports
//! works here.
//!
//! Along QEMU's lines, one file per concern:
//! - [`config`]: the tiers in use, thresholds and the cache limit, and their parsers;
//! - [`cache`]: the code cache shared by all vCPUs (block map keyed by (PC, host address of
//!   the code, the MSR bits that change translation), page index, invalidation, flushes);
//! - [`jump_cache`]: the per-vCPU jump cache on the effective PC;
//! - `tiering`: finding the block for the PC, counting cold blocks, translating and
//!   promoting;
//! - [`report`]: counters and the run report's `jit` part;
//! - [`ctx`]: what translated code shares with its helpers; [`helpers`]: those helpers;
//! - this file: the runner of one vCPU ([`Jit`]), a stint, and the flushes' protocol.
//!
//! Each vCPU has its own Cranelift module: Cranelift modules are not `Sync`, and one shared
//! module would be a global translation lock. Baseline code lives in one region per machine
//! ([`tier::MachineCode`]).
//!
//! Tiering: a block runs in the interpreter until it has executed `threshold` times, and is
//! translated then by the first tier in use; with both tiers, a baseline block that runs
//! `promote_threshold` more times is translated again by Cranelift. A Cranelift translation
//! costs about as much as interpreting a typical block a few thousand times, and most blocks
//! of a guest run far fewer times than that (boot, process set-up), so translating
//! everything on first sight spends most of a short run in the code generator. Counting
//! first bounds the waste either way.
//!
//! Invalidation: the JIT wraps the vCPU's address space ([`JitSpace`]) so that pages holding
//! translated code are mapped with `watch_writes`; a store to such a page (or `icbi`) drops
//! the blocks it overlaps in the shared map and bumps a generation every vCPU checks between
//! blocks.

pub mod baseline;
pub mod cache;
pub mod config;
mod cranelift;
pub mod ctx;
mod helpers;
pub mod jump_cache;
pub mod report;
mod space;
pub mod spr;
mod table;
pub mod tier;
mod tiering;

/// The ops the baseline tier translates natively (the rest call the interpreter).
pub use baseline::native_ops as baseline_native_ops;
pub use cache::{BlockKey, CodeGuard, JitShared, KEY_MSR_BITS, SharedStats};
pub use config::{
    CODE_CACHE_LIMIT, DEFAULT_BASELINE_THRESHOLD, DEFAULT_PROMOTE_THRESHOLD, DEFAULT_THRESHOLD,
    DEFAULT_TIERS, DEFAULT_USER_BASELINE_THRESHOLD, Tiers, USER_SPAN, parse_cache_limit,
};
pub use cranelift::native_ops;
pub use ctx::JitCtx;
pub(crate) use ctx::{TLB_IDX_BYTES, TLB_TABLE_PTR};
pub(crate) use jump_cache::JC_SETS;
pub use jump_cache::{JcEntry, JcSet};
pub use report::{BaselineCounters, BaselineReport, JitCounters, JitReport, TimeHistogram};
pub use space::JitSpace;

use crate::cpu::Exception;
use crate::isa::OP_COUNT;
use crate::vcpu::Cpu;
use jump_cache::JumpCache;
use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tier::{Tier, TierId};

/// The unlinked jump the last stint left by (`JitCtx::link`), for its tier to link to the
/// next block.
#[derive(Clone, Copy)]
struct PendingLink {
    tier: TierId,
    site: usize,
    /// The tier's [`Tier::link_stamp`] when the jump was taken.
    stamp: u64,
}

/// One vCPU's JIT: its tiers, jump cache and tiering state.
pub struct Jit {
    pub ctx: Box<JitCtx>,
    /// The translating tiers this host has, by `TierId as usize` (whether in use or not).
    translators: [Option<Box<dyn Tier>>; TierId::COUNT],
    jc: JumpCache,
    pub counters: JitCounters,
    /// Interpreted executions of a block before it is translated; 0 translates at once.
    pub threshold: u32,
    /// Executions so far of blocks not translated yet.
    cold: FxHashMap<BlockKey, u32>,
    /// Log each translated block with its disassembly to stderr.
    pub trace: bool,
    /// This vCPU may flush the shared code cache by itself when its module is full (one
    /// vCPU). Otherwise `wants_flush` says so and the machine flushes in an exclusive section
    /// ([`Jit::flush_all`]).
    pub self_flush: bool,
    /// Code bytes of the module after which the code cache is flushed.
    pub cache_limit: u64,
    /// `JitShared::epoch` of the current module.
    epoch: u64,
    /// The translating tiers in use (`--jit-tiers`); `threshold` counts towards the first.
    pub tiers: Tiers,
    /// Baseline executions of a block before it is promoted to Cranelift (both tiers on).
    pub promote_threshold: u32,
    /// Set by a stint that left by an unlinked jump; taken by the next one of the same run.
    pending_link: Option<PendingLink>,
}

impl Jit {
    /// A JIT for `cpu`: wraps its address space so that writes to translated code are seen.
    pub fn attach(cpu: &mut Cpu, shared: Arc<JitShared>) -> Self {
        Self::wrap_space(cpu, &shared);
        let jc = JumpCache::new();
        let generation: *const AtomicU64 = &shared.generation;
        let code_hosts = shared.code_hosts();
        let translators: [Option<Box<dyn Tier>>; TierId::COUNT] = [
            Some(Box::new(cranelift::CraneliftTier::new()) as Box<dyn Tier>),
            baseline::tier(&shared),
        ];
        let ctx = JitCtx {
            budget: 0,
            page: 0,
            jc: jc.as_ptr(),
            kick: &ctx::NO_KICK,
            seen_generation: 0,
            generation,
            ret: 0,
            fault: 0,
            exc: None,
            shared,
            code_hosts,
            fallbacks: Box::new([0; OP_COUNT]),
            slow_mem: 0,
            link: 0,
            optimized_entry: 0,
            optimized_calls: 0,
            optimized_instructions: 0,
            beyond_user_span: !(USER_SPAN - 1),
            rsp_base: 0,
            rsp_limit: 0,
        };
        let mut j = Self {
            ctx: Box::new(ctx),
            translators,
            jc,
            counters: JitCounters::default(),
            threshold: DEFAULT_THRESHOLD,
            cold: FxHashMap::default(),
            trace: false,
            self_flush: true,
            cache_limit: CODE_CACHE_LIMIT,
            epoch: 0,
            tiers: Tiers::CRANELIFT,
            promote_threshold: DEFAULT_PROMOTE_THRESHOLD,
            pending_link: None,
        };
        j.ctx.optimized_entry = j.optimized_entry();
        j
    }

    /// Puts the code cache's store watch ([`JitSpace`]) around `cpu`'s address space.
    fn wrap_space(cpu: &mut Cpu, shared: &Arc<JitShared>) {
        let inner = std::mem::replace(
            &mut cpu.mmu.space,
            Box::new(crate::softmmu::FlatRam::new(0)),
        );
        cpu.mmu.space = Box::new(JitSpace {
            inner,
            shared: shared.clone(),
        });
        // Pages marked before this vCPU existed must not have fast write entries.
        cpu.mmu.tlb.flush_all();
    }

    /// Chooses the tiers (those this host lacks are left out) and the interpreter threshold
    /// (`None`: the default for these tiers).
    pub fn set_tiers(&mut self, tiers: Tiers, threshold: Option<u32>) {
        let tiers = tiers.available();
        self.tiers = tiers;
        self.threshold = threshold.unwrap_or(tiers.default_threshold());
    }

    /// Moves this JIT to another CPU, as `attach` would attach a new one, but keeping the
    /// module (a test that replays thousands of short programs on fresh CPUs saves building
    /// one per program). Every block is dropped from the shared map: the code the map pointed
    /// to stays in the module, unreachable, until the next flush. Only for a JIT whose
    /// `JitShared` no other vCPU uses.
    pub fn reattach(&mut self, cpu: &mut Cpu) {
        let shared = self.ctx.shared.clone();
        Self::wrap_space(cpu, &shared);
        shared.flush();
        self.jc.clear();
        self.cold.clear();
        self.ctx.exc = None;
        self.ctx.fault = 0;
        self.pending_link = None;
    }

    pub fn shared(&self) -> &Arc<JitShared> {
        &self.ctx.shared
    }

    /// Makes chained blocks return to the run loop when `kick` is set. The machine must set
    /// it whenever the run loop's `stop` would say so (it does: raising an interrupt kicks).
    ///
    /// # Safety
    /// `kick` must outlive every later `run` of this JIT.
    pub unsafe fn watch(&mut self, kick: *const AtomicBool) {
        self.ctx.kick = kick;
    }

    /// The optimizing tier's entry point, which other tiers' code calls.
    fn optimized_entry(&self) -> usize {
        self.translators[TierId::Cranelift as usize]
            .as_ref()
            .map_or(0, |t| t.entry_point())
    }

    /// Starts a run of the engine's loop: replaces a module an exclusive flush made
    /// unreachable, and forgets a jump left unlinked by the previous run (the machine may
    /// have moved the PC since).
    pub fn begin(&mut self) {
        let epoch = self.ctx.shared.epoch.load(Ordering::Acquire);
        if epoch != self.epoch {
            // Another vCPU flushed the code cache (`flush_all`): this module is unreachable.
            self.replace_module(epoch - self.epoch);
            self.epoch = epoch;
        }
        self.pending_link = None;
    }

    /// One stint: enters the code for the PC (a translated block and those it chains to, or
    /// one block in the interpreter while it is cold) with `budget` instructions to retire;
    /// returns the instructions retired, or the exception that ended the stint.
    pub fn enter(&mut self, cpu: &mut Cpu, budget: i64) -> Result<u64, Exception> {
        self.sync_jump_cache();
        let Some(block) = self.lookup(cpu)? else {
            self.pending_link = None;
            return self.interpret_block(cpu);
        };
        let flags = cpu.st.msr & KEY_MSR_BITS;
        let t = self.translators[block.tier as usize]
            .as_deref_mut()
            .expect("block of a tier this host lacks");
        if let Some(l) = self.pending_link.take()
            && l.tier == block.tier
            && t.link(l.site, l.stamp, block.entry, flags)
        {
            self.counters.baseline.links += 1;
        }
        self.ctx.budget = budget;
        self.ctx.page = cpu.st.pc & crate::softmmu::PAGE_MASK;
        self.ctx.link = 0;
        let optimized = self.ctx.optimized_instructions;
        // SAFETY: `block` was found for this state in the map or the jump cache, which hold
        // only live blocks (the jump cache was synced with the generation above, and a
        // module replaced by a flush is replaced here before its first stint: `begin`).
        unsafe { t.enter(cpu, &mut self.ctx, block.entry) };
        let n = (budget - self.ctx.budget) as u64;
        cpu.counters.instructions += n;
        let optimized = self.ctx.optimized_instructions - optimized;
        self.counters.entered(block.tier, n, optimized);
        match std::mem::take(&mut self.ctx.link) {
            0 => {}
            ctx::PROMOTE => {
                if self.ctx.exc.is_none() {
                    self.promote(cpu)?;
                }
            }
            site => {
                self.pending_link = Some(PendingLink {
                    tier: block.tier,
                    site: site as usize,
                    stamp: t.link_stamp(),
                })
            }
        }
        if let Some(e) = self.ctx.exc.take() {
            self.ctx.fault = 0;
            return Err(e);
        }
        Ok(n)
    }

    /// Single-vCPU code cache flush: drops every block and starts a new module. With several
    /// vCPUs use [`Jit::flush_all`].
    pub fn flush_own(&mut self) {
        self.ctx.shared.flush();
        self.replace_module(1);
    }

    /// Starts a new module and frees the old one, with an empty jump cache; `flushes`: code
    /// cache flushes this stands for (a vCPU idle through several machine-wide flushes
    /// replaces its module once and counts them all).
    ///
    /// Callers guarantee that no code of the old module can run any more: the shared map holds
    /// none of its blocks (it was flushed since), no vCPU executes translated code now, and
    /// every other vCPU's jump cache is cleared before that vCPU's next block (their
    /// `seen_generation` is behind the flush's generation bump, and `enter` syncs first).
    fn replace_module(&mut self, flushes: u64) {
        self.jc.clear();
        self.cold.clear();
        self.pending_link = None;
        for t in self.translators.iter_mut().flatten() {
            t.reset();
        }
        self.ctx.optimized_entry = self.optimized_entry();
        self.counters.code_bytes = 0;
        self.counters.cache_flushes += flushes;
    }

    /// The machine should flush the code cache of every vCPU (in an exclusive section, with
    /// [`Jit::flush_all`]): this vCPU's module passed `cache_limit` (with several vCPUs) or a
    /// flush was requested.
    pub fn wants_flush(&self) -> bool {
        (!self.self_flush && self.over_limit())
            || self.ctx.shared.flush_requested.load(Ordering::Relaxed)
    }

    /// Claims the flush `wants_flush` asks for: true for exactly one caller until the flush
    /// has run (that caller queues it), so that one full module queues one flush.
    pub fn claim_flush(&self) -> bool {
        !self.ctx.shared.flush_queued.swap(true, Ordering::SeqCst)
    }

    /// Machine-wide code cache flush. The caller must hold an exclusive section: no vCPU is
    /// in translated code (every other vCPU is outside its `run`, and so is this one).
    ///
    /// The shared map, page lists and code-page filter are emptied and the generation bumped,
    /// so no lookup finds a block of any current module again. Every module is then replaced:
    /// this vCPU's at once, every other vCPU's by that vCPU itself at the start of its next
    /// `run` (it sees the new epoch in [`Jit::begin`]), because a `JITModule` is owned by
    /// its vCPU thread and freed there.
    ///
    /// Why freeing an old module then is safe: translated code is entered only through
    /// `enter`, after `begin` replaced an old-epoch module (clearing that vCPU's jump cache)
    /// and after syncing the jump cache with the generation; chained blocks find their
    /// successors only in the running vCPU's own jump cache. So after the flush, code of an
    /// old module, wherever it came from (blocks of vCPU A's module reach vCPU B through the
    /// shared map, B's jump cache and B's chains, and call A's slow-path adapter), can only
    /// be reached through a jump cache filled before the flush, and each vCPU clears its own
    /// before its first block after it. When vCPU B frees its old module at the start of its
    /// `run`, every other vCPU either has not run since the flush (it holds no pointer it
    /// will use: its jump cache is cleared before use) or has run and cleared its jump cache
    /// then, and filled it only from the map emptied by the flush. No vCPU is inside B's old
    /// code either: it was entered last before the exclusive section, and every `run` had
    /// returned before the section started. The epoch is read after the section ended (the
    /// section's lock orders it), so no vCPU misses it. A vCPU that stays idle keeps its old
    /// module until it runs again: memory stays bounded by one module per vCPU over the
    /// limit.
    pub fn flush_all(&mut self) {
        let sh = self.ctx.shared.clone();
        sh.flush();
        let epoch = sh.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        sh.flush_requested.store(false, Ordering::SeqCst);
        sh.flush_queued.store(false, Ordering::SeqCst);
        self.replace_module(epoch - self.epoch);
        self.epoch = epoch;
    }
}
