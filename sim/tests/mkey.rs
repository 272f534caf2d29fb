//! The simulator's control path: flag tables, properties over every input, determinism,
//! foreign handles, and the mkey_check decoder.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prelude::*;
use mlx5_dv::{Mkey, MkeyErr, MkeyErrType, MkeyInitAttr, MkeyInitFlags as F, PdHandle, SigErr};
use mlx5_sim::provider::{SigDomainType, StoredSigErr, decode_sig_err, round_max_entries, sigerr_syndrome as syn};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};
use proptest::prelude::*;
use rstest::rstest;

fn setup(profile: &str) -> (Simulator, PdHandle) {
    let mut sim = Simulator::with_profile(profile).unwrap();
    let ctx = sim.open_device("mlx5_0", None).unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    (sim, pd)
}

fn create(sim: &mut Simulator, pd: PdHandle, flags: F, n: u16) -> mlx5_dv::Result<Mkey> {
    sim.create_mkey(&MkeyInitAttr { pd, create_flags: flags, max_entries: n })
}

#[rstest]
#[case("cx6dx", F::INDIRECT, None)]
#[case("cx6dx", F::BLOCK_SIGNATURE, None)]
#[case("cx6dx", F::CRYPTO, None)]
#[case("cx6dx", F::UPDATE_TAG, None)]
#[case("cx6dx", F::REMOTE_INVALIDATE, None)]
#[case("cx6dx", F::all(), None)]
#[case("cx6dx", F::empty(), Some(EOPNOTSUPP))]
#[case("cx6dx", F::from_bits_retain(1 << 5), Some(EOPNOTSUPP))]
#[case("cx6dx-no-update-tag", F::INDIRECT | F::UPDATE_TAG, Some(EOPNOTSUPP))]
#[case("cx6dx-no-update-tag", F::INDIRECT | F::REMOTE_INVALIDATE, None)]
#[case("cx5", F::BLOCK_SIGNATURE, None)]
#[case("cx5", F::CRYPTO, Some(EOPNOTSUPP))]
#[case("cx5", F::BLOCK_SIGNATURE | F::CRYPTO, Some(EOPNOTSUPP))]
#[case("cx6lx", F::BLOCK_SIGNATURE, Some(EOPNOTSUPP))]
#[case("cx6lx", F::INDIRECT, None)]
#[case("cx6dx-no-devx", F::INDIRECT, Some(EINVAL))]
#[case("cx6dx-no-devx", F::BLOCK_SIGNATURE, Some(EINVAL))]
#[case("cx6dx-no-devx", F::empty(), Some(EOPNOTSUPP))]
#[case("cx7", F::BLOCK_SIGNATURE | F::CRYPTO | F::INDIRECT, None)]
#[case("bf3", F::CRYPTO, None)]
fn flag_combinations(#[case] profile: &str, #[case] flags: F, #[case] errno: Option<i32>) {
    let (mut sim, pd) = setup(profile);
    let r = create(&mut sim, pd, flags, 3);
    match errno {
        None => {
            let m = r.unwrap();
            assert_eq!(m.max_entries, 4);
            assert_eq!(m.lkey & 0xff, 0);
            sim.destroy_mkey(&m).unwrap();
            assert_eq!(mlx5_sim::inspect::object_counts(&sim, 0).unwrap().0, 0, "mkey freed in firmware");
            assert_eq!(mlx5_sim::inspect::object_counts(&sim, 0).unwrap().1, 0, "PSVs freed in firmware");
        }
        Some(e) => {
            assert_eq!(r.unwrap_err().errno(), e);
            assert_eq!(mlx5_sim::inspect::object_counts(&sim, 0).unwrap().0, 0, "no mkey left behind");
            assert_eq!(mlx5_sim::inspect::object_counts(&sim, 0).unwrap().1, 0, "no PSV left behind");
        }
    }
}

