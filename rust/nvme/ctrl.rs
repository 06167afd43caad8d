// SPDX-License-Identifier: GPL-2.0

//! nvme controllers owned by a transport: `struct nvme_ctrl` embedded in a Rust object, with the
//! `nvme_ctrl_ops` callbacks dispatched to a [`CtrlOps`] implementation.

// The connect path (issue 4) is the user of this file; until it lands only the build checks it.
#![allow(dead_code)]

use super::{
    mq::{MqOps, Pdu, Vtable},
    Ctrl, FabricsDevice, Options,
};
use crate::bindings::raw;
use core::{marker::PhantomData, ops::Deref};
use kernel::{
    error::to_result,
    prelude::*,
    sync::aref::{ARef, AlwaysRefCounted},
    types::Opaque,
};

/// Controller states (`enum nvme_ctrl_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Allocated, not yet connecting.
    New,
    /// Operational.
    Live,
    /// Being reset (error recovery or user reset).
    Resetting,
    /// (Re)connecting.
    Connecting,
    /// Being deleted (I/O still possible).
    Deleting,
    /// Being deleted, no I/O.
    DeletingNoIo,
    /// Dead.
    Dead,
}

impl State {
    fn raw(self) -> raw::nvme_ctrl_state {
        match self {
            State::New => raw::nvme_ctrl_state_NVME_CTRL_NEW,
            State::Live => raw::nvme_ctrl_state_NVME_CTRL_LIVE,
            State::Resetting => raw::nvme_ctrl_state_NVME_CTRL_RESETTING,
            State::Connecting => raw::nvme_ctrl_state_NVME_CTRL_CONNECTING,
            State::Deleting => raw::nvme_ctrl_state_NVME_CTRL_DELETING,
            State::DeletingNoIo => raw::nvme_ctrl_state_NVME_CTRL_DELETING_NOIO,
            State::Dead => raw::nvme_ctrl_state_NVME_CTRL_DEAD,
        }
    }

    fn from_raw(s: u32) -> Self {
        match s {
            raw::nvme_ctrl_state_NVME_CTRL_LIVE => State::Live,
            raw::nvme_ctrl_state_NVME_CTRL_RESETTING => State::Resetting,
            raw::nvme_ctrl_state_NVME_CTRL_CONNECTING => State::Connecting,
            raw::nvme_ctrl_state_NVME_CTRL_DELETING => State::Deleting,
            raw::nvme_ctrl_state_NVME_CTRL_DELETING_NOIO => State::DeletingNoIo,
            raw::nvme_ctrl_state_NVME_CTRL_DEAD => State::Dead,
            _ => State::New,
        }
    }
}

impl Ctrl {
    pub(crate) fn as_raw(&self) -> *mut raw::nvme_ctrl {
        self.0.get()
    }

    fn raw(&self) -> *mut raw::nvme_ctrl {
        self.as_raw()
    }

    /// The current state.
    pub(crate) fn state(&self) -> State {
        // SAFETY: the controller is initialised (type invariant); the state is read atomically.
        State::from_raw(unsafe { raw::rnvme_nvme_ctrl_state(self.raw()) } as u32)
    }

    /// Moves to `new` if the state machine allows it; returns whether it did.
    pub(crate) fn change_state(&self, new: State) -> bool {
        // SAFETY: the controller is initialised (type invariant).
        unsafe { raw::nvme_change_ctrl_state(self.raw(), new.raw()) }
    }

    /// Schedules deletion of the controller (`nvme_delete_ctrl`).
    pub(crate) fn delete(&self) -> Result {
        // SAFETY: the controller is initialised (type invariant).
        to_result(unsafe { raw::nvme_delete_ctrl(self.raw()) })
    }
}

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
    nctrl: Opaque<raw::nvme_ctrl>,
    #[pin]
    admin_tag_set: Opaque<raw::blk_mq_tag_set>,
    #[pin]
    tag_set: Opaque<raw::blk_mq_tag_set>,
    #[pin]
    data: T,
}

// SAFETY: the core serialises its use of `nvme_ctrl`; `T` is Send + Sync.
unsafe impl<T: CtrlOps> Send for Controller<T> {}
// SAFETY: see `Send`.
unsafe impl<T: CtrlOps> Sync for Controller<T> {}

// SAFETY: the reference count is the controller device's, as for `Ctrl`.
unsafe impl<T: CtrlOps> AlwaysRefCounted for Controller<T> {
    fn inc_ref(&self) {
        self.ctrl().inc_ref();
    }

    /// # Safety
    ///
    /// As for [`AlwaysRefCounted::dec_ref`]: the caller owns one reference and gives it up.
    unsafe fn dec_ref(obj: core::ptr::NonNull<Self>) {
        // SAFETY: same object and reference, seen as the core's `nvme_ctrl`.
        unsafe { Ctrl::dec_ref(obj.cast::<Ctrl>()) };
    }
}

