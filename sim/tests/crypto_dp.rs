//! AES-XTS on the data path: the IEEE 1619-2007 vectors through a crypto mkey, random data,
//! data units, tweaks and keys against xts-mode used directly, crypto with signatures in
//! both orders (round trips, and flipped bits in memory reported by the memory domain), and
//! the crypto failures that complete with the profile's error CQE.

use aes::cipher::KeyInit;
use aes::{Aes128, Aes256};
use mlx5_dv::prelude::*;
use mlx5_dv::{
    AccessFlags as A, CryptoAttr, DekHandle, DekInitAttr, DvQpInitAttr, FaultRule, Mkey, MkeyErr, MkeyInitAttr,
    MkeyInitFlags as F, QpCap, QpDest, QpInitAttr, QpModify, SendFlags, Sge, SigBlockAttr, SigBlockDomain, SigT10dif,
    WrOp, crypto, dv_qp, prm, sig,
};
use mlx5_sim::{ShippedProfiles, Simulator};
use proptest::prelude::*;
use xts_mode::{Xts128, get_tweak_default};

fn hex(text: &str) -> Vec<u8> {
    (0..text.len() / 2).map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap()).collect()
}

/// A loopback pair: the client posts, the server owns the crypto mkeys.
struct Rig {
    sim: Simulator,
    ctx: mlx5_dv::ContextHandle,
    client: mlx5_dv::Qp,
    server: mlx5_dv::Qp,
    cq: mlx5_dv::Cq,
    pd: mlx5_dv::PdHandle,
}

fn rig(profile: &str) -> Rig {
    let mut sim = Simulator::with_profile(profile).unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let cq = sim.create_cq(ctx, 1024).unwrap();
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 512 };
    let dv = DvQpInitAttr::new(mlx5_dv::DvQpCreateFlags::empty(), dv_qp::WITH_MKEY_CONFIGURE);
    let attr = QpInitAttr::rc(pd, cq.handle, cap, Some(dv));
    let client = sim.create_qp(&attr).unwrap();
    let server = sim.create_qp(&attr).unwrap();
    let access = A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ;
    for (q, p) in [(&client, &server), (&server, &client)] {
        for step in QpModify::connect(access, QpDest::to(p, &sim.query_port(ctx, 1).unwrap())) {
            sim.modify_qp(q, &step).unwrap();
        }
    }
    Rig { sim, ctx, client, server, cq, pd }
}

/// A DEK in the device's import mode: plaintext, or wrapped under a fresh login object.
fn dek(r: &mut Rig, key1: &[u8], key2: &[u8], keytag: Option<[u8; 8]>) -> DekHandle {
    let mut key = [0u8; crypto::KEY_LEN];
    let mut plain: Vec<u8> = key1.iter().chain(key2).chain(keytag.iter().flatten()).copied().collect();
    let mut login = None;
    if r.sim.profile().crypto_cap.wrapped_crypto_operational {
        // Wrapped import under a login with the profile's published test credential.
        use mlx5_dv::profile::{TEST_CREDENTIAL_ID, TEST_IMPORT_KEK_ID, test_credential, test_import_kek};
        let credential = mlx5_sim::crypto::wrap_key(&test_import_kek(), &test_credential()).unwrap();
        let l = mlx5_dv::CryptoLoginAttrEx {
            credential_id: TEST_CREDENTIAL_ID,
            import_kek_id: TEST_IMPORT_KEK_ID,
            credential,
            comp_mask: 0,
        };
        login = Some(r.sim.crypto_login_create(r.ctx, &l).unwrap());
        plain = mlx5_sim::crypto::wrap_key(&test_import_kek(), &plain).unwrap();
    }
    key[..plain.len()].copy_from_slice(&plain);
    let attr = DekInitAttr {
        key_size: if key1.len() == 16 { crypto::KEY_SIZE_128 } else { crypto::KEY_SIZE_256 },
        has_keytag: keytag.is_some(),
        key_purpose: crypto::KEY_PURPOSE_AES_XTS,
        pd: r.pd,
        opaque: [0; 8],
        key,
        comp_mask: crypto::DEK_INIT_ATTR_CRYPTO_LOGIN,
        crypto_login: login,
    };
    r.sim.dek_create(r.ctx, &attr).unwrap()
}

