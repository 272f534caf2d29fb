//! Crypto login and DEKs as libmlx5 does them (`verbs.c`): the global session of
//! `mlx5dv_crypto_login`, login objects, `mlx5dv_dek_*`, each check in the provider's order,
//! the CREATE/QUERY/DESTROY_GENERAL_OBJECT mailboxes through the kernel's DEVX path, and the
//! crypto attributes a CRYPTO mkey carries.

use std::collections::BTreeMap;

use mlx5_dv::errno::{EEXIST, EINVAL, ENOENT, EOPNOTSUPP};
use mlx5_dv::prm::crypto::{self as pc, crypto_login_obj as lo, encryption_key_obj as ko};
use mlx5_dv::prm::{self, Field, obj_type, opcode};
use mlx5_dv::{
    BackendId, ContextHandle, CryptoAttr, CryptoLoginAttr, CryptoLoginAttrEx, CryptoLoginHandle, CryptoLoginQueryAttr,
    CryptoLoginState, DekAttr, DekHandle, DekInitAttr, DekState, Error, HandleTable, Op, Result, crypto, crypto_cap,
};

use super::{BsfState, CtxKind, Lower, Provider};
use crate::kernel::{self, DevxUid, cmd_error, internal};

/// The crypto attributes of a CRYPTO mkey (`struct mlx5_crypto_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MkeyCrypto {
    /// Where the attributes stand.
    pub state: BsfState,
    /// The attributes of the last `mlx5dv_wr_set_mkey_crypto`.
    pub attr: Option<CryptoAttr>,
}

impl MkeyCrypto {
    /// A configure WR keeps attributes set in an earlier one (`UPDATED` becomes `SET`).
    pub(super) fn on_configure(&mut self) {
        if self.state == BsfState::Updated {
            self.state = BsfState::Set;
        }
    }
}

/// A crypto login object or the global session: the firmware object and where it lives.
#[derive(Debug, Clone, Copy)]
struct LoginObj {
    ctx: ContextHandle,
    obj_id: u32,
}

/// A DEK (`struct mlx5dv_dek`).
#[derive(Debug, Clone, Copy)]
struct DekObj {
    ctx: ContextHandle,
    obj_id: u32,
}

/// The provider's crypto objects.
#[derive(Debug, Clone)]
pub(super) struct CryptoObjects {
    logins: HandleTable<CryptoLoginHandle, LoginObj>,
    deks: HandleTable<DekHandle, DekObj>,
    /// `mctx->crypto_login`: the global session's object id, per context.
    sessions: BTreeMap<ContextHandle, u32>,
}

impl CryptoObjects {
    pub(super) fn new(backend: BackendId) -> Self {
        CryptoObjects { logins: HandleTable::new(backend), deks: HandleTable::new(backend), sessions: BTreeMap::new() }
    }

    /// Forget a closing context's objects; the kernel destroys them in firmware.
    pub(super) fn forget_context(&mut self, ctx: ContextHandle) {
        for h in self.logins.handles_where(|l| l.ctx == ctx) {
            let _ = self.logins.take(h, Op::CloseDevice);
        }
        for h in self.deks.handles_where(|d| d.ctx == ctx) {
            let _ = self.deks.take(h, Op::CloseDevice);
        }
        self.sessions.remove(&ctx);
    }

    /// The firmware id of a live DEK, for the crypto BSF.
    pub(super) fn dek_obj_id(&self, dek: DekHandle) -> Option<u32> {
        self.deks.get(dek, Op::PostSend).ok().map(|d| d.obj_id)
    }
}

/// A kernel context's DEVX uid and device, or EOPNOTSUPP (VFIO and other providers have no
/// crypto or other DEVX-backed dv ops).
pub(super) fn kernel_ctx(p: &Provider, ctx: ContextHandle, op: Op) -> Result<(DevxUid, usize)> {
    let c = p.contexts.get(ctx, op)?;
    match c.kind {
        CtxKind::Kernel { devx, .. } => Ok((devx, c.dev)),
        CtxKind::Vfio | CtxKind::Other => Err(Error::new(op, EOPNOTSUPP, "this context has no DEVX-backed dv ops")),
    }
}

pub(super) fn put(op: Op, buf: &mut [u8], f: Field, v: u64) -> Result<()> {
    f.set(buf, v).map_err(|e| internal(op, e))
}

pub(super) fn general_hdr(op: Op, buf: &mut [u8], opc: u16, ty: u16, id: u32) -> Result<()> {
    prm::write_header(buf, opc, 0, 0);
    put(op, buf, prm::general_obj_in::OBJ_TYPE, u64::from(ty))?;
    put(op, buf, prm::general_obj_in::OBJ_ID, u64::from(id))
}

