//! Devices and contexts as a program sees them: the device list, `ibv_open_device`,
//! `mlx5dv_open_device`, and the device, port and GID queries.

use std::ffi::{c_char, c_int, c_void};
use std::ptr;

use mlx5_dv::{Backend, ContextAttr, ContextFlags, DeviceKind, PortAttr, link_layer};
use rdma_sys::*;

use crate::errno::{code, minus_one, null};
use crate::objects::{Context, Device};
use crate::state::{Shim, device_thread, key, with};

/// The vendor id of every mlx5 device (Mellanox's PCI vendor id).
const MLX5_VENDOR_ID: u32 = 0x02c9;

fn copy_cstr(dst: &mut [c_char], s: &str) {
    let room = dst.len().saturating_sub(1);
    for (d, b) in dst.iter_mut().zip(s.bytes().take(room)) {
        *d = b as c_char;
    }
}

impl Device {
    /// The mlx5 kernel devices of the simulator, as `ibv_get_device_list` lists them.
    pub(crate) fn enumerate(sim: &mut dyn Backend) -> mlx5_dv::Result<Vec<Device>> {
        let mut v = Vec::new();
        for d in sim.device_list()?.into_iter().filter(|d| d.kind == DeviceKind::Mlx5) {
            let ctx = sim.open_ibv_device(&d.name)?;
            let port = sim.query_port(ctx, 1);
            sim.close_device(ctx)?;
            let guid = port.map(|p| u64::from_be_bytes(p.gid.0[8..].try_into().unwrap_or_default())).unwrap_or(0);
            // SAFETY: ibv_device is plain data; all-zero is a valid value.
            let mut c: Box<ibv_device> = Box::new(unsafe { std::mem::zeroed() });
            c.node_type = ibv_node_type::IBV_NODE_CA;
            c.transport_type = ibv_transport_type::IBV_TRANSPORT_IB;
            copy_cstr(&mut c.name, &d.name);
            copy_cstr(&mut c.dev_name, &format!("uverbs{}", v.len()));
            copy_cstr(&mut c.dev_path, &format!("/sys/class/infiniband_verbs/uverbs{}", v.len()));
            copy_cstr(&mut c.ibdev_path, &format!("/sys/class/infiniband/{}", d.name));
            v.push(Device { c, name: d.name, guid });
        }
        Ok(v)
    }
}

impl Shim {
    fn device_index(&self, dev: *const ibv_device) -> Option<usize> {
        self.devices.iter().position(|d| ptr::eq(&*d.c, dev))
    }

    /// The context behind a program's `ibv_context` pointer.
    pub(crate) fn context(&self, ctx: *const ibv_context) -> Result<&Context, c_int> {
        self.contexts.get(&key(ctx)).ok_or(libc::EINVAL)
    }

    fn open(&mut self, dev: *mut ibv_device, attr: Option<&ContextAttr>) -> Result<*mut ibv_context, c_int> {
        // A kernel device of the list, or a VFIO function of mlx5dv_get_vfio_device_list.
        let (name, i) = match self.device_index(dev) {
            Some(i) => (self.devices[i].name.clone(), Some(i)),
            None => {
                let vfio = self.dv.vfio_devices.iter().find(|(_, d)| ptr::eq(&***d, dev));
                (vfio.ok_or(libc::ENODEV)?.0.clone(), None)
            }
        };
        let handle = match attr {
            Some(a) => self.sim.open_device(&name, Some(a)),
            None => self.sim.open_ibv_device(&name),
        }
        .map_err(|e| e.errno())?;
        let cmd_fd = command_fd();
        Ok(self.install_context(dev, i, handle, cmd_fd))
    }

