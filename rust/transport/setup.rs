// SPDX-License-Identifier: GPL-2.0

//! Setting the controller up and tearing it down: admin and I/O queue setup, reset, error
//! recovery and reconnect (the `nvme_ctrl_ops` and work items of the C driver).

#![deny(unsafe_code)]

use super::{
    controller::{error_recovery, wr_error, CTRLS},
    device::max_fr_pages,
    io::RdmaMq,
    queue::{Queue, AQ_BLK_MQ_DEPTH, AQ_DEPTH},
    Ctrl, RdmaCtrl,
};
use crate::bindings::compat::prelude::*;
use crate::{
    nvme::{ctrl::CtrlOps, SetupError, State},
    proto::capsule::{self, SQE_LEN},
    rdma::{
        qp::{self, Wc},
        verbs::{DeviceRef, DmaBuf, DmaDir},
        RcuReader,
    },
};
use core::sync::atomic::{
    AtomicI32, AtomicU32,
    Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst},
};
use kernel::{
    str::CStr,
    sync::{aref::ARef, Arc, Completion},
    types::ScopeGuard,
};

/// `NVME_RDMA_MAX_QUEUE_SIZE`.
const MAX_QUEUE_SIZE: u32 = 256;

/// The result of a setup step: an NVMe status is kept for the reconnect decision.
type SetupResult<T = ()> = core::result::Result<T, SetupError>;
/// `NVME_CTRL_SGLS_KSDBDS` / `NVME_CTRL_SGLS_SAOS`.
const SGLS_KSDBDS: u32 = 1 << 2;
const SGLS_SAOS: u32 = 1 << 20;

pub(super) fn start_queue(ctrl: &Ctrl, qid: u16) -> SetupResult {
    let Some(q) = ctrl.queue(qid) else {
        return Err(EINVAL.into());
    };
    let r = if qid == 0 {
        ctrl.nvme().connect_admin_queue()
    } else {
        ctrl.nvme().connect_io_queue(qid)
    };
    match r {
        Ok(()) => {
            q.live.store(true, Release);
            Ok(())
        }
        Err(e) => {
            // Like `__nvme_rdma_stop_queue`: disconnect and drain, keep the connection for free.
            q.kill();
            dev_info!(
                ctrl,
                "failed to connect queue: {} ret={}\n",
                qid,
                e.to_raw()
            );
            Err(e)
        }
    }
}

/// Frees the I/O queues, with one RCU grace period for all of them.
pub(super) fn free_io_queues(ctrl: &Ctrl) {
    Queue::free_all(ctrl.queues.iter().skip(1).map(|q| &**q));
}

/// Stops the I/O queues, with one RCU grace period for all of them.
pub(super) fn stop_io_queues(ctrl: &Ctrl) {
    Queue::stop_all(ctrl.queues.iter().skip(1).map(|q| &**q));
}

pub(super) fn destroy_admin_queue(ctrl: &Ctrl) {
    if ctrl.aen_sqe.lock().is_some() {
        ctrl.nvme().flush_async_event_work();
        *ctrl.aen_sqe.lock() = None;
    }
    if let Some(q) = ctrl.queue(0) {
        q.free();
    }
}

