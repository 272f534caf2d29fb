//! The simulator on the IP network: its ports' sockets, the fabric's faults and drops, and
//! the free-running pass ([`Simulator::tick`]) that carries datagrams in and out.

use super::*;

impl Simulator {
    /// Put the devices' ports on the IP network: port `i` gets address `first + i` and a UDP
    /// socket on its port 4791, its GID table shows that address, and a path to an address
    /// no port here has goes to it as RoCE v2 (docs/network.md). For a free-running
    /// simulator: the transport's timers need a thread that ticks.
    pub fn connect_network(&mut self, first: std::net::Ipv4Addr) -> std::io::Result<()> {
        self.fabric.connect(first)?;
        // The firmware reports the new GID 0 too (QUERY_ROCE_ADDRESS, the vport context).
        for (i, d) in self.devices.iter_mut().enumerate() {
            if let Some(p) = self.fabric.port(i) {
                d.set_port_address(p.gid, p.lid);
            }
        }
        Ok(())
    }

    /// In a child process after `fork`: its networked ports share their addresses with the
    /// parent's other children ([`Fabric::share_after_fork`]), and its devices number new
    /// QPs from a start of the child's own (`host`, as [`Simulator::with_host`] spreads them),
    /// so that siblings on one address never give two QPs one number. Whether any port is
    /// shared (none off the network).
    pub fn share_after_fork(&mut self, host: u32) -> std::io::Result<bool> {
        if self.fabric.net_ports().iter().all(|p| p.is_in_memory()) {
            return Ok(false);
        }
        for (i, d) in self.devices.iter_mut().enumerate() {
            d.set_first_qpn(super::first_qpn(host & 0xff_ffff, i));
        }
        self.fabric.share_after_fork()?;
        Ok(self.fabric.net_ports().iter().any(|p| p.is_shared()))
    }

    /// What a datagram arriving at device `dev`'s networked port from `from` does, as if it
    /// came through the socket: checked, then taken by the responder or a waiting requester
    /// (answers go out through the socket). False if it was dropped (and counted), or the
    /// port is not networked. Then the engine runs. For tests and fuzzing.
    pub fn receive_datagram(&mut self, dev: usize, from: std::net::SocketAddrV4, bytes: &[u8]) -> bool {
        let taken = crate::device::receive_one(&mut self.devices, &mut self.host, &self.fabric, dev, from, bytes);
        let (_, mut low) = self.split();
        low.run_now();
        crate::device::flush_acks(&mut self.devices, &mut self.host, &self.fabric);
        taken
    }

    /// The fabric the devices' ports are on: their addresses, and QP 1's MADs
    /// ([`Fabric::send_gsi`], [`Fabric::take_gsi`]) for a connection manager.
    pub fn fabric(&self) -> &Fabric {
        &self.fabric
    }

    /// The file descriptors of the networked ports' sockets: a device thread waits on them.
    pub fn network_fds(&self) -> Vec<std::os::fd::RawFd> {
        self.fabric.net_ports().iter().filter_map(crate::fabric::NetPort::fd).collect()
    }

    /// Carry the traffic between this simulator's own RoCE ports as RoCE v2 packets through
    /// the reliable transport, queued in memory, instead of handing each request to its
    /// responder directly: network fault rules then act on it. A stepped simulator runs the
    /// transport in simulated time inside each call until nothing moves (its timers jump the
    /// clock); a free-running one on its thread, by the wall clock. GIDs and paths already
    /// set up stay as they are. No effect on a simulator already on a network.
    pub fn carry_in_memory(&mut self) {
        let first = crate::fabric::net::default_address(self.fabric.host());
        self.fabric.connect_in_memory(first, !self.is_free_running());
    }

    /// Whether a responder holds an ACK back: the free-running device thread must make a
    /// pass soon ([`Simulator::tick`] sends ACKs one pass late).
    pub fn holds_acks(&self) -> bool {
        self.devices.iter().any(Device::holds_acks)
    }

    /// Send the ACKs responders hold back, before a QP they belong to changes or goes: the
    /// peer must not wait for an answer a card would have sent already.
    pub(super) fn send_held_acks(&mut self) {
        if self.holds_acks() {
            crate::device::flush_acks(&mut self.devices, &mut self.host, &self.fabric);
        }
    }

    /// Whether any networked port has sent or received a datagram: whether the process talks
    /// to another one.
    pub fn network_used(&self) -> bool {
        self.fabric.net_ports().iter().any(crate::fabric::NetPort::used)
    }

    /// Attach QP `qpn` of device `dev` to multicast group `mgid` (`ibv_attach_mcast`; the
    /// caller checks the GID and the QP type as the kernel does): false for no such QP.
    pub fn attach_multicast(&mut self, dev: usize, qpn: u32, mgid: mlx5_dv::Gid) -> bool {
        let done = self.devices.get_mut(dev).is_some_and(|d| d.attach_multicast(qpn, mgid));
        self.sync_multicast_groups();
        done
    }

    /// Detach QP `qpn` of device `dev` from group `mgid`: false when it is not attached.
    pub fn detach_multicast(&mut self, dev: usize, qpn: u32, mgid: mlx5_dv::Gid) -> bool {
        let done = self.devices.get_mut(dev).is_some_and(|d| d.detach_multicast(qpn, mgid));
        self.sync_multicast_groups();
        done
    }

