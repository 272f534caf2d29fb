//! The per-mkey data pipeline: memory signature, crypto and wire signature, in the order
//! the crypto BSF's `enc_order` says, run block by block as bytes cross the mkey (a crypto
//! mkey's transfer as a whole, see [`super::cipher`]). A plain mkey is a pipeline with no
//! stages. An [`Endpoint`] is one side of a message: the pipelines and translated memory of
//! its keys in wire order; [`Engine::stream`] moves a message's wire bytes from one endpoint
//! to another.

use mlx5_dv::Sge;

use super::Engine;
use super::cipher::CryptoStage;
use super::translate::{At, Cursor, Fault, Need, Why, Xlat, skip_bytes};
use crate::device::firmware::FwMkey;
use crate::host::{Dma, RangeCursor};
use crate::signature::{Direction, SigConfig, TransferError};
use crate::small::SmallVec;

/// Wire bytes moved per step through a part without stages.
const CHUNK: usize = 64 * 1024;

/// A signature error met in a transfer, not yet reported.
#[derive(Debug, Clone, Copy)]
pub(super) struct SigHit {
    pub(super) dev: usize,
    pub(super) index: u32,
    pub(super) err: TransferError,
    /// CQE domain: 0 wire, 1 memory.
    pub(super) domain: u8,
}

/// The signature stage of an mkey's pipeline, for one transfer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stage {
    cfg: SigConfig,
    index: u32,
    /// The transfer's first block, counted from mkey offset 0 (for reference tags).
    first: u64,
}

/// One key's share of a message: its stages (none for a plain key), its translated memory
/// and the wire bytes it stands for.
#[derive(Debug, Clone, Default)]
pub(super) struct Part {
    pub(super) stage: Option<Stage>,
    /// The crypto stage of a configured CRYPTO mkey.
    pub(super) crypto: Option<CryptoStage>,
    pub(super) mem: Xlat,
    pub(super) wire: u64,
}

/// A transfer that failed: why, and whether the destination (not the source) met it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Failed {
    pub(super) why: Why,
    pub(super) at_dst: bool,
}

/// One side of a message: a device and its parts in wire order (one in place: consecutive
/// plain keys merge into one part).
#[derive(Debug, Clone)]
pub(super) struct Endpoint {
    pub(super) dev: usize,
    pub(super) parts: SmallVec<Part, 1>,
}

impl Endpoint {
    /// Wire bytes of the whole message side.
    pub(super) fn wire_len(&self) -> Option<u64> {
        self.parts.iter().try_fold(0u64, |a, p| a.checked_add(p.wire))
    }
}

/// A BSF of NONE in both domains (a reset signature beside a crypto BSF) is no stage.
pub(super) fn stage_cfg(m: Option<&FwMkey>) -> Option<SigConfig> {
    m?.sig.map(|b| b.cfg).filter(|c| c.mem.is_some() || c.wire.is_some())
}

fn append_xlat(to: &mut Xlat, x: Xlat) -> Result<(), Why> {
    let base = to.ranges.len();
    to.ranges.extend(x.ranges.iter().copied());
    to.runs.extend(x.runs.iter().map(|r| super::translate::Run { start: r.start + base, end: r.end + base, ..*r }));
    Ok(())
}

/// The block size of a configuration, if both domains agree on it (mixed block sizes are
/// not simulated).
fn block_size(cfg: &SigConfig) -> Result<u64, Why> {
    let bs = cfg.bs().ok_or(Why::Layout)?;
    if [cfg.mem, cfg.wire].iter().flatten().any(|d| d.bs != bs) {
        return Err(Why::Layout);
    }
    Ok(bs as u64)
}

/// Bytes per block in memory and on the wire.
fn strides(cfg: &SigConfig, bs: u64) -> (u64, u64) {
    (cfg.mem.map_or(bs, |d| d.stride() as u64), cfg.wire.map_or(bs, |d| d.stride() as u64))
}

