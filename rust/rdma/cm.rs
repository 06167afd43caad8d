// SPDX-License-Identifier: GPL-2.0

//! RDMA connection manager identifiers (`struct rdma_cm_id`) with event handlers in Rust.
//!
//! C header: [`include/rdma/rdma_cm.h`](srctree/include/rdma/rdma_cm.h)

use super::{
    qp::{Qp, QpAttr},
    qp_cell::QpCell,
    recv::{RecvDone, RecvRing},
    verbs::{Cq, Pd},
    Device, SockAddr,
};
use crate::bindings::raw;
use core::{
    marker::PhantomData,
    ptr::NonNull,
    sync::atomic::{AtomicPtr, Ordering},
};
mod owner;
mod retire;
use owner::Owner;

use crate::bindings::compat::prelude::*;
use kernel::{
    error::{from_err_ptr, to_result},
    str::CStr,
    sync::Arc,
    types::ForeignOwnable,
};

/// An event of a connection manager identifier.
pub(crate) enum CmEvent<'a> {
    /// Address resolution finished: the id is bound to an RDMA device.
    AddrResolved,
    /// Address resolution failed (status).
    AddrError(i32),
    /// Route resolution finished.
    RouteResolved,
    /// Route resolution failed (status).
    RouteError(i32),
    /// The connection is established.
    Established,
    /// The peer rejected the connection.
    Rejected(Reject<'a>),
    /// Connecting failed (status).
    ConnectError(i32),
    /// The peer is unreachable (status).
    Unreachable(i32),
    /// The connection was closed.
    Disconnected,
    /// The RDMA device is being removed.
    DeviceRemoval,
    /// The local address changed.
    AddrChange,
    /// The connection left the TIMEWAIT state.
    TimewaitExit,
    /// Any other event (raw event number and status).
    Other(u32, i32),
}

/// The details of a REJECT.
pub(crate) struct Reject<'a> {
    /// The CM status (the reject reason code of the underlying CM).
    pub(crate) status: i32,
    /// The reason as text.
    pub(crate) reason: &'a CStr,
    /// The consumer's private data, if the reject was consumer-defined.
    pub(crate) private_data: Option<&'a [u8]>,
}

/// Handles the events of a [`CmId`].
///
/// Runs in process context with the id's handler mutex held: it may sleep, and it must not drop
/// the [`CmId`] it is called for (that waits for the handler to return).
pub(crate) trait CmHandler: Send + Sync + Sized + 'static {
    /// What the id's QP is created on and completes into: given to
    /// [`CmIdLocked::create_qp`], owned by the id from then on and dropped only after the QP is
    /// destroyed.
    type QpRes: QpResources;

    /// Called for every event of the id.
    fn event(this: &Self, id: &CmIdLocked<Self>, ev: &CmEvent<'_>);

    /// The cell the data path reads the id's QP from, once [`CmId::publish_qp`] published it
    /// (none by default).
    fn qp_cell(_this: &Self) -> Option<&QpCell> {
        None
    }
}

/// The protection domain, completion queue and receive ring a QP is created with. A QP must not
/// outlive them: [`CmIdLocked::create_qp`] takes them by value, so the id that destroys the QP
/// also owns them, and drops them after it.
pub(crate) trait QpResources: Send + Sync + 'static {
    /// The owner's data of each receive buffer, and its completion handler.
    type Recv: RecvDone;

    /// The protection domain of the QP (and of its MRs).
    fn pd(&self) -> &Pd;
    /// The completion queue of both the send and the receive queue.
    fn cq(&self) -> &Cq;
    /// The receive buffers: armed for the QP when it is created (from then on
    /// [`super::recv::RecvEntry::post`] posts on it), disarmed before it is destroyed.
    fn recv_ring(&self) -> &RecvRing<Self::Recv>;
}

/// Connection parameters of [`CmIdLocked::connect`].
pub(crate) struct ConnParam<'a> {
    /// Private data sent with the request (at most 56 bytes for RC over IB CM).
    pub(crate) private_data: &'a [u8],
    /// Outstanding RDMA READ/atomic operations we accept from the peer.
    pub(crate) responder_resources: u8,
    /// Whether the local QP uses end-to-end flow control.
    pub(crate) flow_control: bool,
    /// Transport retries (0..=7).
    pub(crate) retry_count: u8,
    /// RNR retries (0..=7, 7 = infinite).
    pub(crate) rnr_retry_count: u8,
}

