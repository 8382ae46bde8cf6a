//! The flattened device tree the guest boots with.
//!
//! Without firmware, the tree must already have the shape Linux's prom_init would have left
//! (RTAS instantiated, initrd and console in `/chosen`, a memory reservation map), and it
//! follows QEMU 7.2's pseries tree for the same machine wherever Linux or the bundled guest
//! reads it: node names, CPU numbering (server = vCPU index, one thread per core), page-size
//! and pa-features tables, RTAS tokens, the vty at 0x71000000. The intended differences are
//! listed in `tests/pseries_fdt.rs`.

use super::console::{VTY_IRQ, VTY_REG};
use super::rtas::{self, Service};
use super::{MAX_CPUS, server_of};
use vm_fdt::{FdtReserveEntry, FdtWriter};

/// PVR of POWER8 DD2.0 (QEMU's `power8_v2.0`).
pub const POWER8_PVR: u32 = 0x004d_0200;
/// Timebase frequency (as QEMU's TCG pseries).
pub const TIMEBASE_HZ: u32 = 512_000_000;
/// Nominal core clock.
pub const CLOCK_HZ: u32 = 1_000_000_000;
/// Cache block and line size; `dcbz` clears exactly this much.
pub const CACHE_LINE: u32 = 128;
/// L1 size advertised (QEMU's value).
pub const L1_SIZE: u32 = 0x8000;
/// phandle of the XICS node (QEMU's).
pub const PHANDLE_XICP: u32 = 0x1111;

/// Base page sizes and their encodings: 4K (SLB 0, PTE 0) and 64K (SLB L|LP=01, PTE 1),
/// exactly QEMU 7.2's list for POWER8 with its default 64K maximum page size.
pub const SEGMENT_PAGE_SIZES: [u32; 10] = [12, 0x000, 1, 12, 0, 16, 0x110, 1, 16, 1];
/// 256 MB and 1 TB segments.
pub const PROCESSOR_SEGMENT_SIZES: [u32; 4] = [28, 40, u32::MAX, u32::MAX];

/// `ibm,pa-features` of POWER8 as QEMU 7.2 gives it: 2-byte header (length 24), MMU, FPU,
/// SLB, run latch (CTRL), NX, CI large pages, real-mode LE, … and byte 22 (TM) clear, since
/// transactional memory is not emulated.
pub const PA_FEATURES: [u8; 26] = [
    0x18, 0x00, 0xf6, 0x3f, 0xc7, 0xc0, 0x80, 0xf0, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x80, 0x00, 0x80, 0x00, 0x80, 0x00, 0x00, 0x00,
];

/// The hypercall sets we implement (`ibm,hypertas-functions`), in QEMU's order. "hcall-bulk"
/// is offered only when H_BULK_REMOVE is. (QEMU's hcall-tce, -vio, -multi-tce belong to
/// devices we do not have; hcall-hpt-resize and hcall-watchdog: see the hypercall README.)
pub fn hypertas_functions(bulk_remove: bool) -> Vec<&'static str> {
    let mut v = vec![
        "hcall-pft",
        "hcall-term",
        "hcall-dabr",
        "hcall-interrupt",
        "hcall-splpar",
        "hcall-join",
    ];
    if bulk_remove {
        v.push("hcall-bulk");
    }
    v.extend([
        "hcall-set-mode",
        "hcall-sprg0",
        "hcall-copy",
        "hcall-debug",
        "hcall-vphn",
    ]);
    v
}

/// log2 of the HPT size in bytes for `ram` bytes of RAM: 1/128 of RAM rounded up to a power
/// of two, at least 256 KiB (QEMU's choice; `ibm,pft-size`).
pub fn hpt_shift(ram: u64) -> u32 {
    crate::mmu::Hpt::shift_for_ram_size(ram)
}

