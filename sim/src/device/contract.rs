//! The provider ↔ device contract, as PRM bytes in host memory: send WQEs in a send-queue
//! ring, receive WQEs (data segments) in a receive-queue ring, 64-byte CQEs in a CQ ring, and
//! the doorbell records that carry the producer and consumer counters.
//!
//! [`WqeKind`] is what a send WQE means; the provider encodes it (`provider::wr::encode`) and
//! the device reads it back from the ring with [`decode`]. [`Cqe`] is what the device reports;
//! [`Cqe::encode`] gives the bytes the provider parses at poll time.

use mlx5_dv::prm::FieldError;
use mlx5_dv::prm::cqe::{self, Cqe64, ErrCqe, SigErrCqe};
use mlx5_dv::prm::crypto_bsf::{self, CryptoBsf};
use mlx5_dv::prm::wqe::bsf::{Bsf, bfs};
use mlx5_dv::prm::wqe::compose::{Payload, SendWqe, UmrTranslation, WqeBody};
use mlx5_dv::prm::wqe::{DataSeg, INVALID_LKEY, SEND_WQE_DS, ctrl, opcode, umr_ctrl};
use mlx5_dv::{Sge, sig};

use super::translation::{Klm, RepeatEntry, Translation};
use crate::signature::{Domain, Escape, Kind, SigConfig};
use crate::small::SmallVec;

mod fast;
mod mw;
pub mod tm;

pub use fast::{PlainWrite, decode_at, linearise, plain_write_at};
pub use mw::{BindMwWqe, MwRange, NO_QPN, bind_body};

/// The gather or scatter list of a send WQE: up to 4 entries in place, without allocation.
pub type SgeList = SmallVec<Sge, 4>;

/// Offset of the send doorbell counter in a QP's doorbell record (`MLX5_SND_DBR`).
pub const SND_DBR: u64 = 4;
/// Offset of the receive doorbell counter in a QP's doorbell record (`MLX5_RCV_DBR`).
pub const RCV_DBR: u64 = 0;
/// `MLX5_INLINE_SCATTER_32`: in `op_own`, the CQE carries up to 32 bytes of the message.
pub const INLINE_SCATTER_32: u8 = 0x4;
/// `MLX5_INLINE_SCATTER_64`: in `op_own`, the first 64 bytes of a 128-byte CQE carry up to
/// 64 bytes of the message.
pub const INLINE_SCATTER_64: u8 = 0x8;
/// Bytes of a message a 64-byte CQE carries inline.
pub const SCATTER_TO_CQE_MAX: usize = 32;

/// A work queue in host memory: `wqe_cnt` slots of `stride` bytes at `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueBuf {
    /// Host address of slot 0.
    pub addr: u64,
    /// Slots (a power of two, or 0 for no queue).
    pub wqe_cnt: u32,
    /// Bytes per slot.
    pub stride: u32,
}

impl QueueBuf {
    /// Bytes the queue spans.
    pub fn len(&self) -> usize {
        self.wqe_cnt as usize * self.stride as usize
    }

    /// True for a queue with no slots.
    pub fn is_empty(&self) -> bool {
        self.wqe_cnt == 0
    }

    /// Host address of the slot a counter points at.
    pub fn slot(&self, counter: u32) -> u64 {
        let i = counter & self.wqe_cnt.saturating_sub(1);
        self.addr.wrapping_add(u64::from(i) * u64::from(self.stride))
    }
}

/// A signature BSF: the configuration and the PSVs of its domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SigBsf {
    /// The domains and masks.
    pub cfg: SigConfig,
    /// The memory domain's PSV.
    pub mem_psv: u32,
    /// The wire domain's PSV.
    pub wire_psv: u32,
}

