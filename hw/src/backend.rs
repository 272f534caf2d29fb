//! [`HwBackend`]: the trait over libibverbs and libmlx5.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString, c_char, c_int};
use std::ptr;
use std::sync::Arc;

use mlx5_dv::errno::{EINVAL, ENODEV, EOPNOTSUPP};
use mlx5_dv::prm::{self, cmd_hca_cap as c, opcode, query_hca_cap as q};
use mlx5_dv::{
    Backend, BackendId, BackendInfo, ContextAttr, ContextHandle, Contexts, CryptoCaps, DeviceDesc, DeviceKind,
    DvContext, Error, Memory, Mkey, MkeyErr, MkeyErrType, MkeyInitAttr, Mkeys, Op, PdHandle, Result, SigCaps, SigErr,
};
use rdma_sys::{
    ibv_alloc_pd, ibv_close_device, ibv_context, ibv_dealloc_pd, ibv_dereg_mr, ibv_destroy_cq, ibv_destroy_qp,
    ibv_device, ibv_device_attr, ibv_free_device_list, ibv_get_device_list, ibv_get_device_name, ibv_open_device,
    ibv_query_device,
};

use crate::call::{c_call, last_errno, make_async_fd_nonblocking, missing};
use crate::objects::{HwCtx, HwMkey, HwPd, Obj, Objects, unused};
use crate::sys::mlx5dv::*;
use crate::{Mlx5Lib, Unavailable, inline};

/// Which device the backend drives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HwConfig {
    /// The mlx5 device to use (`mlx5_0`); the first mlx5 device if `None`.
    pub device: Option<String>,
    /// The PCI name of an mlx5 function bound to vfio-pci, if VFIO cases should run.
    pub vfio_pci_name: Option<String>,
}

struct DeviceEntry {
    desc: DeviceDesc,
    ptr: *mut ibv_device,
}

/// The real rdma-core stack behind the [`Backend`] trait.
pub struct HwBackend {
    lib: Arc<Mlx5Lib>,
    dev_list: *mut *mut ibv_device,
    vfio_list: *mut *mut ibv_device,
    devices: Vec<DeviceEntry>,
    list_error: Option<i32>,
    facts: BTreeMap<String, String>,
    caps: mlx5_dv::Caps,
    pub(crate) objs: Objects,
    /// `mlx5dv_dr` objects (`steering.rs`).
    pub(crate) dr: crate::dr_lib::HwDr,
}

unsafe extern "C" {
    /// libibverbs' reader of a device's sysfs attribute (exported since IBVERBS_1.0, not in
    /// the public headers' bindings).
    fn ibv_read_sysfs_file(dir: *const c_char, file: *const c_char, buf: *mut c_char, size: usize) -> c_int;
}

/// A sysfs attribute of `dev` read the way rdma-core's tools read it: through libibverbs, at
/// the device's `ibdev_path`.
fn read_sysfs(dev: *mut ibv_device, file: &str) -> Option<String> {
    let file = CString::new(file).ok()?;
    let mut buf = [0 as c_char; 256];
    // SAFETY: dev is a device of the live list; ibdev_path is NUL-terminated; buf holds 256.
    let n = unsafe { ibv_read_sysfs_file((*dev).ibdev_path.as_ptr(), file.as_ptr(), buf.as_mut_ptr(), buf.len()) };
    if n <= 0 {
        return None;
    }
    // SAFETY: a successful read leaves a NUL-terminated string in buf.
    let s = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().trim().to_string();
    (!s.is_empty()).then_some(s)
}

impl HwBackend {
    /// Load libmlx5, list the devices, and describe the chosen one.
    ///
    /// Fails only when the stack itself is missing (no libmlx5); a host without an mlx5 device
    /// gives a backend whose device list has none, which the harness reports as a skip.
    pub fn open(config: HwConfig) -> std::result::Result<Self, Unavailable> {
        let lib = Arc::new(Mlx5Lib::load()?);
        let mut b = HwBackend {
            lib,
            dev_list: ptr::null_mut(),
            vfio_list: ptr::null_mut(),
            devices: Vec::new(),
            list_error: None,
            facts: BTreeMap::new(),
            caps: mlx5_dv::Caps::default(),
            objs: Objects::new(BackendId::fresh()),
            dr: Default::default(),
        };
        b.list_devices(&config);
        b.facts = b.describe();
        b.caps = b.probe_caps();
        // The probes closed what they opened: number the caller's objects from 1, as the
        // simulator does, so that a trace's handles mean the same on both.
        if b.objs.contexts.is_empty() && b.objs.bufs.is_empty() {
            b.objs = Objects::new(BackendId::fresh());
        }
        Ok(b)
    }

