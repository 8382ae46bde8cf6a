//! RTAS: the blob the device tree points Linux at, and the services behind it.
//!
//! The blob is five big-endian instructions that turn an RTAS call (r3 = argument buffer)
//! into the H_RTAS hypercall (r3 = 0xF000, r4 = buffer); bare-metal guests may issue H_RTAS
//! themselves, as on QEMU. The argument buffer is big-endian whatever the guest's byte order:
//! token, nargs, nret (32 bits each), then nargs arguments and nret results; result 0 is the
//! status (0 success, -1 hardware error, -3 parameter error).
//!
//! Tokens are QEMU's numbers for the same services, so a guest sees the same `/rtas` on both.

use super::effects::{MachineEffects, PhysMemory};
use super::hcall::H_RTAS;
use super::xics::{PRIO_MASKED, Xics};
use crate::papr::{H_PARAMETER, H_SUCCESS};
use std::time::Duration;

/// Status codes of RTAS calls (result 0).
pub const RTAS_OUT_SUCCESS: i32 = 0;
pub const RTAS_OUT_HW_ERROR: i32 = -1;
pub const RTAS_OUT_PARAM_ERROR: i32 = -3;
/// check-exception, event-scan: there is no event to report.
pub const RTAS_OUT_NO_ERRORS_FOUND: i32 = 1;
/// ibm,set-system-parameter of a parameter the partition may not change.
pub const RTAS_OUT_NOT_AUTHORIZED: i32 = -9002;

/// ibm,set-system-parameter parameters QEMU knows (all read-only to the partition).
pub const SYSPARM_SPLPAR_CHARACTERISTICS: u32 = 20;
pub const SYSPARM_DIAGNOSTICS_RUN_MODE: u32 = 42;
pub const SYSPARM_UUID: u32 = 48;

/// The power level set-/get-power-level report: full power (there is no power management).
pub const POWER_LEVEL_FULL: u32 = 100;

/// query-cpu-stopped-state results.
pub const CPU_STATE_STOPPED: u32 = 0;
pub const CPU_STATE_RUNNING: u32 = 2;

/// The RTAS services we implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Service {
    DisplayCharacter,
    GetTimeOfDay,
    SetTimeOfDay,
    PowerOff,
    SystemReboot,
    QueryCpuStoppedState,
    StartCpu,
    StopSelf,
    SetXive,
    GetXive,
    IntOff,
    IntOn,
    OsTerm,
    SetSystemParameter,
    CheckException,
    EventScan,
    SetPowerLevel,
    GetPowerLevel,
}

impl Service {
    pub const ALL: [Service; 18] = [
        Service::DisplayCharacter,
        Service::GetTimeOfDay,
        Service::SetTimeOfDay,
        Service::PowerOff,
        Service::SystemReboot,
        Service::QueryCpuStoppedState,
        Service::StartCpu,
        Service::StopSelf,
        Service::SetXive,
        Service::GetXive,
        Service::IntOff,
        Service::IntOn,
        Service::OsTerm,
        Service::SetSystemParameter,
        Service::CheckException,
        Service::EventScan,
        Service::SetPowerLevel,
        Service::GetPowerLevel,
    ];

    /// Property name in `/rtas` (the name Linux looks the token up by).
    pub fn name(self) -> &'static str {
        match self {
            Service::DisplayCharacter => "display-character",
            Service::GetTimeOfDay => "get-time-of-day",
            Service::SetTimeOfDay => "set-time-of-day",
            Service::PowerOff => "power-off",
            Service::SystemReboot => "system-reboot",
            Service::QueryCpuStoppedState => "query-cpu-stopped-state",
            Service::StartCpu => "start-cpu",
            Service::StopSelf => "stop-self",
            Service::SetXive => "ibm,set-xive",
            Service::GetXive => "ibm,get-xive",
            Service::IntOff => "ibm,int-off",
            Service::IntOn => "ibm,int-on",
            Service::OsTerm => "ibm,os-term",
            Service::SetSystemParameter => "ibm,set-system-parameter",
            Service::CheckException => "check-exception",
            Service::EventScan => "event-scan",
            Service::SetPowerLevel => "set-power-level",
            Service::GetPowerLevel => "get-power-level",
        }
    }

    pub fn token(self) -> u32 {
        0x2000
            + match self {
                Service::DisplayCharacter => 0x00,
                Service::GetTimeOfDay => 0x01,
                Service::SetTimeOfDay => 0x02,
                Service::PowerOff => 0x03,
                Service::SystemReboot => 0x04,
                Service::QueryCpuStoppedState => 0x05,
                Service::StartCpu => 0x06,
                Service::StopSelf => 0x07,
                Service::SetXive => 0x0a,
                Service::GetXive => 0x0b,
                Service::IntOff => 0x0c,
                Service::IntOn => 0x0d,
                Service::OsTerm => 0x1f,
                Service::SetSystemParameter => 0x09,
                Service::CheckException => 0x0e,
                Service::EventScan => 0x0f,
                Service::SetPowerLevel => 0x1b,
                Service::GetPowerLevel => 0x1c,
            }
    }

    /// Old Linux early-debug code calls display-character with token 0xa without looking
    /// it up; QEMU accepts that too.
    pub fn from_token(token: u32) -> Option<Service> {
        if token == 0xa {
            return Some(Service::DisplayCharacter);
        }
        Service::ALL.into_iter().find(|s| s.token() == token)
    }

    fn index(self) -> usize {
        Service::ALL.iter().position(|s| *s == self).unwrap()
    }
}

