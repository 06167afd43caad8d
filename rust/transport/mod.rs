// SPDX-License-Identifier: GPL-2.0

//! The NVMe/RDMA host transport logic. Safe code only: everything unsafe is in `rdma` and `nvme`.
//!
//! The structure follows the C driver (`drivers/nvme/host/rdma.c`) so that behaviour can be
//! compared function by function: per-device context shared by controllers on one HCA, queues
//! connected over rdma_cm (admin queue first), requests mapped onto SEND (+ REG_MR) work requests,
//! responses matched by command ID. By concern:
//!
//! - [`device`]: the per-RDMA-device context and its list;
//! - [`controller`]: the transport's part of a controller, and what starts its recovery;
//! - [`queue`]: a controller's queues and a queue's rdma_cm connection;
//! - [`setup`]: queue setup and teardown, reset, error recovery, reconnect;
//! - [`io`]: the blk-mq ops, request mapping, response and completions;
//! - [`fabrics`]: transport and RDMA client registration, controller creation, device removal;
//! - [`req_end`], [`req_io`]: a request's completion count and its mappings, as rules with tests;
//! - [`stats`]: the data path counters in debugfs.

#![deny(unsafe_code)]

mod controller;
mod device;
mod fabrics;
mod io;
mod queue;
mod req_end;
mod req_io;
mod setup;
mod stats;

pub(crate) use controller::RdmaCtrl;
pub(crate) use fabrics::{Rdma, Reaper};
pub(crate) use stats::Stats;

use crate::nvme::ctrl::Controller;
use kernel::str::CStr;

/// The transport's controller: the core's `struct nvme_ctrl` with [`RdmaCtrl`] (the C driver's
/// `struct nvme_rdma_ctrl`).
type Ctrl = Controller<RdmaCtrl>;

/// Initialises the transport's global lists; call once, first thing in module init.
pub(crate) fn init_globals() {
    controller::CTRLS.init();
    device::DEVICES.init();
}

/// A C string as text for `core::fmt` (the message macros go through `format_args!`).
fn text(s: &CStr) -> &str {
    s.to_str().unwrap_or("?")
}