    /// What the libraries offer, the first mlx5 device's caps as `ibv_open_device` and
    /// `mlx5dv_query_device` report them, and the kernel's features as probes find them (a
    /// DEVX open, an `UPDATE_TAG` mkey, a `SIG_PIPELINING` QP): user space cannot read them.
    fn probe_caps(&mut self) -> mlx5_dv::Caps {
        let mut caps = mlx5_dv::Caps::default();
        caps.library.rdma_core = Some(self.lib.rdma_core_version().to_string());
        for (name, present) in [
            ("mlx5dv_reg_dmabuf_mr", self.lib.reg_dmabuf_mr.is_present()),
            ("mlx5dv_get_data_direct_sysfs_path", self.lib.get_data_direct_sysfs_path.is_present()),
        ] {
            caps.library.optional_symbols.insert(name.to_string(), present);
        }
        let first = self.devices.iter().find(|d| d.desc.kind == DeviceKind::Mlx5).map(|d| d.desc.name.clone());
        if let Some(dev) = first
            && let Ok(ctx) = self.open_ibv_device(&dev)
        {
            let mask = mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD;
            if let Ok(q) = self.query_device(ctx, mask) {
                caps.device.sig = q.sig_caps;
                caps.device.crypto = q.crypto_caps;
            }
            if let Ok(ptr) = self.ctx_ptr(ctx, Op::Backend) {
                // SAFETY: plain data; zero is the C default.
                let mut attr: ibv_device_attr = unsafe { std::mem::zeroed() };
                // SAFETY: ptr is an open context; attr is valid for writes.
                if unsafe { ibv_query_device(ptr, &mut attr) } == 0 {
                    caps.device.max_qp_wr = u32::try_from(attr.max_qp_wr).ok();
                    caps.device.max_srq_wr = u32::try_from(attr.max_srq_wr).ok();
                    // mlx5 reports max_cqe as (1 << log_max_cq_sz) - 1.
                    let entries = u64::try_from(attr.max_cqe).ok().and_then(|n| n.checked_add(1));
                    caps.device.log_max_cq_sz =
                        entries.filter(|n| n.is_power_of_two()).map(|n| n.trailing_zeros() as u8);
                }
                // SAFETY: ptr is an open context.
                if let Some((dm, odp)) = unsafe { self.hw_device_attr_ex(ptr) } {
                    caps.device.max_dm_size = Some(dm);
                    caps.device.odp = Some(odp);
                }
            }
            let _ = self.close_device(ctx);
            caps.kernel = mlx5_dv::probe::kernel_facts(self, &dev);
            // DEK and CRYPTO_LOGIN support gate the crypto cases; only DEVX can read it.
            caps.device.general_obj_types = general_obj_types(self, &dev);
            caps.device.dma_mmo = mlx5_dv::probe::dma_mmo(self, &dev);
            caps.device.ooo_dp = mlx5_dv::probe::ooo_dp(self, &dev);
            caps.device.raw_packet = mlx5_dv::probe::raw_packet(self, &dev);
        }
        caps
    }

    /// The loaded libmlx5.
    pub fn lib(&self) -> &Mlx5Lib {
        &self.lib
    }

