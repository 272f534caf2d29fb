//! PDs, MRs over the program's own memory, and mlx5dv mkeys.

use std::ffi::{c_int, c_void};
use std::ptr;

use mlx5_dv::{AccessFlags, MkeyInitAttr, MkeyInitFlags, ReregFlags};
use mlx5_hw::sys::mlx5dv::{mlx5dv_mkey, mlx5dv_mkey_err, mlx5dv_mkey_init_attr};
use rdma_sys::*;

use crate::errno::{code, null, set_errno};
use crate::objects::{ExternalMemory, Mkey, Mr, NO_REGION, Pd, RegionKey};
use crate::state::{Shim, key, with};

impl ExternalMemory {
    /// Hold `[addr, addr + len)`: a registration that holds it already, or a new one.
    pub(crate) fn map(&mut self, sim: &mut crate::state::SimBackend, addr: u64, len: u64) -> Result<RegionKey, c_int> {
        let end = addr.checked_add(len).ok_or(libc::EINVAL)?;
        let holder = self.regions.range_mut(..=(addr, u64::MAX)).rev().find(|((_, e), _)| *e >= end);
        if let Some((&k, (_, n))) = holder {
            *n += 1;
            return Ok(k);
        }
        let size = usize::try_from(len).map_err(|_| libc::EINVAL)?;
        // SAFETY: the program registered these bytes; they stay valid while an MR covers
        // them, as ibv_reg_mr requires.
        let buf = unsafe { sim.register_memory(addr as *mut u8, size) }.map_err(|e| e.errno())?;
        self.regions.insert((addr, end), (buf, 1));
        Ok((addr, end))
    }

    /// One holder of the registration `k` is gone; end it after its last.
    pub(crate) fn unmap(&mut self, sim: &mut crate::state::SimBackend, k: RegionKey) {
        let Some((buf, n)) = self.regions.get_mut(&k) else { return };
        *n = n.saturating_sub(1);
        if *n == 0 {
            let buf = *buf;
            self.regions.remove(&k);
            let _ = sim.free_buf(&buf);
        }
    }
}

impl Shim {
    /// The PD behind a program's pointer.
    pub(crate) fn pd(&self, pd: *const ibv_pd) -> Result<&Pd, c_int> {
        self.pds.get(&key(pd)).ok_or(libc::EINVAL)
    }

    fn alloc_pd(&mut self, ctx: *mut ibv_context) -> Result<*mut ibv_pd, c_int> {
        let h = self.context(ctx)?.handle;
        let handle = self.sim.alloc_pd(h).map_err(|e| e.errno())?;
        let mut c = Box::new(ibv_pd { context: ctx, handle: 0 });
        c.handle = handle.id();
        let p: *mut ibv_pd = &mut *c;
        self.pds.insert(key(p), Pd { c, handle });
        Ok(p)
    }

    fn reg_mr(
        &mut self,
        pd: *mut ibv_pd,
        addr: *mut c_void,
        len: usize,
        iova: u64,
        access: c_int,
    ) -> Result<*mut ibv_mr, c_int> {
        let p = self.pd(pd)?;
        let (ctx, handle) = (p.c.context, p.handle);
        let access = AccessFlags::from_bits_retain(access as u32);
        if access.contains(AccessFlags::ON_DEMAND) && iova == addr as u64 {
            // An ODP MR pins nothing: the simulator reaches the pages when the device touches
            // them (an implicit one is addr NULL, length SIZE_MAX).
            return self.reg_odp_mr(pd, handle, addr, len, access);
        }
        if addr.is_null() || len == 0 || iova != addr as u64 {
            // The simulator's MRs are addressed by their virtual address; a different IOVA
            // is not simulated.
            return Err(libc::EINVAL);
        }
        let region = self.memory.map(&mut self.sim, addr as u64, len as u64)?;
        let mr = match self.sim.reg_mr(handle, addr as u64, len as u64, access) {
            Ok(mr) => mr,
            Err(e) => {
                self.memory.unmap(&mut self.sim, region);
                return Err(e.errno());
            }
        };
        let mut c = Box::new(ibv_mr { context: ctx, pd, addr, length: len, handle: 0, lkey: mr.lkey, rkey: mr.rkey });
        c.handle = mr.handle.id();
        let p: *mut ibv_mr = &mut *c;
        self.mrs.insert(key(p), Mr { _c: c, mr, region });
        Ok(p)
    }

    /// An ODP MR: no memory is registered for it.
    fn reg_odp_mr(
        &mut self,
        pd: *mut ibv_pd,
        handle: mlx5_dv::PdHandle,
        addr: *mut c_void,
        len: usize,
        access: AccessFlags,
    ) -> Result<*mut ibv_mr, c_int> {
        let ctx = self.pd(pd)?.c.context;
        let mr = self.sim.reg_mr(handle, addr as u64, len as u64, access).map_err(|e| e.errno())?;
        let mut c = Box::new(ibv_mr { context: ctx, pd, addr, length: len, handle: 0, lkey: mr.lkey, rkey: mr.rkey });
        c.handle = mr.handle.id();
        let p: *mut ibv_mr = &mut *c;
        self.mrs.insert(key(p), Mr { _c: c, mr, region: NO_REGION });
        Ok(p)
    }

