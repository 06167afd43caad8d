// SPDX-License-Identifier: GPL-2.0

//! The options of a connect request (`struct nvmf_ctrl_options`), as the fabrics core parsed them.
//!
//! C header: [`drivers/nvme/host/fabrics.h`](srctree/drivers/nvme/host/fabrics.h)

use crate::bindings::raw;
use kernel::{error::to_result, prelude::*, str::CStr, types::Opaque};

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

// The getters read one field each through the raw pointer, never through a reference to
// the whole struct: the core's sysfs attributes write some fields (`reconnect_delay`,
// `max_reconnects`, `fast_io_fail_tmo`) of a live controller's options at any time, which a
// shared reference would assert immutable. The string fields and counts read here are set
// by the parser and written afterwards only by `default_trsvcid`, during `create_ctrl`. The
// sysfs-written ones are read with `field_once!` (`READ_ONCE`): a plain read racing the sysfs
// store would be a data race.
macro_rules! field {
    ($self:ident . $f:ident) => {
        // SAFETY: the options are valid for the borrow (type invariant); one field is read
        // through the raw pointer (see above).
        unsafe { (*$self.0.get()).$f }
    };
}

/// A field the core's sysfs attributes write at any time, read as `READ_ONCE` does.
macro_rules! field_once {
    ($self:ident . $f:ident) => {
        // SAFETY: the options are valid for the borrow (type invariant); the field is aligned and
        // read once, volatile, through the raw pointer, as the C side's `READ_ONCE`.
        unsafe { core::ptr::read_volatile(core::ptr::addr_of!((*$self.0.get()).$f)) }
    };
}

impl Options {
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
        field!(self.mask)
    }

    /// `traddr`: required by the transport, so always present.
    pub(crate) fn traddr(&self) -> Option<&CStr> {
        let p = field!(self.traddr);
        // SAFETY: by the type invariant string fields are NUL-terminated or null.
        unsafe { self.opt_str(p) }
    }

    /// `trsvcid`, if given.
    pub(crate) fn trsvcid(&self) -> Option<&CStr> {
        let p = field!(self.trsvcid);
        // SAFETY: by the type invariant string fields are NUL-terminated or null.
        unsafe { self.opt_str(p) }
    }

    /// `host_traddr`, if given.
    pub(crate) fn host_traddr(&self) -> Option<&CStr> {
        let p = field!(self.host_traddr);
        // SAFETY: by the type invariant string fields are NUL-terminated or null.
        unsafe { self.opt_str(p) }
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
        field!(self.queue_size) as u32
    }

    /// `nr_io_queues=` + `nr_write_queues=` + `nr_poll_queues=`.
    pub(crate) fn total_queues(&self) -> u32 {
        field!(self.nr_io_queues) + field!(self.nr_write_queues) + field!(self.nr_poll_queues)
    }

    /// `nr_poll_queues=`.
    pub(crate) fn nr_poll_queues(&self) -> u32 {
        field!(self.nr_poll_queues)
    }

    /// `tos=` (negative: not set).
    pub(crate) fn tos(&self) -> i32 {
        field!(self.tos)
    }

    /// `duplicate_connect`.
    pub(crate) fn duplicate_connect(&self) -> bool {
        field!(self.duplicate_connect)
    }

    /// `reconnect_delay=` in seconds.
    pub(crate) fn reconnect_delay(&self) -> u32 {
        field_once!(self.reconnect_delay)
    }

    /// `max_reconnects` derived from `ctrl_loss_tmo` (-1: forever).
    pub(crate) fn max_reconnects(&self) -> i32 {
        field_once!(self.max_reconnects)
    }

    /// The subsystem NQN (`nqn=`, always present).
    pub(crate) fn subsysnqn(&self) -> Option<&CStr> {
        let p = field!(self.subsysnqn);
        // SAFETY: by the type invariant string fields are NUL-terminated or null.
        unsafe { self.opt_str(p) }
    }
}
