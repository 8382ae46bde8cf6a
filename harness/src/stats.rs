//! Statistics for small samples of run times.
//!
//! A sweep point has a handful of repetitions (3–10), so everything here is chosen to be
//! honest at small n: medians with bootstrap percentile intervals (no normality assumption),
//! a Student-t interval where a mean is wanted, and an exact permutation test for A/B
//! comparisons (every split of the pooled runs is enumerated when that is cheap). All
//! resampling uses a fixed seed so that `report` and `gate` print the same numbers every time.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Seed of every resampling in the harness: results are reproducible run to run.
pub const SEED: u64 = 0x6c6f_636b_7363_616c; // "lockscal"
/// Bootstrap resamples per interval.
pub const BOOTSTRAP_RESAMPLES: usize = 4000;
/// Exact enumeration up to this many splits; a seeded Monte Carlo sample beyond.
pub const EXACT_LIMIT: u64 = 200_000;
pub const MONTE_CARLO_PERMUTATIONS: usize = 50_000;

pub fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Sample standard deviation (n − 1).
pub fn stddev(x: &[f64]) -> f64 {
    if x.len() < 2 {
        return 0.0;
    }
    let m = mean(x);
    (x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() - 1) as f64).sqrt()
}

/// Quantile by linear interpolation between order statistics (type 7, as R's default).
pub fn quantile(x: &[f64], q: f64) -> f64 {
    let mut v = x.to_vec();
    v.sort_by(f64::total_cmp);
    quantile_sorted(&v, q)
}

fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    assert!(!v.is_empty(), "quantile of an empty sample");
    let h = (v.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

pub fn median(x: &[f64]) -> f64 {
    quantile(x, 0.5)
}

/// A point estimate with a confidence interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

/// Mean with a two-sided Student-t interval at `level` (e.g. 0.95).
pub fn mean_ci_t(x: &[f64], level: f64) -> Estimate {
    let m = mean(x);
    if x.len() < 2 {
        return Estimate {
            value: m,
            lo: m,
            hi: m,
        };
    }
    let df = (x.len() - 1) as f64;
    let t = StudentsT::new(0.0, 1.0, df)
        .expect("valid t distribution")
        .inverse_cdf(0.5 + level / 2.0);
    let half = t * stddev(x) / (x.len() as f64).sqrt();
    Estimate {
        value: m,
        lo: m - half,
        hi: m + half,
    }
}

fn resample_median(rng: &mut StdRng, x: &[f64], buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    buf.extend((0..x.len()).map(|_| x[rng.random_range(0..x.len())]));
    buf.sort_by(f64::total_cmp);
    quantile_sorted(buf, 0.5)
}

/// Median with a bootstrap percentile interval at `level`.
pub fn median_ci_bootstrap(x: &[f64], level: f64) -> Estimate {
    let value = median(x);
    if x.len() < 2 {
        return Estimate {
            value,
            lo: value,
            hi: value,
        };
    }
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut buf = Vec::with_capacity(x.len());
    let meds: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| resample_median(&mut rng, x, &mut buf))
        .collect();
    let a = (1.0 - level) / 2.0;
    Estimate {
        value,
        lo: quantile(&meds, a),
        hi: quantile(&meds, 1.0 - a),
    }
}

/// Ratio of medians `median(num) / median(den)` with a bootstrap percentile interval,
/// resampling both samples independently. Used for speedups (T(1)/T(N)) and A/B ratios.
pub fn ratio_ci_bootstrap(num: &[f64], den: &[f64], level: f64) -> Estimate {
    let value = median(num) / median(den);
    if num.len() < 2 && den.len() < 2 {
        return Estimate {
            value,
            lo: value,
            hi: value,
        };
    }
    let mut rng = StdRng::seed_from_u64(SEED ^ 0x5a5a);
    let mut buf = Vec::new();
    let ratios: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            let n = resample_median(&mut rng, num, &mut buf);
            let d = resample_median(&mut rng, den, &mut buf);
            n / d
        })
        .collect();
    let a = (1.0 - level) / 2.0;
    Estimate {
        value,
        lo: quantile(&ratios, a),
        hi: quantile(&ratios, 1.0 - a),
    }
}

/// Direction of the alternative hypothesis of a permutation test, for `b` against `a`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alternative {
    /// `b` tends to be larger than `a` (for times: the candidate is slower).
    Greater,
    /// `b` tends to be smaller than `a`.
    Less,
    TwoSided,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PermutationResult {
    pub p: f64,
    /// Whether every split was enumerated (else a seeded Monte Carlo estimate).
    pub exact: bool,
    pub permutations: u64,
}

