//! `ibv_rereg_mr` of ODP MRs (items 332–334): PD and rights changed in place with the keys
//! kept, a new translation made a new ODP MR with new keys, and the driver's refusals (EACCES,
//! EOPNOTSUPP) and its implicit-ODP rule.

use mlx5_dv::errno::{EACCES, EBUSY, EOPNOTSUPP};
use mlx5_dv::{AccessFlags as A, Backend, DvQpCreateFlags, Mr, PdHandle, ReregFlags as F, wc_opcode, wc_status};

use super::fixture::*;
use super::odp::{odp_region, rc_odp};
use crate::case::{Case, Check, Env, Need, check, check_eq, expect_errno, expect_ok};

const DEV: &[Need] = &[Need::Mlx5Device];

pub(super) const CASES: &[Case] = &[
    Case { name: "rereg.odp_pd_and_access_in_place_keep_the_keys", covers: &[332], needs: DEV, run: in_place },
    Case { name: "rereg.odp_translation_is_a_new_mr_with_new_keys", covers: &[333], needs: DEV, run: translation },
    Case { name: "rereg.odp_eacces_eopnotsupp_and_implicit", covers: &[334], needs: DEV, run: refusals },
];

fn rereg(b: &mut dyn Backend, mr: &Mr, flags: F, pd: Option<PdHandle>, range: (u64, u64), access: A) -> Check<Mr> {
    let what = format!("ibv_rereg_mr of an ODP MR ({flags:?}, {access:?})");
    expect_ok(&what, b.rereg_mr(mr, flags.bits(), pd, range.0, range.1, access))
}

fn keys(mr: &Mr) -> (u32, u32, u64, u64) {
    (mr.lkey, mr.rkey, mr.addr, mr.length)
}

/// Rights without remote write, then with it: the same keys, and a WRITE through the rkey
/// is refused before and placed after; then a new PD, the keys again kept, the MR counted on
/// the new PD.
fn in_place(b: &mut dyn Backend, env: &Env) -> Check {
    rc_odp(env)?;
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (sbuf, smr) = odp_region(b, s.pd, 4096, &pattern(4096, 1), A::LOCAL_WRITE | A::REMOTE_READ)?;
    let (_abuf, amr) = region(b, a.pd, 256, &pattern(256, 2), A::LOCAL_WRITE)?;
    let rw = A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ | A::ON_DEMAND;
    let mr = rereg(b, &smr, F::CHANGE_ACCESS, None, (0, 0), rw)?;
    check_eq("(lkey, rkey, addr, length) after CHANGE_ACCESS", keys(&mr), keys(&smr))?;
    expect_ok(
        "RDMA WRITE into the ODP MR",
        b.post_send(&a.qp, &[write(1, mr.rkey, mr.addr + 64, vec![sge(&amr, 0, 100)])]),
    )?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    let mut want = pattern(4096, 1);
    want[64..164].copy_from_slice(&pattern(256, 2)[..100]);
    check_eq("the ODP MR's bytes after the WRITE", contents(b, &sbuf)?, want)?;
    let pd2 = expect_ok("ibv_alloc_pd", b.alloc_pd(s.ctx))?;
    let moved = rereg(b, &mr, F::CHANGE_PD, Some(pd2), (0, 0), A::empty())?;
    check_eq("(lkey, rkey, addr, length) after CHANGE_PD", keys(&moved), keys(&smr))?;
    expect_errno("ibv_dealloc_pd of the MR's new PD", b.dealloc_pd(pd2), EBUSY)?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&moved))?;
    expect_ok("ibv_dealloc_pd of the new PD once the MR is gone", b.dealloc_pd(pd2))
}

/// A new range: new keys, the range reached through the new rkey (its pages not pinned: the
/// buffer is only filled after the rereg), the old rkey refused.
fn translation(b: &mut dyn Backend, env: &Env) -> Check {
    rc_odp(env)?;
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let rw = A::LOCAL_WRITE | A::REMOTE_WRITE;
    let (sbuf, smr) = odp_region(b, s.pd, 8192, &pattern(8192, 3), rw)?;
    let (_abuf, amr) = region(b, a.pd, 256, &pattern(256, 4), A::LOCAL_WRITE)?;
    let half = (smr.addr + 4096, 4096);
    let mr = rereg(b, &smr, F::CHANGE_TRANSLATION, None, half, A::empty())?;
    check_eq("(addr, length) after CHANGE_TRANSLATION", (mr.addr, mr.length), half)?;
    check(
        "new keys for the new translation",
        mr.lkey != smr.lkey && mr.rkey != smr.rkey && mr.lkey == mr.rkey,
        "keys other than the old ones, lkey = rkey",
        (smr.lkey, smr.rkey, mr.lkey, mr.rkey),
    )?;
    expect_ok(
        "RDMA WRITE through the new rkey",
        b.post_send(&a.qp, &[write(1, mr.rkey, half.0 + 8, vec![sge(&amr, 0, 64)])]),
    )?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    let mut want = pattern(8192, 3);
    want[4104..4168].copy_from_slice(&pattern(256, 4)[..64]);
    check_eq("the buffer after the WRITE", contents(b, &sbuf)?, want.clone())?;
    expect_ok(
        "RDMA WRITE through the old rkey",
        b.post_send(&a.qp, &[write(2, smr.rkey, smr.addr, vec![sge(&amr, 0, 64)])]),
    )?;
    err_cqe(b, &a.cq, 2, wc_status::REM_ACCESS_ERR)?;
    check_eq("the buffer untouched by the old rkey", contents(b, &sbuf)?, want)?;
    expect_ok("ibv_dereg_mr of the new MR", b.dereg_mr(&mr))
}

