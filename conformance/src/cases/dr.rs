//! Software steering, `mlx5dv_dr`, and packet reformat (items 306–315): the checks of domains, tables, matchers,
//! actions and rules, and raw frames steered through receive and transmit tables.

use mlx5_dv::errno::{EBUSY, EEXIST, EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, flow_counter as fc};
use mlx5_dv::{
    Backend, ContextHandle, DR_ACTION_FLAGS_ROOT_LEVEL, DrAction, DrActionAttr as A, DrDest, DrDomain, DrMatcher,
    DrObject, DrTable, dr_domain_type as ty, dr_layout_flags as lay,
};

use super::devx::devx_ctx;
use super::fixture::{contents, no_cqe, ok_cqe};
use super::raw::{FRAME_LEN, RawSide, frame_bytes, post_frame_recv, raw_side, send_frame};
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device, Need::Devx];

pub(super) const CASES: &[Case] = &[
    Case {
        name: "dr.root_tables_everywhere_software_tables_with_devx",
        covers: &[306],
        needs: &[Need::Mlx5Device],
        run: tables_by_devx,
    },
    Case { name: "dr.domain_table_and_matcher_checks", covers: &[306, 307], needs: NEEDS, run: object_checks },
    Case { name: "dr.action_checks_and_order", covers: &[308, 309], needs: NEEDS, run: action_checks },
    Case { name: "dr.rx_tables_steer_and_count", covers: &[310, 311], needs: NEEDS, run: rx_steer },
    Case { name: "dr.tag_action_reaches_the_completion", covers: &[311], needs: NEEDS, run: rx_tag },
    Case { name: "dr.tx_rewrite_vlan_drop_and_default_miss", covers: &[312], needs: NEEDS, run: tx_steer },
    Case { name: "dr.dest_array_sampler_and_tir", covers: &[313], needs: NEEDS, run: fan_out },
    Case { name: "dr.vxlan_encap_on_tx_and_decap_on_rx", covers: &[314, 315], needs: NEEDS, run: reformat },
];

/// The source MAC of [`frame_bytes`]' frames.
const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// `match_criteria_enable`'s outer headers bit.
const OUTER: u8 = 1;
/// A mask on the outer source MAC, padded to whole words as software tables want.
const SMAC_MASK: [u8; 8] = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0];

fn smac_value(mac: [u8; 6]) -> Vec<u8> {
    [&mac[..], &[0, 0]].concat()
}

/// A domain of `t`, or a skip where the backend has no `mlx5dv_dr` (EOPNOTSUPP).
fn domain(b: &mut dyn Backend, ctx: ContextHandle, t: u32) -> Check<DrDomain> {
    match b.dr_domain_create(ctx, t) {
        Ok(d) => Ok(d),
        Err(e) if e.errno() == EOPNOTSUPP => Err(Verdict::skip(format!("no mlx5dv_dr domains here ({e})"))),
        Err(e) => Err(Verdict::fail("mlx5dv_dr_domain_create", "a domain", e)),
    }
}

fn table(b: &mut dyn Backend, d: &DrDomain, level: u32) -> Check<DrTable> {
    expect_ok(&format!("mlx5dv_dr_table_create level {level}"), b.dr_table_create(d, level))
}

fn smac_matcher(b: &mut dyn Backend, t: &DrTable, priority: u16) -> Check<DrMatcher> {
    expect_ok("mlx5dv_dr_matcher_create on the source MAC", b.dr_matcher_create(t, priority, OUTER, &SMAC_MASK))
}

fn action(b: &mut dyn Backend, what: &str, a: A) -> Check<DrAction> {
    expect_ok(what, b.dr_action_create(&a))
}

/// A root matcher and rule sending frames from `mac` to table `to`.
fn root_to(b: &mut dyn Backend, d: &DrDomain, to: &DrTable, mac: [u8; 6]) -> Check<DrAction> {
    let root = table(b, d, 0)?;
    let m = smac_matcher(b, &root, 0)?;
    let goto = action(b, "a table action", A::DestTable(*to))?;
    expect_ok("the root rule to the table", b.dr_rule_create(&m, &smac_value(mac), &[goto]))?;
    Ok(goto)
}

/// A DEVX flow counter and its id, or a skip.
fn counter(b: &mut dyn Backend, ctx: ContextHandle) -> Check<(mlx5_dv::DevxObjHandle, u32)> {
    let alloc = prm::new_input(fc::ALLOC_SIZE, fc::ALLOC, 0, 0);
    let Ok(c) = b.devx_obj_create(ctx, &alloc, fc::ALLOC_SIZE) else {
        return Err(Verdict::skip("the device has no flow counters"));
    };
    Ok((c.handle, fc::ID.get(&c.out).unwrap_or(0) as u32))
}

