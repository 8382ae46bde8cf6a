//! Files, descriptors and paths. Guest descriptors are host descriptors; what differs is
//! the layout of `struct stat` and the values of a few `open` flags.

use super::host::{self, PathCall};
use super::{AT_FDCWD, MAX_IO, PATH_MAX, Process, Stop, SysResult, errno::*, nr};
use crate::user::mem::PROT_WRITE;
use std::ffi::CString;

/// Guest `open` flags whose values on powerpc differ from the generic ones.
const PPC_O_DIRECTORY: u64 = 0o40000;
const PPC_O_NOFOLLOW: u64 = 0o100000;
const PPC_O_LARGEFILE: u64 = 0o200000;
const PPC_O_DIRECT: u64 = 0o400000;

/// The calls of this area; `None` for other numbers.
pub(super) fn call(p: &mut Process, n: u64, a: [u64; 6]) -> Option<SysResult> {
    let fd = a[0] as i32;
    let (d0, d2) = (a[0] as i32, a[2] as i32);
    Some(match n {
        nr::READ => p.read(fd, a[1], a[2], None),
        nr::PREAD64 => p.read(fd, a[1], a[2], Some(a[3] as i64)),
        nr::WRITE => p.write(fd, a[1], a[2], None),
        nr::PWRITE64 => p.write(fd, a[1], a[2], Some(a[3] as i64)),
        nr::READV => p.readv(fd, a[1], a[2]),
        nr::WRITEV => p.writev(fd, a[1], a[2]),
        nr::OPEN => p.openat(AT_FDCWD, a[0], a[1], a[2]),
        nr::OPENAT => p.openat(d0, a[1], a[2], a[3]),
        nr::CLOSE => host::close(fd),
        nr::LSEEK => host::lseek(fd, a[1] as i64, a[2] as i32),
        nr::LLSEEK => p.llseek(fd, a),
        nr::DUP => host::dup(fd),
        nr::DUP2 => dup2(a[0], a[1]),
        nr::DUP3 => host::dup3(fd, a[1] as i32, open_flags(a[2])),
        nr::PIPE => p.pipe(a[0], 0),
        nr::PIPE2 => p.pipe(a[0], a[1]),
        nr::FCNTL => fcntl(fd, a[1], a[2]),
        nr::IOCTL => Err(Stop::Errno(ENOTTY)),
        nr::FSTAT => host::fstat(fd).and_then(|st| p.put_stat(a[1], &st)),
        nr::STAT => p.fstatat(AT_FDCWD, a[0], a[1], 0),
        nr::LSTAT => p.fstatat(AT_FDCWD, a[0], a[1], libc::AT_SYMLINK_NOFOLLOW as u64),
        nr::NEWFSTATAT => p.fstatat(d0, a[1], a[2], a[3]),
        nr::STATX => p.statx(a),
        nr::GETDENTS64 => p.getdents64(fd, a[1], a[2]),
        nr::READLINK => p.readlinkat(AT_FDCWD, a[0], a[1], a[2]),
        nr::READLINKAT => p.readlinkat(d0, a[1], a[2], a[3]),
        nr::ACCESS => p.path_call(PathCall::Faccessat, AT_FDCWD, a[0], [a[1], 0, 0]),
        nr::FACCESSAT => p.path_call(PathCall::Faccessat, d0, a[1], [a[2], 0, 0]),
        nr::FACCESSAT2 => p.path_call(PathCall::Faccessat2, d0, a[1], [a[2], a[3], 0]),
        nr::UNLINK => p.path_call(PathCall::Unlinkat, AT_FDCWD, a[0], [0, 0, 0]),
        nr::RMDIR => p.path_call(PathCall::Unlinkat, AT_FDCWD, a[0], [AT_REMOVEDIR, 0, 0]),
        nr::UNLINKAT => p.path_call(PathCall::Unlinkat, d0, a[1], [a[2], 0, 0]),
        nr::MKDIR => p.path_call(PathCall::Mkdirat, AT_FDCWD, a[0], [a[1], 0, 0]),
        nr::MKDIRAT => p.path_call(PathCall::Mkdirat, d0, a[1], [a[2], 0, 0]),
        nr::CHMOD => p.path_call(PathCall::Fchmodat, AT_FDCWD, a[0], [a[1], 0, 0]),
        nr::FCHMODAT => p.path_call(PathCall::Fchmodat, d0, a[1], [a[2], 0, 0]),
        nr::FCHOWNAT => p.path_call(PathCall::Fchownat, d0, a[1], [a[2], a[3], a[4]]),
        nr::CHDIR => p.path_call(PathCall::Chdir, AT_FDCWD, a[0], [0, 0, 0]),
        nr::TRUNCATE => p.path_call(PathCall::Truncate, AT_FDCWD, a[0], [a[1], 0, 0]),
        nr::RENAME => p.two_path_call(AT_FDCWD, a[0], AT_FDCWD, a[1], 0, true),
        nr::RENAMEAT => p.two_path_call(d0, a[1], d2, a[3], 0, true),
        nr::RENAMEAT2 => p.two_path_call(d0, a[1], d2, a[3], a[4], true),
        nr::LINKAT => p.two_path_call(d0, a[1], d2, a[3], a[4], false),
        nr::SYMLINK => p.symlinkat(a[0], AT_FDCWD, a[1]),
        nr::SYMLINKAT => p.symlinkat(a[0], a[1] as i32, a[2]),
        nr::UTIMENSAT => p.utimensat(a),
        nr::FCHDIR => host::fchdir(fd),
        nr::FCHMOD => host::fchmod(fd, a[1] as u32),
        nr::FCHOWN => host::fchown(fd, a[1] as u32, a[2] as u32),
        nr::FTRUNCATE => host::ftruncate(fd, a[1] as i64),
        nr::FSYNC => host::fsync(fd),
        nr::FDATASYNC => host::fdatasync(fd),
        nr::FLOCK => host::flock(fd, a[1] as i32),
        nr::FADVISE64 => Ok(0),
        nr::GETCWD => p.getcwd(a[0], a[1]),
        nr::UMASK => Ok(host::umask(a[0] as u32 & 0o777) as u64),
        nr::POLL | nr::UTIMES => Err(Stop::Errno(ENOSYS)),
        _ => return None,
    })
}

