//! DC QPs (items 191–200): a DCI and a DCT made by `mlx5dv_create_qp`, their create and modify
//! checks, a DCI's WRITEs and SENDs to the DCT its WQEs name, and a request with another
//! access key dropped at the DCT. A profile without DC skips them, with its errno.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, Field, opcode};
use mlx5_dv::{
    AccessFlags as A, Backend, ContextHandle, Cq, DcDest, DcInitAttr, DvQpInitAttr, PdHandle, Qp, QpAttrExt,
    QpAttrMask as M, QpCap, QpDest, QpInitAttr, QpModify, QpState, RecvWr, SendFlags, SendWr, Srq, SrqInitAttr, UdDest,
    dv_qp, qp_init_mask, qp_type, send_ops, wc_opcode, wc_status, wr_opcode,
};

use super::devx::devx_ctx;
use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device];

pub(super) const CASES: &[Case] = &[
    Case { name: "dc.dci_writes_and_sends_land_at_the_dct", covers: &[191, 192, 193, 194], needs: NEEDS, run: traffic },
    Case { name: "dc.another_access_key_is_dropped", covers: &[195], needs: NEEDS, run: wrong_key },
    Case { name: "dc.create_checks_and_their_errno", covers: &[196, 197], needs: NEEDS, run: create_checks },
    Case { name: "dc.modify_dct_to_rtr_only_dci_to_rts", covers: &[198, 199], needs: NEEDS, run: modify_rules },
    Case {
        name: "dc.the_caps_page_dct_bit_matches_create",
        covers: &[200],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: caps_bit,
    },
];

pub(super) const KEY: u64 = 0x0123_4567_89ab_cdef;

pub(super) fn cap() -> QpCap {
    QpCap { max_send_wr: 16, max_recv_wr: 0, max_send_sge: 1, max_recv_sge: 0, max_inline_data: 0 }
}

/// `mlx5dv_create_qp` of a DRIVER QP with `dc`: the verbs mask PD and SEND_OPS_FLAGS for a
/// DCI, PD alone for a DCT.
pub(super) fn dc_attr(pd: PdHandle, cq: &Cq, srq: Option<&Srq>, dc: DcInitAttr) -> QpInitAttr {
    let dci = dc.dc_type == DcInitAttr::DCI;
    let ops = send_ops::RDMA_WRITE | send_ops::SEND | send_ops::RDMA_READ | send_ops::ATOMIC_FETCH_AND_ADD;
    QpInitAttr {
        qp_type: qp_type::DRIVER,
        send_ops_flags: if dci { ops } else { Default::default() },
        comp_mask: Some(if dci { qp_init_mask::PD | qp_init_mask::SEND_OPS_FLAGS } else { qp_init_mask::PD }),
        srq: srq.map(|s| s.handle),
        sq_sig_all: true,
        ..QpInitAttr::rc(pd, cq.handle, cap(), Some(DvQpInitAttr::dc(dc)))
    }
}

/// A DCI and, on an SRQ, a DCT: skipped where the device has no DC.
pub(super) struct Dc {
    pub(super) ctx: ContextHandle,
    pub(super) pd: PdHandle,
    pub(super) cq: Cq,
    pub(super) srq: Srq,
    pub(super) dci: Qp,
    pub(super) dct: Qp,
}

pub(super) fn make(b: &mut dyn Backend, env: &Env) -> Check<Dc> {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let srq =
        expect_ok("ibv_create_srq", b.create_srq(&SrqInitAttr { pd, max_wr: 16, max_sge: 1, xrc: None, tm: None }))?;
    let dci = match b.create_qp(&dc_attr(pd, &cq, None, DcInitAttr::dci())) {
        Err(e) if e.errno() == EOPNOTSUPP => return Err(Verdict::skip("the device has no DC (EOPNOTSUPP)")),
        r => expect_ok("mlx5dv_create_qp of a DCI", r)?,
    };
    let dct = expect_ok("mlx5dv_create_qp of a DCT", b.create_qp(&dc_attr(pd, &cq, Some(&srq), DcInitAttr::dct(KEY))))?;
    Ok(Dc { ctx, pd, cq, srq, dci, dct })
}

pub(super) fn step(b: &mut dyn Backend, qp: &Qp, to: QpState, mask: M, dest: Option<QpDest>) -> mlx5_dv::Result<()> {
    let ext = QpAttrExt { mask, ..QpAttrExt::defaults() };
    let access = A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ | A::REMOTE_ATOMIC;
    b.modify_qp(qp, &QpModify::exact(to, access, dest, ext))
}

