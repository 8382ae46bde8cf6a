//! Boot images → a plan of what to write into guest RAM and how the boot CPU starts.
//!
//! Placement is QEMU 7.2's pseries placement, so one image runs on both (docs/machine.md):
//! - every PT_LOAD of `-kernel` at `(p_paddr & 0x0fffffff) + 0x400000`; execution starts at
//!   the lowest loaded address (not `e_entry`), r3 = FDT, r4 = that address, r5 = 0,
//!   MSR = SF|ME;
//! - `-bios` (raw) at 0; the boot CPU then starts at 0x100 with MSR = 0 (big-endian, 32-bit,
//!   real mode), r3 = FDT, r4 = r5 = 0, as QEMU enters its firmware;
//! - the initrd at `(kernel_addr + kernel_size + 0x1ffff) & !0xffff`;
//! - the FDT 1 MiB below min(RAM, 2 GiB) (reachable by 32-bit real-mode code), and the RTAS
//!   blob 64 KiB below it. Both are in the FDT's memory reservation map.

use super::config::MachineConfig;
use super::effects::{OutOfRange, PhysMemory};
use super::fdt::{self, FdtError, FdtParams};
use super::rtas;
use crate::cpu::msr;
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use std::fmt;
use std::path::Path;

/// Where QEMU puts the kernel (its `kernel-addr`, above the firmware's 4 MiB).
pub const KERNEL_ADDR: u64 = 0x40_0000;
/// Largest `-bios` image.
pub const BIOS_MAX: u64 = 0x40_0000;
/// Where the boot CPU enters a `-bios` image.
pub const BIOS_ENTRY: u64 = 0x100;
/// Space kept for the FDT.
pub const FDT_MAX_SIZE: u64 = 0x10_0000;
/// The FDT stays below this.
pub const FDT_MAX_ADDR: u64 = 0x8000_0000;
/// Space kept for the RTAS blob, below the FDT.
pub const RTAS_REGION: u64 = 0x1_0000;

/// What went wrong preparing the boot; the message names the file.
#[derive(Debug)]
pub enum LoadError {
    Read {
        what: &'static str,
        path: String,
        err: std::io::Error,
    },
    BadElf {
        path: String,
        why: String,
    },
    DoesNotFit {
        what: &'static str,
        path: String,
        why: String,
    },
    Fdt(FdtError),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Read { what, path, err } => write!(f, "cannot read {what} '{path}': {err}"),
            LoadError::BadElf { path, why } => {
                write!(f, "kernel '{path}' is not a usable ELF image: {why}")
            }
            LoadError::DoesNotFit { what, path, why } => {
                write!(f, "{what} '{path}' does not fit: {why}")
            }
            LoadError::Fdt(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LoadError {}

impl From<FdtError> for LoadError {
    fn from(e: FdtError) -> Self {
        LoadError::Fdt(e)
    }
}

/// The kernel as loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedKernel {
    /// Lowest loaded address: where execution starts.
    pub addr: u64,
    /// Sum of the loaded segments' sizes (QEMU's kernel size: reservation, initrd base).
    pub size: u64,
    /// End of the highest loaded segment.
    pub end: u64,
    pub little_endian: bool,
    /// `e_entry`, for information only.
    pub elf_entry: u64,
}

/// Registers of the boot CPU at its first instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootCpu {
    pub pc: u64,
    pub msr: u64,
    pub r3: u64,
    pub r4: u64,
    pub r5: u64,
}

/// Everything to do to RAM and to the boot CPU before the machine starts.
#[derive(Clone, Debug)]
pub struct BootPlan {
    /// Ranges to clear (`addr`, `len`): ELF segments' zero-initialised tails.
    pub zeros: Vec<(u64, u64)>,
    /// Bytes to write, after the clearing, in order.
    pub writes: Vec<(u64, Vec<u8>)>,
    pub boot: BootCpu,
    pub fdt_addr: u64,
    pub fdt: Vec<u8>,
    pub rtas_base: u64,
    pub kernel: Option<LoadedKernel>,
    /// `[start, end)`.
    pub initrd: Option<(u64, u64)>,
    pub ncpus: usize,
    pub ram_bytes: u64,
    /// log2 of the HPT size the tree advertises (`ibm,pft-size`).
    pub hpt_shift: u32,
}

