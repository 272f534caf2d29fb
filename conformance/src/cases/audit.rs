//! Queue sizing and posting rules where the provider's arithmetic decides: items 75, 76, 78,
//! 79, 85, 87 and 88 of docs/behaviour.md.

use mlx5_dv::errno::{EINVAL, ENOMEM};
use mlx5_dv::{
    AccessFlags as A, Backend, DvQpCreateFlags, QpCap, RecvWr, SendFlags, Sge, SigBlockDomain as D, T10difFlags, WrOp,
    sig, wc_opcode, wc_status,
};

use super::fixture::*;
use super::sig::{SIG_CAP, configure_chain, dif, sig_mkey, sig_pair, wire_only};
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "wr.recv_sges_follow_the_qp_state",
        covers: &[88],
        needs: &[Need::Mlx5Device],
        run: recv_state_max_gs,
    },
    Case {
        name: "wr.missing_mkey_ops_and_long_lists",
        covers: &[85],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: missing_ops_long_lists,
    },
    Case { name: "qp.send_queue_depth_in_wqebbs", covers: &[75], needs: &[Need::Mlx5Device], run: send_queue_depth },
    Case {
        name: "qp.max_recv_sge_zero_without_a_receive_queue",
        covers: &[78],
        needs: &[Need::Mlx5Device],
        run: no_receive_queue,
    },
    Case { name: "qp.ooo_dp_follows_library_and_device", covers: &[80], needs: &[Need::Mlx5Device], run: ooo_dp },
    Case { name: "qp.memcpy_needs_dma_mmo", covers: &[77], needs: &[Need::Mlx5Device], run: memcpy_dma_mmo },
    Case { name: "cq.larger_than_log_max_cq_sz", covers: &[79], needs: &[Need::Mlx5Device], run: cq_limit },
    Case { name: "wr.send_sges_beyond_max_send_sge", covers: &[87], needs: &[Need::Mlx5Device], run: send_sges },
    Case {
        name: "sig.set_psv_needs_room",
        covers: &[76],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SigCaps],
        run: set_psv_room,
    },
    Case { name: "qp.driver_qp_needs_dc_attributes", covers: &[83], needs: &[Need::Mlx5Device], run: driver_qp },
    Case {
        name: "umr.configure_on_a_full_queue_goes_on",
        covers: &[94],
        needs: &[Need::Mlx5Device, Need::Devx, Need::KnownUpdateTag],
        run: configure_on_full_queue,
    },
    Case {
        name: "wr.post_recv_full_queue_before_sge_count",
        covers: &[88],
        needs: &[Need::Mlx5Device],
        run: post_recv_order,
    },
];

/// With mkey ops and 4 SGEs a send WQE is 256 bytes (192 of UMR overhead + 4 × 16): four
/// basic blocks. The queue, rounded up to a power of two, must fit `max_qp_wr` blocks.
fn send_queue_depth(b: &mut dyn Backend, env: &Env) -> Check {
    let Some(max_wqebb) = env.caps.device.max_qp_wr.filter(|n| *n >= 4) else {
        return Err(Verdict::skip("the backend does not report max_qp_wr"));
    };
    let fits = (1u32 << (31 - max_wqebb.leading_zeros())) / 4;
    let (_, pd, cq) = open(b, env.dev()?)?;
    let cap = |wr| QpCap { max_send_wr: wr, max_recv_wr: 1, max_send_sge: 4, max_recv_sge: 1, max_inline_data: 0 };
    let q = expect_ok(
        &format!("{fits} WRs of 4 WQEBBs in {max_wqebb} WQEBBs"),
        b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), cap(fits))),
    )?;
    expect_ok("destroy", b.destroy_qp(&q))?;
    expect_errno(
        &format!("{} WRs of 4 WQEBBs in {max_wqebb} WQEBBs", fits + 1),
        b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), cap(fits + 1))),
        EINVAL,
    )
}

fn no_receive_queue(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, cq) = open(b, env.dev()?)?;
    let cap = QpCap { max_recv_wr: 0, max_recv_sge: 3, ..CAP };
    let q = expect_ok("create without a receive queue", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), cap)))?;
    check_eq("max_recv_sge written back", q.cap.max_recv_sge, 0)?;
    let with_rq = expect_ok("create with one", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    check("max_recv_sge with a receive queue", with_rq.cap.max_recv_sge >= CAP.max_recv_sge, ">= 4", with_rq.cap)
}

