//! The memory-window family: a window of type 1 or 2 over a 64-byte MR of the responder, then
//! up to five steps — binds (`ibv_bind_mw`; `IBV_WR_BIND_MW` or `ibv_wr_bind_mw`), the peer's
//! RDMA WRITEs and READs through the key last bound (inside and outside the window, with and
//! without its rights), LOCAL_INV and SEND_WITH_INV of that key, a WRITE through it on
//! another QP, `ibv_dealloc_mw` — each step's completions, the bytes of the MR, of the
//! requester's buffer and of the receive buffer, and the QPs' states. Written from
//! `docs/behaviour.md` items 171–180.
//!
//! A scenario stops at its first error completion (the QPs it hit are in ERR); after an error
//! the requester took from the responder (REM_ACCESS_ERR, REM_INV_REQ_ERR) the responder is
//! not looked at: its side is not published.
//!
//! Not generated (the docs leave them open): access through a key before any bind, through
//! the key a type-1 window had before a rebind, or through the new key of an unbound window;
//! zero-length or ZERO_BASED type-2 binds; LOCAL_INV of a type-1 window or of a free one;
//! SEND_WITH_INV of a free window; a type-1 window on another QP; anything after a dealloc
//! but an access; MRs without `IBV_ACCESS_MW_BIND` (item 177: not checked, unverified).

use mlx5_dv::{AccessFlags as A, wc_opcode, wc_status};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::outcome::{NetCqe, Outcome};
use super::{Expect, Model, Op};

/// The bytes of the MR, of the requester's buffer; of the receive buffer.
pub const REGION: usize = 64;
/// The receive buffer's length; a SEND_WITH_INV carries 4 bytes.
pub const RECV_LEN: usize = 16;
/// The bytes a SEND_WITH_INV carries.
pub const SEND_LEN: usize = 4;

/// One step of a [`MwOp`]. Offsets are bytes of the MR; WRITEs send the requester's buffer
/// from byte 0, READs land there.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MwStep {
    /// A bind of `[lo, lo + len)` with `rights` (`IBV_ACCESS_*` bits); a type-2 one through
    /// `ibv_wr_bind_mw` when `wr`, else `IBV_WR_BIND_MW` of `ibv_post_send`.
    Bind { lo: u8, len: u8, rights: u32, wr: bool },
    /// The peer's RDMA WRITE of `len` bytes at `off` through the key last bound.
    Write { off: u8, len: u8 },
    /// The peer's RDMA READ of `len` bytes at `off` through the key last bound.
    Read { off: u8, len: u8 },
    /// `IBV_WR_LOCAL_INV` of the key last bound, on the binding QP.
    LocalInv,
    /// The peer's SEND_WITH_INV of the key last bound, into a receive of 16 bytes.
    SendInv,
    /// An 8-byte RDMA WRITE at `off` through the key last bound, from a second pair of QPs
    /// of the same PD.
    OtherQp { off: u8 },
    /// `ibv_dealloc_mw`.
    Dealloc,
}

/// A window scenario on device `dev`: a window of type 2 (`type2`) or 1, an MR of
/// `LOCAL_WRITE | MW_BIND` (or `REMOTE_READ | MW_BIND` without `local_write`) over
/// `fill_pattern(64, seed)`, and the first `n` steps.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MwOp {
    pub dev: usize,
    pub type2: bool,
    pub local_write: bool,
    pub seed: u8,
    pub n: u8,
    pub steps: [MwStep; 5],
}

impl MwOp {
    /// The steps run (until the first error).
    pub fn posted(&self) -> &[MwStep] {
        &self.steps[..usize::from(self.n).clamp(1, self.steps.len())]
    }

    /// The MR's access.
    pub fn mr_access(&self) -> A {
        if self.local_write { A::LOCAL_WRITE | A::MW_BIND } else { A::REMOTE_READ | A::MW_BIND }
    }
}

