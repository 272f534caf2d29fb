//! The mirrored structs and constants against the installed C headers: a small C program,
//! compiled with `cc`, prints each size, offset and value, and each must equal ours.
//!
//! The PRM byte layouts (`mlx5_dv::prm::wqe`, `mlx5_dv::prm::cqe`) are checked the same way:
//! segment sizes, the byte offset of each C member against the first byte of our field, the
//! opcode and flag constants, the header's flag values against the bytes our codecs write,
//! and the header's own inline writers and readers against our bytes.

use std::mem::{offset_of, size_of};
use std::process::Command;

use mlx5_dv::prm::cqe::{self, Cqe64, ErrCqe};
use mlx5_dv::prm::wqe::{self, CtrlSeg, DataSeg, InlineSeg, MkeyContextSeg, ctrl, umr_ctrl};
use mlx5_dv::prm::{Layout, mkc};
use mlx5_dv::{
    AccessFlags, ContextFlags, CryptoLoginState, DekState, MkeyErrType, MkeyInitFlags, QpState, SendFlags, crypto,
    crypto_cap, dv_qp, event_type, qp_type, send_ops, sig, sig_cap, wc_flags, wc_opcode, wc_status,
};
use mlx5_hw::sys::mlx5dv::*;

/// `(C expression, our value)`.
fn table() -> Vec<(&'static str, u64)> {
    macro_rules! size {
        ($t:ident) => {
            (concat!("sizeof(struct ", stringify!($t), ")"), size_of::<$t>() as u64)
        };
    }
    macro_rules! off {
        ($t:ident, $f:ident) => {
            (concat!("offsetof(struct ", stringify!($t), ", ", stringify!($f), ")"), offset_of!($t, $f) as u64)
        };
    }
    macro_rules! off_as {
        ($t:ident, $f:ident, $c:literal) => {
            (concat!("offsetof(struct ", stringify!($t), ", ", $c, ")"), offset_of!($t, $f) as u64)
        };
    }
    macro_rules! val {
        ($c:ident, $v:expr) => {
            (stringify!($c), Bits::bits64($v))
        };
    }
    vec![
        size!(mlx5dv_mkey_init_attr),
        off!(mlx5dv_mkey_init_attr, pd),
        off!(mlx5dv_mkey_init_attr, create_flags),
        off!(mlx5dv_mkey_init_attr, max_entries),
        size!(mlx5dv_mkey),
        off!(mlx5dv_mkey, lkey),
        off!(mlx5dv_mkey, rkey),
        size!(mlx5dv_context_attr),
        off!(mlx5dv_context_attr, flags),
        off!(mlx5dv_context_attr, comp_mask),
        size!(mlx5dv_context),
        off!(mlx5dv_context, comp_mask),
        off!(mlx5dv_context, sig_caps),
        off!(mlx5dv_context, crypto_caps),
        size!(mlx5dv_sig_caps),
        off!(mlx5dv_sig_caps, block_size),
        off!(mlx5dv_sig_caps, block_prot),
        off!(mlx5dv_sig_caps, t10dif_bg),
        off!(mlx5dv_sig_caps, crc_type),
        size!(mlx5dv_crypto_caps),
        off!(mlx5dv_crypto_caps, failed_selftests),
        off!(mlx5dv_crypto_caps, crypto_engines),
        off!(mlx5dv_crypto_caps, wrapped_import_method),
        off!(mlx5dv_crypto_caps, log_max_num_deks),
        off!(mlx5dv_crypto_caps, flags),
        size!(mlx5dv_mkey_err),
        off!(mlx5dv_mkey_err, err_type),
        off!(mlx5dv_mkey_err, err),
        size!(mlx5dv_sig_err),
        off!(mlx5dv_sig_err, actual_value),
        off!(mlx5dv_sig_err, expected_value),
        off!(mlx5dv_sig_err, offset),
        size!(mlx5dv_vfio_context_attr),
        off!(mlx5dv_vfio_context_attr, pci_name),
        off!(mlx5dv_vfio_context_attr, flags),
        off!(mlx5dv_vfio_context_attr, comp_mask),
        size!(mlx5dv_qp_init_attr),
        off!(mlx5dv_qp_init_attr, comp_mask),
        off!(mlx5dv_qp_init_attr, create_flags),
        off!(mlx5dv_qp_init_attr, send_ops_flags),
        size!(mlx5dv_qp_ex),
        off!(mlx5dv_qp_ex, wr_mr_interleaved),
        off!(mlx5dv_qp_ex, wr_mr_list),
        off!(mlx5dv_qp_ex, wr_mkey_configure),
        off!(mlx5dv_qp_ex, wr_set_mkey_access_flags),
        off!(mlx5dv_qp_ex, wr_set_mkey_layout_list),
        off!(mlx5dv_qp_ex, wr_set_mkey_layout_interleaved),
        off!(mlx5dv_qp_ex, wr_set_mkey_sig_block),
        off!(mlx5dv_qp_ex, wr_set_mkey_crypto),
        size!(mlx5dv_mkey_conf_attr),
        off!(mlx5dv_mkey_conf_attr, conf_flags),
        off!(mlx5dv_mkey_conf_attr, comp_mask),
        size!(mlx5dv_mr_interleaved),
        off!(mlx5dv_mr_interleaved, addr),
        off!(mlx5dv_mr_interleaved, bytes_count),
        off!(mlx5dv_mr_interleaved, bytes_skip),
        off!(mlx5dv_mr_interleaved, lkey),
        size!(mlx5dv_sig_t10dif),
        off!(mlx5dv_sig_t10dif, bg_type),
        off!(mlx5dv_sig_t10dif, bg),
        off!(mlx5dv_sig_t10dif, app_tag),
        off!(mlx5dv_sig_t10dif, ref_tag),
        off!(mlx5dv_sig_t10dif, flags),
        size!(mlx5dv_sig_crc),
        off_as!(mlx5dv_sig_crc, type_, "type"),
        off!(mlx5dv_sig_crc, seed),
        size!(mlx5dv_sig_block_domain),
        off!(mlx5dv_sig_block_domain, sig_type),
        off!(mlx5dv_sig_block_domain, sig),
        off!(mlx5dv_sig_block_domain, block_size),
        off!(mlx5dv_sig_block_domain, comp_mask),
        size!(mlx5dv_sig_block_attr),
        off!(mlx5dv_sig_block_attr, mem),
        off!(mlx5dv_sig_block_attr, wire),
        off!(mlx5dv_sig_block_attr, flags),
        off!(mlx5dv_sig_block_attr, check_mask),
        off!(mlx5dv_sig_block_attr, copy_mask),
        off!(mlx5dv_sig_block_attr, comp_mask),
        size!(mlx5dv_crypto_attr),
        off!(mlx5dv_crypto_attr, crypto_standard),
        off!(mlx5dv_crypto_attr, encrypt_on_tx),
        off!(mlx5dv_crypto_attr, signature_crypto_order),
        off!(mlx5dv_crypto_attr, data_unit_size),
        off!(mlx5dv_crypto_attr, initial_tweak),
        off!(mlx5dv_crypto_attr, dek),
        off!(mlx5dv_crypto_attr, keytag),
        off!(mlx5dv_crypto_attr, comp_mask),
        size!(mlx5dv_crypto_login_attr),
        off!(mlx5dv_crypto_login_attr, credential_id),
        off!(mlx5dv_crypto_login_attr, import_kek_id),
        off!(mlx5dv_crypto_login_attr, credential),
        off!(mlx5dv_crypto_login_attr, comp_mask),
        size!(mlx5dv_crypto_login_attr_ex),
        off!(mlx5dv_crypto_login_attr_ex, credential_id),
        off!(mlx5dv_crypto_login_attr_ex, import_kek_id),
        off!(mlx5dv_crypto_login_attr_ex, credential),
        off!(mlx5dv_crypto_login_attr_ex, credential_len),
        off!(mlx5dv_crypto_login_attr_ex, comp_mask),
        size!(mlx5dv_crypto_login_query_attr),
        off!(mlx5dv_crypto_login_query_attr, state),
        off!(mlx5dv_crypto_login_query_attr, comp_mask),
        size!(mlx5dv_dek_init_attr),
        off!(mlx5dv_dek_init_attr, key_size),
        off!(mlx5dv_dek_init_attr, has_keytag),
        off!(mlx5dv_dek_init_attr, key_purpose),
        off!(mlx5dv_dek_init_attr, pd),
        off!(mlx5dv_dek_init_attr, opaque),
        off!(mlx5dv_dek_init_attr, key),
        off!(mlx5dv_dek_init_attr, comp_mask),
        off!(mlx5dv_dek_init_attr, crypto_login),
        size!(mlx5dv_dek_attr),
        off!(mlx5dv_dek_attr, state),
        off!(mlx5dv_dek_attr, opaque),
        off!(mlx5dv_dek_attr, comp_mask),
        // DEVX: the structs the hw backend reads and writes through libmlx5's pointers.
        size!(mlx5dv_devx_uar),
        off!(mlx5dv_devx_uar, reg_addr),
        off!(mlx5dv_devx_uar, base_addr),
        off!(mlx5dv_devx_uar, page_id),
        off!(mlx5dv_devx_uar, mmap_off),
        off!(mlx5dv_devx_uar, comp_mask),
        size!(mlx5dv_devx_umem),
        off!(mlx5dv_devx_umem, umem_id),
        size!(mlx5dv_devx_msi_vector),
        off!(mlx5dv_devx_msi_vector, vector),
        off!(mlx5dv_devx_msi_vector, fd),
        size!(mlx5dv_devx_eq),
        off!(mlx5dv_devx_eq, vaddr),
        // MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED arrived after rdma-core 44; not compared here.
        val!(MLX5DV_UAR_ALLOC_TYPE_BF, mlx5_dv::MLX5DV_UAR_ALLOC_TYPE_BF),
        val!(MLX5DV_UAR_ALLOC_TYPE_NC, mlx5_dv::MLX5DV_UAR_ALLOC_TYPE_NC),
        val!(MLX5_CQ_DOORBELL, mlx5_dv::uar_offset::CQ_DOORBELL),
        // The array sizes mlx5-dv's attributes mirror.
        ("sizeof(((struct mlx5dv_crypto_login_attr *)0)->credential)", crypto::CREDENTIAL_LEN as u64),
        ("sizeof(((struct mlx5dv_dek_init_attr *)0)->key)", crypto::KEY_LEN as u64),
        // The constants mlx5-dv defines, against the header's.
        val!(MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT, MkeyInitFlags::INDIRECT.bits()),
        val!(MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE, MkeyInitFlags::BLOCK_SIGNATURE.bits()),
        val!(MLX5DV_MKEY_INIT_ATTR_FLAGS_CRYPTO, MkeyInitFlags::CRYPTO.bits()),
        val!(MLX5DV_MKEY_INIT_ATTR_FLAGS_UPDATE_TAG, MkeyInitFlags::UPDATE_TAG.bits()),
        val!(MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE, MkeyInitFlags::REMOTE_INVALIDATE.bits()),
        val!(MLX5DV_CONTEXT_FLAGS_DEVX, ContextFlags::DEVX.bits()),
        // MLX5DV_CONTEXT_ATTR_MASK_FD_ARRAY (1 << 0) arrived in rdma-core 61; 44 has no such
        // constant and rejects every comp_mask bit, so it is not compared here.
        val!(MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD, mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD),
        val!(MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD, mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD),
        val!(MLX5DV_SIG_PROT_CAP_T10DIF, sig_cap::PROT_T10DIF),
        val!(MLX5DV_SIG_PROT_CAP_CRC, sig_cap::PROT_CRC),
        val!(MLX5DV_SIG_T10DIF_BG_CAP_CRC, sig_cap::BG_CRC),
        val!(MLX5DV_SIG_T10DIF_BG_CAP_CSUM, sig_cap::BG_CSUM),
        val!(MLX5DV_SIG_CRC_TYPE_CAP_CRC32, sig_cap::CRC32),
        val!(MLX5DV_SIG_CRC_TYPE_CAP_CRC32C, sig_cap::CRC32C),
        val!(MLX5DV_SIG_CRC_TYPE_CAP_CRC64_XP10, sig_cap::CRC64_XP10),
        val!(MLX5DV_BLOCK_SIZE_CAP_512, sig_cap::BLOCK_512),
        val!(MLX5DV_BLOCK_SIZE_CAP_520, sig_cap::BLOCK_520),
        val!(MLX5DV_BLOCK_SIZE_CAP_4048, sig_cap::BLOCK_4048),
        val!(MLX5DV_BLOCK_SIZE_CAP_4096, sig_cap::BLOCK_4096),
        val!(MLX5DV_BLOCK_SIZE_CAP_4160, sig_cap::BLOCK_4160),
        val!(MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS, crypto_cap::ENGINE_AES_XTS),
        val!(MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_SINGLE_BLOCK, crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK),
        val!(MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_MULTI_BLOCK, crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK),
        val!(MLX5DV_CRYPTO_WRAPPED_IMPORT_METHOD_CAP_AES_XTS, crypto_cap::WRAPPED_IMPORT_AES_XTS),
        val!(MLX5DV_CRYPTO_CAPS_CRYPTO, crypto_cap::FLAG_CRYPTO),
        val!(MLX5DV_CRYPTO_CAPS_WRAPPED_CRYPTO_OPERATIONAL, crypto_cap::FLAG_WRAPPED_CRYPTO_OPERATIONAL),
        val!(
            MLX5DV_CRYPTO_CAPS_WRAPPED_CRYPTO_GOING_TO_COMMISSIONING,
            crypto_cap::FLAG_WRAPPED_CRYPTO_GOING_TO_COMMISSIONING
        ),
        val!(MLX5DV_CRYPTO_LOGIN_STATE_VALID, CryptoLoginState::Valid as u32),
        val!(MLX5DV_CRYPTO_LOGIN_STATE_NO_LOGIN, CryptoLoginState::NoLogin as u32),
        val!(MLX5DV_CRYPTO_LOGIN_STATE_INVALID, CryptoLoginState::Invalid as u32),
        val!(MLX5DV_CRYPTO_KEY_SIZE_128, crypto::KEY_SIZE_128),
        val!(MLX5DV_CRYPTO_KEY_SIZE_256, crypto::KEY_SIZE_256),
        val!(MLX5DV_CRYPTO_KEY_PURPOSE_AES_XTS, crypto::KEY_PURPOSE_AES_XTS),
        val!(MLX5DV_DEK_STATE_READY, DekState::Ready as u32),
        val!(MLX5DV_DEK_STATE_ERROR, DekState::Error as u32),
        val!(MLX5DV_DEK_INIT_ATTR_CRYPTO_LOGIN, crypto::DEK_INIT_ATTR_CRYPTO_LOGIN),
        val!(MLX5DV_CRYPTO_STANDARD_AES_XTS, crypto::STANDARD_AES_XTS),
        val!(MLX5DV_SIGNATURE_CRYPTO_ORDER_SIGNATURE_AFTER_CRYPTO_ON_TX, crypto::SIGNATURE_AFTER_CRYPTO_ON_TX),
        val!(MLX5DV_SIGNATURE_CRYPTO_ORDER_SIGNATURE_BEFORE_CRYPTO_ON_TX, crypto::SIGNATURE_BEFORE_CRYPTO_ON_TX),
        val!(MLX5DV_MKEY_NO_ERR, MkeyErrType::NoErr as u32),
        val!(MLX5DV_MKEY_SIG_BLOCK_BAD_GUARD, MkeyErrType::SigBlockBadGuard as u32),
        val!(MLX5DV_MKEY_SIG_BLOCK_BAD_REFTAG, MkeyErrType::SigBlockBadReftag as u32),
        val!(MLX5DV_MKEY_SIG_BLOCK_BAD_APPTAG, MkeyErrType::SigBlockBadApptag as u32),
        val!(MLX5DV_QP_CREATE_SIG_PIPELINING, mlx5dv_qp_create_flags::MLX5DV_QP_CREATE_SIG_PIPELINING),
        // Signature offload.
        val!(MLX5DV_SIG_TYPE_T10DIF, sig::TYPE_T10DIF),
        val!(MLX5DV_SIG_TYPE_CRC, sig::TYPE_CRC),
        val!(MLX5DV_SIG_T10DIF_CRC, sig::BG_CRC),
        val!(MLX5DV_SIG_T10DIF_CSUM, sig::BG_CSUM),
        val!(MLX5DV_SIG_T10DIF_FLAG_REF_REMAP, sig::FLAG_REF_REMAP),
        val!(MLX5DV_SIG_T10DIF_FLAG_APP_ESCAPE, sig::FLAG_APP_ESCAPE),
        val!(MLX5DV_SIG_T10DIF_FLAG_APP_REF_ESCAPE, sig::FLAG_APP_REF_ESCAPE),
        val!(MLX5DV_SIG_CRC_TYPE_CRC32, sig::CRC32),
        val!(MLX5DV_SIG_CRC_TYPE_CRC32C, sig::CRC32C),
        val!(MLX5DV_SIG_CRC_TYPE_CRC64_XP10, sig::CRC64_XP10),
        val!(MLX5DV_BLOCK_SIZE_512, sig::BLOCK_512),
        val!(MLX5DV_BLOCK_SIZE_520, sig::BLOCK_520),
        val!(MLX5DV_BLOCK_SIZE_4048, sig::BLOCK_4048),
        val!(MLX5DV_BLOCK_SIZE_4096, sig::BLOCK_4096),
        val!(MLX5DV_BLOCK_SIZE_4160, sig::BLOCK_4160),
        val!(MLX5DV_SIG_BLOCK_ATTR_FLAG_COPY_MASK, sig::ATTR_FLAG_COPY_MASK),
        val!(MLX5DV_SIG_MASK_T10DIF_GUARD, sig::MASK_T10DIF_GUARD),
        val!(MLX5DV_SIG_MASK_T10DIF_APPTAG, sig::MASK_T10DIF_APPTAG),
        val!(MLX5DV_SIG_MASK_T10DIF_REFTAG, sig::MASK_T10DIF_REFTAG),
        val!(MLX5DV_SIG_MASK_CRC32, sig::MASK_CRC32),
        val!(MLX5DV_SIG_MASK_CRC32C, sig::MASK_CRC32),
        val!(MLX5DV_SIG_MASK_CRC64_XP10, sig::MASK_CRC64_XP10),
        // Data path: the verbs.h and mlx5dv.h values mlx5-dv mirrors.
        val!(IBV_ACCESS_LOCAL_WRITE, AccessFlags::LOCAL_WRITE.bits()),
        val!(IBV_ACCESS_REMOTE_WRITE, AccessFlags::REMOTE_WRITE.bits()),
        val!(IBV_ACCESS_REMOTE_READ, AccessFlags::REMOTE_READ.bits()),
        val!(IBV_ACCESS_REMOTE_ATOMIC, AccessFlags::REMOTE_ATOMIC.bits()),
        val!(IBV_ACCESS_MW_BIND, AccessFlags::MW_BIND.bits()),
        val!(IBV_ACCESS_ZERO_BASED, AccessFlags::ZERO_BASED.bits()),
        val!(IBV_ACCESS_ON_DEMAND, AccessFlags::ON_DEMAND.bits()),
        val!(IBV_ACCESS_HUGETLB, AccessFlags::HUGETLB.bits()),
        val!(IBV_ACCESS_RELAXED_ORDERING, AccessFlags::RELAXED_ORDERING.bits()),
        val!(IBV_SEND_FENCE, SendFlags::FENCE.bits()),
        val!(IBV_SEND_SIGNALED, SendFlags::SIGNALED.bits()),
        val!(IBV_SEND_SOLICITED, SendFlags::SOLICITED.bits()),
        val!(IBV_SEND_INLINE, SendFlags::INLINE.bits()),
        val!(IBV_QPT_RC, qp_type::RC),
        val!(IBV_QPT_UC, qp_type::UC),
        val!(IBV_QPT_UD, qp_type::UD),
        val!(IBV_QPT_RAW_PACKET, qp_type::RAW_PACKET),
        val!(IBV_QPT_XRC_SEND, qp_type::XRC_SEND),
        val!(IBV_QPT_DRIVER, qp_type::DRIVER),
        val!(IBV_QPS_RESET, QpState::Reset as u32),
        val!(IBV_QPS_INIT, QpState::Init as u32),
        val!(IBV_QPS_RTR, QpState::Rtr as u32),
        val!(IBV_QPS_RTS, QpState::Rts as u32),
        val!(IBV_QPS_SQD, QpState::Sqd as u32),
        val!(IBV_QPS_SQE, QpState::Sqe as u32),
        val!(IBV_QPS_ERR, QpState::Err as u32),
        val!(IBV_QP_EX_WITH_RDMA_WRITE, send_ops::RDMA_WRITE),
        val!(IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, send_ops::RDMA_WRITE_WITH_IMM),
        val!(IBV_QP_EX_WITH_SEND, send_ops::SEND),
        val!(IBV_QP_EX_WITH_SEND_WITH_IMM, send_ops::SEND_WITH_IMM),
        val!(IBV_QP_EX_WITH_RDMA_READ, send_ops::RDMA_READ),
        val!(IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, send_ops::ATOMIC_CMP_AND_SWP),
        val!(IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, send_ops::ATOMIC_FETCH_AND_ADD),
        val!(IBV_QP_EX_WITH_LOCAL_INV, send_ops::LOCAL_INV),
        val!(IBV_QP_EX_WITH_BIND_MW, send_ops::BIND_MW),
        val!(IBV_QP_EX_WITH_SEND_WITH_INV, send_ops::SEND_WITH_INV),
        val!(IBV_QP_EX_WITH_TSO, send_ops::TSO),
        val!(MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS, dv_qp::MASK_QP_CREATE_FLAGS),
        val!(MLX5DV_QP_INIT_ATTR_MASK_DC, dv_qp::MASK_DC),
        val!(MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS, dv_qp::MASK_SEND_OPS_FLAGS),
        val!(MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS, dv_qp::MASK_DCI_STREAMS),
        val!(MLX5DV_QP_CREATE_TUNNEL_OFFLOADS, dv_qp::CREATE_TUNNEL_OFFLOADS),
        val!(MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_UC, dv_qp::CREATE_TIR_ALLOW_SELF_LOOPBACK_UC),
        val!(MLX5DV_QP_CREATE_TIR_ALLOW_SELF_LOOPBACK_MC, dv_qp::CREATE_TIR_ALLOW_SELF_LOOPBACK_MC),
        val!(MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE, dv_qp::CREATE_DISABLE_SCATTER_TO_CQE),
        val!(MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE, dv_qp::CREATE_ALLOW_SCATTER_TO_CQE),
        val!(MLX5DV_QP_CREATE_PACKET_BASED_CREDIT_MODE, dv_qp::CREATE_PACKET_BASED_CREDIT_MODE),
        val!(MLX5DV_QP_EX_WITH_MR_INTERLEAVED, dv_qp::WITH_MR_INTERLEAVED),
        val!(MLX5DV_QP_EX_WITH_MR_LIST, dv_qp::WITH_MR_LIST),
        val!(MLX5DV_QP_EX_WITH_MKEY_CONFIGURE, dv_qp::WITH_MKEY_CONFIGURE),
        val!(MLX5DV_QP_EX_WITH_RAW_WQE, dv_qp::WITH_RAW_WQE),
        val!(MLX5DV_QP_EX_WITH_MEMCPY, dv_qp::WITH_MEMCPY),
        val!(MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR, mlx5_dv::MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR),
        val!(IBV_WC_SUCCESS, wc_status::SUCCESS),
        val!(IBV_WC_LOC_LEN_ERR, wc_status::LOC_LEN_ERR),
        val!(IBV_WC_LOC_QP_OP_ERR, wc_status::LOC_QP_OP_ERR),
        val!(IBV_WC_LOC_PROT_ERR, wc_status::LOC_PROT_ERR),
        val!(IBV_WC_WR_FLUSH_ERR, wc_status::WR_FLUSH_ERR),
        val!(IBV_WC_MW_BIND_ERR, wc_status::MW_BIND_ERR),
        val!(IBV_WC_BAD_RESP_ERR, wc_status::BAD_RESP_ERR),
        val!(IBV_WC_LOC_ACCESS_ERR, wc_status::LOC_ACCESS_ERR),
        val!(IBV_WC_REM_INV_REQ_ERR, wc_status::REM_INV_REQ_ERR),
        val!(IBV_WC_REM_ACCESS_ERR, wc_status::REM_ACCESS_ERR),
        val!(IBV_WC_REM_OP_ERR, wc_status::REM_OP_ERR),
        val!(IBV_WC_RETRY_EXC_ERR, wc_status::RETRY_EXC_ERR),
        val!(IBV_WC_RNR_RETRY_EXC_ERR, wc_status::RNR_RETRY_EXC_ERR),
        val!(IBV_WC_REM_ABORT_ERR, wc_status::REM_ABORT_ERR),
        val!(IBV_WC_GENERAL_ERR, wc_status::GENERAL_ERR),
        val!(IBV_WC_SEND, wc_opcode::SEND),
        val!(IBV_WC_RDMA_WRITE, wc_opcode::RDMA_WRITE),
        val!(IBV_WC_RDMA_READ, wc_opcode::RDMA_READ),
        val!(IBV_WC_LOCAL_INV, wc_opcode::LOCAL_INV),
        val!(IBV_WC_RECV, wc_opcode::RECV),
        val!(IBV_WC_RECV_RDMA_WITH_IMM, wc_opcode::RECV_RDMA_WITH_IMM),
        val!(IBV_WC_DRIVER1, wc_opcode::DRIVER1),
        val!(MLX5DV_WC_UMR, wc_opcode::DRIVER1),
        val!(IBV_WC_WITH_IMM, wc_flags::WITH_IMM),
        val!(IBV_WC_WITH_INV, wc_flags::WITH_INV),
        val!(IBV_EVENT_CQ_ERR, event_type::CQ_ERR),
        val!(IBV_EVENT_QP_FATAL, event_type::QP_FATAL),
        val!(IBV_EVENT_QP_REQ_ERR, event_type::QP_REQ_ERR),
        val!(IBV_EVENT_QP_ACCESS_ERR, event_type::QP_ACCESS_ERR),
        val!(IBV_EVENT_SQ_DRAINED, event_type::SQ_DRAINED),
        val!(
            MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
            mlx5dv_qp_init_attr_mask::MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS
        ),
    ]
}

