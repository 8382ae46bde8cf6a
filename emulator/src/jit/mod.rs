//! The translating tiers: guest blocks translated to host code, run by [`Jit`] for the engine.
//! Two tiers: the baseline tier ([`baseline`], x86-64 only) translates a block in one pass
//! for code that runs a few times; Cranelift ([`cranelift::CraneliftBackend`], a
//! [`Backend`]) optimizes the blocks that stay hot.
//!
//! A block is what the engine's rule says ([`crate::engine::ends_after`]). It becomes host
//! code entered with the vCPU's state and its [`JitCtx`] that retires instructions off
//! `JitCtx::budget`. Instructions without a native translation (see [`native_ops`]) call the
//! interpreter's function through a helper, so everything the interpreter supports works here.
//!
//! Lookup: a per-vCPU jump cache on the effective PC, whose entries hold while the PC maps to
//! the host page they were made for (so they survive TLB flushes; translated code checks the
//! exec TLB entry before it chains), then the block map shared by all vCPUs, keyed by (PC,
//! host address of the code, the MSR bits that change translation). Each vCPU has its own
//! Cranelift backend: Cranelift modules are not `Sync`, and one shared module would be a
//! global translation lock. Baseline code lives in one region per machine.
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
//! translated code are mapped with `watch_writes`; a store to such a page (or `icbi`) drops the
//! blocks it overlaps in the shared map and bumps a generation every vCPU checks between blocks.

#[cfg(target_arch = "x86_64")]
pub mod baseline;
mod cranelift;
mod helpers;
mod space;
pub mod spr;
mod table;

/// The ops the baseline tier translates natively (the rest call the interpreter).
#[cfg(target_arch = "x86_64")]
pub use baseline::native_ops as baseline_native_ops;
pub use cranelift::native_ops;
pub use space::JitSpace;

use crate::cpu::{Exception, msr};
use crate::engine::{Cpu, DecodedBlock};
use crate::isa::OP_COUNT;
use crate::softmmu::{Access, PAGE_MASK, mmu_idx};
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[cfg(target_arch = "x86_64")]
use baseline::BASELINE_JC_TAG;
/// Without the baseline tier no jump cache entry carries its tag.
#[cfg(not(target_arch = "x86_64"))]
const BASELINE_JC_TAG: u64 = 0;

/// Interpreted executions of a block before it is translated (`--jit-threshold`) when
/// Cranelift is the only tier.
pub const DEFAULT_THRESHOLD: u32 = 500;

/// Interpreted executions before a block's first translation when the baseline tier comes
/// first. A baseline translation costs about as much as interpreting a typical block 50 to
/// 100 times, and code run once or twice (boot, exec, page-fault paths) is most of what a
/// Linux build touches, so a block is translated on its third execution.
pub const DEFAULT_BASELINE_THRESHOLD: u32 = 2;

/// Executions in the baseline tier after which a block is promoted to Cranelift
/// (`--jit-promote`). A Cranelift translation costs 0.3-1.5 ms and saves some tens of
/// nanoseconds per execution of the block, so it pays off after tens of thousands of
/// executions. Measured on the Debian kernel's boot to /init (-smp 1, host load 4-5): 7.5-8.1 s
/// guest uptime promoting at 20 000 (1 110 blocks, 1.6 s of Cranelift), 4.0-4.5 s at 100 000
/// (386 blocks), 4.1-5.8 s at 1 000 000, 6.1 s on the baseline tier alone. Again with chaining
/// across tiers, on a 4 × 4 linux-make at -smp 1 (one other busy core): make took 17.5-23.4 s
/// at 100 000 (≈ 820 promotions, 0.65 s of Cranelift), 21.6-28.6 s at 20 000 (6 400, 4-5 s),
/// 36.6 s at 5 000 (19 800, 11.8 s): earlier promotion moves instructions to Cranelift code
/// but costs more in translation than it saves.
pub const DEFAULT_PROMOTE_THRESHOLD: u32 = 100_000;

/// The tiers a machine and `ppc64emu user` run by default: the baseline tier alone (on a
/// host without it, Cranelift). Measured side by side (2-core host, one other busy core):
/// mkbench at N = 1 ran in 2.7-3.3 s on the baseline tier against 4.0-4.6 s with promotion
/// to Cranelift, a 4 × 4 linux-make in 18.6-18.9 s against 19.9-23.9 s, busybox gzip in
/// 0.35 s against 0.69 s. A promoted block's code is faster, but control passes between
/// the tiers through `helpers::run_optimized` (a host call and the optimized code's own
/// entry and exit) and Cranelift blocks chain through the jump cache, not patched jumps;
/// hot loops are promoted block by block, so they cross tiers on most iterations (10 M
/// crossings in the mkbench run). `--jit-tiers baseline,cranelift` turns promotion on.
pub const DEFAULT_TIERS: Tiers = Tiers::BASELINE;

/// Which translating tiers run (`--jit-tiers`): blocks start in the interpreter, move to the
/// first enabled tier after `--jit-threshold` executions, and from the baseline tier to
/// Cranelift after `--jit-promote` more when both are on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiers {
    pub baseline: bool,
    pub cranelift: bool,
}

impl Tiers {
    pub const CRANELIFT: Tiers = Tiers {
        baseline: false,
        cranelift: true,
    };
    pub const BASELINE: Tiers = Tiers {
        baseline: true,
        cranelift: false,
    };
    pub const BOTH: Tiers = Tiers {
        baseline: true,
        cranelift: true,
    };

