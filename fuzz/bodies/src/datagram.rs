//! Arbitrary bytes as what arrives at a port's RoCE v2 UDP socket: a typed error, or a packet
//! that encodes again and decodes to the same packet; never a panic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use mlx5_sim::wire::{Endpoints, decode, decode_ip, encode, encode_ip};

/// The first byte picks how the rest arrives: its low bit, as a UDP payload between two IPv4
/// or two IPv6 loopback hosts, or (the next bit) as a whole IP packet.
pub fn datagram(data: &[u8]) {
    let Some((&how, rest)) = data.split_first() else { return };
    let ep = if how & 1 == 0 {
        let host = |n| IpAddr::V4(Ipv4Addr::new(127, 0, n, 1));
        Endpoints::new(host(1), host(2), Endpoints::entropy_port(0x11, 0x22))
    } else {
        Endpoints::new(IpAddr::V6(Ipv6Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST), 0xc000)
    };
    if how & 2 == 0 {
        let Ok(d) = decode(rest, &ep) else { return };
        let again = encode(&d.headers, &d.payload, &ep).map(|b| decode(&b, &ep));
        assert_eq!(again, Ok(Ok(d)), "a decoded UDP payload encodes and decodes to itself");
    } else {
        let Ok(d) = decode_ip(rest) else { return };
        let again = encode_ip(&d.headers, &d.payload, &ep).map(|b| decode_ip(&b));
        assert_eq!(again, Ok(Ok(d)), "a decoded IP packet encodes and decodes to itself");
    }
}
