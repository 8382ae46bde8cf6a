//! The results file (`lockscale.results/1`): one JSON document per sweep.
//!
//! These types are the single definition of the format: serde reads and writes them and
//! schemars derives results/schema.json from them, so the schema cannot drift from the code.
//! Fields are only ever added (with defaults), never renamed, within one schema version.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::sizes::Mode;

/// The value of the `schema` field of every results file this version writes.
pub const SCHEMA_ID: &str = "lockscale.results/1";

/// One sweep: where it ran, what it ran, and every run.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct ResultsFile {
    /// Always `lockscale.results/1`.
    #[schemars(extend("const" = "lockscale.results/1"))]
    pub schema: String,
    /// Name of the sweep; plots default to `plots/<name>.png`.
    pub name: String,
    /// When the sweep started (UTC, RFC 3339).
    pub created: String,
    /// When the file was last written (UTC, RFC 3339).
    pub updated: String,
    /// True once every planned run of this file's share has a recorded outcome.
    pub complete: bool,
    /// The harness that wrote the file.
    pub harness: HarnessInfo,
    /// The machine the runs ran on.
    pub host: HostInfo,
    /// What was asked for: the plan the runs come from.
    pub config: SweepConfig,
    /// Per variant (our builds and peers): what binary ran.
    pub builds: BTreeMap<String, BuildInfo>,
    /// The guest.
    pub workload: WorkloadInfo,
    /// Every run, in the order it ran.
    pub runs: Vec<Run>,
    /// For merged files: the names of the files merged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
    /// For merged files: the host of every file merged, in the order of `merged_from` (so a
    /// merge of shares from several nodes keeps each node's metadata; `host` is the first's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostInfo>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct HarnessInfo {
    /// `lockscale` version.
    pub version: String,
    /// Git revision of the checkout the harness ran in, when known.
    pub git_rev: Option<String>,
}

/// Host metadata, enough to tell whether two result files are comparable.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct HostInfo {
    pub cpu_model: String,
    pub arch: String,
    pub logical_cores: u32,
    pub physical_cores: Option<u32>,
    pub memory_bytes: u64,
    pub os: String,
    pub kernel: String,
    /// First 16 hex digits of SHA-256 of the host name (identifies a host without naming it).
    pub hostname_hash: String,
    /// 1, 5 and 15 minute load averages before the first run.
    pub load_before: Option<[f64; 3]>,
    /// 1, 5 and 15 minute load averages after the last run.
    pub load_after: Option<[f64; 3]>,
}

/// Pinning policy of a sweep: `auto` is compact when N ≤ host cores, none above.
#[derive(
    Clone, Copy, Debug, Serialize, Deserialize, JsonSchema, PartialEq, Eq, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum PinPolicy {
    Auto,
    Compact,
    None,
}

/// `--only I/K`: this file holds share `index` (1-based) of `count`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct Share {
    pub index: u32,
    pub count: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct SweepConfig {
    pub mode: Mode,
    /// Variants in plan order: ours (`baseline`, …) and peers (`qemu`, …).
    pub variants: Vec<String>,
    /// vCPU counts.
    pub cpus: Vec<u32>,
    /// Repetitions per (variant, N).
    pub reps: u32,
    pub pin: PinPolicy,
    /// Per-run timeout handed to the emulator, seconds.
    pub timeout_s: f64,
    /// Guest memory (`-m`).
    pub memory: String,
    /// Always `interleaved`: repetition-major, variants rotated within each round.
    pub order: String,
    /// Set when this file holds only one share of the plan.
    pub share: Option<Share>,
    /// Extra arguments given to every run of our emulator (e.g. `--sync-profile`,
    /// `--tlb-flush-mode synced`), after the standard ones.
    #[serde(default)]
    pub emulator_args: Vec<String>,
    /// The clock our emulator ran on (`sweep --clock`): host time, or virtual host time with
    /// `quantum_ns` when `--quantum` was given (else the emulator's default, which each run's
    /// `clock` records). Peers always run on host time. Files without it ran on host time.
    #[serde(default)]
    pub clock: Clock,
}

/// Which clock a guest's elapsed time was measured on.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum ClockKind {
    /// The host's wall clock: vCPUs share the host's cores (N > cores is oversubscribed).
    #[default]
    Host,
    /// Virtual host time (`ppc64emu --clock virtual`): per-vCPU clocks advanced by each
    /// thread's CPU time, as if every vCPU had a host core of its own.
    Virtual,
}

