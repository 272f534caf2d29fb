//! `qualify` without a card, and `replay-bundle` on a bundle of the simulator's own: no
//! difference, then a verdict and a trace that differ, then a bundle that cannot be read.
//! (`qualify` on a card, over the C ABI, is in capi/tests/run.sh.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mlx5-conformance")).args(args).output().expect("run the CLI")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mlx5-bundle-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// True if this host shows an mlx5 RDMA device in sysfs.
fn host_has_mlx5() -> bool {
    std::fs::read_dir("/sys/class/infiniband")
        .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("mlx5")))
        .unwrap_or(false)
}

#[test]
fn qualify_without_a_card_exits_3_with_the_reason_and_writes_nothing() {
    if host_has_mlx5() && cfg!(feature = "hw") {
        return; // On a lab machine this would qualify the card.
    }
    let d = dir("nocard");
    let bundle = d.join("bundle");
    let out = cli(&["qualify", "--output", s(&bundle)]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let reason = if cfg!(feature = "hw") {
        "no mlx5 device found"
    } else {
        "this mlx5-conformance was built without the hw backend"
    };
    let err = text(&out.stderr);
    assert!(err.starts_with("mlx5-conformance: qualify: no device to qualify ("), "{err}");
    assert!(err.contains(reason), "{err}");
    assert!(out.stdout.is_empty());
    assert!(!bundle.exists(), "a bundle without a card");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A bundle as `qualify` writes one, made on the simulator: the report and traces of two
/// cases on cx6dx, and a profile file that is cx6dx.
fn sim_bundle(d: &Path) -> PathBuf {
    let b = d.join("bundle");
    std::fs::create_dir_all(b.join("traces")).unwrap();
    let filter = ["--filter", "mkey.max_entries"];
    let report = b.join("report.json");
    let out = cli(&[&["run", "--format", "json", "--output", s(&report)][..], &filter].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rec = d.join("rec");
    let out = cli(&[&["run", "--record", s(&rec)][..], &filter].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    for e in std::fs::read_dir(rec.join("sim/cx6dx")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, b.join("traces").join(p.file_name().unwrap())).unwrap();
    }
    std::fs::write(b.join("profile.toml"), "extends = \"cx6dx\"\nname = \"card\"\nsummary = \"a card\"\n").unwrap();
    b
}

#[test]
fn replay_bundle_prints_where_the_card_and_the_simulator_differ() {
    let d = dir("replay");
    let b = sim_bundle(&d);
    let out = cli(&["replay-bundle", s(&b)]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "no difference: the simulator with profile.toml (card) agrees with the card on 2 cases and 2 traces\n"
    );

    // The card failed a case the simulator passes.
    let report = b.join("report.json");
    let json = std::fs::read_to_string(&report).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let case = v["runs"][0]["cases"][0]["name"].as_str().unwrap().to_string();
    v["runs"][0]["cases"][0]["outcome"] = "fail".into();
    v["runs"][0]["cases"][0]["detail"] = "errno: expected 0, got 22".into();
    std::fs::write(&report, v.to_string()).unwrap();
    // And the card answered a call of the other case otherwise.
    let other = v["runs"][0]["cases"][1]["name"].as_str().unwrap().to_string();
    let trace = b.join("traces").join(format!("{other}.jsonl"));
    let t = std::fs::read_to_string(&trace).unwrap();
    let changed = t.replacen(r#""max_entries":8"#, r#""max_entries":16"#, 1);
    assert_ne!(changed, t, "the trace has an mkey of 8 entries");
    std::fs::write(&trace, changed).unwrap();

    let out = cli(&["replay-bundle", s(&b)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("{case}\n  verdict: card FAIL (errno: expected 0, got 22), simulator PASS\n")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("{other}\n  trace: first divergence at call #")), "{stdout}");
    assert!(stdout.contains("    card:      ") && stdout.contains("    simulator: "), "{stdout}");
    assert!(
        stdout.ends_with("2 of 2 cases differ between the card and the simulator with profile.toml (card)\n"),
        "{stdout}"
    );

    // A bundle without its profile cannot be replayed.
    std::fs::remove_file(b.join("profile.toml")).unwrap();
    let out = cli(&["replay-bundle", s(&b)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no profile.toml"), "{}", text(&out.stderr));
    let out = cli(&["replay-bundle", s(&d.join("nothing"))]);
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&d).unwrap();
}
