//! ISA 2.07 in-core cryptography: AES rounds, SHA-2 sigma functions, carry-less multiply.
//!
//! The AES state is the register's 16 bytes in element order, column-major (byte 4c + r is
//! row r of column c), as FIPS-197 lays out its input block.

use super::vx_ab;
use super::{Cpu, Exec, Lane, count, get, put, vec_ok};
use crate::isa::Insn;

/// Multiplication in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1.
const fn gf_mul(mut a: u8, mut b: u8) -> u8 {
    let mut p = 0;
    while b != 0 {
        if b & 1 != 0 {
            p ^= a;
        }
        let hi = a & 0x80;
        a <<= 1;
        if hi != 0 {
            a ^= 0x1b;
        }
        b >>= 1;
    }
    p
}

/// The AES S-box, from its definition: multiplicative inverse, then the affine map.
const SBOX: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut x = 0;
    while x < 256 {
        // x^254 is the inverse of x (and maps 0 to 0).
        let mut inv = 1u8;
        let mut k = 0;
        while k < 254 {
            inv = gf_mul(inv, x as u8);
            k += 1;
        }
        if x == 0 {
            inv = 0;
        }
        let s = inv
            ^ inv.rotate_left(1)
            ^ inv.rotate_left(2)
            ^ inv.rotate_left(3)
            ^ inv.rotate_left(4)
            ^ 0x63;
        t[x] = s;
        x += 1;
    }
    t
};

const INV_SBOX: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut x = 0;
    while x < 256 {
        t[SBOX[x] as usize] = x as u8;
        x += 1;
    }
    t
};

type State = [u8; 16];

fn sub_bytes(s: State, table: &[u8; 256]) -> State {
    s.map(|b| table[b as usize])
}

/// Row r rotates left by r columns (right by r for the inverse).
fn shift_rows(s: State, inverse: bool) -> State {
    std::array::from_fn(|k| {
        let (r, c) = (k % 4, k / 4);
        let from = if inverse {
            (c + 4 - r) % 4
        } else {
            (c + r) % 4
        };
        s[4 * from + r]
    })
}

/// Multiplies every column by the MixColumns matrix whose first row is `m`.
fn mix_columns(s: State, m: [u8; 4]) -> State {
    std::array::from_fn(|k| {
        let (r, c) = (k % 4, k / 4);
        (0..4).fold(0, |acc, j| acc ^ gf_mul(m[(j + 4 - r) % 4], s[4 * c + j]))
    })
}

const MIX: [u8; 4] = [2, 3, 1, 1];
const INV_MIX: [u8; 4] = [14, 11, 13, 9];

fn xor(s: State, k: u128) -> u128 {
    u128::from_be_bytes(s) ^ k
}

vx_ab! {
    vcipher: |a, b| xor(mix_columns(shift_rows(sub_bytes(a.to_be_bytes(), &SBOX), false), MIX), b);
    vcipherlast: |a, b| xor(shift_rows(sub_bytes(a.to_be_bytes(), &SBOX), false), b);
    vncipher: |a, b| {
        let s = sub_bytes(shift_rows(a.to_be_bytes(), true), &INV_SBOX);
        u128::from_be_bytes(mix_columns(xor(s, b).to_be_bytes(), INV_MIX))
    };
    vncipherlast: |a, b| xor(sub_bytes(shift_rows(a.to_be_bytes(), true), &INV_SBOX), b);
}

pub(in crate::interp) fn vsbox(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    c.st.set_vr(
        i.rt(),
        u128::from_be_bytes(sub_bytes(c.st.vr(i.ra()).to_be_bytes(), &SBOX)),
    );
    Ok(())
}

/// SHA-256 σ0/σ1 (ST = 0) and Σ0/Σ1 (ST = 1); SIX bit i picks the "1" function for word i.
pub(in crate::interp) fn vshasigmaw(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    let a = c.st.vr(i.ra());
    let mut r = 0;
    for k in 0..4 {
        let x: u32 = get(a, k);
        let one = (i.six() >> (3 - k)) & 1 != 0;
        let y = match (i.st() != 0, one) {
            (false, false) => x.rotate_right(7) ^ x.rotate_right(18) ^ (x >> 3),
            (false, true) => x.rotate_right(17) ^ x.rotate_right(19) ^ (x >> 10),
            (true, false) => x.rotate_right(2) ^ x.rotate_right(13) ^ x.rotate_right(22),
            (true, true) => x.rotate_right(6) ^ x.rotate_right(11) ^ x.rotate_right(25),
        };
        put(&mut r, k, y);
    }
    c.st.set_vr(i.rt(), r);
    Ok(())
}

