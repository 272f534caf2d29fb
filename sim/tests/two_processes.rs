//! The suite's traffic scenarios with their two devices in two OS processes, talking RoCE v2
//! over UDP on loopback: each test (the parent) runs a `Simulator` at 127.0.`n`.1 and re-executes
//! this binary as its peer (`peer_process`, a simulator at 127.0.`n+1`.1), which it drives through
//! the child's stdin and stdout with a line protocol.
//!
//! Protocol (parent → peer, one reply line each, tagged with [`TAG`] to be told apart from the
//! test harness's own lines on stdout): `connect <qpn> <gid> <timeout> <retry_cnt>
//! <rnr_retry> <min_rnr_timer>` → `ok`; `region <len> <seed> <access>` → `region <i> <addr>
//! <rkey>`; `recv <wr_id> <i>:<off>:<len>...` → `ok`; `contents <i>` → `data <hex>`; `wc <n>` →
//! `wc` and every completion polled so far (waiting for `n`); `state` → `state <n>`; `reset` →
//! `ok`; `bye` → `bye`. The peer starts with `hello <qpn> <gid>`; a failure is `err <why>`.
//!
//! Both processes tick their own simulator all the time (the peer reads stdin on a thread of its
//! own), every wait is bounded by [`STEP`], and a peer whose test fails is killed by
//! [`Peer`]'s `Drop`; a peer whose stdin closes (its parent died) ends.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use mlx5_dv::prelude::*;
use mlx5_dv::{
    AccessFlags as A, AhAttr, Buf, Cq, Gid, Mr, PdHandle, Qp, QpAttrExt, QpAttrMask as M, QpCap, QpDest, QpInitAttr,
    QpModify, QpState, RecvWr, SendFlags, Sge, Wc, WrOp, wc_flags, wc_opcode, wc_status,
};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};

/// Set (to the peer's address) in the environment of the re-executed binary.
const PEER_ENV: &str = "MLX5SIM_TWO_PROC_PEER";
/// Marks a protocol line on the peer's stdout.
const TAG: &str = "mlx5sim-peer:";
/// How long any one exchange may take before the test fails rather than hang.
const STEP: Duration = Duration::from_secs(10);
/// How long a peer lives at most, whatever its parent does.
const PEER_LIFE: Duration = Duration::from_secs(60);
/// `IBV_MTU_256`: the 1000-byte WRITE takes four packets.
const MTU_256: u32 = 1;
/// The suite's QP access (fixture's `QP_ACCESS`).
const QP_ACCESS: A = A::LOCAL_WRITE.union(A::REMOTE_WRITE).union(A::REMOTE_READ);
/// 16 WRs, 4 SGEs each way (fixture's `CAP`).
const CAP: QpCap = QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 0 };

type R<T = ()> = Result<T, String>;

trait Ctx<T> {
    fn ctx(self, what: &str) -> R<T>;
}

impl<T, E: std::fmt::Debug> Ctx<T> for Result<T, E> {
    fn ctx(self, what: &str) -> R<T> {
        self.map_err(|e| format!("{what}: {e:?}"))
    }
}

macro_rules! ensure {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            return Err(format!($($why)+));
        }
    };
}

/// A connection's `[timeout, retry_cnt, rnr_retry, min_rnr_timer]`. The ACK timeout is long
/// (67 ms, 8 tries) unless a test wants it short: two busy processes on a loaded machine may
/// wait for the scheduler.
type Link = [u8; 4];

const LINK: Link = [14, 7, 7, 1];

/// One process's host: its simulator, a PD, a CQ and an RC QP, its registered regions and the
/// completions polled and not yet taken.
struct Host {
    sim: Simulator,
    ctx: mlx5_dv::ContextHandle,
    pd: PdHandle,
    cq: Cq,
    qp: Qp,
    regions: Vec<(Buf, Mr)>,
    wcs: VecDeque<Wc>,
}

