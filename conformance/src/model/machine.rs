//! The state-machine proptest: random [`Op`] sequences, each answered by the [`Model`] and by
//! a backend, compared call by call, with the completions and buffer bytes each call leaves.
//! A failure shrinks to the smallest sequence, which is run once more through a [`Recorder`]
//! so it can be replayed on another backend.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use mlx5_dv::{Backend, DeviceKind};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use proptest_state_machine::ReferenceStateMachine;

use super::run::{Slots, run, verify};
use super::{Expect, Model, NetMode, Op, strategy};
use crate::trace::Recorder;

thread_local! {
    static START: RefCell<Option<Model>> = const { RefCell::new(None) };
}

/// The op strategies over a model's state, for a user's own state machine or proptest.
pub struct Machine;

impl Machine {
    /// Make `model` the initial state [`ReferenceStateMachine::init_state`] gives on this thread.
    pub fn start_from(model: Model) {
        START.with(|s| *s.borrow_mut() = Some(model));
    }
}

impl ReferenceStateMachine for Machine {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        let m = START.with(|s| s.borrow().clone());
        match m {
            Some(m) => Just(m).boxed(),
            None => Just(Model::new(&mlx5_dv::Caps::default(), Vec::new()).unwrap_or_else(empty_model)).boxed(),
        }
    }

    fn transitions(state: &Model) -> BoxedStrategy<Op> {
        strategy::transitions(state)
    }

    fn preconditions(state: &Model, op: &Op) -> bool {
        strategy::judged(state, op)
    }

    fn apply(mut state: Model, op: &Op) -> Model {
        state.step(op);
        state
    }
}

fn empty_model() -> Model {
    let mut caps = mlx5_dv::Caps::default();
    caps.kernel.devx = Some(false);
    caps.kernel.mkey_update_tag = Some(false);
    Model::new(&caps, Vec::new()).unwrap_or_else(|| unreachable!("known facts"))
}

/// A sequence the backend and the model disagree on, shrunk, and its trace.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The ops, smallest first found.
    pub ops: Vec<Op>,
    /// Where they disagree.
    pub message: String,
    /// The sequence run once more, recorded (`traces/README.md`).
    pub trace: String,
}

/// Run `ops` on `b` against `model` (in its initial state), checking each answer, then the
/// completions every live CQ holds and the bytes of the buffers the call touched; the first
/// disagreement. An op the model cannot judge ([`Expect::Unknown`]) is an error too; a call
/// that would run into a known simulator difference ends the run early with `Ok`.
pub fn check_ops<B: Backend>(b: &mut B, model: &mut Model, ops: &[Op]) -> Result<(), String> {
    check(b, model, ops, None)
}

fn check<B: Backend>(b: &mut B, model: &mut Model, ops: &[Op], seen: Option<&AtomicUsize>) -> Result<(), String> {
    let names: Vec<String> = b.device_list().map_err(|x| x.to_string())?.into_iter().map(|d| d.name).collect();
    let mut slots = Slots::default();
    for (i, op) in ops.iter().enumerate() {
        if let Some(n) = seen {
            n.fetch_add(1, Ordering::SeqCst);
        }
        let want = model.step(op);
        if want == Expect::Unknown {
            return Err(format!("op #{i} {op:?}: the model cannot judge it (a generator bug)"));
        }
        let got = run(b, model, &names, &mut slots, op, i as u64);
        let same = match (want, got) {
            (Expect::Ok(v), Ok(w)) => v.is_none() || v == w,
            (Expect::Errno(x), Err(y)) => x == y,
            _ => false,
        };
        if !same {
            return Err(format!("op #{i} {op:?}: the model says {want:?}, the backend answers {got:?}"));
        }
        verify(b, model, &slots).map_err(|m| format!("after op #{i} {op:?}: {m}"))?;
    }
    Ok(())
}

/// Run `cases` random sequences of up to `len` ops from seed `seed` on backends `make`
/// builds; the first disagreement, shrunk, if any.
pub fn discover<B: Backend>(
    make: &dyn Fn() -> Result<B, String>,
    cases: u32,
    len: usize,
    seed: u64,
) -> Result<Option<Failure>, String> {
    discover_with(make, cases, len, seed, NetMode::Off)
}

/// [`discover`], with network scenarios in the sequences as `net` says.
pub fn discover_with<B: Backend>(
    make: &dyn Fn() -> Result<B, String>,
    cases: u32,
    len: usize,
    seed: u64,
    net: NetMode,
) -> Result<Option<Failure>, String> {
    let probe = make()?;
    let kinds: Vec<DeviceKind> = {
        let mut p = probe;
        p.device_list().map_err(|x| x.to_string())?.into_iter().map(|d| d.kind).collect()
    };
    let caps = make()?.caps();
    let start = Model::new(&caps, kinds)
        .ok_or("the backend cannot tell its kernel's DEVX and tag-update facts")?
        .with_network(net)
        .with_remote_features(&mut make()?)
        .with_probed_crc(&mut make()?);
    Machine::start_from(start.clone());
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let strategy = Machine::sequential_strategy(1..len.max(2));
    let result = runner.run(&strategy, |(initial, ops, seen)| {
        let mut b = make().map_err(TestCaseError::fail)?;
        let mut model = initial;
        check(&mut b, &mut model, &ops, seen.as_deref()).map_err(TestCaseError::fail)
    });
    match result {
        Ok(()) => Ok(None),
        Err(TestError::Fail(why, (_, ops, _))) => {
            let mut b = Recorder::wrap(make()?);
            let _ = check(&mut b, &mut start.clone(), &ops, None);
            let trace = b.layer.trace(&b.layer.header(&b.inner, Some("state machine")));
            Ok(Some(Failure { ops, message: why.to_string(), trace }))
        }
        Err(TestError::Abort(why)) => Err(why.to_string()),
    }
}
