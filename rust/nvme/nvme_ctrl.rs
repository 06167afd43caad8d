// SPDX-License-Identifier: GPL-2.0

//! The core's view of a controller (`struct nvme_ctrl`): its state machine, the fields a
//! transport reads and sets, and the core and fabrics library calls on it.
//!
//! C headers: [`drivers/nvme/host/nvme.h`](srctree/drivers/nvme/host/nvme.h),
//! [`drivers/nvme/host/fabrics.h`](srctree/drivers/nvme/host/fabrics.h)

use super::options::Options;
use crate::bindings::raw;
use kernel::{error::to_result, prelude::*, sync::aref::AlwaysRefCounted, types::Opaque};

/// An nvme controller (`struct nvme_ctrl`), reference counted through its device.
///
/// # Invariants
///
/// Instances are only reachable through `ARef<NvmeCtrl>` or borrows of one, so the controller is
/// initialised (`nvme_init_ctrl` succeeded) and its refcount is non-zero.
#[repr(transparent)]
pub(crate) struct NvmeCtrl(Opaque<raw::nvme_ctrl>);

// SAFETY: `nvme_get_ctrl`/`nvme_put_ctrl` take and drop a reference on the controller's device.
unsafe impl AlwaysRefCounted for NvmeCtrl {
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

impl NvmeCtrl {
    pub(crate) fn as_raw(&self) -> *mut raw::nvme_ctrl {
        self.0.get()
    }

    fn raw(&self) -> *mut raw::nvme_ctrl {
        self.as_raw()
    }

    /// The current state.
    #[inline]
    pub(crate) fn state(&self) -> State {
        // SAFETY: the controller is initialised (type invariant); a volatile load of the aligned
        // 4-byte field is `nvme_ctrl_state()`'s `READ_ONCE(ctrl->state)`.
        State::from_raw(unsafe {
            core::ptr::read_volatile(core::ptr::addr_of!((*self.raw()).state))
        })
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
        impl NvmeCtrl {
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
        impl NvmeCtrl {
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

/// Why a setup step failed: an errno, or the NVMe status the controller completed a setup
/// command with (a Fabrics Connect the target refused, a failed identify). The C transports pass
/// either on as one `int` (positive: status) to `nvmf_should_reconnect`, which gives up on a
/// status with the Do Not Retry bit; this keeps the status until that decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetupError {
    /// A negative errno.
    Errno(Error),
    /// An NVMe status (phase bit excluded), as `nvme_submit_sync_cmd` returns it.
    Status(u16),
}

impl From<Error> for SetupError {
    fn from(e: Error) -> Self {
        Self::Errno(e)
    }
}

impl SetupError {
    /// From the C convention: negative errno or positive NVMe status (0 is not an error).
    pub(crate) fn from_raw(r: i32) -> Option<Self> {
        match r {
            0 => None,
            r if r > 0 => Some(Self::Status(r as u16)),
            r => Some(Self::Errno(Error::from_errno(r))),
        }
    }

    /// To the C convention (see [`SetupError::from_raw`]).
    pub(crate) fn to_raw(self) -> i32 {
        match self {
            Self::Errno(e) => e.to_errno(),
            Self::Status(s) => i32::from(s),
        }
    }

    /// As an errno, for callers that take no status (`create_ctrl`: a status is `EIO`, as in C).
    pub(crate) fn to_errno(self) -> Error {
        match self {
            Self::Errno(e) => e,
            Self::Status(_) => EIO,
        }
    }
}

impl From<SetupError> for Error {
    fn from(e: SetupError) -> Self {
        e.to_errno()
    }
}

/// A setup call's C result (negative errno, positive NVMe status, 0).
fn setup_result(r: i32) -> core::result::Result<(), SetupError> {
    SetupError::from_raw(r).map_or(Ok(()), Err)
}

impl NvmeCtrl {
    /// `nvme_init_ctrl_finish`: identify and the core's controller setup.
    pub(crate) fn init_finish(&self) -> core::result::Result<(), SetupError> {
        // SAFETY: the controller is initialised; the admin queue is live.
        setup_result(unsafe { raw::nvme_init_ctrl_finish(self.raw(), false) })
    }

    /// `nvme_enable_ctrl`. An NVMe status (positive) is an error too.
    pub(crate) fn enable(&self) -> core::result::Result<(), SetupError> {
        // SAFETY: the controller is initialised; the admin queue is live.
        setup_result(unsafe { raw::nvme_enable_ctrl(self.raw()) })
    }

    /// `nvmf_connect_admin_queue`: the Fabrics Connect command on the admin queue. A rejection by
    /// the target (a positive NVMe status) is an error.
    pub(crate) fn connect_admin_queue(&self) -> core::result::Result<(), SetupError> {
        // SAFETY: the controller is initialised and its admin queue allocated.
        setup_result(unsafe { raw::nvmf_connect_admin_queue(self.raw()) })
    }

    /// `nvme_disable_ctrl`.
    pub(crate) fn disable(&self, shutdown: bool) {
        // SAFETY: the controller is initialised (type invariant).
        unsafe { raw::nvme_disable_ctrl(self.raw(), shutdown) };
    }

    /// `nvmf_connect_io_queue`.
    pub(crate) fn connect_io_queue(&self, qid: u16) -> core::result::Result<(), SetupError> {
        // SAFETY: the controller is initialised (type invariant).
        setup_result(unsafe { raw::nvmf_connect_io_queue(self.raw(), qid) })
    }

    /// Negotiates the number of I/O queues (`nvme_set_queue_count`); returns how many the
    /// controller granted.
    pub(crate) fn negotiate_queue_count(&self, want: u32) -> core::result::Result<u32, SetupError> {
        let mut n = want as i32;
        // SAFETY: the controller is initialised; `n` is valid for the call.
        setup_result(unsafe { raw::nvme_set_queue_count(self.raw(), &mut n) })?;
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

    /// Whether the connection should be retried after a setup failure (`nvmf_should_reconnect`:
    /// not after a status with Do Not Retry, nor an authentication key refused or missing;
    /// otherwise until `ctrl_loss_tmo`). `None`: the connection was lost, nothing failed yet.
    pub(crate) fn should_reconnect(&self, err: Option<SetupError>) -> bool {
        let status = err.map_or(0, SetupError::to_raw);
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
