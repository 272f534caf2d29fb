//! Crypto on the data path: §12.56–58, 60, 61 and item 81. The expected bytes come from the
//! simulator's AES-XTS module (checked against the IEEE 1619-2007 vectors), a pure function
//! of key, data unit size and tweak, so the same expectations hold on hardware.

use mlx5_dv::errno::{EINVAL, ENOMEM};
use mlx5_dv::prm::wqe::umr_ctrl::mkey_mask;
use mlx5_dv::profile::SignatureSection;
use mlx5_dv::{
    AccessFlags as A, Backend, CryptoAttr, DekHandle, Mkey, MkeyConfFlags, MkeyInitFlags as F, SendFlags, SigBlockAttr,
    SigBlockDomain, SigT10dif, WrOp, crypto, crypto_cap, sig, wc_opcode, wc_status,
};
use mlx5_sim::crypto::{Direction, XtsKeys, transform};
use mlx5_sim::signature::{Crcs, Domain};

use super::crypto::{any_dek, crypto_pair, plain_key};
use super::fixture::{QP_ACCESS, Side, contents, indirect_mkey, ok_cqe, pattern, poll, region, sge, write};
use super::sig::{rx_into, with_t10};
use super::wqe_bytes::umr_masks_and_sig_err_counts;
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device, Need::DekObjects, Need::Devx];
const WITH_SIG: &[Need] = &[Need::Mlx5Device, Need::DekObjects, Need::Devx, Need::SigCaps];

pub(super) const CASES: &[Case] = &[
    Case { name: "crypto_dp.single_block_length", covers: &[56], needs: NEEDS, run: single_block },
    Case { name: "crypto_dp.raw_order_with_both_signatures", covers: &[57], needs: WITH_SIG, run: raw_orders },
    Case { name: "crypto_dp.tweak_and_keytag", covers: &[58], needs: NEEDS, run: tweak_and_keytag },
    Case { name: "crypto_dp.job_size_rule", covers: &[60], needs: NEEDS, run: job_sizes },
    Case { name: "crypto_dp.signature_order_rows", covers: &[61], needs: WITH_SIG, run: order_rows },
    Case { name: "crypto_dp.reset_sig_keeps_crypto", covers: &[81], needs: WITH_SIG, run: reset_sig },
    Case { name: "crypto_dp.crypto_bsf_fits_to_the_last_octoword", covers: &[38], needs: NEEDS, run: fit_crypto },
    Case { name: "crypto_dp.both_bsfs_fit_to_the_last_octoword", covers: &[38, 81], needs: WITH_SIG, run: fit_both },
    Case {
        name: "crypto_dp.reconfigure_after_a_sig_error_writes_the_count",
        covers: &[46, 81],
        needs: WITH_SIG,
        run: sig_err_count,
    },
];

/// Skip on a single-block-only device, whose crypto mkeys span one data unit at most.
fn multi_block(env: &Env) -> Check {
    if env.caps.device.crypto.crypto_engines & crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK == 0 {
        return Err(Verdict::skip("needs the multi-block engine (mkeys longer than one data unit)"));
    }
    Ok(())
}

const TWEAK: [u8; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0];

fn attr(dek: DekHandle, encrypt_on_tx: bool, order: u32, dus: u32) -> CryptoAttr {
    CryptoAttr {
        crypto_standard: crypto::STANDARD_AES_XTS,
        encrypt_on_tx,
        signature_crypto_order: order,
        data_unit_size: dus,
        initial_tweak: TWEAK,
        dek: Some(dek),
        keytag: *b"KEYTAG42",
        comp_mask: 0,
    }
}

/// `data` enciphered (or deciphered) as the DEK of `plain_key` does it, in `dus`-byte units.
fn xts(dus: usize, encrypt: bool, data: &[u8]) -> Check<Vec<u8>> {
    let key = plain_key();
    let keys = XtsKeys::new(&key[..32], &key[32..64]).map_err(|e| Verdict::fail("AES-XTS keys", "ok", e))?;
    let mut out = data.to_vec();
    let dir = if encrypt { Direction::Encrypt } else { Direction::Decrypt };
    transform(&keys, dus, &TWEAK, dir, &mut out).map_err(|e| Verdict::fail("AES-XTS reference", "ok", e))?;
    Ok(out)
}

