//! Hypercalls (`sc 1`): the sPAPR hypervisor interface of the machine.
//!
//! Convention (PAPR): r3 = opcode, r4.. = arguments; on return r3 = status, r4.. = outputs.
//! [`hypercalls!`] below is the one table of them: opcode, report name and handler (every
//! handler runs under the BQL, docs/locking.md). The opcode constants, [`HcallKind`] (with `ALL`, `from_opcode`, `name`), the
//! per-kind counters and the dispatch are derived from it. The dispatcher only touches the
//! devices, the calling vCPU's registers, guest memory and the machine through
//! [`MachineEffects`]. Return codes are in [`crate::papr`]. Every hypercall QEMU 7.2 offers a
//! POWER8 pseries guest, with what we do for it, is listed in `README.md` beside this file.

use super::console::{self, MAX_CHARS, VTY_REG};
use super::effects::{MachineEffects, PhysMemory};
use super::rtas::{self, RtasContext, RtasOutcome};
use super::{PseriesDevices, VpaState};
use crate::cpu::{CpuState, msr};
use crate::mmu::hpt::{H_ZERO_PAGE, HcallResult, Hpt};
pub use crate::papr::*;
use crate::softmmu::GuestRam;
use std::sync::Arc;

/// One row of the table.
pub struct HcallDef {
    pub opcode: u64,
    /// Report key: the PAPR name in lower case (`h_enter`, `h_bulk_remove`, …).
    pub name: &'static str,
    handler: fn(&mut Call<'_>) -> i64,
}

/// Declares the hypercall table: `Kind CONST = opcode, "name", handler;`.
macro_rules! hypercalls {
    ($($(#[$doc:meta])* $kind:ident $konst:ident = $op:expr, $name:literal, $handler:path;)*) => {
        $($(#[$doc])* pub const $konst: u64 = $op;)*

        /// Hypercalls counted per kind (the run report shows them), in table order.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum HcallKind {
            $($kind,)*
            /// Anything else (answered H_FUNCTION).
            Other,
        }

        /// The table, indexed by `HcallKind as usize`.
        static TABLE: &[HcallDef] = &[$(HcallDef { opcode: $op, name: $name, handler: $handler },)*];

        impl HcallKind {
            pub const ALL: &'static [HcallKind] = &[$(HcallKind::$kind,)* HcallKind::Other];

            pub fn from_opcode(op: u64) -> HcallKind {
                match op {
                    $($konst => HcallKind::$kind,)*
                    _ => HcallKind::Other,
                }
            }
        }
    };
}

hypercalls! {
    // The first eighteen in the order the run report has always listed them.
    Enter H_ENTER = 0x08, "h_enter", hpt_enter;
    Remove H_REMOVE = 0x04, "h_remove", hpt_remove;
    Read H_READ = 0x0c, "h_read", hpt_read;
    Protect H_PROTECT = 0x18, "h_protect", hpt_protect;
    BulkRemove H_BULK_REMOVE = 0x124, "h_bulk_remove", hpt_bulk_remove;
    GetTermChar H_GET_TERM_CHAR = 0x54, "h_get_term_char", get_term_char;
    PutTermChar H_PUT_TERM_CHAR = 0x58, "h_put_term_char", put_term_char;
    Cede H_CEDE = 0xe0, "h_cede", cede;
    Confer H_CONFER = 0xe4, "h_confer", confer;
    Prod H_PROD = 0xe8, "h_prod", prod;
    SetMode H_SET_MODE = 0x31c, "h_set_mode", set_mode;
    RegisterVpa H_REGISTER_VPA = 0xdc, "h_register_vpa", register_vpa;
    GetCpuCharacteristics H_GET_CPU_CHARACTERISTICS = 0x1c8, "h_get_cpu_characteristics", cpu_characteristics;
    Xirr H_XIRR = 0x74, "h_xirr", xirr;
    Eoi H_EOI = 0x64, "h_eoi", eoi;
    Cppr H_CPPR = 0x68, "h_cppr", cppr;
    Ipi H_IPI = 0x6c, "h_ipi", ipi;
    /// RTAS through a hypercall (the number KVM and QEMU use; not PAPR).
    Rtas H_RTAS = 0xf000, "h_rtas", rtas_call;
    SetSprg0 H_SET_SPRG0 = 0x24, "h_set_sprg0", set_sprg0;
    SetDabr H_SET_DABR = 0x28, "h_set_dabr", set_dabr;
    SetXdabr H_SET_XDABR = 0x134, "h_set_xdabr", set_xdabr;
    PageInit H_PAGE_INIT = 0x2c, "h_page_init", page_init;
    LogicalCiLoad H_LOGICAL_CI_LOAD = 0x3c, "h_logical_ci_load", logical_load;
    LogicalCiStore H_LOGICAL_CI_STORE = 0x40, "h_logical_ci_store", logical_store;
    LogicalCacheLoad H_LOGICAL_CACHE_LOAD = 0x44, "h_logical_cache_load", logical_load;
    LogicalCacheStore H_LOGICAL_CACHE_STORE = 0x48, "h_logical_cache_store", logical_store;
    LogicalIcbi H_LOGICAL_ICBI = 0x4c, "h_logical_icbi", no_op;
    LogicalDcbf H_LOGICAL_DCBF = 0x50, "h_logical_dcbf", no_op;
    /// Copy or invert a range of guest memory (QEMU's, for SLOF; not PAPR).
    LogicalMemop H_LOGICAL_MEMOP = 0xf001, "h_logical_memop", logical_memop;
    Ipoll H_IPOLL = 0x70, "h_ipoll", ipoll;
    Join H_JOIN = 0x298, "h_join", join;
    SignalSysReset H_SIGNAL_SYS_RESET = 0x380, "h_signal_sys_reset", signal_sys_reset;
    HomeNodeAssociativity H_HOME_NODE_ASSOCIATIVITY = 0x2ec, "h_home_node_associativity", home_node_associativity;
}

impl HcallKind {
    fn def(self) -> Option<&'static HcallDef> {
        TABLE.get(self as usize)
    }

    /// Report key: the PAPR name in lower case; `other` for the rest.
    pub fn name(self) -> &'static str {
        self.def().map_or("other", |d| d.name)
    }

    /// The opcode (`None` for `Other`).
    pub fn opcode(self) -> Option<u64> {
        self.def().map(|d| d.opcode)
    }

    fn index(self) -> usize {
        self as usize
    }
}

// --- H_SET_MODE ---
pub const H_SET_MODE_RESOURCE_ADDR_TRANS_MODE: u64 = 3;
pub const H_SET_MODE_RESOURCE_LE: u64 = 4;

// --- H_REGISTER_VPA: the subfunction in flags bits 16-18 ---
pub const VPA_REGISTER_VPA: u64 = 1 << 45;
pub const VPA_REGISTER_DTL: u64 = 2 << 45;
pub const VPA_REGISTER_SLB_SHADOW: u64 = 3 << 45;
pub const VPA_DEREGISTER_VPA: u64 = 5 << 45;
pub const VPA_DEREGISTER_DTL: u64 = 6 << 45;
pub const VPA_DEREGISTER_SLB_SHADOW: u64 = 7 << 45;
/// Smallest VPA (struct lppaca) the hypervisor accepts.
pub const VPA_MIN_SIZE: u16 = 640;
/// Smallest dispatch trace log: one entry.
pub const DTL_MIN_SIZE: u32 = 48;
/// VPAs are cache-line aligned (`d-cache-block-size`).
const VPA_ALIGN: u64 = 128;
/// VPA byte 9 ("status"): bit 0x02 says the partition runs on shared processors. QEMU sets
/// it at registration (every vCPU is a thread the host schedules), and so do we.
pub const VPA_STATUS_OFFSET: u64 = 0x9;
pub const VPA_SHARED_PROC: u8 = 0x02;
/// VPA dispatch (yield) counter, big-endian u32: even while the vCPU is dispatched, odd
/// while it is not (ceded, conferred, joined). PAPR; Linux's `lppaca.yield_count`.
pub const VPA_DISPATCH_COUNTER: u64 = 0x100;

// --- H_PAGE_INIT flags (r4) ---
pub const H_ICACHE_INVALIDATE: u64 = 1 << (63 - 40);
pub const H_ICACHE_SYNCHRONIZE: u64 = 1 << (63 - 41);
pub const H_COPY_PAGE: u64 = 1 << (63 - 49);
const PAGE_INIT_FLAGS: u64 = H_ICACHE_INVALIDATE | H_ICACHE_SYNCHRONIZE | H_ZERO_PAGE | H_COPY_PAGE;
const PAGE_SIZE: u64 = 4096;

// --- H_SET_XDABR: DABRX ---
pub const DABRX_USER: u64 = 1;
pub const DABRX_KERNEL: u64 = 2;
pub const DABRX_HYPERVISOR: u64 = 4;

/// What the calling vCPU does after a hypercall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HcallOutcome {
    /// Go on at the instruction after `sc 1`.
    Continue,
    /// Halt until an interrupt the MSR lets in is pending or the vCPU is prodded
    /// ([`PseriesDevices::take_prod`]), then go on after `sc 1`: H_CEDE (which sets `MSR[EE]`),
    /// H_CONFER to itself and H_JOIN (with EE = 0: only a prod wakes it). The VPA dispatch
    /// counter is already odd; [`vpa_dispatched`] makes it even again on wake-up.
    Cede,
    /// RTAS stop-self: the vCPU is stopped until another one starts it with start-cpu.
    Stopped,
    /// power-off, reboot or os-term: the machine is going down; leave guest code.
    Shutdown,
}

/// The hash page table's side of the HPT hypercalls. The HPT is shared with the TLB-miss
/// walkers of every vCPU; these calls are made under the BQL.
pub trait HptHcalls: Send + Sync {
    fn enter(&self, flags: u64, ptex: u64, pteh: u64, ptel: u64) -> HcallResult;
    fn remove(&self, flags: u64, ptex: u64, avpn: u64) -> HcallResult;
    fn read(&self, flags: u64, ptex: u64) -> HcallResult;
    fn protect(&self, flags: u64, ptex: u64, avpn: u64) -> HcallResult;
    /// Up to four (tsh, tsl) request pairs in r4..r11; the responses replace them.
    fn bulk_remove(&self, args: &[u64; 8]) -> HcallResult;
}

/// The machine's hash page table over its RAM, as the HPT hypercalls reach it.
pub struct MachineHpt {
    pub hpt: Arc<Hpt>,
    pub ram: Arc<GuestRam>,
}

impl HptHcalls for MachineHpt {
    fn enter(&self, flags: u64, ptex: u64, pteh: u64, ptel: u64) -> HcallResult {
        self.hpt.h_enter(&self.ram, flags, ptex, pteh, ptel)
    }
    fn remove(&self, flags: u64, ptex: u64, avpn: u64) -> HcallResult {
        self.hpt.h_remove(flags, ptex, avpn)
    }
    fn read(&self, flags: u64, ptex: u64) -> HcallResult {
        self.hpt.h_read(flags, ptex)
    }
    fn protect(&self, flags: u64, ptex: u64, avpn: u64) -> HcallResult {
        self.hpt.h_protect(flags, ptex, avpn)
    }
    fn bulk_remove(&self, args: &[u64; 8]) -> HcallResult {
        self.hpt.h_bulk_remove(*args)
    }
}

/// Hypercall counts, kept per vCPU: one machine-wide counter, written under the BQL by every
/// vCPU at every hypercall, was a cache line that crossed the host's cores inside each
/// hypercall's hold.
#[derive(Clone, Debug)]
pub struct HcallStats {
    per_cpu: Vec<CpuHcallCounts>,
}

/// One vCPU's counts, on cache lines of their own.
#[derive(Clone, Debug)]
#[repr(align(64))]
struct CpuHcallCounts {
    counts: [u64; HcallKind::ALL.len()],
    /// TLB flushes of every vCPU requested by HPT hcalls.
    global_flushes: u64,
}

impl HcallStats {
    pub fn new(ncpus: usize) -> Self {
        Self {
            per_cpu: vec![
                CpuHcallCounts {
                    counts: [0; HcallKind::ALL.len()],
                    global_flushes: 0,
                };
                ncpus.max(1)
            ],
        }
    }

