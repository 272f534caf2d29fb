//! mlx5dv flow matchers (items 249, 250, 292–299): the checks of
//! `mlx5dv_create_flow_matcher` and `mlx5dv_create_flow`, and rules of an `fte_match_param`
//! mask steering raw frames to a QP, dropping them, or counting them on a DEVX flow counter.

use mlx5_dv::errno::{EBUSY, EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, flow_counter as fc};
use mlx5_dv::{Backend, ContextHandle, FlowMatcher, FlowMatcherAttr, MatcherAction as A};

use super::devx::devx_ctx;
use super::fixture::{no_cqe, ok_cqe};
use super::raw::{RawSide, frame_bytes, post_frame_recv, raw_side, send_frame};
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device, Need::Devx];

pub(super) const CASES: &[Case] = &[
    Case { name: "matcher.create_checks_and_errno", covers: &[249, 250], needs: NEEDS, run: create_checks },
    Case { name: "matcher.smac_and_empty_matchers_steer_to_the_qp", covers: &[292, 293], needs: NEEDS, run: steer },
    Case { name: "matcher.flow_checks_and_errno", covers: &[294, 295, 298, 299], needs: NEEDS, run: flow_checks },
    Case { name: "matcher.drop_and_devx_counter_actions", covers: &[296, 297], needs: NEEDS, run: drop_count },
];

/// The source MAC of [`frame_bytes`]' frames.
const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// `match_criteria_enable`'s outer headers bit.
const OUTER: u8 = 1;

/// A NIC RX matcher attribute with `mask` under `criteria`.
fn mattr(criteria: u8, mask: Vec<u8>) -> FlowMatcherAttr {
    FlowMatcherAttr {
        attr_type: 0,
        flags: 0,
        priority: 0,
        match_criteria_enable: criteria,
        match_mask: mask,
        comp_mask: 0,
        ft_type: 0,
        ib_port: 0,
    }
}

/// The context and a matcher on the outer source MAC, or a skip when the backend has no
/// matchers (the hardware backend's EOPNOTSUPP).
fn smac_matcher(b: &mut dyn Backend, env: &Env) -> Check<(ContextHandle, FlowMatcher)> {
    let ctx = devx_ctx(b, env)?;
    match b.create_flow_matcher(ctx, &mattr(OUTER, vec![0xff; 6])) {
        Ok(m) => Ok((ctx, m)),
        Err(e) if e.errno() == EOPNOTSUPP => Err(Verdict::skip("the backend has no mlx5dv flow matchers (EOPNOTSUPP)")),
        Err(e) => Err(Verdict::fail("mlx5dv_create_flow_matcher", "a matcher", e)),
    }
}

fn create_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, m) = smac_matcher(b, env)?;
    let bad = |f: fn(&mut FlowMatcherAttr)| {
        let mut a = mattr(OUTER, vec![0xff; 6]);
        f(&mut a);
        a
    };
    expect_errno("comp_mask 0x4", b.create_flow_matcher(ctx, &bad(|a| a.comp_mask = 4)), EOPNOTSUPP)?;
    expect_errno("type ALL_DEFAULT", b.create_flow_matcher(ctx, &bad(|a| a.attr_type = 1)), EOPNOTSUPP)?;
    let transport = |a: &mut FlowMatcherAttr| {
        a.comp_mask = 1;
        a.ft_type = 6;
    };
    expect_errno("RDMA_TRANSPORT_RX without ib_port", b.create_flow_matcher(ctx, &bad(transport)), EINVAL)?;
    expect_errno("ib_port on NIC RX", b.create_flow_matcher(ctx, &bad(|a| a.comp_mask = 2)), EOPNOTSUPP)?;
    expect_errno("an empty mask", b.create_flow_matcher(ctx, &bad(|a| a.match_mask.clear())), EINVAL)?;
    let long = |a: &mut FlowMatcherAttr| a.match_mask = [vec![0; 0x200], vec![1]].concat();
    expect_errno("a mask set past fte_match_param", b.create_flow_matcher(ctx, &bad(long)), EOPNOTSUPP)?;
    expect_errno("flags 0x8", b.create_flow_matcher(ctx, &bad(|a| a.flags = 8)), EINVAL)?;
    let zeros = |a: &mut FlowMatcherAttr| a.match_mask = vec![0; 0x240];
    let z = expect_ok("zeros past fte_match_param", b.create_flow_matcher(ctx, &bad(zeros)))?;
    expect_ok("destroy", b.destroy_flow_matcher(&z))?;
    expect_ok("mlx5dv_destroy_flow_matcher", b.destroy_flow_matcher(&m))?;
    expect_errno("destroy again", b.destroy_flow_matcher(&m), EINVAL)
}

