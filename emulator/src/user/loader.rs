//! Loads a static little-endian ppc64 (ELFv2) Linux executable and builds the initial stack
//! (argc, argv, envp, auxiliary vector) the way the Linux ELF loader lays it out.

use super::mem::{PROT_EXEC, PROT_READ, PROT_WRITE, ProcessMemory, page_up};
use crate::softmmu::PAGE_MASK;
use object::Endianness;
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use std::collections::BTreeMap;

/// Top of the initial stack, just under the user address limit (40 bits here, where Linux
/// has 47: see `mem::USER_SPAN`).
pub const STACK_TOP: u64 = super::mem::USER_SPAN - 0x1_0000;
/// The stack mapping (Linux's default `RLIMIT_STACK`).
pub const STACK_SIZE: u64 = 8 << 20;
/// `mmap` without an address searches downward from here.
pub const MMAP_TOP: u64 = STACK_TOP - STACK_SIZE - (1 << 30);
/// Where a position-independent executable (static-pie) is placed.
pub const PIE_BASE: u64 = 0x1000_0000;

/// AT_HWCAP: 32/64-bit, AltiVec, FPU, MMU, icache snoop, ISA 2.05/2.06, VSX, true LE — a
/// POWER8 without DFP (not emulated).
pub const HWCAP: u64 = 0xdc00_3182;
/// AT_HWCAP2: ISA 2.07, isel, TAR, vector crypto. No HTM (transactional memory is not
/// emulated, and glibc would use it for lock elision), no EBB.
pub const HWCAP2: u64 = 0x8e00_0000;
pub const PLATFORM: &str = "power8";
/// Cache block size of POWER8 (`dcbz` clears 128 bytes): glibc's memset relies on it.
const CACHE_BLOCK: u64 = 128;

mod at {
    pub const NULL: u64 = 0;
    pub const PHDR: u64 = 3;
    pub const PHENT: u64 = 4;
    pub const PHNUM: u64 = 5;
    pub const PAGESZ: u64 = 6;
    pub const BASE: u64 = 7;
    pub const FLAGS: u64 = 8;
    pub const ENTRY: u64 = 9;
    pub const UID: u64 = 11;
    pub const EUID: u64 = 12;
    pub const GID: u64 = 13;
    pub const EGID: u64 = 14;
    pub const PLATFORM: u64 = 15;
    pub const HWCAP: u64 = 16;
    pub const CLKTCK: u64 = 17;
    pub const DCACHEBSIZE: u64 = 19;
    pub const ICACHEBSIZE: u64 = 20;
    pub const UCACHEBSIZE: u64 = 21;
    pub const SECURE: u64 = 23;
    pub const BASE_PLATFORM: u64 = 24;
    pub const RANDOM: u64 = 25;
    pub const HWCAP2: u64 = 26;
    pub const EXECFN: u64 = 31;
}

/// What the runner needs after loading.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub entry: u64,
    /// Initial r1: points at argc.
    pub sp: u64,
    /// Initial program break (page-aligned end of the highest segment).
    pub brk: u64,
    /// Start and end of the image (lowest and highest mapped address).
    pub image: (u64, u64),
}

/// What loading the segments produced.
struct Image {
    entry: u64,
    /// Page-aligned end of the highest segment.
    end: u64,
    /// Lowest mapped address.
    start: u64,
    /// Address of the program headers in guest memory (AT_PHDR), and their number.
    phdr: u64,
    phnum: u16,
    exec_stack: bool,
}

