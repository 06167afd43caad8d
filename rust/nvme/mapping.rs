// SPDX-License-Identifier: GPL-2.0

//! The DMA mappings a request holds while in flight: its command and its data, each unmapped
//! when dropped.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/linux/scatterlist.h`](srctree/include/linux/scatterlist.h)

use crate::bindings::raw;
use kernel::prelude::*;

/// The DMA mapping of a request's submission queue entry, unmapped when dropped.
///
/// # Invariants
///
/// `dma` maps the 64-byte command in a request's PDU to `dev` (`DMA_TO_DEVICE`); `dev` stays
/// registered until the mapping is dropped (the queue that mapped it keeps its device context
/// until its requests ended).
pub(crate) struct MappedCmd {
    pub(super) dma: u64,
    pub(super) dev: *mut raw::ib_device,
}

// SAFETY: the mapping is a bus address of a device; it may be used and unmapped on any thread.
unsafe impl Send for MappedCmd {}

impl MappedCmd {
    /// The command's bus address.
    pub(crate) fn dma_addr(&self) -> u64 {
        self.dma
    }

    /// Hands the command to the device after the CPU wrote it.
    pub(crate) fn sync_for_device(&self) {
        // SAFETY: `dma` maps 64 bytes to `dev`, which is registered (type invariant).
        unsafe {
            raw::rnvme_ib_dma_sync_single_for_device(
                self.dev,
                self.dma,
                64,
                raw::dma_data_direction::DMA_TO_DEVICE.0,
            )
        };
    }
}

impl Drop for MappedCmd {
    fn drop(&mut self) {
        // SAFETY: `dma` maps 64 bytes to `dev`, which is registered (type invariant); the owner
        // drops the mapping when the device no longer reads the command (the request's use ended,
        // or its SEND was never posted).
        unsafe {
            raw::rnvme_ib_dma_unmap_single(
                self.dev,
                self.dma,
                64,
                raw::dma_data_direction::DMA_TO_DEVICE.0,
            )
        };
    }
}

/// The DMA-mapped scatterlist of a request's data, unmapped and freed when dropped. Its first
/// entries live in the request itself (after the PDU), the rest, if any, are allocated.
///
/// # Invariants
///
/// `table` is allocated (`sg_alloc_table_chained` with the request's inline entries as the first
/// chunk) and mapped on `dev` in direction `dir` with `nents` DMA entries; `dev` stays registered
/// and the request's PDU stays allocated until the mapping is dropped (the queue that mapped it
/// keeps its device context until its requests ended, and the mapping is kept in the request and
/// released when the request ends, before the tag set can go).
pub(crate) struct MappedSg {
    pub(super) table: raw::sg_table,
    pub(super) nents: i32,
    pub(super) dev: *mut raw::ib_device,
    pub(super) dir: i32,
}

// SAFETY: the table is plain memory owned by this object (its inline chunk by the request it was
// made for, which holds this object); it may be unmapped and freed on any thread.
unsafe impl Send for MappedSg {}
// SAFETY: `&MappedSg` only reads.
unsafe impl Sync for MappedSg {}

impl MappedSg {
    /// The number of DMA entries.
    pub(crate) fn nents(&self) -> i32 {
        self.nents
    }

    /// The DMA entries as (bus address, length): `for_each_sg` with `sg_dma_address` and
    /// `sg_dma_len`, read here rather than through three calls per entry.
    #[inline]
    pub(crate) fn entries(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let mut sg = self.table.sgl;
        (0..self.nents).map(move |_| {
            // SAFETY: the first `nents` entries of the table are mapped (type invariant);
            // `sg_next` of any entry of the table is valid, and its result is read only while
            // it is one of those `nents` entries.
            unsafe {
                #[cfg(CONFIG_NEED_SG_DMA_LENGTH)]
                let len = (*sg).dma_length;
                #[cfg(not(CONFIG_NEED_SG_DMA_LENGTH))]
                let len = (*sg).length;
                let e = ((*sg).dma_address, len);
                sg = sg_next(sg);
                e
            }
        })
    }

    /// Maps the entries onto `mr` for a fast registration.
    pub(crate) fn register(&self, mr: &mut crate::rdma::qp::Mr) -> Result {
        mr.map(self.table.sgl, self.nents)
    }
}

/// `sg_next()` (a static inline of scatterlist.h): the entry after `sg`, following a chain link;
/// null after the last entry.
///
/// # Safety
///
/// `sg` is an entry of an initialised scatterlist table.
#[inline]
unsafe fn sg_next(sg: *mut raw::scatterlist) -> *mut raw::scatterlist {
    const FLAGS: kernel::ffi::c_ulong = raw::SG_PAGE_LINK_MASK as kernel::ffi::c_ulong;
    // SAFETY: `sg` is an entry of the table (caller).
    if unsafe { (*sg).page_link } & raw::SG_END as kernel::ffi::c_ulong != 0 {
        return core::ptr::null_mut();
    }
    // SAFETY: an entry that is not the last is followed by another entry or by a chain link.
    let next = unsafe { sg.add(1) };
    // SAFETY: as above, `next` is an entry or a chain link of the table.
    let link = unsafe { (*next).page_link };
    if link & raw::SG_CHAIN as kernel::ffi::c_ulong != 0 {
        return (link & !FLAGS) as *mut raw::scatterlist;
    }
    next
}

impl Drop for MappedSg {
    fn drop(&mut self) {
        // SAFETY: `table` is mapped on `dev` in direction `dir` (type invariant) and `dev` is
        // registered; the owner drops the mapping when the device no longer accesses the data
        // (the request's use ended, or it was never posted).
        unsafe { raw::rnvme_unmap_rq_data(self.dev, &mut self.table, self.dir) };
    }
}
