//! [`Steering`] on hardware: libmlx5's `mlx5dv_dr_*`, looked up at run time (the committed
//! bindings leave the family out: its structures are opaque). Packet reformat flow actions
//! are not forwarded (EOPNOTSUPP, like `mlx5dv_create_flow_matcher` on this backend).

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{
    ContextHandle, DrAction, DrActionAttr, DrDest, DrDomain, DrMatcher, DrObject, DrRule, DrTable, Error, FlowAction,
    Op, Result, Steering,
};
use rdma_sys::{ibv_context, ibv_qp};

use crate::backend::HwBackend;
use crate::call::last_errno;

type P = *mut c_void;

/// The family's functions, typed as `mlx5dv.h` declares them.
struct DrFns {
    domain_create: unsafe extern "C" fn(*mut ibv_context, u32) -> P,
    domain_destroy: unsafe extern "C" fn(P) -> c_int,
    domain_sync: unsafe extern "C" fn(P, u32) -> c_int,
    allow_duplicate_rules: unsafe extern "C" fn(P, bool),
    dump_domain: unsafe extern "C" fn(*mut libc::FILE, P) -> c_int,
    table_create: unsafe extern "C" fn(P, u32) -> P,
    table_destroy: unsafe extern "C" fn(P) -> c_int,
    matcher_create: unsafe extern "C" fn(P, u16, u8, P) -> P,
    matcher_destroy: unsafe extern "C" fn(P) -> c_int,
    matcher_set_layout: unsafe extern "C" fn(P, *mut [u32; 2]) -> c_int,
    rule_create: unsafe extern "C" fn(P, P, usize, *mut P) -> P,
    rule_destroy: unsafe extern "C" fn(P) -> c_int,
    action_destroy: unsafe extern "C" fn(P) -> c_int,
    drop: unsafe extern "C" fn() -> P,
    default_miss: unsafe extern "C" fn() -> P,
    pop_vlan: unsafe extern "C" fn() -> P,
    tag: unsafe extern "C" fn(u32) -> P,
    dest_qp: unsafe extern "C" fn(*mut ibv_qp) -> P,
    dest_tir: unsafe extern "C" fn(P) -> P,
    dest_table: unsafe extern "C" fn(P) -> P,
    flow_counter: unsafe extern "C" fn(P, u32) -> P,
    modify_header: unsafe extern "C" fn(P, u32, usize, *mut u64) -> P,
    push_vlan: unsafe extern "C" fn(P, u32) -> P,
    packet_reformat: unsafe extern "C" fn(P, u32, u32, usize, P) -> P,
    dest_array: unsafe extern "C" fn(P, usize, *mut P) -> P,
    flow_sampler: unsafe extern "C" fn(*mut SamplerAttr) -> P,
    dest_vport: unsafe extern "C" fn(P, u32) -> P,
    dest_ib_port: unsafe extern "C" fn(P, u32) -> P,
    _lib: libloading::Library,
}

/// `struct mlx5dv_dr_flow_sampler_attr`.
#[repr(C)]
struct SamplerAttr {
    sample_ratio: u32,
    default_next_table: P,
    num_sample_actions: u32,
    sample_actions: *mut P,
    action: u64,
}

/// `struct mlx5dv_dr_action_dest_attr` and `struct mlx5dv_dr_action_dest_reformat`.
#[repr(C)]
struct DestAttr {
    ty: u32,
    ptr: P,
}
#[repr(C)]
struct DestReformat {
    reformat: P,
    dest: P,
}

