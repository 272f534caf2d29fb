//! Block signatures: protection information (PI) per block, checked and generated as data
//! moves through a signature mkey.
//!
//! Each protected block is `bs` data bytes followed by the PI of its domain: T10-DIF 8 bytes
//! (guard, application tag, reference tag, big-endian), CRC32/CRC32C 4 bytes, CRC64_XP10 8
//! bytes. PI values are handled as the 64-bit "signature value" the provider uses everywhere:
//! T10-DIF `guard << 48 | app << 32 | ref`, CRC32 `crc << 32`, CRC64 `crc`; bit k of a check or
//! copy mask is byte k of that value (bit 7 = most significant).

use crc_fast::{CrcAlgorithm, CrcParams, Digest, checksum, checksum_with_params};
use mlx5_dv::{SigBlockDomain, sig};

use crate::profile::SignatureSection;

/// One CRC: a catalogue algorithm where the parameters match one (crc-fast specialises
/// those), custom parameters otherwise.
#[derive(Debug, Clone, Copy)]
#[allow(clippy::large_enum_variant)] // eight of these per simulator, built once
enum Calc {
    Catalogue(CrcAlgorithm),
    Custom(CrcParams),
}

impl Calc {
    fn run(&self, data: &[u8]) -> u64 {
        match self {
            Calc::Catalogue(a) => checksum(*a, data),
            Calc::Custom(p) => checksum_with_params(*p, data),
        }
    }

    /// A digest of the same CRC, to reuse block after block without copying the parameters
    /// or matching the algorithm each time.
    fn digest(&self) -> Digest {
        match self {
            Calc::Catalogue(a) => Digest::new(*a),
            Calc::Custom(p) => Digest::new_with_params(*p),
        }
    }
}

/// CRC parameter sets for every type and seed the device accepts.
#[derive(Debug, Clone, Copy)]
pub struct Crcs {
    t10: [Calc; 2],
    crc32: [Calc; 2],
    crc32c: [Calc; 2],
    crc64: [Calc; 2],
    little_endian_crc: bool,
}

impl Crcs {
    /// The parameter sets of a profile: T10-DIF CRC-16 (poly 0x8bb7), CRC-32 (0x04c11db7,
    /// reflected), CRC-32C (0x1edc6f41, reflected) and the CRC-64 the profile names for
    /// XP10, each with init 0 and init all-ones.
    pub fn new(s: &SignatureSection) -> Self {
        let p = |w: u8, poly: u64, init: u64, refl: bool, xorout: u64| {
            Calc::Custom(CrcParams::new("sig", w, poly, init, refl, xorout, 0))
        };
        let x64 = s.crc64_xorout;
        let nvme = s.crc64_poly == 0xAD93_D235_94C9_3659 && s.crc64_reflected && x64 == u64::MAX;
        Crcs {
            t10: [Calc::Catalogue(CrcAlgorithm::Crc16T10Dif), p(16, 0x8bb7, 0xffff, false, 0)],
            crc32: [p(32, 0x04c1_1db7, 0, true, 0xffff_ffff), Calc::Catalogue(CrcAlgorithm::Crc32IsoHdlc)],
            crc32c: [p(32, 0x1edc_6f41, 0, true, 0xffff_ffff), Calc::Catalogue(CrcAlgorithm::Crc32Iscsi)],
            crc64: [
                p(64, s.crc64_poly, 0, s.crc64_reflected, x64),
                if nvme {
                    Calc::Catalogue(CrcAlgorithm::Crc64Nvme)
                } else {
                    p(64, s.crc64_poly, u64::MAX, s.crc64_reflected, x64)
                },
            ],
            little_endian_crc: s.crc_pi_little_endian,
        }
    }
}

/// How escapes skip the checks of a T10-DIF block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// No escape.
    None,
    /// Skip a block whose application tag is 0xffff.
    App,
    /// Skip a block whose application tag is 0xffff and reference tag 0xffffffff.
    AppRef,
}

