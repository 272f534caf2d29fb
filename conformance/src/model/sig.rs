//! The signature family: a signature mkey configured on the domains and block sizes the device
//! has (T10-DIF, and the CRC types once a probe learned the PI byte order), data with
//! corrupted PI going out of or into it, and what items 40–49 say comes out: the PI inserted,
//! stripped, checked or copied per direction, and the first error that `mlx5dv_mkey_check`
//! decodes. Written from `docs/behaviour.md`; the guard functions are those Appendix B names
//! (CRC-16/T10-DIF, the IP checksum, CRC-32, CRC-32C, and CRC-64/NVME for CRC64_XP10).
//!
//! Two CRC facts are not published: the byte order of CRC PI and the CRC64_XP10 parameters.
//! The model does not assume them: [`probe_crc`](super::rig::probe_crc) learns the byte order
//! from the backend (the one a CRC32 or CRC32C PI validates in) and whether CRC64_XP10 is
//! CRC-64/NVME (item 42's profile default); CRC domains are generated only where the probe
//! found them. Domains of different block sizes and partial blocks are not generated (a known
//! simulator difference, item 42).

use mlx5_dv::{MkeyErr, MkeyErrType, SigErr, sig, sig_cap, wc_opcode, wc_status};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::outcome::Outcome;
use super::{Expect, Model, Op};

/// A T10-DIF domain.
#[allow(missing_docs)] // the fields of `struct mlx5dv_sig_t10dif`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dif {
    /// The guard is the IP checksum (`MLX5DV_SIG_T10DIF_CSUM`), else the CRC-16.
    pub csum: bool,
    /// `bg` = 0xffff, else 0.
    pub bg_ones: bool,
    pub app: u16,
    pub ref_tag: u32,
    /// `MLX5DV_SIG_T10DIF_FLAG_REF_REMAP`.
    pub remap: bool,
    /// Bit 0 `MLX5DV_SIG_T10DIF_FLAG_APP_ESCAPE`, bit 1 `_APP_REF_ESCAPE`.
    pub escape: u8,
}

/// A CRC domain (`struct mlx5dv_sig_crc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Crc {
    /// `MLX5DV_SIG_CRC_TYPE_CRC32`, `_CRC32C` or `_CRC64_XP10`.
    pub kind: u32,
    /// The seed is all ones of the CRC's width, else 0.
    pub seed_ones: bool,
}

/// A signature domain: T10-DIF or CRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dom {
    /// `MLX5DV_SIG_TYPE_T10DIF`.
    T10(Dif),
    /// `MLX5DV_SIG_TYPE_CRC`.
    Crc(Crc),
}

impl Dom {
    /// The PI bytes after each block (item 42): 8 for T10-DIF and CRC64_XP10, 4 for CRC32 and
    /// CRC32C.
    pub fn pi_len(&self) -> usize {
        match self {
            Dom::Crc(c) if c.kind != sig::CRC64_XP10 => 4,
            _ => PI,
        }
    }
}

/// What a probe of the backend learned of its CRC PI ([`super::rig::probe_crc`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrcFacts {
    /// CRC PI is stored little-endian (else big-endian).
    pub little_endian: bool,
    /// CRC64_XP10 is CRC-64/NVME (with the seed as its initial value).
    pub crc64: bool,
}

/// One corrupted PI field of the input: `field` 0 guard, 1 app tag, 2 ref tag, XORed with
/// `xor` (its low bit always set, so the field changes); 3 sets the app tag to 0xffff, 4
/// sets it and the ref tag to all ones (the escape values, item 43). A CRC PI has the CRC
/// only: every corruption XORs it with `xor`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Corrupt {
    pub block: u8,
    pub field: u8,
    pub xor: u32,
}

