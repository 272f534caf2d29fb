//! Whole send WQEs: a control segment and the segments its opcode implies, as one value that
//! encodes to the bytes of the send queue and decodes back.
//!
//! The provider composes a [`SendWqe`] and writes [`SendWqe::encode`]'s bytes into the ring;
//! the device linearises the WQE's basic blocks and reads it with [`SendWqe::decode`]. What
//! follows the control segment is told apart the way the device does it: by the opcode, by
//! the UMR control segment's sizes, and by the inline bit of a payload's first dword.

use super::atomic;
use super::{
    AtomicSeg, CtrlSeg, DataSeg, InlineSeg, KlmSeg, MkeyContextSeg, MmoMetaSeg, RaddrSeg, RepeatBlockSeg, RepeatEntSeg,
    SEND_WQE_BB, SEND_WQE_DS, SetPsvSeg, UmrCtrlSeg, ctrl, data, inline, klm, mkey_context, mmo, opcode, raddr,
    repeat_block, repeat_ent, set_psv, umr_ctrl,
};
use crate::prm::{Codec, FieldError};

/// The largest WQE the 6-bit `ds` can describe: 63 units of 16 bytes.
pub const MAX_WQE_BYTES: usize = 63 * SEND_WQE_DS;

/// The data a WQE gathers or scatters: pointers, or bytes carried in the WQE itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// Data segments (`mlx5_wqe_data_seg`), in order.
    Gather(Vec<DataSeg>),
    /// Inline data (`mlx5_wqe_inl_data_seg` and the bytes, padded to 16).
    Inline(Vec<u8>),
}

/// The translation a UMR WQE carries inline: a KLM list or a repeat block (the firmware's
/// mkey translation is another type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UmrTranslation {
    /// No translation follows the mkey context.
    None,
    /// A list of KLM entries (zero-length entries pad the list to 64 bytes).
    Klm(Vec<KlmSeg>),
    /// A repeat block header and its entries.
    Repeat(RepeatBlockSeg, Vec<RepeatEntSeg>),
}

/// What follows the control segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WqeBody {
    /// RDMA WRITE (with or without immediate) and RDMA READ: the remote address, then the
    /// local data.
    Rdma {
        /// The remote address segment.
        raddr: RaddrSeg,
        /// The local data.
        payload: Payload,
    },
    /// SEND, SEND with immediate, SEND with invalidate: the local data.
    Send(Payload),
    /// Atomic compare-and-swap and fetch-and-add: the remote address, the operands, then
    /// where the original value lands.
    Atomic {
        /// The remote address segment.
        raddr: RaddrSeg,
        /// The atomic segment.
        atomic: AtomicSeg,
        /// The local data (one data segment of 8 bytes, as libmlx5 writes it).
        payload: Payload,
    },
    /// UMR: the UMR control segment, the mkey context, the inline translation and the BSFs
    /// (kept as bytes: a signature BSF, a crypto BSF, or both).
    Umr {
        /// The UMR control segment.
        umr: UmrCtrlSeg,
        /// The mkey context segment.
        mkc: MkeyContextSeg,
        /// The inline translation.
        translation: UmrTranslation,
        /// `umr.bsf_octowords * 16` bytes of BSF.
        bsf: Vec<u8>,
    },
    /// SET_PSV.
    SetPsv(SetPsvSeg),
    /// MMO (`struct mlx5_mmo_wqe`): the metadata segment, then the source and the
    /// destination data segments.
    Mmo {
        /// The metadata segment.
        meta: MmoMetaSeg,
        /// Where the bytes come from.
        src: DataSeg,
        /// Where they go.
        dest: DataSeg,
    },
    /// NOP and any other opcode: no segments are read.
    Empty,
}

/// One send WQE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWqe {
    /// The control segment; `ds` is set by [`SendWqe::encode`].
    pub ctrl: CtrlSeg,
    /// The segments after it.
    pub body: WqeBody,
}

fn too_short(layout: &'static str, need: usize, len: usize) -> FieldError {
    FieldError::TooShort { layout, need, len }
}

/// Append `value`'s bytes.
fn push<T: Codec>(out: &mut Vec<u8>, value: &T, size: usize) -> Result<(), FieldError> {
    let at = out.len();
    out.resize(at + size, 0);
    value.encode(&mut out[at..])
}

fn pad_to(out: &mut Vec<u8>, unit: usize) {
    let len = out.len().next_multiple_of(unit);
    out.resize(len, 0);
}

