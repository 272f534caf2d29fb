//! `mlx5dv_dr_*`: libmlx5's software steering. Domains, tables, matchers, actions and rules
//! with libmlx5's checks (and, for the root table, those of `mlx5dv_create_flow_matcher` and
//! `mlx5dv_create_flow`, which libmlx5 goes through there); the device keeps the tables,
//! matchers and rules ([`crate::device::dr`]) and steers frames through them.

use std::collections::BTreeMap;

use mlx5_dv::errno::{EBUSY, EEXIST, EINVAL, ENOMEM, EOPNOTSUPP};
use mlx5_dv::prm::fte_match as m;
use mlx5_dv::{
    ContextHandle, DrAction, DrActionAttr, DrDest, DrDomain, DrMatcher, DrObject, DrRule, DrTable, Error, Op, Result,
    dr_domain_type, dr_layout_flags, dr_sync_flags,
};

use super::{Lower, Provider};
use crate::device::dr::ModifyOp;
use crate::device::fte_match;
use crate::kernel::DevxUid;

mod actions;
pub(crate) mod flow_action;

/// `DEVX_ST_SZ_BYTES(dr_match_param)`: seven 64-byte sections.
const DR_MATCH_PARAM_SIZE: usize = 7 * m::SECTION_SIZE;
/// `DR_MATCHER_CRITERIA_MAX`.
const CRITERIA_MAX: u8 = 1 << 7;
/// `MLX5_IB_FLOW_LAST_PRIO`: the root table's priorities (its rules are kernel flow rules).
const ROOT_LAST_PRIO: u16 = 15;
/// The largest `log_num_of_rules_hint` a matcher's layout takes. Unverified: libmlx5 bounds
/// it by the device's `log_sw_icm_size`, which is not public.
const MAX_LOG_RULES: u32 = 20;

#[derive(Debug, Clone)]
struct DomainObj {
    ctx: ContextHandle,
    dev: usize,
    ty: u32,
    /// Software-owned tables (levels above 0).
    sw: bool,
    allow_dup: bool,
}

#[derive(Debug, Clone)]
struct TableObj {
    domain: u64,
    level: u32,
    id: u32,
}

#[derive(Debug, Clone)]
struct MatcherObj {
    table: u64,
    id: u32,
    criteria: u8,
    mask: Vec<u8>,
    priority: u16,
}

#[derive(Debug, Clone)]
struct ActionObj {
    attr: DrActionAttr,
    /// The domain it was made in, for those made in one.
    domain: Option<u64>,
    /// A modify-header action's parsed actions.
    modify: Vec<ModifyOp>,
}

#[derive(Debug, Clone)]
struct RuleObj {
    matcher: u64,
    id: u32,
    actions: Vec<u64>,
}

/// The objects of the family the provider holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct DrObjects {
    domains: BTreeMap<u64, DomainObj>,
    tables: BTreeMap<u64, TableObj>,
    matchers: BTreeMap<u64, MatcherObj>,
    actions: BTreeMap<u64, ActionObj>,
    rules: BTreeMap<u64, RuleObj>,
    /// `mlx5dv_create_flow_action_packet_reformat`'s actions.
    flow_actions: BTreeMap<u64, flow_action::FlowActionObj>,
    next: u64,
}

fn no_such(op: Op, what: &str) -> Error {
    Error::new(op, EINVAL, format!("no such {what}"))
}

