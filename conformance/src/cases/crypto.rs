//! Crypto login, DEKs and the crypto setter, without traffic: §12.51–55.
//!
//! Successful logins and wrapped DEKs need the device's credential and import KEK; the suite
//! knows them only for the simulator, whose test values are published (README), so those
//! cases skip elsewhere. A wrong credential is refused everywhere.

use mlx5_dv::errno::{EEXIST, EINVAL, ENOENT, EOPNOTSUPP};
use mlx5_dv::prm::crypto::{self as pc, encryption_key_obj as ko};
use mlx5_dv::prm::{self, opcode, status};
use mlx5_dv::profile::{TEST_CREDENTIAL_ID, TEST_IMPORT_KEK_ID, test_credential, test_import_kek};
use mlx5_dv::{
    AccessFlags, Backend, ContextHandle, CryptoAttr, CryptoLoginAttr, CryptoLoginAttrEx, CryptoLoginState, DekHandle,
    DekInitAttr, DekState, DvQpCreateFlags, FaultRule, MkeyConfFlags, MkeyInitFlags as F, PdHandle, SendFlags, WrOp,
    crypto, crypto_cap, sig, wc_opcode,
};

use super::fixture::{CAP, Side, connect, indirect_mkey, ok_cqe, open, pattern, qp_attr, region, sge};
use super::{ctl, open_pd, with_opcode};
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_errno, expect_ok};

const WRAPPED: &[Need] = &[Need::Mlx5Device, Need::WrappedCrypto, Need::Devx, Need::TestSecrets];

pub(super) const CASES: &[Case] = &[
    Case { name: "crypto.login_comp_mask_first", covers: &[51], needs: &[Need::Mlx5Device], run: login_comp_mask },
    Case {
        name: "crypto.login_without_wrapped_mode",
        covers: &[51],
        needs: &[Need::Mlx5Device, Need::NoWrappedCrypto],
        run: login_without_wrapped,
    },
    Case {
        name: "crypto.login_ids_are_24_bit",
        covers: &[51],
        needs: &[Need::Mlx5Device, Need::WrappedCrypto],
        run: login_ids,
    },
    Case {
        name: "crypto.login_wrong_credential",
        covers: &[51],
        needs: &[Need::Mlx5Device, Need::WrappedCrypto, Need::Devx],
        run: login_wrong_credential,
    },
    Case { name: "crypto.login_session_and_logout", covers: &[51, 52], needs: WRAPPED, run: session },
    Case { name: "crypto.login_objects_coexist", covers: &[51, 52], needs: WRAPPED, run: login_objects },
    Case {
        name: "crypto.login_state_from_device",
        covers: &[52],
        needs: &[Need::Mlx5Device, Need::WrappedCrypto, Need::Devx, Need::TestSecrets, Need::SimControl],
        run: login_state_from_device,
    },
    Case { name: "crypto.no_session", covers: &[52], needs: &[Need::Mlx5Device], run: no_session },
    Case {
        name: "crypto.dek_without_engine_first",
        covers: &[53],
        needs: &[Need::Mlx5Device, Need::NoCryptoEngine],
        run: dek_without_engine,
    },
    Case {
        name: "crypto.dek_field_checks",
        covers: &[53],
        needs: &[Need::Mlx5Device, Need::DekObjects],
        run: dek_field_checks,
    },
    Case {
        name: "crypto.dek_import_method",
        covers: &[53],
        needs: &[Need::Mlx5Device, Need::DekObjects],
        run: dek_import_method,
    },
    Case {
        name: "crypto.dek_plaintext_lifecycle",
        covers: &[53, 54],
        needs: &[Need::Mlx5Device, Need::PlaintextCrypto, Need::Devx],
        run: dek_plaintext,
    },
    Case { name: "crypto.dek_wrapped_lifecycle", covers: &[53, 54], needs: WRAPPED, run: dek_wrapped },
    Case {
        name: "crypto.dek_mailbox",
        covers: &[53],
        needs: &[Need::Mlx5Device, Need::DekObjects, Need::Devx, Need::SimControl, Need::TestSecrets],
        run: dek_mailbox,
    },
    Case {
        name: "crypto.dek_state_from_device",
        covers: &[54],
        needs: &[Need::Mlx5Device, Need::DekObjects, Need::Devx, Need::SimControl, Need::TestSecrets],
        run: dek_state_from_device,
    },
    Case {
        name: "crypto.setter_errors",
        covers: &[55],
        needs: &[Need::Mlx5Device, Need::DekObjects, Need::Devx],
        run: setter_errors,
    },
];

