//! The [`Crypto`] family over libmlx5: `mlx5dv_crypto_login*` and `mlx5dv_dek_*`.
//!
//! Handles are resolved before any C call, so a stale PD, login object or DEK is EINVAL
//! here; the C functions would otherwise follow a dangling pointer.

use std::ffi::{c_char, c_void};

use mlx5_dv::errno::EINVAL;
use mlx5_dv::{
    ContextHandle, Crypto, CryptoLoginAttr, CryptoLoginAttrEx, CryptoLoginHandle, CryptoLoginQueryAttr,
    CryptoLoginState, DekAttr, DekHandle, DekInitAttr, DekState, Error, Op, Result, crypto,
};

use crate::backend::HwBackend;
use crate::call::{c_call, last_errno, missing};
use crate::objects::{HwDek, HwLogin};
use crate::sys::mlx5dv::*;

fn login_state(op: Op, v: mlx5dv_crypto_login_state::Type) -> Result<CryptoLoginState> {
    match v {
        0 => Ok(CryptoLoginState::Valid),
        1 => Ok(CryptoLoginState::NoLogin),
        2 => Ok(CryptoLoginState::Invalid),
        other => Err(Error::new(op, EINVAL, format!("libmlx5 returned unknown login state {other}"))),
    }
}

fn chars<const N: usize>(bytes: &[u8; N]) -> [c_char; N] {
    bytes.map(|b| b as c_char)
}

impl Crypto for HwBackend {
    fn crypto_login(&mut self, ctx: ContextHandle, attr: &CryptoLoginAttr) -> Result<()> {
        let op = Op::CryptoLogin;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = self.lib().dv.mlx5dv_crypto_login.as_ref().map_err(|_| missing(op, "mlx5dv_crypto_login"))?;
        let mut c = mlx5dv_crypto_login_attr {
            credential_id: attr.credential_id,
            import_kek_id: attr.import_kek_id,
            credential: chars(&attr.credential),
            comp_mask: attr.comp_mask,
        };
        // SAFETY: ptr is an open context; c is valid for the call.
        c_call(op, unsafe { f(ptr, &mut c) }, "mlx5dv_crypto_login")
    }

    fn crypto_login_query_state(&mut self, ctx: ContextHandle) -> Result<CryptoLoginState> {
        let op = Op::CryptoLoginQueryState;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = self
            .lib()
            .dv
            .mlx5dv_crypto_login_query_state
            .as_ref()
            .map_err(|_| missing(op, "mlx5dv_crypto_login_query_state"))?;
        let mut state: mlx5dv_crypto_login_state::Type = 0;
        // SAFETY: ptr is an open context; state is valid for writes.
        c_call(op, unsafe { f(ptr, &mut state) }, "mlx5dv_crypto_login_query_state")?;
        login_state(op, state)
    }

    fn crypto_logout(&mut self, ctx: ContextHandle) -> Result<()> {
        let op = Op::CryptoLogout;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = self.lib().dv.mlx5dv_crypto_logout.as_ref().map_err(|_| missing(op, "mlx5dv_crypto_logout"))?;
        // SAFETY: ptr is an open context.
        c_call(op, unsafe { f(ptr) }, "mlx5dv_crypto_logout")
    }

    fn crypto_login_create(&mut self, ctx: ContextHandle, attr: &CryptoLoginAttrEx) -> Result<CryptoLoginHandle> {
        let op = Op::CryptoLoginCreate;
        let ptr = self.ctx_ptr(ctx, op)?;
        let f =
            self.lib().dv.mlx5dv_crypto_login_create.as_ref().map_err(|_| missing(op, "mlx5dv_crypto_login_create"))?;
        // libmlx5 copies credential_len bytes into its command buffer without a bound.
        if attr.credential.len() > crypto::MAX_CREDENTIAL_LEN_EX {
            return Err(Error::new(op, EINVAL, "credential_len overruns the login command"));
        }
        let mut c = mlx5dv_crypto_login_attr_ex {
            credential_id: attr.credential_id,
            import_kek_id: attr.import_kek_id,
            credential: attr.credential.as_ptr() as *const c_void,
            credential_len: attr.credential.len(),
            comp_mask: attr.comp_mask,
        };
        // SAFETY: ptr is an open context; c and the credential it points to outlive the call.
        let login = unsafe { f(ptr, &mut c) };
        if login.is_null() {
            return Err(Error::new(op, last_errno(), "mlx5dv_crypto_login_create failed"));
        }
        let destroy = self.lib().dv.mlx5dv_crypto_login_destroy.as_ref().ok().copied();
        self.objs.logins.insert(op, HwLogin { ptr: login, ctx }).inspect_err(|_| {
            if let Some(d) = destroy {
                // SAFETY: the object was just created and is in no table.
                unsafe { d(login) };
            }
        })
    }