pub(super) fn configure_admin_queue(ctrl: &ARef<Ctrl>, new: bool) -> SetupResult {
    let q0 = ctrl.queue(0).ok_or(EINVAL)?;
    // The admin tag set exists before queue 0 can receive and goes only once it cannot any more:
    // every response there, even one nothing asked for (before the Fabrics Connect), is looked
    // up in it (`find_rq`). The C driver connects the queue first; the price of this order is a
    // set allocated before the device's NUMA node is known (the I/O tag set still gets it).
    if new {
        ctrl.alloc_admin_tag_set::<RdmaMq>()?;
    }
    // Each step's undo is a guard, dropped in reverse order on an early return: the queue stops
    // (and its requests are cancelled) before it is freed, and it is freed before the set goes.
    let set = ScopeGuard::new(|| {
        if new {
            ctrl.remove_admin_tag_set();
        }
    });
    q0.alloc(ctrl, AQ_DEPTH)?;
    // Drains queue 0 (if it received anything) and frees it.
    let queue = ScopeGuard::new(|| destroy_admin_queue(ctrl));
    let dev = {
        let conn = q0.conn.lock();
        let cm = conn.as_ref().ok_or(ENOTCONN)?;
        cm.qp_res().ok_or(ENOTCONN)?.dev.0.clone()
    };
    ctrl.nvme().set_numa_node(dev.device().numa_node());
    let fr = max_fr_pages(dev.device());
    ctrl.max_fr_pages.store(fr, Relaxed);
    let aen = DmaBuf::new(
        DeviceRef::get(dev.device()).ok_or(ENODEV)?,
        SQE_LEN,
        DmaDir::ToDevice,
    )?;
    *ctrl.aen_sqe.lock() = Some(aen);
    // On failure `start_queue` disconnects and drains the queue itself.
    start_queue(ctrl, 0)?;
    let started = ScopeGuard::new(|| {
        q0.stop();
        ctrl.nvme().cancel_admin();
    });
    ctrl.nvme().enable()?;
    ctrl.nvme().set_limits(fr, fr << (12 - 9));
    ctrl.nvme().unquiesce_admin();
    if let Err(e) = ctrl.nvme().init_finish() {
        ctrl.nvme().quiesce_admin();
        ctrl.nvme().sync_admin();
        return Err(e);
    }
    started.dismiss();
    queue.dismiss();
    set.dismiss();
    Ok(())
}

/// Allocates and connects one I/O queue.
pub(super) fn setup_io_queue(ctrl: &ARef<Ctrl>, qid: u32, qsize: u32) -> SetupResult {
    let qid = u16::try_from(qid).map_err(|_| EINVAL)?;
    let q = ctrl.queue(qid).ok_or(EINVAL)?;
    q.alloc(ctrl, qsize)?;
    start_queue(ctrl, qid)
}

/// What the queues set up in parallel share.
#[pin_data]
pub(super) struct SetupCtx {
    /// Queues still being set up.
    pub(super) remaining: AtomicU32,
    /// The first error (`SetupError::to_raw`), 0 if none.
    pub(super) err: AtomicI32,
    #[pin]
    pub(super) done: Completion,
}

impl SetupCtx {
    pub(super) fn finish(&self, r: SetupResult) {
        if let Err(e) = r {
            let _ = self.err.compare_exchange(0, e.to_raw(), AcqRel, Acquire);
        }
        if self.remaining.fetch_sub(1, AcqRel) == 1 {
            self.done.complete_all();
        }
    }
}

/// Allocates and connects I/O queues `first..last` (`nvme_rdma_setup_io_queues`), all at once:
/// each queue's address/route resolution, connection and Fabrics Connect run in a work item of
/// the module's setup workqueue, so connecting N queues takes about as long as one. That
/// workqueue has a rescuer (`nvme::SetupWq`): the reset and reconnect work waiting here runs on
/// nvme-core's `WQ_MEM_RECLAIM` queues and must not depend on a workqueue that can stall under
/// memory pressure (the C driver's `async_schedule_domain` uses `system_unbound_wq`, which can).
/// Every queue's connection is bounded in time, so the wait is too. On failure the caller stops,
/// cancels and frees.
pub(super) fn setup_io_queues(ctrl: &ARef<Ctrl>, first: u32, last: u32, qsize: u32) -> SetupResult {
    if last <= first + 1 {
        return (first..last).try_for_each(|qid| setup_io_queue(ctrl, qid, qsize));
    }
    let ctx = Arc::pin_init(
        pin_init!(SetupCtx {
            remaining: AtomicU32::new(last - first),
            err: AtomicI32::new(0),
            done <- Completion::new(),
        }),
        GFP_KERNEL,
    )?;
    for qid in first..last {
        let (c, x) = (ctrl.clone(), ctx.clone());
        let spawned = crate::nvme::spawn_setup(move || {
            x.finish(setup_io_queue(&c, qid, qsize));
        });
        if spawned.is_err() {
            ctx.finish(Err(ENOMEM.into()));
        }
    }
    ctx.done.wait_for_completion();
    SetupError::from_raw(ctx.err.load(Acquire)).map_or(Ok(()), Err)
}

