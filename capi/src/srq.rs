//! Shared receive queues: `ibv_create_srq` (and the context's `create_srq_ex` for basic, XRC
//! and tag-matching SRQs), `ibv_modify_srq`, `ibv_query_srq`, `ibv_destroy_srq`, the
//! context's `post_srq_recv` and `post_srq_ops` that the header's inline `ibv_post_srq_recv`
//! and `ibv_post_srq_ops` jump through, and `get_srq_num`.

use std::ffi::c_int;
use std::ptr;

use mlx5_dv::{RecvWr, SrqAttr, SrqInitAttr, SrqOpKind, SrqOpWr, SrqTm, SrqXrc};
use rdma_sys::*;

use crate::errno::{code, null};
use crate::objects::Srq;
use crate::queue::sges;
use crate::state::{Shim, device_thread, key, with};

/// `IBV_SRQ_INIT_ATTR_TYPE`, `_XRCD`, `_CQ`.
const INIT_ATTR_TYPE: u32 = 1 << 0;
const INIT_ATTR_XRCD: u32 = 1 << 2;
const INIT_ATTR_CQ: u32 = 1 << 3;
/// `IBV_SRQ_INIT_ATTR_TM`.
const INIT_ATTR_TM: u32 = 1 << 4;
/// `IBV_WR_TAG_ADD`, `_DEL`, `_SYNC`.
const WR_TAG_ADD: u32 = 0;
const WR_TAG_DEL: u32 = 1;
const WR_TAG_SYNC: u32 = 2;
/// `IBV_SRQT_BASIC`, `IBV_SRQT_XRC`, `IBV_SRQT_TM`.
const SRQT_BASIC: u32 = 0;
const SRQT_XRC: u32 = 1;
const SRQT_TM: u32 = 2;

/// Install the context's SRQ ops.
pub(crate) fn fill_context_ops(c: &mut verbs_context) {
    c.context.ops.post_srq_recv = Some(post_srq_recv);
    c.create_srq_ex = Some(create_srq_ex);
    c.get_srq_num = Some(get_srq_num);
    c.post_srq_ops = Some(post_srq_ops);
}

/// What kind of SRQ `create_srq` makes besides a basic one.
enum Kind {
    Xrc(*mut ibv_xrcd, *mut ibv_cq),
    Tm(*mut ibv_cq, ibv_tm_cap),
}

impl Shim {
    /// The SRQ the program holds `srq` for.
    pub(crate) fn srq(&self, srq: *const ibv_srq) -> Result<&Srq, c_int> {
        self.srqs.get(&key(srq)).ok_or(libc::EINVAL)
    }

    fn create_srq(
        &mut self,
        pd: *mut ibv_pd,
        attr: &mut ibv_srq_init_attr,
        kind: Option<Kind>,
    ) -> Result<*mut ibv_srq, c_int> {
        let p = self.pd(pd)?;
        let (handle, context) = (p.handle, p.c.context);
        let (mut xrc, mut tm) = (None, None);
        match kind {
            Some(Kind::Xrc(x, cq)) => xrc = Some(SrqXrc { xrcd: self.xrcd(x)?, cq: self.cq(cq)?.cq.handle }),
            Some(Kind::Tm(cq, cap)) => {
                let c = self.cq(cq)?;
                // mlx5_create_srq_ex: tag-matching information is read from an extended CQ.
                if c.c.ex.start_poll.is_none() {
                    return Err(libc::EINVAL);
                }
                tm = Some(SrqTm { cq: c.cq.handle, max_num_tags: cap.max_num_tags, max_ops: cap.max_ops });
            }
            None => {}
        }
        let a = SrqInitAttr { pd: handle, max_wr: attr.attr.max_wr, max_sge: attr.attr.max_sge, xrc, tm };
        crate::domain::huge_alloc_refused("MLX_SRQ")?;
        // SAFETY: plain data; a zeroed mutex and condition are their static initialisers.
        let mut c: Box<ibv_srq> = Box::new(unsafe { std::mem::zeroed() });
        let owner = key(&mut *c as *mut ibv_srq);
        let srq = self.with_domain_memory(pd, |s| Ok((s.sim.create_srq(&a).map_err(|e| e.errno())?, owner)))?;
        attr.attr.max_wr = srq.max_wr;
        attr.attr.max_sge = srq.max_sge;
        c.context = context;
        c.srq_context = attr.srq_context;
        c.pd = pd;
        c.handle = srq.handle.id();
        let ptr: *mut ibv_srq = &mut *c;
        self.srqs.insert(key(ptr), Srq { c, srq });
        Ok(ptr)
    }

