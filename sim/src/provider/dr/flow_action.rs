//! `mlx5dv_create_flow_action_packet_reformat` and `ibv_destroy_flow_action`: a packet
//! reformat action for the kernel's flow tables (`mlx5dv_create_flow`), with libmlx5's and
//! mlx5_ib's checks.

use mlx5_dv::errno::{EBUSY, EINVAL, EOPNOTSUPP};
use mlx5_dv::{ContextHandle, Error, FlowAction, Op, Result, reformat_type};

use super::actions::MAX_ENCAP;
use crate::device::dr::DrAct;
use crate::provider::{Lower, Provider};

/// `MLX5DV_FLOW_TABLE_TYPE_NIC_RX` and `_NIC_TX`.
pub(crate) const FT_NIC_RX: u32 = 0;
pub(crate) const FT_NIC_TX: u32 = 1;

/// A reformat action: its device, table type and what it does.
#[derive(Debug, Clone)]
pub(crate) struct FlowActionObj {
    pub(crate) ctx: ContextHandle,
    pub(crate) dev: usize,
    pub(crate) ft_type: u32,
    pub(crate) act: DrAct,
}

impl Provider {
    /// `mlx5dv_create_flow_action_packet_reformat`.
    pub(crate) fn create_flow_action_packet_reformat(
        &mut self,
        _low: &mut Lower<'_>,
        ctx: ContextHandle,
        ty: u32,
        ft_type: u32,
        data: &[u8],
    ) -> Result<FlowAction> {
        let op = Op::CreateFlowActionPacketReformat;
        let dev = self.ctx(ctx, op)?.dev;
        let decap = ty == reformat_type::L2_TUNNEL_TO_L2;
        // libmlx5: a decapsulation takes no data, the others need some.
        if decap != data.is_empty() || ty > reformat_type::L2_TO_L3_TUNNEL {
            return Err(Error::new(op, EINVAL, "decapsulation takes no headers, encapsulation needs them"));
        }
        // mlx5_ib: each type on the table type that has it, on a device with reformat.
        let table_ok = match ty {
            reformat_type::L2_TUNNEL_TO_L2 => ft_type == FT_NIC_RX,
            reformat_type::L2_TO_L2_TUNNEL => ft_type == FT_NIC_TX,
            _ => false,
        };
        if !self.packet_reformat || !table_ok {
            return Err(Error::new(
                op,
                EOPNOTSUPP,
                "the reformat type on this table type (or L3 tunnels, not simulated)",
            ));
        }
        if data.len() > MAX_ENCAP {
            return Err(Error::new(op, EINVAL, format!("{} bytes of headers", data.len())));
        }
        let act = if decap { DrAct::Decap } else { DrAct::Encap(data.to_vec()) };
        let h = self.dr.handle();
        self.dr.flow_actions.insert(h, FlowActionObj { ctx, dev, ft_type, act });
        Ok(FlowAction { handle: h })
    }

    /// `ibv_destroy_flow_action`.
    pub(crate) fn destroy_flow_action(&mut self, low: &mut Lower<'_>, a: &FlowAction) -> Result<()> {
        let op = Op::DestroyFlowAction;
        if !self.dr.flow_actions.contains_key(&a.handle) {
            return Err(Error::new(op, EINVAL, "no such flow action"));
        }
        if self.matcher_flows_use_action(low, a.handle) {
            return Err(Error::new(op, EBUSY, "flows use the action"));
        }
        self.dr.flow_actions.remove(&a.handle);
        Ok(())
    }

    /// The flow action `h`, for `mlx5dv_create_flow`.
    pub(crate) fn flow_action(&self, h: u64) -> Option<&FlowActionObj> {
        self.dr.flow_actions.get(&h)
    }
}
