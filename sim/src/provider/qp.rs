//! QPs: `mlx5_create_qp` in the provider's order of checks
//! with the send and receive queue sizing, and the provider's side of modify and destroy.

use mlx5_dv::errno::{EBUSY, EINVAL, EIO, EOPNOTSUPP};
use mlx5_dv::{
    ContextHandle, CqHandle, DcInitAttr, DvSendOpsFlags, Error, Op, Qp, QpCap, QpHandle, QpInitAttr, QpModify, QpState,
    Result, SendOpsFlags, dv_qp, qp_create_flags, qp_init_mask, qp_type, send_ops,
};

use super::ring::QpRings;
use super::{CtxKind, Lower, Provider, QpObj};
use crate::fabric::QpPath;
use crate::host::Dma;
use crate::kernel::{self, DcRole, QpRequest};

mod dc;
use crate::profile::DataPathSection;

/// Bytes of a send WQE basic block.
const SEND_WQE_BB: u32 = 64;
/// `_sq_overhead`: the largest fixed part of a WQE the QP may post, plus its transport
/// segment. UMR or LOCAL_INV: ctrl + UMR ctrl + mkey context + 64 = 192 bytes.
pub(super) fn sq_overhead(qp_type: u32, ops: SendOpsFlags, mlx5_ops: DvSendOpsFlags) -> u32 {
    let mut size = 16;
    if ops.intersects(send_ops::RDMA_WRITE | send_ops::RDMA_WRITE_WITH_IMM | send_ops::RDMA_READ) {
        size = size.max(16 + 16);
    }
    if ops.intersects(send_ops::ATOMIC_CMP_AND_SWP | send_ops::ATOMIC_FETCH_AND_ADD) {
        size = size.max(16 + 16 + 16);
    }
    if ops.intersects(send_ops::BIND_MW | send_ops::LOCAL_INV)
        || mlx5_ops.intersects(dv_qp::WITH_MR_INTERLEAVED | dv_qp::WITH_MR_LIST | dv_qp::WITH_MKEY_CONFIGURE)
    {
        size = size.max(16 + 48 + 64 + 64);
    }
    match qp_type {
        qp_type::UD => size + 48,
        qp_type::XRC_SEND => size + 16,
        // The Ethernet segment (`struct mlx5_wqe_eth_seg`).
        qp_type::RAW_PACKET => size + 16,
        _ => size,
    }
}

/// `sizeof(struct mlx5_wqe_inl_data_seg)`.
pub(super) const INL_SEG: i64 = 4;

pub(super) fn roundup_pow2(v: u64) -> u64 {
    v.max(1).checked_next_power_of_two().unwrap_or(u64::MAX)
}

/// `v` rounded up to a multiple of `a`, saturating.
pub(super) fn align(v: u32, a: u32) -> u32 {
    v.div_ceil(a.max(1)).saturating_mul(a)
}

/// The queues `mlx5_calc_sq_size` and `mlx5_calc_rq_size` choose, and the capacities written
/// back.
#[derive(Debug)]
pub(super) struct QueueSizes {
    cap: QpCap,
    pub(super) max_post: u32,
    max_gs: u32,
    max_inline: i64,
    rq_max_post: u32,
    rq_max_gs: u32,
    /// Send queue basic blocks (`sq.wqe_cnt`).
    pub(super) sq_bbs: u32,
}

