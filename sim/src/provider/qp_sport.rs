//! `mlx5dv_modify_qp_udp_sport`: the RoCE v2 UDP source port of an RC or UC QP, set by
//! RTS2RTS through DEVX.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, Field, opcode, queues as q};
use mlx5_dv::{Error, Op, Qp, QpState, Result, qp_type};

use super::{CtxKind, Lower, Provider};
use crate::kernel;

/// `rts2rts_qp_in.opt_param_mask_95_32` and `MLX5_QPC_OPT_MASK_32_UDP_SPORT`.
const OPT_PARAM_MASK_95_32: Field = Field::new("opt_param_mask_95_32", 0x840, 64);
const OPT_UDP_SPORT: u64 = 1 << 2;
/// `qpc.primary_address_path.udp_sport`.
const UDP_SPORT: Field = Field::new("ads.udp_sport", 0x290, 16);

impl Provider {
    /// `_mlx5dv_modify_qp_udp_sport`: EOPNOTSUPP for a QP that is not RC or UC, not in RTS,
    /// or on a device without `rts2rts_qp_udp_sport`; then RTS2RTS with the port in the
    /// primary path and its bit in `opt_param_mask_95_32`, through `mlx5dv_devx_qp_modify`
    /// (a bad status is its errno).
    pub(crate) fn modify_qp_udp_sport(&mut self, low: &mut Lower<'_>, qp: &Qp, udp_sport: u16) -> Result<()> {
        let op = Op::ModifyQpUdpSport;
        let q = self.qps.get(qp.handle, op)?;
        let (ctx, dev, qpn, ty) = (q.ctx, q.dev, q.qpn, q.qp_type);
        let c = self.contexts.get(ctx, op)?;
        let (caps, kind) = (c.caps, c.kind);
        if ty != qp_type::RC && ty != qp_type::UC {
            return Err(Error::new(op, EOPNOTSUPP, "only RC and UC QPs take a UDP source port"));
        }
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        if d.qp_state(qpn) != Some(QpState::Rts) || !caps.rts2rts_qp_udp_sport {
            return Err(Error::new(op, EOPNOTSUPP, "the QP is not in RTS or the device lacks rts2rts_qp_udp_sport"));
        }
        let CtxKind::Kernel { devx, .. } = kind else {
            return Err(Error::new(op, EOPNOTSUPP, "not a kernel context"));
        };
        let mut input = prm::new_input(q::qp::SIZE, opcode::RTS2RTS_QP, 0, 0);
        let set =
            |input: &mut [u8], f: Field, v: u64| f.set(input, v).map_err(|e| Error::new(op, EINVAL, e.to_string()));
        set(&mut input, q::qp::QPN, u64::from(qpn))?;
        set(&mut input, OPT_PARAM_MASK_95_32, OPT_UDP_SPORT)?;
        set(&mut input, UDP_SPORT, u64::from(udp_sport))?;
        let mut out = vec![0u8; q::qp::SIZE];
        kernel::devx_cmd(d, devx, &mut input, &mut out)
            .map_err(|e| Error::new(op, kernel::cmd_status_err(e, &out), "RTS2RTS_QP failed"))
    }
}
