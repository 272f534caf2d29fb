//! Ratios measured in pairs: on a shared machine the load moves between criterion's runs of
//! two benchmarks, so their ratio moves with it. Here each round times the simulator's
//! operation and its baseline back to back (in alternating order, each for about the same
//! time), and the ratio of that round is the baseline's time over the simulator's: load that
//! lasts longer than a round weighs on both. The table gives the median of the rounds and
//! their quartiles.
//!
//! `cargo bench -p mlx5-sim --bench paired` (`PAIRED_ROUNDS`, 41 by default); without
//! `--bench` (as `cargo test --all-targets` runs it) each pair runs once, as a check.

use std::hint::black_box;
use std::time::{Duration, Instant};

mod scenarios;

use scenarios::WireSig;

/// How long one side of a round runs.
const SLICE: Duration = Duration::from_millis(15);

/// The time of `n` runs of `op` on `s`.
fn time<S>(s: &mut S, op: fn(&mut S), n: u32) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        op(s);
    }
    start.elapsed()
}

/// Runs of `op` that take about [`SLICE`].
fn calibrate<S>(s: &mut S, op: fn(&mut S)) -> u32 {
    let mut n = 1u32;
    loop {
        let t = time(s, op, n);
        if t >= SLICE / 4 || n >= 1 << 20 {
            let per = t.as_secs_f64() / f64::from(n);
            return ((SLICE.as_secs_f64() / per.max(1e-9)) as u32).clamp(1, 1 << 24);
        }
        n *= 2;
    }
}

/// The median and quartiles of `v`, sorted in place.
fn quartiles(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.25), at(0.5), at(0.75))
}

/// Per-round ratios of `base`'s time over `sim`'s on the scenario `s`, `rounds` rounds.
fn pair<S>(s: &mut S, sim: fn(&mut S), base: fn(&mut S), rounds: usize) -> Vec<f64> {
    let (ns, nb) = (calibrate(s, sim), calibrate(s, base));
    (0..rounds)
        .map(|r| {
            let (ts, tb) = if r % 2 == 0 {
                let ts = time(s, sim, ns);
                (ts, time(s, base, nb))
            } else {
                let tb = time(s, base, nb);
                (time(s, sim, ns), tb)
            };
            (tb.as_secs_f64() / f64::from(nb)) / (ts.as_secs_f64() / f64::from(ns))
        })
        .collect()
}

/// One line of the table.
fn report(sim: &str, base: &str, mut ratios: Vec<f64>) {
    let (q1, med, q3) = quartiles(&mut ratios);
    println!("{sim:<42} {base:<32} {:>6} {med:>7.2} {q1:>7.2}–{q3:<7.2}", ratios.len());
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let rounds =
        if bench { std::env::var("PAIRED_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(41).max(1) } else { 1 };
    println!("{:<42} {:<32} {:>6} {:>7} {:>15}", "simulator", "beside", "rounds", "median", "quartiles");
    for (wire, sim, base) in [
        (WireSig::T10dif, "signature/rdma_write_t10dif_1MiB", "raw_crc16_t10dif_1MiB"),
        (WireSig::Crc32c, "signature/rdma_write_crc32c_1MiB", "raw_crc32c_1MiB"),
        (WireSig::Crc64, "signature/rdma_write_crc64_1MiB", "raw_crc64_nvme_1MiB"),
    ] {
        let mut s = scenarios::Signature::with(wire);
        let r = pair(
            &mut s,
            |s| s.write(),
            |s| {
                black_box(s.raw_crc());
            },
            rounds,
        );
        report(sim, base, r);
        // The floor of any copying implementation (the CRC, the copy and the PI store)
        // beside the raw CRC, and the simulator beside that floor.
        let floor = |s: &mut scenarios::Signature| {
            black_box(s.raw_crc_copy());
        };
        let r = pair(
            &mut s,
            floor,
            |s| {
                black_box(s.raw_crc());
            },
            rounds,
        );
        report("  the CRC-and-copy floor", base, r);
        report("  the simulator", "the floor", pair(&mut s, |s| s.write(), floor, rounds));
    }
    let mut c = scenarios::Cipher::new();
    let r = pair(&mut c, |c| c.write_plain(), |c| c.raw_xts(), rounds);
    report("crypto/rdma_write_aes_xts_256_4096_1MiB", "raw_xts_mode_aes_256_4096_1MiB", r);
    let mut d = scenarios::Datapath::new();
    let r = pair(&mut d, |d| d.write(), |d| d.memcpy(), rounds);
    report("datapath/rdma_write_indirect_1MiB", "memcpy_1MiB", r);
}
