//! Small guest programs that take and return from each interrupt of a pseries partition, run
//! on one vCPU of the system emulator (SystemSpace over shared RAM and an HPT), with checks of
//! SRR0/SRR1/DAR/DSISR/MSR at each handler and of the state after the handler's `rfid`.
//!
//! Handlers are guest code at the real-mode vectors. The default one skips the interrupted
//! instruction (`SRR0 += 4`), counts in r25 and returns with `rfid`.

use ppc64emu::cpu::interrupt::{self, Interrupt, Pending, mce, srr1 as reason};
use ppc64emu::cpu::{CpuState, SlbEntry, msr, spr};
use ppc64emu::engine::{Cpu, TimeBase};
use ppc64emu::interp::StepOutcome;
use ppc64emu::machine::pseries::hcall::{H_ENTER, H_PROTECT, H_REMOVE};
use ppc64emu::mmu::hpt;
use ppc64emu::mmu::slb::{esid, hash_key};
use ppc64emu::mmu::{Hpt, SystemSpace, dsisr, hpte_r};
use ppc64emu::papr::{H_FUNCTION, H_PRIVILEGE, H_SUCCESS};
use ppc64emu::softmmu::GuestRam;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Instruction words built from the ISA table's opcode values.
mod asm {
    use ppc64emu::isa::Op;

    fn op(o: Op) -> u32 {
        o.info().value
    }
    pub fn d(o: Op, rt: u32, ra: u32, d: i32) -> u32 {
        op(o) | (rt << 21) | (ra << 16) | (d as u32 & 0xffff)
    }
    pub fn x(o: Op, rt: u32, ra: u32, rb: u32) -> u32 {
        op(o) | (rt << 21) | (ra << 16) | (rb << 11)
    }
    pub fn li(rt: u32, v: i32) -> u32 {
        d(Op::Addi, rt, 0, v)
    }
    pub fn addi(rt: u32, ra: u32, v: i32) -> u32 {
        d(Op::Addi, rt, ra, v)
    }
    pub fn lis(rt: u32, v: i32) -> u32 {
        d(Op::Addis, rt, 0, v)
    }
    pub fn ori(ra: u32, rs: u32, v: u32) -> u32 {
        d(Op::Ori, rs, ra, v as i32)
    }
    fn spr_field(spr: u32) -> u32 {
        ((spr & 0x1f) << 16) | ((spr >> 5) << 11)
    }
    pub fn mtspr(spr: u32, rs: u32) -> u32 {
        op(Op::Mtspr) | (rs << 21) | spr_field(spr)
    }
    pub fn mfspr(rt: u32, spr: u32) -> u32 {
        op(Op::Mfspr) | (rt << 21) | spr_field(spr)
    }
    pub fn mfmsr(rt: u32) -> u32 {
        x(Op::Mfmsr, rt, 0, 0)
    }
    pub fn mtmsrd(rs: u32, l: u32) -> u32 {
        op(Op::Mtmsrd) | (rs << 21) | (l << 16)
    }
    pub fn rfid() -> u32 {
        op(Op::Rfid)
    }
    pub fn hrfid() -> u32 {
        op(Op::Hrfid)
    }
    pub fn isync() -> u32 {
        op(Op::Isync)
    }
    pub fn ptesync() -> u32 {
        op(Op::Sync) | (2 << 21)
    }
    pub fn tlbiel(rb: u32) -> u32 {
        x(Op::Tlbiel, 0, 0, rb)
    }
    pub fn tlbie(rb: u32) -> u32 {
        x(Op::Tlbie, 0, 0, rb)
    }
    pub fn sc(lev: u32) -> u32 {
        op(Op::Sc) | (lev << 5)
    }
    /// `tw 31,0,0`: trap unconditionally.
    pub fn trap() -> u32 {
        x(Op::Tw, 31, 0, 0)
    }
    pub fn lwz(rt: u32, disp: i32, ra: u32) -> u32 {
        d(Op::Lwz, rt, ra, disp)
    }
    pub fn stw(rs: u32, disp: i32, ra: u32) -> u32 {
        d(Op::Stw, rs, ra, disp)
    }
    pub fn lfd(frt: u32, disp: i32, ra: u32) -> u32 {
        d(Op::Lfd, frt, ra, disp)
    }
    pub fn lwarx(rt: u32, ra: u32, rb: u32) -> u32 {
        x(Op::Lwarx, rt, ra, rb)
    }
    pub fn slbmte(rs: u32, rb: u32) -> u32 {
        x(Op::Slbmte, rs, 0, rb)
    }
    /// `blrl`: call the address in LR.
    pub fn blrl() -> u32 {
        op(Op::Bclr) | (20 << 21) | 1
    }
    /// An illegal instruction (primary opcode 0).
    pub const ILLEGAL: u32 = 0;
}

