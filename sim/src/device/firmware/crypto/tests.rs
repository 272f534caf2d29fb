//! The crypto objects from mailboxes: logins checked against the stored credential, DEKs
//! unwrapped (or not) by the device's mode, queries, destroys, gating and state faults.

use mlx5_dv::prm::{self, opcode, status};
use mlx5_dv::profile::{test_credential, test_import_kek};

use super::super::{CommandFault, Firmware, ObjectState};
use super::*;
use crate::crypto::wrap_key;
use crate::profile::ShippedProfiles;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const UID: u16 = 7;

fn fw(name: &str) -> Result<Firmware, Box<dyn std::error::Error>> {
    Ok(Firmware::new(&Profile::builtin(name)?)?)
}

fn exec(f: &mut Firmware, input: &[u8], out_len: usize) -> (u8, u32, Vec<u8>) {
    let mut out = vec![0u8; out_len];
    f.exec(input, &mut out);
    let (s, y) = prm::read_status(&out);
    (s, y, out)
}

fn hdr(opc: u16, ty: u16, id: u32, len: usize) -> Result<Vec<u8>, prm::FieldError> {
    let mut m = prm::new_input(len, opc, UID, 0);
    prm::general_obj_in::OBJ_TYPE.set(&mut m, u64::from(ty))?;
    prm::general_obj_in::OBJ_ID.set(&mut m, u64::from(id))?;
    Ok(m)
}

fn login_in(credential: &[u8], cred_id: u32, kek_id: u32) -> Result<Vec<u8>, prm::FieldError> {
    let mut m = hdr(opcode::CREATE_GENERAL_OBJECT, obj_type::CRYPTO_LOGIN, 0, pc::CREATE_IN_SIZE)?;
    lo::CREDENTIAL_POINTER.at(pc::OBJ_BIT).set(&mut m, u64::from(cred_id))?;
    lo::SESSION_IMPORT_KEK_PTR.at(pc::OBJ_BIT).set(&mut m, u64::from(kek_id))?;
    let at = pc::OBJ_BYTE + lo::CREDENTIAL.start;
    m[at..at + credential.len()].copy_from_slice(credential);
    Ok(m)
}

fn dek_in(pdn: u32, key: &[u8], keytag: bool) -> Result<Vec<u8>, prm::FieldError> {
    let mut m = hdr(opcode::CREATE_GENERAL_OBJECT, obj_type::DEK, 0, pc::CREATE_IN_SIZE)?;
    ko::KEY_SIZE.at(pc::OBJ_BIT).set(&mut m, u64::from(ko::KEY_SIZE_256))?;
    ko::HAS_KEYTAG.at(pc::OBJ_BIT).set(&mut m, u64::from(keytag))?;
    ko::KEY_PURPOSE.at(pc::OBJ_BIT).set(&mut m, u64::from(ko::KEY_PURPOSE_AES_XTS))?;
    ko::PD.at(pc::OBJ_BIT).set(&mut m, u64::from(pdn))?;
    let at = pc::OBJ_BYTE + ko::OPAQUE.start;
    m[at..at + 8].copy_from_slice(b"opaque!!");
    let at = pc::OBJ_BYTE + ko::KEY.start;
    m[at..at + key.len()].copy_from_slice(key);
    Ok(m)
}

fn pd(f: &mut Firmware) -> Result<u32, prm::FieldError> {
    let (_, _, out) = exec(f, &prm::new_input(16, opcode::ALLOC_PD, UID, 0), 16);
    Ok(prm::pd::PD.get(&out)? as u32)
}

fn id_of(out: &[u8]) -> Result<u32, prm::FieldError> {
    Ok(prm::general_obj_out::OBJ_ID.get(out)? as u32)
}

fn plain_key(keytag: bool) -> Vec<u8> {
    let mut k: Vec<u8> = (0..64u8).collect();
    if keytag {
        k.extend_from_slice(b"KEYTAG01");
    }
    k
}