impl DrFns {
    fn load() -> std::result::Result<Self, String> {
        // SAFETY: libmlx5 is loaded already by the backend; this takes another reference.
        let lib = unsafe { libloading::Library::new(crate::lib_mlx5::LIBMLX5) }.map_err(|e| e.to_string())?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is typed as mlx5dv.h declares it.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| format!("{}: {e}", $name))?
            };
        }
        Ok(DrFns {
            domain_create: sym!("mlx5dv_dr_domain_create"),
            domain_destroy: sym!("mlx5dv_dr_domain_destroy"),
            domain_sync: sym!("mlx5dv_dr_domain_sync"),
            allow_duplicate_rules: sym!("mlx5dv_dr_domain_allow_duplicate_rules"),
            dump_domain: sym!("mlx5dv_dump_dr_domain"),
            table_create: sym!("mlx5dv_dr_table_create"),
            table_destroy: sym!("mlx5dv_dr_table_destroy"),
            matcher_create: sym!("mlx5dv_dr_matcher_create"),
            matcher_destroy: sym!("mlx5dv_dr_matcher_destroy"),
            matcher_set_layout: sym!("mlx5dv_dr_matcher_set_layout"),
            rule_create: sym!("mlx5dv_dr_rule_create"),
            rule_destroy: sym!("mlx5dv_dr_rule_destroy"),
            action_destroy: sym!("mlx5dv_dr_action_destroy"),
            drop: sym!("mlx5dv_dr_action_create_drop"),
            default_miss: sym!("mlx5dv_dr_action_create_default_miss"),
            pop_vlan: sym!("mlx5dv_dr_action_create_pop_vlan"),
            tag: sym!("mlx5dv_dr_action_create_tag"),
            dest_qp: sym!("mlx5dv_dr_action_create_dest_ibv_qp"),
            dest_tir: sym!("mlx5dv_dr_action_create_dest_devx_tir"),
            dest_table: sym!("mlx5dv_dr_action_create_dest_table"),
            flow_counter: sym!("mlx5dv_dr_action_create_flow_counter"),
            modify_header: sym!("mlx5dv_dr_action_create_modify_header"),
            push_vlan: sym!("mlx5dv_dr_action_create_push_vlan"),
            packet_reformat: sym!("mlx5dv_dr_action_create_packet_reformat"),
            dest_array: sym!("mlx5dv_dr_action_create_dest_array"),
            flow_sampler: sym!("mlx5dv_dr_action_create_flow_sampler"),
            dest_vport: sym!("mlx5dv_dr_action_create_dest_vport"),
            dest_ib_port: sym!("mlx5dv_dr_action_create_dest_ib_port"),
            _lib: lib,
        })
    }
}

/// The family's objects this backend made: handle → the library's pointer.
#[derive(Default)]
pub(crate) struct HwDr {
    fns: Option<std::result::Result<DrFns, String>>,
    objs: BTreeMap<u64, P>,
    next: u64,
}

impl std::fmt::Debug for HwDr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HwDr").field("objects", &self.objs.len()).finish_non_exhaustive()
    }
}

/// `struct mlx5dv_flow_match_parameters` of `bytes`, 8-byte aligned.
fn params(bytes: &[u8]) -> Vec<u64> {
    let mut v = vec![0u64; 1 + bytes.len().div_ceil(8)];
    v[0] = bytes.len() as u64;
    // SAFETY: `v` has room for the size word and `bytes` after it.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().add(1).cast::<u8>(), bytes.len()) };
    v
}

impl HwBackend {
    fn dr_fns(&mut self, op: Op) -> Result<&DrFns> {
        match self.dr.fns.get_or_insert_with(DrFns::load) {
            Ok(f) => Ok(f),
            Err(e) => Err(Error::new(op, EOPNOTSUPP, format!("libmlx5 has no mlx5dv_dr ({e})"))),
        }
    }

    fn dr_ptr(&self, h: u64, op: Op) -> Result<P> {
        self.dr.objs.get(&h).copied().ok_or_else(|| Error::new(op, EINVAL, "no such mlx5dv_dr object"))
    }

    /// Keep `p` (NULL: the call failed with errno) under a new handle.
    fn dr_keep(&mut self, p: P, op: Op) -> Result<u64> {
        if p.is_null() {
            return Err(Error::new(op, last_errno(), "libmlx5 returned NULL"));
        }
        self.dr.next += 1;
        self.dr.objs.insert(self.dr.next, p);
        Ok(self.dr.next)
    }

    fn dr_status(rc: c_int, op: Op) -> Result<()> {
        if rc == 0 { Ok(()) } else { Err(Error::new(op, rc, "libmlx5's status")) }
    }

