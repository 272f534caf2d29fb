//! The segments of a UMR WQE: after the control segment come the UMR control segment, the
//! mkey context segment, the inline translation entries (KLMs, or a repeat block and its
//! entries) padded to 64 bytes, then the BSFs.

/// `mlx5_wqe_umr_ctrl_seg`: what a UMR changes in the mkey (48 bytes).
pub mod umr_ctrl {
    use crate::prm::view::layout;

    /// Size in bytes.
    pub const SIZE: usize = 48;

    /// `MLX5_WQE_UMR_CTRL_FLAG_*`: bits of the `flags` byte.
    pub mod flags {
        /// The translation entries are inline in the WQE (the only mode the provider uses).
        pub const INLINE: u8 = 1 << 7;
        /// Fail unless the mkey is free.
        pub const CHECK_FREE: u8 = 1 << 5;
        /// `bsf_octowords` holds a translation offset instead.
        pub const TRANSLATION_OFFSET: u8 = 1 << 4;
        /// Fail unless the mkey's QPN matches.
        pub const CHECK_QPN: u8 = 1 << 3;
    }

    /// `MLX5_WQE_UMR_CTRL_MKEY_MASK_*`: which mkey context fields the UMR writes.
    pub mod mkey_mask {
        /// len (and length64).
        pub const LEN: u64 = 1 << 0;
        /// start_addr.
        pub const START_ADDR: u64 = 1 << 6;
        /// expected_sigerr_count.
        pub const SIG_ERR: u64 = 1 << 9;
        /// bsf_en (and the BSFs that follow the translations).
        pub const BSF_ENABLE: u64 = 1 << 12;
        /// mkey_7_0: the key's tag byte.
        pub const MKEY: u64 = 1 << 13;
        /// qpn.
        pub const QPN: u64 = 1 << 14;
        /// lw.
        pub const ACCESS_LOCAL_WRITE: u64 = 1 << 18;
        /// rr.
        pub const ACCESS_REMOTE_READ: u64 = 1 << 19;
        /// rw.
        pub const ACCESS_REMOTE_WRITE: u64 = 1 << 20;
        /// a.
        pub const ACCESS_ATOMIC: u64 = 1 << 21;
        /// free.
        pub const FREE: u64 = 1 << 29;
    }

    layout! {
        /// The UMR control segment.
        struct UmrCtrlSeg = "mlx5_wqe_umr_ctrl_seg", SIZE;
        /// flags: [`flags`] bits.
        FLAGS => flags / set_flags: u8 = (0x00, 8);
        /// klm_octowords: the inline translations' size in 16-byte units, padding included.
        KLM_OCTOWORDS => klm_octowords / set_klm_octowords: u16 = (0x20, 16);
        /// bsf_octowords: the BSFs' size in 16-byte units (or the translation offset when
        /// [`flags::TRANSLATION_OFFSET`] is set).
        BSF_OCTOWORDS => bsf_octowords / set_bsf_octowords: u16 = (0x30, 16);
        /// mkey_mask: [`mkey_mask`] bits.
        MKEY_MASK => mkey_mask / set_mkey_mask: u64 = (0x40, 64);
    }

    impl UmrCtrlSeg {
        /// True when the translations are inline.
        pub fn is_inline(&self) -> bool {
            self.flags & flags::INLINE != 0
        }

        /// Bytes of inline translations after the mkey context segment.
        pub fn translation_bytes(&self) -> usize {
            usize::from(self.klm_octowords) * 16
        }

        /// Bytes of BSF after the translations.
        pub fn bsf_bytes(&self) -> usize {
            usize::from(self.bsf_octowords) * 16
        }
    }
}

/// `mlx5_wqe_mkey_context_seg`: the mkey context a UMR writes (64 bytes). It is the `mkc`
/// layout itself; rdma-core spells some of its bytes as flag bytes, given here.
pub mod mkey_context {
    /// Size in bytes.
    pub const SIZE: usize = 64;

    /// The mkey context segment: the same structure as CREATE_MKEY's `mkc`.
    pub type MkeyContextSeg = crate::prm::mkc::Mkc;

    /// `MLX5_WQE_MKEY_CONTEXT_FREE`: in byte 0 (`free`), the mkey is free.
    pub const FREE: u8 = 1 << 6;

    /// `MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_*`: bits of byte 2 (`access_flags`).
    pub mod access_flags {
        /// Remote atomic (`a`).
        pub const ATOMIC: u8 = 1 << 6;
        /// Remote write (`rw`).
        pub const REMOTE_WRITE: u8 = 1 << 5;
        /// Remote read (`rr`).
        pub const REMOTE_READ: u8 = 1 << 4;
        /// Local write (`lw`).
        pub const LOCAL_WRITE: u8 = 1 << 3;
        /// Local read (`lr`).
        pub const LOCAL_READ: u8 = 1 << 2;
    }

