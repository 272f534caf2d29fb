//! CQs and QPs made by raw commands (DEVX): CREATE_CQ / DESTROY_CQ with the ring and
//! doorbell record in a umem or at a physical address, a CQ's EQ and its arming, and
//! CREATE_QP / DESTROY_QP / QUERY_QP with the RC state changes RST2INIT, INIT2RTR, RTR2RTS,
//! RTS2RTS, 2ERR and 2RST. The QPs are the engine's: a raw QP moves data as a verbs one does.
//!
//! A state change from the wrong state is BAD_QP_STATE_ERR.

use mlx5_dv::prm::{self, opcode, queues as q, status};
use mlx5_dv::{AccessFlags, AhAttr, Gid, QpDest, QpState};

use super::objects::{CqCreate, QpCreate};
use super::{Firmware, Reject, syndrome};
use crate::device::wqe::QueueBuf;

const BAD: Reject = Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD);
const NO_SUCH: Reject = Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT);
const BAD_STATE: Reject = Reject(status::BAD_QP_STATE_ERR, syndrome::BAD_FIELD);

/// Raw QPs run after the kernel's in the engine's order.
const RAW_ORDER: u64 = 1 << 62;

fn need(input: &[u8], len: usize) -> Result<(), Reject> {
    if input.len() < len { Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT)) } else { Ok(()) }
}

fn pas0(input: &[u8]) -> Option<u64> {
    let b = input.get(q::qp::SIZE..q::qp::SIZE + 8)?;
    Some(b.iter().fold(0u64, |v, x| v << 8 | u64::from(*x)) & !0xfff)
}

impl Firmware {
    /// An address inside a umem (`valid`), or the address itself: `len` bytes must fit.
    fn place(&self, valid: bool, umem: u32, offset: u64, len: u64) -> Result<u64, Reject> {
        if !valid {
            return Ok(offset);
        }
        let u = self.umem(umem).ok_or(NO_SUCH)?;
        let end = offset.checked_add(len).ok_or(BAD)?;
        if end > u.len {
            return Err(BAD);
        }
        Ok(u.addr.wrapping_add(offset))
    }

