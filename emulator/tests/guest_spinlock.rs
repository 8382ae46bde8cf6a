//! A guest spinlock (`lwarx`/`stwcx.`) contended by 8 vCPU threads protects a shared counter:
//! no update is lost, so store-conditional really is atomic across host threads.

use ppc64emu::cpu::{Exception, msr};
use ppc64emu::engine::Cpu;
use ppc64emu::mmu::{Hpt, SystemSpace};
use ppc64emu::softmmu::GuestRam;
use std::sync::Arc;

const CODE: u64 = 0x1000;
const LOCK: u64 = 0x2000;
const COUNTER: u64 = 0x2080;
const THREADS: usize = 8;
const ITERATIONS: u64 = 50_000;

/// r3 = lock, r4 = counter, r5 = iterations; ends with `sc`.
const LOOP: [u32; 17] = [
    0x7cc0_1828, // 0: lwarx  r6,0,r3
    0x2c06_0000, //    cmpwi  r6,0
    0x4082_fff8, //    bne    0
    0x38c0_0001, //    li     r6,1
    0x7cc0_192d, //    stwcx. r6,0,r3
    0x4082_ffec, //    bne    0
    0x4c00_012c, //    isync
    0x80e4_0000, //    lwz    r7,0(r4)   (the critical section: a plain increment)
    0x38e7_0001, //    addi   r7,r7,1
    0x90e4_0000, //    stw    r7,0(r4)
    0x7c20_04ac, //    lwsync
    0x38c0_0000, //    li     r6,0
    0x90c3_0000, //    stw    r6,0(r3)   (release)
    0x38a5_ffff, //    addi   r5,r5,-1
    0x2c05_0000, //    cmpwi  r5,0
    0x4082_ffc4, //    bne    0
    0x4400_0002, //    sc
];

#[test]
fn spinlock_contended_by_eight_vcpus_loses_no_update() {
    let ram = Arc::new(GuestRam::new(16 << 20).unwrap());
    for (k, w) in LOOP.iter().enumerate() {
        ram.write(CODE + 4 * k as u64, &w.to_be_bytes()).unwrap();
    }
    let hpt = Arc::new(Hpt::new(Hpt::MIN_SHIFT).unwrap());
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (ram, hpt) = (ram.clone(), hpt.clone());
            std::thread::spawn(move || {
                // Big-endian, real mode: effective address = guest physical address.
                let mut cpu = Cpu::new(Box::new(SystemSpace::new(ram, hpt)));
                cpu.st.msr = msr::SF | msr::ME;
                cpu.st.pc = CODE;
                cpu.st.gpr[3] = LOCK;
                cpu.st.gpr[4] = COUNTER;
                cpu.st.gpr[5] = ITERATIONS;
                loop {
                    match cpu.step() {
                        Ok(()) => {}
                        Err(Exception::SystemCall { .. }) => return,
                        Err(e) => panic!("{e:?} at {:#x}", cpu.st.pc),
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        ram.read_u32_be(COUNTER).unwrap() as u64,
        THREADS as u64 * ITERATIONS
    );
    assert_eq!(ram.read_u32_be(LOCK).unwrap(), 0);
}