    fn list_devices(&mut self, config: &HwConfig) {
        let mut n: c_int = 0;
        // SAFETY: ibv_get_device_list returns NULL or an array of n devices, freed in Drop.
        self.dev_list = unsafe { ibv_get_device_list(&mut n) };
        if self.dev_list.is_null() {
            self.list_error = Some(last_errno());
        } else {
            for i in 0..usize::try_from(n).unwrap_or(0) {
                // SAFETY: i < n entries of the list returned above.
                let dev = unsafe { *self.dev_list.add(i) };
                // SAFETY: dev is a device of the list; its name is a NUL-terminated string.
                let name = unsafe { CStr::from_ptr(ibv_get_device_name(dev)) }.to_string_lossy().into_owned();
                let is_mlx5 = match &self.lib.dv.mlx5dv_is_supported {
                    // SAFETY: dev is a live device of the list.
                    Ok(f) => unsafe { f(dev) },
                    Err(_) => false,
                };
                let kind = if is_mlx5 { DeviceKind::Mlx5 } else { DeviceKind::Other };
                if kind == DeviceKind::Mlx5 && config.device.as_ref().is_some_and(|d| *d != name) {
                    continue;
                }
                self.devices.push(DeviceEntry { desc: DeviceDesc { name, kind }, ptr: dev });
            }
        }
        if let (Some(pci), Ok(f)) = (&config.vfio_pci_name, &self.lib.dv.mlx5dv_get_vfio_device_list)
            && let Ok(pci_c) = CString::new(pci.as_str())
        {
            let mut attr = mlx5dv_vfio_context_attr { pci_name: pci_c.as_ptr(), flags: 0, comp_mask: 0 };
            // SAFETY: attr is valid for the call; the list is freed in Drop.
            self.vfio_list = unsafe { f(&mut attr) };
            if !self.vfio_list.is_null() {
                // SAFETY: a non-NULL list from mlx5dv_get_vfio_device_list has at least one entry.
                let dev = unsafe { *self.vfio_list };
                if !dev.is_null() {
                    self.devices.push(DeviceEntry {
                        desc: DeviceDesc { name: pci.clone(), kind: DeviceKind::Mlx5Vfio },
                        ptr: dev,
                    });
                }
            }
        }
    }

    /// Device name, firmware, board, GUID and software versions of the chosen mlx5 device.
    fn describe(&mut self) -> BTreeMap<String, String> {
        let mut facts = BTreeMap::new();
        facts.insert("rdma_core".to_string(), self.lib.rdma_core_version().to_string());
        if let Ok(k) = std::fs::read_to_string("/proc/sys/kernel/osrelease") {
            facts.insert("kernel".to_string(), k.trim().to_string());
        }
        let Some(dev) = self.devices.iter().find(|d| d.desc.kind == DeviceKind::Mlx5) else {
            return facts;
        };
        let name = dev.desc.name.clone();
        facts.insert("device".to_string(), name.clone());
        if let Some(b) = read_sysfs(dev.ptr, "board_id") {
            facts.insert("board_id".to_string(), b);
        }
        // SAFETY: dev.ptr is a device of the live list.
        let ctx = unsafe { ibv_open_device(dev.ptr) };
        if ctx.is_null() {
            return facts;
        }
        // SAFETY: ibv_device_attr is plain data; zero is a valid value.
        let mut attr: ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; attr is valid for writes.
        if unsafe { ibv_query_device(ctx, &mut attr) } == 0 {
            // SAFETY: fw_ver is a NUL-terminated array filled by the provider.
            let fw = unsafe { CStr::from_ptr(attr.fw_ver.as_ptr()) }.to_string_lossy().into_owned();
            facts.insert("fw_ver".to_string(), fw);
            facts.insert("vendor_part_id".to_string(), attr.vendor_part_id.to_string());
            facts.insert("node_guid".to_string(), format!("{:016x}", u64::from_be(attr.node_guid)));
        }
        // SAFETY: ctx was opened above and holds no objects.
        unsafe { ibv_close_device(ctx) };
        facts
    }

    pub(crate) fn ctx_ptr(&self, h: ContextHandle, op: Op) -> Result<*mut ibv_context> {
        Ok(self.objs.contexts.get(h, op)?.ptr)
    }

    fn device(&self, name: &str, op: Op) -> Result<&DeviceEntry> {
        self.devices
            .iter()
            .find(|d| d.desc.name == name)
            .ok_or_else(|| Error::new(op, ENODEV, format!("no device named {name}")))
    }

    fn add_context(&mut self, ptr: *mut ibv_context, op: Op) -> Result<ContextHandle> {
        make_async_fd_nonblocking(ptr);
        self.objs.contexts.insert(op, HwCtx { ptr }).inspect_err(|_| {
            // SAFETY: the context was just opened and holds no objects.
            unsafe { ibv_close_device(ptr) };
        })
    }

