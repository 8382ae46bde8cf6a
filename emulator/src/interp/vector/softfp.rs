//! A small software floating-point format for the VMX operations whose results the host
//! cannot produce directly: a 64-bit normalized significand with a sticky last bit and an
//! unbounded exponent. Intermediate results are truncated to 64 bits with the discarded bits
//! ORed into the last one ("jamming"), so one final rounding to single precision is exact;
//! the exponent range lets a series overflow double precision without becoming infinite.

/// `frac × 2^(exp - 63)`; `frac` has bit 63 set, or is 0 for a zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Parts {
    pub sign: bool,
    pub exp: i32,
    pub frac: u64,
}

/// Shifts right by `n`, ORing every bit shifted out into bit 0.
fn shr_jam(x: u128, n: u32) -> u128 {
    if n == 0 {
        x
    } else if n >= 128 {
        (x != 0) as u128
    } else {
        (x >> n) | ((x & ((1u128 << n) - 1)) != 0) as u128
    }
}

/// The top 64 bits of a 128-bit significand, the rest jammed into the last bit.
fn trunc_jam(x: u128) -> u64 {
    (x >> 64) as u64 | (x as u64 != 0) as u64
}

impl Parts {
    pub const ZERO: Parts = Parts {
        sign: false,
        exp: 0,
        frac: 0,
    };

    /// The value `m × 2^k`.
    fn from_int(sign: bool, m: u64, k: i32) -> Parts {
        if m == 0 {
            return Parts {
                sign,
                ..Parts::ZERO
            };
        }
        let lz = m.leading_zeros();
        Parts {
            sign,
            exp: k + 63 - lz as i32,
            frac: m << lz,
        }
    }

    /// A finite single-precision value (denormals included).
    pub fn from_f32(x: u32) -> Parts {
        let (sign, e, f) = (
            x >> 31 != 0,
            ((x >> 23) & 0xff) as i32,
            (x & 0x7f_ffff) as u64,
        );
        if e == 0 {
            Parts::from_int(sign, f, -149)
        } else {
            Parts::from_int(sign, f | 1 << 23, e - 150)
        }
    }

    /// A finite double-precision value.
    pub fn from_f64(x: f64) -> Parts {
        let b = x.to_bits();
        let (sign, e, f) = (
            b >> 63 != 0,
            ((b >> 52) & 0x7ff) as i32,
            b & ((1 << 52) - 1),
        );
        if e == 0 {
            Parts::from_int(sign, f, -1074)
        } else {
            Parts::from_int(sign, f | 1 << 52, e - 1075)
        }
    }

    fn is_zero(self) -> bool {
        self.frac == 0
    }

    /// The exact product as a normalized 128-bit significand and its exponent.
    fn mul_wide(self, b: Parts) -> (bool, i32, u128) {
        let p = self.frac as u128 * b.frac as u128;
        let (p, exp) = if p >> 127 == 0 {
            (p << 1, self.exp + b.exp)
        } else {
            (p, self.exp + b.exp + 1)
        };
        (self.sign ^ b.sign, exp, p)
    }

    pub fn mul(self, b: Parts) -> Parts {
        if self.is_zero() || b.is_zero() {
            return Parts {
                sign: self.sign ^ b.sign,
                ..Parts::ZERO
            };
        }
        let (sign, exp, p) = self.mul_wide(b);
        Parts {
            sign,
            exp,
            frac: trunc_jam(p),
        }
    }

    /// `self × b + c` with one truncation (fused).
    pub fn mul_add(self, b: Parts, c: Parts) -> Parts {
        if self.is_zero() || b.is_zero() {
            if c.is_zero() {
                // Exact zero: -0 only if both addends are -0 (round to nearest).
                return Parts {
                    sign: (self.sign ^ b.sign) && c.sign,
                    ..Parts::ZERO
                };
            }
            return c;
        }
        let (psign, pexp, p) = self.mul_wide(b);
        if c.is_zero() {
            return Parts {
                sign: psign,
                exp: pexp,
                frac: trunc_jam(p),
            };
        }
        let cw = (c.frac as u128) << 64;
        let (mut sign, exp, frac);
        if psign == c.sign {
            let (x, y, e) = if pexp >= c.exp {
                (p, shr_jam(cw, (pexp - c.exp) as u32), pexp)
            } else {
                (cw, shr_jam(p, (c.exp - pexp) as u32), c.exp)
            };
            let (s, carry) = x.overflowing_add(y);
            sign = psign;
            (exp, frac) = if carry {
                (e + 1, shr_jam(s, 1) | 1 << 127)
            } else {
                (e, s)
            };
        } else {
            // Subtract the smaller magnitude from the larger.
            let (big, bsign, bexp, small, sexp) = if pexp > c.exp || (pexp == c.exp && p >= cw) {
                (p, psign, pexp, cw, c.exp)
            } else {
                (cw, c.sign, c.exp, p, pexp)
            };
            let d = big - shr_jam(small, (bexp - sexp) as u32);
            if d == 0 {
                return Parts::ZERO;
            }
            let lz = d.leading_zeros();
            sign = bsign;
            exp = bexp - lz as i32;
            frac = d << lz;
        }
        if frac == 0 {
            sign = false;
        }
        Parts {
            sign,
            exp,
            frac: trunc_jam(frac),
        }
    }

