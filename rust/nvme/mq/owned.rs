// SPDX-License-Identifier: GPL-2.0

//! The submitter's hold on a request: [`Owned`] from blk-mq's hand-over to the post, [`Prepared`]
//! once its SEND list is filled (design.rst, "Ownership rules of the data path").

use super::{BlkStatus, MqOps, Request};
use crate::bindings::raw;
use crate::bindings::sync::TryCell;
use crate::rdma::qp::{Qp, RegWr, SgeList, SEND_SGES};
use kernel::prelude::*;

/// A request blk-mq has handed to the transport to submit (`queue_rq`, or popped from a
/// `queue_rqs` list) and that is not sent yet: the only way to build and edit its command and its
/// SEND's scatter/gather list, to post it, or to end or requeue it unsent. What a safe caller
/// could otherwise break (two `&mut` to the PDU, a post of a list filled in an earlier use, a
/// request used after it was handed on) is held by the types:
///
/// - one token per request: neither `Copy` nor `Clone`, made only by the tag set's callbacks
///   (`queue_rq_cb`, [`super::batch::RqList::pop`]), and blk-mq hands a request to one
///   submitter at a time;
/// - edits take `&mut self`, so none nests in another;
/// - a post takes a [`Prepared`], which only [`Owned::prepare_in`] makes, after it emptied the list
///   and the caller filled it in this use;
/// - whatever hands the request on (a post, an end, a requeue, a status for blk-mq) takes the
///   token by value.
///
/// # Invariants
///
/// `self.0` is a request as in [`Request`]'s invariant that blk-mq handed to the tag set's
/// submission callback, not posted, ended or handed back since; no other `Owned` or [`Prepared`]
/// of it exists.
pub(crate) struct Owned<'a, M: MqOps>(&'a Request<M>);

impl<M: MqOps> core::ops::Deref for Owned<'_, M> {
    type Target = Request<M>;

    fn deref(&self) -> &Request<M> {
        self.0
    }
}

impl<'a, M: MqOps> Owned<'a, M> {
    /// # Safety
    ///
    /// `rq` is as in the type invariant: handed to the tag set's submission callback and not
    /// posted, ended or handed back since, and no other token of it exists.
    #[inline(always)]
    pub(super) unsafe fn new(rq: &'a Request<M>) -> Self {
        // INVARIANT: as the caller guarantees.
        Self(rq)
    }

