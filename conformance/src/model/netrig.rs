//! Running a network scenario ([`NetOp`]) on a backend with simulator control: a context on
//! each of the two devices, each with a PD, a CQ and an RC QP, connected to each other; the
//! scenario's buffers; its fault rules, on the port that sends what they match; the chain;
//! then everything released and the rules cleared, so the other ops' slots stay as they were.
//! The two devices are one backend's, or each a backend of its own: two simulators, each in
//! its own process, on the RoCE v2 fabric between them ([`Hosts::Two`]).

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

/// Where the two sides run.
pub(crate) enum Hosts<'a> {
    /// Both devices on one backend: the simulator's fabric in memory, in simulated time.
    One(&'a mut dyn Backend),
    /// The requester on one backend and the responder on another, each a simulator on the
    /// RoCE v2 fabric (two processes); every wait is bounded in real time.
    Two(&'a mut dyn Backend, &'a mut dyn Backend),
}

impl Hosts<'_> {
    /// The backend of the requester (`false`) or the responder (`true`).
    fn at(&mut self, responder: bool) -> &mut dyn Backend {
        match self {
            Hosts::One(b) => &mut **b,
            Hosts::Two(a, s) => {
                if responder {
                    &mut **s
                } else {
                    &mut **a
                }
            }
        }
    }
}

/// The ACK timeout across two processes (4.096 µs × 2^12, about 17 ms): long enough that a
/// busy machine's scheduler does not make the requester resend (which [`TIMEOUT`]'s 1 ms of
/// simulated time never does), short enough that a scenario whose request is lost for good
/// ends within a second.
const TIMEOUT_TWO: u8 = 12;
/// How long both sides must stay quiet after the requester's last completion, across two
/// processes, before the scenario is read.
const QUIET: std::time::Duration = std::time::Duration::from_millis(150);
/// The longest a scenario may wait for its completions across two processes.
const LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

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

