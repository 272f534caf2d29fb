//! Ports on an IP network: each port of a networked simulator owns a UDP socket on port 4791
//! of an IPv4 address of its own, and carries RoCE v2 to and from other processes.
//!
//! Addresses and what follows from them:
//! - device `i` of a host whose first address is `a` has address `a + i`;
//! - its MAC is `02:00` followed by the address's four bytes, so that a RoCE v1 link-local
//!   GID (made from the MAC as a netdev's IPv6 link-local address is) names the address too;
//! - its GID table is what an mlx5 port with that IPv4 address shows: the link-local GID as
//!   RoCE v1 and v2, then the IPv4-mapped GID as RoCE v1 and v2.
//!
//! A destination GID of either kind resolves to the address it names; RoCE v1 traffic is
//! carried on the same UDP sockets as RoCE v2 (there is no raw Ethernet here). Destinations
//! outside 127.0.0.0/8 are refused when the port's own address is a loopback one.
//!
//! A port may instead be a queue in memory ([`NetPort::in_memory`], [`MemoryNet`]): the same
//! datagrams, between the ports of one simulator, with no socket.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Mutex;

use mlx5_dv::Gid;

use super::faults::{FaultState, NetFault, Outgoing};
use crate::wire::ROCE_V2_PORT;

/// `IBV_GID_TYPE_ROCE_V1` (`enum ibv_gid_type`): the link-local and the v1 IPv4-mapped entries.
pub const GID_TYPE_ROCE_V1: u32 = 1;
/// `IBV_GID_TYPE_ROCE_V2`.
pub const GID_TYPE_ROCE_V2: u32 = 2;

/// The largest datagram a port takes: a 4096-byte MTU's packet with every header.
pub const MAX_DATAGRAM: usize = 4096 + 128;

/// A networked port: its address, how its datagrams travel, and the fault rules on what it
/// sends.
#[derive(Debug)]
pub struct NetPort {
    addr: Ipv4Addr,
    link: PortLink,
    faults: Mutex<FaultState>,
    /// A fault rule was added: what is sent goes through the rules (and may be held back).
    faulty: std::sync::atomic::AtomicBool,
    /// A datagram went out or came in: the port is in use.
    used: std::sync::atomic::AtomicBool,
    /// MADs that came to QP 1 (the GSI), with their senders, for the connection manager.
    gsi: Mutex<VecDeque<(Ipv4Addr, Vec<u8>)>>,
    /// The table of the processes forked from the one that joined the network.
    siblings: Option<std::sync::Arc<super::share::Siblings>>,
    /// This process is a child sharing the address with its siblings ([`NetPort::share`]).
    shared: std::sync::atomic::AtomicBool,
    /// The UDP port the socket is bound to (4791 unless shared).
    own_port: std::sync::atomic::AtomicU16,
    /// The switch's multicast table, if the network has one ([`NetPort::use_groups`]).
    groups: std::sync::OnceLock<super::groups::GroupTable>,
    /// The IPv4 groups this port is entered in there.
    joined: Mutex<BTreeSet<Ipv4Addr>>,
}

/// How a port's datagrams travel.
#[derive(Debug)]
enum PortLink {
    /// A UDP socket on port 4791, and the sockets it sends from (one per UDP source port a
    /// connection's QPs choose).
    Udp { socket: UdpSocket, senders: Mutex<BTreeMap<u16, UdpSocket>> },
    /// Queues in memory shared by the ports of one network.
    Memory(std::sync::Arc<MemoryNet>),
}

/// Datagrams in memory between ports, by destination address, in the order they were sent:
/// a network with no socket, for a simulator run in simulated time.
#[derive(Debug, Default)]
pub struct MemoryNet {
    queues: Mutex<Queues>,
}

/// Each port's waiting datagrams (sender, bytes), by its address.
type Queues = BTreeMap<Ipv4Addr, VecDeque<(SocketAddrV4, Vec<u8>)>>;

