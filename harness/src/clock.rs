//! Virtual host time on the harness side (the emulator side: emulator/src/sync/vclock/).
//!
//! `ppc64emu --clock virtual` measures the guest on per-vCPU virtual clocks that advance by
//! each vCPU thread's CPU time, as if every vCPU had a host core of its own; its run report
//! says so (`"clock": {"kind": "virtual", "quantum_ns": …}`) and adds per vCPU `virtual_ns`
//! and `cpu_ns`, and per lock site `virtual_wait_ns`. This module holds what the harness does
//! with that: parsing and checking `--clock`/`--quantum`, the emulator arguments, the clock of
//! each run, the labels of plots, charts and reports, the refusal to mix a virtual-time sweep
//! with a host-time one, and the virtual waits per lock site.
//!
//! Peers (qemu-style emulators) always run on host time: their runs record `{"kind": "host"}`.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Result, bail};

use crate::analysis::median_opt;
use crate::model::{BuildKind, Clock, ClockKind, ResultsFile, Run, RunStatus};
use crate::plot::PlotSeries;

/// How virtual points and sweeps are labelled in plots, charts and reports.
pub const VIRTUAL_LABEL: &str = "virtual host: one core per vCPU";
/// How host-time points and sweeps are labelled.
pub const HOST_LABEL: &str = "host time";
/// The largest quantum `--quantum` accepts (one second), as the emulator does.
pub const MAX_QUANTUM_NS: u64 = 1_000_000_000;

/// The largest line cost `--line-cost` accepts (100 µs), as the emulator does.
pub const MAX_LINE_COST_NS: u64 = 100_000;

/// Parses `--quantum DURATION`: a number and a unit (`ns`, `us` or `µs`, `ms`, `s`), e.g.
/// `500us`, `2ms`, `1000000ns`, `0.5ms`; above 0 and at most one second (whole nanoseconds).
/// Used as clap's value parser, so the error names the option and exits 2 before anything runs.
pub fn parse_quantum(s: &str) -> Result<u64, String> {
    let v = s.trim();
    if v.starts_with('-') {
        return Err(format!("{v:?} is negative: the quantum must be above 0"));
    }
    if let Ok(x) = v.parse::<f64>() {
        // A bare number: say what is wrong with its value first (`--quantum 0`).
        if x < 0.0 {
            return Err(format!("{v:?} is negative: the quantum must be above 0"));
        }
        if x == 0.0 {
            return Err(format!("{v:?}: the quantum must be above 0"));
        }
    }
    let ns = parse_duration(v)?;
    if ns == 0 {
        return Err(format!("{v:?}: the quantum must be above 0"));
    }
    if ns > MAX_QUANTUM_NS {
        return Err(format!("{v:?}: the quantum must be at most 1 s"));
    }
    Ok(ns)
}

/// Parses `--line-cost DURATION` (as `--quantum`): 0 to 100 µs.
pub fn parse_line_cost(s: &str) -> Result<u64, String> {
    let v = s.trim();
    if v == "0" {
        return Ok(0);
    }
    let ns = parse_duration(v)?;
    if ns > MAX_LINE_COST_NS {
        return Err(format!("{v:?}: the line cost must be at most 100 us"));
    }
    Ok(ns)
}

/// A non-negative duration with a unit, in whole nanoseconds.
fn parse_duration(v: &str) -> Result<u64, String> {
    let Some(split) = v.find(|c: char| c.is_alphabetic()) else {
        return Err(format!(
            "{v:?} has no unit: give a duration such as 500us, 2ms or 1000000ns (units ns, us, ms, s)"
        ));
    };
    let (num, unit) = v.split_at(split);
    let x: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{num:?} is not a number (e.g. 500us, 2ms)"))?;
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        u => return Err(format!("unknown unit {u:?} (ns, us, ms or s)")),
    };
    let ns = x * scale;
    if !ns.is_finite() {
        return Err(format!("{v:?} is not a duration"));
    }
    if ns < 0.0 {
        return Err(format!("{v:?} is negative"));
    }
    if ns.round() > u64::MAX as f64 / 2.0 {
        return Err(format!("{v:?} is too long"));
    }
    Ok(ns.round() as u64)
}

