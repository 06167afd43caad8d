// SPDX-License-Identifier: GPL-2.0

//! A QP's receive ring: the buffers the peer's SENDs land in, each with its completion entry and
//! the owner's data. The ring is part of the resources the QP's [`super::cm::CmId`] owns (see
//! [`super::cm::QpResources`]): it is armed for the QP when the QP is created and freed only
//! after the QP is destroyed, so no buffer or entry can go while the HCA may still write it.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    qp::{self, Cqe, CqeDone, HasCqe, Qp, Wc},
    verbs::{DeviceRef, DmaBuf, DmaDir, PollCtx},
    Device, RcuReader,
};
use crate::bindings::compat::prelude::*;
use crate::bindings::raw;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// Handles the receive completions of a [`RecvRing`]'s entries. Runs in the CQ's polling
/// context (softirq, or process context for a direct CQ): it must not sleep.
pub(crate) trait RecvDone: Send + Sync + Sized + 'static {
    /// A receive into `entry` completed (successfully or not); `rcu` gives the handler an RCU
    /// read-side section when it needs one (to repost the entry, or to use the QP of a
    /// [`super::qp_cell::QpCell`]).
    fn done(entry: &RecvEntry<Self>, wc: &Wc, rcu: RecvRcu<'_>);
}

/// The RCU read-side section of a receive completion's handler, made only by the entry's
/// completion trampoline from what the entry was armed with: where its CQ is polled.
///
/// # Invariants
///
/// It exists only during the completion callback of a [`RecvEntry`] armed for a QP whose CQ is
/// polled directly (`direct`) or in softirq context (`!direct`), for `'a`.
#[derive(Clone, Copy)]
pub(crate) struct RecvRcu<'a> {
    direct: bool,
    _p: PhantomData<(&'a (), *mut ())>,
}

impl RecvRcu<'_> {
    /// Runs `f` in an RCU read-side section. A softirq CQ's callbacks run with bottom halves
    /// disabled, which `synchronize_rcu` waits for: nothing to take. A direct CQ's run in process
    /// context ([`super::verbs::PollCell::poll`], or `ib_drain_qp` itself): `rcu_read_lock` is
    /// taken here. Only the receive handler pays for the test, not every completion.
    #[inline(always)]
    pub(crate) fn with<R>(self, f: impl FnOnce(RcuReader<'_>) -> R) -> R {
        if self.direct {
            let g = kernel::sync::rcu::read_lock();
            f(RcuReader::of(&g))
        } else {
            // SAFETY: the callback runs in softirq context (type invariant: the CQ is polled by
            // ib_core's irq_poll handler) with bottom halves disabled, for longer than `f`.
            f(unsafe { RcuReader::assume() })
        }
    }
}

/// One receive buffer of a [`RecvRing`].
///
/// # Invariants
///
/// `qp` is null or the QP the ring was armed for, which is live until it is cleared and an RCU
/// grace period passed: the owning `CmId` sets it when it creates the QP and, before destroying
/// the QP, clears it ([`RecvRing::disarm`]) and waits for a grace period. `direct` says whether
/// that QP's CQ is polled directly (else in softirq context); it is set when the entry is armed,
/// before the entry is posted, and the entry is posted only on that QP.
pub(crate) struct RecvEntry<T> {
    cqe: Cqe,
    buf: DmaBuf,
    qp: AtomicPtr<raw::ib_qp>,
    direct: AtomicBool,
    data: T,
}

// SAFETY: the offset is the compiler's, of the `Cqe` field `cqe`.
unsafe impl<T> HasCqe<0> for RecvEntry<T> {
    const OFFSET: usize = core::mem::offset_of!(Self, cqe);
}

impl<T: RecvDone> CqeDone<0> for RecvEntry<T> {
    #[inline(always)]
    fn done(this: &Self, wc: &Wc) {
        // INVARIANT: this is the completion of `this`, posted on the QP it was armed for, whose
        // CQ `direct` describes (set before the post, which orders it before this callback).
        let rcu = RecvRcu {
            direct: this.direct.load(Ordering::Relaxed),
            _p: PhantomData,
        };
        T::done(this, wc, rcu);
    }
}

