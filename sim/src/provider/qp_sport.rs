//! `mlx5dv_modify_qp_udp_sport`: the RoCE v2 UDP source port of an RC or UC QP, and
//! `mlx5dv_dci_stream_id_reset`: a DCI's errored stream back in service, both RTS2RTS through
//! DEVX; `mlx5dv_modify_qp_sched_elem`: a QP joining queue groups, INIT2INIT, RTS2RTS or
//! MODIFY_SQ through DEVX; `mlx5dv_map_ah_to_qp`.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::queues::{modify_sq as sq, qpc_ext as x};
use mlx5_dv::prm::{self, Field, opcode, queues as q};
use mlx5_dv::{ContextHandle, Error, Op, Qp, QpState, Result, UdDest, qp_type};

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

    /// `mlx5dv_dci_stream_id_reset`: EOPNOTSUPP on a device without errored streams
    /// (`max_log_num_errored` 0) or for a QP not in RTS, EINVAL for one that is not a DCI;
    /// then RTS2RTS with `qpc_ext`, the stream id in `qpc_data_ext` and its bit in
    /// `opt_param_mask_95_32`, through `mlx5dv_devx_qp_modify` (a bad status is its errno).
    pub(crate) fn dci_stream_id_reset(&mut self, low: &mut Lower<'_>, qp: &Qp, stream_id: u16) -> Result<()> {
        let op = Op::DciStreamIdReset;
        let q = self.qps.get(qp.handle, op)?;
        let (ctx, dev, qpn, dci) = (q.ctx, q.dev, q.qpn, q.dci);
        let c = self.contexts.get(ctx, op)?;
        let (caps, kind) = (c.caps, c.kind);
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        // libmlx5 reads the state the library last set (ibv_qp's `state`); the device's is
        // the same here, as nothing but the library moves a DCI out of RTS but an error.
        if caps.dci_streams.max_log_num_errored == 0 || !caps.qpc_extension || d.qp_state(qpn) != Some(QpState::Rts) {
            let why = "no errored DCI streams or qpc_extension on the device, or the QP is not in RTS";
            return Err(Error::new(op, EOPNOTSUPP, why));
        }
        if !dci {
            return Err(Error::new(op, EINVAL, "the QP is not a DCI"));
        }
        let CtxKind::Kernel { devx, .. } = kind else {
            return Err(Error::new(op, EOPNOTSUPP, "not a kernel context"));
        };
        let mut input = prm::new_input(STREAM_IN_SIZE, opcode::RTS2RTS_QP, 0, 0);
        let set =
            |input: &mut [u8], f: Field, v: u64| f.set(input, v).map_err(|e| Error::new(op, EINVAL, e.to_string()));
        set(&mut input, q::qp::QPN, u64::from(qpn))?;
        set(&mut input, QPC_EXT, 1)?;
        set(&mut input, OPT_PARAM_MASK_95_32, OPT_DCI_STREAM_CHANNEL_ID)?;
        set(&mut input, DCI_STREAM_CHANNEL_ID, u64::from(stream_id))?;
        let mut out = vec![0u8; q::qp::SIZE];
        kernel::devx_cmd(d, devx, &mut input, &mut out)
            .map_err(|e| Error::new(op, kernel::cmd_status_err(e, &out), "RTS2RTS_QP failed"))
    }

    /// `_mlx5dv_modify_qp_sched_elem`: libmlx5's checks in its order, then the command
    /// through `mlx5dv_devx_qp_modify` (a bad status is its errno). `requestor` and
    /// `responder` are queue groups' object ids, 0 for none.
    pub(crate) fn modify_qp_sched_elem(
        &mut self,
        low: &mut Lower<'_>,
        qp: &Qp,
        requestor: u32,
        responder: u32,
    ) -> Result<()> {
        let op = Op::ModifyQpSchedElem;
        let q = self.qps.get(qp.handle, op)?;
        let (ctx, dev, qpn, ty) = (q.ctx, q.dev, q.qpn, q.qp_type);
        let c = self.contexts.get(ctx, op)?;
        let (caps, kind) = (c.caps, c.kind);
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let state = d.qp_state(qpn);
        let unsupported = |why: &str| Err(Error::new(op, EOPNOTSUPP, why.to_string()));
        let mut input = match ty {
            qp_type::UC | qp_type::UD | qp_type::RC => {
                if ty != qp_type::RC && responder != 0 {
                    return Err(Error::new(op, EINVAL, "a UC or UD QP has no responder queue group"));
                }
                if !caps.qpc_extension || !caps.nic_qp_scheduling {
                    return unsupported("the device lacks qpc_extension or nic_qp_scheduling");
                }
                let cmd = match state {
                    Some(QpState::Init) => mlx5_dv::prm::opcode::INIT2INIT_QP,
                    Some(QpState::Rts) => opcode::RTS2RTS_QP,
                    _ => return unsupported("the QP is neither in INIT nor in RTS"),
                };
                let mut input = prm::new_input(x::IN_SIZE, cmd, 0, 0);
                for (f, v) in [
                    (q::qp::QPN, u64::from(qpn)),
                    (x::QPC_EXT, 1),
                    (x::OPT_PARAM_MASK_95_32, x::OPT_QOS_QUEUE_GROUP_ID),
                    (x::QOS_GROUP_REQUESTER, u64::from(requestor)),
                    (x::QOS_GROUP_RESPONDER, u64::from(responder)),
                ] {
                    f.set(&mut input, v).map_err(|e| Error::new(op, EINVAL, e.to_string()))?;
                }
                input
            }
            qp_type::RAW_PACKET => {
                if responder != 0 {
                    return Err(Error::new(op, EINVAL, "a raw packet QP has no responder queue group"));
                }
                if state != Some(QpState::Rts) || !caps.nic_sq_scheduling {
                    return unsupported("the raw packet QP is not in RTS or the device lacks nic_sq_scheduling");
                }
                // The send queue's number is the QP's in the simulated firmware.
                let mut input = prm::new_input(sq::IN_SIZE, sq::OPCODE, 0, 0);
                for (f, v) in [
                    (sq::SQ_STATE, sq::RDY),
                    (sq::SQN, u64::from(qpn)),
                    (sq::MODIFY_BITMASK, sq::BITMASK_QOS_QUEUE_GROUP_ID),
                    (sq::STATE, sq::RDY),
                    (sq::QOS_QUEUE_GROUP_ID, u64::from(requestor)),
                ] {
                    f.set(&mut input, v).map_err(|e| Error::new(op, EINVAL, e.to_string()))?;
                }
                input
            }
            _ => return unsupported("only RC, UC, UD and raw packet QPs join queue groups"),
        };
        let CtxKind::Kernel { devx, .. } = kind else {
            return unsupported("not a kernel context");
        };
        let mut out = vec![0u8; q::qp::SIZE];
        kernel::devx_cmd(d, devx, &mut input, &mut out)
            .map_err(|e| Error::new(op, kernel::cmd_status_err(e, &out), "the queue group command failed"))
    }

    /// `_mlx5dv_map_ah_to_qp`: EOPNOTSUPP on a device without the AV_QP_MAPPING object type
    /// or for an AH without a GRH. The object only tells hardware which QP an address goes
    /// with; the simulator routes by address alone, so it keeps no object (libmlx5 makes
    /// one per AH, once).
    pub(crate) fn map_ah_to_qp(&mut self, ctx: ContextHandle, ah: &UdDest, _qp_num: u32) -> Result<()> {
        let op = Op::MapAhToQp;
        let c = self.contexts.get(ctx, op)?;
        if c.caps.general_obj_types & 1u64 << prm::obj_type::AV_QP_MAPPING == 0 || !ah.is_global {
            return Err(Error::new(op, EOPNOTSUPP, "no AV_QP_MAPPING objects on the device, or the AH has no GRH"));
        }
        Ok(())
    }
}

/// `rts2rts_qp_in` through `qpc_data_ext` (its 0x600 bits).
const STREAM_IN_SIZE: usize = 0x880 / 8 + 0x600 / 8;
/// `rts2rts_qp_in.qpc_ext`.
const QPC_EXT: Field = Field::new("qpc_ext", 0x40, 1);
/// `MLX5_QPC_OPT_MASK_32_DCI_STREAM_CHANNEL_ID`.
const OPT_DCI_STREAM_CHANNEL_ID: u64 = 1 << 0;
/// `qpc_data_ext.dci_stream_channel_id`.
const DCI_STREAM_CHANNEL_ID: Field = Field::new("qpc_ext.dci_stream_channel_id", 0x890, 16);
