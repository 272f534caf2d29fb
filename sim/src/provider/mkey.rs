//! mkeys: `mlx5dv_create_mkey` (its checks in order, the PSVs, the CREATE_MKEY mailbox and
//! unwinding), `mlx5dv_destroy_mkey` (memory PSV first), and `mlx5dv_mkey_check` with the
//! decoder of stored signature errors.

use mlx5_dv::errno::{EINVAL, EOPNOTSUPP};
use mlx5_dv::prm::{self, Field, opcode};
use mlx5_dv::{Error, Mkey, MkeyErr, MkeyErrType, MkeyInitAttr, MkeyInitFlags, Op, Result, SigErr, crypto_cap};

use super::{CtxKind, Lower, MkeyObj, Provider};
use crate::device::Device;
use crate::kernel::{self, DevxUid, cmd_error, internal};

/// Signature error syndrome bits in a SIG_ERR CQE.
pub mod sigerr_syndrome {
    /// Reference tag mismatch.
    pub const REFTAG: u16 = 1 << 11;
    /// Application tag mismatch.
    pub const APPTAG: u16 = 1 << 12;
    /// Guard mismatch.
    pub const GUARD: u16 = 1 << 13;
}

/// The signature type configured in one domain of a signature mkey.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SigDomainType {
    /// No signature in this domain.
    #[default]
    None,
    /// T10-DIF.
    T10dif,
    /// CRC32 or CRC32C (32-bit guard).
    Crc32,
    /// CRC64_XP10 (64-bit guard).
    Crc64,
}

/// A signature error as the provider stores it from a SIG_ERR CQE.
pub type StoredSigErr = crate::device::contract::SigErrInfo;

/// Where a signature mkey's attributes stand (`MLX5_MKEY_BSF_STATE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BsfState {
    /// Never given attributes.
    #[default]
    Init,
    /// Attributes cleared by RESET_SIG_ATTR.
    Reset,
    /// Attributes set in the WR being built.
    Updated,
    /// Attributes set by an earlier WR and kept.
    Set,
}

/// The provider's signature context of a BLOCK_SIGNATURE mkey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigCtx {
    /// Where the attributes stand.
    pub state: BsfState,
    pub(super) mem_psv: Option<u32>,
    pub(super) wire_psv: Option<u32>,
    /// An error is waiting for `mkey_check`.
    pub err_exists: bool,
    /// Errors seen plus one; its low bit goes into `expected_sigerr_count`.
    pub err_count: u32,
    /// The next configure must rewrite `expected_sigerr_count`.
    pub err_count_updated: bool,
    /// The last stored error.
    pub err: StoredSigErr,
    /// Configured memory-domain signature.
    pub mem: SigDomainType,
    /// Configured wire-domain signature.
    pub wire: SigDomainType,
    /// The attributes of the last signature setter.
    pub attr: Option<mlx5_dv::SigBlockAttr>,
}

impl SigCtx {
    /// The state change a configure WR makes (`mlx5_send_wr_mkey_configure`).
    pub(super) fn on_configure(&mut self, reset: bool) {
        if reset {
            self.mem = SigDomainType::None;
            self.wire = SigDomainType::None;
            self.attr = None;
            self.state = BsfState::Reset;
        } else {
            self.state = match self.state {
                BsfState::Updated => BsfState::Set,
                BsfState::Reset => BsfState::Init,
                s => s,
            };
        }
    }

    /// Take the attributes of `mlx5dv_wr_set_mkey_sig_block`.
    pub(super) fn set_attr(&mut self, attr: mlx5_dv::SigBlockAttr) {
        let ty = |d: &Option<mlx5_dv::SigBlockDomain>| match d {
            None => SigDomainType::None,
            Some(d) if d.sig_type == mlx5_dv::sig::TYPE_T10DIF => SigDomainType::T10dif,
            Some(d) if d.crc.crc_type == mlx5_dv::sig::CRC64_XP10 => SigDomainType::Crc64,
            Some(_) => SigDomainType::Crc32,
        };
        self.mem = ty(&attr.mem);
        self.wire = ty(&attr.wire);
        self.attr = Some(attr);
        self.state = BsfState::Updated;
    }

    /// True if the mkey carries signature attributes (its BSF stays enabled).
    pub(super) fn has_attributes(&self) -> bool {
        matches!(self.state, BsfState::Updated | BsfState::Set)
    }
}

// Inlined so the constant field's checks fold away: these writes are the control path's bulk.
#[inline(always)]
fn put(op: Op, buf: &mut [u8], f: Field, v: u64) -> Result<()> {
    f.set(buf, v).map_err(|e| internal(op, e))
}

