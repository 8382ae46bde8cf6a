//! The host system calls the syscall layer makes, each behind a safe function: buffers are
//! Rust slices, paths `CStr`s and results `SysResult`s (the host errno on failure), so the
//! per-area code holds no `unsafe`.

use super::{Stop, SysResult, errno::EINVAL};
use std::ffi::CStr;

/// The host errno of the last failed libc call.
pub fn errno() -> Stop {
    Stop::Errno(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(EINVAL),
    )
}

/// A libc result (negative on failure) as a syscall result.
pub fn ret(r: i64) -> SysResult {
    if r < 0 { Err(errno()) } else { Ok(r as u64) }
}

/// A zeroed libc structure for a call to fill.
fn zeroed<T: Copy>() -> T {
    // SAFETY: only used for plain C structures (`stat`, `utsname`, …) made of integers and
    // integer arrays, for which all-zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

// --- descriptors ---

pub fn close(fd: i32) -> SysResult {
    // SAFETY: takes no pointer; closing any number is defined (EBADF at worst).
    ret(unsafe { libc::close(fd) } as i64)
}

pub fn lseek(fd: i32, off: i64, whence: i32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::lseek(fd, off, whence) })
}

pub fn dup(fd: i32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::dup(fd) } as i64)
}

pub fn dup2(fd: i32, to: i32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::dup2(fd, to) } as i64)
}

pub fn dup3(fd: i32, to: i32, flags: i32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::dup3(fd, to, flags) } as i64)
}

/// `fcntl` with an integer argument (every command the guest may pass is one).
pub fn fcntl(fd: i32, cmd: i32, arg: i32) -> SysResult {
    // SAFETY: the callers pass only commands whose argument is an integer (F_DUPFD*,
    // F_GETFD/F_SETFD, F_GETFL/F_SETFL), never a pointer.
    ret(unsafe { libc::fcntl(fd, cmd, arg) } as i64)
}

/// `read`, or `pread` at `at`, into `buf`.
pub fn read(fd: i32, buf: &mut [u8], at: Option<i64>) -> SysResult {
    let (p, n) = (buf.as_mut_ptr().cast(), buf.len());
    ret(match at {
        // SAFETY: the kernel writes at most `n` bytes at `p`, all of `buf`.
        Some(off) => unsafe { libc::pread(fd, p, n, off) },
        // SAFETY: as above.
        None => unsafe { libc::read(fd, p, n) },
    } as i64)
}

/// `write`, or `pwrite` at `at`, of `buf`.
pub fn write(fd: i32, buf: &[u8], at: Option<i64>) -> SysResult {
    let (p, n) = (buf.as_ptr().cast(), buf.len());
    ret(match at {
        // SAFETY: the kernel reads at most `n` bytes at `p`, all of `buf`.
        Some(off) => unsafe { libc::pwrite(fd, p, n, off) },
        // SAFETY: as above.
        None => unsafe { libc::write(fd, p, n) },
    } as i64)
}

pub fn pipe2(flags: i32) -> Result<[i32; 2], Stop> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors the kernel stores.
    ret(unsafe { libc::pipe2(fds.as_mut_ptr(), flags) } as i64)?;
    Ok(fds)
}

pub fn fstat(fd: i32) -> Result<libc::stat, Stop> {
    let mut st = zeroed::<libc::stat>();
    // SAFETY: `st` is a `struct stat` for the kernel to fill.
    ret(unsafe { libc::fstat(fd, &mut st) } as i64)?;
    Ok(st)
}

pub fn fchdir(fd: i32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::fchdir(fd) } as i64)
}

pub fn fchmod(fd: i32, mode: u32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::fchmod(fd, mode) } as i64)
}

pub fn fchown(fd: i32, uid: u32, gid: u32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::fchown(fd, uid, gid) } as i64)
}

pub fn ftruncate(fd: i32, len: i64) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::ftruncate(fd, len) } as i64)
}

pub fn fsync(fd: i32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::fsync(fd) } as i64)
}

pub fn fdatasync(fd: i32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::fdatasync(fd) } as i64)
}

pub fn flock(fd: i32, op: i32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::flock(fd, op) } as i64)
}

/// `getdents64` into `buf` (`linux_dirent64` records).
pub fn getdents64(fd: i32, buf: &mut [u8]) -> SysResult {
    // SAFETY: the kernel writes at most `buf.len()` bytes at its start.
    ret(unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) })
}

