//! Fault rules for the simulated network: what a simulated port does to the RoCE v2 packets
//! it sends, to see the reliable transport recover from loss, duplication, reordering, delay
//! and corruption, or end in the completion status the IBTA gives when it cannot.
//!
//! A rule matches a packet by its BTH (destination QP, opcode, PSN; a filter left `None`
//! matches any), lets `skip` matching packets through, then acts on the next `times` ones:
//! always, or each with a probability drawn from a seeded generator, so that a run is the
//! same every time.

use serde::{Deserialize, Serialize};

/// What a rule does to a packet it acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum NetAction {
    /// Not sent.
    Drop,
    /// Sent twice.
    Duplicate,
    /// Held back and sent right after the port's next packet.
    Reorder,
    /// Held back for this many nanoseconds of the transport's clock.
    Delay {
        /// The delay.
        ns: u64,
    },
    /// Sent with byte `offset` of the UDP payload (the BTH starts at 0) XORed with `xor`:
    /// the receiver's ICRC check drops it and counts it. An offset past the end flips the
    /// last byte (the ICRC's). Byte 4 (FECN, BECN and reserved bits) is outside the ICRC.
    Corrupt {
        /// The byte's offset in the UDP payload.
        offset: usize,
        /// The bits to flip (non-zero).
        xor: u8,
    },
}

/// BTH opcodes of the RC transport (IBTA table 38; the top three bits, 000, are RC).
pub mod opcode {
    /// SEND First.
    pub const SEND_FIRST: u8 = 0x00;
    /// SEND Middle.
    pub const SEND_MIDDLE: u8 = 0x01;
    /// SEND Last.
    pub const SEND_LAST: u8 = 0x02;
    /// SEND Last with Immediate.
    pub const SEND_LAST_IMM: u8 = 0x03;
    /// SEND Only.
    pub const SEND_ONLY: u8 = 0x04;
    /// SEND Only with Immediate.
    pub const SEND_ONLY_IMM: u8 = 0x05;
    /// RDMA WRITE First.
    pub const WRITE_FIRST: u8 = 0x06;
    /// RDMA WRITE Middle.
    pub const WRITE_MIDDLE: u8 = 0x07;
    /// RDMA WRITE Last.
    pub const WRITE_LAST: u8 = 0x08;
    /// RDMA WRITE Last with Immediate.
    pub const WRITE_LAST_IMM: u8 = 0x09;
    /// RDMA WRITE Only.
    pub const WRITE_ONLY: u8 = 0x0a;
    /// RDMA WRITE Only with Immediate.
    pub const WRITE_ONLY_IMM: u8 = 0x0b;
    /// RDMA READ Request.
    pub const READ_REQUEST: u8 = 0x0c;
    /// RDMA READ Response First.
    pub const READ_RESPONSE_FIRST: u8 = 0x0d;
    /// RDMA READ Response Middle.
    pub const READ_RESPONSE_MIDDLE: u8 = 0x0e;
    /// RDMA READ Response Last.
    pub const READ_RESPONSE_LAST: u8 = 0x0f;
    /// RDMA READ Response Only.
    pub const READ_RESPONSE_ONLY: u8 = 0x10;
    /// Acknowledge (ACK or NAK, as its AETH says).
    pub const ACKNOWLEDGE: u8 = 0x11;
    /// ATOMIC Acknowledge (an AETH and the AtomicAckETH's original value).
    pub const ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    /// CmpSwap (AtomicETH).
    pub const COMPARE_SWAP: u8 = 0x13;
    /// FetchAdd (AtomicETH).
    pub const FETCH_ADD: u8 = 0x14;
    /// SEND Last with Invalidate.
    pub const SEND_LAST_INV: u8 = 0x16;
    /// SEND Only with Invalidate.
    pub const SEND_ONLY_INV: u8 = 0x17;
    /// The UC transport's opcodes are the RC ones (SEND and RDMA WRITE) with this added: the
    /// top three bits 001 (IBTA table 38; 0x20–0x2b).
    pub const UC: u8 = 0x20;
    /// The XRC opcodes: the RC ones (0x00–0x17) plus this; the requests carry an XRCETH.
    pub const XRC: u8 = 0xa0;
    /// UD SEND Only: BTH and DETH (IBTA table 38).
    pub const UD_SEND_ONLY: u8 = 0x64;
    /// UD SEND Only with Immediate: BTH, DETH and ImmDt.
    pub const UD_SEND_ONLY_IMM: u8 = 0x65;
}