/// The CQEs our codecs write, embedded in the C program for the header's readers.
fn our_cqe() -> Cqe64 {
    Cqe64 {
        opcode: cqe::opcode::RESP_SEND_IMM,
        format: 1,
        se: true,
        owner: true,
        byte_cnt: 0x0102_0304,
        wqe_counter: 0xbeef,
        qpn: 0xab_cdef,
        imm_inval_pkey: 0x1122_3344,
        ..Cqe64::default()
    }
}

fn our_err_cqe() -> ErrCqe {
    ErrCqe {
        opcode: cqe::opcode::REQ_ERR,
        syndrome: cqe::syndrome::REMOTE_ACCESS_ERR,
        vendor_err_synd: 0x88,
        s_wqe_opcode: wqe::opcode::RDMA_READ,
        qpn: 0x12_3456,
        wqe_counter: 7,
        ..ErrCqe::default()
    }
}

/// What `mlx5dv_set_ctrl_seg(seg, 0x1234, UMR, 0x5a, 0xabcdef, 0x2a, 0x3f, 0x77, imm)` writes,
/// as our struct.
fn our_ctrl() -> CtrlSeg {
    CtrlSeg {
        opmod: 0x5a,
        wqe_index: 0x1234,
        opcode: wqe::opcode::UMR,
        qpn: 0xab_cdef,
        ds: 0x3f,
        signature: 0x77,
        fm: ctrl::fence::INITIATOR_SMALL,
        ce: ctrl::CE_CQ_UPDATE,
        se: true,
        imm: 0x1122_3344,
        ..CtrlSeg::default()
    }
}