/// `mlx5_calc_send_wqe`, `mlx5_calc_sq_size` and `mlx5_calc_rq_size`, in 64-bit arithmetic
/// (the provider's `int` sums cannot wrap here: a sum past `max_sq_desc_sz` is refused).
pub(super) fn size_queues(
    lim: &DataPathSection,
    cap: &QpCap,
    overhead: u32,
    srq: bool,
) -> std::result::Result<QueueSizes, String> {
    let mut out =
        QueueSizes { cap: *cap, max_post: 0, max_gs: 0, max_inline: 0, rq_max_post: 0, rq_max_gs: 0, sq_bbs: 0 };
    out.max_inline = i64::from(cap.max_inline_data);
    let desc = u64::from(lim.max_sq_desc_sz);
    if cap.max_send_wr > 0 {
        let size = u64::from(overhead);
        let inl_size =
            if cap.max_inline_data > 0 { size + (4 + u64::from(cap.max_inline_data)).next_multiple_of(16) } else { 0 };
        let max_gather = desc.saturating_sub(size) / 16;
        if u64::from(cap.max_send_sge) > max_gather {
            return Err(format!("max_send_sge {} > {max_gather}", cap.max_send_sge));
        }
        let tot = (size + u64::from(cap.max_send_sge) * 16).max(inl_size);
        if tot > desc {
            return Err(format!("a {tot}-byte send WQE exceeds max_sq_desc_sz {desc}"));
        }
        let wqe_size = tot.next_multiple_of(u64::from(SEND_WQE_BB));
        if wqe_size > desc {
            return Err(format!("a {wqe_size}-byte send WQE exceeds max_sq_desc_sz {desc}"));
        }
        if u64::from(cap.max_send_wr) > 0x7fff_ffff / desc {
            return Err(format!("max_send_wr {} > 0x7fffffff / max_sq_desc_sz", cap.max_send_wr));
        }
        let wq_size = roundup_pow2(u64::from(cap.max_send_wr) * wqe_size);
        let wqebbs = wq_size / u64::from(SEND_WQE_BB);
        if wqebbs > u64::from(lim.max_qp_wr) {
            return Err(format!("{wqebbs} send WQEBBs > max_send_wqebb {}", lim.max_qp_wr));
        }
        out.max_post = u32::try_from(wq_size / wqe_size).map_err(|_| "send queue too deep".to_string())?;
        out.sq_bbs = u32::try_from(wqebbs).map_err(|_| "send queue too deep".to_string())?;
        out.max_gs = cap.max_send_sge;
        out.max_inline = i64::try_from(wqe_size).unwrap_or(i64::MAX) - i64::from(overhead) - INL_SEG;
        out.cap.max_send_wr = out.max_post;
        out.cap.max_inline_data = u32::try_from(out.max_inline).unwrap_or(0);
    }
    out.cap.max_recv_sge = 0;
    if cap.max_recv_wr > 0 {
        if cap.max_recv_wr > lim.max_qp_wr {
            return Err(format!("max_recv_wr {} > max_qp_wr {}", cap.max_recv_wr, lim.max_qp_wr));
        }
        if srq {
            // mlx5_calc_rcv_wqe: no receive WQE on a QP that receives from an SRQ.
            out.cap.max_recv_wr = 0;
            return Ok(out);
        }
        let size = 16 * u64::from(cap.max_recv_sge.max(1));
        if size > u64::from(lim.max_rq_desc_sz) {
            return Err(format!("max_recv_sge {} exceeds max_rq_desc_sz", cap.max_recv_sge));
        }
        let wqe_size = roundup_pow2(size);
        let wq_size = (roundup_pow2(u64::from(cap.max_recv_wr)) * wqe_size).max(u64::from(SEND_WQE_BB));
        out.rq_max_post = u32::try_from(wq_size / wqe_size).map_err(|_| "receive queue too deep".to_string())?;
        out.rq_max_gs = u32::try_from(wqe_size / 16).map_err(|_| "receive WQE too large".to_string())?;
        out.cap.max_recv_wr = out.rq_max_post;
        out.cap.max_recv_sge = out.rq_max_gs;
    }
    Ok(out)
}

/// `MLX5_CREATE_QP_SUP_COMP_MASK`: every `ibv_qp_init_attr_mask` bit of rdma-core 44.
const SUP_COMP_MASK: u32 = qp_init_mask::PD
    | qp_init_mask::XRCD
    | qp_init_mask::CREATE_FLAGS
    | qp_init_mask::MAX_TSO_HEADER
    | qp_init_mask::IND_TABLE
    | qp_init_mask::RX_HASH
    | qp_init_mask::SEND_OPS_FLAGS;

/// `CREATE_QP_EX_SUP_CREATE_FLAGS` of libibverbs' `ibv_icmd_create_qp`.
const SUP_CREATE_FLAGS: u32 = qp_create_flags::BLOCK_SELF_MCAST_LB
    | qp_create_flags::SCATTER_FCS
    | qp_create_flags::CVLAN_STRIPPING
    | qp_create_flags::SOURCE_QPN
    | qp_create_flags::PCI_WRITE_END_PADDING;

