//! The network family: two RC QPs on two devices (or one) whose traffic the simulator carries
//! as RoCE v2 packets on its fabric in memory, in simulated time, with network fault rules
//! (`FaultRule::Network`) on what each port sends; a chain of up to four messages (RDMA WRITE,
//! WRITE with immediate, SEND, SEND with immediate, RDMA READ, each of up to four 256-byte
//! packets) posted in one call. What the model predicts, from the IBTA's reliable service as
//! items 115–120 and 251–255 state it:
//!
//! - faults the transport recovers from (at most three packets dropped, duplicated,
//!   reordered, delayed or corrupted, with `retry_cnt` 7; every packet duplicated): every WR
//!   completes once, successfully, in order; each message takes effect once (a SEND one
//!   receive), and the memory holds exactly the data (items 115, 116, 119, 120, 251);
//! - a request packet lost every time it is sent (by opcode or PSN): the WRs before its
//!   message complete, its WR ends in `IBV_WC_RETRY_EXC_ERR`, the rest are flushed, the
//!   requester is in ERR, and the responder executed exactly the messages before it (items
//!   117, 252); every answer lost, for a lone message: executed once, `RETRY_EXC_ERR` (253);
//! - fewer receives than messages that need one, with `rnr_retry` below 7: the first message
//!   without a receive ends in `IBV_WC_RNR_RETRY_EXC_ERR`, the rest flushed (items 118, 254).
//!
//! Left open, so never generated: which copy of an answer a rule acts on (ACKs may be
//! coalesced), faults and RNR NAKs together, rules that act on every packet other than drops
//! and duplicates, and the bytes of the one message a fatal fault cuts short (a responder may
//! place part of a message it never completes).

use mlx5_dv::net_fault::opcode as bth;
use mlx5_dv::{NetAction, QpState, wc_opcode, wc_status};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::outcome::{NetCqe, Outcome};
use super::{Expect, Model, fill_pattern};

/// Each message's region in the requester's, the responder's and the receive buffer.
pub const SLOT: usize = 1024;
/// The path MTU in bytes (`IBV_MTU_256`).
pub const MTU: usize = 256;
/// The most messages in one scenario.
pub const MSGS: usize = 4;
/// The ACK timeout every scenario's QPs take (4.096 µs × 2^8, about 1 ms).
pub const TIMEOUT: u8 = 8;
/// The most packets finite rules may act on: each costs at most two retries of `retry_cnt`
/// 7 (a loss, and the sequence error or timeout around its resend).
const FINITE: u32 = 3;

/// A message's operation.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MsgKind {
    Write,
    WriteImm,
    Send,
    SendImm,
    Read,
}

/// Message `i` of a scenario: `len` (1 to [`SLOT`]) bytes between slot `i` of the requester's
/// buffer and slot `i` of the responder's (WRITE, READ) or the next receive's slot (SEND).
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetMsg {
    pub kind: MsgKind,
    pub len: u16,
}

/// A network fault rule: on the requests the requester's port sends to the responder's QP,
/// or (`answers`) on what the responder's port sends back (ACKs, NAKs, READ responses).
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetRule {
    pub answers: bool,
    pub action: NetAction,
    pub opcode: Option<u8>,
    /// The PSN of packet `.1` (modulo its packets) of message `.0` (modulo the messages).
    pub at: Option<(u8, u8)>,
    pub skip: u32,
    /// `None`: every matching packet.
    pub times: Option<u32>,
    /// `(ppm, seed)`: each matching packet with this probability.
    pub random: Option<(u32, u64)>,
}

impl NetRule {
    /// A rule a scenario does not install (it fills the unused places of [`NetOp::rule`]).
    pub const NONE: NetRule = NetRule {
        answers: false,
        action: NetAction::Drop,
        opcode: None,
        at: None,
        skip: 0,
        times: Some(1),
        random: None,
    };
}

/// A network scenario on device `dev` (the requester) and `peer` (the responder): QPs
/// connected with path MTU 256, ACK timeout [`TIMEOUT`], `retry_cnt`, `rnr_retry`, both
/// directions' PSNs starting at `psn`; `recvs` receives posted; the first `rules` of `rule`
/// installed; the first `n` messages posted in one chain, each signaled.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetOp {
    pub dev: usize,
    pub peer: usize,
    pub n: u8,
    pub msgs: [NetMsg; MSGS],
    pub recvs: u8,
    pub rules: u8,
    pub rule: [NetRule; 3],
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub psn: u32,
    pub seed: u8,
    pub imm: u32,
}

