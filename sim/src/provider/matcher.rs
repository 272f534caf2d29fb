//! `mlx5dv_create_flow_matcher`, `mlx5dv_destroy_flow_matcher` and `mlx5dv_create_flow`:
//! libmlx5's checks, then mlx5_ib's and the firmware's, then a steering rule on the device
//! whose match is the matcher's `fte_match_param` mask and the rule's value.

use std::collections::BTreeMap;

use mlx5_dv::errno::{EBUSY, EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::prm::fte_match as m;
use mlx5_dv::{ContextHandle, Error, Flow, FlowMatcher, FlowMatcherAttr, MatcherAction, Op, Result, qp_type};

use super::{Lower, Provider};
use crate::device::dr::DrAct;
use crate::device::fte_match;
use crate::device::steering::FteRule;

// `sizeof(struct mlx5_ib_match_params)`: one `fte_match_param`, the most the kernel takes.
use fte_match::PARAM_SIZE as MATCH_PARAM_SIZE;
/// `MLX5DV_FLOW_MATCHER_MASK_FT_TYPE`.
const MASK_FT_TYPE: u64 = 1 << 0;
/// `MLX5DV_FLOW_MATCHER_MASK_IB_PORT`.
const MASK_IB_PORT: u64 = 1 << 1;
/// `MLX5DV_FLOW_TABLE_TYPE_RDMA_TRANSPORT_RX` and `_TX`.
const FT_RDMA_TRANSPORT: [u32; 2] = [6, 7];
/// `IBV_FLOW_ATTR_FLAGS_EGRESS`.
const FLAGS_EGRESS: u32 = 1 << 2;
/// `MLX5_IB_FLOW_LAST_PRIO`.
const LAST_PRIO: u16 = 15;

#[derive(Debug, Clone)]
struct MatcherObj {
    ctx: ContextHandle,
    dev: usize,
    criteria: u8,
    mask: Vec<u8>,
    priority: u16,
    /// A NIC TX matcher's flow table and group in the device's steering (`device::dr`):
    /// transmit rules live there, with software steering's root tables.
    egress: Option<(u32, u32)>,
}

/// A flow handle's mark for a transmit rule (its low half is the device's rule id).
const EGRESS_FLOW: u64 = 1 << 63;

/// The matchers and which matcher each of their rules came from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Matchers {
    objs: BTreeMap<u64, MatcherObj>,
    next: u64,
    /// Flow handle to matcher handle.
    flows: BTreeMap<u64, u64>,
    /// Flow handle to the reformat flow action it uses.
    uses: BTreeMap<u64, u64>,
}

impl Matchers {
    /// Whether flow `f` is still on its device.
    fn live(low: &Lower<'_>, dev: usize, f: u64) -> bool {
        low.devices.get(dev).is_some_and(|d| {
            if f & EGRESS_FLOW != 0 { d.dr.has_rule(f as u32) } else { d.flows().iter().any(|r| r.id == f as u32) }
        })
    }
}

/// uverbs' length check of a match buffer: at least a byte, and nothing but zeros past
/// `fte_match_param`.
fn check_match_len(op: Op, what: &str, b: &[u8]) -> Result<()> {
    if b.is_empty() {
        return Err(Error::new(op, EINVAL, format!("an empty match {what}")));
    }
    if b.iter().skip(MATCH_PARAM_SIZE).any(|x| *x != 0) {
        return Err(Error::new(op, EOPNOTSUPP, format!("match {what} set past fte_match_param")));
    }
    Ok(())
}

