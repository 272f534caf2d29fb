//! XRC as libibverbs and libmlx5 give it: `ibv_open_xrcd` / `ibv_close_xrcd`
//! (`ibv_cmd_open_xrcd`'s checks, then the kernel's inode table), the XRC target QP that
//! `ibv_create_qp_ex` makes with `IBV_QP_INIT_ATTR_XRCD` (the kernel's: no PD, CQs or send
//! queue of its own), and `ibv_open_qp`, another handle on a target QP of the domain.

use mlx5_dv::errno::{EBUSY, EINVAL, EOPNOTSUPP};
use mlx5_dv::{
    ContextHandle, Error, Op, PdHandle, Qp, QpCap, QpHandle, QpInitAttr, QpOpenAttr, Result, Xrcd, XrcdHandle,
    XrcdInitAttr, qp_init_mask, qp_type, xrcd_init_mask,
};

use super::ring::QpRings;
use super::{CtxKind, Lower, Provider, QpObj};
use crate::kernel::QpRequest;

/// An XRC domain as one opening holds it; its users are the XRC SRQs and target QPs made or
/// opened through it (uverbs' `uxrcd->refcnt`).
#[derive(Debug, Clone)]
pub(super) struct XrcdObj {
    pub(super) ctx: ContextHandle,
    pub(super) dev: usize,
    /// The domain's number.
    pub(super) xrcdn: u32,
}

impl Provider {
    /// `ibv_open_xrcd`: libibverbs refuses a `comp_mask` bit it does not know (EOPNOTSUPP)
    /// and one without both FD and OFLAGS (EINVAL); the kernel then finds or makes the domain.
    pub(crate) fn open_xrcd(&mut self, low: &mut Lower<'_>, attr: &XrcdInitAttr) -> Result<Xrcd> {
        let op = Op::OpenXrcd;
        let c = self.contexts.get(attr.ctx, op)?;
        let CtxKind::Kernel { .. } = c.kind else {
            return Err(Error::new(op, EOPNOTSUPP, "XRC domains are simulated on mlx5 kernel contexts only"));
        };
        let dev = c.dev;
        if attr.comp_mask >= xrcd_init_mask::RESERVED {
            return Err(Error::new(
                op,
                EOPNOTSUPP,
                format!("comp_mask {:#x} past IBV_XRCD_INIT_ATTR_RESERVED", attr.comp_mask),
            ));
        }
        let both = xrcd_init_mask::FD | xrcd_init_mask::OFLAGS;
        if attr.comp_mask & both != both {
            return Err(Error::new(op, EINVAL, "ibv_open_xrcd needs IBV_XRCD_INIT_ATTR_FD and _OFLAGS"));
        }
        let xrcdn = low.kernel.open_xrcd(low.devices, dev, attr.fd, attr.oflags)?;
        match self.xrcds.insert(op, XrcdObj { ctx: attr.ctx, dev, xrcdn }) {
            Ok(handle) => Ok(Xrcd { handle }),
            Err(e) => {
                low.kernel.xrcd_release(low.devices, dev, xrcdn);
                Err(e)
            }
        }
    }

    /// `ibv_close_xrcd`: EBUSY while an XRC SRQ or target QP of this opening is alive.
    pub(crate) fn close_xrcd(&mut self, low: &mut Lower<'_>, xrcd: &Xrcd) -> Result<()> {
        let op = Op::CloseXrcd;
        if self.xrcds.users(xrcd.handle, op)? > 0 {
            return Err(Error::new(op, EBUSY, "an XRC SRQ or QP still uses the domain"));
        }
        let x = self.xrcds.take(xrcd.handle, op)?;
        low.kernel.xrcd_release(low.devices, x.dev, x.xrcdn);
        Ok(())
    }

    /// The device and number of a domain.
    pub(super) fn xrcd_of(&self, h: XrcdHandle, op: Op) -> Result<(ContextHandle, usize, u32)> {
        let x = self.xrcds.get(h, op)?;
        Ok((x.ctx, x.dev, x.xrcdn))
    }