impl Host {
    fn new(addr: Ipv4Addr) -> R<Host> {
        let mut sim = Simulator::with_host(Profile::builtin("cx6dx").ctx("profile")?, u32::from(addr.octets()[2]))
            .ctx("simulator")?;
        sim.connect_network(addr).ctx("connect_network")?;
        let ctx = sim.open_ibv_device("mlx5_0").ctx("open")?;
        let pd = sim.alloc_pd(ctx).ctx("pd")?;
        let cq = sim.create_cq(ctx, 64).ctx("cq")?;
        let qp = sim.create_qp(&QpInitAttr::rc(pd, cq.handle, CAP, None)).ctx("qp")?;
        Ok(Host { sim, ctx, pd, cq, qp, regions: Vec::new(), wcs: VecDeque::new() })
    }

    /// GID 3: the IPv4-mapped RoCE v2 GID of the address.
    fn gid(&self) -> Gid {
        self.sim.gid_table(0)[3].0
    }

    /// RESET → INIT → RTR (to `qpn` at `gid`, from GID 3) → RTS with `link`'s attributes.
    fn connect(&mut self, qpn: u32, gid: Gid, link: Link) -> R {
        let port = self.sim.query_port(self.ctx, 1).ctx("query_port")?;
        let ah = AhAttr { dlid: port.lid, is_global: true, dgid: gid, sgid_index: 3, hop_limit: 64, port_num: 1 };
        let dest = QpDest { dest_qp_num: qpn, ah, path_mtu: MTU_256 };
        let [timeout, retry_cnt, rnr_retry, min_rnr_timer] = link;
        let ext = QpAttrExt { timeout, retry_cnt, rnr_retry, min_rnr_timer, ..QpAttrExt::defaults() };
        for (from, to, dest) in [
            (QpState::Reset, QpState::Init, None),
            (QpState::Init, QpState::Rtr, Some(dest)),
            (QpState::Rtr, QpState::Rts, None),
        ] {
            let (required, _) = mlx5_dv::qp_transition(mlx5_dv::qp_type::RC, from, to).ok_or("no such transition")?;
            let ext = QpAttrExt { mask: M::STATE | required, ..ext };
            self.sim.modify_qp(&self.qp, &QpModify::exact(to, QP_ACCESS, dest, ext)).ctx("modify_qp")?;
        }
        Ok(())
    }

    /// A region of `len` bytes holding `pattern(len, seed)`, registered with `access`: its index.
    fn region(&mut self, len: usize, seed: u8, access: A) -> R<usize> {
        let buf = self.sim.alloc_buf(len).ctx("alloc_buf")?;
        self.sim.write_buf(&buf, 0, &pattern(len, seed)).ctx("write_buf")?;
        let mr = self.sim.reg_mr(self.pd, buf.addr, len as u64, access).ctx("reg_mr")?;
        self.regions.push((buf, mr));
        Ok(self.regions.len() - 1)
    }

    fn mr(&self, i: usize) -> R<Mr> {
        self.regions.get(i).map(|r| r.1).ok_or_else(|| format!("no region {i}"))
    }

    fn contents(&mut self, i: usize) -> R<Vec<u8>> {
        let buf = self.regions.get(i).ok_or_else(|| format!("no region {i}"))?.0;
        self.sim.read_buf(&buf, 0, buf.len).ctx("read_buf")
    }

    fn state(&mut self) -> R<QpState> {
        self.sim.query_qp_state(&self.qp).ctx("query_qp_state")
    }

    /// One device pass and a poll: whether anything moved.
    fn step(&mut self) -> R<bool> {
        let moved = self.sim.tick();
        let got = self.sim.poll_cq(&self.cq, 16).ctx("poll_cq")?;
        let polled = !got.is_empty();
        self.wcs.extend(got);
        Ok(moved || polled)
    }

    /// Step until `n` completions wait (or `limit` passed), then 5 ms more so that one too
    /// many would show: every completion polled, taken.
    fn completions(&mut self, n: usize, limit: Duration) -> R<Vec<Wc>> {
        let start = Instant::now();
        while self.wcs.len() < n && start.elapsed() < limit {
            if !self.step()? {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        let settle = Instant::now();
        while settle.elapsed() < Duration::from_millis(5) {
            self.step()?;
        }
        Ok(self.wcs.drain(..).collect())
    }
}

/// The suite's pattern (fixture's `pattern`).
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1).collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> R<Vec<u8>> {
    ensure!(s.len().is_multiple_of(2), "odd hex {s:?}");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ctx("hex")).collect()
}

fn gid_of(s: &str) -> R<Gid> {
    Ok(Gid(unhex(s)?.try_into().map_err(|v| format!("a GID of {v:?}"))?))
}