fn encode_payload(out: &mut Vec<u8>, p: &Payload) -> Result<(), FieldError> {
    match p {
        Payload::Gather(segs) => segs.iter().try_for_each(|s| push(out, s, data::SIZE)),
        Payload::Inline(bytes) => {
            let n = u32::try_from(bytes.len()).map_err(|_| FieldError::TooWide {
                field: "mlx5_wqe_inl_data_seg.byte_count",
                value: bytes.len() as u64,
            })?;
            push(out, &InlineSeg::new(n), inline::SIZE)?;
            out.extend_from_slice(bytes);
            pad_to(out, SEND_WQE_DS);
            Ok(())
        }
    }
}

fn decode_payload(buf: &[u8]) -> Result<Payload, FieldError> {
    let first = buf.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    match first {
        Some(dword) if dword & super::INLINE_SEG != 0 => {
            let seg = InlineSeg::decode(buf)?;
            let n = usize::try_from(seg.byte_count).unwrap_or(usize::MAX);
            let bytes = buf
                .get(inline::SIZE..)
                .and_then(|b| b.get(..n))
                .ok_or_else(|| too_short("inline data", n.saturating_add(inline::SIZE), buf.len()))?;
            Ok(Payload::Inline(bytes.to_vec()))
        }
        _ => Ok(Payload::Gather(crate::prm::decode_array(buf, buf.len() / data::SIZE, "mlx5_wqe_data_seg list")?)),
    }
}

fn encode_translation(out: &mut Vec<u8>, t: &UmrTranslation) -> Result<(), FieldError> {
    match t {
        UmrTranslation::None => {}
        UmrTranslation::Klm(entries) => entries.iter().try_for_each(|e| push(out, e, klm::SIZE))?,
        UmrTranslation::Repeat(header, entries) => {
            push(out, header, repeat_block::SIZE)?;
            entries.iter().try_for_each(|e| push(out, e, repeat_ent::SIZE))?;
        }
    }
    Ok(())
}

fn decode_translation(buf: &[u8]) -> Result<UmrTranslation, FieldError> {
    if buf.is_empty() {
        return Ok(UmrTranslation::None);
    }
    let op = buf.get(4..8).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    if op == Some(repeat_block::OP_REPEAT_BLOCK) {
        let (header, entries) = RepeatBlockSeg::decode_with_entries(buf)?;
        return Ok(UmrTranslation::Repeat(header, entries));
    }
    Ok(UmrTranslation::Klm(klm::decode_list(buf, buf.len() / klm::SIZE)?))
}

impl SendWqe {
    /// The WQE's bytes: whole basic blocks, `ds` counting the 16-byte units used. Fails if a
    /// value does not fit its field, or the WQE is longer than `ds` can say.
    pub fn encode(&self) -> Result<Vec<u8>, FieldError> {
        let mut out = vec![0u8; ctrl::SIZE];
        match &self.body {
            WqeBody::Rdma { raddr: r, payload } => {
                push(&mut out, r, raddr::SIZE)?;
                encode_payload(&mut out, payload)?;
            }
            WqeBody::Send(payload) => encode_payload(&mut out, payload)?,
            WqeBody::Atomic { raddr: r, atomic: a, payload } => {
                push(&mut out, r, raddr::SIZE)?;
                push(&mut out, a, atomic::SIZE)?;
                encode_payload(&mut out, payload)?;
            }
            WqeBody::Umr { umr, mkc, translation, bsf } => {
                push(&mut out, umr, umr_ctrl::SIZE)?;
                push(&mut out, mkc, mkey_context::SIZE)?;
                let at = out.len();
                encode_translation(&mut out, translation)?;
                let want = at + umr.translation_bytes();
                if out.len() > want {
                    return Err(FieldError::TooWide {
                        field: "mlx5_wqe_umr_ctrl_seg.klm_octowords",
                        value: u64::from(umr.klm_octowords),
                    });
                }
                out.resize(want, 0);
                if bsf.len() != umr.bsf_bytes() {
                    return Err(too_short("BSF", umr.bsf_bytes(), bsf.len()));
                }
                out.extend_from_slice(bsf);
            }
            WqeBody::SetPsv(psv) => push(&mut out, psv, set_psv::SIZE)?,
            WqeBody::Mmo { meta, src, dest } => {
                push(&mut out, meta, mmo::SIZE)?;
                push(&mut out, src, data::SIZE)?;
                push(&mut out, dest, data::SIZE)?;
            }
            WqeBody::Empty => {}
        }
        pad_to(&mut out, SEND_WQE_DS);
        let units = out.len() / SEND_WQE_DS;
        if out.len() > MAX_WQE_BYTES {
            return Err(FieldError::TooWide { field: "mlx5_wqe_ctrl_seg.ds", value: units as u64 });
        }
        let mut c = self.ctrl;
        c.ds = units as u8;
        c.encode(&mut out[..ctrl::SIZE])?;
        pad_to(&mut out, SEND_WQE_BB);
        Ok(out)
    }

