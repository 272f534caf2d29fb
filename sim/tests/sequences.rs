//! Random call sequences through the trait, with stale handles, unknown flags and injected
//! firmware faults: nothing panics, every error is one the API can return, and the firmware
//! holds exactly the objects that are alive.

use mlx5_dv::errno::*;
use mlx5_dv::prm::opcode;
use mlx5_dv::*;
use mlx5_sim::{Profile, Simulator};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Call {
    Open { flags: u32, comp_mask: u64, plain: bool },
    OpenOther { which: u8 },
    Close(usize),
    Query(usize, u64),
    AllocPd(usize),
    DeallocPd(usize),
    CreateMkey { pd: usize, flags: u32, n: u16 },
    DestroyMkey(usize),
    Check(usize),
    Fault { op: u8, st: u8, skip: u8 },
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        (prop_oneof![Just(0u32), Just(1), any::<u32>()], prop_oneof![Just(0u64), Just(1), any::<u64>()], any::<bool>())
            .prop_map(|(flags, comp_mask, plain)| Call::Open { flags, comp_mask, plain }),
        (0u8..4).prop_map(|which| Call::OpenOther { which }),
        (0usize..8).prop_map(Call::Close),
        (0usize..8, any::<u64>()).prop_map(|(c, m)| Call::Query(c, m)),
        (0usize..8).prop_map(Call::AllocPd),
        (0usize..8).prop_map(Call::DeallocPd),
        (0usize..8, prop_oneof![0u32..32, any::<u32>()], any::<u16>()).prop_map(|(pd, flags, n)| Call::CreateMkey {
            pd,
            flags,
            n
        }),
        (0usize..16).prop_map(Call::DestroyMkey),
        (0usize..16).prop_map(Call::Check),
        (0u8..7, 1u8..0x52, 0u8..3).prop_map(|(op, st, skip)| Call::Fault { op, st, skip }),
    ]
}

const ERRNOS: &[i32] = &[EINVAL, EOPNOTSUPP, ENOMEM, EIO, EBUSY, EAGAIN, ENODEV];
const OPCODES: &[u16] = &[
    opcode::CREATE_MKEY,
    opcode::DESTROY_MKEY,
    opcode::CREATE_PSV,
    opcode::DESTROY_PSV,
    opcode::ALLOC_PD,
    opcode::DEALLOC_PD,
    opcode::QUERY_HCA_CAP,
];

fn pick<T: Copy>(v: &[T], i: usize) -> Option<T> {
    if v.is_empty() { None } else { Some(v[i % v.len()]) }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_sequences_never_panic(
        profile in proptest::sample::select(Profile::builtin_names()),
        calls in proptest::collection::vec(call(), 1..60),
    ) {
        let mut sim = Simulator::new(Profile::builtin(profile).unwrap()).unwrap();
        let (mut ctxs, mut pds, mut mkeys) = (Vec::new(), Vec::new(), Vec::<Mkey>::new());
        let faults = calls.iter().filter(|c| matches!(c, Call::Fault { .. })).count();
        for c in calls {
            let r: Result<()> = match c {
                Call::Open { flags, comp_mask, plain } => {
                    let attr = ContextAttr { flags: ContextFlags::from_bits_retain(flags), comp_mask };
                    let r = if plain { sim.open_ibv_device("mlx5_0") } else { sim.open_device("mlx5_0", Some(&attr)) };
                    r.map(|c| ctxs.push(c))
                }
                Call::OpenOther { which } => {
                    let name = ["rxe0", "0000:08:00.0", "nope", "mlx5_9"][which as usize];
                    sim.open_ibv_device(name).map(|c| ctxs.push(c))
                }
                Call::Close(i) => pick(&ctxs, i).map_or(Ok(()), |c| sim.close_device(c)),
                Call::Query(i, m) => pick(&ctxs, i).map_or(Ok(()), |c| sim.query_device(c, m).map(drop)),
                Call::AllocPd(i) => pick(&ctxs, i).map_or(Ok(()), |c| sim.alloc_pd(c).map(|p| pds.push(p))),
                Call::DeallocPd(i) => pick(&pds, i).map_or(Ok(()), |p| sim.dealloc_pd(p)),
                Call::CreateMkey { pd, flags, n } => pick(&pds, pd).map_or(Ok(()), |pd| {
                    let a = MkeyInitAttr { pd, create_flags: MkeyInitFlags::from_bits_retain(flags), max_entries: n };
                    sim.create_mkey(&a).map(|m| mkeys.push(m))
                }),
                Call::DestroyMkey(i) => pick(&mkeys, i).map_or(Ok(()), |m| sim.destroy_mkey(&m)),
                Call::Check(i) => pick(&mkeys, i).map_or(Ok(()), |m| sim.mkey_check(&m).map(drop)),
                Call::Fault { op, st, skip } => {
                    let rule = FaultRule::fail_next(OPCODES[op as usize], st, 0xdead).after(u32::from(skip));
                    sim.add_fault(rule);
                    Ok(())
                }
            };
            if let Err(e) = r {
                prop_assert!(ERRNOS.contains(&e.errno()), "unexpected errno {}", e);
                prop_assert_ne!(e.errno(), EREMOTEIO);
            }
        }
        // Drain faults, then close everything. A fault that fired during a close or an unwind
        // leaks its object in firmware, as on a real device; nothing else may leak.
        sim.clear_faults();
        for c in ctxs {
            let _ = sim.close_device(c);
        }
        let (m, p, pd) = sim.firmware().object_counts();
        if faults == 0 {
            prop_assert_eq!((m, p, pd), (0, 0, 0), "objects leaked past close");
        } else {
            prop_assert!(m + p + pd <= faults, "{} objects leaked with {} faults", m + p + pd, faults);
        }
    }
}
