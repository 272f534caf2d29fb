//! The model's own rules, on hand-written sequences.

use mlx5_dv::errno::{EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::{Caps, DeviceKind, wc_opcode, wc_status};

use super::qp::sq_size;
use super::*;

fn model() -> Model {
    let mut caps = Caps::default();
    caps.kernel.devx = Some(true);
    caps.kernel.mkey_update_tag = Some(true);
    caps.device.max_qp_wr = Some(32768);
    Model::new(&caps, vec![DeviceKind::Mlx5, DeviceKind::Mlx5]).unwrap_or_else(|| unreachable!("known facts"))
}

/// A context, a PD, a CQ, two buffers of 256 bytes with MRs, an mkey and two connected QPs.
fn connected() -> Model {
    let mut m = model();
    let setup = [
        Op::OpenIbv { dev: 0 },
        Op::AllocPd { ctx: 0 },
        Op::CreateCq { ctx: 0, cqe: 63 },
        Op::AllocBuf { len: 256 },
        Op::AllocBuf { len: 256 },
        Op::FillBuf { buf: 0, seed: 7 },
        Op::RegMr { pd: 0, buf: 0, off: 0, len: 256, access: 7 },
        Op::RegMr { pd: 0, buf: 1, off: 0, len: 256, access: 7 },
        Op::CreateMkey { pd: 0, flags: 1, max_entries: 4 },
        Op::CreateQp { pd: 0, cq: 0, wr: 16, sge: 4, inline: 0 },
        Op::CreateQp { pd: 0, cq: 0, wr: 16, sge: 4, inline: 0 },
        Op::Connect { qp: 0, peer: 1 },
        Op::Connect { qp: 1, peer: 0 },
    ];
    for op in &setup {
        assert!(matches!(m.step(op), Expect::Ok(_)), "{op:?}");
    }
    m
}

fn post(wrs: &[Wr]) -> Op {
    let mut a = [Wr::Access(0); 3];
    a[..wrs.len()].copy_from_slice(wrs);
    Op::Post { qp: 0, n: wrs.len() as u8, wrs: a }
}

#[test]
fn send_queue_sizes_follow_items_19_and_75() {
    // (wr, sge, inline) -> (max_send_wr, max_inline_data), the table of qp.umr_overhead.
    assert_eq!(sq_size(16, 1, 0, Some(32768)), Ok((16, 60)));
    assert_eq!(sq_size(10, 4, 0, Some(32768)), Ok((16, 60)));
    assert_eq!(sq_size(16, 1, 512, Some(32768)), Ok((21, 572)));
    assert_eq!(sq_size(8192, 4, 0, Some(32768)), Ok((8192, 60)));
    assert_eq!(sq_size(8193, 4, 0, Some(32768)), Err(Some(EINVAL)));
    assert_eq!(sq_size(1, 53, 0, Some(32768)), Err(Some(EINVAL)));
    assert_eq!(sq_size(1, 1, 829, Some(32768)), Err(Some(EINVAL)));
    assert_eq!(sq_size(1, 52, 828, Some(32768)), Ok((1, 828)));
    assert_eq!(sq_size(16, 1, 0, None), Err(None));
}

#[test]
fn the_state_machine_refuses_what_ib_modify_qp_is_ok_refuses() {
    let mut m = connected();
    let q = |m: &mut Model, to| m.step(&Op::ModifyQp { qp: 0, to });
    assert_eq!(q(&mut m, Target::Init), Expect::Errno(EINVAL));
    assert_eq!(q(&mut m, Target::Rts), Expect::Ok(None));
    assert_eq!(q(&mut m, Target::Err), Expect::Ok(None));
    assert_eq!(q(&mut m, Target::Rts), Expect::Errno(EINVAL));
    assert_eq!(q(&mut m, Target::Reset), Expect::Ok(None));
    assert_eq!(q(&mut m, Target::Rtr(Some(1))), Expect::Errno(EINVAL));
    assert_eq!(q(&mut m, Target::Init), Expect::Ok(None));
    assert_eq!(q(&mut m, Target::Rtr(None)), Expect::Errno(EINVAL));
    assert_eq!(m.step(&Op::QueryQp { qp: 0 }), Expect::Ok(Some(1)));
    // Item 20: until RTS again every chain is EINVAL.
    let w = Wr::Write {
        local: Loc { key: Key::Mr(0), off: 0, len: 8 },
        more: None,
        remote: Key::Mr(1),
        roff: 0,
        signaled: true,
    };
    assert_eq!(m.step(&post(&[w])), Expect::Errno(EINVAL));
}

#[test]
fn a_write_moves_bytes_and_a_bad_rkey_is_a_remote_access_error() {
    let mut m = connected();
    let w = Wr::Write {
        local: Loc { key: Key::Mr(0), off: 16, len: 8 },
        more: None,
        remote: Key::Mr(1),
        roff: 100,
        signaled: true,
    };
    assert_eq!(m.step(&post(&[w])), Expect::Ok(None));
    let want = fill_pattern(256, 7);
    assert_eq!(m.buf_bytes(1).map(|b| b[100..108].to_vec()), Some(want[16..24].to_vec()));
    assert_eq!(m.effects().cqes.len(), 1);
    assert_eq!(m.effects().cqes[0].1.opcode, Some(wc_opcode::RDMA_WRITE));
    let bad = Wr::Write {
        local: Loc { key: Key::Mr(0), off: 0, len: 8 },
        more: None,
        remote: Key::Bogus,
        roff: 0,
        signaled: false,
    };
    assert_eq!(m.step(&post(&[bad, w])), Expect::Ok(None));
    let st: Vec<u32> = m.effects().cqes.iter().map(|c| c.1.status).collect();
    assert_eq!(st, vec![wc_status::REM_ACCESS_ERR, wc_status::WR_FLUSH_ERR]);
}

#[test]
fn a_list_mkey_is_zero_based_and_its_setters_follow_items_26_to_29() {
    let mut m = connected();
    let e = [Ent { mr: 1, off: 10, len: 4 }, Ent { mr: 1, off: 50, len: 4 }, Ent::default(), Ent::default()];
    let conf = |setters, inline| Wr::Configure { mkey: 0, tag: 0, setters, conf_flags: 0, inline, signaled: true };
    assert_eq!(m.step(&post(&[conf(0, false)])), Expect::Errno(EOPNOTSUPP));
    assert_eq!(m.step(&post(&[Wr::Access(7)])), Expect::Errno(EINVAL));
    assert_eq!(m.step(&post(&[conf(2, true), Wr::Access(7), Wr::Access(7)])), Expect::Errno(EINVAL));
    assert_eq!(m.step(&post(&[conf(1, true), Wr::List { n: 5, e }])), Expect::Errno(ENOMEM));
    let list = Wr::MrList { mkey: 0, access: 7, n: 2, e, inline: true, signaled: true };
    assert_eq!(m.step(&post(&[list])), Expect::Ok(None));
    assert_eq!(m.effects().cqes[0].1.opcode, Some(wc_opcode::DRIVER1));
    // Offsets 2..6 of the mkey are bytes 12..14 and 50..52 of buffer 1.
    let w = Wr::Write {
        local: Loc { key: Key::Mr(0), off: 0, len: 4 },
        more: None,
        remote: Key::Mkey(0, 0),
        roff: 2,
        signaled: true,
    };
    assert_eq!(m.step(&post(&[w])), Expect::Ok(None));
    let want = fill_pattern(256, 7);
    let got = m.buf_bytes(1).map(|b| (b[12..14].to_vec(), b[50..52].to_vec()));
    assert_eq!(got, Some((want[0..2].to_vec(), want[2..4].to_vec())));
}

#[test]
fn the_send_queue_fills_at_max_post() {
    let mut m = connected();
    let w = Wr::Write {
        local: Loc { key: Key::Mr(0), off: 0, len: 4 },
        more: None,
        remote: Key::Mr(1),
        roff: 0,
        signaled: false,
    };
    // 16 unsignalled WRs fill a 16-deep queue; the 17th finds no room (item 23).
    for _ in 0..5 {
        assert_eq!(m.step(&post(&[w, w, w])), Expect::Ok(None));
    }
    assert_eq!(m.step(&post(&[w, w])), Expect::Errno(ENOMEM));
    assert_eq!(m.step(&post(&[w])), Expect::Ok(None));
    assert_eq!(m.step(&post(&[w])), Expect::Errno(ENOMEM));
}

#[test]
fn a_tag_byte_needs_kernel_support_and_then_names_the_mkey() {
    let e = [Ent { mr: 1, off: 0, len: 16 }, Ent::default(), Ent::default(), Ent::default()];
    let conf = |tag| Wr::Configure { mkey: 0, tag, setters: 2, conf_flags: 0, inline: true, signaled: true };
    let list = [conf(0x5a), Wr::Access(7), Wr::List { n: 1, e }];
    let mut m = connected();
    m.update_tag = false;
    assert_eq!(m.step(&post(&list)), Expect::Errno(EOPNOTSUPP));
    let mut m = connected();
    assert_eq!(m.step(&post(&list)), Expect::Ok(None));
    let w = |tag| Wr::Write {
        local: Loc { key: Key::Mr(0), off: 0, len: 4 },
        more: None,
        remote: Key::Mkey(0, tag),
        roff: 0,
        signaled: true,
    };
    assert_eq!(m.step(&post(&[w(0x5a)])), Expect::Ok(None));
    assert_eq!(m.effects().cqes[0].1.status, wc_status::SUCCESS);
    assert_eq!(m.step(&post(&[w(0)])), Expect::Ok(None));
    assert_eq!(m.effects().cqes[0].1.status, wc_status::REM_ACCESS_ERR);
}

#[test]
fn sges_beyond_max_send_sge_are_enomem_and_empty_ones_are_dropped() {
    let mut m = connected();
    let empty = Some(Loc { key: Key::Bogus, off: 0, len: 0 });
    let w = |more| Wr::Write {
        local: Loc { key: Key::Mr(0), off: 0, len: 8 },
        more,
        remote: Key::Mr(1),
        roff: 0,
        signaled: true,
    };
    assert_eq!(m.step(&post(&[w(empty)])), Expect::Ok(None));
    assert_eq!(m.effects().cqes[0].1.status, wc_status::SUCCESS);
    assert_eq!(
        m.step(&Op::CreateQp { pd: 0, cq: 0, wr: 4, sge: 1, inline: 0 }),
        Expect::Ok(Some(4 << 32 | 60 << 8 | 2))
    );
    assert_eq!(m.step(&Op::Connect { qp: 2, peer: 2 }), Expect::Ok(None));
    let mut a = [Wr::Access(0); 3];
    a[0] = w(empty);
    assert_eq!(m.step(&Op::Post { qp: 2, n: 1, wrs: a }), Expect::Errno(ENOMEM));
}

#[test]
fn guards_match_appendix_b() {
    let dif = |csum, bg_ones| sig::Dif { csum, bg_ones, app: 0, ref_tag: 0, remap: false, escape: 0 };
    assert_eq!(sig::guard(&dif(false, false), b"123456789"), 0xd0db);
    assert_eq!(sig::guard(&dif(false, true), b"123456789"), 0x8e3c);
    let ramp: Vec<u8> = (0..512).map(|i| i as u8).collect();
    assert_eq!(sig::guard(&dif(false, false), &ramp), 0x4f10);
    assert_eq!(sig::guard(&dif(true, false), &ramp), 0x7f80);
    assert_eq!(sig::guard(&dif(true, true), &[0; 512]), 0xffff);
}

#[test]
fn the_first_bad_block_and_its_first_bad_field_are_reported() {
    use mlx5_dv::MkeyErrType::{SigBlockBadApptag, SigBlockBadGuard, SigBlockBadReftag};
    let d = sig::Dif { csum: false, bg_ones: false, app: 0x1234, ref_tag: 7, remap: true, escape: 0 };
    let c = |block, field, xor| sig::Corrupt { block, field, xor };
    let op = |check_mask, corrupt: [sig::Corrupt; 3]| sig::SigOp {
        dev: 0,
        block_size: mlx5_dv::sig::BLOCK_512,
        blocks: 3,
        mem: Some(sig::Dom::T10(d)),
        wire: None,
        check_mask,
        inbound: false,
        n: 3,
        corrupt,
        seed: 1,
        rearm: false,
        reset: false,
        past_end: false,
        crc_le: true,
    };
    // Block 2's guard, block 1's ref tag and app tag: block 1 first, its app tag before its
    // ref tag; the offset counts the input's PI (520 bytes a block).
    let plan = op(0xff, [c(2, 0, 1), c(1, 2, 0x100), c(1, 1, 3)]).plan().unwrap();
    assert_eq!(plan.err.err_type, SigBlockBadApptag);
    assert_eq!((plan.err.sig.expected_value, plan.err.sig.actual_value, plan.err.sig.offset), (0x1234, 0x1237, 520));
    // Without the app tag in the check mask the ref tag is next: 7 + 1 with REF_REMAP.
    let plan = op(0xcf, [c(2, 0, 1), c(1, 2, 0x100), c(1, 1, 3)]).plan().unwrap();
    assert_eq!(plan.err.err_type, SigBlockBadReftag);
    assert_eq!((plan.err.sig.expected_value, plan.err.sig.actual_value), (8, 0x108));
    // Only the guard checked: block 2.
    let plan = op(0xc0, [c(2, 0, 1), c(1, 2, 0x100), c(1, 1, 3)]).plan().unwrap();
    assert_eq!((plan.err.err_type, plan.err.sig.offset), (SigBlockBadGuard, 1040));
    // Stripped on the way out: the wire has the data only.
    assert_eq!(plan.output, fill_pattern(1536, 1));
}

#[test]
fn crcs_match_appendix_b() {
    let c = |kind, seed_ones| sig::crc_of(&sig::Crc { kind, seed_ones }, b"123456789");
    use mlx5_dv::sig::{CRC32, CRC32C, CRC64_XP10};
    assert_eq!(c(CRC32, true), 0xcbf4_3926);
    assert_eq!(c(CRC32C, true), 0xe306_9283);
    assert_eq!(c(CRC32, false), 0xd202_d277);
    assert_eq!(c(CRC32C, false), 0xa71c_05df);
    assert_eq!(c(CRC64_XP10, true), 0xae8b_1486_0a79_9888);
    assert_eq!(c(CRC64_XP10, false), 0x87ff_3f9b_2b57_c87b);
}

/// A CRC scenario: one domain each side as given, three 512-byte blocks, corruptions
/// `corrupt`, PI in the byte order `le`.
fn crc_op(
    mem: Option<sig::Dom>,
    wire: Option<sig::Dom>,
    check_mask: u8,
    corrupt: [sig::Corrupt; 3],
    le: bool,
) -> sig::SigOp {
    sig::SigOp {
        dev: 0,
        block_size: mlx5_dv::sig::BLOCK_512,
        blocks: 3,
        mem,
        wire,
        check_mask,
        inbound: false,
        n: 3,
        corrupt,
        seed: 2,
        rearm: false,
        reset: false,
        past_end: false,
        crc_le: le,
    }
}

#[test]
fn crc_pi_is_inserted_in_the_byte_order_given_and_checked_by_the_selected_bytes() -> Result<(), &'static str> {
    use mlx5_dv::sig::{CRC32, CRC32C, CRC64_XP10};
    let crc = |kind, seed_ones| sig::Dom::Crc(sig::Crc { kind, seed_ones });
    let none = [sig::Corrupt::default(); 3];
    let data = fill_pattern(1536, 2);
    // Inserted on send: 4 bytes after each block, little- or big-endian.
    for le in [true, false] {
        let plan = crc_op(None, Some(crc(CRC32C, true)), 0xff, none, le).plan().ok_or("a plan")?;
        let v = sig::crc_of(&sig::Crc { kind: CRC32C, seed_ones: true }, &data[512..1024]) as u32;
        let want = if le { v.to_le_bytes() } else { v.to_be_bytes() };
        assert_eq!(plan.output.len(), 3 * 516);
        assert_eq!(plan.output[516 + 512..2 * 516], want);
    }
    // A corrupted CRC64 in block 1: the guard error carries all 64 bits, at block 1's offset.
    let c = |block, xor| sig::Corrupt { block, field: 1, xor };
    let hit = [c(1, 0x0100_0001), c(2, 1), c(2, 1)];
    let plan = crc_op(Some(crc(CRC64_XP10, false)), None, 0xff, hit, true).plan().ok_or("a plan")?;
    let v = sig::crc_of(&sig::Crc { kind: CRC64_XP10, seed_ones: false }, &data[512..1024]);
    assert_eq!(plan.err.err_type, mlx5_dv::MkeyErrType::SigBlockBadGuard);
    assert_eq!((plan.err.sig.expected_value, plan.err.sig.actual_value), (v, v ^ 0x0100_0001));
    assert_eq!(plan.err.sig.offset, 520);
    // Stripped: the wire has the data only.
    assert_eq!(plan.output, data);
    // The check mask selects bytes of the 64-bit value, the CRC32 in its top four: the low
    // four (0x0f) check nothing, 0x10 checks the CRC's low byte, 0x20 its second.
    let low = [c(0, 0x01), c(0, 0x01), c(0, 0x01)];
    let errs = |mask| crc_op(Some(crc(CRC32, true)), None, mask, low, true).plan().map(|p| p.err.err_type as u32);
    assert_eq!([errs(0x0f), errs(0x10), errs(0x20), errs(0xf0)], [Some(0), Some(1), Some(0), Some(1)]);
    Ok(())
}

