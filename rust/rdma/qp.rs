// SPDX-License-Identifier: GPL-2.0

//! Queue pairs, work requests and completions.

// The connect and data paths (issue 4) are the users of this file.
#![allow(dead_code)]

use crate::bindings::raw;
use kernel::{error::to_result, prelude::*, str::CStr, types::Opaque};

/// Sizes of a reliable-connected QP (see [`super::cm::CmIdLocked::create_qp`]).
pub(crate) struct QpAttr {
    /// Send queue depth.
    pub(crate) max_send_wr: u32,
    /// Receive queue depth.
    pub(crate) max_recv_wr: u32,
    /// Scatter/gather entries per send.
    pub(crate) max_send_sge: u32,
    /// Scatter/gather entries per receive.
    pub(crate) max_recv_sge: u32,
    /// Opaque value reported with QP events (`qp_context`).
    pub(crate) context: *mut kernel::ffi::c_void,
}

/// A queue pair, borrowed from the [`super::cm::CmId`] that owns it.
///
/// # Invariants
///
/// `self.0` is a live QP for the duration of the borrow.
#[repr(transparent)]
pub(crate) struct Qp(Opaque<raw::ib_qp>);

impl Qp {
    /// # Safety
    ///
    /// `ptr` must be a QP that stays live for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut raw::ib_qp) -> &'a Self {
        // SAFETY: repr(transparent) over the C struct; validity is the caller's guarantee.
        unsafe { &*ptr.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut raw::ib_qp {
        self.0.get()
    }

    /// The QP number.
    pub(crate) fn num(&self) -> u32 {
        // SAFETY: the QP is live (type invariant); `qp_num` is immutable after creation.
        unsafe { (*self.as_raw()).qp_num }
    }

    /// Moves the QP to the error state and waits until every posted work request completed.
    pub(crate) fn drain(&self) {
        // SAFETY: the QP is live (type invariant); its CQ has room for the drain WRs (the
        // creator sized it with one extra entry per queue, as ib_drain_qp requires).
        unsafe { raw::ib_drain_qp(self.as_raw()) };
    }
}

/// A work completion, valid during a completion callback.
///
/// # Invariants
///
/// `self.0` is the `ib_wc` passed to the running `ib_cqe.done` callback.
#[repr(transparent)]
pub(crate) struct Wc(Opaque<raw::ib_wc>);

impl Wc {
    fn raw(&self) -> &raw::ib_wc {
        // SAFETY: valid during the callback (type invariant), which bounds the borrow.
        unsafe { &*self.0.get() }
    }

    /// Whether the work request completed successfully.
    pub(crate) fn is_ok(&self) -> bool {
        self.raw().status == raw::ib_wc_status_IB_WC_SUCCESS
    }

    /// The completion status as text.
    pub(crate) fn status_msg(&self) -> &CStr {
        // SAFETY: ib_wc_status_msg returns a static string for any status.
        unsafe { CStr::from_char_ptr(raw::ib_wc_status_msg(self.raw().status)) }
    }

    /// The raw completion status.
    pub(crate) fn status(&self) -> u32 {
        self.raw().status
    }

    /// Bytes received (receive completions).
    pub(crate) fn byte_len(&self) -> u32 {
        self.raw().byte_len
    }

    /// The rkey the peer invalidated with SEND_WITH_INVALIDATE, if it did.
    pub(crate) fn invalidated_rkey(&self) -> Option<u32> {
        let wc = self.raw();
        if wc.wc_flags & raw::ib_wc_flags_IB_WC_WITH_INVALIDATE as i32 == 0 {
            return None;
        }
        // SAFETY: `invalidate_rkey` is the valid union member when the flag is set.
        Some(unsafe { *wc.ex.invalidate_rkey })
    }

