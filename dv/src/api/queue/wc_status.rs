/// `IBV_WC_SUCCESS`.
pub const SUCCESS: u32 = 0;
/// `IBV_WC_LOC_LEN_ERR`.
pub const LOC_LEN_ERR: u32 = 1;
/// `IBV_WC_LOC_QP_OP_ERR`.
pub const LOC_QP_OP_ERR: u32 = 2;
/// `IBV_WC_LOC_PROT_ERR`.
pub const LOC_PROT_ERR: u32 = 4;
/// `IBV_WC_WR_FLUSH_ERR`.
pub const WR_FLUSH_ERR: u32 = 5;
/// `IBV_WC_MW_BIND_ERR`.
pub const MW_BIND_ERR: u32 = 6;
/// `IBV_WC_BAD_RESP_ERR`.
pub const BAD_RESP_ERR: u32 = 7;
/// `IBV_WC_LOC_ACCESS_ERR`.
pub const LOC_ACCESS_ERR: u32 = 8;
/// `IBV_WC_REM_INV_REQ_ERR`.
pub const REM_INV_REQ_ERR: u32 = 9;
/// `IBV_WC_REM_ACCESS_ERR`.
pub const REM_ACCESS_ERR: u32 = 10;
/// `IBV_WC_REM_OP_ERR`.
pub const REM_OP_ERR: u32 = 11;
/// `IBV_WC_RETRY_EXC_ERR`.
pub const RETRY_EXC_ERR: u32 = 12;
/// `IBV_WC_RNR_RETRY_EXC_ERR`.
pub const RNR_RETRY_EXC_ERR: u32 = 13;
/// `IBV_WC_REM_ABORT_ERR`.
pub const REM_ABORT_ERR: u32 = 16;
/// `IBV_WC_GENERAL_ERR`.
pub const GENERAL_ERR: u32 = 21;
/// `IBV_WC_TM_ERR`: a tag-matching list operation failed (a DEL of a consumed tag).
pub const TM_ERR: u32 = 22;
/// `IBV_WC_TM_RNDV_INCOMPLETE`: a matched rendezvous left for software to finish.
pub const TM_RNDV_INCOMPLETE: u32 = 23;
