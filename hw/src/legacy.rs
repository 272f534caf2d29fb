//! The verbs that are not the `ibv_wr_*` chain: `ibv_post_send` of a WR list, and the work
//! completions `ibv_poll_cq` fills.

use std::ffi::c_int;
use std::ptr;

use mlx5_dv::errno::EINVAL;
use mlx5_dv::{Error, Op, Qp, Result, SendWr, Wc, WcFlags, wc_flags, wc_opcode, wr_opcode};
use rdma_sys::*;

use crate::backend::HwBackend;

/// The trait's completion of a C one. The fields `handle_responder` fills (the sender, the
/// P_Key index) are taken from receive completions only: libmlx5 leaves them as the caller's
/// array held them otherwise, and this backend's array starts zeroed.
pub(crate) fn wc_of(w: &ibv_wc) -> Wc {
    // SAFETY: the union member is chosen by wc_flags, as verbs.h documents.
    let imm = unsafe {
        if w.wc_flags & wc_flags::WITH_INV.bits() != 0 {
            w.imm_data_invalidated_rkey_union.invalidated_rkey
        } else {
            u32::from_be(w.imm_data_invalidated_rkey_union.imm_data)
        }
    };
    let with_data = w.wc_flags & (wc_flags::WITH_IMM | wc_flags::WITH_INV).bits() != 0;
    let recv = w.status == 0 && w.opcode & wc_opcode::RECV != 0;
    let mut wc = Wc {
        wr_id: w.wr_id,
        status: w.status,
        opcode: w.opcode,
        vendor_err: w.vendor_err,
        byte_len: w.byte_len,
        imm_data: if with_data { imm } else { 0 },
        qp_num: w.qp_num,
        wc_flags: WcFlags::from_bits_retain(w.wc_flags),
        ..Wc::default()
    };
    if recv {
        (wc.src_qp, wc.slid, wc.sl, wc.dlid_path_bits, wc.pkey_index) =
            (w.src_qp, w.slid, w.sl, w.dlid_path_bits, w.pkey_index);
    }
    wc
}

/// One WR as `ibv_post_send` takes it; its SGEs live in `sges`.
fn c_wr(w: &SendWr, sges: &mut [ibv_sge]) -> ibv_send_wr {
    // SAFETY: plain data; zero is the C default.
    let mut c: ibv_send_wr = unsafe { std::mem::zeroed() };
    c.wr_id = w.wr_id;
    c.sg_list = sges.as_mut_ptr();
    c.num_sge = c_int::try_from(sges.len()).unwrap_or(c_int::MAX);
    c.opcode = w.opcode;
    c.send_flags = w.send_flags.bits();
    c.imm_data_invalidated_rkey_union.imm_data = match w.opcode {
        wr_opcode::SEND_WITH_INV | wr_opcode::LOCAL_INV => w.invalidate_rkey,
        _ => w.imm_data.to_be(),
    };
    match w.opcode {
        wr_opcode::ATOMIC_CMP_AND_SWP | wr_opcode::ATOMIC_FETCH_AND_ADD => {
            c.wr.atomic.remote_addr = w.remote_addr;
            c.wr.atomic.rkey = w.rkey;
            c.wr.atomic.compare_add = w.compare_add;
            c.wr.atomic.swap = w.swap;
        }
        _ => {
            c.wr.rdma.remote_addr = w.remote_addr;
            c.wr.rdma.rkey = w.rkey;
        }
    }
    // Read by libmlx5 on an XRC initiator only.
    c.qp_type = qp_type_t { xrc: xrc_t { remote_srqn: w.xrc_remote_srqn } };
    c
}

