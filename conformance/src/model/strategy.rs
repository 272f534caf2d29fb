//! The op strategies: what the state machine generates from a model's state.

use std::collections::BTreeMap;
use std::sync::Arc;

use mlx5_dv::{AccessFlags as A, MkeyInitFlags};
use proptest::prelude::*;
use proptest::sample::Index;

use super::{Ent, IEnt, Key, Loc, Model, Op, St, Target, Wr};

fn slot(n: usize) -> BoxedStrategy<usize> {
    // One past the last slot is never generated: every op names an object that was made
    // (a destroyed one is the stale handle under test).
    (0..n.max(1)).boxed()
}

/// What the generators pick from on one PD: keys with the length they cover, MRs, mkeys.
#[derive(Default)]
struct PdPool {
    keys: Vec<(Key, u32)>,
    mrs: Vec<(usize, u32)>,
    mkeys: Vec<usize>,
}

/// The pools of every PD, of all PDs together, and the QPs.
struct Pool {
    by_pd: BTreeMap<usize, PdPool>,
    all: PdPool,
    linked: Vec<usize>,
    qps: usize,
    /// Each QP slot's PD and its peer's PD.
    qp_pds: Vec<(Option<usize>, Option<usize>)>,
    /// The model drives atomics.
    atomics: bool,
    /// Each MR slot's offset in its buffer, modulo 8 (buffers are page-aligned).
    mr_base: Vec<u32>,
    /// Per PD, the keys that allow remote atomics and the length they cover.
    atomic_keys: BTreeMap<usize, Vec<(Key, u32)>>,
}

impl Pool {
    /// Usually the PD's own pool; now and then every PD's (a protection error under test).
    fn of(&self, pd: Option<usize>, own: bool) -> &PdPool {
        match pd.and_then(|p| self.by_pd.get(&p)) {
            Some(p) if own && !p.keys.is_empty() => p,
            _ => &self.all,
        }
    }
}

impl Model {
    fn pool(&self) -> Pool {
        let mut by_pd: BTreeMap<usize, PdPool> = BTreeMap::new();
        let mut all = PdPool::default();
        for (i, m) in self.mrs.iter().enumerate() {
            if let Some(m) = m {
                let len = u32::try_from(m.len).unwrap_or(u32::MAX);
                for p in [by_pd.entry(m.pd).or_default(), &mut all] {
                    p.keys.push((Key::Mr(i), len));
                    p.mrs.push((i, len));
                }
            }
        }
        for (i, m) in self.mkeys.iter().enumerate() {
            if let Some(m) = m {
                let len: u64 = m.layout.runs.iter().map(|r| r.2).sum();
                let len = u32::try_from(len).unwrap_or(u32::MAX);
                for p in [by_pd.entry(m.pd).or_default(), &mut all] {
                    p.keys.push((Key::Mkey(i, m.tag), len));
                    p.mkeys.push(i);
                }
            }
        }
        let linked = (0..self.qps.len()).filter(|q| self.linked_or_err(*q)).collect();
        let qp_pds = self
            .qps
            .iter()
            .map(|q| {
                let q = q.as_ref();
                let peer = q.and_then(|q| q.peer).and_then(|p| self.qps.get(p)?.as_ref()).map(|p| p.pd);
                (q.map(|q| q.pd), peer)
            })
            .collect();
        let mr_base = self.mrs.iter().map(|m| m.as_ref().map_or(0, |m| (m.off % 8) as u32)).collect();
        let mut atomic_keys: BTreeMap<usize, Vec<(Key, u32)>> = BTreeMap::new();
        let len = |l: u64| u32::try_from(l).unwrap_or(u32::MAX);
        for (i, m) in self.mrs.iter().enumerate() {
            if let Some(m) = m.as_ref().filter(|m| m.access.contains(A::REMOTE_ATOMIC)) {
                atomic_keys.entry(m.pd).or_default().push((Key::Mr(i), len(m.len)));
            }
        }
        for (i, m) in self.mkeys.iter().enumerate() {
            if let Some(m) = m.as_ref().filter(|m| m.valid && m.access.contains(A::REMOTE_ATOMIC)) {
                let total = m.layout.runs.iter().map(|r| r.2).sum();
                atomic_keys.entry(m.pd).or_default().push((Key::Mkey(i, m.tag), len(total)));
            }
        }
        let atomics = self.atomics;
        Pool { by_pd, all, linked, qps: self.qps.len(), qp_pds, atomics, mr_base, atomic_keys }
    }

