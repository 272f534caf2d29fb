//! The attributes of `ibv_modify_qp` beyond the state, the access flags and the path, with the
//! mask that says which of them a call carries (`enum ibv_qp_attr_mask`).

use bitflags::bitflags;
use serde::{Deserialize, Serialize};

use super::QpState;

bitflags! {
    /// `enum ibv_qp_attr_mask`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub struct QpAttrMask: u32 {
        /// `IBV_QP_STATE`.
        const STATE = 1 << 0;
        /// `IBV_QP_CUR_STATE`.
        const CUR_STATE = 1 << 1;
        /// `IBV_QP_EN_SQD_ASYNC_NOTIFY`.
        const EN_SQD_ASYNC_NOTIFY = 1 << 2;
        /// `IBV_QP_ACCESS_FLAGS`.
        const ACCESS_FLAGS = 1 << 3;
        /// `IBV_QP_PKEY_INDEX`.
        const PKEY_INDEX = 1 << 4;
        /// `IBV_QP_PORT`.
        const PORT = 1 << 5;
        /// `IBV_QP_QKEY`.
        const QKEY = 1 << 6;
        /// `IBV_QP_AV`.
        const AV = 1 << 7;
        /// `IBV_QP_PATH_MTU`.
        const PATH_MTU = 1 << 8;
        /// `IBV_QP_TIMEOUT`.
        const TIMEOUT = 1 << 9;
        /// `IBV_QP_RETRY_CNT`.
        const RETRY_CNT = 1 << 10;
        /// `IBV_QP_RNR_RETRY`.
        const RNR_RETRY = 1 << 11;
        /// `IBV_QP_RQ_PSN`.
        const RQ_PSN = 1 << 12;
        /// `IBV_QP_MAX_QP_RD_ATOMIC`.
        const MAX_QP_RD_ATOMIC = 1 << 13;
        /// `IBV_QP_ALT_PATH`.
        const ALT_PATH = 1 << 14;
        /// `IBV_QP_MIN_RNR_TIMER`.
        const MIN_RNR_TIMER = 1 << 15;
        /// `IBV_QP_SQ_PSN`.
        const SQ_PSN = 1 << 16;
        /// `IBV_QP_MAX_DEST_RD_ATOMIC`.
        const MAX_DEST_RD_ATOMIC = 1 << 17;
        /// `IBV_QP_PATH_MIG_STATE`.
        const PATH_MIG_STATE = 1 << 18;
        /// `IBV_QP_CAP`.
        const CAP = 1 << 19;
        /// `IBV_QP_DEST_QPN`.
        const DEST_QPN = 1 << 20;
        /// `IBV_QP_RATE_LIMIT`.
        const RATE_LIMIT = 1 << 25;
    }
}

impl QpAttrMask {
    /// The bits `ibv_cmd_modify_qp` passes to the kernel: those below `IBV_QP_RATE_LIMIT`
    /// (`IB_QP_ATTR_STANDARD_BITS`).
    pub const STANDARD: QpAttrMask = QpAttrMask::from_bits_retain((1 << 21) - 1);
}

