//! The kernel-make tree configured once, at image build time.
//!
//! The seed's workload configures the kernel (`make tinyconfig`, the fragment, `make
//! olddefconfig`, which first compile Kconfig's `conf`) before its timed make: 10–20 minutes
//! under emulation, the same in every run, and longer than the `--quick` make itself. So the
//! image builder (guest/) boots a *configure image* once, on ours: the kernel-make image with
//! `EXPORT_PREPARED=1` in /proj/params, whose /init (workloads/linux/init.sh) runs that
//! configuration and prints what it wrote under /proj as a gzip'd newc archive in hex lines
//! ([`MARK`]), plus the list of those files' mtimes in nanoseconds ([`TIMES`], inside the
//! archive), and a result line whose checksum is the archive's SHA-256. This module turns that
//! console output back into files for the real image.
//!
//! Why the configured tree then builds exactly as after a configuration in the guest: make
//! decides from mtimes alone. Every other file of the image has mtime 0 (the kernel keeps an
//! initramfs's mtimes), so the configuration's files must be newer than all of them and keep
//! their order among themselves: `olddefconfig` leaves `.config` newer than the
//! `include/config/auto.conf` that `tinyconfig` wrote, and the timed make must still see that
//! and run `syncconfig`. An archive's mtimes are whole seconds, which would tie files written
//! within one second, so each file gets the rank of its nanosecond mtime (1, 2, …): the same
//! order, ties only where the guest had them, and all far older than anything the timed make
//! writes.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use anyhow::{Context, Result, bail};

/// The prefix of the configure image's hex lines.
pub const MARK: &str = "LINUX-MAKE-PREPARED";
/// The archive member listing `<seconds>.<fraction> <path>` for every other member (GNU find's
/// `-printf '%T@ %p\n'`); not itself part of the image.
pub const TIMES: &str = "tmp/prepared.times";
/// Where the configuration writes: everything else in the archive is refused.
const TOP: &str = "proj";

/// One file the configuration wrote, as the image gets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File {
        data: Vec<u8>,
        mode: u32,
        mtime: u32,
    },
    Symlink(String),
}

/// The archive printed on the console: the hex after every [`MARK`], in order.
pub fn archive_from_console<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut seen = 0usize;
    for (n, line) in lines.into_iter().enumerate() {
        let Some(rest) = line.trim_end_matches(['\r', '\n']).strip_prefix(MARK) else {
            continue;
        };
        seen += 1;
        let hex = rest.trim().as_bytes();
        if hex.len() % 2 != 0 {
            bail!(
                "console line {} of the configure run has an odd number of hex digits (a kernel message inside it?)",
                n + 1
            );
        }
        for pair in hex.chunks(2) {
            let digit = |c: u8| (c as char).to_digit(16);
            match (digit(pair[0]), digit(pair[1])) {
                (Some(h), Some(l)) => out.push((h * 16 + l) as u8),
                _ => bail!(
                    "console line {} of the configure run is not hex: {:?}",
                    n + 1,
                    String::from_utf8_lossy(pair)
                ),
            }
        }
    }
    if seen == 0 {
        bail!("the configure run printed no {MARK} lines");
    }
    Ok(out)
}

/// Nanoseconds since the epoch from `%T@` (`1796000000.1234567890`, fraction of any length).
fn parse_time(s: &str) -> Option<u128> {
    let (secs, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 9 && !frac[9..].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac = &frac[..frac.len().min(9)];
    let nanos: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u128>().ok()? * 10u128.pow(9 - frac.len() as u32)
    };
    Some(secs.parse::<u128>().ok()? * 1_000_000_000 + nanos)
}

/// The mtime ranks of [`TIMES`]: path → 1 for the oldest, equal times equal ranks.
fn ranks(times: &str) -> Result<BTreeMap<String, u32>> {
    let mut by_path = BTreeMap::new();
    for line in times.lines().filter(|l| !l.trim().is_empty()) {
        let (t, path) = line
            .split_once(' ')
            .with_context(|| format!("{TIMES}: no path in {line:?}"))?;
        let t = parse_time(t).with_context(|| format!("{TIMES}: bad time in {line:?}"))?;
        by_path.insert(path.to_string(), t);
    }
    let order: BTreeSet<u128> = by_path.values().copied().collect();
    let rank: BTreeMap<u128, u32> = order.into_iter().zip(1u32..).collect();
    Ok(by_path.into_iter().map(|(p, t)| (p, rank[&t])).collect())
}

