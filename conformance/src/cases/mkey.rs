//! Mkey creation, destruction and `mkey_check` without traffic: §12.7–17 and §12.48.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, Field, create_mkey, mkc, opcode, status};
use mlx5_dv::{Backend, CommandRecord, FaultRule, Mkey, MkeyErr, MkeyInitAttr, MkeyInitFlags as F, crypto_cap};

use super::{ctl, opcodes, open_pd, with_opcode};
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case { name: "mkey.zero_create_flags", covers: &[7], needs: &[Need::Mlx5Device], run: zero_flags },
    Case { name: "mkey.unknown_create_flag", covers: &[8], needs: &[Need::Mlx5Device], run: unknown_flag },
    Case {
        name: "mkey.update_tag_follows_kernel",
        covers: &[8],
        needs: &[Need::Mlx5Device, Need::KnownUpdateTag, Need::Devx],
        run: update_tag,
    },
    Case {
        name: "mkey.block_signature_without_sig_caps",
        covers: &[9],
        needs: &[Need::Mlx5Device, Need::NoSigCaps],
        run: sig_without_caps,
    },
    Case {
        name: "mkey.every_flag_combination",
        covers: &[7, 8, 9, 11, 12, 15],
        needs: &[Need::Mlx5Device, Need::KnownUpdateTag, Need::Devx],
        run: every_combination,
    },
    Case {
        name: "mkey.signature_creates_two_psvs_first",
        covers: &[10, 13],
        needs: &[Need::Mlx5Device, Need::SigCaps, Need::Devx, Need::SimControl],
        run: two_psvs_first,
    },
    Case {
        name: "mkey.psv_failure_maps_status_and_unwinds",
        covers: &[10],
        needs: &[Need::Mlx5Device, Need::SigCaps, Need::Devx, Need::SimControl],
        run: psv_failure,
    },
    Case {
        name: "mkey.failed_cleanup_sets_errno",
        covers: &[89],
        needs: &[Need::Mlx5Device, Need::SigCaps, Need::Devx, Need::SimControl],
        run: failed_cleanup,
    },
    Case {
        name: "mkey.crypto_without_engine",
        covers: &[11],
        needs: &[Need::Mlx5Device, Need::NoCryptoEngine, Need::Devx],
        run: crypto_without_engine,
    },
    Case {
        name: "mkey.crypto_failure_destroys_psvs",
        covers: &[11],
        needs: &[Need::Mlx5Device, Need::SigCaps, Need::NoCryptoEngine, Need::Devx, Need::SimControl],
        run: crypto_failure_unwinds,
    },
    Case { name: "mkey.max_entries_rounding", covers: &[12], needs: &[Need::Mlx5Device, Need::Devx], run: rounding },
    Case {
        name: "mkey.max_entries_in_mailbox",
        covers: &[12, 13],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SimControl],
        run: rounding_in_mailbox,
    },
    Case {
        name: "mkey.mkc_plain",
        covers: &[13],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SimControl],
        run: mkc_plain,
    },
    Case {
        name: "mkey.mkc_signature",
        covers: &[13],
        needs: &[Need::Mlx5Device, Need::SigCaps, Need::Devx, Need::SimControl],
        run: mkc_signature,
    },
    Case {
        name: "mkey.mkc_crypto",
        covers: &[13],
        needs: &[Need::Mlx5Device, Need::CryptoEngine, Need::Devx, Need::SimControl],
        run: mkc_crypto,
    },
    Case {
        name: "mkey.mkc_signature_and_crypto",
        covers: &[13],
        needs: &[Need::Mlx5Device, Need::SigCaps, Need::CryptoEngine, Need::Devx, Need::SimControl],
        run: mkc_sig_crypto,
    },
    Case {
        name: "mkey.create_status_maps_to_errno",
        covers: &[14],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SimControl],
        run: create_status_errno,
    },
    Case { name: "mkey.keys_are_index_shifted", covers: &[15], needs: &[Need::Mlx5Device, Need::Devx], run: keys },
    Case {
        name: "mkey.keys_match_mailbox_index",
        covers: &[15],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SimControl],
        run: keys_mailbox,
    },
    Case {
        name: "mkey.destroy_order",
        covers: &[16],
        needs: &[Need::Mlx5Device, Need::SigCaps, Need::Devx, Need::SimControl],
        run: destroy_order,
    },
    Case {
        name: "mkey.destroy_psv_failure_keeps_mkey",
        covers: &[16],
        needs: &[Need::Mlx5Device, Need::SigCaps, Need::Devx, Need::SimControl],
        run: destroy_psv_failure,
    },
    Case {
        name: "mkey.destroy_mkey_failure_after_psvs",
        covers: &[16, 82],
        needs: &[Need::Mlx5Device, Need::SigCaps, Need::Devx, Need::SimControl],
        run: destroy_mkey_failure,
    },
    Case {
        name: "mkey.destroy_mkey_failure_leaves_no_signature_setter",
        covers: &[82],
        needs: &[Need::Mlx5Device, Need::SigCaps, Need::Devx, Need::SimControl],
        run: destroy_failure_then_sig_setter,
    },
    Case { name: "mkey.vfio_context_has_no_mkeys", covers: &[17], needs: &[Need::VfioDevice], run: vfio_no_mkeys },
    Case {
        name: "mkey_check.non_signature_mkey",
        covers: &[48],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: check_non_sig,
    },
    Case {
        name: "mkey_check.fresh_signature_mkey",
        covers: &[48],
        needs: &[Need::Mlx5Device, Need::SigCaps, Need::Devx],
        run: check_fresh_sig,
    },
];

