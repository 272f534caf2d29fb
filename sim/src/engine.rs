//! The engine: the device's data path. It executes posted WQEs in order, translates addresses
//! through MRs and indirect mkeys, checks keys and access rights, moves bytes between buffers,
//! and writes CQEs with the `ibv_wc_status`, opcode and vendor syndrome a real device reports.
//!
//! Execution is synchronous and deterministic: after every doorbell (post, receive, state
//! change) every QP runs its send queue as far as it can, in QP order. A SEND that finds no
//! receive WQE waits, as a QP with infinite RNR retry does.

use mlx5_dv::prm::mkc;
use mlx5_dv::{AccessFlags, QpState, Sge, Wc, event_type, wc_flags, wc_opcode, wc_status};

use crate::firmware::{FwMkey, Translation};
use crate::provider::{Simulator, StoredSigErr};
use crate::signature::{Direction, SigConfig, TransferError};
use crate::verbs::{CqEntry, InlineScatter, UmrWqe, Wqe, WqeKind};

/// Error CQE syndromes (`syndrome` byte of `struct mlx5_err_cqe`).
pub mod syndrome {
    /// LOCAL_LENGTH_ERR.
    pub const LOCAL_LENGTH: u8 = 0x01;
    /// LOCAL_QP_OP_ERR.
    pub const LOCAL_QP_OP: u8 = 0x02;
    /// LOCAL_PROT_ERR.
    pub const LOCAL_PROT: u8 = 0x04;
    /// WR_FLUSH_ERR.
    pub const WR_FLUSH: u8 = 0x05;
    /// REMOTE_INVAL_REQ_ERR.
    pub const REMOTE_INVAL_REQ: u8 = 0x12;
    /// REMOTE_ACCESS_ERR.
    pub const REMOTE_ACCESS: u8 = 0x13;
    /// REMOTE_OP_ERR.
    pub const REMOTE_OP: u8 = 0x14;
    /// TRANSPORT_RETRY_EXC_ERR.
    pub const TRANSPORT_RETRY: u8 = 0x15;

    /// The `ibv_wc_status` the provider reports for a syndrome (`mlx5_handle_error_cqe`).
    pub fn to_status(s: u8) -> u32 {
        use mlx5_dv::wc_status::*;
        match s {
            0x01 => LOC_LEN_ERR,
            0x02 => LOC_QP_OP_ERR,
            0x04 => LOC_PROT_ERR,
            0x05 => WR_FLUSH_ERR,
            0x06 => MW_BIND_ERR,
            0x10 => BAD_RESP_ERR,
            0x11 => LOC_ACCESS_ERR,
            0x12 => REM_INV_REQ_ERR,
            0x13 => REM_ACCESS_ERR,
            0x14 => REM_OP_ERR,
            0x15 => RETRY_EXC_ERR,
            0x16 => RNR_RETRY_EXC_ERR,
            0x22 => REM_ABORT_ERR,
            _ => GENERAL_ERR,
        }
    }
}

/// Scatter-to-CQE carries at most this many bytes in a 64-byte CQE.
const SCATTER_TO_CQE_MAX: usize = 32;
/// How deep indirect mkeys may point through each other.
const MAX_INDIRECTION: u32 = 4;

/// What an access needs from the key it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    LocalRead,
    LocalWrite,
    RemoteRead,
    RemoteWrite,
    /// An entry of an indirect mkey: the indirect mkey's own rights already decided.
    Nested,
}

/// Where a key is looked up: a device and the protection domain of the QP using it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Domain {
    dev: usize,
    pdn: u32,
}

/// Why a translation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fault;

/// The result of executing the head WQE of a QP.
enum Step {
    /// Executed; the requester CQE to write, if any.
    Done(Option<Wc>),
    /// Waiting for the peer (no receive WQE yet).
    Blocked,
    /// Failed with this syndrome at the requester.
    Failed(u8),
    /// A signature error on a SIG_PIPELINING QP: the QP drained to SQD with this WQE unsent.
    Held,
}

/// The responder side of an RDMA operation: the peer QP and the remote key and address.
#[derive(Debug, Clone, Copy)]
struct Remote {
    peer: u32,
    rkey: u32,
    raddr: u64,
}

/// A signature error met in a transfer, not yet reported.
#[derive(Debug, Clone, Copy)]
struct SigHit {
    dev: usize,
    index: u32,
    err: TransferError,
    /// CQE domain: 0 wire, 1 memory.
    domain: u8,
}

fn field(m: &FwMkey, f: mlx5_dv::prm::Field) -> u64 {
    f.get(&m.mkc).unwrap_or(0)
}

impl Simulator {
    /// The vendor syndrome the profile gives an error syndrome.
    fn vendor_err(&self, s: u8) -> u32 {
        let v = &self.data.limits.vendor_err;
        u32::from(match s {
            syndrome::LOCAL_LENGTH => v.local_length,
            syndrome::LOCAL_QP_OP => v.local_qp_op,
            syndrome::LOCAL_PROT => v.local_protection,
            syndrome::WR_FLUSH => v.flush,
            syndrome::REMOTE_INVAL_REQ => v.remote_invalid_request,
            syndrome::REMOTE_ACCESS => v.remote_access,
            syndrome::REMOTE_OP => v.remote_operation,
            syndrome::TRANSPORT_RETRY => v.transport_retry,
            _ => v.rnr_retry,
        })
    }

