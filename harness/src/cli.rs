//! The command line (clap derive). Every command has `--help` that says what it does and
//! what it writes; the long texts here are the user-facing documentation of each option.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::model::{ClockKind, PinPolicy};
use crate::workload::Workload;

#[derive(Parser, Debug)]
#[command(
    name = "lockscale",
    version,
    about = "Scalability benchmarking harness for the locking strategies of ppc64emu",
    long_about = "lockscale builds ppc64emu once per locking strategy (baseline, per-cpu-lock, \
cputlb-no-bql), runs a guest `make -j N` (the bundled mkbench) over N vCPUs, stores every run \
in a JSON results file, draws speedup curves, compares sweeps and gates pull requests on \
regressions.\n\nExit codes: 0 success; 1 the gate found a regression; 2 bad input, refused or \
failed command; 3 a sweep finished but some runs failed.",
    after_help = "Quick start:  lockscale sweep --quick     (builds, runs, plots)"
)]
pub struct Cli {
    /// Repository root (default: the nearest ancestor of the current directory holding
    /// emulator/Cargo.toml). Relative default paths (results/, plots/, workloads/, target/)
    /// are taken from here.
    #[arg(short = 'C', long, global = true, value_name = "DIR")]
    pub repo: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Build ppc64emu once per locking strategy and record where each binary came from.
    #[command(long_about = "Builds ppc64emu once per locking strategy with \
`cargo build --release -p ppc64emu --no-default-features --features <variant>`, one variant \
after another in one target directory (only the emulator crate recompiles), and copies each \
binary to target/lockscale/bin/ppc64emu-<variant> next to a JSON record of its git revision, \
dirty flag (uncommitted changes under emulator/, Cargo.toml, Cargo.lock), rustc version, \
features and SHA-256.\n\nWith --rev the revision is checked out in a git worktree under \
target/lockscale/worktrees/ and built there; its binaries go to target/lockscale/bin/<rev>/.")]
    Build(BuildArgs),

