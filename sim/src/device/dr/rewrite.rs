//! Header rewrites of steering actions: the PRM's modify-header actions (`set_action_in`,
//! `add_action_in`) on the outer headers, and VLAN push and pop.

use mlx5_dv::errno::EINVAL;

const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88a8;
const ETH_P_IPV4: u16 = 0x0800;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

/// `MLX5_ACTION_TYPE_SET`.
const SET: u8 = 1;
/// `MLX5_ACTION_TYPE_ADD`.
const ADD: u8 = 2;

/// A header field modify-header actions reach (`MLX5_ACTION_IN_FIELD_OUT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// 0x1: the source MAC's top 32 bits.
    Smac47_16,
    /// 0x2: its low 16 bits.
    Smac15_0,
    /// 0x3: the EtherType (after any VLAN tags).
    Ethertype,
    /// 0x4: the destination MAC's top 32 bits.
    Dmac47_16,
    /// 0x5: its low 16 bits.
    Dmac15_0,
    /// 0x6: the IPv4 DSCP.
    IpDscp,
    /// 0x8: the TCP source port.
    TcpSport,
    /// 0x9: the TCP destination port.
    TcpDport,
    /// 0xa: the IPv4 TTL.
    IpTtl,
    /// 0xb: the UDP source port.
    UdpSport,
    /// 0xc: the UDP destination port.
    UdpDport,
    /// 0x15: the IPv4 source address.
    Sipv4,
    /// 0x16: the IPv4 destination address.
    Dipv4,
}

impl Field {
    fn of(id: u16) -> Option<(Field, u32)> {
        Some(match id {
            0x1 => (Field::Smac47_16, 32),
            0x2 => (Field::Smac15_0, 16),
            0x3 => (Field::Ethertype, 16),
            0x4 => (Field::Dmac47_16, 32),
            0x5 => (Field::Dmac15_0, 16),
            0x6 => (Field::IpDscp, 6),
            0x8 => (Field::TcpSport, 16),
            0x9 => (Field::TcpDport, 16),
            0xa => (Field::IpTtl, 8),
            0xb => (Field::UdpSport, 16),
            0xc => (Field::UdpDport, 16),
            0x15 => (Field::Sipv4, 32),
            0x16 => (Field::Dipv4, 32),
            _ => return None,
        })
    }
}

/// One modify-header action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModifyOp {
    /// Set (true) or add.
    pub set: bool,
    /// The field.
    pub field: Field,
    /// The first bit of the field written.
    pub offset: u32,
    /// How many bits.
    pub length: u32,
    /// The value (set) or addend (add).
    pub data: u32,
    /// The field's width in bits.
    pub width: u32,
}

/// Parse the PRM actions (8 bytes each, big-endian): EINVAL with the reason for a length that
/// is not a whole number of actions, an action type other than set or add, an unknown field,
/// or bits past the field's width.
pub fn parse_modify(bytes: &[u8]) -> Result<Vec<ModifyOp>, (i32, String)> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(8) {
        return Err((EINVAL, format!("{} bytes of modify-header actions (8 each)", bytes.len())));
    }
    bytes
        .chunks(8)
        .map(|a| {
            let w0 = u32::from_be_bytes([a[0], a[1], a[2], a[3]]);
            let data = u32::from_be_bytes([a[4], a[5], a[6], a[7]]);
            let ty = (w0 >> 28) as u8;
            let id = ((w0 >> 16) & 0xfff) as u16;
            if ty != SET && ty != ADD {
                return Err((EINVAL, format!("modify-header action type {ty} is not simulated (set and add are)")));
            }
            let (field, width) = Field::of(id).ok_or((EINVAL, format!("modify-header field {id:#x} unsupported")))?;
            let (offset, length) = if ty == SET {
                let len = w0 & 0x1f;
                ((w0 >> 8) & 0x1f, if len == 0 { 32 } else { len })
            } else {
                (0, width)
            };
            if offset + length > width {
                return Err((EINVAL, format!("bits {offset}..{} past field {id:#x}'s {width}", offset + length)));
            }
            Ok(ModifyOp { set: ty == SET, field, offset, length, data, width })
        })
        .collect()
}

/// Where the network header starts (past the VLAN tags) and its EtherType.
fn l3_of(frame: &[u8]) -> Option<(usize, u16)> {
    let mut l3 = 14;
    let mut ty = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    while ty == ETH_P_8021Q || ty == ETH_P_8021AD {
        ty = u16::from_be_bytes([*frame.get(l3 + 2)?, *frame.get(l3 + 3)?]);
        l3 += 4;
    }
    Some((l3, ty))
}

/// Where a field lies in `frame`: its byte offset and size, and its bit shift within them.
fn locate(frame: &[u8], f: Field) -> Option<(usize, usize, u32)> {
    let (l3, ty) = l3_of(frame)?;
    let ipv4 = ty == ETH_P_IPV4 && frame.len() >= l3 + 20;
    let proto = if ipv4 { frame[l3 + 9] } else { 0 };
    let l4 = l3 + usize::from(frame.get(l3).map_or(5, |b| b & 0xf)) * 4;
    let tcp = ipv4 && proto == IPPROTO_TCP;
    let udp = ipv4 && proto == IPPROTO_UDP;
    Some(match f {
        Field::Dmac47_16 => (0, 4, 0),
        Field::Dmac15_0 => (4, 2, 0),
        Field::Smac47_16 => (6, 4, 0),
        Field::Smac15_0 => (10, 2, 0),
        Field::Ethertype => (l3 - 2, 2, 0),
        Field::IpDscp if ipv4 => (l3 + 1, 1, 2),
        Field::IpTtl if ipv4 => (l3 + 8, 1, 0),
        Field::Sipv4 if ipv4 => (l3 + 12, 4, 0),
        Field::Dipv4 if ipv4 => (l3 + 16, 4, 0),
        Field::TcpSport if tcp => (l4, 2, 0),
        Field::TcpDport if tcp => (l4 + 2, 2, 0),
        Field::UdpSport if udp => (l4, 2, 0),
        Field::UdpDport if udp => (l4 + 2, 2, 0),
        _ => return None,
    })
    .filter(|(at, n, _)| at + n <= frame.len())
}

