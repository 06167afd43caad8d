// SPDX-License-Identifier: GPL-2.0

//! Queue pairs, work requests and completions.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/mr_pool.h`](srctree/include/rdma/mr_pool.h)

use crate::bindings::compat::prelude::*;
use crate::bindings::{raw, to_result};
use kernel::{str::CStr, types::Opaque};

mod wr;
pub(super) use wr::sge;
pub(crate) use wr::{ChainItem, RegWr, SendWrs, SgeList, CHAIN_MAX, SEND_SGES};

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
}

/// A completion entry (`struct ib_cqe`) embedded in the object a work request belongs to.
///
/// An entry starts unarmed ([`Cqe::new`]). Only this layer arms one ([`Cqe::arm`], unsafe), and
/// only inside an object that outlives every work request posted with it: a receive ring owned
/// by the QP's [`super::cm::CmId`] ([`super::recv::RecvRing`]), a request's PDU (the tag set
/// outlives the queues), a controller (the AER's SEND). The posting functions refuse an unarmed
/// entry (`EINVAL`), so safe code cannot hand the HCA an entry of its own that dies first.
#[repr(transparent)]
pub(crate) struct Cqe(Opaque<raw::ib_cqe>);

// SAFETY: the entry is only written (`arm`) while no work request references it, and only read
// by ib_core's poller for a posted request: sharing it between threads is sound.
unsafe impl Sync for Cqe {}
// SAFETY: see `Sync`; the entry holds no thread-bound state.
unsafe impl Send for Cqe {}

impl Cqe {
    /// An unarmed entry: it cannot be posted until this layer arms it.
    pub(crate) const fn new() -> Self {
        Self(Opaque::new(raw::ib_cqe { done: None }))
    }

    /// Arms the entry so that its completion calls `T::done` for the `T` containing it.
    ///
    /// # Safety
    ///
    /// `self` is the `ID` entry of a `T` (at `T::OFFSET`), and that `T` stays at its address and
    /// alive until every work request posted with the entry completed or its QP was destroyed.
    /// No work request referencing the entry is outstanding.
    pub(crate) unsafe fn arm<T: CqeDone<ID>, const ID: u64>(&self) {
        // SAFETY: no work request references the entry (caller), so ib_core does not read it
        // concurrently; a later post is a release point that publishes the write.
        unsafe { (*self.0.get()).done = Some(done_cb::<T, ID>) };
    }

    /// Whether the entry was armed (only armed entries may be posted).
    fn armed(&self) -> bool {
        // SAFETY: the entry is valid for the borrow; `done` is written only by `arm`, before the
        // entry is shared with a poster.
        unsafe { (*self.0.get()).done.is_some() }
    }

    pub(crate) fn as_raw(&self) -> *mut raw::ib_cqe {
        self.0.get()
    }
}

/// Types that embed a [`Cqe`] (distinguished by `ID` when there are several).
///
/// # Safety
///
/// `OFFSET` is the byte offset of a `Cqe` field of `Self` (`core::mem::offset_of!`).
pub(crate) unsafe trait HasCqe<const ID: u64> {
    /// Offset of the entry within `Self`.
    const OFFSET: usize;
}

/// Completion handler of the [`Cqe`] `ID` of `Self`. Runs in the CQ's polling context (softirq
/// for pool CQs): it must not sleep.
pub(crate) trait CqeDone<const ID: u64>: HasCqe<ID> + Sized + Sync {
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
    let wc = unsafe { &*wc.cast::<Wc>() };
    // No RCU section here: a receive's handler, the one that needs it, gets it from its entry
    // (`recv::RecvRcu`), and a SEND's pays nothing for it. (C's handlers are the callbacks
    // themselves, with nothing around them.) One call site, so that the handler is inlined here,
    // as C's handler is the callback itself.
    T::done(this, wc);
}

/// The asynchronous event handler of the QPs created by [`super::cm::CmIdLocked::create_qp`]
/// (`ib_qp_init_attr.event_handler`): logs the event as the C driver's `nvme_rdma_qp_event`
/// does, at debug level. It may run in atomic context (the provider's event path): it only
/// prints.
///
/// # Safety
///
/// Called by ib_core with an event that is valid for the duration of the call.
pub(super) unsafe extern "C" fn qp_event(
    event: *mut raw::ib_event,
    _context: *mut kernel::ffi::c_void,
) {
    // SAFETY: `event` is valid during the call (caller).
    let ev = unsafe { (*event).event };
    // SAFETY: ib_event_msg returns a static string for any value.
    let msg = unsafe { CStr::from_char_ptr(raw::ib_event_msg(ev)) };
    pr_debug!("QP event {} ({})\n", msg.to_str().unwrap_or("?"), ev);
}

/// A scatter/gather element of a work request.
pub(crate) type Sge = raw::ib_sge;

