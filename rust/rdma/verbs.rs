// SPDX-License-Identifier: GPL-2.0

//! Owned RDMA verbs objects: device references, protection domains, completion queues and
//! DMA-mapped buffers.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::Device;
use crate::bindings::raw;
use crate::bindings::sync::TryCell;
use core::{ops::Deref, ptr::NonNull};
use kernel::{
    error::{from_err_ptr, to_result},
    prelude::*,
};

/// An owned reference on a registered RDMA device.
///
/// Unregistering the device waits until every reference is dropped: the RDMA client's `remove`
/// callback must make all holders let go.
///
/// # Invariants
///
/// `self.0` points to an `ib_device` on which this object holds one reference.
pub(crate) struct DeviceRef(NonNull<raw::ib_device>);

// SAFETY: device references may be taken and dropped on any thread.
unsafe impl Send for DeviceRef {}
// SAFETY: `&DeviceRef` only gives `&Device`, whose methods only read fields that do not change
// while the device is registered (or copy the name), so sharing across threads is fine.
unsafe impl Sync for DeviceRef {}

impl DeviceRef {
    /// Takes a reference, unless the device is being unregistered.
    pub(crate) fn get(dev: &Device) -> Option<Self> {
        let p = dev.as_raw();
        // SAFETY: `dev` is a valid device for the borrow.
        if unsafe { raw::rnvme_ib_device_try_get(p) } {
            // INVARIANT: we just took a reference.
            NonNull::new(p).map(Self)
        } else {
            None
        }
    }
}

impl Deref for DeviceRef {
    type Target = Device;

    fn deref(&self) -> &Device {
        // SAFETY: the reference we hold keeps the device valid (type invariant).
        unsafe { Device::from_raw(self.0.as_ptr()) }
    }
}

impl Drop for DeviceRef {
    fn drop(&mut self) {
        // SAFETY: we own one reference (type invariant).
        unsafe { raw::ib_device_put(self.0.as_ptr()) };
    }
}

/// A protection domain.
///
/// # Invariants
///
/// `ptr` is a PD allocated on `dev` with `ib_alloc_pd`, owned by this object.
pub(crate) struct Pd {
    ptr: NonNull<raw::ib_pd>,
    dev: DeviceRef,
}

// SAFETY: PDs may be used from any thread; the fields read through `&self` never change.
unsafe impl Send for Pd {}
// SAFETY: see `Send`.
unsafe impl Sync for Pd {}

impl Pd {
    /// Allocates a PD. With `global_rkey`, the PD also gets an rkey that gives remote access to
    /// all memory (the C driver's `register_always=N`; unsafe by design of the verbs API).
    pub(crate) fn new(dev: DeviceRef, global_rkey: bool) -> Result<Self> {
        let flags = if global_rkey {
            raw::ib_pd_flags_IB_PD_UNSAFE_GLOBAL_RKEY
        } else {
            0
        };
        // SAFETY: `dev` is a registered device we hold a reference on.
        let p = from_err_ptr(unsafe { raw::rnvme_ib_alloc_pd(dev.as_raw(), flags) })?;
        // INVARIANT: `p` was just allocated on `dev`.
        Ok(Self {
            ptr: NonNull::new(p).ok_or(ENOMEM)?,
            dev,
        })
    }

    /// The device the PD belongs to.
    pub(crate) fn device(&self) -> &DeviceRef {
        &self.dev
    }

    pub(crate) fn as_raw(&self) -> *mut raw::ib_pd {
        self.ptr.as_ptr()
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: we own the PD (type invariant); its users (QPs, MRs) hold `&Pd` borrows or are
        // dropped before it by their owners.
        unsafe { raw::rnvme_ib_dealloc_pd(self.as_raw()) };
    }
}

/// How a completion queue is polled.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PollCtx {
    /// A private CQ polled in softirq context. Not one of the device's shared pool
    /// (`ib_cq_pool_get`, the C driver's choice): `ib_unregister_device` frees the pool's CQs
    /// (`ib_cq_pool_cleanup`) as soon as its clients' `remove` callbacks return, which rdma_cm's
    /// does once the ids on the device are destroyed, while a QP destroyed after its id (the
    /// rdma_cm order) may still be using its pool CQ. A private CQ is freed by its owner, who
    /// holds a device reference (its PD's) until then, so unregistration waits for it.
    Softirq,
    /// A private CQ polled only by [`PollCell::poll`] (blk-mq poll queues).
    Direct,
}

/// A completion queue.
///
/// # Invariants
///
/// `ptr` is a CQ allocated (`ib_alloc_cq`) with the polling context `ctx`, owned by this object.
pub(crate) struct Cq {
    ptr: NonNull<raw::ib_cq>,
    ctx: PollCtx,
}