impl BootPlan {
    /// Writes the plan into guest memory.
    pub fn apply(&self, mem: &dyn PhysMemory) -> Result<(), OutOfRange> {
        let zero = vec![0u8; 1 << 16];
        for &(addr, len) in &self.zeros {
            let mut done = 0;
            while done < len {
                let n = (len - done).min(zero.len() as u64);
                mem.write(addr + done, &zero[..n as usize])?;
                done += n;
            }
        }
        for (addr, bytes) in &self.writes {
            mem.write(*addr, bytes)?;
        }
        Ok(())
    }
}

/// Boot images already in memory, with the names used in messages.
#[derive(Clone, Debug, Default)]
pub struct BootImages {
    pub kernel: Option<(String, Vec<u8>)>,
    pub initrd: Option<(String, Vec<u8>)>,
    pub bios: Option<(String, Vec<u8>)>,
}

/// Reads the files named by `cfg` and plans the boot.
pub fn plan_from_files(cfg: &MachineConfig) -> Result<BootPlan, LoadError> {
    // Refuse what cannot fit before reading it (an initrd could be huge).
    let read = |what: &'static str,
                p: &Option<std::path::PathBuf>,
                limit: u64|
     -> Result<Option<(String, Vec<u8>)>, LoadError> {
        let Some(p) = p else { return Ok(None) };
        let name = p.display().to_string();
        let len = std::fs::metadata(p)
            .map_err(|err| LoadError::Read {
                what,
                path: name.clone(),
                err,
            })?
            .len();
        if len > limit {
            return Err(LoadError::DoesNotFit {
                what,
                path: name,
                why: format!("{len} bytes, more than the {limit} available"),
            });
        }
        let bytes = read_file(what, p)?;
        Ok(Some((name, bytes)))
    };
    let images = BootImages {
        kernel: read("kernel", &cfg.kernel, u64::MAX)?,
        initrd: read("initrd", &cfg.initrd, cfg.ram_bytes)?,
        bios: read("bios", &cfg.bios, BIOS_MAX)?,
    };
    plan(cfg, &images, random_seed())
}

fn read_file(what: &'static str, p: &Path) -> Result<Vec<u8>, LoadError> {
    std::fs::read(p).map_err(|err| LoadError::Read {
        what,
        path: p.display().to_string(),
        err,
    })
}

