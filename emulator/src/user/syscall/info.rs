//! What the process may learn of its host: the system (uname, sysinfo, limits, usage,
//! randomness) and the time (clocks and sleeps).

use super::host;
use super::{Process, Stop, SysResult, errno::*, fill_random, nr};

/// The calls of this area; `None` for other numbers.
pub(super) fn call(p: &mut Process, n: u64, a: [u64; 6]) -> Option<SysResult> {
    Some(match n {
        nr::UNAME => p.uname(a[0]),
        nr::SYSINFO => p.sysinfo(a[0]),
        nr::GETRLIMIT | nr::UGETRLIMIT => p.get_rlimit(a[0], a[1]),
        nr::PRLIMIT64 => p.prlimit64(a),
        nr::GETRUSAGE => p.getrusage(a[0], a[1]),
        nr::GETRANDOM => p.getrandom(a[0], a[1], a[2]),
        nr::CLOCK_GETTIME => p.clock(a[0], a[1], false),
        nr::CLOCK_GETRES => p.clock(a[0], a[1], true),
        nr::GETTIMEOFDAY => p.gettimeofday(a[0], a[1]),
        nr::TIME => p.time(a[0]),
        nr::TIMES => p.times(a[0]),
        nr::NANOSLEEP => p.sleep(a[0]),
        nr::CLOCK_NANOSLEEP => p.clock_nanosleep(a[1], a[2]),
        _ => return None,
    })
}

/// Seconds and the rest since the Unix epoch (0 if the clock is before it).
fn since_epoch() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

impl Process {
    fn uname(&mut self, buf: u64) -> SysResult {
        let u = host::uname()?;
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

    /// (Field types vary between hosts, hence the casts.)
    #[allow(clippy::unnecessary_cast)]
    fn sysinfo(&mut self, buf: u64) -> SysResult {
        let s = host::sysinfo()?;
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
        if res > 15 {
            return Err(Stop::Errno(EINVAL));
        }
        let mut r = host::getrlimit(res)?;
        if res == RLIMIT_STACK {
            // The guest stack is a fixed mapping.
            r.rlim_cur = crate::user::loader::STACK_SIZE;
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

    fn prlimit64(&mut self, a: [u64; 6]) -> SysResult {
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

    fn getrusage(&mut self, who: u64, out: u64) -> SysResult {
        let ru = host::getrusage(who as i32)?;
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
        self.put_words(out, &w)?;
        Ok(0)
    }

    // --- time ---

    /// `clock_gettime`, or `clock_getres` (`res`); the time is stored when `out` is not null.
    fn clock(&mut self, clk: u64, out: u64, res: bool) -> SysResult {
        let ts = host::clock(clk as i32, res)?;
        if out != 0 {
            self.put_words(out, &[ts.tv_sec as u64, ts.tv_nsec as u64])?;
        }
        Ok(0)
    }

    fn gettimeofday(&mut self, tv: u64, tz: u64) -> SysResult {
        let now = since_epoch();
        if tv != 0 {
            self.put_words(tv, &[now.as_secs(), now.subsec_micros() as u64])?;
        }
        if tz != 0 {
            self.put_words(tz, &[0])?;
        }
        Ok(0)
    }

    fn time(&mut self, out: u64) -> SysResult {
        let t = since_epoch().as_secs();
        if out != 0 {
            self.put_words(out, &[t])?;
        }
        Ok(t)
    }

    fn times(&mut self, out: u64) -> SysResult {
        let (t, r) = host::times();
        if out != 0 {
            self.put_words(
                out,
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

    /// Relative sleeps only.
    fn clock_nanosleep(&mut self, flags: u64, req: u64) -> SysResult {
        const TIMER_ABSTIME: u64 = 1;
        if flags & TIMER_ABSTIME != 0 {
            return Err(Stop::Errno(EINVAL));
        }
        self.sleep(req)
    }
}