use asm::*;

/// A timebase the test moves by hand.
#[derive(Default)]
struct ManualTb(AtomicU64);

impl TimeBase for ManualTb {
    fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Registers right after an interrupt was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Taken {
    vector: u64,
    srr0: u64,
    srr1: u64,
    dar: u64,
    dsisr: u64,
    msr: u64,
}

impl Taken {
    fn of(st: &CpuState, vector: u64) -> Self {
        Taken {
            vector,
            srr0: st.srr0,
            srr1: st.srr1,
            dar: st.dar,
            dsisr: st.dsisr,
            msr: st.msr,
        }
    }
    /// SRR1's reason bits (33:36, 42:47).
    fn reason(&self) -> u64 {
        self.srr1 & interrupt::SRR1_REASON_MASK
    }
}

const RAM: u64 = 32 << 20;
const CODE: u64 = 0x1_0000;
/// Every vector a pseries guest can take.
const VECTORS: [u64; 15] = [
    0x100, 0x200, 0x300, 0x380, 0x400, 0x480, 0x500, 0x600, 0x700, 0x800, 0x900, 0xc00, 0xf20,
    0xf40, 0xf60,
];
/// Hypercall the test machine treats as "external interrupt acknowledged".
const H_TEST_ACK_EXTERNAL: u64 = 0xef00;

struct Machine {
    cpu: Cpu,
    ram: Arc<GuestRam>,
    hpt: Arc<Hpt>,
    tb: Arc<ManualTb>,
    taken: Vec<Taken>,
    pending: Pending,
    hypercalls: Vec<u64>,
}

impl Machine {
    /// Supervisor, 64-bit, big-endian, MMU off; the skip handler at every vector.
    fn new() -> Self {
        let ram = Arc::new(GuestRam::new(RAM).unwrap());
        let hpt = Arc::new(Hpt::new(18).unwrap());
        let tb = Arc::new(ManualTb::default());
        let mut cpu = Cpu::new(Box::new(SystemSpace::new(ram.clone(), hpt.clone())));
        cpu.timebase = tb.clone();
        cpu.st.msr = msr::SF | msr::ME;
        let m = Machine {
            cpu,
            ram,
            hpt,
            tb,
            taken: Vec::new(),
            pending: Pending::default(),
            hypercalls: Vec::new(),
        };
        for v in VECTORS {
            m.handler(v, &Self::skip_handler());
        }
        m
    }

    /// SRR0 += 4; r25 += 1; rfid.
    fn skip_handler() -> Vec<u32> {
        vec![
            mfspr(20, spr::SRR0),
            addi(20, 20, 4),
            mtspr(spr::SRR0, 20),
            addi(25, 25, 1),
            rfid(),
        ]
    }

    /// r25 += 1; rfid (SRR0 already points where execution resumes).
    fn resume_handler() -> Vec<u32> {
        vec![addi(25, 25, 1), rfid()]
    }

    /// Returns to the caller of a faulting call: SRR0 = LR.
    fn return_to_lr_handler() -> Vec<u32> {
        vec![
            mfspr(20, spr::LR),
            mtspr(spr::SRR0, 20),
            addi(25, 25, 1),
            rfid(),
        ]
    }

    fn put(&self, addr: u64, words: &[u32], le: bool) {
        for (k, &w) in words.iter().enumerate() {
            let a = addr + 4 * k as u64;
            if le {
                self.ram.write_u32_le(a, w)
            } else {
                self.ram.write_u32_be(a, w)
            }
            .unwrap();
        }
    }

    fn handler(&self, vector: u64, words: &[u32]) {
        assert!(words.len() <= 8, "a handler fits between two vectors");
        self.put(vector, words, false);
    }

    /// Places `words` at CODE and returns the address after them.
    fn program(&mut self, words: &[u32]) -> u64 {
        self.put(CODE, words, false);
        self.cpu.st.pc = CODE;
        CODE + 4 * words.len() as u64
    }

