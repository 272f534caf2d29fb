//! Receive WQs, indirection tables and RSS QPs (items 223–229): `ibv_create_wq`'s and
//! `ibv_modify_wq`'s checks and the RQ's states, what holds a WQ or a table, the table's size
//! checks, an RSS QP's checks, and frames steered to an RSS QP landing on the WQ the Toeplitz
//! hash of their addresses picks (computed here by a reference of the case's own); a DEVX TIR
//! over a WQ (item 302).

use mlx5_dv::errno::{EBUSY, EINVAL, EIO, ENOSYS, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags, Backend, ContextHandle, Cq, CqHandle, DvQpCreateFlags, DvQpInitAttr, DvSendOpsFlags, PdHandle, Qp,
    QpCap, QpInitAttr, QpModify, QpState, RecvWr, RwqIndTable, RwqIndTableInitAttr, RxHashConf, Wq, WqAttr, WqInitAttr,
    dv_qp, qp_init_mask, qp_type, rx_hash_fields as f, wc_opcode, wc_status, wq_attr_mask as wm, wq_flags,
    wq_init_mask, wq_state,
};

use super::fixture::{err_cqe, no_cqe, ok_cqe, open, region, sge};
use super::raw::{FRAME_LEN, frame_bytes, mac_spec, needs_raw, raw_side, send_frame};
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device];

pub(super) const CASES: &[Case] = &[
    Case { name: "wq.create_checks_and_errno", covers: &[223], needs: NEEDS, run: create },
    Case { name: "wq.modify_follows_the_rq_states", covers: &[224], needs: NEEDS, run: modify },
    Case { name: "wq.a_wq_or_table_in_use_is_ebusy", covers: &[225], needs: NEEDS, run: busy },
    Case { name: "wq.ind_table_size_checks", covers: &[226], needs: NEEDS, run: table },
    Case { name: "rss.create_checks_and_errno", covers: &[227], needs: NEEDS, run: rss_checks },
    Case { name: "rss.a_frame_lands_on_the_wq_its_hash_picks", covers: &[228], needs: NEEDS, run: spread },
    Case { name: "wq.only_a_ready_wq_takes_frames", covers: &[229], needs: NEEDS, run: ready_only },
    Case {
        name: "tir.a_direct_tir_names_a_receive_wq",
        covers: &[302],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: devx_tir,
    },
];

/// The Toeplitz key rdma-core's RSS test uses (Microsoft's sample key).
const KEY: [u8; 40] = [
    0x2c, 0xc6, 0x81, 0xd1, 0x5b, 0xdb, 0xf4, 0xf7, 0xfc, 0xa2, 0x83, 0x19, 0xdb, 0x1a, 0x3e, 0x94, 0x6b, 0x9e, 0x38,
    0xd9, 0x2c, 0x9c, 0x03, 0xd1, 0xad, 0x99, 0x44, 0xa7, 0xd9, 0x56, 0x3d, 0x59, 0x06, 0x3c, 0x25, 0xf3, 0xfc, 0x1f,
    0xdc, 0x2a,
];

/// The hash, bit by bit as the specification states it: for input bit `i` set, the key's bits
/// `i .. i + 32` are XORed into the result.
fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let key_bit = |n: usize| key.get(n / 8).is_some_and(|b| b & (0x80 >> (n % 8)) != 0);
    let mut h = 0u32;
    for i in 0..input.len() * 8 {
        if input[i / 8] & (0x80 >> (i % 8)) != 0 {
            h ^= (0..32).fold(0u32, |w, j| (w << 1) | u32::from(key_bit(i + j)));
        }
    }
    h
}

/// A context of its own with a PD and a CQ, on a device with raw packet QPs.
fn side(b: &mut dyn Backend, env: &Env) -> Check<(ContextHandle, PdHandle, Cq)> {
    needs_raw(env)?;
    open(b, env.dev()?)
}

/// A WQ of 16 WRs of 2 SGEs; a skip on a backend without WQs.
fn wq(b: &mut dyn Backend, pd: PdHandle, cq: &Cq) -> Check<Wq> {
    match b.create_wq(&WqInitAttr::rq(pd, cq.handle, 16, 2)) {
        Err(e) if e.errno() == EOPNOTSUPP => Err(Verdict::skip("the backend has no receive WQs")),
        r => expect_ok("ibv_create_wq", r),
    }
}

