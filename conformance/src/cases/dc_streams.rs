//! DCI streams, `mlx5dv_map_ah_to_qp` and DC between processes (items 252–260): the caps the
//! device reports, a DCI made with streams, errors kept to their stream until
//! `mlx5dv_dci_stream_id_reset`, the AV-to-QP mapping, and a DC request taken from the network
//! in the simulator's own encoding.

use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, Field, opcode};
use mlx5_dv::{
    AccessFlags as A, Backend, DcInitAttr, Qp, QpInitAttr, QpState, RecvWr, SendWr, UdDest, wc_opcode, wc_status,
    wr_opcode,
};
use mlx5_sim::ShippedProfiles;
use mlx5_sim::packet::{Bth, DC_OPCODES, Dceth, Headers, opcode as op};
use mlx5_sim::wire::{Endpoints, encode};

use super::dc::{Dc, KEY, bring_up, dc_attr, dc_dest, make, streams_attr};
use super::devx::devx_ctx;
use super::fixture::*;
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_errno, expect_ok};

const NEEDS: &[Need] = &[Need::Mlx5Device];

pub(super) const CASES: &[Case] = &[
    Case {
        name: "dc.dci_streams_caps_match_the_caps_page",
        covers: &[252],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: caps_page,
    },
    Case { name: "dc.dci_streams_within_the_caps", covers: &[253], needs: NEEDS, run: create_streams },
    Case {
        name: "dc.stream_errors_stay_in_their_stream",
        covers: &[254, 255, 256, 257],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: errors,
    },
    Case {
        name: "dc.map_ah_to_qp_by_the_caps_bit",
        covers: &[258],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: map_ah,
    },
    Case {
        name: "dc.a_dct_takes_dc_requests_from_the_network",
        covers: &[259, 260],
        needs: &[Need::SimControl],
        run: network,
    },
];

/// `cmd_hca_cap.log_max_dci_stream_channels` and `log_max_dci_errored_streams` (UCX's
/// `ib_mlx5_ifc.h`).
const CHANNELS: Field = Field::new("log_max_dci_stream_channels", 0x58b, 5);
const ERRORED: Field = Field::new("log_max_dci_errored_streams", 0x593, 5);
/// `MLX5_OBJ_TYPE_AV_QP_MAPPING` in `general_obj_types`.
const GENERAL_OBJ_TYPES: Field = Field::new("general_obj_types", 0x400, 64);

/// The general capability page through DEVX.
fn caps(b: &mut dyn Backend, env: &Env) -> Check<Vec<u8>> {
    let ctx = devx_ctx(b, env)?;
    let q = prm::new_input(16, opcode::QUERY_HCA_CAP, 0, prm::query_hca_cap::OP_MOD_GENERAL_CUR);
    let out = expect_ok("QUERY_HCA_CAP (general)", b.devx_general_cmd(ctx, &q, prm::query_hca_cap::OUT_SIZE))?;
    expect_ok("ibv_close_device", b.close_device(ctx))?;
    Ok(out.get(prm::query_hca_cap::CAPABILITY_BYTE..).unwrap_or_default().to_vec())
}

fn field(page: &[u8], f: Field) -> Check<u64> {
    f.get(page).map_err(|e| Verdict::fail(f.name, "readable", e))
}

fn stream_caps(b: &mut dyn Backend, d: &Dc) -> Check<(u8, u8)> {
    let q = expect_ok("mlx5dv_query_device", b.query_device(d.ctx, mlx5_dv::MLX5DV_CONTEXT_MASK_DCI_STREAMS))?;
    check(
        "MLX5DV_CONTEXT_MASK_DCI_STREAMS answered",
        q.comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_DCI_STREAMS != 0,
        "set",
        q.comp_mask,
    )?;
    Ok((q.dci_streams_caps.max_log_num_concurent, q.dci_streams_caps.max_log_num_errored))
}

fn caps_page(b: &mut dyn Backend, env: &Env) -> Check {
    let page = caps(b, env)?;
    let d = make(b, env)?;
    let got = stream_caps(b, &d)?;
    let want = (field(&page, CHANNELS)? as u8, field(&page, ERRORED)? as u8);
    check_eq("dci_streams_caps (max_log_num_concurent, max_log_num_errored)", got, want)
}

