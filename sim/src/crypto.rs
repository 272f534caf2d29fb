//! AES-XTS as an mlx5 crypto mkey applies it, and AES key wrap as DEK import uses it: pure
//! functions over bytes, with no device state.
//!
//! A transfer is cut into data units of 512, 520, 4048, 4096 or 4160 bytes; unit `i` is
//! enciphered as one IEEE 1619 data unit whose tweak is the initial tweak, read as a
//! little-endian 128-bit number, plus `i` (modulo 2^128). A last, shorter unit is allowed
//! when it is whole AES blocks ([`job_size_valid`]). The ciphers are the `aes` and
//! `xts-mode` crates; key wrap (RFC 3394, default IV `A6A6A6A6A6A6A6A6`) is `aes-kw`.

use std::fmt;

use aes::cipher::KeyInit;
use aes::{Aes128, Aes256};
use aes_kw::{KwAes128, KwAes256};
use xts_mode::{Xts128, get_tweak_default};

/// The AES block size: XTS works on whole blocks, stealing ciphertext for a short tail.
pub const AES_BLOCK: usize = 16;
/// The bytes AES key wrap adds to what it wraps.
pub const KEY_WRAP_OVERHEAD: usize = 8;

/// Why a crypto operation could not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CryptoError {
    /// A key half is neither 16 nor 32 bytes, or the two halves differ in size.
    KeyLength(usize),
    /// `job` bytes cannot be enciphered in data units of `dus` bytes.
    JobSize {
        /// The transfer length.
        job: usize,
        /// The data unit size.
        dus: usize,
    },
    /// A key-wrap KEK is neither 16 nor 32 bytes, or the data is not whole 8-byte words.
    WrapLength(usize),
    /// The wrapped key does not unwrap under this KEK (the integrity check failed).
    Unwrap,
}

impl fmt::Display for CryptoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CryptoError::KeyLength(n) => write!(f, "an AES-XTS key half of {n} bytes (16 or 32, both alike)"),
            CryptoError::JobSize { job, dus } => write!(f, "{job} bytes are not valid AES-XTS units of {dus} bytes"),
            CryptoError::WrapLength(n) => write!(f, "key wrap over {n} bytes (KEK 16 or 32, data whole words)"),
            CryptoError::Unwrap => write!(f, "the wrapped key fails the key-wrap integrity check"),
        }
    }
}

impl std::error::Error for CryptoError {}

/// Encipher (memory → ciphertext) or decipher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Plaintext in, ciphertext out.
    Encrypt,
    /// Ciphertext in, plaintext out.
    Decrypt,
}

/// The XTS cipher of one key size.
enum XtsCipher {
    Aes128(Box<Xts128<Aes128>>),
    Aes256(Box<Xts128<Aes256>>),
}

/// An AES-XTS key pair (`key1` enciphers the data, `key2` the tweak), ready to use.
pub struct XtsKeys {
    cipher: XtsCipher,
}

impl fmt::Debug for XtsKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = match self.cipher {
            XtsCipher::Aes128(_) => 128,
            XtsCipher::Aes256(_) => 256,
        };
        write!(f, "XtsKeys(AES-{bits}, keys hidden)")
    }
}

impl XtsKeys {
    /// The pair `key1 | key2` as a DEK holds it: two halves of 16 (AES-128) or 32 (AES-256)
    /// bytes each.
    pub fn new(key1: &[u8], key2: &[u8]) -> Result<Self, CryptoError> {
        let bad = || CryptoError::KeyLength(key1.len());
        if key1.len() != key2.len() {
            return Err(CryptoError::KeyLength(key2.len()));
        }
        let cipher = match key1.len() {
            16 => XtsCipher::Aes128(Box::new(Xts128::new(
                Aes128::new_from_slice(key1).map_err(|_| bad())?,
                Aes128::new_from_slice(key2).map_err(|_| bad())?,
            ))),
            32 => XtsCipher::Aes256(Box::new(Xts128::new(
                Aes256::new_from_slice(key1).map_err(|_| bad())?,
                Aes256::new_from_slice(key2).map_err(|_| bad())?,
            ))),
            _ => return Err(bad()),
        };
        Ok(XtsKeys { cipher })
    }

