//! Virtual host time in the harness (`--clock virtual`, issue 24 item 3) against the fake
//! emulator: what reaches the emulator, what the results file records, how plots, charts and
//! reports label it, and what is refused.

mod common;

use std::path::Path;

use common::*;
use lockscale::model::{Clock, ClockKind, ResultsFile, RunStatus};

fn host_cores() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// A vCPU count above this host's cores: oversubscribed on host time.
fn over() -> u32 {
    host_cores() + 2
}

fn virtual_clock(quantum_ns: Option<u64>) -> Clock {
    Clock {
        kind: ClockKind::Virtual,
        quantum_ns,
        line_cost_ns: None,
    }
}

fn out(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn refused(o: &std::process::Output, want: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "{}", text(o));
    let err = String::from_utf8_lossy(&o.stderr);
    for w in want {
        assert!(err.contains(w), "expected {w:?} in {err}");
    }
}

/// The texts of an SVG plot's `<text>` elements.
fn svg_texts(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap();
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().replace("&apos;", "'"))
        })
        .collect()
}

/// Hollow markers of an SVG plot (oversubscribed points): the outline circles of radius 6.
fn hollow_markers(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap();
    svg.split("<circle")
        .skip(1)
        .filter(|c| c.contains("r=\"6\"") && c.contains("fill=\"none\""))
        .map(|c| {
            let i = c.find("stroke=\"").unwrap() + 8;
            c[i..i + 7].to_string()
        })
        .collect()
}

