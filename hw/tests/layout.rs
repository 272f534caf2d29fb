//! The mirrored structs and constants against the installed C headers: a small C program,
//! compiled with `cc`, prints each size, offset and value, and each must equal ours.

use std::mem::{offset_of, size_of};
use std::process::Command;

use mlx5_dv::{ContextFlags, MkeyErrType, MkeyInitFlags, crypto_cap, sig_cap};
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