pub(super) fn configure_io_queues(ctrl: &ARef<Ctrl>, new: bool) -> SetupResult {
    let c = ctrl.nvme();
    let want = c.opts().nr_io_queues();
    let nr = c.negotiate_queue_count(want)?;
    if nr == 0 {
        dev_err!(ctrl, "unable to set any I/O queues\n");
        return Err(ENOMEM.into());
    }
    // Never more than the queues this controller was created with.
    let nr = nr.min(ctrl.queues.len() as u32 - 1);
    c.set_queue_count(nr + 1);
    dev_info!(ctrl, "creating {} I/O queues.\n", nr);
    let map = c.opts().set_io_queues(nr);
    for (a, v) in ctrl.io_queues.iter().zip(map) {
        a.store(v, Relaxed);
    }
    if new {
        let maps = if c.opts().nr_poll_queues() > 0 { 3 } else { 2 };
        ctrl.alloc_io_tag_set::<RdmaMq>(maps)?;
    }
    // Undoes everything above (on an early return).
    let undo = ScopeGuard::new(|| {
        stop_io_queues(ctrl);
        c.cancel_io();
        if new {
            ctrl.remove_io_tag_set();
        }
        free_io_queues(ctrl);
    });
    // Only the queues the tag set has hardware contexts for: on a reconnect the target may
    // grant a different count than before.
    let qsize = u32::from(c.sqsize()) + 1;
    let nr_queues = (ctrl.io_nr_hw_queues() + 1).min(c.queue_count());
    setup_io_queues(ctrl, 1, nr_queues, qsize)?;
    // From here the I/O queues may be unquiesced: a failure quiesces them again before the undo.
    let requiesce = ScopeGuard::new(|| {
        c.quiesce_io();
        c.sync_io();
    });
    if !new {
        c.start_freeze();
        c.unquiesce_io();
        if !c.wait_freeze_timeout() {
            // Likely stuck: fail this attempt rather than hang.
            c.unfreeze();
            return Err(ENODEV.into());
        }
        let before = ctrl.io_nr_hw_queues();
        ctrl.update_io_nr_hw_queues(c.queue_count() - 1);
        c.unfreeze();
        if before != ctrl.io_nr_hw_queues() {
            dev_info!(
                ctrl,
                "I/O hardware queues: {} -> {}\n",
                before,
                ctrl.io_nr_hw_queues()
            );
        }
    }
    // More queues than before (a reconnect): set the new ones up now.
    let hw = ctrl.io_nr_hw_queues() + 1;
    if hw > nr_queues {
        setup_io_queues(ctrl, nr_queues, hw, qsize)?;
    }
    requiesce.dismiss();
    undo.dismiss();
    Ok(())
}

pub(super) fn teardown_admin_queue(ctrl: &Ctrl, remove: bool) {
    let c = ctrl.nvme();
    c.quiesce_admin();
    c.sync_admin();
    if let Some(q) = ctrl.queue(0) {
        q.stop();
    }
    if ctrl.has_admin_tag_set() {
        c.cancel_admin();
    }
    if remove {
        c.unquiesce_admin();
        ctrl.remove_admin_tag_set();
    }
    destroy_admin_queue(ctrl);
}

pub(super) fn teardown_io_queues(ctrl: &Ctrl, remove: bool) {
    let c = ctrl.nvme();
    if c.queue_count() > 1 && ctrl.has_io_tag_set() {
        c.quiesce_io();
        c.sync_io();
        stop_io_queues(ctrl);
        c.cancel_io();
        if remove {
            c.unquiesce_io();
            ctrl.remove_io_tag_set();
        }
    }
    free_io_queues(ctrl);
}

