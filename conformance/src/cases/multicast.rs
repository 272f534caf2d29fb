//! UD multicast (items 236–240): the QPs attached to a group take the datagrams sent to QP
//! 0xFFFFFF with its GID, the sender's own QP too; a detached QP takes no more; which GIDs are
//! multicast ones; between processes a group's datagram travels to the group's IPv4 address;
//! the table in which the processes forked from one share its ports' addresses; the switch's
//! table that carries a group's datagram to members on other hosts; a QP still attached cannot
//! be destroyed. Attaching is
//! `ibv_attach_mcast` of the C ABI, so the cases build a simulator of their own and attach
//! through it (skipped on hardware).

use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};

use mlx5_dv::{
    AccessFlags as A, Backend, Contexts as _, Gid, Qp, Queues as _, SendFlags, SendWr, UdDest, qp_type, wc_status,
    wr_opcode,
};
use mlx5_sim::device::engine::multicast::{MULTICAST_QPN, group_of, is_multicast_gid};
use mlx5_sim::fabric::share::Siblings;
use mlx5_sim::packet::{Bth, Deth, Headers, opcode};
use mlx5_sim::profile::ShippedProfiles as _;
use mlx5_sim::wire::{Endpoints, encode};

use super::fixture::*;
use super::uc_ud::{QKEY, bring_up, create};
use crate::case::{Case, Check, Env, Need, Verdict, check, check_eq, expect_ok};

const NEEDS: &[Need] = &[Need::SimControl];

pub(super) const CASES: &[Case] = &[
    Case { name: "mcast.attached_qps_take_a_group_datagram", covers: &[236], needs: NEEDS, run: attached },
    Case { name: "mcast.a_detached_qp_takes_nothing_more", covers: &[237], needs: NEEDS, run: detached },
    Case { name: "mcast.multicast_gids", covers: &[238], needs: NEEDS, run: gids },
    Case { name: "mcast.a_group_datagram_between_processes", covers: &[239], needs: NEEDS, run: between },
    Case { name: "net.forked_processes_share_addresses", covers: &[240], needs: NEEDS, run: siblings },
    Case {
        name: "mcast.a_group_datagram_reaches_members_on_other_hosts",
        covers: &[324],
        needs: NEEDS,
        run: other_hosts,
    },
    Case { name: "mcast.destroying_an_attached_qp_is_ebusy", covers: &[325], needs: NEEDS, run: attached_destroy },
];

/// The group of the cases: 230.0.52.1's IPv4-mapped GID, as rdma_cm makes it on RoCE v2.
fn mgid(last: u8) -> Gid {
    Gid(Ipv4Addr::new(230, 0, 52, last).to_ipv6_mapped().octets())
}

/// A simulator of the default profile, in simulated time.
fn sim() -> Check<mlx5_sim::Simulator> {
    let profile = mlx5_dv::profile::Profile::builtin("cx6dx").map_err(|e| Verdict::fail("cx6dx", "a profile", e))?;
    mlx5_sim::Simulator::new(profile).map_err(|e| Verdict::fail("a simulator", "one", e))
}

/// A UD QP with [`QKEY`] in RTS on device 0 of `b`, and its side.
fn ud(b: &mut dyn Backend) -> Check<Side> {
    let (ctx, pd, cq) = open(b, "mlx5_0")?;
    let qp = create(b, qp_type::UD, pd, &cq)?;
    bring_up(b, qp_type::UD, &qp, None)?;
    Ok(Side { ctx, pd, cq, qp })
}

/// Post a SEND of 64 bytes to group `g` (QP 0xFFFFFF) on `from`.
fn to_group(b: &mut dyn Backend, from: &Side, g: Gid, wr_id: u64) -> Check {
    let (_buf, mr) = region(b, from.pd, 64, &pattern(64, 3), A::LOCAL_WRITE)?;
    let ah = mlx5_dv::AhAttr { is_global: true, dgid: g, sgid_index: 1, hop_limit: 64, port_num: 1, dlid: 0 };
    let ud = Some(UdDest::new(ah, MULTICAST_QPN, QKEY));
    let wr = SendWr {
        wr_id,
        opcode: wr_opcode::SEND,
        send_flags: SendFlags::SIGNALED,
        sge: vec![sge(&mr, 0, 64)],
        ud,
        ..SendWr::default()
    };
    expect_ok("ibv_post_send", b.post_send_wr(&from.qp, &[wr]))
}

