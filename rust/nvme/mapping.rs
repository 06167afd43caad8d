// SPDX-License-Identifier: GPL-2.0

//! The DMA mappings a request holds while in flight: its command and its data, each unmapped
//! when dropped.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/linux/scatterlist.h`](srctree/include/linux/scatterlist.h)

use super::mq::{MqOps, Request};
use crate::bindings::{compat, raw, to_result};
use crate::rdma::{
    qp::{Qp, SgeList},
    Device,
};
use kernel::prelude::*;

/// Mapping a request's command and data (`queue_rq`'s first steps, `nvme_rdma_map_data`).
impl<M: MqOps> Request<M> {
    /// DMA-maps the submission queue entry for `dev`; dropping the mapping unmaps it.
    #[inline(always)]
    pub(crate) fn map_cmd(&self, dev: &Device) -> Result<MappedCmd> {
        // SAFETY: the command buffer lives in the PDU, which does not move while the tag set
        // lives.
        let addr = unsafe { (*self.pdu()).cmd.get() };
        let dma = if dev.uses_virt_dma() {
            // `ib_dma_map_single` of a software device: the kernel address itself.
            addr.addr() as u64
        } else {
            let mut dma = 0u64;
            // SAFETY: `addr` is the request's 64-byte command (above), mapped to the device;
            // `dma` is writable.
            to_result(unsafe {
                raw::rnvme_ib_dma_map_single(
                    dev.as_raw(),
                    addr.cast(),
                    64,
                    compat::DMA_TO_DEVICE,
                    &mut dma,
                )
            })?;
            dma
        };
        // INVARIANT: `dma` maps the command to `dev`; the caller keeps the device (its queue's
        // device context) until it dropped the mapping.
        Ok(MappedCmd {
            dma,
            dev: dev.as_raw(),
        })
    }

    /// Builds a scatterlist of the request's data and DMA-maps it for `dev`, in `slot`: the
    /// request's own slot, where the mapping stays until the request's use ends, so the table is
    /// written there rather than built elsewhere and moved. Dropping the mapping
    /// unmaps and frees it. `None` for a request without data (the slot is left as it is). On
    /// error the slot holds an empty mapping, whose drop does nothing.
    /// The slot must be the empty one of a new use (emptied by `ReqIo::begin`): with data, a
    /// mapping found there would be forgotten, not released (nothing is looked for); without,
    /// it would stay.
    #[inline(always)]
    pub(crate) fn map_data_into<'a>(
        &self,
        dev: &Device,
        slot: &'a mut Option<MappedSg>,
    ) -> Result<Option<&'a MappedSg>> {
        // `sg_alloc_table_chained` BUGs on zero entries: a request without data has nothing to
        // map. (Asked here, once: the caller learns it from the result.)
        let segs = self.nr_phys_segments();
        if segs == 0 {
            return Ok(None);
        }
        core::mem::forget(slot.take());
        let sg = slot.insert(MappedSg {
            // SAFETY: an all-zero sg_table is the empty table.
            table: unsafe { core::mem::zeroed() },
            nents: 0,
            dev: dev.as_raw(),
            dir: 0,
        });
        // SAFETY: the tag set's `cmd_size` (`Pdu::cmd_size`) reserves `INLINE_SG` bytes right
        // after the PDU, suitably aligned (asserted there), for this request alone.
        let first = unsafe { self.pdu().add(1).cast::<raw::scatterlist>() };
        // (`first` has room for `RNVME_INLINE_SG_CNT` entries that no other mapping of this
        // request uses: one mapping per use of the request, released before the next.)
        // What C's `nvme_rdma_dma_map_req` does, its static inlines done here (no helper call).
        let rq = self.as_raw();
        sg.table.sgl = first;
        // SAFETY: `table` is the slot's empty table, `first` a first chunk of
        // `RNVME_INLINE_SG_CNT` entries of this request's alone (above). On failure the table is
        // freed by the call and `nents` stays 0 (an empty mapping).
        to_result(unsafe {
            raw::sg_alloc_table_chained(&mut sg.table, segs.into(), first, raw::RNVME_INLINE_SG_CNT)
        })?;
        let mut last = core::ptr::null_mut();
        // SAFETY: the table was allocated above for the request's segments (`blk_rq_map_sg`).
        let mapped = unsafe { raw::__blk_rq_map_sg(rq, sg.table.sgl, &mut last) };
        sg.table.nents = mapped as u32;
        // `rq_dma_dir`.
        let dir = if self.is_write() {
            compat::DMA_TO_DEVICE
        } else {
            compat::DMA_FROM_DEVICE
        };
        sg.dir = dir;
        // SAFETY: the table's first `mapped` entries describe the request's data, which stays
        // valid until the request ends, after the mapping is dropped (unmapped with `dir`).
        let n = unsafe { dev.dma_map_sg(sg.table.sgl, mapped, dir) };
        if n <= 0 {
            // SAFETY: allocated above with the same first chunk, not mapped; freed once.
            unsafe { raw::sg_free_table_chained(&mut sg.table, raw::RNVME_INLINE_SG_CNT) };
            return Err(EIO);
        }
        // INVARIANT: `table` is allocated and mapped with `n > 0` DMA entries on `dev` in
        // direction `dir`. The caller keeps the device (its queue's device context) until it
        // dropped the mapping.
        sg.nents = n;
        Ok(Some(sg))
    }
}