    fn post_srq_recv(&mut self, srq: *mut ibv_srq, mut wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
        let Ok(handle) = self.srq(srq).map(|s| s.srq) else { return libc::EINVAL };
        let mut ret = 0;
        while !wr.is_null() {
            // SAFETY: the caller's WR list.
            let w = unsafe { &*wr };
            let posted = sges(w.sg_list, w.num_sge).and_then(|sge| {
                self.sim.post_srq_recv(&handle, &[RecvWr { wr_id: w.wr_id, sge }]).map_err(|e| e.errno())
            });
            if let Err(e) = posted {
                if !bad.is_null() {
                    // SAFETY: the caller's out-parameter.
                    unsafe { *bad = wr };
                }
                ret = e;
                self.collect_events();
                break;
            }
            wr = w.next;
        }
        self.notify();
        ret
    }
}

/// `ibv_create_srq`: writes back `max_wr` and `max_sge` as libmlx5 rounds them.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_srq(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    with(null, |s| s.create_srq(pd, unsafe { &mut *attr }, None).unwrap_or_else(null))
}

/// The context's `create_srq_ex` (`mlx5_create_srq_ex`): a basic SRQ is `ibv_create_srq`; an
/// XRC SRQ needs `IBV_SRQ_INIT_ATTR_XRCD` and `_CQ` (libibverbs: EINVAL); a tag-matching SRQ
/// needs an extended CQ (libmlx5: EINVAL) and then `IBV_SRQ_INIT_ATTR_CQ`, `_TM` and a
/// non-zero `max_num_tags` (libibverbs' `ibv_cmd_create_srq_ex`: EINVAL); any other type is
/// EINVAL.
unsafe extern "C" fn create_srq_ex(_context: *mut ibv_context, attr: *mut ibv_srq_init_attr_ex) -> *mut ibv_srq {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &mut *attr };
    let typed = a.comp_mask & INIT_ATTR_TYPE != 0;
    let xrc = typed && a.srq_type == SRQT_XRC;
    let tm = typed && a.srq_type == SRQT_TM;
    if typed && !xrc && !tm && a.srq_type != SRQT_BASIC {
        return null(libc::EINVAL);
    }
    if xrc && a.comp_mask & (INIT_ATTR_XRCD | INIT_ATTR_CQ) != INIT_ATTR_XRCD | INIT_ATTR_CQ {
        return null(libc::EINVAL);
    }
    if tm {
        // The extended-CQ check comes first (libmlx5), then libibverbs' command checks.
        if a.cq.is_null() || !with(|_| false, |s| s.cq(a.cq).is_ok_and(|c| c.c.ex.start_poll.is_some())) {
            return null(libc::EINVAL);
        }
        if a.comp_mask & (INIT_ATTR_CQ | INIT_ATTR_TM) != INIT_ATTR_CQ | INIT_ATTR_TM || a.tm_cap.max_num_tags == 0 {
            return null(libc::EINVAL);
        }
    }
    // SAFETY: plain data.
    let mut basic: ibv_srq_init_attr = unsafe { std::mem::zeroed() };
    basic.srq_context = a.srq_context;
    basic.attr = a.attr;
    let kind = if xrc {
        Some(Kind::Xrc(a.xrcd, a.cq))
    } else if tm {
        Some(Kind::Tm(a.cq, a.tm_cap))
    } else {
        None
    };
    let r = with(null, |s| s.create_srq(a.pd, &mut basic, kind).unwrap_or_else(null));
    a.attr = basic.attr;
    r
}

/// `ibv_modify_srq`: `IBV_SRQ_LIMIT` arms the limit; `IBV_SRQ_MAX_WR` is EINVAL (mlx5 does
/// not resize).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr, mask: c_int) -> c_int {
    if attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attributes.
    let a = unsafe { &*attr };
    let attr = SrqAttr { max_wr: a.max_wr, max_sge: a.max_sge, srq_limit: a.srq_limit };
    with(
        |e| e,
        |s| {
            let Ok(h) = s.srq(srq).map(|x| x.srq) else { return libc::EINVAL };
            match s.sim.modify_srq(&h, &attr, mask as u32) {
                Ok(()) => 0,
                Err(e) => code(&e),
            }
        },
    )
}

/// `ibv_query_srq`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    if attr.is_null() {
        return libc::EINVAL;
    }
    with(
        |e| e,
        |s| {
            let Ok(h) = s.srq(srq).map(|x| x.srq) else { return libc::EINVAL };
            match s.sim.query_srq(&h) {
                Ok(q) => {
                    // SAFETY: the caller's attributes.
                    unsafe {
                        ptr::write(attr, ibv_srq_attr { max_wr: q.max_wr, max_sge: q.max_sge, srq_limit: q.srq_limit })
                    };
                    0
                }
                Err(e) => e.errno(),
            }
        },
    )
}

