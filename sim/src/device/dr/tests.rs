use super::*;
use mlx5_dv::errno::EINVAL;

/// Ethernet + IPv4 + UDP from 127.0.146.1 to 127.0.146.2, source MAC 00:11:22:33:44:55.
fn frame() -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 6];
    f[0..6].copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
    f[6..12].copy_from_slice(&[0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[127, 0, 146, 1]);
    f[30..34].copy_from_slice(&[127, 0, 146, 2]);
    f
}

const OUTER: u8 = 1;
const SMAC_MASK: [u8; 6] = [0xff; 6];

fn smac(f: &[u8]) -> [u8; 6] {
    let mut m = [0u8; 6];
    m.copy_from_slice(&f[6..12]);
    m
}

#[test]
fn a_root_rule_steers_through_a_table_to_a_qp_with_its_tag_and_counters() -> Result<(), &'static str> {
    let mut dr = Dr::default();
    let root = dr.add_table(NIC_RX, 0);
    let t1 = dr.add_table(NIC_RX, 1);
    let rm = dr.add_matcher(root, 0, OUTER, SMAC_MASK.to_vec());
    let m1 = dr.add_matcher(t1, 1, OUTER, SMAC_MASK.to_vec());
    dr.add_rule(rm, smac(&frame()).to_vec(), vec![DrAct::Table(t1)]);
    dr.add_rule(m1, smac(&frame()).to_vec(), vec![DrAct::Tag(0x123), DrAct::Qp(7), DrAct::Counter(3)]);
    let out = dr.process(NIC_RX, &frame()).ok_or("no root rule matched")?;
    assert_eq!(out.delivered, vec![(DrDest::Qp(7), frame(), Some(0x123))]);
    assert_eq!(out.counted, vec![(3, frame().len() as u64)], "a counter after the destination still counts");
    let mut other = frame();
    other[11] = 0x56;
    assert_eq!(dr.process(NIC_RX, &other), None, "no root rule matches another source MAC");
    assert_eq!(dr.process(NIC_TX, &frame()), None, "receive rules do not see sent frames");
    Ok(())
}

#[test]
fn matchers_go_by_priority_and_a_table_miss_takes_the_default() {
    let mut dr = Dr::default();
    let root = dr.add_table(NIC_TX, 0);
    let t1 = dr.add_table(NIC_TX, 1);
    let rm = dr.add_matcher(root, 0, OUTER, SMAC_MASK.to_vec());
    dr.add_rule(rm, smac(&frame()).to_vec(), vec![DrAct::Table(t1)]);
    let drop = dr.add_matcher(t1, 2, OUTER, SMAC_MASK.to_vec());
    dr.add_rule(drop, smac(&frame()).to_vec(), vec![DrAct::Drop]);
    assert_eq!(dr.process(NIC_TX, &frame()).map(|o| o.wire.len()), Some(0), "dropped before the wire");
    let miss = dr.add_matcher(t1, 1, OUTER, SMAC_MASK.to_vec());
    dr.add_rule(miss, smac(&frame()).to_vec(), vec![DrAct::DefaultMiss]);
    assert_eq!(dr.process(NIC_TX, &frame()).map(|o| o.wire), Some(vec![frame()]), "priority 1 before 2");
    dr.remove(miss);
    let mut other = frame();
    other[6] = 0x88;
    dr.add_rule(rm, smac(&other).to_vec(), vec![DrAct::Table(t1)]);
    assert_eq!(dr.process(NIC_TX, &other).map(|o| o.wire), Some(vec![other]), "a miss in a TX table goes out");
}

