//! The reference model's signature and crypto families on the simulator: on every shipped
//! profile that has them, random scenarios (T10-DIF domains, corrupted PI, mkey_check;
//! AES-XTS round trips, crypto mkeys without attributes) each answered as the model says;
//! and two deliberately broken backends that the model must catch.

use std::time::Instant;

use mlx5_conformance::model::{Dom, Model, Op, check_ops};
use mlx5_dv::{Backend, Call, Layer, MkeyErrType, Reply, WrOp, Wrapped, sig};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};
use proptest::collection::vec;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

/// What a run of scenarios covered.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    sig: usize,
    /// Signature scenarios whose first mkey_check reports an error.
    sig_err: usize,
    /// Signature scenarios writing past the mkey's end.
    past_end: usize,
    /// Signature scenarios re-armed with RESET_SIG_ATTR: the last transfer is plain.
    reset: usize,
    /// Signature scenarios with a CRC domain.
    crc: usize,
    crypto: usize,
    /// Crypto scenarios without crypto attributes.
    no_attrs: usize,
    /// Crypto scenarios with a wire signature too.
    with_sig: usize,
    /// Of those, with a memory-domain signature, carried.
    mem_sig: usize,
    /// Of those, with both domains and a RAW order: refused.
    raw_refused: usize,
}

/// Run `cases` sequences of 1–3 scenarios on backends `make` builds; what they covered, or
/// the first disagreement (shrunk).
fn scenarios<B: Backend>(make: &dyn Fn() -> B, cases: u32, seed: u8) -> Result<Option<Tally>, String> {
    let mut b = make();
    let kinds = b.device_list().map_err(|e| e.to_string())?.into_iter().map(|d| d.kind).collect();
    let start = Model::new(&b.caps(), kinds).ok_or("no kernel facts")?.with_probed_crc(&mut make());
    let Some(ops) = start.offload_strategy() else { return Ok(None) };
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]));
    let tally = std::cell::Cell::new(Tally::default());
    runner
        .run(&vec(ops, 1..4), |ops: Vec<Op>| {
            let mut t = tally.get();
            let mut m = start.clone();
            for op in &ops {
                m.step(op);
                let errs = m
                    .effects()
                    .outcome
                    .as_ref()
                    .is_some_and(|o| o.checks.first().is_some_and(|c| c.err_type != MkeyErrType::NoErr));
                match op {
                    Op::Sig(s) => {
                        t.sig += 1;
                        t.sig_err += usize::from(errs);
                        t.past_end += usize::from(s.past_end);
                        t.reset += usize::from(s.rearm && s.reset);
                        t.crc += usize::from(s.mem.iter().chain(&s.wire).any(|d| matches!(d, Dom::Crc(_))));
                    }
                    Op::Crypto(c) => {
                        t.crypto += 1;
                        t.no_attrs += usize::from(!c.attrs);
                        t.with_sig += usize::from(c.sig.is_some());
                        t.mem_sig += usize::from(c.sig.is_some_and(|w| w.memory) && !c.raw_order());
                        t.raw_refused += usize::from(c.sig.is_some_and(|w| w.both()) && c.raw_order());
                    }
                    _ => {}
                }
            }
            tally.set(t);
            check_ops(&mut make(), &mut start.clone(), &ops).map_err(TestCaseError::fail)
        })
        .map_err(|e| e.to_string())?;
    Ok(Some(tally.get()))
}

