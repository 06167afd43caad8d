// SPDX-License-Identifier: GPL-2.0

//! A controller's tag sets (`nvme_alloc_admin_tag_set`, `nvme_alloc_io_tag_set`), with the
//! transport's [`MqOps`], and the lookup of a request by command identifier.
//!
//! C headers: [`include/linux/blk-mq.h`](srctree/include/linux/blk-mq.h),
//! [`drivers/nvme/host/nvme.h`](srctree/drivers/nvme/host/nvme.h)

use super::{
    ctrl::{Controller, CtrlOps},
    mq::{MqOps, MqVtable, Pdu, Request},
};
use crate::bindings::raw;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use kernel::{error::to_result, prelude::*};

impl<T: CtrlOps> Controller<T> {
    /// Allocates the admin tag set (and the admin and fabrics request queues) with `M`'s ops
    /// (`EBUSY` if it exists). Undone by [`Controller::remove_admin_tag_set`].
    pub(crate) fn alloc_admin_tag_set<M: MqOps<CtrlData = T>>(&self) -> Result {
        let _sets = self.sets.lock();
        if self.admin_set.load(Relaxed) {
            return Err(EBUSY);
        }
        let ops: &'static raw::blk_mq_ops = &MqVtable::<M, true>::OPS;
        // SAFETY: the controller is initialised; the tag set storage is pinned inside it and
        // outlives the set (removed before the controller is freed); `ops` is static.
        to_result(unsafe {
            raw::nvme_alloc_admin_tag_set(
                self.nctrl.get(),
                self.admin_tag_set.get(),
                ops,
                Pdu::<M>::cmd_size(),
            )
        })?;
        self.admin_set.store(true, Relaxed);
        Ok(())
    }

    /// Whether the admin tag set exists.
    pub(crate) fn has_admin_tag_set(&self) -> bool {
        self.admin_set.load(Relaxed)
    }

    /// Frees the admin tag set and queues, if they exist.
    pub(crate) fn remove_admin_tag_set(&self) {
        let _sets = self.sets.lock();
        if self.admin_set.swap(false, Relaxed) {
            // SAFETY: the controller is initialised and its admin tag set allocated (the flag).
            unsafe { raw::nvme_remove_admin_tag_set(self.nctrl.get()) };
        }
    }

    /// Allocates the I/O tag set with `nr_maps` queue maps (2, or 3 with poll queues; `EBUSY`
    /// if it exists). Undone by [`Controller::remove_io_tag_set`].
    pub(crate) fn alloc_io_tag_set<M: MqOps<CtrlData = T>>(&self, nr_maps: u32) -> Result {
        let _sets = self.sets.lock();
        if self.io_set.load(Relaxed) {
            return Err(EBUSY);
        }
        let ops: &'static raw::blk_mq_ops = &MqVtable::<M, false>::OPS;
        // SAFETY: as for the admin tag set.
        to_result(unsafe {
            raw::nvme_alloc_io_tag_set(
                self.nctrl.get(),
                self.tag_set.get(),
                ops,
                nr_maps,
                Pdu::<M>::cmd_size(),
            )
        })?;
        self.io_set.store(true, Relaxed);
        Ok(())
    }

    /// Whether the I/O tag set exists.
    pub(crate) fn has_io_tag_set(&self) -> bool {
        self.io_set.load(Relaxed)
    }

    /// The number of hardware queues of the I/O tag set (0 if it does not exist).
    pub(crate) fn io_nr_hw_queues(&self) -> u32 {
        if !self.io_set.load(Relaxed) {
            return 0;
        }
        // SAFETY: the set is allocated (the flag); `nr_hw_queues` is written only by the setup
        // path that also calls this (allocation, `update_io_nr_hw_queues`).
        unsafe { (*self.tag_set.get()).nr_hw_queues }
    }