impl Provider {
    /// `mlx5dv_create_mkey`.
    pub(crate) fn create_mkey(&mut self, low: &mut Lower<'_>, attr: &MkeyInitAttr) -> Result<Mkey> {
        let op = Op::CreateMkey;
        let pd = self.pds.get(attr.pd, op)?;
        let (ctx, pdn) = (pd.ctx, pd.pdn);
        let c = self.contexts.get(ctx, op).map_err(|_| Error::new(op, EINVAL, "the PD's context is closed"))?;
        let (devx, update_tag) = match c.kind {
            CtxKind::Kernel { devx, update_tag } => (devx, update_tag),
            CtxKind::Vfio => return Err(Error::new(op, EOPNOTSUPP, "VFIO contexts have no create_mkey op")),
            CtxKind::Other => return Err(Error::new(op, EOPNOTSUPP, "not an mlx5 context")),
        };
        let (caps, dev_index) = (c.caps, c.dev);
        let pdn = pdn.ok_or_else(|| Error::new(op, EINVAL, "the PD has no device PD number"))?;
        let flags = attr.create_flags;
        if flags.is_empty() {
            return Err(Error::new(op, EOPNOTSUPP, "create_flags is 0"));
        }
        let mut allowed = MkeyInitFlags::INDIRECT
            | MkeyInitFlags::BLOCK_SIGNATURE
            | MkeyInitFlags::CRYPTO
            | MkeyInitFlags::REMOTE_INVALIDATE;
        if update_tag {
            allowed |= MkeyInitFlags::UPDATE_TAG;
        }
        let unknown = flags.bits() & !allowed.bits();
        if unknown != 0 {
            let why = if unknown == MkeyInitFlags::UPDATE_TAG.bits() {
                "UPDATE_TAG requested but the kernel lacks mkey tag update".to_string()
            } else {
                format!("unsupported create_flags bits 0x{unknown:x}")
            };
            return Err(Error::new(op, EOPNOTSUPP, why));
        }
        let dev = low.devices.get_mut(dev_index).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;

        // The memory and wire PSVs, on the stack: `made` of them exist.
        let mut slots = [0u32; 2];
        let mut made = 0;
        if flags.contains(MkeyInitFlags::BLOCK_SIGNATURE) {
            if caps.sig.block_prot == 0 {
                return Err(Error::new(op, EOPNOTSUPP, "BLOCK_SIGNATURE needs signature caps"));
            }
            for _ in 0..2 {
                match create_psv(dev, devx, pdn) {
                    Ok(p) => {
                        if let Some(slot) = slots.get_mut(made) {
                            *slot = p;
                        }
                        made += 1;
                    }
                    Err(e) => return Err(unwind_psvs(dev, slots.get(..made).unwrap_or_default(), e)),
                }
            }
        }
        let psvs = slots.get(..made).unwrap_or_default();
        if flags.contains(MkeyInitFlags::CRYPTO)
            && caps.crypto.crypto_engines
                & (crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK | crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK)
                == 0
        {
            let e = Error::new(op, EOPNOTSUPP, "CRYPTO needs an AES-XTS single- or multi-block engine");
            return Err(unwind_psvs(dev, psvs, e));
        }

        let num_desc = round_max_entries(attr.max_entries);
        let mut input = [0u8; prm::create_mkey::IN_SIZE];
        let created = build_create_mkey(op, flags, pdn, num_desc, &mut input).and_then(|()| {
            let mut out = [0u8; prm::create_mkey::OUT_SIZE];
            kernel::devx_cmd(dev, devx, &mut input, &mut out)
                .map_err(|e| cmd_error(op, kernel::cmd_status_err(e, &out), &out, "CREATE_MKEY"))?;
            prm::create_mkey::OUT_MKEY_INDEX.get(&out).map(|i| i as u32).map_err(|e| internal(op, e))
        });
        let index = match created {
            Ok(i) => i,
            Err(e) => return Err(unwind_psvs(dev, psvs, e)),
        };
        let sig = match psvs {
            [mem, wire] => Some(SigCtx {
                state: BsfState::Init,
                mem_psv: Some(*mem),
                wire_psv: Some(*wire),
                err_exists: false,
                err_count: 1,
                err_count_updated: true,
                err: StoredSigErr::default(),
                mem: SigDomainType::None,
                wire: SigDomainType::None,
                attr: None,
            }),
            _ => None,
        };
        let crypto = flags.contains(MkeyInitFlags::CRYPTO);
        let crypto_ctx = crypto.then(super::MkeyCrypto::default);
        let obj = MkeyObj { ctx, pd: attr.pd, dev: dev_index, index, sig, length: 0, num_desc, crypto, crypto_ctx };
        let handle = self.mkeys.insert(op, obj)?;
        self.pds.acquire(attr.pd, op)?;
        let key = index << 8;
        Ok(Mkey { handle, lkey: key, rkey: key, max_entries: num_desc })
    }

