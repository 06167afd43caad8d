// SPDX-License-Identifier: GPL-2.0

//! T10 protection information that the RDMA device inserts, strips or checks: the signature
//! attributes of a registration, computed from the NVMe read or write command, the length the
//! data has on the wire, and the NVMe status of a failed signature check.
//!
//! The first step of the offload's design (`Documentation/t10-pi.rst`): pure code, tested on the
//! host and by KUnit, not yet used by the transport. What C's `nvme_rdma_set_sig_domain`,
//! `nvme_rdma_set_sig_attrs`, `nvme_rdma_set_prot_checks`, `nvme_rdma_map_sg_pi` (the wire
//! length) and `nvme_rdma_check_pi_status` compute, with two deliberate differences: the
//! application tag is checked when the command asks for it (`PRCHK_APP`; C never sets that
//! check), and a signature error of a kind this code does not know ends the command with
//! "Invalid Protection Information" (C leaves the target's status, success included).
//!
//! C headers: [`include/linux/nvme.h`](srctree/include/linux/nvme.h),
//! [`include/rdma/signature.h`](srctree/include/rdma/signature.h)

#![deny(unsafe_code)]

/// The command's `control` bits (the upper half of CDW12) for protection information.
pub(crate) const PRCHK_REF: u16 = 1 << 10;
/// Check the application tag.
pub(crate) const PRCHK_APP: u16 = 1 << 11;
/// Check the guard.
pub(crate) const PRCHK_GUARD: u16 = 1 << 12;
/// Protection information action: the controller inserts (writes) or strips (reads) the PI.
pub(crate) const PRACT: u16 = 1 << 13;

/// `IB_SIG_CHECK_*`: the bytes of the PI tuple the device checks.
pub(crate) const CHECK_GUARD: u8 = 0xc0;
/// The application tag's bytes.
pub(crate) const CHECK_APPTAG: u8 = 0x30;
/// The reference tag's bytes.
pub(crate) const CHECK_REFTAG: u8 = 0x0f;

/// NVMe statuses of a failed protection check (`NVME_SC_*`, type and code).
pub(crate) const SC_INVALID_PI: u16 = 0x181;
/// End-to-end Guard Check Error.
pub(crate) const SC_GUARD_CHECK: u16 = 0x282;
/// End-to-end Application Tag Check Error.
pub(crate) const SC_APPTAG_CHECK: u16 = 0x283;
/// End-to-end Reference Tag Check Error.
pub(crate) const SC_REFTAG_CHECK: u16 = 0x284;

/// The namespace's protection information type (`NVME_NS_DPS_PI_TYPE*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PiType {
    /// Type 1: the reference tag is the LBA's low 32 bits.
    Type1,
    /// Type 2: the reference tag comes from the command.
    Type2,
    /// Type 3: no reference tag (all ones escapes the checks).
    Type3,
}

impl PiType {
    /// The type of a namespace's `dps` (its low three bits); `None` without PI.
    pub(crate) fn from_dps(dps: u8) -> Option<Self> {
        match dps & 0x7 {
            1 => Some(PiType::Type1),
            2 => Some(PiType::Type2),
            3 => Some(PiType::Type3),
            _ => None,
        }
    }
}

/// The guard of the namespace's PI tuple. The RDMA signature offload knows one CRC, the 16-bit
/// T10-DIF CRC (`IB_T10DIF_CRC`); a namespace with a 64-bit guard cannot be offloaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Guard {
    /// The 16-bit CRC of an 8-byte tuple (`NVME_NVM_NS_16B_GUARD`).
    Crc16,
    /// The 64-bit CRC of a 16-byte tuple (`NVME_NVM_NS_64B_GUARD`).
    Crc64,
}

/// A namespace's PI format, as the offload needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Format {
    /// The PI type.
    pub(crate) pi_type: PiType,
    /// The guard.
    pub(crate) guard: Guard,
    /// log2 of the bytes of data each tuple protects (the integrity profile's `interval_exp`).
    pub(crate) interval_exp: u8,
}

/// The PI fields of a read or write command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RwPi {
    /// `control` (CDW12 bits 31:16).
    pub(crate) control: u16,
    /// The expected initial logical block reference tag (CDW14).
    pub(crate) reftag: u32,
    /// The expected logical block application tag (CDW15 bits 15:0).
    pub(crate) lbat: u16,
    /// Its mask (CDW15 bits 31:16).
    pub(crate) lbatm: u16,
}

/// One domain of a signature (`struct ib_t10_dif_domain`, guard type CRC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct T10Dif {
    /// Bytes of data per tuple.
    pub(crate) pi_interval: u16,
    /// The first block's reference tag.
    pub(crate) ref_tag: u32,
    /// The reference tag counts up per block (checked against it).
    pub(crate) ref_remap: bool,
    /// The application tag.
    pub(crate) app_tag: u16,
    /// Which bits of the application tag are checked.
    pub(crate) apptag_check_mask: u16,
    /// An application tag of all ones turns the checks off for its block.
    pub(crate) app_escape: bool,
    /// A reference tag of all ones too (type 3).
    pub(crate) ref_escape: bool,
}

