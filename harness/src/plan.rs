//! The run plan of a sweep: which (variant, N, repetition) runs, in which order, and how the
//! plan splits into shares for several hosts.
//!
//! Runs are interleaved: repetition-major, and within each round the variants take turns in an
//! order that rotates from one N to the next. Slow drift of the host (thermal state, other
//! load) then hits every variant alike instead of biasing whichever ran last.

use anyhow::{Result, bail};

use crate::model::Share;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedRun {
    /// Position in the full plan, 1-based.
    pub seq: u32,
    /// The (variant, N) point this run belongs to, 1-based (see [`points`]).
    pub point: u32,
    pub variant: String,
    pub cpus: u32,
    pub rep: u32,
}

/// The points of a sweep, numbered from 1: by N, then by variant order.
pub fn points(variants: &[String], cpus: &[u32]) -> Vec<(u32, String, u32)> {
    let mut v = Vec::new();
    for &n in cpus {
        for var in variants {
            v.push((v.len() as u32 + 1, var.clone(), n));
        }
    }
    v
}

/// The full interleaved plan.
pub fn plan(variants: &[String], cpus: &[u32], reps: u32) -> Vec<PlannedRun> {
    let nv = variants.len();
    let mut out = Vec::new();
    for rep in 1..=reps {
        for (ci, &n) in cpus.iter().enumerate() {
            for k in 0..nv {
                let vi = (k + rep as usize - 1 + ci) % nv;
                let point = (ci * nv + vi) as u32 + 1;
                out.push(PlannedRun {
                    seq: out.len() as u32 + 1,
                    point,
                    variant: variants[vi].clone(),
                    cpus: n,
                    rep,
                });
            }
        }
    }
    out
}

/// Whether `point` belongs to `share`: points are dealt round-robin, so each share gets a mix
/// of variants and vCPU counts and every point's repetitions stay on one host.
pub fn in_share(point: u32, share: Option<Share>) -> bool {
    match share {
        None => true,
        Some(s) => (point - 1) % s.count == s.index - 1,
    }
}

/// Parses `I/K` (1 ≤ I ≤ K).
pub fn parse_share(s: &str) -> Result<Share> {
    let Some((i, k)) = s.split_once('/') else {
        bail!("--only takes I/K, e.g. 2/4 for the second of four shares; got {s:?}");
    };
    let (Ok(index), Ok(count)) = (i.trim().parse::<u32>(), k.trim().parse::<u32>()) else {
        bail!("--only takes two numbers I/K; got {s:?}");
    };
    if count == 0 || index == 0 || index > count {
        bail!("--only {s}: need 1 ≤ I ≤ K");
    }
    Ok(Share { index, count })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vec<String> {
        ["a", "b", "c"].iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plan_is_interleaved_and_complete() {
        let p = plan(&vars(), &[1, 2], 3);
        assert_eq!(p.len(), 18);
        // Every (variant, N, rep) exactly once.
        let mut keys: Vec<_> = p
            .iter()
            .map(|r| (r.variant.clone(), r.cpus, r.rep))
            .collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 18);
        // Repetition-major: all of rep 1 before any of rep 2.
        assert!(p[..6].iter().all(|r| r.rep == 1));
        // Rotation: the first variant of each round changes.
        let firsts: Vec<_> = p.chunks(3).map(|c| c[0].variant.clone()).collect();
        assert_eq!(firsts, ["a", "b", "b", "c", "c", "a"]);
        assert_eq!(
            p.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (1..=18).collect::<Vec<_>>()
        );
        // Point numbers agree with points().
        let pts = points(&vars(), &[1, 2]);
        for r in &p {
            let (_, v, n) = &pts[r.point as usize - 1];
            assert_eq!((v, *n), (&r.variant, r.cpus));
        }
    }

    #[test]
    fn shares_partition_points() {
        let pts = points(&vars(), &[1, 2, 4]);
        for k in 1..=4 {
            let mut seen = 0;
            for i in 1..=k {
                let s = Some(Share { index: i, count: k });
                seen += pts.iter().filter(|(p, _, _)| in_share(*p, s)).count();
            }
            assert_eq!(seen, pts.len());
        }
        assert!(parse_share("2/4").is_ok());
        assert!(parse_share("5/4").is_err());
        assert!(parse_share("0/4").is_err());
        assert!(parse_share("x").is_err());
    }
}
