//! Receive work queues, their indirection tables and RSS QPs, as libmlx5 (`create_wq`,
//! `mlx5_modify_wq`, `mlx5_destroy_wq`, `mlx5_create_rwq_ind_table`,
//! `mlx5_cmd_create_rss_qp`), libibverbs' commands and mlx5_ib (`mlx5_ib_create_wq`,
//! `mlx5_ib_modify_wq`, `mlx5_ib_create_rwq_ind_table`, `create_rss_raw_qp_tir`) check them.
//!
//! A WQ is a receive queue of the device: the simulator keeps it as a raw packet QP with a
//! receive queue only (its number is the WQ's number), kept in INIT while the WQ is in RESET
//! (so receives post as `ibv_post_wq_recv` takes them in any state) and in RTR while RDY
//! (frames land). An RSS QP is a raw packet QP with no queues whose frames the device
//! spreads over its table's WQs (module `device::rss`).

use mlx5_dv::errno::{EBUSY, EINVAL, ENOSYS, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags, Error, Op, Qp, QpAttrExt, QpAttrMask, QpCap, QpHandle, QpInitAttr, QpModify, QpState, RecvWr, Result,
    RwqIndTable, RwqIndTableInitAttr, RxHashConf, TOEPLITZ_KEY_LEN, Wq, WqAttr, WqHandle, WqInitAttr, dv_qp,
    qp_init_mask, qp_type, rx_hash_fields as f, wq_attr_mask, wq_flags, wq_init_mask, wq_state,
};

use super::ring::QpRings;
use super::{Lower, Provider, QpObj};
use crate::device::rss::RssTir;
use crate::kernel::QpRequest;

/// `sizeof(struct mlx5_wqe_data_seg)`.
const DATA_SEG: u32 = 16;
/// `IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE`: uverbs' bound on `log_ind_tbl_size`.
const MAX_LOG_IND_TBL_SIZE: u32 = 0x0d;
/// `sizeof(mlx5_create_qp_ex_rss.rx_hash_key)`: libmlx5's room for a key.
const RSS_KEY_ROOM: u32 = 128;

/// A WQ: the receive queue underneath and what the kernel keeps of it.
#[derive(Debug, Clone)]
pub(super) struct WqObj {
    ctx: mlx5_dv::ContextHandle,
    /// The raw packet QP holding the receive queue.
    qp: Qp,
    /// `enum ibv_wq_state` as the kernel and libibverbs keep it.
    state: u32,
    /// The CVLAN stripping flag (kept; frames are not stripped).
    cvlan_stripping: bool,
}

/// An indirection table: its WQs in order.
#[derive(Debug, Clone)]
pub(super) struct IndTableObj {
    ctx: mlx5_dv::ContextHandle,
    dev: usize,
    wqs: Vec<WqHandle>,
    /// Their numbers, in table order.
    wq_nums: Vec<u32>,
}

fn step(to: QpState, mask: QpAttrMask) -> QpModify {
    QpModify::exact(
        to,
        AccessFlags::empty(),
        None,
        QpAttrExt { mask: QpAttrMask::STATE | mask, ..QpAttrExt::defaults() },
    )
}

fn state_name(s: u32) -> &'static str {
    match s {
        wq_state::RESET => "RESET",
        wq_state::RDY => "RDY",
        wq_state::ERR => "ERR",
        _ => "an unknown state",
    }
}

