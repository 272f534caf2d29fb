//! XRC: the context's `open_xrcd`, `close_xrcd` and `open_qp` (what the header's inline
//! `ibv_open_xrcd`, `ibv_close_xrcd` and `ibv_open_qp` jump through), `ibv_wr_set_xrc_srqn`,
//! and the handles an XRC target QP is created with.

use std::ffi::c_int;

use mlx5_dv::{CqHandle, PdHandle, QpOpenAttr, XrcdHandle, XrcdInitAttr, qp_init_mask};
use rdma_sys::*;

use crate::errno::null;
use crate::objects::{Qp, QpC, VerbsXrcd, Xrcd};
use crate::state::{Shim, key, with};

/// `IBV_QP_OPEN_ATTR_NUM`, `_XRCD`, `_TYPE`, `_RESERVED`.
const OPEN_NUM: u32 = 1 << 0;
const OPEN_XRCD: u32 = 1 << 1;
const OPEN_TYPE: u32 = 1 << 3;
const OPEN_RESERVED: u32 = 1 << 4;

/// Install the context's XRC ops.
pub(crate) fn fill_context_ops(c: &mut verbs_context) {
    c.open_xrcd = Some(open_xrcd);
    c.close_xrcd = Some(close_xrcd);
    c.open_qp = Some(open_qp);
}

impl Shim {
    /// The domain the program holds `x` for.
    pub(crate) fn xrcd(&self, x: *const ibv_xrcd) -> Result<XrcdHandle, c_int> {
        self.xrcds.get(&key(x)).map(|d| d.x.handle).ok_or(libc::EINVAL)
    }

    /// What an XRC target QP is created with: the domain (libibverbs wants
    /// `IBV_QP_INIT_ATTR_XRCD`: EINVAL), and PD and CQ handles the simulator does not read.
    pub(crate) fn xrc_target_handles(
        &self,
        attr: &ibv_qp_init_attr_ex,
    ) -> Result<(PdHandle, CqHandle, Option<XrcdHandle>), c_int> {
        if attr.comp_mask & qp_init_mask::XRCD == 0 {
            return Err(libc::EINVAL);
        }
        let x = self.xrcd(attr.xrcd)?;
        Ok((PdHandle::new(x.backend(), u32::MAX), CqHandle::new(x.backend(), u32::MAX), Some(x)))
    }

    fn open_xrcd(&mut self, ctx: *mut ibv_context, a: &ibv_xrcd_init_attr) -> Result<*mut ibv_xrcd, c_int> {
        let h = self.context(ctx)?.handle;
        let attr = XrcdInitAttr { ctx: h, comp_mask: a.comp_mask, fd: a.fd, oflags: a.oflags };
        let x = self.sim.open_xrcd(&attr).map_err(|e| e.errno())?;
        let mut c = Box::new(VerbsXrcd { xrcd: ibv_xrcd { context: ctx }, comp_mask: 1, handle: x.handle.id() });
        let p: *mut ibv_xrcd = &mut c.xrcd;
        self.xrcds.insert(key(p), Xrcd { _c: c, x });
        Ok(p)
    }

    fn open_qp(&mut self, ctx: *mut ibv_context, a: &ibv_qp_open_attr) -> Result<*mut ibv_qp, c_int> {
        // ibv_cmd_open_qp's checks.
        if a.comp_mask >= OPEN_RESERVED {
            return Err(libc::EOPNOTSUPP);
        }
        let need = OPEN_NUM | OPEN_XRCD | OPEN_TYPE;
        if a.comp_mask & need != need {
            return Err(libc::EINVAL);
        }
        let xrcd = self.xrcd(a.xrcd)?;
        let o = QpOpenAttr { xrcd, qp_num: a.qp_num, qp_type: a.qp_type };
        let qp = self.sim.open_qp(&o).map_err(|e| e.errno())?;
        let mut c = QpC::new(false);
        let base = &mut c.ex.qp_base;
        base.context = ctx;
        base.qp_context = a.qp_context;
        base.handle = qp.handle.id();
        base.qp_num = qp.qp_num;
        base.state = ibv_qp_state::IBV_QPS_RESET;
        base.qp_type = a.qp_type;
        let p: *mut ibv_qp = base;
        // SAFETY: plain data.
        let attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
        self.qps.insert(key(p), Qp::new(c, qp, attr));
        Ok(p)
    }
}

unsafe extern "C" fn open_xrcd(ctx: *mut ibv_context, attr: *mut ibv_xrcd_init_attr) -> *mut ibv_xrcd {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &*attr };
    with(null, |s| s.open_xrcd(ctx, a).unwrap_or_else(null))
}

/// `ibv_close_xrcd`: EBUSY while an XRC SRQ or QP of this opening lives.
unsafe extern "C" fn close_xrcd(xrcd: *mut ibv_xrcd) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(h) = s.xrcd(xrcd) else { return libc::EINVAL };
            let x = mlx5_dv::Xrcd { handle: h };
            match s.sim.close_xrcd(&x) {
                Ok(()) => {
                    s.xrcds.remove(&key(xrcd));
                    0
                }
                Err(e) => e.errno(),
            }
        },
    )
}

unsafe extern "C" fn open_qp(ctx: *mut ibv_context, attr: *mut ibv_qp_open_attr) -> *mut ibv_qp {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &*attr };
    with(null, |s| s.open_qp(ctx, a).unwrap_or_else(null))
}
