//! 64-byte completion queue entries as the device writes them and the provider parses them
//! (rdma-core `mlx5dv.h` `mlx5_cqe64` / `mlx5_err_cqe`, and the signature-error CQE of
//! `providers/mlx5/cq.c`). All three end in the same `op_own` byte: the opcode in the high
//! nibble, then the CQE format, the solicited-event bit and the ownership bit.

use super::FieldError;
use super::view::layout;

/// Size in bytes of every CQE here.
pub const SIZE: usize = 64;

/// The byte offset of `mlx5_cqe64.timestamp` (64 bits, big-endian): what libmlx5's
/// `mlx5_cq_read_wc_completion_ts` returns. [`cqe64::TIMESTAMP`] is the same field.
pub const TIMESTAMP_AT: usize = 48;

/// `MLX5_CQE_OWNER_MASK`: the ownership bit of `op_own`.
pub const OWNER_MASK: u8 = 1;

/// `MLX5_CQE_*`: the opcode in `op_own`'s high nibble.
pub mod opcode {
    /// Requester completion (send side) of a WQE that asked for one.
    pub const REQ: u8 = 0;
    /// Responder: RDMA write with immediate.
    pub const RESP_WR_IMM: u8 = 1;
    /// Responder: SEND.
    pub const RESP_SEND: u8 = 2;
    /// Responder: SEND with immediate.
    pub const RESP_SEND_IMM: u8 = 3;
    /// Responder: SEND with invalidate.
    pub const RESP_SEND_INV: u8 = 4;
    /// Resize CQ.
    pub const RESIZE_CQ: u8 = 5;
    /// No packet (striding RQ filler).
    pub const NO_PACKET: u8 = 6;
    /// Signature error ([`SigErrCqe`](super::SigErrCqe)); the provider swallows it.
    pub const SIG_ERR: u8 = 12;
    /// Requester error ([`ErrCqe`](super::ErrCqe)).
    pub const REQ_ERR: u8 = 13;
    /// Responder error ([`ErrCqe`](super::ErrCqe)).
    pub const RESP_ERR: u8 = 14;
    /// Not yet written: the initial value software fills the CQ with.
    pub const INVALID: u8 = 15;

    /// The rdma-core name of a CQE opcode, for logs.
    pub fn name(op: u8) -> &'static str {
        match op {
            REQ => "REQ",
            RESP_WR_IMM => "RESP_WR_IMM",
            RESP_SEND => "RESP_SEND",
            RESP_SEND_IMM => "RESP_SEND_IMM",
            RESP_SEND_INV => "RESP_SEND_INV",
            RESIZE_CQ => "RESIZE_CQ",
            NO_PACKET => "NO_PACKET",
            SIG_ERR => "SIG_ERR",
            REQ_ERR => "REQ_ERR",
            RESP_ERR => "RESP_ERR",
            INVALID => "INVALID",
            _ => "UNKNOWN",
        }
    }
}

/// `MLX5_CQE_SYNDROME_*`: the `syndrome` of an error CQE.
pub mod syndrome {
    /// Local length error.
    pub const LOCAL_LENGTH_ERR: u8 = 0x01;
    /// Local QP operation error.
    pub const LOCAL_QP_OP_ERR: u8 = 0x02;
    /// Local protection error.
    pub const LOCAL_PROT_ERR: u8 = 0x04;
    /// Work request flushed.
    pub const WR_FLUSH_ERR: u8 = 0x05;
    /// Memory window bind error.
    pub const MW_BIND_ERR: u8 = 0x06;
    /// Bad response.
    pub const BAD_RESP_ERR: u8 = 0x10;
    /// Local access error.
    pub const LOCAL_ACCESS_ERR: u8 = 0x11;
    /// Remote invalid request.
    pub const REMOTE_INVAL_REQ_ERR: u8 = 0x12;
    /// Remote access error.
    pub const REMOTE_ACCESS_ERR: u8 = 0x13;
    /// Remote operation error.
    pub const REMOTE_OP_ERR: u8 = 0x14;
    /// Transport retries exceeded.
    pub const TRANSPORT_RETRY_EXC_ERR: u8 = 0x15;
    /// RNR retries exceeded.
    pub const RNR_RETRY_EXC_ERR: u8 = 0x16;
    /// Remote aborted.
    pub const REMOTE_ABORTED_ERR: u8 = 0x22;
    /// `MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT`: with REMOTE_ABORTED, an ODP page fault.
    pub const VENDOR_ODP_PFAULT: u8 = 0x93;
}

/// The opcode of the CQE at the start of `buf`.
pub fn peek_opcode(buf: &[u8]) -> Result<u8, FieldError> {
    Ok(crate::prm::View::<Cqe64>::new(buf)?.opcode())
}

/// True when software owns the CQE at the start of `buf`, polled at consumer index `index`
/// of a CQ of `cqe_cnt` entries (a power of two): written (opcode not INVALID), with the
/// ownership bit equal to the index's wrap parity.
pub fn sw_owned(buf: &[u8], index: u32, cqe_cnt: u32) -> Result<bool, FieldError> {
    let v = crate::prm::View::<Cqe64>::new(buf)?;
    Ok(v.opcode() != opcode::INVALID && v.owner() == (index & cqe_cnt != 0))
}