fn attr(pd: mlx5_dv::PdHandle, flags: F, max_entries: u16) -> MkeyInitAttr {
    MkeyInitAttr { pd, create_flags: flags, max_entries }
}

fn zero_flags(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    expect_errno("create_flags 0", b.create_mkey(&attr(pd, F::empty(), 4)), EOPNOTSUPP)
}

fn unknown_flag(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    for bit in 5..32 {
        let flags = F::from_bits_retain(1 << bit);
        expect_errno(&format!("create_flags 1<<{bit}"), b.create_mkey(&attr(pd, flags, 4)), EOPNOTSUPP)?;
        let with_known = F::from_bits_retain(1 << bit) | F::INDIRECT;
        expect_errno(&format!("INDIRECT | 1<<{bit}"), b.create_mkey(&attr(pd, with_known, 4)), EOPNOTSUPP)?;
    }
    Ok(())
}

fn update_tag(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    let r = b.create_mkey(&attr(pd, F::INDIRECT | F::UPDATE_TAG, 4));
    match env.caps.kernel.mkey_update_tag {
        Some(true) => {
            let m = expect_ok("INDIRECT | UPDATE_TAG on a kernel with tag update", r)?;
            check_eq("tag byte at creation", m.lkey & 0xff, 0)?;
            expect_ok("destroy", b.destroy_mkey(&m))
        }
        Some(false) => expect_errno("INDIRECT | UPDATE_TAG on a kernel without tag update", r, EOPNOTSUPP),
        None => Err(Verdict::skip("unknown kernel tag-update support")),
    }
}

fn sig_without_caps(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    expect_errno("BLOCK_SIGNATURE", b.create_mkey(&attr(pd, F::BLOCK_SIGNATURE, 4)), EOPNOTSUPP)?;
    expect_errno(
        "INDIRECT | BLOCK_SIGNATURE",
        b.create_mkey(&attr(pd, F::INDIRECT | F::BLOCK_SIGNATURE, 4)),
        EOPNOTSUPP,
    )
}

/// The provider's verdict on a flag combination, from what the environment says.
fn expected_for(flags: F, env: &Env) -> Option<i32> {
    let engines = crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK | crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK;
    if flags.is_empty()
        || (flags.contains(F::UPDATE_TAG) && env.caps.kernel.mkey_update_tag != Some(true))
        || (flags.contains(F::BLOCK_SIGNATURE) && env.caps.device.sig.block_prot == 0)
        || (flags.contains(F::CRYPTO) && env.caps.device.crypto.crypto_engines & engines == 0)
    {
        Some(EOPNOTSUPP)
    } else {
        None
    }
}

