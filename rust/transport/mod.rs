// SPDX-License-Identifier: GPL-2.0

//! The NVMe/RDMA host transport logic. Safe code only: everything unsafe is in `rdma` and `nvme`.
//!
//! The structure follows the C driver (`drivers/nvme/host/rdma.c`) so that behaviour can be
//! compared function by function: per-device context shared by controllers on one HCA, queues
//! connected over rdma_cm (admin queue first), requests mapped onto SEND (+ REG_MR) work requests,
//! responses matched by command ID.

#![deny(unsafe_code)]

mod req_end;
mod req_io;
mod stats;

use req_end::ReqEnd;
use req_io::ReqIo;
pub(crate) use stats::{Stats, STATS};

use crate::{
    nvme::{
        ctrl::{Controller, CtrlOps, State},
        mq::{BlkStatus, MappedCmd, MappedSg, MqOps, Request, TimeoutAction},
        opt, Ctrl, FabricsDevice, Options, TransportOps, TryCell, CTRLS, DEVICES,
    },
    proto::{
        capsule,
        cm::{parse_rej, CmRej, CmReq},
        inval::{self, Invalidation},
        sgl::Sgl,
    },
    rdma::{
        cm::{CmEvent, CmHandler, CmId, CmIdLocked, ConnParam, QpResources},
        qp::{self, CqeDone, Mr, QpAttr, QpCell, Wc},
        verbs::{Cq, DeviceRef, DmaBuf, DmaDir, Pd, PollCell, PollCtx},
        ClientOps, Device, SockAddr,
    },
};
use core::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU32,
    Ordering::{AcqRel, Acquire, Relaxed, Release},
};
use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    str::CStr,
    sync::{aref::ARef, Arc, Completion, CondVar, Mutex},
};

/// The default NVMe/RDMA service id (`NVME_RDMA_IP_PORT`).
const DEFAULT_TRSVCID: &CStr = c"4420";
/// rdma_cm address and route resolution timeout (the C driver's `NVME_RDMA_CM_TIMEOUT_MS`).
const CM_TIMEOUT_MS: u32 = 3000;
/// Upper bound on establishing one queue's connection (address, route, connect). The C driver
/// waits without a bound; rdma_cm's own timeouts normally fire well before this.
const CM_ESTABLISH_TIMEOUT_MS: u32 = 30_000;
const MAX_SEGMENTS: u32 = 256;
const MAX_INLINE_SEGMENTS: u32 = 4;
/// `NVME_RDMA_MAX_QUEUE_SIZE`.
const MAX_QUEUE_SIZE: u32 = 256;
/// `NVME_AQ_DEPTH` and `NVME_AQ_BLK_MQ_DEPTH` (the AER uses command IDs from there on).
const AQ_DEPTH: u32 = 32;
const AQ_BLK_MQ_DEPTH: u16 = 31;
/// `NVME_CTRL_SGLS_KSDBDS` / `NVME_CTRL_SGLS_SAOS`.
const SGLS_KSDBDS: u32 = 1 << 2;
const SGLS_SAOS: u32 = 1 << 20;
/// Command bytes.
const CMD_FLAGS: usize = 1;
const CMD_SGL_METABUF: u8 = 1 << 6;
const CMD_DPTR: usize = 24;
const CQE_LEN: usize = 16;
const SQE_LEN: u32 = 64;

type RCtrl = Controller<RdmaCtrl>;

/// A C string for `core::fmt` (the `c*!` message macros go through `format_args!`).
fn cs(s: &CStr) -> &str {
    s.to_str().unwrap_or("?")
}

macro_rules! cinfo {
    ($c:expr, $fmt:literal $(, $arg:expr)* $(,)?) => {
        pr_info!("nvme{}: {}", $c.ctrl().instance(), ::core::format_args!($fmt $(, $arg)*))
    };
}
macro_rules! cerr {
    ($c:expr, $fmt:literal $(, $arg:expr)* $(,)?) => {
        pr_err!("nvme{}: {}", $c.ctrl().instance(), ::core::format_args!($fmt $(, $arg)*))
    };
}
macro_rules! cwarn {
    ($c:expr, $fmt:literal $(, $arg:expr)* $(,)?) => {
        pr_warn!("nvme{}: {}", $c.ctrl().instance(), ::core::format_args!($fmt $(, $arg)*))
    };
}

// ------------------------------------------------------------------------------------------
// Per-device context

/// What controllers on one RDMA device share: the protection domain and the device's limits.
pub(crate) struct RdmaDev {
    pd: Pd,
    num_inline_segments: u32,
}

impl RdmaDev {
    fn device(&self) -> &Device {
        self.pd.device()
    }
}

/// An entry of the global device list, with its number of users (queues).
pub(crate) struct DevEntry {
    dev: Arc<RdmaDev>,
    users: usize,
}

/// Finds or creates the context of `dev` and counts one more user.
fn dev_get(dev: &Device) -> Result<Arc<RdmaDev>> {
    let mut list = DEVICES.lock();
    let guid = dev.node_guid();
    for e in list.iter_mut() {
        if e.dev.device().node_guid() == guid {
            e.users += 1;
            return Ok(e.dev.clone());
        }
    }
    let dref = DeviceRef::get(dev).ok_or(ENODEV)?;
    if !dref.has_mem_mgt_extensions() {
        pr_err!("{}: Memory registrations not supported.\n", dref.name());
        return Err(EOPNOTSUPP);
    }
    let num_inline_segments = dref
        .max_send_sge()
        .saturating_sub(1)
        .min(MAX_INLINE_SEGMENTS);
    let pd = Pd::new(dref, false)?;
    let d = Arc::new(
        RdmaDev {
            pd,
            num_inline_segments,
        },
        GFP_KERNEL,
    )?;
    list.push(
        DevEntry {
            dev: d.clone(),
            users: 1,
        },
        GFP_KERNEL,
    )?;
    Ok(d)
}

/// Drops one user of `dev`; the last one removes it from the list.
fn dev_put(dev: &Arc<RdmaDev>) {
    let mut list = DEVICES.lock();
    if let Some(i) = list.iter().position(|e| Arc::ptr_eq(&e.dev, dev)) {
        list[i].users -= 1;
        if list[i].users == 0 {
            // The PD goes when the last `Arc` does (queues drop theirs after their QPs).
            let _ = list.remove(i);
            if list.is_empty() {
                // Give the buffer back: the list itself is static and outlives the module's
                // allocations otherwise.
                *list = KVec::new();
            }
        }
    }
}

/// A queue's counted use of a device context.
struct DevUse(Arc<RdmaDev>);

impl Drop for DevUse {
    fn drop(&mut self) {
        dev_put(&self.0);
    }
}

fn max_fr_pages(dev: &Device) -> u32 {
    MAX_SEGMENTS.min(dev.max_fast_reg_page_list_len().saturating_sub(1))
}

// ------------------------------------------------------------------------------------------
// Queues and their RDMA connections

/// A receive buffer for one NVMe completion.
struct RspQe {
    cqe: qp::Cqe,
    buf: DmaBuf,
    ctrl: ARef<RCtrl>,
    qid: u16,
}

crate::impl_has_cqe!(RspQe, cqe, 0);

/// What a connection's QP is created with, when its address is resolved: its CQ and the device
/// context holding its PD. The `CmId` owns it from `create_qp` on and drops it after destroying
/// the QP.
struct ConnQpRes {
    cq: Cq,
    dev: DevUse,
}

impl QpResources for ConnQpRes {
    fn pd(&self) -> &Pd {
        &self.dev.0.pd
    }