/// The test credential wrapped under the test import KEK, as `mlx5dv_crypto_login` takes it.
fn test_login() -> Check<CryptoLoginAttr> {
    let wrapped = mlx5_sim::crypto::wrap_key(&test_import_kek(), &test_credential())
        .map_err(|e| Verdict::fail("wrap the test credential", "48 bytes", e.to_string()))?;
    let credential = wrapped.try_into().map_err(|v: Vec<u8>| Verdict::fail("wrapped length", 48, v.len()))?;
    Ok(CryptoLoginAttr {
        credential_id: TEST_CREDENTIAL_ID,
        import_kek_id: TEST_IMPORT_KEK_ID,
        credential,
        comp_mask: 0,
    })
}

fn test_login_ex() -> Check<CryptoLoginAttrEx> {
    let a = test_login()?;
    Ok(CryptoLoginAttrEx {
        credential_id: a.credential_id,
        import_kek_id: a.import_kek_id,
        credential: a.credential.to_vec(),
        comp_mask: 0,
    })
}

/// key1 | key2 (AES-256 halves) | keytag.
pub(super) fn plain_key() -> Vec<u8> {
    let mut k = pattern(64, 0x3c);
    k.extend_from_slice(b"KEYTAG42");
    k
}

/// DEK attributes with a 256-bit key and keytag, `key` at the start of the key field.
fn dek_attr(pd: PdHandle, key: &[u8], comp_mask: u64, login: Option<mlx5_dv::CryptoLoginHandle>) -> DekInitAttr {
    let mut field = [0u8; crypto::KEY_LEN];
    field.iter_mut().zip(key).for_each(|(d, s)| *d = *s);
    DekInitAttr {
        key_size: crypto::KEY_SIZE_256,
        has_keytag: true,
        key_purpose: crypto::KEY_PURPOSE_AES_XTS,
        pd,
        opaque: *b"opaque-1",
        key: field,
        comp_mask,
        crypto_login: login,
    }
}

fn wrapped_key() -> Check<Vec<u8>> {
    mlx5_sim::crypto::wrap_key(&test_import_kek(), &plain_key())
        .map_err(|e| Verdict::fail("wrap the test key", "80 bytes", e.to_string()))
}

/// A DEK in whatever import mode the device has: plaintext, or wrapped under a login object
/// (then the test secrets are needed). Returns the DEK and the login object, if any.
pub(super) fn any_dek(
    b: &mut dyn Backend,
    env: &Env,
    ctx: ContextHandle,
    pd: PdHandle,
) -> Check<(DekHandle, Option<mlx5_dv::CryptoLoginHandle>)> {
    let bit = crypto::DEK_INIT_ATTR_CRYPTO_LOGIN;
    if env.caps.device.crypto.wrapped_import_method & crypto_cap::WRAPPED_IMPORT_AES_XTS == 0 {
        let dek = expect_ok("plaintext mlx5dv_dek_create", b.dek_create(ctx, &dek_attr(pd, &plain_key(), bit, None)))?;
        return Ok((dek, None));
    }
    if let Some(why) = env.unmet(Need::TestSecrets) {
        return Err(Verdict::skip(format!("a wrapped DEK {why}")));
    }
    let login = expect_ok("mlx5dv_crypto_login_create", b.crypto_login_create(ctx, &test_login_ex()?))?;
    let attr = dek_attr(pd, &wrapped_key()?, bit, Some(login));
    Ok((expect_ok("wrapped mlx5dv_dek_create", b.dek_create(ctx, &attr))?, Some(login)))
}