fn attr(dek: DekHandle, encrypt_on_tx: bool, order: u32, dus: u32, tweak: [u8; 16]) -> CryptoAttr {
    CryptoAttr {
        crypto_standard: crypto::STANDARD_AES_XTS,
        encrypt_on_tx,
        signature_crypto_order: order,
        data_unit_size: dus,
        initial_tweak: tweak,
        dek: Some(dek),
        keytag: [0; 8],
        comp_mask: 0,
    }
}

/// A buffer and an MR over it with every access.
fn region(r: &mut Rig, data: &[u8]) -> (mlx5_dv::Buf, mlx5_dv::Mr) {
    let buf = r.sim.alloc_buf(data.len().max(1)).unwrap();
    r.sim.write_buf(&buf, 0, data).unwrap();
    let mr = r.sim.reg_mr(r.pd, buf.addr, buf.len as u64, A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ).unwrap();
    (buf, mr)
}

/// A crypto (and signature, if `sig`) mkey over `mr` configured on the server.
fn crypto_mkey(r: &mut Rig, mr: &mlx5_dv::Mr, a: Option<CryptoAttr>, sig: Option<SigBlockAttr>) -> Mkey {
    let flags = if sig.is_some() { F::INDIRECT | F::CRYPTO | F::BLOCK_SIGNATURE } else { F::INDIRECT | F::CRYPTO };
    let mk = r.sim.create_mkey(&MkeyInitAttr { pd: r.pd, create_flags: flags, max_entries: 4 }).unwrap();
    let mut setters = vec![
        WrOp::SetMkeyAccessFlags(A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ),
        WrOp::SetMkeyLayoutList(vec![Sge { addr: mr.addr, length: mr.length as u32, lkey: mr.lkey }]),
    ];
    setters.extend(sig.map(WrOp::SetMkeySigBlock));
    setters.extend(a.map(WrOp::SetMkeyCrypto));
    let conf = WrOp::MkeyConfigure {
        wr_id: 9,
        flags: SendFlags::SIGNALED | SendFlags::INLINE,
        mkey: mk,
        num_setters: setters.len() as u8,
        conf_flags: mlx5_dv::MkeyConfFlags::empty(),
        comp_mask: 0,
    };
    r.sim.post_send(&r.server, &[vec![conf], setters].concat()).unwrap();
    let wcs = r.sim.poll_cq(&r.cq, 4).unwrap();
    assert_eq!((wcs.len(), wcs[0].status), (1, 0), "the configure completes");
    mk
}

/// Post one WR on the client and return its completion.
fn post(r: &mut Rig, op: WrOp) -> mlx5_dv::Wc {
    r.sim.post_send(&r.client, &[op]).unwrap();
    let mut wcs = r.sim.poll_cq(&r.cq, 8).unwrap();
    assert!(!wcs.is_empty(), "a completion");
    wcs.remove(0)
}

fn write(rkey: u32, raddr: u64, sge: Sge) -> WrOp {
    WrOp::RdmaWrite { wr_id: 1, flags: SendFlags::SIGNALED, rkey, remote_addr: raddr, sge: vec![sge] }
}

fn read(rkey: u32, raddr: u64, sge: Sge) -> WrOp {
    WrOp::RdmaRead { wr_id: 2, flags: SendFlags::SIGNALED, rkey, remote_addr: raddr, sge: vec![sge] }
}

const V10_KEY1: &str = "2718281828459045235360287471352662497757247093699959574966967627";
const V10_KEY2: &str = "3141592653589793238462643383279502884197169399375105820974944592";
/// IEEE 1619-2007 vector 10's ciphertext: its first and last 16 bytes (the whole is checked
/// against xts-mode in `sim/src/crypto/tests.rs`).
const V10_HEAD: &str = "1c3b3a102f770386e4836c99e370cf9b";
const V10_TAIL: &str = "b9c6e693e148c151";

/// (key1, key2, data unit number, plaintext, ciphertext): IEEE 1619-2007 vectors 1-3.
const AES128: &[(&str, &str, u128, &str, &str)] = &[
    (
        "00000000000000000000000000000000",
        "00000000000000000000000000000000",
        0,
        "0000000000000000000000000000000000000000000000000000000000000000",
        "917cf69ebd68b2ec9b9fe9a3eadda692cd43d2f59598ed858c02c2652fbf922e",
    ),
    (
        "11111111111111111111111111111111",
        "22222222222222222222222222222222",
        0x33_3333_3333,
        "4444444444444444444444444444444444444444444444444444444444444444",
        "c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0",
    ),
    (
        "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0",
        "22222222222222222222222222222222",
        0x33_3333_3333,
        "4444444444444444444444444444444444444444444444444444444444444444",
        "af85336b597afc1a900b2eb21ec949d292df4c047e0b21532186a5971a227a89",
    ),
];

