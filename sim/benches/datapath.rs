//! Data-path speed: one 1 MiB RDMA WRITE through an indirect mkey with a 16-entry list layout,
//! posted and completed, beside a plain copy of the same bytes.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mlx5_dv::{
    AccessFlags as A, Backend, DvQpInitAttr, MkeyInitAttr, MkeyInitFlags, QpCap, QpDest, QpInitAttr, QpModify,
    SendFlags, Sge, WrOp, dv_qp,
};
use mlx5_sim::Simulator;
use std::hint::black_box;

const MIB: usize = 1 << 20;
const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);

fn datapath(c: &mut Criterion) {
    let mut sim = Simulator::with_profile("cx6dx").expect("shipped profile");
    let b: &mut dyn Backend = &mut sim;
    let ctx = b.open_ibv_device("mlx5_0").expect("open");
    let pd = b.alloc_pd(ctx).expect("pd");
    let cq = b.create_cq(ctx, 256).expect("cq");
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 512 };
    let dv = DvQpInitAttr::new(mlx5_dv::DvQpCreateFlags::empty(), dv_qp::WITH_MKEY_CONFIGURE | dv_qp::WITH_MR_LIST);
    let attr = QpInitAttr::rc(pd, cq.handle, cap, Some(dv));
    let qa = b.create_qp(&attr).expect("qp");
    let qb = b.create_qp(&attr).expect("qp");
    for (q, peer) in [(&qa, &qb), (&qb, &qa)] {
        for step in QpModify::connect(ACCESS, QpDest::to(peer, &b.query_port(ctx, 1).expect("port"))) {
            b.modify_qp(q, &step).expect("connect");
        }
    }
    let src = b.alloc_buf(MIB).expect("src");
    b.write_buf(&src, 0, &vec![0xa5; MIB]).expect("fill");
    let smr = b.reg_mr(pd, src.addr, MIB as u64, A::LOCAL_WRITE).expect("src mr");
    // The target: 16 MRs of 64 KiB, spread over a 2 MiB buffer, behind one indirect mkey.
    let dst = b.alloc_buf(2 * MIB).expect("dst");
    let dmr = b.reg_mr(pd, dst.addr, 2 * MIB as u64, A::LOCAL_WRITE).expect("dst mr");
    let mkey =
        b.create_mkey(&MkeyInitAttr { pd, create_flags: MkeyInitFlags::INDIRECT, max_entries: 16 }).expect("mkey");
    let list: Vec<Sge> =
        (0..16).map(|i| Sge { addr: dmr.addr + i * 128 * 1024, length: 64 * 1024, lkey: dmr.lkey }).collect();
    let conf =
        WrOp::MrList { wr_id: 0, flags: SendFlags::SIGNALED | SendFlags::INLINE, mkey, access: ACCESS, sge: list };
    b.post_send(&qa, &[conf]).expect("configure");
    assert_eq!(b.poll_cq(&cq, 4).expect("poll").len(), 1);
    let write = [WrOp::RdmaWrite {
        wr_id: 1,
        flags: SendFlags::SIGNALED,
        rkey: mkey.rkey,
        remote_addr: 0,
        sge: vec![Sge { addr: smr.addr, length: MIB as u32, lkey: smr.lkey }],
    }];

    let mut group = c.benchmark_group("datapath");
    group.throughput(Throughput::Bytes(MIB as u64));
    group.bench_function("rdma_write_indirect_1MiB", |bench| {
        bench.iter(|| {
            b.post_send(&qa, black_box(&write)).expect("post");
            let wc = b.poll_cq(&cq, 1).expect("poll");
            assert_eq!(wc.len(), 1);
        })
    });
    let from = vec![0x5au8; MIB];
    let mut to = vec![0u8; MIB];
    group.bench_function("memcpy_1MiB", |bench| {
        bench.iter(|| {
            to.copy_from_slice(black_box(&from));
            black_box(&mut to);
        })
    });
    group.finish();
}

criterion_group!(benches, datapath);
criterion_main!(benches);