/// A configure of `mkey` with `setters` (access first), posted on the server.
fn configure(
    b: &mut dyn Backend,
    s: &Side,
    mkey: Mkey,
    conf_flags: MkeyConfFlags,
    setters: Vec<WrOp>,
) -> mlx5_dv::Result<()> {
    let conf = WrOp::MkeyConfigure {
        wr_id: 0xc1,
        flags: SendFlags::SIGNALED | SendFlags::INLINE,
        mkey,
        num_setters: setters.len() as u8,
        conf_flags,
        comp_mask: 0,
    };
    b.post_send(&s.qp, &[vec![conf], setters].concat())
}

/// A configured crypto (and signature) mkey over `len` bytes of `fill`.
fn crypto_mkey(
    b: &mut dyn Backend,
    s: &Side,
    fill: &[u8],
    a: CryptoAttr,
    sig: Option<SigBlockAttr>,
) -> Check<(mlx5_dv::Buf, Mkey)> {
    let (buf, mr) = region(b, s.pd, fill.len(), fill, A::LOCAL_WRITE)?;
    let flags = if sig.is_some() { F::INDIRECT | F::CRYPTO | F::BLOCK_SIGNATURE } else { F::INDIRECT | F::CRYPTO };
    let mkey = indirect_mkey(b, s.pd, flags, 4)?;
    let mut setters =
        vec![WrOp::SetMkeyAccessFlags(QP_ACCESS), WrOp::SetMkeyLayoutList(vec![sge(&mr, 0, fill.len() as u32)])];
    setters.extend(sig.map(WrOp::SetMkeySigBlock));
    setters.push(WrOp::SetMkeyCrypto(a));
    expect_ok("configure a crypto mkey", configure(b, s, mkey, MkeyConfFlags::empty(), setters))?;
    ok_cqe(b, &s.cq, 0xc1, wc_opcode::DRIVER1)?;
    Ok((buf, mkey))
}