impl Provider {
    pub(super) fn devx_create(&self, low: &mut Lower<'_>, ctx: ContextHandle, input: &mut [u8], op: Op) -> Result<u32> {
        let (uid, dev) = kernel_ctx(self, ctx, op)?;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let mut out = [0u8; pc::CREATE_OUT_SIZE];
        kernel::devx_cmd(d, uid, input, &mut out)
            .map_err(|e| cmd_error(op, kernel::cmd_status_err(e, &out), &out, "CREATE_GENERAL_OBJECT"))?;
        prm::general_obj_out::OBJ_ID.get(&out).map(|v| v as u32).map_err(|e| internal(op, e))
    }

    /// `mlx5dv_devx_obj_query` of a general object; the object's bytes.
    fn devx_query(&self, low: &mut Lower<'_>, ctx: ContextHandle, ty: u16, id: u32, op: Op) -> Result<Vec<u8>> {
        let (uid, dev) = kernel_ctx(self, ctx, op)?;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let mut input = [0u8; pc::HDR_IN_SIZE];
        general_hdr(op, &mut input, opcode::QUERY_GENERAL_OBJECT, ty, id)?;
        let mut out = vec![0u8; pc::QUERY_OUT_SIZE];
        kernel::devx_cmd(d, uid, &mut input, &mut out)
            .map_err(|e| cmd_error(op, kernel::cmd_status_err(e, &out), &out, "QUERY_GENERAL_OBJECT"))?;
        Ok(out.split_off(pc::OBJ_BYTE))
    }