impl DrObjects {
    fn handle(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn domain(&self, h: u64, op: Op) -> Result<&DomainObj> {
        self.domains.get(&h).ok_or_else(|| no_such(op, "domain"))
    }

    fn table(&self, h: u64, op: Op) -> Result<(&TableObj, &DomainObj)> {
        let t = self.tables.get(&h).ok_or_else(|| no_such(op, "table"))?;
        Ok((t, self.domain(t.domain, op)?))
    }

    /// Whether some action refers to table `t`.
    fn table_held(&self, t: u64) -> bool {
        self.actions.values().any(|a| match &a.attr {
            DrActionAttr::DestTable(x) => x.handle == t,
            DrActionAttr::FlowSampler { default_next_table, .. } => default_next_table.handle == t,
            _ => false,
        })
    }

    /// Whether a rule or another action holds action `a`.
    fn action_held(&self, a: u64) -> bool {
        self.rules.values().any(|r| r.actions.contains(&a))
            || self.actions.values().any(|o| match &o.attr {
                DrActionAttr::DestArray { dests, .. } => dests.iter().any(|d| match d {
                    DrDest::Dest(x) => x.handle == a,
                    DrDest::DestReformat { reformat, dest } => reformat.handle == a || dest.handle == a,
                }),
                DrActionAttr::FlowSampler { sample_actions, .. } => sample_actions.iter().any(|x| x.handle == a),
                _ => false,
            })
    }
}

impl Provider {
    /// `mlx5dv_dr_domain_create`.
    pub(crate) fn dr_domain_create(&mut self, _low: &mut Lower<'_>, ctx: ContextHandle, ty: u32) -> Result<DrDomain> {
        let op = Op::DrDomainCreate;
        if ty > dr_domain_type::FDB {
            return Err(Error::new(op, EINVAL, format!("domain type {ty}")));
        }
        let c = self.ctx(ctx, op)?;
        if !c.is_kernel() {
            return Err(Error::new(op, EOPNOTSUPP, "software steering needs a kernel mlx5 context"));
        }
        // libmlx5 reads the flow table pages with QUERY_HCA_CAP through DEVX: under the
        // context's uid or the kernel's whitelist uid. Without them, without software-owned
        // tables, or for the FDB (whose eswitch manager a simulated function is not), the
        // domain takes root tables only.
        let caps_readable =
            matches!(c.kind, super::CtxKind::Kernel { devx: DevxUid::Uid(_) | DevxUid::None { whitelist: true }, .. });
        let sw = self.sw_steering && caps_readable && ty != dr_domain_type::FDB;
        let dom = DomainObj { ctx, dev: c.dev, ty, sw, allow_dup: true };
        let h = self.dr.handle();
        self.dr.domains.insert(h, dom);
        Ok(DrDomain { handle: h })
    }

    /// `mlx5dv_dr_domain_sync`.
    pub(crate) fn dr_domain_sync(&mut self, _low: &mut Lower<'_>, d: &DrDomain, flags: u32) -> Result<()> {
        let op = Op::DrDomainSync;
        let dom = self.dr.domain(d.handle, op)?;
        let known = dr_sync_flags::SW | dr_sync_flags::HW | dr_sync_flags::MEM;
        if !dom.sw || flags & !known != 0 {
            return Err(Error::new(op, EOPNOTSUPP, "no software steering on the domain, or unknown flags"));
        }
        // Every write reached the device when it was made: nothing is queued.
        Ok(())
    }

    /// `mlx5dv_dr_domain_allow_duplicate_rules`.
    pub(crate) fn dr_domain_allow_duplicate_rules(
        &mut self,
        _low: &mut Lower<'_>,
        d: &DrDomain,
        allow: bool,
    ) -> Result<()> {
        let dom =
            self.dr.domains.get_mut(&d.handle).ok_or_else(|| no_such(Op::DrDomainAllowDuplicateRules, "domain"))?;
        dom.allow_dup = allow;
        Ok(())
    }

    /// `mlx5dv_dump_dr_domain`.
    pub(crate) fn dr_domain_dump(&mut self, low: &mut Lower<'_>, d: &DrDomain) -> Result<String> {
        let op = Op::DrDomainDump;
        let dom = self.dr.domain(d.handle, op)?;
        let ids: Vec<u32> = self.dr.tables.values().filter(|t| t.domain == d.handle).map(|t| t.id).collect();
        let dev = low.devices.get(dom.dev).ok_or_else(|| no_such(op, "device"))?;
        let head = format!("domain,{:#x},type,{},sw_steering,{}\n", d.handle, dom.ty, u8::from(dom.sw));
        Ok(head + &dev.dr.dump(&ids))
    }

