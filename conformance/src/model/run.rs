//! Running ops on a backend, slot for slot with the model, and checking the effects the
//! model expects: the completions every live CQ holds and the bytes of touched buffers.

use std::collections::BTreeMap;

use mlx5_dv::{
    AccessFlags, Backend, Buf, ContextAttr, ContextHandle, DvQpCreateFlags, DvQpInitAttr, DvSendOpsFlags, Mkey,
    MkeyConfFlags, MkeyInitAttr, MkeyInitFlags, Mr, MrInterleaved, PdHandle, Qp, QpCap, QpDest, QpInitAttr, QpModify,
    QpState, RecvWr, SendFlags, Sge, WrOp, dv_qp, send_ops, wc_opcode,
};

use super::outcome::Outcome;
use super::{ExpCqe, Key, Loc, Model, Op, RECV_SGE, RECV_WR, Target, Wr, fill_pattern, wr_id};

/// What `run` answers when a new key breaks item 15 or the MR rules (not an errno).
pub(super) const KEY_RULE: i32 = -1;
/// What `run` answers for a slot the backend has no object in (not an errno).
pub(super) const NO_SLOT: i32 = -2;
/// What `run` answers when the port of a new QP's context cannot be read (not an errno).
pub(super) const NO_PORT: i32 = -3;

/// A key no object has.
const BOGUS_KEY: u32 = 0xdead_be00;

/// The access a connected QP grants to incoming RDMA.
const QP_ACCESS: AccessFlags =
    AccessFlags::LOCAL_WRITE.union(AccessFlags::REMOTE_WRITE).union(AccessFlags::REMOTE_READ);

/// The mkey operations every modelled QP is created with.
const MKEY_OPS: DvSendOpsFlags =
    dv_qp::WITH_MKEY_CONFIGURE.union(dv_qp::WITH_MR_LIST).union(dv_qp::WITH_MR_INTERLEAVED);

/// The backend's objects, slot for slot with the model's.
#[derive(Default)]
pub(super) struct Slots {
    /// Contexts and their device index.
    ctxs: Vec<(ContextHandle, usize)>,
    /// PDs and their context slot.
    pds: Vec<(PdHandle, usize)>,
    /// Mkeys, their PD slot, whether live.
    mkeys: Vec<(Mkey, usize, bool)>,
    bufs: Vec<Buf>,
    cqs: Vec<mlx5_dv::Cq>,
    /// MRs, their PD slot, whether live.
    mrs: Vec<(Mr, usize, bool)>,
    /// QPs and the path to each.
    qps: Vec<(Qp, QpDest)>,
    /// What the last scenario left, or why it could not run.
    outcome: Option<Result<Outcome, String>>,
}

fn at<T: Clone>(v: &[T], i: usize) -> Result<T, i32> {
    v.get(i).cloned().ok_or(NO_SLOT)
}

impl Slots {
    fn dev_of_pd(&self, pd: usize) -> Option<usize> {
        self.pds.get(pd).and_then(|p| self.ctxs.get(p.1)).map(|c| c.1)
    }

    /// A new key must differ from every live key of its device (item 15; MRs alike).
    fn key_clash(&self, key: u32, pd: usize) -> bool {
        let dev = self.dev_of_pd(pd);
        let mk = self.mkeys.iter().any(|k| k.2 && k.0.lkey == key && self.dev_of_pd(k.1) == dev);
        let mr = self.mrs.iter().any(|k| k.2 && k.0.lkey == key && self.dev_of_pd(k.1) == dev);
        mk || mr
    }

    fn kill_pds_of(&mut self, ctx: usize) {
        let pds: Vec<usize> = (0..self.pds.len()).filter(|p| self.pds[*p].1 == ctx).collect();
        self.mkeys.iter_mut().filter(|m| pds.contains(&m.1)).for_each(|m| m.2 = false);
        self.mrs.iter_mut().filter(|m| pds.contains(&m.1)).for_each(|m| m.2 = false);
    }

    /// An SGE over `loc`: an MR's addresses, an mkey's offsets.
    fn sge(&self, loc: Loc) -> Result<Sge, i32> {
        let (addr, lkey) = self.key_addr(loc.key, loc.off)?;
        Ok(Sge { addr, length: loc.len, lkey })
    }

    fn sges(&self, local: Loc, more: Option<Loc>) -> Result<Vec<Sge>, i32> {
        std::iter::once(local).chain(more).map(|l| self.sge(l)).collect()
    }

