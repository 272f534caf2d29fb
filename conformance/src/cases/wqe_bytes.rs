//! Send WQEs byte for byte: the bytes the provider writes into the send queue for a work
//! request, read back from the queue's buffer (docs/behaviour.md item 95). Each case states
//! the WQE libmlx5 builds with the PRM layouts and compares it with the backend's ring.

use mlx5_dv::errno::EOPNOTSUPP;
use mlx5_dv::prm::wqe::compose::{Payload, SendWqe, UmrTranslation, WqeBody};
use mlx5_dv::prm::wqe::{
    CtrlSeg, DataSeg, KlmSeg, MkeyContextSeg, RaddrSeg, SEND_WQE_DS, UmrCtrlSeg, ctrl, opcode, umr_ctrl,
};
use mlx5_dv::{AccessFlags as A, Backend, DvQpCreateFlags, MkeyInitFlags as F, Qp, SendFlags, Sge, WrOp, wc_opcode};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_ok};

const N: &[Need] = &[Need::Mlx5Device, Need::Devx];

pub(super) const CASES: &[Case] = &[
    Case { name: "wqe.mkey_configure_list_bytes", covers: &[95], needs: N, run: configure_list },
    Case { name: "wqe.rdma_write_after_umr_bytes", covers: &[95], needs: N, run: write_after_umr },
];

/// The WQE at basic block `index` of `qp`'s send queue; a skip where the backend cannot
/// read the queue (no `mlx5dv_init_obj`).
fn ring_wqe(b: &mut dyn Backend, qp: &Qp, index: u32) -> Check<Vec<u8>> {
    match b.sq_wqe(qp, index) {
        Err(e) if e.errno() == EOPNOTSUPP => Err(Verdict::skip(format!("the send queue cannot be read: {e}"))),
        r => expect_ok("read the send queue (mlx5dv_init_obj)", r),
    }
}

/// The first `want` UMR WQEs of `qp`'s send queue, in posting order: each one's mkey mask and
/// `expected_sigerr_count`. The ring is walked from block 0 as the control segments' DS counts
/// lay it out, over at most 16 WQEs; a WQE whose `wqe_index` is not its block fails.
pub(super) fn umr_masks_and_sig_err_counts(b: &mut dyn Backend, qp: &Qp, want: usize) -> Check<Vec<(u64, bool)>> {
    let (mut at, mut out) = (0u32, Vec::new());
    for _ in 0..16 {
        if out.len() == want {
            break;
        }
        let got = ring_wqe(b, qp, at)?;
        let w = SendWqe::decode(&got).map_err(|e| Verdict::fail(format!("the WQE at block {at}"), "a WQE", e))?;
        check_eq(&format!("wqe_index of the WQE at block {at}"), u32::from(w.ctrl.wqe_index), at)?;
        if let WqeBody::Umr { umr, mkc, .. } = &w.body {
            out.push((umr.mkey_mask, mkc.expected_sigerr_count));
        }
        at += u32::try_from(w.ctrl.wqebbs().max(1)).unwrap_or(1);
    }
    check_eq("UMR WQEs found in the send queue", out.len(), want)?;
    Ok(out)
}

/// Compare the ring's WQE with the one libmlx5 builds, field by field, then byte by byte
/// over the `ds` units the control segment counts.
fn same_wqe(what: &str, got: &[u8], want: &SendWqe) -> Check {
    let bad = |e: mlx5_dv::prm::FieldError| Verdict::fail(format!("{what}: the reference"), "encodable", e);
    let want_bytes = want.encode().map_err(bad)?;
    let reference = SendWqe::decode(&want_bytes).map_err(bad)?;
    let decoded = SendWqe::decode(got).map_err(|e| Verdict::fail(format!("{what}: decode"), "a WQE", e))?;
    check_eq(what, decoded, reference.clone())?;
    let units = usize::from(reference.ctrl.ds) * SEND_WQE_DS;
    check_eq(&format!("{what} ({units} bytes)"), got.get(..units), want_bytes.get(..units))
}

fn ctrl_of(op: u8, index: u16, qp: &Qp, imm: u32, fm: u8) -> CtrlSeg {
    CtrlSeg { opcode: op, wqe_index: index, qpn: qp.qp_num, ce: ctrl::CE_CQ_UPDATE, fm, imm, ..CtrlSeg::default() }
}