    /// Destroy what is open on `ctx`, users before what they use; the context stays open.
    fn release_objects_of(&mut self, ctx: ContextHandle) {
        let op = Op::CloseDevice;
        for obj in self.objs.teardown_order(ctx) {
            match obj {
                Obj::Qp(h) => {
                    if let Ok(q) = self.objs.take_qp(h, op) {
                        // SAFETY: the QP is live and removed from the table before it is destroyed.
                        unsafe { ibv_destroy_qp(q.ptr) };
                    }
                }
                Obj::Srq(h) => {
                    if let Ok(s) = self.objs.take_srq(h, op) {
                        // SAFETY: the SRQ is live, its QPs are gone, and it is out of the table.
                        unsafe { rdma_sys::ibv_destroy_srq(s.ptr) };
                    }
                }
                Obj::Mr(h) => {
                    if let Ok(m) = self.objs.take_mr(h, op) {
                        // SAFETY: the MR is live and removed from the table before it is deregistered.
                        unsafe { ibv_dereg_mr(m.ptr) };
                    }
                }
                Obj::Cq(h) => {
                    if let Ok(c) = self.objs.cqs.take(h, op) {
                        // SAFETY: the CQ is live and its QPs are gone.
                        unsafe { ibv_destroy_cq(c.ptr) };
                    }
                }
                Obj::Mkey(h) => {
                    if let (Ok(m), Ok(f)) = (self.objs.take_mkey(h, op), &self.lib.dv.mlx5dv_destroy_mkey) {
                        // SAFETY: the mkey is live and removed from the table before it is destroyed.
                        unsafe { f(m.ptr) };
                    }
                }
                Obj::Dek(h) => {
                    if let (Ok(d), Ok(f)) = (self.objs.deks.take(h, op), &self.lib.dv.mlx5dv_dek_destroy) {
                        // SAFETY: the DEK is live and removed from the table before it is destroyed.
                        unsafe { f(d.ptr) };
                    }
                }
                Obj::Login(h) => {
                    if let (Ok(l), Ok(f)) = (self.objs.logins.take(h, op), &self.lib.dv.mlx5dv_crypto_login_destroy) {
                        // SAFETY: the login object is live and removed from the table first.
                        unsafe { f(l.ptr) };
                    }
                }
                Obj::Pd(h) => {
                    if let Ok(p) = self.objs.pds.take(h, op) {
                        // SAFETY: the PD is live and its mkeys, MRs and QPs are gone.
                        unsafe { ibv_dealloc_pd(p.ptr) };
                    }
                }
                Obj::Devx(_) | Obj::Umem(_) | Obj::Eq(_) | Obj::Uar(_) | Obj::Msi(_) => self.release_devx(obj),
            }
        }
    }
}

impl Drop for HwBackend {
    fn drop(&mut self) {
        let ctxs = self.objs.contexts.handles_where(|_| true);
        for ctx in ctxs {
            self.release_objects_of(ctx);
            if let Ok(c) = self.objs.contexts.take(ctx, Op::CloseDevice) {
                // SAFETY: the context is live and its objects were released above.
                unsafe { ibv_close_device(c.ptr) };
            }
        }
        self.free_all_bufs();
        if !self.dev_list.is_null() {
            // SAFETY: the list came from ibv_get_device_list and every context on it is closed.
            unsafe { ibv_free_device_list(self.dev_list) };
        }
        if !self.vfio_list.is_null() {
            // SAFETY: mlx5dv_get_vfio_device_list lists are freed with ibv_free_device_list.
            unsafe { ibv_free_device_list(self.vfio_list) };
        }
    }
}

impl Contexts for HwBackend {
    fn device_list(&mut self) -> Result<Vec<DeviceDesc>> {
        match self.list_error {
            // ENOSYS: no uverbs in the kernel; the harness reports the reason as a skip.
            Some(e) if self.devices.is_empty() => Err(Error::new(
                Op::GetDeviceList,
                e,
                format!("no mlx5 device found (ibv_get_device_list: {})", std::io::Error::from_raw_os_error(e)),
            )),
            _ => Ok(self.devices.iter().map(|d| d.desc.clone()).collect()),
        }
    }

    fn open_device(&mut self, device: &str, attr: Option<&ContextAttr>) -> Result<ContextHandle> {
        let op = Op::OpenDevice;
        let dev = self.device(device, op)?.ptr;
        let f = self.lib.dv.mlx5dv_open_device.as_ref().map_err(|_| missing(op, "mlx5dv_open_device"))?;
        let mut c_attr = attr.map(|a| mlx5dv_context_attr { flags: a.flags.bits(), comp_mask: a.comp_mask });
        let p = c_attr.as_mut().map_or(ptr::null_mut(), |a| a as *mut _);
        // SAFETY: dev is a device of the live list; the attr outlives the call.
        let ctx = unsafe { f(dev, p) };
        if ctx.is_null() {
            return Err(Error::new(op, last_errno(), format!("mlx5dv_open_device({device}) failed")));
        }
        self.add_context(ctx, op)
    }