fn login_comp_mask(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _) = open_pd(b, env)?;
    let attr = CryptoLoginAttr { credential_id: 1 << 24, import_kek_id: 0, credential: [0; 48], comp_mask: 1 };
    expect_errno("crypto_login with comp_mask 1 (before the caps)", b.crypto_login(ctx, &attr), EINVAL)?;
    let ex = CryptoLoginAttrEx { credential_id: 1 << 24, import_kek_id: 0, credential: vec![0; 48], comp_mask: 1 };
    expect_errno("crypto_login_create with comp_mask 1", b.crypto_login_create(ctx, &ex), EINVAL)?;
    expect_errno("crypto_logout after the refusals: no session", b.crypto_logout(ctx), ENOENT)
}

fn login_without_wrapped(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _) = open_pd(b, env)?;
    let attr = CryptoLoginAttr { credential_id: 1 << 24, import_kek_id: 0, credential: [0; 48], comp_mask: 0 };
    expect_errno("crypto_login without wrapped mode (before the ids)", b.crypto_login(ctx, &attr), EOPNOTSUPP)?;
    let ex = CryptoLoginAttrEx { credential_id: 1, import_kek_id: 1, credential: vec![0; 48], comp_mask: 0 };
    expect_errno("crypto_login_create without wrapped mode", b.crypto_login_create(ctx, &ex), EOPNOTSUPP)
}

fn login_ids(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _) = open_pd(b, env)?;
    for (cred, kek) in [(1u32 << 24, 1u32), (1, 0xff00_0000), (0x8000_0000, 0x0100_0000)] {
        let attr = CryptoLoginAttr { credential_id: cred, import_kek_id: kek, credential: [0; 48], comp_mask: 0 };
        expect_errno(&format!("crypto_login ids 0x{cred:x}/0x{kek:x}"), b.crypto_login(ctx, &attr), EINVAL)?;
        let ex = CryptoLoginAttrEx { credential_id: cred, import_kek_id: kek, credential: vec![], comp_mask: 0 };
        expect_errno("crypto_login_create with a 25-bit id", b.crypto_login_create(ctx, &ex), EINVAL)?;
    }
    check_eq("no session after the refusals", b.crypto_login_query_state(ctx).ok(), Some(CryptoLoginState::NoLogin))
}

fn login_wrong_credential(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _) = open_pd(b, env)?;
    let attr = CryptoLoginAttr { credential_id: 0, import_kek_id: 0, credential: [0x5a; 48], comp_mask: 0 };
    expect_errno("crypto_login with a credential that does not unwrap", b.crypto_login(ctx, &attr), EINVAL)?;
    let state = expect_ok("crypto_login_query_state", b.crypto_login_query_state(ctx))?;
    check_eq("a refused login stores no session", state, CryptoLoginState::NoLogin)
}

fn session(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _) = open_pd(b, env)?;
    let login = test_login()?;
    expect_ok("crypto_login", b.crypto_login(ctx, &login))?;
    let state = expect_ok("crypto_login_query_state", b.crypto_login_query_state(ctx))?;
    check_eq("state after login", state, CryptoLoginState::Valid)?;
    expect_errno("a second crypto_login", b.crypto_login(ctx, &login), EEXIST)?;
    let bad = CryptoLoginAttr { comp_mask: 1, ..login };
    expect_errno("a second crypto_login with comp_mask 1 (comp_mask first)", b.crypto_login(ctx, &bad), EINVAL)?;
    expect_ok("crypto_logout", b.crypto_logout(ctx))?;
    let state = expect_ok("crypto_login_query_state after logout", b.crypto_login_query_state(ctx))?;
    check_eq("state after logout", state, CryptoLoginState::NoLogin)?;
    expect_errno("a second crypto_logout", b.crypto_logout(ctx), ENOENT)?;
    expect_ok("crypto_login again after logout", b.crypto_login(ctx, &login))
}

