//! The unreliable-connected family: two UC QPs of one device connected to each other, the
//! requester posting one to four messages (SEND, SEND_WITH_IMM, RDMA WRITE with a good or a
//! refused R_Key, RDMA_WRITE_WITH_IMM, RDMA READ) in one `ibv_post_send` list, the responder
//! with none to four receives posted: each side's completions, the responder's receive buffers
//! and target memory, and both QPs' states. Written from `docs/behaviour.md` items 141–145.
//!
//! Not generated: a refused R_Key on a WRITE with immediate or of length 0, and a message
//! longer than a receive buffer (the items do not say what the responder does with them).
//! Where a WRITE with immediate finds no receive, the items say it is dropped but not whether
//! its bytes were placed first: its target range is left open.

use mlx5_dv::{wc_opcode, wc_status};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::outcome::{NetCqe, Outcome};
use super::{Expect, Model, Op};

/// The longest message: more than one packet at every path MTU.
pub const UC_LONG: u16 = 4500;
/// A receive buffer: room for the longest message.
pub const UC_RECV_LEN: usize = 4608;
/// The responder's target region for the WRITEs (offsets up to 63 × 8 bytes, then a long one).
pub const UC_TARGET_LEN: usize = 512 + UC_LONG as usize;
/// The requester's buffer: message `i` gathers from byte `8 * i`.
pub const UC_SEND_BUF: usize = UC_LONG as usize + 32;

/// What a message is.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum UcKind {
    #[default]
    Send,
    SendImm,
    Write,
    WriteImm,
    Read,
}

/// One message: `len` bytes from byte `8 * i` of the requester's buffer; a WRITE's (or READ's)
/// remote address is byte `8 * off` of the target, its R_Key refused when `bad_rkey`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UcMsg {
    pub kind: UcKind,
    pub len: u16,
    pub off: u8,
    pub bad_rkey: bool,
}

/// A UC scenario on device `dev`: the first `n` messages, `recvs` receives posted first, the
/// buffers filled with `fill_pattern` of `seed`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UcOp {
    pub dev: usize,
    pub seed: u8,
    pub n: u8,
    pub msgs: [UcMsg; 4],
    pub recvs: u8,
}

impl UcOp {
    /// The messages posted.
    pub fn posted(&self) -> &[UcMsg] {
        &self.msgs[..usize::from(self.n).clamp(1, self.msgs.len())]
    }

    /// The receives posted (at most four).
    pub fn receives(&self) -> usize {
        usize::from(self.recvs.min(4))
    }

    /// The requester's buffer.
    pub fn send_buf(&self) -> Vec<u8> {
        super::fill_pattern(UC_SEND_BUF, self.seed)
    }

    /// The responder's receive buffers, one after the other ([`UC_RECV_LEN`] apart).
    pub fn recv_bufs(&self) -> Vec<u8> {
        super::fill_pattern(UC_RECV_LEN * self.receives(), self.seed ^ 0x5a)
    }

    /// The responder's target region.
    pub fn target(&self) -> Vec<u8> {
        super::fill_pattern(UC_TARGET_LEN, self.seed ^ 0xa5)
    }

    /// Message `i`'s immediate, when it has one.
    pub fn imm(i: usize) -> u32 {
        0x100 + i as u32
    }
}

/// RTS and ERR as `enum ibv_qp_state` numbers them.
const RTS: u32 = 3;
const ERR: u32 = 6;

