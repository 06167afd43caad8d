// SPDX-License-Identifier: GPL-2.0

//! The data path: blk-mq ops, mapping a request onto SEND (+ REG_MR or in-capsule data), the
//! response and the completions that end it.

#![deny(unsafe_code)]

use super::{
    ctrl::{error_recovery, wr_error, Queue, RspData, AQ_BLK_MQ_DEPTH},
    device::MAX_INLINE_SEGMENTS,
    req_end::ReqEnd,
    req_io::ReqIo,
    stats::{self, Counter},
    Ctrl, RdmaCtrl,
};
use crate::{
    nvme::{
        mq::{BlkStatus, MqOps, Request, TimeoutAction},
        MappedCmd, MappedSg, State, TryCell,
    },
    proto::{
        capsule::{self, Cqe, CQE_LEN, SQE_LEN},
        inval::{self, Invalidation},
        sgl::Sgl,
    },
    rdma::{
        qp::{self, Mr, Wc},
        recv::{RecvDone, RecvEntry},
    },
};
use core::sync::atomic::{
    AtomicBool, AtomicU32,
    Ordering::{Acquire, Relaxed},
};
use kernel::prelude::*;

// ------------------------------------------------------------------------------------------
// The data path

/// Transport state of a request.
#[pin_data]
pub(crate) struct ReqData {
    pub(super) qid: u16,
    /// The completions outstanding (SEND, and response or LOCAL_INV) and the response.
    pub(super) end: ReqEnd,
    pub(super) has_mr: AtomicBool,
    pub(super) mr_rkey: AtomicU32,
    /// What the request holds while in flight, released when it ends ([`unmap_request`]).
    pub(super) io: TryCell<ReqIo<Mr, MappedSg, MappedCmd>>,
}

/// The blk-mq side of the transport.
pub(crate) struct RdmaMq;

/// Drops one completion's reference; the last one ends the request (`nvme_rdma_end_request`).
/// [`ReqEnd::put`] orders the response's status and result before their use here.
#[inline]
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
pub(super) fn unmap_request(rq: &Request<RdmaMq>) {
    if rq.data().io.try_with(ReqIo::release).is_none() {
        // Only `queue_rq` holds the state of a request it is submitting, and a response cannot
        // end a request before its SEND was posted (`ReqEnd::take_response`): a timeout fired
        // inside `queue_rq`, or this driver broke the protocol. The holder's mappings stay with
        // it (`ReqIo` leaks them, reported, when they are found later); recovery gives the queue
        // a fresh MR pool.
        let ctrl = rq.ctrl();
        dev_err!(ctrl, "request tag {} busy at completion\n", rq.tag());
        error_recovery(ctrl);
    }
}

/// What a request's data is mapped with, until `queue_rq` stores it in the request.
pub(super) struct DataMap {
    /// SGEs filled in (the first, for the command, is the caller's).
    pub(super) nsge: usize,
    /// The registration to post before the SEND.
    pub(super) reg: Option<qp::RegWr>,
    pub(super) sg: Option<MappedSg>,
    pub(super) mr: Option<Mr>,
}

