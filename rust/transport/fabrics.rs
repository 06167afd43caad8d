// SPDX-License-Identifier: GPL-2.0

//! Registration: the `rdma` fabrics transport (`create_ctrl`), the RDMA client (device removal)
//! and the deletion of every controller at module exit.

#![deny(unsafe_code)]

use super::{
    controller::{device_gone, RdmaCtrl, CREATING, CTRLS},
    device::DEVICES,
    queue::Queue,
    setup::setup_ctrl,
    text,
};
use crate::bindings::compat::prelude::*;
use crate::{
    nvme::{ctrl::Controller, opt, FabricsDevice, NvmeCtrl, Options, State, TransportOps},
    rdma::{ClientOps, Device, SockAddr},
};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU8};
use kernel::{new_mutex, str::CStr, sync::aref::ARef};

/// The default NVMe/RDMA service id (`NVME_RDMA_IP_PORT`).
const DEFAULT_TRSVCID: &CStr = c"4420";

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

    fn create_ctrl(dev: &FabricsDevice, opts: &Options) -> Result<ARef<NvmeCtrl>> {
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
        if !opts.duplicate_connect() && CTRLS.lock().iter().any(|c| c.nvme().matches(opts)) {
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
                max_fr_pages: AtomicU32::new(0),
                use_inline_data: AtomicBool::new(false),
                io_queues: [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)],
                aen_sqe <- new_mutex!(None),
                creation: AtomicU8::new(CREATING),
            }),
        )?;
        ctrl.nvme().add()?;
        ctrl.nvme().change_state(State::Connecting);
        if let Err(e) = setup_ctrl(&ctrl, true) {
            ctrl.nvme().uninit();
            // A status the target completed a setup command with is `EIO` here, as in C.
            return Err(e.into());
        }
        dev_info!(
            ctrl,
            "new ctrl: NQN \"{}\", addr {}:{}, transport rnvme_rdma\n",
            text(opts.subsysnqn().unwrap_or(c"?")),
            text(traddr),
            text(trsvcid)
        );
        // Listing the controller is the last step that can fail (the list may have to grow). The
        // controller is live and registered by now: if it fails, take it down through the core
        // like a deletion and wait for that, and only then fail the create. The options stay the
        // core's (not taken), which frees them once when the create fails.
        // (The list's lock is released before the deletion, whose delete_ctrl takes it.)
        // The RDMA device may have gone under an established queue since the setup looked
        // (`ConnCm::device_removed` leaves a controller being created to its creator): then the
        // same way down.
        let listed = CTRLS.lock().push(ctrl.clone(), GFP_KERNEL);
        let err = match listed {
            Err(e) => {
                dev_err!(
                    ctrl,
                    "cannot list the new controller ({:?}): deleting it\n",
                    e
                );
                Some(Error::from(e))
            }
            Ok(()) if !ctrl.mark_created() => {
                dev_info!(ctrl, "its RDMA device went while connecting: deleting it\n");
                Some(ENODEV)
            }
            Ok(()) => None,
        };
        if let Some(e) = err {
            let _ = ctrl.nvme().delete();
            crate::nvme::flush_delete_wq();
            return Err(e);
        }
        ctrl.take_opts();
        Ok(Controller::into_ctrl(ctrl))
    }
}

/// Deletes every controller (those on `dev` only, if given: that device is going, so their
/// commands in flight end now, `device_gone`) and waits for the deletions.
pub(crate) fn delete_controllers(dev: Option<&Device>) {
    {
        let list = CTRLS.lock();
        for c in list.iter() {
            if dev.is_some_and(|d| !c.uses_device(d)) {
                continue;
            }
            let _ = c.nvme().delete();
            if dev.is_some() {
                device_gone(c);
            }
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
            .any(|e| core::ptr::eq(e.dev.device(), dev));
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
