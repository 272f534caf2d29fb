//! `ibv_wr_set_ud_addr` and the chain of a UD QP, `mlx5dv_wr_set_dc_addr` and the chain of a
//! DCI, `ibv_wr_set_xrc_srqn` and the chain of an XRC initiator, posted as `ibv_post_send`'s
//! WRs (the simulator takes a datagram's address through `wr.ud`, a DCT's through `wr.dc`, an
//! XRC WR's remote SRQ through `qp_type.xrc.remote_srqn`).

use mlx5_dv::{DcDest, SendFlags, SendWr, UdDest, WrOp};
use mlx5_hw::sys::mlx5dv::mlx5dv_qp_ex;
use rdma_sys::*;

use super::{latch, on_mqp, on_qpx};
use crate::state::with;

/// `mlx5_send_wr_set_dc_addr`: the DCT (address, number, access key) of the chain's last
/// WR. libmlx5 sets the op on DCIs only (on another QP it fails the chain with EOPNOTSUPP
/// here); an AH the shim did not make, or no WR to set it on, latches EINVAL.
pub(super) unsafe extern "C" fn wr_set_dc_addr(mqp: *mut mlx5dv_qp_ex, ah: *mut ibv_ah, dctn: u32, key: u64) {
    on_mqp(mqp, |s, qp| {
        let av = s.ud_dest(ah, dctn & 0xff_ffff, 0);
        let Some(q) = s.qps.get_mut(&qp) else { return };
        if q.c.ex.qp_base.qp_type != ibv_qp_type::IBV_QPT_DRIVER {
            return latch(q, libc::EOPNOTSUPP);
        }
        match (av, q.chain.len().checked_sub(1)) {
            (Some(av), Some(at)) => q.dc.push((at, DcDest { av, access_key: key, stream_id: 0 })),
            _ => latch(q, libc::EINVAL),
        }
    })
}

/// `mlx5_send_wr_set_dc_addr_stream`: as [`wr_set_dc_addr`], with the stream id the WQE's
/// control segment carries.
pub(super) unsafe extern "C" fn wr_set_dc_addr_stream(
    mqp: *mut mlx5dv_qp_ex,
    ah: *mut ibv_ah,
    dctn: u32,
    key: u64,
    stream: u16,
) {
    // SAFETY: the caller's arguments, passed on.
    unsafe { wr_set_dc_addr(mqp, ah, dctn, key) };
    on_mqp(mqp, |s, qp| {
        let Some(q) = s.qps.get_mut(&qp) else { return };
        let last = q.chain.len().checked_sub(1);
        // Only when wr_set_dc_addr took this WR's address (it latches an error otherwise).
        if let Some((_, d)) = q.dc.last_mut().filter(|(at, _)| Some(*at) == last) {
            d.stream_id = stream;
        }
    })
}

/// `mlx5_send_wr_set_ud_addr`: the address of the chain's last WR; EINVAL latched for an AH
/// the shim did not make or with no WR to set it on. libmlx5 sets the op on UD QPs only; on
/// another QP it fails the chain with EOPNOTSUPP, as every op a QP type lacks does here.
pub(super) unsafe extern "C" fn wr_set_ud_addr(qpx: *mut ibv_qp_ex, ah: *mut ibv_ah, qpn: u32, qkey: u32) {
    with(
        |_| (),
        |s| {
            let dest = s.ud_dest(ah, qpn, qkey);
            let Ok(q) = s.qp(qpx.cast()) else { return };
            if q.c.ex.qp_base.qp_type != ibv_qp_type::IBV_QPT_UD {
                return latch(q, libc::EOPNOTSUPP);
            }
            match (dest, q.chain.len().checked_sub(1)) {
                (Some(d), Some(at)) => q.ud.push((at, d)),
                _ => latch(q, libc::EINVAL),
            }
        },
    );
}

/// `mlx5_send_wr_set_xrc_srqn`: the remote SRQ of the chain's last WR; EINVAL latched with no
/// WR to set it on, EOPNOTSUPP on a QP that is not an XRC initiator (libmlx5 sets the op on
/// those only).
pub(super) unsafe extern "C" fn wr_set_xrc_srqn(qpx: *mut ibv_qp_ex, srqn: u32) {
    on_qpx(qpx, |q| {
        if q.c.ex.qp_base.qp_type != ibv_qp_type::IBV_QPT_XRC_SEND {
            return latch(q, libc::EOPNOTSUPP);
        }
        match q.chain.len().checked_sub(1) {
            Some(at) => q.xrc.push((at, srqn)),
            None => latch(q, libc::EINVAL),
        }
    })
}

/// The chain as `ibv_post_send` WRs: each data op with the address (UD) or remote SRQ (XRC)
/// set for it, inline data (`ibv_wr_set_inline_data`) as its WR's inline payload.
/// An op `ibv_post_send` has no WR for (the mlx5dv ones) fails the chain with EOPNOTSUPP.
pub(super) fn send_wrs(
    chain: &[WrOp],
    ud: Vec<(usize, UdDest)>,
    dc: Vec<(usize, DcDest)>,
    xrc: Vec<(usize, u32)>,
) -> Result<Vec<SendWr>, std::ffi::c_int> {
    let mut out: Vec<SendWr> = Vec::new();
    for (i, op) in chain.iter().enumerate() {
        match op {
            WrOp::InlineData(bytes) => {
                if let Some(w) = out.last_mut() {
                    // The provider counts an inline WR's bytes by its SGEs.
                    let length = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
                    w.sge = vec![mlx5_dv::Sge { addr: 0, length, lkey: 0 }];
                    w.inline_data = bytes.clone();
                    w.send_flags |= SendFlags::INLINE;
                }
            }
            _ => {
                let Some(mut w) = SendWr::from_op(op) else { return Err(libc::EOPNOTSUPP) };
                w.ud = ud.iter().rev().find(|(at, _)| *at == i).map(|(_, d)| *d);
                w.dc = dc.iter().rev().find(|(at, _)| *at == i).map(|(_, d)| *d);
                w.xrc_remote_srqn = xrc.iter().rev().find(|(at, _)| *at == i).map_or(0, |(_, n)| *n);
                out.push(w);
            }
        }
    }
    Ok(out)
}
