//! The rsockets protocol as the C ABI's librdmacm speaks it over an RC QP: the private data
//! each side puts in the CM's REQ and REP, the immediate data of its messages, the IO map
//! message of `riomap`, and the credits that keep a sender within the receives its peer
//! has posted. The shape follows rdma-core's `librdmacm/rsocket.c` (a version byte,
//! credits, an IO map count in the private data; the operation in the immediate data's top
//! bits); the data path differs: SENDs into posted receives rather than RDMA WRITEs into a
//! ring the peer advertised.

/// The protocol version in the private data's first byte (rsocket.c's).
pub const VERSION: u8 = 1;
/// The private data's length: version, flags, credits (big-endian 16 bits), 3 reserved
/// bytes, the IO map count, the receive buffers' size (big-endian 32 bits).
pub const CONN_DATA_LEN: usize = 12;
/// The largest credit count a message returns (the immediate data's low 28 bits).
pub const MAX_RETURN: usize = 0x0fff_ffff;
/// The IO map message's length.
pub const IOMAP_LEN: usize = 32;

/// What one side tells the other when connecting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnData {
    /// The receives it posted: the peer's first credits.
    pub credits: u16,
    /// How many IO maps of the peer's it takes (`RDMA_IOMAPSIZE`).
    pub iomap: u8,
    /// Each receive buffer's size: the most one message carries.
    pub seg: u32,
}

/// Why private data is not an rsocket's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnDataError {
    /// Fewer bytes than [`CONN_DATA_LEN`].
    Short,
    /// Another version than [`VERSION`].
    Version(u8),
}

impl ConnData {
    /// The private data's bytes.
    pub fn encode(&self) -> [u8; CONN_DATA_LEN] {
        let mut p = [0u8; CONN_DATA_LEN];
        p[0] = VERSION;
        p[2..4].copy_from_slice(&self.credits.to_be_bytes());
        p[7] = self.iomap;
        p[8..12].copy_from_slice(&self.seg.to_be_bytes());
        p
    }

    /// Read a peer's private data (longer data is fine: the CM pads it).
    pub fn decode(p: &[u8]) -> Result<ConnData, ConnDataError> {
        if p.len() < CONN_DATA_LEN {
            return Err(ConnDataError::Short);
        }
        if p[0] != VERSION {
            return Err(ConnDataError::Version(p[0]));
        }
        Ok(ConnData {
            credits: u16::from_be_bytes([p[2], p[3]]),
            iomap: p[7],
            seg: u32::from_be_bytes([p[8], p[9], p[10], p[11]]),
        })
    }
}

/// What a message is (the immediate data's top 4 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Stream bytes: the payload.
    Data,
    /// Returned credits only.
    Credit,
    /// The sender writes no more: the end of the stream once the data before it is read.
    Shutdown,
    /// An IO map (the payload: [`IoMap`]).
    IoMap,
    /// An operation this version does not know (ignored, its receive posted again).
    Unknown(u8),
}

impl Op {
    fn code(self) -> u32 {
        match self {
            Op::Data => 0,
            Op::Credit => 1,
            Op::Shutdown => 2,
            Op::IoMap => 3,
            Op::Unknown(c) => u32::from(c & 0xf),
        }
    }
}

/// The immediate data (host order) of a message of `op` returning `credits` (at most
/// [`MAX_RETURN`]).
pub fn imm(op: Op, credits: usize) -> u32 {
    (op.code() << 28) | credits.min(MAX_RETURN) as u32
}

/// The operation and returned credits of a message's immediate data (host order).
pub fn parse_imm(imm: u32) -> (Op, usize) {
    let op = match imm >> 28 {
        0 => Op::Data,
        1 => Op::Credit,
        2 => Op::Shutdown,
        3 => Op::IoMap,
        c => Op::Unknown(c as u8),
    };
    (op, (imm & MAX_RETURN as u32) as usize)
}

/// A buffer a peer may write: the slot of the peer's table it takes (a later map in the same
/// slot replaces it), the offset it is known by, its address, rkey and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoMap {
    /// The slot, below the receiver's `RDMA_IOMAPSIZE`.
    pub index: u32,
    /// The offset `riowrite` names.
    pub offset: u64,
    /// The buffer's address in the mapping process.
    pub addr: u64,
    /// Its rkey.
    pub rkey: u32,
    /// Its length (32 bits on the wire).
    pub len: u32,
}

impl IoMap {
    /// The message's bytes: offset, address (big-endian 64 bits each), rkey, length, slot
    /// (big-endian 32 bits each), 4 reserved.
    pub fn encode(&self) -> [u8; IOMAP_LEN] {
        let mut b = [0u8; IOMAP_LEN];
        b[..8].copy_from_slice(&self.offset.to_be_bytes());
        b[8..16].copy_from_slice(&self.addr.to_be_bytes());
        b[16..20].copy_from_slice(&self.rkey.to_be_bytes());
        b[20..24].copy_from_slice(&self.len.to_be_bytes());
        b[24..28].copy_from_slice(&self.index.to_be_bytes());
        b
    }

    /// Read an IO map message; None if short.
    pub fn decode(b: &[u8]) -> Option<IoMap> {
        let b = b.get(..IOMAP_LEN)?;
        let u64_at = |k: usize| u64::from_be_bytes(b[k..k + 8].try_into().unwrap_or_default());
        let u32_at = |k: usize| u32::from_be_bytes(b[k..k + 4].try_into().unwrap_or_default());
        Some(IoMap { index: u32_at(24), offset: u64_at(0), addr: u64_at(8), rkey: u32_at(16), len: u32_at(20) })
    }

    /// Whether `offset` falls in the map.
    pub fn holds(&self, offset: u64) -> bool {
        offset >= self.offset && offset - self.offset < u64::from(self.len)
    }
}

/// One side's credits: the peer's receives it may still fill, and its own receives posted
/// again that it has not yet told the peer of. Every message spends a credit; data keeps
/// the last one back, so a side out of credits for data can still return the peer's, and
/// two sides that both wait for credits always have one message left to send them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credits {
    /// Receives of the peer this side may fill.
    pub credits: usize,
    /// Receives this side posted again, owed to the peer.
    pub owed: usize,
    /// This side's receive queue depth.
    pub rq: usize,
}

impl Credits {
    /// Credits of a side with `rq` receives whose peer posted `peer_rq`.
    pub fn new(rq: usize, peer_rq: usize) -> Credits {
        Credits { credits: peer_rq, owed: 0, rq }
    }

    /// Whether a data (or IO map) message may go.
    pub fn can_send_data(&self) -> bool {
        self.credits >= 2
    }

    /// Whether a control message (credits, shutdown) may go.
    pub fn can_send_ctrl(&self) -> bool {
        self.credits >= 1
    }

    /// Whether enough is owed to send a message of credits alone: half the receive queue.
    pub fn credit_due(&self) -> bool {
        self.owed >= (self.rq / 2).max(1)
    }

    /// Spend a credit on a message: the credits it returns (all owed, up to
    /// [`MAX_RETURN`]). None when no credit is left.
    pub fn spend(&mut self) -> Option<usize> {
        self.credits = self.credits.checked_sub(1)?;
        let r = self.owed.min(MAX_RETURN);
        self.owed -= r;
        Some(r)
    }

    /// A message came returning `returned` credits.
    pub fn received(&mut self, returned: usize) {
        self.credits += returned;
    }

    /// A receive was posted again.
    pub fn reposted(&mut self) {
        self.owed += 1;
    }
}
