//! Send WQEs as libmlx5 writes them: the control segment of `_common_wqe_init_op` and
//! `_common_wqe_finalize`, the UMR of `mlx5_send_wr_mkey_configure` and its setters
//! (`umr_sg_list_create`, `umr_strided_seg_create`, `mlx5_umr_fill_sig_bsf`), the UMR of a
//! LOCAL_INV (`_build_umr_wqe`) and the SET_PSV of `mlx5_umr_set_psv`.

use mlx5_dv::prm::FieldError;
use mlx5_dv::prm::wqe::bsf::{self, Bsf, BsfInl, bfs, bsf_size, t10dif};
use mlx5_dv::prm::wqe::compose::{Payload, SendWqe, UmrTranslation, WqeBody};
use mlx5_dv::prm::wqe::{
    AtomicSeg, CtrlSeg, DataSeg, KlmSeg, MkeyContextSeg, RaddrSeg, RepeatBlockSeg, RepeatEntSeg, SEND_WQE_BB,
    SetPsvSeg, UmrCtrlSeg, ctrl, repeat_block, umr_ctrl,
};
use mlx5_dv::{AccessFlags, Sge, sig};

use crate::device::contract::{SigBsf, UmrWqe, WqeKind, bind_body, bytes_selector};
use crate::device::translation::Translation;
use crate::signature::{Domain, Escape, Kind};

/// The control segment's per-WQE fields.
#[derive(Debug, Clone, Copy)]
pub(in crate::provider) struct CtrlFields {
    /// `sq.cur_post & 0xffff`.
    pub(in crate::provider) wqe_index: u16,
    /// The QP number.
    pub(in crate::provider) qpn: u32,
    /// `IBV_SEND_SIGNALED`.
    pub(in crate::provider) signaled: bool,
    /// `IBV_SEND_SOLICITED`.
    pub(in crate::provider) solicited: bool,
    /// The `fm` field: `IBV_SEND_FENCE`, or the small fence a UMR leaves in `fm_cache`.
    pub(in crate::provider) fm: u8,
}

/// The data segments of a gather list, or the inline segment of `inline` bytes (none at all
/// for zero bytes, as `_mlx5_send_wr_set_inline_data` and `set_data_inl_seg` write nothing).
fn payload(sge: &[Sge], inline: Option<&[u8]>) -> Payload {
    match inline {
        Some(bytes) if !bytes.is_empty() => Payload::Inline(bytes.to_vec()),
        Some(_) => Payload::Gather(Vec::new()),
        None => {
            Payload::Gather(sge.iter().map(|s| DataSeg { byte_count: s.length, lkey: s.lkey, addr: s.addr }).collect())
        }
    }
}

/// The WQE of an RDMA or SEND builder, its gather list borrowed from the work request
/// (zero-length entries included: encoding skips them, as `_mlx5_send_wr_set_sge_list` does),
/// or the inline data that replaces it (`inl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::provider) enum DataWqe<'a> {
    /// RDMA WRITE, with immediate if `imm`.
    Write { rkey: u32, raddr: u64, sge: &'a [Sge], imm: Option<u32>, inl: Option<&'a [u8]> },
    /// RDMA READ.
    Read { rkey: u32, raddr: u64, sge: &'a [Sge], inl: Option<&'a [u8]> },
    /// SEND, with immediate or with invalidate.
    Send { sge: &'a [Sge], imm: Option<u32>, inv: Option<u32>, inl: Option<&'a [u8]> },
}

