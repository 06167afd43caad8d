// SPDX-License-Identifier: GPL-2.0

//! The blk-mq side of a controller: `blk_mq_ops` dispatched to an [`MqOps`] implementation, and
//! requests whose per-request area (PDU) starts with the core's `struct nvme_request` followed by
//! the transport's data.
//!
//! C headers: [`include/linux/blk-mq.h`](srctree/include/linux/blk-mq.h),
//! [`drivers/nvme/host/nvme.h`](srctree/drivers/nvme/host/nvme.h)

use super::ctrl::{Controller, CtrlOps};
use crate::bindings::raw;
use crate::rdma::qp::{Cqe, CqeDone, HasCqe, SendWrs, Wc};
use core::marker::PhantomData;
use kernel::{prelude::*, str::CStr, types::Opaque};

pub(crate) mod batch;
mod owned;
mod vtable;
pub(crate) use owned::{Owned, Prepared};
pub(crate) use vtable::MqVtable;

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
/// PDU pointer. A `Pdu` exists only there: this module never creates one by value, it is
/// initialised in place by `init_request_cb`.
#[repr(C)]
pub(crate) struct Pdu<M: MqOps> {
    nreq: Opaque<raw::nvme_request>,
    /// The submission queue entry the core builds the command in (`nvme_req(rq)->cmd`).
    pub(super) cmd: Opaque<raw::nvme_command>,
    /// Completion entries of the request's SEND, memory registration and local invalidation.
    send_cqe: Cqe,
    reg_cqe: Cqe,
    inv_cqe: Cqe,
    /// The SEND and registration work requests, completing into `send_cqe` and `reg_cqe`.
    wrs: SendWrs,
    data: M::Data,
}

// SAFETY: a shared `&Pdu` gives out the request it belongs to (by address), the completion
// entries (`Sync`) and the data (`M::Data: Sync`); the C fields are only reached through raw
// pointers by the request's owner.
unsafe impl<M: MqOps> Sync for Pdu<M> {}

/// Identifiers of a PDU's completion entries.
const SEND: u64 = 0;
const REG: u64 = 1;
const INV: u64 = 2;

// SAFETY: the offsets are the compiler's, of the `Cqe` fields.
unsafe impl<M: MqOps> HasCqe<SEND> for Pdu<M> {
    const OFFSET: usize = core::mem::offset_of!(Self, send_cqe);
}
// SAFETY: as above.
unsafe impl<M: MqOps> HasCqe<REG> for Pdu<M> {
    const OFFSET: usize = core::mem::offset_of!(Self, reg_cqe);
}
// SAFETY: as above.
unsafe impl<M: MqOps> HasCqe<INV> for Pdu<M> {
    const OFFSET: usize = core::mem::offset_of!(Self, inv_cqe);
}

impl<M: MqOps> CqeDone<SEND> for Pdu<M> {
    #[inline(always)]
    fn done(pdu: &Self, wc: &Wc) {
        M::send_done(pdu.request(), wc);
    }
}

impl<M: MqOps> CqeDone<REG> for Pdu<M> {
    fn done(pdu: &Self, wc: &Wc) {
        M::reg_done(pdu.request(), wc);
    }
}

impl<M: MqOps> CqeDone<INV> for Pdu<M> {
    #[inline(always)]
    fn done(pdu: &Self, wc: &Wc) {
        M::inv_done(pdu.request(), wc);
    }
}

impl<M: MqOps> Pdu<M> {
    /// The PDU follows `struct request` directly: it must not need a stricter alignment.
    const ALIGNED: () =
        assert!(core::mem::align_of::<Self>() <= core::mem::align_of::<raw::request>());

    /// Bytes of the scatterlist entries kept after the PDU (`RNVME_INLINE_SG_CNT`): a request's
    /// data of that many segments is mapped without allocating (as in the C driver).
    const INLINE_SG: usize =
        raw::RNVME_INLINE_SG_CNT as usize * core::mem::size_of::<raw::scatterlist>();

    /// The size to pass as the tag set's `cmd_size`: the PDU and the inline scatterlist entries.
    pub(crate) const fn cmd_size() -> u32 {
        let () = Self::ALIGNED;
        const { assert!(core::mem::size_of::<Self>() % core::mem::align_of::<raw::scatterlist>() == 0) };
        (core::mem::size_of::<Self>() + Self::INLINE_SG) as u32
    }

