//! Translation: an (mkey, address, length) to host address ranges through MTTs, KLM lists and
//! repeat blocks, checking the key's state, tag, PD and access rights on the way.
//!
//! A repeat block whose strides are all 0 maps every repetition onto the same memory, so its
//! whole repetitions are kept as one run (ranges and a count) rather than expanded: the cost
//! is per entry and per run, never per byte.

use mlx5_dv::prm::{Field, mkc};

use super::{Engine, syndrome};
use crate::device::firmware::FwMkey;
use crate::device::translation::Translation;
use crate::small::SmallVec;

/// How deep indirect mkeys may point through each other.
const MAX_INDIRECTION: u32 = 4;

/// Most ranges one translation may produce; beyond it the access fails rather than grow.
const MAX_RANGES: usize = 1 << 22;

/// What an access needs from the key it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Need {
    LocalRead,
    LocalWrite,
    RemoteRead,
    RemoteWrite,
    /// An atomic's 8 bytes: the mkey's `a` (IBV_ACCESS_REMOTE_ATOMIC).
    RemoteAtomic,
}

impl Need {
    /// The error syndrome of a fault on this access: local or remote.
    fn syndrome(self) -> u8 {
        match self {
            Need::LocalRead | Need::LocalWrite => syndrome::LOCAL_PROT,
            Need::RemoteRead | Need::RemoteWrite | Need::RemoteAtomic => syndrome::REMOTE_ACCESS,
        }
    }
}

/// Where a key is looked up: a device and the protection domain of the QP using it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct At {
    pub(super) dev: usize,
    pub(super) pdn: u32,
    /// The QP the access comes through (a type-2 window answers only on the QP it is
    /// bound to).
    pub(super) qpn: u32,
}

/// Why a translation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    /// No such key, a free key, a wrong tag or PD, or too deep an indirection.
    Key,
    /// The key does not grant the access.
    Rights,
    /// Outside the key's range, or address arithmetic that overflows.
    Bounds,
    /// No layout, a signature layout the device does not transform, or too many ranges.
    Layout,
    /// Memory behind the key is not mapped.
    Unmapped,
    /// A crypto failure: no crypto attributes, a DEK in ERROR or gone, a keytag mismatch,
    /// or a job size AES-XTS refuses.
    Crypto,
}

/// A failed translation or transfer: why, and the syndrome the side that met it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fault {
    pub(super) why: Why,
    pub(super) syndrome: u8,
}

impl Fault {
    /// A fault met by an access with `need`.
    pub(super) fn of(need: Need, why: Why) -> Self {
        Fault { why, syndrome: need.syndrome() }
    }

    /// A crypto fault is the requester's own error CQE (the profile's syndrome); others keep
    /// their syndrome and the profile's vendor syndrome for it.
    pub(super) fn is_crypto(&self) -> bool {
        self.why == Why::Crypto
    }
}

/// `ranges[start..end]` mapped `reps` times in a row (a repeat block with stride 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Run {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) reps: u64,
}

/// A translation: host ranges in order; ranges inside a [`Run`] repeat. A few ranges and a
/// run are held in place: most accesses translate to one range.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Xlat {
    pub(super) ranges: SmallVec<(u64, u64), 4>,
    pub(super) runs: SmallVec<Run, 1>,
}

impl Xlat {
    /// The ranges, when nothing repeats.
    pub(super) fn flat(&self) -> Option<&[(u64, u64)]> {
        self.runs.is_empty().then_some(&self.ranges[..])
    }

    fn push(&mut self, va: u64, n: u64) -> Result<(), Why> {
        if n == 0 {
            return Ok(());
        }
        let last_run_end = self.runs.last().map_or(0, |r| r.end);
        if self.ranges.len() > last_run_end
            && let Some(l) = self.ranges.last_mut()
            && l.0.checked_add(l.1) == Some(va)
        {
            l.1 = l.1.checked_add(n).ok_or(Why::Bounds)?;
            return Ok(());
        }
        if self.ranges.len() >= MAX_RANGES {
            return Err(Why::Layout);
        }
        self.ranges.push((va, n));
        Ok(())
    }