    /// A program's `ibv_context` for the simulator's context `handle` of device `dev` (index
    /// `i` in the device list; `None` for a VFIO function), on command fd `cmd_fd`, which it
    /// owns from now on.
    pub(crate) fn install_context(
        &mut self,
        dev: *mut ibv_device,
        i: Option<usize>,
        handle: mlx5_dv::ContextHandle,
        cmd_fd: c_int,
    ) -> *mut ibv_context {
        // SAFETY: verbs_context is plain data (pointers, optional functions, a zeroed mutex
        // is PTHREAD_MUTEX_INITIALIZER on glibc).
        let mut c: Box<verbs_context> = Box::new(unsafe { std::mem::zeroed() });
        c.sz = std::mem::size_of::<verbs_context>();
        c.query_port = Some(query_port_ex);
        c.query_device_ex = Some(query_device_ex);
        // The VFIO provider has no query_rt_values: the header's inline answers EOPNOTSUPP.
        if i.is_some() {
            c.query_rt_values = Some(query_rt_values);
            c.advise_mr = Some(crate::mr::advise_mr);
            crate::domain::fill_context_ops(&mut c);
            crate::dm::fill_context_ops(&mut c);
            crate::xrc::fill_context_ops(&mut c);
            crate::mw::fill_context_ops(&mut c);
            crate::flow::fill_context_ops(&mut c);
            crate::flow_matcher::fill_context_ops(&mut c);
            crate::wq::fill_context_ops(&mut c);
        }
        crate::queue::fill_context_ops(&mut c);
        crate::srq::fill_context_ops(&mut c);
        let ctx = &mut c.context;
        ctx.device = dev;
        // The extended-ABI marker verbs_get_ctx() checks.
        ctx.abi_compat = usize::MAX as *mut c_void;
        // A VFIO context's vectors are its function's MSI-X vectors (mlx5_vfio_init_async_fd).
        let d = &self.sim.profile().device;
        ctx.num_comp_vectors = c_int::from(if i.is_some() { d.num_comp_vectors } else { d.vfio_msix_vectors });
        // SAFETY: eventfd has no memory preconditions.
        ctx.async_fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
        ctx.cmd_fd = cmd_fd;
        let p: *mut ibv_context = ctx;
        self.contexts.insert(key(p), Context { c, handle, device: i, events: Default::default(), uar: None });
        device_thread::start(self);
        p
    }

    fn close(&mut self, ctx: *mut ibv_context) -> c_int {
        let Some(c) = self.contexts.get(&key(ctx)) else { return libc::EINVAL };
        let handle = c.handle;
        if self.contexts.iter().any(|(k, o)| *k != key(ctx) && o.handle == handle) {
            // An imported context, or one imported from: the kernel keeps what they share
            // until the last of their command fds closes.
            if let Some(c) = self.contexts.remove(&key(ctx)) {
                // SAFETY: the fds this context owns, closed once, here.
                unsafe {
                    libc::close(c.c.context.async_fd);
                    libc::close(c.c.context.cmd_fd);
                }
            }
            return 0;
        }
        device_thread::forget();
        if let Err(e) = self.sim.close_device(c.handle) {
            return code(&e);
        }
        if let Some(c) = self.contexts.remove(&key(ctx)) {
            // SAFETY: the fds were opened by `open` and are closed once, here.
            unsafe {
                libc::close(c.c.context.async_fd);
                libc::close(c.c.context.cmd_fd);
            }
        }
        // The close released what the context still held in the simulator (uverbs' cleanup);
        // its C objects go with it.
        self.qps.retain(|_, q| !ptr::eq(q.c.ex.qp_base.context, ctx));
        self.srqs.retain(|_, q| !ptr::eq(q.c.context, ctx));
        self.cqs.retain(|_, c| !ptr::eq(c.c.context, ctx));
        self.forget_memory_of(ctx);
        crate::dm::forget(ctx);
        crate::mw::forget(ctx);
        crate::flow::forget(ctx);
        crate::wq::forget(ctx);
        crate::flow_matcher::forget(ctx);
        crate::dr::forget(ctx);
        let ahs: Vec<usize> = self.ahs.iter().filter(|(_, a)| ptr::eq(a.context, ctx)).map(|(k, _)| *k).collect();
        for k in ahs {
            self.ahs.remove(&k);
            self.avs.remove(&k);
        }
        0
    }

