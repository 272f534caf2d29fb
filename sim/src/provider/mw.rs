//! Memory windows as libibverbs and libmlx5 handle them: `ibv_alloc_mw` / `mlx5_alloc_mw`,
//! `ibv_dealloc_mw`, the inline `ibv_bind_mw` with `mlx5_bind_mw` (a type-1 bind posted as a
//! send WR with the next key), and `set_bind_wr`'s bind WQE for `IBV_WR_BIND_MW` and
//! `ibv_wr_bind_mw`. libmlx5 checks the bind's rights and bounds only in an MW_DEBUG build:
//! here, as in a release build, the device checks them and fails the bind's completion.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP, EPERM};
use mlx5_dv::{
    AccessFlags, BindMw, ContextHandle, Error, MW_TYPE_1, MW_TYPE_2, Mw, MwBind, Op, PdHandle, Qp, Result, SendWr,
    inc_rkey, wr_opcode,
};

use super::{Lower, Provider};
use crate::device::contract::{BindMwWqe, MwRange, WqeKind};
use crate::device::translation::Klm;
use crate::kernel;

/// One `struct ibv_mw`.
#[derive(Debug, Clone)]
pub(super) struct MwObj {
    ctx: ContextHandle,
    pd: PdHandle,
    dev: usize,
    index: u32,
    mw_type: u32,
}

/// `set_bind_wr`'s WQE for a bind of `b` (`type2` as the caller's path decides): EOPNOTSUPP
/// past 2 GiB (a KLM's reach). A non-empty bind without an MR is EINVAL here, where libmlx5
/// would read the lkey through a NULL pointer.
pub(super) fn bind_kind(b: &BindMw, type2: bool) -> std::result::Result<WqeKind, (i32, String)> {
    let info = &b.bind_info;
    if info.length > 1 << 31 {
        return Err((EOPNOTSUPP, format!("a {}-byte window passes a KLM's 2 GiB", info.length)));
    }
    let range = match (info.length, info.mr) {
        (0, _) => None,
        (_, None) => return Err((EINVAL, "a bind of bytes without an MR".into())),
        (len, Some(mr)) => Some(MwRange {
            access: info.access.bits() & super::UMR_ACCESS,
            start_addr: if info.access.contains(AccessFlags::ZERO_BASED) { 0 } else { info.addr },
            len,
            klm: Klm { byte_count: len as u32, key: mr.lkey, addr: info.addr },
        }),
    };
    Ok(WqeKind::BindMw(BindMwWqe { key: b.mw.rkey, tag: b.rkey as u8, type2, range }))
}

impl Provider {
    /// `ibv_alloc_mw`: the kernel's window on a kernel context's PD.
    pub(crate) fn alloc_mw(&mut self, low: &mut Lower<'_>, pd: PdHandle, mw_type: u32) -> Result<Mw> {
        let op = Op::AllocMw;
        let p = self.pds.get(pd, op)?;
        let ctx = p.ctx;
        // The VFIO provider has no alloc_mw: libibverbs' placeholder answers.
        let pdn = p.pdn.ok_or_else(|| Error::new(op, EOPNOTSUPP, "memory windows need an mlx5 kernel context"))?;
        let dev = self.contexts.get(ctx, op)?.dev;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let (index, variant) = low.kernel.alloc_mw(d, dev, pdn, mw_type)?;
        let handle = self.mws.insert(op, MwObj { ctx, pd, dev, index, mw_type })?;
        self.pds.acquire(pd, op)?;
        Ok(Mw { handle, rkey: index << 8 | u32::from(variant), mw_type })
    }

    /// `ibv_dealloc_mw`: DESTROY_MKEY of the window (bound or not).
    pub(crate) fn dealloc_mw(&mut self, low: &mut Lower<'_>, mw: &Mw) -> Result<()> {
        let op = Op::DeallocMw;
        let o = self.mws.get(mw.handle, op)?.clone();
        let d = low.devices.get_mut(o.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        kernel::destroy_mkey(d, o.index, op)?;
        self.mws.take(mw.handle, op)?;
        self.pds.release(o.pd);
        Ok(())
    }

    /// `ibv_bind_mw`: libibverbs' checks (a type-1 window, an MR for a non-empty range, the
    /// MR in the window's PD), `mlx5_bind_mw`'s (no zero-based window or MR, a plain MR),
    /// then the bind posted with `ibv_inc_rkey` of the window's key, which it returns.
    pub(crate) fn bind_mw(&mut self, low: &mut Lower<'_>, qp: &Qp, mw: &Mw, bind: &MwBind) -> Result<u32> {
        let op = Op::BindMw;
        let o = self.mws.get(mw.handle, op)?;
        let (pd, mw_type) = (o.pd, o.mw_type);
        let info = &bind.bind_info;
        if mw_type != MW_TYPE_1 {
            return Err(Error::new(op, EINVAL, "ibv_bind_mw binds type-1 windows only"));
        }
        if info.mr.is_none() && (info.addr != 0 || info.length != 0) {
            return Err(Error::new(op, EINVAL, "an address or length without an MR"));
        }
        let mr = match info.mr {
            Some(mr) => Some(self.mrs.get(mr.handle, op)?.clone()),
            None => None,
        };
        if mr.as_ref().is_some_and(|m| m.pd != pd) {
            return Err(Error::new(op, EPERM, "the MR is not in the window's PD"));
        }
        if info.access.contains(AccessFlags::ZERO_BASED) {
            return Err(Error::new(op, EINVAL, "a type-1 window cannot be zero-based"));
        }
        if let Some(m) = &mr {
            if m.dmabuf.is_some() {
                return Err(Error::new(op, EOPNOTSUPP, "not an IBV_MR_TYPE_MR (a dma-buf MR)"));
            }
            if m.buf.is_some_and(|b| self.is_dm_buf(b)) {
                return Err(Error::new(op, EINVAL, "the MR is zero-based (device memory)"));
            }
        }
        let rkey = inc_rkey(mw.rkey);
        let wr = SendWr {
            wr_id: bind.wr_id,
            opcode: wr_opcode::BIND_MW,
            send_flags: bind.send_flags,
            bind_mw: Some(BindMw { mw: *mw, rkey, bind_info: *info }),
            ..SendWr::default()
        };
        self.post_send_wr(low, qp, &[wr]).map_err(|e| Error::new(op, e.errno(), e.reason().to_string()))?;
        Ok(rkey)
    }

    /// A closing context's windows: the kernel destroys them.
    pub(super) fn release_mws_of(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) {
        let op = Op::CloseDevice;
        for h in self.mws.handles_where(|m| m.ctx == ctx) {
            if let Ok(o) = self.mws.take(h, op) {
                if let Some(d) = low.devices.get_mut(o.dev) {
                    let _ = kernel::destroy_mkey(d, o.index, op);
                }
                self.pds.release(o.pd);
            }
        }
    }
}

/// The window type a post of `IBV_WR_BIND_MW` binds as: the window's own.
pub(super) fn is_type2(b: &BindMw) -> bool {
    b.mw.mw_type == MW_TYPE_2
}
