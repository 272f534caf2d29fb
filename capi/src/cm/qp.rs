//! The QPs librdmacm makes for an ID (`rdma_create_qp`, on the ID's device, moved on as
//! librdmacm moves it), the CQs and completion channels it makes when the program gives
//! none, and `rdma_init_qp_attr`.

use std::ffi::c_int;

use rdma_sys::*;

use super::state::{cm, devs};
use super::{conn, known};
use crate::errno::minus_one;
use mlx5_dv::qp_init_mask;

/// `rdma_init_qp_attr`: the attributes that take the ID's QP to `qp_attr->qp_state`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut rdma_cm_id,
    qp_attr: *mut ibv_qp_attr,
    qp_attr_mask: *mut c_int,
) -> c_int {
    if qp_attr.is_null() || qp_attr_mask.is_null() {
        return minus_one(libc::EINVAL);
    }
    let Some(p) = known(id).ok().and_then(conn::path) else { return minus_one(libc::EINVAL) };
    // SAFETY: the caller's attributes.
    let state = unsafe { (*qp_attr).qp_state };
    match conn::qp_attr(&p, state) {
        Ok((a, m)) => {
            // SAFETY: as above.
            unsafe {
                *qp_attr = a;
                *qp_attr_mask = m;
            }
            0
        }
        Err(e) => minus_one(e),
    }
}

/// `rdma_create_qp`: as librdmacm, the legacy attributes as `rdma_create_qp_ex`'s with the
/// PD given (the ID's for NULL), and the capacities and CQs written back.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the caller's attributes, if any.
    let Some(a) = (unsafe { qp_init_attr.as_mut() }) else { return minus_one(libc::EINVAL) };
    // SAFETY: ibv_qp_init_attr_ex is plain data; all-zero is a valid value.
    let mut ex: ibv_qp_init_attr_ex = unsafe { std::mem::zeroed() };
    ex.qp_context = a.qp_context;
    ex.send_cq = a.send_cq;
    ex.recv_cq = a.recv_cq;
    ex.srq = a.srq;
    ex.cap = a.cap;
    ex.qp_type = a.qp_type;
    ex.sq_sig_all = a.sq_sig_all;
    ex.comp_mask = qp_init_mask::PD;
    ex.pd = pd;
    // SAFETY: as above; `ex` lives across the call.
    let r = unsafe { rdma_create_qp_ex(id, &mut ex) };
    a.send_cq = ex.send_cq;
    a.recv_cq = ex.recv_cq;
    a.cap = ex.cap;
    r
}

/// `rdma_create_qp_ex`: a QP on the ID's device (its default PD when the attributes name
/// none; EINVAL for a PD of another device, CQs other than the ID's, or an ID that has a QP),
/// with CQs made when the attributes name none, moved to INIT (RC) or RTS (UD) as librdmacm
/// moves it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_qp_ex(id: *mut rdma_cm_id, attr: *mut ibv_qp_init_attr_ex) -> c_int {
    let Ok(key) = known(id) else { return minus_one(libc::EINVAL) };
    let dev = cm().ids.get(&key).and_then(|i| i.dev);
    let (Some(dev), false) = (dev, attr.is_null()) else { return minus_one(libc::EINVAL) };
    let d = devs();
    let ctx = d.ctx[dev] as *mut ibv_context;
    let default_pd = d.pd[dev] as *mut ibv_pd;
    // SAFETY: the program's ID, PD and attributes; the shim's own verbs.
    unsafe {
        if !(*id).qp.is_null() {
            return minus_one(libc::EINVAL);
        }
        let a = &mut *attr;
        if a.comp_mask & qp_init_mask::PD == 0 || a.pd.is_null() {
            a.comp_mask |= qp_init_mask::PD;
            a.pd = default_pd;
        } else if (*a.pd).context != ctx {
            return minus_one(libc::EINVAL);
        }
        let clash = |mine: *mut ibv_cq, theirs: *mut ibv_cq| !mine.is_null() && !theirs.is_null() && mine != theirs;
        if clash((*id).recv_cq, a.recv_cq) || clash((*id).send_cq, a.send_cq) {
            return minus_one(libc::EINVAL);
        }
        let own = a.send_cq.is_null() || a.recv_cq.is_null();
        if own && !own_cqs(id, ctx, (a.cap.max_send_wr, a.cap.max_recv_wr), (&mut a.send_cq, &mut a.recv_cq)) {
            destroy_own_cqs(id);
            return -1;
        }
        let qp = crate::queue::create_qp_ex(ctx, a);
        if qp.is_null() {
            if own {
                destroy_own_cqs(id);
            }
            return -1;
        }
        let ud = a.qp_type == ibv_qp_type::IBV_QPT_UD;
        (*id).qp = qp;
        (*id).pd = a.pd;
        if let Some(i) = cm().ids.get_mut(&key) {
            i.own_cqs = own;
        }
        let states: &[u32] = if ud {
            &[ibv_qp_state::IBV_QPS_INIT, ibv_qp_state::IBV_QPS_RTR, ibv_qp_state::IBV_QPS_RTS]
        } else {
            &[ibv_qp_state::IBV_QPS_INIT]
        };
        let r = conn::move_qp(key, qp, states);
        if r != 0 {
            crate::queue::ibv_destroy_qp(qp);
            (*id).qp = std::ptr::null_mut();
            if own {
                destroy_own_cqs(id);
            }
            return minus_one(r);
        }
    }
    0
}

