//! One data WR's transfer in the model: the requester's gather, the responder's checks and
//! scatter, and the completions either side gets.

use super::*;

impl Model {
    /// The message length and gathered source of a WRITE or SEND of QP slot `qp`, then its
    /// responder. `Err` is the requester's error completion; `None` when the model cannot say.
    pub(super) fn source_and_peer(&self, qp: usize, wr: &Wr, dev: usize, pd: usize) -> Option<Result<Outgoing, u32>> {
        let len = u32::try_from(total(wr)).ok()?;
        let src = match self.map_list(&sges(wr), dev, pd, Need { remote: false, write: false, atomic: false }) {
            Ok(r) => r,
            Err(Fault::Prot) => return Some(Err(wc_status::LOC_PROT_ERR)),
            Err(Fault::Unknown) => return None,
        };
        let p = self.linked_peer(qp)?;
        let (pdev, ppd) = (self.qp_dev(p)?, self.qps.get(p)?.as_ref()?.pd);
        Some(Ok(Outgoing { len, src, p, pdev, ppd }))
    }

    /// One data WR of QP slot `qp` in RTS: `None` when the model cannot say, `Some(None)` on
    /// success, `Some(Some(status))` for the requester's error completion.
    pub(super) fn transfer(&mut self, qp: usize, wr: &Wr) -> Option<Option<u32>> {
        let dev = self.qp_dev(qp)?;
        let pd = self.qps.get(qp)?.as_ref()?.pd;
        match *wr {
            Wr::Write { remote, roff, .. } | Wr::WriteImm { remote, roff, .. } => {
                self.effects.watch.extend(self.key_bufs(remote));
                let imm = if let Wr::WriteImm { imm, .. } = *wr { Some(imm) } else { None };
                let Outgoing { len, src, p, pdev, ppd } = match self.source_and_peer(qp, wr, dev, pd)? {
                    Ok(v) => v,
                    Err(status) => return Some(Some(status)),
                };
                // With an immediate it takes a receive; without one the responder answers RNR:
                // not modelled.
                let recv = match imm {
                    Some(_) => Some(*self.qps.get(p)?.as_ref()?.recvs.front()?),
                    None => None,
                };
                self.sent(qp, p);
                match self.map(remote, roff, len, pdev, ppd, Need { remote: true, write: true, atomic: false }) {
                    Ok(dst) => {
                        if overlaps(&src, &dst) || self.touches_pending(&src) || self.touches_pending(&dst) {
                            return None;
                        }
                        self.copy(&src, &dst);
                        // The receive's own list is not written.
                        if let (Some(r), Some(i)) = (recv, imm) {
                            self.pop_recv(p);
                            let op = Some(wc_opcode::RECV_RDMA_WITH_IMM);
                            self.cqe(p, r.wr_id, wc_status::SUCCESS, op, Some(len));
                            self.set_last_imm(i);
                        }
                        Some(None)
                    }
                    Err(Fault::Prot) => self.remote_error(qp, p, wc_status::REM_ACCESS_ERR),
                    Err(Fault::Unknown) => None,
                }
            }
            Wr::Read { remote, roff, .. } => {
                for l in sges(wr) {
                    self.effects.watch.extend(self.key_bufs(l.key));
                }
                let len = u32::try_from(total(wr)).ok()?;
                let dst = self.map_list(&sges(wr), dev, pd, Need { remote: false, write: true, atomic: false });
                let p = self.linked_peer(qp)?;
                let (pdev, ppd) = (self.qp_dev(p)?, self.qps.get(p)?.as_ref()?.pd);
                let src = self.map(remote, roff, len, pdev, ppd, Need { remote: true, write: false, atomic: false });
                self.sent(qp, p);
                match (src, dst) {
                    (Ok(src), Ok(dst)) => {
                        if overlaps(&src, &dst) || self.touches_pending(&src) || self.touches_pending(&dst) {
                            return None;
                        }
                        self.copy(&src, &dst);
                        self.landing.extend(dst);
                        Some(None)
                    }
                    // Which side a READ with both keys bad reports first is not published.
                    (Err(Fault::Prot), Ok(_)) => self.remote_error(qp, p, wc_status::REM_ACCESS_ERR),
                    (Ok(_), Err(Fault::Prot)) => Some(Some(wc_status::LOC_PROT_ERR)),
                    _ => None,
                }
            }
            Wr::Send { .. } | Wr::SendImm { .. } | Wr::SendInv { .. } => {
                let imm = if let Wr::SendImm { imm, .. } = *wr { Some(imm) } else { None };
                let inv = if let Wr::SendInv { mkey, tag, .. } = *wr { Some((mkey, tag)) } else { None };
                let Outgoing { len, src, p, pdev, ppd } = match self.source_and_peer(qp, wr, dev, pd)? {
                    Ok(v) => v,
                    Err(status) => return Some(Some(status)),
                };
                // Without a receive the responder answers RNR: not modelled.
                let r = *self.qps.get(p)?.as_ref()?.recvs.front()?;
                if let Some((mkey, tag)) = inv {
                    // Item 73 for a valid REMOTE_INVALIDATE mkey of the responder's PD named by
                    // its current key; the responder's answer otherwise is not published.
                    let m = self.mkeys.get(mkey)?.as_ref()?;
                    let plain = !m.flags.intersects(MkeyInitFlags::BLOCK_SIGNATURE | MkeyInitFlags::CRYPTO);
                    let ok = m.flags.contains(MkeyInitFlags::REMOTE_INVALIDATE) && m.valid && m.tag == tag;
                    if !plain || !ok || m.pd != ppd || r.sge.is_none() {
                        return None;
                    }
                }
                self.sent(qp, p);
                let Some(sge) = r.sge else {
                    // A 0-SGE receive cannot hold a byte: a length error at the responder,
                    // an invalid request at the requester.
                    self.pop_recv(p);
                    self.cqe(p, r.wr_id, wc_status::LOC_LEN_ERR, None, None);
                    self.enter_err(p);
                    return Some(Some(wc_status::REM_INV_REQ_ERR));
                };
                self.effects.watch.extend(self.key_bufs(sge.key));
                // A short receive may be written in part: not modelled.
                if sge.len < len {
                    return None;
                }
                let dst = self
                    .map(sge.key, sge.off, len, pdev, ppd, Need { remote: false, write: true, atomic: false })
                    .ok()?;
                if overlaps(&src, &dst) || self.touches_pending(&src) || self.touches_pending(&dst) {
                    return None;
                }
                // Item 74: up to 32 or 64 bytes travel in the CQE and land when it is polled.
                if len <= 64 {
                    let bytes = self.gather(&src);
                    self.pending.push((dst, bytes));
                } else {
                    self.copy(&src, &dst);
                }
                self.pop_recv(p);
                self.cqe(p, r.wr_id, wc_status::SUCCESS, Some(wc_opcode::RECV), Some(len));
                if let Some(i) = imm {
                    self.set_last_imm(i);
                }
                // Item 84: the invalidation follows the payload.
                if let Some((mkey, _)) = inv {
                    if let Some(m) = self.mkeys.get_mut(mkey).and_then(|m| m.as_mut()) {
                        m.valid = false;
                    }
                    if let Some(c) = self.effects.cqes.last_mut() {
                        c.1.with_inv = true;
                    }
                }
                Some(None)
            }
            Wr::Atomic { .. } => self.atomic_transfer(qp, wr, dev, pd),
            Wr::LocalInv { mkey, tag, .. } => {
                // Item 72 on a valid plain mkey of the QP's PD named by its current key; the
                // answer for any other key is not published.
                let m = self.mkeys.get_mut(mkey)?.as_mut()?;
                let plain = !m.flags.intersects(MkeyInitFlags::BLOCK_SIGNATURE | MkeyInitFlags::CRYPTO);
                if m.pd != pd || m.tag != tag || !m.valid || !plain {
                    return None;
                }
                m.valid = false;
                m.tag = 0;
                Some(None)
            }
            _ => None,
        }
    }

