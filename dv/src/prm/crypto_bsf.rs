//! `struct mlx5_crypto_bsf`: the 64-byte crypto BSF a UMR appends after the signature BSF (or
//! after the translations on a mkey without signature), rdma-core `providers/mlx5/wqe.h`, and
//! [`build`], which fills it from the `mlx5dv_wr_set_mkey_crypto` attributes as
//! `mlx5_umr_fill_crypto_bsf` does.

use std::ops::Range;

use crate::api::crypto::{CryptoAttr, crypto};
use crate::errno::EINVAL;
use crate::prm::wqe::bsf::{RAW_DATA_SIZE_ANY, bs_selector, bsf_size};
use crate::prm::{Codec, FieldError};

/// Size in bytes.
pub const SIZE: usize = 64;
/// `MLX5_BSF_TYPE_CRYPTO`: the low bits of byte 0.
pub const TYPE_CRYPTO: u8 = 1;
/// `MLX5_ENCRYPTION_STANDARD_AES_XTS`.
pub const ENC_STANDARD_AES_XTS: u8 = 0;
/// The 16-byte initial tweak.
pub const XTS_INIT_TWEAK: Range<usize> = 16..32;
/// The 8-byte keytag.
pub const KEYTAG: Range<usize> = 40..48;

/// `MLX5_ENCRYPTION_ORDER_*`: where the ciphertext is and how the signature sits around it.
pub mod enc_order {
    /// Encrypted on the wire; the signature is computed before encryption on TX.
    pub const ENCRYPTED_WIRE_SIGNATURE: u8 = 0x0;
    /// Encrypted in memory; the signature is computed after decryption on TX.
    pub const ENCRYPTED_MEMORY_SIGNATURE: u8 = 0x1;
    /// Encrypted on the wire; the signature is computed after encryption on TX.
    pub const ENCRYPTED_RAW_WIRE: u8 = 0x2;
    /// Encrypted in memory; the signature is computed before decryption on TX.
    pub const ENCRYPTED_RAW_MEMORY: u8 = 0x3;
}

/// The scalar fields of the crypto BSF.
pub mod fields {
    use super::SIZE;
    use crate::prm::view::layout;

    layout! {
        /// The crypto BSF's fields other than the tweak and keytag bytes.
        struct CryptoBsfFields = "mlx5_crypto_bsf", SIZE;
        /// bsf_size: `WITH_INLINE`, or `SIG_AND_CRYPTO` after a signature BSF (bits 7:6).
        BSF_SIZE => bsf_size / set_bsf_size: u8 = (0x00, 2);
        /// bsf_type: [`TYPE_CRYPTO`](super::TYPE_CRYPTO) (bits 5:0 of byte 0).
        BSF_TYPE => bsf_type / set_bsf_type: u8 = (0x02, 6);
        /// enc_order: one of [`enc_order`](super::enc_order).
        ENC_ORDER => enc_order / set_enc_order: u8 = (0x08, 8);
        /// enc_standard.
        ENC_STANDARD => enc_standard / set_enc_standard: u8 = (0x18, 8);
        /// raw_data_size (rdma-core: all ones).
        RAW_DATA_SIZE => raw_data_size / set_raw_data_size: u32 = (0x20, 32);
        /// bs_pointer: the data unit's block-size selector.
        BS_POINTER => bs_pointer / set_bs_pointer: u8 = (0x40, 8);
        /// dek_pointer: the DEK object's id (low 24 bits of `rsvd_dek_ptr`).
        DEK_POINTER => dek_pointer / set_dek_pointer: u32 = (0x108, 24);
    }
}

pub use fields::CryptoBsfFields;

/// The whole crypto BSF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CryptoBsf {
    /// The scalar fields.
    pub fields: CryptoBsfFields,
    /// Bytes 16..32, as the device reads them.
    pub xts_init_tweak: [u8; 16],
    /// Bytes 40..48.
    pub keytag: [u8; 8],
}

impl CryptoBsf {
    /// The BSF as bytes, reserved bytes zero.
    pub fn to_bytes(&self) -> Result<[u8; SIZE], FieldError> {
        let mut out = self.fields.to_bytes()?;
        out[XTS_INIT_TWEAK].copy_from_slice(&self.xts_init_tweak);
        out[KEYTAG].copy_from_slice(&self.keytag);
        Ok(out)
    }

    /// Write the BSF into the first 64 bytes of `out`; on error `out` is left untouched.
    pub fn encode(&self, out: &mut [u8]) -> Result<(), FieldError> {
        let len = out.len();
        let head = out.get_mut(..SIZE).ok_or(FieldError::TooShort { layout: "mlx5_crypto_bsf", need: SIZE, len })?;
        head.copy_from_slice(&self.to_bytes()?);
        Ok(())
    }