    /// Translate `[addr, addr + len)` of `key` on device `dev` into host address ranges,
    /// checking the key's existence, validity, tag, PD and access rights.
    fn resolve(
        &self,
        at: Domain,
        key: u32,
        addr: u64,
        len: u64,
        need: Need,
        depth: u32,
    ) -> Result<Vec<(u64, u64)>, Fault> {
        if depth > MAX_INDIRECTION {
            return Err(Fault);
        }
        let (dev, pdn) = (at.dev, at.pdn);
        let fw = self.fws.get(dev).ok_or(Fault)?;
        let m = fw.mkey(key >> 8).ok_or(Fault)?;
        if field(m, mkc::FREE) != 0
            || field(m, mkc::MKEY_7_0) != u64::from(key & 0xff)
            || field(m, mkc::PD) != u64::from(pdn)
        {
            return Err(Fault);
        }
        // crypto_en with no crypto BSF ever written: the device fails the access. (Crypto
        // attributes cannot be set yet, so every crypto mkey is in that state.)
        if field(m, mkc::CRYPTO_EN) != 0 {
            return Err(Fault);
        }
        let allowed = match need {
            Need::LocalRead | Need::Nested => true,
            Need::LocalWrite => field(m, mkc::LW) != 0,
            Need::RemoteRead => field(m, mkc::RR) != 0,
            Need::RemoteWrite => field(m, mkc::RW) != 0,
        };
        if !allowed {
            return Err(Fault);
        }
        let start = field(m, mkc::START_ADDR);
        let mlen = field(m, mkc::LEN);
        let off = addr.checked_sub(start).ok_or(Fault)?;
        if off.checked_add(len).is_none_or(|end| end > mlen) {
            return Err(Fault);
        }
        match &m.xlat {
            Translation::None => Err(Fault),
            Translation::Mtt => Ok(if len == 0 { vec![] } else { vec![(addr, len)] }),
            Translation::Klm(entries) => {
                let mut out = Vec::new();
                let (mut pos, mut want, mut base) = (off, len, 0u64);
                for e in entries {
                    let bc = u64::from(e.byte_count);
                    if want > 0 && pos < base + bc {
                        let inner = pos - base;
                        let n = want.min(bc - inner);
                        out.extend(self.resolve(
                            at,
                            e.key,
                            e.addr.checked_add(inner).ok_or(Fault)?,
                            n,
                            Need::Nested,
                            depth + 1,
                        )?);
                        pos += n;
                        want -= n;
                    }
                    base += bc;
                }
                if want > 0 { Err(Fault) } else { Ok(out) }
            }
            Translation::Repeat { repeat_count, entries } => {
                let per: u64 = entries.iter().map(|e| u64::from(e.byte_count)).sum();
                let mut out = Vec::new();
                let (mut pos, mut want) = (off, len);
                while want > 0 {
                    if per == 0 {
                        return Err(Fault);
                    }
                    let rep = pos / per;
                    if rep >= u64::from(*repeat_count) {
                        return Err(Fault);
                    }
                    let mut within = pos % per;
                    for e in entries {
                        let bc = u64::from(e.byte_count);
                        if within >= bc {
                            within -= bc;
                            continue;
                        }
                        let n = want.min(bc - within);
                        let a = rep
                            .checked_mul(u64::from(e.stride))
                            .and_then(|o| e.addr.checked_add(o))
                            .and_then(|a| a.checked_add(within))
                            .ok_or(Fault)?;
                        out.extend(self.resolve(at, e.key, a, n, Need::Nested, depth + 1)?);
                        pos += n;
                        want -= n;
                        break;
                    }
                }
                Ok(out)
            }
        }
    }

    fn resolve_sges(&self, dev: usize, pdn: u32, sge: &[Sge], need: Need) -> Result<Vec<(u64, u64)>, Fault> {
        let mut out = Vec::new();
        for s in sge {
            out.extend(self.resolve(Domain { dev, pdn }, s.lkey, s.addr, u64::from(s.length), need, 0)?);
        }
        Ok(out)
    }

    /// Append the bytes of `ranges` to `out`.
    fn gather_into(&self, ranges: &[(u64, u64)], out: &mut Vec<u8>) -> Option<()> {
        for &(va, n) in ranges {
            out.extend_from_slice(self.data.mem.read(va, n as usize)?);
        }
        Some(())
    }

    /// Write `data` across `ranges` in order; the ranges must hold at least `data.len()`.
    fn scatter(&mut self, ranges: &[(u64, u64)], data: &[u8]) {
        let mut rest = data;
        for &(va, n) in ranges {
            if rest.is_empty() {
                break;
            }
            let k = rest.len().min(n as usize);
            let _ = self.data.mem.write(va, &rest[..k]);
            rest = &rest[k..];
        }
    }

    fn pdn_of(&self, qp: u32) -> u32 {
        self.data.qps.get(&qp).and_then(|q| self.pds.get(&q.pd)).and_then(|p| p.pdn).unwrap_or(0)
    }

    /// Write a CQE; a full CQ overruns: the CQE is lost and the context gets `CQ_ERR`.
    pub(crate) fn push_cqe(&mut self, cq: u32, entry: CqEntry) {
        let Some(c) = self.data.cqs.get_mut(&cq) else { return };
        if c.overrun {
            return;
        }
        if c.entries.len() as u32 >= c.cqe {
            c.overrun = true;
            let ctx = c.ctx;
            let handle = mlx5_dv::CqHandle::new(self.id, cq);
            if let Some(x) = self.contexts.get_mut(&ctx) {
                x.events.push_back(mlx5_dv::AsyncEvent {
                    event_type: event_type::CQ_ERR,
                    qp_num: None,
                    cq: Some(handle),
                });
            }
            return;
        }
        c.entries.push_back(entry);
    }

    fn error_wc(&self, qp: u32, wr_id: u64, opcode: u32, s: u8) -> Wc {
        let qp_num = self.data.qps.get(&qp).map_or(0, |q| q.qp_num);
        Wc { wr_id, status: syndrome::to_status(s), opcode, vendor_err: self.vendor_err(s), qp_num, ..Wc::default() }
    }