fn table(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = side(b, env)?;
    let w = wq(b, pd, &cq)?;
    let attr =
        |log: u32, n: usize| RwqIndTableInitAttr { ctx, log_ind_tbl_size: log, wqs: vec![w.handle; n], comp_mask: 0 };
    expect_errno("comp_mask 1", b.create_rwq_ind_table(&RwqIndTableInitAttr { comp_mask: 1, ..attr(0, 1) }), EINVAL)?;
    expect_errno("log_ind_tbl_size 14, past uverbs' 13", b.create_rwq_ind_table(&attr(14, 1 << 14)), EINVAL)?;
    expect_errno("log_ind_tbl_size 13, past log_max_rqt_size", b.create_rwq_ind_table(&attr(13, 1 << 13)), EINVAL)?;
    expect_errno("three WQs for a table of four", b.create_rwq_ind_table(&attr(2, 3)), EINVAL)?;
    let one = expect_ok("a table of one WQ", b.create_rwq_ind_table(&attr(0, 1)))?;
    let eight = expect_ok("a table of one WQ eight times", b.create_rwq_ind_table(&attr(3, 8)))?;
    for t in [one, eight] {
        expect_ok("ibv_destroy_rwq_ind_table", b.destroy_rwq_ind_table(&t))?;
    }
    expect_errno("ibv_destroy_rwq_ind_table again", b.destroy_rwq_ind_table(&one), EINVAL)?;
    expect_ok("ibv_destroy_wq", b.destroy_wq(&w))?;
    expect_errno("a table of a destroyed WQ", b.create_rwq_ind_table(&attr(0, 1)), EINVAL)?;
    Ok(())
}

fn create(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, cq) = side(b, env)?;
    let w = wq(b, pd, &cq)?;
    check_eq("max_wr and max_sge written back", (w.max_wr, w.max_sge), (16, 2))?;
    let ok = WqInitAttr::rq(pd, cq.handle, 16, 2);
    let bad = |f: fn(&mut WqInitAttr)| {
        let mut a = ok;
        f(&mut a);
        a
    };
    expect_errno("wq_type 1 (NULL, errno not set)", b.create_wq(&bad(|a| a.wq_type = 1)), EIO)?;
    expect_errno("max_wr 0", b.create_wq(&bad(|a| a.max_wr = 0)), EINVAL)?;
    expect_errno("5000 SGEs, past max_rq_desc_sz", b.create_wq(&bad(|a| a.max_sge = 5000)), EINVAL)?;
    expect_errno("comp_mask 2", b.create_wq(&bad(|a| a.comp_mask = 2)), EINVAL)?;
    let reserved = bad(|a| {
        a.comp_mask = wq_init_mask::FLAGS;
        a.create_flags = wq_flags::RESERVED;
    });
    expect_errno("create_flags IBV_WQ_FLAGS_RESERVED", b.create_wq(&reserved), EOPNOTSUPP)?;
    let delay = bad(|a| {
        a.comp_mask = wq_init_mask::FLAGS;
        a.create_flags = wq_flags::DELAY_DROP;
    });
    expect_errno("IBV_WQ_FLAGS_DELAY_DROP", b.create_wq(&delay), EOPNOTSUPP)?;
    expect_errno("max_wr 2^25, past log_max_wq_sz", b.create_wq(&bad(|a| a.max_wr = 1 << 25)), EINVAL)?;
    let strip = bad(|a| {
        a.comp_mask = wq_init_mask::FLAGS;
        a.create_flags = wq_flags::CVLAN_STRIPPING;
    });
    let w2 = expect_ok("ibv_create_wq with CVLAN stripping", b.create_wq(&strip))?;
    check("two WQs, two numbers", w2.wq_num != w.wq_num, "different", (w.wq_num, w2.wq_num))?;
    let (_, mr) = region(b, pd, 256, &[], AccessFlags::LOCAL_WRITE)?;
    let wr = |n: usize| RecvWr { wr_id: 1, sge: (0..n).map(|i| sge(&mr, 32 * i as u64, 32)).collect() };
    expect_ok("ibv_post_wq_recv in RESET", b.post_wq_recv(&w, &[wr(2)]))?;
    expect_errno("three SGEs on a WQ of two", b.post_wq_recv(&w, &[wr(3)]), EINVAL)?;
    for q in [w, w2] {
        expect_ok("ibv_destroy_wq", b.destroy_wq(&q))?;
    }
    expect_errno("ibv_destroy_wq again", b.destroy_wq(&w), EINVAL)?;
    no_cqe(b, &cq)
}