    /// A QP worth posting on: in step with its peer, or in ERR.
    fn linked_or_err(&self, qp: usize) -> bool {
        let Some(Some(q)) = self.qps.get(qp) else { return false };
        !q.unknown && (q.st == St::Err || self.linked_peer(qp).is_some())
    }
}

fn loc(pool: &Arc<Pool>, pd: Option<usize>) -> BoxedStrategy<Loc> {
    let p = Arc::clone(pool);
    (any::<Index>(), 0u32..4096, 0u32..4096, 0u8..20)
        .prop_map(move |(i, a, b, sel)| {
            let own = p.of(pd, sel > 2);
            // Mostly the PD's MRs, then its configured mkeys, now and then any key.
            let keys: Vec<(Key, u32)> = match sel {
                0..=2 => own.keys.clone(),
                3..=7 => own.keys.iter().copied().filter(|k| matches!(k.0, Key::Mkey(..)) && k.1 > 0).collect(),
                _ => own.keys.iter().copied().filter(|k| matches!(k.0, Key::Mr(_))).collect(),
            };
            let mrs = || own.keys.iter().copied().filter(|k| matches!(k.0, Key::Mr(_))).collect::<Vec<_>>();
            let keys = if keys.is_empty() { mrs() } else { keys };
            let keys = if keys.is_empty() { own.keys.clone() } else { keys };
            if keys.is_empty() || sel == 0 {
                return Loc { key: Key::Bogus, off: a % 64, len: 1 + b % 64 };
            }
            let (key, len) = keys[i.index(keys.len())];
            if sel == 1 {
                // Across the end.
                return Loc { key, off: len.saturating_sub(b % 8), len: 1 + b % 64 };
            }
            let l = len.max(1);
            let off = a % l;
            Loc { key, off, len: 1 + b % (l - off).clamp(1, 256) }
        })
        .boxed()
}

fn ent(pool: &Arc<Pool>, pd: Option<usize>) -> BoxedStrategy<Ent> {
    let p = Arc::clone(pool);
    (any::<Index>(), 0u32..4096, 0u32..4096)
        .prop_map(move |(i, a, b)| {
            let mrs = &p.of(pd, true).mrs;
            let Some(&(mr, len)) = mrs.get(i.index(mrs.len().max(1))) else { return Ent::default() };
            let l = len.max(1);
            let off = a % l;
            Ent { mr, off, len: 1 + b % (l - off).clamp(1, 128) }
        })
        .boxed()
}

fn ient(pool: &Arc<Pool>, pd: Option<usize>) -> BoxedStrategy<IEnt> {
    let p = Arc::clone(pool);
    (any::<Index>(), 0u32..64, 1u32..16, 0u32..16)
        .prop_map(move |(i, off, count, skip)| {
            let mrs = &p.of(pd, true).mrs;
            let mr = mrs.get(i.index(mrs.len().max(1))).map_or(0, |m| m.0);
            IEnt { mr, off, count, skip }
        })
        .boxed()
}

/// A tag byte for a configure: mostly 0, the value the suite uses, or any.
fn tag() -> BoxedStrategy<u8> {
    prop_oneof![3 => Just(0u8), 1 => Just(0x5a), 1 => any::<u8>()].boxed()
}

fn access() -> BoxedStrategy<u32> {
    prop_oneof![
        4 => Just((A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ).bits()),
        1 => Just((A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ | A::REMOTE_ATOMIC).bits()),
        2 => Just((A::LOCAL_WRITE | A::REMOTE_WRITE).bits()),
        1 => Just(A::REMOTE_READ.bits()),
        1 => Just(0),
        1 => Just(A::ZERO_BASED.bits()),
    ]
    .boxed()
}

