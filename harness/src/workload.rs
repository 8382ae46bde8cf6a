//! The guests a sweep can run (`--workload`): the bundled bare-metal `mkbench`, and the two
//! Linux guests built from Debian packages (`lockscale guest build`, see guest/).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// The bundled bare-metal guest (workloads/mkbench/mkbench.elf).
    #[default]
    Mkbench,
    /// Debian's kernel + an initramfs whose /init runs `make -j N` of a generated C project.
    LinuxMake,
    /// The same guest compiling a Linux kernel from Debian's linux-source.
    KernelMake,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Mkbench => "mkbench",
            Workload::LinuxMake => "linux-make",
            Workload::KernelMake => "kernel-make",
        }
    }

    /// Parses the name stored in results files (`workload.name`).
    pub fn from_name(s: &str) -> Option<Workload> {
        [Workload::Mkbench, Workload::LinuxMake, Workload::KernelMake]
            .into_iter()
            .find(|w| w.name() == s)
    }

    /// Whether the guest is Linux (kernel + initramfs) rather than the bare-metal mkbench.
    pub fn is_linux(self) -> bool {
        self != Workload::Mkbench
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for w in [Workload::Mkbench, Workload::LinuxMake, Workload::KernelMake] {
            assert_eq!(Workload::from_name(w.name()), Some(w));
        }
        assert_eq!(Workload::from_name("linux"), None);
        assert_eq!(Workload::default(), Workload::Mkbench);
    }
}
