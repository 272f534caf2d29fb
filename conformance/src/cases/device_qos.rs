//! Packet pacing entries (`mlx5dv_pp_alloc` / `_free`), VARs (`mlx5dv_alloc_var`) and a QP's
//! LAG port (`mlx5dv_query_qp_lag_port` / `mlx5dv_modify_qp_lag_port`).

use mlx5_dv::errno::{EINVAL, ENOSPC, EOPNOTSUPP, EPROTONOSUPPORT};
use mlx5_dv::prm::{self, opcode, qos_cap as qc, query_hca_cap as q};
use mlx5_dv::{
    Backend, ContextHandle, DvQpCreateFlags, MLX5DV_PP_ALLOC_FLAGS_DEDICATED_INDEX, MLX5DV_VAR_ALLOC_FLAG_TLP, PpEntry,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "device_objects.pp_checks_sharing_and_full_table",
        covers: &[262, 263],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: pp,
    },
    Case { name: "device_objects.var_pages_and_mmap_offsets", covers: &[264], needs: &[Need::Mlx5Device], run: var },
    Case {
        name: "device_objects.lag_port_eopnotsupp_without_lag",
        covers: &[265],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: lag,
    },
];

/// A current capability page through DEVX.
fn cap_page(b: &mut dyn Backend, ctx: ContextHandle, op_mod: u16) -> Check<Vec<u8>> {
    let input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, op_mod);
    let out = expect_ok("QUERY_HCA_CAP", b.devx_general_cmd(ctx, &input, q::CAPABILITY_BYTE + q::CAPABILITY_SIZE))?;
    Ok(out[q::CAPABILITY_BYTE..].to_vec())
}

fn field(page: &[u8], f: prm::Field) -> Check<u64> {
    f.get(page).map_err(|e| Verdict::fail("a capability field", "in the page", e.to_string()))
}

/// A 48-byte `set_pp_rate_limit_context` with `rate` kbps (big-endian, as the PRM has it).
fn rate_ctx(rate: u32) -> Vec<u8> {
    let mut c = vec![0u8; 48];
    c[..4].copy_from_slice(&rate.to_be_bytes());
    c
}

/// The kernel's and libmlx5's checks, shared entries for equal bytes (across contexts too),
/// dedicated entries apart, indices from 1, ENOSPC on a full table, and entries given back.
fn pp(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _pd, _cq) = open(b, env.dev()?)?;
    let general = cap_page(b, ctx, q::OP_MOD_GENERAL_CUR)?;
    let qos = if field(&general, qc::QOS)? != 0 { Some(cap_page(b, ctx, q::OP_MOD_QOS_CUR)?) } else { None };
    let has = match &qos {
        Some(p) => field(p, qc::PACKET_PACING)? != 0 && field(p, qc::PACKET_PACING_UID)? != 0,
        None => false,
    };
    if !has {
        expect_errno("mlx5dv_pp_alloc without packet pacing", b.pp_alloc(ctx, &rate_ctx(100), 0), EPROTONOSUPPORT)?;
        return Err(Verdict::skip("the device has no packet pacing with uids (EPROTONOSUPPORT checked)"));
    }
    let page = qos.unwrap_or_default();
    let (min, max) =
        (field(&page, qc::PACKET_PACING_MIN_RATE)? as u32, field(&page, qc::PACKET_PACING_MAX_RATE)? as u32);
    let size = field(&page, qc::PACKET_PACING_RATE_TABLE_SIZE)? as u16;
    let rate = 100u32.clamp(min.max(1), max);
    match b.pp_alloc(ctx, &rate_ctx(rate), 0) {
        Err(e) if e.errno() == EOPNOTSUPP => {
            return Err(Verdict::skip("the backend does not forward mlx5dv_pp_alloc (EOPNOTSUPP)"));
        }
        r => {
            let p = expect_ok("mlx5dv_pp_alloc", r)?;
            expect_ok("mlx5dv_pp_free", b.pp_free(&p))?;
        }
    }
    expect_errno("flags past DEDICATED_INDEX", b.pp_alloc(ctx, &rate_ctx(rate), 2), EOPNOTSUPP)?;
    expect_errno("an empty context", b.pp_alloc(ctx, &[], 0), EINVAL)?;
    expect_errno("a 49-byte context", b.pp_alloc(ctx, &[0u8; 49], 0), EINVAL)?;
    expect_errno("rate 0", b.pp_alloc(ctx, &rate_ctx(0), 0), EINVAL)?;
    if max < u32::MAX {
        expect_errno("a rate past the maximum", b.pp_alloc(ctx, &rate_ctx(max + 1), 0), EINVAL)?;
    }
    if min > 1 {
        expect_errno("a rate under the minimum", b.pp_alloc(ctx, &rate_ctx(min - 1), 0), EINVAL)?;
    }
    let a = expect_ok("mlx5dv_pp_alloc", b.pp_alloc(ctx, &rate_ctx(rate), 0))?;
    check_eq("indices start at 1 below the table size", a.index >= 1 && a.index < size, true)?;
    // A 4-byte context is the same entry as its zero-padded 48 bytes.
    let same = expect_ok("mlx5dv_pp_alloc, the same rate", b.pp_alloc(ctx, &rate_ctx(rate)[..4], 0))?;
    check_eq("equal contexts share an entry", same.index, a.index)?;
    let other = expect_ok("a second context", b.open_ibv_device(env.dev()?))?;
    let shared = expect_ok("mlx5dv_pp_alloc on a second context", b.pp_alloc(other, &rate_ctx(rate), 0))?;
    check_eq("a shared entry spans contexts", shared.index, a.index)?;
    let ded = MLX5DV_PP_ALLOC_FLAGS_DEDICATED_INDEX;
    let d1 = expect_ok("a dedicated entry", b.pp_alloc(ctx, &rate_ctx(rate), ded))?;
    let d2 = expect_ok("a second dedicated entry", b.pp_alloc(ctx, &rate_ctx(rate), ded))?;
    check_eq("dedicated entries are apart", d1.index != a.index && d2.index != a.index && d1.index != d2.index, true)?;
    expect_ok("close the second context", b.close_device(other))?;
    for p in [&a, &same, &d1, &d2] {
        expect_ok("mlx5dv_pp_free", b.pp_free(p))?;
    }
    expect_errno("mlx5dv_pp_free twice", b.pp_free(&a), EINVAL)?;
    let mut held: Vec<PpEntry> = Vec::new();
    let full = loop {
        match b.pp_alloc(ctx, &rate_ctx(rate), ded) {
            Ok(p) if held.len() < usize::from(size) => held.push(p),
            r => break r,
        }
    };
    expect_errno("a full rate table", full, ENOSPC)?;
    check_eq("the table holds its size less the unlimited entry", held.len(), usize::from(size) - 1)?;
    for p in &held {
        expect_ok("mlx5dv_pp_free", b.pp_free(p))?;
    }
    let again = expect_ok("mlx5dv_pp_alloc after freeing all", b.pp_alloc(ctx, &rate_ctx(rate), 0))?;
    check_eq("the first free entry again", again.index, 1)?;
    expect_ok("mlx5dv_pp_free", b.pp_free(&again))?;
    expect_ok("close", b.close_device(ctx))
}