/// A borrowed connection manager id, inside its event handler (the handler mutex is held).
///
/// # Invariants
///
/// `self.0` is a live `rdma_cm_id` whose handler mutex the current thread holds.
#[repr(transparent)]
pub(crate) struct CmIdLocked<H: CmHandler>(
    kernel::types::Opaque<raw::rdma_cm_id>,
    PhantomData<fn() -> H>,
);

impl<H: CmHandler> CmIdLocked<H> {
    fn raw(&self) -> *mut raw::rdma_cm_id {
        self.0.get()
    }

    /// The RDMA device the id is bound to (after address resolution).
    pub(crate) fn device(&self) -> Option<&Device> {
        // SAFETY: by the type invariant the id is live; `device` is only changed by rdma_cm
        // under the handler mutex we hold.
        let dev = unsafe { (*self.raw()).device };
        if dev.is_null() {
            None
        } else {
            // SAFETY: a bound id holds its device registered until the id is destroyed or the
            // DEVICE_REMOVAL event has been handled, which outlives this borrow.
            Some(unsafe { Device::from_raw(dev) })
        }
    }

    /// Starts route resolution; `RouteResolved` or `RouteError` follows. Only for a parked id
    /// (`EINTR` once its owner has stopped waiting: interrupted, or past its bound; 7.2's kernel
    /// crate has no `ECANCELED`): while the query is outstanding the owner cannot unpark
    /// ([`CmId::resolve_addr_parked`]), so a `DEVICE_REMOVAL` delivered in
    /// `RDMA_CM_ROUTE_QUERY` always finds the id parked and can give it to rdma_cm
    /// ([`CmIdLocked::surrender`]).
    pub(crate) fn resolve_route(&self, timeout_ms: u32) -> Result {
        let owner = &self.ctx().owner;
        if !owner.route_start() {
            return Err(EINTR);
        }
        // SAFETY: the id is live (type invariant).
        let r = to_result(unsafe { raw::rdma_resolve_route(self.raw(), timeout_ms as usize) });
        if r.is_err() {
            owner.route_failed();
        }
        r
    }

    /// Sets the type of service of the connection.
    pub(crate) fn set_service_type(&self, tos: u8) {
        // SAFETY: the id is live (type invariant).
        unsafe { raw::rdma_set_service_type(self.raw(), tos.into()) };
    }

    /// The id's context: the handler and what the QP owns.
    fn ctx(&self) -> &Ctx<H> {
        // SAFETY: the id is live (type invariant) and was created by `CmId::<H>::new`, so its
        // context is the foreign form of an `Arc<Ctx<H>>`, reclaimed only after the id is
        // destroyed, which cannot happen while its handler runs (this borrow).
        let ctx = unsafe { <Arc<Ctx<H>> as ForeignOwnable>::borrow((*self.raw()).context.cast()) };
        let p: *const Ctx<H> = &*ctx;
        // SAFETY: `p` points into the `Arc<Ctx<H>>`, which lives as long as the id (above).
        unsafe { &*p }
    }

    /// Creates the id's reliable-connected QP on `res`' PD, with its CQ for both send and receive
    /// completions, and returns `res`, which the id now owns. The QP lives until the owning
    /// [`CmId`] is dropped, which destroys it and only then drops `res`: the QP cannot outlive
    /// its CQ and PD. One QP per id (`EBUSY` after the first attempt). Its asynchronous events
    /// are logged (`qp::qp_event`).
    pub(crate) fn create_qp(&self, res: H::QpRes, attr: &QpAttr) -> Result<&H::QpRes> {
        let ctx = self.ctx();
        if !ctx.qp_res.populate(res) {
            return Err(EBUSY);
        }
        let res = ctx.qp_res.as_ref().ok_or(EBUSY)?;
        // SAFETY: an all-zero ib_qp_init_attr is valid.
        let mut init: raw::ib_qp_init_attr = unsafe { core::mem::zeroed() };
        init.event_handler = Some(super::qp::qp_event);
        init.send_cq = res.cq().as_raw();
        init.recv_cq = res.cq().as_raw();
        init.cap.max_send_wr = attr.max_send_wr;
        init.cap.max_recv_wr = attr.max_recv_wr;
        init.cap.max_send_sge = attr.max_send_sge;
        init.cap.max_recv_sge = attr.max_recv_sge;
        init.sq_sig_type = raw::ib_sig_type_IB_SIGNAL_REQ_WR;
        init.qp_type = raw::ib_qp_type_IB_QPT_RC;
        init.qp_context = attr.context;
        // SAFETY: the id is live and bound to the PD's device (type invariant; rdma_create_qp
        // checks the device); `init` is valid for the call. The CQ and PD live in the id's
        // context, which `CmId::drop` releases after destroying the QP.
        to_result(unsafe { raw::rdma_create_qp(self.raw(), res.pd().as_raw(), &mut init) })?;
        // SAFETY: the id is live and its handler mutex held (type invariant); the QP was just
        // created on it.
        let qp = unsafe { (*self.raw()).qp };
        // For the owner, which reads it from here (`CmId::qp`): the id may be gone before the
        // QP is destroyed ([`CmIdLocked::surrender`]).
        ctx.qp.store(qp, Ordering::Release);
        // The ring is part of `res`, which the id's context (in an `Arc`: it does not move) owns
        // and drops only after destroying the QP.
        // SAFETY: the QP lives until `CmId::drop`, which disarms the ring and waits for a grace
        // period before destroying it; the ring outlives it (above); nothing is posted yet; the
        // QP's receive CQ is `res.cq()` (`init.recv_cq`).
        unsafe { res.recv_ring().arm(qp, res.cq().ctx()) };
        Ok(res)
    }

