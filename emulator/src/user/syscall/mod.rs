//! The Linux system calls of a single-threaded static ppc64le program.
//!
//! ABI (Power Architecture 64-bit ELF ABI, Linux): `sc` with the number in r0 and arguments
//! in r3–r8; the result comes back in r3. On failure r3 holds the positive errno and CR0[SO]
//! is set; on success CR0[SO] is clear. Guest file descriptors are host file descriptors (as
//! in QEMU's user mode), so files, pipes and terminals behave as they do natively; structures
//! whose ppc64 layout differs from the host's are converted field by field. Unknown calls
//! return ENOSYS; no guest input aborts the host.
//!
//! The calls are grouped by area, each a module with a `call` that answers the numbers it
//! owns; every host call goes through `host`, the one module with `unsafe`.

mod fs;
mod host;
mod info;
mod mm;
mod nr;
mod process;

use super::mem::{Fault, PROT_READ, ProcessMemory};
use crate::engine::Cpu;
use parking_lot::Mutex;
use std::ffi::CString;
use std::sync::Arc;

/// errno values (asm-generic, which powerpc uses; x86 and Arm hosts share them).
pub mod errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const ESRCH: i32 = 3;
    pub const EBADF: i32 = 9;
    pub const EAGAIN: i32 = 11;
    pub const ENOMEM: i32 = 12;
    pub const EFAULT: i32 = 14;
    pub const EEXIST: i32 = 17;
    pub const EINVAL: i32 = 22;
    pub const ENOTTY: i32 = 25;
    pub const ERANGE: i32 = 34;
    pub const ENAMETOOLONG: i32 = 36;
    pub const ENOSYS: i32 = 38;
}
use errno::*;

const AT_FDCWD: i32 = -100;
/// Longest path accepted from the guest (PATH_MAX).
const PATH_MAX: usize = 4096;
/// Largest single host read/write transfer; longer requests complete short, as they may.
const MAX_IO: usize = 1 << 24;
/// Signals whose default action is to do nothing (SIGCHLD, SIGCONT, SIGURG, SIGWINCH).
const IGNORED_BY_DEFAULT: [u64; 4] = [17, 18, 23, 28];

/// Why a system call did not return a value.
#[derive(Debug)]
pub enum Stop {
    /// Failure: r3 = errno, CR0[SO] set.
    Errno(i32),
    /// The process ends with this status (exit, or 128 + a fatal signal).
    Exit(i32),
}

impl From<Fault> for Stop {
    fn from(_: Fault) -> Self {
        Stop::Errno(EFAULT)
    }
}

pub type SysResult = Result<u64, Stop>;

/// Names of signals for fatal-signal messages.
pub fn signal_name(sig: u64) -> &'static str {
    match sig {
        1 => "Hangup",
        2 => "Interrupt",
        3 => "Quit",
        4 => "Illegal instruction",
        5 => "Trace/breakpoint trap",
        6 => "Aborted",
        7 => "Bus error",
        8 => "Floating point exception",
        9 => "Killed",
        11 => "Segmentation fault",
        13 => "Broken pipe",
        14 => "Alarm clock",
        15 => "Terminated",
        _ => "Unknown signal",
    }
}

/// The emulated process: its memory, program break and signal dispositions.
pub struct Process {
    pub mem: Arc<Mutex<ProcessMemory>>,
    pub brk_start: u64,
    pub brk: u64,
    /// Absolute host path of the program (`/proc/self/exe`).
    pub exe: Vec<u8>,
    /// Print each system call to stderr.
    pub strace: bool,
    /// `struct sigaction` of each signal as the guest set it: handler, flags, restorer, mask.
    sigactions: [[u64; 4]; 65],
    sigmask: u64,
    /// PR_SET_NAME's name (initially the program's file name, at most 15 bytes).
    thread_name: Vec<u8>,
}