fn modify(b: &mut dyn Backend, env: &Env) -> Check {
    let (_, pd, cq) = side(b, env)?;
    let w = wq(b, pd, &cq)?;
    let to = WqAttr::to;
    let from = |cur: u32, next: u32| WqAttr {
        attr_mask: wm::STATE | wm::CURR_STATE,
        wq_state: next,
        curr_wq_state: cur,
        ..WqAttr::default()
    };
    let flags = |mask: u32, on: u32| WqAttr { attr_mask: wm::FLAGS, flags: on, flags_mask: mask, ..WqAttr::default() };
    expect_errno("attr_mask 0", b.modify_wq(&w, &WqAttr::default()), EINVAL)?;
    expect_errno(
        "attr_mask IBV_WQ_ATTR_RESERVED",
        b.modify_wq(&w, &WqAttr { attr_mask: wm::RESERVED, ..to(1) }),
        EINVAL,
    )?;
    expect_errno("to RDY from a curr_wq_state of RDY", b.modify_wq(&w, &from(wq_state::RDY, wq_state::RDY)), EINVAL)?;
    expect_errno("to ERR from a curr_wq_state of RDY", b.modify_wq(&w, &from(wq_state::RDY, wq_state::ERR)), EINVAL)?;
    expect_errno("RESET to ERR", b.modify_wq(&w, &to(wq_state::ERR)), EINVAL)?;
    expect_errno("flags_mask IBV_WQ_FLAGS_RESERVED", b.modify_wq(&w, &flags(wq_flags::RESERVED, 0)), EOPNOTSUPP)?;
    let pad = flags(wq_flags::PCI_WRITE_END_PADDING, wq_flags::PCI_WRITE_END_PADDING);
    expect_errno("changing PCI_WRITE_END_PADDING", b.modify_wq(&w, &pad), EOPNOTSUPP)?;
    expect_ok("RESET to RDY, curr_wq_state RESET", b.modify_wq(&w, &from(wq_state::RESET, wq_state::RDY)))?;
    let strip = flags(wq_flags::CVLAN_STRIPPING, wq_flags::CVLAN_STRIPPING);
    expect_ok("CVLAN stripping on, in RDY", b.modify_wq(&w, &strip))?;
    expect_ok("RDY to ERR", b.modify_wq(&w, &to(wq_state::ERR)))?;
    expect_errno("ERR to RDY", b.modify_wq(&w, &to(wq_state::RDY)), EINVAL)?;
    expect_ok("ERR to RESET", b.modify_wq(&w, &to(wq_state::RESET)))?;
    expect_ok("RESET to RDY", b.modify_wq(&w, &to(wq_state::RDY)))?;
    expect_ok("RDY to RESET", b.modify_wq(&w, &to(wq_state::RESET)))?;
    expect_ok("ibv_destroy_wq", b.destroy_wq(&w))
}

/// An RSS QP's attributes: Toeplitz over the IPv4 addresses through `t`, no CQs (a handle
/// no CQ has: NULL).
fn rss_attr(pd: PdHandle, t: &RwqIndTable) -> QpInitAttr {
    let none = CqHandle::new(pd.backend(), u32::MAX);
    QpInitAttr {
        send_cq: none,
        recv_cq: none,
        qp_type: qp_type::RAW_PACKET,
        comp_mask: Some(
            qp_init_mask::PD | qp_init_mask::CREATE_FLAGS | qp_init_mask::RX_HASH | qp_init_mask::IND_TABLE,
        ),
        send_ops_flags: Default::default(),
        rx_hash: Some(RxHashConf::toeplitz(KEY, f::SRC_IPV4 | f::DST_IPV4)),
        ind_table: Some(t.handle),
        ..QpInitAttr::rc(pd, none, QpCap::default(), None)
    }
}