/// 32 bytes of host randomness for `/chosen/rng-seed`.
pub fn random_seed() -> [u8; 32] {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    let mut seed = [0u8; 32];
    for (i, chunk) in seed.chunks_mut(8).enumerate() {
        let mut h = state.build_hasher();
        h.write_usize(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    seed
}

/// Address of the FDT for `ram` bytes of RAM.
pub fn fdt_addr(ram: u64) -> u64 {
    ram.min(FDT_MAX_ADDR) - FDT_MAX_SIZE
}

/// Plans the boot of `images` on the machine `cfg` describes.
pub fn plan(
    cfg: &MachineConfig,
    images: &BootImages,
    rng_seed: [u8; 32],
) -> Result<BootPlan, LoadError> {
    let ram = cfg.ram_bytes;
    let fdt_addr = fdt_addr(ram);
    let rtas_base = fdt_addr - RTAS_REGION;
    let mut zeros = Vec::new();
    let mut writes = Vec::new();

    if let Some((name, bios)) = &images.bios {
        if bios.is_empty() || bios.len() as u64 > BIOS_MAX {
            return Err(LoadError::DoesNotFit {
                what: "bios",
                path: name.clone(),
                why: format!(
                    "{} bytes; a firmware image has 1 to {BIOS_MAX} bytes",
                    bios.len()
                ),
            });
        }
        writes.push((0, bios.clone()));
    }

    let mut kernel = None;
    if let Some((name, data)) = &images.kernel {
        let elf = parse_elf(data).map_err(|why| LoadError::BadElf {
            path: name.clone(),
            why,
        })?;
        for s in &elf.segments {
            let end = s.addr.checked_add(s.memsz).filter(|&e| e <= rtas_base);
            if end.is_none() {
                return Err(LoadError::DoesNotFit {
                    what: "kernel",
                    path: name.clone(),
                    why: format!(
                        "a segment at {:#x} of {:#x} bytes ends above {rtas_base:#x}, where the firmware area starts \
                         ({} MiB of RAM)",
                        s.addr,
                        s.memsz,
                        ram >> 20
                    ),
                });
            }
            if s.memsz > s.data.len() as u64 {
                zeros.push((s.addr + s.data.len() as u64, s.memsz - s.data.len() as u64));
            }
            if !s.data.is_empty() {
                writes.push((s.addr, s.data.to_vec()));
            }
        }
        kernel = Some(elf.info);
    }

    let mut initrd = None;
    if let Some((name, data)) = &images.initrd {
        let k = kernel.as_ref().expect("validated: -initrd needs -kernel");
        let base = ((k.addr + k.size + 0x1ffff) & !0xffff).max((k.end + 0x1ffff) & !0xffff);
        let end = base + data.len() as u64;
        if end > rtas_base {
            return Err(LoadError::DoesNotFit {
                what: "initrd",
                path: name.clone(),
                why: format!(
                    "{} bytes at {base:#x} would end at {end:#x}, above the firmware area at {rtas_base:#x} \
                     ({} MiB of RAM; give more with -m)",
                    data.len(),
                    ram >> 20
                ),
            });
        }
        writes.push((base, data.clone()));
        initrd = Some((base, end));
    }

    writes.push((rtas_base, rtas::blob()));
    let params = FdtParams {
        ncpus: cfg.smp,
        ram_bytes: ram,
        bootargs: cfg.append.clone(),
        initrd,
        kernel: kernel.as_ref().map(|k| (k.addr, k.size)),
        rtas_base,
        fdt_addr,
        rng_seed,
        bulk_remove: true,
        boot_cpu: 0,
    };
    let blob = fdt::build(&params)?;
    if blob.len() as u64 > FDT_MAX_SIZE {
        return Err(LoadError::Fdt(FdtError(format!(
            "{} bytes, more than {FDT_MAX_SIZE}",
            blob.len()
        ))));
    }
    writes.push((fdt_addr, blob.clone()));

    let boot = match (&images.bios, &kernel) {
        // Every entry has MSR[ME] = 1, as on QEMU's pseries: a partition cannot change ME
        // (mtmsr, mtmsrd and rfid leave it), so one started with ME = 0 would checkstop at
        // its first machine check.
        (Some(_), _) => BootCpu {
            pc: BIOS_ENTRY,
            msr: msr::ME,
            r3: fdt_addr,
            r4: 0,
            r5: 0,
        },
        (None, Some(k)) => BootCpu {
            pc: k.addr,
            msr: msr::SF | msr::ME,
            r3: fdt_addr,
            r4: k.addr,
            r5: 0,
        },
        (None, None) => BootCpu {
            pc: 0,
            msr: msr::SF | msr::ME,
            r3: fdt_addr,
            r4: 0,
            r5: 0,
        },
    };
    Ok(BootPlan {
        zeros,
        writes,
        boot,
        fdt_addr,
        fdt: blob,
        rtas_base,
        kernel,
        initrd,
        ncpus: cfg.smp,
        ram_bytes: ram,
        hpt_shift: fdt::hpt_shift(ram),
    })
}

/// One PT_LOAD, placed.
struct Segment<'a> {
    addr: u64,
    memsz: u64,
    data: &'a [u8],
}

struct ParsedElf<'a> {
    segments: Vec<Segment<'a>>,
    info: LoadedKernel,
}

/// Reads the loadable segments of a PowerPC ELF (32- or 64-bit, either byte order).
fn parse_elf(data: &[u8]) -> Result<ParsedElf<'_>, String> {
    match object::FileKind::parse(data) {
        Ok(object::FileKind::Elf64) => parse_elf_as::<elf::FileHeader64<object::Endianness>>(data),
        Ok(object::FileKind::Elf32) => parse_elf_as::<elf::FileHeader32<object::Endianness>>(data),
        Ok(other) => Err(format!("it is a {other:?} file, not ELF")),
        Err(e) => Err(format!("not an ELF file ({e})")),
    }
}

