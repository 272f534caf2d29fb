//! The per-mkey data pipeline: memory signature → (crypto, not yet) → wire signature, run
//! block by block as bytes cross the mkey. A plain mkey is a pipeline with no stages.

use mlx5_dv::Sge;

use super::Engine;
use super::translate::{At, Fault, Need};
use crate::host::{Dma, RangeCursor};
use crate::signature::{Direction, SigConfig, TransferError};

/// A signature error met in a transfer, not yet reported.
#[derive(Debug, Clone, Copy)]
pub(super) struct SigHit {
    pub(super) dev: usize,
    pub(super) index: u32,
    pub(super) err: TransferError,
    /// CQE domain: 0 wire, 1 memory.
    pub(super) domain: u8,
}

/// The stages of an mkey's pipeline: its signature BSF, when it has one.
pub(super) type Stages = Option<SigConfig>;

/// The block size of a configuration, if both domains agree on it (mixed block sizes are
/// not simulated).
pub(super) fn block_size(cfg: &SigConfig) -> Result<u64, Fault> {
    let bs = cfg.bs().ok_or(Fault)?;
    if [cfg.mem, cfg.wire].iter().flatten().any(|d| d.bs != bs) {
        return Err(Fault);
    }
    Ok(bs as u64)
}

/// Bytes per block in memory and on the wire.
pub(super) fn strides(cfg: &SigConfig, bs: u64) -> (u64, u64) {
    (cfg.mem.map_or(bs, |d| d.stride() as u64), cfg.wire.map_or(bs, |d| d.stride() as u64))
}

