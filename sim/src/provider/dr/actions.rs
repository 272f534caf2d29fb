//! `mlx5dv_dr_action_create_*` and what a rule does with its actions: libmlx5's checks at
//! creation, its order of actions per direction (`next_action_state`), and the actions
//! resolved to the device's numbers.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::{
    DR_ACTION_FLAGS_ROOT_LEVEL, DrAction, DrActionAttr, DrDest, Error, Op, Result, dr_domain_type, qp_type,
    reformat_type,
};

use super::{ActionObj, DomainObj, no_such};
use crate::device::dr::{DrAct, parse_modify};
use crate::provider::{Lower, Provider};

/// VLAN TPIDs a pushed header may carry.
const TPIDS: [u16; 2] = [0x8100, 0x88a8];
/// VLAN headers one rule pushes or pops at most (`MAX_VLANS`).
const MAX_VLANS: usize = 2;
/// The longest encapsulation header (`max_encap_header_size`). Unverified: what a card
/// reports is not public; 128 bytes hold Ethernet, IPv6, UDP and a VXLAN or GENEVE header.
pub(crate) const MAX_ENCAP: usize = 128;

/// An action's type, as libmlx5's order of actions sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Drop,
    Qp,
    Table,
    Counter,
    Tag,
    Modify,
    PushVlan,
    PopVlan,
    Decap,
    Encap,
    Sampler,
    Array,
    Miss,
    Port,
}

/// Where a rule's action list is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    NoAction,
    NonTerm,
    Decap,
    Encap,
    Modify,
    PushVlan,
    PopVlan,
    Term,
}

fn kind(a: &DrActionAttr) -> Kind {
    match a {
        DrActionAttr::Drop => Kind::Drop,
        DrActionAttr::DefaultMiss => Kind::Miss,
        DrActionAttr::DestQp(_) | DrActionAttr::DestTir(_) => Kind::Qp,
        DrActionAttr::DestTable(_) => Kind::Table,
        DrActionAttr::FlowCounter { .. } => Kind::Counter,
        DrActionAttr::Tag(_) => Kind::Tag,
        DrActionAttr::ModifyHeader { .. } => Kind::Modify,
        DrActionAttr::PushVlan { .. } => Kind::PushVlan,
        DrActionAttr::PopVlan => Kind::PopVlan,
        // The decapsulations are the even reformat types.
        DrActionAttr::PacketReformat { reformat_type, .. } if *reformat_type % 2 == 0 => Kind::Decap,
        DrActionAttr::PacketReformat { .. } => Kind::Encap,
        DrActionAttr::DestArray { .. } => Kind::Array,
        DrActionAttr::FlowSampler { .. } => Kind::Sampler,
        DrActionAttr::DestVport { .. } | DrActionAttr::DestIbPort { .. } => Kind::Port,
    }
}

/// libmlx5's `next_action_state` for the NIC's receive (`rx`) or transmit tables: the state
/// after `k`, or `None` where the order is refused.
fn next(rx: bool, s: State, k: Kind) -> Option<State> {
    use Kind as K;
    use State as S;
    let terminal = |k: Kind| if rx { matches!(k, K::Qp | K::Table | K::Sampler | K::Array) } else { k == K::Table };
    Some(match (s, k) {
        (S::Term, K::Counter) => S::Term,
        (S::Term, _) => return None,
        (S::NoAction | S::NonTerm, K::Drop | K::Miss) => S::Term,
        (_, k) if terminal(k) => S::Term,
        (S::NoAction | S::NonTerm, K::Counter) => S::NonTerm,
        (S::NoAction | S::NonTerm, K::Tag) if rx => S::NonTerm,
        (S::NoAction | S::NonTerm, K::Decap) if rx => S::Decap,
        (S::NoAction | S::NonTerm | S::PopVlan, K::Modify) => S::Modify,
        (S::Decap, K::Modify) if rx => S::Modify,
        (S::NoAction | S::NonTerm | S::PopVlan, K::PopVlan) => S::PopVlan,
        (S::Decap, K::PopVlan) if rx => S::PopVlan,
        (S::NoAction | S::NonTerm | S::Modify | S::PopVlan | S::PushVlan, K::PushVlan) => S::PushVlan,
        (S::Decap, K::PushVlan) if rx => S::PushVlan,
        (S::NoAction | S::NonTerm | S::Modify | S::PopVlan | S::PushVlan, K::Encap) => S::Encap,
        (S::Decap, K::Encap) if rx => S::Encap,
        (s @ (S::Decap | S::Modify | S::PopVlan | S::PushVlan | S::Encap), K::Tag) if rx => s,
        (s @ (S::Decap | S::Modify | S::PopVlan | S::PushVlan | S::Encap), K::Counter) => s,
        _ => return None,
    })
}

