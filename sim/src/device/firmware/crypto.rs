//! The crypto general objects: CRYPTO_LOGIN (0x1f) and DEK (0x0c) through
//! CREATE/QUERY/DESTROY_GENERAL_OBJECT.
//!
//! A login names a stored credential and an import KEK: its 48-byte credential must
//! AES-key-unwrap under that KEK to the stored 40 bytes. A device in wrapped mode
//! (`wrapped_crypto_operational`) takes DEK keys wrapped under the import KEK of the
//! creating uid's newest valid login; otherwise it takes them in plaintext. The device
//! does not publish which login a DEK uses; newest-valid is the simulator's choice. Every
//! refusal is `BAD_PARAM_ERR` (EINVAL through the provider), the table full `LIM_ERR`.

use std::collections::BTreeMap;

use mlx5_dv::prm::crypto::{self as pc, crypto_login_obj as lo, encryption_key_obj as ko};
use mlx5_dv::prm::{self, Field, View, ViewMut, obj_type, opcode, status};

use super::objects::Numbers;
use super::{Firmware, Reject, syndrome};
use crate::crypto::{KEY_WRAP_OVERHEAD, unwrap_key};
use crate::profile::Profile;

/// Syndromes of the crypto commands (the simulator's own values).
pub mod crypto_syndrome {
    /// The object type is not in `general_obj_types`, or the device lacks the crypto mode.
    pub const UNSUPPORTED: u32 = 0x5100_0101;
    /// The credential or import KEK id names nothing stored.
    pub const NO_SUCH_SECRET: u32 = 0x5100_0102;
    /// The credential does not unwrap to the stored one.
    pub const BAD_CREDENTIAL: u32 = 0x5100_0103;
    /// A wrapped key does not unwrap, or no valid login holds a KEK for it.
    pub const BAD_WRAP: u32 = 0x5100_0104;
}

/// A login as the firmware holds it.
#[derive(Debug, Clone)]
pub(crate) struct FwLogin {
    uid: u16,
    state: u8,
    credential_id: u32,
    kek_id: u32,
    /// Creation order, to find a uid's newest login.
    seq: u64,
}

/// A DEK as the firmware holds it: the unwrapped key pair and keytag.
#[derive(Debug, Clone)]
pub struct FwDek {
    /// The uid that created it.
    pub uid: u16,
    /// READY (0) or ERROR (1), or what a fault rule left.
    pub state: u8,
    /// Its PD number.
    pub pdn: u32,
    /// The opaque bytes.
    pub opaque: [u8; 8],
    /// The AES-XTS data key (16 or 32 bytes).
    pub key1: Vec<u8>,
    /// The AES-XTS tweak key (as long as `key1`).
    pub key2: Vec<u8>,
    /// The keytag, when created with one.
    pub keytag: Option<[u8; 8]>,
    key_size: u8,
}

/// The crypto side of the firmware: what the profile stores, and the live objects.
#[derive(Debug, Clone)]
pub(super) struct FwCrypto {
    general_obj_types: u64,
    crypto: bool,
    engine: bool,
    multi_block: bool,
    wrapped: bool,
    max_deks: u64,
    credentials: BTreeMap<u32, Vec<u8>>,
    keks: BTreeMap<u32, Vec<u8>>,
    ids: Numbers,
    logins: BTreeMap<u32, FwLogin>,
    deks: BTreeMap<u32, FwDek>,
    next_seq: u64,
}

impl FwCrypto {
    pub(super) fn new(profile: &Profile) -> Self {
        let h = &profile.hca_cap;
        FwCrypto {
            general_obj_types: h
                .general_obj_types
                .iter()
                .fold(0u64, |m, t| m | 1u64.checked_shl(u32::from(t.number())).unwrap_or(0)),
            crypto: h.crypto,
            engine: h.aes_xts_single_block_le_tweak || h.aes_xts_multi_block_be_tweak,
            multi_block: h.aes_xts_multi_block_be_tweak,
            wrapped: h.crypto && profile.crypto_cap.wrapped_crypto_operational,
            max_deks: 1u64 << profile.crypto_cap.log_max_num_deks.min(31),
            credentials: profile.crypto.credentials.iter().map(|c| (c.id, c.credential.clone())).collect(),
            keks: profile.crypto.import_keks.iter().map(|k| (k.id, k.key.clone())).collect(),
            ids: Numbers::new(1, 1 << 24),
            logins: BTreeMap::new(),
            deks: BTreeMap::new(),
            next_seq: 0,
        }
    }