/// `cqe + 1` rounded up to a power of two must not exceed `1 << log_max_cq_sz`.
fn cq_limit(b: &mut dyn Backend, env: &Env) -> Check {
    let Some(log) = env.caps.device.log_max_cq_sz.filter(|l| (1..32).contains(l)) else {
        return Err(Verdict::skip("the backend does not report log_max_cq_sz"));
    };
    let ctx = expect_ok("ibv_open_device", b.open_ibv_device(env.dev()?))?;
    let limit = 1u32 << log;
    expect_errno(&format!("a CQ of {limit} entries (limit {limit} with the spare)"), b.create_cq(ctx, limit), EINVAL)?;
    let cq = expect_ok("a CQ of 15 entries", b.create_cq(ctx, 15))?;
    expect_ok("destroy", b.destroy_cq(&cq))
}

/// More SGEs than `max_send_sge` is ENOMEM from the chain; a zero-length SGE is dropped and
/// its key never looked up.
fn send_sges(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, _s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (buf, mr) = region(b, a.pd, 64, &pattern(64, 7), QP_ACCESS)?;
    let max = usize::try_from(a.qp.cap.max_send_sge).unwrap_or(usize::MAX).min(64);
    let too_many = vec![sge(&mr, 0, 1); max + 1];
    let w = |wr_id, sge| WrOp::RdmaWrite {
        wr_id,
        flags: SendFlags::SIGNALED,
        rkey: mr.rkey,
        remote_addr: mr.addr + 32,
        sge,
    };
    expect_errno(&format!("{} SGEs with max_send_sge {max}", max + 1), b.post_send(&a.qp, &[w(1, too_many)]), ENOMEM)?;
    no_cqe(b, &a.cq)?;
    let bogus = Sge { addr: 0xdead_0000, length: 0, lkey: 0x00ba_d0ff };
    expect_ok("an SGE list with a zero-length entry", b.post_send(&a.qp, &[w(2, vec![sge(&mr, 0, 8), bogus])]))?;
    ok_cqe(b, &a.cq, 2, wc_opcode::RDMA_WRITE)?;
    let got = contents(b, &buf)?;
    check_eq("the 8 bytes written", &got[32..40], &pattern(64, 7)[..8])
}

/// A full receive queue is ENOMEM before the SGE count is looked at; a list that fails part
/// way still posts the receives before the failing one.
fn post_recv_order(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_rb, rmr) = region(b, s.pd, 64, &[], A::LOCAL_WRITE)?;
    let max_sge = usize::try_from(s.qp.cap.max_recv_sge).unwrap_or(usize::MAX).min(64);
    let bad = RecvWr { wr_id: 99, sge: vec![sge(&rmr, 0, 1); max_sge + 1] };
    let good = |wr_id| RecvWr { wr_id, sge: vec![sge(&rmr, 0, 16)] };
    expect_errno("a good receive, then one with too many SGEs", b.post_recv(&s.qp, &[good(1), bad.clone()]), EINVAL)?;
    let (_sb, smr) = region(b, a.pd, 16, &pattern(16, 3), A::LOCAL_WRITE)?;
    let send = WrOp::Send { wr_id: 5, flags: SendFlags::SIGNALED, sge: vec![sge(&smr, 0, 16)] };
    expect_ok("send into the receive posted before the failure", b.post_send(&a.qp, &[send]))?;
    ok_cqe(b, &a.cq, 5, wc_opcode::SEND)?;
    let wc = poll(b, &s.cq, 1)?.remove(0);
    check_eq("the receive before the failing WR was posted", (wc.wr_id, wc.status), (1, wc_status::SUCCESS))?;
    let depth = s.qp.cap.max_recv_wr;
    let fill: Vec<_> = (0..u64::from(depth)).map(|i| good(10 + i)).collect();
    expect_ok(&format!("fill the receive queue ({depth})"), b.post_recv(&s.qp, &fill))?;
    expect_errno("a full queue, and too many SGEs", b.post_recv(&s.qp, &[bad]), ENOMEM)
}

/// On a queue with room for one WQE the UMR of a signature configure fits and the SET_PSV
/// after it does not: ENOMEM, nothing posted; the same configure without a signature fits.
fn set_psv_room(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = sig_pair(b, env)?;
    let one = QpCap { max_send_wr: 1, ..SIG_CAP };
    let q = expect_ok("a QP with one send WQE", b.create_qp(&qp_attr(a.pd, &a.cq, DvQpCreateFlags::empty(), one)))?;
    check_eq("max_send_wr written back", q.cap.max_send_wr, 1)?;
    connect(b, &q, s.ctx, &s.qp)?;
    let (_buf, mr, mkey) = sig_mkey(b, &a, 512, &[])?;
    let t10 = D::t10dif(sig::BLOCK_512, dif(1, 0, T10difFlags::empty()));
    let with_sig = configure_chain(&mkey, &mr, Some(wire_only(t10)), false);
    expect_errno("UMR then SET_PSV in one free slot", b.post_send(&q, &with_sig), ENOMEM)?;
    no_cqe(b, &a.cq)?;
    expect_ok("the configure without a signature", b.post_send(&q, &configure_chain(&mkey, &mr, None, false)))?;
    ok_cqe(b, &a.cq, 0x51, wc_opcode::DRIVER1).map(drop)
}

