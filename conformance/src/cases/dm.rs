//! Device memory (MEMIC): `ibv_alloc_dm`'s limits, `ibv_memcpy_to_dm` / `ibv_memcpy_from_dm`,
//! `ibv_reg_dm_mr`'s checks, RDMA traffic through a DM MR, and `ibv_free_dm` while in use.

use mlx5_dv::errno::{EBUSY, EFAULT, EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{AccessFlags as A, Backend, ContextHandle, Dm, DvQpCreateFlags, SendFlags, WrOp, wc_opcode};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case { name: "dm.alloc_limits_and_rounding", covers: &[161], needs: &[Need::Mlx5Device], run: alloc_limits },
    Case { name: "dm.memcpy_bounds_efault_alignment_einval", covers: &[162], needs: &[Need::Mlx5Device], run: memcpy },
    Case { name: "dm.reg_dm_mr_checks_are_einval", covers: &[163], needs: &[Need::Mlx5Device], run: reg_checks },
    Case { name: "dm.write_read_send_through_a_dm_mr", covers: &[164], needs: &[Need::Mlx5Device], run: traffic },
    Case { name: "dm.free_dm_is_ebusy_under_an_mr", covers: &[165], needs: &[Need::Mlx5Device], run: free_busy },
];

/// The device's `max_dm_size`, or a skip where the backend has no device memory.
fn max_dm_size(env: &Env) -> Check<u64> {
    match env.caps.device.max_dm_size {
        Some(0) => Err(Verdict::skip("the device has no device memory (max_dm_size 0)")),
        Some(m) => Ok(m),
        None => Err(Verdict::skip("the backend does not report max_dm_size")),
    }
}

fn alloc(b: &mut dyn Backend, ctx: ContextHandle, length: u64) -> Check<Dm> {
    match b.alloc_dm(ctx, length, 0) {
        Err(e) if e.errno() == EOPNOTSUPP => Err(Verdict::skip("ibv_alloc_dm: EOPNOTSUPP on this backend")),
        r => expect_ok(&format!("ibv_alloc_dm({length})"), r),
    }
}

/// Past `max_dm_size` is libmlx5's EINVAL; nothing, or an alignment past the device's, the
/// kernel's EINVAL; DMs of `max_dm_size` until MEMIC is full, and then even 4 bytes are
/// ENOMEM; after the frees, small DMs are distinct memory.
fn alloc_limits(b: &mut dyn Backend, env: &Env) -> Check {
    let max = max_dm_size(env)?;
    let (ctx, _pd, _cq) = open(b, env.dev()?)?;
    expect_errno("ibv_alloc_dm past max_dm_size", b.alloc_dm(ctx, max + 1, 0), EINVAL)?;
    expect_errno("ibv_alloc_dm of 0 bytes", b.alloc_dm(ctx, 0, 0), EINVAL)?;
    expect_errno("ibv_alloc_dm aligned to 2^63", b.alloc_dm(ctx, 64, 63), EINVAL)?;
    // MEMIC may hold more than one largest DM (its BAR against max_dm_size): fill it.
    let mut all = vec![alloc(b, ctx, max)?];
    check_eq("the DM's length", all[0].length, max)?;
    let full = loop {
        match b.alloc_dm(ctx, max, 0) {
            Ok(dm) if all.len() < 64 => all.push(dm),
            Ok(_) => return Err(Verdict::fail("ENOMEM within 64 DMs of max_dm_size", "ENOMEM", "more")),
            Err(e) => break e,
        }
    };
    check_eq("errno of ibv_alloc_dm with MEMIC full", full.errno(), ENOMEM)?;
    expect_errno("ibv_alloc_dm of 4 bytes with MEMIC full", b.alloc_dm(ctx, 4, 0), ENOMEM)?;
    for dm in &all {
        expect_ok("ibv_free_dm", b.free_dm(dm))?;
    }
    // The freed room comes back, and two 4-byte DMs are distinct memory.
    let a = alloc(b, ctx, 4)?;
    let c = alloc(b, ctx, 4)?;
    expect_ok("ibv_memcpy_to_dm (first)", b.memcpy_to_dm(&a, 0, &[1, 2, 3, 4]))?;
    expect_ok("ibv_memcpy_to_dm (second)", b.memcpy_to_dm(&c, 0, &[5, 6, 7, 8]))?;
    check_eq("the first DM's bytes", expect_ok("ibv_memcpy_from_dm", b.memcpy_from_dm(&a, 0, 4))?, vec![1, 2, 3, 4])?;
    expect_ok("ibv_free_dm", b.free_dm(&a))?;
    expect_ok("ibv_free_dm", b.free_dm(&c))?;
    expect_errno("ibv_free_dm twice", b.free_dm(&c), EINVAL)
}

