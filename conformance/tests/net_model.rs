//! The reference model's network family on the simulator: on every shipped profile, random
//! scenarios of traffic between two devices on the fabric in memory under seeded fault rules
//! (drop, duplicate, reorder, delay, corrupt; matched by QP, opcode and PSN), each answered as
//! the model says; and a deliberately broken responder, which executes a retransmitted SEND
//! or WRITE again, caught within the bounded case count.

use std::time::Instant;

use mlx5_conformance::model::{Ent, IEnt, Key, Loc, Model, NetMode, Op, Wr, check_ops, discover_with};
use mlx5_dv::prelude::*;
use mlx5_dv::{Backend, NetAction, wc_status};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};
use proptest::collection::vec;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

/// What a run of scenarios covered.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    scenarios: usize,
    /// Every WR completed.
    recovered: usize,
    /// Of those, with finite rules.
    with_faults: usize,
    retry_exc: usize,
    rnr_exc: usize,
    /// Rules by action: drop, duplicate, reorder, delay, corrupt.
    actions: [usize; 5],
}

/// Run `cases` sequences of 1–2 network scenarios on backends `make` builds; what they
/// covered, or the first disagreement (shrunk).
fn scenarios<B: Backend>(make: &dyn Fn() -> B, cases: u32, seed: u8) -> Result<Tally, String> {
    let mut b = make();
    let kinds = b.device_list().map_err(|e| e.to_string())?.into_iter().map(|d| d.kind).collect();
    let start = Model::new(&b.caps(), kinds).ok_or("no kernel facts")?;
    let ops = start.net_strategy().ok_or("no network scenarios on a simulator")?;
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]));
    let tally = std::cell::Cell::new(Tally::default());
    runner
        .run(&vec(ops, 1..3), |ops: Vec<Op>| {
            let mut t = tally.get();
            let mut m = start.clone();
            for op in &ops {
                m.step(op);
                let Op::Net(x) = op else { continue };
                t.scenarios += 1;
                let Some(o) = m.effects().outcome.as_ref() else { continue };
                let first_err = o.wcs.iter().find(|c| c.status != wc_status::SUCCESS).map(|c| c.status);
                match first_err {
                    None => {
                        t.recovered += 1;
                        t.with_faults += usize::from(!x.rules().is_empty());
                    }
                    Some(wc_status::RETRY_EXC_ERR) => t.retry_exc += 1,
                    Some(wc_status::RNR_RETRY_EXC_ERR) => t.rnr_exc += 1,
                    Some(_) => {}
                }
                for r in x.rules() {
                    let i = match r.action {
                        NetAction::Drop => 0,
                        NetAction::Duplicate => 1,
                        NetAction::Reorder => 2,
                        NetAction::Delay { .. } => 3,
                        NetAction::Corrupt { .. } => 4,
                    };
                    t.actions[i] += 1;
                }
            }
            tally.set(t);
            check_ops(&mut make(), &mut start.clone(), &ops).map_err(TestCaseError::fail)
        })
        .map_err(|e| e.to_string())?;
    Ok(tally.get())
}