#[test]
fn like_crcs_copy_the_pi_and_unlike_ones_regenerate_it() -> Result<(), &'static str> {
    use mlx5_dv::sig::{CRC32, CRC32C};
    let crc = |kind, seed_ones| sig::Dom::Crc(sig::Crc { kind, seed_ones });
    let bad = [sig::Corrupt { block: 0, field: 0, xor: 1 }; 3];
    let data = fill_pattern(1536, 2);
    // CRC32 seed 0 in memory to CRC32 seed ones on the wire: the memory's (bad) PI is copied.
    let plan = crc_op(Some(crc(CRC32, false)), Some(crc(CRC32, true)), 0xff, bad, true).plan().ok_or("a plan")?;
    assert_eq!(plan.output, plan.input);
    assert_eq!(plan.err.err_type, mlx5_dv::MkeyErrType::SigBlockBadGuard);
    // To CRC32C: generated afresh.
    let plan = crc_op(Some(crc(CRC32, false)), Some(crc(CRC32C, true)), 0xff, bad, true).plan().ok_or("a plan")?;
    let fresh = sig::crc_of(&sig::Crc { kind: CRC32C, seed_ones: true }, &data[..512]) as u32;
    assert_eq!(plan.output[512..516], fresh.to_le_bytes());
    // T10-DIF memory to a CRC32 wire: converted.
    let dif = sig::Dif { csum: false, bg_ones: false, app: 1, ref_tag: 2, remap: false, escape: 0 };
    let plan = crc_op(Some(sig::Dom::T10(dif)), Some(crc(CRC32, true)), 0xff, bad, true).plan().ok_or("a plan")?;
    assert_eq!(plan.input.len(), 3 * 520);
    assert_eq!(plan.output.len(), 3 * 516);
    Ok(())
}