    fn open_ibv_device(&mut self, device: &str) -> Result<ContextHandle> {
        let op = Op::IbvOpenDevice;
        let dev = self.device(device, op)?.ptr;
        // SAFETY: dev is a device of the live list.
        let ctx = unsafe { ibv_open_device(dev) };
        if ctx.is_null() {
            return Err(Error::new(op, last_errno(), format!("ibv_open_device({device}) failed")));
        }
        self.add_context(ctx, op)
    }

    fn close_device(&mut self, ctx: ContextHandle) -> Result<()> {
        let op = Op::CloseDevice;
        let ptr = self.ctx_ptr(ctx, op)?;
        self.release_objects_of(ctx);
        self.objs.contexts.take(ctx, op)?;
        // SAFETY: the context is live and its objects were released.
        c_call(op, unsafe { ibv_close_device(ptr) }, "ibv_close_device")
    }

    fn query_device(&mut self, ctx: ContextHandle, comp_mask: u64) -> Result<DvContext> {
        let op = Op::QueryDevice;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = self.lib.dv.mlx5dv_query_device.as_ref().map_err(|_| missing(op, "mlx5dv_query_device"))?;
        // Only the parts this API models are requested, so the provider never writes fields
        // past the rdma-core 44 layout of the struct.
        let modelled = mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD
            | mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD
            | mlx5_dv::MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH
            | mlx5_dv::MLX5DV_CONTEXT_MASK_CQE_COMPRESION
            | mlx5_dv::MLX5DV_CONTEXT_MASK_DCI_STREAMS
            | mlx5_dv::MLX5DV_CONTEXT_MASK_DC_ODP_CAPS;
        let mut out = mlx5dv_context { comp_mask: comp_mask & modelled, ..Default::default() };
        // SAFETY: ptr is an open context; out is valid for writes.
        let rc = unsafe { f(ptr, &mut out) };
        c_call(op, rc, "mlx5dv_query_device")?;
        let s = out.sig_caps;
        let c = out.crypto_caps;
        Ok(DvContext {
            comp_mask: out.comp_mask,
            sig_caps: SigCaps {
                block_size: s.block_size,
                block_prot: s.block_prot,
                t10dif_bg: s.t10dif_bg,
                crc_type: s.crc_type,
            },
            crypto_caps: CryptoCaps {
                failed_selftests: c.failed_selftests,
                crypto_engines: c.crypto_engines,
                wrapped_import_method: c.wrapped_import_method,
                log_max_num_deks: c.log_max_num_deks,
                flags: c.flags,
            },
            max_wr_memcpy_length: out.max_wr_memcpy_length as u64,
            flags: out.flags,
            cqe_comp_caps: mlx5_dv::CqeCompCaps {
                max_num: out.cqe_comp_caps.max_num,
                supported_format: out.cqe_comp_caps.supported_format,
            },
            dci_streams_caps: mlx5_dv::DciStreamsCaps {
                max_log_num_concurent: out.dci_streams_caps.max_log_num_concurent,
                max_log_num_errored: out.dci_streams_caps.max_log_num_errored,
            },
            dc_odp_caps: out.dc_odp_caps,
        })
    }