/// What a UMR WQE writes into an mkey (the fields of its mkey context segment under the mask).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UmrWqe {
    /// The target mkey index (`imm >> 8`).
    pub index: u32,
    /// The new tag (`qpn_mkey & 0xff`).
    pub tag: u8,
    /// New access flags (`IBV_ACCESS_*` of LW|RR|RW|A), if the setter ran.
    pub access: Option<u32>,
    /// New length and translation, if a layout setter ran.
    pub layout: Option<(u64, Translation)>,
    /// BSF enable written as 0 (signature mkey without attributes).
    pub bsf_disable: bool,
    /// A new signature BSF.
    pub sig_bsf: Option<SigBsf>,
    /// The signature error count written (`expected_sigerr_count`), when the provider
    /// acknowledges an error.
    pub sig_err_count: Option<u8>,
    /// A new crypto BSF, after the signature BSF when both are written.
    pub crypto_bsf: Option<CryptoBsf>,
}

/// What a send WQE asks the device to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WqeKind {
    /// RDMA WRITE, with immediate if `imm`.
    Write {
        /// Remote key.
        rkey: u32,
        /// Remote address.
        raddr: u64,
        /// Local gather list.
        sge: SgeList,
        /// Immediate data.
        imm: Option<u32>,
        /// The payload carried in the WQE (`MLX5_INLINE_SEG`) instead of gathered.
        inline: Option<Vec<u8>>,
    },
    /// RDMA READ.
    Read {
        /// Remote key.
        rkey: u32,
        /// Remote address.
        raddr: u64,
        /// Local scatter list.
        sge: SgeList,
        /// Inline data where a scatter list belongs: the device cannot place the response.
        inline: Option<Vec<u8>>,
    },
    /// SEND, with immediate or with invalidate.
    Send {
        /// Local gather list.
        sge: SgeList,
        /// Immediate data.
        imm: Option<u32>,
        /// The rkey the responder invalidates.
        inv: Option<u32>,
        /// The payload carried in the WQE (`MLX5_INLINE_SEG`) instead of gathered.
        inline: Option<Vec<u8>>,
    },
    /// Atomic compare-and-swap (with `compare`) or fetch-and-add (without) of the 8 bytes at
    /// `raddr`; the original value lands in `sge`.
    Atomic {
        /// Remote key.
        rkey: u32,
        /// Remote address.
        raddr: u64,
        /// The swap value, or the addend.
        swap_add: u64,
        /// The compare value of a compare-and-swap.
        compare: Option<u64>,
        /// Local scatter list (libmlx5 writes one 8-byte entry).
        sge: SgeList,
    },
    /// LOCAL_INV of `key` (a UMR that frees the mkey).
    LocalInv {
        /// The key to invalidate.
        key: u32,
    },
    /// UMR (mkey configure).
    Umr(UmrWqe),
    /// A memory window bind (a UMR).
    BindMw(BindMwWqe),
    /// NOP: completes and moves nothing (what `mlx5dv_qp_cancel_posted_send_wrs` leaves).
    Nop,
    /// SET_PSV: re-initialise a PSV.
    SetPsv {
        /// The PSV number.
        psv: u32,
        /// The transient signature written.
        transient: u64,
    },
    /// MMO with opmod DMA: copy `src` to `dest` (their byte counts equal; 0 is 2 GiB),
    /// with the PD's scratch buffer `scratch` (lkey, address).
    Memcpy {
        /// Where the bytes come from (local read).
        src: Sge,
        /// Where they go (local write).
        dest: Sge,
        /// The metadata segment's local key and address.
        scratch: (u32, u64),
    },
}

impl WqeKind {
    /// The mlx5 WQE opcode (`MLX5_OPCODE_*`).
    pub fn opcode(&self) -> u8 {
        match self {
            WqeKind::Write { imm: None, .. } => opcode::RDMA_WRITE,
            WqeKind::Write { imm: Some(_), .. } => opcode::RDMA_WRITE_IMM,
            WqeKind::Read { .. } => opcode::RDMA_READ,
            WqeKind::Send { inv: Some(_), .. } => opcode::SEND_INVAL,
            WqeKind::Send { imm: Some(_), .. } => opcode::SEND_IMM,
            WqeKind::Send { .. } => opcode::SEND,
            WqeKind::Atomic { compare: Some(_), .. } => opcode::ATOMIC_CS,
            WqeKind::Atomic { compare: None, .. } => opcode::ATOMIC_FA,
            WqeKind::LocalInv { .. } | WqeKind::Umr(_) | WqeKind::BindMw(_) => opcode::UMR,
            WqeKind::SetPsv { .. } => opcode::SET_PSV,
            WqeKind::Nop => opcode::NOP,
            WqeKind::Memcpy { .. } => opcode::MMO,
        }
    }
}