fn login_objects(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _) = open_pd(b, env)?;
    let attr = test_login_ex()?;
    let first = expect_ok("crypto_login_create", b.crypto_login_create(ctx, &attr))?;
    let second = expect_ok("a second crypto_login_create (no EEXIST)", b.crypto_login_create(ctx, &attr))?;
    expect_ok("crypto_login beside login objects", b.crypto_login(ctx, &test_login()?))?;
    for l in [first, second] {
        let q = expect_ok("crypto_login_query", b.crypto_login_query(l, 0))?;
        check_eq("login object state", q.state, CryptoLoginState::Valid)?;
    }
    expect_errno("crypto_login_query with comp_mask 1", b.crypto_login_query(first, 1), EINVAL)?;
    let short = CryptoLoginAttrEx { credential: attr.credential[..40].to_vec(), ..attr.clone() };
    expect_errno("a 40-byte credential does not unwrap", b.crypto_login_create(ctx, &short), EINVAL)?;
    expect_ok("crypto_login_destroy", b.crypto_login_destroy(first))?;
    expect_errno("crypto_login_query of a destroyed object", b.crypto_login_query(first, 0), EINVAL)?;
    expect_errno("crypto_login_destroy twice", b.crypto_login_destroy(first), EINVAL)?;
    let q = expect_ok("crypto_login_query of the other", b.crypto_login_query(second, 0))?;
    check_eq("the other object is untouched", q.state, CryptoLoginState::Valid)?;
    expect_ok("crypto_login_destroy", b.crypto_login_destroy(second))
}

fn login_state_from_device(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _) = open_pd(b, env)?;
    let obj = prm::obj_type::CRYPTO_LOGIN;
    let rule = |state| FaultRule::ObjectState {
        opcode: opcode::QUERY_GENERAL_OBJECT,
        obj_type: obj,
        state,
        skip: 0,
        times: 1,
    };
    expect_ok("crypto_login", b.crypto_login(ctx, &test_login()?))?;
    let login = expect_ok("crypto_login_create", b.crypto_login_create(ctx, &test_login_ex()?))?;
    expect_ok("add a state rule", ctl(b)?.add_fault(rule(1)))?;
    let state = expect_ok("query_state of a revoked session", b.crypto_login_query_state(ctx))?;
    check_eq("device state 1", state, CryptoLoginState::Invalid)?;
    expect_ok("add a state rule", ctl(b)?.add_fault(rule(1)))?;
    let q = expect_ok("crypto_login_query of a revoked object", b.crypto_login_query(login, 0))?;
    check_eq("device state 1 on a login object", q.state, CryptoLoginState::Invalid)?;
    expect_ok("add a state rule", ctl(b)?.add_fault(rule(6)))?;
    expect_errno("query_state with device state 6", b.crypto_login_query_state(ctx), EINVAL)?;
    ctl(b)?.clear_faults();
    expect_ok("crypto_logout of an invalid session", b.crypto_logout(ctx))
}

fn no_session(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, _) = open_pd(b, env)?;
    let state = expect_ok("crypto_login_query_state without a login", b.crypto_login_query_state(ctx))?;
    check_eq("state", state, CryptoLoginState::NoLogin)?;
    expect_errno("crypto_logout without a login", b.crypto_logout(ctx), ENOENT)
}

fn dek_without_engine(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd) = open_pd(b, env)?;
    let attr = DekInitAttr { key_purpose: 9, key_size: 9, comp_mask: 0xf0, ..dek_attr(pd, &plain_key(), 0, None) };
    expect_errno("dek_create without an engine (before the fields)", b.dek_create(ctx, &attr), EOPNOTSUPP)
}