/// WRITE `len` bytes from the mkey (the local key) into a fresh region on the client side:
/// the completion and what arrived.
fn write_out(b: &mut dyn Backend, s: &Side, a: &Side, mkey: &Mkey, len: u32, wire: usize) -> Check<(u32, Vec<u8>)> {
    let (dst, dmr) = region(b, a.pd, wire, &vec![0; wire], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let sg = mlx5_dv::Sge { addr: 0, length: len, lkey: mkey.lkey };
    expect_ok("RDMA WRITE from the crypto mkey", b.post_send(&s.qp, &[write(7, dmr.rkey, dmr.addr, vec![sg])]))?;
    let wc = poll(b, &s.cq, 1)?.remove(0);
    Ok((wc.status, contents(b, &dst)?))
}

fn t10_wire() -> SigBlockAttr {
    let d = SigBlockDomain::t10dif(sig::BLOCK_512, SigT10dif { bg_type: sig::BG_CRC, ..Default::default() });
    SigBlockAttr { mem: None, wire: Some(d), check_mask: 0xff, ..SigBlockAttr::default() }
}

fn single_block(b: &mut dyn Backend, env: &Env) -> Check {
    let e = env.caps.device.crypto.crypto_engines;
    if e & crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK != 0 || e & crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK == 0 {
        return Err(Verdict::skip("the device is not single-block only"));
    }
    let (_, s) = crypto_pair(b, env)?;
    let (dek, _) = any_dek(b, env, s.ctx, s.pd)?;
    let (_buf, mr) = region(b, s.pd, 1024, &[], A::LOCAL_WRITE)?;
    let mkey = indirect_mkey(b, s.pd, F::INDIRECT | F::CRYPTO, 4)?;
    let a = attr(dek, true, crypto::SIGNATURE_AFTER_CRYPTO_ON_TX, sig::BLOCK_512);
    let with = |len| vec![WrOp::SetMkeyCrypto(a), WrOp::SetMkeyLayoutList(vec![sge(&mr, 0, len)])];
    expect_errno("1024-byte mkey, 512-byte units", configure(b, &s, mkey, MkeyConfFlags::empty(), with(1024)), EINVAL)?;
    expect_ok("512-byte mkey, 512-byte units", configure(b, &s, mkey, MkeyConfFlags::empty(), with(512)))?;
    ok_cqe(b, &s.cq, 0xc1, wc_opcode::DRIVER1)?;
    let longer = vec![WrOp::SetMkeyLayoutList(vec![sge(&mr, 0, 1024)])];
    expect_errno("kept attributes, a longer layout", configure(b, &s, mkey, MkeyConfFlags::empty(), longer), EINVAL)
}

fn raw_orders(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, s) = crypto_pair(b, env)?;
    let (dek, _) = any_dek(b, env, s.ctx, s.pd)?;
    let (_buf, mr) = region(b, s.pd, 512, &[], A::LOCAL_WRITE)?;
    let wire = t10_wire();
    let both = SigBlockAttr { mem: wire.wire, ..wire };
    use crypto::{SIGNATURE_AFTER_CRYPTO_ON_TX as AFTER, SIGNATURE_BEFORE_CRYPTO_ON_TX as BEFORE};
    for (enc, order, raw) in [(true, AFTER, true), (true, BEFORE, false), (false, AFTER, false), (false, BEFORE, true)]
    {
        for (domains, sig) in [("both domains", both), ("the wire domain", wire)] {
            let mkey = indirect_mkey(b, s.pd, F::INDIRECT | F::CRYPTO | F::BLOCK_SIGNATURE, 4)?;
            let setters = vec![
                WrOp::SetMkeyLayoutList(vec![sge(&mr, 0, 512)]),
                WrOp::SetMkeySigBlock(sig),
                WrOp::SetMkeyCrypto(attr(dek, enc, order, sig::BLOCK_512)),
            ];
            let what = format!("encrypt_on_tx {enc}, order {order}, signature in {domains}");
            let r = configure(b, &s, mkey, MkeyConfFlags::empty(), setters);
            if raw && domains == "both domains" {
                expect_errno(&what, r, EINVAL)?;
            } else {
                expect_ok(&what, r)?;
                ok_cqe(b, &s.cq, 0xc1, wc_opcode::DRIVER1)?;
            }
        }
    }
    Ok(())
}

fn tweak_and_keytag(b: &mut dyn Backend, env: &Env) -> Check {
    multi_block(env)?;
    let data = pattern(1024, 5);
    for good in [true, false] {
        let (a, s) = crypto_pair(b, env)?;
        let (dek, _) = any_dek(b, env, s.ctx, s.pd)?;
        let mut ca = attr(dek, true, crypto::SIGNATURE_AFTER_CRYPTO_ON_TX, sig::BLOCK_512);
        if !good {
            ca.keytag = *b"WRONGTAG";
        }
        let (_m, mkey) = crypto_mkey(b, &s, &data, ca, None)?;
        let (status, got) = write_out(b, &s, &a, &mkey, 1024, 1024)?;
        if good {
            check_eq("the keytag matches: the WRITE completes", status, wc_status::SUCCESS)?;
            check_eq("two data units, the little-endian tweak counting up", got, xts(512, true, &data)?)?;
        } else {
            check("a keytag mismatch: an error completion", status != wc_status::SUCCESS, "an error status", status)?;
            check_eq("nothing reaches the peer", got, vec![0; 1024])?;
        }
    }
    Ok(())
}