impl Engine<'_> {
    /// The mkey `key` names on device `dev`.
    pub(super) fn mkey_of(&self, dev: usize, key: u32) -> Option<&FwMkey> {
        self.devs.get(dev)?.fw.mkey(key >> 8)
    }

    /// The signature BSF of the mkey `key` names on device `dev`.
    fn sig_of(&self, dev: usize, key: u32) -> Option<SigConfig> {
        stage_cfg(self.mkey_of(dev, key))
    }

    /// True if the mkey `key` names has pipeline stages.
    pub(super) fn has_stages(&self, dev: usize, key: u32) -> bool {
        self.sig_of(dev, key).is_some()
    }

    /// Append one key's part to `ep`: `addr` and `len` count data bytes for a local SGE, wire
    /// bytes for a remote address; with stages, whole blocks only, numbered from mkey offset
    /// 0. A part without stages joins a part without stages before it. Built in place: the
    /// key is looked up once, and the part is never moved.
    #[allow(clippy::too_many_arguments)]
    fn push_part(
        &self,
        ep: &mut Endpoint,
        at: At,
        key: u32,
        addr: u64,
        len: u64,
        need: Need,
        local: bool,
    ) -> Result<(), Fault> {
        let fault = |why| Fault::of(need, why);
        let m = self.mkey_of(at.dev, key);
        let crypto = m.and_then(|m| m.crypto);
        let Some(cfg) = stage_cfg(m) else {
            if crypto.is_none()
                && let Some(last) = ep.parts.last_mut().filter(|l| l.stage.is_none() && l.crypto.is_none())
            {
                let mut mem = Xlat::default();
                self.resolve_mkey(at, m, key, addr, len, need, &mut mem)?;
                last.wire = last.wire.checked_add(len).ok_or(fault(Why::Bounds))?;
                return append_xlat(&mut last.mem, mem).map_err(fault);
            }
            let p = ep.parts.push_default();
            self.resolve_mkey(at, m, key, addr, len, need, &mut p.mem)?;
            p.crypto = crypto.map(|c| self.crypto_stage(at.dev, c, len, len)).transpose().map_err(fault)?;
            p.wire = len;
            return Ok(());
        };
        let bs = block_size(&cfg).map_err(fault)?;
        let (mem_stride, wire_stride) = strides(&cfg, bs);
        let stride = if local { bs } else { wire_stride };
        if !addr.is_multiple_of(stride) || !len.is_multiple_of(stride) {
            return Err(fault(Why::Layout));
        }
        let (first, n) = (addr / stride, len / stride);
        let span = |s: u64| first.checked_mul(s).zip(n.checked_mul(s)).ok_or(fault(Why::Bounds));
        let (mem_at, mem_len) = span(mem_stride)?;
        let (_, wire) = span(wire_stride)?;
        let p = ep.parts.push_default();
        self.resolve_mkey(at, m, key, mem_at, mem_len, need, &mut p.mem)?;
        p.crypto = crypto.map(|c| self.crypto_stage(at.dev, c, mem_len, wire)).transpose().map_err(fault)?;
        p.stage = Some(Stage { cfg, index: key >> 8, first });
        p.wire = wire;
        Ok(())
    }

    /// The endpoint of local SGEs; `limit` clips it to that many wire bytes (a receive
    /// buffer longer than the message): later SGEs are not translated.
    pub(super) fn local_endpoint(
        &self,
        at: At,
        sge: &[Sge],
        need: Need,
        limit: Option<u64>,
    ) -> Result<Endpoint, Fault> {
        let mut ep = Endpoint { dev: at.dev, parts: SmallVec::new() };
        let mut left = limit;
        for s in sge {
            let mut len = u64::from(s.length);
            if let Some(l) = left.as_mut() {
                if *l == 0 {
                    break;
                }
                let full = self.wire_len(at.dev, std::slice::from_ref(s));
                if full > *l {
                    len = self.data_for_wire(at.dev, s.lkey, *l).ok_or(Fault::of(need, Why::Layout))?;
                }
                *l = l.saturating_sub(full);
            }
            self.push_part(&mut ep, at, s.lkey, s.addr, len, need, true)?;
        }
        Ok(ep)
    }

    /// The data bytes of `key` that `wire` wire bytes stand for: whole blocks through a
    /// signature stage.
    fn data_for_wire(&self, dev: usize, key: u32, wire: u64) -> Option<u64> {
        let Some(cfg) = self.sig_of(dev, key) else { return Some(wire) };
        let bs = block_size(&cfg).ok()?;
        let (_, ws) = strides(&cfg, bs);
        wire.is_multiple_of(ws).then(|| wire / ws * bs)
    }

    /// The endpoint of `wire` bytes at `addr` of a remote key.
    pub(super) fn remote_endpoint(
        &self,
        at: At,
        key: u32,
        addr: u64,
        wire: u64,
        need: Need,
    ) -> Result<Endpoint, Fault> {
        let mut ep = Endpoint { dev: at.dev, parts: SmallVec::new() };
        self.push_part(&mut ep, at, key, addr, wire, need, false)?;
        Ok(ep)
    }

    /// The wire bytes an SGE list stands for (a wire signature adds its PI per block).
    pub(super) fn wire_len(&self, dev: usize, sge: &[Sge]) -> u64 {
        sge.iter()
            .map(|s| match self.sig_of(dev, s.lkey) {
                Some(cfg) => match (cfg.bs(), cfg.wire) {
                    (Some(bs), Some(w)) => u64::from(s.length) / bs as u64 * w.stride() as u64,
                    _ => u64::from(s.length),
                },
                None => u64::from(s.length),
            })
            .fold(0u64, u64::saturating_add)
    }

    /// True if every range of `ep` is mapped.
    pub(super) fn mapped(&self, ep: &Endpoint) -> bool {
        ep.parts.iter().all(|p| p.mem.ranges.iter().all(|&(va, n)| self.host.is_mapped(va, n)))
    }

    /// Run `src`'s pipelines towards the wire without placing anything: its first signature
    /// error (a SIG_PIPELINING requester checks before it sends).
    pub(super) fn check_source(&mut self, src: &Endpoint) -> Result<Option<SigHit>, Fault> {
        let mut out = self.take_scratch(src.dev);
        let mut hit = None;
        let mut r = Ok(());
        for p in src.parts.iter().filter(|p| p.stage.is_some()) {
            let mut cur = Cursor::new(&p.mem);
            let mut made = 0;
            while made < p.wire {
                out.clear();
                match self.produce(src.dev, p, &mut cur, made, p.wire - made, &mut out, &mut hit) {
                    Ok(0) => break,
                    Ok(n) => made += n,
                    Err(w) => {
                        r = Err(w);
                        break;
                    }
                }
            }
            if r.is_err() {
                break;
            }
        }
        self.give_scratch(src.dev, out);
        r.map(|()| hit).map_err(|why| Fault::of(Need::LocalRead, why))
    }

    /// Move the message from `src` (its pipelines run memory → wire) to `dst` (wire →
    /// memory), with `corrupt` flipping one wire byte: the first signature error of each
    /// side, or the side that failed.
    pub(super) fn stream(
        &mut self,
        src: &Endpoint,
        dst: &Endpoint,
        corrupt: Option<(u64, u8)>,
    ) -> Result<(Option<SigHit>, Option<SigHit>), Failed> {
        let (at_src, at_dst) = (|why| Failed { why, at_dst: false }, |why| Failed { why, at_dst: true });
        if !self.mapped(src) {
            return Err(at_src(Why::Unmapped));
        }
        if !self.mapped(dst) {
            return Err(at_dst(Why::Unmapped));
        }
        if corrupt.is_none()
            && let ([s], [d]) = (&src.parts[..], &dst.parts[..])
        {
            let plain = s.crypto.is_none() && d.crypto.is_none();
            match (s.stage, d.stage) {
                (None, None) if plain => return self.copy(&s.mem, &d.mem).map(|()| (None, None)).map_err(at_src),
                (None, None) => {
                    if let Some(r) = self.cipher_flat(s, d) {
                        return r.map(|()| (None, None));
                    }
                }
                (Some(st), None) | (None, Some(st)) if plain && s.mem.flat().is_some() && d.mem.flat().is_some() => {
                    let tx = s.stage.is_some();
                    let (dir, dev) = if tx { (Direction::Tx, src.dev) } else { (Direction::Rx, dst.dev) };
                    let r = self.stream_blocks(dev, &st, dir, &s.mem.ranges, &d.mem.ranges);
                    let r = r.map_err(if tx { at_src } else { at_dst })?;
                    let hit = r.map(|err| SigHit { dev, index: st.index, err, domain: dir_domain(dir) });
                    return Ok(if tx { (hit, None) } else { (None, hit) });
                }
                _ => {}
            }
        }
        self.stream_chunks(src, dst, corrupt)
    }

    /// The wire bytes of `src`, gathered into a pooled buffer (give it back when done).
    pub(super) fn gather(&mut self, src: &Endpoint) -> Result<(Vec<u8>, Option<SigHit>), Why> {
        let mut wire = self.take_scratch(src.dev);
        let mut hit = None;
        for p in &src.parts {
            let mut cur = Cursor::new(&p.mem);
            let mut made = 0;
            while made < p.wire {
                match self.produce(src.dev, p, &mut cur, made, p.wire - made, &mut wire, &mut hit) {
                    Ok(0) => break,
                    Ok(n) => made += n,
                    Err(w) => {
                        self.give_scratch(src.dev, wire);
                        return Err(w);
                    }
                }
            }
        }
        Ok((wire, hit))
    }

    /// Place received wire bytes at `dst` through its pipelines (wire → memory): its first
    /// signature error. A message longer than `dst` leaves the rest unplaced.
    pub(super) fn scatter(&mut self, data: &[u8], dst: &Endpoint) -> Result<Option<SigHit>, Why> {
        if !self.mapped(dst) {
            return Err(Why::Unmapped);
        }
        if let [d] = &dst.parts[..]
            && d.stage.is_none()
            && d.crypto.is_none()
            && let Some(ranges) = d.mem.flat()
        {
            let n = data.len().min(usize::try_from(d.wire).unwrap_or(usize::MAX));
            let mut cur = RangeCursor::new(ranges);
            return if self.host.write_ranges(&mut cur, &data[..n]) { Ok(None) } else { Err(Why::Unmapped) };
        }
        let mut sink = Sink::new(dst, self.devs.get(dst.dev).ok_or(Why::Key)?.crcs);
        sink.feed(self.host, data)?;
        sink.finish()
    }

    /// Copy between plain translations; the earlier repetitions of a run in `dst` are
    /// overwritten by its last, so only the last is written.
    fn copy(&mut self, src: &Xlat, dst: &Xlat) -> Result<(), Why> {
        if let (Some(s), Some(d)) = (src.flat(), dst.flat()) {
            return if self.host.transfer(s, d) { Ok(()) } else { Err(Why::Unmapped) };
        }
        let mut left = src.len().ok_or(Why::Bounds)?.min(dst.len().ok_or(Why::Bounds)?);
        let (mut sc, mut dc) = (Cursor::new(src), Cursor::new(dst));
        while left > 0 {
            if let Some((once, reps)) = dc.at_rep_start()
                && reps > 1
                && once > 0
                && once.checked_mul(reps).is_some_and(|all| all <= left)
            {
                let skip = once * (reps - 1);
                skip_bytes(&mut sc, skip)?;
                dc.skip_reps(reps - 1);
                left -= skip;
            }
            let (sa, sn) = sc.next(left).ok_or(Why::Bounds)?;
            let mut done = 0;
            while done < sn {
                let (da, dn) = dc.next(sn - done).ok_or(Why::Bounds)?;
                if !self.host.transfer(&[(sa + done, dn)], &[(da, dn)]) {
                    return Err(Why::Unmapped);
                }
                done += dn;
            }
            left -= sn;
        }
        Ok(())
    }

    /// Produce the next wire bytes of part `p` into `out`, `made` of them made already: a
    /// chunk of a plain part, or up to a chunk of whole blocks through a signature stage.
    /// How many it made.
    #[allow(clippy::too_many_arguments)]
    fn produce(
        &self,
        dev: usize,
        p: &Part,
        cur: &mut Cursor<'_>,
        made: u64,
        max: u64,
        out: &mut Vec<u8>,
        hit: &mut Option<SigHit>,
    ) -> Result<u64, Why> {
        if let Some(c) = &p.crypto {
            return self.produce_crypto(dev, p, c, cur, made, out, hit);
        }
        let limit = max.min(CHUNK as u64);
        let Some(st) = p.stage else {
            let mut n = 0;
            while n < limit {
                let Some((va, k)) = cur.next(limit - n) else { break };
                out.extend_from_slice(self.host.read(va, k as usize).ok_or(Why::Unmapped)?);
                n += k;
            }
            return Ok(n);
        };
        let crcs = self.devs.get(dev).ok_or(Why::Key)?.crcs;
        let bs = block_size(&st.cfg)?;
        let (in_stride, out_stride) = strides(&st.cfg, bs);
        let total = p.wire / out_stride;
        let mut block = vec![0u8; in_stride as usize];
        let before = out.len();
        let mut b = made / out_stride;
        while b < total && ((out.len() - before) as u64) < limit {
            fill(self.host, cur, &mut block)?;
            if let Some(e) = st.cfg.transform_block(&crcs, Direction::Tx, st.first + b, &block, out)
                && hit.is_none()
            {
                let err = TransferError { block: e, offset: b * in_stride };
                *hit = Some(SigHit { dev, index: st.index, err, domain: 1 });
            }
            b += 1;
        }
        Ok((out.len() - before) as u64)
    }

    /// A whole crypto part at once: read its memory bytes, then crypto and signature in the
    /// order its `enc_order` says, towards the wire.
    #[allow(clippy::too_many_arguments)]
    fn produce_crypto(
        &self,
        dev: usize,
        p: &Part,
        c: &CryptoStage,
        cur: &mut Cursor<'_>,
        made: u64,
        out: &mut Vec<u8>,
        hit: &mut Option<SigHit>,
    ) -> Result<u64, Why> {
        if made > 0 {
            return Ok(0);
        }
        let n = usize::try_from(p.mem.len().ok_or(Why::Bounds)?).map_err(|_| Why::Bounds)?;
        let mut buf = vec![0u8; n];
        fill(self.host, cur, &mut buf)?;
        let before = out.len();
        match &p.stage {
            None => {
                c.apply(true, &mut buf)?;
                out.extend_from_slice(&buf);
            }
            Some(st) => {
                let crcs = self.devs.get(dev).ok_or(Why::Key)?.crcs;
                if c.cfg.memory_side() {
                    c.apply(true, &mut buf)?;
                }
                sig_run(&crcs, dev, st, Direction::Tx, &buf, out, hit)?;
                if !c.cfg.memory_side() {
                    c.apply(true, out.get_mut(before..).ok_or(Why::Bounds)?)?;
                }
            }
        }
        Ok((out.len() - before) as u64)
    }

    /// A single flat crypto part on each side without signatures: copy once and run the
    /// ciphers in place. `None` when the two ranges share a host region.
    fn cipher_flat(&mut self, s: &Part, d: &Part) -> Option<Result<(), Failed>> {
        let (([sr], [dr]), true) = ((s.mem.flat()?, d.mem.flat()?), s.wire == d.wire) else { return None };
        let (sc, dc) = (s.crypto.as_ref(), d.crypto.as_ref());
        self.host.with_two(*sr, *dr, |from, to| {
            if from.len() != to.len() {
                return Err(Failed { why: Why::Bounds, at_dst: false });
            }
            to.copy_from_slice(from);
            if let Some(c) = sc {
                c.apply(true, to).map_err(|why| Failed { why, at_dst: false })?;
            }
            if let Some(c) = dc {
                c.apply(false, to).map_err(|why| Failed { why, at_dst: true })?;
            }
            Ok(())
        })
    }

    /// The general form of [`Engine::stream`]: the source's pipelines make the message's
    /// wire bytes a chunk at a time (a block through a signature stage), and the
    /// destination's place each chunk as it comes.
    fn stream_chunks(
        &mut self,
        src: &Endpoint,
        dst: &Endpoint,
        corrupt: Option<(u64, u8)>,
    ) -> Result<(Option<SigHit>, Option<SigHit>), Failed> {
        let (at_src, at_dst) = (|why| Failed { why, at_dst: false }, |why| Failed { why, at_dst: true });
        let mut sink = Sink::new(dst, self.devs.get(dst.dev).ok_or(at_dst(Why::Key))?.crcs);
        let mut wire = self.take_scratch(src.dev);
        let mut shit = None;
        let mut sent = 0u64;
        let r = 'run: {
            for p in &src.parts {
                let mut cur = Cursor::new(&p.mem);
                let mut made = 0;
                while made < p.wire {
                    wire.clear();
                    let n = match self.produce(src.dev, p, &mut cur, made, p.wire - made, &mut wire, &mut shit) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(w) => break 'run Err(at_src(w)),
                    };
                    if let Some((off, xor)) = corrupt
                        && let Some(b) =
                            off.checked_sub(sent).and_then(|o| usize::try_from(o).ok()).and_then(|o| wire.get_mut(o))
                    {
                        *b ^= xor;
                    }
                    if let Err(w) = sink.feed(self.host, &wire) {
                        break 'run Err(at_dst(w));
                    }
                    made += n;
                    sent += n;
                }
            }
            sink.finish().map_err(at_dst)
        };
        self.give_scratch(src.dev, wire);
        r.map(|dhit| (shit, dhit))
    }

    /// Move whole blocks between single translations through one mkey's stages, one block
    /// at a time, so the data is read once and written once.
    fn stream_blocks(
        &mut self,
        dev: usize,
        st: &Stage,
        dir: Direction,
        src: &[(u64, u64)],
        dst: &[(u64, u64)],
    ) -> Result<Option<TransferError>, Why> {
        let crcs = self.devs.get(dev).ok_or(Why::Key)?.crcs;
        let (cfg, first) = (&st.cfg, st.first);
        if let ([s], [d]) = (src, dst) {
            let done = self.host.with_two(*s, *d, |s, d| cfg.transform_slices(&crcs, dir, first, s, d));
            if let Some(r) = done {
                return r.ok_or(Why::Layout);
            }
        }
        let bs = block_size(cfg)? as usize;
        let in_stride = cfg.domains(dir).0.map_or(bs, |d| d.stride());
        let total = src.iter().try_fold(0u64, |a, r| a.checked_add(r.1)).ok_or(Why::Bounds)?;
        if !total.is_multiple_of(in_stride as u64) {
            return Err(Why::Layout);
        }
        let mut block = vec![0u8; in_stride];
        let mut out = Vec::with_capacity(in_stride + 8);
        let (mut sc, mut dc) = (RangeCursor::new(src), RangeCursor::new(dst));
        let mut err = None;
        for b in 0..total / in_stride as u64 {
            if !self.host.read_ranges(&mut sc, &mut block) {
                return Err(Why::Unmapped);
            }
            out.clear();
            if let Some(e) = cfg.transform_block(&crcs, dir, first + b, &block, &mut out)
                && err.is_none()
            {
                err = Some(TransferError { block: e, offset: b * in_stride as u64 });
            }
            if !self.host.write_ranges(&mut dc, &out) {
                return Err(Why::Unmapped);
            }
        }
        Ok(err)
    }
}

