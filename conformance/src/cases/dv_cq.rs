//! `mlx5dv_create_cq`'s vendor attributes: CQE compression as `mlx5dv_query_device` offers it,
//! the CQE size and padding, with libmlx5's and the kernel's refusals.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{Backend, DvCqAttr, MLX5DV_CONTEXT_MASK_CQE_COMPRESION, dv_context_flags, dv_cq};

use crate::case::{Case, Check, Env, Need, check, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "dv_cq.compression_in_the_offered_formats",
        covers: &[300],
        needs: &[Need::Mlx5Device],
        run: compression,
    },
    Case { name: "dv_cq.vendor_attributes_checked", covers: &[301], needs: &[Need::Mlx5Device], run: vendor_checks },
];

fn compressed(format: u8, cqe_size: u16) -> DvCqAttr {
    DvCqAttr {
        comp_mask: dv_cq::MASK_COMPRESSED_CQE | dv_cq::MASK_CQE_SIZE,
        cqe_comp_res_format: format,
        flags: 0,
        cqe_size,
    }
}

/// Each format `cqe_comp_caps` offers makes a CQ of 64-byte CQEs, and of 128-byte ones where
/// the context flags say so (EOPNOTSUPP otherwise); two formats at once are EINVAL, as is
/// compression on a device whose `max_num` is 0.
fn compression(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = expect_ok("mlx5dv_open_device", b.open_device(env.dev()?, None))?;
    let q = expect_ok("mlx5dv_query_device(CQE_COMPRESION)", b.query_device(ctx, MLX5DV_CONTEXT_MASK_CQE_COMPRESION))?;
    check(
        "the CQE_COMPRESION part in the answer's comp_mask",
        q.comp_mask & MLX5DV_CONTEXT_MASK_CQE_COMPRESION != 0,
        "set",
        q.comp_mask,
    )?;
    let caps = q.cqe_comp_caps;
    let hash_csum = u32::from(dv_cq::FORMAT_HASH | dv_cq::FORMAT_CSUM);
    check_eq("the hash and checksum formats in supported_format", caps.supported_format & hash_csum, hash_csum)?;
    if caps.max_num == 0 {
        let r = b.create_dv_cq(ctx, 16, 0, &compressed(dv_cq::FORMAT_HASH, 64));
        expect_errno("a compressed CQ with max_num 0", r, EINVAL)?;
        return expect_ok("ibv_close_device", b.close_device(ctx));
    }
    let comp_128 = q.flags & dv_context_flags::CQE_128B_COMP != 0;
    for f in [dv_cq::FORMAT_HASH, dv_cq::FORMAT_CSUM, dv_cq::FORMAT_CSUM_STRIDX] {
        if caps.supported_format & u32::from(f) == 0 {
            let r = b.create_dv_cq(ctx, 16, 0, &compressed(f, 64));
            expect_errno(&format!("a CQ compressed in format 0x{f:x}, not offered"), r, EINVAL)?;
            continue;
        }
        let cq = expect_ok(
            &format!("a 64-byte CQ compressed in format 0x{f:x}"),
            b.create_dv_cq(ctx, 16, 0, &compressed(f, 64)),
        )?;
        check_eq("the capacity of the compressed CQ", cq.cqe, 31)?;
        expect_ok("ibv_destroy_cq", b.destroy_cq(&cq))?;
        let r = b.create_dv_cq(ctx, 16, 0, &compressed(f, 128));
        if comp_128 {
            let cq = expect_ok(&format!("a 128-byte CQ compressed in format 0x{f:x}"), r)?;
            expect_ok("ibv_destroy_cq", b.destroy_cq(&cq))?;
        } else {
            expect_errno("a 128-byte compressed CQ without CQE_128B_COMP", r, EOPNOTSUPP)?;
        }
    }
    let two = compressed(dv_cq::FORMAT_HASH | dv_cq::FORMAT_CSUM, 64);
    expect_errno("a CQ compressed in two formats", b.create_dv_cq(ctx, 16, 0, &two), EINVAL)?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

/// libmlx5's refusals, each EINVAL: a vendor comp_mask bit it does not know, a CQE size other
/// than 64 or 128, a flag past `CQE_PAD`, padding of 64-byte CQEs. Padding of 128-byte CQEs
/// where the context flags offer it, and a plain 128-byte CQ, are made.
fn vendor_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = expect_ok("mlx5dv_open_device", b.open_device(env.dev()?, None))?;
    let q = expect_ok("mlx5dv_query_device", b.query_device(ctx, 0))?;
    let size = |cqe_size| DvCqAttr { comp_mask: dv_cq::MASK_CQE_SIZE, cqe_size, ..DvCqAttr::default() };
    let flags = |cqe_size, flags| DvCqAttr {
        comp_mask: dv_cq::MASK_CQE_SIZE | dv_cq::MASK_FLAGS,
        cqe_size,
        flags,
        ..DvCqAttr::default()
    };
    let unknown = DvCqAttr { comp_mask: 1 << 3, ..DvCqAttr::default() };
    expect_errno("vendor comp_mask bit 3", b.create_dv_cq(ctx, 16, 0, &unknown), EINVAL)?;
    expect_errno("cqe_size 100", b.create_dv_cq(ctx, 16, 0, &size(100)), EINVAL)?;
    expect_errno("vendor flag 0x2", b.create_dv_cq(ctx, 16, 0, &flags(128, dv_cq::FLAGS_RESERVED)), EINVAL)?;
    expect_errno("CQE padding of 64-byte CQEs", b.create_dv_cq(ctx, 16, 0, &flags(64, dv_cq::FLAGS_CQE_PAD)), EINVAL)?;
    let padded = b.create_dv_cq(ctx, 16, 0, &flags(128, dv_cq::FLAGS_CQE_PAD));
    if q.flags & dv_context_flags::CQE_128B_PAD != 0 {
        let cq = expect_ok("a padded 128-byte CQ", padded)?;
        expect_ok("ibv_destroy_cq", b.destroy_cq(&cq))?;
    } else {
        expect_errno("CQE padding without CQE_128B_PAD", padded, EINVAL)?;
    }
    let cq = expect_ok("a 128-byte CQ", b.create_dv_cq(ctx, 100, 0, &size(128)))?;
    check_eq("the capacity of mlx5dv_create_cq(100)", cq.cqe, 127)?;
    expect_ok("ibv_destroy_cq", b.destroy_cq(&cq))?;
    expect_errno("mlx5dv_create_cq with cqe 0", b.create_dv_cq(ctx, 0, 0, &size(64)), EINVAL)?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}
