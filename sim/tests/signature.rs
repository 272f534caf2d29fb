//! Signatures: crc-fast against the `crc` crate (check values, random data, seeds and
//! splits), and a property over random configurations and corruptions: the simulator reports
//! exactly the first bad block's first error, at the right offset, with the right values.

use crc::{Algorithm, CRC_16_T10_DIF, CRC_32_ISCSI, CRC_32_ISO_HDLC, CRC_64_NVME, Crc};
use mlx5_dv::prelude::*;
use mlx5_dv::{
    AccessFlags as A, DvQpInitAttr, Mkey, MkeyErr, MkeyErrType, MkeyInitAttr, MkeyInitFlags as F, QpCap, QpDest,
    QpInitAttr, QpModify, SendFlags, Sge, SigBlockAttr, SigBlockDomain, SigErr, SigT10dif, WrOp, dv_qp, sig,
};
use mlx5_sim::profile::SignatureSection;
use mlx5_sim::signature::{Crcs, Domain, Kind};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};
use proptest::prelude::*;

static T10_FFFF: Algorithm<u16> = Algorithm { init: 0xffff, ..CRC_16_T10_DIF };
static CRC32_0: Algorithm<u32> = Algorithm { init: 0, ..CRC_32_ISO_HDLC };
static CRC32C_0: Algorithm<u32> = Algorithm { init: 0, ..CRC_32_ISCSI };
static CRC64_0: Algorithm<u64> = Algorithm { init: 0, ..CRC_64_NVME };

fn crcs() -> Crcs {
    Crcs::new(&SignatureSection::default())
}

fn domain(sig_type: u32, crc_type: u32, seed: u64, bg: u16) -> Domain {
    let d = if sig_type == sig::TYPE_T10DIF {
        SigBlockDomain::t10dif(sig::BLOCK_512, SigT10dif { bg, ..Default::default() })
    } else {
        SigBlockDomain::crc(sig::BLOCK_512, crc_type, seed)
    };
    Domain::from_attr(&d).unwrap()
}

/// The reference value of each signature type and seed, from the `crc` crate.
fn reference(sig_type: u32, crc_type: u32, ones: bool, data: &[u8]) -> u64 {
    match (sig_type, crc_type, ones) {
        (sig::TYPE_T10DIF, _, false) => u64::from(Crc::<u16>::new(&CRC_16_T10_DIF).checksum(data)) << 48,
        (sig::TYPE_T10DIF, _, true) => u64::from(Crc::<u16>::new(&T10_FFFF).checksum(data)) << 48,
        (_, sig::CRC32, false) => u64::from(Crc::<u32>::new(&CRC32_0).checksum(data)) << 32,
        (_, sig::CRC32, true) => u64::from(Crc::<u32>::new(&CRC_32_ISO_HDLC).checksum(data)) << 32,
        (_, sig::CRC32C, false) => u64::from(Crc::<u32>::new(&CRC32C_0).checksum(data)) << 32,
        (_, sig::CRC32C, true) => u64::from(Crc::<u32>::new(&CRC_32_ISCSI).checksum(data)) << 32,
        (_, _, false) => Crc::<u64>::new(&CRC64_0).checksum(data),
        (_, _, true) => Crc::<u64>::new(&CRC_64_NVME).checksum(data),
    }
}

