//! `mlx5dv_create_qp` of DC QPs (`IBV_QPT_DRIVER` with `MLX5DV_QP_INIT_ATTR_MASK_DC`): the
//! checks of libmlx5's `create_qp` and `create_dct` in their order, then mlx5_ib's. A DCI is
//! created as the other QPs are (a send queue, no receive queue of its own); a DCT has no
//! queues: libmlx5 allocates none, and its receives come from its SRQ.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{DcInitAttr, DciStreamsCaps, DvQpInitAttr, Error, Op, QpInitAttr, Result, dv_qp, qp_init_mask};

use crate::kernel::DcRole;

/// The DC role `mlx5dv_create_qp` makes of a DRIVER QP with `MLX5DV_QP_INIT_ATTR_MASK_DC`.
/// `dc_supported` is the device's `dct` capability; `mask` the verbs `comp_mask`.
/// `streams` is the context's `dci_streams_caps`.
pub(super) fn dc_role(
    attr: &QpInitAttr,
    dv: &DvQpInitAttr,
    mask: u32,
    dc_supported: bool,
    streams: DciStreamsCaps,
) -> Result<DcRole> {
    let op = Op::CreateQp;
    match dv.dc.dc_type {
        DcInitAttr::DCT => {
            // create_dct: the PD alone of the verbs mask, DC and create flags of the vendor's.
            if mask & !qp_init_mask::PD != 0 {
                return Err(Error::new(op, EINVAL, "a DCT takes IBV_QP_INIT_ATTR_PD alone"));
            }
            if !(dv_qp::MASK_DC | dv_qp::MASK_QP_CREATE_FLAGS).contains(dv.comp_mask) {
                return Err(Error::new(op, EINVAL, "a DCT takes the DC and create-flags masks alone"));
            }
            // Of the create flags, only the scatter-to-CQE ones leave the command's flags
            // within MLX5_QP_FLAG_SCATTER_CQE (SIG_PIPELINING and OOO_DP are the QP's own).
            let own = dv_qp::CREATE_DISABLE_SCATTER_TO_CQE | dv_qp::CREATE_SIG_PIPELINING | dv_qp::CREATE_OOO_DP;
            if dv.comp_mask.contains(dv_qp::MASK_QP_CREATE_FLAGS) && !own.contains(dv.create_flags) {
                return Err(Error::new(op, EINVAL, "unsupported creation flags for a DCT"));
            }
            if !dc_supported {
                return Err(Error::new(op, EOPNOTSUPP, "the device has no DC transport"));
            }
            // mlx5_ib's create_dct needs the SRQ its messages land in.
            if attr.srq.is_none() {
                return Err(Error::new(op, EINVAL, "a DCT needs an SRQ"));
            }
            Ok(DcRole::Dct(dv.dc.dct_access_key))
        }
        DcInitAttr::DCI => {
            let mut with = None;
            if dv.comp_mask.contains(dv_qp::MASK_DCI_STREAMS) {
                // libmlx5 refuses more than dci_streams_caps; mlx5_ib refuses the stream
                // flag on a device without log_max_dci_stream_channels.
                if dv.dc.log_num_concurent > streams.max_log_num_concurent
                    || dv.dc.log_num_errored > streams.max_log_num_errored
                {
                    return Err(Error::new(op, EINVAL, "DCI streams past the device's dci_streams_caps"));
                }
                if streams.max_log_num_concurent == 0 {
                    return Err(Error::new(op, EOPNOTSUPP, "the device has no DCI streams"));
                }
                with = Some((dv.dc.log_num_concurent, dv.dc.log_num_errored));
            }
            if !dc_supported {
                return Err(Error::new(op, EOPNOTSUPP, "the device has no DC transport"));
            }
            Ok(DcRole::Dci(with))
        }
        t => Err(Error::new(op, EINVAL, format!("dc_type {t} is neither DCI nor DCT"))),
    }
}
