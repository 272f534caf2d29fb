//! Signature offload: configuration (items 33–40, 44) and transforms (items 41–43); the errors
//! (items 45–50) are in `sig_err.rs`. Expected PI is computed here with the `crc` crate,
//! independently of any backend. Block numbering starts at mkey offset 0.

use crc::{Algorithm, CRC_16_T10_DIF, CRC_32_ISCSI, CRC_32_ISO_HDLC, CRC_64_NVME, Crc};
use mlx5_dv::errno::{EINVAL, ENOMEM};
use mlx5_dv::{
    AccessFlags as A, Backend, Buf, DvQpCreateFlags, Mkey, MkeyConfFlags, MkeyErr, MkeyErrType, MkeyInitFlags as F, Mr,
    QpCap, SendFlags, Sge, SigBlockAttr, SigBlockAttrFlags, SigBlockDomain as D, SigT10dif, T10difFlags, WrOp, dv_qp,
    sig, wc_opcode,
};

use super::ctl;
use super::fixture::*;
use crate::case::{Case, Check, Env, Need, check, check_eq, expect_errno, expect_ok};

pub(super) const N: &[Need] = &[Need::Mlx5Device, Need::Devx, Need::SigCaps];

pub(super) const CASES: &[Case] = &[
    Case { name: "sig.setter_misuse", covers: &[33], needs: N, run: setter_misuse },
    Case { name: "sig.domain_validation", covers: &[34], needs: N, run: domain_validation },
    Case { name: "sig.reset_sig_attr_disables_the_bsf", covers: &[35], needs: N, run: reset_attr },
    Case { name: "sig.no_attributes_behaves_as_plain_mkey", covers: &[36], needs: N, run: no_attributes },
    Case { name: "sig.attributes_carry_over", covers: &[37], needs: N, run: carry_over },
    Case { name: "sig.bsf_must_fit_and_length_under_4gib", covers: &[38], needs: N, run: bsf_limits },
    Case { name: "sig.copy_mask_needs_same_block_structure", covers: &[39], needs: N, run: copy_mask_structure },
    Case { name: "sig.automatic_and_user_copy_mask", covers: &[40], needs: N, run: copy_masks },
    Case { name: "sig.automatic_copy_mask_copies_a_crc32_pi_whole", covers: &[40], needs: N, run: crc32_copy },
    Case {
        name: "sig.automatic_copy_mask_copies_a_crc64_pi_whole",
        covers: &[40],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SigCrc64],
        run: crc64_copy,
    },
    Case { name: "sig.check_mask_selects_input_bytes", covers: &[41], needs: N, run: check_mask },
    Case { name: "sig.t10dif_crc_insert_and_strip", covers: &[42], needs: N, run: t10dif_crc },
    Case { name: "sig.t10dif_csum_insert_and_strip", covers: &[42], needs: N, run: t10dif_csum },
    Case { name: "sig.crc32_insert_and_strip", covers: &[42], needs: N, run: crc32 },
    Case {
        name: "sig.crc32c_insert_and_strip",
        covers: &[42],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SigCrc32c],
        run: crc32c,
    },
    Case {
        name: "sig.crc64_xp10_insert_and_strip",
        covers: &[42],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SigCrc64],
        run: crc64,
    },
    Case { name: "sig.memory_pi_validated_and_stripped_on_send", covers: &[42, 45], needs: N, run: memory_pi_send },
    Case { name: "sig.convert_t10dif_memory_to_crc32_wire", covers: &[42], needs: N, run: convert },
    Case { name: "sig.block_sizes_520_4096_4160", covers: &[42], needs: N, run: block_sizes },
    Case {
        name: "sig.block_size_4048",
        covers: &[42],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SigBlock4048],
        run: block_4048,
    },
    Case { name: "sig.ref_remap_and_escapes", covers: &[43], needs: N, run: remap_and_escapes },
    Case {
        name: "sig.set_psv_transient_signatures",
        covers: &[44, 31],
        needs: &[Need::Mlx5Device, Need::Devx, Need::SigCaps, Need::SimControl],
        run: transient,
    },
];

pub(super) const BLOCK: usize = 512;
pub(super) const BLOCKS: usize = 4;
pub(super) const DATA: usize = BLOCK * BLOCKS;
pub(super) const T10_WIRE: usize = (BLOCK + 8) * BLOCKS;

/// Inline room for a BSF: a QP with 512 inline bytes, as the rdma-core tests use.
pub(super) const SIG_CAP: QpCap =
    QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 512 };

pub(super) fn dif(app: u16, ref_tag: u32, flags: T10difFlags) -> SigT10dif {
    SigT10dif { bg_type: sig::BG_CRC, bg: 0, app_tag: app, ref_tag, flags }
}

pub(super) fn wire_only(d: D) -> SigBlockAttr {
    SigBlockAttr {
        mem: None,
        wire: Some(d),
        flags: SigBlockAttrFlags::empty(),
        check_mask: 0xff,
        copy_mask: 0,
        comp_mask: 0,
    }
}

