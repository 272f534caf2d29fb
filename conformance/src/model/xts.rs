//! The crypto family: a CRYPTO mkey with a DEK (plaintext or wrapped, as the device imports
//! keys) and the AES-XTS round trip through it — data leaves memory through the mkey as a
//! local key and comes back into it as a remote key — and a CRYPTO mkey without crypto
//! attributes refusing a remote write (item 59); on multi-block devices optionally with a
//! T10-DIF signature in the memory domain, the wire domain or both (item 61's orders and the
//! man page's rows A–J). Written from `docs/behaviour.md` items 53–61; the oracle is the `aes`
//! and `xts-mode` crates (IEEE 1619 XTS with ciphertext stealing), data unit `i` under the
//! little-endian initial tweak plus `i` (item 58).
//!
//! Not generated: traffic through a local key without attributes and transfers breaking the
//! job-size rule (their error completions are profile settings, items 59 and 60), data
//! units shorter than 16 bytes, and a memory-domain signature alone under
//! SIGNATURE_AFTER_CRYPTO_ON_TX with `encrypt_on_tx` (a layout the man page's table does not
//! list).

use aes::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, BlockSizeUser, KeyInit, consts::U16};
use aes::{Aes128, Aes256};
use mlx5_dv::{MkeyErr, crypto, crypto_cap, sig, wc_opcode, wc_status};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use xts_mode::Xts128;

use super::outcome::Outcome;
use super::sig::{Dif, PI, pi};
use super::{Expect, Model, Op};

/// A crypto scenario on device `dev` (see the module's text). The transfer is `units` data
/// units of `dus` (`MLX5DV_BLOCK_SIZE_*`) plus `tail` bytes.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CryptoOp {
    pub dev: usize,
    /// A crypto setter runs; false: the configure has access and layout only.
    pub attrs: bool,
    pub key256: bool,
    pub keytag: bool,
    pub key_seed: u8,
    pub dus: u32,
    pub units: u8,
    pub tail: u16,
    pub tweak: u64,
    pub encrypt_on_tx: bool,
    /// `signature_crypto_order`: without signatures it does not matter (item 61).
    pub order: u32,
    pub seed: u8,
    /// A T10-DIF signature too; then the transfer is `units` signature blocks and `tail` is
    /// unused.
    pub sig: Option<CryptoSig>,
}

/// A T10-DIF signature beside the crypto (item 61), in the memory domain, the wire domain or
/// both (the same domain in both).
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CryptoSig {
    /// `MLX5DV_BLOCK_SIZE_*`.
    pub block_size: u32,
    pub dif: Dif,
    pub memory: bool,
    pub wire: bool,
}

impl CryptoSig {
    /// Both domains: item 57 refuses this with a RAW order.
    pub fn both(&self) -> bool {
        self.memory && self.wire
    }
}

/// How the device imports DEKs, as far as a model can use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DekMode {
    /// Plaintext keys (no wrapped import method).
    Plain,
    /// Keys wrapped under the simulator's published test import KEK, after a login with its
    /// test credential.
    Wrapped,
}

/// The DEK's key bytes: key1 | key2 (16 or 32 bytes each) | keytag (8, when it has one).
pub fn key_bytes(c: &CryptoOp) -> Vec<u8> {
    let ks = if c.key256 { 32 } else { 16 };
    let raw = super::fill_pattern(2 * ks + 8, c.key_seed ^ 0xa5);
    raw[..2 * ks + if c.keytag { 8 } else { 0 }].to_vec()
}

/// The keytag the crypto setter quotes: the DEK's, or any when it has none.
pub fn keytag(c: &CryptoOp) -> [u8; 8] {
    let k = key_bytes(c);
    let mut t = *b"NOKEYTAG";
    if c.keytag {
        t.copy_from_slice(&k[k.len() - 8..]);
    }
    t
}

fn cipher<C: KeyInit>(k: &[u8]) -> Option<C> {
    C::new_from_slice(k).ok()
}

fn run_xts<C>(xts: &Xts128<C>, dus: usize, tweak: u128, encrypt: bool, data: &mut [u8])
where
    C: BlockSizeUser<BlockSize = U16> + BlockCipherEncrypt + BlockCipherDecrypt,
{
    for (i, unit) in data.chunks_mut(dus).enumerate() {
        let t = xts_mode::get_tweak_default(tweak.wrapping_add(i as u128));
        if encrypt {
            xts.encrypt_sector(unit, t);
        } else {
            xts.decrypt_sector(unit, t);
        }
    }
}

/// `data` enciphered (or deciphered) under the op's key in `dus`-byte units; `None` for a
/// unit under 16 bytes, which XTS cannot take.
pub fn xts(c: &CryptoOp, dus: usize, encrypt: bool, data: &[u8]) -> Option<Vec<u8>> {
    if data.chunks(dus).any(|u| u.len() < 16) {
        return None;
    }
    let k = key_bytes(c);
    let ks = if c.key256 { 32 } else { 16 };
    let mut out = data.to_vec();
    let tweak = u128::from(c.tweak);
    if c.key256 {
        let x = Xts128::new(cipher::<Aes256>(&k[..ks])?, cipher::<Aes256>(&k[ks..2 * ks])?);
        run_xts(&x, dus, tweak, encrypt, &mut out);
    } else {
        let x = Xts128::new(cipher::<Aes128>(&k[..ks])?, cipher::<Aes128>(&k[ks..2 * ks])?);
        run_xts(&x, dus, tweak, encrypt, &mut out);
    }
    Some(out)
}