/// The wr_id of step `i`'s WR (the receive of a SEND_WITH_INV has bit 63 set, the WRITE
/// from another QP bit 62).
pub fn step_id(i: usize) -> u64 {
    i as u64
}

/// The window as the model knows it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Win {
    Free,
    /// Bound under the key `tag` increments past the first, over `[lo, lo + len)`.
    Bound {
        tag: u8,
        lo: usize,
        len: usize,
        rights: A,
    },
    Gone,
}

const RTS: u32 = 3;
const ERR: u32 = 6;

impl Model {
    /// What a [`MwOp`] leaves.
    pub(super) fn mw_step(&mut self, m: &MwOp) -> Expect {
        if !self.windows || self.mlx5_dev(m.dev).is_none() {
            return Expect::Unknown;
        }
        match predict(m) {
            Some(o) => {
                self.effects.outcome = Some(o);
                Expect::Ok(None)
            }
            None => Expect::Unknown,
        }
    }
}

/// What a [`MwOp`] leaves on a device with windows; `None` where the docs leave it open.
pub fn predict(m: &MwOp) -> Option<Outcome> {
    let mut mem = super::fill_pattern(REGION, m.seed);
    let mut local = super::fill_pattern(REGION, m.seed ^ 0x5a);
    let mut recv = vec![0u8; RECV_LEN];
    let mut win = Win::Free;
    // Keys as increments of the window's first key: the one binds count from (`mw->rkey`
    // for type 1, the last key asked for type 2) and the one accesses use.
    let (mut last, mut held): (u8, Option<u8>) = (0, None);
    let mut wcs = Vec::new();
    let mut binds = Vec::new();
    let (mut req, mut resp) = (Some(RTS), Some(RTS));
    for (i, step) in m.posted().iter().enumerate() {
        let id = step_id(i);
        let ok = |opcode: u32, recv: bool, byte_len: Option<u32>, imm: Option<u32>| NetCqe {
            recv,
            wr_id: id | if recv { 1 << 63 } else { 0 },
            status: wc_status::SUCCESS,
            opcode: Some(opcode),
            byte_len,
            imm,
        };
        let bad = |status: u32| NetCqe { recv: false, wr_id: id, status, opcode: None, byte_len: None, imm: None };
        if win == Win::Gone && !matches!(step, MwStep::Write { .. } | MwStep::Read { .. }) {
            return None;
        }
        match *step {
            MwStep::Bind { lo, len, rights, wr: _ } => {
                let (lo, len, rights) = (usize::from(lo), usize::from(len), A::from_bits_retain(rights));
                let known = A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ | A::REMOTE_ATOMIC;
                if !m.type2 {
                    // Item 172: ZERO_BASED is EINVAL from libmlx5, nothing posted.
                    if rights == A::ZERO_BASED {
                        binds.push(0xff);
                        continue;
                    }
                } else if len == 0 || rights.contains(A::ZERO_BASED) {
                    return None;
                }
                // Local-write rights over an MR without local write: not published.
                let lw = rights.contains(A::LOCAL_WRITE) && !m.local_write;
                if !known.contains(rights) || lw {
                    return None;
                }
                // Items 173 and 175: the next key; type 1 stores it in mw->rkey once posted.
                last = last.wrapping_add(1);
                binds.push(1);
                // Items 176 and 177: the device refuses a bound type-2 window, a range
                // past the MR, remote write or atomic rights over an MR without local
                // write; the binding QP goes to ERR.
                let past = lo + len > REGION;
                let rw = rights.intersects(A::REMOTE_WRITE | A::REMOTE_ATOMIC) && !m.local_write;
                let busy = m.type2 && win != Win::Free;
                if len > 0 && (past || rw) || busy {
                    wcs.push(bad(wc_status::MW_BIND_ERR));
                    resp = Some(ERR);
                    break;
                }
                wcs.push(ok(wc_opcode::BIND_MW, false, None, None));
                if len == 0 {
                    // Item 174: a zero-length type-1 bind unbinds; the key held is refused.
                    win = Win::Free;
                } else {
                    win = Win::Bound { tag: last, lo, len, rights };
                    held = Some(last);
                }
            }
            MwStep::Write { off, len } | MwStep::Read { off, len } => {
                let key = held?;
                let write = matches!(step, MwStep::Write { .. });
                let (off, len) = (usize::from(off), usize::from(len));
                if len == 0 || off > REGION || len > REGION {
                    return None;
                }
                let need = if write { A::REMOTE_WRITE } else { A::REMOTE_READ };
                let inside = match win {
                    Win::Bound { tag, lo, len: wl, rights } => {
                        if tag != key {
                            return None;
                        }
                        // Items 173 and 175: inside the window, with its own rights.
                        rights.contains(need) && off >= lo && off + len <= lo + wl
                    }
                    // Items 174, 178, 179 and 180: an invalidated, unbound or destroyed
                    // window refuses the key it held.
                    Win::Free | Win::Gone => false,
                };
                if !inside {
                    wcs.push(bad(wc_status::REM_ACCESS_ERR));
                    req = Some(ERR);
                    resp = None;
                    break;
                }
                if write {
                    mem[off..off + len].copy_from_slice(&local[..len]);
                    wcs.push(ok(wc_opcode::RDMA_WRITE, false, None, None));
                } else {
                    local[..len].copy_from_slice(&mem[off..off + len]);
                    wcs.push(ok(wc_opcode::RDMA_READ, false, Some(len as u32), None));
                }
            }
            MwStep::LocalInv => {
                // Item 178: LOCAL_INV frees a bound type-2 window.
                let Win::Bound { tag, .. } = win else { return None };
                if !m.type2 || held != Some(tag) {
                    return None;
                }
                wcs.push(ok(wc_opcode::LOCAL_INV, false, None, None));
                win = Win::Free;
            }
            MwStep::SendInv => {
                let Win::Bound { tag, .. } = win else { return None };
                if held != Some(tag) {
                    return None;
                }
                if !m.type2 {
                    // Item 179: a type-1 window has no remote invalidation.
                    wcs.push(bad(wc_status::REM_INV_REQ_ERR));
                    req = Some(ERR);
                    resp = None;
                    break;
                }
                // Item 179: placed, then invalidated; the receive carries WITH_INV and
                // the key (the rig writes 1 for "the key last bound").
                wcs.push(ok(wc_opcode::SEND, false, None, None));
                wcs.push(ok(wc_opcode::RECV, true, Some(SEND_LEN as u32), Some(1)));
                recv[..SEND_LEN].copy_from_slice(&local[..SEND_LEN]);
                win = Win::Free;
            }
            MwStep::OtherQp { off } => {
                let Win::Bound { tag, lo, len, .. } = win else { return None };
                let off = usize::from(off);
                if !m.type2 || held != Some(tag) || off < lo || off + 8 > lo + len {
                    return None;
                }
                // Item 176: a type-2 window answers on the QP that bound it only. The
                // second pair is not looked at again.
                wcs.push(NetCqe { wr_id: id | 1 << 62, ..bad(wc_status::REM_ACCESS_ERR) });
            }
            MwStep::Dealloc => {
                // Item 180: of a bound window; of a free one the key was refused already.
                if !matches!(win, Win::Bound { .. }) {
                    return None;
                }
                win = Win::Gone;
            }
        }
    }
    let states = [req, resp].into_iter().flatten().collect();
    Some(Outcome {
        wcs,
        bytes: vec![("window's MR", mem), ("requester", local), ("receive", recv), ("binds", binds)],
        states,
        ..Outcome::default()
    })
}