// --- paths ---

pub fn openat(dirfd: i32, path: &CStr, flags: i32, mode: u32) -> SysResult {
    // SAFETY: `path` is NUL-terminated; the mode is passed by value.
    ret(unsafe { libc::openat(dirfd, path.as_ptr(), flags, mode as libc::c_uint) } as i64)
}

pub fn fstatat(dirfd: i32, path: &CStr, flags: i32) -> Result<libc::stat, Stop> {
    let mut st = zeroed::<libc::stat>();
    // SAFETY: `path` is NUL-terminated; `st` is a `struct stat` for the kernel to fill.
    ret(unsafe { libc::fstatat(dirfd, path.as_ptr(), &mut st, flags) } as i64)?;
    Ok(st)
}

/// `statx` into `buf` (a `struct statx` is 256 bytes on every architecture).
pub fn statx(dirfd: i32, path: &CStr, flags: i32, mask: u32, buf: &mut [u8; 256]) -> SysResult {
    // SAFETY: `path` is NUL-terminated; the kernel writes one 256-byte `struct statx`.
    ret(unsafe {
        libc::syscall(
            libc::SYS_statx,
            dirfd,
            path.as_ptr(),
            flags,
            mask,
            buf.as_mut_ptr(),
        )
    })
}

/// `readlinkat` into `buf`; the length of the target.
pub fn readlinkat(dirfd: i32, path: &CStr, buf: &mut [u8]) -> SysResult {
    // SAFETY: `path` is NUL-terminated; the kernel writes at most `buf.len()` bytes.
    ret(
        unsafe { libc::readlinkat(dirfd, path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) }
            as i64,
    )
}

/// Host calls whose only pointer argument is one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathCall {
    /// `(dirfd, path, mode)`
    Faccessat,
    /// `(dirfd, path, mode, flags)`
    Faccessat2,
    /// `(dirfd, path, flags)`
    Unlinkat,
    /// `(dirfd, path, mode)`
    Mkdirat,
    /// `(dirfd, path, mode)`
    Fchmodat,
    /// `(dirfd, path, uid, gid, flags)`
    Fchownat,
    /// `(path)`
    Chdir,
    /// `(path, length)`
    Truncate,
}

/// One [`PathCall`]: `dirfd` and `rest` fill its integer arguments in order (the ones it
/// lacks are ignored).
pub fn path_call(call: PathCall, dirfd: i32, path: &CStr, rest: [u64; 3]) -> SysResult {
    let p = path.as_ptr();
    let at = |nr| {
        // SAFETY: `nr` is one of the `*at` calls above, whose arguments after the path are
        // integers; `p` is NUL-terminated. Surplus arguments are ignored by the kernel.
        unsafe { libc::syscall(nr, dirfd, p, rest[0], rest[1], rest[2]) }
    };
    ret(match call {
        PathCall::Faccessat => at(libc::SYS_faccessat),
        PathCall::Faccessat2 => at(libc::SYS_faccessat2),
        PathCall::Unlinkat => at(libc::SYS_unlinkat),
        PathCall::Mkdirat => at(libc::SYS_mkdirat),
        PathCall::Fchmodat => at(libc::SYS_fchmodat),
        PathCall::Fchownat => at(libc::SYS_fchownat),
        // SAFETY: `chdir` takes the one NUL-terminated path.
        PathCall::Chdir => unsafe { libc::syscall(libc::SYS_chdir, p) },
        // SAFETY: `truncate` takes the NUL-terminated path and a length by value.
        PathCall::Truncate => unsafe { libc::syscall(libc::SYS_truncate, p, rest[0] as i64) },
    })
}

/// `renameat2` (`rename`) or `linkat`.
pub fn two_path_call(
    d1: i32,
    p1: &CStr,
    d2: i32,
    p2: &CStr,
    flags: u32,
    rename: bool,
) -> SysResult {
    let nr = if rename {
        libc::SYS_renameat2
    } else {
        libc::SYS_linkat
    };
    // SAFETY: both paths are NUL-terminated; the flags are passed by value.
    ret(unsafe { libc::syscall(nr, d1, p1.as_ptr(), d2, p2.as_ptr(), flags) })
}

