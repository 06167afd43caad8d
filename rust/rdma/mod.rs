// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over the kernel's RDMA consumer API (ib_core, rdma_cm).
//!
//! This is one of the two layers (with `nvme`) allowed to contain `unsafe`. Every `unsafe` block
//! states why it is sound; the transport logic sees only the safe types defined here.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

pub(crate) mod cm;
pub(crate) mod qp;
pub(crate) mod qp_cell;
pub(crate) mod recv;
pub(crate) mod verbs;

use crate::bindings::{compat, raw};
use core::marker::PhantomData;
use kernel::{error::to_result, prelude::*, str::CStr, types::Opaque};

/// Evidence that the current context is an RCU read-side critical section for `'a`: what the
/// data path needs to use a QP it reads from a [`qp_cell::QpCell`] or a receive entry (their owner
/// withdraws the QP, then waits for a grace period before destroying it).
///
/// Obtained from a [`kernel::sync::rcu::Guard`] ([`RcuReader::of`]), inside a receive's
/// completion callback ([`recv::RecvRcu::with`]), or inside blk-mq's `queue_rq` (the `nvme`
/// layer). Not `Send`: the property
/// is the current thread's.
#[derive(Clone, Copy)]
pub(crate) struct RcuReader<'a>(PhantomData<(&'a (), *mut ())>);

impl<'a> RcuReader<'a> {
    /// The read-side section `g` holds.
    #[inline(always)]
    pub(crate) fn of(_g: &'a kernel::sync::rcu::Guard) -> Self {
        Self(PhantomData)
    }

    /// Asserts that the caller runs inside an RCU read-side critical section.
    ///
    /// # Safety
    ///
    /// The current context is an RCU read-side critical section (a `rcu_read_lock()` section,
    /// or a region with bottom halves, preemption or interrupts disabled, which
    /// `synchronize_rcu` also waits for) that lasts at least for `'a`.
    #[inline(always)]
    pub(crate) unsafe fn assume() -> Self {
        Self(PhantomData)
    }
}

/// An IPv4 or IPv6 socket address (`struct sockaddr_storage`).
pub(crate) struct SockAddr(raw::__kernel_sockaddr_storage);

// SAFETY: a socket address is plain data (the union's pointer-typed member is never used).
unsafe impl Send for SockAddr {}
// SAFETY: as for `Send`; `&SockAddr` only reads.
unsafe impl Sync for SockAddr {}

impl SockAddr {
    /// Parses `addr` (IPv4, or IPv6 with an optional `%scope`) and `port` exactly as the C
    /// transports do (`inet_pton_with_scope(AF_UNSPEC)`).
    pub(crate) fn parse(addr: &CStr, port: &CStr) -> Result<Self> {
        // SAFETY: an all-zero sockaddr_storage is valid.
        let mut ss: raw::__kernel_sockaddr_storage = unsafe { core::mem::zeroed() };
        // SAFETY: `addr` and `port` are NUL-terminated; `ss` is writable and large enough for
        // any address family; `init_net` lives forever.
        to_result(unsafe {
            raw::inet_pton_with_scope(
                &raw mut raw::init_net,
                raw::AF_UNSPEC as u16,
                addr.as_char_ptr(),
                port.as_char_ptr(),
                &mut ss,
            )
        })?;
        Ok(SockAddr(ss))
    }

    /// A pointer to the address as a `struct sockaddr`.
    pub(crate) fn as_ptr(&self) -> *const raw::sockaddr {
        core::ptr::from_ref(&self.0).cast()
    }
}

/// A borrowed view of an RDMA device (`struct ib_device`).
///
/// # Invariants
///
/// `self.0` is a registered `struct ib_device`; the borrow is bounded by the callback or the
/// reference that handed it out (ib_core keeps the device alive until every client's `remove`
/// returned).
#[repr(transparent)]
pub(crate) struct Device(Opaque<raw::ib_device>);

