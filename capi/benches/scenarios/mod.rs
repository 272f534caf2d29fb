//! The C ABI's benchmark scenarios: 64-byte RDMA WRITEs over a loopback RC pair, posted and
//! polled through the trait, and through the shim's C functions as a program calls them.

use std::ffi::c_void;
use std::ptr;

use mlx5_capi::device::{ibv_get_device_list, ibv_open_device, ibv_query_gid, ibv_query_port};
use mlx5_capi::mr::{ibv_alloc_pd, ibv_reg_mr};
use mlx5_capi::queue::{ibv_create_cq, ibv_create_qp, ibv_modify_qp};
use mlx5_dv::{
    AccessFlags as A, Contexts, Cq, Memory, Qp, QpCap, QpDest, QpInitAttr, QpModify, Queues, SendFlags, Sge, WrOp,
};
use mlx5_sim::Simulator;
use rdma_sys::*;

const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);
const CAP: QpCap = QpCap { max_send_wr: 64, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };

/// Through the trait: one loopback pair, one WR per post.
#[allow(dead_code)] // each includer uses what it measures
pub struct Trait {
    sim: Simulator,
    qp: Qp,
    cq: Cq,
    wr: [WrOp; 1],
}

impl Trait {
    pub fn new() -> Self {
        let mut sim = Simulator::with_profile("cx6dx").expect("profile");
        let ctx = sim.open_ibv_device("mlx5_0").expect("open");
        let pd = sim.alloc_pd(ctx).expect("pd");
        let cq = sim.create_cq(ctx, 256).expect("cq");
        let a = sim.create_qp(&QpInitAttr::rc(pd, cq.handle, CAP, None)).expect("qp a");
        let b = sim.create_qp(&QpInitAttr::rc(pd, cq.handle, CAP, None)).expect("qp b");
        let port = sim.query_port(ctx, 1).expect("port");
        for (x, y) in [(&a, &b), (&b, &a)] {
            for step in QpModify::connect(ACCESS, QpDest::to(y, &port)) {
                sim.modify_qp(x, &step).expect("connect");
            }
        }
        let src = sim.alloc_buf(64).expect("src");
        let dst = sim.alloc_buf(64).expect("dst");
        let smr = sim.reg_mr(pd, src.addr, 64, A::LOCAL_WRITE).expect("src mr");
        let dmr = sim.reg_mr(pd, dst.addr, 64, ACCESS).expect("dst mr");
        let sge = vec![Sge { addr: smr.addr, length: 64, lkey: smr.lkey }];
        let wr = [WrOp::RdmaWrite { wr_id: 1, flags: SendFlags::SIGNALED, rkey: dmr.rkey, remote_addr: dmr.addr, sge }];
        Trait { sim, qp: a, cq, wr }
    }

    pub fn run(&mut self) {
        self.sim.post_send(&self.qp, &self.wr).expect("post");
        let wc = self.sim.poll_cq(&self.cq, 1).expect("poll");
        assert_eq!(wc.len(), 1);
    }
}

/// Run the shim's device inside the calls (`MLX5SIM_MODE=stepped`), so that a message's cost
/// is counted on the calling thread and compares with the trait's. Call before the shim's
/// first use, while the process has one thread.
pub fn stepped_shim() {
    // SAFETY: called at start-up, before any other thread reads the environment.
    unsafe { std::env::set_var("MLX5SIM_MODE", "stepped") };
}

/// Through the C ABI of the shim: the same pair on the program's own memory.
pub struct CAbi {
    pub(crate) ctx: *mut ibv_context,
    pub(crate) qp: *mut ibv_qp,
    pub(crate) cq: *mut ibv_cq,
    sge: Box<ibv_sge>,
    pub(crate) wr: Box<ibv_send_wr>,
    _bufs: Vec<Vec<u8>>,
}

impl CAbi {
    pub fn new() -> Self {
        // SAFETY: the shim's own C functions, called as a C program would.
        unsafe {
            let list = ibv_get_device_list(ptr::null_mut());
            assert!(!list.is_null() && !(*list).is_null(), "a simulated device");
            let ctx = ibv_open_device(*list);
            let pd = ibv_alloc_pd(ctx);
            let cq = ibv_create_cq(ctx, 256, ptr::null_mut(), ptr::null_mut(), 0);
            let mut qps = [ptr::null_mut(); 2];
            for q in &mut qps {
                let mut attr: ibv_qp_init_attr = std::mem::zeroed();
                attr.send_cq = cq;
                attr.recv_cq = cq;
                attr.qp_type = ibv_qp_type::IBV_QPT_RC;
                attr.cap = ibv_qp_cap {
                    max_send_wr: 64,
                    max_recv_wr: 16,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 0,
                };
                *q = ibv_create_qp(pd, &mut attr);
                assert!(!q.is_null(), "ibv_create_qp");
            }
            for (x, y) in [(qps[0], qps[1]), (qps[1], qps[0])] {
                connect(ctx, x, y);
            }
            let mut bufs = vec![vec![0xa5u8; 64], vec![0u8; 64]];
            let rw = (ACCESS.bits()) as i32;
            let smr = ibv_reg_mr(pd, bufs[0].as_mut_ptr().cast::<c_void>(), 64, rw);
            let dmr = ibv_reg_mr(pd, bufs[1].as_mut_ptr().cast::<c_void>(), 64, rw);
            assert!(!smr.is_null() && !dmr.is_null(), "ibv_reg_mr");
            let mut sge = Box::new(ibv_sge { addr: bufs[0].as_ptr() as u64, length: 64, lkey: (*smr).lkey });
            let mut wr: Box<ibv_send_wr> = Box::new(std::mem::zeroed());
            wr.wr_id = 1;
            wr.sg_list = &mut *sge;
            wr.num_sge = 1;
            wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
            wr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0;
            wr.wr.rdma = rdma_t { remote_addr: bufs[1].as_ptr() as u64, rkey: (*dmr).rkey };
            CAbi { ctx, qp: qps[0], cq, sge, wr, _bufs: bufs }
        }
    }