    fn record(&mut self, cpu: usize, k: HcallKind) {
        if let Some(c) = self.per_cpu.get_mut(cpu) {
            c.counts[k.index()] += 1;
        }
    }

    fn record_global_flush(&mut self, cpu: usize) {
        if let Some(c) = self.per_cpu.get_mut(cpu) {
            c.global_flushes += 1;
        }
    }

    pub fn count(&self, k: HcallKind) -> u64 {
        self.per_cpu.iter().map(|c| c.counts[k.index()]).sum()
    }

    pub fn total(&self) -> u64 {
        self.per_cpu.iter().flat_map(|c| c.counts.iter()).sum()
    }

    /// TLB flushes of every vCPU requested by HPT hcalls.
    pub fn global_flushes(&self) -> u64 {
        self.per_cpu.iter().map(|c| c.global_flushes).sum()
    }

    /// `(name, count)` of every kind, in a fixed order.
    pub fn all(&self) -> Vec<(&'static str, u64)> {
        HcallKind::ALL
            .iter()
            .map(|k| (k.name(), self.count(*k)))
            .collect()
    }
}

/// One hypercall in progress: what its handler reads and writes.
pub struct Call<'a> {
    dev: &'a mut PseriesDevices,
    cpu: usize,
    st: &'a mut CpuState,
    mem: &'a dyn PhysMemory,
    fx: &'a mut dyn MachineEffects,
    args: [u64; 9],
    out: [u64; 8],
    nout: usize,
    outcome: HcallOutcome,
}

impl Call<'_> {
    fn a(&self, i: usize) -> u64 {
        self.args[i]
    }

    /// Sets the outputs r4, r5, …
    fn output(&mut self, vals: &[u64]) {
        self.out[..vals.len()].copy_from_slice(vals);
        self.nout = vals.len();
    }

    /// An HPT hypercall's result: outputs, and the global flush it asks for.
    fn hpt_result(&mut self, r: HcallResult) -> i64 {
        if let Some(own) = r.flush_tlbs {
            self.dev.hcall_stats.record_global_flush(self.cpu);
            self.fx.flush_all_tlbs(own);
        }
        self.output(r.outputs());
        r.ret
    }

    /// Halts the caller until it is prodded (or an interrupt the MSR lets in arrives).
    fn halt(&mut self) {
        self.outcome = HcallOutcome::Cede;
        vpa_preempted(self.mem, self.dev.vpa[self.cpu].vpa);
    }
}

/// Handles the hypercall the vCPU `cpu` (whose registers are `st`) just made with `sc 1`.
pub fn hcall(
    dev: &mut PseriesDevices,
    cpu: usize,
    st: &mut CpuState,
    mem: &dyn PhysMemory,
    fx: &mut dyn MachineEffects,
) -> HcallOutcome {
    let kind = HcallKind::from_opcode(st.gpr[3]);
    dev.hcall_stats.record(cpu, kind);
    let args: [u64; 9] = st.gpr[4..13].try_into().unwrap();
    let mut c = Call {
        dev,
        cpu,
        st,
        mem,
        fx,
        args,
        out: [0; 8],
        nout: 0,
        outcome: HcallOutcome::Continue,
    };
    let ret = kind.def().map_or(H_FUNCTION, |d| (d.handler)(&mut c));
    let (out, nout, outcome) = (c.out, c.nout, c.outcome);
    st.gpr[3] = ret as u64;
    st.gpr[4..4 + nout].copy_from_slice(&out[..nout]);
    outcome
}

// --- the handlers ---

fn with_hpt(c: &mut Call<'_>, f: impl FnOnce(&dyn HptHcalls, &[u64; 9]) -> HcallResult) -> i64 {
    // Borrowed, not cloned: the Arc's count is one cache line that every vCPU's hash-table
    // calls would otherwise write.
    let Some(hpt) = c.dev.hpt.as_deref() else {
        return H_FUNCTION;
    };
    let r = f(hpt, &c.args);
    c.hpt_result(r)
}

fn hpt_enter(c: &mut Call<'_>) -> i64 {
    with_hpt(c, |h, a| h.enter(a[0], a[1], a[2], a[3]))
}

fn hpt_remove(c: &mut Call<'_>) -> i64 {
    with_hpt(c, |h, a| h.remove(a[0], a[1], a[2]))
}

fn hpt_read(c: &mut Call<'_>) -> i64 {
    with_hpt(c, |h, a| h.read(a[0], a[1]))
}

fn hpt_protect(c: &mut Call<'_>) -> i64 {
    with_hpt(c, |h, a| h.protect(a[0], a[1], a[2]))
}

fn hpt_bulk_remove(c: &mut Call<'_>) -> i64 {
    with_hpt(c, |h, a| h.bulk_remove(a[..8].try_into().unwrap()))
}