    fn key_addr(&self, key: Key, off: u32) -> Result<(u64, u32), i32> {
        Ok(match key {
            Key::Mr(s) => {
                let m = at(&self.mrs, s)?.0;
                (m.addr.wrapping_add(u64::from(off)), m.lkey)
            }
            Key::Mkey(s, tag) => (u64::from(off), (at(&self.mkeys, s)?.0.lkey & !0xff) | u32::from(tag)),
            Key::Bogus => (u64::from(off), BOGUS_KEY),
        })
    }

    fn mr_addr(&self, mr: usize, off: u32) -> Result<(u64, u32), i32> {
        self.key_addr(Key::Mr(mr), off)
    }

    fn wr_ops(&self, k: usize, w: &Wr, seq: u64) -> Result<WrOp, i32> {
        let flags = |signaled: bool, inline: bool| {
            let mut f = SendFlags::empty();
            f.set(SendFlags::SIGNALED, signaled);
            f.set(SendFlags::INLINE, inline);
            f
        };
        let id = wr_id(seq, k, false);
        let interleaved = |n: u8, e: &[super::IEnt; 3]| -> Result<Vec<MrInterleaved>, i32> {
            let n = usize::from(n).min(e.len());
            e[..n]
                .iter()
                .map(|x| {
                    let (addr, lkey) = self.mr_addr(x.mr, x.off)?;
                    Ok(MrInterleaved { addr, bytes_count: x.count, bytes_skip: x.skip, lkey })
                })
                .collect()
        };
        let list = |n: u8, e: &[super::Ent; 4]| -> Result<Vec<Sge>, i32> {
            let n = usize::from(n).min(e.len());
            e[..n]
                .iter()
                .map(|x| self.mr_addr(x.mr, x.off).map(|(addr, lkey)| Sge { addr, length: x.len, lkey }))
                .collect()
        };
        Ok(match *w {
            Wr::Write { local, more, remote, roff, signaled } => {
                let (remote_addr, rkey) = self.key_addr(remote, roff)?;
                WrOp::RdmaWrite {
                    wr_id: id,
                    flags: flags(signaled, false),
                    rkey,
                    remote_addr,
                    sge: self.sges(local, more)?,
                }
            }
            Wr::Read { local, more, remote, roff, signaled } => {
                let (remote_addr, rkey) = self.key_addr(remote, roff)?;
                WrOp::RdmaRead {
                    wr_id: id,
                    flags: flags(signaled, false),
                    rkey,
                    remote_addr,
                    sge: self.sges(local, more)?,
                }
            }
            Wr::Send { local, more, signaled } => {
                WrOp::Send { wr_id: id, flags: flags(signaled, false), sge: self.sges(local, more)? }
            }
            Wr::Configure { mkey, tag, setters, conf_flags, inline, signaled } => WrOp::MkeyConfigure {
                wr_id: id,
                flags: flags(signaled, inline),
                mkey: {
                    let mut m = at(&self.mkeys, mkey)?.0;
                    m.lkey = (m.lkey & !0xff) | u32::from(tag);
                    m.rkey = m.lkey;
                    m
                },
                num_setters: setters,
                conf_flags: MkeyConfFlags::from_bits_retain(conf_flags),
                comp_mask: 0,
            },
            Wr::WriteImm { local, remote, roff, imm, signaled } => {
                let (remote_addr, rkey) = self.key_addr(remote, roff)?;
                let sge = vec![self.sge(local)?];
                WrOp::RdmaWriteImm { wr_id: id, flags: flags(signaled, false), rkey, remote_addr, imm, sge }
            }
            Wr::SendImm { local, imm, signaled } => {
                WrOp::SendImm { wr_id: id, flags: flags(signaled, false), imm, sge: vec![self.sge(local)?] }
            }
            Wr::SendInv { local, mkey, tag, signaled } => WrOp::SendInv {
                wr_id: id,
                flags: flags(signaled, false),
                invalidate_rkey: (at(&self.mkeys, mkey)?.0.lkey & !0xff) | u32::from(tag),
                sge: vec![self.sge(local)?],
            },
            Wr::LocalInv { mkey, tag, signaled } => WrOp::LocalInv {
                wr_id: id,
                flags: flags(signaled, false),
                invalidate_rkey: (at(&self.mkeys, mkey)?.0.lkey & !0xff) | u32::from(tag),
            },
            Wr::Atomic { local, remote, roff, cas, compare, value, signaled } => {
                let (remote_addr, rkey) = self.key_addr(remote, roff)?;
                let (wr_id, flags, sge) = (id, flags(signaled, false), vec![self.sge(local)?]);
                if cas {
                    WrOp::AtomicCmpSwp { wr_id, flags, rkey, remote_addr, compare, swap: value, sge }
                } else {
                    WrOp::AtomicFetchAdd { wr_id, flags, rkey, remote_addr, add: value, sge }
                }
            }
            Wr::Access(a) => WrOp::SetMkeyAccessFlags(AccessFlags::from_bits_retain(a)),
            Wr::List { n, e } => WrOp::SetMkeyLayoutList(list(n, &e)?),
            Wr::Interleaved { repeat, n, e } => {
                WrOp::SetMkeyLayoutInterleaved { repeat_count: repeat, entries: interleaved(n, &e)? }
            }
            Wr::MrInterleaved { mkey, access, repeat, n, e, inline, signaled } => WrOp::MrInterleaved {
                wr_id: id,
                flags: flags(signaled, inline),
                mkey: at(&self.mkeys, mkey)?.0,
                access: AccessFlags::from_bits_retain(access),
                repeat_count: repeat,
                entries: interleaved(n, &e)?,
            },
            Wr::MrList { mkey, access, n, e, inline, signaled } => WrOp::MrList {
                wr_id: id,
                flags: flags(signaled, inline),
                mkey: at(&self.mkeys, mkey)?.0,
                access: AccessFlags::from_bits_retain(access),
                sge: list(n, &e)?,
            },
        })
    }
}

