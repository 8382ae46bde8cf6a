//! The Linux system calls of a single-threaded static ppc64le program.
//!
//! ABI (Power Architecture 64-bit ELF ABI, Linux): `sc` with the number in r0 and arguments
//! in r3–r8; the result comes back in r3. On failure r3 holds the positive errno and CR0[SO]
//! is set; on success CR0[SO] is clear. Guest file descriptors are host file descriptors (as
//! in QEMU's user mode), so files, pipes and terminals behave as they do natively; structures
//! whose ppc64 layout differs from the host's are converted field by field. Unknown calls
//! return ENOSYS; no guest input aborts the host.

use super::loader::MMAP_TOP;
use super::mem::{Fault, MMAP_MIN, PROT_EXEC, PROT_READ, PROT_WRITE, ProcessMemory, page_up};
use crate::engine::Cpu;
use crate::softmmu::PAGE_MASK;
use parking_lot::Mutex;
use std::ffi::CString;
use std::sync::Arc;

/// System call numbers (arch/powerpc syscall table, 64-bit).
mod nr {
    pub const EXIT: u64 = 1;
    pub const READ: u64 = 3;
    pub const WRITE: u64 = 4;
    pub const OPEN: u64 = 5;
    pub const CLOSE: u64 = 6;
    pub const UNLINK: u64 = 10;
    pub const CHDIR: u64 = 12;
    pub const TIME: u64 = 13;
    pub const CHMOD: u64 = 15;
    pub const LSEEK: u64 = 19;
    pub const GETPID: u64 = 20;
    pub const GETUID: u64 = 24;
    pub const ACCESS: u64 = 33;
    pub const KILL: u64 = 37;
    pub const RENAME: u64 = 38;
    pub const MKDIR: u64 = 39;
    pub const RMDIR: u64 = 40;
    pub const DUP: u64 = 41;
    pub const PIPE: u64 = 42;
    pub const TIMES: u64 = 43;
    pub const BRK: u64 = 45;
    pub const GETGID: u64 = 47;
    pub const GETEUID: u64 = 49;
    pub const GETEGID: u64 = 50;
    pub const IOCTL: u64 = 54;
    pub const FCNTL: u64 = 55;
    pub const SETPGID: u64 = 57;
    pub const UMASK: u64 = 60;
    pub const DUP2: u64 = 63;
    pub const GETPPID: u64 = 64;
    pub const GETPGRP: u64 = 65;
    pub const SETSID: u64 = 66;
    pub const GETRLIMIT: u64 = 76;
    pub const GETRUSAGE: u64 = 77;
    pub const GETTIMEOFDAY: u64 = 78;
    pub const SYMLINK: u64 = 83;
    pub const READLINK: u64 = 85;
    pub const MMAP: u64 = 90;
    pub const MUNMAP: u64 = 91;
    pub const TRUNCATE: u64 = 92;
    pub const FTRUNCATE: u64 = 93;
    pub const FCHMOD: u64 = 94;
    pub const FCHOWN: u64 = 95;
    pub const STAT: u64 = 106;
    pub const LSTAT: u64 = 107;
    pub const FSTAT: u64 = 108;
    pub const SYSINFO: u64 = 116;
    pub const FSYNC: u64 = 118;
    pub const UNAME: u64 = 122;
    pub const MPROTECT: u64 = 125;
    pub const GETPGID: u64 = 132;
    pub const FCHDIR: u64 = 133;
    pub const PERSONALITY: u64 = 136;
    pub const LLSEEK: u64 = 140;
    pub const FLOCK: u64 = 143;
    pub const MSYNC: u64 = 144;
    pub const READV: u64 = 145;
    pub const WRITEV: u64 = 146;
    pub const GETSID: u64 = 147;
    pub const FDATASYNC: u64 = 148;
    pub const SCHED_YIELD: u64 = 158;
    pub const NANOSLEEP: u64 = 162;
    pub const MREMAP: u64 = 163;
    pub const GETRESUID: u64 = 165;
    pub const POLL: u64 = 167;
    pub const GETRESGID: u64 = 170;
    pub const PRCTL: u64 = 171;
    pub const RT_SIGACTION: u64 = 173;
    pub const RT_SIGPROCMASK: u64 = 174;
    pub const PREAD64: u64 = 179;
    pub const PWRITE64: u64 = 180;
    pub const GETCWD: u64 = 182;
    pub const SIGALTSTACK: u64 = 185;
    pub const UGETRLIMIT: u64 = 190;
    pub const GETDENTS64: u64 = 202;
    pub const MADVISE: u64 = 205;
    pub const MINCORE: u64 = 206;
    pub const GETTID: u64 = 207;
    pub const TKILL: u64 = 208;
    pub const FUTEX: u64 = 221;
    pub const SCHED_GETAFFINITY: u64 = 223;
    pub const SET_TID_ADDRESS: u64 = 232;
    pub const FADVISE64: u64 = 233;
    pub const EXIT_GROUP: u64 = 234;
    pub const CLOCK_GETTIME: u64 = 246;
    pub const CLOCK_GETRES: u64 = 247;
    pub const CLOCK_NANOSLEEP: u64 = 248;
    pub const TGKILL: u64 = 250;
    pub const UTIMES: u64 = 251;
    pub const OPENAT: u64 = 286;
    pub const MKDIRAT: u64 = 287;
    pub const FCHOWNAT: u64 = 289;
    pub const NEWFSTATAT: u64 = 291;
    pub const UNLINKAT: u64 = 292;
    pub const RENAMEAT: u64 = 293;
    pub const LINKAT: u64 = 294;
    pub const SYMLINKAT: u64 = 295;
    pub const READLINKAT: u64 = 296;
    pub const FCHMODAT: u64 = 297;
    pub const FACCESSAT: u64 = 298;
    pub const SET_ROBUST_LIST: u64 = 300;
    pub const UTIMENSAT: u64 = 304;
    pub const DUP3: u64 = 316;
    pub const PIPE2: u64 = 317;
    pub const PRLIMIT64: u64 = 325;
    pub const RENAMEAT2: u64 = 357;
    pub const GETRANDOM: u64 = 359;
    pub const MEMBARRIER: u64 = 365;
    pub const STATX: u64 = 383;
    pub const RSEQ: u64 = 387;
    pub const FACCESSAT2: u64 = 439;
}

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

/// Guest `open` flags whose values on powerpc differ from the generic ones.
const PPC_O_DIRECTORY: u64 = 0o40000;
const PPC_O_NOFOLLOW: u64 = 0o100000;
const PPC_O_LARGEFILE: u64 = 0o200000;
const PPC_O_DIRECT: u64 = 0o400000;

