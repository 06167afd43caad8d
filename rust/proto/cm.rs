// SPDX-License-Identifier: GPL-2.0

//! RDMA-CM private data of NVMe/RDMA (NVMe over Fabrics RDMA binding, `include/linux/nvme-rdma.h`).
//!
//! C header: [`include/linux/nvme-rdma.h`](srctree/include/linux/nvme-rdma.h)

#![deny(unsafe_code)]

/// Record format 1.0 of the private data.
pub(crate) const RECFMT_1_0: u16 = 0;

/// Size in bytes of `struct nvme_rdma_cm_req`.
pub(crate) const CM_REQ_LEN: usize = 32;
/// Size in bytes of `struct nvme_rdma_cm_rej`.
pub(crate) const CM_REJ_LEN: usize = 4;

/// The private data of an RDMA-CM connect request (`struct nvme_rdma_cm_req`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CmReq {
    /// Queue ID: 0 for the admin queue.
    pub(crate) qid: u16,
    /// Host receive queue size (number of receive buffers the host posts).
    pub(crate) hrqsize: u16,
    /// Host send queue size, 0's based (`sqsize`).
    pub(crate) hsqsize: u16,
    /// Controller ID for I/O queues, 0 for the admin queue.
    pub(crate) cntlid: u16,
}

impl CmReq {
    /// Encodes the request in its little-endian wire format; reserved bytes are zero.
    pub(crate) fn to_bytes(self) -> [u8; CM_REQ_LEN] {
        let mut b = [0u8; CM_REQ_LEN];
        b[0..2].copy_from_slice(&RECFMT_1_0.to_le_bytes());
        b[2..4].copy_from_slice(&self.qid.to_le_bytes());
        b[4..6].copy_from_slice(&self.hrqsize.to_le_bytes());
        b[6..8].copy_from_slice(&self.hsqsize.to_le_bytes());
        b[8..10].copy_from_slice(&self.cntlid.to_le_bytes());
        b
    }
}

/// Status codes a target puts into a CM REJECT (`enum nvme_rdma_cm_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmStatus {
    /// 0x01: invalid private data length.
    InvalidLen,
    /// 0x02: invalid record format.
    InvalidRecfmt,
    /// 0x03: invalid queue ID.
    InvalidQid,
    /// 0x04: invalid host send queue size.
    InvalidHsqsize,
    /// 0x05: invalid host receive queue size.
    InvalidHrqsize,
    /// 0x06: no resources.
    NoResources,
    /// 0x07: invalid IRD.
    InvalidIrd,
    /// 0x08: invalid ORD.
    InvalidOrd,
    /// 0x09: invalid controller ID.
    InvalidCntlid,
    /// Any other value.
    Unknown(u16),
}

impl CmStatus {
    /// Decodes a raw status value.
    pub(crate) fn from_raw(sts: u16) -> Self {
        match sts {
            0x01 => Self::InvalidLen,
            0x02 => Self::InvalidRecfmt,
            0x03 => Self::InvalidQid,
            0x04 => Self::InvalidHsqsize,
            0x05 => Self::InvalidHrqsize,
            0x06 => Self::NoResources,
            0x07 => Self::InvalidIrd,
            0x08 => Self::InvalidOrd,
            0x09 => Self::InvalidCntlid,
            other => Self::Unknown(other),
        }
    }

    /// A human-readable description, worded as the C driver's `nvme_rdma_cm_msg()`.
    /// The status code on the wire.
    pub(crate) fn code(&self) -> u16 {
        match *self {
            Self::InvalidLen => 0x01,
            Self::InvalidRecfmt => 0x02,
            Self::InvalidQid => 0x03,
            Self::InvalidHsqsize => 0x04,
            Self::InvalidHrqsize => 0x05,
            Self::NoResources => 0x06,
            Self::InvalidIrd => 0x07,
            Self::InvalidOrd => 0x08,
            Self::InvalidCntlid => 0x09,
            Self::Unknown(c) => c,
        }
    }