    /// Runs until `pc == stop`, delivering pending asynchronous interrupts between
    /// instructions and serving hypercalls.
    fn run_to(&mut self, stop: u64) {
        for _ in 0..10_000 {
            if self.cpu.st.pc == stop {
                return;
            }
            let mut pending = self.pending;
            pending.decrementer = self.cpu.decrementer_pending();
            if let Some(v) = self.cpu.take_async(pending) {
                self.taken.push(Taken::of(&self.cpu.st, v));
                continue;
            }
            match self.cpu.system_step() {
                StepOutcome::Retired => {}
                StepOutcome::Interrupt { vector } => {
                    self.taken.push(Taken::of(&self.cpu.st, vector))
                }
                StepOutcome::Hypercall => self.hypercall(),
                StepOutcome::Checkstop => panic!("checkstop at {:#x}", self.cpu.st.pc),
            }
        }
        panic!(
            "did not reach {stop:#x}; pc {:#x}, taken {:x?}",
            self.cpu.st.pc, self.taken
        );
    }

    fn hypercall(&mut self) {
        let g = self.cpu.st.gpr;
        self.hypercalls.push(g[3]);
        let r = match g[3] {
            H_ENTER => self.hpt.h_enter(&self.ram, g[4], g[5], g[6], g[7]),
            H_REMOVE => self.hpt.h_remove(g[4], g[5], g[6]),
            H_PROTECT => self.hpt.h_protect(g[4], g[5], g[6]),
            H_TEST_ACK_EXTERNAL => {
                self.pending.external = false;
                self.cpu.st.gpr[3] = H_SUCCESS as u64;
                return;
            }
            _ => {
                self.cpu.st.gpr[3] = H_FUNCTION as u64;
                return;
            }
        };
        self.cpu.st.gpr[3] = r.ret as u64;
        for (k, &v) in r.outputs().iter().enumerate() {
            self.cpu.st.gpr[4 + k] = v;
        }
        if r.flush_tlbs.is_some() {
            self.cpu.mmu.tlb.flush_all();
        }
    }

    /// SLB entry `index` for the 256 MB segment of `ea` (Ks = 0, Kp = 1, as Linux sets them).
    fn segment(&mut self, index: usize, ea: u64, vsid: u64) {
        self.cpu.st.slb[index] = SlbEntry {
            esid: (ea & esid::ESID_256M) | esid::VALID,
            vsid: (vsid << 12) | 0x400,
        };
    }

    /// HPTE arguments (ptex of the primary group, pteh, ptel) mapping the 4K page of `ea` in
    /// the segment of SLB entry `index` to `pa`.
    fn hpte_args(&self, index: usize, ea: u64, pa: u64, flags: u64) -> (u64, u64, u64) {
        let key = hash_key(&self.cpu.st.slb[index], 12, ea);
        (
            (key.hash & self.hpt.pteg_mask()) * 8,
            key.ptem,
            (pa & !0xfff) | hpte_r::M | flags,
        )
    }

    fn map(&mut self, index: usize, ea: u64, pa: u64, flags: u64) -> u64 {
        let (ptex, pteh, ptel) = self.hpte_args(index, ea, pa, flags);
        let r = self.hpt.h_enter(&self.ram, 0, ptex, pteh, ptel);
        assert_eq!(r.ret, H_SUCCESS);
        r.out[0]
    }