/// An atomic WR: an 8-byte scatter entry (now and then 4 bytes), a remote key of the peer's
/// PD at an 8-byte-aligned address (now and then not), compare values that often match.
fn atomic(pool: &Arc<Pool>, pd: Option<usize>, rpd: Option<usize>) -> BoxedStrategy<Wr> {
    let p = Arc::clone(pool);
    let small = prop_oneof![3 => 0u64..3, 1 => Just(u64::MAX), 1 => any::<u64>()];
    let len = prop_oneof![8 => Just(8u32), 1 => Just(4u32)];
    let aim = prop_oneof![8 => Just(true), 1 => Just(false)];
    let target = (any::<Index>(), 0u8..4);
    (loc(pool, pd), len, loc(pool, rpd), target, aim, any::<bool>(), (small.clone(), small), any::<bool>())
        .prop_map(move |(local, len, r, (i, own), aim, cas, (compare, value), signaled)| {
            // Mostly a key of the peer's PD that allows atomics, inside it.
            let keys = rpd.and_then(|x| p.atomic_keys.get(&x)).filter(|k| !k.is_empty() && own > 0);
            let (key, off) = match keys {
                Some(k) => {
                    let (key, l) = k[i.index(k.len())];
                    (key, r.off % l.saturating_sub(7).max(1))
                }
                None => (r.key, r.off),
            };
            let base = match key {
                Key::Mr(s) => p.mr_base.get(s).copied().unwrap_or(0),
                _ => 0,
            };
            let mis = (base + off) % 8;
            let roff = if aim && off >= mis { off - mis } else { off };
            let local = Loc { off: local.off.saturating_sub(8 - local.len.min(8)), len, ..local };
            Wr::Atomic { local, remote: key, roff, cas, compare, value, signaled }
        })
        .boxed()
}

/// One WR of a QP on PD `pd` whose peer is on PD `rpd`: with atomics now and then where the
/// model drives them.
fn wr(pool: &Arc<Pool>, pd: Option<usize>, rpd: Option<usize>) -> BoxedStrategy<Wr> {
    let plain = plain_wr(pool, pd, rpd);
    if pool.atomics { prop_oneof![8 => plain, 1 => atomic(pool, pd, rpd)].boxed() } else { plain }
}

/// One WR other than an atomic.
fn plain_wr(pool: &Arc<Pool>, pd: Option<usize>, rpd: Option<usize>) -> BoxedStrategy<Wr> {
    let mk = {
        let p = Arc::clone(pool);
        any::<Index>().prop_map(move |i| {
            let m = &p.of(pd, true).mkeys;
            m.get(i.index(m.len().max(1))).copied().unwrap_or(0)
        })
    };
    let mkt = |pd: Option<usize>| {
        let p = Arc::clone(pool);
        any::<Index>().prop_map(move |i| {
            let k: Vec<(usize, u8)> = p
                .of(pd, true)
                .keys
                .iter()
                .filter_map(|k| if let Key::Mkey(m, t) = k.0 { Some((m, t)) } else { None })
                .collect();
            k.get(i.index(k.len().max(1))).copied().unwrap_or((0, 0))
        })
    };
    let remote = loc(pool, rpd);
    // A second SGE now and then: a short one, or an empty one whose key names nothing.
    let more = prop_oneof![
        6 => Just(None),
        1 => loc(pool, pd).prop_map(|l| Some(Loc { len: l.len.min(16), ..l })),
        1 => (0u32..64).prop_map(|off| Some(Loc { key: Key::Bogus, off, len: 0 })),
    ];
    let ents = (0u8..=4, ent(pool, pd), ent(pool, pd), ent(pool, pd), ent(pool, pd));
    let inline = prop_oneof![6 => Just(true), 1 => Just(false)];
    prop_oneof![
        4 => (loc(pool, pd), more.clone(), remote.clone(), any::<bool>()).prop_map(|(local, more, r, signaled)| Wr::Write {
            local: Loc { len: local.len.min(r.len), ..local },
            more,
            remote: r.key,
            roff: r.off,
            signaled
        }),
        3 => (loc(pool, pd), more.clone(), remote, any::<bool>()).prop_map(|(local, more, r, signaled)| Wr::Read {
            local: Loc { len: local.len.min(r.len), ..local },
            more,
            remote: r.key,
            roff: r.off,
            signaled
        }),
        2 => (loc(pool, pd), more, any::<bool>()).prop_map(|(local, more, signaled)| Wr::Send { local, more, signaled }),
        1 => (loc(pool, pd), loc(pool, rpd), any::<u32>(), any::<bool>()).prop_map(|(local, r, imm, signaled)| {
            Wr::WriteImm { local: Loc { len: local.len.min(r.len), ..local }, remote: r.key, roff: r.off, imm, signaled }
        }),
        1 => (loc(pool, pd), any::<u32>(), any::<bool>()).prop_map(|(local, imm, signaled)| Wr::SendImm { local, imm, signaled }),
        5 => (mk.clone(), access(), ents.clone(), inline.clone(), any::<bool>()).prop_map(
            |(mkey, access, (n, a, b, c, d), inline, signaled)| Wr::MrList {
                mkey,
                access,
                n: n.max(1),
                e: [a, b, c, d],
                inline,
                signaled
            }
        ),
        2 => (mk.clone(), access(), (1u32..4, 1u8..=3, ient(pool, pd), ient(pool, pd), ient(pool, pd)), inline.clone(), any::<bool>())
            .prop_map(|(mkey, access, (repeat, n, a, b, c), inline, signaled)| Wr::MrInterleaved {
                mkey,
                access,
                repeat,
                n,
                e: [a, b, c],
                inline,
                signaled
            }),
        2 => (mk, tag(), 0u8..3, prop_oneof![4 => Just(0u32), 1 => Just(1), 1 => Just(2)], inline, any::<bool>())
            .prop_map(|(mkey, tag, setters, conf_flags, inline, signaled)| Wr::Configure {
                mkey,
                tag,
                setters,
                conf_flags,
                inline,
                signaled
            }),
        1 => (mkt(pd), any::<bool>()).prop_map(|((mkey, tag), signaled)| Wr::LocalInv { mkey, tag, signaled }),
        1 => (loc(pool, pd), mkt(rpd), any::<bool>())
            .prop_map(|(local, (mkey, tag), signaled)| Wr::SendInv { local, mkey, tag, signaled }),
        1 => access().prop_map(Wr::Access),
        1 => ents.prop_map(|(n, a, b, c, d)| Wr::List { n, e: [a, b, c, d] }),
        1 => (1u32..4, 1u8..=3, ient(pool, pd), ient(pool, pd), ient(pool, pd))
            .prop_map(|(repeat, n, a, b, c)| Wr::Interleaved { repeat, n, e: [a, b, c] }),
    ]
    .boxed()
}