/// A signature scenario on device `dev`: a BLOCK_SIGNATURE mkey over `blocks` blocks of
/// `block_size` (`MLX5DV_BLOCK_SIZE_*`) with domains `mem` and `wire` (neither: no signature
/// setter, item 36; CRC PI in the byte order `crc_le` says), and one RDMA WRITE of the whole transfer out of it (`inbound` false: the
/// memory is the input) or into it (the wire is the input), with the first `n` corruptions
/// applied to the input's PI; then `mlx5dv_mkey_check`. With `rearm` the same transfer
/// again (item 46: no second error until re-armed), `mlx5dv_mkey_check`, a configure that
/// keeps the attributes (item 37) and re-arms, the transfer once more and
/// `mlx5dv_mkey_check`; with `reset` that configure has RESET_SIG_ATTR and no setter, so the
/// last transfer goes through a plain mkey (item 35: raw bytes, or an access error past its
/// length, item 97). Last, `mlx5dv_mkey_check` again (item 48: a decode clears the error).
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigOp {
    pub dev: usize,
    pub block_size: u32,
    pub blocks: u8,
    pub mem: Option<Dom>,
    pub wire: Option<Dom>,
    pub check_mask: u8,
    pub inbound: bool,
    pub n: u8,
    pub corrupt: [Corrupt; 3],
    pub seed: u8,
    pub rearm: bool,
    pub reset: bool,
    /// Instead, a WRITE of one block starting one block past the mkey's end (inbound only):
    /// a remote access error, memory untouched (item 92).
    pub past_end: bool,
    /// CRC PI is little-endian: the byte order the probe found when the op was drawn.
    pub crc_le: bool,
}

/// The T10-DIF PI size.
pub const PI: usize = 8;

/// CRC-16/T10-DIF with `bg` 0xffff as its initial value (Appendix B).
const T10DIF_ONES: crc::Algorithm<u16> = crc::Algorithm { init: 0xffff, check: 0x8e3c, ..crc::CRC_16_T10_DIF };

/// The guard of `data` (Appendix B): the IP checksum ignores the seed.
pub fn guard(d: &Dif, data: &[u8]) -> u16 {
    if d.csum {
        return u16::from_be_bytes(internet_checksum::checksum(data));
    }
    let alg = if d.bg_ones { &T10DIF_ONES } else { &crc::CRC_16_T10_DIF };
    crc::Crc::<u16>::new(alg).checksum(data)
}

/// CRC-32 and CRC-32C with seed 0 as the initial value; the final XOR stays (Appendix B).
const CRC32_SEED0: crc::Algorithm<u32> = crc::Algorithm { init: 0, check: 0xd202_d277, ..crc::CRC_32_ISO_HDLC };
const CRC32C_SEED0: crc::Algorithm<u32> = crc::Algorithm { init: 0, check: 0xa71c_05df, ..crc::CRC_32_ISCSI };
/// CRC64_XP10 as CRC-64/NVME, with seed 0 as the initial value (Appendix B).
const CRC64_SEED0: crc::Algorithm<u64> = crc::Algorithm { init: 0, check: 0x87ff_3f9b_2b57_c87b, ..crc::CRC_64_NVME };

/// The CRC of `data` in domain `c` (Appendix B).
pub fn crc_of(c: &Crc, data: &[u8]) -> u64 {
    match (c.kind, c.seed_ones) {
        (sig::CRC64_XP10, true) => crc::Crc::<u64>::new(&crc::CRC_64_NVME).checksum(data),
        (sig::CRC64_XP10, false) => crc::Crc::<u64>::new(&CRC64_SEED0).checksum(data),
        (sig::CRC32C, true) => u64::from(crc::Crc::<u32>::new(&crc::CRC_32_ISCSI).checksum(data)),
        (sig::CRC32C, false) => u64::from(crc::Crc::<u32>::new(&CRC32C_SEED0).checksum(data)),
        (_, true) => u64::from(crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC).checksum(data)),
        (_, false) => u64::from(crc::Crc::<u32>::new(&CRC32_SEED0).checksum(data)),
    }
}

/// A CRC value as its `width` PI bytes in the byte order `le` says.
fn crc_bytes(v: u64, width: usize, le: bool) -> Vec<u8> {
    if le { v.to_le_bytes()[..width].to_vec() } else { v.to_be_bytes()[8 - width..].to_vec() }
}

/// Bit k of a check mask as byte k of the 64-bit PI value, bit 7 the most significant
/// (item 41).
fn byte_mask(check_mask: u8) -> u64 {
    (0..8).filter(|k| check_mask & (1 << k) != 0).fold(0u64, |m, k| m | 0xff << (8 * k))
}

/// The PI block `i` of a transfer carries in domain `d` (items 42, 43): the T10-DIF fields
/// big-endian, or the CRC in the byte order `le` says.
fn pi_of(d: &Dom, data: &[u8], i: usize, le: bool) -> Vec<u8> {
    match d {
        Dom::T10(t) => pi(t, data, i).to_vec(),
        Dom::Crc(c) => crc_bytes(crc_of(c, data), d.pi_len(), le),
    }
}

