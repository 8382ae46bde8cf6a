//! `ppc64emu`: `ppc64emu user ELF [ARGS…]` runs a static ppc64le Linux program (user mode);
//! anything else is the pseries system emulator's command line (QEMU spelling).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let code = match args.get(1).map(String::as_str) {
        Some("user") => ppc64emu::user::main(&args[2..]),
        _ => ppc64emu::machine::pseries::cli::main(&args[1..]),
    };
    std::process::exit(code);
}