/// The regions a scenario reads back, by name.
pub const REGIONS: [&str; 3] = ["requester", "responder", "receives"];

fn packets(len: usize) -> usize {
    len.div_ceil(MTU).max(1)
}

impl MsgKind {
    fn needs_recv(self) -> bool {
        matches!(self, MsgKind::WriteImm | MsgKind::Send | MsgKind::SendImm)
    }

    /// The BTH opcodes of a message of `len` bytes (IBTA table 38), in order.
    fn opcodes(self, len: usize) -> Vec<u8> {
        let (first, middle, last, only, last_imm, only_imm) = match self {
            MsgKind::Read => return vec![bth::READ_REQUEST],
            MsgKind::Write | MsgKind::WriteImm => (
                bth::WRITE_FIRST,
                bth::WRITE_MIDDLE,
                bth::WRITE_LAST,
                bth::WRITE_ONLY,
                bth::WRITE_LAST_IMM,
                bth::WRITE_ONLY_IMM,
            ),
            MsgKind::Send | MsgKind::SendImm => (
                bth::SEND_FIRST,
                bth::SEND_MIDDLE,
                bth::SEND_LAST,
                bth::SEND_ONLY,
                bth::SEND_LAST_IMM,
                bth::SEND_ONLY_IMM,
            ),
        };
        let imm = matches!(self, MsgKind::WriteImm | MsgKind::SendImm);
        let n = packets(len);
        if n == 1 {
            return vec![if imm { only_imm } else { only }];
        }
        let mut v = vec![first];
        v.extend(std::iter::repeat_n(middle, n - 2));
        v.push(if imm { last_imm } else { last });
        v
    }
}

impl NetOp {
    /// The messages posted.
    pub fn msgs(&self) -> &[NetMsg] {
        &self.msgs[..usize::from(self.n).clamp(1, MSGS)]
    }

    /// The rules installed.
    pub fn rules(&self) -> &[NetRule] {
        &self.rule[..usize::from(self.rules).min(3)]
    }

    fn len(&self, i: usize) -> usize {
        usize::from(self.msgs[i].len).clamp(1, SLOT)
    }

    /// The PSNs message `i` takes: a READ one per response packet (IBTA 9.7.1).
    fn span(&self, i: usize) -> u32 {
        packets(self.len(i)) as u32
    }

    /// The first PSN of message `i`.
    pub fn first_psn(&self, i: usize) -> u32 {
        (0..i).fold(self.psn, |p, j| p.wrapping_add(self.span(j))) & 0xff_ffff
    }

    /// The PSN a rule's `at` names.
    pub fn rule_psn(&self, at: (u8, u8)) -> u32 {
        let i = usize::from(at.0) % self.msgs().len();
        (self.first_psn(i) + u32::from(at.1) % self.span(i)) & 0xff_ffff
    }

    /// The immediate of message `i`.
    pub fn imm_of(&self, i: usize) -> u32 {
        self.imm.wrapping_add(i as u32)
    }

    /// Whether a rule matches some packet of message `i` (requests).
    fn hits(&self, r: &NetRule, i: usize) -> bool {
        let ops = self.msgs[i].kind.opcodes(self.len(i));
        (0..ops.len()).any(|p| {
            let psn = (self.first_psn(i) + p as u32) & 0xff_ffff;
            r.opcode.is_none_or(|o| o == ops[p]) && r.at.is_none_or(|a| self.rule_psn(a) == psn)
        })
    }

    /// The first message that finds no receive posted.
    fn rnr_victim(&self) -> Option<usize> {
        (0..self.msgs().len()).filter(|i| self.msgs[*i].kind.needs_recv()).nth(usize::from(self.recvs))
    }