    /// The C objects of a closed context, whose simulator objects the close released: an MR
    /// also gives back its hold on the program's memory.
    pub(crate) fn forget_memory_of(&mut self, ctx: *const rdma_sys::ibv_context) {
        let mrs: Vec<usize> = self.mrs.iter().filter(|(_, m)| ptr::eq(m._c.context, ctx)).map(|(k, _)| *k).collect();
        for k in mrs {
            if let Some(m) = self.mrs.remove(&k) {
                self.memory.unmap(&mut self.sim, m.region);
            }
        }
        self.pds.retain(|_, p| !ptr::eq(p.c.context, ctx));
        let pds = &self.pds;
        self.domains.forget(ctx, |pd| pds.contains_key(&pd));
    }

    fn dereg_mr(&mut self, mr: *mut ibv_mr) -> c_int {
        let Some(m) = self.mrs.get(&key(mr)) else { return libc::EINVAL };
        if let Err(e) = self.sim.dereg_mr(&m.mr) {
            return code(&e);
        }
        if let Some(m) = self.mrs.remove(&key(mr)) {
            self.memory.unmap(&mut self.sim, m.region);
        }
        0
    }

    /// `ibv_rereg_mr` after libibverbs' input checks: a new range is mapped before the
    /// simulator's call and the old one given back after it.
    fn rereg_mr(
        &mut self,
        mr: *mut ibv_mr,
        flags: ReregFlags,
        pd: *mut ibv_pd,
        (addr, len): (u64, u64),
        access: AccessFlags,
    ) -> Result<(), c_int> {
        let (old, old_region) = self.mrs.get(&key(mr)).map(|m| (m.mr, m.region)).ok_or(libc::EINVAL)?;
        let new_pd = if flags.contains(ReregFlags::CHANGE_PD) { Some(self.pd(pd)?.handle) } else { None };
        let translate = flags.contains(ReregFlags::CHANGE_TRANSLATION);
        // A new translation is pinned unless the MR is (or becomes) an ODP MR, which pins
        // nothing: its pages need not even be mapped.
        let odp = if flags.contains(ReregFlags::CHANGE_ACCESS) {
            access.contains(AccessFlags::ON_DEMAND)
        } else {
            old_region == NO_REGION
        };
        let region = match (translate, odp) {
            (true, false) => self.memory.map(&mut self.sim, addr, len)?,
            (true, true) => NO_REGION,
            (false, _) => old_region,
        };
        let new = match self.sim.rereg_mr(&old, flags.bits(), new_pd, addr, len, access) {
            Ok(m) => m,
            Err(e) => {
                if translate && region != NO_REGION {
                    self.memory.unmap(&mut self.sim, region);
                }
                return Err(e.errno());
            }
        };
        if translate && old_region != NO_REGION {
            self.memory.unmap(&mut self.sim, old_region);
        }
        let m = self.mrs.get_mut(&key(mr)).ok_or(libc::EINVAL)?;
        m.mr = new;
        m.region = region;
        // What ibv_cmd_rereg_mr and ibv_rereg_mr write back into the program's struct.
        let c = &mut *m._c;
        (c.lkey, c.rkey) = (new.lkey, new.rkey);
        if flags.contains(ReregFlags::CHANGE_PD) {
            c.pd = pd;
        }
        if translate {
            c.addr = addr as *mut c_void;
            c.length = len as usize;
        }
        Ok(())
    }

    fn create_mkey(&mut self, attr: &mut mlx5dv_mkey_init_attr) -> Result<*mut mlx5dv_mkey, c_int> {
        let pd = self.pd(attr.pd)?.handle;
        let a = MkeyInitAttr {
            pd,
            create_flags: MkeyInitFlags::from_bits_retain(attr.create_flags),
            max_entries: attr.max_entries,
        };
        let mkey = self.sim.create_mkey(&a).map_err(|e| e.errno())?;
        attr.max_entries = mkey.max_entries;
        let mut c = Box::new(mlx5dv_mkey { lkey: mkey.lkey, rkey: mkey.rkey });
        let p: *mut mlx5dv_mkey = &mut *c;
        self.mkeys.insert(key(p), Mkey { c, mkey });
        Ok(p)
    }

    /// The mkey behind a program's pointer.
    /// The program may have set a new tag byte in the struct's keys (as libmlx5 reads them
    /// at each UMR), so the keys are the struct's, not those of the create.
    pub(crate) fn mkey(&self, mkey: *const mlx5dv_mkey) -> Result<mlx5_dv::Mkey, c_int> {
        let m = self.mkeys.get(&key(mkey)).ok_or(libc::EINVAL)?;
        Ok(mlx5_dv::Mkey { lkey: m.c.lkey, rkey: m.c.rkey, ..m.mkey })
    }
}

/// `ibv_alloc_pd`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    with(null, |s| s.alloc_pd(context).unwrap_or_else(null))
}