impl<T: CtrlOps> Deref for Controller<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

struct VTable<T>(PhantomData<T>);

impl<T: CtrlOps> VTable<T> {
    const OPS: raw::nvme_ctrl_ops = raw::nvme_ctrl_ops {
        name: kernel::str::as_char_ptr_in_const_context(T::NAME),
        module: <crate::LocalModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr(),
        flags: raw::NVME_F_FABRICS | raw::NVME_F_METADATA_SUPPORTED,
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
                // The tag sets are initialised by `nvme_alloc_*_tag_set`.
                admin_tag_set: Opaque::uninit(),
                tag_set: Opaque::uninit(),
                data <- data,
            }),
            GFP_KERNEL,
        )?;
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
        let ops: &'static raw::nvme_ctrl_ops = &VTable::<T>::OPS;
        // SAFETY: `p` is valid and pinned; `ops` is static; `dev` is the fabrics misc device.
        to_result(unsafe { raw::nvme_init_ctrl(p, dev.as_raw(), ops, 0) })?;
        // INVARIANT: initialised; from now on the core's reference count owns the object and
        // `free_ctrl_cb` reclaims it.
        // SAFETY: leaking the pinned box keeps it pinned forever (until free_ctrl).
        let raw_box = KBox::into_raw(unsafe { Pin::into_inner_unchecked(this) });
        // SAFETY: `nvme_init_ctrl` left one reference, which we hand to the `ARef`.
        Ok(unsafe { ARef::from_raw(core::ptr::NonNull::new_unchecked(raw_box)) })
    }

    /// Converts into the core's view, keeping the reference.
    pub(crate) fn into_ctrl(this: ARef<Self>) -> ARef<Ctrl> {
        let p = ARef::into_raw(this);
        // SAFETY: `nctrl` is the first field of the repr(C) struct and `Ctrl` is
        // repr(transparent) over it; the reference moves from one `ARef` to the other.
        unsafe { ARef::from_raw(p.cast::<Ctrl>()) }
    }

    /// # Safety
    ///
    /// `p` must be the `nvme_ctrl` of a live `Controller<T>`, valid for `'a`.
    pub(crate) unsafe fn from_raw<'a>(p: *mut raw::nvme_ctrl) -> &'a Self {
        // SAFETY: forwarded to the caller.
        unsafe { controller::<T>(p) }
    }

    /// Allocates the admin tag set (and the admin and fabrics request queues) with `M`'s ops.
    /// Undone by [`Controller::remove_admin_tag_set`].
    pub(crate) fn alloc_admin_tag_set<M: MqOps<Ctrl = T>>(&self, extra: usize) -> Result {
        let ops: &'static raw::blk_mq_ops = &Vtable::<M, true>::OPS;
        // SAFETY: the controller is initialised; the tag set storage is pinned inside it and
        // outlives the set (removed before the controller is freed); `ops` is static.
        to_result(unsafe {
            raw::nvme_alloc_admin_tag_set(
                self.nctrl.get(),
                self.admin_tag_set.get(),
                ops,
                Pdu::<M::Data>::cmd_size(extra),
            )
        })
    }

    /// Frees the admin tag set and queues.
    pub(crate) fn remove_admin_tag_set(&self) {
        // SAFETY: the controller is initialised; the core checks that an admin tag set exists.
        unsafe { raw::nvme_remove_admin_tag_set(self.nctrl.get()) };
    }

    /// Allocates the I/O tag set with `nr_maps` queue maps (2, or 3 with poll queues).
    /// Undone by [`Controller::remove_io_tag_set`].
    pub(crate) fn alloc_io_tag_set<M: MqOps<Ctrl = T>>(
        &self,
        nr_maps: u32,
        extra: usize,
    ) -> Result {
        let ops: &'static raw::blk_mq_ops = &Vtable::<M, false>::OPS;
        // SAFETY: as for the admin tag set.
        to_result(unsafe {
            raw::nvme_alloc_io_tag_set(
                self.nctrl.get(),
                self.tag_set.get(),
                ops,
                nr_maps,
                Pdu::<M::Data>::cmd_size(extra),
            )
        })
    }

    /// Frees the I/O tag set.
    pub(crate) fn remove_io_tag_set(&self) {
        // SAFETY: the controller is initialised; the core checks that an I/O tag set exists.
        unsafe { raw::nvme_remove_io_tag_set(self.nctrl.get()) };
    }

    /// The core's view of the controller.
    pub(crate) fn ctrl(&self) -> &Ctrl {
        // SAFETY: `Ctrl` is repr(transparent) over the initialised `nvme_ctrl` (type invariant).
        unsafe { &*self.nctrl.get().cast::<Ctrl>() }
    }
}
