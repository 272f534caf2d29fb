//! The reference model's atomics and memory-window families on the simulator: on every
//! shipped profile that has them, random scenarios (compare-and-swap and fetch-and-add
//! chains with misaligned, refused and short WRs; type-1 and type-2 windows bound, used
//! inside and outside their range and rights, invalidated locally and remotely, deallocated)
//! each answered as the model says; datagrams between two UD QPs (wrong Q_Keys, no receive,
//! short receives, past the MTU); two QPs sharing an SRQ (posted order, RNR on an empty one, a
//! QP's error leaving the WQEs); UC messages (refused R_Keys and missing receives dropped
//! without a word, READ refused); XRC messages to the SRQ each names (another domain's SRQ
//! and another PD's key refused); and deliberately broken backends the model must catch.

use std::time::Instant;

use mlx5_conformance::model::{
    Model, MsgKind, MwStep, NetMsg, NetOp, NetRule, Op, SrqStep, UcKind, check_ops, probe_remote,
};
use mlx5_dv::{Backend, Buf, Call, Contexts as _, Layer, Reply, WrOp, Wrapped};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};
use proptest::collection::vec;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

/// What a run of scenarios covered.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    atomic: usize,
    /// Atomic WRs that completed, and those with an error status other than a flush.
    atomic_ok: usize,
    atomic_err: usize,
    mw: usize,
    /// Window steps that completed with an error (REM_ACCESS_ERR, MW_BIND_ERR, ...).
    mw_err: usize,
    /// Window scenarios that invalidated (LOCAL_INV, SEND_WITH_INV) or deallocated.
    invalidated: usize,
    /// WRITEs and READs through a window that succeeded.
    mw_access: usize,
    ud: usize,
    /// Datagrams received, and receive completions with an error.
    ud_received: usize,
    ud_err: usize,
    srq: usize,
    /// Receives an SRQ's WQEs took on the second responder, and SENDs that met an empty SRQ
    /// (and waited for a WQE).
    srq_second: usize,
    srq_waited: usize,
    uc: usize,
    /// UC messages received, dropped (a refused R_Key, no receive) and READs refused.
    uc_received: usize,
    uc_dropped: usize,
    uc_read: usize,
    xrc: usize,
    /// XRC receives taken from the domain's second SRQ (of the other PD), requests refused
    /// for another domain's SRQ, and for a key of the other PD.
    xrc_second: usize,
    xrc_foreign: usize,
    xrc_key: usize,
}

/// A network scenario of one 1-byte WRITE and no fault: after it the simulator carries its
/// devices' traffic on its fabric in memory, so the scenarios after it run there.
fn to_the_fabric() -> Op {
    let w = NetMsg { kind: MsgKind::Write, len: 1 };
    Op::Net(NetOp {
        dev: 0,
        peer: 1,
        n: 1,
        msgs: [w; 4],
        recvs: 4,
        rules: 0,
        rule: [NetRule::NONE; 3],
        retry_cnt: 0,
        rnr_retry: 0,
        psn: 0,
        seed: 0,
        imm: 0,
    })
}

/// Run `cases` sequences of 1–3 scenarios on backends `make` builds; what they covered, or
/// the first disagreement (shrunk).
fn scenarios<B: Backend>(make: &dyn Fn() -> B, cases: u32, seed: u8) -> Result<Option<Tally>, String> {
    scenarios_after(make, cases, seed, None, &|m| m)
}

/// [`scenarios`] of the families `only` leaves on (a broken backend's test draws from the
/// family it breaks alone, whatever families are added later).
fn scenarios_of<B: Backend>(
    make: &dyn Fn() -> B,
    cases: u32,
    seed: u8,
    only: &dyn Fn(Model) -> Model,
) -> Result<Option<Tally>, String> {
    let none = |m: Model| m.with_remote(false, false).with_datagrams(false, false).with_uc_xrc(false, false);
    scenarios_after(make, cases, seed, None, &|m| only(none(m)))
}

