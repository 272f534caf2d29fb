//! mlx5dv flow matchers: `mlx5dv_create_flow_matcher`, `mlx5dv_destroy_flow_matcher` and
//! `mlx5dv_create_flow` (whose `ibv_flow` `ibv_destroy_flow` destroys), the program's
//! structures read at libmlx5's offsets.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, PoisonError};

use mlx5_dv::{FlowAction, FlowMatcher, FlowMatcherAttr, MatcherAction};
use rdma_sys::{ibv_context, ibv_flow, ibv_flow_action, ibv_qp, verbs_context};

use crate::errno::null;
use crate::state::{Shim, key, with};

/// `sizeof(struct mlx5dv_flow_action_attr)` before the bulk counter member.
const LEGACY_ACTION_LEN: usize = 16;
/// `MLX5DV_FLOW_MATCHER_MASK_IB_PORT`: `ib_port` follows `ft_type`.
const MASK_IB_PORT: u64 = 1 << 1;
/// The most match bytes read (more than an `fte_match_param`, so the kernel's check of
/// what lies past it still sees some).
const MAX_MATCH_READ: usize = 0x1000;

/// One `mlx5dv_flow_matcher`: its context and the simulator's matcher.
struct ShimMatcher {
    ctx: *mut ibv_context,
    m: FlowMatcher,
}

// SAFETY: the context pointer is the program's, only handed back; the table is reached
// under its lock.
unsafe impl Send for ShimMatcher {}

/// The matchers the program holds, by address.
static MATCHERS: Mutex<BTreeMap<usize, Box<ShimMatcher>>> = Mutex::new(BTreeMap::new());

fn matchers() -> std::sync::MutexGuard<'static, BTreeMap<usize, Box<ShimMatcher>>> {
    MATCHERS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A `struct mlx5dv_flow_match_parameters`' bytes (`match_sz`, then the buffer).
///
/// # Safety
/// `p` is NULL or points at the structure with `match_sz` readable bytes after it.
pub(crate) unsafe fn match_bytes(p: *const c_void) -> Result<Vec<u8>, c_int> {
    if p.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's contract.
    let n = unsafe { p.cast::<usize>().read_unaligned() };
    if n > MAX_MATCH_READ {
        return Err(libc::E2BIG);
    }
    // SAFETY: as above.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>().add(8), n) }.to_vec())
}

impl Shim {
    fn create_matcher(&mut self, ctx: *mut ibv_context, attr: *const u8) -> Result<*mut c_void, c_int> {
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        let h = self.ctx_handle(ctx)?;
        // SAFETY: the program's `struct mlx5dv_flow_matcher_attr`, by the call's contract.
        let rd = |at: usize, n: usize| unsafe { std::slice::from_raw_parts(attr.add(at), n) }.to_vec();
        let u32_at = |at: usize| u32::from_ne_bytes(rd(at, 4).try_into().unwrap_or_default());
        let comp_mask = u64::from_ne_bytes(rd(24, 8).try_into().unwrap_or_default());
        // SAFETY: the mask pointer of the attribute.
        let mask_ptr = unsafe { attr.add(16).cast::<*const c_void>().read_unaligned() };
        // SAFETY: the program's match parameters.
        let match_mask = unsafe { match_bytes(mask_ptr) }?;
        let a = FlowMatcherAttr {
            attr_type: u32_at(0),
            flags: u32_at(4),
            priority: u16::from_ne_bytes(rd(8, 2).try_into().unwrap_or_default()),
            match_criteria_enable: rd(10, 1)[0],
            match_mask,
            comp_mask,
            ft_type: u32_at(32),
            ib_port: if comp_mask & MASK_IB_PORT != 0 { u32_at(36) } else { 0 },
        };
        let m = self.sim.create_flow_matcher(h, &a).map_err(|e| e.errno())?;
        let b = Box::new(ShimMatcher { ctx, m });
        let p = (&*b as *const ShimMatcher).cast_mut().cast::<c_void>();
        matchers().insert(key(p), b);
        Ok(p)
    }

    fn destroy_matcher(&mut self, p: *mut c_void) -> c_int {
        let Some(m) = matchers().get(&key(p)).map(|m| m.m) else { return libc::EINVAL };
        if let Err(e) = self.sim.destroy_flow_matcher(&m) {
            return e.errno();
        }
        matchers().remove(&key(p));
        0
    }

    fn create_flow_dv(
        &mut self,
        p: *mut c_void,
        value: *const c_void,
        n: usize,
        actions: *const u8,
        stride: usize,
    ) -> Result<*mut ibv_flow, c_int> {
        let Some((ctx, m)) = matchers().get(&key(p)).map(|m| (m.ctx, m.m)) else { return Err(libc::EINVAL) };
        if n > 0 && actions.is_null() || stride < LEGACY_ACTION_LEN {
            return Err(libc::EINVAL);
        }
        let mut acts = Vec::with_capacity(n.min(64));
        for i in 0..n {
            // SAFETY: `n` actions of `stride` bytes, by the call's contract.
            let a = unsafe { actions.add(i * stride) };
            // SAFETY: as above: the type, then the union at offset 8.
            let (ty, ptr) =
                unsafe { (a.cast::<u32>().read_unaligned(), a.add(8).cast::<*const c_void>().read_unaligned()) };
            acts.push(match ty {
                0 => MatcherAction::DestQp(self.qp(ptr.cast::<ibv_qp>())?.qp),
                1 => MatcherAction::Drop,
                4 => MatcherAction::Tag(ptr as usize as u32),
                3 => MatcherAction::FlowAction(flow_action(ptr)?),
                6 => MatcherAction::CountersDevx(self.devx_obj(ptr.cast())?),
                t => MatcherAction::Other(t),
            });
        }
        // SAFETY: the program's match parameters.
        let value = unsafe { match_bytes(value) }?;
        let flow = self.sim.create_matcher_flow(&m, &value, &acts).map_err(|e| e.errno())?;
        Ok(crate::flow::register(ctx, flow))
    }
}