impl HwBackend {
    /// `ibv_post_send` of `wrs` as one list. An inline WR goes with its SGEs, whose bytes
    /// libmlx5 copies (`inline_data` is for backends that cannot read them). A BIND_MW WR
    /// carries the library's window and MR; one without `bind_mw` (which libmlx5 would follow
    /// through a NULL window) is not posted: the WRs before it are, and it fails with EINVAL.
    pub(crate) fn hw_post_send_wr(&mut self, qp: &Qp, wrs: &[SendWr]) -> Result<()> {
        let op = Op::PostSendWr;
        if wrs.iter().any(|w| w.dc.is_some()) {
            return self.hw_post_send_dc(qp, wrs);
        }
        let ptr = self.objs.qps.get(qp.handle, op)?.ptr;
        let stop = wrs.iter().position(|w| w.opcode == wr_opcode::BIND_MW && w.bind_mw.is_none());
        let postable = &wrs[..stop.unwrap_or(wrs.len())];
        let mut sges: Vec<Vec<ibv_sge>> = postable
            .iter()
            .map(|w| w.sge.iter().map(|s| ibv_sge { addr: s.addr, length: s.length, lkey: s.lkey }).collect())
            .collect();
        let mut c: Vec<ibv_send_wr> = postable.iter().zip(sges.iter_mut()).map(|(w, s)| c_wr(w, s)).collect();
        // A UD WR's address: an AH made for the post (libmlx5 copies its address vector into
        // the WQE, so it goes right after).
        let ahs = self.ud_ahs(qp, postable, &mut c)?;
        let r = self.post_c_wrs(ptr, postable, &mut c, stop);
        crate::dc::destroy_ahs(&ahs);
        r
    }

    /// For each WR of `wrs` with a UD address, an AH on the QP's PD, set in its C WR.
    fn ud_ahs(&mut self, qp: &Qp, wrs: &[SendWr], c: &mut [ibv_send_wr]) -> Result<Vec<*mut ibv_ah>> {
        let op = Op::PostSendWr;
        let mut ahs = Vec::new();
        if wrs.iter().all(|w| w.ud.is_none()) {
            return Ok(ahs);
        }
        let pd = self.objs.qps.get(qp.handle, op)?.pd;
        let pd = self.objs.pds.get(pd, op)?.ptr;
        for (w, cw) in wrs.iter().zip(c.iter_mut()) {
            let Some(u) = w.ud else { continue };
            let ah = match crate::dc::create_ah(pd, u.is_global, u.dlid, u.dgid, u.sgid_index, u.hop_limit) {
                Ok(ah) => ah,
                Err(e) => {
                    crate::dc::destroy_ahs(&ahs);
                    return Err(Error::new(op, e, "ibv_create_ah for a UD address"));
                }
            };
            ahs.push(ah);
            cw.wr.ud.ah = ah;
            cw.wr.ud.remote_qpn = u.remote_qpn;
            cw.wr.ud.remote_qkey = u.remote_qkey;
        }
        Ok(ahs)
    }

    /// Link `c` (the C WRs of `postable`) and post them; then the EINVAL of a bind without
    /// its window at `stop`, if any.
    fn post_c_wrs(
        &mut self,
        ptr: *mut ibv_qp,
        postable: &[SendWr],
        c: &mut [ibv_send_wr],
        stop: Option<usize>,
    ) -> Result<()> {
        let op = Op::PostSendWr;
        for (w, cw) in postable.iter().zip(c.iter_mut()) {
            if let (wr_opcode::BIND_MW, Some(b)) = (w.opcode, &w.bind_mw) {
                let (mw, bind_info) = self.c_bind(b, op)?;
                cw.bind_mw_tso_union.bind_mw = bind_mw_t { mw, rkey: b.rkey, bind_info };
            }
        }
        for i in 1..c.len() {
            let next: *mut ibv_send_wr = &mut c[i];
            c[i - 1].next = next;
        }
        if !c.is_empty() {
            let mut bad: *mut ibv_send_wr = ptr::null_mut();
            // SAFETY: the QP is live; the WR list and its SGEs outlive the call.
            let rc = unsafe { ibv_post_send(ptr, c.as_mut_ptr(), &mut bad) };
            if rc != 0 {
                let index = c.iter().position(|w| ptr::eq(w, bad)).unwrap_or(0);
                let why = format!("ibv_post_send stopped at WR {index}");
                return Err(Error::new(op, rc, why).with_bad_wr(u32::try_from(index).unwrap_or(u32::MAX)));
            }
        }
        match stop {
            Some(i) => Err(Error::new(op, EINVAL, format!("WR {i}: IBV_WR_BIND_MW without wr.bind_mw"))
                .with_bad_wr(u32::try_from(i).unwrap_or(u32::MAX))),
            None => Ok(()),
        }
    }
}
