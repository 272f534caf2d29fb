//! The profile's `[odp]` and `[crypto]` sections.

use serde::{Deserialize, Serialize};

/// `[odp]`: the `odp_caps` (and `xrc_odp_caps`) `ibv_query_device_ex` reports, which also
/// decide what `IBV_ACCESS_ON_DEMAND` registrations the kernel takes. The defaults are what
/// a ConnectX-6 Dx reports with a kernel built with `CONFIG_INFINIBAND_ON_DEMAND_PAGING`
/// (`ibv_devinfo -v` of such hosts; unverified for every firmware).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OdpSection {
    /// `general_caps`: `IBV_ODP_SUPPORT` (1) and `IBV_ODP_SUPPORT_IMPLICIT` (2). Default 3.
    pub general_caps: u32,
    /// `rc_odp_caps`. Default 0x3f: SEND, RECV, WRITE, READ, ATOMIC, SRQ_RECV.
    pub rc: u32,
    /// `uc_odp_caps`. Default 0: mlx5_ib reports none.
    pub uc: u32,
    /// `ud_odp_caps`. Default 0x1: SEND (receives into ODP MRs are not offered for UD).
    pub ud: u32,
    /// `xrc_odp_caps`. Default 0x3d: SEND, WRITE, READ, ATOMIC, SRQ_RECV.
    pub xrc: u32,
    /// `dc_odp_caps` of the ODP capability page, which `mlx5dv_query_device` reports.
    /// Default 0x3d: SEND, WRITE, READ, ATOMIC, SRQ_RECV (unverified).
    pub dc: u32,
}

impl Default for OdpSection {
    fn default() -> Self {
        OdpSection { general_caps: 0x3, rc: 0x3f, uc: 0, ud: 0x1, xrc: 0x3d, dc: 0x3d }
    }
}

impl OdpSection {
    /// The caps as the API type.
    pub fn caps(&self) -> crate::api::odp::OdpCaps {
        crate::api::odp::OdpCaps {
            general_caps: self.general_caps,
            rc: self.rc,
            uc: self.uc,
            ud: self.ud,
            xrc: self.xrc,
        }
    }
}

/// `[crypto]`: the credentials and import KEKs a crypto officer loaded into the device. Real
/// devices never reveal them; the defaults are the simulator's published test values (see
/// the README), so that wrapped logins and wrapped DEKs can be exercised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CryptoSection {
    /// The credentials, by id. A login's 48-byte credential must AES-key-unwrap, with the
    /// import KEK it names, to the 40 bytes stored here.
    pub credentials: Vec<CryptoCredential>,
    /// The import KEKs (AES-128 or AES-256 keys), by id.
    pub import_keks: Vec<ImportKek>,
    /// The error CQE of a crypto failure on the data path (a CRYPTO mkey without crypto
    /// attributes, a DEK in ERROR, a keytag mismatch, a job size the AES-XTS rule refuses).
    /// Not published by NVIDIA: the defaults are a guess, and hardware decides.
    #[serde(default)]
    pub error: CryptoErrorSection,
}

/// `[crypto.error]`: the syndrome and vendor syndrome of a crypto failure's error CQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CryptoErrorSection {
    /// `MLX5_CQE_SYNDROME_*`. Default: 0x04 LOCAL_PROT_ERR (unverified).
    pub syndrome: u8,
    /// `vendor_err_synd`. Default: 0x56, what LOCAL_PROT_ERR carries elsewhere (unverified).
    pub vendor_err: u8,
}

impl Default for CryptoErrorSection {
    fn default() -> Self {
        CryptoErrorSection { syndrome: 0x04, vendor_err: 0x56 }
    }
}

/// One stored credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CryptoCredential {
    /// `credential_pointer` (24 bits).
    pub id: u32,
    /// The plaintext credential, 40 bytes as hex.
    #[serde(with = "hex_bytes")]
    pub credential: Vec<u8>,
}

/// One stored import KEK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportKek {
    /// `session_import_kek_ptr` (24 bits).
    pub id: u32,
    /// The key, 16 or 32 bytes as hex.
    #[serde(with = "hex_bytes")]
    pub key: Vec<u8>,
}

/// Bytes of a plaintext credential (a 48-byte wrapped one less the key-wrap block).
pub const CREDENTIAL_PLAINTEXT_LEN: usize = 40;

impl Default for CryptoSection {
    fn default() -> Self {
        CryptoSection {
            credentials: vec![CryptoCredential { id: TEST_CREDENTIAL_ID, credential: test_credential().to_vec() }],
            import_keks: vec![ImportKek { id: TEST_IMPORT_KEK_ID, key: test_import_kek().to_vec() }],
            error: CryptoErrorSection::default(),
        }
    }
}

/// The id of the default test credential.
pub const TEST_CREDENTIAL_ID: u32 = 0x1;
/// The id of the default test import KEK.
pub const TEST_IMPORT_KEK_ID: u32 = 0x1;

/// The default test credential: bytes 0x00, 0x01, ..., 0x27.
pub fn test_credential() -> [u8; CREDENTIAL_PLAINTEXT_LEN] {
    std::array::from_fn(|i| i as u8)
}

/// The default test import KEK (AES-256): bytes 0xa0, 0xa1, ..., 0xbf.
pub fn test_import_kek() -> [u8; 32] {
    std::array::from_fn(|i| 0xa0 + i as u8)
}

/// Byte strings as hex text in TOML.
mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        let digits: Vec<char> = text.trim_start_matches("0x").chars().filter(|c| *c != '_').collect();
        if !digits.len().is_multiple_of(2) {
            return Err(serde::de::Error::custom(format!("`{text}` has an odd number of hex digits")));
        }
        digits
            .chunks(2)
            .map(|p| {
                let pair: String = p.iter().collect();
                u8::from_str_radix(&pair, 16).map_err(|e| serde::de::Error::custom(format!("`{text}`: {e}")))
            })
            .collect()
    }
}