// SAFETY: a CQ may be used and freed from any thread; `&Cq` only hands out its pointer (the
// blk-mq poller reaches a direct CQ through `PollCell`, which keeps it alive while polling).
unsafe impl Send for Cq {}
// SAFETY: see `Send`.
unsafe impl Sync for Cq {}

impl Cq {
    /// Gets a CQ with room for `nr_cqe` completions on `comp_vector`.
    pub(crate) fn new(dev: &Device, nr_cqe: u32, comp_vector: u32, ctx: PollCtx) -> Result<Self> {
        let poll = match ctx {
            PollCtx::Softirq => raw::ib_poll_context_IB_POLL_SOFTIRQ,
            PollCtx::Direct => raw::ib_poll_context_IB_POLL_DIRECT,
        };
        // SAFETY: `dev` is a valid registered device for the call; no private data is attached.
        let p = unsafe {
            raw::rnvme_ib_alloc_cq(
                dev.as_raw(),
                core::ptr::null_mut(),
                nr_cqe as i32,
                comp_vector as i32,
                poll as i32,
            )
        };
        let p = from_err_ptr(p)?;
        // INVARIANT: `p` was allocated with the polling context `ctx`.
        Ok(Self {
            ptr: NonNull::new(p).ok_or(ENOMEM)?,
            ctx,
        })
    }

    /// How the CQ is polled (fixed at its allocation).
    pub(crate) fn ctx(&self) -> PollCtx {
        self.ctx
    }

    pub(crate) fn as_raw(&self) -> *mut raw::ib_cq {
        self.ptr.as_ptr()
    }
}

/// The direct-polled CQ of a poll queue as blk-mq's `poll` sees it: published when the queue's
/// connection is up, withdrawn before the CQ is freed.
///
/// Quiescing a queue does not stop `poll` (`bio_poll` holds only the queue's usage counter, and
/// error recovery does not freeze), so a poller may run while the queue is torn down. The CQ is
/// therefore only polled while the cell is held: [`PollCell::clear`] holds it too, so once it
/// returns no poller holds the CQ and its owner may free it. (The C driver calls
/// `ib_process_cq_direct` unheld and has this race.) A poller that finds the cell held (another
/// task polling this hardware context, or the CQ being published or withdrawn) returns at once
/// with nothing found; blk-mq polls again. Concurrent polling itself would be safe
/// (`ib_process_cq_direct` polls into its own stack array and providers lock `poll_cq`);
/// `ib_drain_qp` polls a direct CQ itself, outside the cell, before the teardown calls `clear`.
///
/// The cell is a [`TryCell`] (the flag the requests' state uses), not the kernel crate's
/// `SpinLock`: blk-mq calls `poll` tens of times per polled I/O while it waits (about 45 on rxe,
/// `make bench-insns`), and the lock's try-lock, held-assertion and unlock are three calls of
/// out-of-line C helpers from a module, about 20 instructions a poll more than the flag's
/// compare-exchange and store. A poller holds the cell with preemption enabled, so the
/// withdrawing side sleeps between its attempts rather than spinning (a waiter that spun could
/// keep a preempted poller off its CPU).
///
/// # Invariants
///
/// The pointer in the cell is null or a live [`PollCtx::Direct`] CQ: its owner publishes it with
/// [`PollCell::set`] and calls [`PollCell::clear`] before freeing it.
pub(crate) struct PollCell(TryCell<CqPtr>);

/// The published CQ (null: none).
struct CqPtr(*mut raw::ib_cq);

// SAFETY: a CQ may be polled from any thread; the pointer is only used while its `PollCell` is
// held.
unsafe impl Send for CqPtr {}

impl PollCell {
    /// An empty cell (polling finds nothing).
    pub(crate) const fn new() -> Self {
        Self(TryCell::new(CqPtr(core::ptr::null_mut())))
    }

    /// Holds the cell to set the published CQ to `cq`, sleeping while a poller holds it (a poll
    /// is bounded: `ib_process_cq_direct` handles what the CQ holds and returns). Process
    /// context.
    fn store(&self, cq: *mut raw::ib_cq) {
        // Checked on every call (debug kernels), not only when a poller makes it sleep.
        kernel::task::might_sleep();
        while self.0.try_with(|c| c.0 = cq).is_none() {
            kernel::time::delay::fsleep(kernel::time::Delta::from_micros(20));
        }
    }

    /// Publishes `cq` if it is a [`PollCtx::Direct`] CQ. Its owner must call
    /// [`PollCell::clear`] before it frees it (the queue teardown does, before it drops the
    /// connection that owns the CQ). Process context.
    pub(crate) fn set(&self, cq: &Cq) {
        if cq.ctx == PollCtx::Direct {
            // INVARIANT: a live direct CQ, withdrawn by its owner before it is freed.
            self.store(cq.as_raw());
        }
    }