/// One domain's signature, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// T10-DIF.
    T10 {
        /// IP-checksum guard instead of CRC-16.
        csum: bool,
        /// Guard seed is 0xffff.
        seed_ones: bool,
        /// Application tag.
        app: u16,
        /// Reference tag of block 0.
        ref_tag: u32,
        /// Reference tag counts up per block.
        remap: bool,
        /// Escape rule.
        escape: Escape,
    },
    /// CRC32, CRC32C or CRC64_XP10.
    Crc {
        /// `MLX5DV_SIG_CRC_TYPE_*`.
        crc_type: u32,
        /// Seed is all ones.
        seed_ones: bool,
    },
}

/// A domain: its signature and data block size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Domain {
    /// The signature.
    pub kind: Kind,
    /// Data bytes per block.
    pub bs: usize,
}

impl Domain {
    /// Interpret an `mlx5dv_sig_block_domain` the setter accepted.
    pub fn from_attr(d: &SigBlockDomain) -> Option<Domain> {
        let bs = sig::block_bytes(d.block_size)?;
        let kind = match d.sig_type {
            sig::TYPE_T10DIF => {
                let f = d.dif.flags;
                let escape = if f.intersects(sig::FLAG_APP_REF_ESCAPE) {
                    Escape::AppRef
                } else if f.intersects(sig::FLAG_APP_ESCAPE) {
                    Escape::App
                } else {
                    Escape::None
                };
                Kind::T10 {
                    csum: d.dif.bg_type == sig::BG_CSUM,
                    seed_ones: d.dif.bg != 0,
                    app: d.dif.app_tag,
                    ref_tag: d.dif.ref_tag,
                    remap: f.intersects(sig::FLAG_REF_REMAP),
                    escape,
                }
            }
            sig::TYPE_CRC => Kind::Crc { crc_type: d.crc.crc_type, seed_ones: d.crc.seed != 0 },
            _ => return None,
        };
        Some(Domain { kind, bs })
    }

    /// PI bytes per block.
    pub fn pi_len(&self) -> usize {
        match self.kind {
            Kind::Crc { crc_type: sig::CRC32 | sig::CRC32C, .. } => 4,
            _ => 8,
        }
    }

    /// Bytes per protected block.
    pub fn stride(&self) -> usize {
        self.bs + self.pi_len()
    }

    /// The mask bits that mean something for this signature.
    fn mask_bits(&self) -> u8 {
        match self.kind {
            Kind::T10 { .. } => 0xff,
            Kind::Crc { crc_type: sig::CRC64_XP10, .. } => 0xff,
            Kind::Crc { .. } => 0xf0,
        }
    }

    /// The signature value block `index` should carry for `data`.
    pub fn compute(&self, crcs: &Crcs, index: u64, data: &[u8]) -> u64 {
        let guard = match self.calc(crcs) {
            Some(c) => c.run(data),
            None => ip_checksum(data),
        };
        self.value_of(guard, index)
    }