    /// `baseline`, `cranelift` or both, comma-separated.
    pub fn parse(v: &str) -> Result<Tiers, String> {
        let mut t = Tiers {
            baseline: false,
            cranelift: false,
        };
        for part in v.split(',') {
            match part.trim() {
                "baseline" => t.baseline = true,
                "cranelift" => t.cranelift = true,
                "both" => (t.baseline, t.cranelift) = (true, true),
                other => {
                    return Err(format!(
                        "unknown tier {other:?} (expected baseline, cranelift or both, comma-separated)"
                    ));
                }
            }
        }
        Ok(t)
    }

    /// The tiers this host has: without the baseline tier's backend (not x86-64) Cranelift
    /// alone.
    pub fn available(self) -> Tiers {
        if cfg!(target_arch = "x86_64") {
            self
        } else {
            Tiers::CRANELIFT
        }
    }

    /// The default `--jit-threshold` for these tiers.
    pub fn default_threshold(self) -> u32 {
        if self.available().baseline {
            DEFAULT_BASELINE_THRESHOLD
        } else {
            DEFAULT_THRESHOLD
        }
    }
}

/// MSR bits that change how a block is translated.
pub const KEY_MSR_BITS: u64 =
    msr::LE | msr::IR | msr::DR | msr::PR | msr::FP | msr::VEC | msr::VSX | msr::SF;

/// Identity of a translation: same guest code under the same translation-relevant MSR bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockKey {
    pub pc: u64,
    /// Host address of the instruction at `pc` (stands for the physical address).
    pub host: u64,
    pub flags: u64,
}

/// Physical page → the blocks on it, each with its byte range in the page.
type PageBlocks = FxHashMap<u64, Vec<(BlockKey, u16, u16)>>;

/// Machine-wide JIT state shared by the vCPUs and their address spaces.
pub struct JitShared {
    map: RwLock<FxHashMap<BlockKey, usize>>,
    /// Physical page → blocks on it with their byte range in the page.
    pages: Mutex<PageBlocks>,
    /// One bit per hashed physical page: may hold translated code. False positives only send
    /// stores to the slow path; bits are cleared when the code cache is flushed.
    filter: Box<[AtomicU64]>,
    /// Bumped whenever blocks are dropped: vCPUs clear their jump caches when it moves.
    generation: AtomicU64,
    /// Bumped by each machine-wide code cache flush ([`Jit::flush_all`]): a vCPU whose module
    /// is older replaces it at the start of its next `run`.
    epoch: AtomicU64,
    /// A machine-wide flush was asked for ([`JitShared::request_flush`]); cleared by the flush.
    flush_requested: AtomicBool,
    /// A vCPU has queued the flush ([`Jit::claim_flush`]); cleared by the flush.
    flush_queued: AtomicBool,
    pub stats: SharedStats,
    /// The machine's baseline code (map values of its blocks have `BASELINE_MAP_TAG` set).
    #[cfg(target_arch = "x86_64")]
    pub(crate) baseline: Option<baseline::Shared>,
    /// User mode's host-guarded memory: told the page of every block placed, so that the
    /// host stops direct stores to it (see [`JitShared::set_user_process`]).
    code_guard: std::sync::OnceLock<CodeGuard>,
}

/// Withholds host write permission from a guest page that now holds translated code.
pub type CodeGuard = Box<dyn Fn(u64) + Send + Sync>;

/// Set in a block map value that is a baseline block (code addresses are 16-byte aligned).
const BASELINE_MAP_TAG: usize = 1;

/// Counters of the shared side (run report).
#[derive(Default)]
pub struct SharedStats {
    pub invalidated_blocks: AtomicU64,
    pub code_writes: AtomicU64,
}

const FILTER_BITS: u64 = 1 << 20;

impl JitShared {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            map: RwLock::new(FxHashMap::default()),
            pages: Mutex::new(FxHashMap::default()),
            filter: (0..FILTER_BITS / 64).map(|_| AtomicU64::new(0)).collect(),
            generation: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            flush_requested: AtomicBool::new(false),
            flush_queued: AtomicBool::new(false),
            stats: SharedStats::default(),
            #[cfg(target_arch = "x86_64")]
            baseline: baseline::Shared::new(),
            code_guard: std::sync::OnceLock::new(),
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
        if let Some(g) = guard.filter(|_| guarded) {
            let _ = self.code_guard.set(g);
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(b) = &self.baseline {
            b.set_space(baseline::Space {
                flat_base,
                guarded,
                user: true,
            });
        }
    }

