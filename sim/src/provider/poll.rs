//! `mlx5_poll_cq`: hand out CQEs, consume SIG_ERR CQEs into the mkey they name, copy
//! scatter-to-CQE data to the receive SGE addresses, and retire send-queue entries.

use mlx5_dv::errno::EINVAL;
use mlx5_dv::{Cq, Error, Op, Result, Wc};

use super::{Lower, Provider};
use crate::device::wqe::InlineScatter;
use crate::host::{Dma, Host};

impl Provider {
    /// `ibv_poll_cq`.
    pub(crate) fn poll_cq(&mut self, low: &mut Lower<'_>, cq: &Cq, max: usize) -> Result<Vec<Wc>> {
        let op = Op::PollCq;
        let c = self.cqs.get(cq.handle, op)?;
        let (dev, cqn) = (c.dev, c.cqn);
        let mut out = Vec::new();
        while out.len() < max {
            let Some(e) = low.devices.get_mut(dev).and_then(|d| d.poll(cqn)) else { break };
            if let Some((index, err)) = e.sig_err {
                if !self.take_sig_err(dev, index, err) {
                    let why = format!("a signature error names unknown mkey index 0x{index:x}");
                    return Err(Error::new(op, EINVAL, why));
                }
                continue;
            }
            if let Some(s) = &e.scatter {
                copy_to_scat(low.host, s);
            }
            if let Some(seq) = e.sq_seq
                && let Some((_, q)) = self.qps.iter_mut().find(|(_, q)| q.dev == dev && q.qpn == e.qpn)
            {
                // A CQE from before a RESET retires nothing of the new queue.
                q.sq_tail = q.sq_tail.max(seq + 1).min(q.sq_head);
            }
            out.push(e.wc);
        }
        Ok(out)
    }
}

/// `copy_to_scat`: the SGE address is taken as a process virtual address, whatever key the
/// SGE names; a zero-based (indirect mkey) address therefore misses the mkey's memory.
fn copy_to_scat(host: &mut Host, s: &InlineScatter) {
    let mut rest = &s.data[..];
    for sge in &s.sge {
        if rest.is_empty() {
            break;
        }
        let n = rest.len().min(sge.length as usize);
        // An unmapped address would fault in the real provider; here the bytes are lost.
        let _ = host.write(sge.addr, &rest[..n]);
        rest = &rest[n..];
    }
}