    /// Move a QP to ERR and flush both its queues with `WR_FLUSH_ERR`.
    pub(crate) fn flush_qp(&mut self, qp: u32) {
        let Some(q) = self.data.qps.get_mut(&qp) else { return };
        q.state = QpState::Err;
        let sq: Vec<_> = q.sq.drain(..).collect();
        let rq: Vec<_> = q.rq.drain(..).collect();
        let (scq, rcq) = (q.send_cq, q.recv_cq);
        for w in sq {
            let wc = self.error_wc(qp, w.wr_id, w.opcode, syndrome::WR_FLUSH);
            self.push_cqe(scq, CqEntry { wc, qp, sq_seq: Some(w.seq), scatter: None, sig_err: None });
        }
        for r in rq {
            let wc = self.error_wc(qp, r.wr_id, wc_opcode::RECV, syndrome::WR_FLUSH);
            self.push_cqe(rcq, CqEntry { wc, qp, sq_seq: None, scatter: None, sig_err: None });
        }
    }

    fn qp_event(&mut self, qp: u32, ty: u32) {
        let Some(q) = self.data.qps.get(&qp) else { return };
        let (ctx, qp_num) = (q.ctx, q.qp_num);
        if let Some(c) = self.contexts.get_mut(&ctx) {
            c.events.push_back(mlx5_dv::AsyncEvent { event_type: ty, qp_num: Some(qp_num), cq: None });
        }
    }

