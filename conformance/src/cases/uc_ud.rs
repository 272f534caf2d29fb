//! UC and UD QPs (items 141–150): UC's SENDs and WRITEs without ACKs, a message lost with
//! one of its packets, READ refused by the device; UD's datagrams to an address handle with
//! a Q_Key, the GRH area and the source QP at the receiver, a wrong Q_Key dropped, a message
//! past the MTU refused, the RoCE packet type in a receive's `sl` (item 274). Losses are
//! network fault rules, as in `recovery`.

use mlx5_dv::net_fault::opcode;
use mlx5_dv::{
    AccessFlags as A, Backend, Cq, NetAction, NetFault, Qp, QpAttrExt, QpAttrMask, QpCap, QpDest, QpInitAttr, QpModify,
    QpState, SendFlags, SendWr, UdDest, WcFlags, link_layer, qp_type, send_ops, wc_opcode, wc_status, wr_opcode,
};

use super::ctl;
use super::fixture::*;
use super::recovery::{device_index, fault};
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device, Need::SimControl];

pub(super) const CASES: &[Case] = &[
    Case { name: "uc.sends_and_writes_complete_with_no_answer", covers: &[141, 142], needs: NEEDS, run: uc_traffic },
    Case { name: "uc.a_lost_packet_drops_its_message", covers: &[143], needs: NEEDS, run: uc_lost },
    Case { name: "uc.read_completes_in_loc_qp_op_err", covers: &[144], needs: NEEDS, run: uc_read },
    Case { name: "uc.no_receive_posted_drops_the_send", covers: &[145], needs: NEEDS, run: uc_no_recv },
    Case { name: "ud.grh_src_qp_and_imm_at_the_receiver", covers: &[146, 147], needs: NEEDS, run: ud_traffic },
    Case { name: "ud.the_roce_packet_type_in_sl", covers: &[274], needs: NEEDS, run: ud_packet_type },
    Case { name: "ud.a_wrong_qkey_is_dropped", covers: &[148], needs: NEEDS, run: ud_qkey },
    Case { name: "ud.past_the_mtu_is_loc_len_err", covers: &[149], needs: NEEDS, run: ud_oversize },
    Case { name: "ud.a_short_receive_buffer_is_loc_len_err", covers: &[150], needs: NEEDS, run: ud_short_recv },
];

/// `IBV_MTU_256`: a message of 600 bytes takes three packets.
const MTU_256: u32 = 1;
/// The Q_Key both UD QPs take.
pub(super) const QKEY: u32 = 0x1111_1111;
/// The GRH area at the head of a UD receive buffer.
pub(super) const GRH: u32 = 40;

/// Two QPs of one type on two devices when the run has a second one (else on one), and each
/// one's device index for fault rules.
pub(super) struct Two {
    pub(super) a: Side,
    pub(super) s: Side,
    dev_a: u32,
    dev_s: u32,
}

fn caps() -> QpCap {
    QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 0 }
}

/// A QP of `ty` (UC or UD), posted through `ibv_post_send`.
pub(super) fn create(b: &mut dyn Backend, ty: u32, pd: mlx5_dv::PdHandle, cq: &Cq) -> Check<Qp> {
    let ops = send_ops::SEND | send_ops::SEND_WITH_IMM;
    let ops = if ty == qp_type::UC { ops | send_ops::RDMA_WRITE | send_ops::RDMA_WRITE_WITH_IMM } else { ops };
    let attr = QpInitAttr { qp_type: ty, send_ops_flags: ops, dv: None, ..QpInitAttr::rc(pd, cq.handle, caps(), None) };
    expect_ok(&format!("create a QP of type {ty}"), b.create_qp(&attr))
}

/// Move `qp` of `ty` through INIT, RTR and RTS with the attributes the kernel's table
/// requires of the type: a UC QP towards `dest`, a UD QP with [`QKEY`].
pub(super) fn bring_up(b: &mut dyn Backend, ty: u32, qp: &Qp, dest: Option<QpDest>) -> Check {
    let mut from = QpState::Reset;
    for to in [QpState::Init, QpState::Rtr, QpState::Rts] {
        let Some((required, _)) = mlx5_dv::qp_transition(ty, from, to) else {
            return Err(Verdict::fail("a transition of the type", format!("{from:?} -> {to:?}"), "none"));
        };
        let ext = QpAttrExt { mask: QpAttrMask::STATE | required, qkey: QKEY, ..QpAttrExt::defaults() };
        let step = QpModify::exact(to, A::LOCAL_WRITE | A::REMOTE_WRITE, dest.filter(|_| to == QpState::Rtr), ext);
        expect_ok(&format!("modify to {to:?}"), b.modify_qp(qp, &step))?;
        from = to;
    }
    Ok(())
}

