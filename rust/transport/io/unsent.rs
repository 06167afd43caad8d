// SPDX-License-Identifier: GPL-2.0

//! Requests that were not sent: those a queue cannot take now (not ready, its connection lost),
//! and those whose mapping or post failed, in `queue_rq` or in a batch of `queue_rqs`.

#![deny(unsafe_code)]

use super::{super::controller::error_recovery, unmap_request, RdmaMq};
use crate::{
    nvme::{
        mq::{batch::SendBatch, BlkStatus, Owned},
        State,
    },
    proto::capsule,
    transport::{queue::Queue, stats::Counter, Ctrl},
};
use core::sync::atomic::Ordering::Acquire;
use kernel::prelude::*;

/// A request the queue cannot take now (`nvme_fail_nonready_command`, which requeues anything
/// retriable while the controller resets), except DH-HMAC-CHAP messages outside `Connecting`:
/// they end with a host path error (which the core retries at most `nvme_max_retries` times, as
/// they are submitted retriable, then the re-authentication fails). A re-authentication's messages
/// belong to the association it started on; requeued without end, they would wait for the next
/// association while error recovery waits for the re-authentication to end (`nvme_auth_stop`)
/// before it reconnects: a hang the C driver has. This way the re-authentication ends with an
/// error and the reconnect authenticates afresh.
pub(super) fn fail_nonready(mut rq: Owned<'_, RdmaMq>) -> BlkStatus {
    // (Only a passthrough request has its command in place before `setup_and_start`.)
    if rq.ctrl().nvme().state() != State::Connecting
        && rq.is_passthrough()
        && rq.with_cmd(|c| capsule::is_auth(c))
    {
        return rq.host_path_error();
    }
    rq.fail_nonready()
}

/// Why a started request that was not sent (`err`: its mapping or post failed, and what it had
/// mapped is released) is not completed at once: blk-mq retries it later (a lack of resources:
/// `ENOMEM`, an empty MR pool's `EAGAIN`), or it ends with an I/O error (anything else). A host
/// path error (`EIO`) is neither: the caller completes it.
fn unsent_kind(q: &Queue, err: Error) -> BlkStatus {
    if err == ENOMEM || err == EAGAIN {
        q.stats.count(Counter::ResourceRetries, 1);
        BlkStatus::RESOURCE
    } else {
        BlkStatus::IOERR
    }
}

/// What becomes of a started request that was not sent (see [`unsent_kind`]): the status
/// `queue_rq` returns for it.
pub(super) fn unsent_status(q: &Queue, mut rq: Owned<'_, RdmaMq>, err: Error) -> BlkStatus {
    if err == EIO {
        return rq.host_path_error();
    }
    rq.cleanup_cmd();
    unsent_kind(q, err)
}

/// [`unsent_status`] outside `queue_rq`, where no status can be returned: the request is
/// requeued (a lack of resources) or ended here.
pub(super) fn fail_unsent(q: &Queue, mut rq: Owned<'_, RdmaMq>, err: Error) {
    if err == EIO {
        let _ = rq.host_path_error();
        return;
    }
    rq.cleanup_cmd();
    match unsent_kind(q, err) {
        BlkStatus::RESOURCE => rq.requeue_unsent(),
        st => rq.end_unsent(st),
    }
}

/// Posts a batch of `queue_rqs` ([`SendBatch::post`]) of controller `ctrl`'s queue `q`; each
/// request not posted is released and failed as `queue_rq` fails one whose post failed.
pub(super) fn post_batch(q: &Queue, ctrl: &Ctrl, b: &mut SendBatch<'_, RdmaMq>) {
    let n = b.len();
    let (posted, r) = b.post(|rq, e| {
        unmap_request(&rq);
        fail_unsent(q, rq, e);
    });
    if let Err(e) = r {
        dev_err!(
            ctrl,
            "nvme_rdma_post_send failed with error code {} ({} of {} requests posted)\n",
            e.to_errno(),
            posted,
            n
        );
    }
    // As in `queue_rq`: a queue lost while the batch was being prepared has its started
    // requests aborted again, these among them if still in flight; read once, after the post.
    if posted > 0 && q.lost.load(Acquire) {
        ctrl.abort_queue_requests(q.qid);
    }
    q.stats.count(Counter::BatchPosts, 1);
    q.stats.count(Counter::BatchRequests, posted as u64);
}

/// A request for a queue whose connection is gone ([`Queue::lost`]), before error recovery or a
/// teardown has quiesced the queue. A Fabrics command (a Connect or DH-HMAC-CHAP message while
/// `Connecting`, a Property Get/Set) was meant for this connection and can never reach the target
/// on it: it ends with a host path error, which the core retries at most `nvme_max_retries` times
/// (each ends here at once), then the setup step fails and the reconnect logic decides. Anything
/// else waits for the next connection like any request the queue cannot take now. (The C driver
/// posts to the disconnected QP: the command waits for its timeout, and again for each retry.)
///
/// A live controller with a lost queue needs error recovery: the target's disconnect or a timeout
/// normally starts it, but a queue lost while the controller was connecting went live dead (before
/// this check, its requests were requeued for ever). The first request that meets it starts it.
pub(super) fn fail_lost(mut rq: Owned<'_, RdmaMq>) -> BlkStatus {
    if rq.ctrl().nvme().state() == State::Live {
        error_recovery(rq.ctrl());
    }
    if rq.is_passthrough() && rq.with_cmd(|c| capsule::is_fabrics(c)) {
        return rq.host_path_error();
    }
    fail_nonready(rq)
}