/// `n` WQs in RDY completing on `cqs` in turn, and a table of them.
fn ready_wqs(
    b: &mut dyn Backend,
    ctx: ContextHandle,
    pd: PdHandle,
    cqs: &[&Cq],
    log: u32,
) -> Check<(Vec<Wq>, RwqIndTable)> {
    let mut wqs = Vec::new();
    for i in 0..1usize << log {
        let w = wq(b, pd, cqs[i % cqs.len()])?;
        expect_ok("RESET to RDY", b.modify_wq(&w, &WqAttr::to(wq_state::RDY)))?;
        wqs.push(w);
    }
    let attr =
        RwqIndTableInitAttr { ctx, log_ind_tbl_size: log, wqs: wqs.iter().map(|w| w.handle).collect(), comp_mask: 0 };
    let t = expect_ok("ibv_create_rwq_ind_table", b.create_rwq_ind_table(&attr))?;
    Ok((wqs, t))
}

fn busy(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = side(b, env)?;
    let (wqs, t) = ready_wqs(b, ctx, pd, &[&cq], 1)?;
    expect_errno("ibv_destroy_wq of a WQ in a table", b.destroy_wq(&wqs[0]), EBUSY)?;
    let qp = expect_ok("an RSS QP", b.create_qp(&rss_attr(pd, &t)))?;
    expect_errno("ibv_destroy_rwq_ind_table under an RSS QP", b.destroy_rwq_ind_table(&t), EBUSY)?;
    expect_ok("ibv_destroy_qp", b.destroy_qp(&qp))?;
    expect_ok("ibv_destroy_rwq_ind_table", b.destroy_rwq_ind_table(&t))?;
    for w in wqs {
        expect_ok("ibv_destroy_wq", b.destroy_wq(&w))?;
    }
    Ok(())
}

fn rss_checks(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = side(b, env)?;
    let (wqs, t) = ready_wqs(b, ctx, pd, &[&cq], 1)?;
    let ok = rss_attr(pd, &t);
    let bad = |f: fn(&mut QpInitAttr)| {
        let mut a = ok;
        f(&mut a);
        a
    };
    let hash = |f: fn(&mut RxHashConf)| {
        let mut a = ok;
        if let Some(h) = a.rx_hash.as_mut() {
            f(h);
        }
        a
    };
    expect_errno("a UD RSS QP", b.create_qp(&bad(|a| a.qp_type = qp_type::UD)), EOPNOTSUPP)?;
    expect_errno("a send queue", b.create_qp(&bad(|a| a.cap.max_send_wr = 1)), EINVAL)?;
    expect_errno("a receive queue", b.create_qp(&bad(|a| a.cap.max_recv_wr = 1)), EINVAL)?;
    expect_errno("a receive CQ", b.create_qp(&QpInitAttr { recv_cq: cq.handle, ..ok }), EINVAL)?;
    expect_errno(
        "create_flags",
        b.create_qp(&bad(|a| a.create_flags = mlx5_dv::qp_create_flags::CVLAN_STRIPPING)),
        EINVAL,
    )?;
    let no_table = bad(|a| a.comp_mask = Some(qp_init_mask::PD | qp_init_mask::RX_HASH));
    expect_errno("RX_HASH without IND_TABLE", b.create_qp(&no_table), EINVAL)?;
    let with_ops = bad(|a| a.comp_mask = a.comp_mask.map(|m| m | qp_init_mask::SEND_OPS_FLAGS));
    expect_errno("RX_HASH with SEND_OPS_FLAGS", b.create_qp(&with_ops), EINVAL)?;
    expect_errno("a 129-byte key", b.create_qp(&hash(|h| h.key_len = 129)), EINVAL)?;
    expect_errno("a 16-byte key", b.create_qp(&hash(|h| h.key_len = 16)), EINVAL)?;
    expect_errno("hash function 2", b.create_qp(&hash(|h| h.function = 2)), EOPNOTSUPP)?;
    expect_errno("no fields over two WQs", b.create_qp(&hash(|h| h.fields_mask = 0)), EINVAL)?;
    expect_errno("IPv4 and IPv6 fields", b.create_qp(&hash(|h| h.fields_mask = f::SRC_IPV4 | f::DST_IPV6)), EINVAL)?;
    let two_l4 = hash(|h| h.fields_mask = f::SRC_PORT_TCP | f::DST_PORT_UDP);
    expect_errno("TCP and UDP fields", b.create_qp(&two_l4), EINVAL)?;
    let inner = hash(|h| h.fields_mask |= f::INNER);
    expect_errno("inner fields without tunnel offloads", b.create_qp(&inner), EOPNOTSUPP)?;
    let tunnel = DvQpInitAttr {
        comp_mask: dv_qp::MASK_QP_CREATE_FLAGS,
        ..DvQpInitAttr::new(DvQpCreateFlags::TUNNEL_OFFLOADS, DvSendOpsFlags::empty())
    };
    let qp_inner =
        expect_ok("inner fields with tunnel offloads", b.create_qp(&QpInitAttr { dv: Some(tunnel), ..inner }))?;
    let qp = expect_ok("an RSS QP", b.create_qp(&ok))?;
    expect_errno("ibv_modify_qp of an RSS QP", b.modify_qp(&qp, &QpModify::to(QpState::Init)), ENOSYS)?;
    expect_errno("ibv_query_qp of an RSS QP", b.query_qp_state(&qp), ENOSYS)?;
    let one = RwqIndTableInitAttr { ctx, log_ind_tbl_size: 0, wqs: vec![wqs[0].handle], comp_mask: 0 };
    let t1 = expect_ok("a table of one WQ", b.create_rwq_ind_table(&one))?;
    let plain = QpInitAttr { ind_table: Some(t1.handle), ..hash(|h| h.fields_mask = 0) };
    let qp_plain = expect_ok("no fields over one WQ", b.create_qp(&plain))?;
    for q in [qp, qp_inner, qp_plain] {
        expect_ok("ibv_destroy_qp", b.destroy_qp(&q))?;
    }
    for t in [t, t1] {
        expect_ok("ibv_destroy_rwq_ind_table", b.destroy_rwq_ind_table(&t))?;
    }
    for w in wqs {
        expect_ok("ibv_destroy_wq", b.destroy_wq(&w))?;
    }
    Ok(())
}

