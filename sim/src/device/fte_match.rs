//! Matching a frame against an `fte_match_param` mask and value, as a flow table entry of the
//! NIC does: the frame's outer headers are laid out as `fte_match_set_lyr_2_4` and every
//! masked bit must equal the value's. Only the outer headers are simulated; a mask with bits
//! in a section `match_criteria_enable` leaves out is the caller's to refuse.

use mlx5_dv::prm::{Field, fte_match as m};

const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_IPV4: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

/// `sizeof(fte_match_param)`: the most match bytes the kernel takes.
pub const PARAM_SIZE: usize = 0x200;

/// The outer headers of a frame.
pub type Outer = [u8; m::SECTION_SIZE];

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn set(img: &mut Outer, f: Field, v: u64) {
    // Every field lies inside the section, so the set cannot fail.
    let _ = f.set(img, v);
}

/// Put a MAC's first 4 bytes in `high` and its last 2 in `low`.
fn set_mac(img: &mut Outer, high: Field, low: Field, mac: &[u8]) {
    let v = mac.iter().fold(0u64, |v, x| v << 8 | u64::from(*x));
    set(img, high, v >> 16);
    set(img, low, v & 0xffff);
}

/// The outer headers of `frame` as `fte_match_set_lyr_2_4`: `None` for a frame shorter than
/// its Ethernet header; layers the frame lacks stay zero.
pub fn outer_headers(frame: &[u8]) -> Option<Outer> {
    let mut img = [0u8; m::SECTION_SIZE];
    set_mac(&mut img, m::DMAC_47_16, m::DMAC_15_0, frame.get(0..6)?);
    set_mac(&mut img, m::SMAC_47_16, m::SMAC_15_0, frame.get(6..12)?);
    let mut at = 12;
    let mut ty = be16(frame, at)?;
    if ty == ETH_P_8021Q {
        let tci = be16(frame, at + 2)?;
        set(&mut img, m::CVLAN_TAG, 1);
        set(&mut img, m::FIRST_PRIO, u64::from(tci >> 13));
        set(&mut img, m::FIRST_CFI, u64::from(tci >> 12 & 1));
        set(&mut img, m::FIRST_VID, u64::from(tci & 0xfff));
        at += 4;
        ty = be16(frame, at)?;
    }
    set(&mut img, m::ETHERTYPE, u64::from(ty));
    at += 2;
    let (proto, l4_at) = match ty {
        ETH_P_IPV4 => {
            let Some(ip) = frame.get(at..at + 20) else { return Some(img) };
            let ihl = ip[0] & 0xf;
            set(&mut img, m::IP_VERSION, 4);
            set(&mut img, m::IPV4_IHL, u64::from(ihl));
            set(&mut img, m::IP_DSCP, u64::from(ip[1] >> 2));
            set(&mut img, m::IP_ECN, u64::from(ip[1] & 3));
            // More fragments, or an offset: a fragment.
            let frag = ip[6] & 0x20 != 0 || u16::from_be_bytes([ip[6] & 0x1f, ip[7]]) != 0;
            set(&mut img, m::FRAG, u64::from(frag));
            set(&mut img, m::IP_TTL_HOPLIMIT, u64::from(ip[8]));
            set(&mut img, m::IP_PROTOCOL, u64::from(ip[9]));
            img[m::SRC_IP_BYTE + 12..m::SRC_IP_BYTE + 16].copy_from_slice(&ip[12..16]);
            img[m::DST_IP_BYTE + 12..m::DST_IP_BYTE + 16].copy_from_slice(&ip[16..20]);
            (ip[9], at + usize::from(ihl.max(5)) * 4)
        }
        ETH_P_IPV6 => {
            let Some(ip) = frame.get(at..at + 40) else { return Some(img) };
            let tc = (ip[0] << 4) | (ip[1] >> 4);
            set(&mut img, m::IP_VERSION, 6);
            set(&mut img, m::IP_DSCP, u64::from(tc >> 2));
            set(&mut img, m::IP_ECN, u64::from(tc & 3));
            set(&mut img, m::IP_TTL_HOPLIMIT, u64::from(ip[7]));
            set(&mut img, m::IP_PROTOCOL, u64::from(ip[6]));
            img[m::SRC_IP_BYTE..m::SRC_IP_BYTE + 16].copy_from_slice(&ip[8..24]);
            img[m::DST_IP_BYTE..m::DST_IP_BYTE + 16].copy_from_slice(&ip[24..40]);
            (ip[6], at + 40)
        }
        _ => return Some(img),
    };
    let ports = (be16(frame, l4_at), be16(frame, l4_at + 2));
    match (proto, ports) {
        (IPPROTO_TCP, (Some(s), Some(d))) => {
            set(&mut img, m::TCP_SPORT, u64::from(s));
            set(&mut img, m::TCP_DPORT, u64::from(d));
            if let Some(f) = be16(frame, l4_at + 12) {
                set(&mut img, m::TCP_FLAGS, u64::from(f & 0x1ff));
            }
        }
        (IPPROTO_UDP, (Some(s), Some(d))) => {
            set(&mut img, m::UDP_SPORT, u64::from(s));
            set(&mut img, m::UDP_DPORT, u64::from(d));
        }
        _ => {}
    }
    Some(img)
}

