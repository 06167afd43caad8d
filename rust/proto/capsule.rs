// SPDX-License-Identifier: GPL-2.0

//! The NVMe command capsule and completion as the transport builds and reads them: the
//! submission queue entry's fields it writes (`struct nvme_common_command`), the asynchronous
//! event request it sends itself, and the completion queue entry it parses (`struct
//! nvme_completion`). Layouts from `include/linux/nvme.h`.
//!
//! C header: [`include/linux/nvme.h`](srctree/include/linux/nvme.h)

#![deny(unsafe_code)]

use super::sgl::{LengthTooLarge, Sgl, DESC_LEN};

/// Size of a submission queue entry (`struct nvme_command`).
pub(crate) const SQE_LEN: usize = 64;
/// Size of a completion queue entry (`struct nvme_completion`).
pub(crate) const CQE_LEN: usize = 16;

/// Byte offset of the command flags (`nvme_common_command.flags`).
const FLAGS: usize = 1;
/// `NVME_CMD_SGL_METABUF`: the data pointer is an SGL descriptor.
const FLAGS_SGL_METABUF: u8 = 1 << 6;
/// Byte offset of the command identifier (`command_id`, little endian).
const COMMAND_ID: usize = 2;
/// Byte offset of the data pointer (`dptr`, one SGL descriptor).
const DPTR: usize = 24;
/// `nvme_admin_async_event`.
const ADMIN_ASYNC_EVENT: u8 = 0x0c;

/// The opcode of every Fabrics command (`nvme_fabrics_command`).
pub(crate) const FABRICS_OPCODE: u8 = 0x7f;
/// Byte offset of a Fabrics command's type (`nvmf_common_command.fctype`).
const FCTYPE: usize = 4;
/// Fabrics command types of DH-HMAC-CHAP (`nvme_fabrics_type_auth_send`, `_auth_receive`).
const FCTYPE_AUTH_SEND: u8 = 0x05;
const FCTYPE_AUTH_RECEIVE: u8 = 0x06;

/// A submission queue entry.
pub(crate) type Sqe = [u8; SQE_LEN];

/// Whether the command is a Fabrics command (Connect, Property Get/Set, Authentication).
pub(crate) fn is_fabrics(cmd: &Sqe) -> bool {
    cmd[0] == FABRICS_OPCODE
}

/// Whether the command is a Fabrics Authentication Send or Receive: a message of one
/// DH-HMAC-CHAP transaction, which belongs to the association it started on.
pub(crate) fn is_auth(cmd: &Sqe) -> bool {
    cmd[0] == FABRICS_OPCODE && matches!(cmd[FCTYPE], FCTYPE_AUTH_SEND | FCTYPE_AUTH_RECEIVE)
}

/// Points the command's data at `desc` (`flags |= NVME_CMD_SGL_METABUF`, `dptr.sgl = desc`), as
/// every command on a fabric carries an SGL.
#[inline]
pub(crate) fn set_sgl(cmd: &mut Sqe, desc: &[u8; DESC_LEN]) {
    cmd[FLAGS] |= FLAGS_SGL_METABUF;
    cmd[DPTR..DPTR + DESC_LEN].copy_from_slice(desc);
}

/// As [`set_sgl`] with the descriptor encoded in place, without a copy on the way (the data
/// path's). On error the command is unchanged.
#[inline(always)]
pub(crate) fn put_sgl(cmd: &mut Sqe, sgl: &Sgl) -> Result<(), LengthTooLarge> {
    let Some(d) = cmd[DPTR..].first_chunk_mut::<DESC_LEN>() else {
        return Err(LengthTooLarge);
    };
    sgl.encode_into(d)?;
    cmd[FLAGS] |= FLAGS_SGL_METABUF;
    Ok(())
}

/// The Asynchronous Event Request the transport posts itself (`nvme_rdma_submit_async_event`):
/// no data, identified by `command_id` (the first identifier past the admin tag set, which blk-mq
/// never hands out).
pub(crate) fn async_event(command_id: u16) -> Sqe {
    let mut c = [0u8; SQE_LEN];
    c[0] = ADMIN_ASYNC_EVENT;
    c[COMMAND_ID..COMMAND_ID + 2].copy_from_slice(&command_id.to_le_bytes());
    if let Ok(d) = Sgl::Null.encode() {
        set_sgl(&mut c, &d);
    }
    c
}