    /// The receive completion just recorded carries `imm`.
    pub(super) fn set_last_imm(&mut self, imm: u32) {
        if let Some(c) = self.effects.cqes.last_mut() {
            c.1.with_imm = true;
            c.1.imm = Some(imm);
        }
    }

    pub(super) fn pop_recv(&mut self, qp: usize) {
        if let Some(q) = self.qps.get_mut(qp).and_then(|q| q.as_mut()) {
            q.recvs.pop_front();
        }
    }

    /// A request of `qp` reached its peer `p`.
    pub(in crate::model) fn sent(&mut self, qp: usize, p: usize) {
        if let Some(q) = self.qps.get_mut(qp).and_then(|q| q.as_mut()) {
            q.tx_sent = true;
        }
        if let Some(r) = self.qps.get_mut(p).and_then(|q| q.as_mut()) {
            r.rx_fresh = false;
        }
    }

    /// The responder refused a request: the requester's status; the responder's own state is
    /// not published, except for a QP connected to itself (item 93).
    pub(super) fn remote_error(&mut self, qp: usize, p: usize, status: u32) -> Option<Option<u32>> {
        if p != qp {
            let q = self.qps.get_mut(p)?.as_mut()?;
            q.unknown = true;
            let (cq, n) = (q.cq, q.recvs.len());
            self.effects.possible.push((cq, n));
        }
        Some(Some(status))
    }
}
