//! Running a datagram scenario ([`UdOp`]) on a backend: a context of its own with a PD, two
//! UD QPs (each on a CQ of its own) with the scenario's Q_Key, the receives and the SENDs,
//! all released afterwards.

use mlx5_dv::{
    AccessFlags as A, Backend, Cq, Qp, QpAttrExt, QpAttrMask, QpCap, QpDest, QpInitAttr, QpModify, QpState, RecvWr,
    SendFlags, SendWr, Sge, UdDest, Wc, link_layer, qp_type, send_ops, wc_flags, wr_opcode,
};

use super::outcome::{NetCqe, Outcome};
use super::ud::{OTHER_QKEY, QKEY, RECV_LEN, UdOp};

pub(super) fn say<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// A UD QP on `cq`, in RTS with [`QKEY`].
fn ud_qp(b: &mut dyn Backend, pd: mlx5_dv::PdHandle, cq: &Cq) -> Result<Qp, String> {
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let attr = QpInitAttr {
        qp_type: qp_type::UD,
        send_ops_flags: send_ops::SEND | send_ops::SEND_WITH_IMM,
        dv: None,
        ..QpInitAttr::rc(pd, cq.handle, cap, None)
    };
    let qp = say("create a UD QP", b.create_qp(&attr))?;
    let mut from = QpState::Reset;
    for to in [QpState::Init, QpState::Rtr, QpState::Rts] {
        let (required, _) = mlx5_dv::qp_transition(qp_type::UD, from, to).ok_or("no UD transition")?;
        let ext = QpAttrExt { mask: QpAttrMask::STATE | required, qkey: QKEY, ..QpAttrExt::defaults() };
        say("ibv_modify_qp", b.modify_qp(&qp, &QpModify::exact(to, A::LOCAL_WRITE, None, ext)))?;
        from = to;
    }
    Ok(qp)
}

/// A completion as the model writes it: the opcode for a success, `byte_len` and the
/// immediate of a successful receive.
pub(super) fn seen(wc: &Wc, recv: bool) -> NetCqe {
    let ok = wc.status == 0;
    NetCqe {
        recv,
        wr_id: wc.wr_id,
        status: wc.status,
        opcode: ok.then_some(wc.opcode),
        byte_len: (ok && recv).then_some(wc.byte_len),
        imm: (ok && recv && wc.wc_flags.contains(wc_flags::WITH_IMM)).then_some(wc.imm_data),
    }
}

/// Poll `cq` until `n` completions came, or the wait deadline passed, or (`quiet`) nothing
/// came for a tenth of a second: a receiver may get fewer than it has receives.
pub(super) fn poll(b: &mut dyn Backend, cq: &Cq, n: usize, quiet: bool) -> Result<Vec<Wc>, String> {
    let deadline = crate::harness::deadline::wait_until();
    let mut last = std::time::Instant::now();
    let mut got = Vec::new();
    while got.len() < n {
        let w = say("ibv_poll_cq", b.poll_cq(cq, 16))?;
        let now = std::time::Instant::now();
        if !w.is_empty() {
            last = now;
        } else if now >= deadline || (quiet && now.duration_since(last).as_millis() >= 100) {
            break;
        }
        got.extend(w);
    }
    Ok(got)
}

/// The buffers a scenario allocates on its own context, freed with it.
pub(super) struct Scratch {
    pub(super) ctx: mlx5_dv::ContextHandle,
    bufs: Vec<mlx5_dv::Buf>,
}

impl Scratch {
    /// A buffer holding `data`, registered on `pd` with `access`.
    pub(super) fn region(
        &mut self,
        b: &mut dyn Backend,
        pd: mlx5_dv::PdHandle,
        data: &[u8],
        access: A,
    ) -> Result<(mlx5_dv::Buf, mlx5_dv::Mr), String> {
        let buf = say("alloc_buf", b.alloc_buf(data.len().max(1)))?;
        self.bufs.push(buf);
        say("write_buf", b.write_buf(&buf, 0, data))?;
        let mr = say("ibv_reg_mr", b.reg_mr(pd, buf.addr, data.len().max(1) as u64, access))?;
        Ok((buf, mr))
    }
}

/// `f` on a context of device `name` of its own; the context is closed and the buffers `f`
/// made are freed afterwards, whatever `f` answered.
pub(super) fn on_device<T>(
    b: &mut dyn Backend,
    name: &str,
    f: impl FnOnce(&mut dyn Backend, &mut Scratch) -> Result<T, String>,
) -> Result<T, String> {
    let ctx = say("ibv_open_device", b.open_ibv_device(name))?;
    let mut scratch = Scratch { ctx, bufs: Vec::new() };
    let r = f(b, &mut scratch);
    let _ = b.close_device(ctx);
    for x in &scratch.bufs {
        let _ = b.free_buf(x);
    }
    r
}