/// `mlx5_send_wr_mkey_configure` + access + layout list, as libmlx5 lays it out: UMR control
/// (inline; FREE, MKEY, access and LEN in the mask; the list padded to 64 bytes), the mkey
/// context (`qpn_mkey` = 0xffffff00 | tag, the access bits, the length), the KLMs.
fn configure_wqe(qp: &Qp, mkey: u32, access: A, sge: &[Sge]) -> SendWqe {
    use umr_ctrl::mkey_mask as m;
    let klm_octowords = (sge.len() * 16).next_multiple_of(64) / 16;
    let umr = UmrCtrlSeg {
        flags: umr_ctrl::flags::INLINE,
        klm_octowords: klm_octowords as u16,
        bsf_octowords: 0,
        mkey_mask: m::FREE
            | m::MKEY
            | m::LEN
            | m::ACCESS_LOCAL_WRITE
            | m::ACCESS_REMOTE_READ
            | m::ACCESS_REMOTE_WRITE
            | m::ACCESS_ATOMIC,
    };
    let mkc = MkeyContextSeg {
        qpn: 0xff_ffff,
        mkey_7_0: mkey as u8,
        lw: access.contains(A::LOCAL_WRITE),
        rr: access.contains(A::REMOTE_READ),
        rw: access.contains(A::REMOTE_WRITE),
        a: access.contains(A::REMOTE_ATOMIC),
        len: sge.iter().map(|s| u64::from(s.length)).sum(),
        ..MkeyContextSeg::default()
    };
    let mut klms: Vec<KlmSeg> =
        sge.iter().map(|s| KlmSeg { byte_count: s.length, mkey: s.lkey, address: s.addr }).collect();
    klms.resize(klm_octowords, KlmSeg::default());
    SendWqe {
        ctrl: ctrl_of(opcode::UMR, 0, qp, mkey, 0),
        body: WqeBody::Umr { umr, mkc, translation: UmrTranslation::Klm(klms), bsf: Vec::new() },
    }
}

/// A connected pair, and a list configure of an indirect mkey posted on the server's QP.
fn configure(b: &mut dyn Backend, env: &Env) -> Check<(Side, Side, mlx5_dv::Mr, mlx5_dv::Mkey, Vec<Sge>, A)> {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_buf, mr) = region(b, s.pd, 256, &pattern(256, 3), A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let mkey = indirect_mkey(b, s.pd, F::INDIRECT, 4)?;
    let sge = vec![sge(&mr, 0, 64), sge(&mr, 128, 32)];
    let access = A::LOCAL_WRITE | A::REMOTE_WRITE;
    super::fixture::configure_list(b, &s, &mkey, access, sge.clone())?;
    Ok((a, s, mr, mkey, sge, access))
}

/// A list configure on a fresh QP is the QP's first WQE, at basic block 0.
fn configure_list(b: &mut dyn Backend, env: &Env) -> Check {
    let (_a, s, _mr, mkey, sge, access) = configure(b, env)?;
    let got = ring_wqe(b, &s.qp, 0)?;
    same_wqe("mkey configure WQE", &got, &configure_wqe(&s.qp, mkey.lkey, access, &sge))
}

/// The RDMA WRITE after the configure starts where it ended (basic block 3: 192 bytes) and
/// carries the initiator small fence the UMR left in `fm_cache`.
fn write_after_umr(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, mr, _mkey, _sge, _access) = configure(b, env)?;
    let (_abuf, amr) = region(b, a.pd, 64, &pattern(64, 5), A::LOCAL_WRITE)?;
    let src = sge(&amr, 0, 64);
    let w =
        WrOp::RdmaWrite { wr_id: 8, flags: SendFlags::SIGNALED, rkey: mr.rkey, remote_addr: mr.addr, sge: vec![src] };
    expect_ok("RDMA WRITE after the configure", b.post_send(&s.qp, &[w]))?;
    ok_cqe(b, &s.cq, 8, wc_opcode::RDMA_WRITE)?;
    let want = SendWqe {
        ctrl: ctrl_of(opcode::RDMA_WRITE, 3, &s.qp, 0, ctrl::fence::INITIATOR_SMALL),
        body: WqeBody::Rdma {
            raddr: RaddrSeg { raddr: mr.addr, rkey: mr.rkey },
            payload: Payload::Gather(vec![DataSeg { byte_count: src.length, lkey: src.lkey, addr: src.addr }]),
        },
    };
    let got = ring_wqe(b, &s.qp, 3)?;
    same_wqe("RDMA WRITE WQE", &got, &want)
}