/// The PI block `i` of a transfer carries in domain `d` (items 42, 43): guard, app tag,
/// ref tag, big-endian.
pub(super) fn pi(d: &Dif, data: &[u8], i: usize) -> [u8; PI] {
    let r = if d.remap { d.ref_tag.wrapping_add(i as u32) } else { d.ref_tag };
    let mut p = [0u8; PI];
    p[..2].copy_from_slice(&guard(d, data).to_be_bytes());
    p[2..4].copy_from_slice(&d.app.to_be_bytes());
    p[4..].copy_from_slice(&r.to_be_bytes());
    p
}

/// The bytes of PI field `f` (0 guard, 1 app tag, 2 ref tag).
fn field(f: u8) -> std::ops::Range<usize> {
    match f {
        0 => 0..2,
        1 => 2..4,
        _ => 4..8,
    }
}

fn value(p: &[u8; PI], f: u8) -> u64 {
    p[field(f)].iter().fold(0u64, |v, b| v << 8 | u64::from(*b))
}

/// The check-mask bits of field `f` (item 41).
fn mask(f: u8) -> u8 {
    [sig::MASK_T10DIF_GUARD, sig::MASK_T10DIF_APPTAG, sig::MASK_T10DIF_REFTAG][usize::from(f.min(2))]
}

/// The PI bytes copied rather than regenerated when both domains are T10-DIF (item 40).
fn copy_mask(a: &Dif, b: &Dif) -> u8 {
    let mut m = 0;
    if a.csum == b.csum && a.bg_ones == b.bg_ones {
        m |= sig::MASK_T10DIF_GUARD;
    }
    if a.app == b.app {
        m |= sig::MASK_T10DIF_APPTAG;
    }
    if a.ref_tag == b.ref_tag {
        m |= sig::MASK_T10DIF_REFTAG;
    }
    m
}

/// What a [`SigOp`] leaves, by the docs.
pub struct SigPlan {
    /// The block's data bytes.
    pub bs: usize,
    /// The input form (written before the transfer) and the output form (read after it).
    pub input: Vec<u8>,
    pub output: Vec<u8>,
    /// The first error `mlx5dv_mkey_check` decodes (item 45: one per arm, item 48).
    pub err: MkeyErr,
}

impl SigOp {
    /// The domain the data enters by and the one it leaves by.
    pub fn domains(&self) -> (Option<Dom>, Option<Dom>) {
        if self.inbound { (self.wire, self.mem) } else { (self.mem, self.wire) }
    }

    /// The memory form's length: what the mkey's layout covers.
    pub fn mem_len(&self, bs: usize) -> usize {
        usize::from(self.blocks) * (bs + self.mem.map_or(0, |d| d.pi_len()))
    }

    /// The wire form's length: what a remote peer addresses.
    pub fn wire_len(&self, bs: usize) -> usize {
        usize::from(self.blocks) * (bs + self.wire.map_or(0, |d| d.pi_len()))
    }

    /// The input, the output and the first error.
    pub fn plan(&self) -> Option<SigPlan> {
        let bs = sig::block_bytes(self.block_size)?;
        let (din, dout) = self.domains();
        let le = self.crc_le;
        let blocks = usize::from(self.blocks);
        let data = super::fill_pattern(bs * blocks, self.seed);
        let mut input = Vec::new();
        let mut output = Vec::new();
        let mut err = MkeyErr::NONE;
        for (i, d) in data.chunks(bs).enumerate() {
            input.extend_from_slice(d);
            output.extend_from_slice(d);
            let Some(din) = din else {
                if let Some(o) = dout {
                    output.extend_from_slice(&pi_of(&o, d, i, le)); // inserted
                }
                continue;
            };
            let hits: Vec<Corrupt> =
                self.corrupt.iter().take(usize::from(self.n)).filter(|c| usize::from(c.block) == i).copied().collect();
            let (got, bad) = match din {
                Dom::T10(t) => self.t10_input(&t, d, i, &hits),
                Dom::Crc(c) => self.crc_input(&c, d, &hits),
            };
            input.extend_from_slice(&got);
            if err.err_type == MkeyErrType::NoErr
                && let Some((err_type, expected_value, actual_value)) = bad
            {
                let offset = (i * (bs + din.pi_len())) as u64;
                err = MkeyErr { err_type, sig: SigErr { expected_value, actual_value, offset } };
            }
            if let Some(o) = dout {
                let out = match (din, o) {
                    (Dom::T10(a), Dom::T10(b)) => {
                        // Item 40: the fields configured alike are copied, the rest generated.
                        let (mut out, copy, got) = (pi(&b, d, i), copy_mask(&a, &b), &got);
                        for f in (0u8..3).filter(|f| copy & mask(*f) == mask(*f)) {
                            out[field(f)].copy_from_slice(&got[field(f)]);
                        }
                        out.to_vec()
                    }
                    // Like CRCs copy the whole PI (item 40), whatever their seeds.
                    (Dom::Crc(a), Dom::Crc(b)) if a.kind == b.kind => got,
                    _ => pi_of(&o, d, i, le),
                };
                output.extend_from_slice(&out);
            }
        }
        Some(SigPlan { bs, input, output, err })
    }