    fn filter_bit(pa: u64) -> (usize, u64) {
        let page = pa >> 12;
        let h = page.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 44;
        ((h / 64) as usize, 1 << (h % 64))
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
                if let Some(f) = map.remove(k) {
                    self.kill_baseline(f);
                }
            }
            self.stats
                .invalidated_blocks
                .fetch_add(dropped.len() as u64, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// A dropped map value: a baseline block's incoming links are reset.
    fn kill_baseline(&self, _f: usize) {
        #[cfg(target_arch = "x86_64")]
        if _f & BASELINE_MAP_TAG != 0
            && let Some(b) = &self.baseline
        {
            b.kill(_f & !BASELINE_MAP_TAG);
        }
    }

    /// Bytes of baseline code placed since the last flush.
    pub fn baseline_code_bytes(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if let Some(b) = &self.baseline {
            return b.used();
        }
        0
    }

    fn lookup(&self, k: &BlockKey) -> Option<usize> {
        self.map.read().get(k).copied()
    }

    fn insert(&self, k: BlockKey, pa: u64, len: u32, f: usize) {
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
    /// machine has run [`Jit::flush_all`].
    pub fn request_flush(&self) {
        self.flush_requested.store(true, Ordering::SeqCst);
    }

    /// Drops every block (the caller guarantees no vCPU runs translated code).
    pub fn flush(&self) {
        self.map.write().clear();
        self.pages.lock().clear();
        #[cfg(target_arch = "x86_64")]
        if let Some(b) = &self.baseline {
            b.flush();
        }
        for w in self.filter.iter() {
            w.store(0, Ordering::Relaxed);
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// Never set: the kick flag of a vCPU no machine watches (user mode).
static NO_KICK: AtomicBool = AtomicBool::new(false);

/// What translated code shares with its helpers; one per vCPU.
#[repr(C)]
pub struct JitCtx {
    /// Instructions the blocks may still retire before chaining stops; every block exit
    /// subtracts what it retired.
    pub budget: i64,
    /// The vCPU's jump cache (`JC_SIZE` entries).
    pub jc: *const JcEntry,
    /// The machine's kick flag for this vCPU: set, the next block exit returns.
    pub kick: *const AtomicBool,
    /// `JitShared::generation` when the jump cache was last synced.
    pub seen_generation: u64,
    /// `JitShared::generation` itself (read by translated `isync`).
    pub generation: *const AtomicU64,
    /// Result of the last helper called through the slow-path adapter.
    pub ret: u64,
    /// Set by a memory helper when the access faulted (`exc` holds why).
    pub fault: u32,
    pub exc: Option<Exception>,
    pub shared: Arc<JitShared>,
    /// Interpreter fallbacks by op.
    pub fallbacks: Box<[u64; OP_COUNT]>,
    /// Slow-path memory accesses (TLB misses, MMIO, unaligned, watched pages).
    pub slow_mem: u64,
    /// Set by a baseline block's exit: the address of its unlinked jump (the run loop links
    /// it to the next block), or `baseline::PROMOTE`; 0 otherwise.
    pub link: u64,
    /// The optimizing backend's entry trampoline for its current module
    /// ([`Backend::entry_point`]): baseline code runs optimized blocks through it
    /// ([`helpers::run_optimized`]) without returning to the run loop.
    pub optimized_entry: usize,
    /// Calls of optimized code from baseline code, and the instructions they retired.
    pub optimized_calls: u64,
    pub optimized_instructions: u64,
    /// The address bits beyond user mode's reserved range (`user::mem::USER_SPAN`): a
    /// memory operand for host-guarded memory's one-instruction range test.
    pub beyond_user_span: u64,
}

// SAFETY: the pointers are to the owning `Jit`'s jump cache (moves with it), to a flag that
// outlives it (`watch`'s contract) and into `shared` (kept alive by the `Arc` here).
unsafe impl Send for JitCtx {}

/// Counters of one vCPU's JIT (run report).
#[derive(Clone, Debug, Default)]
pub struct JitCounters {
    pub blocks_translated: u64,
    pub cache_flushes: u64,
    pub jump_cache_hits: u64,
    /// Jump cache entries found good again after the PC's TLB entry was refilled.
    pub jump_cache_refills: u64,
    pub map_hits: u64,
    pub code_bytes: u64,
    pub translate_ns: u64,
    pub translate_time: TimeHistogram,
    /// Blocks run in the interpreter because they were not hot yet.
    pub cold_blocks: u64,
    pub cold_instructions: u64,
    /// Instructions retired in translated code.
    pub translated_instructions: u64,
    pub baseline: BaselineCounters,
}

/// Counters of the baseline tier on one vCPU.
#[derive(Clone, Debug, Default)]
pub struct BaselineCounters {
    pub blocks_translated: u64,
    pub translate_ns: u64,
    /// Translation time of each block, in ns (for the percentile).
    pub translate_samples: Vec<u32>,
    /// Instructions translated natively / as interpreter calls.
    pub native_insns: u64,
    pub fallback_insns: u64,
    /// Blocks promoted to Cranelift.
    pub promotions: u64,
    /// Jumps this vCPU patched to link two blocks.
    pub links: u64,
    /// Entries from the run loop, and instructions retired in baseline code.
    pub entries: u64,
    pub instructions: u64,
}

/// Durations in power-of-two buckets of nanoseconds: a mean and percentiles without a stored
/// list (bucket k holds [2^k, 2^(k+1)) ns).
#[derive(Clone, Debug, Default)]
pub struct TimeHistogram {
    buckets: [u64; 32],
    count: u64,
    total_ns: u64,
}

impl TimeHistogram {
    pub fn record(&mut self, ns: u64) {
        let k = (63 - ns.max(1).leading_zeros() as usize).min(31);
        self.buckets[k] += 1;
        self.count += 1;
        self.total_ns += ns;
    }

    pub fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.count as f64 / 1e3
        }
    }

    /// Upper bound of the bucket holding the `p`-th percentile (0 < p ≤ 100), in µs; 0 when empty.
    pub fn percentile_us(&self, p: f64) -> f64 {
        let want = (self.count as f64 * p / 100.0).ceil() as u64;
        let mut seen = 0;
        for (k, n) in self.buckets.iter().enumerate() {
            seen += n;
            if *n > 0 && seen >= want {
                return (1u64 << (k + 1)) as f64 / 1e3;
            }
        }
        0.0
    }
}

/// Jump cache entry; read by translated code (`repr(C)`).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct JcEntry {
    pub pc: u64,
    pub flags: u64,
    pub f: usize,
    /// Host address minus guest effective address of the block's page when the entry was
    /// made: the entry holds while the exec TLB entry of `pc` has this addend.
    pub addend: u64,
}

/// Jump cache entries per vCPU. A compiler's hot code spans tens of thousands of blocks: with
/// 4096 entries, `make` of a C project found the next block in the shared map more often than
/// here (conflict misses), each a run-loop round trip.
pub(crate) const JC_SIZE: usize = 1 << 16;

/// Where `Cpu` keeps the pointer to its TLB entries (`Tlb::table`, fixed for its life), and
/// the bytes of one MMU index's entries: how translated code of either tier finds an entry.
pub(crate) const TLB_TABLE_PTR: i32 = (core::mem::offset_of!(Cpu, mmu)
    + core::mem::offset_of!(crate::softmmu::SoftMmu, tlb)
    + core::mem::offset_of!(crate::softmmu::Tlb, table))
    as i32;
pub(crate) const TLB_IDX_BYTES: i32 =
    (crate::softmmu::TLB_ENTRIES * size_of::<crate::softmmu::TlbEntry>()) as i32;
const JC_EMPTY: JcEntry = JcEntry {
    pc: 1,
    flags: 0,
    f: 0,
    addend: 0,
};

/// Code bytes after which a vCPU's module is retired and the cache flushed (default of
/// `Jit::cache_limit`, `--jit-cache-limit`).
pub const CODE_CACHE_LIMIT: u64 = 1 << 30;

/// Parses a code cache limit (`--jit-cache-limit`): a number of bytes, at least 1, with an
/// optional suffix K, M or G (KiB, MiB, GiB). The error says what is wrong.
pub fn parse_cache_limit(v: &str) -> Result<u64, String> {
    let (digits, shift) = match v.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&v[..v.len() - 1], 10),
        Some(b'M') => (&v[..v.len() - 1], 20),
        Some(b'G') => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a number of bytes, optionally with a suffix K, M or G".into());
    }
    let n: u64 = digits.parse().map_err(|_| "too large".to_string())?;
    let n = n
        .checked_mul(1 << shift)
        .ok_or_else(|| "too large".to_string())?;
    if n == 0 {
        return Err("must be at least 1 byte".into());
    }
    Ok(n)
}

