//! Crypto behind the trait: object-type gating, contexts without crypto ops or DEVX, the DEK
//! table limit, cleanup on close, what wrapped DEKs need after logout, the login mailbox, and
//! the crypto BSF the provider would write (tweak order, DEK id, single-block length, RAW
//! orders with signatures).

use mlx5_dv::errno::{EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::prelude::*;
use mlx5_dv::prm::crypto_bsf::enc_order;
use mlx5_dv::prm::{self, opcode};
use mlx5_dv::profile::{TEST_CREDENTIAL_ID, TEST_IMPORT_KEK_ID, test_credential, test_import_kek};
use mlx5_dv::{
    AccessFlags as A, ContextHandle, CryptoAttr, CryptoLoginAttr, CryptoLoginAttrEx, DekHandle, DekInitAttr,
    DvQpInitAttr, Mkey, MkeyConfFlags, MkeyInitAttr, MkeyInitFlags as F, PdHandle, Qp, QpCap, QpDest, QpInitAttr,
    QpModify, SendFlags, Sge, SigBlockAttr, SigBlockDomain, WrOp, crypto, dv_qp, sig,
};
use mlx5_sim::crypto::wrap_key;
use mlx5_sim::{Profile, ShippedProfiles, Simulator, inspect};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn errno<T>(r: mlx5_dv::Result<T>) -> Option<i32> {
    r.err().map(|e| e.errno())
}

fn sim_of(text: &str) -> Result<Simulator, Box<dyn std::error::Error>> {
    Ok(Simulator::new(Profile::load(text, "test")?)?)
}

fn login() -> Result<CryptoLoginAttr, Box<dyn std::error::Error>> {
    let credential = wrap_key(&test_import_kek(), &test_credential())?.try_into().map_err(|_| "48 bytes")?;
    Ok(CryptoLoginAttr {
        credential_id: TEST_CREDENTIAL_ID,
        import_kek_id: TEST_IMPORT_KEK_ID,
        credential,
        comp_mask: 0,
    })
}

fn key() -> Vec<u8> {
    (0..64u8).chain(*b"KEYTAG01").collect()
}

fn dek_attr(pd: PdHandle, key: &[u8], comp_mask: u64, login: Option<mlx5_dv::CryptoLoginHandle>) -> DekInitAttr {
    let mut field = [0u8; crypto::KEY_LEN];
    field.iter_mut().zip(key).for_each(|(d, s)| *d = *s);
    DekInitAttr {
        key_size: crypto::KEY_SIZE_256,
        has_keytag: true,
        key_purpose: crypto::KEY_PURPOSE_AES_XTS,
        pd,
        opaque: [9; 8],
        key: field,
        comp_mask,
        crypto_login: login,
    }
}

/// A DEK in the device's import mode (wrapped under a fresh login object, or plaintext).
fn dek(sim: &mut Simulator, ctx: ContextHandle, pd: PdHandle) -> Result<DekHandle, Box<dyn std::error::Error>> {
    let bit = crypto::DEK_INIT_ATTR_CRYPTO_LOGIN;
    if sim.profile().crypto_cap.wrapped_crypto_operational {
        let obj = sim.crypto_login_create(ctx, &CryptoLoginAttrEx::from_login(&login()?))?;
        Ok(sim.dek_create(ctx, &dek_attr(pd, &wrap_key(&test_import_kek(), &key())?, bit, Some(obj)))?)
    } else {
        Ok(sim.dek_create(ctx, &dek_attr(pd, &key(), bit, None))?)
    }
}

trait FromLogin {
    fn from_login(l: &CryptoLoginAttr) -> Self;
}

impl FromLogin for CryptoLoginAttrEx {
    fn from_login(l: &CryptoLoginAttr) -> Self {
        CryptoLoginAttrEx {
            credential_id: l.credential_id,
            import_kek_id: l.import_kek_id,
            credential: l.credential.to_vec(),
            comp_mask: l.comp_mask,
        }
    }
}

#[test]
fn each_object_type_gates_its_own_calls() -> TestResult {
    let mut sim = sim_of("extends = \"cx6dx\"\n[hca_cap]\ngeneral_obj_types = [\"dek\"]\n")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    assert_eq!(errno(sim.crypto_login(ctx, &login()?)), Some(EOPNOTSUPP), "no CRYPTO_LOGIN type");
    let bad_ids = CryptoLoginAttrEx { credential_id: 1 << 24, ..CryptoLoginAttrEx::from_login(&login()?) };
    assert_eq!(errno(sim.crypto_login_create(ctx, &bad_ids)), Some(EOPNOTSUPP), "the type before the ids");
    let mut sim = sim_of("extends = \"bf3\"\n[hca_cap]\ngeneral_obj_types = [\"crypto_login\"]\n")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    let bad = DekInitAttr { key_purpose: 7, ..dek_attr(pd, &key(), 1, None) };
    assert_eq!(errno(sim.dek_create(ctx, &bad)), Some(EOPNOTSUPP), "no DEK type, before the purpose");
    Ok(())
}

#[test]
fn vfio_other_and_non_devx_contexts() -> TestResult {
    let mut sim = Simulator::with_profile("bf3")?;
    let real = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(real)?;
    for dev in ["0000:08:00.0", "rxe0"] {
        let ctx = sim.open_ibv_device(dev)?;
        assert_eq!(errno(sim.crypto_login(ctx, &login()?)), Some(EOPNOTSUPP), "{dev}");
        assert_eq!(errno(sim.crypto_login_query_state(ctx)), Some(EOPNOTSUPP), "{dev}");
        assert_eq!(errno(sim.crypto_logout(ctx)), Some(EOPNOTSUPP), "{dev}");
        assert_eq!(errno(sim.dek_create(ctx, &dek_attr(pd, &key(), 1, None))), Some(EOPNOTSUPP), "{dev}");
    }
    let mut sim = Simulator::with_profile("cx6dx-no-devx")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    assert_eq!(errno(sim.crypto_login(ctx, &login()?)), Some(EINVAL), "the kernel refuses DEVX objects");
    let ex = CryptoLoginAttrEx::from_login(&login()?);
    assert_eq!(errno(sim.dek_create(ctx, &dek_attr(pd, &key(), 0, None))), Some(EINVAL), "no session");
    assert_eq!(errno(sim.crypto_login_create(ctx, &ex)), Some(EINVAL));
    Ok(())
}

#[test]
fn the_dek_table_is_bounded_by_log_max_num_deks() -> TestResult {
    let mut sim = sim_of("extends = \"bf3\"\n[crypto_cap]\nlog_max_num_deks = 1\n")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    let a = dek(&mut sim, ctx, pd)?;
    let _b = dek(&mut sim, ctx, pd)?;
    assert_eq!(errno(sim.dek_create(ctx, &dek_attr(pd, &key(), 1, None))), Some(ENOMEM), "LIM_ERR");
    sim.dek_destroy(a)?;
    dek(&mut sim, ctx, pd)?;
    Ok(())
}

#[test]
fn closing_a_context_destroys_its_logins_and_deks_in_firmware() -> TestResult {
    let mut sim = Simulator::with_profile("cx6dx")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let other = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    sim.crypto_login(ctx, &login()?)?;
    let d = dek(&mut sim, ctx, pd)?;
    sim.crypto_login(other, &login()?)?;
    assert_eq!(inspect::crypto_object_counts(&sim, 0), Some((3, 1)));
    sim.close_device(ctx)?;
    assert_eq!(inspect::crypto_object_counts(&sim, 0), Some((1, 0)), "the other context's session stays");
    assert_eq!(errno(sim.dek_query(d, 0)), Some(EINVAL), "a stale handle");
    assert_eq!(sim.crypto_login_query_state(other)?, mlx5_dv::CryptoLoginState::Valid);
    Ok(())
}

#[test]
fn a_wrapped_dek_is_read_only_under_a_valid_login() -> TestResult {
    let mut sim = Simulator::with_profile("cx7")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    sim.crypto_login(ctx, &login()?)?;
    let wrapped = wrap_key(&test_import_kek(), &key())?;
    let d = sim.dek_create(ctx, &dek_attr(pd, &wrapped, 0, None))?;
    sim.crypto_logout(ctx)?;
    assert_eq!(errno(sim.dek_query(d, 0)), Some(EINVAL), "no valid login left");
    sim.crypto_login(ctx, &login()?)?;
    assert_eq!(sim.dek_query(d, 0)?.opaque, [9; 8]);
    sim.dek_destroy(d)?;
    Ok(())
}

#[test]
fn the_login_mailbox_carries_ids_and_credential_bytes_as_given() -> TestResult {
    let mut sim = Simulator::with_profile("cx6dx")?;
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let ctl = sim.sim_control().ok_or("simulator control")?;
    ctl.record_commands(true);
    let mut ex = CryptoLoginAttrEx::from_login(&login()?);
    ex.credential.extend_from_slice(&[0xee; 16]);
    // 64 bytes: libmlx5 copies them all; the 16 past the field land in reserved bytes.
    let obj = sim.crypto_login_create(ctx, &ex)?;
    let long = CryptoLoginAttrEx { credential: vec![1; crypto::MAX_CREDENTIAL_LEN_EX + 1], ..ex.clone() };
    assert_eq!(errno(sim.crypto_login_create(ctx, &long)), Some(EINVAL), "past the command");
    let cmds = sim.sim_control().ok_or("simulator control")?.take_commands();
    let creates: Vec<_> = cmds.iter().filter(|c| c.opcode == opcode::CREATE_GENERAL_OBJECT).collect();
    assert_eq!(creates.len(), 1, "the over-long credential never reaches the device");
    let input = &creates[0].input;
    assert_eq!(prm::general_obj_in::OBJ_TYPE.get(input)?, u64::from(prm::obj_type::CRYPTO_LOGIN));
    assert_eq!(input.get(80..144), Some(&ex.credential[..]), "credential at byte 64 of the object");
    sim.crypto_login_destroy(obj)?;
    Ok(())
}

/// A connected loopback QP with mkey ops, a region, and the context and PD.
fn qp(sim: &mut Simulator) -> Result<(ContextHandle, PdHandle, Qp, mlx5_dv::Mr), Box<dyn std::error::Error>> {
    let ctx = sim.open_ibv_device("mlx5_0")?;
    let pd = sim.alloc_pd(ctx)?;
    let cq = sim.create_cq(ctx, 16)?;
    // Inline room for a signature and a crypto BSF after the translations.
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 256 };
    let dv = DvQpInitAttr::new(mlx5_dv::DvQpCreateFlags::empty(), dv_qp::WITH_MKEY_CONFIGURE);
    let attr = QpInitAttr::rc(pd, cq.handle, cap, Some(dv));
    let (a, b) = (sim.create_qp(&attr)?, sim.create_qp(&attr)?);
    let port = sim.query_port(ctx, 1)?;
    for (q, p) in [(&a, &b), (&b, &a)] {
        for step in QpModify::connect(A::LOCAL_WRITE | A::REMOTE_WRITE, QpDest::to(p, &port)) {
            sim.modify_qp(q, &step)?;
        }
    }
    let buf = sim.alloc_buf(8192)?;
    let mr = sim.reg_mr(pd, buf.addr, 8192, A::LOCAL_WRITE)?;
    Ok((ctx, pd, a, mr))
}