    pub(super) fn create_cq_raw(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use q::create_cq as c;
        need(input, c::IN_SIZE)?;
        let log = c::LOG_CQ_SIZE.get(input)?;
        if log > 22 {
            return Err(BAD);
        }
        let nent = 1u64 << log;
        let ring_valid = c::CQ_UMEM_VALID.get(input)? != 0;
        let ring_at = if ring_valid { c::CQ_UMEM_OFFSET.get(input)? } else { pas0(input).ok_or(BAD)? };
        let ring = self.place(ring_valid, c::CQ_UMEM_ID.get(input)? as u32, ring_at, nent * 64)?;
        let dbr_valid = c::DBR_UMEM_VALID.get(input)? != 0;
        let dbr_at = c::DB_RECORD_ADDR.get(input)? & !0x7;
        let dbrec = self.place(dbr_valid, c::DBR_UMEM_ID.get(input)? as u32, dbr_at, 8)?;
        let eqn = c::C_EQN.get(input)? as u32;
        if !self.has_eq(eqn) {
            return Err(NO_SUCH);
        }
        let cqn = self
            .create_cq(CqCreate { cqe: (nent - 1) as u32, ring, dbrec })
            .ok_or(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS))?;
        if let Some(cq) = self.cq_mut(cqn) {
            cq.eqn = Some(eqn);
        }
        c::CQN.set(out, u64::from(cqn))?;
        Ok(())
    }

    pub(super) fn destroy_cq_raw(&mut self, input: &[u8]) -> Result<(), Reject> {
        let cqn = q::create_cq::CQN.get(input)? as u32;
        if self.qps().any(|(_, p)| p.send_cqn == cqn || p.recv_cqn == cqn) {
            return Err(Reject(status::BAD_RES_STATE_ERR, syndrome::BAD_FIELD));
        }
        if self.destroy_cq(cqn) { Ok(()) } else { Err(NO_SUCH) }
    }

    /// The CQ doorbell (UAR + 0x20): `hi` is `sn << 28 | cmd | ci`, `cqn` the CQ. Armed, the
    /// CQ's next CQE raises a completion event on its EQ; arming while CQEs past `ci` wait
    /// raises it at once.
    pub(crate) fn cq_doorbell(&mut self, hi: u32, cqn: u32) {
        let Some(c) = self.cq_mut(cqn & 0xff_ffff) else { return };
        let Some(eqn) = c.eqn else { return };
        let ci = hi & 0xff_ffff;
        if c.pi.wrapping_sub(ci) & 0xff_ffff != 0 {
            c.armed = false;
            self.post_event(super::Event::completion(cqn & 0xff_ffff, eqn));
        } else {
            c.armed = true;
        }
    }

    pub(super) fn create_qp_raw(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use q::qp as f;
        need(input, f::SIZE)?;
        if f::ST.get(input)? != 0 {
            return Err(BAD); // only RC QPs are simulated
        }
        let pdn = f::PD.get(input)? as u32;
        let (send_cqn, recv_cqn) = (f::CQN_SND.get(input)? as u32, f::CQN_RCV.get(input)? as u32);
        if !self.has_pd(pdn) || self.cq_mut(send_cqn).is_none() || self.cq_mut(recv_cqn).is_none() {
            return Err(NO_SUCH);
        }
        let no_rq = f::RQ_TYPE.get(input)? == 3;
        let rq_cnt = if no_rq { 0 } else { 1u32 << f::LOG_RQ_SIZE.get(input)? };
        let rq_stride = 16u32 << f::LOG_RQ_STRIDE.get(input)?;
        let sq_cnt = if f::NO_SQ.get(input)? != 0 { 0 } else { 1u32 << f::LOG_SQ_SIZE.get(input)? };
        let rq_bytes = u64::from(rq_cnt) * u64::from(rq_stride);
        let total = rq_bytes + u64::from(sq_cnt) * 64;
        let wq_valid = f::WQ_UMEM_VALID.get(input)? != 0;
        let wq_at = if wq_valid { f::WQ_UMEM_OFFSET.get(input)? } else { pas0(input).ok_or(BAD)? };
        let wq = self.place(wq_valid, f::WQ_UMEM_ID.get(input)? as u32, wq_at, total)?;
        let dbr_valid = f::DBR_UMEM_VALID.get(input)? != 0;
        let dbrec = self.place(dbr_valid, f::DBR_UMEM_ID.get(input)? as u32, f::DBR_ADDR.get(input)?, 8)?;
        let c = QpCreate {
            order: RAW_ORDER + u64::from(self.raw_qps),
            pdn,
            send_cqn,
            recv_cqn,
            scatter_to_cqe: false,
            drain_sigerr: false,
            sq: QueueBuf { addr: wq + rq_bytes, wqe_cnt: sq_cnt, stride: 64 },
            rq: QueueBuf { addr: wq, wqe_cnt: rq_cnt, stride: rq_stride },
            dbrec,
        };
        let qpn = self.create_qp(c).ok_or(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS))?;
        self.raw_qps = self.raw_qps.wrapping_add(1);
        f::QPN.set(out, u64::from(qpn))?;
        Ok(())
    }

    /// A state-change command: the transition it names, from the state it requires.
    pub(super) fn modify_qp_raw(&mut self, op: u16, input: &[u8]) -> Result<(), Reject> {
        use QpState::{Err as ErrState, Init, Reset, Rtr, Rts};
        use q::qp as f;
        need(input, f::SIZE)?;
        let qpn = f::QPN.get(input)? as u32;
        let cur = self.qp(qpn).ok_or(NO_SUCH)?.state;
        let (ok, to) = match op {
            opcode::RST2INIT_QP => (cur == Reset, Init),
            opcode::INIT2RTR_QP => (cur == Init, Rtr),
            opcode::RTR2RTS_QP => (cur == Rtr, Rts),
            opcode::RTS2RTS_QP => (cur == Rts, Rts),
            opcode::QP_2ERR => (true, ErrState),
            _ => (true, Reset),
        };
        if !ok {
            return Err(BAD_STATE);
        }
        let mut access = AccessFlags::LOCAL_WRITE;
        for (fl, a) in [
            (f::RRE, AccessFlags::REMOTE_READ),
            (f::RWE, AccessFlags::REMOTE_WRITE),
            (f::RAE, AccessFlags::REMOTE_ATOMIC),
        ] {
            if fl.get(input)? != 0 {
                access |= a;
            }
        }
        let remote = if to == Rtr { Some(path_of(input)?) } else { None };
        self.set_qp_state(qpn, to, access, remote);
        Ok(())
    }

    pub(super) fn query_qp_raw(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use q::qp as f;
        if out.len() < f::SIZE {
            return Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT));
        }
        let qpn = f::QPN.get(input)? as u32;
        let p = self.qp(qpn).ok_or(NO_SUCH)?;
        let state = match p.state {
            QpState::Reset => q::qp_state::RST,
            QpState::Init => q::qp_state::INIT,
            QpState::Rtr => q::qp_state::RTR,
            QpState::Rts => q::qp_state::RTS,
            QpState::Sqd => q::qp_state::SQD,
            QpState::Sqe => q::qp_state::SQER,
            _ => q::qp_state::ERR,
        };
        let (pdn, snd, rcv, cc) = (p.pdn, p.send_cqn, p.recv_cqn, p.sq_cc);
        f::STATE.set(out, u64::from(state))?;
        f::PD.set(out, u64::from(pdn))?;
        f::CQN_SND.set(out, u64::from(snd))?;
        f::CQN_RCV.set(out, u64::from(rcv))?;
        f::HW_SQ_WQEBB_COUNTER.set(out, u64::from(cc & 0xffff))?;
        Ok(())
    }

    pub(super) fn destroy_qp_raw(&mut self, input: &[u8]) -> Result<(), Reject> {
        let qpn = q::qp::QPN.get(input)? as u32;
        if self.destroy_qp(qpn) { Ok(()) } else { Err(NO_SUCH) }
    }

    /// Dispatch the raw CQ and QP commands; `None` for other opcodes.
    pub(super) fn run_raw(&mut self, op: u16, input: &[u8], out: &mut [u8]) -> Option<Result<(), Reject>> {
        Some(match op {
            opcode::CREATE_CQ => self.create_cq_raw(input, out),
            opcode::DESTROY_CQ => self.destroy_cq_raw(input),
            opcode::CREATE_QP => self.create_qp_raw(input, out),
            opcode::DESTROY_QP => self.destroy_qp_raw(input),
            opcode::QUERY_QP => self.query_qp_raw(input, out),
            opcode::RST2INIT_QP
            | opcode::INIT2RTR_QP
            | opcode::RTR2RTS_QP
            | opcode::RTS2RTS_QP
            | opcode::QP_2ERR
            | opcode::QP_2RST => self.modify_qp_raw(op, input),
            _ => return None,
        })
    }
}

/// The RTR path of an INIT2RTR: the remote QP and the primary address path (by GID with a
/// GRH, by LID without).
fn path_of(input: &[u8]) -> Result<QpDest, Reject> {
    use q::qp as f;
    let mut dgid = [0u8; 16];
    dgid.copy_from_slice(&input[f::RGID_BYTE..f::RGID_BYTE + 16]);
    let ah = AhAttr {
        dlid: f::RLID.get(input)? as u16,
        is_global: f::GRH.get(input)? != 0,
        dgid: Gid(dgid),
        sgid_index: 0,
        hop_limit: f::HOP_LIMIT.get(input)? as u8,
        port_num: f::VHCA_PORT_NUM.get(input)?.max(1) as u8,
    };
    let mtu = f::MTU.get(input)? as u32;
    Ok(QpDest { dest_qp_num: f::REMOTE_QPN.get(input)? as u32, ah, path_mtu: mtu })
}

/// The input of a command that names one CQ or QP.
pub(crate) fn cq_or_qp_input(opcode: u16, n: u32) -> Vec<u8> {
    let field = if opcode == prm::opcode::DESTROY_CQ { q::create_cq::CQN } else { q::qp::QPN };
    super::named_input(opcode, field, n)
}
