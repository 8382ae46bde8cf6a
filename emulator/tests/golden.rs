//! Golden vectors: instruction behaviour recorded from QEMU's user-mode emulator
//! (`qemu-ppc64le-static`, QEMU_CPU=power8) and replayed on our interpreter.
//!
//! Each line of `tests/golden/data/<family>.jsonl` is one case: a seed from which the
//! registers and the data buffer are filled, explicit overrides, the instruction words, and
//! what QEMU ended with (registers and buffer bytes that changed, and the signal if the case
//! stopped early). `tests/golden/gen.py` writes these files; README.md there describes the
//! format. Every register, the buffer, the stop signal and the stop address are compared.
//!
//! The `jit_*` tests replay the same cases under the JIT (`engine::run` on a `Jit`, threshold 0: every block
//! is translated before it runs) on a CPU set up exactly as for the interpreter.

use ppc64emu::cpu::{Exception, ProgramKind, msr};
use ppc64emu::engine::{Cpu, run};
use ppc64emu::isa::{ALL_OPS, Op, decode, disassemble};
use ppc64emu::jit::{Jit, JitShared, Tiers};
use ppc64emu::softmmu::{Access, AddressSpace, PAGE_MASK, PageMapping};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

// Memory layout of the harness (gen.py, harness.c).
const CODE_REGION: u64 = 0x4000_0000;
const CODE_REGION_SIZE: u64 = 0x1_0000;
const CASE_ADDR: u64 = CODE_REGION + 0x1000;
const DATA_REGION: u64 = 0x4002_0000;
const DATA_REGION_SIZE: u64 = 0x2000;
const BUF_ADDR: u64 = DATA_REGION + 0xf00;
const BUF_SIZE: usize = 512;
const TRAP: u32 = 0x7fe0_0008;

const SIGILL: i64 = 4;
const SIGTRAP: i64 = 5;
const SIGBUS: i64 = 7;
const SIGFPE: i64 = 8;
const SIGSEGV: i64 = 11;
/// `si_code`s of SIGILL that say which kind of program interrupt it was.
const ILL_ILLOPC: i64 = 1;
const ILL_ILLOPN: i64 = 2;
const ILL_PRVOPC: i64 = 5;

/// The seeded fill of gen.py (SplitMix64).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Register names in the order of the data files; the value of each as u128.
fn reg_names() -> Vec<String> {
    let mut v: Vec<String> = (0..32).map(|i| format!("r{i}")).collect();
    v.extend(["cr", "xer", "lr", "ctr", "fpscr", "vscr", "vrsave"].map(String::from));
    v.extend((0..64).map(|i| format!("vs{i}")));
    v
}

#[derive(Clone, PartialEq)]
struct State {
    regs: BTreeMap<String, u128>,
    mem: Vec<u8>,
}

fn fill(seed: u64) -> State {
    let mut g = SplitMix64(seed);
    let mut regs = BTreeMap::new();
    for i in 0..32 {
        regs.insert(format!("r{i}"), g.next() as u128);
    }
    regs.insert("cr".into(), (g.next() & 0xffff_ffff) as u128);
    let x = g.next();
    let xer = (x & 1) << 31 | (x >> 1 & 1) << 30 | (x >> 2 & 1) << 29 | (x >> 8 & 0x7f);
    regs.insert("xer".into(), xer as u128);
    regs.insert("lr".into(), g.next() as u128);
    regs.insert("ctr".into(), g.next() as u128);
    regs.insert("fpscr".into(), 0);
    regs.insert("vscr".into(), 0x0001_0000);
    regs.insert("vrsave".into(), (g.next() & 0xffff_ffff) as u128);
    for i in 0..64 {
        let hi = g.next() as u128;
        regs.insert(format!("vs{i}"), hi << 64 | g.next() as u128);
    }
    let mut mem = Vec::with_capacity(BUF_SIZE);
    for _ in 0..BUF_SIZE / 8 {
        mem.extend_from_slice(&g.next().to_le_bytes());
    }
    State { regs, mem }
}

fn hex(v: &Value) -> u128 {
    u128::from_str_radix(v.as_str().expect("hex string"), 16).expect("hex value")
}