/// What a connected QP grants: remote atomics too where the model drives them (item 125).
fn qp_access(model: &Model) -> AccessFlags {
    if model.atomics { QP_ACCESS | AccessFlags::REMOTE_ATOMIC } else { QP_ACCESS }
}

fn modify_attr(s: &Slots, to: Target, access: AccessFlags) -> Result<QpModify, i32> {
    Ok(match to {
        Target::Reset => QpModify::to(QpState::Reset),
        Target::Rts => QpModify::to(QpState::Rts),
        Target::Err => QpModify::to(QpState::Err),
        Target::Init => QpModify { state: QpState::Init, access, dest: None, ext: None },
        Target::Rtr(p) => {
            let dest = match p {
                Some(p) => Some(at(&s.qps, p)?.1),
                None => None,
            };
            QpModify { state: QpState::Rtr, access, dest, ext: None }
        }
    })
}

/// Run `op` (the `seq`-th) on `b`; `Err(errno)` or the value `model` (stepped over `op`)
/// predicts for it.
pub(super) fn run(
    b: &mut dyn Backend,
    model: &Model,
    names: &[String],
    s: &mut Slots,
    op: &Op,
    seq: u64,
) -> Result<Option<u64>, i32> {
    let e = |x: mlx5_dv::Error| x.errno();
    let pick = |v: &[String], i: usize| v.get(i % v.len().max(1)).cloned().unwrap_or_default();
    s.outcome = None;
    match *op {
        Op::Sig(ref x) => {
            s.outcome = Some(super::rig::run_sig(b, &pick(names, x.dev), x));
            Ok(None)
        }
        Op::Crypto(ref x) => {
            let plan = model.crypto_plan(x).ok_or(NO_SLOT)?;
            s.outcome = Some(super::rig::run_crypto(b, &pick(names, x.dev), x, plan.0, plan.1));
            Ok(None)
        }
        Op::Net(ref x) => {
            let devs = (x.dev % names.len().max(1), x.peer % names.len().max(1));
            let idx = |d: usize| u32::try_from(d).unwrap_or(u32::MAX);
            let (a, p) = (pick(names, x.dev), pick(names, x.peer));
            s.outcome = Some(super::netrig::run_net(b, (&a, &p), (idx(devs.0), idx(devs.1)), x));
            Ok(None)
        }
        Op::Atomic(ref x) => {
            s.outcome = Some(super::pairrig::run_atomic(b, &pick(names, x.dev), x));
            Ok(None)
        }
        Op::Mw(ref x) => {
            s.outcome = Some(super::pairrig::run_mw(b, &pick(names, x.dev), x));
            Ok(None)
        }
        Op::Ud(ref x) => {
            s.outcome = Some(super::udrig::run_ud(b, &pick(names, x.dev), x));
            Ok(None)
        }
        Op::Srq(ref x) => {
            s.outcome = Some(super::srqrig::run_srq(b, &pick(names, x.dev), x));
            Ok(None)
        }
        Op::Uc(ref x) => {
            s.outcome = Some(super::ucrig::run_uc(b, &pick(names, x.dev), x));
            Ok(None)
        }
        Op::Xrc(ref x) => {
            s.outcome = Some(super::xrcrig::run_xrc(b, &pick(names, x.dev), x));
            Ok(None)
        }
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
            s.kill_pds_of(ctx);
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
            // Item 15: lkey = rkey = index << 8 with tag 0, a key of its own on its device.
            if m.lkey != m.rkey || m.lkey & 0xff != 0 || s.key_clash(m.lkey, pd) {
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
        Op::FillBuf { buf, seed } => {
            let x = at(&s.bufs, buf)?;
            b.write_buf(&x, 0, &fill_pattern(x.len, seed)).map(|()| None).map_err(e)
        }
        Op::RegMr { pd, buf, off, len, access } => {
            let x = at(&s.bufs, buf)?;
            let addr = x.addr.wrapping_add(u64::from(off));
            let mr = b.reg_mr(at(&s.pds, pd)?.0, addr, u64::from(len), AccessFlags::from_bits_retain(access));
            let mr = mr.map_err(e)?;
            // An mlx5 MR has one key for both sides, of its own on the device, and the range asked.
            if mr.lkey != mr.rkey || s.key_clash(mr.lkey, pd) || mr.addr != addr || mr.length != u64::from(len) {
                return Err(KEY_RULE);
            }
            s.mrs.push((mr, pd, true));
            Ok(None)
        }
        Op::DeregMr { mr } => {
            b.dereg_mr(&at(&s.mrs, mr)?.0).map_err(e)?;
            if let Some(m) = s.mrs.get_mut(mr) {
                m.2 = false;
            }
            Ok(None)
        }
        Op::CreateQp { pd, cq, wr, sge, inline } => {
            let (pdh, ctx) = at(&s.pds, pd)?;
            let cap = QpCap {
                max_send_wr: wr,
                max_recv_wr: RECV_WR,
                max_send_sge: sge,
                max_recv_sge: RECV_SGE,
                max_inline_data: inline,
            };
            let dv = DvQpInitAttr::new(DvQpCreateFlags::empty(), MKEY_OPS);
            let mut attr = QpInitAttr::rc(pdh, at(&s.cqs, cq)?.handle, cap, Some(dv));
            if model.atomics {
                attr.send_ops_flags |= send_ops::ATOMIC_CMP_AND_SWP | send_ops::ATOMIC_FETCH_AND_ADD;
            }
            let qp = b.create_qp(&attr).map_err(e)?;
            let port = b.query_port(at(&s.ctxs, ctx)?.0, 1).map_err(|_| NO_PORT)?;
            s.qps.push((qp, QpDest::to(&qp, &port)));
            let c = qp.cap;
            Ok(Some(u64::from(c.max_send_wr) << 32 | u64::from(c.max_inline_data) << 8 | u64::from(c.max_recv_sge)))
        }
        Op::ModifyQp { qp, to } => {
            let attr = modify_attr(s, to, qp_access(model))?;
            b.modify_qp(&at(&s.qps, qp)?.0, &attr).map(|()| None).map_err(e)
        }
        Op::Connect { qp, peer } => {
            let q = at(&s.qps, qp)?.0;
            for step in QpModify::connect(qp_access(model), at(&s.qps, peer)?.1) {
                b.modify_qp(&q, &step).map_err(e)?;
            }
            Ok(None)
        }
        Op::QueryQp { qp } => b.query_qp_state(&at(&s.qps, qp)?.0).map(|st| Some(st as u64)).map_err(e),
        Op::DestroyQp { qp } => b.destroy_qp(&at(&s.qps, qp)?.0).map(|()| None).map_err(e),
        Op::PostRecv { qp, sge } => {
            let sge = match sge {
                Some(l) => vec![s.sge(l)?],
                None => Vec::new(),
            };
            let wr = RecvWr { wr_id: wr_id(seq, 0, true), sge };
            b.post_recv(&at(&s.qps, qp)?.0, &[wr]).map(|()| None).map_err(e)
        }
        Op::Post { qp, n, wrs } => {
            let n = usize::from(n).clamp(1, wrs.len());
            let ops = wrs[..n].iter().enumerate().map(|(k, w)| s.wr_ops(k, w, seq)).collect::<Result<Vec<_>, _>>()?;
            b.post_send(&at(&s.qps, qp)?.0, &ops).map(|()| None).map_err(e)
        }
    }
}

/// A completion as the model writes it: opcode only for a success, `byte_len` only for a
/// receive, a READ or an atomic, the immediate only with `IBV_WC_WITH_IMM`.
fn as_expected(qp: usize, wc: &mlx5_dv::Wc) -> ExpCqe {
    let ok = wc.status == 0;
    let sized = ok
        && matches!(
            wc.opcode,
            wc_opcode::RECV
                | wc_opcode::RECV_RDMA_WITH_IMM
                | wc_opcode::RDMA_READ
                | wc_opcode::COMP_SWAP
                | wc_opcode::FETCH_ADD
        );
    ExpCqe {
        qp,
        wr_id: wc.wr_id,
        status: wc.status,
        opcode: ok.then_some(wc.opcode),
        byte_len: sized.then_some(wc.byte_len),
        with_imm: ok && wc.wc_flags.contains(mlx5_dv::wc_flags::WITH_IMM),
        with_inv: ok && wc.wc_flags.contains(mlx5_dv::wc_flags::WITH_INV),
        // The requester's immediate is not defined.
        imm: (ok && wc.wc_flags.contains(mlx5_dv::wc_flags::WITH_IMM) && wc.opcode & wc_opcode::RECV != 0)
            .then_some(wc.imm_data),
    }
}

/// Per (QP slot, receive side): the completions in order.
type Grouped = BTreeMap<(usize, bool), Vec<ExpCqe>>;

fn group(v: impl IntoIterator<Item = ExpCqe>) -> Grouped {
    let mut g = Grouped::new();
    for c in v {
        g.entry((c.qp, c.wr_id >> 63 == 1)).or_default().push(c);
    }
    g
}

/// Poll every live CQ and read every watched buffer; compare with the model.
pub(super) fn verify(b: &mut dyn Backend, model: &Model, s: &Slots) -> Result<(), String> {
    let fx = model.effects();
    if let Some(want) = &fx.outcome {
        match &s.outcome {
            Some(Ok(got)) => want.differs(got).map_or(Ok(()), Err)?,
            Some(Err(why)) => return Err(format!("the scenario could not run: {why}")),
            None => return Err("the scenario did not run".into()),
        }
    }
    for cq in model.live_cqs() {
        let Some(h) = s.cqs.get(cq) else { continue };
        // A device that runs on its own completes after the post returned: wait (until the
        // wait deadline) for as many completions as the model expects, then take the rest.
        let expected = fx.cqes.iter().filter(|c| c.0 == cq).count();
        let deadline = crate::harness::deadline::wait_until();
        let mut got = Vec::new();
        let mut batches = 0;
        while batches < 64 {
            let w = b.poll_cq(h, 64).map_err(|x| format!("poll_cq of CQ #{cq}: {x}"))?;
            if w.is_empty() {
                if got.len() < expected && std::time::Instant::now() < deadline {
                    continue;
                }
                break;
            }
            batches += 1;
            got.extend(w);
        }
        // A completion belongs to the live QP of that number on this CQ.
        let mine = got.iter().map(|wc| {
            let slot = (0..s.qps.len())
                .rev()
                .find(|i| s.qps[*i].0.qp_num == wc.qp_num && model.qp_cq(*i) == Some(cq))
                .unwrap_or(usize::MAX);
            as_expected(slot, wc)
        });
        let want = group(fx.cqes.iter().filter(|c| c.0 == cq).map(|c| c.1));
        let mut have = group(mine);
        // A QP whose state the model lost may add completions after the expected ones.
        for (k, v) in have.iter_mut() {
            if k.0 != usize::MAX && !model.qp_known(k.0) {
                v.truncate(want.get(k).map_or(0, Vec::len));
            }
        }
        have.retain(|_, v| !v.is_empty());
        if want != have {
            return Err(format!("CQ #{cq}: the model expects {want:?}, the backend's completions are {have:?}"));
        }
    }
    let mut watched = fx.watch.clone();
    watched.sort_unstable();
    watched.dedup();
    for buf in watched {
        let (Some(want), Some(h)) = (model.buf_bytes(buf), s.bufs.get(buf)) else { continue };
        let got = b.read_buf(h, 0, h.len).map_err(|x| format!("read_buf of buffer #{buf}: {x}"))?;
        if let Some(i) = (0..want.len().max(got.len())).find(|i| want.get(*i) != got.get(*i)) {
            let w = want.get(i..want.len().min(i + 8)).unwrap_or_default();
            let g = got.get(i..got.len().min(i + 8)).unwrap_or_default();
            return Err(format!("buffer #{buf} differs from byte {i}: the model has {w:02x?}, the backend {g:02x?}"));
        }
    }
    Ok(())
}