    /// A T10-DIF input block's PI after the corruptions `hits`, and its first failing checked
    /// field (items 41, 43, 45): (error, expected, actual).
    fn t10_input(&self, din: &Dif, d: &[u8], i: usize, hits: &[Corrupt]) -> (Vec<u8>, Option<(MkeyErrType, u64, u64)>) {
        let want = pi(din, d, i);
        let mut got = want;
        for c in hits {
            if c.field >= 3 {
                got[2..4].fill(0xff);
                if c.field == 4 {
                    got[4..].fill(0xff);
                }
                continue;
            }
            let x = c.xor.to_be_bytes();
            let r = field(c.field);
            let len = r.len();
            // The low bytes of `xor`: its low bit is set, so the field changes.
            got[r].iter_mut().zip(&x[4 - len..]).for_each(|(g, x)| *g ^= x);
        }
        // Item 43: an escaped block is not checked; APP_REF_ESCAPE wins over APP_ESCAPE.
        let app_esc = value(&got, 1) == 0xffff;
        let escaped =
            if din.escape & 2 != 0 { app_esc && value(&got, 2) == 0xffff_ffff } else { din.escape & 1 != 0 && app_esc };
        // Item 45: guard, app tag, ref tag, the first checked field that differs.
        let bad = (0u8..3)
            .find(|f| !escaped && self.check_mask & mask(*f) == mask(*f) && value(&want, *f) != value(&got, *f))
            .map(|f| {
                let t = [MkeyErrType::SigBlockBadGuard, MkeyErrType::SigBlockBadApptag, MkeyErrType::SigBlockBadReftag];
                (t[usize::from(f)], value(&want, f), value(&got, f))
            });
        (got.to_vec(), bad)
    }

    /// A CRC input block's PI after the corruptions `hits` (each XORs the CRC with its `xor`),
    /// and the guard error when a byte the check mask selects differs (items 41, 49: the CRC
    /// sits in the top bytes of the 64-bit PI value).
    fn crc_input(&self, c: &Crc, d: &[u8], hits: &[Corrupt]) -> (Vec<u8>, Option<(MkeyErrType, u64, u64)>) {
        let width = Dom::Crc(*c).pi_len();
        let top = 64 - 8 * width as u32;
        let want = crc_of(c, d);
        let got = hits.iter().fold(want, |g, h| g ^ (u64::from(h.xor) & (u64::MAX >> top)));
        let bad = ((want ^ got) << top) & byte_mask(self.check_mask) != 0;
        (crc_bytes(got, width, self.crc_le), bad.then_some((MkeyErrType::SigBlockBadGuard, want, got)))
    }
}

impl Model {
    /// The device a scenario runs on, if it is a kernel mlx5 device with DEVX.
    pub(super) fn offload_dev(&self, dev: usize) -> Option<usize> {
        let d = dev % self.devices.len().max(1);
        (self.devices.get(d) == Some(&mlx5_dv::DeviceKind::Mlx5) && self.devx).then_some(d)
    }

    /// Whether the device has T10-DIF signatures.
    pub(super) fn t10dif(&self) -> bool {
        self.sig_caps.block_prot & sig_cap::PROT_T10DIF != 0 && self.sig_caps.t10dif_bg != 0
    }