/// Send to group `g` from `from`, a QP not in it: its completion.
fn sent(b: &mut dyn Backend, from: &Side, g: Gid, wr_id: u64) -> Check {
    to_group(b, from, g, wr_id)?;
    let got: Vec<_> = poll(b, &from.cq, 1)?.iter().map(|w| (w.wr_id, w.status)).collect();
    check_eq("the sender's completion", got, vec![(wr_id, wc_status::SUCCESS)])
}

/// A receive of 256 bytes posted on `s`.
fn post_recv(b: &mut dyn Backend, s: &Side, wr_id: u64) -> Check {
    let (_buf, mr) = region(b, s.pd, 256, &[], A::LOCAL_WRITE)?;
    recv(b, &s.qp, wr_id, vec![sge(&mr, 0, 256)])
}

/// What `s`'s CQ holds now: (wr_id, status, byte_len) of each completion.
fn taken(b: &mut dyn Backend, s: &Side) -> Check<Vec<(u64, u32, u32)>> {
    let wcs = expect_ok("ibv_poll_cq", b.poll_cq(&s.cq, 8))?;
    Ok(wcs.iter().map(|w| (w.wr_id, w.status, w.byte_len)).collect())
}

fn attach(sim: &mut mlx5_sim::Simulator, qp: &Qp, g: Gid) -> Check {
    check("attach", sim.attach_multicast(0, qp.qp_num, g), "true", false)
}

fn attached(_b: &mut dyn Backend, _env: &Env) -> Check {
    let mut sim = sim()?;
    let (a, r1, r2, other) = (ud(&mut sim)?, ud(&mut sim)?, ud(&mut sim)?, ud(&mut sim)?);
    for s in [&a, &r1, &r2] {
        attach(&mut sim, &s.qp, mgid(1))?;
    }
    for (s, id) in [(&a, 10), (&r1, 11), (&r2, 12), (&other, 13)] {
        post_recv(&mut sim, s, id)?;
    }
    to_group(&mut sim, &a, mgid(1), 1)?;
    let ok = wc_status::SUCCESS;
    let mut own: Vec<_> = poll(&mut sim, &a.cq, 2)?.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    own.sort_unstable();
    let want = vec![(1, ok, mlx5_dv::wc_opcode::SEND), (10, ok, mlx5_dv::wc_opcode::RECV)];
    check_eq("the sender's CQ: its send, and its own datagram as a member (no loopback block)", own, want)?;
    check_eq("the first member: 64 bytes after the GRH area", taken(&mut sim, &r1)?, vec![(11, ok, 104)])?;
    check_eq("the second member", taken(&mut sim, &r2)?, vec![(12, ok, 104)])?;
    check_eq("a QP not attached", taken(&mut sim, &other)?, vec![])
}

fn detached(_b: &mut dyn Backend, _env: &Env) -> Check {
    let mut sim = sim()?;
    let (a, r1, r2) = (ud(&mut sim)?, ud(&mut sim)?, ud(&mut sim)?);
    attach(&mut sim, &r1.qp, mgid(1))?;
    attach(&mut sim, &r2.qp, mgid(1))?;
    check("detach", sim.detach_multicast(0, r2.qp.qp_num, mgid(1)), "true", false)?;
    check("detaching again", !sim.detach_multicast(0, r2.qp.qp_num, mgid(1)), "false", true)?;
    check("attaching a QP number with no QP", !sim.attach_multicast(0, 0xfe_dcba, mgid(1)), "false", true)?;
    post_recv(&mut sim, &r1, 11)?;
    post_recv(&mut sim, &r2, 12)?;
    sent(&mut sim, &a, mgid(1), 1)?;
    check_eq("the member left", taken(&mut sim, &r1)?, vec![(11, wc_status::SUCCESS, 104)])?;
    check_eq("the detached QP", taken(&mut sim, &r2)?, vec![])?;
    // Another group's datagram reaches neither.
    sent(&mut sim, &a, mgid(2), 2)?;
    check_eq("a group nobody joined", taken(&mut sim, &r1)?, vec![])
}

