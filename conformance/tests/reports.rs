//! The reports and the CLI: snapshots of the simulator's table (one per profile) and JSON,
//! JUnit that records skips as skips, exit statuses, and coverage.

use std::path::Path;
use std::process::Command;

use mlx5_conformance::{Outcome, Report, Target, coverage, run_target, suite};
use mlx5_sim::{Profile, ShippedProfiles};
use rstest::rstest;

fn report_for(profiles: &[&str]) -> Report {
    Report::new(profiles.iter().map(|p| run_target(&Target::sim(Profile::builtin(p).unwrap()), &suite())).collect())
}

/// The table's first lines (suite, commit, host, time) vary from run to run.
const TABLE_HEADER: (&str, &str) = (r"^mlx5-conformance [^\n]*\n(  [^\n]*\n)*", "[suite, commit, host, time]\n");

fn cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mlx5-conformance")).args(args).output().expect("run the CLI")
}

/// One snapshot per shipped profile, so a change on one profile is a diff in its own file.
#[rstest]
#[case::cx5("cx5")]
#[case::cx6lx("cx6lx")]
#[case::cx6dx("cx6dx")]
#[case::cx6dx_no_update_tag("cx6dx-no-update-tag")]
#[case::cx6dx_no_devx("cx6dx-no-devx")]
#[case::cx6dx_single_block("cx6dx-single-block")]
#[case::cx7("cx7")]
#[case::bf3("bf3")]
#[case::cx6dx_rdma_core_44("cx6dx-rdma-core-44")]
fn run_table_on_each_profile(#[case] profile: &str) {
    insta::with_settings!({ filters => vec![TABLE_HEADER] }, {
        insta::assert_snapshot!(format!("report_{profile}"), report_for(&[profile]).to_table());
    });
}

#[test]
fn every_shipped_profile_has_a_table_snapshot() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    for p in Profile::builtin_names() {
        let snap = dir.join(format!("reports__report_{p}.snap"));
        assert!(snap.exists(), "no {}: add a #[case] for {p} to run_table_on_each_profile", snap.display());
    }
}

#[test]
fn the_all_profiles_table_is_the_profile_tables_in_order() {
    let names = Profile::builtin_names();
    let all = report_for(&names);
    let body = |t: &str| t[t.find("\n\n").unwrap() + 2..t.rfind("total: ").unwrap()].to_string();
    let want: String = names.iter().map(|p| body(&report_for(&[p]).to_table())).collect();
    let table = all.to_table();
    assert_eq!(body(&table), want);
    assert!(table.ends_with(&format!("total: {}\n", all.summary().line())));
}

#[test]
fn run_json_on_cx6dx() {
    let json: serde_json::Value = serde_json::from_str(&report_for(&["cx6dx"]).to_json().unwrap()).unwrap();
    insta::assert_json_snapshot!("run_json_cx6dx", json, {
        ".meta.commit" => "[commit]",
        ".meta.host" => "[host]",
        ".meta.timestamp" => "[timestamp]",
        ".runs[].cases[].time_us" => "[time]",
    });
}

#[test]
fn json_has_the_shape_outside_tools_read() {
    let report = report_for(&["cx5"]);
    let v: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
    for k in ["suite", "version", "commit", "host", "timestamp"] {
        assert!(v["meta"][k].is_string(), "meta.{k}");
    }
    let run = &v["runs"][0];
    assert_eq!(run["backend"], "sim");
    assert_eq!(run["profile"], "cx5");
    for c in run["cases"].as_array().unwrap() {
        assert!(c["name"].is_string() && c["covers"].is_array() && c["detail"].is_string());
        assert!(["pass", "fail", "skip"].contains(&c["outcome"].as_str().unwrap()));
    }
    let back: Report = serde_json::from_value(v).unwrap();
    assert_eq!(back, report);
}

#[test]
fn junit_records_skips_as_skipped() {
    let report = report_for(&["cx6lx", "cx7"]);
    let parsed = quick_junit::Report::deserialize_from_str(&report.to_junit().unwrap()).unwrap();
    assert_eq!(parsed.test_suites.len(), 2);
    let s = report.summary();
    assert_eq!(parsed.tests, s.passed + s.failed + s.skipped);
    let skipped: usize = parsed.test_suites.iter().map(|t| t.skipped).sum();
    assert_eq!(skipped, s.skipped);
    assert!(skipped > 0, "cx6lx lacks signature offload, so some cases skip");
    assert_eq!(parsed.failures, 0);
}