    /// Read a WQE from linear bytes starting at its control segment; `ds` bounds what is read.
    pub fn decode(buf: &[u8]) -> Result<Self, FieldError> {
        let c = CtrlSeg::decode(buf)?;
        let len = usize::from(c.ds) * SEND_WQE_DS;
        let wqe = buf.get(..len).ok_or_else(|| too_short("send WQE (ds)", len, buf.len()))?;
        let rest = wqe.get(ctrl::SIZE..).unwrap_or_default();
        let body = match c.opcode {
            opcode::RDMA_WRITE | opcode::RDMA_WRITE_IMM | opcode::RDMA_READ => WqeBody::Rdma {
                raddr: RaddrSeg::decode(rest)?,
                payload: decode_payload(rest.get(raddr::SIZE..).unwrap_or_default())?,
            },
            opcode::SEND | opcode::SEND_IMM | opcode::SEND_INVAL => WqeBody::Send(decode_payload(rest)?),
            opcode::ATOMIC_CS | opcode::ATOMIC_FA => WqeBody::Atomic {
                raddr: RaddrSeg::decode(rest)?,
                atomic: AtomicSeg::decode(rest.get(raddr::SIZE..).unwrap_or_default())?,
                payload: decode_payload(rest.get(raddr::SIZE + atomic::SIZE..).unwrap_or_default())?,
            },
            opcode::UMR => {
                let umr = UmrCtrlSeg::decode(rest)?;
                let after_umr = rest.get(umr_ctrl::SIZE..).unwrap_or_default();
                let mkc = MkeyContextSeg::decode(after_umr)?;
                let after_mkc = after_umr.get(mkey_context::SIZE..).unwrap_or_default();
                let (t, need) = (umr.translation_bytes(), umr.translation_bytes() + umr.bsf_bytes());
                let tail =
                    after_mkc.get(..need).ok_or_else(|| too_short("UMR translation and BSF", need, after_mkc.len()))?;
                let translation = if umr.is_inline() { decode_translation(&tail[..t])? } else { UmrTranslation::None };
                WqeBody::Umr { umr, mkc, translation, bsf: tail[t..].to_vec() }
            }
            opcode::SET_PSV => WqeBody::SetPsv(SetPsvSeg::decode(rest)?),
            opcode::MMO => {
                let at = |n: usize| rest.get(n..).unwrap_or_default();
                WqeBody::Mmo {
                    meta: MmoMetaSeg::decode(rest)?,
                    src: DataSeg::decode(at(mmo::SIZE))?,
                    dest: DataSeg::decode(at(mmo::SIZE + data::SIZE))?,
                }
            }
            _ => WqeBody::Empty,
        };
        Ok(SendWqe { ctrl: c, body })
    }
}

