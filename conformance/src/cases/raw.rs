//! Raw packet QPs (items 216–219): their creation through the three calls with the Ethernet
//! segment in the send WQE's overhead, the transitions and attributes the kernel lets them
//! take, and the creation flags only they take.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags, Backend, Cq, DvQpCreateFlags, DvQpInitAttr, DvSendOpsFlags, PdHandle, QpAttrExt, QpAttrMask as M,
    QpCap, QpInitAttr, QpModify, QpState, dv_qp, qp_create_flags, qp_init_mask, qp_type, send_ops,
};

use super::fixture::open;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device];

pub(super) const CASES: &[Case] = &[
    Case { name: "raw.created_in_reset_with_the_eth_segment", covers: &[216], needs: NEEDS, run: created },
    Case { name: "raw.modify_takes_the_port_alone", covers: &[217], needs: NEEDS, run: modify },
    Case { name: "raw.offload_create_flags_on_raw_only", covers: &[218], needs: NEEDS, run: create_flags },
    Case { name: "raw.dv_tunnel_and_loopback_flags_on_raw_only", covers: &[219], needs: NEEDS, run: dv_flags },
];

/// 16 WRs, 2 SGEs each way, no inline data requested.
const CAP: QpCap = QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 0 };

/// Skip unless the backend knows the device takes raw packet QPs.
fn needs_raw(env: &Env) -> Check {
    match env.caps.device.raw_packet {
        Some(true) => Ok(()),
        Some(false) => Err(Verdict::skip("the device has no raw packet QPs (an InfiniBand port)")),
        None => Err(Verdict::skip("unknown whether raw packet QPs can be made (an Ethernet port and CAP_NET_RAW)")),
    }
}

fn setup(b: &mut dyn Backend, env: &Env) -> Check<(PdHandle, Cq)> {
    needs_raw(env)?;
    let (_, pd, cq) = open(b, env.dev()?)?;
    Ok((pd, cq))
}

/// A QP of `ty` with `ibv_create_qp_ex`'s default mask and `create_flags`, or
/// `mlx5dv_create_qp`'s attributes.
fn attr(pd: PdHandle, cq: &Cq, ty: u32, create_flags: u32, dv: Option<DvQpInitAttr>) -> QpInitAttr {
    let ops = if ty == qp_type::RAW_PACKET { send_ops::SEND } else { send_ops::RC_DEFAULT };
    QpInitAttr {
        qp_type: ty,
        send_ops_flags: ops,
        create_flags,
        comp_mask: (create_flags != 0).then_some(qp_init_mask::DEFAULT | qp_init_mask::CREATE_FLAGS),
        ..QpInitAttr::rc(pd, cq.handle, CAP, dv)
    }
}

fn created(b: &mut dyn Backend, env: &Env) -> Check {
    let (pd, cq) = setup(b, env)?;
    // ctrl (16) + eth (16) + 2 SGEs (32) = 64 bytes: one basic block, of which 28 bytes
    // of inline data fit behind the 32-byte overhead and the 4-byte inline header.
    let legacy =
        QpInitAttr { send_ops_flags: mlx5_dv::SendOpsFlags::empty(), ..attr(pd, &cq, qp_type::RAW_PACKET, 0, None) };
    let qp = expect_ok("ibv_create_qp of a raw packet QP", b.create_qp(&legacy))?;
    check_eq("max_inline_data written back", qp.cap.max_inline_data, 28)?;
    check_eq("max_send_wr written back", qp.cap.max_send_wr, 16)?;
    check_eq("a new QP's state", expect_ok("ibv_query_qp", b.query_qp_state(&qp))?, QpState::Reset)?;
    let ex = QpInitAttr {
        comp_mask: Some(qp_init_mask::DEFAULT | qp_init_mask::SEND_OPS_FLAGS),
        ..attr(pd, &cq, qp_type::RAW_PACKET, 0, None)
    };
    let qp_ex = expect_ok("ibv_create_qp_ex of a raw packet QP with send ops", b.create_qp(&ex))?;
    check_eq("its max_inline_data", qp_ex.cap.max_inline_data, 28)?;
    let dv = DvQpInitAttr::new(DvQpCreateFlags::empty(), DvSendOpsFlags::empty());
    let qp_dv = expect_ok(
        "mlx5dv_create_qp of a raw packet QP",
        b.create_qp(&attr(pd, &cq, qp_type::RAW_PACKET, 0, Some(dv))),
    )?;
    check_eq("its state", expect_ok("ibv_query_qp", b.query_qp_state(&qp_dv))?, QpState::Reset)?;
    for q in [qp, qp_ex, qp_dv] {
        expect_ok("ibv_destroy_qp", b.destroy_qp(&q))?;
    }
    Ok(())
}