// --- the blob ---

const fn d_form(opcd: u32, rt: u32, ra: u32, imm: u16) -> u32 {
    (opcd << 26) | (rt << 21) | (ra << 16) | imm as u32
}

/// The RTAS entry code, as 32-bit instruction words:
/// `or r4,r3,r3` (mr); `addis r3,0,0`; `ori r3,r3,0xF000` (0xF000 must not be sign-extended,
/// so no `li`); `sc 1`; `bclr 20,0` (blr).
pub const BLOB_WORDS: [u32; 5] = [
    (31 << 26) | (3 << 21) | (4 << 16) | (3 << 11) | (444 << 1),
    d_form(15, 3, 0, 0),
    d_form(24, 3, 3, H_RTAS as u16),
    (17 << 26) | (1 << 5) | 2,
    (19 << 26) | (20 << 21) | (16 << 1),
];

/// The blob in memory: big-endian, since Linux enters RTAS with `MSR[LE]` = 0.
pub fn blob() -> Vec<u8> {
    BLOB_WORDS.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// Size of the blob (`rtas-size`).
pub const BLOB_SIZE: u32 = 4 * BLOB_WORDS.len() as u32;

// --- the dispatcher ---

/// What the calling vCPU does after an RTAS call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtasOutcome {
    /// Return to the caller.
    Continue,
    /// stop-self: the caller is stopped.
    Stopped,
    /// power-off, system-reboot or ibm,os-term: the machine is going down.
    Shutdown,
}

/// Call counts per service (for the run report).
#[derive(Clone, Debug, Default)]
pub struct RtasStats {
    calls: [u64; Service::ALL.len()],
    pub unknown: u64,
}

impl RtasStats {
    pub fn count(&self, s: Service) -> u64 {
        self.calls[s.index()]
    }

    /// `(service name, calls)` for every service called at least once.
    pub fn nonzero(&self) -> Vec<(&'static str, u64)> {
        Service::ALL
            .iter()
            .filter(|s| self.count(**s) > 0)
            .map(|s| (s.name(), self.count(*s)))
            .collect()
    }
}

/// Real address of a guest physical address given by the guest: the top 4 bits are ignored
/// (as in real mode), so a kernel may pass 0xc000… addresses.
pub fn real_addr(pa: u64) -> u64 {
    pa & 0x0fff_ffff_ffff_ffff
}

/// The argument buffer of one call.
struct Args<'a> {
    mem: &'a dyn PhysMemory,
    base: u64,
    nargs: u32,
    nret: u32,
}

/// A buffer access fell outside RAM.
struct Fault;

impl Args<'_> {
    fn arg(&self, i: u32) -> Result<u32, Fault> {
        self.mem
            .read_u32_be(self.base + 12 + 4 * i as u64)
            .map_err(|_| Fault)
    }

    fn ret(&self, i: u32, v: u32) -> Result<(), Fault> {
        if i >= self.nret {
            return Ok(());
        }
        let rets = self.base + 12 + 4 * self.nargs as u64;
        self.mem
            .write_u32_be(rets + 4 * i as u64, v)
            .map_err(|_| Fault)
    }

    fn status(&self, v: i32) -> Result<(), Fault> {
        self.ret(0, v as u32)
    }

    fn shape(&self, nargs: u32, nret: u32) -> bool {
        self.nargs == nargs && self.nret == nret
    }
}

/// Everything a call may touch.
pub struct RtasContext<'a> {
    pub xics: &'a mut Xics,
    pub stats: &'a mut RtasStats,
    pub clock: &'a mut Rtc,
    pub mem: &'a dyn PhysMemory,
    pub fx: &'a mut dyn MachineEffects,
}

