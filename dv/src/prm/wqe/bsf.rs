//! `struct mlx5_bsf`: the 64-byte signature BSF a UMR appends after the translations
//! (rdma-core `providers/mlx5/wqe.h`): a basic part, an extended (transaction) part, and an
//! inline T10-DIF part for each of the wire and memory domains.
//!
//! What rdma-core fills (`mlx5_umr_fill_sig_bsf`): the size (`WITH_INLINE`, or
//! `SIG_AND_CRYPTO` when a crypto BSF follows), `raw_data_size` all ones, the check mask, and
//! per domain with a signature its PSV index, block-size selector and either a CRC block
//! format selector or the inline T10-DIF part; with the same block structure on both sides
//! (`sbs`) the wire byte carries the copy mask instead of the wire block size. The extended
//! part stays zero.

use crate::prm::{Codec, FieldError};

/// Size in bytes of the whole BSF.
pub const SIZE: usize = 64;

/// `MLX5_BSF_SIZE_*`: values of the 2-bit `bsf_size`.
pub mod bsf_size {
    /// Basic part only.
    pub const BASIC: u8 = 0;
    /// Basic and extended parts.
    pub const EXTENDED: u8 = 1;
    /// All 64 bytes, inline parts included (what a signature mkey uses).
    pub const WITH_INLINE: u8 = 2;
    /// A signature BSF followed by a 64-byte crypto BSF.
    pub const SIG_AND_CRYPTO: u8 = 3;
}

/// `MLX5_BFS_*`: the block format selector of a CRC domain (the top byte of `*_bfs_psv`).
pub mod bfs {
    /// CRC32.
    pub const CRC32_BASE: u8 = 0x20;
    /// CRC32C.
    pub const CRC32C_BASE: u8 = 0x40;
    /// CRC64-XP10.
    pub const CRC64_XP10_BASE: u8 = 0x50;
    /// The signature repeats for every block (always set by rdma-core).
    pub const CRC_REPEAT_BIT: u8 = 0x2;
    /// Set when the CRC seed is zero (rather than all ones).
    pub const CRC_SEED_BIT: u8 = 0x1;
}

/// Block-size selectors, indexed by `enum mlx5dv_block_size` (512, 520, 4048, 4096, 4160).
pub const BS_SELECTOR: [u8; 5] = [1, 2, 6, 3, 4];

/// The block-size selector of an `mlx5dv_block_size` value, or `None` for an unknown one.
pub fn bs_selector(block_size: u32) -> Option<u8> {
    BS_SELECTOR.get(usize::try_from(block_size).ok()?).copied()
}

/// `MLX5_T10DIF_*`: the inline part's `sig_type`.
pub mod t10dif {
    /// The guard is the T10-DIF CRC.
    pub const CRC: u8 = 0x1;
    /// The guard is the IP checksum.
    pub const IPCS: u8 = 0x2;
}

/// `raw_data_size` as rdma-core writes it: unbounded.
pub const RAW_DATA_SIZE_ANY: u32 = u32::MAX;

/// `struct mlx5_bsf_basic` (bytes 0..16).
pub mod basic {
    use crate::prm::view::layout;

    /// Size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// The basic part.
        struct BsfBasic = "mlx5_bsf_basic", SIZE;
        /// bsf_size: one of [`bsf_size`](super::bsf_size) (`MLX5_BSF_SIZE_SHIFT` 6).
        BSF_SIZE => bsf_size / set_bsf_size: u8 = (0x00, 2);
        /// sbs: same block structure on wire and memory (`MLX5_BSF_SBS_SHIFT` 4).
        SBS => sbs / set_sbs: bool = (0x03, 1);
        /// check_byte_mask: which bytes of the 8-byte signature are checked.
        CHECK_BYTE_MASK => check_byte_mask / set_check_byte_mask: u8 = (0x08, 8);
        /// wire: the copy byte mask when `sbs`, otherwise the wire block-size selector.
        WIRE => wire / set_wire: u8 = (0x10, 8);
        /// mem_bs_selector: the memory block-size selector.
        MEM_BS_SELECTOR => mem_bs_selector / set_mem_bs_selector: u8 = (0x18, 8);
        /// raw_data_size.
        RAW_DATA_SIZE => raw_data_size / set_raw_data_size: u32 = (0x20, 32);
        /// w_bfs: the wire block format selector (top byte of `w_bfs_psv`).
        W_BFS => w_bfs / set_w_bfs: u8 = (0x40, 8);
        /// w_psv: the wire PSV index.
        W_PSV => w_psv / set_w_psv: u32 = (0x48, 24);
        /// m_bfs: the memory block format selector (top byte of `m_bfs_psv`).
        M_BFS => m_bfs / set_m_bfs: u8 = (0x60, 8);
        /// m_psv: the memory PSV index.
        M_PSV => m_psv / set_m_psv: u32 = (0x68, 24);
    }
}

