//! The two headers of the C ABI's datagram rsockets (SOCK_DGRAM), with
//! `librdmacm/rsocket.c`'s layouts: the one that leads each message on a UD QP (the sender's
//! address, what `rrecvfrom` gives back), and the one that leads a message sent through the
//! sockets' UDP socket while the peer's QP is not known yet (the sender's QP number, for the
//! peer's address handle back). IPv4 only: the simulated ports have IPv4 addresses.

use std::net::{Ipv4Addr, SocketAddrV4};

/// A send slot's and a receive's size (rsocket.c's RS_SNDLOWAT): a header and the data.
pub const SLOT: usize = 2048;
/// The IPv4 datagram header's length: version 4, length, port, address.
pub const DS_HDR_LEN: usize = 8;
/// The UDP header's length for IPv4: tag, version, operation, length, reserved, QP
/// number, address.
pub const UDP_HDR_LEN: usize = 16;
/// The UDP header's tag.
const UDP_TAG: u32 = 0x5555_5555;
/// The UDP header's operation of a message with data (rsocket.c's RS_OP_DATA).
pub const OP_DATA: u8 = 0;
/// The UDP header's operation of the answer that carries the receiver's QP number
/// (rsocket.c's RS_OP_CTRL).
pub const OP_CTRL: u8 = 7;

/// The header of a message on a UD QP: where it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DsHdr(pub SocketAddrV4);

impl DsHdr {
    /// The header's bytes: version 4, the length, the port and the address (network order).
    pub fn encode(&self) -> [u8; DS_HDR_LEN] {
        let mut b = [0u8; DS_HDR_LEN];
        b[0] = 4;
        b[1] = DS_HDR_LEN as u8;
        b[2..4].copy_from_slice(&self.0.port().to_be_bytes());
        b[4..8].copy_from_slice(&self.0.ip().octets());
        b
    }

    /// The header at the start of `b`, if it is an IPv4 one (an IPv6 one is refused: the
    /// simulated ports have IPv4 addresses only).
    pub fn decode(b: &[u8]) -> Option<DsHdr> {
        if b.len() < DS_HDR_LEN || b[0] != 4 || usize::from(b[1]) != DS_HDR_LEN {
            return None;
        }
        let port = u16::from_be_bytes([b[2], b[3]]);
        Some(DsHdr(SocketAddrV4::new(Ipv4Addr::new(b[4], b[5], b[6], b[7]), port)))
    }
}

/// The header of a message through the UDP socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpHdr {
    /// [`OP_DATA`] or [`OP_CTRL`] (another is carried as it is).
    pub op: u8,
    /// The sender's QP number (24 bits).
    pub qpn: u32,
    /// The sender's QP's address.
    pub ip: Ipv4Addr,
}

impl UdpHdr {
    /// The header's bytes: the tag, version 4, the operation, the length, a reserved byte,
    /// the QP number (24 bits in 32, big-endian) and the address.
    pub fn encode(&self) -> [u8; UDP_HDR_LEN] {
        let mut b = [0u8; UDP_HDR_LEN];
        b[0..4].copy_from_slice(&UDP_TAG.to_be_bytes());
        b[4] = 4;
        b[5] = self.op;
        b[6] = UDP_HDR_LEN as u8;
        b[8..12].copy_from_slice(&(self.qpn & 0xff_ffff).to_be_bytes());
        b[12..16].copy_from_slice(&self.ip.octets());
        b
    }

    /// The header at the start of `b`, if tagged and IPv4.
    pub fn decode(b: &[u8]) -> Option<UdpHdr> {
        if b.len() < UDP_HDR_LEN || b[0..4] != UDP_TAG.to_be_bytes() || b[4] != 4 || usize::from(b[6]) != UDP_HDR_LEN {
            return None;
        }
        let qpn = u32::from_be_bytes([b[8], b[9], b[10], b[11]]) & 0xff_ffff;
        Some(UdpHdr { op: b[5], qpn, ip: Ipv4Addr::new(b[12], b[13], b[14], b[15]) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_refuse_others() {
        let a = SocketAddrV4::new(Ipv4Addr::new(127, 0, 45, 1), 7174);
        let h = DsHdr(a).encode();
        assert_eq!(h, [4, 8, 0x1c, 0x06, 127, 0, 45, 1]);
        assert_eq!(DsHdr::decode(&h), Some(DsHdr(a)));
        assert_eq!(DsHdr::decode(&[6, 24, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(DsHdr::decode(&h[..7]), None);
        let u = UdpHdr { op: OP_CTRL, qpn: 0x12_3456, ip: *a.ip() };
        let b = u.encode();
        assert_eq!(&b[..8], &[0x55, 0x55, 0x55, 0x55, 4, 7, 16, 0]);
        assert_eq!(UdpHdr::decode(&b), Some(u));
        let mut bad = b;
        bad[0] = 0;
        assert_eq!(UdpHdr::decode(&bad), None);
        assert_eq!(UdpHdr::decode(&b[..15]), None);
    }
}
