//! Crypto offload: the crypto caps of `mlx5dv_query_device`, crypto login (the global session
//! and login objects), data encryption keys (DEKs), and `struct mlx5dv_crypto_attr` for
//! `mlx5dv_wr_set_mkey_crypto`.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::handle::{ContextHandle, CryptoLoginHandle, DekHandle, PdHandle};

/// `struct mlx5dv_crypto_caps`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CryptoCaps {
    /// Bitmask of failed crypto self-tests.
    pub failed_selftests: u16,
    /// `MLX5DV_CRYPTO_ENGINES_CAP_*`.
    pub crypto_engines: u8,
    /// `MLX5DV_CRYPTO_WRAPPED_IMPORT_METHOD_CAP_*`.
    pub wrapped_import_method: u8,
    /// log2 of the maximum number of DEKs.
    pub log_max_num_deks: u8,
    /// `MLX5DV_CRYPTO_CAPS_*`.
    pub flags: u32,
}

/// Crypto capability bit values.
pub mod crypto_cap {
    /// `MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS` (deprecated; never set by the provider).
    pub const ENGINE_AES_XTS: u8 = 1 << 0;
    /// `MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_SINGLE_BLOCK`.
    pub const ENGINE_AES_XTS_SINGLE_BLOCK: u8 = 1 << 1;
    /// `MLX5DV_CRYPTO_ENGINES_CAP_AES_XTS_MULTI_BLOCK`.
    pub const ENGINE_AES_XTS_MULTI_BLOCK: u8 = 1 << 2;
    /// `MLX5DV_CRYPTO_WRAPPED_IMPORT_METHOD_CAP_AES_XTS`.
    pub const WRAPPED_IMPORT_AES_XTS: u8 = 1 << 0;
    /// `MLX5DV_CRYPTO_CAPS_CRYPTO`.
    pub const FLAG_CRYPTO: u32 = 1 << 0;
    /// `MLX5DV_CRYPTO_CAPS_WRAPPED_CRYPTO_OPERATIONAL`.
    pub const FLAG_WRAPPED_CRYPTO_OPERATIONAL: u32 = 1 << 1;
    /// `MLX5DV_CRYPTO_CAPS_WRAPPED_CRYPTO_GOING_TO_COMMISSIONING`.
    pub const FLAG_WRAPPED_CRYPTO_GOING_TO_COMMISSIONING: u32 = 1 << 2;
}

/// The enum values of the crypto calls in `mlx5dv.h`; fields that hold them are plain
/// integers so that values the provider rejects can be passed.
#[allow(clippy::module_inception)] // read as `mlx5_dv::crypto::KEY_SIZE_256`, beside `sig`
pub mod crypto {
    /// `MLX5DV_CRYPTO_KEY_SIZE_128`.
    pub const KEY_SIZE_128: u32 = 0;
    /// `MLX5DV_CRYPTO_KEY_SIZE_256`.
    pub const KEY_SIZE_256: u32 = 1;
    /// `MLX5DV_CRYPTO_KEY_PURPOSE_AES_XTS`.
    pub const KEY_PURPOSE_AES_XTS: u32 = 0;
    /// `MLX5DV_DEK_INIT_ATTR_CRYPTO_LOGIN`: `crypto_login` is meaningful (NULL = plaintext).
    pub const DEK_INIT_ATTR_CRYPTO_LOGIN: u64 = 1 << 0;
    /// `MLX5DV_CRYPTO_STANDARD_AES_XTS`.
    pub const STANDARD_AES_XTS: u32 = 0;
    /// `MLX5DV_SIGNATURE_CRYPTO_ORDER_SIGNATURE_AFTER_CRYPTO_ON_TX`.
    pub const SIGNATURE_AFTER_CRYPTO_ON_TX: u32 = 0;
    /// `MLX5DV_SIGNATURE_CRYPTO_ORDER_SIGNATURE_BEFORE_CRYPTO_ON_TX`.
    pub const SIGNATURE_BEFORE_CRYPTO_ON_TX: u32 = 1;
    /// Bytes of `mlx5dv_crypto_login_attr.credential`.
    pub const CREDENTIAL_LEN: usize = 48;
    /// Bytes of `mlx5dv_dek_init_attr.key`.
    pub const KEY_LEN: usize = 128;
    /// The most credential bytes a login object can carry without overrunning the
    /// provider's command buffer: the credential field and the reserved bytes after it.
    pub const MAX_CREDENTIAL_LEN_EX: usize = 192;
}