/// A send WQE as the device read it from the ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wqe {
    /// `wqe_index` of its control segment: the CQE's `wqe_counter`.
    pub index: u16,
    /// `MLX5_OPCODE_*` of its control segment.
    pub opcode: u8,
    /// The control segment asks for a CQE.
    pub signaled: bool,
    /// The control segment's solicited-event bit: the responder's CQE carries it.
    pub solicited: bool,
    /// What it does, or `None` for bytes the device cannot parse.
    pub kind: Option<WqeKind>,
    /// Basic blocks it spans.
    pub bbs: u32,
}

fn sge_of(d: &DataSeg) -> Sge {
    Sge { addr: d.addr, length: d.byte_count, lkey: d.lkey }
}

fn gather(p: &Payload) -> SgeList {
    match p {
        Payload::Gather(segs) => segs.iter().map(sge_of).collect(),
        Payload::Inline(_) => SgeList::new(),
    }
}

/// The bytes of an inline payload.
fn inline_of(p: &Payload) -> Option<Vec<u8>> {
    match p {
        Payload::Gather(_) => None,
        Payload::Inline(bytes) => Some(bytes.clone()),
    }
}

/// Bytes of a block-size selector (`bs_to_bs_selector`'s inverse).
fn selector_bytes(selector: u8) -> Option<usize> {
    let i = mlx5_dv::prm::wqe::bsf::BS_SELECTOR.iter().position(|&s| s == selector)?;
    sig::block_bytes(u32::try_from(i).ok()?)
}

/// The selector of a block of `bytes` data bytes.
pub fn bytes_selector(bytes: usize) -> u8 {
    [512, 520, 4048, 4096, 4160]
        .iter()
        .position(|&b| b == bytes)
        .and_then(|i| mlx5_dv::prm::wqe::bsf::BS_SELECTOR.get(i).copied())
        .unwrap_or(0)
}

fn t10_of(inl: &mlx5_dv::prm::wqe::bsf::BsfInl, bs: usize) -> Domain {
    let escape = if inl.appref_escape {
        Escape::AppRef
    } else if inl.apptag_escape {
        Escape::App
    } else {
        Escape::None
    };
    let kind = Kind::T10 {
        csum: inl.sig_type == mlx5_dv::prm::wqe::bsf::t10dif::IPCS,
        seed_ones: inl.seed,
        app: inl.dif_apptag,
        ref_tag: inl.dif_reftag,
        remap: inl.inc_reftag,
        escape,
    };
    Domain { kind, bs }
}

fn crc_of(selector: u8, bs: usize) -> Option<Domain> {
    let crc_type = match selector & 0xf0 {
        bfs::CRC32_BASE => sig::CRC32,
        bfs::CRC32C_BASE => sig::CRC32C,
        bfs::CRC64_XP10_BASE => sig::CRC64_XP10,
        _ => return None,
    };
    Some(Domain { kind: Kind::Crc { crc_type, seed_ones: selector & bfs::CRC_SEED_BIT == 0 }, bs })
}

/// The signature configuration a BSF describes; `None` for one the device would refuse.
pub fn sig_of_bsf(b: &Bsf) -> Option<SigBsf> {
    let basic = &b.basic;
    let mem_bs = selector_bytes(basic.mem_bs_selector);
    let mem = match (b.m_inl.vld, basic.m_bfs) {
        (true, _) => Some(t10_of(&b.m_inl, mem_bs?)),
        (false, 0) => None,
        (false, f) => Some(crc_of(f, mem_bs?)?),
    };
    let wire_bs = if basic.sbs { mem_bs } else { selector_bytes(basic.wire) };
    let wire = match (b.w_inl.vld, basic.w_bfs) {
        (true, _) => Some(t10_of(&b.w_inl, wire_bs?)),
        (false, 0) => None,
        (false, f) => Some(crc_of(f, wire_bs?)?),
    };
    let cfg = SigConfig {
        mem,
        wire,
        check_mask: basic.check_byte_mask,
        copy_mask: if basic.sbs { basic.wire } else { 0 },
        sbs: basic.sbs,
    };
    Some(SigBsf { cfg, mem_psv: basic.m_psv, wire_psv: basic.w_psv })
}

