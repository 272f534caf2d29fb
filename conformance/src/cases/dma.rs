//! DMA memcpy (`mlx5dv_wr_memcpy`): items 271 and 272 of docs/behaviour.md.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags as A, Backend, DvQpCreateFlags, DvQpInitAttr, MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH, PdHandle,
    QpInitAttr, SendFlags, WrOp, dv_qp, wc_opcode, wc_status,
};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case { name: "qp.dma_memcpy_copies_within_the_pd", covers: &[271], needs: &[Need::Mlx5Device], run: memcpy_copies },
    Case { name: "qp.dma_memcpy_length_limits", covers: &[272], needs: &[Need::Mlx5Device], run: memcpy_lengths },
];

const LEN: usize = 4096;

/// An RC QP with the MEMCPY op (and SEND), connected to itself, in RTS.
fn memcpy_qp(b: &mut dyn Backend, ctx: mlx5_dv::ContextHandle, pd: PdHandle, cq: &mlx5_dv::Cq) -> Check<mlx5_dv::Qp> {
    let dv = DvQpInitAttr::new(DvQpCreateFlags::empty(), dv_qp::WITH_MEMCPY);
    let qp = expect_ok("an RC QP with MEMCPY", b.create_qp(&QpInitAttr::rc(pd, cq.handle, CAP, Some(dv))))?;
    connect(b, &qp, ctx, &qp)?;
    Ok(qp)
}

fn needs_dma(env: &Env) -> Check {
    match env.caps.device.dma_mmo {
        Some(true) => Ok(()),
        Some(false) => Err(Verdict::skip("the device has no DMA-MMO engine (MLX5DV_QP_EX_WITH_MEMCPY)")),
        None => Err(Verdict::skip("the backend cannot tell whether the device has the DMA-MMO engine")),
    }
}

fn copy(wr_id: u64, dest: &mlx5_dv::Mr, src: &mlx5_dv::Mr, length: u64) -> WrOp {
    WrOp::Memcpy {
        wr_id,
        flags: SendFlags::SIGNALED,
        dest_lkey: dest.lkey,
        dest_addr: dest.addr,
        src_lkey: src.lkey,
        src_addr: src.addr,
        length,
    }
}

/// A copy between two keys of the QP's PD lands and completes with MLX5DV_WC_MEMCPY; a
/// destination of another PD, or one without local write, completes with a local protection
/// error and leaves the destination as it was.
fn memcpy_copies(b: &mut dyn Backend, env: &Env) -> Check {
    needs_dma(env)?;
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let data = pattern(LEN, 0x5d);
    let (_, src) = region(b, pd, LEN, &data, A::LOCAL_WRITE)?;
    let (dbuf, dest) = region(b, pd, LEN, &[0; LEN], A::LOCAL_WRITE)?;
    let qp = memcpy_qp(b, ctx, pd, &cq)?;
    expect_ok("mlx5dv_wr_memcpy", b.post_send(&qp, &[copy(1, &dest, &src, LEN as u64)]))?;
    ok_cqe(b, &cq, 1, wc_opcode::DRIVER3)?;
    check_eq("the destination after the copy", contents(b, &dbuf)?, data)?;

    let other = expect_ok("ibv_alloc_pd (another PD)", b.alloc_pd(ctx))?;
    let (obuf, odest) = region(b, other, LEN, &[0; LEN], A::LOCAL_WRITE)?;
    let (rbuf, rdest) = region(b, pd, LEN, &[0; LEN], A::REMOTE_READ)?;
    for (what, buf, mr) in [("of another PD", &obuf, &odest), ("without local write", &rbuf, &rdest)] {
        let qp = memcpy_qp(b, ctx, pd, &cq)?;
        expect_ok(&format!("mlx5dv_wr_memcpy to a key {what}"), b.post_send(&qp, &[copy(2, mr, &src, LEN as u64)]))?;
        err_cqe(b, &cq, 2, wc_status::LOC_PROT_ERR)?;
        check_eq(&format!("a destination {what} after the error"), contents(b, buf)?, vec![0; LEN])?;
    }
    Ok(())
}

/// `max_wr_memcpy_length` is 0 without the DMA engine; with it, a length of 0 or past it
/// fails the chain with EINVAL and posts nothing, and a QP created without the MEMCPY op has
/// no builder for it (EOPNOTSUPP here, a NULL op in libmlx5).
fn memcpy_lengths(b: &mut dyn Backend, env: &Env) -> Check {
    let Some(has) = env.caps.device.dma_mmo else {
        return Err(Verdict::skip("the backend cannot tell whether the device has the DMA-MMO engine"));
    };
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let q = expect_ok("mlx5dv_query_device", b.query_device(ctx, MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH))?;
    let echoed = q.comp_mask & MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH;
    check_eq("comp_mask's WR_MEMCPY_LENGTH bit", echoed, MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH)?;
    if !has {
        return check_eq("max_wr_memcpy_length without DMA-MMO", q.max_wr_memcpy_length, 0);
    }
    let max = q.max_wr_memcpy_length;
    check("max_wr_memcpy_length with DMA-MMO", max > 0, "more than 0", max)?;
    let (_, src) = region(b, pd, LEN, &pattern(LEN, 3), A::LOCAL_WRITE)?;
    let (_, dest) = region(b, pd, LEN, &[], A::LOCAL_WRITE)?;
    let qp = memcpy_qp(b, ctx, pd, &cq)?;
    for (what, len) in [("0 bytes", 0), ("one byte past max_wr_memcpy_length", max.saturating_add(1))] {
        expect_errno(&format!("mlx5dv_wr_memcpy of {what}"), b.post_send(&qp, &[copy(3, &dest, &src, len)]), EINVAL)?;
    }
    no_cqe(b, &cq)?;
    let plain = QpInitAttr::rc(pd, cq.handle, CAP, None);
    let qp = expect_ok("an RC QP without MEMCPY", b.create_qp(&plain))?;
    connect(b, &qp, ctx, &qp)?;
    let r = b.post_send(&qp, &[copy(4, &dest, &src, LEN as u64)]);
    expect_errno("mlx5dv_wr_memcpy on a QP without the MEMCPY op", r, EOPNOTSUPP)?;
    no_cqe(b, &cq)
}
