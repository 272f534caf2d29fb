//! The fabric: each device's port has an address (a LID and GID 0), and a path names its
//! responder by that address and a QP number, as `ibv_modify_qp` to RTR does. A requester
//! hands each request to the fabric, which delivers it by (GID or LID, QPN) to the
//! responder's device ([`Fabric::deliver`]); devices never name each other directly. In one
//! process delivery is deterministic and immediate. A networked fabric ([`Fabric::connect`])
//! also gives each port a UDP socket on an IP address of its own ([`net`]), and a path whose
//! address no port here has is carried to another process as RoCE v2. A fabric of packets in
//! memory ([`Fabric::connect_in_memory`]) carries the traffic between this host's own devices
//! as the same RoCE v2 packets, in simulated time, so that network fault rules act on it.

use mlx5_dv::profile::{LinkLayer, Profile};
use mlx5_dv::{AhAttr, Gid, PortAttr, QpDest, link_layer, port_state};

pub mod capture;
pub mod faults;
pub mod groups;
mod gsi;
pub mod net;
pub mod share;

pub use capture::{Capture, Link};
pub use faults::{NetAction, NetFault};
pub use net::NetPort;

/// A QP on this host's fabric: the device it is on and its number there (the responder an
/// RTR path names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct QpPath {
    /// The responder's device.
    pub dev: usize,
    /// The responder's QP number.
    pub qpn: u32,
}

/// The ports of the simulated host's mlx5 devices, one port per device.
#[derive(Debug, Clone)]
pub struct Fabric {
    ports: Vec<PortAttr>,
    host: u32,
    /// Where the traffic is captured, if anywhere.
    capture: Option<Capture>,
    /// The ports' sockets, once networked (one per RoCE port, in device order).
    net: std::sync::Arc<Vec<NetPort>>,
    /// The clock of the transport's timers.
    clock: Clock,
}

/// The transport's clock, in nanoseconds.
#[derive(Debug, Clone, Default)]
enum Clock {
    /// Off the network: always 0.
    #[default]
    Stopped,
    /// Since the network was joined.
    Wall(std::time::Instant),
    /// Simulated time: it moves only when told to ([`Fabric::advance_clock`]); shared by a
    /// simulator's clones as its ports are.
    Simulated(std::sync::Arc<std::sync::atomic::AtomicU64>),
}

/// The node GUID of device `dev` of host `host`: the profile's GUID plus the device's index on
/// host 0; on another host the low 24 bits (the NIC-specific half of the MAC the GUID is made
/// from) are the host number times four plus the device index, so the GUIDs, and the
/// link-local GIDs made from them, of two hosts differ for their first four devices.
pub fn node_guid(base: u64, host: u32, dev: u16) -> u64 {
    if host == 0 {
        return base.wrapping_add(u64::from(dev));
    }
    let nic = (u64::from(host) << 2).wrapping_add(u64::from(dev)) & 0xff_ffff;
    (base & !0xff_ffff) | nic
}

/// The LID of device `dev` of host `host`: counted up from 1 on host 0; elsewhere spread over
/// the unicast LIDs (1 to 0xbfff) by host.
pub fn lid(host: u32, dev: u16) -> u16 {
    let n = (u64::from(host) << 2).wrapping_add(u64::from(dev)) % 0xbfff;
    if host == 0 { dev + 1 } else { 1 + n as u16 }
}

impl Fabric {
    /// The ports of a profile's devices, then the VFIO function's, on host `host` (24 bits):
    /// GUIDs from [`node_guid`], LIDs from [`lid`].
    pub fn new(profile: &Profile, host: u32) -> Self {
        let d = &profile.device;
        let host = host & 0xff_ffff;
        let n = u16::from(d.count.max(1)) + u16::from(d.vfio_pci_name.is_some());
        let ports = (0..n)
            .map(|i| {
                let (layer, lid, gid) = match d.link_layer {
                    LinkLayer::Ethernet => (link_layer::ETHERNET, 0, Gid::link_local(node_guid(d.node_guid, host, i))),
                    LinkLayer::Infiniband => (link_layer::INFINIBAND, lid(host, i), Gid::default()),
                };
                PortAttr { state: port_state::ACTIVE, active_mtu: d.active_mtu, lid, link_layer: layer, gid }
            })
            .collect();
        Fabric { ports, host, capture: None, net: Default::default(), clock: Clock::Stopped }
    }

