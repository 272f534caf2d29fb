//! Flow counters: ALLOC_FLOW_COUNTER, DEALLOC_FLOW_COUNTER and QUERY_FLOW_COUNTER, and the
//! general-page capabilities that size them (positions from the kernel's `mlx5_ifc.h`).

/// `alloc_flow_counter_in` / `_out`, `dealloc_flow_counter_in`, `query_flow_counter_in` /
/// `_out` and `traffic_counter`.
pub mod flow_counter {
    use crate::prm::Field;

    /// ALLOC_FLOW_COUNTER.
    pub const ALLOC: u16 = 0x939;
    /// DEALLOC_FLOW_COUNTER.
    pub const DEALLOC: u16 = 0x93a;
    /// QUERY_FLOW_COUNTER.
    pub const QUERY: u16 = 0x93b;
    /// Input bytes of ALLOC and DEALLOC, and output bytes of ALLOC.
    pub const ALLOC_SIZE: usize = 0x10;
    /// Input bytes of QUERY.
    pub const QUERY_IN_SIZE: usize = 0x20;
    /// Where QUERY's output puts the first `traffic_counter`.
    pub const STATS_BYTE: usize = 0x10;
    /// Bytes of one `traffic_counter` (packets, then octets, 64 bits each).
    pub const STATS_SIZE: usize = 0x10;
    /// ALLOC, DEALLOC and QUERY: the (first) counter's id; ALLOC's output holds it too.
    pub const ID: Field = Field::new("flow_counter_id", 0x40, 32);
    /// ALLOC: log2 of the counters of a bulk (0: none, or the `flow_counter_bulk` form).
    pub const BULK_LOG_SIZE: Field = Field::new("flow_counter_bulk_log_size", 0x73, 5);
    /// ALLOC: a bulk in units of 128 counters, as a one-bit mask (`mlx5_fc_bulk_alloc_bitmask`).
    pub const BULK: Field = Field::new("flow_counter_bulk", 0x78, 8);
    /// QUERY: the memory key of a dump to memory.
    pub const QUERY_MKEY: Field = Field::new("mkey", 0x60, 32);
    /// QUERY: the address of a dump to memory.
    pub const QUERY_ADDRESS: Field = Field::new("address", 0x80, 64);
    /// QUERY: zero the counters after reading them.
    pub const QUERY_CLEAR: Field = Field::new("clear", 0xc0, 1);
    /// QUERY: write the counters to memory rather than into the output.
    pub const QUERY_DUMP_TO_MEMORY: Field = Field::new("dump_to_memory", 0xc1, 1);
    /// QUERY: how many counters from the id (0 reads one).
    pub const QUERY_NUM: Field = Field::new("num_of_counters", 0xc2, 30);
    /// QUERY: the first counter read.
    pub const QUERY_ID: Field = Field::new("flow_counter_id", 0xe0, 32);
    /// `traffic_counter.packets`, from a counter's start.
    pub const PACKETS: Field = Field::new("packets", 0x0, 64);
    /// `traffic_counter.octets`, from a counter's start.
    pub const OCTETS: Field = Field::new("octets", 0x40, 64);
    /// `cmd_hca_cap.max_flow_counter_31_16`.
    pub const CAP_MAX_31_16: Field = Field::new("max_flow_counter_31_16", 0x2c0, 16);
    /// `cmd_hca_cap.flow_counter_bulk_alloc`: the `flow_counter_bulk` masks taken.
    pub const CAP_BULK_ALLOC: Field = Field::new("flow_counter_bulk_alloc", 0x310, 8);
    /// `cmd_hca_cap.log_max_flow_counter_bulk`: the largest `flow_counter_bulk_log_size`.
    pub const CAP_LOG_MAX_BULK: Field = Field::new("log_max_flow_counter_bulk", 0x348, 8);
    /// `cmd_hca_cap.max_flow_counter_15_0`.
    pub const CAP_MAX_15_0: Field = Field::new("max_flow_counter_15_0", 0x350, 16);
}

/// `fte_match_param`: a flow's match mask or value, and its outer headers
/// (`fte_match_set_lyr_2_4`, the first 64 bytes; positions from the kernel's `mlx5_ifc.h`).
pub mod fte_match {
    use crate::prm::Field;

