//! The communication manager's MADs (IBTA vol. 1 chapter 12): REQ, REP, RTU, REJ, MRA, DREQ,
//! DREP, and SIDR_REQ/SIDR_REP (service ID resolution, for UD), each a 256-byte MAD sent to QP 1 (the GSI) as a UD SEND with the GSI's Q_Key. Field
//! offsets are the specification's tables 106 to 113, counted after the 24-byte MAD header,
//! as the kernel's `ibta_vol1_c12.h` counts them.

/// A MAD's length.
pub const MAD_LEN: usize = 256;
/// The MAD header's length: the CM message starts after it.
const HDR: usize = 24;
/// The QP number of the General Services Interface.
pub const GSI_QPN: u32 = 1;
/// The GSI's well-known Q_Key.
pub const GSI_QKEY: u32 = 0x8001_0000;
/// The management class of the communication manager.
pub const CM_CLASS: u8 = 0x07;
/// The CM class's version.
pub const CM_CLASS_VERSION: u8 = 2;
/// The method of every CM message: Send.
pub const METHOD_SEND: u8 = 0x03;

/// The attribute IDs of the CM messages.
pub mod attr {
    /// Request for communication.
    pub const REQ: u16 = 0x0010;
    /// Message receipt acknowledgement: the answer takes longer.
    pub const MRA: u16 = 0x0011;
    /// Reject.
    pub const REJ: u16 = 0x0012;
    /// Reply to a request.
    pub const REP: u16 = 0x0013;
    /// Ready to use.
    pub const RTU: u16 = 0x0014;
    /// Request for disconnection.
    pub const DREQ: u16 = 0x0015;
    /// Reply to a disconnection request.
    pub const DREP: u16 = 0x0016;
    /// Service ID resolution request (UD).
    pub const SIDR_REQ: u16 = 0x0017;
    /// Service ID resolution response.
    pub const SIDR_REP: u16 = 0x0018;
}

/// The private data each message carries, in bytes (the specification's sizes).
pub mod private_len {
    /// REQ.
    pub const REQ: usize = 92;
    /// REP.
    pub const REP: usize = 196;
    /// REJ.
    pub const REJ: usize = 148;
    /// MRA.
    pub const MRA: usize = 222;
    /// RTU.
    pub const RTU: usize = 224;
    /// DREQ.
    pub const DREQ: usize = 220;
    /// DREP.
    pub const DREP: usize = 224;
    /// SIDR_REQ.
    pub const SIDR_REQ: usize = 216;
    /// SIDR_REP.
    pub const SIDR_REP: usize = 136;
}

/// SIDR_REP statuses (table 116).
pub mod sidr {
    /// The QP is given.
    pub const SUCCESS: u8 = 0;
    /// No such service ID: nobody listens.
    pub const UNSUPPORTED: u8 = 1;
    /// The consumer rejected the request.
    pub const REJECT: u8 = 2;
}

/// REJ reasons (table 109) the connection manager gives.
pub mod reason {
    /// No QP or listener for the service ID: nobody listens.
    pub const INVALID_SERVICE_ID: u16 = 8;
    /// The consumer rejected the request.
    pub const CONSUMER_REJECT: u16 = 28;
    /// The peer did not answer in time.
    pub const TIMEOUT: u16 = 1;
}

/// What an MRA acknowledges (its Message MRAed field).
pub mod mraed {
    /// A REQ.
    pub const REQ: u8 = 0;
    /// A REP.
    pub const REP: u8 = 1;
    /// A LAP.
    pub const OTHER: u8 = 2;
}

