// SPDX-License-Identifier: GPL-2.0

//! Stopping and freeing queues (`nvme_rdma_stop_queue`, `nvme_rdma_free_queue`), one queue at a
//! time or several with one RCU grace period per step.

#![deny(unsafe_code)]

use super::{disconnect_and_drain, ConnCm, Queue};
use crate::{
    rdma::cm::CmId,
    transport::stats::{count, Counter},
};
use core::sync::atomic::Ordering::{Relaxed, Release};
use kernel::prelude::*;

/// Waits for an RCU grace period, counted ([`Counter::TeardownRcuWaits`]).
fn wait_for_readers() {
    crate::bindings::compat::synchronize_rcu();
    count(Counter::TeardownRcuWaits, 0, 1);
}

impl Queue {
    /// Marks the queue lost; once an RCU grace period has passed after it, no `queue_rq` that saw
    /// the queue not lost can still post on it: blk-mq runs `queue_rq` of a non-blocking queue
    /// inside an RCU read-side critical section. After that, whatever `queue_rq` posted is on
    /// the QP (and a drain flushes it), and every later `queue_rq` refuses. The teardown
    /// quiesces the admin and I/O queues, but not the fabrics queue (Property Get/Set,
    /// DH-HMAC-CHAP), which shares queue 0: without the wait, one of its commands could post on
    /// the QP after its drain, or while it is destroyed (the C driver has
    /// the race). Returns whether there is a connection, that is whether the wait is needed
    /// (without one, no `queue_rq` has a QP to post on).
    fn set_lost(&self, conn: &Option<CmId<ConnCm>>) -> bool {
        self.lost.store(true, Release);
        conn.is_some()
    }

    /// Marks the queue lost and waits for the grace period ([`Queue::set_lost`]).
    fn mark_lost(&self, conn: &Option<CmId<ConnCm>>) {
        if self.set_lost(conn) {
            wait_for_readers();
        }
    }

    /// Disconnects and drains the queue if it is live (`nvme_rdma_stop_queue`).
    pub(in crate::transport) fn stop(&self) {
        let conn = self.conn.lock();
        self.mark_lost(&conn);
        self.disconnect_live(&conn);
    }

    /// Stops several queues with one grace period for all of them ([`Queue::stop`] waits for one
    /// each). The caller owns the queues' setup and teardown, so no connection comes or goes
    /// between the two passes.
    pub(in crate::transport) fn stop_all<'a>(queues: impl Iterator<Item = &'a Queue> + Clone) {
        let mut wait = false;
        for q in queues.clone() {
            wait |= q.set_lost(&q.conn.lock());
        }
        if wait {
            wait_for_readers();
        }
        for q in queues {
            q.disconnect_live(&q.conn.lock());
        }
    }

    fn disconnect_live(&self, conn: &Option<CmId<ConnCm>>) {
        if let Some(cm) = conn.as_ref() {
            if self.live.swap(false, Relaxed) {
                disconnect_and_drain(cm);
            }
        }
    }

    /// Disconnects and drains the queue whether or not it is live (its Fabrics Connect may still
    /// be under way), so that no completion of its connection runs afterwards: before a timed-out
    /// command is ended while the controller is not live (the C driver stops only a live queue
    /// there, and a late completion could meet the ended request's next use).
    ///
    /// Once per connection: blk-mq's timeout pass ends every expired request of the queue, one
    /// after the other, and each calls this. The first stops the connection; the others find it
    /// stopped (under the connection's lock, so after the first's drain ended) and return at once
    /// instead of waiting for another grace period and drain each (the C driver, too, stops a
    /// queue once: `test_and_clear_bit(NVME_RDMA_Q_LIVE)`).
    pub(in crate::transport) fn kill(&self) {
        let conn = self.conn.lock();
        if conn
            .as_ref()
            .is_some_and(|cm| cm.handler().state.lock().stopped)
        {
            return;
        }
        self.mark_lost(&conn);
        self.live.store(false, Relaxed);
        if let Some(cm) = conn.as_ref() {
            if cm.handler().state.lock().recvs_posted {
                disconnect_and_drain(cm);
            }
        }
    }

    /// Releases the connection (`nvme_rdma_free_queue`). The queue must be stopped (or never
    /// started) and its requests cancelled.
    pub(in crate::transport) fn free(&self) {
        // Withdraws the QP from the data path, waits for its readers, destroys it.
        if let Some(cm) = self.release() {
            count(Counter::TeardownRcuWaits, 0, cm.close() as u64);
        }
    }

    /// Frees several queues ([`Queue::free`]) with one RCU grace period for all of them between
    /// withdrawing their QPs and destroying them.
    pub(in crate::transport) fn free_all<'a>(queues: impl Iterator<Item = &'a Queue>) {
        let mut ids = KVec::new();
        for q in queues {
            if let Some(cm) = q.release() {
                // Without memory for the list, `push` drops the id: it goes alone, with a grace
                // period of its own.
                let _ = ids.push(cm, GFP_KERNEL);
            }
        }
        count(Counter::TeardownRcuWaits, 0, CmId::drop_all(ids) as u64);
    }

    /// Takes the connection out of the queue, drained (if anything may still be posted) and out
    /// of the poll path, for the caller to drop.
    fn release(&self) -> Option<CmId<ConnCm>> {
        let cm = self.conn.lock().take()?;
        // Drain before withdrawing the QP from the data path: completions that still run need
        // it to return MRs and unmap commands.
        let posted = cm.handler().state.lock().recvs_posted;
        if posted && self.live.swap(false, Relaxed) {
            let _ = cm.disconnect();
        }
        if posted {
            if let Some(qp) = cm.qp() {
                qp.drain();
            }
        }
        self.poll_cq.clear();
        Some(cm)
    }
}