#[test]
fn a_virtual_sweep_runs_ours_on_virtual_time_and_peers_on_host_time() {
    let s = Scratch::new();
    let n = over();
    let cpus = format!("1,{n}");
    let argv = s.p("argv.log");
    let peer = format!("qemu={}", s.p("bin/qemu-fake").display());
    let mut args = vec!["sweep".to_string()];
    args.extend(s.bins(&VARIANTS));
    args.extend(
        [
            "--peer",
            &peer,
            "--cpus",
            &cpus,
            "--reps",
            "2",
            "--clock",
            "virtual",
            "--quantum",
            "2ms",
            "--name",
            "virt",
        ]
        .map(String::from),
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = s.run(&refs, &[("FAKE_EMU_ARGV", argv.to_str().unwrap())]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let path = s.p("results/virt.json");
    validate(&path);
    let f = load(&path);
    assert_eq!(f.config.clock, virtual_clock(Some(2_000_000)));
    assert_eq!(f.runs.len(), 4 * 2 * 2);
    for r in &f.runs {
        assert_eq!(r.status, RunStatus::Ok, "{r:?}");
        if r.variant == "qemu" {
            assert_eq!(r.clock, Clock::default(), "peers stay on host time");
            assert_eq!(r.oversubscribed, r.cpus > f.host.logical_cores);
        } else {
            // From the run report: the fake echoes the quantum it was given.
            assert_eq!(r.clock, virtual_clock(Some(2_000_000)), "{}", r.variant);
            assert!(
                !r.oversubscribed,
                "{} N={} oversubscribed",
                r.variant, r.cpus
            );
            let vcpus = r.report.as_ref().unwrap()["vcpus"].as_array().unwrap();
            assert!(vcpus.iter().all(|v| v["virtual_ns"].as_u64() > Some(0)));
        }
    }
    // Ours got --clock virtual --quantum; the peer neither.
    let lines = std::fs::read_to_string(&argv).unwrap();
    let (ours, peers): (Vec<&str>, Vec<&str>) =
        lines.lines().partition(|l| l.contains("ppc64emu-"));
    assert_eq!(ours.len(), 3 * 2 * 2, "{lines}");
    assert_eq!(peers.len(), 2 * 2, "{lines}");
    assert!(
        ours.iter()
            .all(|l| l.contains(" --clock virtual --quantum 2000000ns")),
        "{lines}"
    );
    assert!(
        peers
            .iter()
            .all(|l| !l.contains("--clock") && !l.contains("--quantum")),
        "{lines}"
    );
    // The chart at the end labels the clocks of both kinds of curves.
    let chart = out(&o);
    assert!(chart.contains("baseline (virtual) **B**"), "{chart}");
    assert!(chart.contains("qemu (host time)"), "{chart}");
    assert!(
        chart.contains("clocks: (virtual) = virtual host: one core per vCPU"),
        "{chart}"
    );
    // The plot: only the peer's point beyond the host's cores is hollow.
    let svg = s.p("plots/virt.svg");
    let texts = svg_texts(&svg);
    assert!(
        texts.iter().any(|t| t == "lockscale: virt (mixed clocks)"),
        "{texts:?}"
    );
    assert!(texts.iter().any(|t| t == "qemu (host time)"), "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t == "clocks: (virtual) = virtual host: one core per vCPU"),
        "{texts:?}"
    );
    let peer_colour = "#9467BD";
    assert_eq!(hollow_markers(&svg), [peer_colour], "{texts:?}");
    // The report: the clock, the peer's oversubscribed point, the virtual ones marked.
    let o = s.run(&["report", "results/virt.json"], &[]);
    let rep = out(&o);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        rep.contains("- clock: virtual host: one core per vCPU, guest times on per-vCPU virtual clocks (quantum 2 ms); qemu on host time"),
        "{rep}"
    );
    assert!(rep.contains(&format!("| baseline | {n}ᵛ |")), "{rep}");
    assert!(rep.contains(&format!("| qemu | {n}† |")), "{rep}");
    assert!(!rep.contains(&format!("| baseline | {n}†")), "{rep}");
}

/// Lower-case `b` markers (oversubscribed baseline points) inside the chart's frame.
fn lower_case_markers(ascii: &str) -> usize {
    ascii
        .lines()
        .filter(|l| l.contains('|'))
        .map(|l| l.replace("baseline", "").replace("oversubscribed", ""))
        .map(|l| l.matches('b').count())
        .sum()
}

/// Sweeps baseline alone over 1 and an oversubscribed N on `clock_args`, then plots it as SVG
/// and ASCII and reports it.
fn sweep_plot_report(
    s: &Scratch,
    name: &str,
    clock_args: &[&str],
) -> (Vec<String>, Vec<String>, String, String) {
    let cpus = format!("1,{}", over());
    let o = s.sweep_baseline(
        BaselineSweep {
            cpus: &cpus,
            reps: "2",
            ..BaselineSweep::once(name)
        },
        clock_args,
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let file = format!("results/{name}.json");
    let svg = s.p(&format!("{name}.svg"));
    let o = s.run(&["plot", &file, "-o", svg.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let o = s.run(&["plot", &file, "--ascii"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let ascii = out(&o);
    let o = s.run(&["report", &file], &[]);
    assert!(o.status.success(), "{}", text(&o));
    (svg_texts(&svg), hollow_markers(&svg), ascii, out(&o))
}

#[test]
fn virtual_points_are_labelled_and_never_oversubscribed() {
    let s = Scratch::new();
    let n = over();
    // Host time: the point beyond the host's cores is hollow, lower case and marked †.
    let (texts, hollow, ascii, rep) = sweep_plot_report(&s, "host", &["--clock", "host"]);
    assert!(
        texts.iter().any(|t| t == "lockscale: host (host time)"),
        "{texts:?}"
    );
    assert!(texts.iter().any(|t| t == "clock: host time"), "{texts:?}");
    assert!(
        texts.iter().any(|t| t.starts_with("host cores = ")),
        "{texts:?}"
    );
    assert_eq!(hollow.len(), 1, "{texts:?}");
    assert!(ascii.contains("lower case: oversubscribed"), "{ascii}");
    assert_eq!(lower_case_markers(&ascii), 1, "{ascii}");
    assert!(!ascii.contains("virtual"), "{ascii}");
    assert!(rep.contains("- clock: host time"), "{rep}");
    assert!(rep.contains(&format!("| baseline | {n}† |")), "{rep}");
    assert!(!rep.contains("Virtual waits"), "{rep}");

    // Virtual time: the same N is an ordinary point, and every output says which clock.
    let (texts, hollow, ascii, rep) = sweep_plot_report(&s, "virt", &["--clock", "virtual"]);
    assert!(
        texts
            .iter()
            .any(|t| t == "lockscale: virt (virtual host: one core per vCPU)"),
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t == "clock: virtual host: one core per vCPU"),
        "{texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t.starts_with("host cores = ")),
        "{texts:?}"
    );
    assert!(hollow.is_empty(), "{hollow:?}");
    assert!(!ascii.contains("lower case: oversubscribed"), "{ascii}");
    assert!(
        ascii.contains("clock: virtual host: one core per vCPU"),
        "{ascii}"
    );
    assert_eq!(lower_case_markers(&ascii), 0, "{ascii}");
    // The emulator's default quantum (the fake's 500 µs) comes from the run reports.
    assert!(
        rep.contains("- clock: virtual host: one core per vCPU, guest times on per-vCPU virtual clocks (quantum 500 µs)"),
        "{rep}"
    );
    assert!(rep.contains(&format!("| baseline | {n} |")), "{rep}");
    assert!(!rep.contains('†'), "{rep}");
    // Lock sites by virtual wait at the largest N: the fake's baseline waits longest at
    // bql.hcall in virtual time (5 ms per vCPU), at bql.exec_loop in host time.
    let section = rep
        .split("## Virtual waits")
        .nth(1)
        .unwrap_or_else(|| panic!("no virtual waits in\n{rep}"));
    assert!(
        section.contains(&format!("### baseline, N = {n}")),
        "{section}"
    );
    let sites: Vec<&str> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.split('`').nth(1).unwrap())
        .collect();
    assert_eq!(
        sites,
        ["bql.hcall", "bql.exec_loop", "bql.tlb_flush_item"],
        "{section}"
    );
    let hcall = section.lines().find(|l| l.contains("`bql.hcall`")).unwrap();
    let per_vcpu = hcall.split('|').nth(4).unwrap().trim();
    assert_eq!(per_vcpu, "5.00", "{hcall}");
    let host_section = rep.split("## Lock statistics").nth(1).unwrap();
    let first_host_site = host_section.lines().find(|l| l.starts_with("| `")).unwrap();
    assert!(first_host_site.contains("bql.exec_loop"), "{host_section}");
    // --top limits the virtual table too.
    let o = s.run(&["report", "results/virt.json", "--top", "1"], &[]);
    let rep = out(&o);
    let section = rep.split("## Virtual waits").nth(1).unwrap();
    assert_eq!(
        section.lines().filter(|l| l.starts_with("| `")).count(),
        1,
        "{rep}"
    );
}

/// The vCPU counts of a `sweep --plan` listing.
fn planned_cpus(listing: &str) -> Vec<u32> {
    let mut v: Vec<u32> = listing
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split('\t').nth(2)?.parse().ok())
        .collect();
    v.dedup();
    v
}

#[test]
fn the_default_sweep_is_virtual_over_the_posted_n_and_host_time_one_option_away() {
    let s = Scratch::new();
    let o = s.run(&["sweep", "--plan"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let plan = out(&o);
    assert!(plan.contains("# clock: virtual host"), "{plan}");
    assert_eq!(planned_cpus(&plan), [1, 2, 4, 8, 12, 16, 20, 24, 28]);
    assert!(
        plan.contains("3 variants × 9 vCPU counts × 5 repetitions"),
        "{plan}"
    );
    // Host time: the list follows the host's cores.
    let o = s.run(&["sweep", "--plan", "--clock", "host"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let plan = out(&o);
    assert!(plan.contains("# clock: host time"), "{plan}");
    assert_eq!(
        planned_cpus(&plan),
        lockscale::sizes::default_cpus(host_cores())
    );
    // A list given is kept on either clock; peers alone run on host time.
    let o = s.run(&["sweep", "--plan", "--cpus", "1,3"], &[]);
    assert_eq!(planned_cpus(&out(&o)), [1, 3]);
    let o = s.run(
        &[
            "sweep",
            "--plan",
            "--variants",
            "none",
            "--peer",
            "q=qemu-system-ppc64",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(out(&o).contains("# clock: host time"), "{}", text(&o));
}

#[test]
fn bad_clock_input_is_refused_before_anything_runs() {
    let s = Scratch::new();
    let log = s.p("runs.log");
    let cases: &[(&[&str], &[&str])] = &[
        (&["--clock", "wall"], &["--clock", "wall"]),
        (
            &["--clock", "virtual", "--quantum", "0"],
            &["--quantum", "above 0"],
        ),
        (
            &["--clock", "virtual", "--quantum", "0ms"],
            &["--quantum", "above 0"],
        ),
        (
            &["--clock", "virtual", "--quantum", "-1ms"],
            &["--quantum", "negative"],
        ),
        (
            &["--clock", "virtual", "--quantum=-5us"],
            &["--quantum", "negative"],
        ),
        (&["--clock", "virtual", "--quantum", "soon"], &["--quantum"]),
        (
            &["--clock", "virtual", "--quantum", "500"],
            &["--quantum", "no unit"],
        ),
        (
            &["--clock", "virtual", "--quantum", "2s"],
            &["--quantum", "at most 1 s"],
        ),
        (
            &["--clock", "virtual", "--quantum", "1001ms"],
            &["--quantum", "at most 1 s"],
        ),
        (
            &["--clock", "host", "--quantum", "1ms"],
            &["--quantum", "needs --clock virtual"],
        ),
        (
            &["--emu-args", "--clock virtual"],
            &["--emu-args", "--clock virtual"],
        ),
        (
            &["--plan", "--clock", "host", "--quantum", "1ms"],
            &["needs --clock virtual"],
        ),
    ];
    for (i, (extra, want)) in cases.iter().enumerate() {
        let name = format!("bad{i}");
        let o = s.sweep_baseline(
            BaselineSweep {
                cpus: "1,2",
                ..BaselineSweep::once(&name)
            },
            extra,
            &[("FAKE_EMU_LOG", log.to_str().unwrap())],
        );
        refused(&o, want);
        assert!(!log.exists(), "{extra:?} ran the emulator");
        assert!(!s.p(&format!("results/{name}.json")).exists(), "{extra:?}");
    }
    // The gate's revision form checks them before building anything (this is no git repo).
    let o = s.run(
        &[
            "gate",
            "--base-rev",
            "A",
            "--candidate-rev",
            "B",
            "--clock",
            "virtual",
            "--quantum",
            "0",
        ],
        &[],
    );
    refused(&o, &["--quantum"]);
    let o = s.run(
        &[
            "gate",
            "--base-rev",
            "A",
            "--candidate-rev",
            "B",
            "--quantum",
            "2ms",
        ],
        &[],
    );
    refused(&o, &["needs --clock virtual"]);
    // A fine quantum passes those checks and fails only at the revisions.
    let o = s.run(
        &[
            "gate",
            "--base-rev",
            "A",
            "--candidate-rev",
            "B",
            "--clock",
            "virtual",
            "--quantum",
            "2ms",
        ],
        &[],
    );
    refused(&o, &["\"A\" is not a commit"]);
    // The file form and --resume take their clock from the files.
    let o = s.sweep_baseline(BaselineSweep::once("ok"), &[], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = s.run(
        &[
            "gate",
            "--base",
            "results/ok.json",
            "--candidate",
            "results/ok.json",
            "--clock",
            "virtual",
        ],
        &[],
    );
    refused(&o, &["--clock", "only apply to the revision form"]);
    let o = s.run(
        &["sweep", "--resume", "results/ok.json", "--clock", "virtual"],
        &[],
    );
    refused(&o, &["drop --clock"]);
    // Peers alone have nothing to run on virtual time.
    let peer = format!("qemu={}", s.p("bin/qemu-fake").display());
    let o = s.run(
        &[
            "sweep",
            "--variants",
            "none",
            "--peer",
            &peer,
            "--cpus",
            "1",
            "--clock",
            "virtual",
            "--name",
            "peers",
        ],
        &[("FAKE_EMU_LOG", log.to_str().unwrap())],
    );
    refused(&o, &["--clock virtual with --variants none"]);
    assert!(!log.exists());
}

#[test]
fn a_resumed_virtual_sweep_stays_on_virtual_time() {
    let s = Scratch::new();
    let argv = s.p("argv.log");
    let o = s.sweep_baseline(
        BaselineSweep {
            cpus: "1,2",
            ..BaselineSweep::once("res")
        },
        &["--clock", "virtual", "--quantum", "250us"],
        &[("FAKE_EMU_FAIL", "baseline/2/noresult")],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let o = s.run(
        &[
            "sweep",
            "--no-plot",
            "--resume",
            "results/res.json",
            "--retry-failed",
        ],
        &[("FAKE_EMU_ARGV", argv.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let lines = std::fs::read_to_string(&argv).unwrap();
    assert_eq!(lines.lines().count(), 1, "{lines}");
    assert!(
        lines.contains("-smp 2 ") && lines.contains("--clock virtual --quantum 250000ns"),
        "{lines}"
    );
    let f = load(&s.p("results/res.json"));
    assert_eq!(f.runs.len(), 2);
    assert!(
        f.runs
            .iter()
            .all(|r| r.status == RunStatus::Ok && r.clock == virtual_clock(Some(250_000)))
    );
}

#[test]
fn a_run_not_on_the_clock_asked_for_fails() {
    let s = Scratch::new();
    // The emulator says it ran on host time: its guest time is not a virtual one.
    let o = s.sweep_baseline(
        BaselineSweep {
            cpus: "1,2",
            ..BaselineSweep::once("lied")
        },
        &["--clock", "virtual"],
        &[("FAKE_EMU_CLOCK_REPORT", "host")],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let f = load(&s.p("results/lied.json"));
    assert_eq!(f.runs.len(), 2);
    for r in &f.runs {
        assert_eq!(r.status, RunStatus::Failed);
        assert!(
            r.reason.as_deref().unwrap().contains(
                "the run report says the guest ran on host time, but the sweep asked for virtual host"
            ),
            "{r:?}"
        );
    }
    // A report without a clock (an emulator older than it): taken as asked.
    let o = s.sweep_baseline(
        BaselineSweep::once("silent"),
        &["--clock", "virtual", "--quantum", "750us"],
        &[("FAKE_EMU_CLOCK_REPORT", "none")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let f = load(&s.p("results/silent.json"));
    assert_eq!(f.runs[0].clock, virtual_clock(Some(750_000)));
    // And a host-time sweep on an emulator that claims virtual time fails too.
    let o = s.sweep_baseline(
        BaselineSweep::once("other-way"),
        &["--clock", "host"],
        &[("FAKE_EMU_CLOCK_REPORT", "virtual")],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}

const BASE: [f64; 5] = [1.00, 1.01, 0.99, 1.02, 0.98];

/// Baseline at N = 1 and 2, five repetitions, on `clock`; `scale` keeps the runs of different
/// sets apart (merge refuses the same runs twice).
fn set(name: &str, clock: Clock, scale: f64) -> ResultsFile {
    let one: Vec<f64> = BASE.iter().map(|t| t * scale).collect();
    let half: Vec<f64> = one.iter().map(|t| t * 0.55).collect();
    let mut f = synthetic(name, &[("baseline", 1, one), ("baseline", 2, half)]);
    f.config.clock = clock;
    for r in &mut f.runs {
        r.clock = clock;
    }
    f
}

#[test]
fn compare_gate_and_merge_refuse_mixed_clocks() {
    let s = Scratch::new();
    write(&set("host", Clock::default(), 1.0), &s.p("host.json"));
    write(
        &set("virt", virtual_clock(Some(500_000)), 1.001),
        &s.p("virt.json"),
    );
    write(
        &set("virt2", virtual_clock(Some(2_000_000)), 1.002),
        &s.p("virt2.json"),
    );

    let o = s.run(&["compare", "host.json", "virt.json"], &[]);
    refused(
        &o,
        &[
            "host ran on host time and virt on virtual time",
            "--allow-mixed-clocks",
        ],
    );
    let svg = s.p("mixed.svg");
    let o = s.run(
        &[
            "compare",
            "host.json",
            "virt.json",
            "--allow-mixed-clocks",
            "-o",
            svg.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        out(&o).contains("Note: mixed clocks (--allow-mixed-clocks)"),
        "{}",
        text(&o)
    );
    assert!(
        out(&o).contains("Clocks: host time (`host`); virtual host: one core per vCPU"),
        "{}",
        text(&o)
    );
    let texts = svg_texts(&svg);
    for want in ["host: baseline (host time)", "virt: baseline (virtual)"] {
        assert!(texts.iter().any(|t| t == want), "{want} in {texts:?}");
    }
    // Two virtual sweeps compare; a different quantum is noted.
    let o = s.run(&["compare", "virt.json", "virt2.json"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        out(&o).contains("different quanta of virtual time: 500 µs in virt, 2 ms in virt2"),
        "{}",
        text(&o)
    );

    let gate = |a: &str, b: &str, extra: &[&str]| {
        let mut args = vec!["gate", "--base", a, "--candidate", b];
        args.extend_from_slice(extra);
        s.run(&args, &[])
    };
    let o = gate("host.json", "virt.json", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        out(&o).contains("## lockscale gate: REFUSED"),
        "{}",
        text(&o)
    );
    assert!(out(&o).contains("--allow-mixed-clocks"), "{}", text(&o));
    let o = gate("host.json", "virt.json", &["--allow-mixed-clocks"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(out(&o).contains("## lockscale gate: PASS"), "{}", text(&o));
    assert!(out(&o).contains("mixed clocks"), "{}", text(&o));
    let o = gate("virt.json", "virt.json", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The PR comment says which clock it gated on.
    assert!(
        out(&o).contains(
            "Clock: virtual host: one core per vCPU, guest times on per-vCPU virtual clocks (quantum 500 µs)."
        ),
        "{}",
        text(&o)
    );

    let o = s.run(&["merge", "host.json", "virt.json", "-o", "m.json"], &[]);
    refused(&o, &["--allow-mixed-clocks"]);
    assert!(!s.p("m.json").exists());
    let o = s.run(
        &[
            "merge",
            "host.json",
            "virt.json",
            "-o",
            "m.json",
            "--allow-mixed-clocks",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let m = load(&s.p("m.json"));
    let virtual_runs = m
        .runs
        .iter()
        .filter(|r| r.clock.kind == ClockKind::Virtual)
        .count();
    assert_eq!(
        (virtual_runs, m.runs.len()),
        (10, 20),
        "each run keeps its clock"
    );
    let o = s.run(&["report", "m.json"], &[]);
    assert!(
        out(&o).contains("- clock: mixed: host time and virtual time"),
        "{}",
        text(&o)
    );
    // Two virtual files merge without the option.
    let o = s.run(&["merge", "virt.json", "virt2.json", "-o", "v.json"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn old_files_without_a_clock_read_as_host_time() {
    let s = Scratch::new();
    let mut f = synthetic(
        "old",
        &[
            ("baseline", 1, BASE.to_vec()),
            ("baseline", 4, BASE.to_vec()),
        ],
    );
    for r in f.runs.iter_mut().filter(|r| r.cpus == 4) {
        r.oversubscribed = true;
    }
    let mut v = serde_json::to_value(&f).unwrap();
    v["config"].as_object_mut().unwrap().remove("clock");
    for r in v["runs"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("clock");
    }
    let path = s.p("old.json");
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    assert!(!std::fs::read_to_string(&path).unwrap().contains("clock"));
    validate(&path);
    let read = lockscale::commands::load_results(&path).unwrap();
    assert_eq!(read.config.clock, Clock::default());
    assert!(read.runs.iter().all(|r| r.clock == Clock::default()));
    let o = s.run(&["report", "old.json"], &[]);
    assert!(out(&o).contains("- clock: host time"), "{}", text(&o));
    assert!(out(&o).contains("| baseline | 4† |"), "{}", text(&o));
    // …and so cannot be compared with a virtual sweep unless asked.
    write(&set("virt", virtual_clock(None), 1.0), &s.p("virt.json"));
    let o = s.run(&["compare", "old.json", "virt.json"], &[]);
    refused(&o, &["--allow-mixed-clocks"]);
}
