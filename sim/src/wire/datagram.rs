//! The RoCE v2 datagram: the UDP payload (BTH, extended headers, payload, pad to 4 bytes, and
//! the 4-byte invariant CRC) and the IPv4 or IPv6 and UDP headers it travels in.
//!
//! The ICRC is CRC-32 (the Ethernet polynomial, reflected, initial and final value all ones)
//! over a pseudo-packet, as the IBTA RoCE v2 annex (A17) defines it: 8 bytes of 0xff standing
//! for the masked LRH, then the IP and UDP headers with the fields a router may change set to
//! 1s, then the BTH with resv8a set to 1s, then the rest of the packet up to the ICRC. It is
//! appended least significant byte first, as hardware and rxe put it on the wire.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crc_fast::{CrcAlgorithm, Digest};

use super::ROCE_V2_PORT;
use crate::packet::{Headers, opcode};

const IPV4_LEN: usize = 20;
const IPV6_LEN: usize = 40;
const UDP_LEN: usize = 8;
const BTH_LEN: usize = 12;
const ICRC_LEN: usize = 4;
const IPPROTO_UDP: u8 = 17;

/// Why bytes are not a RoCE v2 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than its headers (or the lengths they state) need.
    Truncated,
    /// Not an IPv4 or IPv6 packet (the version nibble), or an IPv4 header with options.
    NotIp(u8),
    /// Not UDP (the IP protocol or IPv6 next header).
    NotUdp(u8),
    /// A UDP destination port other than RoCE v2's 4791.
    WrongPort(u16),
    /// The IPv4 header checksum does not add up.
    BadIpChecksum,
    /// The UDP checksum does not add up.
    BadUdpChecksum,
    /// The IP or UDP length disagrees with the bytes there.
    BadLength,
    /// The BTH's transport header version is not 0.
    BadVersion(u8),
    /// An opcode that is not one of the RC, UC or UD opcodes of [`opcode`] the simulator sends.
    UnsupportedOpcode(u8),
    /// The packet is not a multiple of 4 bytes, or the pad count exceeds the payload (or an
    /// opcode that carries no payload has one).
    BadPad,
    /// The ICRC on the wire is not the one the packet's bytes give.
    BadIcrc {
        /// What the bytes give.
        expected: u32,
        /// What the packet carries.
        found: u32,
    },
    /// Too long for one UDP datagram.
    TooLong,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::BadIcrc { expected, found } => write!(f, "bad ICRC {found:#010x}, expected {expected:#010x}"),
            other => write!(f, "{other:?}"),
        }
    }
}

impl std::error::Error for WireError {}

/// Who a datagram goes between, and the IP fields a sender chooses that the ICRC leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    /// Source address (the sender's GID as an address).
    pub src: IpAddr,
    /// Destination address; of the same family as `src` (an IPv4 one meeting an IPv6 one is
    /// written as its IPv4-mapped IPv6 address).
    pub dst: IpAddr,
    /// UDP source port: flow entropy ([`Endpoints::entropy_port`]).
    pub sport: u16,
    /// UDP destination port ([`ROCE_V2_PORT`]).
    pub dport: u16,
    /// IPv4 TOS or IPv6 traffic class (DSCP and ECN).
    pub tclass: u8,
    /// IPv4 TTL or IPv6 hop limit.
    pub hop_limit: u8,
    /// IPv6 flow label (20 bits; unused for IPv4).
    pub flow_label: u32,
}

impl Endpoints {
    /// Endpoints between two addresses, to the RoCE v2 port from `sport`, ECN-capable (ECT(0)),
    /// 64 hops.
    pub fn new(src: IpAddr, dst: IpAddr, sport: u16) -> Self {
        Endpoints { src, dst, sport, dport: ROCE_V2_PORT, tclass: 0x02, hop_limit: 64, flow_label: 0 }
    }

    /// A UDP source port from a connection's QP numbers, in 0xc000..=0xffff as RoCE v2 asks,
    /// so that switches spread connections over paths but keep each one on one.
    pub fn entropy_port(src_qp: u32, dst_qp: u32) -> u16 {
        let x = (src_qp & 0xff_ffff) ^ (dst_qp & 0xff_ffff).rotate_left(7);
        let folded = x ^ (x >> 14);
        0xc000 | (folded & 0x3fff) as u16
    }