fn attr(dek: DekHandle, order: u32) -> CryptoAttr {
    CryptoAttr {
        crypto_standard: crypto::STANDARD_AES_XTS,
        encrypt_on_tx: true,
        signature_crypto_order: order,
        data_unit_size: sig::BLOCK_512,
        initial_tweak: std::array::from_fn(|i| i as u8),
        dek: Some(dek),
        keytag: *b"KEYTAG01",
        comp_mask: 0,
    }
}

fn configure(sim: &mut Simulator, qp: &Qp, mkey: Mkey, setters: Vec<WrOp>) -> mlx5_dv::Result<()> {
    let flags = SendFlags::INLINE;
    let n = setters.len() as u8;
    let conf =
        WrOp::MkeyConfigure { wr_id: 1, flags, mkey, num_setters: n, conf_flags: MkeyConfFlags::empty(), comp_mask: 0 };
    sim.post_send(qp, &[vec![conf], setters].concat())
}

#[test]
fn the_crypto_bsf_follows_the_engines_and_the_dek() -> TestResult {
    for (profile, reversed) in [("cx6dx", true), ("cx6dx-single-block", false), ("bf3", true)] {
        let mut sim = Simulator::with_profile(profile)?;
        let (ctx, pd, q, mr) = qp(&mut sim)?;
        let d = dek(&mut sim, ctx, pd)?;
        let mkey = sim.create_mkey(&MkeyInitAttr { pd, create_flags: F::INDIRECT | F::CRYPTO, max_entries: 4 })?;
        assert_eq!(inspect::crypto_bsf(&mut sim, &mkey), Ok(None), "{profile}: no attributes yet");
        let layout = WrOp::SetMkeyLayoutList(vec![Sge { addr: mr.addr, length: 512, lkey: mr.lkey }]);
        let a = attr(d, crypto::SIGNATURE_AFTER_CRYPTO_ON_TX);
        configure(&mut sim, &q, mkey, vec![WrOp::SetMkeyCrypto(a), layout])?;
        let bsf = inspect::crypto_bsf(&mut sim, &mkey).map_err(|e| format!("errno {e}"))?.ok_or("a BSF")?;
        assert_eq!(bsf.fields.enc_order, enc_order::ENCRYPTED_RAW_WIRE, "{profile}");
        assert_eq!(bsf.fields.bs_pointer, 1, "512-byte data units");
        assert!(bsf.fields.dek_pointer != 0 && bsf.fields.dek_pointer <= 0xff_ffff);
        let mut want = a.initial_tweak;
        if reversed {
            want.reverse();
        }
        assert_eq!(bsf.xts_init_tweak, want, "{profile}: the tweak's byte order");
        assert_eq!(&bsf.keytag, b"KEYTAG01");
        // Kept by the next configure, which sets only the layout.
        let longer = WrOp::SetMkeyLayoutList(vec![Sge { addr: mr.addr, length: 1024, lkey: mr.lkey }]);
        let single = profile == "cx6dx-single-block";
        let posted = configure(&mut sim, &q, mkey, vec![longer]);
        assert_eq!(errno(posted), single.then_some(EINVAL), "{profile}: 1024 bytes against a 512-byte unit");
        let now = inspect::crypto_bsf(&mut sim, &mkey);
        assert_eq!(now.err(), single.then_some(EINVAL), "{profile}: the provider's view agrees");
    }
    Ok(())
}

