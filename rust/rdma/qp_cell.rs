// SPDX-License-Identifier: GPL-2.0

//! The QP of a queue as the data path reads it: [`QpCell`].

use super::qp::Qp;
use crate::bindings::raw;

/// The QP of a queue as the data path sees it: published by the [`super::cm::CmId`] that owns
/// the QP once the connection is up ([`super::cm::CmId::publish_qp`]), withdrawn by it before
/// the QP is destroyed.
///
/// Readers (blk-mq submission, completion handlers, the AER) use the QP without holding a
/// reference, inside an RCU read-side section ([`super::RcuReader`]). The id that published the
/// QP withdraws it, then waits for a grace period, and only then destroys it (`CmId::drop`): no
/// reader can still hold it. Only the id can publish, and it publishes in the cell its handler
/// names ([`super::cm::CmHandler::qp_cell`]), which lives as long as the handler the id keeps.
///
/// # Invariants
///
/// The pointer is null or a QP of a live `CmId` that clears it (if still published) and waits
/// for a grace period before destroying the QP.
pub(crate) struct QpCell(core::sync::atomic::AtomicPtr<raw::ib_qp>);

impl QpCell {
    /// An empty cell.
    pub(crate) const fn new() -> Self {
        Self(core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()))
    }

    /// Publishes `qp`.
    ///
    /// # Safety
    ///
    /// `qp` is live until [`QpCell::withdraw`] was called with it and an RCU grace period
    /// passed after that.
    pub(super) unsafe fn publish(&self, qp: &Qp) {
        // INVARIANT: the caller withdraws the QP and waits for a grace period before it goes.
        self.0
            .store(qp.as_raw(), core::sync::atomic::Ordering::Release);
    }

    /// Withdraws `qp` if it is the published QP (a later connection's stays).
    pub(super) fn withdraw(&self, qp: *mut raw::ib_qp) {
        let _ = self.0.compare_exchange(
            qp,
            core::ptr::null_mut(),
            core::sync::atomic::Ordering::AcqRel,
            core::sync::atomic::Ordering::Relaxed,
        );
    }

    /// The published QP, usable for the read-side section `_rcu`.
    #[inline(always)]
    pub(crate) fn get<'a>(&'a self, _rcu: super::RcuReader<'a>) -> Option<&'a Qp> {
        let p = self.0.load(core::sync::atomic::Ordering::Acquire);
        // The caller's read-side section lasts for `'a` and began before any withdrawal that
        // could have hidden `p`, so the grace period cannot end before `'a` does.
        // SAFETY: a published QP is destroyed only after it was withdrawn and a grace period
        // passed (type invariant).
        (!p.is_null()).then(|| unsafe { Qp::from_raw(p) })
    }
}
