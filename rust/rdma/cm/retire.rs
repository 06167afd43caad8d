// SPDX-License-Identifier: GPL-2.0

//! The end of a [`CmId`]: its id destroyed (unless rdma_cm did) and its QP withdrawn
//! ([`CmId::retire`]), then, after an RCU grace period, its QP destroyed and its context released
//! ([`Retired::finish`]), alone (`drop`, [`CmId::close`]) or for several ids with one grace period
//! ([`CmId::drop_all`]).

use super::{CmHandler, CmId, Ctx, QpResources};
use crate::bindings::raw;
use core::marker::PhantomData;
use kernel::{prelude::*, sync::Arc, types::ForeignOwnable};

/// An id on its way out: the rdma_cm id is destroyed and the QP withdrawn from the data path;
/// the QP and the context go in [`Retired::finish`], after an RCU grace period.
///
/// # Invariants
///
/// `ctx` is the foreign form of the id's `Arc<Ctx<H>>`, owned by this object; the id's handler
/// no longer runs, or (an id rdma_cm destroyed) runs on a reference of its own; `qp` is null or the id's QP, withdrawn from its cell (if it was published), on
/// which nothing posts any more and whose every MR is back in its pool.
struct Retired<H: CmHandler> {
    qp: *mut raw::ib_qp,
    ctx: *mut core::ffi::c_void,
    _h: PhantomData<Arc<Ctx<H>>>,
}

impl<H: CmHandler> Retired<H> {
    /// Waits for a grace period (if there is a QP), then [`Retired::finish`]; returns how many
    /// it waited for.
    fn finish_alone(self) -> usize {
        let wait = !self.qp.is_null();
        if wait {
            // Whoever read the QP from the cell or a receive entry before they were cleared did
            // so inside an RCU read-side section (`RcuReader`): wait until all have ended.
            crate::bindings::compat::synchronize_rcu();
        }
        // SAFETY: a grace period passed since `self` was made, or there is no QP to wait for.
        unsafe { self.finish() };
        usize::from(wait)
    }

    /// Destroys the QP (if any) and releases the context.
    ///
    /// # Safety
    ///
    /// An RCU grace period has passed since `self` was made ([`CmId::retire`]): whoever read
    /// the QP from the cell or a receive entry before the withdrawal did so inside a read-side
    /// section (`RcuReader`), which has ended.
    unsafe fn finish(self) {
        if !self.qp.is_null() {
            // The MR pool is emptied first, then the QP is destroyed with the verbs call since
            // the id no longer exists (as the C driver does).
            // SAFETY: the QP was created on the id and every MR taken from its pool is back in
            // it (type invariant: a `qp::Mr` returns itself when dropped, and the owner of the
            // id ended the requests holding them, by drain and cancel, before dropping it).
            unsafe { raw::ib_mr_pool_destroy(self.qp, &raw mut (*self.qp).rdma_mrs) };
            // SAFETY: nothing references the QP: the id is gone, `qp()` borrows ended with it,
            // and the data path's readers ended with the grace period (the caller's promise).
            unsafe { raw::rnvme_ib_destroy_qp(self.qp) };
        }
        // SAFETY: `ctx` is the foreign form of our `Arc<Ctx<H>>` (type invariant), which no
        // handler borrows any more (one still running holds a reference of its own).
        drop(unsafe { <Arc<Ctx<H>> as ForeignOwnable>::from_foreign(self.ctx.cast()) });
    }
}

impl<H: CmHandler> CmId<H> {
    /// Stops event delivery, destroys the rdma_cm id and withdraws the QP from the data path.
    ///
    /// # Safety
    ///
    /// Called once, from `drop` or [`CmId::drop_all`]: the id is not used afterwards.
    unsafe fn retire(&mut self) -> Retired<H> {
        let ctx = self.ctx.as_ptr();
        if !self.gone() {
            // SAFETY: the id is live (type invariant: not gone; and the caller's promise). Under
            // the handler mutex: stop event delivery, after which no handler creates a QP.
            unsafe {
                raw::rdma_lock_handler(self.raw());
                self.ctx()
                    .closing
                    .store(true, core::sync::atomic::Ordering::Relaxed);
                raw::rdma_unlock_handler(self.raw());
            }
            // SAFETY: the caller retires the id once, so it is destroyed exactly once (not by
            // rdma_cm: it is not gone, and `&mut self` rules out parking); rdma_destroy_id waits
            // for a running handler.
            unsafe { raw::rdma_destroy_id(self.raw()) };
        }
        let res = self.ctx();
        // Read after the handler mutex (or the surrender, seen by `gone`): the last QP created.
        let qp = res.qp.load(core::sync::atomic::Ordering::Acquire);
        if let Some(r) = res.qp_res.as_ref() {
            // Nothing posts on the QP from here on.
            r.recv_ring().disarm();
        }
        if !qp.is_null() {
            let cell = res.published.load(core::sync::atomic::Ordering::Acquire);
            if !cell.is_null() {
                // SAFETY: a recorded cell is the handler's, which `res` keeps (see `publish_qp`).
                unsafe { (*cell).withdraw(qp) };
            }
        }
        // INVARIANT: the handler no longer runs (or holds its own reference: the id is gone),
        // the QP (if any) is withdrawn, and the owner ended every request holding one of its MRs
        // before dropping the id.
        Retired {
            qp,
            ctx,
            _h: PhantomData,
        }
    }

    /// [`CmId::retire`] for an id given up by value.
    fn into_retired(self) -> Retired<H> {
        let mut id = core::mem::ManuallyDrop::new(self);
        // SAFETY: `id` is retired here once and never dropped (`ManuallyDrop`) nor used again.
        let r = unsafe { id.retire() };
        // SAFETY: the handler is read out once; `id` is not used or dropped afterwards.
        drop(unsafe { core::ptr::read(&id.handler) });
        r
    }

    /// Drops the id, as `drop` does, and returns how many RCU grace periods that waited for
    /// (one with a QP, else none).
    pub(crate) fn close(self) -> usize {
        self.into_retired().finish_alone()
    }

    /// Drops `ids` as dropping each would, but with one RCU grace period for all of them
    /// between withdrawing their QPs and destroying them, rather than one each (a teardown of
    /// many queues). Returns how many grace periods it waited for: one if any id had a QP (or,
    /// without memory for the bookkeeping, one per such id, dropped one by one).
    pub(crate) fn drop_all(mut ids: KVec<Self>) -> usize {
        let Ok(mut retired) = KVec::<Retired<H>>::with_capacity(ids.len(), GFP_KERNEL) else {
            return ids.drain_all().map(Self::close).sum();
        };
        let mut waits = 0;
        for id in ids.drain_all() {
            if let Err(e) = retired.push_within_capacity(id.into_retired()) {
                // Not reached: the capacity is the number of ids.
                waits += e.0.finish_alone();
            }
        }
        if retired.iter().any(|r| !r.qp.is_null()) {
            crate::bindings::compat::synchronize_rcu();
            waits += 1;
        }
        for r in retired.drain_all() {
            // SAFETY: each was made before the grace period above, or has no QP to wait for.
            unsafe { r.finish() };
        }
        waits
    }
}

impl<H: CmHandler> Drop for CmId<H> {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and the id is not used afterwards.
        unsafe { self.retire() }.finish_alone();
    }
}
