//! What the free-running device costs (`make bench`): three figures, each measured side by
//! side with its reference in one run.
//!
//! - Message rate: 64-byte RDMA WRITEs posted and polled through the C ABI, 32 in flight as
//!   perftest's bandwidth tests keep them, with the device on its own thread (`MLX5SIM_MODE=free`) and inside the calls (`stepped`), in child processes
//!   run in turn (the mode is fixed for a process), several rounds; the median ratio.
//! - Latency: a program's doorbell (WQE, doorbell record and BlueFlame store, no call) to its
//!   CQE in `cq.buf`, against the round trip of an eventfd ping-pong between two threads, both
//!   in one process; medians.
//! - Idle cost: a process with two open contexts, an armed CQ with a channel and connected QPs
//!   sleeps 10 s; the CPU time all its threads used.
//!
//! Plain `main` (not criterion): the figures need child processes and clocks criterion does
//! not offer. Under `cargo test --benches` one short round runs, as a check.

use std::process::Command;
use std::time::{Duration, Instant};

#[allow(dead_code)] // the message-rate scenarios are the other benches'
mod scenarios;

const ROUNDS: usize = 5;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--test" || a == "--list") || std::env::var_os("BENCH_QUICK").is_some();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let what = args.get(i + 1).map(String::as_str).unwrap_or("");
        let ms: u64 = args.get(i + 2).and_then(|v| v.parse().ok()).unwrap_or(300);
        match what {
            "rate" => println!("{}", child_rate(Duration::from_millis(ms))),
            "latency" => child_latency(if quick { 50 } else { 2000 }),
            "idle" => println!("{}", child_idle(Duration::from_millis(ms))),
            _ => std::process::exit(2),
        }
        return;
    }
    let (window, idle) = if quick { (50, 200) } else { (400, 10_000) };
    rate(window, if quick { 1 } else { ROUNDS });
    let out = child("free", &["latency"], 0);
    print!("{out}");
    let cpu: f64 = child("free", &["idle", &idle.to_string()], 0).trim().parse().unwrap_or(f64::NAN);
    println!(
        "idle: {:.3} s of CPU in {:.1} s asleep ({:.2} % of a core)",
        cpu,
        idle as f64 / 1000.0,
        100.0 * cpu / (idle as f64 / 1000.0)
    );
}

/// Run this bench as a child in `mode` with `args` after `--child`; its standard output.
fn child(mode: &str, args: &[&str], ms: u64) -> String {
    let exe = std::env::current_exe().expect("the bench's own path");
    let mut cmd = Command::new(exe);
    cmd.env("MLX5SIM_MODE", mode).arg("--child").args(args);
    if ms > 0 {
        cmd.arg(ms.to_string());
    }
    let out = cmd.output().expect("the child runs");
    assert!(out.status.success(), "child {args:?} in {mode}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The message rates of both modes, in turn, and the median ratio free / stepped.
fn rate(window: u64, rounds: usize) {
    let mut ratios = Vec::new();
    for r in 0..rounds {
        let order = if r % 2 == 0 { ["free", "stepped"] } else { ["stepped", "free"] };
        let mut got = [0.0; 2];
        for mode in order {
            let v: f64 = child(mode, &["rate"], window).trim().parse().unwrap_or(f64::NAN);
            got[usize::from(mode == "stepped")] = v;
        }
        println!("round {r}: free {:.0} msg/s, stepped {:.0} msg/s", got[0], got[1]);
        ratios.push(got[0] / got[1]);
    }
    println!("message rate, free-running / stepped: median {:.2}", median(&mut ratios));
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Messages a second through the C ABI for `window`, 32 in flight as a bandwidth test keeps
/// them.
fn child_rate(window: Duration) -> f64 {
    let mut s = scenarios::CAbi::new();
    s.stream(256, DEPTH);
    let (start, mut n) = (Instant::now(), 0u64);
    while start.elapsed() < window {
        s.stream(1024, DEPTH);
        n += 1024;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// WRITEs in flight in the message-rate figure.
const DEPTH: u64 = 32;

/// Median doorbell-to-CQE latency of `n` raw WRITEs, and the median eventfd round trip.
fn child_latency(n: usize) {
    let mut raw = scenarios::RawRing::new();
    for _ in 0..20 {
        raw.write_and_wait();
    }
    let mut lat: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            raw.write_and_wait();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    let mut rtt = scenarios::eventfd_round_trips(n);
    let (l, e) = (median(&mut lat), median(&mut rtt));
    println!(
        "latency: doorbell to CQE median {l:.1} us; eventfd ping-pong round trip median {e:.1} us; ratio {:.2}",
        l / e
    );
}

/// CPU seconds (user + system, all threads) used while asleep for `d` with live objects.
fn child_idle(d: Duration) -> f64 {
    let _objects = scenarios::IdleObjects::new();
    std::thread::sleep(Duration::from_millis(100));
    let before = scenarios::cpu_seconds();
    std::thread::sleep(d);
    scenarios::cpu_seconds() - before
}
