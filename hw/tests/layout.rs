//! The mirrored structs and constants against the installed C headers: a small C program,
//! compiled with `cc`, prints each size, offset and value, and each must equal ours.

use std::mem::{offset_of, size_of};
use std::process::Command;

use mlx5_dv::{
    AccessFlags, ContextFlags, MkeyErrType, MkeyInitFlags, QpState, SendFlags, crypto_cap, dv_qp, event_type, qp_type,
    send_ops, sig, sig_cap, wc_flags, wc_opcode, wc_status,
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
            (stringify!($c), $v as u64)
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

#[test]
fn mirrored_layouts_and_constants_equal_the_installed_headers() {
    let rows = table();
    let mut c =
        String::from("#include <infiniband/mlx5dv.h>\n#include <stddef.h>\n#include <stdio.h>\nint main(void) {\n");
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
