//! The CQ and QP commands: CREATE_CQ / QUERY_CQ / MODIFY_CQ / DESTROY_CQ with the ring and
//! doorbell record in a umem or at a physical address (a PAS list), a CQ's EQ and its arming,
//! and CREATE_QP / DESTROY_QP / QUERY_QP of RC, UC and UD QPs with the state changes
//! RST2INIT, INIT2INIT, INIT2RTR, RTR2RTS, RTS2RTS, SQERR2RTS, SQD_RTS, 2ERR and 2RST. DEVX
//! sends them raw; the kernel sends them for verbs CQs and QPs (through
//! [`Firmware::exec_verbs`]). One CQ table and one QP table hold both kinds, and the engine
//! runs them alike.
//!
//! A state change from the wrong state is BAD_QP_STATE_ERR. Every address, size and count a
//! mailbox carries is checked before it is used: a queue whose bytes would pass the end of
//! the 64-bit address space (or of its umem) is BAD_PARAM.

use std::collections::BTreeMap;

use mlx5_dv::prm::queues::{modify_sq as sq, qpc_ext as x};
use mlx5_dv::prm::{self, Field, opcode, queues as q, status};
use mlx5_dv::{AccessFlags, AhAttr, Gid, QpDest, QpState};

use super::objects::{CqCreate, QpCreate, QpTransport};
use super::{Firmware, Reject, syndrome};
use crate::device::contract::{QueueBuf, cqe_wakes_solicited};
use crate::host::{Dma, Host};

const BAD: Reject = Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD);
const NO_SUCH: Reject = Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT);
const BAD_STATE: Reject = Reject(status::BAD_QP_STATE_ERR, syndrome::BAD_FIELD);
const RANGE: Reject = Reject(status::BAD_PARAM_ERR, syndrome::OUT_OF_RANGE);

/// Raw QPs run after the kernel's in the engine's order.
const RAW_ORDER: u64 = 1 << 62;

/// Opcodes and fields beyond [`prm::opcode`] and [`prm::queues`] (`mlx5_ifc.h`).
pub(crate) mod op {
    /// MODIFY_CQ.
    pub const MODIFY_CQ: u16 = 0x403;
    /// SQERR2RTS_QP.
    pub const SQERR2RTS_QP: u16 = mlx5_dv::prm::opcode::SQERR2RTS_QP;
    /// INIT2INIT_QP.
    pub const INIT2INIT_QP: u16 = mlx5_dv::prm::opcode::INIT2INIT_QP;
    /// SQD_RTS_QP: SQD back to RTS.
    pub const SQD_RTS_QP: u16 = mlx5_dv::prm::opcode::SQD_RTS_QP;
}

/// `rts2rts_qp_in` beyond [`q::qp`]: the second optional-parameter mask and the primary
/// path's UDP source port.
mod qpf {
    use mlx5_dv::prm::Field;
    pub const OPT_PARAM_MASK_95_32: Field = Field::new("opt_param_mask_95_32", 0x840, 64);
    /// `MLX5_QPC_OPT_MASK_32_UDP_SPORT`.
    pub const OPT_UDP_SPORT: u64 = 1 << 2;
    pub const UDP_SPORT: Field = Field::new("ads.udp_sport", 0x290, 16);
    /// `rts2rts_qp_in.qpc_ext`: the command carries `qpc_data_ext`.
    pub const QPC_EXT: Field = Field::new("qpc_ext", 0x40, 1);
    /// `MLX5_QPC_OPT_MASK_32_DCI_STREAM_CHANNEL_ID`.
    pub const OPT_DCI_STREAM_CHANNEL_ID: u64 = 1 << 0;
    /// `qpc_data_ext.dci_stream_channel_id`.
    pub const DCI_STREAM_CHANNEL_ID: Field = Field::new("qpc_ext.dci_stream_channel_id", 0x890, 16);
    /// The bytes of an input through `qpc_data_ext.dci_stream_channel_id`.
    pub const EXT_STREAM_END: usize = 0x8a0 / 8;
}

/// MODIFY_CQ's op_mod for a resize (`MLX5_CQ_OPMOD_RESIZE`).
pub(super) const RESIZE_OP_MOD: u64 = 1;

