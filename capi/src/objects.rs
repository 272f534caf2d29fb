//! The C objects the shim hands out, each a boxed C struct beside the simulator's handle it
//! stands for, and the tables [`crate::state::Shim`] keeps them in. Their calls live in the
//! module named above each; the types live here so that the shim's state needs none of those
//! modules (this one uses no other module of the crate).

use std::alloc::Layout;
use std::collections::{BTreeMap, VecDeque};
use std::ffi::{c_int, c_void};
use std::ptr;

use mlx5_dv::{
    Buf, ContextHandle, CryptoLoginHandle, DekHandle, DevxEq, DevxObjHandle, DevxUar, DevxUmem, MsiVector, PdHandle,
};
use mlx5_hw::sys::mlx5dv::{
    mlx5dv_devx_eq, mlx5dv_devx_msi_vector, mlx5dv_devx_uar, mlx5dv_devx_umem, mlx5dv_mkey, mlx5dv_qp_ex,
};
use rdma_sys::{
    ibv_comp_channel, ibv_context, ibv_cq_ex, ibv_device, ibv_mr, ibv_pd, ibv_qp_attr, ibv_qp_ex, ibv_td, verbs_context,
};

// Made and used by `device`.
/// One device of the list, its `ibv_device` at a fixed address for the process's life.
pub(crate) struct Device {
    pub(crate) c: Box<ibv_device>,
    pub(crate) name: String,
    /// The node GUID, host order.
    pub(crate) guid: u64,
}

/// An open context: its `verbs_context` (the program holds `&vctx.context`).
pub(crate) struct Context {
    pub(crate) c: Box<verbs_context>,
    pub(crate) handle: ContextHandle,
    /// The index of its kernel device; `None` for a VFIO function.
    pub(crate) device: Option<usize>,
    /// Asynchronous events not yet read: (event type, the union's value).
    pub(crate) events: std::collections::VecDeque<(u32, u64)>,
    /// The UAR page `mlx5dv_init_obj` hands out for QPs and CQs, made when first asked for.
    pub(crate) uar: Option<Pages>,
}

// Made and used by `events`.
/// A completion channel: its fd becomes readable when an armed CQ gets a completion.
pub(crate) struct Channel {
    pub(crate) c: Box<ibv_comp_channel>,
    /// CQs whose completion event is not yet read, in order.
    pub(crate) fired: VecDeque<usize>,
}

// Made and used by `mr`.
/// A PD: the program holds `&*c`.
pub(crate) struct Pd {
    pub(crate) c: Box<ibv_pd>,
    pub(crate) handle: PdHandle,
}

/// An MR over the program's bytes.
pub(crate) struct Mr {
    /// The program's `ibv_mr`, kept at its address until `ibv_dereg_mr`.
    pub(crate) _c: Box<ibv_mr>,
    pub(crate) mr: mlx5_dv::Mr,
    /// The registration of the program's memory it holds ([`NO_REGION`] for none).
    pub(crate) region: RegionKey,
}

/// An mlx5dv mkey.
pub(crate) struct Mkey {
    /// The program's `mlx5dv_mkey`, kept at its address until `mlx5dv_destroy_mkey`.
    pub(crate) c: Box<mlx5dv_mkey>,
    pub(crate) mkey: mlx5_dv::Mkey,
}

/// A registration of the program's memory with the simulator: its start and end.
pub(crate) type RegionKey = (u64, u64);

/// The key of an object that holds no registration (an ODP or device-memory MR).
pub(crate) const NO_REGION: RegionKey = (0, 0);

/// The program's memory the simulator maps: registrations of its bytes, each with the number
/// of MRs and umems in it. One inside a registration shares it; one that overlaps others only
/// in part is a registration of its own (the simulator joins overlapping ones).
#[derive(Default)]
pub(crate) struct ExternalMemory {
    /// (start, end) → (the simulator's buffer, holders).
    pub(crate) regions: BTreeMap<RegionKey, (Buf, usize)>,
}