/// What the tree describes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdtParams {
    pub ncpus: usize,
    pub ram_bytes: u64,
    pub bootargs: String,
    /// `[start, end)` of the initrd.
    pub initrd: Option<(u64, u64)>,
    /// Load address and size of the kernel (reserved, as QEMU does).
    pub kernel: Option<(u64, u64)>,
    /// Where the RTAS blob lies.
    pub rtas_base: u64,
    /// Where the tree itself will be written (it reserves itself).
    pub fdt_addr: u64,
    pub rng_seed: [u8; 32],
    pub bulk_remove: bool,
    /// vCPU that boots (its server number goes into the header).
    pub boot_cpu: usize,
}

/// The device tree could not be built (a bug or absurd parameters, never guest input).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdtError(pub String);

impl std::fmt::Display for FdtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "building the device tree: {}", self.0)
    }
}

impl std::error::Error for FdtError {}

impl From<vm_fdt::Error> for FdtError {
    fn from(e: vm_fdt::Error) -> Self {
        FdtError(e.to_string())
    }
}

/// Builds the blob. It reserves its own bytes in the memory reservation map, so it is built
/// twice: the second time with its final size (the map has a fixed number of entries).
pub fn build(p: &FdtParams) -> Result<Vec<u8>, FdtError> {
    if p.ncpus == 0 || p.ncpus > MAX_CPUS || p.boot_cpu >= p.ncpus {
        return Err(FdtError(format!(
            "{} CPUs, boot CPU {}",
            p.ncpus, p.boot_cpu
        )));
    }
    let first = build_with_size(p, 1)?;
    let blob = build_with_size(p, first.len() as u64)?;
    debug_assert_eq!(first.len(), blob.len());
    Ok(blob)
}

fn build_with_size(p: &FdtParams, fdt_size: u64) -> Result<Vec<u8>, FdtError> {
    let mut rsv = Vec::new();
    if let Some((addr, size)) = p.kernel
        && size > 0
    {
        rsv.push(FdtReserveEntry::new(addr, size)?);
    }
    if let Some((start, end)) = p.initrd
        && end > start
    {
        rsv.push(FdtReserveEntry::new(start, end - start)?);
    }
    rsv.push(FdtReserveEntry::new(p.rtas_base, rtas::BLOB_SIZE as u64)?);
    rsv.push(FdtReserveEntry::new(p.fdt_addr, fdt_size)?);

    let mut w = FdtWriter::new_with_mem_reserv(&rsv)?;
    w.set_boot_cpuid_phys(server_of(p.boot_cpu));
    let root = w.begin_node("")?;
    w.property_string("device_type", "chrp")?;
    w.property_string("model", "IBM pSeries (emulated by ppc64emu)")?;
    w.property_string("compatible", "qemu,pseries")?;
    w.property_u32("#address-cells", 2)?;
    w.property_u32("#size-cells", 2)?;

    chosen(&mut w, p)?;
    rtas_node(&mut w, p)?;
    cpus(&mut w, p)?;

    let vdev = w.begin_node("vdevice")?;
    w.property_string("device_type", "vdevice")?;
    w.property_string("compatible", "IBM,vdevice")?;
    w.property_u32("#address-cells", 1)?;
    w.property_u32("#size-cells", 0)?;
    w.property_u32("#interrupt-cells", 2)?;
    w.property_null("interrupt-controller")?;
    let vty = w.begin_node(&format!("vty@{VTY_REG:x}"))?;
    w.property_string("device_type", "serial")?;
    w.property_string("compatible", "hvterm1")?;
    w.property_u32("reg", VTY_REG)?;
    // Edge (cell 0): the source is message-signalled.
    w.property_array_u32("interrupts", &[VTY_IRQ, 0])?;
    w.end_node(vty)?;
    w.end_node(vdev)?;

    let mem = w.begin_node("memory@0")?;
    w.property_string("device_type", "memory")?;
    w.property_array_u64("reg", &[0, p.ram_bytes])?;
    w.end_node(mem)?;

    let icp = w.begin_node("interrupt-controller")?;
    w.property_string("device_type", "PowerPC-External-Interrupt-Presentation")?;
    w.property_string("compatible", "IBM,ppc-xicp")?;
    w.property_null("interrupt-controller")?;
    w.property_array_u32("ibm,interrupt-server-ranges", &[0, p.ncpus as u32])?;
    w.property_u32("#interrupt-cells", 2)?;
    w.property_u32("linux,phandle", PHANDLE_XICP)?;
    w.property_phandle(PHANDLE_XICP)?;
    w.end_node(icp)?;

    w.end_node(root)?;
    Ok(w.finish()?)
}