    /// Resizes the I/O tag set to `nr` hardware queues (`blk_mq_update_nr_hw_queues`): a
    /// reconnect may get a different queue count. The I/O queues must be frozen.
    ///
    /// The update reallocates the set's `tags` array and frees the tags of hardware queues that
    /// go, while the I/O queues are connected: blk-mq serialises it against its own users, not
    /// against a response arriving on a queue (nothing is in flight on a frozen queue, but a
    /// target may send one anyway). So the lookups of the receive path ([`Controller::find_rq`])
    /// and of the queues' own aborts ([`Controller::abort_queue_requests`]), each inside an RCU
    /// read-side section, find nothing while `io_resizing` is set; the grace period between
    /// setting it and the update lets every lookup that began before end. (C's
    /// `nvme_find_rq` reads the array unguarded.)
    pub(crate) fn update_io_nr_hw_queues(&self, nr: u32) {
        if !self.io_set.load(Relaxed) {
            return;
        }
        let nr = i32::try_from(nr).unwrap_or(i32::MAX);
        self.io_resizing.store(true, Relaxed);
        crate::bindings::compat::synchronize_rcu();
        // SAFETY: the set is allocated (the flag, cleared only by `remove_io_tag_set` on the same
        // setup path); blk-mq serialises the update against the set's queues, and no lookup of
        // the receive or abort paths reads the set until `io_resizing` is cleared (above).
        unsafe { raw::blk_mq_update_nr_hw_queues(self.tag_set.get(), nr) };
        // Release: a lookup that sees the flag clear sees the updated set.
        self.io_resizing.store(false, Release);
    }

    /// Frees the I/O tag set, if it exists.
    pub(crate) fn remove_io_tag_set(&self) {
        let _sets = self.sets.lock();
        if self.io_set.swap(false, Relaxed) {
            // SAFETY: the controller is initialised and its I/O tag set allocated (the flag).
            unsafe { raw::nvme_remove_io_tag_set(self.nctrl.get()) };
        }
    }

    /// Hands the started requests of queue `qid` (0: the admin queue) to the transport's timeout
    /// handler now (`blk_abort_request`), as if their timeout had expired. For a queue whose
    /// connection is gone when no error recovery will end its commands: they end now, the way
    /// their timeout would end them, instead of a command timeout later. Nothing happens if the
    /// tag set does not exist (any more).
    pub(crate) fn abort_requests(&self, qid: u16) {
        let _sets = self.sets.lock();
        let (set, hctx_idx) = if qid == 0 {
            if !self.admin_set.load(Relaxed) {
                return;
            }
            // The admin tag set has one hardware queue: all of it.
            (self.admin_tag_set.get(), -1)
        } else {
            if !self.io_set.load(Relaxed) {
                return;
            }
            (self.tag_set.get(), i32::from(qid) - 1)
        };
        // SAFETY: the set is allocated (its flag) and cannot be removed while `sets` is held;
        // the walk only reads the set and schedules the request queues' timeout work.
        unsafe { raw::rnvme_tagset_abort(set, hctx_idx) };
    }

    /// [`Controller::abort_requests`] for queue `qid`'s own paths, where the tag-set lock cannot
    /// be taken: its completion handler (softirq or a poll) and its `queue_rq`/`queue_rqs` (an
    /// RCU read-side section). The tag set exists there: a queue receives only while the tag set
    /// it completes into is allocated (the reason [`Controller::find_rq`] relies on), and blk-mq
    /// dispatches a request only through the tag set that holds it. The walk takes a reference on
    /// each request it visits, so it never acts on a request that ended meanwhile.
    pub(crate) fn abort_queue_requests(&self, qid: u16) {
        // (A rare path: its own read-side section, whatever the caller holds.)
        let _rcu = kernel::sync::rcu::read_lock();
        let (set, hctx_idx) = if qid == 0 {
            (self.admin_tag_set.get(), -1)
        } else {
            // A resize frees tags the walk would read; nothing is in flight on a frozen queue.
            if self.io_resizing.load(Acquire) {
                return;
            }
            (self.tag_set.get(), i32::from(qid) - 1)
        };
        // From queue `qid`'s receive or submission path the set is allocated (`find_rq`; a
        // dispatch is through its set); the walk takes only the tags' spinlock and schedules
        // timeout work, both allowed in softirq and under `rcu_read_lock`.
        // SAFETY: the set is allocated (above) and, for the I/O set, not being resized (the
        // flag, read in the read-side section `update_io_nr_hw_queues` waits for).
        unsafe { raw::rnvme_tagset_abort(set, hctx_idx) };
    }

