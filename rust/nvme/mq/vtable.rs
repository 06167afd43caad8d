// SPDX-License-Identifier: GPL-2.0

//! The `blk_mq_ops` tables of a controller's tag sets: blk-mq's callbacks, each dispatched to the
//! transport's [`MqOps`] with the request and queue it is about.
//!
//! C header: [`include/linux/blk-mq.h`](srctree/include/linux/blk-mq.h)

use super::{MqOps, Pdu, Request, TimeoutAction, INV, REG, SEND};
use crate::bindings::raw;
use crate::nvme::ctrl::Controller;
use crate::rdma::qp::SendWrs;
use core::marker::PhantomData;

/// The `blk_mq_ops` of `M`'s admin (`ADMIN = true`) or I/O tag set.
pub(crate) struct MqVtable<M, const ADMIN: bool>(PhantomData<M>);

impl<M: MqOps, const ADMIN: bool> MqVtable<M, ADMIN> {
    /// The ops table (a promoted constant: `&MqVtable::<M, A>::OPS` is `'static`).
    pub(crate) const OPS: raw::blk_mq_ops = raw::blk_mq_ops {
        queue_rq: Some(Self::queue_rq_cb),
        commit_rqs: None,
        queue_rqs: if ADMIN {
            None
        } else {
            Some(Self::queue_rqs_cb)
        },
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
    /// live `Controller<M::CtrlData>`, as `nvme_alloc_*_tag_set` sets it).
    unsafe fn ctrl<'a>(set: *mut raw::blk_mq_tag_set) -> &'a Controller<M::CtrlData> {
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
        let ctrl = unsafe { Controller::<M::CtrlData>::from_raw(data.cast()) };
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
        // SAFETY: `rq` is valid; its PDU has room for `Pdu<M>` (cmd_size).
        let pdu = unsafe { raw::rnvme_blk_mq_rq_to_pdu(rq).cast::<Pdu<M>>() };
        // (The PDU is zeroed by blk-mq, its entries unarmed; it is allocated once with the tag set
        // and stays until the set is freed, which the transport does only after the queues the
        // requests are posted on are destroyed.)
        // SAFETY: `nreq` takes the controller pointer as C sets it; `data` and the work requests
        // (bound to the PDU's own SEND and REG entries, armed first) are initialised in place and
        // never move; the PDU outlives what is posted from it (above); nothing is posted yet.
        unsafe {
            (*(*pdu).nreq.get()).ctrl = ctrl.nvme().as_raw();
            (*(*pdu).nreq.get()).cmd = (*pdu).cmd.get();
            (*pdu).send_cqe.arm::<Pdu<M>, SEND>();
            (*pdu).reg_cqe.arm::<Pdu<M>, REG>();
            (*pdu).inv_cqe.arm::<Pdu<M>, INV>();
            SendWrs::init(&raw mut (*pdu).wrs, &(*pdu).send_cqe, &(*pdu).reg_cqe);
            let init = M::init_request(ctrl, ADMIN, hctx_idx);
            match crate::bindings::compat::init_in_place(init, &raw mut (*pdu).data) {
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
            let pdu = raw::rnvme_blk_mq_rq_to_pdu(rq).cast::<Pdu<M>>();
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
        // SAFETY: blk-mq calls `queue_rq` of a tag set without `BLK_MQ_F_BLOCKING` inside
        // `rcu_read_lock()` (`blk_mq_run_dispatch_ops`); the nvme core sets that flag only for
        // `NVME_F_BLOCKING`, which the transport's controller ops do not have (`ctrl.rs`).
        let rcu = unsafe { crate::rdma::RcuReader::assume() };
        // SAFETY: blk-mq hands the request to this callback to submit; nothing else made a
        // token of it in this use (`RqList::pop` makes them for `queue_rqs`' lists only).
        let rq = unsafe { super::Owned::new(rq) };
        M::queue_rq(q, rq, last, rcu).0
    }

    /// # Safety
    ///
    /// Called by blk-mq with a list of requests of one request queue of our I/O tag set, ours
    /// until the call returns (`__blk_mq_flush_list`).
    unsafe extern "C" fn queue_rqs_cb(list: *mut raw::rq_list) {
        // SAFETY: as the caller guarantees; the list is not used by anyone else meanwhile.
        let mut l = unsafe { super::batch::RqList::<M>::new(list) };
        // SAFETY: blk-mq calls `queue_rqs` inside `blk_mq_run_dispatch_ops`, an RCU read-side
        // section for a tag set without `BLK_MQ_F_BLOCKING` (see `queue_rq_cb`).
        let rcu = unsafe { crate::rdma::RcuReader::assume() };
        M::queue_rqs(&mut l, rcu);
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
        unsafe { raw::nvmf_map_queues(set, ctrl.nvme().as_raw(), q.as_mut_ptr()) };
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
