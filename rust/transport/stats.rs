// SPDX-License-Identifier: GPL-2.0

//! Data path counters, shown in debugfs as `rnvme_rdma/stats` (one `name value` line each).
//!
//! They make the mapping decisions observable (tests prove with them that small writes go
//! in-capsule and large I/O through fast registration) at the cost of one relaxed atomic add per
//! decision.

#![deny(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Module-wide data path counters.
pub(crate) struct Counters {
    /// Commands sent without data (null SGL).
    pub(crate) no_data: AtomicU64,
    /// Writes sent as in-capsule data.
    pub(crate) inline_writes: AtomicU64,
    /// Fast memory registrations (REG_MR).
    pub(crate) mr_registrations: AtomicU64,
    /// Responses that invalidated the MR remotely (SEND_WITH_INVALIDATE).
    pub(crate) remote_invalidations: AtomicU64,
    /// Local invalidations posted.
    pub(crate) local_invalidations: AtomicU64,
    /// Completions reaped by blk-mq polling (poll queues), not by softirq.
    pub(crate) polled_completions: AtomicU64,
    /// Requests handed back to blk-mq for a later retry (`BLK_STS_RESOURCE`: an empty MR pool, a
    /// mapping or a post that failed for lack of resources). Only failure paths count here.
    pub(crate) resource_retries: AtomicU64,
}

/// The counters.
pub(crate) static STATS: Counters = Counters {
    no_data: AtomicU64::new(0),
    inline_writes: AtomicU64::new(0),
    mr_registrations: AtomicU64::new(0),
    remote_invalidations: AtomicU64::new(0),
    local_invalidations: AtomicU64::new(0),
    polled_completions: AtomicU64::new(0),
    resource_retries: AtomicU64::new(0),
};

/// The debugfs view of [`STATS`].
pub(crate) struct Stats;

impl core::fmt::Debug for Stats {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = &STATS;
        writeln!(f, "no_data {}", s.no_data.load(Relaxed))?;
        writeln!(f, "inline_writes {}", s.inline_writes.load(Relaxed))?;
        writeln!(f, "mr_registrations {}", s.mr_registrations.load(Relaxed))?;
        writeln!(
            f,
            "remote_invalidations {}",
            s.remote_invalidations.load(Relaxed)
        )?;
        writeln!(
            f,
            "local_invalidations {}",
            s.local_invalidations.load(Relaxed)
        )?;
        writeln!(
            f,
            "polled_completions {}",
            s.polled_completions.load(Relaxed)
        )?;
        write!(f, "resource_retries {}", s.resource_retries.load(Relaxed))
    }
}