fn parse_elf_as<H: FileHeader<Endian = object::Endianness>>(
    data: &[u8],
) -> Result<ParsedElf<'_>, String> {
    use object::Endian;
    let h = H::parse(data).map_err(|e| e.to_string())?;
    let endian = h.endian().map_err(|e| e.to_string())?;
    let machine = h.e_machine(endian);
    if machine != elf::EM_PPC64 && machine != elf::EM_PPC {
        return Err(format!("ELF machine {} is not PowerPC", machine.0));
    }
    let phdrs = h
        .program_headers(endian, data)
        .map_err(|e| format!("program headers: {e}"))?;
    let loads: Vec<_> = phdrs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.p_type(endian) == elf::PT_LOAD)
        .collect();
    if loads.is_empty() {
        return Err("no PT_LOAD segment".into());
    }
    let mut segments = Vec::new();
    let (mut low, mut high, mut size) = (u64::MAX, 0u64, 0u64);
    for &(i, ph) in &loads {
        let paddr: u64 = ph.p_paddr(endian).into();
        let filesz: u64 = ph.p_filesz(endian).into();
        let mut memsz: u64 = ph.p_memsz(endian).into();
        if filesz > memsz {
            return Err(format!(
                "segment {i}: file size {filesz:#x} exceeds memory size {memsz:#x}"
            ));
        }
        let bytes = ph
            .data(endian, data)
            .map_err(|()| format!("segment {i}: file data lies outside the file"))?;
        // A zero-filled tail that overlaps another segment is not loaded (QEMU's rule for
        // images whose memsz describes the run-time layout).
        if memsz > filesz {
            let (zs, ze) = (paddr.saturating_add(filesz), paddr.saturating_add(memsz));
            let overlaps = loads.iter().any(|&(j, o)| {
                let os: u64 = o.p_paddr(endian).into();
                let oe = os.saturating_add(o.p_memsz(endian).into());
                j != i && os < ze && zs < oe
            });
            if overlaps {
                memsz = filesz;
            }
        }
        let addr = (paddr & 0x0fff_ffff) + KERNEL_ADDR;
        size = size.saturating_add(memsz);
        low = low.min(addr);
        high = high.max(addr.saturating_add(memsz));
        if memsz > 0 {
            segments.push(Segment {
                addr,
                memsz,
                data: bytes,
            });
        }
    }
    let info = LoadedKernel {
        addr: low,
        size,
        end: high,
        little_endian: endian.is_little_endian(),
        elf_entry: h.e_entry(endian).into(),
    };
    Ok(ParsedElf { segments, info })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::pseries::effects::VecMemory;

    /// A minimal ELF: header + program headers + the segments' data. `segs` are
    /// (p_paddr, data, memsz).
    pub(crate) fn elf(bits64: bool, le: bool, machine: u16, segs: &[(u64, &[u8], u64)]) -> Vec<u8> {
        let (ehsize, phsize) = if bits64 { (64, 56) } else { (52, 32) };
        let mut out = vec![0u8; ehsize + phsize * segs.len()];
        let put = |out: &mut Vec<u8>, off: usize, v: u64, n: usize| {
            let b = if le { v.to_le_bytes() } else { v.to_be_bytes() };
            let bytes = if le { &b[..n] } else { &b[8 - n..] };
            out[off..off + n].copy_from_slice(bytes);
        };
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = if bits64 { 2 } else { 1 };
        out[5] = if le { 1 } else { 2 };
        out[6] = 1;
        put(&mut out, 16, 2, 2); // ET_EXEC
        put(&mut out, 18, machine as u64, 2);
        put(&mut out, 20, 1, 4);
        let w = if bits64 { 8 } else { 4 };
        put(
            &mut out,
            24,
            0xc000_0000_0000_0000 & if bits64 { u64::MAX } else { 0 },
            w,
        ); // e_entry
        put(&mut out, 24 + w, ehsize as u64, w); // e_phoff
        let after = 24 + 3 * w;
        put(&mut out, after + 4, ehsize as u64, 2);
        put(&mut out, after + 6, phsize as u64, 2);
        put(&mut out, after + 8, segs.len() as u64, 2);
        put(&mut out, after + 10, if bits64 { 64 } else { 40 }, 2);
        let mut data_off = out.len();
        let mut blobs = Vec::new();
        for (k, (paddr, data, memsz)) in segs.iter().enumerate() {
            let ph = ehsize + k * phsize;
            put(&mut out, ph, 1, 4); // PT_LOAD
            if bits64 {
                put(&mut out, ph + 4, 7, 4);
                put(&mut out, ph + 8, data_off as u64, 8);
                put(&mut out, ph + 16, 0xc000_0000_0000_0000 | paddr, 8);
                put(&mut out, ph + 24, *paddr, 8);
                put(&mut out, ph + 32, data.len() as u64, 8);
                put(&mut out, ph + 40, *memsz, 8);
                put(&mut out, ph + 48, 0x10000, 8);
            } else {
                put(&mut out, ph + 4, data_off as u64, 4);
                put(&mut out, ph + 8, *paddr, 4);
                put(&mut out, ph + 12, *paddr, 4);
                put(&mut out, ph + 16, data.len() as u64, 4);
                put(&mut out, ph + 20, *memsz, 4);
                put(&mut out, ph + 24, 7, 4);
                put(&mut out, ph + 28, 0x10000, 4);
            }
            blobs.extend_from_slice(data);
            data_off += data.len();
        }
        out.extend_from_slice(&blobs);
        out
    }

    fn cfg(ram: u64) -> MachineConfig {
        MachineConfig {
            ram_bytes: ram,
            smp: 2,
            append: "console=hvc0".into(),
            ..Default::default()
        }
    }

    fn images(kernel: Vec<u8>) -> BootImages {
        BootImages {
            kernel: Some(("k.elf".into(), kernel)),
            ..Default::default()
        }
    }

    #[test]
    fn placement_follows_qemu() {
        let k = elf(
            true,
            true,
            21,
            &[
                (0x2000, &[1, 2, 3, 4], 0x100),
                (0xc000_0000_0000_0000, &[9; 16], 0x20),
            ],
        );
        let p = plan(&cfg(1 << 30), &images(k), [0; 32]).unwrap();
        let kinfo = p.kernel.clone().unwrap();
        assert_eq!(kinfo.addr, 0x40_0000, "lowest loaded address");
        assert_eq!(kinfo.size, 0x120);
        assert_eq!(kinfo.end, 0x40_2100);
        assert!(kinfo.little_endian);
        assert_eq!(
            p.boot,
            BootCpu {
                pc: 0x40_0000,
                msr: 0x8000_0000_0000_1000,
                r3: 0x3ff0_0000,
                r4: 0x40_0000,
                r5: 0
            }
        );
        assert_eq!(p.fdt_addr, 0x3ff0_0000);
        assert_eq!(p.rtas_base, 0x3fef_0000);
        assert!(p.writes.contains(&(0x40_2000, vec![1, 2, 3, 4])));
        assert!(p.writes.contains(&(0x40_0000, vec![9; 16])));
        assert!(p.zeros.contains(&(0x40_2004, 0xfc)));
        assert!(p.writes.contains(&(p.rtas_base, rtas::blob())));
        assert!(p.writes.contains(&(p.fdt_addr, p.fdt.clone())));
        assert_eq!(p.hpt_shift, 23);
    }

    #[test]
    fn fdt_sits_below_two_gib_on_large_machines() {
        let k = elf(true, false, 21, &[(0, &[0x48, 0, 0, 0], 4)]);
        let p = plan(&cfg(8 << 30), &images(k), [0; 32]).unwrap();
        assert_eq!(p.fdt_addr, 0x7ff0_0000);
        assert!(!p.kernel.unwrap().little_endian);
    }

    #[test]
    fn elf32_and_big_endian() {
        let k = elf(false, false, 20, &[(0x100, &[0xaa; 8], 8)]);
        let p = plan(&cfg(256 << 20), &images(k), [0; 32]).unwrap();
        assert_eq!(p.kernel.unwrap().addr, 0x40_0100);
        assert!(p.writes.contains(&(0x40_0100, vec![0xaa; 8])));
    }

    #[test]
    fn initrd_above_the_kernel() {
        let k = elf(true, true, 21, &[(0, &[1; 0x100], 0x2668e0)]);
        let mut im = images(k);
        im.initrd = Some(("i.cpio".into(), vec![5; 0x1234]));
        let p = plan(&cfg(1 << 30), &im, [0; 32]).unwrap();
        // (0x400000 + 0x2668e0 + 0x1ffff) & !0xffff
        assert_eq!(p.initrd, Some((0x680000, 0x681234)));
        assert!(p.writes.contains(&(0x680000, vec![5; 0x1234])));
        let f = ::fdt::Fdt::new(&p.fdt).unwrap();
        let chosen = f.find_node("/chosen").unwrap();
        assert_eq!(
            chosen.property("linux,initrd-start").unwrap().as_usize(),
            Some(0x680000)
        );
        assert_eq!(
            chosen.property("linux,initrd-end").unwrap().as_usize(),
            Some(0x681234)
        );
    }

    #[test]
    fn initrd_too_large() {
        let k = elf(true, true, 21, &[(0, &[1; 16], 16)]);
        let mut im = images(k);
        im.initrd = Some(("big.cpio".into(), vec![0; 300 << 20]));
        let e = plan(&cfg(256 << 20), &im, [0; 32]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("initrd 'big.cpio' does not fit"), "{msg}");
    }

    #[test]
    fn kernel_must_fit_below_the_firmware_area() {
        let k = elf(true, true, 21, &[(0x0fff_0000, &[1; 16], 0x10_0000)]);
        let e = plan(&cfg(256 << 20), &images(k), [0; 32]).unwrap_err();
        assert!(e.to_string().contains("kernel 'k.elf' does not fit"), "{e}");
        let k = elf(true, true, 21, &[(0, &[1; 16], u64::MAX)]);
        assert!(matches!(
            plan(&cfg(256 << 20), &images(k), [0; 32]),
            Err(LoadError::DoesNotFit { .. })
        ));
    }

    #[test]
    fn malformed_kernels() {
        let bad = |bytes: Vec<u8>, needle: &str| {
            let e = plan(&cfg(256 << 20), &images(bytes), [0; 32]).unwrap_err();
            assert!(matches!(e, LoadError::BadElf { .. }), "{e}");
            assert!(e.to_string().contains(needle), "'{e}' lacks '{needle}'");
        };
        bad(b"#!/bin/sh\necho hi\n".to_vec(), "not an ELF");
        bad(Vec::new(), "not an ELF");
        bad(elf(true, true, 62, &[(0, &[1], 1)]), "not PowerPC");
        bad(elf(true, true, 21, &[]), "no PT_LOAD");
        bad(
            elf(true, true, 21, &[(0, &[1; 8], 4)]),
            "exceeds memory size",
        );
        let mut truncated = elf(true, true, 21, &[(0, &[1; 64], 64)]);
        truncated.truncate(truncated.len() - 10);
        bad(truncated, "outside the file");
        let mut short = elf(true, true, 21, &[(0, &[1; 8], 8)]);
        short.truncate(30);
        bad(short, "");
    }

    #[test]
    fn bios_entry_as_qemu() {
        let k = elf(true, true, 21, &[(0, &[1; 16], 16)]);
        let mut im = images(k);
        let mut rom = vec![0u8; 0x200];
        rom[0x100..0x104].copy_from_slice(&0x4840_0002u32.to_be_bytes());
        im.bios = Some(("rom.bin".into(), rom.clone()));
        let p = plan(&cfg(1 << 30), &im, [0; 32]).unwrap();
        assert_eq!(
            p.boot,
            BootCpu {
                pc: 0x100,
                msr: msr::ME,
                r3: p.fdt_addr,
                r4: 0,
                r5: 0
            }
        );
        assert_eq!(p.writes[0], (0, rom));
        im.bios = Some(("huge.bin".into(), vec![0; BIOS_MAX as usize + 1]));
        assert!(
            plan(&cfg(1 << 30), &im, [0; 32])
                .unwrap_err()
                .to_string()
                .contains("bios 'huge.bin'")
        );
        im.bios = Some(("empty.bin".into(), Vec::new()));
        assert!(plan(&cfg(1 << 30), &im, [0; 32]).is_err());
    }

    #[test]
    fn apply_writes_everything() {
        let k = elf(true, true, 21, &[(0, &[1, 2], 0x20000)]);
        let p = plan(&cfg(256 << 20), &images(k), [0; 32]).unwrap();
        let mem = VecMemory::new(256 << 20);
        mem.write(0x40_1000, &[0xff; 16]).unwrap();
        p.apply(&mem).unwrap();
        let mut b = [0u8; 4];
        mem.read(0x40_0000, &mut b).unwrap();
        assert_eq!(b, [1, 2, 0, 0]);
        mem.read(0x40_1000, &mut b).unwrap();
        assert_eq!(b, [0; 4], "BSS cleared");
        assert_eq!(mem.read_u32_be(p.fdt_addr).unwrap(), 0xd00d_feed);
        assert_eq!(mem.read_u32_be(p.rtas_base).unwrap(), rtas::BLOB_WORDS[0]);
        assert!(p.apply(&VecMemory::new(1 << 20)).is_err());
        // The machine's RAM takes the same plan.
        let ram = crate::softmmu::GuestRam::new(256 << 20).unwrap();
        p.apply(&ram).unwrap();
        assert_eq!(ram.read_u32_be(p.fdt_addr).unwrap(), 0xd00d_feed);
        assert_eq!(
            ram.read_u32_be(p.rtas_base + 12).unwrap(),
            rtas::BLOB_WORDS[3]
        );
    }
}