    fn cq(&self) -> &Cq {
        &self.cq
    }
}

/// Connection establishment state of one queue.
struct CmState {
    done: bool,
    err: i32,
    /// The receive buffers, posted once the connection is established. Freed with the handler,
    /// after the `CmId` destroyed the QP.
    ring: Option<KVec<RspQe>>,
    recvs_posted: bool,
}

/// The rdma_cm event handler of a queue's connection.
#[pin_data]
struct ConnCm {
    ctrl: ARef<RCtrl>,
    qid: u16,
    queue_size: u32,
    /// A poll queue: its CQ is polled by blk-mq instead of softirq.
    poll: bool,
    #[pin]
    state: Mutex<CmState>,
    #[pin]
    cond: CondVar,
}

impl ConnCm {
    fn finish(&self, err: i32) {
        let mut st = self.state.lock();
        if !st.done {
            st.done = true;
            st.err = err;
        }
        drop(st);
        self.cond.notify_all();
    }

    fn established(&self) -> bool {
        self.state.lock().done
    }

    /// `RDMA_CM_EVENT_ADDR_RESOLVED`: create CQ, QP, receive ring and MR pool, then resolve the
    /// route.
    fn addr_resolved(&self, id: &CmIdLocked<Self>) -> Result {
        let ctrl = &self.ctrl;
        let ibdev = id.device().ok_or(ENODEV)?;
        let dev = DevUse(dev_get(ibdev).inspect_err(|_| {
            cerr!(ctrl, "no client data found!\n");
        })?);
        let qs = self.queue_size;
        // MR, SEND, INV per request, + RECV; +1 for ib_drain_qp.
        let cq_size = 4 * qs + 1;
        let idx = u32::from(self.qid);
        let comp_vector = if idx == 0 { 0 } else { idx - 1 } % ibdev.num_comp_vectors();
        let ctx = if self.poll {
            PollCtx::Direct
        } else {
            PollCtx::PoolSoftirq
        };
        let cq = Cq::new(ibdev, cq_size, comp_vector, ctx)?;
        let attr = QpAttr {
            max_send_wr: 3 * qs + 1,
            max_recv_wr: qs + 1,
            max_send_sge: 1 + dev.0.num_inline_segments,
            max_recv_sge: 1,
            context: core::ptr::null_mut(),
        };
        // From here the id owns the CQ and the device context: an error below cannot free
        // them under the QP.
        id.create_qp(ConnQpRes { cq, dev }, &attr)?;
        let qp = id.qp().ok_or(ENOMEM)?;
        let mut ring = KVec::with_capacity(qs as usize, GFP_KERNEL)?;
        for _ in 0..qs {
            let dref = DeviceRef::get(ibdev).ok_or(ENODEV)?;
            ring.push(
                RspQe {
                    cqe: qp::Cqe::new(),
                    buf: DmaBuf::new(dref, CQE_LEN, DmaDir::FromDevice)?,
                    ctrl: ctrl.clone(),
                    qid: self.qid,
                },
                GFP_KERNEL,
            )?;
        }
        // One more entry than pages: a misaligned first entry takes two.
        let pages_per_mr = max_fr_pages(ibdev) + 1;
        qp.mr_pool_init(qs, pages_per_mr).inspect_err(|_| {
            cerr!(
                ctrl,
                "failed to initialize MR pool sized {} for QID {}\n",
                qs,
                self.qid
            );
        })?;
        self.state.lock().ring = Some(ring);
        let tos = ctrl.ctrl().opts().tos();
        if tos >= 0 {
            id.set_service_type(tos as u8);
        }
        id.resolve_route(CM_TIMEOUT_MS).inspect_err(|e| {
            cerr!(ctrl, "rdma_resolve_route failed ({}).\n", e.to_errno());
        })
    }

    /// `RDMA_CM_EVENT_ROUTE_RESOLVED`: send the connect request.
    fn route_resolved(&self, id: &CmIdLocked<Self>) -> Result {
        let c = self.ctrl.ctrl();
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
            cerr!(
                self.ctrl,
                "rdma_connect_locked failed ({}).\n",
                e.to_errno()
            );
        })
    }

    /// `RDMA_CM_EVENT_ESTABLISHED`: post every receive buffer.
    fn conn_established(&self, id: &CmIdLocked<Self>) -> Result {
        let qp = id.qp().ok_or(ENOTCONN)?;
        let mut st = self.state.lock();
        let ring = st.ring.as_ref().ok_or(ENOTCONN)?;
        let lkey = qp.local_dma_lkey();
        for qe in ring.iter() {
            qe.cqe.arm::<RspQe, 0>();
            qp.post_recv(&qe.cqe, &qp::sge(qe.buf.dma_addr(), CQE_LEN as u32, lkey))?;
        }
        st.recvs_posted = true;
        Ok(())
    }

    fn conn_rejected(&self, r: &crate::rdma::cm::Reject<'_>) -> i32 {
        match r.private_data.map(parse_rej) {
            Some(CmRej::Nvme(sts)) => cerr!(
                self.ctrl,
                "Connect rejected: status {} ({}) nvme status {} ({}).\n",
                r.status,
                cs(r.reason),
                sts.code(),
                sts.message()
            ),
            _ => cerr!(
                self.ctrl,
                "Connect rejected: status {} ({}).\n",
                r.status,
                cs(r.reason)
            ),
        }
        ECONNRESET.to_errno()
    }
}

impl CmHandler for ConnCm {
    type QpRes = ConnQpRes;

    fn event(this: &Self, id: &CmIdLocked<Self>, ev: &CmEvent<'_>) {
        let r = match ev {
            CmEvent::AddrResolved => this.addr_resolved(id).err().map(|e| e.to_errno()),
            CmEvent::RouteResolved => this.route_resolved(id).err().map(|e| e.to_errno()),
            CmEvent::Established => {
                let r = this.conn_established(id).err().map_or(0, |e| e.to_errno());
                this.finish(r);
                return;
            }
            CmEvent::Rejected(r) => Some(this.conn_rejected(r)),
            CmEvent::AddrError(s) => {
                cinfo!(this.ctrl, "address resolution failed (status {})\n", s);
                Some(ECONNRESET.to_errno())
            }
            CmEvent::RouteError(s) => {
                cinfo!(this.ctrl, "route resolution failed (status {})\n", s);
                Some(ECONNRESET.to_errno())
            }
            CmEvent::ConnectError(s) | CmEvent::Unreachable(s) => {
                cinfo!(
                    this.ctrl,
                    "connection failed: peer unreachable (status {})\n",
                    s
                );
                Some(ECONNRESET.to_errno())
            }
            CmEvent::Disconnected | CmEvent::AddrChange | CmEvent::TimewaitExit => {
                if this.established() {
                    if this.ctrl.ctrl().state() == State::Live {
                        cinfo!(this.ctrl, "disconnect received - connection closed\n");
                    }
                    error_recovery(&this.ctrl);
                    None
                } else {
                    Some(ECONNRESET.to_errno())
                }
            }
            // Device removal is handled through the ib_client `remove` callback.
            CmEvent::DeviceRemoval => None,
            CmEvent::Other(e, st) => {
                cerr!(
                    this.ctrl,
                    "Unexpected RDMA CM event ({}, status {})\n",
                    e,
                    st
                );
                error_recovery(&this.ctrl);
                None
            }
        };
        if let Some(err) = r {
            this.finish(err);
        }
    }
}

