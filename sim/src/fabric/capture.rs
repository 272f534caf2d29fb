//! A pcap capture of the fabric's traffic ([`crate::Simulator::capture_to`]): every request
//! and answer as the RoCE v2 packets it is on the wire, in Ethernet frames.
//!
//! Addresses: a port's GID is its IP address (an IPv4-mapped GID, `::ffff:a.b.c.d`, gives
//! IPv4). Its MAC is the one the GID's EUI-64 was made from (the interface identifier with
//! ff:fe in its middle and the universal/local bit flipped back), else 02:00 and the GID's
//! last four bytes. An InfiniBand port has no IP address: its traffic is not captured.

use std::fs::File;
use std::io::{self, BufWriter};
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;
use std::sync::{Arc, Mutex};

use mlx5_dv::{Gid, PortAttr, link_layer};

use crate::packet::Headers;
use crate::wire::pcap::PcapWriter;
use crate::wire::{Endpoints, Message, encode_ip, segments};

/// A capture file the fabric writes to; clones (of a cloned simulator) share it.
#[derive(Debug, Clone)]
pub struct Capture {
    out: Arc<Mutex<PcapWriter<BufWriter<File>>>>,
}

/// Where a packet goes between: its IP endpoints and MACs.
#[derive(Debug, Clone, Copy)]
pub struct Link {
    ep: Endpoints,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
}

impl Link {
    /// From port `src` (QP `src_qp`) to port `dst` (QP `dst_qp`); `None` unless both ports
    /// are RoCE.
    pub fn between(src: &PortAttr, src_qp: u32, dst: &PortAttr, dst_qp: u32) -> Option<Link> {
        if src.link_layer != link_layer::ETHERNET || dst.link_layer != link_layer::ETHERNET {
            return None;
        }
        let sport = Endpoints::entropy_port(src_qp, dst_qp);
        let ep = Endpoints::new(ip_of(&src.gid), ip_of(&dst.gid), sport);
        Some(Link { ep, src_mac: mac_of(&src.gid), dst_mac: mac_of(&dst.gid) })
    }
}

impl Link {
    /// The same link from UDP source port `sport` (a QP's `mlx5dv_modify_qp_udp_sport`)
    /// instead of the entropy port, when there is one.
    pub fn from_port(mut self, sport: Option<u16>) -> Link {
        if let Some(p) = sport {
            self.ep.sport = p;
        }
        self
    }

    /// Between two networked ports' IPv4 addresses (their MACs made from them), from UDP
    /// source port `sport`.
    pub fn ipv4(src: std::net::Ipv4Addr, dst: std::net::Ipv4Addr, sport: u16) -> Link {
        let ep = Endpoints::new(IpAddr::V4(src), IpAddr::V4(dst), sport);
        Link { ep, src_mac: super::net::mac_of_ip(src), dst_mac: super::net::mac_of_ip(dst) }
    }
}

/// A GID as an IP address: IPv4 when it is IPv4-mapped.
pub fn ip_of(gid: &Gid) -> IpAddr {
    let a = Ipv6Addr::from(gid.0);
    a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4)
}

/// The MAC of a port with this GID (see the module's comment).
pub fn mac_of(gid: &Gid) -> [u8; 6] {
    let g = &gid.0;
    if g[11] == 0xff && g[12] == 0xfe {
        [g[8] ^ 0x02, g[9], g[10], g[13], g[14], g[15]]
    } else {
        [0x02, 0, g[12], g[13], g[14], g[15]]
    }
}

impl Capture {
    /// Start a capture in a new file at `path` (truncating one that is there).
    pub fn create(path: &Path) -> io::Result<Self> {
        let mut w = PcapWriter::new(BufWriter::new(File::create(path)?))?;
        w.flush()?;
        Ok(Capture { out: Arc::new(Mutex::new(w)) })
    }

    /// Write one packet. Write errors are dropped: a capture never changes what the
    /// simulated devices do.
    pub fn packet(&self, link: &Link, headers: &Headers, payload: &[u8]) {
        let Ok(ip) = encode_ip(headers, payload, &link.ep) else { return };
        let mut w = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let _ = w.write_ip(link.src_mac, link.dst_mac, &ip);
    }

    /// Write a message as its path-MTU packets; `data` holds its `m.len` bytes.
    pub fn message(&self, link: &Link, m: &Message, data: &[u8]) {
        self.message_on(link, m, data, None);
    }

    /// [`Capture::message`] on the transport `xrc` says ([`Headers::xrc`]).
    pub fn message_on(&self, link: &Link, m: &Message, data: &[u8], xrc: Option<u32>) {
        for s in segments(m) {
            let h = Headers { xrc, ..s.headers };
            self.packet(link, &h, data.get(s.range).unwrap_or(&[]));
        }
    }

    /// Flush what is written to the file: after each exchange, since a process-wide
    /// simulator (the C ABI's) is never dropped.
    pub fn flush(&self) {
        let mut w = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let _ = w.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_macs_come_from_the_gid() -> Result<(), Box<dyn std::error::Error>> {
        let g = Gid::link_local(0x0c42_a1ff_fe01_0203);
        assert_eq!(ip_of(&g), "fe80::c42:a1ff:fe01:203".parse::<IpAddr>()?);
        assert_eq!(mac_of(&g), [0x0e, 0x42, 0xa1, 0x01, 0x02, 0x03]);
        let mut v4 = [0u8; 16];
        v4[10..].copy_from_slice(&[0xff, 0xff, 127, 0, 1, 1]);
        assert_eq!(ip_of(&Gid(v4)), "127.0.1.1".parse::<IpAddr>()?);
        assert_eq!(mac_of(&Gid(v4)), [0x02, 0, 127, 0, 1, 1]);
        // The modified EUI-64 round trip, for a universal MAC (U/L bit clear) and a local one.
        for mac in [[0x0c, 0x42, 0xa1, 0x01, 0x02, 0x03], [0x02, 0, 127, 0, 1, 1]] {
            assert_eq!(mac_of(&super::super::net::link_local_of_mac(mac)), mac);
        }
        Ok(())
    }

    #[test]
    fn only_roce_ports_have_a_link() {
        let roce = PortAttr { link_layer: link_layer::ETHERNET, ..PortAttr::default() };
        let ib = PortAttr { link_layer: link_layer::INFINIBAND, ..PortAttr::default() };
        assert!(Link::between(&roce, 1, &roce, 2).is_some());
        assert!(Link::between(&roce, 1, &ib, 2).is_none());
        assert!(Link::between(&ib, 1, &roce, 2).is_none());
        assert!(Link::between(&ib, 1, &ib, 2).is_none());
    }
}