/// How many live objects of each kind, and how many QPs could carry traffic.
struct Live {
    mlx5_ctxs: usize,
    pds: usize,
    bufs: usize,
    mrs: usize,
    mkeys: usize,
    cqs: usize,
    qps: usize,
    idle_qps: usize,
    linked: usize,
}

impl Model {
    fn live(&self) -> Live {
        let kernel = |c: &Option<super::Ctx>| matches!(c, Some(super::Ctx::Kernel { .. }));
        Live {
            mlx5_ctxs: self.ctxs.iter().filter(|c| kernel(c)).count(),
            pds: self.pds.iter().flatten().count(),
            bufs: self.bufs.iter().flatten().count(),
            mrs: self.mrs.iter().flatten().count(),
            mkeys: self
                .mkeys
                .iter()
                .flatten()
                .filter(|m| !m.flags.intersects(MkeyInitFlags::BLOCK_SIGNATURE | MkeyInitFlags::CRYPTO))
                .count(),
            cqs: self.cqs.iter().flatten().count(),
            qps: self.qps.iter().flatten().count(),
            idle_qps: self.qps.iter().flatten().filter(|q| q.st != St::Rts).count(),
            linked: (0..self.qps.len()).filter(|q| self.linked_peer(*q).is_some()).count(),
        }
    }

    /// The device indices of the list's kernel mlx5 devices.
    fn mlx5_devs(&self) -> Vec<usize> {
        (0..self.devices.len()).filter(|d| self.devices[*d] == mlx5_dv::DeviceKind::Mlx5).collect()
    }
}

/// Weight `hi` while fewer than `want` objects live, else `lo`.
fn need(have: usize, want: usize, hi: u32, lo: u32) -> u32 {
    if have < want { hi } else { lo }
}

/// The ops the state machine generates from `state`: weighted towards building what traffic
/// needs (contexts, PDs, buffers, MRs, mkeys, CQs, connected QPs), then towards traffic.
pub(super) fn transitions(state: &Model) -> BoxedStrategy<Op> {
    let net = net_ops(state, &state.mlx5_devs());
    match (state.net_mode, net) {
        (super::NetMode::Only, Some((_, s))) => s,
        (super::NetMode::Mixed, Some(n)) => {
            proptest::strategy::Union::new_weighted(vec![(24, all_but_net(state)), n]).boxed()
        }
        _ => all_but_net(state),
    }
}

