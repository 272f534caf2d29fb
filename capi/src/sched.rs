//! `mlx5dv_sched_node_*`, `mlx5dv_sched_leaf_*` and `mlx5dv_modify_qp_sched_elem`. libmlx5
//! builds the scheduling tree on DEVX (SCHEDULING_ELEMENT general objects of the NIC
//! hierarchy) with its own checks first; the shim does the same through the simulator's DEVX
//! calls, so a node's `obj` is a DEVX object like any other.

use std::ffi::c_int;

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP, EREMOTEIO};
use mlx5_dv::prm::qos_cap::{self as qc, sched as s};
use mlx5_dv::prm::{self, general_obj_in as g, obj_type, opcode, query_hca_cap as q};
use mlx5_dv::{ContextHandle, Error};
use mlx5_hw::sys::mlx5dv::{mlx5dv_devx_obj, mlx5dv_sched_attr};
use rdma_sys::{ibv_context, ibv_qp};

use crate::errno::null;
use crate::objects::{DevxObject, SchedElem, SchedEntry};
use crate::state::{Shim, key, with};

/// `MLX5DV_SCHED_ELEM_ATTR_FLAGS_BW_SHARE | _MAX_AVG_BW`.
const ALL_FLAGS: u32 = 0x3;

/// `mlx5_get_cmd_status_err`: EREMOTEIO becomes the errno of the command's status.
fn status_err(e: &Error) -> c_int {
    match (e.errno(), e.cmd_status()) {
        (EREMOTEIO, Some(st)) => prm::status::to_errno(st.status),
        (n, _) => n,
    }
}

/// What `get_qos_caps` reads: the general page's `qos`, then the QoS page.
#[derive(Debug, Default, Clone, Copy)]
struct QosCaps {
    qos: bool,
    bw_share: bool,
    rate_limit: bool,
    element_type: u64,
    tsar_type: u64,
}

impl Shim {
    fn qos_caps(&mut self, ctx: ContextHandle) -> QosCaps {
        let page = |s: &mut Shim, op_mod| {
            let input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, op_mod);
            s.sim.devx_general_cmd(ctx, &input, q::OUT_SIZE).ok().map(|o| o[q::CAPABILITY_BYTE..].to_vec())
        };
        let get = |p: &[u8], f: prm::Field| f.get(p).unwrap_or(0);
        let Some(general) = page(self, q::OP_MOD_GENERAL_CUR) else { return QosCaps::default() };
        let mut caps = QosCaps { qos: get(&general, qc::QOS) != 0, ..QosCaps::default() };
        if let Some(p) = page(self, q::OP_MOD_QOS_CUR) {
            let sq = get(&p, qc::NIC_SQ_SCHEDULING) != 0;
            caps.bw_share = sq && get(&p, qc::NIC_BW_SHARE) != 0;
            caps.rate_limit = sq && get(&p, qc::NIC_RATE_LIMIT) != 0;
            caps.element_type = get(&p, qc::NIC_ELEMENT_TYPE);
            caps.tsar_type = get(&p, qc::NIC_TSAR_TYPE);
        }
        caps
    }

    /// `sched_attr_valid` and then `sched_supported` (nodes) and `attr_supported`.
    fn sched_checks(&mut self, ctx: ContextHandle, a: &mlx5dv_sched_attr, node: bool) -> Result<(), c_int> {
        if a.comp_mask != 0 || a.flags & !ALL_FLAGS != 0 {
            return Err(EINVAL);
        }
        if (node && a.parent.is_null() && a.flags != 0) || (!node && a.parent.is_null()) {
            return Err(EINVAL);
        }
        if !a.parent.is_null() && self.dv.sched.get(&key(a.parent)).is_none_or(|e| e.leaf) {
            return Err(EINVAL);
        }
        let caps = self.qos_caps(ctx);
        let tree = caps.qos
            && caps.element_type & s::ELEMENT_TSAR_CAP != 0
            && caps.element_type & s::ELEMENT_QUEUE_GROUP_CAP != 0
            && caps.tsar_type & s::TSAR_DWRR_CAP != 0;
        let bw = a.flags & 1 == 0 || caps.bw_share;
        let max = a.flags & 2 == 0 || caps.rate_limit;
        if (node && !tree) || !bw || !max {
            return Err(EOPNOTSUPP);
        }
        Ok(())
    }

    /// The `create_sched_elem_in` of a node (TSAR) or leaf (queue group).
    fn sched_input(&self, a: &mlx5dv_sched_attr, op: u16, leaf: bool, id: u32) -> Vec<u8> {
        let mut i = prm::new_input(s::SIZE, op, 0, obj_type::SCHEDULING_ELEMENT);
        // A parent the shim made (checked before), by its struct's address; a modify names
        // none (`mlx5dv_sched_nic_modify`).
        let parent_id =
            if op == opcode::MODIFY_GENERAL_OBJECT { 0 } else { self.dv.sched.get(&key(a.parent)).map_or(0, |e| e.id) };
        let ty = if leaf { s::ELEMENT_QUEUE_GROUP } else { s::ELEMENT_TSAR };
        for (f, v) in [
            (g::OBJ_ID, u64::from(id)),
            (s::MODIFY_FIELD_SELECT, u64::from(a.flags)),
            (s::SCHEDULING_HIERARCHY, s::HIERARCHY_NIC),
            (s::ELEMENT_TYPE, ty),
            (s::PARENT_ELEMENT_ID, u64::from(parent_id)),
            (s::BW_SHARE, if a.flags & 1 != 0 { u64::from(a.bw_share) } else { 0 }),
            (s::MAX_AVERAGE_BW, if a.flags & 2 != 0 { u64::from(a.max_avg_bw) } else { 0 }),
            (s::TSAR_TYPE, s::TSAR_DWRR),
        ] {
            let _ = f.set(&mut i, v);
        }
        i
    }

    fn sched_create(
        &mut self,
        ctx: *mut ibv_context,
        attr: *const mlx5dv_sched_attr,
        leaf: bool,
    ) -> Result<*mut SchedElem, c_int> {
        if attr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: the caller's attributes, checked non-NULL.
        let a = unsafe { *attr };
        let h = self.ctx_handle(ctx)?;
        self.sched_checks(h, &a, !leaf)?;
        let input = self.sched_input(&a, opcode::CREATE_GENERAL_OBJECT, leaf, 0);
        let o = self.sim.devx_obj_create(h, &input, prm::general_obj_out::SIZE).map_err(|e| status_err(&e))?;
        let id = prm::general_obj_out::OBJ_ID.get(&o.out).unwrap_or(0) as u32;
        let mut c = Box::new(0u64);
        let obj: *mut mlx5dv_devx_obj = (&mut *c as *mut u64).cast();
        self.dv.devx_objs.insert(key(obj), DevxObject { _c: c, handle: o.handle });
        let mut elem = Box::new(SchedElem { parent: a.parent.cast(), obj });
        let p: *mut SchedElem = &mut *elem;
        self.dv.sched.insert(key(p), SchedEntry { elem, leaf, ctx: h, handle: o.handle, id });
        Ok(p)
    }

    fn sched_modify(&mut self, elem: *mut SchedElem, attr: *const mlx5dv_sched_attr, leaf: bool) -> c_int {
        let Some((ctx, h, id)) =
            self.dv.sched.get(&key(elem)).filter(|e| e.leaf == leaf).map(|e| (e.ctx, e.handle, e.id))
        else {
            return EINVAL;
        };
        if attr.is_null() {
            return EINVAL;
        }
        // SAFETY: the caller's attributes, checked non-NULL.
        let a = unsafe { *attr };
        if let Err(e) = self.sched_checks(ctx, &a, !leaf) {
            return e;
        }
        let input = self.sched_input(&a, opcode::MODIFY_GENERAL_OBJECT, leaf, id);
        match self.sim.devx_obj_modify(h, &input, prm::general_obj_out::SIZE) {
            Ok(_) => 0,
            Err(e) => status_err(&e),
        }
    }

    fn sched_destroy(&mut self, elem: *mut SchedElem, leaf: bool) -> c_int {
        let Some((obj, h)) = self.dv.sched.get(&key(elem)).filter(|e| e.leaf == leaf).map(|e| (e.elem.obj, e.handle))
        else {
            return EINVAL;
        };
        if let Err(e) = self.sim.devx_obj_destroy(h) {
            return e.errno();
        }
        self.dv.devx_objs.remove(&key(obj));
        self.dv.sched.remove(&key(elem));
        0
    }
}