/// `struct mlx5_cqe64`: a good completion.
pub mod cqe64 {
    use super::layout;

    layout! {
        /// A completion, one member per field.
        struct Cqe64 = "mlx5_cqe64", super::SIZE;
        /// wqe_id: striding RQ WQE index.
        WQE_ID => wqe_id / set_wqe_id: u16 = (0x10, 16);
        /// ml_path: the path bits of the sender's LID.
        ML_PATH => ml_path / set_ml_path: u8 = (0x88, 8);
        /// slid: the sender's LID.
        SLID => slid / set_slid: u16 = (0xb0, 16);
        /// flags: the top byte of `flags_rqpn` (GRH present, packet type).
        FLAGS => flags / set_flags: u8 = (0xc0, 8);
        /// rqpn: the remote QPN (UD), the low 24 bits of `flags_rqpn`.
        RQPN => rqpn / set_rqpn: u32 = (0xc8, 24);
        /// hds_ip_ext.
        HDS_IP_EXT => hds_ip_ext / set_hds_ip_ext: u8 = (0xe0, 8);
        /// l4_hdr_type_etc.
        L4_HDR_TYPE_ETC => l4_hdr_type_etc / set_l4_hdr_type_etc: u8 = (0xe8, 8);
        /// vlan_info.
        VLAN_INFO => vlan_info / set_vlan_info: u16 = (0xf0, 16);
        /// srqn_uidx: the SRQ number or user index.
        SRQN_UIDX => srqn_uidx / set_srqn_uidx: u32 = (0x100, 32);
        /// imm_inval_pkey: immediate data, the invalidated rkey (RESP_SEND_INV) or the P_Key.
        IMM_INVAL_PKEY => imm_inval_pkey / set_imm_inval_pkey: u32 = (0x120, 32);
        /// app: application-specific completion kind (tag matching).
        APP => app / set_app: u8 = (0x140, 8);
        /// app_op.
        APP_OP => app_op / set_app_op: u8 = (0x148, 8);
        /// app_info.
        APP_INFO => app_info / set_app_info: u16 = (0x150, 16);
        /// byte_cnt: bytes transferred (received, or read by an RDMA read).
        BYTE_CNT => byte_cnt / set_byte_cnt: u32 = (0x160, 32);
        /// timestamp.
        TIMESTAMP => timestamp / set_timestamp: u64 = (0x180, 64);
        /// sop_drop: the top byte of `sop_drop_qpn`.
        SOP_DROP => sop_drop / set_sop_drop: u8 = (0x1c0, 8);
        /// qpn: the local QP the completion belongs to.
        QPN => qpn / set_qpn: u32 = (0x1c8, 24);
        /// wqe_counter: the `wqe_index` of the completed WQE.
        WQE_COUNTER => wqe_counter / set_wqe_counter: u16 = (0x1e0, 16);
        /// signature.
        SIGNATURE => signature / set_signature: u8 = (0x1f0, 8);
        /// opcode: one of [`opcode`](super::opcode).
        OPCODE => opcode / set_opcode: u8 = (0x1f8, 4);
        /// format: the CQE format (3 = compressed).
        FORMAT => format / set_format: u8 = (0x1fc, 2);
        /// se: solicited event.
        SE => se / set_se: bool = (0x1fe, 1);
        /// owner: flips every pass over the CQ.
        OWNER => owner / set_owner: bool = (0x1ff, 1);
    }

    impl Cqe64 {
        /// The `op_own` byte (byte 63).
        pub fn op_own(&self) -> u8 {
            super::op_own(self.opcode, self.format, self.se, self.owner)
        }
    }
}

/// `struct mlx5_err_cqe`: a requester or responder error.
pub mod err {
    use super::layout;

    layout! {
        /// An error completion, one member per field.
        struct ErrCqe = "mlx5_err_cqe", super::SIZE;
        /// srqn.
        SRQN => srqn / set_srqn: u32 = (0x100, 32);
        /// vendor_err_synd: reported as `wc.vendor_err`.
        VENDOR_ERR_SYND => vendor_err_synd / set_vendor_err_synd: u8 = (0x1b0, 8);
        /// syndrome: one of [`syndrome`](super::syndrome).
        SYNDROME => syndrome / set_syndrome: u8 = (0x1b8, 8);
        /// s_wqe_opcode: the failed WQE's opcode, the top byte of `s_wqe_opcode_qpn`.
        S_WQE_OPCODE => s_wqe_opcode / set_s_wqe_opcode: u8 = (0x1c0, 8);
        /// qpn: the low 24 bits of `s_wqe_opcode_qpn`.
        QPN => qpn / set_qpn: u32 = (0x1c8, 24);
        /// wqe_counter: the `wqe_index` of the failed WQE.
        WQE_COUNTER => wqe_counter / set_wqe_counter: u16 = (0x1e0, 16);
        /// signature.
        SIGNATURE => signature / set_signature: u8 = (0x1f0, 8);
        /// opcode: REQ_ERR or RESP_ERR.
        OPCODE => opcode / set_opcode: u8 = (0x1f8, 4);
        /// format.
        FORMAT => format / set_format: u8 = (0x1fc, 2);
        /// se.
        SE => se / set_se: bool = (0x1fe, 1);
        /// owner.
        OWNER => owner / set_owner: bool = (0x1ff, 1);
    }
}