fn apply_mem(mem: &mut [u8], runs: &Value) {
    for run in runs.as_array().expect("byte runs") {
        let off = run[0].as_u64().unwrap() as usize;
        let s = run[1].as_str().unwrap();
        for k in 0..s.len() / 2 {
            mem[off + k] = u8::from_str_radix(&s[2 * k..2 * k + 2], 16).unwrap();
        }
    }
}

/// One recorded case.
struct Case {
    name: String,
    le: bool,
    words: Vec<u32>,
    /// The words QEMU ran when they differ from `words` (reserved fields cleared).
    qemu_words: Option<Vec<u32>>,
    initial: State,
    expected: State,
    ignore: BTreeSet<String>,
    /// Bits of a register that are not compared (FPSCR[FR], which QEMU never computes).
    mask: BTreeMap<String, u128>,
    /// Signal number, `si_code` and address where the case stopped.
    stop: (i64, i64, u64),
}

impl Case {
    fn parse(v: &Value) -> Case {
        let seed = v["seed"].as_u64().expect("seed");
        let mut initial = fill(seed);
        if let Some(init) = v.get("init").and_then(Value::as_object) {
            for (k, x) in init {
                initial.regs.insert(k.clone(), hex(x));
            }
        }
        if let Some(m) = v.get("init_mem") {
            apply_mem(&mut initial.mem, m);
        }
        let mut expected = initial.clone();
        if let Some(out) = v.get("out").and_then(Value::as_object) {
            for (k, x) in out {
                expected.regs.insert(k.clone(), hex(x));
            }
        }
        if let Some(m) = v.get("out_mem") {
            apply_mem(&mut expected.mem, m);
        }
        let words_of = |v: &Value| -> Vec<u32> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|w| hex(w) as u32)
                .collect()
        };
        let words = words_of(&v["words"]);
        let qemu_words = v.get("qemu_words").map(words_of);
        let end = CASE_ADDR + 4 * words.len() as u64;
        let stop = match v.get("signal") {
            Some(s) => (
                s[0].as_i64().unwrap(),
                s[1].as_i64().unwrap(),
                hex(&v["pc"]) as u64,
            ),
            None => (SIGTRAP, 1, end),
        };
        let ignore = v
            .get("ignore")
            .and_then(Value::as_array)
            .map_or_else(BTreeSet::new, |a| {
                a.iter().map(|s| s.as_str().unwrap().to_string()).collect()
            });
        let mask = v
            .get("mask")
            .and_then(Value::as_object)
            .map_or_else(BTreeMap::new, |m| {
                m.iter().map(|(k, x)| (k.clone(), hex(x))).collect()
            });
        Case {
            name: v["name"].as_str().unwrap().to_string(),
            le: v["le"].as_u64() == Some(1),
            words,
            qemu_words,
            initial,
            expected,
            ignore,
            mask,
            stop,
        }
    }
}

/// The harness's two regions: code (read/execute) and data (read/write); nothing else is mapped.
struct GoldenSpace {
    code: Vec<u8>,
    data: Vec<u8>,
}

impl AddressSpace for GoldenSpace {
    fn translate(
        &mut self,
        _st: &ppc64emu::cpu::CpuState,
        ea: u64,
        access: Access,
    ) -> Result<PageMapping, Exception> {
        let page = ea & PAGE_MASK;
        let (host, ok) = if (CODE_REGION..CODE_REGION + CODE_REGION_SIZE).contains(&page) {
            (
                // SAFETY: `page` is inside the code region (checked), which `code` holds.
                unsafe { self.code.as_mut_ptr().add((page - CODE_REGION) as usize) },
                access != Access::Write,
            )
        } else if (DATA_REGION..DATA_REGION + DATA_REGION_SIZE).contains(&page) {
            (
                // SAFETY: `page` is inside the data region (checked), which `data` holds.
                unsafe { self.data.as_mut_ptr().add((page - DATA_REGION) as usize) },
                access != Access::Exec,
            )
        } else {
            (std::ptr::null_mut(), false)
        };
        if !ok {
            return Err(match access {
                Access::Exec => Exception::Isi {
                    ea,
                    srr1: 0x4000_0000,
                },
                Access::Read => Exception::Dsi {
                    ea,
                    dsisr: 0x4000_0000,
                },
                Access::Write => Exception::Dsi {
                    ea,
                    dsisr: 0x4200_0000,
                },
            });
        }
        Ok(PageMapping {
            host,
            pa: page,
            read: access != Access::Exec,
            write: access == Access::Write,
            exec: access == Access::Exec,
            watch_writes: false,
        })
    }
}