const AT_REMOVEDIR: u64 = libc::AT_REMOVEDIR as u64;

/// `dup2` onto itself only checks that the descriptor is open.
fn dup2(fd: u64, to: u64) -> SysResult {
    if fd == to {
        return host::fcntl(fd as i32, libc::F_GETFD, 0).map(|_| to);
    }
    host::dup2(fd as i32, to as i32)
}

fn fcntl(fd: i32, cmd: u64, arg: u64) -> SysResult {
    const F_DUPFD: u64 = 0;
    const F_GETFD: u64 = 1;
    const F_SETFD: u64 = 2;
    const F_GETFL: u64 = 3;
    const F_SETFL: u64 = 4;
    const F_DUPFD_CLOEXEC: u64 = 1030;
    match cmd {
        F_DUPFD => host::fcntl(fd, libc::F_DUPFD, arg as i32),
        F_DUPFD_CLOEXEC => host::fcntl(fd, libc::F_DUPFD_CLOEXEC, arg as i32),
        F_GETFD => host::fcntl(fd, libc::F_GETFD, 0),
        F_SETFD => host::fcntl(fd, libc::F_SETFD, arg as i32),
        F_GETFL => host::fcntl(fd, libc::F_GETFL, 0).map(|f| guest_open_flags(f as i32)),
        F_SETFL => host::fcntl(fd, libc::F_SETFL, open_flags(arg)),
        _ => Err(Stop::Errno(EINVAL)),
    }
}