/// key1, key2, data unit number, plaintext, ciphertext (if whole).
type Vector = (Vec<u8>, Vec<u8>, u128, Vec<u8>, Option<Vec<u8>>);

/// Data written through a crypto mkey lands as the vector's ciphertext (memory encrypted,
/// wire plaintext: RX encrypts), a READ through it decrypts back, and a WRITE from it as the
/// local key with `encrypt_on_tx` puts the ciphertext on the wire.
#[test]
fn ieee_1619_vectors_pass_through_the_data_path() {
    let ramp: Vec<u8> = (0..512).map(|i| i as u8).collect();
    let mut vectors: Vec<Vector> =
        AES128.iter().map(|(k1, k2, n, p, c)| (hex(k1), hex(k2), *n, hex(p), Some(hex(c)))).collect();
    vectors.push((hex(V10_KEY1), hex(V10_KEY2), 0xff, ramp, None));
    for profile in ["bf3", "cx6dx-single-block"] {
        for (k1, k2, n, plain, cipher) in &vectors {
            let mut r = rig(profile);
            let d = dek(&mut r, k1, k2, None);
            let len = plain.len();
            let (mbuf, mmr) = region(&mut r, &vec![0; len]);
            let mk = crypto_mkey(&mut r, &mmr, Some(attr(d, false, 0, sig::BLOCK_512, n.to_le_bytes())), None);
            let (_src, smr) = region(&mut r, plain);
            let wc = post(&mut r, write(mk.rkey, 0, Sge { addr: smr.addr, length: len as u32, lkey: smr.lkey }));
            assert_eq!(wc.status, 0, "{profile}: the WRITE completes");
            let stored = r.sim.read_buf(&mbuf, 0, len).unwrap();
            match cipher {
                Some(c) => assert_eq!(&stored, c, "{profile}: the vector's ciphertext"),
                None => {
                    assert_eq!(&stored[..16], hex(V10_HEAD).as_slice(), "{profile}: vector 10");
                    assert_eq!(&stored[len - 8..], hex(V10_TAIL).as_slice(), "{profile}: vector 10");
                }
            }
            let (back, bmr) = region(&mut r, &vec![0; len]);
            let wc = post(&mut r, read(mk.rkey, 0, Sge { addr: bmr.addr, length: len as u32, lkey: bmr.lkey }));
            assert_eq!(wc.status, 0);
            assert_eq!(&r.sim.read_buf(&back, 0, len).unwrap(), plain, "{profile}: decrypts back");
            // The other direction: plaintext memory, ciphertext on the wire (TX encrypts).
            let (_pbuf, pmr) = region(&mut r, plain);
            let enc = crypto_mkey(&mut r, &pmr, Some(attr(d, true, 0, sig::BLOCK_512, n.to_le_bytes())), None);
            let (wire, wmr) = region(&mut r, &vec![0; len]);
            let wc = post(&mut r, write(wmr.rkey, wmr.addr, Sge { addr: 0, length: len as u32, lkey: enc.lkey }));
            assert_eq!(wc.status, 0);
            assert_eq!(r.sim.read_buf(&wire, 0, len).unwrap(), stored, "{profile}: TX encrypts alike");
        }
    }
}

/// The reference: xts-mode over each data unit, the tweak counting up from the initial one.
fn reference(k1: &[u8], k2: &[u8], dus: usize, tweak: u128, encrypt: bool, data: &mut [u8]) {
    let t = |i: usize| get_tweak_default(tweak.wrapping_add(i as u128));
    if k1.len() == 16 {
        let x = Xts128::new(Aes128::new_from_slice(k1).unwrap(), Aes128::new_from_slice(k2).unwrap());
        for (i, u) in data.chunks_mut(dus).enumerate() {
            if encrypt { x.encrypt_sector(u, t(i)) } else { x.decrypt_sector(u, t(i)) }
        }
    } else {
        let x = Xts128::new(Aes256::new_from_slice(k1).unwrap(), Aes256::new_from_slice(k2).unwrap());
        for (i, u) in data.chunks_mut(dus).enumerate() {
            if encrypt { x.encrypt_sector(u, t(i)) } else { x.decrypt_sector(u, t(i)) }
        }
    }
}