#[rstest]
#[case("cx5", 0x3, 0x1b, 0x3, 0x1, 0)]
#[case("cx6lx", 0, 0, 0, 0, 0)]
#[case("cx6dx", 0x3, 0x1b, 0x3, 0x3, 0x6)]
#[case("cx7", 0x3, 0x1f, 0x3, 0x7, 0x6)]
#[case("bf3", 0x3, 0x1f, 0x3, 0x7, 0x6)]
#[case("cx6dx-no-devx", 0x3, 0x1b, 0x3, 0x3, 0x6)]
fn caps_per_profile(
    #[case] profile: &str,
    #[case] prot: u32,
    #[case] bs: u64,
    #[case] bg: u16,
    #[case] crc: u16,
    #[case] engines: u8,
) {
    let mut sim = Simulator::with_profile(profile).unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let c = sim
        .query_device(ctx, mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD)
        .unwrap();
    assert_eq!(
        (c.sig_caps.block_prot, c.sig_caps.block_size, c.sig_caps.t10dif_bg, c.sig_caps.crc_type),
        (prot, bs, bg, crc)
    );
    assert_eq!(c.crypto_caps.crypto_engines, engines);
}

#[test]
fn crypto_page_fields_reach_the_caps() {
    let mut sim = Simulator::with_profile("cx6dx").unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let c = sim.query_device(ctx, mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD).unwrap().crypto_caps;
    assert_eq!(c.flags, 0x3, "CRYPTO | WRAPPED_CRYPTO_OPERATIONAL");
    assert_eq!(c.wrapped_import_method, 1);
    assert_eq!(c.log_max_num_deks, 20);
    let mut bf3 = Simulator::with_profile("bf3").unwrap();
    let ctx = bf3.open_ibv_device("mlx5_0").unwrap();
    let c = bf3.query_device(ctx, mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD).unwrap().crypto_caps;
    assert_eq!((c.flags, c.wrapped_import_method), (0x1, 0), "plaintext-key mode");
}

#[test]
fn caps_are_zero_without_a_whitelist_uid_on_a_non_devx_context() {
    let mut p = Profile::builtin("cx6dx-no-devx").unwrap();
    p.kernel.devx_whitelist_uid = false;
    let mut sim = Simulator::new(p).unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let c = sim.query_device(ctx, mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD).unwrap();
    assert_eq!(c.sig_caps, Default::default());
    let pd = sim.alloc_pd(ctx).unwrap();
    assert_eq!(create(&mut sim, pd, F::BLOCK_SIGNATURE, 4).unwrap_err().errno(), EOPNOTSUPP);
}

#[test]
fn handles_from_another_simulator_are_rejected() {
    let (mut a, pd_a) = setup("cx6dx");
    let (mut b, pd_b) = setup("cx6dx");
    let m = create(&mut a, pd_a, F::INDIRECT, 4).unwrap();
    assert_eq!(b.destroy_mkey(&m).unwrap_err().errno(), EINVAL);
    assert_eq!(b.mkey_check(&m).unwrap_err().errno(), EINVAL);
    assert_eq!(create(&mut b, pd_a, F::INDIRECT, 4).unwrap_err().errno(), EINVAL);
    assert_eq!(a.dealloc_pd(pd_b).unwrap_err().errno(), EINVAL);
    a.destroy_mkey(&m).unwrap();
}

#[test]
fn the_same_calls_give_the_same_keys() {
    let run = || {
        let (mut sim, pd) = setup("cx7");
        let mut keys = Vec::new();
        for i in 0..50u16 {
            let m = create(&mut sim, pd, F::INDIRECT | F::BLOCK_SIGNATURE, i).unwrap();
            keys.push((m.lkey, m.max_entries));
            if i % 3 == 0 {
                sim.destroy_mkey(&m).unwrap();
            }
        }
        keys
    };
    assert_eq!(run(), run());
}

fn sig_mkey() -> (Simulator, Mkey) {
    let (mut sim, pd) = setup("cx7");
    let m = create(&mut sim, pd, F::INDIRECT | F::BLOCK_SIGNATURE, 4).unwrap();
    (sim, m)
}

