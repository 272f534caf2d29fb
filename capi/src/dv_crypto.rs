//! Crypto offload: `mlx5dv_crypto_login*`, `mlx5dv_dek_*`, and the
//! `mlx5dv_wr_set_mkey_crypto` setter of the `mlx5dv_qp_ex`.
//!
//! The login objects and DEKs are opaque in `mlx5dv.h`; the shim hands out the address of a
//! box of its own for each and keeps the trait handle beside it, so a pointer it did not hand
//! out (or one already destroyed) is EINVAL.

use std::ffi::{c_char, c_int};

use mlx5_dv::{
    CryptoAttr, CryptoLoginAttr, CryptoLoginAttrEx, CryptoLoginHandle, CryptoLoginState, DekHandle, DekInitAttr,
    DekState, WrOp, crypto,
};
use mlx5_hw::sys::mlx5dv::{
    mlx5dv_crypto_attr, mlx5dv_crypto_login_attr, mlx5dv_crypto_login_attr_ex, mlx5dv_crypto_login_obj,
    mlx5dv_crypto_login_query_attr, mlx5dv_dek, mlx5dv_dek_attr, mlx5dv_dek_init_attr, mlx5dv_qp_ex,
};
use rdma_sys::ibv_context;

use crate::errno::{code, null};
use crate::objects::{Dek, Login, Qp, QpC};
use crate::state::{Shim, key, with};

/// The bytes of a C `char` array.
fn bytes<const N: usize>(c: &[c_char; N]) -> [u8; N] {
    c.map(|b| b as u8)
}

impl Shim {
    /// The DEK handle behind a program's `mlx5dv_dek` pointer.
    pub(crate) fn dek(&self, dek: *const mlx5dv_dek) -> Result<DekHandle, c_int> {
        self.dv.deks.get(&key(dek)).map(|d| d.handle).ok_or(libc::EINVAL)
    }

    /// The login object behind a program's `mlx5dv_crypto_login_obj` pointer.
    fn login_obj(&self, login: *const mlx5dv_crypto_login_obj) -> Result<CryptoLoginHandle, c_int> {
        self.dv.logins.get(&key(login)).map(|l| l.handle).ok_or(libc::EINVAL)
    }

    /// `mlx5dv_dek_create`: the PD and login object resolved, then the trait call.
    fn dek_create(&mut self, ctx: *mut ibv_context, a: &mlx5dv_dek_init_attr) -> Result<*mut mlx5dv_dek, c_int> {
        let h = self.ctx_handle(ctx)?;
        let pd = self.pd(a.pd.cast())?.handle;
        // crypto_login is read only with its comp_mask bit, as the provider reads it.
        let crypto_login = if a.comp_mask & crypto::DEK_INIT_ATTR_CRYPTO_LOGIN != 0 && !a.crypto_login.is_null() {
            Some(self.login_obj(a.crypto_login)?)
        } else {
            None
        };
        let attr = DekInitAttr {
            key_size: a.key_size,
            has_keytag: a.has_keytag,
            key_purpose: a.key_purpose,
            pd,
            opaque: bytes(&a.opaque),
            key: bytes(&a.key),
            comp_mask: a.comp_mask,
            crypto_login,
        };
        let handle = self.sim.dek_create(h, &attr).map_err(|e| e.errno())?;
        let mut c = Box::new(0u64);
        let p: *mut mlx5dv_dek = (&mut *c as *mut u64).cast();
        self.dv.deks.insert(key(p), Dek { _c: c, handle });
        Ok(p)
    }
}

