//! The suite can fail: each mutant backend deviates from the spec in one way, and the named
//! case must catch it.

use mlx5_conformance::{Outcome, Target, run_target, suite};
use mlx5_dv::errno::{EINVAL, EREMOTEIO};
use mlx5_dv::*;
use mlx5_sim::{Profile, Simulator};
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
}

struct Mutant {
    inner: Simulator,
    m: Mutation,
    last_err: Option<MkeyErr>,
}

impl Backend for Mutant {
    fn info(&self) -> BackendInfo {
        self.inner.info()
    }
    fn kernel_facts(&self) -> KernelFacts {
        self.inner.kernel_facts()
    }
    fn device_list(&mut self) -> Result<Vec<DeviceDesc>> {
        self.inner.device_list()
    }
    fn open_device(&mut self, device: &str, attr: Option<&ContextAttr>) -> Result<ContextHandle> {
        match (self.m, attr) {
            (Mutation::AcceptUnknownCompMask, Some(a)) => {
                let a = ContextAttr { comp_mask: 0, ..*a };
                self.inner.open_device(device, Some(&a))
            }
            (Mutation::ExplicitDevxFallsBack, Some(a)) if a.flags == ContextFlags::DEVX => {
                self.inner.open_device(device, None)
            }
            _ => self.inner.open_device(device, attr),
        }
    }
    fn open_ibv_device(&mut self, device: &str) -> Result<ContextHandle> {
        self.inner.open_ibv_device(device)
    }
    fn close_device(&mut self, ctx: ContextHandle) -> Result<()> {
        self.inner.close_device(ctx)
    }
    fn query_device(&mut self, ctx: ContextHandle, comp_mask: u64) -> Result<DvContext> {
        let mut r = self.inner.query_device(ctx, comp_mask)?;
        match self.m {
            Mutation::DropCrc32Cap => r.sig_caps.crc_type &= !sig_cap::CRC32,
            Mutation::EchoEveryCompMaskBit => {
                r.comp_mask = MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD
            }
            _ => {}
        }
        Ok(r)
    }
    fn alloc_pd(&mut self, ctx: ContextHandle) -> Result<PdHandle> {
        self.inner.alloc_pd(ctx)
    }
    fn dealloc_pd(&mut self, pd: PdHandle) -> Result<()> {
        let r = self.inner.dealloc_pd(pd);
        match (self.m, &r) {
            (Mutation::DeallocPdIgnoresMkeys, Err(e)) if e.errno() == errno::EBUSY => Ok(()),
            _ => r,
        }
    }
    fn create_mkey(&mut self, attr: &MkeyInitAttr) -> Result<Mkey> {
        let mut a = *attr;
        if let Mutation::UpdateTagAlwaysAccepted = self.m {
            a.create_flags.remove(MkeyInitFlags::UPDATE_TAG);
        }
        if a.create_flags.is_empty() && matches!(self.m, Mutation::ZeroFlagsEinval) {
            return Err(Error::new(Op::CreateMkey, EINVAL, "mutant"));
        }
        let r = self.inner.create_mkey(&a);
        let mut m = match (self.m, r) {
            (Mutation::LeakEremoteio, Err(e)) if e.cmd_status().is_some() => {
                return Err(Error::new(Op::CreateMkey, EREMOTEIO, "mutant"));
            }
            (_, r) => r?,
        };
        match self.m {
            Mutation::RoundToPowerOfTwo => m.max_entries = attr.max_entries.checked_next_power_of_two().unwrap_or(0),
            Mutation::SaturateInsteadOfWrap if attr.max_entries > 65532 => m.max_entries = 65532,
            Mutation::TagByteSet => {
                m.lkey |= 1;
                m.rkey |= 1;
            }
            _ => {}
        }
        Ok(m)
    }
    fn destroy_mkey(&mut self, mkey: &Mkey) -> Result<()> {
        self.inner.destroy_mkey(mkey)
    }
    fn mkey_check(&mut self, mkey: &Mkey) -> Result<MkeyErr> {
        let r = self.inner.mkey_check(mkey);
        match (self.m, r) {
            (Mutation::MkeyCheckOkOnPlainMkey, Err(e)) if e.errno() == EINVAL => Ok(MkeyErr::NONE),
            (Mutation::ApptagReportedAsReftag, Ok(mut e)) if e.err_type == MkeyErrType::SigBlockBadApptag => {
                e.err_type = MkeyErrType::SigBlockBadReftag;
                Ok(e)
            }
            (Mutation::OffsetInDataBytes, Ok(mut e)) => {
                e.sig.offset = e.sig.offset / 520 * 512;
                Ok(e)
            }
            (Mutation::SigValuesTruncatedTo32Bits, Ok(mut e)) => {
                e.sig.expected_value &= 0xffff_ffff;
                e.sig.actual_value &= 0xffff_ffff;
                Ok(e)
            }
            (Mutation::SigErrorReportedTwice, Ok(e)) if e == MkeyErr::NONE => Ok(self.last_err.take().unwrap_or(e)),
            (Mutation::SigErrorReportedTwice, Ok(e)) => {
                self.last_err = Some(e);
                Ok(e)
            }
            (_, r) => r,
        }
    }
    fn alloc_buf(&mut self, len: usize) -> Result<Buf> {
        self.inner.alloc_buf(len)
    }
    fn free_buf(&mut self, buf: &Buf) -> Result<()> {
        self.inner.free_buf(buf)
    }
    fn write_buf(&mut self, buf: &Buf, offset: usize, data: &[u8]) -> Result<()> {
        self.inner.write_buf(buf, offset, data)
    }
    fn read_buf(&mut self, buf: &Buf, offset: usize, len: usize) -> Result<Vec<u8>> {
        self.inner.read_buf(buf, offset, len)
    }
    fn reg_mr(&mut self, pd: PdHandle, addr: u64, length: u64, access: AccessFlags) -> Result<Mr> {
        self.inner.reg_mr(pd, addr, length, access)
    }
    fn dereg_mr(&mut self, mr: &Mr) -> Result<()> {
        self.inner.dereg_mr(mr)
    }
    fn create_cq(&mut self, ctx: ContextHandle, cqe: u32) -> Result<Cq> {
        let mut cq = self.inner.create_cq(ctx, cqe)?;
        if let Mutation::CqCapacityPowerOfTwo = self.m {
            cq.cqe += 1;
        }
        Ok(cq)
    }
    fn destroy_cq(&mut self, cq: &Cq) -> Result<()> {
        self.inner.destroy_cq(cq)
    }
    fn poll_cq(&mut self, cq: &Cq, max: usize) -> Result<Vec<Wc>> {
        let mut wcs = self.inner.poll_cq(cq, max)?;
        for wc in &mut wcs {
            match self.m {
                Mutation::PollDropsImmediate => wc.imm_data = 0,
                Mutation::ReadByteLenZero if wc.opcode == wc_opcode::RDMA_READ => wc.byte_len = 0,
                _ => {}
            }
        }
        Ok(wcs)
    }
    fn create_qp(&mut self, attr: &QpInitAttr) -> Result<Qp> {
        let mut a = *attr;
        if let (Mutation::ScatterToCqeAlwaysOff, Some(dv)) = (self.m, a.dv.as_mut()) {
            dv.comp_mask |= dv_qp::MASK_QP_CREATE_FLAGS;
            dv.create_flags |= dv_qp::CREATE_DISABLE_SCATTER_TO_CQE;
        }
        let mut q = self.inner.create_qp(&a)?;
        if let Mutation::MaxInlineOffByFour = self.m {
            q.cap.max_inline_data += 4;
        }
        Ok(q)
    }
    fn modify_qp(&mut self, qp: &Qp, attr: &QpModify) -> Result<()> {
        self.inner.modify_qp(qp, attr)
    }
    fn query_qp_state(&mut self, qp: &Qp) -> Result<QpState> {
        self.inner.query_qp_state(qp)
    }
    fn destroy_qp(&mut self, qp: &Qp) -> Result<()> {
        self.inner.destroy_qp(qp)
    }
    fn post_send(&mut self, qp: &Qp, ops: &[WrOp]) -> Result<()> {
        let ops: Vec<WrOp> = ops
            .iter()
            .filter(|o| !matches!((self.m, o), (Mutation::LocalInvIgnored, WrOp::LocalInv { .. })))
            .cloned()
            .map(|o| match (self.m, o) {
                (
                    Mutation::ConfigureAlwaysInline,
                    WrOp::MkeyConfigure { wr_id, flags, mkey, num_setters, conf_flags, comp_mask },
                ) => WrOp::MkeyConfigure {
                    wr_id,
                    flags: flags | SendFlags::INLINE,
                    mkey,
                    num_setters,
                    conf_flags,
                    comp_mask,
                },
                (Mutation::WriteOneByteOff, WrOp::RdmaWrite { wr_id, flags, rkey, remote_addr, sge }) => {
                    WrOp::RdmaWrite { wr_id, flags, rkey, remote_addr: remote_addr + 1, sge }
                }
                (Mutation::MrListIgnoresSecondEntry, WrOp::MrList { wr_id, flags, mkey, access, mut sge })
                    if sge.len() > 1 =>
                {
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
                    WrOp::SetMkeySigBlock(SigBlockAttr { flags: 0, ..a })
                }
                (_, o) => o,
            })
            .collect();
        let r = self.inner.post_send(qp, &ops);
        match (self.m, &r) {
            (Mutation::PostSucceedsBeforeRts, Err(e)) if e.errno() == EINVAL => Ok(()),
            _ => r,
        }
    }
    fn post_recv(&mut self, qp: &Qp, wrs: &[RecvWr]) -> Result<()> {
        self.inner.post_recv(qp, wrs)
    }
    fn cancel_posted_send_wrs(&mut self, qp: &Qp, wr_id: u64) -> Result<u32> {
        let n = self.inner.cancel_posted_send_wrs(qp, wr_id)?;
        Ok(if let Mutation::CancelFindsNothing = self.m { 0 } else { n })
    }
    fn get_async_event(&mut self, ctx: ContextHandle) -> Result<Option<AsyncEvent>> {
        let e = self.inner.get_async_event(ctx)?;
        Ok(if let Mutation::NoAsyncEvents = self.m { None } else { e })
    }
    fn sim_control(&mut self) -> Option<&mut dyn SimControl> {
        match self.m {
            Mutation::NoSmallFence => Some(self),
            _ => self.inner.sim_control(),
        }
    }
}