impl Provider {
    /// `mlx5dv_create_flow_matcher`.
    pub(crate) fn create_flow_matcher(
        &mut self,
        low: &mut Lower<'_>,
        ctx: ContextHandle,
        a: &FlowMatcherAttr,
    ) -> Result<FlowMatcher> {
        let op = Op::CreateFlowMatcher;
        let dev = self.contexts.get(ctx, op)?.dev;
        // libmlx5.
        if a.comp_mask & !(MASK_FT_TYPE | MASK_IB_PORT) != 0 {
            return Err(Error::new(op, EOPNOTSUPP, format!("comp_mask 0x{:x} unknown to libmlx5", a.comp_mask)));
        }
        if a.attr_type != 0 {
            return Err(Error::new(op, EOPNOTSUPP, "matchers are IBV_FLOW_ATTR_NORMAL only"));
        }
        let ft_type = if a.comp_mask & MASK_FT_TYPE != 0 { a.ft_type } else { 0 };
        let transport = FT_RDMA_TRANSPORT.contains(&ft_type);
        if transport && a.comp_mask & MASK_IB_PORT == 0 {
            return Err(Error::new(op, EINVAL, "RDMA transport tables need ib_port"));
        }
        if a.comp_mask & MASK_IB_PORT != 0 && !transport {
            return Err(Error::new(op, EOPNOTSUPP, "ib_port is for RDMA transport tables only"));
        }
        // mlx5_ib.
        check_match_len(op, "mask", &a.match_mask)?;
        if a.flags & !FLAGS_EGRESS != 0 {
            return Err(Error::new(op, EINVAL, format!("matcher flags 0x{:x} unknown to mlx5_ib", a.flags)));
        }
        let egress = ft_type == super::dr::flow_action::FT_NIC_TX || a.flags & FLAGS_EGRESS != 0;
        if ft_type > super::dr::flow_action::FT_NIC_TX {
            return Err(Error::new(op, EOPNOTSUPP, "only the NIC RX and TX tables are simulated"));
        }
        let mut mask = a.match_mask.clone();
        mask.truncate(MATCH_PARAM_SIZE);
        let egress = match (egress, low.devices.get_mut(dev)) {
            (true, Some(d)) => {
                let t = d.dr.add_table(crate::device::dr::NIC_TX, 0);
                Some((t, d.dr.add_matcher(t, a.priority, a.match_criteria_enable, mask.clone())))
            }
            _ => None,
        };
        let obj = MatcherObj { ctx, dev, criteria: a.match_criteria_enable, mask, priority: a.priority, egress };
        let m = &mut self.matchers;
        m.next += 1;
        m.objs.insert(m.next, obj);
        Ok(FlowMatcher { handle: m.next })
    }

    /// `mlx5dv_destroy_flow_matcher`: EBUSY while rules of it remain.
    pub(crate) fn destroy_flow_matcher(&mut self, low: &mut Lower<'_>, fm: &FlowMatcher) -> Result<()> {
        let op = Op::DestroyFlowMatcher;
        let Some(o) = self.matchers.objs.get(&fm.handle) else {
            return Err(Error::new(op, EINVAL, "no such matcher"));
        };
        let dev = o.dev;
        let egress = o.egress;
        self.matchers.flows.retain(|f, _| Matchers::live(low, dev, *f));
        if self.matchers.flows.values().any(|h| *h == fm.handle) {
            return Err(Error::new(op, EBUSY, "flows of the matcher remain"));
        }
        if let (Some((t, m)), Some(d)) = (egress, low.devices.get_mut(dev)) {
            d.dr.remove(m);
            d.dr.remove(t);
        }
        self.matchers.objs.remove(&fm.handle);
        Ok(())
    }

