//! The RTAS blob, executed by the interpreter the way Linux enters RTAS (MSR = ME|RI: 32-bit,
//! big-endian, real mode; r3 = argument buffer; LR = return address): it must reach the H_RTAS
//! hypercall with the buffer in r4, and after the hcall return to LR with the results in the
//! buffer.

use ppc64emu::cpu::{CpuState, Exception, msr};
use ppc64emu::engine::Cpu;
use ppc64emu::machine::pseries::PseriesDevices;
use ppc64emu::machine::pseries::effects::{Effect, OutOfRange, PhysMemory, Recorder};
use ppc64emu::machine::pseries::hcall::{self, H_RTAS, H_SUCCESS, HcallOutcome};
use ppc64emu::machine::pseries::rtas::{self, Service};
use ppc64emu::softmmu::{FlatRam, SoftMmu};
use std::cell::RefCell;

/// Guest memory seen through a vCPU's MMU in real mode (the flat RAM maps EA = PA).
struct ThroughMmu<'a> {
    mmu: RefCell<&'a mut SoftMmu>,
    st: CpuState,
}

impl PhysMemory for ThroughMmu<'_> {
    fn read(&self, pa: u64, buf: &mut [u8]) -> Result<(), OutOfRange> {
        let mut mmu = self.mmu.borrow_mut();
        for (k, b) in buf.iter_mut().enumerate() {
            *b = mmu
                .load(&self.st, pa + k as u64, 1, false)
                .map_err(|_| OutOfRange { pa, len: 1 })? as u8;
        }
        Ok(())
    }

    fn write(&self, pa: u64, data: &[u8]) -> Result<(), OutOfRange> {
        let mut mmu = self.mmu.borrow_mut();
        for (k, b) in data.iter().enumerate() {
            mmu.store(&self.st, pa + k as u64, 1, *b as u64, false)
                .map_err(|_| OutOfRange { pa, len: 1 })?;
        }
        Ok(())
    }
}

const BLOB: u64 = 0x1_0000;
const BUF: u64 = 0x2000;
const RETURN: u64 = 0x3000;

fn run_call(words: &[u32], ncpus: usize) -> (Cpu, PseriesDevices, Recorder, HcallOutcome) {
    let mut c = Cpu::new(Box::new(FlatRam::new(1 << 20)));
    c.st.msr = msr::ME | msr::RI;
    let st = c.st.clone();
    for (k, b) in rtas::blob().iter().enumerate() {
        c.mmu
            .store(&st, BLOB + k as u64, 1, *b as u64, false)
            .unwrap();
    }
    for (k, w) in words.iter().enumerate() {
        c.mmu
            .store(&st, BUF + 4 * k as u64, 4, *w as u64, false)
            .unwrap();
    }
    // Linux: r3 = buffer, r4 = RTAS base, LR = return location.
    c.st.gpr[3] = BUF;
    c.st.gpr[4] = BLOB;
    c.st.lr = RETURN;
    c.st.pc = BLOB;
    let mut dev = PseriesDevices::new(ncpus);
    let mut fx = Recorder::new(ncpus);
    let mut outcome = None;
    for _ in 0..10 {
        if c.st.pc == RETURN {
            break;
        }
        match c.step() {
            Ok(()) => {}
            Err(Exception::SystemCall { lev: 1 }) => {
                assert_eq!(c.st.gpr[3], H_RTAS, "the blob asks for H_RTAS");
                assert_eq!(c.st.gpr[4], BUF, "with the buffer in r4");
                let Cpu { st, mmu, .. } = &mut c;
                let mem = ThroughMmu {
                    st: st.clone(),
                    mmu: RefCell::new(mmu),
                };
                outcome = Some(hcall::hcall(&mut dev, 0, st, &mem, &mut fx));
            }
            Err(e) => panic!("exception {e:?} at {:#x}", c.st.pc),
        }
    }
    assert_eq!(c.st.pc, RETURN, "back to the caller");
    (c, dev, fx, outcome.expect("the blob made a hypercall"))
}

fn word(c: &mut Cpu, addr: u64) -> u32 {
    let st = c.st.clone();
    c.mmu.load(&st, addr, 4, false).unwrap() as u32
}

#[test]
fn linux_style_call_reaches_the_service_and_returns() {
    let (mut c, dev, mut fx, outcome) = run_call(
        &[
            Service::StartCpu.token(),
            3,
            1,
            1,
            0x0040_0060,
            1,
            0xffff_ffff,
        ],
        2,
    );
    assert_eq!(outcome, HcallOutcome::Continue);
    assert_eq!(c.st.gpr[3], H_SUCCESS as u64);
    assert_eq!(word(&mut c, BUF + 24), 0, "status result");
    assert_eq!(
        fx.take(),
        vec![Effect::StartCpu {
            cpu: 1,
            entry: 0x0040_0060,
            r3: 1
        }]
    );
    assert_eq!(dev.rtas_stats.count(Service::StartCpu), 1);
}

#[test]
fn errors_come_back_in_the_status() {
    let (mut c, _, mut fx, _) =
        run_call(&[Service::StartCpu.token(), 3, 1, 9, 0, 0, 0xffff_ffff], 2);
    assert_eq!(word(&mut c, BUF + 24) as i32, rtas::RTAS_OUT_PARAM_ERROR);
    assert!(fx.take().is_empty());
}

#[test]
fn power_off_through_the_blob() {
    let (_, _, mut fx, outcome) = run_call(
        &[
            Service::PowerOff.token(),
            2,
            1,
            u32::MAX,
            u32::MAX,
            0xffff_ffff,
        ],
        1,
    );
    assert_eq!(outcome, HcallOutcome::Shutdown);
    assert_eq!(fx.take(), vec![Effect::PowerOff]);
}
