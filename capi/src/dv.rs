//! The mlx5dv calls around a context: `mlx5dv_query_device`, `mlx5dv_init_obj`,
//! `mlx5dv_qp_cancel_posted_send_wrs`, the dma-buf MRs and the data-direct path, and the VFIO
//! device list. The objects of the crypto and DEVX calls ([`crate::dv_crypto`],
//! [`crate::dv_devx`]) are kept in [`DvObjects`].

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr::{self, addr_of_mut};

use mlx5_dv::AccessFlags;
use mlx5_hw::sys::mlx5dv::{
    mlx5dv_ah, mlx5dv_context, mlx5dv_cq, mlx5dv_obj, mlx5dv_pd, mlx5dv_qp, mlx5dv_qp_ex, mlx5dv_vfio_context_attr,
};
use rdma_sys::*;

use crate::errno::{code, null};
use crate::objects::{Pages, QpC};
use crate::state::{Shim, key, with};

/// The `mlx5dv_context.comp_mask` parts `_mlx5dv_query_device` fills whenever they are asked
/// for: SWP, STRIDING_RQ, TUNNEL_OFFLOADS, DYN_BFREGS, FLOW_ACTION_FLAGS,
/// and DCI_STREAMS. The simulator models none of those features, so their caps
/// read as zero, as on a device without them. CQE_COMPRESION, WR_MEMCPY_LENGTH and
/// DC_ODP_CAPS come from the simulator. HCA_CORE_CLOCK and NUM_LAG_PORTS
/// are echoed by the provider only when the device has a mapped core clock or LAG ports,
/// which the simulated one has not (its clock is read through `ibv_query_rt_values_ex`);
/// CLOCK_INFO_UPDATE is echoed, the kernel context having a clock-info page ([`CLOCK_INFO_UPDATE`]).
const ZERO_CAPS_MASK: u64 = 1 << 1 | 1 << 2 | 1 << 3 | 1 << 4 | 1 << 6;

/// `MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE`: `max_clock_info_update_nsec`, the clock-info
/// page's `overflow_period` (`crate::clock::update_period_ns`).
const CLOCK_INFO_UPDATE: u64 = 1 << 5;

/// `MLX5DV_QP_MASK_*` of `struct mlx5dv_qp`'s comp_mask.
const QP_MASK_UAR_MMAP_OFFSET: u64 = 1 << 0;
const QP_MASK_RAW_QP_HANDLES: u64 = 1 << 1;
const QP_MASK_RAW_QP_TIR_ADDR: u64 = 1 << 2;
/// Where a UAR page's first BlueFlame register is, and the size of each of its halves.
const BF_OFFSET: usize = 0x800;
const BF_HALF: u32 = 256;

/// `MLX5DV_OBJ_*` of rdma-core 44.
mod obj {
    pub(super) const QP: u64 = 1 << 0;
    pub(super) const CQ: u64 = 1 << 1;
    pub(super) const SRQ: u64 = 1 << 2;
    pub(super) const RWQ: u64 = 1 << 3;
    pub(super) const DM: u64 = 1 << 4;
    pub(super) const AH: u64 = 1 << 5;
    pub(super) const PD: u64 = 1 << 6;
}