    /// `mlx5dv_create_flow`.
    pub(crate) fn create_matcher_flow(
        &mut self,
        low: &mut Lower<'_>,
        fm: &FlowMatcher,
        value: &[u8],
        actions: &[MatcherAction],
    ) -> Result<Flow> {
        let op = Op::CreateMatcherFlow;
        let Some(o) = self.matchers.objs.get(&fm.handle).cloned() else {
            return Err(Error::new(op, EINVAL, "no such matcher"));
        };
        // libmlx5's walk of the actions.
        let (mut dest, mut drop, mut tag, mut counter, mut reformat) = (None, false, None, None, None);
        for a in actions {
            match *a {
                MatcherAction::DestQp(_) | MatcherAction::Drop if dest.is_some() || drop => {
                    return Err(Error::new(op, EOPNOTSUPP, "a second destination"));
                }
                MatcherAction::DestQp(q) => dest = Some(q),
                MatcherAction::Drop => drop = true,
                MatcherAction::Tag(_) if tag.is_some() => return Err(Error::new(op, EINVAL, "a second flow tag")),
                MatcherAction::Tag(t) => tag = Some(t),
                MatcherAction::CountersDevx(_) if counter.is_some() => {
                    return Err(Error::new(op, EOPNOTSUPP, "a second counter"));
                }
                MatcherAction::CountersDevx(h) => counter = Some(h),
                MatcherAction::FlowAction(_) if reformat.is_some() => {
                    return Err(Error::new(op, EOPNOTSUPP, "a second flow action"));
                }
                MatcherAction::FlowAction(f) => reformat = Some(f),
                MatcherAction::Other(t) => {
                    return Err(Error::new(op, EOPNOTSUPP, format!("flow action type {t} is not simulated")));
                }
            }
        }
        // mlx5_ib.
        check_match_len(op, "value", value)?;
        let qpn = match dest {
            Some(q) => {
                let q = self.qps.get(q.handle, op)?;
                if q.qp_type != qp_type::RAW_PACKET || q.dev != o.dev {
                    return Err(Error::new(op, EINVAL, "a destination QP must be a raw packet QP of the device"));
                }
                q.qpn
            }
            None => 0,
        };
        if tag.is_some_and(|t| t >= 1 << 24) {
            return Err(Error::new(op, EINVAL, "a flow tag is 24 bits"));
        }
        let counter = match counter {
            Some(h) => match self.devx.flow_counter(h) {
                Some((dev, id)) if dev == o.dev => Some(id),
                _ => return Err(Error::new(op, EINVAL, "the DEVX object is not a flow counter of the device")),
            },
            None => None,
        };
        if o.priority > LAST_PRIO {
            return Err(Error::new(op, ENOMEM, format!("priority {} past MLX5_IB_FLOW_LAST_PRIO", o.priority)));
        }
        let reformat = match reformat {
            Some(f) => match self.flow_action(f.handle) {
                Some(a) if a.dev == o.dev && (a.ft_type == super::dr::flow_action::FT_NIC_TX) == o.egress.is_some() => {
                    Some((f.handle, a.act.clone()))
                }
                _ => {
                    return Err(Error::new(
                        op,
                        EINVAL,
                        "the flow action is not of the matcher's device and table type",
                    ));
                }
            },
            None => None,
        };
        // The firmware's flow group and entry.
        if !fte_match::mask_within_criteria(o.criteria, &o.mask) {
            return Err(Error::new(op, EINVAL, "the mask sets bits of sections match_criteria_enable leaves out"));
        }
        if o.criteria & !m::CRITERIA_OUTER != 0 && o.mask.iter().skip(m::SECTION_SIZE).any(|b| *b != 0) {
            return Err(Error::new(op, EOPNOTSUPP, "matching past the outer headers is not simulated"));
        }
        let mut value = value.to_vec();
        value.truncate(MATCH_PARAM_SIZE);
        if let Some((t, gm)) = o.egress {
            return self.create_egress_flow(low, fm.handle, &o, (t, gm), value, (dest, drop, tag, counter, reformat));
        }
        if reformat.is_some() {
            return Err(Error::new(op, EOPNOTSUPP, "decapsulation in a NIC RX flow is not simulated (mlx5dv_dr's is)"));
        }
        let fte =
            FteRule { criteria: o.criteria, mask: o.mask.clone(), value, drop: drop || dest.is_none(), counter, tag };
        let d = low.devices.get_mut(o.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let id = d.add_fte_flow(qpn, o.priority, fte);
        let handle = (o.dev as u64) << 32 | u64::from(id);
        self.matchers.flows.insert(handle, fm.handle);
        Ok(Flow { handle })
    }

    /// A NIC TX flow: a rule of the matcher's group in the device's transmit steering, where
    /// no QP or tag is a destination (EINVAL, unverified), and a frame it does not drop goes
    /// out after its reformat.
    fn create_egress_flow(
        &mut self,
        low: &mut Lower<'_>,
        matcher: u64,
        o: &MatcherObj,
        (_, group): (u32, u32),
        value: Vec<u8>,
        (dest, drop, tag, counter, reformat): EgressActions,
    ) -> Result<Flow> {
        let op = Op::CreateMatcherFlow;
        if dest.is_some() || tag.is_some() {
            return Err(Error::new(op, EINVAL, "a NIC TX flow has no QP destination or tag"));
        }
        let mut acts = Vec::new();
        acts.extend(counter.map(DrAct::Counter));
        acts.extend(reformat.as_ref().map(|(_, a)| a.clone()));
        if drop {
            acts.push(DrAct::Drop);
        }
        let d = low.devices.get_mut(o.dev).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        let id = d.dr.add_rule(group, value, acts);
        let handle = EGRESS_FLOW | (o.dev as u64) << 32 | u64::from(id);
        self.matchers.flows.insert(handle, matcher);
        if let Some((a, _)) = reformat {
            self.matchers.uses.insert(handle, a);
        }
        Ok(Flow { handle })
    }

    /// A closing context's matchers and their rules go (the kernel destroys its flows).
    pub(crate) fn forget_matchers_of(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) {
        let m = &mut self.matchers;
        let gone: Vec<u64> = m.objs.iter().filter(|(_, o)| o.ctx == ctx).map(|(h, _)| *h).collect();
        for h in &gone {
            let Some(o) = m.objs.remove(h) else { continue };
            let Some(d) = low.devices.get_mut(o.dev) else { continue };
            for f in m.flows.iter().filter(|(_, x)| *x == h).map(|(f, _)| *f) {
                if f & EGRESS_FLOW != 0 {
                    d.dr.remove(f as u32);
                } else {
                    d.remove_flow(f as u32);
                }
            }
            if let Some((t, g)) = o.egress {
                d.dr.remove(g);
                d.dr.remove(t);
            }
        }
        m.flows.retain(|_, x| !gone.contains(x));
        m.uses.retain(|f, _| m.flows.contains_key(f));
    }

    /// Whether a live flow uses reformat flow action `a`.
    pub(crate) fn matcher_flows_use_action(&mut self, low: &Lower<'_>, a: u64) -> bool {
        let m = &mut self.matchers;
        m.uses.retain(|f, _| Matchers::live(low, ((f >> 32) & 0x7fff_ffff) as usize, *f));
        m.uses.values().any(|x| *x == a)
    }

    /// `ibv_destroy_flow` of a NIC TX flow (`None` when `f` is not one).
    pub(crate) fn destroy_egress_flow(&mut self, low: &mut Lower<'_>, f: u64) -> Option<Result<()>> {
        if f & EGRESS_FLOW == 0 {
            return None;
        }
        let (dev, id) = (((f >> 32) & 0x7fff_ffff) as usize, f as u32);
        Some(match low.devices.get_mut(dev) {
            Some(d) if d.dr.has_rule(id) => {
                d.dr.remove(id);
                self.matchers.uses.remove(&f);
                Ok(())
            }
            _ => Err(Error::new(Op::DestroyFlow, EINVAL, "no such flow")),
        })
    }
}

/// A NIC TX flow's actions: destination QP, drop, tag, counter id, reformat action.
type EgressActions = (Option<mlx5_dv::Qp>, bool, Option<u32>, Option<u32>, Option<(u64, DrAct)>);