    fn query_port(&mut self, ctx: ContextHandle, port_num: u8) -> Result<mlx5_dv::PortAttr> {
        let op = Op::QueryPort;
        let ptr = self.ctx_ptr(ctx, op)?;
        // SAFETY: plain data; zero is the C default.
        let mut port: rdma_sys::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ptr is an open context; port is valid for writes (ibv_query_port is a macro
        // over the compat entry point, which takes the old, smaller struct).
        c_call(
            op,
            unsafe { rdma_sys::ibv_query_port(ptr, port_num, &mut port as *mut _ as *mut _) },
            "ibv_query_port",
        )?;
        // SAFETY: plain data.
        let mut gid: rdma_sys::ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: ptr is an open context; gid is valid for writes.
        c_call(op, unsafe { rdma_sys::ibv_query_gid(ptr, port_num, 0, &mut gid) }, "ibv_query_gid")?;
        Ok(mlx5_dv::PortAttr {
            state: port.state,
            active_mtu: port.active_mtu,
            lid: port.lid,
            link_layer: port.link_layer,
            // SAFETY: every bit pattern of the union is a valid byte array.
            gid: mlx5_dv::Gid(unsafe { gid.raw }),
        })
    }

    fn alloc_pd(&mut self, ctx: ContextHandle) -> Result<PdHandle> {
        let op = Op::AllocPd;
        let ptr = self.ctx_ptr(ctx, op)?;
        // SAFETY: ptr is an open context.
        let pd = unsafe { ibv_alloc_pd(ptr) };
        if pd.is_null() {
            return Err(Error::new(op, last_errno(), "ibv_alloc_pd failed"));
        }
        self.objs.pds.insert(op, HwPd { ptr: pd, ctx }).inspect_err(|_| {
            // SAFETY: the PD was just allocated and nothing uses it.
            unsafe { ibv_dealloc_pd(pd) };
        })
    }

    fn dealloc_pd(&mut self, pd: PdHandle) -> Result<()> {
        let op = Op::DeallocPd;
        let ptr = unused(&self.objs.pds, pd, op, |n| format!("the PD still has {n} mkey(s), MR(s) or QP(s)"))?.ptr;
        // SAFETY: the PD is live and has no mkeys.
        c_call(op, unsafe { ibv_dealloc_pd(ptr) }, "ibv_dealloc_pd")?;
        self.objs.pds.remove(pd, op)?;
        Ok(())
    }

    fn get_async_event(&mut self, ctx: ContextHandle) -> Result<Option<mlx5_dv::AsyncEvent>> {
        self.hw_get_async_event(ctx)
    }
}

impl Mkeys for HwBackend {
    fn create_mkey(&mut self, attr: &MkeyInitAttr) -> Result<Mkey> {
        let op = Op::CreateMkey;
        let p = self.objs.pds.get(attr.pd, op)?;
        let (pd_ptr, ctx) = (p.ptr, p.ctx);
        let f = self.lib.dv.mlx5dv_create_mkey.as_ref().map_err(|_| missing(op, "mlx5dv_create_mkey"))?;
        let mut c_attr =
            mlx5dv_mkey_init_attr { pd: pd_ptr, create_flags: attr.create_flags.bits(), max_entries: attr.max_entries };
        // SAFETY: the PD is live; c_attr is valid for the call (max_entries is written back).
        let mkey = unsafe { f(&mut c_attr) };
        if mkey.is_null() {
            return Err(Error::new(op, last_errno(), "mlx5dv_create_mkey failed"));
        }
        // SAFETY: a non-NULL result points at the provider's mlx5dv_mkey.
        let (lkey, rkey) = unsafe { ((*mkey).lkey, (*mkey).rkey) };
        let handle = self.objs.add_mkey(op, HwMkey { ptr: mkey, pd: attr.pd, ctx }).inspect_err(|_| {
            if let Ok(destroy) = &self.lib.dv.mlx5dv_destroy_mkey {
                // SAFETY: the mkey was just created and is in no table.
                unsafe { destroy(mkey) };
            }
        })?;
        Ok(Mkey { handle, lkey, rkey, max_entries: c_attr.max_entries })
    }

    fn destroy_mkey(&mut self, mkey: &Mkey) -> Result<()> {
        let op = Op::DestroyMkey;
        let ptr = self.objs.mkeys.get(mkey.handle, op)?.ptr;
        let f = self.lib.dv.mlx5dv_destroy_mkey.as_ref().map_err(|_| missing(op, "mlx5dv_destroy_mkey"))?;
        // SAFETY: the mkey is live; on failure it stays live and in the table.
        c_call(op, unsafe { f(ptr) }, "mlx5dv_destroy_mkey")?;
        self.objs.take_mkey(mkey.handle, op)?;
        Ok(())
    }