/// A code generator behind the translating runner ([`Jit`]), one per vCPU. The runner owns
/// everything a second generator reuses: the block map and code-page tracking shared by
/// all vCPUs, invalidation, the jump cache, tiering and the run loop.
///
/// The block protocol every generator's code follows: a block is entered with `(cpu, ctx)`;
/// guest registers live in `cpu.st`; it takes the instructions it retired off
/// `ctx.budget` and leaves `cpu.st.pc` at the next instruction; a guest fault stores
/// `ctx.exc` (with `st.pc` at the faulting instruction, which did not retire); an
/// interpreter call goes through `helpers::interp` and stops as its result says. A block
/// may go on to the next one through the jump cache (`ctx.jc`) while the budget lasts, no
/// events are pending and `ctx.kick` is clear; an entry there is a block of this same
/// generator (entries carry `JcEntry::flags` of the block key).
pub trait Backend: Send {
    /// Translates `block` (its key's MSR bits are `key.flags`); the entry point and how
    /// many bytes of host code it took.
    fn compile(&mut self, block: &DecodedBlock, key: BlockKey) -> Result<Compiled, Exception>;

    /// Runs the block at `entry` (and those it chains to).
    ///
    /// # Safety
    /// `entry` came from `compile` since the last `reset`, and the blocks it may chain to
    /// (through `ctx.jc`) are live as well.
    unsafe fn enter(&mut self, cpu: &mut Cpu, ctx: &mut JitCtx, entry: usize);

    /// Frees every translation. The caller guarantees that none can run any more.
    fn reset(&mut self);

    /// The current module's entry trampoline, an `extern "C" fn(*mut Cpu, *mut JitCtx,
    /// usize)` that does what [`Backend::enter`] does (changes with `reset`).
    fn entry_point(&self) -> usize;
}

/// A block translated by a [`Backend`].
pub struct Compiled {
    pub entry: usize,
    pub code_bytes: u64,
}

/// One vCPU's JIT: its code generator, jump cache and tiering state.
pub struct Jit {
    pub ctx: Box<JitCtx>,
    backend: Box<dyn Backend>,
    jc: Box<[JcEntry]>,
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
}

/// Mean and 99th percentile of translation times in ns, in µs.
fn mean_p99_us(samples: &[u32]) -> (f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0);
    }
    let mean = samples.iter().map(|&x| x as f64).sum::<f64>() / samples.len() as f64;
    let mut v = samples.to_vec();
    let k = (v.len() * 99).div_ceil(100) - 1;
    let (_, p99, _) = v.select_nth_unstable(k);
    (mean / 1e3, *p99 as f64 / 1e3)
}