/// Performs the RTAS call whose argument buffer is at `buf` on behalf of vCPU `cpu`.
/// Returns the H_RTAS return code (H_PARAMETER for an unknown token or a buffer outside RAM;
/// service errors go into the status result) and what the caller does next.
pub fn call(ctx: RtasContext<'_>, cpu: usize, buf: u64) -> (i64, RtasOutcome) {
    let base = real_addr(buf);
    let header = (
        ctx.mem.read_u32_be(base),
        ctx.mem.read_u32_be(base + 4),
        ctx.mem.read_u32_be(base + 8),
    );
    let (Ok(token), Ok(nargs), Ok(nret)) = header else {
        return (H_PARAMETER, RtasOutcome::Continue);
    };
    let a = Args {
        mem: ctx.mem,
        base,
        nargs,
        nret,
    };
    let Some(service) = Service::from_token(token) else {
        ctx.stats.unknown += 1;
        let _ = a.status(RTAS_OUT_PARAM_ERROR);
        return (H_PARAMETER, RtasOutcome::Continue);
    };
    ctx.stats.calls[service.index()] += 1;
    match dispatch(service, &a, ctx.xics, ctx.clock, ctx.fx, cpu) {
        Ok(outcome) => (H_SUCCESS, outcome),
        Err(Fault) => (H_PARAMETER, RtasOutcome::Continue),
    }
}

fn dispatch(
    service: Service,
    a: &Args<'_>,
    xics: &mut Xics,
    clock: &mut Rtc,
    fx: &mut dyn MachineEffects,
    cpu: usize,
) -> Result<RtasOutcome, Fault> {
    use RtasOutcome::*;
    let ncpus = xics.ncpus();
    // Server numbers are vCPU indexes (one thread per core, as QEMU numbers them).
    let target = |server: u32| (server as usize) < ncpus;
    match service {
        Service::DisplayCharacter => {
            if a.nargs < 1 {
                a.status(RTAS_OUT_PARAM_ERROR)?;
            } else {
                fx.console_write(&[a.arg(0)? as u8]);
                a.status(RTAS_OUT_SUCCESS)?;
            }
        }
        Service::GetTimeOfDay => {
            if !a.shape(0, 8) {
                a.status(RTAS_OUT_PARAM_ERROR)?;
            } else {
                let t = CivilTime::from_unix(clock.now(fx.wall_time()));
                a.status(RTAS_OUT_SUCCESS)?;
                for (i, v) in [t.year, t.month, t.day, t.hour, t.minute, t.second, t.nanos]
                    .into_iter()
                    .enumerate()
                {
                    a.ret(1 + i as u32, v)?;
                }
            }
        }
        Service::SetTimeOfDay => {
            let mut f = [0u32; 7];
            if a.shape(7, 1) {
                for (i, v) in f.iter_mut().enumerate() {
                    *v = a.arg(i as u32)?;
                }
            }
            let t = CivilTime {
                year: f[0],
                month: f[1],
                day: f[2],
                hour: f[3],
                minute: f[4],
                second: f[5],
                nanos: f[6],
            };
            match t.to_unix().filter(|_| a.shape(7, 1)) {
                Some(to) => {
                    clock.set(fx.wall_time(), to);
                    a.status(RTAS_OUT_SUCCESS)?;
                }
                None => a.status(RTAS_OUT_PARAM_ERROR)?,
            }
        }
        Service::SetSystemParameter => {
            if !a.shape(2, 1) {
                a.status(RTAS_OUT_PARAM_ERROR)?;
            } else {
                match a.arg(0)? {
                    SYSPARM_SPLPAR_CHARACTERISTICS
                    | SYSPARM_DIAGNOSTICS_RUN_MODE
                    | SYSPARM_UUID => a.status(RTAS_OUT_NOT_AUTHORIZED)?,
                    _ => a.status(RTAS_OUT_PARAM_ERROR)?,
                }
            }
        }
        // No platform events are ever raised (no hotplug, no EPOW).
        Service::CheckException => {
            if !(a.nargs == 6 || a.nargs == 7) || a.nret != 1 {
                a.status(RTAS_OUT_PARAM_ERROR)?;
            } else {
                a.status(RTAS_OUT_NO_ERRORS_FOUND)?;
            }
        }
        Service::EventScan => {
            if !a.shape(4, 1) {
                a.status(RTAS_OUT_PARAM_ERROR)?;
            } else {
                a.status(RTAS_OUT_NO_ERRORS_FOUND)?;
            }
        }
        Service::SetPowerLevel | Service::GetPowerLevel => {
            let nargs = if service == Service::SetPowerLevel {
                2
            } else {
                1
            };
            if !a.shape(nargs, 2) {
                a.status(RTAS_OUT_PARAM_ERROR)?;
            } else {
                a.status(RTAS_OUT_SUCCESS)?;
                a.ret(1, POWER_LEVEL_FULL)?;
            }
        }
        Service::PowerOff | Service::SystemReboot => {
            let nargs = if service == Service::PowerOff { 2 } else { 0 };
            if !a.shape(nargs, 1) {
                a.status(RTAS_OUT_PARAM_ERROR)?;
            } else {
                a.status(RTAS_OUT_SUCCESS)?;
                if service == Service::PowerOff {
                    fx.power_off();
                } else {
                    fx.reboot();
                }
                return Ok(Shutdown);
            }
        }
        Service::QueryCpuStoppedState => {
            let id = if a.shape(1, 2) { Some(a.arg(0)?) } else { None };
            match id {
                Some(id) if target(id) => {
                    let state = if fx.is_stopped(id as usize) {
                        CPU_STATE_STOPPED
                    } else {
                        CPU_STATE_RUNNING
                    };
                    a.status(RTAS_OUT_SUCCESS)?;
                    a.ret(1, state)?;
                }
                _ => a.status(RTAS_OUT_PARAM_ERROR)?,
            }
        }
        Service::StartCpu => {
            if !a.shape(3, 1) {
                a.status(RTAS_OUT_PARAM_ERROR)?;
            } else {
                let (id, entry, r3) = (a.arg(0)?, a.arg(1)?, a.arg(2)?);
                if !target(id) {
                    a.status(RTAS_OUT_PARAM_ERROR)?;
                } else if fx.start_cpu(id as usize, entry as u64, r3 as u64).is_err() {
                    a.status(RTAS_OUT_HW_ERROR)?;
                } else {
                    a.status(RTAS_OUT_SUCCESS)?;
                }
            }
        }
        Service::StopSelf => {
            // Does not return to the caller, so no status is written.
            fx.stop_self(cpu);
            return Ok(Stopped);
        }
        Service::SetXive => {
            if !a.shape(3, 1) {
                a.status(RTAS_OUT_PARAM_ERROR)?;
            } else {
                let (irq, server, prio) = (a.arg(0)?, a.arg(1)?, a.arg(2)?);
                if !Xics::valid_irq(irq) || !target(server) || prio > PRIO_MASKED as u32 {
                    a.status(RTAS_OUT_PARAM_ERROR)?;
                } else {
                    xics.write_xive(irq, server, prio as u8, prio as u8, fx);
                    a.status(RTAS_OUT_SUCCESS)?;
                }
            }
        }
        Service::GetXive => {
            let irq = if a.shape(1, 3) { Some(a.arg(0)?) } else { None };
            match irq.and_then(|irq| xics.source(irq)) {
                Some(s) => {
                    a.status(RTAS_OUT_SUCCESS)?;
                    a.ret(1, s.server)?;
                    a.ret(2, s.priority as u32)?;
                }
                None => a.status(RTAS_OUT_PARAM_ERROR)?,
            }
        }
        Service::IntOff | Service::IntOn => {
            let irq = if a.shape(1, 1) { Some(a.arg(0)?) } else { None };
            match irq.and_then(|irq| xics.source(irq).map(|s| (irq, *s))) {
                Some((irq, s)) => {
                    if service == Service::IntOff {
                        xics.write_xive(irq, s.server, PRIO_MASKED, s.priority, fx);
                    } else {
                        xics.write_xive(irq, s.server, s.saved_priority, s.saved_priority, fx);
                    }
                    a.status(RTAS_OUT_SUCCESS)?;
                }
                None => a.status(RTAS_OUT_PARAM_ERROR)?,
            }
        }
        Service::OsTerm => {
            if a.nargs < 1 {
                a.status(RTAS_OUT_PARAM_ERROR)?;
            } else {
                let msg = read_cstring(a.mem, real_addr(a.arg(0)? as u64), 511);
                a.status(RTAS_OUT_SUCCESS)?;
                fx.os_term(msg);
                return Ok(Shutdown);
            }
        }
    }
    Ok(Continue)
}

