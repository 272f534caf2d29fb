//! The `ibv_qp_ex` and `mlx5dv_qp_ex` of a QP: the `ibv_wr_*` and `mlx5dv_wr_*` inline
//! functions build one chain of the trait's operations, which `ibv_wr_complete` posts.
//!
//! As in libmlx5, a setter's error is kept and `ibv_wr_complete` returns the first one.
//!
//! Every op a header's inline function may call is set on every QP, whatever its type and
//! whether or not it was created with send ops flags (libmlx5 leaves the ops a QP type lacks
//! NULL, and a call through one faults): an op the simulator does not model fails the chain
//! with EOPNOTSUPP at `ibv_wr_complete` ([`ops`]). `ibv_qp_to_qp_ex` still returns
//! NULL for a QP created without send ops flags, as libibverbs does.

use std::ffi::{c_int, c_void};

use mlx5_dv::{
    AccessFlags, DvQpCreateFlags, DvQpInitAttr, DvQpInitMask, DvSendOpsFlags, MkeyConfFlags, MrInterleaved, SendFlags,
    SigBlockAttr, SigBlockAttrFlags, SigBlockDomain, SigCrc, SigT10dif, T10difFlags, WrOp,
};
use mlx5_hw::sys::mlx5dv::*;
use rdma_sys::*;

use crate::errno::null;
use crate::objects::{Qp, QpC};
use crate::state::{Shim, with};

mod ops;
mod ud;

impl QpC {
    /// A QP's C structs with every op set; `extended`: created with send ops flags.
    pub(crate) fn new(extended: bool) -> Box<QpC> {
        // SAFETY: plain data (pointers, optional functions, zeroed pthread objects).
        let mut c: Box<QpC> = Box::new(unsafe { std::mem::zeroed() });
        c.extended = extended;
        ops::fill_unmodelled(&mut c);
        {
            let e = &mut c.ex;
            e.wr_start = Some(wr_start);
            e.wr_complete = Some(wr_complete);
            e.wr_abort = Some(wr_abort);
            e.wr_rdma_write = Some(wr_rdma_write);
            e.wr_rdma_write_imm = Some(wr_rdma_write_imm);
            e.wr_rdma_read = Some(wr_rdma_read);
            e.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
            e.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
            e.wr_send = Some(wr_send);
            e.wr_send_imm = Some(wr_send_imm);
            e.wr_send_inv = Some(wr_send_inv);
            e.wr_local_inv = Some(wr_local_inv);
            e.wr_set_sge = Some(wr_set_sge);
            e.wr_set_sge_list = Some(wr_set_sge_list);
            e.wr_set_inline_data = Some(wr_set_inline_data);
            e.wr_set_inline_data_list = Some(wr_set_inline_data_list);
            e.wr_set_ud_addr = Some(ud::wr_set_ud_addr);
            e.wr_set_xrc_srqn = Some(ud::wr_set_xrc_srqn);
            let d = &mut c.dv;
            d.wr_mkey_configure = Some(wr_mkey_configure);
            d.wr_set_mkey_access_flags = Some(wr_set_mkey_access_flags);
            d.wr_set_mkey_layout_list = Some(wr_set_mkey_layout_list);
            d.wr_set_mkey_layout_interleaved = Some(wr_set_mkey_layout_interleaved);
            d.wr_set_mkey_sig_block = Some(wr_set_mkey_sig_block);
            d.wr_set_mkey_crypto = Some(crate::dv_crypto::wr_set_mkey_crypto);
            d.wr_mr_list = Some(wr_mr_list);
            d.wr_mr_interleaved = Some(wr_mr_interleaved);
        }
        c
    }
}

/// Run `f` on the QP of an `ibv_qp_ex` (whose address is the QP's).
pub(crate) fn on_qpx(qpx: *mut ibv_qp_ex, f: impl FnOnce(&mut Qp)) {
    with(
        |_| (),
        |s| {
            if let Ok(q) = s.qp(qpx.cast()) {
                f(q)
            }
        },
    )
}

/// Run `f` on the QP of an `mlx5dv_qp_ex`, which sits after the `ibv_qp_ex` in [`QpC`].
pub(crate) fn on_mqp(mqp: *mut mlx5dv_qp_ex, f: impl FnOnce(&mut Shim, usize)) {
    let qp = (mqp as usize).wrapping_sub(std::mem::offset_of!(QpC, dv));
    with(|_| (), |s| f(s, qp))
}