    fn supports(&self, ty: u16) -> bool {
        self.general_obj_types & 1u64.checked_shl(u32::from(ty)).unwrap_or(0) != 0
    }

    /// The import KEK of `uid`'s newest valid login.
    fn session_kek(&self, uid: u16) -> Option<&[u8]> {
        let login =
            self.logins.values().filter(|l| l.uid == uid && l.state == lo::STATE_VALID).max_by_key(|l| l.seq)?;
        self.keks.get(&login.kek_id).map(Vec::as_slice)
    }
}

const fn bad(syn: u32) -> Reject {
    Reject(status::BAD_PARAM_ERR, syn)
}

fn get(f: Field, buf: &[u8]) -> Result<u64, Reject> {
    f.get(buf).map_err(Reject::from)
}

impl Firmware {
    /// CREATE_GENERAL_OBJECT.
    pub(super) fn create_general_obj(&mut self, uid: u16, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        let ty = get(prm::general_obj_in::OBJ_TYPE, input)? as u16;
        if ty == obj_type::RESERVED_QPN || ty == obj_type::SCHEDULING_ELEMENT {
            let id = if ty == obj_type::RESERVED_QPN {
                self.create_reserved_qpn(uid, input)?
            } else {
                self.create_sched_elem(uid, input)?
            };
            prm::general_obj_out::OBJ_ID.set(out, u64::from(id))?;
            return Ok(());
        }
        if !self.crypto.supports(ty) {
            return Err(bad(crypto_syndrome::UNSUPPORTED));
        }
        let obj = input
            .get(pc::OBJ_BYTE..pc::CREATE_IN_SIZE)
            .ok_or(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT))?;
        let id = match ty {
            obj_type::CRYPTO_LOGIN => self.create_login(uid, obj)?,
            obj_type::DEK => self.create_dek(uid, obj)?,
            _ => return Err(bad(crypto_syndrome::UNSUPPORTED)),
        };
        if let Some(state) = self.object_state_fault(opcode::CREATE_GENERAL_OBJECT, ty) {
            self.set_object_state(ty, id, state);
        }
        prm::general_obj_out::OBJ_ID.set(out, u64::from(id))?;
        Ok(())
    }

    fn create_login(&mut self, uid: u16, obj: &[u8]) -> Result<u32, Reject> {
        let c = &mut self.crypto;
        if !c.crypto || !c.wrapped {
            return Err(bad(crypto_syndrome::UNSUPPORTED));
        }
        let v = View::<lo::CryptoLoginObj>::new(obj)?;
        let (credential_id, kek_id) = (v.credential_pointer(), v.session_import_kek_ptr());
        let stored = c.credentials.get(&credential_id).ok_or(bad(crypto_syndrome::NO_SUCH_SECRET))?;
        let kek = c.keks.get(&kek_id).ok_or(bad(crypto_syndrome::NO_SUCH_SECRET))?;
        let wrapped = obj.get(lo::CREDENTIAL).ok_or(bad(syndrome::BAD_FIELD))?;
        match unwrap_key(kek, wrapped) {
            Ok(plain) if plain == *stored => {}
            _ => return Err(bad(crypto_syndrome::BAD_CREDENTIAL)),
        }
        let id = c.ids.take().ok_or(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS))?;
        let seq = c.next_seq;
        c.next_seq = seq.saturating_add(1);
        c.logins.insert(id, FwLogin { uid, state: lo::STATE_VALID, credential_id, kek_id, seq });
        Ok(id)
    }

    fn create_dek(&mut self, uid: u16, obj: &[u8]) -> Result<u32, Reject> {
        let v = View::<ko::EncryptionKeyObj>::new(obj)?;
        if !self.crypto.crypto || !self.crypto.engine {
            return Err(bad(crypto_syndrome::UNSUPPORTED));
        }
        let half = match v.key_size() {
            ko::KEY_SIZE_128 => 16,
            ko::KEY_SIZE_256 => 32,
            _ => return Err(bad(syndrome::BAD_FIELD)),
        };
        if v.key_purpose() != ko::KEY_PURPOSE_AES_XTS {
            return Err(bad(syndrome::BAD_FIELD));
        }
        if !self.pds.contains_key(v.pd()) {
            return Err(bad(syndrome::NO_SUCH_OBJECT));
        }
        let c = &mut self.crypto;
        if c.deks.len() as u64 >= c.max_deks {
            return Err(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS));
        }
        let plain_len = 2 * half + if v.has_keytag() { 8 } else { 0 };
        let field = obj.get(ko::KEY).ok_or(bad(syndrome::BAD_FIELD))?;
        let plain = if c.wrapped {
            let kek = c.session_kek(uid).ok_or(bad(crypto_syndrome::BAD_WRAP))?;
            let wrapped = field.get(..plain_len + KEY_WRAP_OVERHEAD).ok_or(bad(syndrome::BAD_FIELD))?;
            unwrap_key(kek, wrapped).map_err(|_| bad(crypto_syndrome::BAD_WRAP))?
        } else {
            field.get(..plain_len).ok_or(bad(syndrome::BAD_FIELD))?.to_vec()
        };
        let (key1, rest) = plain.split_at_checked(half).ok_or(bad(syndrome::BAD_FIELD))?;
        let (key2, tag) = rest.split_at_checked(half).ok_or(bad(syndrome::BAD_FIELD))?;
        let keytag = if v.has_keytag() { Some(tag.try_into().map_err(|_| bad(syndrome::BAD_FIELD))?) } else { None };
        let mut opaque = [0u8; 8];
        opaque.copy_from_slice(obj.get(ko::OPAQUE).ok_or(bad(syndrome::BAD_FIELD))?);
        let id = c.ids.take().ok_or(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS))?;
        let dek = FwDek {
            uid,
            state: ko::STATE_READY,
            pdn: v.pd(),
            opaque,
            key1: key1.to_vec(),
            key2: key2.to_vec(),
            keytag,
            key_size: v.key_size(),
        };
        c.deks.insert(id, dek);
        Ok(id)
    }

    /// QUERY_GENERAL_OBJECT.
    pub(super) fn query_general_obj(&mut self, uid: u16, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        let ty = get(prm::general_obj_in::OBJ_TYPE, input)? as u16;
        let id = get(prm::general_obj_in::OBJ_ID, input)? as u32;
        if ty == obj_type::SCHEDULING_ELEMENT {
            return self.query_sched_elem(uid, id, out);
        }
        if out.len() < pc::QUERY_OUT_SIZE {
            return Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT));
        }
        if !self.crypto.supports(ty) {
            return Err(bad(crypto_syndrome::UNSUPPORTED));
        }
        if self.object_uid(ty, id) != Some(uid) {
            return Err(bad(syndrome::NO_SUCH_OBJECT));
        }
        if let Some(state) = self.object_state_fault(opcode::QUERY_GENERAL_OBJECT, ty) {
            self.set_object_state(ty, id, state);
        }
        let obj = out
            .get_mut(pc::OBJ_BYTE..pc::QUERY_OUT_SIZE)
            .ok_or(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT))?;
        let c = &self.crypto;
        match ty {
            obj_type::CRYPTO_LOGIN => {
                let l = c.logins.get(&id).ok_or(bad(syndrome::NO_SUCH_OBJECT))?;
                let mut v = ViewMut::<lo::CryptoLoginObj>::new(obj)?;
                v.set_state(l.state & 0xf)?;
                v.set_credential_pointer(l.credential_id)?;
                v.set_session_import_kek_ptr(l.kek_id)?;
            }
            obj_type::DEK => {
                let d = c.deks.get(&id).ok_or(bad(syndrome::NO_SUCH_OBJECT))?;
                // A wrapped DEK is read only under a valid login (man mlx5dv_dek_create).
                if c.wrapped && c.session_kek(uid).is_none() {
                    return Err(bad(crypto_syndrome::BAD_WRAP));
                }
                let mut v = ViewMut::<ko::EncryptionKeyObj>::new(obj)?;
                v.set_state(d.state)?;
                v.set_key_size(d.key_size)?;
                v.set_has_keytag(d.keytag.is_some())?;
                v.set_key_purpose(ko::KEY_PURPOSE_AES_XTS)?;
                v.set_pd(d.pdn)?;
                obj.get_mut(ko::OPAQUE).ok_or(bad(syndrome::BAD_FIELD))?.copy_from_slice(&d.opaque);
            }
            _ => return Err(bad(crypto_syndrome::UNSUPPORTED)),
        }
        Ok(())
    }

    /// MODIFY_GENERAL_OBJECT: scheduling elements (the crypto objects are not modified).
    pub(super) fn modify_general_obj(&mut self, uid: u16, input: &[u8]) -> Result<(), Reject> {
        let ty = get(prm::general_obj_in::OBJ_TYPE, input)? as u16;
        let id = get(prm::general_obj_in::OBJ_ID, input)? as u32;
        if ty != obj_type::SCHEDULING_ELEMENT {
            return Err(bad(crypto_syndrome::UNSUPPORTED));
        }
        self.modify_sched_elem(uid, id, input)
    }

    /// DESTROY_GENERAL_OBJECT.
    pub(super) fn destroy_general_obj(&mut self, uid: u16, input: &[u8]) -> Result<(), Reject> {
        let ty = get(prm::general_obj_in::OBJ_TYPE, input)? as u16;
        let id = get(prm::general_obj_in::OBJ_ID, input)? as u32;
        if ty == obj_type::RESERVED_QPN {
            return self.destroy_reserved_qpn(uid, id);
        }
        if ty == obj_type::SCHEDULING_ELEMENT {
            return self.destroy_sched_elem(uid, id);
        }
        if self.object_uid(ty, id) != Some(uid) {
            return Err(bad(syndrome::NO_SUCH_OBJECT));
        }
        let c = &mut self.crypto;
        let gone = match ty {
            obj_type::CRYPTO_LOGIN => c.logins.remove(&id).is_some(),
            obj_type::DEK => c.deks.remove(&id).is_some(),
            _ => false,
        };
        if !gone {
            return Err(bad(syndrome::NO_SUCH_OBJECT));
        }
        c.ids.give_back(id);
        Ok(())
    }

    fn object_uid(&self, ty: u16, id: u32) -> Option<u16> {
        match ty {
            obj_type::CRYPTO_LOGIN => self.crypto.logins.get(&id).map(|l| l.uid),
            obj_type::DEK => self.crypto.deks.get(&id).map(|d| d.uid),
            _ => None,
        }
    }

    fn set_object_state(&mut self, ty: u16, id: u32, state: u8) {
        match ty {
            obj_type::CRYPTO_LOGIN => {
                if let Some(l) = self.crypto.logins.get_mut(&id) {
                    l.state = state;
                }
            }
            obj_type::DEK => {
                if let Some(d) = self.crypto.deks.get_mut(&id) {
                    d.state = state;
                }
            }
            _ => {}
        }
    }

    /// The state an object-state fault rule gives the object of this command, if one acts.
    fn object_state_fault(&mut self, op: u16, ty: u16) -> Option<u8> {
        for r in &mut self.faults {
            let Some(s) = r.rule.object_state else { continue };
            if r.rule.opcode != op || s.obj_type != ty || r.acted >= r.rule.times {
                continue;
            }
            r.seen = r.seen.saturating_add(1);
            if r.seen > r.rule.skip {
                r.acted = r.acted.saturating_add(1);
                return Some(s.state);
            }
        }
        None
    }

    /// The DEK with this object id (the data path reads its keys).
    pub fn dek(&self, id: u32) -> Option<&FwDek> {
        self.crypto.deks.get(&id)
    }

    /// The general objects created under `uid`, DEKs first, then logins, reserved QPN
    /// blocks and scheduling elements (children first), as
    /// `(obj_type, obj_id)`, for the kernel's cleanup of a closed context.
    pub fn general_objects_of_uid(&self, uid: u16) -> Vec<(u16, u32)> {
        let c = &self.crypto;
        let deks = c.deks.iter().filter(|(_, d)| d.uid == uid).map(|(i, _)| (obj_type::DEK, *i));
        let logins = c.logins.iter().filter(|(_, l)| l.uid == uid).map(|(i, _)| (obj_type::CRYPTO_LOGIN, *i));
        let blocks = self.reserved.of_uid(uid).map(|f| (obj_type::RESERVED_QPN, f));
        let sched = self.sched.of_uid(uid).map(|i| (obj_type::SCHEDULING_ELEMENT, i));
        deks.chain(logins).chain(blocks).chain(sched).collect()
    }

    /// The device has the multi-block engine, which reads the BSF's tweak big-endian.
    pub fn crypto_multi_block(&self) -> bool {
        self.crypto.multi_block
    }

    /// Number of live logins and DEKs.
    pub fn crypto_object_counts(&self) -> (usize, usize) {
        (self.crypto.logins.len(), self.crypto.deks.len())
    }
}

#[cfg(test)]
mod tests;