/// Copy the WQE that starts at basic block `index` of a ring of `ring.len() / 64` blocks into
/// linear bytes, following it across the ring's end; `None` for an empty or ragged ring.
pub fn linearise(ring: &[u8], index: usize) -> Option<Vec<u8>> {
    let blocks = ring.len() / SEND_WQE_BB;
    if blocks == 0 || !ring.len().is_multiple_of(SEND_WQE_BB) {
        return None;
    }
    let block = |i: usize| {
        let at = (i % blocks) * SEND_WQE_BB;
        &ring[at..at + SEND_WQE_BB]
    };
    let first = CtrlSeg::decode(block(index)).ok()?;
    let n = first.wqebbs().clamp(1, blocks);
    Some((0..n).flat_map(|i| block(index + i).iter().copied()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ctrl_for(op: u8) -> CtrlSeg {
        CtrlSeg { opcode: op, wqe_index: 7, qpn: 0x1234, ce: ctrl::CE_CQ_UPDATE, ..CtrlSeg::default() }
    }

    #[test]
    fn an_rdma_write_is_ctrl_raddr_then_data_segments() -> Result<(), FieldError> {
        let w = SendWqe {
            ctrl: ctrl_for(opcode::RDMA_WRITE),
            body: WqeBody::Rdma {
                raddr: RaddrSeg { raddr: 0x1000, rkey: 0x55 },
                payload: Payload::Gather(vec![DataSeg { byte_count: 64, lkey: 9, addr: 0x2000 }]),
            },
        };
        let bytes = w.encode()?;
        assert_eq!(bytes.len(), 64);
        assert_eq!(bytes[0x03], opcode::RDMA_WRITE, "opcode in byte 3 of dword 0");
        assert_eq!(bytes[0x07] & 0x3f, 3, "ds: ctrl + raddr + one data segment");
        assert_eq!(&bytes[0x10..0x18], &0x1000u64.to_be_bytes(), "raddr");
        assert_eq!(&bytes[0x20..0x24], &64u32.to_be_bytes(), "data byte_count");
        assert_eq!(SendWqe::decode(&bytes)?.body, w.body);
        Ok(())
    }

    #[test]
    fn an_atomic_is_ctrl_raddr_atomic_then_one_data_segment() -> Result<(), FieldError> {
        let w = SendWqe {
            ctrl: ctrl_for(opcode::ATOMIC_CS),
            body: WqeBody::Atomic {
                raddr: RaddrSeg { raddr: 0x1008, rkey: 0x55 },
                atomic: AtomicSeg { swap_add: 0x1122_3344_5566_7788, compare: 7 },
                payload: Payload::Gather(vec![DataSeg { byte_count: 8, lkey: 9, addr: 0x2000 }]),
            },
        };
        let bytes = w.encode()?;
        assert_eq!(bytes.len(), 64);
        assert_eq!(bytes[0x07] & 0x3f, 4, "ds: ctrl + raddr + atomic + one data segment");
        assert_eq!(&bytes[0x20..0x28], &0x1122_3344_5566_7788u64.to_be_bytes(), "swap_add, big-endian");
        assert_eq!(&bytes[0x28..0x30], &7u64.to_be_bytes(), "compare");
        assert_eq!(&bytes[0x30..0x34], &8u32.to_be_bytes(), "data byte_count");
        assert_eq!(SendWqe::decode(&bytes)?.body, w.body);
        Ok(())
    }

    #[test]
    fn a_dma_copy_is_ctrl_metadata_source_then_destination() -> Result<(), FieldError> {
        let mut c = ctrl_for(opcode::MMO);
        c.opmod = mmo::OPC_MOD_DMA;
        let w = SendWqe {
            ctrl: c,
            body: WqeBody::Mmo {
                meta: MmoMetaSeg { mmo_control: 0, local_key: 0x77, local_address: 0x9000 },
                src: DataSeg { byte_count: 512, lkey: 5, addr: 0x1000 },
                dest: DataSeg { byte_count: 512, lkey: 6, addr: 0x2000 },
            },
        };
        let bytes = w.encode()?;
        assert_eq!(bytes.len(), 64);
        assert_eq!(bytes[0x00], mmo::OPC_MOD_DMA, "opmod in byte 0");
        assert_eq!(bytes[0x07] & 0x3f, 4, "ds: ctrl + metadata + two data segments");
        assert_eq!(&bytes[0x14..0x18], &0x77u32.to_be_bytes(), "local_key");
        assert_eq!(&bytes[0x18..0x20], &0x9000u64.to_be_bytes(), "local_address");
        assert_eq!(&bytes[0x24..0x28], &5u32.to_be_bytes(), "source lkey");
        assert_eq!(&bytes[0x34..0x38], &6u32.to_be_bytes(), "destination lkey");
        assert_eq!(SendWqe::decode(&bytes)?.body, w.body);
        Ok(())
    }

    #[test]
    fn inline_data_is_padded_to_16_and_read_back() -> Result<(), FieldError> {
        let w = SendWqe { ctrl: ctrl_for(opcode::SEND), body: WqeBody::Send(Payload::Inline(b"hello".to_vec())) };
        let bytes = w.encode()?;
        assert_eq!(bytes[0x07] & 0x3f, 2, "ds: ctrl + 4-byte header and 5 bytes, padded to 16");
        assert_eq!(&bytes[0x10..0x14], &(0x8000_0000u32 | 5).to_be_bytes());
        assert_eq!(SendWqe::decode(&bytes)?.body, w.body);
        Ok(())
    }

    #[test]
    fn a_umr_carries_its_translation_and_bsf_at_the_sizes_it_announces() -> Result<(), FieldError> {
        let umr = UmrCtrlSeg { flags: umr_ctrl::flags::INLINE, klm_octowords: 4, bsf_octowords: 4, mkey_mask: 1 };
        let entries = vec![KlmSeg { byte_count: 8, mkey: 3, address: 0x40 }; 2];
        let w = SendWqe {
            ctrl: ctrl_for(opcode::UMR),
            body: WqeBody::Umr {
                umr,
                mkc: MkeyContextSeg::default(),
                translation: UmrTranslation::Klm(entries.clone()),
                bsf: vec![0xab; 64],
            },
        };
        let bytes = w.encode()?;
        assert_eq!(bytes.len(), 16 + 48 + 64 + 64 + 64, "already whole blocks");
        let back = SendWqe::decode(&bytes)?;
        let WqeBody::Umr { translation: UmrTranslation::Klm(got), bsf, .. } = back.body else {
            return Err(FieldError::Malformed { field: "not a UMR with a KLM list" });
        };
        assert_eq!(&got[..2], &entries[..]);
        assert!(got[2..].iter().all(|e| *e == KlmSeg::default()), "zero padding to 64 bytes");
        assert_eq!(bsf, vec![0xab; 64]);
        let short = SendWqe {
            ctrl: w.ctrl,
            body: WqeBody::Umr {
                umr: UmrCtrlSeg { klm_octowords: 1, ..umr },
                mkc: MkeyContextSeg::default(),
                translation: UmrTranslation::Klm(entries),
                bsf: vec![0xab; 64],
            },
        };
        assert!(short.encode().is_err(), "a translation larger than klm_octowords is refused");
        Ok(())
    }

    #[test]
    fn a_repeat_block_is_told_from_a_klm_list_by_its_op() -> Result<(), FieldError> {
        let header = RepeatBlockSeg { byte_count: 16, op: repeat_block::OP_REPEAT_BLOCK, repeat_count: 3, num_ent: 1 };
        let ent = RepeatEntSeg { stride: 32, byte_count: 16, memkey: 5, va: 0x100 };
        let mut out = Vec::new();
        encode_translation(&mut out, &UmrTranslation::Repeat(header, vec![ent]))?;
        assert_eq!(decode_translation(&out)?, UmrTranslation::Repeat(header, vec![ent]));
        Ok(())
    }

    #[test]
    fn a_wqe_that_wraps_the_ring_is_linearised() -> Result<(), FieldError> {
        let umr = UmrCtrlSeg { flags: umr_ctrl::flags::INLINE, klm_octowords: 4, bsf_octowords: 0, mkey_mask: 0 };
        let w = SendWqe {
            ctrl: ctrl_for(opcode::UMR),
            body: WqeBody::Umr {
                umr,
                mkc: MkeyContextSeg::default(),
                translation: UmrTranslation::Klm(vec![]),
                bsf: vec![],
            },
        };
        let bytes = w.encode()?;
        assert_eq!(bytes.len(), 192);
        let mut ring = vec![0u8; 4 * 64];
        // Blocks 3, 0, 1 of a 4-block ring.
        for (i, chunk) in bytes.chunks(64).enumerate() {
            let at = ((3 + i) % 4) * 64;
            ring[at..at + 64].copy_from_slice(chunk);
        }
        assert_eq!(linearise(&ring, 3), Some(bytes));
        assert_eq!(linearise(&[0u8; 65], 0), None);
        Ok(())
    }

    #[test]
    fn too_many_units_for_ds_is_an_error_not_a_wrap() {
        let segs = vec![DataSeg::default(); 63];
        let w = SendWqe { ctrl: ctrl_for(opcode::SEND), body: WqeBody::Send(Payload::Gather(segs)) };
        assert!(w.encode().is_err());
    }

    proptest! {
        #[test]
        fn any_gather_wqe_round_trips(n in 0usize..40, raddr in any::<u64>(), rkey in any::<u32>(), read in any::<bool>()) {
            let segs: Vec<_> = (0..n).map(|i| DataSeg { byte_count: i as u32, lkey: rkey ^ i as u32, addr: raddr.wrapping_add(i as u64) }).collect();
            let op = if read { opcode::RDMA_READ } else { opcode::RDMA_WRITE };
            let w = SendWqe { ctrl: ctrl_for(op), body: WqeBody::Rdma { raddr: RaddrSeg { raddr, rkey }, payload: Payload::Gather(segs) } };
            let bytes = w.encode().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(bytes.len() % 64, 0);
            let back = SendWqe::decode(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(back.body, w.body);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = SendWqe::decode(&bytes);
            let _ = linearise(&bytes, bytes.first().copied().unwrap_or(0) as usize);
        }
    }
}