pub(super) fn mem_only(d: D) -> SigBlockAttr {
    SigBlockAttr { mem: Some(d), wire: None, ..wire_only(d) }
}

/// Client and server RC QPs with room for a BSF.
pub(super) fn sig_pair(b: &mut dyn Backend, env: &Env) -> Check<(Side, Side)> {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let cq2 = expect_ok("cq", b.create_cq(ctx, 64))?;
    let qa = expect_ok("client QP", b.create_qp(&qp_attr(pd, &cq, dv_qp::CREATE_DISABLE_SCATTER_TO_CQE, SIG_CAP)))?;
    let qb = expect_ok("server QP", b.create_qp(&qp_attr(pd, &cq2, dv_qp::CREATE_DISABLE_SCATTER_TO_CQE, SIG_CAP)))?;
    connect(b, &qa, ctx, &qb)?;
    connect(b, &qb, ctx, &qa)?;
    Ok((Side { ctx, pd, cq, qp: qa }, Side { ctx, pd, cq: cq2, qp: qb }))
}

/// A signature mkey over a `len`-byte region (filled with `fill`) of `side`.
pub(super) fn sig_mkey(b: &mut dyn Backend, side: &Side, len: usize, fill: &[u8]) -> Check<(Buf, Mr, Mkey)> {
    let (buf, mr) = region(b, side.pd, len, fill, A::LOCAL_WRITE)?;
    let mkey = indirect_mkey(b, side.pd, F::INDIRECT | F::BLOCK_SIGNATURE, 4)?;
    Ok((buf, mr, mkey))
}

/// One configure WR: access, a one-entry layout over the region, and (optionally) the
/// signature; `reset` adds RESET_SIG_ATTR. Waits for its one completion.
pub(super) fn configure(
    b: &mut dyn Backend,
    side: &Side,
    mkey: &Mkey,
    mr: &Mr,
    attr: Option<SigBlockAttr>,
    reset: bool,
) -> Check {
    let chain = configure_chain(mkey, mr, attr, reset);
    expect_ok("configure", b.post_send(&side.qp, &chain))?;
    ok_cqe(b, &side.cq, 0x51, wc_opcode::DRIVER1).map(drop)
}

pub(super) fn configure_chain(mkey: &Mkey, mr: &Mr, attr: Option<SigBlockAttr>, reset: bool) -> Vec<WrOp> {
    let conf_flags = if reset { mlx5_dv::MLX5DV_MKEY_CONF_FLAG_RESET_SIG_ATTR } else { MkeyConfFlags::empty() };
    let mut chain = vec![
        WrOp::MkeyConfigure {
            wr_id: 0x51,
            flags: SendFlags::SIGNALED | SendFlags::INLINE,
            mkey: *mkey,
            num_setters: 2 + u8::from(attr.is_some()),
            conf_flags,
            comp_mask: 0,
        },
        WrOp::SetMkeyAccessFlags(A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ),
        WrOp::SetMkeyLayoutList(vec![Sge { addr: mr.addr, length: mr.length as u32, lkey: mr.lkey }]),
    ];
    if let Some(a) = attr {
        chain.push(WrOp::SetMkeySigBlock(a));
    }
    chain
}

/// The client writes `len` bytes from its signature mkey (a local SGE counts data bytes) to a
/// fresh server buffer of `room` bytes; returns what arrived.
pub(super) fn tx_through(
    b: &mut dyn Backend,
    a: &Side,
    s: &Side,
    mkey: &Mkey,
    len: usize,
    room: usize,
) -> Check<Vec<u8>> {
    let (dst, dmr) = region(b, s.pd, room, &[], A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let w = write(0x61, dmr.rkey, dmr.addr, vec![Sge { addr: 0, length: len as u32, lkey: mkey.lkey }]);
    expect_ok("RDMA WRITE from the signature mkey", b.post_send(&a.qp, &[w]))?;
    ok_cqe(b, &a.cq, 0x61, wc_opcode::RDMA_WRITE)?;
    contents(b, &dst)
}

/// The client writes `wire` bytes into the server's signature mkey (remote addressing is in
/// wire bytes); the data WR completes successfully whatever the PI.
pub(super) fn rx_into(b: &mut dyn Backend, a: &Side, s: &Side, mkey: &Mkey, wire: &[u8]) -> Check {
    let (_src, smr) = region(b, a.pd, wire.len(), wire, A::LOCAL_WRITE)?;
    let w = write(0x62, mkey.rkey, 0, vec![sge(&smr, 0, wire.len() as u32)]);
    expect_ok("RDMA WRITE into the signature mkey", b.post_send(&a.qp, &[w]))?;
    ok_cqe(b, &a.cq, 0x62, wc_opcode::RDMA_WRITE)?;
    // The server's CQ carries the SIG_ERR CQE, if any; the provider consumes it in poll.
    no_cqe(b, &s.cq)
}

/// T10-DIF CRC-16 with guard seed 0xffff as the initial value.
static T10_SEEDED: Algorithm<u16> = Algorithm { init: 0xffff, ..CRC_16_T10_DIF };
/// CRC-32C with seed 0 as the initial value (the final XOR stays).
static CRC32C_SEED0: Algorithm<u32> = Algorithm { init: 0, ..CRC_32_ISCSI };

pub(super) fn t10_guard(data: &[u8], seed: u16) -> u16 {
    let alg = if seed == 0 { &CRC_16_T10_DIF } else { &T10_SEEDED };
    Crc::<u16>::new(alg).checksum(data)
}

/// T10-DIF PI (guard, app, ref; big-endian) after each block.
pub(super) fn with_t10(data: &[u8], app: u16, ref0: u32, remap: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, blk) in data.chunks(BLOCK).enumerate() {
        out.extend_from_slice(blk);
        out.extend_from_slice(&t10_guard(blk, 0).to_be_bytes());
        out.extend_from_slice(&app.to_be_bytes());
        out.extend_from_slice(&(if remap { ref0.wrapping_add(i as u32) } else { ref0 }).to_be_bytes());
    }
    out
}