    /// Append `other`, repeated `reps` times.
    fn append(&mut self, other: Xlat, reps: u64) -> Result<(), Why> {
        if reps == 1 || other.ranges.is_empty() {
            if other.runs.is_empty() {
                return other.ranges.iter().try_for_each(|&(va, n)| self.push(va, n));
            }
            let base = self.ranges.len();
            if base.checked_add(other.ranges.len()).is_none_or(|n| n > MAX_RANGES) {
                return Err(Why::Layout);
            }
            self.ranges.extend(other.ranges.iter().copied());
            self.runs.extend(other.runs.iter().map(|r| Run { start: r.start + base, end: r.end + base, ..*r }));
            return Ok(());
        }
        if !other.runs.is_empty() {
            // A run inside a run: expand the outer one, within the range budget.
            let copies = usize::try_from(reps).map_err(|_| Why::Layout)?;
            if other.ranges.len().checked_mul(copies).is_none_or(|n| n > MAX_RANGES) {
                return Err(Why::Layout);
            }
            for _ in 0..reps {
                self.append(other.clone(), 1)?;
            }
            return Ok(());
        }
        let start = self.ranges.len();
        if start.checked_add(other.ranges.len()).is_none_or(|n| n > MAX_RANGES) {
            return Err(Why::Layout);
        }
        self.ranges.extend(other.ranges.iter().copied());
        self.runs.push(Run { start, end: self.ranges.len(), reps });
        Ok(())
    }

    /// Total bytes, repetitions included.
    pub(super) fn len(&self) -> Option<u64> {
        let sum = |r: &[(u64, u64)]| r.iter().try_fold(0u64, |a, &(_, n)| a.checked_add(n));
        let mut total = sum(&self.ranges)?;
        for r in &self.runs {
            let once = sum(self.ranges.get(r.start..r.end)?)?;
            total = total.checked_add(once.checked_mul(r.reps.saturating_sub(1))?)?;
        }
        Some(total)
    }
}

/// A position in an [`Xlat`], repetitions included.
pub(super) struct Cursor<'x> {
    x: &'x Xlat,
    /// Next range.
    i: usize,
    off: u64,
    /// Index of the next run not yet entered, and repetitions done of the current one.
    run: usize,
    rep: u64,
}

impl<'x> Cursor<'x> {
    pub(super) fn new(x: &'x Xlat) -> Self {
        Cursor { x, i: 0, off: 0, run: 0, rep: 0 }
    }

    /// The run the cursor is in: (start, end, reps).
    fn current_run(&self) -> Option<(usize, usize, u64)> {
        let r = self.x.runs.get(self.run)?;
        (r.start <= self.i && self.i < r.end).then_some((r.start, r.end, r.reps))
    }

    /// At the start of a repetition of a run: the bytes of one repetition and the
    /// repetitions left.
    pub(super) fn at_rep_start(&self) -> Option<(u64, u64)> {
        let (start, end, reps) = self.current_run()?;
        if self.i != start || self.off != 0 {
            return None;
        }
        let once = self.x.ranges.get(start..end)?.iter().try_fold(0u64, |a, r| a.checked_add(r.1))?;
        Some((once, reps.saturating_sub(self.rep)))
    }

    /// Skip `k` whole repetitions from the start of one (at most those left).
    pub(super) fn skip_reps(&mut self, k: u64) {
        self.rep += k;
    }

    /// The next piece of at most `want` bytes; advances.
    pub(super) fn next(&mut self, want: u64) -> Option<(u64, u64)> {
        loop {
            let &(va, len) = self.x.ranges.get(self.i)?;
            if self.off < len {
                let n = want.min(len - self.off);
                let at = va.checked_add(self.off)?;
                self.off += n;
                return Some((at, n));
            }
            self.off = 0;
            self.i += 1;
            if let Some((start, end, reps)) = self.x.runs.get(self.run).map(|r| (r.start, r.end, r.reps))
                && self.i == end
            {
                self.rep += 1;
                if self.rep < reps {
                    self.i = start;
                } else {
                    self.run += 1;
                    self.rep = 0;
                }
            }
        }
    }
}

/// Skip `n` bytes of a cursor, whole repetitions of a run at a time.
pub(super) fn skip_bytes(c: &mut Cursor<'_>, mut n: u64) -> Result<(), Why> {
    while n > 0 {
        if let Some((once, reps)) = c.at_rep_start()
            && once > 0
            && once <= n
        {
            let k = (n / once).min(reps);
            c.skip_reps(k);
            n -= k * once;
            if c.rep >= c.current_run().map_or(0, |r| r.2) {
                // Past the run's last repetition: onto the range after it.
                c.i = c.current_run().map_or(c.i, |r| r.1);
                c.run += 1;
                c.rep = 0;
            }
            continue;
        }
        let (_, k) = c.next(n).ok_or(Why::Bounds)?;
        n -= k;
    }
    Ok(())
}