/// The hvterm's terminal number: its `reg`, or 0, which QEMU (and guests written for it)
/// take to mean the default vty.
fn is_vty(termno: u64) -> bool {
    termno == VTY_REG as u64 || termno == 0
}

fn put_term_char(c: &mut Call<'_>) -> i64 {
    let (termno, len) = (c.a(0), c.a(1));
    if !is_vty(termno) || len > MAX_CHARS as u64 {
        return H_PARAMETER;
    }
    c.fx.console_write(&console::unpack_chars(c.a(2), c.a(3), len as usize));
    H_SUCCESS
}

fn get_term_char(c: &mut Call<'_>) -> i64 {
    if !is_vty(c.a(0)) {
        return H_PARAMETER;
    }
    let bytes = c.dev.hvterm.take_input();
    let (hi, lo) = console::pack_chars(&bytes);
    c.output(&[bytes.len() as u64, hi, lo]);
    H_SUCCESS
}

fn cede(c: &mut Call<'_>) -> i64 {
    c.st.msr |= msr::EE;
    if !c.dev.take_prod(c.cpu) {
        c.halt();
    }
    H_SUCCESS
}

/// Waits for a prod (H_CONFER to itself, H_JOIN): at once if one is pending.
fn wait_for_prod(c: &mut Call<'_>) -> i64 {
    if !c.dev.take_prod(c.cpu) {
        c.halt();
    }
    H_SUCCESS
}

/// H_CONFER(target, dispatch): give the rest of this dispatch to `target` (-1: to any). Every
/// vCPU has its own host thread, so there is nothing to hand over, except to itself: that
/// waits for a prod, as PAPR says.
fn confer(c: &mut Call<'_>) -> i64 {
    let target = c.a(0);
    if target == u64::MAX {
        return H_SUCCESS;
    }
    match c.dev.cpu_of_server(target) {
        None => H_PARAMETER,
        Some(t) if t == c.cpu => wait_for_prod(c),
        Some(_) => H_SUCCESS,
    }
}

fn prod(c: &mut Call<'_>) -> i64 {
    match c.dev.cpu_of_server(c.a(0)) {
        Some(t) => {
            c.dev.prod[t] = true;
            c.dev.joined[t] = false;
            c.fx.prod(t);
            H_SUCCESS
        }
        None => H_PARAMETER,
    }
}

/// H_JOIN: with EE = 0, wait for a prod; the last vCPU of the partition to join (every other
/// one joined or stopped) gets H_CONTINUE instead.
fn join(c: &mut Call<'_>) -> i64 {
    if c.st.msr & msr::EE != 0 {
        return H_BAD_MODE;
    }
    if c.dev.take_prod(c.cpu) {
        return H_SUCCESS;
    }
    let me = c.cpu;
    if (0..c.dev.ncpus)
        .filter(|&j| j != me)
        .all(|j| c.dev.joined[j] || c.fx.is_stopped(j))
    {
        return H_CONTINUE;
    }
    c.dev.joined[me] = true;
    c.halt();
    H_SUCCESS
}

fn set_mode(c: &mut Call<'_>) -> i64 {
    let (mflags, resource, value1, value2) = (c.a(0), c.a(1), c.a(2), c.a(3));
    match resource {
        H_SET_MODE_RESOURCE_LE | H_SET_MODE_RESOURCE_ADDR_TRANS_MODE if value1 != 0 => H_P3,
        H_SET_MODE_RESOURCE_LE | H_SET_MODE_RESOURCE_ADDR_TRANS_MODE if value2 != 0 => H_P4,
        H_SET_MODE_RESOURCE_LE => match mflags {
            0 | 1 => {
                c.dev.interrupt_le = mflags == 1;
                c.fx.set_interrupt_little_endian(mflags == 1);
                H_SUCCESS
            }
            _ => H_UNSUPPORTED_FLAG,
        },
        // Interrupts are always delivered with relocation off (AIL 0): accept a request
        // for that, and answer other modes as QEMU does when AIL 3 is not offered.
        H_SET_MODE_RESOURCE_ADDR_TRANS_MODE => {
            if mflags == 0 {
                H_SUCCESS
            } else {
                H_UNSUPPORTED_FLAG
            }
        }
        _ => H_P2,
    }
}

fn cpu_characteristics(c: &mut Call<'_>) -> i64 {
    // No speculation-mitigation needs: else Linux flushes the L1 in software on every
    // kernel entry and exit, which under emulation dominates everything.
    c.output(&[0, 0]);
    H_SUCCESS
}

fn xirr(c: &mut Call<'_>) -> i64 {
    let x = c.dev.xics.accept(c.cpu, c.fx);
    c.output(&[x as u64]);
    H_SUCCESS
}

fn eoi(c: &mut Call<'_>) -> i64 {
    c.dev.xics.eoi(c.cpu, c.a(0) as u32, c.fx);
    H_SUCCESS
}

fn cppr(c: &mut Call<'_>) -> i64 {
    c.dev.xics.set_cppr(c.cpu, c.a(0) as u8, c.fx);
    H_SUCCESS
}

fn ipi(c: &mut Call<'_>) -> i64 {
    match c.dev.cpu_of_server(c.a(0)) {
        Some(t) => {
            c.dev.xics.set_mfrr(t, c.a(1) as u8, c.fx);
            H_SUCCESS
        }
        None => H_PARAMETER,
    }
}

/// H_IPOLL(server): that ICP's XIRR (without accepting) and MFRR.
fn ipoll(c: &mut Call<'_>) -> i64 {
    match c.dev.cpu_of_server(c.a(0)) {
        Some(t) => {
            let icp = c.dev.xics.icp(t);
            let (x, m) = (icp.xirr() as u64, icp.mfrr() as u64);
            c.output(&[x, m]);
            H_SUCCESS
        }
        None => H_PARAMETER,
    }
}

fn rtas_call(c: &mut Call<'_>) -> i64 {
    let ctx = RtasContext {
        xics: &mut c.dev.xics,
        stats: &mut c.dev.rtas_stats,
        clock: &mut c.dev.rtc,
        mem: c.mem,
        fx: c.fx,
    };
    let (ret, o) = rtas::call(ctx, c.cpu, c.args[0]);
    c.outcome = match o {
        RtasOutcome::Continue => HcallOutcome::Continue,
        RtasOutcome::Stopped => HcallOutcome::Stopped,
        RtasOutcome::Shutdown => HcallOutcome::Shutdown,
    };
    ret
}

fn set_sprg0(c: &mut Call<'_>) -> i64 {
    c.st.sprg[0] = c.a(0);
    H_SUCCESS
}

/// H_SET_DABR(dabr): POWER8 has DABRX, which the hypervisor sets to "problem and privileged
/// state" (QEMU's choice too). The values are kept; data address breakpoints do not fire.
fn set_dabr(c: &mut Call<'_>) -> i64 {
    c.st.dabr = c.a(0);
    c.st.dabrx = DABRX_USER | DABRX_KERNEL;
    H_SUCCESS
}

/// H_SET_XDABR(dabr, dabrx): DABRX must name problem and/or privileged state, never the
/// hypervisor, and have no other bits.
fn set_xdabr(c: &mut Call<'_>) -> i64 {
    let dabrx = c.a(1);
    if dabrx & !0xf != 0
        || dabrx & DABRX_HYPERVISOR != 0
        || dabrx & (DABRX_USER | DABRX_KERNEL) == 0
    {
        return H_PARAMETER;
    }
    c.st.dabr = c.a(0);
    c.st.dabrx = dabrx;
    H_SUCCESS
}

/// Whether `pa..pa+4K` is a 4K-aligned page of guest RAM.
fn ram_page(mem: &dyn PhysMemory, pa: u64) -> bool {
    let mut b = [0u8; 1];
    pa.is_multiple_of(PAGE_SIZE)
        && mem.read(pa, &mut b).is_ok()
        && mem.read(pa + PAGE_SIZE - 1, &mut b).is_ok()
}

/// H_PAGE_INIT(flags, dst, src): copy the page at `src` to `dst` (H_COPY_PAGE), else zero
/// it (H_ZERO_PAGE); the i-cache flags make the page's old instructions go (the JIT drops
/// its translations of a page written here; a flush without a write drops them too).
fn page_init(c: &mut Call<'_>) -> i64 {
    let (flags, dst, src) = (c.a(0), c.a(1), c.a(2));
    if flags & !PAGE_INIT_FLAGS != 0 || !ram_page(c.mem, dst) {
        return H_PARAMETER;
    }
    let len = PAGE_SIZE as usize;
    let r = if flags & H_COPY_PAGE != 0 {
        if !ram_page(c.mem, src) {
            return H_PARAMETER;
        }
        c.mem.copy(dst, src, len)
    } else if flags & H_ZERO_PAGE != 0 {
        c.mem.fill(dst, len, 0)
    } else if flags & (H_ICACHE_INVALIDATE | H_ICACHE_SYNCHRONIZE) != 0 {
        // Rewriting the page unchanged is what drops translated code of it.
        c.mem.copy(dst, dst, len)
    } else {
        return H_SUCCESS;
    };
    if r.is_err() { H_PARAMETER } else { H_SUCCESS }
}