    /// The CRC of the guard; `None` for the IP-checksum guard.
    fn calc<'c>(&self, crcs: &'c Crcs) -> Option<&'c Calc> {
        match self.kind {
            Kind::T10 { csum: true, .. } => None,
            Kind::T10 { seed_ones, .. } => Some(&crcs.t10[usize::from(seed_ones)]),
            Kind::Crc { crc_type, seed_ones } => Some(match crc_type {
                sig::CRC32 => &crcs.crc32[usize::from(seed_ones)],
                sig::CRC32C => &crcs.crc32c[usize::from(seed_ones)],
                _ => &crcs.crc64[usize::from(seed_ones)],
            }),
        }
    }

    /// The signature value of block `index` with guard (or CRC) `guard`.
    #[inline]
    fn value_of(&self, guard: u64, index: u64) -> u64 {
        match self.kind {
            Kind::T10 { app, ref_tag, remap, .. } => {
                let r = if remap { ref_tag.wrapping_add(index as u32) } else { ref_tag };
                guard << 48 | u64::from(app) << 32 | u64::from(r)
            }
            Kind::Crc { .. } if self.pi_len() == 4 => guard << 32,
            Kind::Crc { .. } => guard,
        }
    }

    /// The PI bytes of a signature value.
    pub fn encode(&self, crcs: &Crcs, value: u64, out: &mut Vec<u8>) {
        match (self.kind, self.pi_len()) {
            (Kind::T10 { .. }, _) => out.extend_from_slice(&value.to_be_bytes()),
            (_, 4) if crcs.little_endian_crc => out.extend_from_slice(&((value >> 32) as u32).to_le_bytes()),
            (_, 4) => out.extend_from_slice(&((value >> 32) as u32).to_be_bytes()),
            _ if crcs.little_endian_crc => out.extend_from_slice(&value.to_le_bytes()),
            _ => out.extend_from_slice(&value.to_be_bytes()),
        }
    }

    /// The PI bytes of a signature value, in a fixed array with their length.
    pub fn encode_array(&self, crcs: &Crcs, value: u64) -> ([u8; 8], usize) {
        let mut out = [0u8; 8];
        let n = self.pi_len();
        match (self.kind, n) {
            (Kind::T10 { .. }, _) => out = value.to_be_bytes(),
            (_, 4) if crcs.little_endian_crc => out[..4].copy_from_slice(&((value >> 32) as u32).to_le_bytes()),
            _ if crcs.little_endian_crc => out = value.to_le_bytes(),
            // Big-endian, a 4-byte CRC included: the value's top four bytes come first.
            _ => out = value.to_be_bytes(),
        }
        (out, n)
    }

    /// The signature value of PI bytes.
    pub fn decode(&self, crcs: &Crcs, pi: &[u8]) -> u64 {
        let mut b = [0u8; 8];
        let n = pi.len().min(8);
        b[..n].copy_from_slice(&pi[..n]);
        match (self.kind, self.pi_len()) {
            (Kind::T10 { .. }, _) => u64::from_be_bytes(b),
            (_, 4) if crcs.little_endian_crc => u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])) << 32,
            _ if crcs.little_endian_crc => u64::from_le_bytes(b),
            // Big-endian, a 4-byte CRC included: zero-padded, its bytes are the value's top four.
            _ => u64::from_be_bytes(b),
        }
    }
}

/// The IP-checksum guard of T10-DIF.
fn ip_checksum(data: &[u8]) -> u64 {
    u64::from(u16::from_be_bytes(internet_checksum::checksum(data)))
}

/// A domain's signature value generator for one transfer: [`Domain::compute`] with the CRC
/// chosen once, so a block costs the CRC call and a few shifts.
struct PiGen {
    dom: Domain,
    /// The CRC of the domain; `None` for the IP-checksum guard.
    crc: Option<Digest>,
}

impl PiGen {
    fn new(dom: Domain, crcs: &Crcs) -> Self {
        PiGen { dom, crc: dom.calc(crcs).map(Calc::digest) }
    }

    /// The same value as [`Domain::compute`].
    fn value(&mut self, index: u64, data: &[u8]) -> u64 {
        let guard = match &mut self.crc {
            Some(d) => digest_of(d, data),
            None => ip_checksum(data),
        };
        self.dom.value_of(guard, index)
    }
}

/// The CRC of `data` alone, through a reused digest.
#[inline]
fn digest_of(d: &mut Digest, data: &[u8]) -> u64 {
    d.reset();
    d.update(data);
    d.finalize()
}

/// Append PI to whole data blocks (no input signature), one pass per block: the guard reads
/// the block, the copy then finds it in cache. The crc-fast catalogue CRCs the profiles use
/// are called with a constant algorithm, so the call inlines as a direct one.
fn generate(crcs: &Crcs, o: &Domain, first_block: u64, input: &[u8], output: &mut [u8]) -> Option<()> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has AVX, checked just above.
        return unsafe { generate_avx(crcs, o, first_block, input, output) };
    }
    generate_any(crcs, o, first_block, input, output)
}

/// [`generate_any`] compiled for AVX: the block copies become 32-byte moves.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn generate_avx(crcs: &Crcs, o: &Domain, first_block: u64, input: &[u8], output: &mut [u8]) -> Option<()> {
    generate_any(crcs, o, first_block, input, output)
}