/// Run whole input blocks of `input` through a signature stage into `out`, noting the first
/// signature error (CQE domain: memory on TX, wire on RX).
fn sig_run(
    crcs: &crate::signature::Crcs,
    dev: usize,
    st: &Stage,
    dir: Direction,
    input: &[u8],
    out: &mut Vec<u8>,
    hit: &mut Option<SigHit>,
) -> Result<(), Why> {
    let bs = block_size(&st.cfg)?;
    let (ms, ws) = strides(&st.cfg, bs);
    let in_stride = usize::try_from(if dir == Direction::Tx { ms } else { ws }).map_err(|_| Why::Layout)?;
    if in_stride == 0 || !input.len().is_multiple_of(in_stride) {
        return Err(Why::Layout);
    }
    for (b, block) in input.chunks_exact(in_stride).enumerate() {
        let b = b as u64;
        if let Some(e) = st.cfg.transform_block(crcs, dir, st.first + b, block, out)
            && hit.is_none()
        {
            let err = TransferError { block: e, offset: b * in_stride as u64 };
            *hit = Some(SigHit { dev, index: st.index, err, domain: dir_domain(dir) });
        }
    }
    Ok(())
}

fn dir_domain(dir: Direction) -> u8 {
    match dir {
        Direction::Tx => 1,
        Direction::Rx => 0,
    }
}

