//! Fixtures shared by the integration tests that need them.

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

use mlx5_dv::{AccessFlags as A, Backend, ContextHandle, Cq, Mr, Qp, QpCap, QpDest, QpInitAttr, QpModify};
use mlx5_sim::Simulator;

/// Access a loopback QP grants to incoming RDMA, and its buffer's MR.
pub const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);

/// A stepped cx6dx with a loopback RC pair on `mlx5_0`: `tx` sends on `scq`, `rx` receives on
/// `rcq`, and `mr` covers a buffer for both.
pub struct Loopback {
    pub sim: Simulator,
    pub ctx: ContextHandle,
    pub tx: Qp,
    pub rx: Qp,
    pub scq: Cq,
    pub rcq: Cq,
    pub mr: Mr,
}

/// [`Loopback`] with CQs of `cq_depth` entries, `wrs` WRs each way, and a `buf_len`-byte buffer.
pub fn loopback(cq_depth: u32, wrs: u32, buf_len: usize) -> Loopback {
    let mut sim = Simulator::with_profile("cx6dx").expect("shipped profile");
    let b: &mut dyn Backend = &mut sim;
    let ctx = b.open_ibv_device("mlx5_0").expect("open");
    let pd = b.alloc_pd(ctx).expect("pd");
    let scq = b.create_cq(ctx, cq_depth).expect("send cq");
    let rcq = b.create_cq(ctx, cq_depth).expect("recv cq");
    let cap = QpCap { max_send_wr: wrs, max_recv_wr: wrs, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let tx = b.create_qp(&QpInitAttr::rc(pd, scq.handle, cap, None)).expect("tx");
    let rx = b.create_qp(&QpInitAttr::rc(pd, rcq.handle, cap, None)).expect("rx");
    let port = b.query_port(ctx, 1).expect("port");
    for (q, peer) in [(&tx, &rx), (&rx, &tx)] {
        for step in QpModify::connect(ACCESS, QpDest::to(peer, &port)) {
            b.modify_qp(q, &step).expect("connect");
        }
    }
    let buf = b.alloc_buf(buf_len).expect("buf");
    let mr = b.reg_mr(pd, buf.addr, buf_len as u64, ACCESS).expect("mr");
    Loopback { sim, ctx, tx, rx, scq, rcq, mr }
}
