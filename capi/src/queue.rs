//! CQs and their completion channels, RC QPs, `ibv_modify_qp`, and the context ops the
//! header's inline `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` and `ibv_req_notify_cq`
//! jump through.

use std::ffi::{c_int, c_void};
use std::ptr;

use mlx5_dv::{
    AccessFlags, DcInitAttr, DvQpInitAttr, QpAttrExt, QpAttrMask, QpCap, QpDest, QpInitAttr, QpModify, QpState, RecvWr,
    SendFlags, SendOpsFlags, SendWr, Sge, Wc, WcFlags, qp_init_mask, qp_type,
};
use rdma_sys::*;

use crate::errno::{code, null};
use crate::objects::{Cq, CqC, Qp, QpC};
use crate::state::{Shim, device_thread, key, with};

mod attr;
use attr::{ah, merge_attr};

/// `CQ_POLL_ERR`: what libmlx5's `ibv_poll_cq` returns when a completion cannot be read.
const CQ_POLL_ERR: c_int = -2;

/// Install the ops a program's inline calls use.
pub(crate) fn fill_context_ops(c: &mut verbs_context) {
    c.context.ops.poll_cq = Some(poll_cq);
    c.context.ops.req_notify_cq = Some(req_notify_cq);
    c.context.ops.post_send = Some(post_send);
    c.context.ops.post_recv = Some(post_recv);
    c.create_qp_ex = Some(create_qp_ex);
    c.create_cq_ex = Some(crate::cqx::create_cq_ex);
}

pub(crate) fn sges(list: *const ibv_sge, n: c_int) -> Result<Vec<Sge>, c_int> {
    let n = usize::try_from(n).map_err(|_| libc::EINVAL)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    if list.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's array of `n` SGEs.
    let s = unsafe { std::slice::from_raw_parts(list, n) };
    Ok(s.iter().map(|g| Sge { addr: g.addr, length: g.length, lkey: g.lkey }).collect())
}

/// The `ibv_send_wr` as the trait's operation.
fn send_op(wr: &ibv_send_wr) -> Result<mlx5_dv::WrOp, c_int> {
    use mlx5_dv::WrOp;
    let flags = mlx5_dv::SendFlags::from_bits_retain(wr.send_flags);
    let sge = sges(wr.sg_list, wr.num_sge)?;
    // SAFETY: the union member the opcode selects.
    let rdma = unsafe { wr.wr.rdma };
    // SAFETY: as above; a plain u32 either way.
    let imm = unsafe { wr.imm_data_invalidated_rkey_union.imm_data };
    let wr_id = wr.wr_id;
    Ok(match wr.opcode {
        ibv_wr_opcode::IBV_WR_RDMA_WRITE => {
            WrOp::RdmaWrite { wr_id, flags, rkey: rdma.rkey, remote_addr: rdma.remote_addr, sge }
        }
        ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM => {
            WrOp::RdmaWriteImm { wr_id, flags, rkey: rdma.rkey, remote_addr: rdma.remote_addr, imm, sge }
        }
        ibv_wr_opcode::IBV_WR_RDMA_READ => {
            WrOp::RdmaRead { wr_id, flags, rkey: rdma.rkey, remote_addr: rdma.remote_addr, sge }
        }
        ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP | ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD => {
            // SAFETY: the union member the opcode selects.
            let a = unsafe { wr.wr.atomic };
            let (rkey, remote_addr) = (a.rkey, a.remote_addr);
            if wr.opcode == ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP {
                WrOp::AtomicCmpSwp { wr_id, flags, rkey, remote_addr, compare: a.compare_add, swap: a.swap, sge }
            } else {
                WrOp::AtomicFetchAdd { wr_id, flags, rkey, remote_addr, add: a.compare_add, sge }
            }
        }
        ibv_wr_opcode::IBV_WR_SEND => WrOp::Send { wr_id, flags, sge },
        ibv_wr_opcode::IBV_WR_SEND_WITH_IMM => WrOp::SendImm { wr_id, flags, imm, sge },
        ibv_wr_opcode::IBV_WR_SEND_WITH_INV => WrOp::SendInv { wr_id, flags, invalidate_rkey: imm, sge },
        ibv_wr_opcode::IBV_WR_LOCAL_INV => WrOp::LocalInv { wr_id, flags, invalidate_rkey: imm },
        // Memory window binds are read with the shim's objects (`Shim::post_send`); TSO and
        // driver opcodes are not simulated.
        _ => return Err(libc::EOPNOTSUPP),
    })
}