    pub fn run(&mut self) {
        // SAFETY: the context's ops, as the header's inline functions call them.
        unsafe {
            let ops = &(*self.ctx).ops;
            let mut bad = ptr::null_mut();
            assert_eq!(ops.post_send.expect("post_send")(self.qp, &mut *self.wr, &mut bad), 0);
            let mut wc: ibv_wc = std::mem::zeroed();
            // A free-running device completes on its own thread: poll until it has.
            let mut n = 0;
            while n == 0 {
                n = ops.poll_cq.expect("poll_cq")(self.cq, 1, &mut wc);
            }
            assert_eq!(n, 1);
        }
        let _ = &self.sge;
    }

    /// `n` WRITEs kept `depth` in flight, as perftest's bandwidth tests keep their send queue
    /// full: post while fewer than `depth` are outstanding, poll up to 16 completions at a
    /// time. `depth` at most the send queue's 64.
    #[allow(dead_code)] // the device_thread bench's; the other benches include this module too
    pub fn stream(&mut self, n: u64, depth: u64) {
        // SAFETY: the context's ops, as the header's inline functions call them.
        unsafe {
            let ops = &(*self.ctx).ops;
            let (post, poll) = (ops.post_send.expect("post_send"), ops.poll_cq.expect("poll_cq"));
            let mut wc: [ibv_wc; 16] = std::mem::zeroed();
            let (mut posted, mut done) = (0u64, 0u64);
            while done < n {
                while posted < n && posted - done < depth {
                    let mut bad = ptr::null_mut();
                    assert_eq!(post(self.qp, &mut *self.wr, &mut bad), 0);
                    posted += 1;
                }
                let got = poll(self.cq, 16, wc.as_mut_ptr());
                assert!(got >= 0, "poll_cq");
                for w in &wc[..got as usize] {
                    assert_eq!(w.status, ibv_wc_status::IBV_WC_SUCCESS);
                }
                done += got as u64;
            }
        }
    }
}

/// INIT, RTR towards `peer` (by GID on RoCE), RTS.
unsafe fn connect(ctx: *mut ibv_context, qp: *mut ibv_qp, peer: *mut ibv_qp) {
    // SAFETY: the caller's live objects.
    unsafe {
        let mut port: ibv_port_attr = std::mem::zeroed();
        assert_eq!(ibv_query_port(ctx, 1, (&mut port as *mut ibv_port_attr).cast()), 0);
        let m = |v: ibv_qp_attr_mask| v.0 as i32;
        let mut a: ibv_qp_attr = std::mem::zeroed();
        a.qp_state = ibv_qp_state::IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = ACCESS.bits();
        let init = m(ibv_qp_attr_mask::IBV_QP_STATE)
            | m(ibv_qp_attr_mask::IBV_QP_PKEY_INDEX)
            | m(ibv_qp_attr_mask::IBV_QP_PORT)
            | m(ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS);
        assert_eq!(ibv_modify_qp(qp, &mut a, init), 0, "INIT");
        let mut a: ibv_qp_attr = std::mem::zeroed();
        a.qp_state = ibv_qp_state::IBV_QPS_RTR;
        a.path_mtu = port.active_mtu;
        a.dest_qp_num = (*peer).qp_num;
        a.ah_attr.port_num = 1;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.hop_limit = 1;
        a.ah_attr.grh.sgid_index = 1;
        assert_eq!(ibv_query_gid(ctx, 1, 1, &mut a.ah_attr.grh.dgid), 0);
        let rtr = m(ibv_qp_attr_mask::IBV_QP_STATE)
            | m(ibv_qp_attr_mask::IBV_QP_AV)
            | m(ibv_qp_attr_mask::IBV_QP_PATH_MTU)
            | m(ibv_qp_attr_mask::IBV_QP_DEST_QPN)
            | m(ibv_qp_attr_mask::IBV_QP_RQ_PSN)
            | m(ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC)
            | m(ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER);
        assert_eq!(ibv_modify_qp(qp, &mut a, rtr), 0, "RTR");
        let mut a: ibv_qp_attr = std::mem::zeroed();
        a.qp_state = ibv_qp_state::IBV_QPS_RTS;
        let rts = m(ibv_qp_attr_mask::IBV_QP_STATE)
            | m(ibv_qp_attr_mask::IBV_QP_SQ_PSN)
            | m(ibv_qp_attr_mask::IBV_QP_TIMEOUT)
            | m(ibv_qp_attr_mask::IBV_QP_RETRY_CNT)
            | m(ibv_qp_attr_mask::IBV_QP_RNR_RETRY)
            | m(ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC);
        assert_eq!(ibv_modify_qp(qp, &mut a, rts), 0, "RTS");
    }
}

#[allow(dead_code)] // the device-thread bench's scenarios
mod free;
#[allow(unused_imports)]
pub use free::{IdleObjects, RawRing, cpu_seconds, eventfd_round_trips};
