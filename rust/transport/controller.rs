// SPDX-License-Identifier: GPL-2.0

//! The transport's part of a controller (the C driver's `struct nvme_rdma_ctrl`), its list, and
//! what starts its recovery: a lost device, a failed work request, a target breaking the protocol.

#![deny(unsafe_code)]

use super::{
    queue::{Queue, QueueEvents},
    text, Ctrl,
};
use crate::{
    nvme::State,
    rdma::{qp::Wc, verbs::DmaBuf, Device, SockAddr},
};
use core::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU8,
    Ordering::{AcqRel, Acquire, SeqCst},
};
use kernel::{
    prelude::*,
    sync::{aref::ARef, Mutex},
};

crate::global_mutex! {
    /// The transport's live controllers (the C driver's `nvme_rdma_ctrl_list`).
    pub(super) static CTRLS: KVec<ARef<Ctrl>> = KVec::new();
}

/// The transport's part of a controller.
#[pin_data]
pub(crate) struct RdmaCtrl {
    pub(super) queues: KVec<Pin<KBox<Queue>>>,
    pub(super) addr: SockAddr,
    pub(super) src: Option<SockAddr>,
    pub(super) max_fr_pages: AtomicU32,
    pub(super) use_inline_data: AtomicBool,
    pub(super) io_queues: [AtomicU32; 3],
    #[pin]
    pub(super) aen_sqe: Mutex<Option<DmaBuf>>,
    /// Where `create_ctrl` is ([`CREATING`], [`CREATED`], or [`REMOVED_WHILE_CREATING`]: the RDMA
    /// device went under an established queue before the create ended).
    pub(super) creation: AtomicU8,
}

/// [`RdmaCtrl::creation`]: `create_ctrl` has not returned yet; nobody else may delete it.
pub(super) const CREATING: u8 = 0;
/// [`RdmaCtrl::creation`]: handed to the core; deleted like any controller.
pub(super) const CREATED: u8 = 1;
/// [`RdmaCtrl::creation`]: the RDMA device was removed under it while it was being created; its
/// creator fails the create.
pub(super) const REMOVED_WHILE_CREATING: u8 = 2;

impl RdmaCtrl {
    pub(super) fn queue(&self, qid: u16) -> Option<&Queue> {
        self.queues.get(usize::from(qid)).map(|q| &**q)
    }

    /// After its RDMA device went under one of its queues: whether the controller was created
    /// (so the caller deletes it); if it is still being created, marks it for its creator.
    pub(super) fn device_removed_created(&self) -> bool {
        match self
            .creation
            .compare_exchange(CREATING, REMOVED_WHILE_CREATING, AcqRel, Acquire)
        {
            Ok(_) => false,
            Err(v) => v == CREATED,
        }
    }

    /// The creator's last step: the controller is created, unless its RDMA device went meanwhile
    /// (`false`: the creator deletes it and fails the create).
    pub(super) fn mark_created(&self) -> bool {
        self.creation
            .compare_exchange(CREATING, CREATED, AcqRel, Acquire)
            .is_ok()
    }

    /// The first queue with a connection that is lost (the target or the RDMA device ended it),
    /// if any.
    pub(super) fn lost_queue(&self) -> Option<u16> {
        self.queues
            .iter()
            .find(|q| q.lost.load(SeqCst) && q.conn.lock().is_some())
            .map(|q| q.qid)
    }

    /// Whether a queue's connection uses `dev` (that device, not another one with the same node
    /// GUID: a soft-RDMA device deleted and added again on the same NIC has the same GUID). A
    /// controller holds a device only through its queues' connections, as the C driver does:
    /// between reconnect attempts it holds nothing, so the device can go (wire group).
    pub(super) fn uses_device(&self, dev: &Device) -> bool {
        self.queues.iter().any(|q| {
            q.conn
                .lock()
                .as_ref()
                .and_then(|cm| cm.qp_res())
                .is_some_and(|r| core::ptr::eq(r.dev.0.device(), dev))
        })
    }
}

