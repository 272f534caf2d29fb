//! The reliable transport's attributes: `ibv_modify_qp` with the caller's mask (item 101) and
//! the responder's PSN check (item 102).

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags, Backend, DvQpCreateFlags, Qp, QpAttrExt, QpAttrMask as M, QpDest, QpModify, QpState, wc_status,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "qp.modify_mask_checked_against_the_transition",
        covers: &[101],
        needs: &[Need::Mlx5Device],
        run: modify_mask_checked,
    },
    Case { name: "qp.responder_checks_psns", covers: &[102], needs: &[Need::Mlx5Device], run: psns_checked },
];

/// What RESET→INIT of an RC QP requires.
const INIT: M = M::STATE.union(M::PKEY_INDEX).union(M::PORT).union(M::ACCESS_FLAGS);
/// What INIT→RTR of an RC QP requires.
const RTR: M = M::STATE
    .union(M::AV)
    .union(M::PATH_MTU)
    .union(M::DEST_QPN)
    .union(M::RQ_PSN)
    .union(M::MAX_DEST_RD_ATOMIC)
    .union(M::MIN_RNR_TIMER);
/// What RTR→RTS of an RC QP requires.
const RTS: M =
    M::STATE.union(M::TIMEOUT).union(M::RETRY_CNT).union(M::RNR_RETRY).union(M::SQ_PSN).union(M::MAX_QP_RD_ATOMIC);

/// `ibv_modify_qp(qp, attr, mask)` with the attributes of `ext` and this mask.
fn modify(
    b: &mut dyn Backend,
    qp: &Qp,
    state: QpState,
    dest: Option<QpDest>,
    ext: QpAttrExt,
    mask: M,
) -> mlx5_dv::Result<()> {
    b.modify_qp(qp, &QpModify::exact(state, QP_ACCESS, dest, QpAttrExt { mask, ..ext }))
}

/// Connect `qp` towards `dest` with exact masks: its first request carries `sq_psn`, its
/// responder expects `rq_psn`; a short ACK timeout and one retry, so a lost request fails soon.
fn connect_psns(b: &mut dyn Backend, qp: &Qp, dest: QpDest, sq_psn: u32, rq_psn: u32) -> Check {
    let ext = QpAttrExt { sq_psn, rq_psn, timeout: 8, retry_cnt: 1, rnr_retry: 1, ..QpAttrExt::defaults() };
    expect_ok("RESET -> INIT", modify(b, qp, QpState::Init, None, ext, INIT))?;
    expect_ok("INIT -> RTR", modify(b, qp, QpState::Rtr, Some(dest), ext, RTR))?;
    expect_ok("RTR -> RTS", modify(b, qp, QpState::Rts, None, ext, RTS))
}