/// The packets counter `id` counted.
fn packets(b: &mut dyn Backend, c: mlx5_dv::DevxObjHandle, id: u32) -> Check<u64> {
    let mut q = prm::new_input(fc::QUERY_IN_SIZE, fc::QUERY, 0, 0);
    let _ = fc::QUERY_ID.set(&mut q, u64::from(id));
    let out = expect_ok("QUERY_FLOW_COUNTER", b.devx_obj_query(c, &q, fc::STATS_BYTE + fc::STATS_SIZE))?;
    Ok(fc::PACKETS.get(&out[fc::STATS_BYTE..]).unwrap_or(u64::MAX))
}

/// The frame `rx` received into its second slot.
fn received(b: &mut dyn Backend, rx: &RawSide, len: usize) -> Check<Vec<u8>> {
    Ok(contents(b, &rx.buf)?[FRAME_LEN..FRAME_LEN + len].to_vec())
}

fn tables_by_devx(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = expect_ok("ibv_open_device", b.open_ibv_device(env.dev()?))?;
    let d = domain(b, ctx, ty::NIC_RX)?;
    let root = table(b, &d, 0)?;
    let fdb = expect_ok("an FDB domain (root tables only)", b.dr_domain_create(ctx, ty::FDB))?;
    expect_errno("an FDB software table", b.dr_table_create(&fdb, 1), EOPNOTSUPP)?;
    // libmlx5 learns the flow table pages through DEVX; without it a domain has root tables.
    if env.caps.kernel.devx == Some(true) {
        let t = table(b, &d, 1)?;
        expect_ok("sync", b.dr_domain_sync(&d, 1))?;
        expect_ok("destroy the software table", b.dr_destroy(DrObject::Table(t)))?;
    } else {
        expect_errno("a software table without DEVX", b.dr_table_create(&d, 1), EOPNOTSUPP)?;
        expect_errno("sync without software steering", b.dr_domain_sync(&d, 1), EOPNOTSUPP)?;
    }
    expect_ok("destroy the root table", b.dr_destroy(DrObject::Table(root)))?;
    expect_ok("destroy the domain", b.dr_destroy(DrObject::Domain(d)))?;
    expect_ok("destroy the FDB domain", b.dr_destroy(DrObject::Domain(fdb)))
}

fn object_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    expect_errno("domain type 3", b.dr_domain_create(ctx, 3), EINVAL)?;
    let d = domain(b, ctx, ty::NIC_RX)?;
    let root = table(b, &d, 0)?;
    let sw = table(b, &d, 1)?;
    expect_errno("sync flags 0x8", b.dr_domain_sync(&d, 8), EOPNOTSUPP)?;
    expect_ok("sync SW|HW|MEM", b.dr_domain_sync(&d, 7))?;
    // The root table's matchers are the kernel's (mlx5dv_create_flow_matcher).
    expect_errno("a root matcher without a mask", b.dr_matcher_create(&root, 0, OUTER, &[]), EINVAL)?;
    let past = [vec![0u8; 0x200], vec![1]].concat();
    expect_errno("a root mask set past fte_match_param", b.dr_matcher_create(&root, 0, OUTER, &past), EOPNOTSUPP)?;
    let rm = smac_matcher(b, &root, 0)?;
    expect_errno("a root matcher's layout", b.dr_matcher_set_layout(&rm, lay::RESIZABLE, 0), EOPNOTSUPP)?;
    // Software tables: libmlx5's own checks.
    expect_errno("criteria 0x80", b.dr_matcher_create(&sw, 0, 0x80, &SMAC_MASK), EINVAL)?;
    expect_errno("a mask past dr_match_param", b.dr_matcher_create(&sw, 0, OUTER, &[0xff; 0x1c1]), EINVAL)?;
    expect_errno("an all-zero mask under OUTER", b.dr_matcher_create(&sw, 0, OUTER, &[0; 8]), EINVAL)?;
    let m = smac_matcher(b, &sw, 1)?;
    expect_errno("layout flags 0x4", b.dr_matcher_set_layout(&m, 4, 0), EOPNOTSUPP)?;
    expect_ok("layout of 2^5 rules", b.dr_matcher_set_layout(&m, lay::NUM_RULE, 5))?;
    expect_ok("resizable again", b.dr_matcher_set_layout(&m, lay::RESIZABLE, 0))?;
    let drop = action(b, "a drop action", A::Drop)?;
    expect_errno("a 6-byte value", b.dr_rule_create(&m, &SRC_MAC, &[drop]), EINVAL)?;
    let mut outside = smac_value(SRC_MAC);
    outside[6] = 1;
    expect_errno("a value bit outside the mask", b.dr_rule_create(&m, &outside, &[drop]), EINVAL)?;
    let r = expect_ok("a rule", b.dr_rule_create(&m, &smac_value(SRC_MAC), &[drop]))?;
    let dup = expect_ok("a duplicate (allowed by default)", b.dr_rule_create(&m, &smac_value(SRC_MAC), &[drop]))?;
    expect_ok("forbid duplicates", b.dr_domain_allow_duplicate_rules(&d, false))?;
    expect_errno("a third", b.dr_rule_create(&m, &smac_value(SRC_MAC), &[drop]), EEXIST)?;
    expect_errno("destroy the matcher under rules", b.dr_destroy(DrObject::Matcher(m)), EBUSY)?;
    expect_errno("destroy the drop action under rules", b.dr_destroy(DrObject::Action(drop)), EBUSY)?;
    expect_errno("destroy the table under a matcher", b.dr_destroy(DrObject::Table(sw)), EBUSY)?;
    expect_errno("destroy the domain under tables", b.dr_destroy(DrObject::Domain(d)), EBUSY)?;
    for (what, o) in [
        ("the rules", DrObject::Rule(r)),
        ("", DrObject::Rule(dup)),
        ("the action", DrObject::Action(drop)),
        ("the matchers", DrObject::Matcher(m)),
        ("", DrObject::Matcher(rm)),
        ("the tables", DrObject::Table(sw)),
        ("", DrObject::Table(root)),
        ("the domain", DrObject::Domain(d)),
    ] {
        expect_ok(&format!("destroy {what}"), b.dr_destroy(o))?;
    }
    expect_errno("destroy the domain again", b.dr_destroy(DrObject::Domain(d)), EINVAL)
}

