//! The baseline tier's frame and ABI: the entry trampoline and the code every block of the
//! machine shares (the return to the run loop, helper thunks, probe exits), placed code and
//! its fixups, and each block's entry check, exits, probes and out-of-line code.
//!
//! The stop condition blocks test is the vCPU's (`vcpu::exit::keeps_running`): the budget
//! at each block's entry, the kick flag and events in the probes and at jumps back within a
//! page (every cycle of linked blocks has one).

use super::*;

/// Code of one block.
pub struct Emitted {
    /// The hot part (`..split`: entry checks, body, exits) and the out-of-line part
    /// (`split..`: slow paths), placed apart ([`Emitted::place`]).
    pub code: Vec<u8>,
    pub split: u32,
    /// The `rel32` fields of one part that reach into the other.
    pub cross: Vec<CrossRef>,
    /// Instructions translated natively / left to the interpreter.
    pub native: u32,
    pub fallbacks: u32,
    /// Offsets where the body and the exits start (the entry checks come first; the
    /// out-of-line code at `split`): sections of `PPC64EMU_LOG=perfmap`.
    pub sections: [u32; 2],
    /// `rel32` fields of jumps, calls and RIP-relative operands whose target is outside the
    /// block (shared stubs, the block's counter), resolved where the code is placed
    /// ([`Emitted::place`]).
    pub fixups: Vec<Fixup>,
    /// Host-guarded memory ([`Space::guarded`]): each direct access instruction's offset
    /// and the offset of the miss path a host fault on it resumes at.
    pub fault_sites: Vec<(u32, u32)>,
    /// Where a jump from another page enters ([`Em::emit_guard`], the code's start); none
    /// in user mode.
    pub guard: Option<u32>,
    /// Where the block is entered otherwise: after the guard.
    pub entry: u32,
}

/// Set in a site address (`JitCtx::link`) whose jump comes from another page: it is linked
/// to the target's guard, not its entry. Site addresses are user-space pointers, far below.
pub const GUARDED_SITE: usize = 1 << 62;

/// A `rel32` field at `off` in a block's code that must reach `target`; `tail`: bytes of
/// the instruction after the field (an immediate), which the displacement is relative to.
#[derive(Clone, Copy, Debug)]
pub struct Fixup {
    off: u32,
    tail: u8,
    target: usize,
}

impl Emitted {
    /// The hot part and the out-of-line part.
    pub fn parts(&self) -> (&[u8], &[u8]) {
        self.code.split_at(self.split as usize)
    }

    /// Where the byte at `off` of `code` lands with the hot part at `hot` and the
    /// out-of-line part at `cold`.
    pub fn address(&self, off: u32, hot: usize, cold: usize) -> usize {
        match off.checked_sub(self.split) {
            None => hot + off as usize,
            Some(o) => cold + o as usize,
        }
    }

    /// Copies the two parts to `hot` and `cold` and resolves the jumps to shared stubs and
    /// between the parts there.
    ///
    /// # Safety
    /// `hot` and `cold` have room for [`Emitted::parts`], writable, not yet run (`cold` may
    /// be anything when the out-of-line part is empty).
    pub unsafe fn place(&self, hot: *mut u8, cold: *mut u8) {
        let (h, c) = self.parts();
        // SAFETY: the caller's promise: room for each part.
        unsafe {
            std::ptr::copy_nonoverlapping(h.as_ptr(), hot, h.len());
            std::ptr::copy_nonoverlapping(c.as_ptr(), cold, c.len());
        }
        let at = |off: u32| self.address(off, hot as usize, cold as usize) as i64;
        let rel32 = |field: u32, next: i64, target: i64| {
            let disp = i32::try_from(target - next).expect("target out of rel32 reach");
            // SAFETY: `field + 4` lies inside its part (an emitted rel32 field), in the copy.
            unsafe { (at(field) as *mut [u8; 4]).write_unaligned(disp.to_le_bytes()) };
        };
        for &Fixup { off, tail, target } in &self.fixups {
            rel32(off, at(off) + 4 + tail as i64, target as i64);
        }
        for &CrossRef {
            field,
            next,
            target,
        } in &self.cross
        {
            rel32(field, at(field) + (next - field) as i64, at(target));
        }
    }
}

/// Code every block of the machine shares, placed once in the code region next to the
/// entry trampoline (blocks reach it with `rel32` jumps and calls): the return to the run
/// loop and one thunk per helper. Keeping it out of the blocks makes each translation a few
/// hundred bytes smaller, and the instruction cache holds the hot paths of more blocks.
#[derive(Clone, Copy, Debug)]
pub struct Stubs {
    /// Pops the trampoline's frame and returns to the run loop.
    pub exit: usize,
    /// `helper(cpu, ctx, rdx, rcx, r8)`: sets the first two arguments and jumps to the
    /// helper, in the order of [`HELPERS`].
    pub thunks: [usize; HELPERS.len()],
}