    /// A QP object for a target QP handle: no queues of its own but the doorbell record
    /// libmlx5 maps, no PD or CQs (placeholders the handle tables do not know).
    fn target_obj(&self, ctx: ContextHandle, dev: usize, qpn: u32, xrcd: XrcdHandle, rings: QpRings) -> QpObj {
        let pd = PdHandle::new(xrcd.backend(), u32::MAX);
        QpObj { xrcd: Some(xrcd), ..QpObj::queueless(ctx, dev, pd, qpn, qp_type::XRC_RECV, rings) }
    }

    /// `ibv_create_qp_ex` of an `IBV_QPT_XRC_RECV` QP: libibverbs wants
    /// `IBV_QP_INIT_ATTR_XRCD` (EINVAL); the kernel makes the QP in the domain, with no send
    /// queue, PD or CQs (its receives go to the SRQ each request names, and that SRQ's CQ).
    pub(super) fn create_xrc_target(&mut self, low: &mut Lower<'_>, attr: &QpInitAttr, mask: u32) -> Result<Qp> {
        let op = Op::CreateQp;
        let (Some(h), true) = (attr.xrcd, mask & qp_init_mask::XRCD != 0) else {
            return Err(Error::new(op, EINVAL, "IBV_QPT_XRC_RECV needs IBV_QP_INIT_ATTR_XRCD"));
        };
        let (ctx, dev, xrcdn) = self.xrcd_of(h, op)?;
        let rings = QpRings::alloc(low.host, 0, 0, 0, op)?;
        let req = QpRequest {
            ctx: ctx.id(),
            dev,
            qp_type: qp_type::XRC_RECV,
            pdn: 0,
            cqns: (0, 0),
            scatter_to_cqe: false,
            drain_sigerr: false,
            sq: rings.sq.buf,
            rq: rings.rq.buf,
            dbrec: rings.dbrec,
            srqn: None,
            dc: None,
            xrcd: xrcdn,
        };
        let qpn = match low.kernel.create_qp(low.devices, &req) {
            Ok(n) => n,
            Err(e) => {
                rings.free(low.host);
                return Err(e);
            }
        };
        low.kernel.xrc_target_made(dev, qpn, xrcdn);
        let handle = self.insert_target(low, self.target_obj(ctx, dev, qpn, h, rings), op)?;
        Ok(Qp { handle, qp_num: qpn, cap: QpCap::default() })
    }

    fn insert_target(&mut self, low: &mut Lower<'_>, obj: QpObj, op: Op) -> Result<QpHandle> {
        let (dev, qpn, xrcd, rings) = (obj.dev, obj.qpn, obj.xrcd, obj.rings.clone());
        match self.qps.insert(op, obj) {
            Ok(handle) => {
                if let Some(x) = xrcd {
                    self.xrcds.acquire(x, op)?;
                }
                Ok(handle)
            }
            Err(e) => {
                low.kernel.close_target(low.devices, dev, qpn);
                rings.free(low.host);
                Err(e)
            }
        }
    }

    /// `ibv_open_qp`: a handle on target QP `qp_num` of the domain; EINVAL for another type
    /// or a number that is not a target QP of the domain (the kernel's `ib_open_qp`).
    pub(crate) fn open_qp(&mut self, low: &mut Lower<'_>, attr: &QpOpenAttr) -> Result<Qp> {
        let op = Op::OpenQp;
        let (ctx, dev, xrcdn) = self.xrcd_of(attr.xrcd, op)?;
        if attr.qp_type != qp_type::XRC_RECV {
            return Err(Error::new(op, EINVAL, "ibv_open_qp opens XRC target QPs only"));
        }
        low.kernel.open_target(dev, xrcdn, attr.qp_num)?;
        let rings = match QpRings::alloc(low.host, 0, 0, 0, op) {
            Ok(r) => r,
            Err(e) => {
                low.kernel.close_target(low.devices, dev, attr.qp_num);
                return Err(e);
            }
        };
        let handle = self.insert_target(low, self.target_obj(ctx, dev, attr.qp_num, attr.xrcd, rings), op)?;
        Ok(Qp { handle, qp_num: attr.qp_num, cap: QpCap::default() })
    }

    /// A closing context's domains (after its QPs and SRQs).
    pub(super) fn release_xrcds_of(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) {
        for h in self.xrcds.handles_where(|x| x.ctx == ctx) {
            if let Ok(x) = self.xrcds.take(h, Op::CloseDevice) {
                low.kernel.xrcd_release(low.devices, x.dev, x.xrcdn);
            }
        }
    }
}
