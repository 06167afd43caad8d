// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over the nvme host core and the NVMe over Fabrics library.
//!
//! One of the two layers (with `rdma`) allowed to contain `unsafe`.

pub(crate) mod ctrl;
pub(crate) mod mq;

use crate::bindings::raw;
use core::marker::PhantomData;
use kernel::{
    error::to_result,
    prelude::*,
    str::CStr,
    sync::aref::{ARef, AlwaysRefCounted},
    types::Opaque,
};

/// Fabrics connect options (`NVMF_OPT_*`), as bits of [`Options::mask`].
pub(crate) mod opt {
    use crate::bindings::raw;

    /// `trsvcid=`: transport service id (port).
    pub(crate) const TRSVCID: u32 = raw::NVMF_OPT_TRSVCID;
    /// `traddr=`: transport address.
    pub(crate) const TRADDR: u32 = raw::NVMF_OPT_TRADDR;
    /// `reconnect_delay=`.
    pub(crate) const RECONNECT_DELAY: u32 = raw::NVMF_OPT_RECONNECT_DELAY;
    /// `host_traddr=`: source address.
    pub(crate) const HOST_TRADDR: u32 = raw::NVMF_OPT_HOST_TRADDR;
    /// `ctrl_loss_tmo=`.
    pub(crate) const CTRL_LOSS_TMO: u32 = raw::NVMF_OPT_CTRL_LOSS_TMO;
    /// `nr_write_queues=`.
    pub(crate) const NR_WRITE_QUEUES: u32 = raw::NVMF_OPT_NR_WRITE_QUEUES;
    /// `nr_poll_queues=`.
    pub(crate) const NR_POLL_QUEUES: u32 = raw::NVMF_OPT_NR_POLL_QUEUES;
    /// `tos=`: type of service.
    pub(crate) const TOS: u32 = raw::NVMF_OPT_TOS;
}

/// The options of a connect request (`struct nvmf_ctrl_options`), parsed by the fabrics core.
///
/// # Invariants
///
/// `self.0` is a valid `nvmf_ctrl_options` owned by the fabrics core for the duration of the
/// borrow; its string fields are NUL-terminated or null.
#[repr(transparent)]
pub(crate) struct Options(Opaque<raw::nvmf_ctrl_options>);

impl Options {
    fn raw(&self) -> &raw::nvmf_ctrl_options {
        // SAFETY: by the type invariant the options are valid for the borrow, and nothing else
        // mutates them meanwhile (the fabrics core hands them to `create_ctrl` and, if that
        // fails, frees them afterwards; on success the transport owns them).
        unsafe { &*self.0.get() }
    }

    /// # Safety
    ///
    /// `s` must be null or a NUL-terminated string living as long as `self`.
    unsafe fn opt_str(&self, s: *const kernel::ffi::c_char) -> Option<&CStr> {
        if s.is_null() {
            None
        } else {
            // SAFETY: non-null, and by the caller's guarantee NUL-terminated and alive.
            Some(unsafe { CStr::from_char_ptr(s) })
        }
    }

    pub(crate) fn as_raw(&self) -> *mut raw::nvmf_ctrl_options {
        self.0.get()
    }

    /// Bit mask of the options given (`opt::*`).
    pub(crate) fn mask(&self) -> u32 {
        self.raw().mask
    }

    /// `traddr`: required by the transport, so always present.
    pub(crate) fn traddr(&self) -> Option<&CStr> {
        // SAFETY: by the type invariant string fields are NUL-terminated or null.
        unsafe { self.opt_str(self.raw().traddr) }
    }

    /// `trsvcid`, if given.
    pub(crate) fn trsvcid(&self) -> Option<&CStr> {
        // SAFETY: by the type invariant string fields are NUL-terminated or null.
        unsafe { self.opt_str(self.raw().trsvcid) }
    }

    /// `host_traddr`, if given.
    pub(crate) fn host_traddr(&self) -> Option<&CStr> {
        // SAFETY: by the type invariant string fields are NUL-terminated or null.
        unsafe { self.opt_str(self.raw().host_traddr) }
    }

