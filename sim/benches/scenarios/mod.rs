//! The benchmarked operations, set up once and shared by the criterion benches and the
//! instruction-count runner (`examples/icount.rs`), so both measure the same calls.
//!
//! Each scenario owns its simulator; its methods are one operation each, through the
//! `Backend` trait.

// Each bench binary uses only its own scenarios.
#![allow(dead_code)]

use aes::Aes256;
use aes::cipher::{Block, BlockCipherEncrypt, KeyInit};
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

/// The wire signature of a [`Signature`] scenario, and the crc-fast algorithm that computes
/// the same guard (the simulator's CRC for that type and seed on the cx7 profile).
#[derive(Clone, Copy)]
pub enum WireSig {
    /// T10-DIF, CRC guard with seed 0: CRC-16/T10-DIF.
    T10dif,
    /// CRC32C, seed all ones: CRC-32/ISCSI.
    Crc32c,
    /// CRC64_XP10, seed all ones: CRC-64/NVME (the profile's default XP10 CRC).
    Crc64,
}

impl WireSig {
    fn domain(self) -> SigBlockDomain {
        match self {
            WireSig::T10dif => SigBlockDomain::t10dif(
                sig::BLOCK_512,
                SigT10dif { bg_type: sig::BG_CRC, bg: 0, app_tag: 1, ref_tag: 0, flags: sig::FLAG_REF_REMAP },
            ),
            WireSig::Crc32c => SigBlockDomain::crc(sig::BLOCK_512, sig::CRC32C, 0xffff_ffff),
            WireSig::Crc64 => SigBlockDomain::crc(sig::BLOCK_512, sig::CRC64_XP10, u64::MAX),
        }
    }

    fn algorithm(self) -> CrcAlgorithm {
        match self {
            WireSig::T10dif => CrcAlgorithm::Crc16T10Dif,
            WireSig::Crc32c => CrcAlgorithm::Crc32Iscsi,
            WireSig::Crc64 => CrcAlgorithm::Crc64Nvme,
        }
    }

    fn pi_len(self) -> usize {
        match self {
            WireSig::Crc32c => 4,
            WireSig::T10dif | WireSig::Crc64 => 8,
        }
    }
}

/// One 1 MiB RDMA WRITE through a signature mkey (memory NONE, a wire signature every 512
/// bytes) on cx7, and crc-fast's CRC of that signature over the same 1 MiB as 2048 blocks.
pub struct Signature {
    sim: Simulator,
    qp: Qp,
    cq: Cq,
    write: [WrOp; 1],
    data: Vec<u8>,
    wire_sig: WireSig,
    /// Where [`Signature::raw_crc_copy`] writes the blocks and their PI.
    wire: Vec<u8>,
}

impl Signature {
    /// The T10-DIF scenario (wire T10-DIF with the CRC guard).
    pub fn new() -> Self {
        Self::with(WireSig::T10dif)
    }

