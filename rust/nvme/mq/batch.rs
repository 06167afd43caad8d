// SPDX-License-Identifier: GPL-2.0

//! Submission of several requests at once: the list blk-mq hands to `queue_rqs` ([`RqList`]) and
//! the chains of work requests posted for it with one call ([`SendBatch`]).
//!
//! C header: [`include/linux/blk-mq.h`](srctree/include/linux/blk-mq.h)

use super::{MqOps, Owned, Prepared, Request};
use crate::bindings::raw;
use crate::rdma::qp::{ChainItem, Qp, RegWr, SendWrs, CHAIN_MAX};
use core::{marker::PhantomData, mem::MaybeUninit};
use kernel::prelude::*;

/// The requests blk-mq hands to `queue_rqs`: all of one request queue, not started, the
/// transport's until it returns. Those it leaves ([`RqList::leave`]) go back to blk-mq, which
/// submits them one by one through `queue_rq`; so do those it never popped.
///
/// # Invariants
///
/// `list` is the list blk-mq passed to `queue_rqs` of a tag set with `M`'s ops, valid and ours
/// for `'a`; `left` holds requests popped from it and not started.
pub(crate) struct RqList<'a, M: MqOps> {
    list: *mut raw::rq_list,
    left: raw::rq_list,
    _p: PhantomData<&'a Request<M>>,
}

impl<'a, M: MqOps> RqList<'a, M> {
    /// # Safety
    ///
    /// `list` is the list blk-mq passed to `queue_rqs` of a tag set with `M`'s ops (see
    /// `MqVtable`), valid and not used by anyone else for `'a`.
    pub(super) unsafe fn new(list: *mut raw::rq_list) -> Self {
        // INVARIANT: as the caller guarantees; `left` is empty.
        Self {
            list,
            left: raw::rq_list::default(),
            _p: PhantomData,
        }
    }

    /// The next request, with the queue of its hardware context.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(&'a M::Queue, Owned<'a, M>)> {
        // `rq_list_pop` (a static inline), done here rather than called through a helper.
        let l = self.list;
        // SAFETY: the list is valid and ours (type invariant): its requests are linked through
        // `rq_next` (the union member in use while a request is on an `rq_list`), the last one's
        // null, and `tail` is the last one (null when empty).
        let rq = unsafe {
            let rq = (*l).head;
            if rq.is_null() {
                return None;
            }
            (*l).head = (*rq).__bindgen_anon_1.rq_next;
            if (*l).head.is_null() {
                (*l).tail = core::ptr::null_mut();
            }
            (*rq).__bindgen_anon_1.rq_next = core::ptr::null_mut();
            rq
        };
        // blk-mq handed the request to `queue_rqs` to submit, and the list yields each request
        // once during `'a` (what `leave` takes goes to another list, never popped).
        // SAFETY: a request of our tag set (type invariant), valid for `'a`; its hardware
        // context's `driver_data` is a queue set by `init_hctx_cb`; this is its only token.
        unsafe {
            Some((
                &*(*(*rq).mq_hctx).driver_data.cast::<M::Queue>(),
                Owned::new(Request::from_raw(rq)),
            ))
        }
    }

    /// Gives `rq` back to blk-mq, which submits it through `queue_rq`. It must not have been
    /// started.
    pub(crate) fn leave(&mut self, rq: Owned<'a, M>) {
        // SAFETY: `left` is ours; `rq` is on no list (popped from this one, or handed to
        // `queue_rq`, which never meets an `RqList`: blk-mq hands a request to one of them).
        unsafe { raw::rnvme_rq_list_add_tail(&mut self.left, rq.rq().as_raw()) };
    }
}

impl<M: MqOps> Drop for RqList<'_, M> {
    fn drop(&mut self) {
        while let Some((_, rq)) = self.pop() {
            self.leave(rq);
        }
        // SAFETY: the list is valid and ours (type invariant); what blk-mq finds there on return
        // it submits through `queue_rq`.
        unsafe { *self.list = self.left };
    }
}

/// Up to [`CHAIN_MAX`] prepared requests of one QP, posted together with one call
/// ([`SendWrs::post_chain`]): one doorbell for the lot where `queue_rq` rings one per request.
pub(crate) struct SendBatch<'a, M: MqOps> {
    qp: &'a Qp,
    len: usize,
    rqs: [MaybeUninit<&'a Request<M>>; CHAIN_MAX],
    items: [MaybeUninit<ChainItem<'a>>; CHAIN_MAX],
}

impl<'a, M: MqOps> SendBatch<'a, M> {
    /// An empty batch for `qp`.
    pub(crate) fn new(qp: &'a Qp) -> Self {
        Self {
            qp,
            len: 0,
            rqs: [const { MaybeUninit::uninit() }; CHAIN_MAX],
            items: [const { MaybeUninit::uninit() }; CHAIN_MAX],
        }
    }

    /// The QP the batch posts on.
    pub(crate) fn qp(&self) -> &'a Qp {
        self.qp
    }

    /// Whether the batch holds [`CHAIN_MAX`] requests.
    pub(crate) fn is_full(&self) -> bool {
        self.len == CHAIN_MAX
    }

    /// Adds a prepared request and its registration `reg`, if any; the batch holds it until
    /// [`SendBatch::post`]. When the batch is full, `EBUSY` and the request back. (No request
    /// can be in the batch twice: each has one token.)
    pub(crate) fn push(
        &mut self,
        rq: Prepared<'a, M>,
        reg: Option<RegWr>,
    ) -> core::result::Result<(), (Prepared<'a, M>, Error)> {
        // (`len` read once: the writes below could otherwise make the compiler read and check
        // it again for each.)
        let i = self.len;
        if i >= CHAIN_MAX {
            return Err((rq, EBUSY));
        }
        // INVARIANT (of the tokens): the batch keeps the request of the token it takes, and gives
        // it back as an `Owned` only if it is not posted (`post`).
        let r = rq.rq();
        self.rqs[i].write(r);
        self.items[i].write((r.wrs(), reg));
        self.len = i + 1;
        Ok(())
    }

    /// Posts every request in one chain and empties the batch. Returns how many were posted
    /// (they come first, and may complete at once) and the error that stopped the chain, if
    /// any; each request not posted goes back to the caller, in order, through `not_posted`
    /// (only then: the posted ones cost no call).
    pub(crate) fn post(
        &mut self,
        mut not_posted: impl FnMut(Owned<'a, M>, Error),
    ) -> (usize, Result) {
        let n = core::mem::take(&mut self.len);
        if n == 0 {
            return (0, Ok(()));
        }
        // SAFETY: the first `n` items were written by `push`; `MaybeUninit<T>` has `T`'s layout.
        let items =
            unsafe { core::slice::from_raw_parts(self.items.as_ptr().cast::<ChainItem<'a>>(), n) };
        // SAFETY: each item is the work requests of a request whose PDU `init_request_cb`
        // initialised, whose `Prepared` token `push` took (so it is not used elsewhere, and its
        // list was filled in this use); no two are the same (one token per request).
        let (posted, r) = unsafe { SendWrs::post_chain(self.qp, items) };
        if let Err(e) = r {
            for i in posted..n {
                // SAFETY: written by `push` (`i < n`).
                let rq = unsafe { self.rqs[i].assume_init() };
                // SAFETY: not posted: its token, taken by `push`, is given back, once.
                not_posted(unsafe { Owned::new(rq) }, e);
            }
        }
        (posted, r)
    }

    /// How many requests the batch holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}