fn all_but_net(state: &Model) -> BoxedStrategy<Op> {
    let (c, p, m, b) = state.slots();
    let live = state.live();
    let flags = prop_oneof![
        6 => Just(MkeyInitFlags::INDIRECT.bits()),
        1 => Just((MkeyInitFlags::INDIRECT | MkeyInitFlags::BLOCK_SIGNATURE).bits()),
        1 => Just((MkeyInitFlags::INDIRECT | MkeyInitFlags::CRYPTO).bits()),
        1 => Just((MkeyInitFlags::INDIRECT | MkeyInitFlags::UPDATE_TAG).bits()),
        1 => Just((MkeyInitFlags::INDIRECT | MkeyInitFlags::REMOTE_INVALIDATE).bits()),
        1 => 0u32..64,
    ];
    let entries = prop_oneof![4 => 0u16..70, 1 => 65530u16..=65535];
    let mdev = state.mlx5_devs();
    let dev = {
        let mdev = mdev.clone();
        (any::<Index>(), 0usize..4, 0u8..4).prop_map(move |(i, raw, r)| match mdev.get(i.index(mdev.len().max(1))) {
            Some(&d) if r > 0 => d,
            _ => raw,
        })
    };
    let open = need(live.mlx5_ctxs, 2, 12, 1);
    let offload = offload_ops(state, &mdev);
    let mut ops: Vec<(u32, BoxedStrategy<Op>)> = vec![
        (open, dev.clone().prop_map(|dev| Op::OpenIbv { dev }).boxed()),
        (open.div_ceil(2), dev.prop_map(|dev| Op::OpenDevx { dev }).boxed()),
        (
            need(live.bufs, 3, 8, 1),
            prop_oneof![1 => Just(0usize), 8 => 64usize..4096, 1 => 4096usize..8192, 1 => Just(1 << 31)]
                .prop_map(|len| Op::AllocBuf { len })
                .boxed(),
        ),
    ];
    if c > 0 {
        ops.push((need(live.pds, 2, 10, 1), slot(c).prop_map(|ctx| Op::AllocPd { ctx }).boxed()));
        ops.push((1, (slot(c), 0u64..1 << 14).prop_map(|(ctx, comp_mask)| Op::QueryDevice { ctx, comp_mask }).boxed()));
        ops.push((1, slot(c).prop_map(|ctx| Op::Close { ctx }).boxed()));
        // Large CQs that succeed would cost their rings; only refused sizes are large.
        let cqe = prop_oneof![1 => Just(0u32), 8 => 1u32..300, 1 => (1u32 << 24)..(1u32 << 26), 1 => Just(u32::MAX)];
        ops.push((need(live.cqs, 2, 10, 1), (slot(c), cqe).prop_map(|(ctx, cqe)| Op::CreateCq { ctx, cqe }).boxed()));
    }
    if p > 0 {
        let s = (slot(p), flags, entries);
        let mk = s.prop_map(|(pd, flags, max_entries)| Op::CreateMkey { pd, flags, max_entries }).boxed();
        ops.push((need(live.mkeys, 2, 8, 2), mk));
        ops.push((1, slot(p).prop_map(|pd| Op::DeallocPd { pd }).boxed()));
    }
    if m > 0 {
        ops.push((1, slot(m).prop_map(|mkey| Op::DestroyMkey { mkey }).boxed()));
    }
    if state.cq_slots() > 0 {
        ops.push((1, slot(state.cq_slots()).prop_map(|cq| Op::DestroyCq { cq }).boxed()));
    }
    if b > 0 {
        ops.push((1, slot(b).prop_map(|buf| Op::FreeBuf { buf }).boxed()));
        ops.push((3, (slot(b), any::<u8>()).prop_map(|(buf, seed)| Op::FillBuf { buf, seed }).boxed()));
    }
    if p > 0 && b > 0 {
        let lens: Arc<Vec<u32>> = Arc::new(state.buf_lens());
        let acc = prop_oneof![
            6 => Just((A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ).bits()),
            2 => Just(A::LOCAL_WRITE.bits()),
            1 => Just((A::LOCAL_WRITE | A::REMOTE_READ).bits()),
            1 => Just(A::REMOTE_READ.bits()),
            1 => Just(A::REMOTE_WRITE.bits()),
            1 => Just((A::REMOTE_ATOMIC | A::REMOTE_READ).bits()),
            2 => Just((A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ | A::REMOTE_ATOMIC).bits()),
        ];
        // PDs of QPs first, those without an MR before the others.
        let mut qp_pds: Vec<usize> = state.qps.iter().flatten().map(|q| q.pd).collect();
        let bare: Vec<usize> =
            qp_pds.iter().copied().filter(|p| !state.mrs.iter().flatten().any(|m| m.pd == *p)).collect();
        if !bare.is_empty() {
            qp_pds = bare;
        }
        let s = (slot(p), any::<Index>(), 0u8..4, slot(b), 0u32..8192, 0u32..8192, acc);
        let reg = s.prop_map(move |(pd, i, raw, buf, a, x, access)| {
            let pd = match qp_pds.get(i.index(qp_pds.len().max(1))) {
                Some(&q) if raw > 0 => q,
                _ => pd,
            };
            let l = lens.get(buf).copied().unwrap_or(1).max(1);
            let off = a % l;
            Op::RegMr { pd, buf, off, len: 1 + x % (l - off), access }
        });
        let want = if state.qps.iter().flatten().any(|q| !state.mrs.iter().flatten().any(|m| m.pd == q.pd)) {
            12
        } else {
            need(live.mrs, 4, 10, 2)
        };
        ops.push((want, reg.boxed()));
    }
    let (mrs, qps) = state.mr_qp_slots();
    if mrs > 0 {
        ops.push((1, slot(mrs).prop_map(|mr| Op::DeregMr { mr }).boxed()));
    }
    if p > 0 && state.cq_slots() > 0 {
        let wr = prop_oneof![
            12 => prop_oneof![Just(1u32), Just(2), Just(3), Just(4), Just(16)],
            1 => Just(8193u32),
            1 => Just(3_000_000u32)
        ];
        let sge = prop_oneof![8 => 1u32..=4, 1 => Just(52u32), 1 => Just(53u32)];
        let inline =
            prop_oneof![8 => Just(0u32), 1 => Just(60u32), 1 => Just(512u32), 1 => Just(828u32), 1 => Just(829u32)];
        let pairs: Arc<Vec<(usize, usize)>> = Arc::new(state.pd_cq_pairs());
        // Half the time on the PD of a QP that exists, so that keys serve both ends.
        let shared: Vec<(usize, usize)> =
            pairs.iter().copied().filter(|pc| state.qps.iter().flatten().any(|q| q.pd == pc.0)).collect();
        let s = (any::<Index>(), slot(p), slot(state.cq_slots()), wr, sge, inline, 0u8..6);
        let create = s.prop_map(move |(i, pd, cq, wr, sge, inline, raw)| {
            let from = if raw > 2 && !shared.is_empty() { &shared } else { &*pairs };
            let (pd, cq) = match from.get(i.index(from.len().max(1))) {
                Some(&pc) if raw > 0 => pc,
                _ => (pd, cq),
            };
            Op::CreateQp { pd, cq, wr, sge, inline }
        });
        ops.push((need(live.qps, 3, 10, 1), create.boxed()));
    }
    if qps > 0 {
        let to = prop_oneof![
            2 => Just(Target::Reset),
            2 => Just(Target::Init),
            2 => slot(qps).prop_map(|p| Target::Rtr(Some(p))),
            1 => Just(Target::Rtr(None)),
            2 => Just(Target::Rts),
            1 => Just(Target::Err),
        ];
        ops.push((2, (slot(qps), to).prop_map(|(qp, to)| Op::ModifyQp { qp, to }).boxed()));
        // Mostly pairs: QP i with i ± 1, or itself.
        let conn = (slot(qps), 0u8..8, slot(qps)).prop_map(move |(qp, how, other)| {
            let peer = match how {
                0 => qp,
                1 => other,
                _ => qp ^ 1,
            };
            Op::Connect { qp, peer: peer.min(qps - 1) }
        });
        ops.push((need(0, live.idle_qps, 12, 1), conn.boxed()));
        ops.push((1, slot(qps).prop_map(|qp| Op::QueryQp { qp }).boxed()));
        ops.push((1, slot(qps).prop_map(|qp| Op::DestroyQp { qp }).boxed()));
        let pool = Arc::new(state.pool());
        let pick = {
            let p = Arc::clone(&pool);
            (any::<Index>(), 0u8..6).prop_map(move |(i, raw)| match p.linked.get(i.index(p.linked.len().max(1))) {
                Some(&q) if raw > 0 => q,
                _ => i.index(p.qps.max(1)),
            })
        };
        let traffic = need(0, live.linked, 24, 2);
        let recv = {
            let p = Arc::clone(&pool);
            pick.clone().prop_flat_map(move |qp| {
                let pd = p.qp_pds.get(qp).and_then(|x| x.0);
                (Just(qp), prop_oneof![1 => Just(None), 8 => loc(&p, pd).prop_map(Some)])
            })
        };
        ops.push((traffic / 3 + 1, recv.prop_map(|(qp, sge)| Op::PostRecv { qp, sge }).boxed()));
        let post = {
            let p = Arc::clone(&pool);
            let n = prop_oneof![6 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)];
            (pick, n).prop_flat_map(move |(qp, n)| {
                let (pd, rpd) = p.qp_pds.get(qp).copied().unwrap_or((None, None));
                (Just(qp), Just(n), wr(&p, pd, rpd), wr(&p, pd, rpd), wr(&p, pd, rpd))
            })
        };
        ops.push((traffic, post.prop_map(|(qp, n, a, b, c)| Op::Post { qp, n, wrs: [a, b, c] }).boxed()));
        // QPs in ERR, or whose state an error at their peer hid, start over through RESET.
        let stuck: Vec<usize> = (0..qps).filter(|q| state.stuck(*q)).collect();
        if !stuck.is_empty() {
            let reset =
                any::<Index>().prop_map(move |i| Op::ModifyQp { qp: stuck[i.index(stuck.len())], to: Target::Reset });
            ops.push((6, reset.boxed()));
        }
    }
    ops.extend(offload);
    ops.extend(remote_ops(state, &mdev));
    proptest::strategy::Union::new_weighted(ops).boxed()
}