    /// Run every variant over N vCPUs and repetitions, interleaved; write a results file.
    #[command(
        long_about = "Runs variant × N × repetition, interleaved (repetition-major, the \
variants taking turns in a rotating order) so that drift of the host hits every variant alike. \
Each run boots the guest with `jobs=N units=U size=S seed=X`; the guest's MKBENCH-RESULT line \
gives the checksum (which must be the same in every run, else the run fails loudly) and the \
guest-measured elapsed time, from which all speedups are computed. The emulator's run report \
(--report) is stored whole in the results file.\n\nThe results file is rewritten atomically \
after every run: kill the sweep at any time and continue with --resume FILE. Failed runs (wrong \
checksum, no result line, guest error, timeout, non-zero exit) are recorded with their reason \
and the sweep goes on.\n\nWith no options: builds the three variants, runs them on virtual host \
time at N = 1, 2, 4, 8, 12, 16, 20, 24, 28, 5 repetitions, the default guest (the whole sweep \
sized for about 5 minutes on a 2-core machine, the builds included), then writes \
plots/<name>.png and .svg and prints the ASCII chart. With --clock host: N = 1, 2, 4, … up to \
2 × host cores (at most 28).\n\nPeers: \
--peer NAME=CMD adds an external emulator as one more variant. CMD is an executable name or \
path; it is given the qemu-style command line `CMD -M pseries -cpu power8 -accel \
tcg,thread=multi -smp N -m 1G -nographic -no-reboot -vga none -bios <boot-rom> -kernel <guest> -append \
\"…\"` (qemu-system-ppc64 accepts it as is) and timed by the guest's result line like ours. \
Compact pinning runs a peer under `taskset -c 0-(N-1)`.\n\nClock: our emulator runs on \
virtual host time unless --clock host (`ppc64emu --clock virtual [--quantum D]`): the guest is timed on \
per-vCPU virtual clocks that advance by each vCPU thread's CPU time, as if every vCPU had a host \
core of its own, so N above the host's cores is not oversubscribed and N = 16 or 28 can be swept \
on 2 cores (at a wall-time cost of about N / cores × the guest time). Peers stay on host time. \
The results file records the clock of the sweep and of every run.\n\nSeveral hosts: --plan prints the \
points as a job list; --only I/K runs share I of K (e.g. as a Slurm array task); `lockscale \
merge` combines the files. --slurm submits the shares as a Slurm array and a merge job \
after it (binaries and guest staged into --stage, a directory every node can read); \
--slurm-wait follows the jobs; --slurm --resume NAME resubmits the shares that are missing or \
failed."
    )]
    Sweep(SweepArgs),

    /// Draw speedup vs vCPUs (PNG/SVG) or print the ASCII chart.
    #[command(
        long_about = "Draws speedup T(1)/T(N) against N for every variant of every \
FILE (series are prefixed by the file name when there are several): 95% confidence bars \
(bootstrap), the ideal line, the host's core count, and oversubscribed points (N > host cores) \
drawn hollow. The title and legend say which clock the curves show; points on virtual host time \
(`sweep --clock virtual`) are never oversubscribed. --reference posted overlays the curve posted with the per-CPU locks series \
(results/reference/posted-curve.json). Failed runs are left out and the plot says how many.\n\n\
The format follows the extension of -o (.png or .svg; default plots/<name>.png). --ascii \
prints a terminal chart in the style of the posted one instead."
    )]
    Plot(PlotArgs),

    /// Markdown table per variant and N: median time, 95% CI, speedup, efficiency, locks.
    Report(ReportArgs),

    /// Per (variant, N) the ratio NEW/OLD of guest times with CI and significance.
    #[command(
        long_about = "Compares two results files point by point: the ratio of median \
guest times NEW/OLD with a 95% bootstrap interval and a two-sided permutation test on the \
repetitions. Refuses files of different guests or different checksums, and a virtual-time sweep \
beside a host-time one unless --allow-mixed-clocks. -o draws both files' speedup curves in one \
plot (OLD dashed)."
    )]
    Compare(CompareArgs),

    /// Pull-request gate: exit 1 only on a significant regression beyond the threshold.
    #[command(
        long_about = "Decides whether a candidate is slower than a base. For every \
(variant, N) in both: a regression is a median guest time slower by more than --threshold \
with p < --alpha in a one-sided permutation test of the repetitions. Exit 1 when there is a \
regression, 0 otherwise (a large but noisy slowdown is reported as inconclusive and passes), \
2 when the gate refuses: fewer repetitions per side than the test needs to ever reach \
p < alpha (5 at α = 0.01, since the smallest p with n per side is 1/C(2n, n)), or results \
that are not comparable. A markdown summary (for a PR comment) goes to stdout and to \
--summary.\n\nFile form: --base OLD.json --candidate NEW.json.\n\nRevision form: --base-rev A \
--candidate-rev B builds both revisions in git worktrees and runs an interleaved A/B sweep \
itself (quick guest, N = 1 and 2, 5 repetitions unless told otherwise), writes both results \
files to --out-dir, then gates them. With --clock virtual [--quantum D] both sides run on virtual \
host time, so a small runner can gate at N = 16 or 28 (e.g. --cpus 1,16,28).\n\nA virtual-time \
sweep is not gated against a host-time one unless --allow-mixed-clocks."
    )]
    Gate(GateArgs),

    /// Project T(N) and speedup beyond the measured vCPU counts (model in harness/README.md).
    #[command(
        long_about = "Fits a queueing model to a sweep, per strategy, and predicts the guest \
time T(N) and the speedup up to --to vCPUs with a 95% bootstrap band. The model (mean value \
analysis: vCPU threads as customers, guest execution as a delay, the BQL as one server; \
cross-vCPU flush jobs routed per strategy; bounded by the guest's job graph and the host's \
cores) takes the BQL hold time per run from runs made with --emu-args \"--sync-profile\" and \
fits the serial demand the hold times do not show to the measured points with 1 < N ≤ \
--fit-max. It refuses strategies it cannot fit: no N = 1 run, no lock statistics (peers), or \
only N = 1 without hold times. Equations and assumptions: harness/README.md, \"Projection\".\n\n\
Prints markdown tables (fitted demands; measured vs projected per N, with the error where \
both exist); -o also draws the measured curves with the projected ones dashed."
    )]
    Project(ProjectArgs),

    /// Combine results files of one sweep (shares from --only I/K, or repeated sweeps).
    Merge(MergeArgs),

    /// Write the JSON Schema of the results file (default results/schema.json).
    Schema(SchemaArgs),

    /// Linux guest images: `lockscale guest build linux-make`.
    #[command(subcommand)]
    Guest(GuestCommand),
}