/// The frame with source address `src` (its other bytes [`frame_bytes`]'s).
fn frame_from(src: [u8; 4]) -> Vec<u8> {
    let mut fr = frame_bytes(9);
    fr[26..30].copy_from_slice(&src);
    fr
}

/// The receiving side: 8 WQs on two CQs, each with 4 frame buffers posted, an RSS QP over
/// them with a rule for [`mac_spec`].
struct RssSide {
    cqs: [Cq; 2],
    wqs: Vec<Wq>,
    table: RwqIndTable,
    qp: Qp,
    flow: mlx5_dv::Flow,
    mr: mlx5_dv::Mr,
}

fn rss_side(b: &mut dyn Backend, env: &Env, log: u32) -> Check<RssSide> {
    let (ctx, pd, cq0) = side(b, env)?;
    let cq1 = expect_ok("ibv_create_cq", b.create_cq(ctx, 64))?;
    let (wqs, table) = ready_wqs(b, ctx, pd, &[&cq0, &cq1], log)?;
    let (_, mr) = region(b, pd, wqs.len() * 4 * FRAME_LEN, &[], AccessFlags::LOCAL_WRITE)?;
    for (i, w) in wqs.iter().enumerate() {
        let wrs: Vec<RecvWr> = (0..4)
            .map(|n| RecvWr {
                wr_id: (i as u64) << 8 | n,
                sge: vec![sge(&mr, ((i * 4 + n as usize) * FRAME_LEN) as u64, FRAME_LEN as u32)],
            })
            .collect();
        expect_ok("ibv_post_wq_recv", b.post_wq_recv(w, &wrs))?;
    }
    let qp = expect_ok("an RSS QP", b.create_qp(&rss_attr(pd, &table)))?;
    let flow = expect_ok(
        "ibv_create_flow to the RSS QP",
        b.create_flow(&qp, &mlx5_dv::FlowAttr::normal(0, vec![mac_spec()])),
    )?;
    Ok(RssSide { cqs: [cq0, cq1], wqs, table, qp, flow, mr })
}

