//! [`Steering`] on hardware: libmlx5's `mlx5dv_dr_*` (`dr_lib.rs`). Packet reformat flow
//! actions are not forwarded (EOPNOTSUPP, like `mlx5dv_create_flow_matcher` on this backend).

use std::ffi::{c_int, c_void};

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{
    ContextHandle, DrAction, DrActionAttr, DrDest, DrDomain, DrMatcher, DrObject, DrRule, DrTable, Error, FlowAction,
    Op, Result, Steering,
};

use crate::backend::HwBackend;
use crate::call::last_errno;
use crate::dr_lib::{DestAttr, DestReformat, DrFns, P, SamplerAttr, params};

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
