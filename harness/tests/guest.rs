//! The Linux guests' bad input: a missing or corrupt cached image, options kernel-make does not
//! take, a guest whose build fails and result lines that disagree with the run. The images
//! are stand-ins with valid manifests (the real ones need Debian's packages), run by the fake
//! emulator's Linux form.

mod common;

use std::path::PathBuf;

use common::*;
use lockscale::guest;
use lockscale::model::GuestManifest;
use lockscale::util::{sha256_file, stored_path};
use lockscale::workload::Workload;

/// Copies the image's inputs (/init, the kernel configuration fragment) into the scratch
/// repository and writes a cached image whose manifest checks out. Returns its initramfs.
fn fake_image(s: &Scratch, workload: Workload, units: u32, size: u32) -> PathBuf {
    for f in [
        guest::INIT_SCRIPT,
        lockscale::kernel_tree::FRAGMENT,
        "workloads/linux/packages.lock",
        "workloads/kernel/packages.lock",
    ] {
        std::fs::create_dir_all(s.p(f).parent().unwrap()).unwrap();
        std::fs::copy(workspace().join(f), s.p(f)).unwrap();
    }
    let dir = guest::image_dir(s.path(), workload, units, size);
    std::fs::create_dir_all(&dir).unwrap();
    let initrd = dir.join("initrd.cpio");
    std::fs::write(&initrd, b"initramfs stand-in").unwrap();
    let kernel = s.p("target/guest-cache/vmlinux-stand-in");
    std::fs::write(&kernel, b"kernel stand-in").unwrap();
    let m = GuestManifest {
        workload: workload.name().into(),
        suite: "bookworm/ppc64el".into(),
        lock: stored_path(s.path(), &lockscale::lock::lock_path(s.path(), workload)),
        lock_sha256: sha256_file(&lockscale::lock::lock_path(s.path(), workload)).unwrap(),
        packages: vec![],
        kernel: stored_path(s.path(), &kernel),
        kernel_sha256: sha256_file(&kernel).unwrap(),
        initrd: stored_path(s.path(), &initrd),
        initrd_sha256: sha256_file(&initrd).unwrap(),
        initrd_bytes: 18,
        entries: 1,
        units,
        size,
        built: "2026-01-01T00:00:00Z".into(),
        inputs_sha256: guest::inputs_sha256(s.path(), workload, units, size).unwrap(),
        prepared: None,
    };
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_string_pretty(&m).unwrap(),
    )
    .unwrap();
    initrd
}

fn refused(o: &std::process::Output, want: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", text(o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(want), "expected {want:?} in {err}");
}

#[test]
fn a_corrupt_or_missing_image_is_refused_with_the_rebuild_command() {
    for (workload, units, size) in [("linux-make", 2, 2), ("kernel-make", 2, 0)] {
        let s = Scratch::new();
        let w = Workload::from_name(workload).unwrap();
        let initrd = fake_image(&s, w, units, size);
        let build = ["guest", "build", workload, "--quick"];
        let o = s.run(&build, &[]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains(&initrd.display().to_string()),
            "{}",
            text(&o)
        );
        let rebuild = format!("lockscale guest build {workload} --force");
        std::fs::write(&initrd, b"initramfs stand-in, changed").unwrap();
        let o = s.run(&build, &[]);
        refused(&o, "does not match its manifest's SHA-256");
        refused(&o, &rebuild);
        // A sweep refuses it before running anything.
        let mut sweep = vec!["sweep", "--no-plot", "--workload", workload, "--quick"];
        let bins = s.bins(&["baseline"]);
        sweep.extend(bins.iter().map(String::as_str));
        sweep.extend(["--variants", "baseline"]);
        refused(&s.run(&sweep, &[]), "does not match its manifest's SHA-256");
        std::fs::remove_file(&initrd).unwrap();
        let o = s.run(&build, &[]);
        refused(&o, "is missing");
        refused(&o, &rebuild);
    }
}

