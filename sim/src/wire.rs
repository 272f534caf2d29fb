//! RoCE v2 on the wire: the bytes a NIC puts in a UDP datagram for the packets of
//! [`crate::packet`], and what wraps them.
//!
//! - [`datagram`]: the UDP payload (BTH, extended headers, payload, pad, ICRC) and the IPv4 or
//!   IPv6 and UDP headers around it, built and parsed with typed errors;
//! - [`segment`]: a message cut into path-MTU packets (FIRST/MIDDLE/LAST or ONLY);
//! - [`cm`]: the communication manager's MADs (REQ, REP, RTU, REJ, DREQ, DREP);
//! - [`rsocket`]: the rsockets protocol of the C ABI's librdmacm (private data, messages,
//!   credits);
//! - [`rsocket_dgram`]: the headers of its datagram rsockets;
//! - [`pcap`]: classic pcap files of Ethernet frames, for Wireshark and tshark.

pub mod cm;
pub mod datagram;
pub mod pcap;
pub mod rsocket;
pub mod rsocket_dgram;
pub mod segment;

pub use datagram::{Datagram, Endpoints, WireError, decode, decode_ip, encode, encode_ip, icrc};
pub use segment::{Message, MessageOp, Segment, packet_count, segments};

/// The UDP destination port of RoCE v2 (IANA).
pub const ROCE_V2_PORT: u16 = 4791;

#[cfg(test)]
mod tshark_tests;
