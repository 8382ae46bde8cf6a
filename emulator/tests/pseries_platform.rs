//! Freestanding guest programs that check the platform as PAPR and the Power ISA define it
//! (hypercalls, VPA, RTAS, decrementer, trace interrupts, SPRs, MSR[ME], FP pairs, reserved
//! fields), each run on the whole machine under every locking strategy, interpreted and
//! translated. A guest reports by printing 64-bit values in hex, one per line, on the console
//! with H_PUT_TERM_CHAR to terminal 0 (the default vty), and powers off through H_RTAS; the
//! test compares the values with what the specifications say. No verdict depends on host
//! timing: where two vCPUs meet, one waits for a state the other can only reach by the
//! behaviour under test.

use ppc64emu::machine::pseries::MachineExit;
use ppc64emu::machine::pseries::boot::{Console, run_with};
use ppc64emu::machine::pseries::config::{AccelMode, MachineConfig, RtcBase};
use ppc64emu::machine::pseries::loader::{BootCpu, BootImages, plan};
use ppc64emu::machine::pseries::rtas::Service;
use ppc64emu::sync::{Baseline, CputlbNoBql, PerCpuLock, Strategy};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

// --- a small assembler (big-endian guest, encodings from the Power ISA) ---

const SRR0: u32 = 26;
const SRR1: u32 = 27;
const DEC: u32 = 22;
const SPRG0: u32 = 272;
const SIAR: u32 = 796;
const LR: u32 = 8;
const CTR: u32 = 9;

const MSR_SF: u64 = 1 << 63;
const MSR_EE: u64 = 1 << 15;
const MSR_FP: u64 = 1 << 13;
const MSR_ME: u64 = 1 << 12;
const MSR_SE: u64 = 1 << 10;
const MSR_BE: u64 = 1 << 9;

enum Fix {
    B,
    Bc,
}