/// Start a WR of the chain with the QP's current `wr_id` and `wr_flags`.
fn push(qpx: *mut ibv_qp_ex, make: impl FnOnce(u64, SendFlags) -> WrOp) {
    on_qpx(qpx, |q| {
        let op = make(q.c.ex.wr_id, SendFlags::from_bits_retain(q.c.ex.wr_flags));
        q.chain.push(op);
    })
}

/// Set the SGEs of the chain's last WR.
fn set_sges(q: &mut Qp, list: Vec<mlx5_dv::Sge>) {
    match q.chain.last_mut() {
        Some(
            WrOp::RdmaWrite { sge, .. }
            | WrOp::RdmaWriteImm { sge, .. }
            | WrOp::RdmaRead { sge, .. }
            | WrOp::AtomicCmpSwp { sge, .. }
            | WrOp::AtomicFetchAdd { sge, .. }
            | WrOp::Send { sge, .. }
            | WrOp::SendImm { sge, .. }
            | WrOp::SendInv { sge, .. },
        ) => *sge = list,
        _ => latch(q, libc::EINVAL),
    }
}

/// Keep the chain's first error.
pub(crate) fn latch(q: &mut Qp, e: c_int) {
    if q.chain_err == 0 {
        q.chain_err = e;
    }
}

unsafe extern "C" fn wr_start(qpx: *mut ibv_qp_ex) {
    on_qpx(qpx, |q| {
        q.chain.clear();
        q.chain_err = 0;
        q.ud.clear();
        q.dc.clear();
        q.xrc.clear();
    })
}

unsafe extern "C" fn wr_complete(qpx: *mut ibv_qp_ex) -> c_int {
    crate::state::device_thread::posting();
    with(
        |e| e,
        |s| {
            let Ok(q) = s.qp(qpx.cast()) else { return libc::EINVAL };
            let chain = std::mem::take(&mut q.chain);
            let ud_addrs = std::mem::take(&mut q.ud);
            let dc_addrs = std::mem::take(&mut q.dc);
            let xrc_srqns = std::mem::take(&mut q.xrc);
            let err = std::mem::take(&mut q.chain_err);
            if err != 0 {
                // mlx5_send_wr_complete_error: a QP not moved to RTS since it was created or
                // reset fails with EINVAL whatever its setters latched (the simulator decides
                // that for a chain it is given; this one never reaches it). ERR is taken as
                // reached from RTS, the way a working QP gets there.
                return if reset_since_rts(q) { libc::EINVAL } else { err };
            }
            let h = q.qp;
            let ty = q.c.ex.qp_base.qp_type;
            let r = if ty == ibv_qp_type::IBV_QPT_UD
                || ty == ibv_qp_type::IBV_QPT_DRIVER
                || ty == ibv_qp_type::IBV_QPT_XRC_SEND
            {
                // mlx5_send_wr_complete_error until the QP reaches RTS after a reset (the
                // chain goes through ibv_post_send's path, which does not know it).
                if reset_since_rts(q) {
                    return libc::EINVAL;
                }
                match ud::send_wrs(&chain, ud_addrs, dc_addrs, xrc_srqns) {
                    Ok(wrs) => s.sim.post_send_wr(&h, &wrs),
                    Err(e) => return e,
                }
            } else {
                s.sim.post_send(&h, &chain)
            };
            s.notify();
            match r {
                Ok(()) => 0,
                Err(e) => {
                    s.collect_events();
                    e.errno()
                }
            }
        },
    )
}

/// The QP is in a state before RTS (as after a reset): libmlx5's `wr_complete` is then
/// `mlx5_send_wr_complete_error`.
fn reset_since_rts(q: &Qp) -> bool {
    matches!(q.c.ex.qp_base.state, ibv_qp_state::IBV_QPS_RESET | ibv_qp_state::IBV_QPS_INIT | ibv_qp_state::IBV_QPS_RTR)
}

unsafe extern "C" fn wr_abort(qpx: *mut ibv_qp_ex) {
    on_qpx(qpx, |q| {
        q.chain.clear();
        q.chain_err = 0;
        q.ud.clear();
        q.dc.clear();
        q.xrc.clear();
    })
}

unsafe extern "C" fn wr_rdma_write(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    push(qpx, |wr_id, flags| WrOp::RdmaWrite { wr_id, flags, rkey, remote_addr, sge: Vec::new() })
}