fn every_combination(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    for bits in 0u32..32 {
        let flags = F::from_bits_retain(bits);
        let what = format!("create_flags {flags:?}");
        let r = b.create_mkey(&attr(pd, flags, 5));
        match expected_for(flags, env) {
            Some(e) => expect_errno(&what, r, e)?,
            None => {
                let m = expect_ok(&what, r)?;
                check_eq(&format!("{what}: max_entries written back"), m.max_entries, 8)?;
                check_eq(&format!("{what}: rkey == lkey"), m.rkey, m.lkey)?;
                check_eq(&format!("{what}: tag byte"), m.lkey & 0xff, 0)?;
                expect_ok(&format!("{what}: destroy"), b.destroy_mkey(&m))?;
            }
        }
    }
    Ok(())
}

/// The mkey context of a recorded CREATE_MKEY.
fn mkc_of(rec: &CommandRecord) -> Check<[u8; mkc::SIZE]> {
    let at = (create_mkey::MKC_BIT / 8) as usize;
    let bytes = rec
        .input
        .get(at..at + mkc::SIZE)
        .ok_or_else(|| Verdict::fail("CREATE_MKEY mailbox length", create_mkey::IN_SIZE, rec.input.len()))?;
    let mut out = [0u8; mkc::SIZE];
    out.copy_from_slice(bytes);
    Ok(out)
}

fn field(buf: &[u8], f: Field) -> Check<u64> {
    f.get(buf).map_err(|e| Verdict::fail(format!("reading {}", f.name), "a field inside the mailbox", e.to_string()))
}

/// Create an mkey with the command log on; return it and the commands.
fn create_logged(b: &mut dyn Backend, a: &MkeyInitAttr) -> Check<(Mkey, Vec<CommandRecord>)> {
    ctl(b)?.record_commands(true);
    let m = expect_ok("create_mkey", b.create_mkey(a));
    let cmds = ctl(b)?.take_commands();
    ctl(b)?.record_commands(false);
    Ok((m?, cmds))
}

fn two_psvs_first(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    let (m, cmds) = create_logged(b, &attr(pd, F::INDIRECT | F::BLOCK_SIGNATURE, 4))?;
    check_eq("command order", opcodes(&cmds), vec!["CREATE_PSV", "CREATE_PSV", "CREATE_MKEY"])?;
    let pdn = field(&mkc_of(&cmds[2])?, mkc::PD)?;
    for psv in &cmds[..2] {
        check_eq("CREATE_PSV num_psv", field(&psv.input, prm::create_psv::NUM_PSV)?, 1)?;
        check_eq("CREATE_PSV pd equals the mkey's pd", field(&psv.input, prm::create_psv::PD)?, pdn)?;
        check_eq("CREATE_PSV status", psv.status, status::OK)?;
    }
    let a = field(&cmds[0].output, prm::create_psv::OUT_PSV_INDEX[0])?;
    let c = field(&cmds[1].output, prm::create_psv::OUT_PSV_INDEX[0])?;
    check("two distinct PSVs", a != c, "different psv0_index", (a, c))?;
    expect_ok("destroy", b.destroy_mkey(&m))
}

