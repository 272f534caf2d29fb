//! The `run` command line a vendor relies on: usage errors, `--list`, `--exclude`,
//! `--fail-fast`, progress, the table's width, the report's meta, output that cannot be
//! written, and `report merge`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use mlx5_conformance::{Outcome, Report};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mlx5-conformance"))
}

fn cli(args: &[&str]) -> Output {
    bin().args(args).output().expect("run the CLI")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mlx5-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A divergence table listing `case` on `profile` (a passing case: the run fails it).
fn table(dir: &Path, profile: &str, case: &str, reason: &str) -> PathBuf {
    let path = dir.join("div.toml");
    let text = format!(
        "[[divergence]]\nbackend = \"sim\"\nprofile = \"{profile}\"\ncase = \"{case}\"\nreason = \"{reason}\"\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn usage_errors_exit_2_with_the_reason() {
    let d = dir("usage");
    let div = table(&d, "cx99", "mkey.zero_create_flags", "r");
    for (args, want) in [
        (vec!["run", "--filter", "no.such.case"], "--filter no.such.case matches no case"),
        (
            vec!["run", "--filter", "mkey.", "--exclude", "nothing.like.this"],
            "--exclude nothing.like.this matches no case",
        ),
        (vec!["run", "--filter", "mkey.max", "--exclude", "mkey."], "leaves no case"),
        (vec!["run", "--profile", "/nonexistent/card.toml"], "profile file not found: /nonexistent/card.toml"),
        (vec!["run", "--profile", "card.toml"], "profile file not found: card.toml"),
        (vec!["run", "--divergences", s(&div)], "profile `cx99` is no shipped profile"),
        (vec!["run", "--timeout", "0"], "not a positive number of seconds"),
        (vec!["report", "merge", "/nonexistent/a.json"], "file not found: /nonexistent/a.json"),
    ] {
        let out = cli(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_divergence_may_name_the_profile_file_of_the_run() {
    let d = dir("fileprof");
    let prof = d.join("mine.toml");
    std::fs::write(&prof, "extends = \"cx6dx\"\nname = \"mine\"\nsummary = \"x\"\n").unwrap();
    let div = table(&d, "mine", "mkey.zero_create_flags", "r");
    let out = cli(&["run", "--profile", s(&prof), "--filter", "mkey.zero", "--divergences", s(&div)]);
    assert_eq!(out.status.code(), Some(1), "the listed case passes, so the run fails: {}", stderr(&out));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn list_prints_the_selected_cases_with_their_items_and_runs_nothing() {
    let out = cli(&["run", "--list", "--filter", "mkey.max", "--filter", "mkey_check.", "--exclude", "fresh"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        "mkey.max_entries_rounding      §12.12\nmkey.max_entries_in_mailbox    §12.12,13\n\
         mkey_check.non_signature_mkey  §12.48\n3 cases\n"
    );
}

#[test]
fn exclude_leaves_cases_out() {
    let out = cli(&["run", "--format", "json", "--filter", "mkey.", "--exclude", "mkey.mkc", "--exclude", "destroy"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Report = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = r.runs[0].cases.iter().map(|c| c.name.as_str()).collect();
    assert!(names.contains(&"mkey.max_entries_rounding"));
    assert!(!names.iter().any(|n| n.contains("mkey.mkc") || n.contains("destroy")), "{names:?}");
}

#[test]
fn fail_fast_stops_at_the_first_failure_and_says_so() {
    let d = dir("failfast");
    let div = table(&d, "cx6dx", "mkey.unknown_create_flag", "a test entry");
    let out = cli(&["run", "--format", "json", "--filter", "mkey.", "--fail-fast", "--divergences", s(&div)]);
    assert_eq!(out.status.code(), Some(1));
    let r: Report = serde_json::from_slice(&out.stdout).unwrap();
    let cases = &r.runs[0].cases;
    assert_eq!(cases.last().map(|c| (c.name.as_str(), c.outcome)), Some(("mkey.unknown_create_flag", Outcome::Fail)));
    assert_eq!(cases.len(), 2, "mkey.zero_create_flags, then the failure");
    let stopped = r.runs[0].stopped.as_deref().unwrap_or_default();
    assert!(stopped.contains("--fail-fast") && stopped.contains("cases not run"), "{stopped}");
    assert!(stderr(&out).contains(stopped));
    // With every profile, the run ends with the first profile's failure.
    let out = cli(&[
        "run",
        "--profile",
        "all",
        "--format",
        "json",
        "--filter",
        "mkey.",
        "--fail-fast",
        "--divergences",
        s(&div),
    ]);
    let r: Report = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r.runs.iter().map(|r| r.profile.clone().unwrap()).collect::<Vec<_>>(), ["cx5", "cx6lx", "cx6dx"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn progress_is_a_line_per_case_on_stderr() {
    let out = cli(&["run", "--progress", "--filter", "mkey.max", "--format", "json"]);
    assert!(out.status.success());
    let err = stderr(&out);
    assert!(err.contains("sim/cx6dx: 2 cases"), "{err}");
    assert!(err.contains("[1/2] sim/cx6dx PASS  mkey.max_entries_rounding ("), "{err}");
    assert!(err.contains("[2/2] sim/cx6dx PASS  mkey.max_entries_in_mailbox ("), "{err}");
    serde_json::from_slice::<Report>(&out.stdout).expect("stdout is the report alone");
    let quiet = cli(&["run", "--filter", "mkey.max", "--format", "json"]);
    assert!(!stderr(&quiet).contains("[1/2]"), "no progress when stderr is no terminal");
}

#[test]
fn the_table_is_at_most_100_columns_and_lists_the_failures_again_at_the_end() {
    let d = dir("table");
    let long = "firmware answers differently here, and this reason is long enough to need wrapping twice \
                over in a table that stays within one hundred columns of text";
    let div = table(&d, "cx6dx", "mkey.every_flag_combination", long);
    let out = cli(&["run", "--profile", "all", "--divergences", s(&div)]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    for line in text.lines() {
        assert!(line.chars().count() <= 100, "{} columns: {line}", line.chars().count());
    }
    let failures = &text[text.find("failures (1):\n").expect("a failures section")..];
    assert!(failures.starts_with("failures (1):\n   sim/cx6dx  mkey.every_flag_combination\n"), "{failures}");
    assert!(failures.contains("firmware answers differently") && failures.contains("one hundred columns"));
    assert!(text.trim_end().lines().last().unwrap().starts_with("total: "), "the total is the last line");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_report_names_the_suite_its_commit_the_host_and_the_time() {
    let out = cli(&["run", "--filter", "mkey.max", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &v["meta"];
    assert_eq!(m["suite"], "mlx5-conformance");
    assert_eq!(m["version"], env!("CARGO_PKG_VERSION"));
    let commit = m["commit"].as_str().unwrap();
    // Built from a git checkout here; "unknown" from a release tarball.
    let in_git = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.git").exists();
    if in_git {
        assert!(commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit()), "{commit}");
    }
    assert!(!m["host"].as_str().unwrap().is_empty());
    let t = m["timestamp"].as_str().unwrap();
    assert!(t.ends_with('Z') && t.len() == 20 && &t[10..11] == "T", "UTC RFC 3339: {t}");
    let out = cli(&["run", "--filter", "mkey.max"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let head = text.lines().next().unwrap();
    assert!(head.starts_with(&format!("mlx5-conformance {}, commit ", env!("CARGO_PKG_VERSION"))), "{head}");
    assert!(head.contains(m["host"].as_str().unwrap()) && head.contains("Z"), "{head}");
}

#[test]
fn stdout_that_cannot_be_written_is_an_error_not_a_panic() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let out = bin().args(["run", "--filter", "mkey.max"]).stdout(Stdio::from(full)).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("cannot write to standard output: No space left on device"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_closed_pipe_ends_the_program_quietly_with_141() {
    for args in [&["run", "--filter", "mkey.max"][..], &["coverage"], &["profiles"], &["run", "--list"]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = bin().args(args).stdout(writer).stderr(Stdio::piped()).output().unwrap();
        assert_eq!(out.status.code(), Some(141), "{args:?}: {}", stderr(&out));
        assert!(out.stderr.is_empty(), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn output_file_gets_the_report_and_no_journal_is_left() {
    let d = dir("output");
    let path = d.join("r.json");
    let out = cli(&["run", "--filter", "mkey.max", "--format", "json", "--output", s(&path)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(r.runs[0].cases.len(), 2);
    let left: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["r.json"]);
    let out = cli(&["run", "--filter", "mkey.max", "--output", "/nonexistent/dir/r.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot write /nonexistent/dir/r.json.partial.jsonl"), "{}", stderr(&out));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn report_merge_puts_runs_of_several_reports_in_one() {
    let d = dir("merge");
    let (a, b) = (d.join("a.json"), d.join("b.json"));
    for (path, profile) in [(&a, "cx5"), (&b, "cx7")] {
        let out = cli(&["run", "--profile", profile, "--filter", "sig.", "--format", "json", "--output", s(path)]);
        assert!(out.status.success());
    }
    let out = cli(&["report", "merge", s(&a), s(&b)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Report = serde_json::from_slice(&out.stdout).unwrap();
    let labels: Vec<_> = r.runs.iter().map(|r| r.profile.clone().unwrap()).collect();
    assert_eq!(labels, ["cx5", "cx7"]);
    assert!(r.runs.iter().all(|run| run.origin.as_ref().is_some_and(|o| o.timestamp.ends_with('Z'))));
    let out = cli(&["report", "merge", s(&a), s(&b), "--format", "table"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("== sim/cx5 ==") && text.contains("== sim/cx7 =="));
    std::fs::write(&a, "not json").unwrap();
    let out = cli(&["report", "merge", s(&a)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("neither a JSON report nor a journal"), "{}", stderr(&out));
    std::fs::remove_dir_all(&d).unwrap();
}