/// [`generate`] for any CPU.
#[inline(always)]
fn generate_any(crcs: &Crcs, o: &Domain, first_block: u64, input: &[u8], output: &mut [u8]) -> Option<()> {
    match o.calc(crcs) {
        None => generate_with(crcs, o, first_block, input, output, ip_checksum),
        Some(Calc::Catalogue(CrcAlgorithm::Crc16T10Dif)) => {
            generate_with(crcs, o, first_block, input, output, |d| checksum(CrcAlgorithm::Crc16T10Dif, d))
        }
        Some(Calc::Catalogue(CrcAlgorithm::Crc32IsoHdlc)) => {
            generate_with(crcs, o, first_block, input, output, |d| checksum(CrcAlgorithm::Crc32IsoHdlc, d))
        }
        Some(Calc::Catalogue(CrcAlgorithm::Crc32Iscsi)) => {
            generate_with(crcs, o, first_block, input, output, |d| checksum(CrcAlgorithm::Crc32Iscsi, d))
        }
        Some(Calc::Catalogue(CrcAlgorithm::Crc64Nvme)) => {
            generate_with(crcs, o, first_block, input, output, |d| checksum(CrcAlgorithm::Crc64Nvme, d))
        }
        Some(c) => {
            let mut dg = c.digest();
            generate_with(crcs, o, first_block, input, output, |d| digest_of(&mut dg, d))
        }
    }
}

/// [`generate`] with the guard function `guard`.
#[inline(always)]
fn generate_with(
    crcs: &Crcs,
    o: &Domain,
    first_block: u64,
    input: &[u8],
    output: &mut [u8],
    guard: impl FnMut(&[u8]) -> u64,
) -> Option<()> {
    // The PI encoder chosen once per transfer, as `value_of` then `encode_array` would write
    // it for each block (the tests compare the two).
    let (le, run) = (crcs.little_endian_crc, (first_block, input, output));
    match (o.kind, o.pi_len()) {
        (Kind::T10 { app, ref_tag, remap, .. }, 8) => generate_pi(o.bs, run, guard, |g, i| {
            let r = if remap { ref_tag.wrapping_add(i as u32) } else { ref_tag };
            (g << 48 | u64::from(app) << 32 | u64::from(r)).to_be_bytes()
        }),
        (Kind::Crc { .. }, 4) if le => generate_pi(o.bs, run, guard, |g, _| (g as u32).to_le_bytes()),
        (Kind::Crc { .. }, 4) => generate_pi(o.bs, run, guard, |g, _| (g as u32).to_be_bytes()),
        (Kind::Crc { .. }, 8) if le => generate_pi(o.bs, run, guard, |g, _| g.to_le_bytes()),
        (Kind::Crc { .. }, 8) => generate_pi(o.bs, run, guard, |g, _| g.to_be_bytes()),
        _ => None,
    }
}

/// [`generate_with`] for `bs`-byte blocks each followed by `N` bytes of PI, `pi(guard,
/// block index)`: one store per block, no length check.
#[inline(always)]
fn generate_pi<const N: usize>(
    bs: usize,
    (first_block, input, output): (u64, &[u8], &mut [u8]),
    mut guard: impl FnMut(&[u8]) -> u64,
    pi: impl Fn(u64, u64) -> [u8; N],
) -> Option<()> {
    for (b, (data, dst)) in input.chunks_exact(bs).zip(output.chunks_exact_mut(bs + N)).enumerate() {
        let (data_out, pi_out) = dst.split_last_chunk_mut::<N>()?;
        let value = pi(guard(data), first_block + b as u64);
        copy_block(data_out, data);
        *pi_out = value;
    }
    Some(())
}

/// `to.copy_from_slice(from)`, in 256-byte steps where the length allows: a fixed copy that
/// short is written inline as vector moves (a longer one becomes a `memcpy` call, whose
/// set-up beside a 512-byte CRC is a sixth of the work).
#[inline(always)]
fn copy_block(to: &mut [u8], from: &[u8]) {
    const STEP: usize = 256;
    // The most common block size, without a loop.
    if let (Some((t0, t1)), Some((f0, f1))) = (to.split_first_chunk_mut::<STEP>(), from.split_first_chunk::<STEP>())
        && let (Some(t1), Some(f1)) = (<&mut [u8; STEP]>::try_from(t1).ok(), <&[u8; STEP]>::try_from(f1).ok())
    {
        (*t0, *t1) = (*f0, *f1);
        return;
    }
    if to.len() != from.len() || !to.len().is_multiple_of(STEP) {
        to.copy_from_slice(from);
        return;
    }
    for (t, f) in to.chunks_exact_mut(STEP).zip(from.chunks_exact(STEP)) {
        if let (Ok(t), Ok(f)) = (<&mut [u8; STEP]>::try_from(t), <&[u8; STEP]>::try_from(f)) {
            *t = *f;
        }
    }
}

