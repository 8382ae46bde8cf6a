//! Files the harness produces for people: the rendered plots, the ASCII chart, and the
//! results schema that every committed results file must follow.

mod common;

use common::*;

fn decode_png(path: &std::path::Path) -> (u32, u32) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("PNG image data decodes");
    assert!(buf.iter().any(|&b| b != 255), "not a blank image");
    (info.width, info.height)
}

#[test]
fn rendered_plot_is_a_png_of_the_expected_size() {
    let s = Scratch::new();
    let f = synthetic(
        "plotted",
        &[
            ("baseline", 1, vec![10.0, 10.2, 9.9]),
            ("baseline", 2, vec![5.5, 5.6, 5.4]),
            ("baseline", 4, vec![4.0, 4.1, 3.9]),
            ("cputlb-no-bql", 1, vec![10.0, 10.1, 9.8]),
            ("cputlb-no-bql", 2, vec![5.2, 5.3, 5.1]),
            ("cputlb-no-bql", 4, vec![3.0, 3.1, 2.9]),
        ],
    );
    let mut f = f;
    for r in f.runs.iter_mut().filter(|r| r.cpus == 4) {
        r.oversubscribed = true;
    }
    write(&f, &s.p("r.json"));
    let o = s.run(
        &[
            "plot",
            "r.json",
            "--reference",
            "posted",
            "-o",
            "out/speedup.png",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        decode_png(&s.p("out/speedup.png")),
        (lockscale::plot::WIDTH, lockscale::plot::HEIGHT)
    );
    let o = s.run(&["plot", "r.json", "-o", "out/speedup.svg"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let svg = std::fs::read_to_string(s.p("out/speedup.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("cputlb-no-bql") && svg.contains("ideal"));
    // Default location: plots/<name>.png.
    let o = s.run(&["plot", "r.json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(s.p("plots/plotted.png").is_file());
    let o = s.run(&["plot", "r.json", "-o", "x.gif"], &[]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn ascii_chart_of_the_posted_curve() {
    let s = Scratch::new();
    let o = s.run(&["plot", "--reference", "posted", "--ascii"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("Speedup vs a single thread (higher is better):"),
        "{out}"
    );
    // per-cpu-lock is posted at N = 1, 16, 28 only: markers, no line across the N it lacks.
    for legend in [
        "posted baseline **B**",
        "posted per-cpu-lock (markers only)   D",
        "posted cputlb-no-bql $$A$$",
    ] {
        assert!(out.contains(legend), "{legend} missing:\n{out}");
    }
    assert!(!out.contains('#'), "no per-cpu-lock line:\n{out}");
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("14 |-+")),
        "{out}"
    );
    assert!(out.contains("28"), "{out}");
}

#[test]
fn relative_to_another_variant() {
    let s = Scratch::new();
    let f = synthetic(
        "rel",
        &[
            ("baseline", 1, vec![10.0, 10.0]),
            ("cputlb-no-bql", 1, vec![5.0, 5.0]),
        ],
    );
    write(&f, &s.p("r.json"));
    let o = s.run(&["report", "r.json", "--relative-to", "baseline"], &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("| cputlb-no-bql | 1 | 2 | 5.000 | 5.000 … 5.000 | 2.00 |"),
        "{out}"
    );
    let o = s.run(&["report", "r.json", "--relative-to", "qemu"], &[]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn committed_schema_is_current() {
    let committed = std::fs::read_to_string(workspace().join("results/schema.json"))
        .expect("results/schema.json");
    assert_eq!(
        committed,
        lockscale::model::schema_json(),
        "results/schema.json is stale: run `cargo run -p lockscale -- schema`"
    );
}

#[test]
fn every_results_file_validates_against_the_schema() {
    let dir = workspace().join("results");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "json")
            && p.file_name().is_some_and(|n| n != "schema.json")
        {
            validate(&p);
            checked += 1;
        }
    }
    // Also a synthetic one, so the check never passes vacuously.
    let s = Scratch::new();
    write(
        &synthetic("v", &[("baseline", 1, vec![1.0])]),
        &s.p("v.json"),
    );
    validate(&s.p("v.json"));
    eprintln!("validated {checked} committed results file(s)");
}

#[test]
fn schema_rejects_a_broken_file() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("results/schema.json")).unwrap(),
    )
    .unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let mut doc = serde_json::to_value(synthetic("v", &[("baseline", 1, vec![1.0])])).unwrap();
    assert!(v.is_valid(&doc));
    doc["runs"][0]["status"] = "maybe".into();
    assert!(!v.is_valid(&doc));
    let mut doc2 = serde_json::to_value(synthetic("v", &[("baseline", 1, vec![1.0])])).unwrap();
    doc2["schema"] = "other/2".into();
    assert!(!v.is_valid(&doc2));
}

#[test]
fn example_workflow_runs_a_valid_gate_command() {
    use clap::Parser;
    let wf = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/lockscale-gate.yml"
    ))
    .unwrap();
    assert!(wf.contains("on:\n  pull_request:"));
    assert!(wf.contains("GITHUB_STEP_SUMMARY"));
    // The lockscale invocation, with its continuation lines joined.
    let start = wf
        .find("./target/release/lockscale gate")
        .expect("the gate command");
    let end = start + wf[start..].find('>').unwrap();
    let cmd = wf[start..end]
        .replace("\\\n", " ")
        .replace("\"$GITHUB_STEP_SUMMARY\"", "summary.md");
    let argv: Vec<&str> = cmd.split_whitespace().collect();
    let cli = lockscale::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{cmd}: {e}"));
    match cli.command {
        lockscale::cli::Command::Gate(g) => {
            assert_eq!(g.base_rev.as_deref(), Some("HEAD^1"));
            assert_eq!(g.candidate_rev.as_deref(), Some("HEAD"));
            assert!(g.summary.is_some());
        }
        other => panic!("not a gate command: {other:?}"),
    }
}

#[test]
fn report_tolerates_partial_lock_statistics_and_missing_n1() {
    let s = Scratch::new();
    let mut f = synthetic(
        "partial",
        &[
            ("baseline", 2, vec![1.0, 1.1]),
            ("baseline", 4, vec![0.6, 0.7]),
        ],
    );
    f.runs[2].report = Some(serde_json::json!({
        "strategy": "baseline",
        "locks": { "bql.hcall": { "acquisitions": 10 }, "bql.exec_loop": { "acquisitions": 5, "contended": 1, "wait_ns": 7000000 } }
    }));
    f.runs[3].report = Some(serde_json::json!({ "strategy": "baseline" }));
    write(&f, &s.p("p.json"));
    let o = s.run(&["report", "p.json"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("### baseline, N = 4"), "{out}");
    assert!(
        out.contains("| `bql.exec_loop` | 5 | 1 | 20.0% | 7.00 | – | – |"),
        "{out}"
    );
    assert!(
        out.contains("| `bql.hcall` | 10 | – | – | – | – | – |"),
        "{out}"
    );
    assert!(out.contains("no successful N=1 run"), "{out}");
    // Without N = 1 there is nothing to plot, but the command still succeeds.
    let o = s.run(&["plot", "p.json", "--ascii"], &[]);
    assert!(o.status.success(), "{}", text(&o));
}