#[test]
fn the_simulator_agrees_with_the_model_on_signature_and_crypto() {
    let t = Instant::now();
    for (i, name) in Profile::builtin_names().into_iter().enumerate() {
        let make = || Simulator::with_profile(name).expect("a shipped profile");
        let crc = Backend::caps(&make()).device.sig.block_prot & mlx5_dv::sig_cap::PROT_CRC != 0;
        match scenarios(&make, std::env::var("OFFLOAD_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48), i as u8)
        {
            Ok(Some(n)) => {
                eprintln!("{name}: {n:?}");
                assert!(!crc || n.crc > 0, "{name} has CRC signatures and no CRC scenario ran: {n:?}");
            }
            Ok(None) => eprintln!("{name}: no signature or crypto the model can drive"),
            Err(e) => panic!("{name}: {e}"),
        }
    }
    eprintln!("all profiles in {:.1?}", t.elapsed());
}

/// A device that reports a signature error one block later than the first bad block, as if
/// it reported the second error instead of the first.
#[derive(Default)]
struct SecondError {
    /// The input block's size (data and T10-DIF PI) of the last signature setter.
    stride: u64,
}

impl Layer for SecondError {
    fn before(&mut self, call: &mut Call) -> Option<Reply> {
        if let Call::PostSend { ops, .. } = call {
            for o in ops.iter() {
                if let WrOp::SetMkeySigBlock(a) = o
                    && let Some(d) = a.mem.or(a.wire)
                {
                    self.stride = sig::block_bytes(d.block_size).unwrap_or(0) as u64 + 8;
                }
            }
        }
        None
    }

    fn after(&mut self, _call: &Call, reply: &mut Reply) {
        if let Reply::MkeyCheck(Ok(e)) = reply
            && e.err_type != MkeyErrType::NoErr
        {
            e.sig.offset += self.stride;
        }
    }
}

/// An AES-XTS engine whose tweak is one data unit ahead.
struct TweakOffByOne;

impl Layer for TweakOffByOne {
    fn before(&mut self, call: &mut Call) -> Option<Reply> {
        if let Call::PostSend { ops, .. } = call {
            for o in ops.iter_mut() {
                if let WrOp::SetMkeyCrypto(a) = o {
                    a.initial_tweak = u128::from_le_bytes(a.initial_tweak).wrapping_add(1).to_le_bytes();
                }
            }
        }
        None
    }
}

#[test]
fn broken_signature_and_crypto_backends_are_caught() {
    let t = Instant::now();
    let second = || Wrapped::new(SecondError::default(), Simulator::with_profile("cx6dx").expect("cx6dx"));
    let found = scenarios(&second, 64, 7);
    assert!(found.is_err(), "a device reporting the second signature error passes: {found:?}");
    eprintln!("second error: {}", found.unwrap_err().lines().next().unwrap_or_default());
    for profile in ["cx6dx", "bf3"] {
        let tweak = || Wrapped::new(TweakOffByOne, Simulator::with_profile(profile).expect("a shipped profile"));
        let found = scenarios(&tweak, 64, 8);
        assert!(found.is_err(), "{profile}: an AES-XTS tweak off by one data unit passes: {found:?}");
        eprintln!("{profile} tweak: {}", found.unwrap_err().lines().next().unwrap_or_default());
    }
    eprintln!("caught in {:.1?}", t.elapsed());
}

#[test]
fn the_state_machine_mixes_scenarios_into_its_sequences() {
    use proptest_state_machine::ReferenceStateMachine;
    let mut b = Simulator::with_profile("cx6dx").expect("cx6dx");
    use mlx5_dv::prelude::*;
    let kinds = b.device_list().expect("devices").into_iter().map(|d| d.kind).collect();
    mlx5_conformance::model::Machine::start_from(Model::new(&Backend::caps(&b), kinds).expect("known facts"));
    let ops = mlx5_conformance::model::Machine::sequential_strategy(60..80);
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[3; 32]));
    let (mut sig, mut crypto, mut all) = (0, 0, 0);
    for _ in 0..40 {
        let (_, seq, _) = ops.new_tree(&mut runner).expect("a sequence").current();
        all += seq.len();
        sig += seq.iter().filter(|o| matches!(o, Op::Sig(_))).count();
        crypto += seq.iter().filter(|o| matches!(o, Op::Crypto(_))).count();
    }
    eprintln!("{sig} signature and {crypto} crypto scenarios among {all} ops");
    assert!(sig > 0 && crypto > 0, "{sig} signature and {crypto} crypto scenarios among {all} ops");
}

#[test]
fn the_full_state_machine_catches_a_broken_tweak_and_records_its_trace() {
    let make =
        || Ok::<_, String>(Wrapped::new(TweakOffByOne, Simulator::with_profile("bf3").map_err(|e| e.to_string())?));
    let found = mlx5_conformance::model::discover(&make, 64, 60, 0x5eed_0c0d).expect("a run");
    let f = found.expect("the broken tweak is caught");
    assert!(f.ops.iter().any(|o| matches!(o, Op::Crypto(_))), "shrunk to {:?}", f.ops);
    assert!(f.trace.contains("dek_create") || f.trace.contains("DekCreate"), "the trace has the scenario's calls");
    eprintln!("shrunk to {} ops, a trace of {} lines: {}", f.ops.len(), f.trace.lines().count(), f.message);
}