/// Fill `block` from a cursor.
fn fill(host: &crate::host::Host, c: &mut Cursor<'_>, block: &mut [u8]) -> Result<(), Why> {
    let mut done = 0;
    while done < block.len() {
        let (va, n) = c.next((block.len() - done) as u64).ok_or(Why::Bounds)?;
        let b = host.read(va, n as usize).ok_or(Why::Unmapped)?;
        block[done..done + n as usize].copy_from_slice(b);
        done += n as usize;
    }
    Ok(())
}

/// The destination side of a streamed message: which part the next wire byte goes to, and a
/// signature stage's partial block.
struct Sink<'e> {
    ep: &'e Endpoint,
    crcs: crate::signature::Crcs,
    part: usize,
    /// Wire bytes the current part has taken.
    taken: u64,
    cur: Option<Cursor<'e>>,
    pending: Vec<u8>,
    out: Vec<u8>,
    hit: Option<SigHit>,
}

impl<'e> Sink<'e> {
    fn new(ep: &'e Endpoint, crcs: crate::signature::Crcs) -> Self {
        let cur = ep.parts.first().map(|p| Cursor::new(&p.mem));
        Sink { ep, crcs, part: 0, taken: 0, cur, pending: Vec::new(), out: Vec::new(), hit: None }
    }

