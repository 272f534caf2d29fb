//! `mlx5dv_dr_*`: software steering's domains, tables, matchers, actions and rules, each a
//! box of the shim's standing for the simulator's object, and the program's structures read
//! at libmlx5's offsets.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard, PoisonError};

use mlx5_dv::{DrAction, DrActionAttr, DrDest, DrDomain, DrMatcher, DrObject, DrRule, DrTable};
use rdma_sys::{ibv_context, ibv_qp};

use crate::errno::null;
use crate::flow_matcher::match_bytes;
use crate::state::{Shim, key, with};

/// `MLX5DV_DR_ACTION_DEST_REFORMAT` (`MLX5DV_DR_ACTION_DEST` is 0).
const DEST_REFORMAT: u32 = 1;
/// The most actions, destinations or sample actions read from one call.
const MAX_LIST: usize = 1 << 12;

/// The simulator's object a program's pointer stands for, and the context of a domain.
#[derive(Debug, Clone, Copy)]
enum Obj {
    Domain(DrDomain, *mut ibv_context),
    Table(DrTable),
    Matcher(DrMatcher),
    Action(DrAction),
    Rule(DrRule),
}

/// A box the program holds a pointer to.
struct Boxed(Obj);

// SAFETY: the context pointer is the program's, only compared; the table is reached under
// its lock.
unsafe impl Send for Boxed {}

static OBJS: Mutex<BTreeMap<usize, Box<Boxed>>> = Mutex::new(BTreeMap::new());

fn objs() -> MutexGuard<'static, BTreeMap<usize, Box<Boxed>>> {
    OBJS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn register(o: Obj) -> *mut c_void {
    let b = Box::new(Boxed(o));
    let p = (&*b as *const Boxed).cast_mut().cast::<c_void>();
    objs().insert(key(p), b);
    p
}

fn lookup(p: *const c_void) -> Option<Obj> {
    objs().get(&key(p)).map(|b| b.0)
}

fn domain(p: *const c_void) -> Result<DrDomain, c_int> {
    match lookup(p) {
        Some(Obj::Domain(d, _)) => Ok(d),
        _ => Err(libc::EINVAL),
    }
}

fn table(p: *const c_void) -> Result<DrTable, c_int> {
    match lookup(p) {
        Some(Obj::Table(t)) => Ok(t),
        _ => Err(libc::EINVAL),
    }
}

fn matcher(p: *const c_void) -> Result<DrMatcher, c_int> {
    match lookup(p) {
        Some(Obj::Matcher(m)) => Ok(m),
        _ => Err(libc::EINVAL),
    }
}

fn action(p: *const c_void) -> Result<DrAction, c_int> {
    match lookup(p) {
        Some(Obj::Action(a)) => Ok(a),
        _ => Err(libc::EINVAL),
    }
}

/// `n` pointers at `p` (NULL with `n` 0 is an empty list).
///
/// # Safety
/// `p` points at `n` readable pointers, or `n` is 0.
unsafe fn pointers(p: *const *mut c_void, n: usize) -> Result<Vec<*mut c_void>, c_int> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() || n > MAX_LIST {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
}

impl Shim {
    fn dr_create_action(&mut self, attr: DrActionAttr) -> Result<*mut c_void, c_int> {
        let a = self.sim.dr_action_create(&attr).map_err(|e| e.errno())?;
        Ok(register(Obj::Action(a)))
    }

    fn dr_destroy_obj(&mut self, p: *mut c_void) -> c_int {
        let obj = match lookup(p) {
            Some(Obj::Domain(d, _)) => DrObject::Domain(d),
            Some(Obj::Table(t)) => DrObject::Table(t),
            Some(Obj::Matcher(m)) => DrObject::Matcher(m),
            Some(Obj::Action(a)) => DrObject::Action(a),
            Some(Obj::Rule(r)) => DrObject::Rule(r),
            None => return libc::EINVAL,
        };
        match self.sim.dr_destroy(obj) {
            Ok(()) => {
                objs().remove(&key(p));
                0
            }
            Err(e) => e.errno(),
        }
    }
}