/// `struct mlx5_bsf_ext` (bytes 16..32): transaction signatures, unused by rdma-core.
pub mod ext {
    use crate::prm::view::layout;

    /// Size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// The extended part.
        struct BsfExt = "mlx5_bsf_ext", SIZE;
        /// t_init_gen_pro_size: transaction init/generate bits and protection size.
        T_INIT_GEN_PRO_SIZE => t_init_gen_pro_size / set_t_init_gen_pro_size: u32 = (0x00, 32);
        /// w_tfs: the wire transaction format selector.
        W_TFS => w_tfs / set_w_tfs: u8 = (0x40, 8);
        /// w_tfs_psv: the wire transaction PSV index.
        W_TFS_PSV => w_tfs_psv / set_w_tfs_psv: u32 = (0x48, 24);
        /// m_tfs: the memory transaction format selector.
        M_TFS => m_tfs / set_m_tfs: u8 = (0x60, 8);
        /// m_tfs_psv: the memory transaction PSV index.
        M_TFS_PSV => m_tfs_psv / set_m_tfs_psv: u32 = (0x68, 24);
    }
}

/// `struct mlx5_bsf_inl` (bytes 32..48 for the wire, 48..64 for memory): a T10-DIF domain.
pub mod inl {
    use crate::prm::view::layout;

    /// Size in bytes.
    pub const SIZE: usize = 16;

    layout! {
        /// An inline T10-DIF part.
        struct BsfInl = "mlx5_bsf_inl", SIZE;
        /// vld: the part is valid (`MLX5_BSF_INL_VALID`, bit 15 of `vld_refresh`).
        VLD => vld / set_vld: bool = (0x00, 1);
        /// refresh: the device may refresh the DIF (`MLX5_BSF_REFRESH_DIF`, bit 14).
        REFRESH => refresh / set_refresh: bool = (0x01, 1);
        /// dif_apptag: the application tag.
        DIF_APPTAG => dif_apptag / set_dif_apptag: u16 = (0x10, 16);
        /// dif_reftag: the reference tag of the first block.
        DIF_REFTAG => dif_reftag / set_dif_reftag: u32 = (0x20, 32);
        /// sig_type: one of [`t10dif`](super::t10dif).
        SIG_TYPE => sig_type / set_sig_type: u8 = (0x40, 8);
        /// repeat_block: the DIF repeats for every block (`MLX5_BSF_REPEAT_BLOCK`, bit 7 of
        /// `rp_inv_seed`).
        REPEAT_BLOCK => repeat_block / set_repeat_block: bool = (0x48, 1);
        /// seed: the guard is seeded (`MLX5_BSF_SEED`, bit 3), set when `bg` is non-zero.
        SEED => seed / set_seed: bool = (0x4c, 1);
        /// inc_reftag: the reference tag increments per block (`MLX5_BSF_INC_REFTAG`, bit 6
        /// of `dif_inc_ref_guard_check`).
        INC_REFTAG => inc_reftag / set_inc_reftag: bool = (0x69, 1);
        /// appref_escape: skip blocks whose app and ref tags are all ones
        /// (`MLX5_BSF_APPREF_ESCAPE`, bit 1).
        APPREF_ESCAPE => appref_escape / set_appref_escape: bool = (0x6e, 1);
        /// apptag_escape: skip blocks whose app tag is all ones (`MLX5_BSF_APPTAG_ESCAPE`,
        /// bit 0).
        APPTAG_ESCAPE => apptag_escape / set_apptag_escape: bool = (0x6f, 1);
        /// dif_app_bitmask_check: which app tag bits are checked (rdma-core: 0xffff).
        DIF_APP_BITMASK_CHECK => dif_app_bitmask_check / set_dif_app_bitmask_check: u16 = (0x70, 16);
    }
}