fn translation_of(x: &UmrTranslation) -> Translation {
    match x {
        UmrTranslation::None => Translation::None,
        UmrTranslation::Klm(entries) => Translation::Klm(
            entries
                .iter()
                .filter(|e| e.byte_count != 0 || e.mkey != 0 || e.address != 0)
                .map(|e| Klm { byte_count: e.byte_count, key: e.mkey, addr: e.address })
                .collect(),
        ),
        UmrTranslation::Repeat(header, entries) => Translation::Repeat {
            repeat_count: header.repeat_count,
            entries: entries
                .iter()
                .map(|e| RepeatEntry { stride: e.stride, byte_count: e.byte_count, key: e.memkey, addr: e.va })
                .collect(),
        },
    }
}

fn umr_of(c: &ctrl::CtrlSeg, body: &WqeBody) -> Option<WqeKind> {
    use umr_ctrl::mkey_mask as m;
    let WqeBody::Umr { umr, mkc: k, translation, bsf } = body else { return None };
    let mask = umr.mkey_mask;
    // A type-1 window's unbind frees it too, but without CHECK_QPN: a bind, read below.
    let unbind1 = umr.flags & (umr_ctrl::flags::TRANSLATION_OFFSET | umr_ctrl::flags::CHECK_QPN)
        == umr_ctrl::flags::TRANSLATION_OFFSET;
    if mask & m::FREE != 0 && k.free && !unbind1 {
        return Some(WqeKind::LocalInv { key: c.imm });
    }
    if let Some(bind) = mw::bind_of(c.imm, umr, k, translation) {
        return Some(bind);
    }
    let access_bits = m::ACCESS_LOCAL_WRITE | m::ACCESS_REMOTE_READ | m::ACCESS_REMOTE_WRITE | m::ACCESS_ATOMIC;
    let access = (mask & access_bits != 0).then(|| {
        use mlx5_dv::AccessFlags as A;
        [(k.lw, A::LOCAL_WRITE), (k.rr, A::REMOTE_READ), (k.rw, A::REMOTE_WRITE), (k.a, A::REMOTE_ATOMIC)]
            .into_iter()
            .filter(|(on, _)| *on)
            .fold(0, |acc, (_, f)| acc | f.bits())
    });
    let layout = (mask & m::LEN != 0).then(|| (k.len, translation_of(translation)));
    let bsf_on = mask & m::BSF_ENABLE != 0;
    let (sig_bsf, crypto_bsf) = if bsf_on && k.bsf_en { bsfs_of(bsf)? } else { (None, None) };
    let sig_err_count = (mask & m::SIG_ERR != 0).then_some(u8::from(k.expected_sigerr_count));
    Some(WqeKind::Umr(UmrWqe {
        index: c.imm >> 8,
        tag: k.mkey_7_0,
        access,
        layout,
        bsf_disable: bsf_on && !k.bsf_en,
        sig_bsf,
        sig_err_count,
        crypto_bsf,
    }))
}

/// An mkey's crypto configuration, as its crypto BSF gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CryptoBsfConfig {
    /// `enc_order` (`MLX5_ENCRYPTION_ORDER_*`).
    pub enc_order: u8,
    /// Data unit bytes.
    pub dus: usize,
    /// The initial tweak, little-endian (as the user gave it).
    pub initial_tweak: [u8; 16],
    /// The DEK object id.
    pub dek: u32,
    /// The keytag.
    pub keytag: [u8; 8],
}

impl CryptoBsfConfig {
    /// Memory holds plaintext and the wire ciphertext (TX encrypts).
    pub fn encrypt_on_tx(&self) -> bool {
        use mlx5_dv::prm::crypto_bsf::enc_order as o;
        matches!(self.enc_order, o::ENCRYPTED_WIRE_SIGNATURE | o::ENCRYPTED_RAW_WIRE)
    }