/// Baseline tier counters of one vCPU in the run report.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BaselineReport {
    pub blocks_translated: u64,
    pub translate_ms: f64,
    pub translate_us_mean: f64,
    pub translate_us_p99: f64,
    /// Machine-wide bytes of baseline code since the last flush.
    pub code_bytes: u64,
    pub native_insns: u64,
    pub fallback_insns: u64,
    pub promotions: u64,
    pub links: u64,
    /// Entries from the run loop (each runs one block or a chain of them).
    pub entries: u64,
    /// Instructions retired in baseline code.
    pub instructions: u64,
    /// Optimized blocks (chains) run from baseline code, without the run loop.
    pub optimized_calls: u64,
}

/// JIT counters of one vCPU in the run report.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct JitReport {
    pub blocks_translated: u64,
    pub cache_flushes: u64,
    pub code_bytes: u64,
    pub translate_ms: f64,
    /// Mean and 99th percentile (upper bound of its power-of-two bucket) of the translation
    /// time of one block, in µs.
    pub translate_mean_us: f64,
    pub translate_p99_us: f64,
    /// Blocks (and their instructions) run in the interpreter before they were hot.
    pub cold_blocks: u64,
    pub cold_instructions: u64,
    /// Instructions retired in translated code.
    pub translated_instructions: u64,
    pub jump_cache_hits: u64,
    pub jump_cache_refills: u64,
    pub block_map_hits: u64,
    pub slow_memory_accesses: u64,
    pub blocks_invalidated: u64,
    /// Interpreter fallbacks by mnemonic (most frequent first, top 40), both tiers.
    pub fallbacks: Vec<(String, u64)>,
    /// The baseline tier (absent when it is off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineReport>,
}

/// Drops this vCPU's fast-path write permission for the host page `host_page` (under any
/// effective address): stores to newly translated code must take the watched slow path.
/// Other vCPUs keep theirs until their next fill; guests make cross-modified code visible
/// with `icbi`, which invalidates through the slow path.
fn drop_write_entries(tlb: &mut crate::softmmu::Tlb, host_page: u64) {
    for e in tlb.table.iter_mut().flatten() {
        if e.write & !PAGE_MASK == 0 && e.write.wrapping_add(e.addend) == host_page {
            e.write = crate::softmmu::TlbEntry::EMPTY.write;
        }
    }
}

impl Jit {
    /// A JIT for `cpu`: wraps its address space so that writes to translated code are seen.
    pub fn attach(cpu: &mut Cpu, shared: Arc<JitShared>) -> Self {
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
        let jc = vec![JC_EMPTY; JC_SIZE].into_boxed_slice();
        let generation: *const AtomicU64 = &shared.generation;
        let ctx = JitCtx {
            budget: 0,
            jc: jc.as_ptr(),
            kick: &NO_KICK,
            seen_generation: 0,
            generation,
            ret: 0,
            fault: 0,
            exc: None,
            shared,
            fallbacks: Box::new([0; OP_COUNT]),
            slow_mem: 0,
            link: 0,
            optimized_entry: 0,
            optimized_calls: 0,
            optimized_instructions: 0,
            beyond_user_span: !(crate::user::mem::USER_SPAN - 1),
        };
        let backend: Box<dyn Backend> = Box::new(cranelift::CraneliftBackend::new());
        let mut ctx = Box::new(ctx);
        ctx.optimized_entry = backend.entry_point();
        Self {
            ctx,
            backend,
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
        }
    }

    /// Chooses the tiers (those this host lacks are left out) and the interpreter threshold
    /// (`None`: the default for these tiers).
    pub fn set_tiers(&mut self, tiers: Tiers, threshold: Option<u32>) {
        let tiers = tiers.available();
        self.tiers = tiers;
        self.threshold = threshold.unwrap_or(tiers.default_threshold());
    }

    /// The baseline tier's code, when that tier is on.
    #[cfg(target_arch = "x86_64")]
    fn baseline_code(&self) -> Option<&baseline::Shared> {
        if self.tiers.baseline {
            self.ctx.shared.baseline.as_ref()
        } else {
            None
        }
    }

