// SPDX-License-Identifier: GPL-2.0

//! What a request in flight holds (the C driver's `nvme_rdma_request.mr`, `.data_sgl` and
//! `.sqe.dma`) and the one rule by which it is given back.
//!
//! Generic over the three kinds of mapping so that the rule is tested with stand-ins (KUnit
//! below). The transport uses it with `qp::Mr`, `mq::MappedSg` and `mq::MappedCmd`, which release
//! themselves when dropped: the MR goes back to its QP's pool, the data and the command are
//! DMA-unmapped. Nothing here needs the queue's QP, so a request ends the same way whatever state
//! its queue is in.

#![deny(unsafe_code)]

/// The MR (`M`), data mapping (`S`) and command mapping (`C`) of the current use of a request,
/// from `queue_rq` (which maps them in place, before posting the SEND) until the use ends.
///
/// - [`ReqIo::release`] ends the use: it drops them, which releases them, in the C driver's order
///   (`nvme_rdma_complete_rq`: the MR back to its pool, the data unmapped, the command unmapped).
///   Every use ends with it: when the request completes, or when its submission fails after
///   storing them. Each mapping is owned once, so it is released once.
/// - Mappings still held when a new use begins ([`ReqIo::begin`]) or when the request is
///   freed (drop) are stale: their use ended without `release`, because the completion found the
///   request's state busy. They may belong to a QP or device that has gone since, and the HCA may
///   still use them: they are leaked and never released (the completion that found the state
///   busy reported it; drop reports those of a request being freed).
pub(crate) struct ReqIo<M, S, C> {
    mr: Option<M>,
    sg: Option<S>,
    cmd: Option<C>,
}

impl<M, S, C> ReqIo<M, S, C> {
    /// Nothing held.
    pub(crate) const fn new() -> Self {
        Self {
            mr: None,
            sg: None,
            cmd: None,
        }
    }

    /// Starts a new use: the slots are empty afterwards. Stale mappings are forgotten, with no
    /// look at them (three stores): the completion that left them behind reported it.
    #[inline(always)]
    pub(crate) fn begin(&mut self) {
        core::mem::forget(self.mr.take());
        core::mem::forget(self.sg.take());
        core::mem::forget(self.cmd.take());
    }

    /// The slots of the MR, data mapping and command mapping of the current use (after
    /// [`ReqIo::begin`]), filled in place by the use's mapping steps: whatever is put there is
    /// released by [`ReqIo::release`].
    #[inline(always)]
    pub(crate) fn slots(&mut self) -> (&mut Option<M>, &mut Option<S>, &mut Option<C>) {
        (&mut self.mr, &mut self.sg, &mut self.cmd)
    }

    /// Puts `v` into `slot`, one of [`ReqIo::slots`] after [`ReqIo::begin`] emptied it: there is
    /// nothing to release there, so nothing is looked for (were there something, it would be
    /// forgotten, as stale mappings are).
    #[inline(always)]
    pub(crate) fn put<T>(slot: &mut Option<T>, v: T) -> &mut T {
        core::mem::forget(slot.take());
        slot.insert(v)
    }

    /// Ends the use: releases the MR, then the data mapping, then the command mapping.
    #[inline]
    pub(crate) fn release(&mut self) {
        // Each assignment drops the old value in place, in this order.
        self.mr = None;
        self.sg = None;
        self.cmd = None;
    }

    /// Forgets whatever is held, without releasing it. Returns `true` if nothing was held.
    fn leak(&mut self) -> bool {
        let empty = self.mr.is_none() && self.sg.is_none() && self.cmd.is_none();
        core::mem::forget(self.mr.take());
        core::mem::forget(self.sg.take());
        core::mem::forget(self.cmd.take());
        empty
    }
}

impl<M, S, C> ReqIo<M, S, C> {
    /// What freeing the request does with its state (the whole of [`Drop`]): stale mappings are
    /// forgotten, not released. Returns `false` if there were any (drop reports them).
    fn free(&mut self) -> bool {
        self.leak()
    }
}

impl<M, S, C> Drop for ReqIo<M, S, C> {
    fn drop(&mut self) {
        if !self.free() {
            kernel::pr_err!("leaked the stale mappings of a request being freed\n");
        }
    }
}