/// Run `f` on the shim, giving NULL with errno for an error.
fn make(f: impl FnOnce(&mut Shim) -> Result<*mut c_void, c_int>) -> *mut c_void {
    with(null, |s| f(s).unwrap_or_else(null))
}

/// Run `f` on the shim, giving its errno (0 for success).
fn status(f: impl FnOnce(&mut Shim) -> Result<(), c_int>) -> c_int {
    with(|e| e, |s| f(s).err().unwrap_or(0))
}

/// `mlx5dv_dr_domain_create`.
///
/// # Safety
/// `ctx` is a context the shim opened.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_domain_create(ctx: *mut ibv_context, ty: u32) -> *mut c_void {
    make(|s| {
        let h = s.ctx_handle(ctx)?;
        let d = s.sim.dr_domain_create(h, ty).map_err(|e| e.errno())?;
        Ok(register(Obj::Domain(d, ctx)))
    })
}

/// `mlx5dv_dr_domain_destroy`: 0, or EBUSY while tables or actions hold it.
///
/// # Safety
/// `dmn` came from [`mlx5dv_dr_domain_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_domain_destroy(dmn: *mut c_void) -> c_int {
    with(|e| e, |s| s.dr_destroy_obj(dmn))
}

/// `mlx5dv_dr_domain_sync`.
///
/// # Safety
/// `dmn` came from [`mlx5dv_dr_domain_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_domain_sync(dmn: *mut c_void, flags: u32) -> c_int {
    status(|s| s.sim.dr_domain_sync(&domain(dmn)?, flags).map_err(|e| e.errno()))
}

/// `mlx5dv_dr_domain_allow_duplicate_rules`.
///
/// # Safety
/// `dmn` came from [`mlx5dv_dr_domain_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_domain_allow_duplicate_rules(dmn: *mut c_void, allow: bool) {
    let _ = status(|s| s.sim.dr_domain_allow_duplicate_rules(&domain(dmn)?, allow).map_err(|e| e.errno()));
}

/// `mlx5dv_dr_domain_set_reclaim_device_memory`: steering memory is not simulated, so there
/// is none to reclaim.
///
/// # Safety
/// `dmn` came from [`mlx5dv_dr_domain_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_domain_set_reclaim_device_memory(_dmn: *mut c_void, _enable: bool) {}

/// `mlx5dv_dump_dr_domain`: the domain's tables, matchers and rules written to `fout`.
///
/// # Safety
/// `fout` is an open `FILE *`; `dmn` came from [`mlx5dv_dr_domain_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dump_dr_domain(fout: *mut libc::FILE, dmn: *mut c_void) -> c_int {
    if fout.is_null() {
        return libc::EINVAL;
    }
    status(|s| {
        let text = s.sim.dr_domain_dump(&domain(dmn)?).map_err(|e| e.errno())?;
        // SAFETY: the program's open stream; `text` is `len` readable bytes.
        let n = unsafe { libc::fwrite(text.as_ptr().cast(), 1, text.len(), fout) };
        // SAFETY: as above.
        if n != text.len() || unsafe { libc::fflush(fout) } != 0 {
            return Err(libc::EIO);
        }
        Ok(())
    })
}

/// `mlx5dv_dr_table_create`.
///
/// # Safety
/// `dmn` came from [`mlx5dv_dr_domain_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_table_create(dmn: *mut c_void, level: u32) -> *mut c_void {
    make(|s| {
        let t = s.sim.dr_table_create(&domain(dmn)?, level).map_err(|e| e.errno())?;
        Ok(register(Obj::Table(t)))
    })
}

/// `mlx5dv_dr_table_destroy`.
///
/// # Safety
/// `tbl` came from [`mlx5dv_dr_table_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_table_destroy(tbl: *mut c_void) -> c_int {
    with(|e| e, |s| s.dr_destroy_obj(tbl))
}