/// One in a million: the unit of [`NetFault::random`]'s probability.
pub const PPM: u32 = 1_000_000;

/// A fault rule for the packets a simulated port sends (see the module's comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetFault {
    /// The BTH's destination QP to match (a request's responder, an answer's requester).
    pub dest_qp: Option<u32>,
    /// The BTH opcode to match.
    pub opcode: Option<u8>,
    /// The PSN to match.
    pub psn: Option<u32>,
    /// Matching packets let through first.
    pub skip: u32,
    /// How many times the rule acts; `u32::MAX`: without end.
    pub times: u32,
    /// What it does.
    pub action: NetAction,
    /// `Some((ppm, seed))`: each matching packet past `skip` is acted on with probability
    /// `ppm` / [`PPM`], drawn from a SplitMix64 generator seeded with `seed`.
    pub random: Option<(u32, u64)>,
}

impl NetFault {
    /// A rule acting once on the first packet the port sends, of any QP, opcode or PSN.
    pub fn new(action: NetAction) -> Self {
        NetFault { dest_qp: None, opcode: None, psn: None, skip: 0, times: 1, action, random: None }
    }

    /// Only packets to QP `qpn`.
    pub fn qp(self, qpn: u32) -> Self {
        NetFault { dest_qp: Some(qpn), ..self }
    }

    /// Only packets with BTH opcode `op`.
    pub fn opcode(self, op: u8) -> Self {
        NetFault { opcode: Some(op), ..self }
    }

    /// Only packets with PSN `psn`.
    pub fn psn(self, psn: u32) -> Self {
        NetFault { psn: Some(psn), ..self }
    }

    /// Let `n` matching packets through first.
    pub fn skip(self, n: u32) -> Self {
        NetFault { skip: n, ..self }
    }

    /// Act `n` times (`u32::MAX`: without end).
    pub fn times(self, n: u32) -> Self {
        NetFault { times: n, ..self }
    }

    /// Act on every matching packet, without end.
    pub fn always(self) -> Self {
        self.times(u32::MAX)
    }

    /// Act on each matching packet with `probability` (0 to 1, kept to a millionth), drawn
    /// from a generator seeded with `seed`, without end. A probability outside 0 to 1 (or
    /// NaN) makes a rule that [`NetFault::check`] refuses.
    pub fn random(self, probability: f64, seed: u64) -> Self {
        let ppm = if (0.0..=1.0).contains(&probability) {
            // In range: the product is within 0..=PPM.
            (probability * f64::from(PPM)).round() as u32
        } else {
            u32::MAX
        };
        NetFault { random: Some((ppm, seed)), ..self.always() }
    }

    /// Why the rule can never act or is malformed, if it is.
    pub fn check(&self) -> Result<(), String> {
        if let NetAction::Corrupt { xor: 0, .. } = self.action {
            return Err("a corruption that flips no bit (xor 0)".into());
        }
        if self.times == 0 {
            return Err("a rule that acts 0 times".into());
        }
        if let Some((ppm, _)) = self.random
            && ppm > PPM
        {
            return Err("a probability not between 0 and 1".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_are_kept_to_a_millionth_and_checked() {
        let f = NetFault::new(NetAction::Drop).random(0.05, 7);
        assert_eq!((f.random, f.times), (Some((50_000, 7)), u32::MAX));
        assert!(f.check().is_ok());
        assert!(NetFault::new(NetAction::Drop).random(1.5, 0).check().is_err());
        assert!(NetFault::new(NetAction::Drop).random(f64::NAN, 0).check().is_err());
        assert!(NetFault::new(NetAction::Corrupt { offset: 0, xor: 0 }).check().is_err());
        assert!(NetFault::new(NetAction::Drop).times(0).check().is_err());
    }
}