fn num<T: std::str::FromStr>(s: Option<&str>) -> R<T> {
    s.and_then(|s| s.parse().ok()).ok_or_else(|| format!("a number, not {s:?}"))
}

/// A completion on the wire: `wr_id,status,opcode,byte_len,imm,flags,qp_num,vendor_err,src_qp`.
fn wc_line(w: &Wc) -> String {
    let v = [w.status, w.opcode, w.byte_len, w.imm_data, w.wc_flags.bits(), w.qp_num, w.vendor_err, w.src_qp];
    std::iter::once(w.wr_id.to_string()).chain(v.iter().map(u32::to_string)).collect::<Vec<_>>().join(",")
}

fn parse_wc(s: &str) -> R<Wc> {
    let v: Vec<&str> = s.split(',').collect();
    ensure!(v.len() == 9, "a completion, not {s:?}");
    let n = |i: usize| num::<u32>(Some(v[i]));
    let (status, opcode, byte_len, imm_data, qp_num, vendor_err, src_qp) =
        (n(1)?, n(2)?, n(3)?, n(4)?, n(6)?, n(7)?, n(8)?);
    let wc_flags = mlx5_dv::WcFlags::from_bits_truncate(n(5)?);
    Ok(Wc {
        wr_id: num(Some(v[0]))?,
        status,
        opcode,
        byte_len,
        imm_data,
        wc_flags,
        qp_num,
        vendor_err,
        src_qp,
        ..Wc::default()
    })
}

fn sge(mr: &Mr, off: u64, len: u32) -> Sge {
    Sge { addr: mr.addr + off, length: len, lkey: mr.lkey }
}

fn write(wr_id: u64, rkey: u32, remote_addr: u64, sge: Vec<Sge>) -> WrOp {
    WrOp::RdmaWrite { wr_id, flags: SendFlags::SIGNALED, rkey, remote_addr, sge }
}

fn send(wr_id: u64, sge: Vec<Sge>) -> WrOp {
    WrOp::Send { wr_id, flags: SendFlags::SIGNALED, sge }
}

/// Both QPs in ERR (the responder's too, as on hardware: not in the suite's cases).
fn both_in_err(m: &mut Host, peer: &mut Peer) -> R {
    let states = (m.state()? as u32, peer.state(m)?);
    ensure!(states == (QpState::Err as u32, QpState::Err as u32), "(requester, responder) QP states {states:?}");
    Ok(())
}

/// `(wr_id, status, opcode)` of each completion.
fn summary(w: &[Wc]) -> Vec<(u64, u32, u32)> {
    w.iter().map(|c| (c.wr_id, c.status, c.opcode)).collect()
}

// ---------------------------------------------------------------- the peer

/// The peer's side of the protocol: runs only in the re-executed binary, where [`PEER_ENV`]
/// holds the peer's address; in an ordinary test run (the variable absent) it returns at once.
#[test]
fn peer_process() -> R {
    let Ok(addr) = std::env::var(PEER_ENV) else { return Ok(()) };
    let addr: Ipv4Addr = addr.parse().ctx("the peer's address")?;
    let mut h = Host::new(addr)?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || std::io::stdin().lines().map_while(Result::ok).try_for_each(|l| tx.send(l)));
    say(&format!("hello {} {}", h.qp.qp_num, hex(&h.gid().0)))?;
    let born = Instant::now();
    while born.elapsed() < PEER_LIFE {
        let moved = h.step()?;
        match rx.try_recv() {
            Ok(line) => {
                let reply = serve(&mut h, &line).unwrap_or_else(|e| format!("err {e}"));
                say(&reply)?;
                if reply == "bye" {
                    return Ok(());
                }
            }
            Err(TryRecvError::Empty) if !moved => std::thread::sleep(Duration::from_micros(50)),
            Err(TryRecvError::Empty) => {}
            // The parent is gone.
            Err(TryRecvError::Disconnected) => return Ok(()),
        }
    }
    Err("the peer outlived its parent's interest".into())
}

fn say(line: &str) -> R {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{TAG} {line}").and_then(|()| out.flush()).ctx("stdout")
}