/// `query_cq_out` / `modify_cq_in`: the `cqc` at byte 16 as in `create_cq_in`.
mod cqf {
    use mlx5_dv::prm::Field;
    pub const STATUS: Field = Field::new("cqc.status", 0x80, 4);
    pub const ST: Field = Field::new("cqc.st", 0x94, 4);
    pub const CQ_PERIOD: Field = Field::new("cqc.cq_period", 0x104, 12);
    pub const CQ_MAX_COUNT: Field = Field::new("cqc.cq_max_count", 0x110, 16);
    /// `modify_cq_in.modify_field_select`.
    pub const FIELD_SELECT: Field = Field::new("modify_field_select", 0x60, 32);
    pub const SELECT_PERIOD: u64 = 1 << 0;
    pub const SELECT_COUNT: u64 = 1 << 1;
    pub const SELECT_OVERRUN: u64 = 1 << 2;
    pub const SELECT_EQN: u64 = 1 << 3;
    /// `resize_field_select` (op_mod 1): `MLX5_MODIFY_CQ_MASK_LOG_SIZE`.
    pub const RESIZE_LOG_SIZE: u64 = 1 << 0;
    /// `cqc.st` of an armed CQ, and of one that fired or was never armed.
    pub const ST_ARMED: u64 = 0x9;
    pub const ST_FIRED: u64 = 0xa;
    /// `cqc.status` of a CQ that overran.
    pub const STATUS_OVERFLOW: u64 = 0x9;
    /// Size of `query_cq_out` and `modify_cq_in` without PAS.
    pub const SIZE: usize = 272;
}

/// What a raw CREATE_CQ set that the engine does not need, for QUERY_CQ and MODIFY_CQ.
#[derive(Debug, Clone, Copy)]
pub(super) struct RawCq {
    log_size: u8,
    uar: u32,
    period: u16,
    max_count: u16,
    oi: bool,
    dbrec: u64,
}

/// The raw CQs' contexts, by CQ number.
pub(super) type RawCqs = BTreeMap<u32, RawCq>;

fn need(input: &[u8], len: usize) -> Result<(), Reject> {
    if input.len() < len { Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT)) } else { Ok(()) }
}

fn need_out(out: &[u8], len: usize) -> Result<(), Reject> {
    if out.len() < len { Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT)) } else { Ok(()) }
}

/// `pas[0]` after the 272-byte input, without its low 12 bits.
fn pas0(input: &[u8]) -> Option<u64> {
    let b = input.get(q::qp::SIZE..q::qp::SIZE + 8)?;
    Some(b.iter().fold(0u64, |v, x| v << 8 | u64::from(*x)) & !0xfff)
}

/// Where a PAS-addressed buffer starts: `pas[0]`'s page plus `page_offset` 64-byte units.
fn pas_start(input: &[u8], page_offset: Field) -> Result<u64, Reject> {
    let page = pas0(input).ok_or(BAD)?;
    page.checked_add(page_offset.get(input)? * 64).ok_or(RANGE)
}

fn get32(f: Field, input: &[u8]) -> Result<u32, Reject> {
    u32::try_from(f.get(input)?).map_err(|_| BAD)
}

impl Firmware {
    /// Where `len` bytes at `offset` are: inside a umem (`valid`: the whole range must fit
    /// in it), or at the address `offset` itself (the range must not wrap).
    fn place(&self, valid: bool, umem: u32, offset: u64, len: u64) -> Result<u64, Reject> {
        let end = offset.checked_add(len).ok_or(RANGE)?;
        if !valid {
            return Ok(offset);
        }
        let u = self.umem(umem).ok_or(NO_SUCH)?;
        if end > u.len {
            return Err(BAD);
        }
        u.addr.checked_add(offset).ok_or(RANGE)
    }