fn dek_field_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd) = open_pd(b, env)?;
    let bit = crypto::DEK_INIT_ATTR_CRYPTO_LOGIN;
    // Attributes the device accepts, where the suite can make them, so that each refusal is
    // the field's own.
    let wrapped = env.caps.device.crypto.wrapped_import_method & crypto_cap::WRAPPED_IMPORT_AES_XTS != 0;
    let devx = env.unmet(Need::Devx).is_none();
    let base = if !devx {
        None
    } else if !wrapped {
        Some(dek_attr(pd, &plain_key(), bit, None))
    } else if env.unmet(Need::TestSecrets).is_none() {
        let login = expect_ok("crypto_login_create", b.crypto_login_create(ctx, &test_login_ex()?))?;
        Some(dek_attr(pd, &wrapped_key()?, bit, Some(login)))
    } else {
        None
    };
    let attrs = base.unwrap_or_else(|| dek_attr(pd, &plain_key(), bit, None));
    for (what, attr) in [
        ("key_purpose 1", DekInitAttr { key_purpose: 1, ..attrs }),
        ("key_size 2", DekInitAttr { key_size: 2, ..attrs }),
        ("comp_mask 0x3", DekInitAttr { comp_mask: 0x3, ..attrs }),
    ] {
        expect_errno(&format!("dek_create with {what}"), b.dek_create(ctx, &attr), EINVAL)?;
    }
    if let Some(good) = base {
        let dek = expect_ok("dek_create with every field valid", b.dek_create(ctx, &good))?;
        expect_ok("dek_destroy", b.dek_destroy(dek))?;
    }
    Ok(())
}

fn dek_import_method(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd) = open_pd(b, env)?;
    let bit = crypto::DEK_INIT_ATTR_CRYPTO_LOGIN;
    let wrapped = env.caps.device.crypto.wrapped_import_method & crypto_cap::WRAPPED_IMPORT_AES_XTS != 0;
    expect_errno(
        "dek_create with no CRYPTO_LOGIN bit and no session",
        b.dek_create(ctx, &dek_attr(pd, &plain_key(), 0, None)),
        EINVAL,
    )?;
    if wrapped {
        let attr = dek_attr(pd, &plain_key(), bit, None);
        expect_errno("a plaintext DEK on a wrapped-import device", b.dek_create(ctx, &attr), EINVAL)?;
    }
    Ok(())
}

fn dek_plaintext(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd) = open_pd(b, env)?;
    let attr = dek_attr(pd, &plain_key(), crypto::DEK_INIT_ATTR_CRYPTO_LOGIN, None);
    let dek = expect_ok("plaintext dek_create", b.dek_create(ctx, &attr))?;
    let q = expect_ok("dek_query", b.dek_query(dek, 0))?;
    check_eq("state and opaque", (q.state, q.opaque), (DekState::Ready, *b"opaque-1"))?;
    expect_errno("dek_query with comp_mask 1", b.dek_query(dek, 1), EINVAL)?;
    let second =
        expect_ok("a second DEK with the same key", b.dek_create(ctx, &DekInitAttr { opaque: [7; 8], ..attr }))?;
    check_eq("its opaque", expect_ok("dek_query", b.dek_query(second, 0))?.opaque, [7; 8])?;
    expect_ok("dek_destroy", b.dek_destroy(dek))?;
    expect_errno("dek_query of a destroyed DEK", b.dek_query(dek, 0), EINVAL)?;
    expect_errno("dek_destroy twice", b.dek_destroy(dek), EINVAL)?;
    expect_ok("dek_destroy", b.dek_destroy(second))
}

