//! The objects a [`crate::HwBackend`] holds: one [`HandleTable`] per kind, the use counts
//! between them, and the order a context's objects are destroyed in.
//!
//! Nothing here calls C: the pointers are only stored, so the rules are tested without a device.

use mlx5_dv::errno::EBUSY;
use mlx5_dv::{
    BackendId, BufHandle, ContextHandle, CqHandle, CryptoLoginHandle, DekHandle, DevxObjHandle, EqHandle, Error,
    Handle, HandleTable, MkeyHandle, MrHandle, MsiVectorHandle, Op, PdHandle, QpHandle, Result, UarHandle, UmemHandle,
};
use rdma_sys::{ibv_context, ibv_cq, ibv_mr, ibv_pd, ibv_qp, ibv_qp_ex, ibv_srq};

use crate::sys::mlx5dv::{
    mlx5dv_crypto_login_obj, mlx5dv_dek, mlx5dv_devx_eq, mlx5dv_devx_msi_vector, mlx5dv_devx_obj, mlx5dv_devx_uar,
    mlx5dv_devx_umem, mlx5dv_mkey, mlx5dv_qp_ex,
};

pub(crate) struct HwCtx {
    pub(crate) ptr: *mut ibv_context,
}

pub(crate) struct HwPd {
    pub(crate) ptr: *mut ibv_pd,
    pub(crate) ctx: ContextHandle,
}

pub(crate) struct HwMkey {
    pub(crate) ptr: *mut mlx5dv_mkey,
    pub(crate) pd: PdHandle,
    pub(crate) ctx: ContextHandle,
}

pub(crate) struct HwDek {
    pub(crate) ptr: *mut mlx5dv_dek,
    pub(crate) ctx: ContextHandle,
}

pub(crate) struct HwLogin {
    pub(crate) ptr: *mut mlx5dv_crypto_login_obj,
    pub(crate) ctx: ContextHandle,
}

pub(crate) struct HwBuf {
    pub(crate) ptr: *mut u8,
    pub(crate) layout: std::alloc::Layout,
    /// A udmabuf's mapping: `ptr` maps the memfd, and the two fds are closed with it.
    pub(crate) dmabuf: Option<crate::udmabuf::Udmabuf>,
    /// libmlx5 owns the memory (an EQ ring): it is read and written here, never freed.
    pub(crate) borrowed: bool,
}

pub(crate) struct HwMr {
    pub(crate) ptr: *mut ibv_mr,
    pub(crate) pd: PdHandle,
    pub(crate) ctx: ContextHandle,
    /// The buffer the MR covers; `None` for an ODP MR, which may cover any memory.
    pub(crate) buf: Option<BufHandle>,
}

impl HwMr {
    /// What the MR holds: its PD and its buffer.
    fn deps(&self) -> Vec<Dep> {
        std::iter::once(Dep::Pd(self.pd)).chain(self.buf.map(Dep::Buf)).collect()
    }
}

/// One DM: the library's `ibv_dm`, its context, and the stand-in buffer its MRs count on
/// (so that this backend refuses to forget a DM an MR still uses).
pub(crate) struct HwDm {
    pub(crate) ptr: *mut rdma_sys::ibv_dm,
    pub(crate) ctx: ContextHandle,
    pub(crate) buf: BufHandle,
}

/// One memory window: the library's `ibv_mw`.
pub(crate) struct HwMw {
    pub(crate) ptr: *mut rdma_sys::ibv_mw,
}

pub(crate) struct HwCq {
    pub(crate) ptr: *mut ibv_cq,
    pub(crate) ctx: ContextHandle,
}

pub(crate) struct HwQp {
    pub(crate) ptr: *mut ibv_qp,
    pub(crate) qpx: *mut ibv_qp_ex,
    /// NULL when the QP was created without mlx5dv send ops.
    pub(crate) mqpx: *mut mlx5dv_qp_ex,
    pub(crate) ctx: ContextHandle,
    pub(crate) pd: PdHandle,
    pub(crate) cqs: [CqHandle; 2],
    /// The SRQ its receives come from.
    pub(crate) srq: Option<mlx5_dv::SrqHandle>,
}

pub(crate) struct HwSrq {
    pub(crate) ptr: *mut ibv_srq,
    pub(crate) ctx: ContextHandle,
    pub(crate) pd: PdHandle,
}