const AT_FDCWD: i32 = -100;
const MAP_SHARED: u64 = 0x01;
const MAP_PRIVATE: u64 = 0x02;
const MAP_FIXED: u64 = 0x10;
const MAP_ANONYMOUS: u64 = 0x20;
const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
const MREMAP_MAYMOVE: u64 = 1;
const MADV_DONTNEED: u64 = 4;
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

/// The host errno of the last failed libc call.
fn host_errno() -> Stop {
    Stop::Errno(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(EINVAL),
    )
}

/// A libc result (negative on failure) as a syscall result.
fn host(r: i64) -> SysResult {
    if r < 0 {
        Err(host_errno())
    } else {
        Ok(r as u64)
    }
}

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
                name(n),
                a[0],
                a[1],
                a[2],
                a[3],
                a[4],
                a[5],
                shown
            );
        }
        const CR0_SO: u32 = 0x1000_0000;
        match r {
            Ok(v) => {
                cpu.st.gpr[3] = v;
                cpu.st.cr &= !CR0_SO;
                None
            }
            Err(Stop::Errno(e)) => {
                cpu.st.gpr[3] = e as u64;
                cpu.st.cr |= CR0_SO;
                None
            }
            Err(Stop::Exit(c)) => Some(c),
        }
    }

    fn dispatch(&mut self, cpu: &mut Cpu, n: u64, a: [u64; 6]) -> SysResult {
        let fd = a[0] as i32;
        match n {
            nr::EXIT | nr::EXIT_GROUP => Err(Stop::Exit((a[0] & 0xff) as i32)),
            nr::READ => self.read(fd, a[1], a[2], None),
            nr::PREAD64 => self.read(fd, a[1], a[2], Some(a[3] as i64)),
            nr::WRITE => self.write(fd, a[1], a[2], None),
            nr::PWRITE64 => self.write(fd, a[1], a[2], Some(a[3] as i64)),
            nr::READV => self.readv(fd, a[1], a[2]),
            nr::WRITEV => self.writev(fd, a[1], a[2]),
            nr::OPEN => self.openat(AT_FDCWD, a[0], a[1], a[2]),
            nr::OPENAT => self.openat(a[0] as i32, a[1], a[2], a[3]),
            nr::CLOSE => host(unsafe { libc::close(fd) } as i64),
            nr::LSEEK => host(unsafe { libc::lseek(fd, a[1] as i64, a[2] as i32) }),
            nr::LLSEEK => {
                // glibc's lseek on ppc64: the offset in two 32-bit halves, the result stored.
                self.mem.lock().check(a[3], 8, PROT_WRITE)?;
                let off = ((a[1] as u32 as u64) << 32 | a[2] as u32 as u64) as i64;
                let pos = host(unsafe { libc::lseek(fd, off, a[4] as i32) })?;
                self.put_words(a[3], &[pos])?;
                Ok(0)
            }
            nr::DUP => host(unsafe { libc::dup(fd) } as i64),
            nr::DUP2 => {
                if a[0] == a[1] {
                    return host(unsafe { libc::fcntl(fd, libc::F_GETFD) } as i64).map(|_| a[1]);
                }
                host(unsafe { libc::dup2(fd, a[1] as i32) } as i64)
            }
            nr::DUP3 => host(unsafe { libc::dup3(fd, a[1] as i32, open_flags(a[2])) } as i64),
            nr::PIPE => self.pipe(a[0], 0),
            nr::PIPE2 => self.pipe(a[0], a[1]),
            nr::FCNTL => self.fcntl(fd, a[1], a[2]),
            nr::IOCTL => Err(Stop::Errno(ENOTTY)),
            nr::FSTAT => {
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                host(unsafe { libc::fstat(fd, &mut st) } as i64)?;
                self.put_stat(a[1], &st)
            }
            nr::STAT | nr::LSTAT => {
                let flags = if n == nr::LSTAT {
                    libc::AT_SYMLINK_NOFOLLOW as u64
                } else {
                    0
                };
                self.fstatat(AT_FDCWD, a[0], a[1], flags)
            }
            nr::NEWFSTATAT => self.fstatat(a[0] as i32, a[1], a[2], a[3]),
            nr::STATX => self.statx(a),
            nr::GETDENTS64 => self.getdents64(fd, a[1], a[2]),
            nr::READLINK => self.readlinkat(AT_FDCWD, a[0], a[1], a[2]),
            nr::READLINKAT => self.readlinkat(a[0] as i32, a[1], a[2], a[3]),
            nr::ACCESS => self.path_call(libc::SYS_faccessat, AT_FDCWD, a[0], [a[1], 0, 0]),
            nr::FACCESSAT => self.path_call(libc::SYS_faccessat, a[0] as i32, a[1], [a[2], 0, 0]),
            nr::FACCESSAT2 => {
                self.path_call(libc::SYS_faccessat2, a[0] as i32, a[1], [a[2], a[3], 0])
            }
            nr::UNLINK => self.path_call(libc::SYS_unlinkat, AT_FDCWD, a[0], [0, 0, 0]),
            nr::RMDIR => self.path_call(
                libc::SYS_unlinkat,
                AT_FDCWD,
                a[0],
                [libc::AT_REMOVEDIR as u64, 0, 0],
            ),
            nr::UNLINKAT => self.path_call(libc::SYS_unlinkat, a[0] as i32, a[1], [a[2], 0, 0]),
            nr::MKDIR => self.path_call(libc::SYS_mkdirat, AT_FDCWD, a[0], [a[1], 0, 0]),
            nr::MKDIRAT => self.path_call(libc::SYS_mkdirat, a[0] as i32, a[1], [a[2], 0, 0]),
            nr::CHMOD => self.path_call(libc::SYS_fchmodat, AT_FDCWD, a[0], [a[1], 0, 0]),
            nr::FCHMODAT => self.path_call(libc::SYS_fchmodat, a[0] as i32, a[1], [a[2], 0, 0]),
            nr::FCHOWNAT => {
                self.path_call(libc::SYS_fchownat, a[0] as i32, a[1], [a[2], a[3], a[4]])
            }
            nr::CHDIR => self.path_call(libc::SYS_chdir, AT_FDCWD, a[0], [0, 0, 0]),
            nr::TRUNCATE => self.path_call(libc::SYS_truncate, AT_FDCWD, a[0], [a[1], 0, 0]),
            nr::RENAME => self.two_path_call(AT_FDCWD, a[0], AT_FDCWD, a[1], 0, true),
            nr::RENAMEAT => self.two_path_call(a[0] as i32, a[1], a[2] as i32, a[3], 0, true),
            nr::RENAMEAT2 => self.two_path_call(a[0] as i32, a[1], a[2] as i32, a[3], a[4], true),
            nr::LINKAT => self.two_path_call(a[0] as i32, a[1], a[2] as i32, a[3], a[4], false),
            nr::SYMLINK => self.symlinkat(a[0], AT_FDCWD, a[1]),
            nr::SYMLINKAT => self.symlinkat(a[0], a[1] as i32, a[2]),
            nr::UTIMENSAT => self.utimensat(a),
            nr::FCHDIR => host(unsafe { libc::fchdir(fd) } as i64),
            nr::FCHMOD => host(unsafe { libc::fchmod(fd, a[1] as u32) } as i64),
            nr::FCHOWN => host(unsafe { libc::fchown(fd, a[1] as u32, a[2] as u32) } as i64),
            nr::FTRUNCATE => host(unsafe { libc::ftruncate(fd, a[1] as i64) } as i64),
            nr::FSYNC => host(unsafe { libc::fsync(fd) } as i64),
            nr::FDATASYNC => host(unsafe { libc::fdatasync(fd) } as i64),
            nr::FLOCK => host(unsafe { libc::flock(fd, a[1] as i32) } as i64),
            nr::FADVISE64 => Ok(0),
            nr::GETCWD => self.getcwd(a[0], a[1]),
            nr::UMASK => Ok(unsafe { libc::umask(a[0] as u32 & 0o777) } as u64),
            nr::BRK => Ok(self.do_brk(cpu, a[0])),
            nr::MMAP => self.mmap(cpu, a),
            nr::MUNMAP => self.munmap(cpu, a[0], a[1]),
            nr::MPROTECT => self.mprotect(cpu, a[0], a[1], a[2]),
            nr::MREMAP => self.mremap(cpu, a),
            nr::MADVISE => self.madvise(cpu, a[0], a[1], a[2]),
            nr::MSYNC | nr::MINCORE => Ok(0),
            nr::UNAME => self.uname(a[0]),
            nr::GETPID | nr::GETTID => Ok(std::process::id() as u64),
            nr::GETPPID => Ok(unsafe { libc::getppid() } as u64),
            nr::GETPGRP => Ok(unsafe { libc::getpgrp() } as u64),
            nr::GETPGID => host(unsafe { libc::getpgid(a[0] as i32) } as i64),
            nr::GETSID => host(unsafe { libc::getsid(a[0] as i32) } as i64),
            nr::SETPGID => host(unsafe { libc::setpgid(a[0] as i32, a[1] as i32) } as i64),
            nr::SETSID => host(unsafe { libc::setsid() } as i64),
            nr::GETUID => Ok(unsafe { libc::getuid() } as u64),
            nr::GETEUID => Ok(unsafe { libc::geteuid() } as u64),
            nr::GETGID => Ok(unsafe { libc::getgid() } as u64),
            nr::GETEGID => Ok(unsafe { libc::getegid() } as u64),
            nr::GETRESUID => self.put_ids(
                &[a[0], a[1], a[2]],
                [
                    unsafe { libc::getuid() },
                    unsafe { libc::geteuid() },
                    unsafe { libc::geteuid() },
                ],
            ),
            nr::GETRESGID => self.put_ids(
                &[a[0], a[1], a[2]],
                [
                    unsafe { libc::getgid() },
                    unsafe { libc::getegid() },
                    unsafe { libc::getegid() },
                ],
            ),
            nr::SET_TID_ADDRESS => Ok(std::process::id() as u64),
            nr::SET_ROBUST_LIST => Ok(0),
            nr::RSEQ | nr::MEMBARRIER => Err(Stop::Errno(ENOSYS)),
            nr::PERSONALITY => Ok(0),
            nr::PRCTL => self.prctl(a[0], a[1]),
            nr::SCHED_YIELD => Ok(0),
            nr::SCHED_GETAFFINITY => {
                // One vCPU: CPU 0 only.
                let len = a[1] as usize;
                if len < 8 || !len.is_multiple_of(8) {
                    return Err(Stop::Errno(EINVAL));
                }
                self.mem.lock().write(a[2], &1u64.to_le_bytes())?;
                Ok(8)
            }
            nr::FUTEX => self.futex(a),
            nr::GETRANDOM => self.getrandom(a[0], a[1], a[2]),
            nr::CLOCK_GETTIME | nr::CLOCK_GETRES => {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                let r = if n == nr::CLOCK_GETTIME {
                    unsafe { libc::clock_gettime(a[0] as i32, &mut ts) }
                } else {
                    unsafe { libc::clock_getres(a[0] as i32, &mut ts) }
                };
                host(r as i64)?;
                if a[1] != 0 {
                    self.put_words(a[1], &[ts.tv_sec as u64, ts.tv_nsec as u64])?;
                }
                Ok(0)
            }
            nr::GETTIMEOFDAY => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                if a[0] != 0 {
                    self.put_words(a[0], &[now.as_secs(), now.subsec_micros() as u64])?;
                }
                if a[1] != 0 {
                    self.put_words(a[1], &[0])?;
                }
                Ok(0)
            }
            nr::TIME => {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs();
                if a[0] != 0 {
                    self.put_words(a[0], &[t])?;
                }
                Ok(t)
            }
            nr::NANOSLEEP => self.sleep(a[0]),
            nr::CLOCK_NANOSLEEP => {
                const TIMER_ABSTIME: u64 = 1;
                if a[1] & TIMER_ABSTIME != 0 {
                    return Err(Stop::Errno(EINVAL));
                }
                self.sleep(a[2])
            }
            nr::TIMES => {
                let mut t: libc::tms = unsafe { std::mem::zeroed() };
                let r = unsafe { libc::times(&mut t) };
                if a[0] != 0 {
                    self.put_words(
                        a[0],
                        &[
                            t.tms_utime as u64,
                            t.tms_stime as u64,
                            t.tms_cutime as u64,
                            t.tms_cstime as u64,
                        ],
                    )?;
                }
                Ok(r as u64)
            }
            nr::GETRUSAGE => {
                let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
                host(unsafe { libc::getrusage(a[0] as i32, &mut ru) } as i64)?;
                // 64-bit Linux layout, the same on ppc64: two timevals, then 14 longs.
                let mut w = vec![
                    ru.ru_utime.tv_sec as u64,
                    ru.ru_utime.tv_usec as u64,
                    ru.ru_stime.tv_sec as u64,
                    ru.ru_stime.tv_usec as u64,
                ];
                w.extend(
                    [
                        ru.ru_maxrss,
                        ru.ru_ixrss,
                        ru.ru_idrss,
                        ru.ru_isrss,
                        ru.ru_minflt,
                        ru.ru_majflt,
                        ru.ru_nswap,
                        ru.ru_inblock,
                        ru.ru_oublock,
                        ru.ru_msgsnd,
                        ru.ru_msgrcv,
                        ru.ru_nsignals,
                        ru.ru_nvcsw,
                        ru.ru_nivcsw,
                    ]
                    .map(|v| v as u64),
                );
                self.put_words(a[1], &w)?;
                Ok(0)
            }
            nr::SYSINFO => self.sysinfo(a[0]),
            nr::GETRLIMIT | nr::UGETRLIMIT => self.get_rlimit(a[0], a[1]),
            nr::PRLIMIT64 => {
                if a[0] != 0 && a[0] != std::process::id() as u64 {
                    return Err(Stop::Errno(ESRCH));
                }
                // New limits are accepted and ignored: they would apply to the emulator.
                if a[3] != 0 {
                    self.get_rlimit(a[1], a[3])
                } else {
                    Ok(0)
                }
            }
            nr::RT_SIGACTION => self.sigaction(a[0], a[1], a[2]),
            nr::RT_SIGPROCMASK => self.sigprocmask(a[0], a[1], a[2]),
            nr::SIGALTSTACK => {
                if a[1] != 0 {
                    // stack_t: ss_sp, ss_flags (SS_DISABLE), ss_size.
                    self.put_words(a[1], &[0, 2, 0])?;
                }
                Ok(0)
            }
            nr::KILL | nr::TKILL | nr::TGKILL => {
                let (pid, sig) = match n {
                    nr::TGKILL => (a[1], a[2]),
                    _ => (a[0], a[1]),
                };
                let me = std::process::id() as u64;
                if pid != me && !(n == nr::KILL && pid == 0) {
                    return Err(Stop::Errno(EPERM));
                }
                self.raise(sig)
            }
            nr::POLL => Err(Stop::Errno(ENOSYS)),
            nr::UTIMES => Err(Stop::Errno(ENOSYS)),
            _ => Err(Stop::Errno(ENOSYS)),
        }
    }

    // --- memory helpers ---

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

    // --- files ---

    fn read(&mut self, fd: i32, buf: u64, len: u64, at: Option<i64>) -> SysResult {
        let len = (len as usize).min(MAX_IO);
        self.mem.lock().check(buf, len as u64, PROT_WRITE)?;
        let mut data = vec![0u8; len];
        let r = match at {
            Some(off) => unsafe { libc::pread(fd, data.as_mut_ptr().cast(), len, off) },
            None => unsafe { libc::read(fd, data.as_mut_ptr().cast(), len) },
        };
        let n = host(r as i64)? as usize;
        self.mem.lock().write(buf, &data[..n])?;
        Ok(n as u64)
    }

    fn write(&mut self, fd: i32, buf: u64, len: u64, at: Option<i64>) -> SysResult {
        let len = (len as usize).min(MAX_IO);
        let data = self.mem.lock().read_vec(buf, len)?;
        let r = match at {
            Some(off) => unsafe { libc::pwrite(fd, data.as_ptr().cast(), len, off) },
            None => unsafe { libc::write(fd, data.as_ptr().cast(), len) },
        };
        self.written(r as i64)
    }

    /// The result of a host write. The emulator ignores SIGPIPE, so a write to a closed pipe
    /// fails with EPIPE; the guest gets the signal's effect instead: by default it dies
    /// (silently, as `cmd | head` expects).
    fn written(&mut self, r: i64) -> SysResult {
        const SIGPIPE: u64 = 13;
        let r = host(r);
        if let Err(Stop::Errno(libc::EPIPE)) = r
            && self.sigactions[SIGPIPE as usize][0] == 0
            && self.sigmask & (1 << (SIGPIPE - 1)) == 0
        {
            return Err(Stop::Exit(128 + SIGPIPE as i32));
        }
        r
    }

    /// The guest's `struct iovec` array: (base, len) pairs.
    fn iovecs(&self, iov: u64, count: u64) -> Result<Vec<(u64, u64)>, Stop> {
        if count > 1024 {
            return Err(Stop::Errno(EINVAL));
        }
        let raw = self.mem.lock().read_vec(iov, 16 * count as usize)?;
        Ok(raw
            .chunks(16)
            .map(|c| {
                (
                    u64::from_le_bytes(c[..8].try_into().unwrap()),
                    u64::from_le_bytes(c[8..].try_into().unwrap()),
                )
            })
            .collect())
    }

    fn writev(&mut self, fd: i32, iov: u64, count: u64) -> SysResult {
        let mut data = Vec::new();
        for (base, len) in self.iovecs(iov, count)? {
            let len = (len as usize).min(MAX_IO.saturating_sub(data.len()));
            data.extend(self.mem.lock().read_vec(base, len)?);
        }
        self.written(unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) } as i64)
    }

    fn readv(&mut self, fd: i32, iov: u64, count: u64) -> SysResult {
        let vecs = self.iovecs(iov, count)?;
        let total: usize = vecs
            .iter()
            .map(|v| v.1 as usize)
            .fold(0, usize::saturating_add)
            .min(MAX_IO);
        for &(base, len) in &vecs {
            self.mem.lock().check(base, len, PROT_WRITE)?;
        }
        let mut data = vec![0u8; total];
        let n = host(unsafe { libc::read(fd, data.as_mut_ptr().cast(), total) } as i64)? as usize;
        let mut off = 0;
        for (base, len) in vecs {
            if off >= n {
                break;
            }
            let k = (len as usize).min(n - off);
            self.mem.lock().write(base, &data[off..off + k])?;
            off += k;
        }
        Ok(n as u64)
    }

    fn openat(&mut self, dirfd: i32, path: u64, flags: u64, mode: u64) -> SysResult {
        let p = self.path(path)?;
        host(
            unsafe { libc::openat(dirfd, p.as_ptr(), open_flags(flags), mode as libc::c_uint) }
                as i64,
        )
    }

    fn pipe(&mut self, out: u64, flags: u64) -> SysResult {
        self.mem.lock().check(out, 8, PROT_WRITE)?;
        let mut fds = [0i32; 2];
        host(unsafe { libc::pipe2(fds.as_mut_ptr(), open_flags(flags)) } as i64)?;
        let mut b = fds[0].to_le_bytes().to_vec();
        b.extend(fds[1].to_le_bytes());
        self.mem.lock().write(out, &b)?;
        Ok(0)
    }

    fn fcntl(&mut self, fd: i32, cmd: u64, arg: u64) -> SysResult {
        const F_DUPFD: u64 = 0;
        const F_GETFD: u64 = 1;
        const F_SETFD: u64 = 2;
        const F_GETFL: u64 = 3;
        const F_SETFL: u64 = 4;
        const F_DUPFD_CLOEXEC: u64 = 1030;
        match cmd {
            F_DUPFD => host(unsafe { libc::fcntl(fd, libc::F_DUPFD, arg as i32) } as i64),
            F_DUPFD_CLOEXEC => {
                host(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, arg as i32) } as i64)
            }
            F_GETFD => host(unsafe { libc::fcntl(fd, libc::F_GETFD) } as i64),
            F_SETFD => host(unsafe { libc::fcntl(fd, libc::F_SETFD, arg as i32) } as i64),
            F_GETFL => host(unsafe { libc::fcntl(fd, libc::F_GETFL) } as i64)
                .map(|f| guest_open_flags(f as i32)),
            F_SETFL => host(unsafe { libc::fcntl(fd, libc::F_SETFL, open_flags(arg)) } as i64),
            _ => Err(Stop::Errno(EINVAL)),
        }
    }

    /// Writes a host `stat` as the ppc64 `struct stat` (144 bytes). (Field types vary
    /// between hosts, hence the casts.)
    #[allow(clippy::unnecessary_cast)]
    fn put_stat(&self, addr: u64, st: &libc::stat) -> SysResult {
        let mut b = Vec::with_capacity(144);
        let w = |b: &mut Vec<u8>, v: u64| b.extend(v.to_le_bytes());
        w(&mut b, st.st_dev);
        w(&mut b, st.st_ino);
        w(&mut b, st.st_nlink as u64);
        b.extend((st.st_mode as u32).to_le_bytes());
        b.extend((st.st_uid as u32).to_le_bytes());
        b.extend((st.st_gid as u32).to_le_bytes());
        b.extend([0u8; 4]);
        w(&mut b, st.st_rdev);
        w(&mut b, st.st_size as u64);
        w(&mut b, st.st_blksize as u64);
        w(&mut b, st.st_blocks as u64);
        for (s, ns) in [
            (st.st_atime, st.st_atime_nsec),
            (st.st_mtime, st.st_mtime_nsec),
            (st.st_ctime, st.st_ctime_nsec),
        ] {
            w(&mut b, s as u64);
            w(&mut b, ns as u64);
        }
        b.extend([0u8; 24]);
        debug_assert_eq!(b.len(), 144);
        self.mem.lock().write(addr, &b)?;
        Ok(0)
    }

    fn fstatat(&mut self, dirfd: i32, path: u64, buf: u64, flags: u64) -> SysResult {
        let p = self.path(path)?;
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        host(unsafe { libc::fstatat(dirfd, p.as_ptr(), &mut st, at_flags(flags)) } as i64)?;
        self.put_stat(buf, &st)
    }

    /// `statx` has one layout on every architecture: copied through.
    fn statx(&mut self, a: [u64; 6]) -> SysResult {
        let p = self.path(a[1])?;
        let mut buf = [0u8; 256];
        host(unsafe {
            libc::syscall(
                libc::SYS_statx,
                a[0] as i32,
                p.as_ptr(),
                at_flags(a[2]),
                a[3] as u32,
                buf.as_mut_ptr(),
            )
        })?;
        self.mem.lock().write(a[4], &buf)?;
        Ok(0)
    }

    /// `linux_dirent64` has one layout on every architecture: copied through.
    fn getdents64(&mut self, fd: i32, buf: u64, len: u64) -> SysResult {
        let len = (len as usize).min(1 << 20);
        self.mem.lock().check(buf, len as u64, PROT_WRITE)?;
        let mut data = vec![0u8; len];
        let n = host(unsafe { libc::syscall(libc::SYS_getdents64, fd, data.as_mut_ptr(), len) })?
            as usize;
        self.mem.lock().write(buf, &data[..n])?;
        Ok(n as u64)
    }

    fn readlinkat(&mut self, dirfd: i32, path: u64, buf: u64, len: u64) -> SysResult {
        let raw = self.mem.lock().read_cstr(path, PATH_MAX)?;
        let target = if raw == b"/proc/self/exe" {
            self.exe.clone()
        } else {
            let p = CString::new(raw).expect("no NUL inside");
            let mut out = vec![0u8; PATH_MAX];
            let n = host(unsafe {
                libc::readlinkat(dirfd, p.as_ptr(), out.as_mut_ptr().cast(), out.len())
            } as i64)?;
            out.truncate(n as usize);
            out
        };
        let n = target.len().min(len as usize);
        self.mem.lock().write(buf, &target[..n])?;
        Ok(n as u64)
    }

    /// A host `*at` call whose only pointer argument is one path.
    fn path_call(
        &mut self,
        host_nr: libc::c_long,
        dirfd: i32,
        path: u64,
        rest: [u64; 3],
    ) -> SysResult {
        let p = self.path(path)?;
        let r = if host_nr == libc::SYS_chdir {
            unsafe { libc::syscall(host_nr, p.as_ptr()) }
        } else if host_nr == libc::SYS_truncate {
            unsafe { libc::syscall(host_nr, p.as_ptr(), rest[0] as i64) }
        } else {
            unsafe { libc::syscall(host_nr, dirfd, p.as_ptr(), rest[0], rest[1], rest[2]) }
        };
        host(r)
    }

    /// `renameat2` (rename = true) or `linkat`.
    fn two_path_call(
        &mut self,
        d1: i32,
        p1: u64,
        d2: i32,
        p2: u64,
        flags: u64,
        rename: bool,
    ) -> SysResult {
        let (a, b) = (self.path(p1)?, self.path(p2)?);
        let nr = if rename {
            libc::SYS_renameat2
        } else {
            libc::SYS_linkat
        };
        host(unsafe { libc::syscall(nr, d1, a.as_ptr(), d2, b.as_ptr(), flags as u32) })
    }

    fn symlinkat(&mut self, target: u64, dirfd: i32, path: u64) -> SysResult {
        let (t, p) = (self.path(target)?, self.path(path)?);
        host(unsafe { libc::symlinkat(t.as_ptr(), dirfd, p.as_ptr()) } as i64)
    }

    fn utimensat(&mut self, a: [u64; 6]) -> SysResult {
        let p = if a[1] == 0 {
            None
        } else {
            Some(self.path(a[1])?)
        };
        let times = if a[2] == 0 {
            None
        } else {
            let w = self.mem.lock().read_vec(a[2], 32)?;
            let word = |k: usize| i64::from_le_bytes(w[8 * k..8 * k + 8].try_into().unwrap());
            Some([
                libc::timespec {
                    tv_sec: word(0),
                    tv_nsec: word(1),
                },
                libc::timespec {
                    tv_sec: word(2),
                    tv_nsec: word(3),
                },
            ])
        };
        let pp = p.as_ref().map_or(std::ptr::null(), |p| p.as_ptr());
        let tp = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
        host(unsafe { libc::syscall(libc::SYS_utimensat, a[0] as i32, pp, tp, at_flags(a[3])) })
    }

    fn getcwd(&mut self, buf: u64, len: u64) -> SysResult {
        let cwd =
            std::env::current_dir().map_err(|e| Stop::Errno(e.raw_os_error().unwrap_or(ENOENT)))?;
        let mut b = cwd.into_os_string().into_encoded_bytes();
        b.push(0);
        if b.len() as u64 > len {
            return Err(Stop::Errno(ERANGE));
        }
        self.mem.lock().write(buf, &b)?;
        Ok(b.len() as u64)
    }

    // --- memory management ---

    fn do_brk(&mut self, cpu: &mut Cpu, want: u64) -> u64 {
        if want < self.brk_start {
            return self.brk;
        }
        let (old_top, new_top) = (page_up(self.brk), page_up(want));
        let mut mem = self.mem.lock();
        if new_top > old_top {
            if new_top > MMAP_TOP || mem.any_mapped(old_top, new_top) {
                return self.brk;
            }
            mem.map(old_top, new_top, PROT_READ | PROT_WRITE);
        } else if new_top < old_top {
            mem.unmap(new_top, old_top);
            cpu.mmu.tlb.flush_all();
        }
        self.brk = want;
        want
    }

    fn mmap(&mut self, cpu: &mut Cpu, a: [u64; 6]) -> SysResult {
        let (addr, len, prot, flags, fd, off) =
            (a[0], a[1], guest_prot(a[2]), a[3], a[4] as i32, a[5]);
        if len == 0 || off & !PAGE_MASK != 0 || !matches!(flags & 3, MAP_SHARED | MAP_PRIVATE | 3) {
            return Err(Stop::Errno(EINVAL));
        }
        let len = page_up(len);
        if len == 0 || len > MMAP_TOP {
            return Err(Stop::Errno(ENOMEM));
        }
        let mut mem = self.mem.lock();
        let start = if flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0 {
            if addr & !PAGE_MASK != 0
                || addr
                    .checked_add(len)
                    .is_none_or(|e| e > MMAP_TOP.max(super::loader::STACK_TOP))
            {
                return Err(Stop::Errno(EINVAL));
            }
            if flags & MAP_FIXED_NOREPLACE != 0
                && flags & MAP_FIXED == 0
                && mem.any_mapped(addr, addr + len)
            {
                return Err(Stop::Errno(EEXIST));
            }
            addr
        } else {
            let hint = addr & PAGE_MASK;
            if hint >= MMAP_MIN
                && hint.checked_add(len).is_some_and(|e| e <= MMAP_TOP)
                && !mem.any_mapped(hint, hint + len)
            {
                hint
            } else {
                mem.find_free(len, MMAP_MIN, MMAP_TOP)
                    .ok_or(Stop::Errno(ENOMEM))?
            }
        };
        let mut contents = Vec::new();
        if flags & MAP_ANONYMOUS == 0 {
            // File mapping: a private copy of the file's bytes (writes are not written back).
            contents = vec![0u8; len as usize];
            let mut got = 0usize;
            while got < contents.len() {
                let r = unsafe {
                    libc::pread(
                        fd,
                        contents[got..].as_mut_ptr().cast(),
                        contents.len() - got,
                        (off + got as u64) as i64,
                    )
                };
                if r < 0 {
                    return Err(host_errno());
                }
                if r == 0 {
                    break;
                }
                got += r as usize;
            }
            contents.truncate(got);
        }
        mem.map(start, start + len, prot);
        mem.poke(start, &contents).expect("just mapped");
        drop(mem);
        cpu.mmu.tlb.flush_all();
        Ok(start)
    }

    fn munmap(&mut self, cpu: &mut Cpu, addr: u64, len: u64) -> SysResult {
        if addr & !PAGE_MASK != 0 || len == 0 || addr.checked_add(len).is_none() {
            return Err(Stop::Errno(EINVAL));
        }
        self.mem.lock().unmap(addr, page_up(addr + len));
        cpu.mmu.tlb.flush_all();
        Ok(0)
    }

    fn mprotect(&mut self, cpu: &mut Cpu, addr: u64, len: u64, prot: u64) -> SysResult {
        if addr & !PAGE_MASK != 0 || addr.checked_add(len).is_none() {
            return Err(Stop::Errno(EINVAL));
        }
        if len == 0 {
            return Ok(0);
        }
        if !self
            .mem
            .lock()
            .protect(addr, page_up(addr + len), guest_prot(prot))
        {
            return Err(Stop::Errno(ENOMEM));
        }
        cpu.mmu.tlb.flush_all();
        Ok(0)
    }

    fn mremap(&mut self, cpu: &mut Cpu, a: [u64; 6]) -> SysResult {
        let (old, old_len, new_len, flags) = (a[0], page_up(a[1]), page_up(a[2]), a[3]);
        if old & !PAGE_MASK != 0 || new_len == 0 || flags & !MREMAP_MAYMOVE != 0 {
            return Err(Stop::Errno(EINVAL));
        }
        let mut mem = self.mem.lock();
        let Some((vstart, vend, _)) = mem.vma_at(old) else {
            return Err(Stop::Errno(EFAULT));
        };
        if old.checked_add(old_len).is_none_or(|e| e > vend) {
            return Err(Stop::Errno(EFAULT));
        }
        let r = if new_len <= old_len {
            mem.unmap(old + new_len, old + old_len);
            old
        } else if vend == old + old_len
            && old + new_len <= MMAP_TOP
            && !mem.any_mapped(vend, old + new_len)
        {
            mem.set_end(vstart, old + new_len);
            old
        } else if flags & MREMAP_MAYMOVE != 0 {
            let new = mem
                .find_free(new_len, MMAP_MIN, MMAP_TOP)
                .ok_or(Stop::Errno(ENOMEM))?;
            mem.relocate(old, old_len, new);
            mem.set_end(new, new + new_len);
            new
        } else {
            return Err(Stop::Errno(ENOMEM));
        };
        drop(mem);
        cpu.mmu.tlb.flush_all();
        Ok(r)
    }

    fn madvise(&mut self, cpu: &mut Cpu, addr: u64, len: u64, advice: u64) -> SysResult {
        if addr & !PAGE_MASK != 0 || addr.checked_add(len).is_none() {
            return Err(Stop::Errno(EINVAL));
        }
        if advice == MADV_DONTNEED {
            self.mem.lock().discard(addr, page_up(addr + len));
            cpu.mmu.tlb.flush_all();
        }
        Ok(0)
    }

    // --- system information ---

    fn uname(&mut self, buf: u64) -> SysResult {
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        host(unsafe { libc::uname(&mut u) } as i64)?;
        let field = |s: &[libc::c_char]| -> Vec<u8> {
            let mut v: Vec<u8> = s
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .take(64)
                .collect();
            v.resize(65, 0);
            v
        };
        let mut b = Vec::with_capacity(6 * 65);
        b.extend(field(&u.sysname));
        b.extend(field(&u.nodename));
        b.extend(field(&u.release));
        b.extend(field(&u.version));
        let mut machine = b"ppc64le".to_vec();
        machine.resize(65, 0);
        b.extend(machine);
        b.extend(field(&u.domainname));
        self.mem.lock().write(buf, &b)?;
        Ok(0)
    }

    fn sysinfo(&mut self, buf: u64) -> SysResult {
        let mut s: libc::sysinfo = unsafe { std::mem::zeroed() };
        host(unsafe { libc::sysinfo(&mut s) } as i64)?;
        // 64-bit layout: uptime, loads[3], totalram, freeram, sharedram, bufferram,
        // totalswap, freeswap (longs), procs (u16) + pad, totalhigh, freehigh, mem_unit (u32).
        let mut b = Vec::with_capacity(112);
        for v in [
            s.uptime as u64,
            s.loads[0],
            s.loads[1],
            s.loads[2],
            s.totalram,
            s.freeram,
            s.sharedram,
            s.bufferram,
            s.totalswap,
            s.freeswap,
        ] {
            b.extend(v.to_le_bytes());
        }
        b.extend((s.procs as u64).to_le_bytes());
        b.extend((s.totalhigh as u64).to_le_bytes());
        b.extend((s.freehigh as u64).to_le_bytes());
        b.extend((s.mem_unit as u64).to_le_bytes());
        self.mem.lock().write(buf, &b)?;
        Ok(0)
    }

    fn get_rlimit(&mut self, res: u64, out: u64) -> SysResult {
        const RLIMIT_STACK: u64 = 3;
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if res > 15 {
            return Err(Stop::Errno(EINVAL));
        }
        host(unsafe { libc::getrlimit(res as _, &mut r) } as i64)?;
        if res == RLIMIT_STACK {
            // The guest stack is a fixed mapping.
            r.rlim_cur = super::loader::STACK_SIZE;
        }
        self.put_words(out, &[r.rlim_cur, r.rlim_max])?;
        Ok(0)
    }

    fn getrandom(&mut self, buf: u64, len: u64, _flags: u64) -> SysResult {
        let len = (len as usize).min(1 << 20);
        let mut data = vec![0u8; len];
        fill_random(&mut data);
        self.mem.lock().write(buf, &data)?;
        Ok(len as u64)
    }

    fn sleep(&mut self, req: u64) -> SysResult {
        let w = self.mem.lock().read_vec(req, 16)?;
        let (s, ns) = (
            i64::from_le_bytes(w[..8].try_into().unwrap()),
            i64::from_le_bytes(w[8..].try_into().unwrap()),
        );
        if s < 0 || !(0..1_000_000_000).contains(&ns) {
            return Err(Stop::Errno(EINVAL));
        }
        std::thread::sleep(std::time::Duration::new(s as u64, ns as u32));
        Ok(0)
    }

    /// One thread: a wait whose value matches could never be woken.
    fn futex(&mut self, a: [u64; 6]) -> SysResult {
        const FUTEX_WAIT: u64 = 0;
        const FUTEX_WAKE: u64 = 1;
        const FUTEX_WAIT_BITSET: u64 = 9;
        const FUTEX_WAKE_BITSET: u64 = 10;
        match a[1] & 0x7f {
            FUTEX_WAKE | FUTEX_WAKE_BITSET => Ok(0),
            FUTEX_WAIT | FUTEX_WAIT_BITSET => {
                let mut v = [0u8; 4];
                self.mem.lock().read(a[0], &mut v)?;
                if u32::from_le_bytes(v) != a[2] as u32 {
                    return Err(Stop::Errno(EAGAIN));
                }
                eprintln!("ppc64emu: the only thread waits on a futex nobody can wake (deadlock)");
                Err(Stop::Exit(128 + 6))
            }
            _ => Err(Stop::Errno(ENOSYS)),
        }
    }

    /// Only the thread name is supported (busybox and glibc set it); it is kept, not applied
    /// to the host thread.
    fn prctl(&mut self, option: u64, arg: u64) -> SysResult {
        const PR_SET_NAME: u64 = 15;
        const PR_GET_NAME: u64 = 16;
        match option {
            PR_SET_NAME => {
                let mut name = self.mem.lock().read_cstr(arg, PATH_MAX)?;
                name.truncate(15);
                self.thread_name = name;
                Ok(0)
            }
            PR_GET_NAME => {
                let mut name = self.thread_name.clone();
                name.resize(16, 0);
                self.mem.lock().write(arg, &name)?;
                Ok(0)
            }
            _ => Err(Stop::Errno(EINVAL)),
        }
    }

    // --- signals (dispositions are kept; handlers are never invoked) ---

    fn sigaction(&mut self, sig: u64, act: u64, oact: u64) -> SysResult {
        if sig == 0 || sig > 64 {
            return Err(Stop::Errno(EINVAL));
        }
        let old = self.sigactions[sig as usize];
        if act != 0 {
            if sig == 9 || sig == 19 {
                return Err(Stop::Errno(EINVAL));
            }
            let b = self.mem.lock().read_vec(act, 32)?;
            self.sigactions[sig as usize] = std::array::from_fn(|k| {
                u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().unwrap())
            });
        }
        if oact != 0 {
            self.put_words(oact, &old)?;
        }
        Ok(0)
    }

    fn sigprocmask(&mut self, how: u64, set: u64, oset: u64) -> SysResult {
        let old = self.sigmask;
        if set != 0 {
            let s = self.mem.lock().read_u64(set)?;
            self.sigmask = match how {
                0 => old | s,
                1 => old & !s,
                2 => s,
                _ => return Err(Stop::Errno(EINVAL)),
            };
        }
        if oset != 0 {
            self.put_words(oset, &[old])?;
        }
        Ok(0)
    }

    /// A signal sent to the process itself: ignored, or fatal (handlers are not supported).
    fn raise(&mut self, sig: u64) -> SysResult {
        if sig == 0 {
            return Ok(0);
        }
        if sig > 64 {
            return Err(Stop::Errno(EINVAL));
        }
        const SIG_IGN: u64 = 1;
        let handler = self.sigactions[sig as usize][0];
        let blocked = self.sigmask & (1 << (sig - 1)) != 0 && sig != 9 && sig != 19;
        if handler == SIG_IGN || blocked || (handler == 0 && IGNORED_BY_DEFAULT.contains(&sig)) {
            return Ok(0);
        }
        if handler != 0 {
            eprintln!(
                "ppc64emu: signal {sig} has a guest handler; signal delivery is not supported"
            );
        }
        eprintln!(
            "ppc64emu: uncaught target signal {sig} ({})",
            signal_name(sig)
        );
        Err(Stop::Exit(128 + sig as i32))
    }
}

