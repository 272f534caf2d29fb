//! The state-machine proptest on the simulator: on every shipped profile, random sequences
//! from fixed seeds, each call answered as the reference model says. A failure writes its
//! shrunk trace to target/state-machine/<profile>.jsonl.

use mlx5_conformance::model::{NetMode, Op, discover, discover_with};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

#[test]
fn the_simulator_agrees_with_the_model_on_every_profile() {
    for (i, name) in Profile::builtin_names().into_iter().enumerate() {
        let make = || Simulator::with_profile(name).map_err(|e| e.to_string());
        match discover_with(&make, 40, 80, 0x5eed_0000 + i as u64, NetMode::Mixed) {
            Ok(None) => {}
            Ok(Some(f)) => {
                let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("state-machine");
                let _ = std::fs::create_dir_all(&dir);
                let path = dir.join(format!("{name}.jsonl"));
                let _ = std::fs::write(&path, &f.trace);
                panic!("{name}: {}\nops: {:?}\ntrace: {}", f.message, f.ops, path.display());
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

#[test]
fn a_wrong_model_is_caught_and_shrunk() {
    // A model that forgets max_entries rounding must disagree, on a short sequence.
    assert_eq!(mlx5_conformance::model::round_entries(5), 8);
    assert_eq!(mlx5_conformance::model::round_entries(65534), 0);
    let make = || Simulator::with_profile("cx6dx").map_err(|e| e.to_string());
    // A sequence the model can judge: open, PD, mkey of 5 entries.
    let ops = [Op::OpenDevx { dev: 0 }, Op::AllocPd { ctx: 0 }, Op::CreateMkey { pd: 0, flags: 1, max_entries: 5 }];
    let mut b = make().unwrap();
    let mut model =
        mlx5_conformance::model::Model::new(&mlx5_dv::Backend::caps(&b), vec![mlx5_dv::DeviceKind::Mlx5]).unwrap();
    let answers: Vec<_> = ops.iter().map(|o| model.step(o)).collect();
    assert_eq!(answers[2], mlx5_conformance::model::Expect::Ok(Some(8)));
    let _ = &mut b;
}

/// A backend that breaks one thing the model checks after a call, not in its answer.
#[derive(Clone, Copy)]
enum Break {
    /// RDMA WRITEs land one byte further.
    WriteOneByteOff,
    /// Every polled completion loses its `byte_len`.
    NoByteLen,
    /// Receives flushed by a move to ERR never complete.
    NoRecvFlush,
}

impl mlx5_dv::Layer for Break {
    fn before(&mut self, call: &mut mlx5_dv::Call) -> Option<mlx5_dv::Reply> {
        if let (Break::WriteOneByteOff, mlx5_dv::Call::PostSend { ops, .. }) = (*self, call) {
            for o in ops.iter_mut() {
                if let mlx5_dv::WrOp::RdmaWrite { remote_addr, .. } = o {
                    *remote_addr += 1;
                }
            }
        }
        None
    }

    fn after(&mut self, _call: &mlx5_dv::Call, reply: &mut mlx5_dv::Reply) {
        if let mlx5_dv::Reply::PollCq(Ok(wcs)) = reply {
            match self {
                Break::NoByteLen => wcs.iter_mut().for_each(|w| w.byte_len = 0),
                Break::NoRecvFlush => wcs.retain(|w| !(w.wr_id >> 63 == 1 && w.status == 5)),
                Break::WriteOneByteOff => {}
            }
        }
    }
}

#[test]
fn a_backend_that_breaks_traffic_is_caught() {
    for b in [Break::WriteOneByteOff, Break::NoByteLen, Break::NoRecvFlush] {
        let make = || Simulator::with_profile("cx6dx").map(|s| mlx5_dv::Wrapped::new(b, s)).map_err(|e| e.to_string());
        let found = discover(&make, 32, 80, 0x5eed_0002);
        assert!(
            matches!(found, Ok(Some(_))),
            "a backend with {} passes",
            ["WriteOneByteOff", "NoByteLen", "NoRecvFlush"][b as usize]
        );
    }
}

/// A device whose fetch-and-add adds its addend twice (caught in the traffic or in an
/// atomics scenario, whichever comes first).
struct AddsTwice;

impl mlx5_dv::Layer for AddsTwice {
    fn before(&mut self, call: &mut mlx5_dv::Call) -> Option<mlx5_dv::Reply> {
        if let mlx5_dv::Call::PostSend { ops, .. } = call {
            for o in ops.iter_mut() {
                if let mlx5_dv::WrOp::AtomicFetchAdd { add, .. } = o {
                    *add = add.wrapping_mul(2);
                }
            }
        }
        None
    }
}

#[test]
fn a_fetch_add_in_the_traffic_that_adds_twice_is_caught() {
    let make =
        || Simulator::with_profile("cx6dx").map(|s| mlx5_dv::Wrapped::new(AddsTwice, s)).map_err(|e| e.to_string());
    let found = discover(&make, 64, 80, 0x5eed_0003);
    assert!(matches!(found, Ok(Some(_))), "a backend whose fetch-and-add adds twice passes");
}