/// EFAULT past the DM's length (checked first), EINVAL for an offset or a length that is no
/// multiple of 4; bytes written come back.
fn memcpy(b: &mut dyn Backend, env: &Env) -> Check {
    max_dm_size(env)?;
    let (ctx, _pd, _cq) = open(b, env.dev()?)?;
    let dm = alloc(b, ctx, 256)?;
    let data = pattern(64, 3);
    expect_ok("ibv_memcpy_to_dm", b.memcpy_to_dm(&dm, 64, &data))?;
    check_eq("the bytes read back", expect_ok("ibv_memcpy_from_dm", b.memcpy_from_dm(&dm, 64, 64))?, data.clone())?;
    expect_errno("ibv_memcpy_to_dm past the end", b.memcpy_to_dm(&dm, 200, &data), EFAULT)?;
    expect_errno("ibv_memcpy_to_dm unaligned past the end", b.memcpy_to_dm(&dm, 255, &data[..3]), EFAULT)?;
    expect_errno("ibv_memcpy_from_dm past the end", b.memcpy_from_dm(&dm, 256, 4), EFAULT)?;
    expect_errno("ibv_memcpy_to_dm at offset 2", b.memcpy_to_dm(&dm, 2, &data[..8]), EINVAL)?;
    expect_errno("ibv_memcpy_to_dm of 6 bytes", b.memcpy_to_dm(&dm, 0, &data[..6]), EINVAL)?;
    expect_errno("ibv_memcpy_from_dm at offset 1", b.memcpy_from_dm(&dm, 1, 4), EINVAL)?;
    expect_ok("ibv_free_dm", b.free_dm(&dm))
}

/// Each refusal of `ibv_reg_dm_mr` is EINVAL: no ZERO_BASED, an access bit DM MRs do not
/// take, remote write without local write, a range past the DM. A good one has `addr` 0.
fn reg_checks(b: &mut dyn Backend, env: &Env) -> Check {
    max_dm_size(env)?;
    let (ctx, pd, _cq) = open(b, env.dev()?)?;
    let dm = alloc(b, ctx, 4096)?;
    let z = A::ZERO_BASED | A::LOCAL_WRITE;
    let bad: [(&str, u64, u64, A); 6] = [
        ("without ZERO_BASED", 0, 64, A::LOCAL_WRITE),
        ("with MW_BIND", 0, 64, z | A::MW_BIND),
        ("with ON_DEMAND", 0, 64, z | A::ON_DEMAND),
        ("REMOTE_WRITE without LOCAL_WRITE", 0, 64, A::ZERO_BASED | A::REMOTE_WRITE),
        ("past the DM", 4096 - 32, 64, z),
        ("at an offset past the DM", 4097, 0, z),
    ];
    for (what, off, len, access) in bad {
        expect_errno(&format!("ibv_reg_dm_mr {what}"), b.reg_dm_mr(pd, &dm, off, len, access), EINVAL)?;
    }
    let mr = expect_ok("ibv_reg_dm_mr", b.reg_dm_mr(pd, &dm, 64, 128, z | A::REMOTE_READ))?;
    check_eq("(addr, length) of a DM MR", (mr.addr, mr.length), (0, 128))?;
    let rereg = b.rereg_mr(&mr, mlx5_dv::ReregFlags::CHANGE_ACCESS.bits(), None, 0, 0, A::LOCAL_WRITE);
    expect_errno("ibv_rereg_mr of a DM MR", rereg, EINVAL)?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&mr))?;
    expect_ok("ibv_free_dm", b.free_dm(&dm))
}