/// `mlx5dv_sched_node_create`: a TSAR under `attr->parent` (the root without one); NULL with
/// errno (EINVAL for bad attributes, EOPNOTSUPP without NIC scheduling).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_sched_node_create(
    ctx: *mut ibv_context,
    attr: *const mlx5dv_sched_attr,
) -> *mut SchedElem {
    with(null, |s| s.sched_create(ctx, attr, false).unwrap_or_else(null))
}

/// `mlx5dv_sched_leaf_create`: a queue group under `attr->parent`; NULL with errno.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_sched_leaf_create(
    ctx: *mut ibv_context,
    attr: *const mlx5dv_sched_attr,
) -> *mut SchedElem {
    with(null, |s| s.sched_create(ctx, attr, true).unwrap_or_else(null))
}

/// `mlx5dv_sched_node_modify`: 0 or the errno.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_sched_node_modify(node: *mut SchedElem, attr: *const mlx5dv_sched_attr) -> c_int {
    with(|e| e, |s| s.sched_modify(node, attr, false))
}

/// `mlx5dv_sched_leaf_modify`: 0 or the errno.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_sched_leaf_modify(leaf: *mut SchedElem, attr: *const mlx5dv_sched_attr) -> c_int {
    with(|e| e, |s| s.sched_modify(leaf, attr, true))
}

/// `mlx5dv_sched_node_destroy`: 0 or the errno.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_sched_node_destroy(node: *mut SchedElem) -> c_int {
    with(|e| e, |s| s.sched_destroy(node, false))
}

/// `mlx5dv_sched_leaf_destroy`: 0 or the errno.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_sched_leaf_destroy(leaf: *mut SchedElem) -> c_int {
    with(|e| e, |s| s.sched_destroy(leaf, true))
}

/// `mlx5dv_modify_qp_sched_elem`: the QP's requester and responder join these leaves' queue
/// groups (NULL: none); 0 or the errno. A leaf the shim did not make is EINVAL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mlx5dv_modify_qp_sched_elem(
    qp: *mut ibv_qp,
    requestor: *const SchedElem,
    responder: *const SchedElem,
) -> c_int {
    with(
        |e| e,
        |s| {
            let Some(h) = s.qps.get(&key(qp)).map(|q| q.qp) else { return EINVAL };
            let mut ids = [0u32; 2];
            for (i, l) in [requestor, responder].into_iter().enumerate() {
                if l.is_null() {
                    continue;
                }
                match s.dv.sched.get(&key(l)) {
                    Some(e) if e.leaf => ids[i] = e.id,
                    _ => return EINVAL,
                }
            }
            match s.sim.modify_qp_sched_elem(&h, ids[0], ids[1]) {
                Ok(()) => 0,
                Err(e) => status_err(&e),
            }
        },
    )
}
