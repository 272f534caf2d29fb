//! Receive side scaling: an RSS QP (a TIR over an RQ table) hashes the fields its
//! `rx_hash_fields_mask` selects with Toeplitz under its key, and the hash's low bits pick the
//! entry of its indirection table, a receive WQ, that takes the frame.
//!
//! The hash input follows Microsoft's RSS specification: source address, destination
//! address, source port, destination port, each in network order, of those selected. A frame
//! without the selected L3 (an IPv6 frame under IPv4 fields) or L4 contributes nothing for
//! those fields, so hashes over less (down to 0, the table's first entry).

use mlx5_dv::rx_hash_fields as f;

use super::steering::{self, IPPROTO_TCP, IPPROTO_UDP};

/// An RSS QP as the device keeps it: its hash and its table of WQ numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RssTir {
    /// The 40-byte Toeplitz key.
    pub key: [u8; mlx5_dv::TOEPLITZ_KEY_LEN],
    /// `rx_hash_fields_mask`.
    pub fields: u64,
    /// The indirection table: WQ numbers, a power of two of them.
    pub table: Vec<u32>,
}

/// The Toeplitz hash of `input` under `key`: for each set bit of the input (most significant
/// bit of the first byte first), the 32 key bits starting at that bit position are XORed
/// into the result. Input past the key's reach (`8 * key.len() - 32` bits) is ignored.
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let mut hash = 0u32;
    let mut window = key.iter().take(4).fold(0u32, |w, b| (w << 8) | u32::from(*b));
    for (next, byte) in (4..).zip(input) {
        let incoming = key.get(next).copied();
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                hash ^= window;
            }
            let Some(k) = incoming else {
                // Beyond the key: no more windows.
                if bit == 7 {
                    return hash;
                }
                window <<= 1;
                continue;
            };
            window = (window << 1) | u32::from((k >> (7 - bit)) & 1);
        }
    }
    hash
}

/// The bytes the hash reads from `frame` for `fields`.
pub fn hash_input(fields: u64, frame: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(36);
    let Some(p) = steering::parse(frame) else { return out };
    if let Some(v4) = p.ipv4.filter(|_| fields & (f::SRC_IPV4 | f::DST_IPV4) != 0) {
        if fields & f::SRC_IPV4 != 0 {
            out.extend_from_slice(&v4.src_ip);
        }
        if fields & f::DST_IPV4 != 0 {
            out.extend_from_slice(&v4.dst_ip);
        }
    }
    if let Some(v6) = p.ipv6.filter(|_| fields & (f::SRC_IPV6 | f::DST_IPV6) != 0) {
        if fields & f::SRC_IPV6 != 0 {
            out.extend_from_slice(&v6.src_ip);
        }
        if fields & f::DST_IPV6 != 0 {
            out.extend_from_slice(&v6.dst_ip);
        }
    }
    let (src, dst) = match p.l4 {
        Some((IPPROTO_TCP, _)) => (f::SRC_PORT_TCP, f::DST_PORT_TCP),
        Some((IPPROTO_UDP, _)) => (f::SRC_PORT_UDP, f::DST_PORT_UDP),
        _ => (0, 0),
    };
    if let Some((_, ports)) = p.l4 {
        if fields & src != 0 {
            out.extend_from_slice(&ports.src_port.to_be_bytes());
        }
        if fields & dst != 0 {
            out.extend_from_slice(&ports.dst_port.to_be_bytes());
        }
    }
    out
}

impl RssTir {
    /// The WQ number `frame` lands on.
    pub fn pick(&self, frame: &[u8]) -> Option<u32> {
        let h = toeplitz(&self.key, &hash_input(self.fields, frame));
        let n = self.table.len();
        (n > 0).then(|| self.table[h as usize & (n - 1)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of Microsoft's RSS verification suite.
    const KEY: [u8; 40] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca,
        0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b,
        0xbe, 0xac, 0x01, 0xfa,
    ];

    fn tuple(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut v = src.to_vec();
        v.extend_from_slice(&dst);
        v.extend_from_slice(&sport.to_be_bytes());
        v.extend_from_slice(&dport.to_be_bytes());
        v
    }

    #[test]
    fn toeplitz_gives_the_verification_suite_hashes() {
        // (source, destination, IPv4-only hash, with TCP ports)
        let cases = [
            (([66, 9, 149, 187], 2794), ([161, 142, 100, 80], 1766), 0x323e_8fc2, 0x51cc_c178),
            (([199, 92, 111, 2], 14230), ([65, 69, 140, 83], 4739), 0xd718_262a, 0xc626_b0ea),
            (([24, 19, 198, 95], 12898), ([12, 22, 207, 184], 38024), 0xd2d0_a5de, 0x5c2b_394a),
            (([38, 27, 205, 30], 48228), ([209, 142, 163, 6], 2217), 0x8298_9176, 0xafc7_327f),
            (([153, 39, 163, 191], 44251), ([202, 188, 127, 2], 1303), 0x5d18_09c5, 0x10e8_28a2),
        ];
        for ((s, sp), (d, dp), ip, tcp) in cases {
            let t = tuple(s, d, sp, dp);
            assert_eq!(toeplitz(&KEY, &t[..8]), ip, "{s:?} -> {d:?}");
            assert_eq!(toeplitz(&KEY, &t), tcp, "{s:?}:{sp} -> {d:?}:{dp}");
        }
        assert_eq!(toeplitz(&KEY, &[]), 0);
    }

    fn udp_frame(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut fr = vec![0u8; 14 + 20 + 8];
        fr[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        fr[14] = 0x45;
        fr[23] = IPPROTO_UDP;
        fr[26..30].copy_from_slice(&src);
        fr[30..34].copy_from_slice(&dst);
        fr[34..36].copy_from_slice(&1000u16.to_be_bytes());
        fr[36..38].copy_from_slice(&2000u16.to_be_bytes());
        fr
    }

    #[test]
    fn the_selected_fields_are_hashed_and_the_low_bits_pick_the_wq() {
        let fr = udp_frame([66, 9, 149, 187], [161, 142, 100, 80]);
        assert_eq!(
            hash_input(f::SRC_IPV4 | f::DST_IPV4, &fr),
            tuple([66, 9, 149, 187], [161, 142, 100, 80], 0, 0)[..8]
        );
        assert_eq!(hash_input(f::DST_PORT_UDP, &fr), 2000u16.to_be_bytes());
        assert!(hash_input(f::SRC_PORT_TCP | f::SRC_IPV6, &fr).is_empty(), "TCP and IPv6 fields on UDP over IPv4");
        let tir = RssTir { key: KEY, fields: f::SRC_IPV4 | f::DST_IPV4, table: (10..18).collect() };
        // 0x323e8fc2: the low three bits are 2.
        assert_eq!(tir.pick(&fr), Some(12));
        let empty = RssTir { table: vec![], ..tir };
        assert_eq!(empty.pick(&fr), None);
    }
}
