//! What a scenario ([`super::Op::Sig`], [`super::Op::Crypto`], [`super::Op::Net`],
//! [`super::Op::Atomic`], [`super::Op::Mw`], [`super::Op::Ud`], [`super::Op::Srq`],
//! [`super::Op::Uc`], [`super::Op::Xrc`]) leaves: the completions it polled, the bytes it
//! read back, the `mlx5dv_mkey_check` answers and the states its QPs end in.

use mlx5_dv::MkeyErr;

/// The observable result of one scenario, as the model predicts it and as a backend gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// `(status, opcode if the status is success)` of each completion polled, in order.
    pub cqes: Vec<(u32, Option<u32>)>,
    /// Named byte regions read back after the transfers.
    pub bytes: Vec<(&'static str, Vec<u8>)>,
    /// The answers of `mlx5dv_mkey_check`, in order.
    pub checks: Vec<MkeyErr>,
    /// The errno `ibv_wr_complete` of the configure answered, if it failed.
    pub refused: Option<i32>,
    /// Completions with their wr_ids, lengths and immediates (network, atomics and window
    /// scenarios), in order per side.
    pub wcs: Vec<NetCqe>,
    /// The states (`enum ibv_qp_state`) the scenario's QPs end in.
    pub states: Vec<u32>,
    /// Byte ranges of named regions the model leaves open: not compared.
    pub open: Vec<(&'static str, std::ops::Range<usize>)>,
}

/// A completion of a network, atomics or window scenario: its side, wr_id and status; for a
/// success its opcode, for a receive, a READ or an atomic its length, and for a receive its
/// immediate (of a receive with `IBV_WC_WITH_INV` in a window scenario: 1 when it names the
/// key invalidated, else 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetCqe {
    /// A receive completion, else the requester's.
    pub recv: bool,
    /// The WR's id.
    pub wr_id: u64,
    /// `enum ibv_wc_status`.
    pub status: u32,
    /// `enum ibv_wc_opcode`, for a success.
    pub opcode: Option<u32>,
    /// `byte_len`, for a successful receive (and READ or atomic in the scenarios that say).
    pub byte_len: Option<u32>,
    /// The immediate, for a successful receive that has one.
    pub imm: Option<u32>,
}

impl NetCqe {
    /// A requester's completion of WR `wr_id`: no length, no immediate.
    pub fn sent(wr_id: u64, status: u32, opcode: Option<u32>) -> Self {
        NetCqe { recv: false, wr_id, status, opcode, byte_len: None, imm: None }
    }
}

impl Outcome {
    /// Where `got` first differs from `self` (the model's), in words; `None` when equal.
    pub fn differs(&self, got: &Outcome) -> Option<String> {
        if self.refused != got.refused {
            return Some(format!(
                "the configure: the model expects {:?}, the backend answers {:?} (errno; None: posted)",
                self.refused, got.refused
            ));
        }
        if self.cqes != got.cqes {
            return Some(format!("completions: the model expects {:?}, the backend gives {:?}", self.cqes, got.cqes));
        }
        if self.wcs != got.wcs {
            return Some(format!("completions: the model expects {:?}, the backend gives {:?}", self.wcs, got.wcs));
        }
        if self.states != got.states {
            return Some(format!("QP states: the model expects {:?}, the backend has {:?}", self.states, got.states));
        }
        for ((name, want), (_, have)) in self.bytes.iter().zip(&got.bytes) {
            let open = |i: &usize| self.open.iter().any(|(n, r)| n == name && r.contains(i));
            if let Some(i) = (0..want.len().max(have.len())).find(|i| !open(i) && want.get(*i) != have.get(*i)) {
                let w = want.get(i..want.len().min(i + 8)).unwrap_or_default();
                let h = have.get(i..have.len().min(i + 8)).unwrap_or_default();
                return Some(format!(
                    "{name} bytes differ from byte {i}: the model has {w:02x?}, the backend {h:02x?}"
                ));
            }
        }
        if self.bytes.len() != got.bytes.len() {
            return Some(format!("{} byte regions expected, {} read", self.bytes.len(), got.bytes.len()));
        }
        if self.checks != got.checks {
            return Some(format!(
                "mlx5dv_mkey_check: the model expects {:?}, the backend answers {:?}",
                self.checks, got.checks
            ));
        }
        None
    }
}
