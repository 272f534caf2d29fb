//! DC on the real libraries: `mlx5dv_create_qp`'s `dc_init_attr`, and a DCI's WRs (those
//! with [`SendWr::dc`]) posted as one `ibv_wr_*` chain with `mlx5dv_wr_set_dc_addr` after each
//! builder, an address handle made for each WR and destroyed once the chain is complete
//! (libmlx5 copies its address vector into the WQE).

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{DcInitAttr, DvQpInitAttr, Error, Op, Qp, Result, SendWr, WrOp, dv_qp};
use rdma_sys::*;

use crate::backend::HwBackend;
use crate::call::c_call;
use crate::sys::mlx5dv::mlx5dv_qp_init_attr;

/// Fill `d.dc_init_attr` from `dv` when its mask has `MLX5DV_QP_INIT_ATTR_MASK_DC`.
pub(crate) fn fill_dc(d: &mut mlx5dv_qp_init_attr, dv: &DvQpInitAttr) {
    if !dv.comp_mask.contains(dv_qp::MASK_DC) {
        return;
    }
    d.dc_init_attr.dc_type = dv.dc.dc_type;
    if dv.dc.dc_type == DcInitAttr::DCT {
        d.dc_init_attr.__bindgen_anon_1.dct_access_key = dv.dc.dct_access_key;
    } else {
        d.dc_init_attr.__bindgen_anon_1.dci_streams.log_num_concurent = dv.dc.log_num_concurent;
        d.dc_init_attr.__bindgen_anon_1.dci_streams.log_num_errored = dv.dc.log_num_errored;
    }
}

/// Whether `dv` makes a DCI (which gets an `mlx5dv_qp_ex` for `mlx5dv_wr_set_dc_addr`).
pub(crate) fn is_dci(dv: Option<DvQpInitAttr>) -> bool {
    dv.is_some_and(|d| d.comp_mask.contains(dv_qp::MASK_DC) && d.dc.dc_type == DcInitAttr::DCI)
}

impl HwBackend {
    /// A DCI's WRs: every one must carry its DCT; one the chain has no builder for is
    /// EOPNOTSUPP before anything is posted.
    pub(crate) fn hw_post_send_dc(&mut self, qp: &Qp, wrs: &[SendWr]) -> Result<()> {
        let op = Op::PostSendWr;
        let (qpx, mqpx, pd) = {
            let q = self.objs.qps.get(qp.handle, op)?;
            (q.qpx, q.mqpx, q.pd)
        };
        if qpx.is_null() || mqpx.is_null() {
            return Err(Error::new(op, EOPNOTSUPP, "the QP has no mlx5dv extended send API (not a DCI)"));
        }
        // SAFETY: mqpx is the live DCI's mlx5dv_qp_ex.
        let set_dc =
            unsafe { (*mqpx).wr_set_dc_addr }.ok_or_else(|| Error::new(op, EOPNOTSUPP, "no wr_set_dc_addr"))?;
        // SAFETY: as above.
        let set_stream = unsafe { (*mqpx).wr_set_dc_addr_stream };
        let pd = self.objs.pds.get(pd, op)?.ptr;
        let mut plan = Vec::with_capacity(wrs.len());
        for (i, w) in wrs.iter().enumerate() {
            let dc = w.dc.ok_or_else(|| Error::new(op, EINVAL, format!("WR {i} on a DCI has no DC address")))?;
            let o = w.to_op().ok_or_else(|| Error::new(op, EOPNOTSUPP, format!("WR {i}: no builder for it")))?;
            plan.push((o, dc));
        }
        let mut ahs = Vec::with_capacity(plan.len());
        for (_, dc) in &plan {
            let a = &dc.av;
            match create_ah(pd, a.is_global, a.dlid, a.dgid, a.sgid_index, a.hop_limit) {
                Ok(ah) => ahs.push(ah),
                Err(e) => {
                    destroy_ahs(&ahs);
                    return Err(Error::new(op, e, "ibv_create_ah for a DC address"));
                }
            }
        }
        let sges: Vec<Vec<ibv_sge>> = plan
            .iter()
            .map(|(o, _)| sge_of(o).iter().map(|s| ibv_sge { addr: s.addr, length: s.length, lkey: s.lkey }).collect())
            .collect();
        // SAFETY (whole chain): qpx and mqpx belong to a live DCI; the AHs and SGE vectors
        // outlive ibv_wr_complete.
        let rc = unsafe {
            ibv_wr_start(qpx);
            for (((o, dc), ah), s) in plan.iter().zip(&ahs).zip(&sges) {
                let (wr_id, flags) = wr_id_flags(o);
                (*qpx).wr_id = wr_id;
                (*qpx).wr_flags = flags;
                match o {
                    WrOp::RdmaWrite { rkey, remote_addr, .. } => ibv_wr_rdma_write(qpx, *rkey, *remote_addr),
                    WrOp::RdmaWriteImm { rkey, remote_addr, imm, .. } => {
                        ibv_wr_rdma_write_imm(qpx, *rkey, *remote_addr, imm.to_be())
                    }
                    WrOp::RdmaRead { rkey, remote_addr, .. } => ibv_wr_rdma_read(qpx, *rkey, *remote_addr),
                    WrOp::AtomicCmpSwp { rkey, remote_addr, compare, swap, .. } => {
                        ibv_wr_atomic_cmp_swp(qpx, *rkey, *remote_addr, *compare, *swap)
                    }
                    WrOp::AtomicFetchAdd { rkey, remote_addr, add, .. } => {
                        ibv_wr_atomic_fetch_add(qpx, *rkey, *remote_addr, *add)
                    }
                    WrOp::SendImm { imm, .. } => ibv_wr_send_imm(qpx, imm.to_be()),
                    WrOp::SendInv { invalidate_rkey, .. } => ibv_wr_send_inv(qpx, *invalidate_rkey),
                    _ => ibv_wr_send(qpx),
                }
                match (dc.stream_id, set_stream) {
                    (0, _) | (_, None) => set_dc(mqpx, (*ah).cast(), dc.av.remote_qpn, dc.access_key),
                    (id, Some(f)) => f(mqpx, (*ah).cast(), dc.av.remote_qpn, dc.access_key, id),
                }
                ibv_wr_set_sge_list(qpx, s.len(), s.as_ptr());
            }
            ibv_wr_complete(qpx)
        };
        destroy_ahs(&ahs);
        c_call(op, rc, "ibv_wr_complete")
    }
}