impl<'a> DataWqe<'a> {
    /// The builder's WQE, `wr_id` and flags, for a data work request.
    pub(in crate::provider) fn of(w: &'a mlx5_dv::WrOp) -> Option<(u64, mlx5_dv::SendFlags, Self)> {
        use mlx5_dv::WrOp as W;
        Some(match w {
            W::RdmaWrite { wr_id, flags, rkey, remote_addr, sge } => {
                (*wr_id, *flags, DataWqe::Write { rkey: *rkey, raddr: *remote_addr, sge, imm: None, inl: None })
            }
            W::RdmaWriteImm { wr_id, flags, rkey, remote_addr, imm, sge } => {
                (*wr_id, *flags, DataWqe::Write { rkey: *rkey, raddr: *remote_addr, sge, imm: Some(*imm), inl: None })
            }
            W::RdmaRead { wr_id, flags, rkey, remote_addr, sge } => {
                (*wr_id, *flags, DataWqe::Read { rkey: *rkey, raddr: *remote_addr, sge, inl: None })
            }
            W::Send { wr_id, flags, sge } => (*wr_id, *flags, DataWqe::Send { sge, imm: None, inv: None, inl: None }),
            W::SendImm { wr_id, flags, imm, sge } => {
                (*wr_id, *flags, DataWqe::Send { sge, imm: Some(*imm), inv: None, inl: None })
            }
            W::SendInv { wr_id, flags, invalidate_rkey, sge } => {
                (*wr_id, *flags, DataWqe::Send { sge, imm: None, inv: Some(*invalidate_rkey), inl: None })
            }
            _ => return None,
        })
    }

    /// The same WQE carrying `bytes` inline in place of its gather list.
    pub(in crate::provider) fn with_inline(mut self, bytes: &'a [u8]) -> Self {
        match &mut self {
            DataWqe::Write { inl, .. } | DataWqe::Read { inl, .. } | DataWqe::Send { inl, .. } => *inl = Some(bytes),
        }
        self
    }

    /// The inline data, if the WQE carries its payload.
    fn inline(&self) -> Option<&'a [u8]> {
        match *self {
            DataWqe::Write { inl, .. } | DataWqe::Read { inl, .. } | DataWqe::Send { inl, .. } => inl,
        }
    }

    /// The gather list as the work request gave it.
    pub(in crate::provider) fn sge(&self) -> &'a [Sge] {
        match *self {
            DataWqe::Write { sge, .. } | DataWqe::Read { sge, .. } | DataWqe::Send { sge, .. } => sge,
        }
    }

    /// The opcode, the remote address and key of an RDMA WQE, and the immediate (or the key
    /// to invalidate).
    #[inline]
    fn parts(&self) -> (u8, Option<(u64, u32)>, u32) {
        use mlx5_dv::prm::wqe::opcode;
        match *self {
            DataWqe::Write { rkey, raddr, imm: None, .. } => (opcode::RDMA_WRITE, Some((raddr, rkey)), 0),
            DataWqe::Write { rkey, raddr, imm: Some(imm), .. } => (opcode::RDMA_WRITE_IMM, Some((raddr, rkey)), imm),
            DataWqe::Read { rkey, raddr, .. } => (opcode::RDMA_READ, Some((raddr, rkey)), 0),
            DataWqe::Send { inv: Some(key), .. } => (opcode::SEND_INVAL, None, key),
            DataWqe::Send { imm: Some(imm), .. } => (opcode::SEND_IMM, None, imm),
            DataWqe::Send { .. } => (opcode::SEND, None, 0),
        }
    }

    /// The same WQE as a [`WqeKind`], without the zero-length entries (and with neither
    /// entries nor inline segment for zero bytes inline).
    fn kind(&self) -> WqeKind {
        let sge = match self.inline() {
            Some(_) => crate::device::contract::SgeList::new(),
            None => self.sge().iter().filter(|s| s.length != 0).copied().collect(),
        };
        let inline = self.inline().filter(|b| !b.is_empty()).map(<[u8]>::to_vec);
        match *self {
            DataWqe::Write { rkey, raddr, imm, .. } => WqeKind::Write { rkey, raddr, sge, imm, inline },
            DataWqe::Read { rkey, raddr, .. } => WqeKind::Read { rkey, raddr, sge, inline },
            DataWqe::Send { imm, inv, .. } => WqeKind::Send { sge, imm, inv, inline },
        }
    }
}