    /// The request, for as long as it lives (its shared methods; the token keeps the rest).
    #[inline(always)]
    pub(crate) fn rq(&self) -> &'a Request<M> {
        self.0
    }

    /// Takes `cell` (the request's per-use state, [`TryCell::try_with`]), empties the SEND's
    /// scatter/gather list and has `f` prepare the request: build its command, map its data and
    /// fill the list. Its `Ok` makes the [`Prepared`] a post needs; its error, or `busy()` when
    /// the cell is held elsewhere, gives the token back, with the list in no state a post could
    /// use. (The list is emptied once the cell is taken: nothing is carried across the cell's
    /// atomic, so the compiler knows the list empty where `f` starts filling it.)
    #[inline(always)]
    pub(crate) fn prepare_in<T, R, E>(
        mut self,
        cell: &TryCell<T>,
        f: impl FnOnce(&mut Self, &mut T, &mut SgeList<SEND_SGES>) -> core::result::Result<R, E>,
        busy: impl FnOnce() -> E,
    ) -> core::result::Result<(Prepared<'a, M>, R), (Self, E)> {
        let pdu = self.0.pdu();
        // `f` may use the token, which has no way to the list, and cannot call this again (this
        // takes the token by value).
        let r = cell.try_with(|v| {
            // SAFETY: `init_request_cb` initialised the work requests; the token is the
            // request's only one (type invariant) and only this makes a reference to the list.
            let sges = unsafe { (*pdu).wrs.sges() };
            f(&mut self, v, sges)
        });
        // (A match, not `unwrap_or`: an eagerly built default goes through the stack.)
        match r {
            // INVARIANT: the token moves into the `Prepared`; the list was filled in this use.
            Some(Ok(r)) => Ok((Prepared(self.0), r)),
            Some(Err(e)) => Err((self, e)),
            None => Err((self, busy())),
        }
    }

    /// Ends the request, not sent, with `status` (`blk_mq_end_request`).
    pub(crate) fn end_unsent(self, status: BlkStatus) {
        // SAFETY: the request is the token's, started and never posted (type invariant); the
        // token ends here.
        unsafe { raw::blk_mq_end_request(self.0.as_raw(), status.0) };
    }

    /// Hands the request, not sent, back to blk-mq, which submits it again later
    /// (`blk_mq_requeue_request`, kicking the requeue list).
    pub(crate) fn requeue_unsent(self) {
        // SAFETY: as for `end_unsent`.
        unsafe { raw::blk_mq_requeue_request(self.0.as_raw(), true) };
    }

    /// Fails (or requeues) a request that is not ready (`nvme_fail_nonready_command`); the
    /// status for `queue_rq` to return.
    pub(crate) fn fail_nonready(self) -> BlkStatus {
        // SAFETY: the request is the token's (type invariant) and its `nvme_request` was set up
        // by `init_request_cb`; the token ends here.
        BlkStatus(unsafe {
            raw::nvme_fail_nonready_command((*self.0.nreq()).ctrl, self.0.as_raw())
        })
    }

    /// Builds the NVMe command for the request (`nvme_setup_cmd`) and, if that succeeded, marks
    /// the request started (`nvme_start_request`, a static inline: done here, calling what it
    /// calls).
    #[inline(always)]
    pub(crate) fn setup_and_start(&mut self) -> BlkStatus {
        let rq = self.0.as_raw();
        // SAFETY: the request is the token's (type invariant); its queue's
        // `queuedata` is the namespace (or null for the admin queues), as nvme_setup_cmd expects.
        let st = BlkStatus(unsafe { raw::nvme_setup_cmd((*(*rq).q).queuedata.cast(), rq) });
        if st != BlkStatus::OK {
            return st;
        }
        #[cfg(CONFIG_NVME_MULTIPATH)]
        {
            // `REQ_NVME_MPATH` is the driver's flag (`REQ_DRV`).
            const MPATH: raw::blk_opf_t = 1 << raw::req_flag_bits___REQ_DRV;
            // SAFETY: as above; the flags are fixed while the token's holder has the request.
            if unsafe { (*rq).cmd_flags } & MPATH != 0 {
                // SAFETY: a multipath request being started, as nvme_start_request does.
                unsafe { raw::nvme_mpath_start_request(rq) };
            }
        }
        // SAFETY: the request is set up and the token's (type invariant).
        unsafe { raw::blk_mq_start_request(rq) };
        st
    }

    /// Releases what `setup_and_start` allocated (`nvme_cleanup_cmd`), on a submission failure.
    pub(crate) fn cleanup_cmd(&mut self) {
        // SAFETY: the request is the token's; `nvme_cleanup_cmd` releases only what
        // `nvme_setup_cmd` allocated, if it did (a special payload), and may run once per setup.
        unsafe { raw::nvme_cleanup_cmd(self.0.as_raw()) };
    }

    /// Completes a request that could not be sent with a host path error
    /// (`nvme_host_path_error`); the status for `queue_rq` to return.
    pub(crate) fn host_path_error(self) -> BlkStatus {
        // SAFETY: the request is the token's (type invariant), and the token ends here.
        BlkStatus(unsafe { raw::nvme_host_path_error(self.0.as_raw()) })
    }

    /// Reads or edits the 64-byte submission queue entry (`&mut self`: no call can nest in
    /// another, nor run while the core builds the command in [`Owned::setup_and_start`]).
    #[inline(always)]
    pub(crate) fn with_cmd<R>(&mut self, f: impl FnOnce(&mut [u8; 64]) -> R) -> R {
        const _: () = assert!(core::mem::size_of::<raw::nvme_command>() == 64);
        // SAFETY: the command lives in the PDU (`Request`'s invariant) and is 64 bytes of plain
        // data; the token is the request's only one (type invariant) and is borrowed mutably for
        // the reference's life, so no other reference to the command exists meanwhile.
        let cmd = unsafe { &mut *(*self.0.pdu()).cmd.get().cast::<[u8; 64]>() };
        f(cmd)
    }
}

/// An [`Owned`] request whose SEND's scatter/gather list was emptied and filled in this use
/// ([`Owned::prepare_in`]): what [`Prepared::post_send`] and [`super::batch::SendBatch::push`] take.
///
/// # Invariants
///
/// As [`Owned`]'s, and the request's list was filled since the token was made.
pub(crate) struct Prepared<'a, M: MqOps>(&'a Request<M>);

impl<'a, M: MqOps> Prepared<'a, M> {
    /// The request, for as long as it lives.
    #[inline(always)]
    pub(crate) fn rq(&self) -> &'a Request<M> {
        self.0
    }

    /// Back to an [`Owned`] request (not posted after all: to end or requeue it).
    pub(crate) fn unprepared(self) -> Owned<'a, M> {
        // INVARIANT: the same request, still not posted.
        Owned(self.0)
    }

    /// Posts the request's registration `reg`, if any, and its SEND of the list filled in
    /// [`Owned::prepare_in`] on `qp`, from the work requests kept in its PDU ([`SendWrs::post`]).
    /// Posted, the request may complete at once: the token ends. Not posted, it comes back.
    #[inline(always)]
    pub(crate) fn post_send(
        self,
        qp: &Qp,
        reg: Option<RegWr>,
    ) -> core::result::Result<(), (Owned<'a, M>, Error)> {
        // The token ends with a successful post, so the request is posted once per use; its next
        // use follows this use's end, so the SEND's completion and the provider's read (`SendWrs`).
        // SAFETY: `init_request_cb` initialised the work requests; the token is the request's
        // only one (type invariant), posting once per use (above).
        match unsafe { (*self.0.pdu()).wrs.post(qp, reg) } {
            Ok(()) => Ok(()),
            // INVARIANT: not posted: still the token's.
            Err(e) => Err((Owned(self.0), e)),
        }
    }
}
