//! Arming a verbs CQ (`ibv_req_notify_cq`, `mlx5_arm_cq`): the device raises the CQ's
//! completion event at its next CQE after the arm — for solicited and error CQEs only when
//! armed for solicited completions — or at once when such a CQE waits unpolled; once per arm.

mod common;

use mlx5_dv::{Backend, Cq, Mr, Qp, RecvWr, SendFlags, Sge, WrOp};
use mlx5_sim::Simulator;

/// A loopback RC pair: `tx` sends on `scq`, `rx` receives on `rcq`.
struct Pair {
    sim: Simulator,
    tx: Qp,
    rx: Qp,
    scq: Cq,
    rcq: Cq,
    mr: Mr,
}

fn pair() -> Pair {
    let l = common::loopback(16, 16, 4096);
    Pair { sim: l.sim, tx: l.tx, rx: l.rx, scq: l.scq, rcq: l.rcq, mr: l.mr }
}

impl Pair {
    fn recv(&mut self, n: u64) {
        let sge = vec![Sge { addr: self.mr.addr, length: 64, lkey: self.mr.lkey }];
        let wrs: Vec<RecvWr> = (0..n).map(|i| RecvWr { wr_id: i, sge: sge.clone() }).collect();
        (&mut self.sim as &mut dyn Backend).post_recv(&self.rx, &wrs).expect("post_recv");
    }

    fn send(&mut self, flags: SendFlags) {
        let sge = vec![Sge { addr: self.mr.addr + 64, length: 8, lkey: self.mr.lkey }];
        let wr = WrOp::Send { wr_id: 7, flags: flags | SendFlags::SIGNALED, sge };
        (&mut self.sim as &mut dyn Backend).post_send(&self.tx, &[wr]).expect("post_send");
    }

    fn events(&mut self) -> Vec<mlx5_dv::CqHandle> {
        self.sim.take_cq_events()
    }
}

#[test]
fn an_armed_cq_fires_once_at_its_next_completion() {
    let mut p = pair();
    p.recv(4);
    p.send(SendFlags::empty());
    assert_eq!(p.events(), [], "not armed: no event");
    let (scq, rcq) = (p.scq, p.rcq);
    p.sim.arm_cq(&rcq, false).expect("arm");
    assert_eq!(p.events(), [rcq.handle], "a completion waited unpolled: the arm fires at once");
    p.send(SendFlags::empty());
    assert_eq!(p.events(), [], "fired already: the arm is spent");
    assert_eq!((&mut p.sim as &mut dyn Backend).poll_cq(&rcq, 16).expect("poll").len(), 2);
    p.sim.arm_cq(&rcq, false).expect("arm");
    assert_eq!(p.events(), [], "nothing waits");
    p.sim.arm_cq(&scq, false).expect("arm the send CQ");
    p.send(SendFlags::empty());
    assert_eq!(p.events(), [scq.handle, rcq.handle], "both CQs got their next completion, the requester's first");
}

#[test]
fn armed_for_solicited_completions_only() {
    let mut p = pair();
    p.recv(4);
    let rcq = p.rcq;
    p.sim.arm_cq(&rcq, true).expect("arm");
    p.send(SendFlags::empty());
    assert_eq!(p.events(), [], "an unsolicited receive does not wake it");
    p.sim.arm_cq(&rcq, true).expect("re-arm");
    assert_eq!(p.events(), [], "the waiting CQE is not solicited: no event at arming either");
    p.send(SendFlags::SOLICITED);
    assert_eq!(p.events(), [rcq.handle], "a solicited receive wakes it");
    let before = (&mut p.sim as &mut dyn Backend).poll_cq(&rcq, 16).expect("poll").len();
    assert_eq!(before, 2);
    p.send(SendFlags::SOLICITED);
    p.sim.arm_cq(&rcq, true).expect("arm over a solicited CQE");
    assert_eq!(p.events(), [rcq.handle], "a solicited CQE waiting past the consumer index fires at arming");
}

#[test]
fn an_error_completion_wakes_a_cq_armed_for_solicited_ones() {
    let mut p = pair();
    let scq = p.scq;
    p.sim.arm_cq(&scq, true).expect("arm");
    // A WRITE through a key the responder does not have: a remote access error.
    let sge = vec![Sge { addr: p.mr.addr, length: 8, lkey: p.mr.lkey }];
    let wr = WrOp::RdmaWrite { wr_id: 1, flags: SendFlags::SIGNALED, rkey: 0xdead_0000, remote_addr: p.mr.addr, sge };
    (&mut p.sim as &mut dyn Backend).post_send(&p.tx, &[wr]).expect("post_send");
    assert_eq!(p.events(), [scq.handle], "an error CQE wakes it");
    let wc = (&mut p.sim as &mut dyn Backend).poll_cq(&scq, 4).expect("poll");
    assert_ne!(wc.first().map(|w| w.status), Some(0), "the completion is an error: {wc:?}");
}

#[test]
fn a_destroyed_cqs_unread_event_goes_with_it_and_its_arm_is_einval() {
    let mut p = pair();
    let (scq, rcq) = (p.scq, p.rcq);
    p.recv(1);
    p.sim.arm_cq(&rcq, false).expect("arm");
    p.sim.arm_cq(&scq, false).expect("arm");
    p.send(SendFlags::empty());
    let b: &mut dyn Backend = &mut p.sim;
    b.destroy_qp(&p.rx).expect("destroy rx");
    b.destroy_cq(&rcq).expect("destroy cq");
    assert_eq!(p.events(), [scq.handle], "the destroyed CQ's event is not reported");
    let err = p.sim.arm_cq(&rcq, false).expect_err("a destroyed CQ");
    assert_eq!(err.errno(), mlx5_dv::errno::EINVAL);
}