/// Atomics, window, datagram, shared-receive, UC and XRC scenarios, where the device has them.
fn remote_ops(state: &Model, mdev: &[usize]) -> Vec<(u32, BoxedStrategy<Op>)> {
    let mut v = Vec::new();
    if mdev.is_empty() {
        return v;
    }
    if state.atomics {
        v.push((1, super::atomic::strategy(mdev.to_vec())));
    }
    if state.windows {
        v.push((1, super::mw::strategy(mdev.to_vec())));
    }
    if state.datagrams {
        v.push((1, super::ud::strategy(mdev.to_vec())));
    }
    if state.srqs {
        v.push((1, super::srq::strategy(mdev.to_vec())));
    }
    if state.uc {
        v.push((1, super::uc::strategy(mdev.to_vec())));
    }
    if state.xrc {
        v.push((1, super::xrc::strategy(mdev.to_vec())));
    }
    v
}

impl Model {
    /// Atomics and window scenarios only ([`Op::Atomic`], [`Op::Mw`]), where the device has
    /// them; `None` when it has neither.
    pub fn remote_strategy(&self) -> Option<BoxedStrategy<Op>> {
        let ops = remote_ops(self, &self.mlx5_devs());
        (!ops.is_empty()).then(|| proptest::strategy::Union::new_weighted(ops).boxed())
    }
}