/// Connect `s` (on `b`) to `peer`, whose port is `port`.
fn connect(
    b: &mut dyn Backend,
    s: &Side,
    (peer, port): (&Side, &mlx5_dv::PortAttr),
    x: &NetOp,
    timeout: u8,
) -> Result<(), String> {
    let mut dest = QpDest::to(&peer.qp, port);
    dest.path_mtu = MTU_256;
    let ext = QpAttrExt {
        timeout,
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
    run_on(Hosts::One(b), names, devs, x)
}

/// `x` on `hosts`: devices `names` (requester, responder) at indices `devs` of each one's
/// device list.
pub(crate) fn run_on(
    mut hosts: Hosts<'_>,
    names: (&str, &str),
    devs: (u32, u32),
    x: &NetOp,
) -> Result<Outcome, String> {
    for side in [false, true] {
        hosts.at(side).sim_control().ok_or("no simulator control")?.clear_faults();
    }
    let mut held = Held::default();
    let r = scenario(&mut hosts, names, devs, x, &mut held);
    for side in [false, true] {
        let b = hosts.at(side);
        if let Some(c) = b.sim_control() {
            c.clear_faults();
        }
        for &(on, c) in &held.ctxs {
            if on == side {
                let _ = b.close_device(c);
            }
        }
        for (on, buf) in &held.bufs {
            if *on == side {
                let _ = b.free_buf(buf);
            }
        }
    }
    r
}

/// What a scenario made, by side (`true`: the responder's), to release after it.
#[derive(Default)]
struct Held {
    ctxs: Vec<(bool, ContextHandle)>,
    bufs: Vec<(bool, Buf)>,
}

fn scenario(
    h: &mut Hosts<'_>,
    names: (&str, &str),
    devs: (u32, u32),
    x: &NetOp,
    held: &mut Held,
) -> Result<Outcome, String> {
    let two = matches!(h, Hosts::Two(..));
    let timeout = if two { TIMEOUT_TWO } else { TIMEOUT };
    let mut ctxs = Vec::new();
    let a = side(h.at(false), names.0, &mut ctxs)?;
    held.ctxs.extend(ctxs.drain(..).map(|c| (false, c)));
    let s = side(h.at(true), names.1, &mut ctxs)?;
    held.ctxs.extend(ctxs.drain(..).map(|c| (true, c)));
    let a_port = say("ibv_query_port", h.at(false).query_port(a.ctx, 1))?;
    let s_port = say("ibv_query_port", h.at(true).query_port(s.ctx, 1))?;
    connect(h.at(false), &a, (&s, &s_port), x, timeout)?;
    connect(h.at(true), &s, (&a, &a_port), x, timeout)?;
    let all = SLOT * MSGS;
    let mut bufs = Vec::new();
    let am = region(h.at(false), a.pd, &super::fill_pattern(all, x.seed), &mut bufs)?;
    held.bufs.extend(bufs.drain(..).map(|b| (false, b)));
    let sm = region(h.at(true), s.pd, &super::fill_pattern(all, x.seed ^ 0x5a), &mut bufs);
    held.bufs.extend(bufs.drain(..).map(|b| (true, b)));
    let rm = region(h.at(true), s.pd, &super::fill_pattern(all, x.seed ^ 0xa5), &mut bufs);
    held.bufs.extend(bufs.drain(..).map(|b| (true, b)));
    let (sm, rm) = (sm?, rm?);
    let recvs: Vec<RecvWr> = (0..usize::from(x.recvs).min(MSGS))
        .map(|j| RecvWr {
            wr_id: 1 << 63 | j as u64,
            sge: vec![Sge { addr: rm.addr + (j * SLOT) as u64, length: SLOT as u32, lkey: rm.lkey }],
        })
        .collect();
    if !recvs.is_empty() {
        say("ibv_post_recv", h.at(true).post_recv(&s.qp, &recvs))?;
    }
    if !two {
        // A rule that never acts (the requester sends no ATOMIC Acknowledge) puts the traffic
        // on the fabric in memory even for a scenario without rules: a simulator hands a
        // request straight to its responder otherwise.
        let idle =
            NetFault::new(NetAction::Drop).qp(s.qp.qp_num).opcode(mlx5_dv::net_fault::opcode::ATOMIC_ACKNOWLEDGE);
        let ctl = h.at(false).sim_control().ok_or("no simulator control")?;
        say("add a network rule", ctl.add_fault(FaultRule::Network { device: devs.0, rule: idle }))?;
    }
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
        let ctl = h.at(r.answers).sim_control().ok_or("no simulator control")?;
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
    say("ibv_post_send", h.at(false).post_send(&a.qp, &wrs))?;
    let wcs = if two {
        wait_both(h, (&a.cq, &s.cq), wrs.len())?
    } else {
        let mut wcs = poll(h.at(false), &a.cq, false)?;
        wcs.extend(poll(h.at(true), &s.cq, true)?);
        wcs
    };
    let states = vec![
        say("ibv_query_qp", h.at(false).query_qp_state(&a.qp))? as u32,
        say("ibv_query_qp", h.at(true).query_qp_state(&s.qp))? as u32,
    ];
    let mut bytes = Vec::new();
    for (name, (on, buf)) in REGIONS.iter().zip(held.bufs.iter()) {
        bytes.push((*name, say("read_buf", h.at(*on).read_buf(buf, 0, all))?));
    }
    Ok(Outcome { wcs, states, bytes, ..Outcome::default() })
}

/// Across two processes: poll both sides until the requester has a completion for each of its
/// `n` WRs and neither side has had one for [`QUIET`] (a late or extra completion would show),
/// or [`LIMIT`] passed. Polling also drives a simulator that runs only in its calls.
fn wait_both(h: &mut Hosts<'_>, (acq, scq): (&mlx5_dv::Cq, &mlx5_dv::Cq), n: usize) -> Result<Vec<NetCqe>, String> {
    let start = std::time::Instant::now();
    let (mut req, mut resp) = (Vec::new(), Vec::new());
    let mut last = start;
    while start.elapsed() < LIMIT {
        let (r, s) = (poll(h.at(false), acq, false)?, poll(h.at(true), scq, true)?);
        if !r.is_empty() || !s.is_empty() {
            last = std::time::Instant::now();
        }
        req.extend(r);
        resp.extend(s);
        if req.len() >= n && last.elapsed() >= QUIET {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    req.extend(resp);
    Ok(req)
}