    /// Port `port_num`'s GID table of the context's device, each entry with its type.
    pub(crate) fn gid_table(&mut self, ctx: *const ibv_context, port_num: u8) -> Result<Vec<([u8; 16], u32)>, c_int> {
        let p = self.port(ctx, port_num)?;
        Ok(match self.context(ctx)?.device {
            Some(dev) => self.sim.simulator().gid_table(dev).into_iter().map(|(g, t)| (g.0, t)).collect(),
            None => gids(&p),
        })
    }

    /// The simulator's port `port_num` of the context.
    pub(crate) fn port(&mut self, ctx: *const ibv_context, port_num: u8) -> Result<PortAttr, c_int> {
        let h = self.context(ctx)?.handle;
        self.sim.query_port(h, port_num).map_err(|e| e.errno())
    }

    fn query_device(&mut self, ctx: *const ibv_context, attr: &mut ibv_device_attr) -> c_int {
        let c = match self.context(ctx) {
            Ok(c) => c,
            Err(e) => return e,
        };
        // The VFIO provider answers device queries through DEVX commands only.
        let Some(dev) = c.device.and_then(|i| self.devices.get(i)) else { return libc::EOPNOTSUPP };
        let p = self.sim.profile();
        // SAFETY: plain data.
        *attr = unsafe { std::mem::zeroed() };
        copy_cstr(&mut attr.fw_ver, &p.device.fw_ver);
        attr.node_guid = dev.guid.to_be();
        attr.sys_image_guid = dev.guid.to_be();
        attr.max_mr_size = u64::MAX;
        // mlx5_ib: every page size from 2^log_pg_sz (4 KiB) up, as a 64-bit mask.
        attr.page_size_cap = !0xfff;
        attr.vendor_id = MLX5_VENDOR_ID;
        attr.vendor_part_id = p.device.vendor_part_id;
        attr.max_qp = 1 << 17;
        attr.max_qp_wr = c_int::try_from(p.datapath.max_qp_wr).unwrap_or(c_int::MAX);
        // mlx5_ib: memory windows (types 1 and 2B) with imaicl, up to one per mkey.
        let mw = p.hca_cap.imaicl;
        attr.device_cap_flags = DEVICE_CAP_FLAGS | if mw { MEM_WINDOW_FLAGS } else { 0 };
        attr.max_sge = 30;
        attr.max_sge_rd = 30;
        attr.max_cq = 1 << 24;
        attr.max_cqe = (1i32 << p.datapath.log_max_cq_sz.min(30)) - 1;
        attr.max_mr = 1i32 << p.hca_cap.log_max_mkey.min(30);
        attr.max_pd = 1 << 24;
        attr.max_qp_rd_atom = 1 << p.datapath.log_max_ra_req_qp.min(30);
        attr.max_res_rd_atom = attr.max_qp.saturating_mul(attr.max_qp_rd_atom);
        attr.max_qp_init_rd_atom = 1 << p.datapath.log_max_ra_res_qp.min(30);
        // mlx5_ib: IB_ATOMIC_HCA when the device does 8-byte atomics in host endianness.
        attr.atomic_cap =
            if p.datapath.atomic { ibv_atomic_cap::IBV_ATOMIC_HCA } else { ibv_atomic_cap::IBV_ATOMIC_NONE };
        // SRQs as mlx5_ib reports them: 2^log_max_srq of 2^log_max_srq_sz - 1 WRs of
        // max_rq_desc_sz / 16 - 1 SGEs; memory windows as many as MRs, when the device has them.
        attr.max_mw = if mw { attr.max_mr } else { 0 };
        attr.max_ah = c_int::MAX;
        attr.max_srq = 1 << p.datapath.log_max_srq.min(30);
        attr.max_srq_wr = (1 << p.datapath.log_max_srq_sz.min(30)) - 1;
        attr.max_srq_sge = c_int::try_from(p.datapath.max_rq_desc_sz / 16).unwrap_or(c_int::MAX) - 1;
        attr.max_pkeys = p.datapath.pkey_table_len;
        // mlx5_ib: 2^log_max_mcg groups of max_qp_mcg QPs each (ibv_attach_mcast).
        attr.max_mcast_grp = 1 << LOG_MAX_MCG;
        attr.max_mcast_qp_attach = MAX_QP_MCG;
        attr.max_total_mcast_qp_attach = MAX_QP_MCG << LOG_MAX_MCG;
        attr.local_ca_ack_delay = 16;
        attr.phys_port_cnt = 1;
        0
    }
}

