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

impl RegWr {
    /// The rkey the registration gives the MR (what the command's keyed SGL names).
    #[inline(always)]
    pub(crate) fn key(&self) -> u32 {
        self.key
    }
}

/// Scatter/gather elements of a request's SEND ([`SendWrs`]): the command and up to four
/// in-capsule data segments.
pub(crate) const SEND_SGES: usize = 5;

/// Most requests [`SendWrs::post_chain`] posts in one call (its copies of their SENDs are on the
/// stack: 40 bytes each).
pub(crate) const CHAIN_MAX: usize = 8;

/// The work requests of one blk-mq request: its SEND, the memory registration posted before it
/// and the SEND's scatter/gather list, kept in the request's PDU beside their completion entries,
/// as the C driver keeps `reg_wr` and `sge` in `struct nvme_rdma_request`. What never changes is
/// written once ([`SendWrs::init`]: the opcodes, flags, access rights, completion entries, the
/// SEND's SGE array); a post writes only the SGE count, the MR, its key and the REG's link,
/// where a work request built afresh would be zeroed (96 bytes) and filled at every I/O.
///
/// # Invariants
///
/// Once [`SendWrs::init`] ran: `send` is a signalled `IB_WR_SEND` completing into an armed entry
/// whose SGE array is that of `sges`, `reg` an `IB_WR_REG_MR` (local write, remote read and
/// write) completing into an armed entry; both entries belong to the object holding `self`,
/// which outlives every work request posted from it. Only [`SendWrs::post`],
/// [`SendWrs::post_chain`] and [`SendWrs::sges`]' user write the other fields, and none of them
/// writes `send`'s link: `send.next` is null from [`SendWrs::init`] on, for good. A provider may
/// read a work request's link after it published that request (rxe's post loop does, to find
/// the next one), when the request may have completed and its next use begun writing `send`'s
/// SGE count and `reg`: that late read meets a field nothing writes any more. (`reg`'s link is
/// written at each post, but it is read before the SEND it leads to is published, so before
/// the request can complete.)
#[repr(C)]
pub(crate) struct SendWrs {
    send: Opaque<raw::ib_send_wr>,
    reg: Opaque<raw::ib_reg_wr>,
    sges: Opaque<SgeList<SEND_SGES>>,
}