fn dek_wrapped(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd) = open_pd(b, env)?;
    let bit = crypto::DEK_INIT_ATTR_CRYPTO_LOGIN;
    let login = expect_ok("crypto_login_create", b.crypto_login_create(ctx, &test_login_ex()?))?;
    let dek = expect_ok("wrapped dek_create", b.dek_create(ctx, &dek_attr(pd, &wrapped_key()?, bit, Some(login))))?;
    let q = expect_ok("dek_query", b.dek_query(dek, 0))?;
    check_eq("state and opaque", (q.state, q.opaque), (DekState::Ready, *b"opaque-1"))?;
    let unwrapped = dek_attr(pd, &plain_key(), bit, Some(login));
    expect_errno("a key that does not unwrap", b.dek_create(ctx, &unwrapped), EINVAL)?;
    // The global session is the legacy way: no comp_mask bit.
    expect_ok("crypto_login", b.crypto_login(ctx, &test_login()?))?;
    let legacy = expect_ok("dek_create under the session", b.dek_create(ctx, &dek_attr(pd, &wrapped_key()?, 0, None)))?;
    expect_ok("crypto_logout", b.crypto_logout(ctx))?;
    expect_ok("dek_query after logout, under the login object", b.dek_query(legacy, 0))?;
    expect_ok("crypto_login_destroy", b.crypto_login_destroy(login))?;
    expect_ok("dek_destroy after the login is gone", b.dek_destroy(legacy))?;
    expect_ok("dek_destroy", b.dek_destroy(dek))
}

fn dek_mailbox(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd) = open_pd(b, env)?;
    ctl(b)?.record_commands(true);
    let made = any_dek(b, env, ctx, pd);
    let cmds = ctl(b)?.take_commands();
    ctl(b)?.record_commands(false);
    made?;
    let creates = with_opcode(&cmds, opcode::CREATE_GENERAL_OBJECT);
    let dek = creates
        .iter()
        .find(|c| prm::general_obj_in::OBJ_TYPE.get(&c.input).ok() == Some(u64::from(prm::obj_type::DEK)))
        .ok_or_else(|| Verdict::fail("a CREATE_GENERAL_OBJECT of type DEK", "one", creates.len()))?;
    check_eq("its status", dek.status, status::OK)?;
    let at = |f: prm::Field| f.at(pc::OBJ_BIT).get(&dek.input).ok();
    check_eq(
        "key_size, has_keytag, key_purpose",
        (at(ko::KEY_SIZE), at(ko::HAS_KEYTAG), at(ko::KEY_PURPOSE)),
        (Some(u64::from(ko::KEY_SIZE_256)), Some(1), Some(3)),
    )?;
    let bytes = |r: std::ops::Range<usize>| dek.input.get(pc::OBJ_BYTE + r.start..pc::OBJ_BYTE + r.end);
    check_eq("opaque", bytes(ko::OPAQUE), Some(&b"opaque-1"[..]))?;
    let wrapped = env.caps.device.crypto.wrapped_import_method & crypto_cap::WRAPPED_IMPORT_AES_XTS != 0;
    let key = if wrapped { wrapped_key()? } else { plain_key() };
    let mut field = vec![0u8; crypto::KEY_LEN];
    field[..key.len()].copy_from_slice(&key);
    check_eq("all 128 key bytes, as given", bytes(ko::KEY), Some(field.as_slice()))
}

fn dek_state_from_device(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd) = open_pd(b, env)?;
    let (dek, _) = any_dek(b, env, ctx, pd)?;
    let rule = |state| FaultRule::ObjectState {
        opcode: opcode::QUERY_GENERAL_OBJECT,
        obj_type: prm::obj_type::DEK,
        state,
        skip: 0,
        times: 1,
    };
    expect_ok("add a state rule", ctl(b)?.add_fault(rule(1)))?;
    let q = expect_ok("dek_query of a DEK in ERROR", b.dek_query(dek, 0))?;
    check_eq("device state 1", q.state, DekState::Error)?;
    expect_ok("add a state rule", ctl(b)?.add_fault(rule(0x42)))?;
    expect_errno("dek_query with device state 0x42", b.dek_query(dek, 0), EINVAL)?;
    ctl(b)?.clear_faults();
    expect_ok("dek_destroy", b.dek_destroy(dek))
}