impl Provider {
    /// `mlx5dv_dr_action_create_*`.
    pub(crate) fn dr_action_create(&mut self, _low: &mut Lower<'_>, attr: &DrActionAttr) -> Result<DrAction> {
        let op = Op::DrActionCreate;
        let inval = |why: &str| Err(Error::new(op, EINVAL, why.to_string()));
        let unsupported = |why: &str| Err(Error::new(op, EOPNOTSUPP, why.to_string()));
        let mut modify = Vec::new();
        let domain = match attr {
            DrActionAttr::Drop | DrActionAttr::DefaultMiss | DrActionAttr::PopVlan | DrActionAttr::Tag(_) => None,
            DrActionAttr::DestQp(q) => {
                if self.qps.get(q.handle, op)?.qp_type != qp_type::RAW_PACKET {
                    return inval("a QP destination must be a raw packet QP");
                }
                None
            }
            DrActionAttr::DestTir(h) => {
                if self.devx.tir(*h).is_none() {
                    return inval("the DEVX object is not a TIR");
                }
                None
            }
            DrActionAttr::DestTable(t) => {
                let (tbl, _) = self.dr.table(t.handle, op)?;
                if tbl.level == 0 {
                    return inval("a root table is no destination");
                }
                None
            }
            DrActionAttr::FlowCounter { counter, .. } => {
                if self.devx.flow_counter(*counter).is_none() {
                    return inval("the DEVX object is not a flow counter");
                }
                None
            }
            DrActionAttr::ModifyHeader { domain, flags, actions } => {
                let dom = self.dr.domain(domain.handle, op)?;
                if flags & !DR_ACTION_FLAGS_ROOT_LEVEL != 0 {
                    return inval("flags other than MLX5DV_DR_ACTION_FLAGS_ROOT_LEVEL");
                }
                if !dom.sw && flags & DR_ACTION_FLAGS_ROOT_LEVEL == 0 {
                    return unsupported("only root-level actions on a domain without software steering");
                }
                modify = parse_modify(actions).map_err(|(e, why)| Error::new(op, e, why))?;
                Some(domain.handle)
            }
            DrActionAttr::PushVlan { domain, vlan_hdr } => {
                self.dr.domain(domain.handle, op)?;
                if !TPIDS.contains(&((vlan_hdr >> 16) as u16)) {
                    return inval("the VLAN header's TPID is neither 0x8100 nor 0x88a8");
                }
                Some(domain.handle)
            }
            DrActionAttr::PacketReformat { domain, flags, reformat_type: t, data } => {
                let dom = self.dr.domain(domain.handle, op)?;
                if flags & !DR_ACTION_FLAGS_ROOT_LEVEL != 0 {
                    return inval("flags other than MLX5DV_DR_ACTION_FLAGS_ROOT_LEVEL");
                }
                if !dom.sw && flags & DR_ACTION_FLAGS_ROOT_LEVEL == 0 {
                    return unsupported("only root-level actions on a domain without software steering");
                }
                // dr_action_verify_reformat_params.
                if *t > reformat_type::L2_TO_L3_TUNNEL || data.len() > MAX_ENCAP {
                    return inval("an unknown reformat type, or headers past the device's encapsulation size");
                }
                let decap = matches!(*t, reformat_type::L2_TUNNEL_TO_L2 | reformat_type::L3_TUNNEL_TO_L2);
                if dom.ty == dr_domain_type::NIC_RX && !decap || dom.ty == dr_domain_type::NIC_TX && decap {
                    return inval("NIC RX decapsulates and NIC TX encapsulates");
                }
                if !self.packet_reformat {
                    return unsupported("the device has no packet reformat");
                }
                if matches!(*t, reformat_type::L3_TUNNEL_TO_L2 | reformat_type::L2_TO_L3_TUNNEL) {
                    return unsupported("L3 tunnels are not simulated");
                }
                if !decap && data.is_empty() {
                    return inval("an encapsulation without headers");
                }
                Some(domain.handle)
            }
            DrActionAttr::DestArray { domain, dests } => {
                self.dr.domain(domain.handle, op)?;
                if dests.len() <= 1 {
                    return inval("a destination array of fewer than two destinations");
                }
                for d in dests {
                    let (reformat, dest) = match d {
                        DrDest::Dest(a) => (None, a),
                        DrDest::DestReformat { reformat, dest } => (Some(reformat), dest),
                    };
                    let dk = self.dr.actions.get(&dest.handle).map(|o| kind(&o.attr));
                    if !matches!(dk, Some(Kind::Qp | Kind::Table | Kind::Port)) {
                        return inval("a destination array's destination is not a QP, TIR, table or port");
                    }
                    if let Some(r) = reformat
                        && !matches!(
                            self.dr.actions.get(&r.handle).map(|o| kind(&o.attr)),
                            Some(Kind::Encap | Kind::Decap)
                        )
                    {
                        return inval("a destination's reformat is no packet reformat action");
                    }
                }
                Some(domain.handle)
            }
            DrActionAttr::FlowSampler { sample_ratio, default_next_table, sample_actions, .. } => {
                let (_, dom) = self.dr.table(default_next_table.handle, op)?;
                if *sample_ratio == 0 || sample_actions.is_empty() {
                    return inval("a sampler without a ratio or sample actions");
                }
                if dom.ty == dr_domain_type::NIC_TX {
                    return unsupported("samplers are for NIC RX and FDB domains");
                }
                if sample_actions.iter().any(|a| !self.dr.actions.contains_key(&a.handle)) {
                    return Err(no_such(op, "sample action"));
                }
                None
            }
            DrActionAttr::DestVport { domain, .. } | DrActionAttr::DestIbPort { domain, .. } => {
                self.dr.domain(domain.handle, op)?;
                return unsupported(
                    "vport and IB port destinations need an FDB domain with software steering (switchdev)",
                );
            }
        };
        let h = self.dr.handle();
        self.dr.actions.insert(h, ActionObj { attr: attr.clone(), domain, modify });
        Ok(DrAction { handle: h })
    }

