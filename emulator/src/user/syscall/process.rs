//! The process and its signals: exit, ids, the thread's name, futexes of the one thread, and
//! signal dispositions (kept; handlers are never invoked).

use super::host;
use super::{IGNORED_BY_DEFAULT, PATH_MAX, Process, Stop, SysResult, errno::*, nr, signal_name};

/// The calls of this area; `None` for other numbers.
pub(super) fn call(p: &mut Process, n: u64, a: [u64; 6]) -> Option<SysResult> {
    let me = std::process::id() as u64;
    Some(match n {
        nr::EXIT | nr::EXIT_GROUP => Err(Stop::Exit((a[0] & 0xff) as i32)),
        nr::GETPID | nr::GETTID | nr::SET_TID_ADDRESS => Ok(me),
        nr::GETPPID => Ok(host::getppid() as u64),
        nr::GETPGRP => Ok(host::getpgrp() as u64),
        nr::GETPGID => host::getpgid(a[0] as i32),
        nr::GETSID => host::getsid(a[0] as i32),
        nr::SETPGID => host::setpgid(a[0] as i32, a[1] as i32),
        nr::SETSID => host::setsid(),
        nr::GETUID => Ok(host::uids().0 as u64),
        nr::GETEUID => Ok(host::uids().1 as u64),
        nr::GETGID => Ok(host::gids().0 as u64),
        nr::GETEGID => Ok(host::gids().1 as u64),
        nr::GETRESUID => p.put_ids(&a[..3], saved_too(host::uids())),
        nr::GETRESGID => p.put_ids(&a[..3], saved_too(host::gids())),
        nr::SET_ROBUST_LIST | nr::PERSONALITY | nr::SCHED_YIELD => Ok(0),
        nr::RSEQ | nr::MEMBARRIER => Err(Stop::Errno(ENOSYS)),
        nr::PRCTL => p.prctl(a[0], a[1]),
        nr::SCHED_GETAFFINITY => p.sched_getaffinity(a[1], a[2]),
        nr::FUTEX => p.futex(a),
        nr::RT_SIGACTION => p.sigaction(a[0], a[1], a[2]),
        nr::RT_SIGPROCMASK => p.sigprocmask(a[0], a[1], a[2]),
        nr::SIGALTSTACK => p.sigaltstack(a[1]),
        nr::KILL if a[0] == 0 || a[0] == me => p.raise(a[1]),
        nr::TKILL if a[0] == me => p.raise(a[1]),
        nr::TGKILL if a[1] == me => p.raise(a[2]),
        nr::KILL | nr::TKILL | nr::TGKILL => Err(Stop::Errno(EPERM)),
        _ => return None,
    })
}

/// (real, effective, saved) ids from (real, effective): the saved id is the effective one.
fn saved_too((real, effective): (u32, u32)) -> [u32; 3] {
    [real, effective, effective]
}

impl Process {
    /// One vCPU: CPU 0 only.
    fn sched_getaffinity(&mut self, len: u64, mask: u64) -> SysResult {
        let len = len as usize;
        if len < 8 || !len.is_multiple_of(8) {
            return Err(Stop::Errno(EINVAL));
        }
        self.mem.lock().write(mask, &1u64.to_le_bytes())?;
        Ok(8)
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

    // --- signals ---

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

    /// No alternate signal stack: the old one reads as disabled.
    fn sigaltstack(&mut self, old: u64) -> SysResult {
        if old != 0 {
            // stack_t: ss_sp, ss_flags (SS_DISABLE), ss_size.
            self.put_words(old, &[0, 2, 0])?;
        }
        Ok(0)
    }
}