/// CREATE_MKEY fails after both PSVs exist; the first cleanup DESTROY_PSV fails too, and its
/// errno is the one `mlx5dv_create_mkey` reports.
fn failed_cleanup(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    let a = attr(pd, F::INDIRECT | F::BLOCK_SIGNATURE, 4);
    let rules = [
        FaultRule::fail_next(opcode::CREATE_MKEY, status::LIM_ERR, 0x31),
        FaultRule::fail_next(opcode::DESTROY_PSV, status::RES_BUSY, 0x32),
    ];
    for rule in rules {
        expect_ok("install the fault rule", ctl(b)?.add_fault(rule))?;
    }
    ctl(b)?.record_commands(true);
    expect_errno("CREATE_MKEY fails (ENOMEM), then a cleanup fails (EBUSY)", b.create_mkey(&a), mlx5_dv::errno::EBUSY)?;
    let cmds = ctl(b)?.take_commands();
    check_eq("commands", opcodes(&cmds), vec!["CREATE_PSV", "CREATE_PSV", "CREATE_MKEY", "DESTROY_PSV"])?;
    ctl(b)?.clear_faults();
    expect_ok("install the fault rule", ctl(b)?.add_fault(rules[0]))?;
    expect_errno("CREATE_MKEY alone failing keeps its own errno", b.create_mkey(&a), mlx5_dv::errno::ENOMEM)
}

fn psv_failure(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    let a = attr(pd, F::INDIRECT | F::BLOCK_SIGNATURE, 4);
    // First PSV fails: nothing to undo.
    expect_ok(
        "install the fault rule",
        ctl(b)?.add_fault(FaultRule::fail_next(opcode::CREATE_PSV, status::LIM_ERR, 0x11)),
    )?;
    ctl(b)?.record_commands(true);
    expect_errno("first CREATE_PSV fails with LIM_ERR", b.create_mkey(&a), mlx5_dv::errno::ENOMEM)?;
    check_eq("commands", opcodes(&ctl(b)?.take_commands()), vec!["CREATE_PSV"])?;
    // Second PSV fails: the memory PSV is destroyed, no mkey is created.
    expect_ok(
        "install the fault rule",
        ctl(b)?.add_fault(FaultRule::fail_next(opcode::CREATE_PSV, status::BAD_PARAM_ERR, 0x22).after(1)),
    )?;
    expect_errno("second CREATE_PSV fails with BAD_PARAM", b.create_mkey(&a), EINVAL)?;
    let cmds = ctl(b)?.take_commands();
    check_eq("commands", opcodes(&cmds), vec!["CREATE_PSV", "CREATE_PSV", "DESTROY_PSV"])?;
    let created = field(&cmds[0].output, prm::create_psv::OUT_PSV_INDEX[0])?;
    check_eq("the memory PSV is the one destroyed", field(&cmds[2].input, prm::destroy_psv::PSVN)?, created)?;
    for (st, e) in [
        (status::RES_BUSY, mlx5_dv::errno::EBUSY),
        (status::NO_RES_ERR, mlx5_dv::errno::EAGAIN),
        (status::INT_ERR, mlx5_dv::errno::EIO),
    ] {
        expect_ok("install the fault rule", ctl(b)?.add_fault(FaultRule::fail_next(opcode::CREATE_PSV, st, 0)))?;
        expect_errno(&format!("CREATE_PSV status 0x{st:02x}"), b.create_mkey(&a), e)?;
    }
    Ok(())
}

fn crypto_without_engine(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    expect_errno("CRYPTO", b.create_mkey(&attr(pd, F::CRYPTO, 4)), EOPNOTSUPP)?;
    expect_errno("INDIRECT | CRYPTO", b.create_mkey(&attr(pd, F::INDIRECT | F::CRYPTO, 4)), EOPNOTSUPP)
}

fn crypto_failure_unwinds(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    ctl(b)?.record_commands(true);
    expect_errno("BLOCK_SIGNATURE | CRYPTO", b.create_mkey(&attr(pd, F::BLOCK_SIGNATURE | F::CRYPTO, 4)), EOPNOTSUPP)?;
    let cmds = ctl(b)?.take_commands();
    check_eq("commands", opcodes(&cmds), vec!["CREATE_PSV", "CREATE_PSV", "DESTROY_PSV", "DESTROY_PSV"])?;
    let made: Vec<u64> =
        cmds[..2].iter().map(|c| field(&c.output, prm::create_psv::OUT_PSV_INDEX[0])).collect::<Check<_>>()?;
    let gone: Vec<u64> = cmds[2..].iter().map(|c| field(&c.input, prm::destroy_psv::PSVN)).collect::<Check<_>>()?;
    check_eq("PSVs destroyed memory first, then wire", gone, made)
}