    /// Read the BSF from the first 64 bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self, FieldError> {
        let len = buf.len();
        let bsf = buf.get(..SIZE).ok_or(FieldError::TooShort { layout: "mlx5_crypto_bsf", need: SIZE, len })?;
        let mut b = CryptoBsf { fields: CryptoBsfFields::decode(bsf)?, ..Default::default() };
        b.xts_init_tweak.copy_from_slice(&bsf[XTS_INIT_TWEAK]);
        b.keytag.copy_from_slice(&bsf[KEYTAG]);
        Ok(b)
    }
}

impl Codec for CryptoBsf {
    const SIZE: usize = SIZE;
    fn decode(buf: &[u8]) -> Result<Self, FieldError> {
        CryptoBsf::decode(buf)
    }
    fn encode(&self, out: &mut [u8]) -> Result<(), FieldError> {
        CryptoBsf::encode(self, out)
    }
}

/// `get_crypto_order`: the BSF's `enc_order` for `encrypt_on_tx` and the signature order;
/// `None` for the RAW orders when a signature is configured in both domains, which the device
/// does not support (rdma-core then fails the WR with EINVAL).
pub fn get_crypto_order(encrypt_on_tx: bool, signature_crypto_order: u32, sig_in_both_domains: bool) -> Option<u8> {
    use enc_order::*;
    let after = signature_crypto_order == crypto::SIGNATURE_AFTER_CRYPTO_ON_TX;
    let order = match (encrypt_on_tx, after) {
        (true, true) => ENCRYPTED_RAW_WIRE,
        (true, false) => ENCRYPTED_WIRE_SIGNATURE,
        (false, true) => ENCRYPTED_MEMORY_SIGNATURE,
        (false, false) => ENCRYPTED_RAW_MEMORY,
    };
    let raw = order == ENCRYPTED_RAW_WIRE || order == ENCRYPTED_RAW_MEMORY;
    if raw && sig_in_both_domains { None } else { Some(order) }
}

/// What the BSF needs beyond the attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BsfContext {
    /// The DEK object's id (only its low 24 bits are written).
    pub dek_id: u32,
    /// The device has the multi-block (big-endian tweak) engine.
    pub multi_block: bool,
    /// The mkey has a signature context: `Some((memory, wire))`, each true if a signature is
    /// configured in that domain.
    pub sig: Option<(bool, bool)>,
}

