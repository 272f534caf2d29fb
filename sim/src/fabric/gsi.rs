//! QP 1 on the network: the connection manager's MADs go out as UD SENDs from QP 1 to QP 1
//! with the GSI's Q_Key, and those that arrive wait at their port ([`NetPort::take_gsi`])
//! for the connection manager of the C ABI's librdmacm, which runs outside the devices.

use std::net::{IpAddr, Ipv4Addr};

use super::{Fabric, Link, NetPort};
use crate::packet::{Bth, Deth, Headers, opcode};
use crate::wire::cm::{GSI_QKEY, GSI_QPN};
use crate::wire::{self, Endpoints};

impl Fabric {
    /// The device whose networked port has address `a`.
    pub fn port_with_address(&self, a: Ipv4Addr) -> Option<usize> {
        self.net_ports().iter().position(|p| p.addr() == a)
    }

    /// Send a MAD from QP 1 of device `dev`'s networked port to QP 1 at `to` (a port of
    /// this host's gets it at once, unless shared with sibling processes); `psn` is the GSI's sequence number. False when the port
    /// is not networked or may not reach `to`.
    pub fn send_gsi(&self, dev: usize, to: Ipv4Addr, mad: &[u8], psn: u32) -> bool {
        let Some(port) = self.net_port(dev) else { return false };
        if !port.may_reach(to) {
            return false;
        }
        let h = Headers {
            bth: Bth {
                opcode: opcode::UD_SEND_ONLY,
                pkey: 0xffff,
                dest_qp: GSI_QPN,
                psn: psn & 0xff_ffff,
                ..Bth::default()
            },
            deth: Some(Deth { qkey: GSI_QKEY, src_qp: GSI_QPN }),
            ..Headers::default()
        };
        let sport = Endpoints::entropy_port(GSI_QPN, GSI_QPN);
        if let Some(cap) = self.capture() {
            cap.packet(&Link::ipv4(port.addr(), to, sport), &h, mad);
            cap.flush();
        }
        if let Some(local) =
            self.port_with_address(to).and_then(|d| self.net_port(d)).filter(|p| !p.is_in_memory() && !p.is_shared())
        {
            return local.push_gsi(port.addr(), mad.to_vec());
        }
        let sport = port.source_port(sport);
        let ep = Endpoints::new(IpAddr::V4(port.addr()), IpAddr::V4(to), sport);
        match wire::encode(&h, mad, &ep) {
            Ok(d) => {
                port.send(sport, to, &d, self.now_ns());
                true
            }
            Err(_) => false,
        }
    }

    /// The MADs that came to QP 1 of every networked port: (device, sender, bytes).
    pub fn take_gsi(&self) -> Vec<(usize, Ipv4Addr, Vec<u8>)> {
        let ports: &[NetPort] = self.net_ports();
        ports.iter().enumerate().flat_map(|(d, p)| p.take_gsi().into_iter().map(move |(a, m)| (d, a, m))).collect()
    }
}