    /// Moves this JIT to another CPU, as `attach` would attach a new one, but keeping the
    /// module (a test that replays thousands of short programs on fresh CPUs saves building
    /// one per program). Every block is dropped from the shared map: the code the map pointed
    /// to stays in the module, unreachable, until the next flush. Only for a JIT whose
    /// `JitShared` no other vCPU uses.
    pub fn reattach(&mut self, cpu: &mut Cpu) {
        let inner = std::mem::replace(
            &mut cpu.mmu.space,
            Box::new(crate::softmmu::FlatRam::new(0)),
        );
        cpu.mmu.space = Box::new(JitSpace {
            inner,
            shared: self.ctx.shared.clone(),
        });
        cpu.mmu.tlb.flush_all();
        self.ctx.shared.flush();
        self.jc.fill(JC_EMPTY);
        self.cold.clear();
        self.ctx.exc = None;
        self.ctx.fault = 0;
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

    /// Clears the jump cache when blocks were dropped. (TLB flushes leave it: an entry is
    /// used only while its PC maps to the host page it was made for.)
    #[inline]
    fn sync_jump_cache(&mut self) {
        let g = self.ctx.shared.generation();
        if g != self.ctx.seen_generation {
            self.jc.fill(JC_EMPTY);
            self.ctx.seen_generation = g;
        }
    }

    /// The block for the current PC: jump cache, shared map, or a new translation; `None`
    /// while the block is not hot yet.
    fn lookup(&mut self, cpu: &mut Cpu) -> Result<Option<usize>, Exception> {
        let pc = cpu.st.pc;
        let flags = cpu.st.msr & KEY_MSR_BITS;
        let slot = (pc >> 2) as usize & (JC_SIZE - 1);
        let e = self.jc[slot];
        let idx = mmu_idx(cpu.st.msr, Access::Exec);
        // An entry is good while the PC still maps to the same host page (whatever TLB
        // flushes happened since it was made).
        let maps_same = |cpu: &Cpu| {
            cpu.mmu
                .tlb
                .lookup(idx, pc, 4, Access::Exec)
                .is_some_and(|h| (h as u64).wrapping_sub(pc) == e.addend)
        };
        let tag = if e.flags & BASELINE_JC_TAG != 0 {
            BASELINE_MAP_TAG
        } else {
            0
        };
        let same_key = e.pc == pc && e.flags & !BASELINE_JC_TAG == flags;
        if same_key && maps_same(cpu) {
            self.counters.jump_cache_hits += 1;
            return Ok(Some(e.f | tag));
        }
        // Fetch through the TLB: raises the instruction storage interrupt, fills the entry.
        cpu.mmu.fetch(&cpu.st, pc)?;
        // After a TLB flush the entry usually still holds: the refilled page is the same.
        if same_key && maps_same(cpu) {
            self.counters.jump_cache_refills += 1;
            return Ok(Some(e.f | tag));
        }
        let host = cpu
            .mmu
            .tlb
            .lookup(idx, pc, 4, Access::Exec)
            .map_or(0, |p| p as u64);
        let key = BlockKey { pc, host, flags };
        let f = match (host != 0).then(|| self.ctx.shared.lookup(&key)).flatten() {
            Some(f) => {
                self.counters.map_hits += 1;
                f
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
                    Some(f) => f,
                    None => return Ok(None),
                }
            }
        };
        if host != 0 {
            self.jc[slot] = Self::jc_entry(pc, flags, f, host.wrapping_sub(pc));
        }
        Ok(Some(f))
    }

    fn jc_entry(pc: u64, flags: u64, f: usize, addend: u64) -> JcEntry {
        if f & BASELINE_MAP_TAG != 0 {
            JcEntry {
                pc,
                flags: flags | BASELINE_JC_TAG,
                f: f & !BASELINE_MAP_TAG,
                addend,
            }
        } else {
            JcEntry {
                pc,
                flags,
                f,
                addend,
            }
        }
    }

    /// Translates the block at `key` with the first tier; `None` when the baseline code
    /// region is full (a flush is requested; the block runs in the interpreter meanwhile).
    fn translate(&mut self, cpu: &mut Cpu, key: BlockKey) -> Result<Option<usize>, Exception> {
        if self.self_flush && self.over_limit() {
            self.flush_own();
        }
        let t0 = std::time::Instant::now();
        let block = DecodedBlock::fetch(cpu, key.pc)?;
        #[cfg(target_arch = "x86_64")]
        let f = if self.baseline_code().is_some() {
            let promote = self.tiers.cranelift.then_some(self.promote_threshold);
            let b = self.baseline_code().expect("baseline tier");
            let Some(t) = b.translate(key, &block.words, promote) else {
                self.ctx.shared.request_flush();
                return Ok(None);
            };
            let ns = t0.elapsed().as_nanos() as u64;
            let c = &mut self.counters.baseline;
            c.blocks_translated += 1;
            c.translate_ns += ns;
            c.translate_samples.push(ns.min(u32::MAX as u64) as u32);
            c.native_insns += t.native as u64;
            c.fallback_insns += t.fallbacks as u64;
            t.entry | BASELINE_MAP_TAG
        } else {
            self.compile_cranelift(&block, key, t0)?
        };
        #[cfg(not(target_arch = "x86_64"))]
        let f = self.compile_cranelift(&block, key, t0)?;
        if key.host != 0 {
            let pa = cpu
                .mmu
                .space
                .translate(&cpu.st, key.pc, Access::Exec)
                .map(|m| m.pa | (key.pc & !PAGE_MASK));
            if let Ok(pa) = pa {
                if self.ctx.shared.mark_code_page(pa) {
                    drop_write_entries(&mut cpu.mmu.tlb, key.host - (key.pc & !PAGE_MASK));
                }
                self.ctx
                    .shared
                    .insert(key, pa, 4 * block.words.len() as u32, f);
                if let Some(guard) = self.ctx.shared.code_guard.get() {
                    guard(pa & PAGE_MASK);
                }
            }
        }
        if self.trace {
            eprintln!("{}", block.describe(key.flags));
        }
        Ok(Some(f))
    }

    fn compile_cranelift(
        &mut self,
        block: &DecodedBlock,
        key: BlockKey,
        t0: std::time::Instant,
    ) -> Result<usize, Exception> {
        let c = self.backend.compile(block, key)?;
        let f = c.entry;
        self.counters.code_bytes += c.code_bytes;
        let ns = t0.elapsed().as_nanos() as u64;
        self.counters.blocks_translated += 1;
        self.counters.translate_ns += ns;
        self.counters.translate_time.record(ns);
        Ok(f)
    }

    /// A code cache (this vCPU's module or the machine's baseline code) passed the limit.
    fn over_limit(&self) -> bool {
        self.counters.code_bytes > self.cache_limit
            || self.ctx.shared.baseline_code_bytes() > self.cache_limit
    }