fn rights() -> BoxedStrategy<u32> {
    prop_oneof![
        10 => Just((A::REMOTE_WRITE | A::REMOTE_READ).bits()),
        2 => Just(A::REMOTE_WRITE.bits()),
        2 => Just(A::REMOTE_READ.bits()),
        1 => Just(A::LOCAL_WRITE.bits()),
        1 => Just((A::REMOTE_ATOMIC | A::REMOTE_READ).bits()),
        1 => Just(A::ZERO_BASED.bits()),
    ]
    .boxed()
}

fn bind() -> BoxedStrategy<MwStep> {
    let range = prop_oneof![
        8 => (0u8..48, 1u8..=32).prop_map(|(lo, len)| (lo, len.min(64 - lo))),
        1 => (32u8..64, 33u8..=64),
        1 => (0u8..64).prop_map(|lo| (lo, 0)),
    ];
    (range, rights(), any::<bool>()).prop_map(|((lo, len), rights, wr)| MwStep::Bind { lo, len, rights, wr }).boxed()
}

fn access() -> BoxedStrategy<(u8, u8)> {
    (0u8..64, 1u8..=16).prop_map(|(off, len)| (off, len.min(64 - off))).boxed()
}

fn step() -> BoxedStrategy<MwStep> {
    prop_oneof![
        2 => bind(),
        6 => access().prop_map(|(off, len)| MwStep::Write { off, len }),
        5 => access().prop_map(|(off, len)| MwStep::Read { off, len }),
        1 => Just(MwStep::LocalInv),
        1 => Just(MwStep::SendInv),
        1 => (0u8..56).prop_map(|off| MwStep::OtherQp { off }),
        1 => Just(MwStep::Dealloc),
    ]
    .boxed()
}

