//! Generates the instruction table from the data files in `src/isa/table/*.insn`.
//!
//! Every instruction is described exactly once, as one line of data:
//!
//! ```text
//! # mnemonic  form  opcode   operands        flags
//! add         XO    31/266   rt,ra,rb        oe rc
//! ```
//!
//! The form fixes where the extended opcode sits and which bits are the Rc/OE/LK/AA
//! flags; `fix=B:V` / `fix=A-B:V` pins further bits (IBM numbering, bit 0 = MSB).
//! `bl=FAMILY` and `cl=FAMILY` name the family translator of the baseline tier and of
//! Cranelift that translates the instruction natively (without one, translated code calls
//! the interpreter for it); `via=ROUTINE` says that the interpreter executes it with the
//! shared routine `ROUTINE(cpu, insn, op)` of its family.
//! From this we emit the `Op` enum, per-op metadata (mask, match, operands, flags),
//! a two-level decode table and X-macros: `for_each_insn!` (the interpreter and the JIT
//! build their dispatch tables by name), `native_families!` (each tier's family tables)
//! and `for_each_via!` (the interpreter functions bound to a shared routine).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Extended-opcode field of each form, as (first bit, last bit) in IBM numbering.
fn form_xo(form: &str) -> Option<Option<(u32, u32)>> {
    Some(match form {
        "I" | "B" | "D" | "M" | "SC" | "DQ" => None,
        "DS" => Some((30, 31)),
        "X" | "XL" | "XFX" | "XFL" | "XX1" => Some((21, 30)),
        "XO" | "XS" | "XX2" => Some(if form == "XO" { (22, 30) } else { (21, 29) }),
        "MD" => Some((27, 29)),
        "MDS" => Some((27, 30)),
        "A" => Some((26, 30)),
        "VA" => Some((26, 31)),
        "VX" => Some((21, 31)),
        "VC" => Some((22, 31)),
        "XX3" => Some((21, 28)),
        "XX3R" => Some((22, 28)),
        "XX4" => Some((26, 27)),
        _ => return None,
    })
}

/// Operand names the data files may use; each must be a variant of `isa::Operand`.
const OPERANDS: &[&str] = &[
    "rt", "rs", "ra", "ra0", "rb", "si", "ui", "d_ra", "ds_ra", "dq_ra", "bf", "bfa", "l10", "l15",
    "l_sync", "bt", "ba", "bb", "bo", "bi", "bh", "bd", "li", "to", "sh", "mb", "me", "sh6", "mb6",
    "spr", "tbr", "crm", "fxm", "flm", "u", "w", "frt", "frs", "fra", "frb", "frc", "vrt", "vrs",
    "vra", "vrb", "vrc", "xt", "xs", "xa", "xb", "xc", "dm", "shw", "uim", "simm", "shb", "nb",
    "th", "lev", "eh", "sr", "bc", "st", "six", "ps", "strm",
];

/// Flags the data files may use, in the order of their bit in `InsnFlags`.
const FLAGS: &[&str] = &[
    "rc",
    "rc21",
    "oe",
    "lk",
    "aa",
    "priv",
    "hv",
    "load",
    "store",
    "update",
    "indexed",
    "algebraic",
    "int_word",
    "byterev",
    "reserve",
    "conditional",
    "branch",
    "fp",
    "vec",
    "vsx",
    "sets_ca",
    "reads_ca",
    "cache",
    "sets_cr",
    "sets_fpscr",
    "ends_block",
];

struct Insn {
    mnemonic: String,
    ident: String,
    func: String,
    form: String,
    mask: u32,
    value: u32,
    operands: Vec<String>,
    flags: Vec<String>,
    size: u32,
    origin: String,
    /// (tier, family) of each native translation (`bl=`, `cl=`).
    native: Vec<(String, String)>,
    /// The interpreter's shared routine (`via=`).
    via: Option<String>,
}

/// The translating tiers a row may name a family of, with the name the macro uses.
const TIERS: &[(&str, &str)] = &[("bl", "baseline"), ("cl", "cranelift")];

fn bits(first: u32, last: u32) -> u32 {
    let width = last - first + 1;
    let ones = if width == 32 {
        u32::MAX
    } else {
        (1u32 << width) - 1
    };
    ones << (31 - last)
}

fn camel(mnemonic: &str) -> String {
    let mut s = String::new();
    let mut upper = true;
    for c in mnemonic.chars() {
        match c {
            '.' => s.push_str("Dot"),
            '_' => upper = true,
            c if upper => {
                s.extend(c.to_uppercase());
                upper = false;
            }
            c => s.push(c),
        }
    }
    s
}