/// `MLX5DV_QP_EX_WITH_MEMCPY` creates an RC QP only on a device with the DMA-MMO engine;
/// elsewhere EOPNOTSUPP. The QPs of this API always have a PD, so the EINVAL without one is
/// not reachable here.
fn memcpy_dma_mmo(b: &mut dyn Backend, env: &Env) -> Check {
    let Some(has) = env.caps.device.dma_mmo else {
        return Err(Verdict::skip("the backend cannot tell whether the device has the DMA-MMO engine"));
    };
    let (_, pd, cq) = open(b, env.dev()?)?;
    let dv = mlx5_dv::DvQpInitAttr::new(DvQpCreateFlags::empty(), mlx5_dv::dv_qp::WITH_MEMCPY);
    let r = b.create_qp(&mlx5_dv::QpInitAttr::rc(pd, cq.handle, CAP, Some(dv)));
    if has {
        expect_ok("an RC QP with MEMCPY on a DMA-MMO device", r).map(drop)
    } else {
        expect_errno("an RC QP with MEMCPY without DMA-MMO", r, mlx5_dv::errno::EOPNOTSUPP)
    }
}

/// `MLX5DV_QP_CREATE_OOO_DP`: an unknown flag (EINVAL) before rdma-core 55; from 55 on
/// EOPNOTSUPP on a device without out-of-order placement, and an RC QP on one with it.
fn ooo_dp(b: &mut dyn Backend, env: &Env) -> Check {
    let release = env.caps.library.rdma_core.as_deref().and_then(|r| r.split('.').next()?.parse::<u32>().ok());
    let Some(release) = release else {
        return Err(Verdict::skip("the backend does not report its rdma-core release"));
    };
    let expected = match (release, env.caps.device.ooo_dp) {
        (..55, _) => Some(EINVAL),
        (_, Some(false)) => Some(mlx5_dv::errno::EOPNOTSUPP),
        (_, Some(true)) => None,
        (_, None) => return Err(Verdict::skip("the backend cannot tell whether the device offers OOO_DP")),
    };
    let (_, pd, cq) = open(b, env.dev()?)?;
    let r = b.create_qp(&qp_attr(pd, &cq, mlx5_dv::dv_qp::CREATE_OOO_DP, CAP));
    match expected {
        Some(errno) => expect_errno(&format!("OOO_DP with rdma-core {release}"), r, errno),
        None => expect_ok(&format!("OOO_DP with rdma-core {release} on a device with it"), r).map(drop),
    }
}

/// A configure on a full send queue records ENOMEM and goes on: with a new tag byte on a kernel
/// without tag update, the tag check replaces the error with EOPNOTSUPP; its setters are not
/// "outside a configure" (EINVAL). Either way nothing is posted.
fn configure_on_full_queue(b: &mut dyn Backend, env: &Env) -> Check {
    let Some(update_tag) = env.caps.kernel.mkey_update_tag else {
        return Err(Verdict::skip("the backend cannot tell whether the kernel supports mkey tag update"));
    };
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let q = expect_ok(
        "a QP with one send WQE",
        b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), QpCap { max_send_wr: 1, ..CAP })),
    )?;
    let cq2 = expect_ok("cq", b.create_cq(ctx, 16))?;
    let peer = expect_ok("peer", b.create_qp(&qp_attr(pd, &cq2, DvQpCreateFlags::empty(), CAP)))?;
    connect(b, &q, ctx, &peer)?;
    connect(b, &peer, ctx, &q)?;
    let (_buf, mr) = region(b, pd, 64, &[], QP_ACCESS)?;
    let fill: Vec<_> = (0..u64::from(q.cap.max_send_wr))
        .map(|i| WrOp::RdmaWrite {
            wr_id: i,
            flags: SendFlags::empty(),
            rkey: mr.rkey,
            remote_addr: mr.addr,
            sge: vec![sge(&mr, 32, 4)],
        })
        .collect();
    expect_ok("fill the send queue with unsignalled writes", b.post_send(&q, &fill))?;
    let mut mkey = indirect_mkey(b, pd, mlx5_dv::MkeyInitFlags::INDIRECT, 4)?;
    mkey.lkey |= 0x5a;
    let chain = [
        WrOp::MkeyConfigure {
            wr_id: 7,
            flags: SendFlags::SIGNALED | SendFlags::INLINE,
            mkey,
            num_setters: 2,
            conf_flags: mlx5_dv::MkeyConfFlags::empty(),
            comp_mask: 0,
        },
        WrOp::SetMkeyAccessFlags(A::LOCAL_WRITE),
        WrOp::SetMkeyLayoutList(vec![sge(&mr, 0, 16)]),
    ];
    let want = if update_tag { ENOMEM } else { mlx5_dv::errno::EOPNOTSUPP };
    expect_errno("a configure with a new tag on a full send queue", b.post_send(&q, &chain), want)?;
    no_cqe(b, &cq)
}

