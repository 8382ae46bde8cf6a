//! Host faults as guest TLB misses, for user mode's host-guarded memory.
//!
//! When a user-mode process's pages carry host protections that mirror the guest's (see
//! `user::mem`), a translated load or store needs no TLB lookup: it checks only that the
//! address lies in the process's range and accesses `base + ea`. An access the guest may
//! not make (an unmapped page, a read-only one, a page holding translated code) faults on
//! the host instead; the `SIGSEGV` handler finds the faulting instruction among the
//! access sites of the running vCPU's code and resumes at that access's TLB-miss path,
//! which redoes it through the slow path (the guest's fault, or a store to code).
//!
//! The sites of a code region are read by the handler on the thread that runs that code,
//! and written only by that thread outside translated code (user mode is one process on
//! one vCPU), so the table needs no lock; a thread names the table of the code it is
//! running in a thread-local ([`Bound`]) only while it runs it.

use std::cell::{Cell, UnsafeCell};
use std::sync::{Once, OnceLock};

/// Access instructions (host address) and where their miss paths start, sorted by
/// address (code is placed at rising addresses until a flush, which clears the table).
#[derive(Default)]
pub struct FaultSites(UnsafeCell<Vec<(usize, usize)>>);

// SAFETY: written and read by the one thread that translates and runs the region's code
// (see the module comment); a region with sites is never shared between vCPU threads.
unsafe impl Sync for FaultSites {}

thread_local! {
    /// The site table of the code this thread is running, or null.
    static RUNNING: Cell<*const FaultSites> = const { Cell::new(std::ptr::null()) };
}

impl FaultSites {
    /// Adds the sites of one placed block, `(access, miss)` pairs of host addresses.
    ///
    /// # Safety
    /// Called by the thread that runs this table's code, outside that code.
    pub unsafe fn add(&self, sites: impl IntoIterator<Item = (usize, usize)>) {
        // SAFETY: the caller's promise: no handler reads the table meanwhile.
        let v = unsafe { &mut *self.0.get() };
        for s in sites {
            match v.last() {
                Some(&(last, _)) if last >= s.0 => {
                    let at = v.partition_point(|&(a, _)| a < s.0);
                    v.insert(at, s);
                }
                _ => v.push(s),
            }
        }
    }

    /// Forgets every site (the code region was flushed).
    ///
    /// # Safety
    /// As [`FaultSites::add`].
    pub unsafe fn clear(&self) {
        // SAFETY: as in `add`.
        unsafe { (*self.0.get()).clear() };
    }

    /// Where the access at `rip` resumes after a fault, if it is a site.
    fn miss_path(&self, rip: usize) -> Option<usize> {
        // SAFETY: only the running thread writes the table, never while its code runs.
        let v = unsafe { &*self.0.get() };
        v.binary_search_by_key(&rip, |&(a, _)| a)
            .ok()
            .map(|i| v[i].1)
    }

    /// Names this table as the one whose code the thread runs until the guard drops,
    /// installing the fault handler on first use.
    pub fn bind(&self) -> Bound {
        install_handler();
        Bound(RUNNING.replace(self))
    }
}

/// The thread's binding of a site table; restores the previous one when dropped.
pub struct Bound(*const FaultSites);

impl Drop for Bound {
    fn drop(&mut self) {
        RUNNING.set(self.0);
    }
}

/// The `SIGSEGV` action that was installed before ours (Rust's stack-overflow handler,
/// or the default), for faults that are not access sites.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static INSTALL: Once = Once::new();

fn install_handler() {
    INSTALL.call_once(|| {
        // SAFETY: plain `sigaction` calls, the new handler of the `SA_SIGINFO` signature;
        // `PREVIOUS` is set before the handler can run.
        unsafe {
            let mut previous: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut previous);
            let _ = PREVIOUS.set(previous);
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_fault as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGSEGV, &act, std::ptr::null_mut());
        }
    });
}

/// Resumes a faulting access site at its miss path; hands any other fault to the previous
/// action (async-signal-safe: one thread-local read and a binary search).
extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid `ucontext_t` to an `SA_SIGINFO` handler.
    let uc = unsafe { &mut *(ctx as *mut libc::ucontext_t) };
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize;
    let sites = RUNNING.get();
    if !sites.is_null() {
        // SAFETY: a bound table outlives its binding (`Bound`).
        if let Some(miss) = unsafe { &*sites }.miss_path(rip) {
            uc.uc_mcontext.gregs[libc::REG_RIP as usize] = miss as i64;
            return;
        }
    }
    let Some(previous) = PREVIOUS.get() else {
        return;
    };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_IGN {
        return;
    }
    if handler != libc::SIG_DFL && previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler, called as the kernel would have.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        f(sig, info, ctx);
    } else if handler != libc::SIG_DFL {
        // SAFETY: as above, a plain handler.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        f(sig);
    } else {
        // The default action: returning re-runs the access, which now kills the process.
        // SAFETY: restoring the default disposition.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_stay_sorted_and_resolve_exactly() {
        let t = FaultSites::default();
        // SAFETY: no code runs from this table.
        unsafe {
            t.add([(0x100, 0x900), (0x180, 0x980)]);
            t.add([(0x140, 0x940)]);
        }
        assert_eq!(t.miss_path(0x140), Some(0x940));
        assert_eq!(t.miss_path(0x180), Some(0x980));
        assert_eq!(t.miss_path(0x100), Some(0x900));
        assert_eq!(t.miss_path(0x141), None);
        // SAFETY: as above.
        unsafe { t.clear() };
        assert_eq!(t.miss_path(0x100), None);
    }
}