fn modify_mask_checked(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let q = expect_ok("create", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let peer = expect_ok("create the peer", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let to = dest(b, ctx, &peer)?;
    let d = QpAttrExt::defaults();
    let r = modify(b, &q, QpState::Init, None, d, INIT - M::PORT);
    expect_errno("RESET -> INIT without IBV_QP_PORT", r, EINVAL)?;
    let r = modify(b, &q, QpState::Init, None, d, INIT | M::SQ_PSN);
    expect_errno("RESET -> INIT with IBV_QP_SQ_PSN, which it does not take", r, EINVAL)?;
    expect_errno("RESET -> ERR", modify(b, &q, QpState::Err, None, d, M::STATE), EINVAL)?;
    let r = modify(b, &q, QpState::Init, None, QpAttrExt { port_num: 0, ..d }, INIT);
    expect_errno("port_num 0", r, EINVAL)?;
    let r = modify(b, &q, QpState::Init, None, QpAttrExt { port_num: 255, ..d }, INIT);
    expect_errno("port_num 255", r, EINVAL)?;
    let r = modify(b, &q, QpState::Init, None, QpAttrExt { pkey_index: 0xffff, ..d }, INIT);
    expect_errno("pkey_index past the table", r, EINVAL)?;
    let past = M::from_bits_retain(INIT.bits() | 1 << 26);
    expect_errno("a mask bit past IBV_QP_RATE_LIMIT", modify(b, &q, QpState::Init, None, d, past), EOPNOTSUPP)?;
    check_eq("the QP after the refusals", expect_ok("query", b.query_qp_state(&q))?, QpState::Reset)?;
    expect_ok("RESET -> INIT", modify(b, &q, QpState::Init, None, d, INIT))?;
    // Without IBV_QP_STATE the call is INIT -> INIT: what that transition may carry.
    expect_ok("IBV_QP_PKEY_INDEX alone in INIT", modify(b, &q, QpState::Init, None, d, M::PKEY_INDEX))?;
    expect_errno("IBV_QP_TIMEOUT alone in INIT", modify(b, &q, QpState::Init, None, d, M::TIMEOUT), EINVAL)?;
    let r = modify(b, &q, QpState::Rtr, Some(to), d, RTR - M::MIN_RNR_TIMER);
    expect_errno("INIT -> RTR without IBV_QP_MIN_RNR_TIMER", r, EINVAL)?;
    let r = modify(b, &q, QpState::Rtr, Some(to), QpAttrExt { max_dest_rd_atomic: 255, ..d }, RTR);
    expect_errno("max_dest_rd_atomic 255", r, EINVAL)?;
    expect_ok("INIT -> RTR", modify(b, &q, QpState::Rtr, Some(to), d, RTR))?;
    expect_errno("RTR -> RTS without IBV_QP_SQ_PSN", modify(b, &q, QpState::Rts, None, d, RTS - M::SQ_PSN), EINVAL)?;
    let r = modify(b, &q, QpState::Rts, None, QpAttrExt { max_rd_atomic: 255, ..d }, RTS);
    expect_errno("max_rd_atomic 255", r, EINVAL)?;
    expect_ok("RTR -> RTS", modify(b, &q, QpState::Rts, None, d, RTS))?;
    expect_ok("IBV_QP_MIN_RNR_TIMER alone in RTS", modify(b, &q, QpState::Rts, None, d, M::MIN_RNR_TIMER))?;
    expect_errno("IBV_QP_RQ_PSN alone in RTS", modify(b, &q, QpState::Rts, None, d, M::RQ_PSN), EINVAL)?;
    let wrong_cur = QpAttrExt { cur_qp_state: Some(QpState::Init), ..d };
    let r = modify(b, &q, QpState::Rts, None, wrong_cur, M::STATE | M::CUR_STATE);
    expect_errno("IBV_QP_CUR_STATE naming INIT", r, EINVAL)?;
    let access = QpModify::exact(
        QpState::Rts,
        AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND,
        None,
        QpAttrExt { mask: M::ACCESS_FLAGS, ..d },
    );
    expect_errno("qp_access_flags with MW_BIND", b.modify_qp(&q, &access), EINVAL)?;
    check_eq("the QP after the refusals", expect_ok("query", b.query_qp_state(&q))?, QpState::Rts)
}

fn psns_checked(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let (_buf, mr) = region(b, pd, 4096, &pattern(4096, 9), QP_ACCESS)?;
    let (dst, dmr) = region(b, pd, 8192, &[], QP_ACCESS)?;
    // (the requester's first PSN, the responder's expected PSN, what the WRITE does)
    let runs = [
        (0x10_0000, 0x10_0000, "in sequence: the data moves"),
        (0xff_fffe, 0xff_fffe, "in sequence across the 24-bit wrap"),
        (0x20_0100, 0x20_0000, "ahead of the responder: a sequence error, retries, RETRY_EXC_ERR"),
        (0x30_0000, 0x30_0100, "behind the responder: a duplicate, acknowledged without effect"),
    ];
    for (i, (sq, rq, what)) in runs.into_iter().enumerate() {
        let rcq = expect_ok("ibv_create_cq", b.create_cq(ctx, 16))?;
        let a = expect_ok("create the requester", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
        let s = expect_ok("create the responder", b.create_qp(&qp_attr(pd, &rcq, DvQpCreateFlags::empty(), CAP)))?;
        let (mut to_s, mut to_a) = (dest(b, ctx, &s)?, dest(b, ctx, &a)?);
        // A 256-byte path MTU: the first WRITE takes six packets.
        (to_s.path_mtu, to_a.path_mtu) = (1, 1);
        connect_psns(b, &a, to_s, sq, 0)?;
        connect_psns(b, &s, to_a, 0, rq)?;
        let at = dmr.addr + 2048 * i as u64;
        // Two WRITEs: 1500 bytes (several packets at a small path MTU), then 8 bytes.
        let wrs =
            [write(1, dmr.rkey, at, vec![sge(&mr, 0, 1500)]), write(2, dmr.rkey, at + 1536, vec![sge(&mr, 0, 8)])];
        for w in wrs {
            expect_ok(&format!("{what}: post"), b.post_send(&a, &[w]))?;
        }
        let off = 2048 * i;
        if sq == rq {
            ok_cqe(b, &cq, 1, mlx5_dv::wc_opcode::RDMA_WRITE)?;
            ok_cqe(b, &cq, 2, mlx5_dv::wc_opcode::RDMA_WRITE)?;
            let got = contents(b, &dst)?;
            check_eq(
                what,
                (&got[off..off + 1500], &got[off + 1536..off + 1544]),
                (&pattern(4096, 9)[..1500], &pattern(4096, 9)[..8]),
            )?;
        } else if sq > rq {
            err_cqe(b, &cq, 1, wc_status::RETRY_EXC_ERR)?;
            err_cqe(b, &cq, 2, wc_status::WR_FLUSH_ERR)?;
            check_eq(what, contents(b, &dst)?[off..off + 2048].iter().all(|x| *x == 0), true)?;
        } else {
            ok_cqe(b, &cq, 1, mlx5_dv::wc_opcode::RDMA_WRITE)?;
            ok_cqe(b, &cq, 2, mlx5_dv::wc_opcode::RDMA_WRITE)?;
            check_eq(what, contents(b, &dst)?[off..off + 2048].iter().all(|x| *x == 0), true)?;
        }
        no_cqe(b, &rcq)?;
    }
    Ok(())
}
