//! XICS, the interrupt controller of a POWER8 pseries partition as PAPR presents it.
//!
//! One presentation controller (ICP) per vCPU holds XIRR = CPPR << 24 | XISR, the priority
//! of the presented interrupt and MFRR, the IPI request register. One source controller (ICS)
//! holds, per source, its server, priority (0xff = masked) and delivery state. Priorities:
//! a lower number is more favoured, 0xff is least favoured. The IPI is source 2 of each ICP;
//! ICS sources are numbered from [`IRQ_BASE`], as on QEMU's pseries.
//!
//! The output of an ICP is the external interrupt line of its vCPU, asserted while XISR is
//! non-zero; level changes are reported through [`MachineEffects::set_external_irq`].

use super::effects::MachineEffects;
use std::collections::BTreeSet;

/// Source number of the inter-processor interrupt (MFRR).
pub const XICS_IPI: u32 = 2;
/// First source number of the ICS.
pub const IRQ_BASE: u32 = 0x1000;
/// Number of ICS sources.
pub const NR_IRQS: u32 = 0x1000;
/// Least favoured priority; as a source priority it means "masked".
pub const PRIO_MASKED: u8 = 0xff;

const XISR_MASK: u32 = 0x00ff_ffff;

/// Presentation controller of one vCPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Icp {
    xirr: u32,
    pending_priority: u8,
    mfrr: u8,
    /// Level last reported to the machine.
    line: bool,
}

impl Icp {
    /// Reset state: CPPR 0 (nothing can be presented until the guest lowers it), no
    /// interrupt pending, no IPI requested.
    fn new() -> Self {
        Self {
            xirr: 0,
            pending_priority: PRIO_MASKED,
            mfrr: PRIO_MASKED,
            line: false,
        }
    }

    pub fn cppr(&self) -> u8 {
        (self.xirr >> 24) as u8
    }

    pub fn xisr(&self) -> u32 {
        self.xirr & XISR_MASK
    }

    pub fn xirr(&self) -> u32 {
        self.xirr
    }

    pub fn mfrr(&self) -> u8 {
        self.mfrr
    }

    pub fn pending_priority(&self) -> u8 {
        self.pending_priority
    }

    fn set_cppr_raw(&mut self, cppr: u8) {
        self.xirr = (self.xirr & XISR_MASK) | ((cppr as u32) << 24);
    }

    fn set_xisr(&mut self, xisr: u32) {
        self.xirr = (self.xirr & !XISR_MASK) | (xisr & XISR_MASK);
    }
}

mod status {
    /// LSI: the device holds the line asserted.
    pub const ASSERTED: u8 = 1;
    /// LSI: presented to an ICP and not yet EOIed.
    pub const SENT: u8 = 2;
    /// MSI: an ICP turned it down; resent when priorities change.
    pub const REJECTED: u8 = 4;
    /// MSI: fired while masked; delivered when unmasked.
    pub const MASKED_PENDING: u8 = 8;
}

/// One interrupt source of the ICS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    pub server: u32,
    pub priority: u8,
    /// Priority restored by ibm,int-on.
    pub saved_priority: u8,
    /// Level-sensitive (else message-signalled, i.e. edge).
    pub lsi: bool,
    status: u8,
}

impl Source {
    fn new() -> Self {
        Self {
            server: 0,
            priority: PRIO_MASKED,
            saved_priority: PRIO_MASKED,
            lsi: false,
            status: 0,
        }
    }
}

/// The whole interrupt controller: an ICP per vCPU and the ICS.
#[derive(Clone, Debug)]
pub struct Xics {
    icps: Vec<Icp>,
    sources: Vec<Source>,
    /// Sources with a non-zero status, so that a resend does not scan all of them.
    active: BTreeSet<u32>,
}

impl Xics {
    pub fn new(ncpus: usize) -> Self {
        Self {
            icps: vec![Icp::new(); ncpus],
            sources: vec![Source::new(); NR_IRQS as usize],
            active: BTreeSet::new(),
        }
    }

    /// Back to the reset state; lines that were asserted are lowered.
    pub fn reset(&mut self, fx: &mut dyn MachineEffects) {
        let n = self.icps.len();
        let lines: Vec<bool> = self.icps.iter().map(|i| i.line).collect();
        *self = Self::new(n);
        for (cpu, was) in lines.into_iter().enumerate() {
            if was {
                fx.set_external_irq(cpu, false);
            }
        }
    }

    pub fn ncpus(&self) -> usize {
        self.icps.len()
    }