/// A loopback pair whose QPs have inline room for a signature and a crypto BSF after the
/// translations (the UMR's BSFs must fit in `max_inline_data` + 4).
pub(super) fn crypto_pair(b: &mut dyn Backend, env: &Env) -> Check<(Side, Side)> {
    let cap = mlx5_dv::QpCap { max_inline_data: 256, ..CAP };
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let qa = expect_ok("create the client QP", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), cap)))?;
    let cq2 = expect_ok("ibv_create_cq", b.create_cq(ctx, 64))?;
    let qb = expect_ok("create the server QP", b.create_qp(&qp_attr(pd, &cq2, DvQpCreateFlags::empty(), cap)))?;
    let (a, s) = (Side { ctx, pd, cq, qp: qa }, Side { ctx, pd, cq: cq2, qp: qb });
    connect(b, &a.qp, s.ctx, &s.qp)?;
    connect(b, &s.qp, a.ctx, &a.qp)?;
    Ok((a, s))
}

fn setter_errors(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, s) = crypto_pair(b, env)?;
    let (dek, _) = any_dek(b, env, s.ctx, s.pd)?;
    let (_buf, mr) = region(b, s.pd, 4096, &[], AccessFlags::LOCAL_WRITE)?;
    let mkey = indirect_mkey(b, s.pd, F::INDIRECT | F::CRYPTO, 4)?;
    let plain = indirect_mkey(b, s.pd, F::INDIRECT, 4)?;
    let good = CryptoAttr {
        crypto_standard: crypto::STANDARD_AES_XTS,
        encrypt_on_tx: true,
        signature_crypto_order: crypto::SIGNATURE_AFTER_CRYPTO_ON_TX,
        data_unit_size: sig::BLOCK_512,
        initial_tweak: [0; 16],
        dek: Some(dek),
        keytag: *b"KEYTAG42",
        comp_mask: 0,
    };
    let flags = SendFlags::SIGNALED | SendFlags::INLINE;
    let configure = |mkey, n| WrOp::MkeyConfigure {
        wr_id: 0xc0,
        flags,
        mkey,
        num_setters: n,
        conf_flags: MkeyConfFlags::empty(),
        comp_mask: 0,
    };
    let layout = WrOp::SetMkeyLayoutList(vec![sge(&mr, 0, 512)]);
    let with = |a: CryptoAttr| vec![configure(mkey, 2), WrOp::SetMkeyCrypto(a), layout.clone()];
    for (what, ops) in [
        ("the setter without a configure", vec![WrOp::SetMkeyCrypto(good)]),
        ("a mkey without CRYPTO", vec![configure(plain, 2), WrOp::SetMkeyCrypto(good), layout.clone()]),
        (
            "the setter twice in one WR",
            vec![configure(mkey, 3), WrOp::SetMkeyCrypto(good), WrOp::SetMkeyCrypto(good), layout.clone()],
        ),
        ("comp_mask 1", with(CryptoAttr { comp_mask: 1, ..good })),
        ("crypto_standard 1", with(CryptoAttr { crypto_standard: 1, ..good })),
        ("signature_crypto_order 2", with(CryptoAttr { signature_crypto_order: 2, ..good })),
        ("data_unit_size 5", with(CryptoAttr { data_unit_size: 5, ..good })),
    ] {
        expect_errno(&format!("ibv_wr_complete after {what}"), b.post_send(&s.qp, &ops), EINVAL)?;
    }
    // Attributes set by an earlier WR are kept, not "set twice": each WR may set them anew.
    for round in 0..2 {
        expect_ok(&format!("configure with the crypto setter, WR {round}"), b.post_send(&s.qp, &with(good)))?;
        ok_cqe(b, &s.cq, 0xc0, wc_opcode::DRIVER1)?;
    }
    Ok(())
}