/// `mlx5dv_create_flow_matcher`: the matcher, or NULL with errno.
///
/// # Safety
/// `attr` is a valid `struct mlx5dv_flow_matcher_attr` of this rdma-core.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_create_flow_matcher(context: *mut ibv_context, attr: *mut c_void) -> *mut c_void {
    with(null, |s| s.create_matcher(context, attr.cast::<u8>()).unwrap_or_else(null))
}

/// `mlx5dv_destroy_flow_matcher`: 0 or the errno (EBUSY while its flows remain).
///
/// # Safety
/// `matcher` came from [`mlx5dv_create_flow_matcher`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_destroy_flow_matcher(matcher: *mut c_void) -> c_int {
    with(|e| e, |s| s.destroy_matcher(matcher))
}

/// `mlx5dv_create_flow` with the actions of this rdma-core's header (16 bytes each).
///
/// # Safety
/// The matcher came from [`mlx5dv_create_flow_matcher`]; `match_value` and the
/// `num_actions` actions are the program's valid structures.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_create_flow(
    matcher: *mut c_void,
    match_value: *mut c_void,
    num_actions: usize,
    actions: *mut c_void,
) -> *mut ibv_flow {
    // SAFETY: the caller's contract.
    unsafe { __mlx5dv_create_flow(matcher, match_value, num_actions, actions, LEGACY_ACTION_LEN) }
}

/// `__mlx5dv_create_flow`: [`mlx5dv_create_flow`] with the caller's size of an action.
///
/// # Safety
/// As [`mlx5dv_create_flow`], each action `attr_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __mlx5dv_create_flow(
    matcher: *mut c_void,
    match_value: *mut c_void,
    num_actions: usize,
    actions: *mut c_void,
    attr_len: usize,
) -> *mut ibv_flow {
    with(null, |s| {
        s.create_flow_dv(matcher, match_value, num_actions, actions.cast::<u8>(), attr_len).unwrap_or_else(null)
    })
}

/// Drop the matchers and flow actions of a closed context.
pub(crate) fn forget(ctx: *const ibv_context) {
    matchers().retain(|_, m| !std::ptr::eq(m.ctx, ctx));
    flow_actions().retain(|_, a| !std::ptr::eq(a.action.context, ctx));
}

/// One `ibv_flow_action` of `mlx5dv_create_flow_action_packet_reformat`: the program's
/// structure first, then the simulator's action.
#[repr(C)]
struct ShimFlowAction {
    action: ibv_flow_action,
    fa: FlowAction,
}

// SAFETY: the context pointer is the program's, only handed back; the table is reached
// under its lock.
unsafe impl Send for ShimFlowAction {}

/// The flow actions the program holds, by address.
static FLOW_ACTIONS: Mutex<BTreeMap<usize, Box<ShimFlowAction>>> = Mutex::new(BTreeMap::new());

fn flow_actions() -> std::sync::MutexGuard<'static, BTreeMap<usize, Box<ShimFlowAction>>> {
    FLOW_ACTIONS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn flow_action(p: *const c_void) -> Result<FlowAction, c_int> {
    flow_actions().get(&key(p)).map(|a| a.fa).ok_or(libc::EINVAL)
}

pub(crate) fn fill_context_ops(c: &mut verbs_context) {
    c.destroy_flow_action = Some(destroy_flow_action);
}

/// `mlx5dv_create_flow_action_packet_reformat`: the action, or NULL with errno.
///
/// # Safety
/// `ctx` is a context the shim opened; `data` has `data_sz` readable bytes (or is NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_create_flow_action_packet_reformat(
    ctx: *mut ibv_context,
    data_sz: usize,
    data: *const u8,
    reformat_type: u32,
    ft_type: u32,
) -> *mut ibv_flow_action {
    with(null, |s| {
        let mut make = || -> Result<*mut ibv_flow_action, c_int> {
            let h = s.ctx_handle(ctx)?;
            let bytes = match (data.is_null(), data_sz) {
                (true, 0) => Vec::new(),
                (false, n) if n > 0 && n <= MAX_MATCH_READ => {
                    // SAFETY: the caller's contract.
                    unsafe { std::slice::from_raw_parts(data, n) }.to_vec()
                }
                _ => return Err(libc::EINVAL),
            };
            let fa =
                s.sim.create_flow_action_packet_reformat(h, reformat_type, ft_type, &bytes).map_err(|e| e.errno())?;
            let mut b = Box::new(ShimFlowAction { action: ibv_flow_action { context: ctx }, fa });
            let p = std::ptr::addr_of_mut!(b.action);
            flow_actions().insert(key(p), b);
            Ok(p)
        };
        make().unwrap_or_else(null)
    })
}

/// The context op behind `ibv_destroy_flow_action`: 0 or the errno (EBUSY while flows use it).
unsafe extern "C" fn destroy_flow_action(action: *mut ibv_flow_action) -> c_int {
    with(
        |e| e,
        |s| {
            let Ok(fa) = flow_action(action.cast()) else { return libc::EINVAL };
            match s.sim.destroy_flow_action(&fa) {
                Ok(()) => {
                    flow_actions().remove(&key(action));
                    0
                }
                Err(e) => e.errno(),
            }
        },
    )
}