/// Append the bytes of a data WQE to `out`: written directly for every WQE whose values fit
/// their fields; through [`encode`], which names the field that does not, otherwise.
pub(in crate::provider) fn encode_data(d: &DataWqe<'_>, c: CtrlFields, out: &mut Vec<u8>) -> Result<(), FieldError> {
    use mlx5_dv::prm::wqe::SEND_WQE_DS;
    use mlx5_dv::prm::wqe::compose::MAX_WQE_BYTES;
    if d.inline().is_some() {
        // Inline data is rare: the segment codecs write it.
        out.extend_from_slice(&encode(&d.kind(), c)?);
        return Ok(());
    }
    if let Some(bb) = one_block(d, c) {
        out.extend_from_slice(&bb);
        return Ok(());
    }
    let (op, raddr, imm) = d.parts();
    let segs = d.sge().iter().filter(|s| s.length != 0);
    let units = 1 + usize::from(raddr.is_some()) + segs.clone().count();
    if units * SEND_WQE_DS > MAX_WQE_BYTES || c.qpn > 0xff_ffff || c.fm > 7 {
        out.extend_from_slice(&encode(&d.kind(), c)?);
        return Ok(());
    }
    let start = out.len();
    out.resize(start + (units * SEND_WQE_DS).next_multiple_of(SEND_WQE_BB), 0);
    write_data(&mut out[start..], op, raddr, imm, segs, units, &c);
    Ok(())
}

/// The bytes of a data WQE that fits one basic block (the common small WQE), built on the
/// stack where every offset is a constant; `None` for any other.
#[inline]
pub(in crate::provider) fn one_block(d: &DataWqe<'_>, c: CtrlFields) -> Option<[u8; SEND_WQE_BB]> {
    let mut bb = [0u8; SEND_WQE_BB];
    one_block_into(d, c, &mut bb).then_some(bb)
}

/// [`one_block`] written over `bb`, whatever it held; false (`bb` untouched) for a WQE that
/// does not fit.
#[inline]
pub(in crate::provider) fn one_block_into(d: &DataWqe<'_>, c: CtrlFields, bb: &mut [u8; SEND_WQE_BB]) -> bool {
    use mlx5_dv::prm::wqe::SEND_WQE_DS;
    let (op, raddr, imm) = d.parts();
    let segs = d.sge().iter().filter(|s| s.length != 0);
    let units = 1 + usize::from(raddr.is_some()) + segs.clone().count();
    if d.inline().is_some() || units * SEND_WQE_DS > SEND_WQE_BB || c.qpn > 0xff_ffff || c.fm > 7 {
        return false;
    }
    *bb = [0; SEND_WQE_BB];
    write_data(bb, op, raddr, imm, segs, units, &c);
    true
}

/// The fields of a data WQE into `w`, zeroed and long enough for its `units` segments.
#[inline(always)]
fn write_data<'s>(
    w: &mut [u8],
    op: u8,
    raddr: Option<(u64, u32)>,
    imm: u32,
    segs: impl Iterator<Item = &'s Sge>,
    units: usize,
    c: &CtrlFields,
) {
    use mlx5_dv::prm::wqe::SEND_WQE_DS;
    if w.len() < 2 * SEND_WQE_DS {
        return;
    }
    let ce = if c.signaled { ctrl::CE_CQ_UPDATE } else { 0 };
    w[1..3].copy_from_slice(&c.wqe_index.to_be_bytes());
    w[3] = op;
    w[4..7].copy_from_slice(&c.qpn.to_be_bytes()[1..]);
    w[7] = units as u8;
    w[11] = c.fm << 5 | ce << 2 | u8::from(c.solicited) << 1;
    w[12..16].copy_from_slice(&imm.to_be_bytes());
    let mut at = 16;
    if let Some((raddr, rkey)) = raddr {
        w[16..24].copy_from_slice(&raddr.to_be_bytes());
        w[24..28].copy_from_slice(&rkey.to_be_bytes());
        at = 32;
    }
    for (s, seg) in segs.zip(w[at..].chunks_exact_mut(SEND_WQE_DS)) {
        seg[..4].copy_from_slice(&s.length.to_be_bytes());
        seg[4..8].copy_from_slice(&s.lkey.to_be_bytes());
        seg[8..].copy_from_slice(&s.addr.to_be_bytes());
    }
}

