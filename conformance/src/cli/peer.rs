//! Two processes on the RoCE v2 fabric: `discover --two-processes` runs network scenarios with
//! the requester on a simulator in one child process and the responder on a simulator in
//! another (`mlx5-conformance peer`, hidden), which this process drives by the API's calls as
//! data.
//!
//! Protocol: one JSON line per message on the child's stdin, [`Msg`]; one JSON line per answer
//! on its stdout, [`Answer`]. The child runs its device between messages (its simulator runs
//! only in its calls otherwise), ends when its stdin closes, and lives [`PEER_LIFE`] at most.

use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use mlx5_conformance::trace::Recorder;
use mlx5_dv::{Backend, Call, ControlAction, Error, Layer, Op, Reply, Wrapped};
use mlx5_sim::{Profile, ShippedProfiles, Simulator};
use serde::{Deserialize, Serialize};

use crate::out::{self, USAGE, fail};

/// The longest a peer lives, whatever its parent does.
const PEER_LIFE: Duration = Duration::from_secs(1800);
/// The longest one answer may take before the parent gives the peer up.
const ANSWER: Duration = Duration::from_secs(30);

/// A message to the peer.
#[derive(Serialize, Deserialize)]
enum Msg {
    Call(Call),
    Control(ControlAction),
}

/// The peer's answer to a [`Msg`].
#[derive(Serialize, Deserialize)]
enum Answer {
    Reply(Reply),
    Control(Result<(), Error>),
}

/// `peer`: a simulator on the RoCE v2 fabric that another process drives.
#[derive(clap::Args)]
pub struct PeerArgs {
    /// The profile.
    #[arg(long)]
    profile: String,
    /// The address of its first device (127.0.0.0/8).
    #[arg(long)]
    address: Ipv4Addr,
    /// Fault rules on its ports that its driver is not told of (`MLX5SIM_NET_FAULTS`'s
    /// syntax); a driver's `clear_faults` leaves them.
    #[arg(long)]
    faults: Option<String>,
}

/// Put `rules` on `sim`'s networked ports.
fn add_faults(sim: &mut Simulator, rules: &[mlx5_sim::fabric::faults::DeviceRule]) -> Result<(), String> {
    let ports = sim.network_fds().len();
    for &(dev, rule) in rules {
        for d in dev.map_or(0..ports, |d| d..d + 1) {
            sim.add_network_fault(d, rule).map_err(|e| format!("device {d}: {e}"))?;
        }
    }
    Ok(())
}

/// A simulator on the RoCE v2 fabric at `address`, host number the address's third byte.
fn networked(profile: &Profile, address: Ipv4Addr) -> Result<Simulator, String> {
    if !address.is_loopback() {
        return Err(format!("{address} is not a loopback address (127.0.0.0/8)"));
    }
    let mut sim = Simulator::with_host(profile.clone(), u32::from(address.octets()[2])).map_err(|e| e.to_string())?;
    sim.connect_network(address).map_err(|e| format!("the network at {address}: {e}"))?;
    Ok(sim)
}

