//! Ports, addresses and paths: docs/behaviour.md item 86.

use mlx5_dv::errno::EINVAL;
use mlx5_dv::{Backend, DvQpCreateFlags, Gid, QpModify, QpState, link_layer, port_state, wc_status};

use super::fixture::*;
use crate::case::{Case, Check, Env, Need, check, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case { name: "fabric.ports_have_addresses", covers: &[86], needs: &[Need::Mlx5Device], run: ports_have_addresses },
    Case {
        name: "fabric.path_to_no_qp_times_out",
        covers: &[86],
        needs: &[Need::Mlx5Device],
        run: path_to_no_qp_times_out,
    },
    Case {
        name: "fabric.path_to_no_port_times_out",
        covers: &[86],
        needs: &[Need::Mlx5Device],
        run: path_to_no_port_times_out,
    },
];

fn ports_have_addresses(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _, _) = open(b, env.dev()?)?;
    let port = expect_ok("ibv_query_port(port 1)", b.query_port(ctx, 1))?;
    check_eq("port 1 state", port.state, port_state::ACTIVE)?;
    match port.link_layer {
        link_layer::ETHERNET => {
            check("a RoCE port has a GID 0", port.gid != Gid::default(), "non-zero", port.gid)?;
            check_eq("a RoCE port's LID", port.lid, 0)?;
        }
        link_layer::INFINIBAND => check("an InfiniBand port has a LID", port.lid != 0, "non-zero", port.lid)?,
        other => check("link layer", false, "ETHERNET (2) or INFINIBAND (1)", other)?,
    }
    expect_errno("ibv_query_port(port 0)", b.query_port(ctx, 0), EINVAL)?;
    if let Some(peer) = env.peer_device.clone() {
        let (pctx, _, _) = open(b, &peer)?;
        let other = expect_ok("ibv_query_port on the second device", b.query_port(pctx, 1))?;
        check(
            "two devices have different addresses",
            (other.gid, other.lid) != (port.gid, port.lid),
            "different",
            other,
        )?;
    }
    Ok(())
}

fn path_to_no_qp_times_out(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let q = expect_ok("create", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let (_buf, mr) = region(b, pd, 64, &pattern(64, 3), QP_ACCESS)?;
    let mut to = dest(b, ctx, &q)?;
    // The device's own address, and a QP number no QP has (QP numbers are 24-bit).
    to.dest_qp_num = (q.qp_num ^ 0x80_0000) & 0xff_ffff;
    for step in QpModify::connect(QP_ACCESS, to) {
        expect_ok(&format!("modify to {:?} towards no QP", step.state), b.modify_qp(&q, &step))?;
    }
    expect_ok("post an RDMA WRITE", b.post_send(&q, &[write(9, mr.rkey, mr.addr + 32, vec![sge(&mr, 0, 8)])]))?;
    err_cqe(b, &cq, 9, wc_status::RETRY_EXC_ERR)?;
    check_eq("the QP after a transport error", expect_ok("query", b.query_qp_state(&q))?, QpState::Err)?;
    Ok(())
}

fn path_to_no_port_times_out(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let q = expect_ok("create", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let peer = expect_ok("create the peer", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let (_buf, mr) = region(b, pd, 64, &pattern(64, 3), QP_ACCESS)?;
    let mut to = dest(b, ctx, &peer)?;
    // A live QP's number, at an address no port has: a link-local GID of another MAC on RoCE
    // (its MAC is the GID's own, no neighbour lookup), or a LID no port has on InfiniBand.
    if to.ah.is_global {
        to.ah.dgid = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x00, 0x5e, 0xff, 0xfe, 0x00, 0x53, 0x01]);
    } else {
        to.ah.dlid = 0xbffe;
    }
    for step in QpModify::connect(QP_ACCESS, to) {
        expect_ok(&format!("modify to {:?} towards no port", step.state), b.modify_qp(&q, &step))?;
    }
    expect_ok("post an RDMA WRITE", b.post_send(&q, &[write(9, mr.rkey, mr.addr + 32, vec![sge(&mr, 0, 8)])]))?;
    err_cqe(b, &cq, 9, wc_status::RETRY_EXC_ERR)?;
    check_eq("the QP after a transport error", expect_ok("query", b.query_qp_state(&q))?, QpState::Err)
}
