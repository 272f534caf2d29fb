//! The XRC family: one initiator connected to one target QP of a domain that holds two XRC
//! SRQs (of two PDs, on CQs of their own), and a third XRC SRQ of another domain; the
//! initiator posts one to four messages (SENDs, RDMA WRITEs and READs), each naming one of
//! the three SRQs in its XRCETH, the RDMA ones with a key of either PD: the initiator's
//! completions, each SRQ's receive completions and buffers, the two target regions, the
//! initiator's READ sink, and both QPs' states. Written from `docs/behaviour.md` items 135,
//! 187–189 and, for the target's state after an error, 124–125.
//!
//! Not generated: a SEND to an SRQ with no WQE left (the target would wait in RNR), and RDMA
//! of length 0 (whose key no responder checks).

use mlx5_dv::{wc_opcode, wc_status};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::outcome::{NetCqe, Outcome};
use super::{Expect, Model, Op};

/// A message's longest payload, and a receive WQE's length.
pub const XRC_LEN: usize = 256;
/// The initiator's buffer: message `i` gathers from byte `64 * i`.
pub const XRC_SRC_LEN: usize = 4 * 64 + XRC_LEN;
/// Each target region (one per PD): RDMA lands at `8 * off`, `off` below 64.
pub const XRC_TARGET_LEN: usize = 512 + XRC_LEN;
/// The SRQ the target's domain does not hold.
pub const FOREIGN_SRQ: u8 = 2;

/// What a message is.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum XrcKind {
    #[default]
    Send,
    Write,
    Read,
}

/// One message naming SRQ `srq` (0 and 1: the target's domain, of PDs A and B; 2: another
/// domain's, of PD A): `len` bytes from byte `64 * i` of the initiator's buffer; a WRITE or
/// READ at byte `8 * off` of the target region of PD B when `key_b`, else of PD A (a READ
/// lands at byte `64 * i` of the initiator's sink).
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XrcMsg {
    pub kind: XrcKind,
    pub srq: u8,
    pub len: u16,
    pub off: u8,
    pub key_b: bool,
}

/// An XRC scenario on device `dev`: the first `n` messages; `recvs[k]` receives posted to
/// SRQ `k` (0 or 1) first and one to the foreign SRQ; buffers filled from `seed`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct XrcOp {
    pub dev: usize,
    pub seed: u8,
    pub n: u8,
    pub msgs: [XrcMsg; 4],
    pub recvs: [u8; 2],
}

impl XrcOp {
    /// The messages posted.
    pub fn posted(&self) -> &[XrcMsg] {
        &self.msgs[..usize::from(self.n).clamp(1, self.msgs.len())]
    }

    /// The receives posted to SRQ `k`: `recvs[k]` (at most four) for the domain's two, one
    /// for the foreign one.
    pub fn receives(&self, k: usize) -> usize {
        self.recvs.get(k).map_or(1, |r| usize::from(*r).min(4))
    }

    /// The initiator's buffer.
    pub fn src(&self) -> Vec<u8> {
        super::fill_pattern(XRC_SRC_LEN, self.seed)
    }

    /// The READ sink, four 64-byte slots.
    pub fn sink(&self) -> Vec<u8> {
        super::fill_pattern(4 * 64 + XRC_LEN, self.seed ^ 0x11)
    }

    /// Target region `b` (0: PD A's, 1: PD B's).
    pub fn target(&self, b: usize) -> Vec<u8> {
        super::fill_pattern(XRC_TARGET_LEN, self.seed ^ (0x20 + b as u8))
    }

    /// SRQ `k`'s receive buffers, its WQEs [`XRC_LEN`] apart (four of them).
    pub fn recv_buf(&self, k: usize) -> Vec<u8> {
        super::fill_pattern(4 * XRC_LEN, self.seed ^ (0x40 + k as u8))
    }
}

/// RTS and ERR as `enum ibv_qp_state` numbers them.
const RTS: u32 = 3;
const ERR: u32 = 6;

