// SPDX-License-Identifier: GPL-2.0

//! Data path counters, shown in debugfs as `rnvme_rdma/stats` (one `name value` line each).
//!
//! They make the mapping decisions observable (tests prove with them that small writes go
//! in-capsule and large I/O through fast registration). Each queue adds to cache lines of its
//! own (a relaxed add), one for what its submissions count and one for what its completions
//! count; a read sums the lines. blk-mq gives each hardware queue its own CPUs, and a queue's
//! completions run where its CQ's vector does, so each line is written from one side of one
//! queue, as C's per-queue state is, without asking for the CPU id on every count. The adds stay
//! atomic, so a line shared (queues of two controllers, more queues than lines) loses nothing.

#![deny(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What is counted.
#[derive(Clone, Copy)]
pub(crate) enum Counter {
    /// Commands sent without data (null SGL).
    NoData,
    /// Writes sent as in-capsule data.
    InlineWrites,
    /// Fast memory registrations (REG_MR).
    MrRegistrations,
    /// Responses that invalidated the MR remotely (SEND_WITH_INVALIDATE).
    RemoteInvalidations,
    /// Local invalidations posted.
    LocalInvalidations,
    /// Local invalidations not posted because the queue was being stopped: the request is left
    /// to the teardown's cancel (see `process_rsp`).
    LocalInvalidationsSkipped,
    /// Completions reaped by blk-mq polling (poll queues), not by softirq.
    PolledCompletions,
    /// Requests handed back to blk-mq for a later retry (`BLK_STS_RESOURCE`: an empty MR pool, a
    /// mapping or a post that failed for lack of resources). Only failure paths count here.
    ResourceRetries,
    /// RCU grace periods waited for while stopping or freeing queues (before a stopped queue's
    /// drain, before a QP is destroyed). Teardown only: a controller's teardown waits for one
    /// per step over all its I/O queues, and one per step for its admin queue.
    TeardownRcuWaits,
    /// Calls posting a batch of requests submitted together (`queue_rqs`: a plug's requests).
    BatchPosts,
    /// Requests posted in those calls (each would have been a call of its own in `queue_rq`).
    BatchRequests,
}

/// Every counter, in the order of the stats file.
const ALL: [(Counter, &str); 11] = [
    (Counter::NoData, "no_data"),
    (Counter::InlineWrites, "inline_writes"),
    (Counter::MrRegistrations, "mr_registrations"),
    (Counter::RemoteInvalidations, "remote_invalidations"),
    (Counter::LocalInvalidations, "local_invalidations"),
    (
        Counter::LocalInvalidationsSkipped,
        "local_invalidations_skipped",
    ),
    (Counter::PolledCompletions, "polled_completions"),
    (Counter::ResourceRetries, "resource_retries"),
    (Counter::TeardownRcuWaits, "teardown_rcu_waits"),
    (Counter::BatchPosts, "batch_posts"),
    (Counter::BatchRequests, "batch_requests"),
];

/// Lines: two per queue id (ids beyond share them modulo).
const LINES: usize = 64;

impl Counter {
    /// Whether the completion side of a queue counts this (else its submission side).
    const fn on_completion(self) -> bool {
        matches!(
            self,
            Counter::RemoteInvalidations
                | Counter::LocalInvalidations
                | Counter::LocalInvalidationsSkipped
        )
    }
}

/// One line of counters, alone on its cache line.
#[repr(align(64))]
struct Line([AtomicU64; ALL.len()]);

static LINE: [Line; LINES] = [const { Line([const { AtomicU64::new(0) }; ALL.len()]) }; LINES];

/// The line of queue `qid`'s submission side (`completion`: its completion side).
const fn line(qid: u16, completion: bool) -> &'static Line {
    &LINE[(qid as usize * 2 + completion as usize) % LINES]
}

/// Adds `n` to counter `c`, for queue `qid` (on that queue's submission or completion line).
pub(crate) fn count(c: Counter, qid: u16, n: u64) {
    Side(line(qid, c.on_completion())).count(c, n);
}

/// One side of one queue: its line, found once when the queue (or its receive ring) is set up,
/// so that a count on the data path is one add at a known address.
#[derive(Clone, Copy)]
pub(crate) struct Side(&'static Line);

impl Side {
    /// What queue `qid`'s submissions count (`queue_rq`, polling).
    pub(crate) const fn submission(qid: u16) -> Self {
        Self(line(qid, false))
    }

    /// What queue `qid`'s completions count.
    pub(crate) const fn completion(qid: u16) -> Self {
        Self(line(qid, true))
    }

    /// Adds `n` to counter `c`. (A counter of the other side counted here still adds up in the
    /// totals; the sides only keep the lines apart.)
    #[inline(always)]
    pub(crate) fn count(self, c: Counter, n: u64) {
        self.0 .0[c as usize].fetch_add(n, Relaxed);
    }
}

/// The total of counter `c` over every line.
pub(crate) fn total(c: Counter) -> u64 {
    LINE.iter().map(|l| l.0[c as usize].load(Relaxed)).sum()
}

/// The debugfs view of the counters.
pub(crate) struct Stats;

impl core::fmt::Debug for Stats {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, (c, name)) in ALL.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{} {}", name, total(*c))?;
        }
        Ok(())
    }
}
