//! Crypto speed: a 1 MiB RDMA WRITE through a crypto mkey (AES-XTS-256, 4096-byte data
//! units, memory plaintext, wire ciphertext) beside xts-mode over the same 1 MiB in the same
//! run, and a 1 MiB WRITE through a signature + crypto mkey (wire T10-DIF every 512 bytes,
//! encrypted with the data in 520-byte units).

use aes::Aes256;
use aes::cipher::KeyInit;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mlx5_dv::{
    AccessFlags as A, Backend, CryptoAttr, DekInitAttr, DvQpInitAttr, Mkey, MkeyInitAttr, MkeyInitFlags as F, QpCap,
    QpDest, QpInitAttr, QpModify, SendFlags, Sge, SigBlockAttr, SigBlockDomain, SigT10dif, WrOp, crypto, dv_qp, sig,
};
use mlx5_sim::Simulator;
use std::hint::black_box;
use xts_mode::{Xts128, get_tweak_default};

const MIB: usize = 1 << 20;
const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);
const KEY1: [u8; 32] = [0x11; 32];
const KEY2: [u8; 32] = [0x22; 32];

fn crypto(c: &mut Criterion) {
    // bf3 imports DEKs in plaintext.
    let mut sim = Simulator::with_profile("bf3").expect("shipped profile");
    let b: &mut dyn Backend = &mut sim;
    let ctx = b.open_ibv_device("mlx5_0").expect("open");
    let pd = b.alloc_pd(ctx).expect("pd");
    let cq = b.create_cq(ctx, 256).expect("cq");
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 512 };
    let dv = DvQpInitAttr::new(mlx5_dv::DvQpCreateFlags::empty(), dv_qp::WITH_MKEY_CONFIGURE);
    let attr = QpInitAttr::rc(pd, cq.handle, cap, Some(dv));
    let qa = b.create_qp(&attr).expect("qp");
    let qb = b.create_qp(&attr).expect("qp");
    for (q, peer) in [(&qa, &qb), (&qb, &qa)] {
        for step in QpModify::connect(ACCESS, QpDest::to(peer, &b.query_port(ctx, 1).expect("port"))) {
            b.modify_qp(q, &step).expect("connect");
        }
    }
    let mut key = [0u8; crypto::KEY_LEN];
    key[..32].copy_from_slice(&KEY1);
    key[32..64].copy_from_slice(&KEY2);
    let dek = b
        .dek_create(
            ctx,
            &DekInitAttr {
                key_size: crypto::KEY_SIZE_256,
                has_keytag: false,
                key_purpose: crypto::KEY_PURPOSE_AES_XTS,
                pd,
                opaque: [0; 8],
                key,
                comp_mask: crypto::DEK_INIT_ATTR_CRYPTO_LOGIN,
                crypto_login: None,
            },
        )
        .expect("dek");
    let data: Vec<u8> = (0..MIB).map(|i| (i * 7) as u8).collect();
    let src = b.alloc_buf(MIB).expect("src");
    b.write_buf(&src, 0, &data).expect("fill");
    let smr = b.reg_mr(pd, src.addr, MIB as u64, A::LOCAL_WRITE).expect("src mr");
    let crypto_attr = |dus| CryptoAttr {
        crypto_standard: crypto::STANDARD_AES_XTS,
        encrypt_on_tx: true,
        signature_crypto_order: crypto::SIGNATURE_BEFORE_CRYPTO_ON_TX,
        data_unit_size: dus,
        initial_tweak: [0; 16],
        dek: Some(dek),
        keytag: [0; 8],
        comp_mask: 0,
    };
    let mkey = |b: &mut dyn Backend, sig: Option<SigBlockAttr>, dus| -> Mkey {
        let flags = if sig.is_some() { F::INDIRECT | F::CRYPTO | F::BLOCK_SIGNATURE } else { F::INDIRECT | F::CRYPTO };
        let mkey = b.create_mkey(&MkeyInitAttr { pd, create_flags: flags, max_entries: 4 }).expect("mkey");
        let mut setters = vec![
            WrOp::SetMkeyAccessFlags(ACCESS),
            WrOp::SetMkeyLayoutList(vec![Sge { addr: smr.addr, length: MIB as u32, lkey: smr.lkey }]),
            WrOp::SetMkeyCrypto(crypto_attr(dus)),
        ];
        setters.extend(sig.map(WrOp::SetMkeySigBlock));
        let conf = WrOp::MkeyConfigure {
            wr_id: 0,
            flags: SendFlags::SIGNALED | SendFlags::INLINE,
            mkey,
            num_setters: setters.len() as u8,
            conf_flags: mlx5_dv::MkeyConfFlags::empty(),
            comp_mask: 0,
        };
        b.post_send(&qa, &[vec![conf], setters].concat()).expect("configure");
        assert_eq!(b.poll_cq(&cq, 4).expect("poll")[0].status, 0);
        mkey
    };
    let plain = mkey(b, None, sig::BLOCK_4096);
    let t10 = SigBlockDomain::t10dif(
        sig::BLOCK_512,
        SigT10dif { bg_type: sig::BG_CRC, bg: 0, app_tag: 1, ref_tag: 0, flags: sig::FLAG_REF_REMAP },
    );
    let sig_attr = SigBlockAttr { mem: None, wire: Some(t10), check_mask: 0xff, ..SigBlockAttr::default() };
    let signed = mkey(b, Some(sig_attr), sig::BLOCK_520);
    let wire_len = MIB / 512 * 520;
    let dst = b.alloc_buf(wire_len).expect("dst");
    let dmr = b.reg_mr(pd, dst.addr, wire_len as u64, ACCESS).expect("dst mr");
    let write = |lkey| {
        [WrOp::RdmaWrite {
            wr_id: 1,
            flags: SendFlags::SIGNALED,
            rkey: dmr.rkey,
            remote_addr: dmr.addr,
            sge: vec![Sge { addr: 0, length: MIB as u32, lkey }],
        }]
    };
    let (w_plain, w_signed) = (write(plain.lkey), write(signed.lkey));
    let xts = Xts128::new(Aes256::new_from_slice(&KEY1).expect("key"), Aes256::new_from_slice(&KEY2).expect("key"));
    let mut raw = data.clone();

    let mut group = c.benchmark_group("crypto");
    group.throughput(Throughput::Bytes(MIB as u64));
    group.bench_function("rdma_write_aes_xts_256_4096_1MiB", |bench| {
        bench.iter(|| {
            b.post_send(&qa, black_box(&w_plain)).expect("post");
            assert_eq!(b.poll_cq(&cq, 1).expect("poll")[0].status, 0);
        })
    });
    group.bench_function("raw_xts_mode_aes_256_4096_1MiB", |bench| {
        bench.iter(|| {
            raw.copy_from_slice(&data);
            xts.encrypt_area(black_box(&mut raw), 4096, 0, get_tweak_default);
            black_box(&raw);
        })
    });
    group.bench_function("rdma_write_t10dif_then_aes_xts_256_520_1MiB", |bench| {
        bench.iter(|| {
            b.post_send(&qa, black_box(&w_signed)).expect("post");
            assert_eq!(b.poll_cq(&cq, 1).expect("poll")[0].status, 0);
        })
    });
    group.finish();
}

criterion_group!(benches, crypto);
criterion_main!(benches);