    /// Looks up the in-flight request of `command_id` on queue `qid` (0: admin); `None` if the
    /// tag is out of range, the command's generation does not match, or the request is not in
    /// flight. (`nvme_find_rq` does not check the last: a response for an ended request whose
    /// generation did not advance, one cancelled by error recovery or timed out, found it idle
    /// and ended it again: the misbehave group's `late` test.)
    ///
    /// Called for the responses a queue receives. The transport allocates each tag set before any
    /// queue that completes into it can receive (the admin tag set before queue 0 connects, the
    /// I/O tag set before the I/O queues), and removes it only after those queues are drained.
    ///
    /// `_rcu`: the lookup is inside an RCU read-side section, so a resize of the I/O tag set
    /// either waits for it or is seen by it ([`Controller::update_io_nr_hw_queues`]). The request
    /// it returns is in flight, so no resize can begin before it ends (its queue is frozen
    /// first).
    pub(crate) fn find_rq<M: MqOps<CtrlData = T>>(
        &self,
        qid: u16,
        command_id: u16,
        _rcu: crate::rdma::RcuReader<'_>,
    ) -> Option<&Request<M>> {
        let (set, idx) = if qid == 0 {
            (self.admin_tag_set.get(), 0)
        } else {
            // Acquire: seen clear after a resize, the resized set is seen too (a plain load on
            // x86); seen clear before one, the grace period waits for this section.
            if self.io_resizing.load(Acquire) {
                return None;
            }
            (self.tag_set.get(), u32::from(qid) - 1)
        };
        // The set is zeroed until allocated, and its `tags` is null again once freed (so no
        // hardware queue is found then); a queue receives only after the allocation (above).
        // SAFETY: as just said; `nr_hw_queues` bounds `idx`, and the I/O set is not being
        // resized (the flag, read in the read-side section `_rcu`).
        let rq = unsafe {
            if idx >= (*set).nr_hw_queues || (*set).tags.is_null() {
                return None;
            }
            let tags = *(*set).tags.add(idx as usize);
            if tags.is_null() {
                return None;
            }
            // `nvme_find_rq` (a static inline) read here: the tag's request, whose generation
            // must be the command identifier's. Anything else goes to the C function, which says
            // what is wrong (ratelimited) and finds nothing.
            let tag = u32::from(command_id & 0xfff);
            let rq = if tag < (*tags).nr_tags {
                *(*tags).rqs.add(tag as usize)
            } else {
                core::ptr::null_mut()
            };
            // SAFETY (of `from_raw_pub`): a request of our tag set `M` (the caller names the ops
            // of its tag sets), valid while the tag set is.
            if !rq.is_null() && Request::<M>::from_raw_pub(rq).genctr() & 0xf == command_id >> 12 {
                rq
            } else {
                raw::rnvme_nvme_find_rq(tags, command_id)
            }
        };
        let in_flight = !rq.is_null() && {
            // SAFETY: `rq` is a request of the set (valid while the set is); its state is read as
            // `blk_mq_rq_state` does (`READ_ONCE`), since blk-mq changes it concurrently.
            let state = unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*rq).state)) };
            state == raw::mq_rq_state_MQ_RQ_IN_FLIGHT
        };
        if !in_flight {
            return None;
        }
        // SAFETY: a request of our tag set `M` (the caller names the ops of its tag sets), in
        // flight.
        Some(unsafe { Request::from_raw_pub(rq) })
    }
}