pub use basic::BsfBasic;
pub use ext::BsfExt;
pub use inl::BsfInl;

/// Byte offset of each part.
const BASIC_AT: usize = 0;
const EXT_AT: usize = 16;
const W_INL_AT: usize = 32;
const M_INL_AT: usize = 48;

/// The whole signature BSF, part by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Bsf {
    /// Bytes 0..16.
    pub basic: BsfBasic,
    /// Bytes 16..32.
    pub ext: BsfExt,
    /// Bytes 32..48: the wire domain's T10-DIF.
    pub w_inl: BsfInl,
    /// Bytes 48..64: the memory domain's T10-DIF.
    pub m_inl: BsfInl,
}

impl Bsf {
    /// The BSF as bytes, reserved bits zero; fails if a member is wider than its field.
    pub fn to_bytes(&self) -> Result<[u8; SIZE], FieldError> {
        let mut out = [0u8; SIZE];
        let (basic, rest) = out.split_at_mut(EXT_AT);
        let (ext, rest) = rest.split_at_mut(W_INL_AT - EXT_AT);
        let (w_inl, m_inl) = rest.split_at_mut(M_INL_AT - W_INL_AT);
        self.basic.encode(basic)?;
        self.ext.encode(ext)?;
        self.w_inl.encode(w_inl)?;
        self.m_inl.encode(m_inl)?;
        Ok(out)
    }

    /// Write the BSF into the first 64 bytes of `out`; on error `out` is left untouched.
    pub fn encode(&self, out: &mut [u8]) -> Result<(), FieldError> {
        let len = out.len();
        let head = out.get_mut(..SIZE).ok_or(FieldError::TooShort { layout: "mlx5_bsf", need: SIZE, len })?;
        head.copy_from_slice(&self.to_bytes()?);
        Ok(())
    }

    /// Read the BSF from the first 64 bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self, FieldError> {
        let len = buf.len();
        let bsf = buf.get(..SIZE).ok_or(FieldError::TooShort { layout: "mlx5_bsf", need: SIZE, len })?;
        let part = |at: usize| bsf.get(at..).unwrap_or_default();
        Ok(Bsf {
            basic: BsfBasic::decode(part(BASIC_AT))?,
            ext: BsfExt::decode(part(EXT_AT))?,
            w_inl: BsfInl::decode(part(W_INL_AT))?,
            m_inl: BsfInl::decode(part(M_INL_AT))?,
        })
    }

    /// Every field as `(part, field, value)`, for logs.
    pub fn describe(buf: &[u8]) -> Result<Vec<(&'static str, &'static str, u64)>, FieldError> {
        use crate::prm::View;
        let len = buf.len();
        let bsf = buf.get(..SIZE).ok_or(FieldError::TooShort { layout: "mlx5_bsf", need: SIZE, len })?;
        let part = |at: usize| bsf.get(at..).unwrap_or_default();
        let tag = |name: &'static str, pairs: Vec<(&'static str, u64)>| {
            pairs.into_iter().map(move |(f, v)| (name, f, v)).collect::<Vec<_>>()
        };
        let mut all = tag("basic", View::<BsfBasic>::new(part(BASIC_AT))?.decode());
        all.extend(tag("ext", View::<BsfExt>::new(part(EXT_AT))?.decode()));
        all.extend(tag("w_inl", View::<BsfInl>::new(part(W_INL_AT))?.decode()));
        all.extend(tag("m_inl", View::<BsfInl>::new(part(M_INL_AT))?.decode()));
        Ok(all)
    }
}

impl Codec for Bsf {
    const SIZE: usize = SIZE;
    fn decode(buf: &[u8]) -> Result<Self, FieldError> {
        Bsf::decode(buf)
    }
    fn encode(&self, out: &mut [u8]) -> Result<(), FieldError> {
        Bsf::encode(self, out)
    }
}