    fn dr_make_action(&mut self, attr: &DrActionAttr) -> Result<P> {
        let op = Op::DrActionCreate;
        let ptr = |s: &Self, h: u64| s.dr_ptr(h, op);
        let devx = |s: &Self, h: mlx5_dv::DevxObjHandle| s.objs.devx_objs.get(h, op).map(|o| o.ptr.cast::<c_void>());
        // Arguments first (they borrow self), then the call.
        Ok(match attr {
            // SAFETY (these four): the calls take no pointers.
            DrActionAttr::Drop => unsafe { (self.dr_fns(op)?.drop)() },
            DrActionAttr::DefaultMiss => unsafe { (self.dr_fns(op)?.default_miss)() },
            DrActionAttr::PopVlan => unsafe { (self.dr_fns(op)?.pop_vlan)() },
            DrActionAttr::Tag(t) => unsafe { (self.dr_fns(op)?.tag)(*t) },
            DrActionAttr::DestQp(q) => {
                let qp = self.objs.qps.get(q.handle, op)?.ptr;
                // SAFETY: a live QP of this backend.
                unsafe { (self.dr_fns(op)?.dest_qp)(qp) }
            }
            DrActionAttr::DestTir(h) => {
                let o = devx(self, *h)?;
                // SAFETY: a live DEVX object of this backend.
                unsafe { (self.dr_fns(op)?.dest_tir)(o) }
            }
            DrActionAttr::DestTable(t) => {
                let p = ptr(self, t.handle)?;
                // SAFETY: a live table.
                unsafe { (self.dr_fns(op)?.dest_table)(p) }
            }
            DrActionAttr::FlowCounter { counter, offset } => {
                let o = devx(self, *counter)?;
                // SAFETY: a live DEVX object of this backend.
                unsafe { (self.dr_fns(op)?.flow_counter)(o, *offset) }
            }
            DrActionAttr::ModifyHeader { domain, flags, actions } => {
                let d = ptr(self, domain.handle)?;
                let mut words: Vec<u64> = actions
                    .chunks(8)
                    .map(|c| {
                        let mut w = [0u8; 8];
                        w[..c.len()].copy_from_slice(c);
                        u64::from_ne_bytes(w)
                    })
                    .collect();
                // SAFETY: `actions.len()` bytes of actions in `words`.
                unsafe { (self.dr_fns(op)?.modify_header)(d, *flags, actions.len(), words.as_mut_ptr()) }
            }
            DrActionAttr::PushVlan { domain, vlan_hdr } => {
                let d = ptr(self, domain.handle)?;
                // SAFETY: a live domain; the header as the big-endian word.
                unsafe { (self.dr_fns(op)?.push_vlan)(d, vlan_hdr.to_be()) }
            }
            DrActionAttr::PacketReformat { domain, flags, reformat_type, data } => {
                let d = ptr(self, domain.handle)?;
                let mut data = data.clone();
                let p = if data.is_empty() { std::ptr::null_mut() } else { data.as_mut_ptr().cast() };
                // SAFETY: `data.len()` bytes at `p`, or NULL and 0.
                unsafe { (self.dr_fns(op)?.packet_reformat)(d, *flags, *reformat_type, data.len(), p) }
            }
            DrActionAttr::DestArray { domain, dests } => {
                let d = ptr(self, domain.handle)?;
                let mut reformats = Vec::with_capacity(dests.len());
                let mut attrs = Vec::with_capacity(dests.len());
                for x in dests {
                    match x {
                        DrDest::Dest(a) => attrs.push(DestAttr { ty: 0, ptr: ptr(self, a.handle)? }),
                        DrDest::DestReformat { reformat, dest } => {
                            reformats.push(DestReformat {
                                reformat: ptr(self, reformat.handle)?,
                                dest: ptr(self, dest.handle)?,
                            });
                            attrs.push(DestAttr { ty: 1, ptr: std::ptr::null_mut() });
                        }
                    }
                }
                let mut r = reformats.iter_mut();
                for a in attrs.iter_mut().filter(|a| a.ty == 1) {
                    a.ptr = r.next().map_or(std::ptr::null_mut(), |x| (x as *mut DestReformat).cast());
                }
                let mut ptrs: Vec<P> = attrs.iter_mut().map(|a| (a as *mut DestAttr).cast()).collect();
                // SAFETY: the attributes and what they point at outlive the call.
                unsafe { (self.dr_fns(op)?.dest_array)(d, ptrs.len(), ptrs.as_mut_ptr()) }
            }
            DrActionAttr::FlowSampler { sample_ratio, default_next_table, sample_actions, action } => {
                let t = ptr(self, default_next_table.handle)?;
                let mut acts = sample_actions.iter().map(|a| ptr(self, a.handle)).collect::<Result<Vec<_>>>()?;
                let mut a = SamplerAttr {
                    sample_ratio: *sample_ratio,
                    default_next_table: t,
                    num_sample_actions: acts.len() as u32,
                    sample_actions: acts.as_mut_ptr(),
                    action: action.to_be(),
                };
                // SAFETY: the attribute and its actions outlive the call.
                unsafe { (self.dr_fns(op)?.flow_sampler)(&mut a) }
            }
            DrActionAttr::DestVport { domain, vport } => {
                let d = ptr(self, domain.handle)?;
                // SAFETY: a live domain.
                unsafe { (self.dr_fns(op)?.dest_vport)(d, *vport) }
            }
            DrActionAttr::DestIbPort { domain, port } => {
                let d = ptr(self, domain.handle)?;
                // SAFETY: a live domain.
                unsafe { (self.dr_fns(op)?.dest_ib_port)(d, *port) }
            }
        })
    }
}

