//! `lockscale project`: predicts T(N) beyond the measured vCPU counts from a sweep's measured
//! points and lock statistics, per strategy, with a bootstrap band.
//!
//! The model (equations and assumptions in harness/README.md, "Projection") is mean value
//! analysis of a closed queueing network: the guest's N vCPU threads are the customers, guest
//! execution is a delay centre (each thread runs on its own core) and the BQL a single FCFS
//! server. A run is a fixed amount of work, so only the demands per run matter:
//!
//! - `t1`: the guest time at N = 1 (all work, serial and parallel);
//! - `lock`: the BQL hold time per run at N = 1 (the sum over the `bql.*` sites; needs the
//!   emulator's `--sync-profile`);
//! - `extra`: serial demand the hold times do not show (the guest's own serial phases, locks
//!   that are not profiled), fitted to the measured points with 2 ≤ N ≤ the fit limit;
//! - cross-vCPU flush jobs: `flush_hcalls` global flushes per run each queue one job on every
//!   other vCPU, so (N − 1) · flush_hcalls jobs of `flush_hold` seconds each, which the
//!   strategy routes under the BQL (baseline, per-cpu-lock) or only under the target's TLB lock
//!   (cputlb-no-bql), per docs/locking.md.
//!
//! The job graph bounds the customers (at most `units` compile jobs run at once) and the host's
//! cores bound the throughput: T(N) ≥ (all demand) / min(N, cores).

use std::fmt::Write;

use anyhow::{Result, bail};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::analysis::{LEVEL, analyze};
use crate::model::{BuildKind, ResultsFile, Run, RunStatus};
use crate::stats::{Estimate, median, quantile};

/// Bootstrap resamples of the band (each refits the model).
const BAND_RESAMPLES: usize = 400;

/// What to project and on which host.
#[derive(Clone, Copy, Debug)]
pub struct ProjectOptions {
    /// Largest N to predict.
    pub to: u32,
    /// Cores of the host the projection is for (default: `to`, a host that runs every N
    /// without oversubscription).
    pub cores: Option<u32>,
    /// Fit only on measured points with N ≤ this (default: the measuring host's cores).
    pub fit_max: Option<u32>,
}

/// Where a strategy runs the flush jobs one vCPU queues on another (docs/locking.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushRoute {
    /// A plain work item: under the BQL (baseline, per-cpu-lock).
    Bql,
    /// A no-BQL item under the target's own TLB lock (cputlb-no-bql): parallel work.
    TargetTlbLock,
}

impl FlushRoute {
    pub fn of(strategy: &str) -> FlushRoute {
        if strategy.rsplit(':').next() == Some("cputlb-no-bql") {
            FlushRoute::TargetTlbLock
        } else {
            FlushRoute::Bql
        }
    }

    fn text(self) -> &'static str {
        match self {
            FlushRoute::Bql => "BQL",
            FlushRoute::TargetTlbLock => "target TLB lock",
        }
    }
}

/// The fitted demands of one strategy, in seconds per run.
#[derive(Clone, Copy, Debug)]
pub struct Demands {
    pub t1: f64,
    pub lock: f64,
    pub extra: f64,
    /// Global flushes per run (each queues a job on every other vCPU).
    pub flush_hcalls: f64,
    /// Seconds one flush job takes.
    pub flush_hold: f64,
    pub route: FlushRoute,
    /// Most jobs the guest can run at once.
    pub parallelism: u32,
}

impl Demands {
    fn flush_work(&self, n: u32) -> f64 {
        (n.saturating_sub(1)) as f64 * self.flush_hcalls * self.flush_hold
    }

    /// Serial (BQL) demand per run at N.
    pub fn serial(&self, n: u32) -> f64 {
        self.lock
            + self.extra
            + if self.route == FlushRoute::Bql {
                self.flush_work(n)
            } else {
                0.0
            }
    }

    /// Parallel demand per run at N.
    pub fn parallel(&self, n: u32) -> f64 {
        (self.t1 - self.lock - self.extra).max(0.0)
            + if self.route == FlushRoute::TargetTlbLock {
                self.flush_work(n)
            } else {
                0.0
            }
    }

    /// The serial fraction at N = 1.
    pub fn serial_fraction(&self) -> f64 {
        (self.lock + self.extra) / self.t1
    }