    pub(crate) fn message(&self) -> &'static str {
        match self {
            Self::InvalidLen => "invalid length",
            Self::InvalidRecfmt => "invalid record format",
            Self::InvalidQid => "invalid queue ID",
            Self::InvalidHsqsize => "invalid host SQ size",
            Self::InvalidHrqsize => "invalid host RQ size",
            Self::NoResources => "resource not found",
            Self::InvalidIrd => "invalid IRD",
            Self::InvalidOrd => "Invalid ORD",
            Self::InvalidCntlid => "invalid controller ID",
            Self::Unknown(_) => "unrecognized reason",
        }
    }
}

/// What a REJECT's consumer private data says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmRej {
    /// An NVMe/RDMA reject record with its status.
    Nvme(CmStatus),
    /// Private data too short or of an unknown record format: not an NVMe/RDMA reject.
    NotNvme,
}

/// Decodes the consumer private data of a REJECT (`struct nvme_rdma_cm_rej`).
pub(crate) fn parse_rej(data: &[u8]) -> CmRej {
    if data.len() < CM_REJ_LEN {
        return CmRej::NotNvme;
    }
    let recfmt = u16::from_le_bytes([data[0], data[1]]);
    if recfmt != RECFMT_1_0 {
        return CmRej::NotNvme;
    }
    CmRej::Nvme(CmStatus::from_raw(u16::from_le_bytes([data[2], data[3]])))
}

/// Decodes the controller receive queue size of an accept (`struct nvme_rdma_cm_rep`), if the
/// private data is a well-formed record. (The transport does not read the accept, as C does
/// not; tests only, not built without them.)
#[cfg(any(test, CONFIG_KUNIT = "y"))]
pub(crate) fn parse_rep(data: &[u8]) -> Option<u16> {
    if data.len() < 4 || u16::from_le_bytes([data[0], data[1]]) != RECFMT_1_0 {
        return None;
    }
    Some(u16::from_le_bytes([data[2], data[3]]))
}

// The same tests run on the host (`make host-test`) and as KUnit in the kernel.
#[cfg(any(test, CONFIG_KUNIT = "y"))]
#[cfg_attr(not(test), kernel::macros::kunit_tests(rnvme_rdma_proto_cm))]
mod tests {
    use super::*;

    #[test]
    fn cm_req_layout() {
        let b = CmReq {
            qid: 3,
            hrqsize: 128,
            hsqsize: 127,
            cntlid: 0x1234,
        }
        .to_bytes();
        assert_eq!(&b[..10], &[0, 0, 3, 0, 128, 0, 127, 0, 0x34, 0x12]);
        assert!(b[10..].iter().all(|&x| x == 0));
    }

    #[test]
    fn cm_rej_decoding() {
        assert_eq!(
            parse_rej(&[0, 0, 4, 0]),
            CmRej::Nvme(CmStatus::InvalidHsqsize)
        );
        assert_eq!(
            parse_rej(&[0, 0, 0x34, 0x12]),
            CmRej::Nvme(CmStatus::Unknown(0x1234))
        );
        assert_eq!(parse_rej(&[0, 0, 4]), CmRej::NotNvme);
        assert_eq!(parse_rej(&[1, 0, 4, 0]), CmRej::NotNvme);
        assert_eq!(CmStatus::from_raw(6).message(), "resource not found");
        assert_eq!(CmStatus::from_raw(0).message(), "unrecognized reason");
        for s in 1..=9 {
            assert_ne!(CmStatus::from_raw(s).message(), "unrecognized reason");
        }
    }

    #[test]
    fn cm_rep_decoding() {
        assert_eq!(parse_rep(&[0, 0, 32, 0]), Some(32));
        assert_eq!(parse_rep(&[0, 0]), None);
        assert_eq!(parse_rep(&[2, 0, 32, 0]), None);
    }
}