impl Steering for HwBackend {
    fn dr_domain_create(&mut self, ctx: ContextHandle, domain_type: u32) -> Result<DrDomain> {
        let op = Op::DrDomainCreate;
        let c = self.ctx_ptr(ctx, op)?;
        // SAFETY: a live context.
        let p = unsafe { (self.dr_fns(op)?.domain_create)(c, domain_type) };
        Ok(DrDomain { handle: self.dr_keep(p, op)? })
    }
    fn dr_domain_sync(&mut self, domain: &DrDomain, flags: u32) -> Result<()> {
        let op = Op::DrDomainSync;
        let d = self.dr_ptr(domain.handle, op)?;
        // SAFETY: a live domain.
        Self::dr_status(unsafe { (self.dr_fns(op)?.domain_sync)(d, flags) }, op)
    }
    fn dr_domain_allow_duplicate_rules(&mut self, domain: &DrDomain, allow: bool) -> Result<()> {
        let op = Op::DrDomainAllowDuplicateRules;
        let d = self.dr_ptr(domain.handle, op)?;
        // SAFETY: a live domain.
        unsafe { (self.dr_fns(op)?.allow_duplicate_rules)(d, allow) };
        Ok(())
    }
    fn dr_domain_dump(&mut self, domain: &DrDomain) -> Result<String> {
        use std::io::{Read, Seek};
        let op = Op::DrDomainDump;
        let d = self.dr_ptr(domain.handle, op)?;
        let f = self.dr_fns(op)?.dump_domain;
        let file = tempfile_of(op)?;
        // SAFETY: a live domain; the stream is open.
        let rc = unsafe { f(file.stream, d) };
        // SAFETY: as above.
        unsafe { libc::fflush(file.stream) };
        Self::dr_status(rc, op)?;
        let mut copy = file.dup.try_clone().map_err(|e| Error::new(op, EINVAL, e.to_string()))?;
        let mut s = String::new();
        copy.rewind().and_then(|_| copy.read_to_string(&mut s)).map_err(|e| Error::new(op, EINVAL, e.to_string()))?;
        Ok(s)
    }
    fn dr_table_create(&mut self, domain: &DrDomain, level: u32) -> Result<DrTable> {
        let op = Op::DrTableCreate;
        let d = self.dr_ptr(domain.handle, op)?;
        // SAFETY: a live domain.
        let p = unsafe { (self.dr_fns(op)?.table_create)(d, level) };
        Ok(DrTable { handle: self.dr_keep(p, op)? })
    }
    fn dr_matcher_create(&mut self, table: &DrTable, priority: u16, criteria: u8, mask: &[u8]) -> Result<DrMatcher> {
        let op = Op::DrMatcherCreate;
        let t = self.dr_ptr(table.handle, op)?;
        let mut m = params(mask);
        // SAFETY: a live table; the parameters outlive the call.
        let p = unsafe { (self.dr_fns(op)?.matcher_create)(t, priority, criteria, m.as_mut_ptr().cast()) };
        Ok(DrMatcher { handle: self.dr_keep(p, op)? })
    }
    fn dr_matcher_set_layout(&mut self, matcher: &DrMatcher, flags: u32, log_num_of_rules: u32) -> Result<()> {
        let op = Op::DrMatcherSetLayout;
        let m = self.dr_ptr(matcher.handle, op)?;
        let mut layout = [flags, log_num_of_rules];
        // SAFETY: a live matcher; the layout outlives the call.
        Self::dr_status(unsafe { (self.dr_fns(op)?.matcher_set_layout)(m, &mut layout) }, op)
    }
    fn dr_action_create(&mut self, attr: &DrActionAttr) -> Result<DrAction> {
        let op = Op::DrActionCreate;
        let p = self.dr_make_action(attr)?;
        Ok(DrAction { handle: self.dr_keep(p, op)? })
    }
    fn dr_rule_create(&mut self, matcher: &DrMatcher, value: &[u8], actions: &[DrAction]) -> Result<DrRule> {
        let op = Op::DrRuleCreate;
        let m = self.dr_ptr(matcher.handle, op)?;
        let mut acts = actions.iter().map(|a| self.dr_ptr(a.handle, op)).collect::<Result<Vec<_>>>()?;
        let mut v = params(value);
        // SAFETY: a live matcher and actions; the value outlives the call.
        let p = unsafe { (self.dr_fns(op)?.rule_create)(m, v.as_mut_ptr().cast(), acts.len(), acts.as_mut_ptr()) };
        Ok(DrRule { handle: self.dr_keep(p, op)? })
    }
    fn dr_destroy(&mut self, obj: DrObject) -> Result<()> {
        let op = Op::DrDestroy;
        let h = match obj {
            DrObject::Domain(d) => d.handle,
            DrObject::Table(t) => t.handle,
            DrObject::Matcher(m) => m.handle,
            DrObject::Action(a) => a.handle,
            DrObject::Rule(r) => r.handle,
        };
        let p = self.dr_ptr(h, op)?;
        let f = self.dr_fns(op)?;
        let destroy = match obj {
            DrObject::Domain(_) => f.domain_destroy,
            DrObject::Table(_) => f.table_destroy,
            DrObject::Matcher(_) => f.matcher_destroy,
            DrObject::Action(_) => f.action_destroy,
            DrObject::Rule(_) => f.rule_destroy,
        };
        // SAFETY: a live object of the kind the destroy call takes.
        Self::dr_status(unsafe { destroy(p) }, op)?;
        self.dr.objs.remove(&h);
        Ok(())
    }
    fn create_flow_action_packet_reformat(
        &mut self,
        _ctx: ContextHandle,
        _reformat_type: u32,
        _ft_type: u32,
        _data: &[u8],
    ) -> Result<FlowAction> {
        Err(Error::new(Op::CreateFlowActionPacketReformat, EOPNOTSUPP, "flow actions are not passed to the card"))
    }
    fn destroy_flow_action(&mut self, _action: &FlowAction) -> Result<()> {
        Err(Error::new(Op::DestroyFlowAction, EOPNOTSUPP, "flow actions are not passed to the card"))
    }
}

/// A temporary file as a C stream, and a handle to read it back.
struct TempStream {
    stream: *mut libc::FILE,
    dup: std::fs::File,
}

impl Drop for TempStream {
    fn drop(&mut self) {
        // SAFETY: the stream was opened by `tempfile_of` and is closed once.
        unsafe { libc::fclose(self.stream) };
    }
}

fn tempfile_of(op: Op) -> Result<TempStream> {
    use std::os::fd::FromRawFd;
    // SAFETY: tmpfile has no preconditions.
    let stream = unsafe { libc::tmpfile() };
    if stream.is_null() {
        return Err(Error::new(op, last_errno(), "tmpfile"));
    }
    // SAFETY: the stream is open; dup gives a descriptor of our own.
    let fd = unsafe { libc::dup(libc::fileno(stream)) };
    if fd < 0 {
        // SAFETY: the stream is open.
        unsafe { libc::fclose(stream) };
        return Err(Error::new(op, last_errno(), "dup"));
    }
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    Ok(TempStream { stream, dup: unsafe { std::fs::File::from_raw_fd(fd) } })
}
