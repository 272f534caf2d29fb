//! Arbitrary bytes as a sequence of API calls on the simulator (a byte picks the call, the
//! next bytes its arguments and which earlier object it names). Every call answers, and every
//! error is an errno the API returns.

use mlx5_dv::prelude::*;
use mlx5_dv::{
    AccessFlags, Buf, Call, ContextAttr, ContextFlags, ContextHandle, Cq, CqHandle, Mkey, MkeyInitAttr, MkeyInitFlags,
    Mr, PdHandle, Qp, QpCap, QpInitAttr, QpModify, QpState, RecvWr, Reply, Sge, Srq, SrqAttr, SrqInitAttr, errno,
};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

#[derive(Default)]
struct Objects {
    ctxs: Vec<ContextHandle>,
    pds: Vec<PdHandle>,
    bufs: Vec<Buf>,
    mrs: Vec<Mr>,
    mkeys: Vec<Mkey>,
    cqs: Vec<Cq>,
    qps: Vec<Qp>,
    srqs: Vec<Srq>,
}

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
        let i = usize::from(self.u8());
        if v.is_empty() { None } else { Some(v[i % v.len()]) }
    }
}

fn call(b: &mut Bytes<'_>, o: &Objects, devices: &[String]) -> Option<Call> {
    let device = |b: &mut Bytes<'_>| devices.get(usize::from(b.u8()) % devices.len().max(1)).cloned();
    Some(match b.u8() % 22 {
        0 => Call::OpenIbvDevice { device: device(b)? },
        1 => {
            let flags = ContextFlags::from_bits_retain(u32::from(b.u8() & 3));
            Call::OpenDevice { device: device(b)?, attr: Some(ContextAttr { flags, comp_mask: u64::from(b.u8() & 3) }) }
        }
        2 => Call::AllocPd { ctx: b.pick(&o.ctxs)? },
        3 => Call::DeallocPd { pd: b.pick(&o.pds)? },
        4 => Call::AllocBuf { len: usize::from(b.u16()) * 16 },
        5 => {
            let buf = b.pick(&o.bufs)?;
            let addr = buf.addr + u64::from(b.u16());
            Call::RegMr {
                pd: b.pick(&o.pds)?,
                addr,
                length: u64::from(b.u16()),
                access: AccessFlags::from_bits_retain(u32::from(b.u8())),
            }
        }
        6 => Call::DeregMr { mr: b.pick(&o.mrs)? },
        7 => {
            let create_flags = MkeyInitFlags::from_bits_retain(u32::from(b.u8()));
            Call::CreateMkey { attr: MkeyInitAttr { pd: b.pick(&o.pds)?, create_flags, max_entries: b.u16() } }
        }
        8 => Call::DestroyMkey { mkey: b.pick(&o.mkeys)? },
        9 => Call::MkeyCheck { mkey: b.pick(&o.mkeys)? },
        10 => Call::CreateCq { ctx: b.pick(&o.ctxs)?, cqe: u32::from(b.u16()), comp_vector: u32::from(b.u8() % 4) },
        11 => Call::DestroyCq { cq: b.pick(&o.cqs)? },
        12 => {
            let cq: CqHandle = b.pick(&o.cqs)?.handle;
            let cap = QpCap {
                max_send_wr: u32::from(b.u8()),
                max_recv_wr: u32::from(b.u8()),
                max_send_sge: u32::from(b.u8() & 31),
                max_recv_sge: u32::from(b.u8() & 31),
                max_inline_data: u32::from(b.u16()),
            };
            let srq = if b.u8() & 1 == 1 { b.pick(&o.srqs).map(|s| s.handle) } else { None };
            Call::CreateQp { attr: QpInitAttr { srq, ..QpInitAttr::rc(b.pick(&o.pds)?, cq, cap, None) } }
        }
        13 => {
            let state =
                [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts, QpState::Err][usize::from(b.u8() % 5)];
            Call::ModifyQp { qp: b.pick(&o.qps)?, attr: QpModify::to(state) }
        }
        14 => Call::DestroyQp { qp: b.pick(&o.qps)? },
        15 => {
            let buf = b.pick(&o.bufs)?;
            let (offset, n) = (usize::from(b.u16()), usize::from(b.u8()));
            Call::WriteBuf { buf, offset, data: vec![b.u8(); n] }
        }
        16 => Call::PollCq { cq: b.pick(&o.cqs)?, max: usize::from(b.u8()) },
        18 => Call::CreateSrq {
            attr: SrqInitAttr {
                pd: b.pick(&o.pds)?,
                max_wr: u32::from(b.u16()),
                max_sge: u32::from(b.u8() & 63),
                xrc: None,
                tm: None,
            },
        },
        19 => {
            let srq = b.pick(&o.srqs)?;
            let mr = b.pick(&o.mrs);
            let wrs = (0..b.u8() % 8)
                .map(|i| {
                    let n = usize::from(b.u8() % 5);
                    let sge = Sge {
                        addr: mr.map_or(0, |m| m.addr) + u64::from(b.u8()),
                        length: u32::from(b.u16()),
                        lkey: mr.map_or(u32::from(b.u16()), |m| m.lkey),
                    };
                    RecvWr { wr_id: u64::from(i), sge: vec![sge; n] }
                })
                .collect();
            Call::PostSrqRecv { srq, wrs }
        }
        20 => {
            let attr = SrqAttr { max_wr: u32::from(b.u16()), max_sge: 0, srq_limit: u32::from(b.u16()) };
            Call::ModifySrq { srq: b.pick(&o.srqs)?, attr, mask: u32::from(b.u8() & 7) }
        }
        21 => match b.u8() & 1 {
            0 => Call::DestroySrq { srq: b.pick(&o.srqs)? },
            _ => Call::QuerySrq { srq: b.pick(&o.srqs)? },
        },
        _ => Call::CloseDevice { ctx: b.pick(&o.ctxs)? },
    })
}

