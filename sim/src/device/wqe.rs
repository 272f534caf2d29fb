//! The provider → device interface: send WQEs as the provider builds them, and the CQEs the
//! device writes back. They are Rust structures, not PRM bytes; keep this seam narrow.

use mlx5_dv::{Sge, Wc};

use super::firmware::Translation;
use crate::signature::SigConfig;

/// What a UMR WQE writes into an mkey (the fields of its mkey context segment under the mask).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UmrWqe {
    /// The target mkey index (`imm >> 8`).
    pub index: u32,
    /// The new tag (`qpn_mkey & 0xff`).
    pub tag: u8,
    /// New access flags (LW|RR|RW|A), if the setter ran.
    pub access: Option<u32>,
    /// New length and translation, if a layout setter ran.
    pub layout: Option<(u64, Translation)>,
    /// BSF enable written as 0 (signature mkey without attributes).
    pub bsf_disable: bool,
    /// A new signature BSF.
    pub sig_bsf: Option<SigConfig>,
}

/// What a WQE asks the device to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WqeKind {
    /// RDMA WRITE, with immediate if `imm`.
    Write {
        /// Remote key.
        rkey: u32,
        /// Remote address.
        raddr: u64,
        /// Local gather list.
        sge: Vec<Sge>,
        /// Immediate data.
        imm: Option<u32>,
    },
    /// RDMA READ.
    Read {
        /// Remote key.
        rkey: u32,
        /// Remote address.
        raddr: u64,
        /// Local scatter list.
        sge: Vec<Sge>,
    },
    /// SEND, with immediate or with invalidate.
    Send {
        /// Local gather list.
        sge: Vec<Sge>,
        /// Immediate data.
        imm: Option<u32>,
        /// The rkey the responder invalidates.
        inv: Option<u32>,
    },
    /// LOCAL_INV of `key`.
    LocalInv {
        /// The key to invalidate.
        key: u32,
    },
    /// UMR (mkey configure).
    Umr(UmrWqe),
    /// A WQE cancelled by `mlx5dv_qp_cancel_posted_send_wrs`: it completes and moves nothing.
    Nop,
    /// SET_PSV: re-initialise a PSV of the signature mkey with this index.
    SetPsv {
        /// The signature mkey's index.
        index: u32,
        /// The transient signature written.
        transient: u64,
    },
}

impl WqeKind {
    /// The mlx5 WQE opcode (`MLX5_OPCODE_*`).
    pub fn opcode(&self) -> u8 {
        match self {
            WqeKind::Write { imm: None, .. } => 0x08,
            WqeKind::Write { imm: Some(_), .. } => 0x09,
            WqeKind::Read { .. } => 0x10,
            WqeKind::Send { inv: Some(_), .. } => 0x01,
            WqeKind::Send { imm: Some(_), .. } => 0x0b,
            WqeKind::Send { .. } => 0x0a,
            WqeKind::LocalInv { .. } | WqeKind::Umr(_) => 0x25,
            WqeKind::SetPsv { .. } => 0x20,
            WqeKind::Nop => 0x00,
        }
    }
}

/// A posted send WQE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wqe {
    /// The application's id, returned in the CQE.
    pub wr_id: u64,
    /// The ctrl segment asks for a CQE.
    pub signaled: bool,
    /// The `ibv_wc_opcode` its CQE carries.
    pub opcode: u32,
    /// What it does.
    pub kind: WqeKind,
    /// Its sequence number in the send queue (the provider's producer counter).
    pub seq: u64,
}

/// A SIG_ERR CQE's payload: the error the device found (`struct mlx5_sigerr_cqe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct SigErrCqe {
    /// CQE syndrome (REFTAG / APPTAG / GUARD bits).
    pub syndrome: u16,
    /// `expected_trans_sig << 32 | expected_ref_tag`.
    pub expected: u64,
    /// `actual_trans_sig << 32 | actual_ref_tag`.
    pub actual: u64,
    /// Block-boundary offset.
    pub offset: u64,
    /// CQE sig_type (0 = block).
    pub sig_type: u8,
    /// CQE domain (0 = wire, 1 = memory).
    pub domain: u8,
}

/// Data the device put in a CQE (scatter-to-CQE), which the provider copies out at poll time.
#[derive(Debug, Clone)]
pub struct InlineScatter {
    /// The payload.
    pub data: Vec<u8>,
    /// The receive WQE's scatter list.
    pub sge: Vec<Sge>,
}

/// A CQE as the device wrote it.
#[derive(Debug, Clone)]
pub struct Cqe {
    /// The work completion.
    pub wc: Wc,
    /// The QP number it belongs to.
    pub qpn: u32,
    /// For send-side CQEs: the sequence number of the WQE it retires (with all before it).
    pub sq_seq: Option<u64>,
    /// Scatter-to-CQE data.
    pub scatter: Option<InlineScatter>,
    /// A SIG_ERR CQE: the mkey index and the error; the provider consumes it.
    pub sig_err: Option<(u32, SigErrCqe)>,
}

impl Cqe {
    /// A plain CQE.
    pub fn new(wc: Wc, qpn: u32, sq_seq: Option<u64>) -> Self {
        Cqe { wc, qpn, sq_seq, scatter: None, sig_err: None }
    }
}