/// What `mlx5dv_set_data_seg(seg, 0x1000, 0x4242, 0x0102030405060708)` writes, as our struct.
fn our_data() -> DataSeg {
    DataSeg { byte_count: 0x1000, lkey: 0x4242, addr: 0x0102_0304_0506_0708 }
}

/// C declarations the PRM rows use: our encoded CQEs, and the header's writers.
fn prm_preamble() -> String {
    let array = |name: &str, bytes: &[u8]| {
        let list: Vec<String> = bytes.iter().map(|b| format!("0x{b:02x}")).collect();
        format!("static unsigned char {name}[{}] __attribute__((aligned(64))) = {{{}}};\n", bytes.len(), list.join(","))
    };
    let mut c = String::from("#include <endian.h>\n#include <string.h>\n");
    c.push_str(&array("our_cqe", &our_cqe().to_bytes().expect("our CQE fits its fields")));
    c.push_str(&array("our_err", &our_err_cqe().to_bytes().expect("our error CQE fits its fields")));
    c.push_str(concat!(
        "static unsigned long long be_bytes(const void *p, int off) {\n",
        "    const unsigned char *b = p; unsigned long long v = 0;\n",
        "    for (int i = 0; i < 8; i++) v = v << 8 | b[off + i];\n",
        "    return v;\n}\n",
        "static unsigned long long c_ctrl(int off) {\n",
        "    struct mlx5_wqe_ctrl_seg s; memset(&s, 0, sizeof s);\n",
        "    mlx5dv_set_ctrl_seg(&s, 0x1234, MLX5_OPCODE_UMR, 0x5a, 0xabcdef, 0x2a, 0x3f, 0x77, htobe32(0x11223344));\n",
        "    return be_bytes(&s, off);\n}\n",
        "static unsigned long long c_data(int off) {\n",
        "    struct mlx5_wqe_data_seg s; memset(&s, 0, sizeof s);\n",
        "    mlx5dv_set_data_seg(&s, 0x1000, 0x4242, 0x0102030405060708ULL);\n",
        "    return be_bytes(&s, off);\n}\n",
        "#define OUR_CQE ((struct mlx5_cqe64 *)(void *)our_cqe)\n",
        "#define OUR_ERR ((struct mlx5_err_cqe *)(void *)our_err)\n",
    ));
    c
}

