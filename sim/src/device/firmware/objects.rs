//! The firmware's objects: number allocators, mkeys with their translations, PSVs, and the
//! QPs and CQs the engine runs.

use std::collections::VecDeque;

use mlx5_dv::prm;
use mlx5_dv::{AccessFlags, QpState};

use crate::device::WqeFault;
use crate::device::wqe::{QueueBuf, SigBsf};

/// Hands out 24-bit object numbers, lowest-recently-freed first, never two alike at once.
#[derive(Debug, Clone)]
pub(super) struct Numbers {
    next: u32,
    limit: u32,
    free: Vec<u32>,
}

impl Numbers {
    pub(super) fn new(first: u32, limit: u32) -> Self {
        Numbers { next: first, limit, free: Vec::new() }
    }

    pub(super) fn take(&mut self) -> Option<u32> {
        if let Some(n) = self.free.pop() {
            return Some(n);
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

/// One entry of a KLM list: `byte_count` bytes at `addr` of the memory `key` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Klm {
    /// Bytes this entry maps.
    pub byte_count: u32,
    /// Key of the memory it points into.
    pub key: u32,
    /// Address in that memory.
    pub addr: u64,
}

/// One entry of a repeat block: each repetition `r` maps `byte_count` bytes at
/// `addr + r * stride` of the memory `key` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepeatEntry {
    /// Distance between repetitions (16-bit in the WQE).
    pub stride: u16,
    /// Bytes per repetition (16-bit in the WQE).
    pub byte_count: u16,
    /// Key of the memory it points into.
    pub key: u32,
    /// Address of the first repetition.
    pub addr: u64,
}

/// How an mkey turns its addresses into memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Translation {
    /// Nothing yet: an indirect mkey no UMR has given a layout.
    None,
    /// A registered region: addresses are host virtual addresses within `[start, start+len)`.
    Mtt,
    /// A KLM list (layout list): zero-based, entries back to back.
    Klm(Vec<Klm>),
    /// A repeat block (interleaved layout): zero-based, repetitions of the entries in turn.
    Repeat {
        /// How many times the entry list repeats.
        repeat_count: u32,
        /// The entries.
        entries: Vec<RepeatEntry>,
    },
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
    pub crypto: Option<MkeyCrypto>,
}

/// An mkey's crypto configuration, as its crypto BSF gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MkeyCrypto {
    /// `enc_order` (`MLX5_ENCRYPTION_ORDER_*`).
    pub enc_order: u8,
    /// Data unit bytes.
    pub dus: usize,
    /// The initial tweak, little-endian (as the user gave it).
    pub initial_tweak: [u8; 16],
    /// The DEK object id.
    pub dek: u32,
    /// The keytag.
    pub keytag: [u8; 8],
}

impl MkeyCrypto {
    /// Memory holds plaintext and the wire ciphertext (TX encrypts).
    pub fn encrypt_on_tx(&self) -> bool {
        use mlx5_dv::prm::crypto_bsf::enc_order as o;
        matches!(self.enc_order, o::ENCRYPTED_WIRE_SIGNATURE | o::ENCRYPTED_RAW_WIRE)
    }

    /// The cipher sits next to memory (TX: crypto, then signature); otherwise next to the
    /// wire (TX: signature, then crypto).
    pub fn memory_side(&self) -> bool {
        use mlx5_dv::prm::crypto_bsf::enc_order as o;
        matches!(self.enc_order, o::ENCRYPTED_MEMORY_SIGNATURE | o::ENCRYPTED_RAW_WIRE)
    }
}

/// A PSV as the firmware holds it.
#[derive(Debug, Clone, Copy)]
pub(in crate::device) struct FwPsv {
    pub(in crate::device) uid: u16,
    /// Reports a signature error; disarmed by one until the next SET_PSV.
    pub(in crate::device) armed: bool,
}

/// The responder a QP's RTR path names: a device and a QP number on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct QpPath {
    /// The responder's device.
    pub dev: usize,
    /// The responder's QP number.
    pub qpn: u32,
}

/// A QP as the device holds it: its context (state, PD, CQs, path) and its two work queues.
#[derive(Debug, Clone)]
pub struct FwQp {
    /// When the QP was created, across devices: the engine runs QPs in this order.
    pub(in crate::device) order: u64,
    pub(in crate::device) pdn: u32,
    pub(in crate::device) send_cqn: u32,
    pub(in crate::device) recv_cqn: u32,
    pub(in crate::device) state: QpState,
    pub(in crate::device) access: AccessFlags,
    /// The RTR path: the responder's address and QP number, routed by the fabric per request.
    pub(in crate::device) remote: Option<mlx5_dv::QpDest>,
    pub(in crate::device) scatter_to_cqe: bool,
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
    /// The doorbell record (receive counter at +0, send counter at +4).
    pub(in crate::device) dbrec: u64,
    /// Fault rules matched when the doorbell rang, by the WQE's first basic block.
    pub(in crate::device) faults: VecDeque<(u32, WqeFault)>,
}

/// QPs by number, in a vector sorted by number: the engine looks a QP up several times per
/// WQE and walks them all per run, and a binary search over a few contiguous entries is
/// cheaper than a tree's; creating and destroying QPs is rare.
#[derive(Debug, Clone, Default)]
pub(super) struct QpTable {
    qps: Vec<(u32, FwQp)>,
}

impl QpTable {
    fn at(&self, qpn: u32) -> Result<usize, usize> {
        self.qps.binary_search_by_key(&qpn, |(n, _)| *n)
    }

    pub(super) fn len(&self) -> usize {
        self.qps.len()
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

/// What creating a QP tells the firmware.
#[derive(Debug, Clone, Copy)]
pub struct QpCreate {
    /// Scheduling order (see [`FwQp`]).
    pub order: u64,
    /// Its PD number.
    pub pdn: u32,
    /// Send CQ number.
    pub send_cqn: u32,
    /// Receive CQ number.
    pub recv_cqn: u32,
    /// Scatter-to-CQE for small receives.
    pub scatter_to_cqe: bool,
    /// SIG_PIPELINING.
    pub drain_sigerr: bool,
    /// The send queue (64-byte basic blocks).
    pub sq: QueueBuf,
    /// The receive queue.
    pub rq: QueueBuf,
    /// The doorbell record.
    pub dbrec: u64,
}

/// What creating a CQ tells the firmware: its ring and doorbell record in host memory.
#[derive(Debug, Clone, Copy)]
pub struct CqCreate {
    /// CQEs it holds at most (the ring has one slot more).
    pub cqe: u32,
    /// The ring: `cqe + 1` entries of 64 bytes.
    pub ring: u64,
    /// The doorbell record: the consumer index at +0.
    pub dbrec: u64,
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
    /// The EQ of a CQ made by a raw CREATE_CQ; kernel CQs report through the kernel.
    pub(in crate::device) eqn: Option<u32>,
    /// Armed: the next CQE raises a completion event on `eqn`.
    pub(in crate::device) armed: bool,
}