/// The 64-bit mask of the bytes a mask byte selects.
fn bytes_of(mask: u8) -> u64 {
    (0..8).filter(|k| mask & (1 << k) != 0).fold(0, |m, k| m | 0xff << (8 * k))
}

/// CQE syndrome bits of a signature error.
pub mod syndrome {
    /// Reference tag.
    pub const REFTAG: u16 = 1 << 11;
    /// Application tag.
    pub const APPTAG: u16 = 1 << 12;
    /// Guard.
    pub const GUARD: u16 = 1 << 13;
}

/// The first failed check of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockError {
    /// GUARD, APPTAG or REFTAG.
    pub syndrome: u16,
    /// The signature value the block should carry.
    pub expected: u64,
    /// The signature value it carries.
    pub actual: u64,
}

/// Check one input block: escapes first, then guard, application tag, reference tag, each on
/// the bytes `check_mask` selects; the first failure is the block's error.
pub fn check_block(d: &Domain, crcs: &Crcs, index: u64, data: &[u8], pi: &[u8], check_mask: u8) -> Option<BlockError> {
    check_with(d, crcs, pi, check_mask, || d.compute(crcs, index, data))
}

/// [`check_block`] with the expected value computed by `expected`, only when no escape
/// applies.
fn check_with(
    d: &Domain,
    crcs: &Crcs,
    pi: &[u8],
    check_mask: u8,
    expected: impl FnOnce() -> u64,
) -> Option<BlockError> {
    let actual = d.decode(crcs, pi);
    if let Kind::T10 { escape, .. } = d.kind {
        let (app, r) = ((actual >> 32) as u16, actual as u32);
        match escape {
            Escape::App if app == 0xffff => return None,
            Escape::AppRef if app == 0xffff && r == 0xffff_ffff => return None,
            _ => {}
        }
    }
    let expected = expected();
    let diff = expected ^ actual;
    let mask = check_mask & d.mask_bits();
    let fields: &[(u8, u16)] = match d.kind {
        Kind::T10 { .. } => &[(0xc0, syndrome::GUARD), (0x30, syndrome::APPTAG), (0x0f, syndrome::REFTAG)],
        Kind::Crc { .. } => &[(0xff, syndrome::GUARD)],
    };
    fields.iter().find(|(f, _)| diff & bytes_of(mask & f) != 0).map(|&(_, syndrome)| BlockError {
        syndrome,
        expected,
        actual,
    })
}

/// A signature error found in a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferError {
    /// The first failed check of the first bad block.
    pub block: BlockError,
    /// Block-boundary offset in the input domain's bytes (data and PI).
    pub offset: u64,
}

/// Which way data moves through the mkey.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Memory is the input, the wire the output (a send, or a remote read of the mkey).
    Tx,
    /// The wire is the input, memory the output.
    Rx,
}

/// The signature configuration of an mkey, as its BSF holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SigConfig {
    /// Memory domain.
    pub mem: Option<Domain>,
    /// Wire domain.
    pub wire: Option<Domain>,
    /// Checked bytes of the input PI.
    pub check_mask: u8,
    /// Copied bytes of the input PI, when both domains have the same block structure.
    pub copy_mask: u8,
    /// Same block structure in both domains.
    pub sbs: bool,
}

impl SigConfig {
    /// `(input, output)` domains for a direction.
    pub fn domains(&self, dir: Direction) -> (Option<Domain>, Option<Domain>) {
        match dir {
            Direction::Tx => (self.mem, self.wire),
            Direction::Rx => (self.wire, self.mem),
        }
    }

    /// The data block size: the domains agree on it, or only one has a signature.
    pub fn bs(&self) -> Option<usize> {
        self.mem.or(self.wire).map(|d| d.bs)
    }