/// [`scenarios`], each sequence after `first`.
fn scenarios_after<B: Backend>(
    make: &dyn Fn() -> B,
    cases: u32,
    seed: u8,
    first: Option<Op>,
    shape: &dyn Fn(Model) -> Model,
) -> Result<Option<Tally>, String> {
    let mut b = make();
    let kinds = b.device_list().map_err(|e| e.to_string())?.into_iter().map(|d| d.kind).collect();
    let start = shape(Model::new(&b.caps(), kinds).ok_or("no kernel facts")?.with_remote_features(&mut b));
    let Some(ops) = start.remote_strategy() else { return Ok(None) };
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]));
    let tally = std::cell::Cell::new(Tally::default());
    runner
        .run(&vec(ops, 1..4), |ops: Vec<Op>| {
            let mut t = tally.get();
            let mut m = start.clone();
            for op in &ops {
                m.step(op);
                let wcs = m.effects().outcome.as_ref().map(|o| o.wcs.clone()).unwrap_or_default();
                let errs = wcs.iter().filter(|c| c.status != 0 && c.status != 5).count();
                match op {
                    Op::Atomic(_) => {
                        t.atomic += 1;
                        t.atomic_ok += wcs.iter().filter(|c| c.status == 0).count();
                        t.atomic_err += errs;
                    }
                    Op::Srq(x) => {
                        t.srq += 1;
                        t.srq_second += wcs.iter().filter(|c| c.recv && c.status == 0 && c.wr_id >= 100).count();
                        let mut wqes = x.receives();
                        for s in x.posted() {
                            match s {
                                SrqStep::Recv => wqes += 1,
                                SrqStep::Send { .. } if wqes == 0 => t.srq_waited += 1,
                                SrqStep::Send { .. } => wqes -= 1,
                                SrqStep::ErrResp { .. } => {}
                            }
                        }
                    }
                    Op::Uc(x) => {
                        t.uc += 1;
                        t.uc_received += wcs.iter().filter(|c| c.recv && c.status == 0).count();
                        t.uc_read += wcs.iter().filter(|c| c.status == mlx5_dv::wc_status::LOC_QP_OP_ERR).count();
                        // Sent, and then refused or not received.
                        let mut dropped = 0;
                        for c in wcs.iter().filter(|c| !c.recv && c.status == 0) {
                            let Some(m) = x.posted().get(c.wr_id as usize) else { continue };
                            dropped += usize::from(m.bad_rkey || m.kind != UcKind::Write);
                        }
                        t.uc_dropped += dropped.saturating_sub(wcs.iter().filter(|c| c.recv && c.status == 0).count());
                    }
                    Op::Xrc(_) => {
                        t.xrc += 1;
                        t.xrc_second += wcs.iter().filter(|c| c.recv && c.status == 0 && c.wr_id >= 10).count();
                        let status = |s: u32| wcs.iter().filter(|c| c.status == s).count();
                        t.xrc_foreign += status(mlx5_dv::wc_status::REM_INV_REQ_ERR);
                        t.xrc_key += status(mlx5_dv::wc_status::REM_ACCESS_ERR);
                    }
                    Op::Ud(_) => {
                        t.ud += 1;
                        t.ud_received += wcs.iter().filter(|c| c.recv && c.status == 0).count();
                        t.ud_err += wcs.iter().filter(|c| c.recv && c.status != 0).count();
                    }
                    Op::Mw(x) => {
                        t.mw += 1;
                        t.mw_err += errs;
                        let rw = [mlx5_dv::wc_opcode::RDMA_WRITE, mlx5_dv::wc_opcode::RDMA_READ];
                        t.mw_access += wcs.iter().filter(|c| c.opcode.is_some_and(|o| rw.contains(&o))).count();
                        let inv = |s: &MwStep| matches!(s, MwStep::LocalInv | MwStep::SendInv | MwStep::Dealloc);
                        t.invalidated += usize::from(x.posted().iter().any(inv));
                    }
                    _ => {}
                }
            }
            tally.set(t);
            let ops: Vec<Op> = first.into_iter().chain(ops).collect();
            check_ops(&mut make(), &mut start.clone(), &ops).map_err(TestCaseError::fail)
        })
        .map_err(|e| e.to_string())?;
    Ok(Some(tally.get()))
}

