//! Reading the guest's own verdict from its console output.
//!
//! The one thing the harness takes from logs rather than from the run report is the guest's
//! result line, because it is the only measurement every emulator (ours and peers) shares:
//! `MKBENCH-RESULT cpus=N jobs=J units=U size=S checksum=0x… elapsed_tb=T tb_hz=HZ …`.
//! `MKBENCH-STATS key=value …` lines may precede it, and `MKBENCH-ERROR reason` reports a
//! failed self-check.
//!
//! The Linux guests (workloads/linux/init.sh) print
//! `LINUX-MAKE-RESULT cpus=N jobs=J workload=W units=U size=S elapsed_ns=T checksum=<SHA-256>`
//! (time from the guest's clock, checksum of the build outputs) or `LINUX-MAKE-ERROR reason`.
//! Both forms become one [`GuestResult`]: a Linux line's time is kept as `elapsed_tb` ticks of
//! a 1 GHz clock (`tb_hz` = 10^9), its checksum as 64 lower-case hex digits without `0x`.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow, bail};

use crate::model::GuestResult;

const RESULT_TAG: &str = "MKBENCH-RESULT";
const STATS_TAG: &str = "MKBENCH-STATS";
const ERROR_TAG: &str = "MKBENCH-ERROR";
const LINUX_RESULT_TAG: &str = "LINUX-MAKE-RESULT";
const LINUX_STATS_TAG: &str = "LINUX-MAKE-STATS";
const LINUX_ERROR_TAG: &str = "LINUX-MAKE-ERROR";
/// The clock of a Linux result line's `elapsed_ns`.
pub const NS_PER_S: u64 = 1_000_000_000;

/// Everything the harness reads from a run's console.
#[derive(Debug, Default, PartialEq)]
pub struct GuestOutput {
    /// The last result line, parsed; `Err` holds why a present line did not parse.
    pub result: Option<Result<GuestResult, String>>,
    pub stats: BTreeMap<String, String>,
    pub error: Option<String>,
}

/// Finds `tag` in a console line, tolerating a prefix (console noise, carriage returns).
fn after_tag<'a>(line: &'a str, tag: &str) -> Option<&'a str> {
    let i = line.find(tag)?;
    let rest = &line[i + tag.len()..];
    if rest.is_empty() || rest.starts_with(char::is_whitespace) {
        Some(rest.trim())
    } else {
        None
    }
}

fn key_values(s: &str) -> BTreeMap<String, String> {
    s.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Scans the console output of one run.
pub fn scan<'a>(lines: impl IntoIterator<Item = &'a str>) -> GuestOutput {
    let mut out = GuestOutput::default();
    for raw in lines {
        let line = raw.trim_end_matches(['\r', '\n']);
        if let Some(rest) = after_tag(line, RESULT_TAG) {
            out.result = Some(parse_result(rest).map_err(|e| format!("{e:#}")));
        } else if let Some(rest) = after_tag(line, LINUX_RESULT_TAG) {
            out.result = Some(parse_linux_result(rest).map_err(|e| format!("{e:#}")));
        } else if let Some(rest) =
            after_tag(line, STATS_TAG).or_else(|| after_tag(line, LINUX_STATS_TAG))
        {
            out.stats.extend(key_values(rest));
        } else if let Some(rest) =
            after_tag(line, ERROR_TAG).or_else(|| after_tag(line, LINUX_ERROR_TAG))
        {
            out.error = Some(if rest.is_empty() {
                "(no reason given)".into()
            } else {
                rest.to_string()
            });
        }
    }
    out
}

fn take_u64(kv: &mut BTreeMap<String, String>, key: &str) -> Result<u64> {
    let v = kv.remove(key).ok_or_else(|| anyhow!("missing {key}="))?;
    let v = v.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    parsed.with_context(|| format!("{key}={v} is not a number"))
}

fn take_u32(kv: &mut BTreeMap<String, String>, key: &str) -> Result<u32> {
    let v = take_u64(kv, key)?;
    u32::try_from(v).with_context(|| format!("{key}={v} is too large"))
}

/// Parses the part of a result line after the tag.
pub fn parse_result(rest: &str) -> Result<GuestResult> {
    let mut kv = key_values(rest);
    let checksum = kv
        .remove("checksum")
        .ok_or_else(|| anyhow!("missing checksum="))?;
    let hex = checksum
        .strip_prefix("0x")
        .ok_or_else(|| anyhow!("checksum={checksum} does not start with 0x"))?;
    if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!("checksum={checksum} is not hexadecimal");
    }
    let r = GuestResult {
        cpus: take_u32(&mut kv, "cpus")?,
        jobs: take_u32(&mut kv, "jobs")?,
        units: take_u32(&mut kv, "units")?,
        size: take_u32(&mut kv, "size")?,
        checksum: format!("0x{}", hex.to_ascii_lowercase()),
        elapsed_tb: take_u64(&mut kv, "elapsed_tb")?,
        tb_hz: take_u64(&mut kv, "tb_hz")?,
        counters: kv,
    };
    if r.tb_hz == 0 {
        bail!("tb_hz=0");
    }
    Ok(r)
}

