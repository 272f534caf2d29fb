//! `ibv_rereg_mr`: what each flag changes, that the keys survive, and the arguments refused.

use mlx5_dv::errno::EINVAL;
use mlx5_dv::{AccessFlags as A, Backend, DvQpCreateFlags, Mr, ReregFlags as F, wc_opcode, wc_status};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "rereg.access_and_translation_keep_the_keys",
        covers: &[151],
        needs: &[Need::Mlx5Device],
        run: access_and_translation,
    },
    Case { name: "rereg.bad_arguments_are_einval", covers: &[152], needs: &[Need::Mlx5Device], run: bad_arguments },
];

/// `ibv_rereg_mr` through the trait.
fn rereg(
    b: &mut dyn Backend,
    mr: &Mr,
    flags: F,
    pd: Option<mlx5_dv::PdHandle>,
    range: (u64, u64),
    access: A,
) -> Check<Mr> {
    let what = format!("ibv_rereg_mr({flags:?}, {access:?})");
    expect_ok(&what, b.rereg_mr(mr, flags.bits(), pd, range.0, range.1, access))
}

/// A server MR without remote write refuses a WRITE; after a rereg of its access the same
/// rkey takes it; after a rereg of its translation the same rkey writes the new range, and
/// the old range is no longer reachable.
fn access_and_translation(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (sbuf, smr) = region(b, s.pd, 256, &pattern(256, 1), A::LOCAL_WRITE)?;
    let (_abuf, amr) = region(b, a.pd, 64, &pattern(64, 2), A::LOCAL_WRITE)?;
    let rw = A::LOCAL_WRITE | A::REMOTE_WRITE;
    let mr = rereg(b, &smr, F::CHANGE_ACCESS, None, (0, 0), rw)?;
    check_eq(
        "(lkey, rkey, addr, length) after CHANGE_ACCESS",
        (mr.lkey, mr.rkey, mr.addr, mr.length),
        (smr.lkey, smr.rkey, smr.addr, smr.length),
    )?;
    expect_ok("RDMA WRITE", b.post_send(&a.qp, &[write(1, smr.rkey, smr.addr + 8, vec![sge(&amr, 0, 16)])]))?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    let mut want = pattern(256, 1);
    want[8..24].copy_from_slice(&pattern(64, 2)[..16]);
    check_eq("the server's bytes after the WRITE", contents(b, &sbuf)?, want.clone())?;
    // The second half of the buffer only, from here on.
    let half = (smr.addr + 128, 128);
    let moved = rereg(b, &mr, F::CHANGE_TRANSLATION, None, half, A::empty())?;
    check_eq(
        "(lkey, rkey, addr, length) after CHANGE_TRANSLATION",
        (moved.lkey, moved.rkey, moved.addr, moved.length),
        (smr.lkey, smr.rkey, half.0, half.1),
    )?;
    expect_ok(
        "RDMA WRITE into the new range",
        b.post_send(&a.qp, &[write(2, smr.rkey, half.0, vec![sge(&amr, 16, 16)])]),
    )?;
    ok_cqe(b, &a.cq, 2, wc_opcode::RDMA_WRITE)?;
    want[128..144].copy_from_slice(&pattern(64, 2)[16..32]);
    check_eq("the server's bytes after the second WRITE", contents(b, &sbuf)?, want.clone())?;
    expect_ok(
        "RDMA WRITE into the old range",
        b.post_send(&a.qp, &[write(3, smr.rkey, smr.addr, vec![sge(&amr, 0, 16)])]),
    )?;
    err_cqe(b, &a.cq, 3, wc_status::REM_ACCESS_ERR)?;
    check_eq("the old range is untouched", contents(b, &sbuf)?, want)?;
    expect_ok("ibv_dereg_mr after the rereg", b.dereg_mr(&moved))
}

/// libibverbs' and the kernel's refusals, each with EINVAL, and the MR unchanged after them.
fn bad_arguments(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, _cq) = open(b, env.dev()?)?;
    let (buf, mr) = region(b, pd, 4096, &[], A::LOCAL_WRITE)?;
    let bad: [(&str, u32, (u64, u64), A); 5] = [
        ("an unknown flag", 1 << 3, (0, 0), A::empty()),
        ("no flag", 0, (0, 0), A::empty()),
        ("CHANGE_TRANSLATION without a length", F::CHANGE_TRANSLATION.bits(), (buf.addr, 0), A::empty()),
        ("access bits without CHANGE_ACCESS", F::CHANGE_PD.bits(), (0, 0), A::LOCAL_WRITE),
        ("REMOTE_WRITE without LOCAL_WRITE", F::CHANGE_ACCESS.bits(), (0, 0), A::REMOTE_WRITE),
    ];
    for (what, flags, (addr, len), access) in bad {
        let pd = (flags & F::CHANGE_PD.bits() != 0).then_some(pd);
        expect_errno(&format!("ibv_rereg_mr with {what}"), b.rereg_mr(&mr, flags, pd, addr, len, access), EINVAL)?;
    }
    // A PD of another context.
    let (_ctx2, pd2, _cq2) = open(b, env.dev()?)?;
    let r = b.rereg_mr(&mr, F::CHANGE_PD.bits(), Some(pd2), 0, 0, A::empty());
    expect_errno("ibv_rereg_mr to a PD of another context", r, EINVAL)?;
    // A PD of the same context is taken, and the MR then holds that PD, not the old one.
    let pd3 = expect_ok("ibv_alloc_pd", b.alloc_pd(ctx))?;
    rereg(b, &mr, F::CHANGE_PD, Some(pd3), (0, 0), A::empty())?;
    expect_ok("ibv_dealloc_pd of the MR's old PD", b.dealloc_pd(pd))?;
    expect_errno("ibv_dealloc_pd of the MR's new PD", b.dealloc_pd(pd3), mlx5_dv::errno::EBUSY)?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&mr))
}
