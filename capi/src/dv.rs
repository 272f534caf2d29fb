//! The mlx5dv calls around a context: `mlx5dv_query_device`, `mlx5dv_init_obj`,
//! `mlx5dv_qp_cancel_posted_send_wrs`, the dma-buf MRs and the data-direct path, and the VFIO
//! device list. The objects of the crypto and DEVX calls ([`crate::dv_crypto`],
//! [`crate::dv_devx`]) are kept in [`DvObjects`].

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr::{self, addr_of_mut};

use mlx5_dv::AccessFlags;
use mlx5_hw::sys::mlx5dv::{mlx5dv_context, mlx5dv_obj, mlx5dv_pd, mlx5dv_qp_ex, mlx5dv_vfio_context_attr};
use rdma_sys::*;

use crate::dv_crypto::{Dek, Login};
use crate::dv_devx::{DevxObject, Eq, Msi, Uar, Umem};
use crate::errno::{code, null};
use crate::qpx::QpC;
use crate::state::{Shim, with};

/// The mlx5dv objects of the crypto and DEVX calls, each keyed by the address of the C object
/// the program holds.
#[derive(Default)]
pub(crate) struct DvObjects {
    pub(crate) logins: BTreeMap<usize, Login>,
    pub(crate) deks: BTreeMap<usize, Dek>,
    pub(crate) devx_objs: BTreeMap<usize, DevxObject>,
    pub(crate) uars: BTreeMap<usize, Uar>,
    pub(crate) umems: BTreeMap<usize, Umem>,
    pub(crate) msis: BTreeMap<usize, Msi>,
    pub(crate) eqs: BTreeMap<usize, Eq>,
    /// The VFIO functions `mlx5dv_get_vfio_device_list` handed out, by PCI name; each
    /// `ibv_device` stays at its address for the process's life, as the real provider's do
    /// until the list is freed.
    pub(crate) vfio_devices: BTreeMap<String, Box<ibv_device>>,
}

/// `MLX5DV_CONTEXT_FLAGS_*` a ConnectX-6 Dx class device reports through a current mlx5_ib:
/// CQE_V1 (cqe_version 1), ENHANCED_MPW, CQE_128B_COMP and CQE_128B_PAD.
///
/// Unverified: the profiles hold no vendor-cap flags, so these are the documented meanings
/// of the kernel's answer for a ConnectX-5 or later, not a capture.
const CONTEXT_FLAGS: u64 = 1 << 0 | 1 << 3 | 1 << 4 | 1 << 5;

/// The `mlx5dv_context.comp_mask` parts `_mlx5dv_query_device` fills whenever they are asked
/// for: CQE_COMPRESION, SWP, STRIDING_RQ, TUNNEL_OFFLOADS, DYN_BFREGS, FLOW_ACTION_FLAGS,
/// DC_ODP_CAPS, DCI_STREAMS and WR_MEMCPY_LENGTH. The simulator models none of those features,
/// so their caps read as zero, as on a device without them. CLOCK_INFO_UPDATE,
/// HCA_CORE_CLOCK and NUM_LAG_PORTS are echoed by the provider only when the device has a
/// clock page, a mapped core clock or LAG ports, which the simulated one has not.
const ZERO_CAPS_MASK: u64 = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 4 | 1 << 6 | 1 << 7 | 1 << 11 | 1 << 12;

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
        // SAFETY: the caller's struct, written field by field through raw pointers.
        unsafe {
            addr_of_mut!((*out).version).write(0);
            addr_of_mut!((*out).flags).write(CONTEXT_FLAGS);
            if zero_parts & 1 << 0 != 0 {
                ptr::write_bytes(addr_of_mut!((*out).cqe_comp_caps), 0, 1);
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
            if zero_parts & 1 << 7 != 0 {
                addr_of_mut!((*out).dc_odp_caps).write(0);
            }
            if zero_parts & 1 << 11 != 0 {
                ptr::write_bytes(addr_of_mut!((*out).dci_streams_caps), 0, 1);
            }
            if zero_parts & 1 << 12 != 0 {
                // No MEMCPY send op is simulated: a zero length, as without DMA-MMO.
                addr_of_mut!((*out).max_wr_memcpy_length).write(0);
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
            addr_of_mut!((*out).comp_mask).write(zero_parts | q.comp_mask);
        }
        0
    }

    /// `_mlx5dv_init_obj`: the parts in the provider's order, stopping at the first failure.
    fn init_obj(&mut self, o: *mut mlx5dv_obj, obj_type: u64) -> c_int {
        // The rings, doorbell records and UAR of QPs, CQs, SRQs and WQs, device memory and
        // address vectors live inside the simulator, which exposes no host pointers to them.
        for part in [obj::QP, obj::CQ, obj::SRQ, obj::RWQ, obj::DM, obj::AH] {
            if obj_type & part != 0 {
                return libc::EOPNOTSUPP;
            }
        }
        if obj_type & obj::PD == 0 {
            // No part this release knows: get_context_from_obj finds no context.
            return libc::EINVAL;
        }
        // SAFETY: the caller's struct; its PD member is read.
        let (pd, out) = unsafe { ((*o).pd.in_, (*o).pd.out) };
        let Ok(h) = self.pd(pd.cast()).map(|p| p.handle) else { return libc::EINVAL };
        if out.is_null() {
            return libc::EINVAL;
        }
        match self.sim.devx_pd_number(h) {
            Ok(pdn) => {
                // SAFETY: the caller's output struct.
                unsafe { out.write(mlx5dv_pd { pdn, comp_mask: 0 }) };
                0
            }
            Err(e) => code(&e),
        }
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

/// `mlx5dv_init_obj` (MLX5_1.2): MLX5DV_OBJ_PD gives the PD number; the other objects'
/// buffers are not exposed by the simulator, so asking for one is EOPNOTSUPP.
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
