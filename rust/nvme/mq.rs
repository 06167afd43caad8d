// SPDX-License-Identifier: GPL-2.0

//! The blk-mq side of a controller: `blk_mq_ops` dispatched to an [`MqOps`] implementation, and
//! requests whose per-request area (PDU) starts with the core's `struct nvme_request` followed by
//! the transport's data.

// The data path (issue 4) is the user of this file; until it lands only the build checks it.
#![allow(dead_code)]

use super::ctrl::{Controller, CtrlOps};
use crate::bindings::raw;
use core::marker::PhantomData;
use kernel::{prelude::*, types::Opaque};

/// blk-mq request completion status (`blk_status_t`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlkStatus(raw::blk_status_t);

impl BlkStatus {
    /// Success.
    pub(crate) const OK: Self = Self(raw::BLK_STS_OK as raw::blk_status_t);
    /// Out of resources: blk-mq retries the request later (`BLK_STS_RESOURCE`; the value is
    /// checked against the C macro at build time in `helpers.c`).
    pub(crate) const RESOURCE: Self = Self(9);
    /// I/O error (`BLK_STS_IOERR`, checked likewise).
    pub(crate) const IOERR: Self = Self(10);

    pub(crate) fn from_raw(s: raw::blk_status_t) -> Self {
        Self(s)
    }
}

/// What the timeout handler decided (`enum blk_eh_timer_return`).
pub(crate) enum TimeoutAction {
    /// The request was completed (or will be) by the handler.
    Done,
    /// Re-arm the timer: recovery will complete the request.
    ResetTimer,
}

/// The per-request area of a controller's tag sets.
///
/// `struct nvme_request` must come first: the core finds it with `nvme_req(rq)`, which casts the
/// PDU pointer.
#[repr(C)]
pub(crate) struct Pdu<D> {
    nreq: Opaque<raw::nvme_request>,
    /// The submission queue entry the core builds the command in (`nvme_req(rq)->cmd`).
    cmd: Opaque<raw::nvme_command>,
    data: D,
}

// The PDU follows `struct request` directly: it must not need a stricter alignment.
const _: () = assert!(core::mem::align_of::<Pdu<u64>>() <= core::mem::align_of::<raw::request>());

impl<D> Pdu<D> {
    /// The size to pass as the tag set's `cmd_size` with `extra` bytes after the PDU (for inline
    /// scatterlists).
    pub(crate) const fn cmd_size(extra: usize) -> u32 {
        (core::mem::size_of::<Self>() + extra) as u32
    }
}

/// Transport callbacks of a controller's tag sets.
pub(crate) trait MqOps: Sized + Send + Sync + 'static {
    /// The controller type the tag sets belong to.
    type Ctrl: CtrlOps;
    /// Transport data of each request.
    type Data: Send + Sync;
    /// What a hardware context maps to (a transport queue).
    type Queue: Send + Sync;

    /// The queue hardware context `hctx_idx` of the admin (`admin`) or I/O tag set uses. It must
    /// live as long as the controller.
    fn queue(ctrl: &Controller<Self::Ctrl>, admin: bool, hctx_idx: u32) -> &Self::Queue;

    /// Initialises the transport data of a request when the tag set is allocated.
    fn init_request(
        ctrl: &Controller<Self::Ctrl>,
        admin: bool,
        hctx_idx: u32,
    ) -> impl PinInit<Self::Data, Error>;

    /// Submits a request.
    fn queue_rq(queue: &Self::Queue, rq: &Request<Self>, last: bool) -> BlkStatus;

    /// Completes a request on the submitting CPU (after `Request::try_complete`).
    fn complete(rq: &Request<Self>);

    /// A request timed out.
    fn timeout(rq: &Request<Self>) -> TimeoutAction;

    /// Polls a poll queue; returns the number of completions.
    fn poll(queue: &Self::Queue) -> i32;

    /// How many hardware queues of each type (default, read, poll) the I/O tag set has, for
    /// `nvmf_map_queues`.
    fn io_queues(ctrl: &Controller<Self::Ctrl>) -> [u32; raw::hctx_type_HCTX_MAX_TYPES as usize];
}

/// A request of a controller's tag set, borrowed while blk-mq hands it to the transport.
///
/// # Invariants
///
/// `self.0` is a request of a tag set whose ops are `Vtable<M, _>`, so its PDU is a
/// `Pdu<M::Data>` with initialised data, and its hardware context's `driver_data` is a
/// `M::Queue`.
#[repr(transparent)]
pub(crate) struct Request<M: MqOps>(Opaque<raw::request>, PhantomData<M>);