/// A side on device `name` with a QP of `ty`; skipped on an InfiniBand port, where the
/// network fault rules have no RoCE packets to act on.
fn side(b: &mut dyn Backend, name: &str, ty: u32) -> Check<Side> {
    let (ctx, pd, cq) = open(b, name)?;
    let roce = expect_ok("ibv_query_port", b.query_port(ctx, 1))?.link_layer == link_layer::ETHERNET;
    if !roce {
        return Err(Verdict::skip("network fault rules act on RoCE packets; this port is InfiniBand"));
    }
    let qp = create(b, ty, pd, &cq)?;
    Ok(Side { ctx, pd, cq, qp })
}

pub(super) fn two(b: &mut dyn Backend, env: &Env, ty: u32) -> Check<Two> {
    ctl(b)?.clear_faults();
    let name_a = env.dev()?.to_string();
    let name_s = env.peer_device.clone().unwrap_or_else(|| name_a.clone());
    let (a, s) = (side(b, &name_a, ty)?, side(b, &name_s, ty)?);
    let connected = ty == qp_type::UC;
    let mut to_s = dest(b, s.ctx, &s.qp)?;
    let mut to_a = dest(b, a.ctx, &a.qp)?;
    (to_s.path_mtu, to_a.path_mtu) = (MTU_256, MTU_256);
    bring_up(b, ty, &a.qp, connected.then_some(to_s))?;
    bring_up(b, ty, &s.qp, connected.then_some(to_a))?;
    let (dev_a, dev_s) = (device_index(b, &name_a)?, device_index(b, &name_s)?);
    Ok(Two { a, s, dev_a, dev_s })
}

/// A signalled `ibv_post_send` WR.
fn wr(wr_id: u64, opcode: u32, sge: Vec<mlx5_dv::Sge>) -> SendWr {
    SendWr { wr_id, opcode, send_flags: SendFlags::SIGNALED, sge, ..SendWr::default() }
}

fn post(b: &mut dyn Backend, qp: &Qp, wrs: &[SendWr]) -> Check {
    expect_ok("ibv_post_send", b.post_send_wr(qp, wrs))
}

/// (wr_id, status, opcode, byte_len) of `n` completions.
fn polled(b: &mut dyn Backend, cq: &Cq, n: usize) -> Check<Vec<(u64, u32, u32, u32)>> {
    Ok(poll(b, cq, n)?.iter().map(|w| (w.wr_id, w.status, w.opcode, w.byte_len)).collect())
}