/// The first checks of libmlx5's `create_qp`, on `comp_mask` and `create_flags`.
fn check_init_mask(attr: &QpInitAttr, mask: u32) -> Result<()> {
    let op = Op::CreateQp;
    // Two of them return NULL without setting errno: the trait reports that as EIO, as the hw
    // backend reads a NULL with errno 0.
    if mask & !SUP_COMP_MASK != 0 {
        let why = format!("comp_mask bit 0x{:x} unknown to libmlx5 (NULL, errno not set)", mask & !SUP_COMP_MASK);
        return Err(Error::new(op, EIO, why));
    }
    if mask & qp_init_mask::MAX_TSO_HEADER != 0 && attr.qp_type != qp_type::RAW_PACKET {
        return Err(Error::new(op, EIO, "MAX_TSO_HEADER on a QP that is not RAW_PACKET (NULL, errno not set)"));
    }
    if mask & qp_init_mask::SEND_OPS_FLAGS != 0 && mask & qp_init_mask::RX_HASH != 0 {
        return Err(Error::new(op, EINVAL, "SEND_OPS_FLAGS with RX_HASH"));
    }
    if mask & qp_init_mask::CREATE_FLAGS != 0
        && attr.create_flags & qp_create_flags::SOURCE_QPN != 0
        && attr.qp_type != qp_type::UD
    {
        return Err(Error::new(op, EINVAL, "IBV_QP_CREATE_SOURCE_QPN on a QP that is not UD"));
    }
    Ok(())
}

/// `sq_overhead`'s operations of a QP created without `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`: all
/// its type may post. `None` for a type it does not know (EINVAL).
pub(super) fn default_ops(ty: u32) -> Option<SendOpsFlags> {
    Some(match ty {
        qp_type::RC | qp_type::UC | qp_type::DRIVER | qp_type::XRC_RECV | qp_type::XRC_SEND => {
            send_ops::RC_DEFAULT | send_ops::ATOMIC_CMP_AND_SWP | send_ops::ATOMIC_FETCH_AND_ADD | send_ops::BIND_MW
        }
        qp_type::UD => send_ops::SEND | send_ops::SEND_WITH_IMM | send_ops::TSO,
        qp_type::RAW_PACKET => send_ops::SEND | send_ops::TSO,
        _ => return None,
    })
}

/// `mlx5_qp_fill_wr_pfns`: the operations asked for must be ones the QP type has.
fn check_send_ops(attr: &QpInitAttr, mlx5_ops: DvSendOpsFlags, dma_mmo: bool, atomics: bool, dci: bool) -> Result<()> {
    let op = Op::CreateQp;
    let ops = attr.send_ops_flags;
    let dv_all = dv_qp::WITH_MR_INTERLEAVED
        | dv_qp::WITH_MR_LIST
        | dv_qp::WITH_MKEY_CONFIGURE
        | dv_qp::WITH_RAW_WQE
        | dv_qp::WITH_MEMCPY;
    if !dv_all.contains(mlx5_ops) {
        return Err(Error::new(
            op,
            EOPNOTSUPP,
            format!("unknown mlx5dv send_ops_flags 0x{:x}", mlx5_ops.difference(dv_all).bits()),
        ));
    }
    // mlx5_qp_fill_wr_pfns: atomics asked for on a device whose atomic_cap is NONE.
    if !atomics && ops.intersects(send_ops::ATOMIC_CMP_AND_SWP | send_ops::ATOMIC_FETCH_AND_ADD) {
        return Err(Error::new(op, EOPNOTSUPP, "atomics on a device without atomic_cap"));
    }
    let rc_ops =
        send_ops::RC_DEFAULT | send_ops::ATOMIC_CMP_AND_SWP | send_ops::ATOMIC_FETCH_AND_ADD | send_ops::BIND_MW;
    let (allowed_ops, allowed_dv) = match attr.qp_type {
        qp_type::RC => (rc_ops, dv_all),
        qp_type::UC => (
            send_ops::SEND
                | send_ops::SEND_WITH_INV
                | send_ops::SEND_WITH_IMM
                | send_ops::RDMA_WRITE
                | send_ops::RDMA_WRITE_WITH_IMM
                | send_ops::LOCAL_INV
                | send_ops::BIND_MW,
            dv_qp::WITH_RAW_WQE,
        ),
        qp_type::UD => (send_ops::SEND | send_ops::SEND_WITH_IMM, dv_qp::WITH_RAW_WQE),
        qp_type::RAW_PACKET => (send_ops::SEND | send_ops::TSO, dv_qp::WITH_RAW_WQE),
        qp_type::XRC_SEND => (rc_ops, dv_qp::WITH_RAW_WQE),
        // MLX5_SUPPORTED_SEND_OPS_FLAGS_DCI: RC's; of mlx5's own, RAW_WQE and MEMCPY.
        qp_type::DRIVER if dci => (rc_ops, dv_qp::WITH_RAW_WQE | dv_qp::WITH_MEMCPY),
        qp_type::DRIVER => return Err(Error::new(op, EOPNOTSUPP, "send ops on a DRIVER QP that is not a DCI")),
        t => return Err(Error::new(op, EINVAL, format!("unknown qp_type {t}"))),
    };
    if !allowed_ops.contains(ops) || !allowed_dv.contains(mlx5_ops) {
        return Err(Error::new(op, EOPNOTSUPP, "send_ops_flags not supported by this QP type"));
    }
    // The memcpy builder drives the DMA engine: the device must offer it (every QP here
    // has a PD, which it needs too).
    if mlx5_ops.contains(dv_qp::WITH_MEMCPY) && !dma_mmo {
        return Err(Error::new(op, EOPNOTSUPP, "MLX5DV_QP_EX_WITH_MEMCPY needs the DMA-MMO capability"));
    }
    Ok(())
}