impl Provider {
    /// `ibv_create_wq`.
    pub(crate) fn create_wq(&mut self, low: &mut Lower<'_>, a: &WqInitAttr) -> Result<Wq> {
        let op = Op::CreateWq;
        // create_wq: any other type is NULL with errno untouched (EIO here, as the hw backend
        // reads a NULL with errno 0).
        if a.wq_type != mlx5_dv::WQT_RQ {
            return Err(Error::new(op, mlx5_dv::errno::EIO, format!("wq_type {} is not IBV_WQT_RQ", a.wq_type)));
        }
        // mlx5_calc_rwq_size.
        if a.max_wr == 0 {
            return Err(Error::new(op, EINVAL, "max_wr 0"));
        }
        let wqe = u64::from(a.max_sge.max(1)) * u64::from(DATA_SEG);
        if wqe > u64::from(self.limits.max_rq_desc_sz) {
            return Err(Error::new(op, EINVAL, format!("{} SGEs are past max_rq_desc_sz", a.max_sge)));
        }
        // ibv_cmd_create_wq.
        if a.comp_mask >= wq_init_mask::RESERVED {
            return Err(Error::new(op, EINVAL, format!("comp_mask 0x{:x} unknown to libibverbs", a.comp_mask)));
        }
        let flags = if a.comp_mask & wq_init_mask::FLAGS != 0 { a.create_flags } else { 0 };
        if flags & !(wq_flags::RESERVED - 1) != 0 {
            return Err(Error::new(op, EOPNOTSUPP, format!("create_flags 0x{flags:x} unknown to libibverbs")));
        }
        let ctx = {
            let p = self.pds.get(a.pd, op)?;
            let c = self.cqs.get(a.cq, op)?;
            if c.ctx != p.ctx {
                return Err(Error::new(op, EINVAL, "the CQ belongs to another context"));
            }
            p.ctx
        };
        // mlx5_ib_create_wq: set_user_rq_size, then create_rq's offloads.
        if u64::from(a.max_wr) > 1u64 << self.limits.log_max_wq_sz {
            return Err(Error::new(op, EINVAL, format!("max_wr {} past 1 << log_max_wq_sz", a.max_wr)));
        }
        let offloads = self.limits.raw_packet;
        let needs_offload = wq_flags::CVLAN_STRIPPING | wq_flags::SCATTER_FCS | wq_flags::PCI_WRITE_END_PADDING;
        if flags & needs_offload != 0 && !offloads {
            return Err(Error::new(op, EOPNOTSUPP, "the device has no Ethernet offloads"));
        }
        if flags & wq_flags::DELAY_DROP != 0 {
            return Err(Error::new(op, EOPNOTSUPP, "IBV_WQ_FLAGS_DELAY_DROP: the device reports no delay drop"));
        }
        if !offloads {
            return Err(Error::new(op, EOPNOTSUPP, "WQs are simulated on an Ethernet port only"));
        }
        let cap = QpCap { max_recv_wr: a.max_wr, max_recv_sge: a.max_sge.max(1), ..QpCap::default() };
        let init = QpInitAttr {
            comp_mask: Some(qp_init_mask::PD),
            send_ops_flags: Default::default(),
            qp_type: qp_type::RAW_PACKET,
            ..QpInitAttr::rc(a.pd, a.cq, cap, None)
        };
        let rename = |e: Error| Error::new(op, e.errno(), e.reason().to_string());
        let qp = self.create_qp(low, &init).map_err(rename)?;
        if let Err(e) = self.modify_qp(low, &qp, &step(QpState::Init, QpAttrMask::PORT)) {
            let _ = self.destroy_qp(low, &qp);
            return Err(rename(e));
        }
        let obj = WqObj { ctx, qp, state: wq_state::RESET, cvlan_stripping: flags & wq_flags::CVLAN_STRIPPING != 0 };
        let handle = match self.wqs.insert(op, obj) {
            Ok(h) => h,
            Err(e) => {
                let _ = self.destroy_qp(low, &qp);
                return Err(e);
            }
        };
        // uverbs echoes max_wr and max_sge as asked.
        Ok(Wq { handle, wq_num: qp.qp_num, max_wr: a.max_wr, max_sge: a.max_sge })
    }