#[test]
fn header_rewrites_vlan_push_and_pop() -> Result<(), (i32, String)> {
    // SET OUT_SMAC_47_16 (32 bits) to 0x88888888 and OUT_SMAC_15_0 (16 bits) to 0x8888.
    let mut acts = Vec::new();
    acts.extend_from_slice(&(1u32 << 28 | 0x1 << 16).to_be_bytes());
    acts.extend_from_slice(&0x8888_8888u32.to_be_bytes());
    acts.extend_from_slice(&(1u32 << 28 | 0x2 << 16 | 16).to_be_bytes());
    acts.extend_from_slice(&0x8888u32.to_be_bytes());
    let ops = parse_modify(&acts)?;
    let mut f = frame();
    rewrite::modify(&mut f, &ops);
    assert_eq!(smac(&f), [0x88; 6]);
    assert_eq!(f[12..], frame()[12..], "nothing else changes");
    // A TTL decrement by adding 0xff, and the IPv4 checksum follows.
    let ttl = [(2u32 << 28 | 0xa << 16).to_be_bytes(), 0xffu32.to_be_bytes()].concat();
    rewrite::modify(&mut f, &parse_modify(&ttl)?);
    assert_eq!(f[22], 63);
    let sum: u32 = f[14..34].chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff, "a valid header checksum");
    assert_eq!(parse_modify(&acts[..12]).map_err(|e| e.0), Err(EINVAL), "not whole actions");
    let unknown = [(1u32 << 28 | 0x7ff << 16).to_be_bytes(), [0; 4]].concat();
    assert_eq!(parse_modify(&unknown).map_err(|e| e.0), Err(EINVAL), "an unknown field");
    let mut v = frame();
    rewrite::push_vlan(&mut v, 0x8100_6005);
    assert_eq!(v[12..18], [0x81, 0x00, 0x60, 0x05, 0x08, 0x00]);
    rewrite::pop_vlan(&mut v);
    assert_eq!(v, frame());
    rewrite::pop_vlan(&mut v);
    assert_eq!(v, frame(), "an untagged frame keeps its bytes");
    Ok(())
}

#[test]
fn a_sampler_takes_one_in_ratio_and_every_frame_goes_on() -> Result<(), &'static str> {
    let mut dr = Dr::default();
    let root = dr.add_table(NIC_RX, 0);
    let next = dr.add_table(NIC_RX, 2);
    let rm = dr.add_matcher(root, 0, OUTER, SMAC_MASK.to_vec());
    let sampler = DrAct::Sampler { key: 9, ratio: 4, next, sample: vec![DrAct::Counter(1), DrAct::Tir(5)] };
    dr.add_rule(rm, smac(&frame()).to_vec(), vec![sampler]);
    let nm = dr.add_matcher(next, 1, OUTER, SMAC_MASK.to_vec());
    dr.add_rule(nm, smac(&frame()).to_vec(), vec![DrAct::Counter(2)]);
    let (mut sampled, mut all) = (0, 0);
    for _ in 0..10 {
        let out = dr.process(NIC_RX, &frame()).ok_or("no root rule matched")?;
        sampled += out.counted.iter().filter(|(c, _)| *c == 1).count();
        all += out.counted.iter().filter(|(c, _)| *c == 2).count();
    }
    assert_eq!((sampled, all), (3, 10), "frames 0, 4 and 8 are sampled");
    Ok(())
}

#[test]
fn duplicates_are_found_under_the_mask_and_loops_end() {
    let mut dr = Dr::default();
    let t = dr.add_table(NIC_RX, 1);
    let m = dr.add_matcher(t, 0, OUTER, SMAC_MASK.to_vec());
    dr.add_rule(m, vec![1, 2, 3, 4, 5, 6, 0xff, 0xff], vec![DrAct::Table(t)]);
    assert!(dr.has_duplicate(m, &[1, 2, 3, 4, 5, 6]), "bytes past the mask do not count");
    assert!(!dr.has_duplicate(m, &[1, 2, 3, 4, 5, 7]));
    let root = dr.add_table(NIC_RX, 0);
    let rm = dr.add_matcher(root, 0, 0, Vec::new());
    dr.add_rule(rm, Vec::new(), vec![DrAct::Table(t)]);
    let mut f = frame();
    f[6..12].copy_from_slice(&[1, 2, 3, 4, 5, 6]);
    assert_eq!(dr.process(NIC_RX, &f), Some(DrOutcome::default()), "a table that sends to itself ends");
    assert!(dr.dump(&[root, t]).lines().count() >= 6, "tables, matchers and rules in the dump");
}
