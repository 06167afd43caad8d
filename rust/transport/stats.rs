// SPDX-License-Identifier: GPL-2.0

//! Data path counters, shown in debugfs as `rnvme_rdma/stats` (one `name value` line each).
//!
//! They make the mapping decisions observable (tests prove with them that small writes go
//! in-capsule and large I/O through fast registration). Each CPU adds to its own cache line (a
//! relaxed add, no line shared between CPUs on the data path); a read sums the lines.

#![deny(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use kernel::cpu::CpuId;

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
    /// Completions reaped by blk-mq polling (poll queues), not by softirq.
    PolledCompletions,
    /// Requests handed back to blk-mq for a later retry (`BLK_STS_RESOURCE`: an empty MR pool, a
    /// mapping or a post that failed for lack of resources). Only failure paths count here.
    ResourceRetries,
}

/// Every counter, in the order of the stats file.
const ALL: [(Counter, &str); 7] = [
    (Counter::NoData, "no_data"),
    (Counter::InlineWrites, "inline_writes"),
    (Counter::MrRegistrations, "mr_registrations"),
    (Counter::RemoteInvalidations, "remote_invalidations"),
    (Counter::LocalInvalidations, "local_invalidations"),
    (Counter::PolledCompletions, "polled_completions"),
    (Counter::ResourceRetries, "resource_retries"),
];

/// Per-CPU lines (CPUs beyond share them modulo; the adds stay atomic).
const LINES: usize = 64;

/// One CPU's counters, alone on its cache line.
#[repr(align(64))]
struct Line([AtomicU64; ALL.len()]);

static LINE: [Line; LINES] = [const { Line([const { AtomicU64::new(0) }; ALL.len()]) }; LINES];

/// Adds `n` to counter `c` (on the current CPU's line).
pub(crate) fn count(c: Counter, n: u64) {
    let cpu = CpuId::current().as_u32() as usize % LINES;
    LINE[cpu].0[c as usize].fetch_add(n, Relaxed);
}

/// The total of counter `c` over every CPU.
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