    /// Withdraws the CQ and waits for a running poller to finish with it: after this, the CQ may
    /// be freed. Process context.
    pub(crate) fn clear(&self) {
        self.store(core::ptr::null_mut());
    }

    /// Processes the CQ's completions; returns how many (0 also when another task is polling or
    /// the CQ is being published or withdrawn).
    #[inline(always)]
    pub(crate) fn poll(&self) -> i32 {
        self.0
            .try_with(|cq| {
                if cq.0.is_null() {
                    return 0;
                }
                // SAFETY: the CQ is a live direct CQ while the cell is held (type invariant:
                // `clear` holds the cell before its owner frees it).
                unsafe { raw::ib_process_cq_direct(cq.0, -1) }
            })
            .unwrap_or(0)
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: we own the CQ (type invariant); its QP was destroyed before (the owner's order).
        unsafe { raw::ib_free_cq(self.as_raw()) };
    }
}

/// Direction of a DMA mapping.
#[derive(Clone, Copy)]
pub(crate) enum DmaDir {
    /// The device reads the buffer.
    ToDevice,
    /// The device writes the buffer.
    FromDevice,
}

impl DmaDir {
    fn raw(self) -> i32 {
        match self {
            DmaDir::ToDevice => crate::bindings::compat::DMA_TO_DEVICE,
            DmaDir::FromDevice => crate::bindings::compat::DMA_FROM_DEVICE,
        }
    }
}

/// A zeroed kernel buffer, DMA-mapped for an RDMA device for its whole life.
///
/// # Invariants
///
/// `buf` is mapped at `dma` on `dev` in direction `dir` until drop; its allocation never moves.
pub(crate) struct DmaBuf {
    buf: KVec<u8>,
    dma: u64,
    dir: DmaDir,
    dev: DeviceRef,
}

impl DmaBuf {
    /// Allocates and maps `len` bytes.
    pub(crate) fn new(dev: DeviceRef, len: usize, dir: DmaDir) -> Result<Self> {
        let mut buf = KVec::with_capacity(len, GFP_KERNEL)?;
        buf.extend_with(len, 0u8, GFP_KERNEL)?;
        let mut dma = 0u64;
        // SAFETY: `buf` is a valid allocation of `len` bytes that is not moved until unmapped;
        // `dma` is writable.
        to_result(unsafe {
            raw::rnvme_ib_dma_map_single(
                dev.as_raw(),
                buf.as_mut_ptr().cast(),
                len,
                dir.raw(),
                &mut dma,
            )
        })?;
        // INVARIANT: just mapped.
        Ok(Self { buf, dma, dir, dev })
    }

    /// The bus address of the buffer.
    pub(crate) fn dma_addr(&self) -> u64 {
        self.dma
    }

    /// The buffer's size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the buffer is mapped for `dev`, for the device to read.
    pub(crate) fn is_to_device_of(&self, dev: &super::Device) -> bool {
        matches!(self.dir, DmaDir::ToDevice) && self.dev.as_raw() == dev.as_raw()
    }

    #[inline(always)]
    fn sync_for_cpu(&self) {
        if self.dev.uses_virt_dma() {
            return;
        }
        // SAFETY: the mapping is live (type invariant).
        unsafe {
            raw::rnvme_ib_dma_sync_single_for_cpu(
                self.dev.as_raw(),
                self.dma,
                self.buf.len(),
                self.dir.raw(),
            )
        };
    }

    #[inline(always)]
    fn sync_for_device(&self) {
        if self.dev.uses_virt_dma() {
            return;
        }
        // SAFETY: the mapping is live (type invariant).
        unsafe {
            raw::rnvme_ib_dma_sync_single_for_device(
                self.dev.as_raw(),
                self.dma,
                self.buf.len(),
                self.dir.raw(),
            )
        };
    }

    /// Reads the buffer after the device wrote it: syncs it for the CPU, runs `f`, and hands it
    /// back to the device.
    #[inline(always)]
    pub(crate) fn read<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        self.sync_for_cpu();
        let r = f(&self.buf);
        self.sync_for_device();
        r
    }

    /// Gives the CPU access to the buffer: syncs it for the CPU, runs `f`, and syncs it back for
    /// the device.
    pub(crate) fn with_cpu<R>(&mut self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        self.sync_for_cpu();
        let r = f(&mut self.buf);
        self.sync_for_device();
        r
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: the buffer is mapped (type invariant) and the device no longer uses it: its
        // owner drops it only after the QP that referenced it is gone.
        unsafe {
            raw::rnvme_ib_dma_unmap_single(
                self.dev.as_raw(),
                self.dma,
                self.buf.len(),
                self.dir.raw(),
            )
        };
    }
}