/// The create command's checks once the queues are sized: libibverbs' `ibv_icmd_create_qp`
/// (a PD, no indirection table beside a receive CQ, known create flags), then mlx5_ib's
/// `process_vendor_flags` (the mlx5dv flags only a raw packet QP takes: EINVAL elsewhere) and
/// `process_create_flags` for the simulated QP types (a flag the QP type or device lacks:
/// EOPNOTSUPP).
fn check_kernel_create(attr: &QpInitAttr, mask: u32) -> Result<()> {
    let op = Op::CreateQp;
    if mask & qp_init_mask::PD == 0 {
        return Err(Error::new(op, EINVAL, "an RC, UC or UD QP needs IBV_QP_INIT_ATTR_PD"));
    }
    if mask & qp_init_mask::IND_TABLE != 0 {
        return Err(Error::new(op, EINVAL, "an indirection table with a receive CQ"));
    }
    let flags = if mask & qp_init_mask::CREATE_FLAGS == 0 { 0 } else { attr.create_flags };
    if flags & !SUP_CREATE_FLAGS != 0 {
        return Err(Error::new(
            op,
            EINVAL,
            format!("create_flags 0x{:x} unknown to libibverbs", flags & !SUP_CREATE_FLAGS),
        ));
    }
    let raw = attr.qp_type == qp_type::RAW_PACKET;
    let raw_only = dv_qp::CREATE_TUNNEL_OFFLOADS
        | dv_qp::CREATE_TIR_ALLOW_SELF_LOOPBACK_UC
        | dv_qp::CREATE_TIR_ALLOW_SELF_LOOPBACK_MC;
    if let Some(dv) = attr.dv.filter(|d| d.comp_mask.intersects(dv_qp::MASK_QP_CREATE_FLAGS))
        && dv.create_flags.intersects(raw_only)
        && !raw
    {
        return Err(Error::new(op, EINVAL, "tunnel offloads or TIR self-loopback on a QP that is not RAW_PACKET"));
    }
    // Multicast loopback blocking is a device cap every simulated device has; SCATTER_FCS,
    // CVLAN_STRIPPING and PCI_WRITE_END_PADDING are raw packet QPs' (a device with raw
    // packet QPs has their caps); SOURCE_QPN is InfiniBand UD's.
    let mut rest = flags & !qp_create_flags::BLOCK_SELF_MCAST_LB;
    if raw {
        rest &=
            !(qp_create_flags::SCATTER_FCS | qp_create_flags::CVLAN_STRIPPING | qp_create_flags::PCI_WRITE_END_PADDING);
    }
    if rest != 0 {
        return Err(Error::new(op, EOPNOTSUPP, format!("create_flags 0x{rest:x} are not supported on this QP")));
    }
    Ok(())
}

