//! Verbs flow steering (`ibv_create_flow`): the rules a device keeps for its raw packet QPs,
//! and which of them an Ethernet frame arriving at its port matches.
//!
//! A rule is a list of specs (Ethernet, IPv4, IPv6, TCP, UDP), each a value and a mask: a
//! frame matches a spec when every masked bit of the frame's field equals the value's. A spec
//! for a layer the frame does not have (IPv4 on an IPv6 frame, TCP on UDP) does not match.
//! The frame goes to the QPs of the matching rules of the best (lowest) priority: mlx5 keeps
//! the rules of one priority in one flow table and replicates a frame to every destination
//! whose entry matches.

pub use mlx5_dv::{EthFilter, FlowSpec, Ipv4Filter, Ipv6Filter, PortFilter};

/// A rule a device keeps: its number, the QP it steers to, its priority and specs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRule {
    /// The rule's number on its device.
    pub id: u32,
    /// The raw packet QP frames go to.
    pub qpn: u32,
    /// `ibv_flow_attr.priority` (lower first).
    pub priority: u16,
    /// Its specs (none: every frame).
    pub specs: Vec<FlowSpec>,
    /// An `mlx5dv_create_flow` rule's match, after the specs.
    pub fte: Option<FteRule>,
}

/// What an `mlx5dv_create_flow` rule matches and does besides steering to its QP.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FteRule {
    /// The matcher's `match_criteria_enable`.
    pub criteria: u8,
    /// The matcher's mask (`fte_match_param` bytes).
    pub mask: Vec<u8>,
    /// The rule's value.
    pub value: Vec<u8>,
    /// `MLX5DV_FLOW_ACTION_DROP`: matching frames go nowhere.
    pub drop: bool,
    /// `MLX5DV_FLOW_ACTION_COUNTERS_DEVX`: the flow counter matching frames count on.
    pub counter: Option<u32>,
    /// `MLX5DV_FLOW_ACTION_TAG`.
    pub tag: Option<u32>,
}

fn rule_matches(p: &Parsed, r: &FlowRule, frame: &[u8]) -> bool {
    r.specs.iter().all(|s| spec_matches(p, s))
        && r.fte.as_ref().is_none_or(|f| super::fte_match::matches(f.criteria, &f.mask, &f.value, frame))
}

/// The headers of a frame steering looks at.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub(crate) eth: EthFilter,
    pub(crate) ipv4: Option<Ipv4Filter>,
    pub(crate) ipv6: Option<Ipv6Filter>,
    /// The L4 protocol and its ports.
    pub(crate) l4: Option<(u8, PortFilter)>,
}

const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_IPV4: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
pub(crate) const IPPROTO_TCP: u8 = 6;
pub(crate) const IPPROTO_UDP: u8 = 17;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Parse an Ethernet frame's headers (a frame shorter than its Ethernet header has none).
pub(crate) fn parse(frame: &[u8]) -> Option<Parsed> {
    let mut p = Parsed::default();
    p.eth.dst_mac.copy_from_slice(frame.get(0..6)?);
    p.eth.src_mac.copy_from_slice(frame.get(6..12)?);
    let mut at = 12;
    let mut ty = be16(frame, at)?;
    if ty == ETH_P_8021Q {
        p.eth.vlan_tag = be16(frame, at + 2)?;
        at += 4;
        ty = be16(frame, at)?;
    }
    p.eth.ether_type = ty;
    at += 2;
    let l4 = match ty {
        ETH_P_IPV4 => frame.get(at..at + 20).map(|ip| {
            let ihl = usize::from(ip[0] & 0xf) * 4;
            p.ipv4 = Some(Ipv4Filter {
                src_ip: [ip[12], ip[13], ip[14], ip[15]],
                dst_ip: [ip[16], ip[17], ip[18], ip[19]],
                proto: ip[9],
                tos: ip[1],
                ttl: ip[8],
                flags: ip[6] >> 5,
            });
            (ip[9], at + ihl.max(20))
        }),
        ETH_P_IPV6 => frame.get(at..at + 40).map(|ip| {
            let mut f = Ipv6Filter {
                flow_label: u32::from_be_bytes([0, ip[1] & 0xf, ip[2], ip[3]]),
                next_hdr: ip[6],
                traffic_class: (ip[0] << 4) | (ip[1] >> 4),
                hop_limit: ip[7],
                ..Ipv6Filter::default()
            };
            f.src_ip.copy_from_slice(&ip[8..24]);
            f.dst_ip.copy_from_slice(&ip[24..40]);
            p.ipv6 = Some(f);
            (ip[6], at + 40)
        }),
        _ => None,
    };
    if let Some((proto, l4_at)) = l4
        && matches!(proto, IPPROTO_TCP | IPPROTO_UDP)
        && let (Some(src_port), Some(dst_port)) = (be16(frame, l4_at), be16(frame, l4_at + 2))
    {
        p.l4 = Some((proto, PortFilter { dst_port, src_port }));
    }
    Some(p)
}

