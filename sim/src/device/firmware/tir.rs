//! TIRs made through DEVX: CREATE_TIR and DESTROY_TIR.
//!
//! A direct TIR (`disp_type` 0) names one RQ by `inline_rqn`: here a receive-only raw packet
//! queue, which is what a receive WQ is in this firmware; software steering's TIR destination
//! delivers to that RQ. An indirect TIR names an RQ table, which this firmware does not make through
//! DEVX: BAD_PARAM. The firmware's choices (not public): numbers count from 1, an RQ that does
//! not exist or is not an RQ is BAD_PARAM with the no-such-object syndrome.

use std::collections::BTreeMap;

use mlx5_dv::prm::{queues::st, status, tir};

use super::{Firmware, Reject, syndrome};

/// The lowest TIR number handed out.
const FIRST_TIRN: u32 = 1;
/// TIR numbers are 24 bits.
const TIRN_LIMIT: u32 = 1 << 24;

/// The TIRs of a device: number → the RQ it delivers to.
#[derive(Debug, Clone, Default)]
pub(super) struct Tirs {
    live: BTreeMap<u32, u32>,
}

impl Tirs {
    /// The lowest number no TIR holds.
    fn free_number(&self) -> Option<u32> {
        let mut n = FIRST_TIRN;
        for &k in self.live.keys() {
            if k != n {
                break;
            }
            n += 1;
        }
        (n < TIRN_LIMIT).then_some(n)
    }
}

fn no_such_object() -> Reject {
    Reject(status::BAD_PARAM_ERR, syndrome::NO_SUCH_OBJECT)
}

impl Firmware {
    /// CREATE_TIR.
    pub(super) fn create_tir(&mut self, input: &[u8], out: &mut [u8]) -> Result<(), Reject> {
        if input.len() < tir::CREATE_IN_SIZE {
            return Err(Reject(status::BAD_INP_LEN_ERR, syndrome::INPUT_TOO_SHORT));
        }
        if out.len() < tir::CREATE_OUT_SIZE {
            return Err(Reject(status::BAD_OUTP_LEN_ERR, syndrome::OUTPUT_TOO_SHORT));
        }
        if tir::DISP_TYPE.get(input)? != tir::disp::DIRECT {
            return Err(Reject(status::BAD_PARAM_ERR, syndrome::BAD_FIELD));
        }
        let rqn = tir::INLINE_RQN.get(input)? as u32;
        let is_rq = self.qp(rqn).is_some_and(|q| q.st == st::RAW && q.sq.is_empty() && !q.rq.is_empty());
        if !is_rq {
            return Err(no_such_object());
        }
        let tirn = self.tirs.free_number().ok_or(Reject(status::LIM_ERR, syndrome::OUT_OF_OBJECTS))?;
        self.tirs.live.insert(tirn, rqn);
        tir::TIRN.set(out, u64::from(tirn))?;
        Ok(())
    }

    /// The RQ TIR `tirn` delivers to.
    pub(crate) fn tir_rq(&self, tirn: u32) -> Option<u32> {
        self.tirs.live.get(&tirn).copied()
    }

    /// DESTROY_TIR.
    pub(super) fn destroy_tir(&mut self, input: &[u8]) -> Result<(), Reject> {
        let tirn = tir::TIRN.get(input)? as u32;
        self.tirs.live.remove(&tirn).map(|_| ()).ok_or_else(no_such_object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_the_lowest_free() {
        let mut t = Tirs::default();
        assert_eq!(t.free_number(), Some(1));
        t.live.extend([(1, 10), (2, 11), (4, 12)]);
        assert_eq!(t.free_number(), Some(3));
    }
}
