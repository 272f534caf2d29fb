//! The datagram family: two UD QPs of one device, the sender posting one to four SENDs (with
//! or without an immediate, with the receiver's Q_Key or another, a few hundred bytes or more
//! than any MTU) in one `ibv_post_send` list, the receiver with none to four receives posted
//! (some too short for the GRH area and the payload): each side's completions, the receive
//! buffers' bytes, and both QPs' states. Written from `docs/behaviour.md` items 146–150.
//!
//! Not generated: lengths between 257 bytes and the MTU (the model does not know the port's
//! MTU: 256 bytes fit every one, 4097 none), and the GRH area's bytes (item 147 gives the
//! IPv4 header's place, not a value the model computes): they are not compared.

use mlx5_dv::{wc_opcode, wc_status};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::outcome::{NetCqe, Outcome};
use super::{Expect, Model, Op};

/// A receive buffer: the 40-byte GRH area and room for the longest payload generated.
pub const RECV_LEN: usize = GRH + 256;
/// A short receive: the GRH area and 8 bytes.
pub const SHORT_LEN: usize = GRH + 8;
/// The GRH area at the head of a UD receive buffer (item 147).
pub const GRH: usize = 40;
/// A length past every port MTU (4096 at most).
pub const PAST_MTU: u16 = 4097;
/// The sender's buffer: message `i` gathers from byte `8 * i`.
pub const SEND_BUF: usize = PAST_MTU as usize + 32;
/// The receiver's Q_Key, and the other one a message may carry (top bits clear: a Q_Key with
/// its top bit set stands for the sender's own, item 146).
pub const QKEY: u32 = 0x1111_1111;
/// See [`QKEY`].
pub const OTHER_QKEY: u32 = 0x2222_2222;

/// One datagram: `len` bytes from byte `8 * i` of the sender's buffer, with immediate `i + 1`
/// when `imm`, to the receiver's Q_Key unless `wrong_qkey`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdMsg {
    pub len: u16,
    pub imm: bool,
    pub wrong_qkey: bool,
}

/// A datagram scenario on device `dev`: the first `n` messages; `recvs` receives posted
/// first, receive `r` short ([`SHORT_LEN`]) when bit `r` of `short` is set, else
/// [`RECV_LEN`] long; the buffers filled with `fill_pattern` of `seed`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdOp {
    pub dev: usize,
    pub seed: u8,
    pub n: u8,
    pub msgs: [UdMsg; 4],
    pub recvs: u8,
    pub short: u8,
}

impl UdOp {
    /// The messages posted.
    pub fn posted(&self) -> &[UdMsg] {
        &self.msgs[..usize::from(self.n).clamp(1, self.msgs.len())]
    }

    /// The receives posted (at most four).
    pub fn receives(&self) -> usize {
        usize::from(self.recvs.min(4))
    }

    /// Receive `r`'s length.
    pub fn recv_len(&self, r: usize) -> usize {
        if self.short & (1 << r) != 0 { SHORT_LEN } else { RECV_LEN }
    }

    /// The sender's buffer.
    pub fn send_buf(&self) -> Vec<u8> {
        super::fill_pattern(SEND_BUF, self.seed)
    }

    /// The receive buffers, one after the other ([`RECV_LEN`] apart), before the traffic.
    pub fn recv_bufs(&self) -> Vec<u8> {
        super::fill_pattern(RECV_LEN * self.receives(), self.seed ^ 0x33)
    }

    /// Message `i`'s immediate, when it has one.
    pub fn imm(i: usize) -> u32 {
        i as u32 + 1
    }
}

