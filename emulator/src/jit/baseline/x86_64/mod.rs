//! The baseline tier on x86-64 hosts: guest blocks translated straight to x86-64 in one
//! pass ([`emit`]).
//!
//! Translations live in one code region per machine ([`Shared`]), so a block is translated
//! once and run by every vCPU; placing one is an atomic bump, running one takes no lock.
//!
//! Linking (TCG's `goto_tb`): a direct exit to the block's own guest page ends in a `jmp
//! rel32` that first jumps to the next instruction, which returns to the run loop with
//! `JitCtx::link` naming the jump. When the run loop's next block is a baseline block of
//! the same MSR state it patches the jump to go there ([`Shared::link`]): later executions
//! go from block to block without the run loop, and the links survive TLB flushes. That is
//! safe because the target has the source's guest page, and the source is only ever entered
//! under the page mapping it was translated for (from the run loop's lookup, which checks
//! the mapping, or from a block of the same page, by induction), so the target's mapping
//! holds as well. In a user process, whose pages never change mapping (a page that is
//! unmapped, replaced or made non-executable drops its blocks), direct exits to every page
//! are linked. A block that is dropped (its code written, or promoted) has its incoming
//! jumps reset first ([`Shared::kill`]). Other exits probe the vCPU's jump cache.

mod arena;
mod emit;
mod fault;
mod perf_map;
mod regcache;

pub use emit::{Space, native_ops};