/// A [`UdOp`] on device `name`.
pub(super) fn run_ud(b: &mut dyn Backend, name: &str, x: &UdOp) -> Result<Outcome, String> {
    on_device(b, name, |b, sc| {
        let ctx = sc.ctx;
        let pd = say("ibv_alloc_pd", b.alloc_pd(ctx))?;
        let (scq, rcq) = (say("ibv_create_cq", b.create_cq(ctx, 16))?, say("ibv_create_cq", b.create_cq(ctx, 16))?);
        let (s, r) = (ud_qp(b, pd, &scq)?, ud_qp(b, pd, &rcq)?);
        let port = say("ibv_query_port", b.query_port(ctx, 1))?;
        if port.link_layer != link_layer::ETHERNET {
            return Err("the datagram scenarios run on a RoCE port; this one is InfiniBand".into());
        }
        let (_, smr) = sc.region(b, pd, &x.send_buf(), A::LOCAL_WRITE)?;
        let (rbuf, rmr) = sc.region(b, pd, &x.recv_bufs(), A::LOCAL_WRITE)?;
        for i in 0..x.receives() {
            let sge =
                vec![Sge { addr: rmr.addr + (i * RECV_LEN) as u64, length: x.recv_len(i) as u32, lkey: rmr.lkey }];
            say("ibv_post_recv", b.post_recv(&r, &[RecvWr { wr_id: i as u64, sge }]))?;
        }
        let dest = QpDest::to(&r, &port);
        let wrs: Vec<SendWr> = x
            .posted()
            .iter()
            .enumerate()
            .map(|(i, m)| SendWr {
                wr_id: i as u64,
                opcode: if m.imm { wr_opcode::SEND_WITH_IMM } else { wr_opcode::SEND },
                send_flags: SendFlags::SIGNALED,
                imm_data: if m.imm { UdOp::imm(i) } else { 0 },
                sge: vec![Sge { addr: smr.addr + 8 * i as u64, length: u32::from(m.len), lkey: smr.lkey }],
                ud: Some(UdDest::new(dest.ah, r.qp_num, if m.wrong_qkey { OTHER_QKEY } else { QKEY })),
                ..SendWr::default()
            })
            .collect();
        say("ibv_post_send", b.post_send_wr(&s, &wrs))?;
        let mut wcs: Vec<NetCqe> = poll(b, &scq, wrs.len(), false)?.iter().map(|w| seen(w, false)).collect();
        wcs.extend(say("ibv_poll_cq", b.poll_cq(&scq, 16))?.iter().map(|w| seen(w, false)));
        wcs.extend(poll(b, &rcq, x.receives(), true)?.iter().map(|w| seen(w, true)));
        wcs.extend(say("ibv_poll_cq", b.poll_cq(&rcq, 16))?.iter().map(|w| seen(w, true)));
        let bytes = vec![("receive", say("read_buf", b.read_buf(&rbuf, 0, RECV_LEN * x.receives()))?)];
        let state = |b: &mut dyn Backend, q: &Qp| say("ibv_query_qp", b.query_qp_state(q)).map(|s| s as u32);
        let states = vec![state(b, &s)?, state(b, &r)?];
        Ok(Outcome { wcs, bytes, states, ..Outcome::default() })
    })
}

/// `f` on a context of the first kernel mlx5 device of `b` (closed afterwards); false without
/// one.
pub(super) fn on_first_mlx5(
    b: &mut dyn Backend,
    f: impl FnOnce(&mut dyn Backend, mlx5_dv::ContextHandle) -> bool,
) -> bool {
    let Some(dev) = b.device_list().ok().into_iter().flatten().find(|d| d.kind == mlx5_dv::DeviceKind::Mlx5) else {
        return false;
    };
    let Ok(ctx) = b.open_ibv_device(&dev.name) else { return false };
    let r = f(b, ctx);
    let _ = b.close_device(ctx);
    r
}

/// Whether the first kernel mlx5 device of `b` runs the datagram scenarios: a UD QP is made
/// and its port is RoCE.
pub fn probe_datagrams(b: &mut dyn Backend) -> bool {
    on_first_mlx5(b, |b, ctx| {
        b.query_port(ctx, 1).is_ok_and(|p| p.link_layer == link_layer::ETHERNET)
            && b.alloc_pd(ctx).is_ok_and(|pd| b.create_cq(ctx, 4).is_ok_and(|cq| ud_qp(b, pd, &cq).is_ok()))
    })
}
