//! The device's hot codecs written straight over the bytes: a data WQE (RDMA WRITE, READ,
//! SEND) read without building segment values, a WQE linearised into a buffer on the stack,
//! and a good CQE's 64 bytes. Each gives exactly what the segment codecs of
//! `mlx5_dv::prm` give (the tests below compare them); anything else goes to those codecs.

use mlx5_dv::Sge;
use mlx5_dv::prm::cqe;
use mlx5_dv::prm::wqe::{INLINE_SEG, SEND_WQE_BB, SEND_WQE_DS, ctrl, opcode};

use super::{SgeList, Wqe, WqeKind};

/// The most basic blocks a WQE spans: `ds` has 6 bits, 63 units of 16 bytes.
const MAX_BBS: usize = 16;

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A WQE copied out of its ring, in order across the ring's end.
pub struct Linear {
    buf: [u8; MAX_BBS * SEND_WQE_BB],
    len: usize,
}

impl std::ops::Deref for Linear {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// `mlx5_dv::prm::wqe::compose::linearise` without allocating: the WQE that starts at basic
/// block `index` of `ring`; `None` for an empty or ragged ring.
pub fn linearise(ring: &[u8], index: usize) -> Option<Linear> {
    let blocks = ring.len() / SEND_WQE_BB;
    if blocks == 0 || !ring.len().is_multiple_of(SEND_WQE_BB) {
        return None;
    }
    let block = |i: usize| {
        let at = (i % blocks) * SEND_WQE_BB;
        ring.get(at..at + SEND_WQE_BB)
    };
    let ds = block(index)?.get(7).map_or(0, |b| b & 0x3f);
    let n = usize::from(ds).div_ceil(SEND_WQE_BB / SEND_WQE_DS).clamp(1, blocks);
    let mut out = Linear { buf: [0; MAX_BBS * SEND_WQE_BB], len: n * SEND_WQE_BB };
    for (i, to) in out.buf.chunks_exact_mut(SEND_WQE_BB).take(n).enumerate() {
        to.copy_from_slice(block(index + i)?);
    }
    Some(out)
}

/// `decode(&linearise(ring, index)?)`, reading a WQE that does not cross the ring's end in
/// place.
pub fn decode_at(ring: &[u8], index: usize) -> Option<Wqe> {
    let blocks = ring.len() / SEND_WQE_BB;
    if blocks == 0 || !ring.len().is_multiple_of(SEND_WQE_BB) || index >= blocks {
        return linearise(ring, index).map(|l| super::decode(&l));
    }
    let ds = ring.get(index * SEND_WQE_BB + 7).map_or(0, |b| b & 0x3f);
    let n = usize::from(ds).div_ceil(SEND_WQE_BB / SEND_WQE_DS).clamp(1, blocks);
    match ring.get(index * SEND_WQE_BB..(index + n) * SEND_WQE_BB) {
        Some(bytes) => Some(super::decode(bytes)),
        None => linearise(ring, index).map(|l| super::decode(&l)),
    }
}

/// The gather list of a payload, or an empty one and the bytes of inline data; `None` where
/// the segment codecs fail (inline data longer than the WQE).
fn payload(buf: &[u8]) -> Option<(SgeList, Option<Vec<u8>>)> {
    if let Some(dword) = be32(buf, 0)
        && dword & INLINE_SEG != 0
    {
        let n = usize::try_from(dword & !INLINE_SEG).ok()?;
        return Some((SgeList::new(), Some(buf.get(4..)?.get(..n)?.to_vec())));
    }
    let mut sge = SgeList::new();
    for d in buf.chunks_exact(SEND_WQE_DS) {
        sge.push(Sge { addr: be64(d, 8)?, length: be32(d, 0)?, lkey: be32(d, 4)? });
    }
    Some((sge, None))
}

/// True for a data WQE (RDMA WRITE ± imm, READ, SEND ± imm or invalidate) at least a control
/// segment long: one [`data_wqe`] reads.
pub(super) fn is_data(bytes: &[u8]) -> bool {
    bytes.get(..ctrl::SIZE).is_some_and(|c| {
        matches!(
            c[3],
            opcode::RDMA_WRITE
                | opcode::RDMA_WRITE_IMM
                | opcode::RDMA_READ
                | opcode::SEND
                | opcode::SEND_IMM
                | opcode::SEND_INVAL
        )
    })
}

/// A data WQE (RDMA WRITE ± imm, READ, SEND ± imm or invalidate) as `decode` reads it;
/// `None` for any other opcode or a buffer shorter than a control segment.
#[cfg(test)]
pub(super) fn decode_data(bytes: &[u8]) -> Option<Wqe> {
    is_data(bytes).then(|| data_wqe(bytes))
}

/// The WQE of bytes [`is_data`] accepts, as `decode` reads it. Returned without an `Option`
/// so that the large `Wqe` is built in the caller's slot, not moved out of a wrapper.
pub(super) fn data_wqe(bytes: &[u8]) -> Wqe {
    let mut c = [0u8; ctrl::SIZE];
    if let Some(b) = bytes.get(..ctrl::SIZE) {
        c.copy_from_slice(b);
    }
    let op = c[3];
    let rdma = matches!(op, opcode::RDMA_WRITE | opcode::RDMA_WRITE_IMM | opcode::RDMA_READ);
    let ds = usize::from(c[7] & 0x3f);
    let imm = u32::from_be_bytes([c[12], c[13], c[14], c[15]]);
    let kind = (|| {
        let wqe = bytes.get(..ds * SEND_WQE_DS)?;
        let rest = wqe.get(ctrl::SIZE..).unwrap_or_default();
        if !rdma {
            let (sge, inline) = payload(rest)?;
            return Some(match op {
                opcode::SEND => WqeKind::Send { sge, imm: None, inv: None, inline },
                opcode::SEND_IMM => WqeKind::Send { sge, imm: Some(imm), inv: None, inline },
                _ => WqeKind::Send { sge, imm: None, inv: Some(imm), inline },
            });
        }
        let (raddr, rkey) = (be64(rest, 0)?, be32(rest, 8)?);
        rest.get(..16)?;
        let (sge, inline) = payload(rest.get(16..).unwrap_or_default())?;
        Some(match op {
            opcode::RDMA_WRITE => WqeKind::Write { rkey, raddr, sge, imm: None, inline },
            opcode::RDMA_WRITE_IMM => WqeKind::Write { rkey, raddr, sge, imm: Some(imm), inline },
            _ => WqeKind::Read { rkey, raddr, sge, inline },
        })
    })();
    Wqe {
        index: u16::from_be_bytes([c[1], c[2]]),
        opcode: op,
        signaled: (c[11] >> 2) & 0x3 == ctrl::CE_CQ_UPDATE,
        solicited: c[11] & 0x2 != 0,
        kind,
        // ds has 6 bits: at most 16 basic blocks.
        bbs: u32::from(c[7] & 0x3f).div_ceil((SEND_WQE_BB / SEND_WQE_DS) as u32).max(1),
    }
}

/// A plain WRITE read in place: the WQE's header (its `kind` left out), and the remote key,
/// remote address and gather entry it carries.
pub struct PlainWrite {
    /// Index, opcode, CQE request and size, as [`decode`](super::decode) reads them.
    pub head: Wqe,
    /// The remote address segment's key.
    pub rkey: u32,
    /// The remote address segment's address.
    pub raddr: u64,
    /// The one gather entry.
    pub sge: Sge,
}

/// The WQE at basic block `index` of `ring` when it is the most common one, an RDMA WRITE
/// without immediate of one basic block gathering from one (not inline) data segment, so
/// that the engine can run it without building its [`WqeKind`]; `None` for any other.
pub fn plain_write_at(ring: &[u8], index: usize) -> Option<PlainWrite> {
    let b: &[u8; SEND_WQE_BB] = ring.get(index.checked_mul(SEND_WQE_BB)?..)?.first_chunk()?;
    // Control, remote address and one data segment: ds 3.
    if b[3] != opcode::RDMA_WRITE || b[7] & 0x3f != 3 {
        return None;
    }
    let be32 = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let be64 = |at: usize| u64::from(be32(at)) << 32 | u64::from(be32(at + 4));
    let length = be32(32);
    if length & INLINE_SEG != 0 {
        return None;
    }
    Some(PlainWrite {
        head: Wqe {
            index: u16::from_be_bytes([b[1], b[2]]),
            opcode: opcode::RDMA_WRITE,
            signaled: (b[11] >> 2) & 0x3 == ctrl::CE_CQ_UPDATE,
            solicited: b[11] & 0x2 != 0,
            kind: None,
            bbs: 1,
        },
        rkey: be32(24),
        raddr: be64(16),
        sge: Sge { addr: be64(40), length, lkey: be32(36) },
    })
}

/// The bytes of a good CQE (`mlx5_cqe64`) as its codec writes them, over `b` whatever it
/// held; false (`b` untouched) for a value its fields cannot hold, which the codec reports.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn cqe64_into(
    b: &mut [u8; cqe::SIZE],
    qpn: u32,
    wqe_counter: u16,
    byte_cnt: u32,
    imm: u32,
    sop_drop: u8,
    op: u8,
    owner: bool,
) -> bool {
    if qpn > 0xff_ffff || op > 0xf {
        return false;
    }
    *b = [0; cqe::SIZE];
    b[36..40].copy_from_slice(&imm.to_be_bytes());
    b[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
    b[56..60].copy_from_slice(&(u32::from(sop_drop) << 24 | qpn).to_be_bytes());
    b[60..62].copy_from_slice(&wqe_counter.to_be_bytes());
    b[63] = cqe::op_own(op, 0, false, owner);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlx5_dv::prm::cqe::Cqe64;
    use proptest::prelude::*;

    fn data_opcode() -> impl Strategy<Value = u8> {
        prop_oneof![
            Just(opcode::RDMA_WRITE),
            Just(opcode::RDMA_WRITE_IMM),
            Just(opcode::RDMA_READ),
            Just(opcode::SEND),
            Just(opcode::SEND_IMM),
            Just(opcode::SEND_INVAL),
            any::<u8>(),
        ]
    }

    proptest! {
        #[test]
        fn data_wqes_read_as_the_segment_codecs_read_them(
            mut bytes in proptest::collection::vec(any::<u8>(), 0..1100),
            op in data_opcode(),
            ds in 0u8..64,
            inline in any::<bool>(),
            inline_len in 0u32..1100,
        ) {
            if let Some(c) = bytes.get_mut(..16) {
                c[3] = op;
                c[7] = (c[7] & 0xc0) | ds;
            }
            // The inline bit on the first payload dword, after a raddr segment or without.
            for at in [16, 32] {
                if let Some(d) = bytes.get_mut(at..at + 4) {
                    let v = if inline { INLINE_SEG | inline_len } else { u32::from_be_bytes([d[0], d[1], d[2], d[3]]) & !INLINE_SEG };
                    d.copy_from_slice(&v.to_be_bytes());
                }
            }
            if let Some(fast) = decode_data(&bytes) {
                prop_assert_eq!(fast, super::super::decode_segments(&bytes));
            } else {
                prop_assert!(bytes.len() < 16 || !matches!(op, 0x08 | 0x09 | 0x10 | 0x0a | 0x0b | 0x01));
            }
        }

        #[test]
        fn linearising_matches_the_codec(blocks in 1usize..40, index in 0usize..40, ds in 0u8..64, seed in any::<u8>()) {
            let mut ring: Vec<u8> = (0..blocks * 64).map(|i| (i as u8).wrapping_mul(seed) ^ seed).collect();
            let index = index % blocks;
            ring[index * 64 + 7] = ds;
            let want = mlx5_dv::prm::wqe::compose::linearise(&ring, index);
            prop_assert_eq!(linearise(&ring, index).map(|l| l.to_vec()), want);
        }

        #[test]
        fn wqes_read_in_place_as_when_linearised(blocks in 1usize..40, index in 0usize..40, ds in 0u8..64, op in data_opcode(), seed in any::<u8>()) {
            let mut ring: Vec<u8> = (0..blocks * 64).map(|i| (i as u8).wrapping_mul(seed) ^ seed).collect();
            let index = index % blocks;
            ring[index * 64 + 3] = op;
            ring[index * 64 + 7] = ds;
            let want = mlx5_dv::prm::wqe::compose::linearise(&ring, index).map(|l| super::super::decode(&l));
            prop_assert_eq!(decode_at(&ring, index), want);
        }

        #[test]
        fn plain_writes_read_in_place_as_decode_reads_them(
            blocks in 1usize..8, index in 0usize..8, op in data_opcode(), ds in prop_oneof![Just(3u8), 0u8..64],
            inline in any::<bool>(), seed in any::<u8>(),
        ) {
            let mut ring: Vec<u8> = (0..blocks * 64).map(|i| (i as u8).wrapping_mul(seed) ^ seed).collect();
            let index = index % blocks;
            ring[index * 64 + 3] = op;
            ring[index * 64 + 7] = (ring[index * 64 + 7] & 0xc0) | ds;
            let d = index * 64 + 32;
            ring[d] = if inline { ring[d] | 0x80 } else { ring[d] & 0x7f };
            let want = decode_at(&ring, index);
            match plain_write_at(&ring, index) {
                Some(p) => {
                    let Some(w) = want else { return Err(TestCaseError::fail("decode read nothing")) };
                    prop_assert_eq!((p.head.index, p.head.opcode, p.head.signaled), (w.index, w.opcode, w.signaled));
                    prop_assert_eq!(p.head.bbs, w.bbs);
                    let mut sge = SgeList::new();
                    sge.push(p.sge);
                    prop_assert_eq!(w.kind, Some(WqeKind::Write { rkey: p.rkey, raddr: p.raddr, sge, imm: None, inline: None }));
                }
                None => prop_assert!(
                    op != opcode::RDMA_WRITE || ds != 3 || inline,
                    "a plain WRITE the lane leaves to the general path"
                ),
            }
        }

        #[test]
        fn good_cqes_encode_as_the_codec_encodes_them(
            qpn in prop_oneof![0u32..0x100_0000, any::<u32>()],
            wqe_counter in any::<u16>(),
            byte_cnt in any::<u32>(),
            imm in any::<u32>(),
            sop_drop in any::<u8>(),
            op in prop_oneof![0u8..16, any::<u8>()],
            owner in any::<bool>(),
        ) {
            let mut want = [0u8; cqe::SIZE];
            let codec = Cqe64 { sop_drop, qpn, wqe_counter, byte_cnt, imm_inval_pkey: imm, opcode: op, owner, ..Cqe64::default() }
                .encode(&mut want);
            let mut fast = [0xa5; cqe::SIZE];
            if cqe64_into(&mut fast, qpn, wqe_counter, byte_cnt, imm, sop_drop, op, owner) {
                prop_assert_eq!((codec, fast), (Ok(()), want));
            } else {
                prop_assert_eq!((codec.is_err(), fast), (true, [0xa5; cqe::SIZE]));
            }
            // In place, over a slot's old bytes: the same, or the slot untouched.
            let mut slot = [0xa5; cqe::SIZE];
            let req = super::super::Cqe::Req { qpn, wqe_counter, wqe_opcode: sop_drop, byte_cnt };
            match req.encode_into(owner, &mut slot) {
                Ok(()) => prop_assert_eq!(Ok(slot), req.encode(owner)),
                Err(_) => prop_assert_eq!((slot, req.encode(owner).is_err()), ([0xa5; cqe::SIZE], true)),
            }
        }
    }

    #[test]
    fn empty_and_ragged_rings_have_no_wqe() {
        assert!(linearise(&[], 0).is_none());
        assert!(linearise(&[0u8; 65], 0).is_none());
    }
}