use crate::cpu::Exception;
use crate::jit::tier::{MachineCode, Tier, TierId, Translation, UserProcess};
use crate::jit::{BlockKey, JitCtx, JitShared};
use crate::vcpu::{Cpu, DecodedBlock};
use arena::Region;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Virtual reservation of the code region (committed as used; the code cache limit flushes
/// well before it by default).
const CODE_RESERVE: usize = (2 << 30) - 2 * COUNTER_BLOCKS;
/// Blocks with a promotion counter between flushes: one byte each next to the code, and a
/// 4-byte high part in a region of their own (see [`emit::Counter`]).
const COUNTER_BLOCKS: usize = 16 << 20;
/// Room for the shared probe exits, one per MSR state that has baseline code (a few
/// hundred bytes each; a guest uses some tens of states). Blocks of a state that finds it
/// full carry their own probe.
const PROBE_STUBS_BYTES: usize = 64 << 10;

type Trampoline = unsafe extern "C" fn(*mut Cpu, *mut JitCtx, usize);

/// What the machine keeps about a placed block (under `Shared::blocks`).
struct BlockMeta {
    flags: u64,
    live: bool,
    /// Where jumps from other pages enter (`emit::Emitted::guard`).
    guard: Option<usize>,
    /// Patched jumps (their displacement's address) that lead here.
    incoming: Vec<usize>,
}

/// The machine's baseline code: region, trampoline, and the blocks' link bookkeeping.
pub struct Shared {
    code: Region,
    /// The counters' low bytes, within `rel32` reach of the code.
    counter_low: Region,
    /// The counters' high parts, at 4 × a low byte's index.
    counter_high: Region,
    trampoline: Trampoline,
    trampoline_len: usize,
    blocks: Mutex<HashMap<usize, BlockMeta>>,
    pub links: AtomicU64,
    /// Flushes so far: addresses of code placed before one are stale after it.
    flushes: AtomicU64,
    perf_map: Option<perf_map::PerfMap>,
    /// The code all blocks share, kept by flushes.
    stubs: emit::Stubs,
    probes: Mutex<ProbeStubs>,
    /// What user mode's address space promises (`emit::Space`); set before the first block
    /// is translated.
    space: Mutex<emit::Space>,
    /// The placed blocks' direct access sites, with host-guarded memory (`fault`).
    sites: fault::FaultSites,
    /// `Space::guarded` of the space set (read on every entry).
    guarded: std::sync::atomic::AtomicBool,
}

/// The shared probe exits (see [`emit::probe_stub`]), in their room after the other stubs.
struct ProbeStubs {
    by_flags: HashMap<u64, emit::ProbeStubs>,
    next: usize,
    end: usize,
}

impl ProbeStubs {
    /// Places `e` in the room; `None` when it is full.
    fn place(&mut self, e: &emit::Emitted) -> Option<usize> {
        let at = self.next.next_multiple_of(16);
        if at + e.code.len() > self.end {
            return None;
        }
        // SAFETY: `[at, at + len)` is unused room of the kept prefix of the code region,
        // reserved for probe stubs and handed out only here, under the caller's lock.
        unsafe { e.place(at as *mut u8, at as *mut u8) };
        self.next = at + e.code.len();
        Some(at)
    }
}

impl Shared {
    /// `None` when the host refuses the mappings (the machine goes on without this tier).
    pub fn new() -> Option<Self> {
        let (counter_low, code) = Region::pair(COUNTER_BLOCKS, CODE_RESERVE).ok()?;
        let counter_high = Region::new(4 * COUNTER_BLOCKS, false).ok()?;
        let place = |bytes: &[u8]| {
            let p = code.alloc(bytes.len(), 16)?;
            // SAFETY: `p` has room for `bytes`, freshly allocated.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
            Some(p)
        };
        let p = place(&emit::trampoline())?;
        // SAFETY: the bytes just placed are a function of this signature (`emit::trampoline`).
        let trampoline = unsafe { std::mem::transmute::<*mut u8, Trampoline>(p) };
        let exit = place(&emit::exit_stub())? as usize;
        let mut thunks = [0; emit::HELPERS.len()];
        for (t, h) in thunks.iter_mut().zip(emit::HELPERS) {
            *t = place(&emit::thunk(h))? as usize;
        }
        let room = code.alloc(PROBE_STUBS_BYTES, 16)? as usize;
        // Flushes keep everything placed so far.
        let trampoline_len = code.used();
        let perf_map = perf_map::PerfMap::from_env();
        if let Some(m) = &perf_map {
            m.named(p as usize, room - p as usize, "bl.stubs");
        }
        Some(Self {
            code,
            counter_low,
            counter_high,
            trampoline,
            trampoline_len,
            blocks: Mutex::new(HashMap::new()),
            links: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            perf_map,
            stubs: emit::Stubs { exit, thunks },
            probes: Mutex::new(ProbeStubs {
                by_flags: HashMap::new(),
                next: room,
                end: room + PROBE_STUBS_BYTES,
            }),
            space: Mutex::new(emit::Space::default()),
            sites: fault::FaultSites::default(),
            guarded: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Tells the translator what a user-mode process promises (see `emit::Space`), before
    /// any block is translated.
    pub fn set_space(&self, space: emit::Space) {
        self.guarded.store(
            space.guarded && space.flat_base.is_some(),
            Ordering::Relaxed,
        );
        *self.space.lock() = space;
    }

    /// Translates the block `words` at `pc` (its key `key`); `promote_after`: executions after which the
    /// block asks to be promoted (none: never). `None` when the region is full (the caller
    /// asks for a code cache flush).
    pub fn translate(
        &self,
        pc: u64,
        key: BlockKey,
        words: &[u32],
        promote_after: Option<u32>,
    ) -> Option<Translation> {
        let counter = match promote_after {
            Some(n) => {
                let low = self.counter_low.alloc(1, 1)?;
                let i = low as usize - self.counter_low.base();
                let high = self.counter_high.base() + 4 * i;
                // SAFETY: byte `i` of the low region, freshly allocated, and word `i` of the
                // high region (4 × the low region's size), used by this block only.
                unsafe {
                    *low = n as u8;
                    (*(high as *const AtomicU32))
                        .store((n >> 8).min(i32::MAX as u32), Ordering::Relaxed)
                };
                Some(emit::Counter {
                    low: low as usize,
                    high,
                })
            }
            None => None,
        };
        let space = *self.space.lock();
        let e = emit::emit(
            pc,
            key,
            words,
            counter,
            &self.stubs,
            self.probe(key.flags),
            space,
        );
        // The hot parts packed from the bottom of the region, the out-of-line parts from
        // the top: with each block's slow paths right after its body, a Linux build's hot
        // code spread over twice the bytes (padding every block by half its size made
        // linux-make 16 % slower).
        let (hot, cold) = e.parts();
        let p = self.code.alloc(hot.len(), 16)?;
        let c = match cold.len() {
            0 => p,
            n => self.code.alloc_top(n, 16)?,
        };
        // SAFETY: `p` and `c` have room for the parts; nothing runs them before the block is
        // published (the caller inserts it into the block map after this returns).
        unsafe { e.place(p, c) };
        let (start, entry) = (p as usize, p as usize + e.entry as usize);
        let at = |off: u32| e.address(off, p as usize, c as usize);
        if !e.fault_sites.is_empty() {
            // SAFETY: guarded memory is user mode's: this thread is the one vCPU's, and it
            // is not running translated code now.
            unsafe {
                self.sites.add(
                    e.fault_sites
                        .iter()
                        .map(|&(site, miss)| (at(site), at(miss))),
                )
            };
        }
        if let Some(m) = &self.perf_map {
            m.block(start, c as usize, pc, &e);
        }
        self.blocks.lock().insert(
            entry,
            BlockMeta {
                flags: key.flags,
                live: true,
                guard: e.guard.map(|g| start + g as usize),
                incoming: Vec::new(),
            },
        );
        Some(Translation {
            entry,
            code_bytes: e.code.len() as u64,
            native: e.native,
            fallbacks: e.fallbacks,
        })
    }

    /// The shared probe exits of MSR state `flags`, placed on first use; `None` when there
    /// is no room for them.
    fn probe(&self, flags: u64) -> Option<emit::ProbeStubs> {
        let mut probes = self.probes.lock();
        if let Some(&p) = probes.by_flags.get(&flags) {
            return Some(p);
        }
        let plain = emit::probe_stub(flags, &self.stubs, None);
        let probe = probes.place(&plain)?;
        let variant = emit::probe_stub(flags, &self.stubs, Some(probe));
        let unlinked = probes.place(&variant)?;
        let check = emit::guard_stub(flags, &self.stubs);
        let guard = probes.place(&check)?;
        if let Some(m) = &self.perf_map {
            m.named(probe, plain.code.len(), &format!("bl.probe.{flags:x}"));
            m.named(
                unlinked,
                variant.code.len(),
                &format!("bl.unlinked.{flags:x}"),
            );
            m.named(guard, check.code.len(), &format!("bl.guard-test.{flags:x}"));
        }
        let p = emit::ProbeStubs {
            probe,
            unlinked,
            guard,
        };
        probes.by_flags.insert(flags, p);
        Some(p)
    }

    /// Runs baseline code from `entry` until a block returns.
    ///
    /// # Safety
    /// `entry` is a live translation of this region for `cpu`'s current state, and `ctx` is
    /// that vCPU's context (its jump cache holds only live blocks).
    pub unsafe fn enter(&self, cpu: &mut Cpu, ctx: &mut JitCtx, entry: usize) {
        let _bound = self
            .guarded
            .load(Ordering::Relaxed)
            .then(|| self.sites.bind());
        // SAFETY: the trampoline runs `entry`, a live block for this state (the caller's
        // promise), with these two pointers, valid for the call.
        unsafe { (self.trampoline)(cpu, ctx, entry) }
    }

    /// Patches the jump whose displacement is at `site` (from `JitCtx::link`) to go to the
    /// block at `target`, when that block is live and has the MSR state `flags` of the
    /// jump's block. A site tagged [`emit::GUARDED_SITE`] (a jump from another page) goes
    /// to the block's guard. True when linked.
    pub fn link(&self, site: usize, target: usize, flags: u64) -> bool {
        let guarded = site & emit::GUARDED_SITE != 0;
        let site = site & !emit::GUARDED_SITE;
        if !self.code.contains(site) || !site.is_multiple_of(4) {
            return false;
        }
        let mut blocks = self.blocks.lock();
        let Some(m) = blocks
            .get_mut(&target)
            .filter(|m| m.live && m.flags == flags)
        else {
            return false;
        };
        let to = match (guarded, m.guard) {
            (false, _) => target,
            (true, Some(g)) => g,
            (true, None) => return false,
        };
        let disp = (to as i64 - (site as i64 + 4)) as i32;
        // SAFETY: `site` is the aligned displacement of one of this region's exits (only
        // `emit` stores addresses into `JitCtx::link`); one aligned store is atomic for
        // vCPUs executing the jump meanwhile.
        unsafe { (*(site as *const AtomicU32)).store(disp as u32, Ordering::Release) };
        m.incoming.push(site);
        self.links.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// The block at `entry` is dropped: jumps to it return to the run loop again.
    pub fn kill(&self, entry: usize) {
        let mut blocks = self.blocks.lock();
        if let Some(m) = blocks.get_mut(&entry) {
            m.live = false;
            for &site in &m.incoming {
                // SAFETY: as in `link`; displacement 0 is the unlinked jump.
                unsafe { (*(site as *const AtomicU32)).store(0, Ordering::Release) };
            }
            m.incoming.clear();
        }
    }

    /// Code bytes placed since the last flush.
    pub fn used(&self) -> u64 {
        (self.code.used() - self.trampoline_len) as u64
    }

    /// Forgets every block. The caller guarantees that no vCPU runs baseline code and that
    /// no map or jump cache leads to any (the machine's exclusive section of a flush).
    pub fn flush(&self) {
        let mut blocks = self.blocks.lock();
        blocks.clear();
        // SAFETY: no vCPU runs baseline code (the caller's promise).
        unsafe { self.sites.clear() };
        self.code.reset(self.trampoline_len);
        // High words are written when their low byte is handed out again.
        self.counter_low.reset(0);
        self.flushes.fetch_add(1, Ordering::AcqRel);
    }

    /// How many times the region was flushed.
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Acquire)
    }
}

impl MachineCode for Shared {
    fn dropped(&self, entry: usize) {
        self.kill(entry);
    }

    fn flush(&self) {
        Shared::flush(self);
    }

    fn used(&self) -> u64 {
        Shared::used(self)
    }

    fn set_user_process(&self, p: UserProcess) {
        self.set_space(Space {
            flat_base: p.flat_base,
            guarded: p.guarded,
            user: true,
        });
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

/// One vCPU's side of the baseline tier: the machine's region, which it translates into,
/// enters and links.
pub struct BaselineTier {
    code: Arc<Shared>,
}

impl BaselineTier {
    /// The tier over `shared`'s baseline region; `None` when the machine has none.
    pub fn new(shared: &JitShared) -> Option<Self> {
        let code = shared.machine_code[TierId::Baseline as usize].clone()?;
        Some(Self {
            code: code.into_any().downcast::<Shared>().ok()?,
        })
    }
}

impl Tier for BaselineTier {
    fn id(&self) -> TierId {
        TierId::Baseline
    }

    fn translate(
        &mut self,
        block: &DecodedBlock,
        key: BlockKey,
        promote_after: Option<u32>,
    ) -> Result<Option<Translation>, Exception> {
        Ok(self
            .code
            .translate(block.pc, key, &block.words, promote_after))
    }

    unsafe fn enter(&mut self, cpu: &mut Cpu, ctx: &mut JitCtx, entry: usize) {
        // SAFETY: the caller's promise is `Shared::enter`'s.
        unsafe { self.code.enter(cpu, ctx, entry) }
    }

    fn link(&self, site: usize, stamp: u64, target: usize, flags: u64) -> bool {
        stamp == self.code.flushes() && self.code.link(site, target, flags)
    }

    fn link_stamp(&self) -> u64 {
        self.code.flushes()
    }

    /// The region is the machine's: it is flushed with the code cache, not per vCPU.
    fn reset(&mut self) {}
}

#[cfg(test)]
mod tests;