/// A REQ's fields the simulated connection manager uses (the rest are written as RoCE's).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Req {
    /// The requester's communication ID.
    pub local_comm_id: u32,
    /// The service the requester connects to.
    pub service_id: u64,
    /// The requester's CA GUID.
    pub local_ca_guid: u64,
    /// The requester's QP number.
    pub local_qpn: u32,
    /// RDMA READs and atomics the requester answers at once.
    pub responder_resources: u8,
    /// RDMA READs and atomics the requester issues at once.
    pub initiator_depth: u8,
    /// The requester's first PSN.
    pub starting_psn: u32,
    /// Transport retries (3 bits).
    pub retry_count: u8,
    /// RNR retries (3 bits).
    pub rnr_retry_count: u8,
    /// The path MTU (`enum ibv_mtu`).
    pub mtu: u8,
    /// The requester uses an SRQ.
    pub srq: bool,
    /// The CM response timeout (4.096 µs × 2^n) the requester asks of the responder and
    /// gives itself (5 bits; the kernel's rdma_cm sends 20).
    pub cm_response_timeout: u8,
    /// How often a CM message of this connection goes again unanswered (4 bits; the kernel's
    /// rdma_cm sends 15).
    pub max_cm_retries: u8,
    /// The requester's GID.
    pub local_gid: [u8; 16],
    /// The responder's GID.
    pub remote_gid: [u8; 16],
    /// Private data (up to [`private_len::REQ`]).
    pub private_data: Vec<u8>,
}

/// A REP's fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rep {
    /// The responder's communication ID.
    pub local_comm_id: u32,
    /// The requester's communication ID.
    pub remote_comm_id: u32,
    /// The responder's QP number.
    pub local_qpn: u32,
    /// The responder's first PSN.
    pub starting_psn: u32,
    /// RDMA READs and atomics the responder answers at once.
    pub responder_resources: u8,
    /// RDMA READs and atomics the responder issues at once.
    pub initiator_depth: u8,
    /// RNR retries (3 bits).
    pub rnr_retry_count: u8,
    /// The responder uses an SRQ.
    pub srq: bool,
    /// The responder's CA GUID.
    pub local_ca_guid: u64,
    /// Private data (up to [`private_len::REP`]).
    pub private_data: Vec<u8>,
}

/// A CM message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmMsg {
    /// Request.
    Req(Req),
    /// Reply.
    Rep(Rep),
    /// Ready to use: (local, remote) communication IDs and private data.
    Rtu(u32, u32, Vec<u8>),
    /// Reject.
    Rej {
        /// The rejecter's communication ID.
        local: u32,
        /// The rejected side's communication ID (0 for a REQ's).
        remote: u32,
        /// Which message is rejected: 0 a REQ, 1 a REP, 2 another.
        rejected: u8,
        /// Why ([`reason`]).
        reason: u16,
        /// Private data (up to [`private_len::REJ`]).
        private_data: Vec<u8>,
    },
    /// Message receipt acknowledgement: the sender needs longer to answer.
    Mra {
        /// The sender's communication ID.
        local: u32,
        /// The communication ID of the side whose message is acknowledged.
        remote: u32,
        /// Which message is acknowledged ([`mraed`]).
        mraed: u8,
        /// How much longer the answer may take: 4.096 µs × 2^n (5 bits).
        service_timeout: u8,
        /// Private data (up to [`private_len::MRA`]).
        private_data: Vec<u8>,
    },
    /// Disconnection request: local and remote IDs, the remote QPN, private data.
    Dreq(u32, u32, u32, Vec<u8>),
    /// Disconnection reply: local and remote IDs, private data.
    Drep(u32, u32, Vec<u8>),
    /// Service ID resolution request.
    SidrReq(SidrReq),
    /// Service ID resolution response.
    SidrRep(SidrRep),
}

/// A SIDR_REQ's fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SidrReq {
    /// The requester's request ID (its answer carries it back).
    pub request_id: u32,
    /// The partition key.
    pub pkey: u16,
    /// The service asked for.
    pub service_id: u64,
    /// Private data (up to [`private_len::SIDR_REQ`]).
    pub private_data: Vec<u8>,
}

/// A SIDR_REP's fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SidrRep {
    /// The request ID of the SIDR_REQ answered.
    pub request_id: u32,
    /// [`sidr`] status.
    pub status: u8,
    /// The QP that serves the service (24 bits; 0 unless the status is success).
    pub qpn: u32,
    /// The service ID.
    pub service_id: u64,
    /// The QP's Q_Key.
    pub qkey: u32,
    /// Private data (up to [`private_len::SIDR_REP`]).
    pub private_data: Vec<u8>,
}

/// A CM MAD: its transaction ID and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mad {
    /// The MAD header's transaction ID.
    pub tid: u64,
    /// The message.
    pub msg: CmMsg,
}

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(d) = b.get_mut(HDR + at..HDR + at + v.len()) {
        d.copy_from_slice(v);
    }
}