/// Posts a receive of one buffer.
///
/// # Safety
///
/// The memory described by `sge` and the object containing `cqe` must stay valid until the
/// completion ran or the QP was drained.
#[inline(always)]
pub(super) unsafe fn post_recv(qp: &Qp, cqe: &Cqe, sge: &Sge) -> Result {
    // SAFETY: an all-zero recv WR is valid.
    let mut wr: raw::ib_recv_wr = unsafe { core::mem::zeroed() };
    wr.__bindgen_anon_1.wr_cqe = core::mem::ManuallyDrop::new(cqe.as_raw());
    wr.sg_list = core::ptr::from_ref(sge).cast_mut();
    wr.num_sge = 1;
    let q = qp.as_raw();
    // `ib_post_recv` (a static inline): the provider's `post_recv`, called here directly.
    let mut bad: *const raw::ib_recv_wr = core::ptr::null();
    // SAFETY: the QP is live, so is its device, whose ops are fixed while it is registered.
    let Some(post) = (unsafe { (*(*q).device).ops.post_recv }) else {
        return Err(EOPNOTSUPP);
    };
    // SAFETY: the QP is live; `wr` and `sge` are valid for the call (the provider copies them);
    // the buffer and entry lifetimes are the caller's guarantee.
    to_result(unsafe { post(q, &wr, &mut bad) })
}

impl Qp {
    /// The device the QP belongs to.
    pub(crate) fn device(&self) -> &super::Device {
        // SAFETY: the QP is live (type invariant) and holds its device registered.
        unsafe { super::Device::from_raw((*self.as_raw()).device) }
    }

    /// The lkey for local DMA of memory mapped with the device's DMA API (the QP's PD's).
    pub(crate) fn local_dma_lkey(&self) -> u32 {
        // SAFETY: the QP is live (type invariant) and keeps its PD, whose lkey never changes.
        unsafe { (*(*self.as_raw()).pd).local_dma_lkey }
    }

    /// Fills the QP's pool of fast-registration MRs with `nr` MRs of up to `max_pages` pages.
    /// The pool is emptied by the owning [`super::cm::CmId`] before it destroys the QP.
    pub(crate) fn mr_pool_init(&self, nr: u32, max_pages: u32) -> Result {
        // SAFETY: the QP is live (type invariant); `rdma_mrs` was initialised at QP creation.
        to_result(unsafe {
            raw::ib_mr_pool_init(
                self.as_raw(),
                &raw mut (*self.as_raw()).rdma_mrs,
                nr as i32,
                raw::ib_mr_type_IB_MR_TYPE_MEM_REG,
                max_pages,
                0,
            )
        })
    }

    /// Takes an MR from the pool (`None`: the pool is empty). The MR goes back to the pool when
    /// it is dropped.
    pub(crate) fn mr_get(&self) -> Option<Mr> {
        // SAFETY: the QP is live (type invariant); its pool was initialised with the QP (the
        // helper calls ib_mr_pool_get on `rdma_mrs`, which takes the pool lock).
        let p = unsafe { raw::rnvme_ib_mr_pool_get(self.as_raw()) };
        // INVARIANT: `p` was taken from this QP's pool; the QP's owner keeps it live until every
        // MR of its pool was dropped (see `Mr`).
        core::ptr::NonNull::new(p).map(|mr| Mr {
            mr,
            qp: self.as_raw(),
        })
    }

    /// Posts a signalled SEND of `sges`, completing into `send`, with a work request built for
    /// this one post (the controller's Asynchronous Event Request; a request's SEND is posted
    /// from its PDU, [`SendWrs::post`]).
    ///
    /// Everything posted is checked to be this QP's: the SGEs were built for it from DMA
    /// mappings of its device with its PD's lkey ([`SgeList`]), and only armed entries are
    /// accepted (see [`Cqe`]): their owners outlive the work requests. What remains is the one
    /// rule no type here can carry (the kernel crate's DMA types have it too): what the device
    /// was handed stays mapped until the completions ran or the QP was drained.
    pub(crate) fn post_send<const N: usize>(&self, send: &Cqe, sges: &SgeList<N>) -> Result {
        if !send.armed() || !sges.is_for(self) {
            return Err(EINVAL);
        }
        let sges = sges.as_slice();
        // SAFETY: an all-zero WR is valid.
        let mut wr: raw::ib_send_wr = unsafe { core::mem::zeroed() };
        wr.__bindgen_anon_1.wr_cqe = core::mem::ManuallyDrop::new(send.as_raw());
        wr.sg_list = sges.as_ptr().cast_mut();
        wr.num_sge = sges.len() as i32;
        wr.opcode = raw::ib_wr_opcode_IB_WR_SEND;
        wr.send_flags = raw::ib_send_flags_IB_SEND_SIGNALED;
        // SAFETY: the QP is live; `wr` and the SGEs live on this stack frame for the call
        // (providers copy WRs and SGE lists); the entry is armed, so its owner outlives the
        // completion (see `Cqe`); the memory lifetime is the caller's duty above.
        to_result(unsafe { raw::rnvme_ib_post_send(self.as_raw(), &wr) })
    }

