//! Send WQE segments as the provider writes them into the send queue and the device reads
//! them (rdma-core `mlx5dv.h` and `providers/mlx5/wqe.h` layouts, all big-endian).
//!
//! A WQE is a control segment followed by opcode-specific segments, in 16-byte units (`ds`),
//! occupying whole 64-byte basic blocks (WQEBBs) of the ring; it may wrap at the ring's end,
//! so a reader linearises it before decoding segments past the first WQEBB.

use super::view::layout;

pub mod bsf;
pub mod compose;
mod umr;

pub use umr::{klm, mkey_context, repeat_block, repeat_ent, umr_ctrl};

pub use atomic::AtomicSeg;
pub use bsf::{Bsf, BsfBasic, BsfExt, BsfInl};
pub use compose::{Payload, SendWqe, UmrTranslation, WqeBody};
pub use ctrl::CtrlSeg;
pub use data::DataSeg;
pub use inline::InlineSeg;
pub use klm::KlmSeg;
pub use mkey_context::MkeyContextSeg;
pub use mmo::MmoMetaSeg;
pub use raddr::RaddrSeg;
pub use repeat_block::RepeatBlockSeg;
pub use repeat_ent::RepeatEntSeg;
pub use set_psv::SetPsvSeg;
pub use umr_ctrl::UmrCtrlSeg;

/// `MLX5_SEND_WQE_BB`: bytes in one basic block of the send queue.
pub const SEND_WQE_BB: usize = 64;
/// `MLX5_SEND_WQE_SHIFT`: log2 of [`SEND_WQE_BB`].
pub const SEND_WQE_SHIFT: u32 = 6;
/// `MLX5_SEND_WQE_DS`: bytes in the unit `ds` counts.
pub const SEND_WQE_DS: usize = 16;
/// `MLX5_INLINE_SEG`: bit 31 of a segment's first dword marks inline data rather than a
/// pointer (data segment).
pub const INLINE_SEG: u32 = 0x8000_0000;
/// `MLX5_INVALID_LKEY`: the lkey of a data segment that terminates a scatter list.
pub const INVALID_LKEY: u32 = 0x100;

/// `MLX5_OPCODE_*`: the send WQE opcode in the control segment.
pub mod opcode {
    /// NOP.
    pub const NOP: u8 = 0x00;
    /// SEND with invalidate.
    pub const SEND_INVAL: u8 = 0x01;
    /// RDMA write.
    pub const RDMA_WRITE: u8 = 0x08;
    /// RDMA write with immediate.
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    /// SEND.
    pub const SEND: u8 = 0x0a;
    /// SEND with immediate.
    pub const SEND_IMM: u8 = 0x0b;
    /// TSO (raw Ethernet).
    pub const TSO: u8 = 0x0e;
    /// RDMA read.
    pub const RDMA_READ: u8 = 0x10;
    /// Atomic compare and swap.
    pub const ATOMIC_CS: u8 = 0x11;
    /// Atomic fetch and add.
    pub const ATOMIC_FA: u8 = 0x12;
    /// Masked atomic compare and swap.
    pub const ATOMIC_MASKED_CS: u8 = 0x14;
    /// Masked atomic fetch and add.
    pub const ATOMIC_MASKED_FA: u8 = 0x15;
    /// FMR (legacy fast registration).
    pub const FMR: u8 = 0x19;
    /// Local invalidate.
    pub const LOCAL_INVAL: u8 = 0x1b;
    /// CONFIG_CMD.
    pub const CONFIG_CMD: u8 = 0x1f;
    /// SET_PSV: initialise a PSV's transient signature.
    pub const SET_PSV: u8 = 0x20;
    /// UMR: user-mode memory registration (mkey configure).
    pub const UMR: u8 = 0x25;
    /// Tag matching.
    pub const TAG_MATCHING: u8 = 0x28;
    /// Flow table access.
    pub const FLOW_TBL_ACCESS: u8 = 0x2c;
    /// MMO (memory-to-memory offload, such as DMA copy).
    pub const MMO: u8 = 0x2f;

