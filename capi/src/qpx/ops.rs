//! The `ibv_qp_ex` and `mlx5dv_qp_ex` ops the simulator does not model: TSO, atomic write,
//! flush, the UD, XRC and DC address setters (and `mlx5dv_wr_raw_wqe` and `mlx5dv_wr_memcpy`,
//! which are modelled, are set here with them). Each unmodelled op latches EOPNOTSUPP, so `ibv_wr_complete` fails the whole chain and posts
//! nothing (a setter that follows one of these builders changes nothing that is posted).

use std::ffi::c_void;

use mlx5_hw::sys::mlx5dv::*;
use rdma_sys::*;

use mlx5_dv::{SendFlags, WrOp};

use super::{latch, on_qpx};
use crate::objects::QpC;
use crate::state::with;

/// Set every op the shim does not model on a new QP's structs.
pub(crate) fn fill_unmodelled(c: &mut QpC) {
    let e = &mut c.ex;
    e.wr_bind_mw = Some(wr_bind_mw);
    e.wr_send_tso = Some(wr_send_tso);
    e.wr_set_xrc_srqn = Some(wr_set_xrc_srqn);
    e.wr_atomic_write = Some(wr_atomic_write);
    c.wr_flush = Some(wr_flush);
    let d = &mut c.dv;
    d.wr_set_dc_addr = Some(super::ud::wr_set_dc_addr);
    d.wr_set_dc_addr_stream = Some(super::ud::wr_set_dc_addr_stream);
    d.wr_raw_wqe = Some(wr_raw_wqe);
    d.wr_memcpy = Some(wr_memcpy);
}

/// The chain fails with EOPNOTSUPP.
fn unmodelled(qpx: *mut ibv_qp_ex) {
    on_qpx(qpx, |q| latch(q, libc::EOPNOTSUPP))
}

unsafe extern "C" fn wr_send_tso(qpx: *mut ibv_qp_ex, _hdr: *mut c_void, _hdr_sz: u16, _mss: u16) {
    unmodelled(qpx)
}

unsafe extern "C" fn wr_atomic_write(qpx: *mut ibv_qp_ex, _rkey: u32, _addr: u64, _wr: *const c_void) {
    unmodelled(qpx)
}

unsafe extern "C" fn wr_flush(qpx: *mut ibv_qp_ex, _rkey: u32, _addr: u64, _len: usize, _type: u8, _level: u8) {
    unmodelled(qpx)
}

unsafe extern "C" fn wr_set_xrc_srqn(qpx: *mut ibv_qp_ex, _srqn: u32) {
    unmodelled(qpx)
}

/// `mlx5dv_wr_raw_wqe`: the program's WQE, as many 16-byte units as its control segment's
/// `ds` says, in the chain; NULL latches EINVAL (libmlx5 would read through it).
unsafe extern "C" fn wr_raw_wqe(mqp: *mut mlx5dv_qp_ex, wqe: *const c_void) {
    let bytes = if wqe.is_null() {
        None
    } else {
        // SAFETY: the caller's WQE starts with a 16-byte control segment; its ds says how
        // many 16-byte units follow from it, as libmlx5 reads them.
        unsafe {
            let ds = usize::from(*wqe.cast::<u8>().add(7) & 0x3f);
            Some(std::slice::from_raw_parts(wqe.cast::<u8>(), ds * 16).to_vec())
        }
    };
    super::push_dv(mqp, |_, wr_id, _| match bytes {
        Some(wqe) => Ok(WrOp::RawWqe { wr_id, wqe }),
        None => Err(libc::EINVAL),
    })
}

/// `mlx5dv_wr_memcpy`: a DMA copy in the chain (the simulator checks the length and the QP's
/// MEMCPY op).
unsafe extern "C" fn wr_memcpy(
    mqp: *mut mlx5dv_qp_ex,
    dest_lkey: u32,
    dest_addr: u64,
    src_lkey: u32,
    src_addr: u64,
    length: usize,
) {
    super::push_dv(mqp, |_, wr_id, flags| {
        let length = length as u64;
        Ok(WrOp::Memcpy { wr_id, flags, dest_lkey, dest_addr, src_lkey, src_addr, length })
    })
}

/// `ibv_wr_bind_mw`: a bind WR in the chain; a window or MR the shim did not make latches
/// EINVAL (libmlx5 would follow the pointers).
unsafe extern "C" fn wr_bind_mw(qpx: *mut ibv_qp_ex, mw: *mut ibv_mw, rkey: u32, info: *const ibv_mw_bind_info) {
    // SAFETY: the caller's bind info, if any.
    let info = unsafe { info.as_ref() };
    with(
        |_| (),
        |s| {
            let b = info.ok_or(libc::EINVAL).and_then(|i| s.bind_of(mw, rkey, i));
            if let Ok(q) = s.qp(qpx.cast()) {
                match b {
                    Ok(bind) => {
                        let (wr_id, flags) = (q.c.ex.wr_id, SendFlags::from_bits_retain(q.c.ex.wr_flags));
                        q.chain.push(WrOp::BindMw { wr_id, flags, bind });
                    }
                    Err(e) => latch(q, e),
                }
            }
        },
    )
}