#[test]
fn an_aes_xts_unit_under_16_bytes_and_the_job_size_rule_are_never_generated() {
    let c = xts::CryptoOp {
        dev: 0,
        attrs: true,
        key256: true,
        keytag: true,
        key_seed: 0,
        dus: mlx5_dv::sig::BLOCK_520,
        units: 1,
        tail: 0,
        tweak: 0,
        encrypt_on_tx: true,
        order: 0,
        seed: 0,
        sig: None,
    };
    assert_eq!(c.len(true), Some(520));
    // 520 + 8 passes item 60's rule but leaves an 8-byte unit.
    assert_eq!(xts::CryptoOp { tail: 8, ..c }.len(true), None);
    assert_eq!(xts::CryptoOp { units: 0, tail: 496, ..c }.len(true), Some(496));
    assert_eq!(xts::CryptoOp { units: 2, ..c }.len(false), None);
    // The round trip is the identity, and the tweak counts per data unit.
    let data = fill_pattern(1040, 3);
    let enc = xts::xts(&c, 520, true, &data).unwrap();
    assert_eq!(xts::xts(&c, 520, false, &enc).unwrap(), data);
    let next = xts::xts(&xts::CryptoOp { tweak: 1, ..c }, 520, true, &data[520..]).unwrap();
    assert_eq!(enc[520..], next[..]);
}

