//! Random call sequences through the trait, with stale handles, unknown flags and injected
//! firmware faults: nothing panics, every error is one the API can return, and the firmware
//! holds exactly the objects that are alive.
//!
//! Each random step picks its handles from the objects alive so far and becomes one
//! [`mlx5_dv::Call`], applied to the simulator; the [`Reply`] adds the objects it created.

use mlx5_dv::errno::*;
use mlx5_dv::prelude::*;
use mlx5_dv::prm::opcode;
use mlx5_dv::*;
use mlx5_sim::{Profile, ShippedProfiles, Simulator};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
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

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (prop_oneof![Just(0u32), Just(1), any::<u32>()], prop_oneof![Just(0u64), Just(1), any::<u64>()], any::<bool>())
            .prop_map(|(flags, comp_mask, plain)| Step::Open { flags, comp_mask, plain }),
        (0u8..4).prop_map(|which| Step::OpenOther { which }),
        (0usize..8).prop_map(Step::Close),
        (0usize..8, any::<u64>()).prop_map(|(c, m)| Step::Query(c, m)),
        (0usize..8).prop_map(Step::AllocPd),
        (0usize..8).prop_map(Step::DeallocPd),
        (0usize..8, prop_oneof![0u32..32, any::<u32>()], any::<u16>()).prop_map(|(pd, flags, n)| Step::CreateMkey {
            pd,
            flags,
            n
        }),
        (0usize..16).prop_map(Step::DestroyMkey),
        (0usize..16).prop_map(Step::Check),
        (0u8..7, 1u8..0x52, 0u8..3).prop_map(|(op, st, skip)| Step::Fault { op, st, skip }),
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
        calls in proptest::collection::vec(step(), 1..60),
    ) {
        let mut sim = Simulator::new(Profile::builtin(profile).unwrap()).unwrap();
        let (mut ctxs, mut pds, mut mkeys) = (Vec::new(), Vec::new(), Vec::<Mkey>::new());
        let faults = calls.iter().filter(|c| matches!(c, Step::Fault { .. })).count();
        for c in calls {
            let call = match c {
                Step::Open { flags, comp_mask, plain } => {
                    let attr = ContextAttr { flags: ContextFlags::from_bits_retain(flags), comp_mask };
                    let device = "mlx5_0".to_string();
                    Some(if plain { Call::OpenIbvDevice { device } } else { Call::OpenDevice { device, attr: Some(attr) } })
                }
                Step::OpenOther { which } => {
                    Some(Call::OpenIbvDevice { device: ["rxe0", "0000:08:00.0", "nope", "mlx5_9"][which as usize].into() })
                }
                Step::Close(i) => pick(&ctxs, i).map(|ctx| Call::CloseDevice { ctx }),
                Step::Query(i, comp_mask) => pick(&ctxs, i).map(|ctx| Call::QueryDevice { ctx, comp_mask }),
                Step::AllocPd(i) => pick(&ctxs, i).map(|ctx| Call::AllocPd { ctx }),
                Step::DeallocPd(i) => pick(&pds, i).map(|pd| Call::DeallocPd { pd }),
                Step::CreateMkey { pd, flags, n } => pick(&pds, pd).map(|pd| Call::CreateMkey {
                    attr: MkeyInitAttr { pd, create_flags: MkeyInitFlags::from_bits_retain(flags), max_entries: n },
                }),
                Step::DestroyMkey(i) => pick(&mkeys, i).map(|mkey| Call::DestroyMkey { mkey }),
                Step::Check(i) => pick(&mkeys, i).map(|mkey| Call::MkeyCheck { mkey }),
                Step::Fault { op, st, skip } => {
                    let rule = FaultRule::fail_next(OPCODES[op as usize], st, 0xdead).after(u32::from(skip));
                    prop_assert!(sim.add_fault(rule).is_ok());
                    None
                }
            };
            let Some(call) = call else { continue };
            let reply = call.apply(&mut sim);
            match &reply {
                Reply::OpenDevice(Ok(c)) | Reply::OpenIbvDevice(Ok(c)) => ctxs.push(*c),
                Reply::AllocPd(Ok(p)) => pds.push(*p),
                Reply::CreateMkey(Ok(m)) => mkeys.push(*m),
                _ => {}
            }
            let r: Result<()> = reply.error().map_or(Ok(()), |e| Err(e.clone()));
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
        let (m, p, pd) = mlx5_sim::inspect::object_counts(&sim, 0).unwrap();
        if faults == 0 {
            prop_assert_eq!((m, p, pd), (0, 0, 0), "objects leaked past close");
        } else {
            prop_assert!(m + p + pd <= faults, "{} objects leaked with {} faults", m + p + pd, faults);
        }
    }
}