/// The clock of a sweep from `--clock`, `--quantum` and `--line-cost` (already parsed by clap).
pub fn from_args(
    kind: Option<ClockKind>,
    quantum_ns: Option<u64>,
    line_cost_ns: Option<u64>,
) -> Result<Clock> {
    let kind = kind.unwrap_or_default();
    if let Some(l) = line_cost_ns
        && kind != ClockKind::Virtual
    {
        bail!(
            "--line-cost {} needs --clock virtual: host-time runs pay the host's own costs",
            format_ns(l)
        );
    }
    if let Some(q) = quantum_ns {
        if kind != ClockKind::Virtual {
            bail!(
                "--quantum {} needs --clock virtual: host-time runs have no quantum",
                format_ns(q)
            );
        }
        if q == 0 || q > MAX_QUANTUM_NS {
            bail!("--quantum must be above 0 and at most 1 s");
        }
    }
    Ok(Clock {
        kind,
        quantum_ns,
        line_cost_ns,
    })
}

/// `--emu-args` may not choose the clock: the harness must know it to record and label it.
pub fn check_emu_args(args: &str) -> Result<()> {
    for a in args.split_whitespace() {
        let name = a.split('=').next().unwrap_or(a);
        if name == "--clock" || name == "--quantum" || name == "--line-cost" {
            bail!(
                "--emu-args {a:?}: give the clock to lockscale (`--clock virtual [--quantum D]`), \
                 not to the emulator directly, so that the results record it"
            );
        }
    }
    Ok(())
}

/// The arguments that select `clock` on our emulator. Host time is the emulator's default and
/// gets none, so that emulators older than `--clock` still run host-time sweeps.
pub fn emulator_args(clock: &Clock) -> Vec<String> {
    match clock.kind {
        ClockKind::Host => Vec::new(),
        ClockKind::Virtual => {
            let mut v = vec!["--clock".to_string(), "virtual".to_string()];
            if let Some(q) = clock.quantum_ns {
                v.push("--quantum".into());
                v.push(format!("{q}ns"));
            }
            if let Some(l) = clock.line_cost_ns {
                v.push("--line-cost".into());
                v.push(format!("{l}ns"));
            }
            v
        }
    }
}

/// The clock a run of an emulator of this kind is asked to run on: peers stay on host time.
pub fn asked_for(sweep: &Clock, kind: BuildKind) -> Clock {
    match kind {
        BuildKind::Ours => *sweep,
        BuildKind::Peer => Clock::default(),
    }
}

/// `500 µs`, `2 ms`, `1 s`, `750 ns`.
pub fn format_ns(ns: u64) -> String {
    let (v, unit) = if ns >= 1_000_000_000 {
        (ns as f64 / 1e9, "s")
    } else if ns >= 1_000_000 {
        (ns as f64 / 1e6, "ms")
    } else if ns >= 1_000 {
        (ns as f64 / 1e3, "µs")
    } else {
        (ns as f64, "ns")
    };
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {unit}")
}

/// `host time`, or `virtual host: one core per vCPU (quantum 500 µs)`, with `, line cost
/// 100 ns` where one is charged.
pub fn describe(clock: &Clock) -> String {
    let line = match line_cost(clock) {
        0 => String::new(),
        l => format!(", line cost {}", format_ns(l)),
    };
    match (clock.kind, clock.quantum_ns) {
        (ClockKind::Host, _) => HOST_LABEL.into(),
        (ClockKind::Virtual, Some(q)) => {
            format!("{VIRTUAL_LABEL} (quantum {}{line})", format_ns(q))
        }
        (ClockKind::Virtual, None) => {
            format!("{VIRTUAL_LABEL} (the emulator's default quantum{line})")
        }
    }
}

/// The line cost a clock charges (absent: none).
pub fn line_cost(clock: &Clock) -> u64 {
    clock.line_cost_ns.unwrap_or(0)
}