/// Loads the segments of the ELF file `data` into `mem`, or says why the file cannot run.
fn load_segments(
    mem: &mut ProcessMemory,
    data: &[u8],
    file: Option<&std::fs::File>,
) -> Result<Image, String> {
    let hdr = elf::FileHeader64::<Endianness>::parse(data)
        .map_err(|e| format!("not a 64-bit ELF file: {e}"))?;
    let endian = hdr.endian().map_err(|e| format!("bad ELF header: {e}"))?;
    if !hdr.is_little_endian() {
        return Err(
            "big-endian ppc64 (ELFv1) programs are not supported; only little-endian ppc64le"
                .into(),
        );
    }
    if hdr.e_machine(endian) != elf::EM_PPC64 {
        return Err(format!(
            "not a ppc64 program (e_machine {})",
            hdr.e_machine(endian).0
        ));
    }
    let etype = hdr.e_type(endian);
    let base = match etype {
        elf::ET_EXEC => 0,
        elf::ET_DYN => PIE_BASE,
        t => return Err(format!("not an executable (e_type {})", t.0)),
    };
    let phdrs = hdr
        .program_headers(endian, data)
        .map_err(|e| format!("bad program headers: {e}"))?;
    if phdrs.iter().any(|p| p.p_type(endian) == elf::PT_INTERP) {
        return Err("dynamically linked programs are not supported; link with -static".into());
    }
    // Protection of each page: segments sharing a page get the union of their flags.
    let mut prot: BTreeMap<u64, u32> = BTreeMap::new();
    let mut exec_stack = false;
    let mut phdr_addr = None;
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for p in phdrs {
        let ty = p.p_type(endian);
        if ty == elf::PT_GNU_STACK {
            exec_stack = p.p_flags(endian).0 & elf::PF_X.0 != 0;
        }
        if ty == elf::PT_PHDR {
            phdr_addr = Some(base + p.p_vaddr(endian));
        }
        if ty != elf::PT_LOAD {
            continue;
        }
        let (vaddr, memsz, filesz) = (p.p_vaddr(endian), p.p_memsz(endian), p.p_filesz(endian));
        let start = base.checked_add(vaddr).ok_or("segment address overflows")?;
        let end = start
            .checked_add(memsz)
            .filter(|&e| e <= MMAP_TOP)
            .ok_or("segment outside the user address space")?;
        if filesz > memsz {
            return Err("segment file size exceeds its memory size".into());
        }
        let f = p.p_flags(endian).0;
        let pr = (if f & elf::PF_R.0 != 0 { PROT_READ } else { 0 })
            | (if f & elf::PF_W.0 != 0 { PROT_WRITE } else { 0 })
            | (if f & elf::PF_X.0 != 0 { PROT_EXEC } else { 0 });
        let mut page = start & PAGE_MASK;
        while page < end {
            *prot.entry(page).or_insert(0) |= pr;
            page += 0x1000;
        }
        lo = lo.min(start & PAGE_MASK);
        hi = hi.max(page_up(end));
        let off = p.p_offset(endian);
        if phdr_addr.is_none() && off <= hdr.e_phoff(endian) && hdr.e_phoff(endian) < off + filesz {
            phdr_addr = Some(start + hdr.e_phoff(endian) - off);
        }
        // Mapped later (pages first); contents written once the map exists.
        let _ = p
            .data(endian, data)
            .map_err(|_| "segment data outside the file")?;
    }
    if prot.is_empty() {
        return Err("no loadable segments".into());
    }
    // Coalesce runs of pages with equal protection into mappings.
    let mut run: Option<(u64, u64, u32)> = None;
    for (&page, &pr) in &prot {
        match run {
            Some((s, e, p)) if e == page && p == pr => run = Some((s, e + 0x1000, p)),
            _ => {
                if let Some((s, e, p)) = run {
                    mem.map(s, e, p);
                }
                run = Some((page, page + 0x1000, pr));
            }
        }
    }
    if let Some((s, e, p)) = run {
        mem.map(s, e, p);
    }
    for p in phdrs.iter().filter(|p| p.p_type(endian) == elf::PT_LOAD) {
        let bytes = p
            .data(endian, data)
            .map_err(|_| "segment data outside the file")?;
        let at = base + p.p_vaddr(endian);
        match file {
            Some(f) => mem.poke_file(at, bytes, f, p.p_offset(endian)),
            None => mem.poke(at, bytes),
        }
        .map_err(|_| "segment overlaps nothing mapped")?;
    }
    Ok(Image {
        entry: base + hdr.e_entry(endian),
        end: hi,
        start: lo,
        phdr: phdr_addr.unwrap_or(0),
        phnum: hdr.e_phnum(endian),
        exec_stack,
    })
}

