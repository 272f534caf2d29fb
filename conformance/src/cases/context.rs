//! Contexts and capabilities: §12.1–6.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{
    Backend, ContextAttr, ContextFlags, Cq, DvQpCreateFlags, DvQpInitAttr,
    MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD as CRYPTO_MASK, MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD as SIG_MASK, MkeyInitAttr,
    MkeyInitFlags, PdHandle, QpInitAttr, SigCaps, crypto_cap, sig_cap,
};

use super::fixture::{CAP, MKEY_OPS, open};
use super::open_pd;
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case { name: "context.dv_open_non_mlx5_device", covers: &[1], needs: &[Need::OtherDevice], run: dv_open_non_mlx5 },
    Case { name: "context.dv_open_vfio_device", covers: &[1], needs: &[Need::VfioDevice], run: dv_open_vfio },
    Case {
        name: "context.non_mlx5_context_has_no_dv_ops",
        covers: &[],
        needs: &[Need::OtherDevice],
        run: non_mlx5_ops,
    },
    Case {
        name: "context.vfio_context_has_no_cqs_or_qps",
        covers: &[99],
        needs: &[Need::Mlx5Device, Need::VfioDevice],
        run: vfio_no_queues,
    },
    Case {
        name: "context.non_mlx5_context_has_no_dv_qps",
        covers: &[99],
        needs: &[Need::Mlx5Device, Need::OtherDevice],
        run: non_mlx5_no_dv_qp,
    },
    Case { name: "context.unknown_comp_mask", covers: &[2], needs: &[Need::Mlx5Device], run: unknown_comp_mask },
    Case { name: "context.unknown_flags", covers: &[2], needs: &[Need::Mlx5Device], run: unknown_flags },
    Case {
        name: "context.explicit_devx_follows_kernel",
        covers: &[3],
        needs: &[Need::Mlx5Device, Need::KnownDevx],
        run: explicit_devx,
    },
    Case { name: "context.plain_open_always_succeeds", covers: &[3], needs: &[Need::Mlx5Device], run: plain_open },
    Case {
        name: "context.no_devx_context_cannot_create_mkeys",
        covers: &[3],
        needs: &[Need::Mlx5Device, Need::NoDevx],
        run: no_devx_mkeys,
    },
    Case { name: "caps.signature_caps_values", covers: &[4], needs: &[Need::Mlx5Device], run: sig_caps_values },
    Case { name: "caps.crypto_caps_values", covers: &[5], needs: &[Need::Mlx5Device], run: crypto_caps_values },
    Case { name: "caps.comp_mask_echo", covers: &[6], needs: &[Need::Mlx5Device], run: comp_mask_echo },
];

fn other(env: &Env) -> Check<&str> {
    env.other_device.as_deref().ok_or_else(|| Verdict::skip("no non-mlx5 device"))
}

fn dv_open_non_mlx5(b: &mut dyn Backend, env: &Env) -> Check {
    let dev = other(env)?;
    expect_errno("mlx5dv_open_device(non-mlx5, NULL)", b.open_device(dev, None), EOPNOTSUPP)?;
    expect_errno("mlx5dv_open_device(non-mlx5, DEVX)", b.open_device(dev, Some(&ContextAttr::devx())), EOPNOTSUPP)
}

fn dv_open_vfio(b: &mut dyn Backend, env: &Env) -> Check {
    let dev = env.vfio_device.as_deref().ok_or_else(|| Verdict::skip("no VFIO device"))?;
    expect_errno("mlx5dv_open_device(VFIO device)", b.open_device(dev, None), EOPNOTSUPP)
}

