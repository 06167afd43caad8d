// SPDX-License-Identifier: GPL-2.0

//! nvme controllers owned by a transport: `struct nvme_ctrl` embedded in a Rust object, with the
//! `nvme_ctrl_ops` callbacks dispatched to a [`CtrlOps`] implementation.
//!
//! C header: [`drivers/nvme/host/nvme.h`](srctree/drivers/nvme/host/nvme.h)

use super::{fabrics::FabricsDevice, nvme_ctrl::NvmeCtrl, options::Options};
use crate::bindings::raw;
use crate::rdma::qp::{Cqe, CqeDone, HasCqe, Wc};
use core::sync::atomic::AtomicBool;
use core::{marker::PhantomData, ops::Deref};
use kernel::{
    error::to_result,
    prelude::*,
    sync::aref::{ARef, AlwaysRefCounted},
    types::Opaque,
};

/// Transport callbacks of a controller (`struct nvme_ctrl_ops` plus the reset work).
pub(crate) trait CtrlOps: Sized + Send + Sync + 'static {
    /// `ops->name` and the transport name shown in sysfs.
    const NAME: &'static CStr;

    /// Submit the asynchronous event request.
    fn submit_async_event(ctrl: &Controller<Self>);
    /// Tear the controller down for deletion (`delete_ctrl`).
    fn delete_ctrl(ctrl: &Controller<Self>);
    /// Stop transport work before the core stops the controller (`stop_ctrl`).
    fn stop_ctrl(ctrl: &Controller<Self>);
    /// Reset the controller (`ctrl->reset_work`, queued by the core).
    fn reset_work(ctrl: &Controller<Self>);
    /// Error recovery (queued by [`Controller::queue_err_work`]).
    fn err_work(ctrl: &Controller<Self>);
    /// A reconnect attempt (queued by [`Controller::queue_reconnect`]).
    fn reconnect_work(ctrl: &Controller<Self>);
    /// The SEND of an asynchronous event request completed.
    fn aen_send_done(ctrl: &Controller<Self>, wc: &Wc);
}

/// A controller: the core's `struct nvme_ctrl` and the transport's state `T`.
///
/// # Invariants
///
/// Once [`Controller::new`] returned, `nctrl` is initialised with `nvme_init_ctrl` and the object
/// is owned by the core's reference count on the controller: it is freed by `free_ctrl`.
#[pin_data]
#[repr(C)]
pub(crate) struct Controller<T: CtrlOps> {
    #[pin]
    pub(super) nctrl: Opaque<raw::nvme_ctrl>,
    #[pin]
    pub(super) admin_tag_set: Opaque<raw::blk_mq_tag_set>,
    #[pin]
    pub(super) tag_set: Opaque<raw::blk_mq_tag_set>,
    /// The admin tag set is allocated (set on the setup path that allocates and frees it).
    pub(super) admin_set: AtomicBool,
    /// The I/O tag set is allocated.
    pub(super) io_set: AtomicBool,
    /// `blk_mq_update_nr_hw_queues` is (about to be) reallocating the I/O tag set's `tags` and
    /// freeing some hardware queues' tags: the receive and abort paths look nothing up in it
    /// meanwhile ([`Controller::update_io_nr_hw_queues`]).
    pub(super) io_resizing: AtomicBool,
    /// Held while a tag set is allocated or removed, and while [`Controller::abort_requests`]
    /// walks one: that walk may come from any context (an rdma_cm event), not only the setup
    /// path that allocates and removes the sets.
    #[pin]
    pub(super) sets: kernel::sync::Mutex<()>,
    #[pin]
    err_work: Opaque<raw::work_struct>,
    #[pin]
    reconnect_work: Opaque<raw::delayed_work>,
    /// Completion entry of the asynchronous event request's SEND.
    aen_cqe: Cqe,
    /// Whether `free_ctrl` frees the options (set when creation succeeded).
    owns_opts: core::sync::atomic::AtomicBool,
    #[pin]
    data: T,
}

/// The controller ops' flags. Never `NVME_F_BLOCKING`: the tag sets must stay non-blocking, as
/// `queue_rq` runs inside an RCU read-side section then (see `mq.rs`, `queue_rq_cb`).
const OPS_FLAGS: u32 = raw::NVME_F_FABRICS | raw::NVME_F_METADATA_SUPPORTED;
const _: () = assert!(OPS_FLAGS & raw::NVME_F_BLOCKING == 0);

// SAFETY: the core serialises its use of `nvme_ctrl`; `T` is Send + Sync.
unsafe impl<T: CtrlOps> Send for Controller<T> {}
// SAFETY: see `Send`.
unsafe impl<T: CtrlOps> Sync for Controller<T> {}