impl CryptoOp {
    /// The transfer's data bytes (what a local SGE of the mkey counts, item 42), when items
    /// 56 and 60 allow it on a device with (or without) the multi-block engine and every
    /// unit is at least 16 bytes.
    pub fn len(&self, multi_block: bool) -> Option<usize> {
        let dus = sig::block_bytes(self.dus)?;
        // Item 60 on the side the cipher runs, and no unit under 16 bytes.
        let fits = |len: usize| {
            let rest = len % dus;
            len > 0 && (rest == 0 || (len.is_multiple_of(16) && rest <= dus - 16)) && (rest == 0 || rest >= 16)
        };
        if let Some(w) = self.sig {
            // With signatures only on multi-block devices: the PI makes a form longer than
            // the data (item 56).
            let data = usize::from(self.units) * sig::block_bytes(w.block_size)?;
            return (self.attrs && multi_block && fits(self.cipher_len()?)).then_some(data);
        }
        let len = usize::from(self.units) * dus + usize::from(self.tail);
        (fits(len) && (multi_block || len <= dus)).then_some(len)
    }

    /// The length of the form the cipher runs over (item 61): the memory form when the
    /// signature comes after the crypto on TX, else the wire form.
    fn cipher_len(&self) -> Option<usize> {
        let Some(w) = self.sig else { return Some(usize::from(self.units) * sig::block_bytes(self.dus)?) };
        let form =
            |pi: bool| Some(usize::from(self.units) * (sig::block_bytes(w.block_size)? + if pi { PI } else { 0 }));
        if self.order == crypto::SIGNATURE_BEFORE_CRYPTO_ON_TX { form(w.wire) } else { form(w.memory) }
    }

    /// RAW_WIRE (encrypt on TX, signature after) or RAW_MEMORY (decrypt on TX, signature
    /// before), item 57.
    pub fn raw_order(&self) -> bool {
        (self.order == crypto::SIGNATURE_BEFORE_CRYPTO_ON_TX) != self.encrypt_on_tx
    }

    /// The memory form the scenario starts from and the wire form TX makes of it (item 61;
    /// the man page's rows). TX runs the crypto over the whole memory form and then the
    /// signatures (AFTER: strip the memory PI, insert the wire PI), or the signatures first
    /// and the crypto over what they leave (BEFORE); RX the reverse. The memory form holds
    /// valid PI: its data is a pattern on the side where the memory PI is computed.
    pub fn forms(&self, len: usize) -> Option<(Vec<u8>, Vec<u8>)> {
        let dus = sig::block_bytes(self.dus)?;
        let tx = |x: &[u8]| xts(self, dus, self.encrypt_on_tx, x);
        let untx = |x: &[u8]| xts(self, dus, !self.encrypt_on_tx, x);
        let Some(w) = self.sig else {
            let memory = super::fill_pattern(len, self.seed);
            let wire = tx(&memory)?;
            return Some((memory, wire));
        };
        let sbs = sig::block_bytes(w.block_size)?;
        let signed = |on: bool, data: &[u8]| -> Vec<u8> {
            if !on {
                return data.to_vec();
            }
            data.chunks(sbs).enumerate().flat_map(|(i, d)| [d, &pi(&w.dif, d, i)[..]].concat()).collect()
        };
        let data = super::fill_pattern(len, self.seed);
        if self.order == crypto::SIGNATURE_BEFORE_CRYPTO_ON_TX {
            // Rows C, D, E, J: the PI of both domains is over the memory's data.
            Some((signed(w.memory, &data), tx(&signed(w.wire, &data))?))
        } else {
            // Rows B, G, H, I: the PI of both domains is over the crypto's output.
            Some((untx(&signed(w.memory, &data))?, signed(w.wire, &data)))
        }
    }
}

impl Model {
    /// How DEKs can be made on this device, if at all (items 51, 53).
    pub(super) fn dek_mode(&self) -> Option<DekMode> {
        let c = &self.crypto_caps;
        let engine =
            c.crypto_engines & (crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK | crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK) != 0;
        let has = |ty: u32| self.obj_types.is_none_or(|m| m & (1u64 << ty) != 0);
        if !engine || !has(0xc) || c.flags & crypto_cap::FLAG_CRYPTO == 0 {
            return None;
        }
        if c.wrapped_import_method & crypto_cap::WRAPPED_IMPORT_AES_XTS == 0 {
            return Some(DekMode::Plain);
        }
        let login = crypto_cap::FLAG_CRYPTO | crypto_cap::FLAG_WRAPPED_CRYPTO_OPERATIONAL;
        (c.flags & login == login && has(0x1f) && self.sim_control).then_some(DekMode::Wrapped)
    }