    /// The scenario with `wire_sig` on the wire; checks once that the simulator's guards are
    /// the baseline's CRCs.
    pub fn with(wire_sig: WireSig) -> Self {
        let (mut sim, _, pd, cq, qa) = loopback("cx7", dv_qp::WITH_MKEY_CONFIGURE);
        let b: &mut dyn Backend = &mut sim;
        let data: Vec<u8> = (0..MIB).map(|i| (i * 7) as u8).collect();
        let src = b.alloc_buf(MIB).expect("src");
        b.write_buf(&src, 0, &data).expect("fill");
        let smr = b.reg_mr(pd, src.addr, MIB as u64, A::LOCAL_WRITE).expect("src mr");
        let mkey = b
            .create_mkey(&MkeyInitAttr { pd, create_flags: F::INDIRECT | F::BLOCK_SIGNATURE, max_entries: 4 })
            .expect("mkey");
        let sig_attr = SigBlockAttr {
            mem: None,
            wire: Some(wire_sig.domain()),
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
        let wc = b.poll_cq(&cq, 4).expect("poll");
        assert!(wc.len() == 1 && wc[0].status == 0, "{wc:?}");
        let wire_len = MIB / 512 * (512 + wire_sig.pi_len());
        let dst = b.alloc_buf(wire_len).expect("dst");
        let dmr = b.reg_mr(pd, dst.addr, wire_len as u64, ACCESS).expect("dst mr");
        let write = [WrOp::RdmaWrite {
            wr_id: 1,
            flags: SendFlags::SIGNALED,
            rkey: dmr.rkey,
            remote_addr: dmr.addr,
            sge: vec![Sge { addr: 0, length: MIB as u32, lkey: mkey.lkey }],
        }];
        let mut s = Signature { sim, qp: qa, cq, write, data, wire_sig, wire: vec![0; wire_len] };
        s.write();
        // The baseline computes the guard the simulator put on the wire (the PI's first bytes,
        // big-endian for T10-DIF, little-endian for CRCs on cx7).
        let b: &mut dyn Backend = &mut s.sim;
        let wire = b.read_buf(&dst, 0, wire_len).expect("read");
        let stride = 512 + wire_sig.pi_len();
        for (block, out) in s.data.chunks(512).zip(wire.chunks(stride)) {
            let crc = checksum(wire_sig.algorithm(), block);
            let pi = &out[512..];
            let got = match wire_sig {
                WireSig::T10dif => u64::from(u16::from_be_bytes([pi[0], pi[1]])),
                WireSig::Crc32c => u64::from(u32::from_le_bytes([pi[0], pi[1], pi[2], pi[3]])),
                WireSig::Crc64 => u64::from_le_bytes(pi.try_into().expect("8 bytes")),
            };
            assert_eq!((&out[..512], got), (block, crc), "the simulator's guard is the baseline's CRC");
        }
        s
    }

    pub fn write(&mut self) {
        post_and_poll(&mut self.sim, &self.qp, &self.cq, &self.write);
    }

    /// crc-fast over the 1 MiB as 2048 blocks, the algorithm a constant in each loop.
    pub fn raw_crc(&self) -> u64 {
        let data = black_box(&self.data);
        black_box(match self.wire_sig {
            WireSig::T10dif => per_block(data, |b| checksum(CrcAlgorithm::Crc16T10Dif, b)),
            WireSig::Crc32c => per_block(data, |b| checksum(CrcAlgorithm::Crc32Iscsi, b)),
            WireSig::Crc64 => per_block(data, |b| checksum(CrcAlgorithm::Crc64Nvme, b)),
        })
    }
}

impl Signature {
    /// The least a copying implementation does: each 512-byte block's CRC, then the block and
    /// its PI stored at the wire's stride, in plain code without a simulator around it.
    pub fn raw_crc_copy(&mut self) -> u8 {
        let (data, wire) = (black_box(&self.data), &mut self.wire);
        match self.wire_sig {
            WireSig::T10dif => crc_copy(data, wire, |b| checksum(CrcAlgorithm::Crc16T10Dif, b)),
            WireSig::Crc32c => crc_copy(data, wire, |b| checksum(CrcAlgorithm::Crc32Iscsi, b)),
            WireSig::Crc64 => crc_copy(data, wire, |b| checksum(CrcAlgorithm::Crc64Nvme, b)),
        }
        black_box(wire[wire.len() - 1])
    }
}

/// Each 512-byte block of `data` and its `crc` (the PI's width of it) into `wire`, one block
/// and PI after another.
fn crc_copy(data: &[u8], wire: &mut [u8], crc: impl Fn(&[u8]) -> u64) {
    let stride = wire.len() / (data.len() / 512);
    for (block, out) in data.chunks(512).zip(wire.chunks_mut(stride)) {
        let pi = crc(block).to_be_bytes();
        out[..512].copy_from_slice(block);
        out[512..].copy_from_slice(&pi[8 - (stride - 512)..]);
    }
}

/// `crc` of each 512-byte block of `data`, folded into one value.
fn per_block(data: &[u8], crc: impl Fn(&[u8]) -> u64) -> u64 {
    data.chunks(512).fold(0, |acc, b| acc ^ crc(b))
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
    aes: Aes256,
    blocks: Vec<Block<Aes256>>,
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
        let aes = Aes256::new_from_slice(&KEY1).expect("key");
        let blocks = data.chunks_exact(16).map(|c| Block::<Aes256>::try_from(c).expect("16 bytes")).collect();
        Cipher { sim, qp: qa, cq, plain, signed, xts, data, raw, aes, blocks }
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

    /// AES-256 alone over the 1 MiB in place, 16-byte blocks (ECB): the ceiling of any
    /// AES-XTS-256 over the same bytes.
    pub fn raw_aes(&mut self) {
        self.aes.encrypt_blocks(black_box(&mut self.blocks));
        black_box(&self.blocks);
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