fn uc_traffic(b: &mut dyn Backend, env: &Env) -> Check {
    let t = two(b, env, qp_type::UC)?;
    // With two devices, nothing the responder's side sends gets through: a UC requester waits
    // for nothing.
    if t.dev_s != t.dev_a {
        fault(b, t.dev_s, drop_all())?;
    }
    let (rbuf, rmr) = region(b, t.s.pd, 4096, &pattern(4096, 0), A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let (_abuf, amr) = region(b, t.a.pd, 4096, &pattern(4096, 9), A::LOCAL_WRITE)?;
    recv(b, &t.s.qp, 100, vec![sge(&rmr, 0, 1024)])?;
    recv(b, &t.s.qp, 101, vec![sge(&rmr, 1024, 1024)])?;
    let send = wr(1, wr_opcode::SEND, vec![sge(&amr, 0, 600)]);
    let send_imm = SendWr { imm_data: 0x1234_5678, ..wr(2, wr_opcode::SEND_WITH_IMM, vec![sge(&amr, 100, 300)]) };
    let write = SendWr {
        remote_addr: rmr.addr + 2048,
        rkey: rmr.rkey,
        ..wr(3, wr_opcode::RDMA_WRITE, vec![sge(&amr, 1000, 700)])
    };
    let write_imm = SendWr {
        remote_addr: rmr.addr + 3000,
        rkey: rmr.rkey,
        imm_data: 0xabcd,
        ..wr(4, wr_opcode::RDMA_WRITE_WITH_IMM, vec![sge(&amr, 2000, 50)])
    };
    recv(b, &t.s.qp, 102, vec![])?;
    post(b, &t.a.qp, &[send, send_imm, write, write_imm])?;
    let want: Vec<_> =
        [(1, wc_opcode::SEND), (2, wc_opcode::SEND), (3, wc_opcode::RDMA_WRITE), (4, wc_opcode::RDMA_WRITE)]
            .iter()
            .map(|&(i, o)| (i, wc_status::SUCCESS, o, 0))
            .collect();
    let got: Vec<_> = polled(b, &t.a.cq, 4)?.into_iter().map(|(i, s, o, _)| (i, s, o, 0)).collect();
    check_eq("the requester's completions, no ACK waited for", got, want)?;
    let wcs = poll(b, &t.s.cq, 3)?;
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode, w.byte_len, w.imm_data)).collect();
    let want = vec![
        (100, wc_status::SUCCESS, wc_opcode::RECV, 600, 0),
        (101, wc_status::SUCCESS, wc_opcode::RECV, 300, 0x1234_5678),
        (102, wc_status::SUCCESS, wc_opcode::RECV_RDMA_WITH_IMM, 50, 0xabcd),
    ];
    check_eq("the responder's completions (wr_id, status, opcode, byte_len, imm)", got, want)?;
    let flags = wcs.get(1).map(|w| w.wc_flags).unwrap_or_default();
    check("the SEND_WITH_IMM completion's flags", flags.contains(WcFlags::WITH_IMM), "WITH_IMM", flags)?;
    let mut mem = pattern(4096, 0);
    let from = pattern(4096, 9);
    mem[..600].copy_from_slice(&from[..600]);
    mem[1024..1324].copy_from_slice(&from[100..400]);
    mem[2048..2748].copy_from_slice(&from[1000..1700]);
    mem[3000..3050].copy_from_slice(&from[2000..2050]);
    check_eq("the responder's memory", contents(b, &rbuf)?, mem)?;
    ctl(b)?.clear_faults();
    Ok(())
}

/// Every packet a port sends is dropped.
fn drop_all() -> NetFault {
    NetFault::new(NetAction::Drop).always()
}

fn uc_lost(b: &mut dyn Backend, env: &Env) -> Check {
    let t = two(b, env, qp_type::UC)?;
    // The second SEND's middle packet (UC SEND Middle, 0x21) is lost once.
    fault(b, t.dev_a, NetFault::new(NetAction::Drop).opcode(opcode::UC + opcode::SEND_MIDDLE).skip(1))?;
    let (rbuf, rmr) = region(b, t.s.pd, 4096, &pattern(4096, 0), A::LOCAL_WRITE)?;
    let (_abuf, amr) = region(b, t.a.pd, 4096, &pattern(4096, 4), A::LOCAL_WRITE)?;
    for i in 0..3u64 {
        recv(b, &t.s.qp, 100 + i, vec![sge(&rmr, 1024 * i, 1024)])?;
    }
    let sends: Vec<_> = (0..3u64).map(|i| wr(i + 1, wr_opcode::SEND, vec![sge(&amr, 1000 * i, 600)])).collect();
    post(b, &t.a.qp, &sends)?;
    let got: Vec<_> = polled(b, &t.a.cq, 3)?.into_iter().map(|(i, s, ..)| (i, s)).collect();
    check_eq("the requester: all three complete, sent once", got, (1..=3).map(|i| (i, wc_status::SUCCESS)).collect())?;
    // The first and third SENDs land in the first two receives; the lost one takes none.
    let got = polled(b, &t.s.cq, 2)?;
    check_eq(
        "the responder's completions",
        got,
        vec![(100, wc_status::SUCCESS, wc_opcode::RECV, 600), (101, wc_status::SUCCESS, wc_opcode::RECV, 600)],
    )?;
    no_cqe(b, &t.s.cq)?;
    let mut mem = pattern(4096, 0);
    let from = pattern(4096, 4);
    mem[..600].copy_from_slice(&from[..600]);
    mem[1024..1624].copy_from_slice(&from[2000..2600]);
    check_eq("the receive buffers: the first and third SENDs", contents(b, &rbuf)?, mem)?;
    ctl(b)?.clear_faults();
    Ok(())
}

