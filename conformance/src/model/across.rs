//! Network scenarios across two processes: the requester on one simulator and the responder
//! on another, each on the RoCE v2 fabric in a process of its own, judged by the same model
//! as on the fabric in memory ([`NetOp::outcome`]).
//!
//! Real time runs between the two, so a scenario is read once the requester has all its
//! completions and both sides stayed quiet a while; the model's outcomes do not depend on
//! timing (items 115–120, 251–255), so a sequence that agrees in memory must agree here too.

use std::cell::RefCell;

use mlx5_dv::Backend;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use super::net::NetOp;
use super::netrig::{Hosts, run_on};

/// A network scenario on which the two processes and the model disagree, shrunk.
#[derive(Debug, Clone)]
pub struct NetFailure {
    /// The scenario.
    pub op: NetOp,
    /// How the backends' outcome differs from the model's.
    pub message: String,
}

/// The first mlx5 device of `b`.
fn first_device(b: &mut dyn Backend) -> Result<String, String> {
    let list = b.device_list().map_err(|e| format!("the device list: {e}"))?;
    list.into_iter()
        .find(|d| d.kind == mlx5_dv::DeviceKind::Mlx5)
        .map(|d| d.name)
        .ok_or_else(|| "no mlx5 device".into())
}

/// One scenario with the requester on `local` and the responder on `peer`: how it differs
/// from the model's outcome, if it does (`Ok(None)` too for a scenario the model leaves open).
pub fn run_across(local: &mut dyn Backend, peer: &mut dyn Backend, x: &NetOp) -> Result<Option<String>, String> {
    let x = NetOp { dev: 0, peer: 0, ..*x };
    let Some(want) = x.outcome() else { return Ok(None) };
    let (a, s) = (first_device(local)?, first_device(peer)?);
    let got = run_on(Hosts::Two(local, peer), (&a, &s), (0, 0), &x)?;
    Ok(want.differs(&got))
}

/// `cases` random network scenarios from `seed`, each across `local` and `peer`; the first
/// disagreement, shrunk (at most `shrinks` reruns), if any. An error is a scenario that
/// could not run.
pub fn discover_across(
    local: &mut dyn Backend,
    peer: &mut dyn Backend,
    cases: u32,
    seed: u64,
    shrinks: u32,
) -> Result<Option<NetFailure>, String> {
    let both = RefCell::new((local, peer));
    let broken = RefCell::new(None::<String>);
    let config = Config { cases, failure_persistence: None, max_shrink_iters: shrinks, ..Config::default() };
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let strategy = super::net::strategy(vec![0]).prop_filter_map("a network scenario", |op| match op {
        super::Op::Net(x) => Some(x),
        _ => None,
    });
    let result = runner.run(&strategy, |x| {
        let mut guard = both.borrow_mut();
        let (l, p) = &mut *guard;
        match run_across(&mut **l, &mut **p, &x) {
            Ok(None) => Ok(()),
            Ok(Some(why)) => Err(TestCaseError::fail(why)),
            Err(e) => {
                broken.borrow_mut().get_or_insert(e.clone());
                Err(TestCaseError::fail(format!("the scenario did not run: {e}")))
            }
        }
    });
    match result {
        Ok(()) => Ok(None),
        Err(TestError::Fail(why, op)) => match broken.into_inner() {
            // A backend that stopped answering is not a disagreement.
            Some(e) if why.message().contains("did not run") => Err(e),
            _ => Ok(Some(NetFailure { op, message: why.to_string() })),
        },
        Err(TestError::Abort(why)) => Err(why.to_string()),
    }
}

/// `x` on the first two mlx5 devices of `b` (one, if it has one), on its fabric in memory:
/// how it differs from the model's outcome, if it does.
pub fn run_net_in_memory(b: &mut dyn Backend, x: &NetOp) -> Result<Option<String>, String> {
    let list = b.device_list().map_err(|e| format!("the device list: {e}"))?;
    let mlx5: Vec<(u32, String)> =
        (0u32..).zip(list).filter(|(_, d)| d.kind == mlx5_dv::DeviceKind::Mlx5).map(|(i, d)| (i, d.name)).collect();
    let a = mlx5.first().ok_or("no mlx5 device")?;
    let s = mlx5.get(1).unwrap_or(a);
    let x = NetOp { dev: a.0 as usize, peer: s.0 as usize, ..*x };
    let Some(want) = x.outcome() else { return Ok(None) };
    let got = super::netrig::run_net(b, (&a.1, &s.1), (a.0, s.0), &x)?;
    Ok(want.differs(&got))
}