#[test]
fn raw_orders_with_signatures_in_both_domains_are_refused() -> TestResult {
    let mut sim = Simulator::with_profile("cx7")?;
    let (ctx, pd, q, mr) = qp(&mut sim)?;
    let d = dek(&mut sim, ctx, pd)?;
    let flags = F::INDIRECT | F::CRYPTO | F::BLOCK_SIGNATURE;
    let mkey = sim.create_mkey(&MkeyInitAttr { pd, create_flags: flags, max_entries: 4 })?;
    let dom = SigBlockDomain::crc(sig::BLOCK_512, sig::CRC32, 0);
    let both = SigBlockAttr { mem: Some(dom), wire: Some(dom), ..SigBlockAttr::default() };
    for (order, ok) in [(crypto::SIGNATURE_AFTER_CRYPTO_ON_TX, false), (crypto::SIGNATURE_BEFORE_CRYPTO_ON_TX, true)] {
        let layout = WrOp::SetMkeyLayoutList(vec![Sge { addr: mr.addr, length: 512, lkey: mr.lkey }]);
        let setters = vec![WrOp::SetMkeySigBlock(both), WrOp::SetMkeyCrypto(attr(d, order)), layout];
        let posted = configure(&mut sim, &q, mkey, setters);
        assert_eq!(errno(posted), (!ok).then_some(EINVAL), "order {order}: EINVAL at wr_complete");
        let bsf = inspect::crypto_bsf(&mut sim, &mkey);
        assert_eq!(bsf.is_ok(), ok, "order {order}: {bsf:?}");
        if let Ok(Some(b)) = bsf {
            assert_eq!((b.fields.bsf_size, b.fields.enc_order), (3, enc_order::ENCRYPTED_WIRE_SIGNATURE));
        }
    }
    Ok(())
}