unsafe extern "C" fn wr_rdma_write_imm(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm: u32) {
    push(qpx, |wr_id, flags| WrOp::RdmaWriteImm { wr_id, flags, rkey, remote_addr, imm, sge: Vec::new() })
}

unsafe extern "C" fn wr_rdma_read(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    push(qpx, |wr_id, flags| WrOp::RdmaRead { wr_id, flags, rkey, remote_addr, sge: Vec::new() })
}

unsafe extern "C" fn wr_atomic_cmp_swp(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, compare: u64, swap: u64) {
    push(qpx, |wr_id, flags| WrOp::AtomicCmpSwp { wr_id, flags, rkey, remote_addr, compare, swap, sge: Vec::new() })
}

unsafe extern "C" fn wr_atomic_fetch_add(qpx: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, add: u64) {
    push(qpx, |wr_id, flags| WrOp::AtomicFetchAdd { wr_id, flags, rkey, remote_addr, add, sge: Vec::new() })
}

unsafe extern "C" fn wr_send(qpx: *mut ibv_qp_ex) {
    push(qpx, |wr_id, flags| WrOp::Send { wr_id, flags, sge: Vec::new() })
}

unsafe extern "C" fn wr_send_imm(qpx: *mut ibv_qp_ex, imm: u32) {
    push(qpx, |wr_id, flags| WrOp::SendImm { wr_id, flags, imm, sge: Vec::new() })
}

unsafe extern "C" fn wr_send_inv(qpx: *mut ibv_qp_ex, invalidate_rkey: u32) {
    push(qpx, |wr_id, flags| WrOp::SendInv { wr_id, flags, invalidate_rkey, sge: Vec::new() })
}

unsafe extern "C" fn wr_local_inv(qpx: *mut ibv_qp_ex, invalidate_rkey: u32) {
    push(qpx, |wr_id, flags| WrOp::LocalInv { wr_id, flags, invalidate_rkey })
}

unsafe extern "C" fn wr_set_sge(qpx: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    on_qpx(qpx, |q| set_sges(q, vec![mlx5_dv::Sge { addr, length, lkey }]))
}

unsafe extern "C" fn wr_set_sge_list(qpx: *mut ibv_qp_ex, num_sge: usize, sg_list: *const ibv_sge) {
    let list = if num_sge == 0 || sg_list.is_null() {
        Vec::new()
    } else {
        // SAFETY: the caller's array of num_sge SGEs.
        unsafe { std::slice::from_raw_parts(sg_list, num_sge) }
            .iter()
            .map(|g| mlx5_dv::Sge { addr: g.addr, length: g.length, lkey: g.lkey })
            .collect()
    };
    on_qpx(qpx, |q| set_sges(q, list))
}

/// Inline data: the bytes are copied now (`_mlx5_send_wr_set_inline_data`), so the buffer
/// need not be registered nor outlive the call; more than the QP's `max_inline_data` latches
/// ENOMEM without reading them.
unsafe extern "C" fn wr_set_inline_data(qpx: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    let buf = ibv_data_buf { addr, length };
    // SAFETY: one buffer, the caller's.
    unsafe { wr_set_inline_data_list(qpx, 1, &buf) }
}

unsafe extern "C" fn wr_set_inline_data_list(qpx: *mut ibv_qp_ex, num_buf: usize, buf_list: *const ibv_data_buf) {
    let bufs = if num_buf == 0 || buf_list.is_null() {
        &[][..]
    } else {
        // SAFETY: the caller's array of num_buf buffers.
        unsafe { std::slice::from_raw_parts(buf_list, num_buf) }
    };
    on_qpx(qpx, |q| {
        // SAFETY: each buffer's bytes, the caller's; read only within max_inline_data.
        match unsafe {
            crate::inline::gather(bufs.iter().map(|b| (b.addr.cast_const(), b.length)), q.qp.cap.max_inline_data)
        } {
            Ok(bytes) => q.chain.push(WrOp::InlineData(bytes)),
            Err(e) => latch(q, e),
        }
    })
}