/// An AH on `pd` for port 1 with these address fields; Err(errno) when `ibv_create_ah` fails.
pub(crate) fn create_ah(
    pd: *mut ibv_pd,
    is_global: bool,
    dlid: u16,
    dgid: mlx5_dv::Gid,
    sgid_index: u8,
    hop_limit: u8,
) -> std::result::Result<*mut ibv_ah, i32> {
    // SAFETY: plain data; zero is the C default.
    let mut attr: ibv_ah_attr = unsafe { std::mem::zeroed() };
    attr.is_global = u8::from(is_global);
    attr.dlid = dlid;
    attr.port_num = 1;
    attr.grh.dgid.raw = dgid.0;
    attr.grh.sgid_index = sgid_index;
    attr.grh.hop_limit = hop_limit;
    // SAFETY: the PD is live; attr outlives the call.
    let ah = unsafe { ibv_create_ah(pd, &mut attr) };
    if ah.is_null() { Err(crate::call::last_errno()) } else { Ok(ah) }
}

pub(crate) fn destroy_ahs(ahs: &[*mut ibv_ah]) {
    for &ah in ahs {
        // SAFETY: each AH was made above and is used by no pending call.
        unsafe { ibv_destroy_ah(ah) };
    }
}

fn sge_of(o: &WrOp) -> &[mlx5_dv::Sge] {
    match o {
        WrOp::RdmaWrite { sge, .. }
        | WrOp::RdmaWriteImm { sge, .. }
        | WrOp::RdmaRead { sge, .. }
        | WrOp::AtomicCmpSwp { sge, .. }
        | WrOp::AtomicFetchAdd { sge, .. }
        | WrOp::Send { sge, .. }
        | WrOp::SendImm { sge, .. }
        | WrOp::SendInv { sge, .. } => sge,
        _ => &[],
    }
}

fn wr_id_flags(o: &WrOp) -> (u64, u32) {
    let (id, f) = match o {
        WrOp::RdmaWrite { wr_id, flags, .. }
        | WrOp::RdmaWriteImm { wr_id, flags, .. }
        | WrOp::RdmaRead { wr_id, flags, .. }
        | WrOp::AtomicCmpSwp { wr_id, flags, .. }
        | WrOp::AtomicFetchAdd { wr_id, flags, .. }
        | WrOp::Send { wr_id, flags, .. }
        | WrOp::SendImm { wr_id, flags, .. }
        | WrOp::SendInv { wr_id, flags, .. } => (*wr_id, flags.bits()),
        _ => (0, 0),
    };
    (id, f)
}
