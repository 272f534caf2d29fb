//! Event queues, EQEs, UARs and umems: `create_eq_in` with its `eqc`, `create_eq_out`,
//! `destroy_eq_in`, `query_eq`, `gen_eqe_in`, the 64-byte EQE, event types, and the
//! ALLOC_UAR / CREATE_UMEM mailboxes.
//!
//! Offsets are bits of the whole mailbox (the `eqc` starts at byte 0x10 of `create_eq_in`).
//! `eqc.intr` is the 12-bit field of current kernels and pyverbs; rdma-core's own copy of
//! the layout has 8 bits with the same low bit.

use super::Field;

/// `create_eq_in`: an `mbox_in` header, the `eqc` at byte 0x10, `event_bitmask` at byte
/// 0x58 and the PAS list at byte 0x110.
pub mod create_eq {
    use super::Field;
    /// eqc.status.
    pub const STATUS: Field = Field::new("eqc.status", 0x80, 4);
    /// eqc.ec: EQ of a completion vector.
    pub const EC: Field = Field::new("eqc.ec", 0x8d, 1);
    /// eqc.oi: overrun ignore.
    pub const OI: Field = Field::new("eqc.oi", 0x8e, 1);
    /// eqc.st: the arm state.
    pub const ST: Field = Field::new("eqc.st", 0x94, 4);
    /// eqc.page_offset.
    pub const PAGE_OFFSET: Field = Field::new("eqc.page_offset", 0xd4, 6);
    /// eqc.log_eq_size: the ring holds 2^log_eq_size EQEs.
    pub const LOG_EQ_SIZE: Field = Field::new("eqc.log_eq_size", 0xe3, 5);
    /// eqc.uar_page: the UAR whose doorbell moves the consumer index.
    pub const UAR_PAGE: Field = Field::new("eqc.uar_page", 0xe8, 24);
    /// eqc.intr: the MSI-X vector the EQ signals.
    pub const INTR: Field = Field::new("eqc.intr", 0x134, 12);
    /// eqc.log_page_size: the ring's page size, log2 of it minus 12.
    pub const LOG_PAGE_SIZE: Field = Field::new("eqc.log_page_size", 0x143, 5);
    /// eqc.consumer_counter.
    pub const CONSUMER_COUNTER: Field = Field::new("eqc.consumer_counter", 0x1c8, 24);
    /// eqc.producer_counter.
    pub const PRODUCER_COUNTER: Field = Field::new("eqc.producer_counter", 0x1e8, 24);
    /// Byte offset of `event_bitmask[0]`, the first of four big-endian 64-bit words; event
    /// type `t` is bit `t % 64` of word `t / 64`.
    pub const EVENT_BITMASK_BYTE: usize = 0x58;
    /// `event_bitmask[0]`.
    pub const EVENT_BITMASK_0: Field = Field::new("event_bitmask[0]", 0x2c0, 64);
    /// Input size in bytes without the PAS list (`sizeof(create_eq_in)`).
    pub const IN_SIZE: usize = 272;
    /// Byte offset of `pas[0]`.
    pub const PAS_BYTE: usize = 272;
    /// `create_eq_out.eq_number`.
    pub const OUT_EQ_NUMBER: Field = Field::new("eq_number", 0x58, 8);
    /// Output size in bytes.
    pub const OUT_SIZE: usize = 16;
}

/// `destroy_eq_in` and `query_eq_in`: the EQ number (outputs are `mbox_out` / `query_eq_out`).
pub mod destroy_eq {
    use super::Field;
    /// eq_number.
    pub const EQ_NUMBER: Field = Field::new("eq_number", 0x58, 8);
    /// Input size in bytes.
    pub const IN_SIZE: usize = 16;
}

/// `query_eq_out`: the `eqc` at byte 0x10 (fields as in [`create_eq`]), one 64-bit
/// `event_bitmask` at byte 0x58.
pub mod query_eq {
    /// Output size in bytes without the PAS list.
    pub const OUT_SIZE: usize = 272;
}

/// `gen_eqe_in`: the EQ number and a raw 64-byte EQE at byte 0x10.
pub mod gen_eqe {
    /// Byte offset of the EQE.
    pub const EQE_BYTE: usize = 0x10;
    /// Input size in bytes.
    pub const IN_SIZE: usize = 80;
}

