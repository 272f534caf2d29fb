//! Raw CQs and QPs as DEVX creates them: `create_cq_in` with its `cqc`, `create_qp_in` and the
//! QP state-change commands with their `qpc` and primary address path, `query_qp_out`, and
//! the destroy commands. Offsets are bits of the whole mailbox.

use super::Field;

/// `create_cq_in` (the `cqc` at byte 0x10) and `create_cq_out`.
pub mod create_cq {
    use super::Field;
    /// cqc.dbr_umem_valid: `db_record_addr` is an offset into `dbr_umem_id`.
    pub const DBR_UMEM_VALID: Field = Field::new("cqc.dbr_umem_valid", 0x86, 1);
    /// cqc.oi: overrun ignore.
    pub const OI: Field = Field::new("cqc.oi", 0x8e, 1);
    /// cqc.cqe_sz (0: 64-byte CQEs).
    pub const CQE_SZ: Field = Field::new("cqc.cqe_sz", 0x88, 3);
    /// cqc.cqe_comp_en: the device may compress CQEs.
    pub const CQE_COMP_EN: Field = Field::new("cqc.cqe_comp_en", 0x91, 1);
    /// cqc.mini_cqe_res_format (0 hash, 1 checksum, 3 checksum and stride index).
    pub const MINI_CQE_RES_FORMAT: Field = Field::new("cqc.mini_cqe_res_format", 0x92, 2);
    /// cqc.dbr_umem_id.
    pub const DBR_UMEM_ID: Field = Field::new("cqc.dbr_umem_id", 0xa0, 32);
    /// cqc.page_offset: where the ring starts in its first page, in 64-byte units.
    pub const PAGE_OFFSET: Field = Field::new("cqc.page_offset", 0xd4, 6);
    /// cqc.log_cq_size: the CQ holds 2^log_cq_size CQEs.
    pub const LOG_CQ_SIZE: Field = Field::new("cqc.log_cq_size", 0xe3, 5);
    /// cqc.uar_page.
    pub const UAR_PAGE: Field = Field::new("cqc.uar_page", 0xe8, 24);
    /// cqc.c_eqn: the EQ its completion events go to.
    pub const C_EQN: Field = Field::new("cqc.c_eqn", 0x138, 8);
    /// cqc.log_page_size: the PAS pages are 4 KiB << log_page_size.
    pub const LOG_PAGE_SIZE: Field = Field::new("cqc.log_page_size", 0x143, 5);
    /// cqc.consumer_counter.
    pub const CONSUMER_COUNTER: Field = Field::new("cqc.consumer_counter", 0x1c8, 24);
    /// cqc.producer_counter.
    pub const PRODUCER_COUNTER: Field = Field::new("cqc.producer_counter", 0x1e8, 24);
    /// cqc.db_record_addr (the low 3 bits are reserved).
    pub const DB_RECORD_ADDR: Field = Field::new("cqc.db_record_addr", 0x240, 64);
    /// cq_umem_offset.
    pub const CQ_UMEM_OFFSET: Field = Field::new("cq_umem_offset", 0x280, 64);
    /// cq_umem_id.
    pub const CQ_UMEM_ID: Field = Field::new("cq_umem_id", 0x2c0, 32);
    /// cq_umem_valid: the ring is in `cq_umem_id`, not in the PAS list.
    pub const CQ_UMEM_VALID: Field = Field::new("cq_umem_valid", 0x2e0, 1);
    /// Input size in bytes without the PAS list.
    pub const IN_SIZE: usize = 272;
    /// `create_cq_out.cqn` and `destroy_cq_in.cqn`.
    pub const CQN: Field = Field::new("cqn", 0x48, 24);
    /// Output size, and the size of `destroy_cq_in`.
    pub const SIZE: usize = 16;
}