pub(crate) struct HwDevxObj {
    pub(crate) ptr: *mut mlx5dv_devx_obj,
    pub(crate) ctx: ContextHandle,
}

pub(crate) struct HwUar {
    pub(crate) ptr: *mut mlx5dv_devx_uar,
    pub(crate) ctx: ContextHandle,
}

pub(crate) struct HwUmem {
    pub(crate) ptr: *mut mlx5dv_devx_umem,
    pub(crate) ctx: ContextHandle,
    pub(crate) buf: BufHandle,
}

pub(crate) struct HwMsi {
    pub(crate) ptr: *mut mlx5dv_devx_msi_vector,
    pub(crate) ctx: ContextHandle,
}

pub(crate) struct HwEq {
    pub(crate) ptr: *mut mlx5dv_devx_eq,
    pub(crate) ctx: ContextHandle,
    /// The borrowed buffer over the driver's ring.
    pub(crate) ring: BufHandle,
}

/// An object another one uses: it counts one user per use and cannot be removed while used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dep {
    Pd(PdHandle),
    Buf(BufHandle),
    Cq(CqHandle),
    Srq(mlx5_dv::SrqHandle),
}

/// One object of a context, as [`Objects::teardown_order`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Obj {
    Qp(QpHandle),
    Srq(mlx5_dv::SrqHandle),
    Mr(MrHandle),
    Cq(CqHandle),
    Mkey(MkeyHandle),
    Dek(DekHandle),
    Login(CryptoLoginHandle),
    Pd(PdHandle),
    Devx(DevxObjHandle),
    Umem(UmemHandle),
    Eq(EqHandle),
    Uar(UarHandle),
    Msi(MsiVectorHandle),
}

/// Every object of one backend instance, by handle.
pub(crate) struct Objects {
    pub(crate) contexts: HandleTable<ContextHandle, HwCtx>,
    pub(crate) pds: HandleTable<PdHandle, HwPd>,
    pub(crate) mkeys: HandleTable<MkeyHandle, HwMkey>,
    pub(crate) bufs: HandleTable<BufHandle, HwBuf>,
    pub(crate) mrs: HandleTable<MrHandle, HwMr>,
    pub(crate) cqs: HandleTable<CqHandle, HwCq>,
    pub(crate) qps: HandleTable<QpHandle, HwQp>,
    pub(crate) deks: HandleTable<DekHandle, HwDek>,
    pub(crate) logins: HandleTable<CryptoLoginHandle, HwLogin>,
    pub(crate) devx_objs: HandleTable<DevxObjHandle, HwDevxObj>,
    pub(crate) uars: HandleTable<UarHandle, HwUar>,
    pub(crate) umems: HandleTable<UmemHandle, HwUmem>,
    pub(crate) msis: HandleTable<MsiVectorHandle, HwMsi>,
    pub(crate) eqs: HandleTable<EqHandle, HwEq>,
    pub(crate) srqs: HandleTable<mlx5_dv::SrqHandle, HwSrq>,
    pub(crate) dms: HandleTable<mlx5_dv::DmHandle, HwDm>,
    pub(crate) mws: HandleTable<mlx5_dv::MwHandle, HwMw>,
}

/// The object behind `h` if nothing uses it: EBUSY with `busy(users)` otherwise, EINVAL for a
/// stale or foreign handle. Checked before the C destroy call, which may fail and keep it.
pub(crate) fn unused<H: Handle, T>(
    t: &HandleTable<H, T>,
    h: H,
    op: Op,
    busy: impl FnOnce(u32) -> String,
) -> Result<&T> {
    let users = t.users(h, op)?;
    if users > 0 {
        return Err(Error::new(op, EBUSY, busy(users)));
    }
    t.get(h, op)
}

impl Objects {
    pub(crate) fn new(backend: BackendId) -> Self {
        Objects {
            contexts: HandleTable::new(backend),
            pds: HandleTable::new(backend),
            mkeys: HandleTable::new(backend),
            bufs: HandleTable::new(backend),
            mrs: HandleTable::new(backend),
            cqs: HandleTable::new(backend),
            qps: HandleTable::new(backend),
            deks: HandleTable::new(backend),
            logins: HandleTable::new(backend),
            devx_objs: HandleTable::new(backend),
            uars: HandleTable::new(backend),
            umems: HandleTable::new(backend),
            msis: HandleTable::new(backend),
            eqs: HandleTable::new(backend),
            srqs: HandleTable::new(backend),
            dms: HandleTable::new(backend),
            mws: HandleTable::new(backend),
        }
    }