fn gids(_b: &mut dyn Backend, _env: &Env) -> Check {
    let mut ib = [0u8; 16];
    ib[..2].copy_from_slice(&[0xff, 0x12]);
    check("ff12::/16 (IPv6 multicast)", is_multicast_gid(&Gid(ib)), "multicast", false)?;
    check("::ffff:230.0.52.1", is_multicast_gid(&mgid(1)), "multicast", false)?;
    let unicast = Gid(Ipv4Addr::new(127, 0, 52, 1).to_ipv6_mapped().octets());
    check("::ffff:127.0.52.1", !is_multicast_gid(&unicast), "not multicast", true)?;
    check("the zero GID", !is_multicast_gid(&Gid::default()), "not multicast", true)?;
    check_eq("the IPv4 group of ::ffff:230.0.52.1", group_of(&mgid(1)), Some(Ipv4Addr::new(230, 0, 52, 1)))?;
    check_eq("an IPv6 group has no IPv4 address", group_of(&Gid(ib)), None)
}

/// A UD SEND Only to QP 0xFFFFFF from QP 0x42, encoded for the addresses `ep` names.
fn group_datagram(ep: &Endpoints) -> Check<Vec<u8>> {
    let h = Headers {
        bth: Bth { opcode: opcode::UD_SEND_ONLY, pkey: 0xffff, dest_qp: MULTICAST_QPN, ..Bth::default() },
        deth: Some(Deth { qkey: QKEY, src_qp: 0x42 }),
        ..Headers::default()
    };
    encode(&h, &[7u8; 32], ep).map_err(|e| Verdict::fail("encode", "a datagram", e))
}

fn between(_b: &mut dyn Backend, _env: &Env) -> Check {
    let mut sim = sim()?;
    sim.carry_in_memory();
    let r = ud(&mut sim)?;
    attach(&mut sim, &r.qp, mgid(1))?;
    post_recv(&mut sim, &r, 11)?;
    post_recv(&mut sim, &r, 12)?;
    let from = SocketAddrV4::new(Ipv4Addr::new(127, 0, 52, 9), 0xc123);
    let ep = |g: u8| Endpoints::new(IpAddr::V4(*from.ip()), IpAddr::V4(Ipv4Addr::new(230, 0, 52, g)), from.port());
    let other = group_datagram(&ep(2))?;
    check("a datagram for a group the device did not join", !sim.receive_datagram(0, from, &other), "dropped", true)?;
    let good = group_datagram(&ep(1))?;
    check("a datagram for the joined group", sim.receive_datagram(0, from, &good), "taken", false)?;
    let wcs = expect_ok("ibv_poll_cq", sim.poll_cq(&r.cq, 8))?;
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status, w.byte_len, w.src_qp)).collect();
    check_eq("the member's completion: 32 bytes and the GRH area", got, vec![(11, wc_status::SUCCESS, 72, 0x42)])
}

fn siblings(_b: &mut dyn Backend, _env: &Env) -> Check {
    let t = Siblings::new().ok_or_else(|| Verdict::fail("a shared mapping", "one", "none"))?;
    let a = Ipv4Addr::new(127, 0, 52, 1);
    check("entering a socket", t.enter(a, 40_000), "true", false)?;
    check("entering it again", t.enter(a, 40_000), "true", false)?;
    check("entering another", t.enter(a, 40_001), "true", false)?;
    check_eq("the address's sockets, each once", t.ports_of(a), vec![40_000, 40_001])?;
    check_eq("another address", t.ports_of(Ipv4Addr::new(127, 0, 52, 2)), vec![])?;
    let mut entered = 2;
    while t.enter(a, 41_000 + entered) {
        entered += 1;
        if entered > 1000 {
            return Err(Verdict::fail("the table", "bounded", "no end"));
        }
    }
    check_eq("the table holds 64 sockets, then refuses", entered, 64)
}

/// A networked simulator on the first free address of 127.0.`from..=199`.1 (tests and
/// other runs may hold some), with the switch's table in `table`: it and the address taken.
fn hosted(from: u8, table: &std::path::Path) -> Check<(mlx5_sim::Simulator, u8)> {
    for n in from..=199 {
        let mut s = sim()?;
        if s.connect_network(Ipv4Addr::new(127, 0, n, 1)).is_ok() {
            s.use_multicast_table(table).map_err(|e| Verdict::fail("the switch's table", "made", e))?;
            return Ok((s, n));
        }
    }
    Err(Verdict::skip("no free address in 127.0.160.1 to 127.0.199.1 for two hosts"))
}

