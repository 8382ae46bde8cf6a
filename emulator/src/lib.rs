//! ppc64emu: a multi-threaded POWER8 pseries system emulator.