/// The HCA caps `log_max_mcg` and `max_qp_mcg` of a ConnectX-6 Dx as `ibv_devinfo -v`
/// reports them (2097152 groups, 240 QPs each); unverified for other devices.
const LOG_MAX_MCG: c_int = 21;
const MAX_QP_MCG: c_int = 240;

/// `ibv_device_attr.device_cap_flags` as mlx5_ib sets them for what the simulator does:
/// BAD_PKEY_CNTR, BAD_QKEY_CNTR, CHANGE_PHY_PORT, PORT_ACTIVE_EVENT, SYS_IMAGE_GUID,
/// RC_RNR_NAK_GEN, XRC (the `xrc` HCA cap) and MEM_MGT_EXTENSIONS; MEM_WINDOW and
/// MEM_WINDOW_TYPE_2B are added when the device has memory windows. AUTO_PATH_MIG (alternate
/// paths) and the raw-packet and checksum offloads stay off: those features are not simulated.
const DEVICE_CAP_FLAGS: u32 = 1 << 1 | 1 << 2 | 1 << 5 | 1 << 10 | 1 << 11 | 1 << 12 | 1 << 20 | 1 << 21;

/// `IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B`, which mlx5_ib sets with imaicl.
const MEM_WINDOW_FLAGS: u32 = 1 << 17 | 1 << 24;

fn fill_port(p: &PortAttr, max_msg_sz: u32, out: &mut ibv_port_attr) {
    // SAFETY: plain data.
    *out = unsafe { std::mem::zeroed() };
    let eth = p.link_layer == link_layer::ETHERNET;
    out.state = p.state;
    out.max_mtu = ibv_mtu::IBV_MTU_4096;
    out.active_mtu = p.active_mtu;
    out.gid_tbl_len = if eth { 256 } else { 128 };
    // mlx5_query_port_roce: CM and IP-based GIDs; an InfiniBand port also device management.
    out.port_cap_flags = if eth { 1 << 16 | 1 << 26 } else { 1 << 16 | 1 << 19 };
    out.max_msg_sz = max_msg_sz;
    out.pkey_tbl_len = if eth { 1 } else { 128 };
    out.lid = p.lid;
    out.sm_lid = if eth { 0 } else { 1 };
    out.max_vl_num = if eth { 0 } else { 4 };
    out.subnet_timeout = if eth { 0 } else { 18 };
    // 4X at 25 Gb/s per lane (EDR-like), link up.
    out.active_width = 2;
    out.active_speed = 32;
    out.phys_state = 5;
    out.link_layer = p.link_layer;
}

/// The GIDs of port 1: RoCE v1 and v2 of the link-local GID on Ethernet, the port GID on IB.
fn gids(p: &PortAttr) -> Vec<([u8; 16], u32)> {
    if p.link_layer == link_layer::ETHERNET {
        vec![(p.gid.0, IBV_GID_TYPE_ROCE_V1), (p.gid.0, IBV_GID_TYPE_ROCE_V2)]
    } else {
        vec![(p.gid.0, IBV_GID_TYPE_IB)]
    }
}

/// `ibv_get_device_list`: the simulated mlx5 devices, NULL-terminated, from malloc.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    with(null, |s| {
        let n = s.devices.len();
        // SAFETY: a fresh allocation of n + 1 pointers, zeroed (the last stays NULL).
        let list = unsafe { libc::calloc(n + 1, std::mem::size_of::<*mut ibv_device>()) } as *mut *mut ibv_device;
        if list.is_null() {
            return null(libc::ENOMEM);
        }
        for (i, d) in s.devices.iter_mut().enumerate() {
            // SAFETY: i < n + 1 entries allocated above.
            unsafe { *list.add(i) = &mut *d.c };
        }
        if !num_devices.is_null() {
            // SAFETY: the caller's out-parameter.
            unsafe { *num_devices = c_int::try_from(n).unwrap_or(c_int::MAX) };
        }
        list
    })
}