    /// Place the next wire bytes.
    fn feed(&mut self, host: &mut crate::host::Host, mut bytes: &[u8]) -> Result<(), Why> {
        while !bytes.is_empty() {
            let Some(p) = self.ep.parts.get(self.part) else { return Ok(()) };
            if self.taken >= p.wire {
                self.part += 1;
                self.taken = 0;
                self.cur = self.ep.parts.get(self.part).map(|p| Cursor::new(&p.mem));
                continue;
            }
            let k = usize::try_from(p.wire - self.taken).map_or(bytes.len(), |w| w.min(bytes.len()));
            let (mine, rest) = bytes.split_at(k);
            bytes = rest;
            self.taken += k as u64;
            if let Some(c) = &p.crypto {
                // A crypto part is deciphered whole, once all its wire bytes are in.
                self.pending.extend_from_slice(mine);
                if self.taken == p.wire {
                    self.place_crypto(host, c, p.stage.as_ref())?;
                }
                continue;
            }
            let cur = self.cur.as_mut().ok_or(Why::Bounds)?;
            let Some(st) = p.stage else {
                write_at(host, cur, mine)?;
                continue;
            };
            let bs = block_size(&st.cfg)?;
            let (_, wire_stride) = strides(&st.cfg, bs);
            let in_stride = wire_stride as usize;
            let mut mine = mine;
            while !mine.is_empty() {
                let want = (in_stride - self.pending.len()).min(mine.len());
                self.pending.extend_from_slice(&mine[..want]);
                mine = &mine[want..];
                if self.pending.len() < in_stride {
                    break;
                }
                let b = (self.taken - mine.len() as u64) / wire_stride - 1;
                self.out.clear();
                if let Some(e) =
                    st.cfg.transform_block(&self.crcs, Direction::Rx, st.first + b, &self.pending, &mut self.out)
                    && self.hit.is_none()
                {
                    let err = TransferError { block: e, offset: b * wire_stride };
                    self.hit = Some(SigHit { dev: self.ep.dev, index: st.index, err, domain: 0 });
                }
                write_at(host, cur, &self.out)?;
                self.pending.clear();
            }
        }
        Ok(())
    }