impl Shim {
    /// `_mlx5dv_query_device` into the caller's struct, field by field: only the fields a
    /// requested part names are written, so a program built against an older (shorter)
    /// `struct mlx5dv_context` is never written past its end.
    fn dv_query_device(&mut self, ctx: *const ibv_context, out: *mut mlx5dv_context) -> c_int {
        let Ok(h) = self.ctx_handle(ctx) else { return libc::EINVAL };
        // SAFETY: the caller's struct; comp_mask is an input.
        let asked = unsafe { (*out).comp_mask };
        let q = match self.sim.query_device(h, asked) {
            Ok(q) => q,
            Err(e) => return code(&e),
        };
        let zero_parts = asked & ZERO_CAPS_MASK;
        let clock_part = asked & CLOCK_INFO_UPDATE;
        let update_ns = crate::clock::update_period_ns(self.sim.profile().device.hca_core_clock_khz);
        // SAFETY: the caller's struct, written field by field through raw pointers.
        unsafe {
            addr_of_mut!((*out).version).write(0);
            // The simulator's flags: CQE_V1, the CQE padding and compression flags of the
            // kernel's response, and BLUEFLAME from rdma-core 58 on (`bf_reg_size` 512).
            addr_of_mut!((*out).flags).write(q.flags);
            if q.comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_CQE_COMPRESION != 0 {
                let c = addr_of_mut!((*out).cqe_comp_caps);
                addr_of_mut!((*c).max_num).write(q.cqe_comp_caps.max_num);
                addr_of_mut!((*c).supported_format).write(q.cqe_comp_caps.supported_format);
            }
            if zero_parts & 1 << 1 != 0 {
                ptr::write_bytes(addr_of_mut!((*out).sw_parsing_caps), 0, 1);
            }
            if zero_parts & 1 << 2 != 0 {
                ptr::write_bytes(addr_of_mut!((*out).striding_rq_caps), 0, 1);
            }
            if zero_parts & 1 << 3 != 0 {
                addr_of_mut!((*out).tunnel_offloads_caps).write(0);
            }
            if zero_parts & 1 << 4 != 0 {
                addr_of_mut!((*out).max_dynamic_bfregs).write(0);
            }
            if zero_parts & 1 << 6 != 0 {
                addr_of_mut!((*out).flow_action_flags).write(0);
            }
            if q.comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_DC_ODP_CAPS != 0 {
                addr_of_mut!((*out).dc_odp_caps).write(q.dc_odp_caps);
            }
            if q.comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_DCI_STREAMS != 0 {
                let d = addr_of_mut!((*out).dci_streams_caps);
                addr_of_mut!((*d).max_log_num_concurent).write(q.dci_streams_caps.max_log_num_concurent);
                addr_of_mut!((*d).max_log_num_errored).write(q.dci_streams_caps.max_log_num_errored);
            }
            if q.comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH != 0 {
                let n = usize::try_from(q.max_wr_memcpy_length).unwrap_or(usize::MAX);
                addr_of_mut!((*out).max_wr_memcpy_length).write(n);
            }
            if q.comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD != 0 {
                let s = addr_of_mut!((*out).sig_caps);
                addr_of_mut!((*s).block_size).write(q.sig_caps.block_size);
                addr_of_mut!((*s).block_prot).write(q.sig_caps.block_prot);
                addr_of_mut!((*s).t10dif_bg).write(q.sig_caps.t10dif_bg);
                addr_of_mut!((*s).crc_type).write(q.sig_caps.crc_type);
            }
            if q.comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD != 0 {
                let c = addr_of_mut!((*out).crypto_caps);
                addr_of_mut!((*c).failed_selftests).write(q.crypto_caps.failed_selftests);
                addr_of_mut!((*c).crypto_engines).write(q.crypto_caps.crypto_engines);
                addr_of_mut!((*c).wrapped_import_method).write(q.crypto_caps.wrapped_import_method);
                addr_of_mut!((*c).log_max_num_deks).write(q.crypto_caps.log_max_num_deks);
                addr_of_mut!((*c).flags).write(q.crypto_caps.flags);
            }
            if clock_part != 0 {
                addr_of_mut!((*out).max_clock_info_update_nsec).write(update_ns);
            }
            addr_of_mut!((*out).comp_mask).write(zero_parts | clock_part | q.comp_mask);
        }
        0
    }

    /// `_mlx5dv_init_obj`: the parts in the provider's order (QP, CQ, SRQ, RWQ, DM, AH, PD),
    /// stopping at the first failure. QPs and CQs report their rings, doorbell records and
    /// UAR in the program's memory, which the simulated device reads and writes.
    fn init_obj(&mut self, o: *mut mlx5dv_obj, obj_type: u64) -> c_int {
        if obj_type & (obj::QP | obj::CQ | obj::SRQ | obj::RWQ | obj::DM | obj::AH | obj::PD) == 0 {
            // No part this release knows: get_context_from_obj finds no context.
            return libc::EINVAL;
        }
        // SAFETY: the caller's struct; each requested member is read and written.
        let o = unsafe { &mut *o };
        if obj_type & obj::QP != 0 {
            let r = self.init_qp(o.qp.in_, o.qp.out);
            if r != 0 {
                return r;
            }
        }
        if obj_type & obj::CQ != 0 {
            let r = self.init_cq(o.cq.in_, o.cq.out);
            if r != 0 {
                return r;
            }
        }
        if obj_type & obj::SRQ != 0 {
            let r = self.init_srq(o.srq.in_, o.srq.out);
            if r != 0 {
                return r;
            }
        }
        // WQs cannot be created here, so none is the shim's.
        if obj_type & obj::RWQ != 0 {
            return libc::EINVAL;
        }
        if obj_type & obj::DM != 0 {
            let r = self.init_dm(o.dm.in_.cast(), o.dm.out);
            if r != 0 {
                return r;
            }
        }
        if obj_type & obj::AH != 0 {
            let r = self.init_ah(o.ah.in_, o.ah.out);
            if r != 0 {
                return r;
            }
        }
        if obj_type & obj::PD != 0 {
            let (pd, out) = (o.pd.in_, o.pd.out);
            let Ok(h) = self.pd(pd.cast()).map(|p| p.handle) else { return libc::EINVAL };
            if out.is_null() {
                return libc::EINVAL;
            }
            match self.sim.devx_pd_number(h) {
                // SAFETY: the caller's output struct.
                Ok(pdn) => unsafe { out.write(mlx5dv_pd { pdn, comp_mask: 0 }) },
                Err(e) => return code(&e),
            }
        }
        0
    }