impl Model {
    /// What a [`UcOp`] leaves.
    pub(super) fn uc_step(&mut self, x: &UcOp) -> Expect {
        if !self.uc || self.mlx5_dev(x.dev).is_none() {
            return Expect::Unknown;
        }
        let send = x.send_buf();
        let (mut bufs, mut target) = (x.recv_bufs(), x.target());
        let mut open = Vec::new();
        let (mut sent, mut got) = (Vec::new(), Vec::new());
        let mut requester = RTS;
        let mut next_recv = 0;
        for (i, m) in x.posted().iter().enumerate() {
            let len = usize::from(m.len);
            let refused = m.bad_rkey && m.kind == UcKind::Write && len > 0;
            if m.bad_rkey && !refused || len > UC_RECV_LEN || 8 * usize::from(m.off) + len > UC_TARGET_LEN {
                return Expect::Unknown;
            }
            let cqe = |status: u32, opcode: Option<u32>| NetCqe::sent(i as u64, status, opcode);
            if requester == ERR {
                sent.push(cqe(wc_status::WR_FLUSH_ERR, None));
                continue;
            }
            // Item 144: the device refuses a READ; the requester goes to ERR.
            if m.kind == UcKind::Read {
                sent.push(cqe(wc_status::LOC_QP_OP_ERR, None));
                requester = ERR;
                continue;
            }
            // Item 142: the WQE completes once its packets left.
            let write = matches!(m.kind, UcKind::Write | UcKind::WriteImm);
            sent.push(cqe(wc_status::SUCCESS, Some(if write { wc_opcode::RDMA_WRITE } else { wc_opcode::SEND })));
            let from = &send[8 * i..8 * i + len];
            let at = 8 * usize::from(m.off);
            // Item 145: a refused R_Key drops the WRITE; memory and QPs stay as they were.
            if refused {
                continue;
            }
            if m.kind == UcKind::Write {
                target[at..at + len].copy_from_slice(from);
                continue;
            }
            // Item 145: a SEND or WRITE with immediate that finds no receive is dropped.
            if next_recv >= x.receives() {
                if m.kind == UcKind::WriteImm {
                    open.push(("target", at..at + len));
                }
                continue;
            }
            let r = next_recv;
            next_recv += 1;
            let imm = matches!(m.kind, UcKind::SendImm | UcKind::WriteImm).then(|| UcOp::imm(i));
            // Item 141: placed and completed as on RC; WRITE_WITH_IMM takes a receive and
            // leaves its buffer as it was.
            let opcode = if write {
                target[at..at + len].copy_from_slice(from);
                wc_opcode::RECV_RDMA_WITH_IMM
            } else {
                bufs[r * UC_RECV_LEN..r * UC_RECV_LEN + len].copy_from_slice(from);
                wc_opcode::RECV
            };
            got.push(NetCqe {
                recv: true,
                wr_id: r as u64,
                status: wc_status::SUCCESS,
                opcode: Some(opcode),
                byte_len: Some(len as u32),
                imm,
            });
        }
        sent.extend(got);
        self.effects.outcome = Some(Outcome {
            wcs: sent,
            bytes: vec![("receive", bufs), ("target", target)],
            states: vec![requester, RTS],
            open,
            ..Outcome::default()
        });
        Expect::Ok(None)
    }
}

fn msg() -> BoxedStrategy<UcMsg> {
    let kind = prop_oneof![
        3 => Just(UcKind::Send),
        2 => Just(UcKind::SendImm),
        3 => Just(UcKind::Write),
        2 => Just(UcKind::WriteImm),
        1 => Just(UcKind::Read),
    ];
    let len = prop_oneof![1 => Just(0u16), 8 => 1u16..=300, 1 => Just(UC_LONG)];
    let bad = prop_oneof![4 => Just(false), 1 => Just(true)];
    (kind, len, 0u8..64, bad)
        .prop_map(|(kind, len, off, bad)| UcMsg { kind, len, off, bad_rkey: bad && kind == UcKind::Write && len > 0 })
        .boxed()
}

/// UC scenarios on the devices `devs`.
pub(super) fn strategy(devs: Vec<usize>) -> BoxedStrategy<Op> {
    (proptest::sample::select(devs), any::<u8>(), 1u8..=4, [msg(), msg(), msg(), msg()], 0u8..=4)
        .prop_map(|(dev, seed, n, msgs, recvs)| Op::Uc(UcOp { dev, seed, n, msgs, recvs }))
        .boxed()
}

#[cfg(test)]
mod tests {
    use mlx5_dv::{Caps, DeviceKind, wc_opcode, wc_status};

    use super::super::{Expect, Model, Op};
    use super::{UC_RECV_LEN, UcKind, UcMsg, UcOp};

    fn model(uc: bool) -> Model {
        let mut caps = Caps::default();
        caps.kernel.devx = Some(true);
        caps.kernel.mkey_update_tag = Some(true);
        Model::new(&caps, vec![DeviceKind::Mlx5]).unwrap_or_else(|| unreachable!("known facts")).with_uc_xrc(uc, false)
    }

    fn msg(kind: UcKind, len: u16, off: u8, bad_rkey: bool) -> UcMsg {
        UcMsg { kind, len, off, bad_rkey }
    }

