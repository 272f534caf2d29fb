//! Small device objects of libmlx5: reserved QP numbers (`mlx5dv_reserved_qpn_alloc` /
//! `_dealloc`).

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::obj_type::RESERVED_QPN;
use mlx5_dv::{Backend, DvQpCreateFlags};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[Case {
    name: "device_objects.reserved_qpn_forward_and_einval",
    covers: &[214, 215],
    needs: &[Need::Mlx5Device, Need::Devx],
    run: reserved_qpn,
}];

/// How many numbers the case takes: more than one RESERVED_QPN object holds on the shipped
/// profiles, so it crosses objects.
const COUNT: usize = 600;

/// Numbers go forward across objects, no QP takes one, another context cannot give them
/// back, and a number not out (never handed out, or given back already) is EINVAL; a device
/// without RESERVED_QPN objects answers EOPNOTSUPP.
fn reserved_qpn(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let has = env.caps.device.general_obj_types.map(|m| m & 1u64 << RESERVED_QPN != 0);
    let first = b.reserved_qpn_alloc(ctx);
    if has == Some(false) {
        expect_errno("mlx5dv_reserved_qpn_alloc without RESERVED_QPN", first, EOPNOTSUPP)?;
        return Err(Verdict::skip("the device has no RESERVED_QPN general object (EOPNOTSUPP checked)"));
    }
    let mut qpns = vec![expect_ok("mlx5dv_reserved_qpn_alloc", first)?];
    for i in 1..COUNT {
        let q = expect_ok("mlx5dv_reserved_qpn_alloc", b.reserved_qpn_alloc(ctx))?;
        if q <= qpns[i - 1] {
            return Err(Verdict::fail("reserved numbers go forward", format!("> 0x{:x}", qpns[i - 1]), q));
        }
        qpns.push(q);
    }
    let qp = expect_ok("create an RC QP", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    check_eq("the QP number is a reserved one", qpns.contains(&qp.qp_num), false)?;
    let other = expect_ok("a second context", b.open_ibv_device(env.dev()?))?;
    expect_errno("dealloc on another context", b.reserved_qpn_dealloc(other, qpns[0]), EINVAL)?;
    for q in &qpns {
        expect_ok("mlx5dv_reserved_qpn_dealloc", b.reserved_qpn_dealloc(ctx, *q))?;
    }
    let q = expect_ok("mlx5dv_reserved_qpn_alloc after giving all back", b.reserved_qpn_alloc(ctx))?;
    check_eq("the next number is past the ones given back", q > qpns[COUNT - 1], true)?;
    expect_errno("dealloc of a number not handed out", b.reserved_qpn_dealloc(ctx, q - 1), EINVAL)?;
    expect_ok("mlx5dv_reserved_qpn_dealloc", b.reserved_qpn_dealloc(ctx, q))?;
    expect_errno("dealloc of a number given back", b.reserved_qpn_dealloc(ctx, q), EINVAL)?;
    expect_ok("ibv_destroy_qp", b.destroy_qp(&qp))?;
    expect_ok("close the second context", b.close_device(other))
}