const ROUNDING: &[(u16, u16)] = &[
    (0, 0),
    (1, 4),
    (2, 4),
    (3, 4),
    (4, 4),
    (5, 8),
    (7, 8),
    (8, 8),
    (9, 12),
    (100, 100),
    (1021, 1024),
    (65531, 65532),
    (65532, 65532),
    (65533, 0),
    (65534, 0),
    (65535, 0),
];

fn rounding(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    for &(asked, got) in ROUNDING {
        let m = expect_ok(&format!("max_entries {asked}"), b.create_mkey(&attr(pd, F::INDIRECT, asked)))?;
        check_eq(&format!("max_entries {asked} written back"), m.max_entries, got)?;
        expect_ok("destroy", b.destroy_mkey(&m))?;
    }
    Ok(())
}

fn rounding_in_mailbox(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    for &(asked, got) in ROUNDING {
        let (m, cmds) = create_logged(b, &attr(pd, F::INDIRECT, asked))?;
        let mk = with_opcode(&cmds, opcode::CREATE_MKEY);
        let rec = mk.first().ok_or_else(|| Verdict::fail("CREATE_MKEY sent", 1, 0))?;
        check_eq(
            &format!("translations_octword_size for {asked}"),
            field(&mkc_of(rec)?, mkc::TRANSLATIONS_OCTWORD_SIZE)?,
            u64::from(got),
        )?;
        expect_ok("destroy", b.destroy_mkey(&m))?;
    }
    Ok(())
}

/// Check the mkc of a CREATE_MKEY for `flags`.
fn mkc_for(b: &mut dyn Backend, env: &Env, flags: F) -> Check {
    let (_, pd) = open_pd(b, env)?;
    let (m, cmds) = create_logged(b, &attr(pd, flags, 6))?;
    let mk = with_opcode(&cmds, opcode::CREATE_MKEY);
    let rec = mk.first().ok_or_else(|| Verdict::fail("CREATE_MKEY sent", 1, 0))?;
    check_eq("CREATE_MKEY input length", rec.input.len(), create_mkey::IN_SIZE)?;
    let c = mkc_of(rec)?;
    let sig = flags.contains(F::BLOCK_SIGNATURE);
    let crypto = flags.contains(F::CRYPTO);
    let expect: Vec<(Field, u64)> = vec![
        (mkc::ACCESS_MODE_1_0, mkc::ACCESS_MODE_KLMS),
        (mkc::ACCESS_MODE_4_2, 0),
        (mkc::FREE, 1),
        (mkc::UMR_EN, 1),
        (mkc::LR, 1),
        (mkc::LW, 0),
        (mkc::RR, 0),
        (mkc::RW, 0),
        (mkc::A, 0),
        (mkc::QPN, 0xff_ffff),
        (mkc::MKEY_7_0, 0),
        (mkc::TRANSLATIONS_OCTWORD_SIZE, 8),
        (mkc::CRYPTO_EN, u64::from(crypto)),
        (mkc::BSF_EN, u64::from(sig || crypto)),
        (mkc::BSF_OCTWORD_SIZE, 4 * (u64::from(sig) + u64::from(crypto))),
        (mkc::EN_RINVAL, u64::from(flags.contains(F::REMOTE_INVALIDATE))),
        (mkc::START_ADDR, 0),
        (mkc::LEN, 0),
        (mkc::LENGTH64, 0),
        (mkc::LOG_PAGE_SIZE, 0),
        (mkc::EXPECTED_SIGERR_COUNT, 0),
    ];
    for (f, v) in expect {
        check_eq(&format!("{flags:?}: mkc.{}", f.name), field(&c, f)?, v)?;
    }
    check("mkc.pd", field(&c, mkc::PD)? != 0, "the PD number", 0)?;
    check_eq("translations_octword_actual_size", field(&rec.input, create_mkey::TRANSLATIONS_OCTWORD_ACTUAL_SIZE)?, 0)?;
    expect_ok("destroy", b.destroy_mkey(&m))
}

