//! Mkey configuration through UMR: §12.21–22 and §12.24–32.

use mlx5_dv::errno::{EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags as A, Backend, DvQpCreateFlags, Mkey, MkeyConfFlags, MkeyInitFlags as F, MrInterleaved, QpCap,
    SendFlags, Sge, WrOp, wc_opcode, wc_status,
};

use super::ctl;
use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

const N: &[Need] = &[Need::Mlx5Device, Need::Devx];

pub(super) const CASES: &[Case] = &[
    Case { name: "umr.configure_needs_inline", covers: &[21], needs: N, run: needs_inline },
    Case { name: "umr.configure_flag_checks", covers: &[22], needs: N, run: conf_flags },
    Case {
        name: "umr.tag_update_follows_kernel",
        covers: &[24],
        needs: &[Need::Mlx5Device, Need::Devx, Need::KnownUpdateTag],
        run: tag_update,
    },
    Case { name: "umr.reconfigure_overrides_a_valid_mkey", covers: &[25], needs: N, run: reconfigure },
    Case { name: "umr.setter_count_rules", covers: &[26], needs: N, run: setter_count },
    Case { name: "umr.setter_without_configure", covers: &[27], needs: N, run: setter_without_configure },
    Case { name: "umr.access_flag_rules", covers: &[28], needs: N, run: access_rules },
    Case { name: "umr.layout_entry_limits", covers: &[29], needs: N, run: layout_limits },
    Case { name: "umr.list_layout_is_zero_based", covers: &[30], needs: N, run: list_layout },
    Case { name: "umr.interleaved_layout_maps_repeat_then_entry", covers: &[30], needs: N, run: interleaved_layout },
    Case { name: "umr.interleaved_stride_truncated_to_16_bits", covers: &[30], needs: N, run: stride_truncation },
    Case { name: "umr.one_completion_only_when_signalled", covers: &[31], needs: N, run: completion },
    Case {
        name: "umr.next_wqe_carries_small_fence",
        covers: &[32],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SimControl],
        run: fence,
    },
];

fn inline() -> SendFlags {
    SendFlags::SIGNALED | SendFlags::INLINE
}

fn configure(wr_id: u64, mkey: Mkey, num_setters: u8) -> WrOp {
    WrOp::MkeyConfigure { wr_id, flags: inline(), mkey, num_setters, conf_flags: MkeyConfFlags::empty(), comp_mask: 0 }
}

/// Connected pair, a 256-byte region (LOCAL_WRITE only) on the server and an indirect mkey.
fn setup(
    b: &mut dyn Backend,
    env: &Env,
    flags: F,
    max_entries: u16,
) -> Check<(Side, Side, mlx5_dv::Buf, mlx5_dv::Mr, Mkey)> {
    let (a, s) = pair(b, env, false, DvQpCreateFlags::empty())?;
    let (buf, mr) = region(b, s.pd, 256, &pattern(256, 7), A::LOCAL_WRITE)?;
    let mkey = indirect_mkey(b, s.pd, flags, max_entries)?;
    Ok((a, s, buf, mr, mkey))
}

/// The client writes `data` to `rkey` at `addr`, and the write must succeed.
fn remote_write(b: &mut dyn Backend, a: &Side, rkey: u32, addr: u64, data: &[u8]) -> Check {
    let (_src, smr) = region(b, a.pd, data.len().max(1), data, A::LOCAL_WRITE)?;
    expect_ok("RDMA WRITE", b.post_send(&a.qp, &[write(0x77, rkey, addr, vec![sge(&smr, 0, data.len() as u32)])]))?;
    ok_cqe(b, &a.cq, 0x77, wc_opcode::RDMA_WRITE).map(drop)
}