    /// The request this PDU belongs to.
    fn request(&self) -> &Request<M> {
        let p = core::ptr::from_ref(self).cast::<u8>();
        // SAFETY: a `Pdu<M>` exists only in the PDU of a request of a tag set with `M`'s ops
        // (see the type), which blk-mq places right after `struct request`; the request lives
        // as long as its PDU.
        unsafe {
            Request::from_raw(
                p.sub(core::mem::size_of::<raw::request>())
                    .cast_mut()
                    .cast(),
            )
        }
    }
}

/// Transport callbacks of a controller's tag sets.
pub(crate) trait MqOps: Sized + Send + Sync + 'static {
    /// The controller type the tag sets belong to.
    type CtrlData: CtrlOps;
    /// Transport data of each request.
    type Data: Send + Sync;
    /// What a hardware context maps to (a transport queue).
    type Queue: Send + Sync;

    /// The queue hardware context `hctx_idx` of the admin (`admin`) or I/O tag set uses. It must
    /// live as long as the controller.
    fn queue(ctrl: &Controller<Self::CtrlData>, admin: bool, hctx_idx: u32) -> &Self::Queue;

    /// Initialises the transport data of a request when the tag set is allocated.
    fn init_request(
        ctrl: &Controller<Self::CtrlData>,
        admin: bool,
        hctx_idx: u32,
    ) -> impl PinInit<Self::Data, Error>;

    /// Submits a request. Runs inside an RCU read-side section (`rcu`): the tag sets are not
    /// `BLK_MQ_F_BLOCKING`.
    fn queue_rq(
        queue: &Self::Queue,
        rq: Owned<'_, Self>,
        last: bool,
        rcu: crate::rdma::RcuReader<'_>,
    ) -> BlkStatus;

    /// Submits a list of requests of one request queue, from a plug (`queue_rqs`): as
    /// `queue_rq` for each, but posting several with one call ([`batch::SendBatch`]). What it
    /// leaves in `list` ([`batch::RqList::leave`]), unstarted, blk-mq submits through
    /// `queue_rq`. Runs inside an RCU read-side section (`rcu`).
    fn queue_rqs(list: &mut batch::RqList<'_, Self>, rcu: crate::rdma::RcuReader<'_>);

    /// Completes a request on the submitting CPU (after `Request::try_complete`).
    fn complete(rq: &Request<Self>);

    /// A request timed out.
    fn timeout(rq: &Request<Self>) -> TimeoutAction;

    /// The SEND of the request's command completed (successfully or not).
    fn send_done(rq: &Request<Self>, wc: &Wc);

    /// The memory registration posted before the SEND failed (it is unsignalled otherwise).
    fn reg_done(rq: &Request<Self>, wc: &Wc);

    /// The local invalidation of the request's MR completed.
    fn inv_done(rq: &Request<Self>, wc: &Wc);

    /// Polls a poll queue; returns the number of completions.
    fn poll(queue: &Self::Queue) -> i32;

    /// How many hardware queues of each type (default, read, poll) the I/O tag set has, for
    /// `nvmf_map_queues`.
    fn io_queues(
        ctrl: &Controller<Self::CtrlData>,
    ) -> [u32; raw::hctx_type_HCTX_MAX_TYPES as usize];
}