#[derive(Subcommand, Debug)]
pub enum GuestCommand {
    /// Build (or check the cached) guest image of a Linux workload from its package lock.
    #[command(
        long_about = "Builds the kernel and initramfs of a Linux workload from exactly the Debian \
ppc64el packages its committed lock names (workloads/linux/packages.lock for linux-make, \
workloads/kernel/packages.lock for kernel-make): each file is fetched by its pool path from the \
mirrors (--mirror, in order; default the host's apt source), checked against the lock's SHA-256, \
kept in target/guest-cache/debs/ and unpacked by the harness itself (no apt, dpkg or mmdebstrap); \
nothing is resolved at build time. The initramfs (that tree without docs, modules and sanitizer \
runtimes, workloads/linux/init.sh as /init, the generated project under /proj) goes to \
target/guest-cache/<workload>/u<U>-s<S>/ with the kernel and a manifest.json (packages and \
versions, the lock's SHA-256, kernel and image SHA-256). The image's SHA-256 is checked against \
the one recorded beside the lock (images.json; --record writes it). A cached image is checked \
against its manifest and the lock and reused; --force rebuilds it. Ends with the line `image \
PATH sha256 HEX`. `sweep --workload linux-make` builds the image it needs by itself."
    )]
    Build(GuestBuildArgs),

    /// Re-resolve a workload's packages and rewrite its lock, printing what changed.
    #[command(
        long_about = "Resolves the workload's packages again from a Debian suite, given by its \
codename (default bookworm; never an alias such as stable), with the host's apt in a private \
directory (the host's apt is untouched; the archive's signatures are checked with the host's \
keyring), takes each file's pool path, size and SHA-256 from the signed index, checks that the \
mirror serves every file, and rewrites workloads/…/packages.lock. Prints every change \
(package: old → new). A lock update changes the guest: commit it deliberately, and re-record the \
image SHA-256s (guest build --record). Needs apt-get (Debian/Ubuntu); building needs none."
    )]
    Lock(GuestLockArgs),

    /// Write a built image, its kernel, manifest and lock into one file (a tar).
    #[command(
        long_about = "Writes the image of a workload and size (building it first when it is not \
cached) with its kernel, manifest and the lock it was built from into one tar file, so that a \
host without a mirror (a many-core box, a Slurm node, CI) can run the same bytes after `lockscale \
guest import FILE`."
    )]
    Export(GuestExportArgs),

    /// Check an exported image and install it into the guest cache.
    #[command(
        long_about = "Checks a file written by `guest export`: every member's size and SHA-256 \
against its header, the manifest against the files, the lock against this checkout's lock, the \
image's inputs (/init, the project) against this checkout's, and the image against the SHA-256 \
recorded beside the lock. Only then installs it into target/guest-cache/<workload>/u<U>-s<S>/, \
where `sweep` finds it without reaching a mirror. A corrupt, truncated or foreign file is \
refused (exit 2) and the cache is left as it was."
    )]
    Import(GuestImportArgs),
}

/// Which image of a workload: the preset of a sweep mode or explicit sizes.
#[derive(Args, Debug)]
pub struct ImageSizeArgs {
    /// The size of `sweep --quick`.
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// The size of `sweep --full`.
    #[arg(long)]
    pub full: bool,
    /// Project files (overrides the preset).
    #[arg(long)]
    pub units: Option<u32>,
    /// Functions per file (overrides the preset).
    #[arg(long)]
    pub size: Option<u32>,
}