fn dci(b: &mut dyn Backend, d: &Dc, concurent: u8, errored: u8) -> mlx5_dv::Result<Qp> {
    b.create_qp(&QpInitAttr {
        dv: Some(streams_attr(concurent, errored)),
        ..dc_attr(d.pd, &d.cq, None, DcInitAttr::dci())
    })
}

fn create_streams(b: &mut dyn Backend, env: &Env) -> Check {
    let d = make(b, env)?;
    let (c, e) = stream_caps(b, &d)?;
    expect_errno("streams past max_log_num_concurent", dci(b, &d, c.saturating_add(1), 0), EINVAL)?;
    expect_errno("errored streams past max_log_num_errored", dci(b, &d, 0, e.saturating_add(1)), EINVAL)?;
    if c == 0 {
        return expect_errno("DCI streams on a device without them", dci(b, &d, 0, 0), EOPNOTSUPP);
    }
    let q = expect_ok("a DCI with every stream the caps allow", dci(b, &d, c, e))?;
    expect_ok("ibv_destroy_qp", b.destroy_qp(&q))
}

/// One WR on `qp` towards the DCT, on `stream`, with `sge`: a SEND.
fn send_on(
    b: &mut dyn Backend,
    qp: &Qp,
    to: &mlx5_dv::QpDest,
    (wr_id, stream): (u64, u16),
    sge: mlx5_dv::Sge,
) -> Check {
    let dc = mlx5_dv::DcDest { stream_id: stream, ..dc_dest(to, KEY) };
    let w = SendWr {
        wr_id,
        opcode: wr_opcode::SEND,
        send_flags: mlx5_dv::SendFlags::SIGNALED,
        sge: vec![sge],
        dc: Some(dc),
        ..SendWr::default()
    };
    expect_ok("ibv_post_send on the DCI", b.post_send_wr(qp, &[w]))
}

