//! Instructions per operation of each benchmarked scenario, counted by callgrind: stable where
//! wall-clock time on a shared machine is not (`make bench-icount`).
//!
//! Without arguments it runs itself under `valgrind --tool=callgrind` once per scenario,
//! collecting only inside [`measured`], and prints a table. `icount run <scenario> <n>`
//! sets the scenario up, warms it up, then runs it `n` times inside [`measured`].

use std::process::{Command, ExitCode};

#[path = "../benches/scenarios/mod.rs"]
mod scenarios;

use scenarios::{Cipher, ControlPath, Datapath, MsgRate, Signature};

/// A scenario: its name, operations counted, and what one operation stands for.
struct Scenario {
    name: &'static str,
    ops: u64,
    /// Messages per operation, for a message-rate scenario.
    per_op: Option<u64>,
    /// The scenario it is compared with (listed before it): that one's instructions per
    /// operation over this one's, as criterion's throughput ratio is.
    baseline: Option<&'static str>,
}

const SCENARIOS: &[Scenario] = &[
    Scenario { name: "msgrate_1_per_chain", ops: 2000, per_op: Some(1), baseline: None },
    Scenario { name: "msgrate_32_per_chain", ops: 100, per_op: Some(32), baseline: None },
    Scenario { name: "memcpy_1MiB", ops: 4, per_op: None, baseline: None },
    Scenario { name: "datapath_write_indirect_1MiB", ops: 4, per_op: None, baseline: Some("memcpy_1MiB") },
    Scenario { name: "raw_crc16_t10dif_1MiB", ops: 4, per_op: None, baseline: None },
    Scenario { name: "signature_write_t10dif_1MiB", ops: 4, per_op: None, baseline: Some("raw_crc16_t10dif_1MiB") },
    Scenario { name: "raw_xts_aes_256_1MiB", ops: 2, per_op: None, baseline: None },
    Scenario { name: "crypto_write_aes_xts_256_1MiB", ops: 2, per_op: None, baseline: Some("raw_xts_aes_256_1MiB") },
    Scenario { name: "crypto_write_t10dif_aes_xts_1MiB", ops: 2, per_op: None, baseline: None },
    Scenario { name: "control_path_create_destroy_mkey", ops: 500, per_op: None, baseline: None },
];

/// The only code callgrind counts (`--toggle-collect`).
#[inline(never)]
fn measured(op: &mut dyn FnMut(), n: u64) {
    for _ in 0..n {
        op();
    }
}

/// Set `name` up, warm it up, and run it `n` times inside [`measured`].
fn run(name: &str, n: u64) -> Result<(), String> {
    let mut op: Box<dyn FnMut()> = match name {
        "msgrate_1_per_chain" => {
            let mut s = MsgRate::new(1);
            Box::new(move || s.run())
        }
        "msgrate_32_per_chain" => {
            let mut s = MsgRate::new(32);
            Box::new(move || s.run())
        }
        "datapath_write_indirect_1MiB" => {
            let mut s = Datapath::new();
            Box::new(move || s.write())
        }
        "memcpy_1MiB" => {
            let mut s = Datapath::new();
            Box::new(move || s.memcpy())
        }
        "signature_write_t10dif_1MiB" => {
            let mut s = Signature::new();
            Box::new(move || s.write())
        }
        "raw_crc16_t10dif_1MiB" => {
            let s = Signature::new();
            Box::new(move || {
                s.raw_crc();
            })
        }
        "crypto_write_aes_xts_256_1MiB" => {
            let mut s = Cipher::new();
            Box::new(move || s.write_plain())
        }
        "raw_xts_aes_256_1MiB" => {
            let mut s = Cipher::new();
            Box::new(move || s.raw_xts())
        }
        "crypto_write_t10dif_aes_xts_1MiB" => {
            let mut s = Cipher::new();
            Box::new(move || s.write_signed())
        }
        "control_path_create_destroy_mkey" => {
            let mut s = ControlPath::new();
            Box::new(move || s.create_destroy())
        }
        other => return Err(format!("unknown scenario {other}")),
    };
    // Warm-up: buffers reach their working sizes before counting starts.
    for _ in 0..n.div_ceil(4).max(2) {
        op();
    }
    measured(&mut *op, n);
    Ok(())
}

/// Instructions callgrind counted in one run of `scenario`.
fn count(exe: &str, s: &Scenario) -> Result<u64, String> {
    let out = std::env::temp_dir().join(format!("icount.{}.{}.out", s.name, std::process::id()));
    let status = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=*icount*measured*",
            "--dump-instr=no",
            "--compress-strings=no",
        ])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .args([exe, "run", s.name, &s.ops.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("valgrind: {e} (is valgrind installed?)"))?;
    if !status.success() {
        return Err(format!("{}: valgrind exited with {status}", s.name));
    }
    let text = std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let _ = std::fs::remove_file(&out);
    let total = text
        .lines()
        .find_map(|l| l.strip_prefix("totals:").or_else(|| l.strip_prefix("summary:")))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .ok_or_else(|| format!("{}: no totals in the callgrind output", s.name))?;
    Ok(total)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let [_, cmd, name, n] = &args[..]
        && cmd == "run"
    {
        return match n.parse().map_err(|e| format!("{n}: {e}")).and_then(|n| run(name, n)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        };
    }
    let only: Vec<&str> = args.iter().skip(1).map(String::as_str).collect();
    let exe = match std::env::current_exe() {
        Ok(p) => p.display().to_string(),
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut per_op = std::collections::BTreeMap::new();
    println!("{:<36} {:>6} {:>16} {:>12} {:>10}", "scenario", "ops", "instructions/op", "per message", "base/this");
    for s in SCENARIOS.iter().filter(|s| only.is_empty() || only.contains(&s.name)) {
        let total = match count(&exe, s) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
        let op = total as f64 / s.ops as f64;
        per_op.insert(s.name, op);
        let msg = s.per_op.map_or_else(|| "-".into(), |m| format!("{:.0}", op / m as f64));
        let vs = s.baseline.and_then(|b| per_op.get(b).map(|base| format!("{:.2}", base / op)));
        println!("{:<36} {:>6} {:>16.0} {:>12} {:>10}", s.name, s.ops, op, msg, vs.unwrap_or_else(|| "-".into()));
    }
    ExitCode::SUCCESS
}
