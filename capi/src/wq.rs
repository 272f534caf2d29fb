//! Receive WQs and their indirection tables: the context ops behind the header's inline
//! `ibv_create_wq`, `ibv_modify_wq`, `ibv_destroy_wq`, `ibv_create_rwq_ind_table` and
//! `ibv_destroy_rwq_ind_table` (kernel contexts), and each `ibv_wq`'s `post_recv`
//! (`ibv_post_wq_recv`). An RSS QP is made by `ibv_create_qp_ex` (module `queue`).

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::{Mutex, PoisonError};

use mlx5_dv::{RecvWr, RwqIndTable, RwqIndTableInitAttr, Wq, WqAttr, WqInitAttr, wq_attr_mask, wq_state};
use rdma_sys::*;

use crate::errno::{code, null};
use crate::state::{Shim, device_thread, key, with};

/// One `ibv_wq` with the simulator's WQ behind it.
#[repr(C)]
struct ShimWq {
    c: ibv_wq,
    wq: Wq,
}

/// One `ibv_rwq_ind_table` with the simulator's table behind it.
#[repr(C)]
struct ShimTable {
    c: ibv_rwq_ind_table,
    table: RwqIndTable,
}

// SAFETY: the pointers inside are the program's, only compared and handed back; the tables
// are reached under their locks.
unsafe impl Send for ShimWq {}
// SAFETY: as above.
unsafe impl Send for ShimTable {}

static WQS: Mutex<BTreeMap<usize, Box<ShimWq>>> = Mutex::new(BTreeMap::new());
static TABLES: Mutex<BTreeMap<usize, Box<ShimTable>>> = Mutex::new(BTreeMap::new());

fn wqs() -> std::sync::MutexGuard<'static, BTreeMap<usize, Box<ShimWq>>> {
    WQS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn tables() -> std::sync::MutexGuard<'static, BTreeMap<usize, Box<ShimTable>>> {
    TABLES.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn fill_context_ops(c: &mut verbs_context) {
    c.create_wq = Some(create_wq);
    c.modify_wq = Some(modify_wq);
    c.destroy_wq = Some(destroy_wq);
    c.create_rwq_ind_table = Some(create_rwq_ind_table);
    c.destroy_rwq_ind_table = Some(destroy_rwq_ind_table);
}

/// Drop the WQs and tables of a closed context (the close destroyed them).
pub(crate) fn forget(ctx: *const ibv_context) {
    wqs().retain(|_, w| !std::ptr::eq(w.c.context, ctx));
    tables().retain(|_, t| !std::ptr::eq(t.c.context, ctx));
}

/// The simulator's table behind a program's `ibv_rwq_ind_table`.
pub(crate) fn table_of(t: *const ibv_rwq_ind_table) -> Option<RwqIndTable> {
    tables().get(&key(t)).map(|t| t.table)
}

/// A receive WR's scatter list (EINVAL for a negative count, or entries behind NULL).
fn wr_sges(r: &ibv_recv_wr) -> Result<Vec<mlx5_dv::Sge>, c_int> {
    let n = usize::try_from(r.num_sge).map_err(|_| libc::EINVAL)?;
    match (n, r.sg_list.is_null()) {
        (0, _) => Ok(Vec::new()),
        (_, true) => Err(libc::EINVAL),
        // SAFETY: the caller's array of `num_sge` entries.
        _ => Ok(unsafe { std::slice::from_raw_parts(r.sg_list, n) }
            .iter()
            .map(|g| mlx5_dv::Sge { addr: g.addr, length: g.length, lkey: g.lkey })
            .collect()),
    }
}

impl Shim {
    fn create_wq(&mut self, ctx: *mut ibv_context, a: &mut ibv_wq_init_attr) -> Result<*mut ibv_wq, c_int> {
        let pd = self.pd(a.pd)?.handle;
        let cq = self.cq(a.cq)?.cq.handle;
        let attr = WqInitAttr {
            pd,
            cq,
            wq_type: a.wq_type,
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            comp_mask: a.comp_mask,
            create_flags: a.create_flags,
        };
        let wq = self.sim.create_wq(&attr).map_err(|e| e.errno())?;
        a.max_wr = wq.max_wr;
        a.max_sge = wq.max_sge;
        // SAFETY: plain data; zero is the C default (the mutex and cond are initialised by
        // ibv_create_wq after the op returns).
        let mut c: ibv_wq = unsafe { std::mem::zeroed() };
        c.context = ctx;
        c.pd = a.pd;
        c.cq = a.cq;
        c.wq_num = wq.wq_num;
        c.handle = wq.handle.id();
        c.state = ibv_wq_state::IBV_WQS_RESET;
        c.wq_type = a.wq_type;
        c.post_recv = Some(post_wq_recv);
        let mut w = Box::new(ShimWq { c, wq });
        let p: *mut ibv_wq = &mut w.c;
        wqs().insert(key(p), w);
        Ok(p)
    }

    fn modify_wq(&mut self, wq: *mut ibv_wq, a: &ibv_wq_attr) -> c_int {
        let Some(w) = wqs().get(&key(wq)).map(|w| w.wq) else { return libc::EINVAL };
        let attr = WqAttr {
            attr_mask: a.attr_mask,
            wq_state: a.wq_state,
            curr_wq_state: a.curr_wq_state,
            flags: a.flags,
            flags_mask: a.flags_mask,
        };
        // SAFETY: the shim's own ibv_wq (found above).
        let cur = unsafe { (*wq).state };
        // mlx5_modify_wq returns this one failure negated.
        if a.attr_mask & wq_attr_mask::STATE != 0
            && a.wq_state == wq_state::RDY
            && a.attr_mask & wq_attr_mask::CURR_STATE != 0
            && a.curr_wq_state != cur
        {
            return -libc::EINVAL;
        }
        match self.sim.modify_wq(&w, &attr) {
            Ok(()) => {
                if a.attr_mask & wq_attr_mask::STATE != 0 {
                    // SAFETY: as above.
                    unsafe { (*wq).state = a.wq_state };
                }
                self.notify();
                0
            }
            Err(e) => code(&e),
        }
    }

