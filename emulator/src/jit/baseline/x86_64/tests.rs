use super::*;
use crate::cpu::msr;

fn key(pc: u64, flags: u64) -> BlockKey {
    BlockKey::new(pc, 0x7000_0000 + (pc & 0xfff), flags, false)
}

/// `addi r3,r3,1; b .-4`: the branch is a direct exit to the same page.
const LOOP: [u32; 2] = [0x3863_0001, 0x4bff_fffc];

#[test]
fn links_need_a_live_target_of_the_same_msr_state_and_a_site_of_the_region() {
    let s = Shared::new().unwrap();
    let f = msr::SF | msr::LE;
    let a = s.translate(0x1000, key(0x1000, f), &LOOP, None).unwrap();
    let b = s.translate(0x2000, key(0x2000, f), &LOOP, None).unwrap();
    // An aligned word inside `a` stands for its jump's displacement here.
    let site = (a.entry + 16) & !3;
    let outside = Box::new(0u32);
    assert!(
        !s.link(&*outside as *const u32 as usize, b.entry, f),
        "not in the code region"
    );
    assert!(!s.link(site + 1, b.entry, f), "misaligned");
    assert!(!s.link(site, b.entry, f | msr::PR), "other MSR state");
    assert!(!s.link(site, b.entry + 16, f), "not a block");
    // SAFETY: reading an aligned word of the region.
    let word = |p: usize| unsafe { *(p as *const u32) };
    assert!(s.link(site, b.entry, f));
    assert_eq!(word(site) as i32 as i64, b.entry as i64 - (site as i64 + 4));
    s.kill(b.entry);
    assert_eq!(
        word(site),
        0,
        "unlinked: the jump falls through to its stub"
    );
    assert!(!s.link(site, b.entry, f), "dead target");
}

#[test]
fn flush_empties_the_region_and_keeps_the_trampoline() {
    let s = Shared::new().unwrap();
    let f = msr::SF;
    let a = s.translate(0x1000, key(0x1000, f), &LOOP, Some(3)).unwrap();
    assert!(s.used() >= a.code_bytes && a.native == 2 && a.fallbacks == 0);
    s.flush();
    assert_eq!(s.used(), 0);
    let b = s.translate(0x1000, key(0x1000, f), &LOOP, Some(3)).unwrap();
    assert_eq!(b.entry, a.entry, "the same place again");
}

#[test]
fn thirty_two_bit_mode_runs_everything_in_the_interpreter() {
    let s = Shared::new().unwrap();
    let t = s
        .translate(0x1000, key(0x1000, msr::LE), &LOOP, None)
        .unwrap();
    assert_eq!((t.native, t.fallbacks), (0, 2));
}

#[test]
fn barriers_and_trap_immediates_are_native_but_ptesync() {
    let s = Shared::new().unwrap();
    // sync; lwsync; eieio; twi 0,r0,0; tdi 4,r3,0
    let t = s
        .translate(
            0x1000,
            key(0x1000, msr::SF),
            &[
                0x7c00_04ac,
                0x7c20_04ac,
                0x7c00_06ac,
                0x0c00_0000,
                0x0883_0000,
            ],
            None,
        )
        .unwrap();
    assert_eq!((t.native, t.fallbacks), (5, 0));
    // ptesync
    let t = s
        .translate(0x2000, key(0x2000, msr::SF), &[0x7c40_04ac], None)
        .unwrap();
    assert_eq!((t.native, t.fallbacks), (0, 1));
}

/// The out-of-line part is placed 16-byte aligned and starts so in the emitted code: the
/// jumps it links (side exits' taken ways) keep their displacements 4-byte aligned.
#[test]
fn the_out_of_line_part_starts_aligned_as_it_is_placed() {
    let s = Shared::new().unwrap();
    let f = msr::SF | msr::LE;
    // `cmpdi r3,0; beq +8; addi r3,r3,1; b .-12`: a side exit, a load-free body.
    let words = [0x2c23_0000, 0x4182_0008, 0x3863_0001, 0x4bff_fff4];
    let space = *s.space.lock();
    let e = emit::emit(
        0x1000,
        key(0x1000, f),
        &words,
        None,
        &s.stubs,
        s.probe(f),
        space,
    );
    let (hot, cold) = e.parts();
    assert!(!cold.is_empty());
    assert_eq!(hot.len() % 16, 0);
    assert_eq!(hot.last(), Some(&0xcc), "the hot part ends in int3");
}
