#!/usr/bin/env python3
"""Golden vectors for the interpreter, recorded from QEMU's user-mode emulator.

Generates random test cases for one instruction family (one table file
`src/isa/table/<family>.insn`), runs them under `qemu-ppc64le-static` with
QEMU_CPU=power8 through a small freestanding harness (harness.c), and writes what
QEMU computed to `data/<family>.jsonl`, which `tests/golden.rs` replays on our
interpreter. See README.md for the case format and how to extend the generator.

    gen.py record --family fixed            # (re)write data/fixed.jsonl
    gen.py record                           # every family that has a data file
    gen.py fuzz --family fixed --count 4    # fresh random cases into a temp dir
    gen.py show data/fixed.jsonl 17         # one case, disassembled with objdump

Python 3 standard library only.
"""

import argparse
from fractions import Fraction
import json
import os
import random
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EMULATOR = os.path.dirname(os.path.dirname(HERE))
TABLE_DIR = os.path.join(EMULATOR, "src", "isa", "table")
DATA_DIR = os.path.join(HERE, "data")

# --- memory layout (mirrored in harness.c and tests/golden.rs) -------------------------------

CODE_REGION = 0x4000_0000      # 64 KiB, mapped read/write/execute by the harness
LOADER_ADDR = CODE_REGION      # the loader: every register from the state block
CASE_ADDR = CODE_REGION + 0x1000  # the instructions under test, then `trap`
CASE_MAX_WORDS = 0x400
STATE_ADDR = CODE_REGION + 0x8000
DATA_REGION = 0x4002_0000      # 8 KiB, read/write
BUF_ADDR = DATA_REGION + 0xF00  # the data buffer: spans the page boundary at +0x1000
BUF_SIZE = 512
TRAP = 0x7FE00008              # tw 31,0,0: ends every case

SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV = 4, 5, 7, 8, 11

FORMAT_VERSION = 1

# --- the table -------------------------------------------------------------------------------

FORM_XO = {
    "I": None, "B": None, "D": None, "M": None, "SC": None, "DQ": None,
    "DS": (30, 31), "X": (21, 30), "XL": (21, 30), "XFX": (21, 30), "XFL": (21, 30),
    "XX1": (21, 30), "XO": (22, 30), "XS": (21, 29), "XX2": (21, 29), "MD": (27, 29),
    "MDS": (27, 30), "A": (26, 30), "VA": (26, 31), "VX": (21, 31), "VC": (22, 31),
    "XX3": (21, 28), "XX3R": (22, 28), "XX4": (26, 27),
}


def bits(first, last):
    width = last - first + 1
    return ((1 << width) - 1) << (31 - last)


class InsnDef:
    """One line of a table file, with the encoding computed as build.rs does."""

    def __init__(self, line, family):
        toks = line.split()
        self.mnemonic, self.form, opcode, operands = toks[:4]
        self.family = family
        primary, _, xo = opcode.partition("/")
        self.mask = bits(0, 5)
        self.value = int(primary) << 26
        field = FORM_XO[self.form]
        if field and xo:
            self.mask |= bits(*field)
            self.value |= int(xo) << (31 - field[1])
        if self.form == "SC":
            self.mask |= bits(30, 30)
            self.value |= 2
        self.flags = set()
        self.size = 0
        for f in toks[4:]:
            if f.startswith("fix="):
                rng, v = f[4:].split(":")
                a, _, b = rng.partition("-")
                a, b = int(a), int(b or a)
                self.mask |= bits(a, b)
                self.value = (self.value & ~bits(a, b)) | (int(v) << (31 - b))
            elif f.startswith(("load=", "store=")):
                kind, n = f.split("=")
                self.flags.add(kind)
                self.size = int(n)
            else:
                self.flags.add(f)
        self.operands = [] if operands == "-" else operands.split(",")

    def __repr__(self):
        return self.mnemonic


def load_table():
    fams = {}
    for name in sorted(os.listdir(TABLE_DIR)):
        if not name.endswith(".insn"):
            continue
        fam = name[:-5]
        fams[fam] = []
        with open(os.path.join(TABLE_DIR, name)) as f:
            for raw in f:
                line = raw.split("#")[0].strip()
                if line:
                    fams[fam].append(InsnDef(line, fam))
    return fams


# --- operand fields --------------------------------------------------------------------------


def spr_field(n):
    return ((n & 31) << 5 | n >> 5) << 11


# Where each operand kind sits in the word (value already range-checked).
FIELD = {
    "rt": lambda v: v << 21, "rs": lambda v: v << 21, "frt": lambda v: v << 21,
    "frs": lambda v: v << 21, "vrt": lambda v: v << 21, "vrs": lambda v: v << 21,
    "bt": lambda v: v << 21, "bo": lambda v: v << 21, "to": lambda v: v << 21,
    "th": lambda v: v << 21,
    "ra": lambda v: v << 16, "ra0": lambda v: v << 16, "fra": lambda v: v << 16,
    "vra": lambda v: v << 16, "ba": lambda v: v << 16, "bi": lambda v: v << 16,
    "rb": lambda v: v << 11, "frb": lambda v: v << 11, "vrb": lambda v: v << 11,
    "bb": lambda v: v << 11, "sh": lambda v: v << 11, "nb": lambda v: v << 11,
    "si": lambda v: v & 0xFFFF, "ui": lambda v: v & 0xFFFF,
    "bf": lambda v: v << 23, "bfa": lambda v: v << 18,
    "l10": lambda v: v << 21, "l15": lambda v: v << 16, "l_sync": lambda v: v << 21,
    "bh": lambda v: v << 11, "bd": lambda v: v & 0xFFFC, "li": lambda v: v & 0x3FFFFFC,
    "mb": lambda v: v << 6, "me": lambda v: v << 1,
    "sh6": lambda v: (v & 31) << 11 | (v >> 5) << 1,
    "mb6": lambda v: ((v & 31) << 1 | v >> 5) << 5,
    "spr": spr_field, "tbr": spr_field,
    "crm": lambda v: v << 12, "fxm": lambda v: v << 12,
    "flm": lambda v: v << 17, "u": lambda v: v << 12, "w": lambda v: v << 16,
    "frc": lambda v: v << 6, "vrc": lambda v: v << 6, "bc": lambda v: v << 6,
    "xt": lambda v: (v & 31) << 21 | v >> 5, "xs": lambda v: (v & 31) << 21 | v >> 5,
    "xa": lambda v: (v & 31) << 16 | (v >> 5) << 2,
    "xb": lambda v: (v & 31) << 11 | (v >> 5) << 1,
    "xc": lambda v: (v & 31) << 6 | (v >> 5) << 3,
    "dm": lambda v: v << 8, "shw": lambda v: v << 8,
    "uim": lambda v: v << 16, "simm": lambda v: (v & 31) << 16, "shb": lambda v: v << 6,
    "lev": lambda v: v << 5, "eh": lambda v: v, "sr": lambda v: v << 16,
    "st": lambda v: v << 15, "six": lambda v: v << 11, "ps": lambda v: v << 9, "strm": lambda v: v << 21,
}

# Range of each plain operand kind (exclusive upper bound).
RANGE = {
    "rt": 32, "rs": 32, "ra": 32, "ra0": 32, "rb": 32,
    "frt": 32, "frs": 32, "fra": 32, "frb": 32, "frc": 32,
    "vrt": 32, "vrs": 32, "vra": 32, "vrb": 32, "vrc": 32,
    "xt": 64, "xs": 64, "xa": 64, "xb": 64, "xc": 64,
    "bt": 32, "ba": 32, "bb": 32, "bi": 32, "bc": 32, "to": 32, "th": 32,
    "bf": 8, "bfa": 8, "l10": 2, "l15": 2, "l_sync": 3, "bh": 4,
    "sh": 32, "nb": 32, "mb": 32, "me": 32, "sh6": 64, "mb6": 64,
    "crm": 256, "fxm": 256, "flm": 256, "u": 16, "w": 2,
    "dm": 4, "shw": 4, "uim": 32, "simm": 32, "shb": 16, "lev": 128, "eh": 2, "sr": 16,
    "st": 2, "six": 16, "ps": 2, "strm": 4,
}

# Per-instruction operand ranges that are narrower than the field (families add theirs).
RANGE_OVERRIDE = {
    # UIM selects an element: only as many bits as there are elements are defined.
    ("vspltb", "uim"): 16, ("vsplth", "uim"): 8, ("vspltw", "uim"): 4, ("xxspltw", "uim"): 4,
}

GPR_OPS = {"rt", "rs", "ra", "ra0", "rb"}
FPR_OPS = {"frt", "frs", "fra", "frb", "frc"}
VR_OPS = {"vrt", "vrs", "vra", "vrb", "vrc"}
VSR_OPS = {"xt", "xs", "xa", "xb", "xc"}

# Flag bits that the generator sets at random.
FLAG_BIT = {"rc": 1, "lk": 1, "oe": 1 << 10, "rc21": 1 << 10, "aa": 2}

# --- values ----------------------------------------------------------------------------------

M64 = (1 << 64) - 1

GPR_EDGES = [
    0, 1, 2, 3, M64, M64 - 1, 0x7FFF_FFFF_FFFF_FFFF, 0x8000_0000_0000_0000,
    0x8000_0000_0000_0001, 0xFFFF_FFFF, 0x8000_0000, 0x7FFF_FFFF, 0xFFFF_FFFF_8000_0000,
    0xFFFF_FFFF_7FFF_FFFF, 0x1_0000_0000, 0x1_FFFF_FFFF, 0x8000, 0x7FFF, 0xFFFF,
    0xFFFF_FFFF_FFFF_8000, 31, 32, 33, 63, 64, 65, 127, 128, 0xFF, 0x80,
    0x0101_0101_0101_0101, 0x8080_8080_8080_8080, 0x0000_0001_0000_0000, 0x5555_5555_5555_5555,
    0xAAAA_AAAA_AAAA_AAAA,
]

FP_EDGES = [
    0x0000_0000_0000_0000, 0x8000_0000_0000_0000,            # +-0
    0x7FF0_0000_0000_0000, 0xFFF0_0000_0000_0000,            # +-Inf
    0x7FF8_0000_0000_0000, 0xFFF8_0000_0000_0000,            # QNaN
    0x7FF0_0000_0000_0001, 0xFFF4_0000_0000_0000,            # SNaN
    0x7FFC_0000_DEAD_BEEF,                                   # QNaN with payload
    0x0000_0000_0000_0001, 0x800F_FFFF_FFFF_FFFF,            # denormals
    0x0010_0000_0000_0000, 0x7FEF_FFFF_FFFF_FFFF,            # min normal, max
    0x3FF0_0000_0000_0000, 0xBFF0_0000_0000_0000,            # +-1
    0x3FE0_0000_0000_0000, 0x4000_0000_0000_0000, 0x4008_0000_0000_0000, 0x3FF8_0000_0000_0000,
    0x4330_0000_0000_0000, 0x43E0_0000_0000_0000, 0xC3E0_0000_0000_0000,  # 2^52, +-2^63
    0x41E0_0000_0000_0000, 0xC1E0_0000_0000_0000, 0x41F0_0000_0000_0000,  # 2^31, -2^31, 2^32
    0x3810_0000_0000_0000, 0x3800_0000_0000_0000, 0x36A0_0000_0000_0000,  # single min normal, denormals
    0x47EF_FFFF_E000_0000, 0x47F0_0000_0000_0000,            # single max, just above
    0x3FB9_9999_9999_999A,                                   # 0.1
]