/// `struct mlx5_sigerr_cqe`: a signature error found while moving data through a signature
/// mkey.
pub mod sigerr {
    use super::layout;

    /// `syndrome` bit: the reference tag differs.
    pub const SYNDROME_REFTAG: u16 = 1 << 11;
    /// `syndrome` bit: the application tag differs.
    pub const SYNDROME_APPTAG: u16 = 1 << 12;
    /// `syndrome` bit: the guard (CRC or checksum) differs.
    pub const SYNDROME_GUARD: u16 = 1 << 13;
    /// `sig_type`: a block signature.
    pub const SIG_TYPE_BLOCK: u8 = 0;
    /// `sig_type`: a transaction signature.
    pub const SIG_TYPE_TRANSACTION: u8 = 1;
    /// `domain`: the wire domain.
    pub const DOMAIN_WIRE: u8 = 0;
    /// `domain`: the memory domain.
    pub const DOMAIN_MEMORY: u8 = 1;

    layout! {
        /// A signature error completion, one member per field.
        struct SigErrCqe = "mlx5_sigerr_cqe", super::SIZE;
        /// expected_trans_sig: the upper half of the expected 64-bit signature value.
        EXPECTED_TRANS_SIG => expected_trans_sig / set_expected_trans_sig: u32 = (0x80, 32);
        /// actual_trans_sig: the upper half of the actual value.
        ACTUAL_TRANS_SIG => actual_trans_sig / set_actual_trans_sig: u32 = (0xa0, 32);
        /// expected_ref_tag: the lower half of the expected value.
        EXPECTED_REF_TAG => expected_ref_tag / set_expected_ref_tag: u32 = (0xc0, 32);
        /// actual_ref_tag: the lower half of the actual value.
        ACTUAL_REF_TAG => actual_ref_tag / set_actual_ref_tag: u32 = (0xe0, 32);
        /// syndrome: `SYNDROME_*` bits.
        SYNDROME => syndrome / set_syndrome: u16 = (0x100, 16);
        /// sig_type: `SIG_TYPE_*` (rdma-core reads the low 3 bits).
        SIG_TYPE => sig_type / set_sig_type: u8 = (0x115, 3);
        /// domain: `DOMAIN_*` (rdma-core reads the low 3 bits).
        DOMAIN => domain / set_domain: u8 = (0x11d, 3);
        /// mkey: the signature mkey; its index is `mkey >> 8`.
        MKEY => mkey / set_mkey: u32 = (0x120, 32);
        /// sig_err_offset: the offset of the failing block within the transfer.
        SIG_ERR_OFFSET => sig_err_offset / set_sig_err_offset: u64 = (0x140, 64);
        /// signature.
        SIGNATURE => signature / set_signature: u8 = (0x1f0, 8);
        /// opcode: SIG_ERR.
        OPCODE => opcode / set_opcode: u8 = (0x1f8, 4);
        /// format.
        FORMAT => format / set_format: u8 = (0x1fc, 2);
        /// se.
        SE => se / set_se: bool = (0x1fe, 1);
        /// owner.
        OWNER => owner / set_owner: bool = (0x1ff, 1);
    }

    impl SigErrCqe {
        /// The expected 64-bit value: `expected_trans_sig << 32 | expected_ref_tag`.
        pub fn expected(&self) -> u64 {
            u64::from(self.expected_trans_sig) << 32 | u64::from(self.expected_ref_tag)
        }

        /// The actual 64-bit value: `actual_trans_sig << 32 | actual_ref_tag`.
        pub fn actual(&self) -> u64 {
            u64::from(self.actual_trans_sig) << 32 | u64::from(self.actual_ref_tag)
        }

        /// Split an expected 64-bit value into its two halves.
        pub fn set_expected(&mut self, value: u64) {
            (self.expected_trans_sig, self.expected_ref_tag) = split(value);
        }

        /// Split an actual 64-bit value into its two halves.
        pub fn set_actual(&mut self, value: u64) {
            (self.actual_trans_sig, self.actual_ref_tag) = split(value);
        }
    }

    /// `(high, low)` halves of a 64-bit value.
    fn split(value: u64) -> (u32, u32) {
        ((value >> 32) as u32, value as u32)
    }
}

/// Compose an `op_own` byte; out-of-range parts are masked to their widths.
pub fn op_own(opcode: u8, format: u8, se: bool, owner: bool) -> u8 {
    (opcode & 0xf) << 4 | (format & 0x3) << 2 | u8::from(se) << 1 | u8::from(owner)
}

pub use cqe64::Cqe64;
pub use err::ErrCqe;
pub use sigerr::SigErrCqe;

#[cfg(test)]
mod tests;