/// The configuration's files from the archive (gzip'd newc), by path under the image root.
pub fn unpack(archive: &[u8]) -> Result<BTreeMap<String, Entry>> {
    let mut cpio = Vec::new();
    flate2::read::GzDecoder::new(archive)
        .read_to_end(&mut cpio)
        .context("the configure run's archive is not gzip data")?;
    let mut members = Vec::new();
    let mut r = std::io::Cursor::new(cpio.as_slice());
    loop {
        let mut e =
            cpio::newc::Reader::new(r).context("the configure run's archive is not a newc cpio")?;
        if e.entry().is_trailer() {
            break;
        }
        let name = e.entry().name().trim_start_matches("./").to_string();
        let mode = e.entry().mode();
        let mut data = Vec::new();
        e.read_to_end(&mut data)
            .with_context(|| format!("reading {name} from the configure run's archive"))?;
        members.push((name, mode, data));
        r = e.finish()?;
    }
    let times = members
        .iter()
        .position(|(n, _, _)| n == TIMES)
        .with_context(|| format!("the configure run's archive has no {TIMES}"))?;
    let (_, _, times) = members.remove(times);
    let ranks = ranks(&String::from_utf8_lossy(&times))?;
    let mut out = BTreeMap::new();
    for (name, mode, data) in members {
        let inside = name == TOP || name.strip_prefix(TOP).is_some_and(|r| r.starts_with('/'));
        if !inside || name.split('/').any(|c| c == ".." || c.is_empty()) {
            bail!("the configure run's archive holds {name:?}, outside /{TOP}");
        }
        let entry = match mode & 0o170000 {
            0o040000 => Entry::Dir,
            0o120000 => Entry::Symlink(
                String::from_utf8(data)
                    .with_context(|| format!("{name}: link target is not UTF-8"))?,
            ),
            0o100000 => Entry::File {
                data,
                mode: mode & 0o7777,
                mtime: *ranks
                    .get(&name)
                    .with_context(|| format!("{TIMES} has no time for {name}"))?,
            },
            t => bail!(
                "{name} in the configure run's archive is neither a file, a directory nor a link (type {t:o})"
            ),
        };
        out.insert(name, entry);
    }
    Ok(out)
}