    /// Join the IP network: port `i` gets the address `first + i` and a UDP socket on its
    /// port 4791, and GID 0 becomes the link-local GID of the MAC made from that address
    /// (see [`net`]). InfiniBand ports stay off the network. A bind that fails (the address
    /// is taken or not configured) fails the whole, and no port is networked; so does a
    /// fabric on a network already (of sockets or in memory).
    pub fn connect(&mut self, first: std::net::Ipv4Addr) -> std::io::Result<()> {
        if !self.net.is_empty() {
            return Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, "the ports are on a network already"));
        }
        let roce = self.ports.iter().take_while(|p| p.link_layer == link_layer::ETHERNET).count();
        let addrs = net::addresses(first, roce).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{first} leaves no address for {roce} ports"))
        })?;
        let bound = addrs
            .iter()
            .map(|&a| NetPort::bind(a).map_err(|e| std::io::Error::new(e.kind(), format!("binding {a}:4791: {e}"))))
            .collect::<std::io::Result<Vec<_>>>()?;
        for (p, n) in self.ports.iter_mut().zip(&bound) {
            p.gid = net::link_local_of_mac(net::mac_of_ip(n.addr()));
        }
        // For the processes this one forks, which share its ports' addresses.
        let bound = match share::Siblings::new().map(std::sync::Arc::new) {
            Some(t) => bound.into_iter().map(|n| n.with_siblings(t.clone())).collect(),
            None => bound,
        };
        self.net = std::sync::Arc::new(bound);
        self.clock = Clock::Wall(std::time::Instant::now());
        Ok(())
    }

    /// Let the networked ports find the members of multicast groups on other hosts in the
    /// switch's table `t` ([`groups`]); no effect on ports in memory.
    pub fn use_multicast_table(&self, t: &groups::GroupTable) {
        self.net.iter().for_each(|p| p.use_groups(t.clone()));
    }

    /// Carry the traffic between this host's RoCE ports as RoCE v2 packets queued in memory
    /// (port `i` at `first + i`, an address only the queues know), timed by a simulated clock
    /// (`simulated`) or the wall clock. The ports keep their GIDs, and paths already set up
    /// keep working: a path to a port here now goes through the transport, which
    /// [`NetPort::add_fault`]'s rules act on. No effect on a fabric already networked.
    pub fn connect_in_memory(&mut self, first: std::net::Ipv4Addr, simulated: bool) {
        if !self.net.is_empty() {
            return;
        }
        let roce = self.ports.iter().take_while(|p| p.link_layer == link_layer::ETHERNET).count();
        let net = std::sync::Arc::new(net::MemoryNet::default());
        let addrs = net::addresses(first, roce).unwrap_or_default();
        self.net = std::sync::Arc::new(addrs.into_iter().map(|a| NetPort::in_memory(a, net.clone())).collect());
        self.clock =
            if simulated { Clock::Simulated(Default::default()) } else { Clock::Wall(std::time::Instant::now()) };
    }

    /// In a child after `fork`: each networked port takes a socket of its own and shares its
    /// address with the other children of the process ([`share`]); what this process sends
    /// to one of its own addresses then goes over the network too, to every sibling.
    pub fn share_after_fork(&self) -> std::io::Result<()> {
        self.net.iter().try_for_each(NetPort::share)
    }

    /// Whether the traffic to device `dev`'s port goes through the transport even from a port
    /// here: the port is in memory, or shares its address with sibling processes.
    fn through_transport(&self, dev: usize) -> bool {
        self.net.get(dev).is_some_and(|n| n.is_in_memory() || n.is_shared())
    }

    /// Whether the traffic between this host's ports travels as packets in memory.
    pub fn is_in_memory(&self) -> bool {
        self.net.first().is_some_and(NetPort::is_in_memory)
    }

    /// Whether the transport's clock is simulated (moved by [`Fabric::advance_clock`]).
    pub fn is_simulated_time(&self) -> bool {
        matches!(self.clock, Clock::Simulated(_))
    }

    /// From now on the transport's timers follow the wall clock (a device thread runs them).
    pub fn use_wall_clock(&mut self) {
        if matches!(self.clock, Clock::Simulated(_)) {
            self.clock = Clock::Wall(std::time::Instant::now());
        }
    }

    /// Move a simulated clock forward to `ns` (never back); no effect on another clock.
    pub fn advance_clock(&self, ns: u64) {
        if let Clock::Simulated(c) = &self.clock {
            c.fetch_max(ns, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// When the next datagram a fault rule delayed is due, at any port.
    pub fn next_delayed(&self) -> Option<u64> {
        self.net.iter().filter_map(NetPort::next_delayed).min()
    }

    /// A port on an IP network of sockets (not in memory).
    fn on_ip(&self, dev: usize) -> Option<&NetPort> {
        self.net.get(dev).filter(|n| !n.is_in_memory())
    }

    /// Port `dev`'s socket, when networked.
    pub fn net_port(&self, dev: usize) -> Option<&NetPort> {
        self.net.get(dev)
    }

    /// The networked ports' sockets, in device order.
    pub fn net_ports(&self) -> &[NetPort] {
        &self.net
    }

    /// Send the networked ports' delayed datagrams whose time has come (fault rules'
    /// [`NetAction::Delay`]): how many.
    pub fn release_delayed(&self) -> usize {
        let now = self.now_ns();
        self.net.iter().map(|p| p.release_delayed(now)).sum()
    }

    /// The transport's clock, in ns: since the network was joined, or simulated time (0 off
    /// the network).
    pub fn now_ns(&self) -> u64 {
        match &self.clock {
            Clock::Stopped => 0,
            Clock::Wall(e) => u64::try_from(e.elapsed().as_nanos()).unwrap_or(u64::MAX),
            Clock::Simulated(c) => c.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Port 1's GID table of device `dev`, each entry with its `ibv_gid_type`: on the network
    /// what an mlx5 port with an IPv4 address shows; otherwise GID 0 as RoCE v1 and v2 (or
    /// as the one InfiniBand GID).
    pub fn gid_table(&self, dev: usize) -> Vec<(Gid, u32)> {
        if let Some(n) = self.on_ip(dev) {
            return n.gid_table().to_vec();
        }
        match self.ports.get(dev) {
            Some(p) if p.link_layer == link_layer::ETHERNET => {
                vec![(p.gid, net::GID_TYPE_ROCE_V1), (p.gid, net::GID_TYPE_ROCE_V2)]
            }
            Some(p) => vec![(p.gid, 0)],
            None => Vec::new(),
        }
    }

    /// The address of the peer a RoCE path names, when no port here has it and the
    /// requester's port is networked: the IPv4 address its GID names (either kind). On a
    /// fabric in memory: the address of the port here the GID names.
    pub fn remote(&self, from: usize, ah: &AhAttr) -> Option<std::net::Ipv4Addr> {
        let port = self.net.get(from)?;
        if !ah.is_global {
            return None;
        }
        if port.is_in_memory() {
            return self.route(ah).and_then(|dev| self.net.get(dev)).map(NetPort::addr);
        }
        if let Some(dev) = self.route(ah) {
            return self.net.get(dev).filter(|n| n.is_shared()).map(NetPort::addr);
        }
        net::ip_of_gid(&ah.dgid).filter(|&a| port.may_reach(a))
    }

    /// The host number the ports were made for.
    pub fn host(&self) -> u32 {
        self.host
    }

    /// Capture the traffic to `capture` from now on (`None`: stop; the file is complete
    /// up to the last exchange either way).
    pub fn set_capture(&mut self, capture: Option<Capture>) {
        self.capture = capture;
    }

    /// The capture the traffic goes to, if any.
    pub fn capture(&self) -> Option<&Capture> {
        self.capture.as_ref()
    }

    /// Port 1 of device `dev` goes to `state`; false for a device without a port here.
    pub fn set_port_state(&mut self, dev: usize, state: u32) -> bool {
        self.ports.get_mut(dev).map(|p| p.state = state).is_some()
    }

    /// Port 1 of device `dev`.
    pub fn port(&self, dev: usize) -> Option<&PortAttr> {
        self.ports.get(dev)
    }

    /// The responder a request on an RTR path reaches directly: the device whose port the
    /// address names, and the QP number on it (which may name no QP). `None` for a port whose
    /// traffic travels as packets in memory.
    pub fn deliver(&self, to: &QpDest) -> Option<QpPath> {
        let dev = self.route(&to.ah)?;
        if self.through_transport(dev) {
            return None;
        }
        Some(QpPath { dev, qpn: to.dest_qp_num })
    }

    /// The device whose port an address names: by GID on RoCE, by LID on InfiniBand.
    pub fn route(&self, ah: &AhAttr) -> Option<usize> {
        self.ports.iter().enumerate().position(|(i, p)| match p.link_layer {
            link_layer::ETHERNET => {
                ah.is_global
                    && (ah.dgid == p.gid
                        || self.on_ip(i).is_some_and(|n| n.gid_table().iter().any(|(g, _)| *g == ah.dgid)))
            }
            _ => !ah.is_global && ah.dlid == p.lid,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ShippedProfiles;

    #[test]
    fn node_guids_of_other_hosts_carry_the_host_times_four_plus_the_device() {
        let base = 0x0c42_a103_00ab_cdef;
        assert_eq!(node_guid(base, 0, 2), base + 2);
        assert_eq!(node_guid(base, 5, 1), 0x0c42_a103_0000_0015);
        let guids: std::collections::BTreeSet<u64> =
            (1..=2).flat_map(|h| (0..4).map(move |d| node_guid(base, h, d))).collect();
        assert_eq!(guids.len(), 8, "hosts 1 and 2 share no GUID among their first four devices");
    }

    #[test]
    fn port_states_and_the_clock_change_as_asked() -> Result<(), Box<dyn std::error::Error>> {
        let mut f = Fabric::new(&Profile::builtin("cx6dx")?, 0);
        assert!(f.set_port_state(1, 1), "device 1 has a port");
        assert_eq!(f.port(1).map(|p| p.state), Some(1));
        assert!(!f.set_port_state(9, 1), "no device 9");
        // A stepped fabric in memory runs on a simulated clock until a device thread takes over.
        assert!(!f.is_in_memory(), "not networked yet");
        f.connect_in_memory(std::net::Ipv4Addr::new(127, 0, 74, 1), true);
        assert!(f.is_in_memory());
        assert!(f.is_simulated_time());
        // A datagram a delay rule holds makes the fabric's next due time.
        assert_eq!(f.next_delayed(), None);
        let port = f.net_port(0).ok_or("a port in memory")?;
        port.add_fault(faults::NetFault::new(faults::NetAction::Delay { ns: 40 }));
        port.send(crate::wire::ROCE_V2_PORT, std::net::Ipv4Addr::new(127, 0, 74, 2), b"held", 2);
        assert_eq!(f.next_delayed(), Some(42));
        f.use_wall_clock();
        assert!(!f.is_simulated_time());
        Ok(())
    }

    #[test]
    fn roce_routes_by_gid_and_infiniband_by_lid() -> Result<(), crate::ProfileError> {
        let mut p = Profile::builtin("cx6dx")?;
        let roce = Fabric::new(&p, 0);
        let (a, b) = (roce.port(0).copied().unwrap_or_default(), roce.port(1).copied().unwrap_or_default());
        assert_eq!(a.gid, Gid::link_local(p.device.node_guid));
        assert_ne!(a.gid, b.gid);
        let to_b = AhAttr { is_global: true, dgid: b.gid, ..AhAttr::default() };
        assert_eq!(roce.route(&to_b), Some(1));
        assert_eq!(roce.route(&AhAttr { is_global: false, ..to_b }), None, "RoCE needs a GRH");
        let dest = QpDest { dest_qp_num: 0x42, ah: to_b, path_mtu: 5 };
        assert_eq!(roce.deliver(&dest), Some(QpPath { dev: 1, qpn: 0x42 }), "by (GID, QPN)");
        p.device.link_layer = LinkLayer::Infiniband;
        let ib = Fabric::new(&p, 0);
        assert_eq!(ib.port(1).map(|p| (p.lid, p.link_layer)), Some((2, link_layer::INFINIBAND)));
        assert_eq!(ib.route(&AhAttr { dlid: 2, ..AhAttr::default() }), Some(1));
        assert_eq!(ib.route(&AhAttr { dlid: 9, ..AhAttr::default() }), None);
        // A RoCE port shows its GID as RoCE v1 and v2; an InfiniBand port its one GID.
        let types = |f: &Fabric| f.gid_table(0).iter().map(|g| g.1).collect::<Vec<_>>();
        assert_eq!(types(&roce), [net::GID_TYPE_ROCE_V1, net::GID_TYPE_ROCE_V2]);
        assert_eq!(types(&ib), [0]);
        Ok(())
    }

    #[test]
    fn lids_count_up_on_host_0_and_spread_by_host_elsewhere() -> Result<(), crate::ProfileError> {
        assert_eq!((lid(0, 0), lid(0, 1)), (1, 2));
        assert_eq!(lid(5, 1), 1 + 5 * 4 + 1);
        // Past the unicast range the count wraps: host 0x3000 is 0xc000 modulo 0xbfff, 1.
        assert_eq!(lid(0x3000, 0), 2);
        assert!((1..=0xbfff).contains(&lid(0xff_ffff, 3)));
        let mut p = Profile::builtin("cx6dx")?;
        p.device.link_layer = LinkLayer::Infiniband;
        let f = Fabric::new(&p, 7);
        assert_eq!(f.host(), 7);
        assert_eq!(f.port(1).map(|p| p.lid), Some(lid(7, 1)));
        Ok(())
    }
}