fn eq_masked(have: &[u8], val: &[u8], mask: &[u8]) -> bool {
    have.iter().zip(val).zip(mask).all(|((h, v), m)| h & m == v & m)
}

fn eq16(have: u16, val: u16, mask: u16) -> bool {
    have & mask == val & mask
}

fn spec_matches(p: &Parsed, s: &FlowSpec) -> bool {
    match s {
        FlowSpec::Eth(v, m) => {
            eq_masked(&p.eth.dst_mac, &v.dst_mac, &m.dst_mac)
                && eq_masked(&p.eth.src_mac, &v.src_mac, &m.src_mac)
                && eq16(p.eth.ether_type, v.ether_type, m.ether_type)
                && eq16(p.eth.vlan_tag, v.vlan_tag, m.vlan_tag)
        }
        FlowSpec::Ipv4(v, m) => p.ipv4.is_some_and(|h| {
            eq_masked(&h.src_ip, &v.src_ip, &m.src_ip)
                && eq_masked(&h.dst_ip, &v.dst_ip, &m.dst_ip)
                && eq_masked(
                    &[h.proto, h.tos, h.ttl, h.flags],
                    &[v.proto, v.tos, v.ttl, v.flags],
                    &[m.proto, m.tos, m.ttl, m.flags],
                )
        }),
        FlowSpec::Ipv6(v, m) => p.ipv6.is_some_and(|h| {
            eq_masked(&h.src_ip, &v.src_ip, &m.src_ip)
                && eq_masked(&h.dst_ip, &v.dst_ip, &m.dst_ip)
                && h.flow_label & m.flow_label == v.flow_label & m.flow_label
                && eq_masked(
                    &[h.next_hdr, h.traffic_class, h.hop_limit],
                    &[v.next_hdr, v.traffic_class, v.hop_limit],
                    &[m.next_hdr, m.traffic_class, m.hop_limit],
                )
        }),
        FlowSpec::Tcp(v, m) | FlowSpec::Udp(v, m) => {
            let want = if matches!(s, FlowSpec::Tcp(..)) { IPPROTO_TCP } else { IPPROTO_UDP };
            p.l4.is_some_and(|(proto, h)| {
                proto == want && eq16(h.dst_port, v.dst_port, m.dst_port) && eq16(h.src_port, v.src_port, m.src_port)
            })
        }
    }
}

/// The QPs `frame` goes to under `rules`: those of the matching rules of the best priority,
/// each once, in the order the rules were made.
pub fn steer(rules: &[FlowRule], frame: &[u8]) -> Vec<u32> {
    steer_counting(rules, frame).0
}

/// [`steer`], and the flow counters of the matching rules of the best priority (a drop
/// rule's frame goes to no QP but still counts).
pub fn steer_counting(rules: &[FlowRule], frame: &[u8]) -> (Vec<u32>, Vec<u32>) {
    let Some(p) = parse(frame) else { return (Vec::new(), Vec::new()) };
    let hits: Vec<&FlowRule> = rules.iter().filter(|r| rule_matches(&p, r, frame)).collect();
    let Some(best) = hits.iter().map(|r| r.priority).min() else { return (Vec::new(), Vec::new()) };
    let (mut out, mut counters): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
    for r in hits.iter().filter(|r| r.priority == best) {
        counters.extend(r.fte.as_ref().and_then(|f| f.counter));
        if !out.contains(&r.qpn) && !r.fte.as_ref().is_some_and(|f| f.drop) {
            out.push(r.qpn);
        }
    }
    (out, counters)
}