/// A data-path call with arbitrary (often nonsensical) arguments.
#[derive(Debug, Clone)]
enum Dp {
    Buf(usize),
    RegMr { buf: usize, off: u64, len: u64, access: u32 },
    Mkey { flags: u32, n: u16 },
    Qp { flags: u32, sge: u32, inline: u32, wr: u32 },
    Modify { qp: usize, state: u8, peer: usize, access: u32 },
    Post { qp: usize, ops: Vec<(u8, u64, u32, u32, u64)> },
    Recv { qp: usize, addr: u64, len: u32, key: usize },
    Poll,
    Destroy(u8, usize),
}

fn dp() -> impl Strategy<Value = Dp> {
    prop_oneof![
        (1usize..5000).prop_map(Dp::Buf),
        (0usize..4, any::<u64>(), prop_oneof![1u64..5000, any::<u64>()], any::<u32>())
            .prop_map(|(buf, off, len, access)| Dp::RegMr { buf, off: off % 8192, len, access: access & 0x7f }),
        (prop_oneof![Just(1u32), Just(3), Just(17), any::<u32>()], any::<u16>())
            .prop_map(|(flags, n)| Dp::Mkey { flags, n }),
        (any::<u32>(), 0u32..40, prop_oneof![Just(0u32), 0u32..2000], 0u32..100)
            .prop_map(|(flags, sge, inline, wr)| Dp::Qp { flags, sge, inline, wr }),
        (0usize..4, 0u8..8, 0usize..4, any::<u32>()).prop_map(|(qp, state, peer, access)| Dp::Modify {
            qp,
            state,
            peer,
            access: access & 0xff
        }),
        (0usize..4, proptest::collection::vec((0u8..15, any::<u64>(), any::<u32>(), any::<u32>(), any::<u64>()), 0..6))
            .prop_map(|(qp, ops)| Dp::Post { qp, ops }),
        (0usize..4, any::<u64>(), any::<u32>(), 0usize..8).prop_map(|(qp, addr, len, key)| Dp::Recv {
            qp,
            addr,
            len,
            key
        }),
        Just(Dp::Poll),
        (0u8..5, 0usize..8).prop_map(|(k, i)| Dp::Destroy(k, i)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Random data-path calls, keys and addresses: no panic, only errno the API can return,
    /// and every completion has a status the provider reports.
    #[test]
    fn random_data_path_calls_never_panic(calls in proptest::collection::vec(dp(), 1..50)) {
        let mut sim = Simulator::with_profile("cx7").unwrap();
        let ctx = sim.open_ibv_device("mlx5_0").unwrap();
        let pd = sim.alloc_pd(ctx).unwrap();
        let cq = sim.create_cq(ctx, 8).unwrap();
        let port = sim.query_port(ctx, 1).unwrap();
        let (mut bufs, mut mrs, mut mkeys, mut qps) = (Vec::new(), Vec::new(), Vec::<Mkey>::new(), Vec::<Qp>::new());
        let errnos = [EINVAL, EOPNOTSUPP, ENOMEM, EBUSY, mlx5_dv::errno::EFAULT];
        for c in calls {
            let keys: Vec<u32> = mrs.iter().map(|m: &Mr| m.lkey).chain(mkeys.iter().map(|m| m.lkey)).collect();
            let key = |i: usize| keys.get(i % keys.len().max(1)).copied().unwrap_or(i as u32);
            let call = match c {
                Dp::Buf(len) => Some(Call::AllocBuf { len }),
                Dp::RegMr { buf, off, len, access } => pick(&bufs, buf).map(|b: Buf| Call::RegMr {
                    pd,
                    addr: b.addr.wrapping_add(off),
                    length: len,
                    access: AccessFlags::from_bits_retain(access),
                }),
                Dp::Mkey { flags, n } => Some(Call::CreateMkey {
                    attr: MkeyInitAttr { pd, create_flags: MkeyInitFlags::from_bits_retain(flags & 0x1f), max_entries: n },
                }),
                Dp::Qp { flags, sge, inline, wr } => {
                    let dv = Some(DvQpInitAttr {
                        comp_mask: DvQpInitMask::from_bits_retain(0b101),
                        create_flags: DvQpCreateFlags::from_bits_retain(flags & 0x7f),
                        send_ops_flags: DvSendOpsFlags::from_bits_retain(0b111),
                        dc: Default::default(),
                    });
                    let cap = QpCap { max_send_wr: wr, max_recv_wr: wr, max_send_sge: sge, max_recv_sge: sge, max_inline_data: inline };
                    let attr = QpInitAttr::rc(pd, cq.handle, cap, dv);
                    Some(Call::CreateQp { attr })
                }
                Dp::Modify { qp, state, peer, access } => match (pick(&qps, qp), pick(&qps, peer)) {
                    (Some(q), Some(p)) => {
                        let states = [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts, QpState::Sqd, QpState::Sqe, QpState::Err, QpState::Rts];
                        let attr = QpModify { state: states[state as usize], access: AccessFlags::from_bits_retain(access), dest: Some(QpDest::to(&p, &port)), ext: None };
                        Some(Call::ModifyQp { qp: q, attr })
                    }
                    _ => None,
                },
                Dp::Post { qp, ops } => pick(&qps, qp).map(|q| Call::PostSend {
                    qp: q,
                    ops: ops.iter().map(|&(k, a, l, x, y)| random_op(k, a, l, key(x as usize), y, pick(&mkeys, x as usize))).collect(),
                }),
                Dp::Recv { qp, addr, len, key: k } => pick(&qps, qp).map(|q| Call::PostRecv {
                    qp: q,
                    wrs: vec![RecvWr { wr_id: 1, sge: vec![Sge { addr, length: len, lkey: key(k) }] }],
                }),
                Dp::Poll => Some(Call::PollCq { cq, max: 64 }),
                Dp::Destroy(k, i) => match k {
                    0 => pick(&qps, i).map(|qp| Call::DestroyQp { qp }),
                    1 => pick(&mrs, i).map(|mr| Call::DeregMr { mr }),
                    2 => pick(&mkeys, i).map(|mkey| Call::DestroyMkey { mkey }),
                    3 => pick(&bufs, i).map(|buf| Call::FreeBuf { buf }),
                    _ => Some(Call::DestroyCq { cq }),
                },
            };
            let Some(call) = call else { continue };
            let reply = call.apply(&mut sim);
            match &reply {
                Reply::AllocBuf(Ok(b)) => bufs.push(*b),
                Reply::RegMr(Ok(m)) => mrs.push(*m),
                Reply::CreateMkey(Ok(m)) => mkeys.push(*m),
                Reply::CreateQp(Ok(q)) => qps.push(*q),
                Reply::PollCq(Ok(wcs)) => {
                    for wc in wcs {
                        prop_assert!(wc.status <= 21, "status {}", wc.status);
                    }
                }
                _ => {}
            }
            let r: Result<()> = reply.error().map_or(Ok(()), |e| Err(e.clone()));
            if let Err(e) = r {
                prop_assert!(errnos.contains(&e.errno()), "unexpected errno {}", e);
            }
        }
        let _ = sim.get_async_event(ctx);
        prop_assert!(sim.close_device(ctx).is_ok());
    }
}

fn random_op(kind: u8, addr: u64, len: u32, key: u32, x: u64, mkey: Option<Mkey>) -> WrOp {
    let flags = SendFlags::from_bits_retain((x & 0xf) as u32);
    let sge = vec![Sge { addr, length: len % 100_000, lkey: key }];
    let mkey = mkey.unwrap_or(Mkey {
        handle: mlx5_dv::MkeyHandle::new(mlx5_dv::BackendId::fresh(), 1),
        lkey: key,
        rkey: key,
        max_entries: 4,
    });
    match kind {
        0 => WrOp::RdmaWrite { wr_id: x, flags, rkey: key, remote_addr: addr.rotate_left(7), sge },
        1 => WrOp::RdmaRead { wr_id: x, flags, rkey: key, remote_addr: addr.rotate_left(7), sge },
        2 => WrOp::Send { wr_id: x, flags, sge },
        3 => WrOp::SendImm { wr_id: x, flags, imm: len, sge },
        4 => WrOp::SendInv { wr_id: x, flags, invalidate_rkey: key, sge },
        5 => WrOp::LocalInv { wr_id: x, flags, invalidate_rkey: key },
        6 => WrOp::MkeyConfigure {
            wr_id: x,
            flags,
            mkey,
            num_setters: (len % 4) as u8,
            conf_flags: MkeyConfFlags::from_bits_retain((x >> 8) as u32 & 3),
            comp_mask: 0,
        },
        7 => WrOp::SetMkeyAccessFlags(AccessFlags::from_bits_retain(len & 0x3f)),
        8 => WrOp::SetMkeyLayoutList(sge),
        9 => WrOp::SetMkeyLayoutInterleaved {
            repeat_count: len % 5,
            entries: vec![MrInterleaved { addr, bytes_count: len, bytes_skip: (x >> 16) as u32, lkey: key }],
        },
        10 => WrOp::MrList { wr_id: x, flags, mkey, access: AccessFlags::from_bits_retain(len & 0xf), sge },
        11 => WrOp::MrInterleaved {
            wr_id: x,
            flags,
            mkey,
            access: AccessFlags::from_bits_retain(len & 0xf),
            repeat_count: (x >> 32) as u32 % 4,
            entries: vec![MrInterleaved {
                addr,
                bytes_count: len % 4096,
                bytes_skip: (x >> 16) as u32 % 4096,
                lkey: key,
            }],
        },
        12 => WrOp::SetMkeyCrypto(CryptoAttr {
            crypto_standard: (x & 1) as u32,
            encrypt_on_tx: x & 2 != 0,
            signature_crypto_order: (x >> 2 & 3) as u32,
            data_unit_size: len % 7,
            initial_tweak: [x as u8; 16],
            dek: None,
            keytag: [0; 8],
            comp_mask: x >> 62,
        }),
        13 => WrOp::InlineData(vec![x as u8; (len % 200) as usize]),
        _ => WrOp::RdmaWriteImm { wr_id: x, flags, rkey: key, remote_addr: addr, imm: len, sge },
    }
}
