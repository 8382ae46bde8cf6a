//! The system emulator's command line as a user meets it: help, version, refusals with the
//! offending option named, clear errors and distinct exit statuses for bad guest files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn emu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ppc64emu"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ppc64emu-pseries-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn mkbench() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../workloads/mkbench/mkbench.elf")
        .display()
        .to_string()
}

const EXIT_HOST_ERROR: i32 = 1;
const EXIT_USAGE: i32 = 2;

#[test]
fn version_names_the_strategy() {
    let o = emu(&["--version"]);
    assert!(o.status.success());
    let line = String::from_utf8(o.stdout).unwrap();
    assert!(
        line.starts_with(&format!(
            "ppc64emu {} (strategy: ",
            env!("CARGO_PKG_VERSION")
        )),
        "{line}"
    );
    let strategy = line
        .trim()
        .rsplit("strategy: ")
        .next()
        .unwrap()
        .trim_end_matches(')');
    assert!(
        ["baseline", "per-cpu-lock", "cputlb-no-bql"].contains(&strategy),
        "{line}"
    );
}

#[test]
fn help_lists_options_and_exit_codes() {
    let o = emu(&["--help"]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    for opt in [
        "-kernel",
        "-initrd",
        "-append",
        "-bios",
        "-smp",
        "-m ",
        "-machine",
        "--report",
        "--tlb-flush-mode",
        "--timeout",
        "--dump-dtb",
        "--pin",
        "--jit-cache-limit",
        "124",
    ] {
        assert!(text.contains(opt), "--help does not mention {opt}");
    }
}

#[test]
fn refusals_exit_2_and_name_the_option() {
    for (args, needle) in [
        (&["-enable-kvm"][..], "-enable-kvm"),
        (&["-kernel", "x", "-vga", "std"][..], "-vga"),
        (&["-smp", "0", "-kernel", "x"][..], "-smp 0"),
        (&["-smp", "4,threads=2", "-kernel", "x"][..], "threads"),
        (&["-m", "100M", "-kernel", "x"][..], "-m 100M"),
        (&["-m", "lots", "-kernel", "x"][..], "-m lots"),
        (&["-cpu", "power9", "-kernel", "x"][..], "power9"),
        (&["--tlb-flush-mode", "lazy"][..], "lazy"),
        (
            &["--jit-cache-limit", "0", "-kernel", "x"][..],
            "--jit-cache-limit 0",
        ),
        (
            &["--jit-cache-limit", "1.5M", "-kernel", "x"][..],
            "--jit-cache-limit 1.5M",
        ),
        (&["-nographic"][..], "-kernel"),
        (&["-rtc", "base=noon", "-kernel", "x"][..], "-rtc base=noon"),
        (&["-rtc", "clock=guest", "-kernel", "x"][..], "clock=guest"),
        (
            &["-smp", "4,sockets=2,cores=3", "-kernel", "x"][..],
            "does not match",
        ),
        (&["-initrd", "i.img", "--dump-dtb", "x.dtb"][..], "-initrd"),
    ] {
        let o = emu(args);
        assert_eq!(
            o.status.code(),
            Some(EXIT_USAGE),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains(needle),
            "{args:?}: '{}' does not name {needle}",
            stderr(&o)
        );
    }
}

#[test]
fn missing_and_invalid_guest_files_exit_1() {
    let o = emu(&["-kernel", "/nonexistent/vmlinux"]);
    assert_eq!(o.status.code(), Some(EXIT_HOST_ERROR));
    assert!(
        stderr(&o).contains("cannot read kernel '/nonexistent/vmlinux'"),
        "{}",
        stderr(&o)
    );

    let text = scratch("not-elf");
    std::fs::write(&text, "#!/bin/sh\n").unwrap();
    let o = emu(&["-kernel", text.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(EXIT_HOST_ERROR));
    assert!(
        stderr(&o).contains("is not a usable ELF image"),
        "{}",
        stderr(&o)
    );

    let big = scratch("big.initrd");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(600 << 20)
        .unwrap();
    let o = emu(&[
        "-m",
        "512M",
        "-kernel",
        &mkbench(),
        "-initrd",
        big.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(EXIT_HOST_ERROR));
    assert!(
        stderr(&o).contains("initrd") && stderr(&o).contains("does not fit"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_file(&big);

    let o = emu(&["-kernel", &mkbench(), "-bios", "/nonexistent/rom.bin"]);
    assert_eq!(o.status.code(), Some(EXIT_HOST_ERROR));
    assert!(stderr(&o).contains("cannot read bios"), "{}", stderr(&o));
}

#[test]
fn dump_dtb_with_the_bundled_guest_and_ignored_caps() {
    let out = scratch("mkbench.dtb");
    let o = emu(&[
        "-M",
        "pseries,cap-htm=off",
        "-cpu",
        "POWER8",
        "-accel",
        "tcg,thread=multi",
        "-smp",
        "3",
        "-m",
        "1G",
        "-nographic",
        "-no-reboot",
        "-kernel",
        &mkbench(),
        "-append",
        "units=4 size=5",
        "--dump-dtb",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning") && stderr(&o).contains("cap-htm"),
        "{}",
        stderr(&o)
    );
    let blob = std::fs::read(&out).unwrap();
    let f = fdt::Fdt::new(&blob).unwrap();
    assert_eq!(
        f.find_node("/cpus")
            .unwrap()
            .children()
            .filter(|c| c.name.starts_with("PowerPC,POWER8@"))
            .count(),
        3
    );
    assert_eq!(f.chosen().bootargs(), Some("units=4 size=5"));
    // mkbench's PT_LOAD segments: reserved at 0x400000 + p_paddr with their memory size.
    let elf = std::fs::read(mkbench()).unwrap();
    let file = object::read::elf::ElfFile64::<object::Endianness>::parse(&*elf).unwrap();
    use object::read::elf::ProgramHeader;
    let endian = file.endian();
    let loads: Vec<_> = file
        .elf_program_headers()
        .iter()
        .filter(|p| p.p_type(endian) == object::elf::PT_LOAD)
        .collect();
    let low = loads
        .iter()
        .map(|p| p.p_paddr(endian) & 0x0fff_ffff)
        .min()
        .unwrap()
        + 0x40_0000;
    let size: u64 = loads.iter().map(|p| p.p_memsz(endian)).sum();
    assert!(size > 0);
    assert!(
        f.memory_reservations()
            .any(|r| r.address() as u64 == low && r.size() as u64 == size),
        "kernel reservation {low:#x}+{size:#x}"
    );
}

#[test]
fn dump_dtb_to_an_unwritable_place_is_a_host_error() {
    let o = emu(&[
        "-kernel",
        &mkbench(),
        "--dump-dtb",
        "/nonexistent/dir/x.dtb",
    ]);
    assert_eq!(o.status.code(), Some(EXIT_HOST_ERROR));
    assert!(
        stderr(&o).contains("cannot write the device tree"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_unwritable_report_path_is_refused_before_the_guest_runs() {
    // The full-size guest would run for seconds and print its progress; the refusal comes first.
    let o = emu(&[
        "-kernel",
        &mkbench(),
        "-append",
        "units=64 size=400",
        "--report",
        "/nonexistent/dir/r.json",
    ]);
    assert_eq!(o.status.code(), Some(EXIT_HOST_ERROR));
    assert!(
        stderr(&o).contains("cannot write the run report"),
        "{}",
        stderr(&o)
    );
    assert!(
        o.stdout.is_empty(),
        "the guest ran: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}