/// Move the accesses marked in `inside` into the range the bind before them asked for
/// (most of them: outside it they fail at once).
fn aim(steps: &mut [MwStep; 5], inside: [bool; 5]) {
    let mut range = (0u8, 0u8);
    for (s, inside) in steps.iter_mut().zip(inside) {
        match s {
            MwStep::Bind { lo, len, .. } if *len > 0 => range = (*lo, (*len).min(64u8.saturating_sub(*lo))),
            MwStep::Write { off, len } | MwStep::Read { off, len } if inside && range.1 > 0 => {
                *off = range.0 + *off % range.1;
                *len = 1 + (*len - 1) % (range.0 + range.1 - *off);
            }
            MwStep::OtherQp { off } if range.1 >= 8 => *off = range.0 + *off % (range.1 - 7),
            _ => {}
        }
    }
}

/// Window scenarios on the devices `devs`: a bind first, then the steps the model can judge
/// (the sequence is cut before the first it cannot).
pub(super) fn strategy(devs: Vec<usize>) -> BoxedStrategy<Op> {
    let lw = prop_oneof![6 => Just(true), 1 => Just(false)];
    // Three accesses in four inside the window.
    let aimed = || prop_oneof![3 => Just(true), 1 => Just(false)];
    let inside = [aimed(), aimed(), aimed(), aimed(), aimed()];
    let steps = (bind(), [step(), step(), step(), step()]);
    (
        proptest::sample::select(devs),
        any::<bool>(),
        lw,
        any::<u8>(),
        prop_oneof![1 => Just(1u8), 4 => 2u8..=5],
        steps,
        inside,
    )
        .prop_map(|(dev, type2, local_write, seed, n, (first, [a, b, c, d]), inside)| {
            let mut steps = [first, a, b, c, d];
            aim(&mut steps, inside);
            let mut m = MwOp { dev, type2, local_write, seed, n, steps };
            while m.n > 1 && predict(&m).is_none() {
                m.n -= 1;
            }
            // A first bind the docs leave open: a type-1 window, then an MR with local write.
            if predict(&m).is_none() {
                m.type2 = false;
            }
            if predict(&m).is_none() {
                m.local_write = true;
            }
            Op::Mw(m)
        })
        .boxed()
}