    /// What the id's QP was created with (`None` before [`CmIdLocked::create_qp`]).
    pub(crate) fn qp_res(&self) -> Option<&H::QpRes> {
        self.ctx().qp_res.as_ref()
    }

    /// The id's QP, once [`CmIdLocked::create_qp`] succeeded.
    pub(crate) fn qp(&self) -> Option<&Qp> {
        // SAFETY: the id is live and its handler mutex held (type invariant); the QP is only
        // destroyed after the id, which cannot happen during the handler.
        let qp = unsafe { (*self.raw()).qp };
        // SAFETY: see above.
        (!qp.is_null()).then(|| unsafe { Qp::from_raw(qp) })
    }

    /// Gives the id to rdma_cm if its owner is parked ([`CmId::resolve_addr_parked`]): rdma_cm destroys it
    /// when this handler returns, in the thread that delivered the event and with the id's state
    /// from before the event (the handler returns non-zero; rdma_cm's contract: the owner must
    /// not call `rdma_destroy_id` then, and no handler runs after it). The owner finds the id
    /// gone when it unparks ([`CmId::gone`]) and its drop then destroys only the QP and what it
    /// owns. Returns whether it did; call it before waking the owner, which must not unpark
    /// first.
    ///
    /// For `RDMA_CM_EVENT_DEVICE_REMOVAL` this is the only way without a window: after a
    /// handler returned 0, rdma_cm (7.3.4's `cma_send_device_removal_put`) releases the handler
    /// mutex and only then cancels the id's pending operation with the state from before, which
    /// for a route query reads the id's device; an owner woken by the handler and destroying
    /// the id meanwhile releases the device first (a NULL dereference in rdma_cm).
    pub(crate) fn surrender(&self) -> bool {
        self.ctx().owner.surrender()
    }

    /// Sends the connect request (the QP created on this id is used).
    pub(crate) fn connect(&self, p: &ConnParam<'_>) -> Result {
        let len = u8::try_from(p.private_data.len()).map_err(|_| EINVAL)?;
        // SAFETY: an all-zero rdma_conn_param is valid.
        let mut param: raw::rdma_conn_param = unsafe { core::mem::zeroed() };
        param.private_data = p.private_data.as_ptr().cast();
        param.private_data_len = len;
        param.responder_resources = p.responder_resources;
        param.flow_control = p.flow_control.into();
        param.retry_count = p.retry_count;
        param.rnr_retry_count = p.rnr_retry_count;
        // SAFETY: the id is live and its handler mutex is held (type invariant), as
        // rdma_connect_locked requires; `param` and the private data live for the call (rdma_cm
        // copies the private data).
        to_result(unsafe { raw::rdma_connect_locked(self.raw(), &mut param) })
    }
}