    /// The CRC types (`MLX5DV_SIG_CRC_TYPE_*`) the model generates: those the device has, once
    /// a probe learned the PI byte order, CRC64_XP10 only where the probe found it CRC-64/NVME.
    pub(super) fn crc_kinds(&self) -> Vec<u32> {
        let Some(f) = self.crc.filter(|_| self.sig_caps.block_prot & sig_cap::PROT_CRC != 0) else {
            return Vec::new();
        };
        [(sig::CRC32, sig_cap::CRC32), (sig::CRC32C, sig_cap::CRC32C), (sig::CRC64_XP10, sig_cap::CRC64_XP10)]
            .into_iter()
            .filter(|&(k, cap)| self.sig_caps.crc_type & cap != 0 && (k != sig::CRC64_XP10 || f.crc64))
            .map(|(k, _)| k)
            .collect()
    }

    /// Whether the model judges domain `d` of an op drawn with CRC byte order `le`.
    fn judges(&self, d: &Dom, le: bool) -> bool {
        match d {
            Dom::T10(t) => {
                self.t10dif() && self.sig_caps.t10dif_bg & if t.csum { sig_cap::BG_CSUM } else { sig_cap::BG_CRC } != 0
            }
            Dom::Crc(c) => self.crc.is_some_and(|f| f.little_endian == le) && self.crc_kinds().contains(&c.kind),
        }
    }

    /// Whether the state machine draws signature scenarios.
    pub(super) fn sig_scenarios(&self) -> bool {
        (self.t10dif() || !self.crc_kinds().is_empty()) && self.sig_caps.block_size & 0x1f != 0
    }

    /// What a [`SigOp`] leaves: the UMR's completion, the WRITE's, the output form, the
    /// first error and then none (item 48: a decode clears it).
    pub(super) fn sig_step(&mut self, s: &SigOp) -> Expect {
        let judged = s.mem.iter().chain(&s.wire).all(|d| self.judges(d, s.crc_le));
        if self.offload_dev(s.dev).is_none()
            || !judged
            || !self.sig_scenarios()
            || self.sig_caps.block_size & (1 << s.block_size) == 0
        {
            return Expect::Unknown;
        }
        let Some(plan) = s.plan() else { return Expect::Unknown };
        let name = if s.inbound { "memory" } else { "wire" };
        let (umr, write) = ((0, Some(wc_opcode::DRIVER1)), (0, Some(wc_opcode::RDMA_WRITE)));
        if s.past_end {
            if !s.inbound || s.rearm {
                return Expect::Unknown;
            }
            self.effects.outcome = Some(Outcome {
                cqes: vec![umr, (wc_status::REM_ACCESS_ERR, None)],
                bytes: vec![(name, vec![0; s.mem_len(plan.bs)])],
                checks: vec![MkeyErr::NONE, MkeyErr::NONE],
                refused: None,
                ..Outcome::default()
            });
            return Expect::Ok(None);
        }
        if s.rearm && s.reset {
            let (mem_len, wire_len, data) = (s.mem_len(plan.bs), s.wire_len(plan.bs), usize::from(s.blocks) * plan.bs);
            let mut out = plan.output;
            let last = if !s.inbound {
                out[..data].copy_from_slice(&plan.input[..data]);
                write
            } else if wire_len <= mem_len {
                out[..wire_len].copy_from_slice(&plan.input);
                write
            } else {
                (wc_status::REM_ACCESS_ERR, None)
            };
            let n = MkeyErr::NONE;
            self.effects.outcome = Some(Outcome {
                cqes: vec![umr, write, write, umr, last],
                bytes: vec![(name, out)],
                checks: vec![plan.err, n, n, n],
                refused: None,
                ..Outcome::default()
            });
            return Expect::Ok(None);
        }
        let (cqes, checks) = if s.rearm {
            (vec![umr, write, write, umr, write], vec![plan.err, MkeyErr::NONE, plan.err, MkeyErr::NONE])
        } else {
            (vec![umr, write], vec![plan.err, MkeyErr::NONE])
        };
        self.effects.outcome =
            Some(Outcome { cqes, bytes: vec![(name, plan.output)], checks, refused: None, ..Outcome::default() });
        Expect::Ok(None)
    }
}