/// `ibv_destroy_srq`: EBUSY while a QP uses it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(h) = s.srq(srq).map(|x| x.srq) else { return libc::EINVAL };
            if let Err(e) = s.sim.destroy_srq(&h) {
                return e.errno();
            }
            s.srqs.remove(&key(srq));
            s.drop_events_of(key(srq));
            s.give_back(key(srq));
            0
        },
    )
}

unsafe extern "C" fn post_srq_recv(srq: *mut ibv_srq, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    device_thread::posting();
    with(|e| e, |s| s.post_srq_recv(srq, wr, bad))
}

/// `struct ibv_ops_wr` (rdma-sys keeps its fields private).
#[repr(C)]
struct OpsWr {
    wr_id: u64,
    next: *mut OpsWr,
    opcode: u32,
    flags: c_int,
    tm: OpsTm,
}

/// `ibv_ops_wr.tm`.
#[repr(C)]
struct OpsTm {
    unexpected_cnt: u32,
    handle: u32,
    add: OpsAdd,
}

/// `ibv_ops_wr.tm.add`.
#[repr(C)]
struct OpsAdd {
    recv_wr_id: u64,
    sg_list: *mut ibv_sge,
    num_sge: c_int,
    tag: u64,
    mask: u64,
}

/// One `struct ibv_ops_wr` as the simulator takes it; `None` for an opcode libmlx5 refuses.
///
/// # Safety
/// `w` is the caller's WR, its `sg_list` holding `num_sge` entries for an ADD.
unsafe fn ops_wr(w: &OpsWr) -> Option<Result<SrqOpWr, c_int>> {
    let op = match w.opcode {
        WR_TAG_ADD => {
            let add = &w.tm.add;
            let sge = match sges(add.sg_list, add.num_sge) {
                Ok(s) => s,
                Err(e) => return Some(Err(e)),
            };
            SrqOpKind::Add { recv_wr_id: add.recv_wr_id, sge, tag: add.tag, mask: add.mask }
        }
        WR_TAG_DEL => SrqOpKind::Del { handle: w.tm.handle },
        WR_TAG_SYNC => SrqOpKind::Sync,
        _ => return None,
    };
    Some(Ok(SrqOpWr { wr_id: w.wr_id, flags: w.flags as u32, unexpected_cnt: w.tm.unexpected_cnt, op }))
}

impl Shim {
    /// `mlx5_post_srq_ops`: each WR in turn; ADD writes its `tm.handle` back; the first that
    /// fails goes to `bad`.
    fn post_srq_ops(&mut self, srq: *mut ibv_srq, mut wr: *mut OpsWr, bad: *mut *mut OpsWr) -> c_int {
        let handle = match self.srq(srq) {
            Ok(s) => s.srq,
            Err(e) => return e,
        };
        let mut ret = 0;
        while !wr.is_null() {
            // SAFETY: the caller's WR list.
            let w = unsafe { &mut *wr };
            // SAFETY: as `ops_wr` asks.
            let posted = match unsafe { ops_wr(w) } {
                None => Err(libc::EINVAL),
                Some(Err(e)) => Err(e),
                Some(Ok(op)) => self.sim.post_srq_ops(&handle, &[op]).map_err(|e| e.errno()),
            };
            match posted {
                Ok(h) => {
                    if w.opcode == WR_TAG_ADD {
                        w.tm.handle = h.first().copied().unwrap_or(0);
                    }
                }
                Err(e) => {
                    if !bad.is_null() {
                        // SAFETY: the caller's out-parameter.
                        unsafe { *bad = wr };
                    }
                    ret = e;
                    break;
                }
            }
            wr = w.next;
        }
        self.collect_events();
        self.notify();
        ret
    }
}

/// The context's `post_srq_ops` (`mlx5_post_srq_ops`), which the header's inline
/// `ibv_post_srq_ops` calls.
unsafe extern "C" fn post_srq_ops(srq: *mut ibv_srq, wr: *mut ibv_ops_wr, bad: *mut *mut ibv_ops_wr) -> c_int {
    device_thread::posting();
    with(|e| e, |s| s.post_srq_ops(srq, wr.cast(), bad.cast()))
}

/// `get_srq_num` (`ibv_get_srq_num`).
unsafe extern "C" fn get_srq_num(srq: *mut ibv_srq, num: *mut u32) -> c_int {
    if num.is_null() {
        return libc::EINVAL;
    }
    with(
        |e| e,
        |s| match s.srq(srq) {
            Ok(x) => {
                // SAFETY: the caller's out-parameter.
                unsafe { *num = x.srq.srq_num };
                0
            }
            Err(e) => e,
        },
    )
}