/// An owned connection manager id for a reliable-connected queue pair, whose events go to `H`.
///
/// Dropping it destroys the id (waiting for a running handler), then its QP, if one was
/// created, and then what the QP was created with ([`CmIdLocked::create_qp`]). Every
/// [`super::qp::Mr`] taken from the QP's pool must have been dropped before it.
///
/// # Invariants
///
/// `ctx` is the foreign form of an `Arc<Ctx<H>>` owned by this object. Unless that context's
/// `owner` is gone ([`Owner::gone`]), `ptr` is a live `rdma_cm_id` created by [`CmId::new`]
/// whose `context` is `ctx`; `owner` becomes gone only while the id is parked
/// ([`CmId::resolve_addr_parked`], which borrows it mutably: no other method runs meanwhile),
/// when rdma_cm destroys the id.
pub(crate) struct CmId<H: CmHandler> {
    ptr: NonNull<raw::rdma_cm_id>,
    ctx: NonNull<core::ffi::c_void>,
    handler: Arc<H>,
    _h: PhantomData<Arc<Ctx<H>>>,
}

/// The context of an id: its handler, and whether the owner started destroying the id (events
/// that arrive after that are not delivered, so a handler cannot create a QP the owner missed).
struct Ctx<H: CmHandler> {
    closing: core::sync::atomic::AtomicBool,
    /// Who may use the id ([`Owner`]).
    owner: Owner,
    /// The id's QP (null before [`CmIdLocked::create_qp`]), kept here for an id rdma_cm
    /// destroyed: the QP outlives it.
    qp: AtomicPtr<raw::ib_qp>,
    h: Arc<H>,
    /// The QP's CQ and PD, set by [`CmIdLocked::create_qp`].
    qp_res: kernel::sync::SetOnce<H::QpRes>,
    /// The cell the QP was published in ([`CmId::publish_qp`]; null: none). It is the
    /// handler's, which this context keeps.
    published: core::sync::atomic::AtomicPtr<QpCell>,
}

// SAFETY: rdma_cm ids may be used and destroyed from any thread; `H` is Send + Sync.
unsafe impl<H: CmHandler> Send for CmId<H> {}
// SAFETY: the methods taking `&self` are rdma_cm calls that serialise internally.
unsafe impl<H: CmHandler> Sync for CmId<H> {}

