// SPDX-License-Identifier: GPL-2.0

//! SGL descriptors carried in the command capsule (NVMe base spec, "SGL Descriptor").
//!
//! C header: [`include/linux/nvme.h`](srctree/include/linux/nvme.h)

#![deny(unsafe_code)]

/// Size of an SGL descriptor.
pub(crate) const DESC_LEN: usize = 16;
/// Largest length a keyed data block descriptor can carry (24 bits).
pub(crate) const KEYED_MAX_LEN: u32 = (1 << 24) - 1;

const TYPE_DATA_BLOCK: u8 = 0x0;
const TYPE_KEYED_DATA_BLOCK: u8 = 0x4;
const SUBTYPE_ADDRESS: u8 = 0x0;
const SUBTYPE_OFFSET: u8 = 0x1;
const SUBTYPE_INVALIDATE: u8 = 0xf;

/// An SGL descriptor as the RDMA transport uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sgl {
    /// No data: a keyed data block of length 0.
    Null,
    /// Data in the capsule, `len` bytes at `offset` from the start of the in-capsule data area.
    Inline {
        /// Offset into the capsule's data area (the controller's ICDOFF, in bytes).
        offset: u64,
        /// Data length in bytes.
        len: u32,
    },
    /// Host memory the target reaches with RDMA READ/WRITE through a registered key.
    Keyed {
        /// I/O virtual address of the memory region.
        addr: u64,
        /// Length in bytes; at most [`KEYED_MAX_LEN`].
        len: u32,
        /// The remote key (rkey).
        key: u32,
        /// Ask the target to invalidate `key` with SEND_WITH_INVALIDATE.
        invalidate: bool,
    },
}

/// The rkey to register a fast-registration MR with next: the low 8 bits (the "key" the consumer
/// owns) are incremented, so a stale rkey of the previous registration no longer matches
/// (`ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey))`). The transport does this through the
/// key update it inlines; this states the rule for the tests (and is not built without them).
#[cfg(any(test, CONFIG_KUNIT = "y"))]
pub(crate) fn next_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// A descriptor that cannot be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LengthTooLarge;

impl Sgl {
    /// Encodes the descriptor.
    #[inline(always)]
    pub(crate) fn encode(&self) -> Result<[u8; DESC_LEN], LengthTooLarge> {
        let mut d = [0u8; DESC_LEN];
        self.encode_into(&mut d)?;
        Ok(d)
    }

    /// Encodes the descriptor into `d` (every byte written), in place: the transport writes it
    /// straight into the command's data pointer. On error `d` is unchanged.
    #[inline(always)]
    pub(crate) fn encode_into(&self, d: &mut [u8; DESC_LEN]) -> Result<(), LengthTooLarge> {
        match *self {
            Sgl::Null => {
                d[..15].fill(0);
                d[15] = (TYPE_KEYED_DATA_BLOCK << 4) | SUBTYPE_ADDRESS;
            }
            Sgl::Inline { offset, len } => {
                d[0..8].copy_from_slice(&offset.to_le_bytes());
                d[8..12].copy_from_slice(&len.to_le_bytes());
                d[12..15].fill(0);
                d[15] = (TYPE_DATA_BLOCK << 4) | SUBTYPE_OFFSET;
            }
            Sgl::Keyed {
                addr,
                len,
                key,
                invalidate,
            } => {
                if len > KEYED_MAX_LEN {
                    return Err(LengthTooLarge);
                }
                d[0..8].copy_from_slice(&addr.to_le_bytes());
                d[8..11].copy_from_slice(&len.to_le_bytes()[..3]);
                d[11..15].copy_from_slice(&key.to_le_bytes());
                let sub = if invalidate {
                    SUBTYPE_INVALIDATE
                } else {
                    SUBTYPE_ADDRESS
                };
                d[15] = (TYPE_KEYED_DATA_BLOCK << 4) | sub;
            }
        }
        Ok(())
    }
}

// The same tests run on the host (`make host-test`) and as KUnit in the kernel.
#[cfg(any(test, CONFIG_KUNIT = "y"))]
#[cfg_attr(not(test), kernel::macros::kunit_tests(rnvme_rdma_proto_sgl))]
mod tests {
    use super::*;

    #[test]
    fn null_sgl() {
        let mut want = [0u8; DESC_LEN];
        want[15] = 0x40;
        assert_eq!(Sgl::Null.encode(), Ok(want));
    }

    #[test]
    fn inline_sgl() {
        let mut want = [0u8; DESC_LEN];
        want[8..12].copy_from_slice(&[0x00, 0x10, 0, 0]);
        want[15] = 0x01;
        assert_eq!(
            Sgl::Inline {
                offset: 0,
                len: 4096
            }
            .encode(),
            Ok(want)
        );
    }

    #[test]
    fn keyed_sgl() {
        let k = Sgl::Keyed {
            addr: 0x1122_3344_5566_7788,
            len: 0x0a0b0c,
            key: 0xdead_beef,
            invalidate: true,
        };
        let want = [
            0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x0c, 0x0b, 0x0a, 0xef, 0xbe, 0xad,
            0xde, 0x4f,
        ];
        assert_eq!(k.encode(), Ok(want));
        let mut want = [0u8; DESC_LEN];
        want[8] = 1;
        want[11] = 1;
        want[15] = 0x40;
        assert_eq!(
            Sgl::Keyed {
                addr: 0,
                len: 1,
                key: 1,
                invalidate: false
            }
            .encode(),
            Ok(want)
        );
    }

    #[test]
    fn rkey_increment() {
        assert_eq!(next_rkey(0x1234_5600), 0x1234_5601);
        assert_eq!(next_rkey(0x1234_56ff), 0x1234_5600);
        assert_eq!(next_rkey(0xffff_ffff), 0xffff_ff00);
    }

    #[test]
    fn keyed_sgl_length_limit() {
        let ok = Sgl::Keyed {
            addr: 0,
            len: KEYED_MAX_LEN,
            key: 0,
            invalidate: false,
        };
        assert!(ok.encode().is_ok());
        let big = Sgl::Keyed {
            addr: 0,
            len: KEYED_MAX_LEN + 1,
            key: 0,
            invalidate: false,
        };
        assert_eq!(big.encode(), Err(LengthTooLarge));
    }
}