/// The client writes to `rkey` at `addr`, and the write must fail with REM_ACCESS_ERR.
fn remote_write_fails(b: &mut dyn Backend, a: &Side, rkey: u32, addr: u64, len: u32) -> Check {
    let (_src, smr) = region(b, a.pd, len.max(1) as usize, &pattern(len as usize, 3), A::LOCAL_WRITE)?;
    expect_ok("RDMA WRITE", b.post_send(&a.qp, &[write(0x78, rkey, addr, vec![sge(&smr, 0, len)])]))?;
    err_cqe(b, &a.cq, 0x78, wc_status::REM_ACCESS_ERR).map(drop)
}

fn needs_inline(b: &mut dyn Backend, env: &Env) -> Check {
    let (_a, s, _buf, mr, mkey) = setup(b, env, F::INDIRECT, 4)?;
    let list = vec![sge(&mr, 0, 16)];
    let no_inline =
        WrOp::MrList { wr_id: 1, flags: SendFlags::SIGNALED, mkey, access: A::REMOTE_WRITE, sge: list.clone() };
    expect_errno("mlx5dv_wr_mr_list without IBV_SEND_INLINE", b.post_send(&s.qp, &[no_inline]), EOPNOTSUPP)?;
    let bare = WrOp::MkeyConfigure {
        wr_id: 2,
        flags: SendFlags::SIGNALED,
        mkey,
        num_setters: 0,
        conf_flags: MkeyConfFlags::empty(),
        comp_mask: 0,
    };
    expect_errno("mlx5dv_wr_mkey_configure without IBV_SEND_INLINE", b.post_send(&s.qp, &[bare]), EOPNOTSUPP)?;
    no_cqe(b, &s.cq)
}

fn conf_flags(b: &mut dyn Backend, env: &Env) -> Check {
    let (_a, s, _buf, _mr, mkey) = setup(b, env, F::INDIRECT, 4)?;
    for (conf_flags, comp_mask) in [(1u32 << 1, 0u64), (1 << 31, 0), (0, 1), (0, 1 << 40)] {
        let conf_flags = MkeyConfFlags::from_bits_retain(conf_flags);
        let op = WrOp::MkeyConfigure { wr_id: 1, flags: inline(), mkey, num_setters: 0, conf_flags, comp_mask };
        expect_errno(
            &format!("conf_flags 0x{conf_flags:x}, comp_mask 0x{comp_mask:x}"),
            b.post_send(&s.qp, &[op]),
            EOPNOTSUPP,
        )?;
    }
    let reset = WrOp::MkeyConfigure {
        wr_id: 9,
        flags: inline(),
        mkey,
        num_setters: 0,
        conf_flags: mlx5_dv::MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR,
        comp_mask: 0,
    };
    expect_ok("RESET_SIG_ATTR on a plain mkey", b.post_send(&s.qp, &[reset]))?;
    ok_cqe(b, &s.cq, 9, wc_opcode::DRIVER1).map(drop)
}

fn tag_update(b: &mut dyn Backend, env: &Env) -> Check {
    let supported =
        env.caps.kernel.mkey_update_tag.ok_or_else(|| Verdict::skip("unknown kernel tag-update support"))?;
    let flags = if supported { F::INDIRECT | F::UPDATE_TAG } else { F::INDIRECT };
    let (a, s, buf, mr, mut mkey) = setup(b, env, flags, 4)?;
    mkey.lkey = (mkey.lkey & !0xff) | 0x5a;
    mkey.rkey = mkey.lkey;
    let op = WrOp::MrList {
        wr_id: 1,
        flags: inline(),
        mkey,
        access: (A::REMOTE_WRITE | A::LOCAL_WRITE),
        sge: vec![sge(&mr, 0, 16)],
    };
    if !supported {
        return expect_errno("a new tag byte without kernel tag update", b.post_send(&s.qp, &[op]), EOPNOTSUPP);
    }
    expect_ok("configure with tag 0x5a", b.post_send(&s.qp, &[op]))?;
    ok_cqe(b, &s.cq, 1, wc_opcode::DRIVER1)?;
    let data = pattern(16, 0x40);
    remote_write(b, &a, mkey.rkey, 0, &data)?;
    check_eq("bytes written through the new tag", contents(b, &buf)?[..16].to_vec(), data)?;
    remote_write_fails(b, &a, mkey.rkey & !0xff, 0, 16)
}