/// True if `pi` holds `crc` in either byte order (the order is not published; the
/// simulator's profile fixes one).
pub(super) fn holds(pi: &[u8], crc: u64, width: usize) -> bool {
    let be = crc.to_be_bytes();
    let le = crc.to_le_bytes();
    pi == &be[8 - width..] || pi == &le[..width]
}

fn setter_misuse(b: &mut dyn Backend, env: &Env) -> Check {
    let (_a, s) = sig_pair(b, env)?;
    let (_buf, mr, mkey) = sig_mkey(b, &s, DATA, &[])?;
    let plain = indirect_mkey(b, s.pd, F::INDIRECT, 4)?;
    let good = wire_only(D::t10dif(sig::BLOCK_512, dif(0, 0, T10difFlags::empty())));
    let on_plain = configure_chain(&plain, &mr, Some(good), false);
    expect_errno("signature setter on a non-signature mkey", b.post_send(&s.qp, &on_plain), EINVAL)?;
    let mut twice = configure_chain(&mkey, &mr, Some(good), false);
    if let WrOp::MkeyConfigure { num_setters, .. } = &mut twice[0] {
        *num_setters += 1;
    }
    twice.push(WrOp::SetMkeySigBlock(good));
    expect_errno("the signature setter twice", b.post_send(&s.qp, &twice), EINVAL)?;
    let bad = [
        ("both domains NULL", SigBlockAttr { wire: None, ..good }),
        ("flags 1<<1", SigBlockAttr { flags: SigBlockAttrFlags::from_bits_retain(1 << 1), ..good }),
        ("comp_mask 1", SigBlockAttr { comp_mask: 1, ..good }),
    ];
    for (what, attr) in bad {
        expect_errno(what, b.post_send(&s.qp, &configure_chain(&mkey, &mr, Some(attr), false)), EINVAL)?;
    }
    no_cqe(b, &s.cq)
}

fn domain_validation(b: &mut dyn Backend, env: &Env) -> Check {
    let (_a, s) = sig_pair(b, env)?;
    let (_buf, mr, mkey) = sig_mkey(b, &s, DATA, &[])?;
    let t10 = D::t10dif(sig::BLOCK_512, dif(0, 0, T10difFlags::empty()));
    let bad: Vec<(&str, D)> = vec![
        ("block_size 5", D { block_size: 5, ..t10 }),
        ("domain comp_mask 1", D { comp_mask: 1, ..t10 }),
        ("sig_type 2", D { sig_type: 2, ..t10 }),
        ("T10-DIF bg 1", D { dif: SigT10dif { bg: 1, ..t10.dif }, ..t10 }),
        ("T10-DIF bg_type 2", D { dif: SigT10dif { bg_type: 2, ..t10.dif }, ..t10 }),
        ("T10-DIF flags 0x8", D { dif: SigT10dif { flags: T10difFlags::from_bits_retain(8), ..t10.dif }, ..t10 }),
        ("CRC32 seed 5", D::crc(sig::BLOCK_512, sig::CRC32, 5)),
        ("CRC32C seed 2^32", D::crc(sig::BLOCK_512, sig::CRC32C, 1 << 32)),
        ("CRC64 seed 0xffffffff", D::crc(sig::BLOCK_512, sig::CRC64_XP10, 0xffff_ffff)),
        ("CRC type 3", D::crc(sig::BLOCK_512, 3, 0)),
    ];
    for (what, d) in bad {
        for attr in [wire_only(d), SigBlockAttr { mem: Some(d), wire: None, ..wire_only(d) }] {
            expect_errno(what, b.post_send(&s.qp, &configure_chain(&mkey, &mr, Some(attr), false)), EINVAL)?;
        }
    }
    // Accepted without looking at the device's caps: 4160-byte blocks and CRC64 with seed 0.
    let odd = wire_only(D::crc(sig::BLOCK_4160, sig::CRC64_XP10, 0));
    expect_ok(
        "CRC64 with 4160-byte blocks (not checked against caps)",
        b.post_send(&s.qp, &configure_chain(&mkey, &mr, Some(odd), false)),
    )?;
    ok_cqe(b, &s.cq, 0x51, wc_opcode::DRIVER1).map(drop)
}