/// What the case ended with on our interpreter.
struct Outcome {
    state: State,
    stop: (i64, Option<ProgramKind>, u64),
}

fn signal_of(e: Exception) -> (i64, Option<ProgramKind>) {
    match e {
        Exception::Program(ProgramKind::Trap) => (SIGTRAP, None),
        Exception::Program(ProgramKind::FpEnabled) => (SIGFPE, None),
        Exception::Program(k) => (SIGILL, Some(k)),
        Exception::Dsi { .. }
        | Exception::DataSegment { .. }
        | Exception::Isi { .. }
        | Exception::InstructionSegment { .. } => (SIGSEGV, None),
        Exception::Alignment { .. } | Exception::MachineCheck { .. } => (SIGBUS, None),
        Exception::FacilityUnavailable { .. }
        | Exception::FpUnavailable
        | Exception::VecUnavailable
        | Exception::VsxUnavailable => (SIGILL, None),
        Exception::SystemCall { .. } => unreachable!("handled by the caller"),
        // An exception added later: no signal, so that the case reports it.
        #[allow(unreachable_patterns)]
        _ => (0, None),
    }
}

/// What runs the cases.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Engine {
    Interp,
    /// `engine::run` on a `Jit` with threshold 0 (every block translated before it runs).
    Jit,
    /// `engine::run` on a `Jit` with the baseline tier alone at threshold 0.
    Baseline,
}

/// Steps at most this many instructions (no case loops; this catches one that would).
const STEP_LIMIT: u64 = 10_000;