/// Whether `frame` matches: each masked bit of the outer headers equals the value's, when
/// `criteria` enables the outer headers (without it, every frame matches). A mask or value
/// shorter than the outer headers reads as zeros past its end.
pub fn matches(criteria: u8, mask: &[u8], value: &[u8], frame: &[u8]) -> bool {
    let Some(img) = outer_headers(frame) else { return false };
    if criteria & m::CRITERIA_OUTER == 0 {
        return true;
    }
    let byte = |b: &[u8], i: usize| b.get(i).copied().unwrap_or(0);
    (0..m::SECTION_SIZE).all(|i| img[i] & byte(mask, i) == byte(value, i) & byte(mask, i))
}

/// Whether `mask` sets bits only in sections `criteria` enables (`match_criteria_enable`), and
/// no byte past the seven sections.
pub fn mask_within_criteria(criteria: u8, mask: &[u8]) -> bool {
    mask.chunks(m::SECTION_SIZE).enumerate().all(|(i, sec)| {
        let enabled = i < m::SECTIONS && criteria & (1 << i) != 0;
        enabled || sec.iter().all(|b| *b == 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet + VLAN 5 + IPv4 + TCP from 127.0.62.1:1000 to 127.0.62.2:2000, SYN.
    fn frame() -> Vec<u8> {
        let mut f = vec![0u8; 18 + 20 + 20];
        f[0..6].copy_from_slice(&[0, 1, 2, 3, 4, 5]);
        f[6..12].copy_from_slice(&[0x24, 0x8a, 7, 0xa5, 0x28, 0xc8]);
        f[12..14].copy_from_slice(&ETH_P_8021Q.to_be_bytes());
        f[14..16].copy_from_slice(&(0x6000u16 | 5).to_be_bytes());
        f[16..18].copy_from_slice(&ETH_P_IPV4.to_be_bytes());
        f[18] = 0x45;
        f[19] = 0x2e << 2 | 1;
        f[26] = 64;
        f[27] = IPPROTO_TCP;
        f[30..34].copy_from_slice(&[127, 0, 62, 1]);
        f[34..38].copy_from_slice(&[127, 0, 62, 2]);
        f[38..40].copy_from_slice(&1000u16.to_be_bytes());
        f[40..42].copy_from_slice(&2000u16.to_be_bytes());
        f[51] = 0x02;
        f
    }

    #[test]
    fn outer_header_fields_of_a_tagged_tcp_frame() -> Result<(), Box<dyn std::error::Error>> {
        let img = outer_headers(&frame()).ok_or("no outer headers")?;
        assert_eq!((m::SMAC_47_16.get(&img)?, m::SMAC_15_0.get(&img)?), (0x248a_07a5, 0x28c8));
        assert_eq!((m::DMAC_47_16.get(&img)?, m::DMAC_15_0.get(&img)?), (0x0001_0203, 0x0405));
        assert_eq!(m::ETHERTYPE.get(&img)?, u64::from(ETH_P_IPV4), "the EtherType after the tag");
        assert_eq!((m::CVLAN_TAG.get(&img)?, m::FIRST_PRIO.get(&img)?, m::FIRST_VID.get(&img)?), (1, 3, 5));
        assert_eq!((m::IP_VERSION.get(&img)?, m::IP_PROTOCOL.get(&img)?, m::IPV4_IHL.get(&img)?), (4, 6, 5));
        assert_eq!((m::IP_DSCP.get(&img)?, m::IP_ECN.get(&img)?, m::IP_TTL_HOPLIMIT.get(&img)?), (0x2e, 1, 64));
        assert_eq!((m::TCP_SPORT.get(&img)?, m::TCP_DPORT.get(&img)?, m::TCP_FLAGS.get(&img)?), (1000, 2000, 2));
        assert_eq!((m::UDP_SPORT.get(&img)?, m::FRAG.get(&img)?), (0, 0));
        assert_eq!(img[m::SRC_IP_BYTE + 12..m::SRC_IP_BYTE + 16], [127, 0, 62, 1]);
        assert_eq!(img[m::DST_IP_BYTE + 12..m::DST_IP_BYTE + 16], [127, 0, 62, 2]);
        Ok(())
    }

    #[test]
    fn masked_bits_decide_under_the_outer_criteria() {
        let smac_mask = [0xff; 6];
        let smac = [0x24, 0x8a, 7, 0xa5, 0x28, 0xc8];
        assert!(matches(m::CRITERIA_OUTER, &smac_mask, &smac, &frame()), "a 6-byte smac mask and value");
        assert!(!matches(m::CRITERIA_OUTER, &smac_mask, &[0x88; 6], &frame()));
        assert!(matches(0, &smac_mask, &[0x88; 6], &frame()), "outer headers not enabled");
        assert!(matches(m::CRITERIA_OUTER, &[0u8; 0x180], &[0u8; 0x180], &frame()), "an empty mask");
        assert!(!matches(m::CRITERIA_OUTER, &[], &[], &[0u8; 10]), "a runt frame");
        let mut udp_mask = [0u8; 64];
        let _ = m::UDP_DPORT.set(&mut udp_mask, 0xffff);
        assert!(!matches(m::CRITERIA_OUTER, &udp_mask, &udp_mask, &frame()), "a UDP port on a TCP frame");
    }

    #[test]
    fn mask_bits_outside_the_enabled_sections() {
        let mut mask = vec![0u8; 0x180];
        mask[0] = 0xff;
        assert!(mask_within_criteria(m::CRITERIA_OUTER, &mask));
        assert!(!mask_within_criteria(0, &mask));
        mask[0x40] = 1;
        assert!(!mask_within_criteria(m::CRITERIA_OUTER, &mask), "misc parameters not enabled");
        assert!(mask_within_criteria(0b11, &mask));
        assert!(!mask_within_criteria(0x7f, &[1u8; 0x1c1]), "past the seven sections");
    }
}