    /// Predicted guest time at N vCPUs on a host with `cores` cores.
    pub fn predict(&self, n: u32, cores: u32) -> f64 {
        let n = n.max(1);
        let (z, d) = (self.parallel(n), self.serial(n));
        let customers = n.min(self.parallelism.max(1));
        mva_time(customers, z, d).max((z + d) / n.min(cores.max(1)) as f64)
    }
}

/// Exact MVA for `n` customers cycling through a delay centre of demand `z` and one FCFS
/// queue of demand `d`: the time to complete one run's worth of cycles, 1 / X(n).
pub fn mva_time(n: u32, z: f64, d: f64) -> f64 {
    let (mut queue, mut x) = (0.0, 0.0);
    for k in 1..=n.max(1) {
        let r = d * (1.0 + queue);
        x = k as f64 / (z + r);
        queue = x * r;
    }
    1.0 / x
}

/// One predicted point.
#[derive(Clone, Debug)]
pub struct Predicted {
    pub cpus: u32,
    pub time: Estimate,
    pub speedup: Estimate,
    /// Median measured guest time at this N, when the sweep has one.
    pub measured: Option<f64>,
    /// Whether this point was one the model was fitted on.
    pub fitted: bool,
}

/// The projection of one strategy.
#[derive(Clone, Debug)]
pub struct Projection {
    pub variant: String,
    pub demands: Demands,
    /// 95% band of the serial fraction.
    pub serial_fraction: Estimate,
    /// The measured N > 1 the model was fitted on.
    pub fitted_on: Vec<u32>,
    pub points: Vec<Predicted>,
    pub notes: Vec<String>,
}

/// All strategies of one file.
pub struct ProjectionSet {
    pub name: String,
    pub cores: u32,
    pub measured_on_cores: u32,
    pub fit_max: u32,
    pub projections: Vec<Projection>,
    /// Strategies the model could not fit, and why.
    pub refused: Vec<(String, String)>,
}

/// The measured inputs of one strategy.
struct Inputs {
    /// Per N = 1 run: (guest time, BQL hold seconds when profiled).
    base: Vec<(f64, Option<f64>)>,
    flush_hcalls: f64,
    flush_hold: Option<f64>,
    /// Measured (N, times) the fit uses.
    fit: Vec<(u32, Vec<f64>)>,
}

fn ok(r: &Run) -> bool {
    r.status == RunStatus::Ok && r.guest_elapsed_s.is_some_and(|t| t.is_finite() && t > 0.0)
}

fn locks(r: &Run) -> Option<&serde_json::Map<String, serde_json::Value>> {
    r.report
        .as_ref()?
        .get("locks")?
        .as_object()
        .filter(|m| !m.is_empty())
}

fn profiled(r: &Run) -> bool {
    r.report
        .as_ref()
        .and_then(|x| x.get("sync_profile"))
        .and_then(|x| x.as_bool())
        == Some(true)
}

fn site_field(
    l: &serde_json::Map<String, serde_json::Value>,
    site: &str,
    field: &str,
) -> Option<f64> {
    l.get(site)?.get(field)?.as_f64()
}

/// Total BQL hold of a profiled run, in seconds: every `bql.*` site is the one BQL.
fn bql_hold_s(r: &Run) -> Option<f64> {
    let l = locks(r)?;
    profiled(r).then(|| {
        l.iter()
            .filter(|(k, _)| k.starts_with("bql."))
            .filter_map(|(_, v)| v.get("hold_ns")?.as_f64())
            .sum::<f64>()
            / 1e9
    })
}

/// Seconds per acquisition of `site` over profiled runs (median), when it was taken.
fn hold_per_acquisition(runs: &[&Run], site: &str) -> Option<f64> {
    let v: Vec<f64> = runs
        .iter()
        .filter(|r| profiled(r))
        .filter_map(|r| {
            let l = locks(r)?;
            let (acq, hold) = (
                site_field(l, site, "acquisitions")?,
                site_field(l, site, "hold_ns")?,
            );
            (acq > 0.0 && hold > 0.0).then(|| hold / acq / 1e9)
        })
        .collect();
    (!v.is_empty()).then(|| median(&v))
}