/// Tests: a gzip'd newc archive of (name, mode, data), as the guest's cpio and gzip write it.
#[cfg(test)]
pub(crate) fn test_archive(members: &[(&str, u32, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut w = Vec::new();
    for (i, (name, mode, data)) in members.iter().enumerate() {
        let mut e = cpio::newc::Builder::new(name)
            .ino(i as u32 + 1)
            .mode(*mode)
            .mtime(1_796_000_000)
            .write(w, data.len() as u32);
        e.write_all(data).unwrap();
        w = e.finish().unwrap();
    }
    let cpio = cpio::newc::trailer(w).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&cpio).unwrap();
    gz.finish().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::test_archive as archive;

    fn hex_lines(bytes: &[u8]) -> Vec<String> {
        bytes
            .chunks(30)
            .map(|c| {
                format!(
                    "{MARK} {}",
                    c.iter().map(|b| format!("{b:02x}")).collect::<String>()
                )
            })
            .collect()
    }

    #[test]
    fn console_hex_round_trips_and_ignores_other_lines() {
        let bytes: Vec<u8> = (0..=255u8).chain(0..100).collect();
        let mut lines = vec!["linux-make: prepared, up 600.1 s".to_string()];
        lines.extend(hex_lines(&bytes));
        lines.insert(3, "[  601.5] some kernel message".into());
        lines.push("LINUX-MAKE-RESULT cpus=2 …".into());
        let got = archive_from_console(lines.iter().map(String::as_str)).unwrap();
        assert_eq!(got, bytes);
    }

    #[test]
    fn broken_hex_lines_are_refused() {
        let e = archive_from_console([format!("{MARK} abc").as_str()]).unwrap_err();
        assert!(e.to_string().contains("odd number"), "{e}");
        let e = archive_from_console([format!("{MARK} ab[ 67").as_str()]).unwrap_err();
        assert!(e.to_string().contains("not hex"), "{e}");
        let e = archive_from_console(["nothing here"]).unwrap_err();
        assert!(
            e.to_string().contains("no LINUX-MAKE-PREPARED lines"),
            "{e}"
        );
    }

    #[test]
    fn times_parse_to_nanoseconds() {
        assert_eq!(parse_time("12.5"), Some(12_500_000_000));
        assert_eq!(parse_time("12.0000000015"), Some(12_000_000_001));
        assert_eq!(parse_time("12"), Some(12_000_000_000));
        assert_eq!(parse_time("x.5"), None);
        assert_eq!(parse_time("1.2x"), None);
    }

    #[test]
    fn files_get_the_rank_of_their_nanosecond_mtime() {
        // .config rewritten after auto.conf within the same second: it must stay newer.
        let times = "1796000000.0000000000 proj/include\n\
                     1796000005.2000000000 proj/include/config/auto.conf\n\
                     1796000005.7000000000 proj/.config\n\
                     1796000005.7000000000 proj/.config.old\n\
                     1796000009.0000000000 proj/scripts/kconfig/conf\n";
        let a = archive(&[
            ("proj/include", 0o040755, b""),
            ("proj/include/config/auto.conf", 0o100644, b"CONFIG_SMP=y\n"),
            ("proj/.config", 0o100644, b"CONFIG_SMP=y\n"),
            ("proj/.config.old", 0o100644, b"\n"),
            ("proj/scripts/kconfig/conf", 0o100755, b"\x7fELF"),
            ("proj/scripts/kconfig/lexer", 0o120777, b"lexer.lex.c"),
            (TIMES, 0o100644, times.as_bytes()),
        ]);
        let got = unpack(&a).unwrap();
        assert_eq!(got.len(), 6, "{got:?}");
        assert_eq!(got["proj/include"], Entry::Dir);
        let mtime = |p: &str| match &got[p] {
            Entry::File { mtime, .. } => *mtime,
            e => panic!("{p}: {e:?}"),
        };
        assert_eq!(mtime("proj/include/config/auto.conf"), 2);
        assert_eq!(mtime("proj/.config"), 3);
        assert_eq!(mtime("proj/.config.old"), 3);
        assert_eq!(mtime("proj/scripts/kconfig/conf"), 4);
        assert_eq!(
            got["proj/scripts/kconfig/conf"],
            Entry::File {
                data: b"\x7fELF".to_vec(),
                mode: 0o755,
                mtime: 4
            }
        );
        assert_eq!(
            got["proj/scripts/kconfig/lexer"],
            Entry::Symlink("lexer.lex.c".into())
        );
    }

    #[test]
    fn archives_that_write_elsewhere_or_lack_times_are_refused() {
        let times = "1.0 proj/a\n1.0 etc/passwd\n";
        let outside = archive(&[
            ("proj/a", 0o100644, b"a"),
            ("etc/passwd", 0o100644, b"x"),
            (TIMES, 0o100644, times.as_bytes()),
        ]);
        let e = unpack(&outside).unwrap_err();
        assert!(e.to_string().contains("outside /proj"), "{e}");
        let up = archive(&[
            ("proj/../init", 0o100644, b"x"),
            (TIMES, 0o100644, b"1.0 proj/../init\n"),
        ]);
        assert!(
            unpack(&up)
                .unwrap_err()
                .to_string()
                .contains("outside /proj")
        );
        let untimed = archive(&[("proj/a", 0o100644, b"a")]);
        assert!(
            unpack(&untimed)
                .unwrap_err()
                .to_string()
                .contains("has no tmp/prepared.times")
        );
        let missing = archive(&[("proj/a", 0o100644, b"a"), (TIMES, 0o100644, b"")]);
        assert!(
            unpack(&missing)
                .unwrap_err()
                .to_string()
                .contains("no time for proj/a")
        );
        let fifo = archive(&[("proj/f", 0o010644, b""), (TIMES, 0o100644, b"")]);
        assert!(
            unpack(&fifo)
                .unwrap_err()
                .to_string()
                .contains("neither a file")
        );
        assert!(
            unpack(b"not gzip")
                .unwrap_err()
                .to_string()
                .contains("not gzip")
        );
    }
}