fn reset_attr(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = sig_pair(b, env)?;
    let data = pattern(DATA, 3);
    let (_buf, mr, mkey) = sig_mkey(b, &a, DATA, &data)?;
    configure(b, &a, &mkey, &mr, Some(wire_only(D::t10dif(sig::BLOCK_512, dif(7, 0, T10difFlags::empty())))), false)?;
    check_eq(
        "with attributes: PI inserted",
        tx_through(b, &a, &s, &mkey, DATA, T10_WIRE)?,
        with_t10(&data, 7, 0, false),
    )?;
    configure(b, &a, &mkey, &mr, None, true)?;
    let mut plain = data.clone();
    plain.resize(T10_WIRE, 0);
    check_eq("after RESET_SIG_ATTR: the bytes pass unchanged", tx_through(b, &a, &s, &mkey, DATA, T10_WIRE)?, plain)?;
    // RESET followed by a signature setter in the same WR sets the new attributes.
    configure(b, &a, &mkey, &mr, Some(wire_only(D::t10dif(sig::BLOCK_512, dif(9, 0, T10difFlags::empty())))), true)?;
    check_eq("RESET then new attributes", tx_through(b, &a, &s, &mkey, DATA, T10_WIRE)?, with_t10(&data, 9, 0, false))
}

fn no_attributes(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = sig_pair(b, env)?;
    let data = pattern(DATA, 4);
    let (_buf, mr, mkey) = sig_mkey(b, &a, DATA, &data)?;
    configure(b, &a, &mkey, &mr, None, false)?;
    check_eq("a signature mkey never given attributes", tx_through(b, &a, &s, &mkey, DATA, DATA)?, data)?;
    check_eq("mkey_check", expect_ok("mkey_check", b.mkey_check(&mkey))?, MkeyErr::NONE)
}

fn carry_over(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = sig_pair(b, env)?;
    let data = pattern(DATA, 5);
    let (_buf, mr, mkey) = sig_mkey(b, &a, DATA, &data)?;
    configure(b, &a, &mkey, &mr, Some(wire_only(D::t10dif(sig::BLOCK_512, dif(3, 40, T10difFlags::empty())))), false)?;
    configure(b, &a, &mkey, &mr, None, false)?;
    check_eq(
        "attributes kept by a configure without the setter",
        tx_through(b, &a, &s, &mkey, DATA, T10_WIRE)?,
        with_t10(&data, 3, 40, false),
    )
}

fn bsf_limits(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    let small = expect_ok("QP with max_inline_data 60", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let cq2 = expect_ok("cq", b.create_cq(ctx, 16))?;
    let peer = expect_ok("peer", b.create_qp(&qp_attr(pd, &cq2, DvQpCreateFlags::empty(), CAP)))?;
    connect(b, &small, ctx, &peer)?;
    connect(b, &peer, ctx, &small)?;
    let side = Side { ctx, pd, cq, qp: small };
    let (_buf, mr, mkey) = sig_mkey(b, &side, DATA, &[])?;
    let t10 = wire_only(D::t10dif(sig::BLOCK_512, dif(0, 0, T10difFlags::empty())));
    let attr = Some(t10);
    expect_errno(
        "64 translation bytes + 64 BSF bytes > 60 + 4 inline",
        b.post_send(&side.qp, &configure_chain(&mkey, &mr, attr, false)),
        ENOMEM,
    )?;
    let (a, s) = sig_pair(b, env)?;
    let (_b2, mr2, mkey2) = sig_mkey(b, &a, DATA, &[])?;
    let huge = vec![
        WrOp::MkeyConfigure {
            wr_id: 1,
            flags: SendFlags::SIGNALED | SendFlags::INLINE,
            mkey: mkey2,
            num_setters: 2,
            conf_flags: MkeyConfFlags::empty(),
            comp_mask: 0,
        },
        WrOp::SetMkeyLayoutList(vec![
            Sge { addr: mr2.addr, length: 0xffff_0000, lkey: mr2.lkey },
            Sge { addr: mr2.addr, length: 0xffff_0000, lkey: mr2.lkey },
        ]),
        WrOp::SetMkeySigBlock(t10),
    ];
    expect_errno("an mkey over 4 GiB with a BSF", b.post_send(&a.qp, &huge), EINVAL)?;
    no_cqe(b, &s.cq)
}

fn copy_mask_structure(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, _s) = sig_pair(b, env)?;
    let (_buf, mr, mkey) = sig_mkey(b, &a, DATA + 8 * BLOCKS, &[])?;
    let t10 = D::t10dif(sig::BLOCK_512, dif(0, 0, T10difFlags::empty()));
    let unlike = SigBlockAttr {
        mem: Some(t10),
        wire: Some(D::crc(sig::BLOCK_512, sig::CRC32, 0)),
        flags: sig::ATTR_FLAG_COPY_MASK,
        check_mask: 0,
        copy_mask: 0xf0,
        comp_mask: 0,
    };
    expect_errno(
        "COPY_MASK with a T10-DIF memory and a CRC32 wire",
        b.post_send(&a.qp, &configure_chain(&mkey, &mr, Some(unlike), false)),
        EINVAL,
    )?;
    let sizes = SigBlockAttr { wire: Some(D::t10dif(sig::BLOCK_4096, dif(0, 0, T10difFlags::empty()))), ..unlike };
    expect_errno(
        "COPY_MASK with 512- and 4096-byte blocks",
        b.post_send(&a.qp, &configure_chain(&mkey, &mr, Some(sizes), false)),
        EINVAL,
    )?;
    let like = SigBlockAttr { wire: Some(t10), ..unlike };
    expect_ok("COPY_MASK with like domains", b.post_send(&a.qp, &configure_chain(&mkey, &mr, Some(like), false)))?;
    ok_cqe(b, &a.cq, 0x51, wc_opcode::DRIVER1).map(drop)
}