    /// `ibv_modify_wq`.
    pub(crate) fn modify_wq(&mut self, low: &mut Lower<'_>, wq: &Wq, a: &WqAttr) -> Result<()> {
        let op = Op::ModifyWq;
        let w = self.wqs.get(wq.handle, op)?.clone();
        // mlx5_modify_wq (which returns -EINVAL here, a negative value).
        if a.attr_mask & wq_attr_mask::STATE != 0
            && a.wq_state == wq_state::RDY
            && a.attr_mask & wq_attr_mask::CURR_STATE != 0
            && a.curr_wq_state != w.state
        {
            return Err(Error::new(op, EINVAL, "curr_wq_state is not the WQ's state (-EINVAL)"));
        }
        // ibv_cmd_modify_wq.
        if a.attr_mask >= wq_attr_mask::RESERVED {
            return Err(Error::new(op, EINVAL, format!("attr_mask 0x{:x} unknown to libibverbs", a.attr_mask)));
        }
        let flags_on = a.attr_mask & wq_attr_mask::FLAGS != 0;
        if flags_on && a.flags_mask & !(wq_flags::RESERVED - 1) != 0 {
            return Err(Error::new(op, EOPNOTSUPP, format!("flags_mask 0x{:x} unknown to libibverbs", a.flags_mask)));
        }
        // ib_uverbs_ex_modify_wq.
        if a.attr_mask == 0 {
            return Err(Error::new(op, EINVAL, "attr_mask 0"));
        }
        // mlx5_ib_modify_wq.
        let cur = if a.attr_mask & wq_attr_mask::CURR_STATE != 0 { a.curr_wq_state } else { w.state };
        let next = if a.attr_mask & wq_attr_mask::STATE != 0 { a.wq_state } else { cur };
        if flags_on && a.flags_mask & wq_flags::CVLAN_STRIPPING != 0 && !self.limits.raw_packet {
            return Err(Error::new(op, EOPNOTSUPP, "the device has no VLAN offloads"));
        }
        if flags_on && a.flags_mask & wq_flags::PCI_WRITE_END_PADDING != 0 {
            return Err(Error::new(op, EOPNOTSUPP, "mlx5_ib does not modify scatter end padding"));
        }
        // MODIFY_RQ: the current state must be the RQ's, and the move one the RQ makes.
        if cur != w.state {
            return Err(Error::new(
                op,
                EINVAL,
                format!("the WQ is in {}, not {}", state_name(w.state), state_name(cur)),
            ));
        }
        let allowed = matches!(
            (cur, next),
            (wq_state::RESET, wq_state::RDY)
                | (wq_state::RDY, wq_state::RDY | wq_state::ERR | wq_state::RESET)
                | (wq_state::ERR, wq_state::RESET)
        );
        if !allowed {
            let why = format!("{} to {} is not an RQ transition", state_name(cur), state_name(next));
            return Err(Error::new(op, EINVAL, why));
        }
        let rename = |e: Error| Error::new(op, e.errno(), e.reason().to_string());
        match (cur, next) {
            (wq_state::RESET, wq_state::RDY) => {
                // mlx5_modify_wq cleans the CQ of the WQ's completions and starts the ring over.
                for s in [step(QpState::Reset, QpAttrMask::empty()), step(QpState::Init, QpAttrMask::PORT)] {
                    self.modify_qp(low, &w.qp, &s).map_err(rename)?;
                }
                self.modify_qp(low, &w.qp, &step(QpState::Rtr, QpAttrMask::empty())).map_err(rename)?;
            }
            (wq_state::RDY, wq_state::ERR) => {
                self.modify_qp(low, &w.qp, &step(QpState::Err, QpAttrMask::empty())).map_err(rename)?;
            }
            (_, wq_state::RESET) => {
                for s in [step(QpState::Reset, QpAttrMask::empty()), step(QpState::Init, QpAttrMask::PORT)] {
                    self.modify_qp(low, &w.qp, &s).map_err(rename)?;
                }
            }
            _ => {}
        }
        let o = self.wqs.get_mut(wq.handle, op)?;
        o.state = next;
        if flags_on && a.flags_mask & wq_flags::CVLAN_STRIPPING != 0 {
            o.cvlan_stripping = a.flags & wq_flags::CVLAN_STRIPPING != 0;
        }
        Ok(())
    }