    /// Posts a signalled local invalidation of `rkey`, completing into `cqe`.
    pub(crate) fn post_local_inv(&self, cqe: &Cqe, rkey: u32) -> Result {
        if !cqe.armed() {
            return Err(EINVAL);
        }
        // SAFETY: an all-zero WR is valid.
        let mut wr: raw::ib_send_wr = unsafe { core::mem::zeroed() };
        wr.__bindgen_anon_1.wr_cqe = core::mem::ManuallyDrop::new(cqe.as_raw());
        wr.opcode = raw::ib_wr_opcode_IB_WR_LOCAL_INV;
        wr.send_flags = raw::ib_send_flags_IB_SEND_SIGNALED;
        wr.ex.invalidate_rkey = core::mem::ManuallyDrop::new(rkey);
        // SAFETY: the QP is live; `wr` is valid for the call; the entry is armed, so its owner
        // outlives the completion (see `Cqe`).
        to_result(unsafe { raw::rnvme_ib_post_send(self.as_raw(), &wr) })
    }
}

/// A fast-registration memory region from a QP's pool, returned to the pool when dropped
/// (`ib_mr_pool_put`), on every path: whoever holds it cannot forget to give it back.
///
/// # Invariants
///
/// `mr` was taken from the pool of `qp` with [`Qp::mr_get`] and is out of the pool. `qp` stays
/// live until the `Mr` is dropped: the QP's owner ([`super::cm::CmId`]) destroys it only after
/// every MR of its pool came back. The transport keeps an MR with the request it registered, and
/// the queue teardown ends every request (drain, then cancel) before it destroys the QP: the
/// teardown order that also makes [`QpCell`] sound. (`ib_destroy_qp` warns if MRs are still out.)
pub(crate) struct Mr {
    mr: core::ptr::NonNull<raw::ib_mr>,
    qp: *mut raw::ib_qp,
}

// SAFETY: an MR may be handed between threads; it is used by one owner at a time, and giving it
// back to its pool takes the pool's lock (with interrupts disabled), from any context.
unsafe impl Send for Mr {}
// SAFETY: `&Mr` only reads fields that change through `&mut Mr`.
unsafe impl Sync for Mr {}

impl Mr {
    /// The RDMA device the MR belongs to.
    #[inline(always)]
    pub(crate) fn device(&self) -> *mut raw::ib_device {
        // SAFETY: the MR is valid (type invariant); its device is fixed for its life.
        unsafe { (*self.mr.as_ptr()).device }
    }

    /// The current rkey.
    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: the MR is valid (type invariant).
        unsafe { (*self.mr.as_ptr()).rkey }
    }

    /// The registered I/O virtual address (after [`Mr::map`]).
    pub(crate) fn iova(&self) -> u64 {
        // SAFETY: the MR is valid (type invariant).
        unsafe { (*self.mr.as_ptr()).iova }
    }

    /// The registered length (after [`Mr::map`]).
    pub(crate) fn length(&self) -> u64 {
        // SAFETY: the MR is valid (type invariant).
        unsafe { (*self.mr.as_ptr()).length }
    }

    /// Maps the DMA-mapped scatterlist onto the MR's page list (4 KiB pages) and moves the MR to
    /// a fresh rkey. Fails if not every entry fits.
    ///
    /// `ib_map_mr_sg` then `ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey))`, as C's
    /// `nvme_rdma_map_sg_fr` (the key update is a static inline, done here rather than in a shim).
    ///
    /// # Safety
    ///
    /// `sgl` is a scatterlist of at least `nents` entries, DMA-mapped on the MR's device and
    /// valid during the call (`ib_map_mr_sg` reads each entry's DMA address and length).
    #[inline(always)]
    pub(crate) unsafe fn map(&mut self, sgl: *mut raw::scatterlist, nents: i32) -> Result {
        let mr = self.mr.as_ptr();
        // SAFETY: the MR is valid and exclusively ours (`&mut`); `sgl` is a DMA-mapped list of
        // `nents` entries, valid for the call (the caller's guarantee); no offset is returned.
        let nr = unsafe { raw::ib_map_mr_sg(mr, sgl, nents, core::ptr::null_mut(), 4096) };
        if nr < nents {
            return Err(if nr < 0 {
                Error::from_errno(nr)
            } else {
                EINVAL
            });
        }
        // SAFETY: as above; nothing else reads or writes the keys of an MR out of the pool.
        unsafe {
            let key = (((*mr).rkey.wrapping_add(1)) & 0xff) as u8;
            (*mr).lkey = ((*mr).lkey & 0xffff_ff00) | u32::from(key);
            (*mr).rkey = ((*mr).rkey & 0xffff_ff00) | u32::from(key);
        }
        Ok(())
    }

    /// The registration of the MR's current mapping, for [`SendWrs::post`].
    #[inline(always)]
    pub(crate) fn reg_wr(&self) -> RegWr {
        RegWr {
            mr: self.mr,
            qp: self.qp,
            key: self.rkey(),
        }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: `mr` came from the pool of `qp`, which is live (type invariant); no work
        // request uses the MR any more: its holder drops it once the request that registered it
        // ended (or was never posted).
        unsafe { raw::ib_mr_pool_put(self.qp, &raw mut (*self.qp).rdma_mrs, self.mr.as_ptr()) };
    }
}