/// The bytes of a WQE.
pub(in crate::provider) fn encode(kind: &WqeKind, c: CtrlFields) -> Result<Vec<u8>, FieldError> {
    let mut ctrl = CtrlSeg {
        opcode: kind.opcode(),
        wqe_index: c.wqe_index,
        qpn: c.qpn,
        fm: c.fm,
        ce: if c.signaled { ctrl::CE_CQ_UPDATE } else { 0 },
        se: c.solicited,
        ..CtrlSeg::default()
    };
    let body = match kind {
        WqeKind::Write { rkey, raddr, sge, imm, inline } => {
            ctrl.imm = imm.unwrap_or(0);
            WqeBody::Rdma { raddr: RaddrSeg { raddr: *raddr, rkey: *rkey }, payload: payload(sge, inline.as_deref()) }
        }
        WqeKind::Read { rkey, raddr, sge, inline } => {
            WqeBody::Rdma { raddr: RaddrSeg { raddr: *raddr, rkey: *rkey }, payload: payload(sge, inline.as_deref()) }
        }
        WqeKind::Send { sge, imm, inv, inline } => {
            ctrl.imm = inv.or(*imm).unwrap_or(0);
            WqeBody::Send(payload(sge, inline.as_deref()))
        }
        WqeKind::Atomic { rkey, raddr, swap_add, compare, sge } => WqeBody::Atomic {
            raddr: RaddrSeg { raddr: *raddr, rkey: *rkey },
            atomic: AtomicSeg { swap_add: *swap_add, compare: compare.unwrap_or(0) },
            payload: payload(sge, None),
        },
        WqeKind::LocalInv { key } => {
            ctrl.imm = *key;
            use umr_ctrl::mkey_mask as m;
            let umr = UmrCtrlSeg {
                flags: umr_ctrl::flags::TRANSLATION_OFFSET | umr_ctrl::flags::INLINE | umr_ctrl::flags::CHECK_QPN,
                mkey_mask: m::FREE | m::MKEY | m::QPN,
                ..UmrCtrlSeg::default()
            };
            let mkc = MkeyContextSeg { free: true, qpn: 0xff_ffff, mkey_7_0: *key as u8, ..MkeyContextSeg::default() };
            WqeBody::Umr { umr, mkc, translation: UmrTranslation::None, bsf: Vec::new() }
        }
        WqeKind::Umr(u) => {
            ctrl.imm = u.index << 8 | u32::from(u.tag);
            umr_body(u)?
        }
        WqeKind::BindMw(b) => {
            ctrl.imm = b.key;
            bind_body(b, c.qpn)
        }
        WqeKind::SetPsv { psv, transient } => {
            WqeBody::SetPsv(SetPsvSeg { psv_index: *psv, syndrome: 0, transient_signature: *transient })
        }
        WqeKind::Nop => WqeBody::Empty,
        WqeKind::Memcpy { src, dest, scratch } => {
            ctrl.opmod = mlx5_dv::prm::wqe::mmo::OPC_MOD_DMA;
            let seg = |s: &mlx5_dv::Sge| DataSeg { byte_count: s.length, lkey: s.lkey, addr: s.addr };
            let meta = mlx5_dv::prm::wqe::MmoMetaSeg { mmo_control: 0, local_key: scratch.0, local_address: scratch.1 };
            WqeBody::Mmo { meta, src: seg(src), dest: seg(dest) }
        }
    };
    SendWqe { ctrl, body }.encode()
}

