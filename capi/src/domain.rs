//! Thread domains and parent domains (`ibv_alloc_td`, `ibv_alloc_parent_domain`), as libmlx5
//! keeps them: user-space objects over a PD, with its reference counts and its checks.
//!
//! A parent domain is a PD to every verb that takes one (its `ibv_pd` carries the protection
//! domain's handle, as `ibv_initialize_parent_domain` makes it), so the shim keeps it among
//! its PDs over the protection domain's simulator PD. Queues made on a parent domain with
//! allocators ask them for their buffers as libmlx5 does (the buffer, then the doorbell
//! record); an allocator that answers `IBV_ALLOCATOR_USE_DEFAULT` leaves the buffer to the
//! simulator, and memory an allocator gives is where the simulated queue lives, given back
//! through the domain's `free` when the queue goes.

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::{Arc, Mutex};

use mlx5_sim::host::{QueueAllocator, QueueBuffer, QueueMemory};

use rdma_sys::*;

use crate::errno::null;
use crate::objects::{Given, Parent, Pd};
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
    /// An SRQ's WQEs.
    pub(crate) const SRQ: u64 = 1 << 32 | 4;
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

    /// Make a queue with `make`, the parent domain `pd`'s allocators (when `pd` is one with
    /// allocators) asked for each of its buffers as libmlx5 asks them: the queue's buffer,
    /// then its doorbell record. An allocator may leave a buffer to the simulator
    /// (`IBV_ALLOCATOR_USE_DEFAULT`), give memory of its own (the simulated queue lives in
    /// it), or fail (NULL: ENOMEM). The memory given is kept under `owner` (the queue's C
    /// object) and goes back through the domain's `free` when the queue is destroyed
    /// ([`Shim::give_back`]); if `make` fails it goes back at once.
    pub(crate) fn with_domain_memory<T>(
        &mut self,
        pd: *mut ibv_pd,
        make: impl FnOnce(&mut Self) -> Result<(T, usize), c_int>,
    ) -> Result<T, c_int> {
        let allocators = self.domains.parents.get(&key(pd)).and_then(|p| Some((p.alloc?, p.free, p.pd_context)));
        let Some((alloc, free, pd_context)) = allocators else { return make(self).map(|(t, _)| t) };
        let given: Arc<Mutex<Vec<(usize, u64)>>> = Arc::default();
        let record = Arc::clone(&given);
        let parent = key(pd);
        let hook = QueueAllocator(Arc::new(move |len: usize, kind: QueueBuffer| {
            let (res, align, len) = match kind {
                QueueBuffer::Qp { stride } => (res_type::QP, qp_alignment(len, stride), len),
                QueueBuffer::Cq => (res_type::CQ, PAGE, len),
                QueueBuffer::Srq => (res_type::SRQ, PAGE, len),
                QueueBuffer::Dbr => (res_type::DBR, DBR_SIZE, DBR_SIZE),
            };
            // SAFETY: the program's allocator, called as libmlx5 calls it.
            let got = unsafe { alloc(parent as *mut ibv_pd, pd_context as *mut c_void, len, align, res) };
            if got as usize == USE_DEFAULT {
                QueueMemory::Default
            } else if got.is_null() {
                QueueMemory::Failed
            } else {
                if let Ok(mut g) = record.lock() {
                    g.push((got as usize, res));
                }
                QueueMemory::Given(got as u64)
            }
        }));
        self.sim.simulator_mut().set_queue_allocator(Some(hook));
        let made = make(self);
        self.sim.simulator_mut().set_queue_allocator(None);
        let bufs = given.lock().map(|mut g| std::mem::take(&mut *g)).unwrap_or_default();
        let memory = Given { parent, free, pd_context, bufs };
        match made {
            Ok((t, owner)) => {
                if !memory.bufs.is_empty() {
                    self.domains.given.insert(owner, memory);
                }
                Ok(t)
            }
            Err(e) => {
                memory.give_back();
                Err(e)
            }
        }
    }

    /// The queue whose C object is `owner` is gone: the memory a parent domain's allocator
    /// gave for it goes back through the domain's `free`, as libmlx5 gives it back.
    pub(crate) fn give_back(&mut self, owner: usize) {
        if let Some(g) = self.domains.given.remove(&owner) {
            g.give_back();
        }
    }
}

/// The alignment libmlx5 asks of an allocator for a QP's buffer of `len` bytes whose largest
/// WQE stride is `stride` (`mlx5_set_custom_qp_alignment`): the stride, or the buffer's page
/// (its page-rounded size, to a power of two) over the QPC's 64 page-offset quanta.
fn qp_alignment(len: usize, stride: u32) -> usize {
    let page = len.next_multiple_of(PAGE).checked_next_power_of_two().unwrap_or(PAGE);
    (stride as usize).max(page / 64)
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
