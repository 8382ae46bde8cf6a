//! TLB hit rate and fill cost of the system emulator on memory-heavy guest loops.
//!
//! One vCPU runs, with the MMU on (SLB + HPT, 4 KiB or 64 KiB pages), loops that load from a
//! 64 MiB buffer: sequentially, one load per 4 KiB page, and at pseudo-random addresses.
//! Printed per loop: TLB lookups (instruction fetches + data accesses), fills, hit rate, time
//! per instruction (thread CPU time); then the fill cost measured directly on the fill path.
//!
//! Run: `cargo run --release -p ppc64emu --example tlb_report`

use ppc64emu::cpu::{SlbEntry, msr};
use ppc64emu::engine::Cpu;
use ppc64emu::interp::StepOutcome;
use ppc64emu::isa::Op;
use ppc64emu::mmu::slb::{esid, hash_key, segment_page_sizes};
use ppc64emu::mmu::{Hpt, SystemSpace, hpte_r, hpte_v};
use ppc64emu::papr::H_SUCCESS;
use ppc64emu::softmmu::{Access, AddressSpace, GuestRam};
use std::sync::Arc;

const RAM: u64 = 256 << 20;
const CODE: u64 = 0x1_0000;
const BUF_EA: u64 = 0x1000_0000;
const BUF_PA: u64 = 0x0400_0000;
const BUF_LEN: u64 = 64 << 20;

/// CPU time of this thread: the host is shared, so wall time would count other programs.
#[derive(Clone, Copy)]
struct Instant(f64);

