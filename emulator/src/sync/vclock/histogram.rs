//! Distributions of the costs the BQL's virtual queue serves: each vCPU's time between two
//! of its holds (its think time) and the holds themselves. A closed queue loses throughput
//! near saturation in proportion to how much these vary, so the run report gives them
//! (`scripts/virtual-validate closed` replays them through a model of the queue).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-buckets per power of two: bucket widths of a quarter octave (19 %).
const SUB: u32 = 4;
const SUB_BITS: u32 = SUB.trailing_zeros();
/// Powers of two covered: up to 2^40 ns (18 minutes); longer values count in the last.
const OCTAVES: u32 = 40;
const BUCKETS: usize = (OCTAVES * SUB) as usize;

/// Counts of nanosecond values in quarter-octave buckets, recorded without a lock.
pub struct CostHistogram {
    buckets: [AtomicU64; BUCKETS],
}

impl Default for CostHistogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The bucket of `ns`: values below `SUB` have one each; above, the octave and the next
/// `SUB_BITS` bits below its leading one.
fn bucket(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let octave = 63 - ns.leading_zeros();
    let sub = (ns >> (octave - SUB_BITS)) as u32 & (SUB - 1);
    ((octave - SUB_BITS + 1) * SUB + sub).min(BUCKETS as u32 - 1) as usize
}

/// The smallest value of bucket `b`.
fn lower_bound(b: usize) -> u64 {
    let b = b as u32;
    if b < SUB {
        return b as u64;
    }
    let octave = b / SUB - 1 + SUB_BITS;
    ((SUB + b % SUB) as u64) << (octave - SUB_BITS)
}

impl CostHistogram {
    pub fn record(&self, ns: u64) {
        self.buckets[bucket(ns)].fetch_add(1, Ordering::Relaxed);
    }

    /// The buckets that counted anything: each bucket's smallest value → its count.
    pub fn snapshot(&self) -> BTreeMap<u64, u64> {
        (self.buckets.iter().enumerate())
            .map(|(b, n)| (lower_bound(b), n.load(Ordering::Relaxed)))
            .filter(|&(_, n)| n != 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_falls_in_the_bucket_whose_range_holds_it() {
        for ns in (0..5000).chain([1 << 20, 3 << 30, (1 << 40) - 1]) {
            let b = bucket(ns);
            assert!(lower_bound(b) <= ns, "{ns} below bucket {b}");
            assert!(ns < lower_bound(b + 1), "{ns} beyond bucket {b}");
        }
        // A quarter octave: 1024 and 1200 share a bucket [1024, 1280); 1300 is in the next.
        assert_eq!(bucket(1024), bucket(1200));
        assert_ne!(bucket(1024), bucket(1300));
        assert_eq!(lower_bound(bucket(1300)), 1280);
    }

    #[test]
    fn snapshot_counts_each_value_once_at_its_bucket() {
        let h = CostHistogram::default();
        for ns in [0, 7, 7, 2048, 2400, 1 << 50] {
            h.record(ns);
        }
        let s = h.snapshot();
        assert_eq!(s.values().sum::<u64>(), 6);
        assert_eq!(s[&0], 1);
        assert_eq!(s[&lower_bound(bucket(7))], 2);
        assert_eq!(s[&2048], 2);
        assert_eq!(s[&lower_bound(BUCKETS - 1)], 1);
    }
}