/// `ibv_free_device_list`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    // SAFETY: `list` came from ibv_get_device_list's calloc.
    unsafe { libc::free(list.cast()) };
}

/// `ibv_get_device_name`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    if device.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: a device of the list; the name is NUL-terminated.
    unsafe { (*device).name.as_ptr() }
}

/// `ibv_get_device_guid`: the node GUID, big-endian.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> u64 {
    with(
        |_| 0,
        |s| match s.device_index(device) {
            Some(i) => s.devices[i].guid.to_be(),
            None => 0,
        },
    )
}

/// `ibv_get_device_index`: the kernel's index of the device, -1 if unknown.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_index(device: *mut ibv_device) -> c_int {
    with(|_| -1, |s| s.device_index(device).and_then(|i| c_int::try_from(i).ok()).unwrap_or(-1))
}

/// `ibv_open_device`: a verbs context (no DEVX).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    with(null, |s| s.open(device, None).unwrap_or_else(null))
}

/// `mlx5dv_open_device`: a context with the attributes' flags (DEVX).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_open_device(device: *mut ibv_device, attr: *mut c_void) -> *mut ibv_context {
    // struct mlx5dv_context_attr { uint32_t flags; uint64_t comp_mask; }
    let a = if attr.is_null() {
        ContextAttr { flags: ContextFlags::empty(), comp_mask: 0 }
    } else {
        // SAFETY: the caller's mlx5dv_context_attr.
        let a = unsafe { &*(attr as *const mlx5_hw::sys::mlx5dv::mlx5dv_context_attr) };
        ContextAttr { flags: ContextFlags::from_bits_retain(a.flags), comp_mask: a.comp_mask }
    };
    with(null, |s| s.open(device, Some(&a)).unwrap_or_else(null))
}

/// `mlx5dv_is_supported`: every listed device is an mlx5 device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_is_supported(device: *mut ibv_device) -> bool {
    with(|_| false, |s| s.device_index(device).is_some())
}

/// `ibv_close_device`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    with(minus_one, |s| match s.close(context) {
        0 => 0,
        e => minus_one(e),
    })
}

/// `ibv_query_device`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_device(context: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int {
    if attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's out-parameter.
    with(|e| e, |s| s.query_device(context, unsafe { &mut *attr }))
}

fn query_port_into(context: *mut ibv_context, port_num: u8, out: *mut ibv_port_attr, size: usize) -> c_int {
    if out.is_null() {
        return libc::EINVAL;
    }
    with(
        |e| e,
        |s| {
            let port = match s.port(context, port_num) {
                Ok(p) => p,
                Err(e) => return e,
            };
            // SAFETY: plain data.
            let mut full: ibv_port_attr = unsafe { std::mem::zeroed() };
            fill_port(&port, s.sim.profile().datapath.max_msg_sz, &mut full);
            let n = size.min(std::mem::size_of::<ibv_port_attr>());
            // SAFETY: the caller's buffer holds `size` bytes; we write at most that.
            unsafe { ptr::copy_nonoverlapping(ptr::from_ref(&full).cast::<u8>(), out.cast::<u8>(), n) };
            0
        },
    )
}