/// `mlx5_umr_fill_crypto_bsf`: the BSF for `attr`; EINVAL for an order the device refuses
/// or a data unit size without a selector.
pub fn build(attr: &CryptoAttr, cx: BsfContext) -> Result<CryptoBsf, i32> {
    let both = cx.sig.is_some_and(|(mem, wire)| mem && wire);
    let order = get_crypto_order(attr.encrypt_on_tx, attr.signature_crypto_order, both).ok_or(EINVAL)?;
    let bs = bs_selector(attr.data_unit_size).ok_or(EINVAL)?;
    let mut tweak = attr.initial_tweak;
    // The multi-block engine takes the tweak big-endian; the user gives it little-endian.
    if cx.multi_block {
        tweak.reverse();
    }
    let fields = CryptoBsfFields {
        bsf_size: if cx.sig.is_some() { bsf_size::SIG_AND_CRYPTO } else { bsf_size::WITH_INLINE },
        bsf_type: TYPE_CRYPTO,
        enc_order: order,
        enc_standard: ENC_STANDARD_AES_XTS,
        raw_data_size: RAW_DATA_SIZE_ANY,
        bs_pointer: bs,
        dek_pointer: cx.dek_id & 0x00ff_ffff,
    };
    Ok(CryptoBsf { fields, xts_init_tweak: tweak, keytag: attr.keytag })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prm::test_util::{Case, check_cases, check_round_trip, check_short};
    use crate::sig;

    #[test]
    fn fields_sit_where_wqe_h_puts_them() {
        use fields as f;
        let cases: &[Case] = &[
            (f::BSF_SIZE, 3, &[(0, 0xc0)]),
            (f::BSF_TYPE, 1, &[(0, 0x01)]),
            (f::ENC_ORDER, 2, &[(1, 0x02)]),
            (f::ENC_STANDARD, 0x5a, &[(3, 0x5a)]),
            (f::RAW_DATA_SIZE, 0x0102_0304, &[(4, 1), (5, 2), (6, 3), (7, 4)]),
            (f::BS_POINTER, 6, &[(8, 6)]),
            (f::DEK_POINTER, 0xab_cdef, &[(33, 0xab), (34, 0xcd), (35, 0xef)]),
        ];
        check_cases(SIZE, f::ALL, cases);
        check_short::<CryptoBsf>();
    }

    #[test]
    fn bytes_round_trip_keeping_tweak_and_keytag() -> Result<(), FieldError> {
        let mut bytes = [0u8; SIZE];
        bytes.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8 | 0x80);
        let b = CryptoBsf::decode(&bytes)?;
        assert_eq!(b.xts_init_tweak[0], 0x90);
        assert_eq!(b.keytag, [0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf]);
        let out = b.to_bytes()?;
        assert_eq!(&out[XTS_INIT_TWEAK], &bytes[XTS_INIT_TWEAK]);
        assert_eq!(&out[KEYTAG], &bytes[KEYTAG]);
        assert_eq!(out[2], 0, "reserved bytes come back zero");
        assert_eq!(CryptoBsf::decode(&out)?, b);
        check_round_trip::<CryptoBsfFields>(&[0xff; SIZE], fields::ALL);
        Ok(())
    }

    #[test]
    fn crypto_order_follows_get_crypto_order() {
        use crypto::{SIGNATURE_AFTER_CRYPTO_ON_TX as AFTER, SIGNATURE_BEFORE_CRYPTO_ON_TX as BEFORE};
        use enc_order::*;
        assert_eq!(get_crypto_order(true, AFTER, false), Some(ENCRYPTED_RAW_WIRE));
        assert_eq!(get_crypto_order(true, BEFORE, false), Some(ENCRYPTED_WIRE_SIGNATURE));
        assert_eq!(get_crypto_order(false, AFTER, false), Some(ENCRYPTED_MEMORY_SIGNATURE));
        assert_eq!(get_crypto_order(false, BEFORE, false), Some(ENCRYPTED_RAW_MEMORY));
        assert_eq!(get_crypto_order(true, AFTER, true), None, "RAW_WIRE with both domains");
        assert_eq!(get_crypto_order(false, BEFORE, true), None, "RAW_MEMORY with both domains");
        assert_eq!(get_crypto_order(true, BEFORE, true), Some(ENCRYPTED_WIRE_SIGNATURE));
        assert_eq!(get_crypto_order(false, AFTER, true), Some(ENCRYPTED_MEMORY_SIGNATURE));
    }

    fn attr() -> CryptoAttr {
        let mut tweak = [0u8; 16];
        tweak.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        CryptoAttr {
            crypto_standard: crypto::STANDARD_AES_XTS,
            encrypt_on_tx: true,
            signature_crypto_order: crypto::SIGNATURE_BEFORE_CRYPTO_ON_TX,
            data_unit_size: sig::BLOCK_4048,
            initial_tweak: tweak,
            dek: None,
            keytag: *b"KEYTAG!!",
            comp_mask: 0,
        }
    }

    #[test]
    fn build_places_every_part_at_its_byte() -> Result<(), Box<dyn std::error::Error>> {
        let cx = BsfContext { dek_id: 0x7a12_3456, multi_block: true, sig: None };
        let bytes = build(&attr(), cx).map_err(|e| format!("errno {e}"))?.to_bytes()?;
        assert_eq!(bytes[0], 2 << 6 | 1, "WITH_INLINE, type crypto");
        assert_eq!(bytes[1], enc_order::ENCRYPTED_WIRE_SIGNATURE);
        assert_eq!(bytes[3], ENC_STANDARD_AES_XTS);
        assert_eq!(&bytes[4..8], &[0xff; 4]);
        assert_eq!(bytes[8], 6, "4048-byte data units have selector 6");
        let reversed: Vec<u8> = (0..16u8).rev().collect();
        assert_eq!(&bytes[16..32], reversed.as_slice(), "multi-block: tweak byte-reversed");
        assert_eq!(&bytes[32..36], &[0x00, 0x12, 0x34, 0x56], "24-bit DEK id, big-endian");
        assert_eq!(&bytes[40..48], b"KEYTAG!!");
        assert!(bytes[48..].iter().chain(&bytes[36..40]).chain(&bytes[9..16]).all(|b| *b == 0));

        let single = BsfContext { multi_block: false, sig: Some((true, false)), ..cx };
        let bytes = build(&attr(), single).map_err(|e| format!("errno {e}"))?.to_bytes()?;
        assert_eq!(bytes[0], 3 << 6 | 1, "after a signature BSF: SIG_AND_CRYPTO");
        let straight: Vec<u8> = (0..16u8).collect();
        assert_eq!(&bytes[16..32], straight.as_slice(), "single-block: tweak as given");
        Ok(())
    }

    #[test]
    fn build_refuses_what_the_device_cannot_do() {
        let cx = BsfContext { dek_id: 1, multi_block: true, sig: Some((true, true)) };
        let raw = CryptoAttr { signature_crypto_order: crypto::SIGNATURE_AFTER_CRYPTO_ON_TX, ..attr() };
        assert_eq!(build(&raw, cx), Err(EINVAL), "RAW_WIRE with signatures in both domains");
        assert!(build(&attr(), cx).is_ok(), "WIRE_SIGNATURE with both domains is fine");
        let bad_dus = CryptoAttr { data_unit_size: 5, ..attr() };
        assert_eq!(build(&bad_dus, BsfContext { sig: None, ..cx }), Err(EINVAL));
    }
}