    /// Writes the default `trsvcid` into the options if none was given (as the C driver does:
    /// the core reads it back for sysfs `address` and duplicate matching).
    pub(crate) fn default_trsvcid(&self, dflt: &CStr) -> Result {
        let mut err = 0;
        // SAFETY: during `create_ctrl` the transport may edit the options it was handed;
        // `dflt` is NUL-terminated; the duplicate is freed with the options.
        unsafe {
            raw::rnvme_ctrl_set_opts_trsvcid_default(self.as_raw(), dflt.as_char_ptr(), &mut err)
        };
        to_result(err)
    }

    /// The number of I/O queues asked for (`nvmf_nr_io_queues`: default, write and poll).
    pub(crate) fn nr_io_queues(&self) -> u32 {
        // SAFETY: the options are valid (type invariant).
        unsafe { raw::rnvme_nvmf_nr_io_queues(self.as_raw()) }
    }

    /// Distributes `nr` I/O queues over the default, read and poll maps (`nvmf_set_io_queues`).
    pub(crate) fn set_io_queues(&self, nr: u32) -> [u32; 3] {
        let mut q = [0u32; 3];
        // SAFETY: the options are valid; `q` has HCTX_MAX_TYPES entries.
        unsafe { raw::nvmf_set_io_queues(self.as_raw(), nr, q.as_mut_ptr()) };
        q
    }

    /// `queue_size=`.
    pub(crate) fn queue_size(&self) -> u32 {
        self.raw().queue_size as u32
    }

    /// `nr_io_queues=` + `nr_write_queues=` + `nr_poll_queues=`.
    pub(crate) fn total_queues(&self) -> u32 {
        let r = self.raw();
        r.nr_io_queues + r.nr_write_queues + r.nr_poll_queues
    }

    /// `nr_poll_queues=`.
    pub(crate) fn nr_poll_queues(&self) -> u32 {
        self.raw().nr_poll_queues
    }

    /// `tos=` (negative: not set).
    pub(crate) fn tos(&self) -> i32 {
        self.raw().tos
    }

    /// `duplicate_connect`.
    pub(crate) fn duplicate_connect(&self) -> bool {
        self.raw().duplicate_connect
    }

    /// `reconnect_delay=` in seconds.
    pub(crate) fn reconnect_delay(&self) -> u32 {
        self.raw().reconnect_delay
    }

    /// `max_reconnects` derived from `ctrl_loss_tmo` (-1: forever).
    pub(crate) fn max_reconnects(&self) -> i32 {
        self.raw().max_reconnects
    }

    /// The subsystem NQN (`nqn=`, always present).
    pub(crate) fn subsysnqn(&self) -> Option<&CStr> {
        // SAFETY: by the type invariant string fields are NUL-terminated or null.
        unsafe { self.opt_str(self.raw().subsysnqn) }
    }
}

/// The fabrics core's device (`/dev/nvme-fabrics`), parent of the controllers it creates.
///
/// # Invariants
///
/// `self.0` is the live misc device the fabrics core passes to `create_ctrl`.
#[repr(transparent)]
pub(crate) struct FabricsDevice(Opaque<raw::device>);

impl FabricsDevice {
    pub(crate) fn as_raw(&self) -> *mut raw::device {
        self.0.get()
    }
}

/// An nvme controller (`struct nvme_ctrl`), reference counted through its device.
///
/// # Invariants
///
/// Instances are only reachable through `ARef<Ctrl>` or borrows of one, so the controller is
/// initialised (`nvme_init_ctrl` succeeded) and its refcount is non-zero.
#[repr(transparent)]
pub(crate) struct Ctrl(Opaque<raw::nvme_ctrl>);

// SAFETY: `nvme_get_ctrl`/`nvme_put_ctrl` take and drop a reference on the controller's device.
unsafe impl AlwaysRefCounted for Ctrl {
    fn inc_ref(&self) {
        // SAFETY: by the type invariant the refcount is non-zero.
        unsafe { raw::rnvme_nvme_get_ctrl(self.0.get()) };
    }

    /// # Safety
    ///
    /// As for [`AlwaysRefCounted::dec_ref`]: the caller owns one reference and gives it up.
    unsafe fn dec_ref(obj: core::ptr::NonNull<Self>) {
        // SAFETY: the caller gives up one reference it owned.
        unsafe { raw::rnvme_nvme_put_ctrl(obj.cast::<raw::nvme_ctrl>().as_ptr()) };
    }
}

