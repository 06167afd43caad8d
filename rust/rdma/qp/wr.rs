// SPDX-License-Identifier: GPL-2.0

//! Work requests built by this layer: a request's SEND and registration kept in its PDU
//! ([`SendWrs`]), what a registration registers ([`RegWr`]), and the scatter/gather lists of a
//! SEND ([`SgeList`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{Cqe, Qp, Sge};
use crate::bindings::{raw, to_result};
use crate::rdma::verbs::DmaBuf;
use kernel::{prelude::*, types::Opaque};

/// What an `IB_WR_REG_MR` work request registers, prepared by [`super::Mr::reg_wr`] for
/// [`SendWrs::post`].
#[derive(Clone, Copy)]
pub(crate) struct RegWr {
    pub(super) mr: core::ptr::NonNull<raw::ib_mr>,
    /// The QP whose pool the MR is from: [`SendWrs::post`] refuses it on another.
    pub(super) qp: *mut raw::ib_qp,
    pub(super) key: u32,
}

/// The work requests of one blk-mq request: its SEND and the memory registration posted before
/// it, kept in the request's PDU beside their completion entries, as the C driver keeps `reg_wr`
/// in `struct nvme_rdma_request`. What never changes is written once ([`SendWrs::init`]: the
/// opcodes, flags, access rights, completion entries and the REG's link to the SEND); a post
/// writes only the SGE list, its length, the MR and its key, where a work request built afresh
/// would be zeroed (96 bytes) and filled at every I/O.
///
/// # Invariants
///
/// Once [`SendWrs::init`] ran: `send` is a signalled `IB_WR_SEND` completing into an armed entry,
/// `reg` an `IB_WR_REG_MR` (local write, remote read and write) completing into an armed entry
/// and linked to `send`; both entries belong to the object holding `self`, which outlives every
/// work request posted from it. Only [`SendWrs::post`] writes the other fields.
#[repr(C)]
pub(crate) struct SendWrs {
    send: Opaque<raw::ib_send_wr>,
    reg: Opaque<raw::ib_reg_wr>,
}

impl SendWrs {
    /// Writes the fields that never change.
    ///
    /// # Safety
    ///
    /// `this` is valid for writes and stays at its address for as long as it is used. `send` and
    /// `reg` are armed entries of the object containing `this` (so [`Cqe::arm`]'s rule holds for
    /// them: that object outlives every work request posted with them). No work request
    /// posted from `this` is outstanding.
    pub(crate) unsafe fn init(this: *mut Self, send: &Cqe, reg: &Cqe) {
        // SAFETY: `this` is valid for writes (caller); all-zero WRs are valid, and the fields set
        // are those the invariant names.
        unsafe {
            let s = (*this).send.get();
            s.write(core::mem::zeroed());
            (*s).__bindgen_anon_1.wr_cqe = core::mem::ManuallyDrop::new(send.as_raw());
            (*s).opcode = raw::ib_wr_opcode_IB_WR_SEND;
            (*s).send_flags = raw::ib_send_flags_IB_SEND_SIGNALED;
            let r = (*this).reg.get();
            r.write(core::mem::zeroed());
            (*r).wr.__bindgen_anon_1.wr_cqe = core::mem::ManuallyDrop::new(reg.as_raw());
            (*r).wr.opcode = raw::ib_wr_opcode_IB_WR_REG_MR;
            (*r).wr.next = s;
            (*r).access = (raw::ib_access_flags_IB_ACCESS_LOCAL_WRITE
                | raw::ib_access_flags_IB_ACCESS_REMOTE_READ
                | raw::ib_access_flags_IB_ACCESS_REMOTE_WRITE) as i32;
        }
    }

    /// Posts the registration `reg`, if any, followed by the signalled SEND of `sges`, in one
    /// chain.
    ///
    /// Everything posted is checked to be this QP's: the SGEs were built for it from DMA
    /// mappings of its device with its PD's lkey ([`SgeList`]) and the MR is from its pool
    /// ([`super::Mr::reg_wr`]); the entries were armed at [`SendWrs::init`]. What remains is
    /// the one rule no type here can carry (the kernel crate's DMA types have it too): what the
    /// device was handed stays mapped until the completions ran or the QP was drained; the
    /// transport keeps a request's mappings and MR until the request ends, after its
    /// completions (`ReqEnd`).
    ///
    /// # Safety
    ///
    /// `init` ran on `self`, and no other thread uses `self` during the call. (A blk-mq request
    /// has one owner at a time, which posts its SEND once per use. The provider reads the chain
    /// during the call, the SEND last, and the request's use cannot end before the SEND
    /// completed, which it cannot before the provider took it: the next use, which starts only
    /// after that end, cannot meet this post's reads. The REG's link to the SEND never changes.)
    #[inline(always)]
    pub(crate) unsafe fn post<const N: usize>(
        &self,
        qp: &Qp,
        reg: Option<RegWr>,
        sges: &SgeList<N>,
    ) -> Result {
        if reg.is_some_and(|r| r.qp != qp.as_raw()) || !sges.is_for(qp) {
            return Err(EINVAL);
        }
        let sges = sges.as_slice();
        let s = self.send.get();
        // SAFETY: `self` is not used elsewhere during the call (caller), so writing through the
        // `Opaque` fields races with nothing.
        let first: *const raw::ib_send_wr = unsafe {
            (*s).sg_list = sges.as_ptr().cast_mut();
            (*s).num_sge = sges.len() as i32;
            match reg {
                None => s,
                Some(r) => {
                    let rw = self.reg.get();
                    (*rw).mr = r.mr.as_ptr();
                    (*rw).key = r.key;
                    &raw const (*rw).wr
                }
            }
        };
        // SAFETY: the QP is live; the chain is valid for the call (providers copy WRs and SGE
        // lists before they return); the entries are armed, so their owner outlives the
        // completions (type invariant); the memory and MR lifetimes are the caller's duty above.
        to_result(unsafe { raw::rnvme_ib_post_send(qp.as_raw(), first) })
    }
}