/// One request of the parent: the reply line.
fn serve(h: &mut Host, line: &str) -> R<String> {
    let mut w = line.split_whitespace();
    Ok(match w.next() {
        Some("connect") => {
            let (qpn, gid) = (num(w.next())?, gid_of(w.next().unwrap_or(""))?);
            h.connect(qpn, gid, [num(w.next())?, num(w.next())?, num(w.next())?, num(w.next())?])?;
            "ok".into()
        }
        Some("region") => {
            let (len, seed, access): (usize, u8, u32) = (num(w.next())?, num(w.next())?, num(w.next())?);
            let i = h.region(len, seed, A::from_bits_truncate(access))?;
            let mr = h.mr(i)?;
            format!("region {i} {} {}", mr.addr, mr.rkey)
        }
        Some("recv") => {
            let wr_id = num(w.next())?;
            let mut sges = Vec::new();
            for s in w {
                let v: Vec<&str> = s.split(':').collect();
                ensure!(v.len() == 3, "an SGE, not {s:?}");
                sges.push(sge(&h.mr(num(Some(v[0]))?)?, num(Some(v[1]))?, num(Some(v[2]))?));
            }
            h.sim.post_recv(&h.qp, &[RecvWr { wr_id, sge: sges }]).ctx("post_recv")?;
            "ok".into()
        }
        Some("contents") => format!("data {}", hex(&h.contents(num(w.next())?)?)),
        Some("wc") => {
            // Less than the parent waits for a reply: it hears what came rather than nothing.
            let wcs = h.completions(num(w.next())?, STEP - Duration::from_secs(2))?;
            std::iter::once("wc".to_string()).chain(wcs.iter().map(wc_line)).collect::<Vec<_>>().join(" ")
        }
        Some("state") => format!("state {}", h.state()? as u32),
        Some("reset") => {
            h.sim.modify_qp(&h.qp, &QpModify::to(QpState::Reset)).ctx("modify to RESET")?;
            "ok".into()
        }
        Some("bye") => "bye".into(),
        _ => return Err(format!("what is {line:?}")),
    })
}

// ---------------------------------------------------------------- the parent

/// The peer process, with its stdin and its tagged stdout lines; killed and reaped on drop.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    qpn: u32,
    gid: Gid,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A peer region: its index there, address and rkey.
#[derive(Clone, Copy)]
struct Remote {
    i: usize,
    addr: u64,
    rkey: u32,
}