impl<M: MqOps> Request<M> {
    /// # Safety
    ///
    /// `rq` must be a request as in the type invariant, valid for `'a`.
    unsafe fn from_raw<'a>(rq: *mut raw::request) -> &'a Self {
        // SAFETY: repr(transparent); validity is the caller's guarantee.
        unsafe { &*rq.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut raw::request {
        self.0.get()
    }

    fn pdu(&self) -> *mut Pdu<M::Data> {
        // SAFETY: the request is valid (type invariant).
        unsafe { raw::rnvme_blk_mq_rq_to_pdu(self.as_raw()).cast() }
    }

    /// The transport data of the request.
    pub(crate) fn data(&self) -> &M::Data {
        // SAFETY: the PDU's data was initialised by `init_request` (type invariant) and lives
        // as long as the tag set, which outlives the borrow of the request.
        unsafe { &(*self.pdu()).data }
    }

    /// The request's tag.
    pub(crate) fn tag(&self) -> i32 {
        // SAFETY: the request is valid (type invariant); the tag is fixed while it is in flight.
        unsafe { (*self.as_raw()).tag }
    }

    /// Marks the request started (`nvme_start_request`).
    pub(crate) fn start(&self) {
        // SAFETY: the request was handed to `queue_rq` (type invariant).
        unsafe { raw::rnvme_nvme_start_request(self.as_raw()) };
    }

    /// Records the completion `status` (as in the CQE, phase bit included) and `result`, and
    /// completes the request, remotely if blk-mq wants that. Returns `false` when the caller must
    /// complete it locally with [`Request::complete_local`].
    pub(crate) fn try_complete(&self, status: u16, result: u64) -> bool {
        // SAFETY: an all-zero union is valid; then the 64-bit member is set.
        let mut r: raw::nvme_completion_nvme_result = unsafe { core::mem::zeroed() };
        r.u64_ = core::mem::ManuallyDrop::new(result);
        // SAFETY: the request is in flight (type invariant).
        unsafe { raw::rnvme_nvme_try_complete_req(self.as_raw(), status, r) }
    }

    /// Ends the request with the status recorded by [`Request::try_complete`] (`nvme_complete_rq`).
    pub(crate) fn complete_local(&self) {
        // SAFETY: the request is being completed by its owner (type invariant).
        unsafe { raw::nvme_complete_rq(self.as_raw()) };
    }
}

/// The `blk_mq_ops` of `M`'s admin (`ADMIN = true`) or I/O tag set.
pub(crate) struct Vtable<M, const ADMIN: bool>(PhantomData<M>);

impl<M: MqOps, const ADMIN: bool> Vtable<M, ADMIN> {
    /// The ops table (a promoted constant: `&Vtable::<M, A>::OPS` is `'static`).
    pub(crate) const OPS: raw::blk_mq_ops = raw::blk_mq_ops {
        queue_rq: Some(Self::queue_rq_cb),
        commit_rqs: None,
        queue_rqs: None,
        get_budget: None,
        put_budget: None,
        set_rq_budget_token: None,
        get_rq_budget_token: None,
        timeout: Some(Self::timeout_cb),
        poll: if ADMIN { None } else { Some(Self::poll_cb) },
        complete: Some(Self::complete_cb),
        init_hctx: Some(Self::init_hctx_cb),
        exit_hctx: None,
        init_request: Some(Self::init_request_cb),
        exit_request: Some(Self::exit_request_cb),
        cleanup_rq: None,
        busy: None,
        map_queues: if ADMIN {
            None
        } else {
            Some(Self::map_queues_cb)
        },
        show_rq: None,
    };

    /// # Safety
    ///
    /// `set` is one of the controller's tag sets (its `driver_data` is the `nvme_ctrl` of a
    /// live `Controller<M::Ctrl>`, as `nvme_alloc_*_tag_set` sets it).
    unsafe fn ctrl<'a>(set: *mut raw::blk_mq_tag_set) -> &'a Controller<M::Ctrl> {
        // SAFETY: per the caller, `driver_data` is the controller, which outlives its tag sets.
        unsafe { Controller::from_raw((*set).driver_data.cast()) }
    }

    /// # Safety
    ///
    /// Called by blk-mq for a hardware context of one of our tag sets; `data` is the set's
    /// `driver_data`.
    unsafe extern "C" fn init_hctx_cb(
        hctx: *mut raw::blk_mq_hw_ctx,
        data: *mut kernel::ffi::c_void,
        idx: u32,
    ) -> kernel::ffi::c_int {
        // SAFETY: `data` is the tag set's `driver_data`, the controller (see `ctrl`).
        let ctrl = unsafe { Controller::<M::Ctrl>::from_raw(data.cast()) };
        let q: *const M::Queue = M::queue(ctrl, ADMIN, idx);
        // SAFETY: `hctx` is valid; the queue lives as long as the controller, which outlives
        // the hardware contexts of its tag sets.
        unsafe { (*hctx).driver_data = q.cast_mut().cast() };
        0
    }

    /// # Safety
    ///
    /// Called by blk-mq for a request of one of our tag sets whose PDU is `cmd_size` long.
    unsafe extern "C" fn init_request_cb(
        set: *mut raw::blk_mq_tag_set,
        rq: *mut raw::request,
        hctx_idx: u32,
        _numa: kernel::ffi::c_int,
    ) -> kernel::ffi::c_int {
        // SAFETY: blk-mq passes one of our tag sets (see `ctrl`).
        let ctrl = unsafe { Self::ctrl(set) };
        // SAFETY: `rq` is valid; its PDU has room for `Pdu<M::Data>` (cmd_size).
        let pdu = unsafe { raw::rnvme_blk_mq_rq_to_pdu(rq).cast::<Pdu<M::Data>>() };
        // SAFETY: the PDU is zeroed by blk-mq; `nreq` takes the controller pointer as the C
        // driver sets it, and `data` is initialised in place and never moves (the PDU is
        // allocated once with the tag set).
        unsafe {
            (*(*pdu).nreq.get()).ctrl = ctrl.ctrl().as_raw();
            (*(*pdu).nreq.get()).cmd = (*pdu).cmd.get();
            let init = M::init_request(ctrl, ADMIN, hctx_idx);
            match init.__init(&raw mut (*pdu).data) {
                Ok(()) => 0,
                Err(e) => e.to_errno(),
            }
        }
    }

    /// # Safety
    ///
    /// Called by blk-mq once for a request initialised by `init_request_cb`.
    unsafe extern "C" fn exit_request_cb(
        _set: *mut raw::blk_mq_tag_set,
        rq: *mut raw::request,
        _hctx_idx: u32,
    ) {
        // SAFETY: `rq` is valid and its data was initialised by `init_request_cb`; blk-mq calls
        // this once, when freeing the request.
        unsafe {
            let pdu = raw::rnvme_blk_mq_rq_to_pdu(rq).cast::<Pdu<M::Data>>();
            core::ptr::drop_in_place(&raw mut (*pdu).data);
        }
    }

    /// # Safety
    ///
    /// Called by blk-mq with a hardware context set up by `init_hctx_cb` and one of its requests.
    unsafe extern "C" fn queue_rq_cb(
        hctx: *mut raw::blk_mq_hw_ctx,
        bd: *const raw::blk_mq_queue_data,
    ) -> raw::blk_status_t {
        // SAFETY: `driver_data` was set by `init_hctx_cb` to a queue that outlives the call;
        // `bd->rq` is a request of our tag set.
        let (q, rq, last) = unsafe {
            (
                &*(*hctx).driver_data.cast::<M::Queue>(),
                Request::<M>::from_raw((*bd).rq),
                (*bd).last,
            )
        };
        M::queue_rq(q, rq, last).0
    }

    /// # Safety
    ///
    /// Called by blk-mq with a request of one of our tag sets.
    unsafe extern "C" fn complete_cb(rq: *mut raw::request) {
        // SAFETY: blk-mq completes a request of our tag set.
        M::complete(unsafe { Request::<M>::from_raw(rq) });
    }

    /// # Safety
    ///
    /// Called by blk-mq with a timed-out request of one of our tag sets.
    unsafe extern "C" fn timeout_cb(rq: *mut raw::request) -> raw::blk_eh_timer_return {
        // SAFETY: blk-mq passes a timed-out request of our tag set.
        match M::timeout(unsafe { Request::<M>::from_raw(rq) }) {
            TimeoutAction::Done => raw::blk_eh_timer_return_BLK_EH_DONE,
            TimeoutAction::ResetTimer => raw::blk_eh_timer_return_BLK_EH_RESET_TIMER,
        }
    }

    /// # Safety
    ///
    /// Called by blk-mq with our I/O tag set.
    unsafe extern "C" fn map_queues_cb(set: *mut raw::blk_mq_tag_set) {
        // SAFETY: blk-mq passes one of our tag sets (see `ctrl`).
        let ctrl = unsafe { Self::ctrl(set) };
        let mut q = M::io_queues(ctrl);
        // SAFETY: `set` and the controller are valid; `q` has HCTX_MAX_TYPES entries.
        unsafe { raw::nvmf_map_queues(set, ctrl.ctrl().as_raw(), q.as_mut_ptr()) };
    }

    /// # Safety
    ///
    /// Called by blk-mq with a hardware context set up by `init_hctx_cb`.
    unsafe extern "C" fn poll_cb(
        hctx: *mut raw::blk_mq_hw_ctx,
        _iob: *mut raw::io_comp_batch,
    ) -> kernel::ffi::c_int {
        // SAFETY: `driver_data` was set by `init_hctx_cb`.
        M::poll(unsafe { &*(*hctx).driver_data.cast::<M::Queue>() })
    }
}