    fn mkey_check(&mut self, mkey: &Mkey) -> Result<MkeyErr> {
        let op = Op::MkeyCheck;
        let ptr = self.objs.mkeys.get(mkey.handle, op)?.ptr;
        let mut err = mlx5dv_mkey_err::default();
        // SAFETY: the mkey is live; err is valid for writes.
        let rc = unsafe { inline::mkey_check(&self.lib, ptr, &mut err) };
        c_call(op, rc, "mlx5dv_mkey_check")?;
        let err_type = match err.err_type {
            0 => MkeyErrType::NoErr,
            1 => MkeyErrType::SigBlockBadGuard,
            2 => MkeyErrType::SigBlockBadReftag,
            3 => MkeyErrType::SigBlockBadApptag,
            other => return Err(Error::new(op, EINVAL, format!("libmlx5 returned unknown err_type {other}"))),
        };
        // SAFETY: `sig` is the only member of the union.
        let s = unsafe { err.err.sig };
        Ok(MkeyErr {
            err_type,
            sig: SigErr { actual_value: s.actual_value, expected_value: s.expected_value, offset: s.offset },
        })
    }
}

impl Memory for HwBackend {
    fn alloc_buf(&mut self, len: usize) -> Result<mlx5_dv::Buf> {
        self.hw_alloc_buf(len)
    }

    fn alloc_mw(&mut self, pd: PdHandle, mw_type: u32) -> Result<mlx5_dv::Mw> {
        self.hw_alloc_mw(pd, mw_type)
    }

    fn dealloc_mw(&mut self, mw: &mlx5_dv::Mw) -> Result<()> {
        self.hw_dealloc_mw(mw)
    }

    fn alloc_dm(&mut self, ctx: ContextHandle, length: u64, log_align_req: u32) -> Result<mlx5_dv::Dm> {
        self.hw_alloc_dm(ctx, length, log_align_req)
    }

    fn free_dm(&mut self, dm: &mlx5_dv::Dm) -> Result<()> {
        self.hw_free_dm(dm)
    }

    fn memcpy_to_dm(&mut self, dm: &mlx5_dv::Dm, offset: u64, data: &[u8]) -> Result<()> {
        self.hw_memcpy_to_dm(dm, offset, data)
    }

    fn memcpy_from_dm(&mut self, dm: &mlx5_dv::Dm, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.hw_memcpy_from_dm(dm, offset, len)
    }

    fn reg_dm_mr(
        &mut self,
        pd: PdHandle,
        dm: &mlx5_dv::Dm,
        offset: u64,
        length: u64,
        access: mlx5_dv::AccessFlags,
    ) -> Result<mlx5_dv::Mr> {
        self.hw_reg_dm_mr(pd, dm, offset, length, access)
    }

    fn free_buf(&mut self, buf: &mlx5_dv::Buf) -> Result<()> {
        self.hw_free_buf(buf)
    }

    fn write_buf(&mut self, buf: &mlx5_dv::Buf, offset: usize, data: &[u8]) -> Result<()> {
        self.hw_buf_slice(buf, offset, data.len(), Op::WriteBuf).map(|s| s.copy_from_slice(data))
    }

    fn read_buf(&mut self, buf: &mlx5_dv::Buf, offset: usize, len: usize) -> Result<Vec<u8>> {
        self.hw_buf_slice(buf, offset, len, Op::ReadBuf).map(|s| s.to_vec())
    }

    fn reg_mr(&mut self, pd: PdHandle, addr: u64, length: u64, access: mlx5_dv::AccessFlags) -> Result<mlx5_dv::Mr> {
        self.hw_reg_mr(pd, addr, length, access)
    }

    fn advise_mr(&mut self, pd: PdHandle, advice: u32, flags: u32, sges: &[mlx5_dv::Sge]) -> Result<()> {
        self.hw_advise_mr(pd, advice, flags, sges)
    }

    fn dereg_mr(&mut self, mr: &mlx5_dv::Mr) -> Result<()> {
        self.hw_dereg_mr(mr)
    }

    fn rereg_mr(
        &mut self,
        mr: &mlx5_dv::Mr,
        flags: u32,
        pd: Option<PdHandle>,
        addr: u64,
        length: u64,
        access: mlx5_dv::AccessFlags,
    ) -> Result<mlx5_dv::Mr> {
        self.hw_rereg_mr(mr, flags, pd, addr, length, access)
    }

    fn alloc_dmabuf(&mut self, len: usize) -> Result<mlx5_dv::DmaBuf> {
        self.hw_alloc_dmabuf(len)
    }

    fn free_dmabuf(&mut self, dmabuf: &mlx5_dv::DmaBuf) -> Result<()> {
        self.hw_free_dmabuf(dmabuf)
    }