fn inputs(file: &ResultsFile, variant: &str, fit_max: u32) -> Result<Inputs, String> {
    let runs: Vec<&Run> = file
        .runs
        .iter()
        .filter(|r| r.variant == variant && ok(r))
        .collect();
    let at1: Vec<&Run> = runs.iter().copied().filter(|r| r.cpus == 1).collect();
    if at1.is_empty() {
        return Err(
            "too few points: no successful run at N = 1 (the model is anchored on T(1))".into(),
        );
    }
    if !runs.iter().any(|r| locks(r).is_some()) {
        return Err("no lock statistics: no run report has a `locks` table (peers have none), so the serial demand cannot be placed".into());
    }
    let base: Vec<(f64, Option<f64>)> = at1
        .iter()
        .map(|r| (r.guest_elapsed_s.unwrap_or(0.0), bql_hold_s(r)))
        .collect();
    let flush: Vec<f64> = at1
        .iter()
        .filter_map(|r| {
            r.result
                .as_ref()?
                .counters
                .get("flush_hcalls")?
                .parse::<f64>()
                .ok()
        })
        .collect();
    let beyond1: Vec<&Run> = runs.iter().copied().filter(|r| r.cpus > 1).collect();
    let flush_hold = hold_per_acquisition(&beyond1, "bql.tlb_flush_item")
        .or_else(|| hold_per_acquisition(&at1, "tlb_lock.flush"));
    let mut fit: Vec<(u32, Vec<f64>)> = Vec::new();
    for r in runs
        .iter()
        .filter(|r| r.cpus > 1 && r.cpus <= fit_max && !r.oversubscribed)
    {
        match fit.iter_mut().find(|(n, _)| *n == r.cpus) {
            Some((_, v)) => v.push(r.guest_elapsed_s.unwrap_or(0.0)),
            None => fit.push((r.cpus, vec![r.guest_elapsed_s.unwrap_or(0.0)])),
        }
    }
    fit.sort_by_key(|p| p.0);
    let has_holds = base.iter().any(|b| b.1.is_some());
    if !has_holds && fit.is_empty() {
        let more = if fit_max < 2 {
            "or fit on measured N > 1 (raise --fit-max)".to_string()
        } else {
            format!("or measure some N in 2..={fit_max} within the host's cores")
        };
        return Err(format!(
            "too few points: only N = 1 to fit on and no BQL hold times (run the sweep with --emu-args \"--sync-profile\", {more})"
        ));
    }
    Ok(Inputs {
        base,
        flush_hcalls: if flush.is_empty() {
            0.0
        } else {
            median(&flush)
        },
        flush_hold,
        fit,
    })
}

/// Fits `extra` (least squares of log times over the fit points) given the rest.
fn fit_extra(d: &Demands, fit: &[(u32, f64)], cores: u32) -> f64 {
    let hi = (d.t1 - d.lock).max(0.0);
    if fit.is_empty() || hi == 0.0 {
        return 0.0;
    }
    let cost = |x: f64| -> f64 {
        let m = Demands { extra: x, ..*d };
        fit.iter()
            .map(|&(n, t)| (m.predict(n, cores).ln() - t.ln()).powi(2))
            .sum()
    };
    // A coarse grid finds the basin, golden-section search refines it.
    const GRID: usize = 200;
    let step = hi / GRID as f64;
    let best = (0..=GRID)
        .map(|i| i as f64 * step)
        .min_by(|a, b| cost(*a).total_cmp(&cost(*b)))
        .unwrap_or(0.0);
    let (mut a, mut b) = ((best - step).max(0.0), (best + step).min(hi));
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..60 {
        let (c, e) = (b - g * (b - a), a + g * (b - a));
        if cost(c) < cost(e) { b = e } else { a = c }
    }
    (a + b) / 2.0
}

fn demands_from(
    inp: &Inputs,
    base: &[(f64, Option<f64>)],
    fit: &[(u32, f64)],
    route: FlushRoute,
    parallelism: u32,
    measured_cores: u32,
) -> Demands {
    let t1 = median(&base.iter().map(|b| b.0).collect::<Vec<_>>());
    let holds: Vec<f64> = base.iter().filter_map(|b| b.1).collect();
    let lock = if holds.is_empty() {
        0.0
    } else {
        median(&holds).min(t1)
    };
    let mut d = Demands {
        t1,
        lock,
        extra: 0.0,
        flush_hcalls: inp.flush_hcalls,
        flush_hold: inp.flush_hold.unwrap_or(0.0),
        route,
        parallelism,
    };
    d.extra = fit_extra(&d, fit, measured_cores);
    d
}

