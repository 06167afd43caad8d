// SPDX-License-Identifier: GPL-2.0

//! The data path: blk-mq ops, mapping a request onto SEND (+ REG_MR or in-capsule data), the
//! response and the completions that end it.

#![deny(unsafe_code)]

mod prepare;
mod unsent;
use prepare::{prepare, NotPrepared};
use unsent::{fail_lost, fail_nonready, fail_unsent, post_batch, unsent_status};

use super::{
    controller::{error_recovery, protocol_error, wr_error},
    device::MAX_INLINE_SEGMENTS,
    queue::{Queue, RspData, AQ_BLK_MQ_DEPTH},
    req_end::ReqEnd,
    req_io::ReqIo,
    stats::{self, Counter},
    Ctrl, RdmaCtrl,
};
use crate::bindings::compat::prelude::*;
use crate::{
    nvme::{
        mq::{
            batch::{RqList, SendBatch},
            BlkStatus, MqOps, Owned, Request, TimeoutAction,
        },
        MappedCmd, MappedSg, State, TryCell,
    },
    proto::{
        capsule::{Cqe, CQE_LEN},
        inval::{self, Invalidation},
    },
    rdma::{
        qp::{self, Mr, Wc},
        recv::{RecvDone, RecvEntry, RecvRcu},
        RcuReader,
    },
};
use core::sync::atomic::{
    AtomicBool, AtomicU32,
    Ordering::{Acquire, Relaxed},
};

/// Transport state of a request.
#[pin_data]
pub(crate) struct ReqData {
    pub(super) qid: u16,
    /// The completions outstanding (SEND, and response or LOCAL_INV) and the response.
    pub(super) end: ReqEnd,
    pub(super) has_mr: AtomicBool,
    pub(super) mr_rkey: AtomicU32,
    /// What the request holds while in flight, released when it ends ([`unmap_request`]).
    pub(super) io: TryCell<Io>,
}

/// The blk-mq side of the transport.
pub(crate) struct RdmaMq;

/// Drops one completion's reference; the last one ends the request (`nvme_rdma_end_request`).
/// [`ReqEnd::put`] orders the response's status and result before their use here.
#[inline(always)]
pub(super) fn end_request(rq: &Request<RdmaMq>) {
    let Some((status, result)) = rq.data().end.put() else {
        return;
    };
    if !rq.try_complete(status, result) {
        RdmaMq::complete(rq);
    }
}

/// Ends the request's use of what `queue_rq` mapped for it: its MR goes back to the pool, its
/// data and command are unmapped (`nvme_rdma_unmap_data` and the SQE unmap of
/// `nvme_rdma_complete_rq`). The mappings release themselves, so this needs no QP and works
/// whatever state the queue is in.
#[inline]
pub(super) fn unmap_request(rq: &Request<RdmaMq>) {
    if rq.data().io.try_with(ReqIo::release).is_none() {
        // Only `queue_rq` holds the state of a request it is submitting (from before the request
        // is started until its SEND is about to be posted), and a response cannot end a request
        // before its SEND was posted (`ReqEnd::take_response`): a timeout or an abort fired
        // inside `queue_rq`, or this driver broke the protocol. The holder's mappings stay with
        // it: released if its submission fails, else forgotten, without another report, by the
        // request's next use (`ReqIo::begin`); recovery gives the queue a fresh MR pool.
        let ctrl = rq.ctrl();
        dev_err!(
            ctrl,
            "request tag {} busy at completion: its mappings may be leaked\n",
            rq.tag()
        );
        error_recovery(ctrl);
    }
}

/// What a request in flight holds ([`ReqData::io`]).
pub(super) type Io = ReqIo<Mr, MappedSg, MappedCmd>;

/// The SGEs of a request's SEND: the command's, then those of in-capsule data.
pub(super) type SendSges = qp::SgeList<{ qp::SEND_SGES }>;
const _: () = assert!(qp::SEND_SGES == 1 + MAX_INLINE_SEGMENTS as usize);

impl MqOps for RdmaMq {
    type CtrlData = RdmaCtrl;
    type Data = ReqData;
    type Queue = Queue;

    fn queue(ctrl: &Ctrl, admin: bool, hctx_idx: u32) -> &Queue {
        let qid = if admin { 0 } else { hctx_idx as usize + 1 };
        // blk-mq never has more hardware queues than the controller has I/O queues.
        &ctrl.queues[qid.min(ctrl.queues.len() - 1)]
    }

    fn init_request(_ctrl: &Ctrl, admin: bool, hctx_idx: u32) -> impl PinInit<ReqData, Error> {
        let qid = if admin { 0 } else { hctx_idx as u16 + 1 };
        try_pin_init!(ReqData {
            qid,
            end: ReqEnd::new(),
            has_mr: AtomicBool::new(false),
            mr_rkey: AtomicU32::new(0),
            io: TryCell::new(ReqIo::new()),
        })
    }