fn action_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let (rx, tx) = (domain(b, ctx, ty::NIC_RX)?, domain(b, ctx, ty::NIC_TX)?);
    let side = raw_side(b, env)?;
    let (pd, cq) = super::raw::setup(b, env)?;
    let rc = expect_ok("an RC QP", b.create_qp(&super::raw::attr(pd, &cq, mlx5_dv::qp_type::RC, 0, None)))?;
    expect_errno("a QP action on an RC QP", b.dr_action_create(&A::DestQp(rc)), EINVAL)?;
    let root = table(b, &rx, 0)?;
    expect_errno("the root table as a destination", b.dr_action_create(&A::DestTable(root)), EINVAL)?;
    let bad_tpid = A::PushVlan { domain: tx, vlan_hdr: 0x0800_0005 };
    expect_errno("a VLAN push of TPID 0x0800", b.dr_action_create(&bad_tpid), EINVAL)?;
    let short = A::ModifyHeader { domain: tx, flags: 0, actions: vec![0; 12] };
    expect_errno("12 bytes of modify actions", b.dr_action_create(&short), EINVAL)?;
    let flags = A::ModifyHeader { domain: tx, flags: 2, actions: vec![0; 8] };
    expect_errno("modify flags 0x2", b.dr_action_create(&flags), EINVAL)?;
    let q = action(b, "a QP action", A::DestQp(side.qp))?;
    expect_errno(
        "a one-destination array",
        b.dr_action_create(&A::DestArray { domain: rx, dests: vec![DrDest::Dest(q)] }),
        EINVAL,
    )?;
    let t1 = table(b, &rx, 1)?;
    let sampler =
        |ratio| A::FlowSampler { sample_ratio: ratio, default_next_table: t1, sample_actions: vec![q], action: 0 };
    expect_errno("a sampler of ratio 0", b.dr_action_create(&sampler(0)), EINVAL)?;
    let tx1 = table(b, &tx, 1)?;
    let tx_sampler = A::FlowSampler { sample_ratio: 2, default_next_table: tx1, sample_actions: vec![q], action: 0 };
    expect_errno("a sampler on NIC TX", b.dr_action_create(&tx_sampler), EOPNOTSUPP)?;
    expect_errno("a vport outside switchdev", b.dr_action_create(&A::DestVport { domain: rx, vport: 0 }), EOPNOTSUPP)?;
    // libmlx5's order of actions in a rule, on a software table of each direction.
    let tag = action(b, "a tag", A::Tag(5))?;
    let tag2 = action(b, "another tag", A::Tag(6))?;
    let m = smac_matcher(b, &t1, 0)?;
    let v = smac_value(SRC_MAC);
    expect_errno("a tag after the QP", b.dr_rule_create(&m, &v, &[q, tag]), EOPNOTSUPP)?;
    expect_errno("two tags", b.dr_rule_create(&m, &v, &[tag, tag2, q]), EINVAL)?;
    let ok = expect_ok("a tag, then the QP", b.dr_rule_create(&m, &v, &[tag, q]))?;
    let txm = smac_matcher(b, &tx1, 0)?;
    expect_errno("a QP on NIC TX", b.dr_rule_create(&txm, &v, &[q]), EOPNOTSUPP)?;
    expect_errno("a tag on NIC TX", b.dr_rule_create(&txm, &v, &[tag]), EOPNOTSUPP)?;
    let root_mod = A::ModifyHeader { domain: tx, flags: DR_ACTION_FLAGS_ROOT_LEVEL, actions: smac_rewrite([0x88; 6]) };
    let rm = action(b, "a root-level rewrite", root_mod)?;
    expect_errno("a root-level rewrite in a software table", b.dr_rule_create(&txm, &v, &[rm]), EINVAL)?;
    let pop = action(b, "a VLAN pop", A::PopVlan)?;
    let rootm = smac_matcher(b, &root, 0)?;
    expect_errno("a VLAN pop in the root table", b.dr_rule_create(&rootm, &SRC_MAC, &[pop, q]), EOPNOTSUPP)?;
    let other = domain(b, ctx, ty::NIC_RX)?;
    let foreign = table(b, &other, 1)?;
    let goto = action(b, "a table action of another domain", A::DestTable(foreign))?;
    expect_errno("a table of another domain", b.dr_rule_create(&m, &v, &[goto]), EINVAL)?;
    expect_ok("destroy the rule", b.dr_destroy(DrObject::Rule(ok)))?;
    expect_errno("destroy a table an action names", b.dr_destroy(DrObject::Table(foreign)), EBUSY)?;
    Ok(())
}

