//! The firmware's objects: number allocators, mkeys with their translations, PSVs, and the
//! QPs and CQs the engine runs.

use std::collections::VecDeque;

use mlx5_dv::prm;
use mlx5_dv::{AccessFlags, QpState};

use crate::device::WqeFault;
use crate::device::contract::{CryptoBsfConfig, QueueBuf, SigBsf};
use crate::device::translation::Translation;

/// Hands out 24-bit object numbers, lowest-recently-freed first, never two alike at once.
#[derive(Debug, Clone)]
pub(super) struct Numbers {
    next: u32,
    limit: u32,
    free: Vec<u32>,
    /// A number never handed out.
    reserved: Option<u32>,
}

impl Numbers {
    pub(super) fn new(first: u32, limit: u32) -> Self {
        Numbers { next: first, limit, free: Vec::new(), reserved: None }
    }

    /// Numbers from `first` below `limit`, but never `reserved`.
    pub(super) fn without(first: u32, limit: u32, reserved: u32) -> Self {
        Numbers { reserved: Some(reserved), ..Numbers::new(first, limit) }
    }

    pub(super) fn take(&mut self) -> Option<u32> {
        if let Some(n) = self.free.pop() {
            return Some(n);
        }
        if Some(self.next) == self.reserved {
            self.next += 1;
        }
        if self.next >= self.limit {
            return None;
        }
        self.next += 1;
        Some(self.next - 1)
    }

    pub(super) fn give_back(&mut self, n: u32) {
        self.free.push(n);
    }
}

/// Objects keyed by the numbers a [`Numbers`] hands out, in a vector indexed by number: those
/// numbers are dense (freed ones come back first), so a lookup is an index rather than a tree
/// walk, and nothing is allocated per object once the vector has grown. Iteration runs in
/// number order, as a `BTreeMap`'s does.
#[derive(Debug, Clone)]
pub(super) struct Table<T> {
    slots: Vec<Option<T>>,
    len: usize,
}

impl<T> Table<T> {
    pub(super) fn new() -> Self {
        Table { slots: Vec::new(), len: 0 }
    }

    pub(super) fn get(&self, n: u32) -> Option<&T> {
        self.slots.get(n as usize)?.as_ref()
    }

    pub(super) fn get_mut(&mut self, n: u32) -> Option<&mut T> {
        self.slots.get_mut(n as usize)?.as_mut()
    }

    pub(super) fn contains_key(&self, n: u32) -> bool {
        self.get(n).is_some()
    }

    /// Store `v` under `n`, dropping whatever was there (objects are large: nothing is
    /// moved back out).
    pub(super) fn insert(&mut self, n: u32, v: T) {
        let at = n as usize;
        if at >= self.slots.len() {
            self.slots.resize_with(at.saturating_add(1), || None);
        }
        if let Some(slot) = self.slots.get_mut(at) {
            if slot.is_none() {
                self.len = self.len.saturating_add(1);
            }
            *slot = Some(v);
        }
    }

    /// Drop the object under `n` in place; false if there was none.
    pub(super) fn remove(&mut self, n: u32) -> bool {
        match self.slots.get_mut(n as usize) {
            Some(slot @ Some(_)) => {
                *slot = None;
                self.len = self.len.saturating_sub(1);
                true
            }
            _ => false,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The objects with their numbers, in number order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| Some((u32::try_from(i).ok()?, s.as_ref()?)))
    }
}

/// An mkey as the firmware holds it: its context as last written, and its translation.
#[derive(Debug, Clone)]
pub struct FwMkey {
    /// The 64-byte mkey context.
    pub mkc: [u8; prm::mkc::SIZE],
    /// The uid that created it.
    pub uid: u16,
    /// How its addresses translate.
    pub xlat: Translation,
    /// The signature BSF, when enabled with attributes.
    pub sig: Option<SigBsf>,
    /// An MTT mkey created with a translation payload: the host address of each page of
    /// `2^log_page_size` bytes, from the page holding `start_addr`. Without one (the kernel's
    /// own MRs), addresses are host addresses.
    pub pages: Option<Vec<u64>>,
    /// The crypto configuration, once a UMR wrote a crypto BSF.
    pub crypto: Option<CryptoBsfConfig>,
}