/// ib_umem_check_rereg's EACCES first, then the driver's EOPNOTSUPP for rights no UMR
/// changes; an implicit MR keeps ON_DEMAND (EOPNOTSUPP) and is otherwise made anew.
fn refusals(b: &mut dyn Backend, env: &Env) -> Check {
    let caps = rc_odp(env)?;
    let (ctx, pd, _cq) = open(b, env.dev()?)?;
    let (_buf, ro) = odp_region(b, pd, 4096, &[], A::REMOTE_READ)?;
    let r = b.rereg_mr(&ro, F::CHANGE_ACCESS.bits(), None, 0, 0, A::LOCAL_WRITE | A::ON_DEMAND);
    expect_errno("write rights on an ODP MR registered without them", r, EACCES)?;
    // With a new translation the pages are taken anew: no EACCES.
    let r = b.rereg_mr(
        &ro,
        (F::CHANGE_ACCESS | F::CHANGE_TRANSLATION).bits(),
        None,
        ro.addr,
        4096,
        A::LOCAL_WRITE | A::ON_DEMAND,
    );
    let ro = expect_ok("write rights with a new translation", r)?;
    let r = b.rereg_mr(&ro, F::CHANGE_ACCESS.bits(), None, 0, 0, A::LOCAL_WRITE);
    expect_errno("dropping ON_DEMAND in place", r, EOPNOTSUPP)?;
    let r = b.rereg_mr(&ro, F::CHANGE_ACCESS.bits(), None, 0, 0, A::LOCAL_WRITE | A::MW_BIND | A::ON_DEMAND);
    expect_errno("adding MW_BIND in place", r, EOPNOTSUPP)?;
    let same = rereg(b, &ro, F::CHANGE_ACCESS, None, (0, 0), A::REMOTE_READ | A::ON_DEMAND)?;
    check_eq("the MR after the refusals: its keys", keys(&same), keys(&ro))?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&same))?;
    // The EACCES rule is every MR's: a pinned one too.
    let (pbuf, pinned) = region(b, pd, 4096, &[], A::REMOTE_READ)?;
    let r = b.rereg_mr(&pinned, F::CHANGE_ACCESS.bits(), None, 0, 0, A::LOCAL_WRITE);
    expect_errno("write rights on a pinned MR registered without them", r, EACCES)?;
    let both = (F::CHANGE_ACCESS | F::CHANGE_TRANSLATION).bits();
    let pinned =
        expect_ok("the same with a new translation", b.rereg_mr(&pinned, both, None, pbuf.addr, 4096, A::LOCAL_WRITE))?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&pinned))?;
    if !caps.implicit() {
        return Ok(());
    }
    let imr = expect_ok("implicit ODP MR", b.reg_mr(pd, 0, u64::MAX, A::REMOTE_READ | A::ON_DEMAND))?;
    let r = b.rereg_mr(&imr, F::CHANGE_ACCESS.bits(), None, 0, 0, A::LOCAL_WRITE);
    expect_errno("write rights on an implicit MR without them (before its own rule)", r, EACCES)?;
    let r = b.rereg_mr(&imr, F::CHANGE_ACCESS.bits(), None, 0, 0, A::REMOTE_READ);
    expect_errno("an implicit MR without ON_DEMAND", r, EOPNOTSUPP)?;
    let pd2 = expect_ok("ibv_alloc_pd", b.alloc_pd(ctx))?;
    let moved = rereg(b, &imr, F::CHANGE_PD, Some(pd2), (0, 0), A::empty())?;
    check_eq("the implicit MR's (addr, length)", (moved.addr, moved.length), (0, u64::MAX))?;
    check("a new implicit MR: new keys", moved.lkey != imr.lkey, "another lkey", (imr.lkey, moved.lkey))?;
    expect_ok("ibv_dealloc_pd of the old PD", b.dealloc_pd(pd))?;
    expect_errno("ibv_dealloc_pd of the new PD", b.dealloc_pd(pd2), EBUSY)?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&moved))
}
