//! `mlx5_poll_cq`: read CQEs from the CQ's ring as `mlx5_parse_cqe` does — requester
//! completions and errors retire send-queue entries by `wqe_counter`, responder completions
//! take the receive queue's next `wrid` and copy scatter-to-CQE data to its SGE addresses,
//! SIG_ERR CQEs are consumed into the mkey they name — then update the consumer index.

use mlx5_dv::errno::EINVAL;
use mlx5_dv::prm::FieldError;
use mlx5_dv::prm::cqe::{self, ErrCqe, SigErrCqe};
use mlx5_dv::prm::queues;
use mlx5_dv::prm::wqe::opcode;
use mlx5_dv::{Cq, Error, HandleTable, Op, QpHandle, Result, Sge, Wc, WcFlags, wc_opcode};

use super::{Lower, Provider};
use crate::device::contract::{INLINE_SCATTER_32, INLINE_SCATTER_64, SigErrInfo};
use crate::device::engine::syndrome;
use crate::host::{Dma, Host};

/// What one CQE turned into.
enum Parsed {
    /// A work completion for the application.
    Wc(Wc),
    /// A signature error for the provider's own books.
    SigErr(u32, SigErrInfo),
    /// A CQE for no QP of this provider (`CQ_POLL_ERR`).
    Unknown(String),
}

impl Provider {
    /// `mlx5_arm_cq`: the arm word (`sn << 28 | cmd | ci`) into the CQ's doorbell record,
    /// then the CQ doorbell of the context's UAR, which the device acts on at once.
    pub(crate) fn arm_cq(&mut self, low: &mut Lower<'_>, cq: &Cq, solicited_only: bool) -> Result<()> {
        let c = self.cqs.get(cq.handle, Op::PollCq)?;
        let cmd = if solicited_only { queues::cq_arm::SOLICITED } else { queues::cq_arm::NEXT };
        let word = (c.arm_sn & 3) << 28 | cmd | (c.ring.cons_index & 0xff_ffff);
        // The arm word is the record's second one (MLX5_CQ_ARM_DB).
        low.host.write(c.ring.dbrec.wrapping_add(4), &word.to_be_bytes());
        if let Some(d) = low.devices.get_mut(c.dev) {
            d.cq_doorbell(low.host, word, c.cqn);
        }
        Ok(())
    }

    /// A program's own store to its context's CQ doorbell: rung on the device of the CQ
    /// `cqn` of `ctx`, if there is one.
    pub(crate) fn cq_doorbell_store(&mut self, low: &mut Lower<'_>, ctx: mlx5_dv::ContextHandle, hi: u32, cqn: u32) {
        let cqn = cqn & 0xff_ffff;
        let Some(dev) = self.cqs.iter().find(|(_, c)| c.ctx == ctx && c.cqn == cqn).map(|(_, c)| c.dev) else { return };
        if let Some(d) = low.devices.get_mut(dev) {
            d.cq_doorbell(low.host, hi, cqn);
        }
    }

    /// `mlx5_cq_event`: an event of `cq` was read; the next arm carries the next sequence
    /// number.
    pub(crate) fn cq_event(&mut self, cq: &Cq) -> Result<()> {
        let c = self.cqs.get_mut(cq.handle, Op::PollCq)?;
        c.arm_sn = c.arm_sn.wrapping_add(1);
        Ok(())
    }

    /// `ibv_poll_cq`.
    pub(crate) fn poll_cq(&mut self, low: &mut Lower<'_>, cq: &Cq, max: usize) -> Result<Vec<Wc>> {
        let mut out = Vec::new();
        self.poll_with(low, cq, max, |wc, room| {
            if out.capacity() == 0 {
                // One allocation for the whole poll: the ring holds at most this many.
                out.reserve_exact(room.max(1));
            }
            out.push(wc);
        })?;
        Ok(out)
    }

    /// `ibv_poll_cq` into the caller's array: how many it holds now.
    pub(crate) fn poll_cq_into(&mut self, low: &mut Lower<'_>, cq: &Cq, wc: &mut [Wc]) -> Result<usize> {
        let mut n = 0;
        let max = wc.len();
        self.poll_with(low, cq, max, |w, _| {
            if let Some(slot) = wc.get_mut(n) {
                *slot = w;
                n += 1;
            }
        })?;
        Ok(n)
    }