#[test]
fn check_values_of_device_facts() {
    let c = crcs();
    let data = b"123456789";
    let v = |t, ct, seed, bg| domain(t, ct, seed, bg).compute(&c, 0, data);
    assert_eq!(v(sig::TYPE_T10DIF, 0, 0, 0) >> 48, 0xd0db);
    assert_eq!(v(sig::TYPE_T10DIF, 0, 0, 0xffff) >> 48, 0x8e3c);
    assert_eq!(v(sig::TYPE_CRC, sig::CRC32, 0xffff_ffff, 0) >> 32, 0xcbf4_3926);
    assert_eq!(v(sig::TYPE_CRC, sig::CRC32C, 0xffff_ffff, 0) >> 32, 0xe306_9283);
    assert_eq!(v(sig::TYPE_CRC, sig::CRC32, 0, 0) >> 32, 0xd202_d277);
    assert_eq!(v(sig::TYPE_CRC, sig::CRC32C, 0, 0) >> 32, 0xa71c_05df);
    assert_eq!(v(sig::TYPE_CRC, sig::CRC64_XP10, u64::MAX, 0), 0xae8b_1486_0a79_9888);
    assert_eq!(v(sig::TYPE_CRC, sig::CRC64_XP10, 0, 0), 0x87ff_3f9b_2b57_c87b);
    // 512 bytes of i & 0xff (docs/behaviour.md appendix B).
    let ramp: Vec<u8> = (0..512).map(|i| i as u8).collect();
    assert_eq!(domain(sig::TYPE_T10DIF, 0, 0, 0).compute(&c, 0, &ramp) >> 48, 0x4f10);
    assert_eq!(domain(sig::TYPE_CRC, sig::CRC32C, 0xffff_ffff, 0).compute(&c, 0, &ramp) >> 32, 0xae10_ee5a);
    assert_eq!(domain(sig::TYPE_CRC, sig::CRC32, 0xffff_ffff, 0).compute(&c, 0, &ramp) >> 32, 0x1c61_3576);
    let csum = Domain::from_attr(&SigBlockDomain::t10dif(
        sig::BLOCK_512,
        SigT10dif { bg_type: sig::BG_CSUM, ..Default::default() },
    ))
    .unwrap();
    assert_eq!(csum.compute(&c, 0, &ramp) >> 48, 0x7f80);
    assert_eq!(csum.compute(&c, 0, &[0u8; 512]) >> 48, 0xffff);
}

#[test]
fn crc_pi_byte_order_follows_the_profile() {
    let d = domain(sig::TYPE_CRC, sig::CRC32, 0xffff_ffff, 0);
    let mut le = Vec::new();
    d.encode(&crcs(), 0x1122_3344_0000_0000, &mut le);
    assert_eq!(le, [0x44, 0x33, 0x22, 0x11]);
    let be_crcs = Crcs::new(&SignatureSection { crc_pi_little_endian: false, ..Default::default() });
    let mut be = Vec::new();
    d.encode(&be_crcs, 0x1122_3344_0000_0000, &mut be);
    assert_eq!(be, [0x11, 0x22, 0x33, 0x44]);
    assert_eq!(d.decode(&be_crcs, &be), 0x1122_3344_0000_0000);
    let t10 = domain(sig::TYPE_T10DIF, 0, 0, 0);
    let mut pi = Vec::new();
    t10.encode(&crcs(), 0xaabb_ccdd_0102_0304, &mut pi);
    assert_eq!(pi, [0xaa, 0xbb, 0xcc, 0xdd, 1, 2, 3, 4], "T10-DIF PI is big-endian");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// crc-fast agrees with the `crc` reference for every type and seed, whole or streamed
    /// across SGE-like splits.
    #[test]
    fn crc_fast_matches_the_reference(
        ty in 0usize..4, ones in any::<bool>(),
        data in proptest::collection::vec(any::<u8>(), 0..3000),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
    ) {
        let (sig_type, crc_type) = [(sig::TYPE_T10DIF, 0), (sig::TYPE_CRC, sig::CRC32), (sig::TYPE_CRC, sig::CRC32C), (sig::TYPE_CRC, sig::CRC64_XP10)][ty];
        let seed = if ones { if crc_type == sig::CRC64_XP10 { u64::MAX } else { 0xffff_ffff } } else { 0 };
        let d = domain(sig_type, crc_type, seed, if ones { 0xffff } else { 0 });
        let want = reference(sig_type, crc_type, ones, &data);
        let got = d.compute(&crcs(), 0, &data);
        let guard_mask = match sig_type { sig::TYPE_T10DIF => 0xffff << 48, _ => u64::MAX };
        prop_assert_eq!(got & guard_mask, want);
        // Split into SGE-sized pieces and gather them back: the same value.
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(data.len() + 1)).collect();
        at.sort();
        let mut gathered = Vec::new();
        let mut last = 0;
        for c in at.into_iter().chain([data.len()]) {
            gathered.extend_from_slice(&data[last..c]);
            last = c;
        }
        prop_assert_eq!(d.compute(&crcs(), 0, &gathered), got);
    }
}