/// A PSV as the firmware holds it.
#[derive(Debug, Clone, Copy)]
pub(in crate::device) struct FwPsv {
    pub(in crate::device) uid: u16,
    /// Reports a signature error; disarmed by one until the next SET_PSV.
    pub(in crate::device) armed: bool,
}

/// A QP as the device holds it: its context (state, PD, CQs, path) and its two work queues.
#[derive(Debug, Clone)]
pub struct FwQp {
    /// When the QP was created, across devices: the engine runs QPs in this order.
    pub(in crate::device) order: u64,
    pub(in crate::device) pdn: u32,
    /// The service type (`qpc.st`).
    pub(in crate::device) st: u8,
    pub(in crate::device) send_cqn: u32,
    pub(in crate::device) recv_cqn: u32,
    pub(in crate::device) state: QpState,
    pub(in crate::device) access: AccessFlags,
    /// The RTR path: the responder's address and QP number, routed by the fabric per request.
    pub(in crate::device) remote: Option<mlx5_dv::QpDest>,
    /// The most bytes of a receive the CQE takes (`cs_res`: 0 off, 32 or 64).
    pub(in crate::device) scatter_to_cqe: u8,
    /// SIG_PIPELINING: a signature error drains the send queue to SQD.
    pub(in crate::device) drain_sigerr: bool,
    /// The send queue in host memory, and the device's producer and consumer counters in
    /// basic blocks (the producer is what the doorbell record last said).
    pub(in crate::device) sq: QueueBuf,
    pub(in crate::device) sq_pc: u32,
    pub(in crate::device) sq_cc: u32,
    /// The receive queue, and its counters in WQEs.
    pub(in crate::device) rq: QueueBuf,
    pub(in crate::device) rq_pc: u32,
    pub(in crate::device) rq_cc: u32,
    /// The SRQ its receives come from (`rq_type` SRQ), instead of `rq`.
    pub(in crate::device) srqn: Option<u32>,
    /// The XRC domain of an XRC target QP (`qpc.xrcd`; 0 for any other QP): a request's
    /// XRCETH must name an SRQ of this domain.
    pub(in crate::device) xrcd: u32,
    /// A QP on an SRQ raised its last-WQE event since it last entered ERR.
    pub(in crate::device) last_wqe: bool,
    /// The doorbell record (receive counter at +0, send counter at +4).
    pub(in crate::device) dbrec: u64,
    /// Fault rules matched when the doorbell rang, by the WQE's first basic block.
    pub(in crate::device) faults: VecDeque<(u32, WqeFault)>,
    /// The reliable transport's sequence numbers and timers.
    pub(in crate::device) transport: QpTransport,
    /// A DCI made with streams: their numbers and which are in error.
    pub(in crate::device) dci_streams: Option<DciStreams>,
    /// Its responder NAK'd a request that came over the network from this very QP (connected
    /// to itself): it takes no more requests, and goes to ERR, raising this event, once its
    /// requester has completed the WR the NAK answers. Cleared by RESET.
    pub(in crate::device) responder_failed: Option<Option<u32>>,
    /// A DCT's atomic replay caches, by the DCI each request came from.
    pub(in crate::device) dct_replay: super::DcReplay,
    /// A DCT's expected PSN per DCI across the network.
    pub(in crate::device) dct_streams: super::DctStreams,
}

/// A DCI's streams (`log_num_dci_stream_channels`, `log_num_dci_errored_streams`) and the
/// stream ids in error. The simulator keeps errors by the WQE's stream id as written; how
/// hardware folds ids past its channels onto them is not public.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DciStreams {
    /// log2 of the concurrent streams.
    pub log_concurrent: u8,
    /// log2 of the streams that may be in error: the DCI goes to ERR when that many are.
    pub log_errored: u8,
    /// The stream ids in error, until `mlx5dv_dci_stream_id_reset` or RESET.
    pub errored: std::collections::BTreeSet<u16>,
}