    /// The baseline block at the PC asked to be promoted: translates it with Cranelift and
    /// puts that in the map in its place (its incoming links are reset, so the blocks that
    /// jumped to it return to the run loop and find the new one).
    #[cfg(target_arch = "x86_64")]
    fn promote(&mut self, cpu: &mut Cpu) -> Result<(), Exception> {
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
        let key = BlockKey { pc, host, flags };
        let slot = (pc >> 2) as usize & (JC_SIZE - 1);
        let old = match self.ctx.shared.lookup(&key) {
            Some(f) if f & BASELINE_MAP_TAG != 0 => f,
            Some(f) => {
                // Another vCPU promoted it already.
                self.jc[slot] = JcEntry {
                    pc,
                    flags,
                    f,
                    addend: host.wrapping_sub(pc),
                };
                return Ok(());
            }
            None => return Ok(()),
        };
        let block = DecodedBlock::fetch(cpu, pc)?;
        let f = self.compile_cranelift(&block, key, std::time::Instant::now())?;
        let mut map = self.ctx.shared.map.write();
        // Dropped meanwhile (its code was written): the new translation may be stale.
        if map.get(&key) != Some(&old) {
            return Ok(());
        }
        map.insert(key, f);
        drop(map);
        self.ctx.shared.kill_baseline(old);
        self.counters.baseline.promotions += 1;
        self.jc[slot] = JcEntry {
            pc,
            flags,
            f,
            addend: host.wrapping_sub(pc),
        };
        Ok(())
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
    /// `seen_generation` is behind the flush's generation bump, and `run` syncs first).
    fn replace_module(&mut self, flushes: u64) {
        self.jc.fill(JC_EMPTY);
        self.cold.clear();
        self.backend.reset();
        self.ctx.optimized_entry = self.backend.entry_point();
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
    /// `run` (it sees the new epoch), because a `JITModule` is owned by its vCPU thread and
    /// freed there.
    ///
    /// Why freeing an old module then is safe: translated code is entered only through
    /// `run`, which first replaces an old-epoch module (clearing that vCPU's jump cache) and
    /// then syncs the jump cache with the generation; chained blocks find their successors
    /// only in the running vCPU's own jump cache. So after the flush, code of an old module,
    /// wherever it came from (blocks of vCPU A's module reach vCPU B through the shared map,
    /// B's jump cache and B's chains, and call A's slow-path adapter), can only be reached
    /// through a jump cache filled before the flush, and each vCPU clears its own before its
    /// first block after it. When vCPU B frees its old module at the start of its `run`,
    /// every other vCPU either has not run since the flush (it holds no pointer it will use:
    /// its jump cache is cleared before use) or has run and cleared its jump cache then, and
    /// filled it only from the map emptied by the flush. No vCPU is inside B's old code
    /// either: it was entered last before the exclusive section, and every `run` had returned
    /// before the section started. The epoch is read after the section ended (the section's
    /// lock orders it), so no vCPU misses it. A vCPU that stays idle keeps its old module
    /// until it runs again: memory stays bounded by one module per vCPU over the limit.
    pub fn flush_all(&mut self) {
        let sh = self.ctx.shared.clone();
        sh.flush();
        let epoch = sh.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        sh.flush_requested.store(false, Ordering::SeqCst);
        sh.flush_queued.store(false, Ordering::SeqCst);
        self.replace_module(epoch - self.epoch);
        self.epoch = epoch;
    }

    /// Runs translated blocks until an exception, until `cpu.events` is set, until `stop()`
    /// says so (checked at every block entry), or until about `max` instructions retired.
    pub fn run(
        &mut self,
        cpu: &mut Cpu,
        max: u64,
        stop: &dyn Fn(&Cpu) -> bool,
    ) -> Result<(), Exception> {
        let epoch = self.ctx.shared.epoch.load(Ordering::Acquire);
        if epoch != self.epoch {
            // Another vCPU flushed the code cache (`flush_all`): this module is unreachable.
            self.replace_module(epoch - self.epoch);
            self.epoch = epoch;
        }
        let mut done = 0u64;
        #[cfg(target_arch = "x86_64")]
        let shared = self.ctx.shared.clone();
        // The unlinked jump the last baseline block left by (`JitCtx::link`).
        #[cfg(target_arch = "x86_64")]
        let mut pending_link = 0u64;
        // The baseline flush count when `pending_link` was taken: a flush in between (a
        // translation can flush the region) makes the site an address of dropped code.
        #[cfg(target_arch = "x86_64")]
        let mut link_flushes = 0u64;
        loop {
            self.sync_jump_cache();
            let found = self.lookup(cpu)?;
            #[cfg(target_arch = "x86_64")]
            if let Some(f) = found.filter(|f| f & BASELINE_MAP_TAG != 0) {
                let entry = f & !BASELINE_MAP_TAG;
                let b = shared
                    .baseline
                    .as_ref()
                    .expect("baseline block without baseline code");
                if pending_link != 0
                    && link_flushes == b.flushes()
                    && b.link(pending_link as usize, entry, cpu.st.msr & KEY_MSR_BITS)
                {
                    self.counters.baseline.links += 1;
                }
                let budget = max.saturating_sub(done).min(i64::MAX as u64) as i64;
                self.ctx.budget = budget;
                self.ctx.link = 0;
                let optimized = self.ctx.optimized_instructions;
                // SAFETY: `entry` is a live block of the machine's baseline code, found for
                // this state; the jump cache holds only live blocks (synced above).
                unsafe { b.enter(cpu, &mut self.ctx, entry) };
                let n = (budget - self.ctx.budget) as u64;
                cpu.counters.instructions += n;
                self.counters.translated_instructions += n;
                self.counters.baseline.entries += 1;
                self.counters.baseline.instructions +=
                    n - (self.ctx.optimized_instructions - optimized);
                done += n;
                pending_link = std::mem::take(&mut self.ctx.link);
                link_flushes = b.flushes();
                if pending_link == baseline::PROMOTE {
                    pending_link = 0;
                    if self.ctx.exc.is_none() {
                        self.promote(cpu)?;
                    }
                }
                if let Some(e) = self.ctx.exc.take() {
                    self.ctx.fault = 0;
                    return Err(e);
                }
                if cpu.events != 0 || done >= max || stop(cpu) {
                    return Ok(());
                }
                continue;
            }
            #[cfg(target_arch = "x86_64")]
            {
                pending_link = 0;
            }
            let n = match found {
                Some(f) => {
                    let budget = max.saturating_sub(done).min(i64::MAX as u64) as i64;
                    self.ctx.budget = budget;
                    // SAFETY: `f` is a block of the current module (the map and the jump
                    // cache hold no older one), and so are those it chains to.
                    unsafe { self.backend.enter(cpu, &mut self.ctx, f) };
                    let n = (budget - self.ctx.budget) as u64;
                    cpu.counters.instructions += n;
                    self.counters.translated_instructions += n;
                    n
                }
                None => self.interpret_block(cpu)?,
            };
            done += n;
            if let Some(e) = self.ctx.exc.take() {
                self.ctx.fault = 0;
                return Err(e);
            }
            if cpu.events != 0 || done >= max || stop(cpu) {
                return Ok(());
            }
        }
    }

    /// Runs the block at the PC in the interpreter (the engine's rule for where it ends, the
    /// same as for a translation); returns the instructions retired.
    fn interpret_block(&mut self, cpu: &mut Cpu) -> Result<u64, Exception> {
        let start = cpu.counters.instructions;
        self.counters.cold_blocks += 1;
        let r = cpu.run_block();
        self.counters.cold_instructions += cpu.counters.instructions - start;
        r
    }

    pub fn report(&self) -> JitReport {
        let c = &self.counters;
        JitReport {
            blocks_translated: c.blocks_translated,
            cache_flushes: c.cache_flushes,
            code_bytes: c.code_bytes,
            translate_ms: c.translate_ns as f64 / 1e6,
            translate_mean_us: c.translate_time.mean_us(),
            translate_p99_us: c.translate_time.percentile_us(99.0),
            cold_blocks: c.cold_blocks,
            cold_instructions: c.cold_instructions,
            translated_instructions: c.translated_instructions,
            jump_cache_hits: c.jump_cache_hits,
            jump_cache_refills: c.jump_cache_refills,
            block_map_hits: c.map_hits,
            slow_memory_accesses: self.ctx.slow_mem,
            blocks_invalidated: self
                .ctx
                .shared
                .stats
                .invalidated_blocks
                .load(Ordering::Relaxed),
            fallbacks: self
                .fallback_counts()
                .into_iter()
                .take(40)
                .map(|(m, n)| (m.to_string(), n))
                .collect(),
            baseline: self.tiers.baseline.then(|| {
                let b = &c.baseline;
                let (mean, p99) = mean_p99_us(&b.translate_samples);
                BaselineReport {
                    blocks_translated: b.blocks_translated,
                    translate_ms: b.translate_ns as f64 / 1e6,
                    translate_us_mean: mean,
                    translate_us_p99: p99,
                    code_bytes: self.ctx.shared.baseline_code_bytes(),
                    native_insns: b.native_insns,
                    fallback_insns: b.fallback_insns,
                    promotions: b.promotions,
                    links: b.links,
                    entries: b.entries,
                    instructions: b.instructions,
                    optimized_calls: self.ctx.optimized_calls,
                }
            }),
        }
    }

    /// Interpreter fallbacks by mnemonic, most frequent first.
    pub fn fallback_counts(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<_> = self
            .ctx
            .fallbacks
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (crate::isa::ALL_OPS[k].info().mnemonic, *n))
            .collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.1));
        v
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn translation_time_histogram() {
        let mut h = super::TimeHistogram::default();
        assert_eq!((h.mean_us(), h.percentile_us(99.0)), (0.0, 0.0));
        for _ in 0..99 {
            h.record(3_000); // bucket [2048, 4096) ns
        }
        h.record(1_000_000); // bucket [2^19, 2^20) ns
        assert!((h.mean_us() - (99.0 * 3.0 + 1000.0) / 100.0).abs() < 1e-9);
        assert_eq!(h.percentile_us(99.0), 4.096);
        assert_eq!(h.percentile_us(100.0), 1048.576);
    }

    #[test]
    fn cache_limits_parse() {
        use super::parse_cache_limit as p;
        assert_eq!(p("1"), Ok(1));
        assert_eq!(p("4096"), Ok(4096));
        assert_eq!(p("64k"), Ok(64 << 10));
        assert_eq!(p("3M"), Ok(3 << 20));
        assert_eq!(p("1G"), Ok(1 << 30));
        for bad in [
            "",
            "K",
            "0",
            "0M",
            "-1",
            "1.5M",
            "12T",
            "0x100",
            "18446744073709551616",
            "99999999999G",
        ] {
            assert!(p(bad).is_err(), "{bad:?} accepted");
        }
    }
}