fn chosen(w: &mut FdtWriter, p: &FdtParams) -> Result<(), FdtError> {
    let n = w.begin_node("chosen")?;
    w.property_string("bootargs", &p.bootargs)?;
    let vty = format!("/vdevice/vty@{VTY_REG:x}");
    w.property_string("stdout-path", &vty)?;
    w.property_string("linux,stdout-path", &vty)?;
    if let Some((start, end)) = p.initrd {
        // 32-bit cells, as QEMU writes them; the loader keeps the initrd below 2 GiB.
        w.property_u32("linux,initrd-start", start as u32)?;
        w.property_u32("linux,initrd-end", end as u32)?;
    }
    // What CAS would have negotiated: nothing (hash MMU, XICS), as QEMU before CAS.
    w.property("ibm,architecture-vec-5", &[0, 0])?;
    w.property("rng-seed", &p.rng_seed)?;
    w.end_node(n)?;
    Ok(())
}

fn rtas_node(w: &mut FdtWriter, p: &FdtParams) -> Result<(), FdtError> {
    let n = w.begin_node("rtas")?;
    let funcs: Vec<String> = hypertas_functions(p.bulk_remove)
        .into_iter()
        .map(String::from)
        .collect();
    w.property_string_list("ibm,hypertas-functions", funcs)?;
    w.property_u32("linux,rtas-base", p.rtas_base as u32)?;
    w.property_u32("linux,rtas-entry", p.rtas_base as u32)?;
    w.property_u32("rtas-size", rtas::BLOB_SIZE)?;
    w.property_u32("rtas-error-log-max", 2048)?;
    // Linux calls ibm,os-term on a panic only when this is present.
    w.property_null("ibm,extended-os-term")?;
    w.property_array_u32("ibm,lrdr-capacity", &[0, 0, 0, 0x1000_0000, p.ncpus as u32])?;
    for s in Service::ALL {
        w.property_u32(s.name(), s.token())?;
    }
    w.end_node(n)?;
    Ok(())
}

