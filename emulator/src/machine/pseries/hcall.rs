//! Hypercalls (`sc 1`): the sPAPR hypervisor interface of the machine.
//!
//! Convention (PAPR): r3 = opcode, r4.. = arguments; on return r3 = status, r4.. = outputs.
//! Every hcall runs under the BQL (LOCKING.md); the dispatcher only touches the devices, the
//! calling vCPU's registers, guest memory and the machine through [`MachineEffects`].

use super::console::{self, MAX_CHARS, VTY_REG};
use super::effects::{GuestMemory, MachineEffects};
use super::rtas::{self, RtasContext, RtasOutcome};
use super::{PseriesDevices, VpaState};
use crate::cpu::{CpuState, msr};

// --- opcodes (PAPR) ---
pub const H_REMOVE: u64 = 0x04;
pub const H_ENTER: u64 = 0x08;
pub const H_READ: u64 = 0x0c;
pub const H_PROTECT: u64 = 0x18;
pub const H_GET_TERM_CHAR: u64 = 0x54;
pub const H_PUT_TERM_CHAR: u64 = 0x58;
pub const H_EOI: u64 = 0x64;
pub const H_CPPR: u64 = 0x68;
pub const H_IPI: u64 = 0x6c;
pub const H_XIRR: u64 = 0x74;
pub const H_REGISTER_VPA: u64 = 0xdc;
pub const H_CEDE: u64 = 0xe0;
pub const H_CONFER: u64 = 0xe4;
pub const H_PROD: u64 = 0xe8;
pub const H_BULK_REMOVE: u64 = 0x124;
pub const H_GET_CPU_CHARACTERISTICS: u64 = 0x1c8;
pub const H_SET_MODE: u64 = 0x31c;
/// RTAS through a hypercall (the number KVM and QEMU use; not PAPR).
pub const H_RTAS: u64 = 0xf000;

// --- return codes (PAPR) ---
pub const H_SUCCESS: i64 = 0;
pub const H_HARDWARE: i64 = -1;
pub const H_FUNCTION: i64 = -2;
pub const H_PRIVILEGE: i64 = -3;
pub const H_PARAMETER: i64 = -4;
pub const H_PTEG_FULL: i64 = -6;
pub const H_NOT_FOUND: i64 = -7;
pub const H_RESOURCE: i64 = -16;
pub const H_P2: i64 = -55;
pub const H_P3: i64 = -56;
pub const H_P4: i64 = -57;
pub const H_UNSUPPORTED_FLAG: i64 = -256;

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

/// What the calling vCPU does after a hypercall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HcallOutcome {
    /// Go on at the instruction after `sc 1`.
    Continue,
    /// H_CEDE: `MSR[EE]` is set; halt until an external or decrementer interrupt is pending or
    /// the vCPU is prodded ([`PseriesDevices::take_prod`]), then go on after `sc 1`.
    Cede,
    /// RTAS stop-self: the vCPU is stopped until another one starts it with start-cpu.
    Stopped,
    /// power-off, reboot or os-term: the machine is going down; leave guest code.
    Shutdown,
}

/// Outputs of an HPT hypercall, computed by the hash page table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HptReturn {
    /// PAPR return code (r3).
    pub ret: i64,
    /// Values for r4, r5, … (the first `nout`).
    pub out: [u64; 8],
    pub nout: usize,
    /// A valid translation was invalidated: every vCPU's TLB must be flushed.
    pub flush: bool,
}

/// The hash page table's side of the HPT hypercalls. The HPT is shared with the TLB-miss
/// walkers of every vCPU; these calls are made under the BQL.
pub trait HptHcalls: Send + Sync {
    fn enter(&self, flags: u64, ptex: u64, pteh: u64, ptel: u64) -> HptReturn;
    fn remove(&self, flags: u64, ptex: u64, avpn: u64) -> HptReturn;
    fn read(&self, flags: u64, ptex: u64) -> HptReturn;
    fn protect(&self, flags: u64, ptex: u64, avpn: u64) -> HptReturn;
    /// Up to four (tsh, tsl) request pairs in r4..r11; the responses replace them.
    fn bulk_remove(&self, args: &[u64; 8]) -> HptReturn;
}