fn errors(b: &mut dyn Backend, env: &Env) -> Check {
    let mut d = make(b, env)?;
    let (c, e) = stream_caps(b, &d)?;
    if c < 2 || e < 1 {
        return Err(Verdict::skip(format!("needs 4 DCI streams, 2 errored; dci_streams_caps is ({c}, {e})")));
    }
    // The DCI bring_up moves: one with 4 streams, 2 of which may be in error.
    let with = expect_ok("a DCI with streams", dci(b, &d, 2, 1))?;
    let plain = std::mem::replace(&mut d.dci, with);
    expect_ok("ibv_destroy_qp", b.destroy_qp(&plain))?;
    let to = bring_up(b, &d)?;
    let (_buf, good) = region(b, d.pd, 4096, &pattern(4096, 5), A::LOCAL_WRITE)?;
    let other = expect_ok("ibv_alloc_pd", b.alloc_pd(d.ctx))?;
    // An lkey of another PD: a local protection error at the DCI.
    let (_bad_buf, bad) = region(b, other, 4096, &pattern(4096, 6), A::LOCAL_WRITE)?;
    let (_rbuf, rmr) = region(b, d.pd, 4096, &[], A::LOCAL_WRITE)?;
    let recvs: Vec<_> = (0..8).map(|i| RecvWr { wr_id: 100 + i, sge: vec![sge(&rmr, i * 64, 64)] }).collect();
    expect_ok("ibv_post_srq_recv", b.post_srq_recv(&d.srq, &recvs))?;
    let state = |b: &mut dyn Backend, what: &str, want: QpState| {
        let s = expect_ok("ibv_query_qp of the DCI", b.query_qp_state(&d.dci))?;
        check_eq(what, s, want)
    };
    send_on(b, &d.dci, &to, (1, 1), sge(&bad, 0, 16))?;
    err_cqe(b, &d.cq, 1, wc_status::LOC_PROT_ERR)?;
    match b.sq_wqe(&d.dci, 0) {
        Err(e) if e.errno() == EOPNOTSUPP => {}
        r => {
            let w = expect_ok("read the send queue", r)?;
            let id = w.get(9..11).map(|s| u16::from_be_bytes([s[0], s[1]]));
            check_eq("the control segment's dci_stream_channel_id", id, Some(1))?;
        }
    }
    state(b, "the DCI after an error on stream 1", QpState::Rts)?;
    send_on(b, &d.dci, &to, (2, 1), sge(&good, 0, 16))?;
    err_cqe(b, &d.cq, 2, wc_status::WR_FLUSH_ERR)?;
    send_on(b, &d.dci, &to, (3, 2), sge(&good, 0, 16))?;
    let got: Vec<_> = poll(b, &d.cq, 2)?.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect::<Vec<_>>();
    let mut got = got;
    got.sort();
    let want = vec![(3, wc_status::SUCCESS, wc_opcode::SEND), (100, wc_status::SUCCESS, wc_opcode::RECV)];
    check_eq("stream 2's SEND and its receive at the DCT", got, want)?;
    let reset = |b: &mut dyn Backend, id: u16| b.dci_stream_id_reset(&d.dci, id);
    expect_errno("mlx5dv_dci_stream_id_reset of a stream not in error", reset(b, 3), EINVAL)?;
    expect_errno("mlx5dv_dci_stream_id_reset of a DCT", b.dci_stream_id_reset(&d.dct, 1), EOPNOTSUPP)?;
    expect_ok("mlx5dv_dci_stream_id_reset of stream 1", reset(b, 1))?;
    send_on(b, &d.dci, &to, (4, 1), sge(&good, 0, 16))?;
    let got: Vec<_> = poll(b, &d.cq, 2)?.iter().map(|w| (w.wr_id, w.status)).collect();
    let mut got = got;
    got.sort();
    check_eq("stream 1 after its reset", got, vec![(4, wc_status::SUCCESS), (101, wc_status::SUCCESS)])?;
    // Two streams in error of 2^1: the second error takes the whole DCI to ERR.
    send_on(b, &d.dci, &to, (5, 1), sge(&bad, 0, 16))?;
    err_cqe(b, &d.cq, 5, wc_status::LOC_PROT_ERR)?;
    state(b, "the DCI with one stream in error", QpState::Rts)?;
    send_on(b, &d.dci, &to, (6, 2), sge(&bad, 0, 16))?;
    err_cqe(b, &d.cq, 6, wc_status::LOC_PROT_ERR)?;
    state(b, "the DCI once 2^log_num_errored streams are in error", QpState::Err)?;
    send_on(b, &d.dci, &to, (7, 3), sge(&good, 0, 16))?;
    err_cqe(b, &d.cq, 7, wc_status::WR_FLUSH_ERR)?;
    expect_errno("mlx5dv_dci_stream_id_reset of a DCI in ERR", reset(b, 1), EOPNOTSUPP)
}

fn map_ah(b: &mut dyn Backend, env: &Env) -> Check {
    let page = caps(b, env)?;
    let has = field(&page, GENERAL_OBJ_TYPES)? & 1 << prm::obj_type::AV_QP_MAPPING != 0;
    let d = make(b, env)?;
    let to = dest(b, d.ctx, &d.dct)?;
    let global = UdDest { is_global: true, ..dc_dest(&to, KEY).av };
    let r = b.map_ah_to_qp(d.ctx, &global, d.dct.qp_num);
    if !has {
        return expect_errno("mlx5dv_map_ah_to_qp without AV_QP_MAPPING", r, EOPNOTSUPP);
    }
    if !env.caps.sim_control && matches!(&r, Err(e) if e.errno() == EOPNOTSUPP) {
        return Err(Verdict::skip("the backend does not forward mlx5dv_map_ah_to_qp"));
    }
    expect_ok("mlx5dv_map_ah_to_qp of an AH with a GRH", r)?;
    let local = UdDest { is_global: false, ..global };
    expect_errno("mlx5dv_map_ah_to_qp of an AH without a GRH", b.map_ah_to_qp(d.ctx, &local, d.dct.qp_num), EOPNOTSUPP)
}