pub(super) fn setup_ctrl(ctrl: &ARef<Ctrl>, new: bool) -> SetupResult {
    configure_admin_queue(ctrl, new)?;
    let c = ctrl.nvme();
    let admin = ScopeGuard::new(|| {
        c.stop_keep_alive();
        teardown_admin_queue(ctrl, new);
    });
    if c.icdoff() != 0 {
        dev_err!(ctrl, "icdoff is not supported!\n");
        return Err(EOPNOTSUPP.into());
    }
    if c.sgls() & SGLS_KSDBDS == 0 {
        dev_err!(ctrl, "Mandatory keyed sgls are not supported!\n");
        return Err(EOPNOTSUPP.into());
    }
    let opts_qs = c.opts().queue_size();
    if opts_qs > u32::from(c.sqsize()) + 1 {
        dev_warn!(
            ctrl,
            "queue_size {} > ctrl sqsize {}, clamping down\n",
            opts_qs,
            u32::from(c.sqsize()) + 1
        );
    }
    if u32::from(c.sqsize()) + 1 > MAX_QUEUE_SIZE {
        dev_warn!(
            ctrl,
            "ctrl sqsize {} > max queue size {}, clamping down\n",
            u32::from(c.sqsize()) + 1,
            MAX_QUEUE_SIZE
        );
        c.set_sqsize((MAX_QUEUE_SIZE - 1) as u16);
    }
    if c.sqsize() + 1 > c.maxcmd() {
        dev_warn!(
            ctrl,
            "sqsize {} > ctrl maxcmd {}, clamping down\n",
            u32::from(c.sqsize()) + 1,
            c.maxcmd()
        );
        c.set_sqsize(c.maxcmd().saturating_sub(1));
    }
    if c.sgls() & SGLS_SAOS != 0 {
        ctrl.use_inline_data.store(true, Relaxed);
    }
    if c.queue_count() > 1 {
        configure_io_queues(ctrl, new)?;
    }
    // A queue whose connection was lost during the setup (the target disconnected it, or the
    // RDMA device went) would refuse every command once live, with nothing to start recovery:
    // fail this attempt instead.
    if let Some(qid) = ctrl.lost_queue() {
        dev_info!(ctrl, "queue {} lost its connection while connecting\n", qid);
        teardown_io_queues(ctrl, new);
        return Err(ENOTCONN.into());
    }
    if !c.change_state(State::Live) {
        // Deletion started meanwhile.
        teardown_io_queues(ctrl, new);
        return Err(EINVAL.into());
    }
    admin.dismiss();
    c.start();
    // Paired with the SeqCst swap of `ConnCm::lost`: a queue lost from here on saw `Live` there
    // and started error recovery itself; one lost between the look above and going live is seen
    // here.
    core::sync::atomic::fence(SeqCst);
    if let Some(qid) = ctrl.lost_queue() {
        dev_warn!(ctrl, "queue {} lost its connection while going live\n", qid);
        error_recovery(ctrl);
    }
    Ok(())
}

pub(super) fn shutdown_ctrl(ctrl: &Ctrl, shutdown: bool) {
    teardown_io_queues(ctrl, shutdown);
    let c = ctrl.nvme();
    c.quiesce_admin();
    if ctrl.queue(0).is_some_and(|q| q.live.load(Relaxed)) {
        c.disable(shutdown);
    }
    teardown_admin_queue(ctrl, shutdown);
}

/// After a failed setup (`err`) or a lost connection (`None`): try again after
/// `reconnect_delay`, or delete the controller when `nvmf_should_reconnect` says no more (the
/// target refused with Do Not Retry, authentication refused, `ctrl_loss_tmo` reached).
pub(super) fn reconnect_or_remove(ctrl: &Ctrl, err: Option<SetupError>) {
    let c = ctrl.nvme();
    if c.state() != State::Connecting {
        return;
    }
    if c.should_reconnect(err) {
        let d = c.opts().reconnect_delay();
        dev_info!(ctrl, "Reconnecting in {} seconds...\n", d);
        ctrl.queue_reconnect(d);
    } else {
        let _ = c.delete();
    }
}