/// One request of a chain ([`SendWrs::post_chain`]): its work requests and its registration.
pub(crate) type ChainItem<'a> = (&'a SendWrs, Option<RegWr>);

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
            let l = (*this).sges.get();
            l.write(SgeList::new());
            let s = (*this).send.get();
            s.write(core::mem::zeroed());
            (*s).__bindgen_anon_1.wr_cqe = core::mem::ManuallyDrop::new(send.as_raw());
            (*s).opcode = raw::ib_wr_opcode_IB_WR_SEND;
            (*s).send_flags = raw::ib_send_flags_IB_SEND_SIGNALED;
            (*s).sg_list = (*l).sges.as_mut_ptr().cast();
            let r = (*this).reg.get();
            r.write(core::mem::zeroed());
            (*r).wr.__bindgen_anon_1.wr_cqe = core::mem::ManuallyDrop::new(reg.as_raw());
            (*r).wr.opcode = raw::ib_wr_opcode_IB_WR_REG_MR;
            (*r).access = (raw::ib_access_flags_IB_ACCESS_LOCAL_WRITE
                | raw::ib_access_flags_IB_ACCESS_REMOTE_READ
                | raw::ib_access_flags_IB_ACCESS_REMOTE_WRITE) as i32;
        }
    }

    /// The SEND's scatter/gather list, emptied, for the next post.
    ///
    /// # Safety
    ///
    /// `init` ran on `self`; no other thread uses `self`, and no other reference to the list
    /// lives, while the returned one does (the owner of the request, between its posts).
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn sges(&self) -> &mut SgeList<SEND_SGES> {
        // SAFETY: initialised by `init`; exclusive for the borrow (caller).
        let l = unsafe { &mut *self.sges.get() };
        l.len = 0;
        l
    }

    /// Points the registration at `mr` and `key`, linked to `next`; returns the REG's address.
    ///
    /// # Safety
    ///
    /// As for [`SendWrs::post`]: no other thread uses `self`.
    #[inline(always)]
    unsafe fn set_reg(&self, r: RegWr, next: *const raw::ib_send_wr) -> *const raw::ib_send_wr {
        let rw = self.reg.get();
        // SAFETY: `self` is not used elsewhere during the call (caller).
        unsafe {
            (*rw).mr = r.mr.as_ptr();
            (*rw).key = r.key;
            (*rw).wr.next = next.cast_mut();
            &raw const (*rw).wr
        }
    }

    /// Posts the registration `reg`, if any, followed by the signalled SEND of the list filled
    /// through [`SendWrs::sges`], in one chain.
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
    /// has one owner at a time, which posts its SEND once per use. The provider copies each work
    /// request before it publishes it, the SEND and its SGEs last, and the request's use cannot
    /// end before the SEND completed, which it cannot before it was published. After that, the
    /// provider may still read the SEND's link, which the next use could meet: it reads null,
    /// the value no post writes (the invariant of [`SendWrs`]).)
    #[inline(always)]
    pub(crate) unsafe fn post(&self, qp: &Qp, reg: Option<RegWr>) -> Result {
        // SAFETY: no other thread uses `self` (caller): the list is not being written.
        let sges = unsafe { &*self.sges.get() };
        if reg.is_some_and(|r| r.qp != qp.as_raw()) || !sges.is_for(qp) {
            return Err(EINVAL);
        }
        let s = self.send.get();
        // SAFETY: `self` is not used elsewhere during the call (caller), so writing through the
        // `Opaque` fields races with nothing. (`next` is not written: the type invariant.)
        let first: *const raw::ib_send_wr = unsafe {
            debug_assert!((*s).next.is_null());
            (*s).num_sge = sges.len as i32;
            match reg {
                None => s,
                Some(r) => self.set_reg(r, s),
            }
        };
        // SAFETY: the QP is live; the chain is valid for the call (providers copy WRs and SGE
        // lists before they return); the entries are armed, so their owner outlives the
        // completions (type invariant); the memory and MR lifetimes are the caller's duty above.
        to_result(unsafe { raw::rnvme_ib_post_send(qp.as_raw(), first) })
    }

    /// Posts the registrations and SENDs of several requests on `qp` in one call (one doorbell),
    /// each as [`SendWrs::post`] would, in order. Returns how many of `items`, from the first,
    /// were posted whole, and the error if not all were: the provider stops at the first work
    /// request it cannot take, and a request whose SEND was not taken counts as not posted
    /// (what it had registered stays its own, released when the caller releases the request's
    /// mappings, as after a failed [`SendWrs::post`]).
    ///
    /// The chain is linked through copies of the SENDs on this function's stack, never through
    /// the requests' own work requests: a provider may read a work request's link after it
    /// published that request (rxe does), and by then the request it belongs to may have
    /// completed and started its next use. A REG is read before its request's SEND, so its link
    /// (to the copy) is written in the request's own REG.
    ///
    /// # Safety
    ///
    /// For each item, as for [`SendWrs::post`]: `init` ran on it and no other thread uses it
    /// during the call; and no two items are the same.
    pub(crate) unsafe fn post_chain(qp: &Qp, items: &[ChainItem<'_>]) -> (usize, Result) {
        let n = items.len();
        if n == 0 {
            return (0, Ok(()));
        }
        if n > CHAIN_MAX {
            return (0, Err(EINVAL));
        }
        let mut sends = [const { core::mem::MaybeUninit::<raw::ib_send_wr>::uninit() }; CHAIN_MAX];
        let mut heads = [core::ptr::null::<raw::ib_send_wr>(); CHAIN_MAX];
        // Only the items up to the first that is not this QP's are posted.
        let mut len = 0;
        for (i, (w, reg)) in items.iter().enumerate() {
            // SAFETY: no other thread uses `w` (caller): the list is not being written.
            let sges = unsafe { &*w.sges.get() };
            if reg.is_some_and(|r| r.qp != qp.as_raw()) || !sges.is_for(qp) {
                break;
            }
            let copy = sends[i].as_mut_ptr();
            // SAFETY: `w.send` was initialised by `init` (caller); the copy is plain data on our
            // stack; the REG is written only by its owner, the caller, for the call.
            heads[i] = unsafe {
                // (Plain data: bindgen does not derive `Copy` for its union.)
                core::ptr::copy_nonoverlapping(w.send.get().cast_const(), copy, 1);
                (*copy).num_sge = sges.len as i32;
                (*copy).next = core::ptr::null_mut();
                match reg {
                    None => copy,
                    Some(r) => w.set_reg(*r, copy),
                }
            };
            if i > 0 {
                // SAFETY: copy `i - 1` was written in the previous round.
                unsafe { (*sends[i - 1].as_mut_ptr()).next = heads[i].cast_mut() };
            }
            len = i + 1;
        }
        if len == 0 {
            return (0, Err(EINVAL));
        }
        let mut bad = heads[0];
        let head = heads[0];
        // SAFETY: as for `post`, for each linked item; the copies live until we return, and
        // providers read a chain during the call only.
        let r = to_result(unsafe { raw::rnvme_ib_post_send_chain(qp.as_raw(), head, &mut bad) });
        let posted = match r {
            Ok(()) => len,
            // The item holding the first work request not taken, and those after it, were not
            // posted (`bad` stays at the head when the call failed before the provider ran).
            Err(_) => (0..len)
                .find(|&i| bad == heads[i] || bad == sends[i].as_ptr())
                // Not a work request of the chain (a provider breaking the verbs contract):
                // taken as all posted, so that nothing the device may use is released; the
                // requests then end by their timeouts.
                .unwrap_or(len),
        };
        match (r, posted < n) {
            (Err(e), _) => (posted, Err(e)),
            (Ok(()), true) => (posted, Err(EINVAL)),
            (Ok(()), false) => (posted, Ok(())),
        }
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