#[test]
fn escaped_blocks_are_not_checked() {
    let c = |block, field| sig::Corrupt { block, field, xor: 1 };
    let op = |escape, corrupt: [sig::Corrupt; 3]| sig::SigOp {
        dev: 0,
        block_size: mlx5_dv::sig::BLOCK_512,
        blocks: 2,
        mem: None,
        wire: Some(sig::Dom::T10(sig::Dif { csum: true, bg_ones: false, app: 1, ref_tag: 2, remap: false, escape })),
        check_mask: 0xff,
        inbound: true,
        n: 3,
        corrupt,
        seed: 4,
        rearm: false,
        reset: false,
        past_end: false,
        crc_le: true,
    };
    let offset = |escape, corrupt| op(escape, corrupt).plan().map(|p| (p.err.err_type as u32, p.err.sig.offset));
    // Block 0: app tag 0xffff and a bad guard; block 1: a bad guard.
    let app = [c(0, 3), c(0, 0), c(1, 0)];
    assert_eq!(offset(0, app), Some((1, 0)));
    assert_eq!(offset(1, app), Some((1, 520)));
    // APP_REF_ESCAPE needs the ref tag all ones too, and wins over APP_ESCAPE.
    assert_eq!(offset(2, app), Some((1, 0)));
    assert_eq!(offset(3, app), Some((1, 0)));
    assert_eq!(offset(3, [c(0, 4), c(0, 0), c(1, 0)]), Some((1, 520)));
}