    fn destroy_wq(&mut self, wq: *mut ibv_wq) -> c_int {
        let Some(w) = wqs().get(&key(wq)).map(|w| w.wq) else { return libc::EINVAL };
        if let Err(e) = self.sim.destroy_wq(&w) {
            return code(&e);
        }
        wqs().remove(&key(wq));
        0
    }

    fn post_wq_recv(&mut self, wq: *mut ibv_wq, mut wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
        let Some(w) = wqs().get(&key(wq)).map(|w| w.wq) else { return libc::EINVAL };
        let mut ret = 0;
        while !wr.is_null() {
            // SAFETY: the caller's WR list.
            let r = unsafe { &*wr };
            let posted = wr_sges(r)
                .and_then(|sge| self.sim.post_wq_recv(&w, &[RecvWr { wr_id: r.wr_id, sge }]).map_err(|e| e.errno()));
            if let Err(e) = posted {
                ret = e;
                if !bad.is_null() {
                    // SAFETY: the caller's out pointer.
                    unsafe { *bad = wr };
                }
                break;
            }
            wr = r.next;
        }
        self.notify();
        ret
    }

    fn create_table(
        &mut self,
        ctx: *mut ibv_context,
        a: &ibv_rwq_ind_table_init_attr,
    ) -> Result<*mut ibv_rwq_ind_table, c_int> {
        let h = self.context(ctx)?.handle;
        if a.log_ind_tbl_size > 31 || a.ind_tbl.is_null() {
            return Err(libc::EINVAL);
        }
        let n = 1usize << a.log_ind_tbl_size.min(16);
        let mut list = Vec::with_capacity(n);
        if a.log_ind_tbl_size <= 16 {
            let map = wqs();
            for i in 0..n {
                // SAFETY: the program's table of `1 << log_ind_tbl_size` WQ pointers.
                let p = unsafe { *a.ind_tbl.add(i) };
                list.push(map.get(&key(p)).map(|w| w.wq.handle).ok_or(libc::EINVAL)?);
            }
        }
        let attr =
            RwqIndTableInitAttr { ctx: h, log_ind_tbl_size: a.log_ind_tbl_size, wqs: list, comp_mask: a.comp_mask };
        let table = self.sim.create_rwq_ind_table(&attr).map_err(|e| e.errno())?;
        let c = ibv_rwq_ind_table {
            context: ctx,
            ind_tbl_handle: table.handle.id() as c_int,
            ind_tbl_num: table.ind_tbl_num as c_int,
            comp_mask: 0,
        };
        let mut t = Box::new(ShimTable { c, table });
        let p: *mut ibv_rwq_ind_table = &mut t.c;
        tables().insert(key(p), t);
        Ok(p)
    }

    fn destroy_table(&mut self, t: *mut ibv_rwq_ind_table) -> c_int {
        let Some(table) = table_of(t) else { return libc::EINVAL };
        if let Err(e) = self.sim.destroy_rwq_ind_table(&table) {
            return code(&e);
        }
        tables().remove(&key(t));
        0
    }
}

unsafe extern "C" fn create_wq(ctx: *mut ibv_context, attr: *mut ibv_wq_init_attr) -> *mut ibv_wq {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    with(null, |s| s.create_wq(ctx, unsafe { &mut *attr }).unwrap_or_else(null))
}

unsafe extern "C" fn modify_wq(wq: *mut ibv_wq, attr: *mut ibv_wq_attr) -> c_int {
    if attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's attributes.
    with(|e| e, |s| s.modify_wq(wq, unsafe { &*attr }))
}

unsafe extern "C" fn destroy_wq(wq: *mut ibv_wq) -> c_int {
    with(|e| e, |s| s.destroy_wq(wq))
}

unsafe extern "C" fn post_wq_recv(wq: *mut ibv_wq, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    device_thread::posting();
    with(|e| e, |s| s.post_wq_recv(wq, wr, bad))
}

unsafe extern "C" fn create_rwq_ind_table(
    ctx: *mut ibv_context,
    attr: *mut ibv_rwq_ind_table_init_attr,
) -> *mut ibv_rwq_ind_table {
    if attr.is_null() {
        return null(libc::EINVAL);
    }
    // SAFETY: the caller's attributes.
    with(null, |s| s.create_table(ctx, unsafe { &*attr }).unwrap_or_else(null))
}

unsafe extern "C" fn destroy_rwq_ind_table(t: *mut ibv_rwq_ind_table) -> c_int {
    with(|e| e, |s| s.destroy_table(t))
}

/// `ibv_rx_hash_conf` as the simulator takes it: the key's first 40 bytes (a key of another
/// length is refused by its length alone).
pub(crate) fn rx_hash(c: &ibv_rx_hash_conf) -> mlx5_dv::RxHashConf {
    let mut key = [0u8; mlx5_dv::TOEPLITZ_KEY_LEN];
    let n = usize::from(c.rx_hash_key_len).min(key.len());
    if !c.rx_hash_key.is_null() {
        // SAFETY: the program's key of rx_hash_key_len bytes; at most 40 are read.
        key[..n].copy_from_slice(unsafe { std::slice::from_raw_parts(c.rx_hash_key, n) });
    }
    mlx5_dv::RxHashConf {
        function: c.rx_hash_function,
        key_len: u32::from(c.rx_hash_key_len),
        key,
        fields_mask: c.rx_hash_fields_mask,
    }
}
