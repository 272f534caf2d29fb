//! QP attributes as a program sees them: the address vector of `ibv_ah_attr`, the attributes
//! `ibv_modify_qp` keeps for `ibv_query_qp`, and `ibv_query_qp` itself.

use std::ffi::c_int;
use std::ptr;

use mlx5_dv::{AhAttr, Gid};
use rdma_sys::*;

use crate::errno::code;
use crate::state::with;

pub(super) fn ah(a: &ibv_ah_attr) -> AhAttr {
    // SAFETY: ibv_gid is 16 bytes either way.
    let raw = unsafe { a.grh.dgid.raw };
    AhAttr {
        dlid: a.dlid,
        is_global: a.is_global != 0,
        dgid: Gid(raw),
        sgid_index: a.grh.sgid_index,
        hop_limit: a.grh.hop_limit,
        port_num: a.port_num,
    }
}

/// Keep the attributes `mask` names.
pub(super) fn merge_attr(last: &mut ibv_qp_attr, a: &ibv_qp_attr, mask: c_int) {
    type M = ibv_qp_attr_mask;
    let has = |m: ibv_qp_attr_mask| mask & m.0 as c_int != 0;
    if has(M::IBV_QP_STATE) {
        last.qp_state = a.qp_state;
    }
    if has(M::IBV_QP_ACCESS_FLAGS) {
        last.qp_access_flags = a.qp_access_flags;
    }
    if has(M::IBV_QP_PKEY_INDEX) {
        last.pkey_index = a.pkey_index;
    }
    if has(M::IBV_QP_QKEY) {
        last.qkey = a.qkey;
    }
    if has(M::IBV_QP_PATH_MIG_STATE) {
        last.path_mig_state = a.path_mig_state;
    }
    if has(M::IBV_QP_PORT) {
        last.port_num = a.port_num;
    }
    if has(M::IBV_QP_AV) {
        last.ah_attr = a.ah_attr;
    }
    if has(M::IBV_QP_PATH_MTU) {
        last.path_mtu = a.path_mtu;
    }
    if has(M::IBV_QP_DEST_QPN) {
        last.dest_qp_num = a.dest_qp_num;
    }
    if has(M::IBV_QP_RQ_PSN) {
        last.rq_psn = a.rq_psn;
    }
    if has(M::IBV_QP_SQ_PSN) {
        last.sq_psn = a.sq_psn;
    }
    if has(M::IBV_QP_TIMEOUT) {
        last.timeout = a.timeout;
    }
    if has(M::IBV_QP_RETRY_CNT) {
        last.retry_cnt = a.retry_cnt;
    }
    if has(M::IBV_QP_RNR_RETRY) {
        last.rnr_retry = a.rnr_retry;
    }
    if has(M::IBV_QP_MAX_QP_RD_ATOMIC) {
        last.max_rd_atomic = a.max_rd_atomic;
    }
    if has(M::IBV_QP_MAX_DEST_RD_ATOMIC) {
        last.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if has(M::IBV_QP_MIN_RNR_TIMER) {
        last.min_rnr_timer = a.min_rnr_timer;
    }
}

/// `ibv_query_qp`: the state from the simulator, the rest as last set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
    init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    // mlx5_ib_dct_query_qp: a DCT answers in RTR only, for the attributes it keeps.
    type M = ibv_qp_attr_mask;
    let dct_mask = (M::IBV_QP_STATE
        | M::IBV_QP_ACCESS_FLAGS
        | M::IBV_QP_PORT
        | M::IBV_QP_MIN_RNR_TIMER
        | M::IBV_QP_AV
        | M::IBV_QP_PATH_MTU
        | M::IBV_QP_PKEY_INDEX)
        .0 as c_int;
    if attr.is_null() {
        return libc::EINVAL;
    }
    with(
        |e| e,
        |s| {
            let Ok(q) = s.qp(qp) else { return libc::EINVAL };
            let handle = q.qp;
            // SAFETY: ibv_qp_attr is plain data; a bitwise copy.
            let mut last: ibv_qp_attr = unsafe { std::ptr::read(&q.attr) };
            let base = &q.c.ex.qp_base;
            let (send_cq, recv_cq, ctx, qp_type) = (base.send_cq, base.recv_cq, base.qp_context, base.qp_type);
            let dct = q.dct;
            let state = match s.sim.query_qp_state(&handle) {
                Ok(st) => st as u32,
                Err(e) => return code(&e),
            };
            if dct && (attr_mask & !dct_mask != 0 || state != ibv_qp_state::IBV_QPS_RTR) {
                return libc::EINVAL;
            }
            last.qp_state = state;
            last.cur_qp_state = state;
            // SAFETY: the caller's out-parameters.
            unsafe {
                *attr = last;
                if !init_attr.is_null() {
                    ptr::write_bytes(init_attr, 0, 1);
                    (*init_attr).qp_context = ctx;
                    (*init_attr).send_cq = send_cq;
                    (*init_attr).recv_cq = recv_cq;
                    (*init_attr).cap = (*attr).cap;
                    (*init_attr).qp_type = qp_type;
                }
            }
            if let Ok(q) = s.qp(qp) {
                q.c.ex.qp_base.state = state;
            }
            0
        },
    )
}
