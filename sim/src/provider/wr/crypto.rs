//! `mlx5dv_wr_set_mkey_crypto`: the setter's checks in the provider's order, each EINVAL,
//! and the attributes it leaves on the mkey for the UMR's crypto BSF.

use mlx5_dv::errno::{EINVAL, ENOMEM};
use mlx5_dv::prm::crypto_bsf::{self, BsfContext, CryptoBsf};
use mlx5_dv::{CryptoAttr, MkeyHandle, Op, crypto, crypto_cap, sig};

use super::super::qp::{INL_SEG, align};
use super::super::{BsfState, Provider, SigDomainType};
use super::sig::sig_config;
use super::{Chain, OpenConfigure};
use crate::device::contract::SigBsf;
use crate::signature::SigConfig;

impl Provider {
    /// `mlx5_send_wr_set_mkey_crypto`: an earlier error stands; then no open configure, a mkey
    /// without CRYPTO, a second call in this WR, comp_mask, the standard, the signature order
    /// and the data unit size are each EINVAL. The provider does not look at the DEK, but
    /// follows it when it finalizes the UMR: a NULL or destroyed DEK (undefined in C) is EINVAL
    /// here, after the provider's own checks.
    pub(super) fn set_crypto(&mut self, ch: &mut Chain, attr: &CryptoAttr) {
        if ch.err != 0 {
            return;
        }
        let dek_live = attr.dek.and_then(|d| self.crypto.dek_obj_id(d)).is_some();
        let Some(open) = &mut ch.open else {
            ch.err = EINVAL;
            return;
        };
        let Some(c) = self.mkeys.get_mut(open.mkey, mlx5_dv::Op::PostSend).ok().and_then(|m| m.crypto_ctx.as_mut())
        else {
            ch.err = EINVAL;
            return;
        };
        if c.state == BsfState::Updated
            || attr.comp_mask != 0
            || attr.crypto_standard != crypto::STANDARD_AES_XTS
            || !matches!(
                attr.signature_crypto_order,
                crypto::SIGNATURE_AFTER_CRYPTO_ON_TX | crypto::SIGNATURE_BEFORE_CRYPTO_ON_TX
            )
            || attr.data_unit_size > sig::BLOCK_4160
        {
            ch.err = EINVAL;
            return;
        }
        // Not libmlx5's check: what its finalize would follow (a NULL or destroyed DEK).
        if !dek_live {
            ch.err = EINVAL;
            return;
        }
        c.attr = Some(*attr);
        c.state = BsfState::Updated;
        open.done += 1;
        if open.done == open.expected {
            self.finalize(ch);
        }
    }
}

impl Provider {
    /// `crypto_umr_wqe_finalize` for a CRYPTO mkey: the signature error count, the
    /// single-block rule, then, when the signature attributes were set or reset or the
    /// crypto attributes set in this WR, the BSFs (a signature BSF first if the mkey has a
    /// signature context, NONE in both domains after a reset; the crypto BSF when crypto
    /// attributes stand) with the ENOMEM and 4 GiB checks. The BSF is never disabled. Returns
    /// whether the signature PSVs are to be set.
    pub(super) fn crypto_finalize(&mut self, open: &mut OpenConfigure, max_inline: i64) -> Result<bool, i32> {
        let m = self.mkeys.get(open.mkey, Op::PostSend).map_err(|_| EINVAL)?;
        let engines = self.contexts.get(m.ctx, Op::PostSend).map_or(0, |c| c.caps.crypto.crypto_engines);
        let crypto = m.crypto_ctx.unwrap_or_default();
        let dek_id = crypto.attr.and_then(|a| a.dek).and_then(|d| self.crypto.dek_obj_id(d));
        let m = self.mkeys.get_mut(open.mkey, Op::PostSend).map_err(|_| EINVAL)?;
        let length = m.length;
        let mut set_psv = false;
        if let Some(s) = &mut m.sig
            && s.err_count_updated
        {
            // upd_mkc_sig_err_cnt, as for a signature-only mkey.
            s.err_count_updated = false;
            open.umr.sig_err_count = Some((s.err_count & 1) as u8);
            set_psv = s.state == BsfState::Set;
        }
        let crypto_on = matches!(crypto.state, BsfState::Updated | BsfState::Set);
        let dus = crypto.attr.map_or(u32::MAX, |a| a.data_unit_size);
        if crypto_on && !single_block_length_ok(engines, dus, length) {
            return Err(EINVAL);
        }
        let sig_state = m.sig.as_ref().map(|s| s.state);
        let rewrite =
            matches!(sig_state, Some(BsfState::Updated | BsfState::Reset)) || crypto.state == BsfState::Updated;
        if !rewrite {
            return Ok(set_psv);
        }
        let bsf_bytes = 64 * (i64::from(m.sig.is_some()) + i64::from(crypto_on));
        set_psv |= sig_state == Some(BsfState::Updated);
        if i64::from(align(open.xlat_bytes, 64)) + bsf_bytes > max_inline + INL_SEG {
            return Err(ENOMEM);
        }
        if length > u64::from(u32::MAX) {
            return Err(EINVAL);
        }
        if let Some(s) = &m.sig {
            let cfg = match s.attr.as_ref().map(sig_config) {
                Some(r) => r?,
                None => SigConfig { mem: None, wire: None, check_mask: 0, copy_mask: 0, sbs: false },
            };
            let psv = |on: bool, p: Option<u32>| if on { p.unwrap_or(0) } else { 0 };
            let (mem_psv, wire_psv) = (psv(cfg.mem.is_some(), s.mem_psv), psv(cfg.wire.is_some(), s.wire_psv));
            open.umr.sig_bsf = Some(SigBsf { cfg, mem_psv, wire_psv });
        }
        if crypto_on {
            let attr = crypto.attr.ok_or(EINVAL)?;
            let sig = m.sig.as_ref().map(|s| (s.mem != SigDomainType::None, s.wire != SigDomainType::None));
            let multi_block = engines & crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK != 0;
            let cx = BsfContext { dek_id: dek_id.ok_or(EINVAL)?, multi_block, sig };
            open.umr.crypto_bsf = Some(crypto_bsf::build(&attr, cx)?);
        }
        Ok(set_psv)
    }