fn steer(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, m) = smac_matcher(b, env)?;
    let (tx, rx) = (raw_side(b, env)?, raw_side(b, env)?);
    let flow = expect_ok("mlx5dv_create_flow to the QP", b.create_matcher_flow(&m, &SRC_MAC, &[A::DestQp(rx.qp)]))?;
    post_frame_recv(b, &rx, 7)?;
    send_frame(b, &tx, &frame_bytes(3), 1)?;
    ok_cqe(b, &rx.cq, 7, mlx5_dv::wc_opcode::RECV)?;
    let mut other = frame_bytes(4);
    other[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x09]);
    post_frame_recv(b, &rx, 8)?;
    send_frame(b, &tx, &other, 2)?;
    no_cqe(b, &rx.cq)?;
    expect_ok("ibv_destroy_flow", b.destroy_flow(&flow))?;
    let empty = expect_ok("an empty matcher", b.create_flow_matcher(ctx, &mattr(0, vec![0; 0x180])))?;
    let all =
        expect_ok("a flow of the empty matcher", b.create_matcher_flow(&empty, &[0; 0x180], &[A::DestQp(rx.qp)]))?;
    send_frame(b, &tx, &other, 3)?;
    ok_cqe(b, &rx.cq, 8, mlx5_dv::wc_opcode::RECV)?;
    expect_ok("ibv_destroy_flow", b.destroy_flow(&all))?;
    expect_ok("destroy the empty matcher", b.destroy_flow_matcher(&empty))?;
    expect_ok("destroy the smac matcher", b.destroy_flow_matcher(&m))
}

fn flow_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, m) = smac_matcher(b, env)?;
    let rx: RawSide = raw_side(b, env)?;
    let q = A::DestQp(rx.qp);
    expect_errno("two destinations", b.create_matcher_flow(&m, &SRC_MAC, &[q, A::Drop]), EOPNOTSUPP)?;
    expect_errno("two tags", b.create_matcher_flow(&m, &SRC_MAC, &[q, A::Tag(1), A::Tag(2)]), EINVAL)?;
    expect_errno("an IBV counter action", b.create_matcher_flow(&m, &SRC_MAC, &[q, A::Other(2)]), EOPNOTSUPP)?;
    expect_errno("an empty value", b.create_matcher_flow(&m, &[], &[q]), EINVAL)?;
    expect_errno("a 25-bit tag", b.create_matcher_flow(&m, &SRC_MAC, &[q, A::Tag(1 << 24)]), EINVAL)?;
    let (pd, cq) = super::raw::setup(b, env)?;
    let rc = expect_ok("an RC QP", b.create_qp(&super::raw::attr(pd, &cq, mlx5_dv::qp_type::RC, 0, None)))?;
    expect_errno("a flow to an RC QP", b.create_matcher_flow(&m, &SRC_MAC, &[A::DestQp(rc)]), EINVAL)?;
    let mut outside = vec![0u8; 0x80];
    outside[0x40] = 0xff;
    let bad = expect_ok("a matcher masking misc under OUTER only", b.create_flow_matcher(ctx, &mattr(OUTER, outside)))?;
    expect_errno("its flow: mask outside the criteria", b.create_matcher_flow(&bad, &SRC_MAC, &[q]), EINVAL)?;
    expect_ok("destroy it", b.destroy_flow_matcher(&bad))?;
    let flow = expect_ok("a tagged flow", b.create_matcher_flow(&m, &SRC_MAC, &[q, A::Tag(0xff_ffff)]))?;
    expect_errno("destroy the matcher under a flow", b.destroy_flow_matcher(&m), EBUSY)?;
    expect_errno("ibv_destroy_qp under a flow", b.destroy_qp(&rx.qp), EBUSY)?;
    expect_ok("ibv_destroy_flow", b.destroy_flow(&flow))?;
    expect_errno("ibv_destroy_flow again", b.destroy_flow(&flow), EINVAL)?;
    expect_ok("destroy the matcher", b.destroy_flow_matcher(&m))
}

