//! The crypto stage of an mkey's pipeline: AES-XTS with the DEK its crypto BSF names, over
//! the whole of one transfer's bytes on the side the cipher sits (next to memory when the
//! signature follows crypto on TX, next to the wire otherwise). Data units count from the
//! transfer's first byte: unit `i` has the initial tweak plus `i`.

use std::sync::Arc;

use super::Engine;
use super::translate::Why;
use crate::crypto::{self, XtsKeys};
use crate::device::contract::CryptoBsfConfig;

/// The crypto stage of one transfer through a configured CRYPTO mkey.
#[derive(Debug, Clone)]
pub(super) struct CryptoStage {
    pub(super) cfg: CryptoBsfConfig,
    keys: Arc<XtsKeys>,
}

impl CryptoStage {
    /// Encipher or decipher `data` as the stage does going to the wire (`tx`) or coming from
    /// it: TX encrypts when `encrypt_on_tx`, RX then decrypts; the reverse otherwise.
    pub(super) fn apply(&self, tx: bool, data: &mut [u8]) -> Result<(), Why> {
        let dir = if tx == self.cfg.encrypt_on_tx() { crypto::Direction::Encrypt } else { crypto::Direction::Decrypt };
        crypto::transform(&self.keys, self.cfg.dus, &self.cfg.initial_tweak, dir, data).map_err(|_| Why::Crypto)
    }
}

impl Engine<'_> {
    /// The crypto stage of an mkey of device `dev` with crypto configuration `cfg`, for a
    /// transfer of `mem` bytes in memory and `wire` on the wire: a crypto fault for a DEK
    /// that is gone or in ERROR, a keytag that differs from a has_keytag DEK's, or a job size
    /// the AES-XTS rule refuses.
    pub(super) fn crypto_stage(
        &self,
        dev: usize,
        cfg: CryptoBsfConfig,
        mem: u64,
        wire: u64,
    ) -> Result<CryptoStage, Why> {
        let fw = &self.devs.get(dev).ok_or(Why::Key)?.fw;
        let dek = fw.dek(cfg.dek).ok_or(Why::Crypto)?;
        if dek.state != mlx5_dv::prm::crypto::encryption_key_obj::STATE_READY {
            return Err(Why::Crypto);
        }
        if dek.keytag.is_some_and(|t| t != cfg.keytag) {
            return Err(Why::Crypto);
        }
        let job = usize::try_from(if cfg.memory_side() { mem } else { wire }).map_err(|_| Why::Bounds)?;
        if !crypto::job_size_valid(job, cfg.dus) {
            return Err(Why::Crypto);
        }
        let keys = XtsKeys::new(&dek.key1, &dek.key2).map_err(|_| Why::Crypto)?;
        Ok(CryptoStage { cfg, keys: Arc::new(keys) })
    }
}