#[test]
fn kernel_make_takes_no_units_or_size() {
    let s = Scratch::new();
    for extra in [["--units", "3"], ["--size", "1"]] {
        let mut args = vec!["guest", "build", "kernel-make"];
        args.extend(extra);
        refused(&s.run(&args, &[]), "kernel-make takes no --units or --size");
        let mut args = vec!["sweep", "--workload", "kernel-make", "--no-build"];
        args.extend(extra);
        refused(&s.run(&args, &[]), "kernel-make takes no --units or --size");
    }
}

#[test]
fn a_failed_guest_build_and_wrong_result_lines_fail_their_runs() {
    let s = Scratch::new();
    fake_image(&s, Workload::KernelMake, 2, 0);
    let bins = s.bins(&VARIANTS);
    let sweep = |name: &'static str| {
        let mut a = vec![
            "sweep",
            "--no-plot",
            "--workload",
            "kernel-make",
            "--quick",
            "--name",
            name,
        ];
        a.extend(bins.iter().map(String::as_str));
        a
    };
    let args = sweep("k");
    let o = s.run(
        &args,
        &[
            ("FAKE_EMU_LINUX", "kernel-make/2/0"),
            (
                "FAKE_EMU_FAIL",
                "baseline/2/error,per-cpu-lock/2/cpus,cputlb-no-bql/2/checksum",
            ),
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let f = load(&s.p("results/k.json"));
    let reason = |v: &str, n: u32| {
        f.runs
            .iter()
            .find(|r| r.variant == v && r.cpus == n)
            .unwrap()
            .reason
            .clone()
            .unwrap_or_default()
    };
    assert!(
        reason("baseline", 2).contains("guest self-check failed: make -j2 failed"),
        "{}",
        reason("baseline", 2)
    );
    assert!(
        reason("per-cpu-lock", 2).contains("result line says cpus=3 but the run had -smp 2"),
        "{}",
        reason("per-cpu-lock", 2)
    );
    assert!(
        reason("cputlb-no-bql", 2).contains("checksum"),
        "{}",
        reason("cputlb-no-bql", 2)
    );
    for v in VARIANTS {
        assert_eq!(reason(v, 1), "", "{v} N=1 should have passed");
    }
    // The image of another workload answering: refused by its workload= field.
    let o = s.run(&sweep("w"), &[("FAKE_EMU_LINUX", "linux-make/2/0")]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let f = load(&s.p("results/w.json"));
    assert!(f.runs.iter().all(|r| {
        r.reason
            .as_deref()
            .unwrap_or("")
            .contains("result line says workload=linux-make but the image is kernel-make")
    }));
}

/// The SHA-256s committed beside the locks (images.json) are of the images this checkout
/// builds: each record names the committed lock and this checkout's image inputs (/init
/// without comments, the generated project). A change to either without re-recording would
/// leave `guest build` printing a note instead of checking the image against its record.
#[test]
fn the_committed_image_records_are_of_this_checkouts_lock_and_inputs() {
    let repo = workspace();
    for w in [Workload::LinuxMake, Workload::KernelMake] {
        let records = guest::ImageRecords::load(&repo, w).unwrap();
        assert!(!records.images.is_empty(), "{} records no image", w.name());
        let lock = sha256_file(&lockscale::lock::lock_path(&repo, w)).unwrap();
        for r in &records.images {
            let what = format!("{} units={} size={}", w.name(), r.units, r.size);
            assert_eq!(
                r.lock_sha256, lock,
                "{what}: recorded for another lock; `lockscale guest build` it with --record"
            );
            let inputs = guest::inputs_sha256(&repo, w, r.units, r.size).unwrap();
            assert_eq!(
                r.inputs_sha256, inputs,
                "{what}: recorded for another /init or project; `lockscale guest build` it with --record"
            );
        }
    }
}