    /// What `crypto_umr_wqe_finalize` needs of a CRYPTO mkey: `Ok(None)` when no crypto BSF
    /// is written (no attributes), the BSF when attributes were set in this WR or kept, and
    /// EINVAL for a single-block device's mkey longer than one data unit, an order the device
    /// refuses, or a DEK that is not live (NULL or destroyed, undefined in C).
    #[allow(dead_code)] // the UMR finalize calls it once the crypto BSF is wired into the WQE
    pub(super) fn crypto_bsf(&self, mkey: MkeyHandle, engines: u8) -> Result<Option<CryptoBsf>, i32> {
        let m = self.mkeys.get(mkey, Op::PostSend).map_err(|_| EINVAL)?;
        let Some(c) = &m.crypto_ctx else { return Ok(None) };
        let Some(attr) = c.attr.filter(|_| matches!(c.state, BsfState::Updated | BsfState::Set)) else {
            return Ok(None);
        };
        if !single_block_length_ok(engines, attr.data_unit_size, m.length) {
            return Err(EINVAL);
        }
        let dek_id = attr.dek.and_then(|d| self.crypto.dek_obj_id(d)).ok_or(EINVAL)?;
        let sig = m.sig.as_ref().map(|s| (s.mem != SigDomainType::None, s.wire != SigDomainType::None));
        let multi_block = engines & crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK != 0;
        crypto_bsf::build(&attr, BsfContext { dek_id, multi_block, sig }).map(Some)
    }

    /// The crypto BSF a UMR of this mkey would carry now, with its context's engines (test
    /// views).
    #[cfg(feature = "test-utils")]
    pub(crate) fn crypto_bsf_now(&self, mkey: MkeyHandle) -> Result<Option<CryptoBsf>, i32> {
        let m = self.mkeys.get(mkey, Op::PostSend).map_err(|_| EINVAL)?;
        let engines = self.contexts.get(m.ctx, Op::PostSend).map_or(0, |c| c.caps.crypto.crypto_engines);
        self.crypto_bsf(mkey, engines)
    }
}

/// `crypto_umr_wqe_finalize`'s single-block rule: with attributes set and only the
/// single-block engine, the mkey may not be longer than one data unit (else EINVAL). For the
/// UMR finalize to call.
pub(in crate::provider) fn single_block_length_ok(engines: u8, data_unit_size: u32, length: u64) -> bool {
    use mlx5_dv::crypto_cap::{ENGINE_AES_XTS_MULTI_BLOCK as MULTI, ENGINE_AES_XTS_SINGLE_BLOCK as SINGLE};
    if engines & SINGLE == 0 || engines & MULTI != 0 {
        return true;
    }
    sig::block_bytes(data_unit_size).is_some_and(|dus| length <= dus as u64)
}

#[cfg(test)]
mod tests {
    use mlx5_dv::crypto_cap::{ENGINE_AES_XTS_MULTI_BLOCK as MULTI, ENGINE_AES_XTS_SINGLE_BLOCK as SINGLE};

    use super::*;

    #[test]
    fn single_block_engines_limit_the_mkey_to_one_data_unit() {
        assert!(single_block_length_ok(SINGLE, sig::BLOCK_512, 512));
        assert!(!single_block_length_ok(SINGLE, sig::BLOCK_512, 513));
        assert!(!single_block_length_ok(SINGLE, 7, 1), "no data unit size: EINVAL");
        assert!(single_block_length_ok(SINGLE | MULTI, sig::BLOCK_512, 1 << 20));
        assert!(single_block_length_ok(0, sig::BLOCK_512, 1 << 20));
    }
}