/// Modify-header actions setting the source MAC to `mac` (OUT_SMAC_47_16, OUT_SMAC_15_0).
fn smac_rewrite(mac: [u8; 6]) -> Vec<u8> {
    let hi = u32::from_be_bytes([mac[0], mac[1], mac[2], mac[3]]);
    let lo = u32::from(u16::from_be_bytes([mac[4], mac[5]]));
    let mut a = Vec::new();
    a.extend_from_slice(&(1u32 << 28 | 0x1 << 16).to_be_bytes());
    a.extend_from_slice(&hi.to_be_bytes());
    a.extend_from_slice(&(1u32 << 28 | 0x2 << 16 | 16).to_be_bytes());
    a.extend_from_slice(&lo.to_be_bytes());
    a
}

fn rx_steer(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let d = domain(b, ctx, ty::NIC_RX)?;
    let (tx, rx) = (raw_side(b, env)?, raw_side(b, env)?);
    let (c, id) = counter(b, ctx)?;
    let t1 = table(b, &d, 1)?;
    root_to(b, &d, &t1, SRC_MAC)?;
    let m = smac_matcher(b, &t1, 1)?;
    let q = action(b, "a QP action", A::DestQp(rx.qp))?;
    let count = action(b, "a counter action", A::FlowCounter { counter: c, offset: 0 })?;
    expect_ok("the table's rule", b.dr_rule_create(&m, &smac_value(SRC_MAC), &[q, count]))?;
    post_frame_recv(b, &rx, 7)?;
    let f = frame_bytes(3);
    send_frame(b, &tx, &f, 1)?;
    ok_cqe(b, &rx.cq, 7, mlx5_dv::wc_opcode::RECV)?;
    check_eq("the frame", received(b, &rx, f.len())?, f.clone())?;
    let mut other = frame_bytes(4);
    other[11] = 0x09;
    post_frame_recv(b, &rx, 8)?;
    send_frame(b, &tx, &other, 2)?;
    no_cqe(b, &rx.cq)?;
    check_eq("packets counted", packets(b, c, id)?, 1)
}

fn rx_tag(b: &mut dyn Backend, env: &Env) -> Check {
    if env.caps.library.wc_flow_tag != Some(true) {
        return Err(Verdict::skip("the backend's completions carry no flow tag (it polls with ibv_poll_cq)"));
    }
    let ctx = devx_ctx(b, env)?;
    let d = domain(b, ctx, ty::NIC_RX)?;
    let (tx, rx) = (raw_side(b, env)?, raw_side(b, env)?);
    let t1 = table(b, &d, 1)?;
    root_to(b, &d, &t1, SRC_MAC)?;
    let m = smac_matcher(b, &t1, 1)?;
    let tag = action(b, "a tag of 25 bits", A::Tag(0x112_3456))?;
    let q = action(b, "a QP action", A::DestQp(rx.qp))?;
    expect_ok("a tag, then the QP", b.dr_rule_create(&m, &smac_value(SRC_MAC), &[tag, q]))?;
    post_frame_recv(b, &rx, 7)?;
    send_frame(b, &tx, &frame_bytes(3), 1)?;
    let wc = ok_cqe(b, &rx.cq, 7, mlx5_dv::wc_opcode::RECV)?;
    check_eq("the flow tag (its low 24 bits)", wc.flow_tag, 0x12_3456)
}