// SAFETY: the reference count is the controller device's, as for `NvmeCtrl`.
unsafe impl<T: CtrlOps> AlwaysRefCounted for Controller<T> {
    fn inc_ref(&self) {
        self.nvme().inc_ref();
    }

    /// # Safety
    ///
    /// As for [`AlwaysRefCounted::dec_ref`]: the caller owns one reference and gives it up.
    unsafe fn dec_ref(obj: core::ptr::NonNull<Self>) {
        // SAFETY: same object and reference, seen as the core's `nvme_ctrl`.
        unsafe { NvmeCtrl::dec_ref(obj.cast::<NvmeCtrl>()) };
    }
}

/// The controller's device (`nvmeN`, class `nvme`), for the `dev_*` message macros: messages
/// read "nvme nvme0: ...", as the C transports' do.
impl<T: CtrlOps> AsRef<kernel::device::Device> for Controller<T> {
    fn as_ref(&self) -> &kernel::device::Device {
        // SAFETY: the controller is initialised (type invariant): `nvme_init_ctrl` pointed
        // `device` at the controller's own `ctrl_device` and nothing writes it afterwards; that
        // device lives until `free_ctrl`, after the last reference to `self`.
        unsafe { kernel::device::Device::from_raw((*self.nctrl.get()).device) }
    }
}

// SAFETY: the offset is the compiler's, of the `Cqe` field `aen_cqe`.
unsafe impl<T: CtrlOps> HasCqe<0> for Controller<T> {
    const OFFSET: usize = core::mem::offset_of!(Self, aen_cqe);
}

/// The completion of the asynchronous event request's SEND.
impl<T: CtrlOps> CqeDone<0> for Controller<T> {
    fn done(this: &Self, wc: &Wc) {
        T::aen_send_done(this, wc);
    }
}

impl<T: CtrlOps> Deref for Controller<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

struct CtrlVtable<T>(PhantomData<T>);

impl<T: CtrlOps> CtrlVtable<T> {
    const OPS: raw::nvme_ctrl_ops = raw::nvme_ctrl_ops {
        name: kernel::str::as_char_ptr_in_const_context(T::NAME),
        module: crate::bindings::compat::THIS_MODULE,
        flags: OPS_FLAGS,
        dev_attr_groups: core::ptr::null_mut(),
        reg_read32: Some(raw::nvmf_reg_read32),
        reg_write32: Some(raw::nvmf_reg_write32),
        reg_read64: Some(raw::nvmf_reg_read64),
        free_ctrl: Some(free_ctrl_cb::<T>),
        submit_async_event: Some(submit_async_event_cb::<T>),
        subsystem_reset: Some(raw::nvmf_subsystem_reset),
        delete_ctrl: Some(delete_ctrl_cb::<T>),
        stop_ctrl: Some(stop_ctrl_cb::<T>),
        get_address: Some(raw::nvmf_get_address),
        print_device_info: None,
        supports_pci_p2pdma: None,
        get_virt_boundary: Some(get_virt_boundary_cb),
    };
}

/// # Safety
///
/// `p` must be the `nvme_ctrl` of a live `Controller<T>`.
unsafe fn controller<'a, T: CtrlOps>(p: *mut raw::nvme_ctrl) -> &'a Controller<T> {
    // SAFETY: `nctrl` is the first field of the repr(C) `Controller<T>` (caller's guarantee that
    // it is one), so the pointers coincide.
    unsafe { &*p.cast::<Controller<T>>() }
}

/// # Safety
///
/// Called by the core with the controller of a `Controller<T>` whose last reference went away.
unsafe extern "C" fn free_ctrl_cb<T: CtrlOps>(p: *mut raw::nvme_ctrl) {
    // SAFETY: `p` is one of our controllers; `owns_opts` is only set once creation succeeded,
    // after which the fabrics core no longer frees the options.
    unsafe {
        let c = controller::<T>(p);
        if c.owns_opts.load(core::sync::atomic::Ordering::Acquire) {
            raw::nvmf_free_options((*p).opts);
        }
    }
    // SAFETY: the object was leaked by `Controller::new` as a pinned box and this is the final
    // release (type invariant), so ownership returns to us exactly once.
    drop(unsafe { Pin::new_unchecked(KBox::from_raw(p.cast::<Controller<T>>())) });
}

/// # Safety
///
/// Called by the core with a live controller.
unsafe extern "C" fn submit_async_event_cb<T: CtrlOps>(p: *mut raw::nvme_ctrl) {
    // SAFETY: the core passes a live controller of ours.
    T::submit_async_event(unsafe { controller::<T>(p) });
}

