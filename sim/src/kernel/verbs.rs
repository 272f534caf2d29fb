//! Verbs CQs and QPs in the kernel (mlx5_ib): `ibv_create_cq`, `ibv_create_qp`,
//! `ibv_modify_qp` and `ibv_destroy_*` become the PRM commands `mlx5_ib` issues (CREATE_CQ
//! with its `cqc` and page list, CREATE_QP with its `qpc`, the state-change command of each
//! transition with the `qpc` fields and optional-parameter mask of `__mlx5_ib_modify_qp`,
//! DESTROY_*), run through the firmware's command interface like every other command: fault
//! rules act on them, and the command log shows them. A failed command fails the call with
//! the errno its status maps to.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, Field, opcode, queues as q};
use mlx5_dv::{AccessFlags, Error, Op, QpAttrExt, QpAttrMask as M, QpDest, QpModify, QpState, Result};

use super::{DcRole, Kernel, QpRequest, cmd_error, internal, kernel_cmd};

mod dc;
use crate::device::Device;
use crate::device::firmware::{PSN_MASK, cq_or_qp_input, raw_op};
use crate::fabric::QpPath;
use crate::host::Host;

/// 4 KiB: the pages of a PAS list (`MLX5_ADAPTER_PAGE_SHIFT`).
const PAGE: u64 = 4096;

/// `MLX5_IB_ACK_REQ_FREQ`.
const ACK_REQ_FREQ: u64 = 8;

/// MODIFY_CQ's op_mod for a resize (`MLX5_CQ_OPMOD_RESIZE`).
const RESIZE_OP_MOD: u16 = 1;
/// `modify_cq_in.modify_field_select`; a resize selects the log size, the page offset and
/// the page size (`MLX5_MODIFY_CQ_MASK_LOG_SIZE | _PG_OFFSET | _PG_SIZE`).
const MODIFY_FIELD_SELECT: Field = Field::new("modify_field_select", 0x60, 32);
const RESIZE_SELECT: u64 = 0b111;

/// What `ibv_create_cq` hands the kernel: the ring and doorbell record libmlx5 mapped.
#[derive(Debug, Clone, Copy)]
pub struct CqRequest {
    /// CQEs it holds at most (the ring has one slot more, a power of two).
    pub cqe: u32,
    /// The ring: `cqe + 1` entries of `cqe_size` bytes.
    pub ring: u64,
    /// The doorbell record.
    pub dbrec: u64,
    /// The CQE size libmlx5 chose, 64 or 128.
    pub cqe_size: u32,
    /// `IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN`: `cqc.oi`.
    pub oi: bool,
    /// `cqe_comp_en` with this `enum mlx5dv_cqe_comp_res_format` value.
    pub compress: Option<u8>,
    /// `MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD`.
    pub pad: bool,
}

/// What the kernel keeps of a verbs QP (`struct mlx5_ib_qp`).
#[derive(Debug, Clone, Copy)]
pub(super) struct KernelQp {
    /// The owning context.
    pub(super) ctx: u32,
    /// `enum ibv_qp_type`.
    pub(super) qp_type: u32,
    /// The uid its commands carry (the context's DEVX uid, 0 without one).
    uid: u16,
    pdn: u32,
    cqns: (u32, u32),
    /// `trans_qp.atomic_rd_en`: the access flags last set.
    atomic_rd_en: AccessFlags,
    /// `trans_qp.resp_depth`: the `max_dest_rd_atomic` last set.
    resp_depth: u8,
    /// `qp->state`: the state the last successful modify left (the device may have moved
    /// the QP on since, to ERR or SQD).
    state: QpState,
    /// The service type (`qpc.st`; the simulator's own value for a DCT).
    st: u8,
}

/// `to_mlx5_st`: the service type of a QP type the simulator makes.
fn to_mlx5_st(qp_type: u32) -> Option<u8> {
    use mlx5_dv::qp_type as t;
    match qp_type {
        t::RC => Some(q::st::RC),
        t::UC => Some(q::st::UC),
        t::UD => Some(q::st::UD),
        t::XRC_SEND | t::XRC_RECV => Some(q::st::XRC),
        t::RAW_PACKET => Some(q::st::RAW),
        _ => None,
    }
}

/// log2 of a power of two.
fn log2(n: u64) -> u64 {
    u64::from(n.max(1).trailing_zeros())
}

/// `fls(n - 1)`: the log2 field of a count of outstanding READs (0 for 0 or 1).
fn fls_minus_one(n: u8) -> u64 {
    u64::from(8 - n.saturating_sub(1).leading_zeros())
}

