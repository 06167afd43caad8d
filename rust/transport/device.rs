// SPDX-License-Identifier: GPL-2.0

//! Per-RDMA-device context: what the controllers on one HCA share (the protection domain, the
//! device's limits), in a list counted by the queues using it (the C driver's `device_list`).

#![deny(unsafe_code)]

use crate::bindings::compat::prelude::*;
use crate::rdma::{
    verbs::{DeviceRef, Pd},
    Device,
};
use kernel::sync::Arc;

const MAX_SEGMENTS: u32 = 256;
/// Data segments a write may carry in the capsule (besides the command's own).
pub(super) const MAX_INLINE_SEGMENTS: u32 = 4;

// ------------------------------------------------------------------------------------------
// Per-device context

/// What controllers on one RDMA device share: the protection domain and the device's limits.
pub(crate) struct RdmaDev {
    pub(super) pd: Pd,
    pub(super) num_inline_segments: u32,
}

impl RdmaDev {
    pub(super) fn device(&self) -> &Device {
        self.pd.device()
    }
}

/// An entry of the global device list, with its number of users (queues).
pub(crate) struct DevEntry {
    pub(super) dev: Arc<RdmaDev>,
    pub(super) users: usize,
}

crate::global_mutex! {
    /// The per-device contexts in use (the C driver's `device_list`).
    pub(super) static DEVICES: KVec<DevEntry> = KVec::new();
}

/// Finds or creates the context of `dev` and counts one more user.
pub(super) fn dev_get(dev: &Device) -> Result<Arc<RdmaDev>> {
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
pub(super) fn dev_put(dev: &Arc<RdmaDev>) {
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
pub(super) struct DevUse(pub(super) Arc<RdmaDev>);

impl Drop for DevUse {
    fn drop(&mut self) {
        dev_put(&self.0);
    }
}

pub(super) fn max_fr_pages(dev: &Device) -> u32 {
    MAX_SEGMENTS.min(dev.max_fast_reg_page_list_len().saturating_sub(1))
}
