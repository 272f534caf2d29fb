//! Arbitrary bytes at QP 1, for the fuzz target `cm_qp1` (and its corpus test): each MAD goes
//! through the connection manager's state machine as the CM's thread hands it on, and the
//! program's side answers what it is asked with the calls a program makes (`rdma_accept` or
//! `rdma_reject` of a request, the RTU of a reply through `rdma_get_cm_event`). Any answer is
//! right; a panic or a hang is the finding.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rdma_sys::rdma_cm_event_type::*;
use rdma_sys::*;

use super::addr::{service_id, sockaddr_in};
use super::state::{cm, devs};
use super::{conn, proto};

/// The port both listeners take.
const PORT: u16 = 7000;

/// The channel and the two listeners (TCP and UDP port spaces) on device 0, made once; None
/// when device 0 has no address on the network.
fn setup() -> Option<(usize, usize, usize)> {
    static SET: OnceLock<Option<(usize, usize, usize)>> = OnceLock::new();
    *SET.get_or_init(|| {
        let here = devs().addr.first().copied().flatten()?;
        // SAFETY: the C ABI's own calls on objects made here, as a program makes them.
        unsafe {
            let ch = super::rdma_create_event_channel();
            if ch.is_null() {
                return None;
            }
            let fd = (*ch).fd;
            libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
            let mut ids = [0usize; 2];
            for (slot, ps) in ids.iter_mut().zip([rdma_port_space::RDMA_PS_TCP, rdma_port_space::RDMA_PS_UDP]) {
                let mut id = std::ptr::null_mut();
                let mut sa = sockaddr_in(SocketAddrV4::new(here, PORT));
                if super::rdma_create_id(ch, &mut id, std::ptr::null_mut(), ps) != 0
                    || super::rdma_bind_addr(id, std::ptr::from_mut(&mut sa).cast()) != 0
                    || super::rdma_listen(id, 1) != 0
                {
                    return None;
                }
                *slot = id as usize;
            }
            Some((ch as usize, ids[0], ids[1]))
        }
    })
}

/// The `n`th ID's local communication ID (0 if there are none).
fn comm_of(n: usize) -> u32 {
    let c = cm();
    let ids: Vec<u32> = c.ids.values().map(|i| i.local_comm).filter(|&x| x != 0).collect();
    if ids.is_empty() { 0 } else { ids[n % ids.len()] }
}

/// Let the control byte `ctl` aim the MAD at what exists: bit 6 writes a CM header, bits 0–1
/// write a live communication ID where a reply names ours (1), where a SIDR_REP names its
/// request (2), or a listener's service ID where a request names it (3; bit 2: UDP's).
fn aim(mad: &mut [u8], ctl: u8) {
    if mad.len() < 256 {
        return;
    }
    if ctl & 0x40 != 0 {
        mad[..4].copy_from_slice(&[1, 7, 2, 3]);
    }
    let pick = usize::from(ctl >> 3 & 7);
    match ctl & 3 {
        1 => mad[28..32].copy_from_slice(&comm_of(pick).to_be_bytes()),
        2 => mad[24..28].copy_from_slice(&comm_of(pick).to_be_bytes()),
        3 => {
            let ps = if ctl & 4 != 0 { rdma_port_space::RDMA_PS_UDP } else { rdma_port_space::RDMA_PS_TCP };
            mad[32..40].copy_from_slice(&service_id(ps, PORT).to_be_bytes());
        }
        _ => {}
    }
}

/// Take every event of the channel, answering a request (accept when `accept`, else reject)
/// as a program would.
fn answer(ch: usize, accept: bool) {
    let ch = ch as *mut rdma_event_channel;
    loop {
        let mut ev = std::ptr::null_mut();
        // SAFETY: the channel made by setup (non-blocking); the event is ours until acked.
        unsafe {
            if super::rdma_get_cm_event(ch, &mut ev) != 0 {
                return;
            }
            if (*ev).event == RDMA_CM_EVENT_CONNECT_REQUEST {
                let key = (*ev).id as usize;
                if accept {
                    conn::accept(key, std::ptr::null());
                } else {
                    conn::reject(key, b"fuzz");
                }
            }
            super::rdma_ack_cm_event(ev);
        }
    }
}

/// One fuzz input: MADs of up to 256 bytes, each led by a control byte (see [`aim`]; bit 5:
/// accept the requests it makes, else reject them; bit 7: let every timer run out after it),
/// from a peer at 127.0.40.9 to device 0's QP 1. The IDs it made are destroyed at the end.
pub fn qp1_input(data: &[u8]) {
    let Some((ch, tcp, udp)) = setup() else { return };
    let from = Ipv4Addr::new(127, 0, 40, 9);
    for chunk in data.chunks(257) {
        let Some((&ctl, mad)) = chunk.split_first() else { continue };
        let mut mad = mad.to_vec();
        aim(&mut mad, ctl);
        {
            let mut c = cm();
            c.receive(0, from, &mad);
            if ctl & 0x80 != 0 {
                c.timers(Instant::now() + Duration::from_secs(3600));
            }
        }
        proto::flush();
        answer(ch, ctl & 0x20 != 0);
    }
    let made: Vec<usize> = cm().ids.keys().copied().filter(|&k| k != tcp && k != udp).collect();
    for k in made {
        // SAFETY: an ID of the CM's table that a request made here.
        unsafe { super::rdma_destroy_id(k as *mut rdma_cm_id) };
    }
    proto::flush();
    answer(ch, false);
}