impl Instant {
    fn now() -> Self {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid pointer to a timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Instant(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
    }
    fn elapsed(&self) -> Elapsed {
        Elapsed(Instant::now().0 - self.0)
    }
}

struct Elapsed(f64);

impl Elapsed {
    fn as_secs_f64(&self) -> f64 {
        self.0
    }
}

fn op(o: Op) -> u32 {
    o.info().value
}
fn xo(o: Op, rt: u32, ra: u32, rb: u32) -> u32 {
    op(o) | (rt << 21) | (ra << 16) | (rb << 11)
}
fn ld(rt: u32, ra: u32) -> u32 {
    op(Op::Ld) | (rt << 21) | (ra << 16)
}
fn mtctr(rs: u32) -> u32 {
    op(Op::Mtspr) | (rs << 21) | (9 << 16)
}
/// `bdnz` back by `n` instructions.
fn bdnz_back(n: i32) -> u32 {
    op(Op::Bc) | (16 << 21) | ((-4 * n) as u32 & 0xfffc)
}

struct Env {
    cpu: Cpu,
    space_stats: Arc<ppc64emu::mmu::MmuStats>,
}

/// MMU on, code identity-mapped (4K pages), the buffer mapped at BUF_EA with `page_shift`.
fn env(page_shift: u32) -> Env {
    let ram = Arc::new(GuestRam::new(RAM).unwrap());
    let hpt = Arc::new(Hpt::new(Hpt::shift_for_ram_size(RAM)).unwrap());
    let space = SystemSpace::new(ram.clone(), hpt.clone());
    let space_stats = space.stats();
    let mut cpu = Cpu::new(Box::new(space));
    let llp = if page_shift == 16 { 0x110 } else { 0 };
    cpu.st.slb[0] = SlbEntry {
        esid: esid::VALID,
        vsid: 0x100 << 12,
    };
    cpu.st.slb[1] = SlbEntry {
        esid: BUF_EA | esid::VALID,
        vsid: (0x200 << 12) | llp,
    };
    let map = |slb: &SlbEntry, ea: u64, pa: u64| {
        let seg = segment_page_sizes(slb.vsid).unwrap();
        let key = hash_key(slb, seg.base_shift, ea);
        let (l, enc) = if seg.base_shift == 16 {
            (hpte_v::LARGE, 0x1000)
        } else {
            (0, 0)
        };
        let ptel = pa | enc | hpte_r::M | hpte_r::R | hpte_r::C | 0x2;
        let r = hpt.h_enter(
            &ram,
            0,
            (key.hash & hpt.pteg_mask()) * 8,
            key.ptem | l,
            ptel,
        );
        let r = if r.ret == H_SUCCESS {
            r
        } else {
            hpt.h_enter(
                &ram,
                0,
                (!key.hash & hpt.pteg_mask()) * 8,
                key.ptem | l | hpte_v::SECONDARY,
                ptel,
            )
        };
        assert_eq!(r.ret, H_SUCCESS, "HPT full");
    };
    map(&cpu.st.slb[0], CODE, CODE);
    let page = 1u64 << page_shift;
    for k in 0..BUF_LEN / page {
        map(&cpu.st.slb[1], BUF_EA + k * page, BUF_PA + k * page);
    }
    cpu.st.msr = msr::SF | msr::ME | msr::IR | msr::DR;
    Env { cpu, space_stats }
}

struct Run {
    instructions: u64,
    lookups: u64,
    fills: u64,
    secs: f64,
}

/// Runs `body` (a loop ending in `bdnz` back to its start) `iterations` times; each
/// iteration makes one data access.
fn run(e: &mut Env, setup: &[(u32, u64)], body: &[u32], iterations: u64, passes: u32) -> Run {
    let mut words = vec![mtctr(5)];
    words.extend_from_slice(body);
    for (k, w) in words.iter().enumerate() {
        e.cpu
            .mmu
            .store(&e.cpu.st, CODE + 4 * k as u64, 4, *w as u64, false)
            .unwrap();
    }
    let end = CODE + 4 * words.len() as u64;
    // Best of three: the host is shared, the minimum is the least disturbed run.
    let mut best: Option<Run> = None;
    for _ in 0..3 {
        let r = run_once(e, setup, end, iterations, passes);
        if best.as_ref().is_none_or(|b| r.secs < b.secs) {
            best = Some(r);
        }
    }
    best.unwrap()
}

fn run_once(e: &mut Env, setup: &[(u32, u64)], end: u64, iterations: u64, passes: u32) -> Run {
    e.cpu.mmu.tlb.flush_all();
    let fills0 = e.cpu.mmu.tlb.counters.fills;
    let insns0 = e.cpu.counters.instructions;
    let t = Instant::now();
    for _ in 0..passes {
        for &(r, v) in setup {
            e.cpu.st.gpr[r as usize] = v;
        }
        e.cpu.st.gpr[5] = iterations;
        e.cpu.st.pc = CODE;
        while e.cpu.st.pc != end {
            match e.cpu.system_step() {
                StepOutcome::Retired => {}
                other => panic!("{other:?} at {:#x}", e.cpu.st.pc),
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let instructions = e.cpu.counters.instructions - insns0;
    let lookups = instructions + iterations * passes as u64;
    Run {
        instructions,
        lookups,
        fills: e.cpu.mmu.tlb.counters.fills - fills0,
        secs,
    }
}

fn report(name: &str, r: &Run) {
    println!(
        "{name:<34} {:>10} {:>10} {:>9} {:>9.4}% {:>8.1}",
        r.instructions,
        r.lookups,
        r.fills,
        100.0 * (1.0 - r.fills as f64 / r.lookups as f64),
        r.secs * 1e9 / r.instructions as f64
    );
}

fn main() {
    println!(
        "{:<34} {:>10} {:>10} {:>9} {:>10} {:>8}",
        "loop (64 MiB buffer, MMU on)", "insns", "lookups", "fills", "hit rate", "ns/insn"
    );
    for shift in [12u32, 16] {
        let mut e = env(shift);
        let p = if shift == 12 { "4K" } else { "64K" };
        // r3 = address, r4 = stride, r6 = sum.
        let walk = [
            ld(7, 3),
            xo(Op::Add, 6, 6, 7),
            xo(Op::Add, 3, 3, 4),
            bdnz_back(3),
        ];
        let seq = run(&mut e, &[(3, BUF_EA), (4, 8)], &walk, BUF_LEN / 8, 1);
        report(&format!("{p} pages: sequential 8-byte loads"), &seq);
        let same = run(&mut e, &[(3, BUF_EA), (4, 0)], &walk, BUF_LEN / 4096, 8);
        report(&format!("{p} pages: same address (all hits)"), &same);
        let stride = run(&mut e, &[(3, BUF_EA), (4, 4096)], &walk, BUF_LEN / 4096, 8);
        report(&format!("{p} pages: one load per 4K page"), &stride);
        // r12 = x; x = x * a + c; load at BUF_EA + (x & mask).
        let lcg = [
            xo(Op::Mulld, 12, 12, 8),
            xo(Op::Add, 12, 12, 9),
            op(Op::And) | (12 << 21) | (13 << 16) | (10 << 11),
            xo(Op::Ldx, 7, 11, 13),
            xo(Op::Add, 6, 6, 7),
            bdnz_back(5),
        ];
        let setup = [
            (12, 1),
            (8, 6364136223846793005),
            (9, 1442695040888963407),
            (10, (BUF_LEN - 1) & !7),
            (11, BUF_EA),
        ];
        let random = run(&mut e, &setup, &lcg, 1 << 20, 1);
        report(&format!("{p} pages: pseudo-random loads"), &random);
        // Fill cost in context: the strided loop minus the same loop hitting one page.
        let per_fill = (stride.secs - same.secs) / (stride.fills - same.fills) as f64;
        println!(
            "  fill cost in the strided loop: {:.0} ns per fill (vs. same instructions all hitting)",
            per_fill * 1e9
        );
        let s = &e.space_stats;
        let ord = std::sync::atomic::Ordering::Relaxed;
        println!(
            "  fill path, all runs above: {} HPT fills, {} PTEG reads, {} R/C updates, {} faults; {} victim-TLB hits",
            s.hpt_fills.load(ord),
            s.pteg_reads.load(ord),
            s.rc_updates.load(ord),
            s.storage_faults.load(ord) + s.segment_faults.load(ord),
            e.cpu.mmu.tlb.counters.victim_hits
        );
    }

    // Direct cost of one translation (SLB lookup + HPT search + mapping), no TLB.
    let mut space = extract_space(12);
    let mut st = ppc64emu::cpu::CpuState::new();
    st.msr = msr::SF | msr::ME | msr::IR | msr::DR;
    st.slb[1] = SlbEntry {
        esid: BUF_EA | esid::VALID,
        vsid: 0x200 << 12,
    };
    let n = BUF_LEN / 4096;
    let mut acc = 0u64;
    let ns = best_ns(n, |k| {
        let m = space
            .translate(&st, BUF_EA + ((k * 7919) % n) * 4096, Access::Read)
            .unwrap();
        acc = acc.wrapping_add(m.pa);
    });
    println!("translate() alone, 4K pages, scattered over 64 MiB: {ns:.0} ns per call");
    let ns = best_ns(n, |k| {
        let m = space
            .translate(&st, BUF_EA + (k % 256) * 4096, Access::Read)
            .unwrap();
        acc = acc.wrapping_add(m.pa);
    });
    println!("translate() alone, 4K pages, 256 pages (HPT in cache): {ns:.0} ns per call");
    let mut real = st.clone();
    real.msr = msr::SF | msr::ME;
    let ns = best_ns(n, |k| {
        let m = space
            .translate(&real, (k % n) * 4096, Access::Read)
            .unwrap();
        acc = acc.wrapping_add(m.pa);
    });
    println!("translate() alone, real mode: {ns:.0} ns per call (checksum {acc:#x})");
}

/// Nanoseconds per call of `f(0..n)`, best of seven runs.
fn best_ns(n: u64, mut f: impl FnMut(u64)) -> f64 {
    (0..7)
        .map(|_| {
            let t = Instant::now();
            for k in 0..n {
                f(k);
            }
            t.elapsed().as_secs_f64() * 1e9 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// A fresh fill path over the same mappings as `env(shift)`.
fn extract_space(shift: u32) -> SystemSpace {
    let ram = Arc::new(GuestRam::new(RAM).unwrap());
    let hpt = Arc::new(Hpt::new(Hpt::shift_for_ram_size(RAM)).unwrap());
    let slb = SlbEntry {
        esid: BUF_EA | esid::VALID,
        vsid: 0x200 << 12,
    };
    let page = 1u64 << shift;
    for k in 0..BUF_LEN / page {
        let key = hash_key(&slb, shift, BUF_EA + k * page);
        let ptel = (BUF_PA + k * page) | hpte_r::M | hpte_r::R | hpte_r::C | 0x2;
        let r = hpt.h_enter(&ram, 0, (key.hash & hpt.pteg_mask()) * 8, key.ptem, ptel);
        if r.ret != H_SUCCESS {
            hpt.h_enter(
                &ram,
                0,
                (!key.hash & hpt.pteg_mask()) * 8,
                key.ptem | hpte_v::SECONDARY,
                ptel,
            );
        }
    }
    SystemSpace::new(ram, hpt)
}