/// # Safety
///
/// Called by the core with a live controller.
unsafe extern "C" fn delete_ctrl_cb<T: CtrlOps>(p: *mut raw::nvme_ctrl) {
    // SAFETY: the core passes a live controller of ours.
    T::delete_ctrl(unsafe { controller::<T>(p) });
}

/// # Safety
///
/// Called by the core with a live controller.
unsafe extern "C" fn stop_ctrl_cb<T: CtrlOps>(p: *mut raw::nvme_ctrl) {
    // SAFETY: the core passes a live controller of ours.
    T::stop_ctrl(unsafe { controller::<T>(p) });
}

/// # Safety
///
/// Called by the core with the `reset_work` of a live controller of ours.
unsafe extern "C" fn reset_work_cb<T: CtrlOps>(w: *mut raw::work_struct) {
    let off = core::mem::offset_of!(raw::nvme_ctrl, reset_work);
    // SAFETY: `w` is the `reset_work` field of an `nvme_ctrl` (caller), at `off`.
    let p = unsafe { w.cast::<u8>().sub(off).cast::<raw::nvme_ctrl>() };
    // SAFETY: the core holds a controller reference while the reset work runs.
    T::reset_work(unsafe { controller::<T>(p) });
}

/// # Safety
///
/// Called by the workqueue with the `err_work` of a live controller of ours.
unsafe extern "C" fn err_work_cb<T: CtrlOps>(w: *mut raw::work_struct) {
    let off = core::mem::offset_of!(Controller<T>, err_work);
    // SAFETY: `w` is the `err_work` field of a `Controller<T>`, which outlives the work (the
    // transport flushes it in `stop_ctrl`, before the controller can be freed).
    T::err_work(unsafe { &*w.cast::<u8>().sub(off).cast::<Controller<T>>() });
}

/// # Safety
///
/// Called by the workqueue with the work of the `reconnect_work` of a live controller of ours.
unsafe extern "C" fn reconnect_work_cb<T: CtrlOps>(w: *mut raw::work_struct) {
    // `work` is the first field of `struct delayed_work`.
    let off = core::mem::offset_of!(Controller<T>, reconnect_work);
    // SAFETY: as for `err_work_cb` (the transport cancels it in `stop_ctrl`).
    T::reconnect_work(unsafe { &*w.cast::<u8>().sub(off).cast::<Controller<T>>() });
}

/// # Safety
///
/// Any controller pointer (unused).
unsafe extern "C" fn get_virt_boundary_cb(_p: *mut raw::nvme_ctrl, _admin: bool) -> usize {
    // Fast-registration MRs are page lists of NVME_CTRL_PAGE_SIZE pages (as the C driver).
    (raw::NVME_CTRL_PAGE_SIZE - 1) as usize
}