/// Push an mlx5dv op on the QP's chain; a bad mkey pointer latches EINVAL.
pub(super) fn push_dv(mqp: *mut mlx5dv_qp_ex, make: impl FnOnce(&Shim, u64, SendFlags) -> Result<WrOp, c_int>) {
    on_mqp(mqp, |s, qp| {
        let Some(q) = s.qps.get(&qp) else { return };
        let (wr_id, flags) = (q.c.ex.wr_id, SendFlags::from_bits_retain(q.c.ex.wr_flags));
        let r = make(s, wr_id, flags);
        if let Some(q) = s.qps.get_mut(&qp) {
            match r {
                Ok(op) => q.chain.push(op),
                Err(e) => latch(q, e),
            }
        }
    })
}

unsafe extern "C" fn wr_mkey_configure(
    mqp: *mut mlx5dv_qp_ex,
    mkey: *mut mlx5dv_mkey,
    num_setters: u8,
    attr: *mut mlx5dv_mkey_conf_attr,
) {
    let (conf_flags, comp_mask) = if attr.is_null() {
        (0, 0)
    } else {
        // SAFETY: the caller's attributes.
        unsafe { ((*attr).conf_flags, (*attr).comp_mask) }
    };
    push_dv(mqp, |s, wr_id, flags| {
        Ok(WrOp::MkeyConfigure {
            wr_id,
            flags,
            mkey: s.mkey(mkey)?,
            num_setters,
            conf_flags: MkeyConfFlags::from_bits_retain(conf_flags),
            comp_mask,
        })
    })
}

unsafe extern "C" fn wr_set_mkey_access_flags(mqp: *mut mlx5dv_qp_ex, access_flags: u32) {
    push_dv(mqp, |_, _, _| Ok(WrOp::SetMkeyAccessFlags(AccessFlags::from_bits_retain(access_flags))))
}

fn sge_list(n: u16, list: *const ibv_sge) -> Vec<mlx5_dv::Sge> {
    if n == 0 || list.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller's array of n SGEs.
    unsafe { std::slice::from_raw_parts(list, usize::from(n)) }
        .iter()
        .map(|g| mlx5_dv::Sge { addr: g.addr, length: g.length, lkey: g.lkey })
        .collect()
}

fn interleaved(n: u16, data: *const mlx5dv_mr_interleaved) -> Vec<MrInterleaved> {
    if n == 0 || data.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller's array of n entries.
    unsafe { std::slice::from_raw_parts(data, usize::from(n)) }
        .iter()
        .map(|e| MrInterleaved { addr: e.addr, bytes_count: e.bytes_count, bytes_skip: e.bytes_skip, lkey: e.lkey })
        .collect()
}

unsafe extern "C" fn wr_set_mkey_layout_list(mqp: *mut mlx5dv_qp_ex, num_sges: u16, sge: *const ibv_sge) {
    let list = sge_list(num_sges, sge);
    push_dv(mqp, |_, _, _| Ok(WrOp::SetMkeyLayoutList(list)))
}

unsafe extern "C" fn wr_set_mkey_layout_interleaved(
    mqp: *mut mlx5dv_qp_ex,
    repeat_count: u32,
    num_interleaved: u16,
    data: *const mlx5dv_mr_interleaved,
) {
    let entries = interleaved(num_interleaved, data);
    push_dv(mqp, |_, _, _| Ok(WrOp::SetMkeyLayoutInterleaved { repeat_count, entries }))
}

unsafe extern "C" fn wr_mr_list(
    mqp: *mut mlx5dv_qp_ex,
    mkey: *mut mlx5dv_mkey,
    access_flags: u32,
    num_sges: u16,
    sge: *mut ibv_sge,
) {
    let list = sge_list(num_sges, sge);
    push_dv(mqp, |s, wr_id, flags| {
        Ok(WrOp::MrList {
            wr_id,
            flags,
            mkey: s.mkey(mkey)?,
            access: AccessFlags::from_bits_retain(access_flags),
            sge: list,
        })
    })
}

unsafe extern "C" fn wr_mr_interleaved(
    mqp: *mut mlx5dv_qp_ex,
    mkey: *mut mlx5dv_mkey,
    access_flags: u32,
    repeat_count: u32,
    num_interleaved: u16,
    data: *mut mlx5dv_mr_interleaved,
) {
    let entries = interleaved(num_interleaved, data);
    push_dv(mqp, |s, wr_id, flags| {
        Ok(WrOp::MrInterleaved {
            wr_id,
            flags,
            mkey: s.mkey(mkey)?,
            access: AccessFlags::from_bits_retain(access_flags),
            repeat_count,
            entries,
        })
    })
}