/// The vCPU counts a projection lists: 1, 2, 4, then every 4 up to `to`, and every measured N.
fn listed_cpus(to: u32, measured: &[u32]) -> Vec<u32> {
    let mut v: Vec<u32> = [1, 2, 4]
        .into_iter()
        .chain((8..=to).step_by(4))
        .filter(|&n| n <= to)
        .collect();
    v.push(to);
    v.extend(measured.iter().copied().filter(|&n| n <= to));
    v.sort_unstable();
    v.dedup();
    v
}

fn band(value: f64, samples: &[f64]) -> Estimate {
    let a = (1.0 - LEVEL) / 2.0;
    if samples.is_empty() {
        return Estimate {
            value,
            lo: value,
            hi: value,
        };
    }
    Estimate {
        value,
        lo: quantile(samples, a).min(value),
        hi: quantile(samples, 1.0 - a).max(value),
    }
}

fn project_variant(
    file: &ResultsFile,
    variant: &str,
    opts: &ProjectOptions,
    cores: u32,
    fit_max: u32,
) -> Result<Projection, String> {
    let inp = inputs(file, variant, fit_max)?;
    let strategy = file.runs.iter().find_map(|r| {
        (r.variant == variant)
            .then(|| {
                r.report
                    .as_ref()?
                    .get("strategy")?
                    .as_str()
                    .map(String::from)
            })
            .flatten()
    });
    let route = FlushRoute::of(strategy.as_deref().unwrap_or(variant));
    let parallelism = file.workload.units.max(1);
    let measured_cores = file.host.logical_cores.max(1);
    let medians: Vec<(u32, f64)> = inp.fit.iter().map(|(n, t)| (*n, median(t))).collect();
    let d = demands_from(
        &inp,
        &inp.base,
        &medians,
        route,
        parallelism,
        measured_cores,
    );

    let an = analyze(file, None).map_err(|e| format!("{e:#}"))?;
    let measured: Vec<(u32, f64)> = an
        .variant_points(variant)
        .filter(|p| !p.times.is_empty())
        .map(|p| (p.cpus, median(&p.times)))
        .collect();
    let cpus = listed_cpus(opts.to, &measured.iter().map(|m| m.0).collect::<Vec<_>>());

    // Bootstrap: resample the N = 1 runs (time and hold together) and each fit point's runs, refit.
    let mut rng = StdRng::seed_from_u64(crate::stats::SEED ^ 0x9e37);
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(BAND_RESAMPLES); cpus.len()];
    let mut speedups: Vec<Vec<f64>> = vec![Vec::with_capacity(BAND_RESAMPLES); cpus.len()];
    let mut fractions = Vec::with_capacity(BAND_RESAMPLES);
    for _ in 0..BAND_RESAMPLES {
        let base: Vec<(f64, Option<f64>)> = (0..inp.base.len())
            .map(|_| inp.base[rng.random_range(0..inp.base.len())])
            .collect();
        let fit: Vec<(u32, f64)> = inp
            .fit
            .iter()
            .map(|(n, t)| {
                (
                    *n,
                    median(
                        &(0..t.len())
                            .map(|_| t[rng.random_range(0..t.len())])
                            .collect::<Vec<_>>(),
                    ),
                )
            })
            .collect();
        let b = demands_from(&inp, &base, &fit, route, parallelism, measured_cores);
        fractions.push(b.serial_fraction());
        for (i, &n) in cpus.iter().enumerate() {
            let t = b.predict(n, cores);
            times[i].push(t);
            speedups[i].push(b.t1 / t);
        }
    }
    let points = cpus
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let t = d.predict(n, cores);
            Predicted {
                cpus: n,
                time: band(t, &times[i]),
                speedup: band(d.t1 / t, &speedups[i]),
                measured: measured.iter().find(|m| m.0 == n).map(|m| m.1),
                fitted: n == 1 || inp.fit.iter().any(|f| f.0 == n),
            }
        })
        .collect();
    let mut notes = Vec::new();
    if inp.base.iter().all(|b| b.1.is_none()) {
        notes.push("no BQL hold times (runs not --sync-profile'd): the whole serial demand is fitted to the measured points".into());
    }
    if inp.flush_hold.is_none() && d.flush_hcalls > 0.0 {
        notes.push("flush jobs' duration unknown (not profiled): counted as 0 s, their cost falls into the fitted serial demand".into());
    }
    if inp.fit.is_empty() {
        notes.push("no measured N > 1 to fit on: serial demand = the BQL hold time alone".into());
    }
    Ok(Projection {
        variant: variant.to_string(),
        demands: d,
        serial_fraction: band(d.serial_fraction(), &fractions),
        fitted_on: inp.fit.iter().map(|f| f.0).collect(),
        points,
        notes,
    })
}