    /// `mlx5dv_destroy_mkey`: the PSVs (memory first), then the mkey; a failure keeps what
    /// is left.
    pub(crate) fn destroy_mkey(&mut self, low: &mut Lower<'_>, mkey: &Mkey) -> Result<()> {
        let op = Op::DestroyMkey;
        // Only what the destroys need, not a clone of the whole object.
        let m = self.mkeys.get(mkey.handle, op)?;
        let (dev_index, index, pd) = (m.dev, m.index, m.pd);
        let psvs = m.sig.as_ref().map(|s| (s.mem_psv, s.wire_psv));
        let dev = low.devices.get_mut(dev_index).ok_or_else(|| Error::new(op, EINVAL, "no such device"))?;
        if let Some((mem_psv, wire_psv)) = psvs {
            if let Some(p) = mem_psv {
                kernel::destroy_psv(dev, p, op)?;
                if let Some(s) = self.mkeys.get_mut(mkey.handle, op)?.sig.as_mut() {
                    s.mem_psv = None;
                }
            }
            if let Some(p) = wire_psv {
                kernel::destroy_psv(dev, p, op)?;
                if let Some(s) = self.mkeys.get_mut(mkey.handle, op)?.sig.as_mut() {
                    s.wire_psv = None;
                }
            }
        }
        // With its PSVs gone the signature context is freed: should DESTROY_MKEY fail, what
        // survives is a plain mkey (_mlx5dv_destroy_mkey).
        let left = self.mkeys.get_mut(mkey.handle, op)?;
        left.sig = None;
        kernel::destroy_mkey(dev, index, op)?;
        self.mkeys.discard(mkey.handle, op)?;
        self.pds.release(pd);
        Ok(())
    }

    /// `mlx5dv_mkey_check`.
    pub(crate) fn mkey_check(&mut self, mkey: &Mkey) -> Result<MkeyErr> {
        let op = Op::MkeyCheck;
        let sig = self
            .mkeys
            .get_mut(mkey.handle, op)?
            .sig
            .as_mut()
            .ok_or_else(|| Error::new(op, EINVAL, "the mkey was not created with BLOCK_SIGNATURE"))?;
        if !sig.err_exists {
            return Ok(MkeyErr::NONE);
        }
        let decoded = decode_sig_err(&sig.err, sig.mem, sig.wire).map_err(|why| Error::new(op, EINVAL, why))?;
        sig.err_exists = false;
        Ok(decoded)
    }

    /// The signature context of a live mkey (test views).
    #[cfg(feature = "test-utils")]
    pub(crate) fn sig_ctx_mut(&mut self, mkey: &Mkey) -> Option<&mut SigCtx> {
        self.mkeys.get_mut(mkey.handle, Op::MkeyCheck).ok()?.sig.as_mut()
    }

    /// A SIG_ERR CQE reached the provider (`mlx5_parse_cqe`): store it on the mkey with this
    /// index; false if no mkey of the device has it.
    pub(super) fn take_sig_err(&mut self, dev: usize, index: u32, err: StoredSigErr) -> bool {
        let Some(s) =
            self.mkeys.iter_mut().find(|(_, m)| m.dev == dev && m.index == index).and_then(|(_, m)| m.sig.as_mut())
        else {
            return false;
        };
        s.err_exists = true;
        s.err_count = s.err_count.wrapping_add(1);
        s.err_count_updated = true;
        s.err = err;
        true
    }
}

fn create_psv(dev: &mut Device, uid: DevxUid, pdn: u32) -> Result<u32> {
    let op = Op::CreateMkey;
    let mut input = [0u8; prm::create_psv::IN_SIZE];
    prm::write_header(&mut input, opcode::CREATE_PSV, 0, 0);
    put(op, &mut input, prm::create_psv::NUM_PSV, 1)?;
    put(op, &mut input, prm::create_psv::PD, u64::from(pdn))?;
    let mut out = [0u8; prm::create_psv::OUT_SIZE];
    kernel::devx_cmd(dev, uid, &mut input, &mut out)
        .map_err(|e| cmd_error(op, kernel::cmd_status_err(e, &out), &out, "CREATE_PSV"))?;
    prm::create_psv::OUT_PSV_INDEX[0].get(&out).map(|v| v as u32).map_err(|e| internal(op, e))
}