/// Recompute the IPv4 header checksum, as the device does after rewriting the header.
fn fix_ipv4_checksum(frame: &mut [u8]) {
    let Some((l3, ETH_P_IPV4)) = l3_of(frame) else { return };
    let ihl = usize::from(frame.get(l3).map_or(0, |b| b & 0xf)) * 4;
    let Some(hdr) = frame.get_mut(l3..l3 + ihl.max(20)) else { return };
    hdr[10] = 0;
    hdr[11] = 0;
    let mut sum: u32 =
        hdr.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    hdr[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// The low `bits` bits set.
fn ones(bits: u32) -> u32 {
    if bits >= 32 { u32::MAX } else { (1u32 << bits) - 1 }
}

/// Apply `ops` to `frame` in order; a field the frame lacks is left alone.
pub fn modify(frame: &mut [u8], ops: &[ModifyOp]) {
    let mut ip_changed = false;
    for op in ops {
        let Some((at, n, shift)) = locate(frame, op.field) else { continue };
        let cur = frame[at..at + n].iter().fold(0u32, |v, b| v << 8 | u32::from(*b));
        let field = (cur >> shift) & ones(op.width);
        let new = if op.set {
            let m = ones(op.length) << op.offset;
            (field & !m) | ((op.data << op.offset) & m)
        } else {
            field.wrapping_add(op.data)
        } & ones(op.width);
        let out = (cur & !(ones(op.width) << shift)) | (new << shift);
        for (i, b) in frame[at..at + n].iter_mut().enumerate() {
            *b = (out >> (8 * (n - 1 - i))) as u8;
        }
        ip_changed |= matches!(op.field, Field::IpDscp | Field::IpTtl | Field::Sipv4 | Field::Dipv4);
    }
    if ip_changed {
        fix_ipv4_checksum(frame);
    }
}

/// Insert the 4-byte VLAN header `hdr` (TPID high, TCI low) after the MAC addresses.
pub fn push_vlan(frame: &mut Vec<u8>, hdr: u32) {
    if frame.len() >= 12 {
        frame.splice(12..12, hdr.to_be_bytes());
    }
}

/// Remove the outer VLAN header, if the frame has one.
pub fn pop_vlan(frame: &mut Vec<u8>) {
    if matches!(frame.get(12..14), Some([0x81, 0x00]) | Some([0x88, 0xa8])) && frame.len() >= 18 {
        frame.drain(12..16);
    }
}

/// The IPv4 header at `l3` gets `total_len` and a recomputed checksum.
fn set_ipv4_len(frame: &mut [u8], l3: usize, total_len: usize) {
    if let Some(len) = frame.get_mut(l3 + 2..l3 + 4) {
        len.copy_from_slice(&(total_len.min(0xffff) as u16).to_be_bytes());
    }
    fix_ipv4_checksum(frame);
}

/// L2 to L2 tunnel: `outer` (Ethernet, IP, UDP, tunnel header) in front of the frame, the
/// outer IPv4 total length and checksum and the UDP length and checksum fixed up as the
/// device does (the template's own values are not trusted).
pub fn encap(frame: &mut Vec<u8>, outer: &[u8]) {
    frame.splice(0..0, outer.iter().copied());
    let Some((l3, ETH_P_IPV4)) = l3_of(frame) else { return };
    let total = frame.len() - l3;
    let ihl = usize::from(frame.get(l3).map_or(5, |b| b & 0xf)) * 4;
    let is_udp = frame.get(l3 + 9) == Some(&IPPROTO_UDP);
    set_ipv4_len(frame, l3, total);
    if is_udp && let Some(udp) = frame.get_mut(l3 + ihl..l3 + ihl + 8) {
        udp[4..6].copy_from_slice(&((total - ihl).min(0xffff) as u16).to_be_bytes());
        udp[6..8].copy_from_slice(&[0, 0]);
    }
}

/// The VXLAN UDP port.
const VXLAN_PORT: u16 = 4789;

/// L2 tunnel to L2: a VXLAN frame (outer Ethernet, IPv4 or IPv6, UDP to port 4789, the 8-byte
/// VXLAN header) loses its outer headers; another frame is left as it is.
pub fn decap(frame: &mut Vec<u8>) {
    let Some((l3, ty)) = l3_of(frame) else { return };
    let (l4, proto) = match ty {
        ETH_P_IPV4 => (l3 + usize::from(frame.get(l3).map_or(5, |b| b & 0xf)) * 4, frame.get(l3 + 9).copied()),
        0x86dd => (l3 + 40, frame.get(l3 + 6).copied()),
        _ => return,
    };
    let port = frame.get(l4 + 2..l4 + 4).map(|p| u16::from_be_bytes([p[0], p[1]]));
    if proto == Some(IPPROTO_UDP) && port == Some(VXLAN_PORT) && frame.len() >= l4 + 16 {
        frame.drain(..l4 + 16);
    }
}
