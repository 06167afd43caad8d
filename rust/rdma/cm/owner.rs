// SPDX-License-Identifier: GPL-2.0

//! Who may use an rdma_cm id: its owner, or, while the owner is parked waiting for the
//! connection's outcome, a handler that may give the id to rdma_cm (design.rst, "RDMA device
//! removal").

#![deny(unsafe_code)]

use core::sync::atomic::{AtomicU8, Ordering};
use kernel::prelude::*;

/// How often an owner that stopped waiting looks again for its id's route query to end
/// ([`Owner::unpark`]).
const ROUTE_POLL_MS: u32 = 10;
/// The owner may use the id.
const ACTIVE: u8 = 0;
/// The owner does not touch the id until it unparks.
const PARKED: u8 = 1;
/// A handler gave the id to rdma_cm, which destroyed it ([`Owner::surrender`]).
const GONE: u8 = 2;
/// Parked, with a route query outstanding (the id is in `RDMA_CM_ROUTE_QUERY`): the owner does
/// not unpark until its outcome is delivered.
const PARKED_ROUTE: u8 = 3;

/// The owner's state of one id: `ACTIVE`, `PARKED`, `PARKED_ROUTE` or `GONE`.
pub(super) struct Owner(AtomicU8);

impl Owner {
    /// Active: the owner may use the id.
    pub(super) const fn new() -> Self {
        Self(AtomicU8::new(ACTIVE))
    }

    /// Parks the owner (under the handler mutex, before the id's first event can come).
    pub(super) fn park(&self) {
        self.0.store(PARKED, Ordering::Release);
    }

    /// Whether a handler gave the id to rdma_cm.
    pub(super) fn gone(&self) -> bool {
        self.0.load(Ordering::Acquire) == GONE
    }

    /// A handler gives the id to rdma_cm if the owner is parked (with or without a route query
    /// outstanding); whether it did.
    pub(super) fn surrender(&self) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
                matches!(o, PARKED | PARKED_ROUTE).then_some(GONE)
            })
            .is_ok()
    }

    /// A handler is about to start a route query: only for a parked owner (against its unpark,
    /// whichever comes first). Then `route_failed` if the query did not start, `route_done`
    /// when its outcome is delivered.
    pub(super) fn route_start(&self) -> bool {
        self.0
            .compare_exchange(PARKED, PARKED_ROUTE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The route query did not start: no outcome will come. (Only a handler, which holds the
    /// handler mutex, leaves `PARKED_ROUTE` but for a surrender.)
    pub(super) fn route_failed(&self) {
        self.0.store(PARKED, Ordering::Release);
    }

    /// The route query's outcome is being delivered: the owner may unpark again.
    pub(super) fn route_done(&self) {
        let _ = self
            .0
            .compare_exchange(PARKED_ROUTE, PARKED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The owner is back from its wait: active again, unless a handler gave the id away (then it
    /// stays gone, and the id may already be destroyed). Never while a route query is
    /// outstanding: rdma_cm (7.3.4's `cma_send_device_removal_put`) cancels the operation of an
    /// id whose handler returned 0 for `DEVICE_REMOVAL` after releasing the handler mutex, with
    /// the state from before; for a route query that reads the id's device, which an owner
    /// destroying the id meanwhile has cleared. So an owner that stopped waiting (a signal, its
    /// bound) while the query runs waits for its outcome first: `rdma_resolve_route` delivers
    /// one within `route_timeout_ms` (on RoCE and iWARP at once, from a work item). A removal
    /// arriving meanwhile finds the id parked and gives it to rdma_cm, which then cancels and
    /// destroys it in one thread. Past twice that bound the outcome is overdue and the owner
    /// stops waiting for it.
    pub(super) fn unpark(&self, route_timeout_ms: u32) {
        let mut waited_ms = 0u32;
        loop {
            match self
                .0
                .compare_exchange(PARKED, ACTIVE, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) | Err(GONE) => return,
                Err(_) if waited_ms > 2 * route_timeout_ms => {
                    pr_warn!("a route query gave no outcome in {} ms\n", waited_ms);
                    if self
                        .0
                        .compare_exchange(PARKED_ROUTE, ACTIVE, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        return;
                    }
                }
                Err(_) => {}
            }
            kernel::time::delay::fsleep(kernel::time::Delta::from_millis(ROUTE_POLL_MS.into()));
            waited_ms += ROUTE_POLL_MS;
        }
    }
}
