// SPDX-License-Identifier: GPL-2.0

//! nvme controllers owned by a transport: `struct nvme_ctrl` embedded in a Rust object, with the
//! `nvme_ctrl_ops` callbacks dispatched to a [`CtrlOps`] implementation.

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

    // The getters below read one field each through the raw pointer, never through a reference
    // to the whole `nvme_ctrl`: other threads write other fields (state, flags, work items,
    // locks) at any time, which a shared reference would assert immutable. Each field read is
    // written only as its SAFETY comment says, never concurrently with the read.

    /// The controller's instance number (`nvmeN`).
    pub(crate) fn instance(&self) -> i32 {
        // SAFETY: the controller is initialised (type invariant); `nvme_init_ctrl` set
        // `instance`, nothing writes it afterwards.
        unsafe { (*self.raw()).instance }
    }

    /// The controller ID the target assigned.
    pub(crate) fn cntlid(&self) -> u16 {
        // SAFETY: the controller is initialised (type invariant); the core writes `cntlid` on the
        // admin queue's setup (Fabrics Connect, identify), which runs before the I/O queues that
        // read it connect, and never concurrently with the transport's setup and teardown.
        unsafe { (*self.raw()).cntlid }
    }

    /// Submission queue size (0's based).
    pub(crate) fn sqsize(&self) -> u16 {
        // SAFETY: the controller is initialised (type invariant); `sqsize` is written only on the
        // setup path (creation, `nvme_init_ctrl_finish`, `set_sqsize`), before the I/O queues
        // that read it connect, and never concurrently with the transport's setup and teardown.
        unsafe { (*self.raw()).sqsize }
    }

    /// Sets the submission queue size (0's based).
    pub(crate) fn set_sqsize(&self, v: u16) {
        // SAFETY: written only by the setup path, which the core runs in one thread at a time.
        unsafe { (*self.raw()).sqsize = v };
    }

    /// Maximum outstanding commands the controller supports.
    pub(crate) fn maxcmd(&self) -> u16 {
        // SAFETY: the controller is initialised (type invariant); the core writes `maxcmd` in
        // `nvme_init_ctrl_finish` (identify), on the setup path that reads it.
        unsafe { (*self.raw()).maxcmd }
    }

    /// I/O queue command capsule size in 16-byte units.
    pub(crate) fn ioccsz(&self) -> u32 {
        // SAFETY: the controller is initialised (type invariant); the core writes `ioccsz` in
        // `nvme_init_ctrl_finish` (identify), before the I/O queues that read it are allocated.
        unsafe { (*self.raw()).ioccsz }
    }

    /// In-capsule data offset.
    pub(crate) fn icdoff(&self) -> u16 {
        // (The core writes `icdoff` in `nvme_init_ctrl_finish` while no I/O queue is live; I/O
        // that reads it runs only on live queues, connected again only afterwards.)
        // SAFETY: the controller is initialised (type invariant); no concurrent write (above).
        unsafe { (*self.raw()).icdoff }
    }

    /// SGL support bits (`NVME_CTRL_SGLS_*`).
    pub(crate) fn sgls(&self) -> u32 {
        // SAFETY: the controller is initialised (type invariant); the core writes `sgls` in
        // `nvme_init_ctrl_finish` (identify), on the setup path that reads it.
        unsafe { (*self.raw()).sgls }
    }

    /// Number of queues including the admin queue.
    pub(crate) fn queue_count(&self) -> u32 {
        // (`queue_count` is written only on the setup path: creation, `nvme_init_ctrl_finish`,
        // `set_queue_count`, never concurrently with the setup and teardown that read it.)
        // SAFETY: the controller is initialised (type invariant); no concurrent write (above).
        unsafe { (*self.raw()).queue_count }
    }

    /// Sets the number of queues including the admin queue.
    pub(crate) fn set_queue_count(&self, n: u32) {
        // SAFETY: written only by the setup path (see `set_sqsize`).
        unsafe { (*self.raw()).queue_count = n };
    }

    /// Sets the transfer limits derived from the RDMA device.
    pub(crate) fn set_limits(&self, max_segments: u32, max_hw_sectors: u32) {
        // SAFETY: written only by the setup path before the limits are used for queues.
        unsafe {
            (*self.raw()).max_segments = max_segments;
            (*self.raw()).max_hw_sectors = max_hw_sectors;
            (*self.raw()).max_integrity_segments = 0;
        }
    }

    /// Sets the NUMA node of the controller's memory.
    pub(crate) fn set_numa_node(&self, node: i32) {
        // SAFETY: written only by the setup path.
        unsafe { (*self.raw()).numa_node = node };
    }

    /// The connect options.
    pub(crate) fn opts(&self) -> &Options {
        // SAFETY: the controller is initialised (type invariant); `opts` is set at creation,
        // before `nvme_init_ctrl`, and never written afterwards.
        let opts = unsafe { (*self.raw()).opts };
        // SAFETY: the options stay valid until `free_ctrl`, which runs after the last reference
        // to the controller, so they outlive `self`; `Options` is a transparent wrapper of them.
        unsafe { &*opts.cast::<Options>() }
    }

    /// Completes an asynchronous event (the AER's completion).
    pub(crate) fn complete_async_event(&self, status_le: u16, result_le: u64) {
        // SAFETY: an all-zero result union is valid; the 64-bit member is set below.
        let mut r: raw::nvme_completion_nvme_result = unsafe { core::mem::zeroed() };
        r.u64_ = core::mem::ManuallyDrop::new(result_le);
        // SAFETY: the controller is initialised; `r` is valid for the call.
        unsafe { raw::nvme_complete_async_event(self.raw(), status_le, &mut r) };
    }
}

