// SPDX-License-Identifier: GPL-2.0

//! Synchronisation the kernel crate does not have, shared by the RDMA and nvme layers (below both
//! of them, so that neither depends on the other for it).

/// A cell whose value is used by one party at a time, from any context (process, softirq):
/// [`TryCell::try_with`] never waits, it fails if the value is in use. For per-request state that
/// blk-mq already hands to one owner at a time: a failure reveals a protocol breach (for example a
/// target completing a command that is still being submitted) instead of a data race.
pub(crate) struct TryCell<T> {
    busy: core::sync::atomic::AtomicBool,
    v: core::cell::UnsafeCell<T>,
}

// SAFETY: access to `v` is exclusive (guarded by `busy`), so sharing needs only `T: Send`.
unsafe impl<T: Send> Sync for TryCell<T> {}

impl<T> TryCell<T> {
    /// A free cell holding `v`.
    pub(crate) const fn new(v: T) -> Self {
        Self {
            busy: core::sync::atomic::AtomicBool::new(false),
            v: core::cell::UnsafeCell::new(v),
        }
    }

    /// Whether somebody is using the value now (a snapshot: it may change at once).
    pub(crate) fn in_use(&self) -> bool {
        self.busy.load(core::sync::atomic::Ordering::Acquire)
    }

    /// Runs `f` on the value unless somebody else is using it.
    #[inline(always)]
    pub(crate) fn try_with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        use core::sync::atomic::Ordering;
        if self
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        // SAFETY: `busy` was false and is now ours: nobody else holds a reference to the value
        // until we clear it below.
        let r = f(unsafe { &mut *self.v.get() });
        self.busy.store(false, Ordering::Release);
        Some(r)
    }
}