/// VIRTIO_NET_Q's bit in `general_obj_types`.
const VIRTIO_NET_Q: u64 = 1 << 0xd;

/// VARs take the first free doorbell page and the context's first free mmap offset from
/// 0x900000; without virtio emulation the object does not exist (EPROTONOSUPPORT).
fn var(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = expect_ok("ibv_open_device", b.open_ibv_device(env.dev()?))?;
    let Some(types) = env.caps.device.general_obj_types else {
        return Err(Verdict::skip("general_obj_types unknown on this backend"));
    };
    expect_errno("flags past TLP", b.alloc_var(ctx, 2), EOPNOTSUPP)?;
    let probe = b.alloc_var(ctx, 0);
    if probe.as_ref().is_err_and(|e| e.errno() == EOPNOTSUPP) {
        return Err(Verdict::skip("the backend does not forward mlx5dv_alloc_var (EOPNOTSUPP)"));
    }
    if types & VIRTIO_NET_Q == 0 {
        expect_errno("mlx5dv_alloc_var without virtio emulation", probe, EPROTONOSUPPORT)?;
        return Err(Verdict::skip("the device has no VIRTIO_NET_Q objects (EPROTONOSUPPORT checked)"));
    }
    expect_ok("mlx5dv_free_var", b.free_var(&expect_ok("mlx5dv_alloc_var", probe)?))?;
    expect_errno(
        "the TLP flag without a TLP emulation manager",
        b.alloc_var(ctx, MLX5DV_VAR_ALLOC_FLAG_TLP),
        EOPNOTSUPP,
    )?;
    let v1 = expect_ok("mlx5dv_alloc_var", b.alloc_var(ctx, 0))?;
    let v2 = expect_ok("a second VAR", b.alloc_var(ctx, 0))?;
    check_eq("a VAR is one 4 KiB page", (v1.length, v2.length), (4096, 4096))?;
    check_eq("the mmap offsets of the first two", (v1.mmap_off, v2.mmap_off), (0x90_0000, 0x90_1000))?;
    check_eq("pages differ", v1.page_id != v2.page_id, true)?;
    expect_ok("mlx5dv_free_var", b.free_var(&v1))?;
    expect_errno("mlx5dv_free_var twice", b.free_var(&v1), EINVAL)?;
    let v3 = expect_ok("mlx5dv_alloc_var after a free", b.alloc_var(ctx, 0))?;
    check_eq("the freed page and offset again", (v3.page_id, v3.mmap_off), (v1.page_id, v1.mmap_off))?;
    expect_ok("mlx5dv_free_var", b.free_var(&v2))?;
    expect_ok("mlx5dv_free_var", b.free_var(&v3))?;
    expect_ok("close", b.close_device(ctx))
}

/// On a device with at most one LAG port libmlx5 answers EOPNOTSUPP before any command, for
/// the query and for the modify (which queries first).
fn lag(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let general = cap_page(b, ctx, q::OP_MOD_GENERAL_CUR)?;
    if field(&general, qc::NUM_LAG_PORTS)? > 1 {
        return Err(Verdict::skip("a device with LAG ports: the case checks a device without"));
    }
    let qp = expect_ok("create an RC QP", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    expect_errno("mlx5dv_query_qp_lag_port", b.query_qp_lag_port(qp.handle), EOPNOTSUPP)?;
    expect_errno("mlx5dv_modify_qp_lag_port", b.modify_qp_lag_port(qp.handle, 2), EOPNOTSUPP)?;
    expect_ok("ibv_destroy_qp", b.destroy_qp(&qp))?;
    expect_ok("close", b.close_device(ctx))
}