/// A connected loopback pair with room for a BSF, and a signature mkey on the server.
struct Rig {
    sim: Simulator,
    client: mlx5_dv::Qp,
    server: mlx5_dv::Qp,
    cq: mlx5_dv::Cq,
    pd: mlx5_dv::PdHandle,
}

fn rig() -> Rig {
    let mut sim = Simulator::new(Profile::builtin("cx7").unwrap()).unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let cq = sim.create_cq(ctx, 1024).unwrap();
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 512 };
    let attr = QpInitAttr::rc(
        pd,
        cq.handle,
        cap,
        Some(DvQpInitAttr::new(mlx5_dv::DvQpCreateFlags::empty(), dv_qp::WITH_MKEY_CONFIGURE)),
    );
    let client = sim.create_qp(&attr).unwrap();
    let server = sim.create_qp(&attr).unwrap();
    let access = A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ;
    for (q, p) in [(&client, &server), (&server, &client)] {
        for step in QpModify::connect(access, QpDest::to(p, &sim.query_port(ctx, 1).unwrap())) {
            sim.modify_qp(q, &step).unwrap();
        }
    }
    Rig { sim, client, server, cq, pd }
}

/// What the reference model expects mkey_check to say.
fn model(d: &SigBlockDomain, bs: usize, wire: &[u8], crc_ref: &dyn Fn(&[u8]) -> u64, check_mask: u8) -> MkeyErr {
    let pi_len = if d.sig_type == sig::TYPE_CRC && d.crc.crc_type != sig::CRC64_XP10 { 4 } else { 8 };
    let stride = bs + pi_len;
    for (i, blk) in wire.chunks(stride).enumerate() {
        let (data, pi) = blk.split_at(bs);
        let (exp, act, fields): (u64, u64, Vec<(u8, MkeyErrType)>) = if d.sig_type == sig::TYPE_T10DIF {
            let r = if d.dif.flags.contains(sig::FLAG_REF_REMAP) {
                d.dif.ref_tag.wrapping_add(i as u32)
            } else {
                d.dif.ref_tag
            };
            let exp = crc_ref(data) | u64::from(d.dif.app_tag) << 32 | u64::from(r);
            let act = u64::from_be_bytes(pi.try_into().unwrap());
            (
                exp,
                act,
                vec![
                    (0xc0, MkeyErrType::SigBlockBadGuard),
                    (0x30, MkeyErrType::SigBlockBadApptag),
                    (0x0f, MkeyErrType::SigBlockBadReftag),
                ],
            )
        } else if pi_len == 4 {
            (
                crc_ref(data),
                u64::from(u32::from_le_bytes(pi.try_into().unwrap())) << 32,
                vec![(0xf0, MkeyErrType::SigBlockBadGuard)],
            )
        } else {
            (crc_ref(data), u64::from_le_bytes(pi.try_into().unwrap()), vec![(0xff, MkeyErrType::SigBlockBadGuard)])
        };
        for (f, ty) in fields {
            let m = (0..8).filter(|k| check_mask & f & (1 << k) != 0).fold(0u64, |m, k| m | 0xff << (8 * k));
            if (exp ^ act) & m != 0 {
                let pick = |v: u64| match ty {
                    MkeyErrType::SigBlockBadReftag => v & 0xffff_ffff,
                    MkeyErrType::SigBlockBadApptag => (v >> 32) & 0xffff,
                    _ if d.sig_type == sig::TYPE_T10DIF => v >> 48,
                    _ if pi_len == 4 => v >> 32,
                    _ => v,
                };
                return MkeyErr {
                    err_type: ty,
                    sig: SigErr { expected_value: pick(exp), actual_value: pick(act), offset: (i * stride) as u64 },
                };
            }
        }
    }
    MkeyErr::NONE
}