/// `mlx5dv_dr_matcher_create`.
///
/// # Safety
/// `tbl` came from [`mlx5dv_dr_table_create`]; `mask` is the program's match parameters.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_matcher_create(
    tbl: *mut c_void,
    priority: u16,
    criteria: u8,
    mask: *mut c_void,
) -> *mut c_void {
    make(|s| {
        let t = table(tbl)?;
        // SAFETY: the program's match parameters; NULL is no mask.
        let mask = if mask.is_null() { Vec::new() } else { unsafe { match_bytes(mask) }? };
        let m = s.sim.dr_matcher_create(&t, priority, criteria, &mask).map_err(|e| e.errno())?;
        Ok(register(Obj::Matcher(m)))
    })
}

/// `mlx5dv_dr_matcher_destroy`.
///
/// # Safety
/// `m` came from [`mlx5dv_dr_matcher_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_matcher_destroy(m: *mut c_void) -> c_int {
    with(|e| e, |s| s.dr_destroy_obj(m))
}

/// `mlx5dv_dr_matcher_set_layout`.
///
/// # Safety
/// `m` came from [`mlx5dv_dr_matcher_create`]; `layout` is a `struct mlx5dv_dr_matcher_layout`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_matcher_set_layout(m: *mut c_void, layout: *const u32) -> c_int {
    if layout.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's contract: flags, then log_num_of_rules_hint.
    let (flags, log) = unsafe { (layout.read_unaligned(), layout.add(1).read_unaligned()) };
    status(|s| s.sim.dr_matcher_set_layout(&matcher(m)?, flags, log).map_err(|e| e.errno()))
}

/// `mlx5dv_dr_rule_create`.
///
/// # Safety
/// `m` came from [`mlx5dv_dr_matcher_create`]; `value` is the program's match parameters;
/// `actions` holds `num` actions of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_rule_create(
    m: *mut c_void,
    value: *mut c_void,
    num: usize,
    actions: *const *mut c_void,
) -> *mut c_void {
    make(|s| {
        let mt = matcher(m)?;
        // SAFETY: the program's match parameters.
        let value = unsafe { match_bytes(value) }?;
        // SAFETY: the caller's contract.
        let acts = unsafe { pointers(actions, num) }?.into_iter().map(|p| action(p)).collect::<Result<Vec<_>, _>>()?;
        let r = s.sim.dr_rule_create(&mt, &value, &acts).map_err(|e| e.errno())?;
        Ok(register(Obj::Rule(r)))
    })
}

/// `mlx5dv_dr_rule_destroy`.
///
/// # Safety
/// `r` came from [`mlx5dv_dr_rule_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_rule_destroy(r: *mut c_void) -> c_int {
    with(|e| e, |s| s.dr_destroy_obj(r))
}

/// `mlx5dv_dr_action_destroy`: 0, or EBUSY while rules or other actions hold it.
///
/// # Safety
/// `a` came from an `mlx5dv_dr_action_create_*` of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_action_destroy(a: *mut c_void) -> c_int {
    with(|e| e, |s| s.dr_destroy_obj(a))
}

/// `mlx5dv_dr_action_create_drop`.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_dr_action_create_drop() -> *mut c_void {
    make(|s| s.dr_create_action(DrActionAttr::Drop))
}

/// `mlx5dv_dr_action_create_default_miss`.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_dr_action_create_default_miss() -> *mut c_void {
    make(|s| s.dr_create_action(DrActionAttr::DefaultMiss))
}

/// `mlx5dv_dr_action_create_pop_vlan`.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_dr_action_create_pop_vlan() -> *mut c_void {
    make(|s| s.dr_create_action(DrActionAttr::PopVlan))
}

/// `mlx5dv_dr_action_create_tag`.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_dr_action_create_tag(tag: u32) -> *mut c_void {
    make(|s| s.dr_create_action(DrActionAttr::Tag(tag)))
}