    /// Transform one input block (input-domain format: data, then PI if the input domain has
    /// one), appending its output-domain format to `output`; the block's first failed check.
    pub fn transform_block(
        &self,
        crcs: &Crcs,
        dir: Direction,
        index: u64,
        block: &[u8],
        output: &mut Vec<u8>,
    ) -> Option<BlockError> {
        let (inp, out) = self.domains(dir);
        let bs = self.bs().unwrap_or(block.len()).min(block.len());
        let (data, pi) = block.split_at(bs);
        let err = inp.and_then(|d| check_block(&d, crcs, index, data, pi, self.check_mask));
        output.extend_from_slice(data);
        if let Some(o) = out {
            let mut value = o.compute(crcs, index, data);
            if let (true, Some(i)) = (self.sbs, inp) {
                let copied = bytes_of(self.copy_mask);
                value = (value & !copied) | (i.decode(crcs, pi) & copied);
            }
            o.encode(crcs, value, output);
        }
        err
    }

    /// Transform whole input blocks into an `output` slice of exactly the output size, one
    /// copy of the data; `None` if the sizes do not match whole blocks.
    pub fn transform_slices(
        &self,
        crcs: &Crcs,
        dir: Direction,
        first_block: u64,
        input: &[u8],
        output: &mut [u8],
    ) -> Option<Option<TransferError>> {
        let (inp, out) = self.domains(dir);
        let bs = self.bs()?;
        let in_stride = inp.map_or(bs, |d| d.stride());
        let out_stride = out.map_or(bs, |d| d.stride());
        if !input.len().is_multiple_of(in_stride) || output.len() != input.len() / in_stride * out_stride {
            return None;
        }
        if let (None, Some(o)) = (inp, out)
            && o.bs == bs
        {
            return generate(crcs, &o, first_block, input, output).map(|()| None);
        }
        let (mut check, mut make) = (inp.map(|d| PiGen::new(d, crcs)), out.map(|d| PiGen::new(d, crcs)));
        let copied = bytes_of(self.copy_mask);
        let mut err = None;
        // One pass per block: the CRCs read the input block, the copy then finds it in cache.
        for (b, (block, dst)) in input.chunks_exact(in_stride).zip(output.chunks_exact_mut(out_stride)).enumerate() {
            let index = first_block + b as u64;
            let (data, pi) = block.split_at(bs);
            if let (Some(d), Some(g)) = (inp, check.as_mut())
                && let Some(e) = check_with(&d, crcs, pi, self.check_mask, || g.value(index, data))
                && err.is_none()
            {
                err = Some(TransferError { block: e, offset: (b * in_stride) as u64 });
            }
            let value = make.as_mut().map(|g| g.value(index, data));
            let (data_out, pi_out) = dst.split_at_mut(bs);
            data_out.copy_from_slice(data);
            if let (Some(o), Some(mut value)) = (out, value) {
                if let (true, Some(i)) = (self.sbs, inp) {
                    value = (value & !copied) | (i.decode(crcs, pi) & copied);
                }
                let (enc, n) = o.encode_array(crcs, value);
                pi_out.get_mut(..n)?.copy_from_slice(enc.get(..n)?);
            }
        }
        Some(err)
    }

    /// Transform `input` (in the input domain's format, whole blocks) into the output
    /// domain's format, appended to `output`, checking input PI on the way. `first_block` numbers the blocks for
    /// reference tags. `None` if the input is not whole blocks.
    pub fn transform(
        &self,
        crcs: &Crcs,
        dir: Direction,
        first_block: u64,
        input: &[u8],
        output: &mut Vec<u8>,
    ) -> Option<Option<TransferError>> {
        let (inp, _) = self.domains(dir);
        let bs = self.bs()?;
        let in_stride = inp.map_or(bs, |d| d.stride());
        if !input.len().is_multiple_of(in_stride) {
            return None;
        }
        let blocks = input.len() / in_stride;
        let mut err = None;
        for b in 0..blocks {
            let block = &input[b * in_stride..(b + 1) * in_stride];
            if let Some(e) = self.transform_block(crcs, dir, first_block + b as u64, block, output)
                && err.is_none()
            {
                err = Some(TransferError { block: e, offset: (b * in_stride) as u64 });
            }
        }
        Some(err)
    }
}