    /// `ibv_destroy_wq`: EBUSY while an indirection table holds it.
    pub(crate) fn destroy_wq(&mut self, low: &mut Lower<'_>, wq: &Wq) -> Result<()> {
        let op = Op::DestroyWq;
        let users = self.wqs.users(wq.handle, op)?;
        if users > 0 {
            return Err(Error::new(op, EBUSY, format!("{users} indirection table(s) hold the WQ")));
        }
        let w = self.wqs.remove(wq.handle, op)?;
        self.destroy_qp(low, &w.qp).map_err(|e| Error::new(op, e.errno(), e.reason().to_string()))
    }

    /// `ibv_post_wq_recv` (`mlx5_post_wq_recv`: no state check).
    pub(crate) fn post_wq_recv(&mut self, low: &mut Lower<'_>, wq: &Wq, wrs: &[RecvWr]) -> Result<()> {
        let op = Op::PostWqRecv;
        let qp = self.wqs.get(wq.handle, op)?.qp;
        self.post_recv(low, &qp, wrs).map_err(|e| {
            let out = Error::new(op, e.errno(), e.reason().to_string());
            match e.bad_wr() {
                Some(i) => out.with_bad_wr(i),
                None => out,
            }
        })
    }

    /// `ibv_create_rwq_ind_table`.
    pub(crate) fn create_rwq_ind_table(
        &mut self,
        _low: &mut Lower<'_>,
        a: &RwqIndTableInitAttr,
    ) -> Result<RwqIndTable> {
        let op = Op::CreateRwqIndTable;
        // ibv_cmd_create_rwq_ind_table.
        if a.comp_mask != 0 {
            return Err(Error::new(op, EINVAL, "comp_mask is not 0"));
        }
        // ib_uverbs_ex_create_rwq_ind_table.
        if a.log_ind_tbl_size > MAX_LOG_IND_TBL_SIZE {
            return Err(Error::new(op, EINVAL, format!("log_ind_tbl_size {} past 13", a.log_ind_tbl_size)));
        }
        if a.wqs.len() != 1usize << a.log_ind_tbl_size {
            return Err(Error::new(op, EINVAL, format!("{} WQs for a table of 2^{}", a.wqs.len(), a.log_ind_tbl_size)));
        }
        let c = self.contexts.get(a.ctx, op)?;
        let dev = c.dev;
        let mut wq_nums = Vec::with_capacity(a.wqs.len());
        for h in &a.wqs {
            let w = self.wqs.get(*h, op)?;
            if w.ctx != a.ctx {
                return Err(Error::new(op, EINVAL, "a WQ of another context"));
            }
            wq_nums.push(w.qp.qp_num);
        }
        // mlx5_ib_create_rwq_ind_table.
        if a.log_ind_tbl_size > u32::from(self.limits.log_max_rqt_size) {
            let why = format!("log_ind_tbl_size {} past log_max_rqt_size", a.log_ind_tbl_size);
            return Err(Error::new(op, EINVAL, why));
        }
        let obj = IndTableObj { ctx: a.ctx, dev, wqs: a.wqs.clone(), wq_nums };
        let handle = self.ind_tables.insert(op, obj)?;
        for h in &a.wqs {
            self.wqs.acquire(*h, op)?;
        }
        // The RQ table's number: the simulator counts them per provider from 1.
        Ok(RwqIndTable { handle, ind_tbl_num: handle.id() + 1 })
    }

    /// `ibv_destroy_rwq_ind_table`: EBUSY while an RSS QP uses it.
    pub(crate) fn destroy_rwq_ind_table(&mut self, _low: &mut Lower<'_>, t: &RwqIndTable) -> Result<()> {
        let op = Op::DestroyRwqIndTable;
        let t = self.ind_tables.remove(t.handle, op)?;
        for h in t.wqs {
            self.wqs.release(h);
        }
        Ok(())
    }