/// What a signature registration says of the memory and the wire (`struct ib_sig_attrs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SigAttrs {
    /// The host's memory: `None` when it holds no PI (the device inserts or strips it).
    pub(crate) mem: Option<T10Dif>,
    /// The wire.
    pub(crate) wire: T10Dif,
    /// The `CHECK_*` bits: what the device checks.
    pub(crate) check_mask: u8,
}

/// Why a command's PI cannot be offloaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unsupported {
    /// A 64-bit guard: the device has no such CRC.
    Guard64,
    /// A protection interval the device's 16-bit field cannot hold.
    Interval,
}

/// The signature of a read or write with PI, and the command's `control` to send: with `PRACT`
/// the host's memory holds no PI, so only the wire has a domain and `PRACT` is cleared (the
/// device, not the controller, inserts or strips the PI); without it, both memory and wire carry
/// the same PI. The device checks the reference tag, the application tag and the guard as the
/// command's `PRCHK_*` bits ask.
pub(crate) fn sig_attrs(cmd: &RwPi, fmt: &Format) -> Result<(SigAttrs, u16), Unsupported> {
    if fmt.guard != Guard::Crc16 {
        return Err(Unsupported::Guard64);
    }
    if fmt.interval_exp > 15 {
        return Err(Unsupported::Interval);
    }
    let wire = T10Dif {
        pi_interval: 1 << fmt.interval_exp,
        ref_tag: cmd.reftag,
        ref_remap: cmd.control & PRCHK_REF != 0,
        app_tag: cmd.lbat,
        apptag_check_mask: cmd.lbatm,
        app_escape: true,
        ref_escape: fmt.pi_type == PiType::Type3,
    };
    let mut check_mask = 0;
    if cmd.control & PRCHK_REF != 0 {
        check_mask |= CHECK_REFTAG;
    }
    if cmd.control & PRCHK_APP != 0 {
        check_mask |= CHECK_APPTAG;
    }
    if cmd.control & PRCHK_GUARD != 0 {
        check_mask |= CHECK_GUARD;
    }
    let (mem, control) = if cmd.control & PRACT != 0 {
        (None, cmd.control & !PRACT)
    } else {
        (Some(wire), cmd.control)
    };
    Ok((
        SigAttrs {
            mem,
            wire,
            check_mask,
        },
        control,
    ))
}

/// The length of the data on the wire, for the keyed SGL: `mr_len`, the registration's length,
/// plus a tuple of `pi_size` bytes per protection interval when the host sent no PI (the device
/// inserts it). `None` if it does not fit the SGL's 24-bit length.
pub(crate) fn wire_len(mr_len: u32, fmt: &Format, pi_size: u8, host_sent_pi: bool) -> Option<u32> {
    let len = if host_sent_pi {
        u64::from(mr_len)
    } else {
        let tuples = u64::from(mr_len) >> fmt.interval_exp;
        u64::from(mr_len) + tuples * u64::from(pi_size)
    };
    u32::try_from(len).ok().filter(|&l| l <= 0xff_ffff)
}

/// What the device's signature check found (`ib_check_mr_status` with
/// `IB_MR_CHECK_SIG_STATUS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SigCheck {
    /// The check itself failed (the call returned an error).
    Failed,
    /// No signature error.
    Clean,
    /// A signature error of this `ib_sig_err_type`.
    Error(u32),
}

/// The NVMe status a completed command gets from its signature check, replacing the target's;
/// `None` keeps the target's.
pub(crate) fn sig_status(check: SigCheck) -> Option<u16> {
    match check {
        SigCheck::Clean => None,
        SigCheck::Failed => Some(SC_INVALID_PI),
        // `IB_SIG_BAD_GUARD`, `IB_SIG_BAD_REFTAG`, `IB_SIG_BAD_APPTAG`.
        SigCheck::Error(0) => Some(SC_GUARD_CHECK),
        SigCheck::Error(1) => Some(SC_REFTAG_CHECK),
        SigCheck::Error(2) => Some(SC_APPTAG_CHECK),
        // An error the device reported but this code cannot name: never a success.
        SigCheck::Error(_) => Some(SC_INVALID_PI),
    }
}

#[cfg_attr(not(test), kernel::macros::kunit_tests(rnvme_rdma_proto_pi))]
mod tests {
    use super::*;

    const FMT1: Format = Format {
        pi_type: PiType::Type1,
        guard: Guard::Crc16,
        interval_exp: 9,
    };

    fn cmd(control: u16) -> RwPi {
        RwPi {
            control,
            reftag: 0x1234_5678,
            lbat: 0xbeef,
            lbatm: 0xff00,
        }
    }