    /// Which message fails and how, or `None` when every one completes; `Err` when the docs
    /// leave the outcome open.
    fn fate(&self) -> Result<Option<(usize, u32)>, ()> {
        let rules = self.rules();
        let fatal: Vec<&NetRule> =
            rules.iter().filter(|r| r.times.is_none() && r.action != NetAction::Duplicate).collect();
        let finite: u32 = rules.iter().filter_map(|r| r.times).sum();
        if rules.iter().any(|r| {
            r.times == Some(0)
                || matches!(r.action, NetAction::Corrupt { offset: 4, .. } | NetAction::Corrupt { xor: 0, .. })
        }) {
            return Err(());
        }
        if let Some(k) = self.rnr_victim() {
            // Item 254: no rule at all, and an RNR retry count that ends. Messages already sent
            // after the NAKed one meet a sequence error NAK, a retry of `retry_cnt`'s: which
            // count runs out first is open unless none follows or `retry_cnt` outlasts.
            let last = k + 1 == self.msgs().len();
            let ends = self.rnr_retry < 7 && (last || (self.retry_cnt == 7 && self.rnr_retry <= 3));
            return if rules.is_empty() && ends { Ok(Some((k, wc_status::RNR_RETRY_EXC_ERR))) } else { Err(()) };
        }
        match fatal.as_slice() {
            [] if finite == 0 || (finite <= FINITE && self.retry_cnt == 7) => Ok(None),
            [r] if rules.len() == 1 && r.skip == 0 && r.random.is_none() => {
                if !matches!(r.action, NetAction::Drop | NetAction::Corrupt { .. }) {
                    return Err(());
                }
                if r.answers {
                    // Item 253: every answer lost, for a lone message.
                    return if self.msgs().len() == 1 && r.opcode.is_none() && r.at.is_none() {
                        Ok(Some((0, wc_status::RETRY_EXC_ERR)))
                    } else {
                        Err(())
                    };
                }
                // Item 252: the first message with a packet the rule matches never gets through.
                Ok((0..self.msgs().len()).find(|i| self.hits(r, *i)).map(|k| (k, wc_status::RETRY_EXC_ERR)))
            }
            _ => Err(()),
        }
    }

    /// What the scenario leaves, or `None` where the docs leave it open.
    pub fn outcome(&self) -> Option<Outcome> {
        let fate = self.fate().ok()?;
        let all = SLOT * MSGS;
        let mut req = fill_pattern(all, self.seed);
        let mut resp = fill_pattern(all, self.seed ^ 0x5a);
        let mut rcv = fill_pattern(all, self.seed ^ 0xa5);
        let mut wcs = Vec::new();
        let mut recv_wcs = Vec::new();
        let mut open = Vec::new();
        let mut next_recv = 0usize;
        // Every answer lost: the lone message still took effect once (item 253).
        let executed = |i: usize| match fate {
            Some((k, _)) => i < k || (i == k && self.rules().iter().any(|r| r.answers)),
            None => true,
        };
        for (i, m) in self.msgs().iter().enumerate() {
            let len = self.len(i);
            let at = i * SLOT..i * SLOT + len;
            let wr_id = i as u64 + 1;
            let status = match fate {
                Some((k, s)) if k == i => s,
                Some((k, _)) if k < i => wc_status::WR_FLUSH_ERR,
                _ => wc_status::SUCCESS,
            };
            let opcode = match m.kind {
                MsgKind::Write | MsgKind::WriteImm => wc_opcode::RDMA_WRITE,
                MsgKind::Send | MsgKind::SendImm => wc_opcode::SEND,
                MsgKind::Read => wc_opcode::RDMA_READ,
            };
            let ok = status == wc_status::SUCCESS;
            let byte_len = (ok && m.kind == MsgKind::Read).then_some(len as u32);
            wcs.push(NetCqe { recv: false, wr_id, status, opcode: ok.then_some(opcode), byte_len, imm: None });
            let recv_slot = m.kind.needs_recv().then(|| {
                next_recv += 1;
                next_recv - 1
            });
            if fate.is_some_and(|(k, _)| k == i) {
                // The message cut short: what it placed is open (item 252).
                open.push(("responder", at.clone()));
                open.push(("requester", at.clone()));
                if let Some(j) = recv_slot {
                    open.push(("receives", j * SLOT..(j + 1) * SLOT));
                }
            }
            if !executed(i) {
                continue;
            }
            match m.kind {
                MsgKind::Write | MsgKind::WriteImm => resp[at.clone()].copy_from_slice(&req[at.clone()]),
                MsgKind::Read if ok => req[at.clone()].copy_from_slice(&resp[at.clone()]),
                MsgKind::Read => {}
                MsgKind::Send | MsgKind::SendImm => {
                    let j = recv_slot.unwrap_or_default();
                    rcv[j * SLOT..j * SLOT + len].copy_from_slice(&req[at.clone()]);
                }
            }
            if let Some(j) = recv_slot {
                let (opcode, byte_len) = match m.kind {
                    MsgKind::WriteImm => (wc_opcode::RECV_RDMA_WITH_IMM, len as u32),
                    _ => (wc_opcode::RECV, len as u32),
                };
                let imm = matches!(m.kind, MsgKind::WriteImm | MsgKind::SendImm).then(|| self.imm_of(i));
                recv_wcs.push(NetCqe {
                    recv: true,
                    wr_id: 1 << 63 | j as u64,
                    status: wc_status::SUCCESS,
                    opcode: Some(opcode),
                    byte_len: Some(byte_len),
                    imm,
                });
            }
        }
        wcs.extend(recv_wcs);
        let requester = if fate.is_some() { QpState::Err } else { QpState::Rts };
        Some(Outcome {
            wcs,
            states: vec![requester as u32, QpState::Rts as u32],
            bytes: vec![(REGIONS[0], req), (REGIONS[1], resp), (REGIONS[2], rcv)],
            open,
            ..Outcome::default()
        })
    }
}