/// Writes the data pointer of the command and prepares the SGEs (`nvme_rdma_map_data`). On error
/// everything mapped here was released (dropped) again. (Inlined into its one caller, as C's
/// `nvme_rdma_map_data` is: its result is then built in place, not copied back.)
#[inline(always)]
pub(super) fn map_data(
    q: &Queue,
    qp: &qp::Qp,
    rq: &Request<RdmaMq>,
    sges: &mut [qp::Sge; 1 + MAX_INLINE_SEGMENTS as usize],
) -> Result<DataMap> {
    let d = rq.data();
    let ctrl = rq.ctrl();
    d.has_mr.store(false, Relaxed);
    if rq.nr_phys_segments() == 0 {
        let desc = Sgl::Null.encode().map_err(|_| EINVAL)?;
        rq.with_cmd(|c| capsule::set_sgl(c, &desc));
        stats::count(Counter::NoData, 1);
        return Ok(DataMap {
            nsge: 1,
            reg: None,
            sg: None,
            mr: None,
        });
    }
    let sg = rq.map_data(qp.device())?;
    let count = sg.nents() as u32;
    if count <= q.num_inline_segments.load(Relaxed)
        && rq.is_write()
        && q.qid != 0
        && ctrl.use_inline_data.load(Relaxed)
        && rq.payload_bytes() <= q.inline_size.load(Relaxed)
    {
        let lkey = qp.local_dma_lkey();
        let mut n = 1;
        let mut len = 0u32;
        for (addr, l) in sg.entries() {
            sges[n] = qp::sge(addr, l, lkey);
            n += 1;
            len += l;
        }
        let desc = Sgl::Inline {
            offset: u64::from(ctrl.nvme().icdoff()),
            len,
        }
        .encode()
        .map_err(|_| EINVAL)?;
        rq.with_cmd(|c| capsule::set_sgl(c, &desc));
        stats::count(Counter::InlineWrites, 1);
        return Ok(DataMap {
            nsge: n,
            reg: None,
            sg: Some(sg),
            mr: None,
        });
    }
    let Some(mut mr) = qp.mr_get() else {
        // Not expected: the pool has an MR for each request the queue takes, and requests give
        // theirs back when they end. As in C, blk-mq retries the request later; unlike C (a
        // warning once per boot), say so once per connection.
        if !q.mr_pool_empty.swap(true, Relaxed) {
            dev_err!(
                ctrl,
                "QID {}: MR pool empty: requests are retried (BLK_STS_RESOURCE)\n",
                q.qid
            );
        }
        return Err(EAGAIN);
    };
    // From here, an error drops `mr` (back to the pool), then `sg` (unmapped).
    sg.register(&mut mr)?;
    let desc = Sgl::Keyed {
        addr: mr.iova(),
        len: mr.length() as u32,
        key: mr.rkey(),
        invalidate: true,
    }
    .encode()
    .map_err(|_| EINVAL)?;
    rq.with_cmd(|c| capsule::set_sgl(c, &desc));
    let reg = mr.reg_wr(rq.reg_cqe());
    d.mr_rkey.store(mr.rkey(), Relaxed);
    d.has_mr.store(true, Relaxed);
    stats::count(Counter::MrRegistrations, 1);
    Ok(DataMap {
        nsge: 1,
        reg: Some(reg),
        sg: Some(sg),
        mr: Some(mr),
    })
}

/// Stores the request's mappings in it and posts its SEND (after the registration, if any). On
/// error the mappings were released. (Inlined into its one caller, as C's `nvme_rdma_post_send`.)
#[inline(always)]
pub(super) fn post(
    rq: &Request<RdmaMq>,
    qp: &qp::Qp,
    cmd: MappedCmd,
    m: DataMap,
    sges: &[qp::Sge],
) -> Result {
    let DataMap { nsge, reg, sg, mr } = m;
    // Stored before posting: the request can complete as soon as the SEND is posted.
    let Some(clean) = rq.data().io.try_with(|io| io.set(mr, sg, cmd)) else {
        // The state is busy (see `unmap_request`): nothing was stored or posted, and the
        // mappings were released with the unused closure that held them.
        return Err(EBUSY);
    };
    if !clean {
        dev_err!(
            rq.ctrl(),
            "request tag {}: leaked the stale mappings of its previous use\n",
            rq.tag()
        );
    }
    // (A match, not `inspect_err`: that generic is not inlined, a call on every I/O.)
    match qp.post_send(reg, rq.send_cqe(), &sges[..nsge]) {
        Ok(()) => Ok(()),
        Err(e) => {
            dev_err!(
                rq.ctrl(),
                "nvme_rdma_post_send failed with error code {}\n",
                e.to_errno()
            );
            unmap_request(rq);
            Err(e)
        }
    }
}