impl Model {
    /// Signature and crypto scenarios only ([`Op::Sig`], [`Op::Crypto`]), where the device
    /// has them; `None` when it has neither.
    pub fn offload_strategy(&self) -> Option<BoxedStrategy<Op>> {
        let ops = offload_ops(self, &self.mlx5_devs());
        (!ops.is_empty()).then(|| proptest::strategy::Union::new_weighted(ops).boxed())
    }
}

/// Signature and crypto scenarios, where the device has them and the model can judge them.
fn offload_ops(state: &Model, mdev: &[usize]) -> Vec<(u32, BoxedStrategy<Op>)> {
    let mut v = Vec::new();
    if mdev.is_empty() || state.offload_dev(mdev[0]).is_none() {
        return v;
    }
    if state.sig_scenarios() {
        v.push((1, super::sig::strategy(state, mdev.to_vec())));
    }
    if state.dek_mode().is_some() {
        v.push((1, super::xts::strategy(state, mdev.to_vec())));
    }
    v
}

/// Network scenarios, where the backend has simulator control.
fn net_ops(state: &Model, mdev: &[usize]) -> Option<(u32, BoxedStrategy<Op>)> {
    (state.sim_control && !mdev.is_empty()).then(|| (1, super::net::strategy(mdev.to_vec())))
}

impl Model {
    /// Network scenarios only ([`Op::Net`]), where the backend has simulator control.
    pub fn net_strategy(&self) -> Option<BoxedStrategy<Op>> {
        net_ops(self, &self.mlx5_devs()).map(|x| x.1)
    }
}

impl Model {
    /// A live QP in ERR or of unknown state.
    fn stuck(&self, qp: usize) -> bool {
        self.qps.get(qp).and_then(|q| q.as_ref()).is_some_and(|q| q.unknown || q.st == St::Err)
    }

    fn buf_lens(&self) -> Vec<u32> {
        self.bufs.iter().map(|b| b.as_ref().map_or(1, |b| u32::try_from(b.len).unwrap_or(u32::MAX))).collect()
    }