/// Runs one case; `jit`: the JIT to run it under (moved to the case's fresh CPU).
fn run_case(case: &Case, mut jit: Option<&mut Jit>) -> Outcome {
    let mut space = GoldenSpace {
        code: vec![0; CODE_REGION_SIZE as usize],
        data: vec![0; DATA_REGION_SIZE as usize],
    };
    let off = (CASE_ADDR - CODE_REGION) as usize;
    for (k, w) in case.words.iter().chain(std::iter::once(&TRAP)).enumerate() {
        let b = if case.le {
            w.to_le_bytes()
        } else {
            w.to_be_bytes()
        };
        space.code[off + 4 * k..off + 4 * k + 4].copy_from_slice(&b);
    }
    let b = (BUF_ADDR - DATA_REGION) as usize;
    space.data[b..b + BUF_SIZE].copy_from_slice(&case.initial.mem);
    let mut c = Cpu::new(Box::new(space));
    // QEMU's user mode delivers enabled floating-point exceptions (as with MSR[FE0|FE1] set).
    c.st.msr = msr::SF
        | msr::PR
        | msr::FP
        | msr::VEC
        | msr::VSX
        | msr::EE
        | msr::ME
        | msr::IR
        | msr::DR
        | msr::RI
        | msr::FE0
        | msr::FE1;
    if case.le {
        c.st.msr |= msr::LE;
    }
    let r = &case.initial.regs;
    for i in 0..32 {
        c.st.gpr[i] = r[&format!("r{i}")] as u64;
    }
    c.st.set_cr(r["cr"] as u32);
    c.st.set_xer(r["xer"] as u64);
    c.st.lr = r["lr"] as u64;
    c.st.ctr = r["ctr"] as u64;
    c.st.fpscr = r["fpscr"] as u64;
    c.st.vscr = r["vscr"] as u32;
    c.st.vrsave = r["vrsave"] as u32;
    for i in 0..64 {
        c.st.vsr[i] = r[&format!("vs{i}")];
    }
    // Registers outside the case state start as in a process under qemu-ppc64le-static.
    c.st.ppr = 0;
    c.st.pc = CASE_ADDR;
    if let Some(j) = jit.as_deref_mut() {
        j.reattach(&mut c);
    }
    let mut stop = None;
    let mut steps = 0;
    while steps < STEP_LIMIT {
        let r = match jit.as_mut() {
            None => {
                steps += 1;
                c.step()
            }
            Some(j) => {
                let before = c.counters.instructions;
                let r = run(&mut **j, &mut c, STEP_LIMIT - steps, &|_| false);
                // Events only matter to a machine; the blocks stop for them.
                c.events = 0;
                // At least one: a fault on the first instruction retires nothing.
                steps += (c.counters.instructions - before).max(1);
                r
            }
        };
        match r {
            Ok(()) => {}
            Err(Exception::SystemCall { lev: 0 }) => {
                // The one system call the vectors use: sched_yield, which returns 0.
                assert_eq!(c.st.gpr[0], 158, "{}: unexpected system call", case.name);
                c.st.gpr[3] = 0;
                c.st.set_cr_bit(3, false);
            }
            Err(e @ Exception::Program(ProgramKind::Privileged)) => {
                // Linux emulates `mfpvr` for user programs (and QEMU's user mode lets it
                // through): the process sees the PVR.
                let word = c.mmu.fetch(&c.st, c.st.pc).unwrap();
                if word & 0xfc1f_fffe == 0x7c1f_42a6 {
                    c.st.gpr[((word >> 21) & 31) as usize] = c.st.pvr;
                    c.st.pc += 4;
                    continue;
                }
                let (sig, kind) = signal_of(e);
                stop = Some((sig, kind, c.st.pc));
                break;
            }
            Err(e) => {
                let (sig, kind) = signal_of(e);
                stop = Some((sig, kind, c.st.pc));
                break;
            }
        }
    }
    let stop = stop.unwrap_or_else(|| panic!("{}: did not stop", case.name));
    let mut regs = BTreeMap::new();
    for i in 0..32 {
        regs.insert(format!("r{i}"), c.st.gpr[i] as u128);
    }
    regs.insert("cr".into(), c.st.cr() as u128);
    regs.insert("xer".into(), c.st.xer() as u128);
    regs.insert("lr".into(), c.st.lr as u128);
    regs.insert("ctr".into(), c.st.ctr as u128);
    regs.insert("fpscr".into(), c.st.fpscr as u128);
    regs.insert("vscr".into(), c.st.vscr as u128);
    regs.insert("vrsave".into(), c.st.vrsave as u128);
    for i in 0..64 {
        regs.insert(format!("vs{i}"), c.st.vsr[i]);
    }
    let mut mem = vec![0u8; BUF_SIZE];
    for (k, m) in mem.iter_mut().enumerate() {
        *m = c
            .mmu
            .load(&c.st, BUF_ADDR + k as u64, 1, true)
            .expect("buffer is mapped") as u8;
    }
    Outcome {
        state: State { regs, mem },
        stop,
    }
}

fn signal_name(s: i64) -> &'static str {
    match s {
        SIGILL => "SIGILL",
        SIGTRAP => "SIGTRAP",
        SIGBUS => "SIGBUS",
        SIGFPE => "SIGFPE",
        SIGSEGV => "SIGSEGV",
        _ => "signal?",
    }
}