    /// Read up to `max` work completions, handing each to `sink` with the most there can
    /// be in this poll.
    fn poll_with(&mut self, low: &mut Lower<'_>, cq: &Cq, max: usize, mut sink: impl FnMut(Wc, usize)) -> Result<()> {
        let op = Op::PollCq;
        let c = self.cqs.get_mut(cq.handle, op)?;
        let dev = c.dev;
        let room = max.min(c.ring.ring.wqe_cnt as usize);
        // The common CQEs, good requester completions, read in place from the CQ's own ring;
        // the first other one goes to the general parse below.
        let (mut got, ended) = good_reqs(&mut c.ring, &mut self.qps, low.host, dev, max, |wc| sink(wc, room));
        if ended {
            c.ring.update_cons_index(low.host);
            return Ok(());
        }
        let mut ring = c.ring.clone();
        let mut failed = None;
        while got < max {
            let (more, ended) = good_reqs(&mut ring, &mut self.qps, low.host, dev, max - got, |wc| sink(wc, room));
            got += more;
            if ended {
                break;
            }
            let Some(bytes) = ring.peek(low.host) else { break };
            let scattered =
                (bytes[cqe::SIZE - 1] & INLINE_SCATTER_64 != 0).then(|| ring.scatter_64(low.host)).flatten();
            ring.advance();
            match self.parse(low.host, dev, &bytes, scattered.as_ref()) {
                Ok(Parsed::Wc(wc)) => {
                    sink(wc, room);
                    got += 1;
                }
                Ok(Parsed::SigErr(index, err)) => {
                    if !self.take_sig_err(dev, index, err) {
                        failed = Some(format!("a signature error names unknown mkey index 0x{index:x}"));
                        break;
                    }
                }
                Ok(Parsed::Unknown(why)) => {
                    failed = Some(why);
                    break;
                }
                Err(e) => {
                    failed = Some(format!("a CQE the provider cannot read: {e}"));
                    break;
                }
            }
        }
        ring.update_cons_index(low.host);
        let c = self.cqs.get_mut(cq.handle, op)?;
        c.ring = ring;
        match failed {
            // The CQEs read before the bad one are lost with it, as ibv_poll_cq returns
            // CQ_POLL_ERR (-2).
            Some(why) => Err(Error::new(op, EINVAL, why)),
            None => Ok(()),
        }
    }