    /// Both addresses as IPv4, if both are (or are IPv4-mapped); else both as IPv6.
    fn family(&self) -> Result<(Ipv4Addr, Ipv4Addr), (Ipv6Addr, Ipv6Addr)> {
        let v4 = |a: IpAddr| match a {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(a) => a.to_ipv4_mapped(),
        };
        let v6 = |a: IpAddr| match a {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        };
        match (v4(self.src), v4(self.dst)) {
            (Some(s), Some(d)) => Ok((s, d)),
            _ => Err((v6(self.src), v6(self.dst))),
        }
    }
}

/// A parsed datagram: its transport headers and payload (pad and ICRC stripped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// The transport headers (with the pad count the packet carried).
    pub headers: Headers,
    /// The payload.
    pub payload: Vec<u8>,
}

/// The ICRC of a packet: `ip` is its IPv4 or IPv6 header, `udp` its UDP header and
/// `transport` the bytes from the BTH up to (not including) the ICRC. Any input gives a value.
pub fn icrc(ip: &[u8], udp: &[u8], transport: &[u8]) -> u32 {
    let mut d = Digest::new(CrcAlgorithm::Crc32IsoHdlc);
    d.update(&[0xff; 8]);
    let mut buf = [0u8; 60];
    let n = ip.len().min(buf.len());
    buf[..n].copy_from_slice(&ip[..n]);
    // Variant fields: IPv4 TOS, TTL, checksum; IPv6 traffic class, flow label, hop limit.
    let masked: &[usize] = if ip.first().map(|b| b >> 4) == Some(6) { &[1, 2, 3, 7] } else { &[1, 8, 10, 11] };
    for &i in masked.iter().filter(|&&i| i < n) {
        buf[i] = 0xff;
    }
    if n > 0 && ip[0] >> 4 == 6 {
        buf[0] |= 0x0f;
    }
    d.update(&buf[..n]);
    let mut u = [0u8; UDP_LEN];
    let n = udp.len().min(UDP_LEN);
    u[..n].copy_from_slice(&udp[..n]);
    u[6..].fill(0xff);
    d.update(&u[..n]);
    let mut bth = [0u8; BTH_LEN];
    let n = transport.len().min(BTH_LEN);
    bth[..n].copy_from_slice(&transport[..n]);
    if n > 4 {
        bth[4] = 0xff;
    }
    d.update(&bth[..n]);
    d.update(transport.get(BTH_LEN..).unwrap_or(&[]));
    d.finalize() as u32
}

