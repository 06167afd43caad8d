// SPDX-License-Identifier: GPL-2.0

//! A controller's queues: a queue's rdma_cm connection (CQ, QP, receive ring, MR pool), its
//! events, its stop and release. (The controller they belong to is in `controller`.)

#![deny(unsafe_code)]

mod teardown;

use super::{
    device::{dev_get, max_fr_pages, DevUse},
    stats, text, Ctrl,
};
use crate::bindings::compat::prelude::*;
use crate::{
    nvme::{opt, State},
    proto::{
        capsule::{CQE_LEN, SQE_LEN},
        cm::{parse_rej, CmRej, CmReq},
    },
    rdma::{
        cm::{CmEvent, CmHandler, CmId, CmIdLocked, ConnParam, QpResources},
        qp::QpAttr,
        qp_cell::QpCell,
        recv::RecvRing,
        verbs::{Cq, Pd, PollCell, PollCtx},
    },
};
use core::sync::atomic::{
    AtomicBool, AtomicU32,
    Ordering::{Relaxed, Release, SeqCst},
};
use kernel::{
    new_condvar, new_mutex,
    sync::{aref::ARef, Arc, CondVar, Mutex},
};

/// rdma_cm address and route resolution timeout (the C driver's `NVME_RDMA_CM_TIMEOUT_MS`).
const CM_TIMEOUT_MS: u32 = 3000;
/// Upper bound on establishing one queue's connection (address, route, connect). The C driver
/// waits without a bound; rdma_cm's own timeouts normally fire well before this.
const CM_ESTABLISH_TIMEOUT_MS: u32 = 30_000;
/// `NVME_AQ_DEPTH`: the admin queue's depth.
pub(super) const AQ_DEPTH: u32 = 32;
/// `NVME_AQ_BLK_MQ_DEPTH`: the admin tag set's depth; the AER uses command IDs from there on.
pub(super) const AQ_BLK_MQ_DEPTH: u16 = 31;

// ------------------------------------------------------------------------------------------
// Queues and their RDMA connections

/// What a queue's connection reports to the controller above it. The controller implements it
/// (`controller`); a queue reaches its controller's policy only through it, so the controller
/// stands above its queues and this file does not depend on that one.
pub(super) trait QueueEvents {
    /// A connection that was established is gone, or its rdma_cm id reported what cannot be
    /// handled: recover the controller (`nvme_rdma_error_recovery`).
    fn connection_failed(&self);
    /// The RDMA device went under an established connection of the controller (its queue is
    /// lost already): take the controller down, through whoever may.
    fn device_removed(&self);
}

/// What each receive buffer of a queue knows: where its completions go (`io::RspData`'s
/// `RecvDone`).
pub(super) struct RspData {
    pub(super) ctrl: ARef<Ctrl>,
    pub(super) qid: u16,
    /// The queue's completion counters.
    pub(super) stats: stats::Side,
}

/// What a connection's QP is created with, when its address is resolved: its CQ, the device
/// context holding its PD, and its receive ring. The `CmId` owns it from `create_qp` on and drops
/// it after destroying the QP, fields in this order: the ring goes after the CQ, so a completion
/// still polled before the CQ is freed finds its buffer.
pub(super) struct ConnQpRes {
    pub(super) cq: Cq,
    pub(super) dev: DevUse,
    pub(super) ring: RecvRing<RspData>,
}

impl QpResources for ConnQpRes {
    type Recv = RspData;

    fn pd(&self) -> &Pd {
        &self.dev.0.pd
    }

    fn cq(&self) -> &Cq {
        &self.cq
    }

    fn recv_ring(&self) -> &RecvRing<RspData> {
        &self.ring
    }
}

/// Connection establishment state of one queue.
pub(super) struct CmState {
    /// How establishing the connection ended (`None`: still under way).
    pub(super) outcome: Option<Result>,
    /// Receive buffers were posted (the connection was established): the QP needs a drain.
    pub(super) recvs_posted: bool,
    /// This host disconnected the connection and drained its QP, its queue marked lost and a
    /// grace period passed before ([`disconnect_and_drain`]): nothing of it is posted or can
    /// complete any more, and stopping it again would only repeat the wait and the drain.
    pub(super) stopped: bool,
}