/// `ibv_dealloc_pd`: EBUSY while objects use it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(h) = s.pd(pd).map(|p| p.handle) else { return libc::EINVAL };
            if s.domains.is_parent(pd) {
                return s.dealloc_parent_domain(pd);
            }
            // libmlx5 counts the parent domains over a PD.
            if s.domains.holds(pd) {
                return libc::EBUSY;
            }
            match s.sim.dealloc_pd(h) {
                Ok(()) => {
                    s.pds.remove(&key(pd));
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// `IBV_REREG_MR_ERR_INPUT`: libibverbs refused the arguments (errno EINVAL).
const REREG_MR_ERR_INPUT: c_int = -1;
/// `IBV_REREG_MR_ERR_CMD`: the provider's (here the simulator's) call failed; errno says why.
const REREG_MR_ERR_CMD: c_int = -4;

/// `ibv_rereg_mr`: 0, or `IBV_REREG_MR_ERR_INPUT` / `IBV_REREG_MR_ERR_CMD` with errno set.
/// The program's struct gets the new keys (and the new PD, address and length it asked for).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    let access = AccessFlags::from_bits_retain(access as u32);
    let flags = match ReregFlags::check_input(flags as u32, addr as u64, length as u64, access) {
        Ok(f) => f,
        Err(_) => {
            set_errno(libc::EINVAL);
            return REREG_MR_ERR_INPUT;
        }
    };
    let fail = |e| {
        set_errno(e);
        REREG_MR_ERR_CMD
    };
    with(fail, |s| match s.rereg_mr(mr, flags, pd, (addr as u64, length as u64), access) {
        Ok(()) => 0,
        Err(e) => fail(e),
    })
}

/// `ibv_reg_mr`: the program's bytes, read and written in place by the simulated NIC.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, length: usize, access: c_int) -> *mut ibv_mr {
    with(null, |s| s.reg_mr(pd, addr, length, addr as u64, access).unwrap_or_else(null))
}

/// `ibv_reg_mr_iova`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    with(null, |s| s.reg_mr(pd, addr, length, iova, access).unwrap_or_else(null))
}

/// `ibv_reg_mr_iova2` (what the header's `ibv_reg_mr` calls with optional access flags).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    with(null, |s| s.reg_mr(pd, addr, length, iova, access as c_int).unwrap_or_else(null))
}

/// `ibv_dereg_mr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    with(|e| e, |s| s.dereg_mr(mr))
}

/// `mlx5dv_create_mkey`: writes back the rounded `max_entries`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_create_mkey(attr: *mut mlx5dv_mkey_init_attr) -> *mut mlx5dv_mkey {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    with(null, |s| s.create_mkey(unsafe { &mut *attr }).unwrap_or_else(null))
}

/// `mlx5dv_destroy_mkey`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_destroy_mkey(mkey: *mut mlx5dv_mkey) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(m) = s.mkey(mkey) else { return libc::EINVAL };
            match s.sim.destroy_mkey(&m) {
                Ok(()) => {
                    s.mkeys.remove(&key(mkey));
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// `_mlx5dv_mkey_check` (the header's `mlx5dv_mkey_check`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _mlx5dv_mkey_check(
    mkey: *mut mlx5dv_mkey,
    err_info: *mut mlx5dv_mkey_err,
    err_info_size: usize,
) -> c_int {
    if err_info.is_null() || err_info_size < std::mem::size_of::<mlx5dv_mkey_err>() {
        return libc::EINVAL;
    }
    with(
        |e| e,
        |s| {
            let Ok(m) = s.mkey(mkey) else { return libc::EINVAL };
            match s.sim.mkey_check(&m) {
                Ok(r) => {
                    // SAFETY: the caller's out-parameter, checked large enough above.
                    unsafe {
                        std::ptr::write_bytes(err_info, 0, 1);
                        (*err_info).err_type = r.err_type as u32;
                        (*err_info).err.sig.actual_value = r.sig.actual_value;
                        (*err_info).err.sig.expected_value = r.sig.expected_value;
                        (*err_info).err.sig.offset = r.sig.offset;
                    }
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// `verbs_context.advise_mr`, which the header's `ibv_advise_mr` calls (on kernel contexts;
/// a VFIO context has none, and the header answers EOPNOTSUPP): 0 or the errno.
pub(crate) unsafe extern "C" fn advise_mr(
    pd: *mut ibv_pd,
    advice: ib_uverbs_advise_mr_advice::Type,
    flags: u32,
    sg_list: *mut ibv_sge,
    num_sge: u32,
) -> c_int {
    let sges: Vec<mlx5_dv::Sge> = if sg_list.is_null() || num_sge == 0 {
        Vec::new()
    } else {
        // SAFETY: the caller's array of `num_sge` SGEs.
        unsafe { std::slice::from_raw_parts(sg_list, num_sge as usize) }
            .iter()
            .map(|s| mlx5_dv::Sge { addr: s.addr, length: s.length, lkey: s.lkey })
            .collect()
    };
    with(
        |e| e,
        |s| {
            let h = match s.pd(pd) {
                Ok(p) => p.handle,
                Err(e) => return e,
            };
            s.sim.advise_mr(h, advice, flags, &sges).map_or_else(|e| e.errno(), |()| 0)
        },
    )
}
