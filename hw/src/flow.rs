//! Verbs flow steering on a real host: `ibv_create_flow` and `ibv_destroy_flow` are inlines of
//! `verbs.h` over `verbs_context` ops, called here as the header does, with the attribute and
//! its specs laid out as libibverbs defines them.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{Error, Flow, FlowAttr, FlowSpec, Op, Qp, Result};
use rdma_sys::*;

use crate::backend::HwBackend;
use crate::call::last_errno;
use crate::dm::{ctx_op, verbs_ctx};

/// The flows this process made: handle → the address of its `ibv_flow`. Handles count from 1,
/// as the simulator's do, so that a trace of one replays on the other.
static FLOWS: Mutex<(u64, BTreeMap<u64, usize>)> = Mutex::new((0, BTreeMap::new()));

/// A spec's bytes: type, size, then value and mask at their offsets (`ibv_flow_spec_*`).
fn spec_bytes(s: &FlowSpec) -> Vec<u8> {
    let (ty, len, val, mask, v, m): (u32, usize, usize, usize, Vec<u8>, Vec<u8>) = match s {
        FlowSpec::Eth(v, m) => {
            let f = |e: &mlx5_dv::EthFilter| {
                [&e.dst_mac[..], &e.src_mac, &e.ether_type.to_be_bytes(), &e.vlan_tag.to_be_bytes()].concat()
            };
            (0x20, 40, 6, 22, f(v), f(m))
        }
        FlowSpec::Ipv4(v, m) => {
            let f = |i: &mlx5_dv::Ipv4Filter| [&i.src_ip[..], &i.dst_ip, &[i.proto, i.tos, i.ttl, i.flags]].concat();
            (0x32, 32, 8, 20, f(v), f(m))
        }
        FlowSpec::Ipv6(v, m) => {
            let f = |i: &mlx5_dv::Ipv6Filter| {
                [&i.src_ip[..], &i.dst_ip, &i.flow_label.to_be_bytes(), &[i.next_hdr, i.traffic_class, i.hop_limit]]
                    .concat()
            };
            (0x31, 88, 8, 48, f(v), f(m))
        }
        FlowSpec::Tcp(v, m) | FlowSpec::Udp(v, m) => {
            let f = |p: &mlx5_dv::PortFilter| [p.dst_port.to_be_bytes(), p.src_port.to_be_bytes()].concat();
            (if matches!(s, FlowSpec::Tcp(..)) { 0x40 } else { 0x41 }, 16, 6, 10, f(v), f(m))
        }
    };
    let mut b = vec![0u8; len];
    b[..4].copy_from_slice(&ty.to_ne_bytes());
    b[4..6].copy_from_slice(&(len as u16).to_ne_bytes());
    b[val..val + v.len()].copy_from_slice(&v);
    b[mask..mask + m.len()].copy_from_slice(&m);
    b
}

impl HwBackend {
    pub(crate) fn hw_create_flow(&mut self, qp: &Qp, a: &FlowAttr) -> Result<Flow> {
        let op = Op::CreateFlow;
        let qptr = self.objs.qps.get(qp.handle, op)?.ptr;
        // SAFETY: a live QP.
        let cptr = unsafe { (*qptr).context };
        let Some(f) = ctx_op!(cptr, ibv_create_flow) else {
            return Err(Error::new(op, EOPNOTSUPP, "the context has no ibv_create_flow"));
        };
        let specs: Vec<u8> = a.specs.iter().flat_map(spec_bytes).collect();
        let n = u8::try_from(a.specs.len()).map_err(|_| Error::new(op, EINVAL, "more than 255 specs"))?;
        let mut buf = vec![0u64; (20 + specs.len()).div_ceil(8)];
        let bytes = buf.as_mut_ptr().cast::<u8>();
        let mut head = [0u8; 20];
        head[..4].copy_from_slice(&a.comp_mask.to_ne_bytes());
        head[4..8].copy_from_slice(&a.attr_type.to_ne_bytes());
        head[8..10].copy_from_slice(&u16::try_from(20 + specs.len()).unwrap_or(u16::MAX).to_ne_bytes());
        head[10..12].copy_from_slice(&a.priority.to_ne_bytes());
        (head[12], head[13]) = (n, a.port);
        head[16..20].copy_from_slice(&a.flags.to_ne_bytes());
        // SAFETY: buf holds 20 + specs.len() bytes, 8-byte aligned.
        unsafe {
            std::ptr::copy_nonoverlapping(head.as_ptr(), bytes, 20);
            std::ptr::copy_nonoverlapping(specs.as_ptr(), bytes.add(20), specs.len());
        }
        // SAFETY: a live QP and an attribute laid out as libibverbs reads it.
        let p = unsafe { f(qptr, bytes.cast::<ibv_flow_attr>()) };
        if p.is_null() {
            return Err(Error::new(op, last_errno(), "ibv_create_flow failed"));
        }
        let mut flows = FLOWS.lock().unwrap_or_else(PoisonError::into_inner);
        flows.0 += 1;
        let handle = flows.0;
        flows.1.insert(handle, p as usize);
        Ok(Flow { handle })
    }

    pub(crate) fn hw_destroy_flow(&mut self, flow: &Flow) -> Result<()> {
        let op = Op::DestroyFlow;
        let Some(&addr) = FLOWS.lock().unwrap_or_else(PoisonError::into_inner).1.get(&flow.handle) else {
            return Err(Error::new(op, EINVAL, "no such flow"));
        };
        let p = addr as *mut ibv_flow;
        // SAFETY: a flow this process made and has not destroyed.
        let cptr = unsafe { (*p).context };
        let Some(f) = ctx_op!(cptr, ibv_destroy_flow) else {
            return Err(Error::new(op, EOPNOTSUPP, "the context has no ibv_destroy_flow"));
        };
        // SAFETY: as above.
        let rc = unsafe { f(p) };
        if rc != 0 {
            return Err(Error::new(op, rc, "ibv_destroy_flow failed"));
        }
        FLOWS.lock().unwrap_or_else(PoisonError::into_inner).1.remove(&flow.handle);
        Ok(())
    }
}
