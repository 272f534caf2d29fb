//! The benchmarked operations, set up once and shared by the criterion benches and the
//! instruction-count runner (`examples/icount.rs`), so both measure the same calls.
//!
//! Each scenario owns its simulator; its methods are one operation each, through the
//! `Backend` trait.

// Each bench binary uses only its own scenarios.
#![allow(dead_code)]

use aes::Aes256;
use aes::cipher::KeyInit;
use crc_fast::{CrcAlgorithm, checksum};
use mlx5_dv::{
    AccessFlags as A, Backend, ContextHandle, Cq, CryptoAttr, DekInitAttr, DvQpInitAttr, Mkey, MkeyInitAttr,
    MkeyInitFlags as F, PdHandle, Qp, QpCap, QpDest, QpInitAttr, QpModify, SendFlags, Sge, SigBlockAttr,
    SigBlockDomain, SigT10dif, WrOp, crypto, dv_qp, sig,
};
use mlx5_sim::Simulator;
use std::hint::black_box;
use xts_mode::{Xts128, get_tweak_default};

pub const MIB: usize = 1 << 20;
const ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);
const KEY1: [u8; 32] = [0x11; 32];
const KEY2: [u8; 32] = [0x22; 32];

/// A simulator of `profile` with an RC QP pair connected in loopback on one CQ.
fn loopback(profile: &str, ops: mlx5_dv::DvSendOpsFlags) -> (Simulator, ContextHandle, PdHandle, Cq, Qp) {
    let mut sim = Simulator::with_profile(profile).expect("shipped profile");
    let b: &mut dyn Backend = &mut sim;
    let ctx = b.open_ibv_device("mlx5_0").expect("open");
    let pd = b.alloc_pd(ctx).expect("pd");
    let cq = b.create_cq(ctx, 256).expect("cq");
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 512 };
    let dv = DvQpInitAttr::new(mlx5_dv::DvQpCreateFlags::empty(), ops);
    let attr = QpInitAttr::rc(pd, cq.handle, cap, Some(dv));
    let qa = b.create_qp(&attr).expect("qp");
    let qb = b.create_qp(&attr).expect("qp");
    for (q, peer) in [(&qa, &qb), (&qb, &qa)] {
        for step in QpModify::connect(ACCESS, QpDest::to(peer, &b.query_port(ctx, 1).expect("port"))) {
            b.modify_qp(q, &step).expect("connect");
        }
    }
    (sim, ctx, pd, cq, qa)
}

/// Post one chain and poll until all of it completed, checking each completion.
fn post_and_poll(b: &mut dyn Backend, qp: &Qp, cq: &Cq, chain: &[WrOp]) {
    post_and_poll_into(b, qp, cq, chain, &mut [mlx5_dv::Wc::default(); 32]);
}

/// [`post_and_poll`] into the caller's array, as a C program hands `ibv_poll_cq` one.
fn post_and_poll_into(b: &mut dyn Backend, qp: &Qp, cq: &Cq, chain: &[WrOp], wc: &mut [mlx5_dv::Wc; 32]) {
    b.post_send(qp, black_box(chain)).expect("post");
    let mut left = chain.len();
    while left > 0 {
        let n = b.poll_cq_into(cq, &mut wc[..left.min(32)]).expect("poll");
        let got = &wc[..n];
        assert!(n > 0 && got.iter().all(|w| w.status == 0), "{got:?}");
        left -= n;
    }
}

/// Message rate: 64-byte RDMA WRITEs over a loopback RC pair, `per_chain` signaled WRs per
/// `post_send`, then polled.
pub struct MsgRate {
    sim: Simulator,
    qp: Qp,
    cq: Cq,
    chain: Vec<WrOp>,
    wc: [mlx5_dv::Wc; 32],
}