    pub fn icp(&self, cpu: usize) -> &Icp {
        &self.icps[cpu]
    }

    /// Whether `irq` is an ICS source number.
    pub fn valid_irq(irq: u32) -> bool {
        (IRQ_BASE..IRQ_BASE + NR_IRQS).contains(&irq)
    }

    pub fn source(&self, irq: u32) -> Option<&Source> {
        Self::valid_irq(irq).then(|| &self.sources[(irq - IRQ_BASE) as usize])
    }

    /// Makes `irq` level-sensitive (`true`) or message-signalled. Devices call this once.
    pub fn set_lsi(&mut self, irq: u32, lsi: bool) {
        if let Some(i) = Self::src_index(irq) {
            self.sources[i].lsi = lsi;
        }
    }

    /// H_CPPR (and the CPPR half of H_EOI's bookkeeping).
    pub fn set_cppr(&mut self, cpu: usize, cppr: u8, fx: &mut dyn MachineEffects) {
        self.cppr_inner(cpu, cppr);
        self.sync_lines(fx);
    }

    /// H_IPI on `cpu`'s ICP.
    pub fn set_mfrr(&mut self, cpu: usize, mfrr: u8, fx: &mut dyn MachineEffects) {
        let icp = &mut self.icps[cpu];
        icp.mfrr = mfrr;
        if mfrr < icp.cppr() {
            self.check_ipi(cpu);
        }
        self.sync_lines(fx);
    }

    /// H_XIRR: accept the presented interrupt. Returns the old XIRR (old CPPR and the source,
    /// 0 if none); CPPR becomes the accepted interrupt's priority (0xff when none was pending).
    pub fn accept(&mut self, cpu: usize, fx: &mut dyn MachineEffects) -> u32 {
        let icp = &mut self.icps[cpu];
        let xirr = icp.xirr;
        icp.xirr = (icp.pending_priority as u32) << 24;
        icp.pending_priority = PRIO_MASKED;
        self.sync_lines(fx);
        xirr
    }

    /// H_EOI: end of the interrupt `xirr & 0xffffff`, and CPPR := `xirr >> 24`.
    pub fn eoi(&mut self, cpu: usize, xirr: u32, fx: &mut dyn MachineEffects) {
        self.icps[cpu].set_cppr_raw((xirr >> 24) as u8);
        let irq = xirr & XISR_MASK;
        if let Some(i) = Self::src_index(irq)
            && self.sources[i].lsi
        {
            self.update_status(i, |s| s & !status::SENT);
        }
        if self.icps[cpu].xisr() == 0 {
            self.resend(cpu);
        }
        self.sync_lines(fx);
    }

    /// A device changed the level of source `irq` (for an MSI, `true` fires it).
    pub fn set_irq(&mut self, irq: u32, level: bool, fx: &mut dyn MachineEffects) {
        let Some(i) = Self::src_index(irq) else {
            return;
        };
        let s = self.sources[i];
        if s.lsi {
            self.update_status(i, |st| {
                if level {
                    st | status::ASSERTED
                } else {
                    st & !status::ASSERTED
                }
            });
            self.resend_lsi(i);
        } else if level {
            if s.priority == PRIO_MASKED {
                self.update_status(i, |st| st | status::MASKED_PENDING);
            } else {
                self.present(s.server as usize, irq, s.priority);
            }
        }
        self.sync_lines(fx);
    }

    /// ibm,set-xive (and int-on/int-off): route `irq` to `server` at `priority`.
    /// The caller has validated `irq` and `server`.
    pub fn write_xive(
        &mut self,
        irq: u32,
        server: u32,
        priority: u8,
        saved_priority: u8,
        fx: &mut dyn MachineEffects,
    ) {
        let Some(i) = Self::src_index(irq) else {
            return;
        };
        let s = &mut self.sources[i];
        s.server = server;
        s.priority = priority;
        s.saved_priority = saved_priority;
        if s.lsi {
            self.resend_lsi(i);
        } else if s.status & status::MASKED_PENDING != 0 && priority != PRIO_MASKED {
            self.update_status(i, |st| st & !status::MASKED_PENDING);
            self.present(server as usize, irq, priority);
        }
        self.sync_lines(fx);
    }

    fn src_index(irq: u32) -> Option<usize> {
        Self::valid_irq(irq).then(|| (irq - IRQ_BASE) as usize)
    }

    fn update_status(&mut self, i: usize, f: impl FnOnce(u8) -> u8) {
        let s = &mut self.sources[i];
        s.status = f(s.status);
        if s.status == 0 {
            self.active.remove(&(i as u32));
        } else {
            self.active.insert(i as u32);
        }
    }