    /// The rdma-core name of an opcode, for logs.
    pub fn name(op: u8) -> &'static str {
        match op {
            NOP => "NOP",
            SEND_INVAL => "SEND_INVAL",
            RDMA_WRITE => "RDMA_WRITE",
            RDMA_WRITE_IMM => "RDMA_WRITE_IMM",
            SEND => "SEND",
            SEND_IMM => "SEND_IMM",
            TSO => "TSO",
            RDMA_READ => "RDMA_READ",
            ATOMIC_CS => "ATOMIC_CS",
            ATOMIC_FA => "ATOMIC_FA",
            ATOMIC_MASKED_CS => "ATOMIC_MASKED_CS",
            ATOMIC_MASKED_FA => "ATOMIC_MASKED_FA",
            FMR => "FMR",
            LOCAL_INVAL => "LOCAL_INVAL",
            CONFIG_CMD => "CONFIG_CMD",
            SET_PSV => "SET_PSV",
            UMR => "UMR",
            TAG_MATCHING => "TAG_MATCHING",
            FLOW_TBL_ACCESS => "FLOW_TBL_ACCESS",
            MMO => "MMO",
            _ => "UNKNOWN",
        }
    }
}

/// `mlx5_wqe_ctrl_seg`: the control segment every send WQE starts with (16 bytes).
pub mod ctrl {
    use super::layout;

    /// Size in bytes.
    pub const SIZE: usize = 16;

    /// `MLX5_WQE_CTRL_CQ_UPDATE`: the `fm_ce_se` bit asking for a CQE on success.
    pub const CQ_UPDATE: u8 = 2 << 2;
    /// `MLX5_WQE_CTRL_SOLICITED`: the `fm_ce_se` solicited-event bit.
    pub const SOLICITED: u8 = 1 << 1;
    /// `MLX5_WQE_CTRL_FENCE`: the `fm_ce_se` value of fence mode SMALL_AND_FENCE.
    pub const FENCE: u8 = 4 << 5;
    /// `MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE`: the `fm_ce_se` value of fence mode
    /// INITIATOR_SMALL, which the provider puts on the WQE after a UMR or SET_PSV.
    pub const INITIATOR_SMALL_FENCE: u8 = 1 << 5;

    /// Values of the 3-bit `fm` (fence mode) field, unshifted.
    pub mod fence {
        /// No fence.
        pub const NONE: u8 = 0;
        /// Wait for the previous WQE's local (initiator-side) work, as after a UMR.
        pub const INITIATOR_SMALL: u8 = 1;
        /// Wait for earlier RDMA reads and atomics to complete.
        pub const FENCE: u8 = 2;
        /// Strong ordering.
        pub const STRONG_ORDERING: u8 = 3;
        /// Both INITIATOR_SMALL and FENCE.
        pub const SMALL_AND_FENCE: u8 = 4;
    }

    /// The `ce` value that asks for a CQE on success ([`CQ_UPDATE`] unshifted).
    pub const CE_CQ_UPDATE: u8 = 2;