    fn parse(
        &mut self,
        host: &mut Host,
        dev: usize,
        bytes: &[u8; cqe::SIZE],
        scattered: Option<&[u8; cqe::SIZE]>,
    ) -> std::result::Result<Parsed, FieldError> {
        // The opcode is the high nibble of `op_own`, the last byte.
        let op = bytes[cqe::SIZE - 1] >> 4;
        if op == cqe::opcode::SIG_ERR {
            let s = SigErrCqe::decode(bytes)?;
            let info = SigErrInfo {
                syndrome: s.syndrome,
                expected: s.expected(),
                actual: s.actual(),
                offset: s.sig_err_offset,
                sig_type: s.sig_type,
                domain: s.domain,
            };
            return Ok(Parsed::SigErr(s.mkey >> 8, info));
        }
        if bytes[40] == crate::device::contract::tm::APP_TAG_MATCHING
            && matches!(op, cqe::opcode::RESP_SEND | cqe::opcode::NO_PACKET)
        {
            return Ok(match self.parse_tm(host, dev, bytes) {
                Some(wc) => Parsed::Wc(wc),
                None => Parsed::Unknown("a tag-matching CQE for no tag-matching SRQ of this provider".into()),
            });
        }
        let c = Good::of(bytes);
        let Some((_, q)) = self.qps.iter_mut().find(|(_, q)| q.dev == dev && q.qpn == c.qpn) else {
            return Ok(Parsed::Unknown(format!("a CQE for QP 0x{:x}, which is not this provider's", c.qpn)));
        };
        // A receive at an XRC target names its SRQ in `srqn_uidx` (libmlx5 finds it by the
        // user index there); other QPs' SRQs are the QP's own.
        let xsrq = match u32::from_be_bytes([bytes[32], bytes[33], bytes[34], bytes[35]]) & 0xff_ffff {
            0 => None,
            n => self.srqs.iter().find(|(_, s)| s.dev == dev && s.srqn == n && s.xrc.is_some()).map(|(h, _)| h),
        };
        let srq_of = if q.xrcd.is_some() { xsrq } else { q.srq };
        let mut wc = Wc { qp_num: c.qpn, ..Wc::default() };
        match op {
            cqe::opcode::REQ => wc = good_req(q, &c),
            cqe::opcode::RESP_WR_IMM
            | cqe::opcode::RESP_SEND
            | cqe::opcode::RESP_SEND_IMM
            | cqe::opcode::RESP_SEND_INV => {
                let (wr_id, sge) = match srq_of.and_then(|h| self.srqs.get_mut(h, Op::PollCq).ok()) {
                    Some(s) => s.ring.complete(host, c.wqe_counter),
                    None => q.rings.rq.complete(host, c.wqe_counter),
                };
                wc.wr_id = wr_id;
                wc.timestamp = c.timestamp;
                wc.byte_len = c.byte_cnt;
                if bytes.get(cqe::SIZE - 1).is_some_and(|b| b & INLINE_SCATTER_32 != 0) {
                    copy_to_scat(host, &bytes[..(c.byte_cnt as usize).min(32)], &sge);
                } else if let Some(d) = scattered {
                    // MLX5_INLINE_SCATTER_64: the 64 bytes before the mlx5_cqe64.
                    copy_to_scat(host, &d[..(c.byte_cnt as usize).min(cqe::SIZE)], &sge);
                } else if q.qp_type == mlx5_dv::qp_type::RAW_PACKET {
                    // The flow tag, where this device's CQE carries it (contract::Cqe).
                    wc.flow_tag = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) & 0xff_ffff;
                }
                (wc.opcode, wc.wc_flags) = match op {
                    cqe::opcode::RESP_WR_IMM => (wc_opcode::RECV_RDMA_WITH_IMM, WcFlags::WITH_IMM),
                    cqe::opcode::RESP_SEND_IMM => (wc_opcode::RECV, WcFlags::WITH_IMM),
                    cqe::opcode::RESP_SEND_INV => (wc_opcode::RECV, WcFlags::WITH_INV),
                    _ => (wc_opcode::RECV, WcFlags::empty()),
                };
                if op != cqe::opcode::RESP_SEND {
                    wc.imm_data = c.imm_inval_pkey;
                }
                responder_fields(&mut wc, bytes, c.imm_inval_pkey);
            }
            cqe::opcode::REQ_ERR | cqe::opcode::RESP_ERR => {
                let e = ErrCqe::decode(bytes)?;
                wc.status = syndrome::to_status(e.syndrome);
                wc.vendor_err = u32::from(e.vendor_err_synd);
                wc.wr_id = if op == cqe::opcode::REQ_ERR {
                    q.rings.sq.complete(e.wqe_counter).0
                } else if let Some(s) = srq_of.and_then(|h| self.srqs.get_mut(h, Op::PollCq).ok()) {
                    s.ring.complete(host, e.wqe_counter).0
                } else {
                    q.rings.rq.complete(host, e.wqe_counter).0
                };
            }
            other => return Ok(Parsed::Unknown(format!("a CQE with opcode {} ({other})", cqe::opcode::name(other)))),
        }
        Ok(Parsed::Wc(wc))
    }
}

/// Read up to `max` good requester CQEs of device `dev` in place from `ring`, handing each
/// one's completion to `sink`: how many, and true if the poll ends there (the ring is empty
/// or `max` were read) rather than at a CQE for the general parse.
#[inline]
fn good_reqs(
    ring: &mut super::ring::CqRing,
    qps: &mut HandleTable<QpHandle, super::QpObj>,
    host: &Host,
    dev: usize,
    max: usize,
    mut sink: impl FnMut(Wc),
) -> (usize, bool) {
    let Some(slots) = ring.bytes(host) else { return (0, false) };
    let mut got = 0;
    while got < max {
        let Some(b) = ring.peek_in(slots) else { return (got, true) };
        if b[cqe::SIZE - 1] >> 4 != cqe::opcode::REQ {
            return (got, false);
        }
        let c = Good::of(b);
        let Some((_, q)) = qps.iter_mut().find(|(_, q)| q.dev == dev && q.qpn == c.qpn) else {
            return (got, false);
        };
        sink(good_req(q, &c));
        ring.advance();
        got += 1;
    }
    (got, true)
}