impl MsgRate {
    pub fn new(per_chain: usize) -> Self {
        let (mut sim, _, pd, cq, qp) = loopback("cx6dx", mlx5_dv::DvSendOpsFlags::empty());
        let b: &mut dyn Backend = &mut sim;
        let len = per_chain * 64;
        let src = b.alloc_buf(len).expect("src");
        b.write_buf(&src, 0, &vec![0xa5; len]).expect("fill");
        let smr = b.reg_mr(pd, src.addr, len as u64, A::LOCAL_WRITE).expect("src mr");
        let dst = b.alloc_buf(len).expect("dst");
        let dmr = b.reg_mr(pd, dst.addr, len as u64, ACCESS).expect("dst mr");
        let chain = (0..per_chain as u64)
            .map(|i| WrOp::RdmaWrite {
                wr_id: i,
                flags: SendFlags::SIGNALED,
                rkey: dmr.rkey,
                remote_addr: dmr.addr + i * 64,
                sge: vec![Sge { addr: smr.addr + i * 64, length: 64, lkey: smr.lkey }],
            })
            .collect();
        MsgRate { sim, qp, cq, chain, wc: [mlx5_dv::Wc::default(); 32] }
    }

    /// WRs per operation.
    pub fn per_chain(&self) -> usize {
        self.chain.len()
    }

    /// Post the chain and poll its completions.
    pub fn run(&mut self) {
        post_and_poll_into(&mut self.sim, &self.qp, &self.cq, &self.chain, &mut self.wc);
    }
}

/// One 1 MiB RDMA WRITE through an indirect mkey with a 16-entry list layout, and a plain
/// copy of the same bytes.
pub struct Datapath {
    sim: Simulator,
    qp: Qp,
    cq: Cq,
    write: [WrOp; 1],
    from: Vec<u8>,
    to: Vec<u8>,
}

impl Datapath {
    pub fn new() -> Self {
        let (mut sim, _, pd, cq, qa) = loopback("cx6dx", dv_qp::WITH_MKEY_CONFIGURE | dv_qp::WITH_MR_LIST);
        let b: &mut dyn Backend = &mut sim;
        let src = b.alloc_buf(MIB).expect("src");
        b.write_buf(&src, 0, &vec![0xa5; MIB]).expect("fill");
        let smr = b.reg_mr(pd, src.addr, MIB as u64, A::LOCAL_WRITE).expect("src mr");
        // The target: 16 MRs of 64 KiB, spread over a 2 MiB buffer, behind one indirect mkey.
        let dst = b.alloc_buf(2 * MIB).expect("dst");
        let dmr = b.reg_mr(pd, dst.addr, 2 * MIB as u64, A::LOCAL_WRITE).expect("dst mr");
        let mkey = b.create_mkey(&MkeyInitAttr { pd, create_flags: F::INDIRECT, max_entries: 16 }).expect("mkey");
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
        Datapath { sim, qp: qa, cq, write, from: vec![0x5a; MIB], to: vec![0; MIB] }
    }

    pub fn write(&mut self) {
        post_and_poll(&mut self.sim, &self.qp, &self.cq, &self.write);
    }

    pub fn memcpy(&mut self) {
        self.to.copy_from_slice(black_box(&self.from));
        black_box(&mut self.to);
    }
}

/// One 1 MiB RDMA WRITE through a signature mkey (memory NONE, wire T10-DIF with the CRC
/// guard, 512-byte blocks), and crc-fast's T10-DIF CRC over the same 1 MiB as 2048 blocks.
pub struct Signature {
    sim: Simulator,
    qp: Qp,
    cq: Cq,
    write: [WrOp; 1],
    data: Vec<u8>,
}