// SAFETY: the work requests are plain data with pointers into their owner (the entries, and the
// SGE list and MR of the post in progress); they are written only by `init` and `post`, whose
// callers guarantee one user at a time, whichever thread it is.
unsafe impl Send for SendWrs {}
// SAFETY: as for `Send`: a shared `&SendWrs` reads or writes nothing but through the unsafe
// `post`.
unsafe impl Sync for SendWrs {}

/// A scatter/gather element describing `len` bytes at bus address `addr` under `lkey`.
#[inline]
pub(in crate::rdma) fn sge(addr: u64, len: u32, lkey: u32) -> Sge {
    Sge {
        addr,
        length: len,
        lkey,
    }
}

/// Up to `N` scatter/gather elements of one SEND on one QP, filled in order. Only the elements
/// pushed are ever written or read: nothing is zeroed first (a SEND of a 4k read posts one of
/// its five).
///
/// There is no safe way to put a raw address or key in: the elements come from DMA mappings of
/// the QP's device (a [`DmaBuf`], or the `nvme` layer's request mappings through the unsafe
/// [`SgeList::push_raw`]), always with the lkey of the QP's PD, and the list is posted only on
/// the QP it was filled for.
///
/// # Invariants
///
/// The first `len` elements describe memory that was DMA-mapped for the device of `qp` when it
/// was pushed, under its PD's local DMA lkey; `qp` is null only while `len` is 0.
pub(crate) struct SgeList<const N: usize> {
    len: usize,
    qp: *mut raw::ib_qp,
    sges: core::mem::MaybeUninit<[Sge; N]>,
}

impl<const N: usize> SgeList<N> {
    /// An empty list.
    #[inline(always)]
    pub(crate) fn new() -> Self {
        Self {
            len: 0,
            qp: core::ptr::null_mut(),
            sges: core::mem::MaybeUninit::uninit(),
        }
    }

    /// Appends `len` bytes at bus address `addr` for a SEND on `qp`, under the lkey of its PD;
    /// fails (changing nothing) when the list is full or was filled for another QP.
    ///
    /// # Safety
    ///
    /// `len` bytes at `addr` are DMA-mapped for the device of `qp`, for the device to read, by a
    /// mapping the caller holds now. (That it stays mapped until the SEND completed is the rule
    /// of [`Qp::post_send`] and [`SendWrs::post`].)
    #[inline(always)]
    pub(crate) unsafe fn push_raw(&mut self, qp: &Qp, addr: u64, len: u32) -> Result {
        if self.len >= N || (self.len > 0 && self.qp != qp.as_raw()) {
            return Err(EINVAL);
        }
        // SAFETY: `self.len < N`, so the element is inside the array.
        unsafe {
            self.sges
                .as_mut_ptr()
                .cast::<Sge>()
                .add(self.len)
                .write(sge(addr, len, qp.local_dma_lkey()))
        };
        // INVARIANT: mapped for `qp`'s device (caller), under its PD's lkey; all elements are
        // for `qp` (checked above).
        self.qp = qp.as_raw();
        self.len += 1;
        Ok(())
    }

    /// Appends the whole of `buf` (mapped to the device) for a SEND on `qp`: `EINVAL` if the
    /// buffer is mapped for another device or the list cannot take it.
    pub(crate) fn push_buf(&mut self, qp: &Qp, buf: &DmaBuf) -> Result {
        if !buf.is_to_device_of(qp.device()) {
            return Err(EINVAL);
        }
        let len = u32::try_from(buf.len()).map_err(|_| EINVAL)?;
        // SAFETY: `buf` is mapped for `qp`'s device, for the device to read (checked above), and
        // borrowed for the call.
        unsafe { self.push_raw(qp, buf.dma_addr(), len) }
    }

    /// Whether the list may be posted on `qp`: it is empty, or was filled for `qp`.
    #[inline(always)]
    pub(super) fn is_for(&self, qp: &Qp) -> bool {
        self.len == 0 || self.qp == qp.as_raw()
    }

    /// The elements pushed so far.
    #[inline(always)]
    pub(crate) fn as_slice(&self) -> &[Sge] {
        // SAFETY: the first `len` elements were written by `push` (`len <= N`).
        unsafe { core::slice::from_raw_parts(self.sges.as_ptr().cast::<Sge>(), self.len) }
    }
}