fn tx_steer(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let (dtx, drx) = (domain(b, ctx, ty::NIC_TX)?, domain(b, ctx, ty::NIC_RX)?);
    let (tx, rx) = (raw_side(b, env)?, raw_side(b, env)?);
    let new_mac = [0x88; 6];
    // Transmit: the root table rewrites the source MAC of the frames from SRC_MAC.
    let troot = table(b, &dtx, 0)?;
    let tm = expect_ok("a root TX matcher", b.dr_matcher_create(&troot, 0, OUTER, &[0xff; 6]))?;
    let rewrite = A::ModifyHeader { domain: dtx, flags: DR_ACTION_FLAGS_ROOT_LEVEL, actions: smac_rewrite(new_mac) };
    let rw = action(b, "a root-level rewrite", rewrite)?;
    expect_ok("the rewrite rule", b.dr_rule_create(&tm, &SRC_MAC, &[rw]))?;
    // Receive: frames from the new MAC reach the QP.
    let r1 = table(b, &drx, 1)?;
    root_to(b, &drx, &r1, new_mac)?;
    let rm = smac_matcher(b, &r1, 1)?;
    let q = action(b, "a QP action", A::DestQp(rx.qp))?;
    expect_ok("the receive rule", b.dr_rule_create(&rm, &smac_value(new_mac), &[q]))?;
    post_frame_recv(b, &rx, 7)?;
    let f = frame_bytes(3);
    send_frame(b, &tx, &f, 1)?;
    ok_cqe(b, &rx.cq, 7, mlx5_dv::wc_opcode::RECV)?;
    let mut want = f.clone();
    want[6..12].copy_from_slice(&new_mac);
    check_eq("the frame, its source MAC rewritten", received(b, &rx, f.len())?, want)?;
    // Transmit, another source: a software table pushes a VLAN (its rule ends in the table
    // type's default, the wire) ahead of a drop of a lower priority.
    let src2 = [0x02, 0, 0, 0, 0, 0x05];
    let t1 = table(b, &dtx, 1)?;
    let tm2 = expect_ok("a second root TX matcher", b.dr_matcher_create(&troot, 1, OUTER, &[0xff; 6]))?;
    let goto = action(b, "a table action", A::DestTable(t1))?;
    expect_ok("a root rule to the software table", b.dr_rule_create(&tm2, &src2, &[goto]))?;
    let push = action(b, "a VLAN push", A::PushVlan { domain: dtx, vlan_hdr: 0x8100_6007 })?;
    let miss = action(b, "a default miss", A::DefaultMiss)?;
    let drop = action(b, "a drop", A::Drop)?;
    let pm = smac_matcher(b, &t1, 1)?;
    expect_errno(
        "a default miss after a push (TX)",
        b.dr_rule_create(&pm, &smac_value(src2), &[push, miss]),
        EOPNOTSUPP,
    )?;
    expect_ok("a push", b.dr_rule_create(&pm, &smac_value(src2), &[push]))?;
    let dm = smac_matcher(b, &t1, 2)?;
    expect_ok("a drop of lower priority", b.dr_rule_create(&dm, &smac_value(src2), &[drop]))?;
    let rroot = table(b, &drx, 0)?;
    let rrm = smac_matcher(b, &rroot, 0)?;
    let goto_r1 = action(b, "a table action", A::DestTable(r1))?;
    let to_qp = |b: &mut dyn Backend, prio: u16, mac: [u8; 6]| -> Check {
        expect_ok("a root receive rule", b.dr_rule_create(&rrm, &smac_value(mac), &[goto_r1]))?;
        let m = smac_matcher(b, &r1, prio)?;
        expect_ok("a receive rule to the QP", b.dr_rule_create(&m, &smac_value(mac), &[q])).map(|_| ())
    };
    to_qp(b, 2, src2)?;
    let mut g = frame_bytes(5);
    g[6..12].copy_from_slice(&src2);
    post_frame_recv(b, &rx, 8)?;
    send_frame(b, &tx, &g, 2)?;
    ok_cqe(b, &rx.cq, 8, mlx5_dv::wc_opcode::RECV)?;
    let mut tagged = g.clone();
    tagged.splice(12..12, [0x81, 0x00, 0x60, 0x07]);
    check_eq("the frame with its VLAN header", received(b, &rx, tagged.len())?, tagged)?;
    // A default miss ahead of a drop lets the frame out; a root drop keeps it in.
    let src3 = [0x02, 0, 0, 0, 0, 0x06];
    expect_ok("a root rule to the software table", b.dr_rule_create(&tm2, &src3, &[goto]))?;
    expect_ok("a default miss", b.dr_rule_create(&pm, &smac_value(src3), &[miss]))?;
    expect_ok("a drop of lower priority", b.dr_rule_create(&dm, &smac_value(src3), &[drop]))?;
    to_qp(b, 3, src3)?;
    let mut h = frame_bytes(6);
    h[6..12].copy_from_slice(&src3);
    post_frame_recv(b, &rx, 9)?;
    send_frame(b, &tx, &h, 3)?;
    ok_cqe(b, &rx.cq, 9, mlx5_dv::wc_opcode::RECV)?;
    check_eq("the frame, as sent", received(b, &rx, h.len())?, h)?;
    let src4 = [0x02, 0, 0, 0, 0, 0x0a];
    expect_ok("a root TX drop", b.dr_rule_create(&tm2, &src4, &[drop]))?;
    to_qp(b, 4, src4)?;
    let mut k = frame_bytes(7);
    k[6..12].copy_from_slice(&src4);
    post_frame_recv(b, &rx, 10)?;
    send_frame(b, &tx, &k, 4)?;
    no_cqe(b, &rx.cq)
}