#[derive(Args, Debug)]
pub struct GuestBuildArgs {
    /// The workload (linux-make or kernel-make).
    pub workload: Workload,
    #[command(flatten)]
    pub image: ImageSizeArgs,
    /// Rebuild the image even when the cached one checks out (kernel-make: and configure its
    /// kernel tree again, in a guest on ppc64emu, 10–20 minutes).
    #[arg(long)]
    pub force: bool,
    /// A Debian mirror's base URL (e.g. http://deb.debian.org/debian) to fetch the locked
    /// files from; repeat to give fallbacks, tried in order (default: the host's apt source).
    #[arg(long, value_name = "URL")]
    pub mirror: Vec<String>,
    /// Also try snapshot.debian.org, after the mirrors: at TIMESTAMP (e.g. 20261204T000000Z),
    /// or without one at the time the lock was resolved.
    #[arg(long, value_name = "TIMESTAMP", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub snapshot: Option<String>,
    /// Record the image's SHA-256 beside the lock (images.json), for this lock and inputs.
    #[arg(long)]
    pub record: bool,
}

#[derive(Args, Debug)]
pub struct GuestLockArgs {
    /// The workload (linux-make or kernel-make).
    pub workload: Workload,
    /// The Debian suite's codename (bookworm, trixie, …; not stable/testing).
    #[arg(long, default_value = crate::lock::DEFAULT_SUITE)]
    pub suite: String,
    /// The mirror to resolve from (default: the host's apt source).
    #[arg(long, value_name = "URL")]
    pub mirror: Option<String>,
}

#[derive(Args, Debug)]
pub struct GuestExportArgs {
    /// The workload (linux-make or kernel-make).
    pub workload: Workload,
    #[command(flatten)]
    pub image: ImageSizeArgs,
    /// The file to write (a tar).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Mirrors to build from when the image is not cached (as `guest build --mirror`).
    #[arg(long, value_name = "URL")]
    pub mirror: Vec<String>,
}

#[derive(Args, Debug)]
pub struct GuestImportArgs {
    /// A file written by `lockscale guest export`.
    pub file: PathBuf,
}

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// Variants to build (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "baseline,per-cpu-lock,cputlb-no-bql"
    )]
    pub variants: Vec<String>,
    /// Build this git revision in a worktree instead of the working tree.
    #[arg(long, value_name = "REV")]
    pub rev: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct SweepArgs {
    /// The guest: the bundled mkbench, or a Linux guest built from Debian packages (its image is
    /// built when missing, see `lockscale guest build`).
    #[arg(long, value_enum, default_value_t = Workload::Mkbench)]
    pub workload: Workload,
    #[command(flatten)]
    pub plan_args: PlanArgs,
    /// Smoke test: N = 1 and 2, 3 repetitions, a small guest (about a minute).
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// The posted sweep: N = 1, 2, 4, 8, 12, 16, 20, 24, 28 with a guest of 8 × 28 units.
    #[arg(long)]
    pub full: bool,
    /// Add an external emulator as a variant, e.g. qemu=qemu-system-ppc64 (repeatable).
    #[arg(long = "peer", value_name = "NAME=CMD")]
    pub peers: Vec<String>,
    /// Warn when the sweep is projected to take longer than this many seconds (default 300,
    /// quick 60, full none; 0 disables).
    #[arg(long, value_name = "SECS")]
    pub budget: Option<f64>,
    /// Boot ROM given to peers with -bios (default workloads/mkbench/boot-rom.bin).
    #[arg(long, value_name = "PATH")]
    pub bios: Option<PathBuf>,
    /// Use this binary for a variant instead of building it (repeatable).
    #[arg(long = "bin", value_name = "VARIANT=PATH")]
    pub bins: Vec<String>,
    /// Do not build: use the binaries of the last `lockscale build`.
    #[arg(long)]
    pub no_build: bool,
    /// The checksum every run must print (default: the first successful run's).
    #[arg(long, value_name = "0xHEX")]
    pub expect_checksum: Option<String>,
    /// Name of the sweep (default <mode>-<UTC timestamp>); the file is results/<name>.json.
    #[arg(long)]
    pub name: Option<String>,
    /// Results file to write (default results/<name>.json).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Continue an interrupted sweep: runs already recorded are not run again. The
    /// configuration comes from the file.
    #[arg(long, value_name = "FILE")]
    pub resume: Option<PathBuf>,
    /// With --resume: run again the runs recorded as failed.
    #[arg(long, requires = "resume")]
    pub retry_failed: bool,
    /// Print the points of the sweep as a job list and exit.
    #[arg(long)]
    pub plan: bool,
    /// Run only share I of K of the points (e.g. 2/4), for several hosts.
    #[arg(long, value_name = "I/K")]
    pub only: Option<String>,
    /// Do not write plots or print the ASCII chart at the end.
    #[arg(long)]
    pub no_plot: bool,
    /// Extra arguments for every run of our emulator, split at spaces, e.g.
    /// "--sync-profile" or "--tlb-flush-mode synced" (peers do not get them).
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub emu_args: Option<String>,
    /// Slurm: `--slurm [--shares K] [--slurm-arg ARG]… [--slurm-wait] [--stage DIR]`
    /// (harness/src/slurm/mod.rs).
    #[command(flatten)]
    pub slurm: SlurmArgs,
}

