//! Verbs SRQs in the kernel (mlx5_ib's `srq.c`): `ibv_create_srq`, `ibv_modify_srq`,
//! `ibv_query_srq` and `ibv_destroy_srq` become CREATE_SRQ, ARM_RQ, QUERY_SRQ and DESTROY_SRQ,
//! after the checks `mlx5_ib_create_srq` and `mlx5_ib_modify_srq` make.

use mlx5_dv::errno::EINVAL;
use mlx5_dv::prm::{self, queues::srq as f};
use mlx5_dv::{Error, Op, Result, SrqAttr, SrqHandle, srq_attr_mask};

use super::{Kernel, cmd_error, internal, kernel_cmd};
use crate::device::Device;

/// What `ibv_create_srq` hands the kernel once libmlx5 has sized the SRQ.
#[derive(Debug, Clone, Copy)]
pub struct SrqRequest {
    /// The owning context.
    pub ctx: u32,
    /// Its device.
    pub dev: usize,
    /// The PD number.
    pub pdn: u32,
    /// `attr.max_wr` as libmlx5 passes it: its WQE count less one.
    pub max_wr: u32,
    /// `attr.max_sge` as libmlx5 passes it: what its rounded WQE holds.
    pub max_sge: u32,
    /// The WQE buffer.
    pub buf: u64,
    /// The doorbell record.
    pub dbrec: u64,
    /// An XRC SRQ's domain and CQ numbers (0 and 0 for a basic SRQ; 0 and the CQ for a
    /// tag-matching SRQ).
    pub xrc: (u32, u32),
    /// A tag-matching SRQ's `max_num_tags`.
    pub tm: Option<u32>,
}

/// What the kernel keeps of a verbs SRQ (`struct mlx5_ib_srq`).
#[derive(Debug, Clone, Copy)]
pub(super) struct KernelSrq {
    pub(super) ctx: u32,
    uid: u16,
    /// `msrq.max`: its WQEs.
    max: u32,
    /// `msrq.max_gs`.
    max_gs: u32,
    /// The provider's handle, for its events.
    pub(super) handle: Option<SrqHandle>,
    /// An XRC SRQ's domain (0: a basic SRQ), which it holds.
    xrcd: u32,
}

/// The most receive WQE bytes (`max_wqe_sz_rq`).
fn max_sge_sz(max_rq_desc_sz: u32) -> u32 {
    max_rq_desc_sz / 16
}

fn small(opcode: u16, uid: u16, srqn: u32, op: Op) -> Result<Vec<u8>> {
    let mut input = prm::new_input(f::SMALL, opcode, 0, 0);
    prm::mbox_in::UID.set(&mut input, u64::from(uid)).map_err(|e| internal(op, e))?;
    f::SRQN.set(&mut input, u64::from(srqn)).map_err(|e| internal(op, e))?;
    Ok(input)
}

impl Kernel {
    /// `mlx5_ib_create_srq`: `max_wr` at or past `2^log_max_srq_sz` or `max_sge` past
    /// `max_wqe_sz_rq / 16` is EINVAL; the SRQ gets `max_wr + 1` rounded up to a power of two
    /// WQEs of `max(32, 16 + 16 * max_sge)` bytes rounded likewise; then CREATE_SRQ.
    pub fn create_srq(&mut self, devices: &mut [Device], r: &SrqRequest) -> Result<u32> {
        let op = Op::CreateSrq;
        if u64::from(r.max_wr) >= 1u64 << self.limits.log_max_srq_sz
            || r.max_sge > max_sge_sz(self.limits.max_rq_desc_sz)
        {
            let why = format!("max_wr {} or max_sge {} past the device's SRQ limits", r.max_wr, r.max_sge);
            return Err(Error::new(op, EINVAL, why));
        }
        let d = devices.get_mut(r.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        // A list of 2^(ilog2(max_num_tags) + 1) entries, within log_tag_matching_list_sz.
        let tm_log = match r.tm {
            None => None,
            Some(tags) => {
                let log = tags.checked_ilog2().map_or(0, |l| l + 1);
                // A device without tag matching reports a list size of 0.
                let cap = d.tm_log_list_size().unwrap_or(0);
                if log > u32::from(cap) {
                    let why = format!("max_num_tags {tags} needs a list of 2^{log} > 2^{cap} entries");
                    return Err(Error::new(op, EINVAL, why));
                }
                Some(log as u8)
            }
        };
        let max = (u64::from(r.max_wr) + 1).next_power_of_two();
        let desc = (16 + 16 * u64::from(r.max_sge)).next_power_of_two().max(32);
        let uid = self.uids.get(&r.ctx).copied().unwrap_or(0);
        let first = r.buf & !0xfff;
        let pages = (r.buf + max * desc).saturating_sub(first).div_ceil(4096).max(1);
        let mut input = prm::new_input(f::SIZE, f::CREATE_SRQ, 0, 0);
        for i in 0..pages {
            input.extend_from_slice(&(first + i * 4096).to_be_bytes());
        }
        let fields = [
            (prm::mbox_in::UID, u64::from(uid)),
            (f::LOG_SRQ_SIZE, u64::from(max.trailing_zeros())),
            (f::LOG_RQ_STRIDE, u64::from(desc.trailing_zeros() - 4)),
            (f::PAGE_OFFSET, (r.buf & 0xfff) / 64),
            (f::PD, u64::from(r.pdn)),
            (f::DBR_ADDR, r.dbrec),
            (f::XRCD, u64::from(r.xrc.0)),
            (f::CQN, u64::from(r.xrc.1)),
        ];
        for (fl, v) in fields {
            fl.set(&mut input, v).map_err(|e| internal(op, e))?;
        }
        let mut out = [0u8; f::SMALL];
        kernel_cmd(d, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "CREATE_SRQ"))?;
        let srqn = f::SRQN.get(&out).map_err(|e| internal(op, e))? as u32;
        if let Some(log) = tm_log {
            // The command QP libmlx5 makes is not simulated as a QP: list completions name 0.
            d.enable_tag_matching(srqn, log, 0);
        }
        let k = KernelSrq { ctx: r.ctx, uid, max: max as u32, max_gs: r.max_sge, handle: None, xrcd: r.xrc.0 };
        self.srqs.insert((r.dev, srqn), k);
        if r.xrc.0 != 0 {
            self.xrcd_hold(r.dev, r.xrc.0);
        }
        Ok(srqn)
    }