SP_EDGES = [
    0x0000_0000, 0x8000_0000, 0x7F80_0000, 0xFF80_0000, 0x7FC0_0000, 0xFFC0_0000,
    0x7F80_0001, 0xFFA0_0000, 0x0000_0001, 0x807F_FFFF, 0x0080_0000, 0x7F7F_FFFF,
    0x3F80_0000, 0xBF80_0000, 0x3F00_0000, 0x4040_0000, 0x4F00_0000, 0xCF00_0000, 0x3DCC_CCCD,
]


class Gen(random.Random):
    """Random choices with a bias towards edge values."""

    def gpr_value(self):
        r = self.random()
        if r < 0.45:
            return self.choice(GPR_EDGES)
        if r < 0.55:
            return self.getrandbits(8)
        if r < 0.65:
            return (self.getrandbits(32) << 32) | self.choice(GPR_EDGES) & 0xFFFF_FFFF
        if r < 0.75:
            return (self.choice(GPR_EDGES) & 0xFFFF_FFFF_0000_0000) | self.getrandbits(32)
        return self.getrandbits(64)

    def fp_value(self):
        r = self.random()
        if r < 0.5:
            return self.choice(FP_EDGES)
        if r < 0.6:  # a random single-precision value, as a double
            return single_to_double(self.sp_value())
        if r < 0.8:  # a double of moderate magnitude
            return (self.getrandbits(1) << 63) | (self.randint(0x3C0, 0x440) << 52) | self.getrandbits(52)
        return self.getrandbits(64)

    def sp_value(self):
        if self.random() < 0.5:
            return self.choice(SP_EDGES)
        return self.getrandbits(32)

    def vec_value(self):
        r = self.random()
        if r < 0.2:
            return self.getrandbits(128)
        if r < 0.4:  # doublewords from the FP pool
            return self.fp_value() << 64 | self.fp_value()
        if r < 0.6:  # words from the single-precision pool
            return sum(self.sp_value() << (32 * k) for k in range(4))
        if r < 0.8:  # words from the integer pool
            return sum((self.gpr_value() & 0xFFFF_FFFF) << (32 * k) for k in range(4))
        return self.gpr_value() << 64 | self.gpr_value()

    def imm16(self):
        r = self.random()
        if r < 0.4:
            return self.choice([0, 1, 2, 0x7FFF, 0x8000, 0xFFFF, 0xFFFE, 0x8001, 0x00FF, 0x0100])
        if r < 0.6:
            return self.getrandbits(5)
        return self.getrandbits(16)


def single_to_double(w):
    """The ISA's DOUBLE(): exact, signalling NaNs stay signalling."""
    sign = (w >> 31) << 63
    exp = (w >> 23) & 0xFF
    frac = w & 0x7F_FFFF
    if exp == 0xFF:
        return sign | (0x7FF << 52) | (frac << 29)
    if exp == 0:
        if frac == 0:
            return sign
        return sign | struct.unpack("<Q", struct.pack("<d", frac * 2.0**-149))[0]
    return sign | ((exp + 896) << 52) | (frac << 29)


# --- the initial state: a seeded fill, then explicit overrides -------------------------------

class SplitMix64:
    """The fill generator; tests/golden.rs has the same one."""

    def __init__(self, seed):
        self.s = seed & M64

    def next(self):
        self.s = (self.s + 0x9E37_79B9_7F4A_7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58_476D_1CE4_E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D0_49BB_1331_11EB) & M64
        return z ^ (z >> 31)


REG_NAMES = (
    [f"r{i}" for i in range(32)]
    + ["cr", "xer", "lr", "ctr", "fpscr", "vscr", "vrsave"]
    + [f"vs{i}" for i in range(64)]
)