impl MemoryNet {
    fn queues(&self) -> std::sync::MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether any datagram waits at any port.
    pub fn is_empty(&self) -> bool {
        self.queues().values().all(VecDeque::is_empty)
    }
}

/// The socket buffer a port asks for (the kernel grants up to `net.core.rmem_max`).
const SOCKET_BUFFER: libc::c_int = 8 << 20;

/// Ask for a socket buffer of `bytes` (`SO_RCVBUF` or `SO_SNDBUF`): past the system's limit
/// where the process may (`SO_*BUFFORCE` needs CAP_NET_ADMIN), else as large as the limit
/// allows; a refusal leaves the default.
fn set_buffer(socket: &UdpSocket, option: libc::c_int, bytes: libc::c_int) {
    let force = if option == libc::SO_RCVBUF { libc::SO_RCVBUFFORCE } else { libc::SO_SNDBUFFORCE };
    let len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let set = |opt| {
        // SAFETY: a socket of ours and a c_int option value on the stack, with its length.
        unsafe { libc::setsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, opt, std::ptr::from_ref(&bytes).cast(), len) }
    };
    if set(force) != 0 {
        set(option);
    }
}

/// The MAC of the port with IPv4 address `a` (see the module's comment).
pub fn mac_of_ip(a: Ipv4Addr) -> [u8; 6] {
    let o = a.octets();
    [0x02, 0x00, o[0], o[1], o[2], o[3]]
}

/// The link-local GID made from a MAC (modified EUI-64: the U/L bit flipped, ff:fe inserted).
pub fn link_local_of_mac(mac: [u8; 6]) -> Gid {
    let mut g = [0u8; 16];
    g[0] = 0xfe;
    g[1] = 0x80;
    g[8..11].copy_from_slice(&[mac[0] ^ 0x02, mac[1], mac[2]]);
    g[11] = 0xff;
    g[12] = 0xfe;
    g[13..16].copy_from_slice(&mac[3..6]);
    Gid(g)
}

/// The IPv4-mapped GID of an address.
pub fn mapped_gid(a: Ipv4Addr) -> Gid {
    Gid(a.to_ipv6_mapped().octets())
}

/// The IPv4 address a GID names, by either rule of the module's comment; `None` for a GID
/// that names none (an IPv6 address not made from one of our MACs).
pub fn ip_of_gid(g: &Gid) -> Option<Ipv4Addr> {
    let b = &g.0;
    if let Some(a) = std::net::Ipv6Addr::from(*b).to_ipv4_mapped() {
        return Some(a);
    }
    let link_local = b[0] == 0xfe && b[1] == 0x80 && b[2..8].iter().all(|&x| x == 0);
    if link_local && b[11] == 0xff && b[12] == 0xfe && b[8] ^ 0x02 == 0x02 && b[9] == 0 {
        return Some(Ipv4Addr::new(b[10], b[13], b[14], b[15]));
    }
    None
}

impl NetPort {
    /// Bind port 4791 of `addr`, non-blocking.
    pub fn bind(addr: Ipv4Addr) -> io::Result<NetPort> {
        let socket = UdpSocket::bind(SocketAddrV4::new(addr, ROCE_V2_PORT))?;
        socket.set_nonblocking(true)?;
        // The default receive buffer (about 200 KiB) holds three 64 KiB messages: a few QPs
        // sending at once overflow it, and every loss costs an ACK timeout.
        set_buffer(&socket, libc::SO_RCVBUF, SOCKET_BUFFER);
        let link = PortLink::Udp { socket, senders: Mutex::new(BTreeMap::new()) };
        Ok(NetPort {
            addr,
            link,
            faults: Mutex::default(),
            faulty: Default::default(),
            used: Default::default(),
            gsi: Mutex::default(),
            siblings: None,
            shared: Default::default(),
            own_port: std::sync::atomic::AtomicU16::new(ROCE_V2_PORT),
            groups: Default::default(),
            joined: Mutex::default(),
        })
    }