/// Projects every strategy of `file`; refuses when none can be fitted.
pub fn project(file: &ResultsFile, opts: &ProjectOptions) -> Result<ProjectionSet> {
    if opts.to < 1 {
        bail!("--to must be at least 1");
    }
    let cores = opts.cores.unwrap_or(opts.to).max(1);
    let fit_max = opts.fit_max.unwrap_or(file.host.logical_cores).max(1);
    let mut projections = Vec::new();
    let mut refused = Vec::new();
    for v in crate::analysis::variant_order(file) {
        if file
            .builds
            .get(&v)
            .is_some_and(|b| b.kind == BuildKind::Peer)
        {
            refused.push((v, "a peer: no lock statistics".to_string()));
            continue;
        }
        match project_variant(file, &v, opts, cores, fit_max) {
            Ok(p) => projections.push(p),
            Err(why) => refused.push((v, why)),
        }
    }
    if projections.is_empty() {
        let why: Vec<String> = refused.iter().map(|(v, w)| format!("{v}: {w}")).collect();
        bail!(
            "{}: the model cannot be fitted to any strategy ({})",
            file.name,
            if why.is_empty() {
                "no runs".into()
            } else {
                why.join("; ")
            }
        );
    }
    Ok(ProjectionSet {
        name: file.name.clone(),
        cores,
        measured_on_cores: file.host.logical_cores,
        fit_max,
        projections,
        refused,
    })
}

fn ms(s: f64) -> String {
    format!("{:.1}", s * 1e3)
}