/// `rdma_destroy_qp`: the ID's QP (and the CQs `rdma_create_qp` made for it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    let Ok(key) = known(id) else { return };
    let own = cm().ids.get_mut(&key).map(|i| std::mem::take(&mut i.own_cqs)).unwrap_or(false);
    // SAFETY: the ID's QP and CQs, the shim's objects.
    unsafe {
        if !(*id).qp.is_null() {
            crate::queue::ibv_destroy_qp((*id).qp);
            (*id).qp = std::ptr::null_mut();
        }
        if own {
            destroy_own_cqs(id);
        }
    }
}

/// Make the CQs a QP's attributes lack as librdmacm does: a send and a receive CQ, each
/// with a completion channel and the ID as its context (what `rdma_get_send_comp` and
/// `rdma_get_recv_comp` wait on). False on failure (errno set).
///
/// # Safety
/// `id` is a CM ID on `ctx`'s device; the CQ slots are the program's attributes'.
unsafe fn own_cqs(
    id: *mut rdma_cm_id,
    ctx: *mut ibv_context,
    (max_send_wr, max_recv_wr): (u32, u32),
    (send_cq, recv_cq): (&mut *mut ibv_cq, &mut *mut ibv_cq),
) -> bool {
    // SAFETY: the shim's own verbs on the ID's context.
    unsafe {
        for send in [false, true] {
            let wr = if send { max_send_wr } else { max_recv_wr };
            let ch = crate::events::ibv_create_comp_channel(ctx);
            if ch.is_null() {
                return false;
            }
            let cqe = c_int::try_from(wr.max(1)).unwrap_or(c_int::MAX);
            let cq = crate::queue::ibv_create_cq(ctx, cqe, id.cast(), ch, 0);
            if send {
                (*id).send_cq_channel = ch;
                (*id).send_cq = cq;
            } else {
                (*id).recv_cq_channel = ch;
                (*id).recv_cq = cq;
            }
            if cq.is_null() {
                return false;
            }
        }
        if send_cq.is_null() {
            *send_cq = (*id).send_cq;
        }
        if recv_cq.is_null() {
            *recv_cq = (*id).recv_cq;
        }
    }
    true
}

/// Destroy the CQs and channels [`own_cqs`] made.
///
/// # Safety
/// `id` is a CM ID whose QP is gone.
unsafe fn destroy_own_cqs(id: *mut rdma_cm_id) {
    // SAFETY: the ID's CQs and channels, made by own_cqs (NULL ones skipped).
    unsafe {
        for cq in [(*id).send_cq, (*id).recv_cq] {
            if !cq.is_null() {
                crate::queue::ibv_destroy_cq(cq);
            }
        }
        for ch in [(*id).send_cq_channel, (*id).recv_cq_channel] {
            if !ch.is_null() {
                crate::events::ibv_destroy_comp_channel(ch);
            }
        }
        (*id).send_cq = std::ptr::null_mut();
        (*id).recv_cq = std::ptr::null_mut();
        (*id).send_cq_channel = std::ptr::null_mut();
        (*id).recv_cq_channel = std::ptr::null_mut();
    }
}
