//! A run survives the card (cargo feature `crash-test`, which adds the case
//! `crash_test.<kind>` to the middle of the selected cases when `MLX5_CONFORMANCE_CRASH_TEST`
//! names a kind): `--isolate` fails a crashing case and goes on; a crash without it leaves
//! every finished case in the journal; a hanging case times out.

use std::path::PathBuf;
use std::process::{Command, Output};

use mlx5_conformance::{Outcome, Report};

fn cli(crash: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mlx5-conformance"))
        .env("MLX5_CONFORMANCE_CRASH_TEST", crash)
        .args(args)
        .output()
        .expect("run the CLI")
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mlx5-crash-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const FILTER: [&str; 6] = ["--filter", "mkey.max", "--filter", "mkey_check.", "--filter", "crash_test"];

fn report(out: &Output) -> Report {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn isolate_fails_a_segfaulting_case_and_the_run_goes_on() {
    for (kind, why) in [("segv", "crashed: signal 11 (SIGSEGV)"), ("abort", "crashed: signal 6 (SIGABRT)")] {
        let out = cli(kind, &[&["run", "--isolate", "--format", "json"][..], &FILTER].concat());
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
        let r = report(&out);
        let cases = &r.runs[0].cases;
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        let crash = format!("crash_test.{kind}");
        assert_eq!(
            names,
            [
                "mkey.max_entries_rounding",
                "mkey.max_entries_in_mailbox",
                &crash,
                "mkey_check.non_signature_mkey",
                "mkey_check.fresh_signature_mkey"
            ]
        );
        let c = &cases[2];
        assert_eq!((c.outcome, c.detail.as_str()), (Outcome::Fail, why));
        assert!(c.expected.is_some() && c.actual.is_some());
        assert!(cases.iter().filter(|c| c.name != crash).all(|c| c.outcome == Outcome::Pass), "{cases:#?}");
    }
}

#[test]
fn a_crash_without_isolate_leaves_every_finished_case_on_disk() {
    let d = dir("journal");
    let output = d.join("r.json");
    let out = cli("abort", &[&["run", "--format", "json", "--output", output.to_str().unwrap()][..], &FILTER].concat());
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&out.status), Some(6), "the run died of the crash");
    assert!(!output.exists(), "no final report");
    let journal = d.join("r.json.partial.jsonl");
    let out = cli("", &["report", "merge", journal.to_str().unwrap(), "--format", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = report(&out);
    let names: Vec<&str> = r.runs[0].cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["mkey.max_entries_rounding", "mkey.max_entries_in_mailbox"]);
    assert_eq!(r.runs[0].summary.passed, 2);
    assert_eq!(r.runs[0].profile.as_deref(), Some("cx6dx"));
    assert!(r.runs[0].origin.as_ref().is_some_and(|m| m.timestamp.ends_with('Z')));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_hanging_case_times_out_in_process_and_isolated() {
    for isolate in [false, true] {
        let mut args = vec!["run", "--timeout", "1", "--format", "json"];
        if isolate {
            args.push("--isolate");
        }
        let start = std::time::Instant::now();
        let out = cli("hang", &[&args[..], &FILTER].concat());
        assert!(start.elapsed().as_secs() < 10, "isolate {isolate}: the run waited for the hung case");
        assert_eq!(out.status.code(), Some(1));
        let r = report(&out);
        let c = r.runs[0].cases.iter().find(|c| c.name == "crash_test.hang").unwrap();
        assert_eq!((c.outcome, c.detail.as_str()), (Outcome::Fail, "timed out after 1 s"), "isolate {isolate}");
        assert_eq!(r.runs[0].summary.passed, 4, "isolate {isolate}: the run went on");
    }
}

#[test]
fn the_crash_case_is_absent_unless_asked_for() {
    let out = cli("", &["run", "--list"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("crash_test"));
}
