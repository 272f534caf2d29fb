//! Read-only views of simulator internals for tests (feature `test-utils`): the firmware's
//! object tables and mkey contexts, the provider's signature context of an mkey, and the crypto
//! BSF the provider would write for a CRYPTO mkey; and one deliberately broken responder, for
//! tests that a model or suite catches it.

use mlx5_dv::Mkey;

use crate::Simulator;
use crate::provider::SigCtx;

/// The mkey context (`mkc`) of the mkey with `index` on device `dev`, as the firmware holds it.
pub fn mkc(sim: &Simulator, dev: usize, index: u32) -> Option<[u8; mlx5_dv::prm::mkc::SIZE]> {
    Some(sim.devices().get(dev)?.firmware().mkey(index)?.mkc)
}

/// Live (mkeys, PSVs, PDs) in the firmware of device `dev`.
pub fn object_counts(sim: &Simulator, dev: usize) -> Option<(usize, usize, usize)> {
    Some(sim.devices().get(dev)?.firmware().object_counts())
}

/// Whether the signature mkey with `index` on device `dev` has its PSVs armed (`None` if it has
/// no signature BSF).
pub fn sig_armed(sim: &Simulator, dev: usize, index: u32) -> Option<bool> {
    sim.devices().get(dev)?.firmware().sig_armed(index)
}

/// The provider's signature context of a live mkey, to drive the `mkey_check` decoder.
pub fn sig_ctx_mut<'s>(sim: &'s mut Simulator, mkey: &Mkey) -> Option<&'s mut SigCtx> {
    sim.provider_mut().sig_ctx_mut(mkey)
}

/// Live (crypto logins, DEKs) in the firmware of device `dev`.
pub fn crypto_object_counts(sim: &Simulator, dev: usize) -> Option<(usize, usize)> {
    Some(sim.devices().get(dev)?.firmware().crypto_object_counts())
}

/// The crypto BSF a UMR of this CRYPTO mkey would carry now: `Ok(None)` without crypto
/// attributes, the errno the finalize would store for attributes it refuses.
pub fn crypto_bsf(sim: &mut Simulator, mkey: &Mkey) -> Result<Option<mlx5_dv::prm::crypto_bsf::CryptoBsf>, i32> {
    sim.provider_mut().crypto_bsf_now(mkey.handle)
}

/// Break every device's responder on purpose: a retransmitted (or network-duplicated) SEND or
/// RDMA WRITE behind the expected PSN is executed a second time instead of acknowledged, as a
/// transport without duplicate detection would (the IBTA, 9.7.5.1.2, forbids it).
pub fn replay_duplicates(sim: &mut Simulator, on: bool) {
    sim.devices_mut().iter_mut().for_each(|d| d.replay_duplicates(on));
}