fn get<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    b.get(HDR + at..HDR + at + N).and_then(|s| s.try_into().ok()).unwrap_or([0; N])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(get(b, at))
}

/// A 24-bit field in the top of the 32-bit word at `at`.
fn u24_at(b: &[u8], at: usize) -> u32 {
    u32_at(b, at) >> 8
}

fn byte(b: &[u8], at: usize) -> u8 {
    get::<1>(b, at)[0]
}

fn private(b: &[u8], at: usize, len: usize) -> Vec<u8> {
    b.get(HDR + at..HDR + at + len).map(<[u8]>::to_vec).unwrap_or_default()
}

impl Mad {
    /// The MAD's 256 bytes; private data past its message's room is cut.
    pub fn encode(&self) -> [u8; MAD_LEN] {
        let mut b = [0u8; MAD_LEN];
        b[0] = 1; // base version
        b[1] = CM_CLASS;
        b[2] = CM_CLASS_VERSION;
        b[3] = METHOD_SEND;
        b[8..16].copy_from_slice(&self.tid.to_be_bytes());
        let (id, (at, room, data)) = match &self.msg {
            CmMsg::Req(r) => (attr::REQ, req(&mut b, r)),
            CmMsg::Rep(r) => (attr::REP, rep(&mut b, r)),
            CmMsg::Rtu(l, r, p) => {
                put(&mut b, 0, &l.to_be_bytes());
                put(&mut b, 4, &r.to_be_bytes());
                (attr::RTU, (8, private_len::RTU, p.as_slice()))
            }
            CmMsg::Rej { local, remote, rejected, reason, private_data } => {
                put(&mut b, 0, &local.to_be_bytes());
                put(&mut b, 4, &remote.to_be_bytes());
                put(&mut b, 8, &[rejected << 6, 0]);
                put(&mut b, 10, &reason.to_be_bytes());
                (attr::REJ, (84, private_len::REJ, private_data.as_slice()))
            }
            CmMsg::Mra { local, remote, mraed, service_timeout, private_data } => {
                put(&mut b, 0, &local.to_be_bytes());
                put(&mut b, 4, &remote.to_be_bytes());
                put(&mut b, 8, &[(mraed & 3) << 6, (service_timeout & 0x1f) << 3]);
                (attr::MRA, (10, private_len::MRA, private_data.as_slice()))
            }
            CmMsg::Dreq(l, r, qpn, p) => {
                put(&mut b, 0, &l.to_be_bytes());
                put(&mut b, 4, &r.to_be_bytes());
                put(&mut b, 8, &(qpn << 8).to_be_bytes());
                (attr::DREQ, (12, private_len::DREQ, p.as_slice()))
            }
            CmMsg::Drep(l, r, p) => {
                put(&mut b, 0, &l.to_be_bytes());
                put(&mut b, 4, &r.to_be_bytes());
                (attr::DREP, (8, private_len::DREP, p.as_slice()))
            }
            CmMsg::SidrReq(r) => {
                put(&mut b, 0, &r.request_id.to_be_bytes());
                put(&mut b, 4, &r.pkey.to_be_bytes());
                put(&mut b, 8, &r.service_id.to_be_bytes());
                (attr::SIDR_REQ, (16, private_len::SIDR_REQ, r.private_data.as_slice()))
            }
            CmMsg::SidrRep(r) => {
                put(&mut b, 0, &r.request_id.to_be_bytes());
                put(&mut b, 4, &[r.status]);
                put(&mut b, 8, &((r.qpn & 0xff_ffff) << 8).to_be_bytes());
                put(&mut b, 12, &r.service_id.to_be_bytes());
                put(&mut b, 20, &r.qkey.to_be_bytes());
                // The 72 bytes of ClassPortInfo (a redirection's) stay zero: none is given.
                (attr::SIDR_REP, (96, private_len::SIDR_REP, r.private_data.as_slice()))
            }
        };
        b[16..18].copy_from_slice(&id.to_be_bytes());
        put(&mut b, at, data.get(..data.len().min(room)).unwrap_or(&[]));
        b
    }