    /// A rule's actions checked in libmlx5's order for the domain and resolved.
    pub(super) fn dr_resolve_rule_actions(
        &self,
        low: &Lower<'_>,
        dom: &DomainObj,
        dom_handle: u64,
        root: bool,
        actions: &[DrAction],
    ) -> Result<Vec<DrAct>> {
        let op = Op::DrRuleCreate;
        let rx = dom.ty != dr_domain_type::NIC_TX;
        let mut state = State::NoAction;
        let mut seen: Vec<Kind> = Vec::new();
        let mut out = Vec::new();
        for a in actions {
            let o = self.dr.actions.get(&a.handle).ok_or_else(|| no_such(op, "action"))?;
            let k = kind(&o.attr);
            if root && matches!(k, Kind::PushVlan | Kind::PopVlan | Kind::Sampler | Kind::Port) {
                return Err(Error::new(op, EOPNOTSUPP, format!("a {k:?} action on the root table")));
            }
            let root_level = match &o.attr {
                DrActionAttr::ModifyHeader { flags, .. } | DrActionAttr::PacketReformat { flags, .. } => {
                    Some(flags & DR_ACTION_FLAGS_ROOT_LEVEL != 0)
                }
                _ => None,
            };
            if root_level.is_some_and(|r| r != root) {
                return Err(Error::new(op, EINVAL, "a root-level action outside the root table, or the other way"));
            }
            if o.domain.is_some_and(|d| d != dom_handle) {
                return Err(Error::new(op, EINVAL, "the action belongs to another domain"));
            }
            let most = if matches!(k, Kind::PushVlan | Kind::PopVlan) { MAX_VLANS } else { 1 };
            if seen.iter().filter(|s| **s == k).count() >= most {
                return Err(Error::new(op, EINVAL, format!("{k:?} more than {most} time(s)")));
            }
            seen.push(k);
            state = next(rx, state, k)
                .ok_or_else(|| Error::new(op, EOPNOTSUPP, format!("a {k:?} action there, in this domain")))?;
            out.push(self.dr_resolve(low, dom, dom_handle, a)?);
        }
        Ok(out)
    }