impl Engine<'_> {
    /// The stages of the mkey `key` names on device `dev`.
    pub(super) fn stages(&self, dev: usize, key: u32) -> Stages {
        self.devs.get(dev)?.fw.mkey(key >> 8)?.sig.map(|(c, _)| c)
    }

    /// True if any key of the SGEs names an mkey with stages.
    pub(super) fn any_stages(&self, dev: usize, sge: &[Sge]) -> bool {
        sge.iter().any(|s| self.stages(dev, s.lkey).is_some())
    }

    /// The wire bytes an SGE list stands for (a wire signature adds its PI per block).
    pub(super) fn wire_len(&self, dev: usize, sge: &[Sge]) -> u64 {
        sge.iter()
            .map(|s| match self.stages(dev, s.lkey) {
                Some(cfg) => match (cfg.bs(), cfg.wire) {
                    (Some(bs), Some(w)) => u64::from(s.length) / bs as u64 * w.stride() as u64,
                    _ => u64::from(s.length),
                },
                None => u64::from(s.length),
            })
            .sum()
    }

    /// Append the bytes of `ranges` to `out`.
    fn gather_into(&self, ranges: &[(u64, u64)], out: &mut Vec<u8>) -> Option<()> {
        for &(va, n) in ranges {
            out.extend_from_slice(self.host.read(va, n as usize)?);
        }
        Some(())
    }

    /// Write `data` across `ranges` in order; the ranges must hold at least `data.len()`.
    fn scatter(&mut self, ranges: &[(u64, u64)], data: &[u8]) {
        let mut rest = data;
        for &(va, n) in ranges {
            if rest.is_empty() {
                break;
            }
            let k = rest.len().min(n as usize);
            let _ = self.host.write(va, &rest[..k]);
            rest = &rest[k..];
        }
    }

    /// Read through `key` towards the wire (memory is the input), appending wire bytes to
    /// `out`. With stages, a local SGE counts data bytes and a remote address wire bytes,
    /// whole blocks only, numbered from mkey offset 0.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn read_view(
        &mut self,
        at: At,
        key: u32,
        addr: u64,
        len: u64,
        need: Need,
        local: bool,
        out: &mut Vec<u8>,
    ) -> Result<Option<SigHit>, Fault> {
        let Some(cfg) = self.stages(at.dev, key) else {
            let r = self.resolve(at, key, addr, len, need, 0)?;
            return self.gather_into(&r, out).map(|_| None).ok_or(Fault);
        };
        let bs = block_size(&cfg)?;
        let (mem_stride, wire_stride) = strides(&cfg, bs);
        let stride = if local { bs } else { wire_stride };
        if !addr.is_multiple_of(stride) || !len.is_multiple_of(stride) {
            return Err(Fault);
        }
        let (first, n) = (addr / stride, len / stride);
        let r = self.resolve(at, key, first * mem_stride, n * mem_stride, need, 0)?;
        let mut input = self.take_scratch(at.dev);
        let result = self.gather_into(&r, &mut input).and_then(|()| {
            let crcs = &self.devs.get(at.dev)?.crcs;
            cfg.transform(crcs, Direction::Tx, first, &input, out)
        });
        self.give_scratch(at.dev, input);
        Ok(result.ok_or(Fault)?.map(|err| SigHit { dev: at.dev, index: key >> 8, err, domain: 1 }))
    }

    /// Write wire-format `bytes` through `key` (the wire is the input).
    pub(super) fn write_view(
        &mut self,
        at: At,
        key: u32,
        addr: u64,
        bytes: &[u8],
        need: Need,
        local: bool,
    ) -> Result<Option<SigHit>, Fault> {
        let Some(cfg) = self.stages(at.dev, key) else {
            let r = self.resolve(at, key, addr, bytes.len() as u64, need, 0)?;
            self.scatter(&r, bytes);
            return Ok(None);
        };
        let bs = block_size(&cfg)?;
        let (mem_stride, wire_stride) = strides(&cfg, bs);
        let stride = if local { bs } else { wire_stride };
        if !addr.is_multiple_of(stride) || !(bytes.len() as u64).is_multiple_of(wire_stride) {
            return Err(Fault);
        }
        let first = addr / stride;
        let mut out = self.take_scratch(at.dev);
        let err = self.devs.get(at.dev).and_then(|d| cfg.transform(&d.crcs, Direction::Rx, first, bytes, &mut out));
        let placed = err.ok_or(Fault).and_then(|e| {
            let r = self.resolve(at, key, first * mem_stride, out.len() as u64, need, 0)?;
            self.scatter(&r, &out);
            Ok(e)
        });
        self.give_scratch(at.dev, out);
        Ok(placed?.map(|err| SigHit { dev: at.dev, index: key >> 8, err, domain: 0 }))
    }

    /// Gather local SGEs in wire format into a pooled buffer (give it back when done).
    pub(super) fn gather_view(&mut self, at: At, sge: &[Sge]) -> Result<(Vec<u8>, Option<SigHit>), Fault> {
        let (mut data, mut hit) = (self.take_scratch(at.dev), None);
        for s in sge {
            match self.read_view(at, s.lkey, s.addr, u64::from(s.length), Need::LocalRead, true, &mut data) {
                Ok(h) => hit = hit.or(h),
                Err(f) => {
                    self.give_scratch(at.dev, data);
                    return Err(f);
                }
            }
        }
        Ok((data, hit))
    }

    /// Scatter wire-format bytes over local SGEs; an mkey with stages must be the only SGE.
    pub(super) fn scatter_view(&mut self, at: At, sge: &[Sge], bytes: &[u8]) -> Result<Option<SigHit>, Fault> {
        if self.any_stages(at.dev, sge) {
            let [s] = sge else { return Err(Fault) };
            return self.write_view(at, s.lkey, s.addr, bytes, Need::LocalWrite, true);
        }
        let r = self.resolve_sges(at, sge, Need::LocalWrite)?;
        self.scatter(&r, bytes);
        Ok(None)
    }

    /// Move whole blocks from `src` to `dst` through one mkey's stages, one block at a time
    /// through a small buffer, so the data is read once and written once.
    pub(super) fn stream_blocks(
        &mut self,
        dev: usize,
        cfg: &SigConfig,
        dir: Direction,
        first: u64,
        src: &[(u64, u64)],
        dst: &[(u64, u64)],
    ) -> Result<Option<TransferError>, Fault> {
        let crcs = self.devs.get(dev).ok_or(Fault)?.crcs;
        if let ([s], [d]) = (src, dst) {
            let done = self.host.with_two(*s, *d, |s, d| cfg.transform_slices(&crcs, dir, first, s, d));
            if let Some(r) = done {
                return r.ok_or(Fault);
            }
        }
        let bs = block_size(cfg)? as usize;
        let in_stride = cfg.domains(dir).0.map_or(bs, |d| d.stride());
        let total: u64 = src.iter().map(|r| r.1).sum();
        if !total.is_multiple_of(in_stride as u64) {
            return Err(Fault);
        }
        let mut block = vec![0u8; in_stride];
        let mut out = Vec::with_capacity(in_stride + 8);
        let (mut sc, mut dc) = (RangeCursor::new(src), RangeCursor::new(dst));
        let mut err = None;
        for b in 0..total / in_stride as u64 {
            if !self.host.read_ranges(&mut sc, &mut block) {
                return Err(Fault);
            }
            out.clear();
            if let Some(e) = cfg.transform_block(&crcs, dir, first + b, &block, &mut out)
                && err.is_none()
            {
                err = Some(TransferError { block: e, offset: b * in_stride as u64 });
            }
            if !self.host.write_ranges(&mut dc, &out) {
                return Err(Fault);
            }
        }
        Ok(err)
    }
}