    fn cppr_inner(&mut self, cpu: usize, cppr: u8) {
        let icp = &mut self.icps[cpu];
        let old = icp.cppr();
        icp.set_cppr_raw(cppr);
        if cppr < old {
            // More favoured: a presented interrupt that no longer beats CPPR is withdrawn.
            if icp.xisr() != 0 && cppr <= icp.pending_priority {
                let old_xisr = icp.xisr();
                icp.set_xisr(0);
                icp.pending_priority = PRIO_MASKED;
                self.reject(old_xisr);
            }
        } else if icp.xisr() == 0 {
            self.resend(cpu);
        }
    }

    /// Presents the IPI if MFRR beats what is presented.
    fn check_ipi(&mut self, cpu: usize) {
        let icp = &mut self.icps[cpu];
        if icp.xisr() != 0 && icp.pending_priority <= icp.mfrr {
            return;
        }
        let displaced = icp.xisr();
        icp.set_xisr(XICS_IPI);
        icp.pending_priority = icp.mfrr;
        if displaced != 0 {
            self.reject(displaced);
        }
    }

    /// Re-offers what was turned away: the IPI of `cpu`, then every rejected source.
    fn resend(&mut self, cpu: usize) {
        if self.icps[cpu].mfrr < self.icps[cpu].cppr() {
            self.check_ipi(cpu);
        }
        let active: Vec<u32> = self.active.iter().copied().collect();
        for i in active {
            let i = i as usize;
            if self.sources[i].lsi {
                self.resend_lsi(i);
            } else if self.sources[i].status & status::REJECTED != 0 {
                self.update_status(i, |st| st & !status::REJECTED);
                let s = self.sources[i];
                if s.priority != PRIO_MASKED {
                    self.present(s.server as usize, IRQ_BASE + i as u32, s.priority);
                }
            }
        }
    }

    fn resend_lsi(&mut self, i: usize) {
        let s = self.sources[i];
        if s.priority != PRIO_MASKED
            && s.status & status::ASSERTED != 0
            && s.status & status::SENT == 0
        {
            self.update_status(i, |st| st | status::SENT);
            self.present(s.server as usize, IRQ_BASE + i as u32, s.priority);
        }
    }

    /// An ICP turned `irq` down (or it was displaced): the ICS keeps it for a resend.
    fn reject(&mut self, irq: u32) {
        if let Some(i) = Self::src_index(irq) {
            if self.sources[i].lsi {
                self.update_status(i, |st| st & !status::SENT);
            } else {
                self.update_status(i, |st| st | status::REJECTED);
            }
        }
    }

    /// The ICS offers `irq` at `priority` to the ICP of `server`.
    fn present(&mut self, server: usize, irq: u32, priority: u8) {
        let Some(icp) = self.icps.get_mut(server) else {
            // Routed to a server that does not exist: it can never be taken.
            self.reject(irq);
            return;
        };
        if priority >= icp.cppr() || (icp.xisr() != 0 && icp.pending_priority <= priority) {
            self.reject(irq);
            return;
        }
        let displaced = icp.xisr();
        icp.set_xisr(irq);
        icp.pending_priority = priority;
        if displaced != 0 {
            self.reject(displaced);
        }
    }

    /// Reports every ICP whose output level changed.
    fn sync_lines(&mut self, fx: &mut dyn MachineEffects) {
        for (cpu, icp) in self.icps.iter_mut().enumerate() {
            let level = icp.xisr() != 0;
            if level != icp.line {
                icp.line = level;
                fx.set_external_irq(cpu, level);
            }
        }
    }