const UNITS: [(u32, usize); 5] = [
    (sig::BLOCK_512, 512),
    (sig::BLOCK_520, 520),
    (sig::BLOCK_4048, 4048),
    (sig::BLOCK_4096, 4096),
    (sig::BLOCK_4160, 4160),
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random data, data unit, tweak and key: what lands in memory through a crypto mkey is
    /// xts-mode's output, and a READ gives the data back; a length the job-size rule
    /// refuses completes in error and places nothing.
    #[test]
    fn a_crypto_mkey_equals_xts_mode(
        unit in 0usize..5, units in 0usize..3, tail in 0usize..4, odd in 0usize..3,
        tweak in any::<u128>(), wide in any::<bool>(), seed in any::<u8>(), encrypt_on_tx in any::<bool>(),
    ) {
        let (dus_sel, dus) = UNITS[unit];
        let len = (units * dus + tail * 16 + odd).max(16);
        let klen = if wide { 32 } else { 16 };
        let k1: Vec<u8> = (0..klen).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
        let k2: Vec<u8> = (0..klen).map(|i| (i as u8).wrapping_mul(11).wrapping_add(seed)).collect();
        let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
        let mut r = rig("bf3");
        let d = dek(&mut r, &k1, &k2, None);
        let (mbuf, mmr) = region(&mut r, &vec![0; len]);
        let mk = crypto_mkey(&mut r, &mmr, Some(attr(d, encrypt_on_tx, 0, dus_sel, tweak.to_le_bytes())), None);
        let (_s, smr) = region(&mut r, &data);
        let wc = post(&mut r, write(mk.rkey, 0, Sge { addr: smr.addr, length: len as u32, lkey: smr.lkey }));
        let valid = mlx5_sim::crypto::job_size_valid(len, dus);
        prop_assert_eq!(wc.status == 0, valid, "len {} dus {}", len, dus);
        let stored = r.sim.read_buf(&mbuf, 0, len).unwrap();
        if !valid {
            prop_assert_eq!(stored, vec![0; len], "nothing placed");
            return Ok(());
        }
        // RX through the mkey: encrypt_on_tx decrypts the wire bytes, else encrypts them.
        let mut want = data.clone();
        reference(&k1, &k2, dus, tweak, !encrypt_on_tx, &mut want);
        prop_assert_eq!(&stored, &want);
        let (back, bmr) = region(&mut r, &vec![0; len]);
        let wc = post(&mut r, read(mk.rkey, 0, Sge { addr: bmr.addr, length: len as u32, lkey: bmr.lkey }));
        prop_assert_eq!(wc.status, 0);
        prop_assert_eq!(r.sim.read_buf(&back, 0, len).unwrap(), data);
    }
}

fn t10(bs: u32) -> SigBlockDomain {
    SigBlockDomain::t10dif(
        bs,
        SigT10dif { bg_type: sig::BG_CRC, bg: 0xffff, app_tag: 0x1234, ref_tag: 7, ..Default::default() },
    )
}

fn domain_of(i: u8) -> Option<SigBlockDomain> {
    match i {
        1 => Some(t10(sig::BLOCK_512)),
        2 => Some(SigBlockDomain::crc(sig::BLOCK_512, sig::CRC32C, 0xffff_ffff)),
        3 => Some(SigBlockDomain::crc(sig::BLOCK_512, sig::CRC64_XP10, u64::MAX)),
        _ => None,
    }
}

