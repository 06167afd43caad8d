// SPDX-License-Identifier: GPL-2.0

//! Registration of a transport with the NVMe over Fabrics core (`struct nvmf_transport_ops`).
//!
//! C header: [`drivers/nvme/host/fabrics.h`](srctree/drivers/nvme/host/fabrics.h)

use super::{nvme_ctrl::NvmeCtrl, options::Options};
use crate::bindings::raw;
use core::marker::PhantomData;
use kernel::{error::to_result, prelude::*, str::CStr, sync::aref::ARef, types::Opaque};

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

/// A fabrics transport implementation (`struct nvmf_transport_ops`).
pub(crate) trait TransportOps {
    /// The transport's name (`transport=` of a connect request).
    const NAME: &'static CStr;
    /// Options that must be given (besides the generic `transport` and `nqn`).
    const REQUIRED_OPTS: u32;
    /// Options accepted besides the generic ones.
    const ALLOWED_OPTS: u32;

    /// Creates a controller for a connect request.
    fn create_ctrl(dev: &FabricsDevice, opts: &Options) -> Result<ARef<NvmeCtrl>>;
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