    /// One action as the device applies it.
    fn dr_resolve(&self, low: &Lower<'_>, dom: &DomainObj, dom_handle: u64, a: &DrAction) -> Result<DrAct> {
        let op = Op::DrRuleCreate;
        let o = self.dr.actions.get(&a.handle).ok_or_else(|| no_such(op, "action"))?;
        let other_dev = || Error::new(op, EINVAL, "the destination is on another device");
        let table = |h: u64| -> Result<u32> {
            let (t, _) = self.dr.table(h, op)?;
            if t.domain != dom_handle {
                return Err(Error::new(op, EINVAL, "the destination table belongs to another domain"));
            }
            Ok(t.id)
        };
        Ok(match &o.attr {
            DrActionAttr::Drop => DrAct::Drop,
            DrActionAttr::DefaultMiss => DrAct::DefaultMiss,
            DrActionAttr::DestQp(q) => {
                let q = self.qps.get(q.handle, op)?;
                if q.dev != dom.dev {
                    return Err(other_dev());
                }
                DrAct::Qp(q.qpn)
            }
            DrActionAttr::DestTir(h) => match self.devx.tir(*h) {
                Some((dev, tirn))
                    if dev == dom.dev && low.devices.get(dev).is_some_and(|d| d.tir_rq(tirn).is_some()) =>
                {
                    DrAct::Tir(tirn)
                }
                _ => return Err(other_dev()),
            },
            DrActionAttr::DestTable(t) => DrAct::Table(table(t.handle)?),
            DrActionAttr::FlowCounter { counter, offset } => match self.devx.flow_counter(*counter) {
                Some((dev, id)) if dev == dom.dev => DrAct::Counter(id.wrapping_add(*offset)),
                _ => return Err(other_dev()),
            },
            DrActionAttr::Tag(t) => DrAct::Tag(t & 0xff_ffff),
            DrActionAttr::ModifyHeader { .. } => DrAct::Modify(o.modify.clone()),
            DrActionAttr::PushVlan { vlan_hdr, .. } => DrAct::PushVlan(*vlan_hdr),
            DrActionAttr::PopVlan => DrAct::PopVlan,
            DrActionAttr::DestArray { dests, .. } => {
                let mut lists = Vec::new();
                for d in dests {
                    lists.push(match d {
                        DrDest::Dest(x) => vec![self.dr_resolve(low, dom, dom_handle, x)?],
                        DrDest::DestReformat { reformat, dest } => vec![
                            self.dr_resolve(low, dom, dom_handle, reformat)?,
                            self.dr_resolve(low, dom, dom_handle, dest)?,
                        ],
                    });
                }
                DrAct::Array(lists)
            }
            DrActionAttr::FlowSampler { sample_ratio, default_next_table, sample_actions, .. } => {
                let sample = sample_actions
                    .iter()
                    .map(|x| self.dr_resolve(low, dom, dom_handle, x))
                    .collect::<Result<Vec<_>>>()?;
                DrAct::Sampler { key: a.handle, ratio: *sample_ratio, next: table(default_next_table.handle)?, sample }
            }
            DrActionAttr::PacketReformat { reformat_type: reformat_type::L2_TUNNEL_TO_L2, .. } => DrAct::Decap,
            DrActionAttr::PacketReformat { reformat_type: reformat_type::L2_TO_L2_TUNNEL, data, .. } => {
                DrAct::Encap(data.clone())
            }
            DrActionAttr::PacketReformat { .. } | DrActionAttr::DestVport { .. } | DrActionAttr::DestIbPort { .. } => {
                return Err(Error::new(op, EOPNOTSUPP, "the action is not simulated"));
            }
        })
    }
}