fn reconfigure(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, buf, mr, mkey) = setup(b, env, F::INDIRECT, 4)?;
    configure_list(b, &s, &mkey, A::REMOTE_WRITE | A::LOCAL_WRITE, vec![sge(&mr, 0, 16)])?;
    configure_list(b, &s, &mkey, A::REMOTE_WRITE | A::LOCAL_WRITE, vec![sge(&mr, 64, 16)])?;
    let data = pattern(16, 0x11);
    remote_write(b, &a, mkey.rkey, 0, &data)?;
    let mut want = pattern(256, 7);
    want[64..80].copy_from_slice(&data);
    check_eq("the second layout wins; the first region is untouched", contents(b, &buf)?, want)
}

fn setter_count(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, buf, mr, mkey) = setup(b, env, F::INDIRECT, 4)?;
    // num_setters 0: finalized at once.
    expect_ok("configure with 0 setters", b.post_send(&s.qp, &[configure(1, mkey, 0)]))?;
    ok_cqe(b, &s.cq, 1, wc_opcode::DRIVER1)?;
    // Fewer setters than announced: wr_complete returns 0 and posts nothing of the UMR, but the
    // write before it goes out.
    let (_dst, dmr) = region(b, a.pd, 32, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let chain = [
        write(2, dmr.rkey, dmr.addr, vec![sge(&mr, 0, 8)]),
        configure(3, mkey, 2),
        WrOp::SetMkeyAccessFlags(A::REMOTE_WRITE),
    ];
    expect_ok("a configure with one of two setters", b.post_send(&s.qp, &chain))?;
    ok_cqe(b, &s.cq, 2, wc_opcode::RDMA_WRITE)?;
    no_cqe(b, &s.cq)?;
    // Extra setter after the WQE was finalized.
    let extra = [
        WrOp::MrList { wr_id: 4, flags: inline(), mkey, access: A::REMOTE_WRITE, sge: vec![sge(&mr, 0, 16)] },
        WrOp::SetMkeyAccessFlags(A::REMOTE_READ),
    ];
    expect_errno("a setter after the announced ones", b.post_send(&s.qp, &extra), EINVAL)?;
    no_cqe(b, &s.cq)?;
    check_eq("nothing reached the region", contents(b, &buf)?, pattern(256, 7))
}

fn setter_without_configure(b: &mut dyn Backend, env: &Env) -> Check {
    let (_a, s, _buf, mr, _mkey) = setup(b, env, F::INDIRECT, 4)?;
    let setters = [
        WrOp::SetMkeyAccessFlags(A::REMOTE_WRITE),
        WrOp::SetMkeyLayoutList(vec![sge(&mr, 0, 8)]),
        WrOp::SetMkeyLayoutInterleaved {
            repeat_count: 1,
            entries: vec![MrInterleaved { addr: mr.addr, bytes_count: 8, bytes_skip: 0, lkey: mr.lkey }],
        },
    ];
    for st in setters {
        expect_errno(&format!("{st:?} with no open configure"), b.post_send(&s.qp, &[st]), EINVAL)?;
    }
    no_cqe(b, &s.cq)
}