mod net {
    use mlx5_dv::net_fault::opcode as bth;
    use mlx5_dv::{NetAction, wc_status};

    use crate::model::net::{MsgKind, NetMsg, NetOp, NetRule, SLOT};

    const RULE: NetRule =
        NetRule { answers: false, action: NetAction::Drop, opcode: None, at: None, skip: 0, times: None, random: None };

    fn op(kinds: &[MsgKind], recvs: u8, rules: &[NetRule]) -> NetOp {
        let mut msgs = [NetMsg { kind: MsgKind::Write, len: 600 }; 4];
        for (m, k) in msgs.iter_mut().zip(kinds) {
            m.kind = *k;
        }
        let mut rule = [RULE; 3];
        rule[..rules.len()].copy_from_slice(rules);
        NetOp {
            dev: 0,
            peer: 1,
            n: kinds.len() as u8,
            msgs,
            recvs,
            rules: rules.len() as u8,
            rule,
            retry_cnt: 7,
            rnr_retry: 2,
            psn: 0xff_fffe,
            seed: 3,
            imm: 9,
        }
    }

    fn statuses(x: &NetOp) -> Option<Vec<u32>> {
        Some(x.outcome()?.wcs.iter().filter(|c| !c.recv).map(|c| c.status).collect())
    }

    #[test]
    fn psns_wrap_and_a_read_takes_one_per_response_packet() {
        let x = op(&[MsgKind::Read, MsgKind::Send, MsgKind::Write], 4, &[]);
        // 600 bytes at MTU 256: three PSNs each, from 0xfffffe.
        assert_eq!((x.first_psn(0), x.first_psn(1), x.first_psn(2)), (0xff_fffe, 1, 4));
        assert_eq!(x.rule_psn((2, 5)), 6);
    }

    #[test]
    fn a_request_lost_for_good_fails_its_wr_and_flushes_the_rest() {
        use MsgKind::*;
        // The second message's MIDDLE packet, by PSN; the first is executed, the others not.
        let x = op(&[Send, Write, SendImm, Read], 4, &[NetRule { at: Some((1, 1)), ..RULE }]);
        let (ok, exc, flush) = (wc_status::SUCCESS, wc_status::RETRY_EXC_ERR, wc_status::WR_FLUSH_ERR);
        assert_eq!(statuses(&x), Some(vec![ok, exc, flush, flush]));
        let o = x.outcome().expect("judged");
        assert_eq!(o.wcs.iter().filter(|c| c.recv).count(), 1, "one receive, the first SEND's");
        assert_eq!(o.open, vec![("responder", SLOT..SLOT + 600), ("requester", SLOT..SLOT + 600)]);
        // By opcode: the first message with that opcode.
        let x = op(&[Send, Write, Write], 4, &[NetRule { opcode: Some(bth::WRITE_LAST), ..RULE }]);
        assert_eq!(statuses(&x), Some(vec![ok, exc, flush]));
        // An opcode no message has: nothing lost.
        let x = op(&[Send, Write], 4, &[NetRule { opcode: Some(bth::READ_REQUEST), ..RULE }]);
        assert_eq!(statuses(&x), Some(vec![ok, ok]));
    }