/// Loads `data` (the ELF file; `file`, the open file it was mapped from, if any: segments'
/// whole pages are then mapped from it rather than copied) and builds the stack with `argv`,
/// `envp` and the auxiliary vector. `random` are the 16 bytes AT_RANDOM points at.
pub fn load(
    mem: &mut ProcessMemory,
    data: &[u8],
    file: Option<&std::fs::File>,
    argv: &[Vec<u8>],
    envp: &[Vec<u8>],
    execfn: &[u8],
    random: [u8; 16],
) -> Result<Loaded, String> {
    let img = load_segments(mem, data, file)?;
    let stack_prot = PROT_READ | PROT_WRITE | if img.exec_stack { PROT_EXEC } else { 0 };
    mem.map(STACK_TOP - STACK_SIZE, STACK_TOP, stack_prot);

    // Strings at the top: execfn, then environment and argument strings, platform, random.
    const TOO_BIG: &str = "arguments and environment do not fit on the stack";
    // They are gathered (each one reversed, the whole reversed at the end) and written in one
    // piece: a write per string made the host protection calls of a 40-variable environment
    // 160 `mprotect`s.
    let mut top = STACK_TOP - 8;
    let mut reversed = Vec::new();
    let mut push = |bytes: &[u8], nul: bool| -> Result<u64, String> {
        let len = bytes.len() as u64 + nul as u64;
        if len > top - (STACK_TOP - STACK_SIZE / 4) {
            return Err(TOO_BIG.into());
        }
        top -= len;
        if nul {
            reversed.push(0);
        }
        reversed.extend(bytes.iter().rev());
        Ok(top)
    };
    let execfn_addr = push(execfn, true)?;
    let mut env_addrs = envp
        .iter()
        .rev()
        .map(|s| push(s, true))
        .collect::<Result<Vec<_>, _>>()?;
    env_addrs.reverse();
    let mut arg_addrs = argv
        .iter()
        .rev()
        .map(|s| push(s, true))
        .collect::<Result<Vec<_>, _>>()?;
    arg_addrs.reverse();
    let platform_addr = push(PLATFORM.as_bytes(), true)?;
    let random_addr = push(&random, false)?;
    reversed.reverse();
    mem.poke(top, &reversed).map_err(|_| TOO_BIG)?;
    let top = top & !15;

    let auxv: [(u64, u64); 22] = [
        (at::PHDR, img.phdr),
        (at::PHENT, 56),
        (at::PHNUM, img.phnum as u64),
        (at::PAGESZ, 4096),
        (at::BASE, 0),
        (at::FLAGS, 0),
        (at::ENTRY, img.entry),
        (at::UID, 0),
        (at::EUID, 0),
        (at::GID, 0),
        (at::EGID, 0),
        (at::PLATFORM, platform_addr),
        (at::BASE_PLATFORM, platform_addr),
        (at::HWCAP, HWCAP),
        (at::HWCAP2, HWCAP2),
        (at::CLKTCK, 100),
        (at::DCACHEBSIZE, CACHE_BLOCK),
        (at::ICACHEBSIZE, CACHE_BLOCK),
        (at::UCACHEBSIZE, 0),
        (at::SECURE, 0),
        (at::RANDOM, random_addr),
        (at::EXECFN, execfn_addr),
    ];
    let mut words: Vec<u64> = Vec::new();
    words.push(argv.len() as u64);
    words.extend(&arg_addrs);
    words.push(0);
    words.extend(&env_addrs);
    words.push(0);
    for (k, v) in auxv {
        words.push(k);
        words.push(v);
    }
    words.push(at::NULL);
    words.push(0);
    let sp = (top - 8 * words.len() as u64) & !15;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    mem.poke(sp, &bytes).map_err(|_| TOO_BIG)?;
    Ok(Loaded {
        entry: img.entry,
        sp,
        brk: img.end,
        image: (img.start, img.end),
    })
}