/// `(C expression, our value)` for the send WQE segments and CQEs.
fn prm_table() -> Vec<(&'static str, u64)> {
    macro_rules! size {
        ($c:literal, $t:ty) => {
            (concat!("sizeof(struct ", $c, ")"), <$t as Layout>::SIZE as u64)
        };
    }
    macro_rules! at {
        ($c:literal, $m:literal, $f:expr) => {
            (concat!("offsetof(struct ", $c, ", ", $m, ")"), $f.byte_off() as u64)
        };
    }
    macro_rules! val {
        ($c:ident, $v:expr) => {
            (stringify!($c), Bits::bits64($v))
        };
    }
    let be8 = |b: &[u8]| b.iter().fold(0u64, |v, x| v << 8 | u64::from(*x));
    let ctrl_bytes = our_ctrl().to_bytes().expect("our ctrl segment fits its fields");
    let data_bytes = our_data().to_bytes().expect("our data segment fits its fields");
    let ctrl_byte = |c: CtrlSeg| c.to_bytes().map(|b| b[11]).unwrap_or_default();
    let mkc_byte = |m: MkeyContextSeg, at: usize| m.to_bytes().map(|b| b[at]).unwrap_or_default();
    let m0 = MkeyContextSeg::default();
    let c0 = CtrlSeg::default();
    let inline_dword = InlineSeg { inline: true, byte_count: 0 }.to_bytes().map(u32::from_be_bytes).unwrap_or_default();
    let (q, e) = (our_cqe(), our_err_cqe());
    use wqe::{data, inline, klm, raddr, repeat_block, repeat_ent};
    vec![
        size!("mlx5_wqe_ctrl_seg", CtrlSeg),
        at!("mlx5_wqe_ctrl_seg", "opmod_idx_opcode", ctrl::OPMOD),
        at!("mlx5_wqe_ctrl_seg", "qpn_ds", ctrl::QPN),
        at!("mlx5_wqe_ctrl_seg", "signature", ctrl::SIGNATURE),
        at!("mlx5_wqe_ctrl_seg", "dci_stream_channel_id", ctrl::DCI_STREAM_CHANNEL_ID),
        at!("mlx5_wqe_ctrl_seg", "fm_ce_se", ctrl::FM),
        at!("mlx5_wqe_ctrl_seg", "imm", ctrl::IMM),
        size!("mlx5_wqe_raddr_seg", wqe::RaddrSeg),
        at!("mlx5_wqe_raddr_seg", "raddr", raddr::RADDR),
        at!("mlx5_wqe_raddr_seg", "rkey", raddr::RKEY),
        size!("mlx5_wqe_data_seg", DataSeg),
        at!("mlx5_wqe_data_seg", "byte_count", data::BYTE_COUNT),
        at!("mlx5_wqe_data_seg", "lkey", data::LKEY),
        at!("mlx5_wqe_data_seg", "addr", data::ADDR),
        size!("mlx5_wqe_inl_data_seg", InlineSeg),
        at!("mlx5_wqe_inl_data_seg", "byte_count", inline::INLINE),
        size!("mlx5_wqe_umr_ctrl_seg", wqe::UmrCtrlSeg),
        at!("mlx5_wqe_umr_ctrl_seg", "flags", umr_ctrl::FLAGS),
        at!("mlx5_wqe_umr_ctrl_seg", "klm_octowords", umr_ctrl::KLM_OCTOWORDS),
        at!("mlx5_wqe_umr_ctrl_seg", "bsf_octowords", umr_ctrl::BSF_OCTOWORDS),
        at!("mlx5_wqe_umr_ctrl_seg", "translation_offset", umr_ctrl::BSF_OCTOWORDS),
        at!("mlx5_wqe_umr_ctrl_seg", "mkey_mask", umr_ctrl::MKEY_MASK),
        size!("mlx5_wqe_mkey_context_seg", MkeyContextSeg),
        at!("mlx5_wqe_mkey_context_seg", "free", mkc::FREE),
        at!("mlx5_wqe_mkey_context_seg", "access_flags", mkc::A),
        at!("mlx5_wqe_mkey_context_seg", "qpn_mkey", mkc::QPN),
        at!("mlx5_wqe_mkey_context_seg", "flags_pd", mkc::LENGTH64),
        at!("mlx5_wqe_mkey_context_seg", "start_addr", mkc::START_ADDR),
        at!("mlx5_wqe_mkey_context_seg", "len", mkc::LEN),
        at!("mlx5_wqe_mkey_context_seg", "bsf_octword_size", mkc::BSF_OCTWORD_SIZE),
        at!("mlx5_wqe_mkey_context_seg", "translations_octword_size", mkc::TRANSLATIONS_OCTWORD_SIZE),
        at!("mlx5_wqe_mkey_context_seg", "log_page_size", mkc::LOG_PAGE_SIZE),
        size!("mlx5_wqe_umr_klm_seg", wqe::KlmSeg),
        at!("mlx5_wqe_umr_klm_seg", "byte_count", klm::BYTE_COUNT),
        at!("mlx5_wqe_umr_klm_seg", "mkey", klm::MKEY),
        at!("mlx5_wqe_umr_klm_seg", "address", klm::ADDRESS),
        size!("mlx5_wqe_umr_repeat_block_seg", wqe::RepeatBlockSeg),
        at!("mlx5_wqe_umr_repeat_block_seg", "byte_count", repeat_block::BYTE_COUNT),
        at!("mlx5_wqe_umr_repeat_block_seg", "op", repeat_block::OP),
        at!("mlx5_wqe_umr_repeat_block_seg", "repeat_count", repeat_block::REPEAT_COUNT),
        at!("mlx5_wqe_umr_repeat_block_seg", "num_ent", repeat_block::NUM_ENT),
        ("offsetof(struct mlx5_wqe_umr_repeat_block_seg, entries)", repeat_block::SIZE as u64),
        size!("mlx5_wqe_umr_repeat_ent_seg", wqe::RepeatEntSeg),
        at!("mlx5_wqe_umr_repeat_ent_seg", "stride", repeat_ent::STRIDE),
        at!("mlx5_wqe_umr_repeat_ent_seg", "byte_count", repeat_ent::BYTE_COUNT),
        at!("mlx5_wqe_umr_repeat_ent_seg", "memkey", repeat_ent::MEMKEY),
        at!("mlx5_wqe_umr_repeat_ent_seg", "va", repeat_ent::VA),
        size!("mlx5_cqe64", Cqe64),
        at!("mlx5_cqe64", "wqe_id", cqe::cqe64::WQE_ID),
        at!("mlx5_cqe64", "ml_path", cqe::cqe64::ML_PATH),
        at!("mlx5_cqe64", "slid", cqe::cqe64::SLID),
        at!("mlx5_cqe64", "flags_rqpn", cqe::cqe64::FLAGS),
        at!("mlx5_cqe64", "hds_ip_ext", cqe::cqe64::HDS_IP_EXT),
        at!("mlx5_cqe64", "l4_hdr_type_etc", cqe::cqe64::L4_HDR_TYPE_ETC),
        at!("mlx5_cqe64", "vlan_info", cqe::cqe64::VLAN_INFO),
        at!("mlx5_cqe64", "srqn_uidx", cqe::cqe64::SRQN_UIDX),
        at!("mlx5_cqe64", "imm_inval_pkey", cqe::cqe64::IMM_INVAL_PKEY),
        at!("mlx5_cqe64", "app", cqe::cqe64::APP),
        at!("mlx5_cqe64", "app_op", cqe::cqe64::APP_OP),
        at!("mlx5_cqe64", "app_info", cqe::cqe64::APP_INFO),
        at!("mlx5_cqe64", "byte_cnt", cqe::cqe64::BYTE_CNT),
        at!("mlx5_cqe64", "timestamp", cqe::cqe64::TIMESTAMP),
        at!("mlx5_cqe64", "sop_drop_qpn", cqe::cqe64::SOP_DROP),
        at!("mlx5_cqe64", "wqe_counter", cqe::cqe64::WQE_COUNTER),
        at!("mlx5_cqe64", "signature", cqe::cqe64::SIGNATURE),
        at!("mlx5_cqe64", "op_own", cqe::cqe64::OPCODE),
        size!("mlx5_err_cqe", ErrCqe),
        at!("mlx5_err_cqe", "srqn", cqe::err::SRQN),
        at!("mlx5_err_cqe", "vendor_err_synd", cqe::err::VENDOR_ERR_SYND),
        at!("mlx5_err_cqe", "syndrome", cqe::err::SYNDROME),
        at!("mlx5_err_cqe", "s_wqe_opcode_qpn", cqe::err::S_WQE_OPCODE),
        at!("mlx5_err_cqe", "wqe_counter", cqe::err::WQE_COUNTER),
        at!("mlx5_err_cqe", "signature", cqe::err::SIGNATURE),
        at!("mlx5_err_cqe", "op_own", cqe::err::OPCODE),
        // Send opcodes, CQE opcodes and syndromes.
        val!(MLX5_OPCODE_NOP, wqe::opcode::NOP),
        val!(MLX5_OPCODE_SEND_INVAL, wqe::opcode::SEND_INVAL),
        val!(MLX5_OPCODE_RDMA_WRITE, wqe::opcode::RDMA_WRITE),
        val!(MLX5_OPCODE_RDMA_WRITE_IMM, wqe::opcode::RDMA_WRITE_IMM),
        val!(MLX5_OPCODE_SEND, wqe::opcode::SEND),
        val!(MLX5_OPCODE_SEND_IMM, wqe::opcode::SEND_IMM),
        val!(MLX5_OPCODE_TSO, wqe::opcode::TSO),
        val!(MLX5_OPCODE_RDMA_READ, wqe::opcode::RDMA_READ),
        val!(MLX5_OPCODE_ATOMIC_CS, wqe::opcode::ATOMIC_CS),
        val!(MLX5_OPCODE_ATOMIC_FA, wqe::opcode::ATOMIC_FA),
        val!(MLX5_OPCODE_ATOMIC_MASKED_CS, wqe::opcode::ATOMIC_MASKED_CS),
        val!(MLX5_OPCODE_ATOMIC_MASKED_FA, wqe::opcode::ATOMIC_MASKED_FA),
        val!(MLX5_OPCODE_FMR, wqe::opcode::FMR),
        val!(MLX5_OPCODE_LOCAL_INVAL, wqe::opcode::LOCAL_INVAL),
        val!(MLX5_OPCODE_CONFIG_CMD, wqe::opcode::CONFIG_CMD),
        val!(MLX5_OPCODE_SET_PSV, wqe::opcode::SET_PSV),
        val!(MLX5_OPCODE_UMR, wqe::opcode::UMR),
        val!(MLX5_OPCODE_TAG_MATCHING, wqe::opcode::TAG_MATCHING),
        val!(MLX5_OPCODE_FLOW_TBL_ACCESS, wqe::opcode::FLOW_TBL_ACCESS),
        val!(MLX5_OPCODE_MMO, wqe::opcode::MMO),
        val!(MLX5_CQE_OWNER_MASK, cqe::OWNER_MASK),
        val!(MLX5_CQE_REQ, cqe::opcode::REQ),
        val!(MLX5_CQE_RESP_WR_IMM, cqe::opcode::RESP_WR_IMM),
        val!(MLX5_CQE_RESP_SEND, cqe::opcode::RESP_SEND),
        val!(MLX5_CQE_RESP_SEND_IMM, cqe::opcode::RESP_SEND_IMM),
        val!(MLX5_CQE_RESP_SEND_INV, cqe::opcode::RESP_SEND_INV),
        val!(MLX5_CQE_RESIZE_CQ, cqe::opcode::RESIZE_CQ),
        val!(MLX5_CQE_NO_PACKET, cqe::opcode::NO_PACKET),
        val!(MLX5_CQE_SIG_ERR, cqe::opcode::SIG_ERR),
        val!(MLX5_CQE_REQ_ERR, cqe::opcode::REQ_ERR),
        val!(MLX5_CQE_RESP_ERR, cqe::opcode::RESP_ERR),
        val!(MLX5_CQE_INVALID, cqe::opcode::INVALID),
        val!(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, cqe::syndrome::LOCAL_LENGTH_ERR),
        val!(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, cqe::syndrome::LOCAL_QP_OP_ERR),
        val!(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR, cqe::syndrome::LOCAL_PROT_ERR),
        val!(MLX5_CQE_SYNDROME_WR_FLUSH_ERR, cqe::syndrome::WR_FLUSH_ERR),
        val!(MLX5_CQE_SYNDROME_MW_BIND_ERR, cqe::syndrome::MW_BIND_ERR),
        val!(MLX5_CQE_SYNDROME_BAD_RESP_ERR, cqe::syndrome::BAD_RESP_ERR),
        val!(MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR, cqe::syndrome::LOCAL_ACCESS_ERR),
        val!(MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, cqe::syndrome::REMOTE_INVAL_REQ_ERR),
        val!(MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, cqe::syndrome::REMOTE_ACCESS_ERR),
        val!(MLX5_CQE_SYNDROME_REMOTE_OP_ERR, cqe::syndrome::REMOTE_OP_ERR),
        val!(MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, cqe::syndrome::TRANSPORT_RETRY_EXC_ERR),
        val!(MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR, cqe::syndrome::RNR_RETRY_EXC_ERR),
        val!(MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR, cqe::syndrome::REMOTE_ABORTED_ERR),
        val!(MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT, cqe::syndrome::VENDOR_ODP_PFAULT),
        // WQE constants and flag bits, as values and as the bytes our codecs write.
        val!(MLX5_SEND_WQE_BB, wqe::SEND_WQE_BB),
        val!(MLX5_SEND_WQE_SHIFT, wqe::SEND_WQE_SHIFT),
        val!(MLX5_INLINE_SEG, wqe::INLINE_SEG),
        val!(MLX5_INLINE_SEG, inline_dword),
        val!(MLX5_INVALID_LKEY, wqe::INVALID_LKEY),
        val!(MLX5_WQE_CTRL_CQ_UPDATE, ctrl::CQ_UPDATE),
        val!(MLX5_WQE_CTRL_SOLICITED, ctrl::SOLICITED),
        val!(MLX5_WQE_CTRL_FENCE, ctrl::FENCE),
        val!(MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE, ctrl::INITIATOR_SMALL_FENCE),
        val!(MLX5_WQE_CTRL_CQ_UPDATE, ctrl_byte(CtrlSeg { ce: ctrl::CE_CQ_UPDATE, ..c0 })),
        val!(MLX5_WQE_CTRL_SOLICITED, ctrl_byte(CtrlSeg { se: true, ..c0 })),
        val!(MLX5_WQE_CTRL_FENCE, ctrl_byte(CtrlSeg { fm: ctrl::fence::SMALL_AND_FENCE, ..c0 })),
        val!(MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE, ctrl_byte(CtrlSeg { fm: ctrl::fence::INITIATOR_SMALL, ..c0 })),
        val!(MLX5_WQE_UMR_CTRL_FLAG_INLINE, umr_ctrl::flags::INLINE),
        val!(MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE, umr_ctrl::flags::CHECK_FREE),
        val!(MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET, umr_ctrl::flags::TRANSLATION_OFFSET),
        val!(MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN, umr_ctrl::flags::CHECK_QPN),
        val!(MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN, umr_ctrl::mkey_mask::LEN),
        val!(MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR, umr_ctrl::mkey_mask::START_ADDR),
        val!(MLX5_WQE_UMR_CTRL_MKEY_MASK_SIG_ERR, umr_ctrl::mkey_mask::SIG_ERR),
        val!(MLX5_WQE_UMR_CTRL_MKEY_MASK_BSF_ENABLE, umr_ctrl::mkey_mask::BSF_ENABLE),
        val!(MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY, umr_ctrl::mkey_mask::MKEY),
        val!(MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN, umr_ctrl::mkey_mask::QPN),
        val!(MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE, umr_ctrl::mkey_mask::ACCESS_LOCAL_WRITE),
        val!(MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ, umr_ctrl::mkey_mask::ACCESS_REMOTE_READ),
        val!(MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE, umr_ctrl::mkey_mask::ACCESS_REMOTE_WRITE),
        val!(MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC, umr_ctrl::mkey_mask::ACCESS_ATOMIC),
        val!(MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE, umr_ctrl::mkey_mask::FREE),
        val!(MLX5_WQE_MKEY_CONTEXT_FREE, wqe::mkey_context::FREE),
        val!(MLX5_WQE_MKEY_CONTEXT_FREE, mkc_byte(MkeyContextSeg { free: true, ..m0 }, 0)),
        val!(MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC, mkc_byte(MkeyContextSeg { a: true, ..m0 }, 2)),
        val!(MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE, mkc_byte(MkeyContextSeg { rw: true, ..m0 }, 2)),
        val!(MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ, mkc_byte(MkeyContextSeg { rr: true, ..m0 }, 2)),
        val!(MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE, mkc_byte(MkeyContextSeg { lw: true, ..m0 }, 2)),
        val!(MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_READ, mkc_byte(MkeyContextSeg { lr: true, ..m0 }, 2)),
        // The header's writers produce our bytes; its readers read our CQEs.
        ("c_ctrl(0)", be8(&ctrl_bytes[..8])),
        ("c_ctrl(8)", be8(&ctrl_bytes[8..])),
        ("c_data(0)", be8(&data_bytes[..8])),
        ("c_data(8)", be8(&data_bytes[8..])),
        ("mlx5dv_get_cqe_opcode(OUR_CQE)", q.opcode as u64),
        ("mlx5dv_get_cqe_owner(OUR_CQE)", q.owner as u64),
        ("mlx5dv_get_cqe_se(OUR_CQE)", q.se as u64),
        ("mlx5dv_get_cqe_format(OUR_CQE)", q.format as u64),
        ("be32toh(OUR_CQE->byte_cnt)", q.byte_cnt as u64),
        ("be16toh(OUR_CQE->wqe_counter)", q.wqe_counter as u64),
        ("be32toh(OUR_CQE->sop_drop_qpn) & 0xffffff", q.qpn as u64),
        ("be32toh(OUR_CQE->imm_inval_pkey)", q.imm_inval_pkey as u64),
        ("mlx5dv_get_cqe_opcode((struct mlx5_cqe64 *)OUR_ERR)", e.opcode as u64),
        ("OUR_ERR->syndrome", e.syndrome as u64),
        ("OUR_ERR->vendor_err_synd", e.vendor_err_synd as u64),
        ("be32toh(OUR_ERR->s_wqe_opcode_qpn) >> 24", e.s_wqe_opcode as u64),
        ("be32toh(OUR_ERR->s_wqe_opcode_qpn) & 0xffffff", e.qpn as u64),
        ("be16toh(OUR_ERR->wqe_counter)", e.wqe_counter as u64),
        ("OUR_CQE->op_own", q.op_own() as u64),
    ]
}

