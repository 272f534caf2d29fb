//! The shared-receive family: one SRQ of a device, two responder RC QPs on it (each on a CQ
//! of its own), each connected to a requester QP, and up to five steps — a SEND of up to 64
//! bytes from either requester, a receive posted to the SRQ, a responder moved to ERR — after
//! none to four receives posted first: each step's completions (the responder's on that
//! QP's CQ), the receive buffers' bytes and the four QPs' states. Written from
//! `docs/behaviour.md` items 135 and 137.
//!
//! The requesters retry RNR for ever (`rnr_retry` 7): a SEND that finds the SRQ empty waits,
//! with no completion, until a receive is posted to the SRQ, then completes on both sides.
//! Not generated: a SEND to a responder in ERR (the requester's retries would run out on a
//! timer), a second SEND while one waits (which retries first is not published), and a
//! responder moved to ERR while its requester's SEND waits.

use std::collections::VecDeque;

use mlx5_dv::{wc_opcode, wc_status};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::outcome::{NetCqe, Outcome};
use super::{Expect, Model, Op};

/// One receive buffer; receive `i` takes slot `i`.
pub const SLOT: usize = 64;
/// The slots: four receives first and one per step at most.
pub const SLOTS: usize = 9;
/// Added to a responder completion's `wr_id` when it came on the second responder's CQ.
pub const SECOND: u64 = 100;

/// One step of an [`SrqOp`].
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SrqStep {
    /// A signaled SEND of `len` bytes (at most 64) from requester `from` (0 or 1) to its
    /// responder, gathered from byte `8 * step` of the requesters' buffer.
    Send { from: u8, len: u8 },
    /// One more receive posted to the SRQ.
    Recv,
    /// Responder `which` moved to ERR.
    ErrResp { which: u8 },
}

/// A shared-receive scenario on device `dev`: `recvs` receives posted first, then the first
/// `n` steps; the requesters' buffer holds `fill_pattern(128, seed)`, the receive buffers
/// `fill_pattern(SLOT * SLOTS, seed ^ 0x44)`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrqOp {
    pub dev: usize,
    pub seed: u8,
    pub recvs: u8,
    pub n: u8,
    pub steps: [SrqStep; 5],
}

impl SrqOp {
    /// The steps run (until the first error).
    pub fn posted(&self) -> &[SrqStep] {
        &self.steps[..usize::from(self.n).clamp(1, self.steps.len())]
    }

    /// The receives posted before the steps (at most four).
    pub fn receives(&self) -> usize {
        usize::from(self.recvs.min(4))
    }

    /// The requesters' buffer.
    pub fn send_buf(&self) -> Vec<u8> {
        super::fill_pattern(128, self.seed)
    }

    /// The receive buffers before the traffic.
    pub fn recv_bufs(&self) -> Vec<u8> {
        super::fill_pattern(SLOT * SLOTS, self.seed ^ 0x44)
    }
}