/// The controller's RDMA device is going and the controller is being deleted: nothing in
/// flight on it will complete (a soft-RDMA device drops what arrives once its removal began),
/// and the deletion waits for what is in flight (the namespace scan's identify, a keep-alive):
/// every queue is lost (nothing new is posted: `queue_rq` ends it) and its started commands go
/// to the timeout handler now, which ends them as it would at their timeout. (The C driver
/// waits for the timeouts: the admin timeout is 60 s.) Call after the deletion started, so
/// that the timeout handler does not see a live controller.
pub(super) fn device_gone(ctrl: &Ctrl) {
    for q in ctrl.queues.iter() {
        q.lost.store(true, SeqCst);
        ctrl.abort_requests(q.qid);
    }
}

pub(super) fn error_recovery(ctrl: &Ctrl) {
    if !ctrl.nvme().change_state(State::Resetting) {
        return;
    }
    dev_warn!(ctrl, "starting error recovery\n");
    ctrl.queue_err_work();
}

impl QueueEvents for Ctrl {
    fn connection_failed(&self) {
        error_recovery(self);
    }

    /// Only whoever may take the controller down does: a controller that `create_ctrl` has
    /// handed to the core is deleted here; one still being created is marked, and its creator
    /// fails the create (the setup sees the lost queue before going live, or `create_ctrl` sees
    /// the mark after listing it). Deleting a controller still being created would tear it down
    /// twice, the second time under `create_ctrl` (design.rst, "RDMA device removal").
    fn device_removed(&self) {
        if self.device_removed_created() {
            dev_info!(self, "deleting the controller (its RDMA device is gone)\n");
            let _ = self.nvme().delete();
            device_gone(self);
        }
    }
}

/// The target broke the protocol on queue `qid`: a response for no command in flight, a second
/// response, a bogus remote invalidation, a short response. See [`queue_failed`].
pub(super) fn protocol_error(ctrl: &Ctrl, qid: u16) {
    queue_failed(ctrl, qid);
}

/// A work request of queue `qid` failed (`op`: which kind). Outside a teardown (which flushes
/// what is posted on a queue it has already stopped) the QP is in the error state: see
/// [`queue_failed`]. (A soft-RDMA device reports a remote invalidation of an unknown rkey this
/// way, as a failed receive.)
pub(super) fn wr_error(ctrl: &Ctrl, qid: u16, wc: &Wc, op: &str) {
    if ctrl.nvme().state() == State::Live {
        dev_info!(
            ctrl,
            "{} failed with status {} ({})\n",
            op,
            text(wc.status_msg()),
            wc.status()
        );
    }
    queue_failed(ctrl, qid);
}

/// Queue `qid`'s connection cannot be trusted any more (the target broke the protocol on it, or
/// one of its work requests failed): it is lost (nothing new is posted on it), and a live
/// controller recovers (as in C). While the controller is connecting, error recovery cannot run
/// (it needs `Resetting`) and the command the setup waits for may never be answered (its response
/// was the broken one, or the QP is in the error state): the C driver waits for its timeout (the
/// admin timeout is 60 s, and again for each retry). Here the queue's commands go to the timeout
/// handler now, which stops the queue and ends them, and the setup fails before going live
/// (misbehave group: `dup`). Called from the completion path (softirq or a poll).
fn queue_failed(ctrl: &Ctrl, qid: u16) {
    // SeqCst, then the state: as in `ConnCm::lost`, either this sees the controller no longer
    // connecting (error recovery below takes over) or the setup sees `lost` (`setup_ctrl`). A
    // queue already lost (stopped by a teardown, or lost before) needs nothing more.
    let first = ctrl.queue(qid).is_some_and(|q| !q.lost.swap(true, SeqCst));
    if first && ctrl.nvme().state() == State::Connecting {
        dev_info!(
            ctrl,
            "queue {}: connection failed while connecting: ending its commands now\n",
            qid
        );
        ctrl.abort_queue_requests(qid);
    }
    error_recovery(ctrl);
}
