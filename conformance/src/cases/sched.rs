//! NIC scheduling elements (items 266–269): the QoS page's scheduling caps, TSARs and queue
//! groups made, modified, queried and destroyed through DEVX, and a QP joining a queue group
//! with `mlx5dv_modify_qp_sched_elem`.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP, EREMOTEIO};
use mlx5_dv::prm::qos_cap::{self as qc, sched as s};
use mlx5_dv::prm::{self, general_obj_in as g, general_obj_out as go, obj_type, opcode, query_hca_cap as q};
use mlx5_dv::{Backend, ContextHandle, DevxObj, DvQpCreateFlags, QpState, qp_type};

use super::devx::devx_ctx;
use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "sched.tree_of_tsars_and_queue_groups_through_devx",
        covers: &[266, 267, 268],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: tree,
    },
    Case {
        name: "sched.a_qp_joins_a_queue_group",
        covers: &[269],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: qp_joins,
    },
];

/// The QoS page, or a skip where the device has no NIC scheduling of TSARs and queue groups.
fn sched_page(b: &mut dyn Backend, ctx: ContextHandle) -> Check<Vec<u8>> {
    let page = |b: &mut dyn Backend, op_mod| -> Check<Vec<u8>> {
        let input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, op_mod);
        let out = expect_ok("QUERY_HCA_CAP", b.devx_general_cmd(ctx, &input, q::OUT_SIZE))?;
        Ok(out[q::CAPABILITY_BYTE..].to_vec())
    };
    let general = page(b, q::OP_MOD_GENERAL_CUR)?;
    if qc::QOS.get(&general).unwrap_or(0) == 0 {
        return Err(Verdict::skip("the device has no QoS page"));
    }
    let p = page(b, q::OP_MOD_QOS_CUR)?;
    let types = qc::NIC_ELEMENT_TYPE.get(&p).unwrap_or(0);
    let want = s::ELEMENT_TSAR_CAP | s::ELEMENT_QUEUE_GROUP_CAP;
    if types & want != want || qc::NIC_TSAR_TYPE.get(&p).unwrap_or(0) & s::TSAR_DWRR_CAP == 0 {
        return Err(Verdict::skip("the device has no NIC TSARs and queue groups"));
    }
    Ok(p)
}

/// A CREATE or MODIFY_GENERAL_OBJECT of a scheduling element.
fn elem_input(op: u16, id: u32, queue_group: bool, parent: u32, select: u64, bw: u32, max: u32) -> Vec<u8> {
    let mut i = prm::new_input(s::SIZE, op, 0, obj_type::SCHEDULING_ELEMENT);
    let ty = if queue_group { s::ELEMENT_QUEUE_GROUP } else { s::ELEMENT_TSAR };
    for (f, v) in [
        (g::OBJ_ID, u64::from(id)),
        (s::MODIFY_FIELD_SELECT, select),
        (s::SCHEDULING_HIERARCHY, s::HIERARCHY_NIC),
        (s::ELEMENT_TYPE, ty),
        (s::TSAR_TYPE, s::TSAR_DWRR),
        (s::PARENT_ELEMENT_ID, u64::from(parent)),
        (s::BW_SHARE, u64::from(bw)),
        (s::MAX_AVERAGE_BW, u64::from(max)),
    ] {
        let _ = f.set(&mut i, v);
    }
    i
}

fn make(b: &mut dyn Backend, ctx: ContextHandle, what: &str, input: &[u8]) -> Check<(DevxObj, u32)> {
    let o = expect_ok(what, b.devx_obj_create(ctx, input, go::SIZE))?;
    let id = go::OBJ_ID.get(&o.out).unwrap_or(0) as u32;
    Ok((o, id))
}

/// (element type, parent, bw_share, max_average_bw) as QUERY_GENERAL_OBJECT reads them.
fn query(b: &mut dyn Backend, o: &DevxObj, id: u32) -> Check<(u64, u64, u64, u64)> {
    let mut i = prm::new_input(g::SIZE, opcode::QUERY_GENERAL_OBJECT, 0, obj_type::SCHEDULING_ELEMENT);
    let _ = g::OBJ_ID.set(&mut i, u64::from(id));
    let out = expect_ok("QUERY_GENERAL_OBJECT", b.devx_obj_query(o.handle, &i, s::SIZE))?;
    let get = |f: prm::Field| f.get(&out).unwrap_or(u64::MAX);
    Ok((get(s::ELEMENT_TYPE), get(s::PARENT_ELEMENT_ID), get(s::BW_SHARE), get(s::MAX_AVERAGE_BW)))
}