/// The `clock` of a run report: `None` when the report has none (an emulator older than
/// virtual time), `Some(Err)` when it is not one this harness knows.
pub fn from_report(report: &serde_json::Value) -> Option<Result<Clock, String>> {
    let c = report.get("clock")?;
    Some(
        serde_json::from_value::<Clock>(c.clone())
            .map_err(|e| format!("the run report's clock {c} is not one lockscale knows: {e}")),
    )
}

/// Records the clock a run ran on and fails the run when the emulator did not run on the clock
/// asked for (its guest time would be on another clock than the sweep's). The run report is
/// optional: without one, or without a `clock` in it, the run is taken to have run as asked.
/// A run on virtual time is never oversubscribed.
pub fn settle_run(run: &mut Run, asked: Clock) {
    let reported = run.report.as_ref().and_then(from_report);
    let mismatch = match reported {
        None => {
            run.clock = asked;
            None
        }
        Some(Err(e)) => {
            run.clock = asked;
            Some(e)
        }
        Some(Ok(c)) => {
            run.clock = c;
            if c.kind != asked.kind {
                Some(format!(
                    "the run report says the guest ran on {}, but the sweep asked for {}",
                    describe(&c),
                    describe(&asked)
                ))
            } else if let (Some(a), Some(r)) = (asked.quantum_ns, c.quantum_ns)
                && a != r
            {
                Some(format!(
                    "the run report says quantum {}, but the sweep asked for {}",
                    format_ns(r),
                    format_ns(a)
                ))
            } else if asked.kind == ClockKind::Virtual && line_cost(&asked) != line_cost(&c) {
                Some(format!(
                    "the run report says line cost {}, but the sweep asked for {} \
                     (an emulator without --line-cost?)",
                    format_ns(line_cost(&c)),
                    format_ns(line_cost(&asked))
                ))
            } else {
                None
            }
        }
    };
    if run.clock.kind == ClockKind::Virtual {
        run.oversubscribed = false;
    }
    if let Some(why) = mismatch
        && run.status == RunStatus::Ok
    {
        run.status = RunStatus::Failed;
        run.reason = Some(why);
    }
}

fn is_peer(file: &ResultsFile, variant: &str) -> bool {
    file.builds.get(variant).map(|b| b.kind) == Some(BuildKind::Peer)
}

/// The clocks our emulator's runs of a file ran on (peers left out, as they are always on host
/// time); a file with no runs yet has its config's, one with peers' runs only host time.
pub fn kinds_of(file: &ResultsFile) -> BTreeSet<ClockKind> {
    if file.runs.is_empty() {
        return BTreeSet::from([file.config.clock.kind]);
    }
    let kinds: BTreeSet<ClockKind> = file
        .runs
        .iter()
        .filter(|r| !is_peer(file, &r.variant))
        .map(|r| r.clock.kind)
        .collect();
    if kinds.is_empty() {
        BTreeSet::from([ClockKind::Host])
    } else {
        kinds
    }
}

/// The quanta (ns) the virtual runs of a file ran with, as their reports (or the config) say.
pub fn quanta_of(file: &ResultsFile) -> BTreeSet<u64> {
    file.runs
        .iter()
        .filter(|r| r.clock.kind == ClockKind::Virtual)
        .filter_map(|r| r.clock.quantum_ns)
        .chain(file.config.clock.quantum_ns)
        .collect()
}

/// The line costs (ns) the virtual runs of a file ran with (0 where none was charged).
pub fn line_costs_of(file: &ResultsFile) -> BTreeSet<u64> {
    file.runs
        .iter()
        .filter(|r| r.clock.kind == ClockKind::Virtual)
        .map(|r| line_cost(&r.clock))
        .chain(
            (file.config.clock.kind == ClockKind::Virtual).then(|| line_cost(&file.config.clock)),
        )
        .collect()
}

fn line_costs_text(l: &BTreeSet<u64>) -> String {
    l.iter()
        .map(|&n| format_ns(n))
        .collect::<Vec<_>>()
        .join(", ")
}