    /// `mlx5dv_get_qp`: the queues, the doorbell record and the BlueFlame register.
    fn init_qp(&mut self, qp: *mut rdma_sys::ibv_qp, out: *mut mlx5dv_qp) -> c_int {
        let Ok((handle, ctx)) = self.qp(qp.cast()).map(|q| (q.qp, q.c.ex.qp_base.context)) else { return libc::EINVAL };
        if out.is_null() {
            return libc::EINVAL;
        }
        let m = match self.sim.simulator().qp_memory(&handle) {
            Ok(m) => m,
            Err(e) => return code(&e),
        };
        let Some(uar) = self.uar_page(ctx) else { return libc::ENOMEM };
        // SAFETY: the caller's struct; comp_mask is read first (an input).
        unsafe {
            let asked = (*out).comp_mask;
            let honoured = asked & (QP_MASK_UAR_MMAP_OFFSET | QP_MASK_RAW_QP_HANDLES | QP_MASK_RAW_QP_TIR_ADDR);
            (*out).dbrec = m.dbrec as *mut u32;
            (*out).sq.buf = m.sq_buf as *mut c_void;
            (*out).sq.wqe_cnt = m.sq_wqe_cnt;
            (*out).sq.stride = if m.sq_wqe_cnt > 0 { 64 } else { 1 };
            (*out).rq.buf = m.rq_buf as *mut c_void;
            (*out).rq.wqe_cnt = m.rq_wqe_cnt;
            (*out).rq.stride = if m.rq_wqe_cnt > 0 { m.rq_stride } else { 1 };
            // A BlueFlame register of its own (mlx5_get_qp_uar's dedicated bfreg): 256-byte
            // halves, which a program alternates between.
            (*out).bf.reg = uar.add(BF_OFFSET).cast();
            (*out).bf.size = BF_HALF;
            (*out).comp_mask = honoured;
            if honoured & QP_MASK_UAR_MMAP_OFFSET != 0 {
                (*out).uar_mmap_offset = 0;
            }
            if honoured & QP_MASK_RAW_QP_HANDLES != 0 {
                ((*out).tirn, (*out).tisn, (*out).rqn, (*out).sqn) = (0, 0, 0, 0);
            }
            if honoured & QP_MASK_RAW_QP_TIR_ADDR != 0 {
                (*out).tir_icm_addr = 0;
            }
        }
        0
    }

    /// `mlx5dv_get_srq`: the WQEs, the doorbell record, the stride, libmlx5's `head` and
    /// `tail`, and with `MLX5DV_SRQ_MASK_SRQN` the SRQ number.
    fn init_srq(&mut self, srq: *mut rdma_sys::ibv_srq, out: *mut mlx5_hw::sys::mlx5dv::mlx5dv_srq) -> c_int {
        let Ok(handle) = self.srq(srq.cast()).map(|s| s.srq) else { return libc::EINVAL };
        if out.is_null() {
            return libc::EINVAL;
        }
        let m = match self.sim.simulator().srq_memory(&handle) {
            Ok(m) => m,
            Err(e) => return code(&e),
        };
        // SAFETY: the caller's struct; comp_mask is read first (an input).
        unsafe {
            let srqn_asked = (*out).comp_mask & 1 != 0;
            (*out).buf = m.buf as *mut c_void;
            (*out).dbrec = m.dbrec as *mut u32;
            (*out).stride = m.stride;
            (*out).head = m.head;
            (*out).tail = m.tail;
            (*out).comp_mask = u64::from(srqn_asked);
            if srqn_asked {
                (*out).srqn = m.srqn;
            }
        }
        0
    }