/// The rdma_cm event handler of a queue's connection.
#[pin_data]
pub(super) struct ConnCm {
    pub(super) ctrl: ARef<Ctrl>,
    pub(super) qid: u16,
    pub(super) queue_size: u32,
    /// A poll queue: its CQ is polled by blk-mq instead of softirq.
    pub(super) poll: bool,
    #[pin]
    pub(super) state: Mutex<CmState>,
    #[pin]
    pub(super) cond: CondVar,
}

impl ConnCm {
    pub(super) fn finish(&self, r: Result) {
        let mut st = self.state.lock();
        if st.outcome.is_none() {
            st.outcome = Some(r);
        }
        drop(st);
        self.cond.notify_all();
    }

    pub(super) fn established(&self) -> bool {
        self.state.lock().outcome.is_some()
    }

    /// The connection was established (not merely ended: a failed one has an outcome too).
    fn connected(&self) -> bool {
        matches!(self.state.lock().outcome, Some(Ok(())))
    }

    /// The established connection is gone (the target disconnected, or this host did: then the
    /// queue was marked lost first and this does nothing). From now on the queue refuses commands
    /// (`queue_rq`). While the controller is `Connecting`, error recovery cannot run (it needs
    /// `Resetting`), so nothing would end the commands the setup waits for on this queue (a
    /// Fabrics Connect, a DH-HMAC-CHAP message, an identify) before their timeout, and the
    /// core retries some of them: a target that ends the association during authentication (a
    /// wrong secret) kept `nvme connect` blocked for minutes. They go to the timeout handler now,
    /// which stops the queue and ends them as aborted, as it would at their timeout. (The C
    /// driver waits for the timeout, and again for each retry.)
    fn lost(&self) {
        let Some(q) = self.ctrl.queue(self.qid) else {
            return;
        };
        // Not under `Queue::conn`: this runs under the id's handler mutex, and an id dropped
        // under `Queue::conn` (`alloc` replacing a connection) would wait for it. A teardown
        // racing with this is harmless: the walk excludes the removal of the tag set, and a
        // request ends once whoever ends it first.
        // SeqCst: paired with `setup_ctrl`'s fence between going live and its look at `lost`:
        // either this sees `Live` (and error recovery takes over) or the setup sees `lost`.
        if q.lost.swap(true, SeqCst) {
            return;
        }
        if self.ctrl.nvme().state() == State::Connecting {
            dev_info!(
                self.ctrl,
                "queue {}: connection lost while connecting: ending its commands now\n",
                self.qid
            );
            self.ctrl.abort_requests(self.qid);
        }
    }

    /// `RDMA_CM_EVENT_DEVICE_REMOVAL` on an established connection: the queue is lost (its
    /// commands end now if the controller is connecting, so a setup waiting for one fails at
    /// once), and the controller decides how it goes ([`QueueEvents::device_removed`]).
    fn device_removed(&self) {
        dev_info!(self.ctrl, "RDMA device removed under queue {}\n", self.qid);
        self.lost();
        self.ctrl.device_removed();
    }