/// `enum mlx5dv_crypto_login_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u32)]
pub enum CryptoLoginState {
    /// `MLX5DV_CRYPTO_LOGIN_STATE_VALID`.
    Valid = 0,
    /// `MLX5DV_CRYPTO_LOGIN_STATE_NO_LOGIN`: no session on the context.
    NoLogin = 1,
    /// `MLX5DV_CRYPTO_LOGIN_STATE_INVALID`: the credential or import KEK was revoked.
    Invalid = 2,
}

/// `enum mlx5dv_dek_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u32)]
pub enum DekState {
    /// `MLX5DV_DEK_STATE_READY`.
    Ready = 0,
    /// `MLX5DV_DEK_STATE_ERROR`.
    Error = 1,
}

/// `struct mlx5dv_crypto_login_attr`: the global session of `mlx5dv_crypto_login`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CryptoLoginAttr {
    /// The device credential the wrapped credential must match (24 bits).
    pub credential_id: u32,
    /// The import KEK that unwraps the credential and, later, wrapped DEKs (24 bits).
    pub import_kek_id: u32,
    /// The credential, AES-key-wrapped with the import KEK.
    #[serde(with = "hex_bytes")]
    pub credential: [u8; crypto::CREDENTIAL_LEN],
    /// Must be 0.
    pub comp_mask: u64,
}

/// `struct mlx5dv_crypto_login_attr_ex`: a login object of `mlx5dv_crypto_login_create`;
/// `credential_len` is the length of `credential`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CryptoLoginAttrEx {
    /// The device credential the wrapped credential must match (24 bits).
    pub credential_id: u32,
    /// The import KEK that unwraps the credential (24 bits).
    pub import_kek_id: u32,
    /// The wrapped credential; the provider copies all of it, unchecked, into the 48-byte
    /// field (more than [`crypto::MAX_CREDENTIAL_LEN_EX`] bytes is EINVAL here).
    #[serde(with = "hex_vec")]
    pub credential: Vec<u8>,
    /// Must be 0.
    pub comp_mask: u64,
}

/// `struct mlx5dv_crypto_login_query_attr` after `mlx5dv_crypto_login_query`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CryptoLoginQueryAttr {
    /// The login object's state (`Valid` or `Invalid`).
    pub state: CryptoLoginState,
    /// The comp_mask passed in.
    pub comp_mask: u64,
}

/// `struct mlx5dv_dek_init_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DekInitAttr {
    /// `enum mlx5dv_crypto_key_size` ([`crypto::KEY_SIZE_128`], [`crypto::KEY_SIZE_256`]).
    pub key_size: u32,
    /// The key ends with an 8-byte keytag that crypto mkeys must quote.
    pub has_keytag: bool,
    /// `enum mlx5dv_crypto_key_purpose` ([`crypto::KEY_PURPOSE_AES_XTS`]).
    pub key_purpose: u32,
    /// The PD the DEK belongs to.
    pub pd: PdHandle,
    /// Plaintext metadata, returned by `mlx5dv_dek_query`.
    pub opaque: [u8; 8],
    /// `key1 | key2 [| keytag]` in plaintext, or AES-key-wrapped with the import KEK.
    #[serde(with = "hex_bytes")]
    pub key: [u8; crypto::KEY_LEN],
    /// [`crypto::DEK_INIT_ATTR_CRYPTO_LOGIN`] or 0.
    pub comp_mask: u64,
    /// A login object (wrapped DEK) or `None` (NULL: plaintext, with the comp_mask bit).
    pub crypto_login: Option<CryptoLoginHandle>,
}

/// `struct mlx5dv_dek_attr` after `mlx5dv_dek_query`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DekAttr {
    /// The DEK's state.
    pub state: DekState,
    /// The opaque bytes given at creation.
    pub opaque: [u8; 8],
    /// The comp_mask passed in.
    pub comp_mask: u64,
}

/// `struct mlx5dv_crypto_attr`, for `mlx5dv_wr_set_mkey_crypto`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CryptoAttr {
    /// `enum mlx5dv_crypto_standard` ([`crypto::STANDARD_AES_XTS`]).
    pub crypto_standard: u32,
    /// Memory holds plaintext and the wire ciphertext (TX encrypts, RX decrypts); false is
    /// the reverse.
    pub encrypt_on_tx: bool,
    /// `enum mlx5dv_signature_crypto_order`.
    pub signature_crypto_order: u32,
    /// `enum mlx5dv_block_size` of the data unit (see [`crate::sig`]'s `BLOCK_*`).
    pub data_unit_size: u32,
    /// The tweak of the first data unit, little-endian; it counts up per data unit.
    pub initial_tweak: [u8; 16],
    /// The DEK (`None` passes NULL, which the setter does not check).
    pub dek: Option<DekHandle>,
    /// Must equal the DEK's keytag when it has one.
    pub keytag: [u8; 8],
    /// Must be 0.
    pub comp_mask: u64,
}