    fn multi_block(&self) -> bool {
        self.crypto_caps.crypto_engines & crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK != 0
    }

    /// How the scenario makes its DEK and its transfer's length, when the model judges it.
    pub(super) fn crypto_plan(&self, c: &CryptoOp) -> Option<(DekMode, usize)> {
        Some((self.dek_mode()?, c.len(self.multi_block())?))
    }

    /// What a [`CryptoOp`] leaves: the round trip's ciphertext on the wire and the plaintext
    /// back in memory, or the refused write and memory untouched.
    pub(super) fn crypto_step(&mut self, c: &CryptoOp) -> Expect {
        if self.offload_dev(c.dev).is_none() || self.dek_mode().is_none() {
            return Expect::Unknown;
        }
        let Some(len) = c.len(self.multi_block()) else { return Expect::Unknown };
        if c.sig.is_some_and(|w| !self.t10dif() || self.sig_caps.block_size & (1 << w.block_size) == 0) {
            return Expect::Unknown;
        }
        // A memory signature alone with RAW_WIRE: a layout the man page does not list.
        if c.sig.is_some_and(|w| w.memory && !w.wire) && c.raw_order() && c.encrypt_on_tx {
            return Expect::Unknown;
        }
        let Some((memory, wire)) = c.forms(len) else { return Expect::Unknown };
        let outcome = if c.sig.is_some_and(|w| w.both()) && c.raw_order() {
            // Item 57: a RAW order with signatures in both domains.
            if !c.attrs {
                return Expect::Unknown;
            }
            Outcome { refused: Some(mlx5_dv::errno::EINVAL), ..Outcome::default() }
        } else if c.attrs {
            // The PI the wire brings back is the one the way out made: no signature error.
            let checks = if c.sig.is_some() { vec![MkeyErr::NONE] } else { Vec::new() };
            Outcome {
                cqes: vec![
                    (0, Some(wc_opcode::DRIVER1)),
                    (0, Some(wc_opcode::RDMA_WRITE)),
                    (0, Some(wc_opcode::RDMA_WRITE)),
                ],
                bytes: vec![("wire", wire), ("memory", memory)],
                checks,
                refused: None,
                ..Outcome::default()
            }
        } else {
            Outcome {
                cqes: vec![(0, Some(wc_opcode::DRIVER1)), (wc_status::REM_ACCESS_ERR, None)],
                bytes: vec![("memory", memory)],
                checks: Vec::new(),
                refused: None,
                ..Outcome::default()
            }
        };
        self.effects.outcome = Some(outcome);
        Expect::Ok(None)
    }
}

/// Crypto scenarios on mlx5 devices `devs`.
pub(super) fn strategy(m: &Model, devs: Vec<usize>) -> BoxedStrategy<Op> {
    let multi = m.multi_block();
    let units = if multi { prop_oneof![3 => Just(1u8), 1 => Just(2u8)].boxed() } else { Just(1u8).boxed() };
    let tail = if multi {
        prop_oneof![3 => Just(0u16), 1 => (1u16..8).prop_map(|t| t * 16)].boxed()
    } else {
        Just(0u16).boxed()
    };
    let sizes: Vec<u32> = (0..5).filter(|b| m.sig_caps.block_size & (1 << b) != 0).collect();
    let sig = if multi && m.t10dif() && !sizes.is_empty() {
        // Wire only, memory only, both.
        let domains = prop_oneof![2 => Just((false, true)), 1 => Just((true, false)), 1 => Just((true, true))];
        let w = (proptest::sample::select(sizes), super::sig::dif(m.sig_caps.t10dif_bg), domains)
            .prop_map(|(block_size, dif, (memory, wire))| Some(CryptoSig { block_size, dif, memory, wire }));
        prop_oneof![1 => Just(None), 2 => w].boxed()
    } else {
        Just(None).boxed()
    };
    (
        (proptest::sample::select(devs), prop_oneof![6 => Just(true), 1 => Just(false)], any::<bool>(), any::<bool>()),
        (any::<u8>(), 0u32..5, units, tail, any::<u64>()),
        (any::<bool>(), 0u32..2, any::<u8>(), sig),
    )
        .prop_map(
            move |(
                (dev, attrs, key256, keytag),
                (key_seed, dus, units, tail, tweak),
                (encrypt_on_tx, order, seed, sig),
            )| {
                let c = CryptoOp {
                    dev,
                    attrs,
                    key256,
                    keytag,
                    key_seed,
                    dus,
                    units,
                    tail,
                    tweak,
                    encrypt_on_tx,
                    order,
                    seed,
                    sig,
                };
                // A memory signature alone with RAW_WIRE is not in the table: signature first.
                let c = match sig {
                    Some(w) if w.memory && !w.wire && encrypt_on_tx && c.raw_order() => {
                        CryptoOp { order: crypto::SIGNATURE_BEFORE_CRYPTO_ON_TX, ..c }
                    }
                    _ => c,
                };
                // A length the docs leave open becomes one data unit, which every device takes.
                let one = CryptoOp { units: 1, tail: 0, sig: None, ..c };
                Op::Crypto(if c.len(multi).is_some() { c } else { one })
            },
        )
        .boxed()
}