/// Write a field, keeping the bits that fit (as `MLX5_SET` does).
fn set(input: &mut [u8], f: Field, v: u64, op: Op) -> Result<()> {
    let v = if f.width >= 64 { v } else { v & ((1u64 << f.width) - 1) };
    f.set(input, v).map_err(|e| internal(op, e))
}

/// The big-endian addresses of the 4 KiB pages of `[addr, addr + len)` after a mailbox of
/// `head` bytes (`mlx5_ib_populate_pas`); one page for an empty buffer.
fn with_pas(head: usize, addr: u64, len: u64) -> Vec<u8> {
    let first = addr & !(PAGE - 1);
    let end = addr.saturating_add(len.max(1));
    let pages = end.saturating_sub(first).div_ceil(PAGE).max(1);
    let mut input = vec![0u8; head];
    for i in 0..pages {
        input.extend_from_slice(&first.saturating_add(i * PAGE).to_be_bytes());
    }
    input
}

/// `ib_mask_to_mlx5_opt`: the optional parameters an attribute mask names.
fn mlx5_opt(mask: M) -> u32 {
    use q::optpar as o;
    let access = o::RRE | o::RWE | o::RAE;
    [
        (M::ACCESS_FLAGS, access),
        (M::PKEY_INDEX, o::PKEY_INDEX),
        (M::PORT, o::PRI_PORT),
        (M::QKEY, o::Q_KEY),
        (M::AV, o::PRIMARY_ADDR_PATH | o::PRI_PORT),
        (M::TIMEOUT, o::ACK_TIMEOUT),
        (M::RETRY_CNT, o::RETRY_COUNT),
        (M::RNR_RETRY, o::RNR_RETRY),
        (M::MAX_QP_RD_ATOMIC, o::SRA_MAX),
        (M::ALT_PATH, o::ALT_ADDR_PATH),
        (M::MIN_RNR_TIMER, o::RNR_TIMEOUT),
        (M::MAX_DEST_RD_ATOMIC, o::RRA_MAX | access),
        (M::PATH_MIG_STATE, o::PM_STATE),
    ]
    .iter()
    .filter(|(m, _)| mask.contains(*m))
    .fold(0, |acc, (_, o)| acc | o)
}

/// `opt_mask[cur][new][st]`: the optional parameters each transition passes on.
fn opt_mask(cur: QpState, to: QpState, st: u8) -> u32 {
    use QpState::{Init, Rtr, Rts, Sqd, Sqe};
    use q::optpar as o;
    let (rc, uc, ud) = (matches!(st, q::st::RC | q::st::XRC), st == q::st::UC, st == q::st::UD);
    let access = o::RRE | o::RAE | o::RWE;
    let pick = |r: u32, u: u32, d: u32| {
        if rc {
            r
        } else if uc {
            u
        } else if ud {
            d
        } else {
            0
        }
    };
    match (cur, to) {
        (Init, Init) => pick(access | o::PKEY_INDEX | o::PRI_PORT, o::RWE | o::PKEY_INDEX | o::PRI_PORT, {
            o::PKEY_INDEX | o::Q_KEY | o::PRI_PORT
        }),
        (Init, Rtr) => pick(
            o::ALT_ADDR_PATH | access | o::PKEY_INDEX,
            o::ALT_ADDR_PATH | o::RWE | o::PKEY_INDEX,
            o::PKEY_INDEX | o::Q_KEY,
        ),
        (Rtr, Rts) | (Rts, Rts) => pick(
            o::ALT_ADDR_PATH | access | o::PM_STATE | o::RNR_TIMEOUT,
            o::ALT_ADDR_PATH | o::RWE | o::PM_STATE,
            o::Q_KEY,
        ),
        (Sqe, Rts) | (Sqd, Rts) => pick(o::RNR_TIMEOUT | access, o::RWE, o::Q_KEY),
        _ => 0,
    }
}

/// The command of a transition (`optab` of `__mlx5_ib_modify_qp`); `None` for one mlx5_ib
/// has no command for.
fn transition_op(cur: QpState, to: QpState) -> Option<u16> {
    use QpState::{Err, Init, Reset, Rtr, Rts, Sqd, Sqe};
    Some(match (cur, to) {
        (_, Reset) => opcode::QP_2RST,
        (_, Err) => opcode::QP_2ERR,
        (Reset, Init) => opcode::RST2INIT_QP,
        (Init, Init) => raw_op::INIT2INIT_QP,
        (Init, Rtr) => opcode::INIT2RTR_QP,
        (Rtr, Rts) => opcode::RTR2RTS_QP,
        (Rts, Rts) => opcode::RTS2RTS_QP,
        (Sqd, Rts) => raw_op::SQD_RTS_QP,
        (Sqe, Rts) => raw_op::SQERR2RTS_QP,
        _ => return None,
    })
}