/// A completion queue entry, fields in CPU byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cqe {
    /// Command specific result (`result.u64`).
    pub(crate) result: u64,
    /// The identifier of the command completed.
    pub(crate) command_id: u16,
    /// Status field, phase bit included (bit 0).
    pub(crate) status: u16,
}

impl Cqe {
    /// Parses a received completion; `None` if `b` is shorter than a completion.
    pub(crate) fn parse(b: &[u8]) -> Option<Self> {
        let b: &[u8; CQE_LEN] = b.get(..CQE_LEN)?.try_into().ok()?;
        let mut r = [0u8; 8];
        r.copy_from_slice(&b[0..8]);
        Some(Self {
            result: u64::from_le_bytes(r),
            command_id: u16::from_le_bytes([b[12], b[13]]),
            status: u16::from_le_bytes([b[14], b[15]]),
        })
    }
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

    #[test]
    fn fabrics_commands_are_fabrics() {
        for t in [0x00, 0x01, 0x04, 0x05, 0x06] {
            assert!(is_fabrics(&fabrics(t)));
        }
        let mut read = [0u8; SQE_LEN];
        read[0] = 0x02;
        assert!(!is_fabrics(&read));
    }

    /// An I/O or admin command whose fifth byte happens to be 5 is not a Fabrics command.
    #[test]
    fn non_fabrics_opcode_is_not() {
        let mut c = [0u8; 64];
        c[0] = 0x02;
        c[4] = 0x05;
        assert!(!is_auth(&c));
    }

    #[test]
    fn put_sgl_writes_what_set_sgl_writes_over_any_old_command() {
        let keyed = Sgl::Keyed {
            addr: 0x1122_3344_5566_7788,
            len: 0x1000,
            key: 0xabcd_ef01,
            invalidate: true,
        };
        let inline = Sgl::Inline {
            offset: 0,
            len: 512,
        };
        for sgl in [Sgl::Null, inline, keyed] {
            // (the command's old bytes, e.g. a previous use's descriptor, must all be replaced)
            let mut a = [0xa5u8; 64];
            let mut b = a;
            let d = sgl.encode();
            assert!(d.is_ok());
            set_sgl(&mut a, &d.unwrap_or_default());
            assert_eq!(put_sgl(&mut b, &sgl), Ok(()));
            assert_eq!(a, b);
        }
        let mut c = [0x5au8; 64];
        let too_long = Sgl::Keyed {
            addr: 0,
            len: 1 << 24,
            key: 0,
            invalidate: false,
        };
        assert_eq!(put_sgl(&mut c, &too_long), Err(LengthTooLarge));
        assert!(c.iter().all(|&x| x == 0x5a));
    }

    #[test]
    fn set_sgl_marks_the_command_and_writes_dptr() {
        let mut c = [0u8; 64];
        c[1] = 0x01; // a fused bit stays
        let d: [u8; 16] = core::array::from_fn(|i| i as u8 + 1);
        set_sgl(&mut c, &d);
        assert_eq!(c[1], 0x41);
        assert_eq!(&c[24..40], &d);
        assert!(c[..1]
            .iter()
            .chain(&c[2..24])
            .chain(&c[40..])
            .all(|&b| b == 0));
    }

    /// Byte for byte what the C driver builds: opcode 0x0c, SGL flag, command ID 31 (the admin
    /// tag set's depth), a null keyed SGL (type 4, subtype 0, length 0).
    #[test]
    fn async_event_request() {
        let c = async_event(31);
        let mut want = [0u8; 64];
        want[0] = 0x0c;
        want[1] = 0x40;
        want[2] = 31;
        want[39] = 0x40;
        assert_eq!(c, want);
    }

    #[test]
    fn cqe_fields_are_little_endian() {
        let b = [
            1, 2, 3, 4, 5, 6, 7, 8, // result
            0xaa, 0xbb, 0xcc, 0xdd, // sq_head, sq_id (not read)
            0x34, 0x12, // command_id
            0x03, 0x80, // status
        ];
        assert_eq!(
            Cqe::parse(&b),
            Some(Cqe {
                result: 0x0807_0605_0403_0201,
                command_id: 0x1234,
                status: 0x8003,
            })
        );
    }

    #[test]
    fn short_cqe_is_refused() {
        assert_eq!(Cqe::parse(&[0u8; 15]), None);
        assert!(Cqe::parse(&[0u8; 17]).is_some());
    }
}