/// The `ibv_send_wr` as `ibv_post_send` passes it on: the opcodes the `ibv_wr_*` chain shares
/// through [`send_op`], every other (memory windows, bad values) as the caller set it.
fn send_wr(wr: &ibv_send_wr) -> Result<SendWr, c_int> {
    let mut out = match send_op(wr).ok().and_then(|op| SendWr::from_op(&op)) {
        Some(w) => w,
        None => raw_send_wr(wr)?,
    };
    // IBV_SEND_INLINE: the bytes are copied now, from memory the simulator may not map; the
    // simulator checks their size against max_inline_data in libmlx5's order.
    if let Some(mlx5_dv::WrOp::InlineData(bytes)) = crate::inline::legacy(wr, u32::MAX)? {
        out.inline_data = bytes;
    }
    Ok(out)
}

/// An `ibv_send_wr` field by field, whatever its opcode.
fn raw_send_wr(wr: &ibv_send_wr) -> Result<SendWr, c_int> {
    // SAFETY: the union members are plain integers either way.
    let (rdma, imm) = unsafe { (wr.wr.rdma, wr.imm_data_invalidated_rkey_union.imm_data) };
    Ok(SendWr {
        wr_id: wr.wr_id,
        opcode: wr.opcode,
        send_flags: SendFlags::from_bits_retain(wr.send_flags),
        sge: sges(wr.sg_list, wr.num_sge)?,
        imm_data: imm,
        invalidate_rkey: imm,
        remote_addr: rdma.remote_addr,
        rkey: rdma.rkey,
        inline_data: Vec::new(),
        ..SendWr::default()
    })
}

fn write_wc(w: &Wc, out: &mut ibv_wc) {
    // SAFETY: plain data.
    *out = unsafe { std::mem::zeroed() };
    out.wr_id = w.wr_id;
    out.status = w.status;
    out.opcode = w.opcode;
    out.vendor_err = w.vendor_err;
    out.byte_len = w.byte_len;
    out.imm_data_invalidated_rkey_union.imm_data = w.imm_data;
    out.qp_num = w.qp_num;
    out.wc_flags = w.wc_flags.bits();
    out.src_qp = w.src_qp;
    out.slid = w.slid;
    out.sl = w.sl;
    out.dlid_path_bits = w.dlid_path_bits;
    // libmlx5 reads the P_Key index from the CQE word that holds the immediate data, in
    // network order; the shim hands the caller's `__be32` immediate through as it is.
    out.pkey_index =
        if w.wc_flags.contains(WcFlags::WITH_IMM) { (u32::from_be(w.imm_data) & 0xffff) as u16 } else { w.pkey_index };
}

fn state_of(s: u32) -> Option<QpState> {
    Some(match s {
        0 => QpState::Reset,
        1 => QpState::Init,
        2 => QpState::Rtr,
        3 => QpState::Rts,
        4 => QpState::Sqd,
        5 => QpState::Sqe,
        6 => QpState::Err,
        _ => return None,
    })
}

impl Shim {
    pub(crate) fn cq(&self, cq: *const ibv_cq) -> Result<&Cq, c_int> {
        self.cqs.get(&key(cq)).ok_or(libc::EINVAL)
    }

    pub(crate) fn qp(&mut self, qp: *const ibv_qp) -> Result<&mut Qp, c_int> {
        self.qps.get_mut(&key(qp)).ok_or(libc::EINVAL)
    }