/// `create_qp_in` (the `qpc` at byte 0x18), the state-change commands (`rst2init_qp_in`,
/// `init2rtr_qp_in`, `rtr2rts_qp_in`, `qp_2err_in`, `qp_2rst_in`: the `qpc` at the same place)
/// and `query_qp_out`.
pub mod qp {
    use super::Field;
    /// qpc.state (`query_qp_out`).
    pub const STATE: Field = Field::new("qpc.state", 0xc0, 4);
    /// qpc.st: the service type (0 = RC).
    pub const ST: Field = Field::new("qpc.st", 0xc8, 8);
    /// qpc.pm_state: the path migration state ([`super::pm_state`]).
    pub const PM_STATE: Field = Field::new("qpc.pm_state", 0xd3, 2);
    /// qpc.drain_sigerr: a signature error drains the send queue (SIG_PIPELINING).
    pub const DRAIN_SIGERR: Field = Field::new("qpc.drain_sigerr", 0xe5, 1);
    /// qpc.pd.
    pub const PD: Field = Field::new("qpc.pd", 0xe8, 24);
    /// qpc.mtu.
    pub const MTU: Field = Field::new("qpc.mtu", 0x100, 3);
    /// qpc.log_msg_max: log2 of the largest message.
    pub const LOG_MSG_MAX: Field = Field::new("qpc.log_msg_max", 0x103, 5);
    /// qpc.log_rq_size.
    pub const LOG_RQ_SIZE: Field = Field::new("qpc.log_rq_size", 0x109, 4);
    /// qpc.log_rq_stride: the receive WQE stride is 16 << log_rq_stride bytes.
    pub const LOG_RQ_STRIDE: Field = Field::new("qpc.log_rq_stride", 0x10d, 3);
    /// qpc.no_sq.
    pub const NO_SQ: Field = Field::new("qpc.no_sq", 0x110, 1);
    /// qpc.log_sq_size: the send queue has 2^log_sq_size basic blocks.
    pub const LOG_SQ_SIZE: Field = Field::new("qpc.log_sq_size", 0x111, 4);
    /// qpc.uar_page.
    pub const UAR_PAGE: Field = Field::new("qpc.uar_page", 0x128, 24);
    /// qpc.log_page_size: the PAS pages are 4 KiB << log_page_size.
    pub const LOG_PAGE_SIZE: Field = Field::new("qpc.log_page_size", 0x163, 5);
    /// qpc.remote_qpn.
    pub const REMOTE_QPN: Field = Field::new("qpc.remote_qpn", 0x168, 24);
    /// qpc.primary_address_path.pkey_index.
    pub const PKEY_INDEX: Field = Field::new("ads.pkey_index", 0x190, 16);
    /// qpc.primary_address_path.grh.
    pub const GRH: Field = Field::new("ads.grh", 0x1a8, 1);
    /// qpc.primary_address_path.rlid.
    pub const RLID: Field = Field::new("ads.rlid", 0x1b0, 16);
    /// qpc.primary_address_path.ack_timeout: the local ACK timeout, 4.096 us << ack_timeout.
    pub const ACK_TIMEOUT: Field = Field::new("ads.ack_timeout", 0x1c0, 5);
    /// qpc.primary_address_path.src_addr_index: the source GID index.
    pub const SRC_ADDR_INDEX: Field = Field::new("ads.src_addr_index", 0x1c8, 8);
    /// qpc.primary_address_path.hop_limit.
    pub const HOP_LIMIT: Field = Field::new("ads.hop_limit", 0x1d8, 8);
    /// Byte offset of qpc.primary_address_path.rgid_rip (16 bytes).
    pub const RGID_BYTE: usize = 0x40;
    /// qpc.primary_address_path.vhca_port_num.
    pub const VHCA_PORT_NUM: Field = Field::new("ads.vhca_port_num", 0x2a8, 8);
    /// qpc.log_ack_req_freq.
    pub const LOG_ACK_REQ_FREQ: Field = Field::new("qpc.log_ack_req_freq", 0x440, 4);
    /// qpc.log_sra_max: log2 of the outstanding READs and atomics as requester.
    pub const LOG_SRA_MAX: Field = Field::new("qpc.log_sra_max", 0x448, 3);
    /// qpc.retry_count: retries after a timeout or a sequence error NAK.
    pub const RETRY_COUNT: Field = Field::new("qpc.retry_count", 0x44d, 3);
    /// qpc.rnr_retry: retries after an RNR NAK (7: without end).
    pub const RNR_RETRY: Field = Field::new("qpc.rnr_retry", 0x450, 3);
    /// qpc.next_send_psn.
    pub const NEXT_SEND_PSN: Field = Field::new("qpc.next_send_psn", 0x488, 24);
    /// qpc.cqn_snd.
    pub const CQN_SND: Field = Field::new("qpc.cqn_snd", 0x4a8, 24);
    /// `qpc.log_num_dci_stream_channels` (a DCI's streams; in the byte above `cqn_snd`).
    pub const LOG_NUM_DCI_STREAM_CHANNELS: Field = Field::new("qpc.log_num_dci_stream_channels", 0x4a4, 4);
    /// `qpc.log_num_dci_errored_streams` (in the byte above `deth_sqpn`).
    pub const LOG_NUM_DCI_ERRORED_STREAMS: Field = Field::new("qpc.log_num_dci_errored_streams", 0x4c4, 4);
    /// qpc.log_rra_max: log2 of the outstanding READs and atomics as responder.
    pub const LOG_RRA_MAX: Field = Field::new("qpc.log_rra_max", 0x548, 3);
    /// qpc.atomic_mode.
    pub const ATOMIC_MODE: Field = Field::new("qpc.atomic_mode", 0x54c, 4);
    /// qpc.rre.
    pub const RRE: Field = Field::new("qpc.rre", 0x550, 1);
    /// qpc.rwe.
    pub const RWE: Field = Field::new("qpc.rwe", 0x551, 1);
    /// qpc.rae.
    pub const RAE: Field = Field::new("qpc.rae", 0x552, 1);
    /// qpc.page_offset: where the queues start in their first page, in 64-byte units.
    pub const PAGE_OFFSET: Field = Field::new("qpc.page_offset", 0x554, 6);
    /// qpc.min_rnr_nak: the RNR NAK timer the responder asks for.
    pub const MIN_RNR_NAK: Field = Field::new("qpc.min_rnr_nak", 0x563, 5);
    /// qpc.next_rcv_psn.
    pub const NEXT_RCV_PSN: Field = Field::new("qpc.next_rcv_psn", 0x568, 24);
    /// qpc.cqn_rcv.
    pub const CQN_RCV: Field = Field::new("qpc.cqn_rcv", 0x5a8, 24);
    /// qpc.dbr_addr: the doorbell record, or its offset in `dbr_umem_id`.
    pub const DBR_ADDR: Field = Field::new("qpc.dbr_addr", 0x5c0, 64);
    /// qpc.q_key.
    pub const Q_KEY: Field = Field::new("qpc.q_key", 0x600, 32);
    /// qpc.rq_type (3 = no receive queue).
    pub const RQ_TYPE: Field = Field::new("qpc.rq_type", 0x625, 3);
    /// qpc.srqn_rmpn_xrqn: the SRQ a QP with `rq_type` 1 receives from.
    pub const SRQN_RMPN_XRQN: Field = Field::new("qpc.srqn_rmpn_xrqn", 0x628, 24);
    /// qpc.xrcd: the XRC domain of an XRC target QP.
    pub const XRCD: Field = Field::new("qpc.xrcd", 0x648, 24);
    /// qpc.hw_sq_wqebb_counter (`query_qp_out`).
    pub const HW_SQ_WQEBB_COUNTER: Field = Field::new("qpc.hw_sq_wqebb_counter", 0x660, 16);
    /// qpc.cs_res: scatter-to-CQE of small receives ([`super::cs_res`]; 0: off).
    pub const CS_RES: Field = Field::new("qpc.cs_res", 0x6f8, 8);
    /// qpc.dbr_umem_valid.
    pub const DBR_UMEM_VALID: Field = Field::new("qpc.dbr_umem_valid", 0x743, 1);
    /// qpc.dbr_umem_id.
    pub const DBR_UMEM_ID: Field = Field::new("qpc.dbr_umem_id", 0x7e0, 32);
    /// wq_umem_offset (`create_qp_in`).
    pub const WQ_UMEM_OFFSET: Field = Field::new("wq_umem_offset", 0x800, 64);
    /// wq_umem_id (`create_qp_in`).
    pub const WQ_UMEM_ID: Field = Field::new("wq_umem_id", 0x840, 32);
    /// wq_umem_valid (`create_qp_in`): the queues are in `wq_umem_id`, not in the PAS list.
    pub const WQ_UMEM_VALID: Field = Field::new("wq_umem_valid", 0x860, 1);
    /// opt_param_mask: the optional parameters a state change sets ([`super::optpar`]).
    pub const OPT_PARAM_MASK: Field = Field::new("opt_param_mask", 0x80, 32);
    /// The QP number of a state change, query or destroy, and of `create_qp_out`.
    pub const QPN: Field = Field::new("qpn", 0x48, 24);
    /// Size of `create_qp_in` without PAS, of the state-change inputs and of `query_qp_out`.
    pub const SIZE: usize = 272;
    /// Size of `create_qp_out`, `query_qp_in`, `destroy_qp_in` and the state-change outputs.
    pub const SMALL: usize = 16;
}