/// Hypercalls counted per kind (the run report shows them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HcallKind {
    Enter,
    Remove,
    Read,
    Protect,
    BulkRemove,
    GetTermChar,
    PutTermChar,
    Cede,
    Confer,
    Prod,
    SetMode,
    RegisterVpa,
    GetCpuCharacteristics,
    Xirr,
    Eoi,
    Cppr,
    Ipi,
    Rtas,
    /// Anything else (answered H_FUNCTION).
    Other,
}

impl HcallKind {
    pub const ALL: [HcallKind; 19] = [
        HcallKind::Enter,
        HcallKind::Remove,
        HcallKind::Read,
        HcallKind::Protect,
        HcallKind::BulkRemove,
        HcallKind::GetTermChar,
        HcallKind::PutTermChar,
        HcallKind::Cede,
        HcallKind::Confer,
        HcallKind::Prod,
        HcallKind::SetMode,
        HcallKind::RegisterVpa,
        HcallKind::GetCpuCharacteristics,
        HcallKind::Xirr,
        HcallKind::Eoi,
        HcallKind::Cppr,
        HcallKind::Ipi,
        HcallKind::Rtas,
        HcallKind::Other,
    ];

    pub fn from_opcode(op: u64) -> HcallKind {
        match op {
            H_ENTER => HcallKind::Enter,
            H_REMOVE => HcallKind::Remove,
            H_READ => HcallKind::Read,
            H_PROTECT => HcallKind::Protect,
            H_BULK_REMOVE => HcallKind::BulkRemove,
            H_GET_TERM_CHAR => HcallKind::GetTermChar,
            H_PUT_TERM_CHAR => HcallKind::PutTermChar,
            H_CEDE => HcallKind::Cede,
            H_CONFER => HcallKind::Confer,
            H_PROD => HcallKind::Prod,
            H_SET_MODE => HcallKind::SetMode,
            H_REGISTER_VPA => HcallKind::RegisterVpa,
            H_GET_CPU_CHARACTERISTICS => HcallKind::GetCpuCharacteristics,
            H_XIRR => HcallKind::Xirr,
            H_EOI => HcallKind::Eoi,
            H_CPPR => HcallKind::Cppr,
            H_IPI => HcallKind::Ipi,
            H_RTAS => HcallKind::Rtas,
            _ => HcallKind::Other,
        }
    }

    /// Report key: the PAPR name in lower case (`h_enter`, `h_bulk_remove`, …).
    pub fn name(self) -> &'static str {
        match self {
            HcallKind::Enter => "h_enter",
            HcallKind::Remove => "h_remove",
            HcallKind::Read => "h_read",
            HcallKind::Protect => "h_protect",
            HcallKind::BulkRemove => "h_bulk_remove",
            HcallKind::GetTermChar => "h_get_term_char",
            HcallKind::PutTermChar => "h_put_term_char",
            HcallKind::Cede => "h_cede",
            HcallKind::Confer => "h_confer",
            HcallKind::Prod => "h_prod",
            HcallKind::SetMode => "h_set_mode",
            HcallKind::RegisterVpa => "h_register_vpa",
            HcallKind::GetCpuCharacteristics => "h_get_cpu_characteristics",
            HcallKind::Xirr => "h_xirr",
            HcallKind::Eoi => "h_eoi",
            HcallKind::Cppr => "h_cppr",
            HcallKind::Ipi => "h_ipi",
            HcallKind::Rtas => "h_rtas",
            HcallKind::Other => "other",
        }
    }

    fn index(self) -> usize {
        HcallKind::ALL.iter().position(|k| *k == self).unwrap()
    }
}

/// Hypercall counts.
#[derive(Clone, Debug, Default)]
pub struct HcallStats {
    counts: [u64; HcallKind::ALL.len()],
    /// TLB flushes of every vCPU requested by HPT hcalls.
    pub global_flushes: u64,
}