/// One random crypto call; indexes pick among the objects made so far.
#[derive(Debug, Clone)]
enum Step {
    Open,
    Close(usize),
    Login { ctx: usize, good: bool, comp_mask: u64, ids: u32 },
    Logout(usize),
    State(usize),
    LoginCreate { ctx: usize, good: bool, len: usize },
    LoginQuery(usize, u64),
    LoginDestroy(usize),
    Dek { ctx: usize, size: u32, purpose: u32, comp_mask: u64, login: Option<usize>, wrapped: bool, tag: bool },
    DekQuery(usize, u64),
    DekDestroy(usize),
    Fault { op: u8, state: u8, fail: bool },
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    let small = || prop_oneof![Just(0u32), Just(1), Just(2), any::<u32>()];
    let mask = || prop_oneof![Just(0u64), Just(1), any::<u64>()];
    prop_oneof![
        Just(Step::Open),
        (0usize..4).prop_map(Step::Close),
        (0usize..4, any::<bool>(), mask(), prop_oneof![Just(1u32), any::<u32>()])
            .prop_map(|(ctx, good, comp_mask, ids)| Step::Login { ctx, good, comp_mask, ids }),
        (0usize..4).prop_map(Step::Logout),
        (0usize..4).prop_map(Step::State),
        (0usize..4, any::<bool>(), prop_oneof![Just(48usize), 0usize..300])
            .prop_map(|(ctx, good, len)| Step::LoginCreate { ctx, good, len }),
        (0usize..6, mask()).prop_map(|(i, m)| Step::LoginQuery(i, m)),
        (0usize..6).prop_map(Step::LoginDestroy),
        (0usize..4, small(), small(), mask(), proptest::option::of(0usize..6), any::<bool>(), any::<bool>()).prop_map(
            |(ctx, size, purpose, comp_mask, login, wrapped, tag)| Step::Dek {
                ctx,
                size,
                purpose,
                comp_mask,
                login,
                wrapped,
                tag
            }
        ),
        (0usize..8, mask()).prop_map(|(i, m)| Step::DekQuery(i, m)),
        (0usize..8).prop_map(Step::DekDestroy),
        (0u8..3, 0u8..4, any::<bool>()).prop_map(|(op, state, fail)| Step::Fault { op, state, fail }),
    ]
}

