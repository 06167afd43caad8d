// SPDX-License-Identifier: GPL-2.0

//! Wire formats of NVMe over Fabrics on RDMA, as pure code.
//!
//! Nothing in here touches the kernel: it only depends on `core`, so the same source is compiled
//! into the module and into the host unit tests (`tools/host-tests`).

#![deny(unsafe_code)]
// The connect and data paths (not written yet) are the users of these formats; until then only
// the host unit tests and KUnit use them. Remove this when the data path lands.
#![allow(dead_code)]

pub(crate) mod cm;
pub(crate) mod sgl;
pub(crate) mod status;