    /// Bytes of one section (outer headers, misc parameters, inner headers, ...).
    pub const SECTION_SIZE: usize = 0x40;
    /// Sections of `fte_match_param` (outer, misc, inner, misc 2 to 5), in
    /// `match_criteria_enable` bit order.
    pub const SECTIONS: usize = 7;
    /// `match_criteria_enable` bit of the outer headers.
    pub const CRITERIA_OUTER: u8 = 1 << 0;
    /// Source MAC, its first 4 bytes.
    pub const SMAC_47_16: Field = Field::new("smac_47_16", 0x0, 32);
    /// Source MAC, its last 2 bytes.
    pub const SMAC_15_0: Field = Field::new("smac_15_0", 0x20, 16);
    /// The EtherType after any VLAN tag.
    pub const ETHERTYPE: Field = Field::new("ethertype", 0x30, 16);
    /// Destination MAC, its first 4 bytes.
    pub const DMAC_47_16: Field = Field::new("dmac_47_16", 0x40, 32);
    /// Destination MAC, its last 2 bytes.
    pub const DMAC_15_0: Field = Field::new("dmac_15_0", 0x60, 16);
    /// The first VLAN tag's priority.
    pub const FIRST_PRIO: Field = Field::new("first_prio", 0x70, 3);
    /// The first VLAN tag's CFI bit.
    pub const FIRST_CFI: Field = Field::new("first_cfi", 0x73, 1);
    /// The first VLAN tag's id.
    pub const FIRST_VID: Field = Field::new("first_vid", 0x74, 12);
    /// IP protocol (IPv4) or next header (IPv6).
    pub const IP_PROTOCOL: Field = Field::new("ip_protocol", 0x80, 8);
    /// DSCP.
    pub const IP_DSCP: Field = Field::new("ip_dscp", 0x88, 6);
    /// ECN.
    pub const IP_ECN: Field = Field::new("ip_ecn", 0x8e, 2);
    /// The frame has a customer VLAN (0x8100) tag.
    pub const CVLAN_TAG: Field = Field::new("cvlan_tag", 0x90, 1);
    /// The IPv4 packet is a fragment.
    pub const FRAG: Field = Field::new("frag", 0x92, 1);
    /// 4 or 6.
    pub const IP_VERSION: Field = Field::new("ip_version", 0x93, 4);
    /// TCP flags (NS and the eight of byte 13).
    pub const TCP_FLAGS: Field = Field::new("tcp_flags", 0x97, 9);
    /// TCP source port.
    pub const TCP_SPORT: Field = Field::new("tcp_sport", 0xa0, 16);
    /// TCP destination port.
    pub const TCP_DPORT: Field = Field::new("tcp_dport", 0xb0, 16);
    /// IPv4 header length in words.
    pub const IPV4_IHL: Field = Field::new("ipv4_ihl", 0xd0, 4);
    /// TTL or hop limit.
    pub const IP_TTL_HOPLIMIT: Field = Field::new("ip_ttl_hoplimit", 0xd8, 8);
    /// UDP source port.
    pub const UDP_SPORT: Field = Field::new("udp_sport", 0xe0, 16);
    /// UDP destination port.
    pub const UDP_DPORT: Field = Field::new("udp_dport", 0xf0, 16);
    /// Source IPv6 address, or the IPv4 address in its last 4 bytes.
    pub const SRC_IP_BYTE: usize = 0x20;
    /// Destination IPv6 address, or the IPv4 address in its last 4 bytes.
    pub const DST_IP_BYTE: usize = 0x30;
}

/// `create_tir_in` / `_out`, `destroy_tir_in` and `tirc`: a transport interface receive, the
/// object a steering rule delivers to (positions from the kernel's `mlx5_ifc.h`).
pub mod tir {
    use crate::prm::Field;

    /// CREATE_TIR.
    pub const CREATE: u16 = 0x900;
    /// DESTROY_TIR.
    pub const DESTROY: u16 = 0x902;
    /// Input bytes of CREATE (the header, then the 0xf0-byte `tirc` at 0x20).
    pub const CREATE_IN_SIZE: usize = 0x110;
    /// Output bytes of CREATE, and input bytes of DESTROY.
    pub const CREATE_OUT_SIZE: usize = 0x10;
    /// Where `tirc` starts in CREATE's input, in bits.
    const CTX: u32 = 0x20 * 8;
    /// CREATE's output and DESTROY's input: the TIR's number.
    pub const TIRN: Field = Field::new("tirn", 0x48, 24);
    /// `tirc.disp_type`: [`disp::DIRECT`] to one RQ, [`disp::INDIRECT`] through an RQ table.
    pub const DISP_TYPE: Field = Field::new("disp_type", CTX + 0x20, 4);
    /// `tirc.inline_rqn`: the RQ of a direct TIR.
    pub const INLINE_RQN: Field = Field::new("inline_rqn", CTX + 0xe8, 24);
    /// `tirc.indirect_table`: the RQ table of an indirect TIR.
    pub const INDIRECT_TABLE: Field = Field::new("indirect_table", CTX + 0x108, 24);
    /// `tirc.transport_domain`.
    pub const TRANSPORT_DOMAIN: Field = Field::new("transport_domain", CTX + 0x128, 24);

    /// `tirc.disp_type` values.
    pub mod disp {
        /// Every packet to `inline_rqn`.
        pub const DIRECT: u64 = 0;
        /// Spread over `indirect_table` by the RX hash.
        pub const INDIRECT: u64 = 1;
    }
}