/// The DCT to RTR, the DCI to RTS, each with exactly the attributes mlx5_ib requires.
pub(super) fn bring_up(b: &mut dyn Backend, d: &Dc) -> Check<QpDest> {
    let to = dest(b, d.ctx, &d.dct)?;
    let s = M::STATE;
    expect_ok("DCT to INIT", step(b, &d.dct, QpState::Init, s | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PORT, None))?;
    let rtr = s | M::MIN_RNR_TIMER | M::AV | M::PATH_MTU;
    expect_ok("DCT to RTR", step(b, &d.dct, QpState::Rtr, rtr, Some(to)))?;
    dci_to_rts(b, &d.dci, to)?;
    Ok(to)
}

/// A DCI from RESET to RTS towards `to`, with exactly the attributes mlx5_ib requires.
pub(super) fn dci_to_rts(b: &mut dyn Backend, q: &Qp, to: QpDest) -> Check {
    let s = M::STATE;
    expect_ok("DCI to INIT", step(b, q, QpState::Init, s | M::PKEY_INDEX | M::PORT, None))?;
    expect_ok("DCI to RTR", step(b, q, QpState::Rtr, s | M::PATH_MTU, Some(to)))?;
    let rts = s | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC | M::SQ_PSN;
    expect_ok("DCI to RTS", step(b, q, QpState::Rts, rts, None))
}

/// Another DCI of `d` in RTS towards `to`.
pub(super) fn another_dci(b: &mut dyn Backend, d: &Dc, to: QpDest) -> Check<Qp> {
    let q = expect_ok("another DCI", b.create_qp(&dc_attr(d.pd, &d.cq, None, DcInitAttr::dci())))?;
    dci_to_rts(b, &q, to)?;
    Ok(q)
}

/// `mlx5dv_wr_set_dc_addr`'s arguments towards `to` with `key`.
pub(super) fn dc_dest(to: &QpDest, key: u64) -> DcDest {
    let ah = &to.ah;
    let av = UdDest {
        dlid: ah.dlid,
        is_global: ah.is_global,
        dgid: ah.dgid,
        sgid_index: ah.sgid_index,
        hop_limit: 64,
        remote_qpn: to.dest_qp_num,
        remote_qkey: 0,
    };
    DcDest { av, access_key: key, stream_id: 0 }
}

fn wr(wr_id: u64, opcode: u32, sge: Vec<mlx5_dv::Sge>, to: &QpDest, key: u64) -> SendWr {
    SendWr { wr_id, opcode, send_flags: SendFlags::SIGNALED, sge, dc: Some(dc_dest(to, key)), ..SendWr::default() }
}

fn traffic(b: &mut dyn Backend, env: &Env) -> Check {
    let d = make(b, env)?;
    let to = bring_up(b, &d)?;
    let remote = A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ | A::REMOTE_ATOMIC;
    let (rbuf, rmr) = region(b, d.pd, 4096, &pattern(4096, 0), remote)?;
    let (_abuf, amr) = region(b, d.pd, 4096, &pattern(4096, 7), A::LOCAL_WRITE)?;
    let r = RecvWr { wr_id: 50, sge: vec![sge(&rmr, 2048, 1024)] };
    expect_ok("ibv_post_srq_recv", b.post_srq_recv(&d.srq, &[r]))?;
    let write = SendWr {
        remote_addr: rmr.addr,
        rkey: rmr.rkey,
        ..wr(1, wr_opcode::RDMA_WRITE, vec![sge(&amr, 0, 1000)], &to, KEY)
    };
    let send = wr(2, wr_opcode::SEND, vec![sge(&amr, 1000, 300)], &to, KEY);
    let read = SendWr {
        remote_addr: rmr.addr + 3500,
        rkey: rmr.rkey,
        ..wr(3, wr_opcode::RDMA_READ, vec![sge(&amr, 3000, 100)], &to, KEY)
    };
    let faa = SendWr {
        remote_addr: rmr.addr + 4088,
        rkey: rmr.rkey,
        compare_add: 5,
        ..wr(4, wr_opcode::ATOMIC_FETCH_AND_ADD, vec![sge(&amr, 4000, 8)], &to, KEY)
    };
    expect_ok("ibv_post_send on the DCI", b.post_send_wr(&d.dci, &[write, send, read, faa]))?;
    let wcs = poll(b, &d.cq, 5)?;
    let mut got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode, w.qp_num)).collect();
    got.sort();
    let want = vec![
        (1, wc_status::SUCCESS, wc_opcode::RDMA_WRITE, d.dci.qp_num),
        (2, wc_status::SUCCESS, wc_opcode::SEND, d.dci.qp_num),
        (3, wc_status::SUCCESS, wc_opcode::RDMA_READ, d.dci.qp_num),
        (4, wc_status::SUCCESS, wc_opcode::FETCH_ADD, d.dci.qp_num),
        (50, wc_status::SUCCESS, wc_opcode::RECV, d.dct.qp_num),
    ];
    check_eq("the completions (wr_id, status, opcode, qp_num)", got, want)?;
    let recv_len = wcs.iter().find(|w| w.wr_id == 50).map(|w| w.byte_len);
    check_eq("the SEND's byte_len at the DCT", recv_len, Some(300))?;
    let (mut mem, from) = (pattern(4096, 0), pattern(4096, 7));
    mem[..1000].copy_from_slice(&from[..1000]);
    mem[2048..2348].copy_from_slice(&from[1000..1300]);
    let old = u64::from_ne_bytes(mem[4088..4096].try_into().unwrap_or_default());
    mem[4088..4096].copy_from_slice(&old.wrapping_add(5).to_ne_bytes());
    check_eq("the DCT side's memory (WRITE, SEND, FETCH_ADD)", contents(b, &rbuf)?, mem.clone())?;
    let got = contents(b, &_abuf)?;
    check_eq("the READ's bytes at the DCI side", got[3000..3100].to_vec(), mem[3500..3600].to_vec())?;
    check_eq("the FETCH_ADD's original value at the DCI side", got[4000..4008].to_vec(), old.to_ne_bytes().to_vec())
}