    #[inline]
    fn queue_rq(q: &Queue, rq: Owned<'_, Self>, _last: bool, rcu: RcuReader<'_>) -> BlkStatus {
        let live = q.live.load(Acquire);
        if !rq.check_ready(live) {
            return fail_nonready(rq);
        }
        if q.lost.load(Acquire) {
            return fail_lost(rq);
        }
        let Some(qp) = q.qp.get(rcu) else {
            return fail_nonready(rq);
        };
        // Everything is mapped in place in the request's state, which releases it when the
        // request ends (`unmap_request`) or, on an error below, at once. It is mapped and stored
        // before the SEND is posted: the request can complete as soon as it is.
        let r = rq.rq();
        let prepared = rq.prepare_in(
            &r.data().io,
            |rq, io, sges| prepare(q, qp, rq, io, sges),
            || NotPrepared::Busy,
        );
        let (rq, err) = match prepared {
            Ok((p, reg)) => {
                // (A match, not `inspect_err`: that generic is not inlined, a call on every I/O.
                // The controller is read only on the paths that use it.)
                match p.post_send(qp, reg) {
                    Ok(()) => {
                        // The queue was lost while this request was being prepared: the abort
                        // of its commands found it busy and left it (`timeout`); abort the
                        // queue's started requests again, so that this one ends as they did.
                        // Through the tag set, not the request: once posted, it may already
                        // have ended, and its token is gone (design.rst, "A lost connection
                        // while connecting").
                        if q.lost.load(Acquire) {
                            r.ctrl().abort_queue_requests(q.qid);
                        }
                        return BlkStatus::OK;
                    }
                    Err((rq, e)) => {
                        dev_err!(
                            r.ctrl(),
                            "nvme_rdma_post_send failed with error code {}\n",
                            e.to_errno()
                        );
                        unmap_request(&rq);
                        (rq, e)
                    }
                }
            }
            Err((_, NotPrepared::Status(st))) => return st,
            Err((rq, NotPrepared::Mapping(e))) => {
                // An empty MR pool (EAGAIN) was reported once by `map_data`.
                if e != EAGAIN {
                    dev_err!(r.ctrl(), "Failed to map data ({})\n", e.to_errno());
                }
                (rq, e)
            }
            Err((_, NotPrepared::Busy)) => {
                // Nothing was set up or mapped, and blk-mq ends the request, unstarted, with the
                // error.
                dev_err!(r.ctrl(), "request tag {} busy at submission\n", r.tag());
                return BlkStatus::IOERR;
            }
        };
        unsent_status(q, rq, err)
    }

