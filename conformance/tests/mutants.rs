//! The suite can fail: each mutant backend deviates from the spec in one way, and the named
//! case must catch it.

use mlx5_conformance::{Outcome, Target, run_target, suite};
use mlx5_dv::errno::{EINVAL, EREMOTEIO};
use mlx5_dv::prelude::*;
use mlx5_dv::*;
use mlx5_sim::{Profile, ShippedProfiles, Simulator};
use rstest::rstest;

#[derive(Debug, Clone, Copy)]
enum Mutation {
    RoundToPowerOfTwo,
    SaturateInsteadOfWrap,
    ZeroFlagsEinval,
    AcceptUnknownCompMask,
    TagByteSet,
    UpdateTagAlwaysAccepted,
    MkeyCheckOkOnPlainMkey,
    DeallocPdIgnoresMkeys,
    LeakEremoteio,
    DropCrc32Cap,
    ExplicitDevxFallsBack,
    EchoEveryCompMaskBit,
    PollDropsImmediate,
    ReadByteLenZero,
    MaxInlineOffByFour,
    CqCapacityPowerOfTwo,
    ConfigureAlwaysInline,
    PostSucceedsBeforeRts,
    LocalInvIgnored,
    NoSmallFence,
    ScatterToCqeAlwaysOff,
    WriteOneByteOff,
    MrListIgnoresSecondEntry,
    SigDomainsSwapped,
    CheckMaskAlwaysAll,
    ApptagReportedAsReftag,
    OffsetInDataBytes,
    SigValuesTruncatedTo32Bits,
    SigErrorReportedTwice,
    NoAsyncEvents,
    CancelFindsNothing,
    CopyMaskFlagDropped,
    RtrLoopsBackWhateverTheQpn,
    SendSgesTruncated,
    RecvFullReportedAsEinval,
    MaxRecvSgeEchoed,
    MemcpyRefusedWithEinval,
    UmrMaskWithoutLen,
    RingFenceDropped,
    SecondLoginAllowed,
    LogoutWithoutSessionOk,
    DekErrorReportedReady,
    DekOpaqueLost,
    CryptoSetterCompMaskIgnored,
    DekPurposeUnchecked,
    CryptoKeytagIgnored,
    CryptoDirectionFlipped,
    MsiVectorsFromZero,
    DestroyEqLeaksEremoteio,
    QueryEqnAnyVector,
    NoCompletionEqe,
    MemcpyOneByteShort,
    MemcpyMaxLengthZero,
    RawWqeLastSegmentDropped,
}

/// A layer that makes the simulator deviate in one way.
struct Mutant {
    m: Mutation,
    last_err: Option<MkeyErr>,
}

