//! Thread domains and parent domains (`ibv_alloc_td`, `ibv_alloc_parent_domain`), as libmlx5
//! keeps them: user-space objects over a PD, with its reference counts and its checks.
//!
//! A parent domain is a PD to every verb that takes one (its `ibv_pd` carries the protection
//! domain's handle, as `ibv_initialize_parent_domain` makes it), so the shim keeps it among
//! its PDs over the protection domain's simulator PD. Queues made on a parent domain with
//! allocators ask them for their buffers as libmlx5 does (the buffer, then the doorbell
//! record); an allocator that answers `IBV_ALLOCATOR_USE_DEFAULT` leaves the buffer to the
//! simulator, and one that gives memory of its own is refused (EOPNOTSUPP, the memory given
//! back to its `free`): the simulated queues live in the simulator's memory.

use std::ffi::{c_int, c_void};
use std::ptr;

use rdma_sys::*;

use crate::errno::null;
use crate::objects::{Parent, Pd};
use crate::state::{Shim, key, with};

/// `IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS`.
const ATTR_ALLOCATORS: u32 = 1 << 0;
/// `IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT`.
const ATTR_PD_CONTEXT: u32 = 1 << 1;
/// `IBV_ALLOCATOR_USE_DEFAULT`: the allocator leaves the buffer to the provider.
const USE_DEFAULT: usize = usize::MAX;
/// `MLX5DV_RES_TYPE_*`: what a buffer asked of an allocator is for.
pub(crate) mod res_type {
    /// A QP's send and receive queues.
    pub(crate) const QP: u64 = 1 << 32 | 1;
    /// A doorbell record.
    pub(crate) const DBR: u64 = 1 << 32 | 3;
    /// A CQ's ring.
    pub(crate) const CQ: u64 = 1 << 32 | 5;
}
/// The alignment libmlx5 asks for a queue's buffer (the page) and a doorbell record.
const PAGE: usize = 4096;
const DBR_SIZE: usize = 8;

impl Shim {
    fn alloc_td(&mut self, ctx: *mut ibv_context, attr: *const ibv_td_init_attr) -> Result<*mut ibv_td, c_int> {
        self.context(ctx)?;
        // SAFETY: the caller's attributes, if any.
        if attr.is_null() || unsafe { (*attr).comp_mask } != 0 {
            return Err(libc::EINVAL);
        }
        let mut td = Box::new(ibv_td { context: ctx });
        let p: *mut ibv_td = &mut *td;
        self.domains.tds.insert(key(p), td);
        Ok(p)
    }

    fn dealloc_td(&mut self, td: *mut ibv_td) -> c_int {
        if !self.domains.tds.contains_key(&key(td)) {
            return libc::EINVAL;
        }
        if self.domains.parents.values().any(|p| p.td == Some(key(td))) {
            return libc::EBUSY;
        }
        self.domains.tds.remove(&key(td));
        0
    }

    fn alloc_parent_domain(
        &mut self,
        ctx: *mut ibv_context,
        attr: *const ibv_parent_domain_init_attr,
    ) -> Result<*mut ibv_pd, c_int> {
        self.context(ctx)?;
        // SAFETY: the caller's attributes.
        let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
        // ibv_check_alloc_parent_domain, then libmlx5's comp_mask check.
        if a.pd.is_null() || a.comp_mask & !(ATTR_ALLOCATORS | ATTR_PD_CONTEXT) != 0 {
            return Err(libc::EINVAL);
        }
        // A parent domain over a parent domain, a PD or TD of another context, or one the
        // shim did not make: libmlx5 would follow the pointers; the shim refuses.
        if self.domains.is_parent(a.pd) || (!a.td.is_null() && !self.domains.tds.contains_key(&key(a.td))) {
            return Err(libc::EINVAL);
        }
        let (handle, pd_ctx) = self.pd(a.pd).map(|p| (p.handle, p.c.context))?;
        // SAFETY: a TD of the shim's table.
        if pd_ctx != ctx || (!a.td.is_null() && unsafe { (*a.td).context } != ctx) {
            return Err(libc::EINVAL);
        }
        let allocators = a.comp_mask & ATTR_ALLOCATORS != 0;
        let parent = Parent {
            pd: key(a.pd),
            td: (!a.td.is_null()).then(|| key(a.td)),
            alloc: if allocators { a.alloc } else { None },
            free: if allocators { a.free } else { None },
            pd_context: if a.comp_mask & ATTR_PD_CONTEXT != 0 { a.pd_context as usize } else { 0 },
        };
        // ibv_initialize_parent_domain: the protection domain's context and handle.
        // SAFETY: a PD of the shim's table.
        let mut c = Box::new(ibv_pd { context: ctx, handle: unsafe { (*a.pd).handle } });
        let p: *mut ibv_pd = &mut *c;
        self.pds.insert(key(p), Pd { c, handle });
        self.domains.parents.insert(key(p), parent);
        Ok(p)
    }

    /// `ibv_dealloc_pd` of a parent domain: EBUSY while a QP or CQ made on it lives.
    pub(crate) fn dealloc_parent_domain(&mut self, pd: *mut ibv_pd) -> c_int {
        let qps = self.qps.values().any(|q| ptr::eq(q.c.ex.qp_base.pd, pd));
        let cqs = self.domains.cq_parents.iter().any(|(cq, p)| *p == key(pd) && self.cqs.contains_key(cq));
        if qps || cqs {
            return libc::EBUSY;
        }
        self.domains.parents.remove(&key(pd));
        self.domains.cq_parents.retain(|_, p| *p != key(pd));
        self.pds.remove(&key(pd));
        0
    }