    /// `RDMA_CM_EVENT_ADDR_RESOLVED`: create CQ, QP, receive ring and MR pool, then resolve the
    /// route.
    fn addr_resolved(&self, id: &CmIdLocked<Self>) -> Result {
        let ctrl = &self.ctrl;
        let ibdev = id.device().ok_or(ENODEV)?;
        let dev = DevUse(dev_get(ibdev).inspect_err(|_| {
            dev_err!(ctrl, "no client data found!\n");
        })?);
        let qs = self.queue_size;
        // MR, SEND, INV per request, + RECV; +1 for ib_drain_qp.
        let cq_size = 4 * qs + 1;
        let idx = u32::from(self.qid);
        let comp_vector = if idx == 0 { 0 } else { idx - 1 } % ibdev.num_comp_vectors();
        let ctx = if self.poll {
            PollCtx::Direct
        } else {
            PollCtx::Softirq
        };
        let cq = Cq::new(ibdev, cq_size, comp_vector, ctx)?;
        let attr = QpAttr {
            max_send_wr: 3 * qs + 1,
            max_recv_wr: qs + 1,
            max_send_sge: 1 + dev.0.num_inline_segments,
            max_recv_sge: 1,
            context: core::ptr::null_mut(),
        };
        let ring = RecvRing::new(ibdev, qs, CQE_LEN, |_| RspData {
            ctrl: ctrl.clone(),
            qid: self.qid,
            stats: stats::Side::completion(self.qid),
        })?;
        // From here the id owns the CQ, the device context and the ring: an error below cannot
        // free them under the QP.
        id.create_qp(ConnQpRes { cq, dev, ring }, &attr)?;
        let qp = id.qp().ok_or(ENOMEM)?;
        // One more entry than pages: a misaligned first entry takes two.
        let pages_per_mr = max_fr_pages(ibdev) + 1;
        qp.mr_pool_init(qs, pages_per_mr).inspect_err(|_| {
            dev_err!(
                ctrl,
                "failed to initialize MR pool sized {} for QID {}\n",
                qs,
                self.qid
            );
        })?;
        let tos = ctrl.nvme().opts().tos();
        if tos >= 0 {
            id.set_service_type(tos as u8);
        }
        id.resolve_route(CM_TIMEOUT_MS).inspect_err(|e| {
            dev_err!(ctrl, "rdma_resolve_route failed ({}).\n", e.to_errno());
        })
    }

    /// `RDMA_CM_EVENT_ROUTE_RESOLVED`: send the connect request.
    fn route_resolved(&self, id: &CmIdLocked<Self>) -> Result {
        let c = self.ctrl.nvme();
        let rd_atom = id.device().map_or(0, |d| d.max_qp_rd_atom());
        let req = if self.qid == 0 {
            CmReq {
                qid: 0,
                hrqsize: AQ_DEPTH as u16,
                hsqsize: (AQ_DEPTH - 1) as u16,
                cntlid: 0,
            }
        } else {
            CmReq {
                qid: self.qid,
                hrqsize: self.queue_size as u16,
                hsqsize: c.sqsize(),
                cntlid: c.cntlid(),
            }
        };
        let priv_data = req.to_bytes();
        id.connect(&ConnParam {
            private_data: &priv_data,
            responder_resources: rd_atom.min(255) as u8,
            flow_control: true,
            retry_count: 7,
            rnr_retry_count: 7,
        })
        .inspect_err(|e| {
            dev_err!(
                self.ctrl,
                "rdma_connect_locked failed ({}).\n",
                e.to_errno()
            );
        })
    }

    /// `RDMA_CM_EVENT_ESTABLISHED`: post every receive buffer.
    fn conn_established(&self, id: &CmIdLocked<Self>) -> Result {
        let res = id.qp_res().ok_or(ENOTCONN)?;
        // Set first: once one buffer is posted, the QP needs a drain before it goes.
        self.state.lock().recvs_posted = true;
        let g = kernel::sync::rcu::read_lock();
        let rcu = crate::rdma::RcuReader::of(&g);
        res.recv_ring().iter().try_for_each(|e| e.post(rcu))
    }

    fn conn_rejected(&self, r: &crate::rdma::cm::Reject<'_>) -> Error {
        match r.private_data.map(parse_rej) {
            Some(CmRej::Nvme(sts)) => dev_err!(
                self.ctrl,
                "Connect rejected: status {} ({}) nvme status {} ({}).\n",
                r.status,
                text(r.reason),
                sts.code(),
                sts.message()
            ),
            _ => dev_err!(
                self.ctrl,
                "Connect rejected: status {} ({}).\n",
                r.status,
                text(r.reason)
            ),
        }
        ECONNRESET
    }
}

impl CmHandler for ConnCm {
    type QpRes = ConnQpRes;

    fn qp_cell(this: &Self) -> Option<&QpCell> {
        this.ctrl.queue(this.qid).map(|q| &q.qp)
    }