fn cpus(w: &mut FdtWriter, p: &FdtParams) -> Result<(), FdtError> {
    let n = w.begin_node("cpus")?;
    w.property_u32("#address-cells", 1)?;
    w.property_u32("#size-cells", 0)?;
    let pft = hpt_shift(p.ram_bytes);
    for cpu in 0..p.ncpus {
        let id = server_of(cpu);
        let c = w.begin_node(&format!("PowerPC,POWER8@{id:x}"))?;
        w.property_string("device_type", "cpu")?;
        w.property_u32("reg", id)?;
        w.property_u32("cpu-version", POWER8_PVR)?;
        w.property_u32("d-cache-block-size", CACHE_LINE)?;
        w.property_u32("d-cache-line-size", CACHE_LINE)?;
        w.property_u32("i-cache-block-size", CACHE_LINE)?;
        w.property_u32("i-cache-line-size", CACHE_LINE)?;
        w.property_u32("d-cache-size", L1_SIZE)?;
        w.property_u32("i-cache-size", L1_SIZE)?;
        w.property_u32("timebase-frequency", TIMEBASE_HZ)?;
        w.property_u32("clock-frequency", CLOCK_HZ)?;
        w.property_u32("slb-size", crate::cpu::SLB_SIZE as u32)?;
        w.property_u32("ibm,slb-size", crate::cpu::SLB_SIZE as u32)?;
        w.property_string("status", "okay")?;
        w.property_null("64-bit")?;
        // VMX and VSX.
        w.property_u32("ibm,vmx", 2)?;
        w.property_array_u32("ibm,processor-segment-sizes", &PROCESSOR_SEGMENT_SIZES)?;
        w.property_array_u32("ibm,segment-page-sizes", &SEGMENT_PAGE_SIZES)?;
        w.property("ibm,pa-features", &PA_FEATURES)?;
        w.property_u32("ibm,chip-id", 0)?;
        w.property_array_u32("ibm,pft-size", &[0, pft])?;
        w.property_array_u32("ibm,ppc-interrupt-server#s", &[id])?;
        w.property_array_u32("ibm,ppc-interrupt-gserver#s", &[id, 0])?;
        w.end_node(c)?;
    }
    w.end_node(n)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn params(ncpus: usize) -> FdtParams {
        FdtParams {
            ncpus,
            ram_bytes: 1 << 30,
            bootargs: "jobs=2 hello".into(),
            initrd: Some((0x1000_0000, 0x1000_1234)),
            kernel: Some((0x40_0000, 0x2668e0)),
            rtas_base: 0x3fef_0000,
            fdt_addr: 0x3ff0_0000,
            rng_seed: [7; 32],
            bulk_remove: true,
            boot_cpu: 0,
        }
    }

    #[test]
    fn hpt_size_follows_ram() {
        // What qemu-system-ppc64 7.2 -M pseries,dumpdtb=F -cpu power8 -m … writes.
        assert_eq!(hpt_shift(1 << 30), 23, "QEMU: 1 GiB → ibm,pft-size 0x17");
        assert_eq!(hpt_shift(2 << 30), 24, "QEMU: 2 GiB → ibm,pft-size 0x18");
        assert_eq!(hpt_shift(4 << 30), 25, "QEMU: 4 GiB → ibm,pft-size 0x19");
        assert_eq!(hpt_shift(16 << 30), 27, "QEMU: 16 GiB → ibm,pft-size 0x1b");
        assert_eq!(hpt_shift(512 << 20), 22);
        assert_eq!(hpt_shift(3 << 30), 25, "rounded up to a power of two");
        assert_eq!(hpt_shift(16 << 20), 18, "minimum architected size");
    }

    #[test]
    fn header_and_reservations() {
        let p = params(3);
        let blob = build(&p).unwrap();
        let fdt = ::fdt::Fdt::new(&blob).unwrap();
        assert_eq!(
            u32::from_be_bytes(blob[20..24].try_into().unwrap()),
            17,
            "version"
        );
        assert_eq!(
            u32::from_be_bytes(blob[28..32].try_into().unwrap()),
            0,
            "boot_cpuid_phys"
        );
        let rsv: Vec<(usize, usize)> = fdt
            .memory_reservations()
            .map(|r| (r.address() as usize, r.size()))
            .collect();
        assert_eq!(
            rsv,
            vec![
                (0x40_0000, 0x2668e0),
                (0x1000_0000, 0x1234),
                (0x3fef_0000, rtas::BLOB_SIZE as usize),
                (0x3ff0_0000, blob.len())
            ]
        );
        let mut q = params(3);
        q.boot_cpu = 2;
        let blob = build(&q).unwrap();
        assert_eq!(u32::from_be_bytes(blob[28..32].try_into().unwrap()), 2);
    }

    #[test]
    fn bad_parameters_are_errors() {
        let mut p = params(1);
        p.boot_cpu = 1;
        assert!(build(&p).is_err());
        p.ncpus = 0;
        assert!(build(&p).is_err());
        let mut p = params(1);
        p.initrd = Some((0x3ff0_0000, 0x3ff0_1000));
        assert!(build(&p).is_err(), "overlapping reservations");
    }
}
