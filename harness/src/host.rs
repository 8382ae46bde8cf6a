//! Host metadata recorded with every sweep, so that results from different machines are never
//! compared by accident (`merge` and `gate` look at it).

use sysinfo::{CpuRefreshKind, RefreshKind, System};

use crate::model::HostInfo;
use crate::util::sha256_hex;

/// Logical cores usable by this process (respects CPU affinity masks and cgroup limits where
/// the standard library sees them).
pub fn logical_cores() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

pub fn load_average() -> Option<[f64; 3]> {
    let l = System::load_average().ok()?;
    Some([l.one, l.five, l.fifteen])
}

/// Collects what is known about this machine; fields the OS does not tell are "unknown".
pub fn collect() -> HostInfo {
    let sys = System::new_with_specifics(
        RefreshKind::nothing()
            .with_cpu(CpuRefreshKind::nothing())
            .with_memory(sysinfo::MemoryRefreshKind::everything()),
    )
    .ok();
    let cpu_model = sys
        .as_ref()
        .and_then(|s| s.cpus().first().map(|c| c.brand().trim().to_string()))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into());
    let memory_bytes = sys.as_ref().map(|s| s.total_memory()).unwrap_or(0);
    let hostname = System::host_name().unwrap_or_default();
    HostInfo {
        cpu_model,
        arch: System::cpu_arch(),
        logical_cores: logical_cores(),
        physical_cores: System::physical_core_count().ok().map(|n| n as u32),
        memory_bytes,
        os: System::long_os_version().unwrap_or_else(|_| std::env::consts::OS.to_string()),
        kernel: System::kernel_version().unwrap_or_else(|_| "unknown".into()),
        hostname_hash: sha256_hex(hostname.as_bytes())[..16].to_string(),
        load_before: load_average(),
        load_after: None,
    }
}

/// Whether two hosts are of the same type: same CPU model, core counts and (within 5%)
/// memory. Host names and load are allowed to differ.
pub fn same_type(a: &HostInfo, b: &HostInfo) -> bool {
    let mem_close = {
        let (x, y) = (a.memory_bytes as f64, b.memory_bytes as f64);
        x.max(y) == 0.0 || (x - y).abs() / x.max(y) <= 0.05
    };
    a.cpu_model == b.cpu_model
        && a.arch == b.arch
        && a.logical_cores == b.logical_cores
        && a.physical_cores == b.physical_cores
        && mem_close
}

/// One-line description for reports.
pub fn describe(h: &HostInfo) -> String {
    format!(
        "{} ({} logical / {} physical cores, {:.1} GiB, {}, kernel {})",
        h.cpu_model,
        h.logical_cores,
        h.physical_cores
            .map(|n| n.to_string())
            .unwrap_or_else(|| "?".into()),
        h.memory_bytes as f64 / (1u64 << 30) as f64,
        h.os,
        h.kernel
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_something_sensible() {
        let h = collect();
        assert!(h.logical_cores >= 1);
        assert_eq!(h.hostname_hash.len(), 16);
        assert!(same_type(&h, &h));
        let mut other = h.clone();
        other.logical_cores += 1;
        assert!(!same_type(&h, &other));
    }
}