/// Differences between what QEMU recorded and what we computed, one line each.
fn compare(case: &Case, got: &Outcome) -> Vec<String> {
    let mut diffs = Vec::new();
    let (esig, ecode, epc) = case.stop;
    let (gsig, gkind, gpc) = got.stop;
    // SIGILL's si_code tells an illegal instruction from a privileged one where QEMU knows.
    // The privileged instructions (cases named `…/priv/…`) must raise the privileged kind:
    // QEMU's user-mode build reports some of them (slbfee.) as illegal, having left them out.
    let kind_ok = match (esig, ecode, gkind) {
        (SIGILL, _, Some(k)) if case.name.contains("/priv/") => k == ProgramKind::Privileged,
        (SIGILL, ILL_ILLOPC | ILL_ILLOPN, Some(k)) => k == ProgramKind::Illegal,
        (SIGILL, ILL_PRVOPC, Some(k)) => k == ProgramKind::Privileged,
        _ => true,
    };
    if esig != gsig || epc != gpc || !kind_ok {
        diffs.push(format!(
            "stop: expected {} (si_code {ecode}) at {epc:#x}, got {} ({gkind:?}) at {gpc:#x}",
            signal_name(esig),
            signal_name(gsig)
        ));
    }
    for name in reg_names() {
        if case.ignore.contains(&name) {
            continue;
        }
        let (e, g, i) = (
            case.expected.regs[&name],
            got.state.regs[&name],
            case.initial.regs[&name],
        );
        let keep = !case.mask.get(&name).copied().unwrap_or(0);
        if e & keep != g & keep {
            let w = if name.starts_with("vs") { 32 } else { 16 };
            diffs.push(format!(
                "{name}: expected {e:0w$x}, got {g:0w$x} (initial {i:0w$x})"
            ));
        }
    }
    for k in 0..BUF_SIZE {
        let (e, g) = (case.expected.mem[k], got.state.mem[k]);
        if e != g {
            diffs.push(format!(
                "mem[{:#x}]: expected {e:02x}, got {g:02x} (initial {:02x})",
                BUF_ADDR + k as u64,
                case.initial.mem[k]
            ));
        }
    }
    diffs
}

fn describe(case: &Case, diffs: &[String]) -> String {
    let mut s = format!(
        "{} ({}-endian)\n",
        case.name,
        if case.le { "little" } else { "big" }
    );
    for (k, w) in case.words.iter().enumerate() {
        let pc = CASE_ADDR + 4 * k as u64;
        let _ = writeln!(s, "    {pc:#x}: {w:08x}  {}", disassemble(*w, pc));
    }
    for d in diffs {
        let _ = writeln!(s, "  {d}");
    }
    s
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/data")
}

fn load(path: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let meta: Value = serde_json::from_str(lines.next().expect("header line")).unwrap();
    assert_eq!(meta["format"], 1, "{}: unknown format", path.display());
    lines
        .map(|l| Case::parse(&serde_json::from_str(l).expect("JSON line")))
        .collect()
}

/// Replays every case of a file; panics with a readable report if any differs.
/// LOCKSCALE_GOLDEN_FILTER=<substring of case names> narrows a run, LOCKSCALE_GOLDEN_SHOW=<n>
/// shows more than the first 40 differing cases.
fn replay(path: &Path, engine: Engine) -> usize {
    let mut cases = load(path);
    if let Ok(f) = std::env::var("LOCKSCALE_GOLDEN_FILTER") {
        cases.retain(|c| c.name.contains(&f));
    }
    let mut failures = Vec::new();
    let mut by_insn = BTreeMap::<String, usize>::new();
    // One JIT (one code module) for the whole file, moved from case to case: building a
    // module costs more than translating a case's block.
    let mut jit = (engine != Engine::Interp).then(|| {
        let mut scratch = Cpu::new(Box::new(ppc64emu::softmmu::FlatRam::new(0)));
        let mut j = Jit::attach(&mut scratch, JitShared::new());
        let tiers = if engine == Engine::Baseline {
            Tiers::BASELINE
        } else {
            Tiers::CRANELIFT
        };
        j.set_tiers(tiers, Some(0));
        j
    });
    for case in &cases {
        let got = run_case(case, jit.as_mut());
        let diffs = compare(case, &got);
        if !diffs.is_empty() {
            *by_insn
                .entry(
                    case.name
                        .rsplit_once('/')
                        .map_or(case.name.clone(), |x| x.0.to_string()),
                )
                .or_default() += 1;
            failures.push(describe(case, &diffs));
        }
    }
    if let Some(j) = &jit {
        // Every case starts with a translation (the map is emptied between cases).
        let n = j.counters.blocks_translated + j.counters.baseline.blocks_translated;
        assert!(
            n >= cases.len() as u64,
            "{}: {n} blocks translated for {} cases",
            path.display(),
            cases.len()
        );
    }
    if !failures.is_empty() {
        let show = std::env::var("LOCKSCALE_GOLDEN_SHOW")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(40);
        let shown: Vec<_> = failures.iter().take(show).cloned().collect();
        panic!(
            "{} ({engine:?}): {} of {} cases differ from QEMU\nby case group: {by_insn:?}\n\n{}",
            path.display(),
            failures.len(),
            cases.len(),
            shown.join("\n")
        );
    }
    cases.len()
}