    fn create_cq(
        &mut self,
        ctx: *mut ibv_context,
        cqe: c_int,
        cq_context: *mut c_void,
        channel: *mut ibv_comp_channel,
        comp_vector: c_int,
    ) -> Result<*mut ibv_cq, c_int> {
        // The VFIO provider's dummy op answers before any check (the simulator's create says so).
        let mlx5 = self.context(ctx)?.device.is_some();
        // mlx5_create_cq: cqe <= 0 is EINVAL.
        let n = u32::try_from(cqe).map_err(|_| libc::EINVAL)?;
        // libmlx5's create_cq reads MLX5_CQE_SIZE for a plain CQ too, after the size checks.
        let mut vendor = None;
        if mlx5 && n != 0 && u64::from(n) < 1 << 24 {
            vendor = crate::cqx::wide(crate::cqx::cqe_size(None)?);
        }
        // The kernel reads the vector unsigned: a negative one is past the last.
        let attr = mlx5_dv::CqInitAttrEx { cqe: n, comp_vector: comp_vector as u32, dv: vendor, ..Default::default() };
        self.make_cq(ctx, cq_context, channel, &attr).map(|p| p.cast())
    }

    /// A CQ through the simulator, its C side zeroed but for what `verbs_init_cq` and the
    /// kernel set; `ibv_create_cq` and the extended CQs of [`crate::cqx`] share it. `attr`'s
    /// `flags` are the kernel's (IGNORE_OVERRUN), `dv` the vendor attributes if any.
    pub(crate) fn make_cq(
        &mut self,
        ctx: *mut ibv_context,
        cq_context: *mut c_void,
        channel: *mut ibv_comp_channel,
        attr: &mlx5_dv::CqInitAttrEx,
    ) -> Result<*mut CqC, c_int> {
        let (cqe, comp_vector) = (attr.cqe, attr.comp_vector);
        let h = self.context(ctx)?.handle;
        if !channel.is_null() && !self.channels.contains_key(&key(channel)) {
            return Err(libc::EINVAL);
        }
        crate::domain::huge_alloc_refused("MLX_CQ")?;
        let cq = match (&attr.dv, attr.flags) {
            (Some(a), 0) => self.sim.create_dv_cq(h, cqe, comp_vector, a),
            (None, 0) => self.sim.create_cq_on_vector(h, cqe, comp_vector),
            _ => self.sim.create_cq_ex(h, &mlx5_dv::CqInitAttrEx { comp_mask: mlx5_dv::cq_flags::MASK_FLAGS, ..*attr }),
        }
        .map_err(|e| e.errno())?;
        // SAFETY: plain data (a zeroed mutex and cond are their static initialisers on glibc;
        // the ops of an extended CQ are set by its maker).
        let mut c: Box<CqC> = Box::new(unsafe { std::mem::zeroed() });
        c.context = ctx;
        c.channel = channel;
        c.cq_context = cq_context;
        c.handle = cq.handle.id();
        c.cqe = c_int::try_from(cq.cqe).unwrap_or(c_int::MAX);
        let p: *mut CqC = &mut *c;
        if let Some(ch) = self.channels.get_mut(&key(channel)) {
            // verbs_init_cq: the channel counts its CQs (ibv_destroy_comp_channel is EBUSY).
            ch.c.refcnt += 1;
        }
        self.cqs.insert(key(p), Cq { c, cq });
        Ok(p)
    }

    pub(crate) fn destroy_cq(&mut self, cq: *mut ibv_cq) -> c_int {
        let Ok(c) = self.cq(cq).map(|c| c.cq) else { return libc::EINVAL };
        match self.sim.destroy_cq(&c) {
            Ok(()) => {
                if let Some(gone) = self.cqs.remove(&key(cq))
                    && let Some(ch) = self.channels.get_mut(&key(gone.c.channel))
                {
                    ch.c.refcnt = ch.c.refcnt.saturating_sub(1);
                }
                self.drop_events_of(key(cq));
                self.give_back(key(cq));
                0
            }
            Err(e) => code(&e),
        }
    }

