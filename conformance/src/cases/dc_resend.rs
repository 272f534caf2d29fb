//! DC messages sent again (items 337–338): a DCT keeps each DCI's expected PSN, so a SEND,
//! SEND with immediate or WRITE with immediate that comes again after its ACK was lost is
//! acknowledged without a second receive, and one ahead of the expected PSN is refused with
//! a sequence error NAK the DCI goes back from; a DCI's new connection (another DCT, another
//! DCI, a DCI reset) starts its stream at its first request. Network fault rules put the
//! traffic on the in-memory fabric, in the simulator's DC encoding.

use mlx5_dv::net_fault::opcode;
use mlx5_dv::{
    AccessFlags as A, Backend, Buf, DcInitAttr, Mr, NetAction, NetFault, Qp, QpAttrMask as M, QpDest, QpState, RecvWr,
    SendFlags, SendWr, link_layer, wc_opcode, wc_status, wr_opcode,
};

use super::atomics::fault;
use super::ctl;
use super::dc::{Dc, KEY, bring_up, dc_attr, dc_dest, dci_to_rts, make, step};
use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "dc.resent_message_is_acknowledged_not_received_again",
        covers: &[337],
        needs: &[Need::Mlx5Device, Need::SimControl],
        run: resent,
    },
    Case {
        name: "dc.new_connection_starts_the_dcis_stream",
        covers: &[338],
        needs: &[Need::Mlx5Device, Need::SimControl],
        run: reconnect,
    },
];

const REMOTE: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE);

/// A message of `len` bytes from `src` at `off` towards `to`: SEND, SEND with immediate
/// `wr_id`, or WRITE with immediate `wr_id` into `dst`.
fn message(wr_id: u64, op: u32, (src, off, len): (&Mr, u64, u32), dst: &Mr, to: &QpDest) -> SendWr {
    SendWr {
        wr_id,
        opcode: op,
        send_flags: SendFlags::SIGNALED,
        sge: vec![sge(src, off, len)],
        imm_data: wr_id as u32,
        remote_addr: dst.addr,
        rkey: dst.rkey,
        dc: Some(dc_dest(to, KEY)),
        ..SendWr::default()
    }
}

/// The traffic's rig: a DCI and a DCT on one device, receives posted on the DCT's SRQ.
struct Rig {
    d: Dc,
    to: QpDest,
    src: Mr,
    dst: Mr,
    rbuf: Buf,
    dev: String,
}

fn rig(b: &mut dyn Backend, env: &Env) -> Check<Rig> {
    ctl(b)?.clear_faults();
    let d = make(b, env)?;
    if expect_ok("ibv_query_port", b.query_port(d.ctx, 1))?.link_layer != link_layer::ETHERNET {
        return Err(Verdict::skip("network fault rules act on RoCE packets; this port is InfiniBand"));
    }
    let to = bring_up(b, &d)?;
    let (_, src) = region(b, d.pd, 8192, &pattern(8192, 5), A::LOCAL_WRITE)?;
    let (_, dst) = region(b, d.pd, 64, &[0; 64], REMOTE)?;
    let (rbuf, rmr) = region(b, d.pd, 16 * 4096, &[0; 16 * 4096], A::LOCAL_WRITE)?;
    let recvs: Vec<_> = (0..16u64).map(|i| RecvWr { wr_id: 100 + i, sge: vec![sge(&rmr, 4096 * i, 4096)] }).collect();
    expect_ok("ibv_post_srq_recv of 16 receives", b.post_srq_recv(&d.srq, &recvs))?;
    Ok(Rig { d, to, src, dst, rbuf, dev: env.dev()?.to_string() })
}