/// A domain of the device's guard types.
pub(super) fn dif(bg: u16) -> impl Strategy<Value = Dif> {
    let csum = match (bg & sig_cap::BG_CRC != 0, bg & sig_cap::BG_CSUM != 0) {
        (true, true) => any::<bool>().boxed(),
        (false, true) => Just(true).boxed(),
        _ => Just(false).boxed(),
    };
    let tag = prop_oneof![2 => Just(0x1234u16), 1 => any::<u16>()];
    let reft = prop_oneof![2 => Just(0x0a0b_0c0du32), 1 => any::<u32>()];
    let escape = prop_oneof![4 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)];
    (csum, any::<bool>(), tag, reft, any::<bool>(), escape)
        .prop_map(|(csum, bg_ones, app, ref_tag, remap, escape)| Dif { csum, bg_ones, app, ref_tag, remap, escape })
}

/// A domain of the kinds the model judges on this device: T10-DIF of its guard types, and
/// the CRC types [`Model::crc_kinds`] lists.
fn dom(m: &Model) -> BoxedStrategy<Dom> {
    let mut kinds: Vec<(u32, BoxedStrategy<Dom>)> = Vec::new();
    if m.t10dif() {
        kinds.push((3, dif(m.sig_caps.t10dif_bg).prop_map(Dom::T10).boxed()));
    }
    for kind in m.crc_kinds() {
        kinds.push((1, any::<bool>().prop_map(move |seed_ones| Dom::Crc(Crc { kind, seed_ones })).boxed()));
    }
    proptest::strategy::Union::new_weighted(kinds).boxed()
}

/// Signature scenarios on the device's block sizes and domain types, on mlx5 device `devs`
/// (the caller checks [`Model::sig_scenarios`]).
pub(super) fn strategy(m: &Model, devs: Vec<usize>) -> BoxedStrategy<Op> {
    let sizes: Vec<u32> = (0..5).filter(|b| m.sig_caps.block_size & (1 << b) != 0).collect();
    let crc_le = m.crc.is_none_or(|f| f.little_endian);
    let doms = prop_oneof![
        1 => Just(0u8),
        3 => Just(1u8),
        3 => Just(2u8),
        4 => Just(3u8),
    ];
    let fields = prop_oneof![6 => 0u8..3, 1 => 3u8..5];
    let corrupt = (0u8..3, fields, any::<u32>()).prop_map(|(block, field, x)| Corrupt { block, field, xor: x | 1 });
    let masks = prop_oneof![
        4 => Just(0xffu8),
        1 => Just(sig::MASK_T10DIF_GUARD),
        1 => Just(sig::MASK_T10DIF_APPTAG | sig::MASK_T10DIF_REFTAG),
        1 => Just(sig::MASK_T10DIF_REFTAG),
        1 => Just(sig::MASK_T10DIF_GUARD | sig::MASK_T10DIF_REFTAG),
        1 => Just(sig::MASK_CRC32),
        1 => Just(0u8),
    ];
    let pick = proptest::sample::select(devs);
    let size = proptest::sample::select(sizes);
    (
        (pick, size, 1u8..=3, doms, dom(m), dom(m), masks),
        (any::<bool>(), 0u8..=3, [corrupt.clone(), corrupt.clone(), corrupt], any::<u8>(), any::<bool>()),
        (prop_oneof![7 => Just(false), 1 => Just(true)], prop_oneof![2 => Just(false), 1 => Just(true)]),
    )
        .prop_map(
            move |(
                (dev, block_size, blocks, doms, a, b, check_mask),
                (inbound, n, corrupt, seed, rearm),
                (past_end, reset),
            )| {
                // Both T10-DIF domains remap alike: the copy of a ref tag under unlike
                // remapping is open.
                let b = match (a, b) {
                    (Dom::T10(a), Dom::T10(b)) => Dom::T10(Dif { remap: a.remap, ..b }),
                    _ => b,
                };
                let corrupt = corrupt.map(|c| Corrupt { block: c.block % blocks, ..c });
                Op::Sig(SigOp {
                    dev,
                    block_size,
                    blocks,
                    mem: (doms & 1 != 0).then_some(a),
                    wire: (doms & 2 != 0).then_some(b),
                    check_mask,
                    inbound: inbound || past_end,
                    n,
                    corrupt,
                    seed,
                    rearm: rearm && !past_end,
                    reset,
                    past_end,
                    crc_le,
                })
            },
        )
        .boxed()
}
