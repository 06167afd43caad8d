// SPDX-License-Identifier: GPL-2.0

//! How a request in flight ends: the completions it waits for and the response they deliver (the
//! C driver's `nvme_rdma_request.ref`, `.status` and `.result`, and `nvme_rdma_end_request`).
//!
//! Pure code (only `core`), so that the ordering rule lives in one small type with its tests.

#![deny(unsafe_code)]

use core::sync::atomic::{
    fence, AtomicBool, AtomicU16, AtomicU32, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};

/// The completions a request in flight waits for (its SEND, and its response or the LOCAL_INV
/// posted for it) and the response's status and result.
///
/// Each of those completions drops one reference with [`ReqEnd::put`]; the one that drops the last
/// ends the request with the status and result `put` returns. They can only be read that way, so
/// that every read is ordered after the writes of all the completions of this use of the request:
///
/// - every `put` decrements with `Release`, publishing what its completion wrote before (the
///   response, [`ReqEnd::set_rsp`]);
/// - the `put` that takes the count to zero runs an `Acquire` fence before reading: the earlier
///   decrements are a release sequence on the counter that the last one reads from, so the fence
///   synchronises with each of them and the response is seen whichever completion recorded it
///   and on whatever CPU.
///
/// This is the ordering of C's `refcount_dec_and_test` (`atomic_fetch_sub_release`, then
/// `smp_acquire__after_ctrl_dep` when the count reached zero), on which the C driver's
/// `nvme_rdma_end_request` relies to read `req->status` and `req->result`; `Arc`'s drop does
/// the same. Decrements with `Acquire` only release nothing: a SEND completion dropping the last
/// reference on another CPU (a poll queue polled from two CPUs, for instance) could end the
/// request with the status and result of the tag's previous use.
///
/// When the response names a registered MR that the target did not invalidate, the response's
/// completion records it and posts a LOCAL_INV instead of calling `put`; the LOCAL_INV's
/// completion calls `put` for it. Posting the work request orders the recording before that
/// completion (as in C), and that completion's `put` releases it like any other.
///
/// A use accepts one response ([`ReqEnd::take_response`]). So the reference of the SEND can only
/// be dropped by the SEND's own completion, and a request cannot end before `queue_rq` posted it:
/// a target answering a command twice (C would end the request twice) cannot end it while
/// `queue_rq` still holds its state and mappings.
pub(crate) struct ReqEnd {
    /// Completions outstanding.
    refs: AtomicU32,
    /// This use had its response.
    responded: AtomicBool,
    /// The response's status (little-endian, as in the CQE).
    status: AtomicU16,
    /// The response's result (little-endian, as in the CQE).
    result: AtomicU64,
}

impl ReqEnd {
    /// Nothing in flight: no response is accepted before the first [`ReqEnd::arm`].
    pub(crate) const fn new() -> Self {
        Self {
            refs: AtomicU32::new(0),
            responded: AtomicBool::new(true),
            status: AtomicU16::new(0),
            result: AtomicU64::new(0),
        }
    }

    /// Starts a use of the request that ends at the `completions`-th [`ReqEnd::put`] and accepts
    /// one response.
    ///
    /// `Relaxed`, as C's `refcount_set`: the completions can only run after the work requests
    /// are posted, which orders this store before them.
    pub(crate) fn arm(&self, completions: u32) {
        self.responded.store(false, Relaxed);
        self.refs.store(completions, Relaxed);
    }

    /// Ends this use for responses: from now on [`ReqEnd::take_response`] refuses until the next
    /// [`ReqEnd::arm`]. For a request that ends without its response (cancelled by error
    /// recovery, timed out, aborted): a response the target sends for it later, even one that
    /// finds it with its command identifier still current (a cancel does not advance the
    /// generation), cannot drop a reference of an ended request and end it again (the
    /// misbehave group's `late` test).
    ///
    /// `Relaxed`: the request ends after this and is reused only after blk-mq handed it out again,
    /// which orders this store before the next use's `arm`.
    pub(crate) fn disarm(&self) {
        self.responded.store(true, Relaxed);
    }

    /// Claims the response of this use: `false` if it already had one (the target answered the
    /// command twice), and then the caller must neither record it nor count it.
    ///
    /// `Relaxed`: only the atomicity of the swap matters (one of two racing responses wins); the
    /// response's data is published by `put` as always.
    pub(crate) fn take_response(&self) -> bool {
        !self.responded.swap(true, Relaxed)
    }