/// `qpc.st` values: the service type.
pub mod st {
    /// Reliable connected.
    pub const RC: u8 = 0x0;
    /// Unreliable connected.
    pub const UC: u8 = 0x1;
    /// Unreliable datagram.
    pub const UD: u8 = 0x2;
    /// Extended reliable connected (both the initiator and the target).
    pub const XRC: u8 = 0x3;
    /// Dynamically connected initiator (`MLX5_QP_ST_DCI`).
    pub const DCI: u8 = 0x5;
    /// Raw Ethernet (`MLX5_QP_ST_RAW_ETHERTYPE`, the kernel's `to_mlx5_st` of
    /// `IB_QPT_RAW_PACKET`). mlx5_ib builds a raw packet QP from SQ, RQ, TIS and TIR objects
    /// instead; the simulator's kernel makes it one CREATE_QP of this service type.
    pub const RAW: u8 = 0x9;
    /// Not a `qpc.st` value: the simulator's firmware keeps a DC target (the object of
    /// CREATE_DCT, whose `dctc` layout is not public) as a QP of this service type.
    pub const DCT: u8 = 0xd7;
}

/// `qpc.cs_res` values (`MLX5_RES_SCAT_DATA*_CQE`).
pub mod cs_res {
    /// Up to 32 bytes of a small receive in the 64-byte CQE (`MLX5_INLINE_SCATTER_32`).
    pub const DATA32: u64 = 1;
    /// Up to 64 bytes in the first half of a 128-byte CQE (`MLX5_INLINE_SCATTER_64`).
    pub const DATA64: u64 = 2;
}