fn mkc_plain(b: &mut dyn Backend, env: &Env) -> Check {
    mkc_for(b, env, F::INDIRECT)?;
    mkc_for(b, env, F::INDIRECT | F::REMOTE_INVALIDATE)?;
    if env.caps.kernel.mkey_update_tag == Some(true) {
        // UPDATE_TAG changes nothing in the command.
        mkc_for(b, env, F::INDIRECT | F::UPDATE_TAG)?;
    }
    Ok(())
}

fn mkc_signature(b: &mut dyn Backend, env: &Env) -> Check {
    mkc_for(b, env, F::BLOCK_SIGNATURE)?;
    mkc_for(b, env, F::INDIRECT | F::BLOCK_SIGNATURE | F::REMOTE_INVALIDATE)
}

fn mkc_crypto(b: &mut dyn Backend, env: &Env) -> Check {
    mkc_for(b, env, F::INDIRECT | F::CRYPTO)
}

fn mkc_sig_crypto(b: &mut dyn Backend, env: &Env) -> Check {
    mkc_for(b, env, F::INDIRECT | F::BLOCK_SIGNATURE | F::CRYPTO)
}

fn create_status_errno(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    use mlx5_dv::errno::*;
    let table = [
        (status::INT_ERR, EIO),
        (status::BAD_OP_ERR, EINVAL),
        (status::BAD_PARAM_ERR, EINVAL),
        (status::BAD_SYS_STATE_ERR, EIO),
        (status::BAD_RES_ERR, EINVAL),
        (status::RES_BUSY, EBUSY),
        (status::LIM_ERR, ENOMEM),
        (status::BAD_RES_STATE_ERR, EINVAL),
        (status::IX_ERR, EINVAL),
        (status::NO_RES_ERR, EAGAIN),
        (status::BAD_QP_STATE_ERR, EINVAL),
        (status::BAD_PKT_ERR, EINVAL),
        (status::BAD_SIZE_OUTS_CQES_ERR, EINVAL),
        (status::BAD_INP_LEN_ERR, EIO),
        (status::BAD_OUTP_LEN_ERR, EIO),
        (0x7e, EIO),
    ];
    for (st, e) in table {
        expect_ok("install the fault rule", ctl(b)?.add_fault(FaultRule::fail_next(opcode::CREATE_MKEY, st, 0xabcd)))?;
        let r = b.create_mkey(&attr(pd, F::INDIRECT, 4));
        check("never EREMOTEIO", !matches!(&r, Err(x) if x.errno() == EREMOTEIO), "a mapped errno", &r)?;
        expect_errno(&format!("CREATE_MKEY status 0x{st:02x}"), r, e)?;
    }
    if env.caps.device.sig.block_prot != 0 {
        // A failed CREATE_MKEY of a signature mkey takes its PSVs down with it.
        expect_ok(
            "install the fault rule",
            ctl(b)?.add_fault(FaultRule::fail_next(opcode::CREATE_MKEY, status::LIM_ERR, 1)),
        )?;
        ctl(b)?.record_commands(true);
        expect_errno("signature CREATE_MKEY with LIM_ERR", b.create_mkey(&attr(pd, F::BLOCK_SIGNATURE, 4)), ENOMEM)?;
        let cmds = ctl(b)?.take_commands();
        check_eq(
            "commands",
            opcodes(&cmds),
            vec!["CREATE_PSV", "CREATE_PSV", "CREATE_MKEY", "DESTROY_PSV", "DESTROY_PSV"],
        )?;
    }
    Ok(())
}