impl SweepArgs {
    /// The options given that would change a sweep's plan or guest: what `--resume` (local or
    /// `--slurm`) refuses, since the plan comes from the results file.
    pub fn plan_options_given(&self) -> Vec<&'static str> {
        let mut given = self.plan_args.given();
        given.extend(options_given([
            (self.quick, "--quick"),
            (self.full, "--full"),
            (!self.peers.is_empty(), "--peer"),
            (!self.bins.is_empty(), "--bin"),
            (self.name.is_some(), "--name"),
            (self.output.is_some(), "--output"),
            (self.emu_args.is_some(), "--emu-args"),
        ]));
        given
    }
}

/// The names of the options whose flag is set, in order (for refusals).
pub fn options_given<const N: usize>(options: [(bool, &'static str); N]) -> Vec<&'static str> {
    options
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect()
}

/// What to run and on which guest: the options `sweep` and the revision form of `gate` share.
/// Defaults differ per command and are named in each option's help.
#[derive(Args, Debug, Clone)]
pub struct PlanArgs {
    /// Our variants to run (comma-separated; default all three; sweep: `none` for peers only).
    #[arg(long, value_delimiter = ',')]
    pub variants: Option<Vec<String>>,
    /// vCPU counts, e.g. 1,2,4,8 or 1-4 (sweep default: 1, 2, 4, … up to 2 × host cores, max
    /// 28; gate default: 1,2).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Repetitions per (variant, N) and side (sweep default 5, --quick 3; gate default 5).
    #[arg(long)]
    pub reps: Option<u32>,
    /// Guest compile units (`units=`) (default: the preset of the mode; gate: the quick guest).
    #[arg(long)]
    pub units: Option<u32>,
    /// Guest work per unit (`size=`) (default: as for --units).
    #[arg(long)]
    pub size: Option<u32>,
    /// Guest seed (`seed=`).
    #[arg(long)]
    pub seed: Option<u32>,
    /// Per-run timeout in seconds, handed to the emulator (--timeout); the harness kills a run
    /// that outlives it by a grace period. Default 300 (quick and gate 120, full 3600).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Guest image (default workloads/mkbench/mkbench.elf of the working tree; for a Linux
    /// workload the kernel of its built image).
    #[arg(long, value_name = "PATH")]
    pub kernel: Option<PathBuf>,
    /// Pinning for every emulator: auto = compact when N ≤ host cores, else none.
    #[arg(long, value_enum, default_value = "auto")]
    pub pin: PinPolicy,
    /// The clock our emulator measures the guest on: `host` (the host's wall clock; N above
    /// the host's cores is oversubscribed) or `virtual` (`ppc64emu --clock virtual`: per-vCPU
    /// virtual clocks advanced by each thread's CPU time, as if every vCPU had a host core of
    /// its own, so N = 16 or 28 can be swept on a 2-core host). Peers always run on host time.
    /// Default: sweep virtual (host when only peers run), gate host.
    #[arg(long, value_enum, value_name = "host|virtual")]
    pub clock: Option<ClockKind>,
    /// With --clock virtual: how far a vCPU may run ahead of the slowest runnable one, e.g.
    /// 500us, 2ms, 1000000ns (above 0, at most 1s; default: the emulator's).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true,
          value_parser = crate::clock::parse_quantum)]
    pub quantum: Option<u64>,
    /// With --clock virtual: virtual time charged to a vCPU taking a lock another thread held
    /// last — its cache line moving between cores, a cost a many-core host adds and one core
    /// does not — e.g. 100ns (0 to 100us; default 0, until a many-core host measures it).
    #[arg(long, value_name = "DURATION", value_parser = crate::clock::parse_line_cost)]
    pub line_cost: Option<u64>,
}

impl PlanArgs {
    /// The options of the plan that were given (`--pin` has a default and is not counted).
    pub fn given(&self) -> Vec<&'static str> {
        options_given([
            (self.variants.is_some(), "--variants"),
            (self.cpus.is_some(), "--cpus"),
            (self.reps.is_some(), "--reps"),
            (self.units.is_some(), "--units"),
            (self.size.is_some(), "--size"),
            (self.seed.is_some(), "--seed"),
            (self.kernel.is_some(), "--kernel"),
            (self.timeout.is_some(), "--timeout"),
            (self.clock.is_some(), "--clock"),
            (self.quantum.is_some(), "--quantum"),
            (self.line_cost.is_some(), "--line-cost"),
        ])
    }
}

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// Refuse results files of another workload.
    #[arg(long, value_enum)]
    pub workload: Option<Workload>,
    /// Results files (several: one set of curves each).
    pub files: Vec<PathBuf>,
    /// Output file, .png or .svg (default plots/<name of the first file>.png).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the terminal chart instead of writing an image.
    #[arg(long)]
    pub ascii: bool,
    /// Overlay a reference curve: `posted` (results/reference/posted-curve.json) or a path.
    #[arg(long, value_name = "posted|FILE")]
    pub reference: Option<String>,
    /// Speedups against this variant's N = 1 time instead of each variant's own.
    #[arg(long, value_name = "VARIANT")]
    pub relative_to: Option<String>,
    /// Width of the ASCII chart in characters.
    #[arg(long, default_value_t = 80)]
    pub width: usize,
    /// Title of the image.
    #[arg(long)]
    pub title: Option<String>,
    /// Also draw each file's projected curves, dashed (`lockscale project`).
    #[arg(long)]
    pub project: bool,
    #[command(flatten)]
    pub model: ProjectionArgs,
}