fn mutate_op(m: Mutation, o: WrOp) -> WrOp {
    match (m, o) {
        (
            Mutation::ConfigureAlwaysInline,
            WrOp::MkeyConfigure { wr_id, flags, mkey, num_setters, conf_flags, comp_mask },
        ) => WrOp::MkeyConfigure { wr_id, flags: flags | SendFlags::INLINE, mkey, num_setters, conf_flags, comp_mask },
        (
            Mutation::MemcpyOneByteShort,
            WrOp::Memcpy { wr_id, flags, dest_lkey, dest_addr, src_lkey, src_addr, length },
        ) => WrOp::Memcpy { wr_id, flags, dest_lkey, dest_addr, src_lkey, src_addr, length: length.saturating_sub(1) },
        // The provider reads one 16-byte unit fewer than the control segment's ds says.
        (Mutation::RawWqeLastSegmentDropped, WrOp::RawWqe { wr_id, mut wqe }) => {
            if let Some(b) = wqe.get_mut(7) {
                *b = (*b & !0x3f) | (*b & 0x3f).saturating_sub(1);
            }
            WrOp::RawWqe { wr_id, wqe }
        }
        (Mutation::WriteOneByteOff, WrOp::RdmaWrite { wr_id, flags, rkey, remote_addr, sge }) => {
            WrOp::RdmaWrite { wr_id, flags, rkey, remote_addr: remote_addr + 1, sge }
        }
        (Mutation::MrListIgnoresSecondEntry, WrOp::MrList { wr_id, flags, mkey, access, mut sge }) if sge.len() > 1 => {
            sge[1].addr += 1;
            WrOp::MrList { wr_id, flags, mkey, access, sge }
        }
        (Mutation::SigDomainsSwapped, WrOp::SetMkeySigBlock(a)) => {
            WrOp::SetMkeySigBlock(SigBlockAttr { mem: a.wire, wire: a.mem, ..a })
        }
        (Mutation::CheckMaskAlwaysAll, WrOp::SetMkeySigBlock(a)) => {
            WrOp::SetMkeySigBlock(SigBlockAttr { check_mask: 0xff, ..a })
        }
        (Mutation::CopyMaskFlagDropped, WrOp::SetMkeySigBlock(a)) => {
            WrOp::SetMkeySigBlock(SigBlockAttr { flags: SigBlockAttrFlags::empty(), ..a })
        }
        (Mutation::CryptoSetterCompMaskIgnored, WrOp::SetMkeyCrypto(a)) => {
            WrOp::SetMkeyCrypto(CryptoAttr { comp_mask: 0, ..a })
        }
        // The device would not check the keytag: every mkey carries the DEK's own.
        (Mutation::CryptoKeytagIgnored, WrOp::SetMkeyCrypto(a)) => {
            WrOp::SetMkeyCrypto(CryptoAttr { keytag: *b"KEYTAG42", ..a })
        }
        (Mutation::CryptoDirectionFlipped, WrOp::SetMkeyCrypto(a)) => {
            WrOp::SetMkeyCrypto(CryptoAttr { encrypt_on_tx: !a.encrypt_on_tx, ..a })
        }
        (_, o) => o,
    }
}

impl Layer for Mutant {
    fn before(&mut self, call: &mut Call) -> Option<Reply> {
        match (self.m, call) {
            (Mutation::AcceptUnknownCompMask, Call::OpenDevice { attr: Some(a), .. }) => a.comp_mask = 0,
            (Mutation::ExplicitDevxFallsBack, Call::OpenDevice { attr, .. })
                if attr.is_some_and(|a| a.flags == ContextFlags::DEVX) =>
            {
                *attr = None
            }
            (Mutation::UpdateTagAlwaysAccepted, Call::CreateMkey { attr }) => {
                attr.create_flags.remove(MkeyInitFlags::UPDATE_TAG)
            }
            (Mutation::DekPurposeUnchecked, Call::DekCreate { attr, .. }) => {
                attr.key_purpose = crypto::KEY_PURPOSE_AES_XTS
            }
            (Mutation::ZeroFlagsEinval, Call::CreateMkey { attr }) if attr.create_flags.is_empty() => {
                return Some(Reply::CreateMkey(Err(Error::new(Op::CreateMkey, EINVAL, "mutant"))));
            }
            (Mutation::ScatterToCqeAlwaysOff, Call::CreateQp { attr }) => {
                if let Some(dv) = attr.dv.as_mut() {
                    dv.comp_mask |= dv_qp::MASK_QP_CREATE_FLAGS;
                    dv.create_flags |= dv_qp::CREATE_DISABLE_SCATTER_TO_CQE;
                }
            }
            (Mutation::RtrLoopsBackWhateverTheQpn, Call::ModifyQp { qp, attr }) => {
                if let Some(d) = attr.dest.as_mut() {
                    d.dest_qp_num = qp.qp_num;
                }
            }
            (Mutation::SendSgesTruncated, Call::PostSend { ops, .. }) => {
                for o in ops.iter_mut() {
                    if let WrOp::RdmaWrite { sge, .. } = o {
                        sge.truncate(4);
                    }
                }
            }
            (m, Call::PostSend { ops, .. }) => {
                let taken = std::mem::take(ops);
                *ops = taken
                    .into_iter()
                    .filter(|o| !matches!((m, o), (Mutation::LocalInvIgnored, WrOp::LocalInv { .. })))
                    .map(|o| mutate_op(m, o))
                    .collect();
            }
            _ => {}
        }
        None
    }