    /// The same port, with the table of the processes that will share its address after a
    /// fork.
    pub(super) fn with_siblings(mut self, t: std::sync::Arc<super::share::Siblings>) -> NetPort {
        self.siblings = Some(t);
        self
    }

    /// In a child after `fork`: take a socket of its own on the port's address (an ephemeral
    /// UDP port, in place of the socket it shares with its parent) and enter it in the
    /// siblings' table, so that what goes to the address reaches this process too (see
    /// [`super::share`]). No effect on a port in memory or without a table.
    pub fn share(&self) -> io::Result<()> {
        let (PortLink::Udp { socket, .. }, Some(t)) = (&self.link, &self.siblings) else { return Ok(()) };
        let own = UdpSocket::bind(SocketAddrV4::new(self.addr, 0))?;
        own.set_nonblocking(true)?;
        set_buffer(&own, libc::SO_RCVBUF, SOCKET_BUFFER);
        let port = own.local_addr()?.port();
        // The socket's descriptor now names the new socket: a device thread waiting on it
        // waits on this process's own.
        // SAFETY: two descriptors of ours; dup2 closes the inherited one (the parent's stays).
        if unsafe { libc::dup2(own.as_raw_fd(), socket.as_raw_fd()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        if !t.enter(self.addr, port) {
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, "the table of shared ports is full"));
        }
        self.own_port.store(port, std::sync::atomic::Ordering::Relaxed);
        self.shared.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Whether this process shares the port's address with siblings ([`NetPort::share`]):
    /// its traffic to the address goes over the network, to each of them.
    pub fn is_shared(&self) -> bool {
        self.shared.load(std::sync::atomic::Ordering::Acquire)
    }

    /// A port at `addr` on the in-memory network `net`: datagrams to an address no port of
    /// `net` has are lost, as on a network.
    pub fn in_memory(addr: Ipv4Addr, net: std::sync::Arc<MemoryNet>) -> NetPort {
        net.queues().entry(addr).or_default();
        NetPort {
            addr,
            link: PortLink::Memory(net),
            faults: Mutex::default(),
            faulty: Default::default(),
            used: Default::default(),
            gsi: Mutex::default(),
            siblings: None,
            shared: Default::default(),
            own_port: std::sync::atomic::AtomicU16::new(ROCE_V2_PORT),
            groups: Default::default(),
            joined: Mutex::default(),
        }
    }

    /// Whether the port's datagrams travel in memory.
    pub fn is_in_memory(&self) -> bool {
        matches!(self.link, PortLink::Memory(_))
    }

    /// The port's address.
    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    /// The GID table an mlx5 port with this address shows, with each entry's type.
    pub fn gid_table(&self) -> [(Gid, u32); 4] {
        let ll = link_local_of_mac(mac_of_ip(self.addr));
        let v4 = mapped_gid(self.addr);
        [(ll, GID_TYPE_ROCE_V1), (ll, GID_TYPE_ROCE_V2), (v4, GID_TYPE_ROCE_V1), (v4, GID_TYPE_ROCE_V2)]
    }

    /// Whether this port may send to `to`: a loopback port only inside 127.0.0.0/8.
    pub fn may_reach(&self, to: Ipv4Addr) -> bool {
        !self.addr.is_loopback() || to.is_loopback()
    }

    /// The UDP source port a connection that wants `sport` sends from: `sport` once a socket
    /// is bound to it, else the port's own (4791, or a shared port's ephemeral one: the port
    /// is taken on this address). The ICRC covers it, so a packet is encoded for the port it
    /// leaves from.
    pub fn source_port(&self, sport: u16) -> u16 {
        let PortLink::Udp { senders, .. } = &self.link else { return sport };
        let mut senders = senders.lock().unwrap_or_else(|p| p.into_inner());
        if senders.contains_key(&sport) {
            return sport;
        }
        match UdpSocket::bind(SocketAddrV4::new(self.addr, sport)) {
            Ok(s) if s.set_nonblocking(true).is_ok() => {
                set_buffer(&s, libc::SO_SNDBUF, SOCKET_BUFFER);
                senders.insert(sport, s);
                sport
            }
            _ => self.own_port.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Send one datagram from source port `sport` (as [`NetPort::source_port`] gave it) to
    /// port 4791 of `to`. A full socket buffer drops it, as a congested link would: the
    /// transport retransmits. The port's fault rules act on it first ([`NetPort::add_fault`]);
    /// `now` is the transport's clock, for their delays.
    pub fn send(&self, sport: u16, to: Ipv4Addr, datagram: &[u8], now: u64) {
        if !self.may_reach(to) {
            return;
        }
        self.used.store(true, std::sync::atomic::Ordering::Relaxed);
        if !self.faulty.load(std::sync::atomic::Ordering::Relaxed) {
            return self.send_now(sport, to, datagram);
        }
        let out = {
            let mut f = self.faults.lock().unwrap_or_else(|p| p.into_inner());
            (!f.is_idle()).then(|| f.send(Outgoing { sport, to, bytes: datagram.to_vec() }, now))
        };
        match out {
            None => self.send_now(sport, to, datagram),
            Some(out) => out.iter().for_each(|o| self.send_now(o.sport, o.to, &o.bytes)),
        }
    }

    /// Send one datagram from source port `sport` to each sibling process sharing this port's
    /// address but this one (multicast: this process's members took it already).
    pub fn send_to_siblings(&self, sport: u16, datagram: &[u8]) {
        let (PortLink::Udp { socket, senders }, Some(t)) = (&self.link, &self.siblings) else { return };
        if !self.is_shared() {
            return;
        }
        self.used.store(true, std::sync::atomic::Ordering::Relaxed);
        let own = self.own_port.load(std::sync::atomic::Ordering::Relaxed);
        let senders = senders.lock().unwrap_or_else(|p| p.into_inner());
        let from = senders.get(&sport).unwrap_or(socket);
        for p in t.ports_of(self.addr).into_iter().filter(|&p| p != own) {
            let _ = from.send_to(datagram, SocketAddrV4::new(self.addr, p));
        }
    }

    /// Use the switch's multicast table `t` from now on (the first one given stays; a port in
    /// memory has no switch).
    pub(super) fn use_groups(&self, t: super::groups::GroupTable) {
        if matches!(self.link, PortLink::Udp { .. }) {
            let _ = self.groups.set(t);
        }
    }

    /// Make the port a member of exactly `groups` in the switch's table (the IPv4 groups its
    /// QPs are attached to); no effect without a table. A failed join leaves the group's
    /// datagrams from other hosts away, as a switch that missed the report would.
    pub fn set_groups(&self, groups: &BTreeSet<Ipv4Addr>) {
        let Some(t) = self.groups.get() else { return };
        let me = SocketAddrV4::new(self.addr, self.own_port.load(std::sync::atomic::Ordering::Relaxed));
        let mut joined = self.joined.lock().unwrap_or_else(|p| p.into_inner());
        for g in joined.difference(groups) {
            t.leave(*g, me);
        }
        for g in groups.difference(&joined) {
            let _ = t.join(*g, me);
        }
        *joined = groups.clone();
    }

    /// Send a datagram of `group` from source port `sport` to the group's members on other
    /// hosts, as the switch copies it (this host's members and siblings took it already).
    pub fn send_to_group(&self, group: Ipv4Addr, sport: u16, datagram: &[u8]) {
        let (PortLink::Udp { socket, senders }, Some(t)) = (&self.link, self.groups.get()) else { return };
        let members: Vec<SocketAddrV4> = t.members(group).into_iter().filter(|m| *m.ip() != self.addr).collect();
        if members.is_empty() {
            return;
        }
        self.used.store(true, std::sync::atomic::Ordering::Relaxed);
        let senders = senders.lock().unwrap_or_else(|p| p.into_inner());
        let from = senders.get(&sport).unwrap_or(socket);
        for m in members {
            let _ = from.send_to(datagram, m);
        }
    }

    /// Add a fault rule after the port's others (see [`super::faults`]).
    pub fn add_fault(&self, rule: NetFault) {
        self.faults.lock().unwrap_or_else(|p| p.into_inner()).add(rule);
        self.faulty.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Remove the port's fault rules; what they hold back still leaves.
    pub fn clear_faults(&self) {
        self.faults.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// How many times each of the port's fault rules acted, in the order they were added.
    pub fn faults_acted(&self) -> Vec<u32> {
        self.faults.lock().unwrap_or_else(|p| p.into_inner()).acted()
    }

    /// Send the delayed datagrams whose time has come at `now`: how many.
    pub fn release_delayed(&self, now: u64) -> usize {
        if !self.faulty.load(std::sync::atomic::Ordering::Relaxed) {
            return 0;
        }
        let due = self.faults.lock().unwrap_or_else(|p| p.into_inner()).due(now);
        due.iter().for_each(|o| self.send_now(o.sport, o.to, &o.bytes));
        due.len()
    }

    /// When the next datagram a fault rule delayed is due, if one is.
    pub fn next_delayed(&self) -> Option<u64> {
        if !self.faulty.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        self.faults.lock().unwrap_or_else(|p| p.into_inner()).next_due()
    }

    fn send_now(&self, sport: u16, to: Ipv4Addr, datagram: &[u8]) {
        match &self.link {
            PortLink::Udp { socket, senders } => {
                let senders = senders.lock().unwrap_or_else(|p| p.into_inner());
                let from = senders.get(&sport).unwrap_or(socket);
                // A shared address: to each process sharing it (this one too).
                let shared = match &self.siblings {
                    Some(t) if self.is_shared() => t.ports_of(to),
                    _ => Vec::new(),
                };
                if shared.is_empty() {
                    let _ = from.send_to(datagram, SocketAddrV4::new(to, ROCE_V2_PORT));
                }
                for p in shared {
                    let _ = from.send_to(datagram, SocketAddrV4::new(to, p));
                }
            }
            PortLink::Memory(net) => {
                if let Some(q) = net.queues().get_mut(&to) {
                    q.push_back((SocketAddrV4::new(self.addr, sport), datagram.to_vec()));
                }
            }
        }
    }

    /// The next datagram waiting, into `buf`: its length and sender; `None` when none waits.
    pub fn recv(&self, buf: &mut [u8]) -> Option<(usize, SocketAddrV4)> {
        let socket = match &self.link {
            PortLink::Udp { socket, .. } => socket,
            PortLink::Memory(net) => {
                let (from, d) = net.queues().get_mut(&self.addr)?.pop_front()?;
                self.used.store(true, std::sync::atomic::Ordering::Relaxed);
                // A datagram longer than the buffer is cut, as a socket would cut it.
                let n = d.len().min(buf.len());
                buf.get_mut(..n)?.copy_from_slice(d.get(..n)?);
                return Some((n, from));
            }
        };
        loop {
            match socket.recv_from(buf) {
                Ok((n, SocketAddr::V4(from))) => {
                    self.used.store(true, std::sync::atomic::Ordering::Relaxed);
                    return Some((n, from));
                }
                // Not ours to answer (the socket is IPv4): dropped.
                Ok((_, SocketAddr::V6(_))) => continue,
                // Nothing waits (the socket never blocks, so no signal interrupts it either).
                Err(_) => return None,
            }
        }
    }

    /// Keep a MAD that came to QP 1 from `from` for the connection manager (at most 256
    /// wait: more are dropped, as a full receive queue drops them).
    pub fn push_gsi(&self, from: Ipv4Addr, mad: Vec<u8>) -> bool {
        let mut q = self.gsi.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= 256 {
            return false;
        }
        q.push_back((from, mad));
        true
    }

    /// The MADs that came to QP 1 since the last call, oldest first.
    pub fn take_gsi(&self) -> Vec<(Ipv4Addr, Vec<u8>)> {
        self.gsi.lock().unwrap_or_else(|p| p.into_inner()).drain(..).collect()
    }

    /// Whether a datagram went out of or came into this port.
    pub fn used(&self) -> bool {
        self.used.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The socket's file descriptor, for a device thread to wait on; `None` in memory.
    pub fn fd(&self) -> Option<RawFd> {
        match &self.link {
            PortLink::Udp { socket, .. } => Some(socket.as_raw_fd()),
            PortLink::Memory(_) => None,
        }
    }
}

/// The addresses of a host's `n` ports from its first address; `None` if they would run
/// past 255.255.255.255.
pub fn addresses(first: Ipv4Addr, n: usize) -> Option<Vec<Ipv4Addr>> {
    let base = u32::from(first);
    (0..n).map(|i| base.checked_add(u32::try_from(i).ok()?).map(Ipv4Addr::from)).collect()
}

/// The default first address of host `host` (24 bits): inside 127.0.0.0/8, four addresses
/// per host (hosts 0 and 1 start at 127.0.0.1 and 127.0.0.5), so that processes told apart by
/// host number (by default their process id) have addresses of their own.
pub fn default_address(host: u32) -> Ipv4Addr {
    let h = host & 0x3f_ffff;
    Ipv4Addr::from((127u32 << 24) | (h << 2) | 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gid_of_a_port_names_its_address() -> Result<(), std::net::AddrParseError> {
        let a = Ipv4Addr::new(127, 0, 1, 1);
        let mac = mac_of_ip(a);
        assert_eq!(mac, [2, 0, 127, 0, 1, 1]);
        let ll = link_local_of_mac(mac);
        assert_eq!(std::net::Ipv6Addr::from(ll.0), "fe80::7fff:fe00:101".parse::<std::net::Ipv6Addr>()?);
        assert_eq!(ip_of_gid(&ll), Some(a));
        assert_eq!(ip_of_gid(&mapped_gid(a)), Some(a));
        // A link-local GID from another kind of MAC names no address.
        assert_eq!(ip_of_gid(&Gid::link_local(0x0c42_a1ff_fe01_0203)), None);
        assert_eq!(ip_of_gid(&Gid::default()), None);
        // Made from one of our MACs but outside fe80::/64: no address either.
        let mut site = ll;
        site.0[1] = 0xc0;
        assert_eq!(ip_of_gid(&site), None);
        let mut wide = ll;
        wide.0[7] = 1;
        assert_eq!(ip_of_gid(&wide), None);
        // From a universal MAC (00:00:…): not one of ours, though it differs only in that bit.
        assert_eq!(ip_of_gid(&link_local_of_mac([0, 0, 127, 0, 1, 1])), None);
        Ok(())
    }

    /// The socket's receive buffer is enlarged: past the system's limit where the process may,
    /// else to the limit (the kernel reports twice what was set).
    #[test]
    fn a_port_asks_for_a_large_receive_buffer() -> io::Result<()> {
        let port = NetPort::bind(Ipv4Addr::new(127, 0, 73, 3))?;
        let fd = port.fd().ok_or_else(|| io::Error::other("a bound port has a socket"))?;
        let (mut got, mut len): (libc::c_int, libc::socklen_t) = (0, std::mem::size_of::<libc::c_int>() as _);
        // SAFETY: reads one c_int option of our socket into a c_int on the stack.
        let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, (&raw mut got).cast(), &mut len) };
        assert_eq!(r, 0, "getsockopt: {}", io::Error::last_os_error());
        let limit = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|t| t.trim().parse::<libc::c_int>().ok())
            .unwrap_or(SOCKET_BUFFER);
        // Where the process may pass the limit (SO_RCVBUFFORCE, CAP_NET_ADMIN) the port has all
        // it asked for, else what the limit allows.
        let scratch = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::new(127, 0, 73, 6), 0))?;
        let one: libc::c_int = 1 << 16;
        // SAFETY: a socket of ours and a c_int option value on the stack, with its length.
        let forced = unsafe {
            libc::setsockopt(
                scratch.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                std::ptr::from_ref(&one).cast(),
                len,
            )
        } == 0;
        let want = if forced { 2 * SOCKET_BUFFER } else { 2 * SOCKET_BUFFER.min(limit) };
        assert!(got >= want, "SO_RCVBUF {got}, rmem_max {limit}, may force: {forced}");
        Ok(())
    }

    /// A delay rule holds a datagram until its time: the port says when, and releases it then
    /// (here on the fabric in memory, into the queue of the address it was sent to).
    #[test]
    fn a_delayed_datagram_leaves_at_its_time() {
        let net = std::sync::Arc::new(MemoryNet::default());
        let (a, b) = (Ipv4Addr::new(127, 0, 73, 7), Ipv4Addr::new(127, 0, 73, 8));
        let (port, peer) = (NetPort::in_memory(a, net.clone()), NetPort::in_memory(b, net.clone()));
        assert_eq!(port.next_delayed(), None, "no rules");
        port.add_fault(NetFault::new(super::super::faults::NetAction::Delay { ns: 5 }));
        port.send(ROCE_V2_PORT, b, b"later", 10);
        assert_eq!(port.next_delayed(), Some(15));
        let mut buf = [0u8; 8];
        assert_eq!(port.release_delayed(14), 0, "not before its time");
        assert!(peer.recv(&mut buf).is_none());
        assert!(net.is_empty(), "held, not queued");
        assert_eq!(port.release_delayed(15), 1);
        assert!(!net.is_empty(), "queued at the peer");
        assert_eq!(
            peer.recv(&mut buf).map(|(n, from)| (buf[..n].to_vec(), from)),
            Some((b"later".to_vec(), SocketAddrV4::new(a, ROCE_V2_PORT)))
        );
        assert_eq!(port.next_delayed(), None, "nothing held");
        assert!(net.is_empty(), "taken");
    }

    #[test]
    fn default_addresses_stay_in_loopback_and_apart() {
        assert_eq!(default_address(0), Ipv4Addr::new(127, 0, 0, 1));
        assert_eq!(default_address(1), Ipv4Addr::new(127, 0, 0, 5));
        assert!(default_address(0xff_ffff).is_loopback());
        assert_ne!(default_address(0x40_0000), default_address(0x40_0001));
        assert_eq!(
            addresses(Ipv4Addr::new(127, 0, 1, 1), 2),
            Some(vec![Ipv4Addr::new(127, 0, 1, 1), Ipv4Addr::new(127, 0, 1, 2)])
        );
        assert_eq!(addresses(Ipv4Addr::BROADCAST, 2), None);
    }

    #[test]
    fn a_connection_sends_from_its_own_udp_port() -> io::Result<()> {
        let a = Ipv4Addr::new(127, 0, 73, 2);
        let port = NetPort::bind(a)?;
        // A port the system just gave and took back: free.
        let free = UdpSocket::bind(SocketAddrV4::new(a, 0))?.local_addr()?.port();
        assert_eq!(port.source_port(free), free);
        assert_eq!(port.source_port(free), free, "the socket is kept for the next packet");
        // 4791 is the port's own socket: a connection that wants it sends from it.
        assert_eq!(port.source_port(ROCE_V2_PORT), ROCE_V2_PORT);
        Ok(())
    }

    #[test]
    fn a_port_shared_after_fork_takes_a_socket_of_its_own() -> io::Result<()> {
        let a = Ipv4Addr::new(127, 0, 73, 1);
        let t = crate::fabric::share::Siblings::new().ok_or_else(|| io::Error::other("no shared mapping"))?;
        let t = std::sync::Arc::new(t);
        let port = NetPort::bind(a)?.with_siblings(t.clone());
        let fd = port.fd();
        port.share()?;
        let own = port.own_port.load(std::sync::atomic::Ordering::Relaxed);
        assert!(port.is_shared());
        assert_ne!(own, ROCE_V2_PORT);
        assert_eq!(t.ports_of(a), vec![own]);
        // The descriptor is kept (a device thread waits on it) and now names the new socket.
        assert!(fd.is_some());
        assert_eq!(port.fd(), fd);
        let probe = UdpSocket::bind(SocketAddrV4::new(a, 0))?;
        probe.send_to(b"probe", SocketAddrV4::new(a, own))?;
        let mut buf = [0u8; 16];
        let mut got = None;
        for _ in 0..2000 {
            got = port.recv(&mut buf);
            if got.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(got.map(|(n, _)| &buf[..n]), Some(&b"probe"[..]));
        // A sibling sharing the address gets what this port sends to its siblings.
        let sibling = UdpSocket::bind(SocketAddrV4::new(a, 0))?;
        sibling.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
        assert!(t.enter(a, sibling.local_addr()?.port()));
        port.send_to_siblings(ROCE_V2_PORT, b"to the siblings");
        let n = sibling.recv(&mut buf)?;
        assert_eq!(&buf[..n], b"to the siblings");
        // And so does a datagram the shared port sends to the shared address.
        port.send(ROCE_V2_PORT, a, b"to the address", 0);
        let n = sibling.recv(&mut buf)?;
        assert_eq!(&buf[..n], b"to the address");
        Ok(())
    }

    /// The time a datagram to `port` may take on the loopback interface.
    fn wait_recv(port: &NetPort, buf: &mut [u8]) -> Option<(usize, SocketAddrV4)> {
        for _ in 0..2000 {
            if let Some(got) = port.recv(buf) {
                return Some(got);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        None
    }

    /// A port not shared (no fork happened) sends to its peer's port 4791, even when its table
    /// lists sibling sockets on that address.
    #[test]
    fn a_port_not_shared_sends_to_4791_whatever_its_table_lists() -> io::Result<()> {
        let a = Ipv4Addr::new(127, 0, 73, 4);
        let t = std::sync::Arc::new(crate::fabric::share::Siblings::new().ok_or_else(|| io::Error::other("no map"))?);
        let port = NetPort::bind(a)?.with_siblings(t.clone());
        let sibling = UdpSocket::bind(SocketAddrV4::new(a, 0))?;
        sibling.set_nonblocking(true)?;
        assert!(t.enter(a, sibling.local_addr()?.port()));
        port.send(ROCE_V2_PORT, a, b"to 4791", 0);
        let mut buf = [0u8; 16];
        assert_eq!(wait_recv(&port, &mut buf).map(|(n, _)| buf[..n].to_vec()), Some(b"to 4791".to_vec()));
        assert!(sibling.recv(&mut buf).is_err(), "the sibling got nothing");
        Ok(())
    }

    /// A port whose socket is descriptor 0 (a program that closed its standard input) still
    /// takes a socket of its own after a fork: `dup2` onto 0 answers 0, which is success.
    #[test]
    fn a_port_on_descriptor_0_shares_after_fork() -> io::Result<()> {
        let t = std::sync::Arc::new(crate::fabric::share::Siblings::new().ok_or_else(|| io::Error::other("no map"))?);
        // SAFETY: the child closes its own descriptor 0, binds, shares and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: the child's own standard input.
            unsafe { libc::close(0) };
            let ok = NetPort::bind(Ipv4Addr::new(127, 0, 73, 5))
                .map(|p| p.with_siblings(t.clone()))
                .is_ok_and(|p| p.fd() == Some(0) && p.share().is_ok() && p.is_shared());
            // SAFETY: ends the forked child without running the parent's destructors.
            unsafe { libc::_exit(i32::from(!ok)) };
        }
        assert!(pid > 0, "fork");
        let mut status = 0;
        // SAFETY: waits for a child of ours.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status:#x}");
        Ok(())
    }
}
