//! `discover --two-processes`: network scenarios with the requester and the responder each in
//! a process of its own on the RoCE v2 fabric (127.0.0.0/8), judged by the reference model.
//! A responder whose network drops every acknowledgement, which the model is not told of,
//! must be caught and its scenario shrunk.

use std::process::{Command, Output};

fn discover(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mlx5-conformance"))
        .args(["discover", "--two-processes", "--profile", "cx6dx"])
        .args(args)
        .output()
        .expect("run the CLI")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn the_two_processes_agree_with_the_model() {
    let o = discover(&["--cases", "12", "--seed", "3", "--address", "127.0.212.1"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("12 network scenarios across two processes (127.0.212.1 and 127.0.213.1)"), "{t}");
    assert!(t.contains("the backends agree with the model"), "{t}");
}

#[test]
fn a_network_that_loses_every_acknowledgement_is_caught_and_shrunk() {
    let out = std::env::temp_dir().join(format!("mlx5-discover-two-{}.jsonl", std::process::id()));
    let o = discover(&[
        "--cases",
        "8",
        "--address",
        "127.0.216.1",
        "--peer-faults",
        "drop,opcode=0x11,times=always",
        "--output",
        out.to_str().unwrap_or_default(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    // IBV_WC_RETRY_EXC_ERR (12) where the model expects success, for one message of one byte.
    assert!(t.contains("status: 12"), "{t}");
    assert!(t.contains("shrunk to: NetOp") && t.contains("n: 1,") && t.contains("len: 1 }"), "{t}");
    assert!(t.contains("in one process it agrees with the model: no trace"), "{t}");
    assert!(!out.exists(), "no trace is written for a disagreement one process cannot show");
}

#[test]
fn addresses_off_loopback_are_refused() {
    let o = discover(&["--cases", "1", "--address", "198.51.100.1"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("198.51.100.1 is not a loopback address"), "{t}");
}