/// A request of a controller's tag set, borrowed while blk-mq hands it to the transport.
///
/// # Invariants
///
/// `self.0` is a request of a tag set whose ops are `MqVtable<M, _>`, so its PDU is a
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

    /// # Safety
    ///
    /// As for `from_raw`: `rq` is a live request of a tag set with `M`'s ops.
    pub(super) unsafe fn from_raw_pub<'a>(rq: *mut raw::request) -> &'a Self {
        // SAFETY: forwarded to the caller.
        unsafe { Self::from_raw(rq) }
    }

    pub(crate) fn as_raw(&self) -> *mut raw::request {
        self.0.get()
    }

    /// The request's PDU (also used by `mapping`, which maps the command and data in it).
    pub(super) fn pdu(&self) -> *mut Pdu<M> {
        // `blk_mq_rq_to_pdu` (`rq + 1`), computed here rather than called on every access.
        // SAFETY: the request is valid (type invariant) and blk-mq allocates its PDU right after
        // it, so the address one `struct request` further is inside the same allocation.
        unsafe { self.as_raw().add(1).cast() }
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

    /// Records the completion `status` (as in the CQE, phase bit included) and `result`, and
    /// completes the request, remotely if blk-mq wants that. Returns `false` when the caller must
    /// complete it locally with [`Request::complete_local`].
    ///
    /// `nvme_try_complete_req`, a static inline C would inline into its receive handler: done
    /// here, calling what it calls, so the completion costs no call into a helper.
    #[inline(always)]
    pub(crate) fn try_complete(&self, status: u16, result: u64) -> bool {
        let rq = self.as_raw();
        let nreq = self.nreq();
        // SAFETY: the request is in flight and its completion is being recorded by the one that
        // ends it (type invariant, `ReqEnd`): nothing else writes its `nvme_request` now; its
        // `ctrl` was set by `init_request_cb` and outlives the request.
        unsafe {
            if (*(*nreq).ctrl).quirks
                & (raw::nvme_quirks_NVME_QUIRK_SKIP_CID_GEN as kernel::ffi::c_ulong)
                == 0
            {
                (*nreq).genctr = (*nreq).genctr.wrapping_add(1);
            }
            (*nreq).status = u16::from_le(status) >> 1;
            (*nreq).result.u64_ = core::mem::ManuallyDrop::new(result);
        }
        // Fault injection (`nvme_should_fail`), compiled in only where C has it.
        #[cfg(CONFIG_FAULT_INJECTION_DEBUG_FS)]
        // SAFETY: as above; the status is recorded.
        unsafe {
            raw::nvme_should_fail(rq)
        };
        #[cfg(CONFIG_FAIL_IO_TIMEOUT)]
        {
            // `blk_should_fake_timeout`: a queue flag read once, as `test_bit` does.
            // SAFETY: the request's queue outlives it; `queue_flags` is a word of flag bits.
            let flags = unsafe { core::ptr::read_volatile(&raw const (*(*rq).q).queue_flags) };
            if flags & (1 << raw::QUEUE_FLAG_FAIL_IO) != 0
                // SAFETY: as above.
                && unsafe { raw::__blk_should_fake_timeout((*rq).q) }
            {
                return true;
            }
        }
        // SAFETY: the request is in flight and its completion is recorded (above).
        unsafe { raw::blk_mq_complete_request_remote(rq) }
    }

    /// Ends the request with the status recorded by [`Request::try_complete`] (`nvme_complete_rq`).
    pub(crate) fn complete_local(&self) {
        // SAFETY: the request is being completed by its owner (type invariant).
        unsafe { raw::nvme_complete_rq(self.as_raw()) };
    }

    /// The controller the request belongs to.
    pub(crate) fn ctrl(&self) -> &Controller<M::CtrlData> {
        // SAFETY: `init_request_cb` set `nreq.ctrl` to the `nvme_ctrl` of the
        // `Controller<M::CtrlData>` owning the tag set, which outlives its requests.
        unsafe { Controller::from_raw((*self.nreq()).ctrl) }
    }

    /// The first bytes of the command: opcode.
    ///
    /// Read without a reference into the command: the timeout handler asks for it, and a
    /// request that times out is not the caller's to hold `&mut` into (`queue_rq` may still be
    /// setting the command up; the misbehave group's `late` test).
    pub(crate) fn opcode(&self) -> u8 {
        // SAFETY: the command lives in the PDU (type invariant); one byte is read, volatile, with
        // no reference created, so a concurrent writer is not aliased.
        unsafe { core::ptr::read_volatile((*self.pdu()).cmd.get().cast::<u8>()) }
    }

    /// Completes a timed-out request as aborted (`nvmf_complete_timed_out_request`).
    pub(crate) fn complete_timed_out(&self) {
        // SAFETY: blk-mq handed the timed-out request to the transport's timeout handler.
        unsafe { raw::rnvme_nvmf_complete_timed_out_request(self.as_raw()) };
    }

    /// The request's work requests, for a chain ([`batch::SendBatch`]).
    fn wrs(&self) -> &SendWrs {
        // SAFETY: the PDU is valid for the request's life (type invariant); `SendWrs` is only
        // written through its unsafe methods.
        unsafe { &(*self.pdu()).wrs }
    }

    /// Completion entry of the local invalidation.
    pub(crate) fn inv_cqe(&self) -> &Cqe {
        // SAFETY: the PDU is valid for the request's life (type invariant); the entries were
        // armed by `init_request_cb`.
        unsafe { &(*self.pdu()).inv_cqe }
    }

    /// Whether blk-mq may hand the request to a queue in its current state (`nvme_check_ready`:
    /// a live controller takes everything, here without a call; any other state asks the core).
    #[inline]
    pub(crate) fn check_ready(&self, queue_live: bool) -> bool {
        if self.ctrl().nvme().state() == super::State::Live {
            return true;
        }
        // SAFETY: the request is valid and its `nvme_request` was set up by `init_request_cb`.
        unsafe { raw::rnvme_nvme_check_ready((*self.nreq()).ctrl, self.as_raw(), queue_live) }
    }

    /// The generation of the command identifier (`nvme_req(rq)->genctr`).
    #[inline]
    pub(super) fn genctr(&self) -> u16 {
        // `nvme_setup_cmd` may change it on another CPU meanwhile: read once (`READ_ONCE`); the
        // caller's check of the request's state decides whether the value still applies.
        // SAFETY: the request's `nvme_request` is valid (type invariant).
        u16::from(unsafe { core::ptr::read_volatile(&raw const (*self.nreq()).genctr) })
    }

    fn nreq(&self) -> *mut raw::nvme_request {
        // SAFETY: the PDU is valid (type invariant); `nreq` is its first field.
        unsafe { (*self.pdu()).nreq.get() }
    }

    /// Whether the request's data is a special payload (`RQF_SPECIAL_PAYLOAD`: a discard's range
    /// buffer in `special_vec`).
    fn special_payload(&self) -> bool {
        // SAFETY: the request is valid (type invariant); its flags are fixed while its owner,
        // the caller, holds it (read through the pointer: blk-mq writes other fields meanwhile).
        let flags = unsafe { (*self.as_raw()).rq_flags };
        flags & (1 << raw::rqf_flags___RQF_SPECIAL_PAYLOAD) != 0
    }

    /// The number of physical data segments (0: no data; `blk_rq_nr_phys_segments`).
    #[inline]
    pub(crate) fn nr_phys_segments(&self) -> u16 {
        if self.special_payload() {
            return 1;
        }
        // SAFETY: as in `special_payload`.
        unsafe { (*self.as_raw()).nr_phys_segments }
    }

    /// Payload bytes of the request (`blk_rq_payload_bytes`).
    #[inline]
    pub(crate) fn payload_bytes(&self) -> u32 {
        if self.special_payload() {
            // SAFETY: as in `special_payload`; with RQF_SPECIAL_PAYLOAD the union holds
            // `special_vec` (blk-mq.h).
            return unsafe { (*self.as_raw()).__bindgen_anon_3.special_vec.bv_len };
        }
        // SAFETY: as in `special_payload`.
        unsafe { (*self.as_raw()).__data_len }
    }

    /// Whether the request carries a command built by its submitter (`blk_rq_is_passthrough`):
    /// its submission queue entry is filled in before `queue_rq`.
    pub(crate) fn is_passthrough(&self) -> bool {
        // SAFETY: the request is valid (type invariant).
        unsafe { raw::rnvme_rq_is_passthrough(self.as_raw()) }
    }

    /// Whether data moves from the host to the controller (`rq_data_dir() == WRITE`: an odd
    /// operation, `op_is_write(req_op())`).
    #[inline]
    pub(crate) fn is_write(&self) -> bool {
        const REQ_OP_MASK: u32 = (1 << raw::REQ_OP_BITS) - 1;
        // SAFETY: as in `special_payload`.
        let op = unsafe { (*self.as_raw()).cmd_flags } & REQ_OP_MASK;
        op & 1 != 0
    }

    /// The command identifier the core put in the command (`nvme_cid`).
    pub(crate) fn cid(&self) -> u16 {
        // SAFETY: the request is valid and set up (type invariant).
        unsafe { raw::rnvme_nvme_cid(self.as_raw()) }
    }

    /// The command's name as the core logs it (`nvme_fabrics_opcode_str`), for queue `qid`.
    pub(crate) fn opcode_str(&self, qid: u16) -> &'static CStr {
        // SAFETY: the request is valid and set up (type invariant), so its `nvme_request` has the
        // command.
        let p = unsafe { raw::rnvme_nvme_opcode_str(self.as_raw(), i32::from(qid)) };
        // SAFETY: the core returns a static NUL-terminated string (a table entry or a literal).
        unsafe { CStr::from_char_ptr(p) }
    }
}