/// The markdown tables of `lockscale project` (and of `report --project`).
pub fn render(set: &ProjectionSet) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Projection (model: harness/README.md, \"Projection\"): measured on {} cores, fitted on N ≤ {}, projected for a host of {} cores; \
         bands are 95% bootstrap intervals over the repetitions (they do not include the model's own error).\n",
        set.measured_on_cores, set.fit_max, set.cores
    );
    let _ = writeln!(
        s,
        "| variant | serial fraction | 95% band | T(1) s | BQL hold ms | fitted extra serial ms | flush jobs per extra vCPU | flush job µs | flush route | fitted on N |"
    );
    let _ = writeln!(s, "|---|---:|---|---:|---:|---:|---:|---:|---|---|");
    for p in &set.projections {
        let d = &p.demands;
        let _ = writeln!(
            s,
            "| {} | {:.4} | {:.4} … {:.4} | {:.3} | {} | {} | {:.0} | {:.2} | {} | {} |",
            p.variant,
            p.serial_fraction.value,
            p.serial_fraction.lo,
            p.serial_fraction.hi,
            d.t1,
            ms(d.lock),
            ms(d.extra),
            d.flush_hcalls,
            d.flush_hold * 1e6,
            d.route.text(),
            if p.fitted_on.is_empty() {
                "1".to_string()
            } else {
                format!(
                    "1, {}",
                    p.fitted_on
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    }
    let _ = writeln!(
        s,
        "\n| variant | N | measured s | projected s | 95% band | projected speedup | 95% band | error vs measured |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---|---:|---|---:|");
    for p in &set.projections {
        for q in &p.points {
            let (meas, err) = match q.measured {
                Some(m) => (
                    format!("{m:.4}"),
                    format!(
                        "{:+.1}%{}",
                        (q.time.value / m - 1.0) * 100.0,
                        if q.fitted { " (fitted)" } else { "" }
                    ),
                ),
                None => ("–".into(), "–".into()),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {meas} | {:.4} | {:.4} … {:.4} | {:.2} | {:.2} … {:.2} | {err} |",
                p.variant,
                q.cpus,
                q.time.value,
                q.time.lo,
                q.time.hi,
                q.speedup.value,
                q.speedup.lo,
                q.speedup.hi
            );
        }
    }
    // A note shared by several strategies is printed once, naming them all.
    let mut notes: Vec<(&str, Vec<&str>)> = Vec::new();
    for p in &set.projections {
        for n in &p.notes {
            match notes.iter_mut().find(|x| x.0 == n) {
                Some(x) => x.1.push(&p.variant),
                None => notes.push((n, vec![&p.variant])),
            }
        }
    }
    for (n, who) in notes {
        let _ = writeln!(s, "\nNote ({}): {n}", who.join(", "));
    }
    for (v, why) in &set.refused {
        let _ = writeln!(s, "\nNot projected: {v}: {why}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amdahl_free(t1: f64, s: f64) -> Demands {
        Demands {
            t1,
            lock: s * t1,
            extra: 0.0,
            flush_hcalls: 0.0,
            flush_hold: 0.0,
            route: FlushRoute::Bql,
            parallelism: 1000,
        }
    }

    #[test]
    fn mva_limits() {
        // One customer: the sum of the demands; many: the bottleneck's demand.
        assert!((mva_time(1, 0.9, 0.1) - 1.0).abs() < 1e-12);
        assert!((mva_time(1000, 0.9, 0.1) - 0.1).abs() < 1e-3);
        // No queue: perfect scaling.
        assert!((mva_time(8, 1.0, 0.0) - 0.125).abs() < 1e-12);
        // Between the asymptotic bounds max(D, (Z + D)/N) and Amdahl's D + Z/N.
        for n in 2..20 {
            let t = mva_time(n, 0.9, 0.1);
            assert!(
                t >= (1.0f64 / n as f64).max(0.1) - 1e-12 && t <= 0.1 + 0.9 / n as f64 + 1e-12,
                "n={n} t={t}"
            );
        }
    }

    #[test]
    fn cores_and_job_graph_bound_the_speedup() {
        let d = amdahl_free(10.0, 0.0);
        assert!((d.predict(8, 64) - 1.25).abs() < 1e-9);
        assert!((d.predict(8, 2) - 5.0).abs() < 1e-9, "2 cores: at best 2x");
        let d = Demands {
            parallelism: 4,
            ..d
        };
        assert!(
            (d.predict(8, 64) - 2.5).abs() < 1e-9,
            "4 jobs at once: at best 4x"
        );
    }

    #[test]
    fn flush_jobs_load_the_bql_only_where_the_strategy_routes_them() {
        let d = Demands {
            flush_hcalls: 1000.0,
            flush_hold: 1e-4,
            ..amdahl_free(2.0, 0.05)
        };
        let bql = Demands {
            route: FlushRoute::Bql,
            ..d
        };
        let own = Demands {
            route: FlushRoute::TargetTlbLock,
            ..d
        };
        assert!((bql.serial(5) - (0.1 + 0.4)).abs() < 1e-9);
        assert!((own.serial(5) - 0.1).abs() < 1e-9);
        assert!(bql.predict(16, 64) > own.predict(16, 64));
        assert_eq!(
            FlushRoute::of("base:cputlb-no-bql"),
            FlushRoute::TargetTlbLock
        );
        assert_eq!(FlushRoute::of("per-cpu-lock"), FlushRoute::Bql);
    }

    #[test]
    fn fit_recovers_the_extra_serial_demand() {
        let truth = Demands {
            extra: 0.3,
            ..amdahl_free(3.0, 0.05)
        };
        let fit: Vec<(u32, f64)> = [2, 4, 8]
            .iter()
            .map(|&n| (n, truth.predict(n, 64)))
            .collect();
        let x = fit_extra(
            &Demands {
                extra: 0.0,
                ..truth
            },
            &fit,
            64,
        );
        assert!((x - 0.3).abs() < 1e-4, "{x}");
    }
}
