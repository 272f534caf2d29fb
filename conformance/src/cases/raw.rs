//! Raw packet QPs and verbs flow steering (items 216–222, 261): their creation through the
//! three calls with the Ethernet segment in the send WQE's overhead, the transitions and
//! attributes the kernel lets them take, the creation flags only they take; frames sent and
//! steered by rules to the QP that receives them; `ibv_create_flow`'s checks.

use mlx5_dv::errno::{EBUSY, EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags, Backend, Cq, DvQpCreateFlags, DvQpInitAttr, DvSendOpsFlags, PdHandle, QpAttrExt, QpAttrMask as M,
    QpCap, QpInitAttr, QpModify, QpState, dv_qp, qp_create_flags, qp_init_mask, qp_type, send_ops,
};

use super::fixture::{contents, no_cqe, ok_cqe, open, pattern, recv, region, sge};
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device];

pub(super) const CASES: &[Case] = &[
    Case { name: "raw.created_in_reset_with_the_eth_segment", covers: &[216], needs: NEEDS, run: created },
    Case { name: "raw.modify_takes_the_port_alone", covers: &[217], needs: NEEDS, run: modify },
    Case { name: "raw.offload_create_flags_on_raw_only", covers: &[218], needs: NEEDS, run: create_flags },
    Case { name: "raw.dv_tunnel_and_loopback_flags_on_raw_only", covers: &[219], needs: NEEDS, run: dv_flags },
    Case { name: "raw.a_frame_reaches_the_qp_its_rule_names", covers: &[220], needs: NEEDS, run: frame },
    Case { name: "raw.a_wr_without_an_sge_is_einval", covers: &[221], needs: NEEDS, run: no_sge },
    Case { name: "raw.the_best_priority_rule_takes_the_frame", covers: &[222], needs: NEEDS, run: priorities },
    Case { name: "flow.create_checks_and_errno", covers: &[261], needs: NEEDS, run: flow_checks },
];

/// 16 WRs, 2 SGEs each way, no inline data requested.
const CAP: QpCap = QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 0 };

/// Skip unless the backend knows the device takes raw packet QPs.
pub(super) fn needs_raw(env: &Env) -> Check {
    match env.caps.device.raw_packet {
        Some(true) => Ok(()),
        Some(false) => Err(Verdict::skip("the device has no raw packet QPs (an InfiniBand port)")),
        None => Err(Verdict::skip("unknown whether raw packet QPs can be made (an Ethernet port and CAP_NET_RAW)")),
    }
}

pub(super) fn setup(b: &mut dyn Backend, env: &Env) -> Check<(PdHandle, Cq)> {
    needs_raw(env)?;
    let (_, pd, cq) = open(b, env.dev()?)?;
    Ok((pd, cq))
}