impl<T> RecvEntry<T> {
    /// The owner's data of this buffer.
    pub(crate) fn data(&self) -> &T {
        &self.data
    }

    /// Reads what the device wrote into the buffer (synced for the CPU during `f`).
    pub(crate) fn read<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        self.buf.read(f)
    }

    /// Posts the buffer for the next receive on the ring's QP (`ENOTCONN` before the QP exists or
    /// after it is gone), inside the read-side section `_rcu`.
    pub(crate) fn post(&self, _rcu: super::RcuReader<'_>) -> Result {
        let p = self.qp.load(Ordering::Acquire);
        if p.is_null() {
            return Err(ENOTCONN);
        }
        // SAFETY: a set `qp` is live until it is cleared and a grace period passed (type
        // invariant); the caller is inside a read-side section that began before any clearing
        // that could have hidden `p`, and lasts for this call.
        let qp = unsafe { Qp::from_raw(p) };
        let sge = qp::sge(
            self.buf.dma_addr(),
            self.buf.len() as u32,
            qp.local_dma_lkey(),
        );
        // SAFETY: the entry was armed with the QP (`qp` is set only then) and the buffer and
        // entry belong to the ring, which the QP's id frees only after destroying the QP.
        unsafe { qp::post_recv(qp, &self.cqe, &sge) }
    }
}

/// The receive buffers of one QP (see the module documentation).
pub(crate) struct RecvRing<T>(KVec<RecvEntry<T>>);

impl<T: RecvDone> RecvRing<T> {
    /// `n` buffers of `len` bytes mapped for `dev` (device to memory), the `i`-th with data
    /// `data(i)`. Nothing can be posted before the ring is handed to the QP's id.
    pub(crate) fn new(
        dev: &Device,
        n: u32,
        len: usize,
        mut data: impl FnMut(u32) -> T,
    ) -> Result<Self> {
        let mut v = KVec::with_capacity(n as usize, GFP_KERNEL)?;
        for i in 0..n {
            let dref = DeviceRef::get(dev).ok_or(ENODEV)?;
            v.push(
                RecvEntry {
                    cqe: Cqe::new(),
                    buf: DmaBuf::new(dref, len, DmaDir::FromDevice)?,
                    qp: AtomicPtr::new(core::ptr::null_mut()),
                    direct: AtomicBool::new(false),
                    data: data(i),
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self(v))
    }

    /// The entries.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &RecvEntry<T>> {
        self.0.iter()
    }

    /// Arms every entry for `qp`, whose receive CQ is polled as `ctx` says.
    ///
    /// # Safety
    ///
    /// `qp` is live until [`RecvRing::disarm`] and an RCU grace period after it; the ring does not move and stays alive until
    /// every receive posted from it completed or `qp` was destroyed; nothing is posted yet; `ctx`
    /// is the polling context of `qp`'s receive CQ.
    pub(super) unsafe fn arm(&self, qp: *mut raw::ib_qp, ctx: PollCtx) {
        for e in self.0.iter() {
            // SAFETY: `e.cqe` is the entry `0` of `e` (`HasCqe`), which stays in place and alive
            // as the caller guarantees for the ring; nothing is posted yet.
            unsafe { e.cqe.arm::<RecvEntry<T>, 0>() };
            // INVARIANT: `qp`'s CQ (caller), set before any post.
            e.direct.store(ctx == PollCtx::Direct, Ordering::Relaxed);
            // INVARIANT: `qp` is live until `disarm` and a grace period (caller).
            e.qp.store(qp, Ordering::Release);
        }
    }
}

impl<T> RecvRing<T> {
    /// Stops posting: call before the QP is destroyed, and wait for an RCU grace period between.
    pub(super) fn disarm(&self) {
        for e in self.0.iter() {
            // INVARIANT: cleared before the QP goes.
            e.qp.store(core::ptr::null_mut(), Ordering::Release);
        }
    }
}
