//! The code cache shared by a machine's vCPUs (QEMU's `tb_htable` and page index): the
//! block map keyed by [`BlockKey`], the physical pages that hold translated code and the
//! blocks on each, and invalidation: a store to such a page (seen by [`super::JitSpace`],
//! or `icbi`) drops the blocks it overlaps and bumps a generation every vCPU checks between
//! blocks; a flush drops everything.

use super::tier::{MachineCodes, TierId, UserProcess};
use crate::cpu::msr;
use crate::softmmu::PAGE_MASK;
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// MSR bits that change how a block is translated.
pub const KEY_MSR_BITS: u64 =
    msr::LE | msr::IR | msr::DR | msr::PR | msr::FP | msr::VEC | msr::VSX | msr::SF;

/// Identity of a translation: same guest code under the same translation-relevant MSR bits.
///
/// A *page-relative* block (`relative`) computes every guest address it uses from the page
/// the vCPU runs it at (`JitCtx::page`), so one translation serves the code wherever it is
/// mapped: its key holds the PC's offset in its page, and every process that maps the same
/// physical page (a compiler run again, the C library in each process, at addresses that
/// differ from run to run) finds it. Other blocks hold their effective PC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockKey {
    /// The effective PC, or with `relative` its offset in its page.
    pub pc: u64,
    /// Host address of the instruction at `pc` (stands for the physical address).
    pub host: u64,
    pub flags: u64,
    pub relative: bool,
}

impl BlockKey {
    /// The key of the block at `pc` (host address `host`) under the MSR bits `flags`;
    /// page-relative when `relative` and in 64-bit mode (32-bit mode's addresses wrap at
    /// 4 GiB, and its blocks are all interpreter calls).
    pub fn new(pc: u64, host: u64, flags: u64, relative: bool) -> Self {
        let relative = relative && flags & msr::SF != 0;
        Self {
            pc: if relative { pc & !PAGE_MASK } else { pc },
            host,
            flags,
            relative,
        }
    }
}

/// Physical page → the blocks on it, each with its byte range in the page.
type PageBlocks = FxHashMap<u64, Vec<(BlockKey, u16, u16)>>;

/// A translation in the block map: which tier's code, and its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub tier: TierId,
    pub entry: usize,
}

/// Machine-wide JIT state shared by the vCPUs and their address spaces.
pub struct JitShared {
    map: RwLock<FxHashMap<BlockKey, Block>>,
    /// Physical page → blocks on it with their byte range in the page.
    pages: Mutex<PageBlocks>,
    /// One bit per hashed physical page: may hold translated code. False positives only send
    /// stores to the slow path; bits are cleared when the code cache is flushed.
    filter: Box<[AtomicU64]>,
    /// The same for the host address of each such page (a RAM page's host address stands for
    /// its physical one), which translated `icbi` finds through the TLB without translating
    /// the EA (see [`code_host_bit`]).
    host_filter: Box<[AtomicU64]>,
    /// Bumped whenever blocks are dropped: vCPUs clear their jump caches when it moves.
    pub(super) generation: AtomicU64,
    /// Bumped by each machine-wide code cache flush ([`super::Jit::flush_all`]): a vCPU whose module
    /// is older replaces it at the start of its next `run`.
    pub(super) epoch: AtomicU64,
    /// A machine-wide flush was asked for ([`JitShared::request_flush`]); cleared by the flush.
    pub(super) flush_requested: AtomicBool,
    /// A vCPU has queued the flush ([`super::Jit::claim_flush`]); cleared by the flush.
    pub(super) flush_queued: AtomicBool,
    pub stats: SharedStats,
    /// The code of each tier that keeps one for the whole machine (the baseline tier's
    /// region; `None` for a tier whose code is the vCPU's own, or that this host lacks).
    pub(super) machine_code: MachineCodes,
    /// User mode's host-guarded memory: told the page of every block placed, so that the
    /// host stops direct stores to it (see [`JitShared::set_user_process`]).
    pub(super) code_guard: std::sync::OnceLock<CodeGuard>,
    /// Set by [`JitShared::set_user_process`]: one process, whose pages never change mapping
    /// (its blocks link to any page and need not be page-relative).
    user_process: AtomicBool,
}

