//! Tag-matching CQEs (`MLX5_CQE_APP_TAG_MATCHING` in `mlx5_cqe64.app`): a receive on a
//! tag-matching SRQ (a RESP_SEND CQE whose `app_op` says how it matched) and the completion of
//! a matching-list operation (a NO_PACKET CQE), as libmlx5's `handle_tag_matching` reads them.

use mlx5_dv::prm::cqe;

use super::Sender;

/// `mlx5_cqe64.app` of a tag-matching CQE.
pub const APP_TAG_MATCHING: u8 = 1;

/// `MLX5_CQE_APP_OP_TM_*`: what a tag-matching CQE reports.
pub mod app_op {
    /// The first completion of a matched message whose data is still to come (rendezvous).
    pub const CONSUMED: u8 = 0x1;
    /// The second completion: the matched message's data is in the tag's buffer.
    pub const EXPECTED: u8 = 0x2;
    /// A tagged message no posted tag took: it went to an ordinary SRQ WQE.
    pub const UNEXPECTED: u8 = 0x3;
    /// A `IBV_TMH_NO_TAG` message, in an ordinary SRQ WQE.
    pub const NO_TAG: u8 = 0x4;
    /// An APPEND (`IBV_WR_TAG_ADD`) done.
    pub const APPEND: u8 = 0x5;
    /// A REMOVE (`IBV_WR_TAG_DEL`) done or refused.
    pub const REMOVE: u8 = 0x6;
    /// A NOP (`IBV_WR_TAG_SYNC`) done.
    pub const NOOP: u8 = 0x7;
    /// A matched rendezvous the device left to software (its buffer was too small).
    pub const CONSUMED_MSG_SW_RDNV: u8 = 0xb;
    /// The first completion of a match left to software, data still to come.
    pub const CONSUMED_SW_RDNV: u8 = 0x9;
    /// A matched message whole: matched and its data delivered (eager).
    pub const CONSUMED_MSG: u8 = 0xa;
    /// A matched message whose transfer failed.
    pub const MSG_COMPLETION_CANCELED: u8 = 0xc;
}

/// `MLX5_TMC_SUCCESS` in `mlx5_tm_cqe.success`.
pub const TMC_SUCCESS: u32 = 0x8000_0000;

/// A tag-matching CQE as the device reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TmCqe {
    /// A message received on a tag-matching SRQ.
    Recv {
        /// The QP it arrived on.
        qpn: u32,
        /// The SRQ (`srqn_uidx`).
        srqn: u32,
        /// The ordinary WQE it took (unexpected, no tag); 0 for a matched one.
        wqe_counter: u16,
        /// [`app_op`].
        app_op: u8,
        /// The matched entry's index (`app_info`).
        app_info: u16,
        /// Bytes delivered.
        byte_cnt: u32,
        /// The message's tag-matching header, scattered into the CQE of a match (zero for
        /// the others, and for the second completion of a rendezvous).
        tmh: [u8; 16],
        /// The sender.
        from: Sender,
    },
    /// A matching-list operation of the SRQ's command QP.
    List {
        /// The command QP.
        qpn: u32,
        /// The SRQ.
        srqn: u32,
        /// [`app_op::APPEND`], [`app_op::REMOVE`] or [`app_op::NOOP`].
        app_op: u8,
        /// Whether it took effect (`MLX5_TMC_SUCCESS`).
        success: bool,
        /// The device's count of unexpected messages (`hw_phase_cnt`).
        phase: u16,
    },
}

impl TmCqe {
    /// The 64 bytes of the CQE, with the ownership bit `owner`.
    pub fn encode(&self, owner: bool) -> [u8; cqe::SIZE] {
        let mut b = [0u8; cqe::SIZE];
        let (qpn, srqn, wqe_counter, op, app_op, app_info, byte_cnt) = match self {
            TmCqe::Recv { qpn, srqn, wqe_counter, app_op, app_info, byte_cnt, tmh, from } => {
                b[22..24].copy_from_slice(&from.slid.to_be_bytes());
                b[24..28].copy_from_slice(&(u32::from(from.flags) << 24 | (from.qpn & 0xff_ffff)).to_be_bytes());
                // The TMH lies over the first 16 bytes (the union in mlx5_cqe64).
                b[..16].copy_from_slice(tmh);
                // A match whose data is still to come is no packet's completion.
                let op = if *app_op == app_op::CONSUMED { cqe::opcode::NO_PACKET } else { cqe::opcode::RESP_SEND };
                (*qpn, *srqn, *wqe_counter, op, *app_op, *app_info, *byte_cnt)
            }
            TmCqe::List { qpn, srqn, app_op, success, phase } => {
                let s = if *success { TMC_SUCCESS } else { 0 };
                b[..4].copy_from_slice(&s.to_be_bytes());
                b[4..6].copy_from_slice(&phase.to_be_bytes());
                (*qpn, *srqn, 0, cqe::opcode::NO_PACKET, *app_op, 0, 0)
            }
        };
        b[32..36].copy_from_slice(&(srqn & 0xff_ffff).to_be_bytes());
        b[40] = APP_TAG_MATCHING;
        b[41] = app_op;
        b[42..44].copy_from_slice(&app_info.to_be_bytes());
        b[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
        b[56..60].copy_from_slice(&(qpn & 0xff_ffff).to_be_bytes());
        b[60..62].copy_from_slice(&wqe_counter.to_be_bytes());
        b[63] = cqe::op_own(op, 0, false, owner);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_cqe_bytes_are_where_libmlx5_reads_them() {
        let c = TmCqe::List { qpn: 0x12, srqn: 0x34, app_op: app_op::REMOVE, success: true, phase: 3 };
        let b = c.encode(true);
        assert_eq!(&b[..6], &[0x80, 0, 0, 0, 0, 3]);
        assert_eq!((b[40], b[41]), (APP_TAG_MATCHING, app_op::REMOVE));
        assert_eq!(&b[32..36], &[0, 0, 0, 0x34]);
        assert_eq!(b[63], cqe::opcode::NO_PACKET << 4 | 1);
    }

    #[test]
    fn recv_cqe_carries_the_tmh_and_the_entry() {
        let mut tmh = [0u8; 16];
        tmh[0] = 3;
        tmh[8..].copy_from_slice(&0x1234u64.to_be_bytes());
        let from = Sender { qpn: 9, ..Sender::default() };
        let c = TmCqe::Recv {
            qpn: 7,
            srqn: 2,
            wqe_counter: 0,
            app_op: app_op::CONSUMED_MSG,
            app_info: 5,
            byte_cnt: 48,
            tmh,
            from,
        };
        let b = c.encode(false);
        assert_eq!(&b[..16], &tmh);
        assert_eq!(&b[42..44], &[0, 5]);
        assert_eq!(&b[44..48], &48u32.to_be_bytes());
        assert_eq!(&b[24..28], &9u32.to_be_bytes());
        assert_eq!(b[63] >> 4, cqe::opcode::RESP_SEND);
    }
}
