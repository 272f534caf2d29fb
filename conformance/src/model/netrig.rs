//! Running a network scenario ([`NetOp`]) on a backend with simulator control: a context on
//! each of the two devices, each with a PD, a CQ and an RC QP, connected to each other; the
//! scenario's buffers; its fault rules, on the port that sends what they match; the chain;
//! then everything released and the rules cleared, so the other ops' slots stay as they were.

use mlx5_dv::{
    AccessFlags, Backend, Buf, ContextHandle, FaultRule, NetAction, NetFault, Qp, QpAttrExt, QpAttrMask, QpCap, QpDest,
    QpInitAttr, QpModify, QpState, RecvWr, SendFlags, Sge, WrOp, link_layer, qp_type,
};

use super::net::{MSGS, MTU, MsgKind, NetOp, REGIONS, SLOT, TIMEOUT};
use super::outcome::{NetCqe, Outcome};

const ACCESS: AccessFlags = AccessFlags::LOCAL_WRITE.union(AccessFlags::REMOTE_WRITE).union(AccessFlags::REMOTE_READ);

/// `IBV_MTU_256`.
const MTU_256: u32 = 1;
const _: () = assert!(MTU == 256);

fn say<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// One side: its context, CQ and QP.
struct Side {
    ctx: ContextHandle,
    pd: mlx5_dv::PdHandle,
    cq: mlx5_dv::Cq,
    qp: Qp,
}

fn side(b: &mut dyn Backend, name: &str, ctxs: &mut Vec<ContextHandle>) -> Result<Side, String> {
    let ctx = say("ibv_open_device", b.open_ibv_device(name))?;
    ctxs.push(ctx);
    let port = say("ibv_query_port", b.query_port(ctx, 1))?;
    if port.link_layer != link_layer::ETHERNET {
        return Err("network fault rules act on RoCE packets; this port is InfiniBand".into());
    }
    let pd = say("ibv_alloc_pd", b.alloc_pd(ctx))?;
    let cq = say("ibv_create_cq", b.create_cq(ctx, 32))?;
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qp = say("ibv_create_qp", b.create_qp(&QpInitAttr::rc(pd, cq.handle, cap, None)))?;
    Ok(Side { ctx, pd, cq, qp })
}

fn connect(b: &mut dyn Backend, s: &Side, peer: &Side, x: &NetOp) -> Result<(), String> {
    let port = say("ibv_query_port", b.query_port(peer.ctx, 1))?;
    let mut dest = QpDest::to(&peer.qp, &port);
    dest.path_mtu = MTU_256;
    let ext = QpAttrExt {
        timeout: TIMEOUT,
        retry_cnt: x.retry_cnt,
        rnr_retry: x.rnr_retry,
        min_rnr_timer: 1,
        sq_psn: x.psn,
        rq_psn: x.psn,
        ..QpAttrExt::defaults()
    };
    for (from, to) in [(QpState::Reset, QpState::Init), (QpState::Init, QpState::Rtr), (QpState::Rtr, QpState::Rts)] {
        let (required, _) = mlx5_dv::qp_transition(qp_type::RC, from, to).ok_or("no RC transition")?;
        let ext = QpAttrExt { mask: QpAttrMask::STATE | required, ..ext };
        let path = (to == QpState::Rtr).then_some(dest);
        say("ibv_modify_qp", b.modify_qp(&s.qp, &QpModify::exact(to, ACCESS, path, ext)))?;
    }
    Ok(())
}

/// A buffer of `data` with an MR over it, on `pd`.
fn region(b: &mut dyn Backend, pd: mlx5_dv::PdHandle, data: &[u8], bufs: &mut Vec<Buf>) -> Result<mlx5_dv::Mr, String> {
    let buf = say("alloc_buf", b.alloc_buf(data.len()))?;
    bufs.push(buf);
    say("write_buf", b.write_buf(&buf, 0, data))?;
    say("ibv_reg_mr", b.reg_mr(pd, buf.addr, data.len() as u64, ACCESS))
}

fn poll(b: &mut dyn Backend, cq: &mlx5_dv::Cq, recv: bool) -> Result<Vec<NetCqe>, String> {
    let mut v = Vec::new();
    for _ in 0..8 {
        let w = say("ibv_poll_cq", b.poll_cq(cq, 16))?;
        if w.is_empty() {
            break;
        }
        v.extend(w.iter().map(|w| {
            let ok = w.status == 0;
            NetCqe {
                recv,
                wr_id: w.wr_id,
                status: w.status,
                opcode: ok.then_some(w.opcode),
                byte_len: (ok && (recv || w.opcode == mlx5_dv::wc_opcode::RDMA_READ)).then_some(w.byte_len),
                imm: (ok && recv && w.wc_flags.contains(mlx5_dv::wc_flags::WITH_IMM)).then_some(w.imm_data),
            }
        }));
    }
    Ok(v)
}