impl CtrlOps for RdmaCtrl {
    const NAME: &'static CStr = c"rdma";

    fn submit_async_event(ctrl: &Ctrl) {
        let Some(q) = ctrl.queue(0) else { return };
        let mut aen = ctrl.aen_sqe.lock();
        let Some(buf) = Option::as_mut(&mut *aen) else {
            return;
        };
        buf.with_cpu(|c| c.copy_from_slice(&capsule::async_event(AQ_BLK_MQ_DEPTH)));
        // The QP is used inside a read-side section (its id withdraws it, then waits for one,
        // before destroying it); the buffer's lock is a mutex, so it is taken first.
        let g = kernel::sync::rcu::read_lock();
        let Some(qp) = q.qp.get(RcuReader::of(&g)) else {
            return;
        };
        let mut sges = qp::SgeList::<1>::new();
        let posted = sges
            .push_buf(qp, buf)
            .and_then(|()| qp.post_send(ctrl.aen_cqe(), &sges));
        drop(g);
        if let Err(e) = posted {
            dev_err!(
                ctrl,
                "posting the async event request failed ({})\n",
                e.to_errno()
            );
        }
    }

    fn aen_send_done(ctrl: &Ctrl, wc: &Wc) {
        if !wc.is_ok() {
            wr_error(ctrl, 0, wc, "ASYNC");
        }
    }

    fn delete_ctrl(ctrl: &Ctrl) {
        {
            let mut list = CTRLS.lock();
            if let Some(i) = list.iter().position(|c| core::ptr::eq(&**c, ctrl)) {
                let _ = list.remove(i);
                if list.is_empty() {
                    *list = KVec::new();
                }
            }
        }
        shutdown_ctrl(ctrl, true);
    }

    fn stop_ctrl(ctrl: &Ctrl) {
        ctrl.flush_err_work();
        ctrl.cancel_reconnect_sync();
    }

    fn reset_work(ctrl: &Ctrl) {
        let c = ctrl.nvme();
        c.stop();
        shutdown_ctrl(ctrl, false);
        if !c.change_state(State::Connecting) {
            return;
        }
        if let Err(e) = setup_ctrl(&ARef::from(ctrl), false) {
            c.inc_reconnects();
            reconnect_or_remove(ctrl, Some(e));
        }
    }

    fn err_work(ctrl: &Ctrl) {
        let c = ctrl.nvme();
        c.stop_keep_alive();
        c.flush_async_event_work();
        teardown_io_queues(ctrl, false);
        c.unquiesce_io();
        teardown_admin_queue(ctrl, false);
        c.unquiesce_admin();
        // Re-authentication work (queued by a target asking for it, or a new key written to
        // sysfs) must not run on the torn-down admin queue, nor beside the reconnect's own
        // authentication on the same DH-HMAC-CHAP context (`nvme_auth_stop`, as C does here).
        c.auth_stop();
        if !c.change_state(State::Connecting) {
            return;
        }
        reconnect_or_remove(ctrl, None);
    }

    fn reconnect_work(ctrl: &Ctrl) {
        let c = ctrl.nvme();
        let n = c.inc_reconnects();
        match setup_ctrl(&ARef::from(ctrl), false) {
            Ok(()) => {
                dev_info!(ctrl, "Successfully reconnected ({} attempts)\n", n);
                c.reset_reconnects();
            }
            Err(e) => {
                dev_info!(
                    ctrl,
                    "Failed reconnect attempt {}/{}\n",
                    n,
                    c.opts().max_reconnects()
                );
                reconnect_or_remove(ctrl, Some(e));
            }
        }
    }
}