/// Parses the part of a Linux guest's result line after the tag. `workload=` stays among the
/// counters, where the runner checks it against the image.
pub fn parse_linux_result(rest: &str) -> Result<GuestResult> {
    let mut kv = key_values(rest);
    let checksum = kv
        .remove("checksum")
        .ok_or_else(|| anyhow!("missing checksum="))?;
    if checksum.len() != 64 || !checksum.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!("checksum={checksum} is not a SHA-256 (64 hexadecimal digits)");
    }
    if !kv.contains_key("workload") {
        bail!("missing workload=");
    }
    Ok(GuestResult {
        cpus: take_u32(&mut kv, "cpus")?,
        jobs: take_u32(&mut kv, "jobs")?,
        units: take_u32(&mut kv, "units")?,
        size: take_u32(&mut kv, "size")?,
        checksum: checksum.to_ascii_lowercase(),
        elapsed_tb: take_u64(&mut kv, "elapsed_ns")?,
        tb_hz: NS_PER_S,
        counters: kv,
    })
}

impl GuestResult {
    /// Guest-measured elapsed seconds.
    pub fn elapsed_s(&self) -> f64 {
        self.elapsed_tb as f64 / self.tb_hz as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "MKBENCH-RESULT cpus=4 jobs=4 units=32 size=400 checksum=0xDEADbeef \
                        elapsed_tb=1024000000 tb_hz=512000000 faults=10 hcalls=20 flush_hcalls=3 ipis=4 ticks=500";

    #[test]
    fn parses_result_line() {
        let out = scan([
            "booting",
            "MKBENCH-STATS jobs_run=32 procs=33",
            LINE,
            "power off",
        ]);
        let r = out.result.unwrap().unwrap();
        assert_eq!(r.cpus, 4);
        assert_eq!(r.checksum, "0xdeadbeef");
        assert_eq!(r.elapsed_s(), 2.0);
        assert_eq!(r.counters["ticks"], "500");
        assert_eq!(out.stats["procs"], "33");
        assert!(out.error.is_none());
    }

    #[test]
    fn tolerates_console_prefix_and_cr() {
        let noisy = format!("[ 1.0] {LINE}\r");
        assert!(scan([noisy.as_str()]).result.unwrap().is_ok());
    }

    #[test]
    fn reports_malformed_lines() {
        let out =
            scan(["MKBENCH-RESULT cpus=1 jobs=1 units=1 size=1 checksum=12 elapsed_tb=1 tb_hz=1"]);
        assert!(out.result.unwrap().unwrap_err().contains("0x"));
        let out = scan(["MKBENCH-RESULT cpus=1 checksum=0x1"]);
        assert!(out.result.unwrap().is_err());
        let out =
            scan(["MKBENCH-RESULT cpus=1 jobs=1 units=1 size=1 checksum=0x1 elapsed_tb=5 tb_hz=0"]);
        assert!(out.result.unwrap().is_err());
    }

    const SHA: &str = "3f0a3b5c1d2e4f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";

    #[test]
    fn parses_linux_result_line() {
        let line = format!(
            "LINUX-MAKE-RESULT cpus=2 jobs=2 workload=linux-make units=4 size=3 elapsed_ns=1500000000 checksum={}",
            SHA.to_uppercase()
        );
        let out = scan([
            "[    3.1] Run /init as init process",
            line.as_str(),
            "reboot: Power down",
        ]);
        let r = out.result.unwrap().unwrap();
        assert_eq!((r.cpus, r.jobs, r.units, r.size), (2, 2, 4, 3));
        assert_eq!(r.checksum, SHA);
        assert_eq!(r.elapsed_s(), 1.5);
        assert_eq!(r.counters["workload"], "linux-make");
    }

    #[test]
    fn rejects_bad_linux_lines() {
        let short = "LINUX-MAKE-RESULT cpus=1 jobs=1 workload=linux-make units=1 size=1 elapsed_ns=5 checksum=0xabc";
        assert!(
            scan([short])
                .result
                .unwrap()
                .unwrap_err()
                .contains("SHA-256")
        );
        let no_time = format!(
            "LINUX-MAKE-RESULT cpus=1 jobs=1 workload=linux-make units=1 size=1 checksum={SHA}"
        );
        assert!(
            scan([no_time.as_str()])
                .result
                .unwrap()
                .unwrap_err()
                .contains("elapsed_ns")
        );
        let no_wl =
            format!("LINUX-MAKE-RESULT cpus=1 jobs=1 units=1 size=1 elapsed_ns=5 checksum={SHA}");
        assert!(
            scan([no_wl.as_str()])
                .result
                .unwrap()
                .unwrap_err()
                .contains("workload")
        );
        let out = scan(["LINUX-MAKE-ERROR make -j2 failed with status 2"]);
        assert_eq!(out.error.as_deref(), Some("make -j2 failed with status 2"));
    }

    #[test]
    fn error_line_and_absence() {
        let out = scan(["MKBENCH-ERROR unit 3 checksum mismatch"]);
        assert_eq!(out.error.as_deref(), Some("unit 3 checksum mismatch"));
        assert!(out.result.is_none());
        assert!(scan(["MKBENCH-RESULTS nope"]).result.is_none());
    }
}
