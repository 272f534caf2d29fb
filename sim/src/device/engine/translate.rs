//! Translation: an (mkey, address, length) to host address ranges through MTTs, KLM lists and
//! repeat blocks, checking the key's state, tag, PD and access rights on the way.

use mlx5_dv::prm::{Field, mkc};

use super::Engine;
use crate::device::firmware::{FwMkey, Translation};

/// How deep indirect mkeys may point through each other.
const MAX_INDIRECTION: u32 = 4;

/// What an access needs from the key it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Need {
    LocalRead,
    LocalWrite,
    RemoteRead,
    RemoteWrite,
    /// An entry of an indirect mkey: the indirect mkey's own rights already decided.
    Nested,
}

/// Where a key is looked up: a device and the protection domain of the QP using it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct At {
    pub(super) dev: usize,
    pub(super) pdn: u32,
}

/// Why a translation or a transfer failed; the caller knows which syndrome that is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fault;

pub(super) fn field(m: &FwMkey, f: Field) -> u64 {
    f.get(&m.mkc).unwrap_or(0)
}

impl Engine<'_> {
    /// Translate `[addr, addr + len)` of `key` into host address ranges.
    pub(super) fn resolve(
        &self,
        at: At,
        key: u32,
        addr: u64,
        len: u64,
        need: Need,
        depth: u32,
    ) -> Result<Vec<(u64, u64)>, Fault> {
        if depth > MAX_INDIRECTION {
            return Err(Fault);
        }
        let m = self.devs.get(at.dev).ok_or(Fault)?.fw.mkey(key >> 8).ok_or(Fault)?;
        if field(m, mkc::FREE) != 0
            || field(m, mkc::MKEY_7_0) != u64::from(key & 0xff)
            || field(m, mkc::PD) != u64::from(at.pdn)
        {
            return Err(Fault);
        }
        // crypto_en with no crypto BSF ever written: the device fails the access. (Crypto
        // attributes cannot be set yet, so every crypto mkey is in that state.)
        if field(m, mkc::CRYPTO_EN) != 0 {
            return Err(Fault);
        }
        let allowed = match need {
            Need::LocalRead | Need::Nested => true,
            Need::LocalWrite => field(m, mkc::LW) != 0,
            Need::RemoteRead => field(m, mkc::RR) != 0,
            Need::RemoteWrite => field(m, mkc::RW) != 0,
        };
        if !allowed {
            return Err(Fault);
        }
        let start = field(m, mkc::START_ADDR);
        let mlen = field(m, mkc::LEN);
        let off = addr.checked_sub(start).ok_or(Fault)?;
        if off.checked_add(len).is_none_or(|end| end > mlen) {
            return Err(Fault);
        }
        match &m.xlat {
            Translation::None => Err(Fault),
            Translation::Mtt => Ok(if len == 0 { vec![] } else { vec![(addr, len)] }),
            Translation::Klm(entries) => {
                let mut out = Vec::new();
                let (mut pos, mut want, mut base) = (off, len, 0u64);
                for e in entries {
                    let bc = u64::from(e.byte_count);
                    if want > 0 && pos < base + bc {
                        let inner = pos - base;
                        let n = want.min(bc - inner);
                        let a = e.addr.checked_add(inner).ok_or(Fault)?;
                        out.extend(self.resolve(at, e.key, a, n, Need::Nested, depth + 1)?);
                        pos += n;
                        want -= n;
                    }
                    base += bc;
                }
                if want > 0 { Err(Fault) } else { Ok(out) }
            }
            Translation::Repeat { repeat_count, entries } => {
                let per: u64 = entries.iter().map(|e| u64::from(e.byte_count)).sum();
                let mut out = Vec::new();
                let (mut pos, mut want) = (off, len);
                while want > 0 {
                    if per == 0 {
                        return Err(Fault);
                    }
                    let rep = pos / per;
                    if rep >= u64::from(*repeat_count) {
                        return Err(Fault);
                    }
                    let mut within = pos % per;
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
                            .ok_or(Fault)?;
                        out.extend(self.resolve(at, e.key, a, n, Need::Nested, depth + 1)?);
                        pos += n;
                        want -= n;
                        break;
                    }
                }
                Ok(out)
            }
        }
    }

    /// Translate a gather or scatter list, in order.
    pub(super) fn resolve_sges(&self, at: At, sge: &[mlx5_dv::Sge], need: Need) -> Result<Vec<(u64, u64)>, Fault> {
        let mut out = Vec::new();
        for s in sge {
            out.extend(self.resolve(at, s.lkey, s.addr, u64::from(s.length), need, 0)?);
        }
        Ok(out)
    }
}