/// PROT_* from the guest: write or execute imply read (as with the hash MMU).
fn guest_prot(p: u64) -> u32 {
    let mut prot = (p & 7) as u32;
    if prot & (PROT_WRITE | PROT_EXEC) != 0 {
        prot |= PROT_READ;
    }
    prot
}

/// The host kernel's value of O_LARGEFILE (libc reports 0 on 64-bit hosts, but the kernel
/// still sets the bit in F_GETFL results).
const HOST_O_LARGEFILE: i32 = if cfg!(target_arch = "aarch64") {
    0o400000
} else {
    0o100000
};

/// `open` flags whose bit differs between powerpc and the host: (guest, host).
fn moved_open_flags() -> [(u64, i32); 4] {
    [
        (PPC_O_DIRECTORY, libc::O_DIRECTORY),
        (PPC_O_NOFOLLOW, libc::O_NOFOLLOW),
        (PPC_O_LARGEFILE, HOST_O_LARGEFILE),
        (PPC_O_DIRECT, libc::O_DIRECT),
    ]
}

/// Guest (powerpc) `open` flags to the host's.
fn open_flags(g: u64) -> i32 {
    let moved = moved_open_flags();
    let mut h = (g & !moved.iter().fold(0, |m, f| m | f.0)) as i32;
    for (ppc, hostf) in moved {
        if g & ppc != 0 {
            h |= hostf;
        }
    }
    h
}

