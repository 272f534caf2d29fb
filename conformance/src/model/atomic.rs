//! The atomics family: a chain of one to four 8-byte compare-and-swaps and fetch-and-adds on
//! an RC QP into a 64-byte MR of its peer, posted with `ibv_wr_atomic_*` or `ibv_post_send`,
//! each WR's completion, the original values landing in the requester's buffer, the target
//! after, and both QPs' states. Written from `docs/behaviour.md` items 121–126.
//!
//! Not generated: a WR with a local and a remote fault, or with two remote faults (which
//! the responder or the requester reports first is not published), a bad lkey (the docs do
//! not say whether the request left), and devices whose atomics could not be confirmed.

use mlx5_dv::{wc_opcode, wc_status};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::outcome::{NetCqe, Outcome};
use super::traffic::{Fault, Need, overlaps};
use super::{Expect, Key, Model, Op, Wr};

/// The bytes of the target MR and of the requester's buffer.
pub const REGION: usize = 64;

/// One atomic WR: compare-and-swap (`cas`) or fetch-and-add of `value`, at byte `off` of the
/// target MR, its original value scattered at byte `local` of the requester's buffer.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AtomicWr {
    pub cas: bool,
    pub off: u8,
    pub local: u8,
    /// The scatter entry holds 4 bytes, not 8.
    pub short: bool,
    /// The compare value (compare-and-swap only).
    pub compare: u64,
    /// The swap value, or the addend.
    pub value: u64,
}

/// An atomics scenario on device `dev`: the responder's QP grants `REMOTE_ATOMIC` or not
/// (`qp_atomic`), its MR too (`mr_atomic`); the target MR holds `fill_pattern(64, seed)`
/// with `init` in its words 0, 1 and 2; the first `n` WRs go in one post, as an
/// `ibv_post_send` list (`legacy`) or an `ibv_wr_*` chain, every one signaled.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AtomicOp {
    pub dev: usize,
    pub legacy: bool,
    pub qp_atomic: bool,
    pub mr_atomic: bool,
    pub init: u64,
    pub seed: u8,
    pub n: u8,
    pub wrs: [AtomicWr; 4],
}

impl AtomicOp {
    /// The WRs posted.
    pub fn posted(&self) -> &[AtomicWr] {
        &self.wrs[..usize::from(self.n).clamp(1, self.wrs.len())]
    }

    /// The target MR's bytes before the chain.
    pub fn target(&self) -> Vec<u8> {
        let mut t = super::fill_pattern(REGION, self.seed);
        for w in 0..3 {
            t[w * 8..w * 8 + 8].copy_from_slice(&self.init.to_ne_bytes());
        }
        t
    }

    /// The requester's buffer before the chain.
    pub fn local(&self) -> Vec<u8> {
        super::fill_pattern(REGION, self.seed ^ 0x5a)
    }
}

impl Model {
    /// The device index of `dev` if it is a kernel mlx5 device.
    pub(super) fn mlx5_dev(&self, dev: usize) -> Option<usize> {
        let d = dev % self.devices.len().max(1);
        (self.devices.get(d) == Some(&mlx5_dv::DeviceKind::Mlx5)).then_some(d)
    }