/// A QP's reliable-transport state: the PSN its next request carries, the PSN its responder
/// expects next (both 24 bits), and the timers and retry counts of its path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QpTransport {
    /// `sq_psn`: the PSN of the next request packet.
    pub sq_psn: u32,
    /// `rq_psn`: the PSN the responder expects next.
    pub rq_psn: u32,
    /// A DCT's access key (`dct_access_key`): a DC request must carry it.
    pub dc_key: u64,
    /// Local ACK timeout: 4.096 µs × 2^timeout; 0 waits forever.
    pub timeout: u8,
    /// Retries after a timeout or a sequence error NAK.
    pub retry_cnt: u8,
    /// Retries after an RNR NAK (7: without end).
    pub rnr_retry: u8,
    /// The RNR NAK timer the responder asks for.
    pub min_rnr_timer: u8,
    /// UD: the Q_Key a datagram must carry to be taken (`qpc.q_key`).
    pub qkey: u32,
    /// `log_sra_max`: the requester keeps at most 2^this READs and atomics outstanding
    /// (`max_rd_atomic`).
    pub log_sra_max: u8,
    /// The expected PSN the responder last sent a sequence error NAK for: no other goes out
    /// until a request moves it on (one NAK per loss, as IBTA 9.7.5.1.1 asks).
    pub nak_psn: Option<u32>,
    /// The responder's atomic replay cache.
    pub atomics: AtomicReplay,
    /// The RoCE v2 UDP source port RTS2RTS set (`mlx5dv_modify_qp_udp_sport`); 0: the
    /// flow-entropy port of the connection.
    pub udp_sport: u16,
}

/// A responder's latest atomics: the original value each returned, by request PSN. A
/// duplicate atomic request (its ACK was lost, the requester sent it again) is answered from
/// here and not executed again (IBTA 9.7.5.1.x, responder resources). It keeps as many as
/// the 2^log_max_ra_req_qp (16) reads and atomics a QP may serve at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AtomicReplay {
    /// (PSN, original value), oldest overwritten first.
    entries: [Option<(u32, u64)>; 16],
    /// The entry the next atomic takes.
    next: u8,
}

impl AtomicReplay {
    /// Keep the original value the atomic of request `psn` returned.
    pub fn remember(&mut self, psn: u32, original: u64) {
        let i = usize::from(self.next) % self.entries.len();
        if let Some(e) = self.entries.get_mut(i) {
            *e = Some((psn, original));
        }
        self.next = ((i + 1) % self.entries.len()) as u8;
    }

    /// The original value of the atomic of request `psn`, if it is still kept.
    pub fn recall(&self, psn: u32) -> Option<u64> {
        self.entries.iter().flatten().find(|(p, _)| *p == psn).map(|(_, v)| *v)
    }
}

/// PSNs are 24 bits.
pub const PSN_MASK: u32 = 0xff_ffff;

/// QPs by number, in a vector sorted by number: the engine looks a QP up several times per
/// WQE and walks them all per run, and a binary search over a few contiguous entries is
/// cheaper than a tree's; creating and destroying QPs is rare.
#[derive(Debug, Clone, Default)]
pub(super) struct QpTable {
    qps: Vec<(u32, FwQp)>,
}

impl QpTable {
    #[inline]
    fn at(&self, qpn: u32) -> Result<usize, usize> {
        self.qps.binary_search_by_key(&qpn, |(n, _)| *n)
    }

    pub(super) fn contains_key(&self, qpn: u32) -> bool {
        self.at(qpn).is_ok()
    }

    #[inline]
    pub(super) fn get(&self, qpn: u32) -> Option<&FwQp> {
        self.qps.get(self.at(qpn).ok()?).map(|(_, q)| q)
    }

    #[inline]
    pub(super) fn get_mut(&mut self, qpn: u32) -> Option<&mut FwQp> {
        let i = self.at(qpn).ok()?;
        self.qps.get_mut(i).map(|(_, q)| q)
    }

    pub(super) fn insert(&mut self, qpn: u32, qp: FwQp) {
        match self.at(qpn) {
            Ok(i) => self.qps[i].1 = qp,
            Err(i) => self.qps.insert(i, (qpn, qp)),
        }
    }

    pub(super) fn remove(&mut self, qpn: u32) -> bool {
        self.at(qpn).map(|i| self.qps.remove(i)).is_ok()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &FwQp)> {
        self.qps.iter().map(|(n, q)| (*n, q))
    }
}

/// A QP's send-queue counters and fault rules, to move as doorbells ring and WQEs retire,
/// with what those steps read beside them.
pub(in crate::device) struct SendQueueMut<'a> {
    pub(in crate::device) sq: QueueBuf,
    pub(in crate::device) dbrec: u64,
    pub(in crate::device) send_cqn: u32,
    pub(in crate::device) sq_pc: &'a mut u32,
    pub(in crate::device) sq_cc: &'a mut u32,
    pub(in crate::device) faults: &'a mut VecDeque<(u32, WqeFault)>,
}