fn uc_read(b: &mut dyn Backend, env: &Env) -> Check {
    let t = two(b, env, qp_type::UC)?;
    let (_rbuf, rmr) = region(b, t.s.pd, 256, &pattern(256, 0), A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let (_abuf, amr) = region(b, t.a.pd, 256, &[], A::LOCAL_WRITE)?;
    let read = SendWr { remote_addr: rmr.addr, rkey: rmr.rkey, ..wr(1, wr_opcode::RDMA_READ, vec![sge(&amr, 0, 64)]) };
    let send = wr(2, wr_opcode::SEND, vec![sge(&amr, 0, 8)]);
    // libmlx5 posts it (its UC case writes no remote address segment); the device refuses it.
    post(b, &t.a.qp, &[read, send])?;
    err_cqe(b, &t.a.cq, 1, wc_status::LOC_QP_OP_ERR)?;
    err_cqe(b, &t.a.cq, 2, wc_status::WR_FLUSH_ERR)?;
    check_eq("the requester QP", expect_ok("query", b.query_qp_state(&t.a.qp))?, QpState::Err)?;
    no_cqe(b, &t.s.cq)
}

fn uc_no_recv(b: &mut dyn Backend, env: &Env) -> Check {
    let t = two(b, env, qp_type::UC)?;
    let (rbuf, rmr) = region(b, t.s.pd, 256, &pattern(256, 0), A::LOCAL_WRITE)?;
    let (_abuf, amr) = region(b, t.a.pd, 256, &pattern(256, 6), A::LOCAL_WRITE)?;
    post(b, &t.a.qp, &[wr(1, wr_opcode::SEND, vec![sge(&amr, 0, 16)])])?;
    ok_cqe(b, &t.a.cq, 1, wc_opcode::SEND)?;
    no_cqe(b, &t.s.cq)?;
    // No RNR wait and no error: the next SEND, with a receive posted, is taken.
    recv(b, &t.s.qp, 100, vec![sge(&rmr, 0, 256)])?;
    post(b, &t.a.qp, &[wr(2, wr_opcode::SEND, vec![sge(&amr, 32, 16)])])?;
    ok_cqe(b, &t.a.cq, 2, wc_opcode::SEND)?;
    let wc = ok_cqe(b, &t.s.cq, 100, wc_opcode::RECV)?;
    check_eq("its length", wc.byte_len, 16)?;
    let mut mem = pattern(256, 0);
    mem[..16].copy_from_slice(&pattern(256, 6)[32..48]);
    check_eq("the receive buffer: the second SEND", contents(b, &rbuf)?, mem.clone())?;
    // A WRITE the responder refuses (its MR has no remote write): dropped, no error anywhere.
    let bad = SendWr { remote_addr: rmr.addr, rkey: rmr.rkey, ..wr(3, wr_opcode::RDMA_WRITE, vec![sge(&amr, 0, 16)]) };
    post(b, &t.a.qp, &[bad])?;
    ok_cqe(b, &t.a.cq, 3, wc_opcode::RDMA_WRITE)?;
    no_cqe(b, &t.s.cq)?;
    check_eq("the receive buffer after the refused WRITE", contents(b, &rbuf)?, mem)?;
    check_eq("the responder QP", expect_ok("query", b.query_qp_state(&t.s.qp))?, QpState::Rts)
}

/// `wr.ud` towards `to`'s QP with `qkey`.
pub(super) fn ud_to(b: &mut dyn Backend, to: &Side, qkey: u32) -> Check<UdDest> {
    let d = dest(b, to.ctx, &to.qp)?;
    Ok(UdDest::new(d.ah, to.qp.qp_num, qkey))
}

fn ud_traffic(b: &mut dyn Backend, env: &Env) -> Check {
    let t = two(b, env, qp_type::UD)?;
    let (rbuf, rmr) = region(b, t.s.pd, 1024, &pattern(1024, 0), A::LOCAL_WRITE)?;
    let (_abuf, amr) = region(b, t.a.pd, 1024, &pattern(1024, 8), A::LOCAL_WRITE)?;
    recv(b, &t.s.qp, 100, vec![sge(&rmr, 0, 512)])?;
    recv(b, &t.s.qp, 101, vec![sge(&rmr, 512, 512)])?;
    let ud = Some(ud_to(b, &t.s, QKEY)?);
    let send = SendWr { ud, ..wr(1, wr_opcode::SEND, vec![sge(&amr, 0, 200)]) };
    // A Q_Key with its top bit set stands for the sender's own (the same QKEY here).
    let ud_own = ud.map(|u| UdDest { remote_qkey: 0x8000_0000, ..u });
    let imm = SendWr { ud: ud_own, imm_data: 0x77, ..wr(2, wr_opcode::SEND_WITH_IMM, vec![sge(&amr, 300, 100)]) };
    post(b, &t.a.qp, &[send, imm])?;
    let got = polled(b, &t.a.cq, 2)?;
    check_eq(
        "the requester's completions",
        got.iter().map(|c| (c.0, c.1, c.2)).collect::<Vec<_>>(),
        vec![(1, wc_status::SUCCESS, wc_opcode::SEND), (2, wc_status::SUCCESS, wc_opcode::SEND)],
    )?;
    let wcs = poll(b, &t.s.cq, 2)?;
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.byte_len, w.src_qp, w.imm_data)).collect();
    let (ok, src) = (wc_status::SUCCESS, t.a.qp.qp_num);
    let want = vec![(100, ok, 200 + GRH, src, 0), (101, ok, 100 + GRH, src, 0x77)];
    check_eq("(wr_id, status, byte_len = payload + 40, src_qp, imm)", got, want)?;
    for w in &wcs {
        check("the completion's flags", w.wc_flags.contains(WcFlags::GRH), "IBV_WC_GRH", w.wc_flags)?;
    }
    let mem = contents(b, &rbuf)?;
    let from = pattern(1024, 8);
    check_eq("the first payload after the GRH area", mem[40..240].to_vec(), from[..200].to_vec())?;
    check_eq("the second payload after the GRH area", mem[552..652].to_vec(), from[300..400].to_vec())?;
    check_eq("past the second payload", mem[652..].to_vec(), pattern(1024, 0)[652..].to_vec())?;
    // RoCE v2 over IPv4: an IPv4 header in the area's last 20 bytes; else an IPv6-format GRH.
    let area = mem[..40].to_vec();
    let ok = (area[..20] == [0; 20] && area[20] == 0x45) || area[0] >> 4 == 6;
    check("the GRH area", ok, "an IPv4 header at byte 20, or a GRH of version 6", area)
}