/// The next `n` completions: the DCI's (wr_id, status) and the DCT side's receives
/// (wr_id, opcode, byte_len, qp_num), each in the order they came.
type Split = (Vec<(u64, u32)>, Vec<(u64, u32, u32, u32)>);
fn completions(b: &mut dyn Backend, r: &Rig, n: usize) -> Check<Split> {
    let wcs = poll(b, &r.d.cq, n)?;
    no_cqe(b, &r.d.cq)?;
    let (mut sent, mut got) = (Vec::new(), Vec::new());
    for w in wcs {
        if w.opcode == wc_opcode::RECV || w.opcode == wc_opcode::RECV_RDMA_WITH_IMM {
            got.push((w.wr_id, w.opcode, w.byte_len, w.qp_num));
        } else {
            sent.push((w.wr_id, w.status));
        }
    }
    Ok((sent, got))
}

fn ok(ids: impl IntoIterator<Item = u64>) -> Vec<(u64, u32)> {
    ids.into_iter().map(|i| (i, wc_status::SUCCESS)).collect()
}

fn resent(b: &mut dyn Backend, env: &Env) -> Check {
    let r = rig(b, env)?;
    let (dci, dct) = (r.d.dci.qp_num, r.d.dct.qp_num);
    // The DCT's first four ACKs to the DCI are lost: the DCI times out and sends all four
    // messages again (go-back-N); every SEND goes out twice as well.
    fault(b, &r.dev, NetFault::new(NetAction::Drop).opcode(opcode::ACKNOWLEDGE).qp(dci).times(4))?;
    fault(b, &r.dev, NetFault::new(NetAction::Duplicate).opcode(opcode::SEND_ONLY).always())?;
    let wrs = [
        message(1, wr_opcode::SEND, (&r.src, 0, 100), &r.dst, &r.to),
        message(2, wr_opcode::SEND_WITH_IMM, (&r.src, 100, 200), &r.dst, &r.to),
        message(3, wr_opcode::RDMA_WRITE_WITH_IMM, (&r.src, 300, 8), &r.dst, &r.to),
        message(4, wr_opcode::SEND, (&r.src, 400, 3000), &r.dst, &r.to),
    ];
    expect_ok("four messages from the DCI", b.post_send_wr(&r.d.dci, &wrs))?;
    let (sent, got) = completions(b, &r, 8)?;
    check_eq("the DCI's completions", sent, ok(1..=4))?;
    let want = vec![
        (100, wc_opcode::RECV, 100, dct),
        (101, wc_opcode::RECV, 200, dct),
        (102, wc_opcode::RECV_RDMA_WITH_IMM, 8, dct),
        (103, wc_opcode::RECV, 3000, dct),
    ];
    check_eq("the DCT's receives (wr_id, opcode, byte_len, qp_num): each message once, in order", got, want)?;
    let bytes = contents(b, &r.rbuf)?;
    let from = pattern(8192, 5);
    check_eq("the first SEND's bytes", bytes.get(..100), from.get(..100))?;
    check_eq("the last SEND's bytes", bytes.get(3 * 4096..3 * 4096 + 3000), from.get(400..3400))?;
    // The second of three messages is lost once: the third comes ahead of the PSN the DCT
    // expects, is refused with a sequence error NAK, and the DCI sends from the second on.
    ctl(b)?.clear_faults();
    fault(b, &r.dev, NetFault::new(NetAction::Drop).opcode(opcode::SEND_ONLY_IMM))?;
    let wrs = [
        message(5, wr_opcode::SEND, (&r.src, 0, 10), &r.dst, &r.to),
        message(6, wr_opcode::SEND_WITH_IMM, (&r.src, 0, 20), &r.dst, &r.to),
        message(7, wr_opcode::SEND, (&r.src, 0, 30), &r.dst, &r.to),
    ];
    expect_ok("three more messages", b.post_send_wr(&r.d.dci, &wrs))?;
    let (sent, got) = completions(b, &r, 6)?;
    check_eq("the DCI's completions", sent, ok(5..=7))?;
    let want = vec![(104, wc_opcode::RECV, 10, dct), (105, wc_opcode::RECV, 20, dct), (106, wc_opcode::RECV, 30, dct)];
    check_eq("the DCT's receives after a lost request: in order", got, want)?;
    ctl(b)?.clear_faults();
    Ok(())
}