    /// Let the networked ports reach the members of multicast groups on other hosts through
    /// the switch's table in directory `dir` (made if missing; docs/network.md,
    /// "Multicast"): each port enters the IPv4 groups its device's QPs are attached to, and a
    /// group's datagram is copied to the members elsewhere.
    pub fn use_multicast_table(&mut self, dir: &std::path::Path) -> std::io::Result<()> {
        let t = crate::fabric::groups::GroupTable::open(dir)?;
        self.fabric.use_multicast_table(&t);
        self.sync_multicast_groups();
        Ok(())
    }

    /// Enter each networked port in the switch's table for the IPv4 groups its device's QPs
    /// are attached to now (and in no other).
    pub(super) fn sync_multicast_groups(&self) {
        for (i, d) in self.devices.iter().enumerate() {
            let Some(port) = self.fabric.net_port(i) else { continue };
            let groups = d.multicast_groups().iter().filter_map(crate::device::engine::multicast::group_of).collect();
            port.set_groups(&groups);
        }
    }

    /// Port 1's GID table of device `dev`, with each entry's `ibv_gid_type`.
    pub fn gid_table(&self, dev: usize) -> Vec<(mlx5_dv::Gid, u32)> {
        self.fabric.gid_table(dev)
    }

    /// Datagrams each device's port dropped (bad ICRC or headers, out of sequence, for no
    /// waiting QP), in device order.
    pub fn network_drops(&self) -> Vec<u64> {
        self.devices.iter().map(Device::network_drops).collect()
    }

    /// What each device's requesters met on the network (the mlx5 port counters
    /// `local_ack_timeout_err`, `packet_seq_err`, `implied_nak_seq_err`), in device order.
    pub fn transport_counters(&self) -> Vec<crate::device::engine::TransportCounters> {
        self.devices.iter().map(Device::transport_counters).collect()
    }

    /// Add a fault rule to what device `dev`'s port sends, after its other rules: RoCE v2
    /// packets it matches are dropped, duplicated, reordered, delayed or corrupted
    /// ([`NetFault`](crate::fabric::NetFault); docs/network.md, "Faults on the network").
    /// A simulator not on a network first carries its devices' traffic as packets in memory
    /// ([`Simulator::carry_in_memory`]). Delayed datagrams leave when their time comes. EINVAL
    /// for a device without a RoCE port or a rule that can never act (a probability outside 0
    /// to 1, `xor` 0, `times` 0).
    pub fn add_network_fault(&mut self, dev: usize, rule: crate::fabric::NetFault) -> Result<()> {
        rule.check().map_err(|why| Error::new(Op::Backend, EINVAL, why))?;
        if self.fabric.net_ports().is_empty() {
            self.carry_in_memory();
        }
        let port = self
            .fabric
            .net_port(dev)
            .ok_or_else(|| Error::new(Op::Backend, EINVAL, format!("device {dev} has no RoCE port")))?;
        port.add_fault(rule);
        Ok(())
    }

    /// Remove device `dev`'s network fault rules (what they hold back still leaves).
    pub fn clear_network_faults(&mut self, dev: usize) {
        if let Some(p) = self.fabric.net_port(dev) {
            p.clear_faults();
        }
    }

    /// How many times each of device `dev`'s network fault rules acted, in the order they
    /// were added (empty for a port not on the network).
    pub fn network_faults_acted(&self, dev: usize) -> Vec<u32> {
        self.fabric.net_port(dev).map(crate::fabric::NetPort::faults_acted).unwrap_or_default()
    }

    /// One pass of a free-running device: datagrams a network fault rule delayed go out once
    /// their delay is over, datagrams waiting at its ports are taken, every QP's doorbell
    /// record is read (a program may have posted with stores of its own), the engine runs what
    /// is posted (and resends what timed out), and the events it raised go out. True if
    /// anything moved: a datagram, a producer counter, a CQE or an EQE written.
    pub fn tick(&mut self) -> bool {
        let before: u64 = self.devices.iter().fold(0, |n, d| n.wrapping_add(d.progress()));
        let mut moved = false;
        let networked = !self.fabric.net_ports().is_empty();
        // ACKs owed before this pass go out in it, after its requests; those this pass owes
        // wait for the next, so that what it delivers is seen without a send on the way (one
        // datagram less per half round trip; the next pass comes within the device thread's
        // shortest pause, see `holds_acks`).
        let acks_owed = self.holds_acks();
        if networked {
            // Fault rules' delayed datagrams whose time has come.
            moved |= self.fabric.release_delayed() > 0;
            moved |= crate::device::receive_network(&mut self.devices, &mut self.host, &self.fabric, 4096) > 0;
        }
        for d in &mut self.devices {
            moved |= d.ring_all(&self.host);
        }
        let (_, mut low) = self.split();
        low.run_now();
        if acks_owed {
            // One ACK per responder QP (coalesced), after the pass's own requests and answers.
            crate::device::flush_acks(&mut self.devices, &mut self.host, &self.fabric);
        }
        let after: u64 = self.devices.iter().fold(0, |n, d| n.wrapping_add(d.progress()));
        moved || after != before
    }
}