impl<T: CtrlOps> Controller<T> {
    /// Allocates a controller for a connect request and initialises it with the core
    /// (`nvme_init_ctrl`). `queue_count` includes the admin queue.
    pub(crate) fn create(
        dev: &FabricsDevice,
        opts: &Options,
        queue_count: u32,
        sqsize: u16,
        data: impl PinInit<T, Error>,
    ) -> Result<ARef<Self>> {
        let this = KBox::pin_init(
            try_pin_init!(Self {
                // SAFETY: all-zero is the state `nvme_init_ctrl` expects for the fields it
                // does not set itself (as the C driver's kzalloc).
                nctrl <- Opaque::ffi_init(|p: *mut raw::nvme_ctrl| unsafe { p.write_bytes(0, 1) }),
                // Zeroed until `nvme_alloc_*_tag_set` initialises them (and `tags` is null again
                // once freed): a query before or after finds no hardware queue, no request.
                admin_tag_set: Opaque::zeroed(),
                tag_set: Opaque::zeroed(),
                admin_set: AtomicBool::new(false),
                io_set: AtomicBool::new(false),
                io_resizing: AtomicBool::new(false),
                sets <- kernel::new_mutex!(()),
                // SAFETY: a zeroed work item is initialised by `rnvme_init_*work` below.
                err_work <- Opaque::ffi_init(|p: *mut raw::work_struct| unsafe {
                    raw::rnvme_init_work(p, Some(err_work_cb::<T>))
                }),
                // SAFETY: as above.
                reconnect_work <- Opaque::ffi_init(|p: *mut raw::delayed_work| unsafe {
                    raw::rnvme_init_delayed_work(p, Some(reconnect_work_cb::<T>))
                }),
                aen_cqe: Cqe::new(),
                owns_opts: core::sync::atomic::AtomicBool::new(false),
                data <- data,
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: the entry is the `0` entry of this controller, pinned in place and freed only by
        // `free_ctrl`, after the last reference, when the admin queue that posts it is long
        // destroyed (the controller owns its queues); nothing is posted yet.
        unsafe { this.aen_cqe.arm::<Self, 0>() };
        let p = this.nctrl.get();
        // SAFETY: `p` is a zeroed, pinned nvme_ctrl not yet shared with anybody.
        unsafe {
            (*p).opts = opts.as_raw();
            (*p).queue_count = queue_count;
            (*p).sqsize = sqsize;
            (*p).kato = (*opts.as_raw()).kato;
            raw::rnvme_nvme_init_reset_work(p, Some(reset_work_cb::<T>));
        }
        // The ops table must outlive every controller: a promoted constant is a static.
        let ops: &'static raw::nvme_ctrl_ops = &CtrlVtable::<T>::OPS;
        // SAFETY: `p` is valid and pinned; `ops` is static; `dev` is the fabrics misc device.
        to_result(unsafe { raw::nvme_init_ctrl(p, dev.as_raw(), ops, 0) })?;
        // INVARIANT: initialised; from now on the core's reference count owns the object and
        // `free_ctrl_cb` reclaims it.
        // SAFETY: leaking the pinned box keeps it pinned forever (until free_ctrl).
        let raw_box = KBox::into_raw(unsafe { Pin::into_inner_unchecked(this) });
        // SAFETY: `nvme_init_ctrl` left one reference, which we hand to the `ARef`.
        Ok(unsafe { ARef::from_raw(core::ptr::NonNull::new_unchecked(raw_box)) })
    }

    /// Queues the error recovery work on the core's reset workqueue; false if already queued.
    pub(crate) fn queue_err_work(&self) -> bool {
        // SAFETY: the work item was initialised at creation and lives as long as `self`.
        unsafe { raw::rnvme_queue_reset_work(self.err_work.get()) }
    }

    /// Waits for a queued or running error recovery to finish.
    pub(crate) fn flush_err_work(&self) {
        // SAFETY: as for `queue_err_work`.
        unsafe { raw::flush_work(self.err_work.get()) };
    }

    /// Queues a reconnect attempt in `delay_secs` seconds on the core's workqueue.
    pub(crate) fn queue_reconnect(&self, delay_secs: u32) -> bool {
        // SAFETY: as for `queue_err_work`.
        unsafe {
            raw::rnvme_queue_nvme_delayed_work(self.reconnect_work.get(), delay_secs as usize)
        }
    }

    /// Cancels a pending reconnect attempt and waits for a running one.
    pub(crate) fn cancel_reconnect_sync(&self) {
        // SAFETY: as for `queue_err_work`.
        unsafe { raw::cancel_delayed_work_sync(self.reconnect_work.get()) };
    }

    /// Completion entry of the asynchronous event request's SEND.
    pub(crate) fn aen_cqe(&self) -> &Cqe {
        &self.aen_cqe
    }

    /// Hands the options to the controller: from now on `free_ctrl` frees them. Call once
    /// creation succeeded (the fabrics core frees them when `create_ctrl` fails).
    pub(crate) fn take_opts(&self) {
        self.owns_opts
            .store(true, core::sync::atomic::Ordering::Release);
    }

    /// Converts into the core's view, keeping the reference.
    pub(crate) fn into_ctrl(this: ARef<Self>) -> ARef<NvmeCtrl> {
        let p = ARef::into_raw(this);
        // SAFETY: `nctrl` is the first field of the repr(C) struct and `NvmeCtrl` is
        // repr(transparent) over it; the reference moves from one `ARef` to the other.
        unsafe { ARef::from_raw(p.cast::<NvmeCtrl>()) }
    }

    /// # Safety
    ///
    /// `p` must be the `nvme_ctrl` of a live `Controller<T>`, valid for `'a`.
    pub(crate) unsafe fn from_raw<'a>(p: *mut raw::nvme_ctrl) -> &'a Self {
        // SAFETY: forwarded to the caller.
        unsafe { controller::<T>(p) }
    }

    /// The core's view of the controller.
    pub(crate) fn nvme(&self) -> &NvmeCtrl {
        // SAFETY: `NvmeCtrl` is repr(transparent) over the initialised `nvme_ctrl` (type
        // invariant).
        unsafe { &*self.nctrl.get().cast::<NvmeCtrl>() }
    }
}