impl Provider {
    /// `mlx5_create_qp` in the provider's order of checks, then the send/receive queue sizing.
    pub(crate) fn create_qp(&mut self, low: &mut Lower<'_>, attr: &QpInitAttr) -> Result<Qp> {
        let op = Op::CreateQp;
        if attr.qp_type == qp_type::XRC_RECV {
            check_init_mask(attr, attr.mask())?;
            return self.create_xrc_target(low, attr, attr.mask());
        }
        if attr.mask() & (qp_init_mask::RX_HASH | qp_init_mask::IND_TABLE) != 0 {
            check_init_mask(attr, attr.mask())?;
            return self.create_rss_qp(low, attr, attr.mask());
        }
        // An XRC initiator has no receive side: libibverbs passes no receive CQ and no
        // receive capacities for it.
        let xrc_send = attr.qp_type == qp_type::XRC_SEND;
        let recv_cq = if xrc_send { attr.send_cq } else { attr.recv_cq };
        let p = self.pds.get(attr.pd, op)?;
        let (ctx, pdn) = (p.ctx, p.pdn.unwrap_or(0));
        let scq = self.cqs.get(attr.send_cq, op)?;
        let rcq = self.cqs.get(recv_cq, op)?;
        let cqns = (scq.cqn, rcq.cqn);
        let c = self.contexts.get(ctx, op).map_err(|_| Error::new(op, EINVAL, "context closed"))?;
        let CtxKind::Kernel { .. } = c.kind else {
            return Err(Error::new(op, EOPNOTSUPP, "QPs are simulated on mlx5 kernel contexts only"));
        };
        let dev = c.dev;
        if scq.ctx != ctx || rcq.ctx != ctx {
            return Err(Error::new(op, EINVAL, "the CQs belong to another context"));
        }
        let mask = attr.mask();
        check_init_mask(attr, mask)?;
        let dct_asked = attr.qp_type == qp_type::DRIVER
            && attr.dv.is_some_and(|d| d.comp_mask.contains(dv_qp::MASK_DC) && d.dc.dc_type == DcInitAttr::DCT);
        if mask & qp_init_mask::SEND_OPS_FLAGS != 0 && dct_asked {
            return Err(Error::new(op, EINVAL, "IBV_QP_INIT_ATTR_SEND_OPS_FLAGS on a DCT"));
        }
        let mut dc = None;
        let mut scatter_to_cqe = true;
        let mut drain_sigerr = false;
        let mut mlx5_ops = DvSendOpsFlags::empty();
        let mut dv_ops_mask = false;
        if let Some(dv) = attr.dv {
            let sup =
                dv_qp::MASK_QP_CREATE_FLAGS | dv_qp::MASK_DC | dv_qp::MASK_SEND_OPS_FLAGS | dv_qp::MASK_DCI_STREAMS;
            if !sup.contains(dv.comp_mask) {
                return Err(Error::new(op, EINVAL, format!("unsupported dv comp_mask 0x{:x}", dv.comp_mask & !sup)));
            }
            if dv.comp_mask.intersects(dv_qp::MASK_DC) && attr.qp_type != qp_type::DRIVER {
                return Err(Error::new(op, EINVAL, "DC attributes need IBV_QPT_DRIVER"));
            }
            if dv.comp_mask.intersects(dv_qp::MASK_QP_CREATE_FLAGS) {
                let sup = dv_qp::CREATE_TUNNEL_OFFLOADS
                    | dv_qp::CREATE_TIR_ALLOW_SELF_LOOPBACK_UC
                    | dv_qp::CREATE_TIR_ALLOW_SELF_LOOPBACK_MC
                    | dv_qp::CREATE_DISABLE_SCATTER_TO_CQE
                    | dv_qp::CREATE_ALLOW_SCATTER_TO_CQE
                    | dv_qp::CREATE_PACKET_BASED_CREDIT_MODE
                    | dv_qp::CREATE_SIG_PIPELINING;
                // The flag exists from rdma-core 55 on; older libraries refuse it as unknown.
                let sup = if self.limits.rdma_core_release >= 55 { sup | dv_qp::CREATE_OOO_DP } else { sup };
                if !sup.contains(dv.create_flags) {
                    return Err(Error::new(
                        op,
                        EINVAL,
                        format!("unsupported create_flags 0x{:x}", dv.create_flags & !sup),
                    ));
                }
                if dv.create_flags.intersects(dv_qp::CREATE_DISABLE_SCATTER_TO_CQE) {
                    if dv.create_flags.intersects(dv_qp::CREATE_ALLOW_SCATTER_TO_CQE) {
                        return Err(Error::new(op, EINVAL, "DISABLE and ALLOW_SCATTER_TO_CQE together"));
                    }
                    scatter_to_cqe = false;
                }
                if dv.create_flags.contains(dv_qp::CREATE_OOO_DP) && !self.limits.ooo_dp {
                    return Err(Error::new(op, EOPNOTSUPP, "the device has no out-of-order data placement"));
                }
                if dv.create_flags.intersects(dv_qp::CREATE_SIG_PIPELINING) {
                    if !low.kernel.facts().sqd2rts {
                        return Err(Error::new(op, EOPNOTSUPP, "SIG_PIPELINING needs the kernel's SQD2RTS support"));
                    }
                    drain_sigerr = true;
                }
            }
            if attr.qp_type == qp_type::DRIVER {
                if !dv.comp_mask.intersects(dv_qp::MASK_DC) {
                    return Err(Error::new(op, EINVAL, "IBV_QPT_DRIVER needs MLX5DV_QP_INIT_ATTR_MASK_DC"));
                }
                let streams = self.ctx(ctx, op)?.caps.dci_streams;
                dc = Some(dc::dc_role(attr, &dv, mask, self.limits.dc, streams)?);
            }
            if dv.comp_mask.intersects(dv_qp::MASK_SEND_OPS_FLAGS) {
                mlx5_ops = dv.send_ops_flags;
                dv_ops_mask = true;
            }
        } else if attr.qp_type == qp_type::DRIVER {
            // create_qp returns NULL here without setting errno; the trait reports that as EIO,
            // as the hw backend reads a NULL with errno 0.
            return Err(Error::new(op, EIO, "IBV_QPT_DRIVER without mlx5dv attributes (NULL, errno not set)"));
        }
        let wr_api = mask & qp_init_mask::SEND_OPS_FLAGS != 0;
        let ops = if wr_api {
            attr.send_ops_flags
        } else {
            default_ops(attr.qp_type)
                .ok_or_else(|| Error::new(op, EINVAL, format!("unknown qp_type {}", attr.qp_type)))?
        };
        if wr_api || dv_ops_mask {
            check_send_ops(
                attr,
                mlx5_ops,
                self.limits.dma_mmo,
                self.limits.atomic,
                matches!(dc, Some(DcRole::Dci(_))),
            )?;
        }
        if attr.qp_type == qp_type::RAW_PACKET && !self.limits.raw_packet {
            return Err(Error::new(op, EOPNOTSUPP, "the device has no raw packet QPs (an InfiniBand port)"));
        }
        let simulated =
            matches!(attr.qp_type, qp_type::RC | qp_type::UC | qp_type::UD | qp_type::XRC_SEND | qp_type::RAW_PACKET);
        if !simulated && dc.is_none() {
            return Err(Error::new(op, EOPNOTSUPP, "only RC, UC, UD, XRC, raw packet and DC QPs are simulated"));
        }
        let overhead = sq_overhead(attr.qp_type, ops, mlx5_ops);
        let srqn = match attr.srq {
            Some(h) => Some(self.srqs.get(h, op)?.srqn),
            None => None,
        };
        // libmlx5 sizes no queues for a DCT, and no receive queue for an XRC initiator.
        let cap = if matches!(dc, Some(DcRole::Dct(_))) {
            QpCap::default()
        } else if xrc_send {
            QpCap { max_recv_wr: 0, max_recv_sge: 0, ..attr.cap }
        } else {
            attr.cap
        };
        let sizes =
            size_queues(&self.limits, &cap, overhead, srqn.is_some()).map_err(|why| Error::new(op, EINVAL, why))?;
        check_kernel_create(attr, mask)?;
        let rings = QpRings::alloc(low.host, sizes.sq_bbs, sizes.rq_max_post, sizes.rq_max_gs.saturating_mul(16), op)?;
        let req = QpRequest {
            ctx: ctx.id(),
            dev,
            qp_type: attr.qp_type,
            pdn,
            cqns,
            scatter_to_cqe,
            drain_sigerr,
            sq: rings.sq.buf,
            rq: rings.rq.buf,
            dbrec: rings.dbrec,
            srqn,
            dc,
            xrcd: 0,
        };
        let qpn = match low.kernel.create_qp(low.devices, &req) {
            Ok(n) => n,
            Err(e) => {
                rings.free(low.host);
                return Err(e);
            }
        };
        let obj = QpObj {
            ctx,
            dev,
            pd: attr.pd,
            qpn,
            cqs: [attr.send_cq, recv_cq],
            rc: matches!(attr.qp_type, qp_type::RC | qp_type::XRC_SEND),
            dci: matches!(dc, Some(DcRole::Dci(_))),
            qp_type: attr.qp_type,
            max_post: sizes.max_post,
            max_gs: sizes.max_gs,
            rq_max_post: sizes.rq_max_post,
            rq_max_gs: sizes.rq_max_gs,
            max_inline_data: sizes.max_inline,
            mkey_ops: !mlx5_ops.is_empty(),
            mlx5_ops,
            wr_complete_real: false,
            fence_next: false,
            rings: rings.clone(),
            // create_qp ends with set_qp_operational_state(RESET).
            rq_state_max_gs: -1,
            sq_state_max_gs: -1,
            sig_all: attr.sq_sig_all,
            wr_api,
            srq: attr.srq,
            atomics: self.limits.atomic,
            xrcd: None,
        };
        let handle = match self.qps.insert(op, obj) {
            Ok(h) => h,
            Err(e) => {
                low.kernel.destroy_qp(low.devices, dev, qpn);
                rings.free(low.host);
                return Err(e);
            }
        };
        for cq in [attr.send_cq, recv_cq] {
            self.cqs.acquire(cq, op)?;
        }
        self.pds.acquire(attr.pd, op)?;
        if let Some(s) = attr.srq {
            self.srqs.acquire(s, op)?;
        }
        // uverbs echoes a DCT's capacities as asked: mlx5_ib's create_dct sizes nothing.
        let cap = if matches!(dc, Some(DcRole::Dct(_))) { attr.cap } else { sizes.cap };
        Ok(Qp { handle, qp_num: qpn, cap })
    }