/// A NUL-terminated string of at most `max` bytes at `pa`, cut at the end of RAM.
fn read_cstring(mem: &dyn PhysMemory, pa: u64, max: usize) -> String {
    let mut bytes = Vec::new();
    let mut b = [0u8];
    while bytes.len() < max
        && mem
            .read(pa.wrapping_add(bytes.len() as u64), &mut b)
            .is_ok()
        && b[0] != 0
    {
        bytes.push(b[0]);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The partition's time-of-day clock: host UTC plus an offset, which `-rtc base=` chooses
/// and set-time-of-day changes (QEMU keeps the same offset). It runs at the host's rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rtc {
    /// Guest time minus host time, in nanoseconds.
    pub offset_ns: i128,
}

impl Rtc {
    /// A clock that reads `base` at host time `host` (both since the Unix epoch).
    pub fn starting_at(host: Duration, base: Duration) -> Self {
        let mut r = Rtc::default();
        r.set(host, base);
        r
    }

    /// Guest time at host time `host` (never before the epoch).
    pub fn now(&self, host: Duration) -> Duration {
        let ns = (host.as_nanos() as i128 + self.offset_ns).max(0);
        Duration::new((ns / 1_000_000_000) as u64, (ns % 1_000_000_000) as u32)
    }

    /// From host time `host` on, the clock reads `to` (then runs on).
    pub fn set(&mut self, host: Duration, to: Duration) {
        self.offset_ns = to.as_nanos() as i128 - host.as_nanos() as i128;
    }
}

/// UTC calendar time as get-time-of-day returns it (month 1-12, day 1-31).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CivilTime {
    pub year: u32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub nanos: u32,
}