fn keys(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    let a = expect_ok("first mkey", b.create_mkey(&attr(pd, F::INDIRECT, 4)))?;
    let c = expect_ok("second mkey", b.create_mkey(&attr(pd, F::INDIRECT, 4)))?;
    for m in [&a, &c] {
        check_eq("rkey == lkey", m.rkey, m.lkey)?;
        check_eq("tag byte", m.lkey & 0xff, 0)?;
        check("index non-zero", m.lkey >> 8 != 0, "mkey_index > 0", m.lkey)?;
    }
    check("two live mkeys have different keys", a.lkey != c.lkey, "different lkeys", (a.lkey, c.lkey))?;
    expect_ok("destroy", b.destroy_mkey(&a))?;
    expect_ok("destroy", b.destroy_mkey(&c))
}

fn keys_mailbox(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    let (m, cmds) = create_logged(b, &attr(pd, F::INDIRECT, 4))?;
    let mk = with_opcode(&cmds, opcode::CREATE_MKEY);
    let rec = mk.first().ok_or_else(|| Verdict::fail("CREATE_MKEY sent", 1, 0))?;
    let index = field(&rec.output, create_mkey::OUT_MKEY_INDEX)? as u32;
    check_eq("lkey = mkey_index << 8", m.lkey, index << 8)?;
    check_eq("rkey = mkey_index << 8", m.rkey, index << 8)?;
    expect_ok("destroy", b.destroy_mkey(&m))
}

/// A signature mkey and the PSV numbers (memory, wire) it was given.
fn sig_mkey_with_psvs(b: &mut dyn Backend, env: &Env) -> Check<(Mkey, u64, u64)> {
    let (_, pd) = open_pd(b, env)?;
    let (m, cmds) = create_logged(b, &attr(pd, F::INDIRECT | F::BLOCK_SIGNATURE, 4))?;
    let psvs = with_opcode(&cmds, opcode::CREATE_PSV);
    let [mem, wire] = psvs.as_slice() else {
        return Err(Verdict::fail("CREATE_PSV count", 2, psvs.len()));
    };
    let idx = |r: &CommandRecord| field(&r.output, prm::create_psv::OUT_PSV_INDEX[0]);
    Ok((m, idx(mem)?, idx(wire)?))
}

fn destroy_order(b: &mut dyn Backend, env: &Env) -> Check {
    let (m, mem, wire) = sig_mkey_with_psvs(b, env)?;
    ctl(b)?.record_commands(true);
    expect_ok("destroy", b.destroy_mkey(&m))?;
    let cmds = ctl(b)?.take_commands();
    check_eq("commands", opcodes(&cmds), vec!["DESTROY_PSV", "DESTROY_PSV", "DESTROY_MKEY"])?;
    check_eq("memory PSV first", field(&cmds[0].input, prm::destroy_psv::PSVN)?, mem)?;
    check_eq("wire PSV second", field(&cmds[1].input, prm::destroy_psv::PSVN)?, wire)?;
    check_eq("the mkey last", field(&cmds[2].input, prm::destroy_mkey::MKEY_INDEX)?, u64::from(m.lkey >> 8))
}

fn destroy_psv_failure(b: &mut dyn Backend, env: &Env) -> Check {
    let (m, _, wire) = sig_mkey_with_psvs(b, env)?;
    // The wire PSV fails: the memory PSV is gone, the mkey lives on.
    expect_ok(
        "install the fault rule",
        ctl(b)?.add_fault(FaultRule::fail_next(opcode::DESTROY_PSV, status::RES_BUSY, 7).after(1)),
    )?;
    expect_errno("destroy with a busy wire PSV", b.destroy_mkey(&m), mlx5_dv::errno::EBUSY)?;
    check_eq("mkey_check on the surviving mkey", expect_ok("mkey_check", b.mkey_check(&m))?, MkeyErr::NONE)?;
    ctl(b)?.record_commands(true);
    expect_ok("destroy again", b.destroy_mkey(&m))?;
    let cmds = ctl(b)?.take_commands();
    check_eq("the retry destroys only what is left", opcodes(&cmds), vec!["DESTROY_PSV", "DESTROY_MKEY"])?;
    check_eq("the retry destroys the wire PSV", field(&cmds[0].input, prm::destroy_psv::PSVN)?, wire)
}