fn copy_masks(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = sig_pair(b, env)?;
    let data = pattern(DATA, 6);
    // Memory PI with app 0x1111 and a wrong guard in block 0.
    let mut mem = with_t10(&data, 0x1111, 0, false);
    mem[BLOCK] ^= 0xff;
    let (_buf, mr, mkey) = sig_mkey(b, &a, T10_WIRE, &mem)?;
    let m = D::t10dif(sig::BLOCK_512, dif(0x1111, 0, T10difFlags::empty()));
    let w = D::t10dif(sig::BLOCK_512, dif(0x2222, 0, T10difFlags::empty()));
    // Automatic: guard and ref configured alike are copied, the app tag differs and is made.
    let auto = SigBlockAttr {
        mem: Some(m),
        wire: Some(w),
        flags: SigBlockAttrFlags::empty(),
        check_mask: 0,
        copy_mask: 0,
        comp_mask: 0,
    };
    configure(b, &a, &mkey, &mr, Some(auto), false)?;
    let mut want = with_t10(&data, 0x2222, 0, false);
    want[BLOCK] ^= 0xff;
    check_eq(
        "automatic copy mask: copied guard (wrong in block 0), new app tag",
        tx_through(b, &a, &s, &mkey, DATA, T10_WIRE)?,
        want,
    )?;
    // The user's mask copies only the app tag: guards are recomputed.
    let user = SigBlockAttr { flags: sig::ATTR_FLAG_COPY_MASK, copy_mask: sig::MASK_T10DIF_APPTAG, ..auto };
    configure(b, &a, &mkey, &mr, Some(user), false)?;
    check_eq("user copy mask 0x30", tx_through(b, &a, &s, &mkey, DATA, T10_WIRE)?, with_t10(&data, 0x1111, 0, false))
}

fn crc32_copy(b: &mut dyn Backend, env: &Env) -> Check {
    crc_copy(b, env, D::crc(sig::BLOCK_512, sig::CRC32, 0xffff_ffff), 4)
}

fn crc64_copy(b: &mut dyn Backend, env: &Env) -> Check {
    crc_copy(b, env, D::crc(sig::BLOCK_512, sig::CRC64_XP10, u64::MAX), 8)
}

/// Memory and wire in CRC domain `d` (PI `width` bytes), no copy mask given: the automatic mask
/// copies every PI byte, so PI bytes that are no CRC of their block (none is checked) reach
/// the wire as they are.
fn crc_copy(b: &mut dyn Backend, env: &Env, d: D, width: usize) -> Check {
    let (a, s) = sig_pair(b, env)?;
    let data = pattern(DATA, 9);
    let mut mem = Vec::with_capacity(DATA + width * BLOCKS);
    for (i, blk) in data.chunks(BLOCK).enumerate() {
        mem.extend_from_slice(blk);
        mem.extend((0..width).map(|k| 0xa0 ^ (i * width + k) as u8));
    }
    let (_buf, mr, mkey) = sig_mkey(b, &a, mem.len(), &mem)?;
    let attr = SigBlockAttr {
        mem: Some(d),
        wire: Some(d),
        flags: SigBlockAttrFlags::empty(),
        check_mask: 0,
        copy_mask: 0,
        comp_mask: 0,
    };
    configure(b, &a, &mkey, &mr, Some(attr), false)?;
    check_eq(
        &format!("the wire: each block with its {width} PI bytes copied from memory"),
        tx_through(b, &a, &s, &mkey, DATA, mem.len())?,
        mem,
    )?;
    check_eq("sender mkey_check", expect_ok("mkey_check", b.mkey_check(&mkey))?, MkeyErr::NONE)
}