    /// Whether `cpu`'s line is asserted (an interrupt is presented).
    pub fn line(&self, cpu: usize) -> bool {
        self.icps[cpu].line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::pseries::effects::{Effect, Recorder};

    fn setup(n: usize) -> (Xics, Recorder) {
        let mut x = Xics::new(n);
        let mut fx = Recorder::new(n);
        for cpu in 0..n {
            x.set_cppr(cpu, 0xff, &mut fx);
        }
        fx.take();
        (x, fx)
    }

    #[test]
    fn reset_state_presents_nothing() {
        let x = Xics::new(2);
        assert_eq!(x.icp(1).cppr(), 0);
        assert_eq!(x.icp(1).mfrr(), 0xff);
        assert_eq!(x.icp(1).xisr(), 0);
        assert_eq!(x.source(IRQ_BASE).unwrap().priority, 0xff);
        assert!(x.source(IRQ_BASE - 1).is_none());
        assert!(x.source(IRQ_BASE + NR_IRQS).is_none());
    }

    #[test]
    fn ipi_raises_accept_and_eoi() {
        let (mut x, mut fx) = setup(2);
        x.set_mfrr(1, 5, &mut fx);
        assert_eq!(
            fx.take(),
            vec![Effect::ExternalIrq {
                cpu: 1,
                asserted: true
            }]
        );
        assert_eq!(x.icp(1).xirr(), 0xff00_0002);
        let xirr = x.accept(1, &mut fx);
        assert_eq!(xirr, 0xff00_0002);
        assert_eq!(
            fx.take(),
            vec![Effect::ExternalIrq {
                cpu: 1,
                asserted: false
            }]
        );
        assert_eq!(
            x.icp(1).cppr(),
            5,
            "accept sets CPPR to the interrupt's priority"
        );
        // Linux clears MFRR before EOI; with MFRR still set the IPI would come back.
        x.set_mfrr(1, 0xff, &mut fx);
        x.eoi(1, xirr, &mut fx);
        assert_eq!(x.icp(1).cppr(), 0xff);
        assert!(fx.take().is_empty());
        assert!(!x.line(1));
    }

    #[test]
    fn ipi_still_requested_at_eoi_is_presented_again() {
        let (mut x, mut fx) = setup(1);
        x.set_mfrr(0, 4, &mut fx);
        let xirr = x.accept(0, &mut fx);
        fx.take();
        x.eoi(0, xirr, &mut fx);
        assert_eq!(
            fx.take(),
            vec![Effect::ExternalIrq {
                cpu: 0,
                asserted: true
            }]
        );
        assert_eq!(x.icp(0).xisr(), XICS_IPI);
    }

    #[test]
    fn ipi_not_more_favoured_than_cppr_waits() {
        let (mut x, mut fx) = setup(1);
        x.set_cppr(0, 5, &mut fx);
        x.set_mfrr(0, 5, &mut fx);
        assert!(fx.take().is_empty());
        assert_eq!(x.icp(0).xisr(), 0);
        x.set_mfrr(0, 6, &mut fx);
        assert!(fx.take().is_empty());
        // Lowering the CPPR (less favoured) presents it.
        x.set_cppr(0, 7, &mut fx);
        assert_eq!(
            fx.take(),
            vec![Effect::ExternalIrq {
                cpu: 0,
                asserted: true
            }]
        );
        assert_eq!(x.icp(0).xirr(), 0x0700_0002);
    }

    #[test]
    fn raising_cppr_withdraws_presented_interrupt() {
        let (mut x, mut fx) = setup(1);
        x.set_mfrr(0, 5, &mut fx);
        fx.take();
        x.set_cppr(0, 5, &mut fx);
        assert_eq!(
            fx.take(),
            vec![Effect::ExternalIrq {
                cpu: 0,
                asserted: false
            }]
        );
        assert_eq!(x.icp(0).xisr(), 0);
        assert_eq!(x.icp(0).pending_priority(), 0xff);
        // A CPPR still less favoured than the pending one keeps it.
        x.set_cppr(0, 0xff, &mut fx);
        assert_eq!(
            fx.take(),
            vec![Effect::ExternalIrq {
                cpu: 0,
                asserted: true
            }]
        );
        x.set_cppr(0, 6, &mut fx);
        assert!(fx.take().is_empty());
        assert_eq!(x.icp(0).xisr(), XICS_IPI);
    }

    #[test]
    fn accept_with_nothing_pending() {
        let (mut x, mut fx) = setup(1);
        x.set_cppr(0, 0x10, &mut fx);
        assert_eq!(x.accept(0, &mut fx), 0x1000_0000);
        assert_eq!(x.icp(0).cppr(), 0xff);
        assert!(fx.take().is_empty());
    }

    #[test]
    fn msi_source_routing_and_priority() {
        let (mut x, mut fx) = setup(2);
        let irq = IRQ_BASE + 0x10;
        // Masked: remembered, delivered on unmask.
        x.set_irq(irq, true, &mut fx);
        assert!(fx.take().is_empty());
        x.write_xive(irq, 1, 5, 5, &mut fx);
        assert_eq!(
            fx.take(),
            vec![Effect::ExternalIrq {
                cpu: 1,
                asserted: true
            }]
        );
        assert_eq!(x.icp(1).xirr(), 0xff00_0000 | irq);
        let xirr = x.accept(1, &mut fx);
        assert_eq!(xirr & 0xffffff, irq);
        x.eoi(1, xirr, &mut fx);
        assert!(!x.line(1));
        // Unmasked source fires straight to its server.
        x.set_irq(irq, true, &mut fx);
        assert!(x.line(1));
        assert!(!x.line(0));
    }

    #[test]
    fn rejected_msi_is_resent_when_cppr_drops() {
        let (mut x, mut fx) = setup(1);
        let irq = IRQ_BASE + 3;
        x.write_xive(irq, 0, 5, 5, &mut fx);
        x.set_cppr(0, 4, &mut fx);
        x.set_irq(irq, true, &mut fx);
        assert!(!x.line(0), "priority 5 does not beat CPPR 4");
        x.set_cppr(0, 0xff, &mut fx);
        assert!(x.line(0));
        assert_eq!(x.icp(0).xisr(), irq);
    }

    #[test]
    fn more_favoured_interrupt_displaces_and_displaced_one_returns() {
        let (mut x, mut fx) = setup(1);
        let irq = IRQ_BASE + 7;
        x.write_xive(irq, 0, 6, 6, &mut fx);
        x.set_irq(irq, true, &mut fx);
        assert_eq!(x.icp(0).xisr(), irq);
        x.set_mfrr(0, 2, &mut fx);
        assert_eq!(x.icp(0).xisr(), XICS_IPI, "IPI at 2 beats source at 6");
        let xirr = x.accept(0, &mut fx);
        assert_eq!(xirr, 0xff00_0002);
        x.set_mfrr(0, 0xff, &mut fx);
        x.eoi(0, xirr, &mut fx);
        assert_eq!(
            x.icp(0).xisr(),
            irq,
            "the displaced source is presented again"
        );
        assert!(x.line(0));
    }

    #[test]
    fn less_favoured_interrupt_does_not_displace() {
        let (mut x, mut fx) = setup(1);
        x.set_mfrr(0, 3, &mut fx);
        let irq = IRQ_BASE + 1;
        x.write_xive(irq, 0, 3, 3, &mut fx);
        x.set_irq(irq, true, &mut fx);
        assert_eq!(
            x.icp(0).xisr(),
            XICS_IPI,
            "equal priority does not displace"
        );
    }

    #[test]
    fn lsi_reasserts_after_eoi_while_level_high() {
        let (mut x, mut fx) = setup(1);
        let irq = IRQ_BASE + 0x100;
        x.set_lsi(irq, true);
        x.write_xive(irq, 0, 5, 5, &mut fx);
        x.set_irq(irq, true, &mut fx);
        let xirr = x.accept(0, &mut fx);
        assert_eq!(xirr & 0xffffff, irq);
        assert!(!x.line(0));
        x.eoi(0, xirr, &mut fx);
        assert!(x.line(0), "still asserted: presented again");
        let xirr = x.accept(0, &mut fx);
        x.set_irq(irq, false, &mut fx);
        x.eoi(0, xirr, &mut fx);
        assert!(!x.line(0));
    }

    #[test]
    fn int_off_masks_and_saves_priority() {
        let (mut x, mut fx) = setup(1);
        let irq = IRQ_BASE + 9;
        x.write_xive(irq, 0, 5, 5, &mut fx);
        // int-off: priority 0xff, saved = current.
        let s = *x.source(irq).unwrap();
        x.write_xive(irq, s.server, 0xff, s.priority, &mut fx);
        x.set_irq(irq, true, &mut fx);
        assert!(!x.line(0));
        let s = *x.source(irq).unwrap();
        assert_eq!((s.priority, s.saved_priority), (0xff, 5));
        x.write_xive(irq, s.server, s.saved_priority, s.saved_priority, &mut fx);
        assert!(
            x.line(0),
            "the interrupt that fired while off is delivered by int-on"
        );
    }

    #[test]
    fn source_routed_to_missing_server_never_presents() {
        let (mut x, mut fx) = setup(1);
        let irq = IRQ_BASE;
        x.write_xive(irq, 9, 1, 1, &mut fx);
        x.set_irq(irq, true, &mut fx);
        assert!(fx.take().is_empty());
    }

    #[test]
    fn reset_lowers_lines() {
        let (mut x, mut fx) = setup(2);
        x.set_mfrr(1, 1, &mut fx);
        fx.take();
        x.reset(&mut fx);
        assert_eq!(
            fx.take(),
            vec![Effect::ExternalIrq {
                cpu: 1,
                asserted: false
            }]
        );
        assert_eq!(x.icp(1).cppr(), 0);
    }
}