def fill(seed):
    """Registers and buffer of a case before its overrides (documented in README.md)."""
    g = SplitMix64(seed)
    st = {}
    for i in range(32):
        st[f"r{i}"] = g.next()
    st["cr"] = g.next() & 0xFFFF_FFFF
    x = g.next()
    st["xer"] = (x & 1) << 31 | (x >> 1 & 1) << 30 | (x >> 2 & 1) << 29 | (x >> 8 & 0x7F)
    st["lr"] = g.next()
    st["ctr"] = g.next()
    st["fpscr"] = 0
    st["vscr"] = 0x0001_0000
    st["vrsave"] = g.next() & 0xFFFF_FFFF
    for i in range(64):
        hi = g.next()
        st[f"vs{i}"] = hi << 64 | g.next()
    mem = bytearray()
    for _ in range(BUF_SIZE // 8):
        mem += g.next().to_bytes(8, "little")
    return st, mem


def reg_width(name):
    if name.startswith("vs"):
        return 32
    if name in ("cr", "vscr", "vrsave"):
        return 8
    return 16


def hexv(name, v):
    return f"{v:0{reg_width(name)}x}"


# --- cases -----------------------------------------------------------------------------------

class Case:
    def __init__(self, name, seed, le):
        self.name = name
        self.seed = seed
        self.le = le
        self.words = []
        self.init = {}
        self.mem_init = {}  # offset -> byte
        self.ignore = set()
        self.mask = {}  # register -> bits not compared
        self.note = None
        self.replay_words = None  # words replayed instead of `words` (which QEMU ran)

    def state(self):
        st, mem = fill(self.seed)
        st.update(self.init)
        for off, b in self.mem_init.items():
            mem[off] = b
        return st, mem

    def set_mem(self, addr, data):
        off = addr - BUF_ADDR
        assert 0 <= off and off + len(data) <= BUF_SIZE, hex(addr)
        for k, b in enumerate(data):
            self.mem_init[off + k] = b


class Invalid(Exception):
    """The random operands do not make a case; draw again."""


class Stream:
    """Builds the instructions of one case, keeping track of what they need."""

    def __init__(self, gen, case):
        self.g = gen
        self.case = case
        self.fixed = {}       # register name -> value the case needs
        self.written = set()  # GPRs an earlier instruction may have written
        self.lr_used = False  # an earlier instruction may have written LR or branched on it
        self.ctr_used = False

    def need(self, name, value):
        value &= M64 if not name.startswith("vs") else (1 << 128) - 1
        if name in self.fixed and self.fixed[name] != value:
            raise Invalid()
        if name.startswith("r") and int(name[1:]) in self.written:
            raise Invalid()
        self.fixed[name] = value

    def finish(self):
        self.case.init.update(self.fixed)


def encode(insn, ops, flagbits=0):
    """The instruction word; memory operands are (displacement, RA) pairs."""
    w = insn.value | flagbits
    for kind, v in zip(insn.operands, ops):
        if kind in ("d_ra", "ds_ra", "dq_ra"):
            d, ra = v
            w |= (d & 0xFFFF) | ra << 16
        else:
            w |= FIELD[kind](v)
    return w & 0xFFFF_FFFF


def operand_bits(kind):
    """The bits of the word that an operand kind occupies."""
    if kind in ("d_ra", "ds_ra", "dq_ra"):
        return 0x1F_FFFF
    if kind in ("bd", "li", "si", "ui"):
        return FIELD[kind](-1)
    return FIELD[kind](RANGE[kind] - 1) & 0xFFFF_FFFF


def reserved_bits(insn):
    """Bits that neither identify the instruction nor hold an operand or a flag: its
    reserved fields, which the processor ignores (Book I 1.3.3)."""
    used = insn.mask
    for kind in insn.operands:
        used |= operand_bits(kind)
    for flag, bit in FLAG_BIT.items():
        if flag in insn.flags:
            used |= bit
    return ~used & 0xFFFF_FFFF


# --- generic operand generation ---------------------------------------------------------------

def random_operands(g, insn):
    ops = []
    for kind in insn.operands:
        rng = RANGE_OVERRIDE.get((insn.mnemonic, kind), RANGE.get(kind))
        if kind in ("si", "ui"):
            ops.append(g.imm16())
        elif kind == "bo":
            ops.append(random_bo(g))
        elif kind in ("spr", "tbr"):
            ops.append(g.choice(USER_SPRS))
        elif kind in ("fxm", "crm"):
            ops.append(1 << g.randrange(8) if g.random() < 0.6 else g.randrange(256))
        elif kind in ("d_ra", "ds_ra", "dq_ra"):
            ops.append((None, g.randrange(1, 32)))  # displacement set by the caller
        elif kind in ("bd", "li"):
            ops.append(None)  # set by the caller
        elif rng is not None:
            ops.append(g.randrange(rng))
        else:
            raise SystemExit(f"gen.py: no generator for operand `{kind}` of {insn.mnemonic}")
    return ops


def random_flags(g, insn, allow_aa=False):
    f = 0
    for flag, bit in FLAG_BIT.items():
        if flag in insn.flags and (flag != "aa" or allow_aa) and g.random() < 0.5:
            f |= bit
    return f


def random_bo(g):
    """A BO value the ISA defines (the 'z' bits zero, hints at random)."""
    return g.choice([
        0b00000, 0b00010, 0b00100 | g.randrange(2), 0b00110 | g.randrange(2),
        0b01000, 0b01010, 0b01100 | g.randrange(2), 0b01110 | g.randrange(2),
        0b10000 | g.randrange(2) << 3 | g.randrange(2), 0b10010 | g.randrange(2) << 3 | g.randrange(2),
        0b10100,
    ])


# User-visible SPRs of POWER8 (mfspr/mtspr in problem state) that qemu-ppc64le-static 7.2 has.
USER_SPRS = [1, 8, 9, 256, 1, 8, 9, 256, 136, 152, 259, 268, 269, 815, 896]

# SPRs the generator never uses. QEMU 7.2 lacks the problem-state DSCR (3), AMR (13) and PPR32
# (898), which ISA 2.07 defines (it raises SIGILL; we follow the ISA), and aborts on the
# facility-unavailable interrupt of the EBB and TM SPRs.
AVOID_SPRS = {3, 13, 898, 128, 129, 130, 131, 780, 781, 782, 783, 784, 785, 786, 787, 788, 789,
              790, 791, 792, 793, 794, 795, 796, 797, 798, 799, 800, 804, 805, 806}


def random_spr(g):
    """Any SPR number (most of them raise SIGILL in problem state)."""
    while True:
        n = g.randrange(1024)
        if n not in AVOID_SPRS:
            return n


def override_operand_regs(st, insn, ops, frac=0.6):
    """Gives register operands edge values (at random) unless a constraint fixed them."""
    g = st.g
    for kind, v in zip(insn.operands, ops):
        if v is None or g.random() > frac:
            continue
        if kind in GPR_OPS:
            name, val = f"r{v}", g.gpr_value()
        elif kind in FPR_OPS:
            old = st.fixed.get(f"vs{v}", st.g.getrandbits(64))
            name, val = f"vs{v}", g.fp_value() << 64 | (old & M64)
        elif kind in VR_OPS:
            name, val = f"vs{32 + v}", g.vec_value()
        elif kind in VSR_OPS:
            name, val = f"vs{v}", g.vec_value()
        else:
            continue
        if name not in st.fixed and not (name.startswith("r") and int(name[1:]) in st.written):
            st.fixed[name] = val


def gpr_writes(insn, ops):
    """GPRs an instruction may write: the target of loads (with ranges), RA of update forms,
    and the first operand of everything else when it is RT or RA."""
    out = set()
    kinds = insn.operands
    m = insn.mnemonic
    if is_memory(insn):
        if "load" in insn.flags and kinds and kinds[0] == "rt":
            out.add(ops[0])
            if m in ("lq", "lqarx"):
                out.add(ops[0] + 1)
            if m in ("lmw", "lswi", "lswx"):
                out |= set(range(32))
        if "update" in insn.flags:
            _, ra, _ = mem_regs(insn, ops)
            out.add(ra)
    elif kinds and kinds[0] in ("rt", "ra"):
        out.add(ops[0])
    return out


# --- memory operands --------------------------------------------------------------------------

def mem_target(g, size, align):
    """An effective address inside the buffer with room for `size` bytes."""
    lo, hi = BUF_ADDR, BUF_ADDR + BUF_SIZE - max(size, 1)
    r = g.random()
    if r < 0.15 and size > 1:  # across the page boundary inside the buffer
        t = g.randint(max(lo, DATA_REGION + 0x1000 - size + 1), min(hi, DATA_REGION + 0x1000 - 1))
    else:
        t = g.randint(lo, hi)
    if align > 1:
        t -= t % align
        if t < lo:
            t += align
    return t


def set_d_base(st, ra, d, target):
    st.need(f"r{ra}", target - d)


def set_x_base(st, ra, rb, target, ra_is_zero_base):
    g = st.g
    if ra == 0 and ra_is_zero_base:
        st.need(f"r{rb}", target)
    elif ra == rb:
        if target % 2:
            raise Invalid()
        st.need(f"r{ra}", target // 2)
    else:
        r = g.random()
        if r < 0.3:
            off = g.randrange(-64, 64)
        elif r < 0.5:
            off = g.choice([0, 0x8000_0000, -0x4000_0000, 0x1_0000_0000])
        elif r < 0.6:
            off = target  # the base register is zero
        else:
            off = g.getrandbits(64)
        st.need(f"r{rb}", off)
        st.need(f"r{ra}", target - off)


def access_size(insn, ops, st):
    m = insn.mnemonic
    if m == "lmw" or m == "stmw":
        return 4 * (32 - ops[0])
    if m in ("lswi", "stswi"):
        return ops[2] or 32
    if m in ("lswx", "stswx"):
        return 128
    if "cache" in insn.flags and insn.size == 0:
        return 1
    return insn.size or 1


def alignment(insn, ops, g):
    m = insn.mnemonic
    if "reserve" in insn.flags or "conditional" in insn.flags or m in ("lq", "stq"):
        return insn.size
    if m in ("lvx", "stvx", "lvxl", "stvxl"):
        return 16
    r = g.random()
    if r < 0.7:
        return max(insn.size, 1)
    return 1


def place_memory_operand(st, insn, ops, target=None):
    """Fills in the address operands so that the access lands inside the buffer."""
    g = st.g
    kinds = insn.operands
    size = access_size(insn, ops, st)
    align = alignment(insn, ops, g)
    if target is None:
        target = mem_target(g, size, align)
    if "d_ra" in kinds or "ds_ra" in kinds or "dq_ra" in kinds:
        k = next(i for i, kd in enumerate(kinds) if kd in ("d_ra", "ds_ra", "dq_ra"))
        scale = {"d_ra": 1, "ds_ra": 4, "dq_ra": 16}[kinds[k]]
        ra = ops[k][1] if ops[k] else g.randrange(1, 32)
        r = g.random()
        if r < 0.3:
            d = g.randrange(-16, 16) * scale
        elif r < 0.5:
            d = g.choice([0, -0x8000, 0x7FFF - 0x7FFF % scale])
        else:
            d = (g.randrange(-0x8000, 0x8000) // scale) * scale
        ops[k] = (d, ra)
        set_d_base(st, ra, d, target)
    elif insn.mnemonic in ("lswi", "stswi"):
        ra = ops[1]
        if ra == 0:
            raise Invalid()
        st.need(f"r{ra}", target)
    else:
        ra_i = next(i for i, kd in enumerate(kinds) if kd in ("ra", "ra0"))
        rb_i = kinds.index("rb")
        set_x_base(st, ops[ra_i], ops[rb_i], target, kinds[ra_i] == "ra0")
    return target


def mem_regs(insn, ops):
    """(RT, RA, RB) of a memory instruction (RA/RB None when absent)."""
    rt = ops[0] if insn.operands and insn.operands[0] in ("rt", "rs") else None
    ra = rb = None
    for kind, v in zip(insn.operands, ops):
        if kind in ("d_ra", "ds_ra", "dq_ra"):
            ra = v[1]
        elif kind in ("ra", "ra0"):
            ra = v
        elif kind == "rb":
            rb = v
    return rt, ra, rb


def valid_memory_form(insn, ops, st):
    """False for the invalid forms of the ISA (those go into the traps set)."""
    m = insn.mnemonic
    rt, ra, rb = mem_regs(insn, ops)
    if "update" in insn.flags:
        if ra == 0 or ("load" in insn.flags and "fp" not in insn.flags and ra == rt):
            return False
    if m == "lq" and (rt % 2 or rt == ra):
        return False
    if m in ("stq", "stqcx.") and rt % 2:
        return False
    if m in ("lfdp", "lfdpx", "stfdp", "stfdpx") and ops[0] % 2:
        return False  # an odd FRp: QEMU 7.2 runs it, the ISA calls it invalid (we: SIGILL)
    if m == "lqarx" and (rt % 2 or rt == ra or rt == rb):
        return False
    if m == "lmw" and ra >= rt:
        return False
    if m == "lswi":
        nregs = ((ops[2] or 32) + 3) // 4
        if (ra - rt) % 32 < nregs:
            return False
    return True


def lswx_valid(rt, ra, rb, n):
    nregs = (n + 3) // 4
    regs = {(rt + k) % 32 for k in range(nregs)}
    return n == 0 or not ((ra != 0 and ra in regs) or rb in regs)


# --- per-instruction generation ---------------------------------------------------------------

def gen_memory_insn(st, insn):
    g = st.g
    for _ in range(100):
        ops = random_operands(g, insn)
        try:
            fixed_before = dict(st.fixed)
            m = insn.mnemonic
            if m in ("lswx", "stswx"):
                n = g.randrange(0, 33) if g.random() < 0.8 else g.randrange(128)
                if m == "lswx" and not lswx_valid(ops[0], ops[1], ops[2], n):
                    raise Invalid()
                x = st.fixed.get("xer", fill(st.case.seed)[0]["xer"])
                st.need("xer", (x & ~0x7F) | n)
            if not valid_memory_form(insn, ops, st):
                raise Invalid()
            target = place_memory_operand(st, insn, ops)
            override_operand_regs(st, insn, [o if not isinstance(o, tuple) else None for o in ops], 0.5)
            seed_memory(st, insn, target)
            flagbits = random_flags(g, insn)
            return encode(insn, ops, flagbits), ops
        except Invalid:
            st.fixed = fixed_before
            continue
    raise Invalid()


def seed_memory(st, insn, target):
    """Puts an edge value where a load reads (the buffer is random otherwise)."""
    g = st.g
    if "load" not in insn.flags or g.random() < 0.5:
        return
    le = st.case.le
    size = insn.size
    if insn.mnemonic.startswith("lfs"):
        v = g.sp_value()
    elif "fp" in insn.flags and size == 8:
        v = g.fp_value()
    elif size in (1, 2, 4, 8):
        v = g.gpr_value() & ((1 << (8 * size)) - 1)
    else:
        return
    data = v.to_bytes(size, "little" if le else "big")
    if "byterev" in insn.flags:
        data = data[::-1]
    st.case.set_mem(target, data)


def is_memory(insn):
    return bool(insn.flags & {"load", "store", "cache"}) or insn.mnemonic in ("lswi", "stswi")


def gen_plain_insn(st, insn):
    g = st.g
    ops = random_operands(g, insn)
    override_operand_regs(st, insn, ops)
    constrain(st, insn, ops)
    return encode(insn, ops, random_flags(g, insn)), ops


def constrain(st, insn, ops):
    """Operand values that avoid known QEMU 7.2 deviations from the ISA (README.md)."""
    m = insn.mnemonic
    if m == "mtspr" and ops[0] == 256:
        # VRSAVE is 32 bits; QEMU keeps all 64 and mfspr returns them.
        name = f"r{ops[1]}"
        v = st.fixed.get(name, fill(st.case.seed)[0][name])
        st.need(name, v & 0xFFFF_FFFF)
    if m == "divde":
        # QEMU misses the overflow of a quotient in [2^63, 2^64): OV stays 0, RT gets it.
        ra, rb = (st.fixed.get(f"r{r}", fill(st.case.seed)[0][f"r{r}"]) for r in ops[1:3])
        sa = ra - (1 << 64) if ra >> 63 else ra
        sb = rb - (1 << 64) if rb >> 63 else rb
        if sb != 0 and abs(sa) < abs(sb):
            q = abs(sa << 64) // abs(sb)
            if q >= (1 << 63) and not (q == (1 << 63) and (sa < 0) != (sb < 0)):
                raise Invalid()


# Instructions whose result the generator cannot predict: their destination is ignored.
def unpredictable(insn, ops):
    m = insn.mnemonic
    if m in ("mftb", "mfspr") and ops[1] in (268, 269):
        return [f"r{ops[0]}"]
    return []


def gen_insn(st, insn):
    if is_memory(insn):
        return gen_memory_insn(st, insn)
    return gen_plain_insn(st, insn)


# --- branches ----------------------------------------------------------------------------------

BRANCH_TO_REG = {"bclr": "lr", "bcctr": "ctr", "bctar": "tar"}


def branch_stream(st, insns, n):
    """A stream of `n` instructions from `insns` where every branch goes forward inside the case."""
    g = st.g
    words, chosen, opss = [], [], []
    for j in range(n):
        insn = g.choice(insns)
        m = insn.mnemonic
        ops = random_operands(g, insn)
        flagbits = random_flags(g, insn)
        target = CASE_ADDR + 4 * g.randint(j + 1, n)  # n = the final trap
        if m in ("b", "bc"):
            ops[insn.operands.index("li" if m == "b" else "bd")] = target - (CASE_ADDR + 4 * j)
        elif m in ("bclr", "bcctr"):
            if m == "bcctr":
                ops[0] |= 4  # decrementing CTR is an invalid form here
            reg = BRANCH_TO_REG[m]
            if (st.lr_used if reg == "lr" else st.ctr_used):
                raise Invalid()
            st.need(reg, target | g.randrange(4))
        elif m == "bctar":
            raise Invalid()  # needs TAR, which only an mtspr sets (see the traps set)
        override_operand_regs(st, insn, ops)
        constrain(st, insn, ops)
        words.append(encode(insn, ops, flagbits))
        chosen.append(insn)
        opss.append(ops)
        # What this instruction may change for the ones after it.
        if (flagbits & 1 and "lk" in insn.flags) or m == "bclr" or (m == "mtspr" and ops[0] == 8):
            st.lr_used = True
        if (m in ("bc", "bclr") and not ops[0] & 4) or m == "bcctr" or (m == "mtspr" and ops[0] == 9):
            st.ctr_used = True
        st.written |= gpr_writes(insn, ops)
    return words, chosen, opss


# --- the ISA 3.0 instructions a POWER8 does not have ---------------------------------------------

def isa3_words(g):
    """Encodings of ISA 3.0 (POWER9) instructions: illegal on POWER8 (QEMU_CPU=power8)."""
    rt, ra, rb, rc = (g.randrange(32) for _ in range(4))
    rc_bit = g.randrange(2)
    x = lambda xo: 31 << 26 | rt << 21 | ra << 16 | rb << 11 | xo << 1
    return [
        ("cnttzw", 31 << 26 | rt << 21 | ra << 16 | 538 << 1 | rc_bit),
        ("cnttzd", 31 << 26 | rt << 21 | ra << 16 | 570 << 1 | rc_bit),
        ("modsw", x(779)),
        ("moduw", x(267)),
        ("modsd", x(777)),
        ("modud", x(265)),
        ("darn", 31 << 26 | rt << 21 | g.randrange(3) << 16 | 755 << 1),
        ("cmpeqb", 31 << 26 | g.randrange(8) << 23 | ra << 16 | rb << 11 | 224 << 1),
        ("cmprb", 31 << 26 | g.randrange(8) << 23 | g.randrange(2) << 21 | ra << 16 | rb << 11 | 192 << 1),
        ("extswsli", 31 << 26 | rt << 21 | ra << 16 | (rb & 31) << 11 | 445 << 2 | g.randrange(2) << 1 | rc_bit),
        ("maddhd", 4 << 26 | rt << 21 | ra << 16 | rb << 11 | rc << 6 | 48),
        ("maddhdu", 4 << 26 | rt << 21 | ra << 16 | rb << 11 | rc << 6 | 49),
        ("maddld", 4 << 26 | rt << 21 | ra << 16 | rb << 11 | rc << 6 | 51),
        ("addpcis", 19 << 26 | rt << 21 | g.randrange(32) << 16 | g.randrange(1 << 10) << 6 | 2 << 1 | g.randrange(2)),
        ("setb", 31 << 26 | rt << 21 | g.randrange(8) << 18 | 128 << 1),
        ("mcrxrx", 31 << 26 | g.randrange(8) << 23 | 576 << 1),
        # Not mffsce: ISA 3.0 put it in mffs's reserved field, which POWER8 ignores (it runs
        # as mffs there); QEMU 7.2 -cpu power8 raising SIGILL is a QEMU bug, not the oracle.
        ("ldat", x(614)),
        ("lwat", x(582)),
        ("copy", 31 << 26 | ra << 16 | rb << 11 | 1 << 21 | 774 << 1),
        ("paste.", 31 << 26 | ra << 16 | rb << 11 | 1 << 21 | 902 << 1 | 1),
        ("cpabort", 31 << 26 | 838 << 1),
        ("msgsync", 31 << 26 | 886 << 1),
        ("slbiag", 31 << 26 | rt << 21 | 850 << 1),
        ("scv", 17 << 26 | g.randrange(128) << 5 | 1),
        ("addex", 31 << 26 | rt << 21 | ra << 16 | rb << 11 | 170 << 1),
        ("lxsd", 57 << 26 | rt << 21 | ra << 16 | g.randrange(1 << 14) << 2 | 2),
        ("lxssp", 57 << 26 | rt << 21 | ra << 16 | g.randrange(1 << 14) << 2 | 3),
        ("lxv", 61 << 26 | rt << 21 | ra << 16 | g.randrange(1 << 12) << 4 | g.randrange(2) << 3 | 1),
        ("stxv", 61 << 26 | rt << 21 | ra << 16 | g.randrange(1 << 12) << 4 | g.randrange(2) << 3 | 5),
        ("lxvx", x(268) | g.randrange(2)),
        ("stxvx", x(396) | g.randrange(2)),
        ("lxvl", x(269) | g.randrange(2)),
        ("mtvsrws", 31 << 26 | rt << 21 | ra << 16 | 403 << 1 | g.randrange(2)),
        ("mfvsrld", 31 << 26 | rt << 21 | ra << 16 | 307 << 1 | g.randrange(2)),
        ("xxperm", 60 << 26 | rt << 21 | ra << 16 | rb << 11 | 26 << 3 | g.randrange(8)),
        ("xscmpexpdp", 60 << 26 | g.randrange(8) << 23 | ra << 16 | rb << 11 | 59 << 3 | g.randrange(4) << 1),
        ("vabsdub", 4 << 26 | rt << 21 | ra << 16 | rb << 11 | 1027),
        ("vcmpneb", 4 << 26 | rt << 21 | ra << 16 | rb << 11 | rc_bit << 10 | 7),
        ("vpermr", 4 << 26 | rt << 21 | ra << 16 | rb << 11 | rc << 6 | 59),
        ("vmul10uq", 4 << 26 | rt << 21 | ra << 16 | 513),
    ]


# --- families ------------------------------------------------------------------------------------

# Instructions whose operands must meet a condition at the time they run (constrain()),
# which the generator only checks for the initial state.
NOT_IN_STREAMS = {"divde", "stqcx."}


class Family:
    """How to generate cases for one table file; the defaults suit any family."""

    per_insn = 12       # single-instruction cases per instruction (little-endian)
    per_insn_be = 3     # the same in big-endian mode
    streams = 0         # cases with several instructions
    max_stream = 4

    def __init__(self, name, insns):
        self.name = name
        self.insns = insns

    def runnable(self, insn):
        """In the main set (runs to the end unless its operands make it trap)."""
        return not insn.flags & {"priv", "hv"} and insn.mnemonic != "sc"

    def single(self, g, case, insn):
        st = Stream(g, case)
        w, ops = gen_insn(st, insn)
        st.finish()
        case.words = [w]
        case.ignore |= set(unpredictable(insn, ops))

    def stream(self, g, case, n, insns=None):
        st = Stream(g, case)
        pool = [i for i in insns or self.insns if self.runnable(i) and i.mnemonic not in NOT_IN_STREAMS
                and not (case.le and i.mnemonic in BIG_ENDIAN_ONLY)]
        for _ in range(n):
            insn = g.choice(pool)
            if is_memory(insn):
                w, ops = gen_memory_insn(st, insn)
            else:
                w, ops = gen_plain_insn(st, insn)
            case.words.append(w)
            case.ignore |= set(unpredictable(insn, ops))
            st.written |= gpr_writes(insn, ops)
        st.finish()

    def traps(self, g, add):
        """Cases that must stop with a signal: privileged instructions and invalid forms."""
        for insn in self.insns:
            if insn.flags & {"priv", "hv"}:
                for k in range(8):
                    case = add(f"{insn.mnemonic}/priv", le=k < 6)
                    st = Stream(g, case)
                    ops = random_operands(g, insn)
                    override_operand_regs(st, insn, ops)
                    st.finish()
                    case.words = [encode(insn, ops, random_flags(g, insn))]

    def cases(self, g, add):
        for insn in self.insns:
            if not self.runnable(insn):
                continue
            for k in range(self.per_insn + self.per_insn_be):
                case = add(insn.mnemonic, le=k < self.per_insn)
                for _ in range(50):
                    try:
                        case.words, case.init, case.mem_init, case.ignore = [], {}, {}, set()
                        self.single(g, case, insn)
                        break
                    except Invalid:
                        continue
                else:
                    raise SystemExit(f"gen.py: cannot generate a case for {insn.mnemonic}")
        for k in range(self.streams):
            n = g.randint(2, self.max_stream)
            case = add("stream", le=g.random() < 0.8)
            for _ in range(50):
                try:
                    case.words, case.init, case.mem_init, case.ignore = [], {}, {}, set()
                    self.stream(g, case, n)
                    break
                except Invalid:
                    continue
            else:
                raise SystemExit("gen.py: cannot generate a stream")
        self.traps(g, add)


class FixedFamily(Family):
    per_insn = 30
    per_insn_be = 4
    streams = 300
    mixed = 200  # streams that mix fixed-point, load/store and CR/SPR instructions

    def cases(self, g, add):
        super().cases(g, add)
        table = load_table()
        pool = self.insns + table.get("loadstore", []) + [
            i for i in table.get("branch", []) if "branch" not in i.flags and i.mnemonic != "sc"]
        for k in range(self.mixed):
            n = g.randint(3, 6)
            case = add("mixed", le=g.random() < 0.8)
            for _ in range(50):
                try:
                    case.words, case.init, case.mem_init, case.ignore = [], {}, {}, set()
                    self.stream(g, case, n, pool)
                    break
                except Invalid:
                    continue
            else:
                raise SystemExit("gen.py: cannot generate a mixed stream")

    def traps(self, g, add):
        super().traps(g, add)
        for k in range(4):
            for name, w in isa3_words(g):
                case = add(f"isa3/{name}", le=k != 3)
                case.words = [w]


class BranchFamily(Family):
    per_insn = 30
    per_insn_be = 4
    streams = 300

    def runnable(self, insn):
        return super().runnable(insn) and insn.mnemonic != "bctar"

    def single(self, g, case, insn):
        if "branch" in insn.flags:
            st = Stream(g, case)
            case.words = self.branch_over(g, st, insn)
            st.finish()
            return
        super().single(g, case, insn)
        if insn.mnemonic == "mtspr" and g.random() < 0.5:
            # Read the SPR back so that its value is checked too.
            rt = g.randrange(32)
            case.words.append(31 << 26 | rt << 21 | spr_field(insn_spr(case.words[0])) | 339 << 1)

    def branch_over(self, g, st, insn):
        """The branch, then `addi`s that it may jump over; its target is one of them or the end."""
        n = g.randint(1, 4)
        ops = random_operands(g, insn)
        flagbits = random_flags(g, insn)
        target = CASE_ADDR + 4 * g.randint(1, n)
        m = insn.mnemonic
        if m in ("b", "bc"):
            ops[insn.operands.index("li" if m == "b" else "bd")] = target - CASE_ADDR
        else:
            if m == "bcctr":
                ops[0] |= 4
            st.need(BRANCH_TO_REG[m], target | g.randrange(4))
        override_operand_regs(st, insn, ops)
        if m in ("bc", "bclr") and not ops[0] & 4 and g.random() < 0.6:
            st.need("ctr", g.choice([0, 1, 2, 0x1_0000_0001, 0xFFFF_FFFF_0000_0001, M64]))
        out = [encode(insn, ops, flagbits)]
        for k in range(1, n):
            rt = g.randrange(32)
            out.append(14 << 26 | rt << 21 | rt << 16 | k)  # addi rt,rt,k
        return out

    def stream(self, g, case, n):
        st = Stream(g, case)
        pool = [i for i in self.insns if self.runnable(i)]
        case.words, insns, opss = branch_stream(st, pool, n)
        for insn, ops in zip(insns, opss):
            case.ignore |= set(unpredictable(insn, ops))
        st.finish()

    def traps(self, g, add):
        super().traps(g, add)
        insns = {i.mnemonic: i for i in self.insns}
        for k in range(6):
            le = k != 5
            # bcctr with a CTR-decrementing BO: invalid in the ISA, "test and decrement" on POWER8.
            case = add("bcctr/decrement", le=le)
            st = Stream(g, case)
            bo = random_bo(g) & ~4
            st.need("ctr", CASE_ADDR + 4 * g.randint(1, 3) | g.randrange(4) if g.random() < 0.8 else g.choice([0, 1]))
            st.finish()
            case.words = [encode(insns["bcctr"], [bo, g.randrange(32), 0], g.randrange(2))]
            case.words += [14 << 26 | 5 << 21 | 5 << 16 | 1, 14 << 26 | 6 << 21 | 6 << 16 | 1]
            # Absolute branches to unmapped low memory.
            case = add("b/absolute", le=le)
            case.words = [encode(insns["b"], [g.randrange(0x40, 0x10000) * 4], 2 | g.randrange(2))]
            case = add("bc/absolute", le=le)
            case.words = [encode(insns["bc"], [0b10100, 0, g.randrange(0x10, 0x2000) * 4], 2 | g.randrange(2))]
            # bctar: TAR set by mtspr, then the branch.
            case = add("bctar", le=le)
            st = Stream(g, case)
            rs = g.randrange(32)
            target = CASE_ADDR + 4 * g.randint(2, 4) | g.randrange(4)
            st.need(f"r{rs}", target)
            bo = 0b10100
            w = [31 << 26 | rs << 21 | spr_field(815) | 467 << 1, encode(insns["bctar"], [bo, 0, 0], g.randrange(2))]
            w += [14 << 26 | 3 << 21 | 3 << 16 | 1, 14 << 26 | 4 << 21 | 4 << 16 | 1]
            st.finish()
            case.words = w
            # sc: a harmless system call (sched_yield) returns 0 in r3.
            case = add("sc", le=le)
            case.init["r0"] = 158
            case.words = [encode(insns["sc"], [0], 0)]
            # mfspr/mtspr of SPRs that user mode may not touch, and random SPR numbers.
            for m in ("mfspr", "mtspr"):
                case = add(f"{m}/spr", le=le)
                spr = g.choice([22, 26, 27, 18, 19, 272, 287, 1023, 318, 48, 153, 29, 61, 157, 777, 0, 4, 5, 6, 808, 810]) if g.random() < 0.7 else random_spr(g)
                ops = [g.randrange(32), spr] if m == "mfspr" else [spr, g.randrange(32)]
                case.words = [encode(insns[m], ops, 0)]
            case = add("mftb/tbr", le=le)
            case.words = [encode(insns["mftb"], [g.randrange(32), random_spr(g)], 0)]


def insn_spr(word):
    f = (word >> 11) & 0x3FF
    return ((f & 0x1F) << 5) | (f >> 5)


# Load/store multiple and string: an alignment interrupt in little-endian mode, which
# qemu-ppc64le-static 7.2 cannot deliver (it aborts), so they are recorded in big-endian only.
BIG_ENDIAN_ONLY = {"lmw", "stmw", "lswi", "lswx", "stswi", "stswx"}


class LoadStoreFamily(Family):
    per_insn = 24
    per_insn_be = 8
    streams = 300

    def single(self, g, case, insn):
        m = insn.mnemonic
        if m in BIG_ENDIAN_ONLY:
            case.le = False
        if "conditional" in insn.flags and g.random() < 0.8:
            return self.reservation_pair(g, case, insn)
        super().single(g, case, insn)

    def reservation_pair(self, g, case, stcx):
        """l?arx then st?cx. (same or another address, size or value in between)."""
        sizes = {1: "lbarx", 2: "lharx", 4: "lwarx", 8: "ldarx", 16: "lqarx"}
        insns = {i.mnemonic: i for i in self.insns}
        size = stcx.size
        other_size = g.random() < 0.15
        larx = insns[sizes[g.choice([s for s in sizes if s != size]) if other_size else size]]
        st = Stream(g, case)
        target = mem_target(g, max(size, larx.size), max(size, larx.size))
        ops_l = random_operands(g, larx)
        if larx.mnemonic == "lqarx":
            ops_l[0] &= ~1
        ops_s = random_operands(g, stcx)
        if stcx.mnemonic == "stqcx.":
            ops_s[0] &= ~1
        if not valid_memory_form(larx, ops_l, st):
            raise Invalid()
        set_x_base(st, ops_l[1], ops_l[2], target, True)
        st.written |= gpr_writes(larx, ops_l)
        # A reservation of another size for the same address is undefined (QEMU stores but
        # reports failure): another size goes with another address.
        # QEMU 7.2's stqcx. fails even with a matching lqarx reservation: only other addresses.
        same = g.random() < 0.8 and not other_size and stcx.mnemonic != "stqcx."
        t2 = target if same else mem_target(g, size, size)
        if t2 == target and (other_size or stcx.mnemonic == "stqcx."):
            raise Invalid()
        set_x_base(st, ops_s[1], ops_s[2], t2, True)
        override_operand_regs(st, stcx, [ops_s[0], None, None], 0.5)
        words = [encode(larx, ops_l, 0)]
        if g.random() < 0.15:
            # A plain store in between (to the same block): QEMU's reservation compares values.
            rs = g.randrange(32)
            ra = next(r for r in range(1, 32) if f"r{r}" not in st.fixed and r not in st.written and r != rs)
            st.need(f"r{ra}", target)
            words.append(38 << 26 | rs << 21 | ra << 16)  # stb rs,0(ra)
        words.append(encode(stcx, ops_s, 0))
        st.finish()
        case.words = words

    def traps(self, g, add):
        super().traps(g, add)
        for insn in self.insns:
            m = insn.mnemonic
            for k in range(2):
                le = k == 0 and m not in BIG_ENDIAN_ONLY
                # Invalid forms.
                if "update" in insn.flags or m in ("lq", "stq", "lqarx", "stqcx.", "lmw", "lswi"):
                    case = add(f"{m}/invalid", le=le)
                    self.invalid_case(g, case, insn)
                # Misaligned atomics and quadwords.
                if insn.size > 1 and ("reserve" in insn.flags or "conditional" in insn.flags or m in ("lq", "stq")):
                    case = add(f"{m}/misaligned", le=le)
                    st = Stream(g, case)
                    ops = random_operands(g, insn)
                    if m in ("lq", "lqarx", "stq", "stqcx."):
                        ops[0] &= ~1
                    for _ in range(100):
                        try:
                            t = mem_target(g, insn.size + 16, 1)
                            if t % insn.size == 0:
                                t += g.randrange(1, insn.size)
                            place_memory_operand(st, insn, ops, t)
                            break
                        except Invalid:
                            st.fixed = {}
                            ops = random_operands(g, insn)
                            if m in ("lq", "lqarx", "stq", "stqcx."):
                                ops[0] &= ~1
                    st.finish()
                    case.words = [encode(insn, ops, 0)]
                # Unmapped addresses.
                if is_memory(insn) and m not in ("dcbt", "dcbtst"):
                    case = add(f"{m}/unmapped", le=le)
                    self.unmapped_case(g, case, insn)
            if m in ("lswx",):
                for k in range(6):
                    case = add("lswx/invalid", le=False)
                    self.lswx_invalid(g, case, insn)

    def invalid_case(self, g, case, insn):
        m = insn.mnemonic
        for _ in range(1000):
            st = Stream(g, case)
            ops = random_operands(g, insn)
            kinds = insn.operands
            try:
                target = mem_target(g, access_size(insn, ops, st), 16)
                place_memory_operand(st, insn, ops, target)
            except Invalid:
                continue
            if not valid_memory_form(insn, ops, st):
                st.finish()
                case.words = [encode(insn, ops, 0)]
                return
            # Force the invalid form: RA = 0 or RA = RT.
            rt, ra, rb = mem_regs(insn, ops)
            if "update" in insn.flags and ("d_ra" in kinds or "ds_ra" in kinds):
                k = next(i for i, kd in enumerate(kinds) if kd in ("d_ra", "ds_ra"))
                d, _ = ops[k]
                new_ra = 0 if g.random() < 0.5 or "store" in insn.flags or "fp" in insn.flags else rt
                ops[k] = (d, new_ra)
                case.init = {}
                case.words = [encode(insn, ops, 0)]
                return
        raise SystemExit(f"gen.py: no invalid form for {m}")

    def lswx_invalid(self, g, case, insn):
        while True:
            rt, ra, rb = g.randrange(32), g.randrange(1, 32), g.randrange(32)
            n = g.randrange(1, 33)
            if not lswx_valid(rt, ra, rb, n):
                break
        st = Stream(g, case)
        try:
            set_x_base(st, ra, rb, mem_target(g, 64, 1), True)
        except Invalid:
            pass
        x = fill(case.seed)[0]["xer"]
        st.fixed["xer"] = (x & ~0x7F) | n
        st.finish()
        case.words = [encode(insn, [rt, ra, rb], 0)]

    def unmapped_case(self, g, case, insn):
        """The same access at an address no region covers (low memory)."""
        st = Stream(g, case)
        for _ in range(100):
            ops = random_operands(g, insn)
            if valid_memory_form(insn, ops, st) and not ("lswx" in insn.mnemonic or "stswx" in insn.mnemonic):
                break
        else:
            ops = random_operands(g, insn)
        if insn.mnemonic in ("lq", "lqarx"):
            ops[0] &= ~1
        if insn.mnemonic in ("stq", "stqcx."):
            ops[0] &= ~1
        target = g.randrange(0x100, 0x4000) * 16
        kinds = insn.operands
        try:
            if any(k in kinds for k in ("d_ra", "ds_ra", "dq_ra")):
                k = next(i for i, kd in enumerate(kinds) if kd in ("d_ra", "ds_ra", "dq_ra"))
                ra = g.randrange(1, 32)
                ops[k] = (0, ra)
                st.need(f"r{ra}", target)
            elif insn.mnemonic in ("lswi", "stswi"):
                ops[1] = ops[1] or 1
                st.need(f"r{ops[1]}", target)
            else:
                ra_i = next(i for i, kd in enumerate(kinds) if kd in ("ra", "ra0"))
                rb_i = kinds.index("rb")
                set_x_base(st, ops[ra_i], ops[rb_i], target, kinds[ra_i] == "ra0")
        except Invalid:
            st.fixed = {}
            ops[next(i for i, kd in enumerate(kinds) if kd in ("ra", "ra0"))] = 0
            st.need(f"r{ops[kinds.index('rb')]}", target)
        if insn.mnemonic in ("lswx", "stswx"):
            x = fill(case.seed)[0]["xer"]
            st.fixed["xer"] = (x & ~0x7F) | 4
        st.finish()
        case.words = [encode(insn, ops, 0)]


class SystemFamily(Family):
    pass


# --- floating point (fp.insn, vsx_fp.insn) -----------------------------------------------------

# FPSCR bits (low word; FX is bit 32 of the register).
FX, FEX, VX, OX, UX, ZX, XX = 1 << 31, 1 << 30, 1 << 29, 1 << 28, 1 << 27, 1 << 26, 1 << 25
VX_BITS = [1 << k for k in range(19, 25)] + [1 << 10, 1 << 9, 1 << 8]  # VXSNAN..VXVC, VXSOFT..VXCVI
FR, FI = 1 << 18, 1 << 17
VE, OE, UE, ZE, XE = 1 << 7, 1 << 6, 1 << 5, 1 << 4, 1 << 3
ENABLE_OF = {OX: OE, UX: UE, ZX: ZE, XX: XE}

# Doubles next to rounding, overflow and underflow boundaries (on top of FP_EDGES).
FP_NEAR = [
    0x3FF0_0000_0000_0001, 0x3FEF_FFFF_FFFF_FFFF, 0xBFF0_0000_0000_0001, 0x3CA0_0000_0000_0000,
    0x3CB8_0000_0000_0000, 0x3C90_0000_0000_0001, 0x000F_FFFF_FFFF_FFFF, 0x0010_0000_0000_0001,
    0x001F_FFFF_FFFF_FFFF, 0x7FE0_0000_0000_0000, 0x7FEF_FFFF_FFFF_FFFE, 0x3FE0_0000_0000_0001,
    0x41DF_FFFF_FFC0_0000, 0x41E0_0000_0000_0001, 0xC1E0_0000_0020_0000, 0x41EF_FFFF_FFE0_0000,
    0x43DF_FFFF_FFFF_FFFF, 0x43EF_FFFF_FFFF_FFFF, 0x4330_0000_0000_0001, 0x3FF0_0000_1000_0000,
    0x3FF0_0000_3000_0000, 0x47EF_FFFF_F000_0000, 0x3800_0000_0000_0001, 0x3690_0000_0000_0000,
    0x4004_0000_0000_0000, 0xC00C_0000_0000_0000,  # 2.5, -3.5
]


def fp_operand(g):
    r = g.random()
    if r < 0.25:
        return g.choice(FP_NEAR) ^ (g.getrandbits(1) << 63)
    return g.fp_value()


def sp_operand(g):
    r = g.random()
    if r < 0.15:
        return g.choice([0x3F80_0001, 0x3F7F_FFFF, 0x0080_0001, 0x007F_FFFF, 0x7F7F_FFFE, 0x4F7F_FFFF,
                         0x4EFF_FFFF, 0x3FC0_0000, 0x4020_0000]) ^ (g.getrandbits(1) << 31)
    if r < 0.45:
        v = g.fp_value()
        return double_to_single_bits(v) if (v >> 52) & 0x7FF in (0, 0x7FF) or 0x380 < (v >> 52) & 0x7FF < 0x47F else g.sp_value()
    return g.sp_value()


def double_to_single_bits(d):
    """The ISA's SINGLE() for values in the single range (truncates the fraction)."""
    exp = (d >> 52) & 0x7FF
    sign = (d >> 63) << 31
    if exp == 0x7FF:
        return sign | 0x7F80_0000 | ((d >> 29) & 0x7F_FFFF)
    if exp <= 896:
        return sign
    return sign | ((exp - 896) << 23) | ((d >> 29) & 0x7F_FFFF)


def random_fpscr(g):
    """A consistent FPSCR: any rounding mode, sticky bits with FX, enables only for exception
    bits that are clear (an enabled pending exception would trap in the loader's mtfsf)."""
    f = g.randrange(4)
    exc = 0
    if g.random() < 0.4:
        for b in [OX, UX, ZX, XX] + VX_BITS:
            if g.random() < 0.12:
                exc |= b
    f |= exc
    if exc or g.random() < 0.1:
        f |= FX
    f |= g.getrandbits(5) << 12 if g.random() < 0.5 else 0  # FPRF
    f |= g.choice([0, FI, FR | FI]) if g.random() < 0.4 else 0
    if g.random() < 0.5:
        for en in (VE, OE, UE, ZE, XE):
            if g.random() < 0.3:
                f |= en
    for e, en in ENABLE_OF.items():
        if f & e:
            f &= ~en
    if f & sum(VX_BITS):
        f &= ~VE
        f |= VX
    return f


def element_kind(m):
    """How the generator fills a VSX operand: 'dp', 'sp' (four singles), 'sxw' (words), 'xd'."""
    if m.startswith("xv") and m[-2:] == "sp" and not m.startswith(("xvcvdp", "xvcvsxd", "xvcvuxd")):
        return "sxw" if m.startswith(("xvcvsxw", "xvcvuxw")) else "sp"
    if m.startswith(("xvcvsxw", "xvcvuxw")):
        return "sxw"
    if m.startswith(("xscvsxd", "xscvuxd", "xvcvsxd", "xvcvuxd")):
        return "xd"
    if m in ("xscvspdp", "xscvspdpn") or m.startswith(("xvcvsp",)):
        return "sp"
    return "dp"


def int_operand(g):
    return g.choice([g.gpr_value(), g.gpr_value(), (1 << 53) + g.getrandbits(8), -(1 << 60) + g.getrandbits(40) & M64, g.getrandbits(64)])


def as_float(d):
    return struct.unpack("<d", struct.pack("<Q", d & M64))[0]


def is_nan64(d):
    return (d >> 52) & 0x7FF == 0x7FF and d & ((1 << 52) - 1)


def dw_elems(v):
    return [v >> 64 & M64, v & M64]


def sp_elems(v):
    return [single_to_double(v >> (96 - 32 * k) & 0xFFFF_FFFF) for k in range(4)]


class FpFamily(Family):
    """Scalar and VSX floating point: operands from the FP pools, a random consistent FPSCR
    (every rounding mode, random enables), FR not compared (QEMU never computes it)."""

    per_insn = 40
    per_insn_be = 4

    def single(self, g, case, insn):
        st = Stream(g, case)
        ops = random_operands(g, insn)
        m = insn.mnemonic
        kind = element_kind(m)
        for k, v in zip(insn.operands, ops):
            if k in FPR_OPS:
                val = int_operand(g) if m.startswith("fcfid") else fp_operand(g)
                if m == "mtfsf":
                    val = g.getrandbits(64)
                try:
                    st.need(f"vs{v}", val << 64 | g.getrandbits(64))
                except Invalid:
                    pass
            elif k in VSR_OPS:
                if kind == "dp":
                    val = fp_operand(g) << 64 | fp_operand(g)
                elif kind == "sp":
                    val = sum(sp_operand(g) << (32 * j) for j in range(4))
                elif kind == "sxw":
                    val = sum((g.gpr_value() & 0xFFFF_FFFF) << (32 * j) for j in range(4))
                else:
                    val = int_operand(g) << 64 | int_operand(g)
                try:
                    st.need(f"vs{v}", val)
                except Invalid:
                    pass  # the same register twice keeps its first value
        st.need("fpscr", random_fpscr(g))
        flagbits = random_flags(g, insn)
        fp_constrain(st, insn, ops)
        case.words = [encode(insn, ops, flagbits)]
        if m in STALE_FLAGS:
            # QEMU reports the exception flags its previous floating-point helper left behind:
            # first run one that clears them (xvcmpeqdp of zeros into a spare register).
            used = {v for k, v in zip(insn.operands, ops) if k in VSR_OPS}
            r = next(x for x in range(63, 0, -1) if x not in used)
            st.need(f"vs{r}", 0)
            f = r & 31
            case.words.insert(0, 60 << 26 | f << 21 | f << 16 | f << 11 | 99 << 3 | (r >> 5) * 7)
        st.finish()
        case.mask["fpscr"] = FR


# VSX instructions whose QEMU helper does not clear the softfloat exception flags first.
STALE_FLAGS = {"xsmaxdp", "xsmindp", "xvmaxdp", "xvmindp", "xvmaxsp", "xvminsp", "xvcvsxdsp", "xvcvuxdsp"}


def fp_constrain(st, insn, ops):
    """Inputs for which QEMU 7.2 contradicts the ISA (README.md): changed or redrawn."""
    m = insn.mnemonic
    regs = dict(zip(insn.operands, ops))
    f = st.fixed["fpscr"]
    val = lambda k: st.fixed.get(f"vs{regs[k]}", fill(st.case.seed)[0][f"vs{regs[k]}"])
    b_elems = []
    if "xb" in regs:
        v = val("xb")
        b_elems = sp_elems(v) if element_kind(m) == "sp" else dw_elems(v)[: 1 if m.startswith("xs") else 2]
    elif "frb" in regs:
        b_elems = [val("frb") >> 64]
    if m.startswith(("fnm", "xsnm", "xvnm")):
        f &= ~2  # QEMU rounds the negated value in the directed modes; the ISA negates the rounded one
    if m.startswith("fcfid") or m == "xsrsp":
        f &= ~XE  # QEMU interrupts before writing the target
    if m == "xsrsp":
        f &= ~(OE | UE)
    if m in ("fre", "fres", "xsredp", "xsresp", "xvredp", "xvresp") and any(e & ~(1 << 63) == 0 for e in b_elems):
        raise Invalid()  # QEMU's estimate of 1/±0 is ±0.5 (FPU) or raises no ZX (VSX)
    if m in ("xsrsqrtedp", "xsrsqrtesp", "xvrsqrtedp", "xvrsqrtesp") and any(e & ~(1 << 63) == 0 for e in b_elems):
        raise Invalid()  # QEMU raises no ZX for the VSX estimates of 1/sqrt(±0)
    if m in ("xsresp", "xsrsqrtesp"):
        f &= ~(OE | UE)  # QEMU adjusts the exponent in double, then rounds to single
    if m in ("xsaddsp", "xssubsp", "xsmulsp", "xsdivsp", "xssqrtsp"):
        # QEMU computes in double and then rounds to single: a second rounding, and tininess
        # of the double result. Keep results that a double rounding changes, and results in
        # the single underflow range, out.
        a = val("xa") >> 64 if "xa" in regs else 0
        b = val("xb") >> 64
        if not double_rounding_is_harmless(m, a, b, f & 3):
            raise Invalid()
    if m.startswith(("xvcmpgt", "xvcmpge")) and any(is_nan64(e) for e in sp_or_dp_elems(m, val("xa")) + sp_or_dp_elems(m, val("xb"))):
        f &= ~VE  # QEMU neither interrupts nor keeps XT for VXVC
    if m.startswith(("xsmax", "xsmin", "xvmax", "xvmin")):
        f &= ~UE  # QEMU underflows on a denormal operand with UE
    if m.startswith("xvcv") and ("sx" in m[4:8] or "ux" in m[4:8]) and m[4:6] in ("dp", "sp"):
        es = sp_or_dp_elems(m, val("xb"))
        if any(is_nan64(e) for e in es):
            raise Invalid()  # after an out-of-range element QEMU converts a NaN like one
    st.fixed["fpscr"] = f


def exact_value(d):
    """The exact value of finite double bits, as a Fraction."""
    e = (d >> 52) & 0x7FF
    frac = d & ((1 << 52) - 1)
    v = Fraction(frac, 1 << 52) * Fraction(2) ** -1022 if e == 0 else Fraction((1 << 52) | frac, 1 << 52) * Fraction(2) ** (e - 1023)
    return -v if d >> 63 else v


def round_to(x, bits, emin, mode):
    """x rounded to `bits` significant bits (fewer below 2^emin), exponent unbounded above;
    mode as FPSCR[RN]."""
    if x == 0:
        return x
    neg, a = x < 0, abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = Fraction(2) ** (max(e, emin) - bits + 1)  # the quantum
    n, r = divmod(a, q)
    up = {0: r > q / 2 or (r == q / 2 and n % 2 == 1), 1: False, 2: r > 0 and not neg, 3: r > 0 and neg}[mode]
    v = (n + up) * q
    return -v if neg else v


def double_rounding_is_harmless(m, a, b, mode):
    """Whether rounding the exact result to double and then to single (QEMU) gives what
    rounding it once does, and the result is not in the single underflow range."""
    fin = lambda d: (d >> 52) & 0x7FF != 0x7FF
    if not (fin(a) and fin(b)):
        return True
    x, y = exact_value(a), exact_value(b)
    if m == "xsaddsp":
        r = x + y
    elif m == "xssubsp":
        r = x - y
    elif m == "xsmulsp":
        r = x * y
    elif m == "xsdivsp":
        if y == 0:
            return True
        r = x / y
    else:
        return not (0 < y < Fraction(2) ** -250)  # sqrt: only the underflow range
    if r != 0 and abs(r) < Fraction(2) ** -125:
        return False
    d = round_to(r, 53, -1022, mode)
    if abs(d) >= Fraction(2) ** 1024:
        return False  # overflows in double first
    return round_to(d, 24, -126, mode) == round_to(r, 24, -126, mode)


def sp_or_dp_elems(m, v):
    return sp_elems(v) if element_kind(m) == "sp" else dw_elems(v)


class VsxFpFamily(FpFamily):
    per_insn = 28
    per_insn_be = 3


def bcd_value(g):
    """A signed packed decimal (31 digits and a sign code), now and then an invalid one."""
    r = g.random()
    if r < 0.15:
        digits = [9] * 31
    elif r < 0.3:
        digits = [0] * 31
    else:
        digits = [g.randrange(10) for _ in range(31)]
        if g.random() < 0.5:  # a short number
            n = g.randrange(32)
            digits = [0] * (31 - n) + digits[31 - n:]
    if g.random() < 0.05:
        digits[g.randrange(31)] = g.randrange(10, 16)
    v = g.choice([0xA, 0xB, 0xC, 0xD, 0xE, 0xF, 0xC, 0xD, g.randrange(16)])
    for n, d in enumerate(reversed(digits), 1):
        v |= d << (4 * n)
    return v


# VMX single-precision instructions: their vector operands are mostly made of single edges.
VMX_FP = {"vaddfp", "vsubfp", "vmaddfp", "vnmsubfp", "vmaxfp", "vminfp", "vrefp", "vrsqrtefp",
          "vexptefp", "vlogefp", "vrfin", "vrfiz", "vrfip", "vrfim", "vctuxs", "vctsxs",
          "vcmpeqfp", "vcmpgefp", "vcmpgtfp", "vcmpbfp"}


def vector_isa3_words(g):
    """ISA 3.0 vector encodings: illegal on POWER8 (QEMU_CPU=power8 agrees for these)."""
    t, a, b, c = (g.randrange(32) for _ in range(4))
    vx = lambda xo, ra=None: 4 << 26 | t << 21 | (a if ra is None else ra) << 16 | b << 11 | xo
    x31 = lambda xo: 31 << 26 | t << 21 | a << 16 | b << 11 | xo << 1 | g.randrange(2)
    xx = lambda xo, shift: 60 << 26 | t << 21 | a << 16 | b << 11 | xo << shift | g.randrange(1 << shift)
    return [
        ("vabsduh", vx(1091)), ("vabsduw", vx(1155)), ("vcmpnezb", vx(263 | g.randrange(2) << 10)),
        ("vcmpneh", vx(71 | g.randrange(2) << 10)), ("vcmpnew", vx(135 | g.randrange(2) << 10)),
        ("vctzb", vx(1538, 28)), ("vctzd", vx(1538, 31)), ("vnegw", vx(1538, 6)),
        ("vextsb2w", vx(1538, 16)), ("vprtybw", vx(1538, 8)), ("vclzlsbb", vx(1538, 0)),
        ("vextractub", vx(525, a & 15)), ("vextractd", vx(717, a & 15)),
        ("vextublx", vx(1549)), ("vrlwmi", vx(133)), ("vslv", vx(1860)),
        ("vsrv", vx(1796)), ("vbpermd", vx(1484)), ("vmsumudm", 4 << 26 | t << 21 | a << 16 | b << 11 | c << 6 | 35),
        ("lxvb16x", x31(876)), ("lxvwsx", x31(364)), ("lxsibzx", x31(781)), ("stxvl", x31(397)),
        ("stxsihx", x31(941)), ("mtvsrdd", x31(435)),
        ("xxpermr", xx(58, 3)), ("xxextractuw", xx(165, 2)), ("xxbrw", 60 << 26 | t << 21 | 15 << 16 | b << 11 | 475 << 2 | g.randrange(4)),
    ]


class VectorFamily(Family):
    """VMX (vmx.insn) and non-floating-point VSX (vsx.insn)."""

    per_insn = 16
    per_insn_be = 4
    streams = 100

    def single(self, g, case, insn):
        super().single(g, case, insn)
        self.shape(g, case, insn, case.words[0])

    def stream(self, g, case, n):
        super().stream(g, case, n)
        self.vscr(g, case)

    def vscr(self, g, case):
        # NJ (as Linux runs POWER8) most of the time; sometimes IEEE denormals, or SAT set.
        if g.random() < 0.3:
            case.init["vscr"] = g.choice([0, 1, 0x10001])

    def shape(self, g, case, insn, w):
        m = insn.mnemonic
        self.vscr(g, case)
        vra, vrb, vrc = 32 + (w >> 16 & 31), 32 + (w >> 11 & 31), 32 + (w >> 6 & 31)
        if m.startswith("bcd"):
            for r in (vra, vrb):
                if g.random() < 0.9:
                    case.init[f"vs{r}"] = bcd_value(g)
        elif m in VMX_FP:
            for r in ("vra" in insn.operands and vra, vrb, "vrc" in insn.operands and vrc):
                if r and g.random() < 0.7:
                    case.init[f"vs{r}"] = sum(g.sp_value() << (32 * k) for k in range(4))

    def traps(self, g, add):
        super().traps(g, add)
        if self.name == "vmx":
            for k in range(3):
                for name, w in vector_isa3_words(g):
                    case = add(f"isa3/{name}", le=k != 2)
                    case.words = [w]
        self.reserved(g, add)

    def reserved(self, g, add):
        """Words with reserved fields set, replayed against what QEMU computes for the same
        word with them clear: POWER8 ignores reserved fields (Book I 1.3.3), where QEMU 7.2
        raises SIGILL for most of the vector ones (README.md)."""
        for insn in self.insns:
            rsv = reserved_bits(insn)
            if not rsv or not self.runnable(insn):
                continue
            for k in range(4):
                case = add(f"reserved/{insn.mnemonic}", le=k != 3)
                for _ in range(50):
                    try:
                        case.words, case.init, case.mem_init, case.ignore = [], {}, {}, set()
                        self.single(g, case, insn)
                        break
                    except Invalid:
                        continue
                else:
                    raise SystemExit(f"gen.py: cannot generate a case for {insn.mnemonic}")
                extra = 0
                while not extra:
                    extra = g.getrandbits(32) & rsv
                case.replay_words = [case.words[0] | extra]


class DecimalFamily(Family):
    # Three instructions; random operands are mostly not BCD, where the ISA leaves cbcdtd's
    # result undefined and QEMU's must be matched: many cases per instruction.
    per_insn = 48
    per_insn_be = 12


FAMILIES = {"fixed": FixedFamily, "branch": BranchFamily, "loadstore": LoadStoreFamily, "system": SystemFamily,
            "fp": FpFamily, "vsx_fp": VsxFpFamily, "vmx": VectorFamily, "vsx": VectorFamily,
            "decimal": DecimalFamily}


def family_for(name, insns):
    return FAMILIES.get(name, Family)(name, insns)


# --- the harness ----------------------------------------------------------------------------------

CC = "powerpc64le-linux-gnu-gcc"
CFLAGS = [
    "-O2", "-ffreestanding", "-fno-builtin", "-fno-tree-loop-distribute-patterns", "-nostdlib",
    "-static", "-mcpu=power8", "-msoft-float", "-mno-altivec", "-mno-vsx", "-Wa,-mpower8",
    "-Wl,--build-id=none",
]


def build_harness(workdir, big_endian=False):
    out = os.path.join(workdir, "harness-be" if big_endian else "harness")
    extra = ["-mbig-endian", "-mabi=elfv2"] if big_endian else []
    subprocess.run([CC, *CFLAGS, *extra, "-o", out, os.path.join(HERE, "harness.c")], check=True)
    return out


def loader_words():
    """Sets every register from the state block at r31, then branches to the case."""
    w = []
    addi = lambda rt, ra, si: 14 << 26 | rt << 21 | ra << 16 | (si & 0xFFFF)
    ld = lambda rt, ds, ra: 58 << 26 | rt << 21 | ra << 16 | (ds & 0xFFFC)
    mtspr = lambda spr, rs: 31 << 26 | rs << 21 | spr_field(spr) | 467 << 1
    w.append(addi(30, 0, ST_SCRATCH))
    w.append(31 << 26 | 30 << 21 | 30 << 16 | 31 << 11 | 214 << 1 | 1)  # stdcx. r30,r30,r31: drop any reservation
    w.append(50 << 26 | 0 << 21 | 31 << 16 | ST_FPSCR)                 # lfd f0,FPSCR(r31)
    w.append(63 << 26 | 1 << 25 | 0xFF << 17 | 0 << 11 | 711 << 1)     # mtfsf 0xff,f0,1,0
    w.append(addi(30, 0, ST_VSCR))
    w.append(31 << 26 | 0 << 21 | 30 << 16 | 31 << 11 | 103 << 1)      # lvx v0,r30,r31
    w.append(4 << 26 | 0 << 11 | 1604)                                  # mtvscr v0
    for i in range(64):
        w.append(addi(30, 0, ST_VSR + 16 * i))
        w.append(31 << 26 | (i & 31) << 21 | 30 << 16 | 31 << 11 | 844 << 1 | i >> 5)  # lxvd2x
    w.append(ld(30, ST_CR, 31))
    w.append(31 << 26 | 30 << 21 | 0xFF << 12 | 144 << 1)              # mtcrf 0xff,r30
    for off, spr in ((ST_XER, 1), (ST_LR, 8), (ST_CTR, 9)):
        w.append(ld(30, off, 31))
        w.append(mtspr(spr, 30))
    w.append(addi(30, 0, 0))
    w.append(mtspr(815, 30))                                            # TAR = 0
    w.append(mtspr(896, 30))                                            # PPR = 0
    w.append(32 << 26 | 30 << 21 | 31 << 16 | ST_VRSAVE)               # lwz r30,VRSAVE(r31)
    w.append(mtspr(256, 30))
    for i in range(32):
        w.append(ld(i, 8 * i, 31))                                       # ld r31 last
    here = LOADER_ADDR + 4 * len(w)
    w.append(18 << 26 | ((CASE_ADDR - here) & 0x3FFFFFC))               # b CASE_ADDR
    return w


ST_CR, ST_XER, ST_LR, ST_CTR, ST_FPSCR, ST_VRSAVE, ST_SCRATCH = 256, 264, 272, 280, 288, 296, 304
ST_VSCR, ST_VSR = 320, 336
ST_SIZE = ST_VSR + 64 * 16


def state_block(st, le):
    order = "little" if le else "big"
    b = bytearray(ST_SIZE)
    put = lambda off, v, n: b.__setitem__(slice(off, off + n), (v & ((1 << (8 * n)) - 1)).to_bytes(n, order))
    for i in range(32):
        put(8 * i, st[f"r{i}"], 8)
    put(ST_CR, st["cr"], 8)
    put(ST_XER, st["xer"], 8)
    put(ST_LR, st["lr"], 8)
    put(ST_CTR, st["ctr"], 8)
    put(ST_FPSCR, st["fpscr"], 8)
    put(ST_VRSAVE, st["vrsave"], 4)
    put(ST_VSCR, st["vscr"], 16)
    for i in range(64):
        v = st[f"vs{i}"]
        put(ST_VSR + 16 * i, v >> 64, 8)
        put(ST_VSR + 16 * i + 8, v, 8)
    return bytes(b)


def words_bytes(words, le):
    return b"".join(struct.pack("<I" if le else ">I", w) for w in words)


CASE_MAGIC, RESULT_MAGIC, END_MAGIC = 0x53414347, 0x53455247, 0x444E4547
RESULT = struct.Struct("<IiiIQQQ32Q6Q128Q")


def case_input(case, loader_le, loader_be, order="<"):
    st, mem = case.state()
    code = words_bytes(case.words + [TRAP], case.le)
    blobs = [
        (LOADER_ADDR, loader_le if case.le else loader_be),
        (STATE_ADDR, state_block(st, case.le)),
        (CASE_ADDR, code),
        (BUF_ADDR, bytes(mem)),
    ]
    out = bytearray(struct.pack(order + "IIIIQQQ", CASE_MAGIC, int(case.le), len(blobs), BUF_SIZE, LOADER_ADDR, STATE_ADDR, BUF_ADDR))
    for addr, data in blobs:
        out += struct.pack(order + "QII", addr, len(data), 0)
        out += data + bytes(-len(data) % 8)
    return bytes(out)


def run_qemu(cases, workdir, qemu="qemu-ppc64le-static", big_endian=False):
    """QEMU's result for every case; a case that makes QEMU itself abort is dropped (reported).
    `big_endian`: run a big-endian harness process (qemu-ppc64-static)."""
    harness = build_harness(workdir, big_endian)
    loader = loader_words()
    loader_le, loader_be = words_bytes(loader, True), words_bytes(loader, False)
    results = {}
    todo = list(cases)
    while todo:
        got = run_harness(harness, todo, loader_le, loader_be, qemu, ">" if big_endian else "<")
        for c, r in zip(todo, got):
            results[id(c)] = r
        if len(got) == len(todo):
            break
        bad = todo[len(got)]
        print(f"gen.py: QEMU aborted on case {bad.name} ({' '.join(f'{w:08x}' for w in bad.words)}): dropped",
              file=sys.stderr)
        todo = todo[len(got) + 1:]
    kept = [c for c in cases if id(c) in results]
    return kept, [results[id(c)] for c in kept]


def run_harness(harness, cases, loader_le, loader_be, qemu, order):
    inp = bytearray()
    for c in cases:
        inp += case_input(c, loader_le, loader_be, order)
    inp += struct.pack(order + "I", END_MAGIC)
    env = dict(os.environ, QEMU_CPU="power8")
    p = subprocess.run([*shlex.split(qemu), harness], input=bytes(inp), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, timeout=1200)
    out = p.stdout
    results = []
    pos = 0
    result = struct.Struct(order + RESULT.format[1:])
    rec = result.size + BUF_SIZE
    while pos + rec <= len(out):
        vals = result.unpack_from(out, pos)
        if vals[0] != RESULT_MAGIC:
            break
        results.append((vals, out[pos + result.size: pos + rec]))
        pos += rec
    complete = len(results) == len(cases) and out[pos:pos + 4] == struct.pack(order + "I", END_MAGIC)
    if not complete and p.returncode == 0:
        raise SystemExit(f"gen.py: the harness stopped after {len(results)} of {len(cases)} cases")
    return results


def record(case, result):
    """The JSON line of a case: its inputs and what QEMU computed (only what changed)."""
    vals, buf = result
    (_, signo, si_code, vscr, nip, msr, si_addr), rest = vals[:7], vals[7:]
    gpr, (cr, xer, lr, ctr, fpscr, vrsave), vsr = rest[:32], rest[32:38], rest[38:]
    final = {f"r{i}": gpr[i] for i in range(32)}
    final.update(cr=cr, xer=xer, lr=lr, ctr=ctr, fpscr=fpscr, vscr=vscr, vrsave=vrsave)
    for i in range(64):
        final[f"vs{i}"] = vsr[2 * i] << 64 | vsr[2 * i + 1]
    st, mem = case.state()
    d = {"name": f"{case.name}", "seed": case.seed, "le": int(case.le)}
    d["words"] = [f"{w:08x}" for w in case.replay_words or case.words]
    if case.replay_words:
        d["qemu_words"] = [f"{w:08x}" for w in case.words]
    init = {k: hexv(k, v) for k, v in sorted(case.init.items(), key=lambda kv: REG_NAMES.index(kv[0]))}
    if init:
        d["init"] = init
    if case.mem_init:
        d["init_mem"] = runs(case.mem_init)
    out = {k: hexv(k, final[k]) for k in REG_NAMES if final[k] != st[k] and k not in case.ignore}
    if out:
        d["out"] = out
    changed = {k: buf[k] for k in range(BUF_SIZE) if buf[k] != mem[k]}
    if changed:
        d["out_mem"] = runs(changed)
    if case.ignore:
        d["ignore"] = sorted(case.ignore)
    if case.mask:
        d["mask"] = {k: hexv(k, v) for k, v in sorted(case.mask.items())}
    end = CASE_ADDR + 4 * len(case.words)
    if not (signo == SIGTRAP and nip == end):
        d["signal"] = [signo, si_code]
        d["pc"] = f"{nip:x}"
    return d


def runs(bytemap):
    """{offset: byte} as [[offset, "hex"], …] of consecutive runs."""
    out = []
    for off in sorted(bytemap):
        if out and out[-1][0] + len(out[-1][1]) // 2 == off:
            out[-1][1] += f"{bytemap[off]:02x}"
        else:
            out.append([off, f"{bytemap[off]:02x}"])
    return out


def generate(fam, seed, scale=1.0):
    g = Gen(seed)
    cases = []
    counters = {}

    def add(name, le=True):
        k = counters.get(name, 0)
        counters[name] = k + 1
        c = Case(f"{fam.name}/{name}/{k}", g.getrandbits(63), le)
        cases.append(c)
        return c

    if scale != 1.0:
        fam.per_insn = max(1, int(fam.per_insn * scale))
        fam.per_insn_be = max(1 if fam.per_insn_be else 0, int(fam.per_insn_be * scale))
        fam.streams = int(fam.streams * scale)
    fam.cases(g, add)
    for c in cases:
        if len(c.words) >= CASE_MAX_WORDS:
            raise SystemExit(f"gen.py: case {c.name} is too long")
    return cases


def write_jsonl(path, fam, seed, cases, results):
    with open(path, "w") as f:
        meta = {"format": FORMAT_VERSION, "family": fam.name, "seed": seed, "cases": len(cases),
                "oracle": "qemu-ppc64le-static QEMU_CPU=power8", "regenerate": f"emulator/tests/golden/gen.py record --family {fam.name}"}
        f.write(json.dumps(meta) + "\n")
        for c, r in zip(cases, results):
            f.write(json.dumps(record(c, r), separators=(",", ":")) + "\n")


DEFAULT_SEED = 20240601


def cmd_record(args):
    table = load_table()
    fams = args.family or sorted(n[:-6] for n in os.listdir(DATA_DIR) if n.endswith(".jsonl"))
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in fams:
            if name not in table:
                raise SystemExit(f"gen.py: no table file src/isa/table/{name}.insn")
            fam = family_for(name, table[name])
            seed = args.seed if args.seed is not None else DEFAULT_SEED
            cases = generate(fam, seed, args.scale)
            cases, results = run_qemu(cases, tmp, args.qemu)
            path = os.path.join(args.out, f"{name}.jsonl")
            write_jsonl(path, fam, seed, cases, results)
            print(f"{path}: {len(cases)} cases", file=sys.stderr)


def cmd_fuzz(args):
    table = load_table()
    seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(48)
    out = args.out or tempfile.mkdtemp(prefix="golden-fuzz-")
    os.makedirs(out, exist_ok=True)
    fams = args.family or ["fixed", "branch", "loadstore", "system", "fp", "vsx_fp"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in fams:
            fam = family_for(name, table[name])
            cases = generate(fam, seed, args.scale)
            cases, results = run_qemu(cases, tmp, args.qemu)
            write_jsonl(os.path.join(out, f"{name}.jsonl"), fam, seed, cases, results)
    print(f"seed {seed}", file=sys.stderr)
    print(out)


def cmd_show(args):
    with open(args.file) as f:
        lines = [json.loads(l) for l in f][1:]
    sel = [c for c in lines if args.case in (c["name"], str(lines.index(c)))] or [c for c in lines if args.case in c["name"]]
    for c in sel[:20]:
        print(json.dumps(c, indent=1))
        if shutil.which("powerpc64le-linux-gnu-objdump"):
            with tempfile.NamedTemporaryFile(suffix=".bin") as t:
                t.write(words_bytes([int(w, 16) for w in c["words"]], c["le"]))
                t.flush()
                endian = "little" if c["le"] else "big"
                subprocess.run(["powerpc64le-linux-gnu-objdump", "-D", "-b", "binary", "-m", "powerpc:common64",
                                f"--endian={endian}", f"--adjust-vma={CASE_ADDR:#x}", t.name])


def cmd_crosscheck_be(args):
    """Runs the big-endian cases of families twice: in a little-endian process switched to
    MSR[LE]=0 (how they are recorded, qemu-ppc64le-static) and in a big-endian process
    (qemu-ppc64-static), and reports any difference."""
    table = load_table()
    fams = args.family or sorted(n[:-6] for n in os.listdir(DATA_DIR) if n.endswith(".jsonl"))
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in fams:
            fam = family_for(name, table[name])
            seed = args.seed if args.seed is not None else DEFAULT_SEED
            cases = [c for c in generate(fam, seed, args.scale) if not c.le]
            kept_le, res_le = run_qemu(cases, tmp, "qemu-ppc64le-static")
            kept_be, res_be = run_qemu(cases, tmp, "qemu-ppc64-static", big_endian=True)
            by_name = {c.name: record(c, r) for c, r in zip(kept_be, res_be)}
            diff = 0
            for c, r in zip(kept_le, res_le):
                a, b = record(c, r), by_name.get(c.name)
                if a != b:
                    diff += 1
                    if diff <= 5:
                        print(f"{c.name}:\n  le process: {json.dumps(a)}\n  be process: {json.dumps(b)}")
            print(f"{name}: {len(kept_le)} big-endian cases, {diff} differ", file=sys.stderr)
            bad += diff
    if bad:
        raise SystemExit(1)


def cmd_probe(args):
    """Runs instruction words under QEMU and prints the registers that changed."""
    case = Case("probe", args.seed, not args.big_endian)
    case.words = [int(w, 16) for w in args.words]
    for kv in args.init or []:
        k, v = kv.split("=")
        case.init[k] = int(v, 0)
    with tempfile.TemporaryDirectory() as tmp:
        cases, results = run_qemu([case], tmp, args.qemu)
    if not cases:
        raise SystemExit("QEMU aborted")
    print(json.dumps(record(case, results[0])))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, fn in (("record", cmd_record), ("fuzz", cmd_fuzz)):
        s = sub.add_parser(name)
        s.add_argument("--family", action="append", help="table file name (repeatable)")
        s.add_argument("--seed", type=int)
        s.add_argument("--scale", type=float, default=1.0, help="multiplies the number of cases")
        s.add_argument("--qemu", default="qemu-ppc64le-static")
        s.add_argument("--out", default=DATA_DIR if name == "record" else None)
        s.set_defaults(fn=fn)
    s = sub.add_parser("crosscheck-be", help="big-endian cases: LE process with MSR[LE]=0 vs BE process")
    s.add_argument("--family", action="append")
    s.add_argument("--seed", type=int)
    s.add_argument("--scale", type=float, default=1.0)
    s.set_defaults(fn=cmd_crosscheck_be)
    s = sub.add_parser("probe", help="run words under QEMU: probe [--init r3=5] 7c632214 …")
    s.add_argument("words", nargs="+")
    s.add_argument("--init", action="append")
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--big-endian", action="store_true")
    s.add_argument("--qemu", default="qemu-ppc64le-static")
    s.set_defaults(fn=cmd_probe)
    s = sub.add_parser("show")
    s.add_argument("file")
    s.add_argument("case")
    s.set_defaults(fn=cmd_show)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