fn cases() -> u32 {
    std::env::var("REMOTE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48)
}

#[test]
fn the_simulator_agrees_with_the_model_on_atomics_and_windows() {
    let t = Instant::now();
    for (i, name) in Profile::builtin_names().into_iter().enumerate() {
        let make = || Simulator::with_profile(name).expect("a shipped profile");
        match scenarios(&make, cases(), 0x40 + i as u8) {
            Ok(Some(n)) => {
                eprintln!("{name}: {n:?}");
                let all = [
                    n.atomic_ok,
                    n.atomic_err,
                    n.mw_err,
                    n.invalidated,
                    n.mw_access,
                    n.ud_received,
                    n.ud_err,
                    n.srq_second,
                    n.srq_waited,
                    n.uc_received,
                    n.uc_dropped,
                    n.uc_read,
                    n.xrc_second,
                    n.xrc_foreign,
                    n.xrc_key,
                ];
                assert!(all.iter().all(|x| *x > 0), "{name}: {n:?}");
            }
            Ok(None) => panic!("{name}: every shipped profile has atomics and windows"),
            Err(e) => panic!("{name}: {e}"),
        }
    }
    eprintln!("all profiles in {:.1?}", t.elapsed());
}

#[test]
fn the_fabric_agrees_with_the_model_on_atomics_and_windows() {
    let make = || Simulator::with_profile("cx7").expect("a shipped profile");
    match scenarios_after(&make, cases(), 0x60, Some(to_the_fabric()), &|m| m) {
        Ok(Some(n)) => eprintln!("cx7 on the fabric: {n:?}"),
        other => panic!("cx7 on the fabric: {other:?}"),
    }
}

#[test]
fn the_probe_finds_atomics_and_windows_on_the_simulator() {
    let mut sim = Simulator::with_profile("cx6dx").expect("a shipped profile");
    assert_eq!(probe_remote(&mut sim), (true, true));
}

/// A device whose fetch-and-add hands back the new value instead of the original one.
#[derive(Default)]
struct NewValue {
    /// (buffer address the original value lands at, the addend) of each fetch-and-add posted.
    landed: Vec<(u64, u64)>,
}

impl Layer for NewValue {
    fn before(&mut self, call: &mut Call) -> Option<Reply> {
        match call {
            Call::PostSend { ops, .. } => {
                for o in ops.iter() {
                    if let WrOp::AtomicFetchAdd { sge, add, .. } = o
                        && let Some(s) = sge.first()
                    {
                        self.landed.push((s.addr, *add));
                    }
                }
            }
            Call::PostSendWr { wrs, .. } => {
                for w in wrs.iter().filter(|w| w.opcode == mlx5_dv::wr_opcode::ATOMIC_FETCH_AND_ADD) {
                    if let Some(s) = w.sge.first() {
                        self.landed.push((s.addr, w.compare_add));
                    }
                }
            }
            _ => {}
        }
        None
    }

    fn after(&mut self, call: &Call, reply: &mut Reply) {
        let (Call::ReadBuf { buf, offset, .. }, Reply::ReadBuf(Ok(bytes))) = (call, reply) else { return };
        let Buf { addr, .. } = *buf;
        let base = addr + *offset as u64;
        for &(at, add) in &self.landed {
            let Some(i) = at.checked_sub(base).map(|i| i as usize) else { continue };
            if let Some(word) = bytes.get_mut(i..i + 8) {
                let old = u64::from_ne_bytes(word.try_into().unwrap_or_default());
                word.copy_from_slice(&old.wrapping_add(add).to_ne_bytes());
            }
        }
    }
}

/// A device whose windows ignore the bound range: every bind inside its MR covers all of it.
struct WholeMr;

impl Layer for WholeMr {
    fn before(&mut self, call: &mut Call) -> Option<Reply> {
        let widen = |i: &mut mlx5_dv::MwBindInfo| {
            if let Some(mr) = i.mr
                && i.length > 0
                && i.addr + i.length <= mr.addr + mr.length
            {
                (i.addr, i.length) = (mr.addr, mr.length);
            }
        };
        match call {
            Call::BindMw { bind, .. } => widen(&mut bind.bind_info),
            Call::PostSend { ops, .. } => ops.iter_mut().for_each(|o| {
                if let WrOp::BindMw { bind, .. } = o {
                    widen(&mut bind.bind_info);
                }
            }),
            Call::PostSendWr { wrs, .. } => wrs.iter_mut().for_each(|w| {
                if let Some(b) = w.bind_mw.as_mut() {
                    widen(&mut b.bind_info);
                }
            }),
            _ => {}
        }
        None
    }
}

/// A device whose UD QPs take any Q_Key: a datagram with another one is delivered.
struct AnyQkey;

impl Layer for AnyQkey {
    fn before(&mut self, call: &mut Call) -> Option<Reply> {
        if let Call::PostSendWr { wrs, .. } = call {
            for u in wrs.iter_mut().filter_map(|w| w.ud.as_mut()) {
                if u.remote_qkey == mlx5_conformance::model::OTHER_QKEY {
                    u.remote_qkey = mlx5_conformance::model::QKEY;
                }
            }
        }
        None
    }
}

#[test]
fn a_ud_qp_that_takes_any_qkey_is_caught() {
    let make = || Wrapped::new(AnyQkey, Simulator::with_profile("cx6dx").expect("a shipped profile"));
    let found = scenarios_of(&make, 64, 9, &|m| m.with_datagrams(true, false));
    eprintln!("{found:?}");
    assert!(matches!(&found, Err(e) if e.contains("completions")), "{found:?}");
}

#[test]
fn a_fetch_add_returning_the_new_value_is_caught() {
    let make = || Wrapped::new(NewValue::default(), Simulator::with_profile("cx6dx").expect("a shipped profile"));
    let found = scenarios_of(&make, 64, 7, &|m| m.with_remote(true, false));
    eprintln!("{found:?}");
    assert!(matches!(&found, Err(e) if e.contains("requester")), "{found:?}");
}

#[test]
fn a_window_that_ignores_its_range_is_caught() {
    let make = || Wrapped::new(WholeMr, Simulator::with_profile("cx6dx").expect("a shipped profile"));
    let found = scenarios_of(&make, 64, 8, &|m| m.with_remote(false, true));
    eprintln!("{found:?}");
    assert!(matches!(&found, Err(e) if e.contains("completions") && e.contains("status: 10")), "{found:?}");
}

/// On the fabric in memory, a QP number given again after a destroy once inherited the old
/// QP's messages in flight (an RNR wait among them): the new requester's SEND, waiting on an
/// empty SRQ, never went again once a receive was posted. The model found it.
#[test]
fn a_qp_number_given_again_inherits_nothing_in_flight() {
    use mlx5_conformance::model::SrqOp;
    let mut b = Simulator::with_profile("cx5").expect("a shipped profile");
    let kinds = b.device_list().expect("devices").into_iter().map(|d| d.kind).collect();
    let mut m = Model::new(&b.caps(), kinds).expect("kernel facts").with_remote_features(&mut b);
    let send = |from, len| SrqStep::Send { from, len };
    let first = [SrqStep::Recv, send(1, 47), send(0, 6), SrqStep::Recv, SrqStep::Recv];
    let then = [send(1, 39), SrqStep::Recv, send(0, 0), SrqStep::Recv, send(1, 38)];
    let ops = [
        to_the_fabric(),
        Op::Srq(SrqOp { dev: 0, seed: 225, recvs: 0, n: 3, steps: first }),
        Op::Srq(SrqOp { dev: 0, seed: 57, recvs: 0, n: 4, steps: then }),
    ];
    check_ops(&mut b, &mut m, &ops).expect("the model and the simulator agree");
}
