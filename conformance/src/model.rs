//! A reference model of the API's observable behaviour, written from `docs/behaviour.md`:
//! contexts (with DEVX or not, VFIO, other providers), PDs, mkeys, CQs, buffers, MRs, RC QPs
//! and their state machine, work-request chains (mkey configure with its tag byte and its
//! setters, SQ room, SGE counts) and the traffic they carry (RDMA WRITE, READ, SEND and the
//! immediate variants, LOCAL_INV and SEND_WITH_INV of mkeys, RC atomics where the device
//! does them, through MRs and list and interleaved mkeys), and two families of scenarios on
//! objects of their own: signature ([`SigOp`]: T10-DIF and CRC domains, corrupted PI, the
//! first error `mlx5dv_mkey_check` decodes; CRC where [`probe_crc`] learned the device's PI
//! byte order) and crypto ([`CryptoOp`]: the AES-XTS round trip, with a memory or wire
//! signature (or both) in either order, a crypto mkey without attributes); and, on a backend
//! with simulator control, a third on two devices: network scenarios ([`NetOp`]: a chain of
//! messages under seeded fault rules on the simulator's fabric in memory, item 251), drawn
//! as [`NetMode`] says; and, where a probe finds them ([`probe_remote`]), RC atomics
//! ([`AtomicOp`]: compare-and-swap and fetch-and-add chains, items 121–126) and memory
//! windows ([`MwOp`]: binds, access through the window, invalidation, items 171–180); and,
//! where a UD QP is made on a RoCE port ([`probe_datagrams`]), datagrams ([`UdOp`]: Q_Keys,
//! missing and short receives, past the MTU, items 146–150); and where it makes SRQs
//! ([`probe_srq`]), shared receives ([`SrqOp`]: two QPs taking one SRQ's WQEs in order, RNR
//! on an empty SRQ, a QP's error leaving the WQEs, items 135 and 137); and where it connects
//! UC QPs ([`probe_uc`]), UC messages ([`UcOp`]: no answers, silent drops, READ refused,
//! items 141–145); and where it has XRC ([`probe_xrc`]), XRC messages ([`XrcOp`]: each to
//! the SRQ it names, refused for another domain's SRQ or another PD's key, items 187–189).
//! For each [`Op`] it
//! says what the call must answer — an errno, or success with the values the checklist fixes
//! — how the state changes, and after traffic which completions each CQ must hold and which
//! bytes each touched buffer must contain ([`Effects`]).
//!
//! Ops name objects by their position among the objects of their kind made so far (slot `i`
//! is the `i`-th successful create), so the same op sequence means the same thing on any
//! backend; a slot whose object was destroyed stays, and using it is a stale handle.
//!
//! Where neither the docs nor rdma-core fix an outcome (a request into a responder whose PSNs
//! are out of step, a key of another device's key space, a SEND with no receive posted), the
//! model answers [`Expect::Unknown`] and the state machine never generates that op.
//!
//! Not modelled yet: signature copy masks of one's own, signature and crypto mkeys and windows
//! in the op-by-op traffic, SQD, WRs of more than two SGEs, receives of more than one, RNR
//! outside the network scenarios, SRQs in the op-by-op traffic, QP types other than RC (and
//! UD's scenarios), DEVX objects and EQs; CQs on contexts of other providers; MRs and QPs on
//! VFIO contexts.
//!
//! With the `model` feature of `mlx5-conformance` the model and the strategies are public. A
//! property of one's own over the simulator:
//!
//! ```
//! use mlx5_conformance::model::{Machine, Model, check_ops};
//! use mlx5_dv::prelude::*;
//! use mlx5_sim::Simulator;
//! use proptest::test_runner::{Config, TestRunner};
//! use proptest_state_machine::ReferenceStateMachine;
//!
//! let make = || Simulator::with_profile("cx6dx").expect("a shipped profile");
//! let mut sim = make();
//! let kinds = sim.device_list().unwrap().into_iter().map(|d| d.kind).collect();
//! let start = Model::new(&sim.caps(), kinds).expect("the simulator knows its kernel");
//! Machine::start_from(start);
//! let mut runner = TestRunner::new(Config { cases: 8, ..Config::default() });
//! let ops = Machine::sequential_strategy(1..30);
//! runner
//!     .run(&ops, |(model, ops, _)| {
//!         let mut model = model;
//!         check_ops(&mut make(), &mut model, &ops).map_err(proptest::test_runner::TestCaseError::fail)
//!     })
//!     .unwrap();
//! ```