    /// Run every QP's send queue as far as it goes.
    pub(crate) fn progress(&mut self) {
        loop {
            let mut moved = false;
            let ids: Vec<u32> = self.data.qps.keys().copied().collect();
            for id in ids {
                while let Some(w) =
                    self.data.qps.get(&id).filter(|q| q.state == QpState::Rts).and_then(|q| q.sq.front().cloned())
                {
                    match self.execute(id, &w) {
                        Step::Blocked | Step::Held => break,
                        Step::Done(wc) => {
                            moved = true;
                            if let Some(q) = self.data.qps.get_mut(&id) {
                                q.sq.pop_front();
                            }
                            if let (Some(wc), Some(cq)) = (wc, self.data.qps.get(&id).map(|q| q.send_cq)) {
                                self.push_cqe(
                                    cq,
                                    CqEntry { wc, qp: id, sq_seq: Some(w.seq), scatter: None, sig_err: None },
                                );
                            }
                        }
                        Step::Failed(s) => {
                            moved = true;
                            let cq = self.data.qps.get_mut(&id).map(|q| {
                                q.sq.pop_front();
                                q.send_cq
                            });
                            let wc = self.error_wc(id, w.wr_id, w.opcode, s);
                            if let Some(cq) = cq {
                                self.push_cqe(
                                    cq,
                                    CqEntry { wc, qp: id, sq_seq: Some(w.seq), scatter: None, sig_err: None },
                                );
                            }
                            self.flush_qp(id);
                        }
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }

    fn success(&self, qp: u32, w: &Wqe, byte_len: u32) -> Option<Wc> {
        let qp_num = self.data.qps.get(&qp).map_or(0, |q| q.qp_num);
        w.signaled.then_some(Wc {
            wr_id: w.wr_id,
            status: wc_status::SUCCESS,
            opcode: w.opcode,
            byte_len,
            qp_num,
            ..Wc::default()
        })
    }

    /// The peer QP, if it can take a request (RTR or RTS).
    fn peer(&self, qp: u32) -> Option<u32> {
        let r = self.data.qps.get(&qp)?.remote?;
        matches!(self.data.qps.get(&r)?.state, QpState::Rtr | QpState::Rts).then_some(r)
    }

    /// The responder detected an error: its QP goes to ERR (with an async event).
    fn responder_error(&mut self, peer: u32, ev: u32) {
        self.qp_event(peer, ev);
        self.flush_qp(peer);
    }

    /// The signature BSF of the mkey `key` names, if it has one.
    fn sig_of(&self, dev: usize, key: u32) -> Option<SigConfig> {
        self.fws.get(dev)?.mkey(key >> 8)?.sig.map(|(c, _)| c)
    }

    /// The block size of a configuration, if both domains agree on it (mixed block sizes are
    /// not simulated).
    fn sig_bs(cfg: &SigConfig) -> Result<u64, Fault> {
        let bs = cfg.bs().ok_or(Fault)?;
        if [cfg.mem, cfg.wire].iter().flatten().any(|d| d.bs != bs) {
            return Err(Fault);
        }
        Ok(bs as u64)
    }

    /// Read through `key` for sending (memory is the input), appending to `out`. A signature
    /// mkey is addressed in data bytes by a local SGE and in wire bytes by a remote peer, whole
    /// blocks only; its blocks are numbered from mkey offset 0.
    #[allow(clippy::too_many_arguments)]
    fn read_view(
        &mut self,
        at: Domain,
        key: u32,
        addr: u64,
        len: u64,
        need: Need,
        local: bool,
        out: &mut Vec<u8>,
    ) -> Result<Option<SigHit>, Fault> {
        let Some(cfg) = self.sig_of(at.dev, key) else {
            let r = self.resolve(at, key, addr, len, need, 0)?;
            return self.gather_into(&r, out).map(|_| None).ok_or(Fault);
        };
        let bs = Self::sig_bs(&cfg)?;
        let stride = if local { bs } else { cfg.wire.map_or(bs, |d| d.stride() as u64) };
        if !addr.is_multiple_of(stride) || !len.is_multiple_of(stride) {
            return Err(Fault);
        }
        let (first, n) = (addr / stride, len / stride);
        let mem_stride = cfg.mem.map_or(bs, |d| d.stride() as u64);
        let r = self.resolve(at, key, first * mem_stride, n * mem_stride, need, 0)?;
        let mut input = self.data.take_scratch();
        let result = self
            .gather_into(&r, &mut input)
            .and_then(|()| cfg.transform(&self.crcs, Direction::Tx, first, &input, out));
        self.data.give_scratch(input);
        Ok(result.ok_or(Fault)?.map(|err| SigHit { dev: at.dev, index: key >> 8, err, domain: 1 }))
    }

    /// Write wire-format `bytes` through `key` (the wire is the input).
    fn write_view(
        &mut self,
        at: Domain,
        key: u32,
        addr: u64,
        bytes: &[u8],
        need: Need,
        local: bool,
    ) -> Result<Option<SigHit>, Fault> {
        let Some(cfg) = self.sig_of(at.dev, key) else {
            let r = self.resolve(at, key, addr, bytes.len() as u64, need, 0)?;
            self.scatter(&r, bytes);
            return Ok(None);
        };
        let bs = Self::sig_bs(&cfg)?;
        let wire_stride = cfg.wire.map_or(bs, |d| d.stride() as u64);
        let stride = if local { bs } else { wire_stride };
        if !addr.is_multiple_of(stride) || !(bytes.len() as u64).is_multiple_of(wire_stride) {
            return Err(Fault);
        }
        let first = addr / stride;
        let mut out = self.data.take_scratch();
        let err = cfg.transform(&self.crcs, Direction::Rx, first, bytes, &mut out);
        let mem_stride = cfg.mem.map_or(bs, |d| d.stride() as u64);
        let placed = err.ok_or(Fault).and_then(|e| {
            let r = self.resolve(at, key, first * mem_stride, out.len() as u64, need, 0)?;
            self.scatter(&r, &out);
            Ok(e)
        });
        self.data.give_scratch(out);
        Ok(placed?.map(|err| SigHit { dev: at.dev, index: key >> 8, err, domain: 0 }))
    }

    /// True if any key of the SGEs names a signature mkey.
    fn any_sig(&self, dev: usize, sge: &[Sge]) -> bool {
        sge.iter().any(|s| self.sig_of(dev, s.lkey).is_some())
    }

    /// The wire bytes an SGE list stands for (a signature mkey adds its wire PI per block).
    fn wire_len(&self, dev: usize, sge: &[Sge]) -> u64 {
        sge.iter()
            .map(|s| match self.sig_of(dev, s.lkey) {
                Some(cfg) => match (cfg.bs(), cfg.wire) {
                    (Some(bs), Some(w)) => u64::from(s.length) / bs as u64 * w.stride() as u64,
                    _ => u64::from(s.length),
                },
                None => u64::from(s.length),
            })
            .sum()
    }

    /// Gather local SGEs in wire format into a pooled buffer (give it back when done).
    fn gather_view(&mut self, at: Domain, sge: &[Sge]) -> Result<(Vec<u8>, Option<SigHit>), Fault> {
        let (mut data, mut hit) = (self.data.take_scratch(), None);
        for s in sge {
            match self.read_view(at, s.lkey, s.addr, u64::from(s.length), Need::LocalRead, true, &mut data) {
                Ok(h) => hit = hit.or(h),
                Err(f) => {
                    self.data.give_scratch(data);
                    return Err(f);
                }
            }
        }
        Ok((data, hit))
    }

    /// Scatter wire-format bytes over local SGEs; a signature mkey must be the only SGE.
    fn scatter_view(&mut self, at: Domain, sge: &[Sge], bytes: &[u8]) -> Result<Option<SigHit>, Fault> {
        if self.any_sig(at.dev, sge) {
            let [s] = sge else { return Err(Fault) };
            return self.write_view(at, s.lkey, s.addr, bytes, Need::LocalWrite, true);
        }
        let r = self.resolve_sges(at.dev, at.pdn, sge, Need::LocalWrite)?;
        self.scatter(&r, bytes);
        Ok(None)
    }

    /// Report a signature error if the mkey's PSV is armed: a SIG_ERR CQE on `cq` (the
    /// provider consumes it at poll time) and the PSV stays in error until the next SET_PSV.
    fn report_sig(&mut self, hit: SigHit, cq: u32, qp: u32) -> bool {
        let armed = self
            .fws
            .get_mut(hit.dev)
            .and_then(|f| f.mkey_mut(hit.index))
            .and_then(|m| m.sig.as_mut())
            .map(|s| std::mem::replace(&mut s.1, false));
        if armed != Some(true) {
            return false;
        }
        let b = hit.err.block;
        let err = StoredSigErr {
            syndrome: b.syndrome,
            expected: b.expected,
            actual: b.actual,
            offset: hit.err.offset,
            sig_type: 0,
            domain: hit.domain,
        };
        self.push_cqe(
            cq,
            CqEntry { wc: Wc::default(), qp, sq_seq: None, scatter: None, sig_err: Some((hit.dev, hit.index, err)) },
        );
        true
    }

    /// A requester-side signature error: report it; a SIG_PIPELINING QP drains to SQD.
    fn requester_sig(&mut self, qp: u32, hit: SigHit) -> bool {
        let Some((cq, drain)) = self.data.qps.get(&qp).map(|q| (q.send_cq, q.drain_sigerr)) else { return false };
        if self.report_sig(hit, cq, qp) && drain {
            if let Some(q) = self.data.qps.get_mut(&qp) {
                q.state = QpState::Sqd;
            }
            self.qp_event(qp, event_type::SQ_DRAINED);
            return true;
        }
        false
    }

    fn responder_sig(&mut self, peer: u32, hit: Option<SigHit>) {
        if let (Some(h), Some(cq)) = (hit, self.data.qps.get(&peer).map(|p| p.recv_cq)) {
            self.report_sig(h, cq, peer);
        }
    }

    /// Move whole blocks from `src` (input format) to `dst` (output format), one block at a
    /// time through a small buffer, so the data is read once and written once.
    fn stream_blocks(
        &mut self,
        cfg: &SigConfig,
        dir: Direction,
        first: u64,
        src: &[(u64, u64)],
        dst: &[(u64, u64)],
    ) -> Result<Option<TransferError>, Fault> {
        use crate::memory::RangeCursor;
        if let ([(sva, slen)], [(dva, dlen)]) = (src, dst) {
            let crcs = &self.crcs;
            let done =
                self.data.mem.with_two(*sva, *slen, *dva, *dlen, |s, d| cfg.transform_slices(crcs, dir, first, s, d));
            if let Some(r) = done {
                return r.ok_or(Fault);
            }
        }
        let bs = Self::sig_bs(cfg)? as usize;
        let in_stride = cfg.domains(dir).0.map_or(bs, |d| d.stride());
        let total: u64 = src.iter().map(|r| r.1).sum();
        if !total.is_multiple_of(in_stride as u64) {
            return Err(Fault);
        }
        let mut block = vec![0u8; in_stride];
        let mut out = Vec::with_capacity(in_stride + 8);
        let (mut sc, mut dc) = (RangeCursor::new(src), RangeCursor::new(dst));
        let mut err = None;
        for b in 0..total / in_stride as u64 {
            if !self.data.mem.read_ranges(&mut sc, &mut block) {
                return Err(Fault);
            }
            out.clear();
            if let Some(e) = cfg.transform_block(&self.crcs, dir, first + b, &block, &mut out)
                && err.is_none()
            {
                err = Some(TransferError { block: e, offset: b * in_stride as u64 });
            }
            if !self.data.mem.write_ranges(&mut dc, &out) {
                return Err(Fault);
            }
        }
        Ok(err)
    }

    /// The streaming form of a signature RDMA WRITE: one side a signature mkey, the other
    /// plain, no pipelining. `None` if the WR does not have that shape.
    fn sig_write_streamed(
        &mut self,
        qp: u32,
        w: &Wqe,
        at: Domain,
        r: Remote,
        sge: &[Sge],
        imm: Option<u32>,
    ) -> Option<Step> {
        let Remote { peer, rkey, raddr } = r;
        if imm.is_some() || self.data.qps.get(&qp).is_none_or(|q| q.drain_sigerr) {
            return None;
        }
        let pat = Domain { dev: self.data.qps.get(&peer).map_or(0, |p| p.dev), pdn: self.pdn_of(peer) };
        let remote_ok = self.data.qps.get(&peer).is_some_and(|p| p.access.contains(AccessFlags::REMOTE_WRITE));
        let (local_sig, remote_sig) = (self.any_sig(at.dev, sge), self.sig_of(pat.dev, rkey));
        let fault = |s: &mut Self, remote: bool| {
            if remote {
                s.responder_error(peer, event_type::QP_ACCESS_ERR);
                Step::Failed(syndrome::REMOTE_ACCESS)
            } else {
                Step::Failed(syndrome::LOCAL_PROT)
            }
        };
        match (local_sig, remote_sig, sge) {
            (true, None, [s]) => {
                // TX from a signature mkey into plain remote memory.
                let cfg = self.sig_of(at.dev, s.lkey)?;
                let bs = Self::sig_bs(&cfg).ok()?;
                if !u64::from(s.length).is_multiple_of(bs) || !s.addr.is_multiple_of(bs) {
                    return None;
                }
                let (first, n) = (s.addr / bs, u64::from(s.length) / bs);
                let mem = cfg.mem.map_or(bs, |d| d.stride() as u64);
                let wire = cfg.wire.map_or(bs, |d| d.stride() as u64);
                let Ok(src) = self.resolve(at, s.lkey, first * mem, n * mem, Need::LocalRead, 0) else {
                    return Some(fault(self, false));
                };
                let dst =
                    if remote_ok { self.resolve(pat, rkey, raddr, n * wire, Need::RemoteWrite, 0).ok() } else { None };
                let Some(dst) = dst else { return Some(fault(self, true)) };
                let Ok(err) = self.stream_blocks(&cfg, Direction::Tx, first, &src, &dst) else {
                    return Some(fault(self, false));
                };
                if let Some(err) = err {
                    self.requester_sig(qp, SigHit { dev: at.dev, index: s.lkey >> 8, err, domain: 1 });
                }
                Some(Step::Done(self.success(qp, w, 0)))
            }
            (false, Some(cfg), _) => {
                // RX from plain local memory into a signature mkey at the responder.
                let bs = Self::sig_bs(&cfg).ok()?;
                let wire = cfg.wire.map_or(bs, |d| d.stride() as u64);
                let mem = cfg.mem.map_or(bs, |d| d.stride() as u64);
                let Ok(src) = self.resolve_sges(at.dev, at.pdn, sge, Need::LocalRead) else {
                    return Some(fault(self, false));
                };
                let len: u64 = src.iter().map(|r| r.1).sum();
                if !raddr.is_multiple_of(wire) || !len.is_multiple_of(wire) {
                    return Some(fault(self, true));
                }
                let (first, n) = (raddr / wire, len / wire);
                let dst = if remote_ok {
                    self.resolve(pat, rkey, first * mem, n * mem, Need::RemoteWrite, 0).ok()
                } else {
                    None
                };
                let Some(dst) = dst else { return Some(fault(self, true)) };
                let Ok(err) = self.stream_blocks(&cfg, Direction::Rx, first, &src, &dst) else {
                    return Some(fault(self, true));
                };
                if let Some(err) = err {
                    self.responder_sig(peer, Some(SigHit { dev: pat.dev, index: rkey >> 8, err, domain: 0 }));
                }
                Some(Step::Done(self.success(qp, w, 0)))
            }
            _ => None,
        }
    }

    /// RDMA WRITE through at least one signature mkey.
    fn sig_write(&mut self, qp: u32, w: &Wqe, at: Domain, r: Remote, sge: &[Sge], imm: Option<u32>) -> Step {
        if let Some(step) = self.sig_write_streamed(qp, w, at, r, sge, imm) {
            return step;
        }
        let Ok((data, hit)) = self.gather_view(at, sge) else { return Step::Failed(syndrome::LOCAL_PROT) };
        let step = self.sig_write_gathered(qp, w, r, &data, hit, imm);
        self.data.give_scratch(data);
        step
    }

    fn sig_write_gathered(
        &mut self,
        qp: u32,
        w: &Wqe,
        r: Remote,
        data: &[u8],
        hit: Option<SigHit>,
        imm: Option<u32>,
    ) -> Step {
        let Remote { peer, rkey, raddr } = r;
        if imm.is_some() && self.data.qps.get(&peer).is_some_and(|p| p.rq.is_empty()) {
            return Step::Blocked;
        }
        if let Some(h) = hit
            && self.requester_sig(qp, h)
        {
            return Step::Held;
        }
        let pat = Domain { dev: self.data.qps.get(&peer).map_or(0, |p| p.dev), pdn: self.pdn_of(peer) };
        let remote_ok = self.data.qps.get(&peer).is_some_and(|p| p.access.contains(AccessFlags::REMOTE_WRITE));
        let written =
            if remote_ok { self.write_view(pat, rkey, raddr, data, Need::RemoteWrite, false).ok() } else { None };
        let Some(rhit) = written else {
            self.responder_error(peer, event_type::QP_ACCESS_ERR);
            return Step::Failed(syndrome::REMOTE_ACCESS);
        };
        self.responder_sig(peer, rhit);
        if let Some(imm) = imm {
            self.complete_recv(peer, data.len() as u32, Some(imm), wc_opcode::RECV_RDMA_WITH_IMM, 0, None);
        }
        Step::Done(self.success(qp, w, 0))
    }

    /// RDMA READ through at least one signature mkey.
    fn sig_read(&mut self, qp: u32, w: &Wqe, at: Domain, r: Remote, sge: &[Sge]) -> Step {
        let Remote { peer, rkey, raddr } = r;
        let want = self.wire_len(at.dev, sge);
        let pat = Domain { dev: self.data.qps.get(&peer).map_or(0, |p| p.dev), pdn: self.pdn_of(peer) };
        let remote_ok = self.data.qps.get(&peer).is_some_and(|p| p.access.contains(AccessFlags::REMOTE_READ));
        let mut bytes = self.data.take_scratch();
        let source = if remote_ok {
            self.read_view(pat, rkey, raddr, want, Need::RemoteRead, false, &mut bytes).ok()
        } else {
            None
        };
        let Some(rhit) = source else {
            self.data.give_scratch(bytes);
            self.responder_error(peer, event_type::QP_ACCESS_ERR);
            return Step::Failed(syndrome::REMOTE_ACCESS);
        };
        self.responder_sig(peer, rhit);
        let placed = self.scatter_view(at, sge, &bytes);
        self.data.give_scratch(bytes);
        let Ok(hit) = placed else { return Step::Failed(syndrome::LOCAL_PROT) };
        if let Some(h) = hit {
            self.requester_sig(qp, h);
        }
        let data_len: u64 = sge.iter().map(|s| u64::from(s.length)).sum();
        Step::Done(self.success(qp, w, data_len as u32))
    }

    fn execute(&mut self, qp: u32, w: &Wqe) -> Step {
        let (dev, pdn) = match self.data.qps.get(&qp) {
            Some(q) => (q.dev, self.pdn_of(qp)),
            None => return Step::Failed(syndrome::LOCAL_QP_OP),
        };
        match &w.kind {
            WqeKind::Umr(u) => self.exec_umr(qp, w, dev, u),
            WqeKind::Nop => Step::Done(self.success(qp, w, 0)),
            WqeKind::SetPsv { index, .. } => {
                if let Some(sig) = self.fws.get_mut(dev).and_then(|f| f.mkey_mut(*index)).and_then(|m| m.sig.as_mut()) {
                    sig.1 = true;
                }
                Step::Done(self.success(qp, w, 0))
            }
            WqeKind::Write { rkey, raddr, sge, imm }
                if self.any_sig(dev, sge)
                    || self
                        .peer(qp)
                        .is_some_and(|p| self.sig_of(self.data.qps.get(&p).map_or(0, |q| q.dev), *rkey).is_some()) =>
            {
                match self.peer(qp) {
                    Some(peer) => self.sig_write(
                        qp,
                        w,
                        Domain { dev, pdn },
                        Remote { peer, rkey: *rkey, raddr: *raddr },
                        sge,
                        *imm,
                    ),
                    None => Step::Failed(syndrome::TRANSPORT_RETRY),
                }
            }
            WqeKind::Read { rkey, raddr, sge }
                if self.any_sig(dev, sge)
                    || self
                        .peer(qp)
                        .is_some_and(|p| self.sig_of(self.data.qps.get(&p).map_or(0, |q| q.dev), *rkey).is_some()) =>
            {
                match self.peer(qp) {
                    Some(peer) => {
                        self.sig_read(qp, w, Domain { dev, pdn }, Remote { peer, rkey: *rkey, raddr: *raddr }, sge)
                    }
                    None => Step::Failed(syndrome::TRANSPORT_RETRY),
                }
            }
            WqeKind::LocalInv { key } => {
                let ok = self
                    .fws
                    .get_mut(dev)
                    .and_then(|f| f.mkey_mut(key >> 8))
                    .filter(|m| field(m, mkc::UMR_EN) != 0)
                    .map(|m| {
                        let _ = mkc::FREE.set(&mut m.mkc, 1);
                        let _ = mkc::MKEY_7_0.set(&mut m.mkc, 0);
                    });
                match ok {
                    Some(()) => Step::Done(self.success(qp, w, 0)),
                    None => Step::Failed(syndrome::LOCAL_PROT),
                }
            }
            WqeKind::Write { rkey, raddr, sge, imm } => {
                let Ok(local) = self.resolve_sges(dev, pdn, sge, Need::LocalRead) else {
                    return Step::Failed(syndrome::LOCAL_PROT);
                };
                let len: u64 = local.iter().map(|r| r.1).sum();
                let Some(peer) = self.peer(qp) else { return Step::Failed(syndrome::TRANSPORT_RETRY) };
                let (pdev, ppdn) = (self.data.qps.get(&peer).map_or(0, |p| p.dev), self.pdn_of(peer));
                if imm.is_some() && self.data.qps.get(&peer).is_some_and(|p| p.rq.is_empty()) {
                    return Step::Blocked;
                }
                let remote_ok = self.data.qps.get(&peer).is_some_and(|p| p.access.contains(AccessFlags::REMOTE_WRITE));
                let target = if remote_ok {
                    self.resolve(Domain { dev: pdev, pdn: ppdn }, *rkey, *raddr, len, Need::RemoteWrite, 0).ok()
                } else {
                    None
                };
                let Some(target) = target else {
                    self.responder_error(peer, event_type::QP_ACCESS_ERR);
                    return Step::Failed(syndrome::REMOTE_ACCESS);
                };
                if !self.data.mem.transfer(&local, &target) {
                    return Step::Failed(syndrome::LOCAL_PROT);
                }
                if let Some(imm) = imm {
                    self.complete_recv(peer, len as u32, Some(*imm), wc_opcode::RECV_RDMA_WITH_IMM, 0, None);
                }
                Step::Done(self.success(qp, w, 0))
            }
            WqeKind::Read { rkey, raddr, sge } => {
                let want: u64 = sge.iter().map(|s| u64::from(s.length)).sum();
                let Ok(local) = self.resolve_sges(dev, pdn, sge, Need::LocalWrite) else {
                    return Step::Failed(syndrome::LOCAL_PROT);
                };
                let Some(peer) = self.peer(qp) else { return Step::Failed(syndrome::TRANSPORT_RETRY) };
                let (pdev, ppdn) = (self.data.qps.get(&peer).map_or(0, |p| p.dev), self.pdn_of(peer));
                let remote_ok = self.data.qps.get(&peer).is_some_and(|p| p.access.contains(AccessFlags::REMOTE_READ));
                let source = if remote_ok {
                    self.resolve(Domain { dev: pdev, pdn: ppdn }, *rkey, *raddr, want, Need::RemoteRead, 0).ok()
                } else {
                    None
                };
                let Some(source) = source.filter(|r| r.iter().all(|&(va, n)| self.data.mem.is_mapped(va, n))) else {
                    self.responder_error(peer, event_type::QP_ACCESS_ERR);
                    return Step::Failed(syndrome::REMOTE_ACCESS);
                };
                if !self.data.mem.transfer(&source, &local) {
                    return Step::Failed(syndrome::LOCAL_PROT);
                }
                Step::Done(self.success(qp, w, want as u32))
            }
            WqeKind::Send { sge, imm, inv } => {
                let Ok((data, hit)) = self.gather_view(Domain { dev, pdn }, sge) else {
                    return Step::Failed(syndrome::LOCAL_PROT);
                };
                let step = self.send_gathered(qp, w, &data, hit, *imm, *inv);
                self.data.give_scratch(data);
                step
            }
        }
    }

    /// SEND, SEND with immediate or SEND with invalidate, once its bytes are gathered.
    fn send_gathered(
        &mut self,
        qp: u32,
        w: &Wqe,
        data: &[u8],
        hit: Option<SigHit>,
        imm: Option<u32>,
        inv: Option<u32>,
    ) -> Step {
        let Some(peer) = self.peer(qp) else { return Step::Failed(syndrome::TRANSPORT_RETRY) };
        if self.data.qps.get(&peer).is_some_and(|p| p.rq.is_empty()) {
            return Step::Blocked;
        }
        if let Some(h) = hit
            && self.requester_sig(qp, h)
        {
            return Step::Held;
        }
        if let Some(key) = inv
            && !self.remote_invalidate(peer, key)
        {
            self.responder_error(peer, event_type::QP_REQ_ERR);
            return Step::Failed(syndrome::REMOTE_INVAL_REQ);
        }
        let flags = if inv.is_some() { wc_flags::WITH_INV } else { 0 };
        match self.deliver(peer, data, imm, inv.or(imm), wc_opcode::RECV, flags) {
            Ok(()) => Step::Done(self.success(qp, w, 0)),
            Err(s) => Step::Failed(s),
        }
    }

    /// SEND_WITH_INV at the responder: the key must name an mkey of the responder's PD that
    /// allows remote invalidation.
    fn remote_invalidate(&mut self, peer: u32, key: u32) -> bool {
        let Some(q) = self.data.qps.get(&peer) else { return false };
        let (dev, pdn) = (q.dev, self.pdn_of(peer));
        let Some(m) = self.fws.get_mut(dev).and_then(|f| f.mkey_mut(key >> 8)) else { return false };
        if field(m, mkc::EN_RINVAL) == 0
            || field(m, mkc::PD) != u64::from(pdn)
            || field(m, mkc::MKEY_7_0) != u64::from(key & 0xff)
        {
            return false;
        }
        let _ = mkc::FREE.set(&mut m.mkc, 1);
        true
    }

    /// Deliver a SEND into the peer's next receive WQE.
    fn deliver(
        &mut self,
        peer: u32,
        data: &[u8],
        imm: Option<u32>,
        imm_data: Option<u32>,
        opcode: u32,
        flags: u32,
    ) -> Result<(), u8> {
        let Some(p) = self.data.qps.get_mut(&peer) else { return Err(syndrome::TRANSPORT_RETRY) };
        let Some(r) = p.rq.pop_front() else { return Err(syndrome::TRANSPORT_RETRY) };
        let (pdev, rcq, scatter_to_cqe) = (p.dev, p.recv_cq, p.scatter_to_cqe);
        let ppdn = self.pdn_of(peer);
        let room = self.wire_len(pdev, &r.sge);
        if (data.len() as u64) > room {
            let wc = self.error_wc(peer, r.wr_id, wc_opcode::RECV, syndrome::LOCAL_LENGTH);
            self.push_cqe(rcq, CqEntry { wc, qp: peer, sq_seq: None, scatter: None, sig_err: None });
            self.flush_qp(peer);
            return Err(syndrome::REMOTE_INVAL_REQ);
        }
        let qp_num = self.data.qps.get(&peer).map_or(0, |p| p.qp_num);
        let wc_flags = flags | if imm.is_some() { wc_flags::WITH_IMM } else { 0 };
        let wc = Wc {
            wr_id: r.wr_id,
            status: wc_status::SUCCESS,
            opcode,
            byte_len: data.len() as u32,
            imm_data: imm_data.unwrap_or(0),
            qp_num,
            wc_flags,
            ..Wc::default()
        };
        if scatter_to_cqe && data.len() <= SCATTER_TO_CQE_MAX {
            // The device puts small payloads in the CQE; the provider copies them at poll time.
            let scatter = Some(InlineScatter { data: data.to_vec(), sge: r.sge.clone() });
            self.push_cqe(rcq, CqEntry { wc, qp: peer, sq_seq: None, scatter, sig_err: None });
            return Ok(());
        }
        let Ok(hit) = self.scatter_view(Domain { dev: pdev, pdn: ppdn }, &r.sge, data) else {
            let wc = self.error_wc(peer, r.wr_id, wc_opcode::RECV, syndrome::LOCAL_PROT);
            self.push_cqe(rcq, CqEntry { wc, qp: peer, sq_seq: None, scatter: None, sig_err: None });
            self.flush_qp(peer);
            return Err(syndrome::REMOTE_OP);
        };
        if let Some(h) = hit {
            self.report_sig(h, rcq, peer);
        }
        self.push_cqe(rcq, CqEntry { wc, qp: peer, sq_seq: None, scatter: None, sig_err: None });
        Ok(())
    }

    /// RDMA WRITE with immediate consumes a receive WQE without scattering into it.
    fn complete_recv(&mut self, peer: u32, len: u32, imm: Option<u32>, opcode: u32, flags: u32, _data: Option<&[u8]>) {
        let Some(p) = self.data.qps.get_mut(&peer) else { return };
        let Some(r) = p.rq.pop_front() else { return };
        let (rcq, qp_num) = (p.recv_cq, p.qp_num);
        let wc = Wc {
            wr_id: r.wr_id,
            status: wc_status::SUCCESS,
            opcode,
            byte_len: len,
            imm_data: imm.unwrap_or(0),
            qp_num,
            wc_flags: flags | wc_flags::WITH_IMM,
            ..Wc::default()
        };
        self.push_cqe(rcq, CqEntry { wc, qp: peer, sq_seq: None, scatter: None, sig_err: None });
    }

    /// Apply a UMR WQE to its mkey: valid, new tag, then the masked fields.
    fn exec_umr(&mut self, qp: u32, w: &Wqe, dev: usize, u: &UmrWqe) -> Step {
        let Some(m) = self.fws.get_mut(dev).and_then(|f| f.mkey_mut(u.index)) else {
            return Step::Failed(syndrome::LOCAL_PROT);
        };
        if field(m, mkc::UMR_EN) == 0 {
            return Step::Failed(syndrome::LOCAL_PROT);
        }
        let _ = mkc::FREE.set(&mut m.mkc, 0);
        let _ = mkc::MKEY_7_0.set(&mut m.mkc, u64::from(u.tag));
        if let Some(a) = u.access {
            let bit = |f: AccessFlags| u64::from(a & f.bits() != 0);
            let _ = mkc::LW.set(&mut m.mkc, bit(AccessFlags::LOCAL_WRITE));
            let _ = mkc::RW.set(&mut m.mkc, bit(AccessFlags::REMOTE_WRITE));
            let _ = mkc::RR.set(&mut m.mkc, bit(AccessFlags::REMOTE_READ));
            let _ = mkc::A.set(&mut m.mkc, bit(AccessFlags::REMOTE_ATOMIC));
        }
        if let Some((len, xlat)) = &u.layout {
            let _ = mkc::START_ADDR.set(&mut m.mkc, 0);
            let _ = mkc::LEN.set(&mut m.mkc, *len);
            m.xlat = xlat.clone();
        }
        if u.bsf_disable {
            let _ = mkc::BSF_EN.set(&mut m.mkc, 0);
            m.sig = None;
        }
        if let Some(cfg) = u.sig_bsf {
            // Armed by the SET_PSV WQEs that follow.
            m.sig = Some((cfg, false));
        }
        Step::Done(self.success(qp, w, 0))
    }
}