pub fn symlinkat(target: &CStr, dirfd: i32, path: &CStr) -> SysResult {
    // SAFETY: both paths are NUL-terminated.
    ret(unsafe { libc::symlinkat(target.as_ptr(), dirfd, path.as_ptr()) } as i64)
}

/// `utimensat`; a missing path or missing times are passed as null, as the guest did.
pub fn utimensat(
    dirfd: i32,
    path: Option<&CStr>,
    times: Option<&[libc::timespec; 2]>,
    flags: i32,
) -> SysResult {
    let pp = path.map_or(std::ptr::null(), |p| p.as_ptr());
    let tp = times.map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: `pp` is null or NUL-terminated, `tp` null or two `timespec`s, both read only.
    ret(unsafe { libc::syscall(libc::SYS_utimensat, dirfd, pp, tp, flags) })
}

// --- process ---

pub fn umask(mask: u32) -> u32 {
    // SAFETY: takes no pointer and cannot fail.
    unsafe { libc::umask(mask) }
}

pub fn getppid() -> i32 {
    // SAFETY: takes no pointer and cannot fail.
    unsafe { libc::getppid() }
}

pub fn getpgrp() -> i32 {
    // SAFETY: takes no pointer and cannot fail.
    unsafe { libc::getpgrp() }
}

pub fn getpgid(pid: i32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::getpgid(pid) } as i64)
}

pub fn getsid(pid: i32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::getsid(pid) } as i64)
}

pub fn setpgid(pid: i32, pgid: i32) -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::setpgid(pid, pgid) } as i64)
}

pub fn setsid() -> SysResult {
    // SAFETY: takes no pointer.
    ret(unsafe { libc::setsid() } as i64)
}

/// Real and effective user ids.
pub fn uids() -> (u32, u32) {
    // SAFETY: take no pointer and cannot fail.
    unsafe { (libc::getuid(), libc::geteuid()) }
}

/// Real and effective group ids.
pub fn gids() -> (u32, u32) {
    // SAFETY: take no pointer and cannot fail.
    unsafe { (libc::getgid(), libc::getegid()) }
}

// --- information ---

/// `clock_gettime` (`res` false) or `clock_getres` of clock `clk`.
pub fn clock(clk: i32, res: bool) -> Result<libc::timespec, Stop> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let r = if res {
        // SAFETY: `ts` is a `timespec` for the call to fill.
        unsafe { libc::clock_getres(clk, &mut ts) }
    } else {
        // SAFETY: as above.
        unsafe { libc::clock_gettime(clk, &mut ts) }
    };
    ret(r as i64)?;
    Ok(ts)
}

/// `times`: the process times and the clock ticks it returns.
pub fn times() -> (libc::tms, libc::clock_t) {
    let mut t = zeroed::<libc::tms>();
    // SAFETY: `t` is a `struct tms` for the call to fill.
    let r = unsafe { libc::times(&mut t) };
    (t, r)
}

pub fn getrusage(who: i32) -> Result<libc::rusage, Stop> {
    let mut ru = zeroed::<libc::rusage>();
    // SAFETY: `ru` is a `struct rusage` for the call to fill.
    ret(unsafe { libc::getrusage(who, &mut ru) } as i64)?;
    Ok(ru)
}

pub fn uname() -> Result<libc::utsname, Stop> {
    let mut u = zeroed::<libc::utsname>();
    // SAFETY: `u` is a `struct utsname` for the call to fill.
    ret(unsafe { libc::uname(&mut u) } as i64)?;
    Ok(u)
}

pub fn sysinfo() -> Result<libc::sysinfo, Stop> {
    let mut s = zeroed::<libc::sysinfo>();
    // SAFETY: `s` is a `struct sysinfo` for the call to fill.
    ret(unsafe { libc::sysinfo(&mut s) } as i64)?;
    Ok(s)
}

/// The limits of resource `res` (checked by the caller to be a valid resource number).
pub fn getrlimit(res: u64) -> Result<libc::rlimit, Stop> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a `struct rlimit` for the call to fill.
    ret(unsafe { libc::getrlimit(res as _, &mut r) } as i64)?;
    Ok(r)
}

/// `getrandom` into `buf`: bytes written, or a negative value on failure.
pub fn getrandom(buf: &mut [u8]) -> isize {
    // SAFETY: the kernel writes at most `buf.len()` bytes at its start.
    unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) }
}