    /// `mlx5_resize_cq`: a negative `cqe` is EINVAL (errno set too); the new capacity goes
    /// into the C CQ's `cqe`.
    pub(crate) fn resize_cq(&mut self, cq: *mut ibv_cq, cqe: c_int) -> c_int {
        let Some(c) = self.cqs.get_mut(&key(cq)) else { return libc::EINVAL };
        let Ok(n) = u32::try_from(cqe) else {
            crate::errno::set_errno(libc::EINVAL);
            return libc::EINVAL;
        };
        match self.sim.resize_cq(&c.cq, n) {
            Ok(now) => {
                c.cq = now;
                c.c.cqe = c_int::try_from(now.cqe).unwrap_or(c_int::MAX);
                0
            }
            Err(e) => code(&e),
        }
    }

    /// `mlx5_poll_cq`: a negative `num` polls nothing (0); a completion it cannot read is
    /// CQ_POLL_ERR. A CQ the shim does not know (or a NULL array) is CQ_POLL_ERR too, where
    /// libmlx5 would read freed or absent memory.
    fn poll(&mut self, cq: *mut ibv_cq, num: c_int, wc: *mut ibv_wc) -> c_int {
        let Some(c) = self.cqs.get_mut(&key(cq)) else { return CQ_POLL_ERR };
        let Ok(max) = usize::try_from(num) else { return 0 };
        if max > 0 && wc.is_null() {
            return CQ_POLL_ERR;
        }
        let mut n = 0;
        let mut errors = false;
        if n < max {
            // A poll never returns more than the ring holds (`cqe + 1` entries).
            let want = (max - n).min(c.cq.cqe as usize + 1);
            let buf = &mut self.wc_scratch;
            if buf.len() < want {
                buf.resize(want, mlx5_dv::Wc::default());
            }
            match self.sim.poll_cq_into(&c.cq, &mut buf[..want]) {
                Ok(got) => {
                    for w in &buf[..got] {
                        errors |= w.status != 0;
                        // SAFETY: as above; the simulator returns at most `want <= max - n`.
                        write_wc(w, unsafe { &mut *wc.add(n) });
                        n += 1;
                    }
                }
                Err(_) => {
                    self.collect_events();
                    if n == 0 {
                        return CQ_POLL_ERR;
                    }
                }
            }
        }
        if errors {
            self.collect_events();
        }
        c_int::try_from(n).unwrap_or(c_int::MAX)
    }

    /// After work that may complete: each completion event the devices raised (an armed
    /// CQ's next completion) makes its CQ's channel readable. A CQ without a channel has
    /// nowhere to report, as in the kernel.
    pub(crate) fn notify(&mut self) {
        for h in self.sim.simulator_mut().take_cq_events() {
            let Some((k, c)) = self.cqs.iter().find(|(_, c)| c.cq.handle == h) else { continue };
            let k = *k;
            if let Some(ch) = self.channels.get_mut(&key(c.c.channel)) {
                ch.fired.push_back(k);
                let one: u64 = 1;
                // SAFETY: the channel's eventfd; an 8-byte write.
                unsafe { libc::write(ch.c.fd, ptr::from_ref(&one).cast(), 8) };
            }
        }
    }