/// On RoCE a UD receive's `sl` is the packet type: RoCE v2 (8) over IPv4 (2) when the GRH
/// area holds an IPv4 header; RoCE v1 (0) or RoCE v2 over IPv6 (9) with a GRH of version 6.
/// A simulator off the network has link-local GIDs only, so there it meets the second.
fn ud_packet_type(b: &mut dyn Backend, env: &Env) -> Check {
    let t = two(b, env, qp_type::UD)?;
    let (rbuf, rmr) = region(b, t.s.pd, 256, &[], A::LOCAL_WRITE)?;
    let (_abuf, amr) = region(b, t.a.pd, 64, &pattern(64, 3), A::LOCAL_WRITE)?;
    recv(b, &t.s.qp, 100, vec![sge(&rmr, 0, 256)])?;
    let ud = Some(ud_to(b, &t.s, QKEY)?);
    post(b, &t.a.qp, &[SendWr { ud, ..wr(1, wr_opcode::SEND, vec![sge(&amr, 0, 32)]) }])?;
    ok_cqe(b, &t.a.cq, 1, wc_opcode::SEND)?;
    let wc = ok_cqe(b, &t.s.cq, 100, wc_opcode::RECV)?;
    check("the completion's flags", wc.wc_flags.contains(WcFlags::GRH), "IBV_WC_GRH", wc.wc_flags)?;
    let area = contents(b, &rbuf)?[..40].to_vec();
    if area[..20] == [0; 20] && area[20] == 0x45 {
        check_eq("sl: RoCE v2 over IPv4", wc.sl, 0xa)
    } else {
        check("sl with a GRH of version 6", matches!(wc.sl, 0 | 9), "0 (RoCE v1) or 9 (RoCE v2, IPv6)", wc.sl)
    }
}