/// The projection model's options (`project`, and `plot`/`report` with --project).
#[derive(Args, Debug, Clone, Copy)]
pub struct ProjectionArgs {
    /// Largest N to project.
    #[arg(long, default_value_t = 28, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub to: u32,
    /// Cores of the host to project for (default: --to, a host that runs every N without
    /// oversubscription; give the measuring host's cores to predict its oversubscribed points).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cores: Option<u32>,
    /// Fit only on measured points with N ≤ this (default: the measuring host's cores).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub fit_max: Option<u32>,
}

impl ProjectionArgs {
    pub fn options(&self) -> crate::project::ProjectOptions {
        crate::project::ProjectOptions {
            to: self.to,
            cores: self.cores,
            fit_max: self.fit_max,
        }
    }
}

#[derive(Args, Debug)]
pub struct ProjectArgs {
    /// Results file.
    pub file: PathBuf,
    #[command(flatten)]
    pub model: ProjectionArgs,
    /// Also draw measured and projected curves (.png or .svg).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Refuse results files of another workload.
    #[arg(long, value_enum)]
    pub workload: Option<Workload>,
    /// Results file.
    pub file: PathBuf,
    /// Append the projection tables (`lockscale project`).
    #[arg(long)]
    pub project: bool,
    #[command(flatten)]
    pub model: ProjectionArgs,
    /// Speedups against this variant's N = 1 time.
    #[arg(long, value_name = "VARIANT")]
    pub relative_to: Option<String>,
    /// Lock sites to list per variant (0: none); on virtual time also by virtual wait.
    #[arg(long, default_value_t = 5)]
    pub top: usize,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Refuse results files of another workload.
    #[arg(long, value_enum)]
    pub workload: Option<Workload>,
    pub old: PathBuf,
    pub new: PathBuf,
    /// Significance level for the verdict column.
    #[arg(long, default_value_t = 0.01)]
    pub alpha: f64,
    /// Also draw both files' speedup curves in one plot (.png or .svg).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Compare a virtual-time sweep with a host-time one (refused without it).
    #[arg(long)]
    pub allow_mixed_clocks: bool,
}