/// `verbs_context.query_device_ex`, which the header's `ibv_query_device_ex` calls: the
/// legacy attributes, then the extended ones as libibverbs fills them for a device with
/// none of the optional features (TSO, CQ moderation) but RSS (`rss_caps` and `max_wq_type_rq`, from the profile's `[datapath]`), tag matching (`tm_caps`, the
/// profile's `hca_cap.tag_matching` and its neighbours, as mlx5_ib derives them), on-demand
/// paging (`odp_caps` and `xrc_odp_caps`, the profile's `[odp]`), device
/// memory (`max_dm_size`, the MEMIC size), completion timestamps (`completion_timestamp_mask` and `hca_core_clock`, in
/// kHz, as mlx5_ib reports them: the profile's `device.completion_timestamp_mask` and
/// `device.hca_core_clock_khz`), and `phys_port_cnt_ex`, the port count. Only `attr_size`
/// bytes are written, so a program built against an older, shorter struct is never
/// written past.
unsafe extern "C" fn query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    // SAFETY: the caller's input, if any.
    if attr.is_null() || !input.is_null() && unsafe { (*input).comp_mask } != 0 {
        return libc::EINVAL;
    }
    if attr_size < std::mem::size_of::<ibv_device_attr>() {
        return libc::EINVAL;
    }
    // SAFETY: plain data.
    let mut full: ibv_device_attr_ex = unsafe { std::mem::zeroed() };
    let r = with(|e| e, |s| s.query_device(context, &mut full.orig_attr));
    if r != 0 {
        return r;
    }
    full.phys_port_cnt_ex = u32::from(full.orig_attr.phys_port_cnt);
    let (mask, khz) = with(
        |_| (0, 0),
        |s| {
            let d = &s.sim.profile().device;
            (d.completion_timestamp_mask, d.hca_core_clock_khz)
        },
    );
    full.completion_timestamp_mask = mask;
    // mlx5_ib_internal_fill_odp_caps, as the profile's [odp] has them.
    let odp = with(|_| mlx5_dv::OdpCaps::default(), |s| s.sim.profile().odp.caps());
    full.odp_caps.general_caps = u64::from(odp.general_caps);
    full.odp_caps.per_transport_caps.rc_odp_caps = odp.rc;
    full.odp_caps.per_transport_caps.uc_odp_caps = odp.uc;
    full.odp_caps.per_transport_caps.ud_odp_caps = odp.ud;
    full.xrc_odp_caps = odp.xrc;
    full.hca_core_clock = khz;
    // mlx5_ib_query_device: RSS and WQs with raw packet QPs.
    let (rss, rq) = with(
        |_| (mlx5_dv::RssCaps::default(), 0),
        |s| {
            let d = &s.sim.profile().datapath;
            (d.rss_caps(), d.max_wq_type_rq())
        },
    );
    full.rss_caps.supported_qpts = rss.supported_qpts;
    full.rss_caps.max_rwq_indirection_tables = rss.max_rwq_indirection_tables;
    full.rss_caps.max_rwq_indirection_table_size = rss.max_rwq_indirection_table_size;
    full.rss_caps.rx_hash_fields_mask = rss.rx_hash_fields_mask;
    full.rss_caps.rx_hash_function = rss.rx_hash_function;
    full.max_wq_type_rq = rq;
    // mlx5_ib_query_device: tm_caps from tag_matching, rndv_offload_rc,
    // log_tag_matching_list_sz and log_max_qp_sz (the largest send queue).
    let tm = with(
        |_| None,
        |s| {
            let p = s.sim.profile();
            let h = &p.hca_cap;
            mlx5_dv::TmCaps::of_hca(h.tag_matching, h.rndv_offload_rc, h.log_tag_matching_list_sz, p.datapath.max_qp_wr)
        },
    );
    if let Some(t) = tm {
        full.tm_caps = ibv_tm_caps {
            max_rndv_hdr_size: t.max_rndv_hdr_size,
            max_num_tags: t.max_num_tags,
            flags: t.flags,
            max_ops: t.max_ops,
            max_sge: t.max_sge,
        };
    }
    // mlx5_ib: MEMIC's max_memic_size, 0 without MEMIC (and on a VFIO context).
    full.max_dm_size = with(
        |_| 0,
        |s| {
            let h = s.context(context).ok().filter(|c| c.device.is_some()).map(|c| c.handle);
            h.and_then(|h| s.sim.simulator_mut().max_dm_size(h).ok()).unwrap_or(0)
        },
    );
    let n = attr_size.min(std::mem::size_of::<ibv_device_attr_ex>());
    // SAFETY: the caller's buffer holds `attr_size` bytes; at most that many are written.
    unsafe {
        ptr::write_bytes(attr.cast::<u8>(), 0, attr_size);
        ptr::copy_nonoverlapping(ptr::from_ref(&full).cast::<u8>(), attr.cast::<u8>(), n);
    }
    0
}

