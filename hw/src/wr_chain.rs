//! Send WRs: one `ibv_wr_*` chain with the ported mlx5dv setters (`inline`).

use std::ffi::{c_int, c_void};
use std::ptr;

use mlx5_dv::errno::{EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{Error, Op, Qp, Result, WrOp};
use rdma_sys::*;

use crate::backend::HwBackend;
use crate::call::c_call;
use crate::inline;
use crate::queues::to_c_sges;
use crate::sys::mlx5dv::{
    mlx5dv_mkey, mlx5dv_mkey_conf_attr, mlx5dv_mr_interleaved, mlx5dv_sig_block_attr, mlx5dv_sig_block_domain,
    mlx5dv_sig_block_domain__bindgen_ty_1, mlx5dv_sig_crc, mlx5dv_sig_t10dif,
};

impl HwBackend {
    /// One `ibv_wr_start`, the builders and setters in order, then `ibv_wr_complete`.
    pub(crate) fn hw_post_send(&mut self, qp: &Qp, ops: &[WrOp]) -> Result<()> {
        let op = Op::PostSend;
        let (qpx, mqpx) = {
            let q = self.objs.qps.get(qp.handle, op)?;
            (q.qpx, q.mqpx)
        };
        if qpx.is_null() {
            return Err(Error::new(op, EOPNOTSUPP, "the QP has no extended send API"));
        }
        // Resolve every mkey before the chain starts: a stale handle never reaches libmlx5.
        let mut mkeys = Vec::new();
        let mut deks = Vec::new();
        let mut binds = Vec::new();
        for w in ops {
            if let WrOp::BindMw { bind, .. } = w {
                binds.push(self.c_bind(bind, op)?);
            }
            if let WrOp::SetMkeyCrypto(a) = w {
                // libmlx5 follows the DEK pointer when it finalizes the UMR: NULL would crash.
                let d = a.dek.ok_or_else(|| Error::new(op, EINVAL, "the crypto setter names no DEK (NULL)"))?;
                deks.push(self.objs.deks.get(d, op)?.ptr);
            }
            if let WrOp::MkeyConfigure { mkey, .. } | WrOp::MrList { mkey, .. } | WrOp::MrInterleaved { mkey, .. } = w {
                let p = self.objs.mkeys.get(mkey.handle, op)?.ptr;
                mkeys.push((p, mkey.lkey, mkey.rkey));
            }
            if w.is_mlx5dv_mkey_op() && mqpx.is_null() {
                return Err(Error::new(op, EOPNOTSUPP, "the QP was created without mlx5dv send ops"));
            }
            // The C setters take a 16-bit count; a longer list exceeds every entry limit.
            if layout_len(w).is_some_and(|n| u16::try_from(n).is_err()) {
                return Err(Error::new(op, ENOMEM, "a layout of more than 65535 entries exceeds the mkey's entries"));
            }
        }
        let mut mkeys = mkeys.into_iter();
        let mut deks = deks.into_iter();
        let mut binds = binds.into_iter();
        // SAFETY (whole chain): qpx and mqpx belong to a live QP; every pointer passed below
        // points into vectors that outlive ibv_wr_complete.
        unsafe {
            ibv_wr_start(qpx);
            // The first setter whose op the QP lacks (a NULL pointer in mlx5dv_qp_ex).
            let mut missing_op: Option<c_int> = None;
            let mut keep: Vec<Vec<ibv_sge>> = Vec::new();
            let mut keep_il: Vec<Vec<mlx5dv_mr_interleaved>> = Vec::new();
            for (i, w) in ops.iter().enumerate() {
                if let Some((wr_id, flags)) = wr_id_flags(w) {
                    (*qpx).wr_id = wr_id;
                    (*qpx).wr_flags = flags;
                }
                // One data setter per WR: inline data that follows takes the gather list's place.
                let inline_next = matches!(ops.get(i + 1), Some(WrOp::InlineData(_)));
                let mut set_sges = |qpx: *mut ibv_qp_ex, s: &[mlx5_dv::Sge]| {
                    if inline_next {
                        return;
                    }
                    keep.push(to_c_sges(s));
                    if let Some(v) = keep.last() {
                        ibv_wr_set_sge_list(qpx, v.len(), v.as_ptr());
                    }
                };
                match w {
                    WrOp::RdmaWrite { rkey, remote_addr, sge, .. } => {
                        ibv_wr_rdma_write(qpx, *rkey, *remote_addr);
                        set_sges(qpx, sge);
                    }
                    WrOp::RdmaWriteImm { rkey, remote_addr, imm, sge, .. } => {
                        ibv_wr_rdma_write_imm(qpx, *rkey, *remote_addr, imm.to_be());
                        set_sges(qpx, sge);
                    }
                    WrOp::RdmaRead { rkey, remote_addr, sge, .. } => {
                        ibv_wr_rdma_read(qpx, *rkey, *remote_addr);
                        set_sges(qpx, sge);
                    }
                    WrOp::AtomicCmpSwp { rkey, remote_addr, compare, swap, sge, .. } => {
                        ibv_wr_atomic_cmp_swp(qpx, *rkey, *remote_addr, *compare, *swap);
                        set_sges(qpx, sge);
                    }
                    WrOp::AtomicFetchAdd { rkey, remote_addr, add, sge, .. } => {
                        ibv_wr_atomic_fetch_add(qpx, *rkey, *remote_addr, *add);
                        set_sges(qpx, sge);
                    }
                    WrOp::Send { sge, .. } => {
                        ibv_wr_send(qpx);
                        set_sges(qpx, sge);
                    }
                    WrOp::SendImm { imm, sge, .. } => {
                        ibv_wr_send_imm(qpx, imm.to_be());
                        set_sges(qpx, sge);
                    }
                    WrOp::SendInv { invalidate_rkey, sge, .. } => {
                        ibv_wr_send_inv(qpx, *invalidate_rkey);
                        set_sges(qpx, sge);
                    }
                    WrOp::LocalInv { invalidate_rkey, .. } => ibv_wr_local_inv(qpx, *invalidate_rkey),
                    WrOp::BindMw { bind, .. } => {
                        // A QP created without IBV_QP_EX_WITH_BIND_MW has no builder for it.
                        match (binds.next(), (*qpx).wr_bind_mw.is_some()) {
                            (Some((mw, info)), true) => ibv_wr_bind_mw(qpx, mw, bind.rkey, &info),
                            _ => note(&mut missing_op, Err(EOPNOTSUPP)),
                        }
                    }
                    WrOp::Memcpy { dest_lkey, dest_addr, src_lkey, src_addr, length, .. } => {
                        let r = match (mqpx.is_null(), usize::try_from(*length)) {
                            (false, Ok(n)) => inline::wr_memcpy(mqpx, *dest_lkey, *dest_addr, *src_lkey, *src_addr, n),
                            _ => Err(EOPNOTSUPP),
                        };
                        note(&mut missing_op, r);
                    }
                    WrOp::RawWqe { wqe, .. } => {
                        // libmlx5 reads ds × 16 bytes of it: never past the vector.
                        let ds = wqe.get(7).map_or(0, |b| usize::from(b & 0x3f));
                        // No mlx5dv QP: no raw WQE builder, as for memcpy.
                        let r = if mqpx.is_null() {
                            Err(EOPNOTSUPP)
                        } else if wqe.len() < ds * 16 {
                            Err(EINVAL)
                        } else {
                            inline::wr_raw_wqe(mqpx, wqe.as_ptr().cast())
                        };
                        note(&mut missing_op, r);
                    }
                    WrOp::MkeyConfigure { num_setters, conf_flags, comp_mask, .. } => {
                        let mut attr = mlx5dv_mkey_conf_attr { conf_flags: conf_flags.bits(), comp_mask: *comp_mask };
                        let m = next_mkey(&mut mkeys);
                        note(&mut missing_op, inline::wr_mkey_configure(mqpx, m, *num_setters, &mut attr));
                    }
                    WrOp::SetMkeyAccessFlags(a) => {
                        note(&mut missing_op, inline::wr_set_mkey_access_flags(mqpx, a.bits()));
                    }
                    WrOp::SetMkeySigBlock(attr) => {
                        let c = CSigAttr::new(attr);
                        note(&mut missing_op, inline::wr_set_mkey_sig_block(mqpx, c.attr()));
                    }
                    WrOp::SetMkeyCrypto(a) => {
                        let c = crate::crypto::c_crypto_attr(a, deks.next().unwrap_or(ptr::null_mut()));
                        note(&mut missing_op, inline::wr_set_mkey_crypto(mqpx, &c));
                    }
                    WrOp::SetMkeyLayoutList(sge) => {
                        keep.push(to_c_sges(sge));
                        if let Some(v) = keep.last() {
                            note(&mut missing_op, inline::wr_set_mkey_layout_list(mqpx, count16(v.len()), v.as_ptr()));
                        }
                    }
                    WrOp::SetMkeyLayoutInterleaved { repeat_count, entries } => {
                        keep_il.push(to_c_interleaved(entries));
                        if let Some(v) = keep_il.last() {
                            let r = inline::wr_set_mkey_layout_interleaved(
                                mqpx,
                                *repeat_count,
                                count16(v.len()),
                                v.as_ptr(),
                            );
                            note(&mut missing_op, r);
                        }
                    }
                    WrOp::InlineData(bytes) => ibv_wr_set_inline_data(qpx, bytes.as_ptr() as *mut c_void, bytes.len()),
                    WrOp::MrList { access, sge, .. } => {
                        let m = next_mkey(&mut mkeys);
                        keep.push(to_c_sges(sge));
                        if let Some(v) = keep.last_mut() {
                            note(
                                &mut missing_op,
                                inline::wr_mr_list(mqpx, m, access.bits(), count16(v.len()), v.as_mut_ptr()),
                            );
                        }
                    }
                    WrOp::MrInterleaved { access, repeat_count, entries, .. } => {
                        let m = next_mkey(&mut mkeys);
                        keep_il.push(to_c_interleaved(entries));
                        if let Some(v) = keep_il.last_mut() {
                            let r = inline::wr_mr_interleaved(
                                mqpx,
                                m,
                                access.bits(),
                                *repeat_count,
                                count16(v.len()),
                                v.as_mut_ptr(),
                            );
                            note(&mut missing_op, r);
                        }
                    }
                }
            }
            if let Some(e) = missing_op {
                ibv_wr_abort(qpx);
                return Err(Error::new(op, e, "a setter of the chain is missing from the QP's mlx5dv ops"));
            }
            let rc = ibv_wr_complete(qpx);
            c_call(op, rc, "ibv_wr_complete")
        }
    }
}

fn to_c_interleaved(e: &[mlx5_dv::MrInterleaved]) -> Vec<mlx5dv_mr_interleaved> {
    e.iter()
        .map(|x| mlx5dv_mr_interleaved {
            addr: x.addr,
            bytes_count: x.bytes_count,
            bytes_skip: x.bytes_skip,
            lkey: x.lkey,
        })
        .collect()
}

/// Write the application's key (with its tag byte) into the provider's mkey and return it.
///
/// # Safety
/// The pointers must be live mkeys of this backend.
unsafe fn next_mkey(it: &mut impl Iterator<Item = (*mut mlx5dv_mkey, u32, u32)>) -> *mut mlx5dv_mkey {
    match it.next() {
        Some((p, lkey, rkey)) => {
            // SAFETY: the caller guarantees p is a live mkey.
            unsafe {
                (*p).lkey = lkey;
                (*p).rkey = rkey;
            }
            p
        }
        None => ptr::null_mut(),
    }
}

fn wr_id_flags(w: &WrOp) -> Option<(u64, u32)> {
    match w {
        WrOp::RdmaWrite { wr_id, flags, .. }
        | WrOp::RdmaWriteImm { wr_id, flags, .. }
        | WrOp::RdmaRead { wr_id, flags, .. }
        | WrOp::AtomicCmpSwp { wr_id, flags, .. }
        | WrOp::AtomicFetchAdd { wr_id, flags, .. }
        | WrOp::Send { wr_id, flags, .. }
        | WrOp::SendImm { wr_id, flags, .. }
        | WrOp::SendInv { wr_id, flags, .. }
        | WrOp::LocalInv { wr_id, flags, .. }
        | WrOp::BindMw { wr_id, flags, .. }
        | WrOp::MkeyConfigure { wr_id, flags, .. }
        | WrOp::Memcpy { wr_id, flags, .. }
        | WrOp::MrList { wr_id, flags, .. }
        | WrOp::MrInterleaved { wr_id, flags, .. } => Some((*wr_id, flags.bits())),
        // The program's control segment holds the WQE's flags.
        WrOp::RawWqe { wr_id, .. } => Some((*wr_id, 0)),
        _ => None,
    }
}

/// `struct mlx5dv_sig_block_attr` with the domains and their parameters it points to, kept
/// together so the pointers stay valid while the setter runs.
struct CSigAttr {
    difs: Box<[mlx5dv_sig_t10dif; 2]>,
    crcs: Box<[mlx5dv_sig_crc; 2]>,
    domains: Box<[mlx5dv_sig_block_domain; 2]>,
    present: [bool; 2],
    attr: mlx5dv_sig_block_attr,
}

impl CSigAttr {
    fn new(a: &mlx5_dv::SigBlockAttr) -> Box<Self> {
        let dif = |d: &mlx5_dv::SigBlockDomain| mlx5dv_sig_t10dif {
            bg_type: d.dif.bg_type,
            bg: d.dif.bg,
            app_tag: d.dif.app_tag,
            ref_tag: d.dif.ref_tag,
            flags: d.dif.flags.bits(),
        };
        let crc = |d: &mlx5_dv::SigBlockDomain| mlx5dv_sig_crc { type_: d.crc.crc_type, seed: d.crc.seed };
        let doms = [a.mem, a.wire];
        let zero = mlx5_dv::SigBlockDomain::default();
        let mut c = Box::new(CSigAttr {
            difs: Box::new([dif(doms[0].as_ref().unwrap_or(&zero)), dif(doms[1].as_ref().unwrap_or(&zero))]),
            crcs: Box::new([crc(doms[0].as_ref().unwrap_or(&zero)), crc(doms[1].as_ref().unwrap_or(&zero))]),
            // SAFETY: plain data; every field is set below before use.
            domains: Box::new(unsafe { std::mem::zeroed() }),
            present: [doms[0].is_some(), doms[1].is_some()],
            // SAFETY: plain data.
            attr: unsafe { std::mem::zeroed() },
        });
        for (i, d) in doms.iter().enumerate() {
            let d = d.unwrap_or_default();
            let sig = if d.sig_type == mlx5_dv::sig::TYPE_T10DIF {
                mlx5dv_sig_block_domain__bindgen_ty_1 { dif: &c.difs[i] }
            } else {
                mlx5dv_sig_block_domain__bindgen_ty_1 { crc: &c.crcs[i] }
            };
            c.domains[i] =
                mlx5dv_sig_block_domain { sig_type: d.sig_type, sig, block_size: d.block_size, comp_mask: d.comp_mask };
        }
        let ptr = |i: usize, c: &CSigAttr| if c.present[i] { &c.domains[i] as *const _ } else { ptr::null() };
        c.attr = mlx5dv_sig_block_attr {
            mem: ptr(0, &c),
            wire: ptr(1, &c),
            flags: a.flags.bits(),
            check_mask: a.check_mask,
            copy_mask: a.copy_mask,
            comp_mask: a.comp_mask,
        };
        c
    }

    fn attr(&self) -> *const mlx5dv_sig_block_attr {
        &self.attr
    }
}

/// Keep the first missing-op error of a chain.
fn note(first: &mut Option<c_int>, r: std::result::Result<(), c_int>) {
    if let (None, Err(e)) = (&first, r) {
        *first = Some(e);
    }
}

/// A list length as the C setters take it; lengths over 65535 were refused before the chain.
fn count16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// The number of entries a layout op passes, if it is one.
fn layout_len(w: &WrOp) -> Option<usize> {
    match w {
        WrOp::SetMkeyLayoutList(v) | WrOp::MrList { sge: v, .. } => Some(v.len()),
        WrOp::SetMkeyLayoutInterleaved { entries, .. } | WrOp::MrInterleaved { entries, .. } => Some(entries.len()),
        _ => None,
    }
}

#[cfg(test)]
mod chain_tests {
    use super::*;

    #[test]
    fn the_first_missing_op_is_kept() {
        let mut first = None;
        note(&mut first, Ok(()));
        note(&mut first, Err(EOPNOTSUPP));
        note(&mut first, Err(EINVAL));
        assert_eq!(first, Some(EOPNOTSUPP));
    }

    #[test]
    fn long_layouts_are_recognised_before_any_narrowing() {
        let long = WrOp::SetMkeyLayoutList(vec![mlx5_dv::Sge::default(); 65536]);
        assert_eq!(layout_len(&long), Some(65536));
        assert!(u16::try_from(65536usize).is_err());
        assert_eq!(count16(65535), 65535);
        assert_eq!(layout_len(&WrOp::SetMkeyAccessFlags(mlx5_dv::AccessFlags::empty())), None);
    }
}