    /// The cipher sits next to memory (TX: crypto, then signature); otherwise next to the
    /// wire (TX: signature, then crypto).
    pub fn memory_side(&self) -> bool {
        use mlx5_dv::prm::crypto_bsf::enc_order as o;
        matches!(self.enc_order, o::ENCRYPTED_MEMORY_SIGNATURE | o::ENCRYPTED_RAW_WIRE)
    }
}

/// The crypto configuration a crypto BSF describes; the multi-block engine reads the tweak
/// big-endian. `None` for a data unit selector the device does not know.
pub fn crypto_of_bsf(b: &CryptoBsf, multi_block: bool) -> Option<CryptoBsfConfig> {
    let mut initial_tweak = b.xts_init_tweak;
    if multi_block {
        initial_tweak.reverse();
    }
    Some(CryptoBsfConfig {
        enc_order: b.fields.enc_order,
        dus: selector_bytes(b.fields.bs_pointer)?,
        initial_tweak,
        dek: b.fields.dek_pointer,
        keytag: b.keytag,
    })
}

/// The BSFs of a UMR: a signature BSF, a crypto BSF, or a signature BSF followed by a
/// crypto BSF (`bsf_size` SIG_AND_CRYPTO); `None` for bytes the device would refuse.
fn bsfs_of(bsf: &[u8]) -> Option<(Option<SigBsf>, Option<CryptoBsf>)> {
    let is_crypto = |b: &[u8]| b.first().is_some_and(|b0| b0 & 0x3f == crypto_bsf::TYPE_CRYPTO);
    match bsf.len() {
        n if n == crypto_bsf::SIZE && is_crypto(bsf) => Some((None, Some(CryptoBsf::decode(bsf).ok()?))),
        n if n == mlx5_dv::prm::wqe::bsf::SIZE => Some((Some(sig_of_bsf(&Bsf::decode(bsf).ok()?)?), None)),
        n if n == mlx5_dv::prm::wqe::bsf::SIZE + crypto_bsf::SIZE => {
            let (s, c) = bsf.split_at(mlx5_dv::prm::wqe::bsf::SIZE);
            if !is_crypto(c) {
                return None;
            }
            Some((Some(sig_of_bsf(&Bsf::decode(s).ok()?)?), Some(CryptoBsf::decode(c).ok()?)))
        }
        _ => None,
    }
}

/// What a WQE's decoded bytes ask for; `None` for an opcode or layout the device refuses.
fn kind_of(w: &SendWqe) -> Option<WqeKind> {
    let c = &w.ctrl;
    Some(match (c.opcode, &w.body) {
        (opcode::RDMA_WRITE, WqeBody::Rdma { raddr, payload }) => {
            let (rkey, raddr, sge, inline) = (raddr.rkey, raddr.raddr, gather(payload), inline_of(payload));
            WqeKind::Write { rkey, raddr, sge, imm: None, inline }
        }
        (opcode::RDMA_WRITE_IMM, WqeBody::Rdma { raddr, payload }) => {
            let (rkey, raddr, sge, inline) = (raddr.rkey, raddr.raddr, gather(payload), inline_of(payload));
            WqeKind::Write { rkey, raddr, sge, imm: Some(c.imm), inline }
        }
        (opcode::RDMA_READ, WqeBody::Rdma { raddr, payload }) => {
            WqeKind::Read { rkey: raddr.rkey, raddr: raddr.raddr, sge: gather(payload), inline: inline_of(payload) }
        }
        (opcode::SEND, WqeBody::Send(p)) => {
            WqeKind::Send { sge: gather(p), imm: None, inv: None, inline: inline_of(p) }
        }
        (opcode::SEND_IMM, WqeBody::Send(p)) => {
            WqeKind::Send { sge: gather(p), imm: Some(c.imm), inv: None, inline: inline_of(p) }
        }
        (opcode::SEND_INVAL, WqeBody::Send(p)) => {
            WqeKind::Send { sge: gather(p), imm: None, inv: Some(c.imm), inline: inline_of(p) }
        }
        (opcode::ATOMIC_CS | opcode::ATOMIC_FA, WqeBody::Atomic { raddr, atomic, payload }) => WqeKind::Atomic {
            rkey: raddr.rkey,
            raddr: raddr.raddr,
            swap_add: atomic.swap_add,
            compare: (c.opcode == opcode::ATOMIC_CS).then_some(atomic.compare),
            // Inline data cannot receive the original value: the WQE is refused.
            sge: match payload {
                Payload::Gather(_) => gather(payload),
                Payload::Inline(_) => return None,
            },
        },
        (opcode::UMR, body) => umr_of(c, body)?,
        (opcode::SET_PSV, WqeBody::SetPsv(p)) => WqeKind::SetPsv { psv: p.psv_index, transient: p.transient_signature },
        (opcode::NOP, _) => WqeKind::Nop,
        // Of the MMO engines only the DMA copy is simulated.
        (opcode::MMO, WqeBody::Mmo { meta, src, dest }) if c.opmod == mlx5_dv::prm::wqe::mmo::OPC_MOD_DMA => {
            WqeKind::Memcpy { src: sge_of(src), dest: sge_of(dest), scratch: (meta.local_key, meta.local_address) }
        }
        _ => return None,
    })
}