    /// CREATE_CQ. A verbs CQ (made through [`Firmware::exec_verbs`]) names no EQ of its own:
    /// its events go through the kernel, and it has no raw context for QUERY_CQ.
    pub(super) fn create_cq_raw(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use q::create_cq as c;
        need(input, c::IN_SIZE)?;
        let log = c::LOG_CQ_SIZE.get(input)?;
        if log > u64::from(self.log_max_cq_sz) {
            return Err(BAD);
        }
        let nent = 1u64 << log;
        // cqe_sz: 0 for 64-byte entries, 1 for 128 (2: 128 with the padding that only
        // changes a device's cache-line writes). Others, and `oi` on a device without
        // `cq_oi`, are BAD_PARAM (the PRM's reserved values; the status is unverified).
        let stride = match c::CQE_SZ.get(input)? {
            0 => 64,
            1 | 2 => 128,
            _ => return Err(BAD),
        };
        let oi = c::OI.get(input)? != 0;
        if oi && !self.cq_oi {
            return Err(BAD);
        }
        let ring_valid = c::CQ_UMEM_VALID.get(input)? != 0;
        let ring_at = if ring_valid { c::CQ_UMEM_OFFSET.get(input)? } else { pas_start(input, c::PAGE_OFFSET)? };
        let ring = self.place(ring_valid, get32(c::CQ_UMEM_ID, input)?, ring_at, nent * u64::from(stride))?;
        let dbr_valid = c::DBR_UMEM_VALID.get(input)? != 0;
        let dbr_at = c::DB_RECORD_ADDR.get(input)? & !0x7;
        let dbrec = self.place(dbr_valid, get32(c::DBR_UMEM_ID, input)?, dbr_at, 8)?;
        let verbs = self.verbs.is_some();
        let eqn = get32(c::C_EQN, input)?;
        if !verbs && !self.has_eq(eqn) {
            return Err(NO_SUCH);
        }
        let cqe = u32::try_from(nent - 1).map_err(|_| BAD)?;
        let cqn = self
            .create_cq(CqCreate { cqe, ring, stride, dbrec, oi })
            .ok_or(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS))?;
        c::CQN.set(out, u64::from(cqn))?;
        if verbs {
            return Ok(());
        }
        if let Some(cq) = self.cq_mut(cqn) {
            cq.eqn = Some(eqn);
        }
        let raw = RawCq {
            log_size: log as u8,
            uar: get32(c::UAR_PAGE, input)?,
            period: cqf::CQ_PERIOD.get(input)? as u16,
            max_count: cqf::CQ_MAX_COUNT.get(input)? as u16,
            oi,
            dbrec: dbr_at,
        };
        self.raw_cqs.insert(cqn, raw);
        Ok(())
    }

    pub(super) fn destroy_cq_raw(&mut self, input: &[u8]) -> Result<(), Reject> {
        let cqn = get32(q::create_cq::CQN, input)?;
        if self.qps().any(|(_, p)| p.send_cqn == cqn || p.recv_cqn == cqn) {
            return Err(Reject(status::BAD_RES_STATE_ERR, syndrome::BAD_FIELD));
        }
        if !self.destroy_cq(cqn) {
            return Err(NO_SUCH);
        }
        self.raw_cqs.remove(&cqn);
        Ok(())
    }

    /// QUERY_CQ of a raw CQ: its context as created or last modified, with the producer
    /// counter and the arm state.
    fn query_cq_raw(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use q::create_cq as c;
        need_out(out, cqf::SIZE)?;
        let cqn = get32(c::CQN, input)?;
        let raw = self.raw_cqs.get(&cqn).copied().ok_or(NO_SUCH)?;
        let cq = self.cq_mut(cqn).ok_or(NO_SUCH)?;
        let (pi, armed, overrun, eqn) = (cq.pi, cq.armed, cq.overrun, cq.eqn.unwrap_or(0));
        let fields = [
            (cqf::STATUS, if overrun { cqf::STATUS_OVERFLOW } else { 0 }),
            (cqf::ST, if armed { cqf::ST_ARMED } else { cqf::ST_FIRED }),
            (c::OI, u64::from(raw.oi)),
            (c::LOG_CQ_SIZE, u64::from(raw.log_size)),
            (c::UAR_PAGE, u64::from(raw.uar)),
            (cqf::CQ_PERIOD, u64::from(raw.period)),
            (cqf::CQ_MAX_COUNT, u64::from(raw.max_count)),
            (c::C_EQN, u64::from(eqn)),
            (c::PRODUCER_COUNTER, u64::from(pi & 0xff_ffff)),
            (c::DB_RECORD_ADDR, raw.dbrec),
        ];
        for (f, v) in fields {
            f.set(out, v)?;
        }
        Ok(())
    }

    /// MODIFY_CQ op_mod 1, the resize `mlx5_ib_resize_cq` issues: the new ring (PAS and
    /// page offset) of 2^`log_cq_size` entries. BAD_PARAM for a size past `log_max_cq_sz` or
    /// one that cannot hold the CQEs software has not read yet (the consumer index in the
    /// doorbell record); else a RESIZE_CQ CQE goes into the old ring at the producer index,
    /// and the CQ writes on from the next index in the new ring, where libmlx5's
    /// `mlx5_cq_resize_copy_cqes` moves the unread CQEs before it.
    pub(super) fn resize_cq(&mut self, host: &mut Host, input: &[u8]) -> Result<(), Reject> {
        use q::create_cq as c;
        need(input, cqf::SIZE)?;
        if cqf::FIELD_SELECT.get(input)? & cqf::RESIZE_LOG_SIZE == 0 {
            return Err(BAD);
        }
        let log = c::LOG_CQ_SIZE.get(input)?;
        if log > u64::from(self.log_max_cq_sz) {
            return Err(BAD);
        }
        let nent = 1u32 << log;
        let ring_at = pas_start(input, c::PAGE_OFFSET)?;
        let cq = self.cq_mut(get32(c::CQN, input)?).ok_or(NO_SUCH)?;
        let ci = host.read(cq.dbrec, 4).and_then(|b| b.first_chunk()).map_or(0, |b| u32::from_be_bytes(*b));
        let unread = cq.pi.wrapping_sub(ci) & 0xff_ffff;
        if unread > nent - 1 {
            return Err(BAD);
        }
        // The entry keeps its size: the mlx5_cqe64 is the last 64 bytes of a 128-byte one.
        let stride = cq.ring.stride;
        let mut resize_cqe = vec![0u8; stride as usize];
        let owner = u8::from(cq.pi & cq.ring.wqe_cnt != 0);
        if let Some(b) = resize_cqe.last_mut() {
            *b = prm::cqe::opcode::RESIZE_CQ << 4 | owner;
        }
        if !host.publish(cq.ring.slot(cq.pi), &resize_cqe) {
            return Err(BAD);
        }
        cq.pi = cq.pi.wrapping_add(1);
        cq.ring = QueueBuf { addr: ring_at, wqe_cnt: nent, stride };
        cq.cqe = nent - 1;
        Ok(())
    }

    /// MODIFY_CQ (op_mod 0): the moderation period and count, overrun ignore and the EQ, as
    /// `modify_field_select` names them. A resize (op_mod 1) through this path (DEVX, which
    /// hands no host memory to the command) is BAD_PARAM; the kernel's goes through
    /// [`Firmware::resize_cq`].
    fn modify_cq_raw(&mut self, input: &[u8]) -> Result<(), Reject> {
        use q::create_cq as c;
        need(input, cqf::SIZE)?;
        if prm::mbox_in::OP_MOD.get(input)? != 0 {
            return Err(BAD);
        }
        let cqn = get32(c::CQN, input)?;
        let mut raw = self.raw_cqs.get(&cqn).copied().ok_or(NO_SUCH)?;
        let select = cqf::FIELD_SELECT.get(input)?;
        let eqn = get32(c::C_EQN, input)?;
        if select & cqf::SELECT_EQN != 0 && !self.has_eq(eqn) {
            return Err(NO_SUCH);
        }
        if select & cqf::SELECT_PERIOD != 0 {
            raw.period = cqf::CQ_PERIOD.get(input)? as u16;
        }
        if select & cqf::SELECT_COUNT != 0 {
            raw.max_count = cqf::CQ_MAX_COUNT.get(input)? as u16;
        }
        if select & cqf::SELECT_OVERRUN != 0 {
            raw.oi = c::OI.get(input)? != 0;
            if raw.oi && !self.cq_oi {
                return Err(BAD);
            }
            if let Some(cq) = self.cq_mut(cqn) {
                cq.oi = raw.oi;
            }
        }
        if select & cqf::SELECT_EQN != 0
            && let Some(cq) = self.cq_mut(cqn)
        {
            cq.eqn = Some(eqn);
        }
        self.raw_cqs.insert(cqn, raw);
        Ok(())
    }

    /// The CQ doorbell (UAR + 0x20): `hi` is `sn << 28 | cmd | ci`, `cqn` the CQ. Armed, the
    /// CQ's next CQE raises a completion event (for solicited completions only, with
    /// `MLX5_CQ_DB_REQ_NOT_SOL` in `cmd`, the next solicited or error CQE); arming while such
    /// CQEs wait past `ci` raises it at once. A CQ of a raw CREATE_CQ reports on its EQ; a
    /// verbs CQ to the kernel, which signals its completion channel.
    pub(crate) fn cq_doorbell(&mut self, host: &Host, hi: u32, cqn: u32) {
        let cqn = cqn & 0xff_ffff;
        let Some(c) = self.cq_mut(cqn) else { return };
        let ci = hi & 0xff_ffff;
        let solicited_only = hi & q::cq_arm::SOLICITED != 0;
        let waiting = c.pi.wrapping_sub(ci) & 0xff_ffff;
        // Past `ci`, at most the ring's worth: an older `ci` names nothing left to read.
        let waiting = if waiting > c.ring.wqe_cnt { 0 } else { waiting };
        let wakes = |i: u32| {
            let at = c.ring.slot(ci.wrapping_add(i));
            host.read(at, c.ring.stride as usize).and_then(|b| b.last().copied()).is_some_and(cqe_wakes_solicited)
        };
        let now = waiting != 0 && (!solicited_only || (0..waiting).any(wakes));
        c.armed = !now;
        c.solicited_only = solicited_only;
        if now {
            self.cq_event(cqn);
        }
    }

    /// A CQE was written to CQ `cqn`; `solicited` if it has the solicited bit or is an
    /// error. An armed CQ it wakes raises its completion event and is armed no more.
    pub(crate) fn cqe_written(&mut self, cqn: u32, solicited: bool) {
        let Some(c) = self.cq_mut(cqn) else { return };
        if c.armed && (solicited || !c.solicited_only) {
            c.armed = false;
            self.cq_event(cqn);
        }
    }

    /// A CQ's completion event: an EQE on its EQ, or for the kernel.
    fn cq_event(&mut self, cqn: u32) {
        match self.cq_mut(cqn).and_then(|c| c.eqn) {
            Some(eqn) => self.post_event(super::Event::completion(cqn, eqn)),
            None => self.cq_events.push(cqn),
        }
    }

    /// The verbs CQs whose completion event fired since the last call, in order.
    pub(crate) fn take_cq_events(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.cq_events)
    }

    /// Whether verbs CQ events wait for the kernel.
    pub(crate) fn has_cq_events(&self) -> bool {
        !self.cq_events.is_empty()
    }

    /// CREATE_QP of an RC, UC, UD or raw QP: the receive queue at the start of the buffer, the
    /// send queue after it.
    pub(super) fn create_qp_raw(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use q::qp as f;
        need(input, f::SIZE)?;
        let st = f::ST.get(input)? as u8;
        if !matches!(st, q::st::RC | q::st::UC | q::st::UD | q::st::XRC | q::st::DCI | q::st::DCT | q::st::RAW) {
            return Err(BAD);
        }
        let pdn = get32(f::PD, input)?;
        let (send_cqn, recv_cqn) = (get32(f::CQN_SND, input)?, get32(f::CQN_RCV, input)?);
        // An XRC target QP names its domain; its PD and CQs are the kernel's own (never used:
        // each request's SRQ brings its CQ).
        let xrcd = if st == q::st::XRC { get32(f::XRCD, input)? } else { 0 };
        if xrcd != 0 {
            if !self.has_xrcd(xrcd) {
                return Err(NO_SUCH);
            }
        } else if !self.has_pd(pdn) || self.cq_mut(send_cqn).is_none() || self.cq_mut(recv_cqn).is_none() {
            return Err(NO_SUCH);
        }
        // The sizes are 4- and 3-bit logs: the counts and strides fit in 32 bits.
        let rq_type = f::RQ_TYPE.get(input)?;
        let srqn = if rq_type == q::rq_type::SRQ {
            let n = get32(f::SRQN_RMPN_XRQN, input)?;
            self.srq(n).ok_or(NO_SUCH)?;
            Some(n)
        } else {
            None
        };
        let no_rq = rq_type == q::rq_type::ZERO_LEN || srqn.is_some();
        let rq_cnt = if no_rq { 0 } else { 1u32 << f::LOG_RQ_SIZE.get(input)? };
        let rq_stride = if no_rq { 0 } else { 16u32 << f::LOG_RQ_STRIDE.get(input)? };
        let sq_cnt = if f::NO_SQ.get(input)? != 0 { 0 } else { 1u32 << f::LOG_SQ_SIZE.get(input)? };
        let rq_bytes = u64::from(rq_cnt) * u64::from(rq_stride);
        let total = rq_bytes + u64::from(sq_cnt) * 64;
        let wq_valid = f::WQ_UMEM_VALID.get(input)? != 0;
        let wq_at = if wq_valid { f::WQ_UMEM_OFFSET.get(input)? } else { pas_start(input, f::PAGE_OFFSET)? };
        let wq = self.place(wq_valid, get32(f::WQ_UMEM_ID, input)?, wq_at, total)?;
        let dbr_valid = f::DBR_UMEM_VALID.get(input)? != 0;
        let dbrec = self.place(dbr_valid, get32(f::DBR_UMEM_ID, input)?, f::DBR_ADDR.get(input)?, 8)?;
        // `place` checked that wq + total does not wrap, and rq_bytes <= total.
        let sq_addr = wq.checked_add(rq_bytes).ok_or(RANGE)?;
        let c = QpCreate {
            order: self.verbs.unwrap_or(RAW_ORDER + u64::from(self.raw_qps)),
            pdn,
            st,
            send_cqn,
            recv_cqn,
            scatter_to_cqe: match f::CS_RES.get(input)? {
                0 => 0,
                1 => 32,
                _ => 64,
            },
            drain_sigerr: f::DRAIN_SIGERR.get(input)? != 0,
            sq: QueueBuf { addr: sq_addr, wqe_cnt: sq_cnt, stride: 64 },
            rq: QueueBuf { addr: wq, wqe_cnt: rq_cnt, stride: rq_stride },
            srqn,
            xrcd,
            dbrec,
            dci_streams: self.dci_streams_of(st, input)?,
        };
        let qpn = self.create_qp(c).ok_or(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS))?;
        if self.verbs.is_none() {
            self.raw_qps = self.raw_qps.wrapping_add(1);
        }
        f::QPN.set(out, u64::from(qpn))?;
        Ok(())
    }

    /// A state-change command: the transition it names, from the state it requires, with
    /// the `qpc` fields that transition takes. RST2INIT takes the access bits; INIT2RTR the
    /// path, `next_rcv_psn` and (RC) `min_rnr_nak`; RTR2RTS `next_send_psn` and (RC) the ACK
    /// timeout and retry counts. What `opt_param_mask` names besides (the access bits, the
    /// RNR timer) is taken where the transition allows it. 2RST empties both queues and
    /// forgets the path; 2ERR and 2RST carry no `qpc`.
    pub(super) fn modify_qp_raw(&mut self, op: u16, input: &[u8]) -> Result<(), Reject> {
        use QpState::{Err as ErrState, Init, Reset, Rtr, Rts, Sqd, Sqe};
        use q::{optpar as o, qp as f};
        let bare = matches!(op, opcode::QP_2ERR | opcode::QP_2RST);
        need(input, if bare { f::SMALL } else { f::SIZE })?;
        let qpn = get32(f::QPN, input)?;
        let qp = self.qp(qpn).ok_or(NO_SUCH)?;
        let (cur, st, old_access) = (qp.state, qp.st, qp.access);
        let (ok, to) = match op {
            opcode::RST2INIT_QP => (cur == Reset, Init),
            op::INIT2INIT_QP => (cur == Init, Init),
            opcode::INIT2RTR_QP => (cur == Init, Rtr),
            opcode::RTR2RTS_QP => (cur == Rtr, Rts),
            opcode::RTS2RTS_QP => (cur == Rts, Rts),
            op::SQERR2RTS_QP => (cur == Sqe, Rts),
            op::SQD_RTS_QP => (cur == Sqd, Rts),
            opcode::QP_2ERR => (true, ErrState),
            _ => (true, Reset),
        };
        if !ok {
            return Err(BAD_STATE);
        }
        let opt = if bare { 0 } else { f::OPT_PARAM_MASK.get(input)? as u32 };
        let mut access = old_access;
        for (fl, bit, a) in [
            (f::RRE, o::RRE, AccessFlags::REMOTE_READ),
            (f::RWE, o::RWE, AccessFlags::REMOTE_WRITE),
            (f::RAE, o::RAE, AccessFlags::REMOTE_ATOMIC),
        ] {
            if op == opcode::RST2INIT_QP || (!bare && opt & bit != 0) {
                access.set(a, fl.get(input)? != 0);
            }
        }
        if op == opcode::RST2INIT_QP {
            access |= AccessFlags::LOCAL_WRITE;
        }
        // A DCI times out and retries as an RC requester does; a DCT asks for RNR time as an
        // RC responder does; XRC's initiator and target are RC's.
        let rc = matches!(st, q::st::RC | q::st::XRC | q::st::DCI | q::st::DCT);
        let ud = st == q::st::UD;
        // Datagrams (UD, raw Ethernet) have no path.
        let datagram = ud || st == q::st::RAW;
        let psn = |fl: Field| -> Result<Option<u32>, Reject> { Ok(Some(get32(fl, input)?)) };
        let byte = |fl: Field| -> Result<Option<u8>, Reject> { Ok(Some(fl.get(input)? as u8)) };
        let mut t = TransportChange::default();
        let mut remote = None;
        match op {
            opcode::INIT2RTR_QP if !datagram => {
                remote = Some(path_of(input, self.eth)?);
                t.rq_psn = psn(f::NEXT_RCV_PSN)?;
                if rc {
                    t.min_rnr_timer = byte(f::MIN_RNR_NAK)?;
                }
            }
            opcode::RTR2RTS_QP => {
                t.sq_psn = psn(f::NEXT_SEND_PSN)?;
                if rc {
                    t.timeout = byte(f::ACK_TIMEOUT)?;
                    t.retry_cnt = byte(f::RETRY_COUNT)?;
                    t.rnr_retry = byte(f::RNR_RETRY)?;
                    t.log_sra_max = byte(f::LOG_SRA_MAX)?;
                }
            }
            _ => {}
        }
        if !bare && opt & o::RNR_TIMEOUT != 0 && to == Rts {
            t.min_rnr_timer = byte(f::MIN_RNR_NAK)?;
        }
        // RTS2RTS's UDP source port (`opt_param_mask_95_32`, `MLX5_QPC_OPT_MASK_32_UDP_SPORT`):
        // the port the QP's RoCE v2 packets leave from, on a device that has the cap.
        if op == opcode::RTS2RTS_QP && qpf::OPT_PARAM_MASK_95_32.get(input)? & qpf::OPT_UDP_SPORT != 0 {
            if !self.rts2rts_qp_udp_sport {
                return Err(BAD);
            }
            t.udp_sport = Some(qpf::UDP_SPORT.get(input)? as u16);
        }
        // RTS2RTS with the context extension's stream id (`mlx5dv_dci_stream_id_reset`).
        let stream_reset = if op == opcode::RTS2RTS_QP
            && qpf::OPT_PARAM_MASK_95_32.get(input)? & qpf::OPT_DCI_STREAM_CHANNEL_ID != 0
        {
            if qpf::QPC_EXT.get(input)? == 0 {
                return Err(BAD);
            }
            need(input, qpf::EXT_STREAM_END)?;
            let id = qpf::DCI_STREAM_CHANNEL_ID.get(input)? as u16;
            // Only a stream in error is reset (unverified: the status firmware gives for
            // another is not public; the simulator answers BAD_PARAM).
            match self.qp(qpn).and_then(|q| q.dci_streams.as_ref()) {
                Some(s) if s.errored.contains(&id) => Some(id),
                _ => return Err(BAD),
            }
        } else {
            None
        };
        // INIT2INIT or RTS2RTS with the context extension's queue groups
        // (`mlx5dv_modify_qp_sched_elem`): each 0 (none) or a queue group, on a device with
        // `nic_qp_scheduling`. The simulator shapes no traffic: it checks and keeps nothing.
        if matches!(op, op::INIT2INIT_QP | opcode::RTS2RTS_QP)
            && qpf::OPT_PARAM_MASK_95_32.get(input)? & x::OPT_QOS_QUEUE_GROUP_ID != 0
        {
            if qpf::QPC_EXT.get(input)? == 0 || mlx5_dv::prm::qos_cap::NIC_QP_SCHEDULING.get(&self.qos.page[..])? == 0 {
                return Err(BAD);
            }
            // Through the responder's group id.
            need(input, 0x8e0 / 8)?;
            let groups = [x::QOS_GROUP_REQUESTER, x::QOS_GROUP_RESPONDER];
            for g in groups {
                if !self.sched.is_queue_group_or_none(get32(g, input)?) {
                    return Err(BAD);
                }
            }
        }
        // A UD QP's Q_Key: set at RST2INIT, changed where the transition passes it on.
        if ud && (op == opcode::RST2INIT_QP || (!bare && opt & o::Q_KEY != 0)) {
            t.qkey = psn(f::Q_KEY)?;
        }
        let q = self.qp_mut(qpn).ok_or(NO_SUCH)?;
        q.state = to;
        q.access = access;
        if to == Reset {
            (q.sq_pc, q.sq_cc, q.rq_pc, q.rq_cc) = (0, 0, 0, 0);
            q.last_wqe = false;
            q.faults.clear();
            q.remote = None;
            q.responder_failed = None;
            q.dct_streams = Default::default();
            if let Some(s) = &mut q.dci_streams {
                s.errored.clear();
            }
        }
        if let (Some(id), Some(s)) = (stream_reset, &mut q.dci_streams) {
            s.errored.remove(&id);
        }
        if remote.is_some() {
            q.remote = remote;
        }
        t.apply(&mut q.transport);
        Ok(())
    }

    /// A DCI's streams from CREATE_QP's `qpc` (`None` for another QP or a DCI without), BAD_PARAM
    /// past `log_max_dci_stream_channels` or `log_max_dci_errored_streams`.
    fn dci_streams_of(&self, st: u8, input: &[u8]) -> Result<Option<(u8, u8)>, Reject> {
        use q::qp as f;
        if st != q::st::DCI {
            return Ok(None);
        }
        let c = f::LOG_NUM_DCI_STREAM_CHANNELS.get(input)? as u8;
        let e = f::LOG_NUM_DCI_ERRORED_STREAMS.get(input)? as u8;
        if c > self.dci_stream_caps.0 || e > self.dci_stream_caps.1 {
            return Err(BAD);
        }
        Ok((c != 0 || e != 0).then_some((c, e)))
    }

    pub(super) fn query_qp_raw(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        use q::qp as f;
        need_out(out, f::SIZE)?;
        let qpn = get32(f::QPN, input)?;
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
        let qpn = get32(q::qp::QPN, input)?;
        if self.destroy_qp(qpn) { Ok(()) } else { Err(NO_SUCH) }
    }

    /// Dispatch the raw CQ and QP commands; `None` for other opcodes.
    pub(super) fn run_raw(&mut self, op: u16, input: &[u8], out: &mut [u8]) -> Option<Result<(), Reject>> {
        Some(match op {
            opcode::CREATE_CQ => self.create_cq_raw(input, out),
            opcode::DESTROY_CQ => self.destroy_cq_raw(input),
            opcode::QUERY_CQ => self.query_cq_raw(input, out),
            op::MODIFY_CQ => self.modify_cq_raw(input),
            opcode::CREATE_QP => self.create_qp_raw(input, out),
            opcode::DESTROY_QP => self.destroy_qp_raw(input),
            opcode::QUERY_QP => self.query_qp_raw(input, out),
            opcode::RST2INIT_QP
            | op::INIT2INIT_QP
            | opcode::INIT2RTR_QP
            | opcode::RTR2RTS_QP
            | opcode::RTS2RTS_QP
            | op::SQERR2RTS_QP
            | op::SQD_RTS_QP
            | opcode::QP_2ERR
            | opcode::QP_2RST => self.modify_qp_raw(op, input),
            prm::flow_counter::ALLOC => self.alloc_flow_counter(input, out),
            prm::flow_counter::DEALLOC => self.dealloc_flow_counter(input),
            prm::flow_counter::QUERY => self.query_flow_counter(input, out),
            sq::OPCODE => self.modify_sq(input),
            prm::tir::CREATE => self.create_tir(input, out),
            prm::tir::DESTROY => self.destroy_tir(input),
            _ => return None,
        })
    }
}