/// One NVMe queue (0 is the admin queue).
#[pin_data]
pub(crate) struct Queue {
    qid: u16,
    /// `NVME_RDMA_Q_LIVE`: the Fabrics Connect succeeded.
    live: AtomicBool,
    /// The QP for the data path (see `QpCell` for the lifetime protocol).
    qp: QpCell,
    /// The CQ blk-mq polls, on poll queues.
    #[pin]
    poll_cq: PollCell,
    num_inline_segments: AtomicU32,
    /// In-capsule data bytes (0 on the admin queue).
    inline_size: AtomicU32,
    /// An empty MR pool was reported for the current connection.
    mr_pool_empty: AtomicBool,
    /// The allocated connection (`NVME_RDMA_Q_ALLOCATED`).
    #[pin]
    conn: Mutex<Option<CmId<ConnCm>>>,
}

impl Queue {
    fn new(qid: u16) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            qid,
            live: AtomicBool::new(false),
            qp: QpCell::new(),
            poll_cq <- PollCell::new(),
            num_inline_segments: AtomicU32::new(0),
            inline_size: AtomicU32::new(0),
            mr_pool_empty: AtomicBool::new(false),
            conn <- new_mutex!(None),
        })
    }

    /// Connects the queue's RDMA connection (`nvme_rdma_alloc_queue`), with a bounded wait.
    fn alloc(&self, ctrl: &ARef<RCtrl>, queue_size: u32) -> Result {
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
                    done: false,
                    err: 0,
                    ring: None,
                    recvs_posted: false,
                }),
                cond <- new_condvar!(),
            }),
            GFP_KERNEL,
        )?;
        let cm = CmId::new(h.clone()).inspect_err(|e| {
            cinfo!(ctrl, "failed to create CM ID: {}\n", e.to_errno());
        })?;
        let src = if ctrl.ctrl().opts().mask() & opt::HOST_TRADDR != 0 {
            ctrl.src.as_ref()
        } else {
            None
        };
        cm.resolve_addr(src, &ctrl.addr, CM_TIMEOUT_MS)
            .inspect_err(|e| cinfo!(ctrl, "rdma_resolve_addr failed ({}).\n", e.to_errno()))?;
        let err = {
            let mut st = h.state.lock();
            let mut left = kernel::time::msecs_to_jiffies(CM_ESTABLISH_TIMEOUT_MS);
            let mut err = 0;
            while !st.done {
                match h.cond.wait_interruptible_timeout(&mut st, left) {
                    kernel::sync::CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                    kernel::sync::CondVarTimeoutResult::Signal { .. } => {
                        err = EINTR.to_errno();
                        break;
                    }
                    kernel::sync::CondVarTimeoutResult::Timeout => {
                        cerr!(
                            ctrl,
                            "queue {}: no RDMA connection after {} ms, giving up\n",
                            self.qid,
                            CM_ESTABLISH_TIMEOUT_MS
                        );
                        err = ETIMEDOUT.to_errno();
                        break;
                    }
                }
            }
            if st.done {
                st.err
            } else {
                err
            }
        };
        if err != 0 {
            cinfo!(ctrl, "rdma connection establishment failed ({})\n", err);
            // Dropping the id stops its events, destroys the QP and frees the resources.
            if let Some(qp) = cm.qp() {
                if h.state.lock().recvs_posted {
                    let _ = cm.disconnect();
                    qp.drain();
                }
            }
            drop(cm);
            return Err(Error::from_errno(err));
        }
        let qp = cm.qp().ok_or(ENOTCONN)?;
        let nis = cm.qp_res().map_or(0, |r| r.dev.0.num_inline_segments);
        self.num_inline_segments.store(nis, Relaxed);
        let inline = if self.qid == 0 {
            0
        } else {
            (ctrl.ctrl().ioccsz() * 16).saturating_sub(SQE_LEN)
        };
        self.inline_size.store(inline, Relaxed);
        if let Some(res) = cm.qp_res() {
            self.poll_cq.set(&res.cq);
        }
        // A new connection has a new, full MR pool.
        self.mr_pool_empty.store(false, Relaxed);
        self.qp.set(qp);
        *self.conn.lock() = Some(cm);
        Ok(())
    }

    /// Disconnects and drains the queue if it is live (`nvme_rdma_stop_queue`).
    fn stop(&self) {
        let conn = self.conn.lock();
        if let Some(cm) = conn.as_ref() {
            if self.live.swap(false, Relaxed) {
                let _ = cm.disconnect();
                if let Some(qp) = cm.qp() {
                    qp.drain();
                }
            }
        }
    }

    /// Releases the connection (`nvme_rdma_free_queue`). The queue must be stopped (or never
    /// started) and its requests cancelled.
    fn free(&self) {
        let cm = self.conn.lock().take();
        if let Some(cm) = cm {
            // Drain (if anything may still be posted) before withdrawing the QP from the data
            // path: completions that still run need it to return MRs and unmap commands.
            let posted = cm.handler().state.lock().recvs_posted;
            if posted && self.live.swap(false, Relaxed) {
                let _ = cm.disconnect();
            }
            if posted {
                if let Some(qp) = cm.qp() {
                    qp.drain();
                }
            }
            self.qp.clear();
            self.poll_cq.clear();
            drop(cm);
        }
    }
}

// ------------------------------------------------------------------------------------------
// Controller

/// The transport's part of a controller.
#[pin_data]
pub(crate) struct RdmaCtrl {
    queues: KVec<Pin<KBox<Queue>>>,
    addr: SockAddr,
    src: Option<SockAddr>,
    #[pin]
    dev: Mutex<Option<Arc<RdmaDev>>>,
    max_fr_pages: AtomicU32,
    use_inline_data: AtomicBool,
    io_queues: [AtomicU32; 3],
    #[pin]
    aen_sqe: Mutex<Option<DmaBuf>>,
    admin_set: AtomicBool,
    io_set: AtomicBool,
}

impl RdmaCtrl {
    fn queue(&self, qid: u16) -> Option<&Queue> {
        self.queues.get(usize::from(qid)).map(|q| &**q)
    }
}

fn error_recovery(ctrl: &RCtrl) {
    if !ctrl.ctrl().change_state(State::Resetting) {
        return;
    }
    cwarn!(ctrl, "starting error recovery\n");
    ctrl.queue_err_work();
}

fn wr_error(ctrl: &RCtrl, wc: &Wc, op: &str) {
    if ctrl.ctrl().state() == State::Live {
        cinfo!(
            ctrl,
            "{} failed with status {} ({})\n",
            op,
            cs(wc.status_msg()),
            wc.status()
        );
    }
    error_recovery(ctrl);
}

fn start_queue(ctrl: &RCtrl, qid: u16) -> Result {
    let Some(q) = ctrl.queue(qid) else {
        return Err(EINVAL);
    };
    let r = if qid == 0 {
        ctrl.ctrl().connect_admin_queue()
    } else {
        ctrl.ctrl().connect_io_queue(qid)
    };
    match r {
        Ok(()) => {
            q.live.store(true, Release);
            Ok(())
        }
        Err(e) => {
            // Like `__nvme_rdma_stop_queue`: disconnect and drain, keep the connection for free.
            if let Some(cm) = q.conn.lock().as_ref() {
                let _ = cm.disconnect();
                if let Some(qp) = cm.qp() {
                    qp.drain();
                }
            }
            cinfo!(
                ctrl,
                "failed to connect queue: {} ret={}\n",
                qid,
                e.to_errno()
            );
            Err(e)
        }
    }
}

fn free_io_queues(ctrl: &RCtrl) {
    for q in ctrl.queues.iter().skip(1) {
        q.free();
    }
}