/// `IBV_VALUES_MASK_RAW_CLOCK`, the only bit of `ibv_values_ex.comp_mask`.
const VALUES_MASK_RAW_CLOCK: u32 = 1 << 0;

/// `verbs_context.query_rt_values`, which the header's `ibv_query_rt_values_ex` calls:
/// libmlx5's `mlx5_query_rt_values`. An unknown `comp_mask` bit is EINVAL; with
/// `IBV_VALUES_MASK_RAW_CLOCK` the device clock (`mlx5_read_clock`, in `hca_core_clock`
/// ticks) is `raw_clock.tv_nsec` with `tv_sec` 0; `comp_mask` comes back with the bits
/// answered.
unsafe extern "C" fn query_rt_values(context: *mut ibv_context, values: *mut ibv_values_ex) -> c_int {
    // SAFETY: the caller's struct.
    let Some(v) = (unsafe { values.as_mut() }) else { return libc::EINVAL };
    if v.comp_mask & !VALUES_MASK_RAW_CLOCK != 0 {
        return libc::EINVAL;
    }
    let mut answered = 0;
    let mut err = 0;
    if v.comp_mask & VALUES_MASK_RAW_CLOCK != 0 {
        let r = with(Err, |s| {
            let h = s.context(context)?.handle;
            s.sim.simulator().device_clock(h).map_err(|e| e.errno())
        });
        match r {
            Ok(cycles) => {
                v.raw_clock.tv_sec = 0;
                // The raw cycle count, as libmlx5 stores it (a `long`).
                v.raw_clock.tv_nsec = cycles as libc::c_long;
                answered |= VALUES_MASK_RAW_CLOCK;
            }
            Err(e) => err = e,
        }
    }
    v.comp_mask = answered;
    err
}

/// `ibv_query_port` (the exported, compat entry point).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut _compat_ibv_port_attr,
) -> c_int {
    // The compat struct is ibv_port_attr up to `flags`.
    query_port_into(context, port_num, port_attr.cast(), std::mem::offset_of!(ibv_port_attr, port_cap_flags2))
}

/// `verbs_context.query_port`, which the header's `ibv_query_port` calls.
unsafe extern "C" fn query_port_ex(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
    port_attr_len: usize,
) -> c_int {
    query_port_into(context, port_num, port_attr, port_attr_len)
}

/// `ibv_query_gid`: 0, or -1 for an index past the table.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    let Ok(table) = with(Err, |s| s.gid_table(context, port_num)) else { return minus_one(libc::EINVAL) };
    let entry = usize::try_from(index).ok().and_then(|i| table.get(i));
    match (entry, gid.is_null()) {
        (Some((g, _)), false) => {
            // SAFETY: the caller's out-parameter; ibv_gid is 16 bytes.
            unsafe { ptr::copy_nonoverlapping(g.as_ptr(), gid.cast::<u8>(), 16) };
            0
        }
        (None, false) => {
            // Past the populated entries the kernel's table holds zeros.
            let Ok(i) = usize::try_from(index) else { return minus_one(libc::EINVAL) };
            if i >= 256 {
                return minus_one(libc::EINVAL);
            }
            // SAFETY: as above.
            unsafe { ptr::write_bytes(gid.cast::<u8>(), 0, 16) };
            0
        }
        _ => minus_one(libc::EINVAL),
    }
}

fn fill_gid_entry(out: *mut ibv_gid_entry, g: &[u8; 16], index: u32, gid_type: u32) {
    // SAFETY: the caller's entry; plain data.
    unsafe {
        ptr::write_bytes(out, 0, 1);
        ptr::copy_nonoverlapping(g.as_ptr(), ptr::addr_of_mut!((*out).gid).cast::<u8>(), 16);
        (*out).gid_index = index;
        (*out).port_num = 1;
        (*out).gid_type = gid_type;
    }
}