/// What `ibv_modify_qp` carries besides the state, the access flags and the path: the
/// `struct ibv_qp_attr` fields by their C names, and the mask that says which of all the
/// attributes (these, [`super::QpModify`]'s state, access flags and path) the call sets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct QpAttrExt {
    /// `attr_mask`: which attributes the call sets.
    pub mask: QpAttrMask,
    /// `cur_qp_state` (with `CUR_STATE`).
    pub cur_qp_state: Option<QpState>,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `port_num`.
    pub port_num: u8,
    /// `qkey`.
    pub qkey: u32,
    /// `rq_psn`: the PSN the responder expects first.
    pub rq_psn: u32,
    /// `sq_psn`: the PSN of the first request.
    pub sq_psn: u32,
    /// `timeout`: the local ACK timeout, 4.096 µs × 2^timeout (0: infinite).
    pub timeout: u8,
    /// `retry_cnt`: transport retries before RETRY_EXC_ERR.
    pub retry_cnt: u8,
    /// `rnr_retry`: RNR retries before RNR_RETRY_EXC_ERR (7: infinite).
    pub rnr_retry: u8,
    /// `min_rnr_timer`: the RNR NAK timer the responder asks for.
    pub min_rnr_timer: u8,
    /// `max_rd_atomic`: outstanding RDMA READs and atomics as requester.
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic`: outstanding RDMA READs and atomics as responder.
    pub max_dest_rd_atomic: u8,
    /// `path_mig_state`.
    pub path_mig_state: u32,
    /// `en_sqd_async_notify`.
    pub en_sqd_async_notify: u8,
    /// `rate_limit`.
    pub rate_limit: u32,
}

impl QpAttrExt {
    /// The attributes a connected QP's path takes when the caller leaves them to the
    /// backend: PSNs 0, the ACK timeout 14 (67 ms), 7 retries of each kind, an RNR timer of
    /// 12 (0.64 ms), one outstanding READ each way, port 1, P_Key index 0.
    pub fn defaults() -> Self {
        QpAttrExt {
            port_num: 1,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            ..QpAttrExt::default()
        }
    }
}

/// The kernel's `qp_state_table` (`ib_modify_qp_is_ok`): for a transition of a QP of
/// `qp_type` (`enum ibv_qp_type`), the attributes it requires and those it may carry, or
/// `None` when the transition is not allowed.
pub fn qp_transition(qp_type: u32, from: QpState, to: QpState) -> Option<(QpAttrMask, QpAttrMask)> {
    use super::qp_type as t;
    use QpState::{Err, Init, Reset, Rtr, Rts, Sqd, Sqe};
    type M = QpAttrMask;
    let none = M::empty();
    let (rc, uc, ud, raw, xrc_ini, xrc_tgt) = (t::RC, t::UC, t::UD, t::RAW_PACKET, t::XRC_SEND, t::XRC_RECV);
    let pick = |entries: &[(u32, M)]| entries.iter().find(|(ty, _)| *ty == qp_type).map_or(none, |(_, m)| *m);
    let (req, opt) = match (from, to) {
        // Out of RESET only INIT (and RESET again); from any other state, RESET and ERR.
        (Reset, Reset) => (none, none),
        (Reset, Err) => return None,
        (_, Reset) | (_, Err) => (none, none),
        (Reset, Init) => {
            let conn = M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS;
            let ud_like = M::PKEY_INDEX | M::PORT | M::QKEY;
            (pick(&[(ud, ud_like), (raw, M::PORT), (uc, conn), (rc, conn), (xrc_ini, conn), (xrc_tgt, conn)]), none)
        }
        (Init, Init) => {
            let conn = M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS;
            (
                none,
                pick(&[
                    (ud, M::PKEY_INDEX | M::PORT | M::QKEY),
                    (uc, conn),
                    (rc, conn),
                    (xrc_ini, conn),
                    (xrc_tgt, conn),
                ]),
            )
        }
        (Init, Rtr) => {
            let base = M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN;
            let full = base | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER;
            let req = pick(&[(uc, base), (rc, full), (xrc_ini, base), (xrc_tgt, full)]);
            let conn = M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX;
            let opt = pick(&[(ud, M::PKEY_INDEX | M::QKEY), (uc, conn), (rc, conn), (xrc_ini, conn), (xrc_tgt, conn)]);
            (req, opt)
        }
        (Rtr, Rts) => {
            let rc_req = M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC;
            let req = pick(&[
                (ud, M::SQ_PSN),
                (uc, M::SQ_PSN),
                (rc, rc_req),
                (xrc_ini, rc_req),
                (xrc_tgt, M::TIMEOUT | M::SQ_PSN),
            ]);
            let mig = M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE;
            let opt = pick(&[
                (ud, M::CUR_STATE | M::QKEY),
                (uc, mig),
                (rc, mig | M::MIN_RNR_TIMER),
                (xrc_ini, mig),
                (xrc_tgt, mig | M::MIN_RNR_TIMER),
                (raw, M::RATE_LIMIT),
            ]);
            (req, opt)
        }
        (Rts, Rts) => {
            let mig = M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE;
            let opt = pick(&[
                (ud, M::CUR_STATE | M::QKEY),
                (uc, mig),
                (rc, mig | M::MIN_RNR_TIMER),
                (xrc_ini, mig),
                (xrc_tgt, mig | M::MIN_RNR_TIMER),
                (raw, M::RATE_LIMIT),
            ]);
            (none, opt)
        }
        (Rts, Sqd) => {
            let n = M::EN_SQD_ASYNC_NOTIFY;
            (none, pick(&[(ud, n), (uc, n), (rc, n), (xrc_ini, n), (xrc_tgt, n)]))
        }
        (Sqd, Rts) => {
            let mig = M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE;
            let opt = pick(&[
                (ud, M::CUR_STATE | M::QKEY),
                (uc, mig),
                (rc, mig | M::MIN_RNR_TIMER),
                (xrc_ini, mig),
                (xrc_tgt, mig | M::MIN_RNR_TIMER),
            ]);
            (none, opt)
        }
        (Sqd, Sqd) => {
            let rc_all = M::PORT
                | M::AV
                | M::TIMEOUT
                | M::RETRY_CNT
                | M::RNR_RETRY
                | M::MAX_QP_RD_ATOMIC
                | M::MAX_DEST_RD_ATOMIC
                | M::ALT_PATH
                | M::ACCESS_FLAGS
                | M::PKEY_INDEX
                | M::MIN_RNR_TIMER
                | M::PATH_MIG_STATE;
            let ini = rc_all - M::MAX_DEST_RD_ATOMIC - M::MIN_RNR_TIMER;
            let tgt = rc_all - M::RETRY_CNT - M::RNR_RETRY - M::MAX_QP_RD_ATOMIC;
            let uc_opt = M::AV | M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PATH_MIG_STATE;
            let opt =
                pick(&[(ud, M::PKEY_INDEX | M::QKEY), (uc, uc_opt), (rc, rc_all), (xrc_ini, ini), (xrc_tgt, tgt)]);
            (none, opt)
        }
        (Sqe, Rts) => (none, pick(&[(ud, M::CUR_STATE | M::QKEY), (uc, M::CUR_STATE | M::ACCESS_FLAGS)])),
        _ => return None,
    };
    Some((req, opt))
}