/// A clock as the emulator's run report and the results file record it:
/// `{"kind": "host"}` or `{"kind": "virtual", "quantum_ns": 500000, "line_cost_ns": 0}`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct Clock {
    pub kind: ClockKind,
    /// Virtual time only: how far (ns) a vCPU may run ahead of the slowest runnable one.
    /// In a sweep's config, absent when the emulator's default was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantum_ns: Option<u64>,
    /// Virtual time only: what a lock taken from another thread costs its acquirer (its cache
    /// line moving between cores; `ppc64emu --line-cost`). Absent or 0: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_cost_ns: Option<u64>,
}

/// What ran for one variant.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct BuildInfo {
    /// `ours` (a ppc64emu build) or `peer` (an external emulator, qemu-style command line).
    pub kind: BuildKind,
    /// Path of the binary that ran.
    pub binary: String,
    /// SHA-256 of that binary.
    pub binary_sha256: Option<String>,
    /// First line of `<binary> --version`.
    pub version: Option<String>,
    /// Cargo features the binary was built with (ours only).
    #[serde(default)]
    pub features: Vec<String>,
    /// Git revision the binary was built from (ours only).
    pub git_rev: Option<String>,
    /// Whether the emulator sources had uncommitted changes when built.
    pub git_dirty: Option<bool>,
    /// `rustc --version` of the toolchain that built it.
    pub rustc: Option<String>,
    /// When it was built (UTC, RFC 3339).
    pub built_at: Option<String>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum BuildKind {
    Ours,
    Peer,
}

/// The guest every emulator of the sweep ran.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct WorkloadInfo {
    /// `mkbench`, `linux-make` or `kernel-make`.
    pub name: String,
    /// Path of the guest image: mkbench's ELF (`-kernel`), a Linux guest's initramfs
    /// (`-initrd`; its kernel is in `manifest`).
    pub image: String,
    pub image_sha256: String,
    /// Boot ROM for qemu-style peers (`-bios`), when peers ran.
    pub bios: Option<String>,
    pub bios_sha256: Option<String>,
    /// Bootargs with `{N}` standing for the vCPU count, e.g. `jobs={N} units=32 size=400 seed=1`.
    pub bootargs: String,
    pub units: u32,
    pub size: u32,
    pub seed: u32,
    /// The checksum every run must print: the first successful run's, or given on the command line.
    pub expected_checksum: Option<String>,
    /// A Linux guest's manifest: packages and versions, kernel and initramfs SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<GuestManifest>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    Ok,
    Failed,
}

/// One emulator invocation.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Run {
    pub variant: String,
    /// vCPUs (`-smp N`).
    pub cpus: u32,
    /// Repetition, 1-based.
    pub rep: u32,
    /// Position in the full plan (1-based), to show the interleaving.
    pub seq: u32,
    /// When the run started (UTC, RFC 3339).
    pub started: String,
    pub status: RunStatus,
    /// Why a failed run failed (wrong checksum, no result line, timeout, …).
    pub reason: Option<String>,
    /// Guest-measured elapsed seconds (`elapsed_tb / tb_hz`): the figure speedups use.
    pub guest_elapsed_s: Option<f64>,
    /// Host wall-clock seconds of the whole invocation (boot to exit).
    pub host_wall_s: f64,
    /// Exit code, when the process exited normally.
    pub exit_code: Option<i32>,
    /// Terminating signal, when it was killed.
    pub signal: Option<i32>,
    /// Whether the harness killed it at the timeout.
    #[serde(default)]
    pub timed_out: bool,
    /// The guest's checksum (`0x…`).
    pub checksum: Option<String>,
    /// The parsed `MKBENCH-RESULT` (or `LINUX-MAKE-RESULT`) line.
    pub result: Option<GuestResult>,
    /// `MKBENCH-STATS` key=value pairs, when the guest printed any.
    #[serde(default)]
    pub stats: BTreeMap<String, String>,
    /// The `MKBENCH-ERROR` reason, when the guest printed one.
    pub guest_error: Option<String>,
    /// Pinning asked of the emulator: `compact` or `none`.
    pub pin: String,
    /// N greater than the host's logical cores, in a host-time run (always false on virtual
    /// time, where every vCPU has a virtual core of its own).
    pub oversubscribed: bool,
    /// The clock the guest time was measured on: from the run report when it says, else the
    /// one asked for (peers: host). Files without it ran on host time.
    #[serde(default)]
    pub clock: Clock,
    /// The emulator's run report (`--report`), stored whole; absent for peers.
    pub report: Option<serde_json::Value>,
    /// Why the report is missing or unreadable, when it is.
    pub report_error: Option<String>,
    /// Where the run's console output was saved.
    pub log: Option<String>,
}