fn parse_line(line: &str, origin: &str) -> Result<Insn, String> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    if toks.len() < 4 {
        return Err("expected: mnemonic form opcode operands [flags…]".into());
    }
    let (mnemonic, form, opcode, operands) = (toks[0], toks[1], toks[2], toks[3]);
    let xo_field = form_xo(form).ok_or_else(|| format!("unknown form `{form}`"))?;
    let (primary, xo) = match opcode.split_once('/') {
        Some((p, x)) => (p, Some(x)),
        None => (opcode, None),
    };
    let primary: u32 = primary
        .parse()
        .map_err(|_| format!("bad primary opcode `{primary}`"))?;
    if primary > 63 {
        return Err("primary opcode > 63".into());
    }
    let mut mask = bits(0, 5);
    let mut value = primary << 26;
    match (xo_field, xo) {
        (Some((a, b)), Some(x)) => {
            let x: u32 = x
                .parse()
                .map_err(|_| format!("bad extended opcode `{x}`"))?;
            if x >= 1 << (b - a + 1) {
                return Err(format!("extended opcode {x} does not fit bits {a}-{b}"));
            }
            mask |= bits(a, b);
            value |= x << (31 - b);
        }
        (None, None) => {}
        (Some(_), None) => return Err(format!("form {form} needs an extended opcode (P/X)")),
        (None, Some(_)) => return Err(format!("form {form} has no extended opcode")),
    }
    if form == "SC" {
        mask |= bits(30, 30);
        value |= 1 << 1;
    }
    let mut flags = Vec::new();
    let mut size = 0;
    let mut native: Vec<(String, String)> = Vec::new();
    let mut via = None;
    let ident = |v: &str| !v.is_empty() && v.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    for f in &toks[4..] {
        let column = f
            .split_once('=')
            .filter(|(t, _)| TIERS.iter().any(|x| x.0 == *t));
        if let Some((tier, fam)) = column {
            if !ident(fam) {
                return Err(format!("bad family in `{f}`"));
            }
            if native.iter().any(|(t, _)| t == tier) {
                return Err(format!("two families of tier `{tier}`"));
            }
            native.push((tier.to_string(), fam.to_string()));
        } else if let Some(r) = f.strip_prefix("via=") {
            if !ident(r) {
                return Err(format!("bad routine in `{f}`"));
            }
            via = Some(r.to_string());
        } else if let Some(spec) = f.strip_prefix("fix=") {
            let (range, v) = spec.split_once(':').ok_or("fix=BITS:VALUE")?;
            let (a, b) = match range.split_once('-') {
                Some((a, b)) => (a.parse::<u32>(), b.parse::<u32>()),
                None => (range.parse::<u32>(), range.parse::<u32>()),
            };
            let (a, b) = (
                a.map_err(|_| "bad fix range")?,
                b.map_err(|_| "bad fix range")?,
            );
            if a > b || b > 31 {
                return Err(format!("bad fix range {range}"));
            }
            let v: u32 = v.parse().map_err(|_| "bad fix value")?;
            if b - a < 31 && v >> (b - a + 1) != 0 {
                return Err(format!("fix value {v} does not fit bits {range}"));
            }
            mask |= bits(a, b);
            value = (value & !bits(a, b)) | (v << (31 - b));
        } else if let Some(n) = f.strip_prefix("load=").or_else(|| f.strip_prefix("store=")) {
            size = n.parse().map_err(|_| format!("bad access size in `{f}`"))?;
            flags.push(f.split('=').next().unwrap().to_string());
        } else if FLAGS.contains(f) {
            flags.push(f.to_string());
        } else {
            return Err(format!("unknown flag `{f}`"));
        }
    }
    let operands: Vec<String> = if operands == "-" {
        Vec::new()
    } else {
        operands.split(',').map(str::to_string).collect()
    };
    for o in &operands {
        if !OPERANDS.contains(&o.as_str()) {
            return Err(format!("unknown operand `{o}`"));
        }
    }
    let func = mnemonic.replace('.', "_");
    Ok(Insn {
        mnemonic: mnemonic.to_string(),
        ident: camel(mnemonic),
        func,
        form: form.to_string(),
        mask,
        value,
        operands,
        flags,
        size,
        origin: origin.to_string(),
        native,
        via,
    })
}

/// Bits that an instruction leaves free because they carry a flag (Rc, OE, LK, AA).
fn flag_bits(i: &Insn) -> u32 {
    let mut m = 0;
    for f in &i.flags {
        m |= match f.as_str() {
            "rc" | "lk" => bits(31, 31),
            "rc21" | "oe" => bits(21, 21),
            "aa" => bits(30, 30),
            _ => 0,
        };
    }
    m
}