    fn event(this: &Self, id: &CmIdLocked<Self>, ev: &CmEvent<'_>) {
        let r = match ev {
            CmEvent::AddrResolved => this.addr_resolved(id).err(),
            CmEvent::RouteResolved => this.route_resolved(id).err(),
            CmEvent::Established => {
                this.finish(this.conn_established(id));
                return;
            }
            CmEvent::Rejected(r) => Some(this.conn_rejected(r)),
            CmEvent::AddrError(s) => {
                dev_info!(this.ctrl, "address resolution failed (status {})\n", s);
                Some(ECONNRESET)
            }
            CmEvent::RouteError(s) => {
                dev_info!(this.ctrl, "route resolution failed (status {})\n", s);
                Some(ECONNRESET)
            }
            CmEvent::ConnectError(s) | CmEvent::Unreachable(s) => {
                dev_info!(
                    this.ctrl,
                    "connection failed: peer unreachable (status {})\n",
                    s
                );
                Some(ECONNRESET)
            }
            CmEvent::Disconnected | CmEvent::AddrChange | CmEvent::TimewaitExit => {
                if this.established() {
                    if this.ctrl.nvme().state() == State::Live {
                        dev_info!(this.ctrl, "disconnect received - connection closed\n");
                    }
                    this.lost();
                    this.ctrl.connection_failed();
                    None
                } else {
                    Some(ECONNRESET)
                }
            }
            // The ib_client `remove` callback (`fabrics.rs`) has deleted the listed controllers
            // with queues on the device before rdma_cm sends this (clients go in reverse order of
            // registration: rdma_cm's after ours), and rdma_cm waits for every id on the device
            // to be destroyed. A queue that callback could not see (its controller still being
            // created, or its connection not yet published in `Queue::conn`) gets it here: a
            // pending connection fails, and its id goes to rdma_cm, which destroys it when this
            // returns (`surrender`: the setup is parked waiting for this outcome; rdma_cm reads
            // the id's device after a handler that returned 0, so the setup must not destroy
            // it: rdma_cm would oops); an established one is lost (`device_removed`). The C
            // driver ignores this event; its connect then waits for ever, and so does the
            // removal.
            CmEvent::DeviceRemoval => {
                if this.connected() {
                    this.device_removed();
                    None
                } else {
                    if id.surrender() {
                        dev_info!(
                            this.ctrl,
                            "queue {}: RDMA device removed while connecting\n",
                            this.qid
                        );
                    }
                    Some(ENODEV)
                }
            }
            CmEvent::Other(e, st) => {
                dev_err!(
                    this.ctrl,
                    "Unexpected RDMA CM event ({}, status {})\n",
                    e,
                    st
                );
                this.ctrl.connection_failed();
                None
            }
        };
        if let Some(e) = r {
            this.finish(Err(e));
        }
    }
}

/// `__nvme_rdma_stop_queue`: disconnect, then wait until everything posted on the QP completed.
fn disconnect_and_drain(cm: &CmId<ConnCm>) {
    let _ = cm.disconnect();
    if let Some(qp) = cm.qp() {
        qp.drain();
    }
    cm.handler().state.lock().stopped = true;
}

/// One NVMe queue (0 is the admin queue).
#[pin_data]
pub(crate) struct Queue {
    pub(super) qid: u16,
    /// `NVME_RDMA_Q_LIVE`: the Fabrics Connect succeeded.
    pub(super) live: AtomicBool,
    /// The current connection is gone or going: the target disconnected it, or this host stopped
    /// it. Cleared when a new connection is started ([`Queue::alloc`]).
    pub(super) lost: AtomicBool,
    /// The QP for the data path (see `QpCell` for the lifetime protocol).
    pub(super) qp: QpCell,
    /// The CQ blk-mq polls, on poll queues.
    #[pin]
    pub(super) poll_cq: PollCell,
    pub(super) num_inline_segments: AtomicU32,
    /// In-capsule data bytes (0 on the admin queue).
    pub(super) inline_size: AtomicU32,
    /// An empty MR pool was reported for the current connection.
    pub(super) mr_pool_empty: AtomicBool,
    /// The queue's submission counters.
    pub(super) stats: stats::Side,
    /// The allocated connection (`NVME_RDMA_Q_ALLOCATED`).
    #[pin]
    pub(super) conn: Mutex<Option<CmId<ConnCm>>>,
}