#[test]
fn a_login_needs_the_stored_credential_wrapped_with_the_named_kek() -> TestResult {
    let mut f = fw("cx6dx")?;
    let good = wrap_key(&test_import_kek(), &test_credential())?;
    let (s, _, out) = exec(&mut f, &login_in(&good, 1, 1)?, 16);
    assert_eq!(s, status::OK);
    let id = id_of(&out)?;
    let (s, _, out) = exec(&mut f, &hdr(opcode::QUERY_GENERAL_OBJECT, obj_type::CRYPTO_LOGIN, id, 16)?, 272);
    assert_eq!(s, status::OK);
    let obj = &out[pc::OBJ_BYTE..];
    assert_eq!((lo::STATE.get(obj)?, lo::CREDENTIAL_POINTER.get(obj)?), (0, 1));

    let wrong_kek = wrap_key(&[0x77; 32], &test_credential())?;
    let mut other = test_credential();
    other[0] ^= 1;
    let wrong_cred = wrap_key(&test_import_kek(), &other)?;
    for (input, syn) in [
        (login_in(&wrong_kek, 1, 1)?, crypto_syndrome::BAD_CREDENTIAL),
        (login_in(&wrong_cred, 1, 1)?, crypto_syndrome::BAD_CREDENTIAL),
        (login_in(&good, 2, 1)?, crypto_syndrome::NO_SUCH_SECRET),
        (login_in(&good, 1, 9)?, crypto_syndrome::NO_SUCH_SECRET),
    ] {
        let (s, y, _) = exec(&mut f, &input, 16);
        assert_eq!((s, y), (status::BAD_PARAM_ERR, syn));
    }
    assert_eq!(f.crypto_object_counts(), (1, 0));
    Ok(())
}

#[test]
fn a_wrapped_device_unwraps_deks_with_the_session_kek() -> TestResult {
    let mut f = fw("cx6dx")?;
    let pdn = pd(&mut f)?;
    let wrapped = wrap_key(&test_import_kek(), &plain_key(true))?;
    let (s, y, _) = exec(&mut f, &dek_in(pdn, &wrapped, true)?, 16);
    assert_eq!((s, y), (status::BAD_PARAM_ERR, crypto_syndrome::BAD_WRAP), "no login yet");
    let cred = wrap_key(&test_import_kek(), &test_credential())?;
    assert_eq!(exec(&mut f, &login_in(&cred, 1, 1)?, 16).0, status::OK);
    let (s, _, out) = exec(&mut f, &dek_in(pdn, &wrapped, true)?, 16);
    assert_eq!(s, status::OK);
    let id = id_of(&out)?;
    let dek = f.dek(id).ok_or("the DEK exists")?;
    assert_eq!((dek.key1.as_slice(), dek.key2.as_slice()), (&plain_key(false)[..32], &plain_key(false)[32..]));
    assert_eq!(dek.keytag, Some(*b"KEYTAG01"));
    let (s, y, _) = exec(&mut f, &dek_in(pdn, &plain_key(true), true)?, 16);
    assert_eq!((s, y), (status::BAD_PARAM_ERR, crypto_syndrome::BAD_WRAP), "plaintext on a wrapped device");

    let (s, _, out) = exec(&mut f, &hdr(opcode::QUERY_GENERAL_OBJECT, obj_type::DEK, id, 16)?, 272);
    assert_eq!(s, status::OK);
    let obj = &out[pc::OBJ_BYTE..];
    assert_eq!((ko::STATE.get(obj)?, ko::HAS_KEYTAG.get(obj)?, ko::PD.get(obj)?), (0, 1, u64::from(pdn)));
    assert_eq!(&obj[ko::OPAQUE], b"opaque!!");
    assert!(obj[ko::KEY].iter().all(|b| *b == 0), "the key is never read back");
    Ok(())
}