fn fan_out(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let d = domain(b, ctx, ty::NIC_RX)?;
    let (tx, rx1, rx2) = (raw_side(b, env)?, raw_side(b, env)?, raw_side(b, env)?);
    let (c, id) = counter(b, ctx)?;
    // A destination array: QP 1, and a table whose rule sends to QP 2.
    let t1 = table(b, &d, 1)?;
    let last = table(b, &d, 0xff)?;
    let q1 = action(b, "QP 1", A::DestQp(rx1.qp))?;
    let q2 = action(b, "QP 2", A::DestQp(rx2.qp))?;
    let lm = smac_matcher(b, &last, 1)?;
    expect_ok("the last table's rule", b.dr_rule_create(&lm, &smac_value(SRC_MAC), &[q2]))?;
    let to_last = action(b, "a table action", A::DestTable(last))?;
    let arr = action(
        b,
        "a destination array",
        A::DestArray { domain: d, dests: vec![DrDest::Dest(q1), DrDest::Dest(to_last)] },
    )?;
    root_to(b, &d, &t1, SRC_MAC)?;
    let m = smac_matcher(b, &t1, 1)?;
    expect_ok("the array rule", b.dr_rule_create(&m, &smac_value(SRC_MAC), &[arr]))?;
    post_frame_recv(b, &rx1, 1)?;
    post_frame_recv(b, &rx2, 2)?;
    let f = frame_bytes(3);
    send_frame(b, &tx, &f, 1)?;
    ok_cqe(b, &rx1.cq, 1, mlx5_dv::wc_opcode::RECV)?;
    ok_cqe(b, &rx2.cq, 2, mlx5_dv::wc_opcode::RECV)?;
    check_eq("QP 2's copy", received(b, &rx2, f.len())?, f.clone())?;
    // A sampler of ratio 4 on another source: one frame in four is counted, every frame
    // goes on to QP 1 through the default table.
    let src2 = [0x02, 0, 0, 0, 0, 0x07];
    let next = table(b, &d, 2)?;
    let nm = smac_matcher(b, &next, 1)?;
    expect_ok("the default table's rule", b.dr_rule_create(&nm, &smac_value(src2), &[q1]))?;
    let count = action(b, "a counter", A::FlowCounter { counter: c, offset: 0 })?;
    let sampler =
        A::FlowSampler { sample_ratio: 4, default_next_table: next, sample_actions: vec![count, q2], action: 0 };
    let s = action(b, "a sampler", sampler)?;
    let t2 = table(b, &d, 1)?;
    root_to(b, &d, &t2, src2)?;
    let sm = smac_matcher(b, &t2, 1)?;
    expect_ok("the sampler rule", b.dr_rule_create(&sm, &smac_value(src2), &[s]))?;
    let mut g = frame_bytes(4);
    g[6..12].copy_from_slice(&src2);
    for i in 0..8 {
        post_frame_recv(b, &rx1, 10 + i)?;
        send_frame(b, &tx, &g, 10 + i)?;
        ok_cqe(b, &rx1.cq, 10 + i, mlx5_dv::wc_opcode::RECV)?;
    }
    check_eq("sampled of 8 at ratio 4", packets(b, c, id)?, 2)?;
    // A TIR over a receive WQ is a destination too.
    super::rss::tir_destination(b, ctx, &d, &tx)
}

