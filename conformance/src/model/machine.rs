//! The state-machine proptest: random [`Op`] sequences, each answered by the [`Model`] and by
//! a backend, compared call by call. A failure shrinks to the smallest sequence, which is run
//! once more through a [`Recorder`] so it can be replayed on another backend.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use mlx5_dv::{Backend, Buf, ContextAttr, ContextHandle, DeviceKind, Mkey, MkeyInitAttr, MkeyInitFlags, PdHandle};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use proptest_state_machine::ReferenceStateMachine;

use super::{Expect, Model, Op};
use crate::trace::Recorder;

thread_local! {
    static START: RefCell<Option<Model>> = const { RefCell::new(None) };
}

/// The op strategies over a model's state, for a user's own state machine or proptest.
pub struct Machine;

fn slot(n: usize) -> BoxedStrategy<usize> {
    // One past the last slot is never generated: every op names an object that was made
    // (a destroyed one is the stale handle under test).
    (0..n.max(1)).boxed()
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
        let (c, p, m, b) = state.slots();
        let flags = prop_oneof![
            Just(MkeyInitFlags::INDIRECT.bits()),
            Just((MkeyInitFlags::INDIRECT | MkeyInitFlags::BLOCK_SIGNATURE).bits()),
            Just((MkeyInitFlags::INDIRECT | MkeyInitFlags::CRYPTO).bits()),
            Just((MkeyInitFlags::INDIRECT | MkeyInitFlags::UPDATE_TAG).bits()),
            Just((MkeyInitFlags::INDIRECT | MkeyInitFlags::REMOTE_INVALIDATE).bits()),
            0u32..64,
        ];
        let entries = prop_oneof![0u16..70, 65530u16..=65535];
        let mut ops: Vec<BoxedStrategy<Op>> = vec![
            (0usize..4).prop_map(|dev| Op::OpenIbv { dev }).boxed(),
            (0usize..4).prop_map(|dev| Op::OpenDevx { dev }).boxed(),
            prop_oneof![Just(0usize), 1usize..8192, Just(1 << 31)].prop_map(|len| Op::AllocBuf { len }).boxed(),
        ];
        if c > 0 {
            ops.push(slot(c).prop_map(|ctx| Op::AllocPd { ctx }).boxed());
            ops.push(slot(c).prop_map(|ctx| Op::AllocPd { ctx }).boxed());
            ops.push((slot(c), 0u64..1 << 14).prop_map(|(ctx, comp_mask)| Op::QueryDevice { ctx, comp_mask }).boxed());
            ops.push(slot(c).prop_map(|ctx| Op::Close { ctx }).boxed());
        }
        if p > 0 {
            for _ in 0..3 {
                let s = (slot(p), flags.clone(), entries.clone());
                ops.push(s.prop_map(|(pd, flags, max_entries)| Op::CreateMkey { pd, flags, max_entries }).boxed());
            }
            ops.push(slot(p).prop_map(|pd| Op::DeallocPd { pd }).boxed());
        }
        if m > 0 {
            ops.push(slot(m).prop_map(|mkey| Op::DestroyMkey { mkey }).boxed());
        }
        if c > 0 {
            // Large CQs that succeed would cost their rings; only refused sizes are large.
            let cqe = prop_oneof![0u32..300, (1u32 << 24)..(1u32 << 26), Just(u32::MAX)];
            ops.push((slot(c), cqe).prop_map(|(ctx, cqe)| Op::CreateCq { ctx, cqe }).boxed());
        }
        if state.cq_slots() > 0 {
            ops.push(slot(state.cq_slots()).prop_map(|cq| Op::DestroyCq { cq }).boxed());
        }
        if b > 0 {
            ops.push(slot(b).prop_map(|buf| Op::FreeBuf { buf }).boxed());
        }
        proptest::strategy::Union::new(ops).boxed()
    }

    fn preconditions(state: &Model, op: &Op) -> bool {
        let (c, p, m, b) = state.slots();
        match *op {
            Op::Close { ctx } | Op::QueryDevice { ctx, .. } | Op::AllocPd { ctx } => ctx < c,
            Op::DeallocPd { pd } | Op::CreateMkey { pd, .. } => pd < p,
            Op::DestroyMkey { mkey } => mkey < m,
            Op::FreeBuf { buf } => buf < b,
            Op::CreateCq { ctx, .. } => ctx < c && !state.is_other(ctx),
            Op::DestroyCq { cq } => cq < state.cq_slots(),
            Op::OpenIbv { .. } | Op::OpenDevx { .. } | Op::AllocBuf { .. } => true,
        }
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

/// The backend's objects, slot for slot with the model's: PDs with their context slot, mkeys
/// with their PD slot and whether they are still live.
#[derive(Default)]
struct Slots {
    ctxs: Vec<(ContextHandle, usize)>,
    pds: Vec<(PdHandle, usize)>,
    mkeys: Vec<(Mkey, usize, bool)>,
    bufs: Vec<Buf>,
    cqs: Vec<mlx5_dv::Cq>,
}

/// What `run` answers when a new mkey's keys break item 15 (not an errno).
const KEY_RULE: i32 = -1;
/// What `run` answers for a slot the backend has no object in (not an errno).
const NO_SLOT: i32 = -2;

fn at<T: Copy>(v: &[T], i: usize) -> Result<T, i32> {
    v.get(i).copied().ok_or(NO_SLOT)
}

/// Run `op` on `b`; `Err(errno)` or the value the model predicts for it.
fn run(b: &mut dyn Backend, names: &[String], s: &mut Slots, op: &Op) -> Result<Option<u64>, i32> {
    let e = |x: mlx5_dv::Error| x.errno();
    let pick = |v: &[String], i: usize| v.get(i % v.len().max(1)).cloned().unwrap_or_default();
    match *op {
        Op::OpenIbv { dev } => {
            let d = dev % names.len().max(1);
            b.open_ibv_device(&pick(names, dev)).map(|c| s.ctxs.push((c, d))).map(|()| None).map_err(e)
        }
        Op::OpenDevx { dev } => {
            let r = b.open_device(&pick(names, dev), Some(&ContextAttr::devx()));
            r.map(|c| s.ctxs.push((c, dev % names.len().max(1)))).map(|()| None).map_err(e)
        }
        Op::Close { ctx } => {
            b.close_device(at(&s.ctxs, ctx)?.0).map_err(e)?;
            let pds: Vec<usize> = (0..s.pds.len()).filter(|p| s.pds[*p].1 == ctx).collect();
            s.mkeys.iter_mut().filter(|m| pds.contains(&m.1)).for_each(|m| m.2 = false);
            Ok(None)
        }
        Op::QueryDevice { ctx, comp_mask } => {
            b.query_device(at(&s.ctxs, ctx)?.0, comp_mask).map(|d| Some(d.comp_mask)).map_err(e)
        }
        Op::AllocPd { ctx } => b.alloc_pd(at(&s.ctxs, ctx)?.0).map(|p| s.pds.push((p, ctx))).map(|()| None).map_err(e),
        Op::DeallocPd { pd } => b.dealloc_pd(at(&s.pds, pd)?.0).map(|()| None).map_err(e),
        Op::CreateMkey { pd, flags, max_entries } => {
            let attr = MkeyInitAttr {
                pd: at(&s.pds, pd)?.0,
                create_flags: MkeyInitFlags::from_bits_retain(flags),
                max_entries,
            };
            let m = b.create_mkey(&attr).map_err(e)?;
            // Item 15: lkey = rkey = index << 8 with tag 0; the live mkeys of one device have
            // keys of their own (two devices have two key spaces).
            let dev_of = |pd: usize| s.pds.get(pd).and_then(|p| s.ctxs.get(p.1)).map(|c| c.1);
            let clash = s.mkeys.iter().any(|k| k.2 && k.0.lkey == m.lkey && dev_of(k.1) == dev_of(pd));
            if m.lkey != m.rkey || m.lkey & 0xff != 0 || clash {
                return Err(KEY_RULE);
            }
            s.mkeys.push((m, pd, true));
            Ok(Some(u64::from(m.max_entries)))
        }
        Op::DestroyMkey { mkey } => {
            b.destroy_mkey(&at(&s.mkeys, mkey)?.0).map_err(e)?;
            if let Some(m) = s.mkeys.get_mut(mkey) {
                m.2 = false;
            }
            Ok(None)
        }
        Op::CreateCq { ctx, cqe } => {
            let cq = b.create_cq(at(&s.ctxs, ctx)?.0, cqe).map_err(e)?;
            s.cqs.push(cq);
            Ok(Some(u64::from(cq.cqe)))
        }
        Op::DestroyCq { cq } => b.destroy_cq(&at(&s.cqs, cq)?).map(|()| None).map_err(e),
        Op::AllocBuf { len } => b.alloc_buf(len).map(|x| s.bufs.push(x)).map(|()| None).map_err(e),
        Op::FreeBuf { buf } => b.free_buf(&at(&s.bufs, buf)?).map(|()| None).map_err(e),
    }
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

fn check<B: Backend>(b: &mut B, model: &mut Model, ops: &[Op], seen: Option<&AtomicUsize>) -> Result<(), String> {
    let names: Vec<String> = b.device_list().map_err(|x| x.to_string())?.into_iter().map(|d| d.name).collect();
    let mut slots = Slots::default();
    for (i, op) in ops.iter().enumerate() {
        if let Some(n) = seen {
            n.fetch_add(1, Ordering::SeqCst);
        }
        let want = model.step(op);
        let got = run(b, &names, &mut slots, op);
        let same = match (want, got) {
            (Expect::Ok(v), Ok(w)) => v.is_none() || v == w,
            (Expect::Errno(x), Err(y)) => x == y,
            _ => false,
        };
        if !same {
            return Err(format!("op #{i} {op:?}: the model says {want:?}, the backend answers {got:?}"));
        }
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
    let probe = make()?;
    let kinds: Vec<DeviceKind> = {
        let mut p = probe;
        p.device_list().map_err(|x| x.to_string())?.into_iter().map(|d| d.kind).collect()
    };
    let caps = make()?.caps();
    let start = Model::new(&caps, kinds).ok_or("the backend cannot tell its kernel's DEVX and tag-update facts")?;
    START.with(|s| *s.borrow_mut() = Some(start.clone()));
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
