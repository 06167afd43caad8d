// SPDX-License-Identifier: GPL-2.0

//! What a response means for the memory region of its command: the rule of NVMe/RDMA's
//! SEND-with-invalidate (NVMe over Fabrics 1.1 RDMA transport binding, "Send with Invalidate").

#![deny(unsafe_code)]

/// What the host must do with a command's fast-registered MR once its response arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Invalidation {
    /// The command had no MR and the target invalidated nothing: end the request.
    Nothing,
    /// The target invalidated the command's MR (SEND with invalidate naming its rkey): end the
    /// request.
    Remote,
    /// The target did not invalidate the MR: post a LOCAL_INV; its completion ends the request.
    Local,
    /// The target invalidated an rkey that is not this command's (another command's MR, or one
    /// the command never had). The command's own MR may still be open to the target, so the
    /// request must not end now: the queue goes to error recovery, whose teardown stops the QP
    /// (no RDMA access remains) before it ends the request as aborted for a retry. The C driver
    /// ends the request at once with the target's status, leaving its MR valid while the pages
    /// are handed back.
    Bogus,
}

/// The decision for a response: `mr_rkey` is the rkey of the command's MR (`None`: no MR),
/// `invalidated` the rkey the target's SEND invalidated (`None`: a plain SEND).
pub(crate) fn on_response(mr_rkey: Option<u32>, invalidated: Option<u32>) -> Invalidation {
    match (mr_rkey, invalidated) {
        (None, None) => Invalidation::Nothing,
        (Some(_), None) => Invalidation::Local,
        (Some(mine), Some(inv)) if mine == inv => Invalidation::Remote,
        (_, Some(_)) => Invalidation::Bogus,
    }
}

// The same tests run on the host (`make host-test`) and as KUnit in the kernel.
#[cfg(any(test, CONFIG_KUNIT = "y"))]
#[cfg_attr(not(test), kernel::macros::kunit_tests(rnvme_rdma_proto_inval))]
mod tests {
    use super::*;

    #[test]
    fn plain_send_without_mr_ends() {
        assert_eq!(on_response(None, None), Invalidation::Nothing);
    }

    #[test]
    fn plain_send_with_mr_invalidates_locally() {
        assert_eq!(on_response(Some(0x1234_5601), None), Invalidation::Local);
    }

    #[test]
    fn invalidating_own_rkey_ends() {
        assert_eq!(
            on_response(Some(0x1234_5601), Some(0x1234_5601)),
            Invalidation::Remote
        );
    }

    /// The same MR with an older key (the low byte is the key's generation) is someone else's.
    #[test]
    fn invalidating_other_rkey_is_bogus() {
        assert_eq!(
            on_response(Some(0x1234_5601), Some(0x1234_5600)),
            Invalidation::Bogus
        );
        assert_eq!(
            on_response(Some(0x1234_5601), Some(0x9999_0001)),
            Invalidation::Bogus
        );
    }

    #[test]
    fn invalidating_without_mr_is_bogus() {
        assert_eq!(on_response(None, Some(0)), Invalidation::Bogus);
        assert_eq!(on_response(None, Some(0x1234_5601)), Invalidation::Bogus);
    }
}
