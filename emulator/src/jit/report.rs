//! What the translating tier counts on one vCPU, and its part of the run report
//! (`vcpus[].jit`, described in `report.rs`).

use super::Jit;
use super::tier::{TierId, Translation};
use std::sync::atomic::Ordering;

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

/// Counters of the baseline tier on one vCPU; in the run report as they are, but for the
/// translation times (the report gives their total, mean and 99th percentile).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BaselineCounters {
    pub blocks_translated: u64,
    #[serde(skip)]
    pub translate_ns: u64,
    /// Translation time of each block, in ns (for the percentile).
    #[serde(skip)]
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

impl JitCounters {
    /// A block was translated by `tier` in `ns` nanoseconds.
    pub(super) fn translated(&mut self, tier: TierId, ns: u64, t: &Translation) {
        match tier {
            TierId::Baseline => {
                let c = &mut self.baseline;
                c.blocks_translated += 1;
                c.translate_ns += ns;
                c.translate_samples.push(ns.min(u32::MAX as u64) as u32);
                c.native_insns += t.native as u64;
                c.fallback_insns += t.fallbacks as u64;
            }
            TierId::Cranelift => {
                self.code_bytes += t.code_bytes;
                self.blocks_translated += 1;
                self.translate_ns += ns;
                self.translate_time.record(ns);
            }
        }
    }

    /// A stint in `tier`'s code retired `n` instructions, `optimized` of them in optimized
    /// code that the stint's code called (`helpers::run_optimized`).
    pub(super) fn entered(&mut self, tier: TierId, n: u64, optimized: u64) {
        self.translated_instructions += n;
        if tier == TierId::Baseline {
            self.baseline.entries += 1;
            self.baseline.instructions += n - optimized;
        }
    }
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
    /// The vCPU's counters (without the samples), as fields of this object.
    #[serde(flatten)]
    pub counters: BaselineCounters,
    pub translate_ms: f64,
    pub translate_us_mean: f64,
    pub translate_us_p99: f64,
    /// Machine-wide bytes of baseline code since the last flush.
    pub code_bytes: u64,
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

impl Jit {
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
                    counters: BaselineCounters {
                        translate_samples: Vec::new(),
                        ..*b
                    },
                    translate_ms: b.translate_ns as f64 / 1e6,
                    translate_us_mean: mean,
                    translate_us_p99: p99,
                    code_bytes: self.ctx.shared.baseline_code_bytes(),
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
}