fn access_rules(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, buf, mr, mkey) = setup(b, env, F::INDIRECT, 4)?;
    let list = vec![sge(&mr, 0, 16)];
    for bad in [A::ZERO_BASED, A::MW_BIND, A::ON_DEMAND, A::RELAXED_ORDERING] {
        let op = WrOp::MrList { wr_id: 1, flags: inline(), mkey, access: bad, sge: list.clone() };
        expect_errno(&format!("access {bad:?}"), b.post_send(&s.qp, &[op]), EINVAL)?;
    }
    let twice =
        [configure(1, mkey, 3), WrOp::SetMkeyAccessFlags(A::REMOTE_WRITE), WrOp::SetMkeyAccessFlags(A::REMOTE_READ)];
    expect_errno("the access setter twice", b.post_send(&s.qp, &twice), EINVAL)?;
    // Remote write granted by the mkey although the MR under it is local-write only.
    configure_list(b, &s, &mkey, A::REMOTE_WRITE | A::LOCAL_WRITE, list.clone())?;
    // A configure without the access setter keeps the flags.
    let relayout = [configure(2, mkey, 1), WrOp::SetMkeyLayoutList(vec![sge(&mr, 32, 16)])];
    expect_ok("configure with the layout only", b.post_send(&s.qp, &relayout))?;
    ok_cqe(b, &s.cq, 2, wc_opcode::DRIVER1)?;
    let data = pattern(16, 0x21);
    remote_write(b, &a, mkey.rkey, 0, &data)?;
    let mut want = pattern(256, 7);
    want[32..48].copy_from_slice(&data);
    check_eq("write with the kept REMOTE_WRITE", contents(b, &buf)?, want)?;
    // Local read is always kept: the server sends from the mkey with access 0.
    configure_list(b, &s, &mkey, A::empty(), list)?;
    let (rbuf, rmr) = region(b, a.pd, 16, &[], A::LOCAL_WRITE)?;
    recv(b, &a.qp, 5, vec![sge(&rmr, 0, 16)])?;
    expect_ok(
        "SEND from the mkey",
        b.post_send(
            &s.qp,
            &[WrOp::Send {
                wr_id: 6,
                flags: SendFlags::SIGNALED,
                sge: vec![Sge { addr: 0, length: 16, lkey: mkey.lkey }],
            }],
        ),
    )?;
    ok_cqe(b, &s.cq, 6, wc_opcode::SEND)?;
    ok_cqe(b, &a.cq, 5, wc_opcode::RECV)?;
    check_eq("received through a local-read-only mkey", contents(b, &rbuf)?, pattern(256, 7)[..16].to_vec())?;
    // The new flags replace the old: REMOTE_WRITE is gone.
    remote_write_fails(b, &a, mkey.rkey, 0, 16)
}

fn layout_limits(b: &mut dyn Backend, env: &Env) -> Check {
    let (_a, s, _buf, mr, mkey) = setup(b, env, F::INDIRECT, 8)?;
    let sges = |n: u64| (0..n).map(|i| sge(&mr, i * 8, 8)).collect::<Vec<_>>();
    let inter = |n: u64| {
        (0..n)
            .map(|i| MrInterleaved { addr: mr.addr + i * 8, bytes_count: 8, bytes_skip: 0, lkey: mr.lkey })
            .collect::<Vec<_>>()
    };
    // The default QP has max_inline_data 60: 4 list entries, 3 interleaved.
    let list = |n| WrOp::MrList { wr_id: 1, flags: inline(), mkey, access: A::empty(), sge: sges(n) };
    let ilv = |n| WrOp::MrInterleaved {
        wr_id: 1,
        flags: inline(),
        mkey,
        access: A::empty(),
        repeat_count: 1,
        entries: inter(n),
    };
    expect_errno("5 list entries with max_inline_data 60", b.post_send(&s.qp, &[list(5)]), ENOMEM)?;
    expect_errno("4 interleaved entries with max_inline_data 60", b.post_send(&s.qp, &[ilv(4)]), ENOMEM)?;
    expect_ok("4 list entries", b.post_send(&s.qp, &[list(4)]))?;
    expect_ok("3 interleaved entries", b.post_send(&s.qp, &[ilv(3)]))?;
    poll(b, &s.cq, 2)?;
    let twice = [configure(2, mkey, 2), WrOp::SetMkeyLayoutList(sges(1)), WrOp::SetMkeyLayoutList(sges(1))];
    expect_errno("two layout setters", b.post_send(&s.qp, &twice), EINVAL)?;
    // A roomy QP: the mkey's own size (max_entries 1 rounds to 4) bounds the list.
    let cq = expect_ok("cq", b.create_cq(s.ctx, 16))?;
    let big = QpCap { max_inline_data: 512, ..CAP };
    let q = expect_ok("QP with 512 inline bytes", b.create_qp(&qp_attr(s.pd, &cq, DvQpCreateFlags::empty(), big)))?;
    connect(b, &q, s.ctx, &s.qp)?;
    let small = indirect_mkey(b, s.pd, F::INDIRECT, 1)?;
    let op = |n| WrOp::MrList { wr_id: 3, flags: inline(), mkey: small, access: A::empty(), sge: sges(n) };
    expect_errno("5 entries in a 4-entry mkey", b.post_send(&q, &[op(5)]), ENOMEM)?;
    expect_ok("4 entries in a 4-entry mkey", b.post_send(&q, &[op(4)]))?;
    // Interleaved is bounded by num_desc too, not num_desc - 1.
    let iop = WrOp::MrInterleaved {
        wr_id: 4,
        flags: inline(),
        mkey: small,
        access: A::empty(),
        repeat_count: 1,
        entries: inter(4),
    };
    expect_ok("4 interleaved entries in a 4-entry mkey", b.post_send(&q, &[iop]))?;
    poll(b, &cq, 2).map(drop)
}

