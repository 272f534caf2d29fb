//! DEVX flow counters: ALLOC_FLOW_COUNTER / DEALLOC_FLOW_COUNTER / QUERY_FLOW_COUNTER as DEVX
//! objects (items 245–248).

use mlx5_dv::errno::{EINVAL, EREMOTEIO};
use mlx5_dv::prm::{self, flow_counter as fc, opcode, query_hca_cap as q, status};
use mlx5_dv::{Backend, ContextHandle, DevxObjHandle};

use super::devx::devx_ctx;
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "flow_counter.alloc_query_dealloc_single_and_bulk",
        covers: &[245, 246, 247],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: alloc_query_dealloc,
    },
    Case {
        name: "flow_counter.a_bulk_object_answers_queries_of_its_counters",
        covers: &[248],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: bulk_gate,
    },
];

/// The flow counter capabilities of the general page: `max_flow_counter`,
/// `flow_counter_bulk_alloc`, `log_max_flow_counter_bulk`.
fn caps(b: &mut dyn Backend, ctx: ContextHandle) -> Check<(u64, u64, u64)> {
    let input = prm::new_input(16, opcode::QUERY_HCA_CAP, 0, q::OP_MOD_GENERAL_CUR);
    let out = expect_ok("QUERY_HCA_CAP", b.devx_general_cmd(ctx, &input, 0x1010))?;
    let page = &out[q::CAPABILITY_BYTE..];
    let get = |f: prm::Field| f.get(page).unwrap_or(0);
    let max = get(fc::CAP_MAX_31_16) << 16 | get(fc::CAP_MAX_15_0);
    Ok((max, get(fc::CAP_BULK_ALLOC), get(fc::CAP_LOG_MAX_BULK)))
}

fn alloc_input(log: u64, mask: u64) -> Vec<u8> {
    let mut i = prm::new_input(fc::ALLOC_SIZE, fc::ALLOC, 0, 0);
    let _ = fc::BULK_LOG_SIZE.set(&mut i, log);
    let _ = fc::BULK.set(&mut i, mask);
    i
}

fn query_input(id: u64, num: u64, clear: bool) -> Vec<u8> {
    let mut i = prm::new_input(fc::QUERY_IN_SIZE, fc::QUERY, 0, 0);
    let _ = fc::QUERY_ID.set(&mut i, id);
    let _ = fc::QUERY_NUM.set(&mut i, num);
    let _ = fc::QUERY_CLEAR.set(&mut i, u64::from(clear));
    i
}

/// Query `num` counters from `id` through `obj`: their packet counts.
fn packets(b: &mut dyn Backend, obj: DevxObjHandle, id: u64, num: u64, clear: bool) -> Check<Vec<u64>> {
    let len = fc::STATS_BYTE + fc::STATS_SIZE * num.max(1) as usize;
    let out = expect_ok("QUERY_FLOW_COUNTER", b.devx_obj_query(obj, &query_input(id, num, clear), len))?;
    check_eq("QUERY_FLOW_COUNTER status", out[0], status::OK)?;
    let at = |i: usize| fc::PACKETS.get(&out[fc::STATS_BYTE + i * fc::STATS_SIZE..]).unwrap_or(u64::MAX);
    Ok((0..num.max(1) as usize).map(at).collect())
}

/// The context and caps, or a skip (after checking the refusal) on a device without counters.
fn counters_ctx(b: &mut dyn Backend, env: &Env) -> Check<(ContextHandle, (u64, u64, u64))> {
    let ctx = devx_ctx(b, env)?;
    let caps = caps(b, ctx)?;
    if caps.0 == 0 {
        let got = b.devx_obj_create(ctx, &alloc_input(0, 0), fc::ALLOC_SIZE);
        expect_errno("ALLOC_FLOW_COUNTER with max_flow_counter 0", got.map(|_| ()), EREMOTEIO)?;
        return Err(Verdict::skip("the device has no flow counters (max_flow_counter 0; the refusal checked)"));
    }
    Ok((ctx, caps))
}

/// A single counter starts at zero; a bulk of the smallest mask the caps list starts at a
/// multiple of its size; bulks past the caps are refused; destroy frees each.
fn alloc_query_dealloc(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, (_, masks, log_max)) = counters_ctx(b, env)?;
    let one = expect_ok("ALLOC_FLOW_COUNTER", b.devx_obj_create(ctx, &alloc_input(0, 0), fc::ALLOC_SIZE))?;
    let id = fc::ID.get(&one.out).unwrap_or(0);
    check_eq("a new counter's packets", packets(b, one.handle, id, 0, false)?, vec![0])?;
    if masks != 0 {
        let mask = 1u64 << masks.trailing_zeros();
        let bulk = expect_ok("ALLOC_FLOW_COUNTER bulk", b.devx_obj_create(ctx, &alloc_input(0, mask), 16))?;
        let first = fc::ID.get(&bulk.out).unwrap_or(1);
        check("the bulk starts at a multiple of its size", first.is_multiple_of(128 * mask), "aligned", first)?;
        let n = 128 * mask;
        check_eq("the bulk's last counters", packets(b, bulk.handle, first + n - 2, 2, true)?, vec![0, 0])?;
        expect_ok("destroy the bulk", b.devx_obj_destroy(bulk.handle))?;
    }
    let unlisted = (0..8).map(|k| 1u64 << k).find(|m| masks & m == 0);
    if let Some(m) = unlisted {
        let got = b.devx_obj_create(ctx, &alloc_input(0, m), fc::ALLOC_SIZE).map(|_| ());
        expect_errno("a flow_counter_bulk mask the caps do not list", got, EREMOTEIO)?;
    }
    if log_max < 31 {
        let got = b.devx_obj_create(ctx, &alloc_input(log_max + 1, 0), fc::ALLOC_SIZE).map(|_| ());
        expect_errno("a bulk log size past log_max_flow_counter_bulk", got, EREMOTEIO)?;
    }
    let both = b.devx_obj_create(ctx, &alloc_input(1, 1), fc::ALLOC_SIZE).map(|_| ());
    expect_errno("both bulk forms at once", both, EREMOTEIO)?;
    expect_ok("destroy the counter", b.devx_obj_destroy(one.handle))?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

/// A query through a bulk object may name any of its counters and none past them; a single
/// counter's object only its own.
fn bulk_gate(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, (_, _, log_max)) = counters_ctx(b, env)?;
    if log_max < 2 {
        return Err(Verdict::skip("log_max_flow_counter_bulk below 2: no bulk of 4 to query"));
    }
    let bulk = expect_ok("ALLOC_FLOW_COUNTER log size 2", b.devx_obj_create(ctx, &alloc_input(2, 0), 16))?;
    let first = fc::ID.get(&bulk.out).unwrap_or(0);
    check_eq("the bulk's fourth counter", packets(b, bulk.handle, first + 3, 1, false)?, vec![0])?;
    let past = b.devx_obj_query(bulk.handle, &query_input(first + 4, 1, false), 32).map(|_| ());
    expect_errno("a counter past the bulk", past, EINVAL)?;
    let one = expect_ok("ALLOC_FLOW_COUNTER", b.devx_obj_create(ctx, &alloc_input(0, 0), fc::ALLOC_SIZE))?;
    let id = fc::ID.get(&one.out).unwrap_or(0);
    let other = b.devx_obj_query(one.handle, &query_input(id + 1, 1, false), 32).map(|_| ());
    expect_errno("another counter through a single counter's object", other, EINVAL)?;
    expect_ok("destroy the counter", b.devx_obj_destroy(one.handle))?;
    expect_ok("destroy the bulk", b.devx_obj_destroy(bulk.handle))?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}
