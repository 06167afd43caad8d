// SPDX-License-Identifier: GPL-2.0

//! Wire formats of NVMe over Fabrics on RDMA, as pure code.
//!
//! Nothing in here touches the kernel: it only depends on `core`, so the same source is compiled
//! into the module and into the host unit tests (`tools/host-tests`).

#![deny(unsafe_code)]

pub(crate) mod capsule;
pub(crate) mod cm;
pub(crate) mod inval;
// T10-PI's signature attributes (Documentation/t10-pi.rst): tested, not used by the transport
// yet, so compiled only where the tests are.
#[cfg(any(test, CONFIG_KUNIT = "y"))]
pub(crate) mod pi;
pub(crate) mod sgl;
// Only the tests decode statuses (the core names them in its messages): dead code otherwise, a
// warning on a kernel without KUnit.
#[cfg(any(test, CONFIG_KUNIT = "y"))]
pub(crate) mod status;