/// An XRC initiator's WQE without its XRC segment (16 bytes after the control segment, the
/// remote SRQ number in its first 4), as an RC WQE of the same opcode, and that SRQ number.
/// `None` for a WQE libmlx5 writes without one (LOCAL_INV, UMR, NOP and the rest).
pub fn strip_xrc(bytes: &[u8]) -> Option<(Vec<u8>, u32)> {
    use mlx5_dv::prm::wqe::{SEND_WQE_BB, SEND_WQE_DS};
    let data = fast::is_data(bytes) || matches!(*bytes.get(3)?, opcode::ATOMIC_CS | opcode::ATOMIC_FA);
    let ds = bytes.get(7)? & 0x3f;
    if !data || ds < 2 {
        return None;
    }
    let srqn = u32::from_be_bytes(bytes.get(16..20)?.try_into().ok()?) & 0xff_ffff;
    let used = (usize::from(ds) * SEND_WQE_DS).min(bytes.len());
    let mut out = Vec::with_capacity(used);
    out.extend_from_slice(bytes.get(..SEND_WQE_DS)?);
    out.extend_from_slice(bytes.get(2 * SEND_WQE_DS..used).unwrap_or_default());
    out[7] = (out[7] & !0x3f) | (ds - 1);
    out.resize(out.len().next_multiple_of(SEND_WQE_BB).max(SEND_WQE_BB), 0);
    Some((out, srqn))
}

/// [`decode_at`] for a QP of service type XRC: an initiator's data WQE read without its XRC
/// segment, spanning the basic blocks it takes with it.
pub fn decode_xrc_at(ring: &[u8], index: usize) -> Option<Wqe> {
    let l = linearise(ring, index)?;
    let Some((bytes, _)) = strip_xrc(&l) else { return Some(decode(&l)) };
    let bbs = decode(&l).bbs;
    Some(Wqe { bbs, ..decode(&bytes) })
}

/// Read the send WQE in `bytes` (linear, starting at its control segment). A WQE whose
/// control segment cannot be read spans one basic block and means nothing.
pub fn decode(bytes: &[u8]) -> Wqe {
    // Data WQEs, the bulk of any queue, are read straight from their bytes.
    if fast::is_data(bytes) { fast::data_wqe(bytes) } else { decode_segments(bytes) }
}

/// [`decode`] through the segment codecs, for every opcode.
fn decode_segments(bytes: &[u8]) -> Wqe {
    let Ok(c) = ctrl::CtrlSeg::decode(bytes) else {
        return Wqe { index: 0, opcode: 0xff, signaled: false, solicited: false, kind: None, bbs: 1 };
    };
    let bbs = c.wqebbs().max(1);
    let kind = SendWqe::decode(bytes).ok().and_then(|w| kind_of(&w));
    let bbs = u32::try_from(bbs).unwrap_or(u32::MAX);
    Wqe { index: c.wqe_index, opcode: c.opcode, signaled: c.ce == ctrl::CE_CQ_UPDATE, solicited: c.se, kind, bbs }
}

/// A receive WQE as the device read it: its slot counter and scatter list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWqe {
    /// The slot counter: the CQE's `wqe_counter`.
    pub index: u16,
    /// Scatter entries up to the first with `MLX5_INVALID_LKEY`.
    pub sge: Vec<Sge>,
}