/// A loopback pair: the server's DM MR (from offset 64 of the DM) takes a WRITE at its
/// zero-based addresses, answers a READ, and receives a SEND into a receive SGE of its lkey;
/// the DM's bytes are checked with `ibv_memcpy_from_dm` each time.
fn traffic(b: &mut dyn Backend, env: &Env) -> Check {
    max_dm_size(env)?;
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let dm = alloc(b, s.ctx, 512)?;
    expect_ok("ibv_memcpy_to_dm (zeros)", b.memcpy_to_dm(&dm, 0, &[0; 512]))?;
    let rights = A::ZERO_BASED | A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ;
    let dmr = expect_ok("ibv_reg_dm_mr", b.reg_dm_mr(s.pd, &dm, 64, 256, rights))?;
    let (abuf, amr) = region(b, a.pd, 256, &pattern(256, 7), A::LOCAL_WRITE)?;
    // WRITE 32 bytes at the MR's address 16: DM bytes 80..112.
    expect_ok("RDMA WRITE to the DM MR", b.post_send(&a.qp, &[write(1, dmr.rkey, 16, vec![sge(&amr, 0, 32)])]))?;
    ok_cqe(b, &a.cq, 1, wc_opcode::RDMA_WRITE)?;
    let got = expect_ok("ibv_memcpy_from_dm", b.memcpy_from_dm(&dm, 80, 32))?;
    check_eq("the DM's bytes after the WRITE", got, pattern(256, 7)[..32].to_vec())?;
    // READ them back into the client's buffer at 128.
    let read = WrOp::RdmaRead {
        wr_id: 2,
        flags: SendFlags::SIGNALED,
        rkey: dmr.rkey,
        remote_addr: 16,
        sge: vec![sge(&amr, 128, 32)],
    };
    expect_ok("RDMA READ from the DM MR", b.post_send(&a.qp, &[read]))?;
    ok_cqe(b, &a.cq, 2, wc_opcode::RDMA_READ)?;
    let mut want = pattern(256, 7);
    let first: Vec<u8> = want[..32].to_vec();
    want[128..160].copy_from_slice(&first);
    check_eq("the client's bytes after the READ", contents(b, &abuf)?, want)?;
    // SEND 48 bytes (past what a 64-byte CQE holds, so no scatter to CQE) into a receive at
    // the DM MR's address 128: DM bytes 192..240.
    recv(b, &s.qp, 3, vec![mlx5_dv::Sge { addr: 128, length: 64, lkey: dmr.lkey }])?;
    let send = WrOp::Send { wr_id: 4, flags: SendFlags::SIGNALED, sge: vec![sge(&amr, 32, 48)] };
    expect_ok("SEND", b.post_send(&a.qp, &[send]))?;
    ok_cqe(b, &a.cq, 4, wc_opcode::SEND)?;
    ok_cqe(b, &s.cq, 3, wc_opcode::RECV)?;
    let got = expect_ok("ibv_memcpy_from_dm", b.memcpy_from_dm(&dm, 192, 48))?;
    check_eq("the DM's bytes after the SEND", got, pattern(256, 7)[32..80].to_vec())?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&dmr))?;
    expect_ok("ibv_free_dm", b.free_dm(&dm))
}

/// `ibv_free_dm` is EBUSY while an MR is registered over the DM, and the DM still works; after
/// `ibv_dereg_mr` it is freed.
fn free_busy(b: &mut dyn Backend, env: &Env) -> Check {
    max_dm_size(env)?;
    let (ctx, pd, _cq) = open(b, env.dev()?)?;
    let dm = alloc(b, ctx, 128)?;
    let mr = expect_ok("ibv_reg_dm_mr", b.reg_dm_mr(pd, &dm, 0, 128, A::ZERO_BASED | A::LOCAL_WRITE))?;
    expect_errno("ibv_free_dm under an MR", b.free_dm(&dm), EBUSY)?;
    expect_ok("ibv_memcpy_to_dm after the refusal", b.memcpy_to_dm(&dm, 0, &[9; 8]))?;
    expect_ok("ibv_dereg_mr", b.dereg_mr(&mr))?;
    expect_ok("ibv_free_dm", b.free_dm(&dm))
}