fn learn(o: &mut Objects, r: &Reply) {
    match r {
        Reply::OpenIbvDevice(Ok(c)) | Reply::OpenDevice(Ok(c)) => o.ctxs.push(*c),
        Reply::AllocPd(Ok(p)) => o.pds.push(*p),
        Reply::AllocBuf(Ok(b)) => o.bufs.push(*b),
        Reply::RegMr(Ok(m)) => o.mrs.push(*m),
        Reply::CreateMkey(Ok(m)) => o.mkeys.push(*m),
        Reply::CreateCq(Ok(c)) => o.cqs.push(*c),
        Reply::CreateQp(Ok(q)) => o.qps.push(*q),
        Reply::CreateSrq(Ok(s)) => o.srqs.push(*s),
        _ => {}
    }
}

thread_local! {
    /// The shipped profiles, parsed once: parsing one was most of a short input's time.
    static PROFILES: Vec<Profile> =
        Profile::builtin_names().into_iter().map(|n| Profile::builtin(n).expect("a shipped profile")).collect();
}

/// Run up to 64 calls `data` spells, on the shipped profile its first byte picks.
pub fn calls(data: &[u8]) {
    let mut b = Bytes(data);
    let pick = usize::from(b.u8());
    let profile = PROFILES.with(|p| p[pick % p.len()].clone());
    let mut sim = Simulator::new(profile).expect("a shipped profile");
    let devices: Vec<String> = sim.device_list().unwrap_or_default().into_iter().map(|d| d.name).collect();
    let mut o = Objects::default();
    for _ in 0..64 {
        if b.0.is_empty() {
            break;
        }
        let Some(c) = call(&mut b, &o, &devices) else { continue };
        let r = c.apply(&mut sim);
        if let Some(e) = r.error() {
            assert!(errno::name(e.errno()).is_some(), "{c:?}: an errno the API does not return: {e}");
        }
        learn(&mut o, &r);
    }
}