    /// `mlx5dv_devx_obj_destroy`: the kernel destroys the object; its errno comes back as is.
    pub(super) fn devx_destroy(&self, low: &mut Lower<'_>, ctx: ContextHandle, ty: u16, id: u32, op: Op) -> Result<()> {
        let (uid, dev) = kernel_ctx(self, ctx, op)?;
        let d = low.devices.get_mut(dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let uid = match uid {
            DevxUid::Uid(u) => u,
            DevxUid::None { .. } => 0,
        };
        kernel::destroy_general_obj(d, uid, ty, id, op)
    }

    /// `crypto_login_create` (the helper both login calls share): the caps, the 24-bit ids,
    /// then CREATE_GENERAL_OBJECT of a CRYPTO_LOGIN.
    fn login_create(
        &self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        ids: (u32, u32),
        credential: &[u8],
        op: Op,
    ) -> Result<u32> {
        let caps = self.contexts.get(ctx, op)?.caps;
        let needed = crypto_cap::FLAG_CRYPTO | crypto_cap::FLAG_WRAPPED_CRYPTO_OPERATIONAL;
        if caps.crypto.flags & needed != needed {
            return Err(Error::new(op, EOPNOTSUPP, "crypto login needs CRYPTO and WRAPPED_CRYPTO_OPERATIONAL"));
        }
        if caps.general_obj_types & 1u64 << obj_type::CRYPTO_LOGIN == 0 {
            return Err(Error::new(op, EOPNOTSUPP, "the device has no CRYPTO_LOGIN general object"));
        }
        let (credential_id, import_kek_id) = ids;
        if (credential_id | import_kek_id) & 0xff00_0000 != 0 {
            return Err(Error::new(op, EINVAL, "credential_id and import_kek_id are 24-bit"));
        }
        // The provider copies credential_len bytes unchecked; past the mailbox it would overrun.
        if credential.len() > crypto::MAX_CREDENTIAL_LEN_EX {
            return Err(Error::new(op, EINVAL, "credential_len overruns the login command"));
        }
        let mut input = vec![0u8; pc::CREATE_IN_SIZE];
        general_hdr(op, &mut input, opcode::CREATE_GENERAL_OBJECT, obj_type::CRYPTO_LOGIN, 0)?;
        put(op, &mut input, lo::CREDENTIAL_POINTER.at(pc::OBJ_BIT), u64::from(credential_id))?;
        put(op, &mut input, lo::SESSION_IMPORT_KEK_PTR.at(pc::OBJ_BIT), u64::from(import_kek_id))?;
        let at = pc::OBJ_BYTE + lo::CREDENTIAL.start;
        let dst = input.get_mut(at..at + credential.len()).ok_or_else(|| internal(op, "credential"))?;
        dst.copy_from_slice(credential);
        self.devx_create(low, ctx, &mut input, op)
    }

    /// `crypto_login_query`: the object's state, VALID or INVALID; anything else EINVAL.
    fn login_state(&self, low: &mut Lower<'_>, ctx: ContextHandle, id: u32, op: Op) -> Result<CryptoLoginState> {
        let obj = self.devx_query(low, ctx, obj_type::CRYPTO_LOGIN, id, op)?;
        match lo::STATE.get(&obj).map_err(|e| internal(op, e))? as u8 {
            lo::STATE_VALID => Ok(CryptoLoginState::Valid),
            lo::STATE_INVALID => Ok(CryptoLoginState::Invalid),
            s => Err(Error::new(op, EINVAL, format!("the login object reports unknown state {s}"))),
        }
    }

    /// `mlx5dv_crypto_login`.
    pub(crate) fn crypto_login(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        attr: &CryptoLoginAttr,
    ) -> Result<()> {
        let op = Op::CryptoLogin;
        kernel_ctx(self, ctx, op)?;
        if attr.comp_mask != 0 {
            return Err(Error::new(op, EINVAL, "comp_mask must be 0"));
        }
        if self.crypto.sessions.contains_key(&ctx) {
            return Err(Error::new(op, EEXIST, "the context already has a crypto login session"));
        }
        let id = self.login_create(low, ctx, (attr.credential_id, attr.import_kek_id), &attr.credential, op)?;
        self.crypto.sessions.insert(ctx, id);
        Ok(())
    }

    /// `mlx5dv_crypto_login_query_state`.
    pub(crate) fn crypto_login_query_state(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
    ) -> Result<CryptoLoginState> {
        let op = Op::CryptoLoginQueryState;
        kernel_ctx(self, ctx, op)?;
        match self.crypto.sessions.get(&ctx) {
            None => Ok(CryptoLoginState::NoLogin),
            Some(&id) => self.login_state(low, ctx, id, op),
        }
    }

    /// `mlx5dv_crypto_logout`.
    pub(crate) fn crypto_logout(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) -> Result<()> {
        let op = Op::CryptoLogout;
        kernel_ctx(self, ctx, op)?;
        let id = *self
            .crypto
            .sessions
            .get(&ctx)
            .ok_or_else(|| Error::new(op, ENOENT, "the context has no crypto login session"))?;
        self.devx_destroy(low, ctx, obj_type::CRYPTO_LOGIN, id, op)?;
        self.crypto.sessions.remove(&ctx);
        Ok(())
    }

    /// `mlx5dv_crypto_login_create`.
    pub(crate) fn crypto_login_create(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        attr: &CryptoLoginAttrEx,
    ) -> Result<CryptoLoginHandle> {
        let op = Op::CryptoLoginCreate;
        kernel_ctx(self, ctx, op)?;
        if attr.comp_mask != 0 {
            return Err(Error::new(op, EINVAL, "comp_mask must be 0"));
        }
        let obj_id = self.login_create(low, ctx, (attr.credential_id, attr.import_kek_id), &attr.credential, op)?;
        self.crypto.logins.insert(op, LoginObj { ctx, obj_id })
    }

    /// `mlx5dv_crypto_login_query`.
    pub(crate) fn crypto_login_query(
        &mut self,
        low: &mut Lower<'_>,
        login: CryptoLoginHandle,
        comp_mask: u64,
    ) -> Result<CryptoLoginQueryAttr> {
        let op = Op::CryptoLoginQuery;
        let l = *self.crypto.logins.get(login, op)?;
        if comp_mask != 0 {
            return Err(Error::new(op, EINVAL, "comp_mask must be 0"));
        }
        let state = self.login_state(low, l.ctx, l.obj_id, op)?;
        Ok(CryptoLoginQueryAttr { state, comp_mask })
    }

    /// `mlx5dv_crypto_login_destroy`.
    pub(crate) fn crypto_login_destroy(&mut self, low: &mut Lower<'_>, login: CryptoLoginHandle) -> Result<()> {
        let op = Op::CryptoLoginDestroy;
        let l = *self.crypto.logins.get(login, op)?;
        self.devx_destroy(low, l.ctx, obj_type::CRYPTO_LOGIN, l.obj_id, op)?;
        self.crypto.logins.take(login, op)?;
        Ok(())
    }

    /// `mlx5dv_dek_create`: the handles it names (they must be live here), then the provider's
    /// checks in order, then CREATE_GENERAL_OBJECT of a DEK.
    pub(crate) fn dek_create(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        attr: &DekInitAttr,
    ) -> Result<DekHandle> {
        let op = Op::DekCreate;
        let pdn = self.pds.get(attr.pd, op)?.pdn;
        if let Some(l) = attr.crypto_login {
            self.crypto.logins.get(l, op)?;
        }
        kernel_ctx(self, ctx, op)?;
        let caps = self.contexts.get(ctx, op)?.caps;
        let engines = crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK | crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK;
        if caps.crypto.crypto_engines & engines == 0 {
            return Err(Error::new(op, EOPNOTSUPP, "DEKs need an AES-XTS single- or multi-block engine"));
        }
        if caps.general_obj_types & 1u64 << obj_type::DEK == 0 {
            return Err(Error::new(op, EOPNOTSUPP, "the device has no DEK general object"));
        }
        if attr.key_purpose != crypto::KEY_PURPOSE_AES_XTS {
            return Err(Error::new(op, EINVAL, format!("key_purpose {} is not AES_XTS", attr.key_purpose)));
        }
        let key_size = match attr.key_size {
            crypto::KEY_SIZE_128 => ko::KEY_SIZE_128,
            crypto::KEY_SIZE_256 => ko::KEY_SIZE_256,
            k => return Err(Error::new(op, EINVAL, format!("key_size {k} is neither 128 nor 256"))),
        };
        if attr.comp_mask & !crypto::DEK_INIT_ATTR_CRYPTO_LOGIN != 0 {
            return Err(Error::new(op, EINVAL, format!("unknown comp_mask bits 0x{:x}", attr.comp_mask)));
        }
        self.check_dek_import_method(ctx, attr, caps.crypto.wrapped_import_method)?;
        let pdn = pdn.ok_or_else(|| Error::new(op, EINVAL, "the PD has no device PD number"))?;
        let mut input = vec![0u8; pc::CREATE_IN_SIZE];
        general_hdr(op, &mut input, opcode::CREATE_GENERAL_OBJECT, obj_type::DEK, 0)?;
        put(op, &mut input, ko::KEY_SIZE.at(pc::OBJ_BIT), u64::from(key_size))?;
        put(op, &mut input, ko::HAS_KEYTAG.at(pc::OBJ_BIT), u64::from(attr.has_keytag))?;
        put(op, &mut input, ko::KEY_PURPOSE.at(pc::OBJ_BIT), u64::from(ko::KEY_PURPOSE_AES_XTS))?;
        put(op, &mut input, ko::PD.at(pc::OBJ_BIT), u64::from(pdn))?;
        let copy = |input: &mut [u8], range: std::ops::Range<usize>, bytes: &[u8]| -> Result<()> {
            let dst = input.get_mut(pc::OBJ_BYTE + range.start..pc::OBJ_BYTE + range.end);
            dst.filter(|d| d.len() == bytes.len()).ok_or_else(|| internal(op, "DEK field"))?.copy_from_slice(bytes);
            Ok(())
        };
        copy(&mut input, ko::OPAQUE, &attr.opaque)?;
        copy(&mut input, ko::KEY, &attr.key)?;
        let obj_id = self.devx_create(low, ctx, &mut input, op)?;
        self.crypto.deks.insert(op, DekObj { ctx, obj_id })
    }

    /// `check_dek_import_method`: a login object means wrapped (the device must import
    /// wrapped keys), NULL with the comp_mask bit plaintext (it must not), no bit the global
    /// session (which must exist, on a wrapped device).
    fn check_dek_import_method(&self, ctx: ContextHandle, attr: &DekInitAttr, method: u8) -> Result<()> {
        let op = Op::DekCreate;
        let wrapped = method & crypto_cap::WRAPPED_IMPORT_AES_XTS != 0;
        let ok = if attr.comp_mask & crypto::DEK_INIT_ATTR_CRYPTO_LOGIN != 0 {
            attr.crypto_login.is_some() == wrapped
        } else {
            self.crypto.sessions.contains_key(&ctx) && wrapped
        };
        if ok { Ok(()) } else { Err(Error::new(op, EINVAL, "the import method does not match the device's")) }
    }

    /// `mlx5dv_dek_query`.
    pub(crate) fn dek_query(&mut self, low: &mut Lower<'_>, dek: DekHandle, comp_mask: u64) -> Result<DekAttr> {
        let op = Op::DekQuery;
        let d = *self.crypto.deks.get(dek, op)?;
        if comp_mask != 0 {
            return Err(Error::new(op, EINVAL, "comp_mask must be 0"));
        }
        let obj = self.devx_query(low, d.ctx, obj_type::DEK, d.obj_id, op)?;
        let state = match ko::STATE.get(&obj).map_err(|e| internal(op, e))? as u8 {
            ko::STATE_READY => DekState::Ready,
            ko::STATE_ERROR => DekState::Error,
            s => return Err(Error::new(op, EINVAL, format!("the DEK reports unknown state {s}"))),
        };
        let mut opaque = [0u8; 8];
        opaque.copy_from_slice(obj.get(ko::OPAQUE).ok_or_else(|| internal(op, "opaque"))?);
        Ok(DekAttr { state, opaque, comp_mask })
    }

    /// `mlx5dv_dek_destroy`.
    pub(crate) fn dek_destroy(&mut self, low: &mut Lower<'_>, dek: DekHandle) -> Result<()> {
        let op = Op::DekDestroy;
        let d = *self.crypto.deks.get(dek, op)?;
        self.devx_destroy(low, d.ctx, obj_type::DEK, d.obj_id, op)?;
        self.crypto.deks.take(dek, op)?;
        Ok(())
    }
}