/// `ibv_modify_qp` of `qp` to `to` with exactly `mask` (besides IBV_QP_STATE).
fn step(to: QpState, mask: M) -> QpModify {
    let ext = QpAttrExt { mask: M::STATE | mask, qkey: 0x11, ..QpAttrExt::defaults() };
    QpModify::exact(to, AccessFlags::empty(), None, ext)
}

fn modify(b: &mut dyn Backend, env: &Env) -> Check {
    let (pd, cq) = setup(b, env)?;
    let qp = expect_ok("create a raw packet QP", b.create_qp(&attr(pd, &cq, qp_type::RAW_PACKET, 0, None)))?;
    expect_errno("RESET -> INIT without IBV_QP_PORT", b.modify_qp(&qp, &step(QpState::Init, M::empty())), EINVAL)?;
    expect_errno("RESET -> INIT with a Q_Key", b.modify_qp(&qp, &step(QpState::Init, M::PORT | M::QKEY)), EINVAL)?;
    let pkey = step(QpState::Init, M::PORT | M::PKEY_INDEX);
    expect_errno("RESET -> INIT with a P_Key index", b.modify_qp(&qp, &pkey), EINVAL)?;
    expect_ok("RESET -> INIT with the port", b.modify_qp(&qp, &step(QpState::Init, M::PORT)))?;
    expect_errno("INIT -> RTR with a path MTU", b.modify_qp(&qp, &step(QpState::Rtr, M::PATH_MTU)), EINVAL)?;
    expect_ok("INIT -> RTR with the state alone", b.modify_qp(&qp, &step(QpState::Rtr, M::empty())))?;
    expect_errno("RTR -> RTS with an SQ PSN", b.modify_qp(&qp, &step(QpState::Rts, M::SQ_PSN)), EINVAL)?;
    expect_ok("RTR -> RTS with the state alone", b.modify_qp(&qp, &step(QpState::Rts, M::empty())))?;
    check_eq("the state reached", expect_ok("ibv_query_qp", b.query_qp_state(&qp))?, QpState::Rts)?;
    expect_ok("ibv_destroy_qp", b.destroy_qp(&qp))
}

fn create_flags(b: &mut dyn Backend, env: &Env) -> Check {
    let (pd, cq) = setup(b, env)?;
    for (name, flag) in [
        ("SCATTER_FCS", qp_create_flags::SCATTER_FCS),
        ("CVLAN_STRIPPING", qp_create_flags::CVLAN_STRIPPING),
        ("PCI_WRITE_END_PADDING", qp_create_flags::PCI_WRITE_END_PADDING),
    ] {
        let raw = attr(pd, &cq, qp_type::RAW_PACKET, flag, None);
        let qp = expect_ok(&format!("a raw packet QP with {name}"), b.create_qp(&raw))?;
        expect_ok("ibv_destroy_qp", b.destroy_qp(&qp))?;
    }
    for (name, flag) in
        [("SCATTER_FCS", qp_create_flags::SCATTER_FCS), ("CVLAN_STRIPPING", qp_create_flags::CVLAN_STRIPPING)]
    {
        for ty in [qp_type::UD, qp_type::RC] {
            let other = QpInitAttr {
                send_ops_flags: if ty == qp_type::UD { send_ops::SEND } else { send_ops::RC_DEFAULT },
                ..attr(pd, &cq, ty, flag, None)
            };
            expect_errno(&format!("a QP of type {ty} with {name}"), b.create_qp(&other), EOPNOTSUPP)?;
        }
    }
    Ok(())
}

fn dv_flags(b: &mut dyn Backend, env: &Env) -> Check {
    let (pd, cq) = setup(b, env)?;
    for (name, flag) in [
        ("TUNNEL_OFFLOADS", dv_qp::CREATE_TUNNEL_OFFLOADS),
        ("TIR_ALLOW_SELF_LOOPBACK_UC", dv_qp::CREATE_TIR_ALLOW_SELF_LOOPBACK_UC),
        ("TIR_ALLOW_SELF_LOOPBACK_MC", dv_qp::CREATE_TIR_ALLOW_SELF_LOOPBACK_MC),
    ] {
        let dv = Some(DvQpInitAttr::new(flag, DvSendOpsFlags::empty()));
        let qp = expect_ok(
            &format!("a raw packet QP with {name}"),
            b.create_qp(&attr(pd, &cq, qp_type::RAW_PACKET, 0, dv)),
        )?;
        expect_ok("ibv_destroy_qp", b.destroy_qp(&qp))?;
        expect_errno(&format!("an RC QP with {name}"), b.create_qp(&attr(pd, &cq, qp_type::RC, 0, dv)), EINVAL)?;
    }
    Ok(())
}
