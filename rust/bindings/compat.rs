// SPDX-License-Identifier: GPL-2.0

//! What differs between the kernel series this module builds for, in one place
//! (`Documentation/distro-kernels.rst`, "Kernel series"). `Kbuild` sets the cfg
//! `rnvme_linux_7_2` on Linux 7.2.y; without it the code is 7.3.y's. Each item says which series
//! needs which form, so a new series costs a cfg here and in `Kbuild`, not a fork. Everything
//! else the module uses (the C prototypes it calls, blk-mq, rdma_cm, the nvme host core's
//! structures, which bindgen regenerates from the kernel's own headers) is the same in both.

use super::raw;
use kernel::prelude::*;

/// `kernel::prelude` plus the error codes 7.2's kernel crate does not have: the transport's
/// prelude, the same names on every series.
pub(crate) mod prelude {
    #[cfg(rnvme_linux_7_2)]
    pub(crate) use super::errno::*;
    pub(crate) use kernel::prelude::*;
}

/// 7.2's `kernel::error::code` lacks these four `errno.h` codes, which 7.3 added (with most of
/// the others) to its prelude, and its `Error` has no public `const` constructor.
#[cfg(rnvme_linux_7_2)]
mod errno {
    use super::raw;
    use core::num::NonZeroI32;
    use kernel::error::Error;

    /// An `Error` for a code from `errno.h`, usable in a `const`.
    const fn err(code: u32) -> Error {
        let v = match NonZeroI32::new(-(code as i32)) {
            Some(v) => v,
            None => panic!("errno 0"),
        };
        // SAFETY: 7.2's `Error` is `struct Error(NonZeroI32)` (rust/kernel/error.rs), one field
        // and nothing else (`transmute` checks the size), so its only layout is the field's;
        // `-code` for a code of `errno.h` is within `-MAX_ERRNO..0`, `Error`'s invariant.
        unsafe { core::mem::transmute::<NonZeroI32, Error>(v) }
    }
    pub(crate) const ENOTCONN: Error = err(raw::ENOTCONN);
    pub(crate) const ECONNRESET: Error = err(raw::ECONNRESET);
    pub(crate) const EALREADY: Error = err(raw::EALREADY);
    pub(crate) const EOPNOTSUPP: Error = err(raw::EOPNOTSUPP);
}

/// `enum dma_data_direction`'s values as the C functions take them (`int`). 7.3's kernel
/// bindings make the enum a newtype (`--newtype-enum`), 7.2's a plain integer type.
#[cfg(not(rnvme_linux_7_2))]
pub(crate) const DMA_TO_DEVICE: i32 = raw::dma_data_direction::DMA_TO_DEVICE.0;
#[cfg(not(rnvme_linux_7_2))]
pub(crate) const DMA_FROM_DEVICE: i32 = raw::dma_data_direction::DMA_FROM_DEVICE.0;
#[cfg(rnvme_linux_7_2)]
pub(crate) const DMA_TO_DEVICE: i32 = raw::dma_data_direction_DMA_TO_DEVICE;
#[cfg(rnvme_linux_7_2)]
pub(crate) const DMA_FROM_DEVICE: i32 = raw::dma_data_direction_DMA_FROM_DEVICE;

/// The bindings' `dma_data_direction` of a direction value (the newtype on 7.3).
#[inline(always)]
pub(crate) const fn dma_dir(dir: i32) -> raw::dma_data_direction {
    #[cfg(not(rnvme_linux_7_2))]
    return raw::dma_data_direction(dir);
    #[cfg(rnvme_linux_7_2)]
    return dir;
}

/// `struct ib_device_attr`'s limits as `u32`: 7.3 made them `u32`, 7.2 has `int` (never
/// negative; a negative one reads as 0, no capacity).
#[cfg(not(rnvme_linux_7_2))]
#[inline(always)]
pub(crate) fn attr_u32(v: u32) -> u32 {
    v
}
#[cfg(rnvme_linux_7_2)]
#[inline(always)]
pub(crate) fn attr_u32(v: i32) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

/// Waits for an RCU grace period. 7.3's kernel crate has `rcu::synchronize_rcu`; 7.2's does not,
/// and the C function is called directly.
pub(crate) fn synchronize_rcu() {
    #[cfg(not(rnvme_linux_7_2))]
    kernel::sync::rcu::synchronize_rcu();
    #[cfg(rnvme_linux_7_2)]
    {
        // SAFETY: `synchronize_rcu` may be called from any sleepable context, as this
        // function's callers are (it is what the kernel crate's 7.3 wrapper does).
        unsafe { raw::synchronize_rcu() };
    }
}

/// This module's `struct module` (`THIS_MODULE`): 7.3's `module!` makes it an associated
/// constant of `ModuleMetadata`, 7.2's a static at the crate root.
#[cfg(not(rnvme_linux_7_2))]
pub(crate) const THIS_MODULE: *mut raw::module =
    <crate::LocalModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr();
#[cfg(rnvme_linux_7_2)]
pub(crate) const THIS_MODULE: *mut raw::module = crate::THIS_MODULE.as_ptr();

/// Runs `init` to initialise `slot` in place: `PinInit::__init` on 7.3, `__pinned_init` on 7.2
/// (the same method, renamed).
///
/// # Safety
///
/// As `PinInit::__init`: `slot` is valid for writes, and on success the value stays pinned
/// (is never moved) until it is dropped; on failure `slot` holds nothing to drop.
#[inline(always)]
pub(crate) unsafe fn init_in_place<T, E>(init: impl PinInit<T, E>, slot: *mut T) -> Result<(), E> {
    // SAFETY: as the caller guarantees.
    unsafe {
        #[cfg(not(rnvme_linux_7_2))]
        return init.__init(slot);
        #[cfg(rnvme_linux_7_2)]
        return init.__pinned_init(slot);
    }
}