fn job_sizes(b: &mut dyn Backend, env: &Env) -> Check {
    let data = pattern(1040, 9);
    for (dus_sel, dus, len, ok) in [
        (sig::BLOCK_512, 512, 512, true),
        (sig::BLOCK_512, 512, 128, true),
        (sig::BLOCK_512, 512, 47, false),
        (sig::BLOCK_520, 520, 520, true),
        (sig::BLOCK_520, 520, 496, true),
        (sig::BLOCK_520, 520, 512, false),
    ] {
        let (a, s) = crypto_pair(b, env)?;
        let (dek, _) = any_dek(b, env, s.ctx, s.pd)?;
        // The mkey spans the transfer: within one data unit, as a single-block device needs.
        let a_ = attr(dek, true, crypto::SIGNATURE_AFTER_CRYPTO_ON_TX, dus_sel);
        let (_m, mkey) = crypto_mkey(b, &s, &data[..len], a_, None)?;
        let (status, got) = write_out(b, &s, &a, &mkey, len as u32, len)?;
        let what = format!("{len} bytes in {dus}-byte units");
        if ok {
            check_eq(&what, status, wc_status::SUCCESS)?;
            check_eq(&format!("{what}: the ciphertext"), got, xts(dus, true, &data[..len])?)?;
        } else {
            check(&what, status != wc_status::SUCCESS, "an error completion", status)?;
            check_eq(&format!("{what}: nothing arrives"), got, vec![0; len])?;
        }
    }
    Ok(())
}

/// The T10-DIF guard of each 520-byte wire block equals the CRC of its 512 data bytes.
fn guards_cover(wire: &[u8], what: &str) -> Check {
    let crcs = Crcs::new(&SignatureSection::default());
    let d =
        t10_wire().wire.and_then(|d| Domain::from_attr(&d)).ok_or_else(|| Verdict::fail(what, "a domain", "none"))?;
    for (i, blk) in wire.chunks(520).enumerate() {
        let (data, pi) = blk.split_at(512.min(blk.len()));
        let want = (d.compute(&crcs, i as u64, data) >> 48) as u16;
        check_eq(&format!("{what}: block {i} guard"), pi.get(..2), Some(&want.to_be_bytes()[..]))?;
    }
    Ok(())
}

fn order_rows(b: &mut dyn Backend, env: &Env) -> Check {
    use crypto::{SIGNATURE_AFTER_CRYPTO_ON_TX as AFTER, SIGNATURE_BEFORE_CRYPTO_ON_TX as BEFORE};
    multi_block(env)?;
    let data = pattern(1024, 3);
    // Row A: no signature; memory plaintext, wire ciphertext.
    let (a, s) = crypto_pair(b, env)?;
    let (dek, _) = any_dek(b, env, s.ctx, s.pd)?;
    let (_m, mk) = crypto_mkey(b, &s, &data, attr(dek, true, AFTER, sig::BLOCK_512), None)?;
    let (st, wire) = write_out(b, &s, &a, &mk, 1024, 1024)?;
    check_eq("row A completes", st, wc_status::SUCCESS)?;
    check_eq("row A: enc(data)", wire, xts(512, true, &data)?)?;
    // Row F: memory ciphertext, wire plaintext.
    let (_m, mk) = crypto_mkey(b, &s, &xts(512, true, &data)?, attr(dek, false, AFTER, sig::BLOCK_512), None)?;
    let (st, wire) = write_out(b, &s, &a, &mk, 1024, 1024)?;
    check_eq("row F completes", st, wc_status::SUCCESS)?;
    check_eq("row F: data", wire, data.clone())?;
    // Row B: signature after crypto: enc(data) + a PI over the ciphertext.
    let (_m, mk) = crypto_mkey(b, &s, &data, attr(dek, true, AFTER, sig::BLOCK_512), Some(t10_wire()))?;
    let (st, wire) = write_out(b, &s, &a, &mk, 1024, 1040)?;
    check_eq("row B completes", st, wc_status::SUCCESS)?;
    let cipher: Vec<u8> = wire.chunks(520).flat_map(|c| c[..512.min(c.len())].to_vec()).collect();
    check_eq("row B: the data is enc(data)", cipher, xts(512, true, &data)?)?;
    guards_cover(&wire, "row B: the PI covers the ciphertext")?;
    // Row C: signature before crypto: enc(data + PI) in 520-byte units.
    let (_m, mk) = crypto_mkey(b, &s, &data, attr(dek, true, BEFORE, sig::BLOCK_520), Some(t10_wire()))?;
    let (st, wire) = write_out(b, &s, &a, &mk, 1024, 1040)?;
    check_eq("row C completes", st, wc_status::SUCCESS)?;
    let plain = xts(520, false, &wire)?;
    let back: Vec<u8> = plain.chunks(520).flat_map(|c| c[..512.min(c.len())].to_vec()).collect();
    check_eq("row C: data under the cipher", back, data.clone())?;
    guards_cover(&plain, "row C: the PI, encrypted with the data, covers the plaintext")
}