/// `handle_good_req`: the completion of a good requester CQE `c` of QP `q`, which retires
/// its send queue up to the WQE.
fn good_req(q: &mut super::QpObj, c: &Good) -> Wc {
    let (wr_id, wr_data) = q.rings.sq.complete(c.wqe_counter);
    let mut wc = Wc { qp_num: c.qpn, wr_id, timestamp: c.timestamp, ..Wc::default() };
    match c.sop_drop {
        opcode::RDMA_WRITE_IMM | opcode::RDMA_WRITE => wc.opcode = wc_opcode::RDMA_WRITE,
        opcode::SEND_IMM | opcode::SEND | opcode::SEND_INVAL => wc.opcode = wc_opcode::SEND,
        opcode::RDMA_READ => {
            wc.opcode = wc_opcode::RDMA_READ;
            wc.byte_len = c.byte_cnt;
        }
        // handle_good_req: an atomic's length is always its 8 bytes.
        opcode::ATOMIC_CS => (wc.opcode, wc.byte_len) = (wc_opcode::COMP_SWAP, 8),
        opcode::ATOMIC_FA => (wc.opcode, wc.byte_len) = (wc_opcode::FETCH_ADD, 8),
        opcode::UMR | opcode::SET_PSV | opcode::NOP | opcode::MMO => wc.opcode = wr_data,
        _ => {}
    }
    // A raw WQE completes as one, whatever its opcode.
    if wr_data == wc_opcode::DRIVER2 {
        wc.opcode = wc_opcode::DRIVER2;
    }
    if matches!(c.sop_drop, opcode::RDMA_WRITE_IMM | opcode::SEND_IMM) {
        wc.wc_flags |= WcFlags::WITH_IMM;
    }
    wc
}

/// The end of `handle_responder`: where the sender is, read from the CQE's bytes whatever
/// they hold (a scatter-to-CQE payload lies over them, and libmlx5 reads that).
fn responder_fields(wc: &mut Wc, b: &[u8; cqe::SIZE], imm_inval_pkey: u32) {
    let flags_rqpn = u32::from_be_bytes([b[24], b[25], b[26], b[27]]);
    wc.slid = u16::from_be_bytes([b[22], b[23]]);
    wc.sl = ((flags_rqpn >> 24) & 0xf) as u8;
    wc.src_qp = flags_rqpn & 0xff_ffff;
    wc.dlid_path_bits = b[17] & 0x7f;
    if (flags_rqpn >> 28) & 3 != 0 {
        wc.wc_flags |= WcFlags::GRH;
    }
    wc.pkey_index = (imm_inval_pkey & 0xffff) as u16;
}

/// The fields of a good CQE (`mlx5_cqe64`) that `mlx5_parse_cqe` reads, straight from its
/// bytes: a 64-byte CQE always holds them.
struct Good {
    qpn: u32,
    wqe_counter: u16,
    sop_drop: u8,
    byte_cnt: u32,
    imm_inval_pkey: u32,
    /// 0 unless the CQ asked for completion timestamps (the device writes none otherwise).
    timestamp: u64,
}

impl Good {
    fn of(b: &[u8; cqe::SIZE]) -> Self {
        let be32 = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        Good {
            qpn: be32(56) & 0xff_ffff,
            wqe_counter: u16::from_be_bytes([b[60], b[61]]),
            sop_drop: b[56],
            byte_cnt: be32(44),
            imm_inval_pkey: be32(36),
            timestamp: u64::from_be_bytes([b[48], b[49], b[50], b[51], b[52], b[53], b[54], b[55]]),
        }
    }
}

/// `copy_to_scat`: the SGE address is taken as a process virtual address, whatever key the
/// SGE names; a zero-based (indirect mkey) address therefore misses the mkey's memory.
fn copy_to_scat(host: &mut Host, data: &[u8], sge: &[Sge]) {
    let mut rest = data;
    for s in sge {
        if rest.is_empty() {
            break;
        }
        let n = rest.len().min(s.length as usize);
        // An unmapped address would fault in the real provider; here the bytes are lost.
        let _ = host.write(s.addr, &rest[..n]);
        rest = &rest[n..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlx5_dv::prm::cqe::Cqe64;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn good_cqe_fields_read_as_the_codec_reads_them(bytes in proptest::array::uniform32(any::<u8>()), tail in proptest::array::uniform32(any::<u8>())) {
            let mut b = [0u8; cqe::SIZE];
            b[..32].copy_from_slice(&bytes);
            b[32..].copy_from_slice(&tail);
            let (c, g) = (Cqe64::decode(&b).map_err(|e| TestCaseError::fail(e.to_string()))?, Good::of(&b));
            prop_assert_eq!(
                (c.qpn, c.wqe_counter, c.sop_drop, c.byte_cnt, c.imm_inval_pkey),
                (g.qpn, g.wqe_counter, g.sop_drop, g.byte_cnt, g.imm_inval_pkey)
            );
        }
    }
}