    /// `mlx5dv_dr_table_create`.
    pub(crate) fn dr_table_create(&mut self, low: &mut Lower<'_>, d: &DrDomain, level: u32) -> Result<DrTable> {
        let op = Op::DrTableCreate;
        let dom = self.dr.domain(d.handle, op)?.clone();
        if level > 0 && !dom.sw {
            return Err(Error::new(op, EOPNOTSUPP, "tables above the root need software steering"));
        }
        let dev = low.devices.get_mut(dom.dev).ok_or_else(|| no_such(op, "device"))?;
        let id = dev.dr.add_table(dom.ty, level);
        let h = self.dr.handle();
        self.dr.tables.insert(h, TableObj { domain: d.handle, level, id });
        Ok(DrTable { handle: h })
    }

    /// `mlx5dv_dr_matcher_create`.
    pub(crate) fn dr_matcher_create(
        &mut self,
        low: &mut Lower<'_>,
        t: &DrTable,
        priority: u16,
        criteria: u8,
        mask: &[u8],
    ) -> Result<DrMatcher> {
        let op = Op::DrMatcherCreate;
        let (tbl, dom) = self.dr.table(t.handle, op)?;
        let (tbl, dom) = (tbl.clone(), dom.clone());
        if tbl.level == 0 {
            // mlx5dv_create_flow_matcher on the domain's flow table type.
            if mask.is_empty() {
                return Err(Error::new(op, EINVAL, "an empty match mask"));
            }
            if mask.iter().skip(fte_match::PARAM_SIZE).any(|b| *b != 0) {
                return Err(Error::new(op, EOPNOTSUPP, "match mask set past fte_match_param"));
            }
            if dom.ty == dr_domain_type::FDB {
                return Err(Error::new(op, EOPNOTSUPP, "the FDB needs the eswitch in switchdev mode"));
            }
        } else {
            if criteria >= CRITERIA_MAX {
                return Err(Error::new(op, EINVAL, format!("match criteria {criteria:#x}")));
            }
            if mask.len() > DR_MATCH_PARAM_SIZE {
                return Err(Error::new(op, EINVAL, format!("a {}-byte mask", mask.len())));
            }
            if criteria != 0 && mask.iter().all(|b| *b == 0) {
                return Err(Error::new(op, EINVAL, "no rule can be built from an empty mask"));
            }
        }
        if !fte_match::mask_within_criteria(criteria, mask) {
            return Err(Error::new(op, EOPNOTSUPP, "the mask sets bits of sections match_criteria_enable leaves out"));
        }
        if mask.iter().skip(m::SECTION_SIZE).any(|b| *b != 0) {
            return Err(Error::new(op, EOPNOTSUPP, "matching past the outer headers is not simulated"));
        }
        let mut mask = mask.to_vec();
        mask.truncate(m::SECTION_SIZE);
        let dev = low.devices.get_mut(dom.dev).ok_or_else(|| no_such(op, "device"))?;
        let id = dev.dr.add_matcher(tbl.id, priority, criteria, mask.clone());
        let h = self.dr.handle();
        self.dr.matchers.insert(h, MatcherObj { table: t.handle, id, criteria, mask, priority });
        Ok(DrMatcher { handle: h })
    }