fn cases() -> u32 {
    std::env::var("NET_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

#[test]
fn the_simulator_agrees_with_the_model_on_the_network() {
    let t = Instant::now();
    for (i, name) in Profile::builtin_names().into_iter().enumerate() {
        let make = || Simulator::with_profile(name).expect("a shipped profile");
        match scenarios(&make, cases(), 40 + i as u8) {
            Ok(n) => {
                eprintln!("{name}: {n:?}");
                assert!(n.recovered > 0 && n.retry_exc + n.rnr_exc > 0, "{name}: {n:?}");
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
    eprintln!("all profiles in {:.1?}", t.elapsed());
}

#[test]
fn a_responder_that_executes_retransmissions_again_is_caught() {
    let t = Instant::now();
    // A SEND whose ACK is lost once: the requester sends it again after the ACK timeout, and
    // the broken responder takes a second receive for it.
    use mlx5_conformance::model::{MsgKind, NetMsg, NetOp, NetRule};
    let send = NetMsg { kind: MsgKind::Send, len: 300 };
    let lost_ack = NetRule { answers: true, ..NetRule::NONE };
    let x = NetOp {
        dev: 0,
        peer: 1,
        n: 1,
        msgs: [send; 4],
        recvs: 2,
        rules: 1,
        rule: [lost_ack; 3],
        retry_cnt: 7,
        rnr_retry: 0,
        psn: 0xff_ffff,
        seed: 1,
        imm: 0,
    };
    let ops = [Op::Net(x)];
    let fresh = |b: &mut Simulator| {
        let kinds = b.device_list().expect("devices").into_iter().map(|d| d.kind).collect();
        Model::new(&Backend::caps(b), kinds).expect("known facts")
    };
    let mut good = Simulator::with_profile("cx6dx").expect("cx6dx");
    let mut m = fresh(&mut good);
    check_ops(&mut good, &mut m, &ops).expect("the simulator resends once and executes once");
    let mut bad = replaying();
    let mut m = fresh(&mut bad);
    let found = check_ops(&mut bad, &mut m, &ops);
    let why = found.expect_err("a SEND executed again after its ACK was lost passes");
    assert!(why.contains("recv: true"), "{why}");
    let make = replaying;
    let found = scenarios(&make, 64, 9);
    assert!(found.is_err(), "a responder executing duplicates passes: {found:?}");
    eprintln!("duplicate executed: {}", found.unwrap_err().lines().next().unwrap_or_default());
    eprintln!("caught in {:.1?}", t.elapsed());
}

fn replaying() -> Simulator {
    let mut sim = Simulator::with_profile("cx6dx").expect("cx6dx");
    mlx5_sim::inspect::replay_duplicates(&mut sim, true);
    sim
}

#[test]
fn the_state_machine_with_network_scenarios_catches_the_duplicate_and_records_its_trace() {
    let t = Instant::now();
    let good = || Simulator::with_profile("cx6dx").map_err(|e| e.to_string());
    let found = discover_with(&good, 16, 4, 0x5eed, NetMode::Only).expect("a run");
    assert!(found.is_none(), "the simulator disagrees with the model: {found:?}");
    let make = || Ok::<_, String>(replaying());
    let f = discover_with(&make, 64, 4, 0x5eed, NetMode::Only).expect("a run").expect("the duplicate is caught");
    assert!(f.ops.iter().all(|o| matches!(o, Op::Net(_))), "shrunk to {:?}", f.ops);
    assert!(f.trace.contains("network"), "the trace has the scenario's fault rules");
    eprintln!(
        "shrunk to {} ops, a trace of {} lines in {:.1?}: {}",
        f.ops.len(),
        f.trace.lines().count(),
        t.elapsed(),
        f.message
    );
}

/// After its first network rule a simulator carries its traffic on its fabric in memory for
/// good, and the full state machine's ops after a network scenario run there: a QP connected
/// to itself whose WRITE meets a remote access error must still report
/// `IBV_WC_REM_ACCESS_ERR` for that WRITE (item 92), as in process, not flush it.
#[test]
fn a_loopback_remote_access_error_on_the_fabric_in_memory_is_not_flushed() {
    use Op::*;
    let e = |mr, off, len| Ent { mr, off, len };
    let ie = |off, count| IEnt { mr: 0, off, count, skip: 6 };
    let ops = vec![
        OpenIbv { dev: 0 },
        CreateCq { ctx: 0, cqe: 23 },
        AllocBuf { len: 3171 },
        CreateCq { ctx: 0, cqe: 57 },
        AllocPd { ctx: 0 },
        CreateMkey { pd: 0, flags: 1, max_entries: 25 },
        CreateQp { pd: 0, cq: 1, wr: 16, sge: 2, inline: 0 },
        CreateQp { pd: 0, cq: 1, wr: 16, sge: 4, inline: 0 },
        Connect { qp: 1, peer: 1 },
        CreateMkey { pd: 0, flags: 1, max_entries: 51 },
        RegMr { pd: 0, buf: 0, off: 1401, len: 1415, access: 7 },
        CreateMkey { pd: 0, flags: 1, max_entries: 58 },
        Post {
            qp: 1,
            n: 1,
            wrs: [
                Wr::MrList {
                    mkey: 2,
                    access: 3,
                    n: 2,
                    e: [e(0, 858, 2), e(0, 544, 101), e(0, 0, 0), e(0, 0, 0)],
                    inline: true,
                    signaled: false,
                },
                Wr::Access(7),
                Wr::Access(7),
            ],
        },
        Post {
            qp: 1,
            n: 2,
            wrs: [
                Wr::Write {
                    local: Loc { key: Key::Mr(0), off: 285, len: 17 },
                    more: Some(Loc { key: Key::Mkey(2, 0), off: 78, len: 16 }),
                    remote: Key::Mkey(2, 0),
                    roff: 140,
                    signaled: true,
                },
                Wr::MrList {
                    mkey: 1,
                    access: 7,
                    n: 1,
                    e: [e(0, 734, 67), e(0, 0, 0), e(0, 0, 0), e(0, 0, 0)],
                    inline: true,
                    signaled: true,
                },
                Wr::Interleaved { repeat: 3, n: 1, e: [ie(41, 13), ie(0, 0), ie(0, 0)] },
            ],
        },
    ];
    for in_memory in [false, true] {
        let mut b = Simulator::with_profile("cx5").expect("cx5");
        if in_memory {
            b.carry_in_memory();
        }
        let kinds = b.device_list().expect("devices").into_iter().map(|d| d.kind).collect();
        let mut m = Model::new(&Backend::caps(&b), kinds).expect("known facts");
        let r = check_ops(&mut b, &mut m, &ops);
        assert!(r.is_ok(), "in memory {in_memory}: {r:?}");
    }
}