impl Device {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a registered `struct ib_device` that stays valid for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut raw::ib_device) -> &'a Self {
        // SAFETY: `Device` is `repr(transparent)` over `Opaque<ib_device>`, and the caller
        // guarantees validity for `'a`.
        unsafe { &*ptr.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut raw::ib_device {
        self.0.get()
    }

    /// Whether the device takes kernel virtual addresses instead of DMA addresses
    /// (`ib_uses_virt_dma`: software devices such as rxe and siw). The `ib_dma_*` calls are then
    /// no-ops or identities, which the mappings do here, as C's inlined calls do, instead of
    /// calling out for each.
    #[inline(always)]
    pub(crate) fn uses_virt_dma(&self) -> bool {
        #[cfg(CONFIG_INFINIBAND_VIRT_DMA)]
        {
            // SAFETY: the device is registered (type invariant); `dma_device` is set before
            // registration and not changed afterwards.
            unsafe { (*self.0.get()).dma_device.is_null() }
        }
        #[cfg(not(CONFIG_INFINIBAND_VIRT_DMA))]
        {
            false
        }
    }

    /// DMA-maps the first `nents` entries of the scatterlist `sg` for the device in direction
    /// `dir` (`ib_dma_map_sg`, a static inline: done here, calling what it calls). Returns the
    /// number of DMA entries, 0 or negative on failure.
    ///
    /// # Safety
    ///
    /// `sg` is a valid scatterlist of at least `nents` entries, pointing at memory that stays
    /// valid until it is unmapped with the same direction.
    #[inline(always)]
    pub(crate) unsafe fn dma_map_sg(&self, sg: *mut raw::scatterlist, nents: i32, dir: i32) -> i32 {
        #[cfg(CONFIG_INFINIBAND_VIRT_DMA)]
        if self.uses_virt_dma() {
            // SAFETY: the device is registered (type invariant); `sg` as the caller guarantees.
            return unsafe { raw::ib_dma_virt_map_sg(self.0.get(), sg, nents) };
        }
        // SAFETY: the device is registered with a DMA device (type invariant, not a software
        // one); `sg` as the caller guarantees. The count is at most `nents`, which fits.
        unsafe {
            raw::dma_map_sg_attrs(
                (*self.0.get()).dma_device,
                sg,
                nents,
                compat::dma_dir(dir),
                0,
            ) as i32
        }
    }

    /// A copy of the device's name, e.g. `eth0_rxe`.
    ///
    /// A copy, because a rename may free the `struct device` name at any time; the fixed
    /// `ib_device::name` array is read instead (a racing rename can only garble the copy).
    pub(crate) fn name(&self) -> DeviceName {
        // SAFETY: the device is valid (type invariant); `name` is an inline array of
        // `NAME_MAX` bytes, read by value.
        let bytes = unsafe { core::ptr::read_volatile(&raw const (*self.0.get()).name) };
        let mut n = DeviceName(bytes);
        n.0[NAME_MAX - 1] = 0;
        n
    }

    fn attrs(&self) -> &raw::ib_device_attr {
        // SAFETY: the device is registered (type invariant); its attributes are set before
        // registration and not changed afterwards.
        unsafe { &(*self.0.get()).attrs }
    }

    /// Maximum scatter/gather entries per send work request.
    pub(crate) fn max_send_sge(&self) -> u32 {
        compat::attr_u32(self.attrs().max_send_sge)
    }

    /// Maximum pages of a fast-registration MR.
    pub(crate) fn max_fast_reg_page_list_len(&self) -> u32 {
        self.attrs().max_fast_reg_page_list_len
    }

    /// Maximum outstanding RDMA READs as responder.
    pub(crate) fn max_qp_rd_atom(&self) -> u32 {
        compat::attr_u32(self.attrs().max_qp_rd_atom)
    }

    /// Whether the device supports memory management extensions (fast registration).
    pub(crate) fn has_mem_mgt_extensions(&self) -> bool {
        self.attrs().device_cap_flags & raw::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64
            != 0
    }

    /// Number of completion vectors.
    pub(crate) fn num_comp_vectors(&self) -> u32 {
        // SAFETY: the device is registered (type invariant); the field is set before.
        (unsafe { (*self.0.get()).num_comp_vectors }).max(1) as u32
    }

    /// The NUMA node of the device.
    pub(crate) fn numa_node(&self) -> i32 {
        // SAFETY: the device is registered (type invariant).
        unsafe { raw::rnvme_ibdev_to_node(self.0.get()) }
    }

    /// The device's node GUID (the C driver's key for per-device state).
    pub(crate) fn node_guid(&self) -> u64 {
        // SAFETY: by the type invariant the device is registered; `node_guid` is set before
        // registration and only read here.
        u64::from_be(unsafe { (*self.0.get()).node_guid })
    }
}