mod across;
mod atomic;
mod features;
mod machine;
mod mw;
mod net;
pub(crate) mod netrig;
mod op;
mod outcome;
mod pairrig;
mod qp;
mod rig;
mod run;
mod sig;
mod srq;
mod srqrig;
mod strategy;
#[cfg(test)]
mod tests;
mod traffic;
mod uc;
mod ucrig;
mod ud;
mod udrig;
mod xrc;
mod xrcrig;
mod xts;

pub use across::{NetFailure, discover_across, run_across, run_net_in_memory};
pub use atomic::{AtomicOp, AtomicWr};
pub use features::NetMode;
pub use machine::{Failure, Machine, check_ops, discover, discover_with};
pub use mw::{MwOp, MwStep};
pub use net::{MsgKind, NetMsg, NetOp, NetRule, SLOT, TIMEOUT, schedules};
pub use op::{Ent, Expect, IEnt, Key, Loc, Op, Target, Wr};
pub use outcome::{NetCqe, Outcome};
pub use pairrig::probe_remote;
pub use rig::probe_crc;
pub use sig::{Corrupt, Crc, CrcFacts, Dif, Dom, SigOp};
pub use srq::{SrqOp, SrqStep};
pub use srqrig::probe_srq;
pub use traffic::{Effects, ExpCqe};
pub use uc::{UC_LONG, UC_RECV_LEN, UC_TARGET_LEN, UcKind, UcMsg, UcOp};
pub use ucrig::probe_uc;
pub use ud::{OTHER_QKEY, QKEY, RECV_LEN, SHORT_LEN, UdMsg, UdOp};
pub use udrig::probe_datagrams;
pub use xrc::{FOREIGN_SRQ, XRC_LEN, XRC_SRC_LEN, XRC_TARGET_LEN, XrcKind, XrcMsg, XrcOp};
pub use xrcrig::probe_xrc;
pub use xts::{CryptoOp, CryptoSig, DekMode};

use std::collections::VecDeque;
use std::sync::Arc;

use mlx5_dv::errno::{EBUSY, EINVAL, EOPNOTSUPP};
use mlx5_dv::{
    AccessFlags, Caps, DeviceKind, MLX5DV_CONTEXT_MASK_CQE_COMPRESION, MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD,
    MLX5DV_CONTEXT_MASK_DC_ODP_CAPS, MLX5DV_CONTEXT_MASK_DCI_STREAMS, MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD,
    MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH, MkeyInitFlags,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// A kernel mlx5 context; `devx`: it has a DEVX uid.
    Kernel {
        devx: bool,
    },
    Vfio,
    Other,
}

#[derive(Debug, Clone, Copy)]
struct Pd {
    ctx: usize,
}

/// A zero-based layout: runs of `(mr slot, offset in the MR, length)` in mkey order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Layout {
    runs: Vec<(usize, u64, u64)>,
}

#[derive(Debug, Clone)]
struct Mkey {
    pd: usize,
    flags: MkeyInitFlags,
    /// The written-back `max_entries`.
    num_desc: u16,
    /// A configure made it valid (item 25).
    valid: bool,
    /// The key's low byte the last configure wrote (item 24).
    tag: u8,
    /// Access from the last access setter (local read is implied, item 28).
    access: AccessFlags,
    layout: Layout,
}

#[derive(Debug, Clone)]
struct Mr {
    pd: usize,
    buf: usize,
    off: u64,
    len: u64,
    access: AccessFlags,
}

#[derive(Debug, Clone)]
struct Buffer {
    len: usize,
    data: Arc<Vec<u8>>,
}

#[derive(Debug, Clone, Copy)]
struct CqM {
    ctx: usize,
    cap: u32,
}

/// A QP's state as far as the model knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Reset,
    Init,
    Rtr,
    Rts,
    Err,
}

/// A posted receive: its wr_id and its one SGE (none: a 0-SGE receive).
#[derive(Debug, Clone, Copy)]
struct Recv {
    wr_id: u64,
    sge: Option<Loc>,
}