/// The guest's `MKBENCH-RESULT` line, or a Linux guest's `LINUX-MAKE-RESULT` line (whose
/// `elapsed_ns` is stored as `elapsed_tb` with `tb_hz` = 10^9; see resultline.rs).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct GuestResult {
    pub cpus: u32,
    pub jobs: u32,
    pub units: u32,
    pub size: u32,
    pub checksum: String,
    pub elapsed_tb: u64,
    pub tb_hz: u64,
    /// Every other `key=value` of the line (faults, hcalls, flush_hcalls, ipis, ticks, …).
    #[serde(default)]
    pub counters: BTreeMap<String, String>,
}

impl ResultsFile {
    pub fn ok_runs(&self) -> impl Iterator<Item = &Run> {
        self.runs
            .iter()
            .filter(|r| r.status == RunStatus::Ok && r.guest_elapsed_s.is_some())
    }

    pub fn failed_runs(&self) -> impl Iterator<Item = &Run> {
        self.runs
            .iter()
            .filter(|r| r.status != RunStatus::Ok || r.guest_elapsed_s.is_none())
    }

    /// Refuses a file of another workload than the one asked for (`--workload` on the
    /// commands that read files); `path` names the file in the error. `None` accepts every file.
    pub fn check_workload(
        &self,
        want: Option<crate::workload::Workload>,
        path: &std::path::Path,
    ) -> anyhow::Result<()> {
        if let Some(w) = want
            && self.workload.name != w.name()
        {
            anyhow::bail!(
                "{} holds the {} workload, not {w} (--workload {w})",
                path.display(),
                self.workload.name
            );
        }
        Ok(())
    }
}

/// The JSON Schema of the results file, as written to results/schema.json.
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(ResultsFile);
    let mut s = serde_json::to_string_pretty(&schema).expect("schema serialises");
    s.push('\n');
    s
}

/// One Debian package of the image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PackageVersion {
    pub name: String,
    pub version: String,
}

/// What an image is made of; stored next to the image and in every results file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GuestManifest {
    /// `linux-make` or `kernel-make`.
    pub workload: String,
    /// Debian suite (codename) and architecture of the lock, e.g. `bookworm/ppc64el`.
    pub suite: String,
    /// The lock the image was built from (workloads/…/packages.lock) and its SHA-256: two
    /// sweeps with different lock hashes ran different guests.
    #[serde(default)]
    pub lock: String,
    #[serde(default)]
    pub lock_sha256: String,
    /// Every package unpacked into the root file system (the requested ones and their
    /// dependencies), sorted by name.
    pub packages: Vec<PackageVersion>,
    /// The kernel every emulator boots (`-kernel`).
    pub kernel: String,
    pub kernel_sha256: String,
    /// The initramfs (`-initrd`).
    pub initrd: String,
    pub initrd_sha256: String,
    pub initrd_bytes: u64,
    /// Entries in the archive.
    pub entries: u64,
    /// Project size (`--units`, `--size`); 0 when the workload has none.
    pub units: u32,
    pub size: u32,
    /// When the image was written (UTC, RFC 3339).
    pub built: String,
    /// SHA-256 of /init (workloads/linux/init.sh) and of the generated project: an image built
    /// from an older /init or generator is stale and gets rebuilt.
    #[serde(default)]
    pub inputs_sha256: String,
    /// kernel-make: the configuration run whose files the image holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepared: Option<PreparedInfo>,
}

/// The configuration of the kernel-make tree, run once in a guest (prepared.rs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PreparedInfo {
    /// What the configuration's output depends on: the pruned tree, the fragment, the command
    /// and the packages (gcc among them). A cached configuration with another key is redone.
    pub key: String,
    /// SHA-256 of the archive the guest printed (gzip'd newc).
    pub archive_sha256: String,
    /// Files and directories it wrote under /proj.
    pub entries: u64,
    /// The emulator that ran it and its guest time.
    pub emulator: String,
    pub guest_s: f64,
    /// When it ran (UTC, RFC 3339).
    pub when: String,
}