    /// `mlx5dv_dr_matcher_set_layout`.
    pub(crate) fn dr_matcher_set_layout(
        &mut self,
        _low: &mut Lower<'_>,
        mt: &DrMatcher,
        flags: u32,
        log_rules: u32,
    ) -> Result<()> {
        let op = Op::DrMatcherSetLayout;
        let mo = self.dr.matchers.get(&mt.handle).ok_or_else(|| no_such(op, "matcher"))?;
        let (tbl, _) = self.dr.table(mo.table, op)?;
        if tbl.level == 0 {
            return Err(Error::new(op, EOPNOTSUPP, "a root table's matcher has no layout"));
        }
        if flags & !(dr_layout_flags::RESIZABLE | dr_layout_flags::NUM_RULE) != 0 {
            return Err(Error::new(op, EOPNOTSUPP, format!("layout flags {flags:#x}")));
        }
        if flags & dr_layout_flags::NUM_RULE != 0 && log_rules > MAX_LOG_RULES {
            return Err(Error::new(op, EOPNOTSUPP, format!("2^{log_rules} rules")));
        }
        // A layout needs a matcher of one match definer: IPv6 addresses take two.
        let ip = |at: usize| mo.mask.get(at..at + 12).is_some_and(|b| b.iter().any(|x| *x != 0));
        if ip(m::SRC_IP_BYTE) || ip(m::DST_IP_BYTE) {
            return Err(Error::new(op, EOPNOTSUPP, "a matcher on IPv6 addresses takes no layout"));
        }
        Ok(())
    }

    /// `mlx5dv_dr_rule_create`.
    pub(crate) fn dr_rule_create(
        &mut self,
        low: &mut Lower<'_>,
        mt: &DrMatcher,
        value: &[u8],
        actions: &[DrAction],
    ) -> Result<DrRule> {
        let op = Op::DrRuleCreate;
        let mo = self.dr.matchers.get(&mt.handle).ok_or_else(|| no_such(op, "matcher"))?.clone();
        let (tbl, dom) = self.dr.table(mo.table, op)?;
        let (tbl, dom) = (tbl.clone(), dom.clone());
        let root = tbl.level == 0;
        if root {
            if value.is_empty() || value.iter().skip(fte_match::PARAM_SIZE).any(|b| *b != 0) {
                return Err(Error::new(op, EINVAL, "the root table's rule value is empty or set past fte_match_param"));
            }
            if mo.priority > ROOT_LAST_PRIO {
                return Err(Error::new(op, ENOMEM, format!("priority {} past MLX5_IB_FLOW_LAST_PRIO", mo.priority)));
            }
        } else if !value.is_empty() {
            if value.len() > DR_MATCH_PARAM_SIZE || !value.len().is_multiple_of(4) {
                return Err(Error::new(op, EINVAL, format!("a {}-byte rule value", value.len())));
            }
            let outside = value
                .iter()
                .take(m::SECTION_SIZE)
                .enumerate()
                .any(|(i, v)| v & !mo.mask.get(i).copied().unwrap_or(0) != 0);
            if mo.criteria & m::CRITERIA_OUTER != 0 && outside {
                return Err(Error::new(op, EINVAL, "the value sets bits the matcher's mask leaves out"));
            }
        }
        let acts = self.dr_resolve_rule_actions(low, &dom, tbl.domain, root, actions)?;
        let mut value = value.to_vec();
        value.truncate(m::SECTION_SIZE);
        let dev = low.devices.get_mut(dom.dev).ok_or_else(|| no_such(op, "device"))?;
        if !root && !dom.allow_dup && dev.dr.has_duplicate(mo.id, &value) {
            return Err(Error::new(op, EEXIST, "a rule of the same value (the domain forbids duplicates)"));
        }
        let id = dev.dr.add_rule(mo.id, value, acts);
        let h = self.dr.handle();
        self.dr
            .rules
            .insert(h, RuleObj { matcher: mt.handle, id, actions: actions.iter().map(|a| a.handle).collect() });
        Ok(DrRule { handle: h })
    }