impl Process {
    fn read(&mut self, fd: i32, buf: u64, len: u64, at: Option<i64>) -> SysResult {
        let len = (len as usize).min(MAX_IO);
        self.mem.lock().check(buf, len as u64, PROT_WRITE)?;
        let mut data = vec![0u8; len];
        let n = host::read(fd, &mut data, at)? as usize;
        self.mem.lock().write(buf, &data[..n])?;
        Ok(n as u64)
    }

    fn write(&mut self, fd: i32, buf: u64, len: u64, at: Option<i64>) -> SysResult {
        let len = (len as usize).min(MAX_IO);
        let data = self.mem.lock().read_vec(buf, len)?;
        self.written(host::write(fd, &data, at))
    }

    /// The result of a host write. The emulator ignores SIGPIPE, so a write to a closed pipe
    /// fails with EPIPE; the guest gets the signal's effect instead: by default it dies
    /// (silently, as `cmd | head` expects).
    fn written(&mut self, r: SysResult) -> SysResult {
        const SIGPIPE: u64 = 13;
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
        self.written(host::write(fd, &data, None))
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
        let n = host::read(fd, &mut data, None)? as usize;
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

    /// glibc's lseek on ppc64: the offset in two 32-bit halves, the result stored.
    fn llseek(&mut self, fd: i32, a: [u64; 6]) -> SysResult {
        self.mem.lock().check(a[3], 8, PROT_WRITE)?;
        let off = ((a[1] as u32 as u64) << 32 | a[2] as u32 as u64) as i64;
        let pos = host::lseek(fd, off, a[4] as i32)?;
        self.put_words(a[3], &[pos])?;
        Ok(0)
    }

    fn openat(&mut self, dirfd: i32, path: u64, flags: u64, mode: u64) -> SysResult {
        let p = self.path(path)?;
        host::openat(dirfd, &p, open_flags(flags), mode as u32)
    }

    fn pipe(&mut self, out: u64, flags: u64) -> SysResult {
        self.mem.lock().check(out, 8, PROT_WRITE)?;
        let fds = host::pipe2(open_flags(flags))?;
        let mut b = fds[0].to_le_bytes().to_vec();
        b.extend(fds[1].to_le_bytes());
        self.mem.lock().write(out, &b)?;
        Ok(0)
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
        let st = host::fstatat(dirfd, &p, at_flags(flags))?;
        self.put_stat(buf, &st)
    }

    /// `statx` has one layout on every architecture: copied through.
    fn statx(&mut self, a: [u64; 6]) -> SysResult {
        let p = self.path(a[1])?;
        let mut buf = [0u8; 256];
        host::statx(a[0] as i32, &p, at_flags(a[2]), a[3] as u32, &mut buf)?;
        self.mem.lock().write(a[4], &buf)?;
        Ok(0)
    }

    /// `linux_dirent64` has one layout on every architecture: copied through.
    fn getdents64(&mut self, fd: i32, buf: u64, len: u64) -> SysResult {
        let len = (len as usize).min(1 << 20);
        self.mem.lock().check(buf, len as u64, PROT_WRITE)?;
        let mut data = vec![0u8; len];
        let n = host::getdents64(fd, &mut data)? as usize;
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
            let n = host::readlinkat(dirfd, &p, &mut out)?;
            out.truncate(n as usize);
            out
        };
        let n = target.len().min(len as usize);
        self.mem.lock().write(buf, &target[..n])?;
        Ok(n as u64)
    }

    /// A host call whose only pointer argument is one path.
    fn path_call(&mut self, call: PathCall, dirfd: i32, path: u64, rest: [u64; 3]) -> SysResult {
        let p = self.path(path)?;
        host::path_call(call, dirfd, &p, rest)
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
        host::two_path_call(d1, &a, d2, &b, flags as u32, rename)
    }

    fn symlinkat(&mut self, target: u64, dirfd: i32, path: u64) -> SysResult {
        let (t, p) = (self.path(target)?, self.path(path)?);
        host::symlinkat(&t, dirfd, &p)
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
        host::utimensat(a[0] as i32, p.as_deref(), times.as_ref(), at_flags(a[3]))
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
}