#[test]
fn mirrored_layouts_and_constants_equal_the_installed_headers() {
    let mut rows = table();
    rows.extend(prm_table());
    let mut c = String::from("#include <infiniband/mlx5dv.h>\n#include <stddef.h>\n#include <stdio.h>\n");
    c.push_str(&prm_preamble());
    c.push_str("int main(void) {\n");
    for (expr, _) in &rows {
        c.push_str(&format!("    printf(\"%llu\\n\", (unsigned long long)({expr}));\n"));
    }
    c.push_str("    return 0;\n}\n");
    let dir = std::env::temp_dir().join(format!("mlx5-hw-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let bin = dir.join("layout");
    std::fs::write(&src, c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc).arg(&src).arg("-o").arg(&bin).output().expect("run the C compiler");
    assert!(out.status.success(), "{cc} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(&bin).output().unwrap();
    let printed: Vec<u64> = String::from_utf8(out.stdout).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(printed.len(), rows.len());
    let wrong: Vec<String> = rows
        .iter()
        .zip(&printed)
        .filter(|((_, ours), theirs)| ours != *theirs)
        .map(|((expr, ours), theirs)| format!("{expr}: C says {theirs}, we say {ours}"))
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(wrong.is_empty(), "{} mismatches:\n{}", wrong.len(), wrong.join("\n"));
}

/// A C constant's value, whether ours is a plain integer or a flag type.
trait Bits {
    fn bits64(self) -> u64;
}

macro_rules! bits_of_ints {
    ($($t:ty),*) => {$(
        impl Bits for $t {
            fn bits64(self) -> u64 {
                self as u64
            }
        }
    )*};
}
bits_of_ints!(u8, u16, u32, u64, i32, usize);

macro_rules! bits_of_flags {
    ($($t:ty),*) => {$(
        impl Bits for $t {
            fn bits64(self) -> u64 {
                self.bits() as u64
            }
        }
    )*};
}
bits_of_flags!(
    mlx5_dv::T10difFlags,
    mlx5_dv::SigBlockAttrFlags,
    mlx5_dv::MkeyConfFlags,
    mlx5_dv::SendOpsFlags,
    mlx5_dv::DvQpInitMask,
    mlx5_dv::DvQpCreateFlags,
    mlx5_dv::DvSendOpsFlags,
    mlx5_dv::WcFlags,
    mlx5_dv::AccessFlags,
    mlx5_dv::MkeyInitFlags,
    mlx5_dv::ContextFlags,
    mlx5_dv::SendFlags
);
