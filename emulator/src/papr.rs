//! Numbers of the PAPR hypervisor interface that more than one layer uses: the hypercall
//! return codes (r3 after `sc 1`; values as in LoPAPR and Linux `asm/hvcall.h`). The
//! hypercalls themselves (opcodes, names, handlers) are one table in
//! `machine::pseries::hcall`.

pub const H_SUCCESS: i64 = 0;
pub const H_BUSY: i64 = 1;
pub const H_CONSTRAINED: i64 = 4;
/// H_JOIN: the caller is the last processor of the partition that has not joined.
pub const H_CONTINUE: i64 = 18;
pub const H_HARDWARE: i64 = -1;
pub const H_FUNCTION: i64 = -2;
pub const H_PRIVILEGE: i64 = -3;
pub const H_PARAMETER: i64 = -4;
pub const H_BAD_MODE: i64 = -5;
pub const H_PTEG_FULL: i64 = -6;
pub const H_NOT_FOUND: i64 = -7;
pub const H_RESERVED_DABR: i64 = -8;
pub const H_RESOURCE: i64 = -16;
pub const H_P2: i64 = -55;
pub const H_P3: i64 = -56;
pub const H_P4: i64 = -57;
pub const H_UNSUPPORTED_FLAG: i64 = -256;
