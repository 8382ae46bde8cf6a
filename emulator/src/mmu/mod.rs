//! The POWER8 hash MMU as a pseries partition sees it (Power ISA 2.07 Book III-S ch. 5).
//!
//! - [`slb`]: segment lookup in the 32-entry SLB of a vCPU (256 MB and 1 TB segments) and the
//!   page sizes a segment may use.
//! - [`hpt`]: the hashed page table, owned by the machine and shared by every vCPU thread;
//!   the hypercalls that change it (H_ENTER, H_REMOVE, H_READ, H_PROTECT, H_BULK_REMOVE).
//! - [`SystemSpace`]: the TLB fill path of one vCPU: real mode, SLB, HPT search, protection,
//!   R/C updates, and the storage interrupts they raise.
//!
//! Real mode follows QEMU 7.2's pseries machine (a virtual hypervisor): the top 4 bits of
//! the effective address are ignored and the rest is the guest physical address; there is no
//! RMA limit (VRMA/RMOR are the hypervisor's business and QEMU does not apply them to a
//! pseries guest). An access to a physical address outside RAM — in real mode or through an
//! HPTE — raises a machine check (the behaviour of hardware and of later QEMU versions;
//! QEMU 7.2 silently reads zeros), so guest bugs are visible.
//!
//! Storage keys (AMR/IAMR against the HPTE key) are not enforced: the device tree offers no
//! `ibm,processor-storage-keys`, so Linux does not use them.

pub mod hpt;
pub mod slb;
mod space;

pub use hpt::{HcallResult, Hpt, HptError};
pub use slb::{PageSize, SegmentPageSizes};
pub use space::{MmuStats, SystemSpace};

/// DSISR bits of a data storage interrupt (SRR1 bits of the same meaning for ISI).
pub mod dsisr {
    /// No HPTE translates the address.
    pub const NOPTE: u32 = 0x4000_0000;
    /// Instruction fetch from a no-execute or guarded page, or a no-execute segment (SRR1).
    pub const NOEXEC_GUARD: u32 = 0x1000_0000;
    /// The page protection (PP with Ks/Kp) forbids the access.
    pub const PROTFAULT: u32 = 0x0800_0000;
    /// The access was a store.
    pub const STORE: u32 = 0x0200_0000;
}

/// HPTE doubleword 0 (the "V" word) fields.
pub mod hpte_v {
    /// Segment size B (bits 0:1): 0 = 256 MB, 1 = 1 TB.
    pub const SSIZE_SHIFT: u32 = 62;
    pub const SSIZE_1T: u64 = 1 << 62;
    /// Abbreviated virtual page number, compared with what the SLB and EA give.
    pub const AVPN: u64 = 0x3fff_ffff_ffff_ff80;
    /// Bits compared when searching: B, AVPN, H and V (not L, not the software bits).
    pub const COMPARE: u64 = 0xffff_ffff_ffff_ff83;
    /// Software-use bit Linux uses for bolted (kernel) entries.
    pub const BOLTED: u64 = 0x10;
    /// Large page: the page size is encoded in the low RPN bits of doubleword 1.
    pub const LARGE: u64 = 0x4;
    /// Found through the secondary hash.
    pub const SECONDARY: u64 = 0x2;
    pub const VALID: u64 = 0x1;
}

/// HPTE doubleword 1 (the "R" word) fields.
pub mod hpte_r {
    pub const PP0: u64 = 1 << 63;
    pub const KEY_HI: u64 = 0x3000_0000_0000_0000;
    /// Real page number (with the large-page size encoding in its low bits).
    pub const RPN: u64 = 0x0fff_ffff_ffff_f000;
    pub const KEY_LO: u64 = 0xe00;
    /// Referenced.
    pub const R: u64 = 0x100;
    /// Changed.
    pub const C: u64 = 0x80;
    pub const W: u64 = 0x40;
    pub const I: u64 = 0x20;
    pub const M: u64 = 0x10;
    pub const G: u64 = 0x8;
    pub const WIMG: u64 = 0x78;
    /// No-execute.
    pub const N: u64 = 0x4;
    pub const PP: u64 = 0x3;
}

/// Effective address bits kept in real mode (the top 4 are ignored).
pub const REAL_MODE_MASK: u64 = 0x0fff_ffff_ffff_ffff;

/// `ibm,processor-segment-sizes` of POWER8: 256 MB and 1 TB segments (2^28, 2^40).
pub const SEGMENT_SIZE_SHIFTS: [u32; 2] = [28, 40];