    /// The `qp_context` of the QP the completion belongs to.
    pub(crate) fn qp_context(&self) -> *mut kernel::ffi::c_void {
        // SAFETY: the QP of a completion is live during the callback.
        unsafe { (*self.raw().qp).qp_context }
    }
}

/// A completion entry (`struct ib_cqe`) embedded in the object a work request belongs to.
#[repr(transparent)]
pub(crate) struct Cqe(Opaque<raw::ib_cqe>);

impl Cqe {
    /// An entry with no callback yet (armed by [`Cqe::arm`]).
    pub(crate) const fn new() -> Self {
        Self(Opaque::new(raw::ib_cqe { done: None }))
    }

    /// Arms the entry so that its completion calls `T::done` for the `T` containing it.
    pub(crate) fn arm<T: CqeDone<ID>, const ID: u64>(&self) {
        // SAFETY: the entry is only read by the CQ poller after a work request referencing it
        // was posted, which happens after this write (post is a release point).
        unsafe { (*self.0.get()).done = Some(done_cb::<T, ID>) };
    }

    pub(crate) fn as_raw(&self) -> *mut raw::ib_cqe {
        self.0.get()
    }
}

/// Types that embed a [`Cqe`] (distinguished by `ID` when there are several).
///
/// # Safety
///
/// `OFFSET` is the byte offset of a `Cqe` field of `Self` (use [`crate::impl_has_cqe`]).
pub(crate) unsafe trait HasCqe<const ID: u64> {
    /// Offset of the entry within `Self`.
    const OFFSET: usize;
}

/// Implements [`HasCqe`] for a field.
#[macro_export]
macro_rules! impl_has_cqe {
    ($t:ty, $field:ident, $id:expr) => {
        // SAFETY: the offset is computed by the compiler for a field of type `Cqe`.
        unsafe impl $crate::rdma::qp::HasCqe<$id> for $t {
            const OFFSET: usize = {
                let _check: fn(&$t) -> &$crate::rdma::qp::Cqe = |t| &t.$field;
                core::mem::offset_of!($t, $field)
            };
        }
    };
}

/// Completion handler of the [`Cqe`] `ID` of `Self`. Runs in the CQ's polling context (softirq
/// for pool CQs): it must not sleep.
pub(crate) trait CqeDone<const ID: u64>: HasCqe<ID> + Sized {
    /// The work request completed (successfully or not).
    fn done(this: &Self, wc: &Wc);
}

/// # Safety
///
/// Called by ib_core for a completion whose `wr_cqe` is the `ID` entry of a live `T`.
unsafe extern "C" fn done_cb<T: CqeDone<ID>, const ID: u64>(
    _cq: *mut raw::ib_cq,
    wc: *mut raw::ib_wc,
) {
    // SAFETY: `wc` is valid during the callback; `wr_cqe` is the union member we posted with.
    let cqe = unsafe { *(*wc).__bindgen_anon_1.wr_cqe };
    // SAFETY: by `HasCqe`'s contract the entry is at `OFFSET` inside a `T`, which the poster
    // keeps alive until this completion ran (requirement of the posting functions).
    let this = unsafe { &*cqe.cast::<u8>().sub(T::OFFSET).cast::<T>() };
    // SAFETY: `Wc` is repr(transparent) and valid during the callback.
    T::done(this, unsafe { &*wc.cast::<Wc>() });
}

/// A scatter/gather element of a work request.
pub(crate) type Sge = raw::ib_sge;

/// Posts a receive of one buffer.
///
/// # Safety
///
/// The memory described by `sge` and the object containing `cqe` must stay valid until the
/// completion ran or the QP was drained.
pub(crate) unsafe fn post_recv(qp: &Qp, cqe: &Cqe, sge: &Sge) -> Result {
    // SAFETY: an all-zero recv WR is valid.
    let mut wr: raw::ib_recv_wr = unsafe { core::mem::zeroed() };
    wr.__bindgen_anon_1.wr_cqe = core::mem::ManuallyDrop::new(cqe.as_raw());
    wr.sg_list = core::ptr::from_ref(sge).cast_mut();
    wr.num_sge = 1;
    // SAFETY: the QP is live; `wr` and `sge` are valid for the call (the provider copies them);
    // the buffer and entry lifetimes are the caller's guarantee.
    to_result(unsafe { raw::rnvme_ib_post_recv(qp.as_raw(), &wr) })
}