#[test]
fn a_plaintext_device_takes_keys_as_given() -> TestResult {
    let mut f = fw("bf3")?;
    let pdn = pd(&mut f)?;
    let (s, _, out) = exec(&mut f, &dek_in(pdn, &plain_key(false), false)?, 16);
    assert_eq!(s, status::OK);
    let dek = f.dek(id_of(&out)?).ok_or("the DEK exists")?;
    assert_eq!((dek.key1.len(), dek.keytag), (32, None));
    let cred = wrap_key(&test_import_kek(), &test_credential())?;
    let (s, y, _) = exec(&mut f, &login_in(&cred, 1, 1)?, 16);
    assert_eq!((s, y), (status::BAD_PARAM_ERR, crypto_syndrome::UNSUPPORTED), "no wrapped mode, no login");
    let (s, y, _) = exec(&mut f, &dek_in(pdn + 100, &plain_key(false), false)?, 16);
    assert_eq!((s, y), (status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT), "unknown PD");
    Ok(())
}

#[test]
fn object_types_outside_general_obj_types_are_refused() -> TestResult {
    let mut f = fw("cx5")?;
    let pdn = pd(&mut f)?;
    let (s, y, _) = exec(&mut f, &dek_in(pdn, &plain_key(false), false)?, 16);
    assert_eq!((s, y), (status::BAD_PARAM_ERR, crypto_syndrome::UNSUPPORTED));
    let (s, _, _) = exec(&mut f, &hdr(opcode::CREATE_GENERAL_OBJECT, obj_type::DEK, 0, 16)?, 16);
    assert_eq!(s, status::BAD_PARAM_ERR);
    Ok(())
}

#[test]
fn destroy_and_query_need_the_owner_and_a_live_object() -> TestResult {
    let mut f = fw("bf3")?;
    let pdn = pd(&mut f)?;
    let (_, _, out) = exec(&mut f, &dek_in(pdn, &plain_key(false), false)?, 16);
    let id = id_of(&out)?;
    assert_eq!(f.general_objects_of_uid(UID), [(obj_type::DEK, id)]);
    let mut other = hdr(opcode::DESTROY_GENERAL_OBJECT, obj_type::DEK, id, 16)?;
    prm::mbox_in::UID.set(&mut other, u64::from(UID + 1))?;
    assert_eq!(exec(&mut f, &other, 16).0, status::BAD_PARAM_ERR, "another uid's object");
    let short = hdr(opcode::QUERY_GENERAL_OBJECT, obj_type::DEK, id, 16)?;
    assert_eq!(exec(&mut f, &short, 64).0, status::BAD_OUTP_LEN_ERR);
    let destroy = hdr(opcode::DESTROY_GENERAL_OBJECT, obj_type::DEK, id, 16)?;
    assert_eq!(exec(&mut f, &destroy, 16).0, status::OK);
    assert_eq!(exec(&mut f, &destroy, 16).0, status::BAD_PARAM_ERR, "already gone");
    assert!(f.general_objects_of_uid(UID).is_empty());
    Ok(())
}

#[test]
fn state_rules_leave_the_object_in_their_state() -> TestResult {
    let mut f = fw("bf3")?;
    let pdn = pd(&mut f)?;
    f.add_fault(CommandFault {
        opcode: opcode::QUERY_GENERAL_OBJECT,
        skip: 1,
        times: 1,
        status: status::OK,
        syndrome: 0,
        object_state: Some(ObjectState { obj_type: obj_type::DEK, state: ko::STATE_ERROR }),
    });
    let (_, _, out) = exec(&mut f, &dek_in(pdn, &plain_key(false), false)?, 16);
    let q = hdr(opcode::QUERY_GENERAL_OBJECT, obj_type::DEK, id_of(&out)?, 16)?;
    let states: Vec<u64> =
        (0..3).map(|_| ko::STATE.get(&exec(&mut f, &q, 272).2[pc::OBJ_BYTE..]).unwrap_or(99)).collect();
    assert_eq!(states, [0, 1, 1], "skipped once, then ERROR, which stays");
    Ok(())
}