fn sig_domain() -> impl Strategy<Value = SigBlockDomain> {
    let bs = prop_oneof![Just(sig::BLOCK_512), Just(sig::BLOCK_520)];
    prop_oneof![
        (bs.clone(), any::<bool>(), any::<u16>(), any::<u32>(), any::<bool>()).prop_map(|(b, seed, app, r, remap)| {
            SigBlockDomain::t10dif(
                b,
                SigT10dif {
                    bg_type: sig::BG_CRC,
                    bg: if seed { 0xffff } else { 0 },
                    app_tag: app & 0x7fff,
                    ref_tag: r,
                    flags: if remap { sig::FLAG_REF_REMAP } else { mlx5_dv::T10difFlags::empty() },
                },
            )
        }),
        (bs.clone(), any::<bool>()).prop_map(|(b, ones)| SigBlockDomain::crc(
            b,
            sig::CRC32,
            if ones { 0xffff_ffff } else { 0 }
        )),
        (bs.clone(), any::<bool>()).prop_map(|(b, ones)| SigBlockDomain::crc(
            b,
            sig::CRC32C,
            if ones { 0xffff_ffff } else { 0 }
        )),
        (bs, any::<bool>()).prop_map(|(b, ones)| SigBlockDomain::crc(
            b,
            sig::CRC64_XP10,
            if ones { u64::MAX } else { 0 }
        )),
    ]
}

/// The reference guard of a block's data.
type GuardFn = Box<dyn Fn(&[u8]) -> u64>;

fn crc_ref_for(d: &SigBlockDomain) -> GuardFn {
    let (t, ct) = (d.sig_type, d.crc.crc_type);
    let ones = if t == sig::TYPE_T10DIF { d.dif.bg != 0 } else { d.crc.seed != 0 };
    Box::new(move |data| reference(t, ct, ones, data))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// Random configuration, data and bit flips (in data or PI): mkey_check says exactly
    /// what the reference model says; with no flips, data round-trips and NO_ERR.
    #[test]
    fn the_first_bad_block_s_first_error_is_reported(
        d in sig_domain(),
        blocks in 1usize..6,
        seed in any::<u8>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 0..4),
        check_mask in prop_oneof![Just(0xffu8), any::<u8>()],
    ) {
        let mut r = rig();
        let bs = sig::block_bytes(d.block_size).unwrap();
        let pi_len = if d.sig_type == sig::TYPE_CRC && d.crc.crc_type != sig::CRC64_XP10 { 4 } else { 8 };
        let data: Vec<u8> = (0..bs * blocks).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)).collect();
        let attr = SigBlockAttr { mem: None, wire: Some(d), flags: mlx5_dv::SigBlockAttrFlags::empty(), check_mask, copy_mask: 0, comp_mask: 0 };
        // The client builds correct wire data through its own signature mkey (TX).
        let (wire, mkey_c) = {
            let src = r.sim.alloc_buf(data.len()).unwrap();
            r.sim.write_buf(&src, 0, &data).unwrap();
            let mr = r.sim.reg_mr(r.pd, src.addr, data.len() as u64, A::LOCAL_WRITE).unwrap();
            let mk = configure(&mut r, &mr, &attr);
            let dst = r.sim.alloc_buf(blocks * (bs + pi_len)).unwrap();
            let dmr = r.sim.reg_mr(r.pd, dst.addr, dst.len as u64, A::LOCAL_WRITE | A::REMOTE_WRITE).unwrap();
            let w = WrOp::RdmaWrite { wr_id: 1, flags: SendFlags::SIGNALED, rkey: dmr.rkey, remote_addr: dmr.addr, sge: vec![Sge { addr: 0, length: data.len() as u32, lkey: mk.lkey }] };
            r.sim.post_send(&r.client, &[w]).unwrap();
            prop_assert_eq!(r.sim.poll_cq(&r.cq, 4).unwrap().len(), 1);
            (r.sim.read_buf(&dst, 0, dst.len).unwrap(), mk)
        };
        prop_assert_eq!(r.sim.mkey_check(&mkey_c).unwrap(), MkeyErr::NONE);
        prop_assert_eq!(model(&d, bs, &wire, &*crc_ref_for(&d), 0xff), MkeyErr::NONE, "the model agrees the TX side inserted valid PI");
        let mut bad = wire.clone();
        for (at, bit) in &flips {
            let i = at.index(bad.len());
            bad[i] ^= 1 << bit;
        }
        // The server receives it through its signature mkey (RX, strip).
        let dst = r.sim.alloc_buf(data.len()).unwrap();
        let mr = r.sim.reg_mr(r.pd, dst.addr, data.len() as u64, A::LOCAL_WRITE).unwrap();
        let mk = configure(&mut r, &mr, &attr);
        let src = r.sim.alloc_buf(bad.len()).unwrap();
        r.sim.write_buf(&src, 0, &bad).unwrap();
        let smr = r.sim.reg_mr(r.pd, src.addr, bad.len() as u64, A::LOCAL_WRITE).unwrap();
        let w = WrOp::RdmaWrite { wr_id: 2, flags: SendFlags::SIGNALED, rkey: mk.rkey, remote_addr: 0, sge: vec![Sge { addr: smr.addr, length: bad.len() as u32, lkey: smr.lkey }] };
        r.sim.post_send(&r.client, &[w]).unwrap();
        let wcs = r.sim.poll_cq(&r.cq, 8).unwrap();
        prop_assert_eq!(wcs.len(), 1, "the data WR completes; the SIG_ERR CQE is never returned");
        prop_assert_eq!(wcs[0].status, 0);
        let want = model(&d, bs, &bad, &*crc_ref_for(&d), check_mask);
        prop_assert_eq!(r.sim.mkey_check(&mk).unwrap(), want);
        if flips.is_empty() {
            prop_assert_eq!(r.sim.read_buf(&dst, 0, dst.len).unwrap(), data);
        }
    }
}