fn teardown(b: &mut dyn Backend, s: RssSide) -> Check {
    expect_ok("ibv_destroy_flow", b.destroy_flow(&s.flow))?;
    expect_ok("ibv_destroy_qp", b.destroy_qp(&s.qp))?;
    expect_ok("ibv_destroy_rwq_ind_table", b.destroy_rwq_ind_table(&s.table))?;
    for w in s.wqs {
        expect_ok("ibv_destroy_wq", b.destroy_wq(&w))?;
    }
    Ok(())
}

fn spread(b: &mut dyn Backend, env: &Env) -> Check {
    let tx = raw_side(b, env)?;
    let rx = rss_side(b, env, 3)?;
    let mut taken = [0u64; 8];
    for (n, first) in (1u8..=12).enumerate() {
        let src = [first, first + 1, first + 2, first + 3];
        let mut input = src.to_vec();
        input.extend_from_slice(&frame_from(src)[30..34]);
        let at = toeplitz(&KEY, &input) as usize & 7;
        if taken[at] == 4 {
            continue;
        }
        send_frame(b, &tx, &frame_from(src), n as u64)?;
        let wc = ok_cqe(b, &rx.cqs[at % 2], (at as u64) << 8 | taken[at], wc_opcode::RECV)?;
        check_eq("the completion's WQ number", wc.qp_num, rx.wqs[at].wq_num)?;
        check_eq("byte_len: the frame's", wc.byte_len, FRAME_LEN as u32)?;
        no_cqe(b, &rx.cqs[1 - at % 2])?;
        taken[at] += 1;
    }
    let used = taken.iter().filter(|n| **n > 0).count();
    check("the WQs the twelve sources hash to", used >= 2, "at least two", taken)?;
    teardown(b, rx)
}

fn ready_only(b: &mut dyn Backend, env: &Env) -> Check {
    let tx = raw_side(b, env)?;
    let rx = rss_side(b, env, 0)?;
    let (w, cq) = (rx.wqs[0], &rx.cqs[0]);
    let one = |wr_id: u64| RecvWr { wr_id, sge: vec![sge(&rx.mr, 0, FRAME_LEN as u32)] };
    expect_ok("RDY to RESET", b.modify_wq(&w, &WqAttr::to(wq_state::RESET)))?;
    send_frame(b, &tx, &frame_from([1, 2, 3, 4]), 1)?;
    no_cqe(b, cq)?;
    expect_ok("RESET to RDY", b.modify_wq(&w, &WqAttr::to(wq_state::RDY)))?;
    send_frame(b, &tx, &frame_from([1, 2, 3, 4]), 2)?;
    // RESET to RDY starts the ring over: the receives posted before are gone.
    no_cqe(b, cq)?;
    expect_ok("ibv_post_wq_recv", b.post_wq_recv(&w, &[one(0x77)]))?;
    send_frame(b, &tx, &frame_from([1, 2, 3, 4]), 3)?;
    let wc = ok_cqe(b, cq, 0x77, wc_opcode::RECV)?;
    check_eq("the completion's WQ number", wc.qp_num, w.wq_num)?;
    expect_ok("ibv_post_wq_recv", b.post_wq_recv(&w, &[one(0x78)]))?;
    expect_ok("RDY to ERR", b.modify_wq(&w, &WqAttr::to(wq_state::ERR)))?;
    err_cqe(b, cq, 0x78, wc_status::WR_FLUSH_ERR)?;
    send_frame(b, &tx, &frame_from([1, 2, 3, 4]), 4)?;
    no_cqe(b, cq)?;
    teardown(b, rx)
}

/// A CREATE_TIR input: a TIR of `disp_type` to RQ `rqn`.
fn tir_input(disp_type: u64, rqn: u32) -> Vec<u8> {
    use mlx5_dv::prm::{self, tir};
    let mut i = prm::new_input(tir::CREATE_IN_SIZE, tir::CREATE, 0, 0);
    let _ = tir::DISP_TYPE.set(&mut i, disp_type);
    let _ = tir::INLINE_RQN.set(&mut i, u64::from(rqn));
    i
}