fn tree(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let p = sched_page(b, ctx)?;
    let (bw, rate) = (qc::NIC_BW_SHARE.get(&p).unwrap_or(0) != 0, qc::NIC_RATE_LIMIT.get(&p).unwrap_or(0) != 0);
    let both = s::SELECT_BW_SHARE | s::SELECT_MAX_AVERAGE_BW;
    let c = opcode::CREATE_GENERAL_OBJECT;
    let (root, root_id) = make(b, ctx, "a TSAR at the root", &elem_input(c, 0, false, 0, 0, 0, 0))?;
    let select = if bw && rate { both } else { 0 };
    let (node, node_id) = make(b, ctx, "a TSAR under it", &elem_input(c, 0, false, root_id, select, 10, 20))?;
    let (leaf, leaf_id) = make(b, ctx, "a queue group under that", &elem_input(c, 0, true, node_id, select, 3, 4))?;
    check("three ids, none 0", ![root_id, node_id, leaf_id].contains(&0), "nonzero", [root_id, node_id, leaf_id])?;
    let (want_bw, want_max) = if select != 0 { (3, 4) } else { (0, 0) };
    check_eq(
        "the leaf as queried (type, parent, bw_share, max_average_bw)",
        query(b, &leaf, leaf_id)?,
        (s::ELEMENT_QUEUE_GROUP, u64::from(node_id), want_bw, want_max),
    )?;
    if bw {
        let m = elem_input(opcode::MODIFY_GENERAL_OBJECT, node_id, false, 0, s::SELECT_BW_SHARE, 7, 99);
        expect_ok("MODIFY_GENERAL_OBJECT of bw_share", b.devx_obj_modify(node.handle, &m, go::SIZE))?;
        let want = (s::ELEMENT_TSAR, u64::from(root_id), 7, if select != 0 { 20 } else { 0 });
        check_eq("the node after the modify: bw_share alone changed", query(b, &node, node_id)?, want)?;
        let wrong = elem_input(opcode::MODIFY_GENERAL_OBJECT, node_id, true, 0, s::SELECT_BW_SHARE, 7, 0);
        let r = b.devx_obj_modify(node.handle, &wrong, go::SIZE).map(|_| ());
        expect_errno("a modify naming the wrong element type", r, EREMOTEIO)?;
    }
    let refused = [
        ("a queue group at the root", elem_input(c, 0, true, 0, 0, 0, 0)),
        ("an element under a queue group", elem_input(c, 0, false, leaf_id, 0, 0, 0)),
        ("an element under no element", elem_input(c, 0, false, leaf_id + 1000, 0, 0, 0)),
    ];
    for (what, input) in refused {
        expect_errno(what, b.devx_obj_create(ctx, &input, go::SIZE).map(|_| ()), EREMOTEIO)?;
    }
    let mut vport_tc = elem_input(c, 0, false, root_id, 0, 0, 0);
    let _ = s::ELEMENT_TYPE.set(&mut vport_tc, 2);
    expect_errno("a VPORT_TC element", b.devx_obj_create(ctx, &vport_tc, go::SIZE).map(|_| ()), EREMOTEIO)?;
    for o in [leaf, node, root] {
        expect_ok("DESTROY_GENERAL_OBJECT", b.devx_obj_destroy(o.handle))?;
    }
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn qp_joins(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, srv) = pair(b, env, false, DvQpCreateFlags::empty())?;
    if let Err(v) = sched_page(b, a.ctx) {
        let r = b.modify_qp_sched_elem(&a.qp, 0, 0);
        expect_errno("mlx5dv_modify_qp_sched_elem without NIC scheduling", r, EOPNOTSUPP)?;
        return Err(v);
    }
    let c = opcode::CREATE_GENERAL_OBJECT;
    let (root, root_id) = make(b, a.ctx, "a TSAR at the root", &elem_input(c, 0, false, 0, 0, 0, 0))?;
    let (leaf, leaf_id) = make(b, a.ctx, "a queue group", &elem_input(c, 0, true, root_id, 0, 0, 0))?;
    let r = b.modify_qp_sched_elem(&a.qp, leaf_id, leaf_id);
    if !env.caps.sim_control && matches!(&r, Err(e) if e.errno() == EOPNOTSUPP) {
        return Err(Verdict::skip("the backend does not forward mlx5dv_modify_qp_sched_elem"));
    }
    expect_ok("an RC QP in RTS joins the queue group both ways", r)?;
    expect_ok("and leaves it", b.modify_qp_sched_elem(&a.qp, 0, 0))?;
    let r = b.modify_qp_sched_elem(&a.qp, root_id, 0);
    expect_errno("a TSAR as the requester's group (BAD_PARAM)", r, EINVAL)?;
    // A UD QP: no responder group; in RESET, no command at all.
    let ud = super::uc_ud::create(b, qp_type::UD, a.pd, &a.cq)?;
    expect_errno("a UD QP with a responder group", b.modify_qp_sched_elem(&ud, leaf_id, leaf_id), EINVAL)?;
    let state = expect_ok("query the UD QP", b.query_qp_state(&ud))?;
    check_eq("the UD QP's state", state, QpState::Reset)?;
    expect_errno("a UD QP in RESET", b.modify_qp_sched_elem(&ud, leaf_id, 0), EOPNOTSUPP)?;
    expect_ok("ibv_destroy_qp of the UD QP", b.destroy_qp(&ud))?;
    for q in [&a.qp, &srv.qp] {
        expect_ok("ibv_destroy_qp", b.destroy_qp(q))?;
    }
    for o in [leaf, root] {
        expect_ok("DESTROY_GENERAL_OBJECT", b.devx_obj_destroy(o.handle))?;
    }
    Ok(())
}