/// `ibv_query_gid_ex`: ENODATA for an empty entry, as the kernel answers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    if flags != 0 || entry.is_null() || entry_size < std::mem::size_of::<ibv_gid_entry>() {
        return libc::EINVAL;
    }
    let Ok(port) = u8::try_from(port_num) else { return libc::EINVAL };
    let table = match with(Err, |s| s.gid_table(context, port)) {
        Ok(t) => t,
        Err(e) => return e,
    };
    match table.get(gid_index as usize) {
        Some((g, t)) => {
            fill_gid_entry(entry, g, gid_index, *t);
            0
        }
        None => libc::ENODATA,
    }
}

/// `ibv_query_gid_table`: the populated entries, or a negative errno.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    if flags != 0 || entry_size < std::mem::size_of::<ibv_gid_entry>() {
        return -(libc::EINVAL as isize);
    }
    let table = match with(Err, |s| s.gid_table(context, 1)) {
        Ok(t) => t,
        Err(e) => return -(e as isize),
    };
    if table.len() > max_entries || entries.is_null() && !table.is_empty() {
        return -(libc::EINVAL as isize);
    }
    for (i, (g, t)) in table.iter().enumerate() {
        // SAFETY: entries are entry_size bytes apart, max_entries of them.
        let e = unsafe { entries.cast::<u8>().add(i * entry_size) }.cast::<ibv_gid_entry>();
        fill_gid_entry(e, g, i as u32, *t);
    }
    table.len() as isize
}

/// `ibv_query_gid_type` (private in rdma-core; ibv_devinfo calls it): the sysfs GID type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid_type(
    context: *mut ibv_context,
    port_num: u8,
    index: u32,
    gid_type: *mut u32,
) -> c_int {
    let table = match with(Err, |s| s.gid_table(context, port_num)) {
        Ok(t) => t,
        Err(_) => return minus_one(libc::EINVAL),
    };
    if gid_type.is_null() || index >= 256 {
        return minus_one(libc::EINVAL);
    }
    // The sysfs encoding: 0 for IB and RoCE v1, 1 for RoCE v2; empty entries read as 0.
    let t = table.get(index as usize).map_or(0, |(_, t)| u32::from(*t == IBV_GID_TYPE_ROCE_V2));
    // SAFETY: the caller's out-parameter.
    unsafe { *gid_type = t };
    0
}

/// `ibv_query_pkey`: the default P_Key at index 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_pkey(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    if with(Err, |s| s.port(context, port_num)).is_err() || pkey.is_null() {
        return minus_one(libc::EINVAL);
    }
    // SAFETY: the caller's out-parameter.
    unsafe { *pkey = if index == 0 { 0xffff_u16.to_be() } else { 0 } };
    0
}

/// `ibv_get_pkey_index`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_pkey_index(context: *mut ibv_context, port_num: u8, pkey: u16) -> c_int {
    if with(Err, |s| s.port(context, port_num)).is_err() {
        return minus_one(libc::EINVAL);
    }
    if u16::from_be(pkey) & 0x7fff == 0x7fff { 0 } else { minus_one(libc::ENOENT) }
}

/// Bytes of mmap offsets the command fd covers: mlx5_ib's inserted entries (VARs) sit at
/// `(index >> 8) << 16 | command << 8 | index & 0xff` pages, command 9 to 255, index below
/// 2^16 — under 2^40 bytes.
const CMD_FD_SPAN: libc::off_t = 1 << 40;

/// A context's command fd: a memory file as long as the mmap offsets mlx5_ib hands out, so a
/// program may map a VAR's `mmap_off` on it as on the uverbs device (the pages read zeros;
/// nothing behind them is simulated). An eventfd when the kernel has no memfd.
fn command_fd() -> c_int {
    // SAFETY: a NUL-terminated name; memfd_create reads nothing else.
    let fd = unsafe { libc::memfd_create(c"uverbs".as_ptr(), libc::MFD_CLOEXEC) };
    // SAFETY: ftruncate on our own fd; a sparse file takes no memory until written.
    if fd >= 0 && unsafe { libc::ftruncate(fd, CMD_FD_SPAN) } == 0 {
        return fd;
    }
    if fd >= 0 {
        // SAFETY: our own fd, closed once.
        unsafe { libc::close(fd) };
    }
    // SAFETY: eventfd has no memory preconditions.
    unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) }
}