/// A signature domain as the trait holds it.
fn domain(d: *const mlx5dv_sig_block_domain) -> Option<SigBlockDomain> {
    if d.is_null() {
        return None;
    }
    // SAFETY: the caller's domain.
    let d = unsafe { &*d };
    let mut out =
        SigBlockDomain { sig_type: d.sig_type, block_size: d.block_size, comp_mask: d.comp_mask, ..Default::default() };
    if d.sig_type == mlx5_dv::sig::TYPE_T10DIF {
        // SAFETY: the union member sig_type selects; NULL is checked.
        let dif = unsafe { d.sig.dif };
        if !dif.is_null() {
            // SAFETY: as above.
            let t = unsafe { &*dif };
            out.dif = SigT10dif {
                bg_type: t.bg_type,
                bg: t.bg,
                app_tag: t.app_tag,
                ref_tag: t.ref_tag,
                flags: T10difFlags::from_bits_retain(t.flags),
            };
        }
    } else {
        // SAFETY: as above.
        let crc = unsafe { d.sig.crc };
        if !crc.is_null() {
            // SAFETY: as above.
            let c = unsafe { &*crc };
            out.crc = SigCrc { crc_type: c.type_, seed: c.seed };
        }
    }
    Some(out)
}

unsafe extern "C" fn wr_set_mkey_sig_block(mqp: *mut mlx5dv_qp_ex, attr: *const mlx5dv_sig_block_attr) {
    if attr.is_null() {
        return on_mqp(mqp, |s, qp| {
            if let Some(q) = s.qps.get_mut(&qp) {
                latch(q, libc::EINVAL)
            }
        });
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &*attr };
    let sig = SigBlockAttr {
        mem: domain(a.mem),
        wire: domain(a.wire),
        flags: SigBlockAttrFlags::from_bits_retain(a.flags),
        check_mask: a.check_mask,
        copy_mask: a.copy_mask,
        comp_mask: a.comp_mask,
    };
    push_dv(mqp, |_, _, _| Ok(WrOp::SetMkeySigBlock(sig)))
}

/// `ibv_qp_to_qp_ex`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    with(null, |s| match s.qp(qp) {
        Ok(q) if q.c.extended => &mut q.c.ex,
        _ => null(libc::EOPNOTSUPP),
    })
}

/// `mlx5dv_qp_ex_from_ibv_qp_ex`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_qp_ex_from_ibv_qp_ex(qp: *mut ibv_qp_ex) -> *mut mlx5dv_qp_ex {
    with(null, |s| match s.qp(qp.cast()) {
        Ok(q) => &mut q.c.dv,
        Err(e) => null(e),
    })
}

/// `mlx5dv_create_qp`: an RC QP with mlx5dv create flags and send ops.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_create_qp(
    context: *mut ibv_context,
    qp_attr: *mut ibv_qp_init_attr_ex,
    mlx5_qp_attr: *mut mlx5dv_qp_init_attr,
) -> *mut ibv_qp {
    if qp_attr.is_null() {
        return null(libc::EINVAL);
    }
    let dv = if mlx5_qp_attr.is_null() {
        None
    } else {
        // SAFETY: the caller's attributes.
        let d = unsafe { &*mlx5_qp_attr };
        let comp_mask = DvQpInitMask::from_bits_retain(d.comp_mask);
        // dc_init_attr is read only with MLX5DV_QP_INIT_ATTR_MASK_DC, as libmlx5 reads it.
        let dc = if comp_mask.contains(DvQpInitMask::DC) {
            let a = &d.dc_init_attr;
            // SAFETY: both union members are plain integers; which one counts is dc_type's.
            let (key, streams) = unsafe { (a.__bindgen_anon_1.dct_access_key, a.__bindgen_anon_1.dci_streams) };
            mlx5_dv::DcInitAttr {
                dc_type: a.dc_type,
                dct_access_key: key,
                log_num_concurent: streams.log_num_concurent,
                log_num_errored: streams.log_num_errored,
            }
        } else {
            mlx5_dv::DcInitAttr::default()
        };
        Some(DvQpInitAttr {
            comp_mask,
            create_flags: DvQpCreateFlags::from_bits_retain(d.create_flags),
            send_ops_flags: DvSendOpsFlags::from_bits_retain(d.send_ops_flags),
            dc,
        })
    };
    // SAFETY: the caller's attributes.
    with(null, |s| s.create_qp(context, unsafe { &mut *qp_attr }, dv).unwrap_or_else(null))
}