// Made and used by `queue`.
/// A CQ: the program's `ibv_cq` (or `ibv_cq_ex`, whose prefix it is) and the simulator's.
pub(crate) struct Cq {
    pub(crate) c: Box<CqC>,
    pub(crate) cq: mlx5_dv::Cq,
}

/// The C side of a CQ, at a fixed address: every CQ is an `ibv_cq_ex` (a plain `ibv_cq` is
/// its prefix, as in libmlx5's `verbs_cq`), followed by the completion `ibv_start_poll` or
/// `ibv_next_poll` took last, which the `ibv_wc_read_*` calls read through the CQ's address
/// (as libmlx5's read its current CQE) without the shim's lock.
#[repr(C)]
pub(crate) struct CqC {
    pub(crate) ex: ibv_cq_ex,
    pub(crate) cur: mlx5_dv::Wc,
}

impl std::ops::Deref for CqC {
    type Target = ibv_cq_ex;
    fn deref(&self) -> &ibv_cq_ex {
        &self.ex
    }
}

impl std::ops::DerefMut for CqC {
    fn deref_mut(&mut self) -> &mut ibv_cq_ex {
        &mut self.ex
    }
}

/// An RC QP; the program holds `&c.ex.qp_base`.
pub(crate) struct Qp {
    pub(crate) c: Box<QpC>,
    pub(crate) qp: mlx5_dv::Qp,
    /// What the last successful `ibv_modify_qp` set, for `ibv_query_qp`.
    pub(crate) attr: ibv_qp_attr,
    /// The `ibv_wr_*` chain being built, and the first error a setter raised in it.
    pub(crate) chain: Vec<mlx5_dv::WrOp>,
    pub(crate) chain_err: c_int,
    /// `ibv_wr_set_ud_addr` of a UD QP's chain: the address of the WR at each chain index.
    pub(crate) ud: Vec<(usize, mlx5_dv::UdDest)>,
    /// `mlx5dv_wr_set_dc_addr` of a DCI's chain: the DCT of the WR at each chain index.
    pub(crate) dc: Vec<(usize, mlx5_dv::DcDest)>,
    /// A DCT: `ibv_query_qp` takes the kernel's DCT rules.
    pub(crate) dct: bool,
    /// `ibv_wr_set_xrc_srqn` of an XRC initiator's chain: the remote SRQ of each WR.
    pub(crate) xrc: Vec<(usize, u32)>,
}

impl Qp {
    /// A QP handle with no chain under way.
    pub(crate) fn new(c: Box<QpC>, qp: mlx5_dv::Qp, attr: ibv_qp_attr) -> Self {
        Qp { c, qp, attr, chain: Vec::new(), chain_err: 0, ud: Vec::new(), dc: Vec::new(), dct: false, xrc: Vec::new() }
    }
}

// Made and used by `xrc`.
/// `struct verbs_xrcd`: the `ibv_xrcd` programs hold, with the kernel's handle.
#[repr(C)]
pub(crate) struct VerbsXrcd {
    pub(crate) xrcd: rdma_sys::ibv_xrcd,
    pub(crate) comp_mask: u32,
    pub(crate) handle: u32,
}

/// An XRC domain; the program holds `&c.xrcd`.
pub(crate) struct Xrcd {
    pub(crate) _c: Box<VerbsXrcd>,
    pub(crate) x: mlx5_dv::Xrcd,
}

// Made and used by `srq`.
/// An SRQ; the program holds `&*c`.
pub(crate) struct Srq {
    pub(crate) c: Box<rdma_sys::ibv_srq>,
    pub(crate) srq: mlx5_dv::Srq,
}