    /// `mlx5dv_get_cq`: the ring, the doorbell record, the UAR page of the arm doorbell.
    fn init_cq(&mut self, cq: *mut rdma_sys::ibv_cq, out: *mut mlx5dv_cq) -> c_int {
        let Some((handle, ctx)) = self.cqs.get(&key(cq)).map(|c| (c.cq, c.c.context)) else { return libc::EINVAL };
        if out.is_null() {
            return libc::EINVAL;
        }
        let m = match self.sim.simulator().cq_memory(&handle) {
            Ok(m) => m,
            Err(e) => return code(&e),
        };
        let Some(uar) = self.uar_page(ctx) else { return libc::ENOMEM };
        // SAFETY: the caller's struct.
        unsafe {
            out.write(mlx5dv_cq {
                buf: m.buf as *mut c_void,
                dbrec: m.dbrec as *mut u32,
                cqe_cnt: m.cqe_cnt,
                cqe_size: m.cqe_size,
                cq_uar: uar.cast(),
                cqn: m.cqn,
                comp_mask: 0,
            })
        };
        0
    }

    /// `mlx5dv_get_av`: the address vector a UD WQE carries for this AH.
    fn init_ah(&mut self, ah: *mut rdma_sys::ibv_ah, out: *mut mlx5dv_ah) -> c_int {
        let Some(av) = self.avs.get_mut(&key(ah)) else { return libc::EINVAL };
        if out.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's struct; the AV lives as long as the AH.
        unsafe { out.write(mlx5dv_ah { av: &mut **av, comp_mask: 0 }) };
        0
    }

    /// The context's UAR page, made at the first `mlx5dv_init_obj` that hands it out: a
    /// doorbell a program stores there is noticed by the device through the queue's doorbell
    /// record, which every program writes first.
    fn uar_page(&mut self, ctx: *mut rdma_sys::ibv_context) -> Option<*mut u8> {
        let c = self.contexts.get_mut(&key(ctx))?;
        if c.uar.is_none() {
            c.uar = Some(Pages::new(4096)?);
        }
        c.uar.as_ref().map(|p| p.ptr())
    }

    /// The context handle behind a program's `ibv_context`; EINVAL for one the shim did not
    /// open.
    pub(crate) fn ctx_handle(&self, ctx: *const ibv_context) -> Result<mlx5_dv::ContextHandle, c_int> {
        self.context(ctx).map(|c| c.handle)
    }
}

/// `mlx5dv_query_device`: EOPNOTSUPP on a VFIO context, as the VFIO provider has no entry.
/// Parts newer than rdma-core 44's `struct mlx5dv_context` (MAX_DC_RD_ATOM, REG_C0,
/// OOO_RECV_WRS) are never echoed, so their fields, past the 44 layout, are never written.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_query_device(ctx_in: *mut ibv_context, attrs_out: *mut mlx5dv_context) -> c_int {
    if attrs_out.is_null() {
        return libc::EINVAL;
    }
    with(|e| e, |s| s.dv_query_device(ctx_in, attrs_out))
}

/// `mlx5dv_init_obj` (MLX5_1.2): a QP's rings, doorbell record and BlueFlame register, a
/// CQ's ring, doorbell record and UAR page, an AH's address vector, a PD's number; SRQs and
/// RWQs do not exist, so asking for one is EOPNOTSUPP.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_init_obj(obj: *mut mlx5dv_obj, obj_type: u64) -> c_int {
    if obj.is_null() {
        return libc::EINVAL;
    }
    with(|e| e, |s| s.init_obj(obj, obj_type))
}

