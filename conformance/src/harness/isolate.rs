//! Running a case in a child process, so that a crash inside the backend (a segfault or an
//! abort in libmlx5) fails that case and the run goes on.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wait_timeout::ChildExt;

use crate::case::Case;
use crate::harness::report::{CaseReport, Outcome};
use crate::harness::run::timed_out;

/// How long a child may take beyond the case's timeout (to start, and to probe the device).
pub const GRACE: Duration = Duration::from_secs(10);

/// `SIGSEGV` for 11, and the other signals a crash raises.
pub fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return None,
    })
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

fn failed(case: &Case, detail: String, expected: &str, actual: String) -> CaseReport {
    let mut r = CaseReport::new(case, Outcome::Fail, detail);
    r.expected = Some(expected.to_string());
    r.actual = Some(actual);
    r
}

/// Run `case` through `cmd`, a child that prints the case's report as JSON on standard
/// output; kill it if it is still running `timeout` + [`GRACE`] after it started.
pub fn run_in_child(mut cmd: Command, case: &Case, timeout: Duration) -> CaseReport {
    let start = Instant::now();
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return CaseReport::new(case, Outcome::Fail, format!("cannot start the child process: {e}")),
    };
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            text
        })
    };
    let out = reader(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = reader(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let status = match child.wait_timeout(timeout + GRACE) {
        Ok(Some(s)) => s,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            let mut r = timed_out(case, timeout);
            r.time_us = start.elapsed().as_micros().try_into().unwrap_or(u64::MAX);
            return r;
        }
        Err(e) => return CaseReport::new(case, Outcome::Fail, format!("cannot wait for the child process: {e}")),
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = tail(&err.join().unwrap_or_default());
    let mut report = if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&status) {
        let name = signal_name(sig).map(|n| format!(" ({n})")).unwrap_or_default();
        let actual =
            if stderr.is_empty() { format!("signal {sig}{name}") } else { format!("signal {sig}{name}: {stderr}") };
        failed(case, format!("crashed: signal {sig}{name}"), "the case returns", actual)
    } else {
        match serde_json::from_str::<CaseReport>(stdout.trim()) {
            Ok(r) if status.success() && r.name == case.name => r,
            _ => failed(
                case,
                format!("the child process exited with {status} without a report"),
                "a report on standard output",
                if stderr.is_empty() { status.to_string() } else { stderr },
            ),
        }
    };
    if report.time_us == 0 && report.outcome != Outcome::Skip {
        report.time_us = start.elapsed().as_micros().try_into().unwrap_or(u64::MAX);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case() -> Case {
        crate::suite()[0]
    }

    #[test]
    fn a_child_killed_by_a_signal_is_a_crash() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo dying >&2; kill -SEGV $$"]);
        let r = run_in_child(cmd, &case(), Duration::from_secs(5));
        assert_eq!(r.outcome, Outcome::Fail);
        assert_eq!(r.detail, "crashed: signal 11 (SIGSEGV)");
        assert_eq!(r.actual.as_deref(), Some("signal 11 (SIGSEGV): dying"));
    }

    #[test]
    fn a_child_without_a_report_fails_the_case() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo oops; exit 3"]);
        let r = run_in_child(cmd, &case(), Duration::from_secs(5));
        assert_eq!(r.outcome, Outcome::Fail);
        assert!(r.detail.contains("exit status: 3"), "{}", r.detail);
    }

    #[test]
    fn a_child_report_is_the_case_report() -> Result<(), Box<dyn std::error::Error>> {
        let mut want = CaseReport::new(&case(), Outcome::Pass, String::new());
        want.time_us = 7;
        let mut cmd = Command::new("echo");
        cmd.arg(serde_json::to_string(&want)?);
        assert_eq!(run_in_child(cmd, &case(), Duration::from_secs(5)), want);
        Ok(())
    }
}