// Made and used by `dv`.
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
    /// Packet pacing entries (`mlx5dv_pp_alloc`).
    pub(crate) pps: BTreeMap<usize, (Box<mlx5_hw::sys::mlx5dv::mlx5dv_pp>, mlx5_dv::PpEntry)>,
    /// VARs (`mlx5dv_alloc_var`).
    pub(crate) vars: BTreeMap<usize, (Box<mlx5_hw::sys::mlx5dv::mlx5dv_var>, mlx5_dv::Var)>,
    /// Scheduling nodes and leaves (`mlx5dv_sched_node_create`, `_leaf_create`).
    pub(crate) sched: BTreeMap<usize, SchedEntry>,
    /// The VFIO functions `mlx5dv_get_vfio_device_list` handed out, by PCI name; each
    /// `ibv_device` stays at its address for the process's life, as the real provider's do
    /// until the list is freed.
    pub(crate) vfio_devices: BTreeMap<String, Box<ibv_device>>,
}

// Made and used by `sched`.
/// `struct mlx5dv_sched_node` and `struct mlx5dv_sched_leaf` as libmlx5 lays them out.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct SchedElem {
    pub(crate) parent: *mut SchedElem,
    pub(crate) obj: *mut mlx5_hw::sys::mlx5dv::mlx5dv_devx_obj,
}

/// A node or leaf: the struct the program holds, its context, its DEVX object (whose
/// `mlx5dv_devx_obj` the struct names) and the firmware's id of it.
#[derive(Debug)]
pub(crate) struct SchedEntry {
    pub(crate) elem: Box<SchedElem>,
    pub(crate) leaf: bool,
    pub(crate) ctx: mlx5_dv::ContextHandle,
    pub(crate) handle: mlx5_dv::DevxObjHandle,
    pub(crate) id: u32,
}

// Made and used by `dv_crypto`.
/// A login object of `mlx5dv_crypto_login_create`: the program holds the box's address.
pub(crate) struct Login {
    pub(crate) _c: Box<u64>,
    pub(crate) handle: CryptoLoginHandle,
}

/// A DEK of `mlx5dv_dek_create`: the program holds the box's address.
pub(crate) struct Dek {
    pub(crate) _c: Box<u64>,
    pub(crate) handle: DekHandle,
}

// Made and used by `dv_devx`.
/// The page size of the shim's own allocations.
pub(crate) const PAGE: usize = 4096;

/// A page-aligned allocation of the shim's, zeroed, freed on drop.
pub(crate) struct Pages {
    ptr: *mut u8,
    layout: Layout,
}

impl Pages {
    /// `len` zeroed bytes (at least one page), page-aligned; None when out of memory.
    pub(crate) fn new(len: usize) -> Option<Pages> {
        let layout = Layout::from_size_align(len.max(PAGE), PAGE).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        (!ptr.is_null()).then_some(Pages { ptr, layout })
    }

    /// The first byte.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for Pages {
    /// Free the pages.
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// A DEVX object: the program holds the box's address (the C struct is opaque).
pub(crate) struct DevxObject {
    pub(crate) _c: Box<u64>,
    pub(crate) handle: DevxObjHandle,
}

/// A UAR: its C struct and the page its addresses point into.
pub(crate) struct Uar {
    pub(crate) _c: Box<mlx5dv_devx_uar>,
    pub(crate) page: Pages,
    pub(crate) uar: DevxUar,
    /// The kernel context's NC page: every NC allocation answers this struct, and freeing it
    /// does nothing (`mlx5_get_singleton_nc_uar`).
    pub(crate) singleton: bool,
}

/// A umem, and the simulator's mapping of the program's pages when the shim made one for it.
pub(crate) struct Umem {
    pub(crate) _c: Box<mlx5dv_devx_umem>,
    pub(crate) umem: DevxUmem,
    /// The registration of the program's memory it holds.
    pub(crate) region: RegionKey,
}

/// An MSI vector of a VFIO context.
pub(crate) struct Msi {
    pub(crate) _c: Box<mlx5dv_devx_msi_vector>,
    pub(crate) msi: MsiVector,
}

/// An EQ of a VFIO context; `vaddr` is its ring in the process's memory.
pub(crate) struct Eq {
    pub(crate) _c: Box<mlx5dv_devx_eq>,
    pub(crate) eq: DevxEq,
}

// Made and used by `qpx`.
/// `ibv_qp_ex.wr_flush`, which rdma-core releases after 44 add after `wr_atomic_write`.
pub(crate) type WrFlush = unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, usize, u8, u8);

