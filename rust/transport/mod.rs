// SPDX-License-Identifier: GPL-2.0

//! The NVMe/RDMA host transport logic. Safe code only: everything unsafe is in `rdma` and `nvme`.

#![deny(unsafe_code)]

use crate::{
    nvme::{opt, Ctrl, FabricsDevice, Options, TransportOps},
    rdma::{ClientOps, Device, SockAddr},
};
use kernel::{prelude::*, str::CStr, sync::aref::ARef};

/// The default NVMe/RDMA service id (`NVME_RDMA_IP_PORT`).
const DEFAULT_TRSVCID: &CStr = c"4420";

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

    fn create_ctrl(_dev: &FabricsDevice, opts: &Options) -> Result<ARef<Ctrl>> {
        let traddr = opts.traddr().ok_or(EINVAL)?;
        let trsvcid = if opts.mask() & opt::TRSVCID != 0 {
            opts.trsvcid().ok_or(EINVAL)?
        } else {
            DEFAULT_TRSVCID
        };
        let dst = SockAddr::parse(traddr, trsvcid).inspect_err(|_| {
            pr_err!("malformed address passed: {}:{}\n", traddr, trsvcid);
        })?;
        if opts.mask() & opt::HOST_TRADDR != 0 {
            let src = opts.host_traddr().ok_or(EINVAL)?;
            SockAddr::parse(src, c"0").inspect_err(|_| {
                pr_err!("malformed src address passed: {}\n", src);
            })?;
        }
        pr_err!(
            "cannot create a controller for {} at {}:{} (address family {}): the rnvme_rdma data path is not implemented yet\n",
            opts.subsysnqn().unwrap_or(c"?"),
            traddr,
            trsvcid,
            dst.family()
        );
        Err(EOPNOTSUPP)
    }
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
        // No controller exists before the data path lands, so nothing holds resources of `dev`.
        pr_debug!(
            "RDMA device (node GUID {:#018x}) removed\n",
            dev.node_guid()
        );
    }
}
