//! Verbs CQs and QPs through the firmware's commands (item 114): the kernel's CREATE_CQ,
//! CREATE_QP and state-change commands show in the command log with the fields the calls
//! set, and a failing command fails the verbs call with the errno of its status.

use mlx5_dv::errno::{EAGAIN, EBUSY, EINVAL, ENOMEM};
use mlx5_dv::prm::{opcode, queues as q, status};
use mlx5_dv::{Backend, CommandRecord, DvQpCreateFlags, FaultRule, QpAttrExt, QpAttrMask as M, QpModify, QpState};

use super::fixture::*;
use super::{ctl, opcodes, with_opcode};
use crate::case::{Case, Check, Env, Need, check_eq, expect_errno, expect_ok};

pub(super) const CASES: &[Case] = &[
    Case {
        name: "qp.verbs_objects_are_firmware_commands",
        covers: &[114],
        needs: &[Need::Mlx5Device, Need::SimControl],
        run: verbs_commands_logged,
    },
    Case {
        name: "qp.failed_verbs_command_is_status_errno",
        covers: &[114],
        needs: &[Need::Mlx5Device, Need::SimControl],
        run: verbs_command_faults,
    },
];

/// A field of the first recorded command with `op`, in its input or (`out`) its output.
fn field(cmds: &[CommandRecord], op: u16, f: mlx5_dv::prm::Field, out: bool) -> Option<u64> {
    let c = with_opcode(cmds, op).first().copied()?;
    f.get(if out { &c.output } else { &c.input }).ok()
}

/// `ibv_create_cq`, `ibv_create_qp`, the three transitions of a connection and the two
/// destroys are the commands the kernel issues, in that order, with the calls' values.
fn verbs_commands_logged(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, _) = open(b, env.dev()?)?;
    ctl(b)?.record_commands(true);
    let cq = expect_ok("ibv_create_cq(100)", b.create_cq(ctx, 100))?;
    let qp = expect_ok("ibv_create_qp", b.create_qp(&qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP)))?;
    let to = dest(b, ctx, &qp)?;
    let ext = QpAttrExt { sq_psn: 0x12_3456, rq_psn: 0xab_cdef, timeout: 9, retry_cnt: 3, ..QpAttrExt::defaults() };
    let steps = [
        (QpState::Init, None, M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS),
        (
            QpState::Rtr,
            Some(to),
            M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER,
        ),
        (QpState::Rts, None, M::STATE | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC),
    ];
    for (state, dest, mask) in steps {
        let m = QpModify::exact(state, QP_ACCESS, dest, QpAttrExt { mask, ..ext });
        expect_ok(&format!("modify to {state:?}"), b.modify_qp(&qp, &m))?;
    }
    let sqd = b.modify_qp(&qp, &QpModify::to(QpState::Sqd));
    expect_errno("RTS -> SQD, which mlx5_ib has no command for", sqd, EINVAL)?;
    expect_ok("ibv_destroy_qp", b.destroy_qp(&qp))?;
    expect_ok("ibv_destroy_cq", b.destroy_cq(&cq))?;
    let cmds = ctl(b)?.take_commands();
    ctl(b)?.record_commands(false);
    // destroy_qp_common: a QP out of RESET goes back to RESET before DESTROY_QP.
    let want =
        ["CREATE_CQ", "CREATE_QP", "RST2INIT_QP", "INIT2RTR_QP", "RTR2RTS_QP", "QP_2RST", "DESTROY_QP", "DESTROY_CQ"];
    check_eq("commands", opcodes(&cmds), want.to_vec())?;
    check_eq("every command succeeded", cmds.iter().map(|c| c.status).max(), Some(status::OK))?;
    let f = |fl| field(&cmds, opcode::INIT2RTR_QP, fl, false);
    let log_size = field(&cmds, opcode::CREATE_CQ, q::create_cq::LOG_CQ_SIZE, false);
    check_eq("CREATE_CQ log_cq_size (101 entries round to 128)", log_size, Some(7))?;
    let qpn = Some(u64::from(qp.qp_num));
    check_eq("CREATE_QP's QPN is the QP's", field(&cmds, opcode::CREATE_QP, q::qp::QPN, true), qpn)?;
    check_eq("CREATE_QP st (RC)", field(&cmds, opcode::CREATE_QP, q::qp::ST, false), Some(0))?;
    check_eq(
        "RST2INIT rre, rwe",
        [q::qp::RRE, q::qp::RWE].map(|fl| field(&cmds, opcode::RST2INIT_QP, fl, false)),
        [Some(0), Some(1)],
    )?;
    check_eq("INIT2RTR remote_qpn", f(q::qp::REMOTE_QPN), Some(u64::from(to.dest_qp_num)))?;
    check_eq("INIT2RTR next_rcv_psn", f(q::qp::NEXT_RCV_PSN), Some(0xab_cdef))?;
    check_eq("INIT2RTR min_rnr_nak", f(q::qp::MIN_RNR_NAK), Some(u64::from(ext.min_rnr_timer)))?;
    check_eq("INIT2RTR rre (the READ depth lets it in)", f(q::qp::RRE), Some(1))?;
    let rts = |fl| field(&cmds, opcode::RTR2RTS_QP, fl, false);
    check_eq(
        "RTR2RTS next_send_psn, ack_timeout, retry_count",
        [q::qp::NEXT_SEND_PSN, q::qp::ACK_TIMEOUT, q::qp::RETRY_COUNT].map(rts),
        [Some(0x12_3456), Some(9), Some(3)],
    )?;
    check_eq("DESTROY_QP names the QP", field(&cmds, opcode::DESTROY_QP, q::qp::QPN, false), qpn)
}