    /// `ibv_destroy_qp`.
    pub(crate) fn destroy_qp(&mut self, low: &mut Lower<'_>, qp: &Qp) -> Result<()> {
        let q = self.qps.get(qp.handle, Op::DestroyQp)?;
        self.check_no_flows(low, q.dev, q.qpn)?;
        // uverbs refuses to destroy a QP still attached to a multicast group (a closing
        // context's QPs are detached instead).
        if low.devices.get(q.dev).is_some_and(|d| d.in_a_group(q.qpn)) {
            return Err(Error::new(Op::DestroyQp, EBUSY, "the QP is still attached to a multicast group"));
        }
        // A NIC takes the WQEs of a doorbell within microseconds, long before the destroy's
        // system call reaches it: a free-running device does what was rung first.
        if low.wake.is_some() {
            low.run_now();
        }
        self.remove_qp(low, qp.handle);
        Ok(())
    }

    fn remove_qp(&mut self, low: &mut Lower<'_>, h: QpHandle) {
        let Ok(q) = self.qps.take(h, Op::DestroyQp) else { return };
        if let Some(x) = q.xrcd {
            // A target QP handle: the QP goes with its last handle.
            low.kernel.close_target(low.devices, q.dev, q.qpn);
            q.rings.free(low.host);
            self.xrcds.release(x);
            return;
        }
        let rss = self.forget_rss(low, h, q.dev, q.qpn);
        // A closing context's flows go with their QPs.
        if let Some(d) = low.devices.get_mut(q.dev) {
            let ids: Vec<u32> = d.flows().iter().filter(|r| r.qpn == q.qpn).map(|r| r.id).collect();
            for id in ids {
                d.remove_flow(id);
            }
        }
        low.kernel.destroy_qp(low.devices, q.dev, q.qpn);
        if !rss {
            self.clean_cqs(low.host, &q.cqs, q.qpn);
        }
        q.rings.free(low.host);
        for cq in q.cqs {
            self.cqs.release(cq);
        }
        self.pds.release(q.pd);
        if let Some(s) = q.srq {
            self.srqs.release(s);
        }
    }