/// The transport's live controllers (the C driver's `nvme_rdma_ctrl_list`).
pub(crate) type CtrlList = KVec<ARef<ctrl::Controller<crate::transport::RdmaCtrl>>>;
/// The transport's per-device contexts (the C driver's `device_list`).
pub(crate) type DeviceList = KVec<crate::transport::DevEntry>;

kernel::sync::global_lock! {
    // SAFETY: `init_globals` initialises it during module init, before any use.
    pub(crate) unsafe(uninit) static CTRLS: Mutex<CtrlList> = KVec::new();
}

kernel::sync::global_lock! {
    // SAFETY: `init_globals` initialises it during module init, before any use.
    pub(crate) unsafe(uninit) static DEVICES: Mutex<DeviceList> = KVec::new();
}

/// Initialises the module's global locks; call once, first thing in module init.
pub(crate) fn init_globals() {
    static DONE: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    if DONE.swap(true, core::sync::atomic::Ordering::AcqRel) {
        return;
    }
    // SAFETY: called once (guarded above), before any other use of the locks.
    unsafe {
        CTRLS.init();
        DEVICES.init();
    }
}

/// Waits until every queued controller deletion has finished (`flush_workqueue(nvme_delete_wq)`).
pub(crate) fn flush_delete_wq() {
    // SAFETY: the workqueue is created by nvme-core, which this module depends on.
    unsafe { raw::rnvme_flush_nvme_delete_wq() };
}

/// The module's queue-setup workqueue (`rnvme_rdma_setup`: unbound, `WQ_MEM_RECLAIM`), set while
/// a [`SetupWq`] exists.
static SETUP_WQ: core::sync::atomic::AtomicPtr<raw::workqueue_struct> =
    core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

/// Owns the module's queue-setup workqueue, for work that reset and reconnect wait for.
///
/// Reset, error recovery and reconnect run on nvme-core's `WQ_MEM_RECLAIM` workqueues so that
/// they progress when memory is short and reclaim waits for this controller's I/O. Work they wait
/// for must have the same guarantee: the system workqueues have no rescuer, and under memory
/// pressure a work item there may wait for a worker that cannot be created. This queue has a
/// rescuer thread. Created at module load, destroyed (after running what is queued) at unload,
/// after every controller is gone.
pub(crate) struct SetupWq(());

impl SetupWq {
    /// Allocates the workqueue.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: no preconditions; returns NULL on failure.
        let wq = unsafe { raw::rnvme_alloc_setup_wq() };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        SETUP_WQ.store(wq, core::sync::atomic::Ordering::Release);
        Ok(Self(()))
    }
}

impl Drop for SetupWq {
    fn drop(&mut self) {
        let wq = SETUP_WQ.swap(core::ptr::null_mut(), core::sync::atomic::Ordering::AcqRel);
        // SAFETY: `wq` was allocated by `new` and is destroyed once (swapped out); nothing queues
        // to it any more (only controllers do, and the module deletes them all before this field
        // is dropped); destroy_workqueue runs what is still queued first.
        unsafe { raw::destroy_workqueue(wq) };
    }
}

/// Runs `f` on the module's queue-setup workqueue ([`SetupWq`]). Only for controllers (which
/// exist only while the workqueue does).
pub(crate) fn spawn_setup<T: 'static + Send + FnOnce()>(f: T) -> Result {
    let wq = SETUP_WQ.load(core::sync::atomic::Ordering::Acquire);
    if wq.is_null() {
        return Err(ENODEV);
    }
    // SAFETY: `wq` is live: it is destroyed only after every controller is gone, and only
    // controllers call this; the reference does not outlive the call.
    let q = unsafe { kernel::workqueue::Queue::from_raw(wq) };
    q.try_spawn(GFP_KERNEL, f).map_err(|_| ENOMEM)
}

/// A cell whose value is used by one party at a time, from any context (process, softirq):
/// [`TryCell::try_with`] never waits, it fails if the value is in use. For per-request state that
/// blk-mq already hands to one owner at a time: a failure reveals a protocol breach (for example a
/// target completing a command that is still being submitted) instead of a data race.
pub(crate) struct TryCell<T> {
    busy: core::sync::atomic::AtomicBool,
    v: core::cell::UnsafeCell<T>,
}

// SAFETY: access to `v` is exclusive (guarded by `busy`), so sharing needs only `T: Send`.
unsafe impl<T: Send> Sync for TryCell<T> {}