fn pick<T: Copy>(v: &[T], i: usize) -> Option<T> {
    v.get(i % v.len().max(1)).copied()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Random crypto calls with bad values, stale handles and injected faults: no panic, only
    /// errno the calls can return, and nothing left in firmware once every context is closed
    /// (unless a fault made a destroy fail, which leaks as on a device).
    #[test]
    fn random_crypto_sequences_never_panic(
        profile in proptest::sample::select(vec!["cx5", "cx6dx", "cx6dx-no-devx", "cx7", "bf3"]),
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        use mlx5_dv::errno::{EEXIST, EIO, ENOENT};
        use mlx5_dv::{Call, Reply};
        let mut sim = Simulator::with_profile(profile).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        let (mut ctxs, mut pds, mut logins, mut deks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut destroy_faults = 0;
        let good = login().map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        let wrapped = wrap_key(&test_import_kek(), &key()).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
        for s in steps {
            let call = match s {
                Step::Open => Some(Call::OpenIbvDevice { device: "mlx5_0".into() }),
                Step::Close(i) => pick(&ctxs, i).map(|ctx| Call::CloseDevice { ctx }),
                Step::Login { ctx, good: g, comp_mask, ids } => pick(&ctxs, ctx).map(|ctx| {
                    let credential = if g { good.credential } else { [0x11; 48] };
                    Call::CryptoLogin { ctx, attr: CryptoLoginAttr { credential_id: ids, import_kek_id: 1, credential, comp_mask } }
                }),
                Step::Logout(i) => pick(&ctxs, i).map(|ctx| Call::CryptoLogout { ctx }),
                Step::State(i) => pick(&ctxs, i).map(|ctx| Call::CryptoLoginQueryState { ctx }),
                Step::LoginCreate { ctx, good: g, len } => pick(&ctxs, ctx).map(|ctx| {
                    let mut credential = if g { good.credential.to_vec() } else { vec![0x22; 48] };
                    credential.resize(len, 0);
                    Call::CryptoLoginCreate { ctx, attr: CryptoLoginAttrEx { credential, ..CryptoLoginAttrEx::from_login(&good) } }
                }),
                Step::LoginQuery(i, comp_mask) => pick(&logins, i).map(|login| Call::CryptoLoginQuery { login, comp_mask }),
                Step::LoginDestroy(i) => pick(&logins, i).map(|login| Call::CryptoLoginDestroy { login }),
                Step::Dek { ctx, size, purpose, comp_mask, login: l, wrapped: w, tag } => {
                    match (pick(&ctxs, ctx), pick(&pds, ctx)) {
                        (Some(ctx), Some(pd)) => {
                            let k = if w { wrapped.clone() } else { key() };
                            let attr = DekInitAttr {
                                key_size: size,
                                key_purpose: purpose,
                                has_keytag: tag,
                                ..dek_attr(pd, &k, comp_mask, l.and_then(|i| pick(&logins, i)))
                            };
                            Some(Call::DekCreate { ctx, attr })
                        }
                        _ => None,
                    }
                }
                Step::DekQuery(i, comp_mask) => pick(&deks, i).map(|dek| Call::DekQuery { dek, comp_mask }),
                Step::DekDestroy(i) => pick(&deks, i).map(|dek| Call::DekDestroy { dek }),
                Step::Fault { op, state, fail } => {
                    let opcodes = [opcode::CREATE_GENERAL_OBJECT, opcode::QUERY_GENERAL_OBJECT, opcode::DESTROY_GENERAL_OBJECT];
                    let opc = opcodes[usize::from(op)];
                    let rule = if fail || opc == opcode::DESTROY_GENERAL_OBJECT {
                        destroy_faults += usize::from(opc == opcode::DESTROY_GENERAL_OBJECT);
                        mlx5_dv::FaultRule::fail_next(opc, prm::status::BAD_RES_STATE_ERR, 1)
                    } else {
                        let obj_type = if state % 2 == 0 { prm::obj_type::DEK } else { prm::obj_type::CRYPTO_LOGIN };
                        mlx5_dv::FaultRule::ObjectState { opcode: opc, obj_type, state, skip: 0, times: 1 }
                    };
                    proptest::prop_assert!(sim.add_fault(rule).is_ok());
                    None
                }
            };
            let Some(call) = call else { continue };
            let reply = call.apply(&mut sim);
            match &reply {
                Reply::OpenIbvDevice(Ok(c)) => {
                    ctxs.push(*c);
                    if let Ok(pd) = sim.alloc_pd(*c) {
                        pds.push(pd);
                    }
                }
                Reply::CryptoLoginCreate(Ok(l)) => logins.push(*l),
                Reply::DekCreate(Ok(d)) => deks.push(*d),
                _ => {}
            }
            if let Some(e) = reply.error() {
                proptest::prop_assert!([EINVAL, EOPNOTSUPP, ENOMEM, EEXIST, ENOENT, EIO].contains(&e.errno()), "{}", e);
            }
        }
        sim.clear_faults();
        for c in ctxs {
            let _ = sim.close_device(c);
        }
        let (l, d) = inspect::crypto_object_counts(&sim, 0).unwrap_or((99, 99));
        if destroy_faults == 0 {
            proptest::prop_assert_eq!((l, d), (0, 0), "crypto objects leaked past close");
        }
    }
}