fn wrong_key(b: &mut dyn Backend, env: &Env) -> Check {
    let d = make(b, env)?;
    let to = bring_up(b, &d)?;
    let (rbuf, rmr) = region(b, d.pd, 4096, &pattern(4096, 0), A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let (_abuf, amr) = region(b, d.pd, 4096, &pattern(4096, 3), A::LOCAL_WRITE)?;
    let write = SendWr {
        remote_addr: rmr.addr,
        rkey: rmr.rkey,
        ..wr(1, wr_opcode::RDMA_WRITE, vec![sge(&amr, 0, 100)], &to, KEY ^ 1)
    };
    expect_ok("ibv_post_send on the DCI", b.post_send_wr(&d.dci, &[write]))?;
    err_cqe(b, &d.cq, 1, wc_status::RETRY_EXC_ERR)?;
    check_eq("the DCT side's memory, untouched", contents(b, &rbuf)?, pattern(4096, 0))?;
    // A bad R_Key with the right key: NAKed to that DCI; the DCT goes on serving others.
    let (second, third) = (another_dci(b, &d, to)?, another_dci(b, &d, to)?);
    let bad = SendWr {
        remote_addr: rmr.addr,
        rkey: rmr.rkey ^ 0x100,
        ..wr(2, wr_opcode::RDMA_WRITE, vec![sge(&amr, 0, 100)], &to, KEY)
    };
    expect_ok("ibv_post_send of a bad R_Key", b.post_send_wr(&second, &[bad]))?;
    err_cqe(b, &d.cq, 2, wc_status::REM_ACCESS_ERR)?;
    let good = SendWr {
        remote_addr: rmr.addr,
        rkey: rmr.rkey,
        ..wr(3, wr_opcode::RDMA_WRITE, vec![sge(&amr, 0, 100)], &to, KEY)
    };
    expect_ok("ibv_post_send from a third DCI", b.post_send_wr(&third, &[good]))?;
    ok_cqe(b, &d.cq, 3, wc_opcode::RDMA_WRITE)?;
    let state = expect_ok("ibv_query_qp of the DCT", b.query_qp_state(&d.dct))?;
    check_eq("the DCT's state after refusing a request", state, QpState::Rtr)
}

fn create_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let d = make(b, env)?;
    let (pd, cq) = (d.pd, &d.cq);
    let dct = DcInitAttr::dct(KEY);
    expect_errno("a DCT without an SRQ", b.create_qp(&dc_attr(pd, cq, None, dct)), EINVAL)?;
    let ops = QpInitAttr {
        comp_mask: Some(qp_init_mask::PD | qp_init_mask::SEND_OPS_FLAGS),
        send_ops_flags: send_ops::SEND,
        ..dc_attr(pd, cq, Some(&d.srq), dct)
    };
    expect_errno("a DCT with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS", b.create_qp(&ops), EINVAL)?;
    let bad = DcInitAttr { dc_type: 3, ..DcInitAttr::dci() };
    expect_errno("dc_type 3", b.create_qp(&dc_attr(pd, cq, None, bad)), EINVAL)?;
    let on_rc = QpInitAttr { qp_type: qp_type::RC, ..dc_attr(pd, cq, None, DcInitAttr::dci()) };
    expect_errno("MLX5DV_QP_INIT_ATTR_MASK_DC on an RC QP", b.create_qp(&on_rc), EINVAL)?;
    let caps = expect_ok("mlx5dv_query_device", b.query_device(d.ctx, mlx5_dv::MLX5DV_CONTEXT_MASK_DCI_STREAMS))?;
    let past = caps.dci_streams_caps.max_log_num_concurent.saturating_add(1);
    let s = QpInitAttr { dv: Some(streams_attr(past, 0)), ..dc_attr(pd, cq, None, DcInitAttr::dci()) };
    expect_errno("DCI streams past dci_streams_caps", b.create_qp(&s), EINVAL)?;
    check_eq("a DCT's capacities, echoed as asked (nothing is sized)", d.dct.cap, cap())
}

