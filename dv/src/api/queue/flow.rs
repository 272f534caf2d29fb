//! Verbs flow steering's types: `struct ibv_flow_attr` and the specs after it
//! (`ibv_create_flow`), each a value and a mask in host order.

use serde::{Deserialize, Serialize};

/// The fields of `struct ibv_flow_eth_filter`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EthFilter {
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// EtherType (of the frame's last tag, as mlx5 matches it).
    pub ether_type: u16,
    /// The VLAN tag's TCI (0 when the frame has none).
    pub vlan_tag: u16,
}

/// The fields of `struct ibv_flow_ipv4_ext_filter` (a plain IPv4 spec has the addresses only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ipv4Filter {
    /// Source address, in network order as bytes.
    pub src_ip: [u8; 4],
    /// Destination address.
    pub dst_ip: [u8; 4],
    /// Protocol.
    pub proto: u8,
    /// Type of service.
    pub tos: u8,
    /// Time to live.
    pub ttl: u8,
    /// The flags (top three bits of the fragment word).
    pub flags: u8,
}

/// The fields of `struct ibv_flow_ipv6_filter`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ipv6Filter {
    /// Source address.
    pub src_ip: [u8; 16],
    /// Destination address.
    pub dst_ip: [u8; 16],
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Next header.
    pub next_hdr: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit.
    pub hop_limit: u8,
}

/// The fields of `struct ibv_flow_tcp_udp_filter`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortFilter {
    /// Destination port.
    pub dst_port: u16,
    /// Source port.
    pub src_port: u16,
}

/// One spec of a rule: its value and mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FlowSpec {
    /// `IBV_FLOW_SPEC_ETH`.
    Eth(EthFilter, EthFilter),
    /// `IBV_FLOW_SPEC_IPV4` and `IBV_FLOW_SPEC_IPV4_EXT`.
    Ipv4(Ipv4Filter, Ipv4Filter),
    /// `IBV_FLOW_SPEC_IPV6`.
    Ipv6(Ipv6Filter, Ipv6Filter),
    /// `IBV_FLOW_SPEC_TCP`.
    Tcp(PortFilter, PortFilter),
    /// `IBV_FLOW_SPEC_UDP`.
    Udp(PortFilter, PortFilter),
}

/// `struct ibv_flow_attr` with its specs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowAttr {
    /// `comp_mask` (must be 0).
    pub comp_mask: u32,
    /// `type` (`IBV_FLOW_ATTR_NORMAL` 0, `ALL_DEFAULT` 1, `MC_DEFAULT` 2, `SNIFFER` 3).
    pub attr_type: u32,
    /// `priority`.
    pub priority: u16,
    /// `port`.
    pub port: u8,
    /// `flags` (`IBV_FLOW_ATTR_FLAGS_DONT_TRAP` 2, `_EGRESS` 4).
    pub flags: u32,
    /// The specs.
    pub specs: Vec<FlowSpec>,
}

impl FlowAttr {
    /// A NORMAL rule on port 1 at `priority` with `specs`.
    pub fn normal(priority: u16, specs: Vec<FlowSpec>) -> Self {
        FlowAttr { comp_mask: 0, attr_type: 0, priority, port: 1, flags: 0, specs }
    }
}

/// A rule `ibv_create_flow` made (`struct ibv_flow`'s handle, opaque).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flow {
    /// The backend's identifier of the rule.
    pub handle: u64,
}

/// `struct mlx5dv_flow_matcher_attr` with its mask (`mlx5dv_create_flow_matcher`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowMatcherAttr {
    /// `type` (`IBV_FLOW_ATTR_NORMAL` 0 is the only one libmlx5 passes on).
    pub attr_type: u32,
    /// `flags` (`IBV_FLOW_ATTR_FLAGS_EGRESS` 4 the kernel knows).
    pub flags: u32,
    /// `priority`.
    pub priority: u16,
    /// `match_criteria_enable`: which `fte_match_param` sections the mask uses.
    pub match_criteria_enable: u8,
    /// `match_mask`: the leading bytes of an `fte_match_param`.
    pub match_mask: Vec<u8>,
    /// `comp_mask` (`MLX5DV_FLOW_MATCHER_MASK_FT_TYPE` 1, `_IB_PORT` 2).
    pub comp_mask: u64,
    /// `ft_type` (`MLX5DV_FLOW_TABLE_TYPE_NIC_RX` 0 unless `comp_mask` has FT_TYPE).
    pub ft_type: u32,
    /// `ib_port`.
    pub ib_port: u32,
}

/// A matcher `mlx5dv_create_flow_matcher` made (opaque).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowMatcher {
    /// The backend's identifier of the matcher.
    pub handle: u64,
}

/// One `struct mlx5dv_flow_action_attr` of `mlx5dv_create_flow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MatcherAction {
    /// `MLX5DV_FLOW_ACTION_DEST_IBV_QP`.
    DestQp(crate::Qp),
    /// `MLX5DV_FLOW_ACTION_DROP`.
    Drop,
    /// `MLX5DV_FLOW_ACTION_TAG` with its value.
    Tag(u32),
    /// `MLX5DV_FLOW_ACTION_COUNTERS_DEVX`: the DEVX object holding the flow counter.
    CountersDevx(crate::DevxObjHandle),
    /// `MLX5DV_FLOW_ACTION_IBV_FLOW_ACTION`: a packet reformat flow action.
    FlowAction(crate::FlowAction),
    /// Another action type (by its `enum mlx5dv_flow_action_type` value).
    Other(u32),
}