/// A DCI in RTS again from RESET (its PSNs from 0 again).
fn reset_dci(b: &mut dyn Backend, q: &Qp, to: QpDest) -> Check {
    let s = M::STATE;
    expect_ok("DCI to RESET", step(b, q, QpState::Reset, s, None))?;
    dci_to_rts(b, q, to)
}

fn reconnect(b: &mut dyn Backend, env: &Env) -> Check {
    let r = rig(b, env)?;
    let d = &r.d;
    let (a, dci) = (d.dct.qp_num, d.dci.qp_num);
    // A second DCT on the same SRQ, and a second DCI.
    let dct_b = expect_ok("a second DCT", b.create_qp(&dc_attr(d.pd, &d.cq, Some(&d.srq), DcInitAttr::dct(KEY))))?;
    let to_b = dest(b, d.ctx, &dct_b)?;
    let s = M::STATE;
    expect_ok("DCT B to INIT", step(b, &dct_b, QpState::Init, s | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PORT, None))?;
    expect_ok("DCT B to RTR", step(b, &dct_b, QpState::Rtr, s | M::MIN_RNR_TIMER | M::AV | M::PATH_MTU, Some(to_b)))?;
    let second = expect_ok("a second DCI", b.create_qp(&dc_attr(d.pd, &d.cq, None, DcInitAttr::dci())))?;
    reset_dci(b, &second, r.to)?;
    // Every SEND goes out twice, and the first two ACKs to the first DCI are lost.
    fault(b, &r.dev, NetFault::new(NetAction::Duplicate).opcode(opcode::SEND_ONLY).always())?;
    fault(b, &r.dev, NetFault::new(NetAction::Drop).opcode(opcode::ACKNOWLEDGE).qp(dci).times(2))?;
    let m = |id: u64, len: u32, to: &QpDest| message(id, wr_opcode::SEND, (&r.src, 0, len), &r.dst, to);
    // To A, A, B, A: the DCI goes to B and back to A, each run a new connection.
    let wrs = [m(1, 11, &r.to), m(2, 12, &r.to), m(3, 13, &to_b), m(4, 14, &r.to)];
    expect_ok("SENDs to A, A, B, A", b.post_send_wr(&d.dci, &wrs))?;
    let (sent, got) = completions(b, &r, 8)?;
    check_eq("the DCI's completions", sent, ok(1..=4))?;
    let want = vec![
        (100, wc_opcode::RECV, 11, a),
        (101, wc_opcode::RECV, 12, a),
        (102, wc_opcode::RECV, 13, dct_b.qp_num),
        (103, wc_opcode::RECV, 14, a),
    ];
    check_eq("the receives (wr_id, opcode, byte_len, qp_num)", got, want)?;
    // The second DCI's PSNs start where the first's did: another DCI's stream.
    expect_ok("a SEND from the second DCI", b.post_send_wr(&second, &[m(5, 15, &r.to)]))?;
    let (sent, got) = completions(b, &r, 2)?;
    check_eq("the second DCI's completion", sent, ok([5]))?;
    check_eq("its receive at A", got, vec![(104, wc_opcode::RECV, 15, a)])?;
    // The first DCI reset: its PSNs start again, at a PSN A took from it before.
    reset_dci(b, &d.dci, r.to)?;
    expect_ok("a SEND from the DCI reset", b.post_send_wr(&d.dci, &[m(6, 16, &r.to), m(7, 17, &r.to)]))?;
    let (sent, got) = completions(b, &r, 4)?;
    check_eq("the reset DCI's completions", sent, ok(6..=7))?;
    check_eq("its receives at A", got, vec![(105, wc_opcode::RECV, 16, a), (106, wc_opcode::RECV, 17, a)])?;
    ctl(b)?.clear_faults();
    Ok(())
}