/// SHA-512 σ0/σ1/Σ0/Σ1; SIX bits 0 and 2 select for doublewords 0 and 1.
pub(in crate::interp) fn vshasigmad(c: &mut Cpu, i: Insn) -> Exec {
    vec_ok(c)?;
    let a = c.st.vr(i.ra());
    let mut r = 0;
    for k in 0..2 {
        let x: u64 = get(a, k);
        let one = (i.six() >> (3 - 2 * k)) & 1 != 0;
        let y = match (i.st() != 0, one) {
            (false, false) => x.rotate_right(1) ^ x.rotate_right(8) ^ (x >> 7),
            (false, true) => x.rotate_right(19) ^ x.rotate_right(61) ^ (x >> 6),
            (true, false) => x.rotate_right(28) ^ x.rotate_right(34) ^ x.rotate_right(39),
            (true, true) => x.rotate_right(14) ^ x.rotate_right(18) ^ x.rotate_right(41),
        };
        put(&mut r, k, y);
    }
    c.st.set_vr(i.rt(), r);
    Ok(())
}

/// Carry-less product of two 64-bit polynomials.
fn clmul(a: u64, b: u64) -> u128 {
    let mut r = 0u128;
    for k in 0..64 {
        if (b >> k) & 1 != 0 {
            r ^= (a as u128) << k;
        }
    }
    r
}

/// `vpmsum?`: each double-width result element is the XOR of the carry-less products of
/// the two element pairs it covers.
fn pmsum<T: Lane, W: Lane>(a: u128, b: u128) -> u128 {
    let mut r = 0;
    for j in 0..count::<W>() {
        let p = |k: usize| clmul(get::<T>(a, k).bits() as u64, get::<T>(b, k).bits() as u64);
        put(&mut r, j, W::from_bits(p(2 * j) ^ p(2 * j + 1)));
    }
    r
}

vx_ab! {
    vpmsumb: |a, b| pmsum::<u8, u16>(a, b);
    vpmsumh: |a, b| pmsum::<u16, u32>(a, b);
    vpmsumw: |a, b| pmsum::<u32, u64>(a, b);
    vpmsumd: |a, b| clmul((a >> 64) as u64, (b >> 64) as u64) ^ clmul(a as u64, b as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbox_matches_fips197_samples() {
        assert_eq!(
            (SBOX[0x00], SBOX[0x01], SBOX[0x53], SBOX[0xff]),
            (0x63, 0x7c, 0xed, 0x16)
        );
        assert_eq!(INV_SBOX[0x63], 0);
    }

    #[test]
    fn aes128_round_from_fips197_appendix_b() {
        // Round 1 of the FIPS-197 example: state after AddRoundKey of round 0, and the
        // round-1 key; the expected value is the start of round 2.
        let state = 0x193de3bea0f4e22b9ac68d2ae9f84808u128;
        let key = 0xa0fafe1788542cb123a339392a6c7605u128;
        let after = xor(
            mix_columns(
                shift_rows(sub_bytes(state.to_be_bytes(), &SBOX), false),
                MIX,
            ),
            key,
        );
        assert_eq!(after, 0xa49c7ff2689f352b6b5bea43026a5049);
        // The inverse round undoes it.
        let s = sub_bytes(
            shift_rows(
                mix_columns(xor(after.to_be_bytes(), key).to_be_bytes(), INV_MIX),
                true,
            ),
            &INV_SBOX,
        );
        assert_eq!(u128::from_be_bytes(s), state);
    }

    #[test]
    fn carry_less_multiply() {
        assert_eq!(clmul(0b11, 0b11), 0b101);
        assert_eq!(clmul(u64::MAX, 2), (u64::MAX as u128) << 1);
    }
}