/// The probe learns the CRC PI byte order a device has, big-endian as well as the shipped
/// little-endian, and CRC64_XP10's CRC-64/NVME; scenarios drawn in that order agree with the
/// device, and a model holding the other order is caught.
#[test]
fn crc_pi_is_judged_in_the_byte_order_the_probe_found() {
    use mlx5_conformance::model::{CrcFacts, probe_crc};
    use mlx5_dv::prelude::*;
    for le in [true, false] {
        let make = || {
            let mut p = Profile::builtin("cx7").expect("cx7");
            p.signature.crc_pi_little_endian = le;
            Simulator::new(p).expect("a simulator")
        };
        let facts = probe_crc(&mut make());
        assert_eq!(facts, Some(CrcFacts { little_endian: le, crc64: true }), "PI stored little-endian: {le}");
        let kinds: Vec<_> = make().device_list().expect("devices").into_iter().map(|d| d.kind).collect();
        let start = Model::new(&Backend::caps(&make()), kinds).expect("known facts");
        let right = start.clone().with_crc(facts);
        let ops = right.offload_strategy().expect("signature scenarios");
        let mut runner =
            TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[9; 32]));
        let (mut agreed, mut caught) = (0, 0);
        for _ in 0..200 {
            let op = ops.new_tree(&mut runner).expect("an op").current();
            // Only CRC domains that put PI on the output or check it on the input.
            let Op::Sig(s) = &op else { continue };
            if s.past_end || !s.mem.iter().chain(&s.wire).any(|d| matches!(d, Dom::Crc(_))) {
                continue;
            }
            check_ops(&mut make(), &mut right.clone(), std::slice::from_ref(&op)).expect("the probed order agrees");
            agreed += 1;
            let flipped = Op::Sig(mlx5_conformance::model::SigOp { crc_le: !le, ..*s });
            let wrong = start.clone().with_crc(facts.map(|f| CrcFacts { little_endian: !le, ..f }));
            caught += usize::from(check_ops(&mut make(), &mut wrong.clone(), &[flipped]).is_err());
        }
        eprintln!("PI little-endian {le}: {agreed} CRC scenarios agreed, {caught} caught in the other order");
        assert!(agreed >= 20 && caught * 2 >= agreed, "{agreed} agreed, {caught} caught");
    }
}

/// Every row of `mlx5dv_wr_set_mkey_crypto`'s table with a signature (B–E, G–J) round-trips on
/// the simulator as the model says, with no signature error; and the rows give memory and
/// wire layouts of their own (the model tells the orders apart).
#[test]
fn each_row_of_the_crypto_signature_table_agrees() {
    use mlx5_conformance::model::{CryptoOp, CryptoSig, Dif};
    use mlx5_dv::crypto::{SIGNATURE_AFTER_CRYPTO_ON_TX as AFTER, SIGNATURE_BEFORE_CRYPTO_ON_TX as BEFORE};
    use mlx5_dv::prelude::*;
    let make = || Simulator::with_profile("cx7").expect("cx7");
    let mut b = make();
    let kinds = b.device_list().expect("devices").into_iter().map(|d| d.kind).collect();
    let start = Model::new(&b.caps(), kinds).expect("known facts");
    let dif = Dif { csum: false, bg_ones: true, app: 0x1234, ref_tag: 7, remap: true, escape: 0 };
    // (row, encrypt_on_tx, order, memory, wire)
    let rows = [
        ("B", true, AFTER, false, true),
        ("C", true, BEFORE, false, true),
        ("D", true, BEFORE, true, false),
        ("E", true, BEFORE, true, true),
        ("G", false, AFTER, false, true),
        ("H", false, AFTER, true, false),
        ("I", false, AFTER, true, true),
        ("J", false, BEFORE, true, false),
    ];
    let mut layouts = Vec::new();
    for (row, encrypt_on_tx, order, memory, wire) in rows {
        let c = CryptoOp {
            dev: 0,
            attrs: true,
            key256: true,
            keytag: false,
            key_seed: 3,
            dus: sig::BLOCK_520,
            units: 2,
            tail: 0,
            tweak: 11,
            encrypt_on_tx,
            order,
            seed: 5,
            sig: Some(CryptoSig { block_size: sig::BLOCK_512, dif, memory, wire }),
        };
        let len = c.len(true).unwrap_or_else(|| panic!("row {row}: a length the docs allow"));
        let forms = c.forms(len).expect("forms");
        let judged = start.clone().step(&Op::Crypto(c));
        assert_eq!(judged, mlx5_conformance::model::Expect::Ok(None), "row {row}: the model judges it");
        check_ops(&mut make(), &mut start.clone(), &[Op::Crypto(c)]).unwrap_or_else(|e| panic!("row {row}: {e}"));
        layouts.push((row, forms));
    }
    for (i, (r1, f1)) in layouts.iter().enumerate() {
        for (r2, f2) in &layouts[i + 1..] {
            assert_ne!(f1, f2, "rows {r1} and {r2} lay the data out alike");
        }
    }
}