impl<T> TryCell<T> {
    /// A free cell holding `v`.
    pub(crate) const fn new(v: T) -> Self {
        Self {
            busy: core::sync::atomic::AtomicBool::new(false),
            v: core::cell::UnsafeCell::new(v),
        }
    }

    /// Runs `f` on the value unless somebody else is using it.
    pub(crate) fn try_with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        use core::sync::atomic::Ordering;
        if self
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        // SAFETY: `busy` was false and is now ours: nobody else holds a reference to the value
        // until we clear it below.
        let r = f(unsafe { &mut *self.v.get() });
        self.busy.store(false, Ordering::Release);
        Some(r)
    }
}

/// Whether a module called `name` is loaded (its `/sys/module/NAME` directory exists).
pub(crate) fn module_present(name: &CStr) -> bool {
    // SAFETY: `name` is NUL-terminated.
    unsafe { raw::rnvme_module_present(name.as_char_ptr()) }
}

/// A fabrics transport implementation (`struct nvmf_transport_ops`).
pub(crate) trait TransportOps {
    /// The transport's name (`transport=` of a connect request).
    const NAME: &'static CStr;
    /// Options that must be given (besides the generic `transport` and `nqn`).
    const REQUIRED_OPTS: u32;
    /// Options accepted besides the generic ones.
    const ALLOWED_OPTS: u32;

    /// Creates a controller for a connect request.
    fn create_ctrl(dev: &FabricsDevice, opts: &Options) -> Result<ARef<Ctrl>>;
}

/// A registered fabrics transport.
///
/// `struct nvmf_transport_ops` must stay in module memory while registered (the fabrics core
/// pins the module with `try_module_get` and links `entry`): keep this in the module's own
/// (`InPlaceModule`) state.
///
/// # Invariants
///
/// `inner` is registered from successful initialisation until drop.
#[pin_data(PinnedDrop)]
pub(crate) struct TransportRegistration<T: TransportOps> {
    #[pin]
    inner: Opaque<raw::nvmf_transport_ops>,
    _t: PhantomData<T>,
}

// SAFETY: registration and unregistration may happen on any thread; no `&self` methods.
unsafe impl<T: TransportOps> Send for TransportRegistration<T> {}
// SAFETY: see `Send`.
unsafe impl<T: TransportOps> Sync for TransportRegistration<T> {}

impl<T: TransportOps> TransportRegistration<T> {
    /// Registers the transport with the fabrics core.
    pub(crate) fn new(module: &'static kernel::ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            inner <- Opaque::try_ffi_init(move |slot: *mut raw::nvmf_transport_ops| {
                // SAFETY: `slot` is valid for writes; all-zero is a valid nvmf_transport_ops.
                unsafe { slot.write(core::mem::zeroed()) };
                // SAFETY: `slot` is initialised and writable.
                unsafe {
                    (*slot).module = module.as_ptr();
                    (*slot).name = T::NAME.as_char_ptr();
                    (*slot).required_opts = T::REQUIRED_OPTS as i32;
                    (*slot).allowed_opts = T::ALLOWED_OPTS as i32;
                    (*slot).create_ctrl = Some(Self::create_ctrl_callback);
                }
                // SAFETY: `slot` is pinned in module memory until `drop` unregisters it.
                to_result(unsafe { raw::nvmf_register_transport(slot) })
            }),
            _t: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by the fabrics core with a valid device and options it owns for the call.
    unsafe extern "C" fn create_ctrl_callback(
        dev: *mut raw::device,
        opts: *mut raw::nvmf_ctrl_options,
    ) -> *mut raw::nvme_ctrl {
        // SAFETY: the fabrics core passes its misc device, valid during the call;
        // `FabricsDevice` is repr(transparent).
        let dev = unsafe { &*dev.cast::<FabricsDevice>() };
        // SAFETY: `Options` is `repr(transparent)`; the core owns `opts` for the call.
        let opts = unsafe { &*opts.cast::<Options>() };
        match T::create_ctrl(dev, opts) {
            Ok(ctrl) => ARef::into_raw(ctrl).as_ptr().cast(),
            Err(e) => e.to_ptr(),
        }
    }
}

#[pinned_drop]
impl<T: TransportOps> PinnedDrop for TransportRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: by the type invariant the transport is registered.
        unsafe { raw::nvmf_unregister_transport(self.inner.get()) };
    }
}