/// A DCI's vendor attributes with `MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS`.
pub(super) fn streams_attr(concurent: u8, errored: u8) -> DvQpInitAttr {
    let mut a =
        DvQpInitAttr::dc(DcInitAttr { log_num_concurent: concurent, log_num_errored: errored, ..DcInitAttr::dci() });
    a.comp_mask |= dv_qp::MASK_DCI_STREAMS;
    a
}

fn modify_rules(b: &mut dyn Backend, env: &Env) -> Check {
    let d = make(b, env)?;
    let to = dest(b, d.ctx, &d.dct)?;
    let s = M::STATE;
    // RTR's attributes on a DCT's INIT: more than mlx5_ib_modify_dct takes.
    let init = s | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PORT;
    expect_errno("DCT to INIT with IBV_QP_AV", step(b, &d.dct, QpState::Init, init | M::AV, Some(to)), EINVAL)?;
    bring_up(b, &d)?;
    let rts = s | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC | M::SQ_PSN;
    expect_errno("DCT to RTS", step(b, &d.dct, QpState::Rts, rts, None), EINVAL)?;
    let q = expect_ok("ibv_query_qp of the DCT", b.query_qp_state(&d.dct))?;
    check_eq("the DCT's state", q, QpState::Rtr)?;
    // A DCI's RTR takes no remote QP number.
    let dci2 = expect_ok("a second DCI", b.create_qp(&dc_attr(d.pd, &d.cq, None, DcInitAttr::dci())))?;
    expect_ok("DCI to INIT", step(b, &dci2, QpState::Init, s | M::PKEY_INDEX | M::PORT, None))?;
    let r = step(b, &dci2, QpState::Rtr, s | M::PATH_MTU | M::DEST_QPN, Some(to));
    expect_errno("DCI to RTR with IBV_QP_DEST_QPN", r, EINVAL)?;
    expect_ok("DCI to RTR", step(b, &dci2, QpState::Rtr, s | M::PATH_MTU | M::AV, Some(to)))?;
    expect_ok("ibv_destroy_qp of the DCI", b.destroy_qp(&dci2))?;
    expect_ok("ibv_destroy_qp of the DCT", b.destroy_qp(&d.dct))
}

/// `cmd_hca_cap.dct` (bit 0x21a of the general page, `mlx5_ifc.h`).
const DCT_BIT: Field = Field::new("dct", 0x21a, 1);

fn caps_bit(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let q = prm::new_input(16, opcode::QUERY_HCA_CAP, 0, prm::query_hca_cap::OP_MOD_GENERAL_CUR);
    let out = expect_ok("QUERY_HCA_CAP (general)", b.devx_general_cmd(ctx, &q, prm::query_hca_cap::OUT_SIZE))?;
    let page = out.get(prm::query_hca_cap::CAPABILITY_BYTE..).unwrap_or_default();
    let bit = DCT_BIT.get(page).map_err(|e| Verdict::fail("the dct bit", "readable", e))?;
    let (_, pd, cq) = open(b, env.dev()?)?;
    let made = b.create_qp(&dc_attr(pd, &cq, None, DcInitAttr::dci()));
    let errno = made.as_ref().err().map(|e| e.errno());
    check_eq(
        "(dct bit, mlx5dv_create_qp of a DCI's errno)",
        (bit, errno),
        if bit == 1 { (1, None) } else { (0, Some(EOPNOTSUPP)) },
    )?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}