/// A request the queue cannot take now (`nvme_fail_nonready_command`, which requeues anything
/// retriable while the controller resets), except DH-HMAC-CHAP messages outside `Connecting`:
/// they end with a host path error (which the core retries at most `nvme_max_retries` times, as
/// they are submitted retriable, then the re-authentication fails). A re-authentication's messages
/// belong to the association it started on; requeued without end, they would wait for the next
/// association while error recovery waits for the re-authentication to end (`nvme_auth_stop`)
/// before it reconnects: a hang the C driver has. This way the re-authentication ends with an
/// error and the reconnect authenticates afresh.
pub(super) fn fail_nonready(rq: &Request<RdmaMq>) -> BlkStatus {
    // (Only a passthrough request has its command in place before `setup_and_start`.)
    if rq.ctrl().nvme().state() != State::Connecting
        && rq.is_passthrough()
        && rq.with_cmd(|c| capsule::is_auth(c))
    {
        return rq.host_path_error();
    }
    rq.fail_nonready()
}

/// A request for a queue whose connection is gone ([`Queue::lost`]), before error recovery or a
/// teardown has quiesced the queue. A Fabrics command (a Connect or DH-HMAC-CHAP message while
/// `Connecting`, a Property Get/Set) was meant for this connection and can never reach the target
/// on it: it ends with a host path error, which the core retries at most `nvme_max_retries` times
/// (each ends here at once), then the setup step fails and the reconnect logic decides. Anything
/// else waits for the next connection like any request the queue cannot take now. (The C driver
/// posts to the disconnected QP: the command waits for its timeout, and again for each retry.)
pub(super) fn fail_lost(rq: &Request<RdmaMq>) -> BlkStatus {
    if rq.is_passthrough() && rq.with_cmd(|c| capsule::is_fabrics(c)) {
        return rq.host_path_error();
    }
    fail_nonready(rq)
}

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
    fn queue_rq(q: &Queue, rq: &Request<Self>, _last: bool) -> BlkStatus {
        let live = q.live.load(Acquire);
        if !rq.check_ready(live) {
            return fail_nonready(rq);
        }
        if q.lost.load(Acquire) {
            return fail_lost(rq);
        }
        let Some(qp) = q.qp.get() else {
            return fail_nonready(rq);
        };
        // Every mapping below releases itself when dropped: on an early return, or once stored in
        // the request, when the request ends (`unmap_request`).
        let Ok(cmd) = rq.map_cmd(qp.device()) else {
            stats::count(Counter::ResourceRetries, 1);
            return BlkStatus::RESOURCE;
        };
        let st = rq.setup_and_start();
        if st != BlkStatus::OK {
            return st;
        }
        rq.data().end.arm(2);
        let mut sges: [qp::Sge; 1 + MAX_INLINE_SEGMENTS as usize] =
            core::array::from_fn(|_| qp::sge(0, 0, 0));
        let err = match map_data(q, qp, rq, &mut sges) {
            Ok(m) => {
                sges[0] = qp::sge(cmd.dma_addr(), SQE_LEN as u32, qp.local_dma_lkey());
                cmd.sync_for_device();
                match post(rq, qp, cmd, m, &sges) {
                    Ok(()) => return BlkStatus::OK,
                    Err(e) => e,
                }
            }
            Err(e) => {
                // An empty MR pool (EAGAIN) was reported once by `map_data`.
                if e != EAGAIN {
                    dev_err!(rq.ctrl(), "Failed to map data ({})\n", e.to_errno());
                }
                drop(cmd);
                e
            }
        };
        if err == EIO {
            return rq.host_path_error();
        }
        rq.cleanup_cmd();
        if err == ENOMEM || err == EAGAIN {
            stats::count(Counter::ResourceRetries, 1);
            BlkStatus::RESOURCE
        } else {
            BlkStatus::IOERR
        }
    }

    fn complete(rq: &Request<Self>) {
        unmap_request(rq);
        rq.complete_local();
    }

    fn timeout(rq: &Request<Self>) -> TimeoutAction {
        let ctrl = rq.ctrl();
        let qid = rq.data().qid;
        if ctrl.queue(qid).is_some_and(|q| q.lost.load(Acquire))
            && ctrl.nvme().state() != State::Live
        {
            // Handed here by `ConnCm::lost` (or a real timeout on a queue already stopped).
            dev_info!(
                ctrl,
                "I/O tag {} ({:04x}) opcode {:#x} QID {}: ended, its connection is gone\n",
                rq.tag(),
                rq.cid(),
                rq.opcode(),
                qid
            );
        } else {
            dev_warn!(
                ctrl,
                "I/O tag {} ({:04x}) opcode {:#x} QID {} timeout\n",
                rq.tag(),
                rq.cid(),
                rq.opcode(),
                qid
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

    fn send_done(rq: &Request<Self>, wc: &Wc) {
        if wc.is_ok() {
            end_request(rq);
        } else {
            wr_error(rq.ctrl(), wc, "SEND");
        }
    }

    fn reg_done(rq: &Request<Self>, wc: &Wc) {
        if !wc.is_ok() {
            wr_error(rq.ctrl(), wc, "MEMREG");
        }
    }

    fn inv_done(rq: &Request<Self>, wc: &Wc) {
        if wc.is_ok() {
            end_request(rq);
        } else {
            wr_error(rq.ctrl(), wc, "LOCAL_INV");
        }
    }

    fn poll(q: &Queue) -> i32 {
        let n = q.poll_cq.poll();
        if n > 0 {
            stats::count(Counter::PolledCompletions, n as u64);
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
    #[inline]
    fn done(e: &RecvEntry<Self>, wc: &Wc) {
        let RspData { ctrl, qid } = e.data();
        if !wc.is_ok() {
            wr_error(ctrl, wc, "RECV");
            return;
        }
        if (wc.byte_len() as usize) < CQE_LEN {
            dev_err!(
                ctrl,
                "Unexpected nvme completion length({})\n",
                wc.byte_len()
            );
            error_recovery(ctrl);
            return;
        }
        let Some(cqe) = e.read(Cqe::parse) else {
            return;
        };
        if *qid == 0 && (cqe.command_id & 0xfff) >= AQ_BLK_MQ_DEPTH {
            ctrl.nvme()
                .complete_async_event(cqe.status.to_le(), cqe.result.to_le());
        } else {
            process_rsp(ctrl, *qid, &cqe, wc);
        }
        match e.post() {
            // The QP is going away (its id disarmed the ring).
            Ok(()) | Err(ENOTCONN) => {}
            Err(err) => dev_err!(
                ctrl,
                "nvme_rdma_post_recv failed with error code {}\n",
                err.to_errno()
            ),
        }
    }
}

/// A response for an I/O or admin command (`nvme_rdma_process_nvme_rsp`). (Inlined into the
/// receive handler, its one caller, as in C.)
#[inline(always)]
pub(super) fn process_rsp(ctrl: &Ctrl, qid: u16, cqe: &Cqe, wc: &Wc) {
    let (cid, status, result) = (cqe.command_id, cqe.status, cqe.result);
    let Some(rq) = ctrl.find_rq::<RdmaMq>(qid, cid) else {
        let qpn = ctrl
            .queue(qid)
            .and_then(|q| q.qp.get())
            .map_or(0, |qp| qp.num());
        dev_err!(ctrl, "got bad command_id {:#x} on QP {:#x}\n", cid, qpn);
        error_recovery(ctrl);
        return;
    };
    let d = rq.data();
    if !d.end.take_response() {
        // Only one response per command: a second one must not end the request, which may be
        // in `queue_rq` again by now.
        dev_err!(ctrl, "second response for command_id {:#x}\n", cid);
        error_recovery(ctrl);
        return;
    }
    d.end.set_rsp(status.to_le(), result.to_le());
    let rkey = d.mr_rkey.load(Relaxed);
    let mine = d.has_mr.load(Relaxed).then_some(rkey);
    match inval::on_response(mine, wc.invalidated_rkey()) {
        Invalidation::Nothing => {}
        Invalidation::Remote => {
            stats::count(Counter::RemoteInvalidations, 1);
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
            error_recovery(ctrl);
            return;
        }
        Invalidation::Local => {
            let posted = ctrl
                .queue(qid)
                .and_then(|q| q.qp.get())
                .map(|qp| qp.post_local_inv(rq.inv_cqe(), rkey));
            match posted {
                Some(Ok(())) => stats::count(Counter::LocalInvalidations, 1),
                _ => {
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