/// `qpc.pm_state` values.
pub mod pm_state {
    /// MIGRATED: the value the kernel writes without `IBV_QP_PATH_MIG_STATE`.
    pub const MIGRATED: u8 = 0x3;
}

/// `opt_param_mask` bits (`enum mlx5_qp_optpar`): which optional `qpc` fields a state change
/// takes.
pub mod optpar {
    /// The alternate path.
    pub const ALT_ADDR_PATH: u32 = 1 << 0;
    /// `rre`.
    pub const RRE: u32 = 1 << 1;
    /// `rae`.
    pub const RAE: u32 = 1 << 2;
    /// `rwe`.
    pub const RWE: u32 = 1 << 3;
    /// The primary path's `pkey_index`.
    pub const PKEY_INDEX: u32 = 1 << 4;
    /// `q_key`.
    pub const Q_KEY: u32 = 1 << 5;
    /// `min_rnr_nak`.
    pub const RNR_TIMEOUT: u32 = 1 << 6;
    /// The primary path.
    pub const PRIMARY_ADDR_PATH: u32 = 1 << 7;
    /// `log_sra_max`.
    pub const SRA_MAX: u32 = 1 << 8;
    /// `log_rra_max`.
    pub const RRA_MAX: u32 = 1 << 9;
    /// `pm_state`.
    pub const PM_STATE: u32 = 1 << 10;
    /// `retry_count`.
    pub const RETRY_COUNT: u32 = 1 << 12;
    /// `rnr_retry`.
    pub const RNR_RETRY: u32 = 1 << 13;
    /// The primary path's `ack_timeout`.
    pub const ACK_TIMEOUT: u32 = 1 << 14;
    /// The primary path's `vhca_port_num`.
    pub const PRI_PORT: u32 = 1 << 16;
}