#[derive(Debug, Clone)]
struct QpM {
    pd: usize,
    cq: usize,
    st: St,
    /// An error at the peer may have changed the state: only RESET, ERR, destroy are judged.
    unknown: bool,
    /// `ibv_wr_complete` is the real one (RTS was reached since creation or RESET, item 20).
    enabled: bool,
    /// The provider's `rq.qp_state_max_gs` (item 88).
    rq_gs: i32,
    /// The SQ's `max_post` and the QP's `max_inline_data`.
    max_post: u32,
    max_inline: u32,
    /// `max_send_sge`.
    max_gs: u32,
    /// Send WRs posted and not yet retired by a polled completion.
    sq_used: u32,
    recvs: VecDeque<Recv>,
    /// The QP slot RTR named.
    peer: Option<usize>,
    /// Incremented at each RTR: the expected PSN starts over.
    rx_gen: u64,
    /// No request arrived since the last RTR.
    rx_fresh: bool,
    /// A request left since the last RTS.
    tx_sent: bool,
    /// The peer's `rx_gen` this QP's PSNs are in step with.
    bound: Option<u64>,
    /// A configure is open from an earlier chain (item 26: libmlx5 keeps it).
    dangling: bool,
}

/// The receive queue depth and scatter count every modelled QP is created with.
const RECV_WR: u32 = 8;
const RECV_SGE: u32 = 2;

/// The model's state: the backend's facts, and every object slot (None once destroyed).
#[derive(Debug, Clone)]
pub struct Model {
    devices: Vec<DeviceKind>,
    devx: bool,
    update_tag: bool,
    sig: bool,
    crypto: bool,
    sig_caps: mlx5_dv::SigCaps,
    crypto_caps: mlx5_dv::CryptoCaps,
    obj_types: Option<u64>,
    /// The backend is the simulator: its published test credential and KEK hold.
    sim_control: bool,
    max_qp_wr: Option<u32>,
    ctxs: Vec<Option<Ctx>>,
    /// The device index of each context slot.
    ctx_dev: Vec<usize>,
    pds: Vec<Option<Pd>>,
    mkeys: Vec<Option<Mkey>>,
    bufs: Vec<Option<Buffer>>,
    mrs: Vec<Option<Mr>>,
    cqs: Vec<Option<CqM>>,
    qps: Vec<Option<QpM>>,
    log_max_cq_sz: Option<u8>,
    /// The number of ops stepped: wr_ids are `seq << 8 | position`.
    seq: u64,
    effects: Effects,
    /// Received payloads of the op being stepped that land when their CQE is polled.
    pending: Vec<(traffic::Runs, Vec<u8>)>,
    /// Where the READs and atomics of the op being stepped land: without a fence a later WR
    /// of the chain may read or write those bytes before or after the answer lands.
    landing: traffic::Runs,
    /// Whether the state machine generates network scenarios.
    net_mode: NetMode,
    /// The first mlx5 device does RC atomics (a QP with the atomic send ops is created).
    atomics: bool,
    /// The first mlx5 device has memory windows (`ibv_alloc_mw` succeeds).
    windows: bool,
    /// The first mlx5 device runs the datagram scenarios (a UD QP on a RoCE port).
    datagrams: bool,
    /// The first mlx5 device makes SRQs.
    srqs: bool,
    /// The first mlx5 device connects UC QPs.
    uc: bool,
    /// The first mlx5 device has XRC domains.
    xrc: bool,
    /// What a probe learned of the first mlx5 device's CRC PI; without it no CRC domain is
    /// drawn.
    crc: Option<sig::CrcFacts>,
}

/// `max_entries` rounded up to a multiple of 4 in 16 bits (item 12).
pub fn round_entries(n: u16) -> u16 {
    n.wrapping_add(3) & !3
}

/// The bytes [`Op::FillBuf`] writes.
pub fn fill_pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ ((i >> 8) as u8)).collect()
}

/// The wr_id of WR `k` of the op stepped `seq`-th; receives have bit 63 set.
pub fn wr_id(seq: u64, k: usize, recv: bool) -> u64 {
    (seq << 8) | (k as u64 & 0xff) | if recv { 1 << 63 } else { 0 }
}

