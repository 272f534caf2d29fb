//! A reference model of the API's observable behaviour, written from `docs/behaviour.md`:
//! contexts (with DEVX or not, VFIO, other providers), PDs, mkeys, CQs and buffers. For each
//! [`Op`] it says what the call must answer — an errno, or success with the values the
//! checklist fixes — and how the state changes.
//!
//! Ops name objects by their position among the objects of their kind made so far (slot `i`
//! is the `i`-th successful create), so the same op sequence means the same thing on any
//! backend; a slot whose object was destroyed stays, and using it is a stale handle.
//!
//! Not modelled yet: QPs and their state machine, work-request chains and traffic; CQs on
//! contexts of other providers.

mod machine;

pub use machine::{Failure, Machine, discover};

use mlx5_dv::errno::{EBUSY, EINVAL, EOPNOTSUPP};
use mlx5_dv::{
    Caps, DeviceKind, MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD, MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD, MkeyInitFlags,
};
use serde::{Deserialize, Serialize};

/// One step of a sequence; `ctx`, `pd`, `mkey`, `buf` are slots, `dev` an index into the
/// device list.
#[allow(missing_docs)] // the fields are the C call's arguments
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// `ibv_open_device` of device `dev` of the device list (modulo its length).
    OpenIbv { dev: usize },
    /// `mlx5dv_open_device(dev, {flags: DEVX})`.
    OpenDevx { dev: usize },
    /// `ibv_close_device` of context slot `ctx`.
    Close { ctx: usize },
    /// `mlx5dv_query_device(ctx, comp_mask)`.
    QueryDevice { ctx: usize, comp_mask: u64 },
    /// `ibv_alloc_pd`.
    AllocPd { ctx: usize },
    /// `ibv_dealloc_pd`.
    DeallocPd { pd: usize },
    /// `mlx5dv_create_mkey(pd, flags, max_entries)`.
    CreateMkey { pd: usize, flags: u32, max_entries: u16 },
    /// `mlx5dv_destroy_mkey`.
    DestroyMkey { mkey: usize },
    /// `ibv_create_cq(ctx, cqe)`.
    CreateCq { ctx: usize, cqe: u32 },
    /// `ibv_destroy_cq`.
    DestroyCq { cq: usize },
    /// Allocate a buffer of `len` bytes.
    AllocBuf { len: usize },
    /// Free buffer slot `buf`.
    FreeBuf { buf: usize },
}

/// What a call must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Success; for `CreateMkey` the written-back `max_entries`, for `QueryDevice` the output
    /// `comp_mask`, for `CreateCq` the CQ's `cqe`.
    Ok(Option<u64>),
    /// Failure with this errno.
    Errno(i32),
}

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

#[derive(Debug, Clone, Copy)]
struct Mkey {
    pd: usize,
}

/// The model's state: the backend's facts, and every object slot (None once destroyed).
#[derive(Debug, Clone)]
pub struct Model {
    devices: Vec<DeviceKind>,
    devx: bool,
    update_tag: bool,
    sig: bool,
    crypto: bool,
    ctxs: Vec<Option<Ctx>>,
    pds: Vec<Option<Pd>>,
    mkeys: Vec<Option<Mkey>>,
    bufs: Vec<bool>,
    /// The context of each CQ.
    cqs: Vec<Option<usize>>,
    log_max_cq_sz: Option<u8>,
}

/// `max_entries` rounded up to a multiple of 4 in 16 bits (item 12).
pub fn round_entries(n: u16) -> u16 {
    n.wrapping_add(3) & !3
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
            ctxs: Vec::new(),
            pds: Vec::new(),
            mkeys: Vec::new(),
            bufs: Vec::new(),
            cqs: Vec::new(),
            log_max_cq_sz: caps.device.log_max_cq_sz,
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

    /// Whether context slot `ctx` is of another provider (rxe, siw): no CQ ops are modelled
    /// there.
    pub fn is_other(&self, ctx: usize) -> bool {
        self.ctxs.get(ctx).copied().flatten() == Some(Ctx::Other)
    }

    fn live_ctx(&self, i: usize) -> Option<Ctx> {
        self.ctxs.get(i).copied().flatten()
    }

    /// What `op` must answer, and the state after it.
    pub fn step(&mut self, op: &Op) -> Expect {
        use Expect::{Errno, Ok as Fine};
        match *op {
            Op::OpenIbv { dev } | Op::OpenDevx { dev } => {
                let explicit = matches!(op, Op::OpenDevx { .. });
                let Some(kind) = self.devices.get(dev % self.devices.len().max(1)).copied() else {
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
                Fine(None)
            }
            Op::Close { ctx } => {
                if self.live_ctx(ctx).is_none() {
                    return Errno(EINVAL);
                }
                self.ctxs[ctx] = None;
                // Everything of the context goes with it.
                for c in self.cqs.iter_mut().filter(|c| **c == Some(ctx)) {
                    *c = None;
                }
                for p in 0..self.pds.len() {
                    if self.pds[p].is_some_and(|x| x.ctx == ctx) {
                        self.pds[p] = None;
                        for m in self.mkeys.iter_mut().filter(|m| m.is_some_and(|m| m.pd == p)) {
                            *m = None;
                        }
                    }
                }
                Fine(None)
            }
            Op::QueryDevice { ctx, comp_mask } => match self.live_ctx(ctx) {
                None => Errno(EINVAL),
                Some(Ctx::Kernel { .. }) => {
                    // Item 6: the two known parts are echoed when asked for.
                    let known = MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD;
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
                if self.mkeys.iter().any(|m| m.is_some_and(|m| m.pd == pd)) {
                    return Errno(EBUSY);
                }
                self.pds[pd] = None;
                Fine(None)
            }
            Op::CreateMkey { pd, flags, max_entries } => self.create_mkey(pd, flags, max_entries),
            Op::DestroyMkey { mkey } => {
                if self.mkeys.get(mkey).copied().flatten().is_none() {
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
                    self.cqs.push(Some(ctx));
                    Fine(Some(n - 1))
                }
            },
            Op::DestroyCq { cq } => {
                if self.cqs.get(cq).copied().flatten().is_none() {
                    return Errno(EINVAL);
                }
                self.cqs[cq] = None;
                Fine(None)
            }
            Op::AllocBuf { len } => {
                if len == 0 || len > 1 << 30 {
                    return Errno(EINVAL);
                }
                self.bufs.push(true);
                Fine(None)
            }
            Op::FreeBuf { buf } => {
                if !self.bufs.get(buf).copied().unwrap_or(false) {
                    return Errno(EINVAL);
                }
                self.bufs[buf] = false;
                Fine(None)
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
        self.mkeys.push(Some(Mkey { pd }));
        Fine(Some(u64::from(round_entries(max_entries))))
    }
}