/// Configure a fresh signature mkey over `mr` on the server QP and wait for the completion.
fn configure(r: &mut Rig, mr: &mlx5_dv::Mr, attr: &SigBlockAttr) -> Mkey {
    let mk = r
        .sim
        .create_mkey(&MkeyInitAttr { pd: r.pd, create_flags: F::INDIRECT | F::BLOCK_SIGNATURE, max_entries: 4 })
        .unwrap();
    let chain = [
        WrOp::MkeyConfigure {
            wr_id: 9,
            flags: SendFlags::SIGNALED | SendFlags::INLINE,
            mkey: mk,
            num_setters: 3,
            conf_flags: mlx5_dv::MkeyConfFlags::empty(),
            comp_mask: 0,
        },
        WrOp::SetMkeyAccessFlags(A::LOCAL_WRITE | A::REMOTE_WRITE),
        WrOp::SetMkeyLayoutList(vec![Sge { addr: mr.addr, length: mr.length as u32, lkey: mr.lkey }]),
        WrOp::SetMkeySigBlock(*attr),
    ];
    r.sim.post_send(&r.server, &chain).unwrap();
    assert_eq!(r.sim.poll_cq(&r.cq, 4).unwrap().len(), 1);
    mk
}

#[test]
fn kind_is_read_from_the_attributes() {
    let d = Domain::from_attr(&SigBlockDomain::t10dif(
        sig::BLOCK_4048,
        SigT10dif { flags: sig::FLAG_APP_REF_ESCAPE | sig::FLAG_APP_ESCAPE, ..Default::default() },
    ))
    .unwrap();
    assert_eq!(d.bs, 4048);
    assert!(matches!(d.kind, Kind::T10 { escape: mlx5_sim::signature::Escape::AppRef, .. }), "APP_REF_ESCAPE wins");
}

/// Blocks whose PI comes out of the TX transform clean, then one corrupted after the first:
/// both paths report that block's error at its byte offset in the input (the random inputs of
/// the comparison below nearly always fail in block 0).
#[test]
fn the_first_error_is_at_its_blocks_offset_on_both_paths() {
    use mlx5_sim::signature::{Direction, SigConfig};
    let wire = any_domain(3, sig::BLOCK_512, true, 0, 0, 0);
    let c = Crcs::new(&SignatureSection::default());
    let tx = SigConfig { mem: None, wire, check_mask: 0xff, copy_mask: 0, sbs: false };
    let data: Vec<u8> = (0..3 * 512).map(|i| (i * 7 + 1) as u8).collect();
    let mut clean = Vec::new();
    assert_eq!(tx.transform(&c, Direction::Tx, 0, &data, &mut clean), Some(None));
    let stride = wire.map_or(0, |d| d.stride());
    assert_eq!(clean.len(), 3 * stride);
    for bad in [1usize, 2] {
        let mut input = clean.clone();
        input[bad * stride + 5] ^= 0x40;
        let mut out = Vec::new();
        let err = tx.transform(&c, Direction::Rx, 0, &input, &mut out).flatten().map(|e| e.offset);
        assert_eq!(err, Some((bad * stride) as u64), "block {bad}");
        let mut sliced = vec![0u8; 3 * 512];
        let err = tx.transform_slices(&c, Direction::Rx, 0, &input, &mut sliced).flatten().map(|e| e.offset);
        assert_eq!(err, Some((bad * stride) as u64), "block {bad}, the slice path");
    }
}