/// Host `open` flags (from F_GETFL) to the guest's.
fn guest_open_flags(h: i32) -> u64 {
    let moved = moved_open_flags();
    let mut g = (h & !moved.iter().fold(0, |m, f| m | f.1)) as u32 as u64;
    for (ppc, hostf) in moved {
        if h & hostf != 0 {
            g |= ppc;
        }
    }
    g
}

/// `AT_*` flags have the generic values on powerpc and the host.
fn at_flags(f: u64) -> i32 {
    f as i32
}

/// Host randomness for AT_RANDOM and `getrandom`.
pub fn fill_random(buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        let r = unsafe { libc::getrandom(buf[done..].as_mut_ptr().cast(), buf.len() - done, 0) };
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

/// Name of a system call for `--strace`.
fn name(n: u64) -> String {
    let s = match n {
        nr::EXIT => "exit",
        nr::READ => "read",
        nr::WRITE => "write",
        nr::OPEN => "open",
        nr::CLOSE => "close",
        nr::LSEEK => "lseek",
        nr::LLSEEK => "_llseek",
        nr::READLINK => "readlink",
        nr::UNLINK => "unlink",
        nr::PRCTL => "prctl",
        nr::SYSINFO => "sysinfo",
        nr::BRK => "brk",
        nr::IOCTL => "ioctl",
        nr::FCNTL => "fcntl",
        nr::MMAP => "mmap",
        nr::MUNMAP => "munmap",
        nr::FSTAT => "fstat",
        nr::UNAME => "uname",
        nr::MPROTECT => "mprotect",
        nr::READV => "readv",
        nr::WRITEV => "writev",
        nr::MREMAP => "mremap",
        nr::RT_SIGACTION => "rt_sigaction",
        nr::RT_SIGPROCMASK => "rt_sigprocmask",
        nr::PREAD64 => "pread64",
        nr::GETCWD => "getcwd",
        nr::GETDENTS64 => "getdents64",
        nr::MADVISE => "madvise",
        nr::GETTID => "gettid",
        nr::FUTEX => "futex",
        nr::SET_TID_ADDRESS => "set_tid_address",
        nr::EXIT_GROUP => "exit_group",
        nr::CLOCK_GETTIME => "clock_gettime",
        nr::TGKILL => "tgkill",
        nr::OPENAT => "openat",
        nr::NEWFSTATAT => "newfstatat",
        nr::READLINKAT => "readlinkat",
        nr::FACCESSAT => "faccessat",
        nr::SET_ROBUST_LIST => "set_robust_list",
        nr::PRLIMIT64 => "prlimit64",
        nr::GETRANDOM => "getrandom",
        nr::STATX => "statx",
        nr::RSEQ => "rseq",
        nr::GETPID => "getpid",
        nr::DUP2 => "dup2",
        nr::DUP3 => "dup3",
        nr::PIPE2 => "pipe2",
        nr::UNLINKAT => "unlinkat",
        _ => return format!("syscall_{n}"),
    };
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_flag_translation_round_trips() {
        let g = 0o2 | 0o100 | PPC_O_DIRECTORY | PPC_O_NOFOLLOW | PPC_O_LARGEFILE | 0o2000000;
        let h = open_flags(g);
        assert_eq!(h & libc::O_DIRECTORY, libc::O_DIRECTORY);
        assert_eq!(h & libc::O_NOFOLLOW, libc::O_NOFOLLOW);
        assert_eq!(h & libc::O_CLOEXEC, libc::O_CLOEXEC);
        assert_eq!(guest_open_flags(h), g);
    }

    #[test]
    fn prot_implications() {
        assert_eq!(guest_prot(2), PROT_READ | PROT_WRITE);
        assert_eq!(guest_prot(4), PROT_READ | PROT_EXEC);
        assert_eq!(guest_prot(0), 0);
    }
}