    /// The provider's handle of an SRQ, for the events it raises.
    pub fn set_srq_handle(&mut self, dev: usize, srqn: u32, h: SrqHandle) {
        if let Some(k) = self.srqs.get_mut(&(dev, srqn)) {
            k.handle = Some(h);
        }
    }

    /// `mlx5_ib_modify_srq`: a resize (`IBV_SRQ_MAX_WR`) is EINVAL; a limit at or past the
    /// SRQ's WQEs is EINVAL; otherwise ARM_RQ with the new limit.
    pub fn modify_srq(&mut self, devices: &mut [Device], dev: usize, srqn: u32, a: &SrqAttr, mask: u32) -> Result<()> {
        let op = Op::ModifySrq;
        let k = *self.srqs.get(&(dev, srqn)).ok_or_else(|| Error::new(op, EINVAL, "stale SRQ"))?;
        if mask & srq_attr_mask::MAX_WR != 0 {
            return Err(Error::new(op, EINVAL, "mlx5 SRQs cannot be resized"));
        }
        if mask & srq_attr_mask::LIMIT != 0 {
            if a.srq_limit >= k.max {
                return Err(Error::new(op, EINVAL, format!("srq_limit {} >= the SRQ's {} WQEs", a.srq_limit, k.max)));
            }
            let d = devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
            let mut input = small(f::ARM_RQ, k.uid, srqn, op)?;
            prm::mbox_in::OP_MOD.set(&mut input, u64::from(f::ARM_RQ_OP_MOD_SRQ)).map_err(|e| internal(op, e))?;
            f::ARM_LWM.set(&mut input, u64::from(a.srq_limit)).map_err(|e| internal(op, e))?;
            let mut out = [0u8; prm::mbox_out::SIZE];
            kernel_cmd(d, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "ARM_RQ"))?;
        }
        Ok(())
    }

    /// `mlx5_ib_query_srq`: the limit from QUERY_SRQ's `lwm`, `max_wr` one less than the
    /// SRQ's WQEs, `max_sge` as created.
    pub fn query_srq(&mut self, devices: &mut [Device], dev: usize, srqn: u32) -> Result<SrqAttr> {
        let op = Op::QuerySrq;
        self.deliver_events(devices);
        let k = *self.srqs.get(&(dev, srqn)).ok_or_else(|| Error::new(op, EINVAL, "stale SRQ"))?;
        let d = devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let input = small(f::QUERY_SRQ, k.uid, srqn, op)?;
        let mut out = vec![0u8; f::SIZE];
        kernel_cmd(d, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "QUERY_SRQ"))?;
        let lwm = f::LWM.get(&out).map_err(|e| internal(op, e))? as u32;
        Ok(SrqAttr { max_wr: k.max - 1, max_sge: k.max_gs, srq_limit: lwm })
    }

    /// `mlx5_ib_destroy_srq`: DESTROY_SRQ; when it fails, the call fails and the SRQ stays.
    pub fn destroy_srq(&mut self, devices: &mut [Device], dev: usize, srqn: u32) -> Result<()> {
        let op = Op::DestroySrq;
        self.deliver_events(devices);
        let Some(k) = self.srqs.get(&(dev, srqn)).copied() else { return Ok(()) };
        if let Some(d) = devices.get_mut(dev) {
            let input = small(f::DESTROY_SRQ, k.uid, srqn, op)?;
            let mut out = [0u8; prm::mbox_out::SIZE];
            kernel_cmd(d, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "DESTROY_SRQ"))?;
        }
        self.srqs.remove(&(dev, srqn));
        if let Some(h) = k.handle {
            self.drop_events(k.ctx, |e| e.srq == Some(h));
        }
        if k.xrcd != 0 {
            self.xrcd_release(devices, dev, k.xrcd);
        }
        Ok(())
    }
}