fn reset_sig(b: &mut dyn Backend, env: &Env) -> Check {
    let data = pattern(512, 7);
    let (a, s) = crypto_pair(b, env)?;
    let (dek, _) = any_dek(b, env, s.ctx, s.pd)?;
    let ca = attr(dek, true, crypto::SIGNATURE_AFTER_CRYPTO_ON_TX, sig::BLOCK_512);
    let (_m, mk) = crypto_mkey(b, &s, &data, ca, Some(t10_wire()))?;
    let (st, wire) = write_out(b, &s, &a, &mk, 512, 520)?;
    check_eq("with the signature: 520 wire bytes", (st, wire.len()), (wc_status::SUCCESS, 520))?;
    let reset = mlx5_dv::MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR;
    expect_ok("configure with RESET_SIG_ATTR and no setters", configure(b, &s, mk, reset, vec![]))?;
    ok_cqe(b, &s.cq, 0xc1, wc_opcode::DRIVER1)?;
    let (st, wire) = write_out(b, &s, &a, &mk, 512, 512)?;
    check_eq("after the reset the WRITE completes (the BSF is not disabled)", st, wc_status::SUCCESS)?;
    check_eq("no PI, still encrypted", wire, xts(512, true, &data)?)
}

fn fit_crypto(b: &mut dyn Backend, env: &Env) -> Check {
    bsfs_fit(b, env, None)
}

fn fit_both(b: &mut dyn Backend, env: &Env) -> Check {
    bsfs_fit(b, env, Some(t10_wire()))
}

/// The finalize's room is `max_inline_data` + 4 bytes for the translations (rounded to 64) and
/// the BSFs (64 bytes each): a list that fills the room to its last octoword configures; one
/// more entry, 64 bytes more once rounded, is ENOMEM. A length past 0xffffffff is EINVAL;
/// 0xffffffff itself configures (on a device not single-block only).
fn bsfs_fit(b: &mut dyn Backend, env: &Env, sig: Option<SigBlockAttr>) -> Check {
    let (_, s) = crypto_pair(b, env)?;
    let (dek, _) = any_dek(b, env, s.ctx, s.pd)?;
    let room = s.qp.cap.max_inline_data as usize + 4;
    let bsfs = 64 * (1 + usize::from(sig.is_some()));
    if room < bsfs + 64 {
        return Err(Verdict::skip(format!("{room} bytes of inline room hold no translation beside {bsfs} of BSF")));
    }
    // Whole 64-byte steps of 16-byte entries; 16-byte entries keep a single-block mkey
    // within one 512-byte data unit while the room is under 32 entries.
    let fit = (room - bsfs) / 64 * 4;
    let (_buf, mr) = region(b, s.pd, 16 * (fit + 1), &[], A::LOCAL_WRITE)?;
    let flags = if sig.is_some() { F::INDIRECT | F::CRYPTO | F::BLOCK_SIGNATURE } else { F::INDIRECT | F::CRYPTO };
    let mkey = indirect_mkey(b, s.pd, flags, u16::try_from(fit + 1).unwrap_or(u16::MAX))?;
    let a = attr(dek, true, crypto::SIGNATURE_AFTER_CRYPTO_ON_TX, sig::BLOCK_512);
    let list = |n: usize| (0..n).map(|i| sge(&mr, 16 * i as u64, 16)).collect::<Vec<_>>();
    let with = |n: usize| {
        let mut v = vec![WrOp::SetMkeyAccessFlags(QP_ACCESS), WrOp::SetMkeyLayoutList(list(n))];
        v.extend(sig.map(WrOp::SetMkeySigBlock));
        v.push(WrOp::SetMkeyCrypto(a));
        v
    };
    let over = format!(
        "{} entries: {} translation bytes + {bsfs} of BSF > {room}",
        fit + 1,
        ((fit + 1) * 16).next_multiple_of(64)
    );
    expect_errno(&over, configure(b, &s, mkey, MkeyConfFlags::empty(), with(fit + 1)), ENOMEM)?;
    let exact = format!("{fit} entries: {} translation bytes + {bsfs} of BSF within {room}", fit * 16);
    expect_ok(&exact, configure(b, &s, mkey, MkeyConfFlags::empty(), with(fit)))?;
    ok_cqe(b, &s.cq, 0xc1, wc_opcode::DRIVER1)?;
    // With BSFs the mkey's length must stay within 32 bits (the single-block rule, where it
    // applies, refuses this length first, with the same EINVAL).
    let huge = vec![sge(&mr, 0, 0xffff_0000), sge(&mr, 0, 0xffff_0000)];
    let mut setters = vec![WrOp::SetMkeyLayoutList(huge)];
    setters.extend(sig.map(WrOp::SetMkeySigBlock));
    setters.push(WrOp::SetMkeyCrypto(a));
    expect_errno("an mkey of 2 × 0xffff0000 bytes", configure(b, &s, mkey, MkeyConfFlags::empty(), setters), EINVAL)?;
    // 0xffffffff bytes exactly is within 32 bits; a single-block-only device refuses any
    // length past its data unit first.
    if multi_block(env).is_err() {
        return Ok(());
    }
    let top = vec![sge(&mr, 0, 0xffff_0000), sge(&mr, 0, 0xffff)];
    let mut setters = vec![WrOp::SetMkeyLayoutList(top)];
    setters.extend(sig.map(WrOp::SetMkeySigBlock));
    setters.push(WrOp::SetMkeyCrypto(a));
    expect_ok("an mkey of 0xffffffff bytes", configure(b, &s, mkey, MkeyConfFlags::empty(), setters))?;
    ok_cqe(b, &s.cq, 0xc1, wc_opcode::DRIVER1).map(drop)
}

