//! UD multicast: a datagram to QP 0xFFFFFF whose destination GID is a multicast one goes to
//! every QP attached to that group (`ibv_attach_mcast`) on this host's devices, the sender's
//! own QP too (mlx5 loops multicast back unless the QP blocks it), and, from a port that
//! shares its address with sibling processes ([`crate::fabric::share`]), to each sibling,
//! whose attached QPs take it the same way, and to the ports of other hosts that the switch's
//! table ([`crate::fabric::groups`]) lists as the group's members. The datagram travels as
//! RoCE v2 to the group's IPv4 address (the ICRC covers it), so a receiver finds the group by
//! the address whose ICRC holds among the groups its devices joined.

use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};

use mlx5_dv::Gid;

use super::{Engine, unreliable::grh_area};
use crate::fabric::{Link, QpPath};
use crate::packet::Headers;
use crate::wire::{self, Endpoints};

/// The destination QP number of a multicast datagram.
pub const MULTICAST_QPN: u32 = 0xff_ffff;

/// Whether `g` is a multicast GID: an IPv6 multicast address (ff00::/8) or the IPv4-mapped
/// form of an IPv4 multicast one (224.0.0.0/4), as the kernel's `rdma_is_multicast_addr`.
pub fn is_multicast_gid(g: &Gid) -> bool {
    let a = std::net::Ipv6Addr::from(g.0);
    a.is_multicast() || a.to_ipv4_mapped().is_some_and(|v4| v4.is_multicast())
}

impl Engine<'_> {
    /// Whether a UD destination is a multicast group: QP 0xFFFFFF and a multicast GID.
    pub(super) fn to_a_group(&self, dest: &mlx5_dv::QpDest) -> bool {
        dest.dest_qp_num == MULTICAST_QPN && is_multicast_gid(&dest.ah.dgid)
    }

    /// Send a UD datagram to multicast group `mgid` from `qp` (headers `h`, payload `data`):
    /// to the attached QPs here, then to the sibling processes of the sender's port and the
    /// members on other hosts.
    pub(super) fn send_multicast(&mut self, qp: QpPath, sgid: &Gid, mgid: &Gid, h: &Headers, data: &[u8]) {
        let sport = Endpoints::entropy_port(qp.qpn, MULTICAST_QPN);
        let members: Vec<QpPath> = (0..self.devs.len())
            .flat_map(|d| self.devs[d].multicast_members(mgid).into_iter().map(move |qpn| QpPath { dev: d, qpn }))
            .collect();
        for to in members {
            let grh = grh_area(sgid, mgid, h, data, sport);
            self.receive_ud(to, h, data, grh);
        }
        self.settle_responders();
        let Some(port) = self.fabric.net_port(qp.dev) else { return };
        let Some(group) = group_of(mgid) else { return };
        let sport = port.source_port(sport);
        let ep = Endpoints::new(IpAddr::V4(port.addr()), IpAddr::V4(group), sport);
        if let Ok(d) = wire::encode(h, data, &ep) {
            port.send_to_siblings(sport, &d);
            port.send_to_group(group, sport, &d);
        }
        if !port.is_in_memory() {
            self.capture_group(Link::ipv4(port.addr(), group, sport), h, data);
        }
    }

    /// A datagram whose ICRC did not hold for this port's address: if it holds for one of the
    /// IPv4 groups device `dev`'s QPs joined, a multicast datagram for that group, which its
    /// attached QPs take. False if it is neither (the caller counts the drop).
    pub(super) fn rx_multicast(&mut self, dev: usize, from: SocketAddrV4, bytes: &[u8]) -> bool {
        let Some(d) = self.devs.get(dev) else { return false };
        for mgid in d.multicast_groups() {
            let Some(group) = std::net::Ipv6Addr::from(mgid.0).to_ipv4_mapped() else { continue };
            let ep = Endpoints::new(IpAddr::V4(*from.ip()), IpAddr::V4(group), from.port());
            let Ok(p) = wire::decode(bytes, &ep) else { continue };
            if p.headers.bth.dest_qp != MULTICAST_QPN || p.headers.deth.is_none() {
                return false;
            }
            self.capture_group(Link::ipv4(*from.ip(), group, from.port()), &p.headers, &p.payload);
            let src = Gid(from.ip().to_ipv6_mapped().octets());
            let members = self.devs.get(dev).map(|d| d.multicast_members(&mgid)).unwrap_or_default();
            let mut taken = false;
            for qpn in members {
                let grh = grh_area(&src, &mgid, &p.headers, &p.payload, from.port());
                taken |= self.receive_ud(QpPath { dev, qpn }, &p.headers, &p.payload, grh);
            }
            self.settle_responders();
            return taken;
        }
        false
    }
}

impl Engine<'_> {
    /// A group's datagram as it went on or came off the wire, written to the capture.
    fn capture_group(&self, link: Link, h: &Headers, data: &[u8]) {
        if let Some(cap) = self.fabric.capture() {
            cap.packet(&link, h, data);
            cap.flush();
        }
    }
}

/// The IPv4 group a multicast GID names, if it is an IPv4-mapped one.
pub fn group_of(mgid: &Gid) -> Option<Ipv4Addr> {
    std::net::Ipv6Addr::from(mgid.0).to_ipv4_mapped().filter(Ipv4Addr::is_multicast)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multicast_gids_are_ipv6_multicast_or_mapped_ipv4_multicast() {
        let mapped = |a: [u8; 4]| Gid(Ipv4Addr::from(a).to_ipv6_mapped().octets());
        assert!(is_multicast_gid(&mapped([230, 0, 52, 1])));
        assert!(!is_multicast_gid(&mapped([127, 0, 52, 1])));
        let mut ib = [0u8; 16];
        ib[0] = 0xff;
        ib[1] = 0x12;
        assert!(is_multicast_gid(&Gid(ib)));
        assert!(!is_multicast_gid(&Gid::default()));
        assert_eq!(group_of(&mapped([230, 0, 52, 1])), Some(Ipv4Addr::new(230, 0, 52, 1)));
        assert_eq!(group_of(&Gid(ib)), None);
    }
}