/// A fault rule on CREATE_CQ, CREATE_QP or RST2INIT_QP fails `ibv_create_cq`,
/// `ibv_create_qp` or the modify to INIT with the errno of the status; nothing is left
/// behind, and the call works once the rule is spent. A failed DESTROY_CQ fails
/// `ibv_destroy_cq` and leaves the CQ; a failed DESTROY_QP is only warned of.
fn verbs_command_faults(b: &mut dyn Backend, env: &Env) -> Check {
    let (ctx, pd, cq) = open(b, env.dev()?)?;
    for (st, errno) in [(status::LIM_ERR, ENOMEM), (status::BAD_PARAM_ERR, EINVAL), (status::NO_RES_ERR, EAGAIN)] {
        expect_ok("install the fault rule", ctl(b)?.add_fault(FaultRule::fail_next(opcode::CREATE_CQ, st, 0x41)))?;
        expect_errno(&format!("ibv_create_cq with CREATE_CQ status {st:#x}"), b.create_cq(ctx, 16), errno)?;
    }
    let other = expect_ok("ibv_create_cq once the rules are spent", b.create_cq(ctx, 16))?;
    expect_ok("ibv_destroy_cq", b.destroy_cq(&other))?;
    let attr = qp_attr(pd, &cq, DvQpCreateFlags::empty(), CAP);
    for (st, errno) in [(status::LIM_ERR, ENOMEM), (status::BAD_RES_STATE_ERR, EINVAL)] {
        expect_ok("install the fault rule", ctl(b)?.add_fault(FaultRule::fail_next(opcode::CREATE_QP, st, 0x42)))?;
        expect_errno(&format!("ibv_create_qp with CREATE_QP status {st:#x}"), b.create_qp(&attr), errno)?;
    }
    let qp = expect_ok("ibv_create_qp once the rules are spent", b.create_qp(&attr))?;
    let init = QpModify { state: QpState::Init, access: QP_ACCESS, dest: None, ext: None };
    ctl(b)?.record_commands(true);
    for (st, errno) in [(status::RES_BUSY, EBUSY), (status::BAD_QP_STATE_ERR, EINVAL)] {
        expect_ok("install the fault rule", ctl(b)?.add_fault(FaultRule::fail_next(opcode::RST2INIT_QP, st, 0x43)))?;
        expect_errno(&format!("RESET -> INIT with RST2INIT_QP status {st:#x}"), b.modify_qp(&qp, &init), errno)?;
        check_eq("the QP stays in RESET", expect_ok("query", b.query_qp_state(&qp))?, QpState::Reset)?;
    }
    let cmds = ctl(b)?.take_commands();
    ctl(b)?.record_commands(false);
    check_eq("the failed commands are logged", opcodes(&cmds), vec!["RST2INIT_QP", "RST2INIT_QP"])?;
    check_eq(
        "with the rule's statuses",
        cmds.iter().map(|c| c.status).collect::<Vec<_>>(),
        vec![status::RES_BUSY, status::BAD_QP_STATE_ERR],
    )?;
    expect_ok("RESET -> INIT once the rules are spent", b.modify_qp(&qp, &init))?;
    check_eq("the QP is in INIT", expect_ok("query", b.query_qp_state(&qp))?, QpState::Init)?;
    let busy = FaultRule::fail_next(opcode::DESTROY_QP, status::RES_BUSY, 0x44);
    expect_ok("install the fault rule", ctl(b)?.add_fault(busy))?;
    expect_ok("ibv_destroy_qp when DESTROY_QP fails (the kernel warns)", b.destroy_qp(&qp))?;
    let gone = ctl(b)?.add_fault(FaultRule::fail_next(opcode::DESTROY_CQ, status::BAD_RES_STATE_ERR, 0x45));
    expect_ok("install the fault rule", gone)?;
    let other = expect_ok("ibv_create_cq", b.create_cq(ctx, 16))?;
    expect_errno("ibv_destroy_cq when DESTROY_CQ fails", b.destroy_cq(&other), EINVAL)?;
    expect_ok("ibv_destroy_cq again: the CQ stayed", b.destroy_cq(&other))
}