impl SimControl for Mutant {
    fn add_fault(&mut self, rule: FaultRule) {
        self.inner.add_fault(rule)
    }
    fn clear_faults(&mut self) {
        self.inner.clear_faults()
    }
    fn record_commands(&mut self, on: bool) {
        self.inner.record_commands(on)
    }
    fn take_commands(&mut self) -> Vec<CommandRecord> {
        self.inner.take_commands()
    }
    fn record_wqes(&mut self, on: bool) {
        self.inner.record_wqes(on)
    }
    fn take_wqes(&mut self) -> Vec<WqeRecord> {
        let mut w = self.inner.take_wqes();
        w.iter_mut().for_each(|r| r.small_fence = false);
        w
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
fn the_suite_catches_the_mutant(#[case] m: Mutation, #[case] profile: &str, #[case] catcher: &str) {
    let p = Profile::builtin(profile).unwrap();
    let target = Target::new(
        "mutant",
        Some(profile.to_string()),
        Box::new(move || {
            let inner = Simulator::new(p.clone()).map_err(|e| e.to_string())?;
            Ok(Box::new(Mutant { inner, m, last_err: None }) as Box<dyn Backend>)
        }),
    );
    let report = run_target(&target, &suite());
    let case = report.cases.iter().find(|c| c.name == catcher).expect("the catcher exists");
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