    fn crypto_login_query(&mut self, login: CryptoLoginHandle, comp_mask: u64) -> Result<CryptoLoginQueryAttr> {
        let op = Op::CryptoLoginQuery;
        let ptr = self.objs.logins.get(login, op)?.ptr;
        let f =
            self.lib().dv.mlx5dv_crypto_login_query.as_ref().map_err(|_| missing(op, "mlx5dv_crypto_login_query"))?;
        let mut c = mlx5dv_crypto_login_query_attr { state: 0, comp_mask };
        // SAFETY: the login object is live; c is valid for writes.
        c_call(op, unsafe { f(ptr, &mut c) }, "mlx5dv_crypto_login_query")?;
        Ok(CryptoLoginQueryAttr { state: login_state(op, c.state)?, comp_mask: c.comp_mask })
    }

    fn crypto_login_destroy(&mut self, login: CryptoLoginHandle) -> Result<()> {
        let op = Op::CryptoLoginDestroy;
        let ptr = self.objs.logins.get(login, op)?.ptr;
        let f = self
            .lib()
            .dv
            .mlx5dv_crypto_login_destroy
            .as_ref()
            .map_err(|_| missing(op, "mlx5dv_crypto_login_destroy"))?;
        // SAFETY: the object is live; on failure it stays live and in the table.
        c_call(op, unsafe { f(ptr) }, "mlx5dv_crypto_login_destroy")?;
        self.objs.logins.take(login, op)?;
        Ok(())
    }

    fn dek_create(&mut self, ctx: ContextHandle, attr: &DekInitAttr) -> Result<DekHandle> {
        let op = Op::DekCreate;
        let pd = self.objs.pds.get(attr.pd, op)?.ptr;
        let login = match attr.crypto_login {
            Some(l) => self.objs.logins.get(l, op)?.ptr,
            None => std::ptr::null_mut(),
        };
        let ptr = self.ctx_ptr(ctx, op)?;
        let f = self.lib().dv.mlx5dv_dek_create.as_ref().map_err(|_| missing(op, "mlx5dv_dek_create"))?;
        let mut c = mlx5dv_dek_init_attr {
            key_size: attr.key_size,
            has_keytag: attr.has_keytag,
            key_purpose: attr.key_purpose,
            pd,
            opaque: chars(&attr.opaque),
            key: chars(&attr.key),
            comp_mask: attr.comp_mask,
            crypto_login: login,
        };
        // SAFETY: ptr is an open context, pd and the login object are live; c outlives the call.
        let dek = unsafe { f(ptr, &mut c) };
        if dek.is_null() {
            return Err(Error::new(op, last_errno(), "mlx5dv_dek_create failed"));
        }
        let destroy = self.lib().dv.mlx5dv_dek_destroy.as_ref().ok().copied();
        self.objs.deks.insert(op, HwDek { ptr: dek, ctx }).inspect_err(|_| {
            if let Some(d) = destroy {
                // SAFETY: the DEK was just created and is in no table.
                unsafe { d(dek) };
            }
        })
    }

    fn dek_query(&mut self, dek: DekHandle, comp_mask: u64) -> Result<DekAttr> {
        let op = Op::DekQuery;
        let ptr = self.objs.deks.get(dek, op)?.ptr;
        let f = self.lib().dv.mlx5dv_dek_query.as_ref().map_err(|_| missing(op, "mlx5dv_dek_query"))?;
        let mut c = mlx5dv_dek_attr { state: 0, opaque: [0; 8], comp_mask };
        // SAFETY: the DEK is live; c is valid for writes.
        c_call(op, unsafe { f(ptr, &mut c) }, "mlx5dv_dek_query")?;
        let state = match c.state {
            0 => DekState::Ready,
            1 => DekState::Error,
            other => return Err(Error::new(op, EINVAL, format!("libmlx5 returned unknown DEK state {other}"))),
        };
        Ok(DekAttr { state, opaque: c.opaque.map(|b| b as u8), comp_mask: c.comp_mask })
    }

    fn dek_destroy(&mut self, dek: DekHandle) -> Result<()> {
        let op = Op::DekDestroy;
        let ptr = self.objs.deks.get(dek, op)?.ptr;
        let f = self.lib().dv.mlx5dv_dek_destroy.as_ref().map_err(|_| missing(op, "mlx5dv_dek_destroy"))?;
        // SAFETY: the DEK is live; on failure it stays live and in the table.
        c_call(op, unsafe { f(ptr) }, "mlx5dv_dek_destroy")?;
        self.objs.deks.take(dek, op)?;
        Ok(())
    }
}

/// `struct mlx5dv_crypto_attr` for `mlx5dv_wr_set_mkey_crypto`, with the DEK resolved.
pub(crate) fn c_crypto_attr(a: &mlx5_dv::CryptoAttr, dek: *mut mlx5dv_dek) -> mlx5dv_crypto_attr {
    mlx5dv_crypto_attr {
        crypto_standard: a.crypto_standard,
        encrypt_on_tx: a.encrypt_on_tx,
        signature_crypto_order: a.signature_crypto_order,
        data_unit_size: a.data_unit_size,
        initial_tweak: chars(&a.initial_tweak),
        dek,
        keytag: chars(&a.keytag),
        comp_mask: a.comp_mask,
    }
}