impl<H: CmHandler> CmId<H> {
    /// Creates an id in the initial network namespace (TCP port space, RC).
    pub(crate) fn new(handler: Arc<H>) -> Result<Self> {
        let ctx = Arc::new(
            Ctx {
                closing: core::sync::atomic::AtomicBool::new(false),
                owner: Owner::new(),
                qp: AtomicPtr::new(core::ptr::null_mut()),
                h: handler.clone(),
                qp_res: kernel::sync::SetOnce::new(),
                published: core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()),
            },
            GFP_KERNEL,
        )?
        .into_foreign();
        // SAFETY: `init_net` lives forever; the trampoline matches rdma_cm_event_handler; `ctx`
        // stays valid until `drop` reclaims it after rdma_destroy_id.
        let id = from_err_ptr(unsafe {
            raw::rnvme_rdma_create_id(
                &raw mut raw::init_net,
                Some(Self::handler_cb),
                ctx.cast(),
                raw::rdma_ucm_port_space_RDMA_PS_TCP as i32,
                raw::ib_qp_type_IB_QPT_RC as i32,
            )
        });
        match id {
            // INVARIANT: `p` is a live id with `ctx` as context, and `owner` is `ACTIVE`.
            Ok(p) => Ok(Self {
                ptr: NonNull::new(p).ok_or(ENOMEM)?,
                ctx: NonNull::new(ctx.cast()).ok_or(ENOMEM)?,
                handler,
                _h: PhantomData,
            }),
            Err(e) => {
                // SAFETY: `ctx` came from `into_foreign` above and was not handed to rdma_cm.
                drop(unsafe { <Arc<Ctx<H>> as ForeignOwnable>::from_foreign(ctx) });
                Err(e)
            }
        }
    }

    /// # Safety
    ///
    /// Called by rdma_cm for an id created by [`CmId::new`], with its handler mutex held.
    unsafe extern "C" fn handler_cb(
        id: *mut raw::rdma_cm_id,
        ev: *mut raw::rdma_cm_event,
    ) -> kernel::ffi::c_int {
        // The owner reclaims the context after rdma_destroy_id, which waits for running
        // handlers, or, once this handler gave the id to rdma_cm, at any time: hence the
        // reference taken here for the rest of the call.
        // SAFETY: the id is live during its handler and its context is our `Arc<Ctx<H>>`.
        let ctx = unsafe { <Arc<Ctx<H>> as ForeignOwnable>::borrow((*id).context.cast()) };
        let ctx: Arc<Ctx<H>> = ctx.into();
        if ctx.closing.load(Ordering::Relaxed) || ctx.owner.gone() {
            // The owner is destroying the id (it set the flag under the handler mutex we hold),
            // or rdma_cm is (not reached: no handler runs after one returned non-zero).
            return 0;
        }
        // SAFETY: `CmIdLocked` is repr(transparent); the handler mutex is held; the id was
        // created by `CmId::<H>::new`.
        let locked = unsafe { &*id.cast::<CmIdLocked<H>>() };
        // SAFETY: `ev` is valid for the duration of the handler.
        let ev = unsafe { Self::decode(id, ev) };
        if matches!(ev, CmEvent::RouteResolved | CmEvent::RouteError(_)) {
            // The id has left `RDMA_CM_ROUTE_QUERY`: the owner may unpark again.
            ctx.owner.route_done();
        }
        H::event(&ctx.h, locked, &ev);
        if ctx.owner.gone() {
            // The handler surrendered the id (`CmIdLocked::surrender`): rdma_cm destroys it.
            return ENODEV.to_errno();
        }
        // Otherwise the owner destroys the id.
        0
    }

    /// # Safety
    ///
    /// `id` and `ev` are valid for the returned lifetime (the duration of the handler call).
    unsafe fn decode<'a>(id: *mut raw::rdma_cm_id, ev: *mut raw::rdma_cm_event) -> CmEvent<'a> {
        // SAFETY: `ev` is valid (caller).
        let (event, status) = unsafe { ((*ev).event, (*ev).status) };
        match event {
            raw::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_RESOLVED => CmEvent::AddrResolved,
            raw::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_ERROR => CmEvent::AddrError(status),
            raw::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_RESOLVED => CmEvent::RouteResolved,
            raw::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_ERROR => CmEvent::RouteError(status),
            raw::rdma_cm_event_type_RDMA_CM_EVENT_ESTABLISHED => CmEvent::Established,
            raw::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_ERROR => CmEvent::ConnectError(status),
            raw::rdma_cm_event_type_RDMA_CM_EVENT_UNREACHABLE => CmEvent::Unreachable(status),
            raw::rdma_cm_event_type_RDMA_CM_EVENT_DISCONNECTED => CmEvent::Disconnected,
            raw::rdma_cm_event_type_RDMA_CM_EVENT_DEVICE_REMOVAL => CmEvent::DeviceRemoval,
            raw::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_CHANGE => CmEvent::AddrChange,
            raw::rdma_cm_event_type_RDMA_CM_EVENT_TIMEWAIT_EXIT => CmEvent::TimewaitExit,
            raw::rdma_cm_event_type_RDMA_CM_EVENT_REJECTED => {
                let mut len: u8 = 0;
                // SAFETY: `id` and `ev` are the REJECTED event's; the returned data lives in
                // the event, valid for `'a`.
                let data = unsafe { raw::rdma_consumer_reject_data(id, ev, &mut len) };
                // SAFETY: rdma_reject_msg returns a static string.
                let reason = unsafe { CStr::from_char_ptr(raw::rdma_reject_msg(id, status)) };
                let private_data = if data.is_null() {
                    None
                } else {
                    // SAFETY: rdma_consumer_reject_data returned `len` readable bytes.
                    Some(unsafe { core::slice::from_raw_parts(data.cast::<u8>(), len.into()) })
                };
                CmEvent::Rejected(Reject {
                    status,
                    reason,
                    private_data,
                })
            }
            other => CmEvent::Other(other, status),
        }
    }

    fn raw(&self) -> *mut raw::rdma_cm_id {
        self.ptr.as_ptr()
    }

    /// The id's event handler.
    pub(crate) fn handler(&self) -> &Arc<H> {
        &self.handler
    }

    /// The id's context.
    fn ctx(&self) -> &Ctx<H> {
        // SAFETY: `self.ctx` is our `Arc<Ctx<H>>` (type invariant), reclaimed only when `self` is
        // dropped, which this borrow prevents.
        let ctx = unsafe { <Arc<Ctx<H>> as ForeignOwnable>::borrow(self.ctx.as_ptr().cast()) };
        let p: *const Ctx<H> = &*ctx;
        // SAFETY: `p` points into the `Arc<Ctx<H>>`, which outlives the borrow of `self` (above).
        unsafe { &*p }
    }

    /// What the id's QP was created with (`None` before [`CmIdLocked::create_qp`]).
    pub(crate) fn qp_res(&self) -> Option<&H::QpRes> {
        self.ctx().qp_res.as_ref()
    }

    /// rdma_cm destroyed the id (a handler surrendered it while it was parked): only the QP and
    /// what it owns are left, and the id's operations fail with `ENODEV`.
    pub(crate) fn gone(&self) -> bool {
        self.ctx().owner.gone()
    }

    /// Publishes the id's QP in its handler's cell ([`CmHandler::qp_cell`]) for the data path.
    /// The id withdraws it again, and waits for an RCU grace period, before it destroys the QP.
    /// `ENOTCONN` without a QP, `EINVAL` if the handler names no cell.
    pub(crate) fn publish_qp(&self) -> Result {
        let qp = self.qp().ok_or(ENOTCONN)?;
        let ctx = self.ctx();
        let cell = H::qp_cell(&ctx.h).ok_or(EINVAL)?;
        let p: *const QpCell = cell;
        // Recorded before the QP is published, so `drop` withdraws it from this cell. (The cell
        // is the handler's, which `ctx` keeps until after the QP is destroyed.)
        if let Err(old) = ctx.published.compare_exchange(
            core::ptr::null_mut(),
            p.cast_mut(),
            core::sync::atomic::Ordering::AcqRel,
            core::sync::atomic::Ordering::Acquire,
        ) {
            // One cell per id: a QP published elsewhere stays there.
            if old != p.cast_mut() {
                return Err(EINVAL);
            }
        }
        // SAFETY: the QP lives until `drop` destroys it, which first withdraws it from the cell
        // recorded above and waits for a grace period.
        unsafe { cell.publish(qp) };
        Ok(())
    }

    /// Starts address resolution from `src` (any local address when `None`) to `dst`
    /// (`AddrResolved` or `AddrError` follows, then what its handler starts), then runs `wait`
    /// (the owner waiting for the outcome its handler reports) with the id *parked*: a handler may
    /// give it to rdma_cm meanwhile ([`CmIdLocked::surrender`]). `wait` cannot use the id (it is
    /// borrowed here); afterwards [`CmId::gone`] tells whether it was given away. The handler
    /// mutex is held from before the start until the id is parked, so no handler runs before:
    /// every event of the id finds it parked until `wait` returns. (rdma_cm delivers address
    /// resolution from a work item, never from within `rdma_resolve_addr`; this is the id's first
    /// resolution, so `rdma_resolve_addr` has no earlier request to cancel and wait for.)
    pub(crate) fn resolve_addr_parked<R>(
        &mut self,
        src: Option<&SockAddr>,
        dst: &SockAddr,
        timeout_ms: u32,
        wait: impl FnOnce() -> R,
    ) -> Result<R> {
        if self.gone() {
            return Err(ENODEV);
        }
        let src = src.map_or(core::ptr::null_mut(), |s| s.as_ptr().cast_mut());
        let ctx = self.ctx();
        // SAFETY: the id is live (type invariant: not gone); the addresses are valid sockaddrs
        // that rdma_cm copies before returning; the handler mutex is released below on every
        // path.
        let r = unsafe {
            raw::rdma_lock_handler(self.raw());
            let r = to_result(raw::rdma_resolve_addr(
                self.raw(),
                src,
                dst.as_ptr(),
                timeout_ms as usize,
            ));
            if r.is_ok() {
                ctx.owner.park();
            }
            raw::rdma_unlock_handler(self.raw());
            r
        };
        r?;
        let out = wait();
        // Back, unless a handler surrendered the id meanwhile; not while a route query is
        // outstanding ([`Owner::unpark`]). After this no handler can surrender it: they
        // surrender only a parked id.
        ctx.owner.unpark(timeout_ms);
        Ok(out)
    }

    /// The id's QP, once [`CmIdLocked::create_qp`] succeeded (also when the id is gone).
    pub(crate) fn qp(&self) -> Option<&Qp> {
        // Acquire: paired with `create_qp`'s store, after the QP was created.
        let qp = self.ctx().qp.load(Ordering::Acquire);
        // SAFETY: the QP is only destroyed when `self` is dropped, which the borrow prevents.
        (!qp.is_null()).then(|| unsafe { Qp::from_raw(qp) })
    }

    /// Disconnects the connection (if any); `Disconnected` follows. `ENODEV` if the id is gone.
    pub(crate) fn disconnect(&self) -> Result {
        if self.gone() {
            return Err(ENODEV);
        }
        // SAFETY: the id is live (type invariant: not gone).
        to_result(unsafe { raw::rdma_disconnect(self.raw()) })
    }
}