fn main() {
    let dir = PathBuf::from("src/isa/table");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("src/isa/table")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "insn"))
        .collect();
    files.sort();
    let mut insns = Vec::new();
    let mut errors = Vec::new();
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let text = std::fs::read_to_string(f).unwrap();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap().trim();
            if line.is_empty() {
                continue;
            }
            let origin = format!("{}:{}", f.display(), n + 1);
            match parse_line(line, &origin) {
                Ok(i) => insns.push(i),
                Err(e) => errors.push(format!("{origin}: {e}: `{line}`")),
            }
        }
    }
    let mut seen = BTreeMap::new();
    for i in &insns {
        if let Some(prev) = seen.insert(i.mnemonic.clone(), i.origin.clone()) {
            errors.push(format!(
                "{}: `{}` already described at {prev}",
                i.origin, i.mnemonic
            ));
        }
        if flag_bits(i) & i.mask != 0 {
            errors.push(format!(
                "{}: a flag bit of `{}` is also an opcode bit",
                i.origin, i.mnemonic
            ));
        }
    }
    // Two instructions whose encodings overlap must differ in specificity; the more
    // specific one (more mask bits) is tried first.
    for (a, x) in insns.iter().enumerate() {
        for y in &insns[a + 1..] {
            let common = x.mask & y.mask;
            if (x.value & common) == (y.value & common)
                && x.mask.count_ones() == y.mask.count_ones()
            {
                errors.push(format!(
                    "{} and {}: `{}` and `{}` have overlapping encodings of equal specificity",
                    x.origin, y.origin, x.mnemonic, y.mnemonic
                ));
            }
        }
    }
    if !errors.is_empty() {
        for e in &errors {
            println!("cargo:warning={e}");
        }
        panic!(
            "instruction table has {} error(s):\n{}",
            errors.len(),
            errors.join("\n")
        );
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("isa_table.rs");
    std::fs::write(&out, generate(&insns)).unwrap();
}