/// Crypto login and DEKs: `mlx5dv_crypto_login*`, `mlx5dv_dek_*`.
pub trait Crypto {
    /// `mlx5dv_crypto_login`: open the context's one global session.
    fn crypto_login(&mut self, ctx: ContextHandle, attr: &CryptoLoginAttr) -> Result<()>;

    /// `mlx5dv_crypto_login_query_state`.
    fn crypto_login_query_state(&mut self, ctx: ContextHandle) -> Result<CryptoLoginState>;

    /// `mlx5dv_crypto_logout`.
    fn crypto_logout(&mut self, ctx: ContextHandle) -> Result<()>;

    /// `mlx5dv_crypto_login_create`.
    fn crypto_login_create(&mut self, ctx: ContextHandle, attr: &CryptoLoginAttrEx) -> Result<CryptoLoginHandle>;

    /// `mlx5dv_crypto_login_query` with `query_attr->comp_mask = comp_mask`.
    fn crypto_login_query(&mut self, login: CryptoLoginHandle, comp_mask: u64) -> Result<CryptoLoginQueryAttr>;

    /// `mlx5dv_crypto_login_destroy`.
    fn crypto_login_destroy(&mut self, login: CryptoLoginHandle) -> Result<()>;

    /// `mlx5dv_dek_create`.
    fn dek_create(&mut self, ctx: ContextHandle, attr: &DekInitAttr) -> Result<DekHandle>;

    /// `mlx5dv_dek_query` with `attr->comp_mask = comp_mask`.
    fn dek_query(&mut self, dek: DekHandle, comp_mask: u64) -> Result<DekAttr>;

    /// `mlx5dv_dek_destroy`.
    fn dek_destroy(&mut self, dek: DekHandle) -> Result<()>;
}

/// Fixed byte arrays longer than serde's own impls, as lowercase hex strings.
mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer, const N: usize>(v: &[u8; N], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::to_hex(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>, const N: usize>(d: D) -> Result<[u8; N], D::Error> {
        let v = super::from_hex(&String::deserialize(d)?).map_err(serde::de::Error::custom)?;
        let len = v.len();
        v.try_into().map_err(|_| serde::de::Error::custom(format!("{len} bytes where {N} are needed")))
    }
}

/// Byte vectors as lowercase hex strings.
pub(super) mod hex_vec {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::to_hex(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        super::from_hex(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

fn to_hex(v: &[u8]) -> String {
    v.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(text: &str) -> std::result::Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err(format!("`{text}` has an odd number of hex digits"));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(|| format!("`{text}` is not hex"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::BackendId;

    #[test]
    fn attributes_round_trip_through_json_with_hex_keys() -> std::result::Result<(), serde_json::Error> {
        let mut key = [0u8; crypto::KEY_LEN];
        key[0] = 0xab;
        key[127] = 0x01;
        let attr = DekInitAttr {
            key_size: crypto::KEY_SIZE_256,
            has_keytag: true,
            key_purpose: crypto::KEY_PURPOSE_AES_XTS,
            pd: PdHandle::new(BackendId::NONE, 3),
            opaque: [1; 8],
            key,
            comp_mask: crypto::DEK_INIT_ATTR_CRYPTO_LOGIN,
            crypto_login: None,
        };
        let text = serde_json::to_string(&attr)?;
        assert!(text.contains("\"key\":\"ab00"), "{text}");
        assert_eq!(serde_json::from_str::<DekInitAttr>(&text)?, attr);
        let ex = CryptoLoginAttrEx { credential_id: 1, import_kek_id: 2, credential: vec![0xff, 0x0a], comp_mask: 0 };
        let text = serde_json::to_string(&ex)?;
        assert!(text.contains("\"ff0a\""), "{text}");
        assert_eq!(serde_json::from_str::<CryptoLoginAttrEx>(&text)?, ex);
        Ok(())
    }

    #[test]
    fn bad_hex_is_a_clear_error() {
        assert!(from_hex("abc").is_err());
        assert!(from_hex("zz").is_err());
        assert_eq!(from_hex(""), Ok(vec![]));
        let short = r#"{"credential_id":1,"import_kek_id":1,"credential":"00","comp_mask":0}"#;
        assert!(serde_json::from_str::<CryptoLoginAttr>(short).is_err(), "1 byte is not 48");
    }
}