/// The flow tag of the matching rule of the best priority that steers `frame` to QP `qpn`
/// (0: none).
pub fn tag_for(rules: &[FlowRule], frame: &[u8], qpn: u32) -> u32 {
    let Some(p) = parse(frame) else { return 0 };
    let hits: Vec<&FlowRule> = rules.iter().filter(|r| rule_matches(&p, r, frame)).collect();
    let Some(best) = hits.iter().map(|r| r.priority).min() else { return 0 };
    hits.iter()
        .filter(|r| r.priority == best && r.qpn == qpn)
        .find_map(|r| r.fte.as_ref().and_then(|f| f.tag))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + UDP frame from 127.0.60.1:1000 to 127.0.60.2:2000.
    fn frame() -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 4];
        f[0..6].copy_from_slice(&[0, 1, 2, 3, 4, 5]);
        f[6..12].copy_from_slice(&[6, 7, 8, 9, 10, 11]);
        f[12..14].copy_from_slice(&ETH_P_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[23] = IPPROTO_UDP;
        f[26..30].copy_from_slice(&[127, 0, 60, 1]);
        f[30..34].copy_from_slice(&[127, 0, 60, 2]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&2000u16.to_be_bytes());
        f
    }

    fn rule(id: u32, priority: u16, specs: Vec<FlowSpec>) -> FlowRule {
        FlowRule { id, qpn: 100 + id, priority, specs, fte: None }
    }

    #[test]
    fn masked_fields_decide_and_the_best_priority_wins() {
        let dst = EthFilter { dst_mac: [0, 1, 2, 3, 4, 5], ..EthFilter::default() };
        let dst_mask = EthFilter { dst_mac: [0xff; 6], ..EthFilter::default() };
        let other = EthFilter { dst_mac: [9; 6], ..EthFilter::default() };
        let udp = PortFilter { dst_port: 2000, src_port: 0 };
        let port_mask = PortFilter { dst_port: 0xffff, src_port: 0 };
        let rules = vec![
            rule(1, 1, vec![FlowSpec::Eth(dst, dst_mask)]),
            rule(2, 0, vec![FlowSpec::Eth(other, dst_mask)]),
            rule(3, 1, vec![FlowSpec::Udp(udp, port_mask)]),
            rule(4, 1, vec![FlowSpec::Tcp(udp, port_mask)]),
        ];
        assert_eq!(steer(&rules, &frame()), vec![101, 103], "priority 0's rule does not match");
        let first = vec![rule(5, 0, vec![]), rules[0].clone()];
        assert_eq!(steer(&first, &frame()), vec![105], "an empty rule takes every frame");
        let v4 = Ipv4Filter { src_ip: [127, 0, 60, 1], ..Ipv4Filter::default() };
        let v4_mask = Ipv4Filter { src_ip: [0xff; 4], ..Ipv4Filter::default() };
        let v6 = vec![rule(6, 0, vec![FlowSpec::Ipv6(Ipv6Filter::default(), Ipv6Filter::default())])];
        assert!(steer(&v6, &frame()).is_empty(), "an IPv6 spec on an IPv4 frame");
        assert_eq!(steer(&[rule(7, 3, vec![FlowSpec::Ipv4(v4, v4_mask)])], &frame()), vec![107]);
        assert!(steer(&rules, &[0u8; 10]).is_empty(), "a runt frame");
    }

    #[test]
    fn an_fte_rule_drops_and_counts() {
        let mut mask = vec![0u8; 0x40];
        mask[8..14].copy_from_slice(&[0xff; 6]);
        let mut value = vec![0u8; 0x40];
        value[8..14].copy_from_slice(&[0, 1, 2, 3, 4, 5]);
        let fte = FteRule { criteria: 1, mask, value, drop: true, counter: Some(9), tag: None };
        let drop = FlowRule { fte: Some(fte.clone()), ..rule(1, 0, vec![]) };
        assert_eq!(steer_counting(&[drop.clone(), rule(2, 1, vec![])], &frame()), (vec![], vec![9]));
        let to_qp = FlowRule { fte: Some(FteRule { drop: false, ..fte.clone() }), ..rule(3, 0, vec![]) };
        assert_eq!(steer_counting(&[to_qp], &frame()), (vec![103], vec![9]));
        let mut other = frame();
        other[0] = 9;
        assert_eq!(
            steer_counting(&[drop, rule(2, 1, vec![])], &other),
            (vec![102], vec![]),
            "no match: on to priority 1"
        );
    }
}