/// Withholds host write permission from a guest page that now holds translated code.
pub type CodeGuard = Box<dyn Fn(u64) + Send + Sync>;

/// Counters of the shared side (run report).
#[derive(Default)]
pub struct SharedStats {
    pub invalidated_blocks: AtomicU64,
    pub code_writes: AtomicU64,
}

const FILTER_BITS: u64 = 1 << 20;

/// The multiplier and shift of the filters' page hash, which translated code computes too.
pub(crate) const FILTER_HASH: u64 = 0x9e37_79b9_7f4a_7c15;
pub(crate) const FILTER_HASH_SHIFT: u32 = 64 - FILTER_BITS.trailing_zeros();

/// The bit of address `a`'s 4 KiB page in a filter (`FILTER_BITS` bits in 64-bit words).
pub(crate) const fn code_host_bit(a: u64) -> u64 {
    (a >> 12).wrapping_mul(FILTER_HASH) >> FILTER_HASH_SHIFT
}

impl JitShared {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            map: RwLock::new(FxHashMap::default()),
            pages: Mutex::new(FxHashMap::default()),
            filter: (0..FILTER_BITS / 64).map(|_| AtomicU64::new(0)).collect(),
            host_filter: (0..FILTER_BITS / 64).map(|_| AtomicU64::new(0)).collect(),
            generation: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            flush_requested: AtomicBool::new(false),
            flush_queued: AtomicBool::new(false),
            stats: SharedStats::default(),
            machine_code: [None, super::baseline::machine_code()],
            code_guard: std::sync::OnceLock::new(),
            user_process: AtomicBool::new(false),
        })
    }

    /// The machine is one user-mode process on one vCPU (nothing from elsewhere stops
    /// it), and, with `flat_base`, every TLB entry maps guest address `ea` to host
    /// `flat_base + ea` (user mode's reserved range): the baseline tier then tests only the
    /// budget at block entries and adds the constant instead of loading each entry's addend.
    /// With `guard` as well, the host protects the range's pages as the guest does, and
    /// `guard(page)` withholds write permission from a page that gets translated code: the
    /// baseline tier's loads and stores then skip the TLB (`baseline::Space::guarded`).
    /// Call before any block is translated.
    pub fn set_user_process(&self, flat_base: Option<u64>, guard: Option<CodeGuard>) {
        let guarded = flat_base.is_some() && guard.is_some();
        self.user_process.store(true, Ordering::Relaxed);
        if let Some(g) = guard.filter(|_| guarded) {
            let _ = self.code_guard.set(g);
        }
        for code in self.machine_code.iter().flatten() {
            code.set_user_process(UserProcess { flat_base, guarded });
        }
    }

    fn filter_bit(pa: u64) -> (usize, u64) {
        let h = code_host_bit(pa);
        ((h / 64) as usize, 1 << (h % 64))
    }

    /// Marks the host page of translated code (`host`: any address in it).
    pub(super) fn mark_code_host(&self, host: u64) {
        let (w, b) = Self::filter_bit(host);
        self.host_filter[w].fetch_or(b, Ordering::SeqCst);
    }

    /// The host page may hold translated code.
    pub fn is_code_host(&self, host: u64) -> bool {
        let (w, b) = Self::filter_bit(host);
        self.host_filter[w].load(Ordering::Relaxed) & b != 0
    }

    /// The first word of the host-page filter, which translated code indexes with
    /// [`code_host_bit`] (it lives as long as `self`).
    pub(super) fn code_hosts(&self) -> *const AtomicU64 {
        self.host_filter.as_ptr()
    }

    /// The physical page may hold translated code.
    pub fn is_code_page(&self, pa: u64) -> bool {
        let (w, b) = Self::filter_bit(pa);
        self.filter[w].load(Ordering::Relaxed) & b != 0
    }

    /// Marks a page; true when it was not marked before.
    pub(crate) fn mark_code_page(&self, pa: u64) -> bool {
        let (w, b) = Self::filter_bit(pa);
        self.filter[w].fetch_or(b, Ordering::SeqCst) & b == 0
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Guest bytes `[pa, pa + len)` were written: drop the blocks they overlap.
    pub fn code_written(&self, pa: u64, len: usize) {
        if !self.is_code_page(pa) {
            return;
        }
        self.stats.code_writes.fetch_add(1, Ordering::Relaxed);
        let page = pa & PAGE_MASK;
        let (lo, hi) = ((pa - page) as u32, (pa - page) as u32 + len as u32);
        let mut pages = self.pages.lock();
        let Some(list) = pages.get_mut(&page) else {
            return;
        };
        let mut dropped = Vec::new();
        list.retain(|&(k, s, e)| {
            let hit = lo < e as u32 && (s as u32) < hi;
            if hit {
                dropped.push(k);
            }
            !hit
        });
        if list.is_empty() {
            pages.remove(&page);
        }
        if !dropped.is_empty() {
            let mut map = self.map.write();
            for k in &dropped {
                if let Some(b) = map.remove(k) {
                    self.dropped(b);
                }
            }
            self.stats
                .invalidated_blocks
                .fetch_add(dropped.len() as u64, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// A block left the map: its tier's machine-wide code resets the jumps patched to it.
    pub(super) fn dropped(&self, b: Block) {
        if let Some(code) = &self.machine_code[b.tier as usize] {
            code.dropped(b.entry);
        }
    }

    /// Bytes of `tier`'s machine-wide code placed since the last flush.
    pub fn machine_code_bytes(&self, tier: TierId) -> u64 {
        self.machine_code[tier as usize]
            .as_ref()
            .map_or(0, |c| c.used())
    }

    /// Bytes of the baseline tier's code placed since the last flush.
    pub fn baseline_code_bytes(&self) -> u64 {
        self.machine_code_bytes(TierId::Baseline)
    }

    /// The machine is one user-mode process ([`JitShared::set_user_process`]).
    pub fn is_user_process(&self) -> bool {
        self.user_process.load(Ordering::Relaxed)
    }

    pub(super) fn lookup(&self, k: &BlockKey) -> Option<Block> {
        self.map.read().get(k).copied()
    }

    /// Replaces the block at `k` when it is still `old` (promotion; the block was not
    /// dropped meanwhile): true when replaced, and `old` is dropped.
    pub(super) fn replace(&self, k: BlockKey, old: Block, new: Block) -> bool {
        let mut map = self.map.write();
        if map.get(&k) != Some(&old) {
            return false;
        }
        map.insert(k, new);
        drop(map);
        self.dropped(old);
        true
    }

    pub(super) fn insert(&self, k: BlockKey, pa: u64, len: u32, f: Block) {
        let page = pa & PAGE_MASK;
        let start = (pa - page) as u16;
        self.pages
            .lock()
            .entry(page)
            .or_default()
            .push((k, start, (start as u32 + len) as u16));
        self.map.write().insert(k, f);
    }

    /// Asks for a machine-wide code cache flush: every vCPU's `wants_flush` says so until the
    /// machine has run [`super::Jit::flush_all`].
    pub fn request_flush(&self) {
        self.flush_requested.store(true, Ordering::SeqCst);
    }

    /// Drops every block (the caller guarantees no vCPU runs translated code).
    pub fn flush(&self) {
        self.map.write().clear();
        self.pages.lock().clear();
        for code in self.machine_code.iter().flatten() {
            code.flush();
        }
        for w in self.filter.iter().chain(self.host_filter.iter()) {
            w.store(0, Ordering::Relaxed);
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}
