//! Disassembler driven by the table's operand lists (standard mnemonics, no extended ones).

use super::{Insn, InsnFlags, Op, Operand, decode};
use std::fmt::Write;

/// Disassembles `word` located at `pc` (for branch targets), e.g. `addo. r3, r4, r5`.
pub fn disassemble(word: u32, pc: u64) -> String {
    let op = decode(word);
    if op == Op::Illegal {
        return format!(".long 0x{word:08x}");
    }
    let info = op.info();
    let i = Insn(word);
    let mut s = String::from(info.mnemonic);
    let f = info.flags;
    if f.contains(InsnFlags::OE) && i.oe() {
        s.push('o');
    }
    if f.contains(InsnFlags::LK) && i.lk() {
        s.push('l');
    }
    if f.contains(InsnFlags::AA) && i.aa() != 0 {
        s.push('a');
    }
    if (f.contains(InsnFlags::RC) && i.rc()) || (f.contains(InsnFlags::RC21) && i.bit21() != 0) {
        s.push('.');
    }
    for (k, o) in info.operands.iter().enumerate() {
        s.push_str(if k == 0 { " " } else { ", " });
        operand(&mut s, *o, i, pc, f.contains(InsnFlags::AA) && i.aa() != 0);
    }
    s
}

fn operand(s: &mut String, o: Operand, i: Insn, pc: u64, absolute: bool) {
    use Operand::*;
    let _ = match o {
        Rt | Rs => write!(s, "r{}", i.rt()),
        Ra | Ra0 => write!(s, "r{}", i.ra()),
        Rb => write!(s, "r{}", i.rb()),
        Si => write!(s, "{}", i.si()),
        Ui => write!(s, "0x{:x}", i.ui()),
        DRa => write!(s, "{}(r{})", i.si(), i.ra()),
        DsRa => write!(s, "{}(r{})", i.ds(), i.ra()),
        DqRa => write!(s, "{}(r{})", i.dq(), i.ra()),
        Bf => write!(s, "cr{}", i.bf()),
        Bfa => write!(s, "cr{}", i.bfa()),
        L10 => write!(s, "{}", i.l10()),
        L15 => write!(s, "{}", i.l15()),
        LSync => write!(s, "{}", i.l_sync()),
        Bt | Bo | To | Th => write!(s, "{}", i.rt()),
        Ba | Bi => write!(s, "{}", i.ra()),
        Bb | Sh | Nb => write!(s, "{}", i.rb()),
        Bh => write!(s, "{}", i.bh()),
        Bd => {
            let t = if absolute {
                i.bd() as u64
            } else {
                pc.wrapping_add(i.bd() as u64)
            };
            write!(s, "0x{t:x}")
        }
        Li => {
            let t = if absolute {
                i.li() as u64
            } else {
                pc.wrapping_add(i.li() as u64)
            };
            write!(s, "0x{t:x}")
        }
        Mb => write!(s, "{}", i.mb()),
        Me => write!(s, "{}", i.me()),
        Sh6 => write!(s, "{}", i.sh6()),
        Mb6 => write!(s, "{}", i.mb6()),
        Spr | Tbr => write!(s, "{}", i.spr()),
        Crm | Fxm => write!(s, "0x{:x}", i.fxm()),
        Flm => write!(s, "0x{:x}", i.flm()),
        U => write!(s, "{}", i.u()),
        W => write!(s, "{}", i.w()),
        Frt | Frs => write!(s, "f{}", i.rt()),
        Fra => write!(s, "f{}", i.ra()),
        Frb => write!(s, "f{}", i.rb()),
        Frc => write!(s, "f{}", i.frc()),
        Vrt | Vrs => write!(s, "v{}", i.rt()),
        Vra => write!(s, "v{}", i.ra()),
        Vrb => write!(s, "v{}", i.rb()),
        Vrc => write!(s, "v{}", i.frc()),
        Xt | Xs => write!(s, "vs{}", i.xt()),
        Xa => write!(s, "vs{}", i.xa()),
        Xb => write!(s, "vs{}", i.xb()),
        Xc => write!(s, "vs{}", i.xc()),
        Dm | Shw => write!(s, "{}", i.dm()),
        Uim => write!(s, "{}", i.uim()),
        Simm => write!(s, "{}", i.simm()),
        Shb => write!(s, "{}", i.shb()),
        Lev => write!(s, "{}", i.lev()),
        Eh => write!(s, "{}", i.bit31()),
        Sr => write!(s, "{}", (i.0 >> 16) & 0xf),
        Bc => write!(s, "{}", i.frc()),
        St => write!(s, "{}", i.st()),
        Six => write!(s, "{}", i.six()),
        Ps => write!(s, "{}", i.ps()),
        Strm => write!(s, "{}", i.strm()),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(disassemble(0x7c642a14, 0), "add r3, r4, r5");
        assert_eq!(disassemble(0x7c642e15, 0), "addo. r3, r4, r5");
        assert_eq!(disassemble(0xe8010010, 0), "ld r0, 16(r1)");
        assert_eq!(disassemble(0x4bfffffc, 0x1000), "b 0xffc");
        assert_eq!(disassemble(0x48000005, 0x1000), "bl 0x1004");
        assert_eq!(disassemble(0x7c6802a6, 0), "mfspr r3, 8");
        assert_eq!(disassemble(0x00000000, 0), ".long 0x00000000");
    }
}
