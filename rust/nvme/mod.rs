// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over the nvme host core and the NVMe over Fabrics library.
//!
//! One of the two layers (with `rdma`) allowed to contain `unsafe`.
//!
//! C header: [`drivers/nvme/host/nvme.h`](srctree/drivers/nvme/host/nvme.h)

pub(crate) mod ctrl;
pub(crate) mod fabrics;
mod mapping;
pub(crate) mod mq;
mod nvme_ctrl;
pub(crate) mod options;
mod tagset;

pub(crate) use fabrics::{FabricsDevice, TransportOps, TransportRegistration};
pub(crate) use mapping::{MappedCmd, MappedSg};
pub(crate) use nvme_ctrl::{NvmeCtrl, SetupError, State};
pub(crate) use options::{opt, Options};

use crate::bindings::raw;
use kernel::{
    prelude::*,
    str::CStr,
    sync::lock::{GlobalGuard, GlobalLock, GlobalLockBackend},
};

/// A module-global value behind a mutex (a C `static DEFINE_MUTEX` with the data it guards),
/// declared with [`crate::global_mutex!`] beside the type it holds. [`GlobalMutex::init`] must
/// run (once, at module init) before the first [`GlobalMutex::lock`]; a lock before that is
/// refused with a panic instead of using an uninitialised mutex.
pub(crate) struct GlobalMutex<B: GlobalLockBackend> {
    lock: GlobalLock<B>,
    /// 0: not initialised, 1: being initialised, 2: ready.
    state: core::sync::atomic::AtomicU8,
}

impl<B: GlobalLockBackend<Backend = kernel::sync::lock::mutex::MutexBackend>> GlobalMutex<B> {
    /// A mutex holding `v`, not yet initialised.
    ///
    /// # Safety
    ///
    /// `B` is the backend type of this static only (as [`crate::global_mutex!`] generates it).
    #[doc(hidden)]
    pub(crate) const unsafe fn new(v: B::Item) -> Self {
        Self {
            // SAFETY: `B` is used for this lock only (caller); `init` runs before `lock`, which
            // checks it.
            lock: unsafe { GlobalLock::new(v) },
            state: core::sync::atomic::AtomicU8::new(0),
        }
    }

    /// Initialises the mutex; later calls do nothing.
    pub(crate) fn init(&'static self) {
        use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
        if self.state.compare_exchange(0, 1, Acquire, Relaxed).is_ok() {
            // SAFETY: the state moved from 0 exactly once: this is the only call of `init`.
            unsafe { self.lock.init() };
            self.state.store(2, Release);
        }
    }

    /// Locks the mutex.
    ///
    /// # Panics
    ///
    /// If [`GlobalMutex::init`] has not completed (a module that forgot it).
    pub(crate) fn lock(&'static self) -> GlobalGuard<B> {
        assert_eq!(
            self.state.load(core::sync::atomic::Ordering::Acquire),
            2,
            "global mutex used before its init"
        );
        self.lock.lock()
    }
}

/// Declares a [`GlobalMutex`] static: `global_mutex!(pub(crate) static NAME: Type = value;)`.
/// Generates the lock's backend type (named like the static, as `kernel::sync::global_lock!`
/// does) and the static; the one `unsafe` call it makes is justified here, so the code using the
/// macro stays free of `unsafe`.
#[macro_export]
macro_rules! global_mutex {
    ($(#[$m:meta])* $vis:vis static $name:ident: $t:ty = $v:expr;) => {
        #[allow(non_camel_case_types, unreachable_pub, clippy::upper_case_acronyms)]
        #[doc(hidden)]
        $vis enum $name {}

        impl ::kernel::sync::lock::GlobalLockBackend for $name {
            const NAME: &'static ::kernel::str::CStr = ::kernel::c_str!(::core::stringify!($name));
            type Item = $t;
            type Backend = ::kernel::sync::lock::mutex::MutexBackend;

            fn get_lock_class() -> ::core::pin::Pin<&'static ::kernel::sync::LockClassKey> {
                ::kernel::static_lock_class!()
            }
        }

        $(#[$m])*
        $vis static $name: $crate::nvme::GlobalMutex<$name> = {
            let v: $t = $v;
            #[allow(unsafe_code)]
            // SAFETY: `$name` is the backend type generated above, for this static only.
            let m = unsafe { $crate::nvme::GlobalMutex::new(v) };
            m
        };
    };
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

pub(crate) use crate::bindings::sync::TryCell;

/// Whether a module called `name` is loaded (its `/sys/module/NAME` directory exists).
pub(crate) fn module_present(name: &CStr) -> bool {
    // SAFETY: `name` is NUL-terminated.
    unsafe { raw::rnvme_module_present(name.as_char_ptr()) }
}