fn check_mask(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = sig_pair(b, env)?;
    let (_buf, mr, mkey) = sig_mkey(b, &s, DATA, &[])?;
    let mut wire = with_t10(&pattern(DATA, 7), 5, 0, false);
    wire[BLOCK + 3] ^= 1; // app tag of block 0
    let attr = |mask| SigBlockAttr {
        check_mask: mask,
        ..wire_only(D::t10dif(sig::BLOCK_512, dif(5, 0, T10difFlags::empty())))
    };
    configure(b, &s, &mkey, &mr, Some(attr(sig::MASK_T10DIF_GUARD | sig::MASK_T10DIF_REFTAG)), false)?;
    rx_into(b, &a, &s, &mkey, &wire)?;
    check_eq("a bad app tag outside check_mask", expect_ok("mkey_check", b.mkey_check(&mkey))?, MkeyErr::NONE)?;
    configure(b, &s, &mkey, &mr, Some(attr(0x01)), false)?;
    wire[BLOCK + 4] ^= 0x80; // the ref tag's most significant byte: not checked with mask 0x01
    rx_into(b, &a, &s, &mkey, &wire)?;
    check_eq("a bad ref tag byte outside check_mask", expect_ok("mkey_check", b.mkey_check(&mkey))?, MkeyErr::NONE)?;
    configure(b, &s, &mkey, &mr, Some(attr(sig::MASK_T10DIF_APPTAG)), false)?;
    rx_into(b, &a, &s, &mkey, &wire)?;
    check_eq(
        "a bad app tag inside check_mask",
        expect_ok("mkey_check", b.mkey_check(&mkey))?.err_type,
        MkeyErrType::SigBlockBadApptag,
    )
}

/// Insert on TX, then strip on RX, for one wire domain type; `pi_ok` checks one block's PI.
fn round_trip(b: &mut dyn Backend, env: &Env, d: D, pi_len: usize, pi_ok: impl Fn(&[u8], &[u8]) -> bool) -> Check {
    round_trip_blocks(b, env, d, BLOCK, pi_len, pi_ok)
}

/// [`round_trip`] over `BLOCKS` blocks of `block` data bytes each.
fn round_trip_blocks(
    b: &mut dyn Backend,
    env: &Env,
    d: D,
    block: usize,
    pi_len: usize,
    pi_ok: impl Fn(&[u8], &[u8]) -> bool,
) -> Check {
    let (a, s) = sig_pair(b, env)?;
    let len = block * BLOCKS;
    let data = pattern(len, 8);
    let (_buf, mr, mkey) = sig_mkey(b, &a, len, &data)?;
    configure(b, &a, &mkey, &mr, Some(wire_only(d)), false)?;
    let wire = tx_through(b, &a, &s, &mkey, len, (block + pi_len) * BLOCKS)?;
    for (i, blk) in wire.chunks(block + pi_len).enumerate() {
        check_eq(&format!("block {i} data"), &blk[..block], &data[i * block..(i + 1) * block])?;
        check(
            &format!("block {i} PI"),
            pi_ok(&blk[..block], &blk[block..]),
            "the PI of the block's data",
            &blk[block..],
        )?;
    }
    check_eq("sender mkey_check", expect_ok("mkey_check", b.mkey_check(&mkey))?, MkeyErr::NONE)?;
    let (sbuf, smr, smkey) = sig_mkey(b, &s, len, &[])?;
    configure(b, &s, &smkey, &smr, Some(wire_only(d)), false)?;
    rx_into(b, &a, &s, &smkey, &wire)?;
    check_eq("stripped on receive", contents(b, &sbuf)?, data)?;
    check_eq("receiver mkey_check", expect_ok("mkey_check", b.mkey_check(&smkey))?, MkeyErr::NONE)
}

fn t10dif_crc(b: &mut dyn Backend, env: &Env) -> Check {
    round_trip(b, env, D::t10dif(sig::BLOCK_512, dif(0xabcd, 0x1000, T10difFlags::empty())), 8, |data, pi| {
        pi == [&t10_guard(data, 0).to_be_bytes()[..], &0xabcdu16.to_be_bytes(), &0x1000u32.to_be_bytes()].concat()
    })?;
    let seeded = D::t10dif(sig::BLOCK_512, SigT10dif { bg: 0xffff, ..dif(1, 2, T10difFlags::empty()) });
    round_trip(b, env, seeded, 8, |data, pi| pi[..2] == t10_guard(data, 0xffff).to_be_bytes())
}

fn t10dif_csum(b: &mut dyn Backend, env: &Env) -> Check {
    let d = D::t10dif(sig::BLOCK_512, SigT10dif { bg_type: sig::BG_CSUM, ..dif(3, 4, T10difFlags::empty()) });
    round_trip(b, env, d, 8, |data, pi| pi[..2] == internet_checksum::checksum(data))
}

fn crc32(b: &mut dyn Backend, env: &Env) -> Check {
    let ones = Crc::<u32>::new(&CRC_32_ISO_HDLC);
    round_trip(b, env, D::crc(sig::BLOCK_512, sig::CRC32, 0xffff_ffff), 4, |data, pi| {
        holds(pi, u64::from(ones.checksum(data)), 4)
    })
}