fn replay_family(family: &str, engine: Engine) {
    let n = replay(&data_dir().join(format!("{family}.jsonl")), engine);
    assert!(
        n > 0 || std::env::var("LOCKSCALE_GOLDEN_FILTER").is_ok(),
        "{family}: no cases"
    );
}

/// Families with a test function of their own (per engine) below.
const OWN_FAMILIES: [&str; 8] = [
    "fixed",
    "branch",
    "loadstore",
    "system",
    "fp",
    "vsx_fp",
    "vmx",
    "vsx",
];

/// Data files of families without a test function of their own.
fn replay_other_families(engine: Engine) {
    for entry in std::fs::read_dir(data_dir()).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        if path.extension().is_some_and(|e| e == "jsonl") && !OWN_FAMILIES.contains(&stem.as_str())
        {
            replay(&path, engine);
        }
    }
}

/// One test per family and engine: `fixed_point` replays on the interpreter, `jit_fixed_point`
/// the same cases under the JIT (Cranelift), `baseline_fixed_point` under the baseline tier.
macro_rules! family_tests {
    ($($interp:ident, $jit:ident, $baseline:ident, $family:literal;)*) => {$(
        #[test]
        fn $interp() {
            replay_family($family, Engine::Interp);
        }

        #[test]
        fn $jit() {
            replay_family($family, Engine::Jit);
        }

        #[cfg(target_arch = "x86_64")]
        #[test]
        fn $baseline() {
            replay_family($family, Engine::Baseline);
        }
    )*};
}

family_tests! {
    fixed_point, jit_fixed_point, baseline_fixed_point, "fixed";
    branch, jit_branch, baseline_branch, "branch";
    load_store, jit_load_store, baseline_load_store, "loadstore";
    system, jit_system, baseline_system, "system";
    floating_point, jit_floating_point, baseline_floating_point, "fp";
    vsx_floating_point, jit_vsx_floating_point, baseline_vsx_floating_point, "vsx_fp";
    vmx, jit_vmx, baseline_vmx, "vmx";
    vsx, jit_vsx, baseline_vsx, "vsx";
}

#[test]
fn other_families() {
    replay_other_families(Engine::Interp);
}

#[test]
fn jit_other_families() {
    replay_other_families(Engine::Jit);
}

#[cfg(target_arch = "x86_64")]
#[test]
fn baseline_other_families() {
    replay_other_families(Engine::Baseline);
}

/// Mnemonics of each table file (`src/isa/table/<family>.insn`).
fn table_families() -> BTreeMap<String, Vec<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/isa/table");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "insn") {
            let text = std::fs::read_to_string(&path).unwrap();
            let names = text
                .lines()
                .filter_map(|l| {
                    l.split('#')
                        .next()
                        .unwrap()
                        .split_whitespace()
                        .next()
                        .map(String::from)
                })
                .collect();
            out.insert(
                path.file_stem().unwrap().to_str().unwrap().to_string(),
                names,
            );
        }
    }
    out
}

/// Every instruction of a family that has recorded vectors appears in them (decoded from the
/// case words), and each of those families has thousands of cases between them.
#[test]
fn every_instruction_of_a_recorded_family_is_covered() {
    let families = table_families();
    let mut recorded = 0;
    for (family, mnemonics) in &families {
        let path = data_dir().join(format!("{family}.jsonl"));
        if !path.exists() {
            continue;
        }
        let cases = load(&path);
        recorded += cases.len();
        let seen: BTreeSet<Op> = cases
            .iter()
            .flat_map(|c| c.words.iter().map(|w| decode(*w)))
            .collect();
        let missing: Vec<&String> = mnemonics
            .iter()
            .filter(|m| {
                !ALL_OPS
                    .iter()
                    .any(|op| op.info().mnemonic == m.as_str() && seen.contains(op))
            })
            .collect();
        assert!(
            missing.is_empty(),
            "{family}: no golden vectors for {missing:?}"
        );
    }
    assert!(recorded >= 1000, "only {recorded} recorded cases");
}