impl Firmware {
    /// MODIFY_SQ of a raw packet QP's send queue (its number is the QP's here), RDY to RDY,
    /// changing only its queue group (0 or a queue group, on a device with
    /// `nic_sq_scheduling`); anything else is BAD_PARAM.
    fn modify_sq(&mut self, input: &[u8]) -> Result<(), Reject> {
        need(input, sq::IN_SIZE)?;
        let sqn = sq::SQN.get(input)? as u32;
        let q = self.qp(sqn).ok_or(NO_SUCH)?;
        if q.st != q::st::RAW || q.sq.is_empty() {
            return Err(NO_SUCH);
        }
        let rdy = sq::SQ_STATE.get(input)? == sq::RDY && sq::STATE.get(input)? == sq::RDY;
        let sq_sched = mlx5_dv::prm::qos_cap::NIC_SQ_SCHEDULING.get(&self.qos.page[..])? != 0;
        if !rdy || !sq_sched || sq::MODIFY_BITMASK.get(input)? != sq::BITMASK_QOS_QUEUE_GROUP_ID {
            return Err(BAD);
        }
        if !self.sched.is_queue_group_or_none(sq::QOS_QUEUE_GROUP_ID.get(input)? as u32) {
            return Err(BAD);
        }
        Ok(())
    }
}

