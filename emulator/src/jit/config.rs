//! How the translating tier is set up (`--jit-tiers`, `--jit-threshold`, `--jit-promote`,
//! `--jit-cache-limit`): the defaults, why they are what they are, and their parsers.

/// Interpreted executions of a block before it is translated (`--jit-threshold`) when
/// Cranelift is the only tier.
pub const DEFAULT_THRESHOLD: u32 = 500;

/// Interpreted executions before a block's first translation when the baseline tier comes
/// first. A baseline translation costs about as much as interpreting a typical block 50 to
/// 100 times, and code run once or twice (boot, exec, page-fault paths) is most of what a
/// Linux build touches, so a block is translated on its third execution.
pub const DEFAULT_BASELINE_THRESHOLD: u32 = 2;

/// [`DEFAULT_BASELINE_THRESHOLD`] for a user-mode process (`ppc64emu user`), whose
/// interpreter needs no MMU: a block is translated on its ninth execution (of the 264 blocks
/// busybox md5sum translated on their third, 178 ran fewer than nine times). Against the
/// third, alternating runs (medians of the paired ratios, k = 11–15): busybox md5sum 0.942,
/// sha256sum 0.95–0.96, bzip2 0.987, gzip 1.009, `libc-tests sort` 1.002. A machine keeps
/// the third: linux-make 16 × 12 ran 1.035 and 1.003 of the time with the seventh, the
/// bundled guest no differently.
pub const DEFAULT_USER_BASELINE_THRESHOLD: u32 = 8;

/// Executions in the baseline tier after which a block is promoted to Cranelift
/// (`--jit-promote`). A Cranelift translation costs 0.3-1.5 ms and saves some tens of
/// nanoseconds per execution of the block, so it pays off after tens of thousands of
/// executions. Measured on the Debian kernel's boot to /init (-smp 1, host load 4-5): 7.5-8.1 s
/// guest uptime promoting at 20 000 (1 110 blocks, 1.6 s of Cranelift), 4.0-4.5 s at 100 000
/// (386 blocks), 4.1-5.8 s at 1 000 000, 6.1 s on the baseline tier alone. Again with chaining
/// across tiers, on a 4 × 4 linux-make at -smp 1 (one other busy core): make took 17.5-23.4 s
/// at 100 000 (≈ 820 promotions, 0.65 s of Cranelift), 21.6-28.6 s at 20 000 (6 400, 4-5 s),
/// 36.6 s at 5 000 (19 800, 11.8 s): earlier promotion moves instructions to Cranelift code
/// but costs more in translation than it saves.
pub const DEFAULT_PROMOTE_THRESHOLD: u32 = 100_000;

/// The tiers a machine and `ppc64emu user` run by default: the baseline tier alone (on a
/// host without it, Cranelift). Measured side by side (2-core host, one other busy core):
/// mkbench at N = 1 ran in 2.7-3.3 s on the baseline tier against 4.0-4.6 s with promotion
/// to Cranelift, a 4 × 4 linux-make in 18.6-18.9 s against 19.9-23.9 s, busybox gzip in
/// 0.35 s against 0.69 s. A promoted block's code is faster, but control passes between
/// the tiers through `helpers::run_optimized` (a host call and the optimized code's own
/// entry and exit) and Cranelift blocks chain through the jump cache, not patched jumps;
/// hot loops are promoted block by block, so they cross tiers on most iterations (10 M
/// crossings in the mkbench run). `--jit-tiers baseline,cranelift` turns promotion on.
pub const DEFAULT_TIERS: Tiers = Tiers::BASELINE;

/// Which translating tiers run (`--jit-tiers`): blocks start in the interpreter, move to the
/// first enabled tier after `--jit-threshold` executions, and from the baseline tier to
/// Cranelift after `--jit-promote` more when both are on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiers {
    pub baseline: bool,
    pub cranelift: bool,
}