/// The ISA 3.0 instructions a POWER8 lacks are recorded as SIGILL, and we decode them as illegal.
#[test]
fn isa_3_0_instructions_are_recorded_as_illegal() {
    let mut cases = load(&data_dir().join("fixed.jsonl"));
    cases.extend(load(&data_dir().join("vmx.jsonl")));
    let isa3: Vec<&Case> = cases.iter().filter(|c| c.name.contains("/isa3/")).collect();
    assert!(isa3.len() >= 100);
    for c in isa3 {
        assert_eq!((c.stop.0, c.stop.2), (SIGILL, CASE_ADDR), "{}", c.name);
        assert_eq!(decode(c.words[0]), Op::Illegal, "{}", c.name);
    }
}

/// The reserved-field cases: each replays a word with reserved fields set against what QEMU
/// computed for it with them clear. The two words must differ only outside the row's fixed
/// bits and decode alike; the replay (every engine) then shows the fields are ignored.
#[test]
fn reserved_fields_are_ignored() {
    let mut cases = load(&data_dir().join("vmx.jsonl"));
    cases.extend(load(&data_dir().join("vsx.jsonl")));
    let reserved: Vec<&Case> = cases
        .iter()
        .filter(|c| c.name.contains("/reserved/"))
        .collect();
    assert!(
        reserved.len() >= 200,
        "{} reserved-field cases",
        reserved.len()
    );
    for c in reserved {
        let qemu = c.qemu_words.as_ref().expect("qemu_words");
        let (w, q) = (c.words[0], qemu[0]);
        let op = decode(q);
        assert_ne!(op, Op::Illegal, "{}", c.name);
        assert_eq!(decode(w), op, "{}", c.name);
        assert_ne!(w, q, "{}", c.name);
        assert_eq!((w ^ q) & op.info().mask, 0, "{}", c.name);
    }
}

/// Live differential fuzzing against QEMU (needs python3, qemu-ppc64le-static and
/// powerpc64le-linux-gnu-gcc): `LOCKSCALE_FUZZ=<scale> cargo test -p ppc64emu --test golden --
/// --ignored live_fuzz`. LOCKSCALE_FUZZ_SEED repeats a run; LOCKSCALE_FUZZ_FAMILY picks families
/// (comma-separated; default all of them).
#[test]
#[ignore = "needs QEMU; run with --ignored"]
fn live_fuzz_against_qemu() {
    let scale = std::env::var("LOCKSCALE_FUZZ").unwrap_or_else(|_| "0.5".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/gen.py");
    let out = std::env::temp_dir().join(format!("lockscale-fuzz-{}", std::process::id()));
    let mut cmd = std::process::Command::new("python3");
    cmd.arg(&script)
        .args(["fuzz", "--scale", &scale, "--out"])
        .arg(&out);
    if let Ok(seed) = std::env::var("LOCKSCALE_FUZZ_SEED") {
        cmd.args(["--seed", &seed]);
    }
    let families = std::env::var("LOCKSCALE_FUZZ_FAMILY")
        .unwrap_or_else(|_| "fixed,branch,loadstore,system,fp,vsx_fp,vmx,vsx".into());
    for f in families.split(',') {
        cmd.args(["--family", f]);
    }
    let status = cmd.status().expect("python3");
    assert!(
        status.success(),
        "gen.py fuzz failed (is qemu-ppc64le-static installed?)"
    );
    let mut failed = Vec::new();
    for f in families.split(',') {
        let path = out.join(format!("{f}.jsonl"));
        for engine in [Engine::Interp, Engine::Jit, Engine::Baseline] {
            if let Err(e) = std::panic::catch_unwind(|| replay(&path, engine)) {
                failed.push(e.downcast_ref::<String>().cloned().unwrap_or_default());
            }
        }
    }
    assert!(
        failed.is_empty(),
        "fuzz cases kept in {}\n{}",
        out.display(),
        failed.join("\n")
    );
    let _ = std::fs::remove_dir_all(&out);
}