    /// A CM MAD from its bytes: `None` for another class, version or method, an attribute
    /// not listed here, or fewer than 256 bytes.
    pub fn decode(b: &[u8]) -> Option<Mad> {
        if b.len() < MAD_LEN || b[0] != 1 || b[1] != CM_CLASS || b[2] != CM_CLASS_VERSION || b[3] != METHOD_SEND {
            return None;
        }
        let tid = u64::from_be_bytes(b.get(8..16)?.try_into().ok()?);
        let ids = (u32_at(b, 0), u32_at(b, 4));
        let msg = match u16::from_be_bytes([b[16], b[17]]) {
            attr::REQ => CmMsg::Req(Req {
                local_comm_id: ids.0,
                service_id: u64::from_be_bytes(get(b, 8)),
                local_ca_guid: u64::from_be_bytes(get(b, 16)),
                local_qpn: u24_at(b, 32),
                responder_resources: byte(b, 35),
                initiator_depth: byte(b, 39),
                starting_psn: u24_at(b, 44),
                retry_count: byte(b, 47) & 7,
                mtu: byte(b, 50) >> 4,
                rnr_retry_count: byte(b, 50) & 7,
                srq: byte(b, 51) & 0x08 != 0,
                cm_response_timeout: byte(b, 43) >> 3,
                max_cm_retries: byte(b, 51) >> 4,
                local_gid: get(b, 56),
                remote_gid: get(b, 72),
                private_data: private(b, 140, private_len::REQ),
            }),
            attr::REP => CmMsg::Rep(Rep {
                local_comm_id: ids.0,
                remote_comm_id: ids.1,
                local_qpn: u24_at(b, 12),
                starting_psn: u24_at(b, 20),
                responder_resources: byte(b, 24),
                initiator_depth: byte(b, 25),
                rnr_retry_count: byte(b, 27) >> 5,
                srq: byte(b, 27) & 0x10 != 0,
                local_ca_guid: u64::from_be_bytes(get(b, 28)),
                private_data: private(b, 36, private_len::REP),
            }),
            attr::RTU => CmMsg::Rtu(ids.0, ids.1, private(b, 8, private_len::RTU)),
            attr::REJ => CmMsg::Rej {
                local: ids.0,
                remote: ids.1,
                rejected: byte(b, 8) >> 6,
                reason: u16::from_be_bytes(get(b, 10)),
                private_data: private(b, 84, private_len::REJ),
            },
            attr::MRA => CmMsg::Mra {
                local: ids.0,
                remote: ids.1,
                mraed: byte(b, 8) >> 6,
                service_timeout: byte(b, 9) >> 3,
                private_data: private(b, 10, private_len::MRA),
            },
            attr::DREQ => CmMsg::Dreq(ids.0, ids.1, u24_at(b, 8), private(b, 12, private_len::DREQ)),
            attr::DREP => CmMsg::Drep(ids.0, ids.1, private(b, 8, private_len::DREP)),
            attr::SIDR_REQ => CmMsg::SidrReq(SidrReq {
                request_id: ids.0,
                pkey: u16::from_be_bytes(get(b, 4)),
                service_id: u64::from_be_bytes(get(b, 8)),
                private_data: private(b, 16, private_len::SIDR_REQ),
            }),
            attr::SIDR_REP => CmMsg::SidrRep(SidrRep {
                request_id: ids.0,
                status: byte(b, 4),
                qpn: u24_at(b, 8),
                service_id: u64::from_be_bytes(get(b, 12)),
                qkey: u32_at(b, 20),
                private_data: private(b, 96, private_len::SIDR_REP),
            }),
            _ => return None,
        };
        Some(Mad { tid, msg })
    }
}