/// Undo PSVs created part-way through a failed `create_mkey` as `mlx5_destroy_sig_psvs`
/// does: memory PSV first, then wire, stopping at the first failure.
/// Destroy the PSVs created so far, memory first. The caller's error stands unless a cleanup
/// destroy fails: then errno is that destroy's, as in `_mlx5dv_create_mkey`.
fn unwind_psvs(dev: &mut Device, psvs: &[u32], err: Error) -> Error {
    for &p in psvs {
        if let Err(e) = kernel::destroy_psv(dev, p, Op::CreateMkey) {
            return e;
        }
    }
    err
}

/// The CREATE_MKEY input, written into the caller's zeroed mailbox (not returned by value:
/// that would copy it).
fn build_create_mkey(
    op: Op,
    flags: MkeyInitFlags,
    pdn: u32,
    num_desc: u16,
    input: &mut [u8; prm::create_mkey::IN_SIZE],
) -> Result<()> {
    use prm::mkc;
    let input = &mut input[..];
    prm::write_header(input, opcode::CREATE_MKEY, 0, 0);
    let at = |f: Field| f.at(prm::create_mkey::MKC_BIT);
    let sig = flags.contains(MkeyInitFlags::BLOCK_SIGNATURE);
    let crypto = flags.contains(MkeyInitFlags::CRYPTO);
    put(op, input, at(mkc::ACCESS_MODE_1_0), mkc::ACCESS_MODE_KLMS)?;
    put(op, input, at(mkc::FREE), 1)?;
    put(op, input, at(mkc::UMR_EN), 1)?;
    put(op, input, at(mkc::LR), 1)?;
    put(op, input, at(mkc::PD), u64::from(pdn))?;
    put(op, input, at(mkc::QPN), 0xff_ffff)?;
    put(op, input, at(mkc::MKEY_7_0), 0)?;
    put(op, input, at(mkc::TRANSLATIONS_OCTWORD_SIZE), u64::from(num_desc))?;
    if crypto {
        put(op, input, at(mkc::CRYPTO_EN), 1)?;
    }
    if sig || crypto {
        let bsf_bytes = 64 * (u64::from(sig) + u64::from(crypto));
        put(op, input, at(mkc::BSF_EN), 1)?;
        put(op, input, at(mkc::BSF_OCTWORD_SIZE), bsf_bytes / 16)?;
    }
    if flags.contains(MkeyInitFlags::REMOTE_INVALIDATE) {
        put(op, input, at(mkc::EN_RINVAL), 1)?;
    }
    Ok(())
}

/// `align(max_entries, 4)` into a `uint16_t`, as the provider computes it: 65533..=65535 wrap
/// to 0.
pub fn round_max_entries(max_entries: u16) -> u16 {
    ((u32::from(max_entries) + 3) & !3) as u16
}

/// `_mlx5dv_mkey_check`'s decoding of a stored error, given the domain types configured now.
pub fn decode_sig_err(
    err: &StoredSigErr,
    mem: SigDomainType,
    wire: SigDomainType,
) -> std::result::Result<MkeyErr, &'static str> {
    use sigerr_syndrome::*;
    if err.syndrome & (REFTAG | APPTAG | GUARD) == 0 {
        return Err("the stored syndrome has no REFTAG, APPTAG or GUARD bit");
    }
    if err.sig_type != 0 {
        return Err("the stored error is not a block signature error");
    }
    let domain = match err.domain {
        0 => wire,
        1 => mem,
        _ => return Err("the stored error names an unknown domain"),
    };
    if domain == SigDomainType::None {
        return Err("the error's domain has no signature configured now");
    }
    let (err_type, pick): (MkeyErrType, fn(u64, SigDomainType) -> u64) = if err.syndrome & REFTAG != 0 {
        (MkeyErrType::SigBlockBadReftag, |v, _| v & 0xffff_ffff)
    } else if err.syndrome & APPTAG != 0 {
        (MkeyErrType::SigBlockBadApptag, |v, _| (v >> 32) & 0xffff)
    } else {
        (MkeyErrType::SigBlockBadGuard, |v, d| match d {
            SigDomainType::T10dif => v >> 48,
            SigDomainType::Crc64 => v,
            _ => v >> 32,
        })
    };
    Ok(MkeyErr {
        err_type,
        sig: SigErr {
            actual_value: pick(err.actual, domain),
            expected_value: pick(err.expected, domain),
            offset: err.offset,
        },
    })
}