/// The copy mask the provider computes when the application gives none (docs/behaviour.md
/// item 40): for like CRC domains all CRC bytes; for T10-DIF the fields configured alike in
/// both domains.
pub fn automatic_copy_mask(mem: &Domain, wire: &Domain) -> u8 {
    match (mem.kind, wire.kind) {
        (Kind::Crc { crc_type: sig::CRC64_XP10, .. }, _) => 0xff,
        (Kind::Crc { .. }, _) => 0xf0,
        (
            Kind::T10 { csum: c1, seed_ones: s1, app: a1, ref_tag: r1, .. },
            Kind::T10 { csum: c2, seed_ones: s2, app: a2, ref_tag: r2, .. },
        ) => {
            let mut m = 0;
            if c1 == c2 && s1 == s2 {
                m |= 0xc0;
            }
            if a1 == a2 {
                m |= 0x30;
            }
            if r1 == r2 {
                m |= 0x0f;
            }
            m
        }
        _ => 0,
    }
}

/// Same block structure: the same signature type, block size and (for CRC) CRC type.
pub fn same_block_structure(mem: &Domain, wire: &Domain) -> bool {
    mem.bs == wire.bs
        && match (mem.kind, wire.kind) {
            (Kind::T10 { .. }, Kind::T10 { .. }) => true,
            (Kind::Crc { crc_type: a, .. }, Kind::Crc { crc_type: b, .. }) => a == b,
            _ => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX build of [`generate`] writes what the build for any CPU writes, for every
    /// signature type, PI byte order and block size (each size takes its own copy path).
    #[test]
    fn generate_gives_the_same_bytes_with_and_without_avx() -> Result<(), String> {
        let domains = |bs| {
            [
                SigBlockDomain::t10dif(bs, mlx5_dv::SigT10dif { app_tag: 7, ref_tag: 9, ..Default::default() }),
                SigBlockDomain::crc(bs, sig::CRC32, u64::MAX),
                SigBlockDomain::crc(bs, sig::CRC32C, 0),
                SigBlockDomain::crc(bs, sig::CRC64_XP10, u64::MAX),
            ]
        };
        for le in [false, true] {
            let crcs = Crcs::new(&SignatureSection { crc_pi_little_endian: le, ..Default::default() });
            for bs in sig::BLOCK_512..=sig::BLOCK_4160 {
                for attr in domains(bs) {
                    let d = Domain::from_attr(&attr).ok_or(format!("no domain for {attr:?}"))?;
                    let input: Vec<u8> = (0..3 * d.bs).map(|i| (i * 31 % 251) as u8).collect();
                    let (mut any, mut fast) = (vec![0u8; 3 * d.stride()], vec![0u8; 3 * d.stride()]);
                    assert_eq!(generate_any(&crcs, &d, 5, &input, &mut any), Some(()));
                    assert_eq!(generate(&crcs, &d, 5, &input, &mut fast), Some(()));
                    assert_eq!(any, fast, "{attr:?}, little-endian PI {le}");
                    let pi = d.encode_array(&crcs, d.compute(&crcs, 6, &input[d.bs..2 * d.bs])).0;
                    assert_eq!(any[d.stride() + d.bs..2 * d.stride()], pi[..d.pi_len()], "{attr:?}");
                }
            }
        }
        Ok(())
    }

    /// Input that is not whole blocks, or an output of another size than they make, is
    /// refused before anything is written.
    #[test]
    fn transform_slices_refuses_sizes_that_are_not_whole_blocks() -> Result<(), String> {
        let crcs = Crcs::new(&SignatureSection::default());
        let d = Domain::from_attr(&SigBlockDomain::crc(sig::BLOCK_512, sig::CRC32, u64::MAX)).ok_or("a domain")?;
        let cfg = SigConfig { mem: None, wire: Some(d), check_mask: 0xff, copy_mask: 0, sbs: false };
        let input = vec![7u8; 1024];
        let mut right = vec![0u8; 2 * 516];
        assert_eq!(cfg.transform_slices(&crcs, Direction::Tx, 0, &input, &mut right), Some(None));
        let mut short = vec![0u8; 2 * 516 - 1];
        assert_eq!(cfg.transform_slices(&crcs, Direction::Tx, 0, &input, &mut short), None, "output size");
        assert!(short.iter().all(|&b| b == 0));
        let mut out = vec![0u8; 516];
        assert_eq!(cfg.transform_slices(&crcs, Direction::Tx, 0, &input[..700], &mut out), None, "a part block");
        Ok(())
    }
}