/// C(n, k), saturating.
pub fn binomial(n: u64, k: u64) -> u64 {
    let k = k.min(n - k.min(n));
    let mut r: u128 = 1;
    for i in 0..k {
        r = r * (n - i) as u128 / (i + 1) as u128;
        if r > u64::MAX as u128 {
            return u64::MAX;
        }
    }
    r as u64
}

/// The smallest p-value a permutation test of `n_a` against `n_b` values can produce.
pub fn smallest_p(n_a: usize, n_b: usize) -> f64 {
    1.0 / binomial((n_a + n_b) as u64, n_b as u64) as f64
}

/// The fewest repetitions per side for which the test can reach p < alpha at all.
pub fn min_reps_for_alpha(alpha: f64) -> usize {
    (1..)
        .find(|&n| smallest_p(n, n) < alpha)
        .unwrap_or(usize::MAX)
}

/// Permutation test of the difference of means `mean(b) − mean(a)`, treating the pooled
/// runs as exchangeable under the null hypothesis. Ties with the observed split count as
/// at least as extreme, so the p-value is never optimistic.
pub fn permutation_test(a: &[f64], b: &[f64], alt: Alternative) -> PermutationResult {
    assert!(
        !a.is_empty() && !b.is_empty(),
        "permutation test needs both samples"
    );
    let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    let n = pooled.len();
    let k = b.len();
    let total: f64 = pooled.iter().sum();
    // mean(b) − mean(a) as a function of the sum of the elements labelled "b".
    let stat = |sum_b: f64| sum_b / k as f64 - (total - sum_b) / (n - k) as f64;
    let observed = stat(b.iter().sum());
    let scale = pooled
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()))
        .max(1e-300);
    let eps = 1e-9 * scale;
    let extreme = |s: f64| match alt {
        Alternative::Greater => s >= observed - eps,
        Alternative::Less => s <= observed + eps,
        Alternative::TwoSided => s.abs() >= observed.abs() - eps,
    };
    let splits = binomial(n as u64, k as u64);
    if splits <= EXACT_LIMIT {
        let mut idx: Vec<usize> = (0..k).collect();
        let mut count = 0u64;
        loop {
            let s: f64 = idx.iter().map(|&i| pooled[i]).sum();
            if extreme(stat(s)) {
                count += 1;
            }
            // Next combination in lexicographic order.
            let mut i = k;
            loop {
                if i == 0 {
                    return PermutationResult {
                        p: count as f64 / splits as f64,
                        exact: true,
                        permutations: splits,
                    };
                }
                i -= 1;
                if idx[i] < n - k + i {
                    idx[i] += 1;
                    for j in i + 1..k {
                        idx[j] = idx[j - 1] + 1;
                    }
                    break;
                }
            }
        }
    }
    let mut rng = StdRng::seed_from_u64(SEED ^ 0xa5a5);
    let mut v = pooled.clone();
    let mut count = 0u64;
    for _ in 0..MONTE_CARLO_PERMUTATIONS {
        v.shuffle(&mut rng);
        if extreme(stat(v[..k].iter().sum())) {
            count += 1;
        }
    }
    let r = MONTE_CARLO_PERMUTATIONS as u64;
    PermutationResult {
        p: (count + 1) as f64 / (r + 1) as f64,
        exact: false,
        permutations: r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn basic_moments() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(mean(&x), 3.0);
        assert!(close(stddev(&x), 2.5f64.sqrt(), 1e-12));
        assert_eq!(median(&x), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(quantile(&x, 0.25), 2.0);
        assert_eq!(quantile(&x, 1.0), 5.0);
    }

    #[test]
    fn t_interval_known_answer() {
        // 1..5: mean 3, s = 1.5811, t(0.975, 4) = 2.776445 → half width 1.963243.
        let e = mean_ci_t(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95);
        assert!(close(e.lo, 3.0 - 1.963243, 1e-5), "{e:?}");
        assert!(close(e.hi, 3.0 + 1.963243, 1e-5), "{e:?}");
        // Two points: t(0.975, 1) = 12.7062; mean 1.5, s = 0.7071 → half 6.3531.
        let e = mean_ci_t(&[1.0, 2.0], 0.95);
        assert!(close(e.hi - e.value, 6.353102, 1e-4), "{e:?}");
    }

    #[test]
    fn bootstrap_median_interval_behaves() {
        let constant = [2.0; 6];
        assert_eq!(
            median_ci_bootstrap(&constant, 0.95),
            Estimate {
                value: 2.0,
                lo: 2.0,
                hi: 2.0
            }
        );
        let x = [9.8, 10.0, 10.1, 10.2, 10.4, 9.9, 10.3];
        let e = median_ci_bootstrap(&x, 0.95);
        assert_eq!(e.value, 10.1);
        assert!(e.lo <= e.value && e.value <= e.hi);
        assert!(e.lo >= 9.8 && e.hi <= 10.4);
        // Deterministic.
        assert_eq!(e, median_ci_bootstrap(&x, 0.95));
        // A large normal-ish sample: the interval narrows around the true median.
        let big: Vec<f64> = (0..401)
            .map(|i| 100.0 + ((i * 7919) % 401) as f64 / 40.0)
            .collect();
        let e = median_ci_bootstrap(&big, 0.95);
        assert!(e.hi - e.lo < 1.5, "{e:?}");
        assert!(close(e.value, 105.0, 1e-9));
    }

    #[test]
    fn ratio_interval() {
        let t1 = [10.0, 10.1, 9.9, 10.0, 10.05];
        let t4 = [2.5, 2.52, 2.48, 2.5, 2.51];
        let e = ratio_ci_bootstrap(&t1, &t4, 0.95);
        assert!(close(e.value, 4.0, 1e-9));
        assert!(
            e.lo < 4.0 && e.hi > 4.0 && e.lo > 3.8 && e.hi < 4.2,
            "{e:?}"
        );
    }

    #[test]
    fn binomials_and_smallest_p() {
        assert_eq!(binomial(10, 5), 252);
        assert_eq!(binomial(8, 4), 70);
        assert_eq!(binomial(5, 0), 1);
        assert_eq!(smallest_p(5, 5), 1.0 / 252.0);
        assert_eq!(min_reps_for_alpha(0.01), 5);
        assert_eq!(min_reps_for_alpha(0.05), 4);
    }

    #[test]
    fn permutation_complete_separation_is_one_over_c() {
        let a = [1.0, 1.01, 0.99, 1.02, 0.98];
        let b = [1.2, 1.21, 1.19, 1.22, 1.18];
        let r = permutation_test(&a, &b, Alternative::Greater);
        assert!(r.exact);
        assert_eq!(r.permutations, 252);
        assert!(close(r.p, 1.0 / 252.0, 1e-15), "{r:?}");
        // Two-sided doubles it (the mirrored split is as extreme).
        let r = permutation_test(&a, &b, Alternative::TwoSided);
        assert!(close(r.p, 2.0 / 252.0, 1e-15), "{r:?}");
        // Wrong direction: nothing is less extreme.
        let r = permutation_test(&a, &b, Alternative::Less);
        assert_eq!(r.p, 1.0);
    }

    #[test]
    fn permutation_identical_samples_not_significant() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let r = permutation_test(&a, &a, Alternative::Greater);
        assert!(r.p > 0.5, "{r:?}");
        let r = permutation_test(&a, &a, Alternative::TwoSided);
        assert_eq!(r.p, 1.0);
    }

    #[test]
    fn permutation_known_small_case() {
        // a = {1, 2}, b = {3, 4}: of C(4,2) = 6 splits only {3,4} has a sum ≥ 7 → p = 1/6.
        let r = permutation_test(&[1.0, 2.0], &[3.0, 4.0], Alternative::Greater);
        assert!(close(r.p, 1.0 / 6.0, 1e-15));
        // b = {2, 3}: splits with sum ≥ 5: {1,4},{2,3},{2,4},{3,4} → 4/6.
        let r = permutation_test(&[1.0, 4.0], &[2.0, 3.0], Alternative::Greater);
        assert!(close(r.p, 4.0 / 6.0, 1e-15));
    }

    #[test]
    fn permutation_monte_carlo_for_large_samples() {
        let a: Vec<f64> = (0..20).map(|i| 10.0 + (i % 5) as f64 * 0.01).collect();
        let b: Vec<f64> = (0..20).map(|i| 12.0 + (i % 5) as f64 * 0.01).collect();
        let r = permutation_test(&a, &b, Alternative::Greater);
        assert!(!r.exact);
        assert!(r.p < 0.001, "{r:?}");
        let r = permutation_test(&a, &a, Alternative::TwoSided);
        assert!(r.p > 0.5, "{r:?}");
    }
}