/// Outer headers of a VXLAN tunnel (Ethernet, IPv4, UDP to 4789, VXLAN of VNI 7), their
/// lengths and checksums left zero for the device to fill.
fn vxlan_outer() -> Vec<u8> {
    let mut o = vec![0u8; 14 + 20 + 8 + 8];
    o[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0c]);
    o[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0d]);
    o[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    o[14] = 0x45;
    o[22] = 64;
    o[23] = 17;
    o[26..30].copy_from_slice(&[127, 0, 147, 1]);
    o[30..34].copy_from_slice(&[127, 0, 147, 2]);
    o[34..36].copy_from_slice(&5000u16.to_be_bytes());
    o[36..38].copy_from_slice(&4789u16.to_be_bytes());
    o[42] = 0x08;
    o[48] = 7;
    o
}

fn reformat(b: &mut dyn Backend, env: &Env) -> Check {
    use mlx5_dv::reformat_type as rt;
    let ctx = devx_ctx(b, env)?;
    let (dtx, drx) = (domain(b, ctx, ty::NIC_TX)?, domain(b, ctx, ty::NIC_RX)?);
    let (tx, rx) = (raw_side(b, env)?, raw_side(b, env)?);
    let outer = vxlan_outer();
    let pr = |domain, flags, reformat_type, data: &[u8]| A::PacketReformat {
        domain,
        flags,
        reformat_type,
        data: data.to_vec(),
    };
    let root = DR_ACTION_FLAGS_ROOT_LEVEL;
    expect_errno("an encapsulation on NIC RX", b.dr_action_create(&pr(drx, 0, rt::L2_TO_L2_TUNNEL, &outer)), EINVAL)?;
    expect_errno("a decapsulation on NIC TX", b.dr_action_create(&pr(dtx, 0, rt::L2_TUNNEL_TO_L2, &[])), EINVAL)?;
    expect_errno("reformat type 4", b.dr_action_create(&pr(dtx, 0, 4, &outer)), EINVAL)?;
    expect_errno("an L3 tunnel", b.dr_action_create(&pr(dtx, 0, rt::L2_TO_L3_TUNNEL, &outer)), EOPNOTSUPP)?;
    expect_errno("2 KiB of headers", b.dr_action_create(&pr(dtx, 0, rt::L2_TO_L2_TUNNEL, &[0; 2048])), EINVAL)?;
    // Transmit: the root table encapsulates; receive: a software table decapsulates.
    let troot = table(b, &dtx, 0)?;
    let tm = expect_ok("a root TX matcher", b.dr_matcher_create(&troot, 0, OUTER, &[0xff; 6]))?;
    let encap = action(b, "a root-level encapsulation", pr(dtx, root, rt::L2_TO_L2_TUNNEL, &outer))?;
    let er = expect_ok("the encapsulation rule", b.dr_rule_create(&tm, &SRC_MAC, &[encap]))?;
    let r1 = table(b, &drx, 1)?;
    root_to(b, &drx, &r1, [0x02, 0, 0, 0, 0, 0x0d])?;
    let m = smac_matcher(b, &r1, 1)?;
    let decap = action(b, "a decapsulation", pr(drx, 0, rt::L2_TUNNEL_TO_L2, &[]))?;
    let q = action(b, "a QP action", A::DestQp(rx.qp))?;
    let dr_rule = expect_ok(
        "decapsulate, then the QP",
        b.dr_rule_create(&m, &smac_value([0x02, 0, 0, 0, 0, 0x0d]), &[decap, q]),
    )?;
    post_frame_recv(b, &rx, 7)?;
    let f = frame_bytes(3);
    send_frame(b, &tx, &f, 1)?;
    ok_cqe(b, &rx.cq, 7, mlx5_dv::wc_opcode::RECV)?;
    check_eq("the frame after the tunnel", received(b, &rx, f.len())?, f.clone())?;
    expect_ok("destroy the decapsulating rule", b.dr_destroy(DrObject::Rule(dr_rule)))?;
    // Without the decapsulation the tunnelled frame arrives, its lengths filled in.
    expect_ok("the QP alone", b.dr_rule_create(&m, &smac_value([0x02, 0, 0, 0, 0, 0x0d]), &[q]))?;
    post_frame_recv(b, &rx, 8)?;
    send_frame(b, &tx, &f, 2)?;
    let wc = ok_cqe(b, &rx.cq, 8, mlx5_dv::wc_opcode::RECV)?;
    let n = outer.len() + f.len();
    check_eq("byte_len: outer headers and frame", wc.byte_len as usize, n)?;
    let got = received(b, &rx, n)?;
    check_eq("IPv4 total length", u16::from_be_bytes([got[16], got[17]]) as usize, n - 14)?;
    check_eq("UDP length", u16::from_be_bytes([got[38], got[39]]) as usize, n - 34)?;
    check_eq("the inner frame", got[outer.len()..].to_vec(), f.clone())?;
    expect_ok("destroy the encapsulating rule", b.dr_destroy(DrObject::Rule(er)))?;
    // The verbs path: a NIC TX mlx5dv matcher whose flow takes a reformat flow action.
    let fa = match b.create_flow_action_packet_reformat(ctx, rt::L2_TO_L2_TUNNEL, 1, &outer) {
        Err(e) if e.errno() == EOPNOTSUPP => {
            return Err(Verdict::skip(format!("mlx5dv_dr passed; no reformat flow actions here ({e})")));
        }
        r => expect_ok("mlx5dv_create_flow_action_packet_reformat", r)?,
    };
    let bad = b.create_flow_action_packet_reformat(ctx, rt::L2_TO_L2_TUNNEL, 0, &outer);
    expect_errno("an encapsulation flow action for NIC RX", bad.map(|_| ()), EOPNOTSUPP)?;
    let bad = b.create_flow_action_packet_reformat(ctx, rt::L2_TUNNEL_TO_L2, 0, &outer);
    expect_errno("a decapsulation flow action with headers", bad.map(|_| ()), EINVAL)?;
    let attr = mlx5_dv::FlowMatcherAttr {
        attr_type: 0,
        flags: 4,
        priority: 0,
        match_criteria_enable: OUTER,
        match_mask: vec![0xff; 6],
        comp_mask: 1,
        ft_type: 1,
        ib_port: 0,
    };
    let txm = expect_ok("a NIC TX flow matcher", b.create_flow_matcher(ctx, &attr))?;
    let qp_on_tx = b.create_matcher_flow(&txm, &SRC_MAC, &[mlx5_dv::MatcherAction::DestQp(rx.qp)]);
    expect_errno("a QP destination on NIC TX", qp_on_tx.map(|_| ()), EINVAL)?;
    let flow = expect_ok(
        "the encapsulating flow",
        b.create_matcher_flow(&txm, &SRC_MAC, &[mlx5_dv::MatcherAction::FlowAction(fa)]),
    )?;
    expect_errno("destroy the action under a flow", b.destroy_flow_action(&fa), EBUSY)?;
    post_frame_recv(b, &rx, 9)?;
    send_frame(b, &tx, &f, 3)?;
    ok_cqe(b, &rx.cq, 9, mlx5_dv::wc_opcode::RECV)?;
    check_eq("the inner frame", received(b, &rx, n)?[outer.len()..].to_vec(), f.clone())?;
    expect_ok("ibv_destroy_flow", b.destroy_flow(&flow))?;
    expect_ok("ibv_destroy_flow_action", b.destroy_flow_action(&fa))?;
    expect_ok("destroy the matcher", b.destroy_flow_matcher(&txm))?;
    // A NIC TX drop of another context holds until that context closes.
    let rxm = expect_ok(
        "a NIC RX flow matcher",
        b.create_flow_matcher(ctx, &mlx5_dv::FlowMatcherAttr { flags: 0, comp_mask: 0, ft_type: 0, ..attr.clone() }),
    )?;
    expect_ok(
        "a NIC RX flow to the QP",
        b.create_matcher_flow(&rxm, &SRC_MAC, &[mlx5_dv::MatcherAction::DestQp(rx.qp)]),
    )?;
    let ctx2 = devx_ctx(b, env)?;
    let txm2 = expect_ok("another context's NIC TX matcher", b.create_flow_matcher(ctx2, &attr))?;
    expect_ok("its drop", b.create_matcher_flow(&txm2, &SRC_MAC, &[mlx5_dv::MatcherAction::Drop]))?;
    post_frame_recv(b, &rx, 10)?;
    send_frame(b, &tx, &f, 4)?;
    no_cqe(b, &rx.cq)?;
    expect_ok("close that context", b.close_device(ctx2))?;
    send_frame(b, &tx, &f, 5)?;
    ok_cqe(b, &rx.cq, 10, mlx5_dv::wc_opcode::RECV).map(|_| ())
}