    /// Rounds to single precision, to nearest even. With `flush` (VSCR[NJ]) a result whose
    /// exponent is below the normal range before rounding becomes a zero of its sign.
    pub fn round_f32(self, flush: bool) -> u32 {
        let sign = (self.sign as u32) << 31;
        if self.is_zero() {
            return sign;
        }
        let e = self.exp + 127; // biased exponent before rounding
        if e >= 255 {
            return sign | 0x7f80_0000;
        }
        let (mut frac, mut e) = (self.frac as u128, e);
        if e <= 0 {
            if flush {
                return sign;
            }
            frac = shr_jam(frac, (1 - e) as u32);
            e = 0;
        }
        // Keep 24 bits (the implicit one at bit 63 for normals): 40 bits to round away.
        let (keep, rest) = ((frac >> 40) as u64, (frac & ((1 << 40) - 1)) as u64);
        let half = 1u64 << 39;
        let up = rest > half || (rest == half && keep & 1 != 0);
        let m = keep + up as u64;
        // m may carry into bit 24 (normals: next binade) or reach bit 23 (denormal → normal).
        let bits = if e == 0 {
            m as u32 // a carry into bit 23 is the smallest normal's exponent field
        } else if m >> 24 != 0 {
            e += 1;
            if e >= 255 {
                return sign | 0x7f80_0000;
            }
            ((e as u32) << 23) | ((m >> 1) as u32 & 0x7f_ffff)
        } else {
            ((e as u32) << 23) | (m as u32 & 0x7f_ffff)
        };
        sign | bits
    }
}

/// 2^x of a finite nonzero single-precision `x` by the first 15 terms of the series of
/// e^(x ln 2), the estimate the reference implementation (QEMU) computes.
pub(super) fn exp2_series(x: u32) -> Parts {
    let x = Parts::from_f32(x).mul(Parts::from_f64(std::f64::consts::LN_2));
    let mut term = x;
    let mut sum = Parts::from_f64(1.0);
    let mut factorial = 1.0f64;
    for n in 1..=15 {
        factorial *= n as f64;
        sum = Parts::from_f64(1.0 / factorial).mul_add(term, sum);
        term = term.mul(x);
    }
    sum
}

/// floor(x² / 2^128) for a 128-bit x: the top half of the 256-bit square.
fn square_top(x: u128) -> u128 {
    let (h, l) = ((x >> 64) as u64 as u128, x as u64 as u128);
    let hl = h * l;
    let carry = ((hl & ((1 << 63) - 1)) << 65).overflowing_add(l * l).1;
    h * h + (hl >> 63) + carry as u128
}

/// log2 of a positive finite nonzero single-precision value, computed bit by bit as the
/// reference implementation (QEMU) does: the exponent is the integer part; squaring the
/// significand x ∈ [1, 2) doubles its logarithm, so x² ≥ 2 yields a one bit (and x²/2 goes
/// on) and x² < 2 a zero bit. The significand is kept to 128 bits, truncating each square.
/// 25 bits are computed; 48 for x ∈ [0.5, 1), whose result loses leading bits when it is
/// added to -1; and for x ∈ [1, 2) the 25 start at the first one bit.
pub(super) fn log2_bits(x: u32, flush: bool) -> u32 {
    let p = Parts::from_f32(x);
    let int_part = p.exp;
    let mut x = (p.frac as u128) << 64;
    const ONE: u128 = 1 << 127;
    let n = if int_part == -1 { 48 } else { 25 };
    let (mut r, mut t, mut f_exp) = (0u64, 1u64 << 63, -1i32);
    let mut i = 0;
    let mut exact = false;
    while i < n {
        if x == ONE {
            exact = true;
            break;
        }
        x = square_top(x);
        if x & ONE != 0 {
            if int_part == 0 && r == 0 {
                // Close to 1: restart so that the bits counted begin at the first one.
                f_exp -= i;
                r = 1 << 63;
                t = 1 << 63;
                i = 0;
            } else {
                r |= t;
            }
        } else {
            x <<= 1;
        }
        t >>= 1;
        i += 1;
    }
    if !exact {
        r |= (x != ONE) as u64; // sticky: bits remain
    }
    let whole = Parts::from_int(int_part < 0, int_part.unsigned_abs() as u64, 0);
    if r == 0 {
        return whole.round_f32(flush);
    }
    let frac = Parts::from_int(false, r, f_exp - 63);
    Parts::from_f64(1.0).mul_add(whole, frac).round_f32(flush)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_and_sums_round_like_the_host() {
        let vals = [
            1.0f32, 1.5, -3.25, 1e-20, 7e30, -0.1, 3.0e-38, 1.17e-38, 123456.79,
        ];
        for &a in &vals {
            for &b in &vals {
                for &c in &vals {
                    let p = Parts::from_f32(a.to_bits())
                        .mul_add(Parts::from_f32(b.to_bits()), Parts::from_f32(c.to_bits()));
                    assert_eq!(
                        p.round_f32(false),
                        a.mul_add(b, c).to_bits(),
                        "{a} * {b} + {c}"
                    );
                }
            }
        }
    }

    #[test]
    fn flush_happens_before_rounding() {
        // Just below the smallest normal: rounds up to it, but is tiny before rounding.
        let p = Parts::from_f32(0x0080_0000)
            .mul_add(Parts::from_f32(1.0f32.to_bits()), Parts::from_f64(-1e-60));
        assert_eq!(p.round_f32(false), 0x0080_0000);
        assert_eq!(p.round_f32(true), 0);
        assert_eq!(Parts::from_f32(0x8000_0001).round_f32(false), 0x8000_0001);
    }

    #[test]
    fn series_and_logarithm_are_close_to_the_functions() {
        for x in [0.5f32, -1.25, 3.0, -2.0] {
            let r = f32::from_bits(exp2_series(x.to_bits()).round_f32(false));
            assert!((r / x.exp2() - 1.0).abs() < 1e-3, "{x}: {r}");
        }
        for x in [0.75f32, 1.0, 2.0, 1000.0, 1e-30] {
            let r = f32::from_bits(log2_bits(x.to_bits(), false));
            assert!((r - x.log2()).abs() < 1e-5, "{x}: {r}");
        }
    }
}