impl Signature {
    pub fn new() -> Self {
        let (mut sim, _, pd, cq, qa) = loopback("cx7", dv_qp::WITH_MKEY_CONFIGURE);
        let b: &mut dyn Backend = &mut sim;
        let data: Vec<u8> = (0..MIB).map(|i| (i * 7) as u8).collect();
        let src = b.alloc_buf(MIB).expect("src");
        b.write_buf(&src, 0, &data).expect("fill");
        let smr = b.reg_mr(pd, src.addr, MIB as u64, A::LOCAL_WRITE).expect("src mr");
        let mkey = b
            .create_mkey(&MkeyInitAttr { pd, create_flags: F::INDIRECT | F::BLOCK_SIGNATURE, max_entries: 4 })
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
        Signature { sim, qp: qa, cq, write, data }
    }

    pub fn write(&mut self) {
        post_and_poll(&mut self.sim, &self.qp, &self.cq, &self.write);
    }

    pub fn raw_crc(&self) -> u64 {
        let mut acc = 0u64;
        for block in black_box(&self.data).chunks(512) {
            acc ^= checksum(CrcAlgorithm::Crc16T10Dif, block);
        }
        black_box(acc)
    }
}

/// A 1 MiB RDMA WRITE through a crypto mkey (AES-XTS-256, 4096-byte data units, memory
/// plaintext, wire ciphertext) and xts-mode over the same 1 MiB; and a 1 MiB WRITE through a
/// signature + crypto mkey (wire T10-DIF every 512 bytes, encrypted in 520-byte units).
pub struct Cipher {
    sim: Simulator,
    qp: Qp,
    cq: Cq,
    plain: [WrOp; 1],
    signed: [WrOp; 1],
    xts: Xts128<Aes256>,
    data: Vec<u8>,
    raw: Vec<u8>,
}

impl Cipher {
    pub fn new() -> Self {
        // bf3 imports DEKs in plaintext.
        let (mut sim, ctx, pd, cq, qa) = loopback("bf3", dv_qp::WITH_MKEY_CONFIGURE);
        let b: &mut dyn Backend = &mut sim;
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
            let flags =
                if sig.is_some() { F::INDIRECT | F::CRYPTO | F::BLOCK_SIGNATURE } else { F::INDIRECT | F::CRYPTO };
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
        let (plain, signed) = (write(plain.lkey), write(signed.lkey));
        let xts = Xts128::new(Aes256::new_from_slice(&KEY1).expect("key"), Aes256::new_from_slice(&KEY2).expect("key"));
        let raw = data.clone();
        Cipher { sim, qp: qa, cq, plain, signed, xts, data, raw }
    }

    pub fn write_plain(&mut self) {
        post_and_poll(&mut self.sim, &self.qp, &self.cq, &self.plain);
    }

    pub fn write_signed(&mut self) {
        post_and_poll(&mut self.sim, &self.qp, &self.cq, &self.signed);
    }

    pub fn raw_xts(&mut self) {
        self.raw.copy_from_slice(&self.data);
        self.xts.encrypt_area(black_box(&mut self.raw), 4096, 0, get_tweak_default);
        black_box(&self.raw);
    }
}

/// mkey create + destroy through the trait, the way an application pays for it (provider
/// checks, two PSVs, CREATE_MKEY, and the three destroys).
pub struct ControlPath {
    sim: Simulator,
    attr: MkeyInitAttr,
}

impl ControlPath {
    pub fn new() -> Self {
        let mut sim = Simulator::with_profile("cx6dx").expect("shipped profile");
        let b: &mut dyn Backend = &mut sim;
        let ctx = b.open_device("mlx5_0", None).expect("open");
        let pd = b.alloc_pd(ctx).expect("pd");
        let attr = MkeyInitAttr { pd, create_flags: F::BLOCK_SIGNATURE | F::INDIRECT, max_entries: 16 };
        ControlPath { sim, attr }
    }

    pub fn create_destroy(&mut self) {
        let b: &mut dyn Backend = &mut self.sim;
        let mkey = b.create_mkey(black_box(&self.attr)).expect("create");
        b.destroy_mkey(black_box(&mkey)).expect("destroy");
    }
}