/// A domain of any type, seed and T10-DIF field, or none, from a selector and random fields,
/// with block size `sig::BLOCK_*` `bs`.
fn any_domain(sel: u8, bs: u32, ones: bool, app: u16, ref_tag: u32, flags: u16) -> Option<Domain> {
    let seed = |w: u64| if ones { w } else { 0 };
    let d = match sel % 6 {
        0 => return None,
        1 | 2 => SigBlockDomain::t10dif(
            bs,
            SigT10dif {
                bg_type: if sel % 6 == 2 { sig::BG_CSUM } else { sig::BG_CRC },
                bg: seed(0xffff) as u16,
                app_tag: app,
                ref_tag,
                flags: mlx5_dv::T10difFlags::from_bits_truncate(flags),
            },
        ),
        3 => SigBlockDomain::crc(bs, sig::CRC32, seed(0xffff_ffff)),
        4 => SigBlockDomain::crc(bs, sig::CRC32C, seed(0xffff_ffff)),
        _ => SigBlockDomain::crc(bs, sig::CRC64_XP10, seed(u64::MAX)),
    };
    Domain::from_attr(&d)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The one-copy slice transform gives the bytes and the first error of the block by block
    /// transform, for every pair of domains, mask and direction, on both PI byte orders and
    /// every block size (the copy has its own paths for 512 bytes and multiples of 256).
    #[test]
    fn slice_transform_matches_block_transform(
        mem_sel in any::<u8>(), wire_sel in any::<u8>(), ones in any::<(bool, bool)>(),
        app in any::<u16>(), ref_tag in any::<u32>(), flags in any::<u16>(),
        check_mask in any::<u8>(), copy_mask in any::<u8>(), rx in any::<bool>(), le in any::<bool>(),
        first in any::<u32>(), blocks in 0usize..5, seed in any::<u64>(), bs in sig::BLOCK_512..=sig::BLOCK_4160,
    ) {
        let mem = any_domain(mem_sel, bs, ones.0, app, ref_tag, flags);
        let wire = any_domain(wire_sel, bs, ones.1, app ^ 1, ref_tag, flags >> 3);
        prop_assume!(mem.is_some() || wire.is_some());
        let sbs = matches!((mem, wire), (Some(m), Some(w)) if mlx5_sim::signature::same_block_structure(&m, &w));
        let cfg = mlx5_sim::signature::SigConfig { mem, wire, check_mask, copy_mask, sbs };
        let dir = if rx { mlx5_sim::signature::Direction::Rx } else { mlx5_sim::signature::Direction::Tx };
        let c = Crcs::new(&SignatureSection { crc_pi_little_endian: le, ..Default::default() });
        let (inp, out) = cfg.domains(dir);
        let data = mem.or(wire).map_or(512, |d| d.bs);
        let (in_stride, out_stride) = (inp.map_or(data, |d| d.stride()), out.map_or(data, |d| d.stride()));
        let mut x = seed | 1;
        let input: Vec<u8> = (0..blocks * in_stride).map(|_| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 }).collect();
        let mut want = Vec::new();
        let want_err = cfg.transform(&c, dir, u64::from(first), &input, &mut want);
        let mut got = vec![0u8; blocks * out_stride];
        let got_err = cfg.transform_slices(&c, dir, u64::from(first), &input, &mut got);
        prop_assert_eq!(got_err, want_err);
        prop_assert_eq!(got, want);
    }
}