impl Model {
    /// What a [`UdOp`] leaves.
    pub(super) fn ud_step(&mut self, x: &UdOp) -> Expect {
        if !self.datagrams || self.mlx5_dev(x.dev).is_none() {
            return Expect::Unknown;
        }
        let send = x.send_buf();
        let mut bufs = x.recv_bufs();
        let mut open = Vec::new();
        let (mut sent, mut got) = (Vec::new(), Vec::new());
        // RTS (3) until an error; ERR is 6.
        let (mut sender, mut receiver) = (3u32, 3u32);
        let mut next_recv = 0;
        for (i, m) in x.posted().iter().enumerate() {
            let cqe = |status: u32, opcode: Option<u32>| NetCqe::sent(i as u64, status, opcode);
            if sender == 6 {
                sent.push(cqe(wc_status::WR_FLUSH_ERR, None));
                continue;
            }
            let len = usize::from(m.len);
            if m.len > 256 && m.len != PAST_MTU {
                return Expect::Unknown;
            }
            // Item 149: past the MTU nothing is sent and the sender goes to ERR.
            if m.len == PAST_MTU {
                sent.push(cqe(wc_status::LOC_LEN_ERR, None));
                sender = 6;
                continue;
            }
            // Item 146: the WQE completes once the packet left, whatever becomes of it.
            sent.push(cqe(wc_status::SUCCESS, Some(wc_opcode::SEND)));
            // Item 148: another Q_Key, no receive left, or a receiver in ERR: dropped.
            if m.wrong_qkey || receiver == 6 || next_recv >= x.receives() {
                continue;
            }
            let r = next_recv;
            next_recv += 1;
            let at = r * RECV_LEN;
            let recv = |status: u32, opcode: Option<u32>, byte_len: Option<u32>, imm: Option<u32>| NetCqe {
                recv: true,
                wr_id: r as u64,
                status,
                opcode,
                byte_len,
                imm,
            };
            // Item 150: the GRH area and the payload must fit; else the receiver goes to ERR
            // (what it wrote of the buffer is not published).
            if GRH + len > x.recv_len(r) {
                got.push(recv(wc_status::LOC_LEN_ERR, None, None, None));
                open.push(("receive", at..at + RECV_LEN));
                receiver = 6;
                continue;
            }
            // Item 147: the GRH area first (not compared), then the payload; byte_len + 40.
            let from = 8 * i;
            bufs[at + GRH..at + GRH + len].copy_from_slice(&send[from..from + len]);
            open.push(("receive", at..at + GRH));
            let imm = m.imm.then(|| UdOp::imm(i));
            got.push(recv(wc_status::SUCCESS, Some(wc_opcode::RECV), Some((GRH + len) as u32), imm));
        }
        // A receiver in ERR flushes the receives it still has.
        if receiver == 6 {
            for r in next_recv..x.receives() {
                got.push(NetCqe {
                    recv: true,
                    wr_id: r as u64,
                    status: wc_status::WR_FLUSH_ERR,
                    opcode: None,
                    byte_len: None,
                    imm: None,
                });
                open.push(("receive", r * RECV_LEN..(r + 1) * RECV_LEN));
            }
        }
        sent.extend(got);
        self.effects.outcome = Some(Outcome {
            wcs: sent,
            bytes: vec![("receive", bufs)],
            states: vec![sender, receiver],
            open,
            ..Outcome::default()
        });
        Expect::Ok(None)
    }
}

fn msg() -> BoxedStrategy<UdMsg> {
    let len = prop_oneof![1 => Just(0u16), 8 => 1u16..=256, 2 => Just(256u16), 1 => Just(PAST_MTU)];
    let wrong = prop_oneof![6 => Just(false), 1 => Just(true)];
    (len, any::<bool>(), wrong).prop_map(|(len, imm, wrong_qkey)| UdMsg { len, imm, wrong_qkey }).boxed()
}

/// Datagram scenarios on the devices `devs`.
pub(super) fn strategy(devs: Vec<usize>) -> BoxedStrategy<Op> {
    let short = prop_oneof![1 => Just(0u8), 1 => 1u8..16];
    (proptest::sample::select(devs), any::<u8>(), 1u8..=4, [msg(), msg(), msg(), msg()], 0u8..=4, short)
        .prop_map(|(dev, seed, n, msgs, recvs, short)| Op::Ud(UdOp { dev, seed, n, msgs, recvs, short }))
        .boxed()
}
