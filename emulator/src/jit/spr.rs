//! The SPRs both translating tiers move natively: those that are one plain `CpuState` field
//! for `mfspr` or `mtspr` in a given privilege state. Everything else (composed registers
//! such as XER, side effects such as DEC, privileged numbers in problem state) runs the
//! interpreter; the timebase is read through a helper (`timebase_spr`). The interpreter's
//! `read_spr`/`write_spr` are the reference these entries match (the differential tests
//! hold them to it).

use crate::cpu::{CpuState, spr};
use core::mem::offset_of;

/// Where an SPR lives for a native move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainSpr {
    /// Offset of the field in `CpuState`.
    pub offset: usize,
    /// Width of the field: 4 or 8 bytes (a 4-byte field reads zero-extended).
    pub bytes: u8,
    /// Bits of the source register an `mtspr` keeps.
    pub write_mask: u64,
}

/// The field SPR `n` is for `mfspr` (`write` false) or `mtspr` in `problem_state`, or `None`
/// when the instruction must run the interpreter.
pub fn plain_spr(n: u32, write: bool, problem_state: bool) -> Option<PlainSpr> {
    // Book III-S: numbers with 0x10 set are privileged (the interpreter's `spr_privileged`).
    if n & 0x10 != 0 && problem_state {
        return None;
    }
    let field = |offset: usize| PlainSpr {
        offset,
        bytes: 8,
        write_mask: u64::MAX,
    };
    let sprg = |k: u32| field(offset_of!(CpuState, sprg) + 8 * k as usize);
    Some(match n {
        spr::LR => field(offset_of!(CpuState, lr)),
        spr::CTR => field(offset_of!(CpuState, ctr)),
        spr::SRR0 => field(offset_of!(CpuState, srr0)),
        spr::SRR1 => field(offset_of!(CpuState, srr1)),
        spr::DAR => field(offset_of!(CpuState, dar)),
        spr::DSISR => PlainSpr {
            write_mask: 0xffff_ffff,
            ..field(offset_of!(CpuState, dsisr))
        },
        spr::SPRG0..=spr::SPRG3 => sprg(n - spr::SPRG0),
        // The problem-state alias of SPRG3 reads only.
        spr::SPRG3_USER if !write => sprg(3),
        spr::TAR => field(offset_of!(CpuState, tar)),
        spr::DSCR_USER | spr::DSCR => field(offset_of!(CpuState, dscr)),
        spr::PPR => field(offset_of!(CpuState, ppr)),
        spr::VRSAVE => PlainSpr {
            bytes: 4,
            ..field(offset_of!(CpuState, vrsave))
        },
        spr::CFAR => field(offset_of!(CpuState, cfar)),
        // SPR 13 is the problem-state name of the AMR.
        13 | spr::AMR => field(offset_of!(CpuState, amr)),
        spr::IAMR => field(offset_of!(CpuState, iamr)),
        spr::UAMOR => field(offset_of!(CpuState, uamor)),
        spr::PIDR => field(offset_of!(CpuState, pidr)),
        spr::FSCR => field(offset_of!(CpuState, fscr)),
        spr::EBBHR => field(offset_of!(CpuState, ebbhr)),
        spr::EBBRR => field(offset_of!(CpuState, ebbrr)),
        spr::BESCR => field(offset_of!(CpuState, bescr)),
        spr::CTRL_READ if !write => field(offset_of!(CpuState, ctrl)),
        spr::CTRL_WRITE if write => PlainSpr {
            write_mask: 1,
            ..field(offset_of!(CpuState, ctrl))
        },
        spr::PVR if !write => field(offset_of!(CpuState, pvr)),
        spr::PIR if !write => field(offset_of!(CpuState, pir)),
        _ => return None,
    })
}

/// SPR `n` reads the timebase (`helpers::timebase`, the interpreter's source) for `mfspr`
/// or `mftb` in this privilege state: TB, TBU (its upper word: shifted by the caller) and,
/// in supervisor state, the registers that count with it (VTB, PURR, SPURR).
pub fn timebase_spr(n: u32, problem_state: bool) -> bool {
    match n {
        spr::TB_READ | spr::TBU_READ => true,
        spr::VTB | spr::PURR | spr::SPURR => !problem_state,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::softmmu::FlatRam;
    use crate::vcpu::Cpu;

    /// The timebase SPRs read what the interpreter reads (TBU: the upper word), and none is
    /// privileged in problem state or a plain field.
    #[test]
    fn timebase_sprs_match_the_interpreter() {
        struct Tb;
        impl crate::vcpu::TimeBase for Tb {
            fn now(&self) -> u64 {
                0x1234_5678_9abc_def0
            }
        }
        let mut seen = 0;
        for pr in [false, true] {
            for n in 0..1024 {
                if !timebase_spr(n, pr) {
                    continue;
                }
                seen += 1;
                assert!(!(pr && n & 0x10 != 0), "SPR {n} is privileged");
                assert_eq!(plain_spr(n, false, pr), None);
                let mut c = Cpu::new(Box::new(FlatRam::new(1 << 16)));
                c.timebase = std::sync::Arc::new(Tb);
                if pr {
                    c.st.msr |= crate::cpu::msr::PR;
                }
                let tb = 0x1234_5678_9abc_def0u64;
                let want = if n == spr::TBU_READ { tb >> 32 } else { tb };
                assert_eq!(c.read_spr(n), Ok(Some(want)), "mfspr {n} (pr {pr})");
            }
        }
        assert_eq!(seen, 5 + 2);
    }

    /// Every entry moves what the interpreter's `read_spr`/`write_spr` move, in both
    /// privilege states, and the privileged numbers are left to it in problem state.
    #[test]
    fn entries_match_the_interpreter() {
        for pr in [false, true] {
            for n in 0..1024 {
                for write in [false, true] {
                    let Some(p) = plain_spr(n, write, pr) else {
                        continue;
                    };
                    assert!(!(pr && n & 0x10 != 0), "SPR {n} is privileged");
                    let mut c = Cpu::new(Box::new(FlatRam::new(1 << 16)));
                    if pr {
                        c.st.msr |= crate::cpu::msr::PR;
                    }
                    let v = 0x8123_4567_89ab_cdefu64;
                    // SAFETY: `offset` names a field of `bytes` bytes inside `CpuState`.
                    let at = unsafe { (&raw mut c.st).cast::<u8>().add(p.offset) };
                    if write {
                        assert_eq!(c.write_spr(n, v), Ok(true), "mtspr {n}");
                        // SAFETY: `at` points at the field (above), read unaligned.
                        let got = unsafe {
                            if p.bytes == 8 {
                                at.cast::<u64>().read_unaligned()
                            } else {
                                at.cast::<u32>().read_unaligned() as u64
                            }
                        };
                        let want = v & p.write_mask & (u64::MAX >> (64 - 8 * p.bytes as u32));
                        assert_eq!(got, want, "mtspr {n} (pr {pr})");
                    } else {
                        // SAFETY: `at` points at the field (above), written unaligned.
                        unsafe {
                            if p.bytes == 8 {
                                at.cast::<u64>().write_unaligned(v)
                            } else {
                                at.cast::<u32>().write_unaligned(v as u32)
                            }
                        }
                        let want = v & (u64::MAX >> (64 - 8 * p.bytes as u32));
                        assert_eq!(c.read_spr(n), Ok(Some(want)), "mfspr {n} (pr {pr})");
                    }
                }
            }
        }
    }
}