fn drop_count(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, m) = smac_matcher(b, env)?;
    let (tx, rx) = (raw_side(b, env)?, raw_side(b, env)?);
    let alloc = prm::new_input(fc::ALLOC_SIZE, fc::ALLOC, 0, 0);
    let Ok(counter) = b.devx_obj_create(ctx, &alloc, fc::ALLOC_SIZE) else {
        return Err(Verdict::skip("the device has no flow counters"));
    };
    let id = fc::ID.get(&counter.out).unwrap_or(0);
    let count = A::CountersDevx(counter.handle);
    let to_qp = expect_ok("a low-priority flow to the QP", {
        let low = expect_ok(
            "a priority-1 matcher",
            b.create_flow_matcher(ctx, &FlowMatcherAttr { priority: 1, ..mattr(OUTER, vec![0xff; 6]) }),
        )?;
        b.create_matcher_flow(&low, &SRC_MAC, &[A::DestQp(rx.qp)])
    })?;
    let dropper = expect_ok("a drop flow counting", b.create_matcher_flow(&m, &SRC_MAC, &[A::Drop, count]))?;
    post_frame_recv(b, &rx, 7)?;
    let f = frame_bytes(3);
    send_frame(b, &tx, &f, 1)?;
    send_frame(b, &tx, &f, 2)?;
    no_cqe(b, &rx.cq)?;
    let mut q = prm::new_input(fc::QUERY_IN_SIZE, fc::QUERY, 0, 0);
    let _ = fc::QUERY_ID.set(&mut q, id);
    let out = expect_ok("QUERY_FLOW_COUNTER", b.devx_obj_query(counter.handle, &q, fc::STATS_BYTE + fc::STATS_SIZE))?;
    let stats = &out[fc::STATS_BYTE..];
    check_eq("packets counted", fc::PACKETS.get(stats).unwrap_or(0), 2)?;
    check_eq("octets counted", fc::OCTETS.get(stats).unwrap_or(0), 2 * f.len() as u64)?;
    let not_counter = A::CountersDevx(pd_obj(b, ctx)?);
    expect_errno(
        "a counter action on a non-counter object",
        b.create_matcher_flow(&m, &SRC_MAC, &[A::Drop, not_counter]),
        EINVAL,
    )?;
    expect_ok("ibv_destroy_flow of the drop", b.destroy_flow(&dropper))?;
    send_frame(b, &tx, &f, 3)?;
    ok_cqe(b, &rx.cq, 7, mlx5_dv::wc_opcode::RECV)?;
    expect_ok("ibv_destroy_flow", b.destroy_flow(&to_qp))
}

/// A DEVX object that is not a flow counter (a PD).
fn pd_obj(b: &mut dyn Backend, ctx: ContextHandle) -> Check<mlx5_dv::DevxObjHandle> {
    let input = prm::new_input(0x10, mlx5_dv::prm::opcode::ALLOC_PD, 0, 0);
    Ok(expect_ok("ALLOC_PD", b.devx_obj_create(ctx, &input, 0x10))?.handle)
}