impl Queue {
    pub(super) fn new(qid: u16) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            qid,
            live: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            qp: QpCell::new(),
            poll_cq: PollCell::new(),
            num_inline_segments: AtomicU32::new(0),
            inline_size: AtomicU32::new(0),
            mr_pool_empty: AtomicBool::new(false),
            stats: stats::Side::submission(*qid),
            conn <- new_mutex!(None),
        })
    }

    /// Connects the queue's RDMA connection (`nvme_rdma_alloc_queue`), with a bounded wait.
    pub(super) fn alloc(&self, ctrl: &ARef<Ctrl>, queue_size: u32) -> Result {
        let q = &ctrl.io_queues;
        let poll = self.qid != 0
            && q[2].load(Relaxed) > 0
            && u32::from(self.qid) > q[0].load(Relaxed) + q[1].load(Relaxed);
        let h = Arc::pin_init(
            pin_init!(ConnCm {
                ctrl: ctrl.clone(),
                qid: self.qid,
                queue_size,
                poll,
                state <- new_mutex!(CmState {
                    outcome: None,
                    recvs_posted: false,
                    stopped: false,
                }),
                cond <- new_condvar!(),
            }),
            GFP_KERNEL,
        )?;
        // Before the id exists: a disconnect from here on is this connection's.
        self.lost.store(false, Release);
        let mut cm = CmId::new(h.clone()).inspect_err(|e| {
            dev_info!(ctrl, "failed to create CM ID: {}\n", e.to_errno());
        })?;
        let src = if ctrl.nvme().opts().mask() & opt::HOST_TRADDR != 0 {
            ctrl.src.as_ref()
        } else {
            None
        };
        // Parked while waiting: a device removal may hand the id to rdma_cm meanwhile.
        let r = cm.resolve_addr_parked(src, &ctrl.addr, CM_TIMEOUT_MS, || {
            let mut st = h.state.lock();
            let mut left = kernel::time::msecs_to_jiffies(CM_ESTABLISH_TIMEOUT_MS);
            loop {
                if let Some(r) = st.outcome {
                    break r;
                }
                match h.cond.wait_interruptible_timeout(&mut st, left) {
                    kernel::sync::CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                    kernel::sync::CondVarTimeoutResult::Signal { .. } => break Err(EINTR),
                    kernel::sync::CondVarTimeoutResult::Timeout => {
                        dev_err!(
                            ctrl,
                            "queue {}: no RDMA connection after {} ms, giving up\n",
                            self.qid,
                            CM_ESTABLISH_TIMEOUT_MS
                        );
                        break Err(ETIMEDOUT);
                    }
                }
            }
        });
        let r =
            r.inspect_err(|e| dev_info!(ctrl, "rdma_resolve_addr failed ({}).\n", e.to_errno()))?;
        // (Not expected: an id given away has failed, with ENODEV or an earlier error.)
        let r = if cm.gone() { r.and(Err(ENODEV)) } else { r };
        if let Err(e) = r {
            dev_info!(
                ctrl,
                "rdma connection establishment failed ({})\n",
                e.to_errno()
            );
            // Dropping the id stops its events, destroys the QP and frees the resources.
            if let Some(qp) = cm.qp() {
                if h.state.lock().recvs_posted {
                    let _ = cm.disconnect();
                    qp.drain();
                }
            }
            drop(cm);
            return Err(e);
        }
        let nis = cm.qp_res().map_or(0, |r| r.dev.0.num_inline_segments);
        self.num_inline_segments.store(nis, Relaxed);
        let inline = if self.qid == 0 {
            0
        } else {
            (ctrl.nvme().ioccsz() * 16).saturating_sub(SQE_LEN as u32)
        };
        self.inline_size.store(inline, Relaxed);
        if let Some(res) = cm.qp_res() {
            self.poll_cq.set(&res.cq);
        }
        // A new connection has a new, full MR pool.
        self.mr_pool_empty.store(false, Relaxed);
        // For the data path; the id withdraws it again before it destroys the QP. (Not expected
        // to fail: the connection has its QP, and the handler names the queue's cell.)
        if let Err(e) = cm.publish_qp() {
            self.poll_cq.clear();
            disconnect_and_drain(&cm);
            return Err(e);
        }
        *self.conn.lock() = Some(cm);
        Ok(())
    }
}