#[derive(Args, Debug)]
pub struct GateArgs {
    /// File form: refuse results files of another workload. Revision form: the guest to run
    /// (default mkbench).
    #[arg(long, value_enum)]
    pub workload: Option<Workload>,
    /// Base results file.
    #[arg(long, value_name = "FILE", requires = "candidate", conflicts_with_all = ["base_rev", "candidate_rev"])]
    pub base: Option<PathBuf>,
    /// Candidate results file.
    #[arg(long, value_name = "FILE", requires = "base")]
    pub candidate: Option<PathBuf>,
    /// Base git revision (builds and sweeps it).
    #[arg(long, value_name = "REV", requires = "candidate_rev")]
    pub base_rev: Option<String>,
    /// Candidate git revision.
    #[arg(long, value_name = "REV", requires = "base_rev")]
    pub candidate_rev: Option<String>,
    /// Smallest slowdown that counts as a regression: 5%, 5 or 0.05.
    #[arg(long, default_value = "5%")]
    pub threshold: String,
    /// Significance level of the one-sided permutation test.
    #[arg(long, default_value_t = 0.01)]
    pub alpha: f64,
    /// Also write the markdown summary here (e.g. $GITHUB_STEP_SUMMARY).
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Revision form: where the two results files go (default target/lockscale/gate).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// File form: gate a virtual-time sweep against a host-time one (refused without it).
    #[arg(long)]
    pub allow_mixed_clocks: bool,
    /// Revision form only: what to run.
    #[command(flatten)]
    pub plan_args: PlanArgs,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Refuse results files of another workload.
    #[arg(long, value_enum)]
    pub workload: Option<Workload>,
    /// Results files to combine.
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Output file.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,
    /// Name of the merged sweep (default: the output file's stem).
    #[arg(long)]
    pub name: Option<String>,
    /// Merge results from hosts of different types.
    #[arg(long)]
    pub allow_mixed_hosts: bool,
    /// Merge results where a variant was built from different sources.
    #[arg(long)]
    pub allow_mixed_builds: bool,
    /// Merge virtual-time sweeps with host-time ones (each run keeps its clock).
    #[arg(long)]
    pub allow_mixed_clocks: bool,
}

#[derive(Args, Debug)]
pub struct SchemaArgs {
    /// Output file (default results/schema.json); `-` for stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// The options of `sweep --slurm` (flattened into `sweep`'s).
#[derive(Args, Debug, Clone, Default)]
pub struct SlurmArgs {
    /// Submit the sweep to Slurm: one array task per share (`--only I/K`) and a merge job
    /// after them (`--dependency=afterok`), which writes results/<name>.json and its plots.
    /// Binaries and guest are staged into --stage, which every node must be able to read (a
    /// shared filesystem); the results and plots paths must be writable by the nodes too.
    /// With --resume NAME: resubmit only the shares whose results are missing or failed.
    #[arg(long)]
    pub slurm: bool,
    /// Number of shares, i.e. array tasks (default: one per point).
    #[arg(long, value_name = "K", requires = "slurm")]
    pub shares: Option<u32>,
    /// One more argument for both `sbatch` calls, e.g. --slurm-arg=--partition=big or
    /// --slurm-arg=--time=2:00:00 (it overrides the script's own #SBATCH lines; repeatable).
    #[arg(
        long = "slurm-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        requires = "slurm"
    )]
    pub slurm_args: Vec<String>,
    /// Follow the jobs until the merge job ends (progress on stderr); exit 0 when it
    /// completed, else non-zero naming every share that failed.
    #[arg(long, requires = "slurm")]
    pub slurm_wait: bool,
    /// Where to stage binaries, guest, scripts and share results (default
    /// target/lockscale/slurm); the sweep's files go to DIR/<name>/.
    #[arg(long, value_name = "DIR", requires = "slurm")]
    pub stage: Option<PathBuf>,
    /// Let the merge job merge shares from different host types (`merge --allow-mixed-hosts`).
    #[arg(long, requires = "slurm")]
    pub allow_mixed_hosts: bool,
}
