//! The cases of the suite, by family.

use mlx5_dv::{Backend, CommandRecord, ContextHandle, PdHandle, SimControl};

use crate::case::{Case, Check, Env, Verdict, expect_ok};

mod atomics;
mod audit;
mod boundary;
mod cm_sidr;
mod context;
mod cq_ring;
mod crypto;
mod crypto_dp;
mod dc;
mod dc_atomics;
mod dc_odp;
mod dc_resend;
mod dc_streams;
mod device_objects;
mod device_qos;
mod devx;
mod devx_gate;
mod dm;
mod dma;
mod dmabuf;
mod dr;
mod dv_cq;
mod engine;
mod fabric;
mod fixture;
mod flow_counter;
mod inline;
mod inval;
mod matcher;
mod misuse;
mod mkey;
mod mr_overlap;
mod multicast;
mod mw;
mod net_model;
mod odp;
mod odp_rereg;
mod qp;
mod raw;
mod raw_wqe;
mod rdmacm;
mod recovery;
mod rereg;
mod rsockets;
mod rss;
mod sched;
mod sig;
mod sig_err;
mod srq;
mod tm;
mod traffic;
mod transport;
mod uc_ud;
mod umr;
mod verbs;
mod verbs_cmd;
mod verbs_misc;
mod wqe_bytes;
mod xrc;

/// Every case, family by family.
pub fn all() -> Vec<Case> {
    [
        context::CASES,
        mkey::CASES,
        misuse::CASES,
        qp::CASES,
        verbs::CASES,
        transport::CASES,
        audit::CASES,
        dma::CASES,
        raw_wqe::CASES,
        fabric::CASES,
        recovery::CASES,
        net_model::CASES,
        atomics::CASES,
        umr::CASES,
        traffic::CASES,
        inval::CASES,
        inline::CASES,
        sig::CASES,
        sig_err::CASES,
        engine::CASES,
        wqe_bytes::CASES,
        crypto::CASES,
        devx::CASES,
        devx_gate::CASES,
        dmabuf::CASES,
        crypto_dp::CASES,
        boundary::CASES,
        verbs_cmd::CASES,
        uc_ud::CASES,
        multicast::CASES,
        dc::CASES,
        dc_streams::CASES,
        dc_odp::CASES,
        srq::CASES,
        tm::CASES,
        mr_overlap::CASES,
        rereg::CASES,
        dm::CASES,
        mw::CASES,
        odp::CASES,
        rdmacm::CASES,
        rsockets::CASES,
        cm_sidr::CASES,
        verbs_misc::CASES,
        dv_cq::CASES,
        cq_ring::CASES,
        device_objects::CASES,
        device_qos::CASES,
        flow_counter::CASES,
        xrc::CASES,
        raw::CASES,
        rss::CASES,
        matcher::CASES,
        dr::CASES,
        sched::CASES,
        dc_atomics::CASES,
        dc_resend::CASES,
        odp_rereg::CASES,
    ]
    .concat()
}

/// Open the mlx5 device with `ibv_open_device` and allocate a PD.
fn open_pd(b: &mut dyn Backend, env: &Env) -> Check<(ContextHandle, PdHandle)> {
    let ctx = expect_ok("ibv_open_device", b.open_ibv_device(env.dev()?))?;
    let pd = expect_ok("ibv_alloc_pd", b.alloc_pd(ctx))?;
    Ok((ctx, pd))
}

/// The simulator control of `b`; cases that call this declare `Need::SimControl`.
fn ctl(b: &mut dyn Backend) -> Check<&mut dyn SimControl> {
    b.sim_control().ok_or_else(|| Verdict::skip("needs simulator control"))
}

/// The recorded commands with `opcode`, in order.
fn with_opcode(cmds: &[CommandRecord], opcode: u16) -> Vec<&CommandRecord> {
    cmds.iter().filter(|c| c.opcode == opcode).collect()
}

/// The sequence of opcodes of the recorded commands.
fn opcodes(cmds: &[CommandRecord]) -> Vec<&'static str> {
    cmds.iter().map(|c| mlx5_dv::prm::opcode::name(c.opcode)).collect()
}