    #[test]
    fn every_answer_lost_executes_a_lone_message_once() {
        let x = op(&[MsgKind::SendImm], 4, &[NetRule { answers: true, ..RULE }]);
        let o = x.outcome().expect("judged");
        assert_eq!(statuses(&x), Some(vec![wc_status::RETRY_EXC_ERR]));
        assert_eq!(o.wcs.iter().filter(|c| c.recv).map(|c| c.imm).collect::<Vec<_>>(), vec![Some(9)]);
        // Two messages: how many the requester sent before giving up is open.
        assert!(op(&[MsgKind::Send, MsgKind::Send], 4, &[NetRule { answers: true, ..RULE }]).outcome().is_none());
    }

    #[test]
    fn receives_that_run_out_end_in_rnr_retry_exc_where_the_docs_say() {
        use MsgKind::*;
        let (ok, rnr, flush) = (wc_status::SUCCESS, wc_status::RNR_RETRY_EXC_ERR, wc_status::WR_FLUSH_ERR);
        let x = op(&[Send, Write, WriteImm, Send], 1, &[]);
        assert_eq!(statuses(&x), Some(vec![ok, ok, rnr, flush]));
        // retry_cnt 0 with messages behind: the sequence error NAK may end it first.
        assert!(NetOp { retry_cnt: 0, ..x }.outcome().is_none());
        // rnr_retry 7 waits without end; faults with RNR are open.
        assert!(NetOp { rnr_retry: 7, ..x }.outcome().is_none());
        let finite = NetRule { times: Some(1), ..RULE };
        assert!(op(&[Send, Send], 1, &[finite]).outcome().is_none());
    }

    #[test]
    fn finite_faults_recover_only_within_the_retry_budget() {
        let finite = NetRule { times: Some(3), action: NetAction::Reorder, ..RULE };
        let x = op(&[MsgKind::Write, MsgKind::Read], 4, &[finite]);
        assert_eq!(statuses(&x), Some(vec![wc_status::SUCCESS; 2]));
        assert!(NetOp { retry_cnt: 6, ..x }.outcome().is_none());
        assert!(op(&[MsgKind::Write], 4, &[NetRule { times: Some(4), ..finite }]).outcome().is_none());
        // Every packet delayed, or the BTH byte the ICRC skips corrupted: open.
        assert!(
            op(&[MsgKind::Write], 4, &[NetRule { action: NetAction::Delay { ns: 1 }, ..RULE }]).outcome().is_none()
        );
        let byte4 = NetRule { action: NetAction::Corrupt { offset: 4, xor: 1 }, times: Some(1), ..RULE };
        assert!(op(&[MsgKind::Write], 4, &[byte4]).outcome().is_none());
    }
}

mod remote {
    use super::*;
    use mlx5_dv::AccessFlags as A;
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;

    fn aw(cas: bool, off: u8, local: u8, compare: u64, value: u64) -> AtomicWr {
        AtomicWr { cas, off, local, short: false, compare, value }
    }

    fn atomics(wrs: &[AtomicWr], legacy: bool, access: (bool, bool)) -> (Expect, Option<outcome::Outcome>) {
        let mut a = [AtomicWr::default(); 4];
        a[..wrs.len()].copy_from_slice(wrs);
        let op = AtomicOp {
            dev: 0,
            legacy,
            qp_atomic: access.0,
            mr_atomic: access.1,
            init: 5,
            seed: 1,
            n: wrs.len() as u8,
            wrs: a,
        };
        let mut m = model().with_remote(true, true);
        let r = m.step(&Op::Atomic(op));
        (r, m.effects().outcome.clone())
    }