impl HcallStats {
    pub fn count(&self, k: HcallKind) -> u64 {
        self.counts[k.index()]
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(name, count)` of every kind, in a fixed order.
    pub fn all(&self) -> Vec<(&'static str, u64)> {
        HcallKind::ALL.iter().map(|k| (k.name(), self.count(*k))).collect()
    }
}

/// Handles the hypercall the vCPU `cpu` (whose registers are `st`) just made with `sc 1`.
pub fn hcall(dev: &mut PseriesDevices, cpu: usize, st: &mut CpuState, mem: &dyn GuestMemory, fx: &mut dyn MachineEffects) -> HcallOutcome {
    let op = st.gpr[3];
    let kind = HcallKind::from_opcode(op);
    dev.hcall_stats.counts[kind.index()] += 1;
    if st.msr & msr::PR != 0 {
        st.gpr[3] = H_PRIVILEGE as u64;
        return HcallOutcome::Continue;
    }
    let args: [u64; 9] = st.gpr[4..13].try_into().unwrap();
    let a = |i: usize| args[i];
    let mut outcome = HcallOutcome::Continue;
    let mut out: &[u64] = &[];
    let out_buf: [u64; 8];
    let ret = match kind {
        HcallKind::Enter | HcallKind::Remove | HcallKind::Read | HcallKind::Protect | HcallKind::BulkRemove => {
            match dev.hpt.as_deref() {
                None => H_FUNCTION,
                Some(hpt) => {
                    let r = match kind {
                        HcallKind::Enter => hpt.enter(a(0), a(1), a(2), a(3)),
                        HcallKind::Remove => hpt.remove(a(0), a(1), a(2)),
                        HcallKind::Read => hpt.read(a(0), a(1)),
                        HcallKind::Protect => hpt.protect(a(0), a(1), a(2)),
                        _ => hpt.bulk_remove(&[a(0), a(1), a(2), a(3), a(4), a(5), a(6), a(7)]),
                    };
                    if r.flush {
                        dev.hcall_stats.global_flushes += 1;
                        fx.flush_all_tlbs();
                    }
                    out_buf = r.out;
                    out = &out_buf[..r.nout.min(8)];
                    r.ret
                }
            }
        }
        HcallKind::PutTermChar => {
            let (termno, len) = (a(0), a(1));
            if termno != VTY_REG as u64 || len > MAX_CHARS as u64 {
                H_PARAMETER
            } else {
                fx.console_write(&console::unpack_chars(a(2), a(3), len as usize));
                H_SUCCESS
            }
        }
        HcallKind::GetTermChar => {
            if a(0) != VTY_REG as u64 {
                H_PARAMETER
            } else {
                let bytes = dev.hvterm.take_input();
                let (hi, lo) = console::pack_chars(&bytes);
                out_buf = [bytes.len() as u64, hi, lo, 0, 0, 0, 0, 0];
                out = &out_buf[..3];
                H_SUCCESS
            }
        }
        HcallKind::Cede => {
            st.msr |= msr::EE;
            if !dev.take_prod(cpu) {
                outcome = HcallOutcome::Cede;
            }
            H_SUCCESS
        }
        HcallKind::Confer => {
            // Dedicated processors: nothing to yield to. -1 means "all".
            if a(0) == u64::MAX || dev.cpu_of_server(a(0)).is_some() { H_SUCCESS } else { H_PARAMETER }
        }
        HcallKind::Prod => match dev.cpu_of_server(a(0)) {
            Some(t) => {
                dev.prod[t] = true;
                fx.prod(t);
                H_SUCCESS
            }
            None => H_PARAMETER,
        },
        HcallKind::SetMode => set_mode(dev, a(0), a(1), a(2), a(3), fx),
        HcallKind::RegisterVpa => register_vpa(dev, a(0), a(1), a(2), mem),
        HcallKind::GetCpuCharacteristics => {
            // No speculation-mitigation needs: else Linux flushes the L1 in software on every
            // kernel entry and exit, which under emulation dominates everything.
            out_buf = [0; 8];
            out = &out_buf[..2];
            H_SUCCESS
        }
        HcallKind::Xirr => {
            out_buf = [dev.xics.accept(cpu, fx) as u64, 0, 0, 0, 0, 0, 0, 0];
            out = &out_buf[..1];
            H_SUCCESS
        }
        HcallKind::Eoi => {
            dev.xics.eoi(cpu, a(0) as u32, fx);
            H_SUCCESS
        }
        HcallKind::Cppr => {
            dev.xics.set_cppr(cpu, a(0) as u8, fx);
            H_SUCCESS
        }
        HcallKind::Ipi => match dev.cpu_of_server(a(0)) {
            Some(t) => {
                dev.xics.set_mfrr(t, a(1) as u8, fx);
                H_SUCCESS
            }
            None => H_PARAMETER,
        },
        HcallKind::Rtas => {
            let ctx = RtasContext { xics: &mut dev.xics, stats: &mut dev.rtas_stats, mem, fx };
            let (ret, o) = rtas::call(ctx, cpu, a(0));
            outcome = match o {
                RtasOutcome::Continue => HcallOutcome::Continue,
                RtasOutcome::Stopped => HcallOutcome::Stopped,
                RtasOutcome::Shutdown => HcallOutcome::Shutdown,
            };
            ret
        }
        HcallKind::Other => H_FUNCTION,
    };
    st.gpr[3] = ret as u64;
    st.gpr[4..4 + out.len()].copy_from_slice(out);
    outcome
}

fn set_mode(dev: &mut PseriesDevices, mflags: u64, resource: u64, value1: u64, value2: u64, fx: &mut dyn MachineEffects) -> i64 {
    match resource {
        H_SET_MODE_RESOURCE_LE | H_SET_MODE_RESOURCE_ADDR_TRANS_MODE if value1 != 0 => H_P3,
        H_SET_MODE_RESOURCE_LE | H_SET_MODE_RESOURCE_ADDR_TRANS_MODE if value2 != 0 => H_P4,
        H_SET_MODE_RESOURCE_LE => match mflags {
            0 | 1 => {
                dev.interrupt_le = mflags == 1;
                fx.set_interrupt_little_endian(mflags == 1);
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

fn register_vpa(dev: &mut PseriesDevices, flags: u64, procno: u64, addr: u64, mem: &dyn GuestMemory) -> i64 {
    let Some(t) = dev.cpu_of_server(procno) else { return H_PARAMETER };
    let v: &mut VpaState = &mut dev.vpa[t];
    let crosses_page = |size: u64| addr / 4096 != (addr + size - 1) / 4096;
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
            H_SUCCESS
        }
        VPA_REGISTER_DTL | VPA_REGISTER_SLB_SHADOW => {
            if addr == 0 {
                return H_HARDWARE;
            }
            let Ok(size) = mem.read_u32_be(addr + 4) else { return H_PARAMETER };
            let (min, page_bound) = if flags == VPA_REGISTER_DTL { (DTL_MIN_SIZE, false) } else { (8, true) };
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
            Self { dev: PseriesDevices::new(n), st, fx: Recorder::new(n), mem: VecMemory::new(0x20000) }
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
    fn problem_state_is_refused() {
        let mut m = M::new(1);
        m.st[0].msr |= msr::PR;
        assert_eq!(m.rc(0, H_PUT_TERM_CHAR, &[VTY_REG as u64, 1, 0x4100_0000_0000_0000, 0]), H_PRIVILEGE);
        assert!(m.fx.console.is_empty());
        assert_eq!(m.dev.hcall_stats.count(HcallKind::PutTermChar), 1);
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
        assert_eq!(m.rc(0, H_PUT_TERM_CHAR, &[VTY_REG as u64, 15, hi, lo]), H_SUCCESS);
        assert_eq!(m.fx.console, b"Hello, world!\r\n");
        assert_eq!(m.rc(0, H_PUT_TERM_CHAR, &[VTY_REG as u64, 17, hi, lo]), H_PARAMETER);
        assert_eq!(m.rc(0, H_PUT_TERM_CHAR, &[0x3000_0000, 1, hi, lo]), H_PARAMETER);
        assert_eq!(m.rc(0, H_PUT_TERM_CHAR, &[VTY_REG as u64, 0, hi, lo]), H_SUCCESS);
        assert_eq!(m.fx.console.len(), 15);

        let (rc, out, _) = m.call(0, H_GET_TERM_CHAR, &[VTY_REG as u64]);
        assert_eq!((rc, out[0], out[1], out[2]), (H_SUCCESS, 0, 0, 0));
        m.dev.hvterm.push_input(b"ls -l\n");
        let (rc, out, _) = m.call(0, H_GET_TERM_CHAR, &[VTY_REG as u64]);
        assert_eq!(rc, H_SUCCESS);
        assert_eq!(console::unpack_chars(out[1], out[2], out[0] as usize), b"ls -l\n");
        assert_eq!(m.rc(0, H_GET_TERM_CHAR, &[0]), H_PARAMETER);
    }

    #[test]
    fn cede_sets_ee_and_prod_wakes() {
        let mut m = M::new(2);
        m.st[0].msr &= !msr::EE;
        let (rc, _, o) = m.call(0, H_CEDE, &[]);
        assert_eq!((rc, o), (H_SUCCESS, HcallOutcome::Cede));
        assert_ne!(m.st[0].msr & msr::EE, 0, "H_CEDE enables external interrupts");

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
        assert_eq!(m.rc(0, H_SET_MODE, &[1, H_SET_MODE_RESOURCE_LE, 0, 0]), H_SUCCESS);
        assert_eq!(m.fx.take(), vec![Effect::InterruptLittleEndian(true)]);
        assert!(m.dev.interrupt_le);
        assert_eq!(m.rc(1, H_SET_MODE, &[0, H_SET_MODE_RESOURCE_LE, 0, 0]), H_SUCCESS);
        assert_eq!(m.fx.take(), vec![Effect::InterruptLittleEndian(false)]);
        assert_eq!(m.rc(0, H_SET_MODE, &[2, H_SET_MODE_RESOURCE_LE, 0, 0]), H_UNSUPPORTED_FLAG);
        assert_eq!(m.rc(0, H_SET_MODE, &[1, H_SET_MODE_RESOURCE_LE, 1, 0]), H_P3);
        assert_eq!(m.rc(0, H_SET_MODE, &[1, H_SET_MODE_RESOURCE_LE, 0, 1]), H_P4);
        assert!(m.fx.take().is_empty());
        assert_eq!(m.rc(0, H_SET_MODE, &[3, H_SET_MODE_RESOURCE_ADDR_TRANS_MODE, 0, 0]), H_UNSUPPORTED_FLAG);
        assert_eq!(m.rc(0, H_SET_MODE, &[0, H_SET_MODE_RESOURCE_ADDR_TRANS_MODE, 0, 0]), H_SUCCESS);
        assert_eq!(m.rc(0, H_SET_MODE, &[0, H_SET_MODE_RESOURCE_ADDR_TRANS_MODE, 5, 0]), H_P3);
        for resource in [0, 1, 2, 5, 99] {
            assert_eq!(m.rc(0, H_SET_MODE, &[0, resource, 0, 0]), H_P2, "resource {resource}");
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
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_DTL, 1, dtl]), H_RESOURCE);
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 1, vpa]), H_SUCCESS);
        assert_eq!(m.dev.vpa[1].vpa, vpa);
        assert_eq!(m.dev.vpa[0].vpa, 0);
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_DTL, 1, dtl]), H_SUCCESS);
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_SLB_SHADOW, 1, slb]), H_SUCCESS);
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_DEREGISTER_VPA, 1, 0]), H_RESOURCE, "DTL still registered");
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_DEREGISTER_DTL, 1, 0]), H_SUCCESS);
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_DEREGISTER_SLB_SHADOW, 1, 0]), H_SUCCESS);
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_DEREGISTER_VPA, 1, 0]), H_SUCCESS);
        assert_eq!(m.dev.vpa[1], VpaState::default());

        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 2, vpa]), H_PARAMETER, "no such CPU");
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, 0]), H_HARDWARE);
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, vpa + 8]), H_PARAMETER, "misaligned");
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, 0x100_0000]), H_PARAMETER, "outside RAM");
        m.mem.write(0x1e00 + 4, &640u16.to_be_bytes()).unwrap();
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, 0x1e00]), H_PARAMETER, "crosses a page");
        m.mem.write(0x2000 + 4, &100u16.to_be_bytes()).unwrap();
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, 0x2000]), H_PARAMETER, "too small");
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA | 1, 0, vpa]), H_PARAMETER, "stray flag bits");
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[4 << 45, 0, vpa]), H_PARAMETER, "subfunction 4");
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_VPA, 0, vpa]), H_SUCCESS);
        m.mem.write_u32_be(dtl + 4, 47).unwrap();
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_DTL, 0, dtl]), H_PARAMETER, "DTL smaller than an entry");
        assert_eq!(m.rc(0, H_REGISTER_VPA, &[VPA_REGISTER_SLB_SHADOW, 0, 0]), H_HARDWARE);
    }

    #[test]
    fn xics_hcalls_deliver_an_ipi_between_cpus() {
        let mut m = M::new(2);
        assert_eq!(m.rc(1, H_CPPR, &[0xff]), H_SUCCESS);
        assert_eq!(m.rc(0, H_IPI, &[1, 5]), H_SUCCESS);
        assert_eq!(m.fx.take(), vec![Effect::ExternalIrq { cpu: 1, asserted: true }]);
        let (rc, out, _) = m.call(1, H_XIRR, &[0xff]);
        assert_eq!((rc, out[0]), (H_SUCCESS, 0xff00_0002));
        assert_eq!(m.fx.take(), vec![Effect::ExternalIrq { cpu: 1, asserted: false }]);
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

    #[test]
    fn rtas_through_the_hypercall() {
        let mut m = M::new(2);
        let buf = 0x800u64;
        for (i, w) in [Service::StartCpu.token(), 3, 1, 1, 0x400100, 7, 0x5555].iter().enumerate() {
            m.mem.write_u32_be(buf + 4 * i as u64, *w).unwrap();
        }
        let (rc, _, o) = m.call(0, H_RTAS, &[buf]);
        assert_eq!((rc, o), (H_SUCCESS, HcallOutcome::Continue));
        assert_eq!(m.mem.read_u32_be(buf + 24).unwrap(), 0);
        assert_eq!(m.fx.take(), vec![Effect::StartCpu { cpu: 1, entry: 0x400100, r3: 7 }]);
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
        answer: HptReturn,
    }

    impl FakeHpt {
        fn log(&self, name: &'static str, args: &[u64]) -> HptReturn {
            self.calls.lock().unwrap().push((name, args.to_vec()));
            self.answer
        }
    }

    impl HptHcalls for FakeHpt {
        fn enter(&self, flags: u64, ptex: u64, pteh: u64, ptel: u64) -> HptReturn {
            self.log("enter", &[flags, ptex, pteh, ptel])
        }
        fn remove(&self, flags: u64, ptex: u64, avpn: u64) -> HptReturn {
            self.log("remove", &[flags, ptex, avpn])
        }
        fn read(&self, flags: u64, ptex: u64) -> HptReturn {
            self.log("read", &[flags, ptex])
        }
        fn protect(&self, flags: u64, ptex: u64, avpn: u64) -> HptReturn {
            self.log("protect", &[flags, ptex, avpn])
        }
        fn bulk_remove(&self, args: &[u64; 8]) -> HptReturn {
            self.log("bulk_remove", args)
        }
    }

    #[test]
    fn hpt_hcalls_are_delegated_and_flush_when_told() {
        let mut m = M::new(2);
        let hpt = Arc::new(FakeHpt {
            calls: Mutex::new(Vec::new()),
            answer: HptReturn { ret: H_SUCCESS, out: [11, 22, 33, 44, 55, 66, 77, 88], nout: 2, flush: true },
        });
        m.dev.hpt = Some(hpt.clone());
        let (rc, out, _) = m.call(1, H_REMOVE, &[1, 2, 3]);
        assert_eq!((rc, out[0], out[1], out[2], out[3]), (H_SUCCESS, 11, 22, 3, 0xbad0_0003), "r4, r5 set; r6 up kept");
        assert_eq!(m.fx.take(), vec![Effect::FlushAllTlbs]);
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
        assert_eq!(m.dev.hcall_stats.global_flushes, 5);

        let quiet = Arc::new(FakeHpt { calls: Mutex::new(Vec::new()), answer: HptReturn { ret: H_PTEG_FULL, ..Default::default() } });
        m.dev.hpt = Some(quiet);
        m.fx.take();
        let (rc, out, _) = m.call(0, H_ENTER, &[0, 8, 0, 0]);
        assert_eq!((rc, &out[..5]), (H_PTEG_FULL, &[0, 8, 0, 0, 0xbad0_0004][..]), "registers untouched on failure");
        assert!(m.fx.take().is_empty(), "no flush without an invalidation");
    }

    /// The machine's hash page table behind the dispatcher, as `boot` serves it.
    struct RamHpt {
        hpt: Arc<crate::mmu::Hpt>,
        ram: Arc<crate::softmmu::GuestRam>,
    }

    fn ret(r: crate::mmu::HcallResult) -> HptReturn {
        HptReturn { ret: r.ret, out: r.out, nout: r.n_out, flush: r.flush_all_tlbs }
    }

    impl HptHcalls for RamHpt {
        fn enter(&self, flags: u64, ptex: u64, pteh: u64, ptel: u64) -> HptReturn {
            ret(self.hpt.h_enter(&self.ram, flags, ptex, pteh, ptel))
        }
        fn remove(&self, flags: u64, ptex: u64, avpn: u64) -> HptReturn {
            ret(self.hpt.h_remove(flags, ptex, avpn))
        }
        fn read(&self, flags: u64, ptex: u64) -> HptReturn {
            ret(self.hpt.h_read(flags, ptex))
        }
        fn protect(&self, flags: u64, ptex: u64, avpn: u64) -> HptReturn {
            ret(self.hpt.h_protect(flags, ptex, avpn))
        }
        fn bulk_remove(&self, args: &[u64; 8]) -> HptReturn {
            ret(self.hpt.h_bulk_remove(*args))
        }
    }

    #[test]
    fn hpt_hcalls_on_the_machine_hpt() {
        use crate::mmu::{Hpt, hpte_r, hpte_v};
        use crate::softmmu::GuestRam;
        let mut m = M::new(2);
        let ram = Arc::new(GuestRam::new(256 << 20).unwrap());
        let hpt = Arc::new(Hpt::new(18).unwrap());
        m.dev.hpt = Some(Arc::new(RamHpt { hpt, ram }));
        let pteh = |avpn: u64| (avpn << 7) | hpte_v::VALID;
        let ptel = |page: u64| (page << 12) | hpte_r::M | 0x2;
        // Eight entries fill a PTEG; the ninth finds it full.
        for i in 0..8u64 {
            let (rc, out, _) = m.call(0, H_ENTER, &[0, 0x40, pteh(i + 1), ptel(i)]);
            assert_eq!((rc, out[0]), (H_SUCCESS, 0x40 + i));
        }
        assert_eq!(m.rc(0, H_ENTER, &[0, 0x40, pteh(99), ptel(9)]), H_PTEG_FULL);
        assert_eq!(m.rc(0, H_ENTER, &[0, 0x40, pteh(99), ptel(9) | 0x20]), H_PARAMETER, "RAM must be WIMG=M");
        assert!(m.fx.take().is_empty(), "H_ENTER flushes nothing");
        let (rc, out, _) = m.call(1, H_READ, &[0, 0x43]);
        assert_eq!((rc, out[0], out[1]), (H_SUCCESS, pteh(4), ptel(3)));
        let (rc, out, _) = m.call(1, H_REMOVE, &[0, 0x43, 0]);
        assert_eq!((rc, out[0], out[1]), (H_SUCCESS, pteh(4), ptel(3)));
        assert_eq!(m.fx.take(), vec![Effect::FlushAllTlbs]);
        assert_eq!(m.rc(1, H_REMOVE, &[0, 0x43, 0]), H_NOT_FOUND);
        assert!(m.fx.take().is_empty(), "nothing removed, nothing flushed");
        assert_eq!(m.rc(0, H_PROTECT, &[1, 0x44, 0]), H_SUCCESS);
        assert_eq!(m.fx.take(), vec![Effect::FlushAllTlbs]);
        let end = 0xc000_0000_0000_0000u64;
        let req = |ptex: u64| 0x4000_0000_0000_0000 | ptex;
        let (rc, out, _) = m.call(0, H_BULK_REMOVE, &[req(0x40), 0, req(0x41), 0, end, 0, 0, 0]);
        assert_eq!(rc, H_SUCCESS);
        assert_eq!(out[0] >> 62, 2, "a response word");
        assert_eq!(m.fx.take(), vec![Effect::FlushAllTlbs]);
        assert_eq!(m.rc(0, H_ENTER, &[0, 0x40, pteh(50), ptel(50)]), H_SUCCESS, "a slot is free again");
        assert_eq!(m.rc(0, H_REMOVE, &[0, 1 << 40, 0]), H_PARAMETER);
        assert_eq!(m.dev.hcall_stats.global_flushes, 3);
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
}
