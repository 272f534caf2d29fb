//! `ibv_modify_qp` of DC QPs in the kernel: `modify_dci_qp_is_ok` for a DCI (RESET to INIT
//! to RTR to RTS, each with its own required and optional attributes), `mlx5_ib_modify_dct`
//! for a DCT (RESET to INIT, then INIT to RTR, which creates it in the device; nothing else).

use mlx5_dv::errno::EINVAL;
use mlx5_dv::prm::queues as q;
use mlx5_dv::{Error, Op, QpAttrMask as M, QpModify, QpState, Result};

use super::Kernel;

/// `is_valid_mask`: every required attribute, and nothing past the required and optional.
fn valid(mask: M, req: M, opt: M) -> bool {
    mask.contains(req) && (mask - (req | opt)).is_empty()
}

/// A DCI's required and optional attributes of a transition; `None` for one it cannot take.
fn dci_masks(cur: QpState, to: QpState) -> Option<(M, M)> {
    use QpState::{Err, Init, Reset, Rtr, Rts};
    let s = M::STATE;
    Some(match (cur, to) {
        (_, Reset) => (s, M::empty()),
        (Reset, Init) => (s | M::PKEY_INDEX | M::PORT, M::empty()),
        (Init, Init) => (s, M::PKEY_INDEX | M::PORT),
        (Init, Rtr) => (s | M::PATH_MTU, M::PKEY_INDEX | M::AV),
        (Rtr, Rts) => {
            (s | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::MAX_QP_RD_ATOMIC | M::SQ_PSN, M::MIN_RNR_TIMER)
        }
        (Rts, Rts) => (s, M::MIN_RNR_TIMER),
        (c, Err) if c != Reset => (s, M::empty()),
        _ => return None,
    })
}

/// A DCT's required attributes of a transition (none are optional); `None` for another.
fn dct_masks(cur: QpState, to: QpState) -> Option<M> {
    use QpState::{Init, Reset, Rtr};
    let s = M::STATE;
    match (cur, to) {
        (Reset, Init) => Some(s | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PORT),
        (Init, Rtr) => Some(s | M::MIN_RNR_TIMER | M::AV | M::PATH_MTU),
        _ => None,
    }
}

impl Kernel {
    /// The checks of a DC QP's modify, with the mask the call stands for (a default
    /// transition's: exactly the required attributes, with the AV where a path is given).
    pub(super) fn check_dc_modify(&self, st: u8, cur: QpState, m: &QpModify) -> Result<(QpState, QpState, M)> {
        let op = Op::ModifyQp;
        let dct = st == q::st::DCT;
        let to = m.state;
        let mask = match &m.ext {
            Some(e) => e.mask,
            None => {
                let req = if dct { dct_masks(cur, to) } else { dci_masks(cur, to).map(|(r, _)| r) };
                let av = if !dct && to == QpState::Rtr && m.dest.is_some() { M::AV } else { M::empty() };
                req.unwrap_or(M::STATE) | av
            }
        };
        if !mask.contains(M::STATE) {
            return Err(Error::new(op, EINVAL, "a DC QP's modify needs IBV_QP_STATE"));
        }
        let ok = if dct {
            dct_masks(cur, to).is_some_and(|req| valid(mask, req, M::empty()))
        } else {
            dci_masks(cur, to).is_some_and(|(req, opt)| valid(mask, req, opt))
        };
        if !ok {
            let who = if dct { "mlx5_ib_modify_dct" } else { "modify_dci_qp_is_ok" };
            let why = format!("{who} refuses {cur:?} -> {to:?} with attr_mask {:#x}", mask.bits());
            return Err(Error::new(op, EINVAL, why));
        }
        let port = m.ext.map_or(1, |e| e.port_num);
        if mask.contains(M::PORT) && (port == 0 || port > self.limits.ports) {
            return Err(Error::new(op, EINVAL, format!("port_num {port} is not a port of the device")));
        }
        if dct && to == QpState::Rtr && m.dest.is_none() {
            return Err(Error::new(op, EINVAL, "a DCT's RTR needs the address (IBV_QP_AV)"));
        }
        Ok((cur, to, mask))
    }
}
