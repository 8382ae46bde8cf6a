//! User-mode runner: a static ppc64le Linux ELF on one vCPU with emulated syscalls.

/// Entry of `ppc64emu user ELF [ARGS…]`; returns the process exit status.
pub fn main(args: &[String]) -> i32 {
    eprintln!("ppc64emu user: not implemented yet ({} arguments)", args.len());
    2
}
