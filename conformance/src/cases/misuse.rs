//! Misuse that is undefined behaviour in C gets a clear error from every backend: EINVAL for
//! a stale handle, EBUSY for a PD that still has mkeys.

use mlx5_dv::errno::{EBUSY, EINVAL};
use mlx5_dv::{Backend, MkeyInitAttr, MkeyInitFlags as F};

use super::open_pd;
use crate::case::{Case, Check, Env, Need, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case { name: "misuse.destroy_mkey_twice", covers: &[], needs: &[Need::Mlx5Device, Need::Devx], run: destroy_twice },
    Case {
        name: "misuse.dealloc_pd_with_live_mkey",
        covers: &[],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: pd_with_mkey,
    },
    Case {
        name: "misuse.handles_after_close_device",
        covers: &[],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: after_close,
    },
];

fn destroy_twice(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    let m = expect_ok("create", b.create_mkey(&MkeyInitAttr { pd, create_flags: F::INDIRECT, max_entries: 4 }))?;
    expect_ok("first destroy", b.destroy_mkey(&m))?;
    expect_errno("second destroy", b.destroy_mkey(&m), EINVAL)?;
    expect_errno("mkey_check after destroy", b.mkey_check(&m), EINVAL)
}

fn pd_with_mkey(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    let m = expect_ok("create", b.create_mkey(&MkeyInitAttr { pd, create_flags: F::INDIRECT, max_entries: 4 }))?;
    expect_errno("dealloc_pd with a live mkey", b.dealloc_pd(pd), EBUSY)?;
    expect_ok("destroy", b.destroy_mkey(&m))?;
    expect_ok("dealloc_pd", b.dealloc_pd(pd))?;
    expect_errno("dealloc_pd twice", b.dealloc_pd(pd), EINVAL)
}

fn after_close(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd) = open_pd(b, env)?;
    let m = expect_ok("create", b.create_mkey(&MkeyInitAttr { pd, create_flags: F::INDIRECT, max_entries: 4 }))?;
    expect_ok("close with live objects", b.close_device(ctx))?;
    expect_errno("destroy_mkey after close", b.destroy_mkey(&m), EINVAL)?;
    expect_errno("alloc_pd on a closed context", b.alloc_pd(ctx), EINVAL)?;
    expect_errno(
        "create_mkey on a PD of a closed context",
        b.create_mkey(&MkeyInitAttr { pd, create_flags: F::INDIRECT, max_entries: 4 }),
        EINVAL,
    )?;
    expect_errno("close twice", b.close_device(ctx), EINVAL)
}
