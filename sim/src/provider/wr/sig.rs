//! `mlx5dv_wr_set_mkey_sig_block`: the setter's checks, the domain validation, the BSF's
//! view of the attributes, and the PSVs' transient signatures.

use mlx5_dv::SigBlockAttr;
use mlx5_dv::errno::EINVAL;

use super::super::{BsfState, Provider};
use super::Chain;

impl Provider {
    /// `mlx5_send_wr_set_mkey_sig_block`: the checks of docs/behaviour.md items 33-34, in order,
    /// each EINVAL.
    pub(super) fn set_sig(&mut self, ch: &mut Chain, attr: &SigBlockAttr) {
        if ch.err != 0 {
            return;
        }
        let Some(open) = &mut ch.open else {
            ch.err = EINVAL;
            return;
        };
        let Some(sig) = self.mkeys.get_mut(open.mkey, mlx5_dv::Op::PostSend).ok().and_then(|m| m.sig.as_mut()) else {
            ch.err = EINVAL;
            return;
        };
        if sig.state == BsfState::Updated
            || (attr.mem.is_none() && attr.wire.is_none())
            || !mlx5_dv::sig::ATTR_FLAG_COPY_MASK.contains(attr.flags)
            || attr.comp_mask != 0
            || ![attr.mem, attr.wire].iter().flatten().all(valid_domain)
        {
            ch.err = EINVAL;
            return;
        }
        sig.set_attr(*attr);
        open.done += 1;
        if open.done == open.expected {
            self.finalize(ch);
        }
    }
}

/// `psv_transient_signature`: the PSV's initial value for a domain.
pub(super) fn transient_signature(d: &mlx5_dv::SigBlockDomain) -> u64 {
    if d.sig_type == mlx5_dv::sig::TYPE_T10DIF {
        u64::from(d.dif.bg) << 48 | u64::from(d.dif.app_tag) << 32 | u64::from(d.dif.ref_tag)
    } else if d.crc.crc_type == mlx5_dv::sig::CRC64_XP10 {
        d.crc.seed
    } else {
        d.crc.seed << 32
    }
}

/// `mlx5_validate_sig_block_domain`: block size, comp_mask, type and its parameters. Not
/// checked against the device's signature caps.
fn valid_domain(d: &mlx5_dv::SigBlockDomain) -> bool {
    use mlx5_dv::sig;
    if d.block_size > sig::BLOCK_4160 || d.comp_mask != 0 {
        return false;
    }
    match d.sig_type {
        sig::TYPE_T10DIF => {
            (d.dif.bg == 0 || d.dif.bg == 0xffff)
                && (d.dif.bg_type == sig::BG_CRC || d.dif.bg_type == sig::BG_CSUM)
                && mlx5_dv::T10difFlags::all().contains(d.dif.flags)
        }
        sig::TYPE_CRC => match d.crc.crc_type {
            sig::CRC32 | sig::CRC32C => d.crc.seed == 0 || d.crc.seed == 0xffff_ffff,
            sig::CRC64_XP10 => d.crc.seed == 0 || d.crc.seed == u64::MAX,
            _ => false,
        },
        _ => false,
    }
}

/// `mlx5_umr_fill_sig_bsf`: the BSF's view of the attributes. With a wire signature, the same
/// block structure decides the copy mask; COPY_MASK without it is EINVAL.
pub(super) fn sig_config(attr: &SigBlockAttr) -> std::result::Result<crate::signature::SigConfig, i32> {
    use crate::signature::{Domain, SigConfig, automatic_copy_mask, same_block_structure};
    let mem = attr.mem.as_ref().and_then(Domain::from_attr);
    let wire = attr.wire.as_ref().and_then(Domain::from_attr);
    let mut cfg = SigConfig { mem, wire, check_mask: attr.check_mask, copy_mask: 0, sbs: false };
    if let Some(w) = wire {
        cfg.sbs = mem.is_some_and(|m| same_block_structure(&m, &w));
        if attr.flags.intersects(mlx5_dv::sig::ATTR_FLAG_COPY_MASK) {
            if !cfg.sbs {
                return Err(EINVAL);
            }
            cfg.copy_mask = attr.copy_mask;
        } else if let (true, Some(m)) = (cfg.sbs, mem) {
            cfg.copy_mask = automatic_copy_mask(&m, &w);
        }
    }
    Ok(cfg)
}