impl Peer {
    /// Re-execute this binary as the peer at `addr`, and wait for its hello.
    fn spawn(me: &mut Host, addr: Ipv4Addr) -> R<Peer> {
        let mut child = Command::new(std::env::current_exe().ctx("current_exe")?)
            .args(["--exact", "peer_process", "--nocapture", "--test-threads", "1", "--quiet"])
            .env(PEER_ENV, addr.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .ctx("spawn the peer")?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let (tx, lines) = mpsc::channel();
        let mut p = Peer { child, stdin: stdin.ok_or("no stdin")?, lines, qpn: 0, gid: Gid::default() };
        let stdout = stdout.ok_or("no stdout")?;
        std::thread::spawn(move || {
            // The harness's own lines ("running 1 test", the result) are not ours.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                match line.find(TAG) {
                    Some(i) if tx.send(line[i + TAG.len()..].trim().to_string()).is_err() => break,
                    Some(_) => {}
                    None if line.trim().is_empty() => {}
                    None => eprintln!("peer: {line}"),
                }
            }
        });
        let hello = p.reply(me)?;
        let mut w = hello.split_whitespace();
        ensure!(w.next() == Some("hello"), "a hello, not {hello:?}");
        (p.qpn, p.gid) = (num(w.next())?, gid_of(w.next().unwrap_or(""))?);
        Ok(p)
    }

    /// Send `line` and wait for the reply, stepping `me` meanwhile.
    fn ask(&mut self, me: &mut Host, line: &str) -> R<String> {
        writeln!(self.stdin, "{line}").and_then(|()| self.stdin.flush()).ctx("the peer's stdin")?;
        self.reply(me)
    }

    fn reply(&mut self, me: &mut Host) -> R<String> {
        let start = Instant::now();
        while start.elapsed() < STEP {
            let moved = me.step()?;
            let wait = if moved { Duration::ZERO } else { Duration::from_micros(50) };
            match self.lines.recv_timeout(wait) {
                Ok(l) if l.starts_with("err") => return Err(format!("the peer: {l}")),
                Ok(l) => return Ok(l),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err("the peer exited".into()),
            }
        }
        Err(format!("no reply from the peer in {STEP:?}"))
    }

    fn region(&mut self, me: &mut Host, len: usize, seed: u8, access: A) -> R<Remote> {
        let r = self.ask(me, &format!("region {len} {seed} {}", access.bits()))?;
        let w: Vec<&str> = r.split_whitespace().collect();
        ensure!(w.len() == 4 && w[0] == "region", "a region, not {r:?}");
        Ok(Remote { i: num(Some(w[1]))?, addr: num(Some(w[2]))?, rkey: num(Some(w[3]))? })
    }

    /// Post a receive of `(offset, length)` pieces of region `r`.
    fn recv(&mut self, me: &mut Host, wr_id: u64, r: Remote, sges: &[(u64, u32)]) -> R {
        let s: Vec<String> = sges.iter().map(|(off, len)| format!("{}:{off}:{len}", r.i)).collect();
        let reply = self.ask(me, &format!("recv {wr_id} {}", s.join(" ")))?;
        ensure!(reply == "ok", "{reply:?}");
        Ok(())
    }

    fn contents(&mut self, me: &mut Host, r: Remote) -> R<Vec<u8>> {
        let reply = self.ask(me, &format!("contents {}", r.i))?;
        unhex(reply.strip_prefix("data ").ok_or_else(|| format!("data, not {reply:?}"))?)
    }

    /// The peer's completions once `n` arrived (every one it polled).
    fn completions(&mut self, me: &mut Host, n: usize) -> R<Vec<Wc>> {
        let reply = self.ask(me, &format!("wc {n}"))?;
        let mut w = reply.split_whitespace();
        ensure!(w.next() == Some("wc"), "completions, not {reply:?}");
        w.map(parse_wc).collect()
    }

    fn state(&mut self, me: &mut Host) -> R<u32> {
        let reply = self.ask(me, "state")?;
        num(reply.strip_prefix("state "))
    }

    /// Let the peer end its test; it must pass.
    fn finish(mut self, me: &mut Host) -> R {
        let reply = self.ask(me, "bye")?;
        ensure!(reply == "bye", "{reply:?}");
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().ctx("wait")? {
                ensure!(status.success(), "the peer process ended with {status}");
                return Ok(());
            }
            ensure!(start.elapsed() < STEP, "the peer did not exit");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// This process's host at 127.0.`n`.1 and the peer at 127.0.`n+1`.1, their QPs connected with
/// `link` (both sides).
fn pair(n: u8, link: Link) -> R<(Host, Peer)> {
    let mut me = Host::new(Ipv4Addr::new(127, 0, n, 1))?;
    let mut peer = Peer::spawn(&mut me, Ipv4Addr::new(127, 0, n + 1, 1))?;
    connect_both(&mut me, &mut peer, link)?;
    Ok((me, peer))
}

/// Connect the peer's QP to ours and ours to the peer's, both in RESET.
fn connect_both(me: &mut Host, peer: &mut Peer, link: Link) -> R {
    let attrs = link.map(|x| x.to_string()).join(" ");
    let line = format!("connect {} {} {attrs}", me.qp.qp_num, hex(&me.gid().0));
    let reply = peer.ask(me, &line)?;
    ensure!(reply == "ok", "{reply:?}");
    me.connect(peer.qpn, peer.gid, link)
}

/// The one completion in `wcs` (this process's or the peer's): `wr_id` with `status` (and
/// `opcode` on success).
fn one(wcs: Vec<Wc>, wr_id: u64, status: u32, opcode: u32) -> R<Wc> {
    ensure!(wcs.len() == 1, "one completion, got {:?}", summary(&wcs));
    let w = wcs[0];
    let got = (w.wr_id, w.status, if status == wc_status::SUCCESS { w.opcode } else { opcode });
    ensure!(got == (wr_id, status, opcode), "completion {w:?}, want {:?}", (wr_id, status, opcode));
    Ok(w)
}

/// Mirrors the suite's `traffic.write_read_send_two_devices` (its `exchange`): WRITE, READ into
/// two SGEs, SEND with immediate into two receive SGEs and WRITE with immediate, each buffer
/// compared whole on both sides after each step.
#[test]
fn write_read_send_two_devices() -> R {
    let (mut me, mut peer) = pair(120, LINK)?;
    let m = &mut me;
    let s = peer.region(m, 4096, 0, A::LOCAL_WRITE | A::REMOTE_WRITE | A::REMOTE_READ)?;
    let a = m.region(4096, 9, A::LOCAL_WRITE)?;
    let amr = m.mr(a)?;
    // WRITE 1000 bytes from a[100..] to s[2000..].
    m.sim.post_send(&m.qp, &[write(1, s.rkey, s.addr + 2000, vec![sge(&amr, 100, 1000)])]).ctx("WRITE")?;
    one(m.completions(1, STEP)?, 1, wc_status::SUCCESS, wc_opcode::RDMA_WRITE)?;
    let mut want = pattern(4096, 0);
    want[2000..3000].copy_from_slice(&pattern(4096, 9)[100..1100]);
    ensure!(peer.contents(m, s)? == want, "the peer's buffer after the WRITE");
    // READ s[0..512] into a[3000..] and a[0..].
    let read = WrOp::RdmaRead {
        wr_id: 2,
        flags: SendFlags::SIGNALED,
        rkey: s.rkey,
        remote_addr: s.addr,
        sge: vec![sge(&amr, 3000, 256), sge(&amr, 0, 256)],
    };
    m.sim.post_send(&m.qp, &[read]).ctx("READ")?;
    let wc = one(m.completions(1, STEP)?, 2, wc_status::SUCCESS, wc_opcode::RDMA_READ)?;
    ensure!(wc.byte_len == 512, "READ byte_len {}", wc.byte_len);
    let mut awant = pattern(4096, 9);
    awant[3000..3256].copy_from_slice(&want[..256]);
    awant[..256].copy_from_slice(&want[256..512]);
    ensure!(m.contents(a)? == awant, "this side's buffer after the READ");
    // SEND with immediate, 300 bytes into two receive SGEs.
    peer.recv(m, 10, s, &[(3500, 100), (3700, 300)])?;
    let send =
        WrOp::SendImm { wr_id: 3, flags: SendFlags::SIGNALED, imm: 0xdead_beef, sge: vec![sge(&amr, 1000, 300)] };
    m.sim.post_send(&m.qp, &[send]).ctx("SEND with immediate")?;
    one(m.completions(1, STEP)?, 3, wc_status::SUCCESS, wc_opcode::SEND)?;
    let r = one(peer.completions(m, 1)?, 10, wc_status::SUCCESS, wc_opcode::RECV)?;
    ensure!(
        (r.byte_len, r.imm_data, r.wc_flags & wc_flags::WITH_IMM) == (300, 0xdead_beef, wc_flags::WITH_IMM),
        "the receive {r:?}"
    );
    ensure!((r.qp_num, r.src_qp) == (peer.qpn, m.qp.qp_num), "the receive's (qp_num, src_qp) {r:?}");
    want[3500..3600].copy_from_slice(&awant[1000..1100]);
    want[3700..3900].copy_from_slice(&awant[1100..1300]);
    ensure!(peer.contents(m, s)? == want, "the peer's buffer after the SEND");
    // WRITE with immediate consumes a receive without scattering into it.
    peer.recv(m, 11, s, &[(0, 8)])?;
    let wimm = WrOp::RdmaWriteImm {
        wr_id: 4,
        flags: SendFlags::SIGNALED,
        rkey: s.rkey,
        remote_addr: s.addr + 64,
        imm: 7,
        sge: vec![sge(&amr, 0, 64)],
    };
    m.sim.post_send(&m.qp, &[wimm]).ctx("WRITE with immediate")?;
    one(m.completions(1, STEP)?, 4, wc_status::SUCCESS, wc_opcode::RDMA_WRITE)?;
    let r = one(peer.completions(m, 1)?, 11, wc_status::SUCCESS, wc_opcode::RECV_RDMA_WITH_IMM)?;
    ensure!((r.byte_len, r.imm_data) == (64, 7), "the write-imm receive {r:?}");
    want[64..128].copy_from_slice(&awant[..64]);
    ensure!(peer.contents(m, s)? == want, "the peer's buffer after the WRITE with immediate");
    ensure!(m.contents(a)? == awant, "this side's buffer at the end");
    peer.finish(m)
}

/// Mirrors the suite's `traffic.remote_write_needs_remote_write_access`: a WRITE into an MR
/// without REMOTE_WRITE ends in REM_ACCESS_ERR with a vendor syndrome, the region untouched and
/// the QPs in ERR; then, as `traffic.reset_removes_unpolled_completions` goes on, both QPs are
/// reset and reconnected (PSNs from 0 again) and a WRITE completes once.
#[test]
fn remote_write_needs_remote_write_access() -> R {
    let (mut me, mut peer) = pair(122, LINK)?;
    let m = &mut me;
    let s = peer.region(m, 64, 1, A::LOCAL_WRITE | A::REMOTE_READ)?;
    let a = m.region(64, 2, A::LOCAL_WRITE)?;
    let amr = m.mr(a)?;
    m.sim.post_send(&m.qp, &[write(1, s.rkey, s.addr, vec![sge(&amr, 0, 16)])]).ctx("WRITE")?;
    let wc = one(m.completions(1, STEP)?, 1, wc_status::REM_ACCESS_ERR, 0)?;
    ensure!(wc.vendor_err != 0, "a vendor syndrome: {wc:?}");
    ensure!(peer.contents(m, s)? == pattern(64, 1), "the region is untouched");
    let extra = peer.completions(m, 0)?;
    ensure!(extra.is_empty(), "no completion at the responder: {extra:?}");
    both_in_err(m, &mut peer)?;
    ensure!(peer.ask(m, "reset")? == "ok", "RESET at the peer");
    m.sim.modify_qp(&m.qp, &QpModify::to(QpState::Reset)).ctx("modify to RESET")?;
    connect_both(m, &mut peer, LINK)?;
    let t = peer.region(m, 64, 8, A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    m.sim.post_send(&m.qp, &[write(2, t.rkey, t.addr + 8, vec![sge(&amr, 0, 16)])]).ctx("WRITE")?;
    one(m.completions(1, STEP)?, 2, wc_status::SUCCESS, wc_opcode::RDMA_WRITE)?;
    let mut want = pattern(64, 8);
    want[8..24].copy_from_slice(&pattern(64, 2)[..16]);
    ensure!(peer.contents(m, t)? == want, "the WRITE after the reset");
    ensure!(peer.completions(m, 0)?.is_empty(), "no completion at the responder");
    peer.finish(m)
}

/// Mirrors the suite's `traffic.short_receive_is_a_length_error`: a SEND of 64 bytes into a
/// receive of 32 is LOC_LEN_ERR at the responder and REM_INV_REQ_ERR at the requester.
#[test]
fn short_receive_is_a_length_error() -> R {
    let (mut me, mut peer) = pair(124, LINK)?;
    let m = &mut me;
    let s = peer.region(m, 64, 3, A::LOCAL_WRITE)?;
    let a = m.region(128, 2, A::LOCAL_WRITE)?;
    let amr = m.mr(a)?;
    peer.recv(m, 7, s, &[(0, 32)])?;
    m.sim.post_send(&m.qp, &[send(1, vec![sge(&amr, 0, 64)])]).ctx("SEND")?;
    one(peer.completions(m, 1)?, 7, wc_status::LOC_LEN_ERR, 0)?;
    one(m.completions(1, STEP)?, 1, wc_status::REM_INV_REQ_ERR, 0)?;
    both_in_err(m, &mut peer)?;
    peer.finish(m)
}

/// No receive at the responder and `rnr_retry` 1: the SEND (two packets) is NAKed RNR, resent
/// once after the responder's `min_rnr_timer` (code 12, 0.64 ms), NAKed again and ends in
/// RNR_RETRY_EXC_ERR; the WR behind it is flushed. (The suite has no RNR case: this is the
/// network's transport as docs/network.md describes it.)
#[test]
fn send_without_receive_ends_in_rnr_retry_exc_err() -> R {
    let (mut me, mut peer) = pair(126, [14, 7, 1, 12])?;
    let m = &mut me;
    let s = peer.region(m, 512, 4, A::LOCAL_WRITE)?;
    let a = m.region(512, 5, A::LOCAL_WRITE)?;
    let amr = m.mr(a)?;
    let ops = [send(1, vec![sge(&amr, 0, 300)]), send(2, vec![sge(&amr, 0, 64)])];
    m.sim.post_send(&m.qp, &ops).ctx("SENDs")?;
    let wcs = m.completions(2, STEP)?;
    let got: Vec<(u64, u32)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    ensure!(got == [(1, wc_status::RNR_RETRY_EXC_ERR), (2, wc_status::WR_FLUSH_ERR)], "{got:?}");
    ensure!(m.state()? == QpState::Err, "requester QP state {:?}", m.state()?);
    let extra = peer.completions(m, 0)?;
    ensure!(extra.is_empty(), "no completion at the responder: {extra:?}");
    ensure!(peer.contents(m, s)? == pattern(512, 4), "nothing landed");
    peer.finish(m)
}

/// No receive at first and `rnr_retry` 7 (without end): the SEND waits through RNR NAKs, and a
/// receive posted 50 ms later takes it exactly once.
#[test]
fn send_waits_for_a_late_receive_and_lands_once() -> R {
    let (mut me, mut peer) = pair(128, LINK)?;
    let m = &mut me;
    let s = peer.region(m, 256, 0, A::LOCAL_WRITE)?;
    let a = m.region(64, 6, A::LOCAL_WRITE)?;
    let amr = m.mr(a)?;
    m.sim.post_send(&m.qp, &[send(1, vec![sge(&amr, 0, 64)])]).ctx("SEND")?;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(50) {
        m.step()?;
        std::thread::sleep(Duration::from_micros(50));
    }
    ensure!(m.wcs.is_empty(), "no completion before a receive: {:?}", summary(m.wcs.make_contiguous()));
    peer.recv(m, 20, s, &[(0, 128)])?;
    peer.recv(m, 21, s, &[(128, 128)])?;
    one(m.completions(1, STEP)?, 1, wc_status::SUCCESS, wc_opcode::SEND)?;
    let r = one(peer.completions(m, 1)?, 20, wc_status::SUCCESS, wc_opcode::RECV)?;
    ensure!(r.byte_len == 64, "{r:?}");
    let mut want = pattern(256, 0);
    want[..64].copy_from_slice(&pattern(64, 6));
    ensure!(peer.contents(m, s)? == want, "the SEND landed once, in the first receive");
    peer.finish(m)
}

/// Mirrors `network.rs`'s `a_peer_that_went_away_ends_in_retry_exc_err` with a real process:
/// a WRITE succeeds, the peer is killed, and the next WRITE ends in RETRY_EXC_ERR after
/// `retry_cnt` resends (the one behind it flushed, the QP in ERR), well within [`STEP`].
#[test]
fn a_killed_peer_ends_in_retry_exc_err() -> R {
    let (mut me, mut peer) = pair(130, [12, 3, 7, 1])?;
    let m = &mut me;
    let s = peer.region(m, 64, 1, A::LOCAL_WRITE | A::REMOTE_WRITE)?;
    let a = m.region(64, 7, A::LOCAL_WRITE)?;
    let amr = m.mr(a)?;
    m.sim.post_send(&m.qp, &[write(1, s.rkey, s.addr, vec![sge(&amr, 0, 16)])]).ctx("WRITE")?;
    one(m.completions(1, STEP)?, 1, wc_status::SUCCESS, wc_opcode::RDMA_WRITE)?;
    peer.child.kill().ctx("kill the peer")?;
    let status = peer.child.wait().ctx("reap the peer")?;
    ensure!(!status.success(), "the peer was killed: {status}");
    let start = Instant::now();
    let ops = [write(2, s.rkey, s.addr, vec![sge(&amr, 0, 16)]), write(3, s.rkey, s.addr, vec![sge(&amr, 16, 16)])];
    m.sim.post_send(&m.qp, &ops).ctx("WRITEs")?;
    let wcs = m.completions(2, STEP)?;
    let took = start.elapsed();
    let got: Vec<(u64, u32)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    ensure!(got == [(2, wc_status::RETRY_EXC_ERR), (3, wc_status::WR_FLUSH_ERR)], "{got:?} after {took:?}");
    ensure!(m.state()? == QpState::Err, "requester QP state {:?}", m.state()?);
    // Four ACK timeouts of 16.8 ms.
    ensure!(took >= Duration::from_millis(60) && took < STEP, "took {took:?}");
    Ok(())
}