/// Read a receive WQE of up to `bytes.len() / 16` data segments.
pub fn decode_recv(index: u16, bytes: &[u8]) -> RecvWqe {
    let sge = bytes
        .chunks_exact(SEND_WQE_DS)
        .map_while(|b| DataSeg::decode(b).ok())
        .take_while(|d| d.lkey != INVALID_LKEY)
        .map(|d| sge_of(&d))
        .collect();
    RecvWqe { index, sge }
}

/// A signature error as a SIG_ERR CQE reports it (`struct mlx5_sigerr_cqe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct SigErrInfo {
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

/// A CQE as the device reports it, before it becomes bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cqe {
    /// A requester completion.
    Req {
        /// The QP.
        qpn: u32,
        /// The completed WQE's `wqe_index`.
        wqe_counter: u16,
        /// Its `MLX5_OPCODE_*`.
        wqe_opcode: u8,
        /// Bytes an RDMA READ moved.
        byte_cnt: u32,
    },
    /// A responder completion.
    Resp {
        /// The QP.
        qpn: u32,
        /// The receive WQE's slot counter.
        wqe_counter: u16,
        /// `MLX5_CQE_RESP_*`.
        opcode: u8,
        /// Bytes received.
        byte_cnt: u32,
        /// Immediate data or the invalidated rkey.
        imm: u32,
        /// The message itself, for a small one the device scatters to the CQE.
        inline: Option<Vec<u8>>,
        /// Where the message came from: the QP number, the port's LID and the top byte of
        /// `flags_rqpn` (service level, GRH).
        from: Sender,
        /// The sender asked for a solicited event (`IBV_SEND_SOLICITED`).
        se: bool,
    },
    /// A requester or responder error.
    Err {
        /// The QP.
        qpn: u32,
        /// The failed WQE's counter.
        wqe_counter: u16,
        /// Requester (REQ_ERR) or responder (RESP_ERR).
        requester: bool,
        /// The failed WQE's opcode (requester).
        wqe_opcode: u8,
        /// `MLX5_CQE_SYNDROME_*`.
        syndrome: u8,
        /// The vendor syndrome.
        vendor_err: u8,
        /// `srqn`: the XRC SRQ of a responder error at an XRC target (0 otherwise).
        srqn: u32,
    },
    /// A tag-matching CQE.
    Tm(tm::TmCqe),
    /// A signature error in the mkey `mkey` (index << 8 | tag).
    SigErr {
        /// The QP whose traffic met it.
        qpn: u32,
        /// The mkey.
        mkey: u32,
        /// What went wrong.
        info: SigErrInfo,
    },
}

/// The solicited-event bit of a CQE's `op_own` byte.
pub const SE_BIT: u8 = 1 << 1;

/// Whether a CQE, by its `op_own` byte, wakes a CQ armed for solicited completions only
/// (`MLX5_CQ_DB_REQ_NOT_SOL`): a CQE with the solicited bit, or an error.
pub fn cqe_wakes_solicited(op_own: u8) -> bool {
    matches!(op_own >> 4, cqe::opcode::REQ_ERR | cqe::opcode::RESP_ERR) || op_own & SE_BIT != 0
}

/// The sender of a message, as a responder CQE reports it (`rqpn`, `slid`, `flags`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sender {
    /// The sending QP (24 bits).
    pub qpn: u32,
    /// The sender's LID (InfiniBand; 0 on RoCE).
    pub slid: u16,
    /// The top byte of `flags_rqpn`: the service level (low nibble) and GRH bits.
    pub flags: u8,
    /// `srqn_uidx` of a receive at an XRC target: the XRC SRQ it took (0 otherwise).
    pub srqn: u32,
    /// The flow tag a steering rule gave a raw packet QP's receive (0: none).
    pub flow_tag: u32,
}

impl Cqe {
    /// [`Cqe::encode`] into `out`, whatever it held; on an error `out` is untouched.
    pub fn encode_into(&self, owner: bool, out: &mut [u8; cqe::SIZE]) -> Result<(), FieldError> {
        if let Cqe::Req { qpn, wqe_counter, wqe_opcode, byte_cnt } = *self
            && fast::cqe64_into(out, qpn, wqe_counter, byte_cnt, 0, wqe_opcode, cqe::opcode::REQ, owner)
        {
            return Ok(());
        }
        *out = self.encode(owner)?;
        Ok(())
    }

