//! On-demand paging and DC (items 304–305): `mlx5dv_query_device`'s `dc_odp_caps` read from
//! the ODP capability page, and a DCI's WRITE and SEND between ODP MRs on both sides.

use mlx5_dv::prm::{self, odp_cap as o, opcode, query_hca_cap as q};
use mlx5_dv::{AccessFlags as A, Backend, MLX5DV_CONTEXT_MASK_DC_ODP_CAPS, RecvWr, SendWr, odp_transport as t};
use mlx5_dv::{wc_opcode, wc_status, wr_opcode};

use super::dc::{KEY, bring_up, dc_dest, make};
use super::devx::devx_ctx;
use super::fixture::*;
use super::odp::{odp_caps, odp_region};
use crate::case::{Case, Check, Env, Need, Verdict, check_eq, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "odp.dc_odp_caps_and_xrc_are_the_odp_pages",
        covers: &[304],
        needs: &[Need::Mlx5Device, Need::Devx],
        run: caps_page,
    },
    Case { name: "dc.write_and_send_through_odp_mrs", covers: &[305], needs: &[Need::Mlx5Device], run: traffic },
];

/// The verbs bits of the transport at `base` in an ODP page.
fn page_bits(page: &[u8], base: u32) -> u32 {
    (0..o::BITS).fold(0, |v, b| v | u32::from(o::field(base, b).get(page).unwrap_or(0) != 0) << b)
}

fn caps_page(b: &mut dyn Backend, env: &Env) -> Check {
    let ctx = devx_ctx(b, env)?;
    let input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, q::OP_MOD_ODP_CUR);
    let out = expect_ok("QUERY_HCA_CAP (ODP)", b.devx_general_cmd(ctx, &input, q::OUT_SIZE))?;
    let page = out.get(q::CAPABILITY_BYTE..).unwrap_or_default();
    let dv = expect_ok("mlx5dv_query_device(DC_ODP_CAPS)", b.query_device(ctx, MLX5DV_CONTEXT_MASK_DC_ODP_CAPS))?;
    check_eq("DC_ODP_CAPS in the answered comp_mask", dv.comp_mask & MLX5DV_CONTEXT_MASK_DC_ODP_CAPS, 1 << 7)?;
    check_eq("dc_odp_caps: the ODP page's DC bits", dv.dc_odp_caps, page_bits(page, o::DC))?;
    let caps = odp_caps(env)?;
    if caps.supported() {
        check_eq("xrc_odp_caps: the ODP page's XRC bits", caps.xrc, page_bits(page, o::XRC))?;
    }
    expect_ok("ibv_close_device", b.close_device(ctx))
}

fn traffic(b: &mut dyn Backend, env: &Env) -> Check {
    let caps = odp_caps(env)?;
    let d = make(b, env)?;
    let dv = expect_ok("mlx5dv_query_device(DC_ODP_CAPS)", b.query_device(d.ctx, MLX5DV_CONTEXT_MASK_DC_ODP_CAPS))?;
    let need = t::SEND | t::WRITE | t::SRQ_RECV;
    if !caps.supported() || dv.dc_odp_caps & need != need {
        let why = format!("no DC ODP for SEND|WRITE|SRQ_RECV (dc_odp_caps {:#x})", dv.dc_odp_caps);
        return Err(Verdict::skip(why));
    }
    let to = bring_up(b, &d)?;
    let remote = A::LOCAL_WRITE | A::REMOTE_WRITE;
    let (rbuf, rmr) = odp_region(b, d.pd, 4096, &pattern(4096, 0), remote)?;
    let (_, amr) = odp_region(b, d.pd, 4096, &pattern(4096, 5), A::LOCAL_WRITE)?;
    let r = RecvWr { wr_id: 60, sge: vec![sge(&rmr, 2048, 1024)] };
    expect_ok("ibv_post_srq_recv into an ODP MR", b.post_srq_recv(&d.srq, &[r]))?;
    let dc = Some(dc_dest(&to, KEY));
    let write = SendWr {
        wr_id: 1,
        opcode: wr_opcode::RDMA_WRITE,
        sge: vec![sge(&amr, 0, 1000)],
        remote_addr: rmr.addr,
        rkey: rmr.rkey,
        dc,
        ..SendWr::default()
    };
    let send = SendWr { wr_id: 2, opcode: wr_opcode::SEND, sge: vec![sge(&amr, 1000, 300)], dc, ..SendWr::default() };
    expect_ok("ibv_post_send on the DCI from an ODP MR", b.post_send_wr(&d.dci, &[write, send]))?;
    let wcs = poll(b, &d.cq, 3)?;
    let mut got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    got.sort();
    let want = vec![
        (1, wc_status::SUCCESS, wc_opcode::RDMA_WRITE),
        (2, wc_status::SUCCESS, wc_opcode::SEND),
        (60, wc_status::SUCCESS, wc_opcode::RECV),
    ];
    check_eq("the completions (wr_id, status, opcode)", got, want)?;
    let (mut mem, from) = (pattern(4096, 0), pattern(4096, 5));
    mem[..1000].copy_from_slice(&from[..1000]);
    mem[2048..2348].copy_from_slice(&from[1000..1300]);
    check_eq("the DCT side's ODP memory (WRITE, SEND)", contents(b, &rbuf)?, mem)
}