#[kernel::macros::kunit_tests(rnvme_rdma_req_io)]
mod tests {
    use super::*;
    use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

    /// Records the order in which stand-ins are released: each drop appends its digit.
    struct Log(AtomicU32);

    impl Log {
        fn new() -> Self {
            Self(AtomicU32::new(0))
        }

        fn get(&self) -> u32 {
            self.0.load(Relaxed)
        }

        fn push(&self, digit: u32) {
            self.0.store(self.get() * 10 + digit, Relaxed);
        }
    }

    /// A stand-in for a mapping: dropping it is releasing it.
    struct Probe<'a>(&'a Log, u32);

    impl Drop for Probe<'_> {
        fn drop(&mut self) {
            self.0.push(self.1);
        }
    }

    type Io<'a> = ReqIo<Probe<'a>, Probe<'a>, Probe<'a>>;

    /// Begins a use and fills its slots as `queue_rq` does.
    fn set<'a>(io: &mut Io<'a>, mr: Option<Probe<'a>>, sg: Option<Probe<'a>>, cmd: Probe<'a>) {
        io.begin();
        let (m, s, c) = io.slots();
        *c = Some(cmd);
        *s = sg;
        *m = mr;
    }

    /// A use with an MR releases the MR, then the data, then the command, each once.
    #[test]
    fn release_in_c_order_once() {
        let log = Log::new();
        let mut io: Io<'_> = ReqIo::new();
        set(
            &mut io,
            Some(Probe(&log, 1)),
            Some(Probe(&log, 2)),
            Probe(&log, 3),
        );
        assert_eq!(log.get(), 0);
        io.release();
        assert_eq!(log.get(), 123);
        io.release();
        drop(io);
        assert_eq!(log.get(), 123);
    }

    /// A use without data holds and releases the command mapping only.
    #[test]
    fn release_without_data() {
        let log = Log::new();
        let mut io: Io<'_> = ReqIo::new();
        set(&mut io, None, None, Probe(&log, 3));
        io.release();
        assert_eq!(log.get(), 3);
    }

    /// Consecutive uses each release their own mappings.
    #[test]
    fn uses_release_their_own() {
        let log = Log::new();
        let mut io: Io<'_> = ReqIo::new();
        set(&mut io, None, Some(Probe(&log, 2)), Probe(&log, 3));
        io.release();
        set(
            &mut io,
            Some(Probe(&log, 1)),
            Some(Probe(&log, 2)),
            Probe(&log, 3),
        );
        io.release();
        assert_eq!(log.get(), 23_123);
    }

    /// Mappings of a use that did not end with `release` are never released, not even when a
    /// new use replaces them; the new use's own are.
    #[test]
    fn stale_mappings_are_not_released() {
        let log = Log::new();
        let mut io: Io<'_> = ReqIo::new();
        set(
            &mut io,
            Some(Probe(&log, 7)),
            Some(Probe(&log, 8)),
            Probe(&log, 9),
        );
        set(
            &mut io,
            Some(Probe(&log, 1)),
            Some(Probe(&log, 2)),
            Probe(&log, 3),
        );
        assert_eq!(log.get(), 0);
        io.release();
        assert_eq!(log.get(), 123);
        // A stale data mapping is not released by a later use that maps no data either.
        set(
            &mut io,
            Some(Probe(&log, 4)),
            Some(Probe(&log, 5)),
            Probe(&log, 6),
        );
        set(&mut io, None, None, Probe(&log, 3));
        io.release();
        assert_eq!(log.get(), 1233);
    }

    /// Freeing a request whose mappings are stale does not release them. (What drop does is
    /// `free`, called here directly: the drop itself would report the leak in the kernel log as
    /// an error, which a test must not write.)
    #[test]
    fn stale_mappings_are_not_released_when_freed() {
        let log = Log::new();
        let mut io: Io<'_> = ReqIo::new();
        set(&mut io, Some(Probe(&log, 1)), None, Probe(&log, 3));
        assert!(!io.free());
        assert_eq!(log.get(), 0);
        assert!(io.free());
        drop(io);
        assert_eq!(log.get(), 0);
    }
}