    /// A plug's requests (io_uring or aio submitting several at once, a filesystem's writeback):
    /// prepared as by `queue_rq`, and posted up to `CHAIN_MAX` with one call, one doorbell (C
    /// posts each). Only the plain case is taken here: a request whose queue is not live, or is
    /// lost, or whose command cannot be set up, or whose state is busy, goes back to blk-mq
    /// unstarted, which submits it through `queue_rq` and its handling of each case.
    // (Never inlined into blk-mq's callback: the fault tests' stack filter names this symbol.)
    #[inline(never)]
    fn queue_rqs(list: &mut RqList<'_, Self>, rcu: RcuReader<'_>) {
        let mut batch: Option<(&Queue, &Ctrl, SendBatch<'_, Self>)> = None;
        while let Some((q, owned)) = list.pop() {
            let rq = owned.rq();
            let live = q.live.load(Acquire);
            let qp = match q.qp.get(rcu) {
                Some(qp) if live && !q.lost.load(Acquire) && rq.check_ready(live) => qp,
                _ => {
                    list.leave(owned);
                    continue;
                }
            };
            // One batch per QP (a list may hold requests of several hardware queues).
            if batch
                .as_ref()
                .is_some_and(|(_, _, b)| !core::ptr::eq(b.qp(), qp) || b.is_full())
            {
                if let Some((bq, bc, mut b)) = batch.take() {
                    post_batch(bq, bc, &mut b);
                }
            }
            let (_, _, b) = batch.get_or_insert_with(|| (q, rq.ctrl(), SendBatch::new(qp)));
            let prepared = owned.prepare_in(
                &rq.data().io,
                |o, io, sges| prepare(q, qp, o, io, sges),
                || NotPrepared::Busy,
            );
            match prepared {
                Ok((p, reg)) => {
                    if let Err((p, e)) = b.push(p, reg) {
                        // Not reached: the batch was posted when full.
                        unmap_request(rq);
                        fail_unsent(q, p.unprepared(), e);
                    }
                }
                Err((o, NotPrepared::Mapping(e))) => {
                    if e != EAGAIN {
                        dev_err!(rq.ctrl(), "Failed to map data ({})\n", e.to_errno());
                    }
                    fail_unsent(q, o, e);
                }
                // Not started: `queue_rq` takes it again and returns the status, or reports the
                // busy state, as it does for a request of its own.
                Err((o, NotPrepared::Status(_) | NotPrepared::Busy)) => list.leave(o),
            }
        }
        if let Some((q, c, mut b)) = batch {
            post_batch(q, c, &mut b);
        }
    }

    fn complete(rq: &Request<Self>) {
        // Every end of a request passes here (its response, a cancel, a timeout): no response
        // may end this use again (`ReqEnd::disarm`).
        rq.data().end.disarm();
        unmap_request(rq);
        rq.complete_local();
    }

    fn timeout(rq: &Request<Self>) -> TimeoutAction {
        let ctrl = rq.ctrl();
        let qid = rq.data().qid;
        if rq.data().io.in_use() {
            // `queue_rq` is still preparing the request (an abort of a lost queue can come at
            // any moment, not only a timeout later): ended now, it would leave `queue_rq` its
            // mappings and let it post the SEND of an ended request. `queue_rq`, once it let the
            // request go, aborts the queue's requests again if the queue is lost (design.rst,
            // "A lost connection while connecting").
            return TimeoutAction::ResetTimer;
        }
        if ctrl.queue(qid).is_some_and(|q| q.lost.load(Acquire))
            && ctrl.nvme().state() != State::Live
        {
            // Handed here by `ConnCm::lost` (or a real timeout on a queue already stopped).
            dev_info!(
                ctrl,
                "I/O tag {} ({:04x}) opcode {:#x} ({}) QID {}: ended, its connection is gone\n",
                rq.tag(),
                rq.cid(),
                rq.opcode(),
                rq.opcode_str(qid),
                qid
            );
        } else {
            // C's line, as it is (log readers match it), then what the command still waits for:
            // that tells a lost SEND (or a target that never saw the command) from a response
            // that never came or came and was not matched. C logs nothing of it.
            dev_warn!(
                ctrl,
                "I/O tag {} ({:04x}) opcode {:#x} ({}) QID {} timeout\n",
                rq.tag(),
                rq.cid(),
                rq.opcode(),
                rq.opcode_str(qid),
                qid
            );
            let (refs, responded) = rq.data().end.outstanding();
            dev_info!(
                ctrl,
                "I/O tag {} QID {}: {} completions outstanding, response {}\n",
                rq.tag(),
                qid,
                refs,
                if responded {
                    "received"
                } else {
                    "not received"
                }
            );
        }
        if ctrl.nvme().state() != State::Live {
            // Unlike C (which stops only a live queue), drained even while the Fabrics Connect is
            // under way: no completion of this command can come after it ended.
            if let Some(q) = ctrl.queue(qid) {
                q.kill();
            }
            rq.complete_timed_out();
            return TimeoutAction::Done;
        }
        error_recovery(ctrl);
        TimeoutAction::ResetTimer
    }

    #[inline]
    fn send_done(rq: &Request<Self>, wc: &Wc) {
        if wc.is_ok() {
            end_request(rq);
        } else {
            wr_error(rq.ctrl(), rq.data().qid, wc, "SEND");
        }
    }

    fn reg_done(rq: &Request<Self>, wc: &Wc) {
        if !wc.is_ok() {
            wr_error(rq.ctrl(), rq.data().qid, wc, "MEMREG");
        }
    }

    fn inv_done(rq: &Request<Self>, wc: &Wc) {
        if wc.is_ok() {
            end_request(rq);
        } else {
            wr_error(rq.ctrl(), rq.data().qid, wc, "LOCAL_INV");
        }
    }

    fn poll(q: &Queue) -> i32 {
        let n = q.poll_cq.poll();
        if n > 0 {
            q.stats.count(Counter::PolledCompletions, n as u64);
        }
        n
    }

    fn io_queues(ctrl: &Ctrl) -> [u32; 3] {
        [
            ctrl.io_queues[0].load(Relaxed),
            ctrl.io_queues[1].load(Relaxed),
            ctrl.io_queues[2].load(Relaxed),
        ]
    }
}

impl RecvDone for RspData {
    // (Inlined into the completion trampoline, its one caller, as C's handler is the callback.)
    #[inline(always)]
    fn done(e: &RecvEntry<Self>, wc: &Wc, rcu: RecvRcu<'_>) {
        let RspData { ctrl, qid, stats } = e.data();
        if !wc.is_ok() {
            wr_error(ctrl, *qid, wc, "RECV");
            return;
        }
        if (wc.byte_len() as usize) < CQE_LEN {
            dev_err!(
                ctrl,
                "Unexpected nvme completion length({})\n",
                wc.byte_len()
            );
            protocol_error(ctrl, *qid);
            return;
        }
        let Some(cqe) = e.read(Cqe::parse) else {
            return;
        };
        // The AER is the one command above the admin tag set's tags, sent with exactly this
        // identifier (`submit_async_event`); C takes any identifier above the tags for an AER
        // completion, so a wrong one went unnoticed and its command waited for its timeout.
        if *qid == 0 && cqe.command_id == AQ_BLK_MQ_DEPTH {
            ctrl.nvme()
                .complete_async_event(cqe.status.to_le(), cqe.result.to_le());
        } else {
            process_rsp(ctrl, *qid, *stats, &cqe, wc, rcu);
        }
        if let Err(err) = rcu.with(|r| e.post(r)) {
            // (Not a match on `Ok(()) | Err(ENOTCONN)`: that compared the result twice on
            // every receive.) ENOTCONN: the QP is going away (its id disarmed the ring).
            if err != ENOTCONN {
                dev_err!(
                    ctrl,
                    "nvme_rdma_post_recv failed with error code {}\n",
                    err.to_errno()
                );
            }
        }
    }
}

/// A response for an I/O or admin command (`nvme_rdma_process_nvme_rsp`). (Inlined into the
/// receive handler, its one caller, as in C.)
#[inline(always)]
pub(super) fn process_rsp(
    ctrl: &Ctrl,
    qid: u16,
    stats: stats::Side,
    cqe: &Cqe,
    wc: &Wc,
    rcu: RecvRcu<'_>,
) {
    let (cid, status, result) = (cqe.command_id, cqe.status, cqe.result);
    let Some(rq) = rcu.with(|r| ctrl.find_rq::<RdmaMq>(qid, cid, r)) else {
        let qpn = rcu.with(|r| {
            ctrl.queue(qid)
                .and_then(|q| q.qp.get(r))
                .map_or(0, |qp| qp.num())
        });
        dev_err!(ctrl, "got bad command_id {:#x} on QP {:#x}\n", cid, qpn);
        protocol_error(ctrl, qid);
        return;
    };
    let d = rq.data();
    if !d.end.take_response() {
        // Only one response per command: a second one must not end the request, which may be
        // in `queue_rq` again by now.
        dev_err!(ctrl, "second response for command_id {:#x}\n", cid);
        protocol_error(ctrl, qid);
        return;
    }
    d.end.set_rsp(status.to_le(), result.to_le());
    let rkey = d.mr_rkey.load(Relaxed);
    let mine = d.has_mr.load(Relaxed).then_some(rkey);
    match inval::on_response(mine, wc.invalidated_rkey()) {
        Invalidation::Nothing => {}
        Invalidation::Remote => {
            stats.count(Counter::RemoteInvalidations, 1);
        }
        Invalidation::Bogus => {
            // Deliberately unlike C (which ends the request now with the target's status): the
            // command's own MR may still be open to the target, so the request ends only when
            // recovery has stopped the QP, as aborted, and is retried (`proto::inval`).
            dev_err!(
                ctrl,
                "Bogus remote invalidation for rkey {:#x}\n",
                mine.unwrap_or(0)
            );
            protocol_error(ctrl, qid);
            return;
        }
        Invalidation::Local => {
            // Not on a queue being stopped (lost: marked before the grace period that precedes
            // its drain): a work request posted while the drain runs lands behind the drain's
            // marker, so no drain waits for it, and its flush completion could reach the request
            // after the teardown freed the tag set. On a QP in the error state the LOCAL_INV
            // would only be flushed, the MR not invalidated either way; the request is left to
            // the teardown, which cancels it after the drain (aborted, retried), its MR going
            // back to a pool that is destroyed with the QP. A receive that saw the queue not
            // lost posts inside its RCU section, so before the drain begins.
            // (`None`: the queue is being stopped.)
            let posted = rcu.with(|r| match ctrl.queue(qid) {
                Some(q) if q.lost.load(Acquire) => None,
                q => Some(
                    q.and_then(|q| q.qp.get(r))
                        .map(|qp| qp.post_local_inv(rq.inv_cqe(), rkey)),
                ),
            });
            match posted {
                None => {
                    stats.count(Counter::LocalInvalidationsSkipped, 1);
                    return;
                }
                Some(Some(Ok(()))) => stats.count(Counter::LocalInvalidations, 1),
                Some(_) => {
                    dev_err!(ctrl, "Queueing INV WR for rkey {:#x} failed\n", rkey);
                    error_recovery(ctrl);
                    return;
                }
            };
            // The local invalidation's completion ends the request.
            return;
        }
    }
    end_request(rq);
}