/// `x` on devices `names` (requester, responder) at indices `devs` of the device list.
pub(crate) fn run_net(
    b: &mut dyn Backend,
    names: (&str, &str),
    devs: (u32, u32),
    x: &NetOp,
) -> Result<Outcome, String> {
    b.sim_control().ok_or("no simulator control")?.clear_faults();
    let (mut ctxs, mut bufs) = (Vec::new(), Vec::new());
    let r = scenario(b, names, devs, x, &mut ctxs, &mut bufs);
    if let Some(c) = b.sim_control() {
        c.clear_faults();
    }
    for c in ctxs {
        let _ = b.close_device(c);
    }
    for x in &bufs {
        let _ = b.free_buf(x);
    }
    r
}

fn scenario(
    b: &mut dyn Backend,
    names: (&str, &str),
    devs: (u32, u32),
    x: &NetOp,
    ctxs: &mut Vec<ContextHandle>,
    bufs: &mut Vec<Buf>,
) -> Result<Outcome, String> {
    let a = side(b, names.0, ctxs)?;
    let s = side(b, names.1, ctxs)?;
    connect(b, &a, &s, x)?;
    connect(b, &s, &a, x)?;
    let all = SLOT * MSGS;
    let am = region(b, a.pd, &super::fill_pattern(all, x.seed), bufs)?;
    let sm = region(b, s.pd, &super::fill_pattern(all, x.seed ^ 0x5a), bufs)?;
    let rm = region(b, s.pd, &super::fill_pattern(all, x.seed ^ 0xa5), bufs)?;
    let recvs: Vec<RecvWr> = (0..usize::from(x.recvs).min(MSGS))
        .map(|j| RecvWr {
            wr_id: 1 << 63 | j as u64,
            sge: vec![Sge { addr: rm.addr + (j * SLOT) as u64, length: SLOT as u32, lkey: rm.lkey }],
        })
        .collect();
    if !recvs.is_empty() {
        say("ibv_post_recv", b.post_recv(&s.qp, &recvs))?;
    }
    // A rule that never acts (the requester sends no ATOMIC Acknowledge) puts the traffic on
    // the fabric in memory even for a scenario without rules: a simulator hands a request
    // straight to its responder otherwise.
    let idle = NetFault::new(NetAction::Drop).qp(s.qp.qp_num).opcode(mlx5_dv::net_fault::opcode::ATOMIC_ACKNOWLEDGE);
    let ctl = b.sim_control().ok_or("no simulator control")?;
    say("add a network rule", ctl.add_fault(FaultRule::Network { device: devs.0, rule: idle }))?;
    for r in x.rules() {
        let rule = NetFault {
            dest_qp: Some(if r.answers { a.qp.qp_num } else { s.qp.qp_num }),
            opcode: r.opcode,
            psn: r.at.map(|at| x.rule_psn(at)),
            skip: r.skip,
            times: r.times.unwrap_or(u32::MAX),
            action: r.action,
            random: r.random,
        };
        let device = if r.answers { devs.1 } else { devs.0 };
        let ctl = b.sim_control().ok_or("no simulator control")?;
        say("add a network rule", ctl.add_fault(FaultRule::Network { device, rule }))?;
    }
    let flags = SendFlags::SIGNALED;
    let wrs: Vec<WrOp> = x
        .msgs()
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let len = usize::from(m.len).clamp(1, SLOT) as u32;
            let off = (i * SLOT) as u64;
            let sge = vec![Sge { addr: am.addr + off, length: len, lkey: am.lkey }];
            let (wr_id, rkey, remote_addr, imm) = (i as u64 + 1, sm.rkey, sm.addr + off, x.imm_of(i));
            match m.kind {
                MsgKind::Write => WrOp::RdmaWrite { wr_id, flags, rkey, remote_addr, sge },
                MsgKind::WriteImm => WrOp::RdmaWriteImm { wr_id, flags, rkey, remote_addr, imm, sge },
                MsgKind::Send => WrOp::Send { wr_id, flags, sge },
                MsgKind::SendImm => WrOp::SendImm { wr_id, flags, imm, sge },
                MsgKind::Read => WrOp::RdmaRead { wr_id, flags, rkey, remote_addr, sge },
            }
        })
        .collect();
    say("ibv_post_send", b.post_send(&a.qp, &wrs))?;
    let mut wcs = poll(b, &a.cq, false)?;
    wcs.extend(poll(b, &s.cq, true)?);
    let states = vec![
        say("ibv_query_qp", b.query_qp_state(&a.qp))? as u32,
        say("ibv_query_qp", b.query_qp_state(&s.qp))? as u32,
    ];
    let mut bytes = Vec::new();
    for (name, buf) in REGIONS.iter().zip(bufs.iter()) {
        bytes.push((*name, say("read_buf", b.read_buf(buf, 0, all))?));
    }
    Ok(Outcome { wcs, states, bytes, ..Outcome::default() })
}