    /// (PD, CQ) slot pairs of one live context.
    fn pd_cq_pairs(&self) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        for (p, pd) in self.pds.iter().enumerate() {
            for (c, cq) in self.cqs.iter().enumerate() {
                if let (Some(pd), Some(cq)) = (pd, cq)
                    && pd.ctx == cq.ctx
                {
                    v.push((p, c));
                }
            }
        }
        v
    }
}

/// Whether `op` names only slots that exist, and the model can judge it.
pub(super) fn judged(state: &Model, op: &Op) -> bool {
    let (c, p, m, b) = state.slots();
    let (mrs, qps) = state.mr_qp_slots();
    let named = match *op {
        Op::Close { ctx } | Op::QueryDevice { ctx, .. } | Op::AllocPd { ctx } => ctx < c,
        Op::DeallocPd { pd } | Op::CreateMkey { pd, .. } => pd < p,
        Op::DestroyMkey { mkey } => mkey < m,
        Op::FreeBuf { buf } | Op::FillBuf { buf, .. } => buf < b,
        Op::CreateCq { ctx, .. } => ctx < c && !state.is_other(ctx),
        Op::DestroyCq { cq } => cq < state.cq_slots(),
        Op::OpenIbv { .. } | Op::OpenDevx { .. } | Op::AllocBuf { .. } => true,
        Op::RegMr { pd, buf, .. } => pd < p && buf < b,
        Op::DeregMr { mr } => mr < mrs,
        Op::CreateQp { pd, cq, .. } => pd < p && cq < state.cq_slots(),
        Op::ModifyQp { qp, to } => qp < qps && !matches!(to, Target::Rtr(Some(x)) if x >= qps),
        Op::Connect { qp, peer } => qp < qps && peer < qps,
        Op::QueryQp { qp } | Op::DestroyQp { qp } => qp < qps,
        Op::PostRecv { qp, sge } => qp < qps && sge.is_none_or(|l| state.names_key(l.key)),
        Op::Sig(_)
        | Op::Crypto(_)
        | Op::Net(_)
        | Op::Atomic(_)
        | Op::Mw(_)
        | Op::Ud(_)
        | Op::Srq(_)
        | Op::Uc(_)
        | Op::Xrc(_) => true,
        Op::Post { qp, n, wrs } => {
            let n = usize::from(n).clamp(1, wrs.len());
            qp < qps && wrs[..n].iter().all(|w| state.names_wr(w))
        }
    };
    named && state.clone().step(op) != super::Expect::Unknown
}

impl Model {
    fn names_key(&self, k: Key) -> bool {
        match k {
            Key::Mr(s) => s < self.mrs.len(),
            Key::Mkey(s, _) => s < self.mkeys.len(),
            Key::Bogus => true,
        }
    }

    fn names_wr(&self, w: &Wr) -> bool {
        let ents = |n: u8, e: &[Ent]| e.iter().take(usize::from(n)).all(|x| x.mr < self.mrs.len());
        match *w {
            Wr::Write { local, more, remote, .. } | Wr::Read { local, more, remote, .. } => {
                self.names_key(local.key) && self.names_key(remote) && more.is_none_or(|m| self.names_key(m.key))
            }
            Wr::Send { local, more, .. } => self.names_key(local.key) && more.is_none_or(|m| self.names_key(m.key)),
            Wr::WriteImm { local, remote, .. } => self.names_key(local.key) && self.names_key(remote),
            Wr::SendImm { local, .. } => self.names_key(local.key),
            Wr::Atomic { local, remote, .. } => self.names_key(local.key) && self.names_key(remote),
            Wr::SendInv { local, mkey, .. } => self.names_key(local.key) && mkey < self.mkeys.len(),
            Wr::Configure { mkey, .. } | Wr::LocalInv { mkey, .. } => mkey < self.mkeys.len(),
            Wr::Access(_) => true,
            Wr::List { n, e } => ents(n, &e),
            Wr::Interleaved { n, e, .. } => e.iter().take(usize::from(n)).all(|x| x.mr < self.mrs.len()),
            Wr::MrList { mkey, n, e, .. } => mkey < self.mkeys.len() && ents(n, &e),
            Wr::MrInterleaved { mkey, n, e, .. } => {
                mkey < self.mkeys.len() && e.iter().take(usize::from(n)).all(|x| x.mr < self.mrs.len())
            }
        }
    }
}