    fn after(&mut self, call: &Call, reply: &mut Reply) {
        match (self.m, call, reply) {
            // Byte 3 is the opcode; the UMR's mkey_mask ends at byte 16 + 16.
            (Mutation::UmrMaskWithoutLen, _, Reply::SqWqe(Ok(w))) if w.get(3) == Some(&prm::wqe::opcode::UMR) => {
                if let Some(b) = w.get_mut(31) {
                    *b &= !(prm::wqe::umr_ctrl::mkey_mask::LEN as u8);
                }
            }
            // fm is the top three bits of byte 11.
            (Mutation::RingFenceDropped, _, Reply::SqWqe(Ok(w))) => {
                if let Some(b) = w.get_mut(11) {
                    *b &= 0x1f;
                }
            }
            (Mutation::DropCrc32Cap, _, Reply::QueryDevice(Ok(r))) => r.sig_caps.crc_type &= !sig_cap::CRC32,
            (Mutation::MsiVectorsFromZero, _, Reply::DevxAllocMsiVector(Ok(m))) => m.vector -= 1,
            (Mutation::DestroyEqLeaksEremoteio, _, r @ Reply::DevxDestroyEq(Err(_))) => {
                *r = Reply::DevxDestroyEq(Err(Error::new(Op::DevxDestroyEq, EREMOTEIO, "mutant")));
            }
            (Mutation::QueryEqnAnyVector, _, r @ Reply::DevxQueryEqn(Err(_))) => *r = Reply::DevxQueryEqn(Ok(0)),
            // The completion EQE lost: its type byte reads as a port change.
            (Mutation::NoCompletionEqe, Call::ReadBuf { len: 64, .. }, Reply::ReadBuf(Ok(b)))
                if b[1] == 0 && b[63] == 0 =>
            {
                b[1] = 0x09;
            }
            (Mutation::EchoEveryCompMaskBit, _, Reply::QueryDevice(Ok(r))) => {
                r.comp_mask = MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD
            }
            (Mutation::DeallocPdIgnoresMkeys, _, r @ Reply::DeallocPd(Err(_)))
                if r.error().is_some_and(|e| e.errno() == errno::EBUSY) =>
            {
                *r = Reply::DeallocPd(Ok(()));
            }
            (Mutation::LeakEremoteio, _, r @ Reply::CreateMkey(Err(_)))
                if r.error().is_some_and(|e| e.cmd_status().is_some()) =>
            {
                *r = Reply::CreateMkey(Err(Error::new(Op::CreateMkey, EREMOTEIO, "mutant")));
            }
            (Mutation::RoundToPowerOfTwo, Call::CreateMkey { attr }, Reply::CreateMkey(Ok(m))) => {
                m.max_entries = attr.max_entries.checked_next_power_of_two().unwrap_or(0)
            }
            (Mutation::SaturateInsteadOfWrap, Call::CreateMkey { attr }, Reply::CreateMkey(Ok(m)))
                if attr.max_entries > 65532 =>
            {
                m.max_entries = 65532
            }
            (Mutation::TagByteSet, _, Reply::CreateMkey(Ok(m))) => {
                m.lkey |= 1;
                m.rkey |= 1;
            }
            (Mutation::MkeyCheckOkOnPlainMkey, _, r @ Reply::MkeyCheck(Err(_)))
                if r.error().is_some_and(|e| e.errno() == EINVAL) =>
            {
                *r = Reply::MkeyCheck(Ok(MkeyErr::NONE));
            }
            (Mutation::ApptagReportedAsReftag, _, Reply::MkeyCheck(Ok(e)))
                if e.err_type == MkeyErrType::SigBlockBadApptag =>
            {
                e.err_type = MkeyErrType::SigBlockBadReftag
            }
            (Mutation::OffsetInDataBytes, _, Reply::MkeyCheck(Ok(e))) => e.sig.offset = e.sig.offset / 520 * 512,
            (Mutation::SigValuesTruncatedTo32Bits, _, Reply::MkeyCheck(Ok(e))) => {
                e.sig.expected_value &= 0xffff_ffff;
                e.sig.actual_value &= 0xffff_ffff;
            }
            (Mutation::SigErrorReportedTwice, _, Reply::MkeyCheck(Ok(e))) => {
                if *e == MkeyErr::NONE {
                    *e = self.last_err.take().unwrap_or(*e);
                } else {
                    self.last_err = Some(*e);
                }
            }
            (Mutation::CqCapacityPowerOfTwo, _, Reply::CreateCq(Ok(cq))) => cq.cqe += 1,
            (Mutation::PollDropsImmediate, _, Reply::PollCq(Ok(wcs))) => wcs.iter_mut().for_each(|wc| wc.imm_data = 0),
            (Mutation::ReadByteLenZero, _, Reply::PollCq(Ok(wcs))) => {
                wcs.iter_mut().filter(|wc| wc.opcode == wc_opcode::RDMA_READ).for_each(|wc| wc.byte_len = 0)
            }
            (Mutation::MaxInlineOffByFour, _, Reply::CreateQp(Ok(q))) => q.cap.max_inline_data += 4,
            (Mutation::PostSucceedsBeforeRts, _, r @ Reply::PostSend(Err(_)))
                if r.error().is_some_and(|e| e.errno() == EINVAL) =>
            {
                *r = Reply::PostSend(Ok(()));
            }
            (Mutation::CancelFindsNothing, _, Reply::CancelPostedSendWrs(Ok(n))) => *n = 0,
            (Mutation::MemcpyMaxLengthZero, _, Reply::QueryDevice(Ok(q))) => q.max_wr_memcpy_length = 0,
            (Mutation::RecvFullReportedAsEinval, _, r @ Reply::PostRecv(Err(_)))
                if r.error().is_some_and(|e| e.errno() == errno::ENOMEM) =>
            {
                *r = Reply::PostRecv(Err(Error::new(Op::PostRecv, EINVAL, "mutant")));
            }
            (Mutation::MemcpyRefusedWithEinval, Call::CreateQp { attr }, r @ Reply::CreateQp(Err(_)))
                if attr.dv.is_some_and(|d| d.send_ops_flags.contains(dv_qp::WITH_MEMCPY)) =>
            {
                *r = Reply::CreateQp(Err(Error::new(Op::CreateQp, EINVAL, "mutant")));
            }
            (Mutation::MaxRecvSgeEchoed, Call::CreateQp { attr }, Reply::CreateQp(Ok(q))) => {
                q.cap.max_recv_sge = attr.cap.max_recv_sge
            }
            (Mutation::NoAsyncEvents, _, Reply::GetAsyncEvent(Ok(e))) => *e = None,
            (Mutation::SecondLoginAllowed, _, r @ Reply::CryptoLogin(Err(_)))
                if r.error().is_some_and(|e| e.errno() == errno::EEXIST) =>
            {
                *r = Reply::CryptoLogin(Ok(()));
            }
            (Mutation::LogoutWithoutSessionOk, _, r @ Reply::CryptoLogout(Err(_)))
                if r.error().is_some_and(|e| e.errno() == errno::ENOENT) =>
            {
                *r = Reply::CryptoLogout(Ok(()));
            }
            (Mutation::DekErrorReportedReady, _, Reply::DekQuery(Ok(a))) => a.state = DekState::Ready,
            (Mutation::DekOpaqueLost, _, Reply::DekQuery(Ok(a))) => a.opaque = [0; 8],
            _ => {}
        }
    }

