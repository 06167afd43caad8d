// SPDX-License-Identifier: GPL-2.0

//! The submission queue entry (NVMe command capsule) fields the transport reads.

#![deny(unsafe_code)]

/// The opcode of every Fabrics command (`nvme_fabrics_command`).
pub(crate) const FABRICS_OPCODE: u8 = 0x7f;
/// Byte offset of a Fabrics command's type (`nvmf_common_command.fctype`).
const FCTYPE: usize = 4;
/// Fabrics command types of DH-HMAC-CHAP (`nvme_fabrics_type_auth_send`, `_auth_receive`).
const FCTYPE_AUTH_SEND: u8 = 0x05;
const FCTYPE_AUTH_RECEIVE: u8 = 0x06;

/// Whether the command is a Fabrics Authentication Send or Receive: a message of one
/// DH-HMAC-CHAP transaction, which belongs to the association it started on.
pub(crate) fn is_auth(cmd: &[u8; 64]) -> bool {
    cmd[0] == FABRICS_OPCODE && matches!(cmd[FCTYPE], FCTYPE_AUTH_SEND | FCTYPE_AUTH_RECEIVE)
}

// The same tests run on the host (`make host-test`) and as KUnit in the kernel.
#[cfg(any(test, CONFIG_KUNIT = "y"))]
#[cfg_attr(not(test), kernel::macros::kunit_tests(rnvme_rdma_proto_capsule))]
mod tests {
    use super::*;

    fn fabrics(fctype: u8) -> [u8; 64] {
        let mut c = [0u8; 64];
        c[0] = FABRICS_OPCODE;
        c[4] = fctype;
        c
    }

    #[test]
    fn auth_send_and_receive_are_auth() {
        assert!(is_auth(&fabrics(0x05)));
        assert!(is_auth(&fabrics(0x06)));
    }

    #[test]
    fn other_fabrics_commands_are_not() {
        // Property Set, Connect, Property Get.
        for t in [0x00, 0x01, 0x04] {
            assert!(!is_auth(&fabrics(t)));
        }
    }

    /// An I/O or admin command whose fifth byte happens to be 5 is not a Fabrics command.
    #[test]
    fn non_fabrics_opcode_is_not() {
        let mut c = [0u8; 64];
        c[0] = 0x02;
        c[4] = 0x05;
        assert!(!is_auth(&c));
    }
}