/// H_LOGICAL_{CI,CACHE}_LOAD(size, addr): r4 = the big-endian value of 1, 2, 4 or 8 bytes.
fn logical_load(c: &mut Call<'_>) -> i64 {
    let (size, addr) = (c.a(0), c.a(1));
    if !matches!(size, 1 | 2 | 4 | 8) {
        return H_PARAMETER;
    }
    let mut b = [0u8; 8];
    if c.mem.read(addr, &mut b[8 - size as usize..]).is_err() {
        return H_PARAMETER;
    }
    c.output(&[u64::from_be_bytes(b)]);
    H_SUCCESS
}

/// H_LOGICAL_{CI,CACHE}_STORE(size, addr, value).
fn logical_store(c: &mut Call<'_>) -> i64 {
    let (size, addr, val) = (c.a(0), c.a(1), c.a(2));
    if !matches!(size, 1 | 2 | 4 | 8) {
        return H_PARAMETER;
    }
    let b = val.to_be_bytes();
    if c.mem.write(addr, &b[8 - size as usize..]).is_err() {
        H_PARAMETER
    } else {
        H_SUCCESS
    }
}

/// H_LOGICAL_ICBI, H_LOGICAL_DCBF: nothing to do on an emulated cache.
fn no_op(_: &mut Call<'_>) -> i64 {
    H_SUCCESS
}

/// H_LOGICAL_MEMOP(dst, src, esize, count, op): `count` elements of `1 << esize` bytes from
/// `src` to `dst` (op 0), or their complement (op 1); overlapping ranges as `memmove`.
fn logical_memop(c: &mut Call<'_>) -> i64 {
    let (dst, src, esize, count, op) = (c.a(0), c.a(1), c.a(2), c.a(3), c.a(4));
    if count > 0x8000_0000 || esize > 3 || op > 1 {
        return H_PARAMETER;
    }
    let mask = (1u64 << esize) - 1;
    if dst & mask != 0 || src & mask != 0 {
        return H_PARAMETER;
    }
    let Some(len) = count.checked_shl(esize as u32).filter(|l| *l <= 1 << 32) else {
        return H_PARAMETER;
    };
    let done = if op == 0 {
        // Within guest memory, as a memmove: no buffer for the hold to allocate and fill.
        c.mem.copy(dst, src, len as usize)
    } else {
        let mut buf = vec![0u8; len as usize];
        c.mem.read(src, &mut buf).and_then(|()| {
            buf.iter_mut().for_each(|b| *b = !*b);
            c.mem.write(dst, &buf)
        })
    };
    if done.is_err() {
        H_PARAMETER
    } else {
        H_SUCCESS
    }
}

/// H_SIGNAL_SYS_RESET(target): a system reset interrupt on `target`, on every vCPU (-1) or on
/// every other one (-2).
fn signal_sys_reset(c: &mut Call<'_>) -> i64 {
    let target = c.a(0) as i64;
    let me = c.cpu;
    let targets: Vec<usize> = match target {
        -1 => (0..c.dev.ncpus).collect(),
        -2 => (0..c.dev.ncpus).filter(|&j| j != me).collect(),
        t if t < 0 => return H_PARAMETER,
        t => match c.dev.cpu_of_server(t as u64) {
            Some(j) => vec![j],
            None => return H_PARAMETER,
        },
    };
    for j in targets {
        c.fx.system_reset(j);
    }
    H_SUCCESS
}

/// H_HOME_NODE_ASSOCIATIVITY(flags = 1: a processor, procno): the associativity of its home
/// node, as in `ibm,associativity` (one node, 0), packed two 32-bit values per register.
fn home_node_associativity(c: &mut Call<'_>) -> i64 {
    if c.a(0) != 1 {
        return H_FUNCTION;
    }
    let procno = c.a(1);
    if c.dev.cpu_of_server(procno).is_none() {
        return H_P2;
    }
    let pair = |a: u64, b: u64| (a << 32) | (b & 0xffff_ffff);
    c.output(&[
        pair(0, 0),
        pair(0, 0),
        pair(procno, u64::MAX),
        u64::MAX,
        u64::MAX,
        u64::MAX,
    ]);
    H_SUCCESS
}

/// Reads the VPA dispatch counter at `vpa` (0: none registered) and makes it odd (`odd`) or
/// even by adding one if needed.
fn vpa_bump(mem: &dyn PhysMemory, vpa: u64, odd: bool) {
    if vpa == 0 {
        return;
    }
    let at = vpa + VPA_DISPATCH_COUNTER;
    if let Ok(n) = mem.read_u32_be(at)
        && (n & 1 == 1) != odd
    {
        let _ = mem.write_u32_be(at, n.wrapping_add(1));
    }
}

/// The vCPU whose VPA is at `vpa` stops being dispatched (cede, confer, join).
pub fn vpa_preempted(mem: &dyn PhysMemory, vpa: u64) {
    vpa_bump(mem, vpa, true);
}

/// The vCPU whose VPA is at `vpa` runs again.
pub fn vpa_dispatched(mem: &dyn PhysMemory, vpa: u64) {
    vpa_bump(mem, vpa, false);
}