/// The RTR path of an INIT2RTR: the remote QP and the primary address path. On an Ethernet
/// port the path names the responder by `rgid_rip` whatever `grh` says (RoCE has no LIDs);
/// on InfiniBand by GID with a GRH, by LID without.
fn path_of(input: &[u8], eth: bool) -> Result<QpDest, Reject> {
    use q::qp as f;
    let mut dgid = [0u8; 16];
    let rgid =
        input.get(f::RGID_BYTE..f::RGID_BYTE + 16).ok_or(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT))?;
    dgid.copy_from_slice(rgid);
    let ah = AhAttr {
        dlid: f::RLID.get(input)? as u16,
        is_global: eth || f::GRH.get(input)? != 0,
        dgid: Gid(dgid),
        sgid_index: f::SRC_ADDR_INDEX.get(input)? as u8,
        hop_limit: f::HOP_LIMIT.get(input)? as u8,
        port_num: f::VHCA_PORT_NUM.get(input)?.max(1) as u8,
    };
    let mtu = f::MTU.get(input)? as u32;
    Ok(QpDest { dest_qp_num: get32(f::REMOTE_QPN, input)?, ah, path_mtu: mtu })
}

/// What a state change sets of a QP's transport; `None` leaves a value as it is.
#[derive(Debug, Clone, Copy, Default)]
struct TransportChange {
    sq_psn: Option<u32>,
    rq_psn: Option<u32>,
    timeout: Option<u8>,
    retry_cnt: Option<u8>,
    rnr_retry: Option<u8>,
    min_rnr_timer: Option<u8>,
    qkey: Option<u32>,
    log_sra_max: Option<u8>,
    udp_sport: Option<u16>,
}