impl CivilTime {
    pub fn from_unix(t: Duration) -> Self {
        let secs = t.as_secs();
        let days = (secs / 86_400) as i64;
        let rem = secs % 86_400;
        // Days since 1970-01-01 → proleptic Gregorian date, counting in 400-year eras that
        // start on March 1st (so the leap day is the last day of the year).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
        CivilTime {
            year: year as u32,
            month: month as u32,
            day: day as u32,
            hour: (rem / 3600) as u32,
            minute: (rem / 60 % 60) as u32,
            second: (rem % 60) as u32,
            nanos: t.subsec_nanos(),
        }
    }

    /// Time since the epoch, or `None` for a field out of its range (a day the month does
    /// not have, hour 24, second 60, a year before 1970, nanoseconds of a second or more).
    pub fn to_unix(&self) -> Option<Duration> {
        let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let (y, m) = (self.year as i64, self.month as i64);
        let mdays = [
            31,
            if leap(y) { 29 } else { 28 },
            31,
            30,
            31,
            30,
            31,
            31,
            30,
            31,
            30,
            31,
        ];
        if y < 1970
            || !(1..=12).contains(&m)
            || self.day == 0
            || self.day as i64 > mdays[(m - 1) as usize]
        {
            return None;
        }
        if self.hour > 23 || self.minute > 59 || self.second > 59 || self.nanos >= 1_000_000_000 {
            return None;
        }
        // The inverse of `from_unix`: days since 1970-01-01 of a March-based year.
        let (yy, mm) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
        let era = yy.div_euclid(400);
        let yoe = yy - era * 400;
        let doy = (153 * mm + 2) / 5 + self.day as i64 - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        let secs = days as u64 * 86_400
            + self.hour as u64 * 3600
            + self.minute as u64 * 60
            + self.second as u64;
        Some(Duration::new(secs, self.nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::pseries::effects::{Effect, Recorder, VecMemory};

    const BUF: u64 = 0x1000;

    /// Writes an argument buffer and returns (H_RTAS code, outcome, rets).
    fn run(
        xics: &mut Xics,
        fx: &mut Recorder,
        mem: &VecMemory,
        cpu: usize,
        token: u32,
        args: &[u32],
        nret: u32,
    ) -> (i64, RtasOutcome, Vec<i64>) {
        let mut stats = RtasStats::default();
        run_stats(xics, fx, mem, &mut stats, cpu, token, args, nret)
    }

    #[allow(clippy::too_many_arguments)]
    fn run_stats(
        xics: &mut Xics,
        fx: &mut Recorder,
        mem: &VecMemory,
        stats: &mut RtasStats,
        cpu: usize,
        token: u32,
        args: &[u32],
        nret: u32,
    ) -> (i64, RtasOutcome, Vec<i64>) {
        let mut words = vec![token, args.len() as u32, nret];
        words.extend_from_slice(args);
        words.extend(std::iter::repeat_n(0xdead_beef, nret as usize));
        for (i, w) in words.iter().enumerate() {
            mem.write_u32_be(BUF + 4 * i as u64, *w).unwrap();
        }
        let (rc, out) = call(
            RtasContext {
                xics,
                stats,
                clock: &mut Rtc::default(),
                mem,
                fx,
            },
            cpu,
            BUF | 0xc000_0000_0000_0000,
        );
        let rets_at = BUF + 12 + 4 * args.len() as u64;
        let rets = (0..nret)
            .map(|i| mem.read_u32_be(rets_at + 4 * i as u64).unwrap() as i32 as i64)
            .collect();
        (rc, out, rets)
    }

    fn machine(n: usize) -> (Xics, Recorder, VecMemory) {
        (Xics::new(n), Recorder::new(n), VecMemory::new(0x10000))
    }

    /// One call of [`calls_return`]: token, args, nret, the first rets, and what it checks.
    type Call<'a> = (u32, &'a [u32], u32, &'a [i64], &'a str);

    /// Makes `calls` in order on vCPU 0 of a machine with `ncpus`; each must return its rets.
    fn calls_return(ncpus: usize, calls: &[Call]) {
        let (mut x, mut fx, mem) = machine(ncpus);
        for &(token, args, nret, want, why) in calls {
            let rets = run(&mut x, &mut fx, &mem, 0, token, args, nret).2;
            assert_eq!(&rets[..want.len()], want, "{why}");
        }
    }

    #[test]
    fn blob_is_the_h_rtas_trampoline() {
        use crate::isa::disassemble;
        let text: Vec<String> = BLOB_WORDS.iter().map(|w| disassemble(*w, 0)).collect();
        assert_eq!(text[0], "or r4, r3, r3");
        assert!(
            text[1].starts_with("addis r3, r0, 0") || text[1].starts_with("addis r3, 0, 0"),
            "{}",
            text[1]
        );
        assert!(
            text[2].starts_with("ori r3, r3, ") && text[2].contains("61440")
                || text[2].contains("0xf000"),
            "{}",
            text[2]
        );
        assert!(text[3].starts_with("sc"), "{}", text[3]);
        assert!(text[4].starts_with("bclr 20"), "{}", text[4]);
        assert_eq!(blob().len(), BLOB_SIZE as usize);
        assert_eq!(&blob()[..4], &BLOB_WORDS[0].to_be_bytes());
    }

    #[test]
    fn tokens_are_unique_and_resolve() {
        for s in Service::ALL {
            assert_eq!(Service::from_token(s.token()), Some(s));
            assert_eq!(
                Service::ALL
                    .iter()
                    .filter(|t| t.token() == s.token() || t.name() == s.name())
                    .count(),
                1
            );
        }
        assert_eq!(Service::from_token(0xa), Some(Service::DisplayCharacter));
        assert_eq!(Service::from_token(0x2002), Some(Service::SetTimeOfDay));
        assert_eq!(
            Service::from_token(0x2012),
            None,
            "nvram-fetch is not offered"
        );
    }

    #[test]
    fn start_cpu_and_query_stopped_state() {
        let (mut x, mut fx, mem) = machine(2);
        let q = Service::QueryCpuStoppedState.token();
        assert_eq!(
            run(&mut x, &mut fx, &mem, 0, q, &[1], 2).2,
            vec![0, CPU_STATE_STOPPED as i64]
        );
        assert_eq!(
            run(&mut x, &mut fx, &mem, 0, q, &[0], 2).2,
            vec![0, CPU_STATE_RUNNING as i64]
        );
        assert_eq!(
            run(&mut x, &mut fx, &mem, 0, q, &[2], 2).2[0],
            -3,
            "no such CPU"
        );
        assert_eq!(
            run(&mut x, &mut fx, &mem, 0, q, &[1], 1).2[0],
            -3,
            "wrong nret"
        );

        let s = Service::StartCpu.token();
        let (rc, out, rets) = run(&mut x, &mut fx, &mem, 0, s, &[1, 0x400060, 0x1234], 1);
        assert_eq!((rc, out, rets), (H_SUCCESS, RtasOutcome::Continue, vec![0]));
        assert_eq!(
            fx.take(),
            vec![Effect::StartCpu {
                cpu: 1,
                entry: 0x400060,
                r3: 0x1234
            }]
        );
        assert_eq!(
            run(&mut x, &mut fx, &mem, 0, s, &[1, 0x400060, 0], 1).2,
            vec![-1],
            "already running"
        );
        assert_eq!(
            run(&mut x, &mut fx, &mem, 0, s, &[7, 0, 0], 1).2,
            vec![-3],
            "no such CPU"
        );
        assert_eq!(
            run(&mut x, &mut fx, &mem, 0, s, &[1, 0], 1).2,
            vec![-3],
            "wrong nargs"
        );
        assert_eq!(
            run(&mut x, &mut fx, &mem, 0, q, &[1], 2).2,
            vec![0, CPU_STATE_RUNNING as i64]
        );
        assert!(fx.take().is_empty());
    }

    #[test]
    fn stop_self_stops_the_caller_without_status() {
        let (mut x, mut fx, mem) = machine(2);
        fx.stopped[1] = false;
        let (rc, out, rets) = run(&mut x, &mut fx, &mem, 1, Service::StopSelf.token(), &[], 1);
        assert_eq!((rc, out), (H_SUCCESS, RtasOutcome::Stopped));
        assert_eq!(rets, vec![0xdead_beefu32 as i32 as i64]);
        assert_eq!(fx.take(), vec![Effect::StopSelf(1)]);
        assert!(fx.stopped[1]);
    }

    #[test]
    fn power_off_reboot_os_term() {
        let (mut x, mut fx, mem) = machine(1);
        let p = Service::PowerOff.token();
        assert_eq!(run(&mut x, &mut fx, &mem, 0, p, &[0], 1).2, vec![-3]);
        assert!(fx.take().is_empty());
        let (rc, out, rets) = run(&mut x, &mut fx, &mem, 0, p, &[u32::MAX, u32::MAX], 1);
        assert_eq!((rc, out, rets), (H_SUCCESS, RtasOutcome::Shutdown, vec![0]));
        assert_eq!(fx.take(), vec![Effect::PowerOff]);

        let r = Service::SystemReboot.token();
        assert_eq!(
            run(&mut x, &mut fx, &mem, 0, r, &[], 1).1,
            RtasOutcome::Shutdown
        );
        assert_eq!(fx.take(), vec![Effect::Reboot]);
        assert_eq!(run(&mut x, &mut fx, &mem, 0, r, &[1], 1).2, vec![-3]);

        mem.write(0x8000, b"kernel panic: no init\0junk").unwrap();
        let (rc, out, _) = run(
            &mut x,
            &mut fx,
            &mem,
            0,
            Service::OsTerm.token(),
            &[0x8000],
            1,
        );
        assert_eq!((rc, out), (H_SUCCESS, RtasOutcome::Shutdown));
        assert_eq!(
            fx.take(),
            vec![Effect::OsTerm("kernel panic: no init".into())]
        );
        // A message running off the end of RAM is cut there, not an error.
        mem.write(0xfffe, b"ab").unwrap();
        run(
            &mut x,
            &mut fx,
            &mem,
            0,
            Service::OsTerm.token(),
            &[0xfffe],
            1,
        );
        assert_eq!(fx.take(), vec![Effect::OsTerm("ab".into())]);
    }

    #[test]
    fn xive_calls() {
        let irq = crate::machine::pseries::xics::IRQ_BASE + 5;
        let set = Service::SetXive.token();
        let get = Service::GetXive.token();
        let (on, off) = (Service::IntOn.token(), Service::IntOff.token());
        calls_return(
            2,
            &[
                (set, &[irq, 1, 5], 1, &[0], "set"),
                (get, &[irq], 3, &[0, 1, 5], "as set"),
                (set, &[2, 1, 5], 1, &[-3], "IPI is not an ICS source"),
                (set, &[irq, 2, 5], 1, &[-3], "no such server"),
                (set, &[irq, 1, 0x100], 1, &[-3], "priority > 0xff"),
                (get, &[0x3000], 3, &[-3], "no such source"),
                (off, &[irq], 1, &[0], "int-off"),
                (get, &[irq], 3, &[0, 1, 0xff], "masked"),
                (on, &[irq], 1, &[0], "int-on"),
                (get, &[irq], 3, &[0, 1, 5], "priority restored"),
                (on, &[1], 1, &[-3], "no such source"),
            ],
        );
    }

    #[test]
    fn time_of_day_and_display_character() {
        let (mut x, mut fx, mem) = machine(1);
        // 2024-02-29 13:14:15.5 UTC
        fx.now = Duration::new(1_709_212_455, 500_000_000);
        let (_, _, rets) = run(
            &mut x,
            &mut fx,
            &mem,
            0,
            Service::GetTimeOfDay.token(),
            &[],
            8,
        );
        assert_eq!(rets, vec![0, 2024, 2, 29, 13, 14, 15, 500_000_000]);
        assert_eq!(
            run(
                &mut x,
                &mut fx,
                &mem,
                0,
                Service::GetTimeOfDay.token(),
                &[],
                7
            )
            .2[0],
            -3
        );
        run(
            &mut x,
            &mut fx,
            &mem,
            0,
            Service::DisplayCharacter.token(),
            &[b'L' as u32],
            1,
        );
        run(&mut x, &mut fx, &mem, 0, 0xa, &[b'!' as u32], 1);
        assert_eq!(fx.console, b"L!");
    }

    #[test]
    fn civil_time_edges() {
        let t = |s| CivilTime::from_unix(Duration::from_secs(s));
        assert_eq!((t(0).year, t(0).month, t(0).day), (1970, 1, 1));
        assert_eq!(
            (
                t(951_782_400).year,
                t(951_782_400).month,
                t(951_782_400).day
            ),
            (2000, 2, 29)
        );
        assert_eq!(
            (
                t(4_107_542_399).year,
                t(4_107_542_399).month,
                t(4_107_542_399).day,
                t(4_107_542_399).second
            ),
            (2100, 2, 28, 59)
        );
        assert_eq!(
            (t(4_107_542_400).month, t(4_107_542_400).day),
            (3, 1),
            "2100 is no leap year"
        );
    }

    #[test]
    fn bad_buffers_and_tokens() {
        let (mut x, mut fx, mem) = machine(1);
        let mut stats = RtasStats::default();
        let (rc, _, rets) = run_stats(&mut x, &mut fx, &mem, &mut stats, 0, 0x2fff, &[], 1);
        assert_eq!((rc, rets), (H_PARAMETER, vec![-3]));
        assert_eq!(stats.unknown, 1);
        // A call with the argument buffer at `pa`.
        let mut call_at = |pa: u64| {
            let ctx = RtasContext {
                xics: &mut x,
                stats: &mut stats,
                clock: &mut Rtc::default(),
                mem: &mem,
                fx: &mut fx,
            };
            call(ctx, 0, pa)
        };
        // Buffer outside RAM.
        let (rc, out) = call_at(0x10_0000);
        assert_eq!((rc, out), (H_PARAMETER, RtasOutcome::Continue));
        // Results that would land outside RAM.
        mem.write_u32_be(0xfff0, Service::GetTimeOfDay.token())
            .unwrap();
        mem.write_u32_be(0xfff4, 0).unwrap();
        mem.write_u32_be(0xfff8, 8).unwrap();
        let (rc, _) = call_at(0xfff0);
        assert_eq!(rc, H_PARAMETER);
        // Huge nargs: the results are far away, not a wrap-around into low memory.
        mem.write_u32_be(0x100, Service::QueryCpuStoppedState.token())
            .unwrap();
        mem.write_u32_be(0x104, u32::MAX).unwrap();
        mem.write_u32_be(0x108, 2).unwrap();
        let (rc, _) = call_at(0x100);
        assert_eq!(
            rc, H_PARAMETER,
            "the status would be written far outside RAM"
        );
        assert_eq!(stats.count(Service::QueryCpuStoppedState), 1);
    }

    /// Calls `token` with a clock that persists between calls.
    fn call_clocked(
        clock: &mut Rtc,
        fx: &mut Recorder,
        mem: &VecMemory,
        token: u32,
        args: &[u32],
        nret: u32,
    ) -> Vec<i64> {
        let mut words = vec![token, args.len() as u32, nret];
        words.extend_from_slice(args);
        words.extend(std::iter::repeat_n(0xdead_beef, nret as usize));
        for (i, w) in words.iter().enumerate() {
            mem.write_u32_be(BUF + 4 * i as u64, *w).unwrap();
        }
        let (mut xics, mut stats) = (Xics::new(1), RtasStats::default());
        let (rc, _) = call(
            RtasContext {
                xics: &mut xics,
                stats: &mut stats,
                clock,
                mem,
                fx,
            },
            0,
            BUF,
        );
        assert_eq!(rc, H_SUCCESS);
        let rets_at = BUF + 12 + 4 * args.len() as u64;
        (0..nret)
            .map(|i| mem.read_u32_be(rets_at + 4 * i as u64).unwrap() as i32 as i64)
            .collect()
    }

    #[test]
    fn set_time_of_day_moves_the_clock_and_it_runs_on() {
        let (_, mut fx, mem) = machine(1);
        let mut clock = Rtc::default();
        fx.now = Duration::new(1_700_000_000, 0);
        let set = Service::SetTimeOfDay.token();
        let get = Service::GetTimeOfDay.token();
        assert_eq!(
            call_clocked(
                &mut clock,
                &mut fx,
                &mem,
                set,
                &[2000, 2, 29, 23, 59, 58, 0],
                1
            ),
            vec![0]
        );
        fx.now += Duration::from_secs(3);
        assert_eq!(
            call_clocked(&mut clock, &mut fx, &mem, get, &[], 8),
            vec![0, 2000, 3, 1, 0, 0, 1, 0]
        );
        for bad in [
            [2001, 2, 29, 0, 0, 0, 0],
            [2000, 13, 1, 0, 0, 0, 0],
            [2000, 1, 1, 24, 0, 0, 0],
            [1969, 12, 31, 0, 0, 0, 0],
            [2000, 1, 1, 0, 0, 60, 0],
        ] {
            assert_eq!(
                call_clocked(&mut clock, &mut fx, &mem, set, &bad, 1),
                vec![-3],
                "{bad:?}"
            );
        }
        assert_eq!(
            call_clocked(&mut clock, &mut fx, &mem, set, &[2000, 1, 1, 0, 0, 0], 1),
            vec![-3],
            "six arguments"
        );
        assert_eq!(
            call_clocked(&mut clock, &mut fx, &mem, get, &[], 8)[1..4],
            [2000, 3, 1],
            "failed sets change nothing"
        );
    }

    #[test]
    fn civil_time_round_trips() {
        for secs in [
            0u64,
            951_782_400,
            1_709_212_455,
            4_102_444_800,
            253_402_300_799,
        ] {
            let t = CivilTime::from_unix(Duration::from_secs(secs));
            assert_eq!(t.to_unix(), Some(Duration::from_secs(secs)), "{t:?}");
        }
    }

    #[test]
    fn events_power_levels_and_system_parameters() {
        let scan = Service::EventScan.token();
        let check = Service::CheckException.token();
        let (set_level, get_level) = (
            Service::SetPowerLevel.token(),
            Service::GetPowerLevel.token(),
        );
        let sp = Service::SetSystemParameter.token();
        let splpar = SYSPARM_SPLPAR_CHARACTERISTICS;
        let no_errors = RTAS_OUT_NO_ERRORS_FOUND as i64;
        let not_authorized = RTAS_OUT_NOT_AUTHORIZED as i64;
        calls_return(
            1,
            &[
                (scan, &[0, 0, 0x8000, 0x800], 1, &[no_errors], "no events"),
                (scan, &[0], 1, &[-3], "event-scan with 1 arg"),
                (check, &[0; 6], 1, &[1], "check-exception with 6 args"),
                (check, &[0; 7], 1, &[1], "check-exception with 7 args"),
                (check, &[0; 5], 1, &[-3], "check-exception with 5 args"),
                (set_level, &[0, 50], 2, &[0, 100], "set-power-level"),
                (get_level, &[0], 2, &[0, 100], "get-power-level"),
                (get_level, &[0, 0], 2, &[-3], "get-power-level with 2 args"),
                (sp, &[splpar, 0x800], 1, &[not_authorized], "splpar"),
                (sp, &[7, 0x800], 1, &[-3], "unknown parameter"),
            ],
        );
    }
}
