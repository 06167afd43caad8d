// SPDX-License-Identifier: GPL-2.0

//! Preparing a request for its SEND (`queue_rq`, `queue_rqs`): its command mapped and built, its
//! data mapped in place (in-capsule, or one fast-registered MR), the SEND's list filled.

#![deny(unsafe_code)]

use super::{Io, RdmaMq, SendSges};
use crate::bindings::compat::prelude::*;
use crate::{
    nvme::{
        mq::{BlkStatus, Owned},
        MappedSg,
    },
    proto::{capsule, sgl::Sgl},
    rdma::qp::{self, Mr},
    transport::{queue::Queue, stats::Counter},
};
use core::sync::atomic::Ordering::Relaxed;

/// Why [`prepare`] did not prepare a request. Either way, what it had mapped was released.
pub(super) enum NotPrepared {
    /// `queue_rq` returns this status as it is (the command was not set up, or setting it up
    /// failed).
    Status(BlkStatus),
    /// Mapping the data failed after the command was set up.
    Mapping(Error),
    /// The request's state is busy (see `unmap_request`): nothing was set up or mapped.
    Busy,
}

/// Maps the request's data into its slots, writes the command's data pointer and adds the
/// in-capsule SGEs to `sges` (`nvme_rdma_map_data`). Returns the registration to post before the
/// SEND, if any. On error the caller releases the slots. (Inlined into `prepare`, as C's
/// `nvme_rdma_map_data` is into `queue_rq`.)
#[inline(always)]
pub(super) fn map_data(
    q: &Queue,
    qp: &qp::Qp,
    rq: &mut Owned<'_, RdmaMq>,
    mr_slot: &mut Option<Mr>,
    sg_slot: &mut Option<MappedSg>,
    sges: &mut SendSges,
) -> Result<Option<qp::RegWr>> {
    let d = rq.rq().data();
    let ctrl = rq.rq().ctrl();
    d.has_mr.store(false, Relaxed);
    let Some(sg) = rq.map_data_into(qp.device(), sg_slot)? else {
        rq.with_cmd(|c| capsule::put_sgl(c, &Sgl::Null))
            .map_err(|_| EINVAL)?;
        q.stats.count(Counter::NoData, 1);
        return Ok(None);
    };
    let count = sg.nents() as u32;
    if count <= q.num_inline_segments.load(Relaxed)
        && rq.is_write()
        && q.qid != 0
        && ctrl.use_inline_data.load(Relaxed)
        && rq.payload_bytes() <= q.inline_size.load(Relaxed)
    {
        let len = sg.push_to(sges, qp)?;
        let offset = u64::from(ctrl.nvme().icdoff());
        // (Each descriptor is built inside its closure: with its variant known there, the
        // closure is a few stores and is inlined; three closures writing a captured `Sgl` were
        // one shared out-of-line function matching on it.)
        rq.with_cmd(|c| capsule::put_sgl(c, &Sgl::Inline { offset, len }))
            .map_err(|_| EINVAL)?;
        q.stats.count(Counter::InlineWrites, 1);
        return Ok(None);
    }
    let Some(mr) = qp.mr_get() else {
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
    // Held by the request from here: released with the other slots on error.
    let mr = Io::put(mr_slot, mr);
    sg.register(mr)?;
    // The MR's fields read once, before the command is written (the compiler cannot keep them
    // across writes through the request's pointers).
    let reg = mr.reg_wr();
    let (addr, len, key) = (mr.iova(), mr.length() as u32, reg.key());
    rq.with_cmd(|c| {
        capsule::put_sgl(
            c,
            &Sgl::Keyed {
                addr,
                len,
                key,
                invalidate: true,
            },
        )
    })
    .map_err(|_| EINVAL)?;
    d.mr_rkey.store(key, Relaxed);
    d.has_mr.store(true, Relaxed);
    q.stats.count(Counter::MrRegistrations, 1);
    Ok(Some(reg))
}

/// Begins a use of the request in `io` (its own state) and maps everything the SEND needs in
/// place there: the command (mapped first, before it is set up, as in C), then the data; fills
/// `sges` and returns the registration to post before the SEND. On error whatever was mapped was
/// released again. (Inlined into its two callers, `queue_rq` and `queue_rqs`.)
#[inline(always)]
pub(super) fn prepare(
    q: &Queue,
    qp: &qp::Qp,
    rq: &mut Owned<'_, RdmaMq>,
    io: &mut Io,
    sges: &mut SendSges,
) -> core::result::Result<Option<qp::RegWr>, NotPrepared> {
    io.begin();
    let (mr_slot, sg_slot, cmd_slot) = io.slots();
    let Ok(cmd) = rq.map_cmd(qp.device()) else {
        q.stats.count(Counter::ResourceRetries, 1);
        return Err(NotPrepared::Status(BlkStatus::RESOURCE));
    };
    let cmd = Io::put(cmd_slot, cmd);
    let st = rq.setup_and_start();
    if st != BlkStatus::OK {
        io.release();
        return Err(NotPrepared::Status(st));
    }
    rq.data().end.arm(2);
    // (Matches, not `and_then`: with two callers of `prepare` (`queue_rq`, `queue_rqs`), LLVM
    // kept that generic and its closure out of line, a call on every I/O.)
    let mapped = match cmd.push_to(sges, qp) {
        Ok(()) => map_data(q, qp, rq, mr_slot, sg_slot, sges),
        Err(e) => Err(e),
    };
    match mapped {
        Ok(reg) => {
            cmd.sync_for_device();
            Ok(reg)
        }
        Err(e) => {
            io.release();
            Err(NotPrepared::Mapping(e))
        }
    }
}
