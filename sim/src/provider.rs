//! The provider: what libmlx5 does in user space, in the order it does it, on top of the
//! kernel gate and the firmware.

use std::collections::BTreeMap;

use mlx5_dv::errno::{EBUSY, EINVAL, EIO, ENODEV, EOPNOTSUPP};
use mlx5_dv::prm::{self, Field, opcode};
use mlx5_dv::{
    Backend, BackendId, BackendInfo, CommandRecord, ContextAttr, ContextFlags, ContextHandle, Contexts, CryptoCaps,
    DeviceDesc, DeviceKind, DvContext, Error, FaultRule, KernelFacts, Memory, Mkey, MkeyErr, MkeyErrType, MkeyHandle,
    MkeyInitAttr, MkeyInitFlags, Mkeys, Op, PdHandle, Queues, Result, SigCaps, SigErr, SimControl, crypto_cap, sig_cap,
};

use crate::firmware::Firmware;
use crate::kernel::{self, DevxUid};
use crate::profile::{Profile, ShippedProfiles};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct StoredSigErr {
    /// CQE syndrome (REFTAG / APPTAG / GUARD bits).
    pub syndrome: u16,
    /// `expected_trans_sig << 32 | expected_ref_tag`.
    pub expected: u64,
    /// `actual_trans_sig << 32 | actual_ref_tag`.
    pub actual: u64,
    /// Block-boundary offset.
    pub offset: u64,
    /// CQE sig_type (0 = block).
    pub sig_type: u8,
    /// CQE domain (0 = wire, 1 = memory).
    pub domain: u8,
}

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
    mem_psv: Option<u32>,
    wire_psv: Option<u32>,
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
    pub(crate) fn on_configure(&mut self, reset: bool) {
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
    pub(crate) fn set_attr(&mut self, attr: mlx5_dv::SigBlockAttr) {
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
    pub(crate) fn has_attributes(&self) -> bool {
        matches!(self.state, BsfState::Updated | BsfState::Set)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CtxKind {
    Kernel { devx: DevxUid, update_tag: bool },
    Vfio,
    Other,
}

impl Ctx {
    pub(crate) fn kind_is_other(&self) -> bool {
        self.kind == CtxKind::Other
    }

    pub(crate) fn kind_is_kernel(&self) -> bool {
        matches!(self.kind, CtxKind::Kernel { .. })
    }

    /// The kernel reported mkey tag update for this context.
    pub(crate) fn update_tag(&self) -> bool {
        matches!(self.kind, CtxKind::Kernel { update_tag: true, .. })
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct CtxCaps {
    sig: SigCaps,
    crypto: CryptoCaps,
}

#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    kind: CtxKind,
    caps: CtxCaps,
    /// Index of the device in `Simulator::fws`.
    pub(crate) dev: usize,
    /// Asynchronous events not yet read.
    pub(crate) events: std::collections::VecDeque<mlx5_dv::AsyncEvent>,
}

#[derive(Debug, Clone)]
pub(crate) struct Pd {
    pub(crate) ctx: u32,
    pub(crate) pdn: Option<u32>,
    /// mkeys, MRs and QPs that use the PD.
    pub(crate) users: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct MkeyObj {
    ctx: u32,
    pd: u32,
    pub(crate) dev: usize,
    pub(crate) index: u32,
    pub(crate) sig: Option<SigCtx>,
    /// Zero-based length of the current layout (`mkey->length`).
    pub(crate) length: u64,
    /// `max_entries` rounded at creation (`mkey->num_desc`).
    pub(crate) num_desc: u16,
    /// Created with CRYPTO.
    pub(crate) crypto: bool,
}

/// The simulated device behind the [`Backend`] trait.
///
/// Deterministic: the same calls on the same profile give the same keys, numbers and bytes.
#[derive(Debug, Clone)]
pub struct Simulator {
    pub(crate) id: BackendId,
    profile: Profile,
    pub(crate) fws: Vec<Firmware>,
    next_id: u32,
    next_uid: u16,
    pub(crate) contexts: BTreeMap<u32, Ctx>,
    pub(crate) pds: BTreeMap<u32, Pd>,
    pub(crate) mkeys: BTreeMap<u32, MkeyObj>,
    pub(crate) data: crate::verbs::DataPath,
    pub(crate) crcs: crate::signature::Crcs,
    pub(crate) fabric: crate::fabric::Fabric,
    /// What [`Backend::caps`] reports, probed once at construction.
    caps: mlx5_dv::Caps,
}

fn internal(op: Op, e: impl std::fmt::Display) -> Error {
    Error::new(op, EIO, format!("simulator mailbox error: {e}"))
}

fn put(op: Op, buf: &mut [u8], f: Field, v: u64) -> Result<()> {
    f.set(buf, v).map_err(|e| internal(op, e))
}

fn cmd_error(op: Op, errno: i32, out: &[u8], what: &str) -> Error {
    let (status, syndrome) = prm::read_status(out);
    let err = Error::new(op, errno, format!("{what} failed"));
    if status != prm::status::OK { err.with_cmd_status(mlx5_dv::CmdStatus { status, syndrome }) } else { err }
}

impl Simulator {
    /// A simulator of `profile`.
    pub fn new(profile: Profile) -> Result<Self> {
        let count = profile.device_names().len();
        let fws = (0..count)
            .map(|_| Firmware::new(&profile))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| internal(Op::Backend, e))?;
        let data = crate::verbs::DataPath::new(&profile, count);
        let crcs = crate::signature::Crcs::new(&profile.signature);
        let fabric = crate::fabric::Fabric::new(&profile);
        Ok(Simulator::with_probed_caps(Simulator {
            crcs,
            id: BackendId::fresh(),
            profile,
            fws,
            data,
            next_id: 1,
            next_uid: 1,
            contexts: BTreeMap::new(),
            pds: BTreeMap::new(),
            mkeys: BTreeMap::new(),
            caps: mlx5_dv::Caps::default(),
            fabric,
        }))
    }

    /// Fill `caps` as a program would learn them: the kernel's features from the profile, the
    /// device caps through `ibv_open_device` and `mlx5dv_query_device` on a throwaway copy, so
    /// this simulator's ids and logs stay as they were.
    fn with_probed_caps(mut self) -> Self {
        let mut probe = self.clone();
        let mut caps = mlx5_dv::Caps::default();
        let k = &self.profile.kernel;
        caps.kernel =
            KernelFacts { devx: Some(k.devx), mkey_update_tag: Some(k.mkey_update_tag), sqd2rts: Some(k.sqd2rts) };
        caps.device.general_obj_types = Some(
            self.profile
                .hca_cap
                .general_obj_types
                .iter()
                .fold(0u64, |m, t| m | 1u64.checked_shl(u32::from(t.number())).unwrap_or(0)),
        );
        caps.device.max_qp_wr = Some(self.profile.datapath.max_qp_wr);
        caps.sim_control = true;
        if let Some(dev) = probe.devices().into_iter().find(|d| d.kind == DeviceKind::Mlx5)
            && let Ok(ctx) = probe.open_ibv_device(&dev.name)
        {
            let mask = mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD | mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD;
            if let Ok(q) = probe.query_device(ctx, mask) {
                caps.device.sig = q.sig_caps;
                caps.device.crypto = q.crypto_caps;
            }
        }
        self.caps = caps;
        self
    }

    /// A simulator of the shipped profile `name`.
    pub fn with_profile(name: &str) -> std::result::Result<Self, crate::ProfileError> {
        let p = Profile::builtin(name)?;
        Simulator::new(p).map_err(|e| crate::ProfileError { origin: name.into(), message: e.to_string() })
    }

    /// The profile this simulator imitates.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The firmware of the first device, for tests that look at device state.
    pub fn firmware(&self) -> &Firmware {
        &self.fws[0]
    }

    /// The firmware of device `dev` (0 = the first), if the host has it.
    pub fn firmware_of(&self, dev: usize) -> Option<&Firmware> {
        self.fws.get(dev)
    }

    /// A SIG_ERR CQE reached the provider (`mlx5_parse_cqe`): store it on the mkey with this
    /// index; false if no mkey of the device has it.
    pub(crate) fn take_sig_err(&mut self, dev: usize, index: u32, err: StoredSigErr) -> bool {
        let Some(s) = self.mkeys.values_mut().find(|m| m.dev == dev && m.index == index).and_then(|m| m.sig.as_mut())
        else {
            return false;
        };
        s.err_exists = true;
        s.err_count = s.err_count.wrapping_add(1);
        s.err_count_updated = true;
        s.err = err;
        true
    }

    /// The provider's signature context of a live mkey (for tests of the decoder).
    pub fn sig_ctx_mut(&mut self, mkey: &Mkey) -> Option<&mut SigCtx> {
        let id = self.check(mkey.handle.backend(), mkey.handle.id(), Op::MkeyCheck).ok()?;
        self.mkeys.get_mut(&id)?.sig.as_mut()
    }

    pub(crate) fn fresh_id(&mut self) -> u32 {
        self.next_id = self.next_id.wrapping_add(1);
        self.next_id
    }

    pub(crate) fn check(&self, backend: BackendId, id: u32, op: Op) -> Result<u32> {
        if backend != self.id {
            return Err(Error::new(op, EINVAL, "handle belongs to another backend instance"));
        }
        Ok(id)
    }

    pub(crate) fn ctx(&self, h: ContextHandle, op: Op) -> Result<(u32, &Ctx)> {
        let id = self.check(h.backend(), h.id(), op)?;
        self.contexts
            .get(&id)
            .map(|c| (id, c))
            .ok_or_else(|| Error::new(op, EINVAL, "context handle is stale (device closed)"))
    }

    pub(crate) fn pd(&self, h: PdHandle, op: Op) -> Result<(u32, &Pd)> {
        let id = self.check(h.backend(), h.id(), op)?;
        self.pds
            .get(&id)
            .map(|p| (id, p))
            .ok_or_else(|| Error::new(op, EINVAL, "PD handle is stale (deallocated or its device closed)"))
    }

    fn mkey_id(&self, h: MkeyHandle, op: Op) -> Result<u32> {
        let id = self.check(h.backend(), h.id(), op)?;
        if self.mkeys.contains_key(&id) {
            Ok(id)
        } else {
            Err(Error::new(op, EINVAL, "mkey handle is stale (destroyed or its device closed)"))
        }
    }

    /// The kind of the device named `name` and, for an mlx5 kernel device, its index.
    fn find_device(&self, name: &str, op: Op) -> Result<(DeviceKind, usize)> {
        if let Some(i) = self.profile.device_names().iter().position(|n| n == name) {
            return Ok((DeviceKind::Mlx5, i));
        }
        self.devices()
            .into_iter()
            .find(|d| d.name == name)
            .map(|d| (d.kind, 0))
            .ok_or_else(|| Error::new(op, ENODEV, format!("no device named {name}")))
    }

    fn devices(&self) -> Vec<DeviceDesc> {
        let d = &self.profile.device;
        let mut v: Vec<DeviceDesc> =
            self.profile.device_names().into_iter().map(|name| DeviceDesc { name, kind: DeviceKind::Mlx5 }).collect();
        if let Some(p) = &d.vfio_pci_name {
            v.push(DeviceDesc { name: p.clone(), kind: DeviceKind::Mlx5Vfio });
        }
        v.extend(d.other_devices.iter().map(|n| DeviceDesc { name: n.clone(), kind: DeviceKind::Other }));
        v
    }

    fn add_context(&mut self, kind: CtxKind, caps: CtxCaps, dev: usize) -> ContextHandle {
        let id = self.fresh_id();
        self.contexts.insert(id, Ctx { kind, caps, dev, events: Default::default() });
        ContextHandle::new(self.id, id)
    }

    /// `mlx5_alloc_context` for a kernel mlx5 device: DEVX as asked, kernel flags, then the
    /// capability query.
    fn open_kernel_context(&mut self, dev: usize, want_devx: bool, fallback: bool, op: Op) -> Result<ContextHandle> {
        let k = &self.profile.kernel;
        let devx = match (want_devx && k.devx, fallback) {
            (true, _) => {
                let uid = self.next_uid;
                self.next_uid = self.next_uid.checked_add(1).unwrap_or(1);
                DevxUid::Uid(uid)
            }
            // mlx5_ib_devx_create: a device without user contexts (log_max_uctx == 0) -> EINVAL.
            (false, false) => return Err(Error::new(op, EINVAL, "the kernel refused a DEVX context")),
            (false, true) => DevxUid::None { whitelist: k.devx_whitelist_uid },
        };
        let caps = self.query_caps(dev, devx);
        let kind = CtxKind::Kernel { devx, update_tag: self.profile.kernel.mkey_update_tag };
        Ok(self.add_context(kind, caps, dev))
    }

    /// `mlx5_query_device_ctx`: read the HCA caps through DEVX; a failed query leaves caps 0.
    fn query_caps(&mut self, dev: usize, uid: DevxUid) -> CtxCaps {
        use prm::{cmd_hca_cap as c, crypto_caps as k, query_hca_cap as q};
        let mut caps = CtxCaps::default();
        let mut input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, q::OP_MOD_GENERAL_CUR);
        let mut out = vec![0u8; q::OUT_SIZE];
        if kernel::devx_cmd(&mut self.fws[dev], uid, &mut input, &mut out).is_err() {
            return caps;
        }
        let page = &out[q::CAPABILITY_BYTE..];
        let bit = |f: Field| f.get(page).unwrap_or(0) != 0;
        if bit(c::SHO) && bit(c::SIGERR_DOMAIN_AND_SIG_TYPE) {
            caps.sig.block_prot = sig_cap::PROT_T10DIF | sig_cap::PROT_CRC;
            caps.sig.block_size = sig_cap::BLOCK_512 | sig_cap::BLOCK_520 | sig_cap::BLOCK_4096 | sig_cap::BLOCK_4160;
            caps.sig.t10dif_bg = sig_cap::BG_CRC | sig_cap::BG_CSUM;
            caps.sig.crc_type = sig_cap::CRC32;
            if bit(c::SIG_BLOCK_4048) {
                caps.sig.block_size |= sig_cap::BLOCK_4048;
            }
            if bit(c::SIG_CRC32C) {
                caps.sig.crc_type |= sig_cap::CRC32C;
            }
            if bit(c::SIG_CRC64_XP10) {
                caps.sig.crc_type |= sig_cap::CRC64_XP10;
            }
        }
        if bit(c::AES_XTS_SINGLE_BLOCK_LE_TWEAK) {
            caps.crypto.crypto_engines |= crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK;
        }
        if bit(c::AES_XTS_MULTI_BLOCK_BE_TWEAK) {
            caps.crypto.crypto_engines |=
                crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK | crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK;
        }
        if !bit(c::CRYPTO) {
            return caps;
        }
        caps.crypto.flags |= crypto_cap::FLAG_CRYPTO;
        let mut input = prm::new_input(q::IN_SIZE, opcode::QUERY_HCA_CAP, 0, q::OP_MOD_CRYPTO_CUR);
        if kernel::devx_cmd(&mut self.fws[dev], uid, &mut input, &mut out).is_err() {
            return caps;
        }
        let page = &out[q::CAPABILITY_BYTE..];
        let get = |f: Field| f.get(page).unwrap_or(0);
        if get(k::WRAPPED_CRYPTO_OPERATIONAL) != 0 {
            caps.crypto.flags |= crypto_cap::FLAG_WRAPPED_CRYPTO_OPERATIONAL;
        }
        if get(k::WRAPPED_CRYPTO_GOING_TO_COMMISSIONING) != 0 {
            caps.crypto.flags |= crypto_cap::FLAG_WRAPPED_CRYPTO_GOING_TO_COMMISSIONING;
        }
        if get(k::WRAPPED_IMPORT_METHOD) & k::WRAPPED_IMPORT_METHOD_AES != 0 {
            caps.crypto.wrapped_import_method |= crypto_cap::WRAPPED_IMPORT_AES_XTS;
        }
        caps.crypto.log_max_num_deks = get(k::LOG_MAX_NUM_DEKS) as u8;
        caps.crypto.failed_selftests = get(k::FAILED_SELFTESTS) as u16;
        caps
    }

    fn create_psv(&mut self, dev: usize, uid: DevxUid, pdn: u32) -> Result<u32> {
        let op = Op::CreateMkey;
        let mut input = [0u8; prm::create_psv::IN_SIZE];
        prm::write_header(&mut input, opcode::CREATE_PSV, 0, 0);
        put(op, &mut input, prm::create_psv::NUM_PSV, 1)?;
        put(op, &mut input, prm::create_psv::PD, u64::from(pdn))?;
        let mut out = [0u8; prm::create_psv::OUT_SIZE];
        kernel::devx_cmd(&mut self.fws[dev], uid, &mut input, &mut out)
            .map_err(|e| cmd_error(op, kernel::cmd_status_err(e, &out), &out, "CREATE_PSV"))?;
        prm::create_psv::OUT_PSV_INDEX[0].get(&out).map(|v| v as u32).map_err(|e| internal(op, e))
    }

    fn destroy_psv(&mut self, dev: usize, psv: u32, op: Op) -> Result<()> {
        let mut input = [0u8; prm::destroy_psv::IN_SIZE];
        prm::write_header(&mut input, opcode::DESTROY_PSV, 0, 0);
        put(op, &mut input, prm::destroy_psv::PSVN, u64::from(psv))?;
        let mut out = [0u8; prm::mbox_out::SIZE];
        kernel::kernel_cmd(&mut self.fws[dev], &input, &mut out).map_err(|e| cmd_error(op, e, &out, "DESTROY_PSV"))
    }

    pub(crate) fn destroy_fw_mkey(&mut self, dev: usize, index: u32, op: Op) -> Result<()> {
        let mut input = [0u8; prm::destroy_mkey::IN_SIZE];
        prm::write_header(&mut input, opcode::DESTROY_MKEY, 0, 0);
        put(op, &mut input, prm::destroy_mkey::MKEY_INDEX, u64::from(index))?;
        let mut out = [0u8; prm::mbox_out::SIZE];
        kernel::kernel_cmd(&mut self.fws[dev], &input, &mut out).map_err(|e| cmd_error(op, e, &out, "DESTROY_MKEY"))
    }

    /// Undo PSVs created part-way through a failed `create_mkey` as `mlx5_destroy_sig_psvs`
    /// does: memory PSV first, then wire, stopping at the first failure.
    fn unwind_psvs(&mut self, dev: usize, psvs: &[u32]) {
        for &p in psvs {
            // The original error is what the caller sees; a failing cleanup cannot change it.
            if self.destroy_psv(dev, p, Op::CreateMkey).is_err() {
                break;
            }
        }
    }

    fn build_create_mkey(
        op: Op,
        flags: MkeyInitFlags,
        pdn: u32,
        num_desc: u16,
    ) -> Result<[u8; prm::create_mkey::IN_SIZE]> {
        use prm::mkc;
        let mut input = [0u8; prm::create_mkey::IN_SIZE];
        prm::write_header(&mut input, opcode::CREATE_MKEY, 0, 0);
        let at = |f: Field| f.at(prm::create_mkey::MKC_BIT);
        let sig = flags.contains(MkeyInitFlags::BLOCK_SIGNATURE);
        let crypto = flags.contains(MkeyInitFlags::CRYPTO);
        put(op, &mut input, at(mkc::ACCESS_MODE_1_0), mkc::ACCESS_MODE_KLMS)?;
        put(op, &mut input, at(mkc::FREE), 1)?;
        put(op, &mut input, at(mkc::UMR_EN), 1)?;
        put(op, &mut input, at(mkc::LR), 1)?;
        put(op, &mut input, at(mkc::PD), u64::from(pdn))?;
        put(op, &mut input, at(mkc::QPN), 0xff_ffff)?;
        put(op, &mut input, at(mkc::MKEY_7_0), 0)?;
        put(op, &mut input, at(mkc::TRANSLATIONS_OCTWORD_SIZE), u64::from(num_desc))?;
        if crypto {
            put(op, &mut input, at(mkc::CRYPTO_EN), 1)?;
        }
        if sig || crypto {
            let bsf_bytes = 64 * (u64::from(sig) + u64::from(crypto));
            put(op, &mut input, at(mkc::BSF_EN), 1)?;
            put(op, &mut input, at(mkc::BSF_OCTWORD_SIZE), bsf_bytes / 16)?;
        }
        if flags.contains(MkeyInitFlags::REMOTE_INVALIDATE) {
            put(op, &mut input, at(mkc::EN_RINVAL), 1)?;
        }
        Ok(input)
    }
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

impl Contexts for Simulator {
    fn device_list(&mut self) -> Result<Vec<DeviceDesc>> {
        Ok(self.devices())
    }

    fn open_device(&mut self, device: &str, attr: Option<&ContextAttr>) -> Result<ContextHandle> {
        let op = Op::OpenDevice;
        let dev = match self.find_device(device, op)? {
            (DeviceKind::Mlx5, dev) => dev,
            (DeviceKind::Mlx5Vfio | DeviceKind::Other, _) => {
                return Err(Error::new(op, EOPNOTSUPP, format!("{device} is not an mlx5 kernel device")));
            }
        };
        let (flags, comp_mask) = attr.map_or((0, 0), |a| (a.flags.bits(), a.comp_mask));
        if comp_mask & !mlx5_dv::MLX5DV_CONTEXT_ATTR_MASK_FD_ARRAY != 0 {
            return Err(Error::new(op, EINVAL, format!("unknown comp_mask bits 0x{comp_mask:x}")));
        }
        if flags & !ContextFlags::DEVX.bits() != 0 {
            return Err(Error::new(op, EINVAL, format!("unknown context flags 0x{flags:x}")));
        }
        self.open_kernel_context(dev, true, flags == 0, op)
    }

    fn open_ibv_device(&mut self, device: &str) -> Result<ContextHandle> {
        let op = Op::IbvOpenDevice;
        match self.find_device(device, op)? {
            (DeviceKind::Mlx5, dev) => self.open_kernel_context(dev, true, true, op),
            // The VFIO function is the first device's; other providers need no firmware.
            (DeviceKind::Mlx5Vfio, _) => Ok(self.add_context(CtxKind::Vfio, CtxCaps::default(), 0)),
            (DeviceKind::Other, _) => Ok(self.add_context(CtxKind::Other, CtxCaps::default(), 0)),
        }
    }

    fn close_device(&mut self, ctx: ContextHandle) -> Result<()> {
        let (cid, c) = self.ctx(ctx, Op::CloseDevice)?;
        let (kind, dev) = (c.kind, c.dev);
        self.release_data_path_of(cid);
        // The provider forgets the context's objects; the kernel destroys whatever the DEVX uid
        // still owns in firmware (including objects a failed unwind left behind) and the PDs.
        // Cleanup failures are not reported, as for a real close.
        self.mkeys.retain(|_, m| m.ctx != cid);
        if let CtxKind::Kernel { devx: DevxUid::Uid(uid), .. } = kind {
            let (mkeys, psvs) = self.fws[dev].objects_of_uid(uid);
            for p in psvs {
                let _ = self.destroy_psv(dev, p, Op::CloseDevice);
            }
            for m in mkeys {
                let _ = self.destroy_fw_mkey(dev, m, Op::CloseDevice);
            }
        }
        let pds: Vec<(u32, Option<u32>)> =
            self.pds.iter().filter(|(_, p)| p.ctx == cid).map(|(id, p)| (*id, p.pdn)).collect();
        for (id, pdn) in pds {
            self.pds.remove(&id);
            if let Some(pdn) = pdn {
                let mut input = prm::new_input(prm::pd::SIZE, opcode::DEALLOC_PD, 0, 0);
                let _ = prm::pd::PD.set(&mut input, u64::from(pdn));
                let mut out = [0u8; prm::pd::SIZE];
                let _ = kernel::kernel_cmd(&mut self.fws[dev], &input, &mut out);
            }
        }
        self.contexts.remove(&cid);
        Ok(())
    }

    fn query_device(&mut self, ctx: ContextHandle, comp_mask: u64) -> Result<DvContext> {
        let op = Op::QueryDevice;
        let (_, c) = self.ctx(ctx, op)?;
        if !matches!(c.kind, CtxKind::Kernel { .. }) {
            return Err(Error::new(op, EOPNOTSUPP, "this context has no query_device op (VFIO or non-mlx5)"));
        }
        let mut out = DvContext::default();
        if comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD != 0 {
            out.comp_mask |= mlx5_dv::MLX5DV_CONTEXT_MASK_SIGNATURE_OFFLOAD;
            out.sig_caps = c.caps.sig;
        }
        if comp_mask & mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD != 0 {
            out.comp_mask |= mlx5_dv::MLX5DV_CONTEXT_MASK_CRYPTO_OFFLOAD;
            out.crypto_caps = c.caps.crypto;
        }
        Ok(out)
    }

    fn query_port(&mut self, ctx: ContextHandle, port_num: u8) -> Result<mlx5_dv::PortAttr> {
        let op = Op::QueryPort;
        let (_, c) = self.ctx(ctx, op)?;
        if !c.kind_is_kernel() {
            return Err(Error::new(op, EOPNOTSUPP, "only a kernel mlx5 context has verbs ports here"));
        }
        match (port_num, self.fabric.port(c.dev)) {
            (1, Some(p)) => Ok(*p),
            _ => Err(Error::new(op, EINVAL, format!("the device has no port {port_num}"))),
        }
    }

    fn alloc_pd(&mut self, ctx: ContextHandle) -> Result<PdHandle> {
        let op = Op::AllocPd;
        let (cid, c) = self.ctx(ctx, op)?;
        let dev = c.dev;
        let pdn = match c.kind {
            CtxKind::Other => None,
            CtxKind::Kernel { .. } | CtxKind::Vfio => {
                let input = prm::new_input(prm::pd::SIZE, opcode::ALLOC_PD, 0, 0);
                let mut out = [0u8; prm::pd::SIZE];
                kernel::kernel_cmd(&mut self.fws[dev], &input, &mut out)
                    .map_err(|e| cmd_error(op, e, &out, "ALLOC_PD"))?;
                Some(prm::pd::PD.get(&out).map_err(|e| internal(op, e))? as u32)
            }
        };
        let id = self.fresh_id();
        self.pds.insert(id, Pd { ctx: cid, pdn, users: 0 });
        Ok(PdHandle::new(self.id, id))
    }

    fn dealloc_pd(&mut self, pd: PdHandle) -> Result<()> {
        let op = Op::DeallocPd;
        let (id, p) = self.pd(pd, op)?;
        if p.users > 0 {
            return Err(Error::new(op, EBUSY, format!("the PD still has {} mkey(s), MR(s) or QP(s)", p.users)));
        }
        let dev = self.contexts.get(&p.ctx).map_or(0, |c| c.dev);
        if let Some(pdn) = p.pdn {
            let mut input = prm::new_input(prm::pd::SIZE, opcode::DEALLOC_PD, 0, 0);
            put(op, &mut input, prm::pd::PD, u64::from(pdn))?;
            let mut out = [0u8; prm::pd::SIZE];
            kernel::kernel_cmd(&mut self.fws[dev], &input, &mut out)
                .map_err(|e| cmd_error(op, e, &out, "DEALLOC_PD"))?;
        }
        self.pds.remove(&id);
        Ok(())
    }

    fn get_async_event(&mut self, ctx: ContextHandle) -> Result<Option<mlx5_dv::AsyncEvent>> {
        let op = Op::GetAsyncEvent;
        let id = self.check(ctx.backend(), ctx.id(), op)?;
        let c = self.contexts.get_mut(&id).ok_or_else(|| Error::new(op, EINVAL, "context handle is stale"))?;
        Ok(c.events.pop_front())
    }
}

impl Mkeys for Simulator {
    fn create_mkey(&mut self, attr: &MkeyInitAttr) -> Result<Mkey> {
        let op = Op::CreateMkey;
        let (pd_id, pd) = self.pd(attr.pd, op)?;
        let (ctx_id, pdn) = (pd.ctx, pd.pdn);
        let c = self.contexts.get(&ctx_id).ok_or_else(|| Error::new(op, EINVAL, "the PD's context is closed"))?;
        let (devx, update_tag) = match c.kind {
            CtxKind::Kernel { devx, update_tag } => (devx, update_tag),
            CtxKind::Vfio => return Err(Error::new(op, EOPNOTSUPP, "VFIO contexts have no create_mkey op")),
            CtxKind::Other => return Err(Error::new(op, EOPNOTSUPP, "not an mlx5 context")),
        };
        let caps = c.caps;
        let dev = c.dev;
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

        let mut psvs: Vec<u32> = Vec::new();
        if flags.contains(MkeyInitFlags::BLOCK_SIGNATURE) {
            if caps.sig.block_prot == 0 {
                return Err(Error::new(op, EOPNOTSUPP, "BLOCK_SIGNATURE needs signature caps"));
            }
            for _ in 0..2 {
                match self.create_psv(dev, devx, pdn) {
                    Ok(p) => psvs.push(p),
                    Err(e) => {
                        self.unwind_psvs(dev, &psvs);
                        return Err(e);
                    }
                }
            }
        }
        if flags.contains(MkeyInitFlags::CRYPTO)
            && caps.crypto.crypto_engines
                & (crypto_cap::ENGINE_AES_XTS_SINGLE_BLOCK | crypto_cap::ENGINE_AES_XTS_MULTI_BLOCK)
                == 0
        {
            self.unwind_psvs(dev, &psvs);
            return Err(Error::new(op, EOPNOTSUPP, "CRYPTO needs an AES-XTS single- or multi-block engine"));
        }

        let num_desc = round_max_entries(attr.max_entries);
        let mut input = match Self::build_create_mkey(op, flags, pdn, num_desc) {
            Ok(i) => i,
            Err(e) => {
                self.unwind_psvs(dev, &psvs);
                return Err(e);
            }
        };
        let mut out = [0u8; prm::create_mkey::OUT_SIZE];
        if let Err(e) = kernel::devx_cmd(&mut self.fws[dev], devx, &mut input, &mut out) {
            self.unwind_psvs(dev, &psvs);
            return Err(cmd_error(op, kernel::cmd_status_err(e, &out), &out, "CREATE_MKEY"));
        }
        let index = match prm::create_mkey::OUT_MKEY_INDEX.get(&out) {
            Ok(i) => i as u32,
            Err(e) => {
                self.unwind_psvs(dev, &psvs);
                return Err(internal(op, e));
            }
        };
        let sig = match psvs.as_slice() {
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
        let id = self.fresh_id();
        let crypto = flags.contains(MkeyInitFlags::CRYPTO);
        self.mkeys.insert(id, MkeyObj { ctx: ctx_id, pd: pd_id, dev, index, sig, length: 0, num_desc, crypto });
        if let Some(p) = self.pds.get_mut(&pd_id) {
            p.users += 1;
        }
        let key = index << 8;
        Ok(Mkey { handle: MkeyHandle::new(self.id, id), lkey: key, rkey: key, max_entries: num_desc })
    }

    fn destroy_mkey(&mut self, mkey: &Mkey) -> Result<()> {
        let op = Op::DestroyMkey;
        let id = self.mkey_id(mkey.handle, op)?;
        let Some(m) = self.mkeys.get(&id).cloned() else {
            return Err(Error::new(op, EINVAL, "mkey handle is stale"));
        };
        if let Some(s) = &m.sig {
            if let Some(p) = s.mem_psv {
                self.destroy_psv(m.dev, p, op)?;
                if let Some(s) = self.mkeys.get_mut(&id).and_then(|m| m.sig.as_mut()) {
                    s.mem_psv = None;
                }
            }
            if let Some(p) = s.wire_psv {
                self.destroy_psv(m.dev, p, op)?;
                if let Some(s) = self.mkeys.get_mut(&id).and_then(|m| m.sig.as_mut()) {
                    s.wire_psv = None;
                }
            }
        }
        self.destroy_fw_mkey(m.dev, m.index, op)?;
        self.mkeys.remove(&id);
        if let Some(p) = self.pds.get_mut(&m.pd) {
            p.users = p.users.saturating_sub(1);
        }
        Ok(())
    }

    fn mkey_check(&mut self, mkey: &Mkey) -> Result<MkeyErr> {
        let op = Op::MkeyCheck;
        let id = self.mkey_id(mkey.handle, op)?;
        let sig = self
            .mkeys
            .get_mut(&id)
            .and_then(|m| m.sig.as_mut())
            .ok_or_else(|| Error::new(op, EINVAL, "the mkey was not created with BLOCK_SIGNATURE"))?;
        if !sig.err_exists {
            return Ok(MkeyErr::NONE);
        }
        let decoded = decode_sig_err(&sig.err, sig.mem, sig.wire).map_err(|why| Error::new(op, EINVAL, why))?;
        sig.err_exists = false;
        Ok(decoded)
    }
}

impl Memory for Simulator {
    fn alloc_buf(&mut self, len: usize) -> Result<mlx5_dv::Buf> {
        self.dp_alloc_buf(len)
    }

    fn free_buf(&mut self, buf: &mlx5_dv::Buf) -> Result<()> {
        self.dp_free_buf(buf)
    }

    fn write_buf(&mut self, buf: &mlx5_dv::Buf, offset: usize, data: &[u8]) -> Result<()> {
        self.dp_write_buf(buf, offset, data)
    }

    fn read_buf(&mut self, buf: &mlx5_dv::Buf, offset: usize, len: usize) -> Result<Vec<u8>> {
        self.dp_read_buf(buf, offset, len)
    }

    fn reg_mr(&mut self, pd: PdHandle, addr: u64, length: u64, access: mlx5_dv::AccessFlags) -> Result<mlx5_dv::Mr> {
        self.dp_reg_mr(pd, addr, length, access)
    }

    fn dereg_mr(&mut self, mr: &mlx5_dv::Mr) -> Result<()> {
        self.dp_dereg_mr(mr)
    }
}

impl Queues for Simulator {
    fn create_cq(&mut self, ctx: ContextHandle, cqe: u32) -> Result<mlx5_dv::Cq> {
        self.dp_create_cq(ctx, cqe)
    }

    fn destroy_cq(&mut self, cq: &mlx5_dv::Cq) -> Result<()> {
        self.dp_destroy_cq(cq)
    }

    fn poll_cq(&mut self, cq: &mlx5_dv::Cq, max: usize) -> Result<Vec<mlx5_dv::Wc>> {
        self.dp_poll_cq(cq, max)
    }

    fn create_qp(&mut self, attr: &mlx5_dv::QpInitAttr) -> Result<mlx5_dv::Qp> {
        self.dp_create_qp(attr)
    }

    fn modify_qp(&mut self, qp: &mlx5_dv::Qp, attr: &mlx5_dv::QpModify) -> Result<()> {
        self.dp_modify_qp(qp, attr)
    }

    fn query_qp_state(&mut self, qp: &mlx5_dv::Qp) -> Result<mlx5_dv::QpState> {
        self.dp_query_qp_state(qp)
    }

    fn destroy_qp(&mut self, qp: &mlx5_dv::Qp) -> Result<()> {
        self.dp_destroy_qp(qp)
    }

    fn post_send(&mut self, qp: &mlx5_dv::Qp, ops: &[mlx5_dv::WrOp]) -> Result<()> {
        self.dp_post_send(qp, ops)
    }

    fn post_recv(&mut self, qp: &mlx5_dv::Qp, wrs: &[mlx5_dv::RecvWr]) -> Result<()> {
        self.dp_post_recv(qp, wrs)
    }

    fn cancel_posted_send_wrs(&mut self, qp: &mlx5_dv::Qp, wr_id: u64) -> Result<u32> {
        self.dp_cancel_posted_send_wrs(qp, wr_id)
    }
}

impl Backend for Simulator {
    fn info(&self) -> BackendInfo {
        let d = &self.profile.device;
        let facts = [
            ("device", d.name.clone()),
            ("fw_ver", d.fw_ver.clone()),
            ("board_id", d.board_id.clone()),
            ("vendor_part_id", d.vendor_part_id.to_string()),
            ("simulator", env!("CARGO_PKG_VERSION").to_string()),
        ];
        BackendInfo {
            backend: "sim".into(),
            profile: Some(self.profile.name.clone()),
            facts: facts.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        }
    }

    fn caps(&self) -> mlx5_dv::Caps {
        self.caps.clone()
    }

    fn sim_control(&mut self) -> Option<&mut dyn SimControl> {
        Some(self)
    }
}

impl SimControl for Simulator {
    fn add_fault(&mut self, rule: FaultRule) -> Result<()> {
        let Some(fault) = crate::firmware::CommandFault::from_rule(&rule) else {
            return Err(Error::new(
                Op::Backend,
                EOPNOTSUPP,
                format!("this simulator cannot apply the fault rule {rule:?}"),
            ));
        };
        if fault.status == prm::status::OK {
            return Err(Error::new(Op::Backend, EINVAL, "a command fault needs a non-zero status"));
        }
        self.fws.iter_mut().for_each(|f| f.add_fault(fault));
        Ok(())
    }

    fn clear_faults(&mut self) {
        self.fws.iter_mut().for_each(Firmware::clear_faults);
    }

    fn record_commands(&mut self, on: bool) {
        self.fws.iter_mut().for_each(|f| f.record_commands(on));
    }

    fn take_commands(&mut self) -> Vec<CommandRecord> {
        self.fws.iter_mut().flat_map(Firmware::take_commands).collect()
    }

    fn record_wqes(&mut self, on: bool) {
        match (on, self.data.wqe_log.is_some()) {
            (true, false) => self.data.wqe_log = Some(Vec::new()),
            (false, true) => self.data.wqe_log = None,
            _ => {}
        }
    }

    fn take_wqes(&mut self) -> Vec<mlx5_dv::WqeRecord> {
        self.data.wqe_log.as_mut().map(std::mem::take).unwrap_or_default()
    }
}