#[rstest]
// T10-DIF: trans_sig = guard << 16 | app; ref fields = ref tag.
#[case(syn::GUARD, SigDomainType::T10dif, 1, MkeyErrType::SigBlockBadGuard, 0x1234, 0xabcd)]
#[case(syn::APPTAG, SigDomainType::T10dif, 1, MkeyErrType::SigBlockBadApptag, 0x5678, 0x9999)]
#[case(syn::REFTAG, SigDomainType::T10dif, 0, MkeyErrType::SigBlockBadReftag, 0x0000_0007, 0x0000_0009)]
// The decoder tests REFTAG first, then APPTAG, else GUARD.
#[case(syn::GUARD | syn::REFTAG, SigDomainType::T10dif, 0, MkeyErrType::SigBlockBadReftag, 0x0000_0007, 0x0000_0009)]
#[case(syn::GUARD | syn::APPTAG, SigDomainType::T10dif, 0, MkeyErrType::SigBlockBadApptag, 0x5678, 0x9999)]
#[case(syn::GUARD, SigDomainType::Crc32, 1, MkeyErrType::SigBlockBadGuard, 0x1234_5678, 0xabcd_9999)]
#[case(
    syn::GUARD,
    SigDomainType::Crc64,
    0,
    MkeyErrType::SigBlockBadGuard,
    0x1234_5678_0000_0007,
    0xabcd_9999_0000_0009
)]
fn mkey_check_decodes_a_stored_error(
    #[case] syndrome: u16,
    #[case] ty: SigDomainType,
    #[case] domain: u8,
    #[case] err_type: MkeyErrType,
    #[case] expected: u64,
    #[case] actual: u64,
) {
    let stored = StoredSigErr {
        syndrome,
        expected: 0x1234_5678_0000_0007,
        actual: 0xabcd_9999_0000_0009,
        offset: 1024,
        sig_type: 0,
        domain,
    };
    let (mut sim, m) = sig_mkey();
    let ctx = mlx5_sim::inspect::sig_ctx_mut(&mut sim, &m).unwrap();
    ctx.err = stored;
    ctx.err_exists = true;
    ctx.mem = ty;
    ctx.wire = ty;
    let got = sim.mkey_check(&m).unwrap();
    assert_eq!(got, MkeyErr { err_type, sig: SigErr { expected_value: expected, actual_value: actual, offset: 1024 } });
    assert_eq!(sim.mkey_check(&m).unwrap(), MkeyErr::NONE, "reported once");
}

#[rstest]
#[case(0, 0, 1, SigDomainType::T10dif)]
#[case(syn::GUARD, 1, 1, SigDomainType::T10dif)]
#[case(syn::GUARD, 0, 2, SigDomainType::T10dif)]
#[case(syn::GUARD, 0, 1, SigDomainType::None)]
fn malformed_stored_errors_are_einval_and_kept(
    #[case] syndrome: u16,
    #[case] sig_type: u8,
    #[case] domain: u8,
    #[case] ty: SigDomainType,
) {
    let (mut sim, m) = sig_mkey();
    let ctx = mlx5_sim::inspect::sig_ctx_mut(&mut sim, &m).unwrap();
    ctx.err = StoredSigErr { syndrome, sig_type, domain, ..Default::default() };
    ctx.err_exists = true;
    ctx.mem = ty;
    for _ in 0..2 {
        assert_eq!(sim.mkey_check(&m).unwrap_err().errno(), EINVAL);
    }
    assert!(mlx5_sim::inspect::sig_ctx_mut(&mut sim, &m).unwrap().err_exists, "the error stays");
    assert!(decode_sig_err(&StoredSigErr { syndrome, sig_type, domain, ..Default::default() }, ty, ty).is_err());
}