    /// Ask the allocators of the parent domain `pd` (if it is one, with allocators) for a
    /// queue's buffers, `(size, resource type)` each in libmlx5's order: Ok when every one
    /// leaves the buffer to the simulator; ENOMEM when one fails (NULL); EOPNOTSUPP, the
    /// memory given back, when one gives memory of its own.
    pub(crate) fn domain_buffers(&self, pd: *mut ibv_pd, buffers: &[(usize, u64)]) -> Result<(), c_int> {
        let Some(parent) = self.domains.parents.get(&key(pd)) else { return Ok(()) };
        let Some(alloc) = parent.alloc else { return Ok(()) };
        let context = parent.pd_context as *mut c_void;
        for &(size, kind) in buffers {
            let align = if kind == res_type::DBR { DBR_SIZE } else { PAGE };
            // SAFETY: the program's allocator, called as libmlx5 calls it.
            let got = unsafe { alloc(pd, context, size, align, kind) };
            if got as usize == USE_DEFAULT {
                continue;
            }
            if got.is_null() {
                return Err(libc::ENOMEM);
            }
            if let Some(free) = parent.free {
                // SAFETY: the allocator's own memory, given back as libmlx5 gives it back.
                unsafe { free(pd, context, got, kind) };
            }
            eprintln!(
                "mlx5sim: a parent domain's allocator gave memory for a queue buffer; queues in the \
                 program's memory are not simulated (answer IBV_ALLOCATOR_USE_DEFAULT to use the simulator's)"
            );
            return Err(libc::EOPNOTSUPP);
        }
        Ok(())
    }

    /// The buffers libmlx5 asks a parent domain's allocators for when it makes the QP `qp`:
    /// its queues, then its doorbell record.
    pub(crate) fn qp_domain_buffers(&self, pd: *mut ibv_pd, qp: &mlx5_dv::Qp) -> Result<(), c_int> {
        if !self.domains.is_parent(pd) {
            return Ok(());
        }
        let m = self.sim.simulator().qp_memory(qp).map_err(|e| e.errno())?;
        let queues = m.sq_wqe_cnt as usize * 64 + m.rq_wqe_cnt as usize * m.rq_stride as usize;
        self.domain_buffers(pd, &[(queues, res_type::QP), (DBR_SIZE, res_type::DBR)])
    }

    /// As [`Shim::qp_domain_buffers`] for a CQ: its ring, then its doorbell record.
    pub(crate) fn cq_domain_buffers(&self, pd: *mut ibv_pd, cq: &mlx5_dv::Cq) -> Result<(), c_int> {
        let m = self.sim.simulator().cq_memory(cq).map_err(|e| e.errno())?;
        let ring = m.cqe_cnt as usize * m.cqe_size as usize;
        self.domain_buffers(pd, &[(ring, res_type::CQ), (DBR_SIZE, res_type::DBR)])
    }
}

/// Install the domain ops of a kernel context (the VFIO provider has none: the header's
/// inlines answer EOPNOTSUPP).
pub(crate) fn fill_context_ops(c: &mut verbs_context) {
    c.alloc_td = Some(alloc_td);
    c.dealloc_td = Some(dealloc_td);
    c.alloc_parent_domain = Some(alloc_parent_domain);
}

unsafe extern "C" fn alloc_td(context: *mut ibv_context, attr: *mut ibv_td_init_attr) -> *mut ibv_td {
    with(null, |s| s.alloc_td(context, attr).unwrap_or_else(null))
}

unsafe extern "C" fn dealloc_td(td: *mut ibv_td) -> c_int {
    with(|e| e, |s| s.dealloc_td(td))
}

unsafe extern "C" fn alloc_parent_domain(
    context: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    with(null, |s| s.alloc_parent_domain(context, attr).unwrap_or_else(null))
}

/// `MLX5_SHM_LENGTH`: what libmlx5 asks `shmget` for at least, one huge page.
const SHM_LENGTH: usize = 2 << 20;

/// libmlx5's `MLX_<component>_ALLOC_TYPE=HUGE` (`MLX_QP`, `MLX_CQ`, `MLX_SRQ`): the queue's
/// buffer must come from a huge page (`alloc_huge_mem`'s `shmget(SHM_HUGETLB)`), and creation
/// fails with that call's errno when the host has none reserved. With huge pages the simulator
/// still keeps the queue in its own memory; `PREFER_HUGE` and the others never fail.
pub(crate) fn huge_alloc_refused(component: &str) -> Result<(), c_int> {
    let Ok(v) = std::env::var(format!("{component}_ALLOC_TYPE")) else { return Ok(()) };
    if !v.eq_ignore_ascii_case("HUGE") {
        return Ok(());
    }
    // SAFETY: shmget and shmctl have no memory preconditions; the segment is removed at once.
    unsafe {
        let id = libc::shmget(libc::IPC_PRIVATE, SHM_LENGTH, libc::SHM_HUGETLB | libc::SHM_R | libc::SHM_W);
        if id == -1 {
            return Err(*libc::__errno_location());
        }
        libc::shmctl(id, libc::IPC_RMID, ptr::null_mut());
    }
    Ok(())
}