impl Model {
    /// A model of a backend with these caps and devices. Its facts must be known: a model
    /// of a backend whose kernel facts are unknown is `None`.
    pub fn new(caps: &Caps, devices: Vec<DeviceKind>) -> Option<Self> {
        Some(Model {
            devices,
            devx: caps.kernel.devx?,
            update_tag: caps.kernel.mkey_update_tag?,
            sig: caps.device.sig.block_prot != 0,
            crypto: caps.device.has_crypto_engine(),
            sig_caps: caps.device.sig,
            crypto_caps: caps.device.crypto,
            obj_types: caps.device.general_obj_types,
            sim_control: caps.sim_control,
            max_qp_wr: caps.device.max_qp_wr,
            ctxs: Vec::new(),
            ctx_dev: Vec::new(),
            pds: Vec::new(),
            mkeys: Vec::new(),
            bufs: Vec::new(),
            mrs: Vec::new(),
            cqs: Vec::new(),
            qps: Vec::new(),
            log_max_cq_sz: caps.device.log_max_cq_sz,
            seq: 0,
            effects: Effects::default(),
            pending: Vec::new(),
            landing: Vec::new(),
            net_mode: NetMode::Off,
            atomics: false,
            windows: false,
            datagrams: false,
            srqs: false,
            uc: false,
            xrc: false,
            crc: None,
        })
    }

    /// The number of slots of each kind: (contexts, PDs, mkeys, buffers).
    pub fn slots(&self) -> (usize, usize, usize, usize) {
        (self.ctxs.len(), self.pds.len(), self.mkeys.len(), self.bufs.len())
    }

    /// The number of CQ slots.
    pub fn cq_slots(&self) -> usize {
        self.cqs.len()
    }

    /// The number of (MR, QP) slots.
    pub fn mr_qp_slots(&self) -> (usize, usize) {
        (self.mrs.len(), self.qps.len())
    }

    /// Whether context slot `ctx` is of another provider (rxe, siw): no CQ ops are modelled
    /// there.
    pub fn is_other(&self, ctx: usize) -> bool {
        self.ctxs.get(ctx).copied().flatten() == Some(Ctx::Other)
    }

    /// What the last [`Model::step`] expects besides its answer.
    pub fn effects(&self) -> &Effects {
        &self.effects
    }

    /// The live CQ slots.
    pub fn live_cqs(&self) -> Vec<usize> {
        (0..self.cqs.len()).filter(|c| self.cqs[*c].is_some()).collect()
    }

    /// Whether QP slot `qp` is live and its state is known.
    pub fn qp_known(&self, qp: usize) -> bool {
        self.qps.get(qp).and_then(|q| q.as_ref()).is_some_and(|q| !q.unknown)
    }

    /// The CQ slot of live QP slot `qp`.
    pub fn qp_cq(&self, qp: usize) -> Option<usize> {
        self.qps.get(qp).and_then(|q| q.as_ref()).map(|q| q.cq)
    }

    /// Whether QP slot `qp` is live.
    pub fn qp_live(&self, qp: usize) -> bool {
        self.qps.get(qp).is_some_and(|q| q.is_some())
    }

    /// The model's bytes of buffer slot `buf`, if live.
    pub fn buf_bytes(&self, buf: usize) -> Option<&[u8]> {
        self.bufs.get(buf).and_then(|b| b.as_ref()).map(|b| b.data.as_slice())
    }

    fn live_ctx(&self, i: usize) -> Option<Ctx> {
        self.ctxs.get(i).copied().flatten()
    }

    fn pd_ctx(&self, pd: usize) -> Option<usize> {
        self.pds.get(pd).copied().flatten().map(|p| p.ctx)
    }

    /// What `op` must answer, and the state after it.
    pub fn step(&mut self, op: &Op) -> Expect {
        self.effects = Effects::default();
        self.pending.clear();
        self.landing.clear();
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let r = match *op {
            Op::RegMr { pd, buf, off, len, access } => self.reg_mr(pd, buf, off, len, access),
            Op::DeregMr { mr } => self.dereg_mr(mr),
            Op::FillBuf { buf, seed } => self.fill_buf(buf, seed),
            Op::CreateQp { pd, cq, wr, sge, inline } => self.create_qp(pd, cq, wr, sge, inline),
            Op::ModifyQp { qp, to } => self.modify(qp, to),
            Op::Connect { qp, peer } => self.connect(qp, peer),
            Op::QueryQp { qp } => self.query_qp(qp),
            Op::DestroyQp { qp } => self.destroy_qp(qp),
            Op::PostRecv { qp, sge } => self.post_recv(qp, sge, seq),
            Op::Post { qp, n, wrs } => {
                let n = usize::from(n).clamp(1, wrs.len());
                self.post(qp, &wrs[..n], seq)
            }
            Op::Sig(ref s) => self.sig_step(s),
            Op::Crypto(ref c) => self.crypto_step(c),
            Op::Net(ref x) => self.net_step(x),
            Op::Atomic(ref x) => self.atomic_step(x),
            Op::Mw(ref x) => self.mw_step(x),
            Op::Ud(ref x) => self.ud_step(x),
            Op::Srq(ref x) => self.srq_step(x),
            Op::Uc(ref x) => self.uc_step(x),
            Op::Xrc(ref x) => self.xrc_step(x),
            _ => self.step_objects(op),
        };
        if r != Expect::Unknown && !self.cqs_hold() {
            return Expect::Unknown;
        }
        r
    }