fn devx_tir(b: &mut dyn Backend, env: &Env) -> Check {
    use mlx5_dv::errno::EREMOTEIO;
    use mlx5_dv::prm::{status, tir};
    needs_raw(env)?;
    let ctx = super::devx::devx_ctx(b, env)?;
    let pd = expect_ok("ibv_alloc_pd", b.alloc_pd(ctx))?;
    let cq = expect_ok("ibv_create_cq", b.create_cq(ctx, 16))?;
    let w = wq(b, pd, &cq)?;
    let mut tirs = Vec::new();
    for what in ["a direct TIR over the WQ", "a second TIR over the same WQ"] {
        let t = expect_ok(what, b.devx_obj_create(ctx, &tir_input(tir::disp::DIRECT, w.wq_num), tir::CREATE_OUT_SIZE))?;
        check_eq("CREATE_TIR's status", t.out.first().copied(), Some(status::OK))?;
        tirs.push((t.handle, tir::TIRN.get(&t.out).unwrap_or(0)));
    }
    check("two TIRs, two numbers", tirs[0].1 != tirs[1].1, "different tirn", &tirs)?;
    let none = w.wq_num ^ 0x80_0000;
    let got = b.devx_obj_create(ctx, &tir_input(tir::disp::DIRECT, none), tir::CREATE_OUT_SIZE);
    expect_errno("a direct TIR over no RQ", got.map(|_| ()), EREMOTEIO)?;
    for (h, _) in tirs {
        expect_ok("DESTROY_TIR", b.devx_obj_destroy(h))?;
    }
    expect_ok("ibv_destroy_wq", b.destroy_wq(&w))?;
    Ok(())
}

/// `mlx5dv_dr`'s TIR destination (item 313): frames from a source of their own reach a
/// receive WQ through a DEVX TIR over it, named by a software table's rule of domain `d`.
pub(super) fn tir_destination(
    b: &mut dyn Backend,
    ctx: ContextHandle,
    d: &mlx5_dv::DrDomain,
    tx: &super::raw::RawSide,
) -> Check {
    use mlx5_dv::DrActionAttr as A;
    use mlx5_dv::prm::tir;
    let pd = expect_ok("ibv_alloc_pd", b.alloc_pd(ctx))?;
    let cq = expect_ok("ibv_create_cq", b.create_cq(ctx, 16))?;
    let w = wq(b, pd, &cq)?;
    expect_ok("RESET to RDY", b.modify_wq(&w, &WqAttr::to(wq_state::RDY)))?;
    let t = expect_ok(
        "a TIR over the WQ",
        b.devx_obj_create(ctx, &tir_input(tir::disp::DIRECT, w.wq_num), tir::CREATE_OUT_SIZE),
    )?;
    let (_, mr) = region(b, pd, 2 * FRAME_LEN, &[], AccessFlags::LOCAL_WRITE)?;
    let wr = RecvWr { wr_id: 77, sge: vec![sge(&mr, 0, 2 * FRAME_LEN as u32)] };
    expect_ok("ibv_post_wq_recv", b.post_wq_recv(&w, &[wr]))?;
    let src = [0x02, 0, 0, 0, 0, 0x0b];
    let value = [&src[..], &[0, 0]].concat();
    let mask = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0];
    let root = expect_ok("a root table", b.dr_table_create(d, 0))?;
    let t1 = expect_ok("a software table", b.dr_table_create(d, 1))?;
    let rm = expect_ok("a root matcher", b.dr_matcher_create(&root, 0, 1, &mask))?;
    let goto = expect_ok("a table action", b.dr_action_create(&A::DestTable(t1)))?;
    expect_ok("the root rule", b.dr_rule_create(&rm, &value, &[goto]))?;
    let m = expect_ok("a matcher", b.dr_matcher_create(&t1, 0, 1, &mask))?;
    let to_tir = expect_ok("mlx5dv_dr_action_create_dest_devx_tir", b.dr_action_create(&A::DestTir(t.handle)))?;
    expect_ok("the TIR rule", b.dr_rule_create(&m, &value, &[to_tir]))?;
    let mut f = super::raw::frame_bytes(9);
    f[6..12].copy_from_slice(&src);
    super::raw::send_frame(b, tx, &f, 99)?;
    let wc = ok_cqe(b, &cq, 77, wc_opcode::RECV)?;
    check_eq("the completion's WQ number", wc.qp_num, w.wq_num)?;
    check_eq("byte_len: the frame's", wc.byte_len, FRAME_LEN as u32)
}