fn destroy_mkey_failure(b: &mut dyn Backend, env: &Env) -> Check {
    let (m, _, _) = sig_mkey_with_psvs(b, env)?;
    expect_ok(
        "install the fault rule",
        ctl(b)?.add_fault(FaultRule::fail_next(opcode::DESTROY_MKEY, status::BAD_RES_STATE_ERR, 3)),
    )?;
    expect_errno("destroy with DESTROY_MKEY failing", b.destroy_mkey(&m), EINVAL)?;
    expect_errno("mkey_check on what survives: a plain mkey", b.mkey_check(&m), EINVAL)?;
    ctl(b)?.record_commands(true);
    expect_ok("destroy again", b.destroy_mkey(&m))?;
    check_eq("the PSVs are already gone", opcodes(&ctl(b)?.take_commands()), vec!["DESTROY_MKEY"])
}

/// What survives a failed DESTROY_MKEY after its PSVs are gone is a plain mkey: the
/// signature setter on it is EINVAL, and nothing is posted.
fn destroy_failure_then_sig_setter(b: &mut dyn Backend, env: &Env) -> Check {
    use super::sig::{configure_chain, dif, sig_mkey, sig_pair, wire_only};
    use mlx5_dv::{SigBlockDomain, T10difFlags, sig};
    let (a, _s) = sig_pair(b, env)?;
    let (_buf, mr, m) = sig_mkey(b, &a, 512, &[])?;
    let rule = FaultRule::fail_next(opcode::DESTROY_MKEY, status::BAD_RES_STATE_ERR, 3);
    expect_ok("install the fault rule", ctl(b)?.add_fault(rule))?;
    expect_errno("destroy with DESTROY_MKEY failing", b.destroy_mkey(&m), EINVAL)?;
    let t10 = SigBlockDomain::t10dif(sig::BLOCK_512, dif(1, 0, T10difFlags::empty()));
    let chain = configure_chain(&m, &mr, Some(wire_only(t10)), false);
    expect_errno("the signature setter on what survives", b.post_send(&a.qp, &chain), EINVAL)?;
    super::fixture::no_cqe(b, &a.cq)
}

fn vfio_no_mkeys(b: &mut dyn Backend, env: &Env) -> Check {
    let dev = env.vfio_device.as_deref().ok_or_else(|| Verdict::skip("no VFIO device"))?;
    let ctx = expect_ok("ibv_open_device(VFIO)", b.open_ibv_device(dev))?;
    let pd = expect_ok("ibv_alloc_pd on a VFIO context", b.alloc_pd(ctx))?;
    for flags in [F::INDIRECT, F::BLOCK_SIGNATURE, F::CRYPTO, F::empty()] {
        expect_errno(
            &format!("create_mkey {flags:?} on a VFIO context"),
            b.create_mkey(&attr(pd, flags, 4)),
            EOPNOTSUPP,
        )?;
    }
    expect_errno(
        "query_device on a VFIO context",
        b.query_device(ctx, mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD),
        EOPNOTSUPP,
    )?;
    expect_ok("ibv_dealloc_pd", b.dealloc_pd(pd))?;
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn check_non_sig(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    let m = expect_ok("INDIRECT mkey", b.create_mkey(&attr(pd, F::INDIRECT, 4)))?;
    expect_errno("mkey_check on an INDIRECT mkey", b.mkey_check(&m), EINVAL)?;
    expect_ok("destroy", b.destroy_mkey(&m))
}

fn check_fresh_sig(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd) = open_pd(b, env)?;
    let m = expect_ok("BLOCK_SIGNATURE mkey", b.create_mkey(&attr(pd, F::INDIRECT | F::BLOCK_SIGNATURE, 4)))?;
    for round in 0..2 {
        let e = expect_ok("mkey_check", b.mkey_check(&m))?;
        check_eq(&format!("mkey_check #{round} on a fresh signature mkey"), e, MkeyErr::NONE)?;
        check_eq("NO_ERR value", e.err_type as u32, 0)?;
    }
    expect_ok("destroy", b.destroy_mkey(&m))
}