/// The 64-byte event queue entry.
pub mod eqe {
    /// Size in bytes.
    pub const SIZE: usize = 64;
    /// Byte of `type`.
    pub const TYPE: usize = 1;
    /// Byte of `sub_type`.
    pub const SUB_TYPE: usize = 3;
    /// Byte where `data` starts.
    pub const DATA: usize = 32;
    /// Byte of the CQN (BE32, low 24 bits) of a completion event (`mlx5_eqe_comp`).
    pub const COMP_CQN: usize = DATA + 24;
    /// Byte of the CQN (BE32) of a CQ error event (`mlx5_eqe_cq_err`).
    pub const CQ_ERR_CQN: usize = DATA;
    /// Byte of the CQ error's syndrome.
    pub const CQ_ERR_SYNDROME: usize = DATA + 11;
    /// Byte of the QPN (BE32, low 24 bits) of a QP event (`mlx5_eqe_qp_srq`).
    pub const QPN: usize = DATA + 24;
    /// Byte of the port (`port << 4`) of a port state change.
    pub const PORT: usize = DATA + 8;
    /// Byte of `signature`.
    pub const SIGNATURE: usize = 62;
    /// Byte of `owner`: bit 0 is the ownership bit.
    pub const OWNER: usize = 63;
}

/// Event types (`enum mlx5_event`).
pub mod event {
    /// Completion on a CQ bound to the EQ.
    pub const COMP: u8 = 0x00;
    /// The SQ of a QP drained (SQD).
    pub const SQ_DRAINED: u8 = 0x03;
    /// An SRQ's WQEs fell below its armed limit.
    pub const SRQ_LIMIT: u8 = 0x14;
    /// A QP on an SRQ in error will take no more of its WQEs.
    pub const LAST_WQE: u8 = 0x13;
    /// A CQ error (overrun).
    pub const CQ_ERROR: u8 = 0x04;
    /// A work queue catastrophic error (QP fatal).
    pub const WQ_CATAS_ERROR: u8 = 0x05;
    /// Port state change.
    pub const PORT_STATE_CHANGE: u8 = 0x09;
    /// A command completed.
    pub const CMD: u8 = 0x0a;
    /// Invalid request on a work queue.
    pub const WQ_INVAL_REQ_ERROR: u8 = 0x10;
    /// Access violation on a work queue.
    pub const WQ_ACCESS_ERROR: u8 = 0x11;
}

/// `sub_type` of a port state change EQE (`enum mlx5_port_sub_type`).
pub mod port_sub_type {
    /// The port went down.
    pub const DOWN: u8 = 0x1;
    /// The port became active.
    pub const ACTIVE: u8 = 0x4;
}

/// `alloc_uar_out.uar` and `dealloc_uar_in.uar`.
pub mod uar {
    use super::Field;
    /// The UAR number.
    pub const UAR: Field = Field::new("uar", 0x48, 24);
    /// Size of each mailbox in bytes.
    pub const SIZE: usize = 16;
}

/// `create_umem_in` (a `umem` at byte 0x10, its MTT entries at byte 0x30),
/// `create_umem_out` and `destroy_umem_in`.
pub mod umem {
    use super::Field;
    /// umem.log_page_size: log2 of the page size minus 12.
    pub const LOG_PAGE_SIZE: Field = Field::new("umem.log_page_size", 0x11b, 5);
    /// umem.page_offset: the start's offset into the first page.
    pub const PAGE_OFFSET: Field = Field::new("umem.page_offset", 0x120, 32);
    /// umem.num_of_mtt.
    pub const NUM_OF_MTT: Field = Field::new("umem.num_of_mtt", 0x140, 64);
    /// Byte offset of the first MTT entry (BE64 page address; bit 1 write, bit 0 read).
    pub const MTT_BYTE: usize = 0x30;
    /// Input size in bytes without MTT entries.
    pub const IN_SIZE: usize = 0x30;
    /// `create_umem_out.umem_id` and `destroy_umem_in.umem_id`.
    pub const UMEM_ID: Field = Field::new("umem_id", 0x48, 24);
    /// Output size in bytes, and `destroy_umem_in`'s size.
    pub const SIZE: usize = 16;
}