/// `mlx5dv_dr_action_create_dest_ibv_qp`.
///
/// # Safety
/// `qp` is a QP the shim made.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_action_create_dest_ibv_qp(qp: *mut ibv_qp) -> *mut c_void {
    make(|s| {
        let q = s.qp(qp)?.qp;
        s.dr_create_action(DrActionAttr::DestQp(q))
    })
}

/// `mlx5dv_dr_action_create_dest_devx_tir`.
///
/// # Safety
/// `obj` is a DEVX object the shim made.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_action_create_dest_devx_tir(obj: *mut c_void) -> *mut c_void {
    make(|s| {
        let h = s.devx_obj(obj.cast())?;
        s.dr_create_action(DrActionAttr::DestTir(h))
    })
}

/// `mlx5dv_dr_action_create_flow_counter`.
///
/// # Safety
/// `obj` is a DEVX object the shim made.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_action_create_flow_counter(obj: *mut c_void, offset: u32) -> *mut c_void {
    make(|s| {
        let counter = s.devx_obj(obj.cast())?;
        s.dr_create_action(DrActionAttr::FlowCounter { counter, offset })
    })
}

/// `mlx5dv_dr_action_create_dest_table`.
///
/// # Safety
/// `tbl` came from [`mlx5dv_dr_table_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_action_create_dest_table(tbl: *mut c_void) -> *mut c_void {
    make(|s| {
        let t = table(tbl)?;
        s.dr_create_action(DrActionAttr::DestTable(t))
    })
}

/// `mlx5dv_dr_action_create_modify_header`: `actions` is `actions_sz` bytes of PRM actions.
///
/// # Safety
/// `dmn` came from [`mlx5dv_dr_domain_create`]; `actions` has `actions_sz` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_action_create_modify_header(
    dmn: *mut c_void,
    flags: u32,
    actions_sz: usize,
    actions: *const u8,
) -> *mut c_void {
    make(|s| {
        let domain = domain(dmn)?;
        if actions.is_null() || actions_sz > MAX_LIST * 8 {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's contract.
        let actions = unsafe { std::slice::from_raw_parts(actions, actions_sz) }.to_vec();
        s.dr_create_action(DrActionAttr::ModifyHeader { domain, flags, actions })
    })
}

/// `mlx5dv_dr_action_create_push_vlan`: `vlan_hdr` is the header's big-endian word.
///
/// # Safety
/// `dmn` came from [`mlx5dv_dr_domain_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_action_create_push_vlan(dmn: *mut c_void, vlan_hdr: u32) -> *mut c_void {
    make(|s| {
        let domain = domain(dmn)?;
        s.dr_create_action(DrActionAttr::PushVlan { domain, vlan_hdr: u32::from_be(vlan_hdr) })
    })
}

/// `mlx5dv_dr_action_create_packet_reformat`.
///
/// # Safety
/// `dmn` came from [`mlx5dv_dr_domain_create`]; `data` has `data_sz` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_action_create_packet_reformat(
    dmn: *mut c_void,
    flags: u32,
    reformat_type: u32,
    data_sz: usize,
    data: *const u8,
) -> *mut c_void {
    make(|s| {
        let domain = domain(dmn)?;
        let data = match (data.is_null(), data_sz) {
            (true, 0) => Vec::new(),
            // libmlx5: data without a size, or a size without data.
            (false, 0) | (true, _) => return Err(libc::EINVAL),
            // SAFETY: the caller's contract.
            (false, n) if n <= MAX_LIST => unsafe { std::slice::from_raw_parts(data, n) }.to_vec(),
            _ => return Err(libc::EINVAL),
        };
        s.dr_create_action(DrActionAttr::PacketReformat { domain, flags, reformat_type, data })
    })
}

