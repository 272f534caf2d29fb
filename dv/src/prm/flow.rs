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