fn stop_io_queues(ctrl: &RCtrl) {
    for q in ctrl.queues.iter().skip(1) {
        q.stop();
    }
}

fn destroy_admin_queue(ctrl: &RCtrl) {
    if ctrl.aen_sqe.lock().is_some() {
        ctrl.ctrl().flush_async_event_work();
        *ctrl.aen_sqe.lock() = None;
    }
    if let Some(q) = ctrl.queue(0) {
        q.free();
    }
}

fn configure_admin_queue(ctrl: &ARef<RCtrl>, new: bool) -> Result {
    let q0 = ctrl.queue(0).ok_or(EINVAL)?;
    // The admin tag set exists before queue 0 can receive and goes only once it cannot any more:
    // every response there, even one nothing asked for (before the Fabrics Connect), is looked
    // up in it (`find_rq`). The C driver connects the queue first; the price of this order is a
    // set allocated before the device's NUMA node is known (the I/O tag set still gets it).
    if new {
        ctrl.alloc_admin_tag_set::<RdmaMq>(0)?;
        ctrl.admin_set.store(true, Relaxed);
    }
    let remove_set = |ctrl: &RCtrl| {
        if new && ctrl.admin_set.swap(false, Relaxed) {
            ctrl.remove_admin_tag_set();
        }
    };
    if let Err(e) = q0.alloc(ctrl, AQ_DEPTH) {
        remove_set(ctrl);
        return Err(e);
    }
    let r = (|| -> Result {
        let dev = {
            let conn = q0.conn.lock();
            let cm = conn.as_ref().ok_or(ENOTCONN)?;
            cm.qp_res().ok_or(ENOTCONN)?.dev.0.clone()
        };
        ctrl.ctrl().set_numa_node(dev.device().numa_node());
        let fr = max_fr_pages(dev.device());
        ctrl.max_fr_pages.store(fr, Relaxed);
        let aen = DmaBuf::new(
            DeviceRef::get(dev.device()).ok_or(ENODEV)?,
            SQE_LEN as usize,
            DmaDir::ToDevice,
        )?;
        *ctrl.aen_sqe.lock() = Some(aen);
        *ctrl.dev.lock() = Some(dev);
        Ok(())
    })();
    if let Err(e) = r {
        // Drains queue 0 (if it received anything) before the set goes.
        destroy_admin_queue(ctrl);
        remove_set(ctrl);
        return Err(e);
    }
    if let Err(e) = start_queue(ctrl, 0) {
        remove_set(ctrl);
        destroy_admin_queue(ctrl);
        return Err(e);
    }
    let stop = |ctrl: &RCtrl| {
        q0.stop();
        ctrl.ctrl().cancel_admin();
        remove_set(ctrl);
        destroy_admin_queue(ctrl);
    };
    if let Err(e) = ctrl.ctrl().enable() {
        stop(ctrl);
        return Err(e);
    }
    let fr = ctrl.max_fr_pages.load(Relaxed);
    ctrl.ctrl().set_limits(fr, fr << (12 - 9));
    ctrl.ctrl().unquiesce_admin();
    if let Err(e) = ctrl.ctrl().init_finish() {
        ctrl.ctrl().quiesce_admin();
        ctrl.ctrl().sync_admin();
        stop(ctrl);
        return Err(e);
    }
    Ok(())
}

/// Allocates and connects one I/O queue.
fn setup_io_queue(ctrl: &ARef<RCtrl>, qid: u32, qsize: u32) -> Result {
    let qid = u16::try_from(qid).map_err(|_| EINVAL)?;
    let q = ctrl.queue(qid).ok_or(EINVAL)?;
    q.alloc(ctrl, qsize)?;
    start_queue(ctrl, qid)
}

/// What the queues set up in parallel share.
#[pin_data]
struct SetupCtx {
    /// Queues still being set up.
    remaining: AtomicU32,
    /// The first error (an errno), 0 if none.
    err: AtomicI32,
    #[pin]
    done: Completion,
}

impl SetupCtx {
    fn finish(&self, r: Result) {
        if let Err(e) = r {
            let _ = self.err.compare_exchange(0, e.to_errno(), AcqRel, Acquire);
        }
        if self.remaining.fetch_sub(1, AcqRel) == 1 {
            self.done.complete_all();
        }
    }
}

/// Allocates and connects I/O queues `first..last` (`nvme_rdma_setup_io_queues`), all at once:
/// each queue's address/route resolution, connection and Fabrics Connect run in a work item of
/// the module's setup workqueue, so connecting N queues takes about as long as one. That
/// workqueue has a rescuer (`nvme::SetupWq`): the reset and reconnect work waiting here runs on
/// nvme-core's `WQ_MEM_RECLAIM` queues and must not depend on a workqueue that can stall under
/// memory pressure (the C driver's `async_schedule_domain` uses `system_unbound_wq`, which can). Every queue's connection is bounded in time,
/// so the wait is too. On failure
/// the caller stops, cancels and frees.
fn setup_io_queues(ctrl: &ARef<RCtrl>, first: u32, last: u32, qsize: u32) -> Result {
    if last <= first + 1 {
        return (first..last).try_for_each(|qid| setup_io_queue(ctrl, qid, qsize));
    }
    let ctx = Arc::pin_init(
        pin_init!(SetupCtx {
            remaining: AtomicU32::new(last - first),
            err: AtomicI32::new(0),
            done <- Completion::new(),
        }),
        GFP_KERNEL,
    )?;
    for qid in first..last {
        let (c, x) = (ctrl.clone(), ctx.clone());
        let spawned = crate::nvme::spawn_setup(move || {
            x.finish(setup_io_queue(&c, qid, qsize));
        });
        if spawned.is_err() {
            ctx.finish(Err(ENOMEM));
        }
    }
    ctx.done.wait_for_completion();
    match ctx.err.load(Acquire) {
        0 => Ok(()),
        e => Err(Error::from_errno(e)),
    }
}

fn configure_io_queues(ctrl: &ARef<RCtrl>, new: bool) -> Result {
    let c = ctrl.ctrl();
    let want = c.opts().nr_io_queues();
    let nr = c.negotiate_queue_count(want)?;
    if nr == 0 {
        cerr!(ctrl, "unable to set any I/O queues\n");
        return Err(ENOMEM);
    }
    // Never more than the queues this controller was created with.
    let nr = nr.min(ctrl.queues.len() as u32 - 1);
    c.set_queue_count(nr + 1);
    cinfo!(ctrl, "creating {} I/O queues.\n", nr);
    let map = c.opts().set_io_queues(nr);
    for (a, v) in ctrl.io_queues.iter().zip(map) {
        a.store(v, Relaxed);
    }
    if new {
        let maps = if c.opts().nr_poll_queues() > 0 { 3 } else { 2 };
        ctrl.alloc_io_tag_set::<RdmaMq>(maps, 0)?;
        ctrl.io_set.store(true, Relaxed);
    }
    // Undoes everything above; `quiesce` once the I/O queues may have been unquiesced.
    let fail = |quiesce: bool| {
        if quiesce {
            c.quiesce_io();
            c.sync_io();
        }
        stop_io_queues(ctrl);
        c.cancel_io();
        if new && ctrl.io_set.swap(false, Relaxed) {
            ctrl.remove_io_tag_set();
        }
        free_io_queues(ctrl);
    };
    // Only the queues the tag set has hardware contexts for: on a reconnect the target may
    // grant a different count than before.
    let qsize = u32::from(c.sqsize()) + 1;
    let nr_queues = (ctrl.io_nr_hw_queues() + 1).min(c.queue_count());
    if let Err(e) = setup_io_queues(ctrl, 1, nr_queues, qsize) {
        fail(false);
        return Err(e);
    }
    if !new {
        c.start_freeze();
        c.unquiesce_io();
        if !c.wait_freeze_timeout() {
            // Likely stuck: fail this attempt rather than hang.
            c.unfreeze();
            fail(true);
            return Err(ENODEV);
        }
        let before = ctrl.io_nr_hw_queues();
        ctrl.update_io_nr_hw_queues(c.queue_count() - 1);
        c.unfreeze();
        if before != ctrl.io_nr_hw_queues() {
            cinfo!(
                ctrl,
                "I/O hardware queues: {} -> {}\n",
                before,
                ctrl.io_nr_hw_queues()
            );
        }
    }
    // More queues than before (a reconnect): set the new ones up now.
    let hw = ctrl.io_nr_hw_queues() + 1;
    if hw > nr_queues {
        if let Err(e) = setup_io_queues(ctrl, nr_queues, hw, qsize) {
            fail(true);
            return Err(e);
        }
    }
    Ok(())
}

