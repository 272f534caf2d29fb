//! Signature speed: a 1 MiB RDMA WRITE through a signature mkey (memory NONE, wire T10-DIF with
//! the CRC guard, 512-byte blocks) beside crc-fast's T10-DIF CRC over the same 1 MiB as 2048
//! blocks of 512 bytes.

use crc_fast::{CrcAlgorithm, checksum};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mlx5_dv::{
    AccessFlags as A, Backend, DvQpInitAttr, MkeyInitAttr, MkeyInitFlags, QpCap, QpDest, QpInitAttr, QpModify,
    SendFlags, Sge, SigBlockAttr, SigBlockDomain, SigT10dif, WrOp, dv_qp, sig,
};
use mlx5_sim::Simulator;
use std::hint::black_box;

const MIB: usize = 1 << 20;
const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);

fn signature(c: &mut Criterion) {
    let mut sim = Simulator::with_profile("cx7").expect("shipped profile");
    let b: &mut dyn Backend = &mut sim;
    let ctx = b.open_ibv_device("mlx5_0").expect("open");
    let pd = b.alloc_pd(ctx).expect("pd");
    let cq = b.create_cq(ctx, 256).expect("cq");
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 512 };
    let attr = QpInitAttr::rc(
        pd,
        cq.handle,
        cap,
        Some(DvQpInitAttr::new(mlx5_dv::DvQpCreateFlags::empty(), dv_qp::WITH_MKEY_CONFIGURE)),
    );
    let qa = b.create_qp(&attr).expect("qp");
    let qb = b.create_qp(&attr).expect("qp");
    for (q, peer) in [(&qa, &qb), (&qb, &qa)] {
        for step in QpModify::connect(ACCESS, QpDest::to(peer, &b.query_port(ctx, 1).expect("port"))) {
            b.modify_qp(q, &step).expect("connect");
        }
    }
    let data: Vec<u8> = (0..MIB).map(|i| (i * 7) as u8).collect();
    let src = b.alloc_buf(MIB).expect("src");
    b.write_buf(&src, 0, &data).expect("fill");
    let smr = b.reg_mr(pd, src.addr, MIB as u64, A::LOCAL_WRITE).expect("src mr");
    let mkey = b
        .create_mkey(&MkeyInitAttr {
            pd,
            create_flags: MkeyInitFlags::INDIRECT | MkeyInitFlags::BLOCK_SIGNATURE,
            max_entries: 4,
        })
        .expect("mkey");
    let wire = SigBlockDomain::t10dif(
        sig::BLOCK_512,
        SigT10dif { bg_type: sig::BG_CRC, bg: 0, app_tag: 1, ref_tag: 0, flags: sig::FLAG_REF_REMAP },
    );
    let sig_attr = SigBlockAttr {
        mem: None,
        wire: Some(wire),
        flags: mlx5_dv::SigBlockAttrFlags::empty(),
        check_mask: 0xff,
        copy_mask: 0,
        comp_mask: 0,
    };
    let conf = [
        WrOp::MkeyConfigure {
            wr_id: 0,
            flags: SendFlags::SIGNALED | SendFlags::INLINE,
            mkey,
            num_setters: 3,
            conf_flags: mlx5_dv::MkeyConfFlags::empty(),
            comp_mask: 0,
        },
        WrOp::SetMkeyAccessFlags(ACCESS),
        WrOp::SetMkeyLayoutList(vec![Sge { addr: smr.addr, length: MIB as u32, lkey: smr.lkey }]),
        WrOp::SetMkeySigBlock(sig_attr),
    ];
    b.post_send(&qa, &conf).expect("configure");
    assert_eq!(b.poll_cq(&cq, 4).expect("poll").len(), 1);
    let wire_len = MIB / 512 * 520;
    let dst = b.alloc_buf(wire_len).expect("dst");
    let dmr = b.reg_mr(pd, dst.addr, wire_len as u64, ACCESS).expect("dst mr");
    let write = [WrOp::RdmaWrite {
        wr_id: 1,
        flags: SendFlags::SIGNALED,
        rkey: dmr.rkey,
        remote_addr: dmr.addr,
        sge: vec![Sge { addr: 0, length: MIB as u32, lkey: mkey.lkey }],
    }];

    let mut group = c.benchmark_group("signature");
    group.throughput(Throughput::Bytes(MIB as u64));
    group.bench_function("rdma_write_t10dif_1MiB", |bench| {
        bench.iter(|| {
            b.post_send(&qa, black_box(&write)).expect("post");
            assert_eq!(b.poll_cq(&cq, 1).expect("poll").len(), 1);
        })
    });
    group.bench_function("raw_crc16_t10dif_1MiB", |bench| {
        bench.iter(|| {
            let mut acc = 0u64;
            for block in black_box(&data).chunks(512) {
                acc ^= checksum(CrcAlgorithm::Crc16T10Dif, block);
            }
            black_box(acc)
        })
    });
    group.finish();
}

criterion_group!(benches, signature);
criterion_main!(benches);