    /// Contexts, PDs, mkeys, CQs and buffers.
    fn step_objects(&mut self, op: &Op) -> Expect {
        use Expect::{Errno, Ok as Fine};
        match *op {
            Op::OpenIbv { dev } | Op::OpenDevx { dev } => {
                let explicit = matches!(op, Op::OpenDevx { .. });
                let d = dev % self.devices.len().max(1);
                let Some(kind) = self.devices.get(d).copied() else {
                    return Errno(mlx5_dv::errno::ENODEV);
                };
                let ctx = match (kind, explicit) {
                    // Item 1: mlx5dv_open_device only opens kernel mlx5 devices.
                    (DeviceKind::Mlx5Vfio | DeviceKind::Other, true) => return Errno(EOPNOTSUPP),
                    // Item 3: explicit DEVX fails with the kernel's refusal; plain falls back.
                    (DeviceKind::Mlx5, true) if !self.devx => return Errno(EINVAL),
                    (DeviceKind::Mlx5, _) => Ctx::Kernel { devx: self.devx },
                    (DeviceKind::Mlx5Vfio, false) => Ctx::Vfio,
                    (DeviceKind::Other, false) => Ctx::Other,
                };
                self.ctxs.push(Some(ctx));
                self.ctx_dev.push(d);
                Fine(None)
            }
            Op::Close { ctx } => {
                if self.live_ctx(ctx).is_none() {
                    return Errno(EINVAL);
                }
                self.close(ctx);
                Fine(None)
            }
            Op::QueryDevice { ctx, comp_mask } => match self.live_ctx(ctx) {
                None => Errno(EINVAL),
                Some(Ctx::Kernel { .. }) => {
                    // Items 6, 252, 272, 300 and 304: the six known parts are echoed when
                    // asked for.
                    let known = MLX5DV_CONTEXT_MASK_CQE_COMPRESION
                        | MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD
                        | MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD
                        | MLX5DV_CONTEXT_MASK_WR_MEMCPY_LENGTH
                        | MLX5DV_CONTEXT_MASK_DCI_STREAMS
                        | MLX5DV_CONTEXT_MASK_DC_ODP_CAPS;
                    Fine(Some(comp_mask & known))
                }
                Some(_) => Errno(EOPNOTSUPP),
            },
            Op::AllocPd { ctx } => {
                if self.live_ctx(ctx).is_none() {
                    return Errno(EINVAL);
                }
                self.pds.push(Some(Pd { ctx }));
                Fine(None)
            }
            Op::DeallocPd { pd } => {
                if self.pds.get(pd).copied().flatten().is_none() {
                    return Errno(EINVAL);
                }
                let used = self.mkeys.iter().flatten().any(|m| m.pd == pd)
                    || self.mrs.iter().flatten().any(|m| m.pd == pd)
                    || self.qps.iter().flatten().any(|q| q.pd == pd);
                if used {
                    return Errno(EBUSY);
                }
                self.pds[pd] = None;
                Fine(None)
            }
            Op::CreateMkey { pd, flags, max_entries } => self.create_mkey(pd, flags, max_entries),
            Op::DestroyMkey { mkey } => {
                if self.mkeys.get(mkey).and_then(|m| m.as_ref()).is_none() {
                    return Errno(EINVAL);
                }
                self.mkeys[mkey] = None;
                Fine(None)
            }
            Op::CreateCq { ctx, cqe } => match self.live_ctx(ctx) {
                None => Errno(EINVAL),
                // libibverbs' dummy create_cq on a provider without one (item 85's rule).
                Some(Ctx::Vfio) => Errno(EOPNOTSUPP),
                Some(_) => {
                    // Item 79: cqe + 1 rounded up to a power of two, within 2^log_max_cq_sz
                    // and 2^24.
                    let n = (u64::from(cqe) + 1).next_power_of_two();
                    let max = self.log_max_cq_sz.map_or(1 << 24, |l| 1u64 << l.min(24));
                    if cqe == 0 || n > max || u64::from(cqe) > max {
                        return Errno(EINVAL);
                    }
                    let cap = u32::try_from(n - 1).unwrap_or(u32::MAX);
                    self.cqs.push(Some(CqM { ctx, cap }));
                    Fine(Some(n - 1))
                }
            },
            Op::DestroyCq { cq } => {
                if self.cqs.get(cq).copied().flatten().is_none() {
                    return Errno(EINVAL);
                }
                // The trait: EBUSY while a QP uses it.
                if self.qps.iter().flatten().any(|q| q.cq == cq) {
                    return Errno(EBUSY);
                }
                self.cqs[cq] = None;
                Fine(None)
            }
            Op::AllocBuf { len } => {
                if len == 0 || len > 1 << 30 {
                    return Errno(EINVAL);
                }
                self.bufs.push(Some(Buffer { len, data: Arc::new(vec![0; len]) }));
                Fine(None)
            }
            Op::FreeBuf { buf } => {
                if self.bufs.get(buf).and_then(|b| b.as_ref()).is_none() {
                    return Errno(EINVAL);
                }
                // The trait: EBUSY while an MR covers it.
                if self.mrs.iter().flatten().any(|m| m.buf == buf) {
                    return Errno(EBUSY);
                }
                self.bufs[buf] = None;
                Fine(None)
            }
            _ => Expect::Unknown,
        }
    }

