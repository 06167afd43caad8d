// SPDX-License-Identifier: GPL-2.0

//! NVMe completion status decoding for messages (the core does the error handling).
//!
//! C header: [`include/linux/nvme.h`](srctree/include/linux/nvme.h)

#![deny(unsafe_code)]

/// The fields of a completion queue entry's 15-bit status (phase bit removed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Status {
    /// Status Code Type.
    pub(crate) sct: u8,
    /// Status Code.
    pub(crate) sc: u8,
    /// More information in the error log.
    pub(crate) more: bool,
    /// Do Not Retry.
    pub(crate) dnr: bool,
}

impl Status {
    /// Decodes a status as the kernel keeps it (`le16_to_cpu(cqe->status) >> 1`).
    pub(crate) fn from_raw(s: u16) -> Self {
        Status {
            sc: (s & 0xff) as u8,
            sct: ((s >> 8) & 0x7) as u8,
            more: s & 0x2000 != 0,
            dnr: s & 0x4000 != 0,
        }
    }

    /// A short name for the statuses a fabrics host meets while connecting.
    pub(crate) fn name(&self) -> &'static str {
        match (self.sct, self.sc) {
            (0, 0x00) => "success",
            (0, 0x01) => "invalid opcode",
            (0, 0x02) => "invalid field",
            (0, 0x06) => "internal error",
            (0, 0x07) => "command abort requested",
            (0, 0x0b) => "invalid namespace",
            (0, 0x0d) => "SGL invalid data length",
            (0, 0x0f) => "SGL descriptor type invalid",
            (0, 0x13) => "SGL offset invalid",
            (0, 0x20) => "namespace not ready",
            (1, 0x01) => "invalid queue identifier",
            (1, 0x02) => "invalid queue size",
            (1, 0x80) => "connect: incompatible format",
            (1, 0x81) => "connect: controller busy",
            (1, 0x82) => "connect: invalid parameters",
            (1, 0x83) => "connect: restart discovery",
            (1, 0x84) => "connect: invalid host",
            (1, 0x90) => "authentication required",
            (3, 0x02) => "ANA persistent loss",
            (3, 0x03) => "ANA inaccessible",
            (3, 0x04) => "ANA transition",
            (3, 0x70) => "host path error",
            (3, 0x71) => "host aborted command",
            (3, _) => "path error",
            (2, _) => "media error",
            _ => "unrecognized status",
        }
    }
}

// The same tests run on the host (`make host-test`) and as KUnit in the kernel.
#[cfg(any(test, CONFIG_KUNIT = "y"))]
#[cfg_attr(not(test), kernel::macros::kunit_tests(rnvme_rdma_proto_status))]
mod tests {
    use super::*;

    #[test]
    fn decode_fields() {
        // NVME_SC_CONNECT_INVALID_HOST | NVME_STATUS_DNR
        let s = Status::from_raw(0x184 | 0x4000);
        assert_eq!((s.sct, s.sc, s.dnr, s.more), (1, 0x84, true, false));
        assert_eq!(s.name(), "connect: invalid host");
        assert_eq!(Status::from_raw(0x2002).name(), "invalid field");
        assert!(Status::from_raw(0x2002).more);
        assert_eq!(Status::from_raw(0x370).name(), "host path error");
        assert_eq!(Status::from_raw(0x7ff).name(), "unrecognized status");
    }
}