macro_rules! ctrl_calls {
    ($($(#[$m:meta])* $name:ident => $f:ident;)*) => {
        impl Ctrl {
            $(
                $(#[$m])*
                pub(crate) fn $name(&self) {
                    // SAFETY: the controller is initialised (type invariant); the core
                    // function only needs that.
                    unsafe { raw::$f(self.raw()) };
                }
            )*
        }
    };
}

ctrl_calls! {
    /// `nvme_start_ctrl`.
    start => nvme_start_ctrl;
    /// `nvme_stop_ctrl`.
    stop => nvme_stop_ctrl;
    /// `nvme_quiesce_admin_queue`.
    quiesce_admin => nvme_quiesce_admin_queue;
    /// `nvme_unquiesce_admin_queue`.
    unquiesce_admin => nvme_unquiesce_admin_queue;
    /// `nvme_quiesce_io_queues`.
    quiesce_io => nvme_quiesce_io_queues;
    /// `nvme_unquiesce_io_queues`.
    unquiesce_io => nvme_unquiesce_io_queues;
    /// `nvme_sync_io_queues`.
    sync_io => nvme_sync_io_queues;
    /// `nvme_cancel_tagset`: completes every in-flight I/O request as cancelled.
    cancel_io => nvme_cancel_tagset;
    /// `nvme_cancel_admin_tagset`.
    cancel_admin => nvme_cancel_admin_tagset;
    /// `nvme_stop_keep_alive`.
    stop_keep_alive => nvme_stop_keep_alive;
    /// `nvme_auth_stop`: cancels DH-HMAC-CHAP re-authentication and waits for it to finish.
    auth_stop => rnvme_nvme_auth_stop;
    /// `nvme_uninit_ctrl`.
    uninit => nvme_uninit_ctrl;
    /// `nvme_start_freeze`.
    start_freeze => nvme_start_freeze;
    /// `nvme_unfreeze`.
    unfreeze => nvme_unfreeze;
}

macro_rules! ctrl_calls_result {
    ($($(#[$m:meta])* $name:ident => $f:ident;)*) => {
        impl Ctrl {
            $(
                $(#[$m])*
                pub(crate) fn $name(&self) -> Result {
                    // SAFETY: the controller is initialised (type invariant).
                    to_result(unsafe { raw::$f(self.raw()) })
                }
            )*
        }
    };
}

ctrl_calls_result! {
    /// `nvme_add_ctrl`: makes the controller visible (character device).
    add => nvme_add_ctrl;
}

/// Maps an NVMe status (positive) to an errno, as the C transports do for setup failures.
fn nvme_result(r: i32) -> Result {
    if r > 0 {
        Err(EIO)
    } else {
        to_result(r)
    }
}

impl Ctrl {
    /// `nvme_init_ctrl_finish`: identify and the core's controller setup.
    pub(crate) fn init_finish(&self) -> Result {
        // SAFETY: the controller is initialised; the admin queue is live.
        nvme_result(unsafe { raw::nvme_init_ctrl_finish(self.raw(), false) })
    }

    /// `nvme_enable_ctrl`. An NVMe status (positive) is an error too.
    pub(crate) fn enable(&self) -> Result {
        // SAFETY: the controller is initialised; the admin queue is live.
        nvme_result(unsafe { raw::nvme_enable_ctrl(self.raw()) })
    }

    /// `nvmf_connect_admin_queue`: the Fabrics Connect command on the admin queue. A rejection by
    /// the target (a positive NVMe status) is an error.
    pub(crate) fn connect_admin_queue(&self) -> Result {
        // SAFETY: the controller is initialised and its admin queue allocated.
        nvme_result(unsafe { raw::nvmf_connect_admin_queue(self.raw()) })
    }

    /// `nvme_disable_ctrl`.
    pub(crate) fn disable(&self, shutdown: bool) {
        // SAFETY: the controller is initialised (type invariant).
        unsafe { raw::nvme_disable_ctrl(self.raw(), shutdown) };
    }

    /// `nvmf_connect_io_queue`.
    pub(crate) fn connect_io_queue(&self, qid: u16) -> Result {
        // SAFETY: the controller is initialised (type invariant).
        nvme_result(unsafe { raw::nvmf_connect_io_queue(self.raw(), qid) })
    }

    /// Negotiates the number of I/O queues (`nvme_set_queue_count`); returns how many the
    /// controller granted.
    pub(crate) fn negotiate_queue_count(&self, want: u32) -> Result<u32> {
        let mut n = want as i32;
        // SAFETY: the controller is initialised; `n` is valid for the call.
        nvme_result(unsafe { raw::nvme_set_queue_count(self.raw(), &mut n) })?;
        Ok(n.max(0) as u32)
    }

    /// Waits (bounded by the core's timeout) for queues to freeze; false on timeout.
    pub(crate) fn wait_freeze_timeout(&self) -> bool {
        // SAFETY: the controller is initialised (type invariant).
        unsafe { raw::nvme_wait_freeze_timeout(self.raw()) != 0 }
    }

    /// `blk_sync_queue` on the admin request queue.
    pub(crate) fn sync_admin(&self) {
        // SAFETY: the controller is initialised (type invariant); `admin_q` is written when the
        // admin tag set is allocated, on the setup path, never concurrently with its teardown
        // that calls this.
        let q = unsafe { (*self.raw()).admin_q };
        if !q.is_null() {
            // SAFETY: the admin queue lives as long as the admin tag set.
            unsafe { raw::blk_sync_queue(q) };
        }
    }

    /// Whether the connection should be retried after `status` (`nvmf_should_reconnect`).
    pub(crate) fn should_reconnect(&self, status: i32) -> bool {
        // SAFETY: the controller is initialised (type invariant).
        unsafe { raw::nvmf_should_reconnect(self.raw(), status) }
    }

    /// Counts a reconnect attempt; returns the count.
    pub(crate) fn inc_reconnects(&self) -> i32 {
        // SAFETY: only the transport's (serialised) reconnect path writes it.
        unsafe {
            (*self.raw()).nr_reconnects += 1;
            (*self.raw()).nr_reconnects
        }
    }

    /// Resets the reconnect count after success.
    pub(crate) fn reset_reconnects(&self) {
        // SAFETY: as for `inc_reconnects`.
        unsafe { (*self.raw()).nr_reconnects = 0 };
    }

    /// Waits for the core's asynchronous event work.
    pub(crate) fn flush_async_event_work(&self) {
        // SAFETY: the work item is part of the initialised controller.
        unsafe { raw::flush_work(&raw mut (*self.raw()).async_event_work) };
    }

    /// Whether a new connect request `opts` targets the same association as this controller.
    pub(crate) fn matches(&self, opts: &Options) -> bool {
        // SAFETY: both are valid for the call.
        unsafe { raw::nvmf_ip_options_match(self.raw(), opts.as_raw()) }
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
    /// Error recovery (queued by [`Controller::queue_err_work`]).
    fn err_work(ctrl: &Controller<Self>);
    /// A reconnect attempt (queued by [`Controller::queue_reconnect`]).
    fn reconnect_work(ctrl: &Controller<Self>);
    /// The SEND of an asynchronous event request completed.
    fn aen_send_done(ctrl: &Controller<Self>, wc: &crate::rdma::qp::Wc);
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
    err_work: Opaque<raw::work_struct>,
    #[pin]
    reconnect_work: Opaque<raw::delayed_work>,
    /// Completion entry of the asynchronous event request's SEND.
    aen_cqe: crate::rdma::qp::Cqe,
    /// Whether `free_ctrl` frees the options (set when creation succeeded).
    owns_opts: core::sync::atomic::AtomicBool,
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
/// Called by ib_core for a completion of a controller's `aen_cqe`.
unsafe extern "C" fn aen_done_cb<T: CtrlOps>(_cq: *mut raw::ib_cq, wc: *mut raw::ib_wc) {
    let off = core::mem::offset_of!(Controller<T>, aen_cqe);
    // SAFETY: the entry is the `aen_cqe` of a live controller (the admin queue that posted it is
    // drained before the controller goes away); `wc` is valid during the callback.
    unsafe {
        let cqe = *(*wc).__bindgen_anon_1.wr_cqe;
        let c = &*cqe.cast::<u8>().sub(off).cast::<Controller<T>>();
        T::aen_send_done(c, &*wc.cast::<crate::rdma::qp::Wc>());
    }
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
                // The tag sets are initialised by `nvme_alloc_*_tag_set`, and not read before:
                // see `find_rq` for the order that guarantees it.
                admin_tag_set: Opaque::uninit(),
                tag_set: Opaque::uninit(),
                // SAFETY: a zeroed work item is initialised by `rnvme_init_*work` below.
                err_work <- Opaque::ffi_init(|p: *mut raw::work_struct| unsafe {
                    raw::rnvme_init_work(p, Some(err_work_cb::<T>))
                }),
                // SAFETY: as above.
                reconnect_work <- Opaque::ffi_init(|p: *mut raw::delayed_work| unsafe {
                    raw::rnvme_init_delayed_work(p, Some(reconnect_work_cb::<T>))
                }),
                aen_cqe: crate::rdma::qp::Cqe::new(),
                owns_opts: core::sync::atomic::AtomicBool::new(false),
                data <- data,
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: no work request uses the entry yet; the callback finds the controller from
        // the entry's offset.
        unsafe { this.aen_cqe.set_done(Some(aen_done_cb::<T>)) };
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
    pub(crate) fn aen_cqe(&self) -> &crate::rdma::qp::Cqe {
        &self.aen_cqe
    }

    /// Hands the options to the controller: from now on `free_ctrl` frees them. Call once
    /// creation succeeded (the fabrics core frees them when `create_ctrl` fails).
    pub(crate) fn take_opts(&self) {
        self.owns_opts
            .store(true, core::sync::atomic::Ordering::Release);
    }

    /// Looks up the in-flight request of `command_id` on queue `qid` (0: admin); `None` if the
    /// tag is out of range, not started, or the command's generation does not match.
    ///
    /// Called for the responses a queue receives. The transport allocates each tag set before any
    /// queue that completes into it can receive (the admin tag set before queue 0 connects, the
    /// I/O tag set before the I/O queues), and removes it only after those queues are drained.
    pub(crate) fn find_rq<M: MqOps<Ctrl = T>>(
        &self,
        qid: u16,
        command_id: u16,
    ) -> Option<&super::mq::Request<M>> {
        let (set, idx) = if qid == 0 {
            (self.admin_tag_set.get(), 0)
        } else {
            (self.tag_set.get(), u32::from(qid) - 1)
        };
        // SAFETY: a queue receives only while the tag set it completes into is allocated (see
        // above), so `set` is initialised; the allocation happened before the queue connected,
        // which orders it before this receive; `nr_hw_queues` bounds `idx`.
        let rq = unsafe {
            if idx >= (*set).nr_hw_queues || (*set).tags.is_null() {
                return None;
            }
            let tags = raw::rnvme_tagset_tags(set, idx);
            if tags.is_null() {
                return None;
            }
            raw::rnvme_nvme_find_rq(tags, command_id)
        };
        if rq.is_null() {
            None
        } else {
            // SAFETY: a request of our tag set `M` (the caller names the ops of its tag sets),
            // valid while in flight.
            Some(unsafe { super::mq::Request::from_raw_pub(rq) })
        }
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

    /// The number of hardware queues of the I/O tag set.
    pub(crate) fn io_nr_hw_queues(&self) -> u32 {
        // SAFETY: read after `alloc_io_tag_set` succeeded (the transport tracks that).
        unsafe { (*self.tag_set.get()).nr_hw_queues }
    }

    /// Resizes the I/O tag set to `nr` hardware queues (`blk_mq_update_nr_hw_queues`): a
    /// reconnect may get a different queue count. The I/O queues must be frozen.
    pub(crate) fn update_io_nr_hw_queues(&self, nr: u32) {
        let nr = i32::try_from(nr).unwrap_or(i32::MAX);
        // SAFETY: called after `alloc_io_tag_set` succeeded and before `remove_io_tag_set` (the
        // transport tracks that); blk-mq serialises the update against the set's queues.
        unsafe { raw::blk_mq_update_nr_hw_queues(self.tag_set.get(), nr) };
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