    fn reg_dmabuf_mr(
        &mut self,
        pd: PdHandle,
        offset: u64,
        length: u64,
        iova: u64,
        fd: i32,
        access: mlx5_dv::AccessFlags,
    ) -> Result<mlx5_dv::Mr> {
        self.hw_reg_dmabuf_mr(pd, (offset, length, iova), fd, access, None)
    }

    fn dv_reg_dmabuf_mr(
        &mut self,
        pd: PdHandle,
        offset: u64,
        length: u64,
        iova: u64,
        fd: i32,
        access: mlx5_dv::AccessFlags,
        mlx5_access: u32,
    ) -> Result<mlx5_dv::Mr> {
        self.hw_reg_dmabuf_mr(pd, (offset, length, iova), fd, access, Some(mlx5_access))
    }

    fn get_data_direct_sysfs_path(&mut self, ctx: ContextHandle, buf_len: usize) -> Result<String> {
        self.hw_get_data_direct_sysfs_path(ctx, buf_len)
    }
}

impl mlx5_dv::Srqs for HwBackend {
    fn create_srq(&mut self, attr: &mlx5_dv::SrqInitAttr) -> Result<mlx5_dv::Srq> {
        self.hw_create_srq(attr)
    }
    fn modify_srq(&mut self, srq: &mlx5_dv::Srq, attr: &mlx5_dv::SrqAttr, mask: u32) -> Result<()> {
        self.hw_modify_srq(srq, attr, mask)
    }
    fn query_srq(&mut self, srq: &mlx5_dv::Srq) -> Result<mlx5_dv::SrqAttr> {
        self.hw_query_srq(srq)
    }
    fn destroy_srq(&mut self, srq: &mlx5_dv::Srq) -> Result<()> {
        self.hw_destroy_srq(srq)
    }
    fn post_srq_recv(&mut self, srq: &mlx5_dv::Srq, wrs: &[mlx5_dv::RecvWr]) -> Result<()> {
        self.hw_post_srq_recv(srq, wrs)
    }
}

impl Backend for HwBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo { backend: "hw".into(), profile: None, facts: self.facts.clone() }
    }

    fn caps(&self) -> mlx5_dv::Caps {
        self.caps.clone()
    }
}

impl HwBackend {
    /// The `ibv_context` behind a live handle, for commands this crate issues itself.
    pub(crate) fn raw_context(&self, ctx: ContextHandle) -> Result<*mut ibv_context> {
        self.ctx_ptr(ctx, Op::Backend)
    }
}

/// QUERY_HCA_CAP through DEVX on an open DEVX context: the capability page.
pub(crate) fn devx_query(b: &HwBackend, ctx: *mut ibv_context, op_mod: u16) -> Result<Vec<u8>> {
    let op = Op::Backend;
    let f = b
        .lib()
        .dv
        .mlx5dv_devx_general_cmd
        .as_ref()
        .map_err(|_| Error::new(op, EOPNOTSUPP, "no mlx5dv_devx_general_cmd"))?;
    let input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, op_mod);
    let mut out = vec![0u8; q::OUT_SIZE];
    // SAFETY: ctx is an open DEVX context; both mailboxes are valid for their lengths.
    let rc = unsafe { f(ctx, input.as_ptr().cast(), input.len(), out.as_mut_ptr().cast(), out.len()) };
    if rc != 0 {
        let (status, syndrome) = prm::read_status(&out);
        return Err(Error::new(op, rc, format!("QUERY_HCA_CAP op_mod 0x{op_mod:x} failed"))
            .with_cmd_status(mlx5_dv::CmdStatus { status, syndrome }));
    }
    Ok(out.split_off(q::CAPABILITY_BYTE))
}

/// `general_obj_types` of the general capability page, read through a DEVX context of `dev`;
/// `None` when no DEVX context opens or the query fails.
pub(crate) fn general_obj_types(b: &mut HwBackend, dev: &str) -> Option<u64> {
    let ctx = b.open_device(dev, Some(&ContextAttr::devx())).ok()?;
    let page = b.raw_context(ctx).and_then(|ptr| devx_query(b, ptr, q::OP_MOD_GENERAL_CUR)).ok();
    let _ = b.close_device(ctx);
    page.and_then(|p| c::GENERAL_OBJ_TYPES.get(&p).ok())
}

mod queues;

#[cfg(test)]
mod tests;