/// The child's loop: answer each message, run the device in between.
pub fn serve(a: PeerArgs) -> Result<ExitCode, ExitCode> {
    let profile = Profile::resolve(&a.profile).map_err(|e| fail(USAGE, e))?;
    let mut sim = networked(&profile, a.address).map_err(|e| fail(USAGE, e))?;
    let hidden = match &a.faults {
        Some(text) => mlx5_sim::fabric::faults::parse_rules(text).map_err(|e| fail(USAGE, format!("--faults: {e}")))?,
        None => Vec::new(),
    };
    add_faults(&mut sim, &hidden).map_err(|e| fail(USAGE, format!("--faults: {e}")))?;
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let born = Instant::now();
    let mut stdout = std::io::stdout().lock();
    // Handles cross the pipe as object ids: they are this simulator's, learnt from the first
    // reply that carries one (as a replayer learns them).
    let mut issuer = mlx5_dv::BackendId::NONE;
    while born.elapsed() < PEER_LIFE {
        let line = match rx.try_recv() {
            Ok(line) => line,
            Err(TryRecvError::Empty) => {
                if !sim.tick() {
                    std::thread::sleep(Duration::from_micros(50));
                }
                continue;
            }
            Err(TryRecvError::Disconnected) => break,
        };
        let answer = match mlx5_dv::adopting(issuer, || serde_json::from_str::<Msg>(&line)) {
            Ok(Msg::Call(call)) => {
                let reply = call.apply(&mut sim);
                if issuer == mlx5_dv::BackendId::NONE {
                    issuer = reply.issuer().unwrap_or(issuer);
                }
                Answer::Reply(reply)
            }
            Ok(Msg::Control(action)) => {
                let r = match sim.sim_control() {
                    Some(c) => action.apply(c),
                    None => Err(Error::new(Op::Backend, mlx5_dv::errno::EOPNOTSUPP, "no simulator control")),
                };
                if matches!(action, ControlAction::ClearFaults) {
                    add_faults(&mut sim, &hidden).map_err(|e| fail(USAGE, format!("--faults: {e}")))?;
                }
                Answer::Control(r)
            }
            Err(e) => return Err(fail(USAGE, format!("not a message: {e}"))),
        };
        let text = serde_json::to_string(&answer).map_err(|e| fail(USAGE, e.to_string()))?;
        if writeln!(stdout, "{text}").and_then(|()| stdout.flush()).is_err() {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The parent's end: a layer that sends every call and control action to the child and
/// answers with what comes back. A child that dies or stops answering fails the call (EIO)
/// and every call after it.
pub struct PeerLayer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    dead: Option<String>,
}

impl PeerLayer {
    /// Start `exe peer` with `profile` at `address`.
    pub fn spawn(exe: &PathBuf, profile: &str, address: Ipv4Addr, faults: Option<&str>) -> Result<Self, String> {
        let mut cmd = Command::new(exe);
        cmd.args(["peer", "--profile", profile, "--address", &address.to_string()]);
        if let Some(f) = faults {
            cmd.args(["--faults", f]);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the peer: {e}"))?;
        let stdout = child.stdout.take().ok_or("the peer has no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Ok(PeerLayer { child, stdin, lines, dead: None })
    }

    fn ask(&mut self, msg: &Msg) -> Result<Answer, String> {
        if let Some(why) = &self.dead {
            return Err(why.clone());
        }
        let r = self.exchange(msg);
        if let Err(why) = &r {
            self.dead = Some(why.clone());
        }
        r
    }

    fn exchange(&mut self, msg: &Msg) -> Result<Answer, String> {
        let text = serde_json::to_string(msg).map_err(|e| e.to_string())?;
        let stdin = self.stdin.as_mut().ok_or("the peer's stdin is closed")?;
        writeln!(stdin, "{text}").and_then(|()| stdin.flush()).map_err(|e| format!("the peer is gone: {e}"))?;
        let line = match self.lines.recv_timeout(ANSWER) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => return Err(format!("the peer did not answer in {ANSWER:?}")),
            Err(RecvTimeoutError::Disconnected) => return Err("the peer ended".into()),
        };
        serde_json::from_str(&line).map_err(|e| format!("the peer's answer: {e}: {line}"))
    }
}

impl Drop for PeerLayer {
    fn drop(&mut self) {
        // Closing stdin ends the peer; a peer that does not end is killed.
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn peer_error(why: String) -> Error {
    Error::new(Op::Backend, mlx5_dv::errno::EIO, format!("the peer process: {why}"))
}

impl Layer for PeerLayer {
    fn before(&mut self, call: &mut Call) -> Option<Reply> {
        Some(match self.ask(&Msg::Call(call.clone())) {
            Ok(Answer::Reply(r)) => r,
            Ok(Answer::Control(_)) => Reply::failed(call, peer_error("a control answer to a call".into())),
            Err(why) => Reply::failed(call, peer_error(why)),
        })
    }

    fn answer_control(&mut self, action: &ControlAction) -> Option<Result<(), Error>> {
        Some(match self.ask(&Msg::Control(action.clone())) {
            Ok(Answer::Control(r)) => r,
            Ok(Answer::Reply(_)) => Err(peer_error("a call's answer to a control action".into())),
            Err(why) => Err(peer_error(why)),
        })
    }
}

/// `discover --two-processes`: network scenarios with the requester in a child at `address`
/// and the responder in another at the next /24 (127.a.b+1.1); this process only drives them.
/// `peer_faults`: rules on the responder's port that the model is not told of.
pub fn discover_two(
    profile: &str,
    address: Ipv4Addr,
    (cases, seed): (u32, u64),
    peer_faults: Option<&str>,
    output: &std::path::Path,
) -> Result<ExitCode, ExitCode> {
    let p = Profile::resolve(profile).map_err(|e| fail(USAGE, e))?;
    let [a, b, c, _] = address.octets();
    let peer_address = Ipv4Addr::new(a, b, c.wrapping_add(1), 1);
    for x in [address, peer_address] {
        if !x.is_loopback() {
            return Err(fail(USAGE, format!("{x} is not a loopback address (127.0.0.0/8)")));
        }
    }
    let exe = std::env::current_exe().map_err(|e| fail(USAGE, format!("this program's path: {e}")))?;
    // Each child's simulator runs its device between calls; the inner simulators here only
    // supply the caps and info: the layers answer every call.
    let host = |at: Ipv4Addr, faults: Option<&str>| -> Result<Wrapped<PeerLayer, Simulator>, ExitCode> {
        let layer = PeerLayer::spawn(&exe, profile, at, faults).map_err(|e| fail(USAGE, e))?;
        let inner = Simulator::new(p.clone()).map_err(|e| fail(USAGE, e.to_string()))?;
        Ok(Wrapped::new(layer, inner))
    };
    let (mut local, mut peer) = (host(address, None)?, host(peer_address, peer_faults)?);
    match mlx5_conformance::discover_across(&mut local, &mut peer, cases, seed, 32) {
        Err(e) => Err(fail(USAGE, e)),
        Ok(None) => {
            let text = format!(
                "{cases} network scenarios across two processes ({address} and {peer_address}): \
                 the backends agree with the model\n"
            );
            out::stdout(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        Ok(Some(f)) => {
            // The same scenario on the fabric in memory, recorded: a trace that replays where
            // the disagreement shows in one process too.
            let sim = Simulator::new(p).map_err(|e| fail(USAGE, e.to_string()))?;
            let mut one = Recorder::wrap(sim);
            let in_memory = match mlx5_conformance::run_net_in_memory(&mut one, &f.op) {
                Ok(None) => "in one process it agrees with the model: no trace".to_string(),
                Ok(Some(why)) => {
                    let trace = one.layer.trace(&one.layer.header(&one.inner, Some("network scenario")));
                    std::fs::write(output, trace)
                        .map_err(|e| fail(USAGE, format!("cannot write {}: {e}", output.display())))?;
                    format!("in one process it disagrees too ({why}); trace: {}", output.display())
                }
                Err(e) => format!("in one process it did not run: {e}"),
            };
            out::stdout(&format!("{}\nshrunk to: {:?}\n{in_memory}\n", f.message, f.op))?;
            Ok(ExitCode::FAILURE)
        }
    }
}