/// `qpc.state` values.
pub mod qp_state {
    /// RST.
    pub const RST: u8 = 0x0;
    /// INIT.
    pub const INIT: u8 = 0x1;
    /// RTR.
    pub const RTR: u8 = 0x2;
    /// RTS.
    pub const RTS: u8 = 0x3;
    /// SQER.
    pub const SQER: u8 = 0x4;
    /// SQD.
    pub const SQD: u8 = 0x5;
    /// ERR.
    pub const ERR: u8 = 0x6;
}

/// `MLX5_CQ_DOORBELL` commands (the `cmd` field of the arm doorbell, bits 24..27).
pub mod cq_arm {
    /// Arm for the next completion.
    pub const NEXT: u32 = 0x0 << 24;
    /// Arm for the next solicited completion.
    pub const SOLICITED: u32 = 0x1 << 24;
}

/// `qpc.rq_type` values.
pub mod rq_type {
    /// A receive queue of the QP's own.
    pub const REGULAR: u64 = 0x0;
    /// Receives come from the SRQ `srqn_rmpn_xrqn` names.
    pub const SRQ: u64 = 0x1;
    /// No receive queue.
    pub const ZERO_LEN: u64 = 0x3;
}

/// `create_srq_in` (the `srqc` at byte 0x10, the PAS list at byte 272), `query_srq_out` (the
/// `srqc` at the same place), `destroy_srq_in`, `query_srq_in` and `arm_rq_in`.
pub mod srq {
    use super::Field;
    /// CREATE_SRQ.
    pub const CREATE_SRQ: u16 = 0x700;
    /// DESTROY_SRQ.
    pub const DESTROY_SRQ: u16 = 0x701;
    /// QUERY_SRQ.
    pub const QUERY_SRQ: u16 = 0x702;
    /// ARM_RQ (`op_mod` 1: an SRQ): set the limit watermark and arm its event.
    pub const ARM_RQ: u16 = 0x703;
    /// `arm_rq_in.op_mod` of an SRQ.
    pub const ARM_RQ_OP_MOD_SRQ: u16 = 0x1;
    /// srqc.state (0: good, 1: error).
    pub const STATE: Field = Field::new("srqc.state", 0x80, 4);
    /// srqc.log_srq_size: the SRQ has 2^log_srq_size WQEs.
    pub const LOG_SRQ_SIZE: Field = Field::new("srqc.log_srq_size", 0x84, 4);
    /// srqc.log_rq_stride: a WQE is 16 << log_rq_stride bytes.
    pub const LOG_RQ_STRIDE: Field = Field::new("srqc.log_rq_stride", 0xa5, 3);
    /// srqc.xrcd.
    pub const XRCD: Field = Field::new("srqc.xrcd", 0xa8, 24);
    /// srqc.page_offset: where the buffer starts in its first page, in 64-byte units.
    pub const PAGE_OFFSET: Field = Field::new("srqc.page_offset", 0xc0, 6);
    /// srqc.cqn.
    pub const CQN: Field = Field::new("srqc.cqn", 0xc8, 24);
    /// srqc.log_page_size: the PAS pages are 4 KiB << log_page_size.
    pub const LOG_PAGE_SIZE: Field = Field::new("srqc.log_page_size", 0x102, 6);
    /// srqc.pd.
    pub const PD: Field = Field::new("srqc.pd", 0x148, 24);
    /// srqc.lwm: the limit watermark (0: disarmed).
    pub const LWM: Field = Field::new("srqc.lwm", 0x160, 16);
    /// srqc.wqe_cnt: the WQEs posted and not consumed (`query_srq_out`).
    pub const WQE_CNT: Field = Field::new("srqc.wqe_cnt", 0x170, 16);
    /// srqc.dbr_addr: the doorbell record (its counter of posted WQEs, BE32).
    pub const DBR_ADDR: Field = Field::new("srqc.dbr_addr", 0x1c0, 64);
    /// The SRQ number of `create_srq_out`, `destroy_srq_in`, `query_srq_in` and `arm_rq_in`.
    pub const SRQN: Field = Field::new("srqn", 0x48, 24);
    /// arm_rq_in.lwm.
    pub const ARM_LWM: Field = Field::new("arm_rq_in.lwm", 0x70, 16);
    /// Size of `create_srq_in` without PAS, and of `query_srq_out`.
    pub const SIZE: usize = 272;
    /// Size of `create_srq_out`, `destroy_srq_in`, `query_srq_in` and `arm_rq_in`.
    pub const SMALL: usize = 16;
}