/// The access flags a QP takes (`ib_check_qp_access` … as mlx5_ib passes them on): local
/// write, remote write, read and atomic, and ON_DEMAND, which `to_mlx5_access_flags` ignores
/// (rdma-core's test_odp sets it on its QPs, and passes on hardware).
fn check_qp_access(a: AccessFlags) -> Result<()> {
    let allowed = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC
        | AccessFlags::ON_DEMAND;
    if allowed.contains(a) {
        Ok(())
    } else {
        Err(Error::new(Op::ModifyQp, EINVAL, "qp_access_flags outside LW|RW|RR|ATOMIC"))
    }
}

/// A modify's attributes: the mask, the values, the access flags and the path.
struct Attrs<'a> {
    mask: M,
    e: &'a QpAttrExt,
    access: AccessFlags,
    dest: Option<QpDest>,
}

impl Kernel {
    /// The uid a context's verbs objects carry in their commands.
    fn uid_of(&self, ctx: u32) -> u16 {
        self.uids.get(&ctx).copied().unwrap_or(0)
    }

    /// `ibv_create_cq` in the kernel (`mlx5_ib_create_cq`, `create_cq_user`): `cqe`, and
    /// `cqe + 1` rounded up to a power of two, must not exceed 2^`log_max_cq_sz` (EINVAL);
    /// then CREATE_CQ with the ring's pages, and a CQ owned by `ctx`.
    pub fn create_cq(&mut self, dev: &mut Device, dev_index: usize, ctx: u32, c: CqRequest) -> Result<u32> {
        use q::create_cq as f;
        let op = Op::CreateCq;
        let max = 1u64 << self.limits.log_max_cq_sz.min(32);
        let entries = u64::from(c.cqe).saturating_add(1).checked_next_power_of_two().unwrap_or(u64::MAX);
        if u64::from(c.cqe) > max || entries > max {
            let why = format!("{entries} CQ entries exceed 2^log_max_cq_sz = {max}");
            return Err(Error::new(op, EINVAL, why));
        }
        if c.cqe_size != 64 && c.cqe_size != 128 {
            return Err(Error::new(op, EINVAL, format!("CQE size {}", c.cqe_size)));
        }
        let format = if c.compress.is_some() || c.pad {
            let caps = super::cq_caps(dev, op)?;
            super::cq_caps::check_create(&caps, c.cqe_size, c.compress, c.pad, op)?
        } else {
            None
        };
        let mut input = with_pas(f::IN_SIZE, c.ring, entries * u64::from(c.cqe_size));
        prm::write_header(&mut input, opcode::CREATE_CQ, self.uid_of(ctx), 0);
        if let Some(fmt) = format {
            set(&mut input, f::CQE_COMP_EN, 1, op)?;
            set(&mut input, f::MINI_CQE_RES_FORMAT, fmt, op)?;
        }
        // cqe_sz_to_mlx_sz: 64 → 0, 128 → 1, 128 padded → 2. mlx5_ib sets `oi` for
        // IGNORE_OVERRUN without looking at `cq_oi`: the firmware decides. The simulated
        // kernel hands a verbs CQ's events to its context itself (the firmware knows the CQ
        // as a verbs one), so c_eqn names no EQ.
        let fields = [
            (f::CQE_SZ, cqe_sz_code(c.cqe_size, c.pad)),
            (f::OI, u64::from(c.oi)),
            (f::LOG_CQ_SIZE, log2(entries)),
            (f::LOG_PAGE_SIZE, 0),
            (f::PAGE_OFFSET, (c.ring & (PAGE - 1)) / 64),
            (f::DB_RECORD_ADDR, c.dbrec),
        ];
        for (fl, v) in fields {
            set(&mut input, fl, v, op)?;
        }
        let mut out = [0u8; f::SIZE];
        verbs_cmd(dev, self.next_qp_order, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "CREATE_CQ"))?;
        let cqn = f::CQN.get(&out).map_err(|e| internal(op, e))? as u32;
        self.cqs.insert((dev_index, cqn), (ctx, None));
        Ok(cqn)
    }

    /// `ibv_destroy_cq` in the kernel (`mlx5_ib_destroy_cq`): DESTROY_CQ; when it fails, the
    /// call fails with its errno and the CQ stays.
    pub fn destroy_cq(&mut self, devices: &mut [Device], dev: usize, cqn: u32) -> Result<()> {
        let op = Op::DestroyCq;
        self.deliver_events(devices);
        let ctx = self.cqs.get(&(dev, cqn)).map_or(0, |o| o.0);
        if let Some(d) = devices.get_mut(dev) {
            let mut input = cq_or_qp_input(opcode::DESTROY_CQ, cqn);
            set(&mut input, prm::mbox_in::UID, u64::from(self.uid_of(ctx)), op)?;
            let mut out = [0u8; prm::mbox_out::SIZE];
            kernel_cmd(d, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "DESTROY_CQ"))?;
        }
        // As ib_uverbs_release_ucq: the CQ's events not yet read go with it.
        if let Some((_, Some(h))) = self.cqs.remove(&(dev, cqn)) {
            self.cq_events.retain(|e| *e != h);
            self.drop_events(ctx, |e| e.cq == Some(h));
        }
        Ok(())
    }

    /// `ibv_resize_cq` in the kernel (`mlx5_ib_resize_cq`, `resize_user`): `cqe` must be
    /// 1 to 2^`log_max_cq_sz` and `cqe + 1` rounded up to a power of two at most one more
    /// (EINVAL); then MODIFY_CQ's resize with the new ring's pages, whose failure (a size
    /// below the CQEs not yet read) is the call's errno.
    pub fn resize_cq(
        &mut self,
        dev: &mut Device,
        host: &mut Host,
        dev_index: usize,
        cqn: u32,
        cqe: u32,
        (ring, cqe_size): (u64, u32),
    ) -> Result<()> {
        use q::create_cq as f;
        let op = Op::ResizeCq;
        let max = 1u64 << self.limits.log_max_cq_sz.min(32);
        if cqe < 1 || u64::from(cqe) > max {
            return Err(Error::new(op, EINVAL, format!("{cqe} entries are not 1 to 2^log_max_cq_sz = {max}")));
        }
        let entries = (u64::from(cqe) + 1).next_power_of_two();
        if entries > max + 1 {
            return Err(Error::new(op, EINVAL, format!("{entries} CQ entries exceed 2^log_max_cq_sz + 1")));
        }
        let ctx = self.cqs.get(&(dev_index, cqn)).map_or(0, |o| o.0);
        // libmlx5 keeps the CQE size (resize_cqe_sz = cqe_sz) and so does the ring.
        let mut input = with_pas(f::IN_SIZE, ring, entries * u64::from(cqe_size));
        prm::write_header(&mut input, raw_op::MODIFY_CQ, self.uid_of(ctx), RESIZE_OP_MOD);
        let fields = [
            (f::CQN, u64::from(cqn)),
            (MODIFY_FIELD_SELECT, RESIZE_SELECT),
            (f::CQE_SZ, cqe_sz_code(cqe_size, false)),
            (f::LOG_CQ_SIZE, log2(entries)),
            (f::LOG_PAGE_SIZE, 0),
            (f::PAGE_OFFSET, (ring & (PAGE - 1)) / 64),
        ];
        for (fl, v) in fields {
            set(&mut input, fl, v, op)?;
        }
        let mut out = [0u8; prm::mbox_out::SIZE];
        dev.exec_with_host(host, &input, &mut out);
        match prm::status::to_errno(prm::read_status(&out).0) {
            0 => Ok(()),
            e => Err(cmd_error(op, e, &out, "MODIFY_CQ (resize)")),
        }
    }

    /// `ibv_create_qp` in the kernel (`create_qp_common`, `create_user_qp`): CREATE_QP with
    /// the queues' sizes, the CQs, the doorbell record and the buffer's pages; a QP owned by
    /// the request's context.
    pub fn create_qp(&mut self, devices: &mut [Device], r: &QpRequest) -> Result<u32> {
        use q::qp as f;
        let op = Op::CreateQp;
        let st = match r.dc {
            Some(DcRole::Dci(_)) => q::st::DCI,
            Some(DcRole::Dct(_)) => q::st::DCT,
            None => to_mlx5_st(r.qp_type).ok_or_else(|| Error::new(op, EINVAL, "no mlx5 service type"))?,
        };
        let d = devices.get_mut(r.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let uid = self.uid_of(r.ctx);
        let rq_bytes = u64::from(r.rq.wqe_cnt) * u64::from(r.rq.stride);
        let len = rq_bytes + u64::from(r.sq.wqe_cnt) * u64::from(r.sq.stride);
        let mut input = with_pas(f::SIZE, r.rq.addr, len);
        prm::write_header(&mut input, opcode::CREATE_QP, uid, 0);
        let no_rq = r.rq.wqe_cnt == 0;
        // configure_responder_scat_cqe: up to 64 bytes into a 128-byte receive CQE.
        let cs_res = match (r.scatter_to_cqe, d.cq_entry_size(r.cqns.1)) {
            (false, _) => 0,
            (true, Some(128)) => q::cs_res::DATA64,
            (true, _) => q::cs_res::DATA32,
        };
        let dci_streams = match r.dc {
            Some(DcRole::Dci(Some(s))) => s,
            _ => (0, 0),
        };
        let fields = [
            (f::ST, u64::from(st)),
            (f::PM_STATE, u64::from(q::pm_state::MIGRATED)),
            (f::DRAIN_SIGERR, u64::from(r.drain_sigerr)),
            (f::PD, u64::from(r.pdn)),
            (f::LOG_RQ_SIZE, if no_rq { 0 } else { log2(u64::from(r.rq.wqe_cnt)) }),
            (f::LOG_RQ_STRIDE, if no_rq { 0 } else { log2(u64::from(r.rq.stride / 16)) }),
            (
                f::RQ_TYPE,
                if r.srqn.is_some() {
                    q::rq_type::SRQ
                } else if no_rq {
                    3
                } else {
                    0
                },
            ),
            (f::SRQN_RMPN_XRQN, u64::from(r.srqn.unwrap_or(0))),
            (f::XRCD, u64::from(r.xrcd)),
            (f::NO_SQ, u64::from(r.sq.wqe_cnt == 0)),
            (f::LOG_SQ_SIZE, log2(u64::from(r.sq.wqe_cnt))),
            (f::LOG_PAGE_SIZE, 0),
            (f::PAGE_OFFSET, (r.rq.addr & (PAGE - 1)) / 64),
            (f::CQN_SND, u64::from(r.cqns.0)),
            (f::CQN_RCV, u64::from(r.cqns.1)),
            (f::DBR_ADDR, r.dbrec),
            // MLX5_RES_SCAT_DATA32_CQE / _DATA64_CQE: small receives land in the CQE.
            (f::CS_RES, cs_res),
            // create_dci: a DCI made with MLX5_QP_FLAG_DCI_STREAM names its streams.
            (f::LOG_NUM_DCI_STREAM_CHANNELS, u64::from(dci_streams.0)),
            (f::LOG_NUM_DCI_ERRORED_STREAMS, u64::from(dci_streams.1)),
        ];
        for (fl, v) in fields {
            set(&mut input, fl, v, op)?;
        }
        let order = self.next_qp_order;
        self.next_qp_order = order.saturating_add(1);
        let mut out = [0u8; f::SMALL];
        verbs_cmd(d, order, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "CREATE_QP"))?;
        let qpn = f::QPN.get(&out).map_err(|e| internal(op, e))? as u32;
        if let Some(DcRole::Dct(key)) = r.dc {
            d.set_dct_key(qpn, key);
        }
        let k = KernelQp {
            ctx: r.ctx,
            qp_type: r.qp_type,
            uid,
            pdn: r.pdn,
            cqns: r.cqns,
            atomic_rd_en: AccessFlags::empty(),
            resp_depth: 0,
            state: QpState::Reset,
            st,
        };
        self.qps.insert((r.dev, qpn), k);
        Ok(qpn)
    }

    /// `ibv_destroy_qp` in the kernel (`destroy_qp_common`): its multicast groups detached
    /// (uverbs), then a QP the kernel last moved out of RESET goes back with 2RST, then
    /// DESTROY_QP; the kernel only warns when either fails.
    pub fn destroy_qp(&mut self, devices: &mut [Device], dev: usize, qpn: u32) {
        self.deliver_events(devices);
        let Some(k) = self.qps.remove(&(dev, qpn)) else { return };
        self.drop_events(k.ctx, |e| e.qp_num == Some(qpn));
        let Some(d) = devices.get_mut(dev) else { return };
        // uverbs detaches the multicast groups the program left attached.
        d.detach_from_all_groups(qpn);
        let mut out = [0u8; prm::mbox_out::SIZE];
        let ops =
            if k.state == QpState::Reset { &[opcode::DESTROY_QP][..] } else { &[opcode::QP_2RST, opcode::DESTROY_QP] };
        for &cmd in ops {
            let mut input = cq_or_qp_input(cmd, qpn);
            if prm::mbox_in::UID.set(&mut input, u64::from(k.uid)).is_ok() {
                let _ = kernel_cmd(d, &input, &mut out);
            }
        }
    }

    /// `ibv_modify_qp` in the kernel: uverbs' and mlx5_ib's checks (the mask against the
    /// transition's required and optional attributes, `ib_modify_qp_is_ok`; the port, P_Key
    /// index and outstanding-READ limits), then the transition's command with the `qpc`
    /// `__mlx5_ib_modify_qp` fills (a transition mlx5_ib has no command for is EINVAL). RTR
    /// keeps the path, which the fabric routes per request (a path to no QP is accepted;
    /// requests on it time out).
    pub fn modify_qp(&mut self, devices: &mut [Device], at: QpPath, m: &QpModify) -> Result<()> {
        let op = Op::ModifyQp;
        let stale = || Error::new(op, EINVAL, "stale QP");
        let real = devices.get(at.dev).and_then(|d| d.qp_state(at.qpn)).ok_or_else(stale)?;
        let k = *self.qps.get(&(at.dev, at.qpn)).ok_or_else(stale)?;
        let defaults = QpAttrExt::defaults();
        let dc = matches!(k.st, q::st::DCI | q::st::DCT);
        let (cur, to, attrs) = match &m.ext {
            _ if dc => {
                let (cur, to, mask) = self.check_dc_modify(k.st, real, m)?;
                (cur, to, Attrs { mask, e: m.ext.as_ref().unwrap_or(&defaults), access: m.access, dest: m.dest })
            }
            None => {
                self.check_default_modify(real, m)?;
                let mask = default_mask(real, m.state);
                (real, m.state, Attrs { mask, e: &defaults, access: m.access, dest: m.dest })
            }
            Some(ext) => {
                let (cur, to) = self.check_exact_modify(real, k.qp_type, m, ext)?;
                (cur, to, Attrs { mask: ext.mask, e: ext, access: m.access, dest: m.dest })
            }
        };
        let Some(d) = devices.get_mut(at.dev) else { return Ok(()) };
        if to == QpState::Reset && cur == QpState::Reset {
            // mlx5_ib_modify_qp: RESET to RESET does nothing.
            return Ok(());
        }
        let st = k.st;
        let cmd = transition_op(cur, to)
            .ok_or_else(|| Error::new(op, EINVAL, format!("mlx5_ib has no command for {cur:?} -> {to:?}")))?;
        let input = modify_input(cmd, at.qpn, st, &k, &attrs, opt_mask(cur, to, st))?;
        let mut out = [0u8; prm::mbox_out::SIZE];
        kernel_cmd(d, &input, &mut out).map_err(|e| cmd_error(op, e, &out, opcode::name(cmd)))?;
        if let Some(k) = self.qps.get_mut(&(at.dev, at.qpn)) {
            if attrs.mask.contains(M::ACCESS_FLAGS) {
                k.atomic_rd_en = attrs.access;
            }
            if attrs.mask.contains(M::MAX_DEST_RD_ATOMIC) {
                k.resp_depth = attrs.e.max_dest_rd_atomic;
            }
            k.state = to;
        }
        Ok(())
    }

    /// A transition whose other attributes the backend supplies ([`QpModify::ext`] `None`):
    /// the transition must be one the kernel allows, RTR needs the path, and INIT's access
    /// flags must be ones a QP takes.
    fn check_default_modify(&self, cur: QpState, m: &QpModify) -> Result<()> {
        let op = Op::ModifyQp;
        let ok = match (cur, m.state) {
            (QpState::Sqd, QpState::Rts) => self.facts.sqd2rts,
            (from, to) => mlx5_dv::qp_transition(mlx5_dv::qp_type::RC, from, to).is_some(),
        };
        if !ok {
            return Err(Error::new(op, EINVAL, format!("{cur:?} -> {:?} is not a valid transition", m.state)));
        }
        if m.state == QpState::Rtr && m.dest.is_none() {
            return Err(Error::new(op, EINVAL, "RTR needs the path (IBV_QP_AV, IBV_QP_DEST_QPN)"));
        }
        check_qp_access(m.access)
    }

    /// `ibv_modify_qp` with the caller's mask: uverbs' `modify_qp`, then `mlx5_ib_modify_qp`,
    /// in their order. The state the call starts from (`IBV_QP_CUR_STATE`'s, if given) and
    /// the new state.
    fn check_exact_modify(
        &self,
        cur_qp: QpState,
        qp_type: u32,
        m: &QpModify,
        ext: &QpAttrExt,
    ) -> Result<(QpState, QpState)> {
        let op = Op::ModifyQp;
        let mask = ext.mask;
        if mask.bits() & !(M::STANDARD | M::RATE_LIMIT).bits() != 0 {
            return Err(Error::new(
                op,
                EOPNOTSUPP,
                format!("attr_mask {:#x} has bits past IBV_QP_RATE_LIMIT", mask.bits()),
            ));
        }
        let port_ok = |p: u8| p != 0 && p <= self.limits.ports;
        if mask.contains(M::PORT) && !port_ok(ext.port_num) {
            return Err(Error::new(op, EINVAL, format!("port_num {} is not a port of the device", ext.port_num)));
        }
        if mask.contains(M::AV) && m.dest.is_some_and(|d| !port_ok(d.ah.port_num)) {
            return Err(Error::new(op, EINVAL, "ah_attr.port_num is not a port of the device"));
        }
        let cur = match (mask.contains(M::CUR_STATE), ext.cur_qp_state) {
            (true, Some(s)) => s,
            (true, None) => return Err(Error::new(op, EINVAL, "IBV_QP_CUR_STATE without a state")),
            (false, _) => cur_qp,
        };
        let to = if mask.contains(M::STATE) { m.state } else { cur };
        let bad_cur =
            mask.contains(M::CUR_STATE) && !matches!(cur, QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe);
        let table = mlx5_dv::qp_transition(qp_type, cur, to);
        let ok = !bad_cur
            && table.is_some_and(|(req, opt)| mask.contains(req) && (mask - (req | opt | M::STATE)).is_empty())
            && !(cur == QpState::Sqd && to == QpState::Rts && !self.facts.sqd2rts);
        if !ok {
            let why = format!("{cur:?} -> {to:?} of a QP of type {qp_type} with attr_mask {:#x}", mask.bits());
            return Err(Error::new(op, EINVAL, format!("ib_modify_qp_is_ok refuses {why}")));
        }
        if mask.contains(M::PKEY_INDEX) && ext.pkey_index >= self.limits.pkey_table_len {
            let why = format!("pkey_index {} is past the P_Key table ({})", ext.pkey_index, self.limits.pkey_table_len);
            return Err(Error::new(op, EINVAL, why));
        }
        let max_res = 1u32 << self.limits.log_max_ra_res_qp.min(31);
        if mask.contains(M::MAX_QP_RD_ATOMIC) && u32::from(ext.max_rd_atomic) > max_res {
            return Err(Error::new(op, EINVAL, format!("max_rd_atomic {} exceeds {max_res}", ext.max_rd_atomic)));
        }
        let max_req = 1u32 << self.limits.log_max_ra_req_qp.min(31);
        if mask.contains(M::MAX_DEST_RD_ATOMIC) && u32::from(ext.max_dest_rd_atomic) > max_req {
            let why = format!("max_dest_rd_atomic {} exceeds {max_req}", ext.max_dest_rd_atomic);
            return Err(Error::new(op, EINVAL, why));
        }
        if mask.contains(M::ACCESS_FLAGS) {
            check_qp_access(m.access)?;
        }
        Ok((cur, to))
    }
}