    fn acquire(&mut self, d: Dep, op: Op) -> Result<()> {
        match d {
            Dep::Pd(h) => self.pds.acquire(h, op),
            Dep::Buf(h) => self.bufs.acquire(h, op),
            Dep::Cq(h) => self.cqs.acquire(h, op),
            Dep::Srq(h) => self.srqs.acquire(h, op),
        }
    }

    fn release(&mut self, deps: &[Dep]) {
        for d in deps {
            match *d {
                Dep::Pd(h) => self.pds.release(h),
                Dep::Buf(h) => self.bufs.release(h),
                Dep::Cq(h) => self.cqs.release(h),
                Dep::Srq(h) => self.srqs.release(h),
            }
        }
    }

    /// Count one use of each of `deps`, all or none.
    fn acquire_all(&mut self, deps: &[Dep], op: Op) -> Result<()> {
        for (i, d) in deps.iter().enumerate() {
            if let Err(e) = self.acquire(*d, op) {
                self.release(&deps[..i]);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Store an mkey and count it on its PD.
    pub(crate) fn add_mkey(&mut self, op: Op, m: HwMkey) -> Result<MkeyHandle> {
        let deps = [Dep::Pd(m.pd)];
        self.acquire_all(&deps, op)?;
        self.mkeys.insert(op, m).inspect_err(|_| self.release(&deps))
    }

    /// Store an MR and count it on its PD and buffer.
    pub(crate) fn add_mr(&mut self, op: Op, m: HwMr) -> Result<MrHandle> {
        let deps = m.deps();
        self.acquire_all(&deps, op)?;
        self.mrs.insert(op, m).inspect_err(|_| self.release(&deps))
    }

    /// Store a QP and count it on its PD and both CQs (twice on one CQ used for both).
    pub(crate) fn add_qp(&mut self, op: Op, q: HwQp) -> Result<QpHandle> {
        let mut deps = vec![Dep::Pd(q.pd), Dep::Cq(q.cqs[0]), Dep::Cq(q.cqs[1])];
        deps.extend(q.srq.map(Dep::Srq));
        self.acquire_all(&deps, op)?;
        self.qps.insert(op, q).inspect_err(|_| self.release(&deps))
    }

    /// Store an SRQ and count it on its PD.
    pub(crate) fn add_srq(&mut self, op: Op, s: HwSrq) -> Result<mlx5_dv::SrqHandle> {
        let deps = [Dep::Pd(s.pd)];
        self.acquire_all(&deps, op)?;
        self.srqs.insert(op, s).inspect_err(|_| self.release(&deps))
    }

    /// Remove an SRQ (no QP uses it) and release its PD.
    pub(crate) fn take_srq(&mut self, h: mlx5_dv::SrqHandle, op: Op) -> Result<HwSrq> {
        let s = self.srqs.take(h, op)?;
        self.release(&[Dep::Pd(s.pd)]);
        Ok(s)
    }

    /// Store a umem and count it on its buffer.
    pub(crate) fn add_umem(&mut self, op: Op, u: HwUmem) -> Result<UmemHandle> {
        let deps = [Dep::Buf(u.buf)];
        self.acquire_all(&deps, op)?;
        self.umems.insert(op, u).inspect_err(|_| self.release(&deps))
    }

    /// Remove a umem and release its buffer.
    pub(crate) fn take_umem(&mut self, h: UmemHandle, op: Op) -> Result<HwUmem> {
        let u = self.umems.take(h, op)?;
        self.release(&[Dep::Buf(u.buf)]);
        Ok(u)
    }

    /// Remove an mkey (nothing uses one) and release its PD.
    pub(crate) fn take_mkey(&mut self, h: MkeyHandle, op: Op) -> Result<HwMkey> {
        let m = self.mkeys.take(h, op)?;
        self.release(&[Dep::Pd(m.pd)]);
        Ok(m)
    }

    /// Remove an MR (nothing uses one) and release its PD and buffer.
    /// Count a re-registered MR on its new PD and buffer instead of its old ones.
    pub(crate) fn move_mr(&mut self, h: MrHandle, pd: PdHandle, buf: Option<BufHandle>, op: Op) -> Result<()> {
        let new: Vec<Dep> = std::iter::once(Dep::Pd(pd)).chain(buf.map(Dep::Buf)).collect();
        self.acquire_all(&new, op)?;
        let Ok(m) = self.mrs.get_mut(h, op) else {
            self.release(&new);
            return Err(Error::new(op, mlx5_dv::errno::EINVAL, "no such MR"));
        };
        let old = m.deps();
        (m.pd, m.buf) = (pd, buf);
        self.release(&old);
        Ok(())
    }

    pub(crate) fn take_mr(&mut self, h: MrHandle, op: Op) -> Result<HwMr> {
        let m = self.mrs.take(h, op)?;
        self.release(&m.deps());
        Ok(m)
    }

    /// Remove a QP (nothing uses one) and release its PD and CQs.
    pub(crate) fn take_qp(&mut self, h: QpHandle, op: Op) -> Result<HwQp> {
        let q = self.qps.take(h, op)?;
        self.release(&[Dep::Pd(q.pd), Dep::Cq(q.cqs[0]), Dep::Cq(q.cqs[1])]);
        if let Some(s) = q.srq {
            self.release(&[Dep::Srq(s)]);
        }
        Ok(q)
    }

    /// What is open on `ctx`, in the order it must be destroyed: DEVX objects newest first
    /// (they name anything by number), umems, QPs (they use CQs and PDs), MRs, CQs, mkeys,
    /// DEKs, login objects, EQs (once nothing covers their rings), UARs, MSI vectors, then
    /// PDs. Buffers belong to no context and outlive it.
    pub(crate) fn teardown_order(&self, ctx: ContextHandle) -> Vec<Obj> {
        let mut order: Vec<Obj> = Vec::new();
        order.extend(self.devx_objs.handles_where(|o| o.ctx == ctx).into_iter().rev().map(Obj::Devx));
        order.extend(self.umems.handles_where(|u| u.ctx == ctx).into_iter().map(Obj::Umem));
        order.extend(self.qps.handles_where(|q| q.ctx == ctx).into_iter().map(Obj::Qp));
        order.extend(self.srqs.handles_where(|s| s.ctx == ctx).into_iter().map(Obj::Srq));
        order.extend(self.mrs.handles_where(|m| m.ctx == ctx).into_iter().map(Obj::Mr));
        order.extend(self.cqs.handles_where(|c| c.ctx == ctx).into_iter().map(Obj::Cq));
        order.extend(self.mkeys.handles_where(|m| m.ctx == ctx).into_iter().map(Obj::Mkey));
        order.extend(self.deks.handles_where(|d| d.ctx == ctx).into_iter().map(Obj::Dek));
        order.extend(self.logins.handles_where(|l| l.ctx == ctx).into_iter().map(Obj::Login));
        order.extend(self.eqs.handles_where(|e| e.ctx == ctx).into_iter().map(Obj::Eq));
        order.extend(self.uars.handles_where(|u| u.ctx == ctx).into_iter().map(Obj::Uar));
        order.extend(self.msis.handles_where(|m| m.ctx == ctx).into_iter().map(Obj::Msi));
        order.extend(self.pds.handles_where(|p| p.ctx == ctx).into_iter().map(Obj::Pd));
        order
    }
}

#[cfg(test)]
mod tests {
    use std::ptr::null_mut;

    use mlx5_dv::errno::EINVAL;

    use super::*;

    fn errno<T>(r: Result<T>) -> Option<i32> {
        r.err().map(|e| e.errno())
    }

    struct World {
        o: Objects,
        ctx: ContextHandle,
        pd: PdHandle,
        buf: BufHandle,
        cq: CqHandle,
    }

    /// A context with one PD, buffer and CQ; null pointers, as nothing here calls C.
    fn world() -> Result<World> {
        let mut o = Objects::new(BackendId::fresh());
        let ctx = o.contexts.insert(Op::OpenDevice, HwCtx { ptr: null_mut() })?;
        let pd = o.pds.insert(Op::AllocPd, HwPd { ptr: null_mut(), ctx })?;
        let layout = std::alloc::Layout::new::<u8>();
        let buf = o.bufs.insert(Op::AllocBuf, HwBuf { ptr: null_mut(), layout, dmabuf: None, borrowed: false })?;
        let cq = o.cqs.insert(Op::CreateCq, HwCq { ptr: null_mut(), ctx })?;
        Ok(World { o, ctx, pd, buf, cq })
    }

    fn qp(w: &World, cqs: [CqHandle; 2]) -> HwQp {
        HwQp { ptr: null_mut(), qpx: null_mut(), mqpx: null_mut(), ctx: w.ctx, pd: w.pd, cqs, srq: None }
    }

    #[test]
    fn users_hold_their_pd_buffer_and_cqs_until_taken() -> Result<()> {
        let mut w = world()?;
        let busy = |n| format!("{n} user(s)");
        let m = w.o.add_mkey(Op::CreateMkey, HwMkey { ptr: null_mut(), pd: w.pd, ctx: w.ctx })?;
        let mr = w.o.add_mr(Op::RegMr, HwMr { ptr: null_mut(), pd: w.pd, ctx: w.ctx, buf: Some(w.buf) })?;
        let q = w.o.add_qp(Op::CreateQp, qp(&w, [w.cq, w.cq]))?;
        assert_eq!(w.o.pds.users(w.pd, Op::DeallocPd)?, 3);
        assert_eq!(w.o.cqs.users(w.cq, Op::DestroyCq)?, 2, "one use per queue");
        assert_eq!(w.o.bufs.users(w.buf, Op::FreeBuf)?, 1);
        let e = unused(&w.o.pds, w.pd, Op::DeallocPd, busy).err();
        assert_eq!(e.as_ref().map(|e| (e.errno(), e.reason())), Some((EBUSY, "3 user(s)")));

        w.o.take_qp(q, Op::DestroyQp)?;
        assert_eq!(w.o.cqs.users(w.cq, Op::DestroyCq)?, 0);
        assert!(unused(&w.o.cqs, w.cq, Op::DestroyCq, busy).is_ok());
        w.o.take_mr(mr, Op::DeregMr)?;
        assert!(unused(&w.o.bufs, w.buf, Op::FreeBuf, busy).is_ok());
        assert_eq!(errno(unused(&w.o.pds, w.pd, Op::DeallocPd, busy)), Some(EBUSY));
        w.o.take_mkey(m, Op::DestroyMkey)?;
        assert!(unused(&w.o.pds, w.pd, Op::DeallocPd, busy).is_ok());

        // Taken handles are stale: a second destroy is EINVAL and releases nothing twice.
        assert_eq!(errno(w.o.take_mkey(m, Op::DestroyMkey)), Some(EINVAL));
        assert_eq!(errno(w.o.take_qp(q, Op::DestroyQp)), Some(EINVAL));
        assert_eq!(w.o.pds.users(w.pd, Op::DeallocPd)?, 0);
        Ok(())
    }

    #[test]
    fn a_stale_or_foreign_dependency_is_einval_and_counts_nothing() -> Result<()> {
        let mut w = world()?;
        let gone = w.o.cqs.insert(Op::CreateCq, HwCq { ptr: null_mut(), ctx: w.ctx })?;
        w.o.cqs.remove(gone, Op::DestroyCq)?;
        assert_eq!(errno(w.o.add_qp(Op::CreateQp, qp(&w, [w.cq, gone]))), Some(EINVAL));
        assert_eq!(w.o.pds.users(w.pd, Op::DeallocPd)?, 0, "the PD acquired first is released");
        assert_eq!(w.o.cqs.users(w.cq, Op::DestroyCq)?, 0);
        assert!(w.o.qps.is_empty());

        let foreign = PdHandle::new(BackendId::fresh(), w.pd.id());
        let mr = HwMr { ptr: null_mut(), pd: foreign, ctx: w.ctx, buf: Some(w.buf) };
        assert_eq!(errno(w.o.add_mr(Op::RegMr, mr)), Some(EINVAL));
        assert_eq!(w.o.bufs.users(w.buf, Op::FreeBuf)?, 0);
        assert_eq!(errno(unused(&w.o.pds, foreign, Op::DeallocPd, |_| String::new())), Some(EINVAL));
        Ok(())
    }

    #[test]
    fn a_context_is_torn_down_users_first_and_alone() -> Result<()> {
        let mut w = world()?;
        let other = w.o.contexts.insert(Op::OpenDevice, HwCtx { ptr: null_mut() })?;
        let other_pd = w.o.pds.insert(Op::AllocPd, HwPd { ptr: null_mut(), ctx: other })?;
        let m = w.o.add_mkey(Op::CreateMkey, HwMkey { ptr: null_mut(), pd: w.pd, ctx: w.ctx })?;
        let q = w.o.add_qp(Op::CreateQp, qp(&w, [w.cq, w.cq]))?;
        let mr = w.o.add_mr(Op::RegMr, HwMr { ptr: null_mut(), pd: w.pd, ctx: w.ctx, buf: Some(w.buf) })?;
        let login = w.o.logins.insert(Op::CryptoLoginCreate, HwLogin { ptr: null_mut(), ctx: w.ctx })?;
        let dek = w.o.deks.insert(Op::DekCreate, HwDek { ptr: null_mut(), ctx: w.ctx })?;
        let obj1 = w.o.devx_objs.insert(Op::DevxObjCreate, HwDevxObj { ptr: null_mut(), ctx: w.ctx })?;
        let obj2 = w.o.devx_objs.insert(Op::DevxObjCreate, HwDevxObj { ptr: null_mut(), ctx: w.ctx })?;
        let umem = w.o.add_umem(Op::DevxUmemReg, HwUmem { ptr: null_mut(), ctx: w.ctx, buf: w.buf })?;
        let eq = w.o.eqs.insert(Op::DevxCreateEq, HwEq { ptr: null_mut(), ctx: w.ctx, ring: w.buf })?;
        let uar = w.o.uars.insert(Op::DevxAllocUar, HwUar { ptr: null_mut(), ctx: w.ctx })?;
        let msi = w.o.msis.insert(Op::DevxAllocMsiVector, HwMsi { ptr: null_mut(), ctx: w.ctx })?;
        assert_eq!(w.o.bufs.users(w.buf, Op::FreeBuf)?, 2, "the MR and the umem");
        let order = w.o.teardown_order(w.ctx);
        let want = [
            Obj::Devx(obj2),
            Obj::Devx(obj1),
            Obj::Umem(umem),
            Obj::Qp(q),
            Obj::Mr(mr),
            Obj::Cq(w.cq),
            Obj::Mkey(m),
            Obj::Dek(dek),
            Obj::Login(login),
            Obj::Eq(eq),
            Obj::Uar(uar),
            Obj::Msi(msi),
            Obj::Pd(w.pd),
        ];
        assert_eq!(order, want);
        assert_eq!(w.o.teardown_order(other), [Obj::Pd(other_pd)]);

        // Following the order, each object is unused by the time it is reached.
        for obj in order {
            match obj {
                Obj::Qp(h) => {
                    w.o.take_qp(h, Op::CloseDevice)?;
                }
                Obj::Srq(h) => {
                    w.o.take_srq(h, Op::CloseDevice)?;
                }
                Obj::Mr(h) => {
                    w.o.take_mr(h, Op::CloseDevice)?;
                }
                Obj::Cq(h) => {
                    w.o.cqs.remove(h, Op::CloseDevice)?;
                }
                Obj::Mkey(h) => {
                    w.o.take_mkey(h, Op::CloseDevice)?;
                }
                Obj::Dek(h) => {
                    w.o.deks.remove(h, Op::CloseDevice)?;
                }
                Obj::Login(h) => {
                    w.o.logins.remove(h, Op::CloseDevice)?;
                }
                Obj::Pd(h) => {
                    w.o.pds.remove(h, Op::CloseDevice)?;
                }
                Obj::Devx(h) => {
                    w.o.devx_objs.remove(h, Op::CloseDevice)?;
                }
                Obj::Umem(h) => {
                    w.o.take_umem(h, Op::CloseDevice)?;
                }
                Obj::Eq(h) => {
                    // The ring is unused by now: the umem and the MR on it went first.
                    assert_eq!(w.o.bufs.users(w.buf, Op::DevxDestroyEq)?, 0);
                    w.o.eqs.remove(h, Op::CloseDevice)?;
                }
                Obj::Uar(h) => {
                    w.o.uars.remove(h, Op::CloseDevice)?;
                }
                Obj::Msi(h) => {
                    w.o.msis.remove(h, Op::CloseDevice)?;
                }
            }
        }
        assert!(w.o.teardown_order(w.ctx).is_empty());
        assert_eq!(w.o.bufs.users(w.buf, Op::FreeBuf)?, 0, "the buffer outlives the context, unused");
        assert!(w.o.pds.contains(other_pd));
        Ok(())
    }
}
