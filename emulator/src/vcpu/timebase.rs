//! The timebase (`mftb`): the host's monotonic clock, or virtual host time (sync/vclock/),
//! at the 512 MHz of POWER8 pseries.

use std::sync::Arc;

/// Timebase source (`mftb`); the system emulator shares one across vCPUs.
pub trait TimeBase: Send + Sync {
    fn now(&self) -> u64;
}

/// 512 MHz timebase from the host's monotonic clock, as on POWER8 pseries.
pub struct HostTimeBase {
    start: std::time::Instant,
}

impl HostTimeBase {
    pub const HZ: u64 = 512_000_000;
    pub fn new() -> Self {
        Self {
            start: std::time::Instant::now(),
        }
    }
}

/// Timebase ticks (512 MHz) of `ns` nanoseconds.
#[inline]
pub fn ns_to_tb(ns: u64) -> u64 {
    ns.wrapping_mul(HostTimeBase::HZ / 1_000_000) / 1000
}

/// Nanoseconds of `tb` timebase ticks.
#[inline]
pub fn tb_to_ns(tb: u64) -> u64 {
    (tb as u128 * 1000 / (HostTimeBase::HZ / 1_000_000) as u128) as u64
}

impl Default for HostTimeBase {
    fn default() -> Self {
        Self::new()
    }
}

impl HostTimeBase {
    /// When the timebase was 0.
    pub fn start(&self) -> std::time::Instant {
        self.start
    }
}

impl TimeBase for HostTimeBase {
    fn now(&self) -> u64 {
        ns_to_tb(self.start.elapsed().as_nanos() as u64)
    }
}

/// The timebase on virtual host time: the reading vCPU's clock, monotonic across vCPUs
/// (sync/vclock/).
pub struct VirtualTimeBase(pub Arc<crate::sync::vclock::VirtualTime>);

impl TimeBase for VirtualTimeBase {
    fn now(&self) -> u64 {
        ns_to_tb(self.0.tb_ns())
    }
}
