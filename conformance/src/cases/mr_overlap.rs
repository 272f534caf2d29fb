//! MRs over the same bytes: registrations that overlap in part, each reaching its own range.

use mlx5_dv::{AccessFlags as A, Backend, DvQpCreateFlags, wc_opcode, wc_status};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, check_eq, expect_ok};

pub(super) const CASES: &[Case] = &[Case {
    name: "mr.overlapping_in_part_each_reaches_its_range",
    covers: &[335],
    needs: &[Need::Mlx5Device],
    run: overlapping_in_part,
}];

/// Two MRs of one buffer sharing its middle third take WRITEs into their own ranges, the
/// shared bytes through either; after one is deregistered the other still reaches the shared
/// bytes, and the first's rkey is refused.
fn overlapping_in_part(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let rw = A::LOCAL_WRITE | A::REMOTE_WRITE;
    let buf = expect_ok("alloc_buf", b.alloc_buf(768))?;
    let lo = expect_ok("ibv_reg_mr of the first two thirds", b.reg_mr(s.pd, buf.addr, 512, rw))?;
    let hi = expect_ok("ibv_reg_mr of the last two thirds", b.reg_mr(s.pd, buf.addr + 256, 512, rw))?;
    check_eq("the two MRs' rkeys differ", lo.rkey != hi.rkey, true)?;
    let (srcbuf, smr) = region(b, a.pd, 768, &pattern(768, 3), A::LOCAL_WRITE)?;
    let src = pattern(768, 3);
    expect_ok(
        "RDMA WRITE through the first",
        b.post_send(&a.qp, &[write(1, lo.rkey, lo.addr, vec![sge(&smr, 0, 512)])]),
    )?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    expect_ok(
        "RDMA WRITE through the second",
        b.post_send(&a.qp, &[write(2, hi.rkey, hi.addr + 256, vec![sge(&smr, 512, 256)])]),
    )?;
    ok_cqe(b, &a.cq, 2, wc_opcode::RDMA_WRITE)?;
    check_eq("the buffer after both WRITEs", contents(b, &buf)?, src.clone())?;
    expect_ok("ibv_dereg_mr of the first", b.dereg_mr(&lo))?;
    let again = pattern(256, 9);
    expect_ok("write the source", b.write_buf(&srcbuf, 0, &again))?;
    expect_ok(
        "RDMA WRITE of the shared third through the second",
        b.post_send(&a.qp, &[write(3, hi.rkey, hi.addr, vec![sge(&smr, 0, 256)])]),
    )?;
    ok_cqe(b, &a.cq, 3, wc_opcode::RDMA_WRITE)?;
    let mut want = src;
    want[256..512].copy_from_slice(&again);
    check_eq("the buffer after the third WRITE", contents(b, &buf)?, want.clone())?;
    expect_ok(
        "RDMA WRITE through the deregistered MR's rkey",
        b.post_send(&a.qp, &[write(4, lo.rkey, lo.addr, vec![sge(&smr, 0, 16)])]),
    )?;
    err_cqe(b, &a.cq, 4, wc_status::REM_ACCESS_ERR)?;
    check_eq("the buffer is untouched by the refused WRITE", contents(b, &buf)?, want)?;
    expect_ok("ibv_dereg_mr of the second", b.dereg_mr(&hi))
}