impl Model {
    /// What an [`XrcOp`] leaves.
    pub(super) fn xrc_step(&mut self, x: &XrcOp) -> Expect {
        if !self.xrc || self.mlx5_dev(x.dev).is_none() {
            return Expect::Unknown;
        }
        let src = x.src();
        let mut sink = x.sink();
        let mut targets = [x.target(0), x.target(1)];
        let mut bufs = [x.recv_buf(0), x.recv_buf(1), x.recv_buf(2)];
        let mut next = [0usize; 3];
        let (mut sent, mut got) = (Vec::new(), vec![Vec::new(), Vec::new(), Vec::new()]);
        let (mut ini, mut tgt) = (RTS, RTS);
        for (i, m) in x.posted().iter().enumerate() {
            let len = usize::from(m.len);
            let rdma = m.kind != XrcKind::Send;
            if m.srq > FOREIGN_SRQ || len > XRC_LEN || (rdma && len == 0) {
                return Expect::Unknown;
            }
            let cqe = |status: u32, opcode: Option<u32>| NetCqe::sent(i as u64, status, opcode);
            if ini == ERR {
                sent.push(cqe(wc_status::WR_FLUSH_ERR, None));
                continue;
            }
            // Item 188: an SRQ of another domain is an invalid request; no WQE is taken.
            // Item 189: the key must be of the named SRQ's PD (SRQ 0 of A, 1 of B). Either
            // error takes both QPs to ERR, as on RC (items 124, 125).
            let k = usize::from(m.srq);
            let status = if m.srq == FOREIGN_SRQ {
                wc_status::REM_INV_REQ_ERR
            } else if rdma && m.key_b != (k == 1) {
                wc_status::REM_ACCESS_ERR
            } else {
                wc_status::SUCCESS
            };
            if status != wc_status::SUCCESS {
                sent.push(cqe(status, None));
                (ini, tgt) = (ERR, ERR);
                continue;
            }
            let from = &src[64 * i..64 * i + len];
            let at = 8 * usize::from(m.off);
            let region = usize::from(m.key_b);
            match m.kind {
                XrcKind::Write => {
                    targets[region][at..at + len].copy_from_slice(from);
                    sent.push(cqe(wc_status::SUCCESS, Some(wc_opcode::RDMA_WRITE)));
                }
                XrcKind::Read => {
                    sink[64 * i..64 * i + len].copy_from_slice(&targets[region][at..at + len]);
                    sent.push(cqe(wc_status::SUCCESS, Some(wc_opcode::RDMA_READ)));
                }
                XrcKind::Send => {
                    // Item 187: the next WQE of the SRQ named, completed on its CQ (item 135).
                    let r = next[k];
                    if r >= x.receives(k) {
                        return Expect::Unknown;
                    }
                    next[k] += 1;
                    bufs[k][r * XRC_LEN..r * XRC_LEN + len].copy_from_slice(from);
                    sent.push(cqe(wc_status::SUCCESS, Some(wc_opcode::SEND)));
                    got[k].push(NetCqe {
                        recv: true,
                        wr_id: (10 * k + r) as u64,
                        status: wc_status::SUCCESS,
                        opcode: Some(wc_opcode::RECV),
                        byte_len: Some(len as u32),
                        imm: None,
                    });
                }
            }
        }
        sent.extend(got.into_iter().flatten());
        let [b0, b1, b2] = bufs;
        let [t0, t1] = targets;
        self.effects.outcome = Some(Outcome {
            wcs: sent,
            bytes: vec![
                ("srq 0", b0),
                ("srq 1", b1),
                ("foreign srq", b2),
                ("target A", t0),
                ("target B", t1),
                ("sink", sink),
            ],
            states: vec![ini, tgt],
            ..Outcome::default()
        });
        Expect::Ok(None)
    }
}

fn msg() -> BoxedStrategy<XrcMsg> {
    let kind = prop_oneof![3 => Just(XrcKind::Send), 2 => Just(XrcKind::Write), 2 => Just(XrcKind::Read)];
    let srq = prop_oneof![4 => Just(0u8), 4 => Just(1u8), 1 => Just(FOREIGN_SRQ)];
    let mismatch = prop_oneof![3 => Just(false), 1 => Just(true)];
    (kind, srq, 0u16..=XRC_LEN as u16, 0u8..64, mismatch)
        .prop_map(|(kind, srq, len, off, mismatch)| {
            let len = if kind == XrcKind::Send { len } else { len.max(1) };
            XrcMsg { kind, srq, len, off, key_b: (srq == 1) != mismatch }
        })
        .boxed()
}