fn list_layout(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, buf, mr, mkey) = setup(b, env, F::INDIRECT, 4)?;
    configure_list(
        b,
        &s,
        &mkey,
        A::REMOTE_WRITE | A::LOCAL_WRITE,
        vec![sge(&mr, 16, 8), sge(&mr, 100, 4), sge(&mr, 200, 12)],
    )?;
    let data = pattern(24, 0x31);
    remote_write(b, &a, mkey.rkey, 0, &data)?;
    let mut want = pattern(256, 7);
    want[16..24].copy_from_slice(&data[..8]);
    want[100..104].copy_from_slice(&data[8..12]);
    want[200..212].copy_from_slice(&data[12..]);
    check_eq("24 bytes through a 3-entry list, gaps untouched", contents(b, &buf)?, want.clone())?;
    // A write at offset 6 of the mkey starts inside the first entry.
    let more = pattern(6, 0x51);
    remote_write(b, &a, mkey.rkey, 6, &more)?;
    want[22..24].copy_from_slice(&more[..2]);
    want[100..104].copy_from_slice(&more[2..]);
    check_eq("6 bytes at mkey offset 6", contents(b, &buf)?, want)?;
    // The mkey ends at 24 bytes.
    remote_write_fails(b, &a, mkey.rkey, 20, 8)
}

/// `mlx5dv_wr_mr_interleaved` granting remote and local write, and its completion.
fn interleave(
    b: &mut dyn Backend,
    s: &Side,
    mkey: Mkey,
    repeat_count: u32,
    entries: Vec<MrInterleaved>,
    what: &str,
) -> Check {
    let access = A::REMOTE_WRITE | A::LOCAL_WRITE;
    let op = WrOp::MrInterleaved { wr_id: 1, flags: inline(), mkey, access, repeat_count, entries };
    expect_ok(what, b.post_send(&s.qp, &[op]))?;
    ok_cqe(b, &s.cq, 1, wc_opcode::DRIVER1).map(drop)
}

