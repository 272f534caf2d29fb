//! Memory windows as uverbs and mlx5_ib make them: `ib_uverbs_alloc_mw`'s type check and
//! `mlx5_ib_alloc_mw`'s free KLM mkey (umr_en, local read, remote invalidation for type 2,
//! no QP), offered only on a device with `imaicl`.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, opcode};
use mlx5_dv::{Error, MW_TYPE_1, MW_TYPE_2, Op, Result};

use super::{Kernel, cmd_error, internal, kernel_cmd};
use crate::device::Device;

/// `imaicl` of the device's general capabilities: mlx5_ib installs its memory window verbs
/// (and advertises `IBV_DEVICE_MEM_WINDOW`) only with it.
pub fn has_memory_windows(dev: &mut Device, op: Op) -> Result<bool> {
    use prm::query_hca_cap as q;
    let input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, 1);
    let mut out = vec![0u8; q::CAPABILITY_BYTE + q::CAPABILITY_SIZE];
    kernel_cmd(dev, &input, &mut out).map_err(|e| cmd_error(op, e, &out, "QUERY_HCA_CAP (general)"))?;
    let page = &out[q::CAPABILITY_BYTE..];
    Ok(prm::cmd_hca_cap::IMAICL.get(page).map_err(|e| internal(op, e))? != 0)
}

impl Kernel {
    /// `ibv_alloc_mw`: EOPNOTSUPP without the driver's memory window verbs, EINVAL for a type
    /// other than 1 or 2, then CREATE_MKEY of a free KLM mkey with four translation
    /// octowords and the next key variant; its index and variant.
    pub fn alloc_mw(&mut self, dev: &mut Device, dev_index: usize, pdn: u32, mw_type: u32) -> Result<(u32, u8)> {
        use prm::mkc;
        let op = Op::AllocMw;
        if !has_memory_windows(dev, op)? {
            return Err(Error::new(op, EOPNOTSUPP, "the device has no memory windows (imaicl is 0)"));
        }
        if mw_type != MW_TYPE_1 && mw_type != MW_TYPE_2 {
            return Err(Error::new(op, EINVAL, format!("memory window type {mw_type}")));
        }
        let fields = [
            (mkc::FREE, 1),
            (mkc::TRANSLATIONS_OCTWORD_SIZE, 4),
            (mkc::PD, u64::from(pdn)),
            (mkc::UMR_EN, 1),
            (mkc::LR, 1),
            (mkc::ACCESS_MODE_1_0, mkc::ACCESS_MODE_KLMS),
            (mkc::EN_RINVAL, u64::from(mw_type == MW_TYPE_2)),
            (mkc::QPN, 0xff_ffff),
        ];
        self.create_plain_mkey(dev, dev_index, &fields, (op, "CREATE_MKEY (memory window)"))
    }
}