    /// What a closing context owns on the data path: QPs, MRs, then CQs.
    pub(super) fn release_queues_of(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) {
        let op = Op::CloseDevice;
        for h in self.qps.handles_where(|q| q.ctx == ctx) {
            self.remove_qp(low, h);
        }
        self.release_wqs_of(ctx);
        self.release_srqs_of(low, ctx);
        self.release_xrcds_of(low, ctx);
        for h in self.mrs.handles_where(|m| m.ctx == ctx) {
            if let Ok(m) = self.mrs.take(h, op) {
                if let Some(d) = low.devices.get_mut(m.dev) {
                    let _ = kernel::destroy_mkey(d, m.index, op);
                }
                self.release_mr_memory(low, &m);
            }
        }
        for h in self.cqs.handles_where(|c| c.ctx == ctx) {
            if let Ok(c) = self.cqs.take(h, op) {
                let _ = low.kernel.destroy_cq(low.devices, c.dev, c.cqn);
                c.ring.free(low.host);
            }
        }
    }

    fn qp_path(&self, h: QpHandle, op: Op) -> Result<(QpPath, &QpObj)> {
        let q = self.qps.get(h, op)?;
        Ok((QpPath { dev: q.dev, qpn: q.qpn }, q))
    }

    /// Where the QP's queues and doorbell record are, as `mlx5dv_init_obj` reports them.
    pub(crate) fn qp_memory(&self, qp: &Qp) -> Result<crate::QpMemory> {
        let q = self.qps.get(qp.handle, Op::InitObj)?;
        let (sq, rq) = (&q.rings.sq.buf, &q.rings.rq.buf);
        Ok(crate::QpMemory {
            qpn: q.qpn,
            dbrec: q.rings.dbrec,
            sq_buf: sq.addr,
            sq_wqe_cnt: sq.wqe_cnt,
            rq_buf: rq.addr,
            rq_wqe_cnt: rq.wqe_cnt,
            rq_stride: rq.stride,
        })
    }

    /// Where the CQ's ring and doorbell record are, as `mlx5dv_init_obj` reports them.
    /// The device and number of a CQ.
    pub(crate) fn cq_device(&self, cq: &mlx5_dv::Cq) -> Result<(usize, u32)> {
        let c = self.cqs.get(cq.handle, Op::CreateCq)?;
        Ok((c.dev, c.cqn))
    }