impl Model {
    /// What a [`NetOp`] leaves (items 115–120, 251–255).
    pub(super) fn net_step(&mut self, x: &NetOp) -> Expect {
        let mlx5 = |d: usize| self.devices.get(d) == Some(&mlx5_dv::DeviceKind::Mlx5);
        if !self.sim_control || !mlx5(x.dev) || !mlx5(x.peer) {
            return Expect::Unknown;
        }
        match x.outcome() {
            Some(o) => {
                self.effects.outcome = Some(o);
                Expect::Ok(None)
            }
            None => Expect::Unknown,
        }
    }
}

fn msg() -> impl Strategy<Value = NetMsg> {
    let kind = prop_oneof![
        Just(MsgKind::Write),
        Just(MsgKind::WriteImm),
        Just(MsgKind::Send),
        Just(MsgKind::SendImm),
        Just(MsgKind::Read)
    ];
    (kind, prop_oneof![2 => 1u16..=256, 1 => 257u16..=1024]).prop_map(|(kind, len)| NetMsg { kind, len })
}

fn action() -> impl Strategy<Value = NetAction> {
    prop_oneof![
        3 => Just(NetAction::Drop),
        2 => Just(NetAction::Duplicate),
        2 => Just(NetAction::Reorder),
        1 => prop_oneof![Just(50_000u64), Just(2_500_000u64)].prop_map(|ns| NetAction::Delay { ns }),
        1 => (prop_oneof![0usize..4, 5usize..64, Just(5000usize)], 1u8..=255)
            .prop_map(|(offset, xor)| NetAction::Corrupt { offset, xor }),
    ]
}

/// Request opcodes, or the answers' (ACK, the READ responses).
fn opcode(answers: bool) -> BoxedStrategy<Option<u8>> {
    if answers {
        proptest::option::of(prop_oneof![Just(bth::ACKNOWLEDGE), bth::READ_RESPONSE_FIRST..=bth::READ_RESPONSE_ONLY])
            .boxed()
    } else {
        proptest::option::of(prop_oneof![0u8..=0x0c, Just(bth::SEND_ONLY)]).boxed()
    }
}

fn rule(times: BoxedStrategy<Option<u32>>) -> impl Strategy<Value = NetRule> {
    any::<bool>().prop_flat_map(move |answers| {
        let random = proptest::option::weighted(0.25, (300_000u32..=1_000_000, any::<u64>()));
        (action(), opcode(answers), proptest::option::of((0u8..4, 0u8..4)), 0u32..3, times.clone(), random).prop_map(
            move |(action, opcode, at, skip, times, random)| NetRule {
                answers,
                action,
                opcode,
                at,
                skip,
                times,
                random,
            },
        )
    })
}