impl Model {
    /// What an [`SrqOp`] leaves.
    pub(super) fn srq_step(&mut self, x: &SrqOp) -> Expect {
        if self.mlx5_dev(x.dev).is_none() || !self.srqs {
            return Expect::Unknown;
        }
        let send = x.send_buf();
        let mut bufs = x.recv_bufs();
        let mut queue: VecDeque<usize> = (0..x.receives()).collect();
        let mut next = x.receives();
        // [requester 0, requester 1, responder 0, responder 1]: RTS (3) or ERR (6).
        let mut states = [3u32; 4];
        let mut wcs = Vec::new();
        // The SEND waiting for a WQE: its step, requester and length.
        let mut waiting: Option<(usize, usize, usize)> = None;
        let land = |wcs: &mut Vec<NetCqe>, bufs: &mut Vec<u8>, i: usize, j: usize, len: usize, id: usize| {
            // Item 135: the SRQ's next WQE, whichever QP the message came to.
            let at = id * SLOT;
            bufs[at..at + len].copy_from_slice(&send[8 * i..8 * i + len]);
            wcs.push(NetCqe {
                recv: false,
                wr_id: i as u64,
                status: wc_status::SUCCESS,
                opcode: Some(wc_opcode::SEND),
                byte_len: None,
                imm: None,
            });
            wcs.push(NetCqe {
                recv: true,
                wr_id: id as u64 + if j == 1 { SECOND } else { 0 },
                status: wc_status::SUCCESS,
                opcode: Some(wc_opcode::RECV),
                byte_len: Some(len as u32),
                imm: None,
            });
        };
        for (i, step) in x.posted().iter().enumerate() {
            match *step {
                SrqStep::Recv => {
                    queue.push_back(next);
                    next += 1;
                    // Item 137: the waiting SEND's retry takes the new WQE.
                    if let Some((wi, j, len)) = waiting.take() {
                        let id = queue.pop_front().unwrap_or_default();
                        land(&mut wcs, &mut bufs, wi, j, len, id);
                    }
                }
                // Item 137: the SRQ's WQEs stay; the QP's empty send queue flushes nothing.
                SrqStep::ErrResp { which } => {
                    let j = usize::from(which & 1);
                    if waiting.is_some_and(|w| w.1 == j) {
                        return Expect::Unknown;
                    }
                    states[2 + j] = 6;
                }
                SrqStep::Send { from, len } => {
                    let j = usize::from(from & 1);
                    if states[2 + j] == 6 || usize::from(len) > SLOT || waiting.is_some() {
                        return Expect::Unknown;
                    }
                    // Item 137: an empty SRQ answers RNR, and the SEND waits.
                    match queue.pop_front() {
                        Some(id) => land(&mut wcs, &mut bufs, i, j, usize::from(len), id),
                        None => waiting = Some((i, j, usize::from(len))),
                    }
                }
            }
        }
        self.effects.outcome =
            Some(Outcome { wcs, bytes: vec![("receive", bufs)], states: states.to_vec(), ..Outcome::default() });
        Expect::Ok(None)
    }
}

fn step() -> BoxedStrategy<SrqStep> {
    prop_oneof![
        5 => (0u8..2, prop_oneof![1 => Just(0u8), 6 => 1u8..=64]).prop_map(|(from, len)| SrqStep::Send { from, len }),
        2 => Just(SrqStep::Recv),
        1 => (0u8..2).prop_map(|which| SrqStep::ErrResp { which }),
    ]
    .boxed()
}

/// Shared-receive scenarios on the devices `devs`.
pub(super) fn strategy(devs: Vec<usize>) -> BoxedStrategy<Op> {
    (proptest::sample::select(devs), any::<u8>(), 0u8..=4, 1u8..=5, [step(), step(), step(), step(), step()])
        .prop_map(|(dev, seed, recvs, n, mut steps)| {
            // No SEND to a responder in ERR, none while another waits, no responder to ERR
            // while its requester's SEND waits: such a step posts a receive instead.
            let (mut err, mut wqes, mut waiting) = ([false; 2], i32::from(recvs.min(4)), None);
            for s in steps.iter_mut() {
                match *s {
                    SrqStep::ErrResp { which } if waiting == Some(which & 1) => *s = SrqStep::Recv,
                    SrqStep::ErrResp { which } => err[usize::from(which & 1)] = true,
                    SrqStep::Send { from, .. } if err[usize::from(from & 1)] || waiting.is_some() => *s = SrqStep::Recv,
                    SrqStep::Send { from, .. } if wqes == 0 => waiting = Some(from & 1),
                    SrqStep::Send { .. } => wqes -= 1,
                    SrqStep::Recv => {}
                }
                if *s == SrqStep::Recv && waiting.take().is_none() {
                    wqes += 1;
                }
            }
            Op::Srq(SrqOp { dev, seed, recvs, n, steps })
        })
        .boxed()
}