    pub(crate) fn create_qp(
        &mut self,
        ctx: *mut ibv_context,
        attr: &mut ibv_qp_init_attr_ex,
        dv: Option<DvQpInitAttr>,
    ) -> Result<*mut ibv_qp, c_int> {
        let target = attr.qp_type == ibv_qp_type::IBV_QPT_XRC_RECV;
        let rss = attr.comp_mask & (qp_init_mask::RX_HASH | qp_init_mask::IND_TABLE) != 0;
        let (pd, send_cq, recv_cq, xrcd) = if target {
            let (pd, cq, x) = self.xrc_target_handles(attr)?;
            (pd, cq, cq, x)
        } else if rss {
            if attr.comp_mask & qp_init_mask::PD == 0 {
                return Err(libc::EINVAL);
            }
            let pd = self.pd(attr.pd)?.handle;
            // An RSS QP has no CQs: a NULL is a handle no CQ has; one given is passed.
            let none = mlx5_dv::CqHandle::new(pd.backend(), u32::MAX);
            let cq_of = |s: &Self, p: *mut ibv_cq| if p.is_null() { Ok(none) } else { s.cq(p).map(|c| c.cq.handle) };
            (pd, cq_of(self, attr.send_cq)?, cq_of(self, attr.recv_cq)?, None)
        } else {
            if attr.comp_mask & qp_init_mask::PD == 0 {
                // libmlx5 would take the PD field anyway: the shim has none to give the simulator.
                return Err(libc::EINVAL);
            }
            let send_cq = self.cq(attr.send_cq)?.cq.handle;
            // An XRC initiator has no receive CQ (libibverbs passes none).
            let recv_cq = match attr.qp_type {
                ibv_qp_type::IBV_QPT_XRC_SEND => send_cq,
                _ => self.cq(attr.recv_cq)?.cq.handle,
            };
            (self.pd(attr.pd)?.handle, send_cq, recv_cq, None)
        };
        let srq =
            if attr.srq.is_null() { None } else { Some(self.srqs.get(&key(attr.srq)).ok_or(libc::EINVAL)?.srq.handle) };
        let qp_type = match attr.qp_type {
            ibv_qp_type::IBV_QPT_RC => qp_type::RC,
            ibv_qp_type::IBV_QPT_UC => qp_type::UC,
            ibv_qp_type::IBV_QPT_UD => qp_type::UD,
            t => t,
        };
        let extended = attr.comp_mask & qp_init_mask::SEND_OPS_FLAGS != 0;
        let cap = QpCap {
            max_send_wr: attr.cap.max_send_wr,
            max_recv_wr: attr.cap.max_recv_wr,
            max_send_sge: attr.cap.max_send_sge,
            max_recv_sge: attr.cap.max_recv_sge,
            max_inline_data: attr.cap.max_inline_data,
        };
        let init = QpInitAttr {
            pd,
            send_cq,
            recv_cq,
            qp_type,
            cap,
            send_ops_flags: SendOpsFlags::from_bits_retain(attr.send_ops_flags),
            dv,
            sq_sig_all: attr.sq_sig_all != 0,
            comp_mask: (attr.comp_mask != qp_init_mask::DEFAULT).then_some(attr.comp_mask),
            create_flags: if attr.comp_mask & qp_init_mask::CREATE_FLAGS != 0 { attr.create_flags } else { 0 },
            srq,
            xrcd,
            rx_hash: (attr.comp_mask & qp_init_mask::RX_HASH != 0).then(|| crate::wq::rx_hash(&attr.rx_hash_conf)),
            ind_table: if attr.comp_mask & qp_init_mask::IND_TABLE != 0 {
                Some(crate::wq::table_of(attr.rwq_ind_tbl).ok_or(libc::EINVAL)?.handle)
            } else {
                None
            },
        };
        let dct = dv.is_some_and(|d| d.comp_mask.contains(mlx5_dv::dv_qp::MASK_DC) && d.dc.dc_type == DcInitAttr::DCT);
        crate::domain::huge_alloc_refused("MLX_QP")?;
        let mut c = QpC::new(extended);
        let owner = key(&mut c.ex.qp_base as *mut ibv_qp);
        let qp = if target {
            self.sim.create_qp(&init).map_err(|e| e.errno())?
        } else {
            self.with_domain_memory(attr.pd, |s| Ok((s.sim.create_qp(&init).map_err(|e| e.errno())?, owner)))?
        };
        attr.cap.max_send_wr = qp.cap.max_send_wr;
        attr.cap.max_recv_wr = qp.cap.max_recv_wr;
        attr.cap.max_send_sge = qp.cap.max_send_sge;
        attr.cap.max_recv_sge = qp.cap.max_recv_sge;
        attr.cap.max_inline_data = qp.cap.max_inline_data;
        let base = &mut c.ex.qp_base;
        base.context = ctx;
        base.qp_context = attr.qp_context;
        base.pd = attr.pd;
        base.send_cq = attr.send_cq;
        base.recv_cq = attr.recv_cq;
        base.srq = attr.srq;
        base.handle = qp.handle.id();
        base.qp_num = qp.qp_num;
        base.state = ibv_qp_state::IBV_QPS_RESET;
        base.qp_type = attr.qp_type;
        let p: *mut ibv_qp = base;
        // SAFETY: plain data.
        let mut last: ibv_qp_attr = unsafe { std::mem::zeroed() };
        last.cap = attr.cap;
        let mut q = Qp::new(c, qp, last);
        q.dct = dct;
        self.qps.insert(key(p), q);
        Ok(p)
    }

