//! The synchronisation primitives every protocol in `sync` and `accel` is written against.
//!
//! Normally parking_lot's; with the `loom` feature loom's, so the model checker explores the real
//! protocol code (kick/halt, work queues, exclusive sections) rather than a copy of it.

#[cfg(not(feature = "loom"))]
mod imp {
    pub use std::sync::Arc;
    pub use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
    pub use std::thread;

    pub type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

    /// A mutex (parking_lot: short spin, then park; eventually fair).
    #[derive(Default)]
    pub struct Mutex<T>(parking_lot::Mutex<T>);

    impl<T> Mutex<T> {
        pub fn new(t: T) -> Self {
            Self(parking_lot::Mutex::new(t))
        }
        #[inline]
        pub fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock()
        }
        #[inline]
        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            self.0.try_lock()
        }
        /// Whether it is held now: a read, which leaves the lock word's line with its
        /// holder (spinning on `try_lock` would take it away at every try).
        #[inline]
        pub fn is_locked(&self) -> bool {
            self.0.is_locked()
        }
    }

    #[derive(Default)]
    pub struct Condvar(parking_lot::Condvar);

    impl Condvar {
        pub fn new() -> Self {
            Self(parking_lot::Condvar::new())
        }
        #[inline]
        pub fn wait<T>(&self, g: &mut MutexGuard<'_, T>) {
            self.0.wait(g);
        }
        /// Waits at most `d`; returns true on timeout.
        #[inline]
        pub fn wait_for<T>(&self, g: &mut MutexGuard<'_, T>, d: std::time::Duration) -> bool {
            self.0.wait_for(g, d).timed_out()
        }
        #[inline]
        pub fn notify_all(&self) {
            self.0.notify_all();
        }
        #[inline]
        pub fn notify_one(&self) {
            self.0.notify_one();
        }
    }
}

#[cfg(feature = "loom")]
mod imp {
    pub use loom::sync::Arc;
    pub use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
    pub use loom::thread;

    /// loom's guard, held in an `Option` so that a wait can move it out and back in without
    /// a double drop when the model aborts an execution by panicking inside the wait.
    pub struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> std::ops::Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0.as_ref().unwrap()
        }
    }

    impl<T> std::ops::DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0.as_mut().unwrap()
        }
    }

    pub struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub fn new(t: T) -> Self {
            Self(loom::sync::Mutex::new(t))
        }
        pub fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().unwrap()))
        }
        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            self.0.try_lock().ok().map(|g| MutexGuard(Some(g)))
        }
        /// loom cannot tell without acquiring: "free", and the caller's `try_lock` decides.
        pub fn is_locked(&self) -> bool {
            false
        }
    }

    impl<T: Default> Default for Mutex<T> {
        fn default() -> Self {
            Self::new(T::default())
        }
    }

    #[derive(Default)]
    pub struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub fn new() -> Self {
            Self(loom::sync::Condvar::new())
        }
        pub fn wait<T>(&self, g: &mut MutexGuard<'_, T>) {
            let inner = g.0.take().expect("guard present");
            g.0 = Some(self.0.wait(inner).unwrap());
        }
        /// loom has no time: a timed wait is an untimed one.
        pub fn wait_for<T>(&self, g: &mut MutexGuard<'_, T>, _d: std::time::Duration) -> bool {
            self.wait(g);
            false
        }
        pub fn notify_all(&self) {
            self.0.notify_all();
        }
        pub fn notify_one(&self) {
            self.0.notify_one();
        }
    }
}

pub use imp::*;