/// [`Device::uses_virt_dma`] of the device a mapping keeps as a raw pointer.
///
/// # Safety
///
/// `dev` is a registered `struct ib_device`.
#[inline(always)]
unsafe fn uses_virt_dma(dev: *mut raw::ib_device) -> bool {
    // SAFETY: registered (caller).
    unsafe { Device::from_raw(dev) }.uses_virt_dma()
}

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
    /// Appends the command to the SGEs of a SEND on `qp` (`EINVAL` if it is mapped for another
    /// device or the list is full).
    #[inline(always)]
    pub(crate) fn push_to<const N: usize>(&self, sges: &mut SgeList<N>, qp: &Qp) -> Result {
        if self.dev != qp.device().as_raw() {
            return Err(EINVAL);
        }
        // SAFETY: `dma` maps the 64-byte command to `dev` for the device to read (type
        // invariant), which is `qp`'s device (checked above); the mapping is borrowed for the
        // call.
        unsafe { sges.push_raw(qp, self.dma, 64) }
    }

    /// Whether `dev` is a software device (`ib_uses_virt_dma`): nothing to sync or unmap.
    #[inline(always)]
    fn virt(&self) -> bool {
        // SAFETY: `dev` is registered while the mapping exists (type invariant).
        unsafe { uses_virt_dma(self.dev) }
    }

    /// Hands the command to the device after the CPU wrote it.
    #[inline(always)]
    pub(crate) fn sync_for_device(&self) {
        if self.virt() {
            return;
        }
        // SAFETY: `dma` maps 64 bytes to `dev`, which is registered (type invariant).
        unsafe {
            raw::rnvme_ib_dma_sync_single_for_device(self.dev, self.dma, 64, compat::DMA_TO_DEVICE)
        };
    }
}

impl Drop for MappedCmd {
    #[inline]
    fn drop(&mut self) {
        if self.virt() {
            return;
        }
        // SAFETY: `dma` maps 64 bytes to `dev`, which is registered (type invariant); the owner
        // drops the mapping when the device no longer reads the command (the request's use ended,
        // or its SEND was never posted).
        unsafe { raw::rnvme_ib_dma_unmap_single(self.dev, self.dma, 64, compat::DMA_TO_DEVICE) };
    }
}

/// The DMA-mapped scatterlist of a request's data, unmapped and freed when dropped. Its first
/// entries live in the request itself (after the PDU), the rest, if any, are allocated.
///
/// # Invariants
///
/// Unless `nents` is 0 (an empty mapping: nothing mapped), `table` is allocated
/// (`sg_alloc_table_chained` with the request's inline entries as the first chunk) and mapped on
/// `dev` in direction `dir` with `nents` DMA entries; `dev` stays registered
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
    /// `sg_dma_len`, read here rather than through three calls per entry. (Not
    /// `kernel::scatterlist::SGTable::iter`: it makes those three calls, out of line, and walks
    /// the table's CPU entries, where the count that matters is the DMA-mapped one.)
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

    /// Appends the DMA entries to the SGEs of a SEND on `qp` (in-capsule data); returns their
    /// total length. `EINVAL` if the data is not mapped to `qp`'s device for the device to read,
    /// or the list cannot take every entry (then some may have been appended).
    #[inline(always)]
    pub(crate) fn push_to<const N: usize>(&self, sges: &mut SgeList<N>, qp: &Qp) -> Result<u32> {
        if self.dev != qp.device().as_raw() || self.dir != compat::DMA_TO_DEVICE {
            return Err(EINVAL);
        }
        let mut total = 0u32;
        for (addr, len) in self.entries() {
            // SAFETY: the entries are mapped on `dev` in direction `dir` (type invariant), which
            // are `qp`'s device and the device reading (checked above); the mapping is borrowed
            // for the call.
            unsafe { sges.push_raw(qp, addr, len) }?;
            total = total.wrapping_add(len);
        }
        Ok(total)
    }

    /// Maps the entries onto `mr` for a fast registration.
    #[inline(always)]
    /// `EINVAL` if the data is not mapped on the MR's device.
    pub(crate) fn register(&self, mr: &mut crate::rdma::qp::Mr) -> Result {
        if mr.device() != self.dev {
            return Err(EINVAL);
        }
        // SAFETY: the table holds `nents` entries mapped for DMA on `dev` (type invariant), the
        // MR's device (checked above), and stays mapped while borrowed for the call.
        unsafe { mr.map(self.table.sgl, self.nents) }
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
    #[inline]
    fn drop(&mut self) {
        if self.nents == 0 {
            return;
        }
        // SAFETY: `dev` is registered while the mapping exists (type invariant).
        if unsafe { uses_virt_dma(self.dev) } {
            // `ib_dma_unmap_sg` of a software device does nothing: only the table is freed.
            // SAFETY: `table` was allocated with the request's inline entries as its first chunk
            // of `RNVME_INLINE_SG_CNT` (type invariant, `nents > 0`) and is freed once, here.
            unsafe { raw::sg_free_table_chained(&mut self.table, raw::RNVME_INLINE_SG_CNT) };
            return;
        }
        // SAFETY: `table` is mapped on `dev` in direction `dir` (type invariant, `nents > 0`) and
        // `dev` is registered; the owner drops the mapping when the device no longer accesses the
        // data (the request's use ended, or it was never posted).
        unsafe { raw::rnvme_unmap_rq_data(self.dev, &mut self.table, self.dir) };
    }
}