    fn word(bytes: &[u8], at: usize) -> u64 {
        u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap_or_default())
    }

    #[test]
    fn compare_and_swap_and_fetch_and_add_follow_items_121_to_123() {
        let wrs = [aw(true, 0, 0, 4, 9), aw(true, 0, 8, 5, 9), aw(false, 8, 16, 0, u64::MAX), aw(false, 8, 24, 0, 3)];
        let (r, o) = atomics(&wrs, false, (true, true));
        assert_eq!(r, Expect::Ok(None));
        let o = o.unwrap_or_default();
        let ops: Vec<_> = o.wcs.iter().map(|c| (c.status, c.opcode, c.byte_len)).collect();
        let cs = (0, Some(wc_opcode::COMP_SWAP), Some(8));
        let fa = (0, Some(wc_opcode::FETCH_ADD), Some(8));
        assert_eq!(ops, [cs, cs, fa, fa]);
        let (t, l) = (&o.bytes[0].1, &o.bytes[1].1);
        // A miss, a match, then 5 - 1 and + 3, wrapping nowhere; the original values back.
        assert_eq!((word(t, 0), word(t, 8)), (9, 7));
        assert_eq!([word(l, 0), word(l, 8), word(l, 16), word(l, 24)], [5, 5, 5, 4]);
        assert_eq!(o.states, [3, 3]);
    }

    #[test]
    fn misaligned_refused_and_short_atomics_fail_as_items_124_to_126_say() {
        let (_, o) = atomics(&[aw(false, 4, 0, 0, 1), aw(false, 0, 8, 0, 1)], false, (true, true));
        let o = o.unwrap_or_default();
        assert_eq!(o.wcs.iter().map(|c| c.status).collect::<Vec<_>>(), [wc_status::REM_INV_REQ_ERR, 5]);
        assert_eq!((o.states.clone(), word(&o.bytes[0].1, 0)), (vec![6, 6], 5));
        for access in [(false, true), (true, false)] {
            let (_, o) = atomics(&[aw(true, 0, 0, 5, 1)], false, access);
            let o = o.unwrap_or_default();
            assert_eq!((o.wcs[0].status, o.states.clone()), (wc_status::REM_ACCESS_ERR, vec![6, 6]));
        }
        let (_, o) = atomics(&[aw(false, 64, 0, 0, 1)], false, (true, true));
        assert_eq!(o.unwrap_or_default().wcs[0].status, wc_status::REM_ACCESS_ERR);
        // Two remote faults: which one is reported is not published.
        assert_eq!(atomics(&[aw(false, 4, 0, 0, 1)], false, (false, true)).0, Expect::Unknown);
        let short = AtomicWr { short: true, ..aw(false, 0, 0, 0, 1) };
        let (_, o) = atomics(&[short], false, (true, true));
        let o = o.unwrap_or_default();
        assert_eq!((o.wcs[0].status, o.states.clone()), (wc_status::LOC_LEN_ERR, vec![6, 3]));
        // ibv_post_send writes 8 bytes whatever the SGE says (item 121).
        let (_, o) = atomics(&[short], true, (true, true));
        let o = o.unwrap_or_default();
        assert_eq!((o.wcs[0].status, word(&o.bytes[1].1, 0), word(&o.bytes[0].1, 0)), (0, 5, 6));
    }

    fn window(type2: bool, steps: &[MwStep]) -> Option<outcome::Outcome> {
        let mut s = [MwStep::Dealloc; 5];
        s[..steps.len()].copy_from_slice(steps);
        mw::predict(&MwOp { dev: 0, type2, local_write: true, seed: 3, n: steps.len() as u8, steps: s })
    }

    const RW: u32 = A::REMOTE_WRITE.bits() | A::REMOTE_READ.bits();

    fn statuses(o: &Option<outcome::Outcome>) -> Vec<u32> {
        o.as_ref().map(|o| o.wcs.iter().map(|c| c.status).collect()).unwrap_or_default()
    }

    #[test]
    fn a_window_answers_inside_its_range_and_rights_only() {
        let bind = MwStep::Bind { lo: 16, len: 32, rights: RW, wr: false };
        for type2 in [false, true] {
            let o = window(type2, &[bind, MwStep::Write { off: 16, len: 8 }, MwStep::Read { off: 40, len: 8 }]);
            assert_eq!(statuses(&o), [0, 0, 0]);
            let o = window(type2, &[bind, MwStep::Write { off: 44, len: 8 }]);
            assert_eq!(statuses(&o), [0, wc_status::REM_ACCESS_ERR]);
            // The responder is not looked at after the requester's remote error.
            assert_eq!(o.map(|o| o.states), Some(vec![6]));
            let read_only = MwStep::Bind { lo: 16, len: 32, rights: A::REMOTE_READ.bits(), wr: true };
            let o = window(type2, &[read_only, MwStep::Write { off: 16, len: 8 }]);
            assert_eq!(statuses(&o), [0, wc_status::REM_ACCESS_ERR]);
        }
        // Item 176: a bound type-2 window does not bind again; a type-1 one does.
        assert_eq!(statuses(&window(true, &[bind, bind])), [0, wc_status::MW_BIND_ERR]);
        assert_eq!(statuses(&window(false, &[bind, bind, MwStep::Write { off: 16, len: 1 }])), [0, 0, 0]);
        // Item 177: past the MR.
        let past = MwStep::Bind { lo: 40, len: 32, rights: RW, wr: false };
        assert_eq!(statuses(&window(false, &[past])), [wc_status::MW_BIND_ERR]);
        // Item 172: ZERO_BASED is refused before anything is posted.
        let zb = MwStep::Bind { lo: 0, len: 8, rights: A::ZERO_BASED.bits(), wr: false };
        assert_eq!(window(false, &[zb]).map(|o| (o.wcs.len(), o.bytes[3].1.clone())), Some((0, vec![0xff])));
    }

    #[test]
    fn invalidation_refuses_the_key_as_items_174_and_178_to_180_say() {
        let bind = MwStep::Bind { lo: 0, len: 64, rights: RW, wr: false };
        let write = MwStep::Write { off: 0, len: 4 };
        let refused = [0, 0, wc_status::REM_ACCESS_ERR];
        assert_eq!(statuses(&window(true, &[bind, MwStep::LocalInv, write])), refused);
        assert_eq!(statuses(&window(true, &[bind, MwStep::Dealloc, write])), [0, wc_status::REM_ACCESS_ERR]);
        let o = window(true, &[bind, MwStep::SendInv, write]);
        assert_eq!(statuses(&o), [0, 0, 0, wc_status::REM_ACCESS_ERR]);
        assert_eq!(o.map(|o| o.wcs[2].imm), Some(Some(1)));
        let o = window(true, &[bind, MwStep::LocalInv, bind, write]);
        assert_eq!(statuses(&o), [0, 0, 0, 0]);
        let unbind = MwStep::Bind { lo: 0, len: 0, rights: 0, wr: false };
        assert_eq!(statuses(&window(false, &[bind, unbind, write])), refused);
        assert_eq!(statuses(&window(false, &[bind, MwStep::SendInv])), [0, wc_status::REM_INV_REQ_ERR]);
        // Open in the docs: LOCAL_INV of a type-1 window, a type-1 window on another QP.
        assert!(window(false, &[bind, MwStep::LocalInv]).is_none());
        assert!(window(false, &[bind, MwStep::OtherQp { off: 0 }]).is_none());
        assert_eq!(statuses(&window(true, &[bind, MwStep::OtherQp { off: 8 }])), [0, wc_status::REM_ACCESS_ERR]);
    }

    /// [`connected`] with atomics, buffer 1's MR (slot 2) allowing them, a receive on QP 1.
    fn atomic_pair() -> Model {
        let mut m = connected().with_remote(true, false);
        for op in [
            Op::RegMr { pd: 0, buf: 1, off: 0, len: 64, access: 15 },
            Op::PostRecv { qp: 1, sge: Some(Loc { key: Key::Mr(1), off: 0, len: 8 }) },
        ] {
            assert_eq!(m.step(&op), Expect::Ok(None), "{op:?}");
        }
        m
    }

    fn op_atomic(remote: Key, roff: u32, len: u32, cas: bool, compare: u64, value: u64) -> Op {
        let local = Loc { key: Key::Mr(0), off: 16, len };
        post(&[Wr::Atomic { local, remote, roff, cas, compare, value, signaled: true }])
    }

    #[test]
    fn atomics_in_the_traffic_follow_items_121_to_126() {
        let mut m = atomic_pair();
        let at = |m: &Model, buf: usize, off: usize| m.buf_bytes(buf).map(|b| word(b, off));
        let before = at(&m, 1, 8);
        assert_eq!(m.step(&op_atomic(Key::Mr(2), 8, 8, false, 0, 3)), Expect::Ok(None));
        let c = m.effects().cqes[0].1;
        assert_eq!((c.status, c.opcode, c.byte_len), (0, Some(wc_opcode::FETCH_ADD), Some(8)));
        assert_eq!((at(&m, 0, 16), at(&m, 1, 8)), (before, before.map(|v| v.wrapping_add(3))));
        let now = before.map(|v| v.wrapping_add(3)).unwrap_or_default();
        assert_eq!(m.step(&op_atomic(Key::Mr(2), 8, 8, true, now, 1)), Expect::Ok(None));
        assert_eq!((at(&m, 0, 16), at(&m, 1, 8)), (Some(now), Some(1)));
        // Item 126: a 4-byte scatter entry; the responder untouched.
        assert_eq!(m.step(&op_atomic(Key::Mr(2), 8, 4, false, 0, 1)), Expect::Ok(None));
        assert_eq!(m.effects().cqes[0].1.status, wc_status::LOC_LEN_ERR);
        assert_eq!(m.step(&Op::QueryQp { qp: 1 }), Expect::Ok(Some(3)));
        // Item 124: misaligned; both QPs to ERR, the responder's receive flushed.
        let mut m = atomic_pair();
        assert_eq!(m.step(&op_atomic(Key::Mr(2), 4, 8, false, 0, 1)), Expect::Ok(None));
        let st: Vec<u32> = m.effects().cqes.iter().map(|c| c.1.status).collect();
        assert_eq!(st, [wc_status::WR_FLUSH_ERR, wc_status::REM_INV_REQ_ERR]);
        assert_eq!(
            (m.step(&Op::QueryQp { qp: 0 }), m.step(&Op::QueryQp { qp: 1 })),
            (Expect::Ok(Some(6)), Expect::Ok(Some(6)))
        );
        // Item 125: an MR without REMOTE_ATOMIC.
        let mut m = atomic_pair();
        assert_eq!(m.step(&op_atomic(Key::Mr(1), 8, 8, true, 0, 1)), Expect::Ok(None));
        assert_eq!(m.effects().cqes.last().map(|c| c.1.status), Some(wc_status::REM_ACCESS_ERR));
        // Misaligned into a key that refuses: which is reported is not published.
        assert_eq!(atomic_pair().step(&op_atomic(Key::Mr(1), 4, 8, true, 0, 1)), Expect::Unknown);
    }

    #[test]
    fn the_state_machine_draws_atomics_and_windows_now_and_then_where_the_device_has_them() {
        let count = |m: &Model| {
            let mut runner = TestRunner::deterministic();
            let s = strategy::transitions(m);
            let ops: Vec<Op> = (0..400).filter_map(|_| s.new_tree(&mut runner).ok()).map(|t| t.current()).collect();
            let n = |f: fn(&Op) -> bool| ops.iter().filter(|o| f(o)).count();
            (n(|o| matches!(o, Op::Atomic(_))), n(|o| matches!(o, Op::Mw(_))))
        };
        let (a, w) = count(&model().with_remote(true, true));
        assert!((1..40).contains(&a) && (1..40).contains(&w), "{a} atomics, {w} windows in 400");
        assert_eq!(count(&model()), (0, 0));
    }
}