    /// Encipher or decipher one data unit in place with `tweak` (at least one AES block).
    fn unit(&self, unit: &mut [u8], tweak: [u8; 16], dir: Direction) {
        // Guarded here as well as by the callers: xts-mode asserts on shorter units.
        if unit.len() < AES_BLOCK {
            return;
        }
        let t = get_tweak_default(u128::from_le_bytes(tweak));
        match (&self.cipher, dir) {
            (XtsCipher::Aes128(x), Direction::Encrypt) => x.encrypt_sector(unit, t),
            (XtsCipher::Aes128(x), Direction::Decrypt) => x.decrypt_sector(unit, t),
            (XtsCipher::Aes256(x), Direction::Encrypt) => x.encrypt_sector(unit, t),
            (XtsCipher::Aes256(x), Direction::Decrypt) => x.decrypt_sector(unit, t),
        }
    }
}

/// The tweak of data unit `index`: the initial tweak (little-endian) plus `index`, wrapping.
pub fn unit_tweak(initial: &[u8; 16], index: u128) -> [u8; 16] {
    u128::from_le_bytes(*initial).wrapping_add(index).to_le_bytes()
}

/// The AES-XTS job-size rule of `mlx5dv_wr_set_mkey_crypto`: `job` bytes may be enciphered in
/// units of `dus` bytes iff `job % dus == 0`, or `job` is whole AES blocks and its last, short
/// unit is at most `dus - 16` bytes. An empty job is valid; `dus` under one block never is.
pub fn job_size_valid(job: usize, dus: usize) -> bool {
    if dus < AES_BLOCK {
        return false;
    }
    let rem = job % dus;
    rem == 0 || (job.is_multiple_of(AES_BLOCK) && rem <= dus - AES_BLOCK)
}

/// Encipher or decipher `data` in place in data units of `dus` bytes, unit `i` with the tweak
/// [`unit_tweak`]`(initial_tweak, i)`. Fails, leaving `data` untouched, when the job-size
/// rule does not hold.
pub fn transform(
    keys: &XtsKeys,
    dus: usize,
    initial_tweak: &[u8; 16],
    dir: Direction,
    data: &mut [u8],
) -> Result<(), CryptoError> {
    if !job_size_valid(data.len(), dus) {
        return Err(CryptoError::JobSize { job: data.len(), dus });
    }
    for (i, unit) in data.chunks_mut(dus).enumerate() {
        keys.unit(unit, unit_tweak(initial_tweak, i as u128), dir);
    }
    Ok(())
}

/// AES key wrap (RFC 3394) of `plain` under `kek` (16 or 32 bytes); `plain` is whole
/// 8-byte words, at least two.
pub fn wrap_key(kek: &[u8], plain: &[u8]) -> Result<Vec<u8>, CryptoError> {
    let bad = CryptoError::WrapLength(plain.len());
    if plain.len() < 16 || !plain.len().is_multiple_of(8) {
        return Err(bad);
    }
    let mut out = vec![0u8; plain.len().checked_add(KEY_WRAP_OVERHEAD).ok_or(bad.clone())?];
    let r = match kek.len() {
        16 => KwAes128::new_from_slice(kek).map_err(|_| bad.clone())?.wrap_key(plain, &mut out).map(<[u8]>::len),
        32 => KwAes256::new_from_slice(kek).map_err(|_| bad.clone())?.wrap_key(plain, &mut out).map(<[u8]>::len),
        _ => return Err(CryptoError::WrapLength(kek.len())),
    };
    let n = r.map_err(|_| bad)?;
    out.truncate(n);
    Ok(out)
}

/// Undo [`wrap_key`]: the plaintext, or [`CryptoError::Unwrap`] when the integrity check
/// fails (wrong KEK or damaged data).
pub fn unwrap_key(kek: &[u8], wrapped: &[u8]) -> Result<Vec<u8>, CryptoError> {
    if wrapped.len() < 24 || !wrapped.len().is_multiple_of(8) {
        return Err(CryptoError::WrapLength(wrapped.len()));
    }
    let mut out = vec![0u8; wrapped.len() - KEY_WRAP_OVERHEAD];
    let bad = CryptoError::WrapLength(kek.len());
    let r = match kek.len() {
        16 => KwAes128::new_from_slice(kek).map_err(|_| bad)?.unwrap_key(wrapped, &mut out).map(<[u8]>::len),
        32 => KwAes256::new_from_slice(kek).map_err(|_| bad)?.unwrap_key(wrapped, &mut out).map(<[u8]>::len),
        _ => return Err(CryptoError::WrapLength(kek.len())),
    };
    let n = r.map_err(|_| CryptoError::Unwrap)?;
    out.truncate(n);
    Ok(out)
}

#[cfg(test)]
mod tests;
