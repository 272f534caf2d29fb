//! The crypto general objects: `crypto_login_obj` (CRYPTO_LOGIN, 0x1f) and
//! `encryption_key_obj` (DEK, 0x0c), as CREATE_GENERAL_OBJECT carries them after the
//! 16-byte `general_obj_in_cmd_hdr` and QUERY_GENERAL_OBJECT returns them after the
//! 16-byte `general_obj_out_cmd_hdr`.
//!
//! Byte arrays (credential, opaque, key) are not PRM fields of at most 64 bits; they are
//! given as byte ranges of the object.

use std::ops::Range;

/// Size in bytes of each object (`crypto_login_obj`, `encryption_key_obj`).
pub const OBJ_SIZE: usize = 256;
/// Bit offset of the object inside `create_*_obj_in` and `query_*_obj_out`.
pub const OBJ_BIT: u32 = 0x80;
/// Byte offset of the object inside those mailboxes.
pub const OBJ_BYTE: usize = 16;
/// Size of `create_crypto_login_obj_in` and `create_encryption_key_obj_in`.
pub const CREATE_IN_SIZE: usize = OBJ_BYTE + OBJ_SIZE;
/// Size of the CREATE output: a bare `general_obj_out_cmd_hdr`.
pub const CREATE_OUT_SIZE: usize = 16;
/// Size of the QUERY and DESTROY input: a bare `general_obj_in_cmd_hdr`.
pub const HDR_IN_SIZE: usize = 16;
/// Size of `query_crypto_login_obj_out` and `query_encryption_key_obj_out`.
pub const QUERY_OUT_SIZE: usize = OBJ_BYTE + OBJ_SIZE;

/// `crypto_login_obj`.
pub mod crypto_login_obj {
    use super::{OBJ_SIZE, Range};
    use crate::prm::view::layout;

    /// `MLX5_CRYPTO_LOGIN_OBJ_STATE_VALID`.
    pub const STATE_VALID: u8 = 0x0;
    /// `MLX5_CRYPTO_LOGIN_OBJ_STATE_INVALID`.
    pub const STATE_INVALID: u8 = 0x1;
    /// The 48-byte wrapped credential (bit 0x200).
    pub const CREDENTIAL: Range<usize> = 64..112;

    layout! {
        /// The login object's fields.
        struct CryptoLoginObj = "crypto_login_obj", OBJ_SIZE;
        /// modify_field_select.
        MODIFY_FIELD_SELECT => modify_field_select / set_modify_field_select: u64 = (0x00, 64);
        /// state: VALID or INVALID.
        STATE => state / set_state: u8 = (0x84, 4);
        /// credential_pointer: the id of the device credential to check against.
        CREDENTIAL_POINTER => credential_pointer / set_credential_pointer: u32 = (0x88, 24);
        /// session_import_kek_ptr: the id of the import KEK.
        SESSION_IMPORT_KEK_PTR => session_import_kek_ptr / set_session_import_kek_ptr: u32 = (0xa8, 24);
    }
}

/// `encryption_key_obj` (the DEK).
pub mod encryption_key_obj {
    use super::{OBJ_SIZE, Range};
    use crate::prm::view::layout;

    /// `MLX5_ENCRYPTION_KEY_OBJ_STATE_READY`.
    pub const STATE_READY: u8 = 0x0;
    /// `MLX5_ENCRYPTION_KEY_OBJ_STATE_ERROR`.
    pub const STATE_ERROR: u8 = 0x1;
    /// `MLX5_ENCRYPTION_KEY_OBJ_KEY_SIZE_SIZE_128`.
    pub const KEY_SIZE_128: u8 = 0x0;
    /// `MLX5_ENCRYPTION_KEY_OBJ_KEY_SIZE_SIZE_256`.
    pub const KEY_SIZE_256: u8 = 0x1;
    /// `MLX5_ENCRYPTION_KEY_OBJ_KEY_PURPOSE_AES_XTS`: the device's code, not the mlx5dv one.
    pub const KEY_PURPOSE_AES_XTS: u8 = 0x3;
    /// The 8 opaque bytes (bit 0x180).
    pub const OPAQUE: Range<usize> = 48..56;
    /// The 128-byte key field (bit 0x200).
    pub const KEY: Range<usize> = 64..192;

    layout! {
        /// The DEK object's fields.
        struct EncryptionKeyObj = "encryption_key_obj", OBJ_SIZE;
        /// modify_field_select.
        MODIFY_FIELD_SELECT => modify_field_select / set_modify_field_select: u64 = (0x00, 64);
        /// state: READY or ERROR.
        STATE => state / set_state: u8 = (0x40, 8);
        /// key_size: 0 = two 128-bit keys, 1 = two 256-bit keys.
        KEY_SIZE => key_size / set_key_size: u8 = (0x54, 4);
        /// has_keytag: the key ends with an 8-byte keytag.
        HAS_KEYTAG => has_keytag / set_has_keytag: bool = (0x58, 1);
        /// key_purpose.
        KEY_PURPOSE => key_purpose / set_key_purpose: u8 = (0x5c, 4);
        /// pd.
        PD => pd / set_pd: u32 = (0x68, 24);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prm::test_util::{Case, check_cases, check_round_trip, check_short};

    #[test]
    fn login_object_fields_sit_where_mlx5_ifc_puts_them() {
        use crypto_login_obj as l;
        let cases: &[Case] = &[
            (l::MODIFY_FIELD_SELECT, 1, &[(7, 1)]),
            (l::STATE, 1, &[(16, 0x01)]),
            (l::CREDENTIAL_POINTER, 0xabcdef, &[(17, 0xab), (18, 0xcd), (19, 0xef)]),
            (l::SESSION_IMPORT_KEK_PTR, 0x123456, &[(21, 0x12), (22, 0x34), (23, 0x56)]),
        ];
        check_cases(OBJ_SIZE, l::ALL, cases);
        check_short::<l::CryptoLoginObj>();
        check_round_trip::<l::CryptoLoginObj>(&[0xffu8; OBJ_SIZE], l::ALL);
        assert_eq!(l::CREDENTIAL.start * 8, 0x200);
    }

    #[test]
    fn key_object_fields_sit_where_mlx5_ifc_puts_them() {
        use encryption_key_obj as k;
        let cases: &[Case] = &[
            (k::MODIFY_FIELD_SELECT, 1 << 63, &[(0, 0x80)]),
            (k::STATE, 1, &[(8, 1)]),
            (k::KEY_SIZE, 1, &[(10, 0x01)]),
            (k::HAS_KEYTAG, 1, &[(11, 0x80)]),
            (k::KEY_PURPOSE, 3, &[(11, 0x03)]),
            (k::PD, 0x00_0102, &[(14, 0x01), (15, 0x02)]),
        ];
        check_cases(OBJ_SIZE, k::ALL, cases);
        check_short::<k::EncryptionKeyObj>();
        check_round_trip::<k::EncryptionKeyObj>(&[0xffu8; OBJ_SIZE], k::ALL);
        assert_eq!((k::OPAQUE.start * 8, k::KEY.start * 8, k::KEY.len()), (0x180, 0x200, 128));
        assert_eq!(CREATE_IN_SIZE, 272, "create_encryption_key_obj_in is 0x880 bits");
    }
}