impl FwQp {
    pub(super) fn send_queue_mut(&mut self) -> SendQueueMut<'_> {
        SendQueueMut {
            sq: self.sq,
            dbrec: self.dbrec,
            send_cqn: self.send_cqn,
            sq_pc: &mut self.sq_pc,
            sq_cc: &mut self.sq_cc,
            faults: &mut self.faults,
        }
    }
}

/// What a CREATE_QP mailbox tells the firmware.
#[derive(Debug, Clone, Copy)]
pub(super) struct QpCreate {
    /// Scheduling order (see [`FwQp`]).
    pub order: u64,
    /// Its PD number.
    pub pdn: u32,
    /// The service type (`qpc.st`).
    pub st: u8,
    /// Send CQ number.
    pub send_cqn: u32,
    /// Receive CQ number.
    pub recv_cqn: u32,
    /// Scatter-to-CQE for small receives: the most bytes the CQE takes (0 off, 32 or 64).
    pub scatter_to_cqe: u8,
    /// SIG_PIPELINING.
    pub drain_sigerr: bool,
    /// The send queue (64-byte basic blocks).
    pub sq: QueueBuf,
    /// The receive queue.
    pub rq: QueueBuf,
    /// The SRQ its receives come from.
    pub srqn: Option<u32>,
    /// The XRC domain of a target QP (0: none).
    pub xrcd: u32,
    /// The doorbell record.
    pub dbrec: u64,
    /// A DCI's streams (`log_num_dci_stream_channels`, `log_num_dci_errored_streams`).
    pub dci_streams: Option<(u8, u8)>,
}

/// What a CREATE_CQ mailbox tells the firmware: its ring and doorbell record in host memory.
#[derive(Debug, Clone, Copy)]
pub(super) struct CqCreate {
    /// CQEs it holds at most (the ring has one slot more).
    pub cqe: u32,
    /// The ring: `cqe + 1` entries of `stride` bytes.
    pub ring: u64,
    /// Bytes of an entry: 64, or 128 (`cqc.cqe_sz` 1 or 2).
    pub stride: u32,
    /// The doorbell record: the consumer index at +0.
    pub dbrec: u64,
    /// `cqc.oi`: overrun ignored.
    pub oi: bool,
}

/// A CQ as the device holds it.
#[derive(Debug, Clone)]
pub struct FwCq {
    /// CQEs it holds at most.
    pub(in crate::device) cqe: u32,
    /// Where its entries go.
    pub(in crate::device) ring: QueueBuf,
    pub(in crate::device) dbrec: u64,
    /// The producer index.
    pub(in crate::device) pi: u32,
    /// Overrun: later CQEs are lost.
    pub(in crate::device) overrun: bool,
    /// `cqc.oi`: the device writes on at the producer index whatever the consumer index,
    /// and never overruns.
    pub(in crate::device) oi: bool,
    /// The EQ of a CQ made by a raw CREATE_CQ; kernel CQs report through the kernel.
    pub(in crate::device) eqn: Option<u32>,
    /// Armed: the next CQE raises a completion event (on `eqn`, or to the kernel for a
    /// verbs CQ).
    pub(in crate::device) armed: bool,
    /// Armed for solicited completions only (`MLX5_CQ_DB_REQ_NOT_SOL`): only a CQE with
    /// the solicited bit, or an error CQE, raises the event.
    pub(in crate::device) solicited_only: bool,
    /// Its good CQEs carry the device clock in `timestamp` (set for a CQ made with
    /// completion timestamps; see `Device::set_cq_timestamps`).
    pub(in crate::device) timestamps: bool,
}

#[cfg(test)]
mod tests {
    use super::Numbers;

    #[test]
    fn a_reserved_number_is_never_handed_out() {
        let mut n = Numbers::without(2, 8, 4);
        let first: Vec<_> = std::iter::from_fn(|| n.take()).collect();
        assert_eq!(first, [2, 3, 5, 6, 7]);
        n.give_back(5);
        assert_eq!(n.take(), Some(5), "a freed number comes back");
        assert_eq!(n.take(), None, "the limit holds");
    }
}