fn pi_len(d: &Option<SigBlockDomain>) -> usize {
    match d {
        None => 0,
        Some(d) if d.sig_type == sig::TYPE_CRC && d.crc.crc_type != sig::CRC64_XP10 => 4,
        Some(_) => 8,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random crypto + signature configurations (both orders, both directions, every domain
    /// combination but none): wire data written into the mkey reads back the same; the job
    /// is the byte count on the cipher's side; a flipped bit in memory (ciphertext or PI) is
    /// reported by mkey_check exactly when the memory domain has a signature.
    #[test]
    fn crypto_with_signature_round_trips_and_reports_flips(
        mem in 0u8..4, wire in 0u8..4, before in any::<bool>(), encrypt_on_tx in any::<bool>(),
        unit in 0usize..3, blocks in 1usize..5, seed in any::<u8>(), flip in any::<prop::sample::Index>(), bit in 0u8..8,
    ) {
        let (mem, wire) = (domain_of(mem), domain_of(wire));
        prop_assume!(mem.is_some() || wire.is_some());
        let order = if before { crypto::SIGNATURE_BEFORE_CRYPTO_ON_TX } else { crypto::SIGNATURE_AFTER_CRYPTO_ON_TX };
        let (dus_sel, dus) = [UNITS[0], UNITS[1], UNITS[3]][unit];
        let mut r = rig("bf3");
        let d = dek(&mut r, &[3; 32], &[5; 32], None);
        let (mstride, wstride) = (512 + pi_len(&mem), 512 + pi_len(&wire));
        // The wire bytes: data with the wire PI, made by a signature-only mkey on the client.
        let data: Vec<u8> = (0..512 * blocks).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)).collect();
        let sig = SigBlockAttr { mem, wire, check_mask: 0xff, ..SigBlockAttr::default() };
        let (mbuf, mmr) = region(&mut r, &vec![0; mstride * blocks]);
        let both = mem.is_some() && wire.is_some();
        let raw = before != encrypt_on_tx;
        let mk = r.sim.create_mkey(&MkeyInitAttr { pd: r.pd, create_flags: F::INDIRECT | F::CRYPTO | F::BLOCK_SIGNATURE, max_entries: 4 }).unwrap();
        let setters = vec![
            WrOp::SetMkeyAccessFlags(A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ),
            WrOp::SetMkeyLayoutList(vec![Sge { addr: mmr.addr, length: mmr.length as u32, lkey: mmr.lkey }]),
            WrOp::SetMkeySigBlock(sig),
            WrOp::SetMkeyCrypto(attr(d, encrypt_on_tx, order, dus_sel, [9; 16])),
        ];
        let conf = WrOp::MkeyConfigure { wr_id: 9, flags: SendFlags::SIGNALED | SendFlags::INLINE, mkey: mk, num_setters: 4, conf_flags: mlx5_dv::MkeyConfFlags::empty(), comp_mask: 0 };
        let posted = r.sim.post_send(&r.server, &[vec![conf], setters].concat());
        if raw && both {
            prop_assert_eq!(posted.err().map(|e| e.errno()), Some(mlx5_dv::errno::EINVAL), "RAW order with both domains");
            return Ok(());
        }
        prop_assert!(posted.is_ok());
        prop_assert_eq!(r.sim.poll_cq(&r.cq, 4).unwrap()[0].status, 0);
        // The wire form, made by a client mkey with the same crypto and only the wire domain.
        let (_s, smr) = region(&mut r, &data);
        let client_sig = wire.map(|w| SigBlockAttr { mem: None, wire: Some(w), check_mask: 0xff, ..SigBlockAttr::default() });
        let cm = crypto_mkey(&mut r, &smr, Some(attr(d, encrypt_on_tx, order, dus_sel, [9; 16])), client_sig);
        let (wbuf, wmr) = region(&mut r, &vec![0; wstride * blocks]);
        let wc = post(&mut r, write(wmr.rkey, wmr.addr, Sge { addr: 0, length: data.len() as u32, lkey: cm.lkey }));
        let client_job = if wire.is_some() && before { wstride * blocks } else { data.len() };
        if !mlx5_sim::crypto::job_size_valid(client_job, dus) {
            prop_assert!(wc.status != 0, "client job {} dus {}", client_job, dus);
            return Ok(());
        }
        prop_assert_eq!(wc.status, 0);
        let wire_form = r.sim.read_buf(&wbuf, 0, wstride * blocks).unwrap();
        let wc = post(&mut r, write(mk.rkey, 0, Sge { addr: wmr.addr, length: wire_form.len() as u32, lkey: wmr.lkey }));
        let job = if before { wstride * blocks } else { mstride * blocks };
        let valid = mlx5_sim::crypto::job_size_valid(job, dus);
        prop_assert_eq!(wc.status == 0, valid, "job {} dus {}", job, dus);
        if !valid {
            return Ok(());
        }
        prop_assert_eq!(r.sim.mkey_check(&mk).unwrap(), MkeyErr::NONE);
        // Back out through the mkey (TX) into plain memory: the wire form again.
        let (back, bmr) = region(&mut r, &vec![0; wstride * blocks]);
        let wc = post(&mut r, read(mk.rkey, 0, Sge { addr: bmr.addr, length: (wstride * blocks) as u32, lkey: bmr.lkey }));
        prop_assert_eq!(wc.status, 0);
        prop_assert_eq!(r.sim.read_buf(&back, 0, wstride * blocks).unwrap(), wire_form, "the wire form reads back");
        prop_assert_eq!(r.sim.mkey_check(&mk).unwrap(), MkeyErr::NONE);
        // Flip one bit of what memory holds, and read again.
        let at = flip.index(mstride * blocks);
        let mut stored = r.sim.read_buf(&mbuf, at, 1).unwrap();
        stored[0] ^= 1 << bit;
        r.sim.write_buf(&mbuf, at, &stored).unwrap();
        let wc = post(&mut r, read(mk.rkey, 0, Sge { addr: bmr.addr, length: (wstride * blocks) as u32, lkey: bmr.lkey }));
        prop_assert_eq!(wc.status, 0, "a signature error does not fail the READ");
        let e = r.sim.mkey_check(&mk).unwrap();
        prop_assert_eq!(e != MkeyErr::NONE, mem.is_some(), "{:?}", e);
    }
}