    /// `ibv_create_qp_ex` with `IBV_QP_INIT_ATTR_RX_HASH` or `IND_TABLE`.
    pub(super) fn create_rss_qp(&mut self, low: &mut Lower<'_>, attr: &QpInitAttr, mask: u32) -> Result<Qp> {
        let op = Op::CreateQp;
        let (Some(t), true) = (attr.ind_table, mask & qp_init_mask::IND_TABLE != 0) else {
            return Err(Error::new(op, EINVAL, "RX_HASH without an indirection table (unverified errno)"));
        };
        if mask & qp_init_mask::RX_HASH == 0 {
            return Err(Error::new(op, EINVAL, "an indirection table without RX_HASH (unverified errno)"));
        }
        let h =
            attr.rx_hash.unwrap_or(RxHashConf { function: 0, key_len: 0, key: [0; TOEPLITZ_KEY_LEN], fields_mask: 0 });
        let tunnel = attr.dv.is_some_and(|d| {
            d.comp_mask.contains(dv_qp::MASK_QP_CREATE_FLAGS) && d.create_flags.contains(dv_qp::CREATE_TUNNEL_OFFLOADS)
        });
        // mlx5_cmd_create_rss_qp.
        if h.key_len > RSS_KEY_ROOM {
            return Err(Error::new(op, EINVAL, format!("rx_hash_key_len {} past libmlx5's 128", h.key_len)));
        }
        // ibv_icmd_create_qp.
        if mask & qp_init_mask::PD == 0 {
            return Err(Error::new(op, EINVAL, "no IBV_QP_INIT_ATTR_PD"));
        }
        if attr.cap.max_recv_wr != 0
            || attr.cap.max_recv_sge != 0
            || attr.srq.is_some()
            || self.cqs.contains(attr.recv_cq)
        {
            return Err(Error::new(op, EINVAL, "an RSS QP with a receive queue, receive CQ or SRQ"));
        }
        let (ctx, pdn) = {
            let p = self.pds.get(attr.pd, op)?;
            (p.ctx, p.pdn.unwrap_or(0))
        };
        let table = self.ind_tables.get(t, op)?;
        if table.ctx != ctx {
            return Err(Error::new(op, EINVAL, "the table belongs to another context"));
        }
        let (dev, wq_nums, log_size) = (table.dev, table.wq_nums.clone(), table.wq_nums.len().trailing_zeros());
        // The device's QP behind the TIR names the first WQ's CQ (which that WQ holds for as
        // long as the table, and so this QP, lives); it never completes into it.
        let first = table.wqs.first().copied().ok_or_else(|| Error::new(op, EINVAL, "an empty table"))?;
        let wq_qp = self.wqs.get(first, op)?.qp.handle;
        let cqn = self.cqs.get(self.qps.get(wq_qp, op)?.cqs[1], op)?.cqn;
        // create_rss_raw_qp_tir.
        if attr.qp_type != qp_type::RAW_PACKET {
            return Err(Error::new(op, EOPNOTSUPP, "RSS QPs are raw packet QPs"));
        }
        let create_flags = if mask & qp_init_mask::CREATE_FLAGS != 0 { attr.create_flags } else { 0 };
        if create_flags != 0 || attr.cap.max_send_wr != 0 {
            return Err(Error::new(op, EINVAL, "an RSS QP with create_flags or a send queue"));
        }
        if !self.limits.raw_packet {
            return Err(Error::new(op, EOPNOTSUPP, "the device has no raw packet QPs (an InfiniBand port)"));
        }
        if h.fields_mask & f::INNER != 0 && !tunnel {
            return Err(Error::new(op, EOPNOTSUPP, "inner RSS needs MLX5DV_QP_CREATE_TUNNEL_OFFLOADS"));
        }
        if h.function != mlx5_dv::RX_HASH_FUNC_TOEPLITZ {
            return Err(Error::new(op, EOPNOTSUPP, format!("hash function {} is not Toeplitz", h.function)));
        }
        if h.key_len as usize != TOEPLITZ_KEY_LEN {
            return Err(Error::new(op, EINVAL, format!("a Toeplitz key of {} bytes, not 40", h.key_len)));
        }
        let fields = h.fields_mask;
        if fields == 0 && log_size != 0 {
            return Err(Error::new(op, EINVAL, "no hash fields over a table of more than one WQ"));
        }
        let v4 = fields & (f::SRC_IPV4 | f::DST_IPV4) != 0;
        let v6 = fields & (f::SRC_IPV6 | f::DST_IPV6) != 0;
        if v4 && v6 {
            return Err(Error::new(op, EINVAL, "IPv4 and IPv6 fields together"));
        }
        let l4 = [f::SRC_PORT_TCP | f::DST_PORT_TCP, f::SRC_PORT_UDP | f::DST_PORT_UDP, f::IPSEC_SPI];
        if l4.iter().filter(|m| fields & **m != 0).count() > 1 {
            return Err(Error::new(op, EINVAL, "more than one L4 protocol's fields"));
        }
        let c = self.contexts.get(ctx, op)?;
        if !c.is_kernel() {
            return Err(Error::new(op, EOPNOTSUPP, "QPs are simulated on mlx5 kernel contexts only"));
        }
        let rings = QpRings::alloc(low.host, 0, 0, 0, op)?;
        let req = QpRequest {
            ctx: ctx.id(),
            dev,
            qp_type: qp_type::RAW_PACKET,
            pdn,
            cqns: (cqn, cqn),
            scatter_to_cqe: false,
            drain_sigerr: false,
            sq: rings.sq.buf,
            rq: rings.rq.buf,
            dbrec: rings.dbrec,
            srqn: None,
            dc: None,
            xrcd: 0,
        };
        let qpn = match low.kernel.create_qp(low.devices, &req) {
            Ok(n) => n,
            Err(e) => {
                rings.free(low.host);
                return Err(e);
            }
        };
        let obj = QpObj::queueless(ctx, dev, attr.pd, qpn, qp_type::RAW_PACKET, rings.clone());
        let handle = match self.qps.insert(op, obj) {
            Ok(h) => h,
            Err(e) => {
                low.kernel.destroy_qp(low.devices, dev, qpn);
                rings.free(low.host);
                return Err(e);
            }
        };
        self.rss_qps.insert(handle, t);
        self.ind_tables.acquire(t, op)?;
        self.pds.acquire(attr.pd, op)?;
        if let Some(d) = low.devices.get_mut(dev) {
            d.set_rss(qpn, RssTir { key: h.key, fields, table: wq_nums });
        }
        Ok(Qp { handle, qp_num: qpn, cap: QpCap::default() })
    }