/// The C side of a QP: the program's `ibv_qp` is `ex.qp_base`, at the start.
#[repr(C)]
pub(crate) struct QpC {
    pub(crate) ex: ibv_qp_ex,
    /// Where a program built against a later `verbs.h` finds `wr_flush`.
    pub(crate) wr_flush: Option<WrFlush>,
    pub(crate) dv: mlx5dv_qp_ex,
    /// Created with send ops flags: `ibv_qp_to_qp_ex` hands out `ex`.
    pub(crate) extended: bool,
}

// --- thread and parent domains (`crate::domain`) ---

pub(crate) type AllocFn = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, usize, u64) -> *mut c_void;
pub(crate) type FreeFn = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, *mut c_void, u64);

/// A parent domain: the PD and TD it holds, its allocators and their context.
pub(crate) struct Parent {
    pub(crate) pd: usize,
    pub(crate) td: Option<usize>,
    pub(crate) alloc: Option<AllocFn>,
    pub(crate) free: Option<FreeFn>,
    /// `pd_context`, an address the shim only hands back.
    pub(crate) pd_context: usize,
}

/// Memory a parent domain's allocator gave for one queue.
pub(crate) struct Given {
    /// The parent domain.
    pub(crate) parent: usize,
    pub(crate) free: Option<FreeFn>,
    pub(crate) pd_context: usize,
    /// Each buffer's address and `MLX5DV_RES_TYPE_*`.
    pub(crate) bufs: Vec<(usize, u64)>,
}

impl Given {
    /// Give every buffer back through the domain's `free`.
    pub(crate) fn give_back(self) {
        let Some(free) = self.free else { return };
        for (addr, res) in self.bufs {
            // SAFETY: the allocator's own memory, given back as libmlx5 gives it back.
            unsafe { free(self.parent as *mut ibv_pd, self.pd_context as *mut c_void, addr as *mut c_void, res) };
        }
    }
}

/// The thread and parent domains of the process.
#[derive(Default)]
pub(crate) struct Domains {
    pub(crate) tds: BTreeMap<usize, Box<ibv_td>>,
    pub(crate) parents: BTreeMap<usize, Parent>,
    /// The CQs made on a parent domain (`IBV_CQ_INIT_ATTR_MASK_PD`): CQ → parent domain.
    pub(crate) cq_parents: BTreeMap<usize, usize>,
    /// What parent domains' allocators gave for the queues made on them, by the queue's C
    /// object.
    pub(crate) given: BTreeMap<usize, Given>,
}

impl Domains {
    /// Whether `pd` is a parent domain.
    pub(crate) fn is_parent(&self, pd: *const ibv_pd) -> bool {
        self.parents.contains_key(&(pd as usize))
    }

    /// Whether a parent domain holds `pd` (libmlx5's PD refcount: EBUSY on dealloc).
    pub(crate) fn holds(&self, pd: *const ibv_pd) -> bool {
        self.parents.values().any(|p| p.pd == (pd as usize))
    }

    /// Drop the domains of a closed context (their C objects with it).
    pub(crate) fn forget(&mut self, ctx: *const ibv_context, live_pds: impl Fn(usize) -> bool) {
        self.tds.retain(|_, t| !ptr::eq(t.context, ctx));
        self.parents.retain(|k, _| live_pds(*k));
        let parents = &self.parents;
        self.cq_parents.retain(|_, p| parents.contains_key(p));
    }

    /// A CQ made on parent domain `pd`.
    pub(crate) fn add_cq(&mut self, cq: usize, pd: *const ibv_pd) {
        self.cq_parents.insert(cq, pd as usize);
    }
}
