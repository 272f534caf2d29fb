//! `ibv_create_flow` and `ibv_destroy_flow`: uverbs' and mlx5_ib's checks of a flow
//! attribute, then a steering rule on the QP's device (module `device::steering`).

use mlx5_dv::errno::{EBUSY, EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{Error, Flow, FlowAttr, Op, Qp, Result, qp_type};

use super::{Lower, Provider};

/// `IBV_FLOW_ATTR_NORMAL`: the only rule type simulated.
const FLOW_ATTR_NORMAL: u32 = 0;
/// `IBV_FLOW_ATTR_FLAGS_DONT_TRAP`.
const FLAGS_DONT_TRAP: u32 = 1 << 1;
/// `IBV_FLOW_ATTR_FLAGS_EGRESS`.
const FLAGS_EGRESS: u32 = 1 << 2;
/// `MLX5_IB_FLOW_LAST_PRIO`: the last of the bypass namespace's 16 regular priorities.
const LAST_PRIO: u16 = 15;

impl Provider {
    /// `ibv_create_flow` on `qp`.
    pub(crate) fn create_flow(&mut self, low: &mut Lower<'_>, qp: &Qp, a: &FlowAttr) -> Result<Flow> {
        let op = Op::CreateFlow;
        let q = self.qps.get(qp.handle, op)?;
        let (dev, qpn, ty) = (q.dev, q.qpn, q.qp_type);
        // ib_uverbs_ex_create_flow, in its order.
        if a.comp_mask != 0 {
            return Err(Error::new(op, EINVAL, "flow comp_mask is not 0"));
        }
        if a.flags & !(FLAGS_DONT_TRAP | FLAGS_EGRESS) != 0 {
            return Err(Error::new(op, EINVAL, format!("flow flags 0x{:x} unknown to uverbs", a.flags)));
        }
        if !matches!(ty, qp_type::UD | qp_type::RAW_PACKET) {
            return Err(Error::new(op, EINVAL, "flows steer to UD and raw packet QPs only"));
        }
        // mlx5_ib_create_flow.
        if a.priority > LAST_PRIO {
            return Err(Error::new(op, ENOMEM, format!("priority {} past MLX5_IB_FLOW_LAST_PRIO", a.priority)));
        }
        if a.port == 0 || a.port > self.limits_ports(low, dev) {
            return Err(Error::new(op, EINVAL, format!("port {} is not a port of the device", a.port)));
        }
        if ty == qp_type::UD {
            return Err(Error::new(op, EOPNOTSUPP, "flows to UD (IPoIB underlay) QPs are not simulated"));
        }
        if a.attr_type != FLOW_ATTR_NORMAL || a.flags != 0 {
            return Err(Error::new(op, EOPNOTSUPP, "only NORMAL rules without flags are simulated"));
        }
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let id = d.add_flow(qpn, a.priority, a.specs.clone());
        Ok(Flow { handle: (dev as u64) << 32 | u64::from(id) })
    }

    /// `ibv_destroy_flow`: EINVAL for a rule that is gone.
    pub(crate) fn destroy_flow(&mut self, low: &mut Lower<'_>, f: &Flow) -> Result<()> {
        if let Some(r) = self.destroy_egress_flow(low, f.handle) {
            return r;
        }
        let (dev, id) = ((f.handle >> 32) as usize, f.handle as u32);
        if low.devices.get_mut(dev).is_some_and(|d| d.remove_flow(id)) {
            Ok(())
        } else {
            Err(Error::new(Op::DestroyFlow, EINVAL, "no such flow"))
        }
    }

    fn limits_ports(&self, low: &Lower<'_>, dev: usize) -> u8 {
        low.fabric.port(dev).map_or(0, |_| 1)
    }

    /// `ib_destroy_qp`'s EBUSY while flows steer to the QP.
    pub(super) fn check_no_flows(&self, low: &Lower<'_>, dev: usize, qpn: u32) -> Result<()> {
        if low.devices.get(dev).is_some_and(|d| d.flows().iter().any(|r| r.qpn == qpn)) {
            return Err(Error::new(Op::DestroyQp, EBUSY, "flows still steer to the QP"));
        }
        Ok(())
    }
}