/// The mask a default transition stands for: what a connected RC QP on port 1 needs.
fn default_mask(cur: QpState, to: QpState) -> M {
    M::STATE
        | match (cur, to) {
            (_, QpState::Init) => M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS,
            (_, QpState::Rtr) => {
                M::AV
                    | M::PATH_MTU
                    | M::DEST_QPN
                    | M::RQ_PSN
                    | M::MAX_DEST_RD_ATOMIC
                    | M::MIN_RNR_TIMER
                    | M::ACCESS_FLAGS
            }
            (QpState::Rtr, QpState::Rts) => M::SQ_PSN | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC,
            _ => M::empty(),
        }
}

/// The state-change mailbox `__mlx5_ib_modify_qp` sends: 2RST and 2ERR name the QP alone;
/// the others carry the `qpc` fields the mask sets and the optional parameters the
/// transition passes on (`optpar` limits them).
fn modify_input(cmd: u16, qpn: u32, st: u8, k: &KernelQp, a: &Attrs<'_>, optpar: u32) -> Result<Vec<u8>> {
    use q::qp as f;
    let op = Op::ModifyQp;
    let bare = matches!(cmd, opcode::QP_2RST | opcode::QP_2ERR);
    let mut input = vec![0u8; if bare { f::SMALL } else { f::SIZE }];
    prm::write_header(&mut input, cmd, k.uid, 0);
    set(&mut input, f::QPN, u64::from(qpn), op)?;
    if bare {
        return Ok(input);
    }
    let (mask, e) = (a.mask, a.e);
    let has = |b: M| mask.contains(b);
    let mut fields = vec![
        (f::OPT_PARAM_MASK, u64::from(mlx5_opt(mask) & optpar)),
        (f::ST, u64::from(st)),
        (f::PM_STATE, pm_state(has(M::PATH_MIG_STATE).then_some(e.path_mig_state))),
        (f::PD, u64::from(k.pdn)),
        (f::CQN_SND, u64::from(k.cqns.0)),
        (f::CQN_RCV, u64::from(k.cqns.1)),
        (f::LOG_ACK_REQ_FREQ, ACK_REQ_FREQ),
    ];
    if st == q::st::UD {
        fields.push((f::MTU, 5));
    } else if has(M::PATH_MTU) {
        fields.push((f::MTU, u64::from(a.dest.map_or(0, |d| d.path_mtu.min(7)))));
    }
    if has(M::DEST_QPN) {
        fields.push((f::REMOTE_QPN, u64::from(a.dest.map_or(0, |d| d.dest_qp_num))));
    }
    if has(M::PKEY_INDEX) {
        fields.push((f::PKEY_INDEX, u64::from(e.pkey_index)));
    }
    if has(M::PORT) {
        fields.push((f::VHCA_PORT_NUM, u64::from(e.port_num)));
    }
    if let (true, Some(d)) = (has(M::AV), a.dest) {
        let ah = d.ah;
        fields.extend([
            (f::GRH, u64::from(ah.is_global)),
            (f::RLID, u64::from(ah.dlid)),
            (f::HOP_LIMIT, u64::from(ah.hop_limit)),
            (f::SRC_ADDR_INDEX, u64::from(ah.sgid_index)),
            (f::VHCA_PORT_NUM, u64::from(ah.port_num)),
        ]);
        if let Some(gid) = input.get_mut(f::RGID_BYTE..f::RGID_BYTE + 16) {
            gid.copy_from_slice(&ah.dgid.0);
        }
    }
    let bits = [
        (M::TIMEOUT, f::ACK_TIMEOUT, u64::from(e.timeout)),
        (M::RNR_RETRY, f::RNR_RETRY, u64::from(e.rnr_retry)),
        (M::RETRY_CNT, f::RETRY_COUNT, u64::from(e.retry_cnt)),
        (M::SQ_PSN, f::NEXT_SEND_PSN, u64::from(e.sq_psn & PSN_MASK)),
        (M::MIN_RNR_TIMER, f::MIN_RNR_NAK, u64::from(e.min_rnr_timer)),
        (M::RQ_PSN, f::NEXT_RCV_PSN, u64::from(e.rq_psn & PSN_MASK)),
        (M::QKEY, f::Q_KEY, u64::from(e.qkey)),
    ];
    fields.extend(bits.iter().filter(|(b, _, _)| has(*b)).map(|(_, fl, v)| (*fl, *v)));
    if has(M::MAX_QP_RD_ATOMIC) && e.max_rd_atomic > 0 {
        fields.push((f::LOG_SRA_MAX, fls_minus_one(e.max_rd_atomic)));
    }
    if has(M::MAX_DEST_RD_ATOMIC) && e.max_dest_rd_atomic > 0 {
        fields.push((f::LOG_RRA_MAX, fls_minus_one(e.max_dest_rd_atomic)));
    }
    if has(M::ACCESS_FLAGS) || has(M::MAX_DEST_RD_ATOMIC) {
        // to_mlx5_access_flags: without responder resources only RDMA WRITE is let in.
        let depth = if has(M::MAX_DEST_RD_ATOMIC) { e.max_dest_rd_atomic } else { k.resp_depth };
        // mlx5_ib_modify_dct sets a DCT's rre, rwe and rae from the access flags alone.
        let depth = if st == q::st::DCT { 1 } else { depth };
        let mut access = if has(M::ACCESS_FLAGS) { a.access } else { k.atomic_rd_en };
        if depth == 0 {
            access &= AccessFlags::REMOTE_WRITE;
        }
        fields.extend([
            (f::RRE, u64::from(access.contains(AccessFlags::REMOTE_READ))),
            (f::RWE, u64::from(access.contains(AccessFlags::REMOTE_WRITE))),
            (f::RAE, u64::from(access.contains(AccessFlags::REMOTE_ATOMIC))),
        ]);
    }
    for (fl, v) in fields {
        set(&mut input, fl, v, op)?;
    }
    Ok(input)
}

/// `qpc.pm_state` of `path_mig_state` (`IBV_MIG_MIGRATED`, `REARM`, `ARMED`); MIGRATED
/// without one.
fn pm_state(mig: Option<u32>) -> u64 {
    match mig {
        Some(1) => 0x1,
        Some(2) => 0x0,
        _ => u64::from(q::pm_state::MIGRATED),
    }
}

/// Run a CREATE_CQ or CREATE_QP the kernel issues for a verbs object (`order`: a new QP's
/// place in the engine's order): a bad status comes back as the mapped errno.
fn verbs_cmd(dev: &mut Device, order: u64, input: &[u8], out: &mut [u8]) -> std::result::Result<(), i32> {
    dev.exec_verbs(order, input, out);
    match prm::status::to_errno(prm::read_status(out).0) {
        0 => Ok(()),
        e => Err(e),
    }
}

/// `cqe_sz_to_mlx_sz`: `cqc.cqe_sz` for a CQE size (64 → 0, 128 → 1, 128 padded → 2).
fn cqe_sz_code(cqe_size: u32, pad: bool) -> u64 {
    match (cqe_size, pad) {
        (128, true) => 2,
        (128, false) => 1,
        _ => 0,
    }
}