/// `mlx5dv_dr_action_create_dest_array`.
///
/// # Safety
/// `dmn` came from [`mlx5dv_dr_domain_create`]; `dests` holds `num` pointers to
/// `struct mlx5dv_dr_action_dest_attr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_action_create_dest_array(
    dmn: *mut c_void,
    num: usize,
    dests: *const *mut c_void,
) -> *mut c_void {
    make(|s| {
        let domain = domain(dmn)?;
        let mut out = Vec::new();
        // SAFETY: the caller's contract.
        for d in unsafe { pointers(dests, num) }? {
            if d.is_null() {
                return Err(libc::EINVAL);
            }
            // SAFETY: a `struct mlx5dv_dr_action_dest_attr`: the type, then the pointer at 8.
            let (ty, p) = unsafe {
                (d.cast::<u32>().read_unaligned(), d.cast::<u8>().add(8).cast::<*mut c_void>().read_unaligned())
            };
            out.push(if ty == DEST_REFORMAT {
                if p.is_null() {
                    return Err(libc::EINVAL);
                }
                // SAFETY: a `struct mlx5dv_dr_action_dest_reformat`: reformat, then dest.
                let (r, dst) = unsafe {
                    (p.cast::<*mut c_void>().read_unaligned(), p.cast::<*mut c_void>().add(1).read_unaligned())
                };
                DrDest::DestReformat { reformat: action(r)?, dest: action(dst)? }
            } else {
                DrDest::Dest(action(p)?)
            });
        }
        s.dr_create_action(DrActionAttr::DestArray { domain, dests: out })
    })
}

/// `mlx5dv_dr_action_create_flow_sampler`.
///
/// # Safety
/// `attr` is a `struct mlx5dv_dr_flow_sampler_attr` whose pointers are this library's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_action_create_flow_sampler(attr: *const u8) -> *mut c_void {
    make(|s| {
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the structure's members at their offsets (ratio 0, table 8, count 16,
        // actions 24, register action 32).
        let (ratio, tbl, n, acts, reg) = unsafe {
            (
                attr.cast::<u32>().read_unaligned(),
                attr.add(8).cast::<*mut c_void>().read_unaligned(),
                attr.add(16).cast::<u32>().read_unaligned(),
                attr.add(24).cast::<*const *mut c_void>().read_unaligned(),
                attr.add(32).cast::<u64>().read_unaligned(),
            )
        };
        let default_next_table = table(tbl)?;
        // SAFETY: `n` action pointers, by the structure's contract.
        let sample_actions =
            unsafe { pointers(acts, n as usize) }?.into_iter().map(|p| action(p)).collect::<Result<Vec<_>, _>>()?;
        s.dr_create_action(DrActionAttr::FlowSampler {
            sample_ratio: ratio,
            default_next_table,
            sample_actions,
            action: u64::from_be(reg),
        })
    })
}

/// `mlx5dv_dr_action_create_dest_vport`.
///
/// # Safety
/// `dmn` came from [`mlx5dv_dr_domain_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_action_create_dest_vport(dmn: *mut c_void, vport: u32) -> *mut c_void {
    make(|s| {
        let domain = domain(dmn)?;
        s.dr_create_action(DrActionAttr::DestVport { domain, vport })
    })
}

/// `mlx5dv_dr_action_create_dest_ib_port`.
///
/// # Safety
/// `dmn` came from [`mlx5dv_dr_domain_create`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_dr_action_create_dest_ib_port(dmn: *mut c_void, port: u32) -> *mut c_void {
    make(|s| {
        let domain = domain(dmn)?;
        s.dr_create_action(DrActionAttr::DestIbPort { domain, port })
    })
}

/// Drop the boxes of a closed context's domains (the simulator forgot their objects).
pub(crate) fn forget(ctx: *const ibv_context) {
    let mut o = objs();
    let doms: Vec<usize> =
        o.iter().filter(|(_, b)| matches!(b.0, Obj::Domain(_, c) if std::ptr::eq(c, ctx))).map(|(k, _)| *k).collect();
    for k in doms {
        o.remove(&k);
    }
}
