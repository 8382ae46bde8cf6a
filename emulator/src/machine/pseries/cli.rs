//! The system emulator's command line (the pseries subset of QEMU's, plus our options).

/// Entry of the system emulator; returns the process exit status.
pub fn main(args: &[String]) -> i32 {
    eprintln!("ppc64emu: system emulation not implemented yet ({} arguments)", args.len());
    2
}