/// A DC SEND Only from `from` to DCT `dct` of `to` with `key`, from DCI number 0x4242.
fn dc_send(from: Ipv4Addr, to: Ipv4Addr, dct: u32, key: u64, psn: u32) -> Check<Vec<u8>> {
    let h = Headers {
        bth: Bth { opcode: op::SEND_ONLY, pkey: 0xffff, dest_qp: dct, ack_req: true, psn, ..Bth::default() },
        dc: Some(Dceth { key, src_qp: 0x4242, ..Dceth::default() }),
        ..Headers::default()
    };
    let ep = Endpoints::new(IpAddr::V4(from), IpAddr::V4(to), 0xc000);
    encode(&h, &[0xab; 32], &ep).map_err(|e| Verdict::fail("encode a DC request", "bytes", e))
}

fn network(_b: &mut dyn Backend, _env: &Env) -> Check {
    // The encoding: RC's opcode plus 0xc0, then the DCETH (key, DCI number, 4 reserved bytes).
    let h = Headers {
        bth: Bth { opcode: op::SEND_ONLY, dest_qp: 0x123, ..Bth::default() },
        dc: Some(Dceth { key: 0x1122_3344_5566_7788, src_qp: 0xab_cdef, ..Dceth::default() }),
        ..Headers::default()
    };
    let mut bytes = Vec::new();
    h.encode(&mut bytes);
    check_eq("a DC SEND Only's opcode", bytes.first().copied(), Some(DC_OPCODES | op::SEND_ONLY))?;
    check_eq(
        "the DCETH after the BTH",
        bytes.get(12..28),
        Some(&[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0, 0xab, 0xcd, 0xef, 0, 0, 0, 0][..]),
    )?;
    check_eq("headers and DCETH read back", Headers::decode(&bytes), Some((h, 28)))?;
    let profile = mlx5_sim::Profile::builtin("cx6dx").map_err(|e| Verdict::fail("cx6dx", "a profile", e))?;
    let mut sim = mlx5_sim::Simulator::new(profile).map_err(|e| Verdict::fail("a simulator", "one", e))?;
    sim.carry_in_memory();
    let to = sim.fabric().net_port(0).map(|p| p.addr()).ok_or_else(|| Verdict::fail("port 0", "networked", "not"))?;
    let b: &mut dyn Backend = &mut sim;
    let env = Env::probe(b);
    let d = make(b, &env)?;
    bring_up(b, &d)?;
    let (rbuf, rmr) = region(b, d.pd, 64, &[], A::LOCAL_WRITE)?;
    expect_ok("ibv_post_srq_recv", b.post_srq_recv(&d.srq, &[RecvWr { wr_id: 9, sge: vec![sge(&rmr, 0, 64)] }]))?;
    let from = SocketAddrV4::new(Ipv4Addr::new(127, 0, 36, 3), 0xc000);
    let drops = sim.network_drops();
    let wrong = dc_send(*from.ip(), to, d.dct.qp_num, KEY ^ 1, 5)?;
    sim.receive_datagram(0, from, &wrong);
    let after = sim.network_drops();
    check_eq(
        "a DC request with another key: dropped and counted",
        after.first().copied(),
        drops.first().map(|n| n + 1),
    )?;
    let to_dci = dc_send(*from.ip(), to, d.dci.qp_num, KEY, 5)?;
    check("a DC request to a QP that is no DCT is dropped", !sim.receive_datagram(0, from, &to_dci), "false", true)?;
    let b: &mut dyn Backend = &mut sim;
    no_cqe(b, &d.cq)?;
    let good = dc_send(*from.ip(), to, d.dct.qp_num, KEY, 7)?;
    check("a DC request with the DCT's key is taken", sim.receive_datagram(0, from, &good), "true", false)?;
    let b: &mut dyn Backend = &mut sim;
    let wcs = poll(b, &d.cq, 1)?;
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode, w.qp_num, w.byte_len)).collect();
    check_eq("the DCT's receive", got, vec![(9, wc_status::SUCCESS, wc_opcode::RECV, d.dct.qp_num, 32)])?;
    check_eq("the SEND's bytes", contents(b, &rbuf)?.get(..32).map(<[u8]>::to_vec), Some(vec![0xab; 32]))?;
    Ok(())
}