    /// Runs with instruction and data relocation on, code identity-mapped through SLB entry 0.
    fn relocate_code(&mut self) {
        self.segment(0, 0, 0x100);
        for page in 0..4 {
            self.map(0, CODE + page * 0x1000, CODE + page * 0x1000, 0x2);
        }
        self.cpu.st.msr |= msr::IR | msr::DR;
    }
}

const SUPERVISOR: u64 = msr::SF | msr::ME;

#[test]
fn program_interrupts_illegal_trap_and_hypervisor_only_instructions() {
    let mut m = Machine::new();
    m.cpu.st.gpr[4] = 0x1000;
    let end = m.program(&[
        ILLEGAL,
        addi(3, 3, 1),
        trap(),
        addi(3, 3, 1),
        tlbie(4), // hypervisor-privileged in a partition
        addi(3, 3, 1),
        hrfid(),
        addi(3, 3, 1),
    ]);
    m.run_to(end);
    assert_eq!(
        m.cpu.st.gpr[3], 4,
        "every instruction after a faulting one ran once"
    );
    assert_eq!(m.cpu.st.gpr[25], 4);
    let expect = [
        (CODE, reason::ILLEGAL),
        (CODE + 8, reason::TRAP),
        (CODE + 16, reason::PRIVILEGED),
        (CODE + 24, reason::PRIVILEGED),
    ];
    assert_eq!(m.taken.len(), expect.len());
    for (t, (srr0, bits)) in m.taken.iter().zip(expect) {
        assert_eq!((t.vector, t.srr0, t.reason()), (0x700, srr0, bits));
        assert_eq!(t.srr1, SUPERVISOR | bits);
        assert_eq!(
            t.msr, SUPERVISOR,
            "handler: 64-bit, big-endian, MMU off, ME kept"
        );
    }
    assert_eq!(m.cpu.st.msr, SUPERVISOR);
}

#[test]
fn problem_state_privileged_instructions_and_system_calls() {
    let mut m = Machine::new();
    m.relocate_code();
    m.handler(0xc00, &Machine::resume_handler());
    let user = msr::SF | msr::ME | msr::PR | msr::EE | msr::IR | msr::DR;
    m.cpu.st.msr = user;
    m.cpu.st.gpr[3] = 0x1234;
    let end = m.program(&[
        mfmsr(5),            // privileged
        mtspr(spr::SRR0, 6), // privileged SPR
        mtmsrd(6, 1),        // privileged
        li(3, 0x58),         // hcall number ...
        sc(1),               // ... refused in problem state
        mr_marker(),         // r7 = 1: after the refused hcall
        sc(0),               // system call
        addi(8, 8, 1),
    ]);
    m.run_to(end);
    assert_eq!(m.cpu.st.gpr[3], H_PRIVILEGE as u64);
    assert!(
        m.hypercalls.is_empty(),
        "a problem-state hcall never reaches the machine"
    );
    assert_eq!(
        (m.cpu.st.gpr[5], m.cpu.st.gpr[7], m.cpu.st.gpr[8]),
        (0, 1, 1)
    );
    let v: Vec<_> = m
        .taken
        .iter()
        .map(|t| (t.vector, t.srr0, t.reason()))
        .collect();
    assert_eq!(
        v,
        [
            (0x700, CODE, reason::PRIVILEGED),
            (0x700, CODE + 4, reason::PRIVILEGED),
            (0x700, CODE + 8, reason::PRIVILEGED),
            (0xc00, CODE + 28, 0), // SRR0: the instruction after sc
        ]
    );
    for t in &m.taken {
        assert_eq!(t.srr1, user | t.reason());
        assert_eq!(t.msr, SUPERVISOR);
    }
    assert_eq!(m.cpu.st.msr, user, "rfid went back to problem state");
}

/// `addi r7,r7,1`
fn mr_marker() -> u32 {
    addi(7, 7, 1)
}

#[test]
fn hypercall_from_supervisor_reaches_the_machine() {
    let mut m = Machine::new();
    let end = m.program(&[li(3, 0x7777), sc(1), addi(9, 3, 0)]);
    m.run_to(end);
    assert_eq!(m.hypercalls, [0x7777]);
    assert_eq!(m.cpu.st.gpr[9], H_FUNCTION as u64);
    assert!(m.taken.is_empty());
}

/// Data segment miss, then no PTE, then success: the handlers install the SLB entry and the
/// HPTE (through H_ENTER) and retry the instruction, as an OS does on demand.
#[test]
fn data_segment_and_storage_interrupts_with_demand_paging() {
    let mut m = Machine::new();
    m.cpu.st.msr = SUPERVISOR | msr::DR;
    let ea = 0x0000_0000_0234_5670u64;
    let pa = 0x0005_0670u64;
    m.ram.write_u32_be(pa, 0xcafe_f00d).unwrap();
    // Segment handler: slbmte r28,r29; retry.
    m.cpu.st.gpr[28] = (0x222 << 12) | 0x400;
    m.cpu.st.gpr[29] = (ea & esid::ESID_256M) | esid::VALID | 3;
    m.handler(0x380, &[slbmte(28, 29), addi(25, 25, 1), rfid()]);
    // Storage handler: H_ENTER(r4..r7); retry.
    m.handler(
        0x300,
        &[li(3, H_ENTER as i32), sc(1), addi(24, 24, 1), rfid()],
    );
    let mut probe = m.cpu.st.clone();
    probe.slb[3] = SlbEntry {
        esid: m.cpu.st.gpr[29] & !0xfff,
        vsid: m.cpu.st.gpr[28],
    };
    let key = hash_key(&probe.slb[3], 12, ea);
    m.cpu.st.gpr[4] = 0;
    m.cpu.st.gpr[5] = (key.hash & m.hpt.pteg_mask()) * 8;
    m.cpu.st.gpr[6] = key.ptem;
    m.cpu.st.gpr[7] = (pa & !0xfff) | hpte_r::M | 0x2;
    m.cpu.st.gpr[9] = ea;
    let end = m.program(&[lwz(10, 0, 9), stw(10, 4, 9), lwz(11, 4, 9)]);
    m.run_to(end);
    assert_eq!(m.cpu.st.gpr[10], 0xcafe_f00d);
    assert_eq!(m.cpu.st.gpr[11], 0xcafe_f00d);
    assert_eq!(m.ram.read_u32_be(pa + 4).unwrap(), 0xcafe_f00d);
    assert_eq!((m.cpu.st.gpr[25], m.cpu.st.gpr[24]), (1, 1));
    assert_eq!(m.taken.len(), 2);
    let (seg, dsi) = (m.taken[0], m.taken[1]);
    assert_eq!(
        (seg.vector, seg.srr0, seg.dar, seg.reason()),
        (0x380, CODE, ea, 0)
    );
    assert_eq!(
        (dsi.vector, dsi.srr0, dsi.dar, dsi.dsisr),
        (0x300, CODE, ea, dsisr::NOPTE as u64)
    );
    assert_eq!(dsi.srr1, SUPERVISOR | msr::DR);
    assert_eq!(dsi.msr, SUPERVISOR, "handlers run with translation off");
    // The access set R, the store set C.
    let (_, r) = m.hpt.read_hpte(m.cpu.st.gpr[4]).unwrap();
    assert_eq!(r & (hpte_r::R | hpte_r::C), hpte_r::R | hpte_r::C);
}

#[test]
fn storage_interrupts_for_protection() {
    let mut m = Machine::new();
    m.relocate_code();
    let (ro, kernel) = (0x20_0000u64, 0x20_1000u64);
    m.map(0, ro, 0x30_0000, 0x3); // read-only for everyone
    m.map(0, kernel, 0x30_1000, 0x0); // key 0: read/write; key 1 (problem state): nothing
    m.ram.write_u32_be(0x30_0000, 11).unwrap();
    m.cpu.st.gpr[9] = ro;
    m.cpu.st.gpr[10] = kernel;
    let end = m.program(&[
        stw(3, 0, 9),  // DSI: protection, store
        lwz(4, 0, 9),  // fine
        stw(4, 0, 10), // supervisor: fine
        li(6, 0),      // enter problem state at the next instruction
        ori(6, 6, 0),
        lwz(5, 0, 10), // (run separately below)
    ]);
    m.run_to(CODE + 12);
    assert_eq!(m.cpu.st.gpr[4], 11);
    assert_eq!(m.ram.read_u32_be(0x30_1000).unwrap(), 11);
    assert_eq!(m.taken.len(), 1);
    let t = m.taken[0];
    assert_eq!(
        (t.vector, t.srr0, t.dar, t.dsisr),
        (0x300, CODE, ro, (dsisr::PROTFAULT | dsisr::STORE) as u64)
    );
    // Problem state: the kernel page gives a protection fault on a load.
    m.cpu.st.msr |= msr::PR | msr::EE;
    m.cpu.st.pc = CODE + 20;
    m.run_to(end);
    let t = m.taken[1];
    assert_eq!(
        (t.vector, t.srr0, t.dar, t.dsisr),
        (0x300, CODE + 20, kernel, dsisr::PROTFAULT as u64)
    );
    assert_ne!(t.srr1 & msr::PR, 0);
}

#[test]
fn instruction_storage_and_segment_interrupts() {
    let mut m = Machine::new();
    m.relocate_code();
    m.handler(0x400, &Machine::return_to_lr_handler());
    m.handler(0x480, &Machine::return_to_lr_handler());
    let unmapped = 0x40_0000u64;
    let noexec = 0x40_1000u64;
    let other_segment = 0x1000_0000u64;
    m.map(0, noexec, 0x50_0000, 0x2 | hpte_r::N);
    let end = m.program(&[
        mtspr(spr::LR, 11),
        blrl(), // ISI: no PTE
        mtspr(spr::LR, 12),
        blrl(), // ISI: no-execute page
        mtspr(spr::LR, 13),
        blrl(), // instruction segment
        addi(3, 3, 1),
    ]);
    m.cpu.st.gpr[11] = unmapped;
    m.cpu.st.gpr[12] = noexec + 0x10;
    m.cpu.st.gpr[13] = other_segment;
    m.run_to(end);
    assert_eq!((m.cpu.st.gpr[3], m.cpu.st.gpr[25]), (1, 3));
    let v: Vec<_> = m
        .taken
        .iter()
        .map(|t| (t.vector, t.srr0, t.reason()))
        .collect();
    assert_eq!(
        v,
        [
            (0x400, unmapped, dsisr::NOPTE as u64),
            (0x400, noexec + 0x10, dsisr::NOEXEC_GUARD as u64),
            (0x480, other_segment, 0),
        ]
    );
    for t in &m.taken {
        assert_eq!(
            t.srr1 & !interrupt::SRR1_REASON_MASK,
            SUPERVISOR | msr::IR | msr::DR
        );
        assert_eq!(t.msr, SUPERVISOR);
    }
    assert_eq!(m.cpu.st.msr, SUPERVISOR | msr::IR | msr::DR);
}

#[test]
fn alignment_interrupt() {
    let mut m = Machine::new();
    m.cpu.st.gpr[9] = 0x8002;
    let end = m.program(&[lwarx(10, 0, 9), addi(3, 3, 1)]);
    m.run_to(end);
    assert_eq!(m.cpu.st.gpr[3], 1);
    let t = m.taken[0];
    assert_eq!(
        (t.vector, t.srr0, t.dar, t.reason()),
        (0x600, CODE, 0x8002, 0)
    );
    assert_eq!(t.msr, SUPERVISOR);
}

/// Lazy FP as an OS does it: the handler turns MSR[FP] on in SRR1 and retries.
#[test]
fn fp_unavailable_then_retry_with_fp_enabled() {
    let mut m = Machine::new();
    m.handler(
        0x800,
        &[
            mfspr(21, spr::SRR1),
            ori(21, 21, msr::FP as u32),
            mtspr(spr::SRR1, 21),
            addi(25, 25, 1),
            rfid(),
        ],
    );
    m.ram.write_u64_be(0x9000, 2.5f64.to_bits()).unwrap();
    m.cpu.st.gpr[9] = 0x9000;
    let end = m.program(&[lfd(1, 0, 9), addi(3, 3, 1)]);
    m.run_to(end);
    assert_eq!(m.taken.len(), 1);
    let t = m.taken[0];
    assert_eq!((t.vector, t.srr0, t.srr1), (0x800, CODE, SUPERVISOR));
    assert_eq!(f64::from_bits(m.cpu.st.fpr(1)), 2.5);
    assert_eq!(m.cpu.st.msr, SUPERVISOR | msr::FP);
    assert_eq!(m.cpu.st.gpr[3], 1);
}

/// VMX/VSX unavailable, raised as the vector instructions raise them, handled by guest code
/// that enables the facility and retries.
#[test]
fn vector_and_vsx_unavailable() {
    for (exc, vector, bit) in [
        (ppc64emu::cpu::Exception::VecUnavailable, 0xf20, msr::VEC),
        (ppc64emu::cpu::Exception::VsxUnavailable, 0xf40, msr::VSX),
    ] {
        let mut m = Machine::new();
        m.handler(
            vector,
            &[
                lis(21, (bit >> 16) as i32),
                mfspr(22, spr::SRR1),
                ori_or(22, 21),
                mtspr(spr::SRR1, 22),
                rfid(),
            ],
        );
        let end = m.program(&[addi(3, 3, 1), addi(3, 3, 1)]);
        m.cpu.st.pc = CODE + 4;
        let d = m.cpu.deliver_interrupt(Interrupt::from(exc));
        assert_eq!(d, interrupt::Delivery::Taken { vector });
        assert_eq!(
            (m.cpu.st.srr0, m.cpu.st.srr1, m.cpu.st.msr),
            (CODE + 4, SUPERVISOR, SUPERVISOR)
        );
        m.run_to(end);
        assert_eq!(m.cpu.st.msr, SUPERVISOR | bit);
        assert_eq!(
            m.cpu.st.gpr[3], 1,
            "the interrupted instruction ran once, after the handler"
        );
    }
}

/// `or r22,r22,r21`
fn ori_or(rd: u32, rs: u32) -> u32 {
    asm::x(ppc64emu::isa::Op::Or, rd, rd, rs)
}

#[test]
fn decrementer_waits_for_ee_and_resumes_at_the_next_instruction() {
    let mut m = Machine::new();
    // Handler: DEC = 0x7fff0000 (positive: no longer pending), count, resume.
    m.handler(
        0x900,
        &[
            lis(20, 0x7fff),
            mtspr(spr::DEC, 20),
            addi(25, 25, 1),
            rfid(),
        ],
    );
    m.cpu.st.gpr[9] = 100;
    m.cpu.st.gpr[8] = msr::EE;
    let end = m.program(&[
        mtspr(spr::DEC, 9),
        addi(3, 3, 1),
        addi(3, 3, 1), // time passes here: DEC < 0, but EE = 0
        mtmsrd(8, 1),  // EE = 1: taken before the next instruction
        addi(3, 3, 1),
        addi(3, 3, 1),
    ]);
    m.run_to(CODE + 8);
    m.tb.0.store(150, Ordering::Relaxed);
    assert!(m.cpu.decrementer_pending());
    m.run_to(CODE + 12);
    assert!(m.taken.is_empty(), "not taken with MSR[EE] = 0");
    m.run_to(end);
    assert_eq!(m.taken.len(), 1, "taken once: writing DEC cleared it");
    let t = m.taken[0];
    assert_eq!(
        (t.vector, t.srr0, t.srr1),
        (0x900, CODE + 16, SUPERVISOR | msr::EE)
    );
    assert_eq!(t.msr, SUPERVISOR, "EE off in the handler");
    assert_eq!(m.cpu.st.gpr[3], 4);
    assert_eq!(m.cpu.st.msr, SUPERVISOR | msr::EE);
}

#[test]
fn external_interrupt_is_acknowledged_by_the_handler() {
    let mut m = Machine::new();
    m.handler(
        0x500,
        &[
            lis(3, 0),
            ori(3, 3, H_TEST_ACK_EXTERNAL as u32),
            sc(1),
            addi(25, 25, 1),
            rfid(),
        ],
    );
    m.cpu.st.gpr[8] = msr::EE;
    let end = m.program(&[addi(4, 4, 1), mtmsrd(8, 1), addi(4, 4, 1), addi(4, 4, 1)]);
    m.pending.external = true;
    m.run_to(end);
    assert_eq!(m.hypercalls, [H_TEST_ACK_EXTERNAL]);
    assert_eq!(m.taken.len(), 1);
    assert_eq!((m.taken[0].vector, m.taken[0].srr0), (0x500, CODE + 8));
    assert_eq!(m.cpu.st.gpr[4], 3);
}

#[test]
fn machine_check_on_a_real_address_outside_ram_and_checkstop() {
    let mut m = Machine::new();
    m.cpu.st.gpr[9] = 0xc000_0000_0000_0000 | RAM;
    let end = m.program(&[lwz(10, 8, 9), addi(3, 3, 1)]);
    m.run_to(end);
    let t = m.taken[0];
    assert_eq!(
        (t.vector, t.srr0, t.dar),
        (0x200, CODE, 0xc000_0000_0000_0008 | RAM)
    );
    assert_eq!(t.reason(), mce::LOAD_SRR1);
    assert_eq!(
        t.msr, SUPERVISOR,
        "a partition's machine check handler keeps ME"
    );
    assert_eq!(m.cpu.st.msr, SUPERVISOR);

    // With MSR[ME] = 0 the vCPU checkstops and its state is kept.
    let mut m = Machine::new();
    m.cpu.st.msr = msr::SF;
    m.cpu.st.gpr[9] = RAM;
    m.program(&[lwz(10, 0, 9)]);
    assert_eq!(m.cpu.system_step(), StepOutcome::Checkstop);
    assert_eq!(
        (m.cpu.st.pc, m.cpu.st.msr, m.cpu.st.srr0),
        (CODE, msr::SF, 0)
    );
}

#[test]
fn interrupts_are_little_endian_with_lpcr_ile() {
    let mut m = Machine::new();
    interrupt::set_interrupt_little_endian(&mut m.cpu.st, true);
    m.put(0x700, &Machine::skip_handler(), true);
    let end = m.program(&[trap(), addi(3, 3, 1)]);
    m.run_to(end);
    assert_eq!(m.taken[0].msr, SUPERVISOR | msr::LE);
    assert_eq!(m.taken[0].srr1 & msr::LE, 0);
    assert_eq!(m.cpu.st.msr, SUPERVISOR, "rfid went back to big-endian");
    assert_eq!((m.cpu.st.gpr[3], m.cpu.st.gpr[25]), (1, 1));
}

/// `tlbiel` only marks the local flush; `ptesync` (or an interrupt, or `rfid`) performs it.
#[test]
fn tlbiel_flush_happens_at_the_next_context_synchronisation() {
    let mut m = Machine::new();
    m.cpu.st.msr = SUPERVISOR | msr::DR;
    m.segment(0, 0, 0x300);
    let ea = 0x60_0000u64;
    let ptex = m.map(0, ea, 0x70_0000, 0x2 | hpte_r::R | hpte_r::C);
    m.ram.write_u32_be(0x70_0000, 1).unwrap();
    m.ram.write_u32_be(0x71_0000, 2).unwrap();
    m.cpu.st.gpr[9] = ea;
    let end = m.program(&[
        lwz(10, 0, 9), // 1, now in the TLB
        lwz(11, 0, 9), // (the HPTE is replaced before this one)
        tlbiel(9),
        lwz(12, 0, 9), // still the cached translation
        ptesync(),
        lwz(13, 0, 9), // the new translation
        tlbiel(9),
        isync(),
    ]);
    m.run_to(CODE + 4);
    // The hypervisor side changes the entry without a flush (not what H_REMOVE does).
    let (pteh, ptel) = m.hpt.read_hpte(ptex).unwrap();
    assert_eq!(m.hpt.h_remove(0, ptex, 0).ret, H_SUCCESS);
    assert_eq!(
        m.hpt
            .h_enter(
                &m.ram,
                hpt::H_EXACT,
                ptex,
                pteh,
                (ptel & !hpte_r::RPN) | 0x71_0000
            )
            .ret,
        H_SUCCESS
    );
    m.run_to(end);
    let g = &m.cpu.st.gpr;
    assert_eq!((g[10], g[11], g[12], g[13]), (1, 1, 1, 2));
    assert!(!m.cpu.tlb_flush_pending, "isync performed the last one");
}

/// H_PROTECT makes a page read-only and flushes the TLBs: the next store faults.
#[test]
fn h_protect_flush_makes_the_next_store_fault() {
    let mut m = Machine::new();
    m.cpu.st.msr = SUPERVISOR | msr::DR;
    m.segment(0, 0, 0x400);
    let ea = 0x80_0000u64;
    let ptex = m.map(0, ea, 0x90_0000, 0x2);
    m.cpu.st.gpr[9] = ea;
    m.cpu.st.gpr[4] = 0x3; // new PP: read-only
    m.cpu.st.gpr[5] = ptex;
    m.cpu.st.gpr[6] = 0;
    m.cpu.st.gpr[3] = H_PROTECT;
    let end = m.program(&[stw(9, 0, 9), sc(1), stw(9, 0, 9), addi(7, 7, 1)]);
    m.run_to(end);
    assert_eq!(m.hypercalls, [H_PROTECT]);
    assert_eq!(m.cpu.st.gpr[3], H_SUCCESS as u64);
    assert_eq!(m.taken.len(), 1);
    assert_eq!(
        (m.taken[0].vector, m.taken[0].srr0, m.taken[0].dsisr),
        (0x300, CODE + 8, (dsisr::PROTFAULT | dsisr::STORE) as u64)
    );
    assert_eq!(m.cpu.st.gpr[7], 1);
}

#[test]
fn every_synchronous_exception_maps_to_its_vector() {
    use ppc64emu::cpu::{Exception, MachineCheckKind, ProgramKind};
    let cases = [
        (
            Exception::Program(ProgramKind::FpEnabled),
            0x700,
            reason::FP_ENABLED,
        ),
        (Exception::Dsi { ea: 1, dsisr: 0 }, 0x300, 0),
        (Exception::DataSegment { ea: 1 }, 0x380, 0),
        (
            Exception::Isi {
                ea: 1,
                srr1: dsisr::PROTFAULT as u64,
            },
            0x400,
            dsisr::PROTFAULT as u64,
        ),
        (Exception::InstructionSegment { ea: 1 }, 0x480, 0),
        (Exception::Alignment { ea: 1, dsisr: 0 }, 0x600, 0),
        (Exception::SystemCall { lev: 0 }, 0xc00, 0),
        (Exception::FpUnavailable, 0x800, 0),
        (Exception::VecUnavailable, 0xf20, 0),
        (Exception::VsxUnavailable, 0xf40, 0),
        (Exception::FacilityUnavailable { cause: 2 }, 0xf60, 0),
        (
            Exception::MachineCheck {
                ea: 1,
                kind: MachineCheckKind::Fetch,
            },
            0x200,
            mce::FETCH_SRR1,
        ),
    ];
    for (e, vector, bits) in cases {
        let mut m = Machine::new();
        let end = m.program(&[addi(3, 3, 1), addi(3, 3, 1)]);
        let d = m.cpu.deliver_interrupt(Interrupt::from(e));
        assert_eq!(d, interrupt::Delivery::Taken { vector }, "{e:?}");
        assert_eq!(m.cpu.st.srr1 & interrupt::SRR1_REASON_MASK, bits, "{e:?}");
        // The skip handler returns past the instruction that "raised" it.
        m.run_to(end);
        assert_eq!(m.cpu.st.gpr[3], 1, "{e:?}");
    }
}