/// Tick `sim` until `s`'s CQ holds `n` completions, or for `wait`: what it holds. On one
/// machine a datagram is in the receiver's socket once its sendto returns, so a tenth of a
/// second shows that none is coming.
fn receive(
    sim: &mut mlx5_sim::Simulator,
    s: &Side,
    n: usize,
    wait: std::time::Duration,
) -> Check<Vec<(u64, u32, u32)>> {
    let end = std::time::Instant::now() + wait;
    let mut got = Vec::new();
    while got.len() < n && std::time::Instant::now() < end {
        if !sim.tick() {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        got.extend(taken(sim, s)?);
    }
    Ok(got)
}

/// How long to wait for a datagram that should come, and to see that none comes.
const COMES: std::time::Duration = std::time::Duration::from_secs(2);
const NONE: std::time::Duration = std::time::Duration::from_millis(100);

fn other_hosts(_b: &mut dyn Backend, _env: &Env) -> Check {
    // A table of this run's own: runs side by side (threads of one process too) share none.
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let table = std::env::temp_dir().join(format!("mlx5sim-mcast-case-{}-{run}", std::process::id()));
    let _ = std::fs::remove_dir_all(&table);
    let r = (|| {
        let (mut a, n) = hosted(160, &table)?;
        let (mut b, _) = hosted(n + 1, &table)?;
        let (member, sender) = (ud(&mut a)?, ud(&mut b)?);
        post_recv(&mut a, &member, 11)?;
        post_recv(&mut a, &member, 12)?;
        // Before the join the group has no member on host a: the datagram reaches nobody.
        sent(&mut b, &sender, mgid(7), 1)?;
        check_eq("before the join", receive(&mut a, &member, 1, NONE)?, vec![])?;
        attach(&mut a, &member.qp, mgid(7))?;
        sent(&mut b, &sender, mgid(7), 2)?;
        let ok = wc_status::SUCCESS;
        check_eq("the member on the other host", receive(&mut a, &member, 1, COMES)?, vec![(11, ok, 104)])?;
        // Another group's datagram does not reach it; after the detach neither does this one.
        sent(&mut b, &sender, mgid(8), 3)?;
        check_eq("another group", receive(&mut a, &member, 1, NONE)?, vec![])?;
        check("detach", a.detach_multicast(0, member.qp.qp_num, mgid(7)), "true", false)?;
        sent(&mut b, &sender, mgid(7), 4)?;
        check_eq("after the detach", receive(&mut a, &member, 1, NONE)?, vec![])
    })();
    let _ = std::fs::remove_dir_all(&table);
    r
}

fn attached_destroy(_b: &mut dyn Backend, _env: &Env) -> Check {
    let mut sim = sim()?;
    let (a, r) = (ud(&mut sim)?, ud(&mut sim)?);
    attach(&mut sim, &r.qp, mgid(3))?;
    let e = sim.destroy_qp(&r.qp).err().map(|e| e.errno());
    check_eq("ibv_destroy_qp of a QP attached to a group", e, Some(mlx5_dv::errno::EBUSY))?;
    // Still a member: the failed destroy left it as it was.
    post_recv(&mut sim, &r, 11)?;
    sent(&mut sim, &a, mgid(3), 1)?;
    check_eq("the QP still takes the group's datagram", taken(&mut sim, &r)?, vec![(11, wc_status::SUCCESS, 104)])?;
    check("detach", sim.detach_multicast(0, r.qp.qp_num, mgid(3)), "true", false)?;
    expect_ok("ibv_destroy_qp after the detach", sim.destroy_qp(&r.qp))?;
    // A closing context detaches what its QPs left attached: the group is gone with it.
    attach(&mut sim, &a.qp, mgid(4))?;
    expect_ok("ibv_close_device", sim.close_device(a.ctx))?;
    check("a group left with the context", !sim.detach_multicast(0, a.qp.qp_num, mgid(4)), "false", true)
}