/// A QP of `ty` with `ibv_create_qp_ex`'s default mask and `create_flags`, or
/// `mlx5dv_create_qp`'s attributes.
pub(super) fn attr(pd: PdHandle, cq: &Cq, ty: u32, create_flags: u32, dv: Option<DvQpInitAttr>) -> QpInitAttr {
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

/// The bytes of the frames these cases send: 64, an Ethernet + IPv4 + UDP header and data.
pub(super) const FRAME_LEN: usize = 64;
/// The destination MAC the frames carry.
const DST_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
/// The UDP destination port the frames carry.
const UDP_PORT: u16 = 4000;

/// An Ethernet frame to [`DST_MAC`] with an IPv4 + UDP header to [`UDP_PORT`], its other
/// bytes a pattern of `seed`.
pub(super) fn frame_bytes(seed: u8) -> Vec<u8> {
    let mut f = pattern(FRAME_LEN, seed);
    f[..6].copy_from_slice(&DST_MAC);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[23] = 17;
    f[36..38].copy_from_slice(&UDP_PORT.to_be_bytes());
    f
}

/// A rule on [`DST_MAC`] and IPv4.
pub(super) fn mac_spec() -> mlx5_dv::FlowSpec {
    let v = mlx5_dv::EthFilter { dst_mac: DST_MAC, ether_type: 0x0800, ..Default::default() };
    let m = mlx5_dv::EthFilter { dst_mac: [0xff; 6], ether_type: 0xffff, ..Default::default() };
    mlx5_dv::FlowSpec::Eth(v, m)
}

/// A rule on UDP destination port [`UDP_PORT`].
fn udp_spec() -> mlx5_dv::FlowSpec {
    let v = mlx5_dv::PortFilter { dst_port: UDP_PORT, src_port: 0 };
    mlx5_dv::FlowSpec::Udp(v, mlx5_dv::PortFilter { dst_port: 0xffff, src_port: 0 })
}

/// A raw QP in RTS on its own context, with a registered buffer of four frames.
pub(super) struct RawSide {
    pub(super) cq: Cq,
    pub(super) qp: mlx5_dv::Qp,
    pub(super) buf: mlx5_dv::Buf,
    pub(super) mr: mlx5_dv::Mr,
}

pub(super) fn raw_side(b: &mut dyn Backend, env: &Env) -> Check<RawSide> {
    let (pd, cq) = setup(b, env)?;
    let qp = expect_ok("create a raw packet QP", b.create_qp(&attr(pd, &cq, qp_type::RAW_PACKET, 0, None)))?;
    for (to, mask) in [(QpState::Init, M::PORT), (QpState::Rtr, M::empty()), (QpState::Rts, M::empty())] {
        expect_ok(&format!("modify to {to:?}"), b.modify_qp(&qp, &step(to, mask)))?;
    }
    let (buf, mr) = region(b, pd, 4 * FRAME_LEN, &[], AccessFlags::LOCAL_WRITE)?;
    Ok(RawSide { cq, qp, buf, mr })
}

/// Send `frame` from `s` (written at its buffer's start) and wait for the send's completion.
pub(super) fn send_frame(b: &mut dyn Backend, s: &RawSide, frame: &[u8], wr_id: u64) -> Check {
    expect_ok("write_buf", b.write_buf(&s.buf, 0, frame))?;
    let wr = mlx5_dv::SendWr {
        wr_id,
        opcode: mlx5_dv::wr_opcode::SEND,
        send_flags: mlx5_dv::SendFlags::SIGNALED,
        sge: vec![sge(&s.mr, 0, frame.len() as u32)],
        ..mlx5_dv::SendWr::default()
    };
    expect_ok("ibv_post_send of a frame", b.post_send_wr(&s.qp, &[wr]))?;
    ok_cqe(b, &s.cq, wr_id, mlx5_dv::wc_opcode::SEND).map(|_| ())
}

/// Post a receive of one frame at `s`'s second frame slot.
pub(super) fn post_frame_recv(b: &mut dyn Backend, s: &RawSide, wr_id: u64) -> Check {
    recv(b, &s.qp, wr_id, vec![sge(&s.mr, FRAME_LEN as u64, 2 * FRAME_LEN as u32)])
}

fn frame(b: &mut dyn Backend, env: &Env) -> Check {
    let (tx, rx) = (raw_side(b, env)?, raw_side(b, env)?);
    let flow = expect_ok("ibv_create_flow", b.create_flow(&rx.qp, &mlx5_dv::FlowAttr::normal(0, vec![mac_spec()])))?;
    post_frame_recv(b, &rx, 7)?;
    let f = frame_bytes(3);
    send_frame(b, &tx, &f, 1)?;
    let wc = ok_cqe(b, &rx.cq, 7, mlx5_dv::wc_opcode::RECV)?;
    check_eq("byte_len: the frame's", wc.byte_len, FRAME_LEN as u32)?;
    let got = contents(b, &rx.buf)?;
    check_eq("the frame received", &got[FRAME_LEN..2 * FRAME_LEN], &f[..])?;
    no_cqe(b, &tx.cq)?;
    expect_ok("ibv_destroy_flow", b.destroy_flow(&flow))
}

fn no_sge(b: &mut dyn Backend, env: &Env) -> Check {
    let tx = raw_side(b, env)?;
    let wr = mlx5_dv::SendWr { wr_id: 1, opcode: mlx5_dv::wr_opcode::SEND, ..mlx5_dv::SendWr::default() };
    expect_errno("a SEND without an SGE", b.post_send_wr(&tx.qp, &[wr]), EINVAL)?;
    no_cqe(b, &tx.cq)
}

fn priorities(b: &mut dyn Backend, env: &Env) -> Check {
    let (tx, low, high) = (raw_side(b, env)?, raw_side(b, env)?, raw_side(b, env)?);
    let f_low =
        expect_ok("a MAC rule at priority 1", b.create_flow(&low.qp, &mlx5_dv::FlowAttr::normal(1, vec![mac_spec()])))?;
    let f_high = expect_ok(
        "a UDP rule at priority 0",
        b.create_flow(&high.qp, &mlx5_dv::FlowAttr::normal(0, vec![udp_spec()])),
    )?;
    post_frame_recv(b, &low, 10)?;
    post_frame_recv(b, &high, 20)?;
    send_frame(b, &tx, &frame_bytes(5), 1)?;
    ok_cqe(b, &high.cq, 20, mlx5_dv::wc_opcode::RECV)?;
    no_cqe(b, &low.cq)?;
    expect_ok("ibv_destroy_flow of the priority-0 rule", b.destroy_flow(&f_high))?;
    send_frame(b, &tx, &frame_bytes(6), 2)?;
    ok_cqe(b, &low.cq, 10, mlx5_dv::wc_opcode::RECV)?;
    let mut other = frame_bytes(7);
    other[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x09]);
    post_frame_recv(b, &low, 11)?;
    send_frame(b, &tx, &other, 3)?;
    no_cqe(b, &low.cq)?;
    expect_ok("ibv_destroy_flow", b.destroy_flow(&f_low))
}

fn flow_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let rx = raw_side(b, env)?;
    let ok = mlx5_dv::FlowAttr::normal(0, vec![mac_spec()]);
    let bad = |f: fn(&mut mlx5_dv::FlowAttr)| {
        let mut a = ok.clone();
        f(&mut a);
        a
    };
    expect_errno("comp_mask 1", b.create_flow(&rx.qp, &bad(|a| a.comp_mask = 1)), EINVAL)?;
    expect_errno("flags 0x8", b.create_flow(&rx.qp, &bad(|a| a.flags = 0x8)), EINVAL)?;
    expect_errno("priority 16", b.create_flow(&rx.qp, &bad(|a| a.priority = 16)), ENOMEM)?;
    let (pd, cq) = setup(b, env)?;
    let rc = expect_ok("an RC QP", b.create_qp(&attr(pd, &cq, qp_type::RC, 0, None)))?;
    expect_errno("a flow to an RC QP", b.create_flow(&rc, &ok), EINVAL)?;
    let flow = expect_ok("ibv_create_flow", b.create_flow(&rx.qp, &ok))?;
    expect_errno("ibv_destroy_qp under a flow", b.destroy_qp(&rx.qp), EBUSY)?;
    expect_ok("ibv_destroy_flow", b.destroy_flow(&flow))?;
    expect_errno("ibv_destroy_flow again", b.destroy_flow(&flow), EINVAL)?;
    expect_ok("ibv_destroy_qp", b.destroy_qp(&rx.qp))
}