    /// What the model says of `msgs` with `recvs` receives: (side, wr_id, status, opcode,
    /// byte_len, imm) of each completion, the QP states, the two regions and the open ranges.
    fn predict(msgs: [UcMsg; 4], n: u8, recvs: u8) -> (super::Outcome, UcOp) {
        let x = UcOp { dev: 0, seed: 3, n, msgs, recvs };
        let mut m = model(true);
        assert_eq!(m.step(&Op::Uc(x)), Expect::Ok(None));
        (m.effects().outcome.clone().unwrap_or_default(), x)
    }

    #[test]
    fn dropped_messages_leave_no_trace_and_receives_go_in_order() {
        let msgs = [
            msg(UcKind::Write, 16, 2, true),
            msg(UcKind::Send, 10, 0, false),
            msg(UcKind::WriteImm, 8, 4, false),
            msg(UcKind::Send, 5, 0, false),
        ];
        let (o, x) = predict(msgs, 4, 2);
        let sent: Vec<_> = o.wcs.iter().filter(|c| !c.recv).map(|c| (c.wr_id, c.status, c.opcode)).collect();
        let write = Some(wc_opcode::RDMA_WRITE);
        let send = Some(wc_opcode::SEND);
        assert_eq!(sent, [(0, 0, write), (1, 0, send), (2, 0, write), (3, 0, send)]);
        let got: Vec<_> = o.wcs.iter().filter(|c| c.recv).map(|c| (c.wr_id, c.opcode, c.byte_len, c.imm)).collect();
        // The refused WRITE takes nothing; the last SEND finds no receive left.
        assert_eq!(
            got,
            [
                (0, Some(wc_opcode::RECV), Some(10), None),
                (1, Some(wc_opcode::RECV_RDMA_WITH_IMM), Some(8), Some(UcOp::imm(2)))
            ]
        );
        assert_eq!(o.states, [3, 3]);
        let (receive, target) = (&o.bytes[0].1, &o.bytes[1].1);
        let src = x.send_buf();
        assert_eq!(receive[..10], src[8..18]);
        assert_eq!(receive[UC_RECV_LEN..], x.recv_bufs()[UC_RECV_LEN..], "the second receive's buffer is not written");
        assert_eq!(target[32..40], src[16..24]);
        assert_eq!(target[16..32], x.target()[16..32], "the refused WRITE left the target");
        assert!(o.open.is_empty());
    }

    #[test]
    fn a_read_fails_the_requester_and_flushes_what_follows() {
        let msgs = [
            msg(UcKind::Send, 4, 0, false),
            msg(UcKind::Read, 8, 0, false),
            msg(UcKind::Write, 8, 0, false),
            msg(UcKind::WriteImm, 8, 1, false),
        ];
        let (o, x) = predict(msgs, 4, 0);
        let sent: Vec<_> = o.wcs.iter().map(|c| (c.recv, c.wr_id, c.status)).collect();
        let flush = wc_status::WR_FLUSH_ERR;
        assert_eq!(sent, [(false, 0, 0), (false, 1, wc_status::LOC_QP_OP_ERR), (false, 2, flush), (false, 3, flush)]);
        assert_eq!(o.states, [6, 3]);
        assert_eq!(o.bytes[1].1, x.target(), "nothing written after the READ");
    }

    #[test]
    fn a_write_with_immediate_and_no_receive_leaves_its_range_open() {
        let msgs = [msg(UcKind::WriteImm, 24, 3, false); 4];
        let (o, _) = predict(msgs, 1, 0);
        assert_eq!(o.open, [("target", 24..48)]);
        assert!(o.wcs.iter().all(|c| !c.recv));
    }

    #[test]
    fn unsaid_outcomes_are_unknown_and_no_uc_means_none() {
        let x = |m: UcMsg| Op::Uc(UcOp { dev: 0, seed: 0, n: 1, msgs: [m; 4], recvs: 1 });
        for m in [msg(UcKind::WriteImm, 8, 0, true), msg(UcKind::Write, 0, 0, true), msg(UcKind::Send, 5000, 0, false)]
        {
            assert_eq!(model(true).step(&x(m)), Expect::Unknown, "{m:?}");
        }
        assert_eq!(model(false).step(&x(msg(UcKind::Send, 8, 0, false))), Expect::Unknown);
    }
}