    /// `MLX5_WQE_MKEY_CONTEXT_FLAGS_BSF_ENABLE`: in the `flags_pd` dword (byte 12), `bsf_en`.
    pub const FLAGS_BSF_ENABLE: u32 = 1 << 30;
    /// `MLX5_WQE_MKEY_CONTEXT_SIG_ERR_CNT_SHIFT`: where `expected_sigerr_count` sits in
    /// `flags_pd`.
    pub const SIG_ERR_CNT_SHIFT: u32 = 26;
    /// `MLX5_WQE_MKEY_CONTEXT_SIG_ERR_CNT_MASK`: its width as a mask.
    pub const SIG_ERR_CNT_MASK: u32 = 1;
}

/// `mlx5_wqe_umr_klm_seg`: one entry of a list layout (16 bytes).
pub mod klm {
    use crate::prm::FieldError;
    use crate::prm::view::layout;

    /// Size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// A KLM entry: `byte_count` bytes at `address` through `mkey`.
        struct KlmSeg = "mlx5_wqe_umr_klm_seg", SIZE;
        /// byte_count: up to 2 GiB.
        BYTE_COUNT => byte_count / set_byte_count: u32 = (0x00, 32);
        /// mkey: the key of the memory the entry maps.
        MKEY => mkey / set_mkey: u32 = (0x20, 32);
        /// address: virtual address within that key.
        ADDRESS => address / set_address: u64 = (0x40, 64);
    }

    /// Decode `n` KLM entries from the start of `buf`.
    pub fn decode_list(buf: &[u8], n: usize) -> Result<Vec<KlmSeg>, FieldError> {
        crate::prm::decode_array(buf, n, "mlx5_wqe_umr_klm_seg list")
    }

    /// Encode `entries` back to back from the start of `out`; returns the bytes written
    /// (without the padding to 64 bytes the WQE adds).
    pub fn encode_list(entries: &[KlmSeg], out: &mut [u8]) -> Result<usize, FieldError> {
        crate::prm::encode_array(entries, out, "mlx5_wqe_umr_klm_seg list")
    }
}

/// `mlx5_wqe_umr_repeat_block_seg`: the header of an interleaved layout (16 bytes), followed
/// by `num_ent` [`repeat_ent`](super::repeat_ent) entries.
pub mod repeat_block {
    use crate::prm::FieldError;
    use crate::prm::view::layout;

    use super::repeat_ent::RepeatEntSeg;

    /// Size in bytes of the header.
    pub const SIZE: usize = 16;
    /// The `op` value of a repeat block.
    pub const OP_REPEAT_BLOCK: u32 = 0x400;

    layout! {
        /// The repeat block header.
        struct RepeatBlockSeg = "mlx5_wqe_umr_repeat_block_seg", SIZE;
        /// byte_count: bytes one repetition maps (the sum of the entries' byte counts).
        BYTE_COUNT => byte_count / set_byte_count: u32 = (0x00, 32);
        /// op: [`OP_REPEAT_BLOCK`].
        OP => op / set_op: u32 = (0x20, 32);
        /// repeat_count: repetitions of the entry list.
        REPEAT_COUNT => repeat_count / set_repeat_count: u32 = (0x40, 32);
        /// num_ent: entries after the header.
        NUM_ENT => num_ent / set_num_ent: u16 = (0x70, 16);
    }

    impl RepeatBlockSeg {
        /// Decode the header and its `num_ent` entries from the start of `buf`.
        pub fn decode_with_entries(buf: &[u8]) -> Result<(Self, Vec<RepeatEntSeg>), FieldError> {
            let header = Self::decode(buf)?;
            let rest = buf.get(SIZE..).unwrap_or_default();
            let entries =
                crate::prm::decode_array(rest, usize::from(header.num_ent), "mlx5_wqe_umr_repeat_ent_seg list")?;
            Ok((header, entries))
        }
    }
}

/// `mlx5_wqe_umr_repeat_ent_seg`: one entry of a repeat block (16 bytes).
pub mod repeat_ent {
    use crate::prm::view::layout;

    /// Size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// A repeat block entry: repetition `r` maps `byte_count` bytes at `va + r * stride`.
        struct RepeatEntSeg = "mlx5_wqe_umr_repeat_ent_seg", SIZE;
        /// stride: bytes between repetitions (rdma-core: `bytes_count + bytes_skip`, cut to
        /// 16 bits).
        STRIDE => stride / set_stride: u16 = (0x00, 16);
        /// byte_count: bytes mapped per repetition (cut to 16 bits by rdma-core).
        BYTE_COUNT => byte_count / set_byte_count: u16 = (0x10, 16);
        /// memkey: the key of the memory.
        MEMKEY => memkey / set_memkey: u32 = (0x20, 32);
        /// va: virtual address of the first repetition.
        VA => va / set_va: u64 = (0x40, 64);
    }
}
