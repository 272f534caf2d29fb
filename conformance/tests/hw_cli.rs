//! `run --backend hw` as a qualification run sees it on a host without an mlx5 device (CI),
//! with and without the hw backend compiled in.

use std::process::{Command, Output};

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mlx5-conformance")).args(args).output().expect("run the CLI")
}

/// True if this host shows an mlx5 RDMA device in sysfs.
fn host_has_mlx5() -> bool {
    std::fs::read_dir("/sys/class/infiniband")
        .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("mlx5")))
        .unwrap_or(false)
}

/// Every case is a skip whose reason starts with `reason`; never a pass.
fn assert_all_skipped(out: &Output, reason: &str) {
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &v["runs"][0];
    assert_eq!(run["backend"], "hw");
    let cases = run["cases"].as_array().unwrap();
    assert_eq!(cases.len(), mlx5_conformance::suite().len());
    for c in cases {
        assert_eq!(c["outcome"], "skip", "{c}");
        assert!(c["detail"].as_str().unwrap().starts_with(reason), "{c}");
    }
    assert_eq!(run["summary"]["passed"], 0);
}

#[test]
fn without_a_device_every_case_is_skipped_and_require_device_fails() {
    if host_has_mlx5() && cfg!(feature = "hw") {
        return; // On a lab machine this is the qualification run itself.
    }
    let reason = if cfg!(feature = "hw") {
        "no mlx5 device found"
    } else {
        "this mlx5-conformance was built without the hw backend"
    };
    assert_all_skipped(&cli(&["run", "--backend", "hw", "--format", "json"]), reason);
    let out = cli(&["run", "--backend", "hw", "--require-device"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--require-device") && err.contains(reason), "{err}");
    let out = cli(&["profile", "--backend", "hw"]);
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn hw_takes_no_simulator_profile() {
    let out = cli(&["run", "--backend", "hw", "--profile", "cx7"]);
    assert_eq!(out.status.code(), Some(2));
    let out = cli(&["profile", "--backend", "sim"]);
    assert_eq!(out.status.code(), Some(2));
}