/// The REQ's fields into `b`: where its private data goes, its room, and the data.
fn req<'a>(b: &mut [u8; MAD_LEN], r: &'a Req) -> (usize, usize, &'a [u8]) {
    put(b, 0, &r.local_comm_id.to_be_bytes());
    put(b, 8, &r.service_id.to_be_bytes());
    put(b, 16, &r.local_ca_guid.to_be_bytes());
    put(b, 28, &GSI_QKEY.to_be_bytes()); // the local Q_Key: unused by RC
    put(b, 32, &((r.local_qpn << 8) | u32::from(r.responder_resources)).to_be_bytes());
    put(b, 36, &u32::from(r.initiator_depth).to_be_bytes());
    // The remote CM response timeout, transport service type RC (0), flow control on.
    let t = u32::from(r.cm_response_timeout & 0x1f);
    put(b, 40, &((t << 3) | 1).to_be_bytes());
    // The starting PSN, the local CM response timeout and the retry count.
    put(b, 44, &(((r.starting_psn & 0xff_ffff) << 8) | (t << 3) | u32::from(r.retry_count & 7)).to_be_bytes());
    put(b, 48, &0xffffu16.to_be_bytes()); // the default P_Key
    put(b, 50, &[(r.mtu << 4) | (r.rnr_retry_count & 7), ((r.max_cm_retries & 0xf) << 4) | (u8::from(r.srq) << 3)]);
    // RoCE: the LIDs are the permissive LID.
    put(b, 52, &[0xff; 4]);
    put(b, 56, &r.local_gid);
    put(b, 72, &r.remote_gid);
    put(b, 92, &[0, 64, 0, 18 << 3]); // traffic class, hop limit, SL and subnet-local, ack timeout
    (140, private_len::REQ, &r.private_data)
}

fn rep<'a>(b: &mut [u8; MAD_LEN], r: &'a Rep) -> (usize, usize, &'a [u8]) {
    put(b, 0, &r.local_comm_id.to_be_bytes());
    put(b, 4, &r.remote_comm_id.to_be_bytes());
    put(b, 12, &(r.local_qpn << 8).to_be_bytes());
    put(b, 20, &((r.starting_psn & 0xff_ffff) << 8).to_be_bytes());
    put(
        b,
        24,
        &[
            r.responder_resources,
            r.initiator_depth,
            (18 << 3) | 1,
            ((r.rnr_retry_count & 7) << 5) | (u8::from(r.srq) << 4),
        ],
    );
    put(b, 28, &r.local_ca_guid.to_be_bytes());
    (36, private_len::REP, &r.private_data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_message_reads_back_as_written() {
        let req = Req {
            local_comm_id: 0x1234_5678,
            service_id: 0x0106_4e20,
            local_ca_guid: 0x0002_c903_0000_0001,
            local_qpn: 0x00ab_cdef,
            responder_resources: 4,
            initiator_depth: 2,
            starting_psn: 0x0012_3456,
            retry_count: 7,
            rnr_retry_count: 6,
            mtu: 5,
            srq: true,
            cm_response_timeout: 20,
            max_cm_retries: 15,
            local_gid: [1; 16],
            remote_gid: [2; 16],
            private_data: vec![9; 92],
        };
        let rep = Rep {
            local_comm_id: 1,
            remote_comm_id: 2,
            local_qpn: 0x42,
            starting_psn: 7,
            private_data: vec![3; 196],
            ..Rep::default()
        };
        for msg in [
            CmMsg::Req(req),
            CmMsg::Rep(rep),
            CmMsg::Rtu(1, 2, vec![0; 224]),
            CmMsg::Rej {
                local: 3,
                remote: 4,
                rejected: 0,
                reason: reason::CONSUMER_REJECT,
                private_data: vec![5; 148],
            },
            CmMsg::Mra { local: 3, remote: 4, mraed: mraed::REP, service_timeout: 24, private_data: vec![7; 222] },
            CmMsg::Dreq(5, 6, 0x99, vec![0; 220]),
            CmMsg::Drep(7, 8, vec![0; 224]),
            CmMsg::SidrReq(SidrReq {
                request_id: 9,
                pkey: 0xffff,
                service_id: 0x0111_1c06,
                private_data: vec![4; 216],
            }),
            CmMsg::SidrRep(SidrRep {
                request_id: 9,
                status: sidr::SUCCESS,
                qpn: 0x12_3456,
                service_id: 0x0111_1c06,
                qkey: 0x0123_4567,
                private_data: vec![6; 136],
            }),
        ] {
            let mad = Mad { tid: 0x1122_3344_5566_7788, msg };
            assert_eq!(Mad::decode(&mad.encode()), Some(mad));
        }
    }

    #[test]
    fn what_is_no_cm_mad_is_refused() {
        let mut b = Mad { tid: 1, msg: CmMsg::Rtu(1, 2, vec![0; 224]) }.encode();
        assert!(Mad::decode(&b[..255]).is_none(), "short");
        b[16] = 0x7f;
        assert!(Mad::decode(&b).is_none(), "unknown attribute");
        b[1] = 0x81;
        assert!(Mad::decode(&b).is_none(), "another class");
    }
}