    /// mlx5_ib's `modify_qp` and `query_qp` of an RSS QP: ENOSYS.
    pub(super) fn refuse_rss(&self, h: QpHandle, op: Op) -> Result<()> {
        if self.rss_qps.contains_key(&h) {
            return Err(Error::new(op, ENOSYS, "an RSS QP is not modified or queried"));
        }
        Ok(())
    }

    /// The part of a QP's removal that is an RSS QP's: the device forgets its table, which
    /// loses a user. Whether `h` was an RSS QP.
    pub(super) fn forget_rss(&mut self, low: &mut Lower<'_>, h: QpHandle, dev: usize, qpn: u32) -> bool {
        let Some(t) = self.rss_qps.remove(&h) else { return false };
        if let Some(d) = low.devices.get_mut(dev) {
            d.remove_rss(qpn);
        }
        self.ind_tables.release(t);
        true
    }

    /// A closing context's WQs and tables (their QPs go with the context's QPs).
    pub(super) fn release_wqs_of(&mut self, ctx: mlx5_dv::ContextHandle) {
        for h in self.ind_tables.handles_where(|t| t.ctx == ctx) {
            let _ = self.ind_tables.take(h, Op::CloseDevice);
        }
        for h in self.wqs.handles_where(|w| w.ctx == ctx) {
            let _ = self.wqs.take(h, Op::CloseDevice);
        }
    }
}