/// `mlx5dv_qp_cancel_posted_send_wrs`: the number of WRs turned into NOPs, or the errno (a
/// positive value too, as in C) when the QP is not in SQD or unknown.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_qp_cancel_posted_send_wrs(dv_qp: *mut mlx5dv_qp_ex, wr_id: u64) -> c_int {
    // The mlx5dv_qp_ex sits after the ibv_qp_ex in QpC; the QP's key is QpC's address.
    let qp = (dv_qp as usize).wrapping_sub(std::mem::offset_of!(QpC, dv));
    with(
        |e| e,
        |s| {
            let Some(q) = s.qps.get(&qp) else { return libc::EINVAL };
            let h = q.qp;
            let r = s.sim.cancel_posted_send_wrs(&h, wr_id);
            s.notify();
            match r {
                Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_modify_qp_udp_sport`: 0, or the errno (EOPNOTSUPP for a QP that is not an RC or
/// UC one in RTS).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_modify_qp_udp_sport(qp: *mut ibv_qp, udp_sport: u16) -> c_int {
    with(
        |e| e,
        |s| {
            let Some(q) = s.qps.get(&key(qp)) else { return libc::EINVAL };
            let h = q.qp;
            match s.sim.modify_qp_udp_sport(&h, udp_sport) {
                Ok(()) => 0,
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_dci_stream_id_reset`: 0, or the errno (EOPNOTSUPP on a device without errored
/// streams or for a QP not in RTS, EINVAL for one that is not a DCI or a stream not in error).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dci_stream_id_reset(qp: *mut ibv_qp, stream_id: u16) -> c_int {
    with(
        |e| e,
        |s| {
            let Some(q) = s.qps.get(&key(qp)) else { return libc::EINVAL };
            let h = q.qp;
            match s.sim.dci_stream_id_reset(&h, stream_id) {
                Ok(()) => 0,
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_map_ah_to_qp`: 0, or EOPNOTSUPP (a device without AV_QP_MAPPING objects, an AH
/// without a GRH); EINVAL for an AH the shim did not make. libmlx5 makes the mapping once
/// per AH; later calls for the same AH succeed without a command.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_map_ah_to_qp(ah: *mut ibv_ah, qp_num: u32) -> c_int {
    with(
        |e| e,
        |s| {
            let Some(dest) = s.ud_dest(ah, 0, 0) else { return libc::EINVAL };
            // SAFETY: an AH the shim made (ud_dest found it) names its live context.
            let ctx = unsafe { (*ah).context };
            let Ok(h) = s.ctx_handle(ctx) else { return libc::EINVAL };
            match s.sim.map_ah_to_qp(h, &dest, qp_num) {
                Ok(()) => 0,
                Err(e) => code(&e),
            }
        },
    )
}

/// Register a dma-buf MR through the simulator. Its dma-buf exporter knows only its own
/// exports, which a program cannot reach through the C API, so a program's fd is EBADF (as
/// `dma_buf_get` answers for an fd that is no dma-buf). Should the simulator ever accept one,
/// the MR is released again and the call is EOPNOTSUPP: `ibv_dereg_mr` keeps the table of
/// host-memory MRs only.
fn reg_dmabuf(
    pd: *mut ibv_pd,
    (offset, length, iova): (u64, usize, u64),
    fd: c_int,
    access: c_int,
    mlx5_access: Option<c_int>,
) -> *mut ibv_mr {
    with(null, |s| {
        let Ok(h) = s.pd(pd).map(|p| p.handle) else { return null(libc::EINVAL) };
        let Ok(len) = u64::try_from(length) else { return null(libc::EINVAL) };
        let acc = AccessFlags::from_bits_retain(access as u32);
        let r = match mlx5_access {
            None => s.sim.reg_dmabuf_mr(h, offset, len, iova, fd, acc),
            Some(m) => s.sim.dv_reg_dmabuf_mr(h, offset, len, iova, fd, acc, m as u32),
        };
        match r {
            Ok(mr) => {
                let _ = s.sim.dereg_mr(&mr);
                null(libc::EOPNOTSUPP)
            }
            Err(e) => null(code(&e)),
        }
    })
}

/// `ibv_reg_dmabuf_mr`: see [`reg_dmabuf`] for what the simulator accepts.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_dmabuf_mr(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut ibv_mr {
    reg_dmabuf(pd, (offset, length, iova), fd, access, None)
}

/// `mlx5dv_reg_dmabuf_mr` (rdma-core 55): as `ibv_reg_dmabuf_mr` plus `mlx5_access`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_reg_dmabuf_mr(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
    mlx5_access: c_int,
) -> *mut ibv_mr {
    reg_dmabuf(pd, (offset, length, iova), fd, access, Some(mlx5_access))
}

/// `mlx5dv_get_data_direct_sysfs_path`: the path without `/sys/`, NUL-terminated; ENODEV
/// without a data-direct device, ENOSPC when `buf_len` cannot hold it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_get_data_direct_sysfs_path(
    context: *mut ibv_context,
    buf: *mut c_char,
    buf_len: usize,
) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(h) = s.ctx_handle(context) else { return libc::EINVAL };
            let path = match s.sim.get_data_direct_sysfs_path(h, buf_len) {
                Ok(p) => p,
                Err(e) => return code(&e),
            };
            // The trait checked the room; checked again so a short buffer is never overrun.
            if buf.is_null() || path.len() >= buf_len {
                return libc::ENOSPC;
            }
            // SAFETY: the caller's buffer of buf_len bytes; len + 1 <= buf_len.
            unsafe {
                ptr::copy_nonoverlapping(path.as_ptr().cast::<c_char>(), buf, path.len());
                *buf.add(path.len()) = 0;
            }
            0
        },
    )
}

/// `MLX5DV_VFIO_CTX_FLAGS_INIT_LINK_DOWN`, the one known VFIO context flag.
const VFIO_CTX_FLAGS_INIT_LINK_DOWN: u32 = 1 << 0;

/// `mlx5dv_get_vfio_device_list`: a NULL-terminated list (from calloc, for
/// `ibv_free_device_list`) holding the VFIO function named `attr->pci_name`. EOPNOTSUPP for
/// unknown flags or comp_mask bits, ENODEV when the host has no such function (unverified:
/// the real provider passes on the errno of its IOMMU-group lookup).
///
/// Opening the device is not wired yet: `ibv_open_device` and `mlx5dv_open_device` look the
/// device up among the kernel devices only, so they answer ENODEV for it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_get_vfio_device_list(attr: *mut mlx5dv_vfio_context_attr) -> *mut *mut ibv_device {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &*attr };
    if a.comp_mask != 0 || a.flags & !VFIO_CTX_FLAGS_INIT_LINK_DOWN != 0 {
        return null(libc::EOPNOTSUPP);
    }
    if a.pci_name.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's NUL-terminated PCI name.
    let Ok(name) = unsafe { CStr::from_ptr(a.pci_name) }.to_str().map(str::to_string) else {
        return null(libc::ENODEV);
    };
    with(null, |s| {
        let listed = match s.sim.device_list() {
            Ok(l) => l,
            Err(e) => return null(code(&e)),
        };
        if !listed.iter().any(|d| d.kind == mlx5_dv::DeviceKind::Mlx5Vfio && d.name == name) {
            return null(libc::ENODEV);
        }
        let dev = s.dv.vfio_devices.entry(name.clone()).or_insert_with(|| vfio_device(&name));
        let dev: *mut ibv_device = &mut **dev;
        // SAFETY: a fresh allocation of two pointers, zeroed (the second stays NULL).
        let list = unsafe { libc::calloc(2, std::mem::size_of::<*mut ibv_device>()) } as *mut *mut ibv_device;
        if list.is_null() {
            return null(libc::ENOMEM);
        }
        // SAFETY: two entries allocated above.
        unsafe { *list = dev };
        list
    })
}

/// The `ibv_device` of a VFIO function: named by its PCI address, with no kernel paths.
fn vfio_device(name: &str) -> Box<ibv_device> {
    // SAFETY: ibv_device is plain data; all-zero is a valid value.
    let mut c: Box<ibv_device> = Box::new(unsafe { std::mem::zeroed() });
    c.node_type = ibv_node_type::IBV_NODE_CA;
    c.transport_type = ibv_transport_type::IBV_TRANSPORT_IB;
    let room = c.name.len().saturating_sub(1);
    for (d, b) in c.name.iter_mut().zip(name.bytes().take(room)) {
        *d = b as c_char;
    }
    c
}

/// `_mlx5dv_query_port` (the header's `mlx5dv_query_port`): EINVAL for a port the device does
/// not have; otherwise `info_len` zero bytes. The kernel fills the vport fields only when the
/// e-switch is in switchdev (offloads) mode and copies a zeroed `struct mlx5_ib_uapi_query_port`
/// otherwise (flags 0: no field valid); the simulated NIC is a NIC in legacy mode.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _mlx5dv_query_port(
    context: *mut ibv_context,
    port_num: u32,
    info: *mut c_void,
    info_len: usize,
) -> c_int {
    let Ok(port) = u8::try_from(port_num) else { return libc::EINVAL };
    with(
        |e| e,
        |s| {
            if let Err(e) = s.port(context, port) {
                return e;
            }
            if info.is_null() && info_len > 0 {
                return libc::EFAULT;
            }
            if info_len > 0 {
                // SAFETY: the caller's struct of info_len bytes.
                unsafe { ptr::write_bytes(info.cast::<u8>(), 0, info_len) };
            }
            0
        },
    )
}