/// Up to three finite rules (acting on at most [`FINITE`] packets), or duplicates of every
/// packet.
fn recover_rules() -> impl Strategy<Value = (u8, [NetRule; 3])> {
    (0u8..=3).prop_flat_map(|n| {
        let times = if n == 1 { (1u32..=FINITE).prop_map(Some).boxed() } else { Just(Some(1)).boxed() };
        let dup = any::<bool>().prop_map(|answers| NetRule {
            answers,
            action: NetAction::Duplicate,
            opcode: None,
            at: None,
            skip: 0,
            times: None,
            random: None,
        });
        let r = prop_oneof![6 => rule(times), 1 => dup].boxed();
        (Just(n), [r.clone(), r.clone(), r])
    })
}

/// A request packet lost every time: by opcode or by PSN, dropped or corrupted.
fn fatal_rule() -> impl Strategy<Value = NetRule> {
    let action = prop_oneof![
        3 => Just(NetAction::Drop),
        1 => (prop_oneof![0usize..4, 5usize..64], 1u8..=255).prop_map(|(offset, xor)| NetAction::Corrupt { offset, xor }),
    ];
    let by = prop_oneof![opcode(false).prop_map(|o| (o, None)), (0u8..4, 0u8..4).prop_map(|a| (None, Some(a)))];
    (action, by).prop_map(|(action, (opcode, at))| NetRule {
        answers: false,
        action,
        opcode,
        at,
        skip: 0,
        times: None,
        random: None,
    })
}

/// Scenarios the model can judge on the mlx5 devices `devs`: recovered faults, a request
/// always lost, every answer lost for a lone message, receives that run out.
pub(super) fn strategy(devs: Vec<usize>) -> BoxedStrategy<super::Op> {
    let d = devs.clone();
    let pair = (0..devs.len(), 0..devs.len()).prop_map(move |(a, b)| {
        let b = if d.len() > 1 && a == b { (b + 1) % d.len() } else { b };
        (d[a], d[b])
    });
    let none = NetRule::NONE;
    let psn = prop_oneof![Just(0u32), Just(0x12_3456), 0xff_fffcu32..=0xff_ffff];
    let base = (pair, 1u8..=4, [msg(), msg(), msg(), msg()], psn, any::<u8>(), any::<u32>());
    let kind = prop_oneof![5 => Just(0u8), 2 => Just(1u8), 1 => Just(2u8), 2 => Just(3u8)];
    (base, kind, 0u8..=7, 0u8..7, recover_rules(), fatal_rule(), 0u8..4)
        .prop_map(move |((pair, n, msgs, psn, seed, imm), kind, retry, rnr, finite, fatal, recvs)| {
            let mut op = NetOp {
                dev: pair.0,
                peer: pair.1,
                n,
                msgs,
                recvs: 4,
                rules: 0,
                rule: [none; 3],
                retry_cnt: retry,
                rnr_retry: rnr,
                psn,
                seed,
                imm,
            };
            match kind {
                0 => {
                    op.rules = finite.0;
                    op.rule = finite.1;
                    if op.rules > 0 {
                        op.retry_cnt = 7;
                    }
                }
                1 => {
                    op.rules = 1;
                    op.rule[0] = fatal;
                }
                2 => {
                    op.n = 1;
                    op.rules = 1;
                    op.rule[0] = NetRule { answers: true, opcode: None, at: None, ..fatal };
                }
                _ => {
                    op.recvs = recvs;
                    op.rnr_retry %= 4;
                    if retry % 2 == 0 {
                        op.retry_cnt = 7;
                    } else if let Some(k) = op.rnr_victim() {
                        op.n = k as u8 + 1;
                    }
                }
            }
            super::Op::Net(op)
        })
        .boxed()
}

/// `n` network scenarios drawn from `seed` (the same every run), for the suite's case of
/// item 251; their devices are the caller's to set.
pub fn schedules(n: usize, seed: u8) -> Vec<NetOp> {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let s = strategy(vec![0, 1]);
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]));
    (0..n)
        .filter_map(|_| match s.new_tree(&mut runner).ok()?.current() {
            super::Op::Net(x) => Some(x),
            _ => None,
        })
        .collect()
}