impl Process {
    pub fn new(mem: Arc<Mutex<ProcessMemory>>, brk: u64, exe: Vec<u8>) -> Self {
        let mut thread_name = exe
            .rsplit(|&c| c == b'/')
            .next()
            .unwrap_or_default()
            .to_vec();
        thread_name.truncate(15);
        Self {
            thread_name,
            mem,
            brk_start: brk,
            brk,
            exe,
            strace: false,
            sigactions: [[0; 4]; 65],
            sigmask: 0,
        }
    }

    /// Performs the system call the guest just made with `sc`. Returns the exit status when
    /// the process ends.
    pub fn syscall(&mut self, cpu: &mut Cpu) -> Option<i32> {
        let n = cpu.st.gpr[0];
        let a: [u64; 6] = std::array::from_fn(|k| cpu.st.gpr[3 + k]);
        let r = self.dispatch(cpu, n, a);
        if self.strace {
            let shown = match &r {
                Ok(v) => format!("{:#x}", v),
                Err(Stop::Errno(e)) => {
                    format!("-1 errno={e} ({})", std::io::Error::from_raw_os_error(*e))
                }
                Err(Stop::Exit(c)) => format!("exit {c}"),
            };
            eprintln!(
                "{} {}({:#x}, {:#x}, {:#x}, {:#x}, {:#x}, {:#x}) = {}",
                std::process::id(),
                nr::name(n),
                a[0],
                a[1],
                a[2],
                a[3],
                a[4],
                a[5],
                shown
            );
        }
        match r {
            Ok(v) => {
                cpu.st.gpr[3] = v;
                cpu.st.set_cr_bit(3, false); // CR0[SO]: success
                None
            }
            Err(Stop::Errno(e)) => {
                cpu.st.gpr[3] = e as u64;
                cpu.st.set_cr_bit(3, true);
                None
            }
            Err(Stop::Exit(c)) => Some(c),
        }
    }

    /// The call `n` with arguments `a`: the first area that owns the number answers.
    fn dispatch(&mut self, cpu: &mut Cpu, n: u64, a: [u64; 6]) -> SysResult {
        type Area = fn(&mut Process, &mut Cpu, u64, [u64; 6]) -> Option<SysResult>;
        const AREAS: [Area; 4] = [
            |p, _, n, a| fs::call(p, n, a),
            mm::call,
            |p, _, n, a| process::call(p, n, a),
            |p, _, n, a| info::call(p, n, a),
        ];
        AREAS
            .iter()
            .find_map(|area| area(self, cpu, n, a))
            .unwrap_or(Err(Stop::Errno(ENOSYS)))
    }

    // --- guest-memory helpers of the areas ---

    fn put_words(&self, addr: u64, words: &[u64]) -> Result<(), Fault> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.mem.lock().write(addr, &bytes)
    }

    fn put_ids(&self, addrs: &[u64], ids: [u32; 3]) -> SysResult {
        for (&a, id) in addrs.iter().zip(ids) {
            self.mem.lock().write(a, &id.to_le_bytes())?;
        }
        Ok(0)
    }

    fn path(&self, addr: u64) -> Result<CString, Stop> {
        let mut mem = self.mem.lock();
        let s = mem
            .read_cstr(addr, PATH_MAX)
            .map_err(|_| match mem.check(addr, 1, PROT_READ) {
                Ok(()) => Stop::Errno(ENAMETOOLONG),
                Err(_) => Stop::Errno(EFAULT),
            })?;
        drop(mem);
        let s = if s == b"/proc/self/exe" {
            self.exe.clone()
        } else {
            s
        };
        Ok(CString::new(s).expect("no NUL inside"))
    }
}

/// Host randomness for AT_RANDOM and `getrandom`.
pub fn fill_random(buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        let r = host::getrandom(&mut buf[done..]);
        if r <= 0 {
            // No kernel randomness: fall back to a clock-seeded generator.
            let mut x = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos() as u64
                | 1;
            for b in &mut buf[done..] {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            return;
        }
        done += r as usize;
    }
}