fn crc32c(b: &mut dyn Backend, env: &Env) -> Check {
    let zero = Crc::<u32>::new(&CRC32C_SEED0);
    round_trip(b, env, D::crc(sig::BLOCK_512, sig::CRC32C, 0), 4, |data, pi| {
        holds(pi, u64::from(zero.checksum(data)), 4)
    })
}

fn crc64(b: &mut dyn Backend, env: &Env) -> Check {
    let ones = Crc::<u64>::new(&CRC_64_NVME);
    // The XP10 parameters are the profile's (CRC-64/NVME by default); hardware decides.
    round_trip(b, env, D::crc(sig::BLOCK_512, sig::CRC64_XP10, u64::MAX), 8, |data, pi| {
        holds(pi, ones.checksum(data), 8)
    })
}

fn t10_block_ok(data: &[u8], pi: &[u8]) -> bool {
    pi[..2] == t10_guard(data, 0).to_be_bytes() && pi[2..] == [0, 5, 0, 0, 0, 6]
}

fn block_sizes(b: &mut dyn Backend, env: &Env) -> Check {
    for (bs, bytes) in [(sig::BLOCK_520, 520), (sig::BLOCK_4096, 4096), (sig::BLOCK_4160, 4160)] {
        round_trip_blocks(b, env, D::t10dif(bs, dif(5, 6, T10difFlags::empty())), bytes, 8, t10_block_ok)?;
    }
    Ok(())
}

fn block_4048(b: &mut dyn Backend, env: &Env) -> Check {
    round_trip_blocks(b, env, D::t10dif(sig::BLOCK_4048, dif(5, 6, T10difFlags::empty())), 4048, 8, t10_block_ok)
}

fn convert(b: &mut dyn Backend, env: &Env) -> Check {
    // Memory T10-DIF (checked, stripped) becomes wire CRC32 (generated) on TX.
    let (a, s) = sig_pair(b, env)?;
    let data = pattern(DATA, 15);
    let (_buf, mr, mkey) = sig_mkey(b, &a, T10_WIRE, &with_t10(&data, 3, 9, false))?;
    let attr = SigBlockAttr {
        mem: Some(D::t10dif(sig::BLOCK_512, dif(3, 9, T10difFlags::empty()))),
        wire: Some(D::crc(sig::BLOCK_512, sig::CRC32, 0xffff_ffff)),
        flags: SigBlockAttrFlags::empty(),
        check_mask: 0xff,
        copy_mask: 0,
        comp_mask: 0,
    };
    configure(b, &a, &mkey, &mr, Some(attr), false)?;
    let wire = tx_through(b, &a, &s, &mkey, DATA, 516 * BLOCKS)?;
    let c32 = Crc::<u32>::new(&CRC_32_ISO_HDLC);
    for (i, blk) in wire.chunks(516).enumerate() {
        check_eq(&format!("block {i} data"), &blk[..BLOCK], &data[i * BLOCK..(i + 1) * BLOCK])?;
        check(
            &format!("block {i} CRC32"),
            holds(&blk[BLOCK..], u64::from(c32.checksum(&blk[..BLOCK])), 4),
            "the CRC32 of the data",
            &blk[BLOCK..],
        )?;
    }
    check_eq("memory T10-DIF checked clean", expect_ok("mkey_check", b.mkey_check(&mkey))?, MkeyErr::NONE)
}

fn memory_pi_send(b: &mut dyn Backend, env: &Env) -> Check {
    // Memory CRC32 + wire NONE: a SEND of 512 data bytes validates and strips the memory PI.
    let (a, s) = sig_pair(b, env)?;
    let data = pattern(BLOCK, 9);
    let crc = Crc::<u32>::new(&CRC_32_ISO_HDLC).checksum(&data);
    let mut errors = 0;
    for (round, pi) in [(0u64, crc.to_le_bytes()), (1, crc.to_be_bytes())] {
        let mem = [&data[..], &pi].concat();
        let (_buf, mr, mkey) = sig_mkey(b, &a, BLOCK + 4, &mem)?;
        configure(b, &a, &mkey, &mr, Some(mem_only(D::crc(sig::BLOCK_512, sig::CRC32, 0xffff_ffff))), false)?;
        let (rbuf, rmr) = region(b, s.pd, BLOCK, &[], A::LOCAL_WRITE)?;
        recv(b, &s.qp, 0x70 + round, vec![sge(&rmr, 0, BLOCK as u32)])?;
        let send = WrOp::Send {
            wr_id: 0x71,
            flags: SendFlags::SIGNALED,
            sge: vec![Sge { addr: 0, length: BLOCK as u32, lkey: mkey.lkey }],
        };
        expect_ok("SEND of 512 data bytes from a CRC32 memory domain", b.post_send(&a.qp, &[send]))?;
        ok_cqe(b, &a.cq, 0x71, wc_opcode::SEND)?;
        let rwc = ok_cqe(b, &s.cq, 0x70 + round, wc_opcode::RECV)?;
        check_eq("received byte_len", rwc.byte_len, BLOCK as u32)?;
        check_eq("received data", contents(b, &rbuf)?, data.clone())?;
        let e = expect_ok("mkey_check", b.mkey_check(&mkey))?;
        // Exactly one of the two byte orders is the device's: that round is clean, the other
        // is a memory-domain guard error.
        if e != MkeyErr::NONE {
            errors += 1;
            check_eq("the other byte order is a bad guard", e.err_type, MkeyErrType::SigBlockBadGuard)?;
            check_eq("expected value: the CRC", e.sig.expected_value, u64::from(crc))?;
            check_eq("the error is in the memory domain at offset 0", e.sig.offset, 0)?;
        }
    }
    check_eq("exactly one of the two byte orders is wrong", errors, 1)
}