fn interleaved_layout(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, buf, mr, mkey) = setup(b, env, F::INDIRECT, 4)?;
    let entries = vec![
        MrInterleaved { addr: mr.addr, bytes_count: 4, bytes_skip: 12, lkey: mr.lkey },
        MrInterleaved { addr: mr.addr + 128, bytes_count: 2, bytes_skip: 6, lkey: mr.lkey },
    ];
    interleave(b, &s, mkey, 3, entries, "mlx5dv_wr_mr_interleaved")?;
    let data = pattern(18, 0x61);
    remote_write(b, &a, mkey.rkey, 0, &data)?;
    let mut want = pattern(256, 7);
    for r in 0..3 {
        want[16 * r..16 * r + 4].copy_from_slice(&data[6 * r..6 * r + 4]);
        want[128 + 8 * r..130 + 8 * r].copy_from_slice(&data[6 * r + 4..6 * r + 6]);
    }
    check_eq("18 bytes in (repetition, entry) order, gaps untouched", contents(b, &buf)?, want)?;
    remote_write_fails(b, &a, mkey.rkey, 16, 4)
}

fn stride_truncation(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s, buf, mr, mkey) = setup(b, env, F::INDIRECT, 4)?;
    // bytes_count + bytes_skip = 0x10000: the 16-bit stride is 0, so every repetition maps
    // the same 4 bytes.
    let entries = vec![MrInterleaved { addr: mr.addr, bytes_count: 4, bytes_skip: 0xfffc, lkey: mr.lkey }];
    interleave(b, &s, mkey, 3, entries, "interleaved with a 0x10000 stride")?;
    let data = pattern(12, 0x71);
    remote_write(b, &a, mkey.rkey, 0, &data)?;
    let mut want = pattern(256, 7);
    want[..4].copy_from_slice(&data[8..]);
    check_eq("all repetitions land on the first 4 bytes", contents(b, &buf)?, want)
}

fn completion(b: &mut dyn Backend, env: &Env) -> Check {
    let (_a, s, _buf, mr, mkey) = setup(b, env, F::INDIRECT, 4)?;
    let list = vec![sge(&mr, 0, 16)];
    let unsignaled = WrOp::MrList { wr_id: 1, flags: SendFlags::INLINE, mkey, access: A::empty(), sge: list.clone() };
    let (_d, dmr) = region(b, s.pd, 16, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    expect_ok(
        "unsignalled configure, then a signalled write",
        b.post_send(&s.qp, &[unsignaled, write(2, dmr.rkey, dmr.addr, vec![sge(&mr, 0, 4)])]),
    )?;
    let wcs = poll(b, &s.cq, 1)?;
    check_eq("only the write completes", (wcs[0].wr_id, wcs[0].opcode), (2, wc_opcode::RDMA_WRITE))?;
    no_cqe(b, &s.cq)?;
    let signaled = WrOp::MrList { wr_id: 3, flags: inline(), mkey, access: A::empty(), sge: list };
    expect_ok("signalled configure", b.post_send(&s.qp, &[signaled]))?;
    let wc = ok_cqe(b, &s.cq, 3, wc_opcode::DRIVER1)?;
    check_eq("MLX5DV_WC_UMR is IBV_WC_DRIVER1 (135)", wc.opcode, 135)?;
    no_cqe(b, &s.cq)
}

fn fence(b: &mut dyn Backend, env: &Env) -> Check {
    let (_a, s, _buf, mr, mkey) = setup(b, env, F::INDIRECT, 4)?;
    let (_d, dmr) = region(b, s.pd, 16, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    ctl(b)?.record_wqes(true);
    let chain = [
        WrOp::MrList { wr_id: 1, flags: SendFlags::INLINE, mkey, access: A::empty(), sge: vec![sge(&mr, 0, 16)] },
        write(2, dmr.rkey, dmr.addr, vec![sge(&mr, 0, 4)]),
        write(3, dmr.rkey, dmr.addr, vec![sge(&mr, 4, 4)]),
    ];
    expect_ok("configure then two writes", b.post_send(&s.qp, &chain))?;
    let wqes = ctl(b)?.take_wqes();
    let seen: Vec<(u8, bool)> = wqes.iter().map(|w| (w.opcode, w.small_fence)).collect();
    check_eq("(opcode, small fence) of UMR, WRITE, WRITE", seen, vec![(0x25, false), (0x08, true), (0x08, false)])
}