fn teardown_admin_queue(ctrl: &RCtrl, remove: bool) {
    let c = ctrl.ctrl();
    c.quiesce_admin();
    c.sync_admin();
    if let Some(q) = ctrl.queue(0) {
        q.stop();
    }
    if ctrl.admin_set.load(Relaxed) {
        c.cancel_admin();
    }
    if remove {
        c.unquiesce_admin();
        if ctrl.admin_set.swap(false, Relaxed) {
            ctrl.remove_admin_tag_set();
        }
    }
    destroy_admin_queue(ctrl);
}

fn teardown_io_queues(ctrl: &RCtrl, remove: bool) {
    let c = ctrl.ctrl();
    if c.queue_count() > 1 && ctrl.io_set.load(Relaxed) {
        c.quiesce_io();
        c.sync_io();
        stop_io_queues(ctrl);
        c.cancel_io();
        if remove {
            c.unquiesce_io();
            if ctrl.io_set.swap(false, Relaxed) {
                ctrl.remove_io_tag_set();
            }
        }
    }
    free_io_queues(ctrl);
}

fn setup_ctrl(ctrl: &ARef<RCtrl>, new: bool) -> Result {
    configure_admin_queue(ctrl, new)?;
    let c = ctrl.ctrl();
    let destroy_admin = |e: Error| -> Result {
        c.stop_keep_alive();
        teardown_admin_queue(ctrl, new);
        Err(e)
    };
    if c.icdoff() != 0 {
        cerr!(ctrl, "icdoff is not supported!\n");
        return destroy_admin(EOPNOTSUPP);
    }
    if c.sgls() & SGLS_KSDBDS == 0 {
        cerr!(ctrl, "Mandatory keyed sgls are not supported!\n");
        return destroy_admin(EOPNOTSUPP);
    }
    let opts_qs = c.opts().queue_size();
    if opts_qs > u32::from(c.sqsize()) + 1 {
        cwarn!(
            ctrl,
            "queue_size {} > ctrl sqsize {}, clamping down\n",
            opts_qs,
            u32::from(c.sqsize()) + 1
        );
    }
    if u32::from(c.sqsize()) + 1 > MAX_QUEUE_SIZE {
        cwarn!(
            ctrl,
            "ctrl sqsize {} > max queue size {}, clamping down\n",
            u32::from(c.sqsize()) + 1,
            MAX_QUEUE_SIZE
        );
        c.set_sqsize((MAX_QUEUE_SIZE - 1) as u16);
    }
    if c.sqsize() + 1 > c.maxcmd() {
        cwarn!(
            ctrl,
            "sqsize {} > ctrl maxcmd {}, clamping down\n",
            u32::from(c.sqsize()) + 1,
            c.maxcmd()
        );
        c.set_sqsize(c.maxcmd().saturating_sub(1));
    }
    if c.sgls() & SGLS_SAOS != 0 {
        ctrl.use_inline_data.store(true, Relaxed);
    }
    if c.queue_count() > 1 {
        if let Err(e) = configure_io_queues(ctrl, new) {
            return destroy_admin(e);
        }
    }
    if !c.change_state(State::Live) {
        // Deletion started meanwhile.
        teardown_io_queues(ctrl, new);
        return destroy_admin(EINVAL);
    }
    c.start();
    Ok(())
}

fn shutdown_ctrl(ctrl: &RCtrl, shutdown: bool) {
    teardown_io_queues(ctrl, shutdown);
    let c = ctrl.ctrl();
    c.quiesce_admin();
    if ctrl.queue(0).is_some_and(|q| q.live.load(Relaxed)) {
        c.disable(shutdown);
    }
    teardown_admin_queue(ctrl, shutdown);
}

fn reconnect_or_remove(ctrl: &RCtrl, status: i32) {
    let c = ctrl.ctrl();
    if c.state() != State::Connecting {
        return;
    }
    if c.should_reconnect(status) {
        let d = c.opts().reconnect_delay();
        cinfo!(ctrl, "Reconnecting in {} seconds...\n", d);
        ctrl.queue_reconnect(d);
    } else {
        let _ = c.delete();
    }
}

fn own(ctrl: &RCtrl) -> ARef<RCtrl> {
    ARef::from(ctrl)
}

impl CtrlOps for RdmaCtrl {
    const NAME: &'static CStr = c"rdma";

    fn submit_async_event(ctrl: &RCtrl) {
        let Some(q) = ctrl.queue(0) else { return };
        let Some(qp) = q.qp.get() else { return };
        let mut aen = ctrl.aen_sqe.lock();
        let Some(buf) = Option::as_mut(&mut *aen) else {
            return;
        };
        buf.with_cpu(|c| {
            c.fill(0);
            c[0] = 0x0c; // nvme_admin_async_event
            c[CMD_FLAGS] = CMD_SGL_METABUF;
            c[2..4].copy_from_slice(&AQ_BLK_MQ_DEPTH.to_le_bytes());
            if let Ok(d) = Sgl::Null.encode() {
                c[CMD_DPTR..CMD_DPTR + 16].copy_from_slice(&d);
            }
        });
        let sge = qp::sge(buf.dma_addr(), SQE_LEN, qp.local_dma_lkey());
        if let Err(e) = qp.post_send(None, ctrl.aen_cqe(), &[sge]) {
            cerr!(
                ctrl,
                "posting the async event request failed ({})\n",
                e.to_errno()
            );
        }
    }

    fn aen_send_done(ctrl: &RCtrl, wc: &Wc) {
        if !wc.is_ok() {
            wr_error(ctrl, wc, "ASYNC");
        }
    }

    fn delete_ctrl(ctrl: &RCtrl) {
        {
            let mut list = CTRLS.lock();
            if let Some(i) = list.iter().position(|c| core::ptr::eq(&**c, ctrl)) {
                let _ = list.remove(i);
                if list.is_empty() {
                    *list = KVec::new();
                }
            }
        }
        shutdown_ctrl(ctrl, true);
    }

    fn stop_ctrl(ctrl: &RCtrl) {
        ctrl.flush_err_work();
        ctrl.cancel_reconnect_sync();
    }

    fn reset_work(ctrl: &RCtrl) {
        let c = ctrl.ctrl();
        c.stop();
        shutdown_ctrl(ctrl, false);
        if !c.change_state(State::Connecting) {
            return;
        }
        if let Err(e) = setup_ctrl(&own(ctrl), false) {
            c.inc_reconnects();
            reconnect_or_remove(ctrl, e.to_errno());
        }
    }

