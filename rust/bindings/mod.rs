// SPDX-License-Identifier: GPL-2.0

//! Raw bindings to the C APIs the kernel crate does not bind: RDMA verbs, rdma_cm, the nvme host
//! core and fabrics library, and this module's C helpers (`rust/helpers.h`).
//!
//! `generated.rs` is produced at build time by bindgen (see `Kbuild`). Every type it refers to
//! but does not declare comes from `kernel::bindings` through the glob import, so a
//! `raw::request` *is* a `kernel::bindings::request`.
//!
//! Only the abstraction layers (`rdma`, `nvme`) may use this module, but for [`compat`]: its
//! `prelude`, which the transport uses in place of `kernel::prelude`, and its safe wrappers.

pub(crate) mod compat;
pub(crate) mod sync;

#[allow(
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    improper_ctypes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::ptr_as_ptr,
    clippy::cast_lossless,
    clippy::ref_as_ptr,
    clippy::as_underscore
)]
pub(crate) mod raw {
    pub(crate) use kernel::bindings::*;
    use kernel::ffi;

    include!("generated.rs");
}

/// [`kernel::error::to_result`] for the data path: the same conversion, inlined (the kernel
/// crate's is an out-of-line call, paid for every return code checked per I/O).
#[inline(always)]
pub(crate) fn to_result(err: kernel::ffi::c_int) -> kernel::error::Result {
    if err < 0 {
        Err(kernel::error::Error::from_errno(err))
    } else {
        Ok(())
    }
}