    layout! {
        /// The control segment.
        struct CtrlSeg = "mlx5_wqe_ctrl_seg", SIZE;
        /// opmod: opcode modifier.
        OPMOD => opmod / set_opmod: u8 = (0x00, 8);
        /// wqe_index: the WQEBB counter of the WQE's first block (wraps at 0xffff, not at the
        /// ring size).
        WQE_INDEX => wqe_index / set_wqe_index: u16 = (0x08, 16);
        /// opcode: one of [`opcode`](super::opcode).
        OPCODE => opcode / set_opcode: u8 = (0x18, 8);
        /// qpn: the QP (or SQ) the WQE is posted to.
        QPN => qpn / set_qpn: u32 = (0x20, 24);
        /// ds: the WQE's size in 16-byte units, every segment included.
        DS => ds / set_ds: u8 = (0x3a, 6);
        /// signature: the WQE signature byte (zero unless signatures are enabled on the QP).
        SIGNATURE => signature / set_signature: u8 = (0x40, 8);
        /// dci_stream_channel_id.
        DCI_STREAM_CHANNEL_ID => dci_stream_channel_id / set_dci_stream_channel_id: u16 = (0x48, 16);
        /// fm: fence mode, one of [`fence`].
        FM => fm / set_fm: u8 = (0x58, 3);
        /// ce: completion mode; [`CE_CQ_UPDATE`] asks for a CQE on success.
        CE => ce / set_ce: u8 = (0x5c, 2);
        /// se: solicited event.
        SE => se / set_se: bool = (0x5e, 1);
        /// imm: immediate data, invalidation key (SEND_INVAL, LOCAL_INVAL) or the mkey a UMR
        /// configures, as the big-endian dword read.
        IMM => imm / set_imm: u32 = (0x60, 32);
    }

    impl CtrlSeg {
        /// The `fm_ce_se` byte as rdma-core builds it (byte 11).
        pub fn fm_ce_se(&self) -> u8 {
            (self.fm & 0x7) << 5 | (self.ce & 0x3) << 2 | u8::from(self.se) << 1
        }

        /// Set `fm`, `ce` and `se` from an `fm_ce_se` byte; reserved bits are dropped.
        pub fn set_fm_ce_se(&mut self, byte: u8) {
            self.fm = byte >> 5;
            self.ce = (byte >> 2) & 0x3;
            self.se = byte & SOLICITED != 0;
        }

        /// True when the WQE asks for a CQE on success.
        pub fn cqe_requested(&self) -> bool {
            self.ce & CE_CQ_UPDATE != 0
        }

        /// WQEBBs the WQE occupies: `ds` 16-byte units rounded up to 64-byte blocks.
        pub fn wqebbs(&self) -> usize {
            usize::from(self.ds).div_ceil(super::SEND_WQE_BB / super::SEND_WQE_DS)
        }
    }
}

/// `mlx5_wqe_raddr_seg`: the remote address of an RDMA read or write (16 bytes).
pub mod raddr {
    use super::layout;

    /// Size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// The remote address segment.
        struct RaddrSeg = "mlx5_wqe_raddr_seg", SIZE;
        /// raddr: remote virtual address.
        RADDR => raddr / set_raddr: u64 = (0x00, 64);
        /// rkey: remote key.
        RKEY => rkey / set_rkey: u32 = (0x40, 32);
    }
}

/// `mlx5_wqe_atomic_seg`: the operands of an atomic, after its remote address (16 bytes).
pub mod atomic {
    use super::layout;

    /// Size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// The atomic segment.
        struct AtomicSeg = "mlx5_wqe_atomic_seg", SIZE;
        /// swap_add: the swap value of a compare-and-swap, the addend of a fetch-and-add.
        SWAP_ADD => swap_add / set_swap_add: u64 = (0x00, 64);
        /// compare: the value a compare-and-swap compares with (0 for a fetch-and-add).
        COMPARE => compare / set_compare: u64 = (0x40, 64);
    }
}

/// `mlx5_mmo_metadata_seg`: after the control segment of an MMO WQE (16 bytes), then the
/// source and destination data segments (`struct mlx5_mmo_wqe`).
pub mod mmo {
    use super::layout;

    /// Size in bytes.
    pub const SIZE: usize = 16;
    /// `MLX5_OPC_MOD_MMO_DMA`: the control segment's `opmod` of a DMA copy.
    pub const OPC_MOD_DMA: u8 = 0x1;
    /// `MLX5_DMA_MMO_MAX_SIZE`: 2 GiB, written as a byte count of 0.
    pub const DMA_MAX_SIZE: u64 = 1 << 31;