    /// Everything of the context goes with it.
    fn close(&mut self, ctx: usize) {
        self.ctxs[ctx] = None;
        for c in self.cqs.iter_mut() {
            if c.is_some_and(|c| c.ctx == ctx) {
                *c = None;
            }
        }
        for p in 0..self.pds.len() {
            if self.pds[p].is_some_and(|x| x.ctx == ctx) {
                self.pds[p] = None;
                for m in self.mkeys.iter_mut() {
                    if m.as_ref().is_some_and(|m| m.pd == p) {
                        *m = None;
                    }
                }
                for m in self.mrs.iter_mut() {
                    if m.as_ref().is_some_and(|m| m.pd == p) {
                        *m = None;
                    }
                }
                for q in self.qps.iter_mut() {
                    if q.as_ref().is_some_and(|q| q.pd == p) {
                        *q = None;
                    }
                }
            }
        }
    }

    /// Items 7–12 and 17, in the provider's order.
    fn create_mkey(&mut self, pd: usize, flags: u32, max_entries: u16) -> Expect {
        use Expect::{Errno, Ok as Fine};
        let Some(p) = self.pds.get(pd).copied().flatten() else { return Errno(EINVAL) };
        let Some(ctx) = self.live_ctx(p.ctx) else { return Errno(EINVAL) };
        let Ctx::Kernel { devx } = ctx else { return Errno(EOPNOTSUPP) };
        let f = MkeyInitFlags::from_bits_retain(flags);
        let mut known = MkeyInitFlags::INDIRECT
            | MkeyInitFlags::BLOCK_SIGNATURE
            | MkeyInitFlags::CRYPTO
            | MkeyInitFlags::REMOTE_INVALIDATE;
        if self.update_tag {
            known |= MkeyInitFlags::UPDATE_TAG;
        }
        if flags == 0 || !known.contains(f) {
            return Errno(EOPNOTSUPP);
        }
        if f.contains(MkeyInitFlags::BLOCK_SIGNATURE) && !self.sig {
            return Errno(EOPNOTSUPP);
        }
        // Without a DEVX uid the kernel refuses the PSVs and the mkey (item 3).
        if !devx {
            return Errno(EINVAL);
        }
        if f.contains(MkeyInitFlags::CRYPTO) && !self.crypto {
            return Errno(EOPNOTSUPP);
        }
        let num_desc = round_entries(max_entries);
        self.mkeys.push(Some(Mkey {
            pd,
            flags: f,
            num_desc,
            valid: false,
            tag: 0,
            access: AccessFlags::empty(),
            layout: Layout::default(),
        }));
        Fine(Some(u64::from(num_desc)))
    }

    fn fill_buf(&mut self, buf: usize, seed: u8) -> Expect {
        let Some(b) = self.bufs.get_mut(buf).and_then(|b| b.as_mut()) else { return Expect::Errno(EINVAL) };
        b.data = Arc::new(fill_pattern(b.len, seed));
        Expect::Ok(None)
    }
}