/// A block's execution counter, in two parts so that the part every entry touches is one
/// byte: the entries counted by the translated code dominate a cold block's cost, and 388 k
/// blocks of a Linux build keep 1.5 MB of 4-byte counters, which miss in the cache.
#[derive(Clone, Copy, Debug)]
pub struct Counter {
    /// The low byte, decremented on every entry (within `rel32` reach of the code).
    pub low: usize,
    /// The high part (`u32`), decremented each time the low byte wraps; the block asks to be
    /// promoted when it goes negative.
    pub high: usize,
}

/// The helpers blocks call, each through its thunk.
pub const HELPERS: [Helper; 6] = [
    Helper::Interp,
    Helper::Load,
    Helper::Store,
    Helper::RunOptimized,
    Helper::Timebase,
    Helper::WriteMsr,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Helper {
    Interp,
    Load,
    Store,
    RunOptimized,
    Timebase,
    WriteMsr,
}

impl Helper {
    fn address(self) -> usize {
        match self {
            Helper::Interp => helpers::interp as *const () as usize,
            Helper::Load => helpers::load as *const () as usize,
            Helper::Store => helpers::store as *const () as usize,
            Helper::RunOptimized => helpers::run_optimized as *const () as usize,
            Helper::Timebase => helpers::timebase as *const () as usize,
            Helper::WriteMsr => helpers::write_msr as *const () as usize,
        }
    }
}

/// The shared return to the run loop: drops the return frames (`Em::push_return`) and the
/// trampoline's frame.
pub fn exit_stub() -> Vec<u8> {
    let mut ops = VecAssembler::<X64Relocation>::new(0);
    asm!(ops ; mov QWORD [r12 + BUDGET], rbp ; mov rsp, QWORD [r12 + RSP_BASE] ; add rsp, 8 ; pop rbp ; pop r15 ; pop r14 ; pop r13 ; pop r12 ; pop rbx ; ret);
    ops.finalize().expect("exit stub")
}

/// The thunk of `h`: `cpu` and `ctx` into the first two argument registers, then the helper
/// (a tail jump: the block's `call` return address is the helper's).
pub fn thunk(h: Helper) -> Vec<u8> {
    let mut ops = VecAssembler::<X64Relocation>::new(0);
    asm!(ops ; lea rdi, [rbx - RBX_BIAS] ; mov rsi, r12 ; mov rax, QWORD h.address() as i64 ; jmp rax);
    ops.finalize().expect("helper thunk")
}

/// The probe exit of blocks of MSR state `flags` (`rax` = next PC, budget charged), called by
/// the block: a baseline block for it in the jump cache is returned in `rcx` for the block's
/// own indirect jump (the target's entry checks the budget);
/// an optimized block of the same MSR state is run through `helpers::run_optimized`, after
/// which the probe goes on from the PC it left; anything else returns to the run loop.
///
/// With `unlinked_of` (the address of that stub), the variant for direct exits whose jump is
/// not linked (`r13` = the jump's displacement): a baseline target, or none in the jump
/// cache, returns with `JitCtx::link` naming the jump so that the run loop links it; an
/// optimized target is run at once and the plain probe goes on. Without it, a block whose
/// same-page successor was promoted would return to the run loop on every pass (baseline
/// jumps link only to baseline blocks).
pub fn probe_stub(flags: u64, stubs: &Stubs, unlinked_of: Option<usize>) -> Emitted {
    let mut ops = Asm::new();
    let probe = ops.new_dynamic_label();
    let mut e = stub_em(ops, flags, stubs, probe);
    e.emit_probe(probe, unlinked_of);
    e.stub("probe stub")
}

/// The mapping test every guard of MSR state `flags` calls ([`Em::emit_guard`]): `rax` =
/// the address jumped to, `rcx` = the host page its block was made from. Returns with ZF
/// set when `rax`'s exec TLB entry maps that page — the probe's test — and the running page
/// set to `rax`'s. Clobbers `rcx`, `rdx` and `rsi`.
pub fn guard_stub(flags: u64, stubs: &Stubs) -> Emitted {
    let mut ops = Asm::new();
    let unused = ops.new_dynamic_label();
    let mut e = stub_em(ops, flags, stubs, unused);
    let out = e.label();
    let (_, exec_addend) = e.exec_entry();
    asm!(e.ops ; =>unused);
    e.exec_tlb_hit(out);
    asm!(e.ops
        ; sub rcx, rsi
        ; cmp rcx, QWORD [r14 + rdx + exec_addend]
        ; jne =>out
        ; mov QWORD [r12 + PAGE], rsi
        ; =>out
        ; ret
    );
    e.stub("guard stub")
}

/// An emitter for shared code of MSR state `flags` (no block).
fn stub_em(ops: Asm, flags: u64, stubs: &Stubs, probe: DynamicLabel) -> Em {
    Em {
        ops,
        key: BlockKey::new(0, 0, flags, false),
        le: flags & msr::LE != 0,
        idx_read: 0,
        idx_write: 0,
        k: 0,
        pc: 0,
        block_pc: 0,
        page: None,
        cold: Vec::new(),
        probe: Exit::Local(probe),
        stubs: *stubs,
        fixups: Vec::new(),
        cache: RegCache::default(),
        caching: false,
        later: Vec::new(),
        flat: None,
        guarded: false,
        sites: Vec::new(),
        user: false,
        handoff: Handoff::default(),
        write_back: false,
        counter: None,
        looping: None,
        ctr_copy: None,
        words: Vec::new(),
        join_at: Vec::new(),
        joins: Vec::new(),
    }
}

impl Em {
    /// The shared code emitted so far.
    fn stub(self, what: &str) -> Emitted {
        let code = self.ops.finalize().expect(what);
        Emitted {
            guard: None,
            entry: 0,
            split: code.len() as u32,
            cross: Vec::new(),
            code,
            native: 0,
            fallbacks: 0,
            sections: [0; 2],
            fixups: self.fixups,
            fault_sites: Vec::new(),
        }
    }

    /// Offsets from `r14` of the exec TLB entry's tag and addend of this MSR state (to add
    /// the entry's index × its size).
    fn exec_entry(&self) -> (i32, i32) {
        let exec = mmu_idx(self.key.flags, Access::Exec) as i32 * TLB_IDX_BYTES;
        (
            exec + offset_of!(TlbEntry, exec) as i32,
            exec + offset_of!(TlbEntry, addend) as i32,
        )
    }

    /// `rdx` = the offset of the exec TLB entry of the address in `rax` (from `r14`, to add
    /// [`Em::exec_entry`]'s field offsets), `rsi` = that address's page; jumps to `miss`
    /// unless the entry is for that page.
    fn exec_tlb_hit(&mut self, miss: DynamicLabel) {
        let (exec_tag, _) = self.exec_entry();
        asm!(self.ops
            ; mov rdx, rax
            ; shr rdx, 12
            ; and edx, (TLB_ENTRIES - 1) as i32
            ; shl edx, size_of::<TlbEntry>().trailing_zeros() as i8
            ; mov rsi, rax
            ; and rsi, PAGE_MASK as i32
            ; cmp rsi, QWORD [r14 + rdx + exec_tag]
            ; jne =>miss
        );
    }
}

/// Where a block's probe exits go: its own copy (when the machine has no room for another
/// shared one) or the shared stubs of its MSR state (see [`probe_stub`]).
#[derive(Clone, Copy)]
pub(super) enum Exit {
    Local(DynamicLabel),
    Shared {
        probe: usize,
        unlinked: usize,
        guard: usize,
    },
}

/// The shared probe stubs of one MSR state: the plain one and the unlinked-exit variant.
#[derive(Clone, Copy, Debug)]
pub struct ProbeStubs {
    pub probe: usize,
    pub unlinked: usize,
    /// The guards' mapping test ([`guard_stub`]).
    pub guard: usize,
}

/// The entry trampoline, `extern "C" fn(cpu, ctx, code)`: saves the callee-saved registers
/// blocks use, pins the two pointers and jumps to the block; every exit pops and returns.
pub fn trampoline() -> Vec<u8> {
    let mut ops = VecAssembler::<X64Relocation>::new(0);
    // Six pushes and eight bytes keep rsp 16-byte aligned for helper calls. `rbp` holds the
    // budget while blocks run, `r15` a copy of a guest GPR (`regcache`).
    asm!(ops
        ; push rbx
        ; push r12
        ; push r13
        ; push r14
        ; push r15
        ; push rbp
        ; sub rsp, 8
        ; mov r14, QWORD [rdi + TLB_TABLE_PTR]
        ; lea rbx, [rdi + RBX_BIAS]
        ; mov r12, rsi
        ; mov QWORD [r12 + RSP_BASE], rsp
        ; lea rax, [rsp - RETURN_FRAMES_BYTES as i32]
        ; mov QWORD [r12 + RSP_LIMIT], rax
        ; mov rbp, QWORD [r12 + BUDGET]
        ; jmp rdx
    );
    ops.finalize().expect("trampoline")
}

impl Em {
    /// A `jmp` or `call` (`opcode`) to a shared stub at `target`.
    pub(super) fn branch_to_stub(&mut self, opcode: u8, target: usize) {
        self.ops.push(opcode);
        self.rel32(target, 0);
    }

    /// A `rel32` field reaching `target` from the end of an instruction `tail` bytes later.
    pub(super) fn rel32(&mut self, target: usize, tail: u8) {
        let off = self.ops.offset().0 as u32;
        self.fixups.push(Fixup { off, tail, target });
        self.ops.extend([0u8; 4]);
    }

    /// Returns to the run loop.
    pub(super) fn epilogue(&mut self) {
        self.branch_to_stub(0xe9, self.stubs.exit);
    }

    /// Leaves through the probe exit (`rax` = next PC, budget charged).
    ///
    /// The probe is called and returns the target block in `rcx` when the jump cache has
    /// one, so that the indirect jump is the block's own: one shared jump for every indirect
    /// exit of the machine left the host's branch predictor a single site for all targets.
    pub(super) fn jmp_probe(&mut self) {
        self.assert_homes_current();
        match self.probe {
            Exit::Local(l) => asm!(self.ops ; call =>l),
            Exit::Shared { probe, .. } => self.branch_to_stub(0xe8, probe),
        }
        asm!(self.ops ; jmp rcx);
    }

    pub(super) fn store_pc(&mut self, pc: u64) {
        self.pc_into(RAX, pc);
        asm!(self.ops ; mov QWORD [rbx + PC], rax);
    }

    /// `reg` = `ea`, an address of this block's code or relative to it (not an absolute
    /// branch target): a constant, or in a page-relative block the running page plus
    /// `ea`'s distance from this block's page.
    pub(super) fn pc_into(&mut self, reg: u8, ea: u64) {
        match self.page {
            Some(page) => {
                let d = i32::try_from(ea.wrapping_sub(page) as i64)
                    .expect("a relative branch reaches ±32 MiB");
                asm!(self.ops ; mov Rq(reg), QWORD [r12 + PAGE]);
                if d != 0 {
                    self.ops.alu_imm(AluImm::Add, reg, true, d);
                }
            }
            None => asm!(self.ops ; mov Rq(reg), QWORD ea as i64),
        }
    }

    /// Block entry: the promotion counter, then the budget. The kick flag and pending events
    /// are tested where control leaves a page's chain of linked blocks or loops in it — the
    /// probe ([`Em::emit_probe`]) and a jump back within the page ([`Em::exit_direct`]) —
    /// so that a vCPU still leaves promptly: every cycle of linked blocks has a jump back.
    /// Tested here, they were two of a block's entry instructions in three and 40 % of the
    /// samples the entries took (linux-make, N = 1: 17.6 % of all samples were block
    /// entries, half on the first instruction's fetch).
    pub(super) fn entry(&mut self, counter: Option<Counter>) {
        let stop = self.label();
        if let Some(c) = counter {
            self.tick(c);
        }
        asm!(self.ops ; test rbp, rbp ; jle =>stop);
        self.cold.push(Cold::Stop {
            at: stop,
            pc: self.block_pc,
            held: self.cache,
        });
    }

    /// Counts an entry on the block's counter `c`: `sub byte [rip + low], 1`, and every
    /// 256th time (the byte wraps to 0) a tick off the word out of line.
    pub(super) fn tick(&mut self, c: Counter) {
        let (tick, back) = (self.label(), self.label());
        self.ops.extend([0x80, 0x2d]);
        self.rel32(c.low, 1);
        self.ops.push(1);
        asm!(self.ops ; jz =>tick ; =>back);
        self.cold.push(Cold::Tick {
            at: tick,
            back,
            high: c.high,
            held: self.cache,
        });
    }

    /// Jumps to `stop` when the vCPU is kicked or has events pending (not in user mode:
    /// nothing but the vCPU's own instructions stops it, and the interpreter's helper
    /// already stops the block when one of them leaves events). Clobbers `rdx`.
    pub(super) fn kick_or_events(&mut self, stop: DynamicLabel) {
        if !self.user {
            asm!(self.ops
                ; mov rdx, QWORD [r12 + KICK]
                ; cmp BYTE [rdx], 0
                ; jne =>stop
                ; cmp DWORD [rbx + EVENTS], 0
                ; jne =>stop
            );
        }
    }

    /// Emits the block's own probe exit if it has one and the out-of-line code; returns
    /// where the latter starts.
    pub(super) fn emit_cold(&mut self) -> u32 {
        if let Exit::Local(l) = self.probe {
            self.emit_probe(l, None);
        }
        // Nothing falls through into the out-of-line part, which is placed elsewhere; were
        // anything to, it would stop here rather than run what follows in memory. The part
        // starts 16-byte aligned, as it is placed: the jumps it links keep their
        // displacements 4-byte aligned (`Em::exit_direct`), or they never link.
        asm!(self.ops ; int3);
        self.ops.align(16, 0xcc);
        let cold = self.ops.offset().0 as u32;
        // Out-of-line code reads the homes and reloads the copies it returns to.
        (self.caching, self.cache) = (false, RegCache::default());
        // Cold code may queue more cold code (an interpreter slow path queues its exit).
        while !self.cold.is_empty() {
            for c in std::mem::take(&mut self.cold) {
                self.emit_cold_item(c);
            }
        }
        cold
    }

    /// The probe exit at `probe`; with `unlinked_of`, its unlinked-exit variant, which goes
    /// on at that plain probe after running an optimized block (see [`probe_stub`]).
    ///
    /// The plain probe is called (`Em::jmp_probe`): a baseline target in the jump cache is
    /// returned in `rcx`; every other way drops the return address and does not come back.
    /// The unlinked variant is jumped to.
    pub(super) fn emit_probe(&mut self, probe: DynamicLabel, unlinked_of: Option<usize>) {
        let called = unlinked_of.is_none();
        let (out, optimized, way) = (self.label(), self.label(), self.label());
        // Where the run loop is asked to link the jump in `r13` to the block at the PC.
        let out_link = if unlinked_of.is_some() {
            self.label()
        } else {
            out
        };
        // Ways out of the lookup: the called probe first drops its return address.
        let (miss, other) = if called {
            (self.label(), self.label())
        } else {
            (out_link, optimized)
        };
        let tag = jc_flags(self.key.flags, TierId::Baseline) as i64;
        let (_, exec_addend) = self.exec_entry();
        asm!(self.ops
            ; =>probe
            ; mov QWORD [rbx + PC], rax
        );
        // A kick or events end the chain here (block entries test only the budget).
        self.kick_or_events(miss);
        asm!(self.ops
            // The set's byte offset, `jump_cache::set(pc) * 64` (`JcSet` is 64 bytes) as
            // one mask and one shift: no multiply on the way to the set's load.
            ; mov ecx, eax
            ; and ecx, ((JC_SETS - 1) << 2) as i32
            ; shl ecx, (size_of::<JcSet>().trailing_zeros() - 2) as i8
            ; add rcx, QWORD [r12 + JC]
            // The set's first way, else its second (`JcSet::probe`).
            ; cmp rax, QWORD [rcx + offset_of!(JcEntry, pc) as i32]
            ; je =>way
            ; add rcx, size_of::<JcEntry>() as i32
            ; cmp rax, QWORD [rcx + offset_of!(JcEntry, pc) as i32]
            ; jne =>miss
            ; =>way
        );
        // The entry holds while the PC's exec TLB entry maps the page it was made for.
        self.exec_tlb_hit(miss);
        asm!(self.ops
            // The page a page-relative block computes its addresses from.
            ; mov QWORD [r12 + PAGE], rsi
            ; mov rsi, QWORD [r14 + rdx + exec_addend]
            ; cmp rsi, QWORD [rcx + offset_of!(JcEntry, addend) as i32]
            ; jne =>miss
            ; mov rdx, QWORD tag
            ; cmp rdx, QWORD [rcx + offset_of!(JcEntry, flags) as i32]
            ; jne =>other
        );
        if called {
            asm!(self.ops
                ; mov rcx, QWORD [rcx + offset_of!(JcEntry, f) as i32]
                ; ret
                ; =>miss
                ; add rsp, 8
                ; jmp =>out_link
                ; =>other
                ; add rsp, 8
            );
        } else {
            // A baseline target: the run loop links the jump to it.
            asm!(self.ops ; jmp =>out_link);
        }
        asm!(self.ops
            ; =>optimized
            ; mov rdx, QWORD self.key.flags as i64
            ; cmp rdx, QWORD [rcx + offset_of!(JcEntry, flags) as i32]
            ; jne =>out_link
            ; cmp QWORD [r12 + OPTIMIZED], 0
            ; je =>out_link
            ; mov rdx, QWORD [rcx + offset_of!(JcEntry, f) as i32]
            ; mov rcx, QWORD self.key.flags as i64
            ; mov QWORD [r12 + BUDGET], rbp
        );
        self.call(Helper::RunOptimized);
        asm!(self.ops
            ; mov rbp, QWORD [r12 + BUDGET]
            ; cmp QWORD [r12 + RET], 0
            ; jne =>out
            ; mov rax, QWORD [rbx + PC]
        );
        // Probe again from the PC the optimized code left.
        match unlinked_of {
            Some(plain) => self.branch_to_stub(0xe8, plain),
            None => asm!(self.ops ; call =>probe),
        }
        asm!(self.ops ; jmp rcx);
        if unlinked_of.is_some() {
            asm!(self.ops ; =>out_link ; mov QWORD [r12 + LINK], r13);
        }
        asm!(self.ops ; =>out);
        self.epilogue();
    }

    pub(super) fn emit_cold_item(&mut self, c: Cold) {
        {
            match c {
                Cold::InterpSlow {
                    at,
                    back,
                    held,
                    op,
                    word,
                    k,
                    pc,
                } => {
                    asm!(self.ops ; =>at);
                    self.flush_held(&held);
                    (self.k, self.pc) = (k, pc);
                    self.fallback(op, word);
                    self.reload(&held);
                    asm!(self.ops ; jmp =>back);
                }
                Cold::DropFrame { at, probe } => {
                    asm!(self.ops ; =>at ; add rsp, 16 ; jmp =>probe);
                }
                Cold::Probe { at } => {
                    asm!(self.ops ; =>at);
                    self.jmp_probe();
                }
                Cold::Stop { at, pc, held } => {
                    asm!(self.ops ; =>at);
                    self.flush_held(&held);
                    self.store_pc(pc);
                    self.epilogue();
                }
                Cold::Unlinked {
                    at,
                    site,
                    target,
                    guarded,
                } => {
                    let tag = GUARDED_SITE.trailing_zeros() as i8;
                    asm!(self.ops ; =>at);
                    if let Exit::Shared { unlinked, .. } = self.probe {
                        asm!(self.ops ; lea r13, [=>site]);
                        if guarded {
                            asm!(self.ops ; bts r13, BYTE tag);
                        }
                        self.pc_into(RAX, target);
                        self.branch_to_stub(0xe9, unlinked);
                    } else {
                        self.store_pc(target);
                        asm!(self.ops ; lea rax, [=>site]);
                        if guarded {
                            asm!(self.ops ; bts rax, BYTE tag);
                        }
                        asm!(self.ops ; mov QWORD [r12 + LINK], rax);
                        self.epilogue();
                    }
                }
                Cold::Tick {
                    at,
                    back,
                    high,
                    held,
                } => {
                    // Retires nothing when it promotes: the run loop promotes the block and
                    // runs it again.
                    let promote = self.label();
                    asm!(self.ops
                        ; =>at
                        ; mov rax, QWORD high as i64
                        ; sub DWORD [rax], 1
                        ; js =>promote
                        ; jmp =>back
                        ; =>promote
                    );
                    self.flush_held(&held);
                    self.store_pc(self.block_pc);
                    asm!(self.ops ; mov QWORD [r12 + LINK], PROMOTE as i32);
                    self.epilogue();
                }
                Cold::LoadMiss {
                    at,
                    back,
                    held,
                    ea,
                    size,
                    le,
                    fault,
                } => {
                    asm!(self.ops ; =>at);
                    self.flush_held(&held);
                    asm!(self.ops ; lea rdx, [Rq(ea.reg) + ea.disp] ; mov ecx, size as i32 ; mov r8d, le as i32);
                    self.call(Helper::Load);
                    asm!(self.ops
                        ; cmp DWORD [r12 + FAULT], 0
                        ; jne =>fault
                    );
                    self.reload(&held);
                    asm!(self.ops
                        ; mov rax, QWORD [r12 + RET]
                        ; jmp =>back
                    );
                }
                Cold::StoreMiss {
                    at,
                    back,
                    held,
                    ea,
                    src,
                    size,
                    le,
                    update_ra,
                    fault,
                    k,
                    next,
                } => {
                    let wrote_code = self.label();
                    asm!(self.ops ; =>at);
                    self.flush_held(&held);
                    asm!(self.ops ; lea rdx, [Rq(ea.reg) + ea.disp]);
                    self.store_src(RCX, src);
                    asm!(self.ops ; mov r8d, (size | (le as u32) << 8) as i32);
                    self.call(Helper::Store);
                    asm!(self.ops
                        ; mov rax, QWORD [r12 + RET]
                        ; cmp eax, helpers::STOP_FAULT as i32
                        ; je =>fault
                        ; test eax, eax
                        ; jnz =>wrote_code
                    );
                    self.reload(&held);
                    asm!(self.ops
                        ; jmp =>back
                        ; =>wrote_code
                    );
                    // The rest of the block may be stale: stop after this instruction.
                    if let Some(ra) = update_ra {
                        self.gpr_rm(GprOp::Store64, R13, ra);
                    }
                    self.store_pc(next);
                    self.ops.alu_imm(AluImm::Sub, RBP, true, k as i32);
                    self.epilogue();
                }
                Cold::Interp { at, k } => {
                    // STOP_FAULT retires nothing more, STOP_AFTER this instruction.
                    asm!(self.ops ; =>at ; lea rax, [rax + k as i32 - 1] ; sub rbp, rax);
                    self.epilogue();
                }
                Cold::AccessRun {
                    at,
                    back,
                    held,
                    k,
                    pc,
                    words,
                } => self.access_run_cold(at, back, &held, (k, pc), &words),
                Cold::Fault { at, k, pc } => {
                    asm!(self.ops ; =>at);
                    self.store_pc(pc);
                    self.ops.alu_imm(AluImm::Sub, RBP, true, k as i32);
                    self.epilogue();
                }
                Cold::CrfFirst { at, then, held, c } => {
                    // The access's registers (address, value) are what its cold path reads.
                    asm!(self.ops ; =>at ; push rax ; push rcx ; push rdx ; push r13);
                    self.crf_again(c, &held);
                    asm!(self.ops ; pop r13 ; pop rdx ; pop rcx ; pop rax ; jmp =>then);
                }
            }
        }
    }

    /// Leaves the block for `target` with `retired` instructions done. A target on the
    /// block's own page gets a patchable jump (initially to the next instruction, which
    /// returns with `JitCtx::link` naming the jump); others go through the probe.
    pub(super) fn exit_direct(&mut self, retired: u32, target: u64) {
        self.ops.alu_imm(AluImm::Sub, RBP, true, retired as i32);
        self.jump_direct(target);
    }

    /// [`Em::exit_direct`] with the budget charged.
    pub(super) fn jump_direct(&mut self, target: u64) {
        if target != self.block_pc || !self.closes_loop() {
            self.assert_homes_current();
        }
        // A user process's pages never change mapping (an unmapped, replaced or no longer
        // executable page drops its blocks, and with them the jumps into them), so its
        // exits link to any page. A machine's other page may map other code the next time
        // (another process, a remap): the jump is linked to the target's guard, which
        // checks the mapping with the target address in `rax`.
        let other_page = !self.user && target & PAGE_MASK != self.block_pc & PAGE_MASK;
        let guarded = other_page && matches!(self.probe, Exit::Shared { .. });
        if other_page {
            self.pc_into(RAX, target);
            if !guarded {
                // No shared guard test (the machine had no room for this MSR state's stubs):
                // no block of this state has a guard.
                self.jmp_probe();
                return;
            }
        }
        if target <= self.pc {
            // A jump back: linked, it may close a loop that never probes.
            let stop = self.label();
            self.kick_or_events(stop);
            self.cold.push(Cold::Stop {
                at: stop,
                pc: target,
                held: self.cache,
            });
            if let Some(head) = self
                .looping
                .filter(|_| self.caching && target == self.block_pc)
            {
                return self.loop_back(head, stop);
            }
        }
        // The displacement must be 4-byte aligned so that patching it is one atomic store.
        while !(self.ops.offset().0 + 1).is_multiple_of(4) {
            asm!(self.ops ; nop);
        }
        let (site, unlinked) = (self.label(), self.label());
        self.ops.push(0xe9);
        asm!(self.ops ; =>site);
        self.ops.extend([0u8; 4]);
        // Unlinked, the jump falls through to here: the way out is out of line.
        asm!(self.ops ; jmp =>unlinked);
        self.cold.push(Cold::Unlinked {
            at: unlinked,
            site,
            target,
            guarded,
        });
    }

    /// Where a jump linked from another page enters (`exit_direct`), with `rax` = this
    /// block's address and the budget charged: on into the block's entry, emitted right
    /// after it, while that address's exec TLB entry maps the host page the block was made
    /// from (the probe's test, without the jump-cache lookup; the shared stub at `test`,
    /// [`guard_stub`]), else to `miss` (the probe). A block of absolute addresses also needs
    /// `rax` to be its own (a page-relative caller's target moves with its page). In front
    /// of the entry, not among the slow paths: out there, the jump into it and the jump on to
    /// the entry touched two more cache lines per crossing, and the guard's first
    /// instruction took 40 % of its samples. Returns its offset; pads to keep the entry
    /// 16-byte aligned.
    pub(super) fn emit_guard(&mut self, miss: DynamicLabel, test: usize) -> u32 {
        let at = self.ops.offset().0 as u32;
        if self.page.is_none() {
            asm!(self.ops ; mov rdx, QWORD self.block_pc as i64 ; cmp rax, rdx ; jne =>miss);
        }
        // 21 bytes: a copy of the test in every block made the code a fifth larger, and the
        // bodies slower for it.
        asm!(self.ops ; mov rcx, QWORD (self.key.host & PAGE_MASK) as i64);
        self.branch_to_stub(0xe8, test);
        asm!(self.ops ; jne =>miss);
        let pad = (16 - self.ops.offset().0 % 16) % 16;
        self.nops(pad);
        at
    }

    /// `n` bytes of no-operation in as few instructions as the multi-byte `nop` forms allow.
    fn nops(&mut self, mut n: usize) {
        const NOPS: [&[u8]; 8] = [
            &[0x90],
            &[0x66, 0x90],
            &[0x0f, 0x1f, 0x00],
            &[0x0f, 0x1f, 0x40, 0x00],
            &[0x0f, 0x1f, 0x44, 0x00, 0x00],
            &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],
            &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00],
            &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
        ];
        while n > 0 {
            let k = n.min(NOPS.len());
            self.ops.extend(NOPS[k - 1].iter().copied());
            n -= k;
        }
    }

    /// Leaves the block for `target`, the absolute address of a branch with AA set: a
    /// page-relative block cannot know whether it is on the running page (that depends on
    /// the mapping), so it probes.
    pub(super) fn exit_absolute(&mut self, retired: u32, target: u64) {
        if self.page.is_none() {
            return self.exit_direct(retired, target);
        }
        self.ops.alu_imm(AluImm::Sub, RBP, true, retired as i32);
        asm!(self.ops ; mov rax, QWORD target as i64);
        self.jmp_probe();
    }

    /// Leaves the block for the return address in `rax` (`blr`) with `retired` instructions
    /// done: with the host's `ret` to the landing of the top return frame
    /// ([`Em::push_return`]) when the frame is for this address, else through the probe,
    /// dropping the frame. The frame needs no other check: it was pushed in this stint, under
    /// this mapping and MSR state (`JitCtx::rsp_base`). The probe's indirect jump, one per
    /// `blr` site, mispredicted whenever a function returned to another caller than the last
    /// time; the host's return stack follows the calls.
    pub(super) fn exit_return(&mut self, retired: u32) {
        self.assert_homes_current();
        let (miss, drop) = (self.label(), self.label());
        self.ops.alu_imm(AluImm::Sub, RBP, true, retired as i32);
        asm!(self.ops
            ; cmp rsp, QWORD [r12 + RSP_BASE]
            ; je =>miss
            ; cmp rax, QWORD [rsp + 8]
            ; jne =>drop
        );
        if !self.user {
            asm!(self.ops
                ; mov rdx, rax
                ; and rdx, PAGE_MASK as i32
                ; mov QWORD [r12 + PAGE], rdx
            );
        }
        asm!(self.ops ; ret);
        self.cold.push(Cold::DropFrame {
            at: drop,
            probe: miss,
        });
        self.cold.push(Cold::Probe { at: miss });
    }

    /// Leaves the block for the PC in `rax` with `retired` instructions done.
    pub(super) fn exit_indirect(&mut self, retired: u32) {
        self.ops.alu_imm(AluImm::Sub, RBP, true, retired as i32);
        self.jmp_probe();
    }

    /// A helper that writes no GPR called from the block body: `rax` = its `ret`. Copies in
    /// caller-saved registers are gone.
    pub(super) fn call_inline(&mut self, h: Helper) {
        self.call(h);
        self.cache.clobber_caller_saved();
        asm!(self.ops ; mov rax, QWORD [r12 + RET]);
    }

    /// `helper(cpu, ctx, rdx, rcx, r8)` through its thunk: the caller has set the three
    /// arguments.
    pub(super) fn call(&mut self, h: Helper) {
        self.assert_homes_current();
        let i = HELPERS
            .iter()
            .position(|&x| x == h)
            .expect("a helper with a thunk");
        self.branch_to_stub(0xe8, self.stubs.thunks[i]);
    }
}
