//! Inline data (§12.100): the payload travels in the WQE, copied when the chain is posted, so
//! the gather list's keys and addresses are never used; more than `max_inline_data` is ENOMEM.

use mlx5_dv::errno::ENOMEM;
use mlx5_dv::{AccessFlags as A, Backend, DvQpCreateFlags, QpCap, SendFlags, Sge, WrOp, wc_opcode};

use super::fixture::*;
use crate::case::{Case, Check, Env, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[Case {
    name: "wr.inline_data_is_copied_into_the_wqe",
    covers: &[100],
    needs: &[crate::case::Need::Mlx5Device],
    run: inline_data,
}];

/// A SEND gathering from an address and key that exist nowhere.
fn send_from_nowhere(wr_id: u64) -> WrOp {
    WrOp::Send { wr_id, flags: SendFlags::SIGNALED, sge: vec![Sge { addr: 0xdead_0000, length: 40, lkey: 0xbad }] }
}

fn inline_data(b: &mut dyn Backend, env: &Env) -> Check {
    let cap = QpCap { max_inline_data: 64, ..CAP };
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let qa =
        expect_ok("create a QP with 64 bytes inline", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), cap)))?;
    let cq2 = expect_ok("ibv_create_cq", b.create_cq(ctx, 64))?;
    let qb = expect_ok("create the peer", b.create_qp(&qp_attr(pd, &cq2, DvQpCreateFlags::empty(), cap)))?;
    connect(b, &qa, ctx, &qb)?;
    connect(b, &qb, ctx, &qa)?;
    let max = qa.cap.max_inline_data as usize;
    check_eq("max_inline_data is at least what was asked", max >= 64, true)?;
    let (sbuf, smr) = region(b, pd, 512, &pattern(512, 0), A::LOCAL_WRITE | A::REMOTE_WRITE)?;

    // SEND: the inline bytes replace a gather list no key covers.
    let bytes = pattern(40, 7);
    recv(b, &qb, 10, vec![sge(&smr, 0, 256)])?;
    expect_ok("SEND + inline data", b.post_send(&qa, &[send_from_nowhere(1), WrOp::InlineData(bytes.clone())]))?;
    ok_cqe(b, &cq, 1, wc_opcode::SEND)?;
    let rwc = ok_cqe(b, &cq2, 10, wc_opcode::RECV)?;
    check_eq("receive byte_len", rwc.byte_len, 40)?;
    let mut want = pattern(512, 0);
    want[..40].copy_from_slice(&bytes);
    check_eq("receiver buffer after the inline SEND", contents(b, &sbuf)?, want.clone())?;

    // WRITE of exactly max_inline_data bytes, in a WQE of more than one basic block.
    let bytes = pattern(max, 3);
    let wr = write(2, smr.rkey, smr.addr + 256, Vec::new());
    expect_ok("WRITE + max_inline_data bytes inline", b.post_send(&qa, &[wr, WrOp::InlineData(bytes.clone())]))?;
    ok_cqe(b, &cq, 2, wc_opcode::RDMA_WRITE)?;
    want[256..256 + max].copy_from_slice(&bytes);
    check_eq("target after the inline WRITE", contents(b, &sbuf)?, want.clone())?;

    // One byte more: ENOMEM, nothing posted.
    let wr = write(3, smr.rkey, smr.addr, Vec::new());
    expect_errno(
        "inline data past max_inline_data",
        b.post_send(&qa, &[wr, WrOp::InlineData(pattern(max + 1, 1))]),
        ENOMEM,
    )?;
    no_cqe(b, &cq)?;
    check_eq("target untouched", contents(b, &sbuf)?, want)?;

    // Zero bytes inline: an empty message.
    recv(b, &qb, 11, vec![sge(&smr, 0, 256)])?;
    expect_ok("SEND + zero bytes inline", b.post_send(&qa, &[send_from_nowhere(4), WrOp::InlineData(Vec::new())]))?;
    ok_cqe(b, &cq, 4, wc_opcode::SEND)?;
    check_eq("receive byte_len of the empty SEND", ok_cqe(b, &cq2, 11, wc_opcode::RECV)?.byte_len, 0)
}