    fn modify_qp(&mut self, qp: *mut ibv_qp, attr: &ibv_qp_attr, mask: c_int) -> c_int {
        let Ok(q) = self.qp(qp) else { return libc::EINVAL };
        let handle = q.qp;
        let m = QpAttrMask::from_bits_retain(mask as u32);
        // uverbs refuses a state past ERR before the kernel's table sees it.
        let state = if m.contains(QpAttrMask::STATE) { state_of(attr.qp_state) } else { Some(QpState::Reset) };
        let cur = if m.contains(QpAttrMask::CUR_STATE) { state_of(attr.cur_qp_state) } else { Some(QpState::Reset) };
        let (Some(to), Some(cur)) = (state, cur) else { return libc::EINVAL };
        let ext = QpAttrExt {
            mask: m,
            cur_qp_state: Some(cur),
            pkey_index: attr.pkey_index,
            port_num: attr.port_num,
            qkey: attr.qkey,
            rq_psn: attr.rq_psn,
            sq_psn: attr.sq_psn,
            timeout: attr.timeout,
            retry_cnt: attr.retry_cnt,
            rnr_retry: attr.rnr_retry,
            min_rnr_timer: attr.min_rnr_timer,
            max_rd_atomic: attr.max_rd_atomic,
            max_dest_rd_atomic: attr.max_dest_rd_atomic,
            path_mig_state: attr.path_mig_state,
            en_sqd_async_notify: attr.en_sqd_async_notify,
            rate_limit: attr.rate_limit,
        };
        let access = AccessFlags::from_bits_retain(attr.qp_access_flags);
        let dest = m.contains(QpAttrMask::AV).then(|| QpDest {
            dest_qp_num: attr.dest_qp_num,
            ah: ah(&attr.ah_attr),
            path_mtu: attr.path_mtu,
        });
        match self.sim.modify_qp(&handle, &QpModify::exact(to, access, dest, ext)) {
            Ok(()) => {
                if let Ok(q) = self.qp(qp) {
                    merge_attr(&mut q.attr, attr, mask);
                    if m.contains(QpAttrMask::STATE) {
                        q.c.ex.qp_base.state = attr.qp_state;
                    }
                }
                self.collect_events();
                self.notify();
                0
            }
            Err(e) => code(&e),
        }
    }