    fn wqes(&mut self, wqes: &mut Vec<WqeRecord>) {
        if let Mutation::NoSmallFence = self.m {
            wqes.iter_mut().for_each(|r| r.small_fence = false);
        }
    }
}

#[rstest]
#[case(Mutation::RoundToPowerOfTwo, "cx6dx", "mkey.max_entries_rounding")]
#[case(Mutation::SaturateInsteadOfWrap, "cx6dx", "mkey.max_entries_rounding")]
#[case(Mutation::ZeroFlagsEinval, "cx6dx", "mkey.zero_create_flags")]
#[case(Mutation::AcceptUnknownCompMask, "cx6dx", "context.unknown_comp_mask")]
#[case(Mutation::TagByteSet, "cx6dx", "mkey.keys_are_index_shifted")]
#[case(Mutation::TagByteSet, "cx6dx", "mkey.keys_match_mailbox_index")]
#[case(Mutation::UpdateTagAlwaysAccepted, "cx6dx-no-update-tag", "mkey.update_tag_follows_kernel")]
#[case(Mutation::UpdateTagAlwaysAccepted, "cx6dx-no-update-tag", "mkey.every_flag_combination")]
#[case(Mutation::MkeyCheckOkOnPlainMkey, "cx6dx", "mkey_check.non_signature_mkey")]
#[case(Mutation::DeallocPdIgnoresMkeys, "cx6dx", "misuse.dealloc_pd_with_live_mkey")]
#[case(Mutation::LeakEremoteio, "cx6dx", "mkey.create_status_maps_to_errno")]
#[case(Mutation::DropCrc32Cap, "cx5", "caps.signature_caps_values")]
#[case(Mutation::ExplicitDevxFallsBack, "cx6dx-no-devx", "context.explicit_devx_follows_kernel")]
#[case(Mutation::EchoEveryCompMaskBit, "cx6dx", "caps.comp_mask_echo")]
#[case(Mutation::PollDropsImmediate, "cx6dx", "traffic.write_read_send_loopback")]
#[case(Mutation::ReadByteLenZero, "cx6dx", "traffic.write_read_send_two_devices")]
#[case(Mutation::MaxInlineOffByFour, "cx6dx", "qp.umr_overhead_and_max_inline_written_back")]
#[case(Mutation::CqCapacityPowerOfTwo, "cx6dx", "cq.capacity_rounds_to_power_of_two_minus_one")]
#[case(Mutation::ConfigureAlwaysInline, "cx6dx", "umr.configure_needs_inline")]
#[case(Mutation::PostSucceedsBeforeRts, "cx6dx", "wr.complete_einval_until_rts")]
#[case(Mutation::PostSucceedsBeforeRts, "cx6dx", "wr.first_error_posts_nothing")]
#[case(Mutation::LocalInvIgnored, "cx6dx", "inval.local_inv_frees_the_mkey")]
#[case(Mutation::NoSmallFence, "cx6dx", "umr.next_wqe_carries_small_fence")]
#[case(Mutation::UmrMaskWithoutLen, "cx6dx", "wqe.mkey_configure_list_bytes")]
#[case(Mutation::RingFenceDropped, "cx6dx", "wqe.rdma_write_after_umr_bytes")]
#[case(Mutation::ScatterToCqeAlwaysOff, "cx6dx", "scatter.scatter_to_cqe_misses_the_mkey")]
#[case(Mutation::WriteOneByteOff, "cx6dx", "traffic.write_read_send_loopback")]
#[case(Mutation::WriteOneByteOff, "cx6dx", "umr.list_layout_is_zero_based")]
#[case(Mutation::MrListIgnoresSecondEntry, "cx6dx", "umr.list_layout_is_zero_based")]
#[case(Mutation::SigDomainsSwapped, "cx7", "sig.t10dif_crc_insert_and_strip")]
#[case(Mutation::SigDomainsSwapped, "cx7", "sig.memory_pi_validated_and_stripped_on_send")]
#[case(Mutation::CheckMaskAlwaysAll, "cx7", "sig.check_mask_selects_input_bytes")]
#[case(Mutation::ApptagReportedAsReftag, "cx7", "sig.t10dif_errors_first_error_first")]
#[case(Mutation::OffsetInDataBytes, "cx7", "sig.t10dif_errors_first_error_first")]
#[case(Mutation::OffsetInDataBytes, "cx7", "sig.crc64_guard_error_is_64_bits_wide")]
#[case(Mutation::SigValuesTruncatedTo32Bits, "cx7", "sig.crc64_guard_error_is_64_bits_wide")]
#[case(Mutation::SigErrorReportedTwice, "cx7", "sig.t10dif_errors_first_error_first")]
#[case(Mutation::SigErrorReportedTwice, "cx7", "sig.one_error_per_arm")]
#[case(Mutation::NoAsyncEvents, "cx7", "sig.pipelining_drains_to_sqd")]
#[case(Mutation::CancelFindsNothing, "cx7", "sig.pipelining_drains_to_sqd")]
#[case(Mutation::CopyMaskFlagDropped, "cx7", "sig.automatic_and_user_copy_mask")]
#[case(Mutation::CopyMaskFlagDropped, "cx7", "sig.copy_mask_needs_same_block_structure")]
#[case(Mutation::RtrLoopsBackWhateverTheQpn, "cx6dx", "fabric.path_to_no_qp_times_out")]
#[case(Mutation::SendSgesTruncated, "cx6dx", "wr.send_sges_beyond_max_send_sge")]
#[case(Mutation::RecvFullReportedAsEinval, "cx6dx", "wr.post_recv_full_queue_before_sge_count")]
#[case(Mutation::MaxRecvSgeEchoed, "cx6dx", "qp.max_recv_sge_zero_without_a_receive_queue")]
#[case(Mutation::MemcpyRefusedWithEinval, "cx6dx", "qp.memcpy_needs_dma_mmo")]
#[case(Mutation::MemcpyOneByteShort, "bf3", "qp.dma_memcpy_copies_within_the_pd")]
#[case(Mutation::MemcpyMaxLengthZero, "bf3", "qp.dma_memcpy_length_limits")]
#[case(Mutation::RawWqeLastSegmentDropped, "cx6dx", "wr.raw_wqe_runs_as_written")]
#[case(Mutation::SecondLoginAllowed, "cx6dx", "crypto.login_session_and_logout")]
#[case(Mutation::LogoutWithoutSessionOk, "cx5", "crypto.no_session")]
#[case(Mutation::LogoutWithoutSessionOk, "cx6dx", "crypto.login_session_and_logout")]
#[case(Mutation::DekErrorReportedReady, "bf3", "crypto.dek_state_from_device")]
#[case(Mutation::DekOpaqueLost, "bf3", "crypto.dek_plaintext_lifecycle")]
#[case(Mutation::DekOpaqueLost, "cx7", "crypto.dek_wrapped_lifecycle")]
#[case(Mutation::CryptoSetterCompMaskIgnored, "cx6dx", "crypto.setter_errors")]
#[case(Mutation::DekPurposeUnchecked, "cx6dx", "crypto.dek_field_checks")]
#[case(Mutation::CryptoKeytagIgnored, "bf3", "crypto_dp.tweak_and_keytag")]
#[case(Mutation::CryptoDirectionFlipped, "cx7", "crypto_dp.signature_order_rows")]
#[case(Mutation::MsiVectorsFromZero, "cx6dx", "devx.msi_vectors_first_free_then_enospc")]
#[case(Mutation::DestroyEqLeaksEremoteio, "cx6dx", "devx.destroy_eq_maps_the_status")]
#[case(Mutation::QueryEqnAnyVector, "cx6dx", "devx.query_eqn_vectors")]
#[case(Mutation::NoCompletionEqe, "cx6dx", "devx.completion_eqe_after_raw_qp_traffic")]
fn the_suite_catches_the_mutant(#[case] m: Mutation, #[case] profile: &str, #[case] catcher: &str) {
    let p = Profile::builtin(profile).unwrap();
    let target = Target::new(
        "mutant",
        Some(profile.to_string()),
        Box::new(move || {
            let inner = Simulator::new(p.clone()).map_err(|e| e.to_string())?;
            Ok(Box::new(Wrapped::new(Mutant { m, last_err: None }, inner)) as Box<dyn Backend>)
        }),
    );
    // Only the catcher runs: the unmutated test below runs the whole suite on every profile.
    let cases: Vec<_> = suite().into_iter().filter(|c| c.name == catcher).collect();
    assert_eq!(cases.len(), 1, "the catcher {catcher} exists");
    let report = run_target(&target, &cases);
    let case = &report.cases[0];
    assert_eq!(case.outcome, Outcome::Fail, "{m:?} was not caught by {catcher}: {}", case.detail);
    assert!(case.expected.is_some() && case.actual.is_some(), "a failure names expected and actual");
}

#[test]
fn the_unmutated_simulator_passes_every_case_it_runs() {
    for name in Profile::builtin_names() {
        let report = run_target(&Target::sim(Profile::builtin(name).unwrap()), &suite());
        let failed: Vec<_> =
            report.cases.iter().filter(|c| c.outcome == Outcome::Fail).map(|c| (&c.name, &c.detail)).collect();
        assert!(failed.is_empty(), "{name}: {failed:?}");
        assert!(report.summary.passed > 0);
        for c in report.cases.iter().filter(|c| c.outcome == Outcome::Skip) {
            assert!(!c.detail.is_empty(), "{name}: {} skipped without a reason", c.name);
        }
    }
}