    layout! {
        /// The MMO metadata segment.
        struct MmoMetaSeg = "mlx5_mmo_metadata_seg", SIZE;
        /// mmo_control_31_0: 0 for a DMA copy.
        MMO_CONTROL => mmo_control / set_mmo_control: u32 = (0x00, 32);
        /// local_key: the lkey of the PD's 64-byte scratch buffer.
        LOCAL_KEY => local_key / set_local_key: u32 = (0x20, 32);
        /// local_address: that buffer's address.
        LOCAL_ADDRESS => local_address / set_local_address: u64 = (0x40, 64);
    }
}

/// `mlx5_wqe_data_seg`: one scatter/gather pointer (16 bytes).
pub mod data {
    use super::layout;

    /// Size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// The data (pointer) segment.
        struct DataSeg = "mlx5_wqe_data_seg", SIZE;
        /// byte_count: bytes at `addr`; bit 31 set would make the segment read as inline
        /// ([`INLINE_SEG`](super::INLINE_SEG)).
        BYTE_COUNT => byte_count / set_byte_count: u32 = (0x00, 32);
        /// lkey: local key of the memory.
        LKEY => lkey / set_lkey: u32 = (0x20, 32);
        /// addr: virtual address (or offset for a zero-based mkey).
        ADDR => addr / set_addr: u64 = (0x40, 64);
    }
}

/// `mlx5_wqe_inl_data_seg`: the header of inline data (4 bytes); the data follows it
/// directly and the whole is padded to 16 bytes.
pub mod inline {
    use super::layout;

    /// Size in bytes of the header.
    pub const SIZE: usize = 4;

    layout! {
        /// The inline data header.
        struct InlineSeg = "mlx5_wqe_inl_data_seg", SIZE;
        /// inline: set on every inline header ([`INLINE_SEG`](super::INLINE_SEG)); clear, the
        /// dword is a data segment's byte count.
        INLINE => inline / set_inline: bool = (0x00, 1);
        /// byte_count: bytes of inline data after the header.
        BYTE_COUNT => byte_count / set_byte_count: u32 = (0x01, 31);
    }

    impl InlineSeg {
        /// The header of `byte_count` inline bytes.
        pub fn new(byte_count: u32) -> Self {
            InlineSeg { inline: true, byte_count }
        }

        /// Bytes the header and its data take in the WQE: a multiple of 16, or `None` on
        /// overflow.
        pub fn padded_len(&self) -> Option<usize> {
            let len = usize::try_from(self.byte_count).ok()?.checked_add(SIZE)?;
            len.checked_next_multiple_of(super::SEND_WQE_DS)
        }
    }
}

/// `mlx5_wqe_set_psv_seg`: the segment of a SET_PSV WQE (16 bytes), after the control
/// segment; it arms a PSV with its initial (transient) signature.
pub mod set_psv {
    use super::layout;

    /// Size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// The SET_PSV segment.
        struct SetPsvSeg = "mlx5_wqe_set_psv_seg", SIZE;
        /// psv_index: the PSV number (24 bits, as CREATE_PSV returns it).
        PSV_INDEX => psv_index / set_psv_index: u32 = (0x08, 24);
        /// syndrome: zero when arming.
        SYNDROME => syndrome / set_syndrome: u16 = (0x20, 16);
        /// transient_signature: the signature value the PSV starts from.
        TRANSIENT_SIGNATURE => transient_signature / set_transient_signature: u64 = (0x40, 64);
    }

    /// Transient signature of a T10-DIF domain: `bg << 48 | app_tag << 32 | ref_tag`.
    pub fn transient_t10dif(bg: u16, app_tag: u16, ref_tag: u32) -> u64 {
        u64::from(bg) << 48 | u64::from(app_tag) << 32 | u64::from(ref_tag)
    }

    /// Transient signature of a CRC32 or CRC32C domain: the seed in the upper half.
    pub fn transient_crc32(seed: u32) -> u64 {
        u64::from(seed) << 32
    }

    /// Transient signature of a CRC64-XP10 domain: the seed itself.
    pub fn transient_crc64(seed: u64) -> u64 {
        seed
    }
}

#[cfg(test)]
mod tests;