/// The UMR control segment, mkey context, translation and BSF of a configure.
fn umr_body(u: &UmrWqe) -> Result<WqeBody, FieldError> {
    use umr_ctrl::mkey_mask as m;
    let mut umr = UmrCtrlSeg { flags: umr_ctrl::flags::INLINE, mkey_mask: m::FREE | m::MKEY, ..UmrCtrlSeg::default() };
    let mut mkc = MkeyContextSeg { qpn: 0xff_ffff, mkey_7_0: u.tag, ..MkeyContextSeg::default() };
    if let Some(a) = u.access {
        umr.mkey_mask |= m::ACCESS_LOCAL_WRITE | m::ACCESS_REMOTE_READ | m::ACCESS_REMOTE_WRITE | m::ACCESS_ATOMIC;
        let has = |f: AccessFlags| a & f.bits() != 0;
        (mkc.lw, mkc.rr, mkc.rw, mkc.a) = (
            has(AccessFlags::LOCAL_WRITE),
            has(AccessFlags::REMOTE_READ),
            has(AccessFlags::REMOTE_WRITE),
            has(AccessFlags::REMOTE_ATOMIC),
        );
    }
    let mut translation = UmrTranslation::None;
    if let Some((len, xlat)) = &u.layout {
        umr.mkey_mask |= m::LEN;
        mkc.len = *len;
        let (t, entries) = wqe_translation(xlat);
        // klm_octowords: the entries (and a repeat block's header) padded to 64 bytes.
        umr.klm_octowords = u16::try_from((entries * 16).next_multiple_of(64) / 16)
            .map_err(|_| FieldError::TooWide { field: "klm_octowords", value: entries as u64 })?;
        translation = t;
    }
    if let Some(n) = u.sig_err_count {
        umr.mkey_mask |= m::SIG_ERR;
        mkc.expected_sigerr_count = n & 1 != 0;
    }
    let mut bsf_bytes = Vec::new();
    if u.bsf_disable {
        umr.mkey_mask |= m::BSF_ENABLE;
    }
    if let Some(s) = &u.sig_bsf {
        let mut b = sig_bsf(s);
        // mlx5_umr_fill_sig_bsf(..., have_crypto_bsf): the signature BSF announces both.
        if u.crypto_bsf.is_some() {
            b.basic.bsf_size = bsf_size::SIG_AND_CRYPTO;
        }
        bsf_bytes = b.to_bytes()?.to_vec();
    }
    if let Some(c) = &u.crypto_bsf {
        bsf_bytes.extend_from_slice(&c.to_bytes()?);
    }
    if !bsf_bytes.is_empty() {
        // umr_enable_bsf: the BSFs' size in octowords, and the BSF enabled.
        umr.mkey_mask |= m::BSF_ENABLE;
        mkc.bsf_en = true;
        umr.bsf_octowords = (bsf_bytes.len() / 16) as u16;
    }
    Ok(WqeBody::Umr { umr, mkc, translation, bsf: bsf_bytes })
}

/// The WQE form of a translation and the 16-byte units it takes before padding.
fn wqe_translation(x: &Translation) -> (UmrTranslation, usize) {
    match x {
        Translation::None | Translation::Mtt | Translation::Memic => (UmrTranslation::Klm(Vec::new()), 0),
        Translation::Klm(k) => {
            let entries: Vec<KlmSeg> =
                k.iter().map(|e| KlmSeg { byte_count: e.byte_count, mkey: e.key, address: e.addr }).collect();
            let n = entries.len();
            (UmrTranslation::Klm(entries), n)
        }
        Translation::Repeat { repeat_count, entries } => {
            let ents: Vec<RepeatEntSeg> = entries
                .iter()
                .map(|e| RepeatEntSeg { stride: e.stride, byte_count: e.byte_count, memkey: e.key, va: e.addr })
                .collect();
            let per = entries.iter().fold(0u32, |acc, e| acc.wrapping_add(u32::from(e.byte_count)));
            let header = RepeatBlockSeg {
                byte_count: per,
                op: repeat_block::OP_REPEAT_BLOCK,
                repeat_count: *repeat_count,
                num_ent: ents.len() as u16,
            };
            let n = ents.len() + 1;
            (UmrTranslation::Repeat(header, ents), n)
        }
    }
}

/// `mlx5_umr_fill_inl_bsf_t10dif`.
fn t10_inl(kind: &Kind) -> BsfInl {
    let Kind::T10 { csum, seed_ones, app, ref_tag, remap, escape } = *kind else { return BsfInl::default() };
    BsfInl {
        vld: true,
        refresh: true,
        dif_apptag: app,
        dif_reftag: ref_tag,
        sig_type: if csum { t10dif::IPCS } else { t10dif::CRC },
        repeat_block: true,
        seed: seed_ones,
        inc_reftag: remap,
        appref_escape: escape == Escape::AppRef,
        apptag_escape: escape == Escape::App,
        dif_app_bitmask_check: 0xffff,
    }
}

/// `mlx5_umr_crc_bfs`: 0 for T10-DIF.
fn crc_bfs(kind: &Kind) -> u8 {
    let Kind::Crc { crc_type, seed_ones } = *kind else { return 0 };
    let base = match crc_type {
        sig::CRC32 => bfs::CRC32_BASE,
        sig::CRC32C => bfs::CRC32C_BASE,
        _ => bfs::CRC64_XP10_BASE,
    };
    base | bfs::CRC_REPEAT_BIT | if seed_ones { 0 } else { bfs::CRC_SEED_BIT }
}

