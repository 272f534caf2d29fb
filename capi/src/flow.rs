//! Verbs flow steering: the context ops behind the header's inline `ibv_create_flow` and
//! `ibv_destroy_flow` (kernel contexts), the program's `struct ibv_flow_attr` and the specs
//! after it read as libibverbs lays them out.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::{Mutex, PoisonError};

use mlx5_dv::{EthFilter, Flow, FlowAttr, FlowSpec, Ipv4Filter, Ipv6Filter, PortFilter};
use rdma_sys::*;

use crate::errno::{code, null};
use crate::state::{Shim, key, with};

/// `sizeof(struct ibv_flow_attr)`: the specs start right after it.
const ATTR_LEN: usize = 20;

/// `enum ibv_flow_spec_type` values the simulator parses.
mod spec {
    pub const ETH: u32 = 0x20;
    pub const IPV4: u32 = 0x30;
    pub const IPV6: u32 = 0x31;
    pub const IPV4_EXT: u32 = 0x32;
    pub const TCP: u32 = 0x40;
    pub const UDP: u32 = 0x41;
    /// The types mlx5 knows that are not simulated (tunnels, MPLS, ESP, actions), and the
    /// inner-headers bit.
    pub const KNOWN_OTHERS: &[u32] = &[0x50, 0x51, 0x52, 0x60, 0x61, 0x62, 0x1000, 0x1001, 0x1002, 0x1003, 0x1004];
    pub const INNER: u32 = 0x100;
}

/// One `ibv_flow`, with the simulator's rule behind it.
#[repr(C)]
struct ShimFlow {
    c: ibv_flow,
    flow: Flow,
}

// SAFETY: the context pointer inside is the program's, only compared and handed back; the
// table is reached under its lock.
unsafe impl Send for ShimFlow {}

/// The flows the program holds, by the address of their `ibv_flow`.
static FLOWS: Mutex<BTreeMap<usize, Box<ShimFlow>>> = Mutex::new(BTreeMap::new());

fn flows() -> std::sync::MutexGuard<'static, BTreeMap<usize, Box<ShimFlow>>> {
    FLOWS.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn fill_context_ops(c: &mut verbs_context) {
    c.ibv_create_flow = Some(create_flow);
    c.ibv_destroy_flow = Some(destroy_flow);
}

/// Drop the `ibv_flow`s of a closed context (the close destroyed their rules).
pub(crate) fn forget(ctx: *const ibv_context) {
    flows().retain(|_, f| !std::ptr::eq(f.c.context, ctx));
}

fn mac(b: &[u8]) -> [u8; 6] {
    let mut m = [0u8; 6];
    m.copy_from_slice(b.get(..6).unwrap_or(&[0; 6]));
    m
}

fn be16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2).map_or(0, |x| u16::from_be_bytes([x[0], x[1]]))
}

fn arr<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(x) = b.get(at..at + N) {
        out.copy_from_slice(x);
    }
    out
}

fn eth(b: &[u8]) -> EthFilter {
    EthFilter {
        dst_mac: mac(b),
        src_mac: mac(b.get(6..).unwrap_or(&[])),
        ether_type: be16(b, 12),
        vlan_tag: be16(b, 14),
    }
}

fn ipv4(b: &[u8], ext: bool) -> Ipv4Filter {
    let mut f = Ipv4Filter { src_ip: arr(b, 0), dst_ip: arr(b, 4), ..Ipv4Filter::default() };
    if ext {
        [f.proto, f.tos, f.ttl, f.flags] = arr(b, 8);
    }
    f
}

fn ipv6(b: &[u8]) -> Ipv6Filter {
    let [next_hdr, traffic_class, hop_limit] = arr(b, 36);
    Ipv6Filter {
        src_ip: arr(b, 0),
        dst_ip: arr(b, 16),
        flow_label: u32::from_be_bytes(arr(b, 32)),
        next_hdr,
        traffic_class,
        hop_limit,
    }
}

fn ports(b: &[u8]) -> PortFilter {
    PortFilter { dst_port: be16(b, 0), src_port: be16(b, 2) }
}

/// One spec from its bytes (`b`: its `size` bytes): uverbs' `kern_spec_to_ib_spec` (a size
/// other than the type's is EINVAL, as is a type it does not know), then what mlx5 parses.
fn parse_spec(ty: u32, b: &[u8]) -> Result<FlowSpec, c_int> {
    let (len, val, mask) = match ty {
        spec::ETH => (40, 6, 22),
        spec::IPV4 => (24, 8, 16),
        spec::IPV4_EXT => (32, 8, 20),
        spec::IPV6 => (88, 8, 48),
        spec::TCP | spec::UDP => (16, 6, 10),
        t if spec::KNOWN_OTHERS.contains(&(t & !spec::INNER)) || t & spec::INNER != 0 => {
            return Err(libc::EOPNOTSUPP);
        }
        _ => return Err(libc::EINVAL),
    };
    if b.len() != len {
        return Err(libc::EINVAL);
    }
    let (v, m) = (&b[val..mask], &b[mask..]);
    Ok(match ty {
        spec::ETH => FlowSpec::Eth(eth(v), eth(m)),
        spec::IPV4 => FlowSpec::Ipv4(ipv4(v, false), ipv4(m, false)),
        spec::IPV4_EXT => FlowSpec::Ipv4(ipv4(v, true), ipv4(m, true)),
        spec::IPV6 => FlowSpec::Ipv6(ipv6(v), ipv6(m)),
        spec::TCP => FlowSpec::Tcp(ports(v), ports(m)),
        _ => FlowSpec::Udp(ports(v), ports(m)),
    })
}