fn ud_qkey(b: &mut dyn Backend, env: &Env) -> Check {
    let t = two(b, env, qp_type::UD)?;
    let (_rbuf, rmr) = region(b, t.s.pd, 1024, &[], A::LOCAL_WRITE)?;
    let (_abuf, amr) = region(b, t.a.pd, 256, &pattern(256, 2), A::LOCAL_WRITE)?;
    recv(b, &t.s.qp, 100, vec![sge(&rmr, 0, 1024)])?;
    let wrong = Some(ud_to(b, &t.s, QKEY + 1)?);
    let right = Some(ud_to(b, &t.s, QKEY)?);
    let wrs = [
        SendWr { ud: wrong, ..wr(1, wr_opcode::SEND, vec![sge(&amr, 0, 10)]) },
        SendWr { ud: right, ..wr(2, wr_opcode::SEND, vec![sge(&amr, 0, 20)]) },
    ];
    post(b, &t.a.qp, &wrs)?;
    let got: Vec<_> = polled(b, &t.a.cq, 2)?.into_iter().map(|c| (c.0, c.1)).collect();
    check_eq("both sends complete", got, vec![(1, wc_status::SUCCESS), (2, wc_status::SUCCESS)])?;
    // The datagram with the wrong Q_Key took no receive: the second one has it.
    let wc = ok_cqe(b, &t.s.cq, 100, wc_opcode::RECV)?;
    check_eq("the receive's length: the second datagram's", wc.byte_len, 20 + GRH)?;
    no_cqe(b, &t.s.cq)
}

fn ud_oversize(b: &mut dyn Backend, env: &Env) -> Check {
    let t = two(b, env, qp_type::UD)?;
    let port = expect_ok("ibv_query_port", b.query_port(t.a.ctx, 1))?;
    let mtu = 128u32 << port.active_mtu.clamp(1, 5);
    let (_abuf, amr) = region(b, t.a.pd, 8192, &[], A::LOCAL_WRITE)?;
    let (_rbuf, rmr) = region(b, t.s.pd, 8192, &[], A::LOCAL_WRITE)?;
    recv(b, &t.s.qp, 100, vec![sge(&rmr, 0, 8192)])?;
    let ud = Some(ud_to(b, &t.s, QKEY)?);
    let wrs = [
        SendWr { ud, ..wr(1, wr_opcode::SEND, vec![sge(&amr, 0, mtu)]) },
        SendWr { ud, ..wr(2, wr_opcode::SEND, vec![sge(&amr, 0, mtu + 1)]) },
    ];
    post(b, &t.a.qp, &wrs)?;
    ok_cqe(b, &t.a.cq, 1, wc_opcode::SEND)?;
    err_cqe(b, &t.a.cq, 2, wc_status::LOC_LEN_ERR)?;
    let wc = ok_cqe(b, &t.s.cq, 100, wc_opcode::RECV)?;
    check_eq("the MTU-long datagram arrived", wc.byte_len, mtu + GRH)?;
    check_eq("the requester QP", expect_ok("query", b.query_qp_state(&t.a.qp))?, QpState::Err)
}

fn ud_short_recv(b: &mut dyn Backend, env: &Env) -> Check {
    let t = two(b, env, qp_type::UD)?;
    let (_abuf, amr) = region(b, t.a.pd, 256, &[], A::LOCAL_WRITE)?;
    let (_rbuf, rmr) = region(b, t.s.pd, 256, &[], A::LOCAL_WRITE)?;
    // 60 bytes of room: not enough for the GRH area and 30 bytes.
    recv(b, &t.s.qp, 100, vec![sge(&rmr, 0, 60)])?;
    let ud = Some(ud_to(b, &t.s, QKEY)?);
    post(b, &t.a.qp, &[SendWr { ud, ..wr(1, wr_opcode::SEND, vec![sge(&amr, 0, 30)]) }])?;
    ok_cqe(b, &t.a.cq, 1, wc_opcode::SEND)?;
    err_cqe(b, &t.s.cq, 100, wc_status::LOC_LEN_ERR)?;
    check_eq("the responder QP", expect_ok("query", b.query_qp_state(&t.s.qp))?, QpState::Err)
}