fn register_vpa(c: &mut Call<'_>) -> i64 {
    let (flags, procno, addr) = (c.a(0), c.a(1), c.a(2));
    let mem = c.mem;
    let Some(t) = c.dev.cpu_of_server(procno) else {
        return H_PARAMETER;
    };
    let v: &mut VpaState = &mut c.dev.vpa[t];
    let crosses_page = |size: u64| addr / PAGE_SIZE != (addr + size - 1) / PAGE_SIZE;
    match flags {
        VPA_REGISTER_VPA => {
            if addr == 0 {
                return H_HARDWARE;
            }
            if !addr.is_multiple_of(VPA_ALIGN) {
                return H_PARAMETER;
            }
            let mut size = [0u8; 2];
            if mem.read(addr + 4, &mut size).is_err() {
                return H_PARAMETER;
            }
            let size = u16::from_be_bytes(size);
            if size < VPA_MIN_SIZE || crosses_page(size as u64) {
                return H_PARAMETER;
            }
            v.vpa = addr;
            let mut status = [0u8; 1];
            if mem.read(addr + VPA_STATUS_OFFSET, &mut status).is_ok() {
                let _ = mem.write(addr + VPA_STATUS_OFFSET, &[status[0] | VPA_SHARED_PROC]);
            }
            H_SUCCESS
        }
        VPA_REGISTER_DTL | VPA_REGISTER_SLB_SHADOW => {
            if addr == 0 {
                return H_HARDWARE;
            }
            let Ok(size) = mem.read_u32_be(addr + 4) else {
                return H_PARAMETER;
            };
            let (min, page_bound) = if flags == VPA_REGISTER_DTL {
                (DTL_MIN_SIZE, false)
            } else {
                (8, true)
            };
            if size < min || (page_bound && crosses_page(size as u64)) {
                return H_PARAMETER;
            }
            if v.vpa == 0 {
                return H_RESOURCE;
            }
            if flags == VPA_REGISTER_DTL {
                v.dtl = addr;
            } else {
                v.slb_shadow = addr;
            }
            H_SUCCESS
        }
        VPA_DEREGISTER_VPA => {
            if v.dtl != 0 || v.slb_shadow != 0 {
                return H_RESOURCE;
            }
            v.vpa = 0;
            H_SUCCESS
        }
        VPA_DEREGISTER_DTL => {
            v.dtl = 0;
            H_SUCCESS
        }
        VPA_DEREGISTER_SLB_SHADOW => {
            v.slb_shadow = 0;
            H_SUCCESS
        }
        _ => H_PARAMETER,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::pseries::effects::{Effect, Recorder, VecMemory};
    use crate::machine::pseries::rtas::Service;
    use crate::mmu::hpt::Invalidated;
    use std::sync::{Arc, Mutex};

    struct M {
        dev: PseriesDevices,
        st: Vec<CpuState>,
        fx: Recorder,
        mem: VecMemory,
    }

    impl M {
        fn new(n: usize) -> Self {
            let mut st = vec![CpuState::new(); n];
            for (i, s) in st.iter_mut().enumerate() {
                s.pir = i as u64;
            }
            Self {
                dev: PseriesDevices::new(n),
                st,
                fx: Recorder::new(n),
                mem: VecMemory::new(0x20000),
            }
        }

        /// Makes hcall `op` with `args` on `cpu`; returns (r3 as i64, r4.., outcome).
        fn call(&mut self, cpu: usize, op: u64, args: &[u64]) -> (i64, [u64; 8], HcallOutcome) {
            let st = &mut self.st[cpu];
            st.gpr[3] = op;
            for i in 0..9 {
                st.gpr[4 + i] = args.get(i).copied().unwrap_or(0xbad0_0000 + i as u64);
            }
            let o = hcall(&mut self.dev, cpu, st, &self.mem, &mut self.fx);
            let mut out = [0; 8];
            out.copy_from_slice(&st.gpr[4..12]);
            (st.gpr[3] as i64, out, o)
        }

        fn rc(&mut self, cpu: usize, op: u64, args: &[u64]) -> i64 {
            self.call(cpu, op, args).0
        }
    }

    #[test]
    fn unknown_hcalls_are_h_function() {
        let mut m = M::new(1);
        for op in [0x0, 0x10, 0x2fc, 0x37c, 0xf004, u64::MAX] {
            assert_eq!(m.rc(0, op, &[]), H_FUNCTION, "opcode {op:#x}");
        }
        assert_eq!(m.dev.hcall_stats.count(HcallKind::Other), 6);
        // Without an HPT the MMU hcalls are not available either.
        assert_eq!(m.rc(0, H_ENTER, &[0, 0, 0, 0]), H_FUNCTION);
    }

    #[test]
    fn console_hcalls() {
        let mut m = M::new(1);
        let (hi, lo) = console::pack_chars(b"Hello, world!\r\n");
        assert_eq!(
            m.rc(0, H_PUT_TERM_CHAR, &[VTY_REG as u64, 15, hi, lo]),
            H_SUCCESS
        );
        assert_eq!(m.fx.console, b"Hello, world!\r\n");
        assert_eq!(
            m.rc(0, H_PUT_TERM_CHAR, &[VTY_REG as u64, 17, hi, lo]),
            H_PARAMETER
        );
        assert_eq!(
            m.rc(0, H_PUT_TERM_CHAR, &[0x3000_0000, 1, hi, lo]),
            H_PARAMETER
        );
        assert_eq!(
            m.rc(0, H_PUT_TERM_CHAR, &[VTY_REG as u64, 0, hi, lo]),
            H_SUCCESS
        );
        assert_eq!(m.fx.console.len(), 15);

        let (rc, out, _) = m.call(0, H_GET_TERM_CHAR, &[VTY_REG as u64]);
        assert_eq!((rc, out[0], out[1], out[2]), (H_SUCCESS, 0, 0, 0));
        m.dev.hvterm.push_input(b"ls -l\n");
        let (rc, out, _) = m.call(0, H_GET_TERM_CHAR, &[VTY_REG as u64]);
        assert_eq!(rc, H_SUCCESS);
        assert_eq!(
            console::unpack_chars(out[1], out[2], out[0] as usize),
            b"ls -l\n"
        );
        assert_eq!(m.rc(0, H_GET_TERM_CHAR, &[1]), H_PARAMETER);
    }

    #[test]
    fn cede_sets_ee_and_prod_wakes() {
        let mut m = M::new(2);
        m.st[0].msr &= !msr::EE;
        let (rc, _, o) = m.call(0, H_CEDE, &[]);
        assert_eq!((rc, o), (H_SUCCESS, HcallOutcome::Cede));
        assert_ne!(
            m.st[0].msr & msr::EE,
            0,
            "H_CEDE enables external interrupts"
        );

        assert_eq!(m.rc(1, H_PROD, &[0]), H_SUCCESS);
        assert_eq!(m.fx.take(), vec![Effect::Prod(0)]);
        assert!(m.dev.prod_pending(0));
        // A prod that arrived before the cede makes it return at once, once.
        let (_, _, o) = m.call(0, H_CEDE, &[]);
        assert_eq!(o, HcallOutcome::Continue);
        assert!(!m.dev.prod_pending(0));
        assert_eq!(m.call(0, H_CEDE, &[]).2, HcallOutcome::Cede);

        assert_eq!(m.rc(1, H_PROD, &[2]), H_PARAMETER);
        assert_eq!(m.rc(1, H_PROD, &[u64::MAX]), H_PARAMETER);
        assert!(m.fx.take().is_empty());
    }

    #[test]
    fn confer_is_a_no_op() {
        let mut m = M::new(2);
        assert_eq!(m.rc(0, H_CONFER, &[u64::MAX, 0]), H_SUCCESS);
        assert_eq!(m.rc(0, H_CONFER, &[1, 3]), H_SUCCESS);
        assert_eq!(m.rc(0, H_CONFER, &[5, 0]), H_PARAMETER);
        assert!(m.fx.take().is_empty());
    }

    #[test]
    fn set_mode() {
        let mut m = M::new(2);
        assert_eq!(
            m.rc(0, H_SET_MODE, &[1, H_SET_MODE_RESOURCE_LE, 0, 0]),
            H_SUCCESS
        );
        assert_eq!(m.fx.take(), vec![Effect::InterruptLittleEndian(true)]);
        assert!(m.dev.interrupt_le);
        assert_eq!(
            m.rc(1, H_SET_MODE, &[0, H_SET_MODE_RESOURCE_LE, 0, 0]),
            H_SUCCESS
        );
        assert_eq!(m.fx.take(), vec![Effect::InterruptLittleEndian(false)]);
        assert_eq!(
            m.rc(0, H_SET_MODE, &[2, H_SET_MODE_RESOURCE_LE, 0, 0]),
            H_UNSUPPORTED_FLAG
        );
        assert_eq!(
            m.rc(0, H_SET_MODE, &[1, H_SET_MODE_RESOURCE_LE, 1, 0]),
            H_P3
        );
        assert_eq!(
            m.rc(0, H_SET_MODE, &[1, H_SET_MODE_RESOURCE_LE, 0, 1]),
            H_P4
        );
        assert!(m.fx.take().is_empty());
        assert_eq!(
            m.rc(
                0,
                H_SET_MODE,
                &[3, H_SET_MODE_RESOURCE_ADDR_TRANS_MODE, 0, 0]
            ),
            H_UNSUPPORTED_FLAG
        );
        assert_eq!(
            m.rc(
                0,
                H_SET_MODE,
                &[0, H_SET_MODE_RESOURCE_ADDR_TRANS_MODE, 0, 0]
            ),
            H_SUCCESS
        );
        assert_eq!(
            m.rc(
                0,
                H_SET_MODE,
                &[0, H_SET_MODE_RESOURCE_ADDR_TRANS_MODE, 5, 0]
            ),
            H_P3
        );
        for resource in [0, 1, 2, 5, 99] {
            assert_eq!(
                m.rc(0, H_SET_MODE, &[0, resource, 0, 0]),
                H_P2,
                "resource {resource}"
            );
        }
        assert!(m.fx.take().is_empty());
    }

    #[test]
    fn cpu_characteristics_are_zero() {
        let mut m = M::new(1);
        let (rc, out, _) = m.call(0, H_GET_CPU_CHARACTERISTICS, &[]);
        assert_eq!((rc, out[0], out[1]), (H_SUCCESS, 0, 0));
    }

    #[test]
    fn register_vpa() {
        let mut m = M::new(2);
        let vpa = 0x1080u64;
        m.mem.write(vpa + 4, &640u16.to_be_bytes()).unwrap();
        let dtl = 0x3000u64;
        m.mem.write_u32_be(dtl + 4, 4096).unwrap();
        let slb = 0x5000u64;
        m.mem.write_u32_be(slb + 4, 0x208).unwrap();

        // DTL and SLB shadow need a VPA first.
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_DTL, 1, dtl]),
            H_RESOURCE
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 1, vpa]),
            H_SUCCESS
        );
        assert_eq!(m.dev.vpa[1].vpa, vpa);
        assert_eq!(m.dev.vpa[0].vpa, 0);
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_DTL, 1, dtl]),
            H_SUCCESS
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_SLB_SHADOW, 1, slb]),
            H_SUCCESS
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_DEREGISTER_VPA, 1, 0]),
            H_RESOURCE,
            "DTL still registered"
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_DEREGISTER_DTL, 1, 0]),
            H_SUCCESS
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_DEREGISTER_SLB_SHADOW, 1, 0]),
            H_SUCCESS
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_DEREGISTER_VPA, 1, 0]),
            H_SUCCESS
        );
        assert_eq!(m.dev.vpa[1], VpaState::default());

        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 2, vpa]),
            H_PARAMETER,
            "no such CPU"
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, 0]),
            H_HARDWARE
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, vpa + 8]),
            H_PARAMETER,
            "misaligned"
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, 0x100_0000]),
            H_PARAMETER,
            "outside RAM"
        );
        m.mem.write(0x1e00 + 4, &640u16.to_be_bytes()).unwrap();
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, 0x1e00]),
            H_PARAMETER,
            "crosses a page"
        );
        m.mem.write(0x2000 + 4, &100u16.to_be_bytes()).unwrap();
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, 0x2000]),
            H_PARAMETER,
            "too small"
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA | 1, 0, vpa]),
            H_PARAMETER,
            "stray flag bits"
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[4 << 45, 0, vpa]),
            H_PARAMETER,
            "subfunction 4"
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, vpa]),
            H_SUCCESS
        );
        m.mem.write_u32_be(dtl + 4, 47).unwrap();
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_DTL, 0, dtl]),
            H_PARAMETER,
            "DTL smaller than an entry"
        );
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_SLB_SHADOW, 0, 0]),
            H_HARDWARE
        );
    }

    #[test]
    fn xics_hcalls_deliver_an_ipi_between_cpus() {
        let mut m = M::new(2);
        assert_eq!(m.rc(1, H_CPPR, &[0xff]), H_SUCCESS);
        assert_eq!(m.rc(0, H_IPI, &[1, 5]), H_SUCCESS);
        assert_eq!(
            m.fx.take(),
            vec![Effect::ExternalIrq {
                cpu: 1,
                asserted: true
            }]
        );
        let (rc, out, _) = m.call(1, H_XIRR, &[0xff]);
        assert_eq!((rc, out[0]), (H_SUCCESS, 0xff00_0002));
        assert_eq!(
            m.fx.take(),
            vec![Effect::ExternalIrq {
                cpu: 1,
                asserted: false
            }]
        );
        assert_eq!(m.rc(1, H_IPI, &[1, 0xff]), H_SUCCESS);
        assert_eq!(m.rc(1, H_EOI, &[0xff00_0002]), H_SUCCESS);
        assert_eq!(m.dev.xics.icp(1).cppr(), 0xff);
        assert!(m.fx.take().is_empty());
        assert_eq!(m.rc(0, H_IPI, &[2, 5]), H_PARAMETER);
        assert_eq!(m.rc(0, H_IPI, &[1 << 32, 5]), H_PARAMETER);
        // IPI to self while CPPR is 0 (reset value): not presented.
        assert_eq!(m.rc(0, H_IPI, &[0, 5]), H_SUCCESS);
        assert!(m.fx.take().is_empty());
    }

    /// Console input fires the vty's interrupt when the queue was empty (an edge, as on QEMU);
    /// more input before the guest drained the queue fires nothing more.
    #[test]
    fn console_input_raises_the_vty_interrupt() {
        use crate::machine::pseries::console::VTY_IRQ;
        let mut m = M::new(2);
        assert_eq!(m.rc(1, H_CPPR, &[0xff]), H_SUCCESS);
        m.dev.xics.write_xive(VTY_IRQ, 1, 5, 5, &mut m.fx);
        assert!(m.fx.take().is_empty());
        m.dev.console_input(b"ab", &mut m.fx);
        let raised = vec![Effect::ExternalIrq {
            cpu: 1,
            asserted: true,
        }];
        assert_eq!(m.fx.take(), raised);
        let (rc, out, _) = m.call(1, H_XIRR, &[0xff]);
        assert_eq!((rc, out[0]), (H_SUCCESS, 0xff00_0000 | VTY_IRQ as u64));
        m.fx.take();
        m.dev.console_input(b"c", &mut m.fx);
        assert!(m.fx.take().is_empty(), "the queue was not empty");
        let (rc, out, _) = m.call(1, H_GET_TERM_CHAR, &[VTY_REG as u64]);
        assert_eq!((rc, out[0]), (H_SUCCESS, 3));
        assert_eq!(console::unpack_chars(out[1], out[2], 3), b"abc");
        assert_eq!(m.rc(1, H_EOI, &[0xff00_0000 | VTY_IRQ as u64]), H_SUCCESS);
        m.dev.console_input(b"d", &mut m.fx);
        assert_eq!(m.fx.take(), raised, "drained: the next input fires again");
        m.dev.console_input(b"", &mut m.fx);
        assert!(m.fx.take().is_empty());
    }

    #[test]
    fn rtas_through_the_hypercall() {
        let mut m = M::new(2);
        let buf = 0x800u64;
        for (i, w) in [Service::StartCpu.token(), 3, 1, 1, 0x400100, 7, 0x5555]
            .iter()
            .enumerate()
        {
            m.mem.write_u32_be(buf + 4 * i as u64, *w).unwrap();
        }
        let (rc, _, o) = m.call(0, H_RTAS, &[buf]);
        assert_eq!((rc, o), (H_SUCCESS, HcallOutcome::Continue));
        assert_eq!(m.mem.read_u32_be(buf + 24).unwrap(), 0);
        assert_eq!(
            m.fx.take(),
            vec![Effect::StartCpu {
                cpu: 1,
                entry: 0x400100,
                r3: 7
            }]
        );
        assert_eq!(m.dev.rtas_stats.count(Service::StartCpu), 1);

        m.mem.write_u32_be(buf, Service::StopSelf.token()).unwrap();
        m.mem.write_u32_be(buf + 4, 0).unwrap();
        assert_eq!(m.call(1, H_RTAS, &[buf]).2, HcallOutcome::Stopped);
        m.mem.write_u32_be(buf, Service::PowerOff.token()).unwrap();
        m.mem.write_u32_be(buf + 4, 2).unwrap();
        assert_eq!(m.call(0, H_RTAS, &[buf]).2, HcallOutcome::Shutdown);
        assert_eq!(m.fx.take(), vec![Effect::StopSelf(1), Effect::PowerOff]);
        assert_eq!(m.rc(0, H_RTAS, &[0x7fff_0000]), H_PARAMETER);
        assert_eq!(m.dev.hcall_stats.count(HcallKind::Rtas), 4);
    }

    /// An HPT stand-in that records calls and answers what it is told.
    struct FakeHpt {
        calls: Mutex<Vec<(&'static str, Vec<u64>)>>,
        answer: HcallResult,
    }

    impl FakeHpt {
        fn log(&self, name: &'static str, args: &[u64]) -> HcallResult {
            self.calls.lock().unwrap().push((name, args.to_vec()));
            self.answer
        }
    }

    impl HptHcalls for FakeHpt {
        fn enter(&self, flags: u64, ptex: u64, pteh: u64, ptel: u64) -> HcallResult {
            self.log("enter", &[flags, ptex, pteh, ptel])
        }
        fn remove(&self, flags: u64, ptex: u64, avpn: u64) -> HcallResult {
            self.log("remove", &[flags, ptex, avpn])
        }
        fn read(&self, flags: u64, ptex: u64) -> HcallResult {
            self.log("read", &[flags, ptex])
        }
        fn protect(&self, flags: u64, ptex: u64, avpn: u64) -> HcallResult {
            self.log("protect", &[flags, ptex, avpn])
        }
        fn bulk_remove(&self, args: &[u64; 8]) -> HcallResult {
            self.log("bulk_remove", args)
        }
    }

    #[test]
    fn hpt_hcalls_are_delegated_and_flush_when_told() {
        let mut m = M::new(2);
        let hpt = Arc::new(FakeHpt {
            calls: Mutex::new(Vec::new()),
            answer: HcallResult {
                ret: H_SUCCESS,
                out: [11, 22, 33, 44, 55, 66, 77, 88],
                n_out: 2,
                flush_tlbs: Some(Invalidated::everything()),
            },
        });
        m.dev.hpt = Some(hpt.clone());
        let (rc, out, _) = m.call(1, H_REMOVE, &[1, 2, 3]);
        assert_eq!(
            (rc, out[0], out[1], out[2], out[3]),
            (H_SUCCESS, 11, 22, 3, 0xbad0_0003),
            "r4, r5 set; r6 up kept"
        );
        assert_eq!(
            m.fx.take(),
            vec![Effect::FlushAllTlbs(Invalidated::everything())]
        );
        m.call(0, H_BULK_REMOVE, &[1, 2, 3, 4, 5, 6, 7, 8]);
        m.call(0, H_ENTER, &[1, 2, 3, 4]);
        m.call(0, H_READ, &[1, 2]);
        m.call(0, H_PROTECT, &[1, 2, 3]);
        let calls = hpt.calls.lock().unwrap().clone();
        assert_eq!(
            calls,
            vec![
                ("remove", vec![1, 2, 3]),
                ("bulk_remove", vec![1, 2, 3, 4, 5, 6, 7, 8]),
                ("enter", vec![1, 2, 3, 4]),
                ("read", vec![1, 2]),
                ("protect", vec![1, 2, 3]),
            ]
        );
        assert_eq!(m.dev.hcall_stats.global_flushes(), 5);

        let quiet = Arc::new(FakeHpt {
            calls: Mutex::new(Vec::new()),
            answer: HcallResult {
                ret: H_PTEG_FULL,
                out: [0; 8],
                n_out: 0,
                flush_tlbs: None,
            },
        });
        m.dev.hpt = Some(quiet);
        m.fx.take();
        let (rc, out, _) = m.call(0, H_ENTER, &[0, 8, 0, 0]);
        assert_eq!(
            (rc, &out[..5]),
            (H_PTEG_FULL, &[0, 8, 0, 0, 0xbad0_0004][..]),
            "registers untouched on failure"
        );
        assert!(m.fx.take().is_empty(), "no flush without an invalidation");
    }

    #[test]
    fn hpt_hcalls_on_the_machine_hpt() {
        use crate::mmu::{Hpt, hpte_r, hpte_v};
        use crate::softmmu::GuestRam;
        let mut m = M::new(2);
        let ram = Arc::new(GuestRam::new(256 << 20).unwrap());
        let hpt = Arc::new(Hpt::new(18).unwrap());
        m.dev.hpt = Some(Arc::new(MachineHpt { hpt, ram }));
        let pteh = |avpn: u64| (avpn << 7) | hpte_v::VALID;
        let ptel = |page: u64| (page << 12) | hpte_r::M | 0x2;
        // Eight entries fill a PTEG; the ninth finds it full.
        for i in 0..8u64 {
            let (rc, out, _) = m.call(0, H_ENTER, &[0, 0x40, pteh(i + 1), ptel(i)]);
            assert_eq!((rc, out[0]), (H_SUCCESS, 0x40 + i));
        }
        assert_eq!(m.rc(0, H_ENTER, &[0, 0x40, pteh(99), ptel(9)]), H_PTEG_FULL);
        assert_eq!(
            m.rc(0, H_ENTER, &[0, 0x40, pteh(99), ptel(9) | 0x20]),
            H_PARAMETER,
            "RAM must be WIMG=M"
        );
        assert!(m.fx.take().is_empty(), "H_ENTER flushes nothing");
        let (rc, out, _) = m.call(1, H_READ, &[0, 0x43]);
        assert_eq!((rc, out[0], out[1]), (H_SUCCESS, pteh(4), ptel(3)));
        let (rc, out, _) = m.call(1, H_REMOVE, &[0, 0x43, 0]);
        assert_eq!((rc, out[0], out[1]), (H_SUCCESS, pteh(4), ptel(3)));
        // Every vCPU's TLB is flushed; the caller's own drops the removed pages' entries.
        let flushed = |fx: Vec<Effect>| match &fx[..] {
            [Effect::FlushAllTlbs(own)] => own.ranges().expect("the pages").to_vec(),
            other => panic!("{other:?}"),
        };
        assert_eq!(flushed(m.fx.take()), [(0x3000, 0x1000)]);
        assert_eq!(m.rc(1, H_REMOVE, &[0, 0x43, 0]), H_NOT_FOUND);
        assert!(m.fx.take().is_empty(), "nothing removed, nothing flushed");
        assert_eq!(m.rc(0, H_PROTECT, &[1, 0x44, 0]), H_SUCCESS);
        assert_eq!(flushed(m.fx.take()), [(0x4000, 0x1000)]);
        let end = 0xc000_0000_0000_0000u64;
        let req = |ptex: u64| 0x4000_0000_0000_0000 | ptex;
        let (rc, out, _) = m.call(
            0,
            H_BULK_REMOVE,
            &[req(0x40), 0, req(0x41), 0, end, 0, 0, 0],
        );
        assert_eq!(rc, H_SUCCESS);
        assert_eq!(out[0] >> 62, 2, "a response word");
        assert_eq!(flushed(m.fx.take()), [(0, 0x1000), (0x1000, 0x1000)]);
        assert_eq!(
            m.rc(0, H_ENTER, &[0, 0x40, pteh(50), ptel(50)]),
            H_SUCCESS,
            "a slot is free again"
        );
        assert_eq!(m.rc(0, H_REMOVE, &[0, 1 << 40, 0]), H_PARAMETER);
        assert_eq!(m.dev.hcall_stats.global_flushes(), 3);
    }

    #[test]
    fn stats_name_every_kind_once() {
        let mut m = M::new(1);
        m.rc(0, H_CEDE, &[]);
        m.rc(0, H_CEDE, &[]);
        let all = m.dev.hcall_stats.all();
        assert_eq!(all.len(), HcallKind::ALL.len());
        assert!(all.contains(&("h_cede", 2)));
        assert_eq!(m.dev.hcall_stats.total(), 2);
        let mut names: Vec<_> = all.iter().map(|(n, _)| *n).collect();
        names.dedup();
        assert_eq!(names.len(), HcallKind::ALL.len());
    }

    #[test]
    fn the_table_derives_opcodes_names_and_kinds() {
        let defs: Vec<_> = HcallKind::ALL
            .iter()
            .filter_map(|k| k.opcode().map(|op| (*k, op)))
            .collect();
        assert_eq!(
            defs.len(),
            HcallKind::ALL.len() - 1,
            "every kind but Other has a row"
        );
        for &(k, op) in &defs {
            assert_eq!(HcallKind::from_opcode(op), k);
            assert!(k.name().starts_with("h_"), "{}", k.name());
        }
        let mut ops: Vec<u64> = defs.iter().map(|d| d.1).collect();
        ops.sort();
        ops.dedup();
        assert_eq!(ops.len(), defs.len(), "opcodes are unique");
        assert_eq!(
            (H_ENTER, H_SET_SPRG0, H_PAGE_INIT, H_JOIN, H_RTAS),
            (0x08, 0x24, 0x2c, 0x298, 0xf000)
        );
        assert_eq!(HcallKind::Other.name(), "other");
    }

    #[test]
    fn termno_zero_is_the_default_vty() {
        let mut m = M::new(1);
        let (hi, lo) = console::pack_chars(b"ok\n");
        assert_eq!(m.rc(0, H_PUT_TERM_CHAR, &[0, 3, hi, lo]), H_SUCCESS);
        assert_eq!(m.fx.console, b"ok\n");
        m.dev.hvterm.push_input(b"y");
        let (rc, out, _) = m.call(0, H_GET_TERM_CHAR, &[0]);
        assert_eq!((rc, out[0], out[1] >> 56), (H_SUCCESS, 1, b'y' as u64));
        assert_eq!(m.rc(0, H_PUT_TERM_CHAR, &[1, 3, hi, lo]), H_PARAMETER);
    }

    #[test]
    fn set_sprg0_and_dabr() {
        let mut m = M::new(1);
        assert_eq!(m.rc(0, H_SET_SPRG0, &[0x1234_5678_9abc]), H_SUCCESS);
        assert_eq!(m.st[0].sprg[0], 0x1234_5678_9abc);
        assert_eq!(m.rc(0, H_SET_DABR, &[0x1000 | 7]), H_SUCCESS);
        assert_eq!((m.st[0].dabr, m.st[0].dabrx), (0x1007, 3));
        assert_eq!(m.rc(0, H_SET_XDABR, &[0x2000, DABRX_KERNEL]), H_SUCCESS);
        assert_eq!((m.st[0].dabr, m.st[0].dabrx), (0x2000, 2));
        for bad in [0, DABRX_HYPERVISOR | DABRX_USER, 0x10 | DABRX_USER] {
            assert_eq!(
                m.rc(0, H_SET_XDABR, &[0x3000, bad]),
                H_PARAMETER,
                "dabrx {bad:#x}"
            );
        }
        assert_eq!(m.st[0].dabr, 0x2000);
    }

    #[test]
    fn page_init_zeroes_copies_and_checks() {
        let mut m = M::new(1);
        m.mem.write(0x3000, &[0xaa; 4096]).unwrap();
        m.mem.write(0x5000, &[0x55; 4096]).unwrap();
        assert_eq!(m.rc(0, H_PAGE_INIT, &[H_ZERO_PAGE, 0x3000, 0]), H_SUCCESS);
        let mut page = [1u8; 4096];
        m.mem.read(0x3000, &mut page).unwrap();
        assert!(page.iter().all(|b| *b == 0));
        assert_eq!(
            m.rc(
                0,
                H_PAGE_INIT,
                &[H_COPY_PAGE | H_ICACHE_SYNCHRONIZE, 0x3000, 0x5000]
            ),
            H_SUCCESS
        );
        m.mem.read(0x3000, &mut page).unwrap();
        assert!(page.iter().all(|b| *b == 0x55));
        assert_eq!(
            m.rc(0, H_PAGE_INIT, &[H_ICACHE_INVALIDATE, 0x3000, 0]),
            H_SUCCESS
        );
        assert_eq!(
            m.rc(0, H_PAGE_INIT, &[H_ZERO_PAGE, 0x3008, 0]),
            H_PARAMETER,
            "unaligned destination"
        );
        assert_eq!(
            m.rc(0, H_PAGE_INIT, &[H_ZERO_PAGE, 0x10_0000, 0]),
            H_PARAMETER,
            "outside RAM"
        );
        assert_eq!(
            m.rc(0, H_PAGE_INIT, &[H_COPY_PAGE, 0x3000, 0x5800]),
            H_PARAMETER,
            "unaligned source"
        );
        assert_eq!(
            m.rc(0, H_PAGE_INIT, &[H_ZERO_PAGE | 1, 0x3000, 0]),
            H_PARAMETER,
            "unknown flag"
        );
        m.mem.read(0x3000, &mut page).unwrap();
        assert!(
            page.iter().all(|b| *b == 0x55),
            "failed calls change nothing"
        );
    }

    #[test]
    fn logical_loads_stores_and_memop() {
        let mut m = M::new(1);
        assert_eq!(
            m.rc(0, H_LOGICAL_CI_STORE, &[4, 0x100, 0x1122_3344_5566_7788]),
            H_SUCCESS
        );
        assert_eq!(m.mem.read_u32_be(0x100).unwrap(), 0x5566_7788);
        for (size, want) in [(1, 0x55), (2, 0x5566), (4, 0x5566_7788)] {
            let (rc, out, _) = m.call(0, H_LOGICAL_CACHE_LOAD, &[size, 0x100]);
            assert_eq!((rc, out[0]), (H_SUCCESS, want));
        }
        assert_eq!(m.rc(0, H_LOGICAL_CI_LOAD, &[3, 0x100]), H_PARAMETER);
        assert_eq!(m.rc(0, H_LOGICAL_CI_LOAD, &[8, 0x10_0000]), H_PARAMETER);
        assert_eq!(m.rc(0, H_LOGICAL_ICBI, &[0x100]), H_SUCCESS);
        assert_eq!(m.rc(0, H_LOGICAL_DCBF, &[0x100]), H_SUCCESS);
        m.mem.write(0x200, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        // Overlapping copy forward by two bytes, as memmove.
        assert_eq!(
            m.rc(0, H_LOGICAL_MEMOP, &[0x202, 0x200, 1, 3, 0]),
            H_SUCCESS
        );
        let mut b = [0u8; 8];
        m.mem.read(0x200, &mut b).unwrap();
        assert_eq!(b, [1, 2, 1, 2, 3, 4, 5, 6]);
        assert_eq!(
            m.rc(0, H_LOGICAL_MEMOP, &[0x300, 0x200, 0, 2, 1]),
            H_SUCCESS
        );
        m.mem.read(0x300, &mut b[..2]).unwrap();
        assert_eq!(&b[..2], &[0xfe, 0xfd]);
        assert_eq!(
            m.rc(0, H_LOGICAL_MEMOP, &[0x301, 0x200, 1, 1, 0]),
            H_PARAMETER,
            "misaligned"
        );
        assert_eq!(
            m.rc(0, H_LOGICAL_MEMOP, &[0x300, 0x200, 0, 1, 2]),
            H_PARAMETER,
            "op"
        );
    }

    #[test]
    fn confer_to_self_and_join_wait_for_a_prod() {
        let mut m = M::new(2);
        m.st[0].msr &= !msr::EE;
        assert_eq!(m.call(0, H_CONFER, &[0, 0]).2, HcallOutcome::Cede);
        assert_eq!(m.st[0].msr & msr::EE, 0, "H_CONFER leaves EE alone");
        m.st[0].msr |= msr::EE;
        assert_eq!(m.rc(0, H_JOIN, &[]), H_BAD_MODE);
        m.st[0].msr &= !msr::EE;
        // vCPU 1 is stopped (the boot state): vCPU 0 is the last one to join.
        assert_eq!(m.rc(0, H_JOIN, &[]), H_CONTINUE);
        m.fx.stopped[1] = false;
        assert_eq!(
            m.call(0, H_JOIN, &[]),
            (
                H_SUCCESS,
                m.st[0].gpr[4..12].try_into().unwrap(),
                HcallOutcome::Cede
            )
        );
        assert!(m.dev.joined[0]);
        m.st[1].msr &= !msr::EE;
        assert_eq!(m.rc(1, H_JOIN, &[]), H_CONTINUE, "vCPU 0 has joined");
        assert_eq!(m.rc(1, H_PROD, &[0]), H_SUCCESS);
        assert!(!m.dev.joined[0]);
        assert_eq!(
            m.call(0, H_JOIN, &[]).2,
            HcallOutcome::Continue,
            "a pending prod returns at once"
        );
    }

    #[test]
    fn cede_makes_the_dispatch_counter_odd_and_registration_marks_shared_processors() {
        let mut m = M::new(1);
        let vpa = 0x1000u64;
        m.mem.write(vpa + 4, &640u16.to_be_bytes()).unwrap();
        m.mem.write_u32_be(vpa + VPA_DISPATCH_COUNTER, 6).unwrap();
        assert_eq!(
            m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, vpa]),
            H_SUCCESS
        );
        let mut status = [0u8];
        m.mem.read(vpa + VPA_STATUS_OFFSET, &mut status).unwrap();
        assert_eq!(status[0] & VPA_SHARED_PROC, VPA_SHARED_PROC);
        assert_eq!(m.call(0, H_CEDE, &[]).2, HcallOutcome::Cede);
        assert_eq!(m.mem.read_u32_be(vpa + VPA_DISPATCH_COUNTER).unwrap(), 7);
        vpa_dispatched(&m.mem, vpa);
        assert_eq!(m.mem.read_u32_be(vpa + VPA_DISPATCH_COUNTER).unwrap(), 8);
        vpa_dispatched(&m.mem, vpa);
        assert_eq!(
            m.mem.read_u32_be(vpa + VPA_DISPATCH_COUNTER).unwrap(),
            8,
            "already even"
        );
        m.dev.prod[0] = true;
        assert_eq!(m.call(0, H_CEDE, &[]).2, HcallOutcome::Continue);
        assert_eq!(
            m.mem.read_u32_be(vpa + VPA_DISPATCH_COUNTER).unwrap(),
            8,
            "not preempted"
        );
    }

    #[test]
    fn home_node_and_system_reset() {
        let mut m = M::new(3);
        let (rc, out, _) = m.call(0, H_HOME_NODE_ASSOCIATIVITY, &[1, 2]);
        assert_eq!(
            (rc, out[0], out[1], out[2], out[5]),
            (H_SUCCESS, 0, 0, 0x2_ffff_ffff, u64::MAX)
        );
        assert_eq!(m.rc(0, H_HOME_NODE_ASSOCIATIVITY, &[1, 3]), H_P2);
        assert_eq!(m.rc(0, H_HOME_NODE_ASSOCIATIVITY, &[2, 0]), H_FUNCTION);
        assert_eq!(m.rc(0, H_SIGNAL_SYS_RESET, &[2]), H_SUCCESS);
        assert_eq!(m.rc(1, H_SIGNAL_SYS_RESET, &[(-2i64) as u64]), H_SUCCESS);
        assert_eq!(m.rc(0, H_SIGNAL_SYS_RESET, &[(-3i64) as u64]), H_PARAMETER);
        assert_eq!(m.rc(0, H_SIGNAL_SYS_RESET, &[3]), H_PARAMETER);
        use Effect::SystemReset as R;
        assert_eq!(m.fx.take(), vec![R(2), R(0), R(2)]);
    }
}