/// The attribute and its specs from the program's memory.
///
/// # Safety
/// `a` points at an `ibv_flow_attr` followed by `num_of_specs` specs, each `size` bytes.
unsafe fn read_attr(a: *const ibv_flow_attr) -> Result<FlowAttr, c_int> {
    // SAFETY: the caller's contract.
    let head = unsafe { std::slice::from_raw_parts(a.cast::<u8>(), ATTR_LEN) };
    let u32_at = |at: usize| u32::from_ne_bytes(arr(head, at));
    let u16_at = |at: usize| u16::from_ne_bytes(arr(head, at));
    let (n, port) = (head[12], head[13]);
    let mut specs = Vec::with_capacity(usize::from(n));
    let mut at = ATTR_LEN;
    for _ in 0..n {
        // SAFETY: each spec starts with its type (u32) and size (u16), inside the caller's
        // memory by the contract.
        let hdr = unsafe { std::slice::from_raw_parts(a.cast::<u8>().add(at), 6) };
        let ty = u32::from_ne_bytes(arr(hdr, 0));
        let size = usize::from(u16::from_ne_bytes(arr(hdr, 4)));
        if size < 6 {
            return Err(libc::EINVAL);
        }
        // SAFETY: as above, `size` bytes.
        let body = unsafe { std::slice::from_raw_parts(a.cast::<u8>().add(at), size) };
        specs.push(parse_spec(ty, body)?);
        at += size;
    }
    Ok(FlowAttr { comp_mask: u32_at(0), attr_type: u32_at(4), priority: u16_at(10), port, flags: u32_at(16), specs })
}

/// Hold `flow` as an `ibv_flow` of `ctx` (`ibv_destroy_flow` destroys it).
pub(crate) fn register(ctx: *mut ibv_context, flow: Flow) -> *mut ibv_flow {
    let mut f = Box::new(ShimFlow { c: ibv_flow { comp_mask: 0, context: ctx, handle: flow.handle as u32 }, flow });
    let p: *mut ibv_flow = &mut f.c;
    flows().insert(key(p), f);
    p
}

impl Shim {
    fn create_flow(&mut self, qp: *mut ibv_qp, attr: *mut ibv_flow_attr) -> Result<*mut ibv_flow, c_int> {
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        let (q, ctx) = {
            let q = self.qp(qp)?;
            // SAFETY: the shim's own ibv_qp.
            (q.qp, unsafe { (*qp).context })
        };
        // SAFETY: the program's attribute, by ibv_create_flow's contract.
        let a = unsafe { read_attr(attr) }?;
        let flow = self.sim.create_flow(&q, &a).map_err(|e| e.errno())?;
        Ok(register(ctx, flow))
    }

    fn destroy_flow(&mut self, flow: *mut ibv_flow) -> c_int {
        let Some(f) = flows().get(&key(flow)).map(|f| f.flow) else { return libc::EINVAL };
        if let Err(e) = self.sim.destroy_flow(&f) {
            return code(&e);
        }
        flows().remove(&key(flow));
        0
    }
}

unsafe extern "C" fn create_flow(qp: *mut ibv_qp, attr: *mut ibv_flow_attr) -> *mut ibv_flow {
    with(null, |s| s.create_flow(qp, attr).unwrap_or_else(null))
}

unsafe extern "C" fn destroy_flow(flow: *mut ibv_flow) -> c_int {
    with(|e| e, |s| s.destroy_flow(flow))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_at_libibverbs_offsets() {
        let mut b = vec![0u8; 40];
        b[6..12].copy_from_slice(&[1, 2, 3, 4, 5, 6]);
        b[18..20].copy_from_slice(&0x0800u16.to_be_bytes());
        b[22..28].copy_from_slice(&[0xff; 6]);
        let FlowSpec::Eth(v, m) = parse_spec(spec::ETH, &b).expect("an ETH spec") else { panic!() };
        assert_eq!((v.dst_mac, v.ether_type, m.dst_mac), ([1, 2, 3, 4, 5, 6], 0x0800, [0xff; 6]));
        assert_eq!(parse_spec(spec::ETH, &b[..38]), Err(libc::EINVAL), "a short spec");
        assert_eq!(parse_spec(0x0077, &b), Err(libc::EINVAL), "an unknown type");
        assert_eq!(parse_spec(0x50, &b), Err(libc::EOPNOTSUPP), "VXLAN");
        let mut t = vec![0u8; 16];
        t[6..8].copy_from_slice(&4791u16.to_be_bytes());
        assert_eq!(
            parse_spec(spec::UDP, &t),
            Ok(FlowSpec::Udp(PortFilter { dst_port: 4791, src_port: 0 }, PortFilter::default()))
        );
    }
}