fn remap_and_escapes(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, s) = sig_pair(b, env)?;
    let data = pattern(DATA, 10);
    let (_buf, mr, mkey) = sig_mkey(b, &a, DATA, &data)?;
    configure(b, &a, &mkey, &mr, Some(wire_only(D::t10dif(sig::BLOCK_512, dif(1, 100, sig::FLAG_REF_REMAP)))), false)?;
    check_eq(
        "REF_REMAP: ref tags 100..103",
        tx_through(b, &a, &s, &mkey, DATA, T10_WIRE)?,
        with_t10(&data, 1, 100, true),
    )?;
    // Escapes on receive: block 1 has a bad guard.
    let (_sb, smr, smkey) = sig_mkey(b, &s, DATA, &[])?;
    let mut wire = with_t10(&data, 1, 100, true);
    wire[520 + BLOCK] ^= 0xff;
    let escape_app = |wire: &mut Vec<u8>| wire[520 + BLOCK + 2..520 + BLOCK + 4].copy_from_slice(&[0xff, 0xff]);
    let escape_ref = |wire: &mut Vec<u8>| wire[520 + BLOCK + 4..520 + BLOCK + 8].copy_from_slice(&[0xff; 4]);
    let rx = |b: &mut dyn Backend, flags: T10difFlags, wire: &[u8]| -> Check<MkeyErr> {
        configure(
            b,
            &s,
            &smkey,
            &smr,
            Some(wire_only(D::t10dif(sig::BLOCK_512, dif(1, 100, sig::FLAG_REF_REMAP | flags)))),
            false,
        )?;
        rx_into(b, &a, &s, &smkey, wire)?;
        expect_ok("mkey_check", b.mkey_check(&smkey))
    };
    let mut w1 = wire.clone();
    escape_app(&mut w1);
    check_eq("APP_ESCAPE skips a block with app tag 0xffff", rx(b, sig::FLAG_APP_ESCAPE, &w1)?, MkeyErr::NONE)?;
    check_eq(
        "APP_REF_ESCAPE needs ref 0xffffffff too",
        rx(b, sig::FLAG_APP_REF_ESCAPE, &w1)?.err_type,
        MkeyErrType::SigBlockBadGuard,
    )?;
    escape_ref(&mut w1);
    check_eq(
        "APP_REF_ESCAPE skips app 0xffff and ref 0xffffffff",
        rx(b, sig::FLAG_APP_REF_ESCAPE, &w1)?,
        MkeyErr::NONE,
    )?;
    check_eq(
        "no escape flag: the bad guard is found",
        rx(b, T10difFlags::empty(), &w1)?.err_type,
        MkeyErrType::SigBlockBadGuard,
    )
}

fn transient(b: &mut dyn Backend, env: &Env) -> Check {
    let (a, _s) = sig_pair(b, env)?;
    let (_buf, mr, mkey) = sig_mkey(b, &a, T10_WIRE, &[])?;
    let attr = SigBlockAttr {
        mem: Some(D::crc(sig::BLOCK_512, sig::CRC32, 0xffff_ffff)),
        wire: Some(D::t10dif(
            sig::BLOCK_512,
            SigT10dif { bg: 0xffff, ..dif(0x1234, 0x5678_9abc, T10difFlags::empty()) },
        )),
        flags: SigBlockAttrFlags::empty(),
        check_mask: 0,
        copy_mask: 0,
        comp_mask: 0,
    };
    ctl(b)?.record_wqes(true);
    expect_ok("configure", b.post_send(&a.qp, &configure_chain(&mkey, &mr, Some(attr), false)))?;
    let w = ctl(b)?.take_wqes();
    let seen: Vec<(u8, bool, Option<u64>)> = w.iter().map(|r| (r.opcode, r.signaled, r.transient_signature)).collect();
    check_eq(
        "UMR, then SET_PSV memory (CRC32 seed << 32), then SET_PSV wire (bg<<48|app<<32|ref), only the last signalled",
        seen,
        vec![
            (0x25, false, None),
            (0x20, false, Some(0xffff_ffff_0000_0000)),
            (0x20, true, Some(0xffff_1234_5678_9abc)),
        ],
    )?;
    let wcs = poll(b, &a.cq, 1)?;
    check_eq("one completion", (wcs[0].wr_id, wcs[0].opcode), (0x51, wc_opcode::DRIVER1))?;
    no_cqe(b, &a.cq)
}