impl Tiers {
    pub const CRANELIFT: Tiers = Tiers {
        baseline: false,
        cranelift: true,
    };
    pub const BASELINE: Tiers = Tiers {
        baseline: true,
        cranelift: false,
    };
    pub const BOTH: Tiers = Tiers {
        baseline: true,
        cranelift: true,
    };

    /// `baseline`, `cranelift` or both, comma-separated.
    pub fn parse(v: &str) -> Result<Tiers, String> {
        let mut t = Tiers {
            baseline: false,
            cranelift: false,
        };
        for part in v.split(',') {
            match part.trim() {
                "baseline" => t.baseline = true,
                "cranelift" => t.cranelift = true,
                "both" => (t.baseline, t.cranelift) = (true, true),
                other => {
                    return Err(format!(
                        "unknown tier {other:?} (expected baseline, cranelift or both, comma-separated)"
                    ));
                }
            }
        }
        Ok(t)
    }

    /// The tiers this host has: without the baseline tier's backend (not x86-64) Cranelift
    /// alone.
    pub fn available(self) -> Tiers {
        if super::baseline::AVAILABLE {
            self
        } else {
            Tiers::CRANELIFT
        }
    }

    /// The default `--jit-threshold` for these tiers.
    pub fn default_threshold(self) -> u32 {
        if self.available().baseline {
            DEFAULT_BASELINE_THRESHOLD
        } else {
            DEFAULT_THRESHOLD
        }
    }

    /// The default `--jit-threshold` of `ppc64emu user` for these tiers.
    pub fn default_user_threshold(self) -> u32 {
        if self.available().baseline {
            DEFAULT_USER_BASELINE_THRESHOLD
        } else {
            self.default_threshold()
        }
    }
}

/// Code bytes after which a vCPU's module is retired and the cache flushed (default of
/// `Jit::cache_limit`, `--jit-cache-limit`).
pub const CODE_CACHE_LIMIT: u64 = 1 << 30;

/// Parses a code cache limit (`--jit-cache-limit`): a number of bytes, at least 1, with an
/// optional suffix K, M or G (KiB, MiB, GiB). The error says what is wrong.
pub fn parse_cache_limit(v: &str) -> Result<u64, String> {
    let (digits, shift) = match v.as_bytes().last().map(u8::to_ascii_uppercase) {
        Some(b'K') => (&v[..v.len() - 1], 10),
        Some(b'M') => (&v[..v.len() - 1], 20),
        Some(b'G') => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a number of bytes, optionally with a suffix K, M or G".into());
    }
    let n: u64 = digits.parse().map_err(|_| "too large".to_string())?;
    let n = n
        .checked_mul(1 << shift)
        .ok_or_else(|| "too large".to_string())?;
    if n == 0 {
        return Err("must be at least 1 byte".into());
    }
    Ok(n)
}

/// The user address space of `ppc64emu user`: every mapping lies below it (the loader's
/// stack top and `mmap`'s limits are under it). 40 bits, where Linux gives 47, so that the
/// host can reserve the whole range as one mapping. Translated code of host-guarded memory
/// (`JitShared::set_user_process`) tests an address against it in one instruction.
pub const USER_SPAN: u64 = 1 << 40;

#[cfg(test)]
mod tests {
    #[test]
    fn cache_limits_parse() {
        use super::parse_cache_limit as p;
        assert_eq!(p("1"), Ok(1));
        assert_eq!(p("4096"), Ok(4096));
        assert_eq!(p("64k"), Ok(64 << 10));
        assert_eq!(p("3M"), Ok(3 << 20));
        assert_eq!(p("1G"), Ok(1 << 30));
        for bad in [
            "",
            "K",
            "0",
            "0M",
            "-1",
            "1.5M",
            "12T",
            "0x100",
            "18446744073709551616",
            "99999999999G",
        ] {
            assert!(p(bad).is_err(), "{bad:?} accepted");
        }
    }
}