impl TransportChange {
    /// Apply the change; PSNs keep their low 24 bits.
    fn apply(&self, t: &mut QpTransport) {
        use super::PSN_MASK;
        if let Some(v) = self.sq_psn {
            t.sq_psn = v & PSN_MASK;
        }
        if let Some(v) = self.rq_psn {
            t.rq_psn = v & PSN_MASK;
            // A new receive PSN: no request before it can come again.
            t.atomics = Default::default();
        }
        t.timeout = self.timeout.unwrap_or(t.timeout);
        t.retry_cnt = self.retry_cnt.unwrap_or(t.retry_cnt);
        t.rnr_retry = self.rnr_retry.unwrap_or(t.rnr_retry);
        t.min_rnr_timer = self.min_rnr_timer.unwrap_or(t.min_rnr_timer);
        t.qkey = self.qkey.unwrap_or(t.qkey);
        t.log_sra_max = self.log_sra_max.unwrap_or(t.log_sra_max);
        t.udp_sport = self.udp_sport.unwrap_or(t.udp_sport);
    }
}

/// The input of a command that names one CQ or QP.
pub(crate) fn cq_or_qp_input(opcode: u16, n: u32) -> Vec<u8> {
    let field = if opcode == prm::opcode::DESTROY_CQ { q::create_cq::CQN } else { q::qp::QPN };
    super::named_input(opcode, field, n)
}

#[cfg(test)]
#[path = "raw/tests.rs"]
mod tests;