    /// What an [`AtomicOp`] leaves.
    pub(super) fn atomic_step(&mut self, a: &AtomicOp) -> Expect {
        if !self.atomics || self.mlx5_dev(a.dev).is_none() {
            return Expect::Unknown;
        }
        let (mut target, mut local) = (a.target(), a.local());
        let mut wcs = Vec::new();
        // The QPs' states: RTS (3) until an error; ERR is 6.
        let (mut req, mut resp) = (3u32, 3u32);
        let mut failed = false;
        for (i, w) in a.posted().iter().enumerate() {
            let wr_id = i as u64;
            let cqe = |status: u32, opcode: Option<u32>| NetCqe {
                recv: false,
                wr_id,
                status,
                opcode,
                byte_len: opcode.map(|_| 8),
                imm: None,
            };
            if failed {
                wcs.push(cqe(wc_status::WR_FLUSH_ERR, None));
                continue;
            }
            let (off, at) = (usize::from(w.off), usize::from(w.local));
            if off > REGION || at + 8 > REGION {
                return Expect::Unknown;
            }
            let misaligned = off % 8 != 0;
            let denied = !a.qp_atomic || !a.mr_atomic || off + 8 > REGION;
            // Item 126: a short scatter list (the ibv_wr_* API writes the length given) fails
            // before any request is sent. Item 121: ibv_post_send writes 8 bytes whatever.
            if w.short && !a.legacy {
                wcs.push(cqe(wc_status::LOC_LEN_ERR, None));
                req = 6;
                failed = true;
                continue;
            }
            let status = match (misaligned, denied) {
                // Which of two remote faults the responder reports is not published.
                (true, true) => return Expect::Unknown,
                // Item 124.
                (true, false) => Some(wc_status::REM_INV_REQ_ERR),
                // Item 125.
                (false, true) => Some(wc_status::REM_ACCESS_ERR),
                (false, false) => None,
            };
            if let Some(s) = status {
                // Items 124 and 125: both QPs to ERR, the target untouched.
                wcs.push(cqe(s, None));
                (req, resp) = (6, 6);
                failed = true;
                continue;
            }
            // Items 122 and 123: the original value comes back; host byte order.
            let mut word = [0u8; 8];
            word.copy_from_slice(&target[off..off + 8]);
            let old = u64::from_ne_bytes(word);
            let new = match w.cas {
                true if old == w.compare => w.value,
                true => old,
                false => old.wrapping_add(w.value),
            };
            target[off..off + 8].copy_from_slice(&new.to_ne_bytes());
            local[at..at + 8].copy_from_slice(&old.to_ne_bytes());
            // Item 121: the opcode and byte_len 8.
            let opcode = if w.cas { wc_opcode::COMP_SWAP } else { wc_opcode::FETCH_ADD };
            wcs.push(cqe(wc_status::SUCCESS, Some(opcode)));
        }
        self.effects.outcome = Some(Outcome {
            wcs,
            bytes: vec![("target", target), ("requester", local)],
            states: vec![req, resp],
            ..Outcome::default()
        });
        Expect::Ok(None)
    }
}

impl Model {
    /// An atomic WR of QP slot `qp` (device `dev`, PD `pd`) in RTS, in the op-by-op traffic:
    /// `None` when the docs leave it open, `Some(None)` on success, else the requester's
    /// error status.
    pub(super) fn atomic_transfer(&mut self, qp: usize, wr: &Wr, dev: usize, pd: usize) -> Option<Option<u32>> {
        let Wr::Atomic { local, remote, roff, cas, compare, value, .. } = *wr else { return None };
        if !self.atomics {
            return None;
        }
        self.effects.watch.extend(self.key_bufs(local.key));
        self.effects.watch.extend(self.key_bufs(remote));
        // Item 126: fewer than 8 bytes to scatter into fail before any request is sent.
        if local.len < 8 {
            return Some(Some(wc_status::LOC_LEN_ERR));
        }
        // A longer scatter entry, or a bad lkey (whether the request left is not published).
        let write = Need { remote: false, write: true, atomic: false };
        let dst = self.map(local.key, local.off, 8, dev, pd, write).ok().filter(|_| local.len == 8)?;
        let p = self.linked_peer(qp)?;
        let (pdev, ppd) = (self.qp_dev(p)?, self.qps.get(p)?.as_ref()?.pd);
        // Buffers are page-aligned: an MR's address is its offset in its buffer, modulo 8; a
        // zero-based mkey's address is the offset itself.
        let base = match remote {
            Key::Mr(s) => self.mrs.get(s)?.as_ref()?.off,
            _ => 0,
        };
        let aligned = (base + u64::from(roff)) % 8 == 0;
        let src = self.map(remote, roff, 8, pdev, ppd, Need { remote: true, write: true, atomic: true });
        self.sent(qp, p);
        let status = match (aligned, src) {
            (_, Err(Fault::Unknown)) | (false, Err(Fault::Prot)) => return None,
            // Item 124.
            (false, Ok(_)) => wc_status::REM_INV_REQ_ERR,
            // Item 125.
            (true, Err(Fault::Prot)) => wc_status::REM_ACCESS_ERR,
            (true, Ok(src)) => {
                // One run at an aligned host address, apart from the scatter entry.
                let [(b, at, 8)] = src[..] else { return None };
                if at % 8 != 0 || overlaps(&src, &dst) || self.touches_pending(&src) || self.touches_pending(&dst) {
                    return None;
                }
                let bytes = self.gather(&src);
                let old = u64::from_ne_bytes(bytes.try_into().ok()?);
                // Items 122 and 123, in host byte order.
                let new = match cas {
                    true if old == compare => value,
                    true => old,
                    false => old.wrapping_add(value),
                };
                self.scatter(&new.to_ne_bytes(), &vec![(b, at, 8)]);
                self.scatter(&old.to_ne_bytes(), &dst);
                self.landing.extend(dst);
                return Some(None);
            }
        };
        // Items 124 and 125: the responder's QP goes to ERR too.
        if p != qp {
            self.enter_err(p);
        }
        Some(Some(status))
    }
}