    /// The device of a kernel context (a VFIO context has no `query_rt_values`).
    pub(crate) fn kernel_ctx_device(&self, ctx: mlx5_dv::ContextHandle) -> Result<usize> {
        let c = self.ctx(ctx, Op::QueryDevice)?;
        if !c.is_kernel() {
            return Err(Error::new(Op::QueryDevice, EOPNOTSUPP, "not a kernel context"));
        }
        Ok(c.dev)
    }

    pub(crate) fn cq_memory(&self, cq: &mlx5_dv::Cq) -> Result<crate::CqMemory> {
        let c = self.cqs.get(cq.handle, Op::InitObj)?;
        Ok(crate::CqMemory {
            cqn: c.cqn,
            buf: c.ring.ring.addr,
            dbrec: c.ring.dbrec,
            cqe_cnt: c.ring.ring.wqe_cnt,
            cqe_size: c.ring.ring.stride,
        })
    }

    /// The send WQE at basic block `index` of the QP's ring, linearised.
    pub(crate) fn sq_wqe(&self, low: &Lower<'_>, qp: &Qp, index: u32) -> Result<Vec<u8>> {
        let op = Op::InitObj;
        let sq = &self.qps.get(qp.handle, op)?.rings.sq.buf;
        if sq.is_empty() {
            return Err(Error::new(op, EINVAL, "the QP has no send queue"));
        }
        let ring =
            low.host.read(sq.addr, sq.len()).ok_or_else(|| Error::new(op, EINVAL, "the send queue is unmapped"))?;
        mlx5_dv::prm::wqe::compose::linearise(ring, (index & (sq.wqe_cnt - 1)) as usize)
            .ok_or_else(|| Error::new(op, EINVAL, format!("no WQE at basic block {index}")))
    }

    /// `ibv_query_qp`'s state.
    pub(crate) fn query_qp_state(&self, low: &Lower<'_>, qp: &Qp) -> Result<QpState> {
        let op = Op::QueryQp;
        self.refuse_rss(qp.handle, op)?;
        let (at, _) = self.qp_path(qp.handle, op)?;
        low.devices.get(at.dev).and_then(|d| d.qp_state(at.qpn)).ok_or_else(|| Error::new(op, EINVAL, "stale QP"))
    }

    /// `ibv_modify_qp`: the kernel's rules, then the provider's own state
    /// (`set_qp_operational_state`: RESET empties the queues and takes every SGE limit to -1,
    /// INIT opens the receive queue's, RTS the send queue's and makes `wr_complete` real).
    pub(crate) fn modify_qp(&mut self, low: &mut Lower<'_>, qp: &Qp, m: &QpModify) -> Result<()> {
        let op = Op::ModifyQp;
        self.refuse_rss(qp.handle, op)?;
        let (at, _) = self.qp_path(qp.handle, op)?;
        low.kernel.modify_qp(low.devices, at, m)?;
        // Only a call whose mask has IBV_QP_STATE moves the provider's own state.
        let state = m.ext.is_none_or(|e| e.mask.contains(mlx5_dv::QpAttrMask::STATE)).then_some(m.state);
        if state == Some(QpState::Reset) {
            // mlx5_modify_qp: the QP's CQEs go from its CQs, and the queues start over.
            let (cqs, qpn) = self.qps.get(qp.handle, op).map(|q| (q.cqs, q.qpn))?;
            self.clean_cqs(low.host, &cqs, qpn);
        }
        let q = self.qps.get_mut(qp.handle, op)?;
        match state {
            Some(QpState::Reset) => {
                q.rings.reset(low.host);
                q.wr_complete_real = false;
                q.rq_state_max_gs = -1;
                q.sq_state_max_gs = -1;
            }
            Some(QpState::Init) => q.rq_state_max_gs = i64::from(q.rq_max_gs),
            Some(QpState::Rts) => {
                q.wr_complete_real = true;
                q.sq_state_max_gs = i64::from(q.max_gs);
            }
            _ => {}
        }
        low.run();
        Ok(())
    }

    /// `mlx5_cq_clean` on a QP's receive CQ, then its send CQ if it is another.
    fn clean_cqs(&mut self, host: &mut crate::host::Host, cqs: &[CqHandle; 2], qpn: u32) {
        let [send, recv] = *cqs;
        for h in if send == recv { vec![recv] } else { vec![recv, send] } {
            if let Ok(c) = self.cqs.get_mut(h, Op::ModifyQp) {
                c.ring.clean(host, qpn);
            }
        }
    }
}
