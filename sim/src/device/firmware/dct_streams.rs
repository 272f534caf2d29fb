//! A DCT's responder state per DCI, across the network. An RC responder keeps one expected
//! PSN; a DCT serves many DCIs, each with its own PSNs, so it keeps one per DCI it serves (by
//! the same key as its atomic replay caches, [`super::DcReplay`]): the expected PSN of that
//! DCI's current connection, and the PSN it last sent a sequence error NAK for. A request
//! names its connection in its DCETH ([`crate::packet::Dceth`]): a number the DCI's device
//! gives each run of a DCI's requests to one DCT, and a flag on the run's first request.
//! How hardware keeps DC responder contexts, and how many, is not public; this table, its
//! size and its eviction are the simulator's own (unverified).

use std::collections::VecDeque;

use super::DciId;

/// The DCIs a DCT keeps a stream for; the one served longest ago is forgotten first. A
/// forgotten DCI's connection takes no more requests but its first: its DCI's retries run out.
pub const DCT_STREAMS: usize = 64;

/// One DCI's stream at a DCT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stream {
    conn: u32,
    expected: u32,
    nak_psn: Option<u32>,
}

/// Where a DC request stands with its DCI's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Checked as an RC responder checks a request: against this expected PSN, and the PSN
    /// a sequence error NAK was last sent for.
    Expect {
        /// The PSN the DCI's stream expects.
        expected: u32,
        /// The expected PSN the last sequence error NAK named.
        nak_psn: Option<u32>,
    },
    /// Dropped without an answer: a later request of a connection whose first has not come
    /// (or was forgotten).
    Drop,
}

/// A DCT's streams, by DCI.
#[derive(Debug, Clone, Default)]
pub struct DctStreams {
    dcis: VecDeque<(DciId, Stream)>,
}

impl DctStreams {
    /// How request `psn` of connection `conn` (`first`: the connection's first request) from
    /// DCI `from` is checked. The first request of another connection than the one kept (or
    /// of a DCI not kept) starts the stream again at its PSN: a DCI answered all of a
    /// connection's requests before it starts the next, so only the network could bring an
    /// older connection's first request after that (taken as new then).
    pub fn admit(&mut self, from: DciId, conn: u32, first: bool, psn: u32) -> Admit {
        let kept = self.dcis.iter().position(|(id, _)| *id == from);
        if let Some((_, s)) = kept.and_then(|i| self.dcis.get(i))
            && s.conn == conn
        {
            return Admit::Expect { expected: s.expected, nak_psn: s.nak_psn };
        }
        if !first {
            return Admit::Drop;
        }
        if let Some(i) = kept {
            self.dcis.remove(i);
        }
        self.dcis.push_back((from, Stream { conn, expected: psn, nak_psn: None }));
        while self.dcis.len() > DCT_STREAMS {
            self.dcis.pop_front();
        }
        Admit::Expect { expected: psn, nak_psn: None }
    }

    /// The expected PSN of DCI `from`'s connection `conn`, if it is the one kept.
    pub fn expected(&self, from: DciId, conn: u32) -> Option<u32> {
        self.dcis.iter().find(|(id, s)| *id == from && s.conn == conn).map(|(_, s)| s.expected)
    }

    /// Keep what checking a request of DCI `from`'s connection `conn` left: the PSN expected
    /// next and the last sequence error NAK's. The DCI becomes the one served last.
    pub fn store(&mut self, from: DciId, conn: u32, expected: u32, nak_psn: Option<u32>) {
        let Some(i) = self.dcis.iter().position(|(id, s)| *id == from && s.conn == conn) else { return };
        if let Some(mut e) = self.dcis.remove(i) {
            (e.1.expected, e.1.nak_psn) = (expected, nak_psn);
            self.dcis.push_back(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dcis_stream_starts_at_its_connections_first_request() {
        let a = DciId::Here { dev: 0, qpn: 0x100 };
        let mut t = DctStreams::default();
        assert_eq!(t.admit(a, 5, false, 10), Admit::Drop, "a connection's later request before its first");
        assert_eq!(t.admit(a, 5, true, 9), Admit::Expect { expected: 9, nak_psn: None });
        t.store(a, 5, 10, None);
        assert_eq!(t.admit(a, 5, true, 9), Admit::Expect { expected: 10, nak_psn: None }, "the first again");
        assert_eq!(t.expected(a, 5), Some(10));
        assert_eq!(t.admit(a, 6, false, 11), Admit::Drop, "another connection's later request");
        assert_eq!(t.admit(a, 6, true, 0), Admit::Expect { expected: 0, nak_psn: None }, "another connection");
        assert_eq!(t.expected(a, 5), None, "the DCI's older connection");
        for qpn in 0..DCT_STREAMS as u32 {
            t.admit(DciId::Here { dev: 1, qpn }, 1, true, 0);
        }
        assert_eq!(t.expected(a, 6), None, "the DCI served longest ago");
    }
}