#[test]
fn cli_run_all_profiles_exits_zero_and_prints_totals() {
    let out = cli(&["run", "--backend", "sim", "--profile", "all", "--format", "table"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    for p in Profile::builtin_names() {
        assert!(text.contains(&format!("== sim/{p} ==")), "{p} missing");
    }
    assert!(text.contains("total: ") && text.contains(" 0 failed"));
}

#[test]
fn cli_writes_json_and_junit_to_files() {
    let dir = std::env::temp_dir().join(format!("mlx5-conformance-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let out = cli(&["run", "--profile", "cx7", "--format", "json", "--output", json.to_str().unwrap()]);
    assert!(out.status.success());
    let r: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.runs[0].profile.as_deref(), Some("cx7"));
    assert!(r.runs[0].cases.iter().all(|c| c.outcome != Outcome::Fail));
    let xml = dir.join("r.xml");
    let out = cli(&["run", "--profile", "cx7", "--format", "junit", "--output", xml.to_str().unwrap()]);
    assert!(out.status.success());
    quick_junit::Report::deserialize_from_str(&std::fs::read_to_string(&xml).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cli_rejects_an_unknown_profile_with_the_list_of_known_ones() {
    let out = cli(&["run", "--profile", "cx99"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("cx99") && err.contains("cx6dx"), "{err}");
}

#[test]
fn cli_reads_a_profile_file() {
    let dir = std::env::temp_dir().join(format!("mlx5-conformance-prof-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mine.toml");
    std::fs::write(&path, "extends = \"cx6dx\"\nname = \"mine\"\nsummary = \"x\"\n[kernel]\nmkey_update_tag = false\n")
        .unwrap();
    let out = cli(&["run", "--profile", path.to_str().unwrap(), "--format", "json", "--filter", "update_tag"]);
    assert!(out.status.success());
    let r: Report = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r.runs[0].profile.as_deref(), Some("mine"));
    assert_eq!(r.runs[0].cases.len(), 1);
    assert_eq!(r.runs[0].cases[0].outcome, Outcome::Pass);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn coverage_lists_the_items_the_suite_promises() {
    let cases = suite();
    let rows = coverage(&cases);
    assert_eq!(rows.len(), mlx5_conformance::spec::ITEMS.len());
    for (n, _, by) in &rows {
        assert!(!by.is_empty(), "§12.{n} uncovered");
    }
    let out = cli(&["coverage"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("mkey.max_entries_rounding"));
}

#[test]
fn every_case_names_real_items_and_has_a_unique_name() {
    let cases = suite();
    let mut names: Vec<_> = cases.iter().map(|c| c.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), cases.len(), "duplicate case names");
    for c in &cases {
        for n in c.covers {
            assert!(mlx5_conformance::spec::title(*n).is_some(), "{} covers unknown §12.{n}", c.name);
        }
    }
}

#[test]
fn cli_lists_profiles_with_the_default() {
    let out = cli(&["profiles"]);
    let text = String::from_utf8(out.stdout).unwrap();
    for p in Profile::builtin_names() {
        assert!(text.contains(p));
    }
    assert!(text.contains(&format!("default: {}", mlx5_sim::DEFAULT_PROFILE)));
}

#[test]
fn cli_a_listed_divergence_that_passes_fails_the_run() {
    let dir = std::env::temp_dir().join(format!("mlx5-conformance-div-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let table = |profile: &str| {
        format!(
            "[[divergence]]\nbackend = \"sim\"\nprofile = \"{profile}\"\ncase = \"mkey.zero_create_flags\"\n\
             reason = \"a test entry\"\n"
        )
    };
    let path = dir.join("div.toml");
    let run = |path: &std::path::Path| {
        let args = ["run", "--format", "json", "--filter", "mkey.zero_create_flags", "--divergences"];
        cli(&[&args[..], &[path.to_str().unwrap()]].concat())
    };
    std::fs::write(&path, table("cx6dx")).unwrap();
    let out = run(&path);
    assert_eq!(out.status.code(), Some(1));
    let r: Report = serde_json::from_slice(&out.stdout).unwrap();
    let case = &r.runs[0].cases[0];
    assert_eq!(case.outcome, Outcome::Fail);
    assert!(case.detail.contains("a test entry") && case.detail.contains("remove it"), "{}", case.detail);
    // The entry names another profile: the default profile's run is untouched.
    std::fs::write(&path, table("cx7")).unwrap();
    let out = run(&path);
    assert!(out.status.success());
    let r: Report = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r.runs[0].cases[0].outcome, Outcome::Pass);
    // A table naming no real case is a usage error.
    std::fs::write(&path, "[[divergence]]\nbackend = \"sim\"\ncase = \"mkey.nope\"\nreason = \"r\"\n").unwrap();
    let out = run(&path);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("mkey.nope") && err.contains("no such case"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