/// A field of the mkey context; 0 for one it cannot hold. `Field::get`'s reading, inlined:
/// translation reads about ten fields per key.
#[inline(always)]
pub(super) fn field(m: &FwMkey, f: Field) -> u64 {
    let at = f.dword_byte();
    match f.width {
        64 if f.bit_off.is_multiple_of(32) => {
            m.mkc.get(at..at + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_be_bytes)
        }
        1..=32 if f.bit_off % 32 + f.width <= 32 => {
            let dword = m.mkc.get(at..at + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_be_bytes);
            (u64::from(dword) >> f.low_bit()) & ((1u64 << f.width) - 1)
        }
        _ => 0,
    }
}

impl Engine<'_> {
    /// Translate `[addr, addr + len)` of `key`, whose mkey `m` the caller looked up, into host
    /// address ranges appended to `out`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn resolve_mkey(
        &self,
        at: At,
        m: Option<&FwMkey>,
        key: u32,
        addr: u64,
        len: u64,
        need: Need,
        out: &mut Xlat,
    ) -> Result<(), Fault> {
        self.resolve_found(at, m, key, addr, len, Some(need), 0, out).map_err(|why| Fault::of(need, why))
    }

    /// `need` is `None` for an entry of an indirect mkey, whose own rights already decided.
    #[allow(clippy::too_many_arguments)]
    fn resolve_into(
        &self,
        at: At,
        key: u32,
        addr: u64,
        len: u64,
        need: Option<Need>,
        depth: u32,
        out: &mut Xlat,
    ) -> Result<(), Why> {
        if depth > MAX_INDIRECTION {
            return Err(Why::Key);
        }
        let m = self.devs.get(at.dev).ok_or(Why::Key)?.fw.mkey(key >> 8);
        self.resolve_found(at, m, key, addr, len, need, depth, out)
    }

    /// [`Engine::resolve_into`] once the key's mkey is looked up.
    #[allow(clippy::too_many_arguments)]
    fn resolve_found(
        &self,
        at: At,
        m: Option<&FwMkey>,
        key: u32,
        addr: u64,
        len: u64,
        need: Option<Need>,
        depth: u32,
        out: &mut Xlat,
    ) -> Result<(), Why> {
        let m = m.ok_or(Why::Key)?;
        if field(m, mkc::FREE) != 0
            || field(m, mkc::MKEY_7_0) != u64::from(key & 0xff)
            || field(m, mkc::PD) != u64::from(at.pdn)
        {
            return Err(Why::Key);
        }
        // crypto_en with no crypto BSF ever written fails the access; a crypto mkey behind
        // an indirect one (a cipher inside another mkey's layout) is not simulated.
        if field(m, mkc::CRYPTO_EN) != 0 && (m.crypto.is_none() || depth > 0) {
            return Err(Why::Crypto);
        }
        let allowed = match need {
            Some(Need::LocalRead) | None => true,
            Some(Need::LocalWrite) => field(m, mkc::LW) != 0,
            Some(Need::RemoteRead) => field(m, mkc::RR) != 0,
            Some(Need::RemoteWrite) => field(m, mkc::RW) != 0,
            Some(Need::RemoteAtomic) => field(m, mkc::A) != 0,
        };
        if !allowed {
            return Err(Why::Rights);
        }
        // A window bound as type 2 carries its QP's number; others carry none (0xffffff).
        let remote = matches!(need, Some(Need::RemoteRead | Need::RemoteWrite | Need::RemoteAtomic));
        let qpn = field(m, mkc::QPN);
        if remote && qpn != 0xff_ffff && field(m, mkc::UMR_EN) != 0 && qpn != u64::from(at.qpn) {
            return Err(Why::Key);
        }
        let start = field(m, mkc::START_ADDR);
        let mlen = field(m, mkc::LEN);
        // A MEMIC mkey is zero-based: its own addresses count from 0, its start_addr is MEMIC's.
        let base = if matches!(m.xlat, Translation::Memic) { 0 } else { start };
        let off = addr.checked_sub(base).ok_or(Why::Bounds)?;
        if off.checked_add(len).is_none_or(|end| end > mlen) {
            return Err(Why::Bounds);
        }
        let nested = |a: u64, n: u64, k: u32, out: &mut Xlat| self.resolve_into(at, k, a, n, None, depth + 1, out);
        match &m.xlat {
            Translation::None => Err(Why::Layout),
            Translation::Memic => {
                let dev = self.devs.get(at.dev).ok_or(Why::Key)?;
                let bar = start.checked_add(off).ok_or(Why::Bounds)?;
                out.push(dev.fw.memic_host(bar, len).ok_or(Why::Bounds)?, len)
            }
            Translation::Mtt => match &m.pages {
                None => out.push(addr, len),
                Some(pages) => mtt_walk(pages, field(m, mkc::LOG_PAGE_SIZE), start, off, len, out),
            },
            Translation::Klm(entries) => {
                let (mut pos, mut want, mut base) = (off, len, 0u64);
                for e in entries {
                    let bc = u64::from(e.byte_count);
                    let end = base.checked_add(bc).ok_or(Why::Bounds)?;
                    if want > 0 && pos < end {
                        let inner = pos - base;
                        let n = want.min(bc - inner);
                        nested(e.addr.checked_add(inner).ok_or(Why::Bounds)?, n, e.key, out)?;
                        pos += n;
                        want -= n;
                    }
                    base = end;
                }
                if want > 0 { Err(Why::Bounds) } else { Ok(()) }
            }
            Translation::Repeat { repeat_count, entries } => {
                let per: u64 = entries.iter().map(|e| u64::from(e.byte_count)).sum();
                let (mut pos, mut want) = (off, len);
                let still = entries.iter().all(|e| e.stride == 0);
                while want > 0 {
                    if per == 0 {
                        return Err(Why::Layout);
                    }
                    let rep = pos / per;
                    if rep >= u64::from(*repeat_count) {
                        return Err(Why::Bounds);
                    }
                    let within = pos % per;
                    if still && within == 0 && want >= per.saturating_mul(2) {
                        // Whole repetitions onto the same memory: one run.
                        let reps = (want / per).min(u64::from(*repeat_count) - rep);
                        let mut once = Xlat::default();
                        for e in entries {
                            nested(e.addr, u64::from(e.byte_count), e.key, &mut once)?;
                        }
                        out.append(once, reps)?;
                        pos += reps * per;
                        want -= reps * per;
                        continue;
                    }
                    let mut within = within;
                    for e in entries {
                        let bc = u64::from(e.byte_count);
                        if within >= bc {
                            within -= bc;
                            continue;
                        }
                        let n = want.min(bc - within);
                        let a = rep
                            .checked_mul(u64::from(e.stride))
                            .and_then(|o| e.addr.checked_add(o))
                            .and_then(|a| a.checked_add(within))
                            .ok_or(Why::Bounds)?;
                        nested(a, n, e.key, out)?;
                        pos += n;
                        want -= n;
                        break;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Host ranges of `len` bytes at offset `off` of an MTT mkey starting at `start`, page by page.
fn mtt_walk(pages: &[u64], log_page: u64, start: u64, off: u64, len: u64, out: &mut Xlat) -> Result<(), Why> {
    let page = 1u64.checked_shl(u32::try_from(log_page).map_err(|_| Why::Layout)?).ok_or(Why::Layout)?;
    let mut at = (start & (page - 1)).checked_add(off).ok_or(Why::Bounds)?;
    let mut want = len;
    while want > 0 {
        let idx = usize::try_from(at / page).map_err(|_| Why::Bounds)?;
        let host = pages.get(idx).ok_or(Why::Bounds)?;
        let within = at % page;
        let n = want.min(page - within);
        out.push(host.checked_add(within).ok_or(Why::Bounds)?, n)?;
        at += n;
        want -= n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mkey_context_fields_read_as_the_field_codec_reads_them() {
        use mlx5_dv::prm::Layout;
        let mut m =
            FwMkey { mkc: [0; mkc::SIZE], uid: 0, xlat: Translation::Mtt, sig: None, pages: None, crypto: None };
        for seed in 0u8..=255 {
            for (i, b) in m.mkc.iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(seed).wrapping_add(seed.rotate_left(3));
            }
            for f in mkc::Mkc::FIELDS.iter().copied().chain([Field::new("odd", 0x1f, 2), Field::new("wide", 4, 64)]) {
                assert_eq!(field(&m, f), f.get(&m.mkc).unwrap_or(0), "{}", f.name);
            }
        }
    }
}