    fn err_work(ctrl: &RCtrl) {
        let c = ctrl.ctrl();
        c.stop_keep_alive();
        c.flush_async_event_work();
        teardown_io_queues(ctrl, false);
        c.unquiesce_io();
        teardown_admin_queue(ctrl, false);
        c.unquiesce_admin();
        // Re-authentication work (queued by a target asking for it, or a new key written to
        // sysfs) must not run on the torn-down admin queue, nor beside the reconnect's own
        // authentication on the same DH-HMAC-CHAP context (`nvme_auth_stop`, as C does here).
        c.auth_stop();
        if !c.change_state(State::Connecting) {
            return;
        }
        reconnect_or_remove(ctrl, 0);
    }

    fn reconnect_work(ctrl: &RCtrl) {
        let c = ctrl.ctrl();
        let n = c.inc_reconnects();
        match setup_ctrl(&own(ctrl), false) {
            Ok(()) => {
                cinfo!(ctrl, "Successfully reconnected ({} attempts)\n", n);
                c.reset_reconnects();
            }
            Err(e) => {
                cinfo!(
                    ctrl,
                    "Failed reconnect attempt {}/{}\n",
                    n,
                    c.opts().max_reconnects()
                );
                reconnect_or_remove(ctrl, e.to_errno());
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// The data path

/// Transport state of a request.
#[pin_data]
pub(crate) struct ReqData {
    qid: u16,
    /// The completions outstanding (SEND, and response or LOCAL_INV) and the response.
    end: ReqEnd,
    has_mr: AtomicBool,
    mr_rkey: AtomicU32,
    /// What the request holds while in flight, released when it ends ([`unmap_request`]).
    io: TryCell<ReqIo<Mr, MappedSg, MappedCmd>>,
}

/// The blk-mq side of the transport.
pub(crate) struct RdmaMq;

/// Drops one completion's reference; the last one ends the request (`nvme_rdma_end_request`).
/// [`ReqEnd::put`] orders the response's status and result before their use here.
fn end_request(rq: &Request<RdmaMq>) {
    let Some((status, result)) = rq.data().end.put() else {
        return;
    };
    if !rq.try_complete(status, result) {
        RdmaMq::complete(rq);
    }
}

/// Ends the request's use of what `queue_rq` mapped for it: its MR goes back to the pool, its
/// data and command are unmapped (`nvme_rdma_unmap_data` and the SQE unmap of
/// `nvme_rdma_complete_rq`). The mappings release themselves, so this needs no QP and works
/// whatever state the queue is in.
fn unmap_request(rq: &Request<RdmaMq>) {
    if rq.data().io.try_with(ReqIo::release).is_none() {
        // Only `queue_rq` holds the state of a request it is submitting, and a response cannot
        // end a request before its SEND was posted (`ReqEnd::take_response`): a timeout fired
        // inside `queue_rq`, or this driver broke the protocol. The holder's mappings stay with
        // it (`ReqIo` leaks them, reported, when they are found later); recovery gives the queue
        // a fresh MR pool.
        let ctrl = rq.ctrl();
        cerr!(ctrl, "request tag {} busy at completion\n", rq.tag());
        error_recovery(ctrl);
    }
}

/// What a request's data is mapped with, until `queue_rq` stores it in the request.
struct DataMap {
    /// SGEs filled in (the first, for the command, is the caller's).
    nsge: usize,
    /// The registration to post before the SEND.
    reg: Option<qp::RegWr>,
    sg: Option<MappedSg>,
    mr: Option<Mr>,
}

/// Writes the data pointer of the command and prepares the SGEs (`nvme_rdma_map_data`). On error
/// everything mapped here was released (dropped) again.
fn map_data(
    q: &Queue,
    qp: &qp::Qp,
    rq: &Request<RdmaMq>,
    sges: &mut [qp::Sge; 1 + MAX_INLINE_SEGMENTS as usize],
) -> Result<DataMap> {
    let d = rq.data();
    let ctrl = rq.ctrl();
    rq.with_cmd(|c| c[CMD_FLAGS] |= CMD_SGL_METABUF);
    d.has_mr.store(false, Relaxed);
    if rq.nr_phys_segments() == 0 {
        let desc = Sgl::Null.encode().map_err(|_| EINVAL)?;
        rq.with_cmd(|c| c[CMD_DPTR..CMD_DPTR + 16].copy_from_slice(&desc));
        STATS.no_data.fetch_add(1, Relaxed);
        return Ok(DataMap {
            nsge: 1,
            reg: None,
            sg: None,
            mr: None,
        });
    }
    let sg = rq.map_data(qp.device())?;
    let count = sg.nents() as u32;
    if count <= q.num_inline_segments.load(Relaxed)
        && rq.is_write()
        && q.qid != 0
        && ctrl.use_inline_data.load(Relaxed)
        && rq.payload_bytes() <= q.inline_size.load(Relaxed)
    {
        let lkey = qp.local_dma_lkey();
        let mut n = 1;
        let mut len = 0u32;
        for (addr, l) in sg.entries() {
            sges[n] = qp::sge(addr, l, lkey);
            n += 1;
            len += l;
        }
        let desc = Sgl::Inline {
            offset: u64::from(ctrl.ctrl().icdoff()),
            len,
        }
        .encode()
        .map_err(|_| EINVAL)?;
        rq.with_cmd(|c| c[CMD_DPTR..CMD_DPTR + 16].copy_from_slice(&desc));
        STATS.inline_writes.fetch_add(1, Relaxed);
        return Ok(DataMap {
            nsge: n,
            reg: None,
            sg: Some(sg),
            mr: None,
        });
    }
    let Some(mut mr) = qp.mr_get() else {
        // Not expected: the pool has an MR for each request the queue takes, and requests give
        // theirs back when they end. As in C, blk-mq retries the request later; unlike C (a
        // warning once per boot), say so once per connection.
        if !q.mr_pool_empty.swap(true, Relaxed) {
            cerr!(
                ctrl,
                "QID {}: MR pool empty: requests are retried (BLK_STS_RESOURCE)\n",
                q.qid
            );
        }
        return Err(EAGAIN);
    };
    // From here, an error drops `mr` (back to the pool), then `sg` (unmapped).
    sg.register(&mut mr)?;
    let desc = Sgl::Keyed {
        addr: mr.iova(),
        len: mr.length() as u32,
        key: mr.rkey(),
        invalidate: true,
    }
    .encode()
    .map_err(|_| EINVAL)?;
    rq.with_cmd(|c| c[CMD_DPTR..CMD_DPTR + 16].copy_from_slice(&desc));
    let reg = mr.reg_wr(rq.reg_cqe());
    d.mr_rkey.store(mr.rkey(), Relaxed);
    d.has_mr.store(true, Relaxed);
    STATS.mr_registrations.fetch_add(1, Relaxed);
    Ok(DataMap {
        nsge: 1,
        reg: Some(reg),
        sg: Some(sg),
        mr: Some(mr),
    })
}

/// Stores the request's mappings in it and posts its SEND (after the registration, if any). On
/// error the mappings were released.
fn post(rq: &Request<RdmaMq>, qp: &qp::Qp, cmd: MappedCmd, m: DataMap, sges: &[qp::Sge]) -> Result {
    let DataMap { nsge, reg, sg, mr } = m;
    // Stored before posting: the request can complete as soon as the SEND is posted.
    let Some(clean) = rq.data().io.try_with(|io| io.set(mr, sg, cmd)) else {
        // The state is busy (see `unmap_request`): nothing was stored or posted, and the
        // mappings were released with the unused closure that held them.
        return Err(EBUSY);
    };
    if !clean {
        cerr!(
            rq.ctrl(),
            "request tag {}: leaked the stale mappings of its previous use\n",
            rq.tag()
        );
    }
    qp.post_send(reg, rq.send_cqe(), &sges[..nsge])
        .inspect_err(|e| {
            pr_err!(
                "nvme_rdma_post_send failed with error code {}\n",
                e.to_errno()
            );
            unmap_request(rq);
        })
}

/// A request the queue cannot take now (`nvme_fail_nonready_command`, which requeues anything
/// retriable while the controller resets), except DH-HMAC-CHAP messages outside `Connecting`:
/// they end with a host path error (which the core retries at most `nvme_max_retries` times, as
/// they are submitted retriable, then the re-authentication fails). A re-authentication's messages
/// belong to the association it started on; requeued without end, they would wait for the next
/// association while error recovery waits for the re-authentication to end (`nvme_auth_stop`)
/// before it reconnects: a hang the C driver has. This way the re-authentication ends with an
/// error and the reconnect authenticates afresh.
fn fail_nonready(rq: &Request<RdmaMq>) -> BlkStatus {
    // (Only a passthrough request has its command in place before `setup_cmd`.)
    if rq.ctrl().ctrl().state() != State::Connecting
        && rq.is_passthrough()
        && rq.with_cmd(|c| capsule::is_auth(c))
    {
        return rq.host_path_error();
    }
    rq.fail_nonready()
}

impl MqOps for RdmaMq {
    type Ctrl = RdmaCtrl;
    type Data = ReqData;
    type Queue = Queue;

    fn queue(ctrl: &RCtrl, admin: bool, hctx_idx: u32) -> &Queue {
        let qid = if admin { 0 } else { hctx_idx as usize + 1 };
        // blk-mq never has more hardware queues than the controller has I/O queues.
        &ctrl.queues[qid.min(ctrl.queues.len() - 1)]
    }

    fn init_request(_ctrl: &RCtrl, admin: bool, hctx_idx: u32) -> impl PinInit<ReqData, Error> {
        let qid = if admin { 0 } else { hctx_idx as u16 + 1 };
        try_pin_init!(ReqData {
            qid,
            end: ReqEnd::new(),
            has_mr: AtomicBool::new(false),
            mr_rkey: AtomicU32::new(0),
            io: TryCell::new(ReqIo::new()),
        })
    }

    fn queue_rq(q: &Queue, rq: &Request<Self>, _last: bool) -> BlkStatus {
        let live = q.live.load(Acquire);
        if !rq.check_ready(live) {
            return fail_nonready(rq);
        }
        let Some(qp) = q.qp.get() else {
            return fail_nonready(rq);
        };
        // Every mapping below releases itself when dropped: on an early return, or once stored in
        // the request, when the request ends (`unmap_request`).
        let Ok(cmd) = rq.map_cmd(qp.device()) else {
            STATS.resource_retries.fetch_add(1, Relaxed);
            return BlkStatus::RESOURCE;
        };
        let st = rq.setup_cmd();
        if st != BlkStatus::OK {
            return st;
        }
        rq.start();
        rq.data().end.arm(2);
        let mut sges: [qp::Sge; 1 + MAX_INLINE_SEGMENTS as usize] =
            core::array::from_fn(|_| qp::sge(0, 0, 0));
        let err = match map_data(q, qp, rq, &mut sges) {
            Ok(m) => {
                sges[0] = qp::sge(cmd.dma_addr(), SQE_LEN, qp.local_dma_lkey());
                cmd.sync_for_device();
                match post(rq, qp, cmd, m, &sges) {
                    Ok(()) => return BlkStatus::OK,
                    Err(e) => e,
                }
            }
            Err(e) => {
                // An empty MR pool (EAGAIN) was reported once by `map_data`.
                if e != EAGAIN {
                    pr_err!("Failed to map data ({})\n", e.to_errno());
                }
                drop(cmd);
                e
            }
        };
        if err == EIO {
            return rq.host_path_error();
        }
        rq.cleanup_cmd();
        if err == ENOMEM || err == EAGAIN {
            STATS.resource_retries.fetch_add(1, Relaxed);
            BlkStatus::RESOURCE
        } else {
            BlkStatus::IOERR
        }
    }

    fn complete(rq: &Request<Self>) {
        unmap_request(rq);
        rq.complete_local();
    }

    fn timeout(rq: &Request<Self>) -> TimeoutAction {
        let ctrl = rq.ctrl();
        let qid = rq.data().qid;
        cwarn!(
            ctrl,
            "I/O tag {} ({:04x}) opcode {:#x} QID {} timeout\n",
            rq.tag(),
            rq.cid(),
            rq.opcode(),
            qid
        );
        if ctrl.ctrl().state() != State::Live {
            if let Some(q) = ctrl.queue(qid) {
                q.stop();
            }
            rq.complete_timed_out();
            return TimeoutAction::Done;
        }
        error_recovery(ctrl);
        TimeoutAction::ResetTimer
    }

    fn send_done(rq: &Request<Self>, wc: &Wc) {
        if wc.is_ok() {
            end_request(rq);
        } else {
            wr_error(rq.ctrl(), wc, "SEND");
        }
    }

    fn reg_done(rq: &Request<Self>, wc: &Wc) {
        if !wc.is_ok() {
            wr_error(rq.ctrl(), wc, "MEMREG");
        }
    }

    fn inv_done(rq: &Request<Self>, wc: &Wc) {
        if wc.is_ok() {
            end_request(rq);
        } else {
            wr_error(rq.ctrl(), wc, "LOCAL_INV");
        }
    }

    fn poll(q: &Queue) -> i32 {
        let n = q.poll_cq.poll();
        if n > 0 {
            STATS.polled_completions.fetch_add(n as u64, Relaxed);
        }
        n
    }

    fn io_queues(ctrl: &RCtrl) -> [u32; 3] {
        [
            ctrl.io_queues[0].load(Relaxed),
            ctrl.io_queues[1].load(Relaxed),
            ctrl.io_queues[2].load(Relaxed),
        ]
    }
}

impl CqeDone<0> for RspQe {
    fn done(qe: &Self, wc: &Wc) {
        let ctrl = &qe.ctrl;
        if !wc.is_ok() {
            wr_error(ctrl, wc, "RECV");
            return;
        }
        if (wc.byte_len() as usize) < CQE_LEN {
            cerr!(
                ctrl,
                "Unexpected nvme completion length({})\n",
                wc.byte_len()
            );
            error_recovery(ctrl);
            return;
        }
        let (result, cid, status) = qe.buf.read(|b| {
            let mut r = [0u8; 8];
            r.copy_from_slice(&b[0..8]);
            (
                u64::from_le_bytes(r),
                u16::from_le_bytes([b[12], b[13]]),
                u16::from_le_bytes([b[14], b[15]]),
            )
        });
        if qe.qid == 0 && (cid & 0xfff) >= AQ_BLK_MQ_DEPTH {
            ctrl.ctrl()
                .complete_async_event(status.to_le(), result.to_le());
        } else {
            process_rsp(qe, cid, status, result, wc);
        }
        if let Some(qp) = ctrl.queue(qe.qid).and_then(|q| q.qp.get()) {
            let sge = qp::sge(qe.buf.dma_addr(), CQE_LEN as u32, qp.local_dma_lkey());
            if let Err(e) = qp.post_recv(&qe.cqe, &sge) {
                cerr!(
                    ctrl,
                    "nvme_rdma_post_recv failed with error code {}\n",
                    e.to_errno()
                );
            }
        }
    }
}

fn process_rsp(qe: &RspQe, cid: u16, status: u16, result: u64, wc: &Wc) {
    let ctrl = &qe.ctrl;
    let Some(rq) = ctrl.find_rq::<RdmaMq>(qe.qid, cid) else {
        let qpn = ctrl
            .queue(qe.qid)
            .and_then(|q| q.qp.get())
            .map_or(0, |qp| qp.num());
        cerr!(ctrl, "got bad command_id {:#x} on QP {:#x}\n", cid, qpn);
        error_recovery(ctrl);
        return;
    };
    let d = rq.data();
    if !d.end.take_response() {
        // Only one response per command: a second one must not end the request, which may be
        // in `queue_rq` again by now.
        cerr!(ctrl, "second response for command_id {:#x}\n", cid);
        error_recovery(ctrl);
        return;
    }
    d.end.set_rsp(status.to_le(), result.to_le());
    let rkey = d.mr_rkey.load(Relaxed);
    let mine = d.has_mr.load(Relaxed).then_some(rkey);
    match inval::on_response(mine, wc.invalidated_rkey()) {
        Invalidation::Nothing => {}
        Invalidation::Remote => {
            STATS.remote_invalidations.fetch_add(1, Relaxed);
        }
        Invalidation::Bogus => {
            // Deliberately unlike C (which ends the request now with the target's status): the
            // command's own MR may still be open to the target, so the request ends only when
            // recovery has stopped the QP, as aborted, and is retried (`proto::inval`).
            cerr!(
                ctrl,
                "Bogus remote invalidation for rkey {:#x}\n",
                mine.unwrap_or(0)
            );
            error_recovery(ctrl);
            return;
        }
        Invalidation::Local => {
            let posted = ctrl
                .queue(qe.qid)
                .and_then(|q| q.qp.get())
                .map(|qp| qp.post_local_inv(rq.inv_cqe(), rkey));
            match posted {
                Some(Ok(())) => STATS.local_invalidations.fetch_add(1, Relaxed),
                _ => {
                    cerr!(ctrl, "Queueing INV WR for rkey {:#x} failed\n", rkey);
                    error_recovery(ctrl);
                    return;
                }
            };
            // The local invalidation's completion ends the request.
            return;
        }
    }
    end_request(rq);
}

// ------------------------------------------------------------------------------------------
// Transport registration and RDMA client

/// The `rdma` transport and RDMA client.
pub(crate) struct Rdma;

impl TransportOps for Rdma {
    const NAME: &'static CStr = c"rdma";
    const REQUIRED_OPTS: u32 = opt::TRADDR;
    // Exactly the C driver's set; the fabrics core rejects anything else with a message naming
    // the option.
    const ALLOWED_OPTS: u32 = opt::TRSVCID
        | opt::RECONNECT_DELAY
        | opt::HOST_TRADDR
        | opt::CTRL_LOSS_TMO
        | opt::NR_WRITE_QUEUES
        | opt::NR_POLL_QUEUES
        | opt::TOS;

    fn create_ctrl(dev: &FabricsDevice, opts: &Options) -> Result<ARef<Ctrl>> {
        let traddr = opts.traddr().ok_or(EINVAL)?;
        opts.default_trsvcid(DEFAULT_TRSVCID)?;
        let trsvcid = opts.trsvcid().ok_or(EINVAL)?;
        let addr = SockAddr::parse(traddr, trsvcid).inspect_err(|_| {
            pr_err!("malformed address passed: {}:{}\n", traddr, trsvcid);
        })?;
        let src = if opts.mask() & opt::HOST_TRADDR != 0 {
            let s = opts.host_traddr().ok_or(EINVAL)?;
            Some(SockAddr::parse(s, c"0").inspect_err(|_| {
                pr_err!("malformed src address passed: {}\n", s);
            })?)
        } else {
            None
        };
        if !opts.duplicate_connect() && CTRLS.lock().iter().any(|c| c.ctrl().matches(opts)) {
            return Err(EALREADY);
        }
        let queue_count = opts.total_queues() + 1;
        let sqsize = opts.queue_size().saturating_sub(1) as u16;
        let mut queues = KVec::with_capacity(queue_count as usize, GFP_KERNEL)?;
        for qid in 0..queue_count {
            queues.push(
                KBox::pin_init(Queue::new(qid as u16), GFP_KERNEL)?,
                GFP_KERNEL,
            )?;
        }
        let ctrl = Controller::create(
            dev,
            opts,
            queue_count,
            sqsize,
            try_pin_init!(RdmaCtrl {
                queues,
                addr,
                src,
                dev <- new_mutex!(None),
                max_fr_pages: AtomicU32::new(0),
                use_inline_data: AtomicBool::new(false),
                io_queues: [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)],
                aen_sqe <- new_mutex!(None),
                admin_set: AtomicBool::new(false),
                io_set: AtomicBool::new(false),
            }),
        )?;
        ctrl.ctrl().add()?;
        ctrl.ctrl().change_state(State::Connecting);
        if let Err(e) = setup_ctrl(&ctrl, true) {
            ctrl.ctrl().uninit();
            return Err(e);
        }
        cinfo!(
            ctrl,
            "new ctrl: NQN \"{}\", addr {}:{}, transport rnvme_rdma\n",
            cs(opts.subsysnqn().unwrap_or(c"?")),
            cs(traddr),
            cs(trsvcid)
        );
        // Listing the controller is the last step that can fail (the list may have to grow). The
        // controller is live and registered by now: if it fails, take it down through the core
        // like a deletion and wait for that, and only then fail the create. The options stay the
        // core's (not taken), which frees them once when the create fails.
        // (The list's lock is released before the deletion, whose delete_ctrl takes it.)
        let listed = CTRLS.lock().push(ctrl.clone(), GFP_KERNEL);
        if let Err(e) = listed {
            cerr!(
                ctrl,
                "cannot list the new controller ({:?}): deleting it\n",
                e
            );
            let _ = ctrl.ctrl().delete();
            crate::nvme::flush_delete_wq();
            return Err(e.into());
        }
        ctrl.take_opts();
        Ok(Controller::into_ctrl(ctrl))
    }
}

/// Deletes every controller (those on `dev` only, if given) and waits for the deletions.
pub(crate) fn delete_controllers(dev: Option<&Device>) {
    {
        let list = CTRLS.lock();
        for c in list.iter() {
            if let Some(dev) = dev {
                let on_dev = c
                    .dev
                    .lock()
                    .as_ref()
                    .is_some_and(|d| d.device().node_guid() == dev.node_guid());
                if !on_dev {
                    continue;
                }
            }
            let _ = c.ctrl().delete();
        }
    }
    crate::nvme::flush_delete_wq();
}

impl ClientOps for Rdma {
    const NAME: &'static CStr = c"rnvme_rdma";

    fn add(dev: &Device) -> Result {
        pr_debug!(
            "RDMA device {} (node GUID {:#018x}) added\n",
            dev.name(),
            dev.node_guid()
        );
        Ok(())
    }

    fn remove(dev: &Device) {
        let known = DEVICES
            .lock()
            .iter()
            .any(|e| e.dev.device().node_guid() == dev.node_guid());
        if !known {
            return;
        }
        pr_info!(
            "RDMA device {} removed: deleting its controllers\n",
            dev.name()
        );
        delete_controllers(Some(dev));
    }
}

/// Deletes any remaining controller when the module goes away (after the RDMA client, like the
/// C driver's module exit).
pub(crate) struct Reaper;

impl Drop for Reaper {
    fn drop(&mut self) {
        delete_controllers(None);
    }
}