/// XRC scenarios on the devices `devs`: each SRQ of the domain gets a WQE for every SEND
/// naming it, and one more now and then.
pub(super) fn strategy(devs: Vec<usize>) -> BoxedStrategy<Op> {
    (proptest::sample::select(devs), any::<u8>(), 1u8..=4, [msg(), msg(), msg(), msg()], [0u8..=1, 0u8..=1])
        .prop_map(|(dev, seed, n, msgs, extra)| {
            let mut x = XrcOp { dev, seed, n, msgs, recvs: [0; 2] };
            for (k, more) in extra.into_iter().enumerate() {
                let sends = x.posted().iter().filter(|m| m.kind == XrcKind::Send && usize::from(m.srq) == k).count();
                x.recvs[k] = (sends as u8 + more).min(4);
            }
            Op::Xrc(x)
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use mlx5_dv::{Caps, DeviceKind, wc_opcode, wc_status};

    use super::super::{Expect, Model, Op, Outcome};
    use super::{FOREIGN_SRQ, XRC_LEN, XrcKind, XrcMsg, XrcOp};

    fn predict(msgs: [XrcMsg; 4], n: u8, recvs: [u8; 2]) -> (Outcome, XrcOp) {
        let mut caps = Caps::default();
        caps.kernel.devx = Some(true);
        caps.kernel.mkey_update_tag = Some(true);
        let m = Model::new(&caps, vec![DeviceKind::Mlx5]).unwrap_or_else(|| unreachable!("known facts"));
        let mut m = m.with_uc_xrc(false, true);
        let x = XrcOp { dev: 0, seed: 5, n, msgs, recvs };
        assert_eq!(m.step(&Op::Xrc(x)), Expect::Ok(None));
        (m.effects().outcome.clone().unwrap_or_default(), x)
    }

    fn msg(kind: XrcKind, srq: u8, len: u16, off: u8, key_b: bool) -> XrcMsg {
        XrcMsg { kind, srq, len, off, key_b }
    }

    #[test]
    fn sends_land_in_the_srq_each_names_and_a_read_sees_an_earlier_write() {
        let msgs = [
            msg(XrcKind::Send, 1, 20, 0, false),
            msg(XrcKind::Send, 0, 30, 0, false),
            msg(XrcKind::Write, 1, 16, 2, true),
            msg(XrcKind::Read, 1, 24, 1, true),
        ];
        let (o, x) = predict(msgs, 4, [1, 2]);
        let got: Vec<_> = o.wcs.iter().map(|c| (c.recv, c.wr_id, c.status, c.opcode, c.byte_len)).collect();
        let ok = |id, op| (false, id, 0, Some(op), None);
        assert_eq!(
            got,
            [
                ok(0, wc_opcode::SEND),
                ok(1, wc_opcode::SEND),
                ok(2, wc_opcode::RDMA_WRITE),
                ok(3, wc_opcode::RDMA_READ),
                (true, 0, 0, Some(wc_opcode::RECV), Some(30)),
                (true, 10, 0, Some(wc_opcode::RECV), Some(20)),
            ]
        );
        let bytes = |name: &str| o.bytes.iter().find(|(n, _)| *n == name).map(|(_, b)| b.clone()).unwrap_or_default();
        let src = x.src();
        assert_eq!(bytes("srq 1")[..20], src[..20]);
        assert_eq!(bytes("srq 0")[..30], src[64..94]);
        assert_eq!(bytes("srq 0")[XRC_LEN..], x.recv_buf(0)[XRC_LEN..]);
        let target_b = bytes("target B");
        assert_eq!(target_b[16..32], src[128..144]);
        assert_eq!(bytes("sink")[192..216], target_b[8..32], "the READ after the WRITE");
        assert_eq!(bytes("target A"), x.target(0));
        assert_eq!(o.states, [3, 3]);
    }

    #[test]
    fn another_domains_srq_or_another_pds_key_fails_both_qps() {
        for (bad, status) in [
            (msg(XrcKind::Send, FOREIGN_SRQ, 8, 0, false), wc_status::REM_INV_REQ_ERR),
            (msg(XrcKind::Write, FOREIGN_SRQ, 8, 0, false), wc_status::REM_INV_REQ_ERR),
            (msg(XrcKind::Write, 0, 8, 0, true), wc_status::REM_ACCESS_ERR),
            (msg(XrcKind::Read, 1, 8, 0, false), wc_status::REM_ACCESS_ERR),
        ] {
            let msgs = [bad, msg(XrcKind::Send, 0, 8, 0, false), bad, bad];
            let (o, x) = predict(msgs, 2, [1, 0]);
            let got: Vec<_> = o.wcs.iter().map(|c| (c.recv, c.wr_id, c.status)).collect();
            assert_eq!(got, [(false, 0, status), (false, 1, wc_status::WR_FLUSH_ERR)], "{bad:?}");
            assert_eq!(o.states, [6, 6], "{bad:?}");
            for (k, name) in ["srq 0", "srq 1", "foreign srq"].into_iter().enumerate() {
                assert!(o.bytes.contains(&(name, x.recv_buf(k))), "{bad:?}: {name}");
            }
        }
    }

    #[test]
    fn a_send_to_an_empty_srq_and_empty_rdma_are_not_said() {
        let mut caps = Caps::default();
        caps.kernel.devx = Some(true);
        caps.kernel.mkey_update_tag = Some(true);
        let m = Model::new(&caps, vec![DeviceKind::Mlx5]).unwrap_or_else(|| unreachable!("known facts"));
        let op = |m: XrcMsg, recvs: [u8; 2]| Op::Xrc(XrcOp { dev: 0, seed: 0, n: 1, msgs: [m; 4], recvs });
        let send = msg(XrcKind::Send, 0, 8, 0, false);
        // A SEND to an SRQ with no WQE, an empty WRITE, and any scenario without XRC.
        for (op, xrc) in [
            (op(send, [0, 0]), true),
            (op(msg(XrcKind::Write, 0, 0, 0, false), [0, 0]), true),
            (op(send, [1, 0]), false),
        ] {
            assert_eq!(m.clone().with_uc_xrc(false, xrc).step(&op), Expect::Unknown, "{op:?}");
        }
    }
}