    /// `ibv_post_send` (`_mlx5_post_send`, not the `ibv_wr_*` chain): the list in one call;
    /// `bad` names the WR it stopped at.
    fn post_send(&mut self, qp: *mut ibv_qp, mut wr: *mut ibv_send_wr, bad: *mut *mut ibv_send_wr) -> c_int {
        let Ok(handle) = self.qp(qp).map(|q| q.qp) else { return libc::EINVAL };
        // SAFETY: a QP the shim made (found above).
        let ty = unsafe { (*qp).qp_type };
        let (ud, xrc) = (ty == ibv_qp_type::IBV_QPT_UD, ty == ibv_qp_type::IBV_QPT_XRC_SEND);
        let (mut wrs, mut ptrs) = (Vec::new(), Vec::new());
        let mut unreadable = None;
        while !wr.is_null() {
            ptrs.push(wr);
            // SAFETY: the caller's WR list.
            let w = unsafe { &*wr };
            match send_wr(w) {
                Ok(mut x) => {
                    if x.opcode == ibv_wr_opcode::IBV_WR_BIND_MW {
                        // SAFETY: wr.bind_mw is the union member of a bind.
                        let b = unsafe { w.bind_mw_tso_union.bind_mw };
                        match self.bind_of(b.mw, b.rkey, &b.bind_info) {
                            Ok(b) => x.bind_mw = Some(b),
                            Err(e) => {
                                unreadable = Some(e);
                                break;
                            }
                        }
                    }
                    if ud {
                        // SAFETY: wr.ud is the union member of a UD QP's WR.
                        let u = unsafe { w.wr.ud };
                        x.ud = self.ud_dest(u.ah, u.remote_qpn, u.remote_qkey);
                    }
                    if xrc {
                        // SAFETY: qp_type.xrc is the union member of an XRC initiator's WR.
                        x.xrc_remote_srqn = unsafe { w.qp_type.xrc.remote_srqn };
                    }
                    wrs.push(x)
                }
                Err(e) => {
                    // The WRs before it are posted; it is the one `bad` names.
                    unreadable = Some(e);
                    break;
                }
            }
            wr = w.next;
        }
        let posted = if wrs.is_empty() { Ok(()) } else { self.sim.post_send_wr(&handle, &wrs) };
        let failed = match posted {
            Ok(()) => unreadable.map(|e| (e, wrs.len())),
            Err(e) => Some((e.errno(), e.bad_wr().map_or(0, |i| i as usize))),
        };
        let ret = match failed {
            Some((errno, at)) => {
                if !bad.is_null() {
                    // SAFETY: the caller's out-parameter.
                    unsafe { *bad = ptrs.get(at).copied().unwrap_or(ptr::null_mut()) };
                }
                self.collect_events();
                errno
            }
            None => 0,
        };
        self.notify();
        ret
    }

    fn post_recv(&mut self, qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
        self.post_each(
            qp,
            wr,
            bad,
            |w| w.next,
            |s, h, w| {
                let sge = sges(w.sg_list, w.num_sge)?;
                s.sim.post_recv(h, &[RecvWr { wr_id: w.wr_id, sge }]).map_err(|e| e.errno())
            },
        )
    }

    /// Post a program's WR list one WR at a time, so a failure names its WR in `bad` exactly;
    /// 0, or the first failure's errno.
    fn post_each<W>(
        &mut self,
        qp: *mut ibv_qp,
        mut wr: *mut W,
        bad: *mut *mut W,
        next: fn(&W) -> *mut W,
        mut post: impl FnMut(&mut Shim, &mlx5_dv::Qp, &W) -> Result<(), c_int>,
    ) -> c_int {
        let Ok(handle) = self.qp(qp).map(|q| q.qp) else { return libc::EINVAL };
        let mut ret = 0;
        while !wr.is_null() {
            // SAFETY: the caller's WR list.
            let w = unsafe { &*wr };
            if let Err(e) = post(self, &handle, w) {
                if !bad.is_null() {
                    // SAFETY: the caller's out-parameter.
                    unsafe { *bad = wr };
                }
                ret = e;
                self.collect_events();
                break;
            }
            wr = next(w);
        }
        self.notify();
        ret
    }
}

unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, num: c_int, wc: *mut ibv_wc) -> c_int {
    let n = with(|_| CQ_POLL_ERR, |s| s.poll(cq, num, wc));
    if n == 0 {
        // A program spinning on an empty CQ must not keep the device from the lock; on the
        // network it runs a device pass itself.
        device_thread::empty_poll();
    }
    n
}