/// Each configure of a signature + crypto mkey whose error count changed writes the count's
/// low bit into the UMR's mkey context (`expected_sigerr_count`, mask bit SIG_ERR): 1 for the
/// first, 0 after one reported error; and one that keeps the attributes re-arms (item 46).
fn sig_err_count(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = crypto_pair(b, env)?;
    let (dek, _) = any_dek(b, env, s.ctx, s.pd)?;
    let ca = attr(dek, true, crypto::SIGNATURE_AFTER_CRYPTO_ON_TX, sig::BLOCK_512);
    let (_m, mk) = crypto_mkey(b, &s, &[0; 512], ca, Some(t10_wire()))?;
    let mut bad = with_t10(&pattern(512, 11), 0, 0, false);
    bad[512] ^= 0x5a;
    rx_into(b, &a, &s, &mk, &bad)?;
    let e = expect_ok("mkey_check", b.mkey_check(&mk))?;
    check("mkey_check after a bad guard", e != mlx5_dv::MkeyErr::NONE, "an error", e)?;
    expect_ok("configure again, keeping the attributes", configure(b, &s, mk, MkeyConfFlags::empty(), vec![]))?;
    ok_cqe(b, &s.cq, 0xc1, wc_opcode::DRIVER1)?;
    let umrs = umr_masks_and_sig_err_counts(b, &s.qp, 2)?;
    let sig_err = |(mask, count): (u64, bool)| (mask & mkey_mask::SIG_ERR != 0, count);
    check_eq("the first configure: SIG_ERR in the mask, count bit 1", sig_err(umrs[0]), (true, true))?;
    check_eq("after one error: SIG_ERR in the mask, count bit 0", sig_err(umrs[1]), (true, false))?;
    // The configure re-armed the signature (its SET_PSVs): the next bad guard is reported.
    rx_into(b, &a, &s, &mk, &bad)?;
    let e = expect_ok("mkey_check", b.mkey_check(&mk))?;
    check("mkey_check after re-arming and another bad guard", e != mlx5_dv::MkeyErr::NONE, "an error", e)
}