/// `mlx5dv_crypto_login`: EINVAL for a non-zero comp_mask, EEXIST with a login already
/// stored, EOPNOTSUPP without wrapped crypto, EINVAL for a credential the device rejects.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_crypto_login(
    context: *mut ibv_context,
    login_attr: *mut mlx5dv_crypto_login_attr,
) -> c_int {
    if login_attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &*login_attr };
    let attr = CryptoLoginAttr {
        credential_id: a.credential_id,
        import_kek_id: a.import_kek_id,
        credential: bytes(&a.credential),
        comp_mask: a.comp_mask,
    };
    with(
        |e| e,
        |s| {
            let Ok(h) = s.ctx_handle(context) else { return libc::EINVAL };
            match s.sim.crypto_login(h, &attr) {
                Ok(()) => 0,
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_crypto_login_query_state`: NO_LOGIN (and 0) without a session.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_crypto_login_query_state(context: *mut ibv_context, state: *mut u32) -> c_int {
    if state.is_null() {
        return libc::EINVAL;
    }
    with(
        |e| e,
        |s| {
            let Ok(h) = s.ctx_handle(context) else { return libc::EINVAL };
            match s.sim.crypto_login_query_state(h) {
                Ok(st) => {
                    // SAFETY: the caller's out-parameter (an enum, 4 bytes).
                    unsafe { *state = st as u32 };
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_crypto_logout`: ENOENT without a session.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_crypto_logout(context: *mut ibv_context) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(h) = s.ctx_handle(context) else { return libc::EINVAL };
            match s.sim.crypto_logout(h) {
                Ok(()) => 0,
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_crypto_login_create`: a login object; NULL with errno on failure.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_crypto_login_create(
    context: *mut ibv_context,
    login_attr: *mut mlx5dv_crypto_login_attr_ex,
) -> *mut mlx5dv_crypto_login_obj {
    if login_attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &*login_attr };
    // More than the command has room for is EINVAL before the bytes are read, so a huge
    // length never makes the shim read past the caller's buffer.
    if a.credential_len > crypto::MAX_CREDENTIAL_LEN_EX || a.credential_len > 0 && a.credential.is_null() {
        return null(libc::EINVAL);
    }
    let credential = if a.credential_len == 0 {
        Vec::new()
    } else {
        // SAFETY: the caller's credential of credential_len bytes (bounded above).
        unsafe { std::slice::from_raw_parts(a.credential.cast::<u8>(), a.credential_len) }.to_vec()
    };
    let attr = CryptoLoginAttrEx {
        credential_id: a.credential_id,
        import_kek_id: a.import_kek_id,
        credential,
        comp_mask: a.comp_mask,
    };
    with(null, |s| {
        let Ok(h) = s.ctx_handle(context) else { return null(libc::EINVAL) };
        match s.sim.crypto_login_create(h, &attr) {
            Ok(handle) => {
                let mut c = Box::new(0u64);
                let p: *mut mlx5dv_crypto_login_obj = (&mut *c as *mut u64).cast();
                s.dv.logins.insert(key(p), Login { _c: c, handle });
                p
            }
            Err(e) => null(code(&e)),
        }
    })
}

/// `mlx5dv_crypto_login_query`: the object's state (VALID or INVALID).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_crypto_login_query(
    crypto_login: *mut mlx5dv_crypto_login_obj,
    query_attr: *mut mlx5dv_crypto_login_query_attr,
) -> c_int {
    if query_attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attributes; comp_mask is an input.
    let comp_mask = unsafe { (*query_attr).comp_mask };
    with(
        |e| e,
        |s| {
            let Ok(h) = s.login_obj(crypto_login) else { return libc::EINVAL };
            match s.sim.crypto_login_query(h, comp_mask) {
                Ok(q) => {
                    // SAFETY: the caller's out-parameter.
                    unsafe {
                        (*query_attr).state = q.state as u32;
                        (*query_attr).comp_mask = q.comp_mask;
                    }
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_crypto_login_destroy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_crypto_login_destroy(crypto_login: *mut mlx5dv_crypto_login_obj) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(h) = s.login_obj(crypto_login) else { return libc::EINVAL };
            match s.sim.crypto_login_destroy(h) {
                Ok(()) => {
                    s.dv.logins.remove(&key(crypto_login));
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_dek_create`: the checks of docs/behaviour.md item 53, then the device's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dek_create(
    context: *mut ibv_context,
    init_attr: *mut mlx5dv_dek_init_attr,
) -> *mut mlx5dv_dek {
    if init_attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &*init_attr };
    with(null, |s| s.dek_create(context, a).unwrap_or_else(null))
}

/// `mlx5dv_dek_query`: EINVAL for a non-zero comp_mask; the state and the opaque bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dek_query(dek: *mut mlx5dv_dek, attr: *mut mlx5dv_dek_attr) -> c_int {
    if attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attributes; comp_mask is an input.
    let comp_mask = unsafe { (*attr).comp_mask };
    with(
        |e| e,
        |s| {
            let Ok(h) = s.dek(dek) else { return libc::EINVAL };
            match s.sim.dek_query(h, comp_mask) {
                Ok(q) => {
                    let state = match q.state {
                        DekState::Ready => 0,
                        DekState::Error => 1,
                    };
                    // SAFETY: the caller's out-parameter.
                    unsafe {
                        (*attr).state = state;
                        (*attr).opaque = q.opaque.map(|b| b as c_char);
                        (*attr).comp_mask = q.comp_mask;
                    }
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// `mlx5dv_dek_destroy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dek_destroy(dek: *mut mlx5dv_dek) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(h) = s.dek(dek) else { return libc::EINVAL };
            match s.sim.dek_destroy(h) {
                Ok(()) => {
                    s.dv.deks.remove(&key(dek));
                    0
                }
                Err(e) => code(&e),
            }
        },
    )
}

/// Keep the first error of the QP's chain, as the provider's setters do.
fn latch(q: &mut Qp, e: c_int) {
    if q.chain_err == 0 {
        q.chain_err = e;
    }
}

/// `mlx5dv_wr_set_mkey_crypto`: the attributes go on the chain; a NULL attribute pointer or a
/// DEK pointer the shim did not hand out stores EINVAL (undefined in C: the provider follows
/// the pointer at finalize). A NULL DEK passes on, and the finalize refuses it.
pub(crate) unsafe extern "C" fn wr_set_mkey_crypto(mqp: *mut mlx5dv_qp_ex, attr: *const mlx5dv_crypto_attr) {
    // The mlx5dv_qp_ex sits after the ibv_qp_ex in QpC; the QP's key is QpC's address.
    let qp = (mqp as usize).wrapping_sub(std::mem::offset_of!(QpC, dv));
    // SAFETY: the caller's attributes, copied before the lock is taken.
    let a = (!attr.is_null()).then(|| unsafe { std::ptr::read(attr) });
    with(
        |_| (),
        |s| {
            let op = match a {
                None => Err(libc::EINVAL),
                Some(a) => {
                    let dek = if a.dek.is_null() { Ok(None) } else { s.dek(a.dek).map(Some) };
                    dek.map(|dek| {
                        WrOp::SetMkeyCrypto(CryptoAttr {
                            crypto_standard: a.crypto_standard,
                            encrypt_on_tx: a.encrypt_on_tx,
                            signature_crypto_order: a.signature_crypto_order,
                            data_unit_size: a.data_unit_size,
                            initial_tweak: bytes(&a.initial_tweak),
                            dek,
                            keytag: bytes(&a.keytag),
                            comp_mask: a.comp_mask,
                        })
                    })
                }
            };
            if let Some(q) = s.qps.get_mut(&qp) {
                match op {
                    Ok(op) => q.chain.push(op),
                    Err(e) => latch(q, e),
                }
            }
        },
    )
}

/// Keeps [`CryptoLoginState`] in the C enum's numbering (VALID 0, NO_LOGIN 1, INVALID 2).
const _: () = {
    assert!(CryptoLoginState::Valid as u32 == 0);
    assert!(CryptoLoginState::NoLogin as u32 == 1);
    assert!(CryptoLoginState::Invalid as u32 == 2);
};