    /// Records the response's status and result (little-endian, as in the CQE). Call it before
    /// the `put` made for the completion that delivered the response.
    pub(crate) fn set_rsp(&self, status: u16, result: u64) {
        // Published by the `put` that follows (see the type's documentation).
        self.status.store(status, Relaxed);
        self.result.store(result, Relaxed);
    }

    /// What this use still waits for, for the log of a timed-out request: the completions
    /// outstanding and whether its response came. Racy by nature (the completions may run while
    /// it reads), so only for diagnostics.
    pub(crate) fn outstanding(&self) -> (u32, bool) {
        (self.refs.load(Relaxed), self.responded.load(Relaxed))
    }

    /// Drops the reference of one completion. Returns the recorded status and result if it was
    /// the last one: the caller then ends the request with them.
    pub(crate) fn put(&self) -> Option<(u16, u64)> {
        // Release: whatever this completion wrote is visible to the one that ends the request.
        if self.refs.fetch_sub(1, Release) != 1 {
            return None;
        }
        // Acquire: pairs with the `Release` of every earlier `put` of this use (see above).
        fence(Acquire);
        Some((self.status.load(Relaxed), self.result.load(Relaxed)))
    }
}

#[cfg_attr(not(test), kernel::macros::kunit_tests(rnvme_rdma_req_end))]
mod tests {
    use super::*;

    /// The response completes first: the SEND's completion ends the request with the response.
    #[test]
    fn send_completes_last() {
        let e = ReqEnd::new();
        e.arm(2);
        e.set_rsp(0x4002, 0x1122_3344_5566_7788);
        assert!(e.put().is_none());
        assert_eq!(e.put(), Some((0x4002, 0x1122_3344_5566_7788)));
    }

    /// The SEND completes first: the response's completion ends the request.
    #[test]
    fn response_completes_last() {
        let e = ReqEnd::new();
        e.arm(2);
        assert!(e.put().is_none());
        e.set_rsp(0x0002, 7);
        assert_eq!(e.put(), Some((0x0002, 7)));
    }

    /// The next use of a tag ends with its own response, not the previous use's.
    #[test]
    fn next_use_ends_with_its_own_response() {
        let e = ReqEnd::new();
        e.arm(2);
        e.set_rsp(0x4002, 1);
        assert!(e.put().is_none());
        assert_eq!(e.put(), Some((0x4002, 1)));
        e.arm(2);
        assert!(e.put().is_none());
        e.set_rsp(0, 2);
        assert_eq!(e.put(), Some((0, 2)));
    }

    /// A second response in one use is refused, so only the SEND's completion can end the use.
    #[test]
    fn one_response_per_use() {
        let e = ReqEnd::new();
        e.arm(2);
        assert!(e.take_response());
        e.set_rsp(0, 1);
        assert!(e.put().is_none());
        assert!(!e.take_response());
        assert_eq!(e.put(), Some((0, 1)));
        e.arm(2);
        assert!(e.take_response());
    }

    /// A response for a request that ended without one (cancelled after its SEND completed) is
    /// refused: it cannot drop the reference the SEND left and end the request a second time.
    #[test]
    fn no_response_after_the_end() {
        let e = ReqEnd::new();
        e.arm(2);
        assert!(e.put().is_none());
        e.disarm();
        assert!(!e.take_response());
        e.arm(2);
        assert!(e.take_response());
    }

    /// The timeout's view: nothing completed, then the SEND, then the response.
    #[test]
    fn outstanding_shows_what_is_missing() {
        let e = ReqEnd::new();
        e.arm(2);
        assert_eq!(e.outstanding(), (2, false));
        assert!(e.put().is_none());
        assert_eq!(e.outstanding(), (1, false));
        assert!(e.take_response());
        assert_eq!(e.outstanding(), (1, true));
    }

    /// A request never used accepts no response.
    #[test]
    fn no_response_before_the_first_use() {
        let e = ReqEnd::new();
        assert!(!e.take_response());
    }

    /// Exactly one `put` of a use ends the request, also when a use waits for one completion.
    #[test]
    fn one_end_per_use() {
        let e = ReqEnd::new();
        e.arm(3);
        e.set_rsp(0, 0);
        assert!(e.put().is_none());
        assert!(e.put().is_none());
        assert!(e.put().is_some());
        e.arm(1);
        assert!(e.put().is_some());
    }
}