/// An offset in the target: mostly words 0–2 (which hold `init`), any word, now and then a
/// misaligned one or the MR's end.
fn target_off() -> BoxedStrategy<u8> {
    prop_oneof![
        8 => (0u8..3).prop_map(|w| w * 8),
        3 => (0u8..8).prop_map(|w| w * 8),
        1 => (1u8..56).prop_filter("misaligned", |o| o % 8 != 0),
        1 => Just(REGION as u8),
    ]
    .boxed()
}

fn value(init: u64) -> BoxedStrategy<u64> {
    prop_oneof![
        3 => Just(init),
        1 => Just(0u64),
        2 => 1u64..4,
        1 => Just(u64::MAX),
        1 => Just(1u64 << 63),
        1 => any::<u64>(),
    ]
    .boxed()
}

fn wr(init: u64) -> BoxedStrategy<AtomicWr> {
    let local = prop_oneof![4 => (0u8..8).prop_map(|w| w * 8), 1 => 0u8..=56];
    let short = prop_oneof![12 => Just(false), 1 => Just(true)];
    (any::<bool>(), target_off(), local, short, value(init), value(init))
        .prop_map(|(cas, off, local, short, compare, value)| AtomicWr { cas, off, local, short, compare, value })
        .boxed()
}

/// Atomics scenarios on the devices `devs`.
pub(super) fn strategy(devs: Vec<usize>) -> BoxedStrategy<Op> {
    let init = prop_oneof![2 => Just(0u64), 1 => Just(u64::MAX - 1), 1 => 1u64..4, 1 => any::<u64>()];
    let access = prop_oneof![10 => Just(true), 1 => Just(false)];
    let n = prop_oneof![2 => Just(1u8), 2 => Just(2u8), 1 => 3u8..=4];
    (proptest::sample::select(devs), any::<bool>(), access.clone(), access, init, any::<u8>(), n)
        .prop_flat_map(|(dev, legacy, qp_atomic, mr_atomic, init, seed, n)| {
            [wr(init), wr(init), wr(init), wr(init)].prop_map(move |mut wrs| {
                // A misaligned WR where access is refused anyway: two remote faults.
                if !(qp_atomic && mr_atomic) {
                    wrs.iter_mut().for_each(|w| w.off -= w.off % 8);
                }
                Op::Atomic(AtomicOp { dev, legacy, qp_atomic, mr_atomic, init, seed, n, wrs })
            })
        })
        .boxed()
}