/// The QP context extension (`qpc_data_ext`, after `opt_param_mask_95_32`) of INIT2INIT and
/// RTS2RTS: queue groups (`mlx5dv_modify_qp_sched_elem`).
pub mod qpc_ext {
    use crate::prm::Field;

    /// `init2init_qp_in` / `rts2rts_qp_in.qpc_ext`: the command carries `qpc_data_ext`.
    pub const QPC_EXT: Field = Field::new("qpc_ext", 0x40, 1);
    /// `opt_param_mask_95_32`.
    pub const OPT_PARAM_MASK_95_32: Field = Field::new("opt_param_mask_95_32", 0x840, 64);
    /// `MLX5_QPC_OPT_MASK_32_QOS_QUEUE_GROUP_ID`.
    pub const OPT_QOS_QUEUE_GROUP_ID: u64 = 1 << 1;
    /// `qpc_data_ext.qos_queue_group_id_requester`.
    pub const QOS_GROUP_REQUESTER: Field = Field::new("qpc_ext.qos_queue_group_id_requester", 0x8a0, 32);
    /// `qpc_data_ext.qos_queue_group_id_responder`.
    pub const QOS_GROUP_RESPONDER: Field = Field::new("qpc_ext.qos_queue_group_id_responder", 0x8c0, 32);
    /// Bytes of an input through the whole `qpc_data_ext` (0x600 bits from 0x880).
    pub const IN_SIZE: usize = (0x880 + 0x600) / 8;
}

/// `modify_sq_in`: a send queue's state and, by `modify_bitmask`, its queue group.
pub mod modify_sq {
    use crate::prm::Field;

    /// MODIFY_SQ.
    pub const OPCODE: u16 = 0x905;
    /// Bytes of the input (the header and the 0xf0-byte `sq_context`).
    pub const IN_SIZE: usize = 0x110;
    /// `sq_state`: the state the SQ is in.
    pub const SQ_STATE: Field = Field::new("sq_state", 0x40, 4);
    /// `sqn`.
    pub const SQN: Field = Field::new("sqn", 0x48, 24);
    /// `modify_bitmask`.
    pub const MODIFY_BITMASK: Field = Field::new("modify_bitmask", 0x80, 64);
    /// `sq_context.state`: the state it goes to.
    pub const STATE: Field = Field::new("sqc.state", 0x108, 4);
    /// `sq_context.qos_queue_group_id`.
    pub const QOS_QUEUE_GROUP_ID: Field = Field::new("sqc.qos_queue_group_id", 0x210, 16);
    /// `MLX5_MODIFY_SQ_BITMASK_QOS_QUEUE_GROUP_ID`.
    pub const BITMASK_QOS_QUEUE_GROUP_ID: u64 = 1 << 2;
    /// `MLX5_SQC_STATE_RDY`.
    pub const RDY: u64 = 1;
}