fn non_mlx5_ops(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = expect_ok("ibv_open_device(non-mlx5)", b.open_ibv_device(other(env)?))?;
    expect_errno("mlx5dv_query_device on a non-mlx5 context", b.query_device(ctx, SIG_MASK), EOPNOTSUPP)?;
    let pd = expect_ok("ibv_alloc_pd on a non-mlx5 context", b.alloc_pd(ctx))?;
    let attr = MkeyInitAttr { pd, create_flags: MkeyInitFlags::INDIRECT, max_entries: 4 };
    expect_errno("mlx5dv_create_mkey on a non-mlx5 PD", b.create_mkey(&attr), EOPNOTSUPP)?;
    expect_ok("ibv_dealloc_pd", b.dealloc_pd(pd))?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

/// A QP on the PD `pd` of a context without QPs, with the CQ `cq` of an mlx5 kernel context:
/// EOPNOTSUPP from `ibv_create_qp` (when `verbs` is set) and from `mlx5dv_create_qp`, and the CQ
/// is left unused.
fn no_qp_on(b: &mut dyn Backend, pd: PdHandle, cq: &Cq, verbs: bool, on: &str) -> Check {
    let dv = QpInitAttr::rc(pd, cq.handle, CAP, Some(DvQpInitAttr::new(DvQpCreateFlags::empty(), MKEY_OPS)));
    expect_errno(&format!("mlx5dv_create_qp on a PD of {on}"), b.create_qp(&dv), EOPNOTSUPP)?;
    if verbs {
        let plain = QpInitAttr::rc(pd, cq.handle, CAP, None);
        expect_errno(&format!("ibv_create_qp on a PD of {on}"), b.create_qp(&plain), EOPNOTSUPP)?;
    }
    expect_ok("ibv_destroy_cq of the CQ the refused QPs named", b.destroy_cq(cq))
}

/// The VFIO provider has no `create_cq` or `create_qp` (libibverbs' dummy ops) and its dv-ops
/// table no `create_qp`.
fn vfio_no_queues(b: &mut dyn Backend, env: &Env) -> Check {
    let dev = env.vfio_device.as_deref().ok_or_else(|| Verdict::skip("no VFIO device"))?;
    let vctx = expect_ok("ibv_open_device(VFIO)", b.open_ibv_device(dev))?;
    expect_errno("ibv_create_cq on a VFIO context", b.create_cq(vctx, 16), EOPNOTSUPP)?;
    let vpd = expect_ok("ibv_alloc_pd on a VFIO context", b.alloc_pd(vctx))?;
    let (_, _, cq) = open(b, env.dev()?)?;
    no_qp_on(b, vpd, &cq, true, "a VFIO context")?;
    expect_ok("ibv_dealloc_pd", b.dealloc_pd(vpd))?;
    expect_ok("ibv_close_device", b.close_device(vctx))
}

/// A device of another provider has no dv-ops table: `mlx5dv_create_qp` is EOPNOTSUPP before
/// anything else is looked at. (Its own `ibv_create_cq` and `ibv_create_qp` are its provider's.)
fn non_mlx5_no_dv_qp(b: &mut dyn Backend, env: &Env) -> Check {
    let octx = expect_ok("ibv_open_device(non-mlx5)", b.open_ibv_device(other(env)?))?;
    let opd = expect_ok("ibv_alloc_pd on a non-mlx5 context", b.alloc_pd(octx))?;
    let (_, _, cq) = open(b, env.dev()?)?;
    no_qp_on(b, opd, &cq, false, "a non-mlx5 context")?;
    expect_ok("ibv_dealloc_pd", b.dealloc_pd(opd))?;
    expect_ok("ibv_close_device", b.close_device(octx))
}

fn unknown_comp_mask(b: &mut dyn Backend, env: &Env) -> Check {
    for comp_mask in [1u64 << 1, 1 << 2, 1 << 63, 0xffff_fffe] {
        for flags in [ContextFlags::empty(), ContextFlags::DEVX] {
            let attr = ContextAttr { flags, comp_mask };
            expect_errno(
                &format!("comp_mask 0x{comp_mask:x}, flags {flags:?}"),
                b.open_device(env.dev()?, Some(&attr)),
                EINVAL,
            )?;
        }
    }
    Ok(())
}

fn unknown_flags(b: &mut dyn Backend, env: &Env) -> Check {
    for bits in [1u32 << 1, 1 << 31, 0b11, 0xffff_ffff] {
        let attr = ContextAttr { flags: ContextFlags::from_bits_retain(bits), comp_mask: 0 };
        expect_errno(&format!("flags 0x{bits:x}"), b.open_device(env.dev()?, Some(&attr)), EINVAL)?;
    }
    Ok(())
}

fn explicit_devx(b: &mut dyn Backend, env: &Env) -> Check {
    let r = b.open_device(env.dev()?, Some(&ContextAttr::devx()));
    match env.caps.kernel.devx {
        Some(true) => {
            let ctx = expect_ok("mlx5dv_open_device(DEVX) on a DEVX kernel", r)?;
            expect_ok("ibv_close_device", b.close_device(ctx))
        }
        Some(false) => expect_errno("mlx5dv_open_device(DEVX) on a kernel without DEVX", r, EINVAL),
        None => Err(Verdict::skip("unknown kernel DEVX support")),
    }
}

fn plain_open(b: &mut dyn Backend, env: &Env) -> Check {
    let dev = env.dev()?;
    let a = expect_ok("mlx5dv_open_device(NULL attr)", b.open_device(dev, None))?;
    let zero = ContextAttr { flags: ContextFlags::empty(), comp_mask: 0 };
    let c = expect_ok("mlx5dv_open_device(flags 0)", b.open_device(dev, Some(&zero)))?;
    let d = expect_ok("ibv_open_device", b.open_ibv_device(dev))?;
    for ctx in [a, c, d] {
        expect_ok("ibv_close_device", b.close_device(ctx))?;
    }
    Ok(())
}

fn no_devx_mkeys(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd) = super::open_pd(b, env)?;
    let attr = MkeyInitAttr { pd, create_flags: MkeyInitFlags::INDIRECT, max_entries: 4 };
    expect_errno("INDIRECT mkey without a DEVX uid (CREATE_MKEY refused by the kernel)", b.create_mkey(&attr), EINVAL)?;
    let sig = MkeyInitAttr { create_flags: MkeyInitFlags::BLOCK_SIGNATURE, ..attr };
    // With caps read through the whitelist uid the PSV command is refused; without, the
    // provider stops at the zero caps.
    let expected = if env.caps.device.sig.block_prot != 0 { EINVAL } else { EOPNOTSUPP };
    expect_errno("BLOCK_SIGNATURE mkey without a DEVX uid", b.create_mkey(&sig), expected)?;
    expect_ok("ibv_dealloc_pd", b.dealloc_pd(pd))?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn sig_caps_values(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _) = open_pd(b, env)?;
    let caps = expect_ok("mlx5dv_query_device(SIGNATURE_OFFLOAD)", b.query_device(ctx, SIG_MASK))?.sig_caps;
    if caps.block_prot == 0 {
        return check_eq("signature caps without signature offload", caps, SigCaps::default());
    }
    check_eq("block_prot", caps.block_prot, sig_cap::PROT_T10DIF | sig_cap::PROT_CRC)?;
    let base = sig_cap::BLOCK_512 | sig_cap::BLOCK_520 | sig_cap::BLOCK_4096 | sig_cap::BLOCK_4160;
    check(
        "block_size",
        caps.block_size & !sig_cap::BLOCK_4048 == base,
        "0x1b, optionally | 0x4",
        format!("0x{:x}", caps.block_size),
    )?;
    check_eq("t10dif_bg", caps.t10dif_bg, sig_cap::BG_CRC | sig_cap::BG_CSUM)?;
    check(
        "crc_type",
        caps.crc_type & sig_cap::CRC32 != 0
            && caps.crc_type & !(sig_cap::CRC32 | sig_cap::CRC32C | sig_cap::CRC64_XP10) == 0,
        "0x1, optionally | 0x2 | 0x4",
        format!("0x{:x}", caps.crc_type),
    )?;
    check_eq("the probe saw the same caps", caps, env.caps.device.sig)
}