const NAME_MAX: usize = raw::IB_DEVICE_NAME_MAX as usize;

/// A copy of an RDMA device's name.
pub(crate) struct DeviceName([u8; NAME_MAX]);

impl kernel::fmt::Display for DeviceName {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let len = self.0.iter().position(|&c| c == 0).unwrap_or(NAME_MAX);
        let s = core::str::from_utf8(&self.0[..len]).unwrap_or("?");
        f.write_str(s)
    }
}

/// Callbacks of an RDMA client (`struct ib_client`).
pub(crate) trait ClientOps {
    /// The client's name, as ib_core shows it.
    const NAME: &'static CStr;

    /// A device was added, or was present when the client registered.
    fn add(dev: &Device) -> Result;

    /// A device is going away. When this returns, the client must hold no resource of `dev`.
    fn remove(dev: &Device);
}

/// A registered RDMA client.
///
/// # Invariants
///
/// `inner` is registered with ib_core from successful initialisation until drop.
#[pin_data(PinnedDrop)]
pub(crate) struct ClientRegistration<T: ClientOps> {
    #[pin]
    inner: Opaque<raw::ib_client>,
    _t: PhantomData<T>,
}

// SAFETY: ib_register_client/ib_unregister_client may be called from any thread, and the type
// has no `&self` methods.
unsafe impl<T: ClientOps> Send for ClientRegistration<T> {}
// SAFETY: see `Send`: no method takes `&self`.
unsafe impl<T: ClientOps> Sync for ClientRegistration<T> {}

impl<T: ClientOps> ClientRegistration<T> {
    /// Registers the client; `add` is called for every device already present.
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            inner <- Opaque::try_ffi_init(|slot: *mut raw::ib_client| {
                // SAFETY: `slot` is valid for writes; an all-zero `ib_client` is a valid value
                // (no callbacks, zero refcount), which ib_register_client initialises further.
                unsafe { slot.write(core::mem::zeroed()) };
                // SAFETY: `slot` was just initialised and is writable.
                unsafe {
                    (*slot).name = T::NAME.as_char_ptr();
                    (*slot).add = Some(Self::add_callback);
                    (*slot).remove = Some(Self::remove_callback);
                }
                // SAFETY: `slot` is pinned and stays valid until `drop` unregisters it.
                to_result(unsafe { raw::ib_register_client(slot) })
            }),
            _t: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called by ib_core with a registered device.
    unsafe extern "C" fn add_callback(dev: *mut raw::ib_device) -> kernel::ffi::c_int {
        // SAFETY: ib_core passes a registered device that outlives the callback.
        let dev = unsafe { Device::from_raw(dev) };
        match T::add(dev) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called by ib_core with a device that stays valid until the callback returns.
    unsafe extern "C" fn remove_callback(
        dev: *mut raw::ib_device,
        _data: *mut kernel::ffi::c_void,
    ) {
        // SAFETY: ib_core passes a device that is valid until the callback returns.
        T::remove(unsafe { Device::from_raw(dev) });
    }
}

#[pinned_drop]
impl<T: ClientOps> PinnedDrop for ClientRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: by the type invariant the client is registered; ib_unregister_client calls
        // `remove` for every device and waits for all callbacks to finish.
        unsafe { raw::ib_unregister_client(self.inner.get()) };
    }
}