/// `mlx5_arm_cq`: rings the arm doorbell and returns 0, with a channel or without one (then
/// no event can be delivered). `solicited_only` arms for solicited and error completions.
unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    device_thread::stops_polling();
    with(
        |e| e,
        |s| {
            let Some(c) = s.cqs.get(&key(cq)) else { return libc::EINVAL };
            let handle = c.cq;
            if let Err(e) = s.sim.simulator_mut().arm_cq(&handle, solicited_only != 0) {
                return e.errno();
            }
            // Arming while a completion waits fires at once.
            s.notify();
            0
        },
    )
}

unsafe extern "C" fn post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad: *mut *mut ibv_send_wr) -> c_int {
    device_thread::posting();
    with(|e| e, |s| s.post_send(qp, wr, bad))
}

unsafe extern "C" fn post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    device_thread::posting();
    with(|e| e, |s| s.post_recv(qp, wr, bad))
}

pub(crate) unsafe extern "C" fn create_qp_ex(context: *mut ibv_context, attr: *mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    with(null, |s| s.create_qp(context, unsafe { &mut *attr }, None).unwrap_or_else(null))
}

/// `ibv_create_cq`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    with(null, |s| s.create_cq(context, cqe, cq_context, channel, comp_vector).unwrap_or_else(null))
}

/// `ibv_destroy_cq`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    with(|e| e, |s| s.destroy_cq(cq))
}

/// `ibv_resize_cq`: 0, or the errno.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    with(|e| e, |s| s.resize_cq(cq, cqe))
}

/// `ibv_create_qp`: writes back the QP's actual capabilities.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    if attr.is_null() || pd.is_null() {
        return null(libc::EINVAL);
    }
    with(null, |s| {
        let Ok(p) = s.pd(pd) else { return null(libc::EINVAL) };
        let ctx = p.c.context;
        // SAFETY: the caller's attributes; ibv_qp_init_attr is ibv_qp_init_attr_ex's prefix.
        let a = unsafe { &mut *attr };
        // SAFETY: plain data.
        let mut ex: ibv_qp_init_attr_ex = unsafe { std::mem::zeroed() };
        ex.qp_context = a.qp_context;
        ex.send_cq = a.send_cq;
        ex.recv_cq = a.recv_cq;
        ex.srq = a.srq;
        ex.cap = a.cap;
        ex.qp_type = a.qp_type;
        ex.sq_sig_all = a.sq_sig_all;
        ex.comp_mask = 1;
        ex.pd = pd;
        match s.create_qp(ctx, &mut ex, None) {
            Ok(q) => {
                a.cap = ex.cap;
                q
            }
            Err(e) => null(e),
        }
    })
}

/// `ibv_modify_qp`: the kernel's required attributes per transition, then the simulator's
/// state machine.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int) -> c_int {
    if attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attributes.
    with(|e| e, |s| s.modify_qp(qp, unsafe { &*attr }, attr_mask))
}

/// `ibv_destroy_qp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(q) = s.qp(qp) else { return libc::EINVAL };
            let h = q.qp;
            device_thread::forget();
            match s.sim.destroy_qp(&h) {
                Ok(()) => {
                    s.qps.remove(&key(qp));
                    s.drop_events_of(key(qp));
                    s.give_back(key(qp));
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cq_the_shim_does_not_know_polls_as_cq_poll_err() {
        // SAFETY: plain data.
        let mut wc: ibv_wc = unsafe { std::mem::zeroed() };
        let unknown = std::ptr::without_provenance_mut::<ibv_cq>(0x1000);
        for num in [1, 0, -1] {
            // SAFETY: the shim looks the pointer up and never reads through it.
            assert_eq!(unsafe { poll_cq(unknown, num, &mut wc) }, CQ_POLL_ERR, "num {num}");
        }
    }
}