    /// The wire bytes of a crypto part, all in `pending`: crypto and signature in the order
    /// its `enc_order` says, towards memory.
    fn place_crypto(&mut self, host: &mut crate::host::Host, c: &CryptoStage, st: Option<&Stage>) -> Result<(), Why> {
        let mut data = std::mem::take(&mut self.pending);
        let placed = match st {
            None => {
                c.apply(false, &mut data)?;
                &data
            }
            Some(st) => {
                if !c.cfg.memory_side() {
                    c.apply(false, &mut data)?;
                }
                self.out.clear();
                sig_run(&self.crcs, self.ep.dev, st, Direction::Rx, &data, &mut self.out, &mut self.hit)?;
                if c.cfg.memory_side() {
                    c.apply(false, &mut self.out)?;
                }
                &self.out
            }
        };
        write_at(host, self.cur.as_mut().ok_or(Why::Bounds)?, placed)?;
        data.clear();
        self.pending = data;
        Ok(())
    }

    /// The message ended: no partial block may be left; the first signature error.
    fn finish(self) -> Result<Option<SigHit>, Why> {
        if self.pending.is_empty() { Ok(self.hit) } else { Err(Why::Layout) }
    }
}

/// Write `data` at a cursor.
fn write_at(host: &mut crate::host::Host, c: &mut Cursor<'_>, data: &[u8]) -> Result<(), Why> {
    let mut done = 0;
    while done < data.len() {
        let (va, n) = c.next((data.len() - done) as u64).ok_or(Why::Bounds)?;
        if !host.write(va, &data[done..done + n as usize]) {
            return Err(Why::Unmapped);
        }
        done += n as usize;
    }
    Ok(())
}