fn crypto_caps_values(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _) = open_pd(b, env)?;
    let caps = expect_ok("mlx5dv_query_device(CRYPTO_OFFLOAD)", b.query_device(ctx, CRYPTO_MASK))?.crypto_caps;
    let engines = caps.crypto_engines;
    check(
        "the deprecated AES_XTS engine bit is never set",
        engines & crypto_cap::ENGINE_AES_XTS == 0,
        "bit 0 clear",
        engines,
    )?;
    check(
        "engine bits",
        engines & !(crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK | crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK) == 0,
        "only SINGLE_BLOCK (0x2) and MULTI_BLOCK (0x4)",
        engines,
    )?;
    if engines & crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK != 0 {
        check(
            "multi-block implies single-block",
            engines & crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK != 0,
            "0x6",
            engines,
        )?;
    }
    check("flags", caps.flags & !0x7 == 0, "a subset of 0x7", caps.flags)?;
    check(
        "wrapped_import_method",
        caps.wrapped_import_method & !crypto_cap::WRAPPED_IMPORT_AES_XTS == 0,
        "0 or 1",
        caps.wrapped_import_method,
    )?;
    if caps.flags & crypto_cap::FLAG_CRYPTO == 0 {
        // The crypto cap page is read only when the crypto bit is set.
        check_eq(
            "crypto-page fields without the crypto bit",
            (caps.flags, caps.wrapped_import_method, caps.log_max_num_deks, caps.failed_selftests),
            (0, 0, 0, 0),
        )?;
    }
    check_eq("the probe saw the same caps", caps, env.caps.device.crypto)
}

fn comp_mask_echo(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _) = open_pd(b, env)?;
    for (asked, echoed) in
        [(0, 0), (SIG_MASK, SIG_MASK), (CRYPTO_MASK, CRYPTO_MASK), (SIG_MASK | CRYPTO_MASK, SIG_MASK | CRYPTO_MASK)]
    {
        let got = expect_ok("mlx5dv_query_device", b.query_device(ctx, asked))?;
        check_eq(
            &format!("comp_mask 0x{asked:x}: SIGNATURE/CRYPTO bits echoed"),
            got.comp_mask & (SIG_MASK | CRYPTO_MASK),
            echoed,
        )?;
        if asked & SIG_MASK == 0 {
            check_eq("sig_caps untouched when not asked", got.sig_caps, SigCaps::default())?;
        }
    }
    Ok(())
}