    /// `mlx5dv_dr_*_destroy`: EBUSY while something holds the object.
    pub(crate) fn dr_destroy(&mut self, low: &mut Lower<'_>, obj: DrObject) -> Result<()> {
        let op = Op::DrDestroy;
        let busy = |what: &str| Err(Error::new(op, EBUSY, format!("{what} still hold it")));
        let dr = &mut self.dr;
        let (dev, id) = match obj {
            DrObject::Domain(d) => {
                dr.domain(d.handle, op)?;
                if dr.tables.values().any(|t| t.domain == d.handle)
                    || dr.actions.values().any(|a| a.domain == Some(d.handle))
                {
                    return busy("tables or actions");
                }
                dr.domains.remove(&d.handle);
                return Ok(());
            }
            DrObject::Table(t) => {
                let (tbl, dom) = dr.table(t.handle, op)?;
                let (dev, id) = (dom.dev, tbl.id);
                if dr.matchers.values().any(|m| m.table == t.handle) || dr.table_held(t.handle) {
                    return busy("matchers or actions");
                }
                dr.tables.remove(&t.handle);
                (dev, id)
            }
            DrObject::Matcher(mt) => {
                let mo = dr.matchers.get(&mt.handle).ok_or_else(|| no_such(op, "matcher"))?;
                let (_, dom) = dr.table(mo.table, op)?;
                let (dev, id) = (dom.dev, mo.id);
                if dr.rules.values().any(|r| r.matcher == mt.handle) {
                    return busy("rules");
                }
                dr.matchers.remove(&mt.handle);
                (dev, id)
            }
            DrObject::Action(a) => {
                if !dr.actions.contains_key(&a.handle) {
                    return Err(no_such(op, "action"));
                }
                if dr.action_held(a.handle) {
                    return busy("rules or other actions");
                }
                dr.actions.remove(&a.handle);
                for d in low.devices.iter_mut() {
                    d.dr.forget_sampler(a.handle);
                }
                return Ok(());
            }
            DrObject::Rule(r) => {
                let ro = dr.rules.remove(&r.handle).ok_or_else(|| no_such(op, "rule"))?;
                let dev = dr
                    .matchers
                    .get(&ro.matcher)
                    .and_then(|m| dr.tables.get(&m.table))
                    .and_then(|t| dr.domains.get(&t.domain))
                    .map_or(usize::MAX, |d| d.dev);
                (dev, ro.id)
            }
        };
        if let Some(d) = low.devices.get_mut(dev) {
            d.dr.remove(id);
        }
        Ok(())
    }

    /// What a closed context's domains held goes (as the kernel frees its flow tables and
    /// steering memory).
    pub(crate) fn dr_forget_context(&mut self, low: &mut Lower<'_>, ctx: ContextHandle) {
        let dr = &mut self.dr;
        let doms: Vec<u64> = dr.domains.iter().filter(|(_, d)| d.ctx == ctx).map(|(h, _)| *h).collect();
        let tables: Vec<u64> = dr.tables.iter().filter(|(_, t)| doms.contains(&t.domain)).map(|(h, _)| *h).collect();
        let matchers: Vec<u64> =
            dr.matchers.iter().filter(|(_, m)| tables.contains(&m.table)).map(|(h, _)| *h).collect();
        let mut gone = Vec::new();
        dr.rules.retain(|_, r| {
            !matchers.contains(&r.matcher) || {
                gone.push(r.id);
                false
            }
        });
        for h in &matchers {
            gone.extend(dr.matchers.remove(h).map(|m| m.id));
        }
        for h in &tables {
            gone.extend(dr.tables.remove(h).map(|t| t.id));
        }
        dr.actions.retain(|_, a| a.domain.is_none_or(|d| !doms.contains(&d)));
        dr.flow_actions.retain(|_, a| a.ctx != ctx);
        for h in &doms {
            if let Some(d) = dr.domains.remove(h)
                && let Some(dev) = low.devices.get_mut(d.dev)
            {
                for id in &gone {
                    dev.dr.remove(*id);
                }
            }
        }
    }
}