    /// The 64 bytes of the CQE, with the ownership bit `owner`.
    pub fn encode(&self, owner: bool) -> Result<[u8; cqe::SIZE], FieldError> {
        let mut out = [0u8; cqe::SIZE];
        match self {
            Cqe::Req { qpn, wqe_counter, wqe_opcode, byte_cnt } => {
                if fast::cqe64_into(&mut out, *qpn, *wqe_counter, *byte_cnt, 0, *wqe_opcode, cqe::opcode::REQ, owner) {
                    return Ok(out);
                }
                Cqe64 {
                    sop_drop: *wqe_opcode,
                    qpn: *qpn,
                    wqe_counter: *wqe_counter,
                    byte_cnt: *byte_cnt,
                    opcode: cqe::opcode::REQ,
                    owner,
                    ..Cqe64::default()
                }
                .encode(&mut out)?
            }
            Cqe::Resp { qpn, wqe_counter, opcode, byte_cnt, imm, inline, from, se } => {
                if !fast::cqe64_into(&mut out, *qpn, *wqe_counter, *byte_cnt, *imm, 0, *opcode, owner) {
                    Cqe64 {
                        qpn: *qpn,
                        wqe_counter: *wqe_counter,
                        byte_cnt: *byte_cnt,
                        imm_inval_pkey: *imm,
                        opcode: *opcode,
                        owner,
                        ..Cqe64::default()
                    }
                    .encode(&mut out)?;
                }
                // slid at byte 22, flags_rqpn at 24 (mlx5_cqe64).
                out[22..24].copy_from_slice(&from.slid.to_be_bytes());
                let flags_rqpn = u32::from(from.flags) << 24 | (from.qpn & 0xff_ffff);
                out[24..28].copy_from_slice(&flags_rqpn.to_be_bytes());
                if from.srqn != 0 {
                    // srqn_uidx at byte 32, past the 32 bytes scattered to the CQE.
                    out[32..36].copy_from_slice(&(from.srqn & 0xff_ffff).to_be_bytes());
                }
                if from.flow_tag != 0 && inline.is_none() {
                    // Bytes 4..8, reserved in libmlx5's mlx5_cqe64 (hardware puts the tag in
                    // sop_drop_qpn, where this CQE keeps the QP number).
                    out[4..8].copy_from_slice(&(from.flow_tag & 0xff_ffff).to_be_bytes());
                }
                if *se {
                    out[cqe::SIZE - 1] |= SE_BIT;
                }
                if let Some(data) = inline {
                    let n = data.len().min(SCATTER_TO_CQE_MAX);
                    out[..n].copy_from_slice(&data[..n]);
                    out[cqe::SIZE - 1] |= INLINE_SCATTER_32;
                }
            }
            Cqe::Err { qpn, wqe_counter, requester, wqe_opcode, syndrome, vendor_err, srqn } => ErrCqe {
                srqn: *srqn,
                vendor_err_synd: *vendor_err,
                syndrome: *syndrome,
                s_wqe_opcode: *wqe_opcode,
                qpn: *qpn,
                wqe_counter: *wqe_counter,
                opcode: if *requester { cqe::opcode::REQ_ERR } else { cqe::opcode::RESP_ERR },
                owner,
                ..ErrCqe::default()
            }
            .encode(&mut out)?,
            Cqe::Tm(t) => out = t.encode(owner),
            Cqe::SigErr { mkey, info, .. } => {
                let mut s = SigErrCqe {
                    syndrome: info.syndrome,
                    sig_type: info.sig_type,
                    domain: info.domain,
                    mkey: *mkey,
                    sig_err_offset: info.offset,
                    opcode: cqe::opcode::SIG_ERR,
                    owner,
                    ..SigErrCqe::default()
                };
                s.set_expected(info.expected);
                s.set_actual(info.actual);
                s.encode(&mut out)?;
            }
        }
        Ok(out)
    }
}