fn generate(insns: &[Insn]) -> String {
    let mut s = String::new();
    let n = insns.len() + 1;
    s.push_str("/// One variant per instruction of the table; `Illegal` for anything else.\n");
    s.push_str("#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]\n#[repr(u16)]\npub enum Op {\n    Illegal = 0,\n");
    for (k, i) in insns.iter().enumerate() {
        let _ = writeln!(
            s,
            "    /// `{}` ({} form)\n    {} = {},",
            i.mnemonic,
            i.form,
            i.ident,
            k + 1
        );
    }
    s.push_str("}\n\n");
    let _ = writeln!(
        s,
        "/// Number of `Op` values, `Illegal` included.\npub const OP_COUNT: usize = {n};\n"
    );
    s.push_str("/// Every `Op` in table order (index = `op as usize`).\npub const ALL_OPS: [Op; OP_COUNT] = [Op::Illegal");
    for i in insns {
        let _ = write!(s, ", Op::{}", i.ident);
    }
    s.push_str("];\n\n");
    s.push_str(
        "/// Per-op metadata, indexed by `op as usize`.\npub static INFO: [OpInfo; OP_COUNT] = [\n",
    );
    s.push_str("    OpInfo { mnemonic: \"(illegal)\", form: Form::X, mask: 0, value: 0, operands: &[], flags: InsnFlags(0), size: 0 },\n");
    for i in insns {
        let ops: Vec<String> = i
            .operands
            .iter()
            .map(|o| format!("Operand::{}", camel(o)))
            .collect();
        let flag_bits: u32 = i
            .flags
            .iter()
            .map(|f| 1u32 << FLAGS.iter().position(|x| x == f).unwrap())
            .sum();
        let flags = format!("InsnFlags({flag_bits:#x})");
        let _ = writeln!(
            s,
            "    OpInfo {{ mnemonic: {:?}, form: Form::{}, mask: {:#010x}, value: {:#010x}, operands: &[{}], flags: {}, size: {} }},",
            i.mnemonic,
            i.form,
            i.mask,
            i.value,
            ops.join(", "),
            flags,
            i.size
        );
    }
    s.push_str("];\n\n");

    // Flag constants.
    s.push_str("impl InsnFlags {\n");
    for (k, f) in FLAGS.iter().enumerate() {
        let _ = writeln!(
            s,
            "    pub const {}: Self = Self(1 << {k});",
            f.to_uppercase()
        );
    }
    s.push_str("}\n\n");

    // Decode tables: primary opcode → either a single candidate list, or a table
    // indexed by the low 11 bits (IBM bits 21-31) → candidate list.
    let mut lists: Vec<Vec<usize>> = vec![vec![]];
    let mut list_index = BTreeMap::<Vec<usize>, usize>::new();
    list_index.insert(vec![], 0);
    let mut intern = |mut v: Vec<usize>| -> usize {
        v.sort_by_key(|&k| std::cmp::Reverse(insns[k].mask.count_ones()));
        if let Some(&i) = list_index.get(&v) {
            return i;
        }
        lists.push(v.clone());
        list_index.insert(v, lists.len() - 1);
        lists.len() - 1
    };
    let mut primary = vec![(0u8, 0usize); 64];
    let mut secondary: Vec<Vec<usize>> = Vec::new();
    for p in 0..64u32 {
        let cands: Vec<usize> = (0..insns.len())
            .filter(|&k| insns[k].value >> 26 == p)
            .collect();
        let low_bits_used = cands.iter().any(|&k| insns[k].mask & 0x7ff != 0);
        if !low_bits_used {
            primary[p as usize] = (0, intern(cands));
        } else {
            let table: Vec<usize> = (0..2048u32)
                .map(|low| {
                    intern(
                        cands
                            .iter()
                            .copied()
                            .filter(|&k| {
                                (low & insns[k].mask & 0x7ff)
                                    == (insns[k].value & insns[k].mask & 0x7ff)
                            })
                            .collect(),
                    )
                })
                .collect();
            secondary.push(table);
            primary[p as usize] = (1, secondary.len() - 1);
        }
    }
    s.push_str("static DECODE_LISTS: &[&[Op]] = &[\n");
    for l in &lists {
        let names: Vec<String> = l
            .iter()
            .map(|&k| format!("Op::{}", insns[k].ident))
            .collect();
        let _ = writeln!(s, "    &[{}],", names.join(", "));
    }
    s.push_str("];\n\n");
    s.push_str("/// (0, list) = try `list`; (1, t) = look up the low 11 bits in `DECODE_SECONDARY[t]`.\nstatic DECODE_PRIMARY: [(u8, u16); 64] = [");
    for (kind, idx) in &primary {
        let _ = write!(s, "({kind}, {idx}), ");
    }
    s.push_str("];\n\n");
    let _ = writeln!(
        s,
        "static DECODE_SECONDARY: [[u16; 2048]; {}] = [",
        secondary.len()
    );
    for t in &secondary {
        s.push_str("    [");
        for v in t {
            let _ = write!(s, "{v},");
        }
        s.push_str("],\n");
    }
    s.push_str("];\n\n");

    // X-macro: `for_each_insn!(callback)` expands to `callback! { (Ident, func, "mnemonic"), … }`.
    s.push_str("/// Calls `$m! { (Op, function_name, \"mnemonic\"), … }` with every instruction.\nmacro_rules! for_each_insn {\n    ($m:ident) => {\n        $m! {\n");
    for i in insns {
        let _ = writeln!(
            s,
            "            ({}, {}, {:?}),",
            i.ident, i.func, i.mnemonic
        );
    }
    s.push_str("        }\n    };\n}\n\n");

    // `native_families!(tier, callback)` expands to `callback! { family: [Op, …], … }` with
    // the families of `tier` in the order they first appear.
    s.push_str("/// Calls `$m! { family: [Op, …], … }` with the native translations of a tier\n/// (`baseline` or `cranelift`: the table's `bl=` and `cl=` columns).\nmacro_rules! native_families {\n");
    for (col, tier) in TIERS {
        let mut fams: Vec<(String, Vec<&str>)> = Vec::new();
        for i in insns {
            for (t, f) in &i.native {
                if t != col {
                    continue;
                }
                match fams.iter_mut().find(|(n, _)| n == f) {
                    Some((_, ops)) => ops.push(i.ident.as_str()),
                    None => fams.push((f.clone(), vec![i.ident.as_str()])),
                }
            }
        }
        let _ = writeln!(s, "    ({tier}, $m:ident) => {{\n        $m! {{");
        for (f, ops) in &fams {
            let _ = writeln!(s, "            {f}: [{}],", ops.join(", "));
        }
        s.push_str("        }\n    };\n");
    }
    s.push_str("}\n\n");

    // `for_each_via!(callback)` expands to `callback! { (routine, function, Op), … }`.
    s.push_str("/// Calls `$m! { (routine, function_name, Op), … }` with every instruction the\n/// interpreter executes through a shared routine (the table's `via=` column).\nmacro_rules! for_each_via {\n    ($m:ident) => {\n        $m! {\n");
    for i in insns {
        if let Some(v) = &i.via {
            let _ = writeln!(s, "            ({v}, {}, {}),", i.func, i.ident);
        }
    }
    s.push_str("        }\n    };\n}\n");
    s
}