    #[test]
    fn pract_write_insert_read_strip() {
        // PRACT: the device inserts/strips, so no memory domain and PRACT is not sent on.
        let c = PRACT | PRCHK_GUARD | PRCHK_REF | 0x0007;
        let (sig, control) = sig_attrs(&cmd(c), &FMT1).unwrap();
        assert_eq!(sig.mem, None);
        assert_eq!(control, PRCHK_GUARD | PRCHK_REF | 0x0007);
        assert_eq!(sig.wire.pi_interval, 512);
        assert_eq!(sig.wire.ref_tag, 0x1234_5678);
        assert!(sig.wire.ref_remap);
        assert_eq!(sig.wire.app_tag, 0xbeef);
        assert_eq!(sig.wire.apptag_check_mask, 0xff00);
        assert!(sig.wire.app_escape);
        assert!(!sig.wire.ref_escape);
        assert_eq!(sig.check_mask, CHECK_GUARD | CHECK_REFTAG);
    }

    #[test]
    fn pass_both_domains_alike() {
        let (sig, control) = sig_attrs(&cmd(PRCHK_GUARD), &FMT1).unwrap();
        assert_eq!(control, PRCHK_GUARD);
        assert_eq!(sig.mem, Some(sig.wire));
        assert!(!sig.wire.ref_remap);
        assert_eq!(sig.check_mask, CHECK_GUARD);
    }

    #[test]
    fn checks_follow_prchk() {
        let mask = |c| sig_attrs(&cmd(c), &FMT1).unwrap().0.check_mask;
        assert_eq!(mask(0), 0);
        assert_eq!(mask(PRCHK_REF), CHECK_REFTAG);
        assert_eq!(mask(PRCHK_APP), CHECK_APPTAG);
        assert_eq!(mask(PRCHK_GUARD), CHECK_GUARD);
        assert_eq!(
            mask(PRCHK_REF | PRCHK_APP | PRCHK_GUARD | PRACT),
            CHECK_REFTAG | CHECK_APPTAG | CHECK_GUARD
        );
    }

    #[test]
    fn type3_escapes_reference_tag() {
        let fmt = Format {
            pi_type: PiType::Type3,
            ..FMT1
        };
        let (sig, _) = sig_attrs(&cmd(PRCHK_GUARD), &fmt).unwrap();
        assert!(sig.wire.ref_escape);
        assert!(sig.mem.unwrap().ref_escape);
        let (sig, _) = sig_attrs(
            &cmd(PRCHK_GUARD),
            &Format {
                pi_type: PiType::Type2,
                ..FMT1
            },
        )
        .unwrap();
        assert!(!sig.wire.ref_escape);
    }

    #[test]
    fn interval_and_guard_limits() {
        let fmt = |interval_exp, guard| Format {
            interval_exp,
            guard,
            ..FMT1
        };
        let c = cmd(PRACT);
        assert_eq!(
            sig_attrs(&c, &fmt(12, Guard::Crc16))
                .unwrap()
                .0
                .wire
                .pi_interval,
            4096
        );
        assert_eq!(
            sig_attrs(&c, &fmt(15, Guard::Crc16))
                .unwrap()
                .0
                .wire
                .pi_interval,
            32768
        );
        assert_eq!(
            sig_attrs(&c, &fmt(16, Guard::Crc16)),
            Err(Unsupported::Interval)
        );
        assert_eq!(
            sig_attrs(&c, &fmt(9, Guard::Crc64)),
            Err(Unsupported::Guard64)
        );
    }

    #[test]
    fn pi_type_from_dps() {
        assert_eq!(PiType::from_dps(0), None);
        assert_eq!(PiType::from_dps(1), Some(PiType::Type1));
        assert_eq!(PiType::from_dps(0x08 | 2), Some(PiType::Type2));
        assert_eq!(PiType::from_dps(3), Some(PiType::Type3));
        assert_eq!(PiType::from_dps(4), None);
    }

    #[test]
    fn wire_length() {
        // 4 KiB in 512-byte intervals: 8 tuples of 8 bytes when the device inserts them.
        assert_eq!(wire_len(4096, &FMT1, 8, false), Some(4160));
        assert_eq!(wire_len(4096, &FMT1, 8, true), Some(4096));
        let fmt4k = Format {
            interval_exp: 12,
            ..FMT1
        };
        assert_eq!(
            wire_len(1 << 20, &fmt4k, 8, false),
            Some((1 << 20) + 256 * 8)
        );
        // The keyed SGL's length has 24 bits.
        assert_eq!(wire_len(0xff_fff8, &FMT1, 8, true), Some(0xff_fff8));
        assert_eq!(wire_len(0xff_fe00, &FMT1, 8, false), None);
        assert_eq!(wire_len(u32::MAX, &FMT1, 8, false), None);
    }

    #[test]
    fn status_of_signature_check() {
        assert_eq!(sig_status(SigCheck::Clean), None);
        assert_eq!(sig_status(SigCheck::Failed), Some(SC_INVALID_PI));
        assert_eq!(sig_status(SigCheck::Error(0)), Some(SC_GUARD_CHECK));
        assert_eq!(sig_status(SigCheck::Error(1)), Some(SC_REFTAG_CHECK));
        assert_eq!(sig_status(SigCheck::Error(2)), Some(SC_APPTAG_CHECK));
        assert_eq!(sig_status(SigCheck::Error(7)), Some(SC_INVALID_PI));
    }
}