fn domain_parts(d: &Domain) -> (u8, BsfInl, u8) {
    (crc_bfs(&d.kind), t10_inl(&d.kind), bytes_selector(d.bs))
}

/// `mlx5_umr_fill_sig_bsf` (without a crypto BSF).
pub(in crate::provider) fn sig_bsf(s: &SigBsf) -> Bsf {
    let mut b = Bsf::default();
    let cfg = &s.cfg;
    b.basic.bsf_size = bsf_size::WITH_INLINE;
    b.basic.raw_data_size = bsf::RAW_DATA_SIZE_ANY;
    if cfg.mem.is_some() || cfg.wire.is_some() {
        b.basic.check_byte_mask = cfg.check_mask;
    }
    if let Some(d) = &cfg.mem {
        let (f, inl, sel) = domain_parts(d);
        (b.basic.m_bfs, b.m_inl, b.basic.mem_bs_selector, b.basic.m_psv) = (f, inl, sel, s.mem_psv);
    }
    if let Some(d) = &cfg.wire {
        let (f, inl, sel) = domain_parts(d);
        (b.basic.w_bfs, b.w_inl, b.basic.w_psv) = (f, inl, s.wire_psv);
        b.basic.sbs = cfg.sbs;
        b.basic.wire = if cfg.sbs { cfg.copy_mask } else { sel };
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::contract::decode;
    use crate::device::translation::{Klm, RepeatEntry};
    use crate::signature::SigConfig;

    fn ctrl_fields() -> CtrlFields {
        CtrlFields { wqe_index: 5, qpn: 0x123, signaled: true, solicited: false, fm: 0 }
    }

    fn round_trip(kind: WqeKind) -> Result<(), FieldError> {
        let bytes = encode(&kind, ctrl_fields())?;
        let w = decode(&bytes);
        assert_eq!(w.kind.as_ref(), Some(&kind), "{kind:?} reads back from its bytes");
        assert_eq!((w.index, w.opcode, w.signaled), (5, kind.opcode(), true));
        assert_eq!(w.bbs as usize, bytes.len() / 64);
        Ok(())
    }

    #[test]
    fn every_wqe_the_provider_writes_reads_back() -> Result<(), FieldError> {
        let sge: crate::device::contract::SgeList = vec![Sge { addr: 0x1000, length: 64, lkey: 0x300 }].into();
        round_trip(WqeKind::Write { rkey: 7, raddr: 0x2000, sge: sge.clone(), imm: None, inline: None })?;
        round_trip(WqeKind::Write { rkey: 7, raddr: 0x2000, sge: sge.clone(), imm: Some(0xabcd), inline: None })?;
        round_trip(WqeKind::Read { rkey: 7, raddr: 0x2000, sge: sge.clone(), inline: None })?;
        round_trip(WqeKind::Send { sge: sge.clone(), imm: None, inv: Some(0x4501), inline: None })?;
        // Inline data: 1 byte, a segment's worth, and a length that spills into a second block.
        let empty = crate::device::contract::SgeList::new();
        for n in [1usize, 12, 13, 100] {
            let bytes: Vec<u8> = (0..n).map(|i| i as u8 ^ 0x5a).collect();
            round_trip(WqeKind::Send { sge: empty.clone(), imm: Some(3), inv: None, inline: Some(bytes.clone()) })?;
            round_trip(WqeKind::Write { rkey: 7, raddr: 0x2000, sge: empty.clone(), imm: None, inline: Some(bytes) })?;
        }
        round_trip(WqeKind::LocalInv { key: 0x4502 })?;
        round_trip(WqeKind::SetPsv { psv: 9, transient: 0xffff_0000_1234_5678 })?;
        let t10 = Domain {
            kind: Kind::T10 { csum: false, seed_ones: true, app: 0x55, ref_tag: 7, remap: true, escape: Escape::App },
            bs: 512,
        };
        let crc = Domain { kind: Kind::Crc { crc_type: sig::CRC32C, seed_ones: false }, bs: 4096 };
        for (mem, wire, sbs) in [(Some(t10), Some(t10), true), (Some(crc), None, false), (None, Some(t10), false)] {
            let cfg = SigConfig { mem, wire, check_mask: 0xc0, copy_mask: if sbs { 0xff } else { 0 }, sbs };
            round_trip(WqeKind::Umr(UmrWqe {
                index: 0x44,
                tag: 3,
                access: Some(AccessFlags::LOCAL_WRITE.bits() | AccessFlags::REMOTE_READ.bits()),
                layout: Some((96, Translation::Klm(vec![Klm { byte_count: 96, key: 0x300, addr: 0x1000 }]))),
                bsf_disable: false,
                // A BSF names the PSV of each domain it has.
                sig_bsf: Some(SigBsf {
                    cfg,
                    mem_psv: if mem.is_some() { 0x10 } else { 0 },
                    wire_psv: if wire.is_some() { 0x11 } else { 0 },
                }),
                sig_err_count: None,
                crypto_bsf: None,
            }))?;
        }
        let repeat = Translation::Repeat {
            repeat_count: 4,
            entries: vec![RepeatEntry { stride: 32, byte_count: 16, key: 0x300, addr: 0x1000 }],
        };
        round_trip(WqeKind::Umr(UmrWqe {
            index: 0x45,
            tag: 0,
            access: None,
            layout: Some((64, repeat)),
            bsf_disable: true,
            sig_bsf: None,
            sig_err_count: Some(1),
            crypto_bsf: None,
        }))
    }

    fn sge_list() -> impl proptest::strategy::Strategy<Value = Vec<Sge>> {
        use proptest::prelude::*;
        let sge = (any::<u64>(), prop_oneof![Just(0u32), any::<u32>()], any::<u32>())
            .prop_map(|(addr, length, lkey)| Sge { addr, length, lkey });
        proptest::collection::vec(sge, 0..70)
    }

    proptest::proptest! {
        #[test]
        fn data_wqes_are_written_as_the_segment_codecs_write_them(
            sge in sge_list(),
            which in 0u8..6,
            (rkey, raddr, imm) in proptest::prelude::any::<(u32, u64, u32)>(),
            (wqe_index, qpn) in (proptest::prelude::any::<u16>(), proptest::prop_oneof![0u32..0x100_0000, proptest::prelude::any::<u32>()]),
            (signaled, solicited, fm) in (proptest::prelude::any::<bool>(), proptest::prelude::any::<bool>(), 0u8..10),
        ) {
            let d = match which {
                0 => DataWqe::Write { rkey, raddr, sge: &sge, imm: None, inl: None },
                1 => DataWqe::Write { rkey, raddr, sge: &sge, imm: Some(imm), inl: None },
                2 => DataWqe::Read { rkey, raddr, sge: &sge, inl: None },
                3 => DataWqe::Send { sge: &sge, imm: None, inv: None, inl: None },
                4 => DataWqe::Send { sge: &sge, imm: Some(imm), inv: None, inl: None },
                _ => DataWqe::Send { sge: &sge, imm: Some(imm), inv: Some(rkey), inl: None },
            };
            let c = CtrlFields { wqe_index, qpn, signaled, solicited, fm };
            let mut out = vec![0xee; 3];
            let fast = encode_data(&d, c, &mut out).map(|()| out.split_off(3));
            proptest::prop_assert_eq!(fast, encode(&d.kind(), c));
            proptest::prop_assert_eq!(out, vec![0xee; 3]);
            // The post's one-block lane writes exactly the WQEs that fit a block, over
            // whatever the slot held.
            let mut slot = [0xa5; SEND_WQE_BB];
            let fits = encode(&d.kind(), c).is_ok_and(|b| b.len() == SEND_WQE_BB);
            proptest::prop_assert_eq!(one_block_into(&d, c, &mut slot), fits);
            if fits {
                proptest::prop_assert_eq!(Ok(slot.to_vec()), encode(&d.kind(), c));
            } else {
                proptest::prop_assert_eq!(slot, [0xa5; SEND_WQE_BB]);
            }
        }
    }

    #[test]
    fn crypto_bsfs_read_back_alone_and_after_a_signature_bsf() -> Result<(), Box<dyn std::error::Error>> {
        use mlx5_dv::prm::crypto_bsf::{BsfContext, build};
        let attr = mlx5_dv::CryptoAttr {
            crypto_standard: mlx5_dv::crypto::STANDARD_AES_XTS,
            encrypt_on_tx: true,
            signature_crypto_order: mlx5_dv::crypto::SIGNATURE_BEFORE_CRYPTO_ON_TX,
            data_unit_size: sig::BLOCK_520,
            initial_tweak: [7; 16],
            dek: None,
            keytag: *b"tag12345",
            comp_mask: 0,
        };
        let crc = Domain { kind: Kind::Crc { crc_type: sig::CRC32C, seed_ones: true }, bs: 512 };
        let with_sig = SigBsf {
            cfg: SigConfig { mem: None, wire: Some(crc), check_mask: 0xff, copy_mask: 0, sbs: false },
            mem_psv: 0,
            wire_psv: 5,
        };
        // A reset signature beside crypto: NONE in both domains.
        let none = SigBsf {
            cfg: SigConfig { mem: None, wire: None, check_mask: 0, copy_mask: 0, sbs: false },
            mem_psv: 0,
            wire_psv: 0,
        };
        for sig_bsf in [None, Some(with_sig), Some(none)] {
            let sig = sig_bsf.map(|s| (s.cfg.mem.is_some(), s.cfg.wire.is_some()));
            let c = build(&attr, BsfContext { dek_id: 0x12_3456, multi_block: true, sig })
                .map_err(|e| format!("errno {e}"))?;
            let u = UmrWqe {
                index: 0x46,
                tag: 1,
                access: None,
                layout: Some((520, Translation::Klm(vec![Klm { byte_count: 520, key: 0x300, addr: 0x1000 }]))),
                bsf_disable: false,
                sig_bsf,
                sig_err_count: None,
                crypto_bsf: Some(c),
            };
            let bytes = encode(&WqeKind::Umr(u.clone()), ctrl_fields())?;
            let octowords = u16::from_be_bytes([bytes[16 + 6], bytes[16 + 7]]);
            assert_eq!(octowords, if sig_bsf.is_some() { 8 } else { 4 }, "bsf_octowords");
            if sig_bsf.is_some() {
                let bsf_at = bytes.len() - 128;
                assert_eq!(bytes[bsf_at] >> 6, bsf_size::SIG_AND_CRYPTO, "the signature BSF announces both");
                assert_eq!(bytes[bsf_at + 64], 3 << 6 | 1);
            }
            round_trip(WqeKind::Umr(u))?;
        }
        Ok(())
    }

    #[test]
    fn a_list_configure_has_libmlx5s_sizes_and_masks() -> Result<(), FieldError> {
        let u = UmrWqe {
            index: 0x44,
            tag: 0x12,
            access: Some(AccessFlags::LOCAL_WRITE.bits()),
            layout: Some((48, Translation::Klm(vec![Klm { byte_count: 16, key: 1, addr: 2 }; 3]))),
            bsf_disable: false,
            sig_bsf: None,
            sig_err_count: None,
            crypto_bsf: None,
        };
        let bytes = encode(&WqeKind::Umr(u), ctrl_fields())?;
        // ctrl 16 + umr ctrl 48 + mkc 64 + 3 KLMs padded to 64.
        assert_eq!(bytes.len(), 192);
        assert_eq!(bytes[7] & 0x3f, 12, "ds");
        assert_eq!(&bytes[12..16], &(0x44u32 << 8 | 0x12).to_be_bytes(), "imm is the mkey");
        assert_eq!(&bytes[16 + 4..16 + 6], &4u16.to_be_bytes(), "klm_octowords");
        let mask = u64::from_be_bytes(bytes[16 + 8..16 + 16].try_into().unwrap_or_default());
        use umr_ctrl::mkey_mask as m;
        assert_eq!(
            mask,
            m::FREE
                | m::MKEY
                | m::LEN
                | m::ACCESS_LOCAL_WRITE
                | m::ACCESS_REMOTE_READ
                | m::ACCESS_REMOTE_WRITE
                | m::ACCESS_ATOMIC
        );
        assert_eq!(&bytes[64 + 4..64 + 8], &(0xffff_ff00u32 | 0x12).to_be_bytes(), "qpn_mkey");
        Ok(())
    }
}