fn kinds_text(k: &BTreeSet<ClockKind>) -> String {
    k.iter()
        .map(|k| match k {
            ClockKind::Host => HOST_LABEL.to_string(),
            ClockKind::Virtual => format!("virtual time ({VIRTUAL_LABEL})"),
        })
        .collect::<Vec<_>>()
        .join(" and ")
}

fn quanta_text(q: &BTreeSet<u64>) -> String {
    if q.is_empty() {
        "the emulator's default".into()
    } else {
        q.iter()
            .map(|&n| format_ns(n))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One line on the clock(s) of a file, for `report` and plot notes: `host time`,
/// `virtual host: one core per vCPU (quantum 500 µs); qemu on host time (peers stay on it)`.
pub fn describe_file(file: &ResultsFile) -> String {
    let kinds = kinds_of(file);
    let mut s = if kinds.len() > 1 {
        format!(
            "mixed: {} (merged with --allow-mixed-clocks)",
            kinds_text(&kinds)
        )
    } else if kinds.contains(&ClockKind::Virtual) {
        let q = quanta_of(file);
        let l = line_costs_of(file);
        let line = if l.iter().all(|&n| n == 0) {
            String::new()
        } else {
            format!(", line cost {}", line_costs_text(&l))
        };
        format!(
            "{VIRTUAL_LABEL}, guest times on per-vCPU virtual clocks (quantum {}{line})",
            quanta_text(&q)
        )
    } else {
        HOST_LABEL.to_string()
    };
    if kinds.contains(&ClockKind::Virtual) {
        let peers: Vec<String> = crate::analysis::variant_order(file)
            .into_iter()
            .filter(|v| is_peer(file, v))
            .collect();
        if !peers.is_empty() {
            s.push_str(&format!(
                "; {} on {HOST_LABEL} (peers do not run on virtual time)",
                peers.join(", ")
            ));
        }
    }
    s
}

/// `Clock: …` for the markdown of `compare` and `gate`: one clock, or each file's.
pub fn clock_line(a: &ResultsFile, b: &ResultsFile) -> String {
    let (da, db) = (describe_file(a), describe_file(b));
    if da == db {
        format!("Clock: {da}.")
    } else {
        format!("Clocks: {da} (`{}`); {db} (`{}`).", a.name, b.name)
    }
}

/// Refuses to put a virtual-time sweep beside a host-time one (`compare`, `gate`, `merge`)
/// unless `allow` (`--allow-mixed-clocks`); when allowed, or when only the quanta differ,
/// returns a note to print.
pub fn check_mix(a: &ResultsFile, b: &ResultsFile, allow: bool) -> Result<Option<String>> {
    let (ka, kb) = (kinds_of(a), kinds_of(b));
    if ka != kb {
        let what = format!(
            "{} ran on {} and {} on {}",
            a.name,
            kinds_text(&ka),
            b.name,
            kinds_text(&kb)
        );
        if !allow {
            bail!(
                "{what}: their guest times are on different clocks and not comparable \
                 (pass --allow-mixed-clocks to go on anyway)"
            );
        }
        return Ok(Some(format!("mixed clocks (--allow-mixed-clocks): {what}")));
    }
    if ka.contains(&ClockKind::Virtual) {
        let (qa, qb) = (quanta_of(a), quanta_of(b));
        if qa != qb {
            return Ok(Some(format!(
                "different quanta of virtual time: {} in {}, {} in {}",
                quanta_text(&qa),
                a.name,
                quanta_text(&qb),
                b.name
            )));
        }
        let (la, lb) = (line_costs_of(a), line_costs_of(b));
        if la != lb {
            return Ok(Some(format!(
                "different line costs of virtual time: {} in {}, {} in {}",
                line_costs_text(&la),
                a.name,
                line_costs_text(&lb),
                b.name
            )));
        }
    }
    Ok(None)
}

/// Appends ` (virtual)` / ` (host time)` to the labels of measured series when a plot shows
/// both clocks, so that every curve says which it is.
pub fn label_mixed(series: &mut [PlotSeries]) {
    let m: Vec<bool> = series
        .iter()
        .filter(|s| s.is_measured())
        .map(|s| s.virtual_time)
        .collect();
    if !(m.contains(&true) && m.contains(&false)) {
        return;
    }
    for s in series.iter_mut().filter(|s| s.is_measured()) {
        s.label.push_str(if s.virtual_time {
            " (virtual)"
        } else {
            " (host time)"
        });
    }
}

/// Which clock a plot's measured curves show, for its title and legend; `None` without any.
pub fn caption(series: &[PlotSeries]) -> Option<String> {
    let m: Vec<bool> = series
        .iter()
        .filter(|s| s.is_measured())
        .map(|s| s.virtual_time)
        .collect();
    if m.is_empty() {
        None
    } else if m.iter().all(|&v| v) {
        Some(format!("clock: {VIRTUAL_LABEL}"))
    } else if m.iter().all(|&v| !v) {
        Some(format!("clock: {HOST_LABEL}"))
    } else {
        Some(format!("clocks: (virtual) = {VIRTUAL_LABEL}"))
    }
}

/// Virtual time of one run: per lock site the virtual wait (ns), and per vCPU the virtual and
/// host CPU time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VirtualUsage {
    pub waits: BTreeMap<String, f64>,
    /// Virtual hold per site (ns), where the report has it (`virtual_hold_ns`).
    pub holds: BTreeMap<String, f64>,
    /// Acquisitions per site, where the report has them.
    pub acquisitions: BTreeMap<String, f64>,
    pub virtual_ns: f64,
    pub cpu_ns: f64,
    pub vcpus: usize,
}

/// Reads a virtual run's report: `locks.<site>.virtual_wait_ns`, or where the lock sites lack
/// it, the sum over `vcpus[].virtual_wait_ns.<site>`; `vcpus[].virtual_ns` and `cpu_ns`.
/// `None` for host-time runs and reports without virtual time.
pub fn virtual_usage(run: &Run) -> Option<VirtualUsage> {
    if run.clock.kind != ClockKind::Virtual {
        return None;
    }
    let rep = run.report.as_ref()?;
    let mut u = VirtualUsage::default();
    if let Some(locks) = rep.get("locks").and_then(|l| l.as_object()) {
        for (site, c) in locks {
            if let Some(w) = c.get("virtual_wait_ns").and_then(|x| x.as_f64()) {
                u.waits.insert(site.clone(), w);
            }
            if let Some(h) = c.get("virtual_hold_ns").and_then(|x| x.as_f64()) {
                u.holds.insert(site.clone(), h);
            }
            if let Some(a) = c.get("acquisitions").and_then(|x| x.as_f64()) {
                u.acquisitions.insert(site.clone(), a);
            }
        }
    }
    let from_vcpus = u.waits.is_empty();
    for v in rep
        .get("vcpus")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
    {
        u.vcpus += 1;
        u.virtual_ns += v.get("virtual_ns").and_then(|x| x.as_f64()).unwrap_or(0.0);
        u.cpu_ns += v.get("cpu_ns").and_then(|x| x.as_f64()).unwrap_or(0.0);
        if from_vcpus && let Some(m) = v.get("virtual_wait_ns").and_then(|m| m.as_object()) {
            for (site, w) in m {
                *u.waits.entry(site.clone()).or_default() += w.as_f64().unwrap_or(0.0);
            }
        }
    }
    (!u.waits.is_empty() || u.virtual_ns > 0.0).then_some(u)
}

/// One lock site of a point by virtual wait: medians over the runs.
#[derive(Clone, Debug, PartialEq)]
pub struct VirtualWaitRow {
    pub site: String,
    pub acquisitions: Option<f64>,
    /// Virtual wait of all vCPUs together per run, ns.
    pub wait_ns: f64,
    /// Virtual time the lock was held from the site per run, ns, when the reports say.
    pub hold_ns: Option<f64>,
    /// That wait as a share of the vCPUs' virtual time together (0..1), when known.
    pub share: Option<f64>,
}

/// Per lock site of a point's runs the median virtual wait, largest first; with the median
/// virtual and host CPU time per vCPU (ns) of those runs.
pub fn virtual_wait_rows(runs: &[&Run]) -> (Vec<VirtualWaitRow>, Option<(f64, f64)>) {
    let usages: Vec<VirtualUsage> = runs.iter().filter_map(|r| virtual_usage(r)).collect();
    let sites: BTreeSet<&String> = usages.iter().flat_map(|u| u.waits.keys()).collect();
    let mut rows: Vec<VirtualWaitRow> = sites
        .into_iter()
        .map(|site| {
            let waits: Vec<f64> = usages
                .iter()
                .map(|u| u.waits.get(site).copied().unwrap_or(0.0))
                .collect();
            let shares: Vec<f64> = usages
                .iter()
                .filter(|u| u.virtual_ns > 0.0)
                .map(|u| u.waits.get(site).copied().unwrap_or(0.0) / u.virtual_ns)
                .collect();
            let acq: Vec<f64> = usages
                .iter()
                .filter_map(|u| u.acquisitions.get(site).copied())
                .collect();
            let holds: Vec<f64> = usages
                .iter()
                .filter_map(|u| u.holds.get(site).copied())
                .collect();
            VirtualWaitRow {
                site: site.clone(),
                acquisitions: median_opt(&acq),
                wait_ns: median_opt(&waits).unwrap_or(0.0),
                hold_ns: median_opt(&holds),
                share: median_opt(&shares),
            }
        })
        .filter(|r| r.wait_ns > 0.0)
        .collect();
    rows.sort_by(|a, b| b.wait_ns.total_cmp(&a.wait_ns).then(a.site.cmp(&b.site)));
    let per_vcpu: Vec<(f64, f64)> = usages
        .iter()
        .filter(|u| u.vcpus > 0 && u.virtual_ns > 0.0)
        .map(|u| (u.virtual_ns / u.vcpus as f64, u.cpu_ns / u.vcpus as f64))
        .collect();
    let times = (!per_vcpu.is_empty()).then(|| {
        (
            median_opt(&per_vcpu.iter().map(|p| p.0).collect::<Vec<_>>()).unwrap_or(0.0),
            median_opt(&per_vcpu.iter().map(|p| p.1).collect::<Vec<_>>()).unwrap_or(0.0),
        )
    });
    (rows, times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quanta_parse_with_units_and_bounds() {
        assert_eq!(parse_quantum("500us"), Ok(500_000));
        assert_eq!(parse_quantum("500µs"), Ok(500_000));
        assert_eq!(parse_quantum("2ms"), Ok(2_000_000));
        assert_eq!(parse_quantum("1000000ns"), Ok(1_000_000));
        assert_eq!(parse_quantum("0.5ms"), Ok(500_000));
        assert_eq!(parse_quantum("1s"), Ok(1_000_000_000));
        for bad in [
            "0",
            "0ms",
            "0.1ns",
            "-1ms",
            "1.5s",
            "2",
            "ms",
            "abc",
            "5 parsecs",
            "1e400s",
        ] {
            assert!(parse_quantum(bad).is_err(), "{bad} accepted");
        }
        assert!(parse_quantum("-1ms").unwrap_err().contains("negative"));
        assert!(parse_quantum("2s").unwrap_err().contains("at most 1 s"));
    }

    #[test]
    fn line_costs_parse_from_zero_to_100_us() {
        assert_eq!(parse_line_cost("0"), Ok(0));
        assert_eq!(parse_line_cost("0ns"), Ok(0));
        assert_eq!(parse_line_cost("120ns"), Ok(120));
        assert_eq!(parse_line_cost("100us"), Ok(100_000));
        for bad in ["-5ns", "101us", "1ms", "5", "soon"] {
            assert!(parse_line_cost(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn quantum_needs_virtual_and_args_follow_the_clock() {
        assert!(from_args(None, Some(1000), None).is_err());
        assert!(from_args(Some(ClockKind::Host), Some(1000), None).is_err());
        assert!(from_args(Some(ClockKind::Host), None, Some(100)).is_err());
        let v = from_args(Some(ClockKind::Virtual), Some(2_000_000), None).unwrap();
        assert_eq!(
            emulator_args(&v),
            ["--clock", "virtual", "--quantum", "2000000ns"]
        );
        let d = from_args(Some(ClockKind::Virtual), None, None).unwrap();
        assert_eq!(emulator_args(&d), ["--clock", "virtual"]);
        let l = from_args(Some(ClockKind::Virtual), None, Some(150)).unwrap();
        assert_eq!(
            emulator_args(&l),
            ["--clock", "virtual", "--line-cost", "150ns"]
        );
        assert!(describe(&l).ends_with("(the emulator's default quantum, line cost 150 ns)"));
        assert!(emulator_args(&from_args(None, None, None).unwrap()).is_empty());
        assert!(check_emu_args("--line-cost 1us").is_err());
        assert_eq!(asked_for(&v, BuildKind::Peer), Clock::default());
        assert!(check_emu_args("--sync-profile --tlb-flush-mode synced").is_ok());
        assert!(check_emu_args("--sync-profile --clock virtual").is_err());
        assert!(check_emu_args("--quantum=1ms").is_err());
    }

    #[test]
    fn durations_print_in_the_largest_unit() {
        assert_eq!(format_ns(500_000), "500 µs");
        assert_eq!(format_ns(2_000_000), "2 ms");
        assert_eq!(format_ns(1_500_000), "1.5 ms");
        assert_eq!(format_ns(1_000_000_000), "1 s");
        assert_eq!(format_ns(750), "750 ns");
    }

    fn run_with(report: serde_json::Value) -> Run {
        serde_json::from_value(serde_json::json!({
            "variant": "baseline", "cpus": 4, "rep": 1, "seq": 1, "started": "x",
            "status": "ok", "reason": null, "guest_elapsed_s": 1.0, "host_wall_s": 1.0,
            "exit_code": 0, "signal": null, "checksum": "0x1", "result": null,
            "guest_error": null, "pin": "none", "oversubscribed": true,
            "report": report, "report_error": null, "log": null
        }))
        .unwrap()
    }

    #[test]
    fn a_run_on_another_clock_than_asked_fails() {
        let virt = Clock {
            kind: ClockKind::Virtual,
            quantum_ns: Some(500_000),
            line_cost_ns: None,
        };
        // As asked: recorded from the report, never oversubscribed.
        let mut r =
            run_with(serde_json::json!({"clock": {"kind": "virtual", "quantum_ns": 500000}}));
        assert_eq!(r.clock, Clock::default(), "old files read as host");
        settle_run(&mut r, virt);
        assert_eq!(
            (r.status, r.clock, r.oversubscribed),
            (RunStatus::Ok, virt, false)
        );
        // The emulator ran on host time although virtual was asked.
        let mut r = run_with(serde_json::json!({"clock": {"kind": "host"}}));
        settle_run(&mut r, virt);
        assert_eq!(r.status, RunStatus::Failed);
        assert!(
            r.reason.as_deref().unwrap().contains("asked for virtual"),
            "{r:?}"
        );
        assert!(
            r.oversubscribed,
            "a host-time run keeps its oversubscription"
        );
        // Another quantum.
        let mut r = run_with(serde_json::json!({"clock": {"kind": "virtual", "quantum_ns": 1000}}));
        settle_run(&mut r, virt);
        assert_eq!(r.status, RunStatus::Failed);
        assert!(
            r.reason.as_deref().unwrap().contains("quantum 1 µs"),
            "{r:?}"
        );
        // The emulator's default quantum is recorded when none was asked.
        let mut r = run_with(serde_json::json!({"clock": {"kind": "virtual", "quantum_ns": 1000}}));
        settle_run(
            &mut r,
            Clock {
                kind: ClockKind::Virtual,
                quantum_ns: None,
                line_cost_ns: None,
            },
        );
        assert_eq!((r.status, r.clock.quantum_ns), (RunStatus::Ok, Some(1000)));
        // A line cost asked of an emulator that reports none (it predates --line-cost, or
        // charged another): the run is not what the sweep asked for.
        let lined = Clock {
            line_cost_ns: Some(200),
            ..virt
        };
        let mut r =
            run_with(serde_json::json!({"clock": {"kind": "virtual", "quantum_ns": 500000}}));
        settle_run(&mut r, lined);
        assert_eq!(r.status, RunStatus::Failed);
        assert!(r.reason.as_deref().unwrap().contains("line cost 0 ns"));
        let mut r = run_with(serde_json::json!({"clock":
            {"kind": "virtual", "quantum_ns": 500000, "line_cost_ns": 200, "clock_read_ns": 480}}));
        settle_run(&mut r, lined);
        assert_eq!((r.status, r.clock), (RunStatus::Ok, lined));
        // No report: taken as asked.
        let mut r = run_with(serde_json::Value::Null);
        r.report = None;
        settle_run(&mut r, virt);
        assert_eq!((r.status, r.clock), (RunStatus::Ok, virt));
        // An unknown clock fails the run.
        let mut r = run_with(serde_json::json!({"clock": {"kind": "sundial"}}));
        settle_run(&mut r, Clock::default());
        assert_eq!(r.status, RunStatus::Failed);
    }

    #[test]
    fn virtual_waits_from_lock_sites_or_else_from_vcpus() {
        let mut r = run_with(serde_json::json!({
            "clock": {"kind": "virtual", "quantum_ns": 500000},
            "vcpus": [{"virtual_ns": 1000, "cpu_ns": 900}, {"virtual_ns": 3000, "cpu_ns": 2000}],
            "locks": {"bql.hcall": {"acquisitions": 10, "wait_ns": 5, "virtual_wait_ns": 400, "virtual_hold_ns": 70},
                      "bql.exec_loop": {"acquisitions": 20, "wait_ns": 50, "virtual_wait_ns": 100}}
        }));
        settle_run(
            &mut r,
            Clock {
                kind: ClockKind::Virtual,
                quantum_ns: None,
                line_cost_ns: None,
            },
        );
        let (rows, times) = virtual_wait_rows(&[&r]);
        assert_eq!(rows[0].site, "bql.hcall");
        assert_eq!(rows[0].wait_ns, 400.0);
        assert_eq!(rows[0].share, Some(0.1));
        assert_eq!((rows[0].hold_ns, rows[1].hold_ns), (Some(70.0), None));
        assert_eq!(rows[1].site, "bql.exec_loop");
        assert_eq!(times, Some((2000.0, 1450.0)));
        // The per-vCPU maps when the lock sites lack virtual waits.
        let mut r = run_with(serde_json::json!({
            "clock": {"kind": "virtual"},
            "vcpus": [{"virtual_ns": 1000, "virtual_wait_ns": {"tlb_lock": 30}},
                      {"virtual_ns": 1000, "virtual_wait_ns": {"tlb_lock": 12, "bql.hcall": 50}}],
            "locks": {"tlb_lock": {"acquisitions": 3, "wait_ns": 5}}
        }));
        settle_run(
            &mut r,
            Clock {
                kind: ClockKind::Virtual,
                quantum_ns: None,
                line_cost_ns: None,
            },
        );
        let (rows, _) = virtual_wait_rows(&[&r]);
        assert_eq!(
            rows.iter()
                .map(|r| (r.site.as_str(), r.wait_ns))
                .collect::<Vec<_>>(),
            [("bql.hcall", 50.0), ("tlb_lock", 42.0)]
        );
        // Host-time runs have none.
        let mut h = run_with(serde_json::json!({"clock": {"kind": "host"},
            "locks": {"bql.hcall": {"virtual_wait_ns": 0}}}));
        settle_run(&mut h, Clock::default());
        assert!(virtual_usage(&h).is_none());
    }
}