/// A keytag that differs from a has_keytag DEK's, and a DEK the device holds in ERROR: a
/// WRITE from the mkey completes with the profile's crypto error CQE and sends nothing.
#[test]
fn keytag_mismatch_and_dek_error_complete_with_the_crypto_error() {
    let p = mlx5_sim::Profile::builtin("bf3").unwrap();
    let (syndrome_status, vendor) = (mlx5_dv::wc_status::LOC_PROT_ERR, u32::from(p.crypto.error.vendor_err));
    for case in ["keytag", "dek-error", "keytag-ok"] {
        let mut r = rig("bf3");
        if case == "dek-error" {
            let rule = FaultRule::ObjectState {
                opcode: prm::opcode::CREATE_GENERAL_OBJECT,
                obj_type: prm::obj_type::DEK,
                state: 1,
                skip: 0,
                times: 1,
            };
            r.sim.add_fault(rule).unwrap();
        }
        let d = dek(&mut r, &[1; 32], &[2; 32], Some(*b"TAG-0001"));
        let mut a = attr(d, true, 0, sig::BLOCK_512, [0; 16]);
        a.keytag = if case == "keytag" { *b"TAG-0002" } else { *b"TAG-0001" };
        let (_m, mmr) = region(&mut r, &[7; 512]);
        let mk = crypto_mkey(&mut r, &mmr, Some(a), None);
        let (dst, dmr) = region(&mut r, &[0; 512]);
        let wc = post(&mut r, write(dmr.rkey, dmr.addr, Sge { addr: 0, length: 512, lkey: mk.lkey }));
        if case == "keytag-ok" {
            assert_eq!(wc.status, 0, "the right keytag works");
            continue;
        }
        assert_eq!((wc.status, wc.vendor_err), (syndrome_status, vendor), "{case}");
        assert_eq!(r.sim.read_buf(&dst, 0, 512).unwrap(), vec![0; 512], "{case}: nothing reaches the peer");
    }
}

/// A CRYPTO mkey never given crypto attributes fails every transfer, as the local key or the
/// remote one, and no plaintext reaches the peer.
#[test]
fn a_crypto_mkey_without_attributes_fails_every_transfer() {
    for local in [true, false] {
        let mut r = rig("cx7");
        let (mbuf, mmr) = region(&mut r, &[5; 256]);
        let mk = crypto_mkey(&mut r, &mmr, None, None);
        let (other, omr) = region(&mut r, &[0; 256]);
        let op = if local {
            write(omr.rkey, omr.addr, Sge { addr: 0, length: 256, lkey: mk.lkey })
        } else {
            write(mk.rkey, 0, Sge { addr: omr.addr, length: 256, lkey: omr.lkey })
        };
        let wc = post(&mut r, op);
        assert_ne!(wc.status, 0, "local {local}");
        assert_eq!(r.sim.read_buf(&other, 0, 256).unwrap(), vec![0; 256]);
        assert_eq!(r.sim.read_buf(&mbuf, 0, 256).unwrap(), vec![5; 256]);
    }
}
