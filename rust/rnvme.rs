// SPDX-License-Identifier: GPL-2.0

//! rnvme_rdma: the NVMe over Fabrics RDMA host transport, in Rust.
//!
//! Layers (see `Documentation/design.rst`):
//! - `bindings`: raw bindgen output plus C helpers for static inline APIs;
//! - `rdma`, `nvme`: safe abstractions, the only code with `unsafe`;
//! - `proto`: wire formats, pure code shared with the host unit tests;
//! - `transport`: the driver logic, `#![deny(unsafe_code)]`.

mod bindings;
mod nvme;
mod proto;
mod rdma;
mod transport;

use kernel::prelude::*;

module! {
    type: RnvmeRdma,
    name: "rnvme_rdma",
    authors: ["The rnvme-rdma developers"],
    description: "NVMe over Fabrics RDMA host transport (Rust)",
    license: "GPL",
}

/// The module's state: the fabrics transport and the RDMA client registrations.
///
/// Fields drop in declaration order: the transport is unregistered before the RDMA client, as in
/// the C driver's module exit.
#[pin_data]
struct RnvmeRdma {
    #[pin]
    transport: nvme::TransportRegistration<transport::Rdma>,
    #[pin]
    ib_client: rdma::ClientRegistration<transport::Rdma>,
    /// Deletes controllers left after the client is gone.
    _reaper: transport::Reaper,
    #[pin]
    stats: kernel::debugfs::File<transport::Stats>,
    _debugfs: kernel::debugfs::Dir,
    /// The queue-setup workqueue, destroyed after every controller is gone.
    _setup_wq: nvme::SetupWq,
}

impl kernel::InPlaceModule for RnvmeRdma {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        transport::init_globals();
        let dir = kernel::debugfs::Dir::new(c"rnvme_rdma");
        try_pin_init!(Self {
            _: {
                // Two "rdma" transports would compete silently (the fabrics core picks the first
                // registered): refuse to load next to the C driver.
                if nvme::module_present(c"nvme_rdma") {
                    pr_err!("the C nvme_rdma transport is loaded; unload it (rmmod nvme_rdma) before loading rnvme_rdma\n");
                    return Err(EBUSY);
                }
            },
            // Before the transport registers: a connect may need it at once.
            _setup_wq: nvme::SetupWq::new()?,
            ib_client <- rdma::ClientRegistration::new(),
            transport <- nvme::TransportRegistration::new(module),
            _reaper: transport::Reaper,
            stats <- dir.read_only_file(c"stats", transport::Stats),
            _debugfs: dir,
        })
    }
}
