//! The CQ capabilities mlx5_ib reads from the general capability page: CQE compression
//! (`cqe_comp_caps` and `MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_COMP` in its query response),
//! 128-byte padding, and the checks `create_cq_user` makes of a CQ that asks for them.
//!
//! A compressed CQ is accepted and created with `cqe_comp_en`; the simulated device writes
//! every CQE whole (it never opens a compression session), which is what a device does when
//! no CQEs are waiting to be merged.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, opcode};
use mlx5_dv::{CqeCompCaps, Error, Op, Result, dv_context_flags, dv_cq};

use super::{cmd_error, internal, kernel_cmd};
use crate::device::Device;

/// The general page's CQ bits, as mlx5_ib's `MLX5_CAP_GEN` reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CqCaps {
    /// `cqe_compression`: 64-byte CQEs may be compressed.
    pub compression: bool,
    /// `cqe_compression_128b`.
    pub compression_128: bool,
    /// `cqe_compression_max_num`.
    pub max_num: u16,
    /// `mini_cqe_resp_stride_index`.
    pub stride_index: bool,
    /// `cqe_128_always`: 128-byte CQEs may be padded.
    pub pad_128: bool,
}

impl CqCaps {
    /// `cqe_comp_caps` of `mlx5_ib_query_device`: `max_num` only with compression, the hash
    /// and checksum formats always, the stride index one with its bit.
    pub fn comp_caps(&self) -> CqeCompCaps {
        let mut supported_format = u32::from(dv_cq::FORMAT_HASH | dv_cq::FORMAT_CSUM);
        if self.stride_index {
            supported_format |= u32::from(dv_cq::FORMAT_CSUM_STRIDX);
        }
        CqeCompCaps { max_num: if self.compression { u32::from(self.max_num) } else { 0 }, supported_format }
    }

    /// The `MLX5DV_CONTEXT_FLAGS_*` these bits give (through the query response's flags).
    pub fn context_flags(&self) -> u64 {
        let mut f = 0;
        if self.compression_128 {
            f |= dv_context_flags::CQE_128B_COMP;
        }
        if self.pad_128 {
            f |= dv_context_flags::CQE_128B_PAD;
        }
        f
    }
}

/// QUERY_HCA_CAP (general, current) through the kernel's command interface.
pub fn cq_caps(dev: &mut Device, op: Op) -> Result<CqCaps> {
    use prm::{cmd_hca_cap as c, query_hca_cap as q};
    let input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, q::OP_MOD_GENERAL_CUR);
    let mut out = vec![0u8; q::OUT_SIZE];
    kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "QUERY_HCA_CAP (general)"))?;
    let page = &out[q::CAPABILITY_BYTE..];
    let get = |f: prm::Field| f.get(page).map_err(|e| internal(op, e));
    Ok(CqCaps {
        compression: get(c::CQE_COMPRESSION)? != 0,
        compression_128: get(c::CQE_COMPRESSION_128B)? != 0,
        max_num: get(c::CQE_COMPRESSION_MAX_NUM)? as u16,
        stride_index: get(c::MINI_CQE_RESP_STRIDE_INDEX)? != 0,
        pad_128: get(c::CQE_128_ALWAYS)? != 0,
    })
}

/// `cqc.mini_cqe_res_format` values (`MLX5_CQE_RES_FORMAT_*`).
mod hw_format {
    pub(super) const HASH: u64 = 0;
    pub(super) const CSUM: u64 = 1;
    pub(super) const CSUM_STRIDX: u64 = 3;
}

/// `create_cq_user`'s checks of compression and padding, in its order: compression of a CQE
/// size the device cannot compress is EOPNOTSUPP; the format must be exactly one known bit
/// (EINVAL), the stride index one only with its capability (EOPNOTSUPP); padding needs
/// 128-byte CQEs on a device with `cqe_128_always` (EOPNOTSUPP). The result is the
/// `mini_cqe_res_format` to create the CQ with, if compressed.
pub fn check_create(caps: &CqCaps, cqe_size: u32, compress: Option<u8>, pad: bool, op: Op) -> Result<Option<u64>> {
    let format = match compress {
        None => None,
        Some(f) => {
            let able = (cqe_size == 128 && caps.compression_128) || (cqe_size == 64 && caps.compression);
            if !able {
                return Err(Error::new(op, EOPNOTSUPP, format!("no CQE compression for {cqe_size}-byte CQEs")));
            }
            Some(match f {
                dv_cq::FORMAT_HASH => hw_format::HASH,
                dv_cq::FORMAT_CSUM => hw_format::CSUM,
                dv_cq::FORMAT_CSUM_STRIDX if caps.stride_index => hw_format::CSUM_STRIDX,
                dv_cq::FORMAT_CSUM_STRIDX => {
                    return Err(Error::new(op, EOPNOTSUPP, "no mini-CQE stride index on this device"));
                }
                other => return Err(Error::new(op, EINVAL, format!("mini-CQE format 0x{other:x} is not one format"))),
            })
        }
    };
    if pad && (cqe_size != 128 || !caps.pad_128) {
        return Err(Error::new(op, EOPNOTSUPP, format!("no CQE padding for {cqe_size}-byte CQEs")));
    }
    Ok(format)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> CqCaps {
        CqCaps { compression: true, compression_128: true, max_num: 64, stride_index: true, pad_128: true }
    }

    #[test]
    fn formats_map_to_the_cqc_values() {
        let c = all();
        assert_eq!(check_create(&c, 64, Some(dv_cq::FORMAT_HASH), false, Op::CreateDvCq).unwrap(), Some(0));
        assert_eq!(check_create(&c, 64, Some(dv_cq::FORMAT_CSUM), false, Op::CreateDvCq).unwrap(), Some(1));
        assert_eq!(check_create(&c, 128, Some(dv_cq::FORMAT_CSUM_STRIDX), false, Op::CreateDvCq).unwrap(), Some(3));
        assert_eq!(check_create(&c, 64, None, false, Op::CreateDvCq).unwrap(), None);
    }

    #[test]
    fn refusals_carry_the_kernels_errno() {
        let c = all();
        let two = dv_cq::FORMAT_HASH | dv_cq::FORMAT_CSUM;
        assert_eq!(check_create(&c, 64, Some(two), false, Op::CreateDvCq).unwrap_err().errno(), EINVAL);
        let no_128 = CqCaps { compression_128: false, ..c };
        assert_eq!(
            check_create(&no_128, 128, Some(dv_cq::FORMAT_HASH), false, Op::CreateDvCq).unwrap_err().errno(),
            EOPNOTSUPP
        );
        let no_idx = CqCaps { stride_index: false, ..c };
        assert_eq!(
            check_create(&no_idx, 64, Some(dv_cq::FORMAT_CSUM_STRIDX), false, Op::CreateDvCq).unwrap_err().errno(),
            EOPNOTSUPP
        );
        assert_eq!(check_create(&c, 64, None, true, Op::CreateDvCq).unwrap_err().errno(), EOPNOTSUPP);
        assert_eq!(check_create(&c, 128, None, true, Op::CreateDvCq).unwrap(), None);
    }

    #[test]
    fn caps_follow_the_bits() {
        let off = CqCaps { compression: false, ..all() };
        assert_eq!(off.comp_caps().max_num, 0);
        assert_eq!(all().comp_caps(), CqeCompCaps { max_num: 64, supported_format: 7 });
        let plain = CqCaps { stride_index: false, ..all() };
        assert_eq!(plain.comp_caps().supported_format, 3);
        assert_eq!(all().context_flags(), dv_context_flags::CQE_128B_COMP | dv_context_flags::CQE_128B_PAD);
    }
}
