//! The instruction-count harness of `make bench-icount`, shared by the simulator's and the C
//! ABI's examples: without arguments an example runs itself under `valgrind --tool=callgrind`
//! once per scenario, collecting only inside [`measured`], and prints a table; `<example> run
//! <scenario> <n>` sets the scenario up, warms it up, then runs it `n` times inside
//! [`measured`].

use std::process::{Command, ExitCode};

/// A scenario: its name, operations counted, and what one operation stands for.
pub struct Scenario {
    pub name: &'static str,
    pub ops: u64,
    /// Messages per operation, for a message-rate scenario.
    pub per_op: Option<u64>,
    /// The scenario it is compared with (listed before it): that one's instructions per
    /// operation over this one's, as criterion's throughput ratio is.
    pub baseline: Option<&'static str>,
}

/// The only code callgrind counts (`--toggle-collect`).
#[inline(never)]
pub fn measured(op: &mut dyn FnMut(), n: u64) {
    for _ in 0..n {
        op();
    }
}

/// Sets a scenario up by name: the operation to count.
pub type Make = fn(&str) -> Result<Box<dyn FnMut()>, String>;

/// Set `name` up with `make`, warm it up, and run it `n` times inside [`measured`].
fn run(make: Make, name: &str, n: u64) -> Result<(), String> {
    let mut op = make(name)?;
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

/// The example's `main`: `scenarios`, each set up by `make`.
pub fn main(scenarios: &[Scenario], make: Make) -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let [_, cmd, name, n] = &args[..]
        && cmd == "run"
    {
        return match n.parse().map_err(|e| format!("{n}: {e}")).and_then(|n| run(make, name, n)) {
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
    for s in scenarios.iter().filter(|s| only.is_empty() || only.contains(&s.name)) {
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