struct Asm {
    base: u64,
    w: Vec<u32>,
    labels: HashMap<&'static str, u64>,
    fixups: Vec<(usize, &'static str, Fix)>,
}

fn spr_field(spr: u32) -> u32 {
    ((spr & 0x1f) << 16) | ((spr >> 5) << 11)
}

impl Asm {
    fn new(base: u64) -> Self {
        Asm {
            base,
            w: Vec::new(),
            labels: HashMap::new(),
            fixups: Vec::new(),
        }
    }
    fn here(&self) -> u64 {
        self.base + 4 * self.w.len() as u64
    }
    fn label(&mut self, l: &'static str) -> &mut Self {
        let at = self.here();
        self.labels.insert(l, at);
        self
    }
    fn word(&mut self, w: u32) -> &mut Self {
        self.w.push(w);
        self
    }
    fn d(&mut self, op: u32, rt: u32, ra: u32, imm: i32) -> &mut Self {
        self.word((op << 26) | (rt << 21) | (ra << 16) | (imm as u32 & 0xffff))
    }
    fn x(&mut self, op: u32, rt: u32, ra: u32, rb: u32, xo: u32) -> &mut Self {
        self.word((op << 26) | (rt << 21) | (ra << 16) | (rb << 11) | (xo << 1))
    }
    fn li(&mut self, rt: u32, v: i32) -> &mut Self {
        self.d(14, rt, 0, v)
    }
    fn addi(&mut self, rt: u32, ra: u32, v: i32) -> &mut Self {
        self.d(14, rt, ra, v)
    }
    /// Loads any 64-bit constant (five instructions).
    fn li64(&mut self, rt: u32, v: u64) -> &mut Self {
        self.d(15, rt, 0, (v >> 48) as i32)
            .d(24, rt, rt, (v >> 32) as i32 & 0xffff);
        self.rldicr(rt, rt, 32, 31)
            .d(25, rt, rt, (v >> 16) as i32 & 0xffff)
            .d(24, rt, rt, v as i32 & 0xffff)
    }
    fn rldicl(&mut self, ra: u32, rs: u32, sh: u32, mb: u32) -> &mut Self {
        let mb6 = ((mb & 31) << 1) | (mb >> 5);
        self.word(
            (30 << 26)
                | (rs << 21)
                | (ra << 16)
                | ((sh & 31) << 11)
                | (mb6 << 5)
                | ((sh >> 5) << 1),
        )
    }
    fn rldicr(&mut self, ra: u32, rs: u32, sh: u32, me: u32) -> &mut Self {
        let me6 = ((me & 31) << 1) | (me >> 5);
        self.word(
            (30 << 26)
                | (rs << 21)
                | (ra << 16)
                | ((sh & 31) << 11)
                | (me6 << 5)
                | (1 << 2)
                | ((sh >> 5) << 1),
        )
    }
    fn mr(&mut self, ra: u32, rs: u32) -> &mut Self {
        self.x(31, rs, ra, rs, 444)
    }
    fn andc(&mut self, ra: u32, rs: u32, rb: u32) -> &mut Self {
        self.x(31, rs, ra, rb, 60)
    }
    fn or(&mut self, ra: u32, rs: u32, rb: u32) -> &mut Self {
        self.x(31, rs, ra, rb, 444)
    }
    fn andi_(&mut self, ra: u32, rs: u32, v: u32) -> &mut Self {
        self.d(28, rs, ra, v as i32)
    }
    fn cmpldi(&mut self, ra: u32, v: u32) -> &mut Self {
        self.d(10, 1 << 1, ra, v as i32)
    }
    fn cmpdi(&mut self, ra: u32, v: i32) -> &mut Self {
        self.d(11, 1 << 1, ra, v)
    }
    fn ld(&mut self, rt: u32, ds: i32, ra: u32) -> &mut Self {
        self.d(58, rt, ra, ds)
    }
    fn std(&mut self, rs: u32, ds: i32, ra: u32) -> &mut Self {
        self.d(62, rs, ra, ds)
    }
    fn lwz(&mut self, rt: u32, d: i32, ra: u32) -> &mut Self {
        self.d(32, rt, ra, d)
    }
    fn lbz(&mut self, rt: u32, d: i32, ra: u32) -> &mut Self {
        self.d(34, rt, ra, d)
    }
    fn stfd(&mut self, frs: u32, d: i32, ra: u32) -> &mut Self {
        self.d(54, frs, ra, d)
    }
    fn mtspr(&mut self, spr: u32, rs: u32) -> &mut Self {
        self.word((31 << 26) | (rs << 21) | spr_field(spr) | (467 << 1))
    }
    fn mfspr(&mut self, rt: u32, spr: u32) -> &mut Self {
        self.word((31 << 26) | (rt << 21) | spr_field(spr) | (339 << 1))
    }
    fn mfmsr(&mut self, rt: u32) -> &mut Self {
        self.x(31, rt, 0, 0, 83)
    }
    fn mtmsrd(&mut self, rs: u32, l: u32) -> &mut Self {
        self.x(31, rs, l, 0, 178)
    }
    fn rfid(&mut self) -> &mut Self {
        self.word(0x4c00_0024)
    }
    fn sc1(&mut self) -> &mut Self {
        self.word(0x4400_0022)
    }
    fn blr(&mut self) -> &mut Self {
        self.word(0x4e80_0020)
    }
    fn nop(&mut self) -> &mut Self {
        self.word(0x6000_0000)
    }
    fn b(&mut self, l: &'static str) -> &mut Self {
        self.fixups.push((self.w.len(), l, Fix::B));
        self.word(18 << 26)
    }
    fn bc(&mut self, bo: u32, bi: u32, l: &'static str) -> &mut Self {
        self.fixups.push((self.w.len(), l, Fix::Bc));
        self.word((16 << 26) | (bo << 21) | (bi << 16))
    }
    fn beq(&mut self, l: &'static str) -> &mut Self {
        self.bc(12, 2, l)
    }
    fn bne(&mut self, l: &'static str) -> &mut Self {
        self.bc(4, 2, l)
    }
    fn blt(&mut self, l: &'static str) -> &mut Self {
        self.bc(12, 0, l)
    }
    fn bdnz(&mut self, l: &'static str) -> &mut Self {
        self.bc(16, 0, l)
    }
    /// Hypercall `op` (r3); the arguments are already in r4...
    fn hcall(&mut self, op: u64) -> &mut Self {
        self.li64(3, op).sc1()
    }
    /// Prints register `r` (calls PRINT; clobbers r3-r7, r20-r23, CTR, LR).
    fn print(&mut self, r: u32) -> &mut Self {
        if r != 3 {
            self.mr(3, r);
        }
        self.li64(22, PRINT).mtspr(LR, 22).word(0x4e80_0021) // blrl
    }
    /// Powers the machine off with RTAS power-off.
    fn power_off(&mut self) -> &mut Self {
        self.li64(4, RTAS_OFF).hcall(0xf000).label("hang").b("hang")
    }
    /// Calls RTAS with the argument buffer at `buf`.
    fn rtas(&mut self, buf: u64) -> &mut Self {
        self.li64(4, buf).hcall(0xf000)
    }
    fn finish(mut self) -> (u64, Vec<u8>, HashMap<&'static str, u64>) {
        for (k, l, fix) in std::mem::take(&mut self.fixups) {
            let off = self.labels[l].wrapping_sub(self.base + 4 * k as u64) as u32;
            self.w[k] |= match fix {
                Fix::B => off & 0x03ff_fffc,
                Fix::Bc => off & 0xfffc,
            };
        }
        (
            self.base,
            self.w.iter().flat_map(|w| w.to_be_bytes()).collect(),
            self.labels,
        )
    }
}

// --- the guest layout ---

const CODE: u64 = 0x10000;
const PRINT: u64 = 0x8000;
const DATA: u64 = 0x20000;
const RTAS_OFF: u64 = 0x30000;
const RTAS_BUF: u64 = 0x30100;
const RTAS_BUF2: u64 = 0x30200;
const VPA0: u64 = 0x40000;
const SECONDARY: u64 = 0x50000;

/// PRINT: r3 as 16 hex digits and a newline, one H_PUT_TERM_CHAR each, to terminal 0.
fn print_routine() -> Asm {
    let mut a = Asm::new(PRINT);
    a.mfspr(23, LR).mr(20, 3).li(21, 16).mtspr(CTR, 21);
    a.label("digit")
        .rldicl(21, 20, 4, 60)
        .rldicl(20, 20, 4, 0)
        .cmpldi(21, 10)
        .addi(21, 21, '0' as i32)
        .blt("emit");
    a.addi(21, 21, 'a' as i32 - '0' as i32 - 10);
    a.label("emit")
        .rldicr(6, 21, 56, 7)
        .li(4, 0)
        .li(5, 1)
        .li(3, 0x58)
        .sc1()
        .bdnz("digit");
    a.li(6, '\n' as i32)
        .rldicr(6, 6, 56, 7)
        .li(4, 0)
        .li(5, 1)
        .li(3, 0x58)
        .sc1();
    a.mtspr(LR, 23).blr();
    a
}

/// An RTAS argument buffer: token, nargs, nret, args, then room for the results.
fn rtas_buffer(token: u32, args: &[u32], nret: u32) -> Vec<u8> {
    let mut w = vec![token, args.len() as u32, nret];
    w.extend_from_slice(args);
    w.extend(std::iter::repeat_n(0, nret as usize));
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// A guest: the main program at CODE, handlers at vectors, extra code and data.
struct Guest {
    main: Asm,
    pieces: Vec<Asm>,
    data: Vec<(u64, Vec<u8>)>,
    smp: usize,
    rtc: RtcBase,
}

impl Guest {
    fn new(main: Asm) -> Self {
        Guest {
            main,
            pieces: Vec::new(),
            data: Vec::new(),
            smp: 1,
            rtc: RtcBase::Utc,
        }
    }
}

/// Interrupts taken, by vector (as the run report writes it), over all vCPUs.
type Interrupts = BTreeMap<String, u64>;

/// Runs a boot plan on one strategy: how the machine stopped, its console and the run
/// report's interrupt counts.
type RunOn = fn(
    &MachineConfig,
    &ppc64emu::machine::pseries::loader::BootPlan,
) -> (MachineExit, Vec<u8>, Interrupts);

fn strategies() -> Vec<(&'static str, RunOn)> {
    fn go<S: Strategy>(
        cfg: &MachineConfig,
        p: &ppc64emu::machine::pseries::loader::BootPlan,
    ) -> (MachineExit, Vec<u8>, Interrupts) {
        let out = run_with::<S>(cfg, p, Console::Capture).expect("machine runs");
        let mut interrupts = Interrupts::new();
        for v in &out.report.vcpus {
            for (k, n) in &v.interrupts {
                *interrupts.entry(k.clone()).or_default() += n;
            }
        }
        (out.exit, out.console, interrupts)
    }
    vec![
        ("baseline", go::<Baseline>),
        ("per-cpu-lock", go::<PerCpuLock>),
        ("cputlb-no-bql", go::<CputlbNoBql>),
    ]
}

/// Runs `g` under every strategy, interpreted and translated (threshold 0); returns the
/// printed values, the same for every run (else the test fails naming the runs).
fn run(g: Guest) -> (Vec<u64>, HashMap<&'static str, u64>) {
    let (values, labels, _) = run_counting(g);
    (values, labels)
}

/// [`run`], also returning each run's interrupt counts.
fn run_counting(g: Guest) -> (Vec<u64>, HashMap<&'static str, u64>, Vec<Interrupts>) {
    let mut labels = HashMap::new();
    let mut writes = Vec::new();
    let (base, bytes, l) = g.main.finish();
    labels.extend(l);
    writes.push((base, bytes));
    for p in g.pieces.into_iter().chain([print_routine()]) {
        let (base, bytes, l) = p.finish();
        labels.extend(l);
        writes.push((base, bytes));
    }
    writes.push((RTAS_OFF, rtas_buffer(Service::PowerOff.token(), &[0, 0], 1)));
    writes.extend(g.data);
    let mut first: Option<(String, Vec<u64>)> = None;
    let mut counts = Vec::new();
    for accel in [AccelMode::Interp, AccelMode::Jit] {
        let cfg = MachineConfig {
            smp: g.smp,
            accel,
            jit_threshold: Some(0),
            rtc: g.rtc,
            timeout: Some(Duration::from_secs(10)),
            ..MachineConfig::default()
        };
        let mut p = plan(
            &cfg,
            &BootImages {
                kernel: None,
                initrd: None,
                bios: None,
            },
            [0; 32],
        )
        .unwrap();
        p.writes.extend(writes.iter().cloned());
        p.boot = BootCpu {
            pc: CODE,
            msr: MSR_SF | MSR_ME,
            r3: p.fdt_addr,
            r4: 0,
            r5: 0,
        };
        for (name, go) in strategies() {
            let (exit, console, interrupts) = go(&cfg, &p);
            counts.push(interrupts);
            let text = String::from_utf8_lossy(&console).into_owned();
            let run = format!("{name}/{}", accel.as_str());
            assert_eq!(exit, MachineExit::PowerOff, "{run}: {text}");
            let values: Vec<u64> = text
                .lines()
                .map(|l| {
                    u64::from_str_radix(l.trim(), 16)
                        .unwrap_or_else(|_| panic!("{run}: line '{l}'"))
                })
                .collect();
            match &first {
                None => first = Some((run, values)),
                Some((r0, v0)) => assert_eq!(&values, v0, "{run} differs from {r0}"),
            }
        }
    }
    (first.unwrap().1, labels, counts)
}

/// A handler at `vector` that counts in r25 and returns past the interrupted instruction.
fn skip_handler(vector: u64) -> Asm {
    let mut h = Asm::new(vector);
    h.mfspr(24, SRR0)
        .addi(24, 24, 4)
        .mtspr(SRR0, 24)
        .addi(25, 25, 1)
        .rfid();
    h
}

fn neg(v: i64) -> u64 {
    v as u64
}

// --- the tests ---

/// Terminal 0 is the default vty (QEMU's `vty_lookup`): without it nothing would print. Then
/// H_SET_SPRG0 and H_PAGE_INIT as PAPR defines them.
#[test]
fn console_sprg0_and_page_init() {
    let mut a = Asm::new(CODE);
    a.li64(4, 0x1234_5678_9abc_def0)
        .hcall(0x24)
        .print(3)
        .mfspr(3, SPRG0)
        .print(3);
    // Zero a page.
    a.li64(4, 1 << 15)
        .li64(5, DATA)
        .li(6, 0)
        .hcall(0x2c)
        .print(3)
        .li64(9, DATA)
        .ld(3, 0xff8, 9)
        .print(3);
    // Copy a page (with the i-cache flag), then refusals: misaligned, unknown flag.
    a.li64(4, (1 << 14) | (1 << 22))
        .li64(5, DATA)
        .li64(6, DATA + 0x1000)
        .hcall(0x2c)
        .print(3)
        .li64(9, DATA)
        .ld(3, 0x800, 9)
        .print(3);
    a.li64(4, 1 << 15)
        .li64(5, DATA + 8)
        .li(6, 0)
        .hcall(0x2c)
        .print(3);
    a.li64(4, (1 << 15) | 1)
        .li64(5, DATA)
        .li(6, 0)
        .hcall(0x2c)
        .print(3);
    a.power_off();
    let mut g = Guest::new(a);
    g.data.push((DATA, vec![0xaa; 4096]));
    g.data.push((DATA + 0x1000, vec![0x55; 4096]));
    let (v, _) = run(g);
    assert_eq!(
        v,
        vec![
            0,
            0x1234_5678_9abc_def0,
            0,
            0,
            0,
            0x5555_5555_5555_5555,
            neg(-4),
            neg(-4)
        ]
    );
}

/// The VPA dispatch counter (big-endian u32 at 0x100) is odd while the vCPU is not
/// dispatched and even again when it runs: vCPU 1 waits until vCPU 0's counter turns odd
/// (it has ceded), prints it and prods vCPU 0, which prints its counter after waking.
/// Registration sets the shared-processor bit (byte 9, 0x02) as QEMU does.
#[test]
fn vpa_dispatch_counter_around_cede() {
    let mut a = Asm::new(CODE);
    a.li64(4, 1 << 45)
        .li(5, 0)
        .li64(6, VPA0)
        .hcall(0xdc)
        .print(3);
    a.li64(9, VPA0).lbz(3, 9, 9).print(3);
    // No decrementer interrupt while ceded.
    a.li64(9, 0x7fff_ffff).mtspr(DEC, 9);
    a.rtas(RTAS_BUF);
    a.hcall(0xe0);
    a.li64(9, VPA0).lwz(3, 0x100, 9).print(3);
    a.power_off();
    let mut s = Asm::new(SECONDARY);
    s.li64(9, VPA0)
        .label("wait")
        .lwz(5, 0x100, 9)
        .andi_(6, 5, 1)
        .beq("wait")
        .print(5);
    s.li(4, 0).hcall(0xe8);
    s.rtas(RTAS_BUF2).label("stopped").b("stopped");
    let mut vpa = vec![0u8; 640];
    vpa[4..6].copy_from_slice(&640u16.to_be_bytes());
    let mut g = Guest::new(a);
    g.smp = 2;
    g.pieces.push(s);
    g.data.push((VPA0, vpa));
    g.data.push((
        RTAS_BUF,
        rtas_buffer(Service::StartCpu.token(), &[1, SECONDARY as u32, 0], 1),
    ));
    g.data
        .push((RTAS_BUF2, rtas_buffer(Service::StopSelf.token(), &[], 0)));
    let (v, _) = run(g);
    assert_eq!(v, vec![0, 2, 1, 2]);
}

/// get-time-of-day starts from `-rtc base=`; set-time-of-day moves it (and it runs on from
/// there); a date that does not exist is a parameter error.
#[test]
fn rtc_base_and_set_time_of_day() {
    let mut a = Asm::new(CODE);
    let print_date = |a: &mut Asm| {
        a.rtas(RTAS_BUF).li64(9, RTAS_BUF);
        for k in 0..5 {
            a.lwz(3, 12 + 4 * k, 9).print(3);
        }
    };
    print_date(&mut a);
    a.rtas(RTAS_BUF2)
        .li64(9, RTAS_BUF2)
        .lwz(3, 12 + 28, 9)
        .print(3);
    print_date(&mut a);
    a.rtas(RTAS_BUF2 + 0x80)
        .li64(9, RTAS_BUF2 + 0x80)
        .lwz(3, 12 + 28, 9)
        .print(3);
    a.power_off();
    let mut g = Guest::new(a);
    g.rtc = RtcBase::At(1_150_560_081); // 2006-06-17T16:01:21
    g.data
        .push((RTAS_BUF, rtas_buffer(Service::GetTimeOfDay.token(), &[], 8)));
    g.data.push((
        RTAS_BUF2,
        rtas_buffer(
            Service::SetTimeOfDay.token(),
            &[2000, 2, 28, 12, 0, 0, 0],
            1,
        ),
    ));
    g.data.push((
        RTAS_BUF2 + 0x80,
        rtas_buffer(
            Service::SetTimeOfDay.token(),
            &[2001, 2, 29, 12, 0, 0, 0],
            1,
        ),
    ));
    let (v, _) = run(g);
    assert_eq!(
        v,
        vec![
            0,
            2006,
            6,
            17,
            16,
            0,
            0,
            2000,
            2,
            28,
            12,
            (-3i32) as u32 as u64
        ]
    );
}

/// The decrementer is a level (POWER8): writing a negative value with EE = 1 interrupts at
/// the very next instruction boundary on the writing vCPU; a handler that returns with
/// EE = 0 without rewriting DEC gets it again as soon as EE is set.
#[test]
fn decrementer_is_a_level_taken_at_the_next_boundary() {
    let mut a = Asm::new(CODE);
    a.li(25, 0).li(5, 0).li64(9, 0x7fff_ffff).mtspr(DEC, 9);
    a.mfmsr(9).li64(10, MSR_EE).or(9, 9, 10).mtmsrd(9, 1);
    a.li(9, -1).mtspr(DEC, 9).label("after_write").addi(5, 5, 1);
    // Back here with EE = 0 and DEC still negative; EE on again.
    a.mr(30, 26)
        .mr(31, 27)
        .mfmsr(9)
        .li64(10, MSR_EE)
        .or(9, 9, 10)
        .mtmsrd(9, 1)
        .label("after_ee")
        .nop();
    a.print(30).print(31).print(25).print(26);
    a.power_off();
    // 0x900: r26 = SRR0, r27 = r5; the first time return with EE = 0, the second rewrite DEC.
    let mut h = Asm::new(0x900);
    h.addi(25, 25, 1)
        .mfspr(26, SRR0)
        .mr(27, 5)
        .cmpdi(25, 1)
        .bne("second");
    h.mfspr(9, SRR1)
        .li64(10, MSR_EE)
        .andc(9, 9, 10)
        .mtspr(SRR1, 9)
        .rfid();
    h.label("second").li64(9, 0x7fff_ffff).mtspr(DEC, 9).rfid();
    let mut g = Guest::new(a);
    g.pieces.push(h);
    let (v, l) = run(g);
    assert_eq!(v, vec![l["after_write"], 0, 2, l["after_ee"]]);
}

/// MSR[SE]: a trace interrupt (0xD00) after each completed instruction, SRR0 = the next one,
/// SIAR = the traced one. MSR[BE]: after each branch, taken or not. The handler stops
/// tracing after two.
#[test]
fn single_step_and_branch_trace() {
    // Assembled twice: the first pass finds the addresses the rfids return to.
    let build = |se0: u64, be0: u64| {
        let mut a = Asm::new(CODE);
        a.li64(24, DATA).li(25, 0);
        a.li64(9, MSR_SF | MSR_ME | MSR_SE)
            .mtspr(SRR1, 9)
            .li64(9, se0)
            .mtspr(SRR0, 9)
            .rfid();
        a.label("se0")
            .addi(5, 5, 1)
            .label("se1")
            .addi(5, 5, 1)
            .label("se2")
            .addi(5, 5, 1);
        a.li(25, 0)
            .li64(9, MSR_SF | MSR_ME | MSR_BE)
            .mtspr(SRR1, 9)
            .li64(9, be0)
            .mtspr(SRR0, 9)
            .rfid();
        // Not traced, a taken branch, a compare, a branch not taken.
        a.label("be0")
            .addi(5, 5, 1)
            .label("b_at")
            .b("be1")
            .nop()
            .label("be1")
            .cmpdi(5, -7)
            .label("bc_at")
            .beq("be0");
        a.label("be2").addi(5, 5, 1).nop();
        a.li64(9, DATA);
        for k in 0..8 {
            a.ld(3, 8 * k, 9).print(3);
        }
        a.power_off();
        a
    };
    let (_, _, first) = build(0, 0).finish();
    let mut g = Guest::new(build(first["se0"], first["be0"]));
    let mut h = Asm::new(0xd00);
    h.mfspr(26, SRR0)
        .std(26, 0, 24)
        .mfspr(26, SIAR)
        .std(26, 8, 24)
        .addi(24, 24, 16)
        .addi(25, 25, 1)
        .cmpdi(25, 2)
        .bne("ret");
    h.mfspr(26, SRR1)
        .li64(27, MSR_SE | MSR_BE)
        .andc(26, 26, 27)
        .mtspr(SRR1, 26);
    h.label("ret").rfid();
    g.pieces.push(h);
    let (v, l, counts) = run_counting(g);
    assert_eq!(
        v,
        vec![
            l["se1"], l["se0"], l["se2"], l["se1"], l["be1"], l["b_at"], l["be2"], l["bc_at"]
        ]
    );
    // The run report counts them by vector like every other interrupt: four traces.
    for c in counts {
        assert_eq!(c.get("0xd00"), Some(&4), "{c:?}");
    }
}

/// SPRs a partition reaches: the PMU user aliases are writable in supervisor state where
/// the ISA allows (USIER is not), PMC1-6 have 32 bits, PSPB 32 bits, BESCR's set/reset
/// aliases, TIR and DPDES read 0, VTB reads (it counts with the timebase).
#[test]
fn sprs_of_a_partition() {
    let mut a = Asm::new(CODE);
    a.li(25, 0);
    a.li64(9, 0x1_2345_6789)
        .mtspr(771, 9)
        .mfspr(3, 787)
        .print(3);
    a.li64(9, 0x55).mtspr(768, 9).print(25);
    a.li64(9, 0x1_0000_0005)
        .mtspr(159, 9)
        .li(3, -1)
        .mfspr(3, 159)
        .print(3);
    a.li(9, 0)
        .mtspr(806, 9)
        .li(9, 5)
        .mtspr(800, 9)
        .li(9, 3)
        .mtspr(801, 9)
        .li(9, 1)
        .mtspr(802, 9);
    a.mfspr(3, 806).print(3).li(3, -1).mfspr(3, 801).print(3);
    a.li(3, -1)
        .mfspr(3, 446)
        .print(3)
        .li(3, -1)
        .mfspr(3, 176)
        .print(3);
    a.li(3, -1).mfspr(3, 351).rldicl(3, 3, 1, 63).print(3);
    a.power_off();
    let mut g = Guest::new(a);
    g.pieces.push(skip_handler(0x700));
    let (v, _) = run(g);
    assert_eq!(v, vec![0x2345_6789, 1, 5, 0x3_0000_0004, 3, 0, 0, 0]);
}

/// A partition (HV = 0) cannot clear MSR[ME], neither with mtmsrd nor with rfid.
#[test]
fn partition_cannot_clear_machine_check_enable() {
    let mut a = Asm::new(CODE);
    a.li64(9, MSR_SF)
        .mtmsrd(9, 0)
        .mfmsr(3)
        .andi_(3, 3, MSR_ME as u32)
        .print(3);
    a.li64(9, MSR_SF).mtspr(SRR1, 9);
    let target_at = a.here() + 4 * 7; // li64, mtspr, rfid
    a.li64(9, target_at).mtspr(SRR0, 9).rfid();
    assert_eq!(a.here(), target_at);
    a.mfmsr(3).andi_(3, 3, MSR_ME as u32).print(3);
    a.power_off();
    let (v, _) = run(Guest::new(a));
    assert_eq!(v, vec![MSR_ME, MSR_ME]);
}

/// lfdp/stfdp/lfdpx/stfdpx (POWER8 has them): FRp and FRp+1 from/to a quadword; an odd FRp
/// is an illegal instruction.
#[test]
fn floating_point_load_store_pair() {
    let mut a = Asm::new(CODE);
    a.li(25, 0)
        .mfmsr(9)
        .li64(10, MSR_FP)
        .or(9, 9, 10)
        .mtmsrd(9, 0);
    a.li64(9, DATA);
    a.word((57 << 26) | (2 << 21) | (9 << 16)); // lfdp f2,0(r9)
    a.stfd(2, 32, 9)
        .stfd(3, 40, 9)
        .ld(3, 32, 9)
        .print(3)
        .ld(3, 40, 9)
        .print(3);
    a.word((61 << 26) | (2 << 21) | (9 << 16) | 48); // stfdp f2,48(r9)
    a.ld(3, 48, 9).print(3).ld(3, 56, 9).print(3);
    a.li(10, 16).x(31, 4, 9, 10, 791); // lfdpx f4,r9,r10
    a.stfd(4, 32, 9)
        .stfd(5, 40, 9)
        .ld(3, 32, 9)
        .print(3)
        .ld(3, 40, 9)
        .print(3);
    a.li(10, 64).x(31, 4, 9, 10, 919); // stfdpx f4,r9,r10
    a.ld(3, 64, 9).print(3).ld(3, 72, 9).print(3);
    a.word((57 << 26) | (3 << 21) | (9 << 16)); // lfdp f3: odd FRp
    a.print(25);
    a.power_off();
    let mut g = Guest::new(a);
    g.pieces.push(skip_handler(0x700));
    let vals = [1.5f64, 2.5, 3.25, -4.0];
    g.data.push((
        DATA,
        vals.iter()
            .flat_map(|v| v.to_bits().to_be_bytes())
            .collect(),
    ));
    let (v, _) = run(g);
    let b = |x: f64| x.to_bits();
    assert_eq!(
        v,
        vec![
            b(1.5),
            b(2.5),
            b(1.5),
            b(2.5),
            b(3.25),
            b(-4.0),
            b(3.25),
            b(-4.0),
            1
        ]
    );
}

/// ISA 3.0 put mffsce, mffscdrn(i), mffscrn(i) and mffsl in mffs's reserved field; POWER8
/// ignores reserved fields, so they are mffs there: FPSCR copied, RN not changed.
#[test]
fn mffs_reserved_field_forms_are_mffs() {
    let mut a = Asm::new(CODE);
    a.li(25, 0)
        .mfmsr(9)
        .li64(10, MSR_FP)
        .or(9, 9, 10)
        .mtmsrd(9, 0)
        .li64(9, DATA);
    a.word((63 << 26) | (7 << 23) | (2 << 12) | (134 << 1)); // mtfsfi 7,2: RN = +inf
    for ra in [1u32, 20, 21, 22, 23, 24] {
        // mffsce / mffscdrn f0,f1 / mffscdrni / mffscrn / mffscrni 0 (0xfc17048e) / mffsl
        let rb = if ra == 20 || ra == 22 { 1 } else { 0 };
        a.word((63 << 26) | (ra << 16) | (rb << 11) | (583 << 1))
            .stfd(0, 0, 9)
            .ld(3, 0, 9)
            .print(3);
    }
    a.word((63 << 26) | (583 << 1))
        .stfd(0, 0, 9)
        .ld(3, 0, 9)
        .print(3)
        .print(25);
    a.power_off();
    let mut g = Guest::new(a);
    g.pieces.push(skip_handler(0x700));
    g.pieces.push(skip_handler(0x800));
    let (v, _) = run(g);
    assert_eq!(v, vec![2, 2, 2, 2, 2, 2, 2, 0]);
}