/// The IP and UDP headers for a UDP payload of `len` bytes, checksums zero.
fn ip_udp_headers(ep: &Endpoints, len: usize, out: &mut Vec<u8>) -> Result<(), WireError> {
    let udp_len = u16::try_from(UDP_LEN + len).map_err(|_| WireError::TooLong)?;
    match ep.family() {
        Ok((src, dst)) => {
            let total = u16::try_from(IPV4_LEN + UDP_LEN + len).map_err(|_| WireError::TooLong)?;
            out.extend_from_slice(&[0x45, ep.tclass]);
            out.extend_from_slice(&total.to_be_bytes());
            // Identification 0 with Don't Fragment, as RoCE NICs send.
            out.extend_from_slice(&[0, 0, 0x40, 0, ep.hop_limit, IPPROTO_UDP, 0, 0]);
            out.extend_from_slice(&src.octets());
            out.extend_from_slice(&dst.octets());
        }
        Err((src, dst)) => {
            let first = 0x6000_0000 | u32::from(ep.tclass) << 20 | (ep.flow_label & 0xf_ffff);
            out.extend_from_slice(&first.to_be_bytes());
            out.extend_from_slice(&udp_len.to_be_bytes());
            out.extend_from_slice(&[IPPROTO_UDP, ep.hop_limit]);
            out.extend_from_slice(&src.octets());
            out.extend_from_slice(&dst.octets());
        }
    }
    out.extend_from_slice(&ep.sport.to_be_bytes());
    out.extend_from_slice(&ep.dport.to_be_bytes());
    out.extend_from_slice(&udp_len.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    Ok(())
}

/// The UDP checksum of `udp` (header and payload) under the IP header `ip`.
fn udp_checksum(ip: &[u8], udp: &[u8]) -> [u8; 2] {
    let mut c = internet_checksum::Checksum::new();
    if ip[0] >> 4 == 6 {
        c.add_bytes(&ip[8..40]);
    } else {
        c.add_bytes(&ip[12..20]);
    }
    c.add_bytes(&[0, IPPROTO_UDP]);
    // The pseudo-header's length: 16 bits for IPv4, 32 for IPv6; the same sum either way.
    c.add_bytes(&(udp.len() as u16).to_be_bytes());
    c.add_bytes(udp);
    let sum = c.checksum();
    // A computed 0 goes out as all ones (0 means "none" over IPv4).
    if sum == [0, 0] { [0xff, 0xff] } else { sum }
}

/// The IP packet (IP header, UDP header, datagram) carrying a packet with these headers and
/// payload: the pad count is set from the payload's length, the ICRC and the IP and UDP
/// checksums are computed.
pub fn encode_ip(headers: &Headers, payload: &[u8], ep: &Endpoints) -> Result<Vec<u8>, WireError> {
    let mut h = *headers;
    h.bth.pad = ((4 - payload.len() % 4) % 4) as u8;
    let mut hdr = [0u8; Headers::MAX_LEN];
    let hlen = h.write(&mut hdr);
    let len = hlen + payload.len() + usize::from(h.bth.pad) + ICRC_LEN;
    let mut out = Vec::with_capacity(IPV6_LEN + UDP_LEN + len);
    ip_udp_headers(ep, len, &mut out)?;
    let ip_len = out.len() - UDP_LEN;
    let start = out.len();
    out.extend_from_slice(&hdr[..hlen]);
    out.extend_from_slice(payload);
    out.resize(out.len() + usize::from(h.bth.pad), 0);
    let crc = icrc(&out[..ip_len], &out[ip_len..start], &out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    if ip_len == IPV4_LEN {
        let sum = internet_checksum::checksum(&out[..IPV4_LEN]);
        out[10..12].copy_from_slice(&sum);
    }
    let sum = udp_checksum(&out[..ip_len], &out[ip_len..]);
    out[ip_len + 6..ip_len + 8].copy_from_slice(&sum);
    Ok(out)
}

/// The UDP payload a RoCE v2 NIC sends for a packet with these headers and payload (see
/// [`encode_ip`]; the ICRC covers the IP and UDP headers `ep` gives).
pub fn encode(headers: &Headers, payload: &[u8], ep: &Endpoints) -> Result<Vec<u8>, WireError> {
    let mut ip = encode_ip(headers, payload, ep)?;
    let skip = if ip[0] >> 4 == 6 { IPV6_LEN } else { IPV4_LEN } + UDP_LEN;
    ip.drain(..skip);
    Ok(ip)
}

/// Parse a UDP payload received between `ep`'s endpoints (its IP and UDP headers are rebuilt
/// from them for the ICRC).
pub fn decode(datagram: &[u8], ep: &Endpoints) -> Result<Datagram, WireError> {
    let mut hdrs = Vec::with_capacity(IPV6_LEN + UDP_LEN);
    ip_udp_headers(ep, datagram.len(), &mut hdrs)?;
    let ip_len = hdrs.len() - UDP_LEN;
    transport(&hdrs[..ip_len], &hdrs[ip_len..], datagram)
}

/// Parse an IP packet: IPv4 (without options) or IPv6 (without extension headers), UDP to
/// port 4791, checksums, then the datagram as [`decode`] does.
pub fn decode_ip(packet: &[u8]) -> Result<Datagram, WireError> {
    let first = *packet.first().ok_or(WireError::Truncated)?;
    let (ip_len, proto, ip_total) = match first >> 4 {
        4 => {
            let ip = packet.get(..IPV4_LEN).ok_or(WireError::Truncated)?;
            if first & 0xf != 5 {
                return Err(WireError::NotIp(first));
            }
            if internet_checksum::checksum(ip) != [0, 0] {
                return Err(WireError::BadIpChecksum);
            }
            (IPV4_LEN, ip[9], usize::from(u16::from_be_bytes([ip[2], ip[3]])))
        }
        6 => {
            let ip = packet.get(..IPV6_LEN).ok_or(WireError::Truncated)?;
            (IPV6_LEN, ip[6], IPV6_LEN + usize::from(u16::from_be_bytes([ip[4], ip[5]])))
        }
        _ => return Err(WireError::NotIp(first)),
    };
    if proto != IPPROTO_UDP {
        return Err(WireError::NotUdp(proto));
    }
    let packet = packet.get(..ip_total).ok_or(WireError::Truncated)?;
    let udp = packet.get(ip_len..ip_len + UDP_LEN).ok_or(WireError::BadLength)?;
    let dport = u16::from_be_bytes([udp[2], udp[3]]);
    if dport != ROCE_V2_PORT {
        return Err(WireError::WrongPort(dport));
    }
    if usize::from(u16::from_be_bytes([udp[4], udp[5]])) != packet.len() - ip_len {
        return Err(WireError::BadLength);
    }
    let zero_ok = ip_len == IPV4_LEN && udp[6..8] == [0, 0];
    if !zero_ok {
        let mut whole = packet[ip_len..].to_vec();
        whole[6..8].fill(0);
        if udp_checksum(&packet[..ip_len], &whole) != [udp[6], udp[7]] {
            return Err(WireError::BadUdpChecksum);
        }
    }
    transport(&packet[..ip_len], udp, &packet[ip_len + UDP_LEN..])
}

/// Whether an opcode is one of the RC opcodes this simulator speaks.
fn known(op: u8) -> bool {
    op <= opcode::FETCH_ADD
        || op == opcode::SEND_LAST_INV
        || op == opcode::SEND_ONLY_INV
        || (opcode::UC..=opcode::UC + opcode::WRITE_ONLY_IMM).contains(&op)
        || matches!(op, opcode::UD_SEND_ONLY | opcode::UD_SEND_ONLY_IMM)
        || ((opcode::XRC..crate::packet::DC_OPCODES).contains(&op)
            && known(op & !opcode::XRC)
            && op & !opcode::XRC <= opcode::SEND_ONLY_INV)
        || (op >= crate::packet::DC_OPCODES
            && known(op & !crate::packet::DC_OPCODES)
            && op & !crate::packet::DC_OPCODES <= opcode::SEND_ONLY_INV)
}

/// Check and parse the bytes from the BTH to the ICRC.
fn transport(ip: &[u8], udp: &[u8], t: &[u8]) -> Result<Datagram, WireError> {
    if t.len() < BTH_LEN + ICRC_LEN {
        return Err(WireError::Truncated);
    }
    if !t.len().is_multiple_of(4) {
        return Err(WireError::BadPad);
    }
    let (body, crc) = t.split_at(t.len() - ICRC_LEN);
    let found = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let expected = icrc(ip, udp, body);
    if found != expected {
        return Err(WireError::BadIcrc { expected, found });
    }
    let tver = body[1] & 0xf;
    if tver != 0 {
        return Err(WireError::BadVersion(tver));
    }
    if !known(body[0]) {
        return Err(WireError::UnsupportedOpcode(body[0]));
    }
    let (headers, at) = Headers::decode(body).ok_or(WireError::Truncated)?;
    let rest = &body[at..];
    let pad = usize::from(headers.bth.pad);
    let no_payload = matches!(
        headers.bth.opcode,
        opcode::READ_REQUEST
            | opcode::ACKNOWLEDGE
            | opcode::ATOMIC_ACKNOWLEDGE
            | opcode::COMPARE_SWAP
            | opcode::FETCH_ADD
    );
    if pad > rest.len() || (no_payload && !rest.is_empty()) {
        return Err(WireError::BadPad);
    }
    Ok(Datagram { headers, payload: rest[..rest.len() - pad].to_vec() })
}

#[cfg(test)]
#[path = "datagram_tests.rs"]
mod tests;