fn expected_errno(p: &Profile, flags: u32) -> Option<i32> {
    let mut allowed = (F::INDIRECT | F::BLOCK_SIGNATURE | F::CRYPTO | F::REMOTE_INVALIDATE).bits();
    if p.kernel.mkey_update_tag {
        allowed |= F::UPDATE_TAG.bits();
    }
    let sig_caps = p.hca_cap.sho && p.hca_cap.sigerr_domain_and_sig_type;
    let engine = p.hca_cap.aes_xts_single_block_le_tweak || p.hca_cap.aes_xts_multi_block_be_tweak;
    if flags == 0 || flags & !allowed != 0 {
        return Some(EOPNOTSUPP);
    }
    if flags & F::BLOCK_SIGNATURE.bits() != 0 && !sig_caps {
        return Some(EOPNOTSUPP);
    }
    if !p.kernel.devx && flags & F::BLOCK_SIGNATURE.bits() != 0 {
        return Some(EINVAL);
    }
    if flags & F::CRYPTO.bits() != 0 && !engine {
        return Some(EOPNOTSUPP);
    }
    if !p.kernel.devx {
        return Some(EINVAL);
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// For any flags and max_entries on any profile: the provider's errno, or an mkey whose
    /// max_entries is the rounded value; the firmware holds exactly what is alive.
    #[test]
    fn any_flags_and_max_entries(
        profile in proptest::sample::select(Profile::builtin_names()),
        flags in prop_oneof![0u32..32, any::<u32>()],
        n in prop_oneof![0u16..16, 65528u16..=65535, any::<u16>()],
    ) {
        let p = Profile::builtin(profile).unwrap();
        let mut sim = Simulator::new(p.clone()).unwrap();
        let ctx = sim.open_ibv_device("mlx5_0").unwrap();
        let pd = sim.alloc_pd(ctx).unwrap();
        match (create(&mut sim, pd, F::from_bits_retain(flags), n), expected_errno(&p, flags)) {
            (Ok(m), None) => {
                prop_assert_eq!(m.max_entries, round_max_entries(n));
                prop_assert!(m.max_entries.is_multiple_of(4));
                prop_assert_eq!(m.lkey, m.rkey);
                prop_assert_eq!(m.lkey & 0xff, 0);
                let psvs = if flags & F::BLOCK_SIGNATURE.bits() != 0 { 2 } else { 0 };
                prop_assert_eq!(mlx5_sim::inspect::object_counts(&sim, 0).unwrap(), (1, psvs, 1));
                sim.destroy_mkey(&m).unwrap();
            }
            (Err(e), Some(errno)) => prop_assert_eq!(e.errno(), errno, "{}", e),
            (got, want) => prop_assert!(false, "flags 0x{:x} on {}: got {:?}, expected errno {:?}", flags, profile, got, want),
        }
        prop_assert_eq!(mlx5_sim::inspect::object_counts(&sim, 0).unwrap(), (0, 0, 1));
    }

    #[test]
    fn rounding_is_align_4_in_16_bits(n in any::<u16>()) {
        let r = round_max_entries(n);
        if n > 65532 { prop_assert_eq!(r, 0) } else { prop_assert!(r >= n && r - n < 4 && r.is_multiple_of(4)) }
    }
}

/// A list layout's first entry cannot name the key 0x400 (a repeat block's op word): the
/// firmware never hands out mkey index 4, to MRs or to mkeys.
#[test]
fn no_key_is_the_repeat_block_op() {
    let mut sim = mlx5_sim::Simulator::with_profile("cx6dx").unwrap();
    let ctx = sim.open_ibv_device("mlx5_0").unwrap();
    let pd = sim.alloc_pd(ctx).unwrap();
    let buf = sim.alloc_buf(64).unwrap();
    let mut indexes = Vec::new();
    for _ in 0..4 {
        indexes.push(sim.reg_mr(pd, buf.addr, 64, mlx5_dv::AccessFlags::LOCAL_WRITE).unwrap().lkey >> 8);
        let attr = mlx5_dv::MkeyInitAttr { pd, create_flags: mlx5_dv::MkeyInitFlags::INDIRECT, max_entries: 4 };
        indexes.push(sim.create_mkey(&attr).unwrap().lkey >> 8);
    }
    assert!(indexes.len() == 8 && !indexes.contains(&4), "mkey indexes {indexes:?}");
}

/// A QP's CQs must both be its context's: one from another context is enough for EINVAL.
#[test]
fn a_qp_with_one_cq_of_another_context_is_einval() {
    use mlx5_dv::{QpCap, QpInitAttr};
    let mut sim = mlx5_sim::Simulator::with_profile("cx6dx").unwrap();
    let (a, b) = (sim.open_ibv_device("mlx5_0").unwrap(), sim.open_ibv_device("mlx5_0").unwrap());
    let pd = sim.alloc_pd(a).unwrap();
    let (own, other) = (sim.create_cq(a, 4).unwrap(), sim.create_cq(b, 4).unwrap());
    let cap = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    for (send, recv) in [(own, other), (other, own), (other, other)] {
        let attr =
            QpInitAttr { send_cq: send.handle, recv_cq: recv.handle, ..QpInitAttr::rc(pd, own.handle, cap, None) };
        assert_eq!(sim.create_qp(&attr).map_err(|e| e.errno()).err(), Some(mlx5_dv::errno::EINVAL));
    }
    assert!(sim.create_qp(&QpInitAttr::rc(pd, own.handle, cap, None)).is_ok());
}
