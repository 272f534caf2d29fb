//! A DCT's atomic replay caches. An RC responder knows a duplicate by its PSN, behind the one
//! it expects; a DCT serves many DCIs, each with its own PSNs, and takes each request's PSN
//! as the one it expects (a connection per message). So it keeps the latest atomics of each
//! DCI it served: a request that comes again from the same DCI with the same PSN and the same
//! AtomicETH (its answer was lost and the DCI sent it again, go-back-N) is answered with the
//! kept original value and not executed again. How hardware keeps DC responder resources is
//! not public; this is the simulator's own (unverified).

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use crate::packet::AtomicEth;

/// The atomics kept per DCI: as many as an RC responder keeps (`AtomicReplay`).
const PER_DCI: usize = 16;
/// The DCIs a DCT keeps atomics for; the one served longest ago is forgotten first.
const DCIS: usize = 64;

/// The DCI a DC request came from: its QP number, and where it lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DciId {
    /// A DCI of a device of this process (by the device's index).
    Here {
        /// The device's index.
        dev: usize,
        /// The DCI's QP number.
        qpn: u32,
    },
    /// A DCI behind the port at this address (the DCETH names its QP number).
    Peer {
        /// The requesting port's address.
        addr: Ipv4Addr,
        /// The DCI's QP number.
        qpn: u32,
    },
}

/// One atomic a DCT executed: the request that asked for it and the original value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Kept {
    psn: u32,
    compare_swap: bool,
    eth: AtomicEth,
    original: u64,
}

/// The latest atomics of one DCI, oldest overwritten first.
#[derive(Debug, Clone, Default)]
struct PerDci {
    entries: [Option<Kept>; PER_DCI],
    next: usize,
}

/// A DCT's atomic replay caches, by DCI.
#[derive(Debug, Clone, Default)]
pub struct DcReplay {
    dcis: VecDeque<(DciId, PerDci)>,
}

impl DcReplay {
    /// The original value of an atomic this DCI already had executed with this PSN and these
    /// operands, if it is still kept.
    pub fn recall(&self, from: DciId, psn: u32, compare_swap: bool, eth: &AtomicEth) -> Option<u64> {
        let (_, d) = self.dcis.iter().find(|(id, _)| *id == from)?;
        let same = |k: &&Kept| k.psn == psn && k.compare_swap == compare_swap && k.eth == *eth;
        d.entries.iter().flatten().find(same).map(|k| k.original)
    }

    /// Keep the original value an atomic of DCI `from` returned.
    pub fn remember(&mut self, from: DciId, psn: u32, compare_swap: bool, eth: AtomicEth, original: u64) {
        let mut d = match self.dcis.iter().position(|(id, _)| *id == from) {
            Some(i) => self.dcis.remove(i).map(|(_, d)| d).unwrap_or_default(),
            None => PerDci::default(),
        };
        let i = d.next % PER_DCI;
        if let Some(e) = d.entries.get_mut(i) {
            *e = Some(Kept { psn, compare_swap, eth, original });
        }
        d.next = (i + 1) % PER_DCI;
        self.dcis.push_back((from, d));
        while self.dcis.len() > DCIS {
            self.dcis.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dcis_atomic_is_recalled_by_psn_and_operands_for_that_dci_only() {
        let (a, b) = (DciId::Here { dev: 0, qpn: 0x100 }, DciId::Peer { addr: Ipv4Addr::LOCALHOST, qpn: 0x100 });
        let eth = AtomicEth { va: 0x1000, rkey: 7, swap_add: 1, compare: 0 };
        let mut r = DcReplay::default();
        r.remember(a, 5, false, eth, 42);
        assert_eq!(r.recall(a, 5, false, &eth), Some(42));
        assert_eq!(r.recall(b, 5, false, &eth), None, "another DCI with the same PSN");
        assert_eq!(r.recall(a, 5, true, &eth), None, "another operation");
        assert_eq!(r.recall(a, 5, false, &AtomicEth { swap_add: 2, ..eth }), None, "other operands");
        for psn in 6..6 + PER_DCI as u32 {
            r.remember(a, psn, false, eth, 0);
        }
        assert_eq!(r.recall(a, 5, false, &eth), None, "older than the 16 kept");
        for qpn in 0..DCIS as u32 {
            r.remember(DciId::Here { dev: 1, qpn }, 0, false, eth, 0);
        }
        assert_eq!(r.recall(a, 6 + PER_DCI as u32 - 1, false, &eth), None, "a DCI served longest ago");
    }
}