/// `IBV_QPT_DRIVER` (DC) without mlx5dv attributes returns NULL and sets no errno (reported as
/// EIO); with attributes but without the DC mask, EINVAL.
fn driver_qp(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, cq) = open(b, env.dev()?)?;
    let base = qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP);
    let plain = mlx5_dv::QpInitAttr { qp_type: mlx5_dv::qp_type::DRIVER, dv: None, ..base };
    expect_errno(
        "IBV_QPT_DRIVER without mlx5dv attributes: NULL, errno not set",
        b.create_qp(&plain),
        mlx5_dv::errno::EIO,
    )?;
    let no_dc = mlx5_dv::QpInitAttr { qp_type: mlx5_dv::qp_type::DRIVER, ..base };
    expect_errno("IBV_QPT_DRIVER with mlx5dv attributes but no DC mask", b.create_qp(&no_dc), EINVAL)
}

/// A QP created without mlx5dv send ops has no mkey builders: a chain that calls one is
/// EOPNOTSUPP and posts nothing. A layout of 65536 entries is ENOMEM, never a 16-bit
/// count that wraps to an empty list.
fn missing_ops_long_lists(b: &mut dyn Backend, env: &Env) -> Check {
    use mlx5_dv::{MkeyInitFlags as F, QpInitAttr};
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (_buf, mr) = region(b, s.pd, 64, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let mkey = indirect_mkey(b, s.pd, F::INDIRECT, 4)?;
    let plain = expect_ok("a QP without dv send ops", b.create_qp(&QpInitAttr::rc(a.pd, a.cq.handle, CAP, None)))?;
    connect(b, &plain, s.ctx, &s.qp)?;
    let list = |n: usize, wr_id| WrOp::MrList {
        wr_id,
        flags: SendFlags::SIGNALED | SendFlags::INLINE,
        mkey,
        access: A::LOCAL_WRITE,
        sge: vec![sge(&mr, 0, 1); n],
    };
    let chain = [write(1, mr.rkey, mr.addr, vec![sge(&mr, 0, 8)]), list(1, 2)];
    expect_errno(
        "mlx5dv_wr_mr_list on a QP without mkey ops",
        b.post_send(&plain, &chain),
        mlx5_dv::errno::EOPNOTSUPP,
    )?;
    no_cqe(b, &a.cq)?;
    expect_errno("mlx5dv_wr_mr_list of 65536 entries", b.post_send(&s.qp, &[list(65536, 3)]), ENOMEM)?;
    no_cqe(b, &s.cq)
}

/// The receive SGE limit is the provider's `qp_state_max_gs`: -1 on a new QP and after a
/// modify to RESET (every receive is EINVAL, even one without SGEs), the queue's `max_gs` from
/// INIT on.
fn recv_state_max_gs(b: &mut dyn Backend, env: &Env) -> Check {
    use mlx5_dv::{QpModify, QpState};
    let (_ctx, pd, cq) = open(b, env.dev()?)?;
    let qp = expect_ok("create a QP", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let (_buf, mr) = region(b, pd, 64, &[], A::LOCAL_WRITE)?;
    let recv = |wr_id, sge: Vec<Sge>| [RecvWr { wr_id, sge }];
    expect_errno("a receive without SGEs on a new QP", b.post_recv(&qp, &recv(1, vec![])), EINVAL)?;
    expect_errno("a receive with one SGE on a new QP", b.post_recv(&qp, &recv(2, vec![sge(&mr, 0, 8)])), EINVAL)?;
    expect_ok("modify to RESET", b.modify_qp(&qp, &QpModify::to(QpState::Reset)))?;
    expect_errno("a receive without SGEs after RESET", b.post_recv(&qp, &recv(3, vec![])), EINVAL)?;
    let init = QpModify { state: QpState::Init, access: QP_ACCESS, dest: None, ext: None };
    expect_ok("modify to INIT", b.modify_qp(&qp, &init))?;
    expect_ok("a receive with one SGE in INIT", b.post_recv(&qp, &recv(4, vec![sge(&mr, 0, 8)])))?;
    Ok(())
}
